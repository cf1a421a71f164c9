#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The text_poke_batch_applied trace event, read from the trace buffer as
# trace-cmd or perf would: two flips of the bench's 56-site key are two
# batches of 56 sites in 3 sync rounds each with text_poke_batch=rust, 112
# batches of one site with serial.
t=/sys/kernel/tracing
b=/sys/kernel/debug/text_poke_bench/run
m=/sys/kernel/debug/text_poke_batch/mode

. /tests/cases.inc
plan 2

rc=0
[ -d $t/events ] || mount -t tracefs nodev $t
for mode in rust serial; do
	c=trace_batch_events_$mode
	if ! echo $mode > $m || ! echo 1 > $t/events/text_poke_batch/text_poke_batch_applied/enable; then
		fail $c "cannot switch to $mode or enable the event"
		continue
	fi
	: > $t/trace
	why=
	echo "flip 56 2" > $b || why="the flips failed; "
	echo 0 > $t/events/text_poke_batch/text_poke_batch_applied/enable
	case $mode in
	rust) want="sites=56 syncs=3" n=2 ;;
	*) want="sites=1 syncs=3" n=112 ;;
	esac
	got=$(grep -c "text_poke_batch_applied: $want ipis=[0-9]* ns=[1-9]" $t/trace)
	if [ -z "$why" ] && [ "$got" -ge $n ]; then
		ok $c
	else
		fail $c "$why$got events '$want' in the trace buffer, not $n: $(grep -m2 text_poke_batch_applied $t/trace)"
	fi
done
echo rust > $m
exit $rc

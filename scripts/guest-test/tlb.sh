#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Kernel TLB flushes deferred to isolated CPUs in user space (CPUs 2-3, as
# in defer.sh). A vmalloc/vfree storm on a housekeeping CPU, with
# deferral off and on in the same boot: the isolated CPUs running
# user-space loops take function-call IPIs (CAL: x86 sends kernel range
# flushes as function calls) with it off and none with it on. Then the
# stale-mapping test: a task on each isolated CPU reads a vmalloc buffer in
# the kernel, spins in user space while CPU 0 frees it and reuses its
# address with new contents and new pages, and reads it again: it must see
# the new contents (through a stale TLB entry it would see the old).
b=/sys/kernel/debug/text_poke_bench/run
dt=/sys/kernel/debug/text_poke/defer_tlb
st=/sys/kernel/debug/text_poke/stats
iso="2 3"

ok() { echo "@@ case $1 ok"; }
fail() { echo "@@ case $1 FAILED: $2"; rc=1; }
stat() { sed -n "s/^$1 //p" $st; }
# The count of line $1 of /proc/interrupts (CAL, TLB) of CPU $2.
irq() { awk -v l="$1:" -v c="$2" '$1 == l { print $(c + 2) }' /proc/interrupts; }
counts() { for c in $iso; do printf '%s/%s ' "$(irq CAL $c)" "$(irq TLB $c)"; done; }

rc=0
for f in $b $dt /demo/spin /demo/syscalls; do
	if [ ! -e $f ]; then
		echo "@@ error tlb: $f missing (CONFIG_TLB_FLUSH_DEFER_RS or the bench off?)"
		exit 1
	fi
done

t=tlb_defer_switch_bad_input
was=$(cat $dt)
if echo sometimes > $dt 2>/dev/null || [ "$(cat $dt)" != "$was" ]; then
	fail $t "'sometimes' was accepted"
else
	ok $t
fi

pairs=1000
for mode in off on; do
	t=tlb_vmalloc_storm_$mode
	echo $mode > $dt || { fail $t "cannot switch TLB deferral $mode"; continue; }
	loops=
	for c in $iso; do
		taskset -c $c /demo/spin &
		loops="$loops $!"
	done
	sleep 1
	before=$(counts)
	d0=$(stat tlb_deferred)
	echo "vstorm $pairs" > $b || fail $t "the storm failed"
	after=$(counts)
	d1=$(stat tlb_deferred)
	kill $loops
	wait 2>/dev/null
	why=
	set -- $before
	for x in $after; do
		cal=$((${x%/*} - ${1%/*}))
		shift
		if [ $mode = off ]; then
			[ $cal -gt 0 ] || why="$why; an isolated CPU took no IPI with deferral off"
		else
			[ $cal = 0 ] || why="$why; an isolated CPU took $cal IPIs"
		fi
	done
	[ $mode = off ] || [ $((d1 - d0)) -gt 0 ] || why="$why; no flush was deferred"
	echo "@@ info $t pairs=$pairs cal/tlb_before=$before cal/tlb_after=$after tlb_deferred=$((d1 - d0))"
	if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi
done

# The stale-mapping test, on each isolated CPU, deferral on.
t=tlb_no_stale_mapping
echo on > $dt
why=
for c in $iso; do
	done_=
	for spins in 2000000 8000000; do
		out=$(mktemp)
		taskset -c $c /demo/syscalls vcheck $b $spins > $out &
		pid=$!
		sleep 1
		echo vreuse > $b 2>/dev/null
		reuse=$?
		wait $pid || { why="$why; CPU $c: vread or vcheck failed"; break; }
		reused=$(sed -n 's/^reused //p' $out)
		stale=$(sed -n 's/^stale //p' $out)
		rm -f $out
		# Not reused in time: the address was not given back, or the
		# program read before the reuse; try longer.
		[ "$reuse" = 0 ] && [ "$reused" = 1 ] || continue
		[ "$stale" = 0 ] || why="$why; CPU $c read the old contents through a stale mapping"
		done_=1
		break
	done
	[ -n "$done_" ] || why="$why; CPU $c: the address was never reused in time"
done
if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi
exit $rc

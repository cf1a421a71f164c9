#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Upstream's users of the text-poke batch, driven from user space with
# text_poke_batch=rust, each through the interface a kernel user has: an
# optimized kprobe (kprobe_events, a JMP written over the probed
# instructions), the function tracer on one function and on two, and BPF
# tail calls through a JMP the JIT patches (bpf_arch_text_poke()). Each
# must be written by the Rust batch (counted in text_poke_batch/stats), take
# effect (probe and tracer hits, the program tail-called) and undo
# cleanly. Static calls are tested in KUnit
# (text_poke_batch.static_calls_are_written_by_the_batch: this kernel
# updates none from user space); runtime alternatives are applied at
# boot only, before the batch serves anyone.
t=/sys/kernel/tracing
m=/sys/kernel/debug/text_poke_batch/mode

. /tests/cases.inc
plan 4

rc=0
[ -d $t/events ] || mount -t tracefs nodev $t
echo rust > $m || error "cannot switch to text_poke_batch=rust"
# Enabling an event records the comms and tgids of the tasks it sees by
# flipping three sched tracepoint keys: off, so that the counts below are
# the users' own.
echo 0 > $t/options/record-cmd
echo 0 > $t/options/record-tgid

# Counter $1 of text_poke_batch/stats.
st() { awk -v k="$1" '$1 == k { print $2 }' /sys/kernel/debug/text_poke_batch/stats; }
# Starts counting batches, their sync rounds and the sites they write.
# Prints "B S E": batches since batches_start, sync rounds beyond three a
# batch (0 when every batch took three rounds or fewer), sites written.
batches_start() {
	b0=$(st batches)
	s0=$(st syncs)
	e0=$(st entries)
}
batches_stop() {
	b=$(($(st batches) - b0))
	s=$(($(st syncs) - s0))
	extra=$((s - 3 * b))
	[ $extra -gt 0 ] || extra=0
	echo "$b $extra $(($(st entries) - e0))"
}

# An optimized kprobe: a probe at an instruction boundary inside
# vfs_read() (at its entry it would ride on ftrace), enabled, is
# optimized into a JMP to a detour buffer by a batch, a few ticks and an
# RCU-tasks grace period after it is marked OPTIMIZED (arming its INT3
# before is a single write with a sync of its own). Probe hits must be
# counted once it is optimized, and disabling it unoptimizes it (single
# writes again).
c=batch_user_optprobe
ke=$t/kprobe_events
kl=/sys/kernel/debug/kprobes/list
why="no offset of vfs_read() could be optimized"
for off in 4 5 6 7 8 9 10 11 12 13 14 15 16; do
	echo "p:jlrs/opt vfs_read+$off" > $ke 2>/dev/null || continue
	batches_start
	echo 1 > $t/events/jlrs/opt/enable
	i=0
	while ! grep -q "vfs_read+0x.*OPTIMIZED" $kl && [ $i -lt 30 ]; do
		sleep 0.2
		i=$((i + 1))
	done
	# The optimizer's batch.
	while [ "$(st batches)" = "$b0" ] && [ $i -lt 150 ]; do
		sleep 0.2
		i=$((i + 1))
	done
	set -- $(batches_stop)
	if ! grep -q "vfs_read+0x.*OPTIMIZED" $kl; then
		echo 0 > $t/events/jlrs/opt/enable
		echo "-:jlrs/opt" >> $ke
		continue
	fi
	why=
	[ "$1" -ge 1 ] || why="$why; no batch optimized the probe"
	before=$(awk '$1 == "opt" { print $2 }' $t/kprobe_profile)
	cat /proc/version /proc/cmdline > /dev/null
	after=$(awk '$1 == "opt" { print $2 }' $t/kprobe_profile)
	[ "$after" -gt "$before" ] 2>/dev/null ||
		why="$why; the optimized probe counted no hit ($before, then $after)"
	echo 0 > $t/events/jlrs/opt/enable
	i=0
	while grep -q "vfs_read+0x.*OPTIMIZED" $kl && [ $i -lt 30 ]; do
		sleep 0.2
		i=$((i + 1))
	done
	grep -q "vfs_read+0x.*OPTIMIZED" $kl && why="$why; still optimized after it was disabled"
	echo "-:jlrs/opt" >> $ke || why="$why; cannot remove the probe"
	why="${why#; }"
	break
done
if [ -z "$why" ]; then ok $c; else fail $c "$why (vfs_read+$off)"; fi

# The function tracer on one function, then on two: each function's call
# site (a NOP at its entry) becomes a call into ftrace, and back. Starting
# and stopping the tracer writes more (its trampolines, the sched keys of
# comm recording): the second function must add two sites written at
# least, one each way, and the tracer must see the calls.
c=batch_user_ftrace
why=
# tracer FUNCTIONS...: the function tracer on FUNCTIONS and off again;
# sets ts and te to the batches' "S" and "E" (see batches_stop). Not run
# in a subshell: what goes wrong goes to $why.
tracer() {
	echo "$*" > $t/set_ftrace_filter || why="$why; cannot filter on $*"
	batches_start
	echo function > $t/current_tracer || why="$why; cannot start the function tracer"
	cat /proc/version > /dev/null
	echo hello > /tmp/ftrace_write
	# Read before the tracer goes: changing the tracer empties the buffer.
	for f in "$@"; do
		grep -q " $f <-" $t/trace || why="$why; the tracer on $* saw no call of $f"
	done
	echo nop > $t/current_tracer
	set -- $(batches_stop)
	ts=$2 te=$3
	echo > $t/set_ftrace_filter
}
tracer vfs_read
one=$te
[ "$ts" = 0 ] || why="$why; $ts sync rounds more than 3 a batch"
tracer vfs_read vfs_write
[ "$ts" = 0 ] || why="$why; $ts sync rounds more than 3 a batch"
[ $((te - one)) -ge 2 ] ||
	why="$why; the tracer on vfs_read wrote $one sites, on vfs_read and vfs_write $te, not 2 more"
if [ -z "$why" ]; then ok $c; else fail $c "${why#; }"; fi
: > $t/trace

# BPF: /demo/bpf_tail fills and empties a program array's slot that a
# program tail-calls with a constant index: each change rewrites the
# JIT's direct JMP (bpf_arch_text_poke(), one batch or more), and the
# program must then run the new way.
c=batch_user_bpf
n=20
batches_start
out=$(/demo/bpf_tail $n)
ret=$?
set -- $(batches_stop)
if [ $ret = 0 ] && [ "$out" = "tail calls $n wrong 0" ] && [ "$1" -ge $((2 * n)) ]; then
	ok $c
else
	fail $c "exit $ret, '$out', $1 batches for $((2 * n)) changes of the slot"
fi

echo 1 > $t/options/record-cmd
echo 1 > $t/options/record-tgid
no_warning batch_users_no_warning
exit $rc

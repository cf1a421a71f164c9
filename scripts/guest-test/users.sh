#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Upstream's users of the text-poke batch, driven from user space with
# text_poke=rust, each through the interface a kernel user has: an
# optimized kprobe (kprobe_events, a JMP written over the probed
# instructions), the function tracer on one function, and BPF tail calls
# through a JMP the JIT patches (bpf_arch_text_poke()). Each must be
# written by the Rust batch (counted in text_poke/stats), take effect
# (probe and tracer hits, the program tail-called) and undo cleanly. Static calls are tested in
# KUnit (text_poke_rs.static_calls_are_written_by_the_batch: this kernel
# updates none from user space); runtime alternatives are applied at boot
# only, before the batch serves anyone.
t=/sys/kernel/tracing
m=/sys/kernel/debug/text_poke/mode

. /tests/cases.inc

rc=0
[ -d $t/events ] || mount -t tracefs nodev $t
echo rust > $m || fail batch_users "cannot switch to text_poke=rust"

# Counter $1 of text_poke/stats.
st() { awk -v k="$1" '$1 == k { print $2 }' /sys/kernel/debug/text_poke/stats; }
# Starts counting batches and their sync rounds.
batches_start() {
	b0=$(st batches)
	s0=$(st syncs)
}
# Prints "B S": batches since batches_start, and sync rounds beyond three
# a batch (0 when every batch took three rounds or fewer).
batches_stop() {
	b=$(($(st batches) - b0))
	s=$(($(st syncs) - s0))
	extra=$((s - 3 * b))
	[ $extra -gt 0 ] || extra=0
	echo "$b $extra"
}

# An optimized kprobe: a probe at an instruction boundary inside
# vfs_read() (at its entry it would ride on ftrace), enabled, is
# optimized into a JMP to a detour buffer after a few ticks. Probe hits
# must be counted while it is optimized, and disabling it unoptimizes it.
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
	if ! grep -q "vfs_read+0x.*OPTIMIZED" $kl; then
		echo 0 > $t/events/jlrs/opt/enable
		echo "-:jlrs/opt" >> $ke
		batches_stop > /dev/null
		continue
	fi
	why=
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
	set -- $(batches_stop)
	# Optimizing and unoptimizing: two batches at least. (Arming and
	# disarming the INT3 are single writes with a sync of their own.)
	[ "$1" -ge 2 ] || why="$why; $1 batches while optimizing and unoptimizing, not 2 or more"
	why="${why#; }"
	break
done
if [ -z "$why" ]; then ok $c; else fail $c "$why (vfs_read+$off)"; fi

# The function tracer on one function: its call site (a NOP at the
# function's entry) becomes a call into ftrace, and back.
c=batch_user_ftrace
why=
echo vfs_read > $t/set_ftrace_filter || why="$why; cannot filter on vfs_read"
batches_start
echo function > $t/current_tracer || why="$why; cannot start the function tracer"
cat /proc/version > /dev/null
# Read before the tracer goes: changing the tracer empties the buffer.
grep -q ' vfs_read <-' $t/trace || why="$why; the tracer saw no call of vfs_read"
echo nop > $t/current_tracer
set -- $(batches_stop)
echo > $t/set_ftrace_filter
[ "$1" -ge 2 ] || why="$why; $1 batches for the tracer on and off, not 2 or more"
[ "$2" = 0 ] || why="$why; $2 of $1 batches not in 3 rounds"
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

no_warning batch_users_no_warning
exit $rc

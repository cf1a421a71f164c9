#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# CPU hotplug torture: CPUs 1-3 go offline and online, five times each,
# while CPU 0 flips keys over and over, one key at a time and eight keys in
# a transaction, and drains the other CPUs' LRU batches between flips, and
# tasks on the isolated CPUs 2-3 run user-space loops whenever their CPU is
# online, so that rounds are deferred to them (and their work pending when
# they go). The bench checks every site on CPU 0 after every flip; after
# the torture each isolated CPU runs every site of the single key; every
# sync and flush added to an isolated CPU's word was run at one of its
# entries (the audit of CONFIG_CONTEXT_TRACKING_WORK_DEBUG); the kernel log
# has no warning. The guest boots with nohz_full=2-3.
b=/sys/kernel/debug/text_poke_bench/run
st=/sys/kernel/debug/text_poke_batch/stats
cst=/sys/kernel/debug/context_tracking_work/stats
d=/sys/kernel/debug/context_tracking_work/sync_core
iso="2 3"

. /tests/cases.inc
plan 2
fig() { sed -n "s/^$1 //p" $b; }
stat() { cat $st $cst | sed -n "s/^$1 //p"; }

rc=0
for f in $b $st $d /demo/spin /sys/devices/system/cpu/cpu3/online; do
	[ -e $f ] || error "$f missing (the bench, deferral or CONFIG_HOTPLUG_CPU off?)"
done
echo rust > /sys/kernel/debug/text_poke_batch/mode
echo on > $d

t=hotplug_flips_drains_deferral
why=
lost0=$(stat lost_at_entry)
d0=$(stat deferred)
for c in $iso; do
	taskset -c $c /demo/spin &
	eval "pid_$c=\$!"
done
stop=/tmp/hotplug.stop
log=/tmp/hotplug.flips
rm -f $stop $log
# CPU 0: a flip of a key of 56 sites (ten, back to where it was), one of
# the eight-key transaction (twice), a drain of every CPU's LRU batches;
# until told to stop. The bench says how many sites took the wrong
# direction after each flip: any is a failure, and ends the loop.
taskset -c 0 sh -c "
	n=0
	while [ ! -e $stop ]; do
		echo 'flip 56 10' > $b || { echo 'flip 56 10 failed' >> $log; exit 1; }
		w=\$(sed -n 's/^wrong //p' $b)
		[ \"\$w\" = 0 ] || { echo \"flip 56: \$w sites wrong\" >> $log; exit 1; }
		echo 'txn 2' > $b || { echo 'txn 2 failed' >> $log; exit 1; }
		w=\$(sed -n 's/^wrong //p' $b)
		[ \"\$w\" = 0 ] || { echo \"txn: \$w sites wrong\" >> $log; exit 1; }
		echo 'lrudrain 1' > $b || { echo 'lrudrain 1 failed' >> $log; exit 1; }
		n=\$((n + 1))
	done
	echo \"loops \$n\" >> $log" &
flipper=$!
sleep 1
cycles=0
for i in 1 2 3 4 5; do
	for c in 1 2 3; do
		echo 0 > /sys/devices/system/cpu/cpu$c/online || why="$why; cpu$c did not go offline"
		echo 1 > /sys/devices/system/cpu/cpu$c/online || why="$why; cpu$c did not come back"
		# An isolated CPU's task was moved away when it went: back to it.
		case " $iso " in *" $c "*)
			eval "pid=\$pid_$c"
			taskset -p -c $c "$pid" > /dev/null ||
				why="$why; task $pid not pinned to cpu$c again" ;;
		esac
	done
	cycles=$((cycles + 1))
done
touch $stop
wait $flipper || why="$why; $(grep -v '^loops' $log 2>/dev/null | head -n 1)"
d1=$(stat deferred)
loops=$(sed -n 's/^loops //p' $log 2>/dev/null)
# Still in user space: the last flips' syncs wait in their words, and
# every site of the key takes its direction there once they run.
for c in $iso; do
	out=$(taskset -c $c sh -c "echo sites 56 > $b && cat $b") ||
		{ why="$why; sites 56 failed on CPU $c"; continue; }
	w=$(echo "$out" | sed -n 's/^wrong //p')
	[ "$w" = 0 ] || why="$why; CPU $c: $w sites of key 56 took the old direction"
done
for c in $iso; do
	eval "kill \$pid_$c"
done
wait 2>/dev/null
info "$t cycles=$cycles flip_loops=${loops:-0} deferred=$((d1 - d0))"
[ "${loops:-0}" -gt 0 ] || why="$why; no flip loop finished while CPUs went and came"
[ $((d1 - d0)) -gt 0 ] || why="$why; no round was deferred to an isolated CPU"
bad=$(audit_wrong sync $iso)
[ -z "$bad" ] || why="$why; $bad"
[ "$(stat lost_at_entry)" = "$lost0" ] ||
	why="$why; $(($(stat lost_at_entry) - lost0)) kinds of work lost at entry"
rm -f $stop $log
if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi

no_warning hotplug_no_warning
exit $rc

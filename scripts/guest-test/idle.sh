#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Text-poke syncs deferred to idle CPUs, which need no nohz_full=: the
# guest boots with no CPU isolated (make test's -noiso boot), CPUs 1-3 run
# nothing, and CPU 0 flips a key of one site, with deferral off and on in
# the same boot. Off, each flip interrupts each idle CPU with 3
# function-call IPIs (CAL); on, with none: each takes a work bit, and runs
# sync_core() when it next leaves idle or takes an interrupt. Then a task
# on each idle CPU runs the key's site: the CPU ran its deferred work
# first (its count of work run at idle exit rose) and the site takes the
# new direction. The same while CPUs 1-3 nap, entering and leaving idle
# all the time. Then CPU hotplug with syncs pending on an idle CPU, and
# the audit of CONFIG_CONTEXT_TRACKING_WORK_DEBUG: every sync added to an idle
# CPU's word was run, exactly once.
b=/sys/kernel/debug/text_poke_bench/run
m=/sys/kernel/debug/text_poke_batch/mode
d=/sys/kernel/debug/context_tracking_work/sync_core
cpus=/sys/kernel/debug/context_tracking_work/cpus
st=/sys/kernel/debug/text_poke_batch/stats
cst=/sys/kernel/debug/context_tracking_work/stats
idle="1 2 3"
# Flips per storm. Other senders IPI idle CPUs meanwhile, more in the
# PREEMPT_RT and sanitizer builds, whose storms last longer (make demo
# counts what a CPU receives per flip): with deferral off, each idle CPU
# takes 3 IPIs a flip more than that, and with it on, a quarter of what it
# took off at most, while the rounds defer to idle CPUs all but a
# twentieth of the time.
flips=200

. /tests/cases.inc
plan 5
fig() { sed -n "s/^$1 //p" $b; }
stat() { cat $st $cst | sed -n "s/^$1 //p"; }
# The work CPU $1 ran at entry or idle exit.
runs() { sed -n "s/^cpu$1 .* runs \([0-9]*\) .*/\1/p" $cpus; }
# "c1 c2 c3": the CAL counts of the idle CPUs, read at once.
cals() { awk '$1 == "CAL:" { print $3, $4, $5 }' /proc/interrupts; }
# storm: $flips flips of the one-site key from CPU 0; fails if one failed
# or the site took the wrong direction there.
storm() {
	taskset -c 0 sh -c "echo flip 1 $flips > $b" && [ "$(fig wrong)" = 0 ]
}

rc=0
for f in $b $m $d $cpus $st; do
	[ -e $f ] || error "$f missing (CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE, _MEASURE or the bench off?)"
done
iso=$(cat /sys/devices/system/cpu/nohz_full 2>/dev/null)
[ -z "$iso" ] || [ "$iso" = "(null)" ] || error "nohz_full is '$iso': this test needs no CPU isolated"
echo rust > $m
# This shell and every process it starts run on CPU 0, unless told
# otherwise: a process started on an idle CPU would wake it.
taskset -p 1 $$ > /dev/null || error "cannot keep the test on CPU 0"

# busy: "b1 b2 b3", the ticks (USER_HZ) the idle CPUs spent out of idle
# so far.
busy() { awk '$1 ~ /^cpu[123]$/ { printf "%d ", $2 + $3 + $4 + $7 + $8 }' /proc/stat; }
# tasks: "PID COMM CPU TICKS" of every task: the CPU it ran on last, and
# the user and system ticks it ran.
tasks() { cat /proc/[0-9]*/stat 2> /dev/null | awk '{ print $1, $2, $39, $14 + $15 }'; }

# measure: a storm with deferral $mode; $why says what is wrong with
# its figures. Off: every round interrupts every idle CPU ($off, their
# IPIs); on: none.
measure() {
	why=
	before=$(cals)
	b0=$(busy)
	di0=$(stat deferred_idle)
	tasks > /tmp/idle-tasks
	storm || why="$why; a flip failed or the site took the wrong direction on CPU 0"
	after=$(cals)
	b1=$(busy)
	di1=$(stat deferred_idle)
	info "$t try=$try flips=$flips cal_before=$before cal_after=$after deferred_idle=$((di1 - di0)) busy_before=$b0 busy_after=$b1"
	set -- $before
	i=0
	for c in $after; do
		got=$((c - $1))
		i=$((i + 1))
		if [ $mode = off ]; then
			[ $got -ge $((3 * flips)) ] || why="$why; an idle CPU took $got IPIs for $flips flips, not 3 each"
			off="$off $got"
		else
			# shellcheck disable=SC2086
			was=$(echo $off | cut -d' ' -f$i)
			[ $((4 * got)) -le "$was" ] || why="$why; idle CPU $i took $got IPIs for $flips flips, $was with deferral off"
		fi
		shift
	done
	if [ $mode = off ]; then
		[ $((di1 - di0)) = 0 ] || why="$why; $((di1 - di0)) rounds deferred with deferral off"
	else
		want=$((3 * flips * 3 * 19 / 20))
		[ $((di1 - di0)) -ge $want ] || why="$why; only $((di1 - di0)) rounds deferred to the 3 idle CPUs, not $want"
	fi
	[ -n "$why" ] || return 0
	# What ran on the idle CPUs meanwhile.
	info "$t try=$try ran on CPUs 1-3:$(tasks | awk 'NR == FNR { t[$1] = $4; next }
		$3 >= 1 && $3 <= 3 && $4 > t[$1] { printf " %s%s@%d+%d", $1, $2, $3, $4 - t[$1]; n++ }
		END { print n ? "" : " no task for a tick" }' /tmp/idle-tasks -)"
}

# With deferral on, a storm whose figures miss is made again, up to
# three times in all: a task or an interrupt may keep an idle CPU busy for
# part of a storm (once, one for 109 of 200 flips), and a CPU out of idle
# takes the round's IPIs, as it must; a deferral that does not work misses
# every time.
off=
for mode in off on; do
	t=idle_ipis_deferral_$mode
	echo $mode > $d
	try=1
	measure
	while [ -n "$why" ] && [ $mode = on ] && [ $try -lt 3 ]; do
		try=$((try + 1))
		measure
	done
	if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi
done

# A CPU that wakes runs the work it took before the site: the key flips
# while the CPUs are idle, then a task on each runs the site.
t=idle_wakeup_runs_new_direction
why=
for v in 1 0; do
	r0=
	for c in $idle; do r0="$r0 $(runs $c)"; done
	taskset -c 0 sh -c "echo set 1 $v > $b" || why="$why; set 1 $v failed"
	set -- $r0
	for c in $idle; do
		out=$(taskset -c $c sh -c "echo sites 1 > $b && cat $b") ||
			{ why="$why; sites 1 failed on CPU $c"; shift; continue; }
		w=$(echo "$out" | sed -n 's/^wrong //p')
		[ "$w" = 0 ] || why="$why; CPU $c: the site took the old direction"
		[ "$(runs $c)" -gt "$1" ] || why="$why; CPU $c woke without running deferred work"
		shift
	done
done
if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi

# CPUs that nap: a task on each of CPUs 1-3 sleeps 100 us at a time, so
# that rounds find them in the kernel, entering idle, idle and leaving it,
# all the time. Every round reaches each as an IPI or a bit it runs when
# it wakes: each then runs the site in its new direction, and nothing
# added to a word was lost.
t=idle_napping_nothing_lost
why=
naps=
for c in $idle; do
	taskset -c $c sh -c 'while :; do usleep 100; done' &
	naps="$naps $!"
done
di0=$(stat deferred_idle)
storm || why="$why; a flip failed or the site took the wrong direction on CPU 0"
di1=$(stat deferred_idle)
taskset -c 0 sh -c "echo set 1 1 > $b" || why="$why; set 1 1 failed"
for c in $idle; do
	out=$(taskset -c $c sh -c "echo sites 1 > $b && cat $b") ||
		{ why="$why; sites 1 failed on CPU $c"; continue; }
	[ "$(echo "$out" | sed -n 's/^wrong //p')" = 0 ] || why="$why; CPU $c: the site took the old direction"
done
# shellcheck disable=SC2086
kill $naps 2> /dev/null
wait 2> /dev/null
taskset -c 0 sh -c "echo set 1 0 > $b" || why="$why; set 1 0 failed"
info "$t flips=$flips deferred_idle=$((di1 - di0))"
[ $((di1 - di0)) -gt 0 ] || why="$why; no round deferred to a napping CPU"
bad=$(audit_wrong sync $idle)
[ -z "$bad" ] || why="$why; $bad"
[ "$(stat lost_at_entry)" = 0 ] || why="$why; $(stat lost_at_entry) kinds of work lost at entry"
if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi

# CPU hotplug with a sync pending on an idle CPU: CPU 3 takes the flip's
# syncs as a bit, goes offline and comes back; every sync added to its
# word was run, by one of its idle exits or by its way back online
# (CONFIG_CONTEXT_TRACKING_WORK_DEBUG's audit), and its site takes the new
# direction.
t=idle_hotplug_pending
online=/sys/devices/system/cpu/cpu3/online
why=
if [ ! -w $online ]; then
	fail $t "$online missing or not writable (CONFIG_HOTPLUG_CPU off?)"
else
	done_=
	for try in 1 2 3 4 5 6 7 8 9 10; do
		# CPU 3 back in idle first: the tasks that ran there (the naps,
		# the try before's run of the site, the hotplug threads) may
		# still be leaving it, and a flip sends a busy CPU its IPIs.
		sleep 1
		taskset -c 0 sh -c "echo set 1 1 > $b" || why="$why; set 1 1 failed"
		pending=$(sed -n 's/^cpu3 idle work \(0x[0-9a-f]*\) .*/\1/p' $cpus)
		echo 0 > $online || why="$why; CPU 3 cannot go offline"
		echo 1 > $online || why="$why; CPU 3 cannot come back online"
		info "$t try=$try pending=${pending:-none}"
		out=$(taskset -c 3 sh -c "echo sites 1 > $b && cat $b")
		[ "$(echo "$out" | sed -n 's/^wrong //p')" = 0 ] || why="$why; CPU 3: the site took the old direction"
		taskset -c 0 sh -c "echo set 1 0 > $b" || why="$why; set 1 0 failed"
		if [ -n "$pending" ] && [ "$pending" != 0x0 ]; then
			done_=1
			break
		fi
	done
	[ "$(cat $online)" = 1 ] || echo 1 > $online
	bad=$(audit_wrong sync $idle)
	[ -z "$bad" ] || why="$why; $bad"
	[ "$(stat lost_at_entry)" = 0 ] || why="$why; $(stat lost_at_entry) kinds of work lost at entry"
	if [ -n "$why" ]; then
		fail $t "${why#; }"
	elif [ -z "$done_" ]; then
		# PREEMPT_RT: something wakes CPU 3 after every flip.
		skip $t "CPU 3 was never idle with the sync pending in 10 tries; nothing lost"
	else
		ok $t
	fi
fi
exit $rc

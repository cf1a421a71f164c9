#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Text-poke syncs deferred to isolated CPUs in user space. The guest boots
# with nohz_full=2-3 isolcpus=2-3 rcu_nocbs=2-3; CPUs 2 and 3 run user-space
# loops while CPU 0 flips keys of 1 to 256 sites, with deferral off and on
# in the same boot. Off, each flip interrupts each isolated CPU with 3
# function-call IPIs (CAL); on, with none. Then a task on each isolated CPU
# runs the keys' sites: each takes the key's new direction. The same again
# while the isolated CPUs make system calls all the time, and a key whose
# site is in noinstr text, which is never deferred, in the image or in a
# module's cpuidle text (text_poke_mod_idle.ko). The audit of
# CONFIG_CONTEXT_TRACKING_WORK_DEBUG shows every sync added to a CPU's word
# run by one of its entries, exactly. Then idle isolated CPUs, deferred to
# as well; and the faults: the switch flipped during a storm, CPU hotplug
# with syncs pending, and syncs dropped at entry on purpose, which the
# audit must see.
b=/sys/kernel/debug/text_poke_bench/run
m=/sys/kernel/debug/text_poke_batch/mode
d=/sys/kernel/debug/context_tracking_work/sync_core
cpus=/sys/kernel/debug/context_tracking_work/cpus
st=/sys/kernel/debug/text_poke_batch/stats
cst=/sys/kernel/debug/context_tracking_work/stats
iso="2 3"

. /tests/cases.inc
plan 15
fig() { sed -n "s/^$1 //p" $b; }
stat() { cat $st $cst | sed -n "s/^$1 //p"; }
# The CAL count of CPU $1.
cal() { awk -v c="$1" '$1 == "CAL:" { print $(c + 2) }' /proc/interrupts; }
# The work CPU $1 ran at entry.
runs() { sed -n "s/^cpu$1 .* runs \([0-9]*\) .*/\1/p" $cpus; }
# "c2 c3": the CAL counts of the isolated CPUs.
cals() { for c in $iso; do printf '%s ' "$(cal $c)"; done; }
# flips F: F flips spread over the keys of 1, 8, 56 and 256 sites.
storm() {
	for k in 1 8 56 256; do
		echo "flip $k $(($1 / 4))" > $b || return 1
		[ "$(fig wrong)" = 0 ] || return 1
	done
}
# The syncs added to the CPUs' words and not run, all told: idle CPUs take
# syncs too, and each first runs what it has pending, woken by a task.
unrun() {
	n=0
	for c in 0 1 2 3; do
		taskset -c $c true
		set -- $(audit $c sync)
		n=$((n + ${1:-0} - ${2:-0}))
	done
	echo $n
}
# accounted F D S: for a storm of F flips, 3 sync rounds each, that
# deferred D and sent S: prints what went wrong if the rounds did not
# count each isolated CPU as deferred to or sent the IPI, once a round.
accounted() {
	want=$((3 * $1 * 2))
	[ $(($2 + $3)) = $want ] ||
		echo "; $2 deferred and $3 sent, not the $want of $1 flips' rounds to 2 isolated CPUs"
}
# check KEY: each isolated CPU runs KEY's sites; prints what went wrong.
check() {
	for c in $iso; do
		out=$(taskset -c $c sh -c "echo sites $1 > $b && cat $b") ||
			{ echo "sites $1 failed on CPU $c"; continue; }
		w=$(echo "$out" | sed -n 's/^wrong //p')
		[ "$w" = 0 ] || echo "CPU $c: $w sites of key $1 took the old direction"
	done
}

rc=0
for f in $b $m $d $cpus /demo/spin /demo/syscalls; do
	[ -e $f ] || error "$f missing (CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE or the bench off?)"
done
[ "$(cat /sys/devices/system/cpu/nohz_full)" = 2-3 ] ||
	error "nohz_full is '$(cat /sys/devices/system/cpu/nohz_full)', not 2-3"
echo rust > $m

# Bad input is refused, with the switch unchanged.
t=defer_switch_bad_input
was=$(cat $d)
if echo maybe > $d 2>/dev/null || [ "$(cat $d)" != "$was" ]; then
	fail $t "'maybe' was accepted"
else
	ok $t
fi

# A round waits for an isolated CPU it finds in the kernel (handling a
# residual tick, say) to go back to user space, 50 us by default: under
# TCG a guest microsecond takes far longer than on hardware, and a vCPU
# may wait a whole time slice for its turn.
echo 10000000 > /sys/kernel/debug/context_tracking_work/wait_ns

# start CMD...: CMD on each isolated CPU, in the background.
start() {
	loops=
	for c in $iso; do
		taskset -c $c "$@" &
		loops="$loops $!"
	done
	sleep 1
}
stop() {
	kill $loops
	wait 2>/dev/null
}

# Deferral switched on while the isolated CPUs are in user space, where
# they went with it off: they take no work until they pass through the
# kernel again, so the rounds send them the IPI at once, wait for none,
# and defer to them from their next return to user space on. A round may
# still wait in vain for a CPU that is in the kernel for longer than the
# wait (a kernel thread the IPI woke, say, on a PREEMPT_RT kernel under
# KCSAN): a switch whose storm saw that is tried once more. A CPU whose
# word cannot take work waits every round after each switch, both times.
t=defer_switched_on_no_wait
dt=/sys/kernel/debug/context_tracking_work/tlb_flush
# switched_on: one switch and storm; sets why, e and dd.
switched_on() {
	why=
	tlb_was=
	[ -e $dt ] && tlb_was=$(cat $dt) && echo off > $dt
	echo off > $d
	start /demo/spin
	for c in $iso; do
		grep -q "^cpu$c user-off " $cpus ||
			why="$why; CPU $c's word: $(grep "^cpu$c " $cpus), not user-off"
	done
	echo on > $d
	[ -z "$tlb_was" ] || echo $tlb_was > $dt
	e0=$(stat wait_expired)
	d0=$(stat deferred)
	storm 40 ||
		why="$why; a flip failed or a site took the wrong direction on CPU 0"
	e=$(($(stat wait_expired) - e0))
	dd=$(($(stat deferred) - d0))
	stop
	info "$t flips=40 wait_expired=$e deferred=$dd"
	[ $dd -gt 0 ] || why="$why; no round was deferred after the switch"
}
first=
switched_on
if [ -z "$why" ] && [ $e != 0 ]; then
	first="$e, then "
	switched_on
fi
[ $e = 0 ] ||
	why="$why; ${first}$e times a round waited in vain for an isolated CPU"
if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi

flips=1000
for mode in off on; do
	t=defer_storm_$mode
	echo $mode > $d || { fail $t "cannot switch deferral $mode"; continue; }
	# The switch applies to a CPU from its next return to user space:
	# the loops start after it.
	start /demo/spin
	before=$(cals)
	d0=$(stat deferred)
	w0=$(stat waited)
	storm $flips || { fail $t "a flip failed or a site took the wrong direction on CPU 0"; stop; continue; }
	after=$(cals)
	d1=$(stat deferred)
	w1=$(stat waited)
	why=
	set -- $before
	for c in $after; do
		n=$((c - $1))
		shift
		if [ $mode = off ]; then
			[ $n -ge $((3 * flips)) ] || why="$why; an isolated CPU took $n IPIs, not 3 a flip"
		else
			[ $n = 0 ] || why="$why; an isolated CPU took $n IPIs"
		fi
	done
	if [ $mode = on ]; then
		[ $((d1 - d0)) = $((3 * flips * 2)) ] ||
			why="$why; $((d1 - d0)) rounds deferred, not $((3 * flips * 2))"
	fi
	info "$t flips=$flips cal_before=$before cal_after=$after deferred=$((d1 - d0)) waited=$((w1 - w0))"
	if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi
	[ $mode = on ] || stop
done

# Deferred with the loops in user space, then run on the isolated CPUs.
t=defer_sites_new_direction
why=
for on in 1 0; do
	r0=$(runs 2)
	before=$(cals)
	echo "set 256 $on" > $b || why="$why; set 256 $on failed"
	[ "$(cals)" = "$before" ] || why="$why; set 256 $on interrupted an isolated CPU"
	bad=$(check 256)
	[ -z "$bad" ] || why="$why; $bad"
	[ "$(runs 2)" -gt "$r0" ] || why="$why; CPU 2 ran no deferred work at entry"
done
if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi

# A key whose site is in noinstr text: never deferred.
t=defer_noinstr_never_deferred
before=$(cals)
echo "flip noinstr 10" > $b
after=$(cals)
why=
set -- $before
for c in $after; do
	[ $((c - $1)) -ge 30 ] || why="$why; an isolated CPU took $((c - $1)) IPIs for 10 flips"
	shift
done
[ "$(fig wrong)" = 0 ] || why="$why; the site took the wrong direction"
if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi

# A module's key whose site is in the module's cpuidle text (linked into
# its noinstr text): never deferred, as the image's; the same module's key
# in its ordinary text is.
t=defer_module_idle_text_never_deferred
mp=/sys/module/text_poke_mod_idle/parameters
why=
if ! insmod /lib/modules/text_poke_mod_idle.ko; then
	why="text_poke_mod_idle.ko does not load"
else
	for k in text_key idle_key; do
		before=$(cals)
		for i in 1 2 3 4 5; do
			echo 1 > $mp/$k && echo 0 > $mp/$k || why="$why; cannot flip $k"
		done
		after=$(cals)
		info "$t $k flips=10 cal_before=$before cal_after=$after"
		set -- $before
		for c in $after; do
			if [ $k = text_key ]; then
				# Deferred: at most a stray IPI or two of the 30 rounds'.
				[ $((c - $1)) -lt 3 ] ||
					why="$why; $k: an isolated CPU took $((c - $1)) IPIs for 10 flips"
			else
				[ $((c - $1)) -ge 30 ] ||
					why="$why; $k: an isolated CPU took $((c - $1)) IPIs for 10 flips"
			fi
			shift
		done
		echo 1 > $mp/$k
		[ "$(cat $mp/$k)" = 1 ] || why="$why; $k's site does not branch with the key enabled"
		echo 0 > $mp/$k
		[ "$(cat $mp/$k)" = 0 ] || why="$why; $k's site branches with the key disabled"
	done
	rmmod text_poke_mod_idle || why="$why; text_poke_mod_idle does not unload"
fi
if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi
stop

# Every sync added to an isolated CPU's word by the flips above was run by
# exactly one of its entries: with the loops gone the CPUs are idle, with
# nothing pending, and the audit (CONFIG_CONTEXT_TRACKING_WORK_DEBUG) balances,
# nothing lost.
t=defer_every_sync_added_ran
why=$(audit_wrong sync $iso | tr '\n' ';')
for c in $iso; do
	set -- $(audit $c sync)
	info "$t cpu$c sync_added=$1 sync_ran=$2 sync_lost=$3"
	[ "${1:-0}" -gt 0 ] || why="$why; CPU $c: no sync added"
done
[ "$(stat lost_at_entry)" = 0 ] || why="$why; $(stat lost_at_entry) kinds of work lost at entry"
if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi

# Flips racing CPUs that enter and leave the kernel all the time.
t=defer_racing_syscalls
start /demo/syscalls
d0=$(stat deferred)
s0=$(stat sent)
why=
storm $flips || why="$why; a flip failed or a site took the wrong direction on CPU 0"
d1=$(stat deferred)
s1=$(stat sent)
stop
for k in 1 8 56 256; do
	bad=$(check $k)
	[ -z "$bad" ] || why="$why; $bad"
done
info "$t flips=$flips deferred=$((d1 - d0)) sent=$((s1 - s0)) waited=$(stat waited)"
[ $((d1 - d0)) -gt 0 ] || why="$why; no round was deferred"
why="$why$(accounted $flips $((d1 - d0)) $((s1 - s0)))"
if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi

# Isolated CPUs that nap: each goes from user space into the kernel, to
# idle, and back, all the time, so a round often finds one in the kernel
# and waits, and the CPU goes idle meanwhile. Every isolated CPU a round
# asks is still deferred to or sent the IPI, and counted as one of them.
t=defer_napping_isolated_accounted
echo on > $d
start sh -c 'while :; do usleep 100; done'
d0=$(stat deferred)
s0=$(stat sent)
why=
n=200
storm $n || why="$why; a flip failed or a site took the wrong direction on CPU 0"
d1=$(stat deferred)
s1=$(stat sent)
stop
info "$t flips=$n deferred=$((d1 - d0)) sent=$((s1 - s0))"
why="$why$(accounted $n $((d1 - d0)) $((s1 - s0)))"
if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi

# Isolated CPUs that run no task are idle: every round defers to them, as
# to CPUs in user space, and waits for none of them; they take no IPI.
t=defer_idle_isolated_deferred
echo on > $d
before=$(cals)
d0=$(stat deferred)
s0=$(stat sent)
w0=$(stat waited)
why=
storm 40 || why="$why; a flip failed or a site took the wrong direction on CPU 0"
after=$(cals)
d1=$(stat deferred)
s1=$(stat sent)
info "$t flips=40 cal_before=$before cal_after=$after deferred=$((d1 - d0)) sent=$((s1 - s0))"
set -- $before
for c in $after; do
	[ $((c - $1)) -le 6 ] || why="$why; an idle isolated CPU took $((c - $1)) IPIs for 40 flips"
	shift
done
why="$why$(accounted 40 $((d1 - d0)) $((s1 - s0)))"
[ "$(stat waited)" = "$w0" ] || why="$why; rounds waited for idle CPUs"
if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi

# The switch flipped over and over from CPU 1 while CPU 0 flips keys: every
# round reaches every isolated CPU once, by an IPI or a bit it runs at its
# next entry; no IPI storm; every site takes its key's new direction there.
t=defer_switch_during_storm
start /demo/spin
taskset -c 1 sh -c "while :; do echo off > $d; echo on > $d; done" &
tog=$!
before=$(cals)
d0=$(stat deferred)
why=
n=400
storm $n || why="$why; a flip failed or a site took the wrong direction on CPU 0"
kill $tog
wait $tog 2>/dev/null
echo on > $d
after=$(cals)
d1=$(stat deferred)
stop
ipis=0
set -- $before
for c in $after; do
	ipis=$((ipis + c - $1))
	shift
done
rounds=$((3 * n * 2))
info "$t flips=$n rounds_per_isolated_cpu=$((3 * n)) ipis=$ipis deferred=$((d1 - d0))"
[ $((ipis + d1 - d0)) -ge $rounds ] || why="$why; $ipis IPIs and $((d1 - d0)) bits for $rounds rounds: work lost"
[ $((ipis + d1 - d0)) -le $((rounds + 8)) ] || why="$why; $ipis IPIs and $((d1 - d0)) bits for $rounds rounds"
[ $ipis -gt 0 ] && [ $((d1 - d0)) -gt 0 ] || why="$why; the switch never changed during the storm"
# The bits are the senders' count: the audit shows each one added was run.
bad=$(audit_wrong sync $iso)
[ -z "$bad" ] || why="$why; $bad"
[ "$(stat lost_at_entry)" = 0 ] || why="$why; $(stat lost_at_entry) kinds of work lost at entry"
for k in 1 8 56 256; do
	bad=$(check $k)
	[ -z "$bad" ] || why="$why; $bad"
done
if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi

# CPU hotplug with syncs pending: the keys flipped while CPU 3 is in user
# space leave it a bit; CPU 3 goes offline (the stopper's wake-up is its
# entry: the sync runs there) and comes back; then its sites take the new
# direction.
t=defer_hotplug_pending
online=/sys/devices/system/cpu/cpu3/online
why=
if [ ! -w $online ]; then
	fail $t "$online missing or not writable (CONFIG_HOTPLUG_CPU off?)"
else
	start /demo/spin
	# An offline CPU has no line in $cpus: CPU 3's runs are read back
	# online, where coming online runs its word's work, and a
	# sync_core(), once more: a sync run before it went offline makes
	# two runs.
	r0=$(runs 3)
	d0=$(stat deferred)
	echo "set 256 1" > $b || why="$why; set 256 1 failed"
	d1=$(stat deferred)
	echo 0 > $online || why="$why; CPU 3 cannot go offline"
	stop
	echo 1 > $online || why="$why; CPU 3 cannot come back online"
	r1=$(runs 3)
	info "$t deferred=$((d1 - d0)) cpu3_runs=$((r1 - r0))"
	[ $((d1 - d0)) -ge 6 ] || why="$why; only $((d1 - d0)) rounds deferred, not 3 to each isolated CPU"
	[ $((r1 - r0)) -ge 2 ] || why="$why; CPU 3 went offline without running its deferred work"
	grep -q "^cpu3 .* isolated 1" $cpus || why="$why; CPU 3 is not isolated after coming back"
	bad=$(check 256)
	[ -z "$bad" ] || why="$why; $bad"
	echo "set 256 0" > $b || why="$why; set 256 0 failed"
	bad=$(check 256)
	[ -z "$bad" ] || why="$why; after coming back: $bad"
	[ "$(cat $online)" = 1 ] || echo 1 > $online
	if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi
fi

# The audit sees work dropped at entry: the next two entries that take
# work drop it (context_tracking_work/skip_work), a key flips while CPUs 2-3 are
# in user space, then a task runs on each, which makes it enter the kernel
# and take its sync. Both syncs are lost (there, or on an idle CPU that
# woke first), and the audit says so: the comparison of added and run
# above fails when entry work is skipped.
t=defer_dropped_sync_is_seen
sk=/sys/kernel/debug/context_tracking_work/skip_work
why=
if [ ! -e $sk ]; then
	fail $t "$sk missing (CONFIG_CONTEXT_TRACKING_WORK_DEBUG off?)"
else
	l0=$(stat lost_at_entry)
	s0=$(stat skipped_at_entry)
	u0=$(unrun)
	start /demo/spin
	echo 2 > $sk
	echo "set 256 1" > $b || why="$why; set 256 1 failed"
	check 256 > /dev/null
	stop
	left=$(cat $sk)
	echo 0 > $sk
	l1=$(stat lost_at_entry)
	s1=$(stat skipped_at_entry)
	u1=$(unrun)
	echo "set 256 0" > $b || why="$why; set 256 0 failed"
	info "$t lost_at_entry=$((l1 - l0)) added_not_run=$((u1 - u0)) drops_left=$left"
	[ "$left" = 0 ] || why="$why; $left of 2 drops never used: no entry took work"
	[ $((l1 - l0)) = 2 ] || why="$why; $((l1 - l0)) syncs seen lost, not 2"
	# Counted as dropped on purpose: the end of the boot (audit.inc) finds
	# no other loss.
	[ $((s1 - s0)) = 2 ] || why="$why; $((s1 - s0)) syncs counted as dropped on purpose, not 2"
	[ $((u1 - u0)) = 2 ] || why="$why; syncs added and not run rose by $((u1 - u0)), not 2"
	bad=$(audit_wrong sync $iso)
	[ -z "$bad" ] || why="$why; $bad"
	if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi
fi

no_warning defer_no_warning
echo on > $d
echo 50000 > /sys/kernel/debug/context_tracking_work/wait_ns
exit $rc

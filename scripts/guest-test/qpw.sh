#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Per-CPU folio batches drained from another CPU (qpw). make test boots the
# image twice, with qpw=1 (every test) and with qpw=0 (this one alone),
# CPUs 2-3 isolated both times. A task on each isolated CPU faults in a few
# pages, which wait in its CPU's LRU batch, and spins in user space while a
# housekeeping CPU calls lru_add_drain_all() 100 times. With qpw=1 the
# isolated CPUs receive no interrupt (RES, CAL) and their kworkers do not
# run; with qpw=0 the drain is queued on them. Either way the tasks' pages
# end on the LRU lists, and were not there before the drains. The same
# with the tasks' memory locked (mlockall()), their pages in their CPUs'
# mlock batches, which end on the unevictable LRU.
# Then the hotplug torture: tasks on CPUs 1-3 fault in page after page,
# each waiting in their CPU's LRU batch, while CPU 0 drains every CPU
# again and again and CPUs 1-3 go offline and online (each task pinned to
# its CPU again when it comes back); afterwards every page each task
# faulted in is on an LRU list, none lost in a batch, and the kernel
# logged nothing (a folio moved twice trips the list and VM checks of the
# PREEMPT_RT build). With PREEMPT_RT
# qpw is always on: the qpw=0 boot must say it refused qpw=0.
b=/sys/kernel/debug/text_poke_bench/run
iso="2 3"
go=/tmp/qpw.go

. /tests/cases.inc
plan 5
counts() { for c in $iso; do printf '%s/%s/%s ' "$(irq RES $c)" "$(irq CAL $c)" "$(kworkers $c)"; done; }

rc=0
for f in $b /demo/syscalls /proc/kpageflags; do
	[ -e $f ] || error "$f missing (the bench or CONFIG_PROC_PAGE_MONITOR off?)"
done

# The mode this boot runs in, as the kernel says at boot.
want=$(sed -n 's/.*qpw=\([01]\).*/\1/p' /proc/cmdline)
t=qpw${want}_mode
mode=$(dmesg | sed -n 's/.*qpw: remote per-CPU work .*(qpw=\([01]\)).*/\1/p' | tail -n 1)
if [ -z "$mode" ]; then
	fail $t "no 'qpw: remote per-CPU work' line in the kernel log (CONFIG_QPW off?)"
	skip qpw${want}_drain_isolated_cpus "the qpw mode is not known"
	skip qpw${want}_drain_mlocked "the qpw mode is not known"
	skip qpw${want}_drain_hotplug "the qpw mode is not known"
	no_warning qpw${want}_no_warning
	exit $rc
elif [ "$want" = 0 ] && uname -v | grep -q PREEMPT_RT; then
	# Always on with PREEMPT_RT, whose local_locks are spinlocks.
	if [ "$mode" = 1 ] && dmesg | grep -q 'qpw: qpw=0 refused on PREEMPT_RT'; then
		ok $t
	else
		fail $t "PREEMPT_RT booted with qpw=0: the kernel says qpw=$mode, and no refusal logged"
	fi
elif [ -n "$want" ] && [ "$mode" != "$want" ]; then
	fail $t "booted with qpw=$want, the kernel says qpw=$mode"
else
	ok $t
fi

# drain_isolated NAME [mlock]: test NAME, the tasks' pages waiting in their
# CPUs' LRU batches, or with "mlock" in their mlock batches (the tasks
# lock their memory first, as real-time tasks do), and counted on the
# unevictable LRU afterwards.
drain_isolated() {
	local t=$1 how=$2 drains=100 why= outs= out c x b0 res rest rest0 cal kw
	printf 0 > $go
	# Empty batches first: pages earlier tests' tasks left in an isolated
	# CPU's batch could fill it as the task faults its pages in, which
	# moves them all to the LRU before the drains.
	echo "lrudrain 1" > $b || why="$why; lrudrain 1 failed"
	for c in $iso; do
		out=/tmp/qpw.$c
		taskset -c $c /demo/syscalls lru 4 $go $how > $out &
		outs="$outs $out"
	done
	sleep 1
	before=$(counts)
	echo "lrudrain $drains" > $b || why="$why; lrudrain $drains failed"
	after=$(counts)
	# Lets the tasks go: they read the new byte through their shared mapping.
	printf 1 1<>$go
	wait
	set -- $before
	for x in $after; do
		b0=$1
		shift
		res=$((${x%%/*} - ${b0%%/*}))
		rest=${x#*/}
		rest0=${b0#*/}
		cal=$((${rest%/*} - ${rest0%/*}))
		kw=$((${x##*/} - ${b0##*/}))
		if [ "$mode" = 1 ]; then
			[ $((res + cal + kw)) = 0 ] ||
				why="$why; an isolated CPU took $res RES, $cal CAL and $kw kworker switches"
		else
			[ $((res + cal + kw)) -gt 0 ] ||
				why="$why; an isolated CPU took no interrupt and ran no kworker with qpw=0"
		fi
	done
	# shellcheck disable=SC2086 # one word a file
	why="$why$(lru_pages_wrong "${how:+unevictable}" $outs)"
	info "$t drains=$drains res/cal/kworker_before=$before res/cal/kworker_after=$after pages=$(cat $outs | tr '\n' ' ')"
	rm -f $go $outs
	if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi
}
drain_isolated qpw${mode}_drain_isolated_cpus
drain_isolated qpw${mode}_drain_mlocked mlock

t=qpw${mode}_drain_hotplug
why=
printf 0 > $go
outs=
for c in 1 2 3; do
	out=/tmp/qpwhp.$c
	taskset -c $c /demo/syscalls hotplug $go > $out &
	outs="$outs $out"
	eval "pid_$c=\$!"
done
stop=/tmp/qpwhp.stop
rm -f $stop
# The drains, from CPU 0, until told to stop.
taskset -c 0 sh -c "n=0; while [ ! -e $stop ]; do echo 'lrudrain 5' > $b || exit 1; n=\$((n + 1)); done; echo \$n > $stop.n" &
drainer=$!
cycles=0
for i in 1 2 3 4 5; do
	for c in 1 2 3; do
		echo 0 > /sys/devices/system/cpu/cpu$c/online || why="$why; cpu$c did not go offline"
		echo 1 > /sys/devices/system/cpu/cpu$c/online || why="$why; cpu$c did not come back"
		# Its task was moved away when it went: back to it.
		eval "pid=\$pid_$c"
		taskset -p -c $c "$pid" > /dev/null || why="$why; task $pid not pinned to cpu$c again"
	done
	cycles=$((cycles + 1))
done
touch $stop
wait $drainer || why="$why; lrudrain failed"
# The tasks stop faulting; one more drain puts their last pages on the LRU.
printf 1 1<>$go
sleep 1
echo "lrudrain 1" > $b || why="$why; the last lrudrain failed"
printf 2 1<>$go
wait
for out in $outs; do
	read -r _ f _ full _ post < $out 2>/dev/null
	[ -n "$post" ] || { why="$why; $out: no answer from the task"; continue; }
	[ "$f" -gt 0 ] || why="$why; $out: the task made no fault while CPUs went and came"
	[ "$full" = 0 ] || why="$why; $out: the task ran out of pages before CPUs stopped going and coming"
	[ "$post" = "$f" ] || why="$why; $out: $post of $f pages on the LRU after the drains"
done
info "$t cycles=$cycles drain_loops=$(cat $stop.n 2>/dev/null) tasks=$(cat $outs | tr '\n' ' ')"
rm -f $go $outs $stop $stop.n
if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi

no_warning qpw${mode}_no_warning
exit $rc

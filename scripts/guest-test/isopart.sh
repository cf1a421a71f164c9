#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# CPUs isolated at run time, by a cpuset partition (qpw). make test boots
# the image once without isolated CPUs and without qpw= for this test
# alone, and runs it again last in the qpw=0 boot.
#
# Without qpw= and isolated CPUs, qpw is off at boot. Tasks on CPUs 1-3
# fault in page after page, each waiting in its CPU's LRU batch, while
# CPU 0 drains every CPU again and again, and meanwhile a cpuset
# partition isolates CPUs 2-3 (the tasks of 2-3 in it): the kernel says
# qpw turned on, every page each task faulted in ends on an LRU list, none
# lost in a batch (the locks turn from local_locks to spinlocks while
# owners and drains hold them), and the kernel logs nothing. Then qpw.sh's
# drain case on CPUs 2-3: a task on each faults in 4 pages and spins in
# user space while CPU 0 calls lru_add_drain_all() 100 times; no drain
# work is queued on the isolated CPUs (the workqueue's trace event), and
# the pages end on the LRU lists. Before qpw followed run-time isolation,
# the first drain queued its work on each, and their kworkers ran it.
#
# With qpw=0 (whose boot isolates CPUs 2-3 with isolcpus=), a partition
# isolating CPU 1 leaves qpw off, and the kernel says so.
#
# With PREEMPT_RT qpw is on from boot: the partition changes nothing, and
# the drains leave the isolated CPUs alone all the same.
b=/sys/kernel/debug/text_poke_bench/run
cg=/sys/fs/cgroup
part=$cg/jlrs-iso
go=/tmp/isopart.go

. /tests/cases.inc
plan 4
# The kernel's last word on the qpw mode: 0 or 1.
qpw_mode() {
	dmesg | sed -n -e 's/.*qpw: remote per-CPU work .*(qpw=\([01]\)).*/\1/p' \
		-e 's/.*qpw: CPUs .* isolated at run time: .*(qpw=\([01]\)).*/\1/p' | tail -n 1
}
# partition CPUS MODE: the cpuset $part takes CPUS as a partition of MODE
# (isolated or member); prints what the kernel made of it.
partition() {
	echo "$1" > $part/cpuset.cpus &&
		echo "$2" > $part/cpuset.cpus.partition
	cat $part/cpuset.cpus.partition
}
# pinned CPU ARGS...: /demo/syscalls ARGS in the background, in $part and
# pinned to CPU (moved in first: once $part is a partition, the root's
# tasks cannot have its CPUs).
pinned() {
	c=$1
	shift
	sh -c "echo \$\$ > $part/cgroup.procs && exec taskset -c $c /demo/syscalls $*" &
}

rc=0
for f in $b /demo/syscalls /proc/kpageflags; do
	[ -e $f ] || error "$f missing (the bench or CONFIG_PROC_PAGE_MONITOR off?)"
done
mkdir -p $cg
grep -q " $cg cgroup2 " /proc/mounts || mount -t cgroup2 none $cg ||
	error "cannot mount cgroup2 on $cg"
grep -qw cpuset $cg/cgroup.controllers || error "no cpuset controller (CONFIG_CPUSETS off?)"
echo +cpuset > $cg/cgroup.subtree_control || error "cannot enable the cpuset controller"
mkdir -p $part || error "cannot make the cpuset $part"

rt=
uname -v | grep -q PREEMPT_RT && rt=1
if grep -qw 'qpw=0' /proc/cmdline && [ -n "$rt" ]; then
	skip isopart_qpw0_stays_off "PREEMPT_RT: qpw is always on"
	skip isopart_switch_during_drains "PREEMPT_RT: qpw is always on"
	skip isopart_drain_isolated_cpus "qpw=0 boot"
	rmdir $part
	no_warning isopart_qpw0_no_warning
	exit $rc
elif grep -qw 'qpw=0' /proc/cmdline; then
	t=isopart_qpw0_stays_off
	why=
	got=$(partition 1 isolated)
	[ "$got" = isolated ] || why="the cpuset partition of CPU 1 is '$got', not isolated"
	msg=$(dmesg | grep 'qpw: CPUs 1 isolated at run time, but qpw=0')
	[ -n "$msg" ] || why="$why; no 'qpw: CPUs 1 isolated at run time, but qpw=0' in the kernel log"
	[ "$(qpw_mode)" = 0 ] || why="$why; the kernel says qpw=$(qpw_mode)"
	info "$t partition=$got log='$msg'"
	got=$(partition 1 member)
	[ "$got" = member ] || why="$why; the partition of CPU 1 did not go back to member ('$got')"
	if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi
	skip isopart_switch_during_drains "qpw=0 given: qpw does not turn on"
	skip isopart_drain_isolated_cpus "qpw=0 given: qpw does not turn on"
	rmdir $part
	no_warning isopart_qpw0_no_warning
	exit $rc
fi

skip isopart_qpw0_stays_off "qpw=0 not given"
t=isopart_switch_during_drains
why=
# Off at boot, but on PREEMPT_RT.
want=${rt:-0}
[ "$(qpw_mode)" = "$want" ] ||
	why="booted without qpw= and isolated CPUs, the kernel says qpw=$(qpw_mode)"
[ -z "$(cat /sys/devices/system/cpu/isolated)" ] ||
	why="$why; CPUs $(cat /sys/devices/system/cpu/isolated) isolated at boot"
echo 2-3 > $part/cpuset.cpus || why="$why; cannot give CPUs 2-3 to $part"
echo "lrudrain 1" > $b || why="$why; lrudrain 1 failed"
printf 0 > $go
outs=
for c in 1 2 3; do
	out=/tmp/isopart.$c
	if [ $c = 1 ]; then
		taskset -c $c /demo/syscalls hotplug $go > $out &
	else
		pinned $c hotplug $go > $out
	fi
	outs="$outs $out"
done
stop=/tmp/isopart.stop
rm -f $stop
taskset -c 0 sh -c "n=0; while [ ! -e $stop ]; do echo 'lrudrain 5' > $b || exit 1; n=\$((n + 1)); done; echo \$n > $stop.n" &
drainer=$!
sleep 1
got=$(partition 2-3 isolated)
[ "$got" = isolated ] || why="$why; the cpuset partition of CPUs 2-3 is '$got', not isolated"
sleep 1
touch $stop
wait $drainer || why="$why; lrudrain failed"
printf 1 1<>$go
sleep 1
echo "lrudrain 1" > $b || why="$why; the last lrudrain failed"
printf 2 1<>$go
wait
for out in $outs; do
	read -r _ f _ full _ post < $out 2>/dev/null
	[ -n "$post" ] || { why="$why; $out: no answer from the task"; continue; }
	[ "$f" -gt 0 ] || why="$why; $out: the task made no fault"
	[ "$post" = "$f" ] || why="$why; $out: $post of $f pages on the LRU after the drains"
done
msg=$(dmesg | grep 'qpw: CPUs 2-3 isolated at run time: remote per-CPU work now taken')
if [ -z "$rt" ] && [ -z "$msg" ]; then
	why="$why; no 'qpw: CPUs 2-3 isolated at run time: ...' in the kernel log"
elif [ -n "$rt" ] && [ -n "$msg" ]; then
	why="$why; PREEMPT_RT, on from boot, switched qpw on again: '$msg'"
fi
[ "$(qpw_mode)" = 1 ] || why="$why; the kernel says qpw=$(qpw_mode) after the partition"
info "$t partition=$got drain_loops=$(cat $stop.n 2>/dev/null) tasks=$(cat $outs | tr '\n' ' ')"
rm -f $go $outs $stop $stop.n
if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi

t=isopart_drain_isolated_cpus
why=
tr=/sys/kernel/tracing
grep -q " $tr tracefs " /proc/mounts || mount -t tracefs nodev $tr ||
	why="cannot mount tracefs"
printf 0 > $go
echo "lrudrain 1" > $b || why="$why; lrudrain 1 failed"
outs=
for c in 2 3; do
	out=/tmp/isopart.$c
	pinned $c lru 4 $go > $out
	outs="$outs $out"
done
sleep 1
before=
for c in 2 3; do before="$before $(irq RES $c)/$(irq CAL $c)/$(kworkers $c)"; done
# The drain work queued on CPUs 2-3, as the workqueue's trace event says:
# none with qpw on; with it off the first drain queues it on each.
echo 0 > $tr/tracing_on
echo > $tr/trace
echo 1 > $tr/events/workqueue/workqueue_queue_work/enable
echo 1 > $tr/tracing_on
echo "lrudrain 100" > $b || why="$why; lrudrain 100 failed"
echo 0 > $tr/tracing_on
echo 0 > $tr/events/workqueue/workqueue_queue_work/enable
queued=$(grep -cE 'function=lru_add_drain_(fbatches|per_cpu) .*req_cpu=[23] ' $tr/trace)
after=
for c in 2 3; do after="$after $(irq RES $c)/$(irq CAL $c)/$(kworkers $c)"; done
printf 1 1<>$go
wait
[ "$queued" = 0 ] || why="$why; $queued drain works queued on CPUs 2-3"
# shellcheck disable=SC2086 # one word a file
why="$why$(lru_pages_wrong "" $outs)"
# Interrupts and kworker runs, for the log: without nohz_full= the tick
# and the kernel's other per-CPU work still reach CPUs isolated this way.
info "$t queued=$queued res/cal/kworker_before=$before res/cal/kworker_after=$after pages=$(cat $outs | tr '\n' ' ')"
rm -f $go $outs
if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi

got=$(partition 2-3 member)
no_warning isopart_no_warning
exit $rc

#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# What the kernel's osnoise tracer, as RT engineers read it, sees on the
# isolated CPUs 2-3 (as in defer.sh) running user-space loops: its own
# workload off (NO_OSNOISE_WORKLOAD), every interrupt there is an
# osnoise:irq_noise event. During key flips from CPU 0 with deferral off
# it must see each sync round's function-call IPI on each isolated CPU,
# and as many as /proc/interrupts counts; with deferral on, none. The
# same for a vmalloc/vfree storm's kernel TLB flushes, with their
# deferral off and on.
b=/sys/kernel/debug/text_poke_bench/run
m=/sys/kernel/debug/text_poke_batch/mode
d=/sys/kernel/debug/context_tracking_work/sync_core
dt=/sys/kernel/debug/context_tracking_work/tlb_flush
t=/sys/kernel/tracing
iso="2 3"
events="irq_noise softirq_noise thread_noise nmi_noise"

. /tests/cases.inc
plan 4

# The CAL counts of the isolated CPUs, summed.
cals() { echo $(($(irq CAL 2) + $(irq CAL 3))); }
# The function-call IPIs the osnoise tracer saw as IRQ noise.
seen() { grep -c 'irq_noise: call_function' $t/trace; }

# osnoise_on: the tracer on the isolated CPUs, its own workload off (the
# loops are the workload), its noise events on.
osnoise_on() {
	echo 2-3 > $t/osnoise/cpus || return 1
	echo NO_OSNOISE_WORKLOAD > $t/osnoise/options || return 1
	for e in $events; do
		echo 1 > $t/events/osnoise/$e/enable || return 1
	done
	echo osnoise > $t/current_tracer
}
# window CMD...: CMD with user-space loops on the isolated CPUs and the
# osnoise tracer on them, tracing only around CMD. Sets $n_seen (the
# tracer's function-call IRQ noise events) and $n_cal (the CAL count of
# /proc/interrupts over CMD alone: starting and stopping the tracer
# hooks its tracepoints, which sends IPIs of its own before it samples
# and after); fails when CMD or the tracer's switch does.
window() {
	spin_iso
	echo 0 > $t/tracing_on
	r=1
	if osnoise_on; then
		: > $t/trace
		echo 1 > $t/tracing_on
		c0=$(cals)
		"$@"
		r=$?
		n_cal=$(($(cals) - c0))
		echo 0 > $t/tracing_on
		n_seen=$(seen)
	fi
	echo nop > $t/current_tracer
	for e in $events; do echo 0 > $t/events/osnoise/$e/enable; done
	echo OSNOISE_WORKLOAD > $t/osnoise/options
	echo 1 > $t/tracing_on
	kill $loops
	wait 2>/dev/null
	return $r
}
bench() { echo "$*" > $b; }

rc=0
[ -d $t/events ] || mount -t tracefs nodev $t
for f in $b $m $d $dt $t/osnoise/options /demo/spin; do
	[ -e $f ] || error "$f missing (CONFIG_OSNOISE_TRACER, CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE or the bench off?)"
done
[ "$(cat /sys/devices/system/cpu/nohz_full)" = 2-3 ] ||
	error "nohz_full is '$(cat /sys/devices/system/cpu/nohz_full)', not 2-3"
echo rust > $m

# check CASE MECH WANT: WANT is "ipis N" (at least N, and as many as
# /proc/interrupts counts) or "none".
check() {
	info "$1 osnoise_cal=$n_seen proc_interrupts_cal=$n_cal"
	case $3 in
	none)
		if [ "$n_seen" = 0 ] && [ "$n_cal" = 0 ]; then
			ok $1
		else
			fail $1 "$2 on: osnoise saw $n_seen function-call IPIs on CPUs 2-3, /proc/interrupts $n_cal"
		fi
		;;
	*)
		want=${3#ipis }
		if [ "$n_seen" -ge "$want" ] && [ "$n_seen" = "$n_cal" ]; then
			ok $1
		else
			fail $1 "$2 off: osnoise saw $n_seen function-call IPIs on CPUs 2-3, /proc/interrupts $n_cal, at least $want expected"
		fi
		;;
	esac
}

# 20 flips of a 56-site key: 3 sync rounds each, each an IPI per CPU
# with deferral off.
flips=20
for mode in off on; do
	c=osnoise_flips_deferral_$mode
	# Deferral applies to a CPU from its next return to user space: the
	# loops start after the switch.
	if ! echo $mode > $d || ! bench flip 56 2; then
		fail $c "cannot switch deferral $mode or flip"
		continue
	fi
	if ! window bench flip 56 $flips; then
		fail $c "the flips or the osnoise tracer failed"
		continue
	fi
	case $mode in
	off) check $c deferral "ipis $((3 * flips * 2))" ;;
	on) check $c deferral none ;;
	esac
done
echo on > $d

# 256 vmalloc/vfree pairs: a lazy purge every 64, a kernel range flush
# each, an IPI per CPU with their deferral off.
for mode in off on; do
	c=osnoise_tlb_flushes_deferral_$mode
	if ! echo $mode > $dt; then
		fail $c "cannot switch TLB deferral $mode"
		continue
	fi
	if ! window bench vstorm 256; then
		fail $c "the storm or the osnoise tracer failed"
		continue
	fi
	case $mode in
	off) check $c "TLB deferral" "ipis 2" ;;
	on) check $c "TLB deferral" none ;;
	esac
done
echo on > $dt
exit $rc

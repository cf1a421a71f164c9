#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# A refusal made at boot stays: booted with percpu_alloc=page, whose
# vmapped per-CPU first chunk an entry could reach through a stale TLB
# entry before its own flush, kernel TLB flush deferral is turned off at
# boot with a warning naming the cause (ct_work_tlb_check()). Writing
# "on" to context_tracking_work/tlb_flush is then refused (EPERM) with a message
# naming it again, the switch still reads "off", and a vmalloc/vfree storm
# afterwards still sends its flushes to the isolated CPUs in user space
# (CPUs 2-3), none deferred. make test boots it on its own with percpu_alloc=page.
b=/sys/kernel/debug/text_poke_bench/run
dt=/sys/kernel/debug/context_tracking_work/tlb_flush
st=/sys/kernel/debug/context_tracking_work/stats
iso="2 3"
cause="the per-CPU first chunk is vmapped"

. /tests/cases.inc
plan 3
rc=0
stat() { sed -n "s/^$1 //p" $st; }
for f in $b $dt $st /demo/spin; do
	[ -e $f ] || error "$f missing (CONFIG_CONTEXT_TRACKING_WORK_TLB_FLUSH or the bench off?)"
done
case " $(cat /proc/cmdline) " in
*" percpu_alloc=page "*) ;;
*) error "booted without percpu_alloc=page: nothing refuses deferral" ;;
esac

t=tlb_defer_refused_at_boot
why=
dmesg | grep -q "context_tracking_work.tlb_flush: $cause .*: kernel TLB flushes are not deferred" ||
	why="no warning naming '$cause' at boot"
[ "$(cat $dt)" = off ] || why="$why; $dt reads '$(cat $dt)'"
if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi

t=tlb_defer_refusal_stays
why=
log_mark
if out=$(echo on 2>&1 > $dt); then
	why="writing 'on' was accepted"
else
	case $out in
	*"not permitted"*) ;;
	*) why="writing 'on' failed with '$out', not EPERM" ;;
	esac
fi
[ "$(cat $dt)" = off ] || why="$why; $dt reads '$(cat $dt)' afterwards"
log_since | grep -q "context_tracking_work/tlb_flush: refused: $cause" ||
	why="$why; no message naming '$cause' for the write"
# Any spelling kstrtobool() takes.
for v in 1 y; do
	! echo $v 2>/dev/null > $dt || why="$why; writing '$v' was accepted"
done
if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi

t=tlb_refused_flushes_sent
why=
spin_iso
before=
for c in $iso; do before="$before $(irq CAL $c)"; done
d0=$(stat tlb_deferred)
echo "vstorm 1000" > $b || why="the storm failed"
after=
for c in $iso; do after="$after $(irq CAL $c)"; done
d1=$(stat tlb_deferred)
kill $loops
wait 2>/dev/null
set -- $before
for x in $after; do
	[ $((x - $1)) -gt 0 ] || why="$why; an isolated CPU took no IPI"
	shift
done
[ "$d1" = "$d0" ] || why="$why; $((d1 - d0)) flushes deferred"
# "off", which changes nothing, is taken.
echo off > $dt || why="$why; writing 'off' failed"
info "$t cal_before=$before cal_after=$after tlb_deferred=$((d1 - d0))"
if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi
exit $rc

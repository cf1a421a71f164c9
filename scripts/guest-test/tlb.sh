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
# the new contents (through a stale TLB entry it would see the old). Then
# the same with CPU 3 taken offline and back while its flush is pending.
# Last, the flush before vmap frees a page table for a huge mapping (a PTE
# table for a 2M entry, a PMD table for a 1G one), which must never wait:
# both isolated CPUs, in user space with deferral on, take its IPI at once.
b=/sys/kernel/debug/text_poke_bench/run
dt=/sys/kernel/debug/context_tracking_work/tlb_flush
st=/sys/kernel/debug/context_tracking_work/stats
iso="2 3"

. /tests/cases.inc
plan 10
stat() { sed -n "s/^$1 //p" $st; }
# The work CPU $1 ran at entry or idle exit.
runs() { sed -n "s/^cpu$1 .* runs \([0-9]*\) .*/\1/p" /sys/kernel/debug/context_tracking_work/cpus; }
counts() { for c in $iso; do printf '%s/%s ' "$(irq CAL $c)" "$(irq TLB $c)"; done; }

rc=0
for f in $b $dt /demo/spin /demo/syscalls; do
	[ -e $f ] || error "$f missing (CONFIG_CONTEXT_TRACKING_WORK_TLB_FLUSH or the bench off?)"
done

t=tlb_defer_switch_bad_input
was=$(cat $dt)
if echo sometimes > $dt 2>/dev/null || [ "$(cat $dt)" != "$was" ]; then
	fail $t "'sometimes' was accepted"
else
	ok $t
fi

lost0=$(stat lost_at_entry)
cr30=$(stat tlb_flush_cr3)
inv0=$(stat tlb_flush_invpcid)
cr40=$(stat tlb_flush_cr4)
pairs=1000
for mode in off on; do
	t=tlb_vmalloc_storm_$mode
	echo $mode > $dt || { fail $t "cannot switch TLB deferral $mode"; continue; }
	spin_iso
	before=$(counts)
	d0=$(stat tlb_deferred)
	why=
	echo "vstorm $pairs" > $b || why="; the storm failed"
	after=$(counts)
	d1=$(stat tlb_deferred)
	kill $loops
	wait 2>/dev/null
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
	info "$t pairs=$pairs cal/tlb_before=$before cal/tlb_after=$after tlb_deferred=$((d1 - d0))"
	if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi
done

# Every flush added to an isolated CPU's word by the storm was run by
# exactly one of its entries (the audit of CONFIG_CONTEXT_TRACKING_WORK_DEBUG):
# with the loops gone the CPUs are idle, nothing pending.
t=tlb_every_flush_added_ran
why=$(audit_wrong tlb $iso | tr '\n' ';')
n=0
for c in $iso; do
	set -- $(audit $c tlb)
	info "$t cpu$c tlb_added=$1 tlb_ran=$2 tlb_lost=$3"
	n=$((n + ${1:-0}))
done
[ $n -gt 0 ] || why="$why; no flush added to an isolated CPU"
[ "$(stat lost_at_entry)" = "$lost0" ] || why="$why; $(($(stat lost_at_entry) - lost0)) kinds of work lost at entry"
if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi

# The way the entries flushed: a CR3 reload with page table isolation,
# where kernel mappings are not global and the user task's entries stay;
# else INVPCID where the CPU has it, else the CR4.PGE toggle (make test
# boots this test with pti=on too).
t=tlb_flush_path
flags=" $(sed -n 's/^flags[[:space:]]*: //p' /proc/cpuinfo | head -n 1) "
has() { case "$flags" in *" $1 "*) echo 1 ;; *) echo 0 ;; esac; }
cr3=$(($(stat tlb_flush_cr3) - cr30))
inv=$(($(stat tlb_flush_invpcid) - inv0))
cr4=$(($(stat tlb_flush_cr4) - cr40))
info "$t pcid=$(has pcid) invpcid=$(has invpcid) pti=$(has pti) entry_flushes_cr3=$cr3 entry_flushes_invpcid=$inv entry_flushes_cr4=$cr4"
if [ "$(has pti)" = 1 ]; then
	way=cr3 n=$cr3
elif [ "$(has invpcid)" = 1 ]; then
	way=invpcid n=$inv
else
	way=cr4 n=$cr4
fi
why=
[ $n -gt 0 ] && [ $((cr3 + inv + cr4)) = $n ] ||
	why="pti=$(has pti) invpcid=$(has invpcid): every entry should flush by $way, and $cr3 reloaded CR3, $inv used INVPCID, $cr4 toggled CR4.PGE"
case " $(cat /proc/cmdline) " in
*" pti=on "*) [ "$(has pti)" = 1 ] || why="$why; booted with pti=on, and page table isolation is off" ;;
esac
if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi

# The stale-mapping test, on each isolated CPU, deferral on: the flush of
# the reuse must be deferred to that CPU (its audit's tlb_added rises, the
# CPU runs one more flush at entry), or the IPI path would pass it.
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
		d0=$(stat tlb_deferred)
		set -- $(audit $c tlb)
		a0=${1:-0} r0=${2:-0}
		echo vreuse > $b 2>/dev/null
		reuse=$?
		d1=$(stat tlb_deferred)
		wait $pid || { why="$why; CPU $c: vread or vcheck failed"; break; }
		set -- $(audit $c tlb)
		a1=${1:-0} r1=${2:-0}
		reused=$(sed -n 's/^reused //p' $out)
		stale=$(sed -n 's/^stale //p' $out)
		rm -f $out
		# Not reused in time: the address was not given back, or the
		# program read before the reuse; try longer.
		[ "$reuse" = 0 ] && [ "$reused" = 1 ] || continue
		# Not deferred to it: the task was not in user space yet; try
		# longer.
		[ $((a1 - a0)) -gt 0 ] || continue
		info "$t cpu$c tlb_deferred=$((d1 - d0)) tlb_ran=$((r1 - r0))"
		[ $((r1 - r0)) -gt 0 ] || why="$why; CPU $c ran no flush at entry for the deferred one"
		[ "$stale" = 0 ] || why="$why; CPU $c read the old contents through a stale mapping"
		done_=1
		break
	done
	[ -n "$done_" ] || why="$why; CPU $c: the address was never reused, with its flush deferred, in time"
done
if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi

# CPU hotplug with a flush pending: CPU 3 reads the buffer and goes back to
# user space; CPU 0 frees the buffer and reuses its address, deferring the
# flush to CPU 3; CPU 3 goes offline (the stopper's wake-up is its entry:
# the flush runs there) and comes back; then it reads the address again,
# and must see the new contents.
t=tlb_hotplug_pending
why=
online=/sys/devices/system/cpu/cpu3/online
if [ ! -w $online ]; then
	fail $t "$online missing or not writable (CONFIG_HOTPLUG_CPU off?)"
else
	done_=
	for spins in 100000000 400000000; do
		out=$(mktemp)
		taskset -c 3 /demo/syscalls vcheck $b $spins > $out &
		pid=$!
		sleep 1
		set -- $(audit 3 tlb)
		a0=${1:-0}
		r0=$(runs 3)
		if ! echo vreuse > $b 2>/dev/null; then
			kill $pid; wait $pid 2>/dev/null; rm -f $out
			continue
		fi
		set -- $(audit 3 tlb)
		a1=${1:-0}
		if ! echo 0 > $online; then
			why="$why; CPU 3 cannot go offline"
			kill $pid; wait $pid 2>/dev/null; rm -f $out
			break
		fi
		# Still spinning (on another CPU now), or done already: then it
		# read the buffer on CPU 3 before CPU 3 went offline.
		kill $pid 2>/dev/null
		early=$?
		wait $pid 2>/dev/null
		rm -f $out
		echo 1 > $online || { why="$why; CPU 3 cannot come back online"; break; }
		# CPU 3's runs, read back online, where coming online runs its
		# word's work, and a sync_core(), once more: a flush run before
		# it went offline makes two runs.
		r1=$(runs 3)
		# Done too early, or the flush was not deferred to it: try longer.
		[ $early != 0 ] && continue
		[ $((a1 - a0)) -gt 0 ] || continue
		info "$t spins=$spins tlb_added=$((a1 - a0)) cpu3_runs=$((r1 - r0))"
		[ $((r1 - r0)) -ge 2 ] || why="$why; CPU 3 went offline without running its deferred work"
		res=$(taskset -c 3 sh -c "echo vcheck > $b && cat $b")
		reused=$(echo "$res" | sed -n 's/^reused //p')
		stale=$(echo "$res" | sed -n 's/^stale //p')
		[ "$reused" = 1 ] || why="$why; the address was not reused (reused='$reused')"
		[ "$stale" = 0 ] || why="$why; CPU 3 read the old contents after coming back online"
		done_=1
		break
	done
	[ "$(cat $online)" = 1 ] || echo 1 > $online
	[ -n "$done_" ] || [ -n "$why" ] || why="CPU 3 never had a flush deferred before going offline"
	if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi
fi

for level in pmd pud; do
	t=tlb_table_free_sent_$level
	echo on > $dt
	spin_iso
	why=
	mask=
	if ! echo "vtables $level" > $b; then
		why="'vtables $level' failed (no huge vmap: CPU without PSE or pdpe1gb?)"
	else
		mask=$(sed -n 's/^table_ipi_cpus //p' $b)
		for c in $iso; do
			[ $(((mask >> c) & 1)) = 1 ] ||
				why="$why; CPU $c took no IPI for the flush before the page table was freed"
		done
	fi
	kill $loops
	wait 2>/dev/null
	info "$t table_ipi_cpus=$mask"
	if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi
done

no_warning tlb_no_warning
exit $rc

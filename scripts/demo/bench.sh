#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Demo scenarios "flip", "lookup", "txn", "ftrace" and "scale", run inside
# the guest: every implementation, switched at run time on this one boot,
# flips the benchmark keys (or turns the function tracer on and off) and
# reports the counters, the IPIs each CPU received (/proc/interrupts, CAL)
# and the cost. One "@@ result" line per measurement; the host turns them
# into results/demo.json.
#
# Usage: bench.sh SCENARIO...   (flip, lookup, txn, ftrace, scale, isolation, noise, qpw, branch,
# pipe, irqsoff)
m=/sys/kernel/debug/text_poke_batch/mode
b=/sys/kernel/debug/text_poke_bench/run
st=/sys/kernel/debug/text_poke_batch/stats
cst=/sys/kernel/debug/context_tracking_work/stats
d=/sys/kernel/debug/context_tracking_work/sync_core
dt=/sys/kernel/debug/context_tracking_work/tlb_flush
t=/sys/kernel/tracing
# ftrace needs no benchmark keys: the bench's file only when another
# scenario is asked for.
need=$m
for scenario in "$@"; do
	[ "$scenario" = ftrace ] || need="$m $b"
done
for f in $need; do
	if [ ! -e $f ]; then
		echo "@@ error bench: $f missing (CONFIG_TEXT_POKE_BATCH_RUST or CONFIG_TEXT_POKE_BATCH_BENCH off?)"
		exit 1
	fi
done
ncpu=$(grep -c ^processor /proc/cpuinfo)

# use_mode MODE: text_poke_batch=MODE. c is upstream's batch, and is measured
# with every mechanism of this project off: deferral of syncs to isolated
# and idle CPUs and of kernel TLB flushes, whose hooks the idle CPUs c's
# IPIs wake would otherwise run (qpw is chosen at boot, and is off in
# every boot but qpw's). Another mode puts the switches back as they were.
saved=
use_mode() {
	if [ "$1" = c ]; then
		[ -n "$saved" ] ||
			saved="$(cat $d 2> /dev/null || echo -) $(cat $dt 2> /dev/null || echo -)"
		[ ! -w $d ] || echo off > $d || return 1
		[ ! -w $dt ] || echo off > $dt || return 1
	elif [ -n "$saved" ]; then
		set -- "$1" $saved
		saved=
		[ "$2" = - ] || echo "$2" > $d || return 1
		[ "$3" = - ] || echo "$3" > $dt || return 1
	fi
	echo "$1" > $m
}

# The counts of line $1 of /proc/interrupts (CAL, TLB) of every CPU,
# comma-separated.
irqline() {
	awk -v n="$ncpu" -v l="$1:" '$1 == l {
		s = $2; for (i = 3; i <= n + 1; i++) s = s "," $i; print s }' /proc/interrupts
}
cal() {
	irqline CAL
}

# Every interrupt each CPU received, all lines of /proc/interrupts,
# comma-separated: an idle CPU wakes for each.
irqs() {
	awk -v n="$ncpu" 'NR > 1 && $1 ~ /:$/ {
		for (i = 2; i <= n + 1 && $i ~ /^[0-9]+$/; i++) t[i] += $i }
		END { s = t[2] + 0; for (i = 3; i <= n + 1; i++) s = s "," t[i] + 0; print s }' \
		/proc/interrupts
}

# Each CPU's user time and all its time, in ticks, "user/total" comma-separated.
usertime() {
	awk '$1 ~ /^cpu[0-9]/ { t = 0; for (i = 2; i <= NF; i++) t += $i
		s = s (s == "" ? "" : ",") $2 "/" t } END { print s }' /proc/stat
}

# Flips for a measurement: serial takes 3 sync rounds per site. The
# upstream key (write_msr's tracepoint) has some 370 sites.
flips() {
	case "$1:$2" in
	serial:upstream) echo 4 ;;
	*:upstream) echo 10 ;;
	serial:1024) echo 4 ;;
	serial:256) echo 8 ;;
	*:1024) echo 10 ;;
	*:256) echo 20 ;;
	*:56) echo 40 ;;
	*:8) echo 100 ;;
	*) echo 200 ;;
	esac
}

# measure KIND MODE SITES: KIND flip or lookup of the bench key of SITES
# sites, or flip of upstream's write_msr key (SITES "upstream").
measure() {
	if ! use_mode "$2"; then
		echo "@@ error $1: cannot switch to text_poke_batch=$2"
		return 1
	fi
	n=$(flips "$2" "$3")
	if [ "$3" = upstream ]; then
		warm="upstream 2" cmd="upstream $n"
	else
		warm="flip $3 2" cmd="$1 $3 $n"
	fi
	# Two flips first, not counted: the first flip after a switch of
	# implementation pays for what the switch left behind.
	echo "$warm" > $b
	ib=$(irqs)
	before=$(cal)
	tb=$(irqline TLB)
	if ! echo "$cmd" > $b; then
		echo "@@ error $1: '$cmd' failed with text_poke_batch=$2"
		return 1
	fi
	after=$(cal)
	echo "@@ result scenario=$scenario cpus=$ncpu $(figures)cal_before=$before cal_after=$after tlb_before=$tb tlb_after=$(irqline TLB) irq_before=$ib irq_after=$(irqs) defer=$(defer_state)"
}

# spin CPU...: a user-space busy loop pinned on each CPU, their PIDs in
# $loops. A tenth of a second for them to get there: under -icount a
# guest second with busy CPUs costs minutes.
spin() {
	loops=
	for c in "$@"; do
		taskset -c "$c" /demo/spin &
		loops="$loops $!"
	done
	usleep 100000
}

# The kernel the demo booted: pvspin, the build with
# CONFIG_PARAVIRT_SPINLOCKS (demo_kernel=pvspin), else demo.
kernel=demo
grep -q 'demo_kernel=pvspin' /proc/cmdline && kernel=pvspin

# lockcost: 100,000 lock-unlock pairs of each per-CPU lock kind, in
# whichever qpw mode this boot runs.
lockcost() {
	if echo "lockcost 100000" > $b; then
		echo "@@ result scenario=qpw cpus=$ncpu kernel=$kernel $(figures)"
	else
		echo "@@ error qpw: 'lockcost 100000' failed"
		return 1
	fi
}

# The context switches of the kworkers bound to each CPU, comma-separated.
kworkers() {
	awk -v n="$ncpu" 'FNR == 1 { c = -1 }
		/^Name:/ && $2 ~ /^kworker\/[0-9]+:/ { split(substr($2, 9), a, ":"); c = a[1] }
		c >= 0 && /ctxt_switches/ { k[c] += $2 }
		END { for (i = 0; i < n; i++) s = s (i ? "," : "") k[i] + 0; print s }' \
		/proc/[0-9]*/status 2>/dev/null
}

# drains [mlock]: lru_add_drain_all() 100 times, a millisecond apart, from
# this (housekeeping) CPU while a task on each isolated CPU writes to new
# pages, which wait in its CPU's LRU batch (with mlock, the task's memory
# locked as a real-time task locks it, in its mlock batch), between
# user-space spins: the interrupts and kworker runs the isolated CPUs
# take, in whichever qpw mode this boot runs.
drains() {
	local go=/tmp/qpw.go how=$1 m=0 batch=LRU q o r0 c0 k0 f i
	[ -z "$how" ] || { m=1; batch=mlock; }
	q=$(dmesg | sed -n 's/.*qpw: remote per-CPU work .*(qpw=\([01]\)).*/\1/p' | tail -n 1)
	if [ "$(cat /sys/devices/system/cpu/nohz_full 2>/dev/null)" != 2-3 ] || [ -z "$q" ]; then
		echo "@@ error qpw: drains need CPUs 2-3 isolated (nohz_full=2-3) and CONFIG_QPW"
		return 1
	fi
	echo "@@ progress qpw: lru_add_drain_all() 100 times while tasks on isolated CPUs 2 and 3 refill their $batch batches, qpw=$q"
	mkdir -p /tmp
	printf 0 > $go
	for c in 2 3; do
		taskset -c $c /demo/syscalls refill $go $how > /tmp/qpw.$c &
	done
	usleep 100000
	r0=$(irqline RES)
	c0=$(cal)
	k0=$(kworkers)
	# A millisecond apart, for the tasks to refill their batches: back to
	# back, the drains after the first find them empty.
	for i in $(seq 100); do
		if ! echo "lrudrain 1" > $b; then
			echo "@@ error qpw: 'lrudrain 1' failed"
			printf 1 1<>$go
			wait
			return 1
		fi
		usleep 1000
	done
	o="res_before=$r0 res_after=$(irqline RES) cal_before=$c0 cal_after=$(cal) kworker_before=$k0 kworker_after=$(kworkers)"
	# The tasks read the new byte through their shared mapping.
	printf 1 1<>$go
	wait
	f=$(cat /tmp/qpw.2 /tmp/qpw.3 | awk '$1 == "faults" { s = s (s == "" ? "" : ",") $2 } END { print s }')
	case $f in
	*,*) ;;
	*)
		echo "@@ error qpw: the refilling tasks did not answer ('$f')"
		return 1
		;;
	esac
	echo "@@ result scenario=qpw kind=drain cpus=$ncpu qpw=$q drains=100 mlock=$m $o faults=$f"
	rm -f $go /tmp/qpw.2 /tmp/qpw.3
}

# storm TAG [mlock]: lru_add_drain_all() 100 times, a millisecond apart,
# from this CPU while a task on each of CPUs 2-3 refills its LRU batch (its
# mlock batch, with mlock), each of its writes timed (syscalls refill FILE
# timed); $t/trace cleared just before the drains and tracing stopped just
# after them. Prints "stall_ns=A,B mean_ns=A,B": each task's longest write
# and the mean of its writes.
storm() {
	local go=/tmp/qpw.go c i f
	printf 0 > $go
	for c in 2 3; do
		taskset -c $c /demo/syscalls refill $go timed $2 > /tmp/$1.$c &
	done
	usleep 100000
	echo > $t/trace
	echo 1 > $t/tracing_on
	for i in $(seq 100); do
		echo "lrudrain 1" > $b || { echo "@@ error qpw: 'lrudrain 1' failed" >&2; break; }
		usleep 1000
	done
	echo 0 > $t/tracing_on
	printf 1 1<>$go
	wait
	f=$(cat /tmp/$1.2 /tmp/$1.3 | awk '$1 == "faults" && $3 == "max_ns" {
		m = m (m == "" ? "" : ",") $4; a = a (a == "" ? "" : ",") $6 }
		END { if (m ~ /,/) print "stall_ns=" m " mean_ns=" a }')
	rm -f $go /tmp/$1.2 /tmp/$1.3
	[ -n "$f" ] || { echo "@@ error qpw: the refilling tasks did not answer" >&2; return 1; }
	echo "$f"
}

# osnoise_on: the osnoise tracer on CPUs 2-3, its own workload off (the
# tasks there are the workload), recording every interference there with
# its duration: IRQ, softirq and NMI noise, and thread noise, any other
# task that ran there. Tracing stays stopped: storm() and noise_storm()
# start it. The switch enables tracepoints, flipping their keys: before
# any window.
osnoise_on() {
	echo 0 > $t/tracing_on
	echo 2-3 > $t/osnoise/cpus
	echo NO_OSNOISE_WORKLOAD > $t/osnoise/options
	for e in irq_noise softirq_noise thread_noise nmi_noise; do
		echo 1 > $t/events/osnoise/$e/enable
	done
	echo osnoise > $t/current_tracer
}
osnoise_off() {
	echo nop > $t/current_tracer
	for e in irq_noise softirq_noise thread_noise nmi_noise; do
		echo 0 > $t/events/osnoise/$e/enable
	done
	echo OSNOISE_WORKLOAD > $t/osnoise/options
	echo 1 > $t/tracing_on
}

# osnoise_figures COMM: the noise events of $t/trace, those of the
# workload's tasks (named COMM) left out: per kind (irq, softirq, thread,
# nmi) the count, total and longest; the IRQ noise of function-call IPIs
# (cal_n, cal_ns), and all noise's total and longest, "name=value" each.
osnoise_figures() {
	awk -v comm="$1" '
		/_noise: / {
			for (i = 1; i <= NF; i++)
				if ($i ~ /_noise:$/) { k = substr($i, 1, length($i) - 7); w = $(i + 1); break }
			sub(/:[0-9]+$/, "", w)
			if (k == "thread" && w == comm) next
			d = $(NF - 1) + 0
			n[k]++; s[k] += d; if (d > m[k]) m[k] = d
			if (k == "irq" && w ~ /^call_function/) { cn++; cs += d }
			tot += d; if (d > max) max = d
		}
		END {
			for (j = split("irq softirq thread nmi", ks, " "); j > 0; j--) {
				k = ks[j]
				printf "%s_n=%d %s_ns=%d %s_max_ns=%d ", k, n[k], k, s[k], k, m[k]
			}
			printf "cal_n=%d cal_ns=%d noise_ns=%d max_noise_ns=%d", cn, cs, tot, max
		}' $t/trace
}

# noise: the drains again, as RT engineers measure what an isolated task
# sees. First with the osnoise tracer (osnoise_on; the refilling tasks'
# own runs are left out). Then with the timerlat tracer, whose thread on
# each of CPUs 2-3 wakes every millisecond: the latency of its timer
# interrupt and of its thread's wake-up, which a section with preemption
# off on that CPU (an owner spinning on its lock) delays.
noise() {
	local q f
	q=$(dmesg | sed -n 's/.*qpw: remote per-CPU work .*(qpw=\([01]\)).*/\1/p' | tail -n 1)
	if ! grep -qw osnoise $t/available_tracers || ! grep -qw timerlat $t/available_tracers; then
		echo "@@ error qpw: no osnoise or timerlat tracer (CONFIG_OSNOISE_TRACER, CONFIG_TIMERLAT_TRACER off?)"
		return 1
	fi
	echo "@@ progress qpw: the drains again under the osnoise tracer (the tasks' memory unlocked, then locked) and the timerlat tracer, CPUs 2-3, qpw=$q"
	osnoise_on
	f=$(storm noise) || return 1
	echo "@@ result scenario=qpw kind=osnoise cpus=$ncpu qpw=$q drains=100 $f $(osnoise_figures syscalls)"
	# Again with the tasks' memory locked: their pages wait in the mlock
	# batch.
	f=$(storm noise mlock) || return 1
	echo "@@ result scenario=qpw kind=osnoise cpus=$ncpu qpw=$q drains=100 mlock=1 $f $(osnoise_figures syscalls)"
	osnoise_off
	echo 0 > $t/tracing_on
	echo 1000 > $t/osnoise/timerlat_period_us
	echo timerlat > $t/current_tracer
	f=$(storm timerlat) || return 1
	echo "@@ result scenario=qpw kind=timerlat cpus=$ncpu qpw=$q drains=100 $f $(awk '
		/ context +(irq|thread) +timer_latency / {
			for (i = 1; i <= NF; i++) if ($i == "context") { k = $(i + 1); d = $(i + 3) + 0; break }
			n[k]++; if (d > m[k]) m[k] = d
		}
		END { printf "irq_n=%d irq_max_ns=%d thread_n=%d thread_max_ns=%d",
			n["irq"], m["irq"], n["thread"], m["thread"] }' $t/trace)"
	echo nop > $t/current_tracer
	echo 1 > $t/tracing_on
}

# settle: waits, up to 10 guest seconds, for the TSC to become the
# clocksource. Its refined calibration (tsc_refine_calibration_work(), a
# second or so after boot) switches to it with stop_machine(), which runs
# the CPU stopper on every CPU for a while, isolated ones included: a
# one-off of the boot that the noise windows must not catch.
settle() {
	local cs=/sys/devices/system/clocksource/clocksource0/current_clocksource i=0
	while [ "$(cat $cs)" != tsc ] && [ $i -lt 100 ]; do
		usleep 100000
		i=$((i + 1))
	done
	[ "$(cat $cs)" = tsc ] || echo "@@ progress $scenario: the clocksource is still $(cat $cs), not tsc"
}

# The function tracer on the whole kernel, or off (nop), in tracing
# instance "fn": the top level's tracer is osnoise.
fn_tracer() {
	echo "$1" > $t/instances/fn/current_tracer
}
fn_storm() {
	fn_tracer function && fn_tracer nop
}

# noise_storm STORM MODE MECH WARM CMD...: with user-space loops on CPUs
# 2-3 and the osnoise tracer on them, WARM once, then CMD in a tracing
# window: a "@@ result" line of the window's noise (osnoise_figures), its
# guest time and each CPU's CAL count around CMD (starting and stopping
# the tracer hooks its tracepoints, which sends IPIs of its own before it
# samples and after). MODE is text_poke's, MECH the state of the storm's
# mechanism, both set by the caller.
noise_storm() {
	local storm=$1 mode=$2 mech=$3 warm=$4 before after t0 t1 ok=1
	shift 4
	spin 2 3
	osnoise_on
	$warm || ok=
	echo > $t/trace
	echo 1 > $t/tracing_on
	before=$(cal)
	t0=$(now_ns)
	"$@" || ok=
	t1=$(now_ns)
	after=$(cal)
	echo 0 > $t/tracing_on
	if [ -n "$ok" ]; then
		echo "@@ result scenario=noise storm=$storm mode=$mode mech=$mech cpus=$ncpu window_ns=$((t1 - t0)) cal_before=$before cal_after=$after $(osnoise_figures spin)"
	else
		echo "@@ error noise: the $storm storm failed with text_poke_batch=$mode, mechanism $mech"
	fi
	osnoise_off
	kill $loops
	wait 2>/dev/null
	[ -n "$ok" ]
}
bench_cmd() {
	echo "$*" > $b
}

# The bench's last figures, "name=value " each.
figures() {
	tr '\n' ' ' < $b | sed 's/\([a-z_]*\) \([^ ]*\) */\1=\2 /g'
}

# Deferral to idle and isolated CPUs: on, off, or none (CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE off).
defer_state() {
	cat $d 2>/dev/null || echo none
}

# The clock of ftrace, in ns: "date +%s%N" if this busybox's date knows
# %N, else the "now at N nsecs" line of /proc/timer_list (the monotonic
# clock). With -icount shift=0 both count guest instructions.
case $(date +%N 2>/dev/null) in
''|*[!0-9]*) clock=timer_list ;;
*) clock=date ;;
esac
now_ns() {
	if [ $clock = date ]; then
		date +%s%N
	else
		awk '$1 == "now" && $2 == "at" { print $3; exit }' /proc/timer_list
	fi
}

# The text_poke_batch/stats figures ftrace reports, in this order (max_batch and
# max_batch_ns are the largest batch and the longest one since the last
# write to the stats file, the others count), then the CAL counts.
snap() {
	echo "$(awk '{ v[$1] = $2 } END {
		print v["syncs"], v["batches"], v["entries"], v["int3_hits"], v["ipis"],
			v["batch_ns"], v["max_batch"], v["max_batch_ns"] }' $st) $(cal)"
}

# tracer NAME: writes NAME to current_tracer.
tracer() {
	if ! echo "$1" > $t/current_tracer; then
		echo "@@ error ftrace: cannot set current_tracer to $1 with text_poke_batch=$mode"
		return 1
	fi
}

# ftrace_report OP LINES: one "@@ result" line for OP from LINES, a round a
# line: "NS SNAP_BEFORE SNAP_AFTER". Counters are the deltas summed over
# the rounds; cal_before and cal_after the CAL counts of each CPU summed
# over the rounds, so that their difference is the IPIs each CPU received
# in all the rounds; max_batch and max_batch_ns are the largest over the
# rounds (the maxima are reset before each write to current_tracer).
ftrace_report() {
	printf '%s' "$2" | awk -v op="$1" -v mode="$mode" -v ncpu="$ncpu" \
		-v sites="$sites" -v clock="$clock" '
	NF == 19 {
		rounds++
		ns += $1
		for (i = 0; i < 6; i++)
			d[i] += $(11 + i) - $(2 + i)
		if ($17 > max)
			max = $17
		if ($18 > maxns)
			maxns = $18
		split($10, cb, ",")
		split($19, ca, ",")
		for (i = 1; i <= ncpu; i++) {
			before[i] += cb[i]
			after[i] += ca[i]
		}
	}
	END {
		if (!rounds)
			exit 1
		b = before[1]
		a = after[1]
		for (i = 2; i <= ncpu; i++) {
			b = b "," before[i]
			a = a "," after[i]
		}
		print "@@ result scenario=ftrace cpus=" ncpu " mode=" mode " op=" op \
			" sites=" sites " rounds=" rounds " clock=" clock " ns=" ns \
			" syncs=" d[0] " batches=" d[1] " entries=" d[2] " int3_hits=" d[3] \
			" ipis=" d[4] " batch_ns=" d[5] " max_batch=" max " max_batch_ns=" maxns \
			" cal_before=" b " cal_after=" a
	}'
}

# ftrace_mode MODE: the function tracer on the whole kernel enabled and
# disabled $rounds times with text_poke_batch=MODE; a "@@ result" line for each
# of enable and disable. The clock and the counters are read around each
# write to current_tracer, each read a process of its own.
ftrace_mode() {
	mode=$1
	if ! use_mode "$mode"; then
		echo "@@ error ftrace: cannot switch to text_poke_batch=$mode"
		return 1
	fi
	# One enable and disable first, not counted, as in measure().
	if ! tracer function; then
		tracer nop
		return 1
	fi
	tracer nop || return 1
	on=
	off=
	i=0
	while [ $i -lt $rounds ]; do
		echo 0 > $st
		s0=$(snap)
		t0=$(now_ns)
		if ! tracer function; then
			tracer nop
			return 1
		fi
		t1=$(now_ns)
		s1=$(snap)
		echo 0 > $st
		s1r=$(snap)
		t2=$(now_ns)
		tracer nop || return 1
		t3=$(now_ns)
		s2=$(snap)
		on="$on$((t1 - t0)) $s0 $s1
"
		off="$off$((t3 - t2)) $s1r $s2
"
		i=$((i + 1))
	done
	ftrace_report enable "$on" && ftrace_report disable "$off"
}

# irqsoff_window MODE OP REP CMD...: the longest section of any CPU with
# interrupts off (preemption off, with the preemptoff tracer) while CMD
# runs with text_poke_batch=MODE, from the tracer $tracer (current_tracer), and
# the places it started and ended, in $irqsoff_out. Only shell builtins around CMD: a process of the script's
# own would add its fork and exec to the window. Nothing on the console
# until the last window: the serial port's interrupt handler sending it
# would be in the windows.
irqsoff_out=/tmp/irqsoff
irqsoff_window() {
	mode=$1 op=$2 rep=$3
	shift 3
	echo 0 > $t/tracing_max_latency || return 1
	if ! "$@"; then
		echo "@@ error irqsoff: '$*' failed with text_poke_batch=$mode" >> $irqsoff_out
		return 1
	fi
	read -r lat < $t/tracing_max_latency
	where=$(sed -n -e 's/^#  => started at: *\([^+ ]*\).*/start=\1/p' \
		-e 's/^#  => ended at: *\([^+ ]*\).*/end=\1/p' $t/trace | tr '\n' ' ')
	echo "@@ result scenario=irqsoff tracer=$tracer cpus=$ncpu mode=$mode op=$op rep=$rep us=$lat $where" >> $irqsoff_out
}
# bflip SITES FLIPS: flips the bench key.
bflip() {
	echo "flip $1 $2" > $b
}
# ftrace_instance NAME: the function tracer on the whole kernel, or off
# (nop), in the tracing instance of irqsoff: the top level's tracer is
# irqsoff or preemptoff.
ftrace_instance() {
	echo "$1" > $t/instances/irqsoff/current_tracer
}
# irqsoff_rep REP MODE: with text_poke_batch=MODE, one 1024-site flip and one
# enable and disable of the function tracer not counted, then the
# windows of a 1024-site flip and of a 4096-site one (enable and disable:
# two flips each), of the function tracer's enable and disable, and of
# nothing.
irqsoff_rep() {
	if ! use_mode "$2"; then
		echo "@@ error irqsoff: cannot switch to text_poke_batch=$2" >> $irqsoff_out
		return 1
	fi
	bflip 1024 2 && ftrace_instance function && ftrace_instance nop || {
		echo "@@ error irqsoff: warm-up failed with text_poke_batch=$2" >> $irqsoff_out
		return 1
	}
	irqsoff_window "$2" flip1024 "$1" bflip 1024 2 &&
	irqsoff_window "$2" flip4096 "$1" bflip 4096 2 &&
	irqsoff_window "$2" ftrace_enable "$1" ftrace_instance function &&
	irqsoff_window "$2" ftrace_disable "$1" ftrace_instance nop &&
	irqsoff_window "$2" none "$1" true
}

# Seed 004's pipe ping-pong with the scheduler's sched_schedstats key off
# and on, and what one flip of that key costs in each implementation.
ss=/proc/sys/kernel/sched_schedstats
pipe_rounds=2000
pingpong() {
	for rep in 1 2 3; do
		for on in 0 1; do
			echo $on > $ss || return 1
			if ! out=$(taskset -c 1 /demo/syscalls pipe $pipe_rounds); then
				echo "@@ error pipe: the ping-pong failed with sched_schedstats=$on"
				return 1
			fi
			echo "@@ result scenario=pipe kind=pingpong schedstats=$on rep=$rep $(echo "$out" |
				sed 's/\([a-z_]*\) \([^ ]*\) */\1=\2 /g')"
		done
	done
	echo 0 > $ss
}
# pipe_flip MODE: sched_schedstats enabled and disabled 10 times from CPU 0
# with text_poke_batch=MODE: the Rust batch's counts (syncs, entries) and each
# CPU's CAL count, before and after.
pipe_flip() {
	use_mode "$1" || return 1
	echo 0 > $ss
	before="$(awk '$1 == "syncs" || $1 == "entries" { printf "%s_before=%s ", $1, $2 }' $st)"
	cal_before=$(cal)
	taskset -c 0 sh -c "for i in 1 2 3 4 5 6 7 8 9 10; do echo 1 > $ss; echo 0 > $ss; done" ||
		return 1
	cal_after=$(cal)
	after="$(awk '$1 == "syncs" || $1 == "entries" { printf "%s_after=%s ", $1, $2 }' $st)"
	echo "@@ result scenario=pipe kind=flip mode=$1 flips=20 cal_before=$cal_before" \
		"cal_after=$cal_after $before$after"
}

rc=0
for scenario in "$@"; do
	case $scenario in
	flip) modes="serial c rust" ;;
	lookup) modes="c rust" ;;
	scale)
		echo "@@ progress scale: 56 sites on $ncpu vCPUs, serial c rust; a Rust per-CPU lock on each CPU"
		for mode in serial c rust; do
			measure flip "$mode" 56 || rc=1
		done
		# The fast path of a Rust per-CPU lock on every CPU, alone
		# and while another CPU holds its own data in a loop.
		if echo "percpu 20000" > $b; then
			echo "@@ result scenario=percpu cpus=$ncpu $(figures)"
		else
			echo "@@ error scale: 'percpu 20000' failed"
			rc=1
		fi
		echo "@@ done scale cpus=$ncpu"
		continue
		;;
	txn)
		echo "@@ progress txn: 8 keys x 64 sites, one by one and as one transaction, c and rust"
		for mode in c rust; do
			# Two flips first, not counted, as in measure().
			if ! use_mode $mode || ! echo "txn 2" > $b || ! echo "txn 20" > $b; then
				echo "@@ error txn: 'txn 20' failed with text_poke_batch=$mode"
				rc=1
				continue
			fi
			echo "@@ result scenario=txn cpus=$ncpu $(tr '\n' ' ' < $b | sed 's/\([a-z_]*\) \([^ ]*\) */\1=\2 /g')"
		done
		echo "@@ done txn"
		continue
		;;
	isolation)
		iso=$(cat /sys/devices/system/cpu/nohz_full 2>/dev/null)
		if [ "$iso" != 2-3 ]; then
			echo "@@ error isolation: nohz_full is '$iso', not 2-3 (CONFIG_NO_HZ_FULL off, or booted without nohz_full=2-3?)"
			rc=1
			continue
		fi
		if [ ! -e $d ]; then
			echo "@@ error isolation: $d missing (CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE off?)"
			rc=1
			continue
		fi
		echo "@@ progress isolation: user-space loops on isolated CPUs 2 and 3, flips from CPU 0, 1 to 256 sites: c, rust with deferral off and on"
		for defer in off on; do
			echo $defer > $d
			# Deferral applies to a CPU from its next return to user
			# space: the loops start after the switch.
			spin 2 3
			u0=$(usertime)
			for sites in 1 8 56 256; do
				for mode in c rust; do
					# text_poke_batch=c is upstream's: deferral does not apply.
					[ $defer = on ] && [ $mode = c ] && continue
					measure flip "$mode" "$sites" || rc=1
				done
			done
			u1=$(usertime)
			kill $loops
			wait 2>/dev/null
			echo "@@ result scenario=isolation kind=usertime cpus=$ncpu defer=$defer user_before=$u0 user_after=$u1"
		done
		echo "@@ progress isolation: kernel entry cost, getpid() on isolated CPU 2, deferral off and on"
		# Off means both kinds: the word says user if either is on.
		dt=/sys/kernel/debug/context_tracking_work/tlb_flush
		for rep in 1 2 3; do
			for defer in off on; do
				echo $defer > $d
				[ -e $dt ] && echo $defer > $dt
				out=$(taskset -c 2 /demo/syscalls 20000)
				echo "@@ result scenario=isolation kind=getpid cpus=$ncpu defer=$defer rep=$rep $(echo "$out" | sed 's/\([a-z_]*\) \([^ ]*\) */\1=\2 /g')"
			done
		done
		if echo "entry 20000" > $b; then
			echo "@@ result scenario=isolation cpus=$ncpu $(figures)"
		else
			echo "@@ error isolation: 'entry 20000' failed"
			rc=1
		fi
		if [ -e $dt ]; then
			echo "@@ progress isolation: 1000 vmalloc/vfree pairs on a housekeeping CPU, kernel TLB flush deferral off and on"
			for tlb in off on; do
				echo $tlb > $dt
				spin 2 3
				before=$(cal)
				tb=$(irqline TLB)
				d0=$(sed -n 's/^tlb_deferred //p' $cst)
				if echo "vstorm 1000" > $b; then
					echo "@@ result scenario=isolation cpus=$ncpu defer_tlb=$tlb $(figures)cal_before=$before cal_after=$(cal) tlb_before=$tb tlb_after=$(irqline TLB) deferred_before=$d0 deferred_after=$(sed -n 's/^tlb_deferred //p' $cst)"
				else
					echo "@@ error isolation: 'vstorm 1000' failed"
					rc=1
				fi
				kill $loops
				wait 2>/dev/null
			done
			echo on > $dt
		fi
		echo on > $d
		echo "@@ done isolation"
		continue
		;;
	noise)
		iso=$(cat /sys/devices/system/cpu/nohz_full 2>/dev/null)
		if [ "$iso" != 2-3 ] || [ ! -e $d ] || ! grep -qw osnoise $t/available_tracers; then
			echo "@@ error noise: needs CPUs 2-3 isolated (nohz_full is '$iso'), $d and the osnoise tracer"
			rc=1
			continue
		fi
		settle
		echo "@@ progress noise: the osnoise tracer on isolated CPUs 2-3 running user-space loops, during 40 flips of a 56-site key and the function tracer's enable and disable (c, rust with deferral off and on), and 1000 vmalloc/vfree pairs (kernel TLB flush deferral off and on)"
		mkdir -p $t/instances/fn
		for run in c:off rust:off rust:on; do
			mode=${run%:*}
			defer=${run#*:}
			use_mode $mode
			echo $defer > $d
			# text_poke_batch=c is upstream's: deferral does not apply.
			[ $mode = c ] && defer=n/a
			noise_storm flip $mode $defer "bench_cmd flip 56 2" bench_cmd flip 56 40 || rc=1
			noise_storm ftrace $mode $defer fn_storm fn_storm || rc=1
		done
		use_mode rust
		echo on > $d
		dt=/sys/kernel/debug/context_tracking_work/tlb_flush
		if [ -e $dt ]; then
			for tlb in off on; do
				echo $tlb > $dt
				noise_storm vmalloc rust $tlb "bench_cmd vstorm 16" bench_cmd vstorm 1000 || rc=1
			done
			echo on > $dt
		fi
		rmdir $t/instances/fn
		echo "@@ done noise"
		continue
		;;
	ftrace)
		if [ ! -e $t/current_tracer ] || [ ! -e $st ]; then
			echo "@@ error ftrace: $t/current_tracer or $st missing (tracefs not mounted, CONFIG_FUNCTION_TRACER off?)"
			rc=1
			continue
		fi
		sites=$(wc -l < $t/available_filter_functions | tr -d ' ')
		case $(now_ns) in
		''|*[!0-9]*)
			echo "@@ error ftrace: no clock (date +%s%N, /proc/timer_list)"
			rc=1
			continue
			;;
		esac
		rounds=2
		echo "@@ progress ftrace: the function tracer on $sites functions, enabled and disabled $rounds times, c and rust"
		for mode in c rust; do
			ftrace_mode $mode || rc=1
		done
		echo "@@ done ftrace"
		continue
		;;
	qpw)
		echo "@@ progress qpw: the local fast path of per-CPU locks, local_lock and qpw lock"
		lockcost || rc=1
		# The paravirtualised spinlocks' kernel: the lock cost alone.
		if [ $kernel = demo ]; then
			settle
			drains || rc=1
			drains mlock || rc=1
			noise || rc=1
		fi
		echo "@@ done qpw"
		continue
		;;
	irqsoff)
		if [ ! -e $t/options/function-trace ] ||
			! grep -qw irqsoff $t/available_tracers; then
			echo "@@ error irqsoff: no irqsoff tracer (a kernel without CONFIG_IRQSOFF_TRACER?)"
			rc=1
			continue
		fi
		if ! grep -qw preemptoff $t/available_tracers; then
			echo "@@ error irqsoff: no preemptoff tracer (a kernel without CONFIG_PREEMPT_TRACER?)"
			rc=1
			continue
		fi
		if ! echo "sites 4096" > $b; then
			echo "@@ error irqsoff: no key of 4096 sites (a kernel without CONFIG_TEXT_POKE_BATCH_BENCH_LARGE?)"
			rc=1
			continue
		fi
		echo "@@ progress irqsoff: longest interrupts-off and preemption-off sections during 1024- and 4096-site flips and the function tracer's enable and disable, c and rust"
		# The tracers' own function tracing off: it would patch the
		# whole kernel's text itself.
		echo 0 > $t/options/function-trace
		mkdir -p $t/instances/irqsoff
		mkdir -p /tmp
		: > $irqsoff_out
		# The line above sent first.
		usleep 100000
		for tracer in irqsoff preemptoff; do
			if ! echo $tracer > $t/current_tracer; then
				echo "@@ error irqsoff: cannot set current_tracer to $tracer" >> $irqsoff_out
				rc=1
				continue
			fi
			# The modes in turn, so that what builds up in the boot
			# (RCU callbacks of the tracer's switches, say) falls on
			# both.
			for rep in 1 2 3 4 5; do
				for mode in c rust; do
					irqsoff_rep $rep $mode || rc=1
				done
			done
			echo nop > $t/current_tracer
		done
		cat $irqsoff_out
		echo "@@ done irqsoff"
		continue
		;;
	branch)
		echo "@@ progress branch: the fast path of a branch, 100,000 calls per variant"
		if echo "branch 100000" > $b; then
			echo "@@ result scenario=branch cpus=$ncpu $(figures)"
		else
			echo "@@ error branch: 'branch 100000' failed"
			rc=1
		fi
		echo "@@ done branch"
		continue
		;;
	pipe)
		if [ ! -w $ss ]; then
			echo "@@ error pipe: $ss missing (CONFIG_SCHEDSTATS off?)"
			rc=1
			continue
		fi
		echo "@@ progress pipe: $pipe_rounds round trips on CPU 1, sched_schedstats off and on; one flip of it, c and rust"
		pingpong || rc=1
		for mode in c rust; do
			pipe_flip $mode || { echo "@@ error pipe: flip with text_poke_batch=$mode failed"; rc=1; }
		done
		use_mode rust
		echo "@@ done pipe"
		continue
		;;
	*)
		echo "@@ error unknown scenario $scenario"
		rc=1
		continue
		;;
	esac
	echo "@@ progress $scenario: modes $modes, 1 to 1024 sites"
	for sites in 1 8 56 256 1024; do
		for mode in $modes; do
			measure "$scenario" "$mode" "$sites" || rc=1
		done
	done
	if [ "$scenario" = flip ]; then
		for mode in $modes; do
			measure flip "$mode" upstream || rc=1
		done
		# The share of idle deferral: rust with deferral off, every
		# idle CPU woken by every sync round, as by c's.
		if [ -w $d ]; then
			echo off > $d
			for sites in 1 8 56; do
				measure flip rust "$sites" || rc=1
			done
			echo on > $d
		fi
	fi
	echo "@@ done $scenario"
done
use_mode rust
exit $rc

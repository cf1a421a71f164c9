#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make demo: build the overlay kernel if needed, boot it in QEMU
# (single-threaded TCG, 4 vCPUs, -icount shift=0) with a busybox initramfs,
# run the demo scenarios inside the guest and write results/demo.json,
# results/REPORT.md and plots.
#
# Usage: demo.sh [SCENARIO...]   (default: all of them)
#   sample  flip the Rust sample key through debugfs
#   flip    IPI rounds, IPIs and cost per flip, 1 to 1024 sites, per mode
#   lookup  cost of an INT3 hit during a flip, 1 to 1024 sites, c and rust
#   txn     8 keys x 64 sites flipped one by one and as one transaction
#   ftrace  the function tracer on the whole kernel enabled and disabled, c and rust
#   scale   IPIs per flip of a 56-site key on 2, 4, 8 and 16 vCPUs, and
#           a Rust per-CPU lock's fast path on every CPU of each boot
#   isolation  IPIs each CPU receives per flip while CPUs 2-3, isolated
#           (nohz_full=2-3 isolcpus=2-3 rcu_nocbs=2-3), run user-space loops:
#           a boot of its own
#   noise   what the osnoise tracer sees on isolated CPUs 2-3 running
#           user-space loops during 40 flips of a 56-site key and the
#           function tracer's enable and disable (c, rust with deferral
#           off and on) and 1000 vmalloc/vfree pairs (kernel TLB flush
#           deferral off and on): in isolation's boot
#   qpw     per-CPU lock cost (local_lock, qpw lock) and the interrupts
#           isolated CPUs take per lru_add_drain_all(), and what the
#           osnoise and timerlat tracers see on them meanwhile: two boots
#           with CPUs 2-3 isolated, qpw=0 and qpw=1; then the lock cost
#           in a build with paravirtualised spinlocks, booted both ways
#   branch  the fast path of a branch: no check, Rust unlikely and likely
#           sites both ways, an AtomicBool, C's unlikely site
#   pipe    seed 004's pipe ping-pong, instructions per round trip with the
#           scheduler's sched_schedstats key off and on, and one flip of
#           that key with c and rust
#   irqsoff the longest interrupts-off section, and the longest
#           preemption-off one, during flips of 1024 and 4096 sites (64
#           pages) and during the function tracer's enable and disable, c
#           and rust: a kernel of its own with the irqsoff and preemptoff
#           tracers and the 4096-site key (build directory build-irqsoff),
#           whose hooks in every interrupt and preemption toggle would
#           shift the other figures, booted on one vCPU: with several,
#           single-threaded TCG runs them in turn, and the instructions of
#           the others fall inside any section that spans a turn
#   hooks   idle deferral's hooks in real cycles on the host CPU, beside
#           context tracking's own: no boot (tests/host's hook_cycles)
#
# With some scenarios named, results/demo.json keeps the sections of the
# others from its last run (each section records the revision that measured
# it).
#
# JLRS_DEMO_TIMEOUT: seconds a guest may run (default 1200).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
step demo

ALL=(sample flip lookup txn ftrace scale isolation noise qpw branch pipe irqsoff hooks)
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=("${ALL[@]}")
for s in "${scenarios[@]}"; do
	[[ " ${ALL[*]} " == *" $s "* ]] || die "unknown scenario '$s' (known: ${ALL[*]})"
done

jlrs_prepare
jlrs_base_env

mkopts=()
while read -r o; do mkopts+=("--make_options=$o"); done < <(jlrs_make_opts)
# build_kernel DIR KUNITCONFIG [KUNIT.PY OPTION...]: the overlay kernel in
# build directory DIR, configured by KUNITCONFIG, incremental.
build_kernel() {
	local dir=$1 kunitconfig=$2 log
	shift 2
	log=$JLRS_CACHE/demo-build-$(basename "$dir").log
	msg "building the kernel in $dir (incremental)"
	(cd "$JLRS_SRC" && python3 tools/testing/kunit/kunit.py build --arch=x86_64 \
		--kunitconfig="$kunitconfig" \
		--build_dir="$dir" --jobs="$(nproc)" "$@" "${mkopts[@]}") > "$log" 2>&1 ||
		{ tail -n 30 "$log" >&2; die "kernel build failed (log: $log)"; }
	[ -f "$dir/arch/x86/boot/bzImage" ] || die "no kernel image in $dir after the build"
}
# make test's kernel without what only testing needs: the audit of
# deferred work adds to every entry that takes work. Its own build
# directory, first made from make test's, so that neither rebuilds all.
demo_build=$JLRS_CACHE/$JLRS_BASE_VERSION/build-demo
if [ ! -d "$demo_build" ] && [ -f "$JLRS_BUILD/.config" ]; then
	cp -a "$JLRS_BUILD" "$demo_build.tmp" && mv "$demo_build.tmp" "$demo_build" ||
		die "cannot copy $JLRS_BUILD to $demo_build"
fi
no_debug=--kconfig_add=CONFIG_CONTEXT_TRACKING_WORK_DEBUG=n
kernel=$demo_build/arch/x86/boot/bzImage
# .jlrs-built: the demo's kernel is built (.ci/run starts make
# test-matrix's builds, some of them copies of this one, after it).
rm -f "$demo_build/.jlrs-built"
build_kernel "$demo_build" "$JLRS_SRC/arch/x86/kernel/text_poke_batch/.kunitconfig" "$no_debug"
date > "$demo_build/.jlrs-built"

# Whether anything failed.
problems=0
hooks_log=
# hooks: idle deferral's hooks in real cycles, on the host CPU, before
# anything else runs beside them (tests/host/src/bin/hook_cycles.rs).
if [[ " ${scenarios[*]} " == *" hooks "* ]]; then
	hooks_log=$JLRS_CACHE/$JLRS_BASE_VERSION/demo/host-hooks.log
	mkdir -p "$(dirname "$hooks_log")"
	msg "measuring the idle hooks on the host CPU (log: $hooks_log)"
	if ! CARGO_TARGET_DIR=$JLRS_CACHE/host-target/release CARGO_HTTP_TIMEOUT=30 \
		cargo run --quiet --release --locked --manifest-path "$JLRS_TOP/tests/host/Cargo.toml" \
		--bin hook_cycles > "$hooks_log"; then
		msg "error: the host benchmark of the idle hooks failed (log: $hooks_log)"
		hooks_log=
		problems=1
	fi
fi

# The kernels of the irqsoff scenario and of the qpw scenario's
# paravirtualised spinlocks, each in a build directory of its own, built
# in the background at a lower priority while the demo kernel's boots run
# (QEMU's TCG uses one core, and -icount makes the guest's figures
# independent of the host's load): each build's exit status in
# $status/NAME. build-pvspin: the per-CPU locks' cost with paravirtualised
# spinlocks, as distributions build (a queued spinlock's unlock is then a
# patched call site, which the qpw lock's unlock cannot replace by its own
# store). build-irqsoff: the irqsoff and preemptoff tracers, whose hooks
# in every interrupt and preemption toggle would shift the other figures,
# and the benchmark's key of 4096 sites, which would move the others' text.
# build-pvspin boots the benchmark alone, and has only what it needs
# (scripts/kunitconfig/pvspin); build-irqsoff is the demo kernel's
# configuration and its own options.
variant_dir() { echo "$JLRS_CACHE/$JLRS_BASE_VERSION/build-$1"; }
variant_build() {
	case $1 in
	pvspin)
		build_kernel "$(variant_dir pvspin)" "$JLRS_TOP/scripts/kunitconfig/pvspin"
		;;
	irqsoff)
		build_kernel "$(variant_dir irqsoff)" \
			"$JLRS_SRC/arch/x86/kernel/text_poke_batch/.kunitconfig" \
			--kconfig_add=CONFIG_IRQSOFF_TRACER=y --kconfig_add=CONFIG_PREEMPT_TRACER=y \
			--kconfig_add=CONFIG_TEXT_POKE_BATCH_BENCH_LARGE=y "$no_debug"
		;;
	esac
}
variants=()
# irqsoff first: its boot is the longer, and runs while pvspin builds.
[[ " ${scenarios[*]} " != *" irqsoff "* ]] || variants+=(irqsoff)
[[ " ${scenarios[*]} " != *" qpw "* ]] || variants+=(pvspin)
work=$JLRS_CACHE/$JLRS_BASE_VERSION/demo
status=$work/built
rm -rf "$status"
mkdir -p "$status"
# What runs in the background: the variants' builds, and the second lane
# of boots (below). A run stopped by a signal stops them too.
background=()
trap 'for pid in "${background[@]}"; do jlrs_kill_tree "$pid"; done' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
builder=
if [ ${#variants[@]} -gt 0 ]; then
	(
		renice -n 10 -p "$BASHPID" > /dev/null
		for name in "${variants[@]}"; do
			rc=0
			(variant_build "$name") || rc=$?
			echo "$rc" > "$status/$name"
		done
	) &
	builder=$!
	background+=("$builder")
fi
# built NAME: wait for the background build of NAME; false, saying why,
# if it failed.
built() {
	[ -f "$status/$1" ] ||
		msg "waiting for the $1 kernel (log: $JLRS_CACHE/demo-build-build-$1.log)"
	while [ ! -f "$status/$1" ]; do
		kill -0 "$builder" 2> /dev/null || break
		sleep 5
	done
	[ "$(cat "$status/$1" 2> /dev/null)" = 0 ] && return 0
	msg "error: the $1 kernel's build failed (log: $JLRS_CACHE/demo-build-build-$1.log)"
	problems=1
	return 1
}

jlrs_initramfs_tools "$demo_build"

# The isolated CPUs' user-space programs.
jlrs_user_programs "$work"
{
	jlrs_initramfs_base "$JLRS_TOP/scripts/demo/guest-init.sh"
	cat <<LIST
dir /demo 0755 0 0
file /demo/sample.sh $JLRS_TOP/scripts/demo/sample.sh 0755 0 0
file /demo/bench.sh $JLRS_TOP/scripts/demo/bench.sh 0755 0 0
file /demo/spin $work/spin 0755 0 0
file /demo/syscalls $work/syscalls 0755 0 0
LIST
} > "$work/initramfs.list"
"$gen" "$work/initramfs.list" > "$work/initramfs.cpio" ||
	die "gen_init_cpio failed"

# boot CPUS SCENARIO...: one guest run; its log is
# $work/guest-<cpus><boot_tag>.log, added to $loglist, and a failure is a
# line of $work/failed (a boot may run in the background lane, below).
# $boot_args: more kernel arguments; $boot_clock: QEMU's clock options.
boot_args=
boot_tag=
boot_clock="-icount shift=0,sleep=off"
limit=${JLRS_DEMO_TIMEOUT:-1200}
[[ "$limit" =~ ^[1-9][0-9]*$ ]] || die "JLRS_DEMO_TIMEOUT=$limit: expected a number of seconds"
loglist=$work/logs.list
rm -f "$work/failed" "$work/logs.list" "$work/logs-lane.list" "$work"/logs-pvspin?.list
boot() {
	local cpus=$1 list log rc
	shift
	list=$(IFS=,; echo "$*")
	log=$work/guest-$cpus$boot_tag.log
	echo "$log" >> "$loglist"
	msg "booting Linux $JLRS_BASE_VERSION in QEMU (TCG, $cpus vCPUs${boot_clock:+, $boot_clock}): $list"
	# -icount shift=0: the guest clock counts instructions (1 ns each)
	# and jumps over idle time, so costs are repeatable, and independent
	# of what else the host runs.
	set +e
	# shellcheck disable=SC2086 # $boot_clock is several arguments.
	timeout "$limit" qemu-system-x86_64 -accel tcg,thread=single -smp "$cpus" -m 1024 \
		$boot_clock -nographic -no-reboot -bios qboot.rom \
		-kernel "${boot_kernel:-$kernel}" -initrd "$work/initramfs.cpio" \
		-append "console=ttyS0 kunit.enable=0 panic=-1 oops=panic loglevel=4 log_buf_len=8M demo=$list $boot_args" \
		2>&1 | jlrs_console | tee "$log" |
		sed -un -e 's/^@@ progress /[demo] /p' -e 's/^@@ error /[demo] error: /p'
	rc=${PIPESTATUS[0]}
	set -e
	if [ "$rc" = 124 ]; then
		msg "error: the guest ($cpus vCPUs: $list) timed out after $limit s (log: $log)"
		echo "$log" >> "$work/failed"
	fi
	if grep -qE 'Oops|BUG:|WARNING:|Kernel panic' "$log"; then
		grep -E 'Oops|BUG:|WARNING:|Kernel panic' "$log" >&2
		msg "error: the guest kernel reported a problem ($cpus vCPUs: $list, log: $log)"
		echo "$log" >> "$work/failed"
	fi
	grep -q '^@@ end 0' "$log" || {
		msg "error: the demo did not complete in the guest ($cpus vCPUs: $list, log: $log)"
		echo "$log" >> "$work/failed"
	}
	if [[ " $* " == *" sample "* ]]; then
		sed -n '/^@@ progress sample/,/^@@ done sample/s/^@@ \{0,1\}//p' "$log"
	fi
}

# Every scenario but isolation, noise, qpw and irqsoff on 4 vCPUs; scale
# also boots 2, 8 and 16, isolation and noise boot 4 vCPUs with CPUs 2 and
# 3 isolated, qpw boots them twice, with qpw=0 and qpw=1, and irqsoff boots
# its own kernel on one. Two lanes of boots, each a QEMU on one core:
# those with CPUs isolated in the background, the others here; and the
# variants' builds at a lower priority beside them.
main=()
isolated=()
for s in "${scenarios[@]}"; do
	case $s in
	isolation|noise) isolated+=("$s") ;;
	qpw|irqsoff|hooks) ;;
	*) main+=("$s") ;;
	esac
done
lane=
if [ ${#isolated[@]} -gt 0 ] || [[ " ${scenarios[*]} " == *" qpw "* ]]; then
	(
		loglist=$work/logs-lane.list
		if [ ${#isolated[@]} -gt 0 ]; then
			# ftrace=nop: no ftrace startup self-tests, which the main
			# boot runs. tsc=reliable: no clocksource watchdog skew
			# check, which IPIs every online CPU in turn (see
			# scripts/guest-test.sh).
			boot_args="nohz_full=2-3 isolcpus=2-3 rcu_nocbs=2-3 tsc=reliable ftrace=nop"
			boot_tag=-isolated
			boot 4 "${isolated[@]}"
		fi
		if [[ " ${scenarios[*]} " == *" qpw "* ]]; then
			for q in 0 1; do
				boot_args="nohz_full=2-3 isolcpus=2-3 rcu_nocbs=2-3 tsc=reliable ftrace=nop qpw=$q"
				boot_tag=-qpw$q
				boot 4 qpw
			done
		fi
	) &
	lane=$!
	background+=("$lane")
fi
[ ${#main[@]} -eq 0 ] || boot 4 "${main[@]}"
if [[ " ${scenarios[*]} " == *" scale "* ]]; then
	for cpus in 2 8 16; do
		boot "$cpus" scale
	done
fi
if [ -n "$lane" ]; then
	wait "$lane" || { msg "error: the lane of boots with isolated CPUs failed"; problems=1; }
	# Their logs in the order of the boots: after the main lane's.
	[ ! -f "$work/logs-lane.list" ] || cat "$work/logs-lane.list" >> "$loglist"
fi
# The pvspin kernel's two boots: a lane of their own, once it is built,
# both at once and beside the irqsoff boot, each a QEMU on one core
# (-icount makes the guests' figures independent of the host's load).
pvlane=
if [[ " ${scenarios[*]} " == *" qpw "* ]]; then
	(
		built pvspin || { echo "the pvspin kernel" >> "$work/failed"; exit 1; }
		boot_kernel=$(variant_dir pvspin)/arch/x86/boot/bzImage
		for q in 0 1; do
			(
				loglist=$work/logs-pvspin$q.list
				boot_args="nohz_full=2-3 isolcpus=2-3 rcu_nocbs=2-3 tsc=reliable ftrace=nop qpw=$q demo_kernel=pvspin"
				boot_tag=-pvspin-qpw$q
				boot 4 qpw
			) &
		done
		wait
	) &
	pvlane=$!
	background+=("$pvlane")
fi
if [[ " ${scenarios[*]} " == *" irqsoff "* ]] && built irqsoff; then
	# ftrace=nop: no ftrace startup self-tests, which the main boot runs.
	boot_args="ftrace=nop"
	boot_tag=-irqsoff
	boot_kernel=$(variant_dir irqsoff)/arch/x86/boot/bzImage
	boot 1 irqsoff
	boot_args=
	boot_tag=
	boot_kernel=
fi

if [ -n "$pvlane" ]; then
	wait "$pvlane" || problems=1
	# Their logs after the others', qpw=0 first.
	for q in 0 1; do
		[ ! -f "$work/logs-pvspin$q.list" ] || cat "$work/logs-pvspin$q.list" >> "$loglist"
	done
fi

[ ! -s "$work/failed" ] || problems=1
logs=()
if [ -f "$loglist" ]; then
	while read -r log; do logs+=(--log "$log"); done < "$loglist"
fi
[ -z "$hooks_log" ] || logs+=(--log "$hooks_log")
out=$JLRS_TOP/results
sargs=()
for s in "${scenarios[@]}"; do
	[ "$s" = sample ] || sargs+=(--scenario "$s")
done
# The revision measured: the commit, "-dirty" if anything but results/
# (which the demo itself rewrites) differs from it.
rev=$(git -C "$JLRS_TOP" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$JLRS_TOP" diff --quiet HEAD -- . ':!results' 2>/dev/null || rev=$rev-dirty
if [ ${#sargs[@]} -gt 0 ]; then
	[ $# -eq 0 ] || [ ! -f "$out/demo.json" ] || sargs+=(--merge "$out/demo.json")
	# Debian's python3: the one python3-matplotlib is for.
	/usr/bin/python3 "$JLRS_TOP/scripts/demo/results.py" "${logs[@]}" --out "$out" \
		--kernel "$JLRS_BASE_VERSION" --cpus 4 --revision "$rev" --icount "${sargs[@]}" ||
		{ msg "error: results incomplete ($out/demo.json says which)"; problems=1; }
	# The README's results table and the cover letters' figures,
	# generated from the same demo.json.
	/usr/bin/python3 "$JLRS_TOP/scripts/demo/results.py" write "$out/demo.json" \
		"$JLRS_TOP/README.md" "$out/REPORT.md" "$JLRS_TOP"/patches/*/0000-cover-letter.patch ||
		problems=1
fi
[ "$problems" = 0 ] || die "demo failed (guest logs: $work/guest-*.log)"
msg "done: $out/demo.json, $out/REPORT.md (guest logs: $work/guest-*.log)"

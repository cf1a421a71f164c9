#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make test (scripts/test.sh): set up what is missing, fetch the base,
# apply the overlay, build the main configuration and run the project's
# KUnit suites in QEMU, once per text_poke_batch= mode, with the host tests
# beside them, run the lint checks on the built tree, then boot the same
# image once more with a busybox user space for the tests KUnit cannot run
# (scripts/guest-test/).
#
# make test-matrix (scripts/test.sh matrix): the sanitizer and feature
# matrix, each configuration in a build directory of its own: PREEMPT_RT
# with lockdep, kmemleak and KCSAN, and KASAN with UBSAN, lockdep and
# paravirtualization, each booting every KUnit suite and every user-space
# test, and the feature-off builds; each build runs while the builds
# before it boot.
#
# Each ends with one line "N passed, N failed, N skipped" counting its
# host, lint, KUnit, boot self-test and user-space cases together; exits
# non-zero on any failure, on a suite that did not run and on a guest that
# crashed or timed out. CI (.ci/run) runs both.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
step test
what=${1:-main}
case $what in
main | matrix | matrix-builds) ;;
*) die "usage: scripts/test.sh [matrix|matrix-builds]" ;;
esac

MODES=(rust c serial)

start=$(date +%s)
# matrix-builds: only make test-matrix's kernels, one after the other at
# a lower priority, in a run that applied the overlay already (.ci/run
# starts it beside make demo and make test, whose boots leave a core idle;
# make test-matrix then finds them built).
if [ "$what" != matrix-builds ]; then
	jlrs_prepare
fi
jlrs_base_env

logs=$JLRS_CACHE/$JLRS_BASE_VERSION/logs
mkdir -p "$logs"

host_rc=0
# host_tests_done: the host tests' results, once they have ended.
host_tests_done() {
	[ -n "${host_pid:-}" ] || return 0
	wait "$host_pid" || host_rc=$?
	host_pid=
	grep -E '^test |test result:|^error|panicked' "$logs/host.log" || true
	[ "$host_rc" = 0 ] || msg "host tests failed (log: $logs/host.log)"
}

kunit_rc=0
jsons=()
# kunit_boot NAME BUILD_DIR KUNIT_ARGS...: one build and KUnit boot, its
# parsed results in $JLRS_CACHE/<version>/kunit-NAME.json, its logs
# kunit-NAME.log and, for the self-tests that are not KUnit suites and for
# kernel complaints, the whole guest log guest-NAME.log.
kunit_boot() {
	local name=$1 build=$2 rc=0 guest
	shift 2
	JLRS_KUNIT_BUILD=$build JLRS_KUNIT_JSON=$JLRS_CACHE/$JLRS_BASE_VERSION/kunit-$name.json \
		"$JLRS_TOP/scripts/kunit.sh" "$@" 2>&1 | tee "$logs/kunit-$name.log" || rc=$?
	guest=$logs/guest-$name.log
	rm -f "$guest"
	[ -f "$build/test.log" ] && cp "$build/test.log" "$guest"
	jsons+=(--guest "$guest")
	if [ "$rc" != 0 ]; then
		msg "kunit.py failed: $name (exit $rc, log: $logs/kunit-$name.log)"
		kunit_rc=$rc
	fi
}

if [ "$what" = main ]; then
	# After make demo, whose kernel is this one without the audit of
	# deferred work (CONFIG_CONTEXT_TRACKING_WORK_DEBUG), start from its build
	# rather than from nothing, as make demo starts from make test's.
	demo_build=$JLRS_CACHE/$JLRS_BASE_VERSION/build-demo
	if [ ! -f "$JLRS_BUILD/.config" ] && [ -f "$demo_build/.config" ]; then
		msg "starting the build from make demo's ($demo_build)"
		rm -rf "$JLRS_BUILD" "$JLRS_BUILD.tmp"
		cp -a "$demo_build" "$JLRS_BUILD.tmp" && mv "$JLRS_BUILD.tmp" "$JLRS_BUILD" ||
			die "cannot copy $demo_build to $JLRS_BUILD"
	fi
	msg "kernel build (build dir $JLRS_BUILD, log: $logs/build.log)"
	build_rc=0
	JLRS_KUNIT_ACTION=build "$JLRS_TOP/scripts/kunit.sh" > "$logs/build.log" 2>&1 || build_rc=$?
	if [ "$build_rc" != 0 ]; then
		tail -n 30 "$logs/build.log" >&2 || true
		msg "kernel build failed (exit $build_rc, log: $logs/build.log)"
		kunit_rc=$build_rc
	fi
	# The host tests beside the boots, which use one core (QEMU's TCG).
	msg "host tests, beside the boots (log: $logs/host.log)"
	"$JLRS_TOP/scripts/host-test.sh" > "$logs/host.log" 2>&1 &
	host_pid=$!
	trap 'jlrs_kill_tree $host_pid' EXIT
	# The same image, booted once per text-poke implementation.
	for mode in "${MODES[@]}"; do
		[ "$build_rc" = 0 ] || break
		msg "KUnit, text_poke_batch=$mode"
		jsons+=(--kunit "$JLRS_CACHE/$JLRS_BASE_VERSION/kunit-$mode.json")
		# ftrace's startup self-tests run in every mode: with serial,
		# three sync rounds for each of about 18,700 sites per test.
		extra=()
		# Per-CPU data under per-CPU spinlocks (qpw=1, the default with
		# nohz_full=) with rust and serial, local_locks and queued work
		# with upstream's c: the qpw_cache suite runs both ways.
		if [ "$mode" = c ]; then
			extra+=(--kernel_args=qpw=0)
		else
			extra+=(--kernel_args=qpw=1)
		fi
		JLRS_KUNIT_ACTION=exec kunit_boot "$mode" "$JLRS_BUILD" \
			--kernel_args="text_poke_batch=$mode" "${extra[@]}"
	done
	# The tree the main build was made from, for make series.
	rm -f "$JLRS_BUILD/.jlrs-tree"
	tree=$(jlrs_tree_id)
	if [ "$kunit_rc" = 0 ] && [ -n "$tree" ] && [ -f "$JLRS_BUILD/arch/x86/boot/bzImage" ]; then
		echo "$tree" > "$JLRS_BUILD/.jlrs-tree"
	fi

	host_tests_done
	trap - EXIT
	# Lint once the kernel is built: clippy rebuilds our objects in its
	# build directory, and the danger zone and layout checks read the linked
	# kernel.
	msg "lint: rustfmt, rustc/clippy/objtool warnings, danger zone, kernel-doc, htmldocs and rustdoc, generic work word, checkpatch --strict"
	"$JLRS_TOP/scripts/check.sh" > "$logs/check.log" 2>&1 || true
	grep '^check:' "$logs/check.log" || echo "check: lint: FAILED (no result, log: $logs/check.log)" |
		tee -a "$logs/check.log"
fi

if [ "$what" != main ]; then
	v=$JLRS_CACHE/$JLRS_BASE_VERSION
	# PREEMPT_RT with lockdep (CONFIG_PROVE_LOCKING,
	# CONFIG_DEBUG_ATOMIC_SLEEP), the list and VM checks, kmemleak and
	# KCSAN, in one build: a lock taken recursively, in the wrong context
	# or in an order that can deadlock, a sleeping lock taken with
	# preemption or interrupts off, a folio on an LRU list twice, or a data
	# race prints a WARNING or a BUG, which fails the run; so does an
	# object this project's code allocated and left unreferenced
	# (upstream's kmemleak-test.ko, whose leaks the scan must find, shows
	# that it finds them). KCSAN runs every concurrent test: the
	# 10,000-flip stress with three CPUs running the sites, the qpw cache's
	# concurrent drains, and in user space the deferral storms, the remote
	# drains and the hotplug torture. rustc has no KCSAN: the C side is
	# instrumented, the shims (word.c, qpw.c, the C halves of the tests;
	# not text_poke_batch.c, which arch/x86/kernel/ builds without KCSAN, as
	# it does alternative.c) and every C path the Rust side shares
	# (jump_label.c, mm/swap.c), and sees the Rust side's marked accesses
	# as such. No ftrace self-tests: they are slow under
	# lockdep, and make test's boots run them.
	#
	# KASAN (generic, inline) and UBSAN in the other (KCSAN and KASAN
	# exclude each other), booted with page table isolation, whose entries
	# flush a deferred kernel flush by reloading CR3 (the KUnit case
	# entry_tlb_flush_drops_stale_translations checks that vmalloc mappings
	# are not global then). An access out of bounds or to freed memory (a
	# write to a module's freed init text among them) or undefined
	# behaviour prints a BUG or a UBSAN report, which fails the run. It is
	# also the lockdep build without PREEMPT_RT (PROVE_LOCKING, which
	# debugs spinlocks, and DEBUG_ATOMIC_SLEEP): its KUnit boot runs the
	# qpw cache suite with qpw on, and it boots once more for that suite
	# with qpw=0 (local_locks and queued work, which only a non-RT kernel
	# has). And it is paravirtualized, able to boot as a Xen PV guest
	# (CONFIG_XEN_PV, which selects PARAVIRT_XXL: pv_ops for CR writes,
	# TLB flushes, interrupt flags), booted under QEMU, where pv_ops are
	# native: kernel TLB flush deferral is built there too, and refused at
	# boot on Xen PV only.
	#
	# Both carry the Rust crates' debug assertions and overflow checks (a
	# failed one panics) in every crate but the INT3 handler's, which runs
	# in noinstr code (arch/x86/kernel/text_poke_batch/Makefile), and
	# CONFIG_DEBUG_ENTRY, with which objtool validates noinstr code (nothing
	# it calls before instrumentation is allowed may be instrumented: the
	# entry hooks and the INT3 handler among it); CONFIG_OBJTOOL_WERROR
	# makes any of its warnings fail the build, and with it this run. Each
	# runs every KUnit suite of make test once and, after that, make test's
	# user-space tests.
	rt_build=$v/build-rt
	kasan_build=$v/build-kasan
	debug=(--kconfig_add=CONFIG_RUST_DEBUG_ASSERTIONS=y --kconfig_add=CONFIG_RUST_OVERFLOW_CHECKS=y
		--kconfig_add=CONFIG_DEBUG_ENTRY=y --kconfig_add=CONFIG_OBJTOOL_WERROR=y)
	rt_config=(--kconfig_add=CONFIG_EXPERT=y --kconfig_add=CONFIG_PREEMPT_RT=y
		--kconfig_add=CONFIG_PROVE_LOCKING=y --kconfig_add=CONFIG_DEBUG_ATOMIC_SLEEP=y
		--kconfig_add=CONFIG_DEBUG_LIST=y --kconfig_add=CONFIG_DEBUG_VM=y
		--kconfig_add=CONFIG_DEBUG_KMEMLEAK=y --kconfig_add=CONFIG_DEBUG_KMEMLEAK_AUTO_SCAN=n
		--kconfig_add=CONFIG_SAMPLE_KMEMLEAK=m --kconfig_add=CONFIG_KCSAN=y "${debug[@]}")
	kasan_config=(--kconfig_add=CONFIG_KASAN=y --kconfig_add=CONFIG_KASAN_GENERIC=y
		--kconfig_add=CONFIG_KASAN_INLINE=y --kconfig_add=CONFIG_UBSAN=y
		--kconfig_add=CONFIG_PROVE_LOCKING=y --kconfig_add=CONFIG_DEBUG_ATOMIC_SLEEP=y
		--kconfig_add=CONFIG_HYPERVISOR_GUEST=y --kconfig_add=CONFIG_PARAVIRT=y
		--kconfig_add=CONFIG_XEN=y --kconfig_add=CONFIG_XEN_PV=y
		--kconfig_add=CONFIG_PARAVIRT_XXL=y "${debug[@]}")
	# The overlay in other configurations (scripts/kunitconfig/): one with
	# Rust but CONFIG_TEXT_POKE_BATCH_RUST=n, where Rust static keys go through
	# upstream's C update and batch, and one without Rust. Each boots: the
	# Rust static-key suite in the first, upstream's list suite in the
	# second as a sign of life. The first's spinlocks are paravirtualised
	# and not debugged, the qpw unlock neither make test's build (one
	# store) nor the lockdep builds have: it boots once more with qpw=0
	# for the qpw_cache suite, which switches qpw on.
	#
	# And the production configuration: the Rust batch and deferral
	# without what only tests and measurement need (CONFIG_TEXT_POKE_BATCH_STATS
	# and _MEASURE),
	# whose image scripts/production-check.sh checks before it boots the
	# Rust static-key suites, the kprobes suite and the ftrace self-tests.
	#
	# Production, rs-off and rust-off have every other option of the main
	# configuration: each starts as a copy of make demo's build (or make
	# test's), and kbuild rebuilds only what their differences reach (the
	# objects that use those options, the Rust crates) and links. The
	# others change every object's command line, and build from nothing.
	# matrix_kunit ACTION NAME [ARG...]: kunit.sh's build or exec of the
	# matrix's configuration NAME.
	matrix_kunit() {
		local action=$1 name=$2 cfg=()
		shift 2
		local kunitconfig=$JLRS_TOP/scripts/kunitconfig/$name
		case $name in
		rt) cfg=("${rt_config[@]}") kunitconfig= ;;
		kasan) cfg=("${kasan_config[@]}") kunitconfig= ;;
		*) [ "$action" != build ] || seed_build "$name" "$kunitconfig" ;;
		esac
		[ "$action" = build ] || cfg=()
		JLRS_KUNIT_ACTION=$action JLRS_KUNIT_BUILD=$v/build-$name \
			JLRS_KUNITCONFIG=$kunitconfig "$JLRS_TOP/scripts/kunit.sh" ${cfg[@]+"${cfg[@]}"} "$@"
	}
	# seed_build NAME KUNITCONFIG: unless build-NAME was started for this
	# KUNITCONFIG (its .jlrs-seed), make it a copy of the latest of make
	# demo's and make test's builds (without either, it builds from
	# nothing).
	seed_build() {
		local dir=$v/build-$1 seed= b id
		id=$(sha1sum < "$2")
		[ "$(cat "$dir/.jlrs-seed" 2> /dev/null)" != "$id" ] || return 0
		for b in "$v/build-demo" "$JLRS_BUILD"; do
			[ -f "$b/arch/x86/boot/bzImage" ] || continue
			[ -n "$seed" ] && [ ! "$b/arch/x86/boot/bzImage" -nt "$seed/arch/x86/boot/bzImage" ] ||
				seed=$b
		done
		[ -n "$seed" ] || return 0
		msg "$1: starting from the build in $seed"
		rm -rf "$dir" "$dir.tmp"
		cp -a "$seed" "$dir.tmp" && mv "$dir.tmp" "$dir" || die "cannot copy $seed to $dir"
		rm -f "$dir/.jlrs-tree" "$dir/.jlrs-built"
		echo "$id" > "$dir/.jlrs-seed"
	}
	# matrix_build NAME: matrix_kunit's build of NAME, its log build-NAME.log.
	# A compiler or objtool warning naming a file of the series fails it.
	# The builds are incremental: a log shows what they rebuilt only, so the
	# files named are touched (scripts/build-warnings.py), and the next build
	# compiles them again, and fails again, until they are fixed.
	matrix_build() {
		local log=$logs/build-$1.log rc=0
		matrix_kunit build "$1" > "$log" 2>&1 || return
		python3 "$JLRS_TOP/scripts/build-warnings.py" "$log" "$JLRS_SRC/.jlrs-manifest" \
			--touch "$JLRS_SRC" > "$log.warnings" 2>&1 || rc=$?
		[ "$rc" = 0 ] && { rm -f "$log.warnings"; return 0; }
		echo "test: the $1 build warns about files of the series:" >> "$log"
		cat "$log.warnings" >> "$log"
		rm -f "$log.warnings"
		return 1
	}
	# Every build in turn, in the background at a lower priority, while the
	# boots of the builds made before run (QEMU's TCG uses one core): each
	# build's exit status in $status/NAME, its log build-NAME.log, and
	# $status/all once every build is done (.ci/run starts make series,
	# whose walk starts from the production build, once that is done, or
	# once every build is done where the walk cannot have a tree of its
	# own). The builds whose boots are short come
	# first, then RT's, whose user-space boots take longest (about 20
	# minutes): the KASAN build runs beside them, and its boots (about 6
	# minutes) last.
	builds=(production rs-off rust-off rt kasan)
	if [ "$what" = matrix-builds ]; then
		renice -n 10 -p $$ > /dev/null
		failed=0
		for name in "${builds[@]}"; do
			t=$(date +%s)
			if matrix_build "$name"; then
				msg "built $name in $(($(date +%s) - t)) s"
			else
				msg "the $name build failed (log: $logs/build-$name.log)"
				failed=1
			fi
		done
		exit $failed
	fi
	status=$v/matrix-built
	rm -rf "$status"
	mkdir -p "$status"
	(
		renice -n 10 -p "$BASHPID" > /dev/null
		for name in "${builds[@]}"; do
			rc=0
			matrix_build "$name" || rc=$?
			echo "$rc" > "$status/$name"
		done
		touch "$status/all"
	) &
	builder=$!
	trap 'jlrs_kill_tree $builder' EXIT
	# built NAME: wait for NAME's build; false if it failed.
	built() {
		[ -f "$status/$1" ] || msg "waiting for the $1 build (log: $logs/build-$1.log)"
		while [ ! -f "$status/$1" ]; do
			kill -0 "$builder" 2> /dev/null || break
			sleep 5
		done
		[ "$(cat "$status/$1" 2> /dev/null)" = 0 ] && return 0
		tail -n 20 "$logs/build-$1.log" >&2 || true
		msg "kernel build failed: $1 (log: $logs/build-$1.log)"
		kunit_rc=1
		return 1
	}
	# matrix_boot NAME JSON_NAME [ARG...]: a KUnit boot of NAME's build.
	matrix_boot() {
		local name=$1 json=$2 rc=0 guest
		shift 2
		JLRS_KUNIT_JSON=$v/kunit-$json.json matrix_kunit exec "$name" "$@" 2>&1 |
			tee "$logs/kunit-$json.log" || rc=$?
		guest=$logs/guest-$json.log
		rm -f "$guest"
		[ -f "$v/build-$name/test.log" ] && cp "$v/build-$name/test.log" "$guest"
		jsons+=(--guest "$guest")
		if [ "$rc" != 0 ]; then
			msg "kunit.py failed: $json (exit $rc, log: $logs/kunit-$json.log)"
			kunit_rc=$rc
		fi
	}
fi

# guest_boots WHAT LOG [BUILD [TIMEOUT]]: the user-space tests
# (scripts/guest-test/) in the main image, or in the build directory BUILD,
# each boot in TIMEOUT seconds at most (guest-test.sh's 600 by default);
# their cases in LOG.
guest_rc=0
guest_boots() {
	local what=$1 cases=$logs/$2 rc=0
	msg "tests with user space$what"
	JLRS_GUEST_BUILD=${3:-} JLRS_GUEST_TIMEOUT=${4:-600} \
		"$JLRS_TOP/scripts/guest-test.sh" "$cases" || rc=$?
	[ "$rc" = 0 ] || { msg "user-space tests$what failed (exit $rc, log: $cases)"; guest_rc=$rc; }
	jsons+=(--guest "$cases" --cases "$cases")
}
if [ "$what" = main ]; then
	guest_boots "" guest-test.log
else
	prod_suites=rust_static_key,rust_static_key_sample,kprobes_test
	# NAME:JSON:SUITES:ARG: boot NAME's build with the kernel argument ARG
	# (- for none), running the one suite SUITES names or, for a list,
	# every suite the build has; each must run.
	for cfg in production:production:"$prod_suites":- rs-off:rs-off:rust_static_key:- \
		rs-off:rs-off-qpw0:qpw_cache:qpw=0 rust-off:rust-off:list-kunit-test:-; do
		IFS=: read -r name json suites arg <<< "$cfg"
		args=()
		[ "$suites" != "${suites%%,*}" ] || args=("$suites")
		[ "$arg" = - ] || args=(--kernel_args="$arg" ${args[@]+"${args[@]}"})
		msg "scripts/kunitconfig/$name: KUnit $suites ${arg#-}"
		jsons+=(--kunit-of "$v/kunit-$json.json" "$suites")
		if [ "$name" = production ]; then
			checks=$logs/production-check.log
			if built "$name"; then
				"$JLRS_TOP/scripts/production-check.sh" "$v/build-$name" > "$checks" 2>&1 || true
			else
				echo "check: production image: FAILED (the build failed)" > "$checks"
			fi
			grep '^check:' "$checks" || echo "check: production image: FAILED (log: $checks)" |
				tee -a "$checks"
			[ -f "$v/build-$name/vmlinux" ] || continue
		else
			built "$name" || continue
		fi
		matrix_boot "$name" "$json" ${args[@]+"${args[@]}"}
	done
	msg "PREEMPT_RT, lockdep, kmemleak and KCSAN: KUnit, then user space"
	jsons+=(--kunit "$v/kunit-rt.json")
	if built rt; then
		matrix_boot rt rt --kernel_args=text_poke_batch=rust --kernel_args=ftrace=nop
		# Its boots of the tests take about 20 minutes, with the KASAN
		# build beside them at a lower priority.
		guest_boots " under PREEMPT_RT, lockdep, kmemleak and KCSAN" guest-test-rt.log \
			"$rt_build" 1200
	fi
	msg "KASAN, UBSAN, lockdep and PARAVIRT_XXL: KUnit, then user space"
	jsons+=(--kunit "$v/kunit-kasan.json")
	if built kasan; then
		kasan_args=(--kernel_args=text_poke_batch=rust --kernel_args=ftrace=nop --kernel_args=pti=on)
		matrix_boot kasan kasan "${kasan_args[@]}"
		msg "KASAN, UBSAN and lockdep: KUnit qpw_cache qpw=0"
		jsons+=(--kunit-of "$v/kunit-kasan-qpw0.json" qpw_cache)
		matrix_boot kasan kasan-qpw0 "${kasan_args[@]}" --kernel_args=qpw=0 qpw_cache
		# Lockdep reports one problem, then turns itself off: its report
		# of an interrupt inversion through a qpw spinlock has a boot of
		# its own, with qpw switched on at run time and on from boot.
		for q in 0 1; do
			msg "lockdep: KUnit qpw_cache's interrupt inversion, qpw=$q"
			jsons+=(--kunit-of "$v/kunit-kasan-inversion$q.json" qpw_cache)
			matrix_boot kasan kasan-inversion$q "${kasan_args[@]}" --kernel_args=qpw=$q \
				--kernel_args=qpw_cache_exec.inversion=1 \
				qpw_cache.an_irq_inversion_through_the_spinlock_is_reported
		done
		guest_boots " under KASAN, UBSAN, lockdep and PARAVIRT_XXL" guest-test-kasan.log \
			"$kasan_build" 1200
	fi
	wait "$builder" || true
	trap - EXIT
fi

msg "Linux $JLRS_BASE_VERSION (Debian linux-source-7.2 $JLRS_BASE_DEB_VERSION), $(($(date +%s) - start)) s"
# The suites, counts and skips each run declares (scripts/expected.toml).
# The user-space boots' KTAP is read with the base tree's parser.
sargs=(--expected "$JLRS_TOP/scripts/expected.toml" --run "$what" --tree "$JLRS_PRISTINE")
summary_rc=0
own=()
if [ "$what" = matrix ]; then
	own=(--checks "$logs/production-check.log")
else
	own=(--cargo "$logs/host.log" --checks "$logs/check.log")
fi
python3 "$JLRS_TOP/scripts/summarize.py" "${own[@]}" "${jsons[@]}" "${sargs[@]}" || summary_rc=$?
if [ "$host_rc" != 0 ] || [ "$kunit_rc" != 0 ] || [ "$guest_rc" != 0 ] ||
	[ "$summary_rc" != 0 ]; then
	exit 1
fi

#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make test (scripts/test.sh): set up what is missing, fetch the base,
# apply the overlay, run the host tests, build the main configuration and
# run the project's KUnit suites in QEMU, once per text_poke= mode, run the
# lint checks on the built tree, then boot the same image once more with a
# busybox user space for the tests KUnit cannot run (scripts/guest-test/).
#
# make test-matrix (scripts/test.sh matrix): the sanitizer and feature
# matrix, each configuration in a build directory of its own: PREEMPT_RT
# with lockdep, KASAN with UBSAN, KCSAN, each booting every KUnit suite and
# every user-space test, and the feature-off and paravirtualized builds.
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
main | matrix) ;;
*) die "usage: scripts/test.sh [matrix]" ;;
esac

SUITES=(rust_static_key rust_static_key_sample rust_doctests_kernel text_poke_rs text_poke_rs_defer text_poke_rs_pages kprobes_test)
MODES=(rust c serial)

start=$(date +%s)
"$JLRS_TOP/scripts/setup-host.sh"
"$JLRS_TOP/scripts/fetch-base.sh"
"$JLRS_TOP/scripts/apply-overlay.sh"
jlrs_base_env

logs=$JLRS_CACHE/$JLRS_BASE_VERSION/logs
mkdir -p "$logs"

host_rc=0
if [ "$what" = main ]; then
	msg "host tests"
	"$JLRS_TOP/scripts/host-test.sh" > "$logs/host.log" 2>&1 || host_rc=$?
	grep -E '^test |test result:|^error|panicked' "$logs/host.log" || true
	[ "$host_rc" = 0 ] || msg "host tests failed (log: $logs/host.log)"
fi

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
	# The same image, booted once per text-poke implementation.
	for mode in "${MODES[@]}"; do
		msg "kernel build and KUnit, text_poke=$mode (build dir $JLRS_BUILD)"
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
		kunit_boot "$mode" "$JLRS_BUILD" --kernel_args="text_poke=$mode" "${extra[@]}"
	done
	# The tree the main build was made from, for make series.
	rm -f "$JLRS_BUILD/.jlrs-tree"
	tree=$(jlrs_tree_id)
	if [ "$kunit_rc" = 0 ] && [ -n "$tree" ] && [ -f "$JLRS_BUILD/arch/x86/boot/bzImage" ]; then
		echo "$tree" > "$JLRS_BUILD/.jlrs-tree"
	fi

	# Lint once the kernel is built: clippy rebuilds our objects in its
	# build directory, and the danger zone and layout checks read the linked
	# kernel.
	msg "lint: rustfmt, rustc/clippy/objtool warnings, danger zone, checkpatch --strict"
	"$JLRS_TOP/scripts/check.sh" > "$logs/check.log" 2>&1 || true
	grep '^check:' "$logs/check.log" || echo "check: lint: FAILED (no result, log: $logs/check.log)" |
		tee -a "$logs/check.log"
fi

if [ "$what" = matrix ]; then
	# PREEMPT_RT with lockdep (CONFIG_PROVE_LOCKING,
	# CONFIG_DEBUG_ATOMIC_SLEEP), the list and VM checks, and kmemleak: a
	# second configuration, in a build directory of its own, runs every
	# KUnit suite of make test once (qpw is always on with PREEMPT_RT), and
	# after the user-space tests below, those tests again. A lock taken
	# recursively, in the wrong context or in an order that can deadlock, a
	# sleeping lock taken with preemption or interrupts off, or a folio on
	# an LRU list twice, prints a WARNING or a BUG, which fails the run; so
	# does an object this project's code allocated and left unreferenced
	# (upstream's kmemleak-test.ko, whose leaks the scan must find, shows
	# that it finds them). No ftrace self-tests: they are slow under
	# lockdep, and make test's boots run them.
	rt_build=$JLRS_CACHE/$JLRS_BASE_VERSION/build-rt
	msg "PREEMPT_RT and lockdep kernel build (build dir $rt_build) and KUnit"
	jsons+=(--kunit "$JLRS_CACHE/$JLRS_BASE_VERSION/kunit-rt.json")
	kunit_boot rt "$rt_build" \
		--kconfig_add=CONFIG_EXPERT=y --kconfig_add=CONFIG_PREEMPT_RT=y \
		--kconfig_add=CONFIG_PROVE_LOCKING=y --kconfig_add=CONFIG_DEBUG_ATOMIC_SLEEP=y \
		--kconfig_add=CONFIG_DEBUG_LIST=y --kconfig_add=CONFIG_DEBUG_VM=y \
		--kconfig_add=CONFIG_DEBUG_KMEMLEAK=y --kconfig_add=CONFIG_DEBUG_KMEMLEAK_AUTO_SCAN=n \
		--kconfig_add=CONFIG_SAMPLE_KMEMLEAK=m \
		--kernel_args=text_poke=rust --kernel_args=ftrace=nop

	# KASAN (generic, inline) and UBSAN, with the Rust crates' debug
	# assertions and overflow checks: a third configuration, in a build
	# directory of its own, runs every KUnit suite of make test once and,
	# after the user-space tests below, those tests again. An access out of
	# bounds or to freed memory (a write to a module's freed init text among
	# them) or undefined behaviour prints a BUG or a UBSAN report, which
	# fails the run; so does a failed Rust debug assertion, overflow or UB
	# check (a panic), in every crate but the INT3 handler's, which runs in
	# noinstr code (kernel/jump_label_rs/Makefile). With CONFIG_DEBUG_ENTRY
	# objtool validates noinstr code (nothing it calls before
	# instrumentation is allowed may be instrumented: the entry hooks and
	# the INT3 handler among it), and CONFIG_OBJTOOL_WERROR makes any of its
	# warnings fail the build, and with it this run. It boots with page
	# table isolation, whose entries flush a deferred kernel flush by
	# reloading CR3 (the KUnit case entry_tlb_flush_drops_stale_translations
	# checks that vmalloc mappings are not global then).
	kasan_build=$JLRS_CACHE/$JLRS_BASE_VERSION/build-kasan
	msg "KASAN and UBSAN kernel build (build dir $kasan_build) and KUnit"
	jsons+=(--kunit "$JLRS_CACHE/$JLRS_BASE_VERSION/kunit-kasan.json")
	kunit_boot kasan "$kasan_build" \
		--kconfig_add=CONFIG_KASAN=y --kconfig_add=CONFIG_KASAN_GENERIC=y \
		--kconfig_add=CONFIG_KASAN_INLINE=y --kconfig_add=CONFIG_UBSAN=y \
		--kconfig_add=CONFIG_RUST_DEBUG_ASSERTIONS=y --kconfig_add=CONFIG_RUST_OVERFLOW_CHECKS=y \
		--kconfig_add=CONFIG_DEBUG_ENTRY=y --kconfig_add=CONFIG_OBJTOOL_WERROR=y \
		--kernel_args=text_poke=rust --kernel_args=ftrace=nop --kernel_args=pti=on

	# KCSAN: a fourth configuration, in a build directory of its own, runs
	# every KUnit suite of make test once (the 10,000-flip stress with three
	# CPUs running the sites, the qpw cache's concurrent drains) and, after
	# the user-space tests below, those tests again (the deferral storms,
	# the remote drains, the hotplug torture). rustc has no KCSAN: the C
	# side is instrumented, the shims (text_poke_rs.c, ct_work_rs.c, qpw.c,
	# the C halves of the tests) and every C path the Rust side shares
	# (jump_label.c, alternative.c, mm/swap.c), and sees the Rust side's
	# marked accesses as such. A data race report fails the run. It carries
	# the Rust debug assertions and objtool's noinstr validation too. The
	# PS/2 controller is left alone (i8042.nokbd, i8042.noaux): its driver
	# races with its own interrupt in 7.2 (ps2_do_sendbyte() /
	# ps2_interrupt()), upstream's.
	kcsan_build=$JLRS_CACHE/$JLRS_BASE_VERSION/build-kcsan
	kcsan_args="i8042.nokbd i8042.noaux"
	msg "KCSAN kernel build (build dir $kcsan_build) and KUnit"
	jsons+=(--kunit "$JLRS_CACHE/$JLRS_BASE_VERSION/kunit-kcsan.json")
	kunit_boot kcsan "$kcsan_build" \
		--kconfig_add=CONFIG_KCSAN=y \
		--kconfig_add=CONFIG_RUST_DEBUG_ASSERTIONS=y --kconfig_add=CONFIG_RUST_OVERFLOW_CHECKS=y \
		--kconfig_add=CONFIG_DEBUG_ENTRY=y --kconfig_add=CONFIG_OBJTOOL_WERROR=y \
		--kernel_args=text_poke=rust --kernel_args=ftrace=nop \
		--kernel_args=i8042.nokbd --kernel_args=i8042.noaux

	# The overlay in other configurations (scripts/kunitconfig/): one with
	# Rust but CONFIG_TEXT_POKE_RS=n, where Rust static keys go through
	# upstream's C update and batch, one without Rust, and a paravirtualized
	# one that can boot as a Xen PV guest (PARAVIRT_XXL, where kernel TLB
	# flushes are not deferred). Each builds in a directory of its own and
	# boots: the Rust static-key suite in the first, upstream's list suite
	# in the second as a sign of life, the deferral suite in the last, which
	# is also the lockdep build without PREEMPT_RT: it boots twice more for
	# the qpw cache suite, with qpw=1 and with qpw=0 (local_locks and queued
	# work, which only a non-RT kernel has).
	for cfg in rs-off:rust_static_key:- rust-off:list-kunit-test:- \
		paravirt:text_poke_rs_defer:- paravirt-qpw1:qpw_cache:qpw=1 \
		paravirt-qpw0:qpw_cache:qpw=0; do
		IFS=: read -r name suite arg <<< "$cfg"
		kcfg=${name%-qpw?}
		args=("$suite")
		[ "$arg" = - ] || args=(--kernel_args="$arg" "$suite")
		msg "kernel build with scripts/kunitconfig/$kcfg and KUnit $suite ${arg#-}"
		jsons+=(--kunit-of "$JLRS_CACHE/$JLRS_BASE_VERSION/kunit-$name.json" "$suite")
		JLRS_KUNITCONFIG=$JLRS_TOP/scripts/kunitconfig/$kcfg
		export JLRS_KUNITCONFIG
		kunit_boot "$name" "$JLRS_CACHE/$JLRS_BASE_VERSION/build-$kcfg" "${args[@]}"
		unset JLRS_KUNITCONFIG
	done
fi

# guest_boots WHAT LOG [BUILD]: the user-space tests (scripts/guest-test/)
# in the main image, or in the build directory BUILD; their cases in LOG.
guest_rc=0
guest_boots() {
	local what=$1 cases=$logs/$2 rc=0
	msg "tests with user space$what"
	JLRS_GUEST_BUILD=${3:-} "$JLRS_TOP/scripts/guest-test.sh" "$cases" || rc=$?
	[ "$rc" = 0 ] || { msg "user-space tests$what failed (exit $rc, log: $cases)"; guest_rc=$rc; }
	jsons+=(--guest "$cases" --cases "$cases")
}
if [ "$what" = main ]; then
	guest_boots "" guest-test.log
else
	guest_boots " under PREEMPT_RT, lockdep and kmemleak" guest-test-rt.log "$rt_build"
	guest_boots " under KASAN and UBSAN" guest-test-kasan.log "$kasan_build"
	JLRS_GUEST_ARGS=$kcsan_args guest_boots " under KCSAN" guest-test-kcsan.log "$kcsan_build"
fi

msg "Linux $JLRS_BASE_VERSION (Debian linux-source-7.2 $JLRS_BASE_DEB_VERSION), $(($(date +%s) - start)) s"
sargs=()
for s in "${SUITES[@]}"; do sargs+=(--suite "$s"); done
summary_rc=0
own=()
[ "$what" = matrix ] || own=(--cargo "$logs/host.log" --checks "$logs/check.log")
python3 "$JLRS_TOP/scripts/summarize.py" "${own[@]}" "${jsons[@]}" "${sargs[@]}" || summary_rc=$?
if [ "$host_rc" != 0 ] || [ "$kunit_rc" != 0 ] || [ "$guest_rc" != 0 ] ||
	[ "$summary_rc" != 0 ]; then
	exit 1
fi

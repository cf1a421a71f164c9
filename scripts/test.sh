#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make test: set up what is missing, fetch the base, apply the overlay, run
# the host tests, build the kernel and run the project's KUnit suites in
# QEMU. Ends with one line "N passed, N failed, N skipped" counting host and
# KUnit cases together; exits non-zero on any failure, on a suite that did
# not run and on a guest that crashed or timed out.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
step test

SUITES=(rust_static_key rust_static_key_sample)

start=$(date +%s)
"$JLRS_TOP/scripts/setup-host.sh"
"$JLRS_TOP/scripts/fetch-base.sh"
"$JLRS_TOP/scripts/apply-overlay.sh"
jlrs_base_env

logs=$JLRS_CACHE/$JLRS_BASE_VERSION/logs
mkdir -p "$logs"

msg "host tests"
host_rc=0
"$JLRS_TOP/scripts/host-test.sh" > "$logs/host.log" 2>&1 || host_rc=$?
grep -E '^test |test result:|^error|panicked' "$logs/host.log" || true
[ "$host_rc" = 0 ] || msg "host tests failed (log: $logs/host.log)"

msg "kernel build and KUnit (build dir $JLRS_BUILD)"
kunit_rc=0
"$JLRS_TOP/scripts/kunit.sh" 'rust_static_key*' 2>&1 | tee "$logs/kunit.log" || kunit_rc=$?
[ "$kunit_rc" = 0 ] || msg "kunit.py failed (exit $kunit_rc, log: $logs/kunit.log)"

msg "Linux $JLRS_BASE_VERSION (Debian linux-source-7.2 $JLRS_BASE_DEB_VERSION), $(($(date +%s) - start)) s"
sargs=()
for s in "${SUITES[@]}"; do sargs+=(--suite "$s"); done
summary_rc=0
python3 "$JLRS_TOP/scripts/summarize.py" --cargo "$logs/host.log" \
	--kunit "$JLRS_CACHE/$JLRS_BASE_VERSION/kunit.json" "${sargs[@]}" || summary_rc=$?
if [ "$host_rc" != 0 ] || [ "$kunit_rc" != 0 ] || [ "$summary_rc" != 0 ]; then
	exit 1
fi

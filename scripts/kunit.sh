#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the overlay kernel and run the project's KUnit suites through
# kunit.py in QEMU (single-threaded TCG, 4 vCPUs). An oops reboots the
# guest at once (oops=panic panic=-1): a test that crashes while holding a
# lock would otherwise leave the run hanging until the timeout. CPU 3 is
# isolated (nohz_full=3) for the deferral suites, ct_work and
# text_poke_batch_defer.
# tsc=reliable: no clocksource watchdog. The switch to the TSC still comes
# a second or so into the boot and sends every CPU function calls: the IPI
# counting test retries a count such noise inflated. Extra arguments go to
# kunit.py (e.g. --kconfig_add, a suite glob). Writes the parsed results to
# $JLRS_KUNIT_JSON (default $JLRS_CACHE/<version>/kunit.json); builds in
# $JLRS_KUNIT_BUILD (default the cache's build directory): a configuration
# that differs (--kconfig_add) needs a directory of its own.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
step kunit
jlrs_base_env
JLRS_BUILD=${JLRS_KUNIT_BUILD:-$JLRS_BUILD}

# $JLRS_KUNITCONFIG: another configuration (scripts/kunitconfig/), in a
# build directory of its own.
KUNITCONFIG=${JLRS_KUNITCONFIG:-$JLRS_SRC/arch/x86/kernel/text_poke_batch/.kunitconfig}
action=${JLRS_KUNIT_ACTION:-run}
# A boot of what was built reads the configuration the build recorded
# (kunit.py's last_used_kunitconfig), not the source tree's: make series
# walks the source tree through the series' prefixes while make
# test-matrix's last boots run.
if [ "$action" = exec ] && [ -f "$JLRS_BUILD/last_used_kunitconfig" ]; then
	KUNITCONFIG=$JLRS_BUILD/last_used_kunitconfig
fi
[ -f "$KUNITCONFIG" ] || die "$KUNITCONFIG missing: run scripts/apply-overlay.sh"
[ -x "$JLRS_BINDGEN" ] || die "bindgen missing: run scripts/setup-host.sh"

json=${JLRS_KUNIT_JSON:-$JLRS_CACHE/$JLRS_BASE_VERSION/kunit.json}
mkopts=()
while read -r o; do mkopts+=("--make_options=$o"); done < <(jlrs_make_opts)

# $JLRS_KUNIT_ACTION: run (configure, build and boot; the default), build
# (configure and build only) or exec (boot what was built). The extra
# arguments go to each: configuration options with build, boot options
# and the suite glob with exec.
common=(--arch=x86_64 --kunitconfig="$KUNITCONFIG" --build_dir="$JLRS_BUILD" "${mkopts[@]}")
build=(--jobs="$(nproc)")
boot=(--timeout=600 --qemu_args='-smp 4'
	--kernel_args=oops=panic --kernel_args=panic=-1 --kernel_args=nohz_full=3
	--kernel_args=tsc=reliable --json="$json")
case $action in
run) args=("${common[@]}" "${build[@]}" "${boot[@]}") ;;
build) args=("${common[@]}" "${build[@]}") ;;
exec) args=("${common[@]}" "${boot[@]}") ;;
*) die "JLRS_KUNIT_ACTION=$action: not run, build or exec" ;;
esac
[ "$action" = build ] || rm -f "$json"

cd "$JLRS_SRC"
# kunit.py finds QEMU on PATH: lib.sh put the TCG wrapper first.
python3 tools/testing/kunit/kunit.py "$action" "${args[@]}" "$@"

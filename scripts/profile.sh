#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# profile.sh [SITES [MODE [FLIPS]]]: where a flip's guest instructions go.
# Boots the demo's kernel (make test's, before make demo has built its
# own) in QEMU as make demo does (single-threaded TCG, 4 vCPUs, -icount)
# with a TCG plugin that counts the instructions each translation block of
# the kernel executes, flips the benchmark key of SITES sites (default
# 1024) FLIPS times (default 10) with text_poke_batch=MODE (default rust), and
# prints the instructions per flip and per site of each function: every
# CPU's, everything the guest ran meanwhile. With JLRS_PROFILE_BLOCKS=NAME,
# also the translation blocks of function NAME (its symbol, printed under
# its demangled name), which locate the cost within it (llvm-objdump
# --disassemble-symbols).
#
# Counts, not time: the same image gives the same figures. Inlined code is
# counted in the function it was inlined into. JLRS_PROFILE_BUILD=DIR
# profiles the kernel of another build directory: two builds of one
# configuration, compared function by function.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
step profile

sites=${1:-1024}
mode=${2:-rust}
flips=${3:-10}
case $sites in 1 | 8 | 56 | 256 | 1024) ;; *) die "SITES: one of 1, 8, 56, 256, 1024, not '$sites'" ;; esac
case $mode in rust | c | serial) ;; *) die "MODE: rust, c or serial, not '$mode'" ;; esac
[[ "$flips" =~ ^[1-9][0-9]{0,3}$ ]] || die "FLIPS: a number from 1 to 9999, not '$flips'"

jlrs_base_env
build=${JLRS_PROFILE_BUILD:-$JLRS_CACHE/$JLRS_BASE_VERSION/build-demo}
[ -n "${JLRS_PROFILE_BUILD:-}" ] || [ -f "$build/arch/x86/boot/bzImage" ] || build=$JLRS_BUILD
kernel=$build/arch/x86/boot/bzImage
[ -f "$kernel" ] || die "no kernel in $build: run make test or make demo first"
[ -f "$build/System.map" ] || die "no System.map in $build"
command -v gcc > /dev/null || die "gcc not found: it builds the QEMU plugin"
jlrs_initramfs_tools

work=$JLRS_CACHE/$JLRS_BASE_VERSION/profile
rm -rf "$work"
mkdir -p "$work"
gcc -O2 -Wall -shared -fPIC -o "$work/tbprof.so" "$JLRS_TOP/scripts/profile/tbprof.c" ||
	die "cannot build the QEMU plugin"
jlrs_initramfs_base "$JLRS_TOP/scripts/profile/init.sh" > "$work/initramfs.list"
"$gen" "$work/initramfs.list" > "$work/initramfs.cpio" || die "gen_init_cpio failed"

# The benchmark's command handler: one dump of the counts per command.
mark=$(awk '$3 ~ /^_R.*15text_poke_bench.*5Bench3run$/ { print $1; exit }' "$build/System.map")
[ -n "$mark" ] || die "the benchmark's Bench::run is not in $build/System.map (CONFIG_TEXT_POKE_BATCH_BENCH off?)"

msg "profiling $flips flips of the $sites-site key, text_poke_batch=$mode ($kernel)"
set +e
timeout 1200 qemu-system-x86_64 -accel tcg,thread=single -smp 4 -m 1024 \
	-icount shift=0,sleep=off -nographic -no-reboot -bios qboot.rom \
	-plugin "$work/tbprof.so,mark=$mark,out=$work/dump" \
	-kernel "$kernel" -initrd "$work/initramfs.cpio" \
	-append "console=ttyS0 kunit.enable=0 nokaslr panic=-1 oops=panic loglevel=4 profile_mode=$mode profile_sites=$sites profile_flips=$flips" \
	> "$work/guest.log" 2>&1
rc=$?
set -e
[ "$rc" = 0 ] || die "the guest failed or timed out (rc $rc, log: $work/guest.log)"
grep -q '^@@ profile done' "$work/guest.log" ||
	die "the flips did not complete in the guest (log: $work/guest.log)"
# Dumps: 0 up to the warm-up, 1 the warm-up, 2 the profiled flips.
[ -f "$work/dump.2" ] || die "no dump of the profiled flips in $work"
/usr/bin/python3 "$JLRS_TOP/scripts/profile/report.py" --map "$build/System.map" \
	--dump "$work/dump.2" --flips "$flips" --sites "$sites" \
	${JLRS_PROFILE_BLOCKS:+--blocks "$JLRS_PROFILE_BLOCKS"}

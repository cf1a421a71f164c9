#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make demo: build the overlay kernel if needed, boot it in QEMU
# (single-threaded TCG, 4 vCPUs) with a busybox initramfs, and run the demo
# scenarios inside the guest.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
step demo

"$JLRS_TOP/scripts/setup-host.sh"
"$JLRS_TOP/scripts/fetch-base.sh"
"$JLRS_TOP/scripts/apply-overlay.sh"
jlrs_base_env

kernel=$JLRS_BUILD/arch/x86/boot/bzImage
msg "building the kernel (incremental)"
mkopts=()
while read -r o; do mkopts+=("--make_options=$o"); done < <(jlrs_make_opts)
(cd "$JLRS_SRC" && python3 tools/testing/kunit/kunit.py build --arch=x86_64 \
	--kunitconfig="$JLRS_SRC/kernel/jump_label_rs/.kunitconfig" \
	--build_dir="$JLRS_BUILD" --jobs="$(nproc)" "${mkopts[@]}") > "$JLRS_CACHE/demo-build.log" 2>&1 ||
	{ tail -n 30 "$JLRS_CACHE/demo-build.log" >&2; die "kernel build failed (log: $JLRS_CACHE/demo-build.log)"; }
[ -f "$kernel" ] || die "no kernel image at $kernel after the build"

busybox=/bin/busybox
[ -x "$busybox" ] || die "$busybox missing (package busybox-static)"
if readelf -l "$busybox" 2>/dev/null | grep -q 'program interpreter'; then
	die "$busybox is dynamically linked: install busybox-static"
fi
gen=$JLRS_BUILD/usr/gen_init_cpio
[ -x "$gen" ] || die "$gen missing: the kernel needs CONFIG_BLK_DEV_INITRD"

work=$JLRS_CACHE/$JLRS_BASE_VERSION/demo
mkdir -p "$work"
cat > "$work/initramfs.list" <<LIST
dir /dev 0755 0 0
nod /dev/console 0600 0 0 c 5 1
dir /bin 0755 0 0
dir /proc 0755 0 0
dir /sys 0755 0 0
dir /demo 0755 0 0
file /bin/busybox $busybox 0755 0 0
slink /bin/sh busybox 0777 0 0
file /init $JLRS_TOP/scripts/demo/guest-init.sh 0755 0 0
file /demo/run.sh $JLRS_TOP/scripts/demo/sample.sh 0755 0 0
LIST
"$gen" "$work/initramfs.list" > "$work/initramfs.cpio" ||
	die "gen_init_cpio failed"

log=$work/guest.log
msg "booting Linux $JLRS_BASE_VERSION in QEMU (TCG, 4 vCPUs)"
rc=0
timeout 600 qemu-system-x86_64 -accel tcg,thread=single -smp 4 -m 1024 \
	-nographic -no-reboot -bios qboot.rom -kernel "$kernel" \
	-initrd "$work/initramfs.cpio" \
	-append "console=ttyS0 kunit.enable=0 panic=-1 oops=panic loglevel=4" \
	> "$log" 2>&1 || rc=$?
tr -d '\r' < "$log" | sed -n 's/^@@ \{0,1\}//p'
[ "$rc" != 124 ] || die "the guest timed out after 600 s (log: $log)"
grep -q '^@@ end 0' <(tr -d '\r' < "$log") ||
	die "the demo did not complete in the guest (exit $rc, log: $log)"
if grep -qE 'Oops|BUG:|WARNING:|Kernel panic' "$log"; then
	grep -E 'Oops|BUG:|WARNING:|Kernel panic' "$log" >&2
	die "the guest kernel reported a problem (log: $log)"
fi
msg "done (guest log: $log)"

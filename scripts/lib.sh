# SPDX-License-Identifier: GPL-2.0
# Common settings for the jump_label_rs tooling. Sourced, not run.

# Everything downloaded or built lives outside the checkout so that a fresh
# clone (CI) reuses it: the toolchain, the base tree and the build directory.
JLRS_CACHE=${JLRS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/jump_label_rs}
JLRS_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
JLRS_TOOLS=$JLRS_CACHE/tools
JLRS_BINDGEN=$JLRS_TOOLS/bin/bindgen
JLRS_LLVM=-22
export PATH="$JLRS_CACHE/bin:$JLRS_TOOLS/bin:/usr/lib/llvm-22/bin:$PATH"

# The step currently running, named in every failure message.
JLRS_STEP=${JLRS_STEP:-jump_label_rs}

msg() { printf '[%s] %s\n' "$JLRS_STEP" "$*" >&2; }
die() { printf '[%s] error: %s\n' "$JLRS_STEP" "$*" >&2; exit 1; }
step() { JLRS_STEP=$1; }

# The base tree this checkout was last prepared against, written by
# fetch-base.sh: "7.2.y" and the path of the pristine tree.
jlrs_base_env() {
	[ -r "$JLRS_CACHE/base.env" ] ||
		die "no base kernel fetched yet: run scripts/fetch-base.sh (or make test)"
	# shellcheck disable=SC1091
	. "$JLRS_CACHE/base.env"
	JLRS_SRC=$JLRS_CACHE/$JLRS_BASE_VERSION/src
	JLRS_BUILD=$JLRS_CACHE/$JLRS_BASE_VERSION/build
}

# The checkout's tree as git names it, if nothing in the checkout differs
# from it, no file changed or new (else nothing): what make test's main
# build is stamped with ($JLRS_BUILD/.jlrs-tree), so that make series
# knows the tree it applies was built already.
jlrs_tree_id() {
	local changed
	changed=$(git -C "$JLRS_TOP" status --porcelain 2>/dev/null) || return 0
	[ -z "$changed" ] || return 0
	git -C "$JLRS_TOP" rev-parse 'HEAD^{tree}' 2>/dev/null || true
}

# What a busybox initramfs for the built kernel needs: sets $busybox (a
# static busybox) and $gen (the kernel's gen_init_cpio), or dies saying
# what is missing.
jlrs_initramfs_tools() {
	busybox=/bin/busybox
	[ -x "$busybox" ] || die "$busybox missing (package busybox-static)"
	if readelf -l "$busybox" 2>/dev/null | grep -q 'program interpreter'; then
		die "$busybox is dynamically linked: install busybox-static"
	fi
	gen=$JLRS_BUILD/usr/gen_init_cpio
	[ -x "$gen" ] || die "$gen missing: the kernel needs CONFIG_BLK_DEV_INITRD"
}

# jlrs_initramfs_base INIT: the gen_init_cpio lines every guest's initramfs
# starts with: the console, /proc and /sys to mount, busybox as /bin/sh,
# and INIT as /init. After jlrs_initramfs_tools.
jlrs_initramfs_base() {
	cat <<LIST
dir /dev 0755 0 0
nod /dev/console 0600 0 0 c 5 1
dir /bin 0755 0 0
dir /proc 0755 0 0
dir /sys 0755 0 0
file /bin/busybox $busybox 0755 0 0
slink /bin/sh busybox 0777 0 0
file /init $1 0755 0 0
LIST
}

# The guests' user-space programs, static and without a C library, built
# into directory $1: spin (a PAUSE loop) and syscalls (getpid() loops).
jlrs_user_programs() {
	local prog
	for prog in spin syscalls bpf_tail; do
		clang$JLRS_LLVM -static -nostdlib -fuse-ld=lld -O2 -o "$1/$prog" \
			"$JLRS_TOP/scripts/demo/$prog.c" || die "cannot build scripts/demo/$prog.c"
	done
}

# make(1) options every kernel build here needs.
jlrs_make_opts() {
	printf '%s\n' "LLVM=$JLRS_LLVM" RUSTC=/usr/bin/rustc \
		RUSTDOC=/usr/bin/rustdoc "BINDGEN=$JLRS_BINDGEN"
}

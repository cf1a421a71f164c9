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

# One run at a time in a cache: runs share its source tree, build
# directories and logs, and one could rewrite the source under another's
# build. The first script of a run takes the lock (a second run waits,
# saying so) and every script it starts inherits it; give a second run a
# cache of its own (JLRS_CACHE) to run both at once.
if [ "${JLRS_LOCKED:-}" != "$JLRS_CACHE" ]; then
	mkdir -p "$JLRS_CACHE" || { echo "error: cannot create $JLRS_CACHE" >&2; exit 1; }
	exec {jlrs_lock_fd}>>"$JLRS_CACHE/.lock"
	if ! flock -n "$jlrs_lock_fd"; then
		printf '[%s] waiting for another run using %s (set JLRS_CACHE to run beside it)\n' \
			"$(basename "$0")" "$JLRS_CACHE" >&2
		flock "$jlrs_lock_fd"
	fi
	export JLRS_LOCKED=$JLRS_CACHE
fi

# jlrs_kill_tree PID: PID and every process it started.
jlrs_kill_tree() {
	local child
	for child in $(pgrep -P "$1"); do jlrs_kill_tree "$child"; done
	kill "$1" 2> /dev/null || true
}

# The step currently running, named in every failure message.
JLRS_STEP=${JLRS_STEP:-jump_label_rs}

msg() { printf '[%s] %s\n' "$JLRS_STEP" "$*" >&2; }
die() { printf '[%s] error: %s\n' "$JLRS_STEP" "$*" >&2; exit 1; }
step() { JLRS_STEP=$1; }

# jlrs_prepare: what make demo and make test do first: set the machine
# up, fetch the base and apply the overlay, building bindgen (81 s from
# nothing, measured) while the base downloads and unpacks. Exits on a
# failure, whose step has said why.
jlrs_prepare() {
	local bindgen rc=0
	"$JLRS_TOP/scripts/setup-host.sh" --packages || exit
	"$JLRS_TOP/scripts/setup-host.sh" --bindgen &
	bindgen=$!
	"$JLRS_TOP/scripts/fetch-base.sh" && "$JLRS_TOP/scripts/apply-overlay.sh" || rc=$?
	if [ "$rc" != 0 ]; then
		jlrs_kill_tree "$bindgen"
		exit "$rc"
	fi
	wait "$bindgen" || exit
}

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

# Kernel paths the overlay may populate, and the hook patches: all that
# enters the kernel tree (the rest of the checkout is tooling, results and
# the README, which make demo rewrites).
JLRS_OVERLAY_DIRS=(Documentation arch include init kernel lib mm rust samples tools)

# What of the checkout goes into the kernel tree, as git names it at HEAD,
# if no file of it differs from HEAD or is new (else nothing): what make
# test's main build is stamped with ($JLRS_BUILD/.jlrs-tree), so that make
# series knows the tree it applies was built already.
jlrs_tree_id() {
	local changed
	changed=$(git -C "$JLRS_TOP" status --porcelain -- "${JLRS_OVERLAY_DIRS[@]}" patches \
		2>/dev/null) || return 0
	[ -z "$changed" ] || return 0
	git -C "$JLRS_TOP" ls-tree HEAD -- "${JLRS_OVERLAY_DIRS[@]}" patches 2>/dev/null |
		sha1sum | cut -d' ' -f1
}

# jlrs_initramfs_tools [BUILD]: what a busybox initramfs for the kernel
# built in BUILD (default $JLRS_BUILD) needs: sets $busybox (a static
# busybox) and $gen (that build's gen_init_cpio), or dies saying what is
# missing and which step should have made it.
jlrs_initramfs_tools() {
	local build=${1:-$JLRS_BUILD}
	busybox=/bin/busybox
	[ -x "$busybox" ] ||
		die "$busybox missing: scripts/setup-host.sh should have installed busybox-static"
	if readelf -l "$busybox" 2>/dev/null | grep -q 'program interpreter'; then
		die "$busybox is dynamically linked: install busybox-static"
	fi
	gen=$build/usr/gen_init_cpio
	[ -x "$gen" ] && return 0
	[ -f "$build/arch/x86/boot/bzImage" ] ||
		die "$gen missing: no kernel was built in $build (its build step did not run or failed)"
	die "$gen missing: the kernel built in $build has no initramfs support (CONFIG_BLK_DEV_INITRD)"
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

# jlrs_can_isolate: whether this run may give a process a mount namespace
# of its own (make series' walk works in one, beside other builds).
jlrs_can_isolate() {
	unshare -m --propagation private -- true 2> /dev/null
}

# jlrs_in_copy COPY TREE CMD...: runs CMD in a mount namespace of its own
# where the directory COPY is mounted over TREE: CMD reads and writes COPY
# under TREE's path, and nothing else sees its writes. Needs
# jlrs_can_isolate.
jlrs_in_copy() {
	unshare -m --propagation private -- bash -c \
		'mount --bind "$1" "$2" && shift 2 && exec "$@"' jlrs_in_copy "$@"
}

# jlrs_console: a guest's serial console, read from standard input,
# without its carriage returns, line by line: a log shows each line as the
# guest prints it, and keeps all of them if the guest or the run is
# killed (tr would hold the last 4 KB, minutes of a quiet guest's output).
jlrs_console() {
	sed -u 's/\r//g'
}

# make(1) options every kernel build here needs.
jlrs_make_opts() {
	printf '%s\n' "LLVM=$JLRS_LLVM" RUSTC=/usr/bin/rustc \
		RUSTDOC=/usr/bin/rustdoc "BINDGEN=$JLRS_BINDGEN"
}

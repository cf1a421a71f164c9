#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Fetch the base tree: Debian's linux-source-7.2, at the exact version and
# checksum scripts/base.pin names (the base every hook patch, test and
# figure was made on), downloaded through a private apt list and state
# directory, never installed and never touching the machine's own apt
# sources. The pristine tree is kept under the cache, keyed by version; a
# second run downloads nothing.
#
#   scripts/fetch-base.sh		the pinned base
#   scripts/fetch-base.sh --rebase	(make rebase) move the overlay to the
#					7.2.y sid carries today: fetch it,
#					apply every hook patch to it with no
#					fuzz and, if all apply, pin it
#
# A .deb of the pinned version put in $JLRS_CACHE/apt/debs (from
# snapshot.debian.org, which keeps every version Debian published) is used
# as it is, without the network.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
step fetch-base

PKG=linux-source-7.2
APT=$JLRS_CACHE/apt
PIN=${JLRS_BASE_PIN:-$JLRS_TOP/scripts/base.pin}
# Seconds any one download may take.
NET_TIMEOUT=${JLRS_NET_TIMEOUT:-600}

rebase=
case "${1:-}" in
'') ;;
--rebase) rebase=1 ;;
*) die "usage: scripts/fetch-base.sh [--rebase]" ;;
esac

[ -r "$PIN" ] || die "$PIN missing: it names the base to fetch"
# shellcheck disable=SC1090
. "$PIN"
[ -n "${BASE_DEB_VERSION:-}" ] && [ -n "${BASE_DEB_SHA256:-}" ] ||
	die "$PIN must set BASE_DEB_VERSION and BASE_DEB_SHA256"

# upstream_of DEB_VERSION: the kernel version, 7.2.13 of 7.2.13-1.
upstream_of() {
	local v=${1%%-*}
	echo "${v%%+*}"
}

# A complete base of the pinned version already in the cache is used as
# it is: no network.
if [ -z "$rebase" ] && [ -r "$JLRS_CACHE/base.env" ]; then
	# shellcheck disable=SC1091
	. "$JLRS_CACHE/base.env"
	if [ "${JLRS_BASE_DEB_VERSION:-}" = "$BASE_DEB_VERSION" ] &&
		[ -f "${JLRS_PRISTINE:-/nonexistent}/.jlrs-complete" ]; then
		msg "base: Linux $JLRS_BASE_VERSION (Debian $PKG $JLRS_BASE_DEB_VERSION, cached)"
		exit 0
	fi
fi

mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial" "$APT/debs"

# The Debian mirror the machine already uses, read from its apt configuration
# (deb822 .sources stanzas or one-line sources.list entries).
debian_mirror() {
	local f
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -r "$f" ] || continue
		awk 'BEGIN { RS = ""; FS = "\n" }
		     /Suites:[^\n]*bookworm([ \n]|$)/ && /debian-archive-keyring/ {
			for (i = 1; i <= NF; i++)
				if ($i ~ /^URIs:/) { split($i, u, " "); print u[2]; exit }
		     }' "$f"
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -r "$f" ] || continue
		awk '$1 == "deb" && $0 ~ / bookworm / {
			for (i = 2; i <= NF; i++)
				if ($i ~ /^(https?|file):/) { print $i; exit }
		     }' "$f"
	done
}

aptopts=(-o "Dir::Etc::sourcelist=$APT/sources.list"
	 -o Dir::Etc::sourceparts=/dev/null
	 -o "Dir::State::Lists=$APT/lists"
	 -o "Dir::State::status=$APT/status"
	 -o "Dir::Cache=$APT/cache"
	 -o APT::Get::List-Cleanup=0
	 -o APT::Sandbox::User=root
	 -o Acquire::Retries=2
	 -o Acquire::http::Timeout=30
	 -o Acquire::https::Timeout=30)
# sid_index: the private sid package index, updated if older than a day.
sid_index() {
	local mirror
	mirror=$(debian_mirror | grep -v -- '-security' | head -n1)
	[ -n "$mirror" ] ||
		die "no Debian bookworm mirror found in the machine's apt configuration"
	echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror sid main" \
		> "$APT/sources.list"
	: > "$APT/status"
	if [ -z "$(find "$APT/lists" -maxdepth 1 -name '*sid*Packages*' -mtime -1 2>/dev/null)" ]; then
		msg "updating the private sid package index from $mirror"
		timeout "$NET_TIMEOUT" apt-get "${aptopts[@]}" -qq update ||
			die "apt-get update of the private sid list failed or took more than $NET_TIMEOUT s ($mirror unreachable?)"
	fi
}
# sid_versions: every version of $PKG the sid index has.
sid_versions() {
	apt-cache "${aptopts[@]}" show "$PKG" 2>/dev/null | awk '/^Version:/ { print $2 }'
}
# deb_of VERSION: the .deb of VERSION in $APT/debs, if there is one.
deb_of() {
	ls "$APT/debs/${PKG}_${1/:/%3a}_"*.deb 2>/dev/null | head -n1 || true
}
# download VERSION: the .deb of VERSION from sid, unless already there.
download() {
	local deb
	deb=$(deb_of "$1")
	if [ -z "$deb" ]; then
		msg "downloading $PKG $1"
		(cd "$APT/debs" && timeout "$NET_TIMEOUT" apt-get "${aptopts[@]}" -qq download "$PKG=$1") ||
			die "download of $PKG $1 failed or took more than $NET_TIMEOUT s"
		deb=$(deb_of "$1")
		[ -n "$deb" ] || die "apt-get download of $PKG $1 left no .deb in $APT/debs"
	fi
	echo "$deb"
}
# unpack DEB VERSION: the pristine tree of DEB, in the cache.
unpack() {
	local deb=$1 version=$2 upstream base pristine tmp
	upstream=$(upstream_of "$version")
	base=$JLRS_CACHE/$upstream
	pristine=$base/pristine
	[ "$(cat "$pristine/.jlrs-complete" 2>/dev/null)" = "$version" ] && return 0
	msg "unpacking $PKG $version"
	tmp=$base/unpack.tmp
	rm -rf "$tmp" "$pristine"
	mkdir -p "$tmp"
	dpkg-deb --fsys-tarfile "$deb" |
		tar -x -C "$tmp" ./usr/src/linux-source-7.2.tar.xz ||
		die "$deb does not hold usr/src/linux-source-7.2.tar.xz"
	tar -xf "$tmp/usr/src/linux-source-7.2.tar.xz" -C "$tmp" ||
		die "unpacking linux-source-7.2.tar.xz failed"
	[ -f "$tmp/linux-source-7.2/Makefile" ] ||
		die "linux-source-7.2.tar.xz has no linux-source-7.2/Makefile"
	mv "$tmp/linux-source-7.2" "$pristine"
	rm -rf "$tmp"
	echo "$version" > "$pristine/.jlrs-complete"
}
# use VERSION: make the unpacked VERSION the cache's base (base.env).
use() {
	local upstream kver
	upstream=$(upstream_of "$1")
	kver=$(make -s -C "$JLRS_CACHE/$upstream/pristine" kernelversion 2>/dev/null) ||
		die "cannot read the kernel version of $JLRS_CACHE/$upstream/pristine"
	case "$kver" in
	7.2|7.2.*) ;;
	*) die "base tree reports kernel version $kver, not 7.2.y" ;;
	esac
	cat > "$JLRS_CACHE/base.env.tmp" <<ENV
JLRS_BASE_VERSION=$upstream
JLRS_BASE_DEB_VERSION=$1
JLRS_PRISTINE=$JLRS_CACHE/$upstream/pristine
ENV
	mv "$JLRS_CACHE/base.env.tmp" "$JLRS_CACHE/base.env"
	msg "base: Linux $kver (Debian $PKG $1)"
}

if [ -n "$rebase" ]; then
	sid_index
	version=$(sid_versions | head -n1)
	[ -n "$version" ] || die "sid carries no $PKG: there is no 7.2.y base to move to"
	case "$(upstream_of "$version")" in
	7.2|7.2.*) ;;
	*) die "$PKG in sid is version $version, not a 7.2.y release" ;;
	esac
	if [ "$version" = "$BASE_DEB_VERSION" ]; then
		msg "sid carries $PKG $version, the pinned base: nothing to do"
		exit 0
	fi
	deb=$(download "$version")
	sha=$(sha256sum "$deb" | cut -d' ' -f1)
	unpack "$deb" "$version"
	old=$(cat "$JLRS_CACHE/base.env" 2>/dev/null || true)
	use "$version"
	# Every patch of the series must apply with no fuzz; else the cache keeps its
	# base and the pin stays.
	if ! "$JLRS_TOP/scripts/apply-overlay.sh"; then
		if [ -n "$old" ]; then printf '%s\n' "$old" > "$JLRS_CACHE/base.env"; fi
		die "the overlay does not apply to $PKG $version: mend the patch named above (scripts/series.sh tree DIR, git rebase -i --update-refs base there, scripts/series.sh export DIR), then run make rebase again; $PIN still names $BASE_DEB_VERSION"
	fi
	cat > "$PIN" <<PINNED
# SPDX-License-Identifier: GPL-2.0
# The base every hook patch, test and figure was made on: Debian's
# $PKG at this version, whose .deb has this SHA-256.
# scripts/fetch-base.sh fetches exactly this; make rebase moves to another.
BASE_DEB_VERSION=$version
BASE_DEB_SHA256=$sha
PINNED
	msg "$PIN now names $PKG $version (was $BASE_DEB_VERSION): every hook patch applies; run make test and make demo, and commit $PIN with results/"
	exit 0
fi

deb=$(deb_of "$BASE_DEB_VERSION")
if [ -z "$deb" ]; then
	sid_index
	if ! sid_versions | grep -qxF "$BASE_DEB_VERSION"; then
		now=$(sid_versions | paste -sd, -)
		die "Debian's sid no longer carries $PKG $BASE_DEB_VERSION, the base this overlay is pinned to ($PIN; sid has: ${now:-none}). Either put ${PKG}_${BASE_DEB_VERSION}_all.deb (SHA-256 $BASE_DEB_SHA256) in $APT/debs/, from snapshot.debian.org (https://snapshot.debian.org/package/linux/$BASE_DEB_VERSION/) or any Debian mirror's archive, and run this again; or move the overlay to the version sid has with: make rebase"
	fi
	deb=$(download "$BASE_DEB_VERSION")
fi
sha=$(sha256sum "$deb" | cut -d' ' -f1)
if [ "$sha" != "$BASE_DEB_SHA256" ]; then
	rm -f "$deb"
	die "$deb has SHA-256 $sha, not the pinned $BASE_DEB_SHA256 ($PIN): removed; run this again to download it anew"
fi
unpack "$deb" "$BASE_DEB_VERSION"
use "$BASE_DEB_VERSION"

#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Fetch the base tree: Debian's linux-source-7.2 (any 7.2.y point release),
# downloaded through a private apt list and state directory, never installed
# and never touching the machine's own apt sources. The pristine tree is kept
# under the cache, keyed by version; a second run downloads nothing.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
step fetch-base

PKG=linux-source-7.2
APT=$JLRS_CACHE/apt

# A complete base already in the cache is used as it is: no network. Set
# JLRS_REFRESH_BASE=1 to look for a newer 7.2.y.
if [ -z "${JLRS_REFRESH_BASE:-}" ] && [ -r "$JLRS_CACHE/base.env" ]; then
	# shellcheck disable=SC1091
	. "$JLRS_CACHE/base.env"
	if [ -f "${JLRS_PRISTINE:-/nonexistent}/.jlrs-complete" ]; then
		msg "base: Linux $JLRS_BASE_VERSION (Debian $PKG $JLRS_BASE_DEB_VERSION, cached)"
		exit 0
	fi
fi

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

mirror=$(debian_mirror | grep -v -- '-security' | head -n1)
[ -n "$mirror" ] ||
	die "no Debian bookworm mirror found in the machine's apt configuration"

mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial" "$APT/debs"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror sid main" \
	> "$APT/sources.list"
aptopts=(-o "Dir::Etc::sourcelist=$APT/sources.list"
	 -o Dir::Etc::sourceparts=/dev/null
	 -o "Dir::State::Lists=$APT/lists"
	 -o "Dir::State::status=$APT/status"
	 -o "Dir::Cache=$APT/cache"
	 -o APT::Get::List-Cleanup=0
	 -o APT::Sandbox::User=root)
: > "$APT/status"

# Reuse what is already there when the index is fresh enough (a day).
if [ -z "$(find "$APT/lists" -maxdepth 1 -name '*sid*Packages*' -mtime -1 2>/dev/null)" ]; then
	msg "updating the private sid package index from $mirror"
	apt-get "${aptopts[@]}" -qq update ||
		die "apt-get update of the private sid list failed ($mirror unreachable?)"
fi

version=$(apt-cache "${aptopts[@]}" show "$PKG" 2>/dev/null |
	  awk '/^Version:/ { print $2; exit }') || true
[ -n "$version" ] || die "$PKG is not available from sid any more: no 7.2.y base to fetch"
upstream=${version%%-*}
upstream=${upstream%%+*}
case "$upstream" in
7.2|7.2.*) ;;
*) die "$PKG in sid is version $version, not a 7.2.y release" ;;
esac

base=$JLRS_CACHE/$upstream
pristine=$base/pristine
if [ ! -f "$pristine/.jlrs-complete" ]; then
	deb=$(ls "$APT/debs/${PKG}_${version}_"*.deb 2>/dev/null | head -n1 || true)
	if [ -z "$deb" ]; then
		msg "downloading $PKG $version"
		(cd "$APT/debs" && apt-get "${aptopts[@]}" -qq download "$PKG=$version") ||
			die "download of $PKG $version failed"
		deb=$(ls "$APT/debs/${PKG}_${version}_"*.deb | head -n1)
	fi
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
fi
kver=$(make -s -C "$pristine" kernelversion 2>/dev/null) ||
	die "cannot read the kernel version of $pristine"
case "$kver" in
7.2|7.2.*) ;;
*) die "base tree reports kernel version $kver, not 7.2.y" ;;
esac
cat > "$JLRS_CACHE/base.env" <<ENV
JLRS_BASE_VERSION=$upstream
JLRS_BASE_DEB_VERSION=$version
JLRS_PRISTINE=$pristine
ENV
msg "base: Linux $kver (Debian $PKG $version)"

#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the work tree: the pristine base with every patch of the series of
# patches/ (scripts/series.sh) applied, the overlay files at their kernel
# paths over what they add. Everything is first assembled in a staging
# directory, so a patch that no longer applies fails before the work tree is
# touched. Only files whose content changed are copied, so their neighbours
# keep their timestamps and the kernel rebuilds incrementally. An overlay
# file that differs from what the series makes of it is named, in
# $JLRS_SRC/.jlrs-unsynced (lint fails on it): scripts/series.sh absorb puts
# it in its patch.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
step apply-overlay
jlrs_base_env


[ -d "$JLRS_PRISTINE" ] || die "pristine tree $JLRS_PRISTINE missing: run scripts/fetch-base.sh"

if [ ! -f "$JLRS_SRC/.jlrs-manifest" ]; then
	msg "creating the work tree $JLRS_SRC"
	rm -rf "$JLRS_SRC.tmp"
	cp -a "$JLRS_PRISTINE" "$JLRS_SRC.tmp"
	: > "$JLRS_SRC.tmp/.jlrs-manifest"
	rm -rf "$JLRS_SRC"
	mv "$JLRS_SRC.tmp" "$JLRS_SRC"
fi

stage=$(mktemp -d "$JLRS_CACHE/stage.XXXXXX")
trap 'rm -rf "$stage" "$stage.unsynced"' EXIT

# 1. The series, applied to copies of the pristine files they touch.
for p in "$JLRS_TOP"/patches/*/[0-9][0-9][0-9][0-9]-*.patch; do
	case "$p" in */0000-cover-letter.patch) continue ;; esac
	for f in $(sed -n 's|^+++ b/||p; s|^--- a/||p' "$p" | sort -u); do
		if [ ! -e "$stage/$f" ] && [ -e "$JLRS_PRISTINE/$f" ]; then
			mkdir -p "$stage/$(dirname "$f")"
			cp -p "$JLRS_PRISTINE/$f" "$stage/$f"
		fi
	done
	if ! out=$(patch -p1 -d "$stage" --batch --forward -F0 \
			--no-backup-if-mismatch -r - < "$p" 2>&1); then
		printf '%s\n' "$out" >&2
		die "${p#"$JLRS_TOP"/} no longer applies to Linux $JLRS_BASE_VERSION"
	fi
done

# 2. Overlay files. They are new files: an overlay file that shadows an
# upstream one is an error, upstream files change only through patches.
unsynced=$stage.unsynced
: > "$unsynced"
for d in "${JLRS_OVERLAY_DIRS[@]}"; do
	[ -d "$JLRS_TOP/$d" ] || continue
	(cd "$JLRS_TOP" && find "$d" -type f ! -name '*.orig' ! -name '*.rej' \
		! -name '*~' ! -path '*/target/*') |
	while read -r f; do
		if [ -e "$JLRS_PRISTINE/$f" ]; then
			die "overlay file $f shadows the upstream file: change it with a patch"
		fi
		cmp -s "$JLRS_TOP/$f" "$stage/$f" || echo "$f" >> "$unsynced"
		mkdir -p "$stage/$(dirname "$f")"
		cp -p "$JLRS_TOP/$f" "$stage/$f"
	done
done
# And what the series adds that is not in the overlay.
(cd "$stage" && find . -type f | sed 's|^\./||') | while read -r f; do
	[ -e "$JLRS_PRISTINE/$f" ] || [ -e "$JLRS_TOP/$f" ] || echo "$f" >> "$unsynced"
done

# 3. Install: the old manifest plus the new one are recorded first, so an
# interrupted run is repaired by the next one.
new=$(cd "$stage" && find . -type f | sed 's|^\./||' | sort)
old=$(cat "$JLRS_SRC/.jlrs-manifest")
printf '%s\n' "$old" "$new" | sed '/^$/d' | sort -u > "$JLRS_SRC/.jlrs-manifest"
changed=0
while read -r f; do
	[ -n "$f" ] || continue
	if ! cmp -s "$stage/$f" "$JLRS_SRC/$f"; then
		mkdir -p "$JLRS_SRC/$(dirname "$f")"
		cp "$stage/$f" "$JLRS_SRC/$f"
		changed=$((changed + 1))
	fi
done <<< "$new"
# Files the overlay no longer provides go back to upstream's or away.
while read -r f; do
	[ -n "$f" ] || continue
	grep -qxF -- "$f" <<< "$new" && continue
	if [ -e "$JLRS_PRISTINE/$f" ]; then
		cmp -s "$JLRS_PRISTINE/$f" "$JLRS_SRC/$f" ||
			cp "$JLRS_PRISTINE/$f" "$JLRS_SRC/$f"
	else
		rm -f "$JLRS_SRC/$f"
		# And the directories it leaves empty, up to the tree's.
		d=$(dirname "$f")
		while [ "$d" != . ] && rmdir "$JLRS_SRC/$d" 2>/dev/null; do
			d=$(dirname "$d")
		done
	fi
	changed=$((changed + 1))
done <<< "$old"
printf '%s\n' "$new" > "$JLRS_SRC/.jlrs-manifest"
sort -u "$unsynced" > "$JLRS_SRC/.jlrs-unsynced"
if [ -s "$JLRS_SRC/.jlrs-unsynced" ]; then
	msg "differ from the series (scripts/series.sh absorb): $(tr '\n' ' ' < "$JLRS_SRC/.jlrs-unsynced")"
fi
msg "overlay applied to Linux $JLRS_BASE_VERSION: $changed file(s) updated"

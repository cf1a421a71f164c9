#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The hook patches (patches/), edited as commits of a 7.2 tree:
#
#   scripts/patches.sh tree DIR	makes DIR a git tree of the pristine base
#				with every patch of patches/series applied
#				as a commit of its own (git am), in order;
#   scripts/patches.sh export DIR	writes each commit of DIR past the base
#				back to the patch of patches/series in the
#				same place (git format-patch), and checks
#				each with checkpatch --strict.
#
# Edit a hook in DIR, then amend its commit (git commit --fixup and git
# rebase --autosquash, or git rebase -i), and export. The number of
# commits must stay the number of patches: a new hook patch is first named
# in patches/series (any content), then made in DIR by "tree" again.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
step patches
jlrs_base_env

usage() { die "usage: scripts/patches.sh tree|export DIR"; }
[ $# = 2 ] || usage
cmd=$1 dir=$2
mapfile -t series < <(grep -v '^#' "$JLRS_TOP/patches/series" | sed '/^$/d')
[ ${#series[@]} -gt 0 ] || die "patches/series names no patch"

case $cmd in
tree)
	[ ! -e "$dir" ] || die "$dir exists: tree makes a new directory"
	mkdir -p "$dir"
	cp -a "$JLRS_PRISTINE/." "$dir/"
	cd "$dir"
	git init -q .
	# Debian's source tree ignores everything at its top: add it all.
	git add -A -f > /dev/null
	git commit -q -m "Linux $JLRS_BASE_VERSION (Debian linux-source-7.2 $JLRS_BASE_DEB_VERSION)"
	git tag jlrs-base
	for p in "${series[@]}"; do
		git am -q --keep-cr "$JLRS_TOP/patches/$p" ||
			die "patches/$p does not apply in series order (git am --abort in $dir to look)"
	done
	msg "$dir: the base and ${#series[@]} hook patches, one commit each (tag jlrs-base)"
	;;
export)
	[ -d "$dir/.git" ] || die "$dir is not a tree made by 'scripts/patches.sh tree'"
	cd "$dir"
	git rev-parse -q --verify jlrs-base > /dev/null || die "$dir has no tag jlrs-base"
	[ -z "$(git status --porcelain --untracked-files=no)" ] ||
		die "$dir has changes not committed: commit them to their patch first"
	mapfile -t commits < <(git rev-list --reverse jlrs-base..HEAD)
	[ ${#commits[@]} = ${#series[@]} ] ||
		die "$dir has ${#commits[@]} commits past the base, patches/series ${#series[@]} patches"
	out=$(mktemp -d)
	trap 'rm -rf "$out"' EXIT
	for i in "${!commits[@]}"; do
		git format-patch -1 --stdout --abbrev=7 "${commits[i]}" > "$out/${series[i]}"
	done
	bad=0
	for p in "${series[@]}"; do
		if ! "$JLRS_PRISTINE/scripts/checkpatch.pl" --strict --no-tree --terse \
			"$out/$p" > "$out/$p.check" 2>&1; then
			sed "s|^|$p: |" "$out/$p.check" >&2
			bad=1
		fi
	done
	[ $bad = 0 ] || die "checkpatch --strict refused the patches above: nothing written"
	# A patch's text, but what git makes of it anew each time: its hash
	# and date, blob hashes, hunk headers' function names, "PATCH n/m".
	same() {
		sed -e '/^From [0-9a-f]\{40\} /d' -e '/^Date: /d' -e '/^index /d' \
			-e 's/^\(@@ [^@]* @@\).*/\1/' -e 's/^Subject: \[PATCH[^]]*\]/Subject: [PATCH]/' "$1"
	}
	changed=0
	for p in "${series[@]}"; do
		# A patch whose change is the same keeps its file.
		if ! cmp -s <(same "$out/$p") <(same "$JLRS_TOP/patches/$p" 2>/dev/null); then
			cp "$out/$p" "$JLRS_TOP/patches/$p"
			msg "patches/$p updated"
			changed=$((changed + 1))
		fi
	done
	msg "$changed of ${#series[@]} hook patches changed"
	;;
*)
	usage
	;;
esac

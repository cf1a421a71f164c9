#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The series: each directory of patches/, in the order of their names, is
# one git format-patch series with its cover letter, applied on the one
# before it, the first on the pristine base. They hold every change to the
# base: the hooks into upstream files and the new files, which are also at
# their kernel paths in this checkout (the overlay), equal to what the last
# patch leaves (scripts/apply-overlay.sh says where they differ, and lint
# fails).
#
#   scripts/series.sh tree DIR	DIR: a git tree of the base (tag base) with
#				every series applied by git am, each on a
#				branch named as its directory; edit its
#				commits as any branch's (git rebase -i
#				--update-refs base)
#   scripts/series.sh export DIR	each branch of DIR back to its directory
#				of patches/ (git format-patch, the cover
#				letter from the branch's description), and
#				the overlay files from DIR's last branch
#   scripts/series.sh absorb DIR	each overlay file that differs from DIR
#				made a fixup of the last commit of DIR that
#				changed it, squashed, then exported
#   scripts/series.sh check	(make series) git am of every series on
#				the base gives the tested tree, every patch
#				passes checkpatch --strict, every prefix
#				builds with make test-matrix's production
#				configuration, with no warning naming a file
#				the series changes (scripts/series-walk.py; with
#				JLRS_SERIES_BISECT=0, not), and the whole
#				with the kunitconfig (JLRS_SERIES_BUILD=0:
#				not; not again when make test's main build
#				is of this checkout's tree)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
step series
jlrs_base_env

series=()
for d in "$JLRS_TOP"/patches/*/; do
	[ -f "$d/0000-cover-letter.patch" ] || die "patches/$(basename "$d") has no 0000-cover-letter.patch"
	series+=("$(basename "$d")")
done
[ ${#series[@]} -gt 0 ] || die "patches/ holds no series"
patches_of() { ls "$JLRS_TOP/patches/$1"/[0-9][0-9][0-9][0-9]-*.patch | grep -v '/0000-cover-letter.patch$'; }
# Commits made again of the same patches are the same commits.
export GIT_COMMITTER_NAME="$(git -C "$JLRS_TOP" log -1 --format=%an)"
export GIT_COMMITTER_EMAIL="$(git -C "$JLRS_TOP" log -1 --format=%ae)"

# base_repo DIR: DIR a git tree of the pristine base alone, tag base.
base_repo() {
	if [ ! -d "$1/.git" ]; then
		msg "making the base repository $1 (once)"
		rm -rf "$1.tmp"
		cp -a "$JLRS_PRISTINE" "$1.tmp"
		git -C "$1.tmp" init -q
		# No gc in the background, holding the cache's lock.
		git -C "$1.tmp" config gc.auto 0
		# Debian's source tree ignores everything at its top: add it all.
		git -C "$1.tmp" add -f -A
		GIT_AUTHOR_DATE=2026-01-01T00:00:00Z GIT_COMMITTER_DATE=2026-01-01T00:00:00Z git -C "$1.tmp" commit -q \
			-m "Linux $JLRS_BASE_VERSION (Debian linux-source-7.2 $JLRS_BASE_DEB_VERSION)"
		git -C "$1.tmp" tag base
		mv "$1.tmp" "$1"
	fi
	git -C "$1" am --abort > /dev/null 2>&1 || true
	git -C "$1" checkout -q -f --detach base
	git -C "$1" clean -q -f -d -x
}

# apply DIR: every series on DIR's base, each on its branch.
apply() {
	local s p
	for s in "${series[@]}"; do
		git -C "$1" checkout -q -B "$s"
		mapfile -t p < <(patches_of "$s")
		git -C "$1" am -q --keep-cr --committer-date-is-author-date "${p[@]}" ||
			die "patches/$s does not apply on the series before it (git -C $1 am --show-current-patch)"
		# The cover letter's subject and text, without its shortlog.
		git -C "$1" config "branch.$s.description" "$(awk '
			/^Subject: / && !s { sub(/^Subject: (\[[^]]*\] )?/, ""); subj = $0; s = 1; next }
			s == 1 && /^ / { subj = subj $0; next }
			s == 1 { print subj; print ""; s = 2; next }
			s == 2 && /^[^ ].* \([0-9]+\):$/ { exit }
			s == 2' "$JLRS_TOP/patches/$s/0000-cover-letter.patch")"
	done
}

# export DIR: DIR's branches to patches/, checked; then the overlay files.
export_tree() {
	local dir=$1 out s prev=base p n=0 f
	[ -d "$dir/.git" ] && git -C "$dir" rev-parse -q --verify base > /dev/null ||
		die "$dir is not a tree made by 'scripts/series.sh tree'"
	[ -z "$(git -C "$dir" status --porcelain --untracked-files=no)" ] ||
		die "$dir has changes not committed: commit them to their patch first"
	out=$(mktemp -d)
	trap 'rm -rf "$out"' RETURN
	for s in "${series[@]}"; do
		git -C "$dir" rev-parse -q --verify "refs/heads/$s" > /dev/null || die "$dir has no branch $s"
		git -C "$dir" format-patch -q --cover-letter --cover-from-description=subject \
			--no-signature --abbrev=7 -o "$out/$s" "$prev..$s"
		prev=$s
	done
	for p in "$out"/*/0*.patch; do
		case "$p" in */0000-cover-letter.patch) continue ;; esac
		(cd "$JLRS_PRISTINE" && PATH=/usr/bin:$PATH ./scripts/checkpatch.pl --strict --terse \
			--no-summary "$p") > "$p.check" 2>&1 && [ ! -s "$p.check" ] ||
			{ sed "s|^|${p#"$out"/}: |" "$p.check" >&2; n=1; }
		rm -f "$p.check"
	done
	[ $n = 0 ] || die "checkpatch --strict refused the patches above: nothing written"
	# What git makes anew each time: hashes, dates, hunk headers' function names.
	same() {
		sed -e '/^From [0-9a-f]\{40\} /d' -e '/^Date: /d' -e '/^index /d' \
			-e 's/^\(@@ [^@]* @@\).*/\1/' "$1"
	}
	n=0
	for s in "${series[@]}"; do
		for p in "$out/$s"/*.patch; do
			f=$JLRS_TOP/patches/$s/$(basename "$p")
			cmp -s <(same "$p") <(same "$f" 2>/dev/null) && cp "$f" "$p" || n=$((n + 1))
		done
		rm -rf "$JLRS_TOP/patches/$s"
		cp -r "$out/$s" "$JLRS_TOP/patches/$s"
	done
	# The overlay: every file the series adds, as the last branch has it.
	git -C "$dir" diff --name-only --diff-filter=A base "${series[-1]}" | while read -r f; do
		mkdir -p "$JLRS_TOP/$(dirname "$f")"
		git -C "$dir" show "${series[-1]}:$f" > "$JLRS_TOP/$f.tmp"
		cmp -s "$JLRS_TOP/$f.tmp" "$JLRS_TOP/$f" && rm "$JLRS_TOP/$f.tmp" ||
			mv "$JLRS_TOP/$f.tmp" "$JLRS_TOP/$f"
	done
	msg "patches/: ${#series[@]} series, $n patches changed; the overlay is the last series' tree"
}

case "${1-} ${2-}" in
tree\ ?*)
	[ $# = 2 ] && [ ! -e "$2" ] || die "usage: scripts/series.sh tree DIR (a new directory)"
	base_repo "$2"
	apply "$2"
	msg "$2: the base (tag base) and the series ${series[*]}, a branch each"
	;;
export\ ?*)
	export_tree "$2"
	;;
absorb\ ?*)
	dir=$2
	git -C "$dir" checkout -q "${series[-1]}"
	while read -r f; do
		cmp -s "$JLRS_TOP/$f" "$dir/$f" && continue
		c=$(git -C "$dir" log -1 --format=%H base.. -- "$f")
		[ -n "$c" ] || die "$f is in no patch: add it to one in $dir, then export"
		cp "$JLRS_TOP/$f" "$dir/$f"
		git -C "$dir" commit -q --fixup="$c" -- "$f"
		msg "$f: a fixup of $(git -C "$dir" log -1 --format=%s "$c")"
	done < <(cd "$JLRS_TOP" && git ls-files "${JLRS_OVERLAY_DIRS[@]}")
	GIT_SEQUENCE_EDITOR=: git -C "$dir" rebase -q -i --autosquash --update-refs base ||
		die "the fixups do not squash in $dir: finish the rebase there, then export"
	export_tree "$dir"
	;;
check\ )
	"$JLRS_TOP/scripts/apply-overlay.sh" > /dev/null
	dir=$JLRS_CACHE/$JLRS_BASE_VERSION/series
	mkdir -p "$dir"
	base_repo "$dir/tree"
	apply "$dir/tree"
	n=$(git -C "$dir/tree" rev-list --count base..HEAD)
	msg "git am of the ${#series[@]} series (${series[*]}) on the base: $n patches"
	# The applied series is the tested tree: each file either touches.
	differ=$( (git -C "$dir/tree" diff --name-only base HEAD; grep -v '^\.jlrs-manifest$' \
		"$JLRS_SRC/.jlrs-manifest") | sort -u | while read -r f; do
		cmp -s "$dir/tree/$f" "$JLRS_SRC/$f" || echo "$f"
	done)
	[ -z "$differ" ] || die "the applied series is not the tested tree, in: $differ"
	msg "git am on the base gives the tested tree"
	bad=0
	for s in "${series[@]}"; do
		while read -r p; do
			out=$(cd "$dir/tree" && PATH=/usr/bin:$PATH ./scripts/checkpatch.pl --strict \
				--terse --no-summary "$p" 2>&1) && [ -z "$out" ] ||
				{ echo "$out" | sed "s|^|$s/$(basename "$p"): |"; bad=1; }
		done < <(patches_of "$s")
	done
	[ $bad = 0 ] || die "checkpatch --strict refused the patches above"
	msg "checkpatch --strict: ok ($n patches)"
	if [ "${JLRS_SERIES_BISECT:-1}" != 0 ]; then
		# From make test-matrix's production build (what ships of each
		# prefix: the options of the tests and the benchmark come before
		# their code does): a copy of the tested tree in a mount namespace
		# of its own, over $JLRS_SRC, walked from the last patch to the
		# first, so that other builds see no change.
		seed=$JLRS_CACHE/$JLRS_BASE_VERSION/build-production
		[ -f "$seed/vmlinux" ] || die "no production build of the tested tree to build the prefixes from: run make test-matrix first (or JLRS_SERIES_BISECT=0 make series)"
		mo=()
		while read -r o; do mo+=(--make-opt "$o"); done < <(jlrs_make_opts)
		walk=(python3 "$JLRS_TOP/scripts/series-walk.py" --work "$dir/tree" --src "$JLRS_SRC"
			--build "$dir/bisect" --seed "$seed" ${mo[@]+"${mo[@]}"})
		if jlrs_can_isolate; then
			rsync -a --delete "$JLRS_SRC/" "$dir/src/" || die "cannot copy $JLRS_SRC to $dir/src"
			jlrs_in_copy "$dir/src" "$JLRS_SRC" "${walk[@]}"
		else
			msg "no mount namespace (unshare -m): the walk rewrites $JLRS_SRC itself"
			"${walk[@]}"
		fi
	fi
	if [ "${JLRS_SERIES_BUILD:-1}" = 0 ]; then
		:
	elif [ "$(jlrs_tree_id)" = "$(cat "$JLRS_BUILD/.jlrs-tree" 2>/dev/null)" ]; then
		msg "build of the applied series: ok (make test's main build, the same tree)"
	else
		mo=()
		while read -r o; do mo+=("--make_options=$o"); done < <(jlrs_make_opts)
		(cd "$dir/tree" && python3 tools/testing/kunit/kunit.py build --arch=x86_64 \
			--kunitconfig=arch/x86/kernel/text_poke_batch/.kunitconfig \
			--build_dir="$dir/build" --jobs="$(nproc)" "${mo[@]}") > "$dir/build.log" 2>&1 ||
			{ tail -20 "$dir/build.log"; die "the applied series does not build (log: $dir/build.log)"; }
		msg "build of the applied series: ok"
	fi
	;;
*)
	die "usage: scripts/series.sh tree DIR | export DIR | absorb DIR | check"
	;;
esac

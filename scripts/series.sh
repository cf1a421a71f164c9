#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make series: export the overlay as a git format-patch series against the
# pristine base (scripts/series.list says which files and hook patches
# make each patch), with a cover letter carrying results/'s figures, into
# $JLRS_CACHE/<version>/series/patches; then apply it with git am to the
# base again, check that it gives exactly the tree make test builds, run
# checkpatch --strict on every patch, build every prefix of the series in
# turn, incrementally, in a build directory of its own (series/bisect, a
# copy of make test-matrix's production build, or of make test's main
# build, whose .config each prefix starts from: the walk goes from the
# last patch to the first in a copy of the tested tree, each step
# rewriting the files of one patch, and puts every file back as it was;
# JLRS_SERIES_BISECT=0 skips it; a prefix whose tree was built before is
# not built again), and build the applied
# tree with the kunitconfig in a build directory of its own
# (JLRS_SERIES_BUILD=0 skips the build). Where make test's main build was made from this very
# checkout's tree (git's tree of HEAD, no tracked file changed: the stamp
# $JLRS_BUILD/.jlrs-tree), the applied tree, identical to it file by file,
# is not built again. Writes "series:" lines and exits non-zero on a
# failure.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
step series
jlrs_base_env
"$JLRS_TOP/scripts/apply-overlay.sh" > /dev/null

dir=$JLRS_CACHE/$JLRS_BASE_VERSION/series
mkdir -p "$dir"
build=()
tree=$(jlrs_tree_id)
built=$(cat "$JLRS_BUILD/.jlrs-tree" 2>/dev/null || true)
if [ "${JLRS_SERIES_BUILD:-1}" != 0 ] && [ -n "$tree" ] && [ "$tree" = "$built" ]; then
	build=(--built "make test's main build, tree $tree")
elif [ "${JLRS_SERIES_BUILD:-1}" != 0 ]; then
	mo=()
	while read -r o; do mo+=("--make_options=$o"); done < <(jlrs_make_opts)
	build=(--build "python3 tools/testing/kunit/kunit.py build --arch=x86_64 \
--kunitconfig=arch/x86/kernel/text_poke_batch/.kunitconfig --build_dir=$dir/build --jobs=$(nproc) ${mo[*]} \
> $dir/build.log 2>&1 || { tail -20 $dir/build.log; exit 1; }")
fi
bisect=()
if [ "${JLRS_SERIES_BISECT:-1}" != 0 ]; then
	# The configuration of make test-matrix's production build (the batch,
	# deferral, qpw, the static-key sample and its suite, without what
	# only measurement needs), which builds what ships of each prefix;
	# the main configuration's if there is none. The walk starts from a copy of
	# that build, made of the tested tree, and goes from the last patch to
	# the first, in that tree.
	seed=$JLRS_CACHE/$JLRS_BASE_VERSION/build-production
	[ -f "$seed/.config" ] && [ -f "$seed/vmlinux" ] || seed=$JLRS_BUILD
	[ -f "$seed/.config" ] && [ -f "$seed/vmlinux" ] ||
		die "no build of the tested tree to start every prefix's build from: run make test first"
	cp "$seed/.config" "$dir/bisect.config"
	bisect=(--bisect-build "$dir/bisect" --bisect-config "$dir/bisect.config"
		--bisect-seed "$seed")
	while read -r o; do bisect+=(--make-opt "$o"); done < <(jlrs_make_opts)
fi
isolate=()
if [ ${#bisect[@]} -gt 0 ]; then
	# The walk rewrites the tested tree a patch at a time. It works in a
	# copy of it (series/src, the same files with the same times),
	# mounted over $JLRS_SRC in a mount namespace of its own: its seed's
	# dependency files name $JLRS_SRC, and find the copy there, while
	# every other build of $JLRS_SRC (.ci/run runs make test-matrix's
	# beside the walk) sees no change. Without a mount namespace (not
	# root), it walks $JLRS_SRC itself: nothing else may build meanwhile.
	if jlrs_can_isolate; then
		msg "the walk's copy of the tested tree: $dir/src"
		rsync -a --delete "$JLRS_SRC/" "$dir/src/" ||
			die "cannot copy $JLRS_SRC to $dir/src for the walk"
		isolate=(jlrs_in_copy "$dir/src" "$JLRS_SRC")
	else
		msg "no mount namespace (unshare -m): the walk rewrites $JLRS_SRC itself"
	fi
fi
${isolate[@]+"${isolate[@]}"} python3 "$JLRS_TOP/scripts/series.py" --pristine "$JLRS_PRISTINE" --src "$JLRS_SRC" \
	--top "$JLRS_TOP" --work "$dir/tree" --out "$dir/patches" ${build[@]+"${build[@]}"} \
	${bisect[@]+"${bisect[@]}"}

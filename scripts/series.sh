#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make series: export the overlay as a git format-patch series against the
# pristine base (scripts/series.list says which files and hook patches
# make each patch), with a cover letter carrying results/'s figures, into
# $JLRS_CACHE/<version>/series/patches; then apply it with git am to the
# base again, check that it gives exactly the tree make test builds, run
# checkpatch --strict on every patch, and build the applied tree with the
# kunitconfig in a build directory of its own (JLRS_SERIES_BUILD=0 skips
# the build). Where make test's main build was made from this very
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
--kunitconfig=kernel/jump_label_rs/.kunitconfig --build_dir=$dir/build --jobs=$(nproc) ${mo[*]} \
> $dir/build.log 2>&1 || { tail -20 $dir/build.log; exit 1; }")
fi
python3 "$JLRS_TOP/scripts/series.py" --pristine "$JLRS_PRISTINE" --src "$JLRS_SRC" \
	--top "$JLRS_TOP" --work "$dir/tree" --out "$dir/patches" "${build[@]}"

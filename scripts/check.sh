#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Lint the project's files in the work tree: rustfmt, a rebuild of the
# project's objects under clippy (which also shows rustc's and objtool's
# warnings), the danger zone of deferred work, the syncs' serializing
# instructions, the layout of Rust static-key sites, what safe Rust may not
# build (scripts/compile-fail/), kernel-doc, the documentation's build
# (make htmldocs, make rustdoc), checkpatch --strict on the C files and
# the series' patches, and that the overlay is the series' tree.
# Prints one "check: NAME: ok|FAILED" line per check; exits non-zero if any
# failed. Findings in upstream files are not ours and are not reported.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
step check
jlrs_base_env

logs=$JLRS_CACHE/$JLRS_BASE_VERSION/logs
mkdir -p "$logs"
failed=0
mapfile -t files < "$JLRS_SRC/.jlrs-manifest"
ours_re=$(printf '%s\n' "${files[@]}" | sed 's/[.[\*^$]/\\&/g' | paste -sd'|')

result() {
	if [ "$2" = 0 ]; then
		echo "check: $1: ok"
	else
		echo "check: $1: FAILED"
		failed=1
	fi
}

# hook_lines [FILE]...: the lines the series adds to upstream files (to the
# files named only, if any), as PATCH:LINE:+TEXT.
hook_lines() {
	local want=" $* " p
	for p in "$JLRS_TOP"/patches/*/[0-9]*.patch; do
		awk -v pristine="$JLRS_PRISTINE" -v want="$want" '
			/^diff --git / { f = substr($4, 3); on = (want == "  " || index(want, " " f " ")) &&
				system("test -e \"" pristine "/" f "\"") == 0 }
			on && /^\+[^+]/ { print FILENAME ":" FNR ":" $0 }' "$p"
	done
}

# The checks of the built kernel need one: make test builds it first.
if [ ! -f "$JLRS_BUILD/.config" ] || [ ! -f "$JLRS_BUILD/vmlinux" ]; then
	echo "check: kernel build: FAILED (no kernel built in $JLRS_BUILD: run make kunit first)"
	exit 1
fi

mk=(make -C "$JLRS_SRC" O="$JLRS_BUILD" ARCH=x86_64 -j"$(nproc)")
while read -r o; do mk+=("$o"); done < <(jlrs_make_opts)

# rustfmt: only our files.
rs=()
for f in "${files[@]}"; do
	case "$f" in *.rs) rs+=("$JLRS_SRC/$f") ;; esac
done
rc=0
if [ ${#rs[@]} -gt 0 ]; then
	/usr/bin/rustfmt --check --edition 2021 \
		--config-path "$JLRS_SRC/.rustfmt.toml" "${rs[@]}" > "$logs/rustfmt.log" 2>&1 || rc=1
	[ "$rc" = 0 ] || cat "$logs/rustfmt.log"
fi
result rustfmt $rc

# rustc + clippy + objtool: rebuild our objects and everything built from them.
for f in "${files[@]}"; do
	case "$f" in *.rs|*.c|*.S) touch "$JLRS_SRC/$f" ;; esac
done
"${mk[@]}" CLIPPY=1 CLIPPY_DRIVER=/usr/bin/clippy-driver > "$logs/clippy.log" 2>&1
rc=$?
if [ "$rc" != 0 ]; then
	tail -n 40 "$logs/clippy.log"
	result "build with CLIPPY=1" 1
else
	# A warning names a project file on its own line or on a following
	# "--> file:line" line; objtool names the object.
	warn=$(grep -E -A4 '^(warning|error)' "$logs/clippy.log" | grep -E "($ours_re)" ; \
	       grep -E 'objtool.*(static_key|jump_label_rs|text_poke_batch|ct_work|context_tracking_work|tlb_defer|qpw)|(static_key|jump_label_rs|text_poke_batch|ct_work|context_tracking_work|tlb_defer|qpw)[^ ]*\.o: warning' "$logs/clippy.log")
	rc=0
	if [ -n "$warn" ]; then
		grep -E -B2 -A12 '^(warning|error)' "$logs/clippy.log" | head -n 200
		rc=1
	fi
	result "rustc, clippy and objtool warnings" $rc
fi

# checkpatch --strict: our C files, then the hook patches. It leaves a cache
# file in the current directory: run it from the logs directory.
# The danger zone of deferred work: every site there, and every static call
# trampoline called from there, is in the ranges the sender refuses to
# defer (ct_work_danger_text[], read from the image), and so is the idle
# code. The check's own test: with the noinstr range left out of the rule
# it must fail on the bench's key whose site is in noinstr text
# (CONFIG_TEXT_POKE_BATCH_BENCH) and on the idle code, and with the
# trampolines' range left out, on a static call.
rc=0
if grep -q '^CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE=y' "$JLRS_BUILD/.config"; then
	dz=(python3 "$JLRS_TOP/scripts/danger-zone.py" "$JLRS_BUILD/vmlinux"
		--nm "llvm-nm$JLRS_LLVM" --objdump "llvm-objdump$JLRS_LLVM")
	"${dz[@]}" --strict || rc=1
	"${dz[@]}" --drop-range 0 --expect-error text_poke_bench11KEY_NOINSTR \
		--expect-error .cpuidle.text > /dev/null || rc=1
	"${dz[@]}" --drop-range 2 --expect-error __SCK__ > /dev/null || rc=1
fi
result "danger zone of deferred work (scripts/danger-zone.py)" $rc

# The data side of the danger zone: the entry code touches nothing before
# it takes its deferred work that a stale TLB entry could map, only the
# stacks, per-CPU data, the kernel image and the task_struct. The check's
# own test: told to distrust the task_struct, it must find the entry
# code's write to it (and so for per-CPU data).
rc=0
if grep -q '^CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE=y' "$JLRS_BUILD/.config"; then
	dd=(python3 "$JLRS_TOP/scripts/danger-data.py" "$JLRS_BUILD/vmlinux"
		--nm "llvm-nm$JLRS_LLVM" --objdump "llvm-objdump$JLRS_LLVM")
	"${dd[@]}" || rc=1
	for k in current percpu; do
		out=$("${dd[@]}" --distrust $k)
		[ $? = 1 ] && [ -n "$out" ] ||
			{ echo "danger-data.py --distrust $k found nothing: it cannot see an access"; rc=1; }
	done
fi
result "data side of the danger zone (scripts/danger-data.py)" $rc

# The syncs: every path through the sync round's IPI handler and through
# the deferred sync serializes before it reports the sync done. The
# check's own test: with SERIALIZE and IRET not counted, it must find
# both functions' paths.
rc=0
if grep -q '^CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE=y' "$JLRS_BUILD/.config"; then
	sc=(python3 "$JLRS_TOP/scripts/serialize-check.py" "$JLRS_BUILD/vmlinux"
		--nm "llvm-nm$JLRS_LLVM" --objdump "llvm-objdump$JLRS_LLVM")
	"${sc[@]}" || rc=1
	out=$("${sc[@]}" --not-serializing serialize --not-serializing iretq)
	[ $? = 1 ] && [ "$(grep -c 'returns without serializing' <<< "$out")" -ge 2 ] ||
		{ echo "serialize-check.py without SERIALIZE and IRET found nothing: it cannot see a path"; rc=1; }
else
	echo "CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE is off in $JLRS_BUILD: no sync to check"
	rc=1
fi
result "every sync serializes (scripts/serialize-check.py)" $rc

# The layout of every Rust static-key site of the sample and the KUnit
# suites in the linked kernel: NOPs on the hot path, no load of the key.
rc=0
python3 "$JLRS_TOP/scripts/layout-check.py" "$JLRS_BUILD/vmlinux" "$JLRS_BUILD/System.map" \
	"llvm-objdump$JLRS_LLVM" "llvm-readelf$JLRS_LLVM" || rc=1
result "layout of Rust static-key sites (scripts/layout-check.py)" $rc

# What safe Rust may not do with the static-key API, tried as a module
# would (scripts/compile-fail/): each module must fail to build with one
# E0133 (an unsafe function called outside an unsafe block) for each
# lock() it calls and no other error, and build once every such call is
# put in an unsafe block, so that it fails for that reason alone.
rc=0
cfdir=$JLRS_CACHE/$JLRS_BASE_VERSION/compile-fail
for f in "$JLRS_TOP"/scripts/compile-fail/*.rs; do
	name=$(basename "$f" .rs)
	calls=$(grep -c '::lock();' "$f")
	for variant in safe unsafe; do
		rm -rf "$cfdir" && mkdir -p "$cfdir" || { rc=1; break; }
		echo "obj-m := $name.o" > "$cfdir/Kbuild"
		if [ $variant = safe ]; then
			cp "$f" "$cfdir/$name.rs"
		else
			sed 's/= \(.*::lock()\);/= unsafe { \1 };/' "$f" > "$cfdir/$name.rs"
		fi
		"${mk[@]}" M="$cfdir" modules > "$logs/compile-fail-$name-$variant.log" 2>&1
		built=$?
		errors=$(grep -c '^error\[' "$logs/compile-fail-$name-$variant.log")
		e0133=$(grep -c '^error\[E0133\]: call to unsafe function `[A-Za-z]*::lock`' \
			"$logs/compile-fail-$name-$variant.log")
		if [ $variant = safe ] && { [ $built = 0 ] || [ "$errors" != "$calls" ] ||
			[ "$e0133" != "$calls" ]; }; then
			echo "compile-fail/$name.rs: $calls locks taken from safe code, $e0133 refused ($errors errors, build rc $built)"
			grep -A6 '^error' "$logs/compile-fail-$name-$variant.log" | head -n 40
			rc=1
		elif [ $variant = unsafe ] && [ $built != 0 ]; then
			echo "compile-fail/$name.rs: does not build with its calls in unsafe blocks either: it fails for another reason"
			grep -A6 '^error' "$logs/compile-fail-$name-$variant.log" | head -n 40
			rc=1
		fi
	done
done
rm -rf "$cfdir"
result "safe Rust cannot take the static-key mutexes (scripts/compile-fail/)" $rc

# kernel-doc: no warning (-Wall) in the project's C files and headers,
# and a kernel-doc comment on every function the kernel's C files define
# for others (not static), as upstream asks of exported interfaces, the
# KUnit suites' C helpers (tests/ directories) included. Not the Rust
# helpers (rust/helpers/): each wraps one kernel function for Rust, as
# upstream's do, undocumented like them.
rc=0
for f in "${files[@]}"; do
	case "$f" in
	*.c|*.h) ;;
	*) continue ;;
	esac
	[ -e "$JLRS_PRISTINE/$f" ] && continue
	out=$(cd "$JLRS_SRC" && ./scripts/kernel-doc -none -Wall "$f" 2>&1)
	[ -z "$out" ] || { echo "$out"; rc=1; }
	case "$f" in
	rust/helpers/*|*.h) continue ;;
	esac
	documented=$(cd "$JLRS_SRC" && ./scripts/kernel-doc -rst "$f" 2>/dev/null |
		sed -nE 's/^\.\. c:function:: ([^(]*[ *])?([A-Za-z_0-9]+) \(.*/\2/p')
	for fn in $(grep -E '^[a-z_][a-z_0-9 *]*[ *]([a-z_0-9]+)\(' "$JLRS_SRC/$f" |
		grep -vE '^(static|early_param|late_initcall|early_initcall|[a-z_]+_initcall|DEFINE_|EXPORT_)' |
		sed -E 's/^[^(]*[ *]([a-z_0-9]+)\(.*/\1/' | sort -u); do
		grep -qx "$fn" <<< "$documented" ||
			{ echo "$f: $fn(): not static, and no kernel-doc comment"; rc=1; }
	done
done
result "kernel-doc" $rc

# Context tracking's work word is generic: its header, its C and its
# Kconfig (the series' hunk of kernel/time/Kconfig) name no
# architecture's option, and no option of the text-poke batch that uses
# it; an architecture says what it needs in <asm/context_tracking_work.h>.
rc=0
generic=(include/linux/context_tracking_work.h kernel/context_tracking_work/word.c
	kernel/context_tracking_work/Makefile)
named=$( (cd "$JLRS_SRC" && grep -Hno 'CONFIG_[A-Z0-9_]*' "${generic[@]}";
	hook_lines kernel/time/Kconfig |
		grep -o '^[^:]*:[0-9]*:+.*\(depends on\|select\|if\) .*') |
	grep -E 'TEXT_POKE|CONTEXT_TRACKING_WORK_(SYNC_CORE|TLB_FLUSH)|X86|JUMP_LABEL_RS')
if [ -n "$named" ]; then
	echo "$named"
	echo "generic context-tracking code names an architecture's or the batch's option"
	rc=1
fi
result "generic work word names no architecture's option" $rc

# One seam between generic static keys and the x86 batch: the hook
# patches add no <asm/> include to generic kernel/jump_label.c and
# <linux/jump_label.h>, nor any name of the batch, the
# kernel crate's jump_label module names no binding of it, and no C file,
# header or symbol says its language (an "_rs" name): only the option that
# picks the Rust batch over upstream's does, and the test module written in
# Rust (text_poke_mod_rs.ko).
rc=0
named=$( (hook_lines kernel/jump_label.c include/linux/jump_label.h |
		grep -E '#include <asm/|text_poke_batch|TEXT_POKE_BATCH|_rs_';
	cd "$JLRS_TOP" && grep -rHnE 'bindings::(text_poke|jump_label_rs|ct_work)' rust/kernel/jump_label/;
	git -C "$JLRS_TOP" grep -nE '[A-Za-z0-9]_(rs|RS)(_[A-Za-z0-9_]*)?\b' -- '*.c' '*.h' '*.S';
	hook_lines | grep -E ':\+.*[A-Za-z0-9]_(rs|RS)(_[A-Za-z0-9_]*)?\b';
	git -C "$JLRS_TOP" grep -hA2 'no_mangle' -- '*.rs' | grep -E 'fn [a-z0-9_]*_rs(_|\b)') |
	grep -v 'text_poke_mod_rs')
if [ -n "$named" ]; then
	echo "$named"
	echo "generic static keys name the batch, or a C name says its language"
	rc=1
fi
result "one seam between static keys and the batch" $rc

# The INT3 protocol is written once, in the Rust batch's apply: its three
# phases, and the way back of a failed batch, write through one loop, a
# run's sites at a time (TextOps::write_sites) or a write at a time
# (TextOps::write), and the C shim under the runs writes the piece of each
# site it is told, knowing no phase and no INT3.
rc=0
calls=$(grep -cE 'ops\.write(_sites|_run)?\(' "$JLRS_TOP/arch/x86/kernel/text_poke_batch/apply.rs")
named=$(cd "$JLRS_TOP" && grep -HnE 'INT3_INSN_OPCODE|text_poke_batch_phase|TEXT_POKE_BATCH_(INT3|TAIL|FIRST)' \
	arch/x86/kernel/text_poke_batch.c arch/x86/include/asm/text_poke_batch.h)
if [ "$calls" != 2 ] || [ -n "$named" ]; then
	[ -z "$named" ] || echo "$named"
	echo "the INT3 protocol is written in more than one place: $calls writes of text in apply.rs (2 expected), or the C shim names a phase"
	rc=1
fi
result "one writer of the INT3 protocol" $rc

# The documentation: make htmldocs for the directories of the project's
# .rst files (which pull in its kernel-doc) and make rustdoc, with no
# warning naming a file of the project's own (not an upstream file a hook
# patch touches, such as an index). Sphinx names an .rst file without its
# suffix.
rc=0
own=()
for f in "${files[@]}"; do
	[ -e "$JLRS_PRISTINE/$f" ] || own+=("$f" "${f%.rst}")
done
own_re=$(printf '%s\n' "${own[@]}" | sort -u | sed 's/[.[\*^$]/\\&/g' | paste -sd'|')
dirs=$(printf '%s\n' "${files[@]}" | sed -n 's|^Documentation/\(.*\)/[^/]*\.rst$|\1|p' | sort -u | paste -sd' ')
if ! command -v sphinx-build > /dev/null; then
	echo "sphinx-build not found: install python3-sphinx (scripts/setup-host.sh --packages)"
	rc=1
elif ! make -C "$JLRS_SRC" O="$JLRS_CACHE/$JLRS_BASE_VERSION/docs" htmldocs \
	SPHINXDIRS="$dirs" > "$logs/htmldocs.log" 2>&1; then
	tail -n 20 "$logs/htmldocs.log"
	echo "make htmldocs SPHINXDIRS=\"$dirs\" failed (log: $logs/htmldocs.log)"
	rc=1
else
	warn=$(grep -E '(WARNING|ERROR|CRITICAL)' "$logs/htmldocs.log" | grep -E "($own_re)")
	[ -z "$warn" ] || { echo "$warn"; rc=1; }
fi
if ! "${mk[@]}" rustdoc > "$logs/rustdoc.log" 2>&1; then
	tail -n 20 "$logs/rustdoc.log"
	echo "make rustdoc failed (log: $logs/rustdoc.log)"
	rc=1
else
	warn=$(grep -E -A4 '^(warning|error)' "$logs/rustdoc.log" | grep -E "($ours_re)")
	[ -z "$warn" ] || { grep -E -A8 '^(warning|error)' "$logs/rustdoc.log" | head -n 100; rc=1; }
fi
result "documentation (make htmldocs, make rustdoc)" $rc

cd "$logs" || exit 1
rc=0
for f in "${files[@]}"; do
	case "$f" in
	*.c|*.h|*.S)
		# Patched upstream files are checked as patches below. In the
		# tree, by their path in it, as make series checks the patches
		# that add them: the checks of includes need both.
		[ -e "$JLRS_PRISTINE/$f" ] && continue
		out=$(cd "$JLRS_SRC" && ./scripts/checkpatch.pl --strict --terse \
			--show-types -f "$f" 2>&1) || { echo "$out"; rc=1; } ;;
	esac
done
result "checkpatch --strict (C files)" $rc
rc=0
for p in "$JLRS_TOP"/patches/*/[0-9]*.patch; do
	case "$p" in */0000-cover-letter.patch) continue ;; esac
	out=$("$JLRS_SRC/scripts/checkpatch.pl" --strict --terse --show-types \
		--root="$JLRS_SRC" "$p" 2>&1) || { echo "$out"; rc=1; }
done
result "checkpatch --strict (patches)" $rc

# The overlay is what the series makes: no overlay file differs from the
# last patch's, and the series adds none the overlay lacks
# (scripts/apply-overlay.sh lists them; scripts/series.sh absorb mends).
rc=0
if [ -s "$JLRS_SRC/.jlrs-unsynced" ]; then
	sed 's/$/: differs from what patches\/ make of it (scripts\/series.sh absorb DIR)/' \
		"$JLRS_SRC/.jlrs-unsynced"
	rc=1
fi
result "the overlay is the series' tree" $rc
exit $failed

#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# scripts/production-check.sh BUILD: whether the kernel built in BUILD
# (make test-matrix's production configuration, scripts/kunitconfig/
# production) is one a production kernel would be: the Rust batch, its INT3
# handler and deferral in it, and nothing that only tests and measurement
# need (CONFIG_TEXT_POKE_BATCH_STATS and _MEASURE): no text_poke_batch= switch
# of implementations, no counters on the INT3 or entry path or elsewhere, no
# benchmark hooks.
# Reads the image's symbol table. Prints one "check: NAME: ok|FAILED" line
# per check, the symbols that should not be there (or are missing) named;
# exits non-zero if any failed.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
step production-check

build=${1:?usage: scripts/production-check.sh BUILD}
failed=0
result() {
	if [ "$2" = 0 ]; then
		echo "check: $1: ok"
	else
		echo "check: $1: FAILED ($3)"
		failed=1
	fi
}

config=$build/.config
if [ ! -f "$config" ] || [ ! -f "$build/vmlinux" ]; then
	result "production image" 1 "no kernel built in $build"
	exit 1
fi
bad=()
grep -qx 'CONFIG_TEXT_POKE_BATCH_RUST=y' "$config" || bad+=("CONFIG_TEXT_POKE_BATCH_RUST is not y")
grep -qx 'CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE=y' "$config" || bad+=("CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE is not y")
for opt in STATS MEASURE BENCH KUNIT_TEST DEFER_DEBUG; do
	if grep -q "^CONFIG_TEXT_POKE_BATCH_$opt=" "$config"; then
		bad+=("CONFIG_TEXT_POKE_BATCH_$opt is set")
	fi
done
result "production configuration" "${#bad[@]}" "${bad[*]:-}"

syms=$(llvm-nm$JLRS_LLVM --defined-only "$build/vmlinux" 2>&1 | awk '{ print $NF }') || {
	result "production image" 1 "llvm-nm$JLRS_LLVM cannot read $build/vmlinux"
	exit 1
}
has() { grep -qx -- "$1" <<< "$syms"; }

# What ships: the batch, its INT3 handler, the entry's work and the update.
missing=()
for s in text_poke_batch_publish text_poke_batch_retire text_poke_batch_emulate \
	text_poke_batch_run_sites smp_text_poke_int3_handler arch_jump_label_update \
	ct_work_words __ct_work_take __ct_work_nmi_enter \
	ct_work_ask ct_work_tlb_flush_at_entry; do
	has "$s" || missing+=("$s")
done
result "production image: the Rust batch and deferral" "${#missing[@]}" \
	"missing: ${missing[*]:-}"

# What only measurement needs: the implementations' switch, the counters
# (the INT3 handler's and kernel entry's among them), the tracked task, the
# statistics file, the batch event, the entry hook's benchmark, and
# upstream's batch (its vector, text_poke_array), which the Rust batch
# replaces; and test code.
found=()
for s in text_poke_batch_mode text_poke_batch_mode_names text_poke_batch_set_mode \
	text_poke_batch_int3_hits text_poke_batch_tracked \
	text_poke_batch_note_sync text_poke_batch_note_batch text_poke_batch_note_batch_done \
	text_poke_batch_note_mm_switch text_poke_batch_counts text_poke_batch_track \
	text_poke_batch_read_stats text_poke_batch_ipis_received text_poke_batch_stats_fops \
	ct_work_run ct_work_stats_show ct_work_stats_fops ct_work_bench_entry \
	text_poke_batch_deferred text_poke_batch_sent ct_work_tlb_counts \
	text_poke_batch_note_deferral arch_ct_work_stats_show \
	__tracepoint_text_poke_batch_applied text_poke_array; do
	has "$s" && found+=("$s")
done
# The qpw object cache, which only its KUnit suite uses (Rust symbols of
# the crate qpw_cache_kunit, and its C executors).
grep -q '15qpw_cache_kunit' <<< "$syms" && found+=("qpw_cache_kunit")
has qpw_cache_exec_start && found+=("qpw_cache_exec_start")
result "production image: nothing only measurement needs" "${#found[@]}" \
	"found: ${found[*]:-}"
exit "$failed"

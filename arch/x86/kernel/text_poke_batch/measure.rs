// SPDX-License-Identifier: GPL-2.0

//! The hooks measurement needs around a batch: the counts of what it does
//! (`CONFIG_TEXT_POKE_BATCH_STATS`, in `arch/x86/kernel/text_poke_batch_stats.c`) and the
//! implementation in use (`CONFIG_TEXT_POKE_BATCH_MEASURE`, in
//! `arch/x86/kernel/text_poke_batch_measure.c`). Without them the batch is the only
//! implementation, and the hooks compile away.

#[cfg(CONFIG_TEXT_POKE_BATCH_STATS)]
use kernel::bindings;

/// The implementation in use: `text_poke_batch_mode`.
///
/// It only changes with `text_mutex` and `jump_label_mutex` held and nothing queued, so it
/// stays put for as long as a caller holds either.
#[cfg(CONFIG_TEXT_POKE_BATCH_MEASURE)]
pub(crate) fn mode() -> u32 {
    use kernel::sync::atomic::{Atomic, Relaxed};

    // SAFETY: `text_poke_batch_mode` is an `int` that lives as long as the kernel, aligned, and
    // written with `WRITE_ONCE()`.
    let mode = unsafe { Atomic::from_ptr(&raw mut bindings::text_poke_batch_mode) }.load(Relaxed);
    mode as u32
}

/// The implementation in use, as the counters tell them apart: the batch, the only one in a
/// kernel built without `CONFIG_TEXT_POKE_BATCH_MEASURE`.
#[cfg(all(CONFIG_TEXT_POKE_BATCH_STATS, not(CONFIG_TEXT_POKE_BATCH_MEASURE)))]
pub(crate) fn mode() -> u32 {
    bindings::text_poke_batch_mode_TEXT_POKE_BATCH_MODE_RUST
}

/// Whether the batch is the implementation in use (not `text_poke_batch=c`); always in a kernel
/// built without `CONFIG_TEXT_POKE_BATCH_MEASURE`.
#[inline(always)]
pub(crate) fn active() -> bool {
    #[cfg(CONFIG_TEXT_POKE_BATCH_MEASURE)]
    return mode() != bindings::text_poke_batch_mode_TEXT_POKE_BATCH_MODE_C;
    #[cfg(not(CONFIG_TEXT_POKE_BATCH_MEASURE))]
    true
}

/// Whether every site is a batch of its own (`text_poke_batch=serial`); never in a kernel built
/// without `CONFIG_TEXT_POKE_BATCH_MEASURE`.
#[inline(always)]
pub(crate) fn serial() -> bool {
    #[cfg(CONFIG_TEXT_POKE_BATCH_MEASURE)]
    return mode() == bindings::text_poke_batch_mode_TEXT_POKE_BATCH_MODE_SERIAL;
    #[cfg(not(CONFIG_TEXT_POKE_BATCH_MEASURE))]
    false
}

/// Counts a batch of `sites` sites that starts: its INT3s are about to be written.
#[inline(always)]
pub(crate) fn batch_starts(sites: usize) {
    #[cfg(CONFIG_TEXT_POKE_BATCH_STATS)]
    // SAFETY: Only counts, under `text_mutex`, which every caller of the batch holds.
    unsafe {
        bindings::text_poke_batch_note_batch(sites as u32)
    };
    #[cfg(not(CONFIG_TEXT_POKE_BATCH_STATS))]
    let _ = sites;
}

/// Ends the batch counted by [`batch_starts()`]: its last sync is done.
#[inline(always)]
pub(crate) fn batch_done() {
    #[cfg(CONFIG_TEXT_POKE_BATCH_STATS)]
    // SAFETY: Only counts and traces, under the `text_mutex` held since `batch_starts()`.
    unsafe {
        bindings::text_poke_batch_note_batch_done()
    };
}

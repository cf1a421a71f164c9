// SPDX-License-Identifier: GPL-2.0

//! Deferral of text-poke syncs to idle CPUs and isolated CPUs in user space: the batch's sync
//! round, which asks them to take its `sync_core()` at their next kernel entry or idle exit
//! instead of an IPI.
//!
//! The work word and its senders are context tracking's (`kernel/context_tracking_work/`:
//! `ct_work_ask()` asks every other online CPU); this module decides which batches may be
//! deferred, and makes the round. A batch that writes text a CPU can run between its entry
//! instruction and the hook that takes the work (the danger zone of
//! `kernel/context_tracking_work/word.c`) is never deferred.
//!
//! C header:
//! [`include/linux/context_tracking_work.h`](srctree/include/linux/context_tracking_work.h).

use crate::poke::PokeLoc;
use core::ptr;
use kernel::{
    bindings,
    sync::atomic::{
        Atomic,
        Relaxed, //
    },
};

/// Whether deferral is switched on.
pub fn enabled() -> bool {
    // SAFETY: `ct_work_enabled` is a `bool` that lives as long as the kernel, written with
    // `WRITE_ONCE()`.
    unsafe { Atomic::from_ptr(&raw mut bindings::ct_work_enabled) }.load(Relaxed)
}

/// Whether a batch of `sites` (with `base`), sorted by address, may be deferred: deferral is on,
/// and no site is in text a CPU may run before it takes its work at entry or idle exit, in the
/// kernel image or in a module. A binary search for each range of the image's: a batch of 1024
/// sites pays about 30 probes, not 3,072 comparisons. Sites past the image (the module area,
/// above it on x86-64) are each looked up in their module, if the last site says there are any.
pub fn may_defer(sites: &[PokeLoc], base: usize) -> bool {
    if !enabled() {
        return false;
    }
    // SAFETY: As in `entry_text()`.
    let ranges = unsafe { (&raw const bindings::ct_work_danger_text).read() };
    if ranges.iter().any(|r| {
        let first = sites.partition_point(|s| s.addr(base) < r[0]);
        sites.get(first).is_some_and(|s| s.addr(base) < r[1])
    }) {
        return false;
    }
    let image_end = (&raw const bindings::_end).addr();
    if sites.last().is_none_or(|s| s.addr(base) < image_end) {
        return true;
    }
    let first = sites.partition_point(|s| s.addr(base) < image_end);
    sites[first..].iter().all(|s| {
        // SAFETY: Looks `addr` up among the modules under RCU; any address is accepted.
        !unsafe { bindings::ct_work_module_danger_text(s.addr(base)) }
    })
}

/// Whether a CPU may run the text at `addr` before it takes its work at entry or idle exit: the
/// entry code, the static call trampolines it calls, and the idle code
/// (`ct_work_danger_text`).
pub fn entry_text(addr: usize) -> bool {
    // SAFETY: `ct_work_danger_text` is set when the kernel is linked (and relocated before it
    // runs) and is `const`: nothing writes it, so reading it races with nothing.
    let ranges = unsafe { (&raw const bindings::ct_work_danger_text).read() };
    ranges.iter().any(|r| (r[0]..r[1]).contains(&addr))
}

/// A sync round of the Rust batch: `sync_core()` on every online CPU, through an IPI for every
/// other CPU but the idle ones and the isolated ones in user space, which take it at their next
/// kernel entry or idle exit, when `may_defer` and deferral is on.
///
/// # Safety
///
/// The caller holds `text_mutex`, as every batch does: the round's mask is one static mask.
pub unsafe fn sync(may_defer: bool) {
    let mut round = bindings::text_poke_batch_round {
        deferred_cpus: ptr::null_mut(),
        asked: bindings::ct_work_asked {
            deferred: 0,
            idle: 0,
            waited: 0,
            expired: 0,
            sent: 0,
        },
    };
    if may_defer && enabled() {
        // SAFETY: The round's mask is only used under `text_mutex`, which the caller holds,
        // until the round returns.
        let mask = unsafe { bindings::text_poke_batch_round_mask() };
        round.deferred_cpus = mask;
        // SAFETY: `mask` is the static `struct cpumask` of `text_poke_batch_round_mask()`, valid
        // for reads and writes as long as the kernel runs, and `round.asked` lives until the call
        // returns. Every round uses the mask only under `text_mutex`, which the caller holds
        // until this function returns, and `text_poke_batch_sync_round()` reads it through
        // `round.deferred_cpus` only after this call has returned.
        unsafe {
            bindings::ct_work_ask(
                bindings::ct_work_kind_CT_WORK_SYNC_CORE,
                mask,
                &mut round.asked,
            )
        };
    }
    // SAFETY: `round` and its mask live until the call returns; the round may sleep, as every
    // batch may.
    unsafe { bindings::text_poke_batch_sync_round(&mut round) };
}

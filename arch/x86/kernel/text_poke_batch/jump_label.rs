// SPDX-License-Identifier: GPL-2.0

//! The generic jump-label update, `__jump_label_update()`, for the Rust batch.
//!
//! A key flip is one flow, from `static_key_enable()` (or `StaticKey::enable()`, or a
//! transaction's commit) to the bytes:
//!
//! 1. `kernel/jump_label.c` sets the key's count and, holding `jump_label_mutex` and
//!    `text_mutex`, walks every run of the key's entries, in the kernel image and in every
//!    module that uses it, calling [`jump_label_rs_update`] on each with the pass
//!    `JUMP_LABEL_QUEUE`: each site is checked and queued, none written. The first run that is
//!    refused stops the walk.
//! 2. [`jump_label_rs_finish`] gets the walk's result: if every run was queued, the batch is
//!    applied once, in three sync rounds however many sites there are; otherwise everything
//!    queued is dropped and nothing is written anywhere. Either way the result goes back as
//!    the return value, and the C caller puts the count back on an error.
//!
//! Entries that cannot be patched are skipped: init text once it is freed, and code that is not
//! kernel text. Every other site must hold the instruction the key's previous value put there;
//! if one does not, the flip is refused with a warning (`-EINVAL`). Room for a run's sites is
//! made before they are checked, with an allocation that may sleep: a flip that cannot get it
//! is refused (`-ENOMEM`) before anything is written, and once the walk has queued every site,
//! applying them needs no memory. (C's `static_key_enable()` and the like cannot be told of a
//! refusal: `kernel/jump_label.c` then writes their sites as upstream does, in batches that
//! need no memory.) A batch whose text cannot be mapped writes nothing
//! (`-EFAULT`); one a write of which does not land puts every site back (`-EIO`).
//!
//! A module's init sites are written only while the module is COMING, as upstream decides
//! (`jump_label_can_update()`). Its init text is freed after the module goes live, and
//! `do_init_module()` calls the LIVE notifiers first: `jump_label_module_notify()` takes
//! `jump_label_mutex` for every state, LIVE included. An update holds that mutex from the walk
//! that finds the module COMING to the end of the batch, its sync rounds and deferral waits
//! included (a transaction's commit too): its writes to init text are done before the text can
//! be freed, and an update that takes the mutex later finds the module LIVE. (`text_mutex`,
//! which the update also holds, is not what orders it.)
//!
//! Where upstream's update runs (`text_poke_batch=c`, and while the kernel boots), the pass
//! `JUMP_LABEL_CHECK` checks a key's sites without queueing them, for the callers that can be
//! told of a refusal.
//!
//! `static_keys_update()` (`jump_label::Transaction`) flips several keys as one batch: it walks
//! every run of each key with `JUMP_LABEL_QUEUE`, then calls [`jump_label_rs_finish`] once, so
//! that the keys' counts and their text change together, inside one hold of `jump_label_mutex`
//! and `text_mutex`, and only the keys it was given wait for the batch.

use core::{
    ffi::c_int,
    ptr,
    sync::atomic::{
        AtomicBool,
        Ordering, //
    },
};

use kernel::{
    bindings,
    jump_label::{
        text_address,
        text_offset,
        x86,
        JumpEntry, //
    },
    prelude::*,
};

use crate::{
    batch::{
        self,
        TextMutex, //
    },
    poke::{
        KeySlots,
        PokeError,
        PokeLoc, //
    },
};

/// The sites named in the log when a flip is refused.
const REPORTED: usize = 4;

/// What the walk makes of a site.
enum SiteAction {
    /// Not patched: freed init text, or not kernel text.
    Skip,
    /// Holds the instruction the key's previous value put there: write this.
    Write(PokeLoc),
    /// Holds something else: the flip must be refused ([`report`] says what it holds).
    Wrong,
}

/// The bytes at `code`, read under `text_mutex` (`_text`).
///
/// The batch is not asked for a write queued there: no other key of a transaction has a site
/// at `code`, and if a corrupted jump table said otherwise, the batch would find the address
/// queued twice and refuse the commit.
#[inline(always)]
fn current_bytes(_text: &TextMutex, code: usize) -> [u8; x86::MAX_LEN] {
    let mut bytes = [0u8; x86::MAX_LEN];
    // SAFETY: `code` is kernel text (checked by the caller), mapped and only written under
    // `text_mutex`, which `_text` says is held. Upstream's own check reads the site's whole
    // decoded instruction, so the 5 bytes read here are mapped as well.
    unsafe { ptr::copy_nonoverlapping(code as *const u8, bytes.as_mut_ptr(), x86::MAX_LEN) };
    bytes
}

/// Decides what to do with the site of `e` for a key whose value is now `enabled`.
#[inline(always)]
fn site_action(text: &TextMutex, e: &JumpEntry, enabled: bool, init: bool) -> SiteAction {
    static NOT_TEXT: AtomicBool = AtomicBool::new(false);

    if !init && e.init {
        return SiteAction::Skip;
    }
    if !text_address(e.code) {
        // Built-in `__exit` code is not kernel text and never runs: skip it quietly, as C does.
        if !e.init && !NOT_TEXT.swap(true, Ordering::Relaxed) {
            pr_warn!(
                "jump_label: can't patch jump_label at _stext+{:#x}\n",
                text_offset(e.code)
            );
            kernel::warn_on!(true);
        }
        return SiteAction::Skip;
    }
    let have = current_bytes(text, e.code);
    let jumps = x86::site_jumps(enabled, e.branch);
    let Some(len) = x86::site_holds(e.code, e.target, &have, !jumps) else {
        return SiteAction::Wrong;
    };
    match batch::key_site(e.code, e.target, len, jumps) {
        Ok(loc) => SiteAction::Write(loc),
        Err(_) => SiteAction::Wrong,
    }
}

/// Why the walk refuses a site.
enum Refused {
    /// [`SiteAction::Wrong`].
    Holds,
    /// The batch did not take it.
    Queue(PokeError),
}

/// Logs the `nth` site refused in a walk of `key`, its site at `code`, and why; only the first
/// few are named. `jumps` says what the site is to become: it was checked for the other.
#[cold]
#[inline(never)]
fn report(
    text: &TextMutex,
    key: *mut bindings::static_key,
    code: usize,
    jumps: bool,
    why: Refused,
    nth: usize,
) {
    if nth >= REPORTED {
        return;
    }
    let (at, key) = (text_offset(code), text_offset(key.addr()));
    match why {
        Refused::Queue(why) => pr_err!(
            "jump_label: site _stext+{at:#x} of key _stext+{key:#x} cannot be queued: {why:?}\n"
        ),
        Refused::Holds => {
            // The bytes again, still as the walk found them under `text_mutex`: the common case
            // does not keep them.
            let have = current_bytes(text, code);
            let len = x86::site_size(&have).unwrap_or(x86::MAX_LEN);
            pr_err!(
                "jump_label: site _stext+{at:#x} of key _stext+{key:#x} holds {:02x?}, not the \
                 {} its key left there\n",
                &have[..len],
                if jumps { "NOP" } else { "JMP" }
            );
        }
    }
}

/// Calls `f` on each entry of `key` from `entry` up to `stop`.
///
/// # Safety
///
/// `entry..stop` is a valid run of jump-table entries that do not change while the walk runs.
unsafe fn for_each_entry(
    key: *mut bindings::static_key,
    mut entry: *const bindings::jump_entry,
    stop: *const bindings::jump_entry,
    mut f: impl FnMut(JumpEntry),
) {
    while entry < stop {
        // SAFETY: `entry` is in `entry..stop`, valid as the caller guarantees.
        let e = unsafe { JumpEntry::read(entry) };
        if e.key != key.addr() {
            break;
        }
        f(e);
        // SAFETY: `entry < stop`, so the next entry is at most `stop`.
        entry = unsafe { entry.add(1) };
    }
}

/// The number of entries of `key` from `entry` on, up to `stop`, as [`for_each_entry`] walks
/// them: the table is sorted by key (`jump_label_sort_entries()`, and for a module
/// `jump_label_add_module()`), so a galloping search finds where the key's run ends in about
/// 2 log2(n) reads instead of n. On a table that were not sorted the count could differ from
/// the walk's: too high, room is left unused; too low, the walk finds no room for a site and
/// the flip is refused.
///
/// # Safety
///
/// As for [`for_each_entry`].
unsafe fn run_len(
    key: *mut bindings::static_key,
    entry: *const bindings::jump_entry,
    stop: *const bindings::jump_entry,
) -> usize {
    // SAFETY: Both point into the same table (the caller guarantees the run).
    let total = usize::try_from(unsafe { stop.offset_from(entry) }).unwrap_or(0);
    // SAFETY: Only called with `i < total`: `entry + i` is in `entry..stop`.
    let is_key = |i: usize| unsafe { JumpEntry::read(entry.add(i)) }.key == key.addr();
    if total == 0 || !is_key(0) {
        return 0;
    }
    // The key's entries are `0..=lo`; `hi` is `total` or an entry of another key.
    let (mut lo, mut hi) = (0usize, 1usize);
    while hi < total && is_key(hi) {
        lo = hi;
        hi = hi.saturating_mul(2);
    }
    hi = hi.min(total);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if is_key(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// `__jump_label_update()` for the Rust batch: checks each site of `key` from `entry` to `stop`
/// against the key's current value and, with `JUMP_LABEL_QUEUE`, queues it; writes nothing.
///
/// Returns 0, or, with nothing queued by this call: `-EINVAL` if a site does not hold the
/// instruction the key's previous value put there (or the batch cannot take it: two keys of a
/// transaction naming one site), with a warning naming the first few; `-ENOMEM` if the batch
/// cannot make room for the run's sites. The caller ([`jump_label_rs_finish`]) drops what
/// earlier runs queued.
///
/// # Safety
///
/// Called by `__jump_label_update()` with `cpus_read_lock()`, `jump_label_mutex` and
/// `text_mutex` held, in a context that may sleep, on a valid run of jump-table entries
/// starting at `entry`; `pass` is `JUMP_LABEL_CHECK` or `JUMP_LABEL_QUEUE`.
#[no_mangle]
pub unsafe extern "C" fn jump_label_rs_update(
    key: *mut bindings::static_key,
    entry: *mut bindings::jump_entry,
    stop: *mut bindings::jump_entry,
    init: bool,
    pass: bindings::jump_label_pass,
) -> c_int {
    // SAFETY: The caller holds `text_mutex`; a Rust caller up the stack (a transaction's
    // commit) does not use its own token until we return.
    let text = &mut unsafe { TextMutex::assume_held() };
    let queue = pass == bindings::jump_label_pass_JUMP_LABEL_QUEUE;
    // SAFETY: `key` is a valid key, and its value cannot change under `jump_label_mutex`.
    // `static_key_count()` reads the -1 of a first enable in progress as enabled.
    let enabled = unsafe { bindings::static_key_count(key) } > 0;

    let mark = batch::queued(text);
    let mut wrong = 0usize;
    // Checks every site and, with `JUMP_LABEL_QUEUE`, queues it in `slots`.
    let walk = |text: &TextMutex, slots: &mut KeySlots<'_>| {
        // SAFETY: The caller guarantees that `entry..stop` is a valid run of jump-table
        // entries, and it holds `jump_label_mutex`, the only lock under which entries are
        // sorted, added or removed (module load and unload), for the whole walk. The closure
        // reads and queues sites; it does not touch the table.
        unsafe {
            for_each_entry(key, entry, stop, |e| {
                let why = match site_action(text, &e, enabled, init) {
                    SiteAction::Write(loc) => match queue.then(|| slots.push(loc)) {
                        Some(Err(why)) => Refused::Queue(why),
                        _ => return,
                    },
                    SiteAction::Wrong => Refused::Holds,
                    SiteAction::Skip => return,
                };
                let jumps = x86::site_jumps(enabled, e.branch);
                report(text, key, e.code, jumps, why, wrong);
                wrong += 1;
            })
        }
    };
    // Room for every site first, so that each is queued as it is checked, under one borrow of
    // the batch: the walk reads each site once. `JUMP_LABEL_CHECK` makes no room (and queues
    // nothing): one walk for both passes.
    let sites = if queue {
        // SAFETY: The caller guarantees the entries, which only change under
        // `jump_label_mutex`.
        unsafe { run_len(key, entry, stop) }
    } else {
        0
    };
    if batch::queue_keys(text, sites, walk).is_err() {
        pr_err!(
            "jump_label: no memory to queue the {sites} sites of key _stext+{:#x} in one \
             batch: nothing written\n",
            text_offset(key.addr())
        );
        return ENOMEM.to_errno();
    }
    if wrong == 0 {
        return 0;
    }
    batch::truncate(text, mark);
    pr_err!(
        "jump_label: {wrong} site(s) of key _stext+{:#x} cannot be flipped: flip refused, \
         nothing written\n",
        text_offset(key.addr())
    );
    // SAFETY: Only counts the refusal, and traces it.
    unsafe { bindings::text_poke_batch_note_refused(key.cast_const().cast(), wrong as u32) };
    kernel::warn_on!(true);
    EINVAL.to_errno()
}

/// Ends a key update that [`jump_label_rs_update`] queued, given the walk's result `queued`: if
/// it is 0, applies the batch and returns 0, or `-EFAULT` if a page of the keys' text cannot be
/// mapped (or `-EINVAL` if a transaction's keys queued one site twice), nothing written, or
/// `-EIO` if a write did not land, every site put back; if it is an error, drops every site
/// queued and returns it.
///
/// # Safety
///
/// Called with `text_mutex` held, by the task that queued the sites since it took it.
#[no_mangle]
pub unsafe extern "C" fn jump_label_rs_finish(queued: c_int) -> c_int {
    // SAFETY: The caller, C code, holds `text_mutex` and keeps no token.
    let text = &mut unsafe { TextMutex::assume_held() };
    finish_keys(text, queued)
}

/// [`jump_label_rs_finish`] with `text_mutex` held as `text` proves.
fn finish_keys(text: &mut TextMutex, queued: c_int) -> c_int {
    if queued != 0 {
        batch::truncate(text, 0);
        return queued;
    }
    match batch::finish(text, true) {
        Ok(()) => 0,
        Err(PokeError::Unmapped) => EFAULT.to_errno(),
        Err(PokeError::WriteFailed) => EIO.to_errno(),
        Err(_) => EINVAL.to_errno(),
    }
}

// SPDX-License-Identifier: GPL-2.0

//! x86's `arch_jump_label_update()`: the update of static keys' sites as one batch.
//!
//! A key flip is one flow, from `static_key_enable()` (or `StaticKey::enable()`, or a
//! transaction's commit) to the bytes:
//!
//! 1. `kernel/jump_label.c` sets the key's count and, holding `cpus_read_lock()` and
//!    `jump_label_mutex`, calls [`arch_jump_label_update`] once with the update's runs: every
//!    run of each key's entries, in the kernel image and in every module that uses it.
//! 2. [`arch_jump_label_update`] takes `text_mutex` and walks the runs with
//!    `jump_label_next_run()`: each site is checked and queued, none written. The first run
//!    that is refused stops the walk.
//! 3. If every run was queued, the batch is applied once, in three sync rounds however many
//!    sites there are; otherwise everything queued is dropped and nothing is written anywhere.
//!    Either way the result goes back as the return value, and the C caller puts the count
//!    back on an error.
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
//! Where upstream's update runs (`text_poke_batch=c`, and while the kernel boots), the sites
//! are checked without being queued, for the callers that can be told of a refusal, and the
//! generic walk writes them.
//!
//! `static_keys_update()` (`jump_label::Transaction`) flips several keys as one update: its
//! runs are every run of each key, queued into one batch, so that the keys' counts and their
//! text change together, inside one hold of `jump_label_mutex` and `text_mutex`, and only the
//! keys it was given wait for the batch.

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
        JumpEntry,
        TextLock, //
    },
    prelude::*,
    sync::atomic::{
        Atomic,
        Relaxed, //
    },
};

use crate::{
    batch::{
        self,
        TextMutex, //
    },
    measure,
    poke::{
        KeySlots,
        PokeError,
        PokeLoc, //
    },
};

/// `-EOPNOTSUPP`: what [`arch_jump_label_update`] returns to leave an update to the generic walk.
const GENERIC_WALK: c_int = -(bindings::EOPNOTSUPP as c_int);

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

/// Checks each site of `key` from `entry` to `stop` against the key's current value and, if
/// `queue`, queues it; writes nothing.
///
/// Returns 0, or, with nothing queued by this call: `-EINVAL` if a site does not hold the
/// instruction the key's previous value put there (or the batch cannot take it: two keys of a
/// transaction naming one site), with a warning naming the first few; `-ENOMEM` if the batch
/// cannot make room for the run's sites. The caller drops what earlier runs queued.
///
/// # Safety
///
/// Called with `cpus_read_lock()`, `jump_label_mutex` and `text_mutex` (`text`) held, in a
/// context that may sleep, on a valid run of jump-table entries starting at `entry`.
unsafe fn update_run(
    text: &mut TextMutex,
    key: *mut bindings::static_key,
    entry: *mut bindings::jump_entry,
    stop: *mut bindings::jump_entry,
    init: bool,
    queue: bool,
) -> c_int {
    // SAFETY: `key` is a valid key, and its count cannot change under `jump_label_mutex`, only
    // be read (`static_key_count()` without the call): -1 (a first enable in progress, which
    // is enabled), 0 or more.
    let count = unsafe { Atomic::from_ptr(&raw mut (*key).enabled.counter) }.load(Relaxed);
    let enabled = count != 0;

    let mark = batch::queued(text);
    let mut wrong = 0usize;
    // Checks every site and, if `queue`, queues it in `slots`.
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
    // the batch: the walk reads each site once. A check alone makes no room (and queues
    // nothing): one walk for both.
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

/// Whether key updates go through the batch: not with `text_poke_batch=c`, nor while the kernel
/// boots (upstream's update runs then). Read under `jump_label_mutex`, which the mode changes
/// under; the kernel leaves `SYSTEM_BOOTING` before any other CPU runs.
#[inline(always)]
fn flips_keys() -> bool {
    // SAFETY: `system_state` lives as long as the kernel, and is only read.
    let state = unsafe { (&raw const bindings::system_state).read_volatile() };
    measure::active() && state != bindings::system_states_SYSTEM_BOOTING
}

/// Checks every site of every run of `runs` and, if `queue`, queues it: 0, or the first
/// refusal of [`update_run`], which stops the walk.
///
/// # Safety
///
/// As for [`update_run`]; `runs` is a valid update of `jump_label_next_run()`.
unsafe fn update_runs(
    text: &mut TextMutex,
    runs: *mut bindings::jump_label_runs,
    queue: bool,
) -> c_int {
    // SAFETY: The caller guarantees `runs`, and holds `jump_label_mutex`.
    while unsafe { bindings::jump_label_next_run(runs) } {
        // SAFETY: `jump_label_next_run()` set the run's fields; nothing else writes them.
        let r = unsafe { &*runs };
        // SAFETY: The caller holds the locks; the run is one of the jump table's.
        let ret = unsafe { update_run(text, r.key, r.entry, r.stop, r.init, queue) };
        if ret != 0 {
            return ret;
        }
    }
    0
}

/// `arch_jump_label_update()`: the update of every site of `runs` as one batch.
///
/// Every site is checked and queued before any is written; the batch is then applied once, in
/// three sync rounds however many sites there are, or, if any site was refused, everything
/// queued is dropped and nothing is written anywhere.
///
/// Where upstream's update runs (`text_poke_batch=c`, and while the kernel boots), returns
/// `-EOPNOTSUPP` for the generic walk, having checked the sites first for a caller that can be
/// told of a refusal (`check`). A caller that cannot be told (C's `static_key_enable()` and the
/// like) does not lose its update to a batch that had no memory for the sites, or one a write
/// of which did not land (every site put back): the sites are checked again and left to the
/// generic walk, which writes them as upstream does, in batches the text-poke batch holds
/// without allocating.
///
/// Returns 0, `-EOPNOTSUPP`, or the refusal's error (see [`update_run`] and [`finish_keys`]).
///
/// # Safety
///
/// Called by `kernel/jump_label.c` with `cpus_read_lock()` and `jump_label_mutex` held, not
/// `text_mutex`, in a context that may sleep, with a valid update `runs`.
#[no_mangle]
pub unsafe extern "C" fn arch_jump_label_update(
    runs: *mut bindings::jump_label_runs,
    check: bool,
) -> c_int {
    let batches = flips_keys();
    if !batches && !check {
        return GENERIC_WALK;
    }
    // SAFETY: The caller holds `cpus_read_lock()` and `jump_label_mutex`, taken before
    // `text_mutex` by every flip, and not `text_mutex`; the guard is dropped before we return.
    let _lock = unsafe { TextLock::lock() };
    // SAFETY: `_lock` holds `text_mutex` for as long as the token lives; no other token.
    let text = &mut unsafe { TextMutex::assume_held() };
    if batches {
        // SAFETY: The locks are held, and the caller guarantees `runs`.
        let queued = unsafe { update_runs(text, runs, true) };
        let ret = finish_keys(text, queued);
        if check || (ret != ENOMEM.to_errno() && ret != EIO.to_errno()) {
            return ret;
        }
        // The walk again, from the first run, to check the sites for the generic walk.
        // SAFETY: The caller guarantees `runs`, and holds `jump_label_mutex`.
        unsafe { bindings::jump_label_rewind_runs(runs) };
    }
    // SAFETY: As above.
    match unsafe { update_runs(text, runs, false) } {
        0 => GENERIC_WALK,
        ret => ret,
    }
}

/// `smp_text_poke_batch_finish()` for a caller that can be told of a refusal: applies what is
/// queued and returns 0, or the error of [`finish_keys`], the text as it was.
///
/// # Safety
///
/// Called with `text_mutex` held.
#[no_mangle]
pub unsafe extern "C" fn text_poke_batch_finish_checked() -> c_int {
    // SAFETY: The caller, C code, holds `text_mutex` and keeps no token.
    finish_keys(&mut unsafe { TextMutex::assume_held() }, 0)
}

/// Ends a key update that [`update_run`] queued, given the walk's result `queued`: if it is 0,
/// applies the batch and returns 0, or `-EFAULT` if a page of the keys' text cannot be mapped
/// (or `-EINVAL` if a transaction's keys queued one site twice), nothing written, or `-EIO` if
/// a write did not land, every site put back; if it is an error, drops every site queued and
/// returns it.
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

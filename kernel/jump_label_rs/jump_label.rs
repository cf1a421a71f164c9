// SPDX-License-Identifier: GPL-2.0

//! The generic jump-label update, `__jump_label_update()`, for the Rust batch.
//!
//! A key's entries are walked in code-address order (the order of the jump table). Entries that
//! cannot be patched are skipped: init text once it is freed, and code that is not kernel text.
//! Every other site must hold the instruction the key's previous value put there; if one does
//! not, the update is refused with a warning and no byte of it is written. (The kernel updates
//! a key's sites in the kernel image and in each module that uses it separately: a refusal
//! covers one of those runs of entries.) Otherwise every site is queued and the batch is
//! applied once, in three sync rounds however many sites there are.
//!
//! The walk reads each site once: the batch first makes room for all of the key's sites, then
//! each is checked and queued, and if one is refused the sites queued so far are taken back.
//! Where the batch cannot make that room (an allocation failed), or in `serial` mode, every
//! site is checked first and queued in a second walk, the batch applied whenever it cannot
//! grow, so there is no overflow to die on.
//!
//! A refused flip also leaves the key's count as it was: the hooks in `kernel/jump_label.c`
//! put it back when [`jump_label_rs_update`] counted a refusal.
//!
//! [`jump_label_rs_commit`] flips several keys as one batch (`jump_label::Transaction`): the
//! keys' counts and their text change together, inside one hold of `jump_label_mutex` and
//! `text_mutex`, and only the keys it was given wait for the batch.

use core::{
    ffi::c_int,
    ptr,
    sync::atomic::{
        AtomicBool,
        AtomicU8,
        Ordering, //
    },
};

use kernel::{
    bindings,
    jump_label::{
        x86::{
            self,
            SiteInsn, //
        },
        JumpEntry, //
    },
    prelude::*,
    sync::atomic::{
        Atomic,
        Relaxed,
        Release, //
    },
};

use crate::{
    batch::{
        self,
        TextMutex,
        TextMutexGuard, //
    },
    poke::{
        PokeError,
        PokeLoc, //
    },
};

/// The sites named in the log when a flip is refused.
const REPORTED: usize = 4;

/// `addr` as an offset from `_stext`: logs do not reveal where the kernel was loaded.
fn off(addr: usize) -> usize {
    addr.wrapping_sub((&raw const bindings::_stext).addr())
}

/// What the walk makes of a site.
enum Plan {
    /// Not patched: freed init text, or not kernel text.
    Skip,
    /// Holds the instruction the key's previous value put there: write this.
    Write(PokeLoc),
    /// Holds something else: the flip must be refused.
    Wrong {
        have: [u8; x86::MAX_LEN],
        len: usize,
    },
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
fn plan(text: &TextMutex, e: &JumpEntry, enabled: bool, init: bool) -> Plan {
    static NOT_TEXT: AtomicBool = AtomicBool::new(false);

    if !init && e.init {
        return Plan::Skip;
    }
    // SAFETY: `kernel_text_address()` only looks the address up.
    if !batch::core_text(e.code) && unsafe { bindings::kernel_text_address(e.code) } == 0 {
        // Built-in `__exit` code is not kernel text and never runs: skip it quietly, as C does.
        if !e.init && !NOT_TEXT.swap(true, Ordering::Relaxed) {
            pr_warn!(
                "jump_label: can't patch jump_label at _stext+{:#x}\n",
                off(e.code)
            );
            kernel::warn_on!(true);
        }
        return Plan::Skip;
    }
    let have = current_bytes(text, e.code);
    let wrong = |len| Plan::Wrong { have, len };
    let Some(len) = x86::site_size(&have) else {
        return wrong(x86::MAX_LEN);
    };
    let jumps = x86::site_jumps(enabled, e.branch);
    let (Some(old), Some(new)) = (
        SiteInsn::for_site(e.code, e.target, len, !jumps),
        SiteInsn::for_site(e.code, e.target, len, jumps),
    ) else {
        return wrong(len);
    };
    if !old.is_at(&have) {
        return wrong(len);
    }
    match batch::site_loc(e.code, new.padded(), len) {
        Ok(loc) => Plan::Write(loc),
        Err(_) => wrong(len),
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
    mut f: impl FnMut(&JumpEntry),
) {
    while entry < stop {
        // SAFETY: `entry` is in `entry..stop`, valid as the caller guarantees.
        let e = unsafe { JumpEntry::read(entry) };
        if e.key != key.addr() {
            break;
        }
        f(&e);
        // SAFETY: `entry < stop`, so the next entry is at most `stop`.
        entry = unsafe { entry.add(1) };
    }
}

/// How [`jump_label_rs_update`] treats a run of sites.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum How {
    /// Check, queue and apply: a flip of one key.
    Apply = 0,
    /// Check only: [`jump_label_rs_commit`] sees whether a key may flip.
    Check = 1,
    /// Check and queue, applied later by [`jump_label_rs_commit`].
    Queue = 2,
}

/// The current [`How`]. Not `Apply` only while [`jump_label_rs_commit`] runs, which sets it
/// with `jump_label_mutex` and `text_mutex` held and puts it back before it drops them: an
/// update that runs under `jump_label_mutex` and finds it not `Apply` runs inside the commit,
/// in the task that holds `text_mutex`.
static HOW: AtomicU8 = AtomicU8::new(How::Apply as u8);

fn how() -> How {
    match HOW.load(Ordering::Relaxed) {
        1 => How::Check,
        2 => How::Queue,
        _ => How::Apply,
    }
}

/// `__jump_label_update()`: patches the sites of `key` from `entry` to `stop` for its current
/// value. Returns false if the upstream C update must do it instead: with `text_poke=c`, and
/// while the kernel boots (before SMP, where sites are written directly).
///
/// A refused flip (a corrupted site) is counted in `text_poke_rs_refusals()`, from which the
/// caller in `kernel/jump_label.c` learns it and puts the key's count back.
///
/// # Safety
///
/// Called by `__jump_label_update()` with `jump_label_mutex` and `cpus_read_lock()` held, on a
/// valid run of jump-table entries starting at `entry`.
#[no_mangle]
pub unsafe extern "C" fn jump_label_rs_update(
    key: *mut bindings::static_key,
    entry: *mut bindings::jump_entry,
    stop: *mut bindings::jump_entry,
    init: bool,
) -> bool {
    let how = how();
    // The mode cannot change while `jump_label_mutex` is held. A commit's check runs in every
    // mode: it writes nothing.
    if how != How::Check && batch::mode() == bindings::text_poke_rs_mode_TEXT_POKE_RS_MODE_C {
        return false;
    }
    // SAFETY: `system_state` is an aligned `enum` that lives as long as the kernel; the boot CPU
    // writes it with plain aligned word stores as the kernel comes up, which are never torn:
    // this load sees the old or the new state, as `READ_ONCE()` would.
    let state = unsafe { Atomic::from_ptr(&raw mut bindings::system_state) }.load(Relaxed);
    if how != How::Check && state == bindings::system_states_SYSTEM_BOOTING {
        return false;
    }

    // SAFETY: `key` is a valid key, and its value cannot change under `jump_label_mutex`.
    // `static_key_count()` reads the -1 of a first enable in progress as enabled.
    let enabled = unsafe { bindings::static_key_count(key) } > 0;
    let mut guard: Option<TextMutexGuard> = None;
    let mut held;
    let text: &mut TextMutex = if how == How::Apply {
        guard.insert(TextMutexGuard::lock())
    } else {
        // SAFETY: Not `Apply`: this runs inside `jump_label_rs_commit()`, in the task that
        // holds `text_mutex` (see `HOW`), which does not use its own token until we return.
        held = unsafe { TextMutex::assume_held() };
        &mut held
    };

    // Every site is checked before any is written, so that a refused flip writes nothing:
    // queued as it is checked, in room made for all of them first, and taken back from the
    // batch if one is refused; or, where the batch cannot make room (or applies each site as
    // it comes, in `serial` mode), checked first and queued in a second walk.
    let mark = batch::queued(text);
    let mut sites = 0usize;
    // SAFETY: The caller guarantees the entries, which only change under `jump_label_mutex`.
    unsafe { for_each_entry(key, entry, stop, |_| sites += 1) };
    let one_walk = how != How::Check && batch::reserve_keys(text, sites);

    let mut wrong = 0usize;
    let mut report = |e: &JumpEntry, why: core::fmt::Arguments<'_>| {
        if wrong < REPORTED {
            pr_err!(
                "jump_label: site _stext+{:#x} of key _stext+{:#x} {}\n",
                off(e.code),
                off(key.addr()),
                why
            );
        }
        wrong += 1;
    };
    // SAFETY: As above.
    unsafe {
        for_each_entry(key, entry, stop, |e| match plan(text, e, enabled, init) {
            Plan::Write(loc) => {
                if one_walk {
                    if let Err(why) = batch::push_key(text, loc) {
                        report(e, format_args!("cannot be queued: {why:?}"));
                    }
                }
            }
            Plan::Wrong { have, len } => report(
                e,
                format_args!(
                    "holds {:02x?}, not the {} its key left there",
                    &have[..len],
                    if x86::site_jumps(enabled, e.branch) {
                        "NOP"
                    } else {
                        "JMP"
                    }
                ),
            ),
            Plan::Skip => {}
        })
    };
    if wrong != 0 {
        if one_walk {
            batch::truncate(text, mark);
        }
        pr_err!(
            "jump_label: {wrong} site(s) of key _stext+{:#x} cannot be flipped: flip refused, \
             nothing written\n",
            off(key.addr())
        );
        // SAFETY: Only counts the refusal, and traces it.
        unsafe { bindings::text_poke_rs_note_refused(key.cast_const().cast(), wrong as u32) };
        kernel::warn_on!(true);
        return true;
    }
    if how == How::Check {
        return true;
    }

    let mut applied = true;
    if !one_walk {
        // SAFETY: As above.
        unsafe {
            for_each_entry(key, entry, stop, |e| {
                if let Plan::Write(loc) = plan(text, e, enabled, init) {
                    applied &= batch::queue(text, loc, true);
                }
            })
        };
    }
    if how == How::Apply {
        applied &= batch::finish(text).is_ok();
    }
    if !applied {
        // A page of the key's text could not be mapped (module text going away): the batch
        // wrote nothing and warned. (Unless it was applied in parts, as the batch could not
        // grow, and a part was refused: that part wrote nothing.)
        pr_err!(
            "jump_label: the batch of key _stext+{:#x} was not applied: flip refused\n",
            off(key.addr())
        );
        // SAFETY: Only counts the refusal, and traces it: every site of the key.
        unsafe { bindings::text_poke_rs_note_refused(key.cast_const().cast(), sites as u32) };
    }
    true
}

/// The count of a key, as the atomic it is.
///
/// # Safety
///
/// `key` is a valid key that outlives the reference.
unsafe fn count<'a>(key: *mut bindings::static_key) -> &'a Atomic<i32> {
    // SAFETY: `key` is valid, as the caller guarantees; its count is only accessed atomically.
    unsafe { Atomic::from_ptr(&raw mut (*key).enabled.counter) }
}

/// Holds `cpus_read_lock()` and `jump_label_mutex`, in that order; `cpus_read_lock()` only if
/// the caller does not hold it already (`cpus`).
struct JumpLabelLock {
    cpus: bool,
}

impl JumpLabelLock {
    /// Takes both, or `jump_label_mutex` alone for a caller that holds `cpus_read_lock()`. May
    /// sleep.
    fn lock(cpus: bool) -> Self {
        if cpus {
            // SAFETY: Callers may sleep; the lock is released when `Self` is dropped.
            unsafe { bindings::cpus_read_lock() };
        } else {
            #[cfg(CONFIG_HOTPLUG_CPU)]
            // SAFETY: Only checks (with lockdep) that the caller holds the lock.
            unsafe {
                bindings::lockdep_assert_cpus_held()
            };
        }
        // SAFETY: As above, in the order `static_key_enable()` takes them.
        unsafe { bindings::jump_label_lock() };
        Self { cpus }
    }
}

impl Drop for JumpLabelLock {
    fn drop(&mut self) {
        // SAFETY: Taken in `lock()` by this task.
        unsafe { bindings::jump_label_unlock() };
        if self.cpus {
            // SAFETY: As above.
            unsafe { bindings::cpus_read_unlock() };
        }
    }
}

/// Flips the keys of `claims`, each to its `enable`, as one batch: a transaction's commit.
///
/// Every key's count and text change together: the keys being enabled read -1 (enabling in
/// progress, as in `static_key_enable()`) until their sites are written, the keys being
/// disabled read 0 from the start, as in `static_key_disable()`. Only these keys wait for the
/// batch; whatever else the caller flips meanwhile is applied as it returns.
///
/// Every site of every key is checked first: if one is corrupted (or the batch cannot take
/// it), no key changes, nothing is written, and the commit fails with `-EINVAL`; if a page of
/// the keys' text cannot be mapped, likewise with `-EFAULT`. A key already at its value is left
/// alone, as `static_key_enable()` and `static_key_disable()` leave it (with their warning if its
/// count is above one). Sets each claim's `flip` to whether its key changed.
///
/// # Safety
///
/// `claims` points to `n` claims on valid keys, none named twice; the caller may sleep and
/// holds none of `cpus_read_lock()`, `jump_label_mutex` and `text_mutex`.
#[no_mangle]
pub unsafe extern "C" fn jump_label_rs_commit(
    claims: *mut bindings::text_poke_rs_claim,
    n: usize,
) -> c_int {
    // SAFETY: As the caller guarantees.
    unsafe { commit(claims, n, true) }
}

/// [`jump_label_rs_commit`] for a caller that holds `cpus_read_lock()`: the `_cpuslocked`
/// variants of the static-key API.
///
/// # Safety
///
/// As for [`jump_label_rs_commit`], but the caller holds `cpus_read_lock()`.
#[no_mangle]
pub unsafe extern "C" fn jump_label_rs_commit_cpuslocked(
    claims: *mut bindings::text_poke_rs_claim,
    n: usize,
) -> c_int {
    // SAFETY: As the caller guarantees.
    unsafe { commit(claims, n, false) }
}

/// The commit, taking `cpus_read_lock()` if `cpus`.
///
/// # Safety
///
/// As for [`jump_label_rs_commit`]; the caller holds `cpus_read_lock()` unless `cpus`.
unsafe fn commit(claims: *mut bindings::text_poke_rs_claim, n: usize, cpus: bool) -> c_int {
    if n == 0 {
        return 0;
    }
    // SAFETY: The caller guarantees `claims` points to `n` claims, ours until we return.
    let claims = unsafe { core::slice::from_raw_parts_mut(claims, n) };
    let _locks = JumpLabelLock::lock(cpus);

    // Mark what changes, as the C helpers do, under `jump_label_mutex`: fast paths only ever
    // move a count between positive values.
    for c in claims.iter_mut() {
        // SAFETY: The caller guarantees the key is valid.
        let count = unsafe { count(c.key) };
        c.flip = if c.enable {
            let flip = count.cmpxchg(0, -1, Relaxed).is_ok();
            if !flip {
                kernel::warn_on!(count.load(Relaxed) != 1);
            }
            flip
        } else {
            let flip = count.cmpxchg(1, 0, Relaxed).is_ok();
            if !flip {
                kernel::warn_on!(count.load(Relaxed) != 0);
            }
            flip
        };
    }

    let mut text = TextMutexGuard::lock();
    let flips = || claims.iter().filter(|c| c.flip);
    // Check every key; the counts say which way each goes.
    HOW.store(How::Check as u8, Ordering::Relaxed);
    let mut ok = true;
    for c in flips() {
        // SAFETY: `jump_label_mutex` is held, and the key is valid.
        ok &= unsafe { bindings::jump_label_rs_key_update(c.key) };
    }
    if !ok {
        HOW.store(How::Apply as u8, Ordering::Relaxed);
        drop(text);
        for c in flips() {
            // SAFETY: As above.
            unsafe { count(c.key) }.store(if c.enable { 0 } else { 1 }, Release);
        }
        return -(bindings::EINVAL as c_int);
    }

    if batch::mode() == bindings::text_poke_rs_mode_TEXT_POKE_RS_MODE_C {
        // Upstream's update takes `text_mutex` itself, and patches each key at once.
        HOW.store(How::Apply as u8, Ordering::Relaxed);
        drop(text);
        for c in flips() {
            // SAFETY: As above.
            unsafe { bindings::jump_label_rs_key_update(c.key) };
        }
    } else {
        HOW.store(How::Queue as u8, Ordering::Relaxed);
        // SAFETY: Only reads a counter.
        let refused = unsafe { bindings::text_poke_rs_refusals() };
        for c in flips() {
            // Not refused for a site's bytes: nothing wrote text since the check, and
            // `text_mutex` is held. A site the batch cannot take is refused.
            // SAFETY: As above.
            unsafe { bindings::jump_label_rs_key_update(c.key) };
        }
        HOW.store(How::Apply as u8, Ordering::Relaxed);
        // SAFETY: As above.
        if unsafe { bindings::text_poke_rs_refusals() } != refused {
            // Nothing applied yet (the batch was empty when `text_mutex` was taken): drop the
            // other keys' sites too, and change no key.
            batch::truncate(&mut text, 0);
            drop(text);
            for c in flips() {
                // SAFETY: As above.
                unsafe { count(c.key) }.store(if c.enable { 0 } else { 1 }, Release);
            }
            return -(bindings::EINVAL as c_int);
        }
        let applied = batch::finish(&mut text);
        drop(text);
        if let Err(why) = applied {
            // Nothing written: a page of the keys' text could not be mapped, or two keys
            // named one site.
            for c in flips() {
                // SAFETY: As above.
                unsafe { count(c.key) }.store(if c.enable { 0 } else { 1 }, Release);
            }
            let err = if why == PokeError::Unmapped {
                bindings::EFAULT
            } else {
                bindings::EINVAL
            };
            return -(err as c_int);
        }
    }

    for c in flips().filter(|c| c.enable) {
        // Whoever sees the key enabled also sees its sites written, as in
        // `static_key_enable()`.
        // SAFETY: As above.
        unsafe { count(c.key) }.store(1, Release);
    }
    0
}

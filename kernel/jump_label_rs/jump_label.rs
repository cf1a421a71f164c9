// SPDX-License-Identifier: GPL-2.0

//! The generic jump-label update, `__jump_label_update()`, for the Rust batch.
//!
//! A key's entries are walked in code-address order (the order of the jump table). Entries that
//! cannot be patched are skipped: init text once it is freed, and code that is not kernel text.
//! Every other site must hold the instruction the key's previous value put there; if one does
//! not, the update is refused with a warning and no byte of it is written. (The kernel updates
//! a key's sites in the kernel image and in each module that uses it separately: a refusal
//! covers one of those runs of entries.) Otherwise every
//! site is queued and the batch is applied once, in three sync rounds however many sites there
//! are: the batch grows instead of filling up, and when it cannot grow it is applied and the
//! walk goes on, so there is no overflow to die on.

use core::{
    ptr,
    sync::atomic::{
        AtomicBool,
        Ordering, //
    },
};

use kernel::{
    bindings,
    prelude::*,
    static_key::insn::{
        self,
        SiteInsn, //
    },
};

use crate::{
    batch::{
        self,
        TextMutex,
        TextMutexGuard, //
    },
    poke::PokeLoc,
};

/// The sites named in the log when a flip is refused.
const REPORTED: usize = 4;

/// `addr` as an offset from `_stext`: logs do not reveal where the kernel was loaded.
fn off(addr: usize) -> usize {
    addr.wrapping_sub((&raw const bindings::_stext).addr())
}

/// One entry of the jump table, decoded.
struct Entry {
    code: usize,
    target: usize,
    key: usize,
    branch: bool,
    init: bool,
}

impl Entry {
    /// Decodes `entry`.
    ///
    /// # Safety
    ///
    /// `entry` points to a valid jump-table entry, which does not change while it is read.
    unsafe fn read(entry: *const bindings::jump_entry) -> Self {
        // SAFETY: The caller guarantees `entry` is valid.
        let e = unsafe { &*entry };
        let rel = |field: usize, off: isize| field.wrapping_add_signed(off);
        Self {
            code: rel((&raw const e.code).addr(), e.code as isize),
            target: rel((&raw const e.target).addr(), e.target as isize),
            key: rel((&raw const e.key).addr(), e.key & !3),
            branch: e.key & 1 != 0,
            init: e.key & 2 != 0,
        }
    }
}

/// What the walk makes of a site.
enum Plan {
    /// Not patched: freed init text, or not kernel text.
    Skip,
    /// Holds the instruction the key's previous value put there: write this.
    Write(PokeLoc),
    /// Holds something else: the flip must be refused.
    Wrong {
        have: [u8; insn::MAX_LEN],
        len: usize,
    },
}

/// The size of the site instruction in `bytes`, if it is one a key puts there.
fn site_size(bytes: &[u8; insn::MAX_LEN]) -> Option<usize> {
    match bytes {
        [0x66, 0x90, ..] | [insn::JMP8_OPCODE, ..] => Some(2),
        [0x0f, 0x1f, 0x44, 0x00, 0x00] | [insn::JMP32_OPCODE, ..] => Some(5),
        _ => None,
    }
}

/// The bytes at `code` as the batch will leave them: the pending write if one is queued there
/// (in a transaction), the text otherwise.
fn current_bytes(text: &TextMutex, code: usize) -> [u8; insn::MAX_LEN] {
    let mut bytes = [0u8; insn::MAX_LEN];
    if let Some((queued, len)) = batch::pending(text, code) {
        let n = len.min(insn::MAX_LEN);
        bytes[..n].copy_from_slice(&queued[..n]);
        return bytes;
    }
    // SAFETY: `code` is kernel text (checked by the caller), mapped and only written under
    // `text_mutex`, which `text` says is held. Upstream's own check reads the site's whole
    // decoded instruction, so the 5 bytes read here are mapped as well.
    unsafe { ptr::copy_nonoverlapping(code as *const u8, bytes.as_mut_ptr(), insn::MAX_LEN) };
    bytes
}

/// Decides what to do with the site of `e` for a key whose value is now `enabled`.
fn plan(text: &TextMutex, e: &Entry, enabled: bool, init: bool) -> Plan {
    static NOT_TEXT: AtomicBool = AtomicBool::new(false);

    if !init && e.init {
        return Plan::Skip;
    }
    // SAFETY: `kernel_text_address()` only looks the address up.
    if unsafe { bindings::kernel_text_address(e.code) } == 0 {
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
    let Some(len) = site_size(&have) else {
        return wrong(insn::MAX_LEN);
    };
    let jumps = insn::site_jumps(enabled, e.branch);
    let (Some(old), Some(new)) = (
        SiteInsn::for_site(e.code, e.target, len, !jumps),
        SiteInsn::for_site(e.code, e.target, len, jumps),
    ) else {
        return wrong(len);
    };
    if &have[..len] != old.as_bytes() {
        return wrong(len);
    }
    match batch::poke_loc(e.code, new.as_bytes()) {
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
    mut f: impl FnMut(&Entry),
) {
    while entry < stop {
        // SAFETY: `entry` is in `entry..stop`, valid as the caller guarantees.
        let e = unsafe { Entry::read(entry) };
        if e.key != key.addr() {
            break;
        }
        f(&e);
        // SAFETY: `entry < stop`, so the next entry is at most `stop`.
        entry = unsafe { entry.add(1) };
    }
}

/// `__jump_label_update()`: patches the sites of `key` from `entry` to `stop` for its current
/// value. Returns false if the upstream C update must do it instead: with `text_poke=c`, and
/// while the kernel boots (before SMP, where sites are written directly).
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
    // The mode cannot change while `jump_label_mutex` is held.
    if batch::mode() == bindings::text_poke_rs_mode_TEXT_POKE_RS_MODE_C {
        return false;
    }
    // SAFETY: `system_state` is written only by the boot CPU as the kernel comes up.
    if unsafe { ptr::read_volatile(&raw const bindings::system_state) }
        == bindings::system_states_SYSTEM_BOOTING
    {
        return false;
    }

    // SAFETY: `key` is a valid key, and its value cannot change under `jump_label_mutex`.
    // `static_key_count()` reads the -1 of a first enable in progress as enabled.
    let enabled = unsafe { bindings::static_key_count(key) } > 0;
    let text = TextMutexGuard::lock();

    // Check every site before queueing any, so that a refused flip writes nothing.
    let mut wrong = 0usize;
    // SAFETY: The caller guarantees the entries, which only change under `jump_label_mutex`.
    unsafe {
        for_each_entry(key, entry, stop, |e| {
            if let Plan::Wrong { have, len } = plan(&text, e, enabled, init) {
                if wrong < REPORTED {
                    pr_err!(
                        "jump_label: site _stext+{:#x} of key _stext+{:#x} holds {:02x?}, not \
                         the {} its key left there\n",
                        off(e.code),
                        off(key.addr()),
                        &have[..len],
                        if insn::site_jumps(enabled, e.branch) {
                            "NOP"
                        } else {
                            "JMP"
                        },
                    );
                }
                wrong += 1;
            }
        })
    };
    if wrong != 0 {
        pr_err!(
            "jump_label: {wrong} site(s) of key _stext+{:#x} corrupted: flip refused, nothing \
             written\n",
            off(key.addr())
        );
        // SAFETY: Only counts the refusal.
        unsafe { bindings::text_poke_rs_note_refused() };
        kernel::warn_on!(true);
        return true;
    }

    // SAFETY: As above.
    unsafe {
        for_each_entry(key, entry, stop, |e| {
            if let Plan::Write(loc) = plan(&text, e, enabled, init) {
                batch::queue(&text, loc);
            }
        })
    };
    batch::finish(&text);
    true
}

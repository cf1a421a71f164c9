// SPDX-License-Identifier: GPL-2.0

//! The sites of a static key: its jump-table entries ([`JumpEntry`]) and the instructions they
//! patch ([`Site`]).

use super::{x86, JumpLabelLock, TextLock};
use crate::{
    bindings,
    error::{code::*, Result},
    ffi::c_ulong,
};

/// The start of the kernel image's text, `_stext`: what a site is counted from, in logs (which
/// do not reveal where the kernel was loaded) and in the text-poke batch's vector.
#[inline(always)]
pub fn text_base() -> usize {
    (&raw const bindings::_stext).addr()
}

/// `addr` as an offset from [`text_base()`].
#[inline(always)]
pub fn text_offset(addr: usize) -> usize {
    addr.wrapping_sub(text_base())
}

/// Whether `addr` is in the kernel image's text, `_stext` to `_etext`: checked inline, with no
/// call, where that is all a caller needs.
#[inline(always)]
pub fn core_text(addr: usize) -> bool {
    (text_base()..(&raw const bindings::_etext).addr()).contains(&addr)
}

/// Whether `addr` is kernel text: the image's ([`core_text()`]), or a module's, or other text
/// `kernel_text_address()` knows. Not freed init text.
///
/// Inline: a key's update asks it of every site, from the text-poke batch's crate.
#[inline]
pub fn text_address(addr: usize) -> bool {
    // SAFETY: `kernel_text_address()` only looks the address up.
    core_text(addr) || unsafe { bindings::kernel_text_address(addr) } != 0
}

/// Calls `f` on each site of `key` in the kernel image; see [`StaticKey::for_each_site`].
///
/// [`StaticKey::for_each_site`]: crate::jump_label::StaticKey::for_each_site
///
/// Not generic, so that modules using static keys need none of the symbols it uses.
#[inline(never)]
pub(super) fn walk_sites(key: *mut bindings::static_key, f: &mut dyn FnMut(&Site)) -> Result {
    // SAFETY: The walk's callers hold neither mutex (a `for_each_site()` callback may not change
    // a key), and the guard is dropped before the walk returns.
    let _lock = unsafe { JumpLabelLock::lock() };
    // Other text pokes (ftrace, kprobes) write without `jump_label_mutex`: `text_mutex` keeps
    // every site whole while it is read.
    // SAFETY: Taken after `jump_label_mutex`, as every flip takes it; the callback `f` changes no
    // key and writes no text (see `for_each_site()`), and the guard is dropped on return.
    let _text = unsafe { TextLock::lock() };
    // SAFETY: `key` is a valid key, and its `entries` word is only written under
    // `jump_label_mutex`, which `_lock` holds.
    let entries = unsafe { (*key).__bindgen_anon_1.entries };
    // SAFETY: `key` is a valid key; `type_` is the same word as `entries`, only written under
    // `jump_label_mutex`, which `_lock` holds.
    let flags = unsafe { (*key).__bindgen_anon_1.type_ };
    if flags & bindings::JUMP_TYPE_LINKED as c_ulong != 0 {
        return Err(ENOTSUPP);
    }
    let mask = bindings::JUMP_TYPE_MASK as c_ulong;
    let mut entry = entries.map_addr(|a| a & !mask);
    if entry.is_null() {
        return Ok(());
    }
    let start = (&raw mut bindings::__start___jump_table).cast::<bindings::jump_entry>();
    let stop = (&raw mut bindings::__stop___jump_table).cast::<bindings::jump_entry>();
    if entry < start || entry >= stop {
        return Err(ENOTSUPP);
    }
    while entry < stop {
        // SAFETY: `entry` is in the kernel's jump table, whose entries stay put while `_lock`
        // is held.
        let site = unsafe { Site::from_entry(entry) };
        if site.entry.key != key.addr() {
            break;
        }
        if site.size != 0 {
            f(&site);
        }
        // SAFETY: `entry < stop`, so the next entry is at most `stop`.
        entry = unsafe { entry.add(1) };
    }
    Ok(())
}

/// A `__jump_table` entry, decoded: the one decoder of jump-table entries, for the sites
/// [`StaticKey::for_each_site`] hands out and for the text-poke batch's update of a key.
///
/// [`StaticKey::for_each_site`]: crate::jump_label::StaticKey::for_each_site
///
/// An entry's fields are offsets from themselves; the key's two low bits are the entry's flags.
#[derive(Clone, Copy, Debug)]
pub struct JumpEntry {
    /// The address of the site's instruction.
    pub code: usize,
    /// The address the site jumps to when it branches.
    pub target: usize,
    /// The address of the key.
    pub key: usize,
    /// The branch bit: the site jumps when its key's value differs from it.
    pub branch: bool,
    /// The init bit: the site is in init text, freed once the kernel or its module is up.
    pub init: bool,
}

impl JumpEntry {
    /// Decodes `entry`.
    ///
    /// # Safety
    ///
    /// `entry` points to a valid jump-table entry, which does not change while it is read.
    #[inline(always)]
    pub unsafe fn read(entry: *const bindings::jump_entry) -> Self {
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

/// One site of a static key: a `__jump_table` entry and the instruction it patches.
///
/// Only handed out by [`StaticKey::for_each_site`], while the site cannot change or go away.
///
/// [`StaticKey::for_each_site`]: crate::jump_label::StaticKey::for_each_site
pub struct Site {
    entry: JumpEntry,
    size: usize,
}

impl Site {
    /// Reads a jump-table entry. Returns a site of size 0 for an entry whose code is no longer
    /// kernel text (freed init text).
    ///
    /// # Safety
    ///
    /// `entry` is a valid entry of the kernel's jump table, and `jump_label_mutex` is held (and
    /// `text_mutex`, with the Rust text-poke batch).
    unsafe fn from_entry(entry: *mut bindings::jump_entry) -> Self {
        // SAFETY: The caller guarantees `entry` is valid and does not change.
        let entry = unsafe { JumpEntry::read(entry) };
        let code = entry.code;
        let size = if !text_address(code) {
            0
        } else {
            let mut bytes = [0u8; x86::MAX_LEN];
            // SAFETY: `code` is live kernel text, which cannot be patched while the caller's
            // locks are held; the site's jump-table entry says an instruction of at least 2
            // bytes starts there, and kernel text is followed by more text or padding, so
            // the 5 bytes read are mapped.
            unsafe { core::ptr::copy_nonoverlapping(code as *const u8, bytes.as_mut_ptr(), 5) };
            // A corrupted site has no size: it holds no instruction of its key.
            x86::site_size(&bytes).unwrap_or(x86::MAX_LEN)
        };
        Self { entry, size }
    }

    /// The address of the site's instruction.
    #[inline]
    pub fn code(&self) -> usize {
        self.entry.code
    }

    /// The address the site jumps to when it branches.
    #[inline]
    pub fn target(&self) -> usize {
        self.entry.target
    }

    /// The entry's branch bit: the site jumps when the key's value differs from it.
    #[inline]
    pub fn branch(&self) -> bool {
        self.entry.branch
    }

    /// The size of the site's instruction: 2 or 5 bytes, and 5 for a site that holds neither
    /// instruction a key puts there (a corrupted site).
    #[inline]
    pub fn size(&self) -> usize {
        self.size
    }

    /// Whether the site jumps when the key is `enabled`: `jump_label_type()`.
    #[inline]
    pub fn jumps_when(&self, enabled: bool) -> bool {
        x86::site_jumps(enabled, self.entry.branch)
    }

    /// The instruction the site must hold when the key is `enabled`.
    #[inline]
    pub fn expected(&self, enabled: bool) -> Option<x86::SiteInsn> {
        x86::SiteInsn::for_site(
            self.entry.code,
            self.entry.target,
            self.size,
            self.jumps_when(enabled),
        )
    }

    /// The site's current bytes and those after it, [`x86::MAX_LEN`] in all: the first
    /// [`size`](Self::size) are the site's.
    pub fn read(&self) -> [u8; x86::MAX_LEN] {
        let mut bytes = [0u8; x86::MAX_LEN];
        for (i, b) in bytes.iter_mut().enumerate() {
            // SAFETY: The byte is in a site in live kernel text (`walk_sites` skips freed init
            // text) or in the text or padding after it (see `Site::from_entry()`), which stays
            // mapped while `jump_label_mutex` is held. Nothing writes it meanwhile: a key's sites
            // are only written by flips of the key, under `jump_label_mutex`, which the walk
            // holds. (Volatile, since the text is read-only where it is read here and
            // `Atomic::from_ptr()` wants a writable object.)
            *b = unsafe { core::ptr::read_volatile((self.entry.code + i) as *const u8) };
        }
        bytes
    }

    /// Decodes the site's current instruction.
    pub fn decode(&self) -> x86::Decoded {
        x86::decode(self.entry.code, &self.read()[..self.size])
    }
}

// SPDX-License-Identifier: GPL-2.0

//! The live batch behind `smp_text_poke_*()`: storage, the entry points C calls, and the
//! INT3 handler's lookup.
//!
//! Every entry point but [`text_poke_rs_lookup`] runs under `text_mutex`, which serialises all
//! access to the batch. The INT3 handler reads the published vector only between
//! `text_poke_rs_publish()` and `text_poke_rs_retire()`, which bracket [`poke::apply`].

use core::{cell::UnsafeCell, ffi::c_void, ptr};

use kernel::{
    bindings,
    prelude::*, //
};

use crate::poke::{self, Emulation, PokeError, PokeLoc, Queue, Sites, TextOps};

/// Sites a batch holds without allocating: a page of [`PokeLoc`]s, as in C.
const FIXED: usize = 256;

/// Where the batch keeps its sites.
///
/// # Invariants
///
/// - `nr <= FIXED` while `grown` is empty, and the sites are `fixed[..nr]`;
/// - otherwise the sites are `grown[..nr]`, with `nr == grown.len()`.
struct Storage {
    fixed: [PokeLoc; FIXED],
    grown: KVec<PokeLoc>,
    nr: usize,
}

impl Sites for Storage {
    fn as_mut_slice(&mut self) -> &mut [PokeLoc] {
        if self.grown.is_empty() {
            &mut self.fixed[..self.nr]
        } else {
            &mut self.grown[..]
        }
    }

    fn reserve_one(&mut self) -> bool {
        if self.grown.is_empty() {
            if self.nr < FIXED {
                return true;
            }
            // Move to a vector of twice the page, or to the one an earlier large batch left.
            // GFP_NOWAIT: callers hold text_mutex, and some hold other locks too; failing only
            // costs an early flush.
            if self
                .grown
                .reserve(2 * FIXED, GFP_NOWAIT | __GFP_NOWARN)
                .is_err()
            {
                return false;
            }
            // INVARIANT: the sites move, in order, to `grown`, which was empty and now has room
            // for all of them; `nr == grown.len()`.
            return self
                .grown
                .extend_from_slice(&self.fixed, GFP_NOWAIT | __GFP_NOWARN)
                .is_ok();
        }
        if self.grown.len() < self.grown.capacity() {
            return true;
        }
        let more = self.grown.len();
        self.grown.reserve(more, GFP_NOWAIT | __GFP_NOWARN).is_ok()
    }

    fn push(&mut self, loc: PokeLoc) {
        if self.grown.is_empty() {
            let Some(slot) = self.fixed.get_mut(self.nr) else {
                // `reserve_one()` made room; nothing to do if it did not.
                return;
            };
            *slot = loc;
        } else if self.grown.push(loc, GFP_NOWAIT | __GFP_NOWARN).is_err() {
            // `reserve_one()` made room; nothing to do if it did not.
            return;
        }
        self.nr += 1;
    }

    /// Keeps a grown vector's memory for the next large batch.
    fn clear(&mut self) {
        self.grown.clear();
        self.nr = 0;
    }
}

/// The batch and what the INT3 handler sees of it.
struct State {
    batch: UnsafeCell<Queue<Storage>>,
    /// The published vector: pointer and length, valid while published.
    published: UnsafeCell<(*const PokeLoc, usize)>,
}

// SAFETY: `batch` is only touched under `text_mutex`; `published` is written under it and read
// by the INT3 handler only while the per-CPU references say the vector is live.
unsafe impl Sync for State {}

static STATE: State = State {
    batch: UnsafeCell::new(Queue::new(Storage {
        fixed: [PokeLoc::EMPTY; FIXED],
        grown: KVec::new(),
        nr: 0,
    })),
    published: UnsafeCell::new((ptr::null(), 0)),
};

/// The address offsets are stored from.
#[inline(always)]
fn base() -> usize {
    (&raw const bindings::_stext).addr()
}

/// The batch, for code running under `text_mutex`.
///
/// # Safety
///
/// The caller holds `text_mutex` and does not keep the reference past releasing it.
unsafe fn batch() -> &'static mut Queue<Storage> {
    // SAFETY: `text_mutex` serialises every user of the batch, as the caller guarantees.
    unsafe { &mut *STATE.batch.get() }
}

/// Kernel text, patched with `text_poke()` and synchronised with an IPI round.
struct KernelText;

impl TextOps for KernelText {
    fn read(&mut self, addr: usize, buf: &mut [u8]) {
        // SAFETY: `addr` is a site in live kernel text being patched under `text_mutex`, so
        // its bytes are mapped and only this thread writes them.
        unsafe { ptr::copy_nonoverlapping(addr as *const u8, buf.as_mut_ptr(), buf.len()) };
    }

    fn write(&mut self, addr: usize, bytes: &[u8]) {
        // SAFETY: `text_poke()` rewrites live text through a temporary mapping; the caller holds
        // `text_mutex` as it requires.
        unsafe { bindings::text_poke(addr as *mut c_void, bytes.as_ptr().cast(), bytes.len()) };
    }

    fn sync(&mut self) {
        // SAFETY: An IPI round; may be called from any context that may sleep.
        unsafe { bindings::smp_text_poke_sync_each_cpu() };
    }

    fn poked(&mut self, addr: usize, old: &[u8], new: &[u8]) {
        // SAFETY: Both buffers hold `old.len() == new.len()` bytes.
        unsafe {
            bindings::text_poke_rs_poked(
                addr as *const c_void,
                old.as_ptr().cast(),
                new.as_ptr().cast(),
                old.len(),
            )
        };
    }
}

/// Whether the current task has a transaction open: its finishes wait for the commit.
fn in_transaction() -> bool {
    // SAFETY: `text_poke_rs_txn_owner` is only written under `text_mutex`, which the caller
    // holds; `get_current()` has no preconditions.
    unsafe { bindings::text_poke_rs_txn_owner == bindings::get_current() }
}

/// The implementation in use: `text_poke_rs_mode`.
///
/// It only changes with `text_mutex` and `jump_label_mutex` held and nothing queued, so it
/// stays put for as long as a caller holds either.
pub(crate) fn mode() -> u32 {
    // SAFETY: `text_poke_rs_mode` is a valid `int`; a volatile read is `READ_ONCE()`.
    let mode = unsafe { ptr::read_volatile(&raw const bindings::text_poke_rs_mode) };
    mode as u32
}

fn serial() -> bool {
    mode() == bindings::text_poke_rs_mode_TEXT_POKE_RS_MODE_SERIAL
}

/// Proof that the current task holds `text_mutex`, which serialises every access to the batch.
pub(crate) struct TextMutex {
    _not_send: core::marker::PhantomData<*mut ()>,
}

impl TextMutex {
    /// # Safety
    ///
    /// The caller holds `text_mutex` for as long as the token lives.
    unsafe fn assume_held() -> Self {
        Self {
            _not_send: core::marker::PhantomData,
        }
    }
}

/// Holds `text_mutex`.
pub(crate) struct TextMutexGuard(TextMutex);

impl TextMutexGuard {
    /// Takes `text_mutex`. May sleep.
    pub(crate) fn lock() -> Self {
        // SAFETY: Taking `text_mutex` needs a context that may sleep, which every caller of the
        // generic jump-label update is.
        unsafe { bindings::text_poke_rs_text_lock() };
        // SAFETY: The mutex was taken just above and is released when the guard is dropped.
        Self(unsafe { TextMutex::assume_held() })
    }
}

impl core::ops::Deref for TextMutexGuard {
    type Target = TextMutex;

    fn deref(&self) -> &TextMutex {
        &self.0
    }
}

impl Drop for TextMutexGuard {
    fn drop(&mut self) {
        // SAFETY: The guard holds `text_mutex`, taken in `lock()` by this task.
        unsafe { bindings::text_poke_rs_text_unlock() };
    }
}

/// `smp_text_poke_batch_add()`: queues a write, applying the batch first if the write would
/// break its address order or it is full and cannot grow.
///
/// # Safety
///
/// Called with `text_mutex` held; `opcode` and `emulate` (if not null) point to `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn text_poke_rs_batch_add(
    addr: *mut c_void,
    opcode: *const c_void,
    len: usize,
    emulate: *const c_void,
) {
    if len == 0 || len > poke::MAX_INSN {
        pr_warn!("text_poke: {len}-byte write refused\n");
        return;
    }
    // SAFETY: The caller guarantees `opcode` points to `len` bytes.
    let text = unsafe { core::slice::from_raw_parts(opcode.cast::<u8>(), len) };
    let emulate = if emulate.is_null() {
        None
    } else {
        // SAFETY: The caller guarantees `emulate` points to `len` bytes.
        Some(unsafe { core::slice::from_raw_parts(emulate.cast::<u8>(), len) })
    };
    let loc = match PokeLoc::new(base(), addr.addr(), text, emulate) {
        Ok(loc) => loc,
        Err(e) => {
            pr_err!("text_poke: cannot patch {:p}: {:?}\n", addr, e);
            kernel::warn_on!(true);
            return;
        }
    };
    // SAFETY: The caller holds `text_mutex`.
    queue(&unsafe { TextMutex::assume_held() }, loc);
}

/// A site's write, checked and encoded: see [`queue`].
pub(crate) fn poke_loc(addr: usize, text: &[u8]) -> Result<PokeLoc, PokeError> {
    PokeLoc::new(base(), addr, text, None)
}

/// Queues `loc` (see [`Queue::add`]). In `serial` mode the batch is applied at once.
pub(crate) fn queue(_text: &TextMutex, loc: PokeLoc) {
    // SAFETY: `_text` says the caller holds `text_mutex`.
    let b = unsafe { batch() };
    b.add(base(), loc, in_transaction(), apply_sites);
    if serial() {
        b.flush(base(), apply_sites);
    }
}

/// The bytes queued for `addr`, if a pending write covers exactly that site.
pub(crate) fn pending(_text: &TextMutex, addr: usize) -> Option<([u8; poke::MAX_INSN], usize)> {
    // SAFETY: `_text` says the caller holds `text_mutex`.
    unsafe { batch() }
        .pending(base(), addr)
        .map(PokeLoc::new_bytes)
}

/// `smp_text_poke_batch_finish()` for Rust callers: applies the batch unless the current task
/// has a transaction open.
pub(crate) fn finish(_text: &TextMutex) {
    if !in_transaction() {
        apply_batch();
    }
}

/// Applies whatever is queued, transaction or not: for text about to go away.
///
/// # Safety
///
/// Called with `text_mutex` held.
#[no_mangle]
pub unsafe extern "C" fn text_poke_rs_flush() {
    apply_batch();
}

/// The number of sites queued and not yet applied.
///
/// # Safety
///
/// Called with `text_mutex` held.
#[no_mangle]
pub unsafe extern "C" fn text_poke_rs_pending() -> usize {
    // SAFETY: The caller holds `text_mutex`.
    unsafe { batch() }.len()
}

/// `smp_text_poke_batch_finish()`: applies the batch with the INT3 protocol.
///
/// Only key flips wait for a transaction's commit: what a C user (ftrace, kprobes, static
/// calls) pokes is in place when this returns, as its caller expects, and so is anything a
/// transaction had queued.
///
/// # Safety
///
/// Called with `text_mutex` held.
#[no_mangle]
pub unsafe extern "C" fn text_poke_rs_batch_finish() {
    apply_batch();
}

/// Applies the batch. Called with `text_mutex` held.
fn apply_batch() {
    // SAFETY: Every caller holds `text_mutex`.
    unsafe { batch() }.flush(base(), apply_sites);
}

/// Patches `sites`, sorted by address, with the INT3 protocol. Called with `text_mutex` held.
fn apply_sites(sites: &mut [PokeLoc]) {
    // SAFETY: `published` is only written under `text_mutex`, and no handler reads it before
    // `text_poke_rs_publish()` below.
    unsafe { *STATE.published.get() = (sites.as_ptr(), sites.len()) };
    // SAFETY: Sets every CPU's reference count before any INT3 is written.
    unsafe { bindings::text_poke_rs_publish() };
    // SAFETY: Counts the batch for the statistics.
    unsafe { bindings::text_poke_rs_note_batch(sites.len() as u32) };

    poke::apply(sites, base(), &mut KernelText);

    // SAFETY: The last sync is done: no CPU can hit our INT3s any more; wait for handlers.
    unsafe { bindings::text_poke_rs_retire() };
    // SAFETY: No handler holds a reference any more.
    unsafe { *STATE.published.get() = (ptr::null(), 0) };
    // SAFETY: Ends the batch counted by `text_poke_rs_note_batch()` above.
    unsafe { bindings::text_poke_rs_note_batch_done() };
}

/// The INT3 handler's work: finds the site the INT3 at `regs->ip - 1` belongs to in the
/// published vector, by binary search, and emulates the instruction being written there, as
/// if it had run: a CALL, JMP, RET or Jcc, or a NOP as a JMP to the next instruction. Returns
/// false, changing nothing, for an address that is not in the vector and for an INT3 written
/// on purpose, which are someone else's to handle.
///
/// Called from `noinstr` code with a reference on the vector held: it lives in `.noinstr.text`,
/// and everything it uses is inlined; nothing panics or calls out.
///
/// # Safety
///
/// The caller holds a reference taken with `raw_atomic_inc_not_zero()` on this CPU's count, and
/// `regs` are the registers of a kernel-mode INT3 trap, saved by the entry code with the gap
/// below the interrupted stack that lets a CALL be emulated (see `int3_emulate_push()`).
#[no_mangle]
#[link_section = ".noinstr.text"]
pub unsafe extern "C" fn text_poke_rs_emulate(regs: *mut bindings::pt_regs) -> bool {
    // SAFETY: With a reference held, the vector published before the reference count was set
    // stays valid and unchanged (ordered by the handler's `smp_rmb()` and the count's acquire).
    let (vec, len) = unsafe { ptr::read_volatile(STATE.published.get()) };
    if vec.is_null() {
        return false;
    }
    // SAFETY: As above: `vec` points to `len` live sites.
    let sites = unsafe { core::slice::from_raw_parts(vec, len) };
    // SAFETY: The caller guarantees `regs` are valid and ours to change until we return.
    let regs = unsafe { &mut *regs };
    let ip = regs.ip.wrapping_sub(1);
    let Some(loc) = poke::lookup(sites, base(), ip) else {
        return false;
    };
    match loc.emulation(base()) {
        Emulation::Int3 => return false,
        Emulation::Ret => {
            let sp = regs.sp;
            // SAFETY: A RET was about to run: the return address is at the top of the
            // interrupted kernel stack.
            regs.ip = unsafe { ptr::read(sp as *const usize) };
            regs.sp = sp.wrapping_add(8);
        }
        Emulation::Call { ret, target } => {
            let sp = regs.sp.wrapping_sub(8);
            // SAFETY: The INT3 entry leaves a gap below the interrupted stack, which the caller
            // guarantees, so the word below it is free for the return address.
            unsafe { ptr::write(sp as *mut usize, ret) };
            regs.sp = sp;
            regs.ip = target;
        }
        Emulation::Jmp(target) => regs.ip = target,
        Emulation::Jcc { cc, taken, next } => {
            regs.ip = if poke::condition(regs.flags, cc) {
                taken
            } else {
                next
            };
        }
    }
    true
}

// SPDX-License-Identifier: GPL-2.0

//! The live batch behind `smp_text_poke_*()`: storage, the entry points C calls, and the
//! INT3 handler's lookup.
//!
//! Every entry point but [`text_poke_batch_emulate`] runs under `text_mutex`, which serialises all
//! access to the batch: the batch is only reached with a [`TextMutex`] token. Nothing stays
//! queued once `text_mutex` is released. The INT3 handler reads the published vector, which
//! nothing writes meanwhile, only between `text_poke_batch_publish()` and
//! `text_poke_batch_retire()`, which bracket [`poke::apply`].

use core::{cell::UnsafeCell, ffi::c_void, mem::MaybeUninit, ptr};

use kernel::{
    bindings,
    jump_label::{
        core_text,
        text_base,
        text_offset, //
    },
    prelude::*,
};

use crate::measure;
use crate::poke::{
    self,
    Index,
    KeySlots,
    Outcome,
    PokeError,
    PokeLoc,
    PokeStorage,
    Queue,
    Runs,
    Slot,
    TextOps, //
};

/// Sites a batch holds without allocating: a page of [`PokeLoc`]s, as in C. Only key flips
/// grow a batch beyond it.
const FIXED: usize = 256;

/// Where the batch keeps its sites, and a slot each for applying them ([`Slot`]).
///
/// # Invariants
///
/// - `nr <= FIXED` while `grown` is empty, and the sites are `fixed[..nr]`;
/// - otherwise the sites are `grown[..nr]`, with `nr == grown.len() == grown_slots.len()`.
struct Storage {
    fixed: [PokeLoc; FIXED],
    fixed_slots: [Slot; FIXED],
    grown: KVec<PokeLoc>,
    grown_slots: KVec<Slot>,
    nr: usize,
}

/// Allocations while a batch is built: callers hold `text_mutex`, and some hold other locks
/// too; failing only costs an early flush.
fn grow_flags() -> kernel::alloc::Flags {
    GFP_NOWAIT | __GFP_NOWARN
}

/// Room made for a key flip's sites before they are checked: the update may sleep, and a flip
/// that cannot get its room is refused before anything is written.
fn reserve_flags() -> kernel::alloc::Flags {
    GFP_KERNEL | __GFP_NOWARN
}

/// Lengthens `slots` by `more` placeholders, in its room: zeroes, one `memset()`, where
/// `extend_with()` would write them a slot at a time. False, `slots` as it was, if the room is
/// not there.
fn extend_slots(slots: &mut KVec<Slot>, more: usize) -> bool {
    let Some(spare) = slots.spare_capacity_mut().get_mut(..more) else {
        return false;
    };
    // SAFETY: `spare` is `more` slots of the vector's room, for writes; zeroes are a `Slot`
    // (integers and arrays of bytes, as `Slot::EMPTY`).
    unsafe { ptr::write_bytes(spare.as_mut_ptr(), 0, more) };
    // SAFETY: The `more` slots after the vector's length, within its room, were initialised
    // above.
    unsafe { slots.inc_len(more) };
    true
}

impl Storage {
    /// Makes room for `more` further sites in `grown`, keeping `grown_slots` as large.
    fn grow(&mut self, more: usize, flags: kernel::alloc::Flags) -> bool {
        self.grown.reserve(more, flags).is_ok() && self.grown_slots.reserve(more, flags).is_ok()
    }

    /// Moves the sites to `grown` if they are in `fixed`: nothing is allocated, in room
    /// `reserve()` made. False, the sites as they were, if the room is not there.
    fn grow_for_fill(&mut self) -> bool {
        if !self.grown.is_empty() {
            return true;
        }
        let nr = self.nr;
        let Some(sites) = self.fixed.get(..nr) else {
            return false;
        };
        // INVARIANT: the sites move, in order, to `grown`, which was empty; `grown_slots` as
        // long. Should either fail, both are emptied again, the sites still in `fixed`.
        if self.grown.extend_from_slice(sites, grow_flags()).is_err()
            || !extend_slots(&mut self.grown_slots, nr)
        {
            self.grown.truncate(0);
            self.grown_slots.truncate(0);
            return false;
        }
        true
    }

    /// [`PokeStorage::reserve_one`] when the sites' storage is full.
    fn reserve_one_slow(&mut self, grow: bool) -> bool {
        if self.grown.is_empty() {
            if self.nr < FIXED {
                return true;
            }
            if !grow || !self.grow(2 * FIXED, grow_flags()) {
                return false;
            }
            // INVARIANT: the sites move, in order, to `grown`, which was empty and now has room
            // for all of them; `nr == grown.len() == grown_slots.len()`.
            return self
                .grown
                .extend_from_slice(&self.fixed, grow_flags())
                .is_ok()
                && extend_slots(&mut self.grown_slots, FIXED);
        }
        if !grow {
            return false;
        }
        if self.grown.len() < self.grown.capacity()
            && self.grown_slots.len() < self.grown_slots.capacity()
        {
            return true;
        }
        let more = self.grown.len();
        self.grow(more, grow_flags())
    }
}

impl PokeStorage for Storage {
    fn as_mut_slice(&mut self) -> &mut [PokeLoc] {
        if self.grown.is_empty() {
            &mut self.fixed[..self.nr]
        } else {
            &mut self.grown[..]
        }
    }

    fn split(&mut self) -> (&[PokeLoc], &mut [Slot]) {
        if self.grown.is_empty() {
            (&self.fixed[..self.nr], &mut self.fixed_slots[..self.nr])
        } else {
            (&self.grown[..], &mut self.grown_slots[..])
        }
    }

    #[inline(always)]
    fn reserve_one(&mut self, grow: bool) -> bool {
        // The common cases first, inlined: room left where the sites are.
        if self.grown.is_empty() {
            if self.nr < FIXED {
                return true;
            }
        } else if grow
            && self.grown.len() < self.grown.capacity()
            && self.grown_slots.len() < self.grown_slots.capacity()
        {
            return true;
        }
        self.reserve_one_slow(grow)
    }

    fn reserve(&mut self, more: usize) -> bool {
        let want = self.nr + more;
        if self.grown.is_empty() && want <= FIXED {
            return true;
        }
        // Room in `grown` for every site, and for the `2 * FIXED` that `reserve_one()` makes
        // when the sites move there from a full `fixed`: it then needs no allocation.
        let more = want.max(2 * FIXED) - self.grown.len();
        self.grow(more, reserve_flags())
    }

    fn push(&mut self, loc: PokeLoc) {
        if self.grown.is_empty() {
            let Some(slot) = self.fixed.get_mut(self.nr) else {
                // `reserve_one()` made room: a caller that did not call it is a bug.
                kernel::warn_on!(true);
                return;
            };
            *slot = loc;
        } else {
            // `reserve_one()` made room in both vectors: neither push fails, unless a caller
            // did not call it, a bug.
            if self.grown_slots.len() == self.grown_slots.capacity()
                || self.grown.push_within_capacity(loc).is_err()
            {
                kernel::warn_on!(true);
                return;
            }
            // INVARIANT: `grown_slots` had room, checked above.
            let _ = self.grown_slots.push_within_capacity(Slot::EMPTY);
        }
        self.nr += 1;
    }

    unsafe fn fill(
        &mut self,
        more: usize,
        f: impl FnOnce(&[PokeLoc], &mut [MaybeUninit<PokeLoc>]) -> usize,
    ) -> bool {
        let nr = self.nr;
        let in_fixed = self.grown.is_empty() && nr.saturating_add(more) <= FIXED;
        if !in_fixed
            && (!self.grow_for_fill()
                || self.grown.capacity() - self.grown.len() < more
                || self.grown_slots.capacity() - self.grown_slots.len() < more)
        {
            return false;
        }
        // One call of `f` for both places: the walk it runs is inlined once.
        let (queued, room): (&[PokeLoc], &mut [MaybeUninit<PokeLoc>]) = if in_fixed {
            let (queued, room) = self.fixed.split_at_mut(nr.min(FIXED));
            let room = room.get_mut(..more).unwrap_or(&mut []);
            // SAFETY: `MaybeUninit<PokeLoc>` has `PokeLoc`'s layout, and `f` writes only sites
            // to the room (the caller guarantees): `fixed` stays initialised.
            let room = unsafe { &mut *(ptr::from_mut(room) as *mut [MaybeUninit<PokeLoc>]) };
            (queued, room)
        } else {
            let len = self.grown.len();
            let sites = self.grown.as_mut_ptr();
            // SAFETY: The vector's first `len` places are its sites, and the `more` after them
            // its room (checked above): two disjoint parts of its allocation, borrowed from the
            // vector, which is not used otherwise while they live.
            unsafe {
                (
                    core::slice::from_raw_parts(sites, len),
                    core::slice::from_raw_parts_mut(sites.add(len).cast(), more),
                )
            }
        };
        let n = f(queued, room);
        if !in_fixed {
            // SAFETY: The caller guarantees that `f` wrote the first `n` places of the room,
            // the `n` places after the vector's length, and that `n` is at most `more`, within
            // the room checked above.
            unsafe { self.grown.inc_len(n) };
            // INVARIANT: `nr == grown.len() == grown_slots.len()` again, `n` sites further;
            // there is room for `n` slots, checked above.
            extend_slots(&mut self.grown_slots, n);
        }
        // INVARIANT: in `fixed`, `nr` stays at most `FIXED` (`room` was within it).
        self.nr = nr + n;
        true
    }

    fn truncate(&mut self, len: usize) {
        if len >= self.nr {
            return;
        }
        // INVARIANT: `nr` shrinks, and `grown` and `grown_slots` with it.
        self.grown.truncate(len);
        self.grown_slots.truncate(len);
        self.nr = len;
    }

    /// Frees a grown vector: a large batch is rare, and its memory is not kept.
    fn clear(&mut self) {
        self.grown = KVec::new();
        self.grown_slots = KVec::new();
        self.nr = 0;
    }
}

/// The batch. The INT3 handler sees the vector being applied through C's
/// `text_poke_batch_published`, set by `text_poke_batch_publish()`.
struct State {
    batch: UnsafeCell<Queue<Storage>>,
}

// SAFETY: `batch` is only reached through [`batch()`], which takes proof that `text_mutex` is
// held.
unsafe impl Sync for State {}

static STATE: State = State {
    batch: UnsafeCell::new(Queue::new(Storage {
        fixed: [PokeLoc::EMPTY; FIXED],
        fixed_slots: [Slot::EMPTY; FIXED],
        grown: KVec::new(),
        grown_slots: KVec::new(),
        nr: 0,
    })),
};

/// Batches of more sites than this are published with an [`Index`]: up to C's batches of 256
/// (`TEXT_POKE_ARRAY_MAX`), the INT3 handler's search is C's, and an index would only cost.
const INDEX_MIN: usize = 256;

/// What [`apply_sites()`] keeps of the batch it applies: its index, if it has one, and its runs
/// of pages.
struct Scratch {
    index: UnsafeCell<Index>,
    runs: UnsafeCell<Runs>,
}

// SAFETY: Only [`apply_sites()`] reaches either, under `text_mutex`; it writes the index while
// no batch is published, and INT3 handlers read it only while one is.
unsafe impl Sync for Scratch {}

static SCRATCH: Scratch = Scratch {
    index: UnsafeCell::new(Index::EMPTY),
    runs: UnsafeCell::new(Runs::EMPTY),
};

/// Whether fault injection (`fail_text_poke_batch`, `CONFIG_FAIL_TEXT_POKE_BATCH`) drops the next
/// write made with `text_poke()`: it does not land, and the batch must put every site back. (A
/// run's writes are dropped by the C side, which finds them when it reads them back.)
#[inline(always)]
fn write_fails() -> bool {
    #[cfg(CONFIG_FAIL_TEXT_POKE_BATCH)]
    // SAFETY: Only consults the fault attributes.
    return unsafe { bindings::text_poke_batch_should_fail() };
    #[cfg(not(CONFIG_FAIL_TEXT_POKE_BATCH))]
    false
}

/// Whether fault injection may drop writes ([`write_fails`]) now.
#[inline(always)]
fn faults_armed() -> bool {
    #[cfg(CONFIG_FAIL_TEXT_POKE_BATCH)]
    // SAFETY: Only reads the fault attributes and this task's `fail-nth` count.
    return unsafe { bindings::text_poke_batch_faults_armed() };
    #[cfg(not(CONFIG_FAIL_TEXT_POKE_BATCH))]
    false
}

/// The batch, for as long as `text` proves `text_mutex` held.
fn batch(_text: &mut TextMutex) -> &mut Queue<Storage> {
    // SAFETY: `text_mutex` serialises every user of the batch, and a token of the task that
    // holds it is borrowed mutably for as long as the reference lives, no other being used
    // meanwhile (type invariant).
    unsafe { &mut *STATE.batch.get() }
}

/// Kernel text, patched a run of pages at a time through one temporary mapping (or with
/// `text_poke()`, a write at a time, where a run cannot be mapped), and synchronised with an IPI
/// round.
struct KernelText {
    /// Idle CPUs, and isolated CPUs in user space, may take the syncs at their next kernel entry
    /// or idle exit: the batch writes no text they can run before that.
    #[cfg_attr(not(CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE), allow(dead_code))]
    may_defer: bool,
    /// The run mapped, between `map_run()` and `unmap_run()`.
    run: bindings::text_poke_batch_run,
    /// Fault injection may drop a write ([`write_fails`]): asked once per batch, and only for
    /// a batch whose caller can be told it was not applied.
    faults: bool,
}

impl KernelText {
    /// The text of the batch `sites`; fault injection is asked about it if `refusable` (its
    /// caller can be told it was not applied: a key flip or a transaction).
    fn of(sites: &[PokeLoc], refusable: bool) -> Self {
        #[cfg(CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE)]
        let may_defer = crate::defer::may_defer(sites, text_base());
        #[cfg(not(CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE))]
        let may_defer = {
            let _ = sites;
            false
        };
        Self {
            may_defer,
            run: bindings::text_poke_batch_run::default(),
            faults: refusable && faults_armed(),
        }
    }
}

impl TextOps for KernelText {
    #[inline(always)]
    fn read(&mut self, addr: usize, buf: &mut [u8]) {
        /// Reads `N` bytes of text at `addr` at once.
        #[inline(always)]
        fn read_n<const N: usize>(addr: usize, buf: &mut [u8]) {
            if let Some(buf) = buf.first_chunk_mut::<N>() {
                // SAFETY: The caller's site at `addr`, of `N` bytes, is in live kernel text
                // being patched under `text_mutex`: mapped, and written by this thread only,
                // through another mapping. Unaligned, as text is.
                *buf = unsafe { ptr::read_unaligned(addr as *const [u8; N]) };
            }
        }
        // A key's sites, which a batch of runs reads whole, at once, where a loop would copy a
        // byte at a time; a call to `memcpy()` would cost more than either.
        match buf.len() {
            2 => read_n::<2>(addr, buf),
            5 => read_n::<5>(addr, buf),
            _ => {
                for (i, b) in buf.iter_mut().enumerate() {
                    // SAFETY: `addr` is a site in live kernel text being patched under
                    // `text_mutex`, so its bytes are mapped and only this thread writes them,
                    // through another mapping. A plain read: the text is read-only here, which
                    // `Atomic::from_ptr()` does not allow, and no other thread writes it.
                    *b = unsafe { ptr::read((addr + i) as *const u8) };
                }
            }
        }
    }

    fn write(&mut self, addr: usize, bytes: &[u8]) -> bool {
        if self.faults && write_fails() {
            return false;
        }
        // SAFETY: `text_poke()` rewrites live text through a temporary mapping; the caller holds
        // `text_mutex` as it requires. This one is untraced, as the batch needs.
        unsafe {
            bindings::text_poke_batch_text_poke(
                addr as *mut c_void,
                bytes.as_ptr().cast(),
                bytes.len(),
            )
        };
        // `text_poke()` reads the bytes back through `addr` itself, and `BUG()`s if they differ.
        true
    }

    fn run_pages(&self) -> usize {
        bindings::TEXT_POKE_BATCH_RUN_PAGES as usize
    }

    fn mappable(&mut self, pages: &[usize]) -> bool {
        // The kernel image's text is always there; module text is looked up.
        if pages.iter().all(|&p| core_text(p)) {
            return true;
        }
        // SAFETY: `pages` holds `pages.len()` addresses; the call only looks them up.
        unsafe { bindings::text_poke_batch_run_mappable(pages.as_ptr().cast(), pages.len() as u32) }
    }

    fn map_run(&mut self, pages: &[usize]) -> bool {
        // SAFETY: `pages` holds `pages.len()` addresses; the caller holds `text_mutex`. On
        // success the run stays mapped until `unmap_run()`, which `poke::apply` always calls.
        let ret = unsafe {
            bindings::text_poke_batch_run_map(
                &mut self.run,
                pages.as_ptr().cast(),
                pages.len() as u32,
            )
        };
        // The C side drops the run's first write if told to.
        self.run.fail = ret == 0 && self.faults && write_fails();
        ret == 0
    }

    fn write_sites(&mut self, piece: poke::Piece, sites: &[Slot]) -> u32 {
        const _: () = assert!(poke::RUN_CHUNK == bindings::TEXT_POKE_BATCH_RUN_WRITES as usize);
        const _: () = assert!(
            size_of::<poke::RunWrite>() == size_of::<bindings::text_poke_batch_write>()
                && align_of::<poke::RunWrite>() == align_of::<bindings::text_poke_batch_write>()
                && size_of::<Slot>() == size_of::<bindings::text_poke_batch_site>()
                && align_of::<Slot>() == align_of::<bindings::text_poke_batch_site>()
        );
        let fill = piece.fill.map_or(-1, i32::from);
        // SAFETY: A run is mapped (`map_run()` succeeded); `Slot` has the layout of
        // `struct text_poke_batch_site` (`#[repr(C)]`, same fields, sizes checked above), and
        // `sites` holds `sites.len()` of them. The C side refuses a write that would not stay
        // within the run.
        unsafe {
            bindings::text_poke_batch_run_sites(
                &mut self.run,
                sites.as_ptr().cast(),
                sites.len() as u32,
                piece.from.into(),
                piece.to.into(),
                fill,
            )
        }
    }

    fn unmap_run(&mut self) {
        // SAFETY: Mapped by `map_run()`.
        unsafe { bindings::text_poke_batch_run_unmap(&mut self.run) };
    }

    fn undoing(&mut self) {
        self.faults = false;
    }

    #[cfg(CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE)]
    fn sync(&mut self) {
        if self.may_defer {
            // SAFETY: A `KernelText` only lives in a batch being applied, under `text_mutex`.
            unsafe { crate::defer::sync(true) };
        } else {
            // SAFETY: An IPI round; may be called from any context that may sleep.
            unsafe { bindings::smp_text_poke_sync_each_cpu() };
        }
    }

    #[cfg(not(CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE))]
    fn sync(&mut self) {
        // SAFETY: An IPI round; may be called from any context that may sleep.
        unsafe { bindings::smp_text_poke_sync_each_cpu() };
    }

    fn reports(&mut self) -> bool {
        // SAFETY: Only reads perf's count of events that record text pokes.
        unsafe { bindings::text_poke_batch_reports() }
    }

    fn poked(&mut self, addr: usize, old: &[u8], new: &[u8]) {
        // SAFETY: Both buffers hold `old.len() == new.len()` bytes.
        unsafe {
            bindings::text_poke_batch_poked(
                addr as *const c_void,
                old.as_ptr().cast(),
                new.as_ptr().cast(),
                old.len(),
            )
        };
    }
}

/// Proof that the current task holds `text_mutex`, which serialises every access to the batch.
///
/// # Invariants
///
/// The task that made it holds `text_mutex` for as long as it lives, and while it is borrowed
/// mutably no other token of that task is used.
pub(crate) struct TextMutex {
    _not_send: core::marker::PhantomData<*mut ()>,
}

impl TextMutex {
    /// Proof for a caller that was handed `text_mutex` held; lockdep checks it.
    ///
    /// # Safety
    ///
    /// The caller holds `text_mutex` for as long as the token lives, and uses no other token of
    /// its own while this one is borrowed.
    #[inline(always)]
    pub(crate) unsafe fn assume_held() -> Self {
        // SAFETY: Only asserts, to lockdep, what the caller guarantees. Without lockdep there is
        // nothing to assert, and no call.
        #[cfg(CONFIG_LOCKDEP)]
        unsafe {
            bindings::text_poke_batch_assert_text_held()
        };
        // INVARIANT: The caller guarantees it.
        Self {
            _not_send: core::marker::PhantomData,
        }
    }
}

/// `smp_text_poke_batch_add()`: queues a write, applying the batch first if the write would
/// break its address order or the batch's page is full, as C does.
///
/// A write the INT3 handler could not emulate, or that cannot be stored, is a caller's bug that
/// the caller cannot be told of (ftrace, static calls and kprobes go on as if the text had
/// changed): it panics, which `BUG()`s as upstream does. Nothing on the INT3 path calls this.
///
/// # Safety
///
/// Called with `text_mutex` held; `opcode` and `emulate` (if not null) point to `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn text_poke_batch_add(
    addr: *mut c_void,
    opcode: *const c_void,
    len: usize,
    emulate: *const c_void,
) {
    if len == 0 || len > poke::MAX_INSN {
        bad_poke(addr, len, PokeError::BadLength);
    }
    // SAFETY: The caller guarantees `opcode` points to `len` bytes.
    let text = unsafe { core::slice::from_raw_parts(opcode.cast::<u8>(), len) };
    let emulate = if emulate.is_null() {
        None
    } else {
        // SAFETY: The caller guarantees `emulate` points to `len` bytes.
        Some(unsafe { core::slice::from_raw_parts(emulate.cast::<u8>(), len) })
    };
    match PokeLoc::new(text_base(), addr.addr(), text, emulate) {
        Ok(loc) => {
            let mut applied = Ok(());
            // SAFETY: The caller holds `text_mutex`, and C callers keep no token.
            let mut text = unsafe { TextMutex::assume_held() };
            let added = batch(&mut text).add(text_base(), loc, false, |s, o| {
                applied = applied.and(apply_batch(s, o, false));
            });
            if applied.is_err() || added.is_err() {
                not_applied();
            }
        }
        Err(e) => bad_poke(addr, len, e),
    }
}

/// Stops the kernel for a C caller's batch that was not applied: a page of its text could not
/// be mapped (the batch wrote nothing, and the warning before this names the page), or a write
/// did not land (every site was put back, and the warning before this says so). Its caller
/// cannot be told, and would go on as if the text had changed: ftrace with its records updated,
/// BPF freeing a trampoline the text still jumps to. Upstream's `text_poke()` `BUG()`s there
/// too. Key flips and transactions, which can be told, are refused instead.
#[cold]
fn not_applied() -> ! {
    panic!("text_poke_batch: a batch of text pokes was not applied, and its caller cannot be told");
}

/// Stops the kernel for a write `text_poke_batch_add()` cannot make.
#[cold]
fn bad_poke(addr: *mut c_void, len: usize, why: PokeError) -> ! {
    panic!(
        "text_poke_batch: cannot patch _stext+{:#x} with a {len}-byte write: {why:?}",
        text_offset(addr.addr())
    );
}

/// A static-key site's write at `addr`: its JMP of `len` bytes to `target` if `jump`, else its
/// NOP (see [`PokeLoc::key_site`]).
#[inline(always)]
pub(crate) fn key_site(
    addr: usize,
    target: usize,
    len: usize,
    jump: bool,
) -> Result<PokeLoc, PokeError> {
    PokeLoc::key_site(text_base(), addr, target, len, jump)
}

/// The sites queued.
pub(crate) fn queued(text: &mut TextMutex) -> usize {
    batch(text).len()
}

/// Makes room for `more` sites of a key flip and lets `f` queue them with [`KeySlots::push`],
/// without applying anything; [`PokeError::Full`], `f` not called, if the batch cannot grow
/// that much. May sleep; with `more` 0, allocates nothing and queues nothing. `f` gets the
/// proof that `text_mutex` is held, to read the sites' text with, and nothing that reaches the
/// batch.
pub(crate) fn queue_keys<R>(
    text: &mut TextMutex,
    more: usize,
    f: impl FnOnce(&TextMutex, &mut KeySlots<'_>) -> R,
) -> Result<R, PokeError> {
    // SAFETY: `text_mutex` serialises every user of the batch, and `text`, the token of the
    // task that holds it, is borrowed mutably until we return: no other reference to the batch
    // is made meanwhile, as `batch()` would need the token mutably and `f` only gets it shared.
    let queue = unsafe { &mut *STATE.batch.get() };
    let text = &*text;
    queue.push_keys(text_base(), more, |slots| f(text, slots))
}

/// Forgets the sites queued after the first `len`, which [`queue_keys`] queued.
pub(crate) fn truncate(text: &mut TextMutex, len: usize) {
    batch(text).truncate(len);
}

/// `smp_text_poke_batch_finish()`: applies the batch with the INT3 protocol. Fails, the text
/// as it was, if a page of its text cannot be mapped ([`PokeError::Unmapped`], nothing
/// written), a write did not land ([`PokeError::WriteFailed`], every site put back) or the keys
/// of a transaction queued a site twice ([`PokeError::Twice`], nothing written); all warn.
///
/// `refusable` says that the caller can be told (a key flip or a transaction): only its
/// batches are exposed to fault injection (`fail_text_poke_batch`). Other callers stop the kernel
/// on an error.
pub(crate) fn finish(text: &mut TextMutex, refusable: bool) -> Result<(), PokeError> {
    let mut applied = Ok(());
    let flushed = batch(text).flush(text_base(), |s, o| {
        applied = applied.and(apply_batch(s, o, refusable));
    });
    if flushed.is_err() {
        pr_err!("a site queued twice by a transaction's keys: batch not applied\n");
        kernel::warn_on!(true);
    }
    flushed.and(applied)
}

/// The number of sites queued and not yet applied.
///
/// # Safety
///
/// Called with `text_mutex` held.
#[no_mangle]
pub unsafe extern "C" fn text_poke_batch_pending() -> usize {
    // SAFETY: The caller holds `text_mutex`, and C callers keep no token.
    batch(&mut unsafe { TextMutex::assume_held() }).len()
}

/// `smp_text_poke_batch_finish()` for C callers: what they poked is in place when this returns.
///
/// # Safety
///
/// Called with `text_mutex` held.
#[no_mangle]
pub unsafe extern "C" fn text_poke_batch_finish() {
    // SAFETY: The caller holds `text_mutex`, and C callers keep no token.
    if finish(&mut unsafe { TextMutex::assume_held() }, false).is_err() {
        not_applied();
    }
}

/// Applies `sites`, sorted by address: as one batch or, in `serial` mode, one site at a time
/// (three sync rounds each, as before batching), once every page of them is known to be
/// mappable. Fails with the text as it was: [`PokeError::Unmapped`] if a page cannot be mapped
/// (nothing written), [`PokeError::WriteFailed`] if a write did not land (every site put back,
/// in `serial` mode those applied before too).
fn apply_batch(sites: &[PokeLoc], old: &mut [Slot], refusable: bool) -> Result<(), PokeError> {
    if !measure::serial() || sites.len() < 2 {
        return apply_sites(sites, old, refusable);
    }
    if !poke::mappable(sites, text_base(), &mut KernelText::of(sites, false)) {
        return Err(PokeError::Unmapped);
    }
    for (k, (site, first)) in sites.chunks(1).zip(old.chunks_mut(1)).enumerate() {
        if let Err(e) = apply_sites(site, first, refusable) {
            undo_serial(sites.get(..k).unwrap_or(&[]), old);
            return Err(e);
        }
    }
    Ok(())
}

/// Puts back `sites`, applied one at a time in `serial` mode before a later one failed, as
/// `old` says, a site at a time, last first.
#[cold]
fn undo_serial(sites: &[PokeLoc], old: &[Slot]) {
    for (loc, o) in sites.iter().zip(old).rev() {
        let back = PokeLoc::new(
            text_base(),
            loc.addr(text_base()),
            o.old.get(..loc.len()).unwrap_or(&o.old),
            None,
        );
        let undone = match back {
            Ok(back) => apply_sites(&[back], &mut [Slot::EMPTY], false),
            Err(e) => Err(e),
        };
        if undone.is_err() {
            broken(sites.len());
        }
    }
}

/// Stops the kernel for a batch a write of which did not land, and a write that was to put a
/// site back did not either: sites may hold neither their old nor their new bytes, and
/// nothing can be trusted. Upstream's `text_poke()` `BUG()`s at the first.
#[cold]
fn broken(sites: usize) -> ! {
    panic!("text_poke_batch: a {sites}-site batch could neither be applied nor put back");
}

/// Patches `sites`, sorted by address, with the INT3 protocol. Called with `text_mutex` held,
/// from [`Queue::flush`], which owns the batch while it runs. Fails with
/// [`PokeError::Unmapped`] if a page of the text could not be mapped: nothing was written then
/// (`text_poke_batch_run_mappable()` warned); with [`PokeError::WriteFailed`], warning, if a write
/// did not land: every site was put back then.
fn apply_sites(sites: &[PokeLoc], old: &mut [Slot], refusable: bool) -> Result<(), PokeError> {
    let mut index = ptr::null();
    if sites.len() > INDEX_MIN {
        // SAFETY: Our caller holds `text_mutex`, and no batch is published: nothing else
        // writes the index, and no INT3 handler reads it.
        let built = unsafe { &mut *SCRATCH.index.get() };
        if built.build(sites) {
            index = ptr::from_ref(built);
        }
    }
    // SAFETY: Publishes `sites` and `index`, built for them, which stay live and unchanged
    // until `text_poke_batch_retire()` below, and sets every CPU's reference count, before any
    // INT3 is written; our caller holds `text_mutex`.
    unsafe { bindings::text_poke_batch_publish(sites.as_ptr().cast(), sites.len(), index.cast()) };
    measure::batch_starts(sites.len());

    // SAFETY: Our caller holds `text_mutex`: nothing else uses the runs, and `poke::apply()`
    // keeps them only until it returns.
    let runs = unsafe { &mut *SCRATCH.runs.get() };
    let stats = poke::apply(
        sites,
        old,
        text_base(),
        &mut KernelText::of(sites, refusable),
        runs,
    );
    if stats.outcome == Outcome::Broken {
        broken(sites.len());
    }
    if stats.outcome == Outcome::Undone {
        pr_err!(
            "a write of a {}-site batch did not read back as written: every site put back\n",
            sites.len()
        );
        kernel::warn_on!(true);
    }

    // SAFETY: The last sync is done: no CPU can hit our INT3s any more; waits for handlers,
    // then unpublishes `sites`.
    unsafe { bindings::text_poke_batch_retire() };
    measure::batch_done();
    match stats.outcome {
        Outcome::Applied => Ok(()),
        Outcome::Unmapped => Err(PokeError::Unmapped),
        _ => Err(PokeError::WriteFailed),
    }
}

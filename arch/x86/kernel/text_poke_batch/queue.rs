// SPDX-License-Identifier: GPL-2.0

//! The queue of a batch: `smp_text_poke_batch_add()`'s rules (address order, no address
//! twice, a full page applied first), and the room a key flip's sites are queued in, none
//! applied, until the flip applies them all.

use super::{
    lookup,
    ordered,
    PokeError,
    PokeLoc,
    Slot, //
};
use core::mem::MaybeUninit;

/// Storage for the sites of a batch, and for a [`Slot`] each, for [`apply`](super::apply).
pub trait PokeStorage {
    /// The sites, in the order they were added.
    fn as_mut_slice(&mut self) -> &mut [PokeLoc];
    /// The sites and as many slots, for [`apply`](super::apply).
    fn split(&mut self) -> (&[PokeLoc], &mut [Slot]);
    /// Makes room for one more site; false if the storage is full and, or may not, grow.
    fn reserve_one(&mut self, grow: bool) -> bool;
    /// Makes room for `more` further sites of key flips at once; false if it cannot.
    fn reserve(&mut self, more: usize) -> bool;
    /// Appends `loc`, after [`reserve_one`](Self::reserve_one) or [`reserve`](Self::reserve)
    /// returned true.
    fn push(&mut self, loc: PokeLoc);
    /// Calls `f` with the sites queued and room for `more` further sites after them, made by
    /// [`reserve`](Self::reserve), and appends the first `n` places of that room, `n` being what
    /// `f` returns; false, with nothing appended and `f` not called, if the room is not there.
    /// The room is not initialised: `f` writes each site it appends once, where a placeholder
    /// written first would cost a write a site.
    ///
    /// # Safety
    ///
    /// `f` writes only sites (never an uninitialised value) to the room, and returns an `n` no
    /// larger than the room, its first `n` places written.
    unsafe fn fill(
        &mut self,
        more: usize,
        f: impl FnOnce(&[PokeLoc], &mut [MaybeUninit<PokeLoc>]) -> usize,
    ) -> bool;
    /// Forgets every site from the `len`th on.
    fn truncate(&mut self, len: usize);
    /// Forgets every site.
    fn clear(&mut self);
}

/// Room for a key's run of sites in a [`Queue`], which [`Queue::push_keys`] lends: each site
/// [`push`](Self::push)ed is queued, with the checks of [`Queue::push_key`], and without
/// reaching the storage again for each.
///
/// # Invariants
///
/// The first `n` places of `room` are written, and nothing else is written to it.
pub struct KeySlots<'a> {
    base: usize,
    /// The sites queued before the run.
    queued: &'a [PokeLoc],
    /// The run's room, its first `n` places the sites queued.
    room: &'a mut [MaybeUninit<PokeLoc>],
    n: usize,
    /// The address of the last site queued, if any.
    last: Option<usize>,
    /// The queue's `unsorted`.
    unsorted: bool,
}

impl KeySlots<'_> {
    /// Queues `loc`, or nothing if its address is queued already ([`PokeError::Twice`]) or the
    /// run's room is used up ([`PokeError::Full`]).
    #[inline(always)]
    pub fn push(&mut self, loc: PokeLoc) -> Result<(), PokeError> {
        let addr = loc.addr(self.base);
        // A key's sites come in address order: each after the last one queued, inlined.
        match self.last {
            Some(last) if addr <= last => self.push_back(loc, addr),
            _ => self.put(loc, addr),
        }
    }

    /// [`push`](Self::push) of a site at or below the last one queued: a repeat, or the first
    /// site of a transaction's key whose sites start below the last key's.
    #[cold]
    #[inline(never)]
    fn push_back(&mut self, loc: PokeLoc, addr: usize) -> Result<(), PokeError> {
        // A repeat is the last site queued, or, once the order broke, in the sorted sites
        // (binary search). Once the run is `unsorted`, `Queue::flush()` finds repeats.
        if !self.unsorted
            && (self.last == Some(addr)
                || lookup(self.queued, None, self.base, addr).is_some()
                || lookup(self.run(), None, self.base, addr).is_some())
        {
            return Err(PokeError::Twice);
        }
        self.put(loc, addr)?;
        // Only a key flip appends out of order, and `Queue::flush()` sorts and refuses repeats.
        // (A site at the last address gets here only once the run is unsorted already.)
        self.unsorted = true;
        Ok(())
    }

    /// Writes `loc`, at `addr`, in the next place of the room.
    #[inline(always)]
    fn put(&mut self, loc: PokeLoc, addr: usize) -> Result<(), PokeError> {
        let Some(place) = self.room.get_mut(self.n) else {
            return Err(PokeError::Full);
        };
        place.write(loc);
        // INVARIANT: the place after the first `n` is written, and only it.
        self.n += 1;
        self.last = Some(addr);
        Ok(())
    }

    /// The sites of the run queued so far.
    fn run(&self) -> &[PokeLoc] {
        let n = self.n.min(self.room.len());
        // SAFETY: The first `n` places of `room` are written (type invariant), and
        // `MaybeUninit<PokeLoc>` has `PokeLoc`'s layout.
        unsafe { core::slice::from_raw_parts(self.room.as_ptr().cast::<PokeLoc>(), n) }
    }
}

/// A batch being built: `smp_text_poke_batch_add()`'s rules over some storage.
///
/// Sites are kept in ascending address order, as [`lookup`] needs. A site that would break
/// the order makes the queue apply what it holds first, as C does, except for a key flip,
/// where it is appended and the vector is sorted before it is applied. A site already queued
/// is always applied first, so that no address is queued twice, and so is a full storage that
/// cannot grow: a batch never fails to take a site. Only key flips grow the storage: other
/// batches are applied whenever the storage's first page is full, as in C.
///
/// # Invariants
///
/// Unless `unsorted`, the sites are in ascending address order and no address is queued twice.
/// While `unsorted`, sites queued by [`Queue::push_key`] (the keys of a transaction) may repeat
/// an address: checking each against every site queued would cost O(n) a site, so
/// [`Queue::flush`] finds repeats once it has sorted them, and applies nothing then.
pub struct Queue<S> {
    sites: S,
    unsorted: bool,
}

impl<S: PokeStorage> Queue<S> {
    /// An empty queue over `sites`, which must be empty.
    pub const fn new(sites: S) -> Self {
        Self {
            sites,
            unsorted: false,
        }
    }

    /// The sites queued, in the order they were added.
    pub fn sites(&mut self) -> &mut [PokeLoc] {
        self.sites.as_mut_slice()
    }

    /// Queues `loc`. `key` (a key flip) allows appending out of order and growing the storage.
    /// Calls `apply` on what is queued when it must be applied first; `apply` gets the sites
    /// sorted by address, and a slot each. Fails as [`flush`](Self::flush)
    /// does when what was queued could not be applied; `loc` is queued all the same.
    pub fn add(
        &mut self,
        base: usize,
        loc: PokeLoc,
        key: bool,
        mut apply: impl FnMut(&[PokeLoc], &mut [Slot]),
    ) -> Result<(), PokeError> {
        let addr = loc.addr(base);
        let unsorted = self.unsorted;
        let queued = self.sites.as_mut_slice();
        let in_order = ordered(queued, base, addr);
        let already = if unsorted {
            queued.iter().any(|l| l.addr(base) == addr)
        } else if in_order {
            queued.last().is_some_and(|l| l.addr(base) == addr)
        } else {
            lookup(queued, None, base, addr).is_some()
        };
        let flush = already || (!in_order && !key);
        let mut applied = Ok(());
        if flush || !self.sites.reserve_one(key) {
            applied = self.flush(base, &mut apply);
            if !self.sites.reserve_one(key) {
                // Empty storage with no room at all: apply the site on its own.
                apply(&[loc], &mut [Slot::EMPTY]);
                return applied;
            }
        }
        if !ordered(self.sites.as_mut_slice(), base, addr) {
            // INVARIANT: only a key flip appends out of order, and `flush()` sorts.
            self.unsorted = true;
        }
        self.sites.push(loc);
        applied
    }

    /// Makes room for `more` further sites of key flips, which [`push_key`](Self::push_key)
    /// then queues without applying anything; false if the storage cannot grow that much.
    pub fn reserve_keys(&mut self, more: usize) -> bool {
        self.sites.reserve(more)
    }

    /// Queues `loc`, a site of a key flip, in room made by [`reserve_keys`](Self::reserve_keys):
    /// never applies anything, so that [`truncate`](Self::truncate) can take it back. Queues
    /// nothing if its address is queued already ([`PokeError::Twice`]) or there is no room
    /// ([`PokeError::Full`]). [`push_keys`](Self::push_keys) for a run of one.
    pub fn push_key(&mut self, base: usize, loc: PokeLoc) -> Result<(), PokeError> {
        self.push_keys(base, 1, |slots| slots.push(loc))?
    }

    /// Makes room for `more` further sites of key flips and lets `f` queue up to that many with
    /// [`KeySlots::push`]: a key's run of sites, queued under one borrow of the queue, as
    /// [`push_key`](Self::push_key) queues each. Never applies anything, so that
    /// [`truncate`](Self::truncate) can take the sites back. Returns what `f` returns, or
    /// [`PokeError::Full`], `f` not called, if the storage cannot make the room. With `more` 0,
    /// nothing is allocated, and every push is refused.
    pub fn push_keys<R>(
        &mut self,
        base: usize,
        more: usize,
        f: impl FnOnce(&mut KeySlots<'_>) -> R,
    ) -> Result<R, PokeError> {
        if more > 0 && !self.sites.reserve(more) {
            return Err(PokeError::Full);
        }
        let mut unsorted = self.unsorted;
        let mut ret = None;
        // SAFETY: `KeySlots` writes only sites to the room, and the first `n` of its places
        // (type invariant), `n` no larger than the room, as `put()` checks.
        let filled = unsafe {
            self.sites.fill(more, |queued, room| {
                // INVARIANT: nothing written yet.
                let mut slots = KeySlots {
                    base,
                    last: queued.last().map(|l| l.addr(base)),
                    queued,
                    room,
                    n: 0,
                    unsorted,
                };
                ret = Some(f(&mut slots));
                unsorted = slots.unsorted;
                slots.n
            })
        };
        // INVARIANT: `KeySlots::push()` keeps the queue's rules, `unsorted` included.
        self.unsorted = unsorted;
        match ret {
            Some(ret) if filled => Ok(ret),
            _ => Err(PokeError::Full),
        }
    }

    /// Forgets the sites queued after the first `len`: a key flip refused after some of its
    /// sites were queued with [`push_key`](Self::push_key).
    pub fn truncate(&mut self, len: usize) {
        // INVARIANT: dropping sites keeps the others in order and distinct; `unsorted` may
        // stay set for a queue that is sorted again, which only costs a sort.
        self.sites.truncate(len);
    }

    /// Applies what is queued, sorted by address, with `apply`, and empties the queue. If an
    /// address is queued twice ([`push_key`](Self::push_key) leaves that to this sort), applies
    /// nothing and fails with [`PokeError::Twice`].
    pub fn flush(
        &mut self,
        base: usize,
        mut apply: impl FnMut(&[PokeLoc], &mut [Slot]),
    ) -> Result<(), PokeError> {
        let sites = self.sites.as_mut_slice();
        if sites.is_empty() {
            return Ok(());
        }
        let mut twice = false;
        if self.unsorted {
            sites.sort_unstable_by_key(|l| l.addr(base));
            twice = sites.windows(2).any(|w| w[0].rel_addr == w[1].rel_addr);
        }
        if !twice {
            let (sites, old) = self.sites.split();
            apply(sites, old);
        }
        self.sites.clear();
        self.unsorted = false;
        if twice {
            Err(PokeError::Twice)
        } else {
            Ok(())
        }
    }

    /// The number of sites queued.
    pub fn len(&mut self) -> usize {
        self.sites.as_mut_slice().len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&mut self) -> bool {
        self.len() == 0
    }
}

// SPDX-License-Identifier: GPL-2.0

//! A batch's runs of text pages: the pages its writes fall in, grouped so that one mapping of up
//! to [`RUN_MAX`] pages serves every write of a phase within them ([`next_run`]), the writes
//! handed to the kernel through such a mapping ([`RunWrite`]), each site's write made once for
//! the three phases ([`Slot`], [`Phase`]), and the runs a batch finds once for all its passes
//! ([`Runs`]).
//!
//! A part of `poke`, pure as it is: the host tests build it too.

use super::{
    OldInsn,
    PokeLoc,
    INT3,
    MAX_INSN, //
};

/// The size of a page of text.
pub const PAGE_SIZE: usize = 4096;

/// The most pages one mapping of a run holds.
pub const RUN_MAX: usize = 64;

/// Sites handed to [`TextOps::write_sites`](super::TextOps::write_sites) at once. The kernel
/// makes them with interrupts off and lets interrupts in between chunks: enough writes that the
/// switches to and from the poking mm around each chunk cost little next to them, few enough
/// that a chunk is about as long as the one write of `text_poke()`.
pub const RUN_CHUNK: usize = 64;

/// A write through a mapped run: [`len`](Self::len) bytes of `bytes` at offset `at` from the
/// start of the run's mapping, read back at the text's own address, `rel` from the base offsets
/// are stored from. The layout of C's `struct text_poke_batch_write`.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RunWrite {
    /// Where, from the start of the run's first page.
    pub at: u32,
    /// Where the write lies in the text, from the base (`_stext`): where it is read back.
    pub rel: i32,
    /// What, in the first [`len`](Self::len) bytes, and how many, in the last: 1 to
    /// [`MAX_INSN`](super::MAX_INSN).
    pub bytes: [u8; 8],
}

impl RunWrite {
    /// A placeholder for a buffer of writes.
    pub const EMPTY: Self = Self {
        at: 0,
        rel: 0,
        bytes: [0; 8],
    };

    /// How many bytes of `bytes`.
    pub fn len(&self) -> usize {
        usize::from(self.bytes[7])
    }

    /// Whether the write has no bytes (which the C side refuses).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A phase of the INT3 protocol: what [`apply`](super::apply) writes of each site's whole new
/// instruction ([`Slot::write`]) in it, as a [`Piece`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Phase {
    /// INT3 over the first byte.
    Int3 = 0,
    /// Every byte but the first: nothing for a one-byte instruction.
    Tail = 1,
    /// The first byte.
    First = 2,
}

impl Phase {
    /// What this phase writes of each site's instruction.
    #[inline(always)]
    pub const fn piece(self) -> Piece {
        match self {
            Self::Int3 => Piece {
                from: 0,
                to: 1,
                fill: Some(INT3),
            },
            Self::Tail => Piece {
                from: 1,
                to: MAX_INSN as u8,
                fill: None,
            },
            Self::First => Piece {
                from: 0,
                to: 1,
                fill: None,
            },
        }
    }
}

/// A piece of each site's instruction ([`Slot::write`]): its bytes `from..to`, those it has, or,
/// with a `fill`, that byte in their place. What C's `text_poke_batch_run_sites()` is told to
/// write at each site, and all it knows of the protocol.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Piece {
    /// The first byte written.
    pub from: u8,
    /// The byte after the last, or past the instruction's end for all the rest of it.
    pub to: u8,
    /// The byte written instead of each of the instruction's own, if any.
    pub fill: Option<u8>,
}

impl Piece {
    /// Where the piece of `w`, a site's whole instruction, starts in it, and its bytes: those
    /// of `w`, or of `filled`, which holds `fill` in every byte. `None` if the instruction has
    /// no byte in the piece.
    #[inline(always)]
    pub fn of<'a>(self, w: &'a RunWrite, filled: &'a [u8; 8]) -> Option<(usize, &'a [u8])> {
        let from = usize::from(self.from);
        let to = w.len().min(usize::from(self.to));
        let bytes = match self.fill {
            Some(_) => filled.get(from..to),
            None => w.bytes.get(from..to),
        };
        bytes.filter(|b| !b.is_empty()).map(|b| (from, b))
    }

    /// `fill` in every byte of a piece, for [`Piece::of`].
    #[inline(always)]
    pub fn filled(self) -> [u8; 8] {
        [self.fill.unwrap_or(0); 8]
    }

    /// Whether `w`, a site's whole instruction, has a byte in the piece.
    #[inline(always)]
    pub fn has(self, w: &RunWrite) -> bool {
        w.len().min(usize::from(self.to)) > usize::from(self.from)
    }

    /// The piece of `w`, a site's whole instruction, as a write of its own: the write C's
    /// `text_poke_batch_run_sites()` makes. `None` if the instruction has no byte in the piece.
    pub fn write(self, w: &RunWrite) -> Option<RunWrite> {
        let filled = self.filled();
        let (from, piece) = self.of(w, &filled)?;
        let mut bytes = [0u8; 8];
        for (d, s) in bytes.iter_mut().zip(piece) {
            *d = *s;
        }
        bytes[7] = piece.len() as u8;
        Some(RunWrite {
            at: w.at.wrapping_add(from as u32),
            rel: w.rel.wrapping_add(from as i32),
            bytes,
        })
    }
}

/// What [`apply`](super::apply) keeps of each site of the batch it applies, in room made with
/// the site: the bytes the site held before, for the reports and the way back, and its new
/// instruction as one write through the mapping of its run, made once in phase 1 for the three
/// phases, which [`TextOps::write_sites`](super::TextOps::write_sites) makes of it. The layout
/// of C's `struct text_poke_batch_site`.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Slot {
    /// The site's new instruction, whole, at its place in the mapping of its run: made when the
    /// batch is written a run at a time.
    pub write: RunWrite,
    /// Its bytes before the batch: the first [`PokeLoc::len`].
    pub old: OldInsn,
}

impl Slot {
    /// A placeholder for preallocated storage.
    pub const EMPTY: Self = Self {
        write: RunWrite::EMPTY,
        old: [0; MAX_INSN],
    };
}

/// The run of pages that starts with site `start` of `vec` (sorted by address): the sites
/// `start..end` and the pages their bytes lie in, ascending, each once, in `pages[..n]`;
/// returns `(end, n)`. A run holds at most `pages.len()` pages (at least 2) and every page of
/// each of its sites: a site that would not fit starts the next run. Every phase of a batch
/// writes within the bytes of its sites, so the runs serve all three. `n` is 0 only when no
/// site is left (`end` is then `vec.len()`).
pub fn next_run(vec: &[PokeLoc], base: usize, start: usize, pages: &mut [usize]) -> (usize, usize) {
    let max = pages.len();
    let Some(rest) = vec.get(start..) else {
        return (vec.len(), 0);
    };
    let mut n = 0;
    // The run's last page; no site lies below it.
    let mut top = 0;
    // Wrapping arithmetic in this loop, which every phase of a batch runs over every site: no
    // overflow checks (`k` is below `rest.len()`, a site's length at least 1).
    let mut k = 0usize;
    while let Some(loc) = rest.get(k) {
        let addr = loc.addr(base);
        let last = addr.wrapping_add(loc.len().wrapping_sub(1)) & !(PAGE_SIZE - 1);
        // Most sites lie in the last page of the run already.
        if n > 0 && last <= top {
            k = k.wrapping_add(1);
            continue;
        }
        // Pages of this site not in the run yet: sites come in address order, so only pages
        // after the run's last can be new.
        let first = addr & !(PAGE_SIZE - 1);
        let new_first = if n == 0 {
            first
        } else {
            first.max(top.wrapping_add(PAGE_SIZE))
        };
        let new = last.wrapping_sub(new_first) / PAGE_SIZE + 1;
        if n > 0 && n + new > max {
            return (start + k, n);
        }
        let mut page = new_first;
        while page <= last {
            let Some(slot) = pages.get_mut(n) else {
                // A site of more pages than a run holds: cannot happen, writes are 6 bytes
                // at most and runs 2 pages at least.
                return (start + k + 1, n);
            };
            *slot = page;
            n += 1;
            top = page;
            page = page.wrapping_add(PAGE_SIZE);
        }
        k = k.wrapping_add(1);
    }
    (vec.len(), n)
}

/// Runs of pages a batch keeps for its passes: its first runs, found once.
pub const RUNS_KEPT: usize = 16;

/// Scratch a batch's caller keeps for [`apply`](super::apply): the batch's runs of pages, and
/// room for a run found again beyond them, which would otherwise be cleared on the stack for
/// every phase.
pub struct Runs {
    pub(super) found: Found,
    pub(super) spare: [usize; RUN_MAX],
}

impl Runs {
    /// No runs.
    pub const EMPTY: Self = Self {
        found: Found::EMPTY,
        spare: [0; RUN_MAX],
    };
}

/// The runs of pages of a batch ([`next_run`]), found once for the passes that write or check
/// its text (the check that every page can be mapped, the three write phases, and the way back
/// of `undo()`) rather than by each: up to [`RUNS_KEPT`] runs, [`RUNS_KEPT`] * [`RUN_MAX`]
/// pages, which the passes find again beyond them. As large as the sites it saves a walk over.
///
/// # Invariants
///
/// `kept <= RUNS_KEPT`; for `r < kept`, run `r` is the sites `ends[r - 1]..ends[r]` (from 0 for
/// the first) and the pages `pages[r][..counts[r]]`, as [`next_run`] found them for the batch
/// [`Found::find`] was last given.
pub(super) struct Found {
    kept: usize,
    ends: [usize; RUNS_KEPT],
    counts: [usize; RUNS_KEPT],
    pages: [[usize; RUN_MAX]; RUNS_KEPT],
}

impl Found {
    /// No runs.
    const EMPTY: Self = Self {
        kept: 0,
        ends: [0; RUNS_KEPT],
        counts: [0; RUNS_KEPT],
        pages: [[0; RUN_MAX]; RUNS_KEPT],
    };

    /// Finds the first runs of `vec` (sorted by address) of at most `max` pages each (2 to
    /// [`RUN_MAX`]).
    pub(super) fn find(&mut self, vec: &[PokeLoc], base: usize, max: usize) {
        self.kept = 0;
        let mut start = 0;
        for r in 0..RUNS_KEPT {
            if start >= vec.len() {
                break;
            }
            let (Some(pages), Some(end), Some(count)) = (
                self.pages.get_mut(r),
                self.ends.get_mut(r),
                self.counts.get_mut(r),
            ) else {
                break;
            };
            let (e, n) = next_run(vec, base, start, &mut pages[..max.min(RUN_MAX)]);
            (*end, *count) = (e, n);
            self.kept = r + 1;
            start = e;
        }
    }

    /// Run `r` of the batch, which starts at site `start`: `(end, pages)` as [`next_run`] finds
    /// them, kept in `runs`, or found in `spare` with runs of at most `max` pages.
    #[inline(always)]
    pub(super) fn get<'a>(
        runs: &'a Self,
        r: usize,
        vec: &[PokeLoc],
        base: usize,
        start: usize,
        max: usize,
        spare: &'a mut [usize; RUN_MAX],
    ) -> (usize, &'a [usize]) {
        if r < runs.kept {
            if let (Some(&end), Some(&n), Some(pages)) =
                (runs.ends.get(r), runs.counts.get(r), runs.pages.get(r))
            {
                return (end, pages.get(..n).unwrap_or(&[]));
            }
        }
        let (end, n) = next_run(vec, base, start, &mut spare[..max.min(RUN_MAX)]);
        (end, spare.get(..n).unwrap_or(&[]))
    }
}

// SPDX-License-Identifier: GPL-2.0

//! The text-poke batch: pending instruction writes, sorted by address, applied to live text
//! with the INT3 protocol.
//!
//! A batch is a vector of [`PokeLoc`]s in ascending address order. [`apply`] patches them all
//! at once:
//!
//! 1. write INT3 over the first byte of every site, then sync every CPU;
//! 2. write every site's remaining bytes, then sync if any were written;
//! 3. write every site's first byte, then sync if any were written.
//!
//! Between the first and the last sync a CPU may execute an INT3 at a site; the INT3 handler
//! finds the site with [`lookup`], a binary search of the vector, and emulates the new
//! instruction as [`PokeLoc::emulation`] says.
//!
//! This module uses only `core`: the host tests build it as it is. The INT3 path ([`lookup`],
//! [`PokeLoc::emulation`]) is in `int3.rs`, which the INT3 handler's crate builds too: nothing
//! there allocates, calls out or can panic.
//!
//! C reference: `smp_text_poke_batch_finish()` in
//! [`arch/x86/kernel/alternative.c`](srctree/arch/x86/kernel/alternative.c).

pub use crate::x86::{
    CALL,
    ESCAPE,
    INT3,
    JMP32,
    JMP8,
    RET, //
};
use crate::x86::{
    NOP2,
    NOP5, //
};

#[path = "int3.rs"]
mod int3;
use int3::ESCAPED;
pub use int3::{
    condition,
    lookup,
    Emulation,
    Index,
    PokeLoc,
    INDEX_MAX, //
};

#[path = "runs.rs"]
mod runs;
use runs::Found;
pub use runs::{
    next_run,
    Phase,
    RunWrite,
    Runs,
    Slot,
    PAGE_SIZE,
    RUNS_KEPT,
    RUN_CHUNK,
    RUN_MAX, //
};

use core::mem::MaybeUninit;

/// The longest instruction a batch patches: `Jcc rel32`.
pub const MAX_INSN: usize = 6;

/// Why an instruction cannot be added to a batch.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PokeError {
    /// The length is not 1 to [`MAX_INSN`] bytes.
    BadLength,
    /// The instruction to emulate is not one the INT3 handler can emulate.
    Unsupported,
    /// The instruction is shorter than the write and the rest is not INT3 padding.
    BadPadding,
    /// The address is too far from the base to be stored.
    OutOfRange,
    /// A write to the address is queued already.
    Twice,
    /// The batch has no room for the write.
    Full,
    /// A page of the batch's text cannot be mapped: nothing was written.
    Unmapped,
    /// A write did not read back as written: every site was put back as it was.
    WriteFailed,
}

/// The bytes a site held before a batch was applied: its first [`PokeLoc::len`] bytes, kept
/// so that a batch a write of which fails can put every site back.
pub type OldInsn = [u8; MAX_INSN];

/// Reads the little-endian `i32` at `b[at..at + 4]`, or `None` if `b` is too short.
#[inline(always)]
fn rel32(b: &[u8], at: usize) -> Option<i32> {
    match b.get(at..at + 4) {
        Some(&[b0, b1, b2, b3]) => Some(i32::from_le_bytes([b0, b1, b2, b3])),
        _ => None,
    }
}

impl PokeLoc {
    /// A placeholder for preallocated storage: an INT3 at the base, never applied.
    pub const EMPTY: Self = Self {
        rel_addr: 0,
        disp: 0,
        len: 1,
        opcode: INT3,
        text: [INT3, 0, 0, 0, 0],
        form: 1,
    };

    /// Describes writing `text` at `addr`, emulated as `emulate` (or as `text` itself) while
    /// the write is in progress: `__smp_text_poke_batch_add()`.
    ///
    /// `base` is the address offsets are stored from (`_stext` in the kernel). Errors instead of
    /// C's `BUG_ON()` for an instruction the INT3 handler could not emulate.
    pub fn new(
        base: usize,
        addr: usize,
        text: &[u8],
        emulate: Option<&[u8]>,
    ) -> Result<Self, PokeError> {
        let len = text.len();
        if len == 0 || len > MAX_INSN {
            return Err(PokeError::BadLength);
        }
        let rel_addr =
            i32::try_from(addr.wrapping_sub(base) as isize).map_err(|_| PokeError::OutOfRange)?;
        let emulate = emulate.unwrap_or(text);

        // Decode the instruction to emulate: opcode, length and displacement.
        let (opcode, insn_len, disp) = match emulate {
            [INT3, ..] => (INT3, 1, 0),
            [RET, ..] => (RET, 1, 0),
            [CALL, ..] => (CALL, 5, rel32(emulate, 1).ok_or(PokeError::BadLength)?),
            [JMP32, ..] => (JMP32, 5, rel32(emulate, 1).ok_or(PokeError::BadLength)?),
            [JMP8, d, ..] => (JMP8, 2, i32::from(*d as i8)),
            [op @ 0x70..=0x7f, d, ..] => (*op, 2, i32::from(*d as i8)),
            [ESCAPE, op @ 0x80..=0x8f, ..] => (
                *op - 0x10,
                6,
                rel32(emulate, 2).ok_or(PokeError::BadLength)?,
            ),
            // A NOP is emulated as a jump to the next instruction.
            _ if len == 2 && emulate.get(..2) == Some(&NOP2[..]) => (JMP8, 2, 0),
            _ if len == 5 && emulate.get(..5) == Some(&NOP5[..]) => (JMP32, 5, 0),
            _ => return Err(PokeError::Unsupported),
        };
        match opcode {
            // Control flow that never falls through may be padded with INT3.
            RET | JMP32 | JMP8 => {
                if insn_len > len
                    || text
                        .get(insn_len..)
                        .is_some_and(|p| p.iter().any(|&b| b != INT3))
                {
                    return Err(PokeError::BadPadding);
                }
            }
            _ if insn_len != len => return Err(PokeError::BadLength),
            _ => {}
        }

        // Six bytes in five: a `Jcc rel32` without its escape, or an instruction without the
        // INT3 that pads it; anything else cannot be stored.
        let escaped = len == 6 && text.first() == Some(&ESCAPE);
        if len == 6 && !escaped && text.get(5) != Some(&INT3) {
            return Err(PokeError::Unsupported);
        }
        let mut stored = [0u8; 5];
        for (d, s) in stored
            .iter_mut()
            .zip(text.iter().skip(usize::from(escaped)))
        {
            *d = *s;
        }
        // INVARIANT: `len` is 1 to `MAX_INSN` and `opcode` is one of the listed ones;
        // `insn_len` is 1 to 6 and, checked above, no longer than `len`; the escape is only
        // left out of a 6-byte write, whose last byte is INT3 otherwise (checked above).
        Ok(Self {
            rel_addr,
            disp,
            len: len as u8,
            opcode,
            text: stored,
            form: insn_len as u8 | if escaped { ESCAPED } else { 0 },
        })
    }

    /// Describes writing a static-key site of `len` bytes (2 or 5) at `addr`: the JMP to
    /// `target` if `jump`, else the NOP, as [`new`](Self::new) describes those bytes, made
    /// without building them and decoding them again: the write of each site of a key flip.
    /// [`PokeError::OutOfRange`] for a target the JMP cannot reach, [`PokeError::BadLength`]
    /// for another length.
    #[inline(always)]
    pub fn key_site(
        base: usize,
        addr: usize,
        target: usize,
        len: usize,
        jump: bool,
    ) -> Result<Self, PokeError> {
        let rel_addr =
            i32::try_from(addr.wrapping_sub(base) as isize).map_err(|_| PokeError::OutOfRange)?;
        let disp = (target as i64).wrapping_sub(addr.wrapping_add(len) as i64);
        // The fields after `disp` as one word, `len`, `opcode`, `text` and `form` from its low
        // byte up: one value, where eight bytes would each be chosen apart.
        let tail = |len: u8, opcode: u8, text: [u8; 5]| {
            let [t0, t1, t2, t3, t4] = text;
            u64::from_le_bytes([len, opcode, t0, t1, t2, t3, t4, len])
        };
        let (disp, tail) = match (len, jump) {
            (2, false) => (0, tail(2, JMP8, [NOP2[0], NOP2[1], 0, 0, 0])),
            (5, false) => (0, tail(5, JMP32, NOP5)),
            (2, true) => {
                let d = i8::try_from(disp).map_err(|_| PokeError::OutOfRange)?;
                (i32::from(d), tail(2, JMP8, [JMP8, d as u8, 0, 0, 0]))
            }
            (5, true) => {
                let d = i32::try_from(disp).map_err(|_| PokeError::OutOfRange)?;
                let [d0, d1, d2, d3] = d.to_le_bytes();
                (d, tail(5, JMP32, [JMP32, d0, d1, d2, d3]))
            }
            _ => return Err(PokeError::BadLength),
        };
        let [len, opcode, t0, t1, t2, t3, t4, form] = tail.to_le_bytes();
        // INVARIANT: `len` is 2 or 5, `opcode` a JMP of that length (a NOP is emulated as the
        // JMP to the next instruction), as matched above, and `form` the length too; no escape,
        // and the bytes past the write cleared.
        Ok(Self {
            rel_addr,
            disp,
            len,
            opcode,
            text: [t0, t1, t2, t3, t4],
            form,
        })
    }

    /// The size of the write.
    #[inline(always)]
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// Always false: a poke writes at least one byte. For symmetry with [`len`](Self::len).
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The bytes to write, `len()` of them.
    #[inline]
    pub fn new_bytes(&self) -> ([u8; MAX_INSN], usize) {
        // Byte by byte, as [`run_bytes`](Self::run_bytes) builds a word: for a write of its
        // own, this costs less than the word taken apart again.
        let mut out = [0u8; MAX_INSN];
        if self.form & ESCAPED != 0 {
            out[0] = ESCAPE;
            out[1..].copy_from_slice(&self.text);
        } else {
            out[..5].copy_from_slice(&self.text);
            // A 6-byte write without the escape: an instruction padded with INT3 (type
            // invariant).
            out[5] = INT3;
        }
        (out, self.len())
    }

    /// The bytes to write but the first: `len() - 1` of them, as a phase of [`apply`] writes
    /// them, or `None` for a one-byte write.
    #[inline(always)]
    pub fn tail(&self) -> Option<Piece> {
        if self.len < 2 {
            return None;
        }
        // As one word, without building the whole write first: the bytes of `text` past the
        // write are zero (type invariant), as `Piece`'s past its `len` must be.
        let [t0, t1, t2, t3, t4] = self.text;
        let bytes = if self.form & ESCAPED != 0 {
            // The write is the escape, then all of `text`.
            [t0, t1, t2, t3, t4, 0, 0, 0]
        } else {
            // A 6-byte write without the escape ends with the INT3 `text` leaves out.
            let pad = if self.len == 6 { INT3 } else { 0 };
            [t1, t2, t3, t4, pad, 0, 0, 0]
        };
        Some(Piece {
            skip: 1,
            len: usize::from(self.len) - 1,
            bytes,
        })
    }

    /// The bytes to write as a [`RunWrite`] holds them: the first [`len`](Self::len) of them,
    /// and how many in the last; what lies between is not written.
    #[inline(always)]
    pub fn run_bytes(&self) -> [u8; 8] {
        // As one word: a site's bytes are built, and stored, at once.
        let [t0, t1, t2, t3, t4] = self.text;
        let text = u64::from_le_bytes([t0, t1, t2, t3, t4, 0, 0, 0]);
        let len = u64::from(self.len) << 56;
        let word = if self.form & ESCAPED != 0 {
            u64::from(ESCAPE) | (text << 8) | len
        } else {
            // A 6-byte write without the escape ends with the INT3 `text` leaves out (type
            // invariant); a shorter one ends before it.
            text | (u64::from(INT3) << 40) | len
        };
        word.to_le_bytes()
    }

    /// The first byte to write.
    #[inline]
    pub fn first_byte(&self) -> u8 {
        if self.form & ESCAPED != 0 {
            ESCAPE
        } else {
            self.text[0]
        }
    }
}

/// Whether a site at `addr` may be appended to `vec` without breaking its order: the batch must
/// be flushed first otherwise (`text_poke_addr_ordered()`).
///
/// Equal addresses are allowed, as in C, although a batch should not write one site twice.
#[inline]
pub fn ordered(vec: &[PokeLoc], base: usize, addr: usize) -> bool {
    match vec.last() {
        Some(last) => last.addr(base) <= addr,
        None => true,
    }
}

/// The machine a batch is applied to.
///
/// Text is written either one write at a time ([`TextOps::write`], `text_poke()`: a temporary
/// mapping of the write's page or two for each write), or a run of pages at a time: one
/// mapping of up to [`TextOps::run_pages`] pages ([`TextOps::map_run`]), every write of the
/// phase that falls in them ([`TextOps::write_sites`] or [`TextOps::write_run`], a chunk of
/// writes at a time), then the mapping undone ([`TextOps::unmap_run`]).
pub trait TextOps {
    /// Reads `buf.len()` bytes of text at `addr`.
    fn read(&mut self, addr: usize, buf: &mut [u8]);
    /// Writes `bytes` to text at `addr`: `text_poke()`. False if they do not read back as
    /// written through `addr` afterwards.
    fn write(&mut self, addr: usize, bytes: &[u8]) -> bool;
    /// Serialises every CPU's instruction stream: one IPI round.
    fn sync(&mut self);
    /// Reports a completed rewrite of `old` into `new` at `addr` (`perf_event_text_poke()`).
    fn poked(&mut self, _addr: usize, _old: &[u8], _new: &[u8]) {}
    /// Whether [`TextOps::poked`] records anything now: asked once per batch, which skips
    /// building the reports when it does not.
    fn reports(&mut self) -> bool {
        true
    }
    /// The most pages [`TextOps::map_run`] maps at once (at most [`RUN_MAX`]); below 2, text
    /// is written one write at a time.
    fn run_pages(&self) -> usize {
        0
    }
    /// Whether every text page at `pages` (page addresses, ascending, each once) can be mapped
    /// for writing: asked of every page of a batch before any byte of it is written.
    fn mappable(&mut self, _pages: &[usize]) -> bool {
        true
    }
    /// Maps the text pages at `pages` (page addresses, ascending, each once) at consecutive
    /// addresses, for [`TextOps::write_run`]. False if a page cannot be mapped: nothing is
    /// mapped then, and the run's writes go through [`TextOps::write`].
    fn map_run(&mut self, _pages: &[usize]) -> bool {
        false
    }
    /// Makes `writes` through the run mapped, in order, each read back through the text's own
    /// address (not the run's, which would not catch a wrong page): returns how many did not
    /// read back as written or, not written at all, do not lie within the run.
    fn write_run(&mut self, writes: &[RunWrite]) -> u32 {
        writes.len() as u32
    }
    /// Makes the writes of phase `phase` at `sites` (at most [`RUN_CHUNK`]) through the run
    /// mapped, in order, from each site's whole new instruction ([`Slot::write`]) as
    /// [`Phase::write`] says, a site without one skipped, each read back as
    /// [`TextOps::write_run`] reads its writes back: returns how many did not read back as
    /// written or do not lie within the run. As [`TextOps::write_run`] by default.
    fn write_sites(&mut self, phase: Phase, sites: &[Slot]) -> u32 {
        sites
            .iter()
            .filter_map(|s| phase.write(&s.write))
            .map(|w| self.write_run(&[w]))
            .sum()
    }
    /// Undoes [`TextOps::map_run`].
    fn unmap_run(&mut self) {}
    /// A write of the batch did not land, and [`undo`] starts to put every site back: a
    /// failure injected on purpose (fault injection) must not reach the way back, whose own
    /// failure stops the kernel.
    fn undoing(&mut self) {}
}

/// How [`apply`] left the text.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub enum Outcome {
    /// Every site holds its new bytes.
    #[default]
    Applied,
    /// A page of the batch cannot be mapped ([`TextOps::mappable`]): nothing was written.
    Unmapped,
    /// A write did not read back as written: every site was put back as it was, with the
    /// INT3 protocol, and holds its old bytes.
    Undone,
    /// A write did not read back as written, nor did one that put a site back: sites may hold
    /// neither their old nor their new bytes. Nothing can be trusted: upstream `BUG()`s.
    Broken,
}

/// What [`apply`] did.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct ApplyStats {
    /// Sync rounds: 1 to 3 for a non-empty batch.
    pub syncs: u32,
    /// Sites patched.
    pub sites: u32,
    /// Runs of pages mapped ([`TextOps::map_run`]).
    pub runs: u32,
    /// Writes that did not read back as written, those that put sites back included.
    pub wrong: u32,
    /// How the text was left.
    pub outcome: Outcome,
}

/// What a phase of [`apply`] writes at a site: `len` bytes of `bytes`, `skip` bytes into it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Piece {
    /// Bytes of the site before the write: 0 or 1.
    pub skip: usize,
    /// How many bytes.
    pub len: usize,
    /// What, in the first `len` bytes.
    pub bytes: [u8; 8],
}

impl Piece {
    /// `len` bytes of `src` from `skip`.
    #[inline(always)]
    fn of(src: &[u8], skip: usize, len: usize) -> Self {
        let mut bytes = [0u8; 8];
        for (d, s) in bytes.iter_mut().zip(src.iter().skip(skip).take(len)) {
            *d = *s;
        }
        Self { skip, len, bytes }
    }

    /// The bytes to write.
    #[inline(always)]
    pub fn bytes(&self) -> &[u8] {
        &self.bytes[..self.len.min(8)]
    }
}

/// Writes what `piece` says for each site of `vec`, given the site and its slot in `old`,
/// in address order: a run of pages at a time if `ops` maps runs, else one at a time (a run of
/// a single write, too: one write costs less through [`TextOps::write`]). Returns the writes,
/// the runs mapped and the writes that did not read back as written.
#[inline(always)]
fn write_phase(
    ops: &mut impl TextOps,
    vec: &[PokeLoc],
    old: &[Slot],
    base: usize,
    scratch: Option<&mut Runs>,
    piece: impl Fn(&PokeLoc, &Slot) -> Option<Piece>,
) -> (u32, u32, u32) {
    let (mut writes, mut runs, mut wrong) = (0, 0, 0);
    let (mut own_spare, mut own_buf) = (None, None);
    let (kept, spare, buf) = match scratch {
        Some(Runs { found, spare, buf }) => (Some(&*found), spare, buf),
        None => (
            None,
            own_spare.insert([0usize; RUN_MAX]),
            own_buf.insert([RunWrite::EMPTY; RUN_CHUNK]),
        ),
    };
    let max = ops.run_pages().min(RUN_MAX);
    let mut start = 0;
    let mut r = 0;
    while start < vec.len() {
        let (end, run) = if max >= 2 {
            Found::get(kept, r, vec, base, start, max, spare)
        } else {
            (vec.len(), &[][..])
        };
        r += 1;
        let n = run.len();
        let sites = vec.get(start..end).unwrap_or(&[]);
        let olds = old.get(start..end).unwrap_or(&[]);
        if n > 0
            && sites
                .iter()
                .zip(olds)
                .filter_map(|(l, o)| piece(l, o))
                .nth(1)
                .is_some()
            && ops.map_run(run)
        {
            runs += 1;
            let mut k = 0;
            // The sites and the pages are in address order: each write's first page is the
            // previous one's, or later. Writes in the page of `slot` are at `addr + delta` in
            // the run's mapping, up to `limit`.
            let mut slot = 0;
            let (mut delta, mut limit) = (0usize, 0usize);
            if let Some(&p) = run.first() {
                (delta, limit) = (p.wrapping_neg(), p.wrapping_add(PAGE_SIZE));
            }
            for (loc, o) in sites.iter().zip(olds) {
                let Some(p) = piece(loc, o) else { continue };
                let addr = loc.addr(base).wrapping_add(p.skip);
                while addr >= limit {
                    let Some(&page) = run.get(slot + 1) else {
                        break;
                    };
                    slot += 1;
                    delta = (slot * PAGE_SIZE).wrapping_sub(page);
                    limit = page.wrapping_add(PAGE_SIZE);
                }
                let Some(w) = buf.get_mut(k) else { break };
                // A write outside the run (which cannot happen) gets an offset the C side
                // refuses. A write is `MAX_INSN` bytes at most: the last byte says how many.
                let mut bytes = p.bytes;
                bytes[7] = p.len as u8;
                *w = RunWrite {
                    at: addr.wrapping_add(delta) as u32,
                    rel: loc.rel_addr.wrapping_add(p.skip as i32),
                    bytes,
                };
                k += 1;
                writes = u32::wrapping_add(writes, 1);
                if k == RUN_CHUNK {
                    wrong += ops.write_run(buf);
                    k = 0;
                }
            }
            if k > 0 {
                wrong += ops.write_run(&buf[..k]);
            }
            ops.unmap_run();
        } else {
            for (loc, o) in sites.iter().zip(olds) {
                let Some(p) = piece(loc, o) else { continue };
                wrong += u32::from(!ops.write(loc.addr(base) + p.skip, p.bytes()));
                writes += 1;
            }
        }
        start = end;
    }
    (writes, runs, wrong)
}

/// Keeps the old bytes of `loc` but the first, still in place before its tail is written, in
/// `old`, whose first byte is the one the site held before its INT3; and, if `reports`, reports
/// the rewrite to [`TextOps::poked`]: the same report as after the write, which would find them
/// overwritten.
#[inline(always)]
fn report(ops: &mut impl TextOps, loc: &PokeLoc, old: &mut OldInsn, base: usize, reports: bool) {
    let addr = loc.addr(base);
    let len = loc.len();
    if len > 1 {
        ops.read(addr + 1, &mut old[1..len]);
    }
    if reports {
        let (new, _) = loc.new_bytes();
        ops.poked(addr, &old[..len], &new[..len]);
    }
}

/// How far a batch got when a write of it failed: what [`undo`] takes back; from phase 2 on,
/// whether the batch reported its rewrite (and must report the way back).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Reached {
    /// Phase 1: INT3s at some sites, every other byte old.
    Int3s,
    /// Phase 2: INT3 at every site, some tails new.
    Tails { reports: bool },
    /// Phase 3: every tail new, some first bytes new.
    Firsts { reports: bool },
}

/// Puts every site of `vec` back as `old` says after a write of phase `reached` failed: the
/// INT3 protocol again, towards the old bytes, from where the batch got. INT3 at every site
/// and a sync (from phase 3), every old tail and a sync (from phase 2), every old first byte
/// and a sync: no CPU runs a torn instruction meanwhile, and none still runs an INT3 of the
/// batch when its caller retires the vector. The way back is a rewrite too: if the way there
/// was reported, it is reported to [`TextOps::poked`] as that was, before the tails change.
///
/// Sets the outcome: [`Outcome::Undone`], or [`Outcome::Broken`] if a write of the way back
/// fails too. That stops it at once, without a sync: its next phase would write under sites
/// that may not hold what the protocol needs (an old tail under a site whose INT3 did not
/// land), and the caller must stop the kernel with the vector still published.
#[cold]
#[inline(never)]
fn undo<O: TextOps>(
    vec: &[PokeLoc],
    old: &[Slot],
    base: usize,
    ops: &mut O,
    mut scratch: Option<&mut Runs>,
    reached: Reached,
    stats: &mut ApplyStats,
) {
    let mut phase = |ops: &mut O, piece: &dyn Fn(&PokeLoc, &Slot) -> Option<Piece>| {
        let (_, runs, wrong) = write_phase(ops, vec, old, base, scratch.as_deref_mut(), piece);
        stats.runs += runs;
        stats.wrong += wrong;
        if wrong > 0 {
            return false;
        }
        ops.sync();
        stats.syncs += 1;
        true
    };
    ops.undoing();
    stats.outcome = Outcome::Broken;
    if matches!(reached, Reached::Firsts { .. })
        && !phase(ops, &|_, _| Some(Piece::of(&[INT3], 0, 1)))
    {
        return;
    }
    if let Reached::Tails { reports } | Reached::Firsts { reports } = reached {
        if reports {
            for (loc, o) in vec.iter().zip(old) {
                let (new, len) = loc.new_bytes();
                ops.poked(loc.addr(base), &new[..len], &o.old[..len]);
            }
        }
        if !phase(ops, &|l, o| {
            (l.len() > 1).then(|| Piece::of(&o.old, 1, l.len() - 1))
        }) {
            return;
        }
    }
    if phase(ops, &|_, o| Some(Piece::of(&o.old, 0, 1))) {
        stats.outcome = Outcome::Undone;
    }
}

/// Patches every site of `vec` with the INT3 protocol, one write at a time: for one site, and
/// for text that is not written in runs. See [`apply`].
fn apply_each(
    vec: &[PokeLoc],
    old: &mut [Slot],
    base: usize,
    ops: &mut impl TextOps,
) -> ApplyStats {
    let mut stats = ApplyStats::default();

    // 1. INT3 at every site.
    let mut wrong = 0;
    for (loc, o) in vec.iter().zip(old.iter_mut()) {
        ops.read(loc.addr(base), &mut o.old[..1]);
        wrong += u32::from(!ops.write(loc.addr(base), &[INT3]));
    }
    if wrong > 0 {
        stats.wrong = wrong;
        undo(vec, old, base, ops, None, Reached::Int3s, &mut stats);
        return stats;
    }
    ops.sync();
    stats.syncs += 1;

    // 2. Every byte but the first, each site reported just before.
    let mut wrote = false;
    let reports = ops.reports();
    for (loc, o) in vec.iter().zip(old.iter_mut()) {
        report(ops, loc, &mut o.old, base, reports);
        let (new, len) = loc.new_bytes();
        if len > 1 {
            wrong += u32::from(!ops.write(loc.addr(base) + 1, &new[1..len]));
            wrote = true;
        }
    }
    if wrong > 0 {
        stats.wrong = wrong;
        undo(
            vec,
            old,
            base,
            ops,
            None,
            Reached::Tails { reports },
            &mut stats,
        );
        return stats;
    }
    if wrote {
        ops.sync();
        stats.syncs += 1;
    }

    // 3. The first bytes, unless the new first byte is INT3 itself.
    let mut wrote = false;
    for loc in vec.iter() {
        let byte = loc.first_byte();
        if byte != INT3 {
            wrong += u32::from(!ops.write(loc.addr(base), &[byte]));
            wrote = true;
        }
    }
    if wrong > 0 {
        stats.wrong = wrong;
        undo(
            vec,
            old,
            base,
            ops,
            None,
            Reached::Firsts { reports },
            &mut stats,
        );
        return stats;
    }
    if wrote {
        ops.sync();
        stats.syncs += 1;
    }
    stats.sites = vec.len() as u32;
    stats
}

/// Whether every page of text the sites of `vec` (sorted by address) lie in can be mapped
/// ([`TextOps::mappable`], asked a run of pages at a time): for the batches written a write at a
/// time, one site's pages at a time. A write spans two pages at most, and two pages are all
/// this clears on the stack, where a run's 64 would cost a one-site flip a `memset()` of 512
/// bytes.
pub fn mappable(vec: &[PokeLoc], base: usize, ops: &mut impl TextOps) -> bool {
    let pages = &mut [0usize; 2];
    let mut start = 0;
    while start < vec.len() {
        let (end, n) = next_run(vec, base, start, pages);
        if !ops.mappable(pages.get(..n).unwrap_or(&[])) {
            return false;
        }
        start = end;
    }
    true
}

/// What a phase of [`apply`] did, a run at a time ([`run_phase`]).
#[derive(Clone, Copy, Default)]
struct PhaseStats {
    /// Runs mapped.
    runs: u32,
    /// Writes that did not read back as written.
    wrong: u32,
    /// Phase 1 only: the sites with a tail to write in phase 2, and with a first byte in
    /// phase 3.
    tails: u32,
    firsts: u32,
}

/// Reads the old bytes of each of `sites` into its slot in `slots`, and makes its whole new
/// instruction a write at its place in the mapping of the run `pages`, which holds every page
/// of each site, ascending. Counts into `stats` the sites that phases 2 and 3 write.
#[inline(always)]
fn prepare(
    ops: &mut impl TextOps,
    sites: &[PokeLoc],
    slots: &mut [Slot],
    pages: &[usize],
    base: usize,
    stats: &mut PhaseStats,
) {
    // The sites and the pages are in address order: each site's first page is the previous
    // one's, or later, and a site's second page, if any, follows its first in the mapping. A
    // site in the page of `slot` is at `addr + delta` in the mapping, up to `limit`.
    let mut slot = 0usize;
    let (mut delta, mut limit) = (0usize, 0usize);
    if let Some(&p) = pages.first() {
        (delta, limit) = (p.wrapping_neg(), p.wrapping_add(PAGE_SIZE));
    }
    // Wrapping arithmetic in this loop, which runs over every site of a batch: no overflow
    // checks (a run holds `RUN_MAX` pages at most, a batch fewer than `u32::MAX` sites).
    for (loc, s) in sites.iter().zip(slots.iter_mut()) {
        let addr = loc.addr(base);
        ops.read(addr, s.old.get_mut(..loc.len()).unwrap_or(&mut []));
        while addr >= limit {
            let Some(&page) = pages.get(slot.wrapping_add(1)) else {
                break;
            };
            slot = slot.wrapping_add(1);
            delta = slot.wrapping_mul(PAGE_SIZE).wrapping_sub(page);
            limit = page.wrapping_add(PAGE_SIZE);
        }
        // A site outside the run (which cannot happen) gets an offset the C side refuses.
        s.write.at = addr.wrapping_add(delta) as u32;
        s.write.rel = loc.rel_addr;
        s.write.bytes = loc.run_bytes();
        stats.tails = stats.tails.wrapping_add(u32::from(loc.len > 1));
        stats.firsts = stats
            .firsts
            .wrapping_add(u32::from(s.write.bytes[0] != INT3));
    }
}

/// Phase `phase` of [`apply`] over the sites of `vec` and their slots, a run of pages at a
/// time: the runs `kept` holds, or finds again. Phase 1 ([`Phase::Int3`]) first reads every
/// site's old bytes and makes its write ([`prepare`]); every phase then hands the run's sites
/// to [`TextOps::write_sites`], a chunk at a time, under one mapping of the run. A run with a
/// single write in the phase, or whose pages cannot be mapped, is written a write at a time
/// ([`TextOps::write`]).
#[inline(always)]
fn run_phase(
    ops: &mut impl TextOps,
    vec: &[PokeLoc],
    slots: &mut [Slot],
    base: usize,
    kept: &mut Runs,
    phase: Phase,
) -> PhaseStats {
    let mut stats = PhaseStats::default();
    let Runs { found, spare, .. } = kept;
    let max = ops.run_pages().min(RUN_MAX);
    let (mut start, mut r) = (0, 0);
    while start < vec.len() {
        let (end, pages) = Found::get(Some(&*found), r, vec, base, start, max, spare);
        r += 1;
        let sites = vec.get(start..end).unwrap_or(&[]);
        let slots = slots.get_mut(start..end).unwrap_or(&mut []);
        if phase == Phase::Int3 {
            prepare(ops, sites, slots, pages, base, &mut stats);
        }
        let several = slots
            .iter()
            .filter(|s| phase.write(&s.write).is_some())
            .nth(1)
            .is_some();
        if several && ops.map_run(pages) {
            stats.runs += 1;
            for chunk in slots.chunks(RUN_CHUNK) {
                stats.wrong += ops.write_sites(phase, chunk);
            }
            ops.unmap_run();
        } else {
            for s in slots.iter() {
                let Some(w) = phase.write(&s.write) else {
                    continue;
                };
                let addr = base.wrapping_add(w.rel as isize as usize);
                let bytes = w.bytes.get(..w.len()).unwrap_or(&[]);
                stats.wrong += u32::from(!ops.write(addr, bytes));
            }
        }
        start = end;
    }
    stats
}

/// The phase of [`apply`] that a write failing in leaves the batch at `reached` ([`run_phase`]),
/// counted in `stats`, then a sync: what it did, or, if a write of it did not land, `None`,
/// with every site put back from there ([`undo`]).
#[inline(always)]
fn sync_phase(
    ops: &mut impl TextOps,
    vec: &[PokeLoc],
    old: &mut [Slot],
    base: usize,
    kept: &mut Runs,
    reached: Reached,
    stats: &mut ApplyStats,
) -> Option<PhaseStats> {
    let phase = match reached {
        Reached::Int3s => Phase::Int3,
        Reached::Tails { .. } => Phase::Tail,
        Reached::Firsts { .. } => Phase::First,
    };
    let done = run_phase(ops, vec, old, base, kept, phase);
    stats.runs += done.runs;
    if done.wrong > 0 {
        stats.wrong = done.wrong;
        undo(vec, old, base, ops, Some(kept), reached, stats);
        return None;
    }
    ops.sync();
    stats.syncs += 1;
    Some(done)
}

/// Patches every site of `vec` with the INT3 protocol: the body of
/// `smp_text_poke_batch_finish()` between publishing the vector and retiring it.
///
/// The caller publishes `vec` to the INT3 handler before calling and retires it after; `vec`
/// is only read. `old` receives the bytes each site held before the batch, for
/// [`TextOps::poked`] and for putting it back, and the writes made of it: one [`Slot`] per
/// site, and sites beyond `old.len()` are not patched.
///
/// Before any byte is written, every page the batch writes is checked ([`TextOps::mappable`]):
/// if one cannot be mapped, nothing is written, nothing synced, and the outcome is
/// [`Outcome::Unmapped`]. Every write is read back through the text's address; if one did not
/// land, the phase is not followed by the next: every site is put back as it was, with the
/// INT3 protocol ([`Outcome::Undone`]), so that no site is left torn or holding an INT3 the
/// handler no longer knows. A CPU that hit an INT3 of the batch meanwhile ran the new
/// instruction, as during any batch. Upstream's `text_poke()` `BUG()`s there.
///
/// `kept` is scratch for the batch's runs of pages, found once for all its passes.
pub fn apply(
    vec: &[PokeLoc],
    old: &mut [Slot],
    base: usize,
    ops: &mut impl TextOps,
    kept: &mut Runs,
) -> ApplyStats {
    let mut stats = ApplyStats::default();
    let vec = vec.get(..old.len()).unwrap_or(vec);
    if vec.is_empty() {
        return stats;
    }

    // 0. Every page first: a batch with text that cannot be mapped writes nothing at all,
    // rather than stop half-way (upstream's `text_poke()` would `BUG()` on it).
    //
    // One site, or no runs: one write at a time, which costs less without runs to group.
    if vec.len() < 2 || ops.run_pages() < 2 {
        if !mappable(vec, base, ops) {
            stats.outcome = Outcome::Unmapped;
            return stats;
        }
        return apply_each(vec, old, base, ops);
    }
    // Otherwise the pages are asked a run at a time, the runs the write phases map.
    let max = ops.run_pages().min(RUN_MAX);
    kept.found.find(vec, base, max);
    let (mut start, mut r) = (0, 0);
    while start < vec.len() {
        let (end, pages) = Found::get(Some(&kept.found), r, vec, base, start, max, &mut kept.spare);
        if !ops.mappable(pages) {
            stats.outcome = Outcome::Unmapped;
            return stats;
        }
        (start, r) = (end, r + 1);
    }

    // 1. INT3 at every site, once its old bytes are read (all of them: the INT3 leaves all but
    // the first in place until phase 2) and its write is made for the three phases.
    let Some(first) = sync_phase(ops, vec, old, base, kept, Reached::Int3s, &mut stats) else {
        return stats;
    };

    // 2. Every byte but the first, every site reported before (its old bytes were read in
    // phase 1).
    let reports = ops.reports();
    if reports {
        for (loc, o) in vec.iter().zip(old.iter()) {
            let (new, len) = loc.new_bytes();
            ops.poked(loc.addr(base), &o.old[..len], &new[..len]);
        }
    }
    let tails = Reached::Tails { reports };
    if first.tails > 0 && sync_phase(ops, vec, old, base, kept, tails, &mut stats).is_none() {
        return stats;
    }

    // 3. The first bytes, unless the new first byte is INT3 itself.
    let firsts = Reached::Firsts { reports };
    if first.firsts > 0 && sync_phase(ops, vec, old, base, kept, firsts, &mut stats).is_none() {
        return stats;
    }
    stats.sites = vec.len() as u32;
    stats
}

/// Storage for the sites of a batch, and for a [`Slot`] each, for [`apply`].
pub trait PokeStorage {
    /// The sites, in the order they were added.
    fn as_mut_slice(&mut self) -> &mut [PokeLoc];
    /// The sites and as many slots, for [`apply`].
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

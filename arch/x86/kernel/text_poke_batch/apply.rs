// SPDX-License-Identifier: GPL-2.0

//! Applying a batch: the three phases of the INT3 protocol over the sorted vector, every page
//! of its text checked first, and the way back, with the same protocol, when a write does not
//! land. Pure: the machine is [`TextOps`].

use super::{
    next_run,
    runs::Found,
    Phase,
    Piece,
    PokeLoc,
    Runs,
    Slot,
    INT3,
    PAGE_SIZE,
    RUN_CHUNK,
    RUN_MAX, //
};

/// The machine a batch is applied to.
///
/// Text is written either one write at a time ([`TextOps::write`], `text_poke()`: a temporary
/// mapping of the write's page or two for each write), or a run of pages at a time: one
/// mapping of up to [`TextOps::run_pages`] pages ([`TextOps::map_run`]), every write of the
/// phase that falls in them ([`TextOps::write_sites`], a chunk of sites at a time), then the
/// mapping undone ([`TextOps::unmap_run`]).
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
    /// addresses, for [`TextOps::write_sites`]. False if a page cannot be mapped: nothing is
    /// mapped then, and the run's writes go through [`TextOps::write`].
    fn map_run(&mut self, _pages: &[usize]) -> bool {
        false
    }
    /// Writes `piece` of each of `sites` (at most [`RUN_CHUNK`]) through the run mapped, in
    /// order: the write [`Piece::write`] makes of the site's whole new instruction
    /// ([`Slot::write`]) at its place in the mapping, a site without one skipped. Each write is
    /// read back through the text's own address (not the run's, which would not catch a wrong
    /// page). Returns how many did not read back as written or do not lie within the run: by
    /// default all of them, for a machine that maps no runs.
    fn write_sites(&mut self, piece: Piece, sites: &[Slot]) -> u32 {
        sites.iter().filter(|s| piece.has(&s.write)).count() as u32
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

/// What a phase of [`apply`] did, a run at a time ([`Pass::phase`]).
#[derive(Clone, Copy, Default)]
struct PhaseStats {
    /// Runs mapped.
    runs: u32,
    /// Writes that did not read back as written.
    wrong: u32,
}

/// Reads the old bytes of each of `sites` into its slot in `slots`, and makes its whole new
/// instruction a write at its place in the mapping of the run `pages`, which holds every page
/// of each site, ascending (none: the sites are written a write at a time).
#[inline(always)]
fn prepare(
    ops: &mut impl TextOps,
    sites: &[PokeLoc],
    slots: &mut [Slot],
    pages: &[usize],
    base: usize,
) {
    // The sites and the pages are in address order: each site's first page is the previous
    // one's, or later, and a site's second page, if any, follows its first in the mapping. A
    // site in the page of `slot` is at `addr + delta` in the mapping, up to `limit`.
    let mut slot = 0usize;
    let (mut delta, mut limit) = (0usize, usize::MAX);
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
    }
}

/// A batch as [`apply`] writes it, forwards and back: its sites, sorted by address, their
/// offsets' base, a slot for each, and, if `RUNS`, its runs of pages; otherwise it is written a
/// write at a time, and the compiler leaves out all that runs would take.
struct Pass<'a, const RUNS: bool> {
    vec: &'a [PokeLoc],
    base: usize,
    /// The write each phase makes a piece of, and the site's old bytes.
    slots: &'a mut [Slot],
    /// The runs found once ([`Found::find`]), of at most `max` pages (2 at least).
    kept: &'a mut Runs,
    max: usize,
}

impl<const RUNS: bool> Pass<'_, RUNS> {
    /// The three phases of [`apply`], each followed by a sync, into `stats`.
    #[inline(always)]
    fn apply(&mut self, ops: &mut impl TextOps, stats: &mut ApplyStats) {
        // 1. INT3 at every site, once its old bytes are read (all of them: the INT3 leaves all
        // but the first in place until phase 2) and its write is made for the three phases.
        if !self.synced(ops, Phase::Int3, false, stats) {
            return;
        }

        // 2. Every byte but the first, every site reported before (its old bytes were read in
        // phase 1).
        let reports = ops.reports();
        if reports {
            self.report(ops, false);
        }
        // A batch of one-byte instructions has none: no write, no sync. The first site with
        // a tail ends the search, for a key's sites the first.
        let tails = Phase::Tail.piece();
        if self.slots.iter().any(|s| tails.has(&s.write))
            && !self.synced(ops, Phase::Tail, reports, stats)
        {
            return;
        }

        // 3. The first bytes, unless every new first byte is INT3 itself (an INT3 written on
        // purpose, as kprobes do): nothing to write then, and no sync.
        if self.slots.iter().any(|s| s.write.bytes[0] != INT3)
            && !self.synced(ops, Phase::First, reports, stats)
        {
            return;
        }
        stats.sites = self.vec.len() as u32;
    }

    /// Phase `phase` of the INT3 protocol over every site, towards the write its slot holds: a
    /// run of pages at a time, or the whole batch a write at a time. If `prepare_slots`, every
    /// site's old bytes are read and its write made first ([`prepare`]): phase 1 of [`apply`].
    /// A run's slots go to [`TextOps::write_sites`] a chunk at a time, under one mapping of the
    /// run; a run with a single write in the phase, or whose pages cannot be mapped, is written
    /// a write at a time ([`TextOps::write`]).
    #[inline(always)]
    fn phase(&mut self, ops: &mut impl TextOps, phase: Phase, prepare_slots: bool) -> PhaseStats {
        let mut stats = PhaseStats::default();
        let Self {
            vec,
            base,
            slots,
            kept: Runs { found, spare },
            max,
        } = self;
        let (vec, base, max) = (*vec, *base, *max);
        let piece = phase.piece();
        let filled = piece.filled();
        let (mut start, mut r) = (0, 0);
        while start < vec.len() {
            let (end, pages) = if RUNS {
                Found::get(found, r, vec, base, start, max, spare)
            } else {
                (vec.len(), &[][..])
            };
            r += 1;
            let sites = vec.get(start..end).unwrap_or(&[]);
            let slots = slots.get_mut(start..end).unwrap_or(&mut []);
            if prepare_slots {
                prepare(ops, sites, slots, pages, base);
            }
            let several = RUNS
                && !pages.is_empty()
                && slots
                    .iter()
                    .filter(|s| piece.has(&s.write))
                    .nth(1)
                    .is_some();
            if several && ops.map_run(pages) {
                stats.runs += 1;
                for chunk in slots.chunks(RUN_CHUNK) {
                    stats.wrong += ops.write_sites(piece, chunk);
                }
                ops.unmap_run();
            } else {
                for s in slots.iter() {
                    let Some((from, bytes)) = piece.of(&s.write, &filled) else {
                        continue;
                    };
                    let addr = base.wrapping_add(s.write.rel as isize as usize);
                    stats.wrong += u32::from(!ops.write(addr.wrapping_add(from), bytes));
                }
            }
            start = end;
        }
        stats
    }

    /// Phase `phase` of [`apply`] ([`Pass::phase`]) counted in `stats`, then a sync: true, or,
    /// if a write of it did not land, false, with every site put back from there
    /// ([`Pass::undo`]). `reports`: whether the rewrite was reported before.
    #[inline(always)]
    fn synced(
        &mut self,
        ops: &mut impl TextOps,
        phase: Phase,
        reports: bool,
        stats: &mut ApplyStats,
    ) -> bool {
        let done = self.phase(ops, phase, phase == Phase::Int3);
        stats.runs += done.runs;
        if done.wrong > 0 {
            stats.wrong = done.wrong;
            undo::<RUNS>(
                ops, self.vec, self.base, self.slots, self.kept, self.max, phase, reports, stats,
            );
            return false;
        }
        ops.sync();
        stats.syncs += 1;
        true
    }

    /// Reports the rewrite of every site to [`TextOps::poked`], from its old bytes to its new
    /// ones, or `back`.
    #[inline(always)]
    fn report(&self, ops: &mut impl TextOps, back: bool) {
        for (loc, s) in self.vec.iter().zip(self.slots.iter()) {
            let (new, len) = loc.new_bytes();
            let (new, old) = (&new[..len], s.old.get(..len).unwrap_or(&[]));
            let (from, to) = if back { (new, old) } else { (old, new) };
            ops.poked(loc.addr(self.base), from, to);
        }
    }

    /// Puts every site back as its slot says after a write of phase `failed` did not land: the
    /// INT3 protocol again, from where the batch got, towards the old bytes, which become each
    /// slot's write at the same place in the same runs. INT3 at every site and a sync (from
    /// phase 3), every old tail and a sync (from phase 2), every old first byte and a sync: no
    /// CPU runs a torn instruction meanwhile, and none still runs an INT3 of the batch when its
    /// caller retires the vector. The way back is a rewrite too: if the way there was reported
    /// (`reports`), it is reported to [`TextOps::poked`] as that was, before the tails change.
    ///
    /// Sets the outcome: [`Outcome::Undone`], or [`Outcome::Broken`] if a write of the way back
    /// fails too. That stops it at once, without a sync: its next phase would write under sites
    /// that may not hold what the protocol needs (an old tail under a site whose INT3 did not
    /// land), and the caller must stop the kernel with the vector still published.
    #[inline(always)]
    fn undo(
        &mut self,
        ops: &mut impl TextOps,
        failed: Phase,
        reports: bool,
        stats: &mut ApplyStats,
    ) {
        ops.undoing();
        stats.outcome = Outcome::Broken;
        for (loc, s) in self.vec.iter().zip(self.slots.iter_mut()) {
            let len = loc.len();
            let mut bytes = [0u8; 8];
            for (d, o) in bytes.iter_mut().zip(s.old.iter().take(len)) {
                *d = *o;
            }
            bytes[7] = len as u8;
            s.write.bytes = bytes;
        }
        let from = match failed {
            Phase::Int3 => Phase::First,
            Phase::Tail => Phase::Tail,
            Phase::First => Phase::Int3,
        };
        for phase in [Phase::Int3, Phase::Tail, Phase::First] {
            if (phase as u32) < (from as u32) {
                continue;
            }
            if phase == Phase::Tail && reports {
                self.report(ops, true);
            }
            let done = self.phase(ops, phase, false);
            stats.runs += done.runs;
            stats.wrong += done.wrong;
            if done.wrong > 0 {
                return;
            }
            ops.sync();
            stats.syncs += 1;
        }
        stats.outcome = Outcome::Undone;
    }
}

/// Patches every site of `vec` with the INT3 protocol: the body of
/// `smp_text_poke_batch_finish()` between publishing the vector and retiring it.
///
/// The caller publishes `vec` to the INT3 handler before calling and retires it after; `vec`
/// is only read. `slots` receives the bytes each site held before the batch, for
/// [`TextOps::poked`] and for putting it back, and the write made of its new instruction: one
/// [`Slot`] per site, and sites beyond `slots.len()` are not patched.
///
/// Before any byte is written, every page the batch writes is checked ([`TextOps::mappable`]):
/// if one cannot be mapped, nothing is written, nothing synced, and the outcome is
/// [`Outcome::Unmapped`]. Every write is read back through the text's address; if one did not
/// land, the phase is not followed by the next: every site is put back as it was, with the
/// INT3 protocol ([`Outcome::Undone`]), so that no site is left torn or holding an INT3 the
/// handler no longer knows. A CPU that hit an INT3 of the batch meanwhile ran the new
/// instruction, as during any batch. Upstream's `text_poke()` `BUG()`s there.
///
/// A batch of two sites or more is written a run of pages at a time if `ops` maps runs
/// ([`TextOps::run_pages`]); one site, a write at a time, which costs it less. `kept` is
/// scratch for the batch's runs of pages, found once for all its passes.
pub fn apply(
    vec: &[PokeLoc],
    slots: &mut [Slot],
    base: usize,
    ops: &mut impl TextOps,
    kept: &mut Runs,
) -> ApplyStats {
    let mut stats = ApplyStats::default();
    let vec = vec.get(..slots.len()).unwrap_or(vec);
    // As many slots as sites: a batch of one site then loops over neither.
    let slots = slots.get_mut(..vec.len()).unwrap_or(&mut []);
    if vec.is_empty() {
        return stats;
    }

    // Every page first: a batch with text that cannot be mapped writes nothing at all, rather
    // than stop half-way (upstream's `text_poke()` would `BUG()` on it). The pages are asked a
    // run at a time, the runs the write phases map, or a site at a time.
    let max = if vec.len() < 2 {
        0
    } else {
        ops.run_pages().min(RUN_MAX)
    };
    if max < 2 {
        if !mappable(vec, base, ops) {
            stats.outcome = Outcome::Unmapped;
            return stats;
        }
        let mut pass = Pass::<false> {
            vec,
            base,
            slots,
            kept,
            max,
        };
        pass.apply(ops, &mut stats);
    } else {
        kept.found.find(vec, base, max);
        let (mut start, mut r) = (0, 0);
        while start < vec.len() {
            let (end, pages) = Found::get(&kept.found, r, vec, base, start, max, &mut kept.spare);
            if !ops.mappable(pages) {
                stats.outcome = Outcome::Unmapped;
                return stats;
            }
            (start, r) = (end, r + 1);
        }
        let mut pass = Pass::<true> {
            vec,
            base,
            slots,
            kept,
            max,
        };
        pass.apply(ops, &mut stats);
    }
    stats
}

/// [`Pass::undo`], out of line: the batch's fields as arguments, so that the phases need no
/// [`Pass`] in memory for the rare call.
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn undo<const RUNS: bool>(
    ops: &mut impl TextOps,
    vec: &[PokeLoc],
    base: usize,
    slots: &mut [Slot],
    kept: &mut Runs,
    max: usize,
    failed: Phase,
    reports: bool,
    stats: &mut ApplyStats,
) {
    let mut pass = Pass::<RUNS> {
        vec,
        base,
        slots,
        kept,
        max,
    };
    pass.undo(ops, failed, reports, stats);
}

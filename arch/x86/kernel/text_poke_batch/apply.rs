// SPDX-License-Identifier: GPL-2.0

//! Applying a batch: the three phases of the INT3 protocol over the sorted vector, every page
//! of its text checked first, and the way back, with the same protocol, when a write does not
//! land. Pure: the machine is [`TextOps`].

use super::{
    next_run,
    runs::Found,
    OldInsn,
    Phase,
    PokeLoc,
    RunWrite,
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

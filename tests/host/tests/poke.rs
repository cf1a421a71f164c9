// SPDX-License-Identifier: GPL-2.0

//! The text-poke batch core against reference models: decoding for emulation, the INT3
//! handler's binary search, batch ordering, and what a CPU executing a site can observe while a
//! batch is applied.

use jump_label_rs_host::poke::{
    self, Emulation, Index, Outcome, Phase, Piece, PokeError, PokeLoc, PokeStorage, Queue, RunWrite,
    Runs, Slot, TextOps, INT3, MAX_INSN, PAGE_SIZE,
};
use proptest::prelude::*;
use std::collections::BTreeMap;

const BASE: usize = 0xffff_ffff_8100_0000;
const NOP2: [u8; 2] = [0x66, 0x90];
const NOP5: [u8; 5] = [0x0f, 0x1f, 0x44, 0x00, 0x00];

fn jmp8(from: usize, to: usize) -> Vec<u8> {
    vec![0xeb, (to as i64 - (from as i64 + 2)) as i8 as u8]
}

fn jmp32(from: usize, to: usize) -> Vec<u8> {
    let mut v = vec![0xe9];
    v.extend_from_slice(&((to as i64 - (from as i64 + 5)) as i32).to_le_bytes());
    v
}

#[test]
fn loc_is_16_bytes() {
    assert_eq!(std::mem::size_of::<PokeLoc>(), 16);
}

#[test]
fn decode_jump_label_sites() {
    let at = BASE + 0x1000;
    // NOPs are emulated as jumps to the next instruction.
    let nop2 = PokeLoc::new(BASE, at, &NOP2, None).unwrap();
    assert_eq!(nop2.emulation(BASE), Emulation::Jmp(at + 2));
    let nop5 = PokeLoc::new(BASE, at, &NOP5, None).unwrap();
    assert_eq!(nop5.emulation(BASE), Emulation::Jmp(at + 5));
    let j8 = PokeLoc::new(BASE, at, &jmp8(at, at + 9), None).unwrap();
    assert_eq!(j8.emulation(BASE), Emulation::Jmp(at + 9));
    let j32 = PokeLoc::new(BASE, at, &jmp32(at, at - 0x400), None).unwrap();
    assert_eq!(j32.emulation(BASE), Emulation::Jmp(at - 0x400));
}

#[test]
fn decode_calls_rets_jcc_int3() {
    let at = BASE + 0x2000;
    let mut call = vec![0xe8];
    call.extend_from_slice(&0x100i32.to_le_bytes());
    let c = PokeLoc::new(BASE, at, &call, None).unwrap();
    assert_eq!(
        c.emulation(BASE),
        Emulation::Call {
            ret: at + 5,
            target: at + 5 + 0x100
        }
    );

    // A RET padded with INT3 to the size of the call it replaces (static calls).
    let ret = PokeLoc::new(BASE, at, &[0xc3, 0xcc, 0xcc, 0xcc, 0xcc], None).unwrap();
    assert_eq!(ret.emulation(BASE), Emulation::Ret);
    assert_eq!(
        PokeLoc::new(BASE, at, &[0xc3, 0x90, 0xcc, 0xcc, 0xcc], None),
        Err(PokeError::BadPadding)
    );

    // Jcc rel32 is stored as the matching Jcc rel8 with len 6.
    let mut jne32 = vec![0x0f, 0x85];
    jne32.extend_from_slice(&(-0x20i32).to_le_bytes());
    let j = PokeLoc::new(BASE, at, &jne32, None).unwrap();
    assert_eq!(j.len(), 6);
    assert_eq!(j.first_byte(), 0x0f);
    assert_eq!(j.new_bytes().0, [0x0f, 0x85, 0xe0, 0xff, 0xff, 0xff]);
    assert_eq!(
        j.emulation(BASE),
        Emulation::Jcc {
            cc: 5,
            taken: at + 6 - 0x20,
            next: at + 6
        }
    );
    let je8 = PokeLoc::new(BASE, at, &[0x74, 0x10], None).unwrap();
    assert_eq!(
        je8.emulation(BASE),
        Emulation::Jcc {
            cc: 4,
            taken: at + 0x12,
            next: at + 2
        }
    );

    let i = PokeLoc::new(BASE, at, &[0xcc], None).unwrap();
    assert_eq!(i.emulation(BASE), Emulation::Int3);
}

#[test]
fn decode_refuses_what_cannot_be_emulated() {
    let at = BASE;
    assert_eq!(PokeLoc::new(BASE, at, &[], None), Err(PokeError::BadLength));
    assert_eq!(
        PokeLoc::new(BASE, at, &[0x90; 7], None),
        Err(PokeError::BadLength)
    );
    assert_eq!(
        PokeLoc::new(BASE, at, &[0x48, 0x89, 0xf8], None),
        Err(PokeError::Unsupported)
    );
    // A 3-byte NOP is not one the handler knows.
    assert_eq!(
        PokeLoc::new(BASE, at, &[0x0f, 0x1f, 0x00], None),
        Err(PokeError::Unsupported)
    );
    // CALL with a length that is not its own.
    assert_eq!(
        PokeLoc::new(BASE, at, &[0xe8, 0, 0, 0, 0, 0xcc], None),
        Err(PokeError::BadLength)
    );
    assert_eq!(
        PokeLoc::new(BASE, BASE - (1 << 32), &NOP2, None),
        Err(PokeError::OutOfRange)
    );
    // The instruction to emulate may differ from the one written (ftrace writes a CALL and
    // emulates it while the NOP is replaced).
    let mut call = vec![0xe8];
    call.extend_from_slice(&0i32.to_le_bytes());
    let l = PokeLoc::new(BASE, at, &NOP5, Some(&call)).unwrap();
    assert_eq!(
        l.emulation(BASE),
        Emulation::Call {
            ret: at + 5,
            target: at + 5
        }
    );
}

#[test]
fn ordering_rule() {
    let a = PokeLoc::new(BASE, BASE + 0x10, &NOP2, None).unwrap();
    let vec = [a];
    assert!(poke::ordered(&[], BASE, BASE));
    assert!(poke::ordered(&vec, BASE, BASE + 0x10));
    assert!(poke::ordered(&vec, BASE, BASE + 0x11));
    assert!(!poke::ordered(&vec, BASE, BASE + 0xf));
}

proptest! {
    /// The binary search finds exactly the sites a linear scan finds, and nothing else.
    #[test]
    fn lookup_matches_linear_scan(
        offsets in proptest::collection::btree_set(0usize..1 << 20, 0..600),
        probes in proptest::collection::vec(0usize..1 << 20, 0..64),
    ) {
        let vec: Vec<PokeLoc> = offsets
            .iter()
            .map(|&o| PokeLoc::new(BASE, BASE + o, &NOP2, None).unwrap())
            .collect();
        for &o in offsets.iter().chain(probes.iter()) {
            let ip = BASE + o;
            let linear = vec.iter().find(|l| l.addr(BASE) == ip);
            prop_assert_eq!(poke::lookup(&vec, None, BASE, ip), linear);
        }
        prop_assert_eq!(poke::lookup(&vec, None, BASE, BASE.wrapping_sub(1)), None);
    }
}

proptest! {
    /// With an index, the search finds exactly the sites a linear scan finds, whatever the
    /// spread of the sites: clustered, spread over a few bytes or over the whole text, one
    /// site far from the others.
    #[test]
    fn indexed_lookup_matches_linear_scan(
        offsets in proptest::collection::btree_set(0usize..1 << 12, 1..1200),
        spread in 0u32..18,
        far in proptest::option::of(0usize..1 << 30),
        probes in proptest::collection::vec(0usize..1 << 31, 0..64),
    ) {
        let mut offsets: Vec<usize> = offsets.iter().map(|&o| o << spread).collect();
        if let Some(far) = far {
            if !offsets.contains(&far) {
                offsets.push(far);
                offsets.sort();
            }
        }
        let vec: Vec<PokeLoc> = offsets
            .iter()
            .map(|&o| PokeLoc::new(BASE, BASE + o, &NOP2, None).unwrap())
            .collect();
        let mut index = Box::new(Index::EMPTY);
        prop_assert!(index.build(&vec));
        let near = offsets.iter().flat_map(|&o| [o.wrapping_sub(1), o, o + 1]);
        for o in near.chain(probes.iter().copied()) {
            let ip = BASE.wrapping_add(o);
            let linear = vec.iter().find(|l| l.addr(BASE) == ip);
            prop_assert_eq!(poke::lookup(&vec, Some(&index), BASE, ip), linear);
        }
        prop_assert_eq!(poke::lookup(&vec, Some(&index), BASE, BASE.wrapping_sub(1)), None);
    }
}

/// An index narrows a search to a site or two: 1024 sites spread evenly over their text leave
/// at most 2 to search for any address.
#[test]
fn index_narrows_the_search() {
    let vec: Vec<PokeLoc> = (0..1024)
        .map(|i| PokeLoc::new(BASE, BASE + 0x40 * i + (i % 7), &NOP2, None).unwrap())
        .collect();
    let mut index = Box::new(Index::EMPTY);
    assert!(index.build(&vec));
    let most = (0..0x40 * 1024 + 8)
        .map(|o| {
            let (start, end) = index.range(o as isize);
            end - start
        })
        .max()
        .unwrap();
    assert!(most <= 2, "{most} sites in one range");
    // Below the first site, past the last range: nothing to search.
    assert_eq!(index.range(-1), (0, 0));
    assert_eq!(index.range(0x40 * 1024 * 2), (0, 0));
    let mut empty = Box::new(Index::EMPTY);
    assert!(!empty.build(&[]));
}

/// Simulated text, and what any other CPU may execute of it between any two writes: a byte
/// written since the last sync may still read as it was before the write, each byte on its
/// own, until the next sync serialises every CPU.
struct Sim {
    mem: BTreeMap<usize, u8>,
    /// What the bytes written since the last sync held at that sync.
    synced: BTreeMap<usize, u8>,
    /// With `late_syncs`, a sync serialises no CPU: a protocol whose syncs came only after its
    /// writes. The model must find it torn.
    late_syncs: bool,
    /// Site start -> (old instruction, new instruction).
    sites: BTreeMap<usize, (Vec<u8>, Vec<u8>)>,
    vec: Vec<PokeLoc>,
    syncs: u32,
    writes: u32,
    violations: Vec<String>,
    /// Pages a run may map: 0 for `text_poke()` alone.
    run_max: usize,
    /// The run mapped, if any.
    mapped: Option<Vec<usize>>,
    /// Runs mapped.
    runs: u32,
    /// A page that cannot be mapped, if any.
    unmappable: Option<usize>,
    /// Pages asked about before anything was written.
    asked: Vec<usize>,
    /// Writes tried, through [`TextOps::write`] or a run: the one numbered `drop` (from 0)
    /// does not land, nor, with `drop_rest`, any after it.
    attempts: u32,
    drop: Option<u32>,
    drop_rest: bool,
    /// Another write that does not land.
    drop_also: Option<u32>,
    /// Reports made to [`TextOps::poked`]: address, old and new bytes.
    reported: Vec<(usize, Vec<u8>, Vec<u8>)>,
}

impl Sim {
    fn new(run_max: usize) -> Self {
        Self {
            mem: BTreeMap::new(),
            synced: BTreeMap::new(),
            late_syncs: false,
            sites: BTreeMap::new(),
            vec: Vec::new(),
            syncs: 0,
            writes: 0,
            violations: Vec::new(),
            run_max,
            mapped: None,
            runs: 0,
            unmappable: None,
            asked: Vec::new(),
            attempts: 0,
            drop: None,
            drop_rest: false,
            drop_also: None,
            reported: Vec::new(),
        }
    }

    /// Whether the next write lands.
    fn lands(&mut self) -> bool {
        let k = self.attempts;
        self.attempts += 1;
        if Some(k) == self.drop_also {
            return false;
        }
        match self.drop {
            Some(d) => k < d || (k > d && !self.drop_rest),
            None => true,
        }
    }

    /// Writes `bytes` at `addr`, if the write lands; whether they read back.
    fn put(&mut self, addr: usize, bytes: &[u8]) -> bool {
        if self.lands() {
            for (i, b) in bytes.iter().enumerate() {
                if let Some(was) = self.mem.insert(addr + i, *b) {
                    self.synced.entry(addr + i).or_insert(was);
                }
            }
            self.writes += 1;
            self.observe(addr, bytes.len());
        }
        self.bytes(addr, bytes.len()) == bytes
    }

    fn bytes(&self, at: usize, len: usize) -> Vec<u8> {
        (at..at + len).map(|a| self.mem[&a]).collect()
    }

    /// What a CPU executing each site a write of `len` bytes at `addr` reached may do now,
    /// whichever of its bytes written since the last sync it still sees as they were: the old
    /// instruction, the new one, or an INT3 the handler resolves to the new one. Anything else
    /// is a torn instruction. (The other sites are as the writes to them left them; a sync
    /// only narrows what a CPU may see.)
    fn observe(&mut self, addr: usize, len: usize) {
        let from = addr.saturating_sub(MAX_INSN);
        for (&at, (old, new)) in self.sites.range(from..addr + len) {
            let len = old.len().max(new.len());
            let now = self.bytes(at, len);
            // The bytes another CPU may still see as they were.
            let stale: Vec<(usize, u8)> = (0..len)
                .filter_map(|i| self.synced.get(&(at + i)).map(|&b| (i, b)))
                .filter(|&(i, b)| b != now[i])
                .collect();
            for mix in 0u32..1 << stale.len() {
                let mut seen = now.clone();
                for (k, &(i, b)) in stale.iter().enumerate() {
                    if mix & 1 << k != 0 {
                        seen[i] = b;
                    }
                }
                if seen[0] == poke::INT3 {
                    match poke::lookup(&self.vec, None, BASE, at) {
                        Some(loc)
                            if PokeLoc::new(BASE, at, new, None).unwrap().emulation(BASE)
                                == loc.emulation(BASE) => {}
                        _ => self
                            .violations
                            .push(format!("{at:#x}: INT3 the handler cannot resolve")),
                    }
                } else if seen[..old.len()] != old[..] && seen[..new.len()] != new[..] {
                    self.violations
                        .push(format!("{at:#x}: torn instruction {seen:02x?}"));
                }
            }
        }
    }
}

impl TextOps for Sim {
    fn read(&mut self, addr: usize, buf: &mut [u8]) {
        for (i, b) in buf.iter_mut().enumerate() {
            *b = self.mem[&(addr + i)];
        }
    }

    fn write(&mut self, addr: usize, bytes: &[u8]) -> bool {
        self.put(addr, bytes)
    }

    fn poked(&mut self, addr: usize, old: &[u8], new: &[u8]) {
        self.reported.push((addr, old.to_vec(), new.to_vec()));
    }

    fn sync(&mut self) {
        if self.mapped.is_some() {
            self.violations.push("sync with a run mapped".into());
        }
        self.syncs += 1;
        if !self.late_syncs {
            self.synced.clear();
        }
    }

    fn run_pages(&self) -> usize {
        self.run_max
    }

    fn mappable(&mut self, pages: &[usize]) -> bool {
        if self.writes > 0 {
            self.violations
                .push("pages asked about after a write".into());
        }
        self.asked.extend_from_slice(pages);
        !pages.iter().any(|p| Some(*p) == self.unmappable)
    }

    fn map_run(&mut self, pages: &[usize]) -> bool {
        if self.mapped.is_some() {
            self.violations.push("run mapped twice".into());
        }
        if pages.is_empty() || pages.len() > self.run_max {
            self.violations
                .push(format!("run of {} pages", pages.len()));
        }
        if pages.windows(2).any(|w| w[0] >= w[1]) || pages.iter().any(|p| p % PAGE_SIZE != 0) {
            self.violations.push(format!("run pages {pages:x?}"));
        }
        self.mapped = Some(pages.to_vec());
        self.runs += 1;
        true
    }

    fn write_sites(&mut self, piece: Piece, sites: &[Slot]) -> u32 {
        let writes: Vec<RunWrite> = sites.iter().filter_map(|s| piece.write(&s.write)).collect();
        let Some(pages) = self.mapped.clone() else {
            self.violations.push("write with no run mapped".into());
            return writes.len() as u32;
        };
        let mut wrong = 0;
        for w in &writes {
            // Every byte through the mapping, whose pages are consecutive from the first.
            let len = w.len();
            let at = w.at as usize;
            let addrs: Option<Vec<usize>> = (at..at + len)
                .map(|a| pages.get(a / PAGE_SIZE).map(|p| p + a % PAGE_SIZE))
                .collect();
            let Some(addrs) = addrs.filter(|_| (1..=MAX_INSN).contains(&len)) else {
                self.violations.push(format!(
                    "write of {len} at {at:#x}: not in the run {pages:x?}"
                ));
                wrong += 1;
                continue;
            };
            if addrs.windows(2).any(|p| p[1] != p[0] + 1) {
                self.violations
                    .push(format!("write at {at:#x} across unrelated pages"));
            }
            // It is read back where the text is: the address the run maps there.
            let text = BASE.wrapping_add_signed(w.rel as isize);
            if text != addrs[0] {
                self.violations.push(format!(
                    "write at {at:#x} reads back at {text:#x}, not {:#x}",
                    addrs[0]
                ));
            }
            wrong += u32::from(!self.put(addrs[0], &w.bytes[..len]));
        }
        wrong
    }

    fn unmap_run(&mut self) {
        if self.mapped.take().is_none() {
            self.violations.push("unmap with no run mapped".into());
        }
    }
}

/// A write of `len` bytes the batch takes: an INT3, a short or long JMP, or a `Jcc rel32`.
fn insn_of_len(len: usize) -> Vec<u8> {
    match len {
        1 => vec![poke::INT3],
        2 => vec![poke::JMP8, 0],
        6 => vec![poke::ESCAPE, 0x85, 0, 0, 0, 0],
        _ => vec![poke::JMP32, 0, 0, 0, 0],
    }
}

/// Sites in address order, `(gap before, len)` each, from proptest's gaps.
fn run_sites(gaps: &[(usize, usize)]) -> Vec<PokeLoc> {
    let mut at = BASE;
    gaps.iter()
        .map(|&(gap, len)| {
            at += gap;
            let loc = PokeLoc::new(BASE, at, &insn_of_len(len), None).unwrap();
            at += loc.len();
            loc
        })
        .collect()
}

proptest! {
    /// The page runs of a batch: every site in exactly one run, the runs in order, each run's
    /// pages ascending and distinct, at most `max` of them, and every page of each of its
    /// sites among them; a run ends only where the next site's pages would not fit.
    #[test]
    fn page_runs_cover_every_site_once(
        gaps in proptest::collection::vec((0usize..3 * PAGE_SIZE, 1usize..=6), 0..200),
        max in 2usize..10,
    ) {
        let vec = run_sites(&gaps);
        let pages_of = |loc: &PokeLoc| {
            let a = loc.addr(BASE);
            (a & !(PAGE_SIZE - 1), (a + loc.len() - 1) & !(PAGE_SIZE - 1))
        };
        let mut pages = vec![0usize; max];
        let mut start = 0;
        let mut seen = 0;
        while start < vec.len() {
            let (end, n) = poke::next_run(&vec, BASE, start, &mut pages);
            prop_assert!(end > start && end <= vec.len());
            prop_assert!(n >= 1 && n <= max);
            let run = &pages[..n];
            prop_assert!(run.windows(2).all(|w| w[0] < w[1]));
            prop_assert!(run.iter().all(|p| p % PAGE_SIZE == 0));
            for (i, loc) in vec[start..end].iter().enumerate() {
                let (first, last) = pages_of(loc);
                let mut p = first;
                while p <= last {
                    prop_assert!(run.contains(&p), "site {} page {:#x} not in {:x?}", start + i, p, run);
                    p += PAGE_SIZE;
                }
            }
            // No page mapped for nothing: each holds a byte of a site of the run.
            for p in run {
                let used = vec[start..end].iter().any(|l| {
                    let (f, la) = pages_of(l);
                    (f..=la).contains(p)
                });
                prop_assert!(used, "page {:#x} of {:x?} holds no site", p, run);
            }
            seen += end - start;
            // Maximal: the next site would have needed a page more than the run could hold.
            if let Some(loc) = vec.get(end) {
                let (first, last) = pages_of(loc);
                let extra = (first..=last)
                    .step_by(PAGE_SIZE)
                    .filter(|p| !run.contains(p))
                    .count();
                prop_assert!(n + extra > max);
            }
            start = end;
        }
        prop_assert_eq!(seen, vec.len());
    }
}

/// A `Jcc rel32` (JNE) at `from` to `to`.
fn jcc32(from: usize, to: usize) -> Vec<u8> {
    let mut v = vec![0x0f, 0x85];
    v.extend_from_slice(&((to as i64 - (from as i64 + 6)) as i32).to_le_bytes());
    v
}

/// A site of the given kind: (old, new) instructions of the same size.
fn site_insns(at: usize, kind: u8) -> (Vec<u8>, Vec<u8>) {
    match kind % 8 {
        6 => {
            let mut jmp = jmp32(at, at + 0x400);
            jmp.push(0xcc);
            (jcc32(at, at + 0x80), jmp)
        }
        7 => {
            let mut jmp = jmp32(at, at - 0x400);
            jmp.push(0xcc);
            (jmp, jcc32(at, at + 0x80))
        }
        0 => (NOP2.to_vec(), jmp8(at, at + 0x20)),
        1 => (jmp8(at, at + 0x7f), NOP2.to_vec()),
        2 => (NOP5.to_vec(), jmp32(at, at + 0x1234)),
        3 => (jmp32(at, at - 0x800), NOP5.to_vec()),
        4 => {
            let mut call = vec![0xe8];
            call.extend_from_slice(&0x40i32.to_le_bytes());
            (NOP5.to_vec(), call)
        }
        _ => {
            let mut call = vec![0xe8];
            call.extend_from_slice(&0x40i32.to_le_bytes());
            (call, vec![0xc3, 0xcc, 0xcc, 0xcc, 0xcc])
        }
    }
}

/// Sites of every kind, 64 bytes apart, in a new [`Sim`].
fn sim_of_every_kind(run_max: usize) -> Sim {
    let mut sim = Sim::new(run_max);
    for k in 0..8u8 {
        let at = BASE + 0x100 + 0x40 * usize::from(k);
        let (old, new) = site_insns(at, k);
        for j in 0..0x40 {
            sim.mem.insert(at + j, old.get(j).copied().unwrap_or(0xcc));
        }
        sim.vec.push(PokeLoc::new(BASE, at, &new, None).unwrap());
        sim.sites.insert(at, (old, new));
    }
    sim
}

/// The model sees what the syncs are for: the batch, whose syncs serialise every CPU between
/// its phases, is never torn; the same writes with the syncs made only after them (a
/// protocol that writes all three phases, then syncs three times) are, wherever a site's
/// tail changes.
#[test]
fn syncs_between_the_phases_are_needed() {
    for run_max in [0, 4] {
        let mut sim = sim_of_every_kind(run_max);
        let vec = sim.vec.clone();
        let mut old = vec![Slot::EMPTY; vec.len()];
        poke::apply(&vec, &mut old, BASE, &mut sim, &mut { Runs::EMPTY });
        assert!(sim.violations.is_empty(), "{:?}", sim.violations);

        let mut late = sim_of_every_kind(run_max);
        late.late_syncs = true;
        let mut old = vec![Slot::EMPTY; vec.len()];
        let stats = poke::apply(&vec, &mut old, BASE, &mut late, &mut { Runs::EMPTY });
        assert_eq!(stats.syncs, 3);
        assert!(
            late.violations.iter().any(|v| v.contains("torn instruction")),
            "syncs after the writes went unseen: {:?}",
            late.violations
        );
    }
}

proptest! {
    /// However many sites and whatever they change into, a CPU never sees a torn
    /// instruction, every INT3 it hits resolves to the new instruction, three syncs are
    /// enough, and the text ends up new everywhere.
    #[test]
    fn apply_is_never_torn(
        kinds in proptest::collection::vec(any::<u8>(), 1..80),
        gaps in proptest::collection::vec(0usize..3 * PAGE_SIZE, 80),
        run_max in prop_oneof![Just(0usize), 2usize..9],
    ) {
        let mut sim = Sim::new(run_max);
        let mut at = BASE + 0x100 - 16;
        for (i, &k) in kinds.iter().enumerate() {
            // Sites 16 bytes apart or more, some a page or more apart, some across a page
            // boundary.
            at += 16 + gaps[i] / 16 * 16 + gaps[i] % 5;
            let (old, new) = site_insns(at, k);
            for (j, b) in old.iter().enumerate() {
                sim.mem.insert(at + j, *b);
            }
            for j in old.len()..16 {
                sim.mem.insert(at + j, 0xcc);
            }
            prop_assert!(poke::ordered(&sim.vec, BASE, at));
            sim.vec.push(PokeLoc::new(BASE, at, &new, None).unwrap());
            sim.sites.insert(at, (old, new));
        }
        let vec = sim.vec.clone();
        let mut old_first = vec![Slot::EMPTY; vec.len()];
        let stats = poke::apply(&vec, &mut old_first, BASE, &mut sim, &mut { Runs::EMPTY });
        // The published vector is not written while it is applied.
        prop_assert_eq!(&vec, &sim.vec);
        prop_assert!(sim.violations.is_empty(), "{:?}", sim.violations);
        prop_assert_eq!(stats.syncs, 3);
        prop_assert_eq!(sim.syncs, 3);
        prop_assert_eq!(stats.sites as usize, kinds.len());
        prop_assert_eq!(stats.wrong, 0);
        prop_assert_eq!(stats.runs, sim.runs);
        prop_assert!(sim.mapped.is_none());
        if run_max == 0 {
            prop_assert_eq!(sim.runs, 0);
        } else {
            // No more runs than the pages each phase touches, at least one per phase with
            // anything to write.
            let pages: std::collections::BTreeSet<usize> = sim
                .sites
                .iter()
                .flat_map(|(&a, (o, n))| {
                    let len = o.len().max(n.len());
                    [a & !(PAGE_SIZE - 1), (a + len - 1) & !(PAGE_SIZE - 1)]
                })
                .collect();
            // A run per phase at least when a phase has two writes or more, no more than the
            // pages each phase touches.
            prop_assert!(sim.runs as usize <= 3 * pages.len());
            if sim.vec.len() >= 2 {
                prop_assert!(sim.runs >= 2);
            }
        }
        for (&at, (old, new)) in &sim.sites {
            prop_assert_eq!(sim.bytes(at, new.len()), new.clone());
            let i = vec.iter().position(|l| l.addr(BASE) == at).unwrap();
            prop_assert_eq!(&old_first[i].old[..old.len()], &old[..]);
            // Written a run at a time, each site's whole write was made once, in phase 1.
            if run_max >= 2 && vec.len() >= 2 {
                let w = &old_first[i].write;
                prop_assert_eq!(w.len(), new.len());
                prop_assert_eq!(&w.bytes[..new.len()], &new[..]);
                prop_assert_eq!(w.rel as isize, at as isize - BASE as isize);
            }
        }
    }
}

/// A site's whole new instruction, made once per batch, as a write of `b` at `at` in its run.
fn whole(at: u32, rel: i32, b: &[u8]) -> RunWrite {
    let mut bytes = [0; 8];
    bytes[..b.len()].copy_from_slice(b);
    bytes[7] = b.len() as u8;
    RunWrite { at, rel, bytes }
}

/// What each phase writes of a site's whole new instruction: INT3 over its first byte, every
/// byte but the first from one further on, the first byte; nothing where the instruction has
/// no byte in the phase's piece (the tail of a one-byte instruction). A first byte that is
/// INT3 itself is written again: the site holds it since phase 1.
#[test]
fn phases_write_their_part_of_a_prepared_site() {
    let jmp = whole(0x100, -8, &[0xe9, 1, 2, 3, 4]);
    assert_eq!(Phase::Int3.piece().write(&jmp), Some(whole(0x100, -8, &[INT3])));
    assert_eq!(Phase::Tail.piece().write(&jmp), Some(whole(0x101, -7, &[1, 2, 3, 4])));
    assert_eq!(Phase::First.piece().write(&jmp), Some(whole(0x100, -8, &[0xe9])));
    let jcc = whole(0xffe, 0x40, &[0x0f, 0x85, 1, 2, 3, 4]);
    assert_eq!(Phase::Tail.piece().write(&jcc), Some(whole(0xfff, 0x41, &[0x85, 1, 2, 3, 4])));
    let int3 = whole(0x10, 0, &[INT3]);
    assert_eq!(Phase::Int3.piece().write(&int3), Some(int3));
    assert_eq!(Phase::Tail.piece().write(&int3), None);
    assert_eq!(Phase::First.piece().write(&int3), Some(int3));
    let ret = whole(0x10, 0, &[0xc3]);
    assert_eq!(Phase::Tail.piece().write(&ret), None);
    assert_eq!(Phase::First.piece().write(&ret), Some(ret));
}

#[test]
fn apply_skips_syncs_with_nothing_to_do() {
    struct Count(u32, BTreeMap<usize, u8>);
    impl TextOps for Count {
        fn read(&mut self, addr: usize, buf: &mut [u8]) {
            for (i, b) in buf.iter_mut().enumerate() {
                *b = *self.1.get(&(addr + i)).unwrap_or(&0x90);
            }
        }
        fn write(&mut self, addr: usize, bytes: &[u8]) -> bool {
            for (i, b) in bytes.iter().enumerate() {
                self.1.insert(addr + i, *b);
            }
            true
        }
        fn sync(&mut self) {
            self.0 += 1;
        }
    }
    // Empty batch: nothing at all.
    let mut t = Count(0, BTreeMap::new());
    assert_eq!(poke::apply(&[], &mut [], BASE, &mut t, &mut { Runs::EMPTY }).syncs, 0);
    // One-byte writes have no tail: INT3 then first bytes, 2 syncs.
    let v = [PokeLoc::new(BASE, BASE + 1, &[0xc3], None).unwrap()];
    assert_eq!(poke::apply(&v, &mut [Slot::EMPTY], BASE, &mut t, &mut { Runs::EMPTY }).syncs, 2);
    // Writing an INT3 on purpose (kprobes): only the first sync is needed.
    let mut t = Count(0, BTreeMap::new());
    let v = [PokeLoc::new(BASE, BASE + 1, &[0xcc], None).unwrap()];
    assert_eq!(poke::apply(&v, &mut [Slot::EMPTY], BASE, &mut t, &mut { Runs::EMPTY }).syncs, 1);
    assert_eq!(t.0, 1);
}

/// Every condition code against every combination of the flags it can test, from the SDM's
/// table of `Jcc` conditions.
#[test]
fn jcc_conditions_follow_the_sdm() {
    const CF: usize = 1 << 0;
    const PF: usize = 1 << 2;
    const ZF: usize = 1 << 6;
    const SF: usize = 1 << 7;
    const OF: usize = 1 << 11;
    let all = [CF, PF, ZF, SF, OF];
    for combo in 0u32..32 {
        let flags = all
            .iter()
            .enumerate()
            .filter(|(i, _)| combo & (1 << i) != 0)
            .fold(0x2, |f, (_, bit)| f | bit);
        let (cf, pf, zf, sf, of) = (
            flags & CF != 0,
            flags & PF != 0,
            flags & ZF != 0,
            flags & SF != 0,
            flags & OF != 0,
        );
        let want = [
            of,              // 70 JO
            !of,             // 71 JNO
            cf,              // 72 JB
            !cf,             // 73 JAE
            zf,              // 74 JE
            !zf,             // 75 JNE
            cf || zf,        // 76 JBE
            !cf && !zf,      // 77 JA
            sf,              // 78 JS
            !sf,             // 79 JNS
            pf,              // 7a JP
            !pf,             // 7b JNP
            sf != of,        // 7c JL
            sf == of,        // 7d JGE
            zf || sf != of,  // 7e JLE
            !zf && sf == of, // 7f JG
        ];
        for (cc, want) in want.iter().enumerate() {
            assert_eq!(
                poke::condition(flags, cc as u8),
                *want,
                "cc {cc:#x} flags {flags:#x}"
            );
        }
    }
}

/// Storage for the queue model: `cap` sites without growing (`fixed` of them before any
/// growth), then growth, for key flips only, that fails when the next bit of `fail` says so
/// (one bit per attempt, cycling).
struct ModelStorage {
    v: Vec<PokeLoc>,
    old: Vec<Slot>,
    fixed: usize,
    cap: usize,
    fail: u32,
    attempts: u32,
}

impl ModelStorage {
    fn new(cap: usize, fail: u32) -> Self {
        Self {
            v: Vec::new(),
            old: Vec::new(),
            fixed: cap,
            cap,
            fail,
            attempts: 0,
        }
    }
}

impl PokeStorage for ModelStorage {
    fn as_mut_slice(&mut self) -> &mut [PokeLoc] {
        &mut self.v
    }

    fn split(&mut self) -> (&[PokeLoc], &mut [Slot]) {
        self.old.resize(self.v.len(), Slot::EMPTY);
        (&self.v, &mut self.old)
    }

    fn reserve_one(&mut self, grow: bool) -> bool {
        if self.v.len() < if grow { self.cap } else { self.fixed } {
            return true;
        }
        if !grow {
            return false;
        }
        let bit = self.attempts % 32;
        self.attempts += 1;
        if self.fail & (1 << bit) != 0 {
            return false;
        }
        self.cap = (self.cap * 2).max(1);
        true
    }

    fn reserve(&mut self, more: usize) -> bool {
        let want = self.v.len() + more;
        if want <= self.cap {
            return true;
        }
        let bit = self.attempts % 32;
        self.attempts += 1;
        if self.fail & (1 << bit) != 0 {
            return false;
        }
        self.cap = want;
        true
    }

    fn push(&mut self, loc: PokeLoc) {
        assert!(self.v.len() < self.cap, "push without room");
        self.v.push(loc);
    }

    unsafe fn fill(
        &mut self,
        more: usize,
        f: impl FnOnce(&[PokeLoc], &mut [std::mem::MaybeUninit<PokeLoc>]) -> usize,
    ) -> bool {
        assert!(self.v.len() + more <= self.cap, "fill without room");
        let nr = self.v.len();
        self.v.reserve(more);
        let sites = self.v.as_mut_ptr();
        // SAFETY: The first `nr` places are the sites, the `more` after them room reserved
        // above: disjoint, and the vector is not used while they live.
        let (queued, room) = unsafe {
            (
                std::slice::from_raw_parts(sites, nr),
                std::slice::from_raw_parts_mut(sites.add(nr).cast(), more),
            )
        };
        let n = f(queued, room);
        assert!(n <= more, "more sites than room");
        // SAFETY: The caller guarantees that `f` wrote the first `n` places of the room.
        unsafe { self.v.set_len(nr + n) };
        true
    }

    fn truncate(&mut self, len: usize) {
        self.v.truncate(len);
    }

    fn clear(&mut self) {
        self.v.clear();
        self.cap = self.fixed;
    }
}

proptest! {
    /// The queue against a reference model, for any sequence of writes (with repeated and
    /// out-of-order addresses), finishes, storage sizes and growth failures, for key flips and other batches: every batch it applies is sorted with no address twice (so the binary
    /// search finds every site in it), every write is applied exactly once, and the text ends
    /// as applying the writes one by one in order leaves it.
    #[test]
    fn queue_matches_reference_model(
        ops in proptest::collection::vec((0usize..24, any::<u8>(), 0u8..8), 1..200),
        cap in 0usize..6,
        fail in any::<u32>(),
        key in any::<bool>(),
    ) {
        let mut q = Queue::new(ModelStorage::new(cap, fail));
        let mut text: BTreeMap<usize, [u8; 2]> = BTreeMap::new();
        let mut reference: BTreeMap<usize, [u8; 2]> = BTreeMap::new();
        let mut applied = 0usize;
        let mut batches = Vec::new();
        let mut apply = |sites: &[PokeLoc], _: &mut [Slot]| {
            let addrs: Vec<usize> = sites.iter().map(|l| l.addr(BASE)).collect();
            batches.push(addrs.clone());
            for l in sites.iter() {
                let (bytes, len) = l.new_bytes();
                assert_eq!(len, 2);
                text.insert(l.addr(BASE), [bytes[0], bytes[1]]);
                assert_eq!(poke::lookup(sites, None, BASE, l.addr(BASE)), Some(l));
            }
            applied += sites.len();
        };
        let mut added = 0usize;
        for &(slot, disp, finish) in &ops {
            let at = BASE + 0x100 + slot * 16;
            let insn = [0xeb, disp];
            q.add(BASE, PokeLoc::new(BASE, at, &insn, None).unwrap(), key, &mut apply).unwrap();
            reference.insert(at, insn);
            added += 1;
            if finish == 0 {
                q.flush(BASE, &mut apply).unwrap();
            }
        }
        q.flush(BASE, &mut apply).unwrap();
        prop_assert!(q.is_empty());
        prop_assert_eq!(applied, added);
        for b in &batches {
            prop_assert!(b.windows(2).all(|w| w[0] < w[1]), "batch not strictly sorted: {:?}", b);
        }
        prop_assert_eq!(text, reference);
    }
}

/// A queue over room for two sites that always grows.
fn small_queue() -> Queue<ModelStorage> {
    Queue::new(ModelStorage::new(2, 0))
}

/// A key flip's sites, in any order, are applied as one batch per flush, the storage growing
/// as needed; other batches are applied whenever the storage's first page is full, as in C.
#[test]
fn queue_batches_what_it_can() {
    for (key, reverse, want) in [(true, false, 1), (true, true, 1), (false, false, 25)] {
        let mut q = small_queue();
        let mut batches = 0;
        let mut apply = |_: &[PokeLoc], _: &mut [Slot]| batches += 1;
        let order: Vec<usize> = if reverse {
            (0..50).rev().collect()
        } else {
            (0..50).collect()
        };
        for i in order {
            let loc = PokeLoc::new(BASE, BASE + 0x100 + i * 8, &NOP2, None).unwrap();
            q.add(BASE, loc, key, &mut apply).unwrap();
        }
        q.flush(BASE, &mut apply).unwrap();
        assert_eq!(batches, want, "key {key} reverse {reverse}");
    }
    // Out of order outside a key flip: every site breaks the order.
    let mut q = small_queue();
    let mut batches = 0;
    let mut apply = |_: &[PokeLoc], _: &mut [Slot]| batches += 1;
    for i in (0..10).rev() {
        let loc = PokeLoc::new(BASE, BASE + 0x100 + i * 8, &NOP2, None).unwrap();
        q.add(BASE, loc, false, &mut apply).unwrap();
    }
    q.flush(BASE, &mut apply).unwrap();
    assert_eq!(batches, 10);
}

/// A key flip's one walk: room made for all its sites, each queued without applying anything,
/// all taken back when one is refused; an earlier key's sites stay. A site queued twice, and a
/// storage that cannot make room, are errors, not flushes.
#[test]
fn key_sites_queued_in_one_walk_are_taken_back() {
    let site = |i: usize| PokeLoc::new(BASE, BASE + 0x100 + i * 8, &NOP2, None).unwrap();
    let mut q = small_queue();
    let mut batches = Vec::new();
    let mut apply = |v: &[PokeLoc], _: &mut [Slot]| batches.push(v.to_vec());
    // A key's sites in address order: a repeat is the last site, or one found by binary
    // search while the queue is sorted.
    assert!(q.reserve_keys(40));
    for i in 0..40 {
        assert_eq!(q.push_key(BASE, site(i)), Ok(()));
    }
    assert_eq!(q.push_key(BASE, site(39)), Err(PokeError::Twice));
    assert_eq!(q.push_key(BASE, site(7)), Err(PokeError::Twice));
    assert_eq!(q.len(), 40);
    q.truncate(0);
    // An earlier key of a transaction, above the next key's sites: once the queue is out of
    // order, a repeat is found by the flush, which applies nothing.
    q.add(BASE, site(100), true, &mut apply).unwrap();
    assert!(q.reserve_keys(41));
    for i in 0..40 {
        assert_eq!(q.push_key(BASE, site(i)), Ok(()));
    }
    assert_eq!(q.push_key(BASE, site(7)), Ok(()));
    assert_eq!(q.flush(BASE, &mut apply), Err(PokeError::Twice));
    assert!(q.is_empty());
    // Taken back: the earlier key's site stays (and the refused flush applied nothing: the
    // one batch below is all there is).
    q.add(BASE, site(100), true, &mut apply).unwrap();
    let mark = q.len();
    assert!(q.reserve_keys(40));
    for i in 0..40 {
        assert_eq!(q.push_key(BASE, site(i)), Ok(()));
    }
    q.truncate(mark);
    assert_eq!(q.len(), 1);
    q.flush(BASE, &mut apply).unwrap();
    assert_eq!(batches, vec![vec![site(100)]]);

    // Kept this time: one batch, sorted.
    batches.clear();
    let mut apply = |v: &[PokeLoc], _: &mut [Slot]| batches.push(v.to_vec());
    q.add(BASE, site(100), true, &mut apply).unwrap();
    assert!(q.reserve_keys(40));
    for i in (0..40).rev() {
        assert_eq!(q.push_key(BASE, site(i)), Ok(()));
    }
    q.flush(BASE, &mut apply).unwrap();
    let want: Vec<PokeLoc> = (0..40).chain([100]).map(site).collect();
    assert_eq!(batches, vec![want]);

    // No room: a storage that cannot grow refuses to reserve, and to push past its room.
    let mut q = Queue::new(ModelStorage::new(2, u32::MAX));
    assert!(!q.reserve_keys(3));
    assert!(q.reserve_keys(2));
    assert_eq!(q.push_key(BASE, site(0)), Ok(()));
    assert_eq!(q.push_key(BASE, site(1)), Ok(()));
    assert_eq!(q.push_key(BASE, site(2)), Err(PokeError::Full));
    assert_eq!(q.len(), 2);
}

/// A key's run of sites queued under one borrow ([`Queue::push_keys`]) follows
/// [`Queue::push_key`]'s rules: a repeat is refused (the last site, or one found by binary
/// search in the sites queued before the run and in the run itself while they are sorted),
/// pushes past the room made are refused, and what was pushed is queued, the rest of the room
/// left unused.
#[test]
fn key_runs_are_queued_under_one_borrow() {
    let site = |i: usize| PokeLoc::new(BASE, BASE + 0x100 + i * 8, &NOP2, None).unwrap();
    let mut q = small_queue();
    let mut batches = Vec::new();
    let mut apply = |v: &[PokeLoc], _: &mut [Slot]| batches.push(v.to_vec());
    // An earlier key's sites 50..60, then a run 0..40 below them.
    assert_eq!(
        q.push_keys(BASE, 10, |s| (50..60).try_for_each(|i| s.push(site(i)))),
        Ok(Ok(()))
    );
    let pushed = q.push_keys(BASE, 45, |s| {
        let mut got = Vec::new();
        for i in 0..40 {
            got.push(s.push(site(i)));
        }
        (got, s.push(site(39)), s.push(site(55)))
    });
    let (got, last, earlier) = pushed.unwrap();
    assert!(got.iter().all(|r| r.is_ok()));
    // Out of order once the run started below the earlier key: repeats are left to the flush,
    // which applies nothing.
    assert_eq!((last, earlier), (Ok(()), Ok(())));
    assert_eq!(q.len(), 52);
    assert_eq!(q.flush(BASE, &mut apply), Err(PokeError::Twice));

    // Sorted so far: the first out-of-order site is looked up in the run and before it.
    let (first, within) = q
        .push_keys(BASE, 3, |s| {
            let _ = s.push(site(10));
            (s.push(site(20)), s.push(site(10)))
        })
        .unwrap();
    assert_eq!((first, within), (Ok(()), Err(PokeError::Twice)));
    let before = q.push_keys(BASE, 1, |s| s.push(site(10))).unwrap();
    assert_eq!(before, Err(PokeError::Twice));

    // Room used up: refused, what was pushed stays, and is applied sorted.
    let full = q
        .push_keys(BASE, 2, |s| {
            (s.push(site(1)), s.push(site(2)), s.push(site(3)))
        })
        .unwrap();
    assert_eq!(full, (Ok(()), Ok(()), Err(PokeError::Full)));
    assert_eq!(q.len(), 4);
    q.flush(BASE, &mut apply).unwrap();
    // One batch, sorted: the refused flush applied nothing.
    assert_eq!(batches, vec![[1, 2, 10, 20].map(site).to_vec()]);

    // A storage that cannot make the room: `f` is not called.
    let mut q = Queue::new(ModelStorage::new(2, u32::MAX));
    let mut called = false;
    assert_eq!(
        q.push_keys(BASE, 3, |_| called = true),
        Err(PokeError::Full)
    );
    assert!(!called);
    assert!(q.is_empty());
}

/// A key site's write built directly is what the general decoder makes of its bytes: the NOP,
/// or the JMP to the target, of 2 or 5 bytes; a target the JMP cannot reach, another length or
/// an address too far from the base is refused.
#[test]
fn key_sites_match_the_general_decoder() {
    let jmp = |at: usize, target: usize, len: usize| -> Option<Vec<u8>> {
        let disp = target as i64 - (at + len) as i64;
        match len {
            2 => Some(vec![0xeb, i8::try_from(disp).ok()? as u8]),
            _ => [vec![0xe9], i32::try_from(disp).ok()?.to_le_bytes().to_vec()]
                .concat()
                .into(),
        }
    };
    for at in [BASE, BASE + 0x1234, BASE + 0xffd] {
        for len in [2, 5] {
            for delta in [-0x8000_0000i64, -129, -128, -2, 0, 1, 127, 128, 129, 0x7fff_ffff] {
                let target = (at as i64 + delta) as usize;
                for jump in [false, true] {
                    let bytes = match (jump, len) {
                        (false, 2) => Some(NOP2.to_vec()),
                        (false, _) => Some(NOP5.to_vec()),
                        (true, _) => jmp(at, target, len),
                    };
                    let want = match bytes {
                        Some(b) => PokeLoc::new(BASE, at, &b, None),
                        None => Err(PokeError::OutOfRange),
                    };
                    assert_eq!(
                        PokeLoc::key_site(BASE, at, target, len, jump),
                        want,
                        "at {at:#x} target {target:#x} len {len} jump {jump}"
                    );
                }
            }
        }
    }
    assert_eq!(
        PokeLoc::key_site(BASE, BASE, BASE, 1, false),
        Err(PokeError::BadLength)
    );
    assert_eq!(
        PokeLoc::key_site(BASE, BASE - (1 << 32), BASE, 5, false),
        Err(PokeError::OutOfRange)
    );
}

/// Sites for the bad-input tests: `n` JMP8 sites 0x300 bytes apart from `BASE + 0x100`, NOP2
/// now, the last one across a page boundary.
fn bad_input_sim(n: usize, run_max: usize) -> (Sim, Vec<PokeLoc>) {
    let mut sim = Sim::new(run_max);
    for i in 0..n {
        let at = if i + 1 == n && n > 1 {
            BASE + (i + 1) * PAGE_SIZE - 1
        } else {
            BASE + 0x100 + i * 0x300
        };
        let (old, new) = (NOP2.to_vec(), jmp8(at, at + 0x20));
        for (j, b) in old.iter().enumerate() {
            sim.mem.insert(at + j, *b);
        }
        sim.vec.push(PokeLoc::new(BASE, at, &new, None).unwrap());
        sim.sites.insert(at, (old, new));
    }
    let vec = sim.vec.clone();
    (sim, vec)
}

/// A page that cannot be mapped, anywhere in the batch: every page is asked about before any
/// byte is written, and then nothing is written and nothing synced, with runs or without,
/// for one site or many.
#[test]
fn unmappable_page_writes_nothing() {
    for n in [1, 2, 9] {
        for run_max in [0, 2, 64] {
            let pages: Vec<usize> = {
                let (_, vec) = bad_input_sim(n, run_max);
                let mut p: Vec<usize> = vec
                    .iter()
                    .flat_map(|l| {
                        let a = l.addr(BASE);
                        [a & !(PAGE_SIZE - 1), (a + l.len() - 1) & !(PAGE_SIZE - 1)]
                    })
                    .collect();
                p.dedup();
                p
            };
            for &bad in &pages {
                let (mut sim, vec) = bad_input_sim(n, run_max);
                sim.unmappable = Some(bad);
                let before = sim.mem.clone();
                let mut old = vec![Slot::EMPTY; vec.len()];
                let stats = poke::apply(&vec, &mut old, BASE, &mut sim, &mut { Runs::EMPTY });
                assert_eq!(
                    stats.outcome,
                    Outcome::Unmapped,
                    "n {n} run_max {run_max} bad {bad:#x}"
                );
                assert_eq!((stats.syncs, sim.syncs, sim.writes, sim.runs), (0, 0, 0, 0));
                assert_eq!(sim.mem, before);
                assert!(sim.violations.is_empty(), "{:?}", sim.violations);
            }
            // All mappable: every page asked about once, then the batch applied.
            let (mut sim, vec) = bad_input_sim(n, run_max);
            let mut old = vec![Slot::EMPTY; vec.len()];
            let stats = poke::apply(&vec, &mut old, BASE, &mut sim, &mut { Runs::EMPTY });
            assert_eq!(stats.outcome, Outcome::Applied);
            assert_eq!(sim.asked, pages);
            assert_eq!(stats.syncs, 3);
            for (&at, (_, new)) in &sim.sites {
                assert_eq!(sim.bytes(at, new.len()), new.clone());
            }
        }
    }
}

/// A write that does not land, in any phase, through a run or with `text_poke()`, for one site
/// or many: the batch goes no further, and puts every site back with the INT3 protocol from
/// where it got. No CPU sees a torn instruction or an INT3 the handler cannot resolve, every
/// site ends with its old bytes, no INT3 is left, and the syncs are those of the phases done
/// and of the way back.
#[test]
fn failed_write_puts_every_site_back() {
    for n in [1, 2, 9] {
        for run_max in [0, 2, 64] {
            let (mut sim, vec) = bad_input_sim(n, run_max);
            let mut old = vec![Slot::EMPTY; vec.len()];
            let before = sim.mem.clone();
            poke::apply(&vec, &mut old, BASE, &mut sim, &mut { Runs::EMPTY });
            // Three writes a site: its INT3, its tail, its first byte.
            assert_eq!(sim.attempts, 3 * n as u32);
            for k in 0..sim.attempts {
                let what = format!("n {n} run_max {run_max} write {k}");
                let (mut sim, vec) = bad_input_sim(n, run_max);
                sim.drop = Some(k);
                let mut old = vec![Slot::EMPTY; vec.len()];
                let stats = poke::apply(&vec, &mut old, BASE, &mut sim, &mut { Runs::EMPTY });
                assert_eq!(stats.outcome, Outcome::Undone, "{what}");
                assert_eq!(stats.wrong, 1, "{what}");
                assert_eq!(stats.sites, 0, "{what}");
                assert_eq!(sim.mem, before, "{what}");
                assert!(sim.violations.is_empty(), "{what}: {:?}", sim.violations);
                assert!(sim.mapped.is_none(), "{what}");
                // Phase 1 fails: its old first bytes back, a sync. Phase 2: a sync done, old
                // tails and first bytes back, two. Phase 3: two done, and three back.
                let phase = k / n as u32;
                assert_eq!(stats.syncs, [1, 3, 5][phase as usize], "{what}");
                assert_eq!(sim.syncs, stats.syncs, "{what}");
            }
        }
    }
}

/// A write of the way back that does not land either stops it: no CPU sees a torn
/// instruction (an old tail under a site whose INT3 did not land, say), and the outcome says
/// the text cannot be trusted unless every site is old after all. A site put back after its
/// rewrite was reported is reported again, the other way.
#[test]
fn failed_undo_stops_untorn() {
    for n in [1, 2, 9] {
        for run_max in [0, 64] {
            for k in 0..3 * n as u32 {
                // The way back writes 1 to 3 bytes a site; try each of its writes.
                for j in k + 1..k + 1 + 3 * n as u32 {
                    let what = format!("n {n} run_max {run_max} write {k} then {j}");
                    let (mut sim, vec) = bad_input_sim(n, run_max);
                    let before = sim.mem.clone();
                    sim.drop = Some(k);
                    sim.drop_also = Some(j);
                    let mut old = vec![Slot::EMPTY; vec.len()];
                    let stats = poke::apply(&vec, &mut old, BASE, &mut sim, &mut { Runs::EMPTY });
                    assert!(sim.violations.is_empty(), "{what}: {:?}", sim.violations);
                    assert!(sim.mapped.is_none(), "{what}");
                    if stats.outcome == Outcome::Undone {
                        assert_eq!(sim.mem, before, "{what}");
                    } else {
                        assert_eq!(stats.outcome, Outcome::Broken, "{what}");
                    }
                }
                // The reports of a batch put back: each site there, then back, or neither.
                let (mut sim, vec) = bad_input_sim(n, run_max);
                sim.drop = Some(k);
                let mut old = vec![Slot::EMPTY; vec.len()];
                poke::apply(&vec, &mut old, BASE, &mut sim, &mut { Runs::EMPTY });
                let there = k / n as u32 >= 1;
                assert_eq!(
                    sim.reported.len(),
                    if there { 2 * n } else { 0 },
                    "n {n} write {k}"
                );
                for (i, (at, was, now)) in sim.reported.iter().enumerate().skip(n) {
                    let (a, b, c) = &sim.reported[i - n];
                    assert_eq!((at, was, now), (a, c, b), "n {n} write {k}");
                }
            }
        }
    }
}

/// A batch that cannot even be put back (every write from one on does not land) says so: the
/// outcome is [`Outcome::Broken`] exactly when a site does not hold its old bytes.
#[test]
fn failed_write_that_cannot_be_undone_is_broken() {
    for n in [1, 9] {
        for run_max in [0, 64] {
            for k in 0..3 * n as u32 {
                let (mut sim, vec) = bad_input_sim(n, run_max);
                let before = sim.mem.clone();
                sim.drop = Some(k);
                sim.drop_rest = true;
                let mut old = vec![Slot::EMPTY; vec.len()];
                let stats = poke::apply(&vec, &mut old, BASE, &mut sim, &mut { Runs::EMPTY });
                let restored = sim.mem == before;
                assert_eq!(
                    stats.outcome,
                    if restored {
                        Outcome::Undone
                    } else {
                        Outcome::Broken
                    },
                    "n {n} run_max {run_max} write {k}"
                );
                // Only a first write that fails leaves nothing to put back.
                assert_eq!(restored, k == 0, "n {n} run_max {run_max} write {k}");
            }
        }
    }
}

/// Padded writes: a 6-byte write that is not a `Jcc rel32` (a JMP padded with an INT3) is
/// written as given, not as a Jcc, and a padded JMP or RET is emulated with its own length,
/// not the write's. (Upstream's C gets both wrong.)
#[test]
fn padded_writes_are_written_and_emulated_as_given() {
    let at = BASE + 0x1000;
    let cases: Vec<(Vec<u8>, Emulation)> = vec![
        (
            [jmp32(at, at + 0x400), vec![0xcc]].concat(),
            Emulation::Jmp(at + 0x400),
        ),
        (
            [jmp32(at, at - 0x10), vec![0xcc]].concat(),
            Emulation::Jmp(at - 0x10),
        ),
        (
            [jmp8(at, at + 0x20), vec![0xcc; 3]].concat(),
            Emulation::Jmp(at + 0x20),
        ),
        (
            [jmp8(at, at + 0x20), vec![0xcc; 4]].concat(),
            Emulation::Jmp(at + 0x20),
        ),
        (vec![0xc3, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc], Emulation::Ret),
        (
            jcc32(at, at + 0x80),
            Emulation::Jcc {
                cc: 5,
                taken: at + 0x80,
                next: at + 6,
            },
        ),
        (jmp32(at, at + 0x400), Emulation::Jmp(at + 0x400)),
    ];
    for (text, emulation) in cases {
        let loc = PokeLoc::new(BASE, at, &text, None).unwrap();
        let (new, len) = loc.new_bytes();
        assert_eq!(&new[..len], &text[..], "{text:02x?}");
        assert_eq!(loc.first_byte(), text[0]);
        let whole = RunWrite {
            at: 0,
            rel: 0,
            bytes: loc.run_bytes(),
        };
        let tail = Phase::Tail.piece().write(&whole).unwrap();
        assert_eq!((tail.at, &tail.bytes[..tail.len()]), (1, &text[1..]));
        assert!(tail.bytes[tail.len()..7].iter().all(|&b| b == 0), "{text:02x?}");
        assert_eq!(loc.emulation(BASE), emulation, "{text:02x?}");
    }
    // Six bytes that are neither a `Jcc rel32` nor padded: not written as a Jcc, refused.
    assert_eq!(
        PokeLoc::new(BASE, at, &[0xe8, 1, 2, 3, 4, 0x90], None),
        Err(PokeError::BadLength)
    );
    assert_eq!(
        PokeLoc::new(BASE, at, &[0xe9, 1, 2, 3, 4, 0x90], None),
        Err(PokeError::BadPadding)
    );
    // Emulated as a `Jcc rel32`, written as six other bytes: they do not fit the five kept.
    assert_eq!(
        PokeLoc::new(BASE, at, &[0x90; 6], Some(&jcc32(at, at + 0x80))),
        Err(PokeError::Unsupported)
    );
}

/// A transaction of 65,536 sites, 16 keys of 4,096 each, each key below the one before: every
/// site queued in O(log n) at most (a queue out of order checks nothing per site, and a linear
/// check would take 2^31 comparisons), the batch applied once, sorted; the same with one site
/// named by two keys refused whole by the flush.
#[test]
fn large_transaction_is_queued_in_n_log_n() {
    let site = |k: usize, i: usize| {
        let at = BASE + (15 - k) * 0x10_0000 + i * 16;
        PokeLoc::new(BASE, at, &NOP2, None).unwrap()
    };
    for repeat in [false, true] {
        let mut q = Queue::new(ModelStorage::new(256, 0));
        let mut batches: Vec<Vec<PokeLoc>> = Vec::new();
        let mut apply = |v: &[PokeLoc], _: &mut [Slot]| batches.push(v.to_vec());
        for k in 0..16 {
            assert!(q.reserve_keys(4096));
            for i in 0..4096 {
                assert_eq!(q.push_key(BASE, site(k, i)), Ok(()));
            }
        }
        if repeat {
            assert!(q.reserve_keys(1));
            assert_eq!(q.push_key(BASE, site(3, 1234)), Ok(()));
            assert_eq!(q.flush(BASE, &mut apply), Err(PokeError::Twice));
            assert!(batches.is_empty());
        } else {
            q.flush(BASE, &mut apply).unwrap();
            assert_eq!(batches.len(), 1);
            let b = &batches[0];
            assert_eq!(b.len(), 65_536);
            assert!(b.windows(2).all(|w| w[0].addr(BASE) < w[1].addr(BASE)));
        }
        assert!(q.is_empty());
    }
}

// SPDX-License-Identifier: GPL-2.0

//! What the INT3 handler reads of a batch: the sites being patched ([`PokeLoc`]), sorted by
//! address, found by binary search ([`lookup`]) narrowed, in a large batch, by an [`Index`],
//! and the instruction to emulate at each ([`PokeLoc::emulation`], [`condition`]).
//!
//! Built twice from this one file: as a part of the batch (`poke`, which makes the sites and
//! sorts them), and as the crate the INT3 handler calls, `text_poke_batch_int3.rs`, which the
//! kernel builds without instrumentation, debug assertions or overflow checks: the handler runs
//! in `noinstr` code, where nothing may call out or panic. It uses only `core` and the x86
//! opcodes; the host tests build it as it is.

use crate::x86::{
    CALL,
    INT3,
    JMP8,
    RET, //
};

/// One pending write: `smp_text_poke_loc`.
///
/// 16 bytes, so that 256 fit a page as in C. The write's bytes are kept in 5: a 6-byte write is
/// either a `Jcc rel32`, stored without its `0x0f` escape ([`ESCAPED`] in `form`), or a 5-byte
/// instruction padded with an INT3, which is not stored. The instruction the INT3 handler
/// emulates is described apart: its opcode (a `Jcc rel32`'s mapped to the matching
/// `Jcc rel8`), displacement and length, which padding makes shorter than the write. (C keeps
/// neither apart: it stores any 6-byte write as a `Jcc rel32`, and emulates a padded JMP with
/// the write's length.) Nothing in it changes while a batch is applied: the INT3 handler reads
/// it then, and the first byte each site held before the batch is kept apart (see `poke::apply()`).
///
/// # Invariants
///
/// - `len` is 1 to `poke::MAX_INSN`; `opcode` is one of `INT3`, `RET`, `CALL`, `JMP32`,
///   `JMP8` or a `Jcc rel8` opcode (`0x70..=0x7f`);
/// - `form & INSN_LEN` is the emulated instruction's length, 1 to `len`; `form & ESCAPED` says
///   the write starts with a `0x0f` escape not in `text`, and is set only if `len` is 6;
/// - a 6-byte write without the escape ends with an INT3, not in `text`; the bytes of `text`
///   past the write are zero.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct PokeLoc {
    pub(super) rel_addr: i32,
    pub(super) disp: i32,
    pub(super) len: u8,
    pub(super) opcode: u8,
    pub(super) text: [u8; 5],
    pub(super) form: u8,
}

/// `PokeLoc::form`: the emulated instruction's length.
pub(super) const INSN_LEN: u8 = 0x0f;
/// `PokeLoc::form`: the write starts with a `0x0f` escape that `text` leaves out.
pub(super) const ESCAPED: u8 = 0x80;

/// What the INT3 handler does for a CPU that hit a site being patched.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Emulation {
    /// An INT3 was written on purpose: leave it to its owner.
    Int3,
    /// Return.
    Ret,
    /// Call `target`, returning to `ret`.
    Call {
        /// The return address.
        ret: usize,
        /// The callee.
        target: usize,
    },
    /// Jump to the address.
    Jmp(usize),
    /// Jump to `taken` if condition `cc` holds, else continue at `next`.
    Jcc {
        /// The condition code, `0x0..=0xf`.
        cc: u8,
        /// The target when the condition holds.
        taken: usize,
        /// The next instruction.
        next: usize,
    },
}

impl PokeLoc {
    /// The address of the site.
    #[inline(always)]
    pub fn addr(&self, base: usize) -> usize {
        base.wrapping_add_signed(self.rel_addr as isize)
    }

    /// What a CPU that hit the INT3 at this site must do.
    ///
    /// Never panics and never calls out: it runs in the INT3 handler.
    #[inline(always)]
    pub fn emulation(&self, base: usize) -> Emulation {
        // The instruction's length, not the write's: padding makes it shorter.
        let next = self
            .addr(base)
            .wrapping_add(usize::from(self.form & INSN_LEN));
        let target = next.wrapping_add_signed(self.disp as isize);
        // The common case first, in one compare: JMP32 (0xe9) and JMP8 (0xeb) differ in bit 1
        // only, and no other opcode a site may hold (type invariant) has those other bits.
        if self.opcode | 2 == JMP8 {
            return Emulation::Jmp(target);
        }
        match self.opcode {
            INT3 => Emulation::Int3,
            RET => Emulation::Ret,
            CALL => Emulation::Call { ret: next, target },
            op => Emulation::Jcc {
                cc: op & 0xf,
                taken: target,
                next,
            },
        }
    }
}

/// The most ranges an [`Index`] cuts a batch's text into: a power of two.
pub const INDEX_MAX: usize = 1024;

/// Where each range of addresses starts in a batch's sorted vector: the INT3 handler's binary
/// search of a large batch is narrowed to the one or two sites of one range.
///
/// The addresses from the first site's to the last's are cut into `ranges` ranges of
/// `1 << shift` bytes, as many as there are sites (rounded up to a power of two, at most
/// [`INDEX_MAX`]); `start[k]` is the first site at or past range `k`. A 1024-site batch spread
/// over its text then searches one or two sites instead of 1024, for two loads: fewer probes
/// than C's search of its batches of 256 (`TEXT_POKE_ARRAY_MAX`), not more.
///
/// # Invariants
///
/// Once [`Index::build`] returned true for a vector, and until the next call: `ranges` is a
/// power of two, at most [`INDEX_MAX`]; `start[..=ranges]` is ascending, and its last entry is
/// the vector's length.
#[repr(C)]
pub struct Index {
    /// The first site's offset from the base.
    first: i32,
    /// The range of a site: its offset from `first`, shifted right by this; below 64.
    shift: u32,
    /// How many ranges.
    ranges: usize,
    /// The first site of each range or a later one, then the number of sites.
    start: [u16; INDEX_MAX + 1],
}

impl Index {
    /// An index of nothing, for static storage.
    pub const EMPTY: Self = Self {
        first: 0,
        shift: 0,
        ranges: 0,
        start: [0; INDEX_MAX + 1],
    };

    /// Indexes `vec`, sorted by address. False for an empty vector or one of more than
    /// `u16::MAX` sites, which it cannot index: the index is then not to be used.
    pub fn build(&mut self, vec: &[PokeLoc]) -> bool {
        let (Some(first), Some(last)) = (vec.first(), vec.last()) else {
            return false;
        };
        if vec.len() > usize::from(u16::MAX) {
            return false;
        }
        let ranges = vec.len().next_power_of_two().min(INDEX_MAX);
        let span = (i64::from(last.rel_addr) - i64::from(first.rel_addr)) as u64;
        // The smallest shift that leaves every offset from the first below `ranges`.
        let bits = u64::BITS - span.leading_zeros();
        let shift = bits.saturating_sub(ranges.trailing_zeros());
        self.first = first.rel_addr;
        self.shift = shift;
        self.ranges = ranges;
        let mut k = 0;
        for (i, loc) in vec.iter().enumerate() {
            let range = ((i64::from(loc.rel_addr) - i64::from(first.rel_addr)) as u64)
                .wrapping_shr(shift) as usize;
            while k <= range {
                let Some(slot) = self.start.get_mut(k) else {
                    break;
                };
                *slot = i as u16;
                k += 1;
            }
        }
        for slot in self.start.iter_mut().take(ranges + 1).skip(k) {
            *slot = vec.len() as u16;
        }
        true
    }

    /// The sites of a vector this indexes that may lie at offset `rel`: `start..end`, empty if
    /// none may.
    #[inline(always)]
    pub fn range(&self, rel: isize) -> (usize, usize) {
        let d = rel.wrapping_sub(self.first as isize);
        if d < 0 {
            return (0, 0);
        }
        let k = (d as usize).wrapping_shr(self.shift);
        if k >= self.ranges.min(INDEX_MAX) {
            return (0, 0);
        }
        // SAFETY: `k < INDEX_MAX`, so both `k` and `k + 1` index `start`, which has
        // `INDEX_MAX + 1` entries.
        unsafe {
            (
                usize::from(*self.start.get_unchecked(k)),
                usize::from(*self.start.get_unchecked(k.wrapping_add(1))),
            )
        }
    }
}

/// Finds the site at `ip` in `vec`, sorted by address: the INT3 handler's binary search, over
/// the sites `index` leaves (an index built for `vec`), or over all.
///
/// Never panics and never calls out: it runs in the INT3 handler.
#[inline(always)]
pub fn lookup<'a>(
    vec: &'a [PokeLoc],
    index: Option<&Index>,
    base: usize,
    ip: usize,
) -> Option<&'a PokeLoc> {
    let rel = ip.wrapping_sub(base) as isize;
    // A batch of one, as `smp_text_poke_single()` makes: no search.
    if let [only] = vec {
        return (only.rel_addr as isize == rel).then_some(only);
    }
    let (mut lo, mut hi) = (0, vec.len());
    if let Some(index) = index {
        (lo, hi) = index.range(rel);
        // An index is of this vector (its invariant), but the search stays in bounds without it.
        hi = hi.min(vec.len());
        lo = lo.min(hi);
        // Most ranges hold one site: the first of the range is tried first, without a search.
        if lo < hi {
            // SAFETY: `lo < hi <= vec.len()`: the index is in bounds.
            let loc = unsafe { vec.get_unchecked(lo) };
            if loc.rel_addr as isize == rel {
                return Some(loc);
            }
            lo = lo.wrapping_add(1);
        }
    }
    // Wrapping arithmetic throughout: with overflow checks on, plain `+` and `-` would bring in
    // a panic path, which the INT3 handler must not have. None of these can overflow.
    while lo < hi {
        let mid = lo.wrapping_add(hi.wrapping_sub(lo) / 2);
        // SAFETY: `lo <= mid < hi <= vec.len()`: the index is in bounds.
        let loc = unsafe { vec.get_unchecked(mid) };
        let at = loc.rel_addr as isize;
        if rel < at {
            hi = mid;
        } else if rel > at {
            lo = mid.wrapping_add(1);
        } else {
            return Some(loc);
        }
    }
    None
}

/// EFLAGS bits a condition code tests.
const CF: usize = 1 << 0;
const PF: usize = 1 << 2;
const ZF: usize = 1 << 6;
const SF: usize = 1 << 7;
const OF: usize = 1 << 11;

/// Whether condition code `cc` (`0x0..=0xf`, the low nibble of a `Jcc` opcode) holds for
/// `flags`: O, B, E, BE, S, P, L and LE for even codes, their negations for odd ones.
///
/// Never panics and never calls out: it runs in the INT3 handler.
#[inline(always)]
pub fn condition(flags: usize, cc: u8) -> bool {
    let holds = match cc >> 1 {
        0 => flags & OF != 0,
        1 => flags & CF != 0,
        2 => flags & ZF != 0,
        3 => flags & (CF | ZF) != 0,
        4 => flags & SF != 0,
        5 => flags & PF != 0,
        // L: SF != OF; LE: also ZF.
        6 => (flags & SF != 0) != (flags & OF != 0),
        _ => (flags & SF != 0) != (flags & OF != 0) || flags & ZF != 0,
    };
    holds != (cc & 1 != 0)
}

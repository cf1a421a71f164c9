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
pub use runs::{
    next_run,
    Phase,
    Piece,
    RunWrite,
    Runs,
    Slot,
    PAGE_SIZE,
    RUNS_KEPT,
    RUN_CHUNK,
    RUN_MAX, //
};

#[path = "apply.rs"]
mod apply;
pub use apply::{
    apply,
    mappable,
    ApplyStats,
    Outcome,
    TextOps, //
};

#[path = "queue.rs"]
mod queue;
pub use queue::{
    KeySlots,
    PokeStorage,
    Queue, //
};

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

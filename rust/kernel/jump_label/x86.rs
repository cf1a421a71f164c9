// SPDX-License-Identifier: GPL-2.0

//! The x86 instructions live patching writes: the opcodes the text-poke batch emulates, and the
//! instructions a static-key site holds.
//!
//! A site is the 2- or 5-byte instruction at a `__jump_table` entry's code address: a NOP of the
//! site's size while the site falls through, a JMP to the entry's target while it branches. This
//! module encodes and decodes those instructions; it is the one place the encodings live (the
//! Rust static keys and the text-poke batch both use it), and it uses only `core`, so the host
//! tests build it as it is.
//!
//! C header: [`arch/x86/include/asm/nops.h`](srctree/arch/x86/include/asm/nops.h).

/// The 2-byte NOP x86-64 kernels use (`BYTES_NOP2`).
pub const NOP2: [u8; 2] = [0x66, 0x90];

/// The 5-byte NOP x86-64 kernels use (`BYTES_NOP5`).
pub const NOP5: [u8; 5] = [0x0f, 0x1f, 0x44, 0x00, 0x00];

/// Opcode of `jmp rel8`.
pub const JMP8: u8 = 0xeb;

/// Opcode of `jmp rel32`.
pub const JMP32: u8 = 0xe9;

/// Opcode of `int3`, the first byte of a site while it is being patched.
pub const INT3: u8 = 0xcc;

/// Opcode of `ret`.
pub const RET: u8 = 0xc3;

/// Opcode of `call rel32`.
pub const CALL: u8 = 0xe8;

/// The two-byte opcode escape, first byte of `Jcc rel32`.
pub const ESCAPE: u8 = 0x0f;

/// The largest site, in bytes.
pub const MAX_LEN: usize = 5;

/// The `__jump_table` flags of a site on a key that starts `initial`, of the `likely` kind.
///
/// Bit 0 is the entry's branch bit, set for likely sites. Bit 1 asks objtool to turn the site's
/// JMP into a NOP, because the site starts out falling through: that is when the key's initial
/// value equals the branch bit.
#[inline]
pub const fn site_flags(initial: bool, likely: bool) -> i32 {
    let nop = if initial == likely { 2 } else { 0 };
    nop | likely as i32
}

/// Whether a site with branch bit `branch` jumps while its key is `enabled`: `jump_label_type()`.
#[inline]
pub const fn site_jumps(enabled: bool, branch: bool) -> bool {
    enabled != branch
}

/// `bytes` as the low bytes of a word.
#[inline(always)]
fn wide(b: &[u8; MAX_LEN]) -> u64 {
    u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], 0, 0, 0])
}

/// One encoded site instruction: 2 or 5 bytes.
///
/// # Invariants
///
/// `len` is 2 or 5.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SiteInsn {
    bytes: [u8; MAX_LEN],
    len: u8,
}

impl SiteInsn {
    /// The NOP of a `len`-byte site, or `None` if `len` is not a site size.
    #[inline]
    pub fn nop(len: usize) -> Option<Self> {
        let mut bytes = [0u8; MAX_LEN];
        match len {
            2 => bytes[..2].copy_from_slice(&NOP2),
            5 => bytes.copy_from_slice(&NOP5),
            _ => return None,
        }
        // INVARIANT: `len` is 2 or 5, checked above.
        Some(Self {
            bytes,
            len: len as u8,
        })
    }

    /// The JMP of a `len`-byte site at `code` to `target`, or `None` if `len` is not a site size
    /// or the displacement does not fit the instruction.
    #[inline]
    pub fn jmp(code: usize, target: usize, len: usize) -> Option<Self> {
        let disp = (target as i64).wrapping_sub(code.wrapping_add(len) as i64);
        let mut bytes = [0u8; MAX_LEN];
        match len {
            2 => {
                bytes[0] = JMP8;
                bytes[1] = i8::try_from(disp).ok()? as u8;
            }
            5 => {
                bytes[0] = JMP32;
                bytes[1..].copy_from_slice(&i32::try_from(disp).ok()?.to_le_bytes());
            }
            _ => return None,
        }
        // INVARIANT: `len` is 2 or 5, checked above.
        Some(Self {
            bytes,
            len: len as u8,
        })
    }

    /// The instruction a site of `len` bytes at `code` holds when it jumps (`jump`) or not.
    #[inline]
    pub fn for_site(code: usize, target: usize, len: usize, jump: bool) -> Option<Self> {
        if jump {
            Self::jmp(code, target, len)
        } else {
            Self::nop(len)
        }
    }

    /// Whether `have`, a site's bytes, starts with this instruction.
    #[inline]
    pub fn is_at(&self, have: &[u8; MAX_LEN]) -> bool {
        // Compared as one word, the bytes past the instruction masked off (they are zero in
        // `self.bytes`): no call to `memcmp()` or `memset()` for 2 or 5 bytes.
        let mask = (1u64 << (8 * u32::from(self.len))) - 1;
        wide(have) & mask == wide(&self.bytes)
    }

    /// The instruction's bytes, padded with zeroes to [`MAX_LEN`].
    #[inline]
    pub fn padded(&self) -> &[u8; MAX_LEN] {
        &self.bytes
    }

    /// The instruction's bytes.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// The instruction's size: 2 or 5.
    #[inline]
    pub fn size(&self) -> usize {
        usize::from(self.len)
    }
}

/// The size of the site at `code` if its bytes `have` start with the instruction a key puts
/// there when the site jumps (`jump`: its JMP to `target`) or falls through (its NOP), as
/// [`site_size`], [`SiteInsn::for_site`] and [`SiteInsn::is_at`] find it together, in a few
/// compares of words; `None` for anything else.
#[inline(always)]
pub fn site_holds(code: usize, target: usize, have: &[u8; MAX_LEN], jump: bool) -> Option<usize> {
    let word = wide(have);
    if !jump {
        return if word & 0xffff == u64::from(u16::from_le_bytes(NOP2)) {
            Some(2)
        } else if word == wide(&NOP5) {
            Some(5)
        } else {
            None
        };
    }
    let (len, rel) = match have[0] {
        JMP8 => (2, i64::from(have[1] as i8)),
        JMP32 => (5, i64::from((word >> 8) as u32 as i32)),
        _ => return None,
    };
    let disp = (target as i64).wrapping_sub(code.wrapping_add(len) as i64);
    (rel == disp).then_some(len)
}

/// What a site's bytes are.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Decoded {
    /// The NOP of the site's size.
    Nop,
    /// A JMP of the site's size, to the given address.
    Jmp(usize),
    /// An INT3: the site is being patched.
    Int3,
    /// Anything else: the site holds an instruction the key did not put there.
    Other,
}

/// Decodes the `bytes` of a site at address `code`.
///
/// `bytes` holds the site's bytes: its length is the site's size.
pub fn decode(code: usize, bytes: &[u8]) -> Decoded {
    match bytes {
        b if b == NOP2 || b == NOP5 => Decoded::Nop,
        [JMP8, rel] => Decoded::Jmp(
            code.wrapping_add(2)
                .wrapping_add_signed(isize::from(*rel as i8)),
        ),
        [JMP32, r0, r1, r2, r3] => {
            let rel = i32::from_le_bytes([*r0, *r1, *r2, *r3]);
            Decoded::Jmp(code.wrapping_add(5).wrapping_add_signed(rel as isize))
        }
        [INT3, ..] => Decoded::Int3,
        _ => Decoded::Other,
    }
}

/// The size of the site instruction that starts `bytes`, if it is one a key puts there: the
/// NOP or JMP of 2 or 5 bytes. Unlike `arch_jump_entry_size()`, which `BUG()`s, a corrupted
/// site gives `None`.
pub fn site_size(bytes: &[u8; MAX_LEN]) -> Option<usize> {
    match bytes {
        [0x66, 0x90, ..] | [JMP8, ..] => Some(2),
        [0x0f, 0x1f, 0x44, 0x00, 0x00] | [JMP32, ..] => Some(5),
        _ => None,
    }
}

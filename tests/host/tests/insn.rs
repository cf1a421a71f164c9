// SPDX-License-Identifier: GPL-2.0

//! Site encodings and the branch macros' flag logic, against a reference model.

use jump_label_rs_host::x86::{self as insn, Decoded, SiteInsn};
use proptest::prelude::*;

#[test]
fn nops_are_the_kernel_nops() {
    assert_eq!(SiteInsn::nop(2).unwrap().as_bytes(), &[0x66, 0x90]);
    assert_eq!(
        SiteInsn::nop(5).unwrap().as_bytes(),
        &[0x0f, 0x1f, 0x44, 0x00, 0x00]
    );
    for len in [0, 1, 3, 4, 6, 8] {
        assert_eq!(SiteInsn::nop(len), None, "len {len}");
        assert_eq!(SiteInsn::jmp(0x1000, 0x1010, len), None, "len {len}");
    }
}

#[test]
fn jmp_known_encodings() {
    // `eb 02` at a 2-byte site jumping over two bytes, as seen in a built kernel.
    let code = 0xffff_ffff_8100_0000usize;
    assert_eq!(
        SiteInsn::jmp(code, code + 4, 2).unwrap().as_bytes(),
        &[0xeb, 0x02]
    );
    assert_eq!(
        SiteInsn::jmp(code, code, 2).unwrap().as_bytes(),
        &[0xeb, 0xfe]
    );
    assert_eq!(
        SiteInsn::jmp(code, code + 5 + 0x1234, 5)
            .unwrap()
            .as_bytes(),
        &[0xe9, 0x34, 0x12, 0x00, 0x00]
    );
    assert_eq!(
        SiteInsn::jmp(code, code - 0x10, 5).unwrap().as_bytes(),
        &[0xe9, 0xeb, 0xff, 0xff, 0xff]
    );
}

#[test]
fn jmp8_range_limits() {
    let code = 0x10_0000usize;
    assert!(SiteInsn::jmp(code, code + 2 + 127, 2).is_some());
    assert!(SiteInsn::jmp(code, code + 2 + 128, 2).is_none());
    assert!(SiteInsn::jmp(code, code + 2 - 128, 2).is_some());
    assert!(SiteInsn::jmp(code, code + 2 - 129, 2).is_none());
}

#[test]
fn decode_others() {
    assert_eq!(insn::decode(0, &[0xcc, 0x90]), Decoded::Int3);
    assert_eq!(insn::decode(0, &[0xcc, 0x1f, 0x44, 0, 0]), Decoded::Int3);
    assert_eq!(insn::decode(0, &[0x90, 0x90]), Decoded::Other);
    assert_eq!(insn::decode(0, &[0xe8, 0, 0, 0, 0]), Decoded::Other);
    assert_eq!(insn::decode(0, &[0x66, 0x90, 0x90]), Decoded::Other);
}

/// The C macros' behaviour (include/linux/jump_label.h), written out case by case: which
/// instruction a site starts with, and what the site evaluates to.
fn c_model(initial: bool, likely: bool) -> (bool, i32) {
    // (starts as NOP, branch bit)
    match (initial, likely) {
        // static_branch_likely() on a true key: !arch_static_branch(key, true)
        (true, true) => (true, 1),
        // static_branch_unlikely() on a true key: arch_static_branch_jump(key, false)
        (true, false) => (false, 0),
        // static_branch_likely() on a false key: !arch_static_branch_jump(key, true)
        (false, true) => (false, 1),
        // static_branch_unlikely() on a false key: arch_static_branch(key, false)
        (false, false) => (true, 0),
    }
}

#[test]
fn site_flags_match_the_c_macros() {
    for initial in [false, true] {
        for likely in [false, true] {
            let flags = insn::site_flags(initial, likely);
            let (nop, branch) = c_model(initial, likely);
            assert_eq!(flags & 1, branch, "initial {initial} likely {likely}");
            assert_eq!(flags & 2 != 0, nop, "initial {initial} likely {likely}");
            // At boot the site holds what jump_label_type() says for the initial value.
            assert_eq!(insn::site_jumps(initial, branch != 0), !nop);
            // Whatever the key's value, the site evaluates to it: the macro returns
            // `jumped != likely`.
            for enabled in [false, true] {
                let jumped = insn::site_jumps(enabled, branch != 0);
                assert_eq!(jumped != likely, enabled);
            }
        }
    }
}

proptest! {
    #[test]
    fn jmp_round_trips(code in 0x1000usize..usize::MAX / 2, disp in any::<i32>()) {
        let target = (code + 5).wrapping_add_signed(disp as isize);
        let jmp = SiteInsn::jmp(code, target, 5).unwrap();
        prop_assert_eq!(jmp.size(), 5);
        prop_assert_eq!(insn::decode(code, jmp.as_bytes()), Decoded::Jmp(target));
        prop_assert_eq!(SiteInsn::for_site(code, target, 5, false), SiteInsn::nop(5));
    }

    #[test]
    fn jmp8_round_trips_or_refuses(code in 0x1000usize..usize::MAX / 2, disp in -300i64..300) {
        let target = (code as i64 + 2 + disp) as usize;
        match SiteInsn::jmp(code, target, 2) {
            Some(jmp) => {
                prop_assert!((-128..=127).contains(&disp));
                prop_assert_eq!(insn::decode(code, jmp.as_bytes()), Decoded::Jmp(target));
            }
            None => prop_assert!(!(-128..=127).contains(&disp)),
        }
    }
}

/// What the walk of a key flip asks of a site's bytes, the three steps of
/// `site_size()`, `SiteInsn::for_site()` and `is_at()`.
fn holds_model(code: usize, target: usize, have: &[u8; 5], jump: bool) -> Option<usize> {
    let len = insn::site_size(have)?;
    SiteInsn::for_site(code, target, len, jump)
        .filter(|i| i.is_at(have))
        .map(|_| len)
}

/// Bytes a site may hold: a key's instructions, to `target` or near it, with a byte changed or
/// not, or anything.
fn site_bytes(code: usize, target: usize) -> impl Strategy<Value = [u8; 5]> {
    let key_insn = (0usize..4, -2i64..3).prop_map(move |(k, off)| {
        let to = (target as i64 + off) as usize;
        let mut b = [0x90u8; 5];
        match k {
            0 => b[..2].copy_from_slice(&insn::NOP2),
            1 => b = insn::NOP5,
            2 => {
                if let Some(j) = SiteInsn::jmp(code, to, 2) {
                    b[..2].copy_from_slice(j.as_bytes());
                }
            }
            _ => b = *SiteInsn::jmp(code, to, 5).unwrap().padded(),
        }
        b
    });
    prop_oneof![
        key_insn.clone(),
        (key_insn, 0usize..5, 1u8..=255).prop_map(|(mut b, i, x)| {
            b[i] ^= x;
            b
        }),
        any::<[u8; 5]>(),
    ]
}

proptest! {
    /// `site_holds()` finds what the three steps find, for any bytes.
    #[test]
    fn site_holds_is_size_then_compare(
        (code, target, have) in (0x1000usize..usize::MAX / 2, -200i64..200)
            .prop_flat_map(|(code, d)| {
                let target = (code as i64 + d) as usize;
                (Just(code), Just(target), site_bytes(code, target))
            }),
        jump in any::<bool>(),
    ) {
        prop_assert_eq!(
            insn::site_holds(code, target, &have, jump),
            holds_model(code, target, &have, jump),
            "{:02x?}", have
        );
    }
}

/// A site's size comes from the instruction a key puts there, and a corrupted site has none,
/// where `arch_jump_entry_size()` would decode it and BUG() on any other length.
#[test]
fn site_size_of_key_instructions_only() {
    let mut b = [0u8; 5];
    b[..2].copy_from_slice(&insn::NOP2);
    assert_eq!(insn::site_size(&b), Some(2));
    assert_eq!(insn::site_size(&[insn::JMP8, 3, 0x90, 0x90, 0x90]), Some(2));
    assert_eq!(insn::site_size(&insn::NOP5), Some(5));
    assert_eq!(insn::site_size(&[insn::JMP32, 1, 2, 3, 4]), Some(5));
    for bad in [
        [0x90; 5],
        [0xcc; 5],
        [0x0f, 0x1f, 0x40, 0x00, 0x90],
        [0x66, 0x0f, 0x1f, 0, 0],
    ] {
        assert_eq!(insn::site_size(&bad), None, "{bad:02x?}");
    }
}

/// `is_at` compares a site's bytes with the instruction, whatever follows it.
#[test]
fn insn_is_at_ignores_what_follows() {
    let code = 0xffff_ffff_8100_0000usize;
    for len in [2, 5] {
        for insn in [
            SiteInsn::nop(len).unwrap(),
            SiteInsn::jmp(code, code + 0x40, len).unwrap(),
        ] {
            let mut have = [0xcc; insn::MAX_LEN];
            have[..len].copy_from_slice(insn.as_bytes());
            assert!(insn.is_at(&have));
            assert_eq!(&insn.padded()[..len], insn.as_bytes());
            for i in 0..len {
                let mut bad = have;
                bad[i] ^= 0x01;
                assert!(!insn.is_at(&bad), "len {len} byte {i}");
            }
        }
    }
}

// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `text_poke_rs`: sync rounds per key flip, read from the counters every mode
//! keeps, and the bytes at every site after every flip.
//!
//! The expected rounds depend on the implementation the kernel was booted with: 3 per flip
//! for `text_poke=rust` whatever the number of sites, 3 per page of 256 sites for `c`, and 3
//! per site for `serial`.

use kernel::{
    bindings,
    static_key::StaticKeyFalse, //
};

static KEY_1: StaticKeyFalse = StaticKeyFalse::new();
static KEY_64: StaticKeyFalse = StaticKeyFalse::new();
static KEY_256: StaticKeyFalse = StaticKeyFalse::new();
static KEY_1024: StaticKeyFalse = StaticKeyFalse::new();

/// Defines `$f::<A, B>`: one site on `$key` per instance. Each instance's body differs (it
/// adds its own constant), or identical functions would be merged into one.
macro_rules! sites_of {
    ($f:ident, $key:ident) => {
        #[inline(never)]
        fn $f<const A: u32, const B: u32>(x: u32) -> u32 {
            if kernel::static_branch_unlikely!($key) {
                x.wrapping_add(A * 32 + B + 1)
            } else {
                x
            }
        }
    };
}

sites_of!(site_1, KEY_1);
sites_of!(site_64, KEY_64);
sites_of!(site_256, KEY_256);
sites_of!(site_1024, KEY_1024);

/// Runs row `$a` of `$f`'s sites, 32 of them; evaluates to how many were taken.
macro_rules! row {
    ($f:ident, $a:literal) => {
        row!(@ $f, $a; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27
             28 29 30 31)
    };
    (@ $f:ident, $a:literal; $($b:literal)*) => {
        $( u32::from($f::<$a, $b>(0) != 0) + )* 0
    };
}

/// Runs rows `$a...` of `$f`'s sites.
macro_rules! rows {
    ($f:ident; $($a:literal)*) => {
        $( row!($f, $a) + )* 0
    };
}

/// Runs every site of every key; returns how many were taken, per key.
fn run_all() -> [u32; 4] {
    [
        u32::from(site_1::<0, 0>(0) != 0),
        rows!(site_64; 0 1),
        rows!(site_256; 0 1 2 3 4 5 6 7),
        rows!(site_1024; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26
              27 28 29 30 31),
    ]
}

fn stats() -> bindings::text_poke_rs_stats {
    let mut s = bindings::text_poke_rs_stats::default();
    // SAFETY: `s` is valid for writes.
    unsafe { bindings::text_poke_rs_read_stats(&mut s) };
    s
}

fn mode() -> u32 {
    // SAFETY: `text_poke_rs_mode` is `__ro_after_init`.
    (unsafe { bindings::text_poke_rs_mode }) as u32
}

/// The sync rounds a flip of a key with `sites` sites takes in the booted mode.
fn expected_rounds(sites: u64) -> u64 {
    match mode() {
        bindings::text_poke_rs_mode_TEXT_POKE_RS_MODE_SERIAL => 3 * sites,
        bindings::text_poke_rs_mode_TEXT_POKE_RS_MODE_C => 3 * sites.div_ceil(256),
        _ => 3,
    }
}

/// Checks every site of `key`: returns (sites, sites whose bytes are not what the key's value
/// calls for).
fn check_sites(key: &StaticKeyFalse) -> (u64, u64) {
    let enabled = key.is_enabled();
    let (mut n, mut wrong) = (0, 0);
    let ret = key.for_each_site(|site| {
        n += 1;
        let ok = match site.expected(enabled) {
            Some(want) => want.as_bytes() == &site.read()[..site.size()],
            None => false,
        };
        if !ok {
            wrong += 1;
        }
    });
    if ret.is_err() {
        wrong += 1;
    }
    (n, wrong)
}

#[kernel::prelude::kunit_tests(text_poke_rs)]
mod tests {
    use super::*;

    #[test]
    fn sites_exist() {
        assert_eq!(check_sites(&KEY_1), (1, 0));
        assert_eq!(check_sites(&KEY_64), (64, 0));
        assert_eq!(check_sites(&KEY_256), (256, 0));
        assert_eq!(check_sites(&KEY_1024), (1024, 0));
        assert_eq!(run_all(), [0, 0, 0, 0]);
    }

    #[test]
    fn sync_rounds_per_flip() {
        let keys: [(&StaticKeyFalse, u64); 4] = [
            (&KEY_1, 1),
            (&KEY_64, 64),
            (&KEY_256, 256),
            (&KEY_1024, 1024),
        ];
        for (i, (key, sites)) in keys.iter().enumerate() {
            for enable in [true, false] {
                let before = stats();
                if enable {
                    key.enable();
                } else {
                    key.disable();
                }
                let after = stats();
                assert_eq!(after.syncs - before.syncs, expected_rounds(*sites));
                assert_eq!(after.entries - before.entries, *sites);
                assert_eq!(check_sites(key), (*sites, 0));
                let taken = run_all();
                assert_eq!(u64::from(taken[i]), if enable { *sites } else { 0 });
            }
        }
    }

    #[test]
    fn ipis_follow_rounds() {
        let before = stats();
        KEY_64.enable();
        KEY_64.disable();
        let after = stats();
        // SAFETY: `__num_online_cpus` is a valid `atomic_t`; a volatile read of its counter is
        // `num_online_cpus()`, which is inline in C.
        let online =
            unsafe { core::ptr::read_volatile(&raw const bindings::__num_online_cpus.counter) };
        let others = u64::try_from(online).unwrap_or(1) - 1;
        assert_eq!(
            after.ipis - before.ipis,
            (after.syncs - before.syncs) * others
        );
        assert!(after.max_batch >= if mode() == 0 { 1024 } else { 1 });
    }
}

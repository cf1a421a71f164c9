// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `text_poke_rs`: sync rounds per key flip, read from the counters every mode
//! keeps, and the bytes at every site after every flip.
//!
//! The expected rounds depend on the implementation the kernel was booted with: 3 per flip
//! for `text_poke=rust` whatever the number of sites, 3 per page of 256 sites for `c`, and 3
//! per site for `serial`.

use kernel::{
    bindings,
    static_key::{
        StaticKeyFalse,
        Transaction, //
    },
};

static KEY_1: StaticKeyFalse = StaticKeyFalse::new();
static KEY_64: StaticKeyFalse = StaticKeyFalse::new();
static KEY_256: StaticKeyFalse = StaticKeyFalse::new();
static KEY_1024: StaticKeyFalse = StaticKeyFalse::new();
static KEY_STRESS: StaticKeyFalse = StaticKeyFalse::new();
static TXN_0: StaticKeyFalse = StaticKeyFalse::new();
static TXN_1: StaticKeyFalse = StaticKeyFalse::new();
static TXN_2: StaticKeyFalse = StaticKeyFalse::new();
static TXN_3: StaticKeyFalse = StaticKeyFalse::new();
static TXN_4: StaticKeyFalse = StaticKeyFalse::new();
static TXN_5: StaticKeyFalse = StaticKeyFalse::new();
static TXN_6: StaticKeyFalse = StaticKeyFalse::new();
static TXN_7: StaticKeyFalse = StaticKeyFalse::new();

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
sites_of!(site_stress, KEY_STRESS);
sites_of!(site_txn_0, TXN_0);
sites_of!(site_txn_1, TXN_1);
sites_of!(site_txn_2, TXN_2);
sites_of!(site_txn_3, TXN_3);
sites_of!(site_txn_4, TXN_4);
sites_of!(site_txn_5, TXN_5);
sites_of!(site_txn_6, TXN_6);
sites_of!(site_txn_7, TXN_7);

/// The sites of [`KEY_STRESS`].
const STRESS_SITES: [fn(u32) -> u32; 4] = [
    site_stress::<0, 0>,
    site_stress::<0, 1>,
    site_stress::<0, 2>,
    site_stress::<0, 3>,
];

/// Flips of [`KEY_STRESS`] in the stress test.
const STRESS_FLIPS: u64 = 10_000;

// Executor threads, in kernel/jump_label_rs/text_poke_stress.c.
extern "C" {
    fn text_poke_stress_start(pass: extern "C" fn() -> core::ffi::c_ulong, max: u32) -> i32;
    fn text_poke_stress_stop(passes: *mut core::ffi::c_ulong, wrong: *mut core::ffi::c_ulong);
}

/// One executor pass: runs every stress site once and counts results that are neither the
/// disabled direction (`0`) nor the enabled one (`B + 1`).
extern "C" fn stress_pass() -> core::ffi::c_ulong {
    let mut wrong = 0;
    for (b, site) in (1u32..).zip(STRESS_SITES.iter()) {
        let r = site(0);
        if r != 0 && r != b {
            wrong += 1;
        }
    }
    wrong
}

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

/// The eight keys of the transaction test, 64 sites each.
fn txn_keys() -> [&'static StaticKeyFalse; 8] {
    [
        &TXN_0, &TXN_1, &TXN_2, &TXN_3, &TXN_4, &TXN_5, &TXN_6, &TXN_7,
    ]
}

/// Runs every site of the transaction keys; returns how many were taken, per key.
fn run_txn() -> [u32; 8] {
    [
        rows!(site_txn_0; 0 1),
        rows!(site_txn_1; 0 1),
        rows!(site_txn_2; 0 1),
        rows!(site_txn_3; 0 1),
        rows!(site_txn_4; 0 1),
        rows!(site_txn_5; 0 1),
        rows!(site_txn_6; 0 1),
        rows!(site_txn_7; 0 1),
    ]
}

fn stats() -> bindings::text_poke_rs_stats {
    let mut s = bindings::text_poke_rs_stats::default();
    // SAFETY: `s` is valid for writes.
    unsafe { bindings::text_poke_rs_read_stats(&mut s) };
    s
}

/// Counts, in the `own_*` statistics, what this task patches until the guard is dropped: the
/// rest of the kernel (ftrace, say) may patch text at the same time.
struct Track;

impl Track {
    fn new() -> Self {
        // SAFETY: Only records the current task.
        unsafe { bindings::text_poke_rs_track(true) };
        Track
    }
}

impl Drop for Track {
    fn drop(&mut self) {
        // SAFETY: Only clears the tracked task.
        unsafe { bindings::text_poke_rs_track(false) };
    }
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

/// Checks every site of `key`: (sites, wrong sites); a failed walk counts as a wrong site.
fn check_sites(key: &StaticKeyFalse) -> (u64, u64) {
    let (sites, wrong) = key.check_sites().unwrap_or((0, 1));
    (sites as u64, wrong as u64)
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
        let _track = Track::new();
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
                assert_eq!(after.own_syncs - before.own_syncs, expected_rounds(*sites));
                assert_eq!(after.own_entries - before.own_entries, *sites);
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
        assert!(after.batches > before.batches);
        assert!(after.batch_ns > before.batch_ns);
        assert!(after.max_batch >= if mode() == 0 { 1024 } else { 1 });
    }

    #[test]
    fn transaction_of_eight_keys() {
        let _track = Track::new();
        let keys = txn_keys();
        // One by one: every key its own batch.
        let before = stats();
        for key in keys {
            key.enable();
        }
        let after = stats();
        assert_eq!(after.own_syncs - before.own_syncs, 8 * expected_rounds(64));
        for key in keys {
            key.disable();
        }

        // As one transaction: one batch of 512 sites, sorted across the keys.
        for enable in [true, false] {
            let before = stats();
            let mut txn = Transaction::begin();
            for key in keys {
                let ret = if enable {
                    txn.enable(key)
                } else {
                    txn.disable(key)
                };
                assert!(ret.is_ok());
            }
            // A key changes once per transaction.
            assert!(txn.enable(keys[0]).is_err());
            txn.commit();
            let after = stats();
            let rounds = match mode() {
                bindings::text_poke_rs_mode_TEXT_POKE_RS_MODE_RUST => 3,
                _ => 8 * expected_rounds(64),
            };
            assert_eq!(after.own_syncs - before.own_syncs, rounds);
            assert_eq!(after.own_entries - before.own_entries, 512);
            for key in keys {
                assert_eq!(check_sites(key), (64, 0));
            }
            assert_eq!(run_txn(), [if enable { 64 } else { 0 }; 8]);
        }
    }

    #[test]
    fn flips_under_concurrent_execution() {
        let _track = Track::new();
        // SAFETY: `stress_pass` may run on any CPU at any time; nothing else runs executors.
        let started = unsafe { text_poke_stress_start(stress_pass, 3) };
        assert!(started >= 3);
        let before = stats();
        // Every flip must land: each one is checked site by site before the next.
        let mut lost = 0;
        for _ in 0..STRESS_FLIPS / 2 {
            KEY_STRESS.enable();
            if check_sites(&KEY_STRESS) != (4, 0) {
                lost += 1;
            }
            KEY_STRESS.disable();
            if check_sites(&KEY_STRESS) != (4, 0) {
                lost += 1;
            }
        }
        let after = stats();
        let (mut passes, mut wrong) = (0, 0);
        // SAFETY: Both pointers are valid for writes.
        unsafe { text_poke_stress_stop(&mut passes, &mut wrong) };

        // Every executed site took the old or the new direction.
        assert_eq!(wrong, 0);
        assert!(passes > 0);
        // Executors ran into sites being patched, and the handler emulated them.
        assert!(after.int3_hits > before.int3_hits);
        kernel::pr_info!(
            "text_poke_rs stress: {} flips, {} executor passes, {} INT3s emulated, {} syncs\n",
            STRESS_FLIPS,
            passes,
            after.int3_hits - before.int3_hits,
            after.syncs - before.syncs
        );
        // No flip was lost, each took at least its rounds (other text patching in the kernel
        // may add some), and the key ends as it started.
        assert_eq!(lost, 0);
        assert!(
            after.own_syncs - before.own_syncs
                == STRESS_FLIPS * expected_rounds(STRESS_SITES.len() as u64)
        );
        assert!(!KEY_STRESS.is_enabled());
        assert_eq!(check_sites(&KEY_STRESS), (4, 0));
        assert_eq!(stress_pass(), 0);
    }
}

// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `text_poke_batch`: sync rounds per key flip, read from the counters every mode
//! keeps, and the bytes at every site after every flip.
//!
//! The expected rounds depend on the implementation the kernel was booted with: 3 per flip
//! for `text_poke_batch=rust` whatever the number of sites, 3 per page of 256 sites for `c`, and 3
//! per site for `serial`.

use kernel::{
    bindings,
    jump_label::{
        x86 as insn,
        StaticKeyFalse,
        Transaction, //
    },
    kunit::ExpectedWarnings,
    prelude::*,
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
static KEY_CORRUPT: StaticKeyFalse = StaticKeyFalse::new();
static KEY_RACE: StaticKeyFalse = StaticKeyFalse::new();
static KEY_CLAIMED: StaticKeyFalse = StaticKeyFalse::new();
#[cfg(all(
    CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE,
    CONFIG_CONTEXT_TRACKING_WORK_STATS
))]
static KEY_IDLE: StaticKeyFalse = StaticKeyFalse::new();

include!("sites.rs");

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
sites_of!(site_corrupt, KEY_CORRUPT);
sites_of!(site_race, KEY_RACE);
sites_of!(site_claimed, KEY_CLAIMED);
#[cfg(all(
    CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE,
    CONFIG_CONTEXT_TRACKING_WORK_STATS
))]
sites_of!(site_idle, KEY_IDLE);

/// The sites of [`KEY_STRESS`].
const STRESS_SITES: [fn() -> u32; 4] = [
    site_stress::<0, 0>,
    site_stress::<0, 1>,
    site_stress::<0, 2>,
    site_stress::<0, 3>,
];

/// Flips of [`KEY_STRESS`] in the stress test.
const STRESS_FLIPS: u64 = 10_000;

/// Flips of [`KEY_1024`] while executors run every one of its sites.
const LARGE_FLIPS: u64 = 2;

// Executor threads and trace-event probes, in text_poke_stress.c.
extern "C" {
    fn text_poke_stress_start(pass: extern "C" fn() -> core::ffi::c_ulong, max: u32) -> i32;
    fn text_poke_stress_stop(passes: *mut core::ffi::c_ulong, wrong: *mut core::ffi::c_ulong);
    fn text_poke_sc_call(x: i32) -> i32;
    fn text_poke_sc_set(two: bool);
    fn text_poke_sc_tramp() -> *mut core::ffi::c_void;
    fn text_poke_trace_start() -> i32;
    fn text_poke_trace_stop(seen: *mut TraceSeen);
    fn text_poke_calls_start() -> i32;
    fn text_poke_calls_stop();
    fn text_poke_calls_run(cpu: i32) -> u32;
    #[cfg(CONFIG_FAIL_TEXT_POKE_BATCH)]
    fn text_poke_write_fail(nth: u32, times: i32);
}

/// What the `text_poke_batch` trace events of this task said: `struct text_poke_trace`.
#[repr(C)]
struct TraceSeen {
    batches: u64,
    sites: u64,
    syncs: u64,
    ns: u64,
    refused: u64,
    refused_key: *const core::ffi::c_void,
    refused_wrong: u32,
}

/// Probes on the trace events, from `new()` to `stop()`.
struct TraceProbe;

impl TraceProbe {
    fn new() -> Self {
        // SAFETY: Registers probes that only count; `stop()` unregisters them.
        assert_eq!(unsafe { text_poke_trace_start() }, 0);
        Self
    }

    fn stop(self) -> TraceSeen {
        let mut seen = TraceSeen {
            batches: 0,
            sites: 0,
            syncs: 0,
            ns: 0,
            refused: 0,
            refused_key: core::ptr::null(),
            refused_wrong: 0,
        };
        // SAFETY: `seen` is valid for writes; the probes were registered by `new()`.
        unsafe { text_poke_trace_stop(&mut seen) };
        seen
    }
}

/// One executor pass: runs every stress site once and counts results that are neither the
/// disabled direction (`0`) nor the enabled one (`B + 1`).
extern "C" fn stress_pass() -> core::ffi::c_ulong {
    let mut wrong = 0;
    for (b, site) in (1u32..).zip(STRESS_SITES.iter()) {
        let r = site();
        if r != 0 && r != b {
            wrong += 1;
        }
    }
    wrong
}

/// Runs the sites `$f::<$a, $b>` for each `$b`; evaluates to how many returned neither the
/// disabled direction (`0`) nor their own enabled one.
macro_rules! wrong_in_row {
    ($f:ident, $a:literal; $($b:literal)*) => {
        $( {
            let r = $f::<$a, $b>();
            u32::from(r != 0 && r != $a * 32 + $b + 1)
        } + )* 0
    };
}

/// Runs rows `$a...` of `$f`'s sites, 32 each; evaluates to how many took neither direction.
macro_rules! wrong_in_rows {
    ($f:ident; $($a:literal)*) => {
        $( wrong_in_row!($f, $a; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24
                         25 26 27 28 29 30 31) + )* 0
    };
}

/// One executor pass over every site of [`KEY_1024`], whose flips are batches large enough for
/// the INT3 handler's index: its first, middle and last sites, and sites that share a range of
/// the index. Counts the sites that took neither direction.
extern "C" fn large_pass() -> core::ffi::c_ulong {
    let wrong = wrong_in_rows!(site_1024; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20
                               21 22 23 24 25 26 27 28 29 30 31);
    core::ffi::c_ulong::from(wrong)
}

/// Runs every site of every key; returns how many were taken, per key.
fn run_all() -> [u32; 4] {
    [
        u32::from(site_1::<0, 0>() != 0),
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

fn stats() -> bindings::text_poke_batch_stats {
    let mut s = bindings::text_poke_batch_stats::default();
    // SAFETY: `s` is valid for writes.
    unsafe { bindings::text_poke_batch_read_stats(&mut s) };
    s
}

/// Counts, in the `own_*` statistics, what this task patches until the guard is dropped: the
/// rest of the kernel (ftrace, say) may patch text at the same time.
struct Track;

impl Track {
    fn new() -> Self {
        // SAFETY: Only records the current task.
        unsafe { bindings::text_poke_batch_track(true) };
        Track
    }
}

impl Drop for Track {
    fn drop(&mut self) {
        // SAFETY: Only clears the tracked task.
        unsafe { bindings::text_poke_batch_track(false) };
    }
}

fn mode() -> u32 {
    crate::measure::mode()
}

/// Switches deferral off until the guard is dropped, then back to what it was: every sync round
/// interrupts every other CPU meanwhile, idle ones too.
struct DeferralOff(bool);

impl DeferralOff {
    #[cfg(CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE)]
    fn new() -> Self {
        Self(Self::set(false))
    }

    #[cfg(not(CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE))]
    fn new() -> Self {
        Self(false)
    }

    /// Sets the switch to `on`; returns what it was.
    #[cfg(CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE)]
    fn set(on: bool) -> bool {
        // SAFETY: `ct_work_enabled` is a `bool` that lives as long as the kernel, only read
        // with `READ_ONCE()` and marked loads, and written with `WRITE_ONCE()`, as here.
        unsafe { kernel::sync::atomic::Atomic::from_ptr(&raw mut bindings::ct_work_enabled) }
            .xchg(on, kernel::sync::atomic::Relaxed)
    }
}

impl Drop for DeferralOff {
    fn drop(&mut self) {
        #[cfg(CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE)]
        Self::set(self.0);
        #[cfg(not(CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE))]
        let _ = self.0;
    }
}

/// The CPUs the test counts IPIs on: the guest has 4, a `u64` mask holds all it may have.
const MAX_CPUS: usize = 64;

/// Unrelated IPIs a CPU may receive while the IPI test flips its key.
const SLACK: u64 = 8;

/// How often a count that unrelated interrupts can inflate is measured before it fails.
const ATTEMPTS: usize = 3;

/// The online CPUs below [`MAX_CPUS`], as a mask.
fn online_cpus() -> u64 {
    let mut mask = 0u64;
    for cpu in 0..MAX_CPUS {
        // SAFETY: Only reads the online mask, `cpu_online()`, which is inline in C.
        if unsafe { bindings::cpumask_test_cpu(cpu as i32, &raw mut bindings::__cpu_online_mask) } {
            mask |= 1 << cpu;
        }
    }
    mask
}

/// The function-call IPIs each CPU has received (0 for CPUs not online).
fn ipis_received() -> [u32; MAX_CPUS] {
    let mut counts = [0u32; MAX_CPUS];
    let online = online_cpus();
    for (cpu, c) in counts.iter_mut().enumerate() {
        if online & (1 << cpu) != 0 {
            // SAFETY: `cpu` is a possible CPU; only its counter is read.
            *c = unsafe { bindings::text_poke_batch_ipis_received(cpu as i32) };
        }
    }
    counts
}

/// Counts the cross-CPU function calls every CPU runs, from `new()` until dropped.
struct CallCount;

impl CallCount {
    fn new() -> Self {
        // SAFETY: Registers a probe that only counts; `drop()` unregisters it.
        assert_eq!(unsafe { text_poke_calls_start() }, 0);
        Self
    }

    /// The calls each CPU has run (0 for CPUs not online).
    fn read(&self) -> [u32; MAX_CPUS] {
        let mut counts = [0u32; MAX_CPUS];
        let online = online_cpus();
        for (cpu, c) in counts.iter_mut().enumerate() {
            if online & (1 << cpu) != 0 {
                // SAFETY: `cpu` is a possible CPU; only its counter is read.
                *c = unsafe { text_poke_calls_run(cpu as i32) };
            }
        }
        counts
    }
}

impl Drop for CallCount {
    fn drop(&mut self) {
        // SAFETY: The probe was registered by `new()`.
        unsafe { text_poke_calls_stop() };
    }
}

/// The sync rounds a flip of a key with `sites` sites takes in the booted mode.
fn expected_rounds(sites: u64) -> u64 {
    match mode() {
        bindings::text_poke_batch_mode_TEXT_POKE_BATCH_MODE_SERIAL => 3 * sites,
        bindings::text_poke_batch_mode_TEXT_POKE_BATCH_MODE_C => 3 * sites.div_ceil(256),
        _ => 3,
    }
}

/// Checks every site of `key`: (sites, wrong sites); a failed walk counts as a wrong site.
fn check_sites(key: &StaticKeyFalse) -> (u64, u64) {
    let (sites, wrong) = key.check_sites().unwrap_or((0, 1));
    (sites as u64, wrong as u64)
}

/// Flips of [`KEY_RACE`] by the test's own task while the executors flip it too.
const RACE_FLIPS: u32 = 500;

/// Static call updates [`static_calls_are_written_by_the_batch`] makes.
const STATIC_CALL_UPDATES: u32 = 100;

/// One pass of an executor calling through the test's static call while it is updated: the call
/// must reach one of the two functions. Returns 1 if it reached neither.
extern "C" fn static_call_pass() -> core::ffi::c_ulong {
    // SAFETY: The helper only calls through the static call.
    let got = unsafe { text_poke_sc_call(40) };
    core::ffi::c_ulong::from(got != 41 && got != 42)
}

/// One racing pass: takes a reference on [`KEY_RACE`], checks that every one of its sites now
/// branches, and drops the reference. Returns the sites that did not branch, plus one if a
/// reference could not be taken.
extern "C" fn race_pass() -> core::ffi::c_ulong {
    if KEY_RACE.inc().is_err() {
        return 1;
    }
    let taken = row!(site_race, 0);
    KEY_RACE.dec();
    core::ffi::c_ulong::from(32 - taken)
}

/// The addresses and bytes of every site of `key`, 32 at most.
fn snapshot(key: &StaticKeyFalse) -> [(usize, [u8; insn::MAX_LEN]); 32] {
    let mut sites = [(0, [0; insn::MAX_LEN]); 32];
    let mut i = 0;
    let ret = key.for_each_site(|site| {
        if let Some(slot) = sites.get_mut(i) {
            *slot = (site.code(), site.read());
        }
        i += 1;
    });
    assert!(ret.is_ok());
    assert_eq!(i, 32);
    sites
}

/// Rewrites the site at `code` with `bytes`.
///
/// The bytes are written at once, without the INT3 protocol (which cannot emulate what a
/// corrupted site holds): no other CPU may run the site meanwhile.
fn write_site(code: usize, bytes: &[u8]) {
    // SAFETY: The test holds no lock of a flip, changes no key while it holds `text_mutex`, and
    // drops the guard on return.
    let _text = unsafe { kernel::jump_label::TextLock::lock() };
    // SAFETY: `code` is a site of a test key that only this test runs, kernel text of at least
    // `bytes.len()` bytes; `_text` holds `text_mutex` around the write and the sync after it.
    unsafe {
        bindings::text_poke(
            code as *mut core::ffi::c_void,
            bytes.as_ptr().cast(),
            bytes.len(),
        );
        bindings::smp_text_poke_sync_each_cpu();
    }
}

/// Switches the implementation; the one booted is restored when the guard is dropped.
#[cfg(CONFIG_TEXT_POKE_BATCH_MEASURE)]
struct ModeGuard(u32);

#[cfg(CONFIG_TEXT_POKE_BATCH_MEASURE)]
impl ModeGuard {
    fn new() -> Self {
        Self(mode())
    }

    fn set(&self, mode: u32) -> i32 {
        // SAFETY: This task may sleep and holds none of the locks the switch takes.
        unsafe { bindings::text_poke_batch_set_mode(mode as i32) }
    }
}

#[cfg(CONFIG_TEXT_POKE_BATCH_MEASURE)]
impl Drop for ModeGuard {
    fn drop(&mut self) {
        self.set(self.0);
    }
}

#[kernel::prelude::kunit_tests(text_poke_batch)]
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
                    assert_eq!(key.enable(), Ok(()));
                } else {
                    assert_eq!(key.disable(), Ok(()));
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
    fn trace_events_report_batches() {
        // Each flip of a 64-site key is one batch of 64 sites in 3 rounds, or 64 batches of
        // one site in `serial`, as its trace events say.
        let probe = TraceProbe::new();
        assert_eq!(KEY_64.enable(), Ok(()));
        assert_eq!(KEY_64.disable(), Ok(()));
        let seen = probe.stop();
        let serial = mode() == bindings::text_poke_batch_mode_TEXT_POKE_BATCH_MODE_SERIAL;
        assert_eq!(seen.batches, if serial { 128 } else { 2 });
        assert_eq!(seen.sites, 128);
        assert_eq!(seen.syncs, 2 * expected_rounds(64));
        assert!(seen.ns > 0);
        assert_eq!(seen.refused, 0);
    }

    #[test]
    fn ipis_reach_every_cpu() {
        // Registering the probe flips its event's key: before this task is tracked.
        let calls = CallCount::new();
        let _track = Track::new();
        // With deferral on, idle CPUs take a work bit instead (suite text_poke_batch_defer).
        let _off = DeferralOff::new();
        // Every round runs a sync on every online CPU: the flipping one calls it, every other
        // one takes an IPI, or, if it polls in idle, runs it when it leaves the loop, with no
        // IPI sent. What each CPU ran (the csd_function_entry event) gives the lower bounds, on
        // every attempt; what each received (the CAL line of /proc/interrupts) the upper ones.
        // Unrelated function calls (a TLB shootdown, the switch to the TSC clocksource,
        // another task's text poke) can only add to both: the upper bounds hold on at least
        // one of a few attempts.
        let mut quiet = false;
        for _ in 0..ATTEMPTS {
            let cpus = online_cpus();
            let before_ran = calls.read();
            let before_cal = ipis_received();
            let before = stats();
            assert_eq!(KEY_64.enable(), Ok(()));
            assert_eq!(KEY_64.disable(), Ok(()));
            let after = stats();
            let after_cal = ipis_received();
            let after_ran = calls.read();
            let rounds = after.own_syncs - before.own_syncs;
            assert_eq!(rounds, 2 * expected_rounds(64));
            let mut total = 0u64;
            let mut most = 0u64;
            let mut short = 0u64;
            for cpu in 0..MAX_CPUS {
                if cpus & (1 << cpu) == 0 {
                    continue;
                }
                let ran = u64::from(after_ran[cpu].wrapping_sub(before_ran[cpu]));
                short += u64::from(ran < rounds);
                let got = u64::from(after_cal[cpu].wrapping_sub(before_cal[cpu]));
                total += got;
                most = most.max(got);
            }
            assert_eq!(short, 0);
            assert!(after.batches > before.batches);
            assert!(after.batch_ns > before.batch_ns);
            // The largest batch so far, boot included, holds at least this test's 64 sites
            // when they are one batch.
            let one_batch = mode() != bindings::text_poke_batch_mode_TEXT_POKE_BATCH_MODE_SERIAL;
            assert!(after.max_batch >= if one_batch { 64 } else { 1 });
            let others = u64::from(cpus.count_ones()) - 1;
            if most <= rounds + SLACK && total <= rounds * others + SLACK {
                quiet = true;
                break;
            }
        }
        assert!(quiet);
    }

    #[test]
    fn transaction_of_eight_keys() {
        let _track = Track::new();
        let keys = txn_keys();
        // One by one: every key its own batch.
        let before = stats();
        for key in keys {
            assert_eq!(key.enable(), Ok(()));
        }
        let after = stats();
        assert_eq!(after.own_syncs - before.own_syncs, 8 * expected_rounds(64));
        for key in keys {
            assert_eq!(key.disable(), Ok(()));
        }

        // As one transaction: one batch of 512 sites, sorted across the keys.
        for enable in [true, false] {
            let before = stats();
            let mut txn = Transaction::new();
            for key in keys {
                let ret = if enable {
                    txn.enable(key)
                } else {
                    txn.disable(key)
                };
                assert!(ret.is_ok());
            }
            // A key changes once per transaction.
            assert_eq!(txn.enable(keys[0]), Err(EBUSY));
            // Nothing changes before the commit.
            assert_eq!(run_txn(), [if enable { 0 } else { 64 }; 8]);
            assert_eq!(keys[7].is_enabled(), !enable);
            assert_eq!(txn.commit(), Ok(()));
            let after = stats();
            let rounds = match mode() {
                bindings::text_poke_batch_mode_TEXT_POKE_BATCH_MODE_RUST => 3,
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
            assert_eq!(KEY_STRESS.enable(), Ok(()));
            if check_sites(&KEY_STRESS) != (4, 0) {
                lost += 1;
            }
            assert_eq!(KEY_STRESS.disable(), Ok(()));
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
            "text_poke_batch stress: {} flips, {} executor passes, {} INT3s emulated, {} syncs\n",
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

    #[test]
    fn large_batch_under_concurrent_execution() {
        let _track = Track::new();
        // SAFETY: `large_pass` may run on any CPU at any time; nothing else runs executors.
        let started = unsafe { text_poke_stress_start(large_pass, 3) };
        assert!(started >= 3);
        let before = stats();
        let mut lost = 0;
        for _ in 0..LARGE_FLIPS / 2 {
            assert_eq!(KEY_1024.enable(), Ok(()));
            lost += u32::from(check_sites(&KEY_1024) != (1024, 0));
            assert_eq!(KEY_1024.disable(), Ok(()));
            lost += u32::from(check_sites(&KEY_1024) != (1024, 0));
        }
        let after = stats();
        // A write of phase 3 that does not land: the sites go back to their NOPs through
        // INT3s again, under the executors, and the flip is refused.
        #[cfg(CONFIG_FAIL_TEXT_POKE_BATCH)]
        let undone = mode() == bindings::text_poke_batch_mode_TEXT_POKE_BATCH_MODE_RUST && {
            // A phase's write checks: one a run of up to `TEXT_POKE_BATCH_RUN_PAGES` of the pages
            // its sites are on.
            let shift = kernel::page::PAGE_SHIFT;
            let (mut pages, mut last) = (0usize, None);
            let walked = KEY_1024.for_each_site(|site| {
                for page in site.code() >> shift..=(site.code() + site.size() - 1) >> shift {
                    if last.is_none_or(|l| page > l) {
                        pages += 1;
                        last = Some(page);
                    }
                }
            });
            assert!(walked.is_ok());
            let runs = pages.div_ceil(bindings::TEXT_POKE_BATCH_RUN_PAGES as usize);
            let warnings = ExpectedWarnings::new();
            // SAFETY: Only sets the fault attributes and this task's flag.
            unsafe { text_poke_write_fail((2 * runs + 1) as u32, 1) };
            let ret = KEY_1024.enable();
            // SAFETY: As above.
            unsafe { text_poke_write_fail(0, 0) };
            assert_eq!(ret, Err(EIO));
            assert_eq!(warnings.as_ref().map(ExpectedWarnings::count), Some(1));
            assert!(!KEY_1024.is_enabled());
            lost += u32::from(check_sites(&KEY_1024) != (1024, 0));
            true
        };
        #[cfg(not(CONFIG_FAIL_TEXT_POKE_BATCH))]
        let undone = false;
        let end = stats();
        let (mut passes, mut wrong) = (0, 0);
        // SAFETY: Both pointers are valid for writes.
        unsafe { text_poke_stress_stop(&mut passes, &mut wrong) };

        // Every site every executor ran took the old or the new direction, undo included.
        assert_eq!(wrong, 0);
        assert!(passes > 0);
        // Executors ran into sites being patched, and the handler found them.
        assert!(after.int3_hits > before.int3_hits);
        assert!(!undone || end.int3_hits > after.int3_hits);
        assert_eq!(lost, 0);
        assert!(!KEY_1024.is_enabled());
        assert_eq!(large_pass(), 0);
        kernel::pr_info!(
            "text_poke_batch large batch: {} flips{}, {} executor passes, {} INT3s emulated\n",
            LARGE_FLIPS,
            if undone { " and an undo" } else { "" },
            passes,
            end.int3_hits - before.int3_hits
        );
    }

    #[test]
    fn corrupt_site_refuses_flip() {
        let _track = Track::new();
        assert_eq!(check_sites(&KEY_CORRUPT), (32, 0));
        let good = snapshot(&KEY_CORRUPT);
        // One-byte NOPs: harmless to run, but not what the key put there, and not an
        // instruction of the site's size (`arch_jump_entry_size()` would BUG() on them).
        let (code, bytes) = good[5];
        let len = if bytes[..2] == insn::NOP2 { 2 } else { 5 };
        let bad = [0x90u8; insn::MAX_LEN];
        write_site(code, &bad[..len]);
        let mut corrupt = good;
        corrupt[5].1[..len].copy_from_slice(&bad[..len]);
        assert_eq!(snapshot(&KEY_CORRUPT), corrupt);
        assert_eq!(check_sites(&KEY_CORRUPT), (32, 1));

        let warnings = ExpectedWarnings::new();
        let count = || warnings.as_ref().map(ExpectedWarnings::count);
        let c_mode = mode() == bindings::text_poke_batch_mode_TEXT_POKE_BATCH_MODE_C;
        let probe = TraceProbe::new();
        // The Rust API refuses, and the key keeps its count and its text.
        let before = stats();
        assert_eq!(KEY_CORRUPT.enable(), Err(EINVAL));
        assert_eq!(count(), Some(1));
        assert!(!KEY_CORRUPT.is_enabled());
        assert_eq!(KEY_CORRUPT.count(), 0);
        assert_eq!(snapshot(&KEY_CORRUPT), corrupt);

        // A transaction with the corrupted key changes none of its keys.
        let mut txn = Transaction::new();
        assert_eq!(txn.enable(&KEY_1), Ok(()));
        assert_eq!(txn.enable(&KEY_CORRUPT), Ok(()));
        assert_eq!(txn.commit(), Err(EINVAL));
        assert_eq!(count(), Some(2));
        assert!(!KEY_1.is_enabled() && !KEY_CORRUPT.is_enabled());
        assert_eq!(run_all()[0], 0);
        assert_eq!(check_sites(&KEY_1), (1, 0));
        assert_eq!(snapshot(&KEY_CORRUPT), corrupt);

        // C callers cannot be told: the update refuses the flip, warns, writes nothing, and
        // `kernel/jump_label.c` puts the count back. Upstream's C update would BUG() instead,
        // so only the Rust update is tried.
        if !c_mode {
            assert_eq!(KEY_CORRUPT.inc(), Err(EINVAL));
            assert_eq!(count(), Some(3));
            assert_eq!(KEY_CORRUPT.count(), 0);
            assert_eq!(snapshot(&KEY_CORRUPT), corrupt);
            // SAFETY: `KEY_CORRUPT` is a valid key; this task may sleep.
            unsafe { bindings::static_key_enable(KEY_CORRUPT.as_raw()) };
            assert_eq!(count(), Some(4));
            assert_eq!(KEY_CORRUPT.count(), 0);
            assert!(!KEY_CORRUPT.is_enabled());
            assert_eq!(snapshot(&KEY_CORRUPT), corrupt);
            // SAFETY: `KEY_CORRUPT` is a static key of this suite, initialised, writable and valid
            // for as long as the test runs. `static_key_slow_inc()` may sleep and takes
            // `cpus_read_lock()`, `jump_label_mutex` and `text_mutex`: a KUnit test runs in a
            // kthread that may sleep and holds none of them.
            assert!(!unsafe { bindings::static_key_slow_inc(KEY_CORRUPT.as_raw()) });
            assert_eq!(count(), Some(5));
            assert_eq!(KEY_CORRUPT.count(), 0);
            assert_eq!(snapshot(&KEY_CORRUPT), corrupt);
        }
        let after = stats();
        let seen = probe.stop();
        assert_eq!(after.refused - before.refused, if c_mode { 2 } else { 5 });
        // Each refusal traced, naming the key and its one corrupted site; no batch applied.
        assert_eq!(seen.refused, after.refused - before.refused);
        assert_eq!(seen.refused_key.addr(), KEY_CORRUPT.as_raw().addr());
        assert_eq!(seen.refused_wrong, 1);
        assert_eq!(seen.batches, 0);
        assert_eq!(after.own_entries, before.own_entries);
        assert_eq!(after.own_syncs, before.own_syncs);
        drop(warnings);

        // Repaired, the key flips again: the refused flips left nothing that makes the next
        // one a no-op.
        write_site(code, &bytes[..len]);
        assert_eq!(snapshot(&KEY_CORRUPT), good);
        if !c_mode {
            // SAFETY: `KEY_CORRUPT` is a static key of this suite, initialised, writable and valid
            // for as long as the test runs. `static_key_enable()` may sleep and takes
            // `cpus_read_lock()`, `jump_label_mutex` and `text_mutex`: a KUnit test runs in a
            // kthread that may sleep and holds none of them.
            unsafe { bindings::static_key_enable(KEY_CORRUPT.as_raw()) };
            assert_eq!(row!(site_corrupt, 0), 32);
            // SAFETY: As for the `static_key_enable()` above: `KEY_CORRUPT` is a valid, writable
            // key, and this task may sleep and holds none of the locks `static_key_disable()`
            // takes.
            unsafe { bindings::static_key_disable(KEY_CORRUPT.as_raw()) };
            assert_eq!(row!(site_corrupt, 0), 0);
        }
        assert_eq!(KEY_CORRUPT.enable(), Ok(()));
        assert_eq!(check_sites(&KEY_CORRUPT), (32, 0));
        assert_eq!(row!(site_corrupt, 0), 32);
        assert_eq!(KEY_CORRUPT.disable(), Ok(()));
        assert_eq!(snapshot(&KEY_CORRUPT), good);
        assert_eq!(row!(site_corrupt, 0), 0);
    }

    #[test]
    fn flips_race_from_many_cpus() {
        // Executors on the other CPUs and this task all take and drop references: the key is
        // flipped whenever its count goes between 0 and 1, from whichever CPU does it.
        // SAFETY: `race_pass` may run on any CPU at any time; nothing else runs executors.
        let started = unsafe { text_poke_stress_start(race_pass, 3) };
        assert!(started >= 3);
        let mut wrong = 0;
        for _ in 0..RACE_FLIPS {
            wrong += race_pass();
        }
        let (mut passes, mut executor_wrong) = (0, 0);
        // SAFETY: Both pointers are valid for writes.
        unsafe { text_poke_stress_stop(&mut passes, &mut executor_wrong) };
        kernel::pr_info!(
            "text_poke_batch race: {} + {} passes from {} CPUs\n",
            RACE_FLIPS,
            passes,
            started + 1
        );
        // Whoever held a reference saw every site branch, and the key ends as it started.
        assert_eq!(wrong + executor_wrong, 0);
        assert!(passes > 0);
        assert_eq!(KEY_RACE.count(), 0);
        assert_eq!(check_sites(&KEY_RACE), (32, 0));
        assert_eq!(row!(site_race, 0), 0);
    }

    /// A static call's updates, one site at a time (its trampoline and its inline call site), go
    /// through the batch `text_poke_batch=` selects, while other CPUs call through it: every call
    /// reaches one of the two functions (calls that hit an INT3 are emulated as CALLs), and after
    /// each update the new one.
    #[test]
    fn static_calls_are_written_by_the_batch() {
        let track = Track::new();
        let before = stats();
        // SAFETY: `static_call_pass` may run on any CPU at any time; nothing else runs executors.
        let started = unsafe { text_poke_stress_start(static_call_pass, 3) };
        assert!(started >= 1);
        let mut wrong = 0;
        for _ in 0..STATIC_CALL_UPDATES {
            for (two, want) in [(true, 42), (false, 41)] {
                // SAFETY: Updates the test's static call; this task may sleep.
                unsafe { text_poke_sc_set(two) };
                // SAFETY: Calls through the test's static call.
                wrong += u32::from(unsafe { text_poke_sc_call(40) } != want);
            }
        }
        let (mut passes, mut executor_wrong) = (0, 0);
        // SAFETY: Both pointers are valid for writes.
        unsafe { text_poke_stress_stop(&mut passes, &mut executor_wrong) };
        let after = stats();
        drop(track);
        assert_eq!(wrong, 0);
        assert_eq!(executor_wrong, 0);
        assert!(passes > 0);
        // Each update rewrites the trampoline and the inline call site, one batch each, in three
        // sync rounds.
        let sites = after.own_entries - before.own_entries;
        let updates = 2 * u64::from(STATIC_CALL_UPDATES);
        assert_eq!(sites, 2 * updates);
        assert_eq!(after.own_syncs - before.own_syncs, 3 * sites);
        kernel::pr_info!(
            "text_poke_batch static call: {updates} updates, {sites} sites written, \
             {passes} calls from {started} CPUs\n"
        );
    }

    #[test]
    fn transaction_holds_back_only_its_keys() {
        let _track = Track::new();
        let before = stats();
        let mut txn = Transaction::new();
        assert_eq!(txn.enable(&KEY_CLAIMED), Ok(()));
        // Keys flipped meanwhile, from Rust and from C, are in place as the flips return.
        assert_eq!(KEY_64.enable(), Ok(()));
        assert_eq!(run_all()[1], 64);
        assert_eq!(KEY_64.count(), 1);
        // SAFETY: `KEY_1` is a valid key; this task may sleep.
        unsafe { bindings::static_key_enable(KEY_1.as_raw()) };
        assert_eq!(run_all()[0], 1);
        // The claimed key has not changed, value nor text, until the commit.
        assert_eq!(KEY_CLAIMED.count(), 0);
        assert_eq!(row!(site_claimed, 0), 0);
        assert_eq!(txn.commit(), Ok(()));
        assert_eq!(KEY_CLAIMED.count(), 1);
        assert_eq!(row!(site_claimed, 0), 32);
        assert_eq!(check_sites(&KEY_CLAIMED), (32, 0));
        let after = stats();
        assert_eq!(after.own_entries - before.own_entries, 32 + 64 + 1);
        assert_eq!(
            after.own_syncs - before.own_syncs,
            expected_rounds(32) + expected_rounds(64) + expected_rounds(1)
        );

        // A transaction dropped without a commit changes nothing.
        let mut txn = Transaction::new();
        assert_eq!(txn.disable(&KEY_CLAIMED), Ok(()));
        drop(txn);
        assert_eq!(row!(site_claimed, 0), 32);
        // A key already at its value is left alone.
        let mut txn = Transaction::new();
        assert_eq!(txn.enable(&KEY_CLAIMED), Ok(()));
        assert_eq!(txn.disable(&KEY_64), Ok(()));
        assert_eq!(txn.commit(), Ok(()));
        assert_eq!(KEY_CLAIMED.count(), 1);
        assert_eq!(run_all()[1], 0);

        assert_eq!(KEY_CLAIMED.disable(), Ok(()));
        assert_eq!(KEY_1.disable(), Ok(()));
        assert_eq!(row!(site_claimed, 0), 0);
        assert_eq!(run_all(), [0, 0, 0, 0]);
    }

    #[cfg(CONFIG_TEXT_POKE_BATCH_MEASURE)]
    #[test]
    fn mode_switches_at_run_time() {
        let _track = Track::new();
        let guard = ModeGuard::new();
        for m in [
            bindings::text_poke_batch_mode_TEXT_POKE_BATCH_MODE_RUST,
            bindings::text_poke_batch_mode_TEXT_POKE_BATCH_MODE_C,
            bindings::text_poke_batch_mode_TEXT_POKE_BATCH_MODE_SERIAL,
        ] {
            assert_eq!(guard.set(m), 0);
            assert_eq!(mode(), m);
            for enable in [true, false] {
                let before = stats();
                assert_eq!(
                    if enable {
                        KEY_64.enable()
                    } else {
                        KEY_64.disable()
                    },
                    Ok(())
                );
                let after = stats();
                assert_eq!(after.own_syncs - before.own_syncs, expected_rounds(64));
                assert_eq!(check_sites(&KEY_64), (64, 0));
                assert_eq!(run_all()[1], if enable { 64 } else { 0 });
            }
        }
        assert_eq!(guard.set(3), -(bindings::EINVAL as i32));

        // An open transaction queues nothing: the implementation may change under it.
        assert_eq!(
            guard.set(bindings::text_poke_batch_mode_TEXT_POKE_BATCH_MODE_RUST),
            0
        );
        let mut txn = Transaction::new();
        assert_eq!(txn.enable(&KEY_64), Ok(()));
        assert_eq!(
            guard.set(bindings::text_poke_batch_mode_TEXT_POKE_BATCH_MODE_C),
            0
        );
        assert_eq!(txn.commit(), Ok(()));
        assert_eq!(run_all()[1], 64);
        assert_eq!(KEY_64.disable(), Ok(()));
        assert_eq!(run_all()[1], 0);
    }
}

#[cfg(CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE)]
static KEY_NOINSTR: StaticKeyFalse = StaticKeyFalse::new();

/// A site in `.noinstr.text`, where the kernel entry code lives.
#[cfg(CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE)]
#[inline(never)]
#[link_section = ".noinstr.text"]
fn site_noinstr(x: u32) -> u32 {
    if kernel::static_branch_unlikely!(KEY_NOINSTR) {
        x.wrapping_add(1)
    } else {
        x
    }
}

/// KUnit suite `text_poke_batch_defer`: what the batch's deferral adds to context tracking's work
/// word (whose own suite is `ct_work`): which text it never defers, and the entry's kernel
/// TLB flush. `make test` boots KUnit with `nohz_full=3`; its user-space boot checks deferral
/// itself.
#[cfg(CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE)]
#[kernel::prelude::kunit_tests(text_poke_batch_defer)]
mod defer_tests {
    use super::site_noinstr;
    use crate::defer;
    use kernel::bindings;

    #[cfg(CONFIG_CONTEXT_TRACKING_WORK_TLB_FLUSH)]
    extern "C" {
        // In text_poke_stress.c.
        fn text_poke_tlb_selftest(
            way: i32,
            stale: *mut u64,
            flushed: *mut u64,
            global: *mut bool,
        ) -> i32;
    }

    /// The page contents of `text_poke_tlb_selftest()`: before and after the PTE changed.
    #[cfg(CONFIG_CONTEXT_TRACKING_WORK_TLB_FLUSH)]
    const OLD: u64 = 0xa1a1_a1a1_a1a1_a1a1;
    #[cfg(CONFIG_CONTEXT_TRACKING_WORK_TLB_FLUSH)]
    const NEW: u64 = 0xb2b2_b2b2_b2b2_b2b2;

    /// The kernel-entry TLB flush drops a translation the TLB kept after its PTE changed, every
    /// way that is correct on this CPU: the entry's own, a CR3 reload (with page table
    /// isolation only), INVPCID (where the CPU has it) and the CR4.PGE toggle. The entry reloads
    /// CR3, which leaves global entries, exactly when vmalloc mappings are not global.
    #[cfg(CONFIG_CONTEXT_TRACKING_WORK_TLB_FLUSH)]
    #[test]
    fn entry_tlb_flush_drops_stale_translations() {
        const CR3: i32 = bindings::ct_work_flush_CT_WORK_FLUSH_CR3 as i32;
        const INVPCID: i32 = bindings::ct_work_flush_CT_WORK_FLUSH_INVPCID as i32;
        const CR4: i32 = bindings::ct_work_flush_CT_WORK_FLUSH_CR4 as i32;
        for way in [-1, CR3, INVPCID, CR4] {
            let (mut stale, mut flushed, mut global) = (0u64, 0u64, true);
            // SAFETY: The pointers are valid for writes; the helper may sleep.
            let ret = unsafe { text_poke_tlb_selftest(way, &mut stale, &mut flushed, &mut global) };
            if way >= 0 && ret == kernel::error::code::EINVAL.to_errno() {
                // Not correct here: a CR3 reload without page table isolation, INVPCID on a
                // CPU without it. The toggle always is.
                assert_ne!(way, CR4);
                continue;
            }
            assert!(ret >= 0);
            if way >= 0 {
                assert_eq!(ret, way);
            } else {
                let reloaded = ret == CR3;
                assert_eq!(reloaded, !global);
            }
            // The TLB (QEMU's, as a CPU's) kept the old translation: the test can see a flush.
            assert_eq!(stale, OLD);
            assert_eq!(flushed, NEW);
            kernel::pr_info!(
                "{} TLB flush by {}: stale translation dropped (vmalloc mapping {}global)\n",
                if way < 0 { "entry" } else { "forced" },
                match ret {
                    CR3 => "CR3 reload",
                    INVPCID => "INVPCID",
                    _ => "CR4.PGE",
                },
                if global { "" } else { "not " }
            );
        }
    }

    /// What [`probe_site`] saw on the CPU it ran on, in an IPI's handler.
    #[cfg(CONFIG_CONTEXT_TRACKING_WORK_STATS)]
    struct Woken {
        runs: u64,
        word: u32,
        branched: bool,
    }

    /// An IPI's handler: records the work its CPU has run and its word, then runs the idle
    /// test's site.
    ///
    /// # Safety
    ///
    /// `info` points to a [`Woken`] that nothing else accesses until the IPI's sender returns.
    #[cfg(CONFIG_CONTEXT_TRACKING_WORK_STATS)]
    unsafe extern "C" fn probe_site(info: *mut core::ffi::c_void) {
        let cpu = kernel::cpu::CpuId::current().as_u32() as i32;
        // SAFETY: As the caller guarantees.
        let woken = unsafe { &mut *info.cast::<Woken>() };
        // SAFETY: Reads a per-CPU counter; any possible `cpu` is accepted.
        woken.runs = unsafe { bindings::ct_work_runs(cpu) as u64 };
        woken.word = word(cpu);
        woken.branched = super::site_idle::<0, 0>() != 0;
    }

    /// `cpu`'s work word, or 0 if it is offline.
    #[cfg(CONFIG_CONTEXT_TRACKING_WORK_STATS)]
    fn word(cpu: i32) -> u32 {
        // SAFETY: Only reads CPU masks; any `cpu` is accepted.
        let word = unsafe { bindings::ct_work_word(cpu) };
        if word.is_null() {
            return 0;
        }
        // SAFETY: A CPU's word lives as long as the kernel, and is only accessed atomically.
        unsafe { core::sync::atomic::AtomicU32::from_ptr(word) }
            .load(core::sync::atomic::Ordering::SeqCst)
    }

    /// Lets the calling task run on `cpu` only, or anywhere again with `None`: whether it now
    /// runs where it should.
    #[cfg(CONFIG_CONTEXT_TRACKING_WORK_STATS)]
    fn pin(cpu: Option<u32>) -> bool {
        let task = kernel::current!();
        let all = &raw const bindings::__cpu_possible_mask;
        let Some(cpu) = cpu else {
            // SAFETY: The task is the caller's, alive for the call; the possible mask lives as
            // long as the kernel. Moving a task may sleep, as a KUnit test's kthread may.
            return unsafe { bindings::set_cpus_allowed_ptr(task.as_ptr(), all) } == 0;
        };
        let Some(id) = kernel::cpu::CpuId::from_u32(cpu) else {
            return false;
        };
        let Ok(mut mask) = kernel::cpumask::CpumaskVar::new_zero(kernel::alloc::flags::GFP_KERNEL)
        else {
            return false;
        };
        mask.set(id);
        // SAFETY: As above; `mask` lives until the call returns.
        let ret = unsafe { bindings::set_cpus_allowed_ptr(task.as_ptr(), mask.as_raw()) };
        ret == 0 && kernel::cpu::CpuId::current() == id
    }

    /// Waits up to a second, in steps of a millisecond, until `done()`: whether it is.
    #[cfg(CONFIG_CONTEXT_TRACKING_WORK_STATS)]
    fn wait_until(done: impl Fn() -> bool) -> bool {
        for _ in 0..1000 {
            if done() {
                return true;
            }
            // SAFETY: Sleeps; a KUnit test's kthread holding no lock may.
            unsafe { bindings::msleep(1) };
        }
        done()
    }

    /// A key flipped while another CPU is idle, ten times: how many times the CPU took the
    /// flip's syncs as a work bit, checking each time that when a function call woke it, it had
    /// run them before the call's handler ran the site, which took the new direction. With
    /// `poll`, idle CPUs poll (`cpu_idle_poll()`, as with `idle=poll`) and the call wakes them
    /// with no interrupt: the CPU leaves idle when it sees it must reschedule.
    #[cfg(CONFIG_CONTEXT_TRACKING_WORK_STATS)]
    fn flips_while_idle(poll: bool) -> u32 {
        extern "C" {
            fn cpu_idle_poll_ctrl(enable: bool);
        }
        const IDLE: u32 = bindings::CT_WORK_IDLE;
        const SYNC: u32 = bindings::ct_work_kind_CT_WORK_SYNC_CORE << bindings::CT_WORK_WORK_SHIFT;
        assert!(pin(Some(0)));
        // SAFETY: Walks the online CPUs; any `cpu` is accepted.
        let target = unsafe { bindings::ct_work_next_online(0) };
        if poll {
            // SAFETY: Counted: undone below.
            unsafe { cpu_idle_poll_ctrl(true) };
        }
        let mut deferred = 0;
        for _ in 0..10 {
            wait_until(|| word(target) & IDLE != 0);
            // SAFETY: As in `probe_site()`.
            let before = unsafe { bindings::ct_work_runs(target) as u64 };
            assert_eq!(super::KEY_IDLE.enable(), Ok(()));
            // Still idle, with the sync pending: no IPI of the flip reached it.
            let pending = word(target) & (IDLE | SYNC) == IDLE | SYNC;
            let mut woken = Woken {
                runs: 0,
                word: u32::MAX,
                branched: false,
            };
            // SAFETY: `probe_site` accesses `woken` only until the call returns, which waits.
            let ret = unsafe {
                bindings::smp_call_function_single(
                    target,
                    Some(probe_site),
                    (&raw mut woken).cast(),
                    1,
                )
            };
            assert_eq!(super::KEY_IDLE.disable(), Ok(()));
            assert_eq!(ret, 0);
            assert!(woken.branched);
            // The handler runs in the kernel: the CPU's word says so, taken when it left idle
            // or took the interrupt.
            assert_eq!(woken.word & IDLE, 0);
            if pending {
                assert!(woken.runs > before);
                deferred += 1;
            }
        }
        if poll {
            // SAFETY: Undoes the call above.
            unsafe { cpu_idle_poll_ctrl(false) };
        }
        assert!(pin(None));
        kernel::pr_info!(
            "idle CPU {target}{}: {deferred} of 10 flips deferred to it\n",
            if poll { ", polling" } else { "" }
        );
        deferred
    }

    /// A key flipped while another CPU is idle: the CPU takes the flip's syncs as a work bit
    /// instead of three IPIs, and when an interrupt wakes it, it has run them before the
    /// interrupt's handler runs the site, which takes the new direction.
    #[cfg(CONFIG_CONTEXT_TRACKING_WORK_STATS)]
    #[test]
    fn an_idle_cpu_runs_a_flip_s_syncs_when_it_wakes() {
        let rust = super::mode() == bindings::text_poke_batch_mode_TEXT_POKE_BATCH_MODE_RUST;
        let deferred = flips_while_idle(false);
        // Upstream's batch (text_poke_batch=c) never defers; the Rust batch did, on some attempt.
        assert!(!rust || deferred > 0);
    }

    /// The same with idle CPUs polling, as with `idle=poll`, which QEMU's default idle never
    /// does: a polling CPU's word says idle too, and it runs its syncs when it leaves idle
    /// because it must reschedule, no interrupt taken.
    #[cfg(CONFIG_CONTEXT_TRACKING_WORK_STATS)]
    #[test]
    fn a_polling_idle_cpu_runs_a_flip_s_syncs_when_it_wakes() {
        let rust = super::mode() == bindings::text_poke_batch_mode_TEXT_POKE_BATCH_MODE_RUST;
        let deferred = flips_while_idle(true);
        assert!(!rust || deferred > 0);
    }

    /// A key flipped while another CPU is idle, then an NMI into that CPU, the path QEMU's idle
    /// never takes otherwise: the NMI's entry takes the flip's syncs and runs them before its
    /// handler runs (the word says kernel there), and its exit gives the word back saying idle,
    /// nothing pending, as the CPU goes back to sleep. (The helper needs x86's NMI handlers,
    /// which `<linux/nmi.h>` declares where ACPI is built.)
    #[cfg(all(CONFIG_CONTEXT_TRACKING_WORK_STATS, CONFIG_HAVE_ACPI_APEI_NMI))]
    #[test]
    fn an_nmi_into_an_idle_cpu_runs_its_syncs_first() {
        extern "C" {
            // In text_poke_stress.c.
            fn text_poke_nmi_peek(cpu: i32, runs: *mut core::ffi::c_ulong, word: *mut u32) -> i32;
        }
        const IDLE: u32 = bindings::CT_WORK_IDLE;
        const SYNC: u32 = bindings::ct_work_kind_CT_WORK_SYNC_CORE << bindings::CT_WORK_WORK_SHIFT;
        let rust = super::mode() == bindings::text_poke_batch_mode_TEXT_POKE_BATCH_MODE_RUST;
        assert!(pin(Some(0)));
        // SAFETY: Walks the online CPUs; any `cpu` is accepted.
        let target = unsafe { bindings::ct_work_next_online(0) };
        let (mut taken, mut given_back) = (0, 0);
        for _ in 0..10 {
            wait_until(|| word(target) & IDLE != 0);
            // SAFETY: Reads a per-CPU counter; any possible `cpu` is accepted.
            let before = unsafe { bindings::ct_work_runs(target) as u64 };
            assert_eq!(super::KEY_IDLE.enable(), Ok(()));
            let pending = word(target) & (IDLE | SYNC) == IDLE | SYNC;
            let (mut seen_runs, mut seen_word) = (0u64, u32::MAX);
            // SAFETY: `target` is online and not this CPU (this task runs on CPU 0); the
            // pointers are valid for writes; the helper may sleep, as a KUnit test may.
            let ret = unsafe { text_poke_nmi_peek(target, &mut seen_runs, &mut seen_word) };
            let after = word(target);
            assert_eq!(super::KEY_IDLE.disable(), Ok(()));
            assert_eq!(ret, 0);
            // In the NMI's handler the word says kernel, whatever it held before.
            assert_eq!(seen_word & (IDLE | SYNC), 0);
            if pending {
                assert!(seen_runs > before);
                taken += 1;
                given_back += usize::from(after == IDLE);
            }
        }
        assert!(pin(None));
        // Upstream's batch (text_poke_batch=c) never defers; the Rust batch did, on some attempt,
        // and the CPU was back in idle when the NMI's sender looked, on some attempt.
        assert!(!rust || (taken > 0 && given_back > 0));
        kernel::pr_info!(
            "idle CPU {target}: {taken} of 10 NMIs took pending syncs, {given_back} left it idle\n"
        );
    }

    /// An IPI's handler that does nothing: the IPI takes its CPU out of idle.
    #[cfg(CONFIG_CONTEXT_TRACKING_WORK_STATS)]
    extern "C" fn wake(_info: *mut core::ffi::c_void) {}

    /// A cpuidle driver whose state enters idle in ordinary text, which a CPU must not run with
    /// work pending: its registration keeps idle CPUs out of deferral from then on, and the
    /// IPIs of a flip reach an idle CPU again. One whose state enters in cpuidle text does not.
    /// (The drivers have no device: no CPU enters idle through them.)
    #[cfg(all(
        CONFIG_CONTEXT_TRACKING_WORK_STATS,
        CONFIG_CONTEXT_TRACKING_WORK_KUNIT_TEST
    ))]
    #[test]
    fn a_cpuidle_driver_outside_idle_text_keeps_idle_cpus_out() {
        const IDLE: u32 = bindings::CT_WORK_IDLE;
        let mut refused = core::ptr::null();
        // SAFETY: `refused` is valid for writes; registering a driver may sleep, as a KUnit
        // test's kthread may.
        let ret = unsafe { bindings::ct_work_test_cpuidle_driver(true, &mut refused) };
        if ret == -(bindings::ENODEV as i32) {
            kernel::pr_info!("cpuidle is off: no driver registers\n");
            return;
        }
        let idle_text_refused = !refused.is_null();
        // SAFETY: As above.
        unsafe { bindings::ct_work_test_cpuidle_driver(false, &mut refused) };
        let plain_refused = !refused.is_null();
        assert!(pin(Some(0)));
        // SAFETY: Walks the online CPUs; any `cpu` is accepted.
        let target = unsafe { bindings::ct_work_next_online(0) };
        // Out of idle once, then back in it, under the refusal.
        // SAFETY: `wake` accesses nothing; `target` is online.
        let ret = unsafe {
            bindings::smp_call_function_single(target, Some(wake), core::ptr::null_mut(), 1)
        };
        // SAFETY: Reads the scheduler's state of an online CPU.
        let idle = wait_until(|| unsafe { bindings::idle_cpu(target) } != 0);
        let idle_word = word(target);
        let before = super::ipis_received()[target as usize];
        let flipped = super::KEY_IDLE.enable().is_ok() && super::KEY_IDLE.disable().is_ok();
        let ipis = super::ipis_received()[target as usize].wrapping_sub(before);
        // SAFETY: Only this test refuses idle deferral; the other tests need it back.
        unsafe { bindings::ct_work_test_idle_refusal_clear() };
        assert!(pin(None));
        assert_eq!(ret, 0);
        assert!(flipped);
        assert!(!idle_text_refused);
        assert!(plain_refused);
        // Idle, and its word does not say so: senders do not set bits for it.
        assert!(idle);
        assert_eq!(idle_word & IDLE, 0);
        // Each of the flips' three rounds reached it.
        kernel::pr_info!("idle CPU {target}, idle deferral refused: {ipis} IPIs for 2 flips\n");
        assert!(ipis >= 6);
    }

    #[test]
    fn batches_of_entry_text_are_never_deferred() {
        assert!(defer::entry_text(site_noinstr as *const () as usize));
        assert!(!defer::entry_text(
            super::site_1::<0, 0> as *const () as usize
        ));
        assert_eq!(site_noinstr(1), 1);
        // Entry code calls static call trampolines, which are not in its sections: a batch
        // that rewrites one is not deferred either.
        // SAFETY: Returns the address of a trampoline; no precondition.
        let tramp = unsafe { super::text_poke_sc_tramp() } as usize;
        assert!(defer::entry_text(tramp));
        assert!(!defer::entry_text(
            super::text_poke_sc_call as *const () as usize
        ));
        // A batch, sorted by address, is refused when any one of its sites is there: first,
        // last or in between, among sites that are not.
        assert!(defer::enabled());
        let base = kernel::jump_label::text_base();
        let int3 = |addr: usize| {
            crate::poke::PokeLoc::new(base, addr, &[0xcc], None)
                .unwrap_or(crate::poke::PokeLoc::EMPTY)
        };
        // Through black_box(): an address inside a function, folded into a relocation, is
        // one objtool takes for an indirect branch target without ENDBR.
        let noinstr = site_noinstr as *const () as usize;
        let text = core::hint::black_box(super::site_1::<0, 0> as *const () as usize);
        let tramp = core::hint::black_box(tramp);
        let plain = [text, text + 16, text + 32].map(int3);
        assert!(plain.iter().all(|s| s.addr(base) != base));
        assert!(defer::may_defer(&plain, base));
        let mut sites = [text, text + 16, noinstr, tramp, tramp + 1].map(int3);
        assert!(sites.iter().all(|s| s.addr(base) != base));
        sites.sort_unstable_by_key(|s| s.addr(base));
        for i in 0..sites.len() {
            let alone = &sites[i..=i];
            assert_eq!(
                defer::may_defer(alone, base),
                !defer::entry_text(alone[0].addr(base))
            );
        }
        assert!(!defer::may_defer(&sites, base));
        assert!(!defer::may_defer(&sites[..3], base));
        assert!(!defer::may_defer(&sites[2..], base));
    }
}

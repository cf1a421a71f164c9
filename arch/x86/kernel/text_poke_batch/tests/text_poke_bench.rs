// SPDX-License-Identifier: GPL-2.0

//! Benchmarks of static key flips and of the INT3 handler, for each text-poke implementation.
//!
//! Five keys with 1, 8, 56, 256 and 1024 sites, and with `CONFIG_TEXT_POKE_BATCH_BENCH_LARGE` one
//! with 4096, 64 in each of 64 pages (`text_poke_bench_large.S`), which only `flip` and `sites`
//! take: its sites' bytes are read after each flip. `/sys/kernel/debug/text_poke_bench/run` takes
//! a command and, once it is done, reads back its figures, one `name value` a line:
//!
//! - `flip SITES FLIPS`: flips the key with SITES sites FLIPS times (enable, disable, ...)
//!   through `static_key_enable()` and `static_key_disable()`, as C callers do, and reports the
//!   sync rounds, IPIs and sites patched, and the time taken per flip (the monotonic clock, which
//!   counts guest instructions when QEMU runs with `-icount shift=0`). Every flip is checked
//!   by running all the sites: `wrong` counts sites that took the wrong direction.
//! - `lookup SITES FLIPS`: the same flips while one other CPU runs the key's last site in a
//!   loop, timing each run with interrupts off. Runs that hit an INT3 (the handler's count for
//!   that CPU moved) are counted apart: `hit_ns / hits - plain_ns / plain` is the cost of the
//!   INT3 path, trap, lookup and emulation, for a batch of SITES sites.
//!
//! - `upstream FLIPS`: `flip` of a key of upstream's with sites over many pages, the
//!   `write_msr` tracepoint's (366 sites on 75 pages in the test configuration), flipped with
//!   no probe attached (its sites then call a tracepoint with none, which does nothing).
//!   `sites` is its number of sites; every flip is checked by reading all the sites' bytes.
//!
//! - `txn FLIPS`: eight keys of 64 sites each, enabled and disabled FLIPS times one by one,
//!   then FLIPS times as one [`Transaction`]: the sync rounds, IPIs and cost of each way. Both
//!   ways go through the same update, which checks every site of a key before it writes any.
//!
//! - `modtxn MS` and `modkey 0|1`, for the test of module init text (`make test`): `modtxn`
//!   begins a transaction enabling `text_poke_batch_mod_key`, whose sites are in the module
//!   `text_poke_mod_test.ko`, lets that module's init function (waiting while the module is
//!   COMING) go on, sleeps MS milliseconds while the module goes live and its init text is
//!   freed, then commits: `entries` tells how many sites the commit wrote. `modkey` sets the
//!   key.
//!
//! - `modrace FLIPS`: lets `text_poke_mod_test.ko`'s init function go on while the key flips,
//!   until the function returns and FLIPS times more, every other pair of flips a
//!   [`Transaction`]: each flip made while the module is COMING writes its init sites, and the
//!   module goes live and frees its init text meanwhile (`make test`, repeated over many
//!   loads). Ends with the key disabled; `flips` tells how many flips were made, `entries` how
//!   many sites they wrote, `refused` how many were refused.
//!
//! - `holdjl MS`: holds `jump_label_mutex` MS milliseconds, as a key update in flight does,
//!   and lets `text_poke_mod_test.ko`'s init function return meanwhile: the module must not
//!   go on to free its init text before the mutex is released (`make test`).
//!
//! - `faults KEY` and `faults txn`: the key enabled, or the eight keys of `txn` enabled as one
//!   [`Transaction`], with the n-th fault-injection point of the writer failing
//!   (`/proc/self/fail-nth`'s rule: failslab, fail_page_alloc and fail_text_poke_batch points
//!   alike), for n = 1, 2, ... until an enable gets past all its points; the keys are disabled
//!   after each enable that went through. After every attempt each key's sites are checked, their
//!   bytes against the key's value and their direction by running them: `injected` counts the
//!   attempts a fault was injected into, `refused` those that failed (with `ENOMEM` or `EIO`;
//!   any other error counts as wrong too) and `wrong` the keys whose sites disagreed with
//!   them. The fault attributes decide which points may fail (`ignore-gfp-wait` and the like,
//!   in debugfs). With `CONFIG_FAULT_INJECTION` only (`ENODEV` otherwise).
//!
//! - `cfaults KEY`: the same for C's `static_key_enable()`, `static_key_disable()`,
//!   `static_key_slow_inc()` and `static_key_slow_dec()` of the key, each from the state it
//!   changes, which cannot tell their caller of a refusal: every call must leave the count it
//!   was asked for (`refused` counts those that did not) and every site in agreement with it
//!   (`wrong`). The key is disabled after each call.
//!
//! - `set KEY 0|1` enables or disables a key, and `sites KEY` runs all its sites on the CPU of
//!   the writer (pinned with `taskset`): `wrong` counts those that did not take the key's
//!   direction. KEY is a number of sites, or `noinstr`: a key whose one site is in
//!   `.noinstr.text`, which `flip` and `lookup` take too. For the deferral tests.
//!
//! - `entry N`: the entry hook of deferred work run N times on the writer's CPU, which must be a
//!   housekeeping one, for each state of the word an entry finds: `entry_kernel_ns` (deferral
//!   off: the word only read), `entry_user_ns` (deferral on, nothing pending: the word
//!   exchanged), `entry_work_ns` (a sync pending: `sync_core()` too) and `entry_tlb_ns` (a
//!   kernel TLB flush pending).
//!
//! - `vstorm N`: N vmalloc()/vfree() pairs of 16 pages, forcing lazy purges (kernel TLB
//!   flushes), and the time they took (`ns`); `vread`, `vreuse` and `vcheck`: the stale-mapping
//!   test of deferred kernel TLB flushes (`reused`, `stale`), see `text_poke_stress.h`;
//!   `vtables pmd|pud`: a page table of vmalloc space freed for a huge mapping, and the CPUs
//!   that took an IPI for its flush (`table_ipi_cpus`, a mask), see `text_poke_stress.h`.
//!
//! - `lockcost N`: the local fast path of per-CPU locks, N lock-unlock pairs with interrupts
//!   off: an empty call (`lock_none_ns`), a `local_lock` (`lock_local_ns`) and a qpw lock in this
//!   boot's mode (`lock_qpw_ns`; `qpw` says which).
//!
//! - `branch N`: the fast path of a branch, guest instructions for N calls of a small function
//!   in a loop with interrupts off, the best of three runs, in each variant: no check at all
//!   (`branch_plain_ns`), a Rust unlikely site with its key disabled and enabled
//!   (`branch_unlikely_off_ns`, `branch_unlikely_on_ns`), a likely site likewise
//!   (`branch_likely_off_ns`, `branch_likely_on_ns`), a relaxed load of an `AtomicBool`
//!   (`branch_atomic_ns`), and C's `static_branch_unlikely()` on a disabled C key, from C
//!   (`branch_c_unlikely_ns`).
//!
//! - `rokey 0|1`: disables or enables a key that is read-only after init: refused with `EPERM`
//!   and a warning once the kernel runs.
//!
//! - `lrudrain N`: `lru_add_drain_all()` N times, and the time it took (`ns`): with `qpw=0` it
//!   queues work on every CPU whose per-CPU folio batches hold folios, with `qpw=1` it drains
//!   them from here.
//!
//! The implementation measured is the one in use: `/sys/kernel/debug/text_poke_batch/mode` switches
//! it, so all three are measured on one boot.

use core::{
    ffi::c_ulong,
    fmt,
    sync::atomic::{
        AtomicBool,
        AtomicPtr,
        AtomicU64,
        Ordering, //
    },
};
use kernel::{
    bindings,
    debugfs::Scope,
    jump_label::{
        StaticKeyFalse,
        Transaction, //
    },
    prelude::*,
    sync::atomic::{
        Atomic,
        Relaxed, //
    },
    uaccess::UserSliceReader, //
};

module! {
    type: TextPokeBench,
    name: "text_poke_bench",
    authors: ["The jump_label_rs authors"],
    description: "Static key flip and INT3 handler benchmarks",
    license: "GPL",
}

include!("sites.rs");

/// Defines `$key`, a key of the benchmark, and `$site`, its sites (see `sites_of!`). With a
/// section name, the sites are in that section, which starts a page: a flip of the key maps the
/// fewest pages its sites can fill, wherever the rest of the kernel moves the crate's text.
macro_rules! bench_key {
    ($key:ident, $site:ident) => {
        static $key: StaticKeyFalse = StaticKeyFalse::new();
        sites_of!($site, $key);
    };
    ($key:ident, $site:ident, $section:literal) => {
        static $key: StaticKeyFalse = StaticKeyFalse::new();
        core::arch::global_asm!(concat!(
            ".pushsection ",
            $section,
            ",\"ax\",@progbits\n.balign 4096\n.popsection"
        ));
        sites_of!(
            #[link_section = $section]
            $site,
            $key
        );
    };
}
bench_key!(KEY_1, site_1, ".text.text_poke_bench_1");
bench_key!(KEY_8, site_8, ".text.text_poke_bench_8");
bench_key!(KEY_56, site_56, ".text.text_poke_bench_56");
bench_key!(KEY_256, site_256, ".text.text_poke_bench_256");
bench_key!(KEY_1024, site_1024, ".text.text_poke_bench_1024");
bench_key!(TXN_0, site_txn_0);
bench_key!(TXN_1, site_txn_1);
bench_key!(TXN_2, site_txn_2);
bench_key!(TXN_3, site_txn_3);
bench_key!(TXN_4, site_txn_4);
bench_key!(TXN_5, site_txn_5);
bench_key!(TXN_6, site_txn_6);
bench_key!(TXN_7, site_txn_7);

/// The keys of the transaction benchmark.
static TXN_KEYS: [&StaticKeyFalse; 8] = [
    &TXN_0, &TXN_1, &TXN_2, &TXN_3, &TXN_4, &TXN_5, &TXN_6, &TXN_7,
];

fn run_1() -> u32 {
    run!(site_1, 0; 0)
}

fn run_8() -> u32 {
    run!(site_8, 0; 0 1 2 3 4 5 6 7)
}

fn run_56() -> u32 {
    row!(site_56, 0)
        + run!(site_56, 1; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23)
}

fn run_256() -> u32 {
    rows!(site_256; 0 1 2 3 4 5 6 7)
}

fn run_1024() -> u32 {
    rows!(site_1024; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28
          29 30 31)
}

/// Runs every site of the transaction keys; returns how many branched.
fn run_txn() -> u32 {
    rows!(site_txn_0; 0 1)
        + rows!(site_txn_1; 0 1)
        + rows!(site_txn_2; 0 1)
        + rows!(site_txn_3; 0 1)
        + rows!(site_txn_4; 0 1)
        + rows!(site_txn_5; 0 1)
        + rows!(site_txn_6; 0 1)
        + rows!(site_txn_7; 0 1)
}

// The last site of each key, for the executor of the lookup benchmark.
extern "C" fn last_1() -> c_ulong {
    site_1::<0, 0>().into()
}

extern "C" fn last_8() -> c_ulong {
    site_8::<0, 7>().into()
}

extern "C" fn last_56() -> c_ulong {
    site_56::<1, 23>().into()
}

extern "C" fn last_256() -> c_ulong {
    site_256::<7, 31>().into()
}

extern "C" fn last_1024() -> c_ulong {
    site_1024::<31, 31>().into()
}

static KEY_NOINSTR: StaticKeyFalse = StaticKeyFalse::new();

/// A site in `.noinstr.text`, where the kernel entry code lives: a batch that writes it is never
/// deferred to isolated CPUs, which may run such text before they take deferred work.
#[inline(never)]
#[link_section = ".noinstr.text"]
fn site_noinstr() -> u32 {
    u32::from(kernel::static_branch_unlikely!(KEY_NOINSTR))
}

extern "C" fn last_noinstr() -> c_ulong {
    site_noinstr().into()
}

/// The key whose one site is in `.noinstr.text`.
static NOINSTR: BenchKey = BenchKey {
    sites: 1,
    key: &KEY_NOINSTR,
    run: site_noinstr,
    last: Some(last_noinstr),
};

/// A benchmark key.
struct BenchKey {
    sites: u32,
    key: &'static StaticKeyFalse,
    run: fn() -> u32,
    /// The last site, which `lookup`'s executor runs; `None` for a key `lookup` does not take.
    last: Option<extern "C" fn() -> c_ulong>,
}

static KEYS: [BenchKey; 5] = [
    BenchKey {
        sites: 1,
        key: &KEY_1,
        run: run_1,
        last: Some(last_1),
    },
    BenchKey {
        sites: 8,
        key: &KEY_8,
        run: run_8,
        last: Some(last_8),
    },
    BenchKey {
        sites: 56,
        key: &KEY_56,
        run: run_56,
        last: Some(last_56),
    },
    BenchKey {
        sites: 256,
        key: &KEY_256,
        run: run_256,
        last: Some(last_256),
    },
    BenchKey {
        sites: 1024,
        key: &KEY_1024,
        run: run_1024,
        last: Some(last_1024),
    },
];

/// The timed executor, in `text_poke_stress.c`.
#[repr(C)]
#[derive(Default)]
struct Timed {
    hits: u64,
    hit_ns: u64,
    plain: u64,
    plain_ns: u64,
    hit_med: u64,
    hit_min: u64,
    plain_med: u64,
    plain_min: u64,
    slow: u64,
}

extern "C" {
    fn text_poke_timed_start(site: extern "C" fn() -> c_ulong) -> i32;
    fn text_poke_timed_stop(timed: *mut Timed);
    // In text_poke_stress.c.
    static mut text_poke_batch_mod_key: bindings::static_key_false;
    fn text_poke_batch_upstream_key() -> *mut bindings::static_key_false;
    static mut text_poke_batch_mod_go: bool;
    static mut text_poke_batch_mod_returning: bool;
    fn text_poke_vstorm(n: u32, pages: u32) -> i32;
    fn text_poke_vread() -> i32;
    fn text_poke_vreuse() -> i32;
    fn text_poke_vcheck(reused: *mut bool, stale: *mut bool) -> i32;
    fn text_poke_vtables(level: u32, cpus: *mut c_ulong) -> i32;
    fn text_poke_lru_drain(n: u32) -> i32;
    fn qpw_lock_bench(n: u32, none: *mut u64, local: *mut u64, qpw: *mut u64, on: *mut bool)
        -> i32;
    fn text_poke_branch_run(which: u32, n: u32, ns: *mut u64) -> i32;
    fn text_poke_fail_nth(n: u32) -> u32;
    fn text_poke_hold_jump_label(ms: u32) -> i32;
    fn text_poke_stress_start(pass: extern "C" fn() -> c_ulong, max: u32) -> i32;
    fn text_poke_stress_stop(passes: *mut c_ulong, wrong: *mut c_ulong);
}

/// The variants of `text_poke_branch_run()`: `enum text_poke_branch`.
const BRANCH_PLAIN: u32 = 0;
const BRANCH_UNLIKELY: u32 = 1;
const BRANCH_LIKELY: u32 = 2;
const BRANCH_ATOMIC: u32 = 3;
const BRANCH_C_UNLIKELY: u32 = 4;

kernel::define_static_key_ro!(
    /// A key of the kernel image that is read-only after init: `rokey` tries to flip it.
    BENCH_RO_KEY: false
);

/// The key of the `branch` command's static-key variants.
static BRANCH_KEY: StaticKeyFalse = StaticKeyFalse::new();

/// The flag of its `AtomicBool` variant, which is what code without static keys tests.
static BRANCH_FLAG: AtomicBool = AtomicBool::new(false);

/// No check: the fast path alone, `x + 1`.
#[no_mangle]
#[inline(never)]
pub extern "C" fn text_poke_branch_plain(x: u64) -> u64 {
    x.wrapping_add(1)
}

/// An unlikely site: `x + 1` while [`BRANCH_KEY`] is disabled, the fall-through, `3 * x` while it
/// is enabled.
#[no_mangle]
#[inline(never)]
pub extern "C" fn text_poke_branch_unlikely(x: u64) -> u64 {
    if kernel::static_branch_unlikely!(BRANCH_KEY) {
        x.wrapping_mul(3)
    } else {
        x.wrapping_add(1)
    }
}

/// A likely site: `3 * x` while [`BRANCH_KEY`] is enabled, the fall-through, `x + 1` while it is
/// disabled.
#[no_mangle]
#[inline(never)]
pub extern "C" fn text_poke_branch_likely(x: u64) -> u64 {
    if kernel::static_branch_likely!(BRANCH_KEY) {
        x.wrapping_mul(3)
    } else {
        x.wrapping_add(1)
    }
}

/// A relaxed load of [`BRANCH_FLAG`]: `x + 1` while it is false, `3 * x` while it is true.
#[no_mangle]
#[inline(never)]
pub extern "C" fn text_poke_branch_atomic(x: u64) -> u64 {
    if BRANCH_FLAG.load(Ordering::Relaxed) {
        x.wrapping_mul(3)
    } else {
        x.wrapping_add(1)
    }
}

/// A C helper's result as a `Result`.
fn errno(ret: i32) -> Result {
    if ret < 0 {
        Err(Error::from_errno(ret))
    } else {
        Ok(())
    }
}

/// The key whose sites are in `text_poke_mod_test.ko`.
fn mod_key() -> &'static StaticKeyFalse {
    // SAFETY: The key is a static defined with `DEFINE_STATIC_KEY_FALSE()`.
    unsafe { StaticKeyFalse::from_c(&raw mut text_poke_batch_mod_key) }
}

/// The key of upstream's that `upstream` flips: the `write_msr` tracepoint's.
fn upstream_key() -> &'static StaticKeyFalse {
    // SAFETY: The helper returns the key of a tracepoint of the kernel image, a static
    // initialised with `STATIC_KEY_FALSE_INIT`.
    unsafe { StaticKeyFalse::from_c(text_poke_batch_upstream_key()) }
}

/// The sites of `key` that hold the JMP of an enabled key: its sites' bytes read under
/// `jump_label_mutex`, for a key whose sites cannot be run from here.
fn jumps(key: &StaticKeyFalse) -> u32 {
    let mut jumps = 0;
    let counted = key.for_each_site(|site| {
        let jump = site
            .expected(true)
            .is_some_and(|want| want.as_bytes() == &site.read()[..site.size()]);
        jumps += u32::from(jump);
    });
    // A key that has sites in modules cannot be walked: counted as no site taken.
    counted.map_or(0, |()| jumps)
}

/// The sites of the upstream key that hold the JMP of an enabled key.
fn run_upstream() -> u32 {
    jumps(upstream_key())
}

/// The key of `text_poke_bench_large.S`'s 4096 sites, which name it.
#[cfg(CONFIG_TEXT_POKE_BATCH_BENCH_LARGE)]
#[export_name = "text_poke_bench_large_key"]
static KEY_4096: StaticKeyFalse = StaticKeyFalse::new();

/// The sites of [`KEY_4096`] that hold the JMP of an enabled key.
#[cfg(CONFIG_TEXT_POKE_BATCH_BENCH_LARGE)]
fn run_4096() -> u32 {
    jumps(&KEY_4096)
}

/// The key of 4096 sites, in 64 pages.
#[cfg(CONFIG_TEXT_POKE_BATCH_BENCH_LARGE)]
static LARGE: BenchKey = BenchKey {
    sites: 4096,
    key: &KEY_4096,
    run: run_4096,
    last: None,
};

/// The figures of the last run, in the order they are printed.
const FIELDS: [&str; 52] = [
    "sites",
    "flips",
    "syncs",
    "ipis",
    "entries",
    "batches",
    "ns",
    "ns_min",
    "ns_max",
    "wrong",
    "hits",
    "hit_ns",
    "plain",
    "plain_ns",
    "txn_syncs",
    "txn_ipis",
    "txn_batches",
    "txn_ns",
    "entry_kernel_ns",
    "entry_user_ns",
    "entry_work_ns",
    "reused",
    "stale",
    "entry_tlb_ns",
    "lock_none_ns",
    "lock_local_ns",
    "lock_qpw_ns",
    "qpw",
    "mm_switches",
    "batch_ns",
    "pages",
    "branch_plain_ns",
    "branch_unlikely_off_ns",
    "branch_unlikely_on_ns",
    "branch_likely_off_ns",
    "branch_likely_on_ns",
    "branch_atomic_ns",
    "branch_c_unlikely_ns",
    "injected",
    "refused",
    "table_ipi_cpus",
    "hit_med",
    "hit_min",
    "plain_med",
    "plain_min",
    "slow",
    "percpu_ns_min",
    "percpu_ns_max",
    "percpu_busy_ns_min",
    "percpu_busy_ns_max",
    "percpu_cpus",
    "percpu_held",
];

/// The benchmark's debugfs state: the last run's figures.
struct Bench {
    /// A run is going on.
    busy: AtomicBool,
    /// What the last run was: 0 none, 1 flip, 2 lookup, 3 txn, 4 modtxn, 5 modkey, 6 set,
    /// 7 sites, 8 entry, 9 vmalloc, 10 lrudrain, 11 lockcost, 12 upstream, 13 branch, 17 percpu.
    kind: AtomicU64,
    /// The implementation it measured.
    mode: AtomicU64,
    figures: [AtomicU64; FIELDS.len()],
}

fn stats() -> bindings::text_poke_batch_stats {
    let mut s = bindings::text_poke_batch_stats::default();
    // SAFETY: `s` is valid for writes.
    unsafe { bindings::text_poke_batch_read_stats(&mut s) };
    s
}

fn mode() -> u64 {
    // SAFETY: `text_poke_batch_mode` is an `int` that lives as long as the kernel, aligned, and
    // written with `WRITE_ONCE()`.
    let mode = unsafe { Atomic::from_ptr(&raw mut bindings::text_poke_batch_mode) }.load(Relaxed);
    mode as u64
}

fn now() -> u64 {
    // SAFETY: `ktime_get_mono_fast_ns()` has no preconditions.
    unsafe { bindings::ktime_get_mono_fast_ns() }
}

/// The per-CPU counters of a `percpu` run while its busy task runs, or null.
static PERCPU: AtomicPtr<kernel::qpw::PerCpu<u64>> = AtomicPtr::new(core::ptr::null_mut());
/// The busy task holds its CPU's counter.
static PERCPU_HOLDING: AtomicBool = AtomicBool::new(false);
/// The busy task may let go.
static PERCPU_RELEASE: AtomicBool = AtomicBool::new(false);

/// The busy task of a `percpu` run (`text_poke_stress_start()`): holds its own CPU's counter
/// through `PerCpu::with_cpu()`, as a remote drain holds a CPU's data, until told to let go.
/// Returns 1 for a hold that failed.
extern "C" fn percpu_hold() -> c_ulong {
    let pc = PERCPU.load(Ordering::Acquire);
    if pc.is_null() {
        return 1;
    }
    // SAFETY: Set by `Bench::percpu()` to counters that outlive this task, which it stops
    // before it clears the pointer and drops them.
    let pc = unsafe { &*pc };
    let cpu = kernel::cpu::CpuId::current();
    let held = pc.with_cpu(cpu, |v| {
        PERCPU_HOLDING.store(true, Ordering::Release);
        // A hold of at most as long as the runs take: no sleep under it.
        while !PERCPU_RELEASE.load(Ordering::Acquire) {
            core::hint::spin_loop();
        }
        PERCPU_HOLDING.store(false, Ordering::Release);
        *v += 1;
    });
    c_ulong::from(held.is_err())
}

/// Lets the calling task run on `cpu` only, or on every possible CPU again if `None`; whether it
/// now runs where it should.
fn pin(cpu: Option<u32>) -> bool {
    let task = kernel::current!();
    let Some(cpu) = cpu else {
        let all = &raw const bindings::__cpu_possible_mask;
        // SAFETY: The task is the caller's, alive for the call; the possible mask lives as long
        // as the kernel. Moving a task may sleep, as a debugfs write may.
        return unsafe { bindings::set_cpus_allowed_ptr(task.as_ptr(), all) } == 0;
    };
    let Some(id) = kernel::cpu::CpuId::from_u32(cpu) else {
        return false;
    };
    let Ok(mut mask) = kernel::cpumask::CpumaskVar::new_zero(GFP_KERNEL) else {
        return false;
    };
    mask.set(id);
    // SAFETY: As above; `mask` lives until the call returns.
    let ret = unsafe { bindings::set_cpus_allowed_ptr(task.as_ptr(), mask.as_raw()) };
    ret == 0 && kernel::cpu::CpuId::current() == id
}

impl Bench {
    /// `flip` of the upstream key: its sites are counted first.
    fn upstream(&self, flips: u64) -> Result {
        let key = upstream_key();
        let sites = u32::try_from(key.site_count()?).map_err(|_| EINVAL)?;
        // The pages of text its sites lie in (a site crossing into the next page counts both).
        let (mut pages, mut last) = (0u64, 0usize);
        key.for_each_site(|site| {
            for page in
                [site.code(), site.code() + site.size() - 1].map(|a| a / kernel::page::PAGE_SIZE)
            {
                if page != last {
                    pages += 1;
                    last = page;
                }
            }
        })?;
        let k = BenchKey {
            sites,
            key,
            run: run_upstream,
            last: None,
        };
        self.run(&k, flips, false)?;
        self.figures[30].store(pages, Ordering::Relaxed);
        self.kind.store(12, Ordering::Relaxed);
        Ok(())
    }

    /// Flips `k` `flips` times; with `lookup`, while an executor runs its last site.
    fn run(&self, k: &BenchKey, flips: u64, lookup: bool) -> Result {
        if k.key.is_enabled() {
            return Err(EBUSY);
        }
        if lookup {
            let last = k.last.ok_or(EINVAL)?;
            // SAFETY: `last` may run on any CPU at any time.
            let started = unsafe { text_poke_timed_start(last) };
            if started < 0 {
                return Err(Error::from_errno(started));
            }
        }
        let before = stats();
        let (mut total, mut min, mut max, mut wrong) = (0u64, u64::MAX, 0u64, 0u64);
        for i in 0..flips {
            let enable = i % 2 == 0;
            let t0 = now();
            // SAFETY: `k.key` is a valid key, and this task may sleep.
            unsafe {
                if enable {
                    bindings::static_key_enable(k.key.as_raw());
                } else {
                    bindings::static_key_disable(k.key.as_raw());
                }
            }
            let ns = now().wrapping_sub(t0);
            total = total.wrapping_add(ns);
            min = min.min(ns);
            max = max.max(ns);
            let taken = (k.run)();
            wrong += u64::from(if enable {
                k.sites.saturating_sub(taken)
            } else {
                taken
            });
        }
        let after = stats();
        let mut timed = Timed::default();
        if lookup {
            // SAFETY: `timed` is valid for writes; the executor was started above.
            unsafe { text_poke_timed_stop(&mut timed) };
        }
        if k.key.is_enabled() {
            // SAFETY: `k.key` is a key of this module or the `write_msr` tracepoint's key of the
            // kernel image: initialised, writable, and valid while this module runs.
            // `static_key_disable()` may sleep and takes `cpus_read_lock()`, `jump_label_mutex` and
            // `text_mutex`: this debugfs write runs in task context and holds none of them.
            unsafe { bindings::static_key_disable(k.key.as_raw()) };
        }
        let mut values = [0u64; FIELDS.len()];
        values[..14].copy_from_slice(&[
            u64::from(k.sites),
            flips,
            after.syncs - before.syncs,
            after.ipis - before.ipis,
            after.entries - before.entries,
            after.batches - before.batches,
            total,
            min,
            max,
            wrong,
            timed.hits,
            timed.hit_ns,
            timed.plain,
            timed.plain_ns,
        ]);
        values[28] = after.mm_switches - before.mm_switches;
        values[29] = after.batch_ns - before.batch_ns;
        values[41..46].copy_from_slice(&[
            timed.hit_med,
            timed.hit_min,
            timed.plain_med,
            timed.plain_min,
            timed.slow,
        ]);
        self.record(if lookup { 2 } else { 1 }, values);
        Ok(())
    }
}

impl Bench {
    /// Flips the eight transaction keys `flips` times one by one, then `flips` times as one
    /// transaction each time.
    fn txn(&self, flips: u64) -> Result {
        if TXN_KEYS.iter().any(|k| k.is_enabled()) {
            return Err(EBUSY);
        }
        let mut wrong = 0u64;
        let mut check = |enable: bool| {
            let taken = run_txn();
            wrong += u64::from(if enable {
                512u32.saturating_sub(taken)
            } else {
                taken
            });
        };

        // The time the checks take is left out of both ways.
        let before = stats();
        let t0 = now();
        let mut check_ns = 0u64;
        for i in 0..flips {
            let enable = i % 2 == 0;
            for key in TXN_KEYS {
                if enable {
                    key.enable()?;
                } else {
                    key.disable()?;
                }
            }
            let c0 = now();
            check(enable);
            check_ns += now().wrapping_sub(c0);
        }
        let one_ns = now().wrapping_sub(t0).wrapping_sub(check_ns);
        let mid = stats();
        let t0 = now();
        let mut txn_check_ns = 0u64;
        for i in 0..flips {
            let enable = i % 2 == 0;
            let mut txn = Transaction::new();
            for key in TXN_KEYS {
                if enable {
                    txn.enable(key)?;
                } else {
                    txn.disable(key)?;
                }
            }
            txn.commit()?;
            let c0 = now();
            check(enable);
            txn_check_ns += now().wrapping_sub(c0);
        }
        let txn_ns = now().wrapping_sub(t0).wrapping_sub(txn_check_ns);
        let after = stats();
        for key in TXN_KEYS {
            if key.is_enabled() {
                key.disable()?;
            }
        }
        let mut values = [0u64; FIELDS.len()];
        values[..18].copy_from_slice(&[
            512,
            flips,
            mid.syncs - before.syncs,
            mid.ipis - before.ipis,
            mid.entries - before.entries,
            mid.batches - before.batches,
            one_ns,
            0,
            0,
            wrong,
            0,
            0,
            0,
            0,
            after.syncs - mid.syncs,
            after.ipis - mid.ipis,
            after.batches - mid.batches,
            txn_ns,
        ]);
        self.record(3, values);
        Ok(())
    }

    /// The module init text test: see the module documentation.
    fn modtxn(&self, ms: u64) -> Result {
        let key = mod_key();
        if key.is_enabled() {
            return Err(EBUSY);
        }
        let mut txn = Transaction::new();
        txn.enable(key)?;
        // SAFETY: A `bool` of the kernel image the module's init function polls with
        // `READ_ONCE()`.
        unsafe { Atomic::from_ptr(&raw mut text_poke_batch_mod_go) }.store(true, Relaxed);
        kernel::time::delay::fsleep(kernel::time::Delta::from_millis(ms as i64));
        let before = stats();
        let ret = txn.commit();
        let after = stats();
        // SAFETY: `text_poke_batch_mod_go` is a `bool` of the kernel image (`text_poke_stress.c`),
        // aligned and valid for reads and writes as long as the kernel runs. Every other access to
        // it is marked (`READ_ONCE()` in `text_poke_mod_test.ko`'s init, `WRITE_ONCE()` in
        // `text_poke_hold_jump_label()`, `Atomic` here), so none races with this store.
        unsafe { Atomic::from_ptr(&raw mut text_poke_batch_mod_go) }.store(false, Relaxed);
        let mut values = [0u64; FIELDS.len()];
        values[1] = 1;
        values[2] = after.syncs - before.syncs;
        values[3] = after.ipis - before.ipis;
        values[4] = after.entries - before.entries;
        values[5] = after.batches - before.batches;
        values[9] = after.refused - before.refused;
        self.record(4, values);
        ret
    }

    /// The module init text stress: lets the module's init function return while its key
    /// flips, each flip a batch that writes the module's init sites for as long as it is
    /// `MODULE_STATE_COMING`: until the init function says it returns, then `flips` times more
    /// (as the module goes live and frees its init text), every other pair of flips a
    /// transaction. Ends with the key disabled; `EAGAIN` if the init function never returned
    /// (within 100,000 flips).
    fn modrace(&self, flips: u64) -> Result {
        let key = mod_key();
        // SAFETY: `bool`s of the kernel image the module's init function reads and writes with
        // `READ_ONCE()` and `WRITE_ONCE()`.
        let (go, returning) = unsafe {
            (
                Atomic::from_ptr(&raw mut text_poke_batch_mod_go),
                Atomic::from_ptr(&raw mut text_poke_batch_mod_returning),
            )
        };
        returning.store(false, Relaxed);
        go.store(true, Relaxed);
        let before = stats();
        let mut ret = Ok(());
        let (mut i, mut left) = (0u64, None);
        while left != Some(0) && i < 100_000 {
            if left.is_none() && returning.load(Relaxed) {
                left = Some(flips);
            }
            left = left.map(|n| n - 1);
            let on = i % 2 == 0;
            ret = if i % 4 >= 2 {
                let mut txn = Transaction::new();
                let claimed = if on {
                    txn.enable(key)
                } else {
                    txn.disable(key)
                };
                claimed.and_then(|()| txn.commit())
            } else if on {
                key.enable()
            } else {
                key.disable()
            };
            if ret.is_err() {
                break;
            }
            i += 1;
        }
        if left != Some(0) && ret.is_ok() {
            ret = Err(EAGAIN);
        }
        if key.is_enabled() {
            ret = ret.and(key.disable());
        }
        let after = stats();
        go.store(false, Relaxed);
        let mut values = [0u64; FIELDS.len()];
        values[1] = i;
        values[4] = after.entries - before.entries;
        if let Some(i) = FIELDS.iter().position(|&f| f == "refused") {
            values[i] = after.refused - before.refused;
        }
        self.record(15, values);
        ret
    }

    /// Sets the key of the module init text test.
    fn modkey(&self, on: bool) -> Result {
        let before = stats();
        if on {
            mod_key().enable()?;
        } else {
            mod_key().disable()?;
        }
        let after = stats();
        let mut values = [0u64; FIELDS.len()];
        values[1] = 1;
        values[4] = after.entries - before.entries;
        self.record(5, values);
        Ok(())
    }

    /// Enables or disables `k`.
    fn set(&self, k: &BenchKey, on: bool) -> Result {
        let before = stats();
        if on {
            k.key.enable()?;
        } else {
            k.key.disable()?;
        }
        let after = stats();
        let mut values = [0u64; FIELDS.len()];
        values[0] = u64::from(k.sites);
        values[1] = 1;
        values[2] = after.syncs - before.syncs;
        values[3] = after.ipis - before.ipis;
        values[4] = after.entries - before.entries;
        self.record(6, values);
        Ok(())
    }

    /// `faults KEY` (`k`) or `faults txn` (`None`): see the module documentation.
    fn faults(&self, k: Option<&BenchKey>) -> Result {
        if !cfg!(CONFIG_FAULT_INJECTION) {
            return Err(ENODEV);
        }
        let (keys, sites, run): (&[&StaticKeyFalse], u32, fn() -> u32) = match k {
            Some(k) => (core::slice::from_ref(&k.key), k.sites, k.run),
            None => (&TXN_KEYS[..], 64, run_txn),
        };
        if keys.iter().any(|k| k.is_enabled()) {
            return Err(EBUSY);
        }
        let enable = || -> Result {
            if k.is_some() {
                return keys.iter().try_for_each(|k| k.enable());
            }
            let mut txn = Transaction::new();
            for key in keys {
                txn.enable(key)?;
            }
            txn.commit()
        };
        // Keys whose sites disagree with them: bytes, or the direction all of them take.
        let wrong = || -> u64 {
            let bytes = keys
                .iter()
                .filter(|k| !matches!(k.check_sites(), Ok((_, 0))))
                .count() as u64;
            let want: u32 = keys
                .iter()
                .map(|k| if k.is_enabled() { sites } else { 0 })
                .sum();
            bytes + u64::from(run() != want)
        };
        let (mut injected, mut refused, mut bad) = (0u64, 0u64, 0u64);
        for n in 1..=10_000u32 {
            // SAFETY: Only sets the calling task's count.
            unsafe { text_poke_fail_nth(n) };
            let ret = enable();
            // SAFETY: `text_poke_fail_nth()` takes no pointer: it reads and clears
            // `current->fail_nth` with `READ_ONCE()` and `WRITE_ONCE()`, and `current` is this
            // task, valid in the task context a debugfs write runs in.
            let left = unsafe { text_poke_fail_nth(0) };
            if let Err(e) = ret {
                refused += 1;
                bad += u64::from(e != ENOMEM && e != EIO);
            }
            bad += wrong();
            for key in keys {
                if key.is_enabled() {
                    key.disable()?;
                }
            }
            bad += wrong();
            if left != 0 {
                // The enable got past all its points: none failed.
                bad += u64::from(ret.is_err());
                break;
            }
            injected += 1;
        }
        let mut values = [0u64; FIELDS.len()];
        values[0] = u64::from(sites) * keys.len() as u64;
        values[9] = bad;
        values[38] = injected;
        values[39] = refused;
        self.record(14, values);
        Ok(())
    }

    /// `cfaults KEY`: see the module documentation.
    fn cfaults(&self, k: &BenchKey) -> Result {
        if !cfg!(CONFIG_FAULT_INJECTION) {
            return Err(ENODEV);
        }
        let key = k.key.as_raw();
        // Sites that disagree with the key: bytes, or the direction they take.
        let wrong = || -> u64 {
            let bytes = !matches!(k.key.check_sites(), Ok((_, 0)));
            let want = if k.key.is_enabled() { k.sites } else { 0 };
            u64::from(bytes) + u64::from((k.run)() != want)
        };
        if k.key.is_enabled() {
            return Err(EBUSY);
        }
        let (mut injected, mut lost, mut bad) = (0u64, 0u64, 0u64);
        // C's static_key_enable(), static_key_disable(), static_key_slow_inc() and
        // static_key_slow_dec(), each from the state it changes, and the count it leaves.
        for (op, want) in [(0, 1), (1, 0), (2, 1), (3, 0)] {
            for n in 1..=10_000u32 {
                // SAFETY: `key` is a valid key, which C callers flip with these.
                unsafe {
                    match op {
                        1 => bindings::static_key_enable(key),
                        3 => {
                            bindings::static_key_slow_inc(key);
                        }
                        _ => {}
                    }
                }
                // SAFETY: Only sets the calling task's count.
                unsafe { text_poke_fail_nth(n) };
                // SAFETY: As above.
                unsafe {
                    match op {
                        0 => bindings::static_key_enable(key),
                        1 => bindings::static_key_disable(key),
                        2 => {
                            bindings::static_key_slow_inc(key);
                        }
                        _ => bindings::static_key_slow_dec(key),
                    }
                }
                // SAFETY: `text_poke_fail_nth()` takes no pointer: it reads and clears
                // `current->fail_nth`, and `current` is this task.
                let left = unsafe { text_poke_fail_nth(0) };
                lost += u64::from(k.key.count() != want);
                bad += wrong();
                // SAFETY: As above; back to disabled, with no fault armed.
                unsafe { bindings::static_key_disable(key) };
                if left != 0 {
                    // The call got past all its points: none failed.
                    break;
                }
                injected += 1;
            }
        }
        let mut values = [0u64; FIELDS.len()];
        values[0] = u64::from(k.sites);
        values[9] = bad;
        values[38] = injected;
        values[39] = lost;
        self.record(16, values);
        Ok(())
    }

    /// Runs every site of `k` on this CPU: `wrong` counts those that did not take the key's
    /// direction.
    fn sites(&self, k: &BenchKey) -> Result {
        let taken = (k.run)();
        let wrong = if k.key.is_enabled() {
            k.sites.saturating_sub(taken)
        } else {
            taken
        };
        let mut values = [0u64; FIELDS.len()];
        values[0] = u64::from(k.sites);
        values[9] = u64::from(wrong);
        self.record(7, values);
        Ok(())
    }

    /// The entry hook of deferred work, `n` times on this (housekeeping) CPU for each state of
    /// the word kernel entry finds: not taking part (deferral off), in user space with nothing
    /// pending, with a sync pending, and with a TLB flush pending.
    #[cfg(CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE)]
    fn entry(&self, n: u64) -> Result {
        let mut values = [0u64; FIELDS.len()];
        values[1] = n;
        let user = bindings::CT_WORK_USER;
        let work = |w: u32| user | w << bindings::CT_WORK_WORK_SHIFT;
        let sync = work(bindings::ct_work_kind_CT_WORK_SYNC_CORE);
        let tlb = work(bindings::ct_work_kind_CT_WORK_TLB_FLUSH);
        for (slot, word) in [(18, 0), (19, user), (20, sync), (23, tlb)] {
            let mut ns = 0u64;
            // SAFETY: `ns` is valid for writes; the function checks its CPU and word.
            let ret = unsafe { bindings::ct_work_bench_entry(word, n as u32, &mut ns) };
            if ret < 0 {
                return Err(Error::from_errno(ret));
            }
            values[slot] = ns;
        }
        self.record(8, values);
        Ok(())
    }

    #[cfg(not(CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE))]
    fn entry(&self, _n: u64) -> Result {
        Err(ENODEV)
    }

    /// The vmalloc tests of deferred kernel TLB flushes: see `text_poke_stress.h`.
    fn vmalloc(&self, cmd: Vmalloc) -> Result {
        let mut values = [0u64; FIELDS.len()];
        let before = stats();
        let t0 = now();
        match cmd {
            // SAFETY: The helpers take no pointers but those given here, valid for writes.
            Vmalloc::Storm(n) => errno(unsafe { text_poke_vstorm(n as u32, 16) })?,
            // SAFETY: `text_poke_vread()` takes no pointer. It takes `text_poke_vlock`, a mutex,
            // and may `vmalloc()` its buffer, so it may sleep, as this debugfs write, in task
            // context with no lock held, may.
            Vmalloc::Read => errno(unsafe { text_poke_vread() })?,
            // SAFETY: `text_poke_vreuse()` takes no pointer. It takes `text_poke_vlock`, frees and
            // maps vmalloc memory and purges lazy mappings (`vm_unmap_aliases()`), so it may sleep,
            // as this debugfs write, in task context with no lock held, may.
            Vmalloc::Reuse => errno(unsafe { text_poke_vreuse() })?,
            Vmalloc::Check => {
                let (mut reused, mut stale) = (false, false);
                // SAFETY: `reused` and `stale` are local `bool`s, valid for writes for the whole
                // call. `text_poke_vcheck()` takes `text_poke_vlock` and frees vmalloc memory, so
                // it may sleep, as this task may.
                errno(unsafe { text_poke_vcheck(&mut reused, &mut stale) })?;
                values[21] = u64::from(reused);
                values[22] = u64::from(stale);
            }
            Vmalloc::Tables(level) => {
                let mut cpus: c_ulong = 0;
                // SAFETY: `cpus` is a local `c_ulong`, valid for writes for the whole call. `level`
                // is `PMD_SHIFT` or `PUD_SHIFT` (`parse()`), and `text_poke_vtables()` refuses any
                // other. It maps and unmaps vmalloc space and frees a page table, so it may sleep,
                // as this task may.
                errno(unsafe { text_poke_vtables(level, &mut cpus) })?;
                values[40] = cpus;
            }
        }
        values[6] = now().wrapping_sub(t0);
        let after = stats();
        values[1] = match cmd {
            Vmalloc::Storm(n) => n,
            _ => 1,
        };
        values[3] = after.ipis - before.ipis;
        self.record(9, values);
        Ok(())
    }

    /// `lru_add_drain_all()` `n` times from this CPU.
    fn lru_drain(&self, n: u64) -> Result {
        let mut values = [0u64; FIELDS.len()];
        let t0 = now();
        // SAFETY: The helper takes no pointers.
        errno(unsafe { text_poke_lru_drain(n as u32) })?;
        values[6] = now().wrapping_sub(t0);
        values[1] = n;
        self.record(10, values);
        Ok(())
    }

    /// The local fast path of a per-CPU lock, `n` lock-unlock pairs: an empty call, a
    /// `local_lock`, and a qpw lock in this boot's mode.
    fn lock_cost(&self, n: u64) -> Result {
        let mut values = [0u64; FIELDS.len()];
        let (mut on, mut none, mut local, mut qpw) = (false, 0, 0, 0);
        // SAFETY: The pointers are valid for writes.
        errno(unsafe { qpw_lock_bench(n as u32, &mut none, &mut local, &mut qpw, &mut on) })?;
        values[1] = n;
        values[24..28].copy_from_slice(&[none, local, qpw, u64::from(on)]);
        self.record(11, values);
        Ok(())
    }

    /// The fast path of a Rust per-CPU lock (`kernel::qpw::PerCpu::local()`, an increment of
    /// this CPU's counter, the guard's drop), `n` times on each online CPU, the best of three
    /// runs: first with nothing else running, then while a task on another CPU holds its own
    /// CPU's counter through `PerCpu::with_cpu()` for as long as the runs take, so that a remote
    /// hold is in flight throughout; the busy run measures every CPU but that one. The least and
    /// the most ns per call over the CPUs measured, each way: whether the fast path grows with
    /// the number of CPUs, or while a remote hold is in flight. Under single-threaded TCG the
    /// guest clock also counts the holding task's instructions, which run in turn with the
    /// measured CPU's; its wait is a pause loop, which hands the turn on at once.
    fn percpu(&self, n: u64) -> Result {
        let pc = kernel::new_qpw_percpu!(|_| 0u64, "text_poke_bench_percpu")?;
        let nr = kernel::cpu::nr_cpu_ids();
        let online = |cpu: u32| {
            // SAFETY: Only reads the online mask.
            unsafe { bindings::cpumask_test_cpu(cpu as i32, &raw mut bindings::__cpu_online_mask) }
        };
        // The best of three runs of `n` calls on this CPU, in ns per call.
        let run = || -> Result<u64> {
            let mut best = u64::MAX;
            for _ in 0..3 {
                let t0 = now();
                for _ in 0..n {
                    *pc.local()? += 1;
                }
                best = best.min(now().wrapping_sub(t0) / n);
            }
            Ok(best)
        };
        let mut values = [0u64; FIELDS.len()];
        values[1] = n;
        let (mut min, mut max, mut cpus) = (u64::MAX, 0, 0);
        for cpu in (0..nr).filter(|&c| online(c)) {
            if !pin(Some(cpu)) {
                continue;
            }
            let ns = run();
            let ns = ns.inspect_err(|_| {
                pin(None);
            })?;
            (min, max, cpus) = (min.min(ns), max.max(ns), cpus + 1);
        }
        pin(None);
        if cpus == 0 {
            return Err(EAGAIN);
        }
        values[46..48].copy_from_slice(&[min, max]);
        values[50] = cpus;
        // The busy runs: one task on the first online CPU after the first (this task starts it
        // from the first), holding its own CPU's counter in a loop.
        let first = (0..nr).find(|&c| online(c)).ok_or(EAGAIN)?;
        if !pin(Some(first)) {
            pin(None);
            return Err(EAGAIN);
        }
        let busy = (first + 1..nr).find(|&c| online(c));
        PERCPU.store((&raw const pc).cast_mut(), Ordering::Release);
        PERCPU_RELEASE.store(false, Ordering::Release);
        // SAFETY: `percpu_hold()` reads `PERCPU`, which stays valid until the task is stopped
        // below, before `pc` is dropped.
        let started = unsafe { text_poke_stress_start(percpu_hold, 1) };
        let (mut bmin, mut bmax, mut held) = (u64::MAX, 0, 0);
        let mut failed = None;
        // Until the hold is in flight, a second at most.
        let t0 = now();
        while started == 1
            && !PERCPU_HOLDING.load(Ordering::Acquire)
            && now().wrapping_sub(t0) < 1_000_000_000
        {
            kernel::time::delay::fsleep(kernel::time::Delta::from_micros(100));
        }
        if PERCPU_HOLDING.load(Ordering::Acquire) {
            for cpu in (0..nr).filter(|&c| online(c) && Some(c) != busy) {
                if !pin(Some(cpu)) {
                    continue;
                }
                match run() {
                    Ok(ns) => (bmin, bmax) = (bmin.min(ns), bmax.max(ns)),
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
            // Still held: the hold was in flight for every busy run.
            held = u64::from(PERCPU_HOLDING.load(Ordering::Acquire));
        }
        PERCPU_RELEASE.store(true, Ordering::Release);
        let (mut passes, mut wrong) = (0, 0);
        // SAFETY: The pointers are valid for writes; it stops the task started above (if any)
        // and unpins this one.
        unsafe { text_poke_stress_stop(&mut passes, &mut wrong) };
        PERCPU.store(core::ptr::null_mut(), Ordering::Release);
        pin(None);
        if let Some(e) = failed {
            return Err(e);
        }
        if started != 1 || bmax == 0 || wrong != 0 || passes == 0 {
            return Err(EAGAIN);
        }
        values[48..50].copy_from_slice(&[bmin, bmax]);
        values[51] = held;
        values[27] = u64::from(kernel::qpw::enabled());
        self.record(17, values);
        Ok(())
    }

    /// The fast path of a branch in each variant: `n` calls, the best of three runs.
    fn branch(&self, n: u64) -> Result {
        let run = |which: u32| -> Result<u64> {
            let mut best = u64::MAX;
            for _ in 0..3 {
                let mut ns = 0;
                // SAFETY: `ns` is valid for writes; the helper calls the variant's function.
                errno(unsafe { text_poke_branch_run(which, n as u32, &mut ns) })?;
                best = best.min(ns);
            }
            Ok(best)
        };
        let mut values = [0u64; FIELDS.len()];
        values[1] = n;
        // A flag nothing stores to (or only its initial value) would be folded away.
        BRANCH_FLAG.store(core::hint::black_box(false), Ordering::Relaxed);
        BRANCH_KEY.disable()?;
        values[31] = run(BRANCH_PLAIN)?;
        values[32] = run(BRANCH_UNLIKELY)?;
        values[34] = run(BRANCH_LIKELY)?;
        values[36] = run(BRANCH_ATOMIC)?;
        values[37] = run(BRANCH_C_UNLIKELY)?;
        BRANCH_KEY.enable()?;
        let on = (run(BRANCH_UNLIKELY), run(BRANCH_LIKELY));
        BRANCH_KEY.disable()?;
        (values[33], values[35]) = (on.0?, on.1?);
        self.record(13, values);
        Ok(())
    }

    /// Keeps a run's figures, in [`FIELDS`] order, for the next read.
    fn record(&self, kind: u64, values: [u64; FIELDS.len()]) {
        for (slot, v) in self.figures.iter().zip(values) {
            slot.store(v, Ordering::Relaxed);
        }
        self.mode.store(mode(), Ordering::Relaxed);
        self.kind.store(kind, Ordering::Relaxed);
    }
}

/// A benchmark command.
enum Command {
    PerCpu(u64),
    Flip(&'static BenchKey, u64),
    Lookup(&'static BenchKey, u64),
    Txn(u64),
    ModTxn(u64),
    ModRace(u64),
    ModKey(bool),
    Set(&'static BenchKey, bool),
    Sites(&'static BenchKey),
    Entry(u64),
    Vmalloc(Vmalloc),
    LruDrain(u64),
    LockCost(u64),
    Branch(u64),
    RoKey(bool),
    Upstream(u64),
    Faults(Option<&'static BenchKey>),
    CFaults(&'static BenchKey),
    HoldJumpLabel(u64),
}

/// A vmalloc test command.
#[derive(Clone, Copy)]
enum Vmalloc {
    Storm(u64),
    Read,
    Reuse,
    Check,
    /// The flush before a page table is freed: `PMD_SHIFT` or `PUD_SHIFT`.
    Tables(u32),
}

/// The key `word` names: its number of sites, or `noinstr`.
fn key_named(word: Option<&str>) -> Result<&'static BenchKey> {
    let word = word.ok_or(EINVAL)?;
    if word == "noinstr" {
        return Ok(&NOINSTR);
    }
    #[cfg(CONFIG_TEXT_POKE_BATCH_BENCH_LARGE)]
    if word == "4096" {
        return Ok(&LARGE);
    }
    let sites: u32 = word.parse().map_err(|_| EINVAL)?;
    KEYS.iter().find(|k| k.sites == sites).ok_or(EINVAL)
}

/// Parses `flip KEY FLIPS`, `lookup KEY FLIPS`, `txn FLIPS`, `modtxn MS`, `modrace FLIPS`,
/// `modkey 0|1`, `set KEY 0|1`, `sites KEY`, `faults KEY|txn`, `cfaults KEY`, `holdjl MS`,
/// `entry N`,
/// `vstorm N`, `vread`, `vreuse`, `vcheck`, `vtables pmd|pud`, `lrudrain N`, `lockcost N`,
/// `percpu N`,
/// `branch N` or `upstream FLIPS`, where KEY is a number of sites or `noinstr`.
fn parse(cmd: &[u8]) -> Result<Command> {
    let text = core::str::from_utf8(cmd).map_err(|_| EINVAL)?;
    let mut words = text.split_ascii_whitespace();
    let verb = words.next().ok_or(EINVAL)?;
    let number =
        |word: Option<&str>| -> Result<u64> { word.ok_or(EINVAL)?.parse().map_err(|_| EINVAL) };
    let cmd = match verb {
        "txn" => Command::Txn(number(words.next())?),
        "modtxn" => Command::ModTxn(number(words.next())?.clamp(1, 10_000)),
        "modrace" => Command::ModRace(number(words.next())?),
        "modkey" => match number(words.next())? {
            0 => Command::ModKey(false),
            1 => Command::ModKey(true),
            _ => return Err(EINVAL),
        },
        "set" => {
            let key = key_named(words.next())?;
            match words.next() {
                Some("0") => Command::Set(key, false),
                Some("1") => Command::Set(key, true),
                _ => return Err(EINVAL),
            }
        }
        "sites" => Command::Sites(key_named(words.next())?),
        "holdjl" => Command::HoldJumpLabel(number(words.next())?.min(10_000)),
        "faults" => match words.next() {
            Some("txn") => Command::Faults(None),
            word => Command::Faults(Some(key_named(word)?)),
        },
        "cfaults" => Command::CFaults(key_named(words.next())?),
        "entry" => Command::Entry(number(words.next())?),
        "vstorm" => Command::Vmalloc(Vmalloc::Storm(number(words.next())?)),
        "vread" => Command::Vmalloc(Vmalloc::Read),
        "vreuse" => Command::Vmalloc(Vmalloc::Reuse),
        "vcheck" => Command::Vmalloc(Vmalloc::Check),
        "vtables" => Command::Vmalloc(Vmalloc::Tables(match words.next() {
            Some("pmd") => bindings::PMD_SHIFT,
            Some("pud") => bindings::PUD_SHIFT,
            _ => return Err(EINVAL),
        })),
        "lrudrain" => Command::LruDrain(number(words.next())?),
        "lockcost" => Command::LockCost(number(words.next())?),
        "percpu" => Command::PerCpu(number(words.next())?),
        "branch" => Command::Branch(number(words.next())?),
        "rokey" => match number(words.next())? {
            0 => Command::RoKey(false),
            1 => Command::RoKey(true),
            _ => return Err(EINVAL),
        },
        "upstream" => Command::Upstream(number(words.next())?),
        "flip" | "lookup" => {
            let key = key_named(words.next())?;
            let flips = number(words.next())?;
            if verb == "flip" {
                Command::Flip(key, flips)
            } else {
                Command::Lookup(key, flips)
            }
        }
        _ => return Err(EINVAL),
    };
    let flips = match cmd {
        Command::Flip(_, n)
        | Command::Lookup(_, n)
        | Command::Txn(n)
        | Command::ModTxn(n)
        | Command::ModRace(n)
        | Command::Entry(n)
        | Command::Vmalloc(Vmalloc::Storm(n))
        | Command::LruDrain(n)
        | Command::LockCost(n)
        | Command::PerCpu(n)
        | Command::Branch(n)
        | Command::Upstream(n) => n,
        Command::Vmalloc(_) => 1,
        Command::ModKey(_)
        | Command::Set(..)
        | Command::Sites(_)
        | Command::RoKey(_)
        | Command::Faults(_)
        | Command::CFaults(_)
        | Command::HoldJumpLabel(_) => 1,
    };
    if words.next().is_some() || flips == 0 || flips > 1_000_000 {
        return Err(EINVAL);
    }
    Ok(cmd)
}

fn write_run(bench: &Bench, reader: &mut UserSliceReader) -> Result {
    let mut buf = [0u8; 32];
    let n = reader.len();
    if n == 0 || n > buf.len() {
        return Err(EINVAL);
    }
    reader.read_slice(&mut buf[..n])?;
    let cmd = parse(&buf[..n])?;
    if bench.busy.swap(true, Ordering::Acquire) {
        return Err(EBUSY);
    }
    let ret = match cmd {
        Command::Flip(key, flips) => bench.run(key, flips, false),
        Command::Lookup(key, flips) => bench.run(key, flips, true),
        Command::Txn(flips) => bench.txn(flips),
        Command::ModTxn(ms) => bench.modtxn(ms),
        Command::ModRace(flips) => bench.modrace(flips),
        Command::ModKey(on) => bench.modkey(on),
        Command::Set(key, on) => bench.set(key, on),
        Command::Sites(key) => bench.sites(key),
        Command::Entry(n) => bench.entry(n),
        Command::Vmalloc(v) => bench.vmalloc(v),
        Command::LruDrain(n) => bench.lru_drain(n),
        Command::LockCost(n) => bench.lock_cost(n),
        Command::PerCpu(n) => bench.percpu(n),
        Command::Branch(n) => bench.branch(n),
        // Refused once the kernel runs: the write fails with `EPERM`.
        Command::RoKey(true) => BENCH_RO_KEY.enable(),
        Command::RoKey(false) => BENCH_RO_KEY.disable(),
        Command::Upstream(n) => bench.upstream(n),
        Command::Faults(key) => bench.faults(key),
        Command::CFaults(key) => bench.cfaults(key),
        // SAFETY: Only holds a mutex and sleeps; `ms` is 10,000 at most.
        Command::HoldJumpLabel(ms) => errno(unsafe { text_poke_hold_jump_label(ms as u32) }),
    };
    bench.busy.store(false, Ordering::Release);
    ret
}

fn show_run(bench: &Bench, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let kind = match bench.kind.load(Ordering::Relaxed) {
        1 => "flip",
        2 => "lookup",
        3 => "txn",
        4 => "modtxn",
        5 => "modkey",
        6 => "set",
        7 => "sites",
        8 => "entry",
        9 => "vmalloc",
        10 => "lrudrain",
        11 => "lockcost",
        12 => "upstream",
        13 => "branch",
        14 => "faults",
        15 => "modrace",
        16 => "cfaults",
        17 => "percpu",
        _ => return writeln!(f, "none"),
    };
    let mode = match bench.mode.load(Ordering::Relaxed) as u32 {
        bindings::text_poke_batch_mode_TEXT_POKE_BATCH_MODE_RUST => "rust",
        bindings::text_poke_batch_mode_TEXT_POKE_BATCH_MODE_C => "c",
        _ => "serial",
    };
    writeln!(f, "kind {kind}")?;
    writeln!(f, "mode {mode}")?;
    for (name, v) in FIELDS.iter().zip(bench.figures.iter()) {
        writeln!(f, "{name} {}", v.load(Ordering::Relaxed))?;
    }
    Ok(())
}

fn show_keys(_: &Bench, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    for k in &KEYS {
        let sites = k.key.site_count().unwrap_or(0);
        writeln!(f, "{} {sites}", k.sites)?;
    }
    Ok(())
}

struct TextPokeBench {
    _debugfs: Pin<KBox<Scope<Bench>>>,
}

impl kernel::Module for TextPokeBench {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let bench = Bench {
            busy: AtomicBool::new(false),
            kind: AtomicU64::new(0),
            mode: AtomicU64::new(0),
            figures: [const { AtomicU64::new(0) }; FIELDS.len()],
        };
        let debugfs = KBox::pin_init(
            Scope::dir(bench, c"text_poke_bench", |bench, dir| {
                dir.read_write_callback_file(c"run", bench, &show_run, &write_run);
                dir.read_callback_file(c"keys", bench, &show_keys);
            }),
            GFP_KERNEL,
        )?;
        Ok(Self { _debugfs: debugfs })
    }
}

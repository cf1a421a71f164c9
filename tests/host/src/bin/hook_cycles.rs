// SPDX-License-Identifier: GPL-2.0

//! What the idle hooks of deferral cost in real cycles, on the host CPU: `-icount` counts a
//! locked exchange as one instruction, as it counts a `mov`.
//!
//! Each variant is a loop of what one CPU does in one idle round trip (idle entry, then idle
//! exit) or in one interrupt taken in idle (its entry, then its exit), built from the protocol's
//! own functions (`kernel/context_tracking_work/ct_work.rs`, whose C twins in
//! `include/linux/context_tracking_work.h` and `word.c` make the same loads, stores and locked
//! instructions), with context tracking's own two `ct_state_inc()` (a `lock xadd` each: one on
//! the way into idle or out of the interrupt, one on the way back) in every loop but the empty
//! one:
//!
//! - `loop`: the loop alone;
//! - `ct`: context tracking's two increments, what every idle round trip and every interrupt in
//!   idle pays without this project;
//! - `idle_off`, `idle_on`: an idle round trip with deferral off (idle entry reads the two
//!   switches and stores nothing, idle exit reads the word) and on (idle entry stores "idle",
//!   idle exit makes it "kernel" with a compare-and-exchange);
//! - `irq_off`, `irq_on`: an interrupt in idle with deferral off (the word is only read, the
//!   nesting level pushed and popped) and on (the word is exchanged for "kernel", then given back).
//!
//! Prints `@@ result scenario=hooks kind=host ...` lines for `scripts/demo/results.py`: per
//! variant the cheapest and the median of the samples, in TSC ticks per round trip and in ns.
//! Usage: `hook_cycles [SAMPLES [ITERATIONS]]` (default 201 samples of 20,000).

use jump_label_rs_host::ct_work::{self, Levels, Value, Word};
use std::arch::x86_64::{_mm_lfence, _rdtsc};
use std::hint::black_box;
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicPtr, AtomicU32,
    Ordering::{Relaxed, Release, SeqCst},
};
use std::time::{Duration, Instant};

/// A CPU's work word, with the instructions the kernel's C uses: a plain load, a plain store (a
/// release on x86), `lock cmpxchg` and `xchg`.
struct HostWord(AtomicU32);

impl Word for HostWord {
    #[inline(always)]
    fn load(&self) -> Value {
        Value::from_raw(self.0.load(Relaxed))
    }

    #[inline(always)]
    fn compare_exchange(&self, old: Value, new: Value) -> Result<Value, Value> {
        self.0
            .compare_exchange(old.raw(), new.raw(), SeqCst, Relaxed)
            .map(Value::from_raw)
            .map_err(Value::from_raw)
    }

    #[inline(always)]
    fn exchange(&self, new: Value) -> Value {
        Value::from_raw(self.0.swap(new.raw(), SeqCst))
    }

    #[inline(always)]
    fn store(&self, new: Value) {
        self.0.store(new.raw(), Release)
    }
}

/// The nesting levels, which only their CPU touches: plain loads and stores.
struct HostLevels(AtomicU32);

impl Levels for HostLevels {
    #[inline(always)]
    fn load(&self) -> u32 {
        self.0.load(Relaxed)
    }

    #[inline(always)]
    fn store(&self, levels: u32) {
        self.0.store(levels, Relaxed)
    }
}

static WORD: HostWord = HostWord(AtomicU32::new(0));
static LEVELS: HostLevels = HostLevels(AtomicU32::new(0));
/// Context tracking's per-CPU state, which `ct_state_inc()` adds to.
static CT_STATE: AtomicI32 = AtomicI32::new(0);
/// `ct_work_enabled`, the switch of sync deferral, which idle entry reads, and
/// `ct_work_idle_refused`, which it reads when it is on (an idle CPU takes syncs only).
static SYNC_ON: AtomicBool = AtomicBool::new(false);
static IDLE_REFUSED: AtomicPtr<u8> = AtomicPtr::new(core::ptr::null_mut());

/// `ct_state_inc()`: context tracking's own locked add, twice per round trip.
#[inline(always)]
fn ct_state_inc() {
    black_box(CT_STATE.fetch_add(black_box(4), SeqCst));
}

/// Idle entry (`ct_work_idle_enter()`): with sync deferral on, and idle deferral not refused,
/// the word says "idle".
#[inline(always)]
fn idle_enter() {
    if SYNC_ON.load(Relaxed) && IDLE_REFUSED.load(Relaxed).is_null() {
        ct_work::idle(&WORD);
    }
}

/// Idle exit (`ct_work_idle_exit()`): a word that is not "kernel" is taken.
#[inline(always)]
fn idle_exit() {
    if WORD.load() != Value::KERNEL {
        black_box(ct_work::enter_from(&WORD, Value::IDLE));
    }
}

/// An interrupt's entry and exit in idle (`ct_work_nmi_enter()`, `ct_work_nmi_exit()`),
/// then the word as idle entry left it.
#[inline(always)]
fn irq() {
    black_box(ct_work::nmi_enter(&WORD, &LEVELS));
    ct_work::nmi_exit(&WORD, &LEVELS);
}

/// The TSC, after every earlier instruction completed.
#[inline(always)]
fn ticks() -> u64 {
    // SAFETY: `lfence` and `rdtsc` exist on every x86-64 CPU, and touch no memory.
    unsafe {
        _mm_lfence();
        let t = _rdtsc();
        _mm_lfence();
        t
    }
}

/// A variant: its name, and the loop of `n` round trips.
type Variant = (&'static str, fn(u64));

#[inline(never)]
fn run_loop(n: u64) {
    for i in 0..n {
        black_box(i);
    }
}

#[inline(never)]
fn run_ct(n: u64) {
    for i in 0..n {
        ct_state_inc();
        ct_state_inc();
        black_box(i);
    }
}

#[inline(never)]
fn run_idle(n: u64) {
    for i in 0..n {
        ct_state_inc();
        idle_enter();
        idle_exit();
        ct_state_inc();
        black_box(i);
    }
}

#[inline(never)]
fn run_irq(n: u64) {
    for i in 0..n {
        irq();
        ct_state_inc();
        ct_state_inc();
        black_box(i);
    }
}

/// Sets the switches and the word as `variant` runs them: deferral on or off, the CPU idle.
fn set_up(variant: &str) {
    let on = variant.ends_with("_on");
    SYNC_ON.store(on, Relaxed);
    WORD.store(if variant.starts_with("irq") && on {
        Value::IDLE
    } else {
        Value::KERNEL
    });
    LEVELS.store(0);
}

/// The cheapest and the median of `samples` runs of `n` round trips, in ticks per round trip.
fn measure(run: fn(u64), samples: usize, n: u64) -> (f64, f64) {
    run(n);
    let mut per: Vec<f64> = (0..samples)
        .map(|_| {
            let t0 = ticks();
            run(n);
            (ticks() - t0) as f64 / n as f64
        })
        .collect();
    per.sort_by(f64::total_cmp);
    (per[0], per[per.len() / 2])
}

/// TSC ticks per ns, over 100 ms of the monotonic clock.
fn tsc_per_ns() -> f64 {
    let (i0, t0) = (Instant::now(), ticks());
    while i0.elapsed() < Duration::from_millis(100) {}
    let (i1, t1) = (Instant::now(), ticks());
    (t1 - t0) as f64 / (i1 - i0).as_nanos() as f64
}

/// The exit latency, in µs, that this machine's cpuidle driver gives its shallowest state that
/// is not polling, with its name: what an idle exit costs at least.
fn idle_exit_latency() -> Option<(String, u64)> {
    let dir = std::path::Path::new("/sys/devices/system/cpu/cpu0/cpuidle");
    let mut states: Vec<(String, u64)> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| {
            let p = e.ok()?.path();
            let name = std::fs::read_to_string(p.join("name")).ok()?;
            let lat = std::fs::read_to_string(p.join("latency")).ok()?;
            Some((name.trim().to_owned(), lat.trim().parse().ok()?))
        })
        .filter(|(name, _)| name != "POLL")
        .collect();
    states.sort_by_key(|s| s.1);
    states.into_iter().next()
}

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u64>());
    let samples = match args.next() {
        Some(Ok(s)) if s > 0 => s as usize,
        None => 201,
        _ => {
            eprintln!("hook_cycles: usage: hook_cycles [SAMPLES [ITERATIONS]], both above 0");
            std::process::exit(2);
        }
    };
    let n = match args.next() {
        Some(Ok(n)) if n > 0 => n,
        None => 20_000,
        _ => {
            eprintln!("hook_cycles: usage: hook_cycles [SAMPLES [ITERATIONS]], both above 0");
            std::process::exit(2);
        }
    };
    let per_ns = tsc_per_ns();
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("model name")
                    .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
            })
        })
        .unwrap_or_else(|| "unknown".to_owned());
    let (state, latency) = idle_exit_latency().unwrap_or(("none".to_owned(), 0));
    println!(
        "@@ result scenario=hooks kind=host_info tsc_mhz={:.0} samples={samples} iterations={n} \
         idle_state={} idle_exit_us={latency} cpu={}",
        per_ns * 1000.0,
        state.replace(' ', "_"),
        cpu.replace(' ', "_")
    );
    let variants: [Variant; 6] = [
        ("loop", run_loop),
        ("ct", run_ct),
        ("idle_off", run_idle),
        ("idle_on", run_idle),
        ("irq_off", run_irq),
        ("irq_on", run_irq),
    ];
    for (name, run) in variants {
        set_up(name);
        let (min, median) = measure(run, samples, n);
        println!(
            "@@ result scenario=hooks kind=host variant={name} ticks_min={min:.2} \
             ticks_median={median:.2} ns_min={:.3} ns_median={:.3}",
            min / per_ns,
            median / per_ns
        );
    }
    println!("@@ done hooks");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each loop goes through the protocol's paths the kernel takes, and leaves the word and the
    /// levels as it found them: idle entry makes the word say "idle" and idle exit takes it back
    /// with the compare-and-exchange alone (no work, so no exchange), an interrupt in idle takes
    /// the word and gives it back; with deferral off, nothing but loads and the levels. The
    /// variants share statics: one test runs them in turn.
    #[test]
    fn loops_take_the_kernel_paths() {
        for name in ["idle_off", "idle_on", "irq_off", "irq_on"] {
            set_up(name);
            let before = WORD.load();
            if name.starts_with("idle") {
                idle_enter();
                let said = WORD.load();
                assert_eq!(
                    said,
                    if name == "idle_on" {
                        Value::IDLE
                    } else {
                        Value::KERNEL
                    }
                );
                idle_exit();
            } else {
                irq();
            }
            assert_eq!(WORD.load(), before, "{name}: the word changed");
            assert_eq!(LEVELS.load(), 0, "{name}: a level was left");
            (if name.starts_with("idle") {
                run_idle
            } else {
                run_irq
            })(1000);
            assert_eq!(WORD.load(), before, "{name}: the loop changed the word");
        }
        assert_eq!(Value::IDLE.work(), ct_work::Work::NONE);
    }
}

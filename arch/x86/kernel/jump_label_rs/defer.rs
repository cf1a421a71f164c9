// SPDX-License-Identifier: GPL-2.0

//! Deferral of text-poke syncs to isolated CPUs in user space: the sender's side of the per-CPU
//! work word of this kernel, and of a sync round.
//!
//! The protocol is [`ct_work`]'s; this module applies the sender's side of it to
//! `ct_work_rs_word`, one `u32` per CPU in C (`arch/x86/kernel/ct_work_rs.c`). The entry side
//! runs before instrumentation is allowed, so it is C there, one noinstr function for each of
//! [`ct_work`]'s, which the KUnit suite checks against them.
//!
//! Deferral applies to a CPU only while all of these hold: it is online and `nohz_full` (never a
//! housekeeping CPU), context tracking is active there (its hooks are what set
//! [`Context::User`](ct_work::Context::User)), deferral is switched on (`text_poke_defer=`,
//! `text_poke/defer`), it is in user space (not idle, not in a guest, not in the kernel), and
//! the batch writes nothing that a CPU can run between its entry instruction and the hook that
//! takes the work (see the danger zone in `ct_work_rs.c`).
//!
//! C header: [`include/linux/ct_work_rs.h`](srctree/include/linux/ct_work_rs.h).

use crate::ct_work::{self, Deferral, Value, Word, Work};
use crate::poke::PokeLoc;
use core::{
    ffi::c_int,
    ptr,
    sync::atomic::{AtomicU32, Ordering},
};
use kernel::{
    bindings,
    cpu::CpuId,
    cpumask::Cpumask,
    sync::atomic::{
        Atomic,
        Relaxed, //
    },
};

const _: () = assert!(Work::SYNC_CORE.bits() == bindings::ct_work_rs_work_CT_WORK_RS_SYNC_CORE);
const _: () = assert!(Work::TLB_FLUSH.bits() == bindings::ct_work_rs_work_CT_WORK_RS_TLB_FLUSH);
const _: () = assert!(Value::USER.raw() == bindings::CT_WORK_RS_USER);
const _: () = assert!(Value::USER_OFF.raw() == bindings::CT_WORK_RS_OFF);
const _: () = assert!(ct_work::WORK_SHIFT == bindings::CT_WORK_RS_WORK_SHIFT);
const _: () = assert!(Value::KERNEL_TAKING.raw() == bindings::CT_WORK_RS_TAKING);
const _: () = assert!(
    ct_work::LEVEL_BITS == bindings::CT_WORK_RS_LEVEL_BITS
        && ct_work::LEVEL_USER == bindings::CT_WORK_RS_LEVEL_USER
        && ct_work::LEVEL_TOOK == bindings::CT_WORK_RS_LEVEL_TOOK
);

/// A CPU's work word, as a sender sees it: the entry side is C (`ct_work_rs.c`).
///
/// Every read-modify-write is fully ordered (a `LOCK`ed instruction or `XCHG` on x86, as the
/// kernel's own fully ordered atomics), so the text a sender wrote before setting a bit is
/// visible to the CPU that takes it; the load only decides whether to try one. `core`'s atomics
/// rather than `kernel::sync::atomic`, whose operations are calls into C helpers: a round asks
/// every isolated CPU, and the calls cost a one-site flip with two isolated CPUs in user space
/// about 2% (`make demo`, isolation). This side never runs before instrumentation is allowed.
struct CpuWord<'a>(&'a AtomicU32);

impl CpuWord<'_> {
    /// The word at `word`.
    ///
    /// # Safety
    ///
    /// `word` points to a CPU's `ct_work_rs_word`, which lives as long as the kernel, and is
    /// only ever accessed atomically.
    #[inline(always)]
    unsafe fn at(word: *mut u32) -> Self {
        // SAFETY: As the caller guarantees: valid, aligned, and only accessed atomically.
        Self(unsafe { AtomicU32::from_ptr(word) })
    }

    /// The word of `cpu`, if deferral may apply to it: it is online and isolated.
    fn of(cpu: c_int) -> Option<Self> {
        // SAFETY: Only reads CPU masks; any `cpu` is accepted.
        let word = unsafe { bindings::ct_work_rs_word(cpu) };
        // SAFETY: A non-null result is that CPU's word.
        (!word.is_null()).then(|| unsafe { Self::at(word) })
    }
}

impl Word for CpuWord<'_> {
    #[inline(always)]
    fn load(&self) -> Value {
        Value::from_raw(self.0.load(Ordering::Acquire))
    }

    #[inline(always)]
    fn compare_exchange(&self, old: Value, new: Value) -> Result<Value, Value> {
        self.0
            .compare_exchange(old.raw(), new.raw(), Ordering::SeqCst, Ordering::SeqCst)
            .map(Value::from_raw)
            .map_err(Value::from_raw)
    }

    #[inline(always)]
    fn exchange(&self, new: Value) -> Value {
        Value::from_raw(self.0.swap(new.raw(), Ordering::SeqCst))
    }

    #[inline(always)]
    fn store(&self, new: Value) {
        self.0.store(new.raw(), Ordering::Release)
    }
}

/// Why a CPU cannot take work at its next entry: the sender must interrupt it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Refusal {
    /// Offline, out of range, or a housekeeping CPU: deferral never applies to it.
    NotIsolated,
    /// Isolated, but in the kernel, idle, in a guest, or with deferral switched off.
    NotInUser,
    /// Isolated, and returned to user space with deferral off: it takes no work until it passes
    /// through the kernel again, which only the IPI may make it do.
    LeftWithDeferralOff,
}

/// Asks `cpu` to run `work` at its next kernel entry instead of being interrupted now.
///
/// The caller wrote whatever the work is for (the text, for [`Work::SYNC_CORE`]) before.
pub fn defer_on(cpu: c_int, work: Work) -> Result<(), Refusal> {
    let word = CpuWord::of(cpu).ok_or(Refusal::NotIsolated)?;
    match ct_work::defer(&word, work) {
        Deferral::Deferred(added) => {
            audit_added(cpu, added);
            Ok(())
        }
        Deferral::Ipi => Err(Refusal::NotInUser),
        Deferral::IpiNow => Err(Refusal::LeftWithDeferralOff),
    }
}

/// Counts the kinds of work a sender added to `cpu`'s word, for the audit at entry.
#[cfg(CONFIG_TEXT_POKE_RS_DEFER_DEBUG)]
fn audit_added(cpu: c_int, added: Work) {
    if !added.is_empty() {
        // SAFETY: `cpu` is a possible CPU: its word was just written.
        unsafe { bindings::ct_work_rs_audit_added(cpu, added.bits()) };
    }
}

#[cfg(not(CONFIG_TEXT_POKE_RS_DEFER_DEBUG))]
fn audit_added(_cpu: c_int, _added: Work) {}

/// [`defer_on`] for C callers, with the work as `enum ct_work_rs_work` bits: whether `cpu` took
/// it (and needs no IPI). Unknown bits are refused.
#[no_mangle]
pub extern "C" fn ct_work_rs_defer(cpu: c_int, work: u32) -> bool {
    let kind = [Work::SYNC_CORE, Work::TLB_FLUSH]
        .into_iter()
        .filter(|w| work & w.bits() != 0)
        .fold(Work::NONE, Work::union);
    kind.bits() == work && !kind.is_empty() && defer_on(cpu, kind).is_ok()
}

/// Whether deferral is switched on.
pub fn enabled() -> bool {
    // SAFETY: `ct_work_rs_enabled` is a `bool` that lives as long as the kernel, written with
    // `WRITE_ONCE()`.
    unsafe { Atomic::from_ptr(&raw mut bindings::ct_work_rs_enabled) }.load(Relaxed)
}

/// Whether a batch of `sites` (with `base`) may be deferred: deferral is on, some CPU is
/// isolated, and no site is in text a CPU may run before it takes its work at entry.
pub fn may_defer(sites: &[PokeLoc], base: usize) -> bool {
    if !enabled() || next_isolated(-1) >= kernel::cpu::nr_cpu_ids() as c_int {
        return false;
    }
    !sites.iter().any(|s| entry_text(s.addr(base)))
}

/// Whether a CPU may run the text at `addr` before it takes its work at entry: the entry code,
/// and the static call trampolines it calls (`ct_work_rs_danger_text`).
pub fn entry_text(addr: usize) -> bool {
    // SAFETY: `ct_work_rs_danger_text` is set when the kernel is linked (and relocated before it
    // runs) and is `const`: nothing writes it, so reading it races with nothing.
    let ranges = unsafe { (&raw const bindings::ct_work_rs_danger_text).read() };
    ranges.iter().any(|r| (r[0]..r[1]).contains(&addr))
}

/// The next online isolated CPU after `cpu`, or `nr_cpu_ids`.
pub(crate) fn next_isolated(cpu: c_int) -> c_int {
    // SAFETY: Walks the online isolated CPUs; any `cpu` is accepted.
    unsafe { bindings::ct_work_rs_next_isolated(cpu) }
}

/// How long a sync round waits for isolated CPUs found in the kernel to return to user space,
/// before it sends them the IPI: `ct_work_rs_wait_ns`, 50 µs unless `text_poke/defer_wait_ns`
/// says otherwise; about the time a CPU takes to handle a tick or a short system call. Only the
/// sender waits; the isolated CPU is not disturbed.
fn wait_ns() -> u64 {
    // SAFETY: `ct_work_rs_wait_ns` is an aligned `unsigned long` that lives as long as the
    // kernel, only stored with `WRITE_ONCE()` (its debugfs file): this marked load and that
    // marked store do not race.
    unsafe { Atomic::from_ptr(&raw mut bindings::ct_work_rs_wait_ns) }.load(Relaxed) as u64
}

/// Isolated CPUs a round waits for at most; beyond them, CPUs found in the kernel get the IPI.
const MAX_WAITING: usize = 64;

fn now_ns() -> u64 {
    // SAFETY: `ktime_get_mono_fast_ns()` has no preconditions.
    unsafe { bindings::ktime_get_mono_fast_ns() }
}

/// Whether `cpu` runs a task: in the kernel, or on its way into or out of user space; not idle,
/// not in a guest.
fn running(cpu: c_int) -> bool {
    // SAFETY: Reads `cpu`'s context-tracking state; any online `cpu` is accepted.
    unsafe { bindings::ct_work_rs_cpu_running(cpu) }
}

/// Asks every isolated CPU to take the sync at its next kernel entry, and records in `deferred`
/// those that did. A CPU found running a task in the kernel, or on its way into or out of user
/// space, gets a short while ([`wait_ns()`]) to be in user space: once it is, it runs no kernel
/// text without taking the bit first, so the round needs no IPI for it either. Idle CPUs, CPUs
/// in a guest and CPUs that
/// returned to user space while deferral was off (they take no work until they pass through the
/// kernel again) get the IPI at once.
///
/// The sender's own CPU, when it is isolated, is neither asked nor waited for: it is in the
/// kernel, running the sender, and the round syncs it directly. Waiting for it to be in user
/// space would make every round of a sender on an isolated CPU last the whole wait. The CPU is
/// read without preemption disabled: if the sender moves, the CPU it left is merely not
/// deferred, and the round sends it the IPI.
pub(crate) fn ask(deferred: &mut Cpumask, round: &mut bindings::text_poke_rs_round) {
    let mut waiting = [0 as c_int; MAX_WAITING];
    let mut n = 0;
    let nr = kernel::cpu::nr_cpu_ids() as c_int;
    let me = CpuId::current().as_u32() as c_int;
    let mut cpu = next_isolated(-1);
    while cpu < nr {
        if cpu == me {
            cpu = next_isolated(cpu);
            continue;
        }
        match defer_on(cpu, Work::SYNC_CORE) {
            Ok(()) => mark(deferred, round, cpu),
            Err(Refusal::NotInUser) if n < MAX_WAITING && running(cpu) => {
                waiting[n] = cpu;
                n += 1;
            }
            Err(Refusal::NotInUser | Refusal::LeftWithDeferralOff) => round.sent += 1,
            Err(Refusal::NotIsolated) => {}
        }
        cpu = next_isolated(cpu);
    }
    if n == 0 {
        return;
    }
    let deadline = now_ns().saturating_add(wait_ns());
    while n > 0 && now_ns() < deadline {
        let mut i = 0;
        while i < n {
            let cpu = waiting[i];
            let done = match defer_on(cpu, Work::SYNC_CORE) {
                Ok(()) => {
                    mark(deferred, round, cpu);
                    round.waited += 1;
                    true
                }
                // Gone idle or into a guest: it gets the IPI now.
                Err(Refusal::NotInUser) if !running(cpu) => {
                    round.sent += 1;
                    true
                }
                Err(Refusal::NotInUser) => false,
                Err(Refusal::LeftWithDeferralOff) => {
                    round.sent += 1;
                    true
                }
                Err(Refusal::NotIsolated) => true,
            };
            if done {
                n -= 1;
                waiting[i] = waiting[n];
            } else {
                i += 1;
            }
        }
        core::hint::spin_loop();
    }
    // Those still waited for get the IPI.
    round.sent += n as u32;
    round.expired += n as u32;
}

/// Records that `cpu` took the round's sync as a work bit.
fn mark(deferred: &mut Cpumask, round: &mut bindings::text_poke_rs_round, cpu: c_int) {
    if let Some(id) = CpuId::from_i32(cpu) {
        deferred.set(id);
        round.deferred += 1;
    }
}

/// A sync round of the Rust batch: `sync_core()` on every online CPU, through an IPI for every
/// other CPU but the isolated ones in user space, which take it at their next kernel entry,
/// when `may_defer` and deferral is on.
///
/// # Safety
///
/// The caller holds `text_mutex`, as every batch does: the round's mask is one static mask.
pub unsafe fn sync(may_defer: bool) {
    let mut round = bindings::text_poke_rs_round {
        deferred_cpus: ptr::null_mut(),
        local: -1,
        deferred: 0,
        waited: 0,
        expired: 0,
        sent: 0,
    };
    if may_defer && enabled() {
        // SAFETY: The round's mask is only used under `text_mutex`, which the caller holds,
        // until the round returns.
        let mask = unsafe { bindings::text_poke_rs_round_mask() };
        round.deferred_cpus = mask;
        // SAFETY: `mask` is the static `struct cpumask` of `text_poke_rs_round_mask()`, valid for
        // writes as long as the kernel runs. Every round uses it only under `text_mutex`, which the
        // caller holds until this function returns, so no other reference to it exists while
        // `ask()` holds this one; `text_poke_rs_sync_round()` reads it through
        // `round.deferred_cpus` only after `ask()` has returned and the reference is gone.
        ask(unsafe { Cpumask::from_raw_mut(mask) }, &mut round);
    }
    // SAFETY: `round` and its mask live until the call returns; the round may sleep, as every
    // batch may.
    unsafe { bindings::text_poke_rs_sync_round(&mut round) };
}

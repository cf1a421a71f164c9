// SPDX-License-Identifier: GPL-2.0

//! context_tracking_work: work for isolated CPUs in user space and idle CPUs that waits for their
//! next kernel entry or idle exit.
//!
//! A `nohz_full` CPU running a user-space task should not be interrupted for work that only
//! matters once it runs kernel code again: the `sync_core()` of a text-poke sync round, the
//! kernel TLB flush of vmalloc's lazy purge; nor should an idle CPU be woken for it. A sender
//! sets a bit in the CPU's work word instead, and the CPU runs the work when it next enters the
//! kernel or leaves idle ([`ct_work`] is the protocol of the word). This crate is the senders'
//! side: [`defer_on`] asks one CPU, `ct_work_ask()` every other online CPU, for the text-poke
//! batch's sync rounds. The word and the entry side, which runs
//! before instrumentation is allowed, are noinstr C (`word.c`, one function for each of
//! [`ct_work`]'s, which the KUnit suite checks against them); context tracking calls them
//! (`<linux/context_tracking_work.h>`).
//!
//! Deferral applies to a CPU only while it is online, deferral is switched on (`text_poke_defer=`,
//! `text_poke/defer`), and it is either idle, between context tracking's idle entry and exit (any
//! CPU, `nohz_full` or not), or in user space, which context tracking only tracks on `nohz_full`
//! CPUs (its hooks are what set [`Context::User`](ct_work::Context::User)); not in a guest, not in
//! the kernel.
//! The sender must not write anything a CPU can run between its entry instruction and the hook
//! that takes the work: the danger zone of `word.c`, which the text-poke batch checks
//! (`ct_work_danger_text`).
//!
//! C header:
//! [`include/linux/context_tracking_work.h`](srctree/include/linux/context_tracking_work.h).

pub mod ct_work;

use core::{
    ffi::c_int,
    sync::atomic::{AtomicU32, Ordering},
};
use ct_work::{Deferral, Value, Word, Work};
use kernel::{
    bindings,
    cpu::CpuId,
    cpumask::Cpumask,
    sync::atomic::{
        Atomic,
        Relaxed, //
    },
};

/// The prefix of this crate's messages.
const __LOG_PREFIX: &[u8] = b"ct_work\0";

const _: () = assert!(Work::SYNC_CORE.bits() == bindings::ct_work_kind_CT_WORK_SYNC_CORE);
const _: () = assert!(Work::TLB_FLUSH.bits() == bindings::ct_work_kind_CT_WORK_TLB_FLUSH);
const _: () = assert!(Value::USER.raw() == bindings::CT_WORK_USER);
const _: () = assert!(Value::USER_OFF.raw() == bindings::CT_WORK_OFF);
const _: () = assert!(Value::IDLE.raw() == bindings::CT_WORK_IDLE);
const _: () = assert!(ct_work::WORK_SHIFT == bindings::CT_WORK_WORK_SHIFT);
const _: () = assert!(Value::KERNEL_TAKING.raw() == bindings::CT_WORK_TAKING);
const _: () = assert!(
    ct_work::LEVEL_BITS == bindings::CT_WORK_LEVEL_BITS
        && ct_work::LEVEL_USER == bindings::CT_WORK_LEVEL_USER
        && ct_work::LEVEL_TOOK == bindings::CT_WORK_LEVEL_TOOK
        && ct_work::LEVEL_IDLE == bindings::CT_WORK_LEVEL_IDLE
);

/// A CPU's work word, as a sender sees it: the entry side is C (`word.c`).
///
/// Every read-modify-write is fully ordered (a `LOCK`ed instruction or `XCHG` on x86, as the
/// kernel's own fully ordered atomics), so the text a sender wrote before setting a bit is
/// visible to the CPU that takes it; the load only decides whether to try one. `core`'s atomics
/// rather than `kernel::sync::atomic`, whose operations are calls into C helpers: a round asks
/// every other CPU, and the calls cost a one-site flip with two isolated CPUs in user space
/// about 2% (`make demo`, isolation). This side never runs before instrumentation is allowed.
struct CpuWord<'a>(&'a AtomicU32);

impl CpuWord<'_> {
    /// The word at `word`.
    ///
    /// # Safety
    ///
    /// `word` points to a CPU's `ct_work_word`, which lives as long as the kernel, and is
    /// only ever accessed atomically.
    #[inline(always)]
    unsafe fn at(word: *mut u32) -> Self {
        // SAFETY: As the caller guarantees: valid, aligned, and only accessed atomically.
        Self(unsafe { AtomicU32::from_ptr(word) })
    }

    /// The word of `cpu`, if deferral may apply to it: it is online.
    fn of(cpu: c_int) -> Option<Self> {
        // SAFETY: Only reads CPU masks; any `cpu` is accepted.
        let word = unsafe { bindings::ct_work_word(cpu) };
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
    /// Offline, or out of range: deferral never applies to it, nor an IPI.
    Offline,
    /// In the kernel, in a guest, or in user space or idle since before deferral was switched on.
    InKernel,
    /// Isolated, and returned to user space with deferral off: it takes no work until it passes
    /// through the kernel again, which only the IPI may make it do.
    LeftWithDeferralOff,
}

/// Asks `cpu` to run `work` at its next kernel entry instead of being interrupted now.
///
/// The caller wrote whatever the work is for (the text, for [`Work::SYNC_CORE`]) before.
pub fn defer_on(cpu: c_int, work: Work) -> Result<(), Refusal> {
    let word = CpuWord::of(cpu).ok_or(Refusal::Offline)?;
    match ct_work::defer(&word, work) {
        Deferral::Deferred(added) => {
            audit_added(cpu, added);
            Ok(())
        }
        Deferral::Ipi => Err(Refusal::InKernel),
        Deferral::IpiNow => Err(Refusal::LeftWithDeferralOff),
    }
}

/// Counts the kinds of work a sender added to `cpu`'s word, for the audit at entry.
#[cfg(CONFIG_TEXT_POKE_RS_DEFER_DEBUG)]
fn audit_added(cpu: c_int, added: Work) {
    if !added.is_empty() {
        // SAFETY: `cpu` is a possible CPU: its word was just written.
        unsafe { bindings::ct_work_audit_added(cpu, added.bits()) };
    }
}

#[cfg(not(CONFIG_TEXT_POKE_RS_DEFER_DEBUG))]
fn audit_added(_cpu: c_int, _added: Work) {}

/// [`defer_on`] for C callers, with the work as `enum ct_work_kind` bits: whether `cpu` took
/// it (and needs no IPI). Unknown bits are refused.
#[no_mangle]
pub extern "C" fn ct_work_defer(cpu: c_int, work: u32) -> bool {
    let kind = [Work::SYNC_CORE, Work::TLB_FLUSH]
        .into_iter()
        .filter(|w| work & w.bits() != 0)
        .fold(Work::NONE, Work::union);
    kind.bits() == work && !kind.is_empty() && defer_on(cpu, kind).is_ok()
}

/// The next online isolated CPU after `cpu`, or `nr_cpu_ids`.
pub fn next_isolated(cpu: c_int) -> c_int {
    // SAFETY: Walks the online isolated CPUs; any `cpu` is accepted.
    unsafe { bindings::ct_work_next_isolated(cpu) }
}

/// The next online CPU after `cpu`, or `nr_cpu_ids`.
pub fn next_online(cpu: c_int) -> c_int {
    // SAFETY: Walks the online CPUs; any `cpu` is accepted.
    unsafe { bindings::ct_work_next_online(cpu) }
}

/// Whether `cpu` is `nohz_full`.
fn isolated(cpu: c_int) -> bool {
    // SAFETY: Reads the `nohz_full` mask; any `cpu` is accepted.
    unsafe { bindings::ct_work_cpu_isolated(cpu) }
}

/// How long [`ask`] waits for isolated CPUs found in the kernel to return to user space, before
/// they are to be sent the IPI: `ct_work_wait_ns`, 50 µs unless `text_poke/defer_wait_ns`
/// says otherwise; about the time a CPU takes to handle a tick or a short system call. Only the
/// sender waits; the isolated CPU is not disturbed.
fn wait_ns() -> u64 {
    // SAFETY: `ct_work_wait_ns` is an aligned `unsigned long` that lives as long as the
    // kernel, only stored with `WRITE_ONCE()` (its debugfs file): this marked load and that
    // marked store do not race.
    unsafe { Atomic::from_ptr(&raw mut bindings::ct_work_wait_ns) }.load(Relaxed) as u64
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
    unsafe { bindings::ct_work_cpu_running(cpu) }
}

/// Asks every other online CPU to take `work` at its next kernel entry or idle exit, and records
/// in `deferred` those that did: idle CPUs, and isolated CPUs in user space. An isolated CPU found
/// running a task in the kernel, or on its way into or out of user space, gets a short while
/// ([`wait_ns()`]) to be in user space: once it is, it runs no kernel text without taking the
/// bit first, so the sender needs no IPI for it either. Isolated CPUs in a guest and those that
/// returned to user space while deferral was off (they take no work until they pass through the
/// kernel again) are counted as to be sent the IPI at once; housekeeping CPUs in the kernel get
/// theirs, uncounted and not waited for.
///
/// The sender's own CPU is neither asked nor waited for: it is in the kernel, running the
/// sender, which does the work there directly. Waiting for it to be in user
/// space would make every round of a sender on an isolated CPU last the whole wait. The CPU is
/// read without preemption disabled: if the sender moves, the CPU it left is merely not
/// deferred, and the sender interrupts it.
pub fn ask(work: Work, deferred: &mut Cpumask, asked: &mut bindings::ct_work_asked) {
    let mut waiting = [0 as c_int; MAX_WAITING];
    let mut n = 0;
    let nr = kernel::cpu::nr_cpu_ids() as c_int;
    let me = CpuId::current().as_u32() as c_int;
    let mut cpu = next_online(-1);
    while cpu < nr {
        if cpu == me {
            cpu = next_online(cpu);
            continue;
        }
        let isolated = isolated(cpu);
        match defer_on(cpu, work) {
            Ok(()) if isolated => mark(deferred, &mut asked.deferred, cpu),
            Ok(()) => mark(deferred, &mut asked.idle, cpu),
            Err(_) if !isolated => {}
            Err(Refusal::InKernel) if n < MAX_WAITING && running(cpu) => {
                waiting[n] = cpu;
                n += 1;
            }
            Err(Refusal::InKernel | Refusal::LeftWithDeferralOff) => asked.sent += 1,
            Err(Refusal::Offline) => {}
        }
        cpu = next_online(cpu);
    }
    if n == 0 {
        return;
    }
    let deadline = now_ns().saturating_add(wait_ns());
    while n > 0 && now_ns() < deadline {
        let mut i = 0;
        while i < n {
            let cpu = waiting[i];
            let done = match defer_on(cpu, work) {
                Ok(()) => {
                    mark(deferred, &mut asked.deferred, cpu);
                    asked.waited += 1;
                    true
                }
                // Gone into a guest, or idle before deferral was on: it gets the IPI now.
                Err(Refusal::InKernel) if !running(cpu) => {
                    asked.sent += 1;
                    true
                }
                Err(Refusal::InKernel) => false,
                Err(Refusal::LeftWithDeferralOff) => {
                    asked.sent += 1;
                    true
                }
                Err(Refusal::Offline) => true,
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
    asked.sent += n as u32;
    asked.expired += n as u32;
}

/// Records that `cpu` took the work as a work bit, in `deferred` and `count`.
fn mark(deferred: &mut Cpumask, count: &mut u32, cpu: c_int) {
    if let Some(id) = CpuId::from_i32(cpu) {
        deferred.set(id);
        *count += 1;
    }
}

/// [`ask`] for C callers, with the work as one `enum ct_work_kind` bit: adds the CPUs that
/// took it to `deferred` and counts in `asked`. Nothing is asked for unknown or several bits.
///
/// # Safety
///
/// `deferred` and `asked` are valid for reads and writes, and nothing else accesses them until
/// the call returns.
#[no_mangle]
pub unsafe extern "C" fn ct_work_ask(
    work: u32,
    deferred: *mut bindings::cpumask,
    asked: *mut bindings::ct_work_asked,
) {
    let Some(kind) = [Work::SYNC_CORE, Work::TLB_FLUSH]
        .into_iter()
        .find(|w| w.bits() == work)
    else {
        return;
    };
    // SAFETY: As the caller guarantees: `deferred` is valid and not accessed by anyone else
    // while this reference lives, until the call returns.
    let deferred = unsafe { Cpumask::from_raw_mut(deferred) };
    // SAFETY: As for `deferred`.
    let asked = unsafe { &mut *asked };
    ask(kind, deferred, asked);
}

#[cfg(CONFIG_TEXT_POKE_RS_KUNIT_TEST)]
#[path = "tests/kunit.rs"]
mod kunit;

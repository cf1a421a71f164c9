// SPDX-License-Identifier: GPL-2.0

//! A per-CPU object cache with a remote drain, on [`kernel::qpw`].
//!
//! Each CPU keeps up to [`DEPTH`] free objects in its magazine. [`Cache::alloc`] takes one from
//! this CPU's magazine, or allocates one; [`Cache::free`] puts one back, or frees it when the
//! magazine is full. [`Cache::drain_all`] empties every CPU's magazine: with `qpw=1` from the
//! caller, under each CPU's lock, without disturbing the CPU; with `qpw=0` by work queued on each
//! CPU that holds objects, which is what a C cache does today (the LRU batches of
//! `lru_add_drain_all()`, slab's sheaves).
//!
//! A crate of its own, for its KUnit suite `qpw_cache`, built with `CONFIG_QPW_CACHE_KUNIT_TEST`
//! only; its executors are `qpw_cache_exec.c`.

use core::sync::atomic::{AtomicUsize, Ordering};
use kernel::{alloc::Flags, cpu::CpuId, prelude::*, qpw};

/// The prefix of this crate's messages.
const __LOG_PREFIX: &[u8] = b"qpw_cache\0";

/// Free objects a CPU keeps.
pub const DEPTH: usize = 16;

/// One CPU's free objects.
struct Magazine<T> {
    objs: [Option<KBox<T>>; DEPTH],
    len: usize,
}

impl<T> Magazine<T> {
    fn new() -> Self {
        Self {
            objs: [const { None }; DEPTH],
            len: 0,
        }
    }

    fn pop(&mut self) -> Option<KBox<T>> {
        let i = self.len.checked_sub(1)?;
        self.len = i;
        self.objs[i].take()
    }

    /// Keeps `obj`, or gives it back when full.
    fn push(&mut self, obj: KBox<T>) -> Option<KBox<T>> {
        match self.objs.get_mut(self.len) {
            Some(slot) => {
                *slot = Some(obj);
                self.len += 1;
                None
            }
            None => Some(obj),
        }
    }

    /// Takes every object, to be freed by the caller outside the lock.
    fn take(&mut self) -> Magazine<T> {
        core::mem::replace(self, Magazine::new())
    }
}

/// A per-CPU cache of free `KBox<T>`s.
pub struct Cache<T: Send> {
    percpu: qpw::PerCpu<Magazine<T>>,
    /// Each CPU's count of cached objects, read without its lock to skip empty CPUs.
    cached: KVec<AtomicUsize>,
}

impl<T: Send> Cache<T> {
    /// An empty cache; its counts are allocated with `flags`.
    pub fn new(flags: Flags) -> Result<Self> {
        let n = kernel::cpu::nr_cpu_ids() as usize;
        let mut cached = KVec::with_capacity(n, flags)?;
        for _ in 0..n {
            cached.push(AtomicUsize::new(0), flags)?;
        }
        Ok(Self {
            percpu: kernel::new_qpw_percpu!(|_| Magazine::new(), "qpw_cache")?,
            cached,
        })
    }

    fn set_cached(&self, cpu: CpuId, len: usize) {
        if let Some(c) = self.cached.get(cpu.as_u32() as usize) {
            c.store(len, Ordering::Relaxed);
        }
    }

    /// An object from this CPU's magazine, or a new one allocated with `flags` and made by `make`
    /// (which is not called if the allocation fails). Might sleep.
    ///
    /// A caller that holds this CPU's magazine already (it cannot: `Cache` does not lend it out)
    /// would get a new object, as the magazine is refused to it.
    pub fn alloc(&self, make: impl FnOnce() -> T, flags: Flags) -> Result<KBox<T>> {
        if let Ok(mut mag) = self.percpu.local() {
            if let Some(obj) = mag.pop() {
                self.set_cached(mag.cpu(), mag.len);
                return Ok(obj);
            }
        }
        Ok(KBox::new_uninit(flags)?.write(make()))
    }

    /// Keeps `obj` in this CPU's magazine, or frees it when the magazine is full (or refused).
    pub fn free(&self, obj: KBox<T>) {
        let full = match self.percpu.local() {
            Ok(mut mag) => {
                let full = mag.push(obj);
                self.set_cached(mag.cpu(), mag.len);
                full
            }
            Err(_) => Some(obj),
        };
        // Freed outside the lock.
        drop(full);
    }

    /// Frees the objects cached by `cpu`, from here (qpw on) or from `cpu` (qpw off), and
    /// returns how many there were. Might sleep. Fails as [`qpw::PerCpu::with_cpu`] does.
    pub fn drain_cpu(&self, cpu: CpuId) -> Result<usize> {
        let mag = self.percpu.with_cpu(cpu, |mag| {
            self.set_cached(cpu, 0);
            mag.take()
        })?;
        // Freed outside the lock, by the caller.
        Ok(mag.len)
    }

    /// Drains every online CPU that holds objects, and returns how many were freed. Might sleep.
    pub fn drain_all(&self) -> Result<usize> {
        qpw::online_cpus()
            .filter(|cpu| {
                self.cached
                    .get(cpu.as_u32() as usize)
                    .is_some_and(|c| c.load(Ordering::Relaxed) > 0)
            })
            .try_fold(0, |n, cpu| Ok(n + self.drain_cpu(cpu)?))
    }

    /// Puts `obj` in the magazine of `cpu`, or gives it back when that is full. Might sleep.
    /// Fails as [`qpw::PerCpu::with_cpu`] does, and frees `obj` then.
    pub fn free_on(&self, cpu: CpuId, obj: KBox<T>) -> Result<Option<KBox<T>>> {
        self.percpu.with_cpu(cpu, |mag| {
            let full = mag.push(obj);
            self.set_cached(cpu, mag.len);
            full
        })
    }

    /// The objects cached by every CPU, as last counted.
    pub fn cached(&self) -> usize {
        self.cached.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }
}

#[kunit_tests(qpw_cache)]
mod tests {
    use super::*;
    use core::{
        ffi::{c_ulong, c_void},
        sync::atomic::{AtomicI64, AtomicPtr, AtomicU8},
    };
    use kernel::{
        bindings,
        cpu::CpusReadGuard,
        error::to_result,
        sync::Arc,
        time::{delay::fsleep, Delta},
    };

    extern "C" {
        fn qpw_cache_exec_start(pass: extern "C" fn() -> c_ulong, max: u32) -> i32;
        fn qpw_cache_exec_stop(passes: *mut c_ulong, wrong: *mut c_ulong);
        fn qpw_cache_irq_run(f: extern "C" fn(*mut c_void), arg: *mut c_void) -> i32;
        fn qpw_cache_fail_nth(n: u32) -> u32;
        fn qpw_cache_writer_start(cpu: u32) -> i32;
        fn qpw_cache_writer_waits() -> bool;
        fn qpw_cache_writer_end() -> i32;
        fn qpw_cache_on_dead(f: extern "C" fn(u32) -> i32) -> i32;
        fn qpw_cache_on_dead_remove(state: i32);
        #[cfg(all(CONFIG_LOCKDEP, not(CONFIG_PREEMPT_RT)))]
        fn qpw_cache_lock_classes(
            shared: *mut bool,
            ll_percpu: *mut bool,
            sl_normal: *mut bool,
        ) -> i32;
    }

    /// Objects the tests may make.
    const MAX_OBJS: usize = 1 << 16;

    /// An object's life: never made, handed out, cached, freed.
    const NONE: u8 = 0;
    const OUT: u8 = 1;
    const CACHED: u8 = 2;
    const FREED: u8 = 3;

    /// What happened to every object, and the anomalies seen.
    struct Ledger {
        state: KVec<AtomicU8>,
        next: AtomicUsize,
        wrong: AtomicUsize,
    }

    impl Ledger {
        fn new() -> Result<Self> {
            let mut state = KVec::with_capacity(MAX_OBJS, GFP_KERNEL)?;
            for _ in 0..MAX_OBJS {
                state.push(AtomicU8::new(NONE), GFP_KERNEL)?;
            }
            Ok(Self {
                state,
                next: AtomicUsize::new(0),
                wrong: AtomicUsize::new(0),
            })
        }

        /// Moves object `id` from `from` to `to`; an object anywhere else is an anomaly.
        fn step(&self, id: usize, from: u8, to: u8) {
            let ok = self.state.get(id).is_some_and(|s| {
                s.compare_exchange(from, to, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            });
            if !ok {
                self.wrong.fetch_add(1, Ordering::Relaxed);
            }
        }

        fn count(&self, what: u8) -> usize {
            self.state
                .iter()
                .filter(|s| s.load(Ordering::Relaxed) == what)
                .count()
        }
    }

    /// A cached object: its id in the ledger, whose `FREED` it records when dropped.
    struct Obj {
        id: usize,
        ledger: Arc<Ledger>,
    }

    impl Drop for Obj {
        fn drop(&mut self) {
            self.ledger.step(self.id, CACHED, FREED);
        }
    }

    fn make(ledger: &Arc<Ledger>) -> Obj {
        let id = ledger.next.fetch_add(1, Ordering::Relaxed);
        ledger.step(id, NONE, OUT);
        Obj {
            id,
            ledger: ledger.clone(),
        }
    }

    fn alloc(cache: &Cache<Obj>, ledger: &Arc<Ledger>) -> Option<KBox<Obj>> {
        let obj = cache.alloc(|| make(ledger), GFP_KERNEL).ok()?;
        // A recycled object comes back from the cache.
        let state = obj
            .ledger
            .state
            .get(obj.id)
            .map(|s| s.load(Ordering::Relaxed));
        if state == Some(CACHED) {
            ledger.step(obj.id, CACHED, OUT);
        }
        Some(obj)
    }

    fn free(cache: &Cache<Obj>, ledger: &Ledger, obj: KBox<Obj>) {
        ledger.step(obj.id, OUT, CACHED);
        cache.free(obj);
    }

    #[test]
    fn remote_drain_takes_every_cached_object() -> Result {
        let ledger = Arc::new(Ledger::new()?, GFP_KERNEL)?;
        let cache = Cache::new(GFP_KERNEL)?;
        let mut objs = KVec::new();
        for _ in 0..(DEPTH + 4) {
            objs.push(alloc(&cache, &ledger).ok_or(ENOMEM)?, GFP_KERNEL)?;
        }
        // All freed on one CPU, into one magazine: this task would otherwise be free to move
        // between two frees.
        // SAFETY: Undone below; `free()` may sleep, which a task that cannot migrate may.
        unsafe { bindings::migrate_disable() };
        for obj in objs.drain_all() {
            free(&cache, &ledger, obj);
        }
        // SAFETY: Disabled above.
        unsafe { bindings::migrate_enable() };
        // A full magazine frees what does not fit.
        assert_eq!(cache.cached(), DEPTH);
        assert_eq!(ledger.count(FREED), 4);
        assert_eq!(cache.drain_all()?, DEPTH);
        assert_eq!(cache.cached(), 0);
        assert_eq!(ledger.count(FREED), DEPTH + 4);
        assert_eq!(ledger.wrong.load(Ordering::Relaxed), 0);
        // Nothing left to drain: nothing drained.
        assert_eq!(cache.drain_all()?, 0);
        Ok(())
    }

    /// An interrupt's attempt at a [`qpw::PerCpu`], made while this CPU's task holds it: what
    /// `local()` gave it. (A hard interrupt must not take it at all: it is not an interrupt-safe
    /// lock, and lockdep says so.)
    struct InIrq<'a> {
        percpu: &'a qpw::PerCpu<u32>,
        res: Option<Result>,
    }

    extern "C" fn local_in_irq(arg: *mut c_void) {
        // SAFETY: `arg` is the `InIrq` of `recursive_local_lock_is_refused()`, which waits for
        // this to run and does not touch it meanwhile.
        let irq = unsafe { &mut *arg.cast::<InIrq<'_>>() };
        irq.res = Some(irq.percpu.local().map(|mut v| *v += 1));
    }

    fn run_in_irq(irq: &mut InIrq<'_>) -> i32 {
        irq.res = None;
        // SAFETY: `irq` outlives the interrupt: `qpw_cache_irq_run()` waits for it.
        unsafe { qpw_cache_irq_run(local_in_irq, core::ptr::from_mut(irq).cast()) }
    }

    /// With lockdep, a qpw lock's spinlock, which other CPUs take with qpw on, has a lock class
    /// of its own, of a spinlock's type. A class shared with the local_lock takes the type of
    /// whichever is taken first, the local_lock's in a boot with qpw off, and lockdep leaves a
    /// per-CPU lock's class out of its interrupt-inversion checks: the spinlock of a boot that
    /// switches qpw on later would be out of them too. Where the spinlock is the local_lock
    /// (`PREEMPT_RT`) or there is no lockdep, the case is skipped.
    #[cfg(all(CONFIG_LOCKDEP, not(CONFIG_PREEMPT_RT)))]
    #[test]
    fn the_spinlock_has_a_lock_class_of_its_own() -> Result {
        let (mut shared, mut ll_percpu, mut sl_normal) = (true, false, false);
        // SAFETY: The pointers are valid for writes.
        to_result(unsafe { qpw_cache_lock_classes(&mut shared, &mut ll_percpu, &mut sl_normal) })?;
        assert!(!shared);
        assert!(ll_percpu);
        assert!(sl_normal);
        Ok(())
    }

    #[cfg(all(CONFIG_PROVE_LOCKING, CONFIG_QPW, not(CONFIG_PREEMPT_RT)))]
    extern "C" {
        fn qpw_cache_inversion_armed() -> bool;
        fn qpw_cache_irq_lock_around(f: extern "C" fn(*mut c_void), arg: *mut c_void) -> i32;
    }

    #[cfg(all(CONFIG_PROVE_LOCKING, CONFIG_QPW, not(CONFIG_PREEMPT_RT)))]
    extern "C" fn local_under_irq_lock(arg: *mut c_void) {
        // SAFETY: `arg` is the `PerCpu` of `an_irq_inversion_through_the_spinlock_is_reported()`,
        // which waits for this call.
        let percpu = unsafe { &*arg.cast::<qpw::PerCpu<u32>>() };
        if let Ok(mut v) = percpu.local() {
            *v += 1;
        }
    }

    /// Lockdep reports the deadlock a lock taken in interrupts makes when it is held around
    /// `local()` while another CPU's `with_cpu()` holds that CPU's spinlock with interrupts on
    /// (the interrupt, on the drainer's CPU, spins on the lock; its holder, on the owner's CPU,
    /// spins on the spinlock): "HARDIRQ-safe -> HARDIRQ-unsafe lock order detected". With
    /// `qpw=1` as in a `qpw=0` boot that switches qpw on at run time, after the `PerCpu`'s lock
    /// was first taken as a local_lock: with one lock class for both, that class would be a
    /// per-CPU lock's, which lockdep leaves out of the check. Lockdep reports once and turns
    /// itself off, so the case runs in boots of its own (`qpw_cache_exec.inversion=1`, make
    /// test-matrix), and is skipped elsewhere.
    #[cfg(all(CONFIG_PROVE_LOCKING, CONFIG_QPW, not(CONFIG_PREEMPT_RT)))]
    #[test]
    fn an_irq_inversion_through_the_spinlock_is_reported() -> Result {
        // SAFETY: Called from a KUnit case, which it marks skipped unless armed.
        if !unsafe { qpw_cache_inversion_armed() } {
            return Ok(());
        }
        let percpu = kernel::new_qpw_percpu!(|_| 0u32)?;
        // Its lock as its owner takes it first, a local_lock with qpw off.
        *percpu.local()? += 1;
        let was_on = qpw::enabled();
        // SAFETY: Might sleep: this task holds no lock.
        let switched = !was_on && unsafe { bindings::qpw_switch_on() };
        assert!(qpw::enabled());
        let this = CpuId::current().as_u32();
        let other = qpw::online_cpus()
            .find(|cpu| cpu.as_u32() != this)
            .ok_or(ENODEV)?;
        // Another CPU's spinlock, interrupts on: HARDIRQ-unsafe.
        percpu.with_cpu(other, |v| *v += 1)?;
        // SAFETY: Might sleep: pins this task for the interrupt and the section after it.
        unsafe { bindings::migrate_disable() };
        // SAFETY: `local_under_irq_lock` takes the `PerCpu` it is given, which outlives the call.
        let reported = unsafe {
            qpw_cache_irq_lock_around(local_under_irq_lock, (&raw const percpu).cast_mut().cast())
        };
        // SAFETY: Disabled above.
        unsafe { bindings::migrate_enable() };
        let said = match reported {
            1 => "reported it",
            0 => "said nothing",
            _ => "was not asked: the interrupt did not run",
        };
        pr_info!(
            "qpw {}: lockdep {}\n",
            if switched {
                "switched on"
            } else {
                "on from boot"
            },
            said
        );
        assert_eq!(reported, 1);
        Ok(())
    }

    #[test]
    fn recursive_local_lock_is_refused() -> Result {
        let edeadlk = Some(Error::from_errno(-(bindings::EDEADLK as i32)));
        let percpu = kernel::new_qpw_percpu!(|_| 0u32)?;
        let mut irq = InIrq {
            percpu: &percpu,
            res: None,
        };
        {
            let mut v = percpu.local()?;
            *v += 1;
            // A second guard of this CPU while the first lives: refused, neither nested (two
            // `&mut` of one `u32`) nor deadlocked (qpw on).
            assert_eq!(percpu.local().err(), edeadlk);
            // An interrupt on this CPU while its task holds the lock: refused too.
            assert_eq!(run_in_irq(&mut irq), 0);
            assert_eq!(irq.res.map(Result::err), Some(edeadlk));
            *v += 1;
        }
        // Released: the task gets it again.
        *percpu.local()? += 1;
        // Every increment that was let through, and none other.
        let total: u32 = qpw::online_cpus()
            .map(|cpu| percpu.with_cpu(cpu, |v| *v))
            .sum::<Result<u32>>()?;
        assert_eq!(total, 3);
        Ok(())
    }

    /// A guard keeps its task on its CPU for its whole life, as `PREEMPT_RT`'s `local_lock()`
    /// does: a task that slept under it (a bug, but one safe code can write) would otherwise
    /// wake on another CPU and release that CPU's lock, leaving its own held.
    #[test]
    fn a_local_guard_keeps_its_task_on_its_cpu() -> Result {
        // How many times this task disabled its migration.
        fn migration_disabled() -> u16 {
            // SAFETY: Reads a field of the current task, which only the task itself writes.
            unsafe { (*kernel::current!().as_ptr()).migration_disabled }
        }
        let percpu = kernel::new_qpw_percpu!(|_| 0u32)?;
        let before = migration_disabled();
        let during = {
            let mut v = percpu.local()?;
            *v += 1;
            migration_disabled()
        };
        assert!(during > before);
        assert_eq!(migration_disabled(), before);
        Ok(())
    }

    /// A [`qpw::PerCpu`] whose locks are taken while this CPU's task holds another's: each has
    /// a lock class of its own, or lockdep would see one lock taken twice.
    #[test]
    fn two_percpus_nest() -> Result {
        let outer = kernel::new_qpw_percpu!(|_| 0u32)?;
        let inner = kernel::new_qpw_percpu!(|_| 0u32)?;
        let mut a = outer.local()?;
        let mut b = inner.local()?;
        *a += 1;
        *b += 1;
        assert_eq!(a.cpu(), b.cpu());
        Ok(())
    }

    /// What an interrupt got from `local()` while a [`qpw::PerCpu::with_cpu`] closure ran on
    /// the CPU it came on: with qpw off in the target's kworker, on the target, holding its own
    /// CPU's `u32`; with it on in this task, on this CPU, holding the target's.
    struct DrainIrq<'a> {
        percpu: &'a qpw::PerCpu<u32>,
        res: Option<Result>,
        ran: i32,
    }

    extern "C" fn local_in_drain_irq(arg: *mut c_void) {
        // SAFETY: `arg` is the `DrainIrq` of `local_in_an_interrupt_during_a_drain()`, whose
        // closure waits for this to run and does not touch it meanwhile.
        let irq = unsafe { &mut *arg.cast::<DrainIrq<'_>>() };
        irq.res = Some(irq.percpu.local().map(|mut v| *v += 100));
    }

    #[test]
    fn local_in_an_interrupt_during_a_drain() -> Result {
        let edeadlk = Some(Error::from_errno(-(bindings::EDEADLK as i32)));
        let percpu = kernel::new_qpw_percpu!(|_| 0u32)?;
        for cpu in qpw::online_cpus() {
            let mut irq = DrainIrq {
                percpu: &percpu,
                res: None,
                ran: -1,
            };
            let irq_ptr = core::ptr::from_mut(&mut irq) as usize;
            percpu.with_cpu(cpu, |v| {
                *v += 1;
                let arg = irq_ptr as *mut c_void;
                // SAFETY: `irq` outlives the interrupt: `qpw_cache_irq_run()` waits for it,
                // and nothing else touches `irq` meanwhile.
                let ran = unsafe { qpw_cache_irq_run(local_in_drain_irq, arg) };
                // SAFETY: `arg` points to `irq`, alive on this stack; the interrupt that also
                // used it is over, so nothing else touches it.
                unsafe { (*arg.cast::<DrainIrq<'_>>()).ran = ran };
                *v += 1;
            })?;
            assert_eq!(irq.ran, 0);
            // Refused, wherever the closure ran: neither a second `&mut` of the `u32` the
            // closure holds (qpw off) nor a spin on the lock this CPU holds (qpw on).
            assert_eq!(irq.res.map(Result::err), Some(edeadlk));
            assert_eq!(percpu.with_cpu(cpu, |v| *v)?, 2);
        }
        Ok(())
    }

    /// What the calls made from inside a [`qpw::PerCpu::with_cpu`] closure got.
    struct Nested {
        same: Option<Error>,
        other: Option<Error>,
        local: Option<Error>,
    }

    /// The calls a closure of `with_cpu(cpu)` may not make on its own `PerCpu`: `with_cpu` of
    /// the same CPU and of another, and `local()`.
    fn nested_calls(percpu: &qpw::PerCpu<u32>, cpu: CpuId, other: CpuId) -> Result<Nested> {
        percpu.with_cpu(cpu, |v| {
            *v += 1;
            Nested {
                same: percpu.with_cpu(cpu, |v| *v += 10).err(),
                other: percpu.with_cpu(other, |v| *v += 10).err(),
                local: percpu.local().map(|mut v| *v += 10).err(),
            }
        })
    }

    /// A closure of `with_cpu()` that calls into its own `PerCpu` again, for an online CPU and
    /// for an offline one: refused, in either mode, where it would take a lock it holds (a
    /// spinlock with qpw on, the offline CPU's owner field with it off), sleep in its kworker's
    /// atomic section (qpw off), or take a second CPU's lock under the first (qpw on).
    #[test]
    fn nested_calls_are_refused() -> Result {
        let edeadlk = Some(Error::from_errno(-(bindings::EDEADLK as i32)));
        let percpu = kernel::new_qpw_percpu!(|_| 0u32)?;
        let this = CpuId::current();
        let mut expected = 0;
        for cpu in qpw::online_cpus() {
            // Another online CPU than the target, for the second nested call.
            let other = qpw::online_cpus()
                .find(|c| c.as_u32() != cpu.as_u32())
                .unwrap_or(this);
            let n = nested_calls(&percpu, cpu, other)?;
            assert_eq!(n.same, edeadlk);
            assert_eq!(n.other, edeadlk);
            assert_eq!(n.local, edeadlk);
            expected += 1;
        }
        let cpu = victim().ok_or(ENODEV)?;
        // SAFETY: `cpu` is neither CPU 0 nor this one; it comes back below.
        assert_eq!(unsafe { bindings::remove_cpu(cpu.as_u32()) }, 0);
        let offline = nested_calls(&percpu, cpu, this);
        // SAFETY: Taken offline above.
        let back = unsafe { bindings::add_cpu(cpu.as_u32()) };
        assert_eq!(back, 0);
        let n = offline?;
        assert_eq!(n.same, edeadlk);
        assert_eq!(n.other, edeadlk);
        assert_eq!(n.local, edeadlk);
        expected += 1;
        // Only the outer closures ran.
        let total: u32 = qpw::online_cpus()
            .map(|cpu| percpu.with_cpu(cpu, |v| *v))
            .sum::<Result<u32>>()?;
        assert_eq!(total, expected);
        Ok(())
    }

    /// Two executors working on the `u32` of one offline CPU at once.
    struct OfflineRace {
        percpu: qpw::PerCpu<u32>,
        cpu: CpuId,
        inside: AtomicUsize,
        overlaps: AtomicUsize,
        calls: AtomicUsize,
        failed: AtomicUsize,
    }

    static RACE: AtomicPtr<OfflineRace> = AtomicPtr::new(core::ptr::null_mut());

    /// Iterations of the busy loop inside the closure: long enough for the emulator to switch
    /// vCPUs while one is inside.
    const INSIDE_SPINS: usize = 2000;

    extern "C" fn offline_pass() -> c_ulong {
        // SAFETY: The test clears `RACE` and stops the executors before the race is dropped.
        let Some(race) = (unsafe { RACE.load(Ordering::Acquire).as_ref() }) else {
            return 1;
        };
        let res = race.percpu.with_cpu(race.cpu, |v| {
            if race.inside.fetch_add(1, Ordering::SeqCst) != 0 {
                race.overlaps.fetch_add(1, Ordering::Relaxed);
            }
            let seen = *v;
            for _ in 0..INSIDE_SPINS {
                core::hint::spin_loop();
            }
            *v = seen + 1;
            race.inside.fetch_sub(1, Ordering::SeqCst);
        });
        match res {
            Ok(()) => race.calls.fetch_add(1, Ordering::Relaxed),
            Err(_) => race.failed.fetch_add(1, Ordering::Relaxed),
        };
        0
    }

    /// Passes each executor makes at least.
    const OFFLINE_CALLS: usize = 200;

    #[test]
    fn two_tasks_on_one_offline_cpu() -> Result {
        let cpu = victim().ok_or(ENODEV)?;
        let race = KBox::new(
            OfflineRace {
                percpu: kernel::new_qpw_percpu!(|_| 0u32)?,
                cpu,
                inside: AtomicUsize::new(0),
                overlaps: AtomicUsize::new(0),
                calls: AtomicUsize::new(0),
                failed: AtomicUsize::new(0),
            },
            GFP_KERNEL,
        )?;
        // SAFETY: `cpu` is neither CPU 0 nor this one; it comes back below.
        assert_eq!(unsafe { bindings::remove_cpu(cpu.as_u32()) }, 0);
        RACE.store((&raw const *race).cast_mut(), Ordering::Release);
        // SAFETY: `offline_pass` may run on any CPU; nothing else runs executors.
        let started = unsafe { qpw_cache_exec_start(offline_pass, 2) };
        let mut waits = 0;
        while race.calls.load(Ordering::Relaxed) < 2 * OFFLINE_CALLS && waits < 20_000 {
            fsleep(Delta::from_micros(100));
            waits += 1;
        }
        let (mut passes, mut wrong) = (0, 0);
        // SAFETY: Both pointers are valid for writes.
        unsafe { qpw_cache_exec_stop(&mut passes, &mut wrong) };
        RACE.store(core::ptr::null_mut(), Ordering::Release);
        // SAFETY: Taken offline above.
        let back = unsafe { bindings::add_cpu(cpu.as_u32()) };
        let calls = race.calls.load(Ordering::Relaxed);
        pr_info!(
            "{} calls on offline CPU {} from {} executors, {} overlaps, qpw {}\n",
            calls,
            cpu.as_u32(),
            started,
            race.overlaps.load(Ordering::Relaxed),
            if qpw::enabled() { "on" } else { "off" }
        );
        assert_eq!(back, 0);
        assert_eq!(started, 2);
        assert_eq!(wrong, 0);
        assert_eq!(race.failed.load(Ordering::Relaxed), 0);
        assert!(calls >= 2 * OFFLINE_CALLS);
        // One closure at a time, and no increment lost.
        assert_eq!(race.overlaps.load(Ordering::Relaxed), 0);
        assert_eq!(race.percpu.with_cpu(cpu, |v| *v as usize)?, calls);
        Ok(())
    }

    /// What the executors of the concurrent test share with it.
    struct Shared {
        cache: Cache<Obj>,
        ledger: Arc<Ledger>,
        passes: AtomicUsize,
    }

    impl Shared {
        fn new() -> Result<KBox<Self>> {
            let shared = Self {
                cache: Cache::new(GFP_KERNEL)?,
                ledger: Arc::new(Ledger::new()?, GFP_KERNEL)?,
                passes: AtomicUsize::new(0),
            };
            Ok(KBox::new(shared, GFP_KERNEL)?)
        }
    }

    /// The test's [`Shared`], while its executors run.
    static SHARED: AtomicPtr<Shared> = AtomicPtr::new(core::ptr::null_mut());

    /// An executor's pass: eight objects allocated on its CPU and freed there.
    extern "C" fn pass() -> c_ulong {
        // SAFETY: The test sets `SHARED` before it starts the executors and clears it after they
        // have stopped, and keeps the `Shared` alive meanwhile.
        let Some(shared) = (unsafe { SHARED.load(Ordering::Acquire).as_ref() }) else {
            return 1;
        };
        let mut objs: [Option<KBox<Obj>>; 8] = [const { None }; 8];
        for slot in objs.iter_mut() {
            *slot = alloc(&shared.cache, &shared.ledger);
        }
        for obj in objs.into_iter().flatten() {
            free(&shared.cache, &shared.ledger, obj);
        }
        shared.passes.fetch_add(1, Ordering::Relaxed);
        0
    }

    /// What [`drains_during_passes`] saw.
    struct Drains {
        started: i32,
        drained: usize,
        drains: usize,
        failed: usize,
        passes: c_ulong,
        wrong: c_ulong,
    }

    /// Drains every CPU of `shared`'s cache while executors run [`pass`] on three other CPUs,
    /// until they made `MIN_PASSES` passes and `MIN_DRAINS` drains ran (at most `MAX_DRAINS`);
    /// `before(n)` runs before the drain that follows `n` others. Then stops the executors and
    /// drains once more.
    fn drains_during_passes(shared: &Shared, mut before: impl FnMut(usize)) -> Result<Drains> {
        SHARED.store((&raw const *shared).cast_mut(), Ordering::Release);
        // SAFETY: `pass` may run on any CPU; nothing else runs executors.
        let started = unsafe { qpw_cache_exec_start(pass, 3) };
        let (mut drained, mut drains, mut failed) = (0, 0, 0);
        while drains < MAX_DRAINS
            && (drains < MIN_DRAINS || shared.passes.load(Ordering::Relaxed) < MIN_PASSES)
        {
            before(drains);
            match shared.cache.drain_all() {
                Ok(n) => drained += n,
                Err(_) => failed += 1,
            }
            drains += 1;
            // Lets the executors refill their magazines: under an emulator that runs the vCPUs
            // in turn, draining back to back mostly finds a vCPU holding its lock, descheduled.
            fsleep(Delta::from_micros(50));
        }
        let (mut passes, mut wrong) = (0, 0);
        // SAFETY: Both pointers are valid for writes.
        unsafe { qpw_cache_exec_stop(&mut passes, &mut wrong) };
        SHARED.store(core::ptr::null_mut(), Ordering::Release);
        drained += shared.cache.drain_all()?;
        Ok(Drains {
            started,
            drained,
            drains,
            failed,
            passes,
            wrong,
        })
    }

    #[test]
    fn alloc_and_free_on_every_cpu_with_remote_drains() -> Result {
        let shared = Shared::new()?;
        // Drains while the executors allocate and free, until they have made enough passes.
        let Drains {
            started,
            drained,
            drains,
            failed,
            passes,
            wrong,
        } = drains_during_passes(&shared, |_| ())?;
        let ledger = &shared.ledger;
        pr_info!(
            "{} passes on {} CPUs, {} drains, {} objects made, {} drained, qpw {}\n",
            passes,
            started,
            drains,
            ledger.next.load(Ordering::Relaxed),
            drained,
            if qpw::enabled() { "on" } else { "off" }
        );
        assert!(started >= 1);
        assert!(passes >= MIN_PASSES as c_ulong);
        assert_eq!(wrong, 0);
        assert_eq!(failed, 0);
        // Every object made was freed once, by the cache or by a drain; none is lost.
        assert_eq!(ledger.wrong.load(Ordering::Relaxed), 0);
        assert_eq!(shared.cache.cached(), 0);
        assert_eq!(ledger.count(OUT) + ledger.count(CACHED), 0);
        assert_eq!(ledger.count(FREED), ledger.next.load(Ordering::Relaxed));
        assert!(drained > 0);
        Ok(())
    }

    /// The CPU to take offline: neither CPU 0 nor 1 (where the executors start, on the first
    /// CPU that is not this one), nor this one.
    fn victim() -> Option<CpuId> {
        let this = CpuId::current().as_u32();
        qpw::online_cpus().find(|cpu| cpu.as_u32() > 1 && cpu.as_u32() != this)
    }

    #[test]
    fn drain_of_an_offline_cpu() -> Result {
        let ledger = Arc::new(Ledger::new()?, GFP_KERNEL)?;
        let cache = Cache::new(GFP_KERNEL)?;
        let cpu = victim().ok_or(ENODEV)?;
        // All four are made before any is cached: this task may move to `cpu`, whose magazine an
        // allocation there would take a cached object back from.
        let mut objs = KVec::with_capacity(4, GFP_KERNEL)?;
        for _ in 0..4 {
            let obj = alloc(&cache, &ledger).ok_or(ENOMEM)?;
            ledger.step(obj.id, OUT, CACHED);
            objs.push(obj, GFP_KERNEL)?;
        }
        for obj in objs.drain_all() {
            assert!(cache.free_on(cpu, obj)?.is_none());
        }
        // SAFETY: `cpu` is neither CPU 0 nor this one; it comes back below.
        let ret = unsafe { bindings::remove_cpu(cpu.as_u32()) };
        assert_eq!(ret, 0);
        // The objects of an offline CPU are drained from here, in both modes.
        let drained = cache
            .drain_all()
            .and_then(|n| Ok(n + cache.drain_cpu(cpu)?));
        // SAFETY: Taken offline above.
        let back = unsafe { bindings::add_cpu(cpu.as_u32()) };
        assert_eq!(drained, Ok(4));
        assert_eq!(ledger.count(FREED), 4);
        assert_eq!(ledger.wrong.load(Ordering::Relaxed), 0);
        assert_eq!(back, 0);
        Ok(())
    }

    /// `with_cpu_cpuslocked()` from a task that holds the CPU hotplug lock for reading while a
    /// hotplug operation waits for it: every online CPU's `T`, in both modes. With qpw off,
    /// `with_cpu()` would take the lock again and wait behind the writer, which waits for it.
    #[test]
    fn with_cpu_under_a_held_hotplug_lock() -> Result {
        let percpu = kernel::new_qpw_percpu!(|_| 0u32)?;
        let cpu = victim().ok_or(ENODEV)?;
        let cpus = CpusReadGuard::lock();
        // SAFETY: `cpu` is neither CPU 0 nor this one; the kthread brings it back.
        to_result(unsafe { qpw_cache_writer_start(cpu.as_u32()) })?;
        // SAFETY: Started above.
        let waits = unsafe { qpw_cache_writer_waits() };
        let mut got = KVec::new();
        for cpu in qpw::online_cpus() {
            got.push(
                percpu.with_cpu_cpuslocked(&cpus, cpu, |v| {
                    *v += 1;
                    *v
                }),
                GFP_KERNEL,
            )?;
        }
        drop(cpus);
        // SAFETY: Started above.
        let back = unsafe { qpw_cache_writer_end() };
        assert!(waits);
        assert!(got.len() > 1);
        assert!(got.iter().all(|r| *r == Ok(1)));
        assert_eq!(back, 0);
        Ok(())
    }

    /// What the CPU-dead callback of `with_cpu_from_a_cpu_dead_callback` drains.
    struct Dead {
        percpu: qpw::PerCpu<u32>,
        /// What the drain of the dead CPU returned, or its error.
        got: AtomicI64,
    }

    static DEAD: AtomicPtr<Dead> = AtomicPtr::new(core::ptr::null_mut());

    /// Takes the dead CPU's value, as a cache's CPU-dead callback drains the CPU's objects.
    extern "C" fn drain_dead(cpu: u32) -> i32 {
        // SAFETY: The test stores a `Dead` that outlives the callback's state.
        let Some(dead) = (unsafe { DEAD.load(Ordering::Acquire).as_ref() }) else {
            return 0;
        };
        let Some(cpu) = CpuId::from_u32(cpu) else {
            return 0;
        };
        // SAFETY: A CPU-dead callback runs with the CPU hotplug lock held for writing.
        let got = unsafe { dead.percpu.with_cpu_hotplug_held(cpu, core::mem::take) };
        dead.got.store(
            got.map_or_else(|e| e.to_errno().into(), i64::from),
            Ordering::Relaxed,
        );
        0
    }

    /// A CPU-dead callback drains the dead CPU's `T` with `with_cpu_hotplug_held()`, in both
    /// modes. With qpw off, `with_cpu()` would take the CPU hotplug lock for reading, which the
    /// callback's own task holds for writing.
    #[test]
    fn with_cpu_from_a_cpu_dead_callback() -> Result {
        let dead = KBox::new(
            Dead {
                percpu: kernel::new_qpw_percpu!(|_| 0u32)?,
                got: AtomicI64::new(-1),
            },
            GFP_KERNEL,
        )?;
        let cpu = victim().ok_or(ENODEV)?;
        dead.percpu.with_cpu(cpu, |v| *v = 7)?;
        DEAD.store((&raw const *dead).cast_mut(), Ordering::Release);
        // SAFETY: `drain_dead` may be called for any CPU until the state is removed.
        let state = unsafe { qpw_cache_on_dead(drain_dead) };
        // SAFETY: `cpu` is neither CPU 0 nor this one; it comes back below.
        let down = (state > 0).then(|| unsafe { bindings::remove_cpu(cpu.as_u32()) });
        // SAFETY: Taken offline above.
        let up = (down == Some(0)).then(|| unsafe { bindings::add_cpu(cpu.as_u32()) });
        if state > 0 {
            // SAFETY: Set up above.
            unsafe { qpw_cache_on_dead_remove(state) };
        }
        DEAD.store(core::ptr::null_mut(), Ordering::Release);
        assert!(state > 0);
        assert_eq!(down, Some(0));
        assert_eq!(dead.got.load(Ordering::Relaxed), 7);
        assert_eq!(dead.percpu.with_cpu(cpu, |v| *v)?, 0);
        assert_eq!(up, Some(0));
        Ok(())
    }

    /// Drains of every CPU, by an executor, until the test clears `SHARED`.
    extern "C" fn drain_pass() -> c_ulong {
        // SAFETY: As in `pass`.
        let Some(shared) = (unsafe { SHARED.load(Ordering::Acquire).as_ref() }) else {
            return 1;
        };
        if let Some(obj) = alloc(&shared.cache, &shared.ledger) {
            free(&shared.cache, &shared.ledger, obj);
        }
        if shared.cache.drain_all().is_err() {
            return 1;
        }
        shared.passes.fetch_add(1, Ordering::Relaxed);
        0
    }

    #[test]
    fn drains_racing_cpu_hotplug() -> Result {
        let shared = Shared::new()?;
        let cpu = victim().ok_or(ENODEV)?;
        SHARED.store((&raw const *shared).cast_mut(), Ordering::Release);
        // SAFETY: `drain_pass` may run on any CPU; nothing else runs executors.
        let started = unsafe { qpw_cache_exec_start(drain_pass, 1) };
        let mut cycles = 0;
        for _ in 0..HOTPLUG_CYCLES {
            // Objects on the victim, for the drains to race its going and coming.
            for _ in 0..4 {
                if let Some(obj) = alloc(&shared.cache, &shared.ledger) {
                    shared.ledger.step(obj.id, OUT, CACHED);
                    drop(shared.cache.free_on(cpu, obj));
                }
            }
            // SAFETY: `cpu` is neither CPU 0 nor this one; it comes back below.
            if unsafe { bindings::remove_cpu(cpu.as_u32()) } != 0 {
                break;
            }
            // SAFETY: Taken offline above.
            if unsafe { bindings::add_cpu(cpu.as_u32()) } != 0 {
                break;
            }
            cycles += 1;
        }
        let (mut passes, mut wrong) = (0, 0);
        // SAFETY: Both pointers are valid for writes.
        unsafe { qpw_cache_exec_stop(&mut passes, &mut wrong) };
        SHARED.store(core::ptr::null_mut(), Ordering::Release);
        assert!(shared.cache.drain_all().is_ok());
        let ledger = &shared.ledger;
        assert!(started >= 1);
        assert_eq!(cycles, HOTPLUG_CYCLES);
        assert!(passes > 0);
        assert_eq!(wrong, 0);
        assert_eq!(ledger.wrong.load(Ordering::Relaxed), 0);
        assert_eq!(shared.cache.cached(), 0);
        assert_eq!(ledger.count(FREED), ledger.next.load(Ordering::Relaxed));
        Ok(())
    }

    /// What [`allocation_failures_reach_the_caller`] does with a cache: makes one, takes eight
    /// objects, frees half on this CPU and half on another, and drains every CPU, each
    /// allocation made with `GFP_NOWAIT`, which the fault attributes do not leave alone as they
    /// do `GFP_KERNEL`'s (`ignore-gfp-wait`). The cache is gone when it returns.
    fn workload(ledger: &Arc<Ledger>, other: CpuId) -> Result<usize> {
        let cache = Cache::new(GFP_NOWAIT)?;
        let mut objs: [Option<KBox<Obj>>; 8] = [const { None }; 8];
        let mut failed = None;
        for slot in objs.iter_mut() {
            match cache.alloc(|| make(ledger), GFP_NOWAIT) {
                Ok(obj) => *slot = Some(obj),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        for (i, obj) in objs.into_iter().flatten().enumerate() {
            ledger.step(obj.id, OUT, CACHED);
            if failed.is_some() {
                // Back to the allocator: its `Drop` records it freed.
                drop(obj);
            } else if i % 2 == 0 {
                cache.free(obj);
            } else {
                drop(cache.free_on(other, obj)?);
            }
        }
        match failed {
            Some(e) => Err(e),
            None => cache.drain_all(),
        }
    }

    /// The cache's allocations failing, the first, the second, ... point each run reaches
    /// (`fail-nth`'s rule): a run refused fails with `ENOMEM`, one that reached no point goes
    /// through, and every object made is freed once, none lost with the cache, none freed
    /// twice. (A point may also be an allocation the allocator makes for itself, kmemleak's
    /// metadata or KASAN's stack depot, whose failure it absorbs: a run can go through with its
    /// point reached.)
    #[test]
    fn allocation_failures_reach_the_caller() -> Result {
        let ledger = Arc::new(Ledger::new()?, GFP_KERNEL)?;
        let this = CpuId::current().as_u32();
        let other = qpw::online_cpus()
            .find(|cpu| cpu.as_u32() != this)
            .ok_or(ENODEV)?;
        let (mut injected, mut refused, mut bad) = (0, 0, 0);
        for n in 1..=1000 {
            // SAFETY: Only sets this task's count.
            unsafe { qpw_cache_fail_nth(n) };
            let ret = workload(&ledger, other);
            // SAFETY: Only sets this task's count, and returns what was left of it.
            let left = unsafe { qpw_cache_fail_nth(0) };
            if let Err(e) = ret {
                refused += 1;
                bad += usize::from(e != ENOMEM);
            }
            bad += ledger.count(OUT) + ledger.count(CACHED);
            if left != 0 {
                // No point failed: the run must have gone through.
                bad += usize::from(ret.is_err());
                break;
            }
            injected += 1;
        }
        pr_info!(
            "{} runs with a fault injected, {} refused, {} wrong, qpw {}\n",
            injected,
            refused,
            bad,
            if qpw::enabled() { "on" } else { "off" }
        );
        assert_eq!(bad, 0);
        assert_eq!(ledger.wrong.load(Ordering::Relaxed), 0);
        assert_eq!(ledger.count(FREED), ledger.next.load(Ordering::Relaxed));
        if cfg!(CONFIG_FAILSLAB) {
            // The counts and the eight objects at least, though a point may be one of the
            // allocator's own (KASAN's stack depot, kmemleak's metadata), which absorbs its
            // failure and moves the cache's later points on by one in the next run.
            assert!(injected >= 9);
            assert!(refused > 0);
        }
        Ok(())
    }

    #[cfg(CONFIG_QPW)]
    extern "C" {
        fn qpw_cache_holder_start(
            cpu: u32,
            hold: extern "C" fn(*mut c_void),
            arg: *mut c_void,
        ) -> i32;
        fn qpw_cache_hold_irq();
        fn qpw_cache_holder_stop(cpu: u32, report: *mut HoldReport);
        fn qpw_cache_corrupt_site(corrupt: bool) -> i32;
        fn qpw_cache_mode(cpu: u32, mode: *mut Mode) -> i32;
    }

    /// `struct qpw_cache_hold_report`: what the holder of `qpw_cache_holder_start()` saw.
    #[repr(C)]
    #[derive(Default, Debug)]
    struct HoldReport {
        steps: u32,
        refused: u32,
        written: u32,
        stalls: u32,
        sections: u32,
        int3s: u32,
        timeouts: u32,
        locked: bool,
    }

    /// `struct qpw_cache_mode`: qpw's keys, and whether remote work is queued on its target.
    #[repr(C)]
    #[derive(Default, Debug, PartialEq)]
    struct Mode {
        spinlocks: bool,
        enabled: bool,
        switching: bool,
        queued: bool,
    }

    /// The holder's section, on its CPU, when a step of `qpw_switch_on()` is about to begin:
    /// that CPU's value of the `qpw::PerCpu<u64>` at `arg`, taken with `local()` before the
    /// step begins and released once it has ended, with `qpw_cache_hold_irq()`'s section,
    /// interrupts off, inside it.
    #[cfg(CONFIG_QPW)]
    extern "C" fn hold(arg: *mut c_void) {
        // SAFETY: `arg` is the `PerCpu` of `switch_on_holding_sections()`, which outlives the
        // holder: it stops the holder before it returns.
        let percpu = unsafe { &*arg.cast::<qpw::PerCpu<u64>>() };
        let guard = percpu.local();
        // SAFETY: Called by the holder, in its kthread, for the step the probe announced.
        unsafe { qpw_cache_hold_irq() };
        if let Ok(mut v) = guard {
            *v += 1;
        }
    }

    /// What [`switch_on_holding_sections`] saw.
    #[derive(Default)]
    struct Switch {
        /// Where the text-poke batch refuses an update that finds a site changed (the Rust
        /// batch's): what `qpw_switch_on()` returned with a site of `qpw_remote_key` changed,
        /// and the mode it left.
        refused: Option<(bool, Mode)>,
        /// What `qpw_switch_on()` returned then, and the mode after.
        on: bool,
        mode: Mode,
        report: HoldReport,
        /// The holder's sections that took its `PerCpu`.
        held: u64,
    }

    /// Turns qpw on with a holder on `other` that holds a section, of its own `PerCpu` and,
    /// inside it, of a qpw lock taken with interrupts off, across each step of the switch.
    /// With qpw off and the Rust text-poke batch, first has the switch refused at its last
    /// step, with a site of `qpw_remote_key` changed, and puts the site back.
    #[cfg(CONFIG_QPW)]
    fn switch_on_holding_sections(other: CpuId, was_on: bool) -> Result<Switch> {
        let percpu = kernel::new_qpw_percpu!(|_| 0u64)?;
        let mut sw = Switch::default();
        let (cpu, arg) = (other.as_u32(), (&raw const percpu).cast_mut().cast());
        // SAFETY: `hold` takes `arg` as the `PerCpu<u64>` it is, which outlives the holder:
        // stopped below.
        to_result(unsafe { qpw_cache_holder_start(cpu, hold, arg) })?;
        let changed = if was_on {
            ENODEV.to_errno()
        } else {
            // SAFETY: Changes a site of this suite's own, which nothing runs.
            unsafe { qpw_cache_corrupt_site(true) }
        };
        let mut res = Ok(());
        if changed == 0 {
            let mut mode = Mode::default();
            // SAFETY: Might sleep: this task holds no lock.
            let first = unsafe { bindings::qpw_switch_on() };
            // SAFETY: `mode` is valid for writes; `other` is online, not this CPU.
            res = to_result(unsafe { qpw_cache_mode(cpu, &mut mode) });
            // SAFETY: Puts back what `qpw_cache_corrupt_site(true)` changed.
            res = res.and(to_result(unsafe { qpw_cache_corrupt_site(false) }));
            sw.refused = Some((first, mode));
        } else if changed != ENODEV.to_errno() {
            res = to_result(changed);
        }
        if res.is_ok() {
            // SAFETY: Might sleep: this task holds no lock.
            sw.on = unsafe { bindings::qpw_switch_on() };
            // SAFETY: As above.
            res = to_result(unsafe { qpw_cache_mode(cpu, &mut sw.mode) });
        }
        // SAFETY: The holder started above; `report` is valid for writes.
        unsafe { qpw_cache_holder_stop(cpu, &mut sw.report) };
        res?;
        sw.held = percpu.with_cpu(other, |v| *v)?;
        Ok(sw)
    }

    /// qpw turned on at run time (as when a cpuset partition isolates CPUs) while executors
    /// allocate and free on three CPUs, each under its CPU's lock, and this task drains them
    /// all: the locks turn from local_locks into spinlocks, and the drains from work queued on
    /// each CPU into the caller's, with sections held across the switch. No object is lost or
    /// freed twice, and qpw stays on for the rest of the boot (with `qpw=1` and on `PREEMPT_RT`
    /// it is on already, and the switch does nothing). Last in the suite: the cases before it
    /// run with qpw off in a `qpw=0` boot.
    ///
    /// Not by chance only: a holder on another CPU holds a section of its own across each step
    /// of the switch, each step's key update begun only once it holds it (the `qpw_switch_step`
    /// event), with a section taken with interrupts off inside it, released while the update
    /// holds up its sync round on the INT3s it wrote. Where the text-poke batch can refuse the
    /// update (the Rust batch's), the switch is first refused at its last step, which must
    /// leave the locks spinlocks and remote work queued, and then turns qpw on.
    #[test]
    fn switched_on_during_remote_drains() -> Result {
        let shared = Shared::new()?;
        let was_on = qpw::enabled();
        let (mut switch, mut switch_at) = (None, None);
        let this = CpuId::current().as_u32();
        let other = qpw::online_cpus()
            .find(|cpu| cpu.as_u32() != this)
            .ok_or(ENODEV)?;
        let Drains {
            started,
            drained,
            drains,
            failed,
            passes,
            wrong,
        } = drains_during_passes(&shared, |drains| {
            if drains == MIN_DRAINS / 2 {
                switch_at = Some(shared.passes.load(Ordering::Relaxed));
                #[cfg(CONFIG_QPW)]
                {
                    switch = Some(switch_on_holding_sections(other, was_on));
                }
                #[cfg(not(CONFIG_QPW))]
                {
                    // SAFETY: Might sleep: this task holds no lock.
                    let on = unsafe { bindings::qpw_switch_on() };
                    switch = Some(Ok(Switch {
                        on,
                        ..Switch::default()
                    }));
                }
            }
        })?;
        let sw = switch.ok_or(EINVAL)??;
        let ledger = &shared.ledger;
        let report = &sw.report;
        pr_info!(
            "qpw {} after {} of {} passes ({} drains, {} objects drained); {}\n",
            if sw.on {
                "switched on"
            } else {
                "left as it was"
            },
            switch_at.unwrap_or(0),
            passes,
            drains,
            drained,
            if sw.refused.is_some() {
                "refused at its last step first"
            } else {
                "no refusal"
            }
        );
        pr_info!("holder on CPU {}: {:?}\n", other.as_u32(), report);
        assert!(started >= 1);
        assert!(passes >= MIN_PASSES as c_ulong);
        assert!(switch_at.is_some_and(|p| p > 0 && (p as c_ulong) < passes));
        assert_eq!(sw.on, cfg!(CONFIG_QPW) && !was_on);
        assert_eq!(qpw::enabled(), was_on || sw.on);
        if let Some((first, mode)) = &sw.refused {
            // Refused at the last step: locks are spinlocks, remote work still queued.
            assert!(!first);
            assert_eq!(
                *mode,
                Mode {
                    spinlocks: true,
                    enabled: false,
                    switching: false,
                    queued: true
                }
            );
        }
        if sw.on {
            assert_eq!(
                sw.mode,
                Mode {
                    spinlocks: true,
                    enabled: true,
                    switching: false,
                    queued: false
                }
            );
            // Four steps a switch, each begun with the holder's sections held and ended
            // before it released them; every step that wrote text wrote its INT3s while the
            // holder's interrupts-off section was held.
            let switches = if sw.refused.is_some() { 2 } else { 1 };
            assert_eq!(report.steps, 4 * switches);
            assert_eq!(report.refused, switches - 1);
            assert_eq!((report.stalls, report.timeouts), (0, 0));
            assert_eq!(report.sections, report.steps);
            assert_eq!(sw.held, u64::from(report.steps));
            // The locks' and remote work's keys, at least, have sites to write.
            assert!(report.written >= 2);
            assert_eq!(report.int3s, report.written);
        } else {
            assert_eq!(report.steps, 0);
        }
        assert!(!report.locked);
        assert_eq!(wrong, 0);
        assert_eq!(failed, 0);
        assert_eq!(ledger.wrong.load(Ordering::Relaxed), 0);
        assert_eq!(shared.cache.cached(), 0);
        assert_eq!(ledger.count(OUT) + ledger.count(CACHED), 0);
        assert_eq!(ledger.count(FREED), ledger.next.load(Ordering::Relaxed));
        Ok(())
    }

    /// Offline-online cycles of a CPU while another drains.
    const HOTPLUG_CYCLES: usize = 5;

    /// Drains of every CPU while the executors run: at least, and at most.
    const MIN_DRAINS: usize = 200;
    const MAX_DRAINS: usize = 100_000;

    /// Executor passes the drains must overlap.
    const MIN_PASSES: usize = 2000;
}

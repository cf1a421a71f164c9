// SPDX-License-Identifier: GPL-2.0

//! Per-CPU data under a lock another CPU can take (qpw).
//!
//! A [`PerCpu<T>`] holds one `T` for every possible CPU, each under its CPU's qpw lock. The
//! owning CPU reaches its own through [`PerCpu::local`], a guard that keeps the task on that CPU
//! until it is dropped, as a `local_lock` would. Another CPU's `T` is reached through
//! [`PerCpu::with_cpu`]: with `qpw=1` (always on `PREEMPT_RT`) the caller takes that CPU's
//! spinlock and runs the closure itself, without disturbing the CPU; with `qpw=0` the closure is
//! queued on that CPU, which runs it under its local lock while the caller waits, as C code
//! draining a per-CPU cache does with `queue_work_on()` and `flush_work()`.
//!
//! Both are for task context: the lock is not interrupt-safe, and from an interrupt either
//! fails. Each `PerCpu` has a lock class of its own ([`new_qpw_percpu!`]).
//!
//! C header: [`include/linux/qpw.h`](srctree/include/linux/qpw.h)

use crate::{
    bindings,
    cpu::{CpuId, CpusReadGuard},
    error::{code::*, Error, Result},
    ffi::{c_long, c_void},
    str::{CStr, CStrExt},
    sync::{
        atomic::{Acquire, Atomic, Relaxed, Release},
        LockClassKey,
    },
    task::Task,
    types::{NotThreadSafe, Opaque},
};
use core::{
    cell::UnsafeCell,
    marker::PhantomData,
    mem::{align_of, size_of},
    ops::{Deref, DerefMut},
    pin::Pin,
    ptr::{null_mut, NonNull},
};

/// Whether qpw is on: remote work taken under the target's spinlock. Always on `PREEMPT_RT`,
/// where a `local_lock` is a per-CPU spinlock already; else chosen at boot, and turned on (never
/// off) when a cpuset partition isolates CPUs at run time.
pub fn enabled() -> bool {
    // SAFETY: Reads a static key.
    unsafe { bindings::qpw_enabled() }
}

/// The online CPUs, in order; a CPU can go or come while this runs.
pub fn online_cpus() -> impl Iterator<Item = CpuId> {
    (0..crate::cpu::nr_cpu_ids()).filter_map(|cpu| {
        // SAFETY: Reads the online mask; `cpu` is below `nr_cpu_ids`.
        let online = unsafe { bindings::cpu_online(cpu as i32) };
        // SAFETY: `cpu` is below `nr_cpu_ids`.
        online.then(|| unsafe { CpuId::from_u32_unchecked(cpu) })
    })
}

/// Creates a [`PerCpu`] whose locks have a lock class of their own, named after the call site or
/// `$name`.
#[macro_export]
macro_rules! new_qpw_percpu {
    ($init:expr $(, $name:literal)? $(,)?) => {
        $crate::qpw::PerCpu::new(
            $init, $crate::optional_name!($($name)?), $crate::static_lock_class!())
    };
}
pub use new_qpw_percpu;

/// Taking the lock here could deadlock.
fn edeadlk() -> Error {
    Error::from_errno(-(bindings::EDEADLK as i32))
}

/// Whether this is task context: neither a hard nor a soft interrupt, nor an NMI.
fn in_task() -> bool {
    // SAFETY: Reads the preemption count.
    unsafe { bindings::qpw_in_task() }
}

/// One CPU's lock and data. The lock comes first: the per-CPU pointer of a slot is that of its
/// lock, which the C side takes.
#[repr(C)]
struct Slot<T> {
    lock: Opaque<bindings::qpw_lock>,
    /// The task that holds the `T`, or null: set once the task has the lock (or, with qpw off,
    /// the `T` of an offline CPU, which this field locks on its own), cleared before it lets go.
    /// Only the holder writes it; a task finds its own pointer here only while it holds the `T`.
    owner: Atomic<*mut bindings::task_struct>,
    /// The task running on this CPU that holds another CPU's `T` in [`PerCpu::with_cpu`], or
    /// null: set and cleared by that task, with its migration off in between, so that a task
    /// finds its own pointer here only while it holds a `T` and runs here.
    holder: Atomic<*mut bindings::task_struct>,
    data: UnsafeCell<T>,
}

/// One `T` for every possible CPU, each under its CPU's qpw lock.
///
/// # Invariants
///
/// `ptr` is a per-CPU allocation of one `Slot<T>` per possible CPU, owned by this object, in
/// which every possible CPU's lock is initialised and its data holds a valid `T`. A CPU's data is
/// only reached by the task recorded as its owner, which holds its lock: the CPU itself
/// ([`LocalGuard`]), or a task in [`PerCpu::with_cpu`] (which, with qpw off and the CPU offline,
/// holds it through the owner field alone).
pub struct PerCpu<T> {
    ptr: NonNull<c_void>,
    _p: PhantomData<T>,
}

// SAFETY: Each `T` is reached only under its lock, by one task at a time, from whichever CPU holds
// the lock: the `T`s may move between threads, which `T: Send` allows.
unsafe impl<T: Send> Send for PerCpu<T> {}

// SAFETY: A shared `PerCpu<T>` gives out `&mut T` only under the `T`'s lock, one holder at a time:
// as for `Send`, `T: Send` is what that needs.
unsafe impl<T: Send> Sync for PerCpu<T> {}

/// Whether `cpu` is a possible CPU.
fn possible(cpu: u32) -> bool {
    // SAFETY: Reads the possible mask, with a bounds check.
    cpu < crate::cpu::nr_cpu_ids() && unsafe { bindings::cpu_possible(cpu as i32) }
}

impl<T> PerCpu<T> {
    /// Allocates one `T` for every possible CPU, each made by `init` for its CPU, under locks of
    /// the class `key` named `name`. [`new_qpw_percpu!`] gives each call site a class of its
    /// own.
    pub fn new(
        mut init: impl FnMut(CpuId) -> T,
        name: &'static CStr,
        key: Pin<&'static LockClassKey>,
    ) -> Result<Self> {
        // SAFETY: Allocates zeroed per-CPU memory of a slot's size and alignment, or fails.
        let raw =
            unsafe { bindings::qpw_alloc_percpu(size_of::<Slot<T>>(), align_of::<Slot<T>>()) };
        let ptr = NonNull::new(raw).ok_or(ENOMEM)?;
        for cpu in (0..crate::cpu::nr_cpu_ids()).filter(|&c| possible(c)) {
            // SAFETY: `cpu` is possible, so the allocation has its slot, which nothing else
            // references yet.
            let slot =
                unsafe { bindings::qpw_per_cpu_ptr(ptr.as_ptr(), cpu as i32) }.cast::<Slot<T>>();
            // SAFETY: `cpu` was just checked to be a valid CPU number.
            let id = unsafe { CpuId::from_u32_unchecked(cpu) };
            // SAFETY: `slot` is valid for writes and suitably aligned (the allocation's alignment
            // is the slot's); the lock is initialised before anyone can take it; `name` and `key`
            // are static, as lockdep needs them.
            unsafe {
                bindings::qpw_lock_init_key(
                    Opaque::cast_into(&raw const (*slot).lock),
                    name.as_char_ptr(),
                    key.as_ptr(),
                );
                (&raw mut (*slot).owner).write(Atomic::new(null_mut()));
                (&raw mut (*slot).holder).write(Atomic::new(null_mut()));
                (&raw mut (*slot).data).cast::<T>().write(init(id));
            }
        }
        // INVARIANT: Every possible CPU's slot was initialised above.
        Ok(Self {
            ptr,
            _p: PhantomData,
        })
    }

    /// The per-CPU pointer of the locks, as the C side takes it.
    fn lock(&self) -> *mut bindings::qpw_lock {
        self.ptr.as_ptr().cast()
    }

    /// The slot of `cpu`.
    fn slot(&self, cpu: i32) -> *mut Slot<T> {
        // SAFETY: `cpu` is a possible CPU (callers take it from a `CpuId` checked with
        // `possible()` or from `raw_smp_processor_id()`), and by the type invariant the allocation
        // has its slot.
        unsafe { bindings::qpw_per_cpu_ptr(self.ptr.as_ptr(), cpu) }.cast()
    }

    /// The task that holds the `T` of `cpu`, or null.
    fn owner(&self, cpu: i32) -> &Atomic<*mut bindings::task_struct> {
        let slot = self.slot(cpu);
        // SAFETY: The slot is initialised (type invariant) and lives as long as `self`.
        unsafe { &(*slot).owner }
    }

    /// The task on `cpu` that holds another CPU's `T`, or null.
    fn holder(&self, cpu: i32) -> &Atomic<*mut bindings::task_struct> {
        let slot = self.slot(cpu);
        // SAFETY: As in `owner`.
        unsafe { &(*slot).holder }
    }

    /// Whether this task holds the `T` of any CPU: a [`LocalGuard`], or the closure of a
    /// [`PerCpu::with_cpu`] is running. Taking any lock of `self` again could deadlock then.
    ///
    /// A task that holds a `T` cannot leave its CPU until it lets go (a guard, and every path
    /// of `with_cpu`, keep its migration off), and recorded itself there: as the owner of that
    /// CPU's `T`, or as the holder of another's. A task that holds none never finds itself,
    /// wherever it runs. Two loads of this CPU's slot, however many CPUs there are.
    fn held_by_me(&self) -> bool {
        let me = Task::current_raw();
        // SAFETY: Reads this CPU's number.
        let cpu = unsafe { bindings::raw_smp_processor_id() } as i32;
        self.owner(cpu).load(Relaxed) == me || self.holder(cpu).load(Relaxed) == me
    }

    /// Locks this CPU's `T`: the task stays on this CPU until the guard is dropped, as under
    /// `local_lock()` (preemption off, or on `PREEMPT_RT` migration off and this CPU's
    /// spinlock).
    ///
    /// Fails with `EDEADLK` if this task holds it already (a second call while the first guard
    /// is alive) or holds another CPU's `T` (in a closure of [`PerCpu::with_cpu`]), and from an
    /// interrupt, which could have come while this CPU's task or a remote
    /// [`PerCpu::with_cpu`] held it: the lock is not interrupt-safe. A `local_lock` would nest,
    /// or deadlock with qpw on; this refuses instead.
    pub fn local(&self) -> Result<LocalGuard<'_, T>> {
        if !in_task() {
            return Err(edeadlk());
        }
        // SAFETY: Paired with the `migrate_enable()` below on failure, else with the guard's
        // drop: the task stays on this CPU for the guard's life, as under `PREEMPT_RT`'s
        // `local_lock()`, even if it sleeps under the guard (a bug, which the lock's own checks
        // report), so that the drop releases the lock it took.
        unsafe { bindings::migrate_disable() };
        if self.held_by_me() {
            // SAFETY: Disabled above.
            unsafe { bindings::migrate_enable() };
            return Err(edeadlk());
        }
        // SAFETY: Migration is off.
        let cpu = unsafe { bindings::raw_smp_processor_id() } as i32;
        // SAFETY: By the type invariant, `self.lock()` is the per-CPU pointer of initialised qpw
        // locks; this task holds none of them (it is no CPU's owner).
        unsafe { bindings::local_qpw_lock(self.lock()) };
        self.owner(cpu).store(Task::current_raw(), Relaxed);
        // INVARIANT: This CPU's lock was taken above and this task recorded as its owner; `cpu`
        // is this CPU, and migration stays off until the guard is dropped.
        Ok(LocalGuard {
            owner: self,
            cpu,
            _not_send: NotThreadSafe,
        })
    }

    /// Runs `f` on the `T` of `cpu`, under that CPU's lock, and returns its result. With qpw on,
    /// the caller takes the lock and runs `f` itself; `cpu` is not disturbed. With qpw off, `f`
    /// is queued on `cpu`, which runs it under its local lock, and the caller waits for it; if
    /// `cpu` is offline, the caller runs `f` itself with CPU hotplug held off and the `T` of
    /// `cpu` locked against other callers. Might sleep.
    ///
    /// Fails with `EINVAL` if `cpu` is not a possible CPU, and with `EDEADLK` from an interrupt
    /// or while this task holds any CPU's `T` of `self`: a [`LocalGuard`], or from inside the
    /// closure of another `with_cpu` call. `f` must not sleep: with qpw on it runs under a
    /// spinlock.
    ///
    /// With qpw off this takes the CPU hotplug lock for reading: a caller that holds it already
    /// calls [`PerCpu::with_cpu_cpuslocked`], and a CPU hotplug callback (which runs with it held
    /// for writing) [`PerCpu::with_cpu_hotplug_held`].
    pub fn with_cpu<R, F>(&self, cpu: CpuId, f: F) -> Result<R>
    where
        T: Send,
        R: Send,
        F: FnOnce(&mut T) -> R + Send,
    {
        self.call_on(cpu, f, false)
    }

    /// [`PerCpu::with_cpu`] for a caller that holds the CPU hotplug lock for reading, as `cpus`
    /// shows: taking it again, as `with_cpu` does with qpw off, deadlocks once a hotplug
    /// operation waits for it. Fails as `with_cpu` does.
    pub fn with_cpu_cpuslocked<R, F>(&self, _cpus: &CpusReadGuard, cpu: CpuId, f: F) -> Result<R>
    where
        T: Send,
        R: Send,
        F: FnOnce(&mut T) -> R + Send,
    {
        self.call_on(cpu, f, true)
    }

    /// [`PerCpu::with_cpu`] from a CPU hotplug callback, which runs with the CPU hotplug lock
    /// held for writing: a CPU-dead callback that drains the `T` of the CPU that went, say.
    /// `with_cpu` would take the lock for reading with qpw off, and wait for itself. Fails as
    /// `with_cpu` does.
    ///
    /// # Safety
    ///
    /// The caller holds the CPU hotplug lock (for reading or for writing) until this returns.
    pub unsafe fn with_cpu_hotplug_held<R, F>(&self, cpu: CpuId, f: F) -> Result<R>
    where
        T: Send,
        R: Send,
        F: FnOnce(&mut T) -> R + Send,
    {
        self.call_on(cpu, f, true)
    }

    /// [`PerCpu::with_cpu`], with the CPU hotplug lock held by the caller already if
    /// `cpus_held`, else taken here with qpw off.
    fn call_on<R, F>(&self, cpu: CpuId, f: F, cpus_held: bool) -> Result<R>
    where
        T: Send,
        R: Send,
        F: FnOnce(&mut T) -> R + Send,
    {
        if !possible(cpu.as_u32()) {
            return Err(EINVAL);
        }
        if !in_task() || self.held_by_me() {
            return Err(edeadlk());
        }
        crate::task::might_sleep();
        let cpu = cpu.as_u32() as i32;
        let mut call = Call {
            owner: self,
            cpu,
            f: Some(f),
            ret: None,
        };
        if !enabled() {
            let _hotplug = (!cpus_held).then(CpusReadGuard::lock);
            // qpw is turned on at run time with this lock held for writing: off here, it stays
            // off until the unlock, so no other caller takes the lock of an offline CPU whose `T`
            // `run_offline` reaches without it. If it was turned on meanwhile, `f` runs below.
            if !enabled() {
                // SAFETY: `cpu` is a valid CPU number.
                if unsafe { bindings::cpu_online(cpu) } {
                    // SAFETY: `call` outlives the work: `work_on_cpu_key()` returns once
                    // `Call::trampoline` has run. The key is static.
                    unsafe {
                        bindings::work_on_cpu_key(
                            cpu,
                            Some(Call::<'_, T, F, R>::trampoline),
                            (&raw mut call).cast(),
                            crate::static_lock_class!().as_ptr(),
                        )
                    };
                } else {
                    call.run_offline();
                }
            }
        }
        // With qpw on, `f` has not run yet: the caller runs it under the lock of `cpu`.
        if call.f.is_some() {
            call.run();
        }
        // `f` ran, here or on `cpu`, and stored its result.
        call.ret.ok_or(EINVAL)
    }
}

/// A [`PerCpu::with_cpu`] call, run on the caller or on the target CPU.
struct Call<'a, T, F, R> {
    owner: &'a PerCpu<T>,
    cpu: i32,
    f: Option<F>,
    ret: Option<R>,
}

impl<T, F: FnOnce(&mut T) -> R, R> Call<'_, T, F, R> {
    /// Runs `f` on the `T` of `cpu`, whose owner the caller has become.
    fn call(&mut self) {
        let Some(f) = self.f.take() else {
            return;
        };
        let slot = self.owner.slot(self.cpu);
        // SAFETY: This task holds the `T` of `cpu` (it is recorded as its owner, see the
        // callers): nobody else reaches it, and it is valid by the type invariant.
        let data = unsafe { &mut *UnsafeCell::raw_get(&raw const (*slot).data) };
        self.ret = Some(f(data));
    }

    /// Runs `f` as the holder recorded on this CPU, with migration off: the task cannot leave
    /// the slot it recorded itself in.
    fn call_held(&mut self) {
        let me = Task::current_raw();
        // SAFETY: Paired with the `migrate_enable()` below.
        unsafe { bindings::migrate_disable() };
        // SAFETY: Migration is off.
        let here = unsafe { bindings::raw_smp_processor_id() } as i32;
        let holder = self.owner.holder(here);
        holder.store(me, Relaxed);
        self.call();
        holder.store(null_mut(), Relaxed);
        // SAFETY: Disabled above.
        unsafe { bindings::migrate_enable() };
    }

    /// Runs `f` under the lock of `cpu`: with qpw on from any CPU, with it off on `cpu`.
    fn run(&mut self) {
        let lock = self.owner.lock();
        // SAFETY: `lock` is the per-CPU pointer of initialised locks (type invariant); `cpu` is
        // this CPU, or qpw is on (see `with_cpu`). This task holds no lock of `self`
        // (`held_by_me()` was false; a kworker holds none).
        unsafe { bindings::qpw_lock(lock, self.cpu) };
        let owner = self.owner.owner(self.cpu);
        owner.store(Task::current_raw(), Relaxed);
        self.call_held();
        owner.store(null_mut(), Relaxed);
        // SAFETY: Taken above.
        unsafe { bindings::qpw_unlock(lock, self.cpu) };
    }

    /// Runs `f` for `cpu`, offline with qpw off and CPU hotplug held off: its lock is never
    /// taken, since no task runs there, and the owner field excludes other callers.
    /// Another caller holding it is waited for asleep, so that it runs whatever the priorities.
    fn run_offline(&mut self) {
        let owner = self.owner.owner(self.cpu);
        let me = Task::current_raw();
        while owner.cmpxchg(null_mut(), me, Acquire).is_err() {
            crate::time::delay::fsleep(crate::time::Delta::from_micros(50));
        }
        self.call_held();
        owner.store(null_mut(), Release);
    }

    /// The work of [`PerCpu::with_cpu`] on the target CPU.
    ///
    /// # Safety
    ///
    /// `arg` points to a live `Call` that nothing else uses while this runs.
    unsafe extern "C" fn trampoline(arg: *mut c_void) -> c_long {
        // SAFETY: By the function's safety requirements.
        let call = unsafe { &mut *arg.cast::<Self>() };
        call.run();
        0
    }
}

impl<T> Drop for PerCpu<T> {
    fn drop(&mut self) {
        for cpu in (0..crate::cpu::nr_cpu_ids()).filter(|&c| possible(c)) {
            let slot = self.slot(cpu as i32);
            // SAFETY: Nothing else references the `T`s any more (`with_cpu` waits for its work,
            // a `LocalGuard` borrows `self`); each was initialised in `new`.
            unsafe { core::ptr::drop_in_place(UnsafeCell::raw_get(&raw const (*slot).data)) };
        }
        // SAFETY: The allocation came from `qpw_alloc_percpu()` and is no longer used.
        unsafe { bindings::free_percpu(self.ptr.as_ptr()) };
    }
}

/// This CPU's `T` of a [`PerCpu`], locked.
///
/// # Invariants
///
/// The lock of CPU `cpu` in `owner` is held by this task, recorded as its owner, and `cpu` is the
/// CPU this task runs on until the guard is dropped: the task's migration is disabled until then.
#[must_use = "the lock is released at once if the guard is not kept"]
pub struct LocalGuard<'a, T> {
    owner: &'a PerCpu<T>,
    cpu: i32,
    _not_send: NotThreadSafe,
}

impl<T> LocalGuard<'_, T> {
    /// The CPU whose `T` this is: the one the task runs on.
    pub fn cpu(&self) -> CpuId {
        // SAFETY: `cpu` came from `raw_smp_processor_id()`, on the CPU the guard keeps the task
        // on.
        unsafe { CpuId::from_i32_unchecked(self.cpu) }
    }
}

impl<T> Deref for LocalGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        let slot = self.owner.slot(self.cpu);
        // SAFETY: The lock is held (type invariant): the `T` is ours while the guard lives.
        unsafe { &*UnsafeCell::raw_get(&raw const (*slot).data) }
    }
}

impl<T> DerefMut for LocalGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        let slot = self.owner.slot(self.cpu);
        // SAFETY: As in `deref`, and `&mut self` makes this the only reference.
        unsafe { &mut *UnsafeCell::raw_get(&raw const (*slot).data) }
    }
}

impl<T> Drop for LocalGuard<'_, T> {
    fn drop(&mut self) {
        self.owner.owner(self.cpu).store(null_mut(), Relaxed);
        // SAFETY: Taken in `PerCpu::local()` on this CPU, which the task has not left (type
        // invariant).
        unsafe { bindings::local_qpw_unlock(self.owner.lock()) };
        // SAFETY: Disabled in `PerCpu::local()` for the guard's life (type invariant).
        unsafe { bindings::migrate_enable() };
    }
}

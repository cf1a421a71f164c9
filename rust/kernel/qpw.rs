// SPDX-License-Identifier: GPL-2.0

//! Per-CPU data under a lock another CPU can take (qpw).
//!
//! A [`PerCpu<T>`] holds one `T` for every possible CPU, each under its CPU's qpw lock. The
//! owning CPU reaches its own through [`PerCpu::local`], a guard that keeps the task on that CPU
//! until it is dropped, as a `local_lock` would. Another CPU's `T` is reached through
//! [`PerCpu::with_cpu`]: with `qpw=1` the caller takes that CPU's spinlock and runs the closure
//! itself, without disturbing the CPU; with `qpw=0` the closure is queued on that CPU, which runs
//! it under its local lock while the caller waits, as C code draining a per-CPU cache does with
//! `queue_work_on()` and `flush_work()`.
//!
//! C header: [`include/linux/qpw.h`](srctree/include/linux/qpw.h)

use crate::{
    bindings,
    cpu::CpuId,
    error::{code::*, Error, Result},
    ffi::{c_long, c_void},
    sync::atomic::{Atomic, Relaxed},
    types::{NotThreadSafe, Opaque},
};
use core::{
    cell::UnsafeCell,
    marker::PhantomData,
    mem::{align_of, size_of},
    ops::{Deref, DerefMut},
    ptr::NonNull,
};

/// Whether qpw is on in this boot: remote work taken under the target's spinlock.
pub fn enabled() -> bool {
    // SAFETY: Reads a static key.
    unsafe { bindings::qpw_enabled() }
}

/// The online CPUs, in order; a CPU can go or come while this runs.
pub fn online_cpus() -> impl Iterator<Item = CpuId> {
    (0..crate::cpu::nr_cpu_ids()).filter_map(|cpu| {
        // SAFETY: Reads the online mask; `cpu` is below `nr_cpu_ids`.
        let online = unsafe { bindings::qpw_cpu_online(cpu as i32) };
        // SAFETY: `cpu` is below `nr_cpu_ids`.
        online.then(|| unsafe { CpuId::from_u32_unchecked(cpu) })
    })
}

/// One CPU's lock and data. The lock comes first: the per-CPU pointer of a slot is that of its
/// lock, which the C side takes.
#[repr(C)]
struct Slot<T> {
    lock: Opaque<bindings::qpw_lock>,
    /// Whether a [`LocalGuard`] of this CPU is alive: set before the lock is taken, cleared once
    /// it is released, by the CPU itself with preemption off.
    held: Atomic<bool>,
    data: UnsafeCell<T>,
}

/// One `T` for every possible CPU, each under its CPU's qpw lock.
///
/// # Invariants
///
/// `ptr` is a per-CPU allocation of one [`Slot<T>`] per possible CPU, owned by this object, in
/// which every possible CPU's lock is initialised and its data holds a valid `T`. A CPU's data is
/// only reached with its lock held: by the CPU itself ([`LocalGuard`]), or through
/// [`PerCpu::with_cpu`].
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
    cpu < crate::cpu::nr_cpu_ids() && unsafe { bindings::qpw_cpu_possible(cpu as i32) }
}

impl<T> PerCpu<T> {
    /// Allocates one `T` for every possible CPU, each made by `init` for its CPU.
    pub fn new(mut init: impl FnMut(CpuId) -> T) -> Result<Self> {
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
            // is the slot's); the lock is initialised before anyone can take it.
            unsafe {
                bindings::qpw_lock_init(Opaque::cast_into(&raw const (*slot).lock));
                (&raw mut (*slot).held).write(Atomic::new(false));
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
        // SAFETY: `cpu` is a valid CPU number (callers take it from a `CpuId` or from
        // `smp_processor_id()`), and by the type invariant the allocation has its slot.
        unsafe { bindings::qpw_per_cpu_ptr(self.ptr.as_ptr(), cpu) }.cast()
    }

    /// Whether a [`LocalGuard`] of `cpu` is alive.
    fn held(&self, cpu: i32) -> &Atomic<bool> {
        let slot = self.slot(cpu);
        // SAFETY: The slot is initialised (type invariant) and lives as long as `self`.
        unsafe { &(*slot).held }
    }

    /// Locks this CPU's `T`: the task stays on this CPU until the guard is dropped (preemption is
    /// off, as under `local_lock()`). Not for hard interrupt context, as a `local_lock()`: the
    /// lock leaves interrupts on.
    ///
    /// Fails with `EDEADLK` if this CPU holds it already: a second call while the first guard is
    /// alive, or a call from an interrupt that came while this CPU's task held it (or was
    /// releasing it). A `local_lock` would nest, or deadlock with qpw on; this refuses instead.
    pub fn local(&self) -> Result<LocalGuard<'_, T>> {
        // SAFETY: Paired with the `preempt_enable()` below: `cpu` stays this CPU meanwhile.
        unsafe { bindings::preempt_disable() };
        // SAFETY: Preemption is off.
        let cpu = unsafe { bindings::qpw_this_cpu() };
        let held = self.held(cpu);
        let ret = if held.load(Relaxed) {
            Err(Error::from_errno(-(bindings::EDEADLK as i32)))
        } else {
            // Set before the lock is taken: an interrupt that comes once it is taken sees it.
            held.store(true, Relaxed);
            // SAFETY: By the type invariant, `self.lock()` is the per-CPU pointer of initialised
            // qpw locks; this CPU does not hold its own (`held` was clear).
            unsafe { bindings::local_qpw_lock(self.lock()) };
            // INVARIANT: This CPU's lock was taken above, and `cpu` is this CPU, which the lock
            // keeps this task on.
            Ok(LocalGuard {
                owner: self,
                cpu,
                _not_send: NotThreadSafe,
            })
        };
        // SAFETY: Disabled above.
        unsafe { bindings::preempt_enable() };
        ret
    }

    /// Runs `f` on the `T` of `cpu`, under that CPU's lock. With qpw on, the caller takes the
    /// lock and runs `f` itself; `cpu` is not disturbed. With qpw off, `f` is queued on `cpu`,
    /// which runs it under its local lock, and the caller waits for it; if `cpu` is offline,
    /// the caller runs `f` with CPU hotplug held off, since nothing else touches the `T` of an
    /// offline CPU. Might sleep.
    pub fn with_cpu<R, F>(&self, cpu: CpuId, f: F) -> R
    where
        T: Send,
        R: Send,
        F: FnOnce(&mut T) -> R + Send,
    {
        crate::task::might_sleep();
        let cpu = cpu.as_u32() as i32;
        let mut call = Call {
            owner: self,
            cpu,
            f: Some(f),
            ret: None,
        };
        if !enabled() {
            // SAFETY: Takes the CPU hotplug lock for reading; released below.
            unsafe { bindings::cpus_read_lock() };
            // SAFETY: `cpu` is a valid CPU number.
            if unsafe { bindings::qpw_cpu_online(cpu) } {
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
            }
        }
        // With qpw on, `f` runs here. With it off it ran on `cpu` above, and this does nothing,
        // unless `cpu` is offline: then nobody else reaches its `T` while hotplug is held off.
        call.run();
        if !enabled() {
            // SAFETY: Taken above.
            unsafe { bindings::cpus_read_unlock() };
        }
        match call.ret {
            Some(ret) => ret,
            // `f` ran, here or on `cpu`, and stored its result.
            None => unreachable!(),
        }
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
    /// Runs `f` under the lock of `cpu`, if it has not run yet: with qpw off, on `cpu` or with
    /// hotplug held off while `cpu` is offline.
    fn run(&mut self) {
        let Some(f) = self.f.take() else {
            return;
        };
        let lock = self.owner.lock();
        // SAFETY: `lock` is the per-CPU pointer of initialised locks (type invariant); `cpu` is
        // this CPU, or an offline one, or qpw is on (see `with_cpu`).
        unsafe { bindings::qpw_lock(lock, self.cpu) };
        let slot = self.owner.slot(self.cpu);
        // SAFETY: The lock of `cpu` is held: nobody else reaches its `T`, valid by the type
        // invariant.
        let data = unsafe { &mut *UnsafeCell::raw_get(&raw const (*slot).data) };
        self.ret = Some(f(data));
        // SAFETY: Taken above.
        unsafe { bindings::qpw_unlock(lock, self.cpu) };
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
/// The lock of CPU `cpu` in `owner` is held, and `cpu` is the CPU this task runs on until the
/// guard is dropped.
pub struct LocalGuard<'a, T> {
    owner: &'a PerCpu<T>,
    cpu: i32,
    _not_send: NotThreadSafe,
}

impl<T> LocalGuard<'_, T> {
    /// The CPU whose `T` this is: the one the task runs on.
    pub fn cpu(&self) -> CpuId {
        // SAFETY: `cpu` came from `smp_processor_id()`.
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
        // SAFETY: Paired with the `preempt_enable()` below: the task stays on `cpu` until `held`
        // is cleared.
        unsafe { bindings::preempt_disable() };
        // SAFETY: Taken in `PerCpu::local()` on this CPU (type invariant).
        unsafe { bindings::local_qpw_unlock(self.owner.lock()) };
        // Cleared once the lock is released: an interrupt in between is refused, not deadlocked.
        self.owner.held(self.cpu).store(false, Relaxed);
        // SAFETY: Disabled above.
        unsafe { bindings::preempt_enable() };
    }
}

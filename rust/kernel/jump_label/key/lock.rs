// SPDX-License-Identifier: GPL-2.0

//! The mutexes behind static keys: `jump_label_mutex`, which serialises every update of a key and
//! every walk of its sites ([`JumpLabelLock`]), and `text_mutex`, which serialises every write of
//! kernel text ([`TextLock`]). One guard each, for this crate and for the crates that patch text
//! beside it.
//!
//! Taking either is `unsafe`: upstream exports neither lock, and every flip takes them in one
//! order, `cpus_read_lock()`, then `jump_label_mutex`, then `text_mutex`. A task that holds
//! `text_mutex` and flips a key, or takes `jump_label_mutex`, deadlocks against a flip that
//! waits for `text_mutex` (ABBA); a guard that is never dropped wedges every later flip, and
//! ftrace, kprobes and BPF with them. Flip keys with [`StaticKey`](super::StaticKey)'s methods,
//! which take what they need.

use crate::{
    bindings,
    sync::{
        Mutex,
        MutexGuard, //
    },
};
use core::marker::PhantomData;

/// Holds `jump_label_mutex` (`jump_label_lock()`).
///
/// The mutex is not recursive: a task that holds it and takes it again deadlocks. Not `Send`:
/// the task that took the mutex releases it.
///
/// # Invariants
///
/// The task that made the guard holds `jump_label_mutex` until the guard is dropped.
pub struct JumpLabelLock {
    _not_send: PhantomData<*mut ()>,
}

impl JumpLabelLock {
    /// Takes the mutex; may sleep.
    ///
    /// # Safety
    ///
    /// The caller holds neither `jump_label_mutex` nor `text_mutex`, changes no static key
    /// through a function that takes the mutex itself while the guard lives, and drops the guard
    /// before it returns to code that does not know of it.
    pub unsafe fn lock() -> Self {
        // SAFETY: Taking a mutex only needs a context that may sleep, which `mutex_lock()` checks
        // (`might_sleep()`); the caller takes it in the order every flip takes it.
        unsafe { bindings::jump_label_lock() };
        // INVARIANT: The mutex was taken just above, by this task.
        Self {
            _not_send: PhantomData,
        }
    }
}

impl Drop for JumpLabelLock {
    fn drop(&mut self) {
        // SAFETY: By the type invariant, this task holds the mutex, taken for this guard.
        unsafe { bindings::jump_label_unlock() };
    }
}

/// Holds `text_mutex`: no other task writes kernel text, so no site is half written, while the
/// guard lives.
///
/// The mutex is not recursive: a task that holds it and takes it again deadlocks. Not `Send`:
/// the task that took the mutex releases it ([`MutexGuard`] is not).
pub struct TextLock {
    _guard: MutexGuard<'static, ()>,
}

impl TextLock {
    /// Takes the mutex; may sleep.
    ///
    /// # Safety
    ///
    /// The caller does not hold `text_mutex`, takes no other lock of a flip (`cpus_read_lock()`,
    /// `jump_label_mutex`) and changes no static key while the guard lives, and drops the guard
    /// before it returns to code that does not know of it.
    pub unsafe fn lock() -> Self {
        // SAFETY: `text_mutex` is a static mutex, initialised where it is defined
        // (`DEFINE_MUTEX()`), that lives as long as the kernel.
        let mutex: &'static Mutex<()> = unsafe { Mutex::from_raw(&raw mut bindings::text_mutex) };
        // The caller takes it in the order every flip takes it.
        Self {
            _guard: mutex.lock(),
        }
    }
}

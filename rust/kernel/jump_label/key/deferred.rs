// SPDX-License-Identifier: GPL-2.0

//! Static keys whose last reference is dropped late, at most once per rate limit
//! ([`StaticKeyDeferred`]).

use super::{in_module, private, raw_key, KeyType, StaticKey};
use crate::{
    bindings,
    error::{code::*, Result},
    sync::atomic::{Atomic, Relaxed},
    task::might_sleep,
    types::Opaque,
};

/// A static key whose last reference is dropped late, at most once per rate limit:
/// `DEFINE_STATIC_KEY_DEFERRED_FALSE()` and `DEFINE_STATIC_KEY_DEFERRED_TRUE()`
/// (`jump_label_ratelimit.h`).
///
/// A key that users take and drop in quick succession would patch the kernel text each time;
/// [`dec_deferred`](Self::dec_deferred) drops the last reference only after the rate limit, so
/// a reference taken again meanwhile costs no patching at all. Set the rate limit once, with
/// [`rate_limit`](Self::rate_limit), before the first deferred decrement;
/// [`flush`](Self::flush) drops a pending last reference at once. [`key`](Self::key) gives the
/// key itself, for sites, [`StaticKey::inc`] and everything else.
///
/// A module that defines such a key flushes it before it goes away.
///
/// # Invariants
///
/// `inner.key` is a valid `struct static_key` (see [`StaticKey`]). `inner.timeout` and
/// `inner.work` are zero while `state` is `Self::UNLIMITED`, and set up by
/// `jump_label_rate_limit()` once it is `Self::LIMITED`; only the thread that moved `state`
/// to `Self::SETTING` writes them.
///
/// # Examples
///
/// ```
/// use kernel::jump_label::StaticKeyDeferredFalse;
///
/// static TRACING: StaticKeyDeferredFalse = StaticKeyDeferredFalse::new();
///
/// TRACING.rate_limit(kernel::time::msecs_to_jiffies(60_000))?;
/// TRACING.key().inc()?;
/// assert!(kernel::static_branch_unlikely!(TRACING));
/// // Still enabled until the minute has passed, or until it is flushed.
/// TRACING.dec_deferred()?;
/// assert!(TRACING.key().is_enabled());
/// TRACING.flush();
/// assert!(!kernel::static_branch_unlikely!(TRACING));
/// # Ok::<(), Error>(())
/// ```
#[repr(C)]
pub struct StaticKeyDeferred<const INITIAL: bool> {
    // First, so that the key's address is the `static`'s: a site names the `static`.
    inner: Opaque<bindings::static_key_deferred>,
    state: Atomic<u32>,
}

/// A deferred static key that starts disabled: `DEFINE_STATIC_KEY_DEFERRED_FALSE()`.
pub type StaticKeyDeferredFalse = StaticKeyDeferred<false>;

/// A deferred static key that starts enabled: `DEFINE_STATIC_KEY_DEFERRED_TRUE()`.
pub type StaticKeyDeferredTrue = StaticKeyDeferred<true>;

// SAFETY: The key is changed through the C jump-label API, as a [`StaticKey`] is; the delayed
// work is set up once (`state`) and then only handed to the workqueue API, which serialises it.
unsafe impl<const INITIAL: bool> Sync for StaticKeyDeferred<INITIAL> {}

// SAFETY: A static key holds no thread-bound state.
unsafe impl<const INITIAL: bool> Send for StaticKeyDeferred<INITIAL> {}

impl<const INITIAL: bool> private::Sealed for StaticKeyDeferred<INITIAL> {}
impl<const INITIAL: bool> KeyType for StaticKeyDeferred<INITIAL> {
    const INITIAL: bool = INITIAL;
}

impl<const INITIAL: bool> StaticKeyDeferred<INITIAL> {
    // `state` is `SetOnce`'s protocol (empty, being set by one thread, set), but not a
    // `SetOnce`: what it guards is set up by C in place, inside `inner`
    // (`jump_label_rate_limit()` initialises the delayed work, whose list head points to
    // itself), while `SETTING` gives this thread the key to itself; `SetOnce::populate()` can
    // only move in a value made before.
    const UNLIMITED: u32 = 0;
    const SETTING: u32 = 1;
    const LIMITED: u32 = 2;

    /// Creates a key, for a `static` item; give it a rate limit before its first deferred
    /// decrement.
    pub const fn new() -> Self {
        // SAFETY: `struct static_key_deferred` is made of integers, pointers and optional
        // function pointers, for all of which zero is a valid value.
        let mut raw: bindings::static_key_deferred = unsafe { core::mem::zeroed() };
        raw.key = raw_key(INITIAL);
        // INVARIANT: The key is initialised as a `StaticKey<INITIAL>`, the rest is zero, and
        // the key is unlimited.
        Self {
            inner: Opaque::new(raw),
            state: Atomic::new(Self::UNLIMITED),
        }
    }

    /// The key itself: its value, its sites, and every change but the deferred decrement.
    #[inline]
    pub fn key(&self) -> &StaticKey<INITIAL> {
        // SAFETY: `StaticKey` is a transparent wrapper of `Opaque<bindings::static_key>`, and
        // the key is the first field of `inner`, initialised as a `StaticKey<INITIAL>` (type
        // invariant); it lives as long as `self`.
        unsafe { &*self.inner.get().cast::<StaticKey<INITIAL>>() }
    }

    /// Returns the C `struct static_key_deferred`.
    #[inline]
    pub fn as_raw(&self) -> *mut bindings::static_key_deferred {
        self.inner.get()
    }

    /// Sets the rate limit, in jiffies: how long [`dec_deferred`](Self::dec_deferred) waits
    /// before it drops the last reference (`jump_label_rate_limit()`).
    ///
    /// Fails with `EINVAL` and a warning for a limit of zero (a limit is unsigned: a negative
    /// one does not compile; C takes zero for "at once, from a work item"), with `EBUSY` if the
    /// key has a limit already, and with `EAGAIN` as [`StaticKey::enable`] does before
    /// `jump_label_init()`; the key is left as it was. Only a `static` key of the kernel image
    /// takes a limit: the work item that drops its last reference may run at any time later, and
    /// would outlive a module that was unloaded meanwhile. A key of a module is refused with
    /// `EINVAL` and a warning.
    pub fn rate_limit(&'static self, rl: crate::time::Jiffies) -> Result {
        self.key().initialized()?;
        if in_module(self.as_raw().addr()) {
            crate::pr_warn!(
                "static key {:p}: a module's key cannot be rate-limited: its delayed work could \
                 outlive the module\n",
                self.as_raw()
            );
            crate::warn_on!(true);
            return Err(EINVAL);
        }
        if rl == 0 {
            crate::pr_warn!(
                "static key {:p}: a rate limit of 0 jiffies\n",
                self.as_raw()
            );
            crate::warn_on!(true);
            return Err(EINVAL);
        }
        if self
            .state
            .cmpxchg(Self::UNLIMITED, Self::SETTING, Relaxed)
            .is_err()
        {
            return Err(EBUSY);
        }
        // SAFETY: `self.as_raw()` is valid; the `cmpxchg` above made this thread the only one
        // to write `timeout` and `work`, and no deferred decrement uses them before `state`
        // says `LIMITED`.
        unsafe { bindings::jump_label_rate_limit(self.as_raw(), rl) };
        // INVARIANT: `jump_label_rate_limit()` set up `timeout` and `work`.
        self.state
            .store(Self::LIMITED, crate::sync::atomic::Release);
        Ok(())
    }

    /// Whether the delayed drop of the last reference is pending.
    fn drop_pending(&self) -> bool {
        // SAFETY: `work` is in `self`; its `data` word is an aligned `atomic_long_t` that the
        // workqueue code changes atomically.
        let data = unsafe { Atomic::from_ptr(&raw mut (*self.as_raw()).work.work.data.counter) };
        data.load(Relaxed) & (1 << bindings::work_bits_WORK_STRUCT_PENDING_BIT) != 0
    }

    /// Drops a reference taken with [`StaticKey::inc`]; the last one only after the rate limit
    /// (`static_branch_slow_dec_deferred()`).
    ///
    /// A reference taken again before the rate limit has passed keeps the key enabled, with no
    /// patching. Fails with `EINVAL` and a warning, changing nothing, before a rate limit is set
    /// (where C's `DEFINE_STATIC_KEY_DEFERRED_FALSE()` sets it with the key) and when the key
    /// has no reference left to drop (none, or only the one whose drop is pending); C's own
    /// check (a warning) stands behind it for decrements that race. Fails with `EAGAIN` as
    /// [`StaticKey::enable`] does before `jump_label_init()`.
    ///
    /// Does not sleep: the last reference is dropped by a work item.
    pub fn dec_deferred(&'static self) -> Result {
        if self.state.load(crate::sync::atomic::Acquire) != Self::LIMITED {
            crate::pr_warn!(
                "static key {:p}: deferred decrement without a rate limit\n",
                self.as_raw()
            );
            crate::warn_on!(true);
            return Err(EINVAL);
        }
        self.key().initialized()?;
        let count = self.key().count();
        if count <= 0 || (count == 1 && self.drop_pending()) {
            crate::pr_warn!(
                "static key {:p}: deferred decrement below zero\n",
                self.as_raw()
            );
            crate::warn_on!(true);
            return Err(EINVAL);
        }
        let raw = self.as_raw();
        // SAFETY: `state` is `LIMITED` (read with `Acquire`), so `work` and `timeout` are set
        // up (type invariant) and no longer written.
        unsafe {
            bindings::__static_key_slow_dec_deferred(
                &raw mut (*raw).key,
                &raw mut (*raw).work,
                (*raw).timeout,
            )
        };
        Ok(())
    }

    /// Drops a pending last reference now (`static_key_deferred_flush()`); does nothing if no
    /// drop is pending.
    ///
    /// Waits for the work item: may sleep.
    pub fn flush(&self) {
        might_sleep();
        if self.state.load(crate::sync::atomic::Acquire) != Self::LIMITED {
            // No rate limit, so no work item was ever queued.
            return;
        }
        let raw = self.as_raw();
        // SAFETY: As in `dec_deferred()`: `work` is set up; the caller may sleep.
        unsafe { bindings::__static_key_deferred_flush(raw.cast(), &raw mut (*raw).work) };
    }
}

impl<const INITIAL: bool> Default for StaticKeyDeferred<INITIAL> {
    fn default() -> Self {
        Self::new()
    }
}

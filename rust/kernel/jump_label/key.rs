// SPDX-License-Identifier: GPL-2.0

//! Static keys defined and used from Rust.
//!
//! A static key is a boolean whose tests are instructions rather than loads: every place that
//! branches on the key (a *site*) is a NOP or a JMP in kernel text, and changing the key rewrites
//! all of its sites through the kernel's jump-label machinery. Testing a key costs a NOP or a JMP;
//! changing it patches live text on every CPU, so keys suit conditions that rarely change.
//!
//! [`StaticKeyFalse`] starts disabled and [`StaticKeyTrue`] starts enabled. Sites are placed with
//! [`static_branch_likely!`](crate::static_branch_likely) and
//! [`static_branch_unlikely!`](crate::static_branch_unlikely), which only steer code layout: both
//! evaluate to whether the key is enabled. A key is changed with [`StaticKey::enable`] and
//! [`StaticKey::disable`], or with the reference-counted [`StaticKey::inc`] and
//! [`StaticKey::dec`]. Keys defined in C with `DEFINE_STATIC_KEY_FALSE()` or
//! `DEFINE_STATIC_KEY_TRUE()` work the same way through their bindings.
//!
//! Keys that only change while the kernel boots are [`StaticKeyRo`]; keys whose last reference
//! is dropped late, at most once per rate limit, are [`StaticKeyDeferred`]
//! (`jump_label_ratelimit.h`).
//!
//! C header: [`include/linux/jump_label.h`](srctree/include/linux/jump_label.h).
//!
//! Documentation: [`Documentation/staging/static-keys.rst`].
//!
//! [`Documentation/staging/static-keys.rst`]: srctree/Documentation/staging/static-keys.rst
//!
//! # Examples
//!
//! ```
//! use kernel::jump_label::StaticKeyFalse;
//!
//! static VERBOSE: StaticKeyFalse = StaticKeyFalse::new();
//!
//! fn hot_path(x: u32) -> u32 {
//!     if kernel::static_branch_unlikely!(VERBOSE) {
//!         pr_info!("hot_path({x})\n");
//!     }
//!     x + 1
//! }
//!
//! assert!(!VERBOSE.is_enabled());
//! VERBOSE.enable()?;
//! assert_eq!(hot_path(1), 2);
//! VERBOSE.disable()?;
//! # Ok::<(), Error>(())
//! ```

use crate::{
    bindings,
    error::{code::*, Result},
    ffi::c_ulong,
    sync::atomic::{Atomic, Relaxed},
    task::might_sleep,
    types::Opaque,
};

use super::x86;

mod branch;
mod deferred;
mod lock;
mod ro;
mod sites;
#[cfg(CONFIG_TEXT_POKE_BATCH_RUST)]
mod transaction;

pub use branch::*;
pub use deferred::*;
pub use lock::*;
pub use ro::*;
pub use sites::*;
#[cfg(CONFIG_TEXT_POKE_BATCH_RUST)]
pub use transaction::Transaction;

/// The kinds of static key a site can test.
///
/// Implemented by [`StaticKeyFalse`], [`StaticKeyTrue`] and the C types `struct static_key_false`
/// and `struct static_key_true`, so that [`static_branch_likely!`](crate::static_branch_likely)
/// and [`static_branch_unlikely!`](crate::static_branch_unlikely) accept keys defined in Rust and
/// in C, and nothing else.
pub trait KeyType: private::Sealed {
    /// Whether a key of this type starts enabled.
    const INITIAL: bool;
}

mod private {
    pub trait Sealed {}
}

/// A static key whose initial value is `INITIAL`.
///
/// Use it through the aliases [`StaticKeyFalse`] and [`StaticKeyTrue`], as a `static`: the
/// branch macros only accept a path to a `static`, so a key on the stack has no sites.
///
/// # Invariants
///
/// `self.0` is a valid `struct static_key`, initialised as `STATIC_KEY_INIT_TRUE` when `INITIAL`
/// is true and as `STATIC_KEY_INIT_FALSE` otherwise. After `jump_label_init()` the kernel owns
/// its `entries` word; Rust only reads it, under `jump_label_lock()`.
#[repr(transparent)]
pub struct StaticKey<const INITIAL: bool>(Opaque<bindings::static_key>);

/// A static key that starts disabled: `DEFINE_STATIC_KEY_FALSE()`.
pub type StaticKeyFalse = StaticKey<false>;

/// A static key that starts enabled: `DEFINE_STATIC_KEY_TRUE()`.
pub type StaticKeyTrue = StaticKey<true>;

// SAFETY: Every access to the key goes through the C jump-label API, which serialises writers
// with `jump_label_mutex` and reads the count atomically, so a key may be shared between threads.
unsafe impl<const INITIAL: bool> Sync for StaticKey<INITIAL> {}

// SAFETY: A static key holds no thread-bound state.
unsafe impl<const INITIAL: bool> Send for StaticKey<INITIAL> {}

impl<const INITIAL: bool> private::Sealed for StaticKey<INITIAL> {}
impl<const INITIAL: bool> KeyType for StaticKey<INITIAL> {
    const INITIAL: bool = INITIAL;
}

impl private::Sealed for bindings::static_key_false {}
impl KeyType for bindings::static_key_false {
    const INITIAL: bool = false;
}

impl private::Sealed for bindings::static_key_true {}
impl KeyType for bindings::static_key_true {
    const INITIAL: bool = true;
}

/// `Ok` if `ready` (`jump_label_init()` has run); else `EAGAIN`, with a warning naming `key`.
fn refuse_before_init(ready: bool, key: *mut bindings::static_key) -> Result {
    if ready {
        return Ok(());
    }
    crate::pr_warn!("static key {:p} used before jump_label_init()\n", key);
    crate::warn_on!(true);
    Err(EAGAIN)
}

/// `STATIC_KEY_INIT_TRUE` if `initial`, `STATIC_KEY_INIT_FALSE` if not.
const fn raw_key(initial: bool) -> bindings::static_key {
    bindings::static_key {
        enabled: bindings::atomic_t {
            counter: initial as i32,
        },
        __bindgen_anon_1: bindings::static_key__bindgen_ty_1 {
            type_: if initial {
                bindings::JUMP_TYPE_TRUE as c_ulong
            } else {
                bindings::JUMP_TYPE_FALSE as c_ulong
            },
        },
    }
}

impl<const INITIAL: bool> StaticKey<INITIAL> {
    /// Creates a key, for a `static` item.
    pub const fn new() -> Self {
        // INVARIANT: `raw_key()` is `STATIC_KEY_INIT_TRUE` or `STATIC_KEY_INIT_FALSE` per
        // `INITIAL`.
        Self(Opaque::new(raw_key(INITIAL)))
    }

    /// Returns the C `struct static_key`.
    #[inline]
    pub fn as_raw(&self) -> *mut bindings::static_key {
        self.0.get()
    }

    /// The key's reference count: positive when it is enabled.
    #[inline]
    pub fn count(&self) -> i32 {
        // SAFETY: By the type invariant `self.as_raw()` is a valid key.
        unsafe { bindings::static_key_count(self.as_raw()) }
    }

    /// Whether the key is enabled: `static_key_enabled()`.
    #[inline]
    pub fn is_enabled(&self) -> bool {
        self.count() > 0
    }

    /// Enables the key, patching its sites to their enabled direction.
    ///
    /// A key is either switched with [`enable`](Self::enable) and [`disable`](Self::disable) or
    /// counted with [`inc`](Self::inc) and [`dec`](Self::dec), not both: enabling a key whose
    /// count is above one leaves it unchanged with a warning, as in C.
    ///
    /// With `CONFIG_TEXT_POKE_BATCH_RUST`, fails with `EINVAL`, with a warning, the key unchanged
    /// and nothing written, if a site of the key, in the kernel image or in any module, does not
    /// hold the instruction the key's value put there (upstream's update `BUG()`s instead); and
    /// likewise with `ENOMEM` if the batch cannot make room for the key's sites, `EFAULT` if a
    /// page of their text cannot be mapped, and `EIO` if a write does not land (every site put
    /// back).
    ///
    /// Fails with `EAGAIN`, with a warning, the key unchanged, before `jump_label_init()`.
    ///
    /// Takes `cpus_read_lock()` and `jump_label_mutex`: may sleep.
    pub fn enable(&self) -> Result {
        self.set(true)
    }

    /// Disables the key, patching its sites to their disabled direction.
    ///
    /// Fails as [`enable`](Self::enable) does.
    ///
    /// Takes `cpus_read_lock()` and `jump_label_mutex`: may sleep.
    pub fn disable(&self) -> Result {
        self.set(false)
    }

    fn set(&self, enable: bool) -> Result {
        // SAFETY: The caller does not hold `cpus_read_lock()`: it is not a `_cpuslocked` call.
        unsafe { self.update(enable, false) }
    }

    /// Takes a reference on the key: `static_key_slow_inc()`.
    ///
    /// The first reference enables the key. A key that starts enabled starts with one reference.
    /// Fails with `EOVERFLOW` and a warning, and changes nothing, if the count would overflow,
    /// and as [`enable`](Self::enable) does (`EINVAL`, `ENOMEM`, `EFAULT`, `EIO`) if the first
    /// reference's update is refused.
    ///
    /// Takes `cpus_read_lock()` and `jump_label_mutex`: may sleep.
    pub fn inc(&self) -> Result {
        might_sleep();
        self.initialized()?;
        // SAFETY: By the type invariant `self.as_raw()` is a valid key; the caller may sleep
        // and, being allowed to flip keys, holds none of the locks the update takes.
        unsafe { inc_key(self.as_raw(), false) }
    }

    /// Drops a reference on the key: `static_key_slow_dec()`.
    ///
    /// Dropping the last reference disables the key. Dropping a reference the key does not have
    /// warns and changes nothing, as in C. If a site is corrupted, the last reference is not
    /// dropped (the key stays enabled, with a warning).
    ///
    /// Takes `cpus_read_lock()` and `jump_label_mutex`: may sleep.
    pub fn dec(&self) {
        might_sleep();
        if self.initialized().is_err() {
            return;
        }
        // SAFETY: By the type invariant `self.as_raw()` is a valid key; the caller may sleep.
        unsafe { bindings::static_key_slow_dec(self.as_raw()) }
    }

    /// [`enable`](Self::enable) for a caller that holds `cpus_read_lock()`:
    /// `static_key_enable_cpuslocked()`.
    ///
    /// # Safety
    ///
    /// The caller holds `cpus_read_lock()`.
    pub unsafe fn enable_cpuslocked(&self) -> Result {
        // SAFETY: As the caller guarantees.
        unsafe { self.set_cpuslocked(true) }
    }

    /// [`disable`](Self::disable) for a caller that holds `cpus_read_lock()`:
    /// `static_key_disable_cpuslocked()`.
    ///
    /// # Safety
    ///
    /// The caller holds `cpus_read_lock()`.
    pub unsafe fn disable_cpuslocked(&self) -> Result {
        // SAFETY: As the caller guarantees.
        unsafe { self.set_cpuslocked(false) }
    }

    /// # Safety
    ///
    /// The caller holds `cpus_read_lock()`.
    unsafe fn set_cpuslocked(&self, enable: bool) -> Result {
        // SAFETY: As the caller guarantees.
        unsafe { self.update(enable, true) }
    }

    /// Sets the key to `enable`: [`enable`](Self::enable) and [`disable`](Self::disable), and
    /// their `_cpuslocked` forms if `cpuslocked`.
    ///
    /// # Safety
    ///
    /// The caller holds `cpus_read_lock()` if and only if `cpuslocked`.
    unsafe fn update(&self, enable: bool, cpuslocked: bool) -> Result {
        might_sleep();
        self.initialized()?;
        // SAFETY: By the type invariant `self.as_raw()` is a valid key; the caller may sleep,
        // holds `cpus_read_lock()` as `cpuslocked` says and, being allowed to flip keys, none of
        // the locks the update takes.
        unsafe { set_key(self.as_raw(), enable, cpuslocked) }
    }

    /// [`inc`](Self::inc) for a caller that holds `cpus_read_lock()`:
    /// `static_key_slow_inc_cpuslocked()`.
    ///
    /// # Safety
    ///
    /// The caller holds `cpus_read_lock()`.
    pub unsafe fn inc_cpuslocked(&self) -> Result {
        might_sleep();
        self.initialized()?;
        // SAFETY: By the type invariant `self.as_raw()` is a valid key; the caller may sleep and
        // holds `cpus_read_lock()`.
        unsafe { inc_key(self.as_raw(), true) }
    }

    /// [`dec`](Self::dec) for a caller that holds `cpus_read_lock()`:
    /// `static_key_slow_dec_cpuslocked()`.
    ///
    /// # Safety
    ///
    /// The caller holds `cpus_read_lock()`.
    pub unsafe fn dec_cpuslocked(&self) {
        might_sleep();
        if self.initialized().is_err() {
            return;
        }
        // SAFETY: By the type invariant `self.as_raw()` is a valid key; the caller may sleep and
        // holds `cpus_read_lock()`.
        unsafe { bindings::static_key_slow_dec_cpuslocked(self.as_raw()) }
    }

    /// `Ok` once `jump_label_init()` has run; before, `EAGAIN` with a warning.
    ///
    /// C warns about such a use (`STATIC_KEY_CHECK_USE()`) and goes on; the key's sites are not
    /// known yet, so the change would not reach them.
    fn initialized(&self) -> Result {
        // SAFETY: `static_key_initialized` is a `bool` that lives as long as the kernel; the boot
        // CPU sets it once, before any other CPU runs, and nothing writes it afterwards.
        let ready = unsafe { Atomic::from_ptr(&raw mut bindings::static_key_initialized) };
        refuse_before_init(ready.load(Relaxed), self.as_raw())
    }

    /// Takes a reference on the key that is dropped with the returned guard.
    pub fn get(&'static self) -> Result<StaticKeyRef<INITIAL>> {
        self.inc()?;
        // INVARIANT: The reference was taken just above.
        Ok(StaticKeyRef { key: self })
    }

    /// Calls `f` on each site of the key, in the order of the jump table (by code address).
    ///
    /// Sites in init text that has been freed are skipped, as the kernel skips them when it
    /// patches. The sites cannot change while `f` runs: `jump_label_mutex` is held (and, with
    /// the Rust text-poke batch, `text_mutex`), so `f` must not change or inspect any static key
    /// nor patch text. Sites a transaction keeps queued are seen as they are in the text, not
    /// yet patched. Fails with `ENOTSUPP` for a key whose sites are not all in the kernel image
    /// (a key used by modules, or defined in one).
    ///
    /// Takes `jump_label_mutex` (and `text_mutex`): may sleep.
    pub fn for_each_site(&self, mut f: impl FnMut(&Site)) -> Result {
        might_sleep();
        walk_sites(self.as_raw(), &mut f)
    }

    /// Checks every site against the key's value (see [`for_each_site`](Self::for_each_site)):
    /// returns the number of sites and how many of them do not hold the instruction the value
    /// calls for.
    pub fn check_sites(&self) -> Result<(usize, usize)> {
        let (mut sites, mut wrong) = (0, 0);
        let mut enabled = None;
        self.for_each_site(|site| {
            // Read under `jump_label_mutex`, with the sites: the two cannot disagree there.
            let enabled = *enabled.get_or_insert_with(|| self.is_enabled());
            sites += 1;
            let ok = site
                .expected(enabled)
                .is_some_and(|want| want.as_bytes() == &site.read()[..site.size()]);
            if !ok {
                wrong += 1;
            }
        })?;
        Ok((sites, wrong))
    }

    /// The number of sites of the key (see [`for_each_site`](Self::for_each_site)).
    pub fn site_count(&self) -> Result<usize> {
        let mut n = 0;
        self.for_each_site(|_| n += 1)?;
        Ok(n)
    }
}

impl StaticKey<false> {
    /// Returns the Rust view of a key defined in C with `DEFINE_STATIC_KEY_FALSE()`.
    ///
    /// # Safety
    ///
    /// `key` points to a `struct static_key_false` that is never freed and is not read-only
    /// (not defined with `DEFINE_STATIC_KEY_FALSE_RO()`).
    #[inline]
    pub unsafe fn from_c(key: *mut bindings::static_key_false) -> &'static Self {
        // SAFETY: `struct static_key_false` is a `struct static_key`, which `Self` wraps
        // transparently; the caller guarantees it lives forever. C initialised it as
        // `STATIC_KEY_INIT_FALSE`, so the type invariant holds.
        unsafe { &*key.cast::<Self>() }
    }
}

impl StaticKey<true> {
    /// Returns the Rust view of a key defined in C with `DEFINE_STATIC_KEY_TRUE()`.
    ///
    /// # Safety
    ///
    /// `key` points to a `struct static_key_true` that is never freed and is not read-only
    /// (not defined with `DEFINE_STATIC_KEY_TRUE_RO()`).
    #[inline]
    pub unsafe fn from_c(key: *mut bindings::static_key_true) -> &'static Self {
        // SAFETY: `struct static_key_true` is a `struct static_key`, which `Self` wraps
        // transparently; the caller guarantees it lives forever. C initialised it as
        // `STATIC_KEY_INIT_TRUE`, so the type invariant holds.
        unsafe { &*key.cast::<Self>() }
    }
}

impl<const INITIAL: bool> Default for StaticKey<INITIAL> {
    fn default() -> Self {
        Self::new()
    }
}

/// Whether `addr` is in a module's data.
///
/// Not generic, so that the module lookup, which modules cannot call, stays in the kernel.
#[inline(never)]
fn in_module(addr: usize) -> bool {
    #[cfg(CONFIG_MODULES)]
    {
        with_owner(addr, |module| !module.is_null())
    }
    #[cfg(not(CONFIG_MODULES))]
    {
        let _ = addr;
        false
    }
}

/// Calls `f` with the module whose memory holds `addr`, or null for the kernel image, under the
/// RCU read lock, which keeps the module valid while `f` runs.
#[cfg(CONFIG_MODULES)]
fn with_owner<R>(addr: usize, f: impl FnOnce(*mut bindings::module) -> R) -> R {
    let _rcu = crate::sync::rcu::read_lock();
    // SAFETY: Called under the RCU read lock, as `__module_address()` requires; any address is
    // accepted.
    f(unsafe { bindings::__module_address(addr as c_ulong) })
}

/// A reference on a static key, dropped with the guard.
///
/// # Invariants
///
/// The guard owns one reference on `key`, taken with [`StaticKey::inc`].
pub struct StaticKeyRef<const INITIAL: bool> {
    key: &'static StaticKey<INITIAL>,
}

impl<const INITIAL: bool> Drop for StaticKeyRef<INITIAL> {
    fn drop(&mut self) {
        // The type invariant says this reference is ours to drop.
        self.key.dec();
    }
}

/// Sets `key` to `enable`: `static_key_enable()` or `static_key_disable()` (their
/// `_cpuslocked` forms if `cpuslocked`), told whether the update was refused; see
/// [`StaticKey::enable`].
///
/// Not generic, so that modules using static keys need none of the symbols it uses.
///
/// # Safety
///
/// `key` is a valid key, and the caller may sleep, holds `cpus_read_lock()` if and only if
/// `cpuslocked`, and holds neither `jump_label_mutex` nor `text_mutex`.
#[inline(never)]
unsafe fn set_key(key: *mut bindings::static_key, enable: bool, cpuslocked: bool) -> Result {
    // SAFETY: A valid key, in a context the update may run in, as the caller guarantees.
    crate::error::to_result(unsafe { bindings::static_key_set_checked(key, enable, cpuslocked) })
}

/// Takes a reference on `key`: `static_key_slow_inc()` (`_cpuslocked` if `cpuslocked`), told
/// why it took none; see [`StaticKey::inc`].
///
/// Not generic, so that modules using static keys need none of the symbols it uses.
///
/// # Safety
///
/// `key` is a valid key, and the caller may sleep, holds `cpus_read_lock()` if and only if
/// `cpuslocked`, and holds neither `jump_label_mutex` nor `text_mutex`.
#[inline(never)]
unsafe fn inc_key(key: *mut bindings::static_key, cpuslocked: bool) -> Result {
    // SAFETY: A valid key, in a context the update may run in, as the caller guarantees.
    crate::error::to_result(unsafe { bindings::static_key_slow_inc_checked(key, cpuslocked) })
}

#[cfg(CONFIG_RUST_STATIC_KEY_KUNIT_TEST)]
#[macros::kunit_tests(rust_static_key)]
mod tests {
    use super::*;

    static FALSE_KEY: StaticKeyFalse = StaticKeyFalse::new();
    static TRUE_KEY: StaticKeyTrue = StaticKeyTrue::new();

    // Keys and sites defined in C, in static_key_test.c beside this file.
    extern "C" {
        static mut rust_static_key_test_false: bindings::static_key_false;
        static mut rust_static_key_test_true: bindings::static_key_true;
        fn rust_static_key_test_false_likely() -> bool;
        fn rust_static_key_test_false_unlikely() -> bool;
        fn rust_static_key_test_true_likely() -> bool;
        fn rust_static_key_test_true_unlikely() -> bool;
    }

    // One site of each kind on each key, kept out of line so each stays a single site.
    #[inline(never)]
    fn false_likely() -> bool {
        crate::static_branch_likely!(FALSE_KEY)
    }

    #[inline(never)]
    fn false_unlikely() -> bool {
        crate::static_branch_unlikely!(FALSE_KEY)
    }

    #[inline(never)]
    fn true_likely() -> bool {
        crate::static_branch_likely!(TRUE_KEY)
    }

    #[inline(never)]
    fn true_unlikely() -> bool {
        crate::static_branch_unlikely!(TRUE_KEY)
    }

    // Keys whose initial value and sites follow a config option: one that is set wherever these
    // tests build, and one that no kernel has.
    static MAYBE_SET: crate::static_key_maybe!(CONFIG_JUMP_LABEL) = StaticKey::new();
    static MAYBE_UNSET: crate::static_key_maybe!(CONFIG_JLRS_NO_SUCH_OPTION) = StaticKey::new();

    #[inline(never)]
    fn maybe_set() -> bool {
        crate::static_branch_maybe!(CONFIG_JUMP_LABEL, MAYBE_SET)
    }

    #[inline(never)]
    fn maybe_unset() -> bool {
        crate::static_branch_maybe!(CONFIG_JLRS_NO_SUCH_OPTION, MAYBE_UNSET)
    }

    #[inline(never)]
    fn c_false_likely() -> bool {
        crate::static_branch_likely!(rust_static_key_test_false)
    }

    #[inline(never)]
    fn c_false_unlikely() -> bool {
        crate::static_branch_unlikely!(rust_static_key_test_false)
    }

    #[inline(never)]
    fn c_true_likely() -> bool {
        crate::static_branch_likely!(rust_static_key_test_true)
    }

    #[inline(never)]
    fn c_true_unlikely() -> bool {
        crate::static_branch_unlikely!(rust_static_key_test_true)
    }

    fn c_false() -> &'static StaticKeyFalse {
        // SAFETY: The key is a static defined in C with `DEFINE_STATIC_KEY_FALSE()`.
        unsafe { StaticKeyFalse::from_c(&raw mut rust_static_key_test_false) }
    }

    fn c_true() -> &'static StaticKeyTrue {
        // SAFETY: The key is a static defined in C with `DEFINE_STATIC_KEY_TRUE()`.
        unsafe { StaticKeyTrue::from_c(&raw mut rust_static_key_test_true) }
    }

    fn c_sites_false() -> [bool; 2] {
        // SAFETY: The C functions only test a static key.
        unsafe {
            [
                rust_static_key_test_false_likely(),
                rust_static_key_test_false_unlikely(),
            ]
        }
    }

    fn c_sites_true() -> [bool; 2] {
        // SAFETY: The C functions only test a static key.
        unsafe {
            [
                rust_static_key_test_true_likely(),
                rust_static_key_test_true_unlikely(),
            ]
        }
    }

    /// Checks every site of `key` against the key's value: (sites, wrong sites); a failed walk
    /// counts as a wrong site.
    fn check_sites<const I: bool>(key: &StaticKey<I>) -> (usize, usize) {
        key.check_sites().unwrap_or((0, 1))
    }

    crate::define_static_key_ro!(RO_FALSE: false);
    crate::define_static_key_ro!(RO_TRUE: true);

    #[inline(never)]
    fn ro_false_site() -> bool {
        crate::static_branch_unlikely!(RO_FALSE)
    }

    #[inline(never)]
    fn ro_true_site() -> bool {
        crate::static_branch_likely!(RO_TRUE)
    }

    extern "C" {
        // The kernel image's `.data..ro_after_init`, from the linker script.
        static __start_ro_after_init: [u8; 0];
        static __end_ro_after_init: [u8; 0];
    }

    #[test]
    fn read_only_keys_flip_while_the_kernel_boots() {
        let ro = (&raw const __start_ro_after_init).addr()..(&raw const __end_ro_after_init).addr();
        assert!(ro.contains(&RO_FALSE.as_raw().addr()));
        assert!(ro.contains(&RO_TRUE.as_raw().addr()));
        // KUnit runs before the kernel frees its init memory: the keys may still change (the
        // refusal after boot is tested from user space, scripts/guest-test/rokey.sh).
        // SAFETY: `system_state` is an aligned `enum`; a racy read of it is only a snapshot.
        let state = unsafe { Atomic::from_ptr(&raw mut bindings::system_state) }.load(Relaxed);
        assert!(state < bindings::system_states_SYSTEM_FREEING_INITMEM);
        assert_eq!(RO_FALSE.enable(), Ok(()));
        assert_eq!(RO_TRUE.disable(), Ok(()));
        assert!(ro_false_site() && !ro_true_site());
        assert_eq!(RO_FALSE.check_sites(), Ok((1, 0)));
        assert_eq!(RO_TRUE.check_sites(), Ok((1, 0)));
        assert_eq!(RO_FALSE.disable(), Ok(()));
        assert_eq!(RO_TRUE.enable(), Ok(()));
        assert_eq!(RO_FALSE.inc(), Ok(()));
        RO_FALSE.dec();
        assert_eq!((RO_FALSE.count(), RO_TRUE.count()), (0, 1));
        assert!(!ro_false_site() && ro_true_site());
    }

    // A key whose drops wait an hour unless flushed, so that no slow guest sees one happen
    // between two steps of a test, one whose drop a test waits for, and one with no limit.
    static DEFERRED: StaticKeyDeferredFalse = StaticKeyDeferredFalse::new();
    static EXPIRING: StaticKeyDeferredFalse = StaticKeyDeferredFalse::new();
    static UNLIMITED: StaticKeyDeferredTrue = StaticKeyDeferredTrue::new();

    #[inline(never)]
    fn deferred_site() -> bool {
        crate::static_branch_unlikely!(DEFERRED)
    }

    #[inline(never)]
    fn expiring_site() -> bool {
        crate::static_branch_unlikely!(EXPIRING)
    }

    #[inline(never)]
    fn unlimited_site() -> bool {
        crate::static_branch_likely!(UNLIMITED)
    }

    /// The rate limit of `EXPIRING`, in jiffies.
    fn expiring_limit() -> crate::time::Jiffies {
        crate::time::msecs_to_jiffies(200)
    }

    /// `DEFERRED` with its rate limit of an hour: set by the first test that asks.
    fn deferred() -> &'static StaticKeyDeferredFalse {
        let ret = DEFERRED.rate_limit(crate::time::msecs_to_jiffies(3_600_000));
        assert!(matches!(ret, Ok(()) | Err(EBUSY)));
        &DEFERRED
    }

    fn jiffies() -> crate::time::Jiffies {
        // SAFETY: `jiffies` is an aligned `unsigned long` that lives as long as the kernel and
        // is only written with whole-word stores.
        unsafe { Atomic::from_ptr(&raw mut bindings::jiffies) }.load(Relaxed)
    }

    /// Counts the warnings `f` triggers.
    fn warnings_of<T>(f: impl FnOnce() -> T) -> (T, Option<i32>) {
        let warnings = crate::kunit::ExpectedWarnings::new();
        let ret = f();
        (
            ret,
            warnings.as_ref().map(crate::kunit::ExpectedWarnings::count),
        )
    }

    #[test]
    fn deferred_key_drops_its_last_reference_after_the_rate_limit() {
        let key = &EXPIRING;
        assert_eq!(key.rate_limit(expiring_limit()), Ok(()));
        assert_eq!(key.key().inc(), Ok(()));
        assert!(expiring_site());
        assert_eq!(check_sites(key.key()), (1, 0));
        let start = jiffies();
        assert_eq!(key.dec_deferred(), Ok(()));
        // The key stays enabled, its reference held, until the rate limit has passed; then the
        // work item drops it (the count first, then the site) and the site falls through again.
        let mut now;
        loop {
            let enabled = expiring_site();
            now = jiffies();
            if !enabled {
                break;
            }
            assert!(key.key().count() <= 1);
            assert!(now - start <= expiring_limit() + crate::time::msecs_to_jiffies(10_000));
            crate::time::delay::fsleep(crate::time::Delta::from_millis(5));
        }
        assert!(now - start >= expiring_limit());
        assert_eq!(key.key().count(), 0);
        assert_eq!(check_sites(key.key()), (1, 0));
    }

    #[test]
    fn deferred_key_taken_again_stays_enabled_and_flushes() {
        let key = deferred();
        assert_eq!(key.key().inc(), Ok(()));
        assert_eq!(key.dec_deferred(), Ok(()));
        // Taken again while the drop is pending: the pending drop takes one of two references.
        assert_eq!(key.key().inc(), Ok(()));
        assert_eq!(key.key().count(), 2);
        key.flush();
        assert_eq!(key.key().count(), 1);
        assert!(deferred_site());
        assert_eq!(check_sites(key.key()), (1, 0));
        // A drop that is not the last one happens at once.
        assert_eq!(key.key().inc(), Ok(()));
        assert_eq!(key.dec_deferred(), Ok(()));
        assert_eq!(key.key().count(), 1);
        // The last one waits for the limit, or for a flush.
        assert_eq!(key.dec_deferred(), Ok(()));
        assert_eq!(key.key().count(), 1);
        assert!(deferred_site());
        key.flush();
        assert_eq!(key.key().count(), 0);
        assert!(!deferred_site());
        assert_eq!(check_sites(key.key()), (1, 0));
        // Nothing pending: a flush changes nothing.
        key.flush();
        assert_eq!(key.key().count(), 0);
    }

    #[test]
    fn deferred_key_refuses_bad_limits_and_decrements() {
        let key = deferred();
        // A zero limit, and a second limit.
        assert_eq!(
            warnings_of(|| UNLIMITED.rate_limit(0)),
            (Err(EINVAL), Some(1))
        );
        assert_eq!(warnings_of(|| key.rate_limit(1)), (Err(EBUSY), Some(0)));
        // A deferred decrement without a limit: the true key keeps its initial reference.
        assert_eq!(
            warnings_of(|| UNLIMITED.dec_deferred()),
            (Err(EINVAL), Some(1))
        );
        assert_eq!(UNLIMITED.key().count(), 1);
        assert!(unlimited_site());
        UNLIMITED.flush();
        assert_eq!(UNLIMITED.key().count(), 1);
        // Below zero: no reference at all, then only the one whose drop is pending.
        assert_eq!(key.key().count(), 0);
        assert_eq!(warnings_of(|| key.dec_deferred()), (Err(EINVAL), Some(1)));
        assert_eq!(key.key().count(), 0);
        assert!(!deferred_site());
        assert_eq!(key.key().inc(), Ok(()));
        assert_eq!(key.dec_deferred(), Ok(()));
        assert_eq!(warnings_of(|| key.dec_deferred()), (Err(EINVAL), Some(1)));
        assert_eq!(key.key().count(), 1);
        key.flush();
        assert_eq!(key.key().count(), 0);
        assert!(!deferred_site());
        assert_eq!(check_sites(key.key()), (1, 0));
        assert_eq!(check_sites(UNLIMITED.key()), (1, 0));
    }

    #[test]
    fn keys_used_before_jump_label_init_are_refused() {
        // Every change of a key checks first that `jump_label_init()` has run. It has, here:
        // the check passes silently; the same check before it refuses with a warning.
        let key = FALSE_KEY.as_raw();
        assert_eq!(
            warnings_of(|| refuse_before_init(true, key)),
            (Ok(()), Some(0))
        );
        assert_eq!(
            warnings_of(|| refuse_before_init(false, key)),
            (Err(EAGAIN), Some(1))
        );
        assert_eq!(warnings_of(|| FALSE_KEY.initialized()), (Ok(()), Some(0)));
        assert_eq!(FALSE_KEY.count(), 0);
        assert!(!false_unlikely());
        assert_eq!(check_sites(&FALSE_KEY), (2, 0));
    }

    /// Runs `f` with `cpus_read_lock()` held.
    fn cpus_locked<T>(f: impl FnOnce() -> T) -> T {
        let _hotplug = crate::cpu::CpusReadGuard::lock();
        f()
    }

    #[test]
    fn cpuslocked_variants_flip_under_the_hotplug_lock() {
        let enable = || {
            // SAFETY: Run by `cpus_locked()`, which holds `cpus_read_lock()`.
            unsafe { FALSE_KEY.enable_cpuslocked() }
        };
        let disable = || {
            // SAFETY: Run by `cpus_locked()`, which holds `cpus_read_lock()`.
            unsafe { FALSE_KEY.disable_cpuslocked() }
        };
        let inc = || {
            // SAFETY: Run by `cpus_locked()`, which holds `cpus_read_lock()`.
            unsafe { FALSE_KEY.inc_cpuslocked() }
        };
        let dec = || {
            // SAFETY: Run by `cpus_locked()`, which holds `cpus_read_lock()`.
            unsafe { FALSE_KEY.dec_cpuslocked() }
        };
        assert_eq!(cpus_locked(enable), Ok(()));
        assert!(false_unlikely() && false_likely());
        assert_eq!(check_sites(&FALSE_KEY), (2, 0));
        assert_eq!(cpus_locked(disable), Ok(()));
        assert!(!false_unlikely() && !false_likely());
        assert_eq!(check_sites(&FALSE_KEY), (2, 0));
        assert_eq!(cpus_locked(inc), Ok(()));
        assert_eq!(FALSE_KEY.count(), 1);
        assert!(false_unlikely());
        cpus_locked(dec);
        assert_eq!(FALSE_KEY.count(), 0);
        assert!(!false_unlikely());
        assert_eq!(check_sites(&FALSE_KEY), (2, 0));
    }

    #[test]
    fn keys_and_sites_follow_config_options() {
        // The key's initial value is the option's; the site is the option's kind, and one.
        assert!(MAYBE_SET.is_enabled());
        assert!(!MAYBE_UNSET.is_enabled());
        // One site each, its branch bit set for a likely site: (sites, likely sites).
        let (mut set, mut unset) = ((0, 0), (0, 0));
        let count = |n: &mut (usize, usize), site: &Site| {
            n.0 += 1;
            n.1 += usize::from(site.branch());
        };
        assert_eq!(MAYBE_SET.for_each_site(|s| count(&mut set, s)), Ok(()));
        assert_eq!(MAYBE_UNSET.for_each_site(|s| count(&mut unset, s)), Ok(()));
        assert_eq!((set, unset), ((1, 1), (1, 0)));
        assert_eq!(check_sites(&MAYBE_SET), (1, 0));
        assert_eq!(check_sites(&MAYBE_UNSET), (1, 0));
        // Both follow flips.
        assert!(maybe_set() && !maybe_unset());
        assert_eq!(MAYBE_SET.disable(), Ok(()));
        assert_eq!(MAYBE_UNSET.enable(), Ok(()));
        assert!(!maybe_set() && maybe_unset());
        assert_eq!(check_sites(&MAYBE_SET), (1, 0));
        assert_eq!(check_sites(&MAYBE_UNSET), (1, 0));
        assert_eq!(MAYBE_SET.enable(), Ok(()));
        assert_eq!(MAYBE_UNSET.disable(), Ok(()));
        assert!(maybe_set() && !maybe_unset());
    }

    #[test]
    fn false_key_direction() {
        assert!(!FALSE_KEY.is_enabled());
        assert_eq!(FALSE_KEY.count(), 0);
        assert!(!false_likely());
        assert!(!false_unlikely());

        assert_eq!(FALSE_KEY.enable(), Ok(()));
        assert!(FALSE_KEY.is_enabled());
        assert!(false_likely());
        assert!(false_unlikely());

        assert_eq!(FALSE_KEY.disable(), Ok(()));
        assert!(!FALSE_KEY.is_enabled());
        assert!(!false_likely());
        assert!(!false_unlikely());
    }

    #[test]
    fn true_key_direction() {
        assert!(TRUE_KEY.is_enabled());
        assert_eq!(TRUE_KEY.count(), 1);
        assert!(true_likely());
        assert!(true_unlikely());

        assert_eq!(TRUE_KEY.disable(), Ok(()));
        assert!(!TRUE_KEY.is_enabled());
        assert!(!true_likely());
        assert!(!true_unlikely());

        assert_eq!(TRUE_KEY.enable(), Ok(()));
        assert!(TRUE_KEY.is_enabled());
        assert!(true_likely());
        assert!(true_unlikely());
    }

    #[test]
    fn site_bytes_follow_key() {
        // One likely and one unlikely site each; the likely site jumps while the false key is
        // disabled, the unlikely one while it is enabled.
        for _ in 0..4 {
            assert_eq!(check_sites(&FALSE_KEY), (2, 0));
            assert_eq!(check_sites(&TRUE_KEY), (2, 0));
            assert_eq!(FALSE_KEY.enable(), Ok(()));
            assert_eq!(TRUE_KEY.disable(), Ok(()));
            assert_eq!(check_sites(&FALSE_KEY), (2, 0));
            assert_eq!(check_sites(&TRUE_KEY), (2, 0));
            assert_eq!(FALSE_KEY.disable(), Ok(()));
            assert_eq!(TRUE_KEY.enable(), Ok(()));
        }

        let mut kinds = [0usize; 2];
        let ret = FALSE_KEY.for_each_site(|site| {
            kinds[usize::from(site.branch())] += 1;
            if site.decode() == x86::Decoded::Jmp(site.target()) {
                kinds[0] += 10;
            }
        });
        assert!(ret.is_ok());
        // One unlikely (branch 0) NOP and one likely (branch 1) site, which is the JMP.
        assert_eq!(kinds, [11, 1]);
    }

    #[test]
    fn false_key_refcount() {
        assert!(FALSE_KEY.inc().is_ok());
        assert!(FALSE_KEY.inc().is_ok());
        assert_eq!(FALSE_KEY.count(), 2);
        FALSE_KEY.dec();
        assert!(FALSE_KEY.is_enabled());
        assert!(false_unlikely());
        assert_eq!(check_sites(&FALSE_KEY), (2, 0));
        FALSE_KEY.dec();
        assert!(!FALSE_KEY.is_enabled());
        assert!(!false_unlikely());
        assert_eq!(check_sites(&FALSE_KEY), (2, 0));
    }

    #[test]
    fn true_key_refcount() {
        // A true key starts with one reference: one more keeps it enabled after one drop.
        assert!(TRUE_KEY.inc().is_ok());
        assert_eq!(TRUE_KEY.count(), 2);
        TRUE_KEY.dec();
        assert!(TRUE_KEY.is_enabled());
        assert!(true_likely());
        // Dropping the initial reference disables it.
        TRUE_KEY.dec();
        assert!(!TRUE_KEY.is_enabled());
        assert!(!true_likely());
        assert_eq!(check_sites(&TRUE_KEY), (2, 0));
        assert!(TRUE_KEY.inc().is_ok());
        assert!(TRUE_KEY.is_enabled());
        assert!(true_unlikely());
        assert_eq!(check_sites(&TRUE_KEY), (2, 0));
    }

    #[test]
    fn dec_below_zero_changes_nothing() {
        assert_eq!(FALSE_KEY.count(), 0);
        // Warns, as C does.
        let warnings = crate::kunit::ExpectedWarnings::new();
        FALSE_KEY.dec();
        assert_eq!(
            warnings.as_ref().map(crate::kunit::ExpectedWarnings::count),
            Some(1)
        );
        drop(warnings);
        assert_eq!(FALSE_KEY.count(), 0);
        assert!(!false_unlikely());
        assert_eq!(check_sites(&FALSE_KEY), (2, 0));
        // The key still counts from zero.
        assert!(FALSE_KEY.inc().is_ok());
        assert!(false_unlikely());
        FALSE_KEY.dec();
        assert!(!false_unlikely());
    }

    #[test]
    fn reference_guard() {
        {
            let first = FALSE_KEY.get();
            assert!(first.is_ok());
            let second = FALSE_KEY.get();
            assert!(second.is_ok());
            assert_eq!(FALSE_KEY.count(), 2);
            drop(first);
            assert!(false_likely());
        }
        assert_eq!(FALSE_KEY.count(), 0);
        assert!(!false_likely());
    }

    #[test]
    fn c_key_direction() {
        let (f, t) = (c_false(), c_true());
        assert!(!f.is_enabled());
        assert!(t.is_enabled());
        assert_eq!(c_sites_false(), [false, false]);
        assert_eq!(c_sites_true(), [true, true]);
        assert!(!c_false_likely() && !c_false_unlikely());
        assert!(c_true_likely() && c_true_unlikely());

        assert_eq!(f.enable(), Ok(()));
        assert_eq!(t.disable(), Ok(()));
        assert_eq!(c_sites_false(), [true, true]);
        assert_eq!(c_sites_true(), [false, false]);
        assert!(c_false_likely() && c_false_unlikely());
        assert!(!c_true_likely() && !c_true_unlikely());

        assert_eq!(f.disable(), Ok(()));
        assert_eq!(t.enable(), Ok(()));
        assert_eq!(c_sites_false(), [false, false]);
        assert_eq!(c_sites_true(), [true, true]);
    }

    #[test]
    fn c_key_site_bytes() {
        let (f, t) = (c_false(), c_true());
        // Two C sites and two Rust sites on each key.
        for _ in 0..4 {
            assert_eq!(check_sites(f), (4, 0));
            assert_eq!(check_sites(t), (4, 0));
            assert_eq!(f.enable(), Ok(()));
            assert_eq!(t.disable(), Ok(()));
            assert_eq!(check_sites(f), (4, 0));
            assert_eq!(check_sites(t), (4, 0));
            assert_eq!(f.disable(), Ok(()));
            assert_eq!(t.enable(), Ok(()));
        }
    }

    #[test]
    fn c_key_refcount() {
        let (f, t) = (c_false(), c_true());
        assert!(f.inc().is_ok());
        assert!(f.inc().is_ok());
        f.dec();
        assert_eq!(c_sites_false(), [true, true]);
        f.dec();
        assert_eq!(c_sites_false(), [false, false]);
        assert_eq!(f.count(), 0);

        assert_eq!(t.count(), 1);
        t.dec();
        assert_eq!(c_sites_true(), [false, false]);
        assert!(t.inc().is_ok());
        assert_eq!(c_sites_true(), [true, true]);
        assert_eq!(check_sites(t), (4, 0));
    }
}

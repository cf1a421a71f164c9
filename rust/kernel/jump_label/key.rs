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
    /// With `CONFIG_TEXT_POKE_RS`, fails with `EINVAL`, with a warning, the key unchanged and
    /// nothing written, if a site of the key, in the kernel image or in any module, does not
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

    #[cfg(CONFIG_TEXT_POKE_RS)]
    fn set(&self, enable: bool) -> Result {
        might_sleep();
        self.initialized()?;
        // SAFETY: By the type invariant `self.as_raw()` is a valid key; the caller may sleep
        // and, being allowed to flip keys, holds none of the locks the commit takes.
        unsafe { set_key(self.as_raw(), enable, false) }
    }

    #[cfg(not(CONFIG_TEXT_POKE_RS))]
    fn set(&self, enable: bool) -> Result {
        might_sleep();
        self.initialized()?;
        // SAFETY: By the type invariant `self.as_raw()` is a valid key; the caller may sleep.
        unsafe {
            if enable {
                bindings::static_key_enable(self.as_raw())
            } else {
                bindings::static_key_disable(self.as_raw())
            }
        };
        Ok(())
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
    #[cfg(CONFIG_TEXT_POKE_RS)]
    unsafe fn set_cpuslocked(&self, enable: bool) -> Result {
        might_sleep();
        self.initialized()?;
        // SAFETY: By the type invariant `self.as_raw()` is a valid key; the caller may sleep and
        // holds `cpus_read_lock()`.
        unsafe { set_key(self.as_raw(), enable, true) }
    }

    /// # Safety
    ///
    /// The caller holds `cpus_read_lock()`.
    #[cfg(not(CONFIG_TEXT_POKE_RS))]
    unsafe fn set_cpuslocked(&self, enable: bool) -> Result {
        might_sleep();
        self.initialized()?;
        // SAFETY: By the type invariant `self.as_raw()` is a valid key; the caller may sleep and
        // holds `cpus_read_lock()`.
        unsafe {
            if enable {
                bindings::static_key_enable_cpuslocked(self.as_raw())
            } else {
                bindings::static_key_disable_cpuslocked(self.as_raw())
            }
        };
        Ok(())
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

/// Changes to several keys, made together, with their sites patched as one batch.
///
/// A transaction records which keys to enable and disable; nothing changes until
/// [`commit`](Self::commit), which changes every key's value and its sites together: three sync
/// rounds in all with `text_poke=rust`, where changing the keys one by one takes three each.
/// Until the commit returns, every key keeps its value and its text, and only the keys of the
/// transaction wait for the batch: whatever else the caller changes meanwhile takes effect as
/// it returns. Dropping a transaction without committing it changes nothing.
///
/// The commit checks every site of every key first: if one is corrupted, no key changes.
/// A key may be named once per transaction. With `text_poke=c` or `serial` the commit changes
/// the same keys, patching them one by one.
///
/// # Examples
///
/// ```
/// use kernel::jump_label::{StaticKeyFalse, Transaction};
///
/// static A: StaticKeyFalse = StaticKeyFalse::new();
/// static B: StaticKeyFalse = StaticKeyFalse::new();
///
/// let mut txn = Transaction::new();
/// txn.enable(&A)?;
/// txn.enable(&B)?;
/// assert!(!A.is_enabled());
/// txn.commit()?;
/// assert!(A.is_enabled() && B.is_enabled());
/// # A.disable()?;
/// # B.disable()?;
/// # Ok::<(), Error>(())
/// ```
///
/// A key of a module keeps its module loaded until the transaction is committed or dropped
/// (`rmmod` fails meanwhile): the commit never reaches a key whose module went away.
///
/// # Invariants
///
/// `pinned[i]` is the module that holds `claims[i].key`, of which the transaction holds a
/// reference, or null for a key of the kernel image.
#[cfg(CONFIG_TEXT_POKE_RS)]
#[must_use = "a transaction changes nothing until it is committed"]
pub struct Transaction {
    claims: crate::alloc::KVec<bindings::text_poke_rs_claim>,
    pinned: crate::alloc::KVec<*mut bindings::module>,
}

// SAFETY: A transaction only holds the addresses of keys, which are `Sync`, and references on
// modules, which any thread may drop.
#[cfg(CONFIG_TEXT_POKE_RS)]
unsafe impl Send for Transaction {}

#[cfg(CONFIG_TEXT_POKE_RS)]
impl Transaction {
    /// An empty transaction.
    pub fn new() -> Self {
        Self {
            claims: crate::alloc::KVec::new(),
            pinned: crate::alloc::KVec::new(),
        }
    }

    /// Records that `key` is to take the value `enable`; fails with `EBUSY` if the key already
    /// is in the transaction, and with `ENODEV` if it is a key of a module going away.
    fn claim(&mut self, key: *mut bindings::static_key, enable: bool) -> Result {
        if self.claims.iter().any(|c| c.key == key) {
            return Err(EBUSY);
        }
        let flags = crate::alloc::flags::GFP_KERNEL;
        self.claims.reserve(1, flags)?;
        self.pinned.reserve(1, flags)?;
        let module = pin_owner(key.addr())?;
        // INVARIANT: Both vectors had room: the claim and its module are pushed together.
        let _ = self.pinned.push_within_capacity(module);
        let _ = self
            .claims
            .push_within_capacity(bindings::text_poke_rs_claim {
                key,
                enable,
                flip: false,
            });
        Ok(())
    }

    /// Enables `key` at the commit.
    pub fn enable<const INITIAL: bool>(&mut self, key: &'static StaticKey<INITIAL>) -> Result {
        key.initialized()?;
        self.claim(key.as_raw(), true)
    }

    /// Disables `key` at the commit.
    pub fn disable<const INITIAL: bool>(&mut self, key: &'static StaticKey<INITIAL>) -> Result {
        key.initialized()?;
        self.claim(key.as_raw(), false)
    }

    /// Changes every key of the transaction and patches their sites as one batch.
    ///
    /// Fails with `EINVAL`, with a warning, no key changed and nothing written, if a site of
    /// one of the keys, in the kernel image or in any module, does not hold what its key's value
    /// put there; likewise with `ENOMEM` if the batch cannot make room for the keys' sites, and
    /// with `EFAULT` if a page of their text cannot be mapped, and with `EIO` if a write does
    /// not land (every site put back). A key already at the
    /// value asked for is left as it is, as [`StaticKey::enable`] leaves it.
    ///
    /// Takes `cpus_read_lock()`, `jump_label_mutex` and `text_mutex`: may sleep.
    pub fn commit(mut self) -> Result {
        might_sleep();
        // SAFETY: The claims name valid keys (they are `'static` keys), each once; the caller
        // may sleep and holds none of the locks the commit takes.
        crate::error::to_result(unsafe {
            bindings::jump_label_rs_commit(self.claims.as_mut_ptr(), self.claims.len())
        })
    }
}

#[cfg(CONFIG_TEXT_POKE_RS)]
impl Default for Transaction {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(CONFIG_TEXT_POKE_RS)]
impl Drop for Transaction {
    fn drop(&mut self) {
        for &module in self.pinned.iter() {
            // The type invariant says the transaction holds the reference `pin_owner()` took.
            unpin_owner(module);
        }
    }
}

/// The module whose data holds `addr`, with a reference taken on it, or null for the kernel
/// image; `ENODEV` for a module going away, which takes no new references.
///
/// Not generic, so that the module lookup, which modules cannot call, stays in the kernel.
#[cfg(CONFIG_TEXT_POKE_RS)]
#[inline(never)]
fn pin_owner(addr: usize) -> Result<*mut bindings::module> {
    #[cfg(CONFIG_MODULE_UNLOAD)]
    {
        with_owner(addr, |module| {
            // SAFETY: `with_owner()` keeps a module it found valid while this runs;
            // `try_module_get()` fails for one that is going away.
            if module.is_null() || unsafe { bindings::try_module_get(module) } {
                Ok(module)
            } else {
                Err(ENODEV)
            }
        })
    }
    // Without module unloading a module never goes away: no reference is needed.
    #[cfg(not(CONFIG_MODULE_UNLOAD))]
    {
        let _ = addr;
        Ok(core::ptr::null_mut())
    }
}

/// Drops the reference [`pin_owner`] took, if any.
#[cfg(CONFIG_TEXT_POKE_RS)]
fn unpin_owner(module: *mut bindings::module) {
    #[cfg(CONFIG_MODULE_UNLOAD)]
    if !module.is_null() {
        // SAFETY: `module` was pinned by `pin_owner()`, whose reference this drops.
        unsafe { bindings::module_put(module) };
    }
    #[cfg(not(CONFIG_MODULE_UNLOAD))]
    let _ = module;
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

/// A static key that may change only while the kernel boots: `DEFINE_STATIC_KEY_FALSE_RO()` and
/// `DEFINE_STATIC_KEY_TRUE_RO()`.
///
/// Define one with [`define_static_key_ro!`](crate::define_static_key_ro), which places it in
/// `.data..ro_after_init`, as C does. Once that section is about to become read-only, every
/// change is refused with `EPERM` and a warning, where a C key would fault: in the kernel image,
/// once the kernel starts to free its init memory; in a module, once the module's init has
/// returned (while it runs, the key may change). Reading it and branching on it work as for any
/// key. Text-poke deferral counts on such keys never changing after boot
/// (`scripts/danger-zone.py`).
#[repr(transparent)]
pub struct StaticKeyRo<const INITIAL: bool>(StaticKey<INITIAL>);

impl<const INITIAL: bool> private::Sealed for StaticKeyRo<INITIAL> {}
impl<const INITIAL: bool> KeyType for StaticKeyRo<INITIAL> {
    const INITIAL: bool = INITIAL;
}

impl<const INITIAL: bool> StaticKeyRo<INITIAL> {
    /// Creates a key, for a `static` item in `.data..ro_after_init` (see
    /// [`define_static_key_ro!`](crate::define_static_key_ro)).
    pub const fn new() -> Self {
        Self(StaticKey::new())
    }

    /// Returns the C `struct static_key`.
    #[inline]
    pub fn as_raw(&self) -> *mut bindings::static_key {
        self.0.as_raw()
    }

    /// The key's reference count: `static_key_count()`.
    pub fn count(&self) -> i32 {
        self.0.count()
    }

    /// Whether the key is enabled: `static_key_enabled()`.
    pub fn is_enabled(&self) -> bool {
        self.0.is_enabled()
    }

    /// Checks every site against the key's value; see [`StaticKey::check_sites`].
    pub fn check_sites(&self) -> Result<(usize, usize)> {
        self.0.check_sites()
    }

    /// `Ok` while the key may change; `EPERM` with a warning once its section is about to
    /// become read-only.
    fn writable(&self) -> Result {
        if ro_key_writable(self.as_raw().addr()) {
            return Ok(());
        }
        crate::pr_warn!("static key {:p} is read-only after init\n", self.as_raw());
        crate::warn_on!(true);
        Err(EPERM)
    }

    /// [`StaticKey::enable`], while the kernel boots.
    pub fn enable(&self) -> Result {
        self.writable()?;
        self.0.enable()
    }

    /// [`StaticKey::disable`], while the kernel boots.
    pub fn disable(&self) -> Result {
        self.writable()?;
        self.0.disable()
    }

    /// [`StaticKey::inc`], while the kernel boots.
    pub fn inc(&self) -> Result {
        self.writable()?;
        self.0.inc()
    }

    /// [`StaticKey::dec`], while the kernel boots; afterwards it warns and changes nothing.
    pub fn dec(&self) {
        if self.writable().is_ok() {
            self.0.dec();
        }
    }
}

/// Whether a read-only-after-init key at `addr` may still change: in a module, until the module's
/// init has returned (its state is no longer `MODULE_STATE_COMING`, and its
/// `.data..ro_after_init` is made read-only next); in the kernel image, until the kernel starts
/// to free its init memory.
///
/// Not generic, so that the module lookup, which modules cannot call, stays in the kernel.
#[inline(never)]
fn ro_key_writable(addr: usize) -> bool {
    #[cfg(CONFIG_MODULES)]
    {
        let coming = with_owner(addr, |module| {
            (!module.is_null()).then(|| {
                // SAFETY: `with_owner()` keeps a module it found valid while this runs. Its
                // `state` is an aligned `enum` the loader changes with `WRITE_ONCE()` while the
                // module is listed; this volatile read is `READ_ONCE()`: no data race.
                let state = unsafe { core::ptr::read_volatile(&raw const (*module).state) };
                state == bindings::module_state_MODULE_STATE_COMING
            })
        });
        if let Some(coming) = coming {
            return coming;
        }
    }
    #[cfg(not(CONFIG_MODULES))]
    let _ = addr;
    // SAFETY: `system_state` is an aligned `enum` that lives as long as the kernel. The init task
    // stores `SYSTEM_FREEING_INITMEM` and `SYSTEM_RUNNING` with `WRITE_ONCE()`, and this load is
    // marked: no data race with the boot. (Stores before those are made before any other task
    // can get here; the suspend and reboot paths' later stores are upstream's plain ones,
    // between values past the one compared.)
    let state = unsafe { Atomic::from_ptr(&raw mut bindings::system_state) }.load(Relaxed);
    state < bindings::system_states_SYSTEM_FREEING_INITMEM
}

impl<const INITIAL: bool> Default for StaticKeyRo<INITIAL> {
    fn default() -> Self {
        Self::new()
    }
}

/// Defines a [`StaticKeyRo`]: `DEFINE_STATIC_KEY_FALSE_RO()` (`false`) or
/// `DEFINE_STATIC_KEY_TRUE_RO()` (`true`).
///
/// # Examples
///
/// ```
/// kernel::define_static_key_ro!(BOOT_CHOICE: false);
///
/// assert!(!kernel::static_branch_unlikely!(BOOT_CHOICE));
/// ```
#[macro_export]
macro_rules! define_static_key_ro {
    ($(#[$attr:meta])* $vis:vis $name:ident: $initial:literal) => {
        $(#[$attr])*
        #[link_section = ".data..ro_after_init"]
        $vis static $name: $crate::jump_label::StaticKeyRo<$initial> =
            $crate::jump_label::StaticKeyRo::new();
    };
}

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
/// `inner.work` are zero while `state` is [`Self::UNLIMITED`], and set up by
/// `jump_label_rate_limit()` once it is [`Self::LIMITED`]; only the thread that moved `state`
/// to [`Self::SETTING`] writes them.
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

/// Holds `jump_label_mutex`.
struct JumpLabelLock;

impl JumpLabelLock {
    /// Takes the mutex. The caller must be allowed to sleep (it called `might_sleep()`).
    fn new() -> Self {
        // SAFETY: Taking the jump-label mutex only needs a context that may sleep, which the
        // caller guarantees.
        unsafe { bindings::jump_label_lock() };
        Self
    }
}

impl Drop for JumpLabelLock {
    fn drop(&mut self) {
        // SAFETY: `self` exists only while the mutex is held by this thread.
        unsafe { bindings::jump_label_unlock() };
    }
}

/// Holds `text_mutex`: no batch is being applied while it is held, so no site is half
/// written.
#[cfg(CONFIG_TEXT_POKE_RS)]
struct TextLock;

#[cfg(CONFIG_TEXT_POKE_RS)]
impl TextLock {
    /// Takes the mutex. The caller must be allowed to sleep (it called `might_sleep()`).
    fn new() -> Self {
        // SAFETY: Taking `text_mutex` only needs a context that may sleep.
        unsafe { bindings::text_poke_rs_text_lock() };
        Self
    }
}

#[cfg(CONFIG_TEXT_POKE_RS)]
impl Drop for TextLock {
    fn drop(&mut self) {
        // SAFETY: `self` exists only while the mutex is held by this thread.
        unsafe { bindings::text_poke_rs_text_unlock() };
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
#[cfg(CONFIG_TEXT_POKE_RS)]
#[inline(never)]
unsafe fn set_key(key: *mut bindings::static_key, enable: bool, cpuslocked: bool) -> Result {
    // SAFETY: A valid key, in a context the update may run in, as the caller guarantees.
    crate::error::to_result(unsafe { bindings::jump_label_rs_set(key, enable, cpuslocked) })
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
    #[cfg(CONFIG_TEXT_POKE_RS)]
    {
        // SAFETY: A valid key, in a context the update may run in, as the caller guarantees.
        crate::error::to_result(unsafe { bindings::jump_label_rs_inc(key, cpuslocked) })
    }
    #[cfg(not(CONFIG_TEXT_POKE_RS))]
    {
        // SAFETY: As above. Upstream's update cannot refuse: only an overflow takes no
        // reference.
        let taken = unsafe {
            if cpuslocked {
                bindings::static_key_slow_inc_cpuslocked(key)
            } else {
                bindings::static_key_slow_inc(key)
            }
        };
        if taken {
            Ok(())
        } else {
            Err(EOVERFLOW)
        }
    }
}

/// Calls `f` on each site of `key` in the kernel image; see [`StaticKey::for_each_site`].
///
/// Not generic, so that modules using static keys need none of the symbols it uses.
#[inline(never)]
fn walk_sites(key: *mut bindings::static_key, f: &mut dyn FnMut(&Site)) -> Result {
    let _lock = JumpLabelLock::new();
    // Other text pokes (ftrace, kprobes) write without `jump_label_mutex`: `text_mutex` keeps
    // every site whole while it is read.
    #[cfg(CONFIG_TEXT_POKE_RS)]
    let _text = TextLock::new();
    // SAFETY: `key` is a valid key, and its `entries` word is only written under
    // `jump_label_mutex`, which `_lock` holds.
    let entries = unsafe { (*key).__bindgen_anon_1.entries };
    // SAFETY: As above; `type_` is the same word as `entries`.
    let flags = unsafe { (*key).__bindgen_anon_1.type_ };
    if flags & bindings::JUMP_TYPE_LINKED as c_ulong != 0 {
        return Err(ENOTSUPP);
    }
    let mask = bindings::JUMP_TYPE_MASK as c_ulong;
    let mut entry = entries.map_addr(|a| a & !mask);
    if entry.is_null() {
        return Ok(());
    }
    let start = (&raw mut bindings::__start___jump_table).cast::<bindings::jump_entry>();
    let stop = (&raw mut bindings::__stop___jump_table).cast::<bindings::jump_entry>();
    if entry < start || entry >= stop {
        return Err(ENOTSUPP);
    }
    while entry < stop {
        // SAFETY: `entry` is in the kernel's jump table, whose entries stay put while `_lock`
        // is held.
        let site = unsafe { Site::from_entry(entry) };
        if site.entry.key != key.addr() {
            break;
        }
        if site.size != 0 {
            f(&site);
        }
        // SAFETY: `entry < stop`, so the next entry is at most `stop`.
        entry = unsafe { entry.add(1) };
    }
    Ok(())
}

/// A `__jump_table` entry, decoded: the one decoder of jump-table entries, for the sites
/// [`StaticKey::for_each_site`] hands out and for the text-poke batch's update of a key.
///
/// An entry's fields are offsets from themselves; the key's two low bits are the entry's flags.
#[derive(Clone, Copy, Debug)]
pub struct JumpEntry {
    /// The address of the site's instruction.
    pub code: usize,
    /// The address the site jumps to when it branches.
    pub target: usize,
    /// The address of the key.
    pub key: usize,
    /// The branch bit: the site jumps when its key's value differs from it.
    pub branch: bool,
    /// The init bit: the site is in init text, freed once the kernel or its module is up.
    pub init: bool,
}

impl JumpEntry {
    /// Decodes `entry`.
    ///
    /// # Safety
    ///
    /// `entry` points to a valid jump-table entry, which does not change while it is read.
    #[inline(always)]
    pub unsafe fn read(entry: *const bindings::jump_entry) -> Self {
        // SAFETY: The caller guarantees `entry` is valid.
        let e = unsafe { &*entry };
        let rel = |field: usize, off: isize| field.wrapping_add_signed(off);
        Self {
            code: rel((&raw const e.code).addr(), e.code as isize),
            target: rel((&raw const e.target).addr(), e.target as isize),
            key: rel((&raw const e.key).addr(), e.key & !3),
            branch: e.key & 1 != 0,
            init: e.key & 2 != 0,
        }
    }
}

/// One site of a static key: a `__jump_table` entry and the instruction it patches.
///
/// Only handed out by [`StaticKey::for_each_site`], while the site cannot change or go away.
pub struct Site {
    entry: JumpEntry,
    size: usize,
}

impl Site {
    /// Reads a jump-table entry. Returns a site of size 0 for an entry whose code is no longer
    /// kernel text (freed init text).
    ///
    /// # Safety
    ///
    /// `entry` is a valid entry of the kernel's jump table, and `jump_label_mutex` is held (and
    /// `text_mutex`, with the Rust text-poke batch).
    unsafe fn from_entry(entry: *mut bindings::jump_entry) -> Self {
        // SAFETY: The caller guarantees `entry` is valid and does not change.
        let entry = unsafe { JumpEntry::read(entry) };
        let code = entry.code;
        // SAFETY: `kernel_text_address()` only looks the address up.
        let size = if unsafe { bindings::kernel_text_address(code) } == 0 {
            0
        } else {
            let mut bytes = [0u8; x86::MAX_LEN];
            // SAFETY: `code` is live kernel text, which cannot be patched while the caller's
            // locks are held; the site's jump-table entry says an instruction of at least 2
            // bytes starts there, and kernel text is followed by more text or padding, so
            // the 5 bytes read are mapped.
            unsafe { core::ptr::copy_nonoverlapping(code as *const u8, bytes.as_mut_ptr(), 5) };
            // A corrupted site has no size: it holds no instruction of its key.
            x86::site_size(&bytes).unwrap_or(x86::MAX_LEN)
        };
        Self { entry, size }
    }

    /// The address of the site's instruction.
    #[inline]
    pub fn code(&self) -> usize {
        self.entry.code
    }

    /// The address the site jumps to when it branches.
    #[inline]
    pub fn target(&self) -> usize {
        self.entry.target
    }

    /// The entry's branch bit: the site jumps when the key's value differs from it.
    #[inline]
    pub fn branch(&self) -> bool {
        self.entry.branch
    }

    /// The size of the site's instruction: 2 or 5 bytes, and 5 for a site that holds neither
    /// instruction a key puts there (a corrupted site).
    #[inline]
    pub fn size(&self) -> usize {
        self.size
    }

    /// Whether the site jumps when the key is `enabled`: `jump_label_type()`.
    #[inline]
    pub fn jumps_when(&self, enabled: bool) -> bool {
        x86::site_jumps(enabled, self.entry.branch)
    }

    /// The instruction the site must hold when the key is `enabled`.
    #[inline]
    pub fn expected(&self, enabled: bool) -> Option<x86::SiteInsn> {
        x86::SiteInsn::for_site(
            self.entry.code,
            self.entry.target,
            self.size,
            self.jumps_when(enabled),
        )
    }

    /// The site's current bytes and those after it, [`x86::MAX_LEN`] in all: the first
    /// [`size`](Self::size) are the site's.
    pub fn read(&self) -> [u8; x86::MAX_LEN] {
        let mut bytes = [0u8; x86::MAX_LEN];
        for (i, b) in bytes.iter_mut().enumerate() {
            // SAFETY: The byte is in a site in live kernel text (`walk_sites` skips freed init
            // text) or in the text or padding after it (see `Site::from_entry()`), which stays
            // mapped while `jump_label_mutex` is held. Nothing writes it meanwhile: a key's sites
            // are only written by flips of the key, under `jump_label_mutex`, which the walk
            // holds. (Volatile, since the text is read-only where it is read here and
            // `Atomic::from_ptr()` wants a writable object.)
            *b = unsafe { core::ptr::read_volatile((self.entry.code + i) as *const u8) };
        }
        bytes
    }

    /// Decodes the site's current instruction.
    pub fn decode(&self) -> x86::Decoded {
        x86::decode(self.entry.code, &self.read()[..self.size])
    }
}

/// Places a site on a static key for [`static_branch_likely!`](crate::static_branch_likely) and
/// [`static_branch_unlikely!`](crate::static_branch_unlikely).
///
/// Evaluates to whether the key is enabled. `$likely` tells which direction is laid out as the
/// fall-through.
#[doc(hidden)]
#[macro_export]
macro_rules! __static_key_branch {
    ($key:path, $likely:literal) => {{
        // The entry's flags: bit 0 is the branch bit, bit 1 asks objtool to turn the site's JMP
        // into a NOP because the site starts out falling through.
        const FLAGS: i32 = $crate::jump_label::site_flags(&raw const $key, $likely);
        let jumped: bool = 'site: {
            // SAFETY: The asm is one JMP to `l_yes` (or a NOP of the same size) and a
            // `__jump_table` entry naming `$key`, a static key (checked by `site_flags`). The
            // kernel only ever rewrites the instruction between that JMP and that NOP, and both
            // continue at a label of this block without touching registers, memory or the stack.
            unsafe {
                $crate::asm!(
                    include!(concat!(env!("OBJTREE"), "/rust/kernel/generated_static_key_asm.rs"));
                    l_yes = label {
                        // The jump is the unlikely direction of either kind of site: keep it
                        // out of the fall-through path.
                        ::core::hint::cold_path();
                        break 'site true;
                    },
                    symb = sym $key,
                    flags = const FLAGS,
                    // Without it, the compiler keeps the stack aligned for the asm: a PUSH and
                    // a POP on the fast path of a leaf function.
                    options(nostack),
                )
            };
            break 'site false;
        };
        if $likely {
            !jumped
        } else {
            jumped
        }
    }};
}

/// The `__jump_table` flags of a site on a key of type `K`.
///
/// See [`x86::site_flags`]; taking the key checks at compile time that it is a static key.
#[doc(hidden)]
pub const fn site_flags<K: KeyType>(_key: *const K, likely: bool) -> i32 {
    x86::site_flags(K::INITIAL, likely)
}

/// Branches on a static key, laying out the enabled direction as the fall-through.
///
/// Takes the path of a `static` [`StaticKeyFalse`] or [`StaticKeyTrue`], or of a C key's
/// binding, and evaluates to whether the key is enabled. The test itself is a NOP or a JMP that
/// the kernel patches when the key changes.
///
/// # Examples
///
/// ```
/// use kernel::jump_label::StaticKeyTrue;
///
/// static FAST_PATH: StaticKeyTrue = StaticKeyTrue::new();
///
/// let taken = kernel::static_branch_likely!(FAST_PATH);
/// assert!(taken);
/// ```
#[macro_export]
macro_rules! static_branch_likely {
    ($key:path) => {
        $crate::__static_key_branch!($key, true)
    };
}

/// The type of a static key that starts enabled if and only if a config option is set:
/// `DEFINE_STATIC_KEY_MAYBE()`.
///
/// # Examples
///
/// ```
/// use kernel::jump_label::StaticKey;
///
/// static ON_SMP: kernel::static_key_maybe!(CONFIG_SMP) = StaticKey::new();
///
/// assert_eq!(ON_SMP.is_enabled(), cfg!(CONFIG_SMP));
/// ```
#[macro_export]
macro_rules! static_key_maybe {
    ($cfg:meta) => {
        $crate::jump_label::StaticKey<{ cfg!($cfg) }>
    };
}

/// Branches on a static key, laying out as the fall-through the direction a config option
/// makes likely: [`static_branch_likely!`](crate::static_branch_likely) if it is set,
/// [`static_branch_unlikely!`](crate::static_branch_unlikely) if not (`static_branch_maybe()`).
/// Only the chosen form is compiled: the key gets one site.
///
/// # Examples
///
/// ```
/// use kernel::jump_label::StaticKey;
///
/// static ON_SMP: kernel::static_key_maybe!(CONFIG_SMP) = StaticKey::new();
///
/// assert_eq!(kernel::static_branch_maybe!(CONFIG_SMP, ON_SMP), cfg!(CONFIG_SMP));
/// ```
#[macro_export]
macro_rules! static_branch_maybe {
    ($cfg:meta, $key:path) => {{
        #[cfg($cfg)]
        let enabled = $crate::static_branch_likely!($key);
        #[cfg(not($cfg))]
        let enabled = $crate::static_branch_unlikely!($key);
        enabled
    }};
}

/// Branches on a static key, laying out the disabled direction as the fall-through.
///
/// Takes the path of a `static` [`StaticKeyFalse`] or [`StaticKeyTrue`], or of a C key's
/// binding, and evaluates to whether the key is enabled.
///
/// This is [`static_branch_unlikely!`](crate::static_branch_unlikely) with one argument.
#[doc(hidden)]
#[macro_export]
macro_rules! __static_branch_unlikely {
    ($key:path) => {
        $crate::__static_key_branch!($key, false)
    };
}

#[cfg(CONFIG_RUST_STATIC_KEY_KUNIT_TEST)]
#[macros::kunit_tests(rust_static_key)]
mod tests {
    use super::*;

    static FALSE_KEY: StaticKeyFalse = StaticKeyFalse::new();
    static TRUE_KEY: StaticKeyTrue = StaticKeyTrue::new();

    // Keys and sites defined in C, in kernel/jump_label_rs/static_key_test.c.
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
        // SAFETY: Takes the CPU hotplug lock for reading, released below; the test may sleep.
        unsafe { bindings::cpus_read_lock() };
        let ret = f();
        // SAFETY: Taken above by this task.
        unsafe { bindings::cpus_read_unlock() };
        ret
    }

    #[test]
    fn cpuslocked_variants_flip_under_the_hotplug_lock() {
        let enable = || {
            // SAFETY: Run by `cpus_locked()`, which holds `cpus_read_lock()`.
            unsafe { FALSE_KEY.enable_cpuslocked() }
        };
        let disable = || {
            // SAFETY: As above.
            unsafe { FALSE_KEY.disable_cpuslocked() }
        };
        let inc = || {
            // SAFETY: As above.
            unsafe { FALSE_KEY.inc_cpuslocked() }
        };
        let dec = || {
            // SAFETY: As above.
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

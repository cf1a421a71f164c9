// SPDX-License-Identifier: GPL-2.0

//! Static keys that may change only while the kernel boots ([`StaticKeyRo`]).

#[cfg(CONFIG_MODULES)]
use super::with_owner;
use super::{private, KeyType, StaticKey};
use crate::{
    bindings,
    error::{code::*, Result},
    sync::atomic::{Atomic, Relaxed},
};

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

// SPDX-License-Identifier: GPL-2.0

//! Static keys that may change only while the kernel boots ([`StaticKeyRo`]).

use super::{private, KeyType, StaticKey};
use crate::{
    bindings,
    error::{code::*, to_result, Result},
    task::might_sleep,
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

    /// Makes the change `op` while the key may change; `EPERM` with a warning once its section
    /// is about to become read-only.
    fn change(&self, op: bindings::static_key_ro_op) -> Result {
        might_sleep();
        self.0.initialized()?;
        ro_change(self.as_raw(), op)
    }

    /// [`StaticKey::enable`], while the kernel boots.
    pub fn enable(&self) -> Result {
        self.change(bindings::static_key_ro_op_STATIC_KEY_RO_ENABLE)
    }

    /// [`StaticKey::disable`], while the kernel boots.
    pub fn disable(&self) -> Result {
        self.change(bindings::static_key_ro_op_STATIC_KEY_RO_DISABLE)
    }

    /// [`StaticKey::inc`], while the kernel boots.
    pub fn inc(&self) -> Result {
        self.change(bindings::static_key_ro_op_STATIC_KEY_RO_INC)
    }

    /// [`StaticKey::dec`], while the kernel boots; afterwards it warns and changes nothing.
    pub fn dec(&self) {
        let _ = self.change(bindings::static_key_ro_op_STATIC_KEY_RO_DEC);
    }
}

/// Makes the change `op` of the read-only-after-init key `key` while it may change: in a module,
/// until the module's init has returned (its `.data..ro_after_init` is made read-only next); in
/// the kernel image, until the kernel starts to free its init memory. `EPERM` with a warning,
/// nothing done, afterwards. `static_key_ro_change()` decides it and makes the change, count
/// included, under `jump_label_mutex`, which both transitions to read-only wait for: the
/// decision cannot go stale while the key is written.
///
/// Not generic, so that modules using such keys need none of the symbols it uses.
#[inline(never)]
fn ro_change(key: *mut bindings::static_key, op: bindings::static_key_ro_op) -> Result {
    // SAFETY: `key` is a valid key (the type invariant of its `StaticKeyRo`); the caller may
    // sleep and, being allowed to change keys, holds none of the locks the change takes.
    let ret = to_result(unsafe { bindings::static_key_ro_change(key, op) });
    if ret == Err(EPERM) {
        crate::pr_warn!("static key {:p} is read-only after init\n", key);
        crate::warn_on!(true);
    }
    ret
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

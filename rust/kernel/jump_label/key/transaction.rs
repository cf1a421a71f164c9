// SPDX-License-Identifier: GPL-2.0

//! Changes to several static keys, made together as one batch ([`Transaction`]).

#[cfg(CONFIG_MODULE_UNLOAD)]
use super::with_owner;
use super::StaticKey;
use crate::{
    bindings,
    error::{code::*, Result},
    task::might_sleep,
};

/// Changes to several keys, made together, with their sites patched as one batch.
///
/// A transaction records which keys to enable and disable; nothing changes until
/// [`commit`](Self::commit), which changes every key's value and its sites together, through
/// `static_keys_update()`: where the architecture patches a batch of keys at once (x86's Rust
/// text-poke batch), three sync rounds in all, where changing the keys one by one takes three
/// each. Until the commit returns, every key keeps its value and its text, and only the keys of the
/// transaction wait for the batch: whatever else the caller changes meanwhile takes effect as
/// it returns. Dropping a transaction without committing it changes nothing.
///
/// The commit checks every site of every key first: if one is corrupted, no key changes.
/// A key may be named once per transaction. Where the update patches one key at a time, the
/// commit changes the same keys, patching them one by one.
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
#[must_use = "a transaction changes nothing until it is committed"]
pub struct Transaction {
    claims: crate::alloc::KVec<bindings::static_key_claim>,
    pinned: crate::alloc::KVec<*mut bindings::module>,
}

// SAFETY: A transaction only holds the addresses of keys, which are `Sync`, and references on
// modules, which any thread may drop.
unsafe impl Send for Transaction {}

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
            .push_within_capacity(bindings::static_key_claim {
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
            bindings::static_keys_update(self.claims.as_mut_ptr(), self.claims.len())
        })
    }
}

impl Default for Transaction {
    fn default() -> Self {
        Self::new()
    }
}

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
fn unpin_owner(module: *mut bindings::module) {
    #[cfg(CONFIG_MODULE_UNLOAD)]
    if !module.is_null() {
        // SAFETY: `module` was pinned by `pin_owner()`, whose reference this drops.
        unsafe { bindings::module_put(module) };
    }
    #[cfg(not(CONFIG_MODULE_UNLOAD))]
    let _ = module;
}

// SPDX-License-Identifier: GPL-2.0

//! The sites themselves: the branch macros and what they expand to.

use super::{x86, KeyType};

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
/// [`StaticKeyFalse`]: crate::jump_label::StaticKeyFalse
/// [`StaticKeyTrue`]: crate::jump_label::StaticKeyTrue
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
///
/// [`StaticKeyFalse`]: crate::jump_label::StaticKeyFalse
/// [`StaticKeyTrue`]: crate::jump_label::StaticKeyTrue
#[doc(hidden)]
#[macro_export]
macro_rules! __static_branch_unlikely {
    ($key:path) => {
        $crate::__static_key_branch!($key, false)
    };
}

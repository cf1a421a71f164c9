// SPDX-License-Identifier: GPL-2.0

//! A module that takes the mutexes behind static keys from safe code: it must not build.
//!
//! Upstream exports neither `jump_label_mutex` nor `text_mutex`; a module that held `text_mutex`
//! while it flipped a key would deadlock against every other flip, and one that forgot a guard
//! would wedge them all. `scripts/check.sh` builds this module against the kernel and expects
//! one `E0133` (a call to an `unsafe` function outside an `unsafe` block) for each `lock()`,
//! and no other error; with each call in an `unsafe` block, the module must build.

use kernel::prelude::*;

module! {
    type: StaticKeyLocks,
    name: "static_key_locks",
    authors: ["The jump_label_rs authors"],
    description: "Takes the static-key mutexes from safe code",
    license: "GPL",
}

struct StaticKeyLocks;

impl kernel::Module for StaticKeyLocks {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let _jump_label = kernel::jump_label::JumpLabelLock::lock();
        let _text = kernel::jump_label::TextLock::lock();
        Ok(StaticKeyLocks)
    }
}

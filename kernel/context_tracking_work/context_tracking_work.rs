// SPDX-License-Identifier: GPL-2.0

//! context_tracking_work: the model of the work word's protocol, and the KUnit suite that checks
//! the kernel's C against it.
//!
//! A `nohz_full` CPU running a user-space task should not be interrupted for work that only
//! matters once it runs kernel code again: the `sync_core()` of a text-poke sync round, the
//! kernel TLB flush of vmalloc's lazy purge; nor should an idle CPU be woken for it. A sender
//! sets a bit in the CPU's work word instead, and the CPU runs the work when it next enters the
//! kernel or leaves idle. The word, its senders and its entry side are C (`word.c`): the entry
//! side runs before instrumentation is allowed, and the senders serve C callers (the x86 text-poke
//! batch, kernel TLB flushes). [`ct_work`] is the protocol as pure functions on a word: the host
//! tests check it under every interleaving, and the KUnit suite checks each function of `word.c`
//! against the function of [`ct_work`] it implements, from every value a word can hold.
//!
//! C header:
//! [`include/linux/context_tracking_work.h`](srctree/include/linux/context_tracking_work.h).

pub mod ct_work;

use ct_work::{Value, Work};
use kernel::bindings;

/// The prefix of this crate's messages.
const __LOG_PREFIX: &[u8] = b"ct_work\0";

const _: () = assert!(Work::SYNC_CORE.bits() == bindings::ct_work_kind_CT_WORK_SYNC_CORE);
const _: () = assert!(Work::TLB_FLUSH.bits() == bindings::ct_work_kind_CT_WORK_TLB_FLUSH);
const _: () = assert!(Work::IDLE.bits() == bindings::ct_work_kind_CT_WORK_IN_IDLE);
const _: () = assert!(Value::USER.raw() == bindings::CT_WORK_USER);
const _: () = assert!(Value::USER_OFF.raw() == bindings::CT_WORK_OFF);
const _: () = assert!(Value::IDLE.raw() == bindings::CT_WORK_IDLE);
const _: () = assert!(ct_work::WORK_SHIFT == bindings::CT_WORK_WORK_SHIFT);
const _: () = assert!(Value::KERNEL_TAKING.raw() == bindings::CT_WORK_TAKING);
const _: () = assert!(
    ct_work::LEVEL_BITS == bindings::CT_WORK_LEVEL_BITS
        && ct_work::LEVEL_USER == bindings::CT_WORK_LEVEL_USER
        && ct_work::LEVEL_TOOK == bindings::CT_WORK_LEVEL_TOOK
        && ct_work::LEVEL_IDLE == bindings::CT_WORK_LEVEL_IDLE
);

#[cfg(CONFIG_CONTEXT_TRACKING_WORK_KUNIT_TEST)]
#[path = "tests/kunit.rs"]
mod kunit;

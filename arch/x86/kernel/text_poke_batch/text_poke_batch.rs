// SPDX-License-Identifier: GPL-2.0

//! text_poke_batch: the x86 text-poke batch in Rust.
//!
//! With `CONFIG_TEXT_POKE_BATCH_RUST`, `smp_text_poke_batch_add()`, `smp_text_poke_batch_finish()`,
//! `smp_text_poke_single()` and the INT3 handler of every x86 user (jump labels, static calls,
//! ftrace, kprobes, alternatives) go through [`batch`]. A kernel built for measurement
//! (`CONFIG_TEXT_POKE_BATCH_MEASURE`) also has upstream's batch, booted with `text_poke_batch=c`,
//! and `text_poke_batch=serial`, which applies every site as a batch of its own. The generic
//! jump-label update of a key goes through [`jump_label`], which checks every site before it
//! queues any. With `CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE`, [`defer`] lets isolated CPUs in
//! user space take a batch's syncs at their next kernel entry instead of as IPIs, through context
//! tracking's work word (`kernel/context_tracking_work/`).
//!
//! C header: [`asm/text_poke_batch.h`](srctree/arch/x86/include/asm/text_poke_batch.h).

/// The x86 encodings, shared with the Rust static keys: the one place they live.
pub(crate) use kernel::jump_label::x86;

pub mod batch;
#[cfg(CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE)]
pub mod defer;
pub mod jump_label;
mod measure;
pub mod poke;

/// The prefix of this crate's messages.
const __LOG_PREFIX: &[u8] = b"text_poke_batch\0";

#[cfg(CONFIG_TEXT_POKE_BATCH_KUNIT_TEST)]
#[path = "tests/kunit.rs"]
mod kunit;

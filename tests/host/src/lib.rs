// SPDX-License-Identifier: GPL-2.0

//! The pure parts of the kernel code, built for the host from the overlay's own files.

#[path = "../../../rust/kernel/jump_label/x86.rs"]
pub mod x86;

#[path = "../../../arch/x86/kernel/text_poke_batch/poke.rs"]
pub mod poke;

#[path = "../../../kernel/context_tracking_work/ct_work.rs"]
pub mod ct_work;

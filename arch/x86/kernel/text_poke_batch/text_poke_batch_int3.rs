// SPDX-License-Identifier: GPL-2.0

//! The Rust text-poke batch's INT3 handler: the part of it that runs in `noinstr` code.
//!
//! A crate of its own, so that the kernel builds it without what `noinstr` code may not have:
//! no KASAN or KCOV instrumentation, no debug assertions, no overflow checks (the `Makefile`
//! says so), while the batch, `text_poke_batch`, is built with all of them where the
//! configuration asks. It holds [`text_poke_batch_emulate()`] and, from `int3.rs`, the batch's own
//! file, the lookup it uses: everything here is inlined into the one function, which objtool
//! checks calls nothing outside `.noinstr.text`.
//!
//! C header: [`asm/text_poke_batch.h`](srctree/arch/x86/include/asm/text_poke_batch.h).

use core::ptr;
use kernel::{
    bindings,
    jump_label::text_base, //
};

/// The x86 opcodes, as the batch has them.
pub(crate) use kernel::jump_label::x86;

// This crate reads a site's address and emulation only: the fields and flags the batch makes a
// site with are not used here.
#[allow(dead_code)]
pub mod int3;

use int3::{Emulation, Index, PokeLoc};

/// The INT3 handler's work: finds the site the INT3 at `regs->ip - 1` belongs to in the
/// published vector, `nr` sites at `sites`, by binary search (narrowed by `index` if it is not
/// null), and emulates the instruction
/// being written there, as if it had run: a CALL, JMP, RET or Jcc, or a NOP as a JMP to the
/// next instruction. Returns false, changing nothing, for an address that is not in the vector
/// and for an INT3 written on purpose, which are someone else's to handle.
///
/// Called from `noinstr` code with a reference on the vector held: it lives in `.noinstr.text`,
/// and everything it uses is inlined; nothing panics or calls out.
///
/// # Safety
///
/// The caller holds a reference taken with `raw_atomic_inc_not_zero()` on this CPU's count;
/// `sites`, `nr` and `index` are `text_poke_batch_published`'s, read after it: null, or `nr`
/// sites the batch keeps live and unchanged until every reference is dropped, and null or an
/// [`Index`] built for them, kept as long. `regs` are the registers
/// of a kernel-mode INT3 trap, saved by the entry code with the gap below the interrupted
/// stack that lets a CALL be emulated (see `int3_emulate_push()`).
#[no_mangle]
#[link_section = ".noinstr.text"]
pub unsafe extern "C" fn text_poke_batch_emulate(
    regs: *mut bindings::pt_regs,
    sites: *const PokeLoc,
    nr: usize,
    index: *const Index,
) -> bool {
    if sites.is_null() {
        return false;
    }
    // SAFETY: The caller guarantees that a non-null `sites` points to `nr` live sites that do
    // not change while we run.
    let sites = unsafe { core::slice::from_raw_parts(sites, nr) };
    // SAFETY: The caller guarantees that a non-null `index` is an `Index` of `sites` that does
    // not change while we run.
    let index = unsafe { index.as_ref() };
    // SAFETY: The caller guarantees `regs` are valid and ours to change until we return.
    let regs = unsafe { &mut *regs };
    let ip = regs.ip.wrapping_sub(1);
    let Some(loc) = int3::lookup(sites, index, text_base(), ip) else {
        return false;
    };
    match loc.emulation(text_base()) {
        Emulation::Int3 => return false,
        Emulation::Ret => {
            let sp = regs.sp;
            // SAFETY: A RET was about to run: the return address is at the top of the
            // interrupted kernel stack.
            regs.ip = unsafe { ptr::read(sp as *const usize) };
            regs.sp = sp.wrapping_add(8);
        }
        Emulation::Call { ret, target } => {
            let sp = regs.sp.wrapping_sub(8);
            // SAFETY: The INT3 entry leaves a gap below the interrupted stack, which the caller
            // guarantees, so the word below it is free for the return address.
            unsafe { ptr::write(sp as *mut usize, ret) };
            regs.sp = sp;
            regs.ip = target;
        }
        Emulation::Jmp(target) => regs.ip = target,
        Emulation::Jcc { cc, taken, next } => {
            regs.ip = if int3::condition(regs.flags, cc) {
                taken
            } else {
                next
            };
        }
    }
    true
}

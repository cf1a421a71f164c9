/* SPDX-License-Identifier: GPL-2.0 */
/*
 * x86's part of the context-tracking work word (<linux/ct_work_rs.h>).
 */
#ifndef _ASM_X86_CT_WORK_RS_WORD_H
#define _ASM_X86_CT_WORK_RS_WORD_H

#include <linux/percpu.h>
#include <asm/alternative.h>

DECLARE_PER_CPU_ALIGNED(u32, ct_work_rs_words);

/*
 * ct_work_rs_leave() (<linux/ct_work_rs.h>): this CPU's word from @from to
 * kernel if it holds @from, %gs-relative, where the generic one computes
 * the word's address first; locked, as senders write the word from other
 * CPUs.
 */
static __always_inline bool arch_ct_work_rs_leave(u32 from)
{
	bool ok;

	asm volatile(LOCK_PREFIX "cmpxchgl %[to], " __percpu_arg([word])
		     : "=@ccz" (ok), "+a" (from),
		       [word] "+m" (__my_cpu_var(ct_work_rs_words))
		     : [to] "r" (0U)
		     : "memory");
	return ok;
}

#define arch_ct_work_rs_leave arch_ct_work_rs_leave

/*
 * ct_work_rs_store(): a plain store, %gs-relative, after a compiler
 * barrier: a release under x86-TSO.
 */
static __always_inline void arch_ct_work_rs_store(u32 value)
{
	barrier();
	raw_cpu_write(ct_work_rs_words, value);
}

#define arch_ct_work_rs_store arch_ct_work_rs_store

#endif /* _ASM_X86_CT_WORK_RS_WORD_H */

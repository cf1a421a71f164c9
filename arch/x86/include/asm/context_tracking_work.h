/* SPDX-License-Identifier: GPL-2.0 */
/*
 * x86's part of the work deferred to CPUs in user space
 * (<linux/context_tracking_work.h>): the entry's compare-and-exchange of
 * its CPU's work word, and the kernel TLB flushes that may wait for their
 * next kernel entry (arch/x86/mm/tlb_defer_rs.c).
 */
#ifndef _ASM_X86_CONTEXT_TRACKING_WORK_H
#define _ASM_X86_CONTEXT_TRACKING_WORK_H

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

#ifdef CONFIG_TLB_FLUSH_DEFER_RS
/* With ct_work_rs_tlb_needs_ipi() (arch/x86/mm/tlb.c). */
void flush_tlb_kernel_range_deferrable(unsigned long start, unsigned long end);
#define flush_tlb_kernel_range_deferrable flush_tlb_kernel_range_deferrable
#endif

#endif /* _ASM_X86_CONTEXT_TRACKING_WORK_H */

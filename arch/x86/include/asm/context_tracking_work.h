/* SPDX-License-Identifier: GPL-2.0 */
/*
 * x86's part of the work deferred to CPUs in user space
 * (<linux/context_tracking_work.h>): the kernel TLB flushes that may wait
 * for their next kernel entry (arch/x86/mm/tlb_defer_rs.c).
 */
#ifndef _ASM_X86_CONTEXT_TRACKING_WORK_H
#define _ASM_X86_CONTEXT_TRACKING_WORK_H

#ifdef CONFIG_TLB_FLUSH_DEFER_RS
/* With ct_work_rs_tlb_needs_ipi() (arch/x86/mm/tlb.c). */
void flush_tlb_kernel_range_deferrable(unsigned long start, unsigned long end);
#define flush_tlb_kernel_range_deferrable flush_tlb_kernel_range_deferrable
#endif

#endif /* _ASM_X86_CONTEXT_TRACKING_WORK_H */

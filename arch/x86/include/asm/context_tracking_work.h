/* SPDX-License-Identifier: GPL-2.0 */
/*
 * x86's hooks for work deferred to CPUs in user space
 * (<linux/context_tracking_work.h>): the per-CPU work word of
 * arch/x86/kernel/ct_work_rs.c, whose protocol is
 * arch/x86/kernel/jump_label_rs/ct_work.rs.
 */
#ifndef _ASM_X86_CONTEXT_TRACKING_WORK_H
#define _ASM_X86_CONTEXT_TRACKING_WORK_H

#include <linux/ct_work_rs.h>

static __always_inline void arch_ct_work_user_exit(void)
{
	ct_work_rs_user_exit();
}

static __always_inline void arch_ct_work_user_enter(void)
{
	ct_work_rs_user_enter();
}

static __always_inline void arch_ct_work_nmi_enter(void)
{
	ct_work_rs_nmi_enter();
}

static __always_inline void arch_ct_work_nmi_exit(void)
{
	ct_work_rs_nmi_exit();
}

#ifdef CONFIG_TLB_FLUSH_DEFER_RS
/* With ct_work_rs_tlb_needs_ipi() (arch/x86/mm/tlb.c). */
void flush_tlb_kernel_range_deferrable(unsigned long start, unsigned long end);
#define flush_tlb_kernel_range_deferrable flush_tlb_kernel_range_deferrable
#endif

#endif /* _ASM_X86_CONTEXT_TRACKING_WORK_H */

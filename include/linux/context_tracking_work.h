/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Work for CPUs in user space or idle that waits for their next kernel
 * entry or idle exit instead of interrupting them: the hooks context
 * tracking calls for it.
 *
 * With CONFIG_CONTEXT_TRACKING_WORK, which the options of the work an
 * architecture defers select (x86: text-poke syncs and kernel TLB
 * flushes), the per-CPU work word of kernel/context_tracking_work/
 * implements them (<linux/ct_work_rs.h>), and the architecture's
 * <asm/context_tracking_work.h> what it needs besides (x86: the kernel TLB
 * flush it defers). Context tracking calls them on
 * CPUs where it is active, with interrupts off and from noinstr code:
 *
 * ct_work_user_exit()	first thing on entry from user space, before RCU
 *			watches (__ct_user_exit()): the work runs before
 *			any text that may have changed meanwhile;
 * ct_work_user_enter()	last thing before user space, once RCU stopped
 *			watching (__ct_user_enter()'s ct_kernel_exit(), not
 *			when it returns with RCU still watching): from here
 *			on, work for this CPU may wait;
 * ct_work_idle_exit()	first thing on idle exit (ct_idle_exit()),
 *			before RCU watches again;
 * ct_work_idle_enter()	last thing on idle entry, once RCU stopped
 *			watching (ct_idle_enter()'s ct_kernel_exit(), as
 *			ct_work_user_enter()): from here on, until
 *			idle exit or an interrupt, this CPU runs only
 *			.cpuidle.text and noinstr text;
 * ct_work_nmi_enter()	an NMI or interrupt came while RCU was not
 *			watching (ct_nmi_enter()), first thing: it may
 *			have come from user space or idle;
 * ct_work_nmi_exit()	its way back, last thing (ct_nmi_exit());
 * ct_work_watched()	RCU watches this CPU again (ct_kernel_enter(),
 *			ct_nmi_enter()), in their instrumentable sections:
 *			the work must have been taken before (with
 *			CONFIG_TEXT_POKE_RS_DEFER_DEBUG, a warning if not).
 *
 * And cpuidle calls, before a driver is registered:
 *
 * ct_work_cpuidle_driver()	its states' enter() run between idle entry
 *			and exit, while work may be pending, which they must
 *			not need: one outside noinstr and cpuidle text
 *			keeps idle CPUs out of deferral from then on.
 */
#ifndef _LINUX_CONTEXT_TRACKING_WORK_H
#define _LINUX_CONTEXT_TRACKING_WORK_H

#include <linux/compiler_types.h>

struct cpuidle_driver;

#ifdef CONFIG_CONTEXT_TRACKING_WORK
#include <linux/ct_work_rs.h>
#include <asm/context_tracking_work.h>

static __always_inline void ct_work_user_exit(void)
{
	ct_work_rs_user_exit();
}

static __always_inline void ct_work_user_enter(void)
{
	ct_work_rs_user_enter();
}

static __always_inline void ct_work_idle_exit(void)
{
	ct_work_rs_idle_exit();
}

static __always_inline void ct_work_idle_enter(void)
{
	ct_work_rs_idle_enter();
}

static __always_inline void ct_work_nmi_enter(void)
{
	ct_work_rs_nmi_enter();
}

static __always_inline void ct_work_nmi_exit(void)
{
	ct_work_rs_nmi_exit();
}

static __always_inline void ct_work_watched(void)
{
	if (IS_ENABLED(CONFIG_TEXT_POKE_RS_DEFER_DEBUG))
		ct_work_rs_watched();
}

static inline void ct_work_cpuidle_driver(struct cpuidle_driver *drv)
{
	ct_work_rs_cpuidle_driver(drv);
}
#else
static __always_inline void ct_work_user_exit(void) { }
static __always_inline void ct_work_user_enter(void) { }
static __always_inline void ct_work_idle_exit(void) { }
static __always_inline void ct_work_idle_enter(void) { }
static __always_inline void ct_work_nmi_enter(void) { }
static __always_inline void ct_work_nmi_exit(void) { }
static __always_inline void ct_work_watched(void) { }
static inline void ct_work_cpuidle_driver(struct cpuidle_driver *drv) { }
#endif

/*
 * A kernel TLB flush that CPUs in user space may take at their next kernel
 * entry instead of an IPI: only vmalloc's lazy purge and
 * vm_unmap_aliases(), whose page tables stay. Every other kernel range
 * flush, the one before a page-table page is freed first among them, is
 * flush_tlb_kernel_range(), which reaches every CPU at once; and so is
 * this one where the architecture does not defer it (x86 says why it may,
 * in arch/x86/mm/tlb_defer_rs.c).
 */
#ifndef flush_tlb_kernel_range_deferrable
#define flush_tlb_kernel_range_deferrable flush_tlb_kernel_range
#endif

#endif /* _LINUX_CONTEXT_TRACKING_WORK_H */

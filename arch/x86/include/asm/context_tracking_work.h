/* SPDX-License-Identifier: GPL-2.0 */
/*
 * x86's part of the work deferred to CPUs in user space or idle
 * (<linux/context_tracking_work.h>): the work word's accesses, and the
 * kernel TLB flushes that may wait for a CPU's next kernel entry
 * (arch/x86/mm/tlb_defer.c).
 */
#ifndef _ASM_X86_CONTEXT_TRACKING_WORK_H
#define _ASM_X86_CONTEXT_TRACKING_WORK_H

#include <linux/percpu.h>
#include <asm/alternative.h>

DECLARE_PER_CPU_ALIGNED(u32, ct_work_words);

/*
 * The kinds of work x86 defers: the Rust text-poke batch's syncs
 * (CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE), and kernel TLB flushes
 * (CONFIG_CONTEXT_TRACKING_WORK_TLB_FLUSH, ct_work_tlb_flush_at_entry()
 * below).
 */
#define CT_WORK_SYNCS_SENT		IS_ENABLED(CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE)
#define CT_WORK_TLB_FLUSHES_DEFERRED	IS_ENABLED(CONFIG_CONTEXT_TRACKING_WORK_TLB_FLUSH)

/*
 * ct_work_leave() (<linux/context_tracking_work.h>): this CPU's word from
 * @from to kernel if it holds @from, %gs-relative, where the generic one
 * computes the word's address first; locked, as senders write the word
 * from other CPUs.
 */
static __always_inline bool arch_ct_work_leave(u32 from)
{
	bool ok;

	asm volatile(LOCK_PREFIX "cmpxchgl %[to], " __percpu_arg([word])
		     : "=@ccz" (ok), "+a" (from),
		       [word] "+m" (__my_cpu_var(ct_work_words))
		     : [to] "r" (0U)
		     : "memory");
	return ok;
}

#define arch_ct_work_leave arch_ct_work_leave

/*
 * ct_work_store(): a plain store, %gs-relative, after a compiler
 * barrier: a release under x86-TSO.
 */
static __always_inline void arch_ct_work_store(u32 value)
{
	barrier();
	raw_cpu_write(ct_work_words, value);
}

#define arch_ct_work_store arch_ct_work_store

/*
 * The ways the entry flushes the TLB for a deferred kernel flush
 * (arch/x86/mm/tlb_defer.c): a CR3 reload with page table isolation,
 * else INVPCID, else a CR4.PGE toggle.
 */
enum ct_work_flush {
	CT_WORK_FLUSH_CR3,
	CT_WORK_FLUSH_INVPCID,
	CT_WORK_FLUSH_CR4,
	CT_WORK_FLUSH_WAYS,
};

/* Their names, in the audit's statistics (text_poke_batch/stats). */
#define CT_WORK_FLUSH_NAMES {				\
	[CT_WORK_FLUSH_CR3] = "cr3",			\
	[CT_WORK_FLUSH_INVPCID] = "invpcid",		\
	[CT_WORK_FLUSH_CR4] = "cr4",			\
}

/* The entry's TLB flush, noinstr, where they are deferred: the way it took. */
enum ct_work_flush ct_work_tlb_flush_at_entry(void);

#ifdef CONFIG_CONTEXT_TRACKING_WORK_TLB_FLUSH
/* The condition of flush_tlb_kernel_range_deferrable()'s IPIs. */
bool ct_work_tlb_needs_ipi(int cpu, void *info);
/* The entry's TLB flush on this CPU: its own way (@way < 0), or @way. */
int ct_work_flush_tlb_local(int way);
/* With ct_work_tlb_needs_ipi() (arch/x86/mm/tlb.c). */
void flush_tlb_kernel_range_deferrable(unsigned long start, unsigned long end);
#define flush_tlb_kernel_range_deferrable flush_tlb_kernel_range_deferrable
#endif

struct seq_file;
#if defined(CONFIG_CONTEXT_TRACKING_WORK_TLB_FLUSH) && \
	defined(CONFIG_CONTEXT_TRACKING_WORK_STATS)
/* Kernel TLB flushes of isolated CPUs deferred and sent, in its stats. */
void arch_ct_work_stats_show(struct seq_file *m);
#else
static inline void arch_ct_work_stats_show(struct seq_file *m) { }
#endif

#endif /* _ASM_X86_CONTEXT_TRACKING_WORK_H */

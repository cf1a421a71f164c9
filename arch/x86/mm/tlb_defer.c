// SPDX-License-Identifier: GPL-2.0
/*
 * Kernel TLB flushes that isolated CPUs in user space take at their next
 * kernel entry instead of an IPI: which flushes may wait, which CPUs need
 * the IPI, and the flush the entry runs (kernel/context_tracking_work/ is
 * the work word that carries it).
 */

#include <linux/atomic.h>
#include <linux/cpumask.h>
#include <linux/context_tracking_work.h>
#include <linux/init.h>
#include <linux/irqflags.h>
#include <linux/kstrtox.h>
#include <linux/mm.h>
#include <linux/percpu.h>
#include <linux/printk.h>
#include <linux/seq_file.h>
#include <linux/smp.h>
#include <linux/string_choices.h>

#include <asm/alternative.h>
#include <asm/cpufeatures.h>
#include <asm/invpcid.h>
#include <asm/tlbflush.h>

/*
 * The narrowest flush of this CPU's TLB that drops every kernel mapping
 * removed while it was in user space, with the paging-structure caches:
 *
 * - With page table isolation, kernel mappings are not global
 *   (__default_kernel_pte_mask), but for the kernel image's and the
 *   cpu_entry_area's, which are never unmapped: reloading CR3 drops the
 *   kernel PCID's (the entry's CR3 switch kept them, with PCID), and the
 *   other address spaces' kernel PCIDs are flushed when next loaded, as
 *   flush_tlb_one_kernel() has them. The user PCID's entries, which map no
 *   kernel memory, stay for the task in user space.
 * - Without it, kernel mappings are global: INVPCID "all contexts, globals
 *   too" where the CPU has it, else a CR4.PGE toggle. Both drop the user
 *   task's entries too.
 *
 * Interrupts are off: nothing can change CR3 or CR4 between a read and a
 * write.
 */
static __always_inline enum ct_work_flush ct_work_flush_way(void)
{
	/*
	 * One patched instruction picks the way, as one cpu_feature_enabled()
	 * would pick between two: PTI's wins over INVPCID's. Until
	 * alternatives are applied, the toggle, which is correct anywhere.
	 */
	asm goto(ALTERNATIVE_2("jmp %l[cr4]",
			       "jmp %l[invpcid]", X86_FEATURE_INVPCID,
			       "", X86_FEATURE_PTI)
		 : : : : cr4, invpcid);
	return CT_WORK_FLUSH_CR3;
invpcid:
	return CT_WORK_FLUSH_INVPCID;
cr4:
	return CT_WORK_FLUSH_CR4;
}

static __always_inline void ct_work_flush_tlb(enum ct_work_flush way)
{
	if (way == CT_WORK_FLUSH_CR3) {
		native_write_cr3(__native_read_cr3());
		if (cpu_feature_enabled(X86_FEATURE_PCID))
			this_cpu_write(cpu_tlbstate.invalidate_other, true);
	} else if (way == CT_WORK_FLUSH_INVPCID) {
		struct { u64 pcid, addr; } desc = { 0, 0 };

		asm volatile("invpcid %[desc], %[type]"
			     : : [desc] "m" (desc),
			       [type] "r" ((unsigned long)INVPCID_TYPE_ALL_INCL_GLOBAL)
			     : "memory");
	} else {
		unsigned long cr4 = this_cpu_read(cpu_tlbstate.cr4);

		asm volatile("mov %0, %%cr4" : : "r" (cr4 ^ X86_CR4_PGE) : "memory");
		asm volatile("mov %0, %%cr4" : : "r" (cr4) : "memory");
	}
}

/**
 * ct_work_tlb_flush_at_entry - flush this CPU's TLB for deferred work at entry
 *
 * The flush of a kernel entry that takes a CT_WORK_TLB_FLUSH bit
 * (kernel/context_tracking_work/word.c): it drops every kernel
 * translation this CPU may hold.
 *
 * Context: Kernel entry, before instrumentation is allowed.
 * Return: the way it flushed: CR3 reload, INVPCID or CR4.PGE toggle.
 */
noinstr enum ct_work_flush ct_work_tlb_flush_at_entry(void)
{
	enum ct_work_flush way = ct_work_flush_way();

	ct_work_flush_tlb(way);
	return way;
}

#ifdef CONFIG_CONTEXT_TRACKING_WORK_STATS
/*
 * Kernel TLB flushes of isolated CPUs: deferred ([1]) and sent as IPIs
 * ([0]), in context_tracking_work/stats.
 */
static atomic64_t ct_work_tlb_counts[2];

static void ct_work_tlb_count(bool deferred)
{
	atomic64_inc(&ct_work_tlb_counts[deferred]);
}

/**
 * arch_ct_work_stats_show - the kernel TLB flushes deferred and sent
 * @m: context_tracking_work/stats
 */
void arch_ct_work_stats_show(struct seq_file *m)
{
	seq_printf(m, "tlb_deferred %lld\n",
		   atomic64_read(&ct_work_tlb_counts[true]));
	seq_printf(m, "tlb_sent %lld\n",
		   atomic64_read(&ct_work_tlb_counts[false]));
}
#else
static inline void ct_work_tlb_count(bool deferred) { }
#endif

/**
 * ct_work_tlb_needs_ipi - whether a CPU needs a deferrable flush's IPI
 * @cpu: the CPU
 * @info: the flush's, unused
 *
 * The condition of flush_tlb_kernel_range_deferrable()'s IPIs
 * (arch/x86/mm/tlb.c): whether @cpu needs one, or takes the flush at its
 * next kernel entry instead.
 *
 * Which flushes may wait: only vmalloc's lazy purge and vm_unmap_aliases()
 * (mm/vmalloc.c), which flush ranges whose PTEs were cleared earlier while
 * every page table above them stays: freed vmap areas, dirty vmap blocks,
 * and the direct-map aliases of pages vm_reset_perms() gives back. Never
 * a flush before a page-table page is freed: with HAVE_ARCH_HUGE_VMAP, a
 * huge mapping made over a range that had a page table frees it
 * (pmd_free_pte_page(), pud_free_pmd_page()), and a CPU whose
 * paging-structure caches still point into the freed and reused page
 * could walk it speculatively, in user space too. Those, and every other
 * caller's, go through flush_tlb_kernel_range(), which reaches every CPU
 * at once, as upstream's does.
 *
 * Why the purge's flush may wait for entry (the objections to the
 * upstream series, answered):
 *
 * - vmap space reused before the flush (Jann Horn): until the CPU enters
 *   the kernel it runs no kernel code, so it cannot use a stale entry,
 *   whatever the freed range now maps; at entry the full flush runs before
 *   anything that can touch vmalloc or vmap memory. What runs before it is
 *   the danger zone (kernel/context_tracking_work/word.c): the entry text, the per-CPU first chunk
 *   (direct-mapped memory: if it is vmapped, as with percpu_alloc=page,
 *   deferral is refused at boot), the task_struct (slab)
 *   and the task's stack, which is vmalloc'd: but a range can only be stale
 *   on this CPU if it was unmapped while the CPU was in user space running
 *   this task, and this task's stack was mapped before the task was last
 *   switched in here, in the kernel. scripts/danger-data.py lists what
 *   the entry code may touch before it takes the work, and checks the
 *   built image's entry code against it (make check).
 * - paging-structure caches and the CR3 write in the danger zone (Dave
 *   Hansen): both flushes drop the paging-structure caches with the TLB;
 *   the CR3 write of the entry (with PTI) loads the kernel's own page
 *   tables, whose page-table pages a deferred flush never outlives (above),
 *   and the danger zone touches no vmalloc or vmap address but its own
 *   stack. The
 *   state the sender tests is the work word, changed by the CPU itself, not
 *   a kernel_cr3_loaded flag set apart from the CR3 write: there is no
 *   window in which the word says "user" while this CPU may touch memory a
 *   stale entry could map.
 * - idle CPUs, which take text-poke syncs as work bits, take these
 *   flushes by IPI (Work::IDLE in ct_work.rs): between ct_idle_enter() and
 *   ct_idle_exit() the idle code reaches the cpuidle driver's state
 *   through pointers, which scripts/danger-data.py cannot follow, as it
 *   follows the entry code; so no check says that a stale entry cannot be
 *   used there.
 * - the cost of context tracking at entry (Andy Lutomirski) and frequent
 *   enter/leave (Nadav Amit): see "Cost" in
 *   kernel/context_tracking_work/word.c; the flush itself is only paid by
 *   an entry that finds the bit set, and a storm of flushes costs a CPU in
 *   user space one flush at its next entry.
 *
 * Return: true if @cpu is to be sent the IPI: this CPU, every CPU with
 * deferral off, and a CPU that did not take the work bit.
 */
bool ct_work_tlb_needs_ipi(int cpu, void *info)
{
	if (cpu == smp_processor_id() || !READ_ONCE(ct_work_tlb_enabled))
		return true;
	if (ct_work_defer(cpu, CT_WORK_TLB_FLUSH)) {
		ct_work_tlb_count(true);
		return false;
	}
	if (ct_work_cpu_isolated(cpu))
		ct_work_tlb_count(false);
	return true;
}

/**
 * ct_work_flush_tlb_local - the entry's flush on this CPU, for the KUnit suite
 * @way: an enum ct_work_flush, or negative for the entry's own way
 *
 * Return: the way used, or -EINVAL for a way that is not correct here: a
 * CR3 reload without page table isolation (it would leave global
 * entries), INVPCID on a CPU without it.
 */
int ct_work_flush_tlb_local(int way)
{
	unsigned long flags;

	if (way < 0)
		way = ct_work_flush_way();
	if (way >= CT_WORK_FLUSH_WAYS ||
	    (way == CT_WORK_FLUSH_CR3 && !cpu_feature_enabled(X86_FEATURE_PTI)) ||
	    (way == CT_WORK_FLUSH_INVPCID &&
	     !cpu_feature_enabled(X86_FEATURE_INVPCID)))
		return -EINVAL;
	local_irq_save(flags);
	ct_work_flush_tlb(way);
	local_irq_restore(flags);
	return way;
}

/*
 * Kernel TLB flush deferral is unsafe on this machine, whatever
 * context_tracking_work.tlb_flush= said: its switch is turned off for good
 * (context_tracking_work/tlb_flush in debugfs refuses to turn it on again,
 * naming the cause).
 */
static int __init ct_work_tlb_check(void)
{
	/*
	 * On Xen PV, the kernel's TLB flush is a hypercall: the entry's CR3,
	 * CR4 or INVPCID flush would not be it.
	 */
	if (cpu_feature_enabled(X86_FEATURE_XENPV))
		ct_work_tlb_refused = "a Xen PV guest's TLB flushes are Xen's";
	else if (is_vmalloc_addr(per_cpu_ptr(&ct_work_words, 0)))
		ct_work_tlb_refused = "the per-CPU first chunk is vmapped (percpu_alloc=page?)";
	/*
	 * A CPU that reads supervisor mappings speculatively from user space
	 * (Meltdown) with the kernel mapped there (pti=off) could use a stale
	 * entry, of a memory type set_memory_uc() has since changed say,
	 * before its next entry.
	 */
	else if (boot_cpu_has_bug(X86_BUG_CPU_MELTDOWN) &&
		 !boot_cpu_has(X86_FEATURE_PTI))
		ct_work_tlb_refused = "Meltdown without page table isolation";
	if (!ct_work_tlb_refused)
		return 0;
	if (ct_work_tlb_enabled)
		pr_warn("context_tracking_work.tlb_flush: %s: kernel TLB flushes are not deferred\n",
			ct_work_tlb_refused);
	WRITE_ONCE(ct_work_tlb_enabled, false);
	return 0;
}
early_initcall(ct_work_tlb_check);

static int __init ct_work_tlb_setup(char *str)
{
	if (!str || kstrtobool(str, &ct_work_tlb_enabled)) {
		pr_warn("context_tracking_work.tlb_flush=%s: expected on or off; keeping %s\n",
			str ?: "", str_on_off(ct_work_tlb_enabled));
		return -EINVAL;
	}
	return 0;
}
early_param("context_tracking_work.tlb_flush", ct_work_tlb_setup);

// SPDX-License-Identifier: GPL-2.0
/*
 * Work for isolated CPUs in user space and for idle CPUs that waits for
 * their next kernel entry or idle exit: the per-CPU work word, the
 * context-tracking hooks that take the work at kernel entry and idle exit
 * and run it (sync_core(), and the kernel TLB flush
 * the architecture defers, arch/x86/mm/tlb_defer.c), the senders that set
 * work in other CPUs' words (ct_work_defer(), ct_work_ask()), and the
 * switches. The protocol has a model, ct_work.rs, checked under every
 * interleaving on the host; the word's functions below implement its
 * functions one for one, and the ct_work KUnit suite checks each against
 * the model from every value a word can hold. The entry side runs before
 * instrumentation is allowed: noinstr.
 *
 * The danger zone: a CPU coming from user space takes its work in
 * ct_work_user_exit(), the first thing __ct_user_exit() does on a CPU
 * where context tracking is active, or in ct_work_nmi_enter() for an NMI.
 * Everything it runs before that, and everything it runs after
 * ct_work_user_enter() on the way out, may run text that a deferred sync
 * has not yet made safe: the entry asm (.entry.text) and the C entry up to
 * context tracking (do_syscall_64(), irqentry_enter(), exc_nmi() and their
 * inlined helpers). An idle CPU takes its work in ct_work_idle_exit(),
 * the first thing ct_idle_exit() does, or at an interrupt's
 * ct_work_nmi_enter(); from ct_work_idle_enter(), the last thing
 * ct_idle_enter() does, it runs the idle code between ct_cpuidle_enter()
 * and ct_cpuidle_exit() and the idle instruction. objtool keeps all of it
 * in .noinstr.text, .entry.text or .cpuidle.text: noinstr and cpuidle code
 * may only call noinstr or cpuidle code, and static call trampolines,
 * which live in .static_call.text. With three exceptions, each handled:
 * - cpuidle_enter_state() calls the state's enter() through a pointer,
 *   inside instrumentation_begin(), where objtool does not follow it:
 *   upstream's rule (its comment there) makes every enter() of a state
 *   without CPUIDLE_FLAG_RCU_IDLE noinstr or __cpuidle, and every in-tree
 *   driver keeps it, but nothing checks it at build time. So a driver is
 *   checked when it registers (hook patch 0005b,
 *   ct_work_cpuidle_driver()): a state whose enter() or
 *   enter_s2idle() is outside the image's and modules' .noinstr.text
 *   (which holds .cpuidle.text) turns idle deferral off for good, with a
 *   warning that names it;
 * - a WARN there (cpuidle_enter_state()'s "leaked IRQ state" WARN_ONCE()
 *   when enter() returned with interrupts on) or in the entry code
 *   before the take traps, and handle_bug() reports it (report_bug(),
 *   printk()) before exception entry: hook patch 0005a takes the word
 *   around handle_bug(), as an interrupt in idle does, so the work runs
 *   before the report (KUnit ct_work.a_warn_in_idle_runs_the_work_first);
 * - every other interrupt or exception runs the entry code up to
 *   ct_nmi_enter() (or, from user space, __ct_user_exit()) first, and
 *   an INT3 the text-poke batch's noinstr lookup: all of it in the
 *   sections above.
 * So the sender follows one rule, a
 * superset of the danger zone: a batch that writes any byte in those
 * sections is never deferred (ct_work_danger_text[], which the
 * text-poke batch checks), and every CPU takes its IPIs; nor one that
 * writes a module's noinstr text, which holds its .cpuidle.text too
 * (scripts/module.lds.S), as a cpuidle driver's module has it
 * (ct_work_module_danger_text()).
 * scripts/danger-zone.py lists the static branch and static call sites in
 * those sections at build time, and warns about every one whose key can
 * be flipped after boot: flipping it costs isolated and idle CPUs their
 * IPIs.
 * Keys in .data..ro_after_init cannot be flipped after boot;
 * context_tracking_key, which guards the call into context tracking
 * itself, is only flipped by ct_cpu_track_user(), which is __init.
 *
 * Cost. The upstream series kept the work bits in context tracking's state
 * word, next to RCU's counter, and paid for them on every entry of every
 * CPU where context tracking runs (+27% to +74% on a getpid() loop on older
 * Xeons, v7). Here the word is separate and only isolated CPUs use it at
 * entry and exit: entry reads it and, only when deferral made it say
 * "user", exchanges it; exit stores it; with deferral off, entry is one
 * load. A
 * task that enters and leaves the kernel all the time pays that on each
 * round trip and nothing else: make demo measures a getpid() loop on an
 * isolated CPU both ways, in one boot.
 *
 * Idle. Every CPU's word says "idle" from ct_idle_enter() to
 * ct_idle_exit() while a switch is on, nohz_full or not: a sync round sets
 * a bit instead of waking it (three IPIs per flip, each taking the CPU out
 * of its C-state), and the CPU runs sync_core() when it leaves idle or
 * takes its next interrupt. Kernel TLB flushes still wake it
 * (arch/x86/mm/tlb_defer.c says why). Idle entry costs two loads and a
 * store, idle exit a compare-and-exchange when no work is pending, an
 * interrupt in idle an exchange and a store.
 *
 * Work is never lost across CPU hotplug: a CPU goes offline from the
 * kernel, where its word says "kernel" and no sender sets bits (the dying
 * CPU leaves idle before it reports itself dead, and does not enter it
 * again), and a CPU coming online starts with its word taken and
 * sync_core() run (ct_work_cpu_online()).
 */

#include <linux/context_tracking.h>
#include <linux/context_tracking_state.h>
#include <linux/cpu.h>
#include <linux/cpuhotplug.h>
#include <linux/cpuidle.h>
#include <linux/context_tracking_work.h>
#include <linux/debugfs.h>
#include <linux/init.h>
#include <linux/kstrtox.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/percpu.h>
#include <linux/printk.h>
#include <linux/rcupdate.h>
#include <linux/sched/clock.h>
#include <linux/seq_file.h>
#include <linux/smp.h>
#include <linux/string_choices.h>
#include <linux/sync_core.h>
#include <linux/tick.h>
#include <linux/uaccess.h>

#include <asm/sections.h>

/*
 * Each switch on by default where the architecture defers that kind of
 * work (<asm/context_tracking_work.h>): without a sender of syncs, nothing
 * would take them.
 */
bool ct_work_enabled __read_mostly = CT_WORK_SYNCS_SENT;
bool ct_work_tlb_enabled __read_mostly = CT_WORK_TLB_FLUSHES_DEFERRED;
const char *ct_work_tlb_refused __ro_after_init;
const char *ct_work_idle_refused __read_mostly;
/*
 * How long a sync round waits for an isolated CPU found in the kernel to
 * return to user space before it sends the IPI: about what a tick or a short
 * system call takes. Only the sender waits.
 */
unsigned long ct_work_wait_ns __read_mostly = 50 * NSEC_PER_USEC;

DEFINE_PER_CPU_ALIGNED(u32, ct_work_words);
/*
 * The nesting levels of entries while RCU was not watching
 * (<linux/context_tracking_work.h>).
 */
DEFINE_PER_CPU(u32, ct_work_nmi_levels);
#ifdef CONFIG_CONTEXT_TRACKING_WORK_STATS
/* Entries that ran work instead of taking an IPI. */
static DEFINE_PER_CPU(unsigned long, ct_work_run);

static __always_inline void ct_work_count_run(void)
{
	raw_cpu_inc(ct_work_run);
}

/**
 * ct_work_runs - how many entries of a CPU ran deferred work
 * @cpu: the CPU
 *
 * Return: the entries of @cpu that ran work instead of taking an IPI.
 */
unsigned long ct_work_runs(int cpu)
{
	return READ_ONCE(per_cpu(ct_work_run, cpu));
}
#else
static __always_inline void ct_work_count_run(void) { }
#endif

#ifdef CONFIG_CONTEXT_TRACKING_WORK_DEBUG
#define CT_WORK_KINDS	2
/*
 * The audit of the work deferred to a CPU, per kind: @added, the kinds
 * senders added to its word (from clear to set: a request that coalesces
 * with a pending one adds nothing); @ran, those the CPU took and ran, each
 * taken by exactly one entry; @lost, what an entry found added and not run
 * when it was done. A sender adds before the entry that takes the work
 * exchanges the word, and counts right after, so @ran can only lag @added
 * while work is pending: at the end of an entry that took work, and on a
 * CPU that is not in user space, @added == @ran + @lost, and @lost is
 * @skipped, the work entries dropped on purpose (context_tracking_work/skip_work):
 * anything else lost is a bug, which every boot of make test's user-space
 * tests checks for at its end (scripts/guest-test/audit.inc).
 */
struct ct_work_audit {
	atomic_t added[CT_WORK_KINDS];
	unsigned int ran[CT_WORK_KINDS];
	unsigned int lost[CT_WORK_KINDS];
	unsigned int skipped[CT_WORK_KINDS];
	/* The entry's TLB flushes, each way (enum ct_work_flush). */
	unsigned int flushes[CT_WORK_FLUSH_WAYS];
};

static DEFINE_PER_CPU(struct ct_work_audit, ct_work_audit);
/* The next entries that take work drop it (context_tracking_work/skip_work). */
static atomic_t ct_work_skip = ATOMIC_INIT(0);

/**
 * ct_work_audit_added - count work a sender added to a CPU's word
 * @cpu: the CPU
 * @work: the kinds added, enum ct_work_kind bits: those the sender found
 *	  clear and set
 */
void ct_work_audit_added(int cpu, unsigned int work)
{
	struct ct_work_audit *a = per_cpu_ptr(&ct_work_audit, cpu);
	int k;

	for (k = 0; k < CT_WORK_KINDS; k++)
		if (work & BIT(k))
			atomic_inc(&a->added[k]);
}

/* This CPU's entry ran @ran of the work it took; now check the rest. */
static __always_inline void ct_work_audit_ran(unsigned int ran)
{
	struct ct_work_audit *a = raw_cpu_ptr(&ct_work_audit);
	int k;

	for (k = 0; k < CT_WORK_KINDS; k++) {
		unsigned int added, done;

		done = READ_ONCE(a->ran[k]) + !!(ran & BIT(k));
		WRITE_ONCE(a->ran[k], done);
		added = raw_atomic_read(&a->added[k]);
		if ((int)(added - done - READ_ONCE(a->lost[k])) > 0)
			WRITE_ONCE(a->lost[k], added - done);
	}
}

static __always_inline void ct_work_audit_flush(enum ct_work_flush way)
{
	struct ct_work_audit *a = raw_cpu_ptr(&ct_work_audit);

	WRITE_ONCE(a->flushes[way], a->flushes[way] + 1);
}

/* Whether this entry drops the @work it took, on purpose (counted). */
static __always_inline bool ct_work_skip_work(unsigned int work)
{
	struct ct_work_audit *a;
	int k;

	if (likely(!raw_atomic_read(&ct_work_skip)) ||
	    raw_atomic_dec_if_positive(&ct_work_skip) < 0)
		return false;
	a = raw_cpu_ptr(&ct_work_audit);
	for (k = 0; k < CT_WORK_KINDS; k++)
		if (work & BIT(k))
			WRITE_ONCE(a->skipped[k], a->skipped[k] + 1);
	return true;
}

/* The entry benchmark's @n runs of @work, which no sender added. */
static void ct_work_audit_forget(unsigned int work, unsigned int n)
{
	struct ct_work_audit *a = this_cpu_ptr(&ct_work_audit);
	int k;

	for (k = 0; k < CT_WORK_KINDS; k++)
		if (work & BIT(k))
			WRITE_ONCE(a->ran[k], a->ran[k] - n);
}

static void ct_work_audit_show(struct seq_file *m, int cpu)
{
	struct ct_work_audit *a = per_cpu_ptr(&ct_work_audit, cpu);
	static const char * const kinds[] = { "sync", "tlb" };
	int k;

	for (k = 0; k < CT_WORK_KINDS; k++)
		seq_printf(m, " %s_added %d %s_ran %u %s_lost %u", kinds[k],
			   atomic_read(&a->added[k]), kinds[k],
			   READ_ONCE(a->ran[k]), kinds[k], READ_ONCE(a->lost[k]));
}

/*
 * Work lost at entry and dropped there on purpose, and the entry's TLB
 * flushes by each way, all told.
 */
static void ct_work_audit_stats(struct seq_file *m)
{
	static const char * const ways[CT_WORK_FLUSH_WAYS] = CT_WORK_FLUSH_NAMES;
	u64 lost = 0, skipped = 0, flushes[CT_WORK_FLUSH_WAYS] = { };
	int cpu, k;

	for_each_possible_cpu(cpu) {
		struct ct_work_audit *a = per_cpu_ptr(&ct_work_audit, cpu);

		for (k = 0; k < CT_WORK_KINDS; k++) {
			lost += READ_ONCE(a->lost[k]);
			skipped += READ_ONCE(a->skipped[k]);
		}
		for (k = 0; k < CT_WORK_FLUSH_WAYS; k++)
			flushes[k] += READ_ONCE(a->flushes[k]);
	}
	seq_printf(m, "lost_at_entry %llu\n", lost);
	seq_printf(m, "skipped_at_entry %llu\n", skipped);
	if (CT_WORK_TLB_FLUSHES_DEFERRED)
		for (k = 0; k < CT_WORK_FLUSH_WAYS; k++)
			seq_printf(m, "tlb_flush_%s %llu\n", ways[k], flushes[k]);
}

static int ct_work_skip_get(void *data, u64 *val)
{
	*val = atomic_read(&ct_work_skip);
	return 0;
}

static int ct_work_skip_set(void *data, u64 val)
{
	if (val > INT_MAX)
		return -EINVAL;
	atomic_set(&ct_work_skip, val);
	return 0;
}
DEFINE_DEBUGFS_ATTRIBUTE(ct_work_skip_fops, ct_work_skip_get,
			 ct_work_skip_set, "%llu\n");

static void ct_work_audit_debugfs_init(struct dentry *dir)
{
	debugfs_create_file_unsafe("skip_work", 0600, dir, NULL,
				   &ct_work_skip_fops);
}

/**
 * __ct_work_watched - check this CPU's word once RCU watches it again
 *
 * Called where ct_kernel_enter() and ct_nmi_enter() may be instrumented:
 * the entry must have taken the word before, so it says kernel, with no
 * work. A word that still says user or idle here would let senders set
 * bits that no interrupt takes, and work they asked for runs after the
 * text that needed it: this warns, once.
 */
void __ct_work_watched(void)
{
	u32 word = raw_cpu_read(ct_work_words);

	WARN_ONCE(word & (CT_WORK_USER | CT_WORK_IDLE),
		  "ct_work: RCU watches CPU %d, whose word %#x still says %s\n",
		  raw_smp_processor_id(), word,
		  word & CT_WORK_USER ? "user" : "idle");
}
#else /* !CONFIG_CONTEXT_TRACKING_WORK_DEBUG */
static inline void ct_work_audit_added(int cpu, unsigned int work) { }
static __always_inline void ct_work_audit_ran(unsigned int ran) { }
static __always_inline void ct_work_audit_flush(enum ct_work_flush way) { }
static __always_inline bool ct_work_skip_work(unsigned int work) { return false; }
static inline void ct_work_audit_forget(unsigned int work, unsigned int n) { }
static inline void ct_work_audit_show(struct seq_file *m, int cpu) { }
static inline void ct_work_audit_debugfs_init(struct dentry *dir) { }
static inline void ct_work_audit_stats(struct seq_file *m) { }
#endif /* CONFIG_CONTEXT_TRACKING_WORK_DEBUG */

/*
 * The deferred sync: what the sync round's IPI handler would have run,
 * and the report that it ran. Out of line, so that lint can check in the
 * built image that every path to that report serializes
 * (scripts/serialize-check.py): no test that runs it can see a
 * sync_core() go missing under single-threaded TCG.
 */
static noinstr noinline unsigned int ct_work_sync_core(void)
{
	sync_core();
	return CT_WORK_SYNC_CORE;
}

/*
 * Out of line: the hooks' path with no work stays a few instructions.
 * Returns the kinds of work it ran. Only an entry whose work the audit
 * checks (@audited) may drop it on purpose (context_tracking_work/skip_work).
 */
static noinstr noinline unsigned int ct_work_run_work(unsigned int work,
						      bool audited)
{
	unsigned int ran = 0;

	if (audited && ct_work_skip_work(work))
		return 0;
	if (CT_WORK_TLB_FLUSHES_DEFERRED && (work & CT_WORK_TLB_FLUSH)) {
		/*
		 * The flush first: sync_core() may IRET, on this task's
		 * stack. Only where flushes are deferred: an entry nesting in
		 * one that took work it has not run asks for every kind.
		 */
		ct_work_audit_flush(ct_work_tlb_flush_at_entry());
		ran |= CT_WORK_TLB_FLUSH;
	}
	if (work & CT_WORK_SYNC_CORE)
		ran |= ct_work_sync_core();
	ct_work_count_run();
	return ran;
}

/*
 * The entry side of the work word's protocol. Its rules are Rust
 * (ct_work.rs: the host tests check every interleaving of them, nested
 * NMIs and machine checks among them), but the entry runs them before
 * instrumentation is allowed, where only noinstr C and the uninstrumented
 * raw_*() atomics belong: so here they are in C, one function for each of
 * ct_work.rs's, and the KUnit case entry_side_follows_the_protocol checks
 * every one against ct_work.rs for every value a word and a CPU's levels
 * can hold.
 *
 * Stores that end a state are store-releases (a plain store after a
 * compiler barrier on x86); an exchange is a full barrier.
 */
static __always_inline unsigned int ct_work_work_of(u32 word)
{
	return word >> CT_WORK_WORK_SHIFT & CT_WORK_ALL;
}

static __always_inline void ct_work_set(u32 *word, u32 value)
{
	/* Pairs with the senders' compare-and-exchange (ct_work::defer()). */
	smp_store_release(word, value);
}

/**
 * ct_work_enter - take a work word at an entry, as ct_work::enter_taking()
 * @word: the word, which does not say kernel
 *
 * Return: the work taken, enum ct_work_kind bits; with any, the word says
 * so until ct_work_ran().
 */
noinstr unsigned int ct_work_enter(u32 *word)
{
	unsigned int work = ct_work_work_of(raw_xchg(word, CT_WORK_TAKING));

	if (!work)
		ct_work_set(word, 0);
	return work;
}

/**
 * ct_work_ran - the work ct_work_enter() took has run, as ct_work::ran()
 * @word: the word
 */
noinstr void ct_work_ran(u32 *word)
{
	ct_work_set(word, 0);
}

/**
 * ct_work_nmi_take - take a work word at an NMI's entry, as ct_work::nmi_enter()
 * @word: the word
 * @levels: the CPU's nesting levels, one pushed here
 *
 * Return: the work to run, enum ct_work_kind bits: every kind if the NMI
 * nests in an entry that took work it has not run yet.
 */
noinstr unsigned int ct_work_nmi_take(u32 *word, u32 *levels)
{
	u32 now = READ_ONCE(*word), level = 0, old;
	unsigned int work;

	if (now == CT_WORK_TAKING || !now || now == CT_WORK_OFF) {
		WRITE_ONCE(*levels, READ_ONCE(*levels) << CT_WORK_LEVEL_BITS);
		return now == CT_WORK_TAKING ? CT_WORK_ALL : 0;
	}
	/*
	 * An entry nesting from here to the exchange finds the word as it
	 * was and leaves it so; from the exchange on, it finds it taking,
	 * and pushes and pops its own level.
	 */
	old = raw_xchg(word, CT_WORK_TAKING);
	work = ct_work_work_of(old);
	if (old & CT_WORK_USER)
		level |= CT_WORK_LEVEL_USER;
	else if (old & CT_WORK_IDLE)
		level |= CT_WORK_LEVEL_IDLE;
	if (work)
		level |= CT_WORK_LEVEL_TOOK;
	WRITE_ONCE(*levels, READ_ONCE(*levels) << CT_WORK_LEVEL_BITS | level);
	if (!work)
		ct_work_set(word, 0);
	return work;
}

/**
 * ct_work_nmi_ran - the NMI ran its work, as ct_work::nmi_ran()
 * @word: the word
 * @levels: the CPU's nesting levels
 */
noinstr void ct_work_nmi_ran(u32 *word, u32 *levels)
{
	u32 all = READ_ONCE(*levels);

	if (all & CT_WORK_LEVEL_TOOK) {
		ct_work_set(word, 0);
		WRITE_ONCE(*levels, all & ~CT_WORK_LEVEL_TOOK);
	}
}

/**
 * ct_work_nmi_give - give the word back at an NMI's exit, as ct_work::nmi_exit()
 * @word: the word, set back to user or idle if the NMI came from there
 * @levels: the CPU's nesting levels, the NMI's popped
 */
noinstr void ct_work_nmi_give(u32 *word, u32 *levels)
{
	u32 all = READ_ONCE(*levels);

	WRITE_ONCE(*levels, all >> CT_WORK_LEVEL_BITS);
	if (all & CT_WORK_LEVEL_USER)
		ct_work_set(word, CT_WORK_USER);
	else if (all & CT_WORK_LEVEL_IDLE)
		ct_work_set(word, CT_WORK_IDLE);
}

/**
 * __ct_work_take - take and run this CPU's deferred work
 *
 * At entry from user space and at idle exit. Until the work taken has run,
 * the word says so, and an NMI or machine check nesting here runs every
 * kind of work itself (ct_work::enter_taking()).
 *
 * Context: Before instrumentation is allowed, interrupts off.
 */
noinstr void __ct_work_take(void)
{
	u32 *word = raw_cpu_ptr(&ct_work_words);
	unsigned int work;

	work = ct_work_enter(word);
	if (unlikely(work)) {
		work = ct_work_run_work(work, true);
		ct_work_ran(word);
		ct_work_audit_ran(work);
	}
}

/**
 * __ct_work_nmi_enter - take and run this CPU's deferred work at an NMI
 *
 * At the entry of an NMI or machine check that RCU was not watching.
 *
 * Context: Before instrumentation is allowed.
 */
noinstr void __ct_work_nmi_enter(void)
{
	unsigned int work;

	work = ct_work_nmi_take(raw_cpu_ptr(&ct_work_words),
				raw_cpu_ptr(&ct_work_nmi_levels));
	if (unlikely(work)) {
		/* Or it nests in an entry that took work it has not run. */
		bool took = raw_cpu_read(ct_work_nmi_levels) &
			    CT_WORK_LEVEL_TOOK;

		work = ct_work_run_work(work, took);
		ct_work_nmi_ran(raw_cpu_ptr(&ct_work_words),
				raw_cpu_ptr(&ct_work_nmi_levels));
		if (took)
			ct_work_audit_ran(work);
	}
}

/**
 * __ct_work_nmi_exit - give the word back at the exit of __ct_work_nmi_enter()'s NMI
 *
 * Context: After instrumentation is no longer allowed.
 */
noinstr void __ct_work_nmi_exit(void)
{
	ct_work_nmi_give(raw_cpu_ptr(&ct_work_words),
			 raw_cpu_ptr(&ct_work_nmi_levels));
}

/**
 * ct_work_cpu_isolated - whether a CPU is nohz_full
 * @cpu: the CPU
 *
 * Return: true if @cpu is nohz_full.
 */
bool ct_work_cpu_isolated(int cpu)
{
	return tick_nohz_full_cpu(cpu);
}

/**
 * ct_work_next_online - the next online CPU
 * @cpu: the CPU to start after, -1 for the first
 *
 * Return: the next online CPU after @cpu, or nr_cpu_ids.
 */
int ct_work_next_online(int cpu)
{
	return cpumask_next(cpu, cpu_online_mask);
}

/**
 * ct_work_next_isolated - the next online nohz_full CPU
 * @cpu: the CPU to start after, -1 for the first
 *
 * Return: the next online nohz_full CPU after @cpu, or nr_cpu_ids.
 */
int ct_work_next_isolated(int cpu)
{
	if (!tick_nohz_full_enabled())
		return nr_cpu_ids;
	return cpumask_next_and(cpu, tick_nohz_full_mask, cpu_online_mask);
}

/**
 * ct_work_cpu_running - whether a CPU runs a task, in or out of user space
 * @cpu: an online CPU
 *
 * Context tracking says "user" a little before the word does on the way
 * out (ct_work_user_enter() comes last) and a little after on the way in
 * (ct_work_user_exit() comes first): a CPU whose word refused work and
 * whose context is "kernel" or "user" is about to be in user space again,
 * or in the kernel running a task.
 *
 * Return: true if @cpu's context is "kernel" or "user": not idle, not in
 * a guest.
 */
bool ct_work_cpu_running(int cpu)
{
	int state = atomic_read(&per_cpu(context_tracking.state, cpu));

	state &= CT_STATE_MASK;
	return state == CT_STATE_KERNEL || state == CT_STATE_USER;
}

/**
 * ct_work_word - a CPU's work word, for its senders
 * @cpu: the CPU
 *
 * Return: the word of @cpu, or NULL if @cpu is out of range or offline.
 */
u32 *ct_work_word(int cpu)
{
	if (cpu < 0 || cpu >= nr_cpu_ids || !cpu_online(cpu))
		return NULL;
	return per_cpu_ptr(&ct_work_words, cpu);
}

/**
 * ct_work_defer_word - ask the CPU of a work word to take work, as ct_work::defer()
 * @word: the word
 * @work: the kinds of work, enum ct_work_kind bits
 * @added: set to the kinds this call added to the word: those it found
 *	   clear, of which the CPU's next entry runs each once
 *
 * Succeeds only while the word says user, or idle for the kinds an idle
 * CPU takes (CT_WORK_IN_IDLE); bits already pending stay, so requests
 * coalesce. The caller made whatever the work is for visible before (the
 * text written, for a sync): the compare-and-exchange, a full barrier,
 * orders it before the CPU's entry, which takes the word with another.
 *
 * Return: CT_WORK_DEFERRED if the word took @work; CT_WORK_IPI if the CPU
 * is in the kernel, or idle and @work has other kinds; CT_WORK_IPI_NOW if
 * it returned to user space with deferral off.
 */
int ct_work_defer_word(u32 *word, unsigned int work, unsigned int *added)
{
	u32 old = READ_ONCE(*word);

	*added = 0;
	do {
		if (old == CT_WORK_OFF)
			return CT_WORK_IPI_NOW;
		if (!(old & CT_WORK_USER) &&
		    (!(old & CT_WORK_IDLE) || work & ~CT_WORK_IN_IDLE))
			return CT_WORK_IPI;
	} while (!try_cmpxchg(word, &old,
			      old | (work & CT_WORK_ALL) << CT_WORK_WORK_SHIFT));
	*added = work & CT_WORK_ALL & ~ct_work_work_of(old);
	return CT_WORK_DEFERRED;
}

/**
 * ct_work_defer_cpu - ask a CPU to take work at its next entry or idle exit
 * @cpu: the CPU
 * @work: the kinds of work, enum ct_work_kind bits
 *
 * As ct_work_defer_word() on the word of @cpu, if it is online.
 *
 * Return: what ct_work_defer_word() returned, or CT_WORK_OFFLINE if @cpu
 * is out of range or offline.
 */
int ct_work_defer_cpu(int cpu, unsigned int work)
{
	u32 *word = ct_work_word(cpu);
	unsigned int added;
	int ret;

	if (!word)
		return CT_WORK_OFFLINE;
	ret = ct_work_defer_word(word, work, &added);
	if (added)
		ct_work_audit_added(cpu, added);
	return ret;
}

/**
 * ct_work_defer - ask a CPU to take work instead of an IPI
 * @cpu: the CPU
 * @work: one or more kinds of work, enum ct_work_kind bits; unknown bits
 *	  are refused
 *
 * The caller wrote whatever the work is for before.
 *
 * Return: true if @cpu took @work and needs no IPI for it.
 */
bool ct_work_defer(int cpu, unsigned int work)
{
	if (!work || work & ~CT_WORK_ALL)
		return false;
	return ct_work_defer_cpu(cpu, work) == CT_WORK_DEFERRED;
}

/*
 * Isolated CPUs a round waits for at most; beyond them, CPUs found in the
 * kernel get the IPI.
 */
#define CT_WORK_MAX_WAITING	64

/**
 * ct_work_ask - ask every other online CPU to take work instead of an IPI
 * @work: one kind of work, an enum ct_work_kind bit; nothing is asked for
 *	  unknown or several bits
 * @deferred: the CPUs that took it are added here
 * @asked: what happened, counted
 *
 * Idle CPUs, and isolated CPUs in user space, take the work. An isolated
 * CPU found running a task in the kernel, or on its way into or out of
 * user space, gets a short while (ct_work_wait_ns, context_tracking_work/wait_ns)
 * to be in user space: once it is, it runs no text that may have changed
 * without taking the work first, so it needs no IPI either. Isolated CPUs
 * in a guest, and those that returned to user space while deferral was
 * off (they take no work until they pass through the kernel again), are
 * counted as to be sent the IPI at once; housekeeping CPUs in the kernel
 * get theirs, uncounted and not waited for.
 *
 * The caller's CPU is neither asked nor waited for: it runs the sender,
 * in the kernel, and does the work itself. It is read with preemption on:
 * if the sender moves, the CPU it left is merely not deferred to, and gets
 * the IPI.
 *
 * Context: Any context that may spin for ct_work_wait_ns.
 */
void ct_work_ask(unsigned int work, struct cpumask *deferred,
		 struct ct_work_asked *asked)
{
	int waiting[CT_WORK_MAX_WAITING];
	int me = raw_smp_processor_id();
	unsigned int n = 0, i;
	u64 now, deadline;
	int cpu;

	if (work != CT_WORK_SYNC_CORE && work != CT_WORK_TLB_FLUSH)
		return;
	for_each_online_cpu(cpu) {
		bool isolated;
		int ret;

		if (cpu == me)
			continue;
		isolated = tick_nohz_full_cpu(cpu);
		ret = ct_work_defer_cpu(cpu, work);
		if (ret == CT_WORK_DEFERRED) {
			cpumask_set_cpu(cpu, deferred);
			if (isolated)
				asked->deferred++;
			else
				asked->idle++;
		} else if (!isolated || ret == CT_WORK_OFFLINE) {
			continue;
		} else if (ret == CT_WORK_IPI && n < CT_WORK_MAX_WAITING &&
			   ct_work_cpu_running(cpu)) {
			waiting[n++] = cpu;
		} else {
			asked->sent++;
		}
	}
	if (!n)
		return;
	now = ktime_get_mono_fast_ns();
	deadline = now + READ_ONCE(ct_work_wait_ns);
	if (deadline < now)
		deadline = U64_MAX;
	while (n && ktime_get_mono_fast_ns() < deadline) {
		for (i = 0; i < n;) {
			int ret = ct_work_defer_cpu(waiting[i], work);

			if (ret == CT_WORK_DEFERRED) {
				cpumask_set_cpu(waiting[i], deferred);
				asked->deferred++;
				asked->waited++;
			} else if (ret == CT_WORK_IPI &&
				   ct_work_cpu_running(waiting[i])) {
				/* Still in the kernel: asked again next time. */
				i++;
				continue;
			} else if (ret != CT_WORK_OFFLINE) {
				/*
				 * Gone into a guest, or idle since before
				 * deferral was on, or back in user space with
				 * deferral off: the IPI now.
				 */
				asked->sent++;
			}
			waiting[i] = waiting[--n];
		}
		cpu_relax();
	}
	/* Those still waited for get the IPI. */
	asked->sent += n;
	asked->expired += n;
}

#ifdef CONFIG_CONTEXT_TRACKING_WORK_KUNIT_TEST
/**
 * ct_work_test_idle_enter_watched - idle entry while RCU keeps watching
 *
 * For the KUnit suite: enters and leaves idle as ct_idle_enter() does when
 * ct_kernel_exit() returns early (RCU keeps watching, nesting above one).
 *
 * Return: this CPU's word as idle entry left it.
 */
u32 ct_work_test_idle_enter_watched(void)
{
	struct context_tracking *ct;
	unsigned long flags;
	long nmi_nesting;
	u32 word;

	raw_local_irq_save(flags);
	ct = this_cpu_ptr(&context_tracking);
	/* ct_kernel_exit() sets it to 0 even when it returns early. */
	nmi_nesting = READ_ONCE(ct->nmi_nesting);
	WRITE_ONCE(ct->nesting, ct->nesting + 1);
	ct_idle_enter();
	word = raw_cpu_read(ct_work_words);
	ct_idle_exit();
	WRITE_ONCE(ct->nesting, ct->nesting - 1);
	WRITE_ONCE(ct->nmi_nesting, nmi_nesting);
	raw_local_irq_restore(flags);
	return word;
}

/**
 * ct_work_test_warn_in_idle - a WARN in idle with a sync pending
 * @word: where this CPU's word is stored, as the WARN left it
 *
 * For the KUnit suite: sets this CPU's word as idle entry leaves it, asks
 * it for a sync as a sender would, and WARNs.
 *
 * Return: how many entries ran work during the WARN.
 */
unsigned long ct_work_test_warn_in_idle(u32 *word)
{
	unsigned long flags, runs = 0;
	int cpu;

	local_irq_save(flags);
	cpu = raw_smp_processor_id();
	/* For scripts/summarize.py, which fails a run on any other warning. */
	pr_warn("@@ expect-warnings ct_work %s\n", __func__);
	/* As ct_work_idle_enter() leaves it, then as a sender adds to it. */
	raw_cpu_write(ct_work_words, CT_WORK_IDLE);
	if (ct_work_defer(cpu, CT_WORK_SYNC_CORE)) {
		runs = ct_work_runs(cpu);
		WARN(1, "ct_work: a WARN in idle with a sync pending (KUnit)\n");
		runs = ct_work_runs(cpu) - runs;
	}
	*word = raw_cpu_read(ct_work_words);
	/* Leave idle as ct_idle_exit() does: whatever is left runs. */
	ct_work_idle_exit();
	local_irq_restore(flags);
	return runs;
}

static int __cpuidle ct_work_test_enter_idle(struct cpuidle_device *dev,
					     struct cpuidle_driver *drv,
					     int index)
{
	return index;
}

static noinline int ct_work_test_enter_plain(struct cpuidle_device *dev,
					     struct cpuidle_driver *drv,
					     int index)
{
	return index;
}

/**
 * ct_work_test_cpuidle_driver - register a cpuidle driver for the KUnit suite
 * @idle_text: whether its state's enter function is in cpuidle text
 * @refused: where the idle deferral's refusal is stored, NULL if none
 *
 * Registered with no device, then unregistered: no CPU enters idle
 * through it.
 *
 * Return: what cpuidle_register_driver() returned: -EBUSY if another
 * driver is registered, after the check.
 */
int ct_work_test_cpuidle_driver(bool idle_text, const char **refused)
{
	/*
	 * Registered with no device: no CPU enters idle through it, and if
	 * another driver is registered, registration fails (-EBUSY) after
	 * the check.
	 */
	static struct cpuidle_driver drv = {
		.name = "ct_work_test",
		.states = { { .name = "CTWORK", .exit_latency = 1,
			      .target_residency = 1 } },
		.state_count = 1,
	};
	int ret;

	drv.states[0].enter = idle_text ? ct_work_test_enter_idle :
					  ct_work_test_enter_plain;
	ret = cpuidle_register_driver(&drv);
	*refused = READ_ONCE(ct_work_idle_refused);
	if (!ret)
		cpuidle_unregister_driver(&drv);
	return ret;
}

/**
 * ct_work_test_idle_refusal_clear - forget the idle deferral's refusal
 *
 * For the KUnit suite, after ct_work_test_cpuidle_driver().
 */
void ct_work_test_idle_refusal_clear(void)
{
	WRITE_ONCE(ct_work_idle_refused, NULL);
}
#endif

const unsigned long ct_work_danger_text[CT_WORK_DANGER_RANGES][2] = {
	{ (unsigned long)__noinstr_text_start, (unsigned long)__noinstr_text_end },
	{ (unsigned long)__entry_text_start, (unsigned long)__entry_text_end },
	{ (unsigned long)__static_call_text_start,
	  (unsigned long)__static_call_text_end },
};

/**
 * ct_work_module_danger_text - whether an address is a module's noinstr text
 * @addr: the address
 *
 * A module's noinstr and cpuidle text runs in the danger zone as the
 * image's does (ct_work_danger_text): a batch that writes it is never
 * deferred.
 *
 * Return: true if @addr is in a module's noinstr text.
 */
bool ct_work_module_danger_text(unsigned long addr)
{
#ifdef CONFIG_MODULES
	struct module *mod;

	guard(rcu)();
	mod = __module_text_address(addr);
	return mod && addr - (unsigned long)mod->noinstr_text_start <
		      mod->noinstr_text_size;
#else
	return false;
#endif
}

/* Whether @fn is in noinstr text, the image's or a module's. */
static bool ct_work_idle_text(const void *fn)
{
	unsigned long addr = (unsigned long)fn;

	return (addr >= (unsigned long)__noinstr_text_start &&
		addr < (unsigned long)__noinstr_text_end) ||
	       ct_work_module_danger_text(addr);
}

/**
 * ct_work_cpuidle_driver - refuse idle deferral for a driver outside idle text
 * @drv: the cpuidle driver being registered
 *
 * A state whose enter function is outside noinstr and cpuidle text runs
 * it with work pending: idle CPUs take their IPIs from then on. The first
 * refusal is kept: a later driver's only warns.
 *
 * Context: cpuidle_driver_lock held, which serializes refusals.
 */
void ct_work_cpuidle_driver(struct cpuidle_driver *drv)
{
	static char why[160];
	int i;

	for (i = 0; i < drv->state_count; i++) {
		struct cpuidle_state *s = &drv->states[i];
		const void *fn = NULL;

		if (s->enter && !ct_work_idle_text(s->enter))
			fn = s->enter;
		else if (s->enter_s2idle && !ct_work_idle_text(s->enter_s2idle))
			fn = s->enter_s2idle;
		if (!fn)
			continue;
		pr_warn("ct_work: cpuidle driver %s, state %s: %ps is outside noinstr and cpuidle text: idle CPUs take their IPIs\n",
			drv->name, s->name, fn);
		if (!ct_work_idle_refused) {
			snprintf(why, sizeof(why),
				 "cpuidle driver %s, state %s: %ps is outside noinstr and cpuidle text",
				 drv->name, s->name, fn);
			/* Before any CPU can run @fn: the driver is not set yet. */
			smp_store_release(&ct_work_idle_refused, why);
		}
		return;
	}
}

#ifdef CONFIG_CONTEXT_TRACKING_WORK_STATS
/*
 * /sys/kernel/debug/context_tracking_work/stats: the work CPUs ran at entry
 * or idle exit, the audit's counts (CONFIG_CONTEXT_TRACKING_WORK_DEBUG) and
 * the architecture's, one "name value" a line.
 */
static int ct_work_stats_show(struct seq_file *m, void *v)
{
	u64 runs = 0;
	int cpu;

	for_each_possible_cpu(cpu)
		runs += ct_work_runs(cpu);
	seq_printf(m, "run_at_entry %llu\n", runs);
	ct_work_audit_stats(m);
	arch_ct_work_stats_show(m);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(ct_work_stats);

/**
 * ct_work_bench_entry - what the entry hook costs, for make demo
 * @word: CT_WORK_USER with work bits, or 0 for a CPU that does not take part
 * @n: how many times
 * @ns: where the time it took is stored (guest instructions under QEMU's
 *	-icount shift=0)
 *
 * @n times, this CPU's word is set to @word and taken as kernel entry
 * takes it, interrupts off. Only on a housekeeping CPU: context tracking
 * never runs the entry hooks there, and a sender that finds its word
 * saying "user" meanwhile has its work run by the bench's next entry.
 *
 * Return: 0, or -EINVAL on a nohz_full CPU or for a @word that is neither.
 */
int ct_work_bench_entry(u32 word, unsigned int n, u64 *ns)
{
	unsigned long flags;
	unsigned int i;
	u64 t0;
	int cpu;

	local_irq_save(flags);
	cpu = smp_processor_id();
	if (tick_nohz_full_cpu(cpu) || (word & ~CT_WORK_USER &&
					!(word & CT_WORK_USER))) {
		local_irq_restore(flags);
		return -EINVAL;
	}
	t0 = local_clock();
	for (i = 0; i < n; i++) {
		WRITE_ONCE(*this_cpu_ptr(&ct_work_words), word);
		ct_work_user_exit();
	}
	*ns = local_clock() - t0;
	if (word >> CT_WORK_WORK_SHIFT)
		this_cpu_sub(ct_work_run, n);
	ct_work_audit_forget(word >> CT_WORK_WORK_SHIFT, n);
	local_irq_restore(flags);
	return 0;
}
#endif /* CONFIG_CONTEXT_TRACKING_WORK_STATS */

/*
 * A CPU coming online runs no user space before it gets here, but its word
 * may say anything its last life left there: take it, and serialise.
 */
static int ct_work_cpu_online(unsigned int cpu)
{
	unsigned int work, ran;
	unsigned long flags;

	local_irq_save(flags);
	work = ct_work_enter(this_cpu_ptr(&ct_work_words));
	ran = ct_work_run_work(work | CT_WORK_SYNC_CORE, false);
	ct_work_ran(this_cpu_ptr(&ct_work_words));
	ct_work_audit_ran(ran & work);
	local_irq_restore(flags);
	return 0;
}

static int __init ct_work_setup(char *str)
{
	if (!str || kstrtobool(str, &ct_work_enabled)) {
		pr_warn("context_tracking_work.sync_core=%s: expected on or off; keeping %s\n",
			str ?: "", str_on_off(ct_work_enabled));
		return -EINVAL;
	}
	return 0;
}
early_param("context_tracking_work.sync_core", ct_work_setup);

/* A switch's file: its data is the switch. */
static int ct_work_defer_show(struct seq_file *m, void *v)
{
	bool *on = m->private;

	seq_printf(m, "%s\n", str_on_off(READ_ONCE(*on)));
	return 0;
}

static int ct_work_defer_open(struct inode *inode, struct file *file)
{
	return single_open(file, ct_work_defer_show, inode->i_private);
}

static ssize_t ct_work_defer_write(struct file *file,
				   const char __user *ubuf, size_t count,
				   loff_t *ppos)
{
	bool *sw = ((struct seq_file *)file->private_data)->private;
	bool on;
	int ret;

	ret = kstrtobool_from_user(ubuf, count, &on);
	if (ret)
		return ret;
	if (on && sw == &ct_work_tlb_enabled && ct_work_tlb_refused) {
		pr_warn("context_tracking_work/tlb_flush: refused: %s: kernel TLB flushes are not deferred\n",
			ct_work_tlb_refused);
		return -EPERM;
	}
	WRITE_ONCE(*sw, on);
	return count;
}

static const struct file_operations ct_work_defer_fops = {
	.owner		= THIS_MODULE,
	.open		= ct_work_defer_open,
	.read		= seq_read,
	.llseek		= seq_lseek,
	.release	= single_release,
	.write		= ct_work_defer_write,
};

/*
 * One line a CPU: its word's context, its work pending, the work it ran at
 * entry (CONFIG_CONTEXT_TRACKING_WORK_STATS).
 */
static int ct_work_cpus_show(struct seq_file *m, void *v)
{
	int cpu;

	for_each_online_cpu(cpu) {
		u32 word = READ_ONCE(per_cpu(ct_work_words, cpu));

		seq_printf(m, "cpu%d %s work %#x", cpu,
			   word & CT_WORK_USER ? "user" :
			   word & CT_WORK_IDLE ? "idle" :
			   word == CT_WORK_OFF ? "user-off" : "kernel",
			   word & (CT_WORK_USER | CT_WORK_IDLE) ?
			   word >> CT_WORK_WORK_SHIFT & CT_WORK_ALL : 0);
#ifdef CONFIG_CONTEXT_TRACKING_WORK_STATS
		seq_printf(m, " runs %lu", ct_work_runs(cpu));
#endif
		seq_printf(m, " isolated %d", ct_work_cpu_isolated(cpu));
		ct_work_audit_show(m, cpu);
		seq_putc(m, '\n');
	}
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(ct_work_cpus);

/*
 * The senders' wait, read with a marked load (ct_work_ask()): stored with a
 * marked store, not debugfs_create_ulong()'s plain one.
 */
static int ct_work_wait_ns_get(void *data, u64 *val)
{
	*val = READ_ONCE(ct_work_wait_ns);
	return 0;
}

static int ct_work_wait_ns_set(void *data, u64 val)
{
	WRITE_ONCE(ct_work_wait_ns, val);
	return 0;
}
DEFINE_DEBUGFS_ATTRIBUTE(ct_work_wait_ns_fops, ct_work_wait_ns_get,
			 ct_work_wait_ns_set, "%llu\n");

/*
 * /sys/kernel/debug/context_tracking_work/: "sync_core", "on" or "off",
 * which a write (any kstrtobool() spelling) switches at once, even during
 * a storm: rounds already deferred are run at entry either way, and a CPU
 * takes part from its next return to user space on; "tlb_flush", the
 * switch of kernel TLB flush deferral, as "sync_core", but that it refuses
 * (-EPERM) to turn on what the boot found unsafe; "cpus", each online
 * CPU's word and the work it ran at entry (and its audit, with
 * CONFIG_CONTEXT_TRACKING_WORK_DEBUG); "wait_ns", how long a round waits
 * for an isolated CPU in the kernel to return to user space; with
 * CONFIG_CONTEXT_TRACKING_WORK_STATS, "stats", the work run at entry and
 * the audit's and the architecture's counts; with
 * CONFIG_CONTEXT_TRACKING_WORK_DEBUG, "skip_work": the next N entries
 * that take work drop it, for the test that the audit sees it.
 */
static int __init ct_work_debugfs_init(void)
{
	struct dentry *dir = debugfs_create_dir("context_tracking_work", NULL);

	if (CT_WORK_SYNCS_SENT)
		debugfs_create_file("sync_core", 0644, dir, &ct_work_enabled,
				    &ct_work_defer_fops);
	if (CT_WORK_TLB_FLUSHES_DEFERRED)
		debugfs_create_file("tlb_flush", 0644, dir,
				    &ct_work_tlb_enabled,
				    &ct_work_defer_fops);
	debugfs_create_file("cpus", 0444, dir, NULL, &ct_work_cpus_fops);
	debugfs_create_file_unsafe("wait_ns", 0644, dir, NULL,
				   &ct_work_wait_ns_fops);
#ifdef CONFIG_CONTEXT_TRACKING_WORK_STATS
	debugfs_create_file("stats", 0444, dir, NULL, &ct_work_stats_fops);
#endif
	ct_work_audit_debugfs_init(dir);
	return 0;
}
late_initcall(ct_work_debugfs_init);

static int __init ct_work_init(void)
{
	int ret;

	ret = cpuhp_setup_state_nocalls(CPUHP_AP_ONLINE_DYN, "ct_work:online",
					ct_work_cpu_online, NULL);
	return ret < 0 ? ret : 0;
}
early_initcall(ct_work_init);

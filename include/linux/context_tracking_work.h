/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Work for CPUs in user space or idle that waits for their next kernel
 * entry or idle exit instead of interrupting them
 * (kernel/context_tracking_work/): the per-CPU work word, its senders and
 * the hooks context tracking calls.
 *
 * A nohz_full CPU running a user-space task has a per-CPU work word saying
 * "user", and an idle CPU, isolated or not, one saying "idle". A sender
 * that would interrupt it for work that only matters once it runs kernel
 * code again (the sync_core() of a text-poke sync round) sets a work bit
 * there instead, with a compare-and-exchange that succeeds only while the
 * word says "user" or "idle"; the CPU takes the bits, in the same exchange
 * that makes the word say "kernel", at its next kernel entry or idle exit,
 * and runs the work before any text that can be patched at run time.
 *
 * With CONFIG_CONTEXT_TRACKING_WORK, which the options of the work an
 * architecture defers select, with the architecture's
 * <asm/context_tracking_work.h> for what it needs besides (its own
 * accesses to the word, the work it defers), context tracking calls these
 * hooks on CPUs where it is active, with interrupts off and from noinstr
 * code:
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
 *			CONFIG_CONTEXT_TRACKING_WORK_DEBUG, a warning if not).
 *
 * And cpuidle calls, before a driver is registered:
 *
 * ct_work_cpuidle_driver()	its states' enter() run between idle entry
 *			and exit, while work may be pending, which they must
 *			not need: one outside noinstr and cpuidle text
 *			keeps idle CPUs out of deferral from then on.
 *
 * The protocol has a model, kernel/context_tracking_work/ct_work.rs, which
 * the host tests check under every interleaving and against which the
 * ct_work KUnit suite checks the functions of word.c, each named here after
 * the model's function it implements (ct_work::...).
 */
#ifndef _LINUX_CONTEXT_TRACKING_WORK_H
#define _LINUX_CONTEXT_TRACKING_WORK_H

#include <linux/atomic.h>
#include <linux/compiler.h>
#include <linux/compiler_types.h>
#include <linux/percpu.h>
#include <linux/types.h>

struct cpuidle_driver;
struct cpumask;
struct dentry;
struct seq_file;

/*
 * The work word: bit 0 says the CPU is in user space, the work bits are
 * above it, CT_WORK_IDLE says it is idle, with the same work bits
 * (Documentation/core-api/isolation-deferral.rst).
 * A word that is CT_WORK_OFF alone belongs to a CPU that returned to
 * user space with deferral off: it takes no work, and a sender need not
 * wait for it.
 */
#define CT_WORK_USER		0x1
#define CT_WORK_WORK_SHIFT	1
#define CT_WORK_OFF		0x40000000
#define CT_WORK_IDLE		0x20000000
/* "Kernel", and an entry took work it has not run yet: the word alone. */
#define CT_WORK_TAKING		0x80000000

/*
 * Kinds of work, as bits of the word above its context bit. An idle CPU
 * takes only syncs (CT_WORK_IN_IDLE): not kernel TLB flushes, since the
 * idle code reaches the cpuidle driver's state through pointers before
 * idle exit takes the word.
 */
enum ct_work_kind {
	CT_WORK_SYNC_CORE	= 1 << 0,
	CT_WORK_TLB_FLUSH	= 1 << 1,
	CT_WORK_ALL		= CT_WORK_SYNC_CORE | CT_WORK_TLB_FLUSH,
	CT_WORK_IN_IDLE		= CT_WORK_SYNC_CORE,
};

/* What a sender must do about a CPU (ct_work_defer_word()). */
enum ct_work_deferral {
	/* The CPU took the work: it runs it at its next entry, no IPI. */
	CT_WORK_DEFERRED,
	/* In the kernel (or idle, for work it does not take): the IPI. */
	CT_WORK_IPI,
	/* Back in user space with deferral off: the IPI, now. */
	CT_WORK_IPI_NOW,
	/* Offline, or out of range: neither. */
	CT_WORK_OFFLINE,
};

/**
 * struct ct_work_asked - what ct_work_ask() did
 * @deferred: how many isolated CPUs took a work bit (in user space or idle)
 * @idle: how many other CPUs took one, idle
 * @waited: how many of those were found in the kernel and given a while
 *	to return to user space first
 * @expired: isolated CPUs given that while in vain, to be interrupted
 * @sent: isolated CPUs asked that are to be interrupted all the same
 */
struct ct_work_asked {
	unsigned int deferred;
	unsigned int idle;
	unsigned int waited;
	unsigned int expired;
	unsigned int sent;
};

#ifdef CONFIG_CONTEXT_TRACKING_WORK
#include <asm/context_tracking_work.h>

/*
 * Whether the architecture sends syncs to defer (its live text patching)
 * and defers kernel TLB flushes, which turns the switches of each kind on
 * by default.
 */
#ifndef CT_WORK_SYNCS_SENT
#define CT_WORK_SYNCS_SENT		false
#endif
#ifndef CT_WORK_TLB_FLUSHES_DEFERRED
#define CT_WORK_TLB_FLUSHES_DEFERRED	false
#endif

/*
 * The out-of-line parts of the hooks below, in that order:
 * ct_work_user_exit() and ct_work_idle_exit(), ct_work_nmi_enter(),
 * ct_work_nmi_exit().
 */
void __ct_work_take(void);
void __ct_work_nmi_enter(void);
void __ct_work_nmi_exit(void);

DECLARE_PER_CPU_ALIGNED(u32, ct_work_words);
/*
 * The nesting levels of the entries that came while RCU was not watching,
 * CT_WORK_LEVEL_BITS each, the innermost lowest: whether that entry took
 * the word from user space or idle, and whether it took work it has not
 * run yet
 * (ct_work::nmi_enter() in kernel/context_tracking_work/ct_work.rs). An
 * NMI from user space takes the word, and a machine check that nests
 * before the NMI's handler runs must not give the word back on its own
 * exit.
 */
#define CT_WORK_LEVEL_BITS	3
#define CT_WORK_LEVEL_USER	0x1
#define CT_WORK_LEVEL_TOOK	0x2
#define CT_WORK_LEVEL_IDLE	0x4
#define CT_WORK_LEVEL_MASK	0x7
DECLARE_PER_CPU(u32, ct_work_nmi_levels);

/*
 * Whether syncs are deferred: context_tracking_work.sync_core= at boot,
 * context_tracking_work/sync_core in debugfs later.
 */
extern bool ct_work_enabled;
/*
 * Whether kernel TLB flushes are deferred: context_tracking_work.tlb_flush=
 * at boot, context_tracking_work/tlb_flush in debugfs later.
 */
extern bool ct_work_tlb_enabled;
/* Why kernel TLB flushes may never be deferred on this machine, or NULL. */
extern const char *ct_work_tlb_refused;
/*
 * Why idle CPUs may never take deferred work on this machine, or NULL: a
 * cpuidle driver's state enters idle in text outside .noinstr.text and
 * .cpuidle.text (ct_work_cpuidle_driver()). Set once, never cleared.
 */
extern const char *ct_work_idle_refused;

/*
 * ct_work::enter_from(), its first step: this CPU's word from @from, the
 * context it left with no work pending, to kernel, in one
 * compare-and-exchange that a sender which set a bit first makes fail
 * (the caller then takes the work, __ct_work_take()). Locked: senders
 * write the word from other CPUs.
 */
#ifndef arch_ct_work_leave
static __always_inline bool ct_work_leave(u32 from)
{
	return raw_cmpxchg(raw_cpu_ptr(&ct_work_words), from, 0) == from;
}
#else
#define ct_work_leave arch_ct_work_leave
#endif

/*
 * This CPU's word set to @value, ending the state it said: a store-release,
 * so that what this CPU did before (the work it ran, the text it ran) is
 * ordered before the compare-and-exchange of a sender that finds @value.
 * An architecture may give its own (arch_ct_work_store()), a release
 * under its memory model.
 */
#ifndef arch_ct_work_store
static __always_inline void ct_work_store(u32 value)
{
	/* Pairs with the senders' compare-and-exchange (ct_work_defer_word()). */
	smp_store_release(raw_cpu_ptr(&ct_work_words), value);
}
#else
#define ct_work_store arch_ct_work_store
#endif

/*
 * Entry from user space, inlined into __ct_user_exit(): a word that says
 * kernel (0, or CT_WORK_OFF: this CPU left for user space while
 * deferral was off) has no work and gets none meanwhile, and stays as it
 * is until this CPU's next return to user space; one that says user with
 * no work says kernel after one compare-and-exchange.
 */
static __always_inline void ct_work_user_exit(void)
{
	if (raw_cpu_read(ct_work_words) & ~CT_WORK_OFF &&
	    unlikely(!ct_work_leave(CT_WORK_USER)))
		__ct_work_take();
}

/*
 * Return to user space, inlined into ct_kernel_exit() once RCU stopped
 * watching (__ct_user_enter()'s): ct_work::exit() or
 * ct_work::exit_off(). In the kernel the word says kernel (0, or
 * CT_WORK_OFF) and no sender writes it, so a store-release does
 * (ct_work_store()); after it, this CPU runs only noinstr text until it is in
 * user space. Deferral's switches are read here and nowhere on entry:
 * with them off, words say CT_WORK_OFF in user space, every sender
 * sends IPIs at once (a CPU that may stay in user space is not waited
 * for), entry costs one load and exit a store; a CPU that went to user
 * space while they were on still takes its bits at entry. Plain variables,
 * not static keys: this runs in the danger zone.
 */
static __always_inline void ct_work_user_enter(void)
{
	if (READ_ONCE(ct_work_enabled) || READ_ONCE(ct_work_tlb_enabled))
		ct_work_store(CT_WORK_USER);
	else
		ct_work_store(CT_WORK_OFF);
}

/*
 * Idle entry, inlined into ct_kernel_exit() once RCU stopped watching
 * (ct_idle_enter()'s), last: ct_work::idle(). From here to
 * ct_work_idle_exit(), or to an interrupt's ct_work_nmi_enter(),
 * this CPU runs only .cpuidle.text and noinstr text (a cpuidle driver's
 * enter(), which objtool does not follow, checked when the driver
 * registers: ct_work_cpuidle_driver()), and a WARN's report only once
 * the word was taken (word.c). The word says "kernel" and no sender writes
 * it, as on the way to user space; with sync deferral off (an idle CPU
 * takes syncs only, CT_WORK_IN_IDLE), or idle deferral refused, it stays
 * as it is, and senders send the IPI, which wakes the CPU.
 */
static __always_inline void ct_work_idle_enter(void)
{
	if (READ_ONCE(ct_work_enabled) &&
	    likely(!READ_ONCE(ct_work_idle_refused)))
		ct_work_store(CT_WORK_IDLE);
}

/* Idle exit, inlined into ct_idle_exit(), first: as entry from user space. */
static __always_inline void ct_work_idle_exit(void)
{
	if (raw_cpu_read(ct_work_words) & ~CT_WORK_OFF &&
	    unlikely(!ct_work_leave(CT_WORK_IDLE)))
		__ct_work_take();
}

/*
 * Every interrupt from idle comes here too, on every CPU: a word that says
 * "kernel" (0, or CT_WORK_OFF) has no work, and only this CPU makes it
 * say "user" or "idle", so it is only read, and this entry's level is
 * pushed empty, as ct_work::nmi_enter() would push it. An entry that took
 * work says so in the word until it ran it: an entry nesting meanwhile
 * finds other bits.
 */
static __always_inline void ct_work_nmi_enter(void)
{
	if (unlikely(raw_cpu_read(ct_work_words) & ~CT_WORK_OFF))
		__ct_work_nmi_enter();
	else
		raw_cpu_write(ct_work_nmi_levels,
			      raw_cpu_read(ct_work_nmi_levels) <<
			      CT_WORK_LEVEL_BITS);
}

static __always_inline void ct_work_nmi_exit(void)
{
	u32 levels = raw_cpu_read(ct_work_nmi_levels);

	if (unlikely(levels & (CT_WORK_LEVEL_USER | CT_WORK_LEVEL_IDLE)))
		__ct_work_nmi_exit();
	else
		raw_cpu_write(ct_work_nmi_levels,
			      levels >> CT_WORK_LEVEL_BITS);
}

/* How long a sender waits for an isolated CPU in the kernel (wait_ns in debugfs). */
extern unsigned long ct_work_wait_ns;

/* The next online CPU after @cpu, or nr_cpu_ids. */
int ct_work_next_online(int cpu);
/* The next online isolated CPU after @cpu, or nr_cpu_ids. */
int ct_work_next_isolated(int cpu);
/* Whether @cpu is nohz_full. */
bool ct_work_cpu_isolated(int cpu);
/* Whether @cpu runs a task (in the kernel, or entering or leaving user space). */
bool ct_work_cpu_running(int cpu);
/* The work word of @cpu, if it is online. */
u32 *ct_work_word(int cpu);
#ifdef CONFIG_CONTEXT_TRACKING_WORK_KUNIT_TEST
/*
 * For KUnit: ct_idle_enter() on this CPU while context tracking's nesting
 * keeps RCU watching (ct_kernel_exit() returns early), then ct_idle_exit(),
 * all with interrupts off; returns this CPU's word in between.
 */
u32 ct_work_test_idle_enter_watched(void);
/*
 * For KUnit: a WARN on this CPU while its word says idle with a sync a
 * sender added (the "leaked IRQ state" WARN_ONCE() of cpuidle_enter_state()
 * fires there), interrupts off; returns how many times the CPU ran work
 * during the WARN, and its word right after it in @word.
 */
unsigned long ct_work_test_warn_in_idle(u32 *word);
/*
 * For KUnit: registers, then unregisters, a cpuidle driver of one state
 * whose enter() is in .cpuidle.text (@idle_text) or in ordinary text;
 * returns cpuidle_register_driver()'s result, and in @refused what
 * ct_work_idle_refused said right after it.
 */
int ct_work_test_cpuidle_driver(bool idle_text, const char **refused);
/* For KUnit: idle CPUs may take deferred work again. */
void ct_work_test_idle_refusal_clear(void);
#endif
/*
 * The text a CPU may run before it takes its work at entry or idle exit,
 * as [start, end) pairs: .noinstr.text, with .cpuidle.text, where idle
 * runs between ct_idle_enter() and ct_idle_exit() (the linker script's
 * NOINSTR_TEXT puts it between __noinstr_text_start and
 * __noinstr_text_end, and objtool holds it to noinstr's rules), and
 * .entry.text, where the entry code is, and the static call trampolines,
 * which they call (and which live apart, in .static_call.text). A batch
 * that writes any byte of it is never deferred. Data, so that
 * scripts/danger-zone.py checks, in the built image, the very rule the
 * sender follows.
 */
#define CT_WORK_DANGER_RANGES	3
extern const unsigned long ct_work_danger_text[CT_WORK_DANGER_RANGES][2];
/* Bounds of .static_call.text (include/asm-generic/vmlinux.lds.h). */
extern char __static_call_text_start[], __static_call_text_end[];
/*
 * Whether @addr is in a module's noinstr text, where scripts/module.lds.S
 * puts its .cpuidle.text too: the same danger zone in a module (a cpuidle
 * driver's enter callback runs in idle before the CPU takes its work).
 */
bool ct_work_module_danger_text(unsigned long addr);
/*
 * A cpuidle driver registers (__cpuidle_register_driver(), hook patch
 * 0005b): each of its states' enter() and enter_s2idle() runs between
 * ct_idle_enter() and ct_idle_exit(), so it must be in the image's or a
 * module's .noinstr.text or .cpuidle.text. If one is not, idle CPUs never
 * take deferred work again (ct_work_idle_refused), and a warning names
 * the driver, the state and the function.
 */
void ct_work_cpuidle_driver(struct cpuidle_driver *drv);
#ifdef CONFIG_CONTEXT_TRACKING_WORK_DEBUG
/* A sender added the kinds of work @work to @cpu's word. */
void ct_work_audit_added(int cpu, unsigned int work);
#endif
/*
 * RCU watches this CPU again: warns if its word still says user or idle
 * (with CONFIG_CONTEXT_TRACKING_WORK_DEBUG, the only configuration that
 * has it).
 */
void __ct_work_watched(void);

static __always_inline void ct_work_watched(void)
{
	if (IS_ENABLED(CONFIG_CONTEXT_TRACKING_WORK_DEBUG))
		__ct_work_watched();
}

#ifdef CONFIG_CONTEXT_TRACKING_WORK_STATS
/* How many times @cpu ran work it took at entry or idle exit. */
unsigned long ct_work_runs(int cpu);
/* The entry hook's cost, for make demo: ns per entry of @n with @word. */
int ct_work_bench_entry(u32 word, unsigned int n, u64 *ns);
#endif

/* The senders (word.c). */
int ct_work_defer_word(u32 *word, unsigned int work, unsigned int *added);
int ct_work_defer_cpu(int cpu, unsigned int work);
bool ct_work_defer(int cpu, unsigned int work);
void ct_work_ask(unsigned int work, struct cpumask *deferred,
		 struct ct_work_asked *asked);
/*
 * The entry side of the protocol on a word and a CPU's levels, noinstr
 * (word.c): ct_work::enter_taking(), ran(), nmi_enter(), nmi_ran() and
 * nmi_exit() of kernel/context_tracking_work/ct_work.rs.
 */
unsigned int ct_work_enter(u32 *word);
void ct_work_ran(u32 *word);
unsigned int ct_work_nmi_take(u32 *word, u32 *levels);
void ct_work_nmi_ran(u32 *word, u32 *levels);
void ct_work_nmi_give(u32 *word, u32 *levels);

#else /* !CONFIG_CONTEXT_TRACKING_WORK */

static __always_inline void ct_work_user_exit(void) { }
static __always_inline void ct_work_user_enter(void) { }
static __always_inline void ct_work_idle_exit(void) { }
static __always_inline void ct_work_idle_enter(void) { }
static __always_inline void ct_work_nmi_enter(void) { }
static __always_inline void ct_work_nmi_exit(void) { }
static __always_inline void ct_work_watched(void) { }
static inline void ct_work_cpuidle_driver(struct cpuidle_driver *drv) { }

#endif /* CONFIG_CONTEXT_TRACKING_WORK */

/*
 * A kernel TLB flush that CPUs in user space may take at their next kernel
 * entry instead of an IPI: only vmalloc's lazy purge and
 * vm_unmap_aliases(), whose page tables stay. Every other kernel range
 * flush, the one before a page-table page is freed first among them, is
 * flush_tlb_kernel_range(), which reaches every CPU at once; and so is
 * this one where the architecture does not defer it (one that does says
 * why it may).
 */
#ifndef flush_tlb_kernel_range_deferrable
#define flush_tlb_kernel_range_deferrable flush_tlb_kernel_range
#endif

#endif /* _LINUX_CONTEXT_TRACKING_WORK_H */

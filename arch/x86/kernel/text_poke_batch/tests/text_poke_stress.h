/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Executors for the text_poke_batch KUnit stress test (kunit.rs) and the
 * text_poke_bench benchmark: kthreads that run a callback in a loop on
 * other CPUs while the caller flips a static key.
 */
#ifndef _TEXT_POKE_BATCH_TEXT_POKE_STRESS_H
#define _TEXT_POKE_BATCH_TEXT_POKE_STRESS_H

#include <linux/jump_label.h>
#include <linux/types.h>

struct module;

/*
 * A key of the kernel image whose sites are in text_poke_mod_test.ko, and
 * the flag that module's init function waits for.
 */
DECLARE_STATIC_KEY_FALSE(text_poke_batch_mod_key);
extern bool text_poke_batch_mod_go;
/* Set by text_poke_mod_test.ko's init function as it returns. */
extern bool text_poke_batch_mod_returning;
/*
 * The read-only key race of text_poke_mod_rs.ko: armed, the start of @fn
 * on a work item, and what it returned (INT_MIN before it has run; waits
 * for it).
 */
extern bool text_poke_batch_ro_race;
void text_poke_ro_race_start(int (*fn)(void));
int text_poke_ro_race_wait(void);
struct static_key_false *text_poke_batch_upstream_key(void);

/*
 * A key of the kernel image with one site there,
 * text_poke_span_image_site(), and 16 in text_poke_mod_rs.ko. One of its
 * sites at a time can be corrupted, with one-byte NOPs, for the test of
 * refused flips: the first in the kernel image (@mod NULL) or in @mod.
 * text_poke_span_corrupted() says whether it still holds them,
 * text_poke_span_repair() puts back what it held.
 */
DECLARE_STATIC_KEY_FALSE(text_poke_batch_span_key);
bool text_poke_span_image_site(void);
int text_poke_span_corrupt(struct module *mod);
int text_poke_span_corrupted(void);
void text_poke_span_repair(void);

/**
 * struct text_poke_trace - what the text_poke_batch trace events said
 * @batches: text_poke_batch_applied events
 * @sites: their sites, summed
 * @syncs: their sync rounds, summed
 * @ns: their durations, summed
 * @refused: text_poke_batch_refused events
 * @refused_key: the key of the last one
 * @refused_wrong: its sites refused
 */
struct text_poke_trace {
	u64 batches;
	u64 sites;
	u64 syncs;
	u64 ns;
	u64 refused;
	const void *refused_key;
	unsigned int refused_wrong;
};

/* Probes on the events from start to stop (KUnit); start returns 0 or an error. */
int text_poke_trace_start(void);
void text_poke_trace_stop(struct text_poke_trace *seen);

/*
 * Counts the cross-CPU function calls every CPU runs (the csd_function_entry
 * event) from start to stop; start returns 0 or an error.
 */
int text_poke_calls_start(void);
void text_poke_calls_stop(void);
unsigned int text_poke_calls_run(int cpu);

/*
 * Fault injection of the Rust batch's write checks (fail_text_poke_batch): from
 * the @nth check this task makes on, @times checks in a row fail, and no
 * other task's; @nth 0 makes none fail, the attributes as at boot.
 */
void text_poke_write_fail(unsigned int nth, int times);

/*
 * A static call with an inline call site: text_poke_sc_call(x) returns x + 1
 * or, after text_poke_sc_set(true), x + 2 (static_call_update() rewrites the
 * trampoline and the site); text_poke_sc_set(false) goes back.
 */
int text_poke_sc_call(int x);
void text_poke_sc_set(bool two);
/* Its trampoline. */
void *text_poke_sc_tramp(void);

/*
 * Pins the caller to its CPU and starts one executor on each of up to @max
 * other online CPUs, each calling @pass in a loop; @pass returns how many
 * wrong results it saw. Returns the number of executors started, or a
 * negative errno.
 */
int text_poke_stress_start(unsigned long (*pass)(void), unsigned int max);

/*
 * Stops the executors, unpins the caller, and reports the passes they ran
 * and the wrong results they saw.
 */
void text_poke_stress_stop(unsigned long *passes, unsigned long *wrong);

/**
 * struct text_poke_timed - runs of a site by the timed executor
 * @hits: runs that hit an INT3 the text-poke handler emulated
 * @hit_ns: their total time
 * @plain: runs that did not
 * @plain_ns: their total time
 * @hit_med: the median time of a run that hit, of the first
 *	TEXT_POKE_TIMED_SAMPLES such runs
 * @hit_min: the shortest of them
 * @plain_med: the median time of a plain run, of the first
 *	TEXT_POKE_TIMED_SAMPLES such runs
 * @plain_min: the shortest of them
 * @slow: sampled runs, of either kind, that took more than four times
 *	their kind's median: another vCPU ran meanwhile (single-threaded
 *	TCG runs them in turn, and under -icount the clock counts their
 *	instructions too), which the totals include and the medians are
 *	robust to
 *
 * The totals average over every run; the medians and minimums are the
 * figures one run that took long cannot move.
 */
struct text_poke_timed {
	u64 hits;
	u64 hit_ns;
	u64 plain;
	u64 plain_ns;
	u64 hit_med;
	u64 hit_min;
	u64 plain_med;
	u64 plain_min;
	u64 slow;
};

/*
 * Pins the caller to its CPU and starts one executor on another online
 * CPU, calling @site in a loop with interrupts off around each call and
 * timing it. Returns 0 once the executor runs, or a negative errno
 * (-ETIMEDOUT if it did not within a second).
 */
int text_poke_timed_start(unsigned long (*site)(void));

/* Stops the executor, unpins the caller and reports the runs. */
void text_poke_timed_stop(struct text_poke_timed *timed);

/*
 * The deferred kernel TLB flush tests (scripts/guest-test/defer.sh):
 * text_poke_vstorm() runs @n vmalloc()/vfree() pairs of @pages pages,
 * forcing lazy purges with vm_unmap_aliases(). text_poke_vread() reads a
 * one-page vmalloc buffer on the calling CPU, allocating it first;
 * text_poke_vreuse() frees it, purges, and maps the same address again,
 * with new contents and new pages (-EAGAIN if it is taken);
 * text_poke_vcheck() reads that address on the calling CPU, tells whether
 * it was reused and whether the read saw the old contents (a stale TLB
 * entry), and frees it all.
 */
int text_poke_vstorm(unsigned int n, unsigned int pages);
int text_poke_vread(void);
int text_poke_vreuse(void);
int text_poke_vcheck(bool *reused, bool *stale);

/*
 * The flush before a page-table page of vmalloc space is freed, which no
 * CPU may take later (scripts/guest-test/tlb.sh): maps a range of 1 <<
 * @level bytes (PMD_SHIFT or PUD_SHIFT) of vmalloc space one level down (4K
 * pages, or a 2M page), unmaps it, then maps it whole with one huge entry,
 * for which vmap frees the page table under the entry after a flush
 * (pmd_free_pte_page(), pud_free_pmd_page()). The mappings are PAGE_NONE,
 * of physical memory of the kernel image (never accessed, so no second
 * memory type for it or for whatever lies next to it). Sets *@cpus to the
 * online CPUs (the first 64) that took a function-call IPI during that last
 * mapping. -EOPNOTSUPP if no aligned range or no huge mapping (no PSE or
 * GBPAGES, nohugeiomap), -EAGAIN if vmap kept the page table this time.
 */
int text_poke_vtables(unsigned int level, unsigned long *cpus);

/*
 * Holds jump_label_mutex for @ms milliseconds, as a key update in flight
 * does, and lets text_poke_mod_test.ko's init function return meanwhile
 * (text_poke_batch_mod_go): 0, or -EINVAL for more than ten seconds.
 */
int text_poke_hold_jump_label(unsigned int ms);

/* lru_add_drain_all() @n times, for the qpw tests. */
int text_poke_lru_drain(unsigned int n);

/*
 * With CONFIG_FAULT_INJECTION: makes the @n-th fault-injection point the
 * calling task reaches from now on fail (0: none), as a write of @n to
 * /proc/self/fail-nth does, and returns what was left of the previous
 * count: 0 once that point was reached. UINT_MAX without fault injection.
 */
unsigned int text_poke_fail_nth(unsigned int n);

/*
 * The local fast path of per-CPU locks, @n lock-unlock pairs each with
 * interrupts off: an empty call (*@none), a local_lock (*@local) and a qpw
 * lock (*@qpw), in local_clock() ns (guest instructions under -icount
 * shift=0); *@on says whether qpw is on in this boot.
 */
int qpw_lock_bench(unsigned int n, u64 *none, u64 *local, u64 *qpw, bool *on);

/*
 * The fast path of a branch, for the benchmark's branch command: small
 * functions that return x + 1 when their check fails and 3 * x when it
 * passes, each called @n times in a loop with interrupts off.
 * The Rust ones are in text_poke_bench.rs: no check at all, an unlikely
 * site and a likely site of one Rust key, and a relaxed load of an
 * AtomicBool; the C one is an unlikely site of a C key, disabled.
 */
enum text_poke_branch {
	TEXT_POKE_BRANCH_PLAIN,
	TEXT_POKE_BRANCH_UNLIKELY,
	TEXT_POKE_BRANCH_LIKELY,
	TEXT_POKE_BRANCH_ATOMIC,
	TEXT_POKE_BRANCH_C_UNLIKELY,
};

u64 text_poke_branch_plain(u64 x);
u64 text_poke_branch_unlikely(u64 x);
u64 text_poke_branch_likely(u64 x);
u64 text_poke_branch_atomic(u64 x);

/*
 * Runs @which @n times: the loop's local_clock() ns (guest instructions
 * under -icount shift=0) in *@ns, and 0, or -EINVAL.
 */
int text_poke_branch_run(unsigned int which, unsigned int n, u64 *ns);

/* Each site of text_poke_pages.S: its address and its jump target. */
struct text_poke_pages_site {
	unsigned long code;
	unsigned long target;
};

extern const struct text_poke_pages_site text_poke_pages_sites[];
extern const struct text_poke_pages_site text_poke_pages_sites_end[];
/* The same in the test module, in text_poke_mod_pages.S. */
extern const struct text_poke_pages_site text_poke_mod_pages_sites[];
extern const struct text_poke_pages_site text_poke_mod_pages_sites_end[];

/* The KUnit test of the kernel-entry TLB flush: see text_poke_stress.c. */
#define TEXT_POKE_VOLD	0xa1a1a1a1a1a1a1a1ULL
#define TEXT_POKE_VNEW	0xb2b2b2b2b2b2b2b2ULL
int text_poke_tlb_selftest(int way, u64 *stale, u64 *flushed, bool *global);

/* The KUnit test of an NMI into an idle CPU: see text_poke_stress.c. */
int text_poke_nmi_peek(int cpu, unsigned long *runs, u32 *word);

#endif /* _TEXT_POKE_BATCH_TEXT_POKE_STRESS_H */

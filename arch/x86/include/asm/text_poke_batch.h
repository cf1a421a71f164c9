/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The Rust text-poke batch (arch/x86/kernel/text_poke_batch/) behind
 * smp_text_poke_*(): the interface between alternative.c, the C shim and
 * the Rust side.
 */
#ifndef _ASM_X86_TEXT_POKE_BATCH_H
#define _ASM_X86_TEXT_POKE_BATCH_H

#include <linux/atomic.h>
#include <linux/compiler.h>
#include <linux/context_tracking_work.h>
#include <linux/percpu.h>
#include <linux/spinlock_types.h>
#include <linux/types.h>

#include <asm/pgtable_types.h>
#include <asm/ptrace.h>

struct ct_work_asked;
struct mm_struct;

/* The most text pages one temporary mapping of the Rust batch holds. */
#define TEXT_POKE_BATCH_RUN_PAGES	64
/*
 * The most sites text_poke_batch_run_sites() writes at once, in one
 * interrupts-off section (RUN_CHUNK in text_poke_batch/runs.rs).
 */
#define TEXT_POKE_BATCH_RUN_WRITES	64

/**
 * struct text_poke_batch_run - a run of text pages mapped for writing
 * @prev: the mm to switch back to after a chunk of writes
 * @flags: the interrupt state to restore after a chunk of writes
 * @n: the pages mapped
 * @fail: fault injection drops the run's first write (CONFIG_FAIL_TEXT_POKE_BATCH):
 *	set by the Rust batch once the run is mapped
 */
struct text_poke_batch_run {
	struct mm_struct *prev;
	unsigned long flags;
	unsigned int n;
	bool fail;
};

/**
 * struct text_poke_batch_write - a write through a mapped run: a site's
 *	instruction, or a piece of it
 * @at: where, from the start of the run's first page
 * @rel: where the write lies in the text, from _stext: where it is read
 *	back
 * @bytes: what, in the first bytes, and how many, in the last (a write is
 *	six bytes at most)
 *
 * The layout of the Rust batch's RunWrite.
 */
struct text_poke_batch_write {
	u32 at;
	s32 rel;
	u8 bytes[8];
};

#define TEXT_POKE_BATCH_WRITE_MAX	6

/**
 * struct text_poke_batch_site - a site of a batch written a run at a time
 * @w: its whole new instruction, at its place in the run's mapping
 * @old: the bytes it held before the batch
 *
 * The layout of the Rust batch's Slot: made once, in the batch's first
 * phase, for the pieces of it each phase has text_poke_batch_run_sites()
 * write.
 */
struct text_poke_batch_site {
	struct text_poke_batch_write w;
	u8 old[TEXT_POKE_BATCH_WRITE_MAX];
};

#ifdef CONFIG_TEXT_POKE_BATCH_STATS

/*
 * Which implementation serves smp_text_poke_*(): the Rust batch, but in a
 * kernel built for measurement (CONFIG_TEXT_POKE_BATCH_MEASURE), where
 * "text_poke_batch=" picks one at boot.
 */
enum text_poke_batch_mode {
	TEXT_POKE_BATCH_MODE_RUST,
	TEXT_POKE_BATCH_MODE_C,
	TEXT_POKE_BATCH_MODE_SERIAL,
};

/**
 * struct text_poke_batch_stats - what smp_text_poke_*() did, in every mode
 *	(CONFIG_TEXT_POKE_BATCH_STATS): the lines of text_poke_batch/stats
 * @batches: batches applied
 * @entries: sites patched
 * @syncs: sync rounds (one IPI to every other online CPU each)
 * @ipis: function-call IPIs received by all CPUs, whatever sent them: the
 *	sum of the CAL line of /proc/interrupts
 * @int3_hits: INT3s at sites being patched, emulated by the handler
 * @max_batch: the largest batch, in sites
 * @batch_ns: time spent applying batches
 * @max_batch_ns: the longest time one batch took
 * @own_syncs: sync rounds made by the task text_poke_batch_track() follows
 * @own_entries: sites patched by that task
 * @refused: key flips refused because a site held the wrong bytes
 * @mm_switches: switches to the poking mm to write text: one per
 *	text_poke() (per write, in upstream's batch), one per run of pages
 *	in the Rust batch (text_poke_batch_run_map())
 * @unmapped: batches the Rust batch did not apply, writing nothing, because
 *	a page of their text could not be mapped
 */
struct text_poke_batch_stats {
	u64 batches;
	u64 entries;
	u64 syncs;
	u64 ipis;
	u64 int3_hits;
	u64 max_batch;
	u64 batch_ns;
	u64 max_batch_ns;
	u64 own_syncs;
	u64 own_entries;
	u64 refused;
	u64 mm_switches;
	u64 unmapped;
};

DECLARE_PER_CPU(unsigned long, text_poke_batch_int3_hits);

/* Counts an emulated INT3; called from noinstr code. */
static __always_inline void text_poke_batch_note_int3(void)
{
	raw_cpu_inc(text_poke_batch_int3_hits);
}

void text_poke_batch_note_sync(void);
void text_poke_batch_note_batch(unsigned int entries);
void text_poke_batch_note_batch_done(void);
void text_poke_batch_note_mm_switch(void);
unsigned int text_poke_batch_ipis_received(int cpu);
void text_poke_batch_read_stats(struct text_poke_batch_stats *stats);
void text_poke_batch_track(bool on);
void text_poke_batch_count_refused(void);
void text_poke_batch_count_unmapped(void);
void text_poke_batch_note_deferral(const struct ct_work_asked *asked);

#else /* !CONFIG_TEXT_POKE_BATCH_STATS */

static __always_inline void text_poke_batch_note_int3(void)
{
}

static inline void text_poke_batch_note_sync(void)
{
}

static inline void text_poke_batch_note_batch(unsigned int entries)
{
}

static inline void text_poke_batch_note_batch_done(void)
{
}

static inline void text_poke_batch_note_mm_switch(void)
{
}

static inline void text_poke_batch_count_refused(void)
{
}

static inline void text_poke_batch_count_unmapped(void)
{
}

static inline void
text_poke_batch_note_deferral(const struct ct_work_asked *asked)
{
}

#endif /* CONFIG_TEXT_POKE_BATCH_STATS */

#ifdef CONFIG_TEXT_POKE_BATCH_MEASURE

extern int text_poke_batch_mode;
extern const char * const text_poke_batch_mode_names[];

/*
 * The mode only changes (text_poke_batch_set_mode()) with jump_label_mutex and
 * text_mutex held and no batch in flight.
 */
static __always_inline int text_poke_batch_cur_mode(void)
{
	return READ_ONCE(text_poke_batch_mode);
}

static __always_inline bool text_poke_batch_active(void)
{
	return text_poke_batch_cur_mode() != TEXT_POKE_BATCH_MODE_C;
}

static inline const char *text_poke_batch_mode_name(void)
{
	return text_poke_batch_mode_names[text_poke_batch_cur_mode()];
}

int text_poke_batch_set_mode(int mode);

#else /* !CONFIG_TEXT_POKE_BATCH_MEASURE */

/* The Rust batch, if built, is the only implementation. */
static __always_inline bool text_poke_batch_active(void)
{
	return IS_ENABLED(CONFIG_TEXT_POKE_BATCH_RUST);
}

#ifdef CONFIG_TEXT_POKE_BATCH_STATS
static __always_inline int text_poke_batch_cur_mode(void)
{
	return TEXT_POKE_BATCH_MODE_RUST;
}

static inline const char *text_poke_batch_mode_name(void)
{
	return "rust";
}
#endif

#endif /* CONFIG_TEXT_POKE_BATCH_MEASURE */

#ifdef CONFIG_TEXT_POKE_BATCH_RUST

DECLARE_PER_CPU(atomic_t, text_poke_batch_refs);

/**
 * struct text_poke_batch_vec - the batch the INT3 handler sees
 * @sites: the Rust batch's PokeLocs, sorted by address
 * @nr: how many
 * @index: NULL, or the Index of @sites that narrows the handler's search
 *
 * Set by text_poke_batch_publish() before any CPU's count is, cleared by
 * text_poke_batch_retire() once none is; unchanged while a CPU's count is.
 */
struct text_poke_batch_vec {
	const void *sites;
	size_t nr;
	const void *index;
};

extern struct text_poke_batch_vec text_poke_batch_published;

/* A key flip refused: its trace event, and its count. */
void text_poke_batch_note_refused(const void *key, unsigned int wrong);
bool text_poke_batch_reports(void);
void text_poke_batch_poked(const void *addr, const void *old, const void *new,
			   size_t len);

/* text_poke(), untraced, in alternative.c. */
void *text_poke_batch_text_poke(void *addr, const void *opcode, size_t len);

/* fail_text_poke_batch: writes of the Rust batch that do not land. */
extern struct fault_attr fail_text_poke_batch;
bool text_poke_batch_faults_armed(void);
bool text_poke_batch_should_fail(void);

/* Runs of text pages written through one temporary mapping. */
unsigned long text_poke_batch_run_place(unsigned long r);
unsigned long text_poke_batch_run_area(void);
bool text_poke_batch_run_mappable(const unsigned long *pages, unsigned int n);
int text_poke_batch_run_map(struct text_poke_batch_run *run,
			    const unsigned long *pages, unsigned int n);
unsigned int text_poke_batch_run_sites(struct text_poke_batch_run *run,
				       const struct text_poke_batch_site *s,
				       unsigned int n, unsigned int from,
				       unsigned int to, int fill);
void text_poke_batch_run_unmap(struct text_poke_batch_run *run);

/* text_mutex, for the Rust jump-label update. */
void text_poke_batch_assert_text_held(void);

/* The per-CPU reference handshake with the INT3 handler. */
void text_poke_batch_publish(const void *sites, size_t nr, const void *index);
void text_poke_batch_retire(void);

#ifdef CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE
/**
 * struct text_poke_batch_round - one sync round of the Rust batch
 * @deferred_cpus: the CPUs that took a work bit instead of the IPI (set
 *	when any did)
 * @asked: what asking the other CPUs did (ct_work_ask())
 */
struct text_poke_batch_round {
	struct cpumask *deferred_cpus;
	struct ct_work_asked asked;
};

/*
 * The round's CPU mask, cleared: one for all rounds, which text_mutex
 * serialises.
 */
struct cpumask *text_poke_batch_round_mask(void);
/* sync_core() on every online CPU, by IPI but to @round->deferred_cpus. */
void text_poke_batch_sync_round(struct text_poke_batch_round *round);
#endif /* CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE */

/* Implemented in Rust. */
void text_poke_batch_add(void *addr, const void *opcode, size_t len,
			 const void *emulate);
void text_poke_batch_finish(void);
size_t text_poke_batch_pending(void);
int text_poke_batch_finish_checked(void);
/*
 * In a crate of its own (text_poke_batch/text_poke_batch_int3.rs), built to be
 * called from noinstr code.
 */
bool text_poke_batch_emulate(struct pt_regs *regs, const void *sites, size_t nr,
			     const void *index);

/*
 * The INT3 handler, inlined into smp_text_poke_int3_handler(): while a
 * batch is published (this CPU's count is not zero), text_poke_batch_emulate()
 * finds the site and emulates the instruction being written there.
 */
static __always_inline int text_poke_batch_int3_handler(struct pt_regs *regs)
{
	atomic_t *refs;
	int ret;

	if (user_mode(regs))
		return 0;

	/* Pairs with the smp_wmb() in text_poke_batch_publish(). */
	smp_rmb();
	refs = this_cpu_ptr(&text_poke_batch_refs);
	if (!raw_atomic_inc_not_zero(refs))
		return 0;

	ret = text_poke_batch_emulate(regs, text_poke_batch_published.sites,
				      text_poke_batch_published.nr,
				      text_poke_batch_published.index);
	if (ret)
		text_poke_batch_note_int3();

	/* The vector is not read after the reference is dropped. */
	smp_mb__before_atomic();
	raw_atomic_dec(refs);
	return ret;
}

#else /* !CONFIG_TEXT_POKE_BATCH_RUST */

static __always_inline int text_poke_batch_int3_handler(struct pt_regs *regs)
{
	return 0;
}

static inline void text_poke_batch_add(void *addr, const void *opcode,
				       size_t len, const void *emulate)
{
}

static inline void text_poke_batch_finish(void)
{
}

#endif /* CONFIG_TEXT_POKE_BATCH_RUST */

#endif /* _ASM_X86_TEXT_POKE_BATCH_H */

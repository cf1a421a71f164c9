// SPDX-License-Identifier: GPL-2.0
/*
 * C side of the Rust text-poke batch (kernel/jump_label_rs/): the boot
 * parameter that picks the implementation, the noinstr INT3 entry, the
 * per-CPU reference handshake with it, and the counters every mode keeps.
 *
 * text_poke=rust	the Rust batch (default)
 * text_poke=c		upstream's batch in alternative.c, untouched
 * text_poke=serial	the Rust batch, one site per batch: 3 syncs a site,
 *			as before batching
 */

#include <linux/atomic.h>
#include <linux/cpumask.h>
#include <linux/debugfs.h>
#include <linux/init.h>
#include <linux/memory.h>
#include <linux/mutex.h>
#include <linux/perf_event.h>
#include <linux/percpu.h>
#include <linux/printk.h>
#include <linux/sched/clock.h>
#include <linux/seq_file.h>
#include <linux/string.h>

#include <asm/ptrace.h>
#include <asm/text-patching.h>
#include <asm/text_poke_rs.h>

int text_poke_rs_mode __ro_after_init = TEXT_POKE_RS_MODE_RUST;
/* The task whose batch finishes are deferred to its transaction's commit. */
struct task_struct *text_poke_rs_txn_owner;
static DEFINE_MUTEX(text_poke_rs_txn_mutex);
DEFINE_PER_CPU(unsigned long, text_poke_rs_int3_hits);

static DEFINE_PER_CPU(atomic_t, text_poke_rs_refs);
static atomic64_t text_poke_rs_batches;
static atomic64_t text_poke_rs_entries;
static atomic64_t text_poke_rs_syncs;
static atomic64_t text_poke_rs_ipis;
static atomic64_t text_poke_rs_max_batch;
static atomic64_t text_poke_rs_batch_ns;
/* What the tracked task (text_poke_rs_track()) did itself. */
static struct task_struct *text_poke_rs_tracked;
static atomic64_t text_poke_rs_own_syncs;
static atomic64_t text_poke_rs_own_entries;
/* Start of the batch being applied; batches are serialised by text_mutex. */
static u64 text_poke_rs_batch_start;

static int __init text_poke_rs_setup(char *str)
{
	if (!str)
		return -EINVAL;
	if (!strcmp(str, "rust")) {
		text_poke_rs_mode = TEXT_POKE_RS_MODE_RUST;
	} else if (!strcmp(str, "c")) {
		text_poke_rs_mode = TEXT_POKE_RS_MODE_C;
	} else if (!strcmp(str, "serial")) {
		text_poke_rs_mode = TEXT_POKE_RS_MODE_SERIAL;
	} else {
		pr_warn("text_poke=%s: expected rust, c or serial; keeping rust\n",
			str);
		return -EINVAL;
	}
	return 0;
}
early_param("text_poke", text_poke_rs_setup);

/*
 * Count what the calling task does from now on (or stop, with @on false),
 * apart from the rest of the kernel's text patching: tests need exact
 * figures while ftrace or anything else may patch text at the same time.
 */
void text_poke_rs_track(bool on)
{
	WRITE_ONCE(text_poke_rs_tracked, on ? current : NULL);
}

void text_poke_rs_note_sync(void)
{
	if (READ_ONCE(text_poke_rs_tracked) == current)
		atomic64_inc(&text_poke_rs_own_syncs);
	atomic64_inc(&text_poke_rs_syncs);
	atomic64_add(num_online_cpus() - 1, &text_poke_rs_ipis);
}

void text_poke_rs_note_batch(unsigned int entries)
{
	s64 max = atomic64_read(&text_poke_rs_max_batch);

	text_poke_rs_batch_start = local_clock();
	if (READ_ONCE(text_poke_rs_tracked) == current)
		atomic64_add(entries, &text_poke_rs_own_entries);
	atomic64_inc(&text_poke_rs_batches);
	atomic64_add(entries, &text_poke_rs_entries);
	while (entries > max &&
	       !atomic64_try_cmpxchg(&text_poke_rs_max_batch, &max, entries))
		;
}

void text_poke_rs_note_batch_done(void)
{
	atomic64_add(local_clock() - text_poke_rs_batch_start,
		     &text_poke_rs_batch_ns);
}

/*
 * A transaction groups the text pokes of several calls (several static key
 * flips) into one batch, applied at commit. Transactions are serialised;
 * other tasks' pokes go on and may apply the pending sites earlier, which
 * is harmless. Without the Rust batch a transaction only groups the calls.
 */
void text_poke_rs_txn_begin(void)
{
	mutex_lock(&text_poke_rs_txn_mutex);
	mutex_lock(&text_mutex);
	WRITE_ONCE(text_poke_rs_txn_owner, current);
	mutex_unlock(&text_mutex);
}

void text_poke_rs_txn_commit(void)
{
	mutex_lock(&text_mutex);
	WRITE_ONCE(text_poke_rs_txn_owner, NULL);
	if (text_poke_rs_active())
		text_poke_rs_batch_finish();
	mutex_unlock(&text_mutex);
	mutex_unlock(&text_poke_rs_txn_mutex);
}

void text_poke_rs_read_stats(struct text_poke_rs_stats *stats)
{
	int cpu;

	stats->batches = atomic64_read(&text_poke_rs_batches);
	stats->entries = atomic64_read(&text_poke_rs_entries);
	stats->syncs = atomic64_read(&text_poke_rs_syncs);
	stats->ipis = atomic64_read(&text_poke_rs_ipis);
	stats->max_batch = atomic64_read(&text_poke_rs_max_batch);
	stats->batch_ns = atomic64_read(&text_poke_rs_batch_ns);
	stats->own_syncs = atomic64_read(&text_poke_rs_own_syncs);
	stats->own_entries = atomic64_read(&text_poke_rs_own_entries);
	stats->int3_hits = 0;
	for_each_possible_cpu(cpu)
		stats->int3_hits += per_cpu(text_poke_rs_int3_hits, cpu);
}

/*
 * Publish the vector to the INT3 handler before any INT3 is written: a CPU
 * that sees one of our INT3s must find a non-zero count.
 */
void text_poke_rs_publish(void)
{
	int cpu;

	for_each_possible_cpu(cpu)
		atomic_set_release(per_cpu_ptr(&text_poke_rs_refs, cpu), 1);
	/* Counts before INT3s; pairs with smp_rmb() in the INT3 handler. */
	smp_wmb();
}

/*
 * Retire the vector after the last sync: drop the publisher's references
 * and wait for handlers still looking at it.
 */
void text_poke_rs_retire(void)
{
	int cpu;

	for_each_possible_cpu(cpu) {
		atomic_t *refs = per_cpu_ptr(&text_poke_rs_refs, cpu);

		if (unlikely(!atomic_dec_and_test(refs)))
			atomic_cond_read_acquire(refs, !VAL);
	}
}

noinstr int text_poke_rs_int3_handler(struct pt_regs *regs)
{
	struct text_poke_rs_emul emul;
	atomic_t *refs;
	int ret = 0;

	if (user_mode(regs))
		return 0;

	/* Pairs with the smp_wmb() in text_poke_rs_publish(). */
	smp_rmb();
	refs = this_cpu_ptr(&text_poke_rs_refs);
	if (!raw_atomic_inc_not_zero(refs))
		return 0;

	if (!text_poke_rs_lookup(regs->ip - INT3_INSN_SIZE, &emul))
		goto out_put;

	switch (emul.kind) {
	case TEXT_POKE_RS_EMUL_RET:
		int3_emulate_ret(regs);
		break;
	case TEXT_POKE_RS_EMUL_CALL:
		int3_emulate_call(regs, emul.next, emul.target);
		break;
	case TEXT_POKE_RS_EMUL_JMP:
		int3_emulate_jmp(regs, emul.target);
		break;
	case TEXT_POKE_RS_EMUL_JCC:
		int3_emulate_jcc(regs, emul.cc, emul.next,
				 emul.target - emul.next);
		break;
	default:
		/* An INT3 poked on purpose is its owner's to handle. */
		goto out_put;
	}
	text_poke_rs_note_int3();
	ret = 1;

out_put:
	/* The lookup is done before the reference is dropped. */
	smp_mb__before_atomic();
	raw_atomic_dec(refs);
	return ret;
}

/* perf's record of a rewrite, for decoders that walk the text (Intel PT). */
void text_poke_rs_poked(const void *addr, const void *old, const void *new,
			size_t len)
{
	perf_event_text_poke(addr, old, len, new, len);
}

static const char * const text_poke_rs_mode_names[] = {
	[TEXT_POKE_RS_MODE_RUST] = "rust",
	[TEXT_POKE_RS_MODE_C] = "c",
	[TEXT_POKE_RS_MODE_SERIAL] = "serial",
};

static int text_poke_rs_stats_show(struct seq_file *m, void *v)
{
	struct text_poke_rs_stats s;

	text_poke_rs_read_stats(&s);
	seq_printf(m, "mode %s\n", text_poke_rs_mode_names[text_poke_rs_mode]);
	seq_printf(m, "batches %llu\n", s.batches);
	seq_printf(m, "entries %llu\n", s.entries);
	seq_printf(m, "syncs %llu\n", s.syncs);
	seq_printf(m, "ipis %llu\n", s.ipis);
	seq_printf(m, "int3_hits %llu\n", s.int3_hits);
	seq_printf(m, "max_batch %llu\n", s.max_batch);
	seq_printf(m, "batch_ns %llu\n", s.batch_ns);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(text_poke_rs_stats);

/* /sys/kernel/debug/text_poke/stats: the counters, one "name value" a line. */
static int __init text_poke_rs_debugfs_init(void)
{
	struct dentry *dir = debugfs_create_dir("text_poke", NULL);

	debugfs_create_file("stats", 0444, dir, NULL, &text_poke_rs_stats_fops);
	return 0;
}
late_initcall(text_poke_rs_debugfs_init);

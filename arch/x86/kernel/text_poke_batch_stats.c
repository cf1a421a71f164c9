// SPDX-License-Identifier: GPL-2.0
/*
 * What the Rust text-poke batch does, counted (CONFIG_TEXT_POKE_BATCH_STATS,
 * selected by the KUnit suite and by measurement, never by a production
 * kernel): the counters every implementation keeps through the hooks of
 * alternative.c and text_poke_batch.c, the text_poke_batch_applied trace
 * event, and /sys/kernel/debug/text_poke_batch/stats.
 */

#include <linux/atomic.h>
#include <linux/context_tracking_work.h>
#include <linux/debugfs.h>
#include <linux/init.h>
#include <linux/module.h>
#include <linux/percpu.h>
#include <linux/printk.h>
#include <linux/sched.h>
#include <linux/sched/clock.h>
#include <linux/seq_file.h>

#include <asm/hardirq.h>
#include <asm/text_poke_batch.h>

#include <trace/events/text_poke_batch.h>

/*
 * The counters of struct text_poke_batch_stats but the per-CPU ones.
 * CONFIG_TEXT_POKE_BATCH_STATS only.
 */
static struct {
	atomic64_t batches;
	atomic64_t entries;
	atomic64_t syncs;
	atomic64_t max_batch;
	atomic64_t batch_ns;
	atomic64_t max_batch_ns;
	atomic64_t own_syncs;
	atomic64_t own_entries;
	atomic64_t refused;
	atomic64_t mm_switches;
	atomic64_t unmapped;
} text_poke_batch_counts;

DEFINE_PER_CPU(unsigned long, text_poke_batch_int3_hits);

/* The task whose own syncs and entries are counted (text_poke_batch_track()). */
static struct task_struct *text_poke_batch_tracked;
/* Start of the batch being applied; batches are serialised by text_mutex. */
static u64 text_poke_batch_start;

/**
 * text_poke_batch_track - count what the calling task patches, apart
 * @on: start, or stop
 *
 * Counts the sync rounds and sites of the calling task from now on, apart
 * from the rest of the kernel's text patching: tests need exact figures
 * while ftrace or anything else may patch text at the same time.
 */
void text_poke_batch_track(bool on)
{
	WRITE_ONCE(text_poke_batch_tracked, on ? current : NULL);
}

/**
 * text_poke_batch_note_sync - count a sync round
 */
void text_poke_batch_note_sync(void)
{
	if (READ_ONCE(text_poke_batch_tracked) == current)
		atomic64_inc(&text_poke_batch_counts.own_syncs);
	atomic64_inc(&text_poke_batch_counts.syncs);
}

/* Function-call IPIs all CPUs have received. */
static unsigned long text_poke_batch_cal_sum(void)
{
	unsigned long sum = 0;
	int cpu;

	for_each_possible_cpu(cpu)
		sum += READ_ONCE(per_cpu(irq_stat, cpu).counts[IRQ_COUNT_CALL_FUNCTION]);
	return sum;
}

/*
 * Where the batch being applied started, for its trace event: the sync
 * rounds and IPIs counted so far. Read only if the event was on when the
 * batch started (@traced). Batches are applied under text_mutex.
 */
static struct {
	bool traced;
	unsigned int entries;
	s64 syncs;
	unsigned long ipis;
} text_poke_batch_trace;

/**
 * text_poke_batch_note_batch - count a batch that starts
 * @entries: its sites
 *
 * Context: text_mutex held, until text_poke_batch_note_batch_done().
 */
void text_poke_batch_note_batch(unsigned int entries)
{
	s64 max = atomic64_read(&text_poke_batch_counts.max_batch);

	text_poke_batch_trace.traced = trace_text_poke_batch_applied_enabled();
	if (text_poke_batch_trace.traced) {
		text_poke_batch_trace.entries = entries;
		text_poke_batch_trace.syncs = atomic64_read(&text_poke_batch_counts.syncs);
		text_poke_batch_trace.ipis = text_poke_batch_cal_sum();
	}
	text_poke_batch_start = local_clock();
	if (READ_ONCE(text_poke_batch_tracked) == current)
		atomic64_add(entries, &text_poke_batch_counts.own_entries);
	atomic64_inc(&text_poke_batch_counts.batches);
	atomic64_add(entries, &text_poke_batch_counts.entries);
	while (entries > max &&
	       !atomic64_try_cmpxchg(&text_poke_batch_counts.max_batch, &max, entries))
		;
}

/**
 * text_poke_batch_note_mm_switch - count a switch to the poking mm
 *
 * One per text_poke(), or per run of pages of the Rust batch.
 */
void text_poke_batch_note_mm_switch(void)
{
	atomic64_inc(&text_poke_batch_counts.mm_switches);
}

/**
 * text_poke_batch_ipis_received - the function-call IPIs a CPU has received
 * @cpu: the CPU
 *
 * Return: its count on the CAL line of /proc/interrupts.
 */
unsigned int text_poke_batch_ipis_received(int cpu)
{
	return READ_ONCE(per_cpu(irq_stat, cpu).counts[IRQ_COUNT_CALL_FUNCTION]);
}

/**
 * text_poke_batch_note_batch_done - count the time of the batch that ends
 *
 * Emits the text_poke_batch_applied trace event if it was on when the batch
 * started.
 *
 * Context: text_mutex held, since text_poke_batch_note_batch().
 */
void text_poke_batch_note_batch_done(void)
{
	s64 ns = local_clock() - text_poke_batch_start;
	s64 max = atomic64_read(&text_poke_batch_counts.max_batch_ns);

	atomic64_add(ns, &text_poke_batch_counts.batch_ns);
	while (ns > max &&
	       !atomic64_try_cmpxchg(&text_poke_batch_counts.max_batch_ns, &max, ns))
		;
	if (text_poke_batch_trace.traced)
		trace_text_poke_batch_applied(text_poke_batch_trace.entries,
					      atomic64_read(&text_poke_batch_counts.syncs) -
					      text_poke_batch_trace.syncs,
					      text_poke_batch_cal_sum() -
					      text_poke_batch_trace.ipis, ns);
}

/**
 * text_poke_batch_read_stats - read the counters of text patching
 * @stats: where they are stored
 */
void text_poke_batch_read_stats(struct text_poke_batch_stats *stats)
{
	int cpu;

	stats->batches = atomic64_read(&text_poke_batch_counts.batches);
	stats->entries = atomic64_read(&text_poke_batch_counts.entries);
	stats->syncs = atomic64_read(&text_poke_batch_counts.syncs);
	stats->max_batch = atomic64_read(&text_poke_batch_counts.max_batch);
	stats->batch_ns = atomic64_read(&text_poke_batch_counts.batch_ns);
	stats->max_batch_ns = atomic64_read(&text_poke_batch_counts.max_batch_ns);
	stats->own_syncs = atomic64_read(&text_poke_batch_counts.own_syncs);
	stats->own_entries = atomic64_read(&text_poke_batch_counts.own_entries);
	stats->refused = atomic64_read(&text_poke_batch_counts.refused);
	stats->unmapped = atomic64_read(&text_poke_batch_counts.unmapped);
	stats->mm_switches = atomic64_read(&text_poke_batch_counts.mm_switches);
	stats->int3_hits = 0;
	stats->ipis = 0;
	for_each_possible_cpu(cpu) {
		stats->int3_hits += per_cpu(text_poke_batch_int3_hits, cpu);
		stats->ipis += text_poke_batch_ipis_received(cpu);
	}
}

/**
 * text_poke_batch_count_refused - count a key flip refused for a site's bytes
 */
void text_poke_batch_count_refused(void)
{
	atomic64_inc(&text_poke_batch_counts.refused);
}

/**
 * text_poke_batch_count_unmapped - count a batch not applied for a page it could not map
 */
void text_poke_batch_count_unmapped(void)
{
	atomic64_inc(&text_poke_batch_counts.unmapped);
}

/*
 * The deferral's counts: sync rounds of isolated CPUs deferred (of which
 * waited: found in the kernel first) and sent as IPIs (of which
 * wait_expired: waited for in vain), sync rounds of other CPUs deferred
 * while they were idle.
 */
static atomic64_t text_poke_batch_deferred;
static atomic64_t text_poke_batch_deferred_idle;
static atomic64_t text_poke_batch_waited;
static atomic64_t text_poke_batch_wait_expired;
static atomic64_t text_poke_batch_sent;

/**
 * text_poke_batch_note_deferral - count what asking CPUs to take a sync round did
 * @asked: the round's counts, from ct_work_ask()
 */
void text_poke_batch_note_deferral(const struct ct_work_asked *asked)
{
	atomic64_add(asked->deferred, &text_poke_batch_deferred);
	atomic64_add(asked->idle, &text_poke_batch_deferred_idle);
	atomic64_add(asked->waited, &text_poke_batch_waited);
	atomic64_add(asked->expired, &text_poke_batch_wait_expired);
	atomic64_add(asked->sent, &text_poke_batch_sent);
}

static int text_poke_batch_stats_show(struct seq_file *m, void *v)
{
	struct text_poke_batch_stats s;

	text_poke_batch_read_stats(&s);
	seq_printf(m, "mode %s\n", text_poke_batch_mode_name());
	seq_printf(m, "batches %llu\n", s.batches);
	seq_printf(m, "entries %llu\n", s.entries);
	seq_printf(m, "syncs %llu\n", s.syncs);
	seq_printf(m, "ipis %llu\n", s.ipis);
	seq_printf(m, "int3_hits %llu\n", s.int3_hits);
	seq_printf(m, "max_batch %llu\n", s.max_batch);
	seq_printf(m, "batch_ns %llu\n", s.batch_ns);
	seq_printf(m, "max_batch_ns %llu\n", s.max_batch_ns);
	seq_printf(m, "refused %llu\n", s.refused);
	seq_printf(m, "unmapped %llu\n", s.unmapped);
	seq_printf(m, "mm_switches %llu\n", s.mm_switches);
	if (IS_ENABLED(CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE)) {
		seq_printf(m, "deferred %lld\n",
			   atomic64_read(&text_poke_batch_deferred));
		seq_printf(m, "deferred_idle %lld\n",
			   atomic64_read(&text_poke_batch_deferred_idle));
		seq_printf(m, "waited %lld\n", atomic64_read(&text_poke_batch_waited));
		seq_printf(m, "sent %lld\n", atomic64_read(&text_poke_batch_sent));
		seq_printf(m, "wait_expired %lld\n",
			   atomic64_read(&text_poke_batch_wait_expired));
	}
	return 0;
}

static int text_poke_batch_stats_open(struct inode *inode, struct file *file)
{
	return single_open(file, text_poke_batch_stats_show, NULL);
}

/* Any write starts max_batch and max_batch_ns afresh; the counts go on. */
static ssize_t text_poke_batch_stats_write(struct file *file,
					   const char __user *ubuf, size_t count,
					   loff_t *ppos)
{
	atomic64_set(&text_poke_batch_counts.max_batch, 0);
	atomic64_set(&text_poke_batch_counts.max_batch_ns, 0);
	return count;
}

static const struct file_operations text_poke_batch_stats_fops = {
	.owner		= THIS_MODULE,
	.open		= text_poke_batch_stats_open,
	.read		= seq_read,
	.llseek		= seq_lseek,
	.release	= single_release,
	.write		= text_poke_batch_stats_write,
};

/*
 * /sys/kernel/debug/text_poke_batch/stats: the counters (deferral's among
 * them), one "name value" a line after the implementation in use ("mode"),
 * whose maxima a write resets. Deferral's switches are in
 * context_tracking_work/ (kernel/context_tracking_work/word.c).
 */
static int __init text_poke_batch_stats_debugfs(void)
{
	struct dentry *dir = debugfs_create_dir("text_poke_batch", NULL);

	debugfs_create_file("stats", 0644, dir, NULL, &text_poke_batch_stats_fops);
	return 0;
}
late_initcall(text_poke_batch_stats_debugfs);

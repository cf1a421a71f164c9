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
#include <linux/cpu.h>
#include <linux/cpumask.h>
#include <linux/ct_work_rs.h>
#include <linux/debugfs.h>
#include <linux/init.h>
#include <linux/jump_label.h>
#include <linux/memory.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/perf_event.h>
#include <linux/percpu.h>
#include <linux/printk.h>
#include <linux/sched/clock.h>
#include <linux/seq_file.h>
#include <linux/string.h>
#include <linux/uaccess.h>

#include <asm/hardirq.h>
#include <asm/text_poke_rs.h>

int text_poke_rs_mode = TEXT_POKE_RS_MODE_RUST;
DEFINE_PER_CPU(unsigned long, text_poke_rs_int3_hits);

DEFINE_PER_CPU(atomic_t, text_poke_rs_refs);
static atomic64_t text_poke_rs_batches;
static atomic64_t text_poke_rs_entries;
static atomic64_t text_poke_rs_syncs;
static atomic64_t text_poke_rs_max_batch;
static atomic64_t text_poke_rs_batch_ns;
static atomic64_t text_poke_rs_max_batch_ns;
static atomic64_t text_poke_rs_refused;
/* What the tracked task (text_poke_rs_track()) did itself. */
static struct task_struct *text_poke_rs_tracked;
static atomic64_t text_poke_rs_own_syncs;
static atomic64_t text_poke_rs_own_entries;
/* Start of the batch being applied; batches are serialised by text_mutex. */
static u64 text_poke_rs_batch_start;

static const char * const text_poke_rs_mode_names[] = {
	[TEXT_POKE_RS_MODE_RUST] = "rust",
	[TEXT_POKE_RS_MODE_C] = "c",
	[TEXT_POKE_RS_MODE_SERIAL] = "serial",
};

static int __init text_poke_rs_setup(char *str)
{
	int mode = str ? match_string(text_poke_rs_mode_names,
				      ARRAY_SIZE(text_poke_rs_mode_names),
				      str) : -EINVAL;

	if (mode < 0) {
		pr_warn("text_poke=%s: expected rust, c or serial; keeping rust\n",
			str ?: "");
		return -EINVAL;
	}
	text_poke_rs_mode = mode;
	return 0;
}
early_param("text_poke", text_poke_rs_setup);

/*
 * Switch the implementation at run time, so that one boot can measure all
 * three side by side. Nothing may be in flight: text_mutex covers every
 * batch (nothing stays queued in the Rust batch once it is released, so
 * -EBUSY only guards that rule), and jump_label_mutex also covers
 * upstream's jump-label queue, filled with text_mutex dropped between
 * sites.
 */
int text_poke_rs_set_mode(int mode)
{
	int ret = 0;

	if (mode < 0 || mode >= ARRAY_SIZE(text_poke_rs_mode_names))
		return -EINVAL;

	cpus_read_lock();
	jump_label_lock();
	mutex_lock(&text_mutex);
	if (text_poke_rs_pending())
		ret = -EBUSY;
	else
		WRITE_ONCE(text_poke_rs_mode, mode);
	mutex_unlock(&text_mutex);
	jump_label_unlock();
	cpus_read_unlock();
	return ret;
}

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

void text_poke_rs_note_refused(void)
{
	atomic64_inc(&text_poke_rs_refused);
}

/*
 * Key flips refused so far. They are counted under jump_label_mutex, so a
 * holder that reads it before and after an update learns whether that
 * update was refused.
 */
u64 text_poke_rs_refusals(void)
{
	return atomic64_read(&text_poke_rs_refused);
}

void text_poke_rs_text_lock(void)
{
	mutex_lock(&text_mutex);
}

void text_poke_rs_assert_text_held(void)
{
	lockdep_assert_held(&text_mutex);
}

/* Function-call IPIs @cpu has received: the CAL line of /proc/interrupts. */
unsigned int text_poke_rs_ipis_received(int cpu)
{
	return READ_ONCE(per_cpu(irq_stat, cpu).counts[IRQ_COUNT_CALL_FUNCTION]);
}

void text_poke_rs_text_unlock(void)
{
	mutex_unlock(&text_mutex);
}

void text_poke_rs_note_batch_done(void)
{
	s64 ns = local_clock() - text_poke_rs_batch_start;
	s64 max = atomic64_read(&text_poke_rs_max_batch_ns);

	atomic64_add(ns, &text_poke_rs_batch_ns);
	while (ns > max &&
	       !atomic64_try_cmpxchg(&text_poke_rs_max_batch_ns, &max, ns))
		;
}

void text_poke_rs_read_stats(struct text_poke_rs_stats *stats)
{
	int cpu;

	stats->batches = atomic64_read(&text_poke_rs_batches);
	stats->entries = atomic64_read(&text_poke_rs_entries);
	stats->syncs = atomic64_read(&text_poke_rs_syncs);
	stats->max_batch = atomic64_read(&text_poke_rs_max_batch);
	stats->batch_ns = atomic64_read(&text_poke_rs_batch_ns);
	stats->max_batch_ns = atomic64_read(&text_poke_rs_max_batch_ns);
	stats->own_syncs = atomic64_read(&text_poke_rs_own_syncs);
	stats->own_entries = atomic64_read(&text_poke_rs_own_entries);
	stats->refused = atomic64_read(&text_poke_rs_refused);
	stats->int3_hits = 0;
	stats->ipis = 0;
	for_each_possible_cpu(cpu) {
		stats->int3_hits += per_cpu(text_poke_rs_int3_hits, cpu);
		stats->ipis += text_poke_rs_ipis_received(cpu);
	}
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

/* perf's record of a rewrite, for decoders that walk the text (Intel PT). */
void text_poke_rs_poked(const void *addr, const void *old, const void *new,
			size_t len)
{
	perf_event_text_poke(addr, old, len, new, len);
}

static int text_poke_rs_stats_show(struct seq_file *m, void *v)
{
	struct text_poke_rs_stats s;

	text_poke_rs_read_stats(&s);
	seq_printf(m, "mode %s\n",
		   text_poke_rs_mode_names[READ_ONCE(text_poke_rs_mode)]);
	seq_printf(m, "batches %llu\n", s.batches);
	seq_printf(m, "entries %llu\n", s.entries);
	seq_printf(m, "syncs %llu\n", s.syncs);
	seq_printf(m, "ipis %llu\n", s.ipis);
	seq_printf(m, "int3_hits %llu\n", s.int3_hits);
	seq_printf(m, "max_batch %llu\n", s.max_batch);
	seq_printf(m, "batch_ns %llu\n", s.batch_ns);
	seq_printf(m, "max_batch_ns %llu\n", s.max_batch_ns);
	seq_printf(m, "refused %llu\n", s.refused);
	ct_work_rs_stats_show(m);
	return 0;
}

static int text_poke_rs_stats_open(struct inode *inode, struct file *file)
{
	return single_open(file, text_poke_rs_stats_show, NULL);
}

/* Any write starts max_batch and max_batch_ns afresh; the counts go on. */
static ssize_t text_poke_rs_stats_write(struct file *file,
					const char __user *ubuf, size_t count,
					loff_t *ppos)
{
	atomic64_set(&text_poke_rs_max_batch, 0);
	atomic64_set(&text_poke_rs_max_batch_ns, 0);
	return count;
}

static const struct file_operations text_poke_rs_stats_fops = {
	.owner		= THIS_MODULE,
	.open		= text_poke_rs_stats_open,
	.read		= seq_read,
	.llseek		= seq_lseek,
	.release	= single_release,
	.write		= text_poke_rs_stats_write,
};

static int text_poke_rs_mode_show(struct seq_file *m, void *v)
{
	seq_printf(m, "%s\n", text_poke_rs_mode_names[READ_ONCE(text_poke_rs_mode)]);
	return 0;
}

static int text_poke_rs_mode_open(struct inode *inode, struct file *file)
{
	return single_open(file, text_poke_rs_mode_show, NULL);
}

static ssize_t text_poke_rs_mode_write(struct file *file,
				       const char __user *ubuf, size_t count,
				       loff_t *ppos)
{
	char buf[8];
	int mode, ret;

	if (count >= sizeof(buf))
		return -EINVAL;
	if (copy_from_user(buf, ubuf, count))
		return -EFAULT;
	buf[count] = '\0';
	mode = sysfs_match_string(text_poke_rs_mode_names, buf);
	if (mode < 0)
		return mode;
	ret = text_poke_rs_set_mode(mode);
	return ret ?: count;
}

static const struct file_operations text_poke_rs_mode_fops = {
	.owner		= THIS_MODULE,
	.open		= text_poke_rs_mode_open,
	.read		= seq_read,
	.llseek		= seq_lseek,
	.release	= single_release,
	.write		= text_poke_rs_mode_write,
};

/*
 * /sys/kernel/debug/text_poke/: "stats", the counters, one "name value" a
 * line, whose maxima a write resets; "mode", the implementation in use,
 * which a write of rust, c or serial switches; with deferral, "defer" and
 * "cpus" (ct_work_rs.c).
 */
static int __init text_poke_rs_debugfs_init(void)
{
	struct dentry *dir = debugfs_create_dir("text_poke", NULL);

	debugfs_create_file("stats", 0644, dir, NULL, &text_poke_rs_stats_fops);
	debugfs_create_file("mode", 0644, dir, NULL, &text_poke_rs_mode_fops);
	ct_work_rs_debugfs_init(dir);
	return 0;
}
late_initcall(text_poke_rs_debugfs_init);

// SPDX-License-Identifier: GPL-2.0
/*
 * Executors for the text_poke_batch KUnit stress test and the text_poke_bench
 * benchmark: kthreads on CPUs other than the caller's, running the sites of
 * the key under test in a tight loop while the caller flips the key.
 */

#include <linux/cpumask.h>
#include <linux/context_tracking_work.h>
#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/err.h>
#include <linux/fault-inject.h>
#include <linux/export.h>
#include <linux/io.h>
#include <linux/irqflags.h>
#include <linux/jump_label.h>
#include <linux/kthread.h>
#include <linux/memory.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/pgtable.h>
#include <linux/sched.h>
#include <linux/sched/clock.h>
#include <linux/smp.h>
#include <linux/sort.h>
#include <linux/spinlock.h>
#include <linux/static_call.h>
#include <linux/string.h>
#include <linux/swap.h>
#include <linux/text-patching.h>
#include <linux/local_lock.h>
#include <linux/qpw.h>
#include <linux/vmalloc.h>
#include <linux/workqueue.h>
#include <linux/mm.h>
#include <linux/nmi.h>

#include <asm/apic.h>

#include <asm/msr.h>
#include <asm/text_poke_batch.h>
#include <asm/tlbflush.h>

#include <trace/events/csd.h>
#include <trace/events/text_poke_batch.h>

#include "text_poke_stress.h"

#define TEXT_POKE_STRESS_MAX	8

DEFINE_STATIC_KEY_FALSE(text_poke_batch_mod_key);
EXPORT_SYMBOL_GPL(text_poke_batch_mod_key);
bool text_poke_batch_mod_go;
EXPORT_SYMBOL_GPL(text_poke_batch_mod_go);
bool text_poke_batch_mod_returning;
EXPORT_SYMBOL_GPL(text_poke_batch_mod_returning);

/*
 * text_poke_mod_rs.ko's read-only key race, armed by writing Y to
 * /sys/kernel/debug/text_poke_stress/ro_race before the module is loaded:
 * its init waits for text_poke_batch_mod_go, starts @fn on a work item, which
 * changes the key, and returns while the work item waits for
 * jump_label_mutex; text_poke_ro_race_wait() says what @fn returned.
 */
bool text_poke_batch_ro_race;
EXPORT_SYMBOL_GPL(text_poke_batch_ro_race);
static int (*text_poke_ro_fn)(void);
static int text_poke_ro_ret = INT_MIN;

static void text_poke_ro_work_fn(struct work_struct *work)
{
	WRITE_ONCE(text_poke_ro_ret, text_poke_ro_fn());
}

static DECLARE_WORK(text_poke_ro_work, text_poke_ro_work_fn);

/**
 * text_poke_ro_race_start() - start @fn on a work item, for the ro race
 * @fn: the function to run; it changes the key under test
 *
 * Waits for the previous run of the work item, then queues it on
 * system_unbound_wq to run @fn and keep what it returns for
 * text_poke_ro_race_wait().
 *
 * Context: Process context; may sleep.
 */
void text_poke_ro_race_start(int (*fn)(void))
{
	flush_work(&text_poke_ro_work);
	text_poke_ro_fn = fn;
	WRITE_ONCE(text_poke_ro_ret, INT_MIN);
	queue_work(system_unbound_wq, &text_poke_ro_work);
}
EXPORT_SYMBOL_GPL(text_poke_ro_race_start);

/**
 * text_poke_ro_race_wait() - wait for the work item of the ro race
 *
 * Context: Process context; sleeps until the work item has run.
 * Return: what the function given to text_poke_ro_race_start() returned,
 * or INT_MIN if none was started.
 */
int text_poke_ro_race_wait(void)
{
	flush_work(&text_poke_ro_work);
	return READ_ONCE(text_poke_ro_ret);
}
EXPORT_SYMBOL_GPL(text_poke_ro_race_wait);

DEFINE_STATIC_KEY_FALSE(text_poke_batch_span_key);
EXPORT_SYMBOL_GPL(text_poke_batch_span_key);

/**
 * text_poke_span_image_site() - run the image's site of the span key
 *
 * Not inlined: the site of text_poke_batch_span_key in the kernel image is
 * the one in this function.
 *
 * Return: true if the site jumps (the key is enabled and the site holds
 * its JMP), false if it runs on past it.
 */
noinline bool text_poke_span_image_site(void)
{
	return static_branch_unlikely(&text_poke_batch_span_key);
}
EXPORT_SYMBOL_GPL(text_poke_span_image_site);

/* The first site of text_poke_batch_span_key in @mod, or in the kernel image. */
static unsigned long text_poke_span_site(struct module *mod)
{
	struct jump_entry *e = __start___jump_table;
	struct jump_entry *stop = __stop___jump_table;

	if (mod) {
		e = mod->jump_entries;
		stop = e + mod->num_jump_entries;
	}
	for (; e < stop; e++) {
		if (jump_entry_key(e) == &text_poke_batch_span_key.key)
			return jump_entry_code(e);
	}
	return 0;
}

/* The longest static-key site: a 5-byte NOP or JMP. */
#define TEXT_POKE_SPAN_MAX	5

/* The length of the NOP or JMP of a 2- or 5-byte site at @p. */
static unsigned int text_poke_span_len(const u8 *p)
{
	return p[0] == 0xeb || (p[0] == 0x66 && p[1] == 0x90) ? 2 : 5;
}

/*
 * The site corrupted, and what it held before: one at a time. Changed
 * under jump_label_mutex, so that no flip of the key runs meanwhile.
 */
static struct {
	unsigned long code;
	unsigned int len;
	u8 bytes[TEXT_POKE_SPAN_MAX];
} text_poke_span_saved;

static const u8 text_poke_span_nop1s[TEXT_POKE_SPAN_MAX] = {
	[0 ... TEXT_POKE_SPAN_MAX - 1] = 0x90
};

/* Writes @len bytes at @code at once: no CPU may run the site meanwhile. */
static void text_poke_span_write(unsigned long code, const u8 *bytes,
				 unsigned int len)
{
	mutex_lock(&text_mutex);
	text_poke((void *)code, bytes, len);
	smp_text_poke_sync_each_cpu();
	mutex_unlock(&text_mutex);
}

/**
 * text_poke_span_corrupt() - overwrite a site of the span key with NOPs
 * @mod: the module whose site to corrupt, or NULL for the kernel image
 *
 * Saves the bytes of the first site of text_poke_batch_span_key in @mod (2 or
 * 5, told from the NOP or JMP there) and writes as many one-byte NOPs over
 * them, syncing every CPU. One site at a time: text_poke_span_repair()
 * puts the saved bytes back.
 *
 * Context: Process context; takes jump_label_mutex and text_mutex, sleeps.
 * Return: 0, -ENOENT if there is no site of the key in @mod, or -EBUSY if
 * a site is corrupted already.
 */
int text_poke_span_corrupt(struct module *mod)
{
	unsigned long code = text_poke_span_site(mod);
	const u8 *p = (const u8 *)code;
	unsigned int len;
	int ret = 0;

	if (!code)
		return -ENOENT;
	len = text_poke_span_len(p);
	jump_label_lock();
	if (text_poke_span_saved.code) {
		ret = -EBUSY;
	} else {
		text_poke_span_saved.code = code;
		text_poke_span_saved.len = len;
		memcpy(text_poke_span_saved.bytes, p, len);
		text_poke_span_write(code, text_poke_span_nop1s, len);
	}
	jump_label_unlock();
	return ret;
}
EXPORT_SYMBOL_GPL(text_poke_span_corrupt);

/**
 * text_poke_span_corrupted() - whether the corrupted site still holds NOPs
 *
 * Context: Process context; takes jump_label_mutex.
 * Return: 1 if a site is corrupted and still holds the one-byte NOPs
 * text_poke_span_corrupt() wrote there, 0 otherwise.
 */
int text_poke_span_corrupted(void)
{
	int ret;

	jump_label_lock();
	ret = text_poke_span_saved.code &&
	      !memcmp((void *)text_poke_span_saved.code, text_poke_span_nop1s,
		      text_poke_span_saved.len);
	jump_label_unlock();
	return ret;
}
EXPORT_SYMBOL_GPL(text_poke_span_corrupted);

/**
 * text_poke_span_repair() - put back the site text_poke_span_corrupt() changed
 *
 * Writes the saved bytes back over the corrupted site, if there is one,
 * and forgets it, so that another site can be corrupted.
 *
 * Context: Process context; takes jump_label_mutex and text_mutex, sleeps.
 */
void text_poke_span_repair(void)
{
	jump_label_lock();
	if (text_poke_span_saved.code)
		text_poke_span_write(text_poke_span_saved.code,
				     text_poke_span_saved.bytes,
				     text_poke_span_saved.len);
	text_poke_span_saved.code = 0;
	jump_label_unlock();
}
EXPORT_SYMBOL_GPL(text_poke_span_repair);

/*
 * /sys/kernel/debug/text_poke_stress/unapplied_batch: a write makes a
 * batch of smp_text_poke_batch_add() that cannot be applied, the image's
 * site of text_poke_batch_span_key rewritten as it is and a write to the
 * unmapped end of the module area, and finishes it. Its caller cannot be
 * told: the kernel must stop there, as upstream's text_poke() BUG()s. For
 * the boot of scripts/guest-test.sh that checks it does; a write that
 * returns says the batch was dropped.
 */
static ssize_t text_poke_stress_unapplied(struct file *file,
					  const char __user *buf, size_t count,
					  loff_t *ppos)
{
	static const u8 nop5[] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };
	unsigned long bad = MODULES_END - PAGE_SIZE;
	unsigned long code = text_poke_span_site(NULL);
	const u8 *p = (const u8 *)code;
	u8 site[TEXT_POKE_SPAN_MAX];
	unsigned int len;

	if (!code || vmalloc_to_page((void *)bad))
		return -ENXIO;
	len = text_poke_span_len(p);
	memcpy(site, p, len);
	jump_label_lock();
	mutex_lock(&text_mutex);
	smp_text_poke_batch_add((void *)code, site, len, NULL);
	smp_text_poke_batch_add((void *)bad, nop5, sizeof(nop5), NULL);
	smp_text_poke_batch_finish();
	mutex_unlock(&text_mutex);
	jump_label_unlock();
	pr_err("text_poke_stress: a batch that could not be applied returned to its caller\n");
	return -EIO;
}

static const struct file_operations text_poke_stress_unapplied_fops = {
	.owner	= THIS_MODULE,
	.write	= text_poke_stress_unapplied,
};

static int __init text_poke_stress_debugfs_init(void)
{
	struct dentry *dir = debugfs_create_dir("text_poke_stress", NULL);

	debugfs_create_file("unapplied_batch", 0200, dir, NULL,
			    &text_poke_stress_unapplied_fops);
	debugfs_create_bool("ro_race", 0600, dir, &text_poke_batch_ro_race);
	return 0;
}
late_initcall(text_poke_stress_debugfs_init);

/*
 * Probes on the text_poke_batch trace events, for the KUnit tests: what the
 * events of the task that registered them said while they were.
 */
static struct text_poke_trace text_poke_trace_seen;
static struct task_struct *text_poke_trace_task;
static DEFINE_SPINLOCK(text_poke_trace_lock);

static void text_poke_trace_batch(void *data, unsigned int sites,
				  unsigned int syncs, unsigned int ipis, u64 ns)
{
	/* Only the batches of the test's task: others may patch meanwhile. */
	if (current != READ_ONCE(text_poke_trace_task))
		return;
	guard(spinlock_irqsave)(&text_poke_trace_lock);
	text_poke_trace_seen.batches++;
	text_poke_trace_seen.sites += sites;
	text_poke_trace_seen.syncs += syncs;
	text_poke_trace_seen.ns += ns;
}

static void text_poke_trace_refused(void *data, const void *key,
				    unsigned int wrong)
{
	if (current != READ_ONCE(text_poke_trace_task))
		return;
	guard(spinlock_irqsave)(&text_poke_trace_lock);
	text_poke_trace_seen.refused++;
	text_poke_trace_seen.refused_key = key;
	text_poke_trace_seen.refused_wrong = wrong;
}

/**
 * text_poke_trace_start() - count the text_poke_batch events of this task
 *
 * Registers probes on the text_poke_batch_applied and text_poke_batch_refused
 * events and clears the counts: from then on, until
 * text_poke_trace_stop(), the events the calling task emits are counted.
 *
 * Context: Process context; may sleep.
 * Return: 0, or the negative errno of registering a probe (neither probe
 * is left registered then).
 */
int text_poke_trace_start(void)
{
	int ret;

	ret = register_trace_text_poke_batch_applied(text_poke_trace_batch, NULL);
	if (ret)
		return ret;
	ret = register_trace_text_poke_batch_refused(text_poke_trace_refused, NULL);
	if (ret) {
		unregister_trace_text_poke_batch_applied(text_poke_trace_batch, NULL);
		return ret;
	}
	/*
	 * Registering the probes patched the events' own sites (their keys
	 * and static calls): counted from here on only.
	 */
	scoped_guard(spinlock_irqsave, &text_poke_trace_lock)
		memset(&text_poke_trace_seen, 0, sizeof(text_poke_trace_seen));
	WRITE_ONCE(text_poke_trace_task, current);
	return 0;
}

/**
 * text_poke_trace_stop() - stop counting the events and report them
 * @seen: where to store what the events said since text_poke_trace_start()
 *
 * Unregisters the probes and waits for any still running before copying
 * the counts. For a text_poke_trace_start() that returned 0.
 *
 * Context: Process context; sleeps.
 */
void text_poke_trace_stop(struct text_poke_trace *seen)
{
	WRITE_ONCE(text_poke_trace_task, NULL);
	unregister_trace_text_poke_batch_refused(text_poke_trace_refused, NULL);
	unregister_trace_text_poke_batch_applied(text_poke_trace_batch, NULL);
	tracepoint_synchronize_unregister();
	*seen = text_poke_trace_seen;
}

/*
 * Cross-CPU function calls each CPU has run, its own included: an IPI is
 * not sent to a CPU that polls in idle (it runs the call when it leaves the
 * loop), so the CAL line of /proc/interrupts can count fewer calls than
 * were run.
 */
static DEFINE_PER_CPU(unsigned int, text_poke_calls);

static void text_poke_count_call(void *data, smp_call_func_t func,
				 call_single_data_t *csd)
{
	this_cpu_inc(text_poke_calls);
}

/**
 * text_poke_calls_start() - count the cross-CPU function calls CPUs run
 *
 * Registers a probe on the csd_function_entry event that adds one to the
 * count of the CPU running the call. The counts are never reset: compare
 * text_poke_calls_run() before and after. text_poke_calls_stop() ends it.
 *
 * Context: Process context; may sleep.
 * Return: 0, or a negative errno if the probe could not be registered.
 */
int text_poke_calls_start(void)
{
	return register_trace_csd_function_entry(text_poke_count_call, NULL);
}

/**
 * text_poke_calls_stop() - stop counting the cross-CPU function calls
 *
 * Unregisters the probe of text_poke_calls_start() and waits for any still
 * running. The counts stay as they are.
 *
 * Context: Process context; sleeps.
 */
void text_poke_calls_stop(void)
{
	unregister_trace_csd_function_entry(text_poke_count_call, NULL);
	tracepoint_synchronize_unregister();
}

/**
 * text_poke_calls_run() - the cross-CPU function calls a CPU has run
 * @cpu: the CPU
 *
 * Return: how many calls @cpu has run, its own included, while the probe
 * of text_poke_calls_start() was registered, since boot.
 */
unsigned int text_poke_calls_run(int cpu)
{
	return READ_ONCE(per_cpu(text_poke_calls, cpu));
}

#ifdef CONFIG_TEXT_POKE_BATCH_BENCH
/**
 * text_poke_batch_upstream_key() - a key of upstream's with many sites
 *
 * The key of the write_msr tracepoint, for the benchmark: its sites are
 * inlined wherever an MSR is written, over many pages of the kernel image.
 * With no probe attached, an enabled site calls a tracepoint that has
 * nothing to call. Built with CONFIG_TEXT_POKE_BATCH_BENCH.
 *
 * Return: the key of __tracepoint_write_msr.
 */
struct static_key_false *text_poke_batch_upstream_key(void)
{
	return &__tracepoint_write_msr.key;
}
#endif

struct text_poke_stress_exec {
	struct task_struct *task;
	unsigned long (*pass)(void);
	unsigned long passes;
	unsigned long wrong;
};

static struct text_poke_stress_exec text_poke_stress_execs[TEXT_POKE_STRESS_MAX];
static unsigned int text_poke_stress_nr;

static int text_poke_stress_fn(void *data)
{
	struct text_poke_stress_exec *e = data;

	while (!kthread_should_stop()) {
		e->wrong += e->pass();
		e->passes++;
		/*
		 * A spin loop's pause: it also lets a single-threaded TCG
		 * guest move on to the other vCPUs, so that the flipper's
		 * sync IPIs are taken without waiting for a time slice.
		 */
		cpu_relax();
		cond_resched();
	}
	return 0;
}

static int text_poke_sc_one(int x)
{
	return x + 1;
}

static int text_poke_sc_two(int x)
{
	return x + 2;
}

DEFINE_STATIC_CALL(text_poke_batch_sc, text_poke_sc_one);

/**
 * text_poke_sc_call() - call the static call text_poke_batch_sc
 * @x: its argument
 *
 * Not inlined: the call site of text_poke_batch_sc is the one in this
 * function.
 *
 * Return: @x + 1, or @x + 2 after text_poke_sc_set(true).
 */
noinline int text_poke_sc_call(int x)
{
	return static_call(text_poke_batch_sc)(x);
}

/**
 * text_poke_sc_tramp() - the trampoline of text_poke_batch_sc
 *
 * Return: the address of the static call's trampoline.
 */
void *text_poke_sc_tramp(void)
{
	return STATIC_CALL_TRAMP_ADDR(text_poke_batch_sc);
}

/**
 * text_poke_sc_set() - choose the target of text_poke_batch_sc
 * @two: true for the function that returns x + 2, false for x + 1
 *
 * static_call_update() rewrites the trampoline and the call site.
 *
 * Context: Process context; sleeps.
 */
void text_poke_sc_set(bool two)
{
	if (two)
		static_call_update(text_poke_batch_sc, text_poke_sc_two);
	else
		static_call_update(text_poke_batch_sc, text_poke_sc_one);
}

/**
 * text_poke_stress_start() - start executors that run @pass in a loop
 * @pass: run by each executor in a loop; returns the wrong results it saw
 * @max: the most executors to start (TEXT_POKE_STRESS_MAX at most)
 *
 * Pins the caller to its CPU and starts one kthread on each of up to @max
 * other online CPUs, stopping at the first that cannot be created. The
 * caller must call text_poke_stress_stop() afterwards, even if none was
 * started, to stop them and unpin itself.
 *
 * Context: Process context; sleeps.
 * Return: the number of executors started, or -EBUSY if executors are
 * running already (the caller is not pinned then).
 */
int text_poke_stress_start(unsigned long (*pass)(void), unsigned int max)
{
	int self, cpu;

	if (text_poke_stress_nr)
		return -EBUSY;
	max = min(max, TEXT_POKE_STRESS_MAX);

	self = get_cpu();
	set_cpus_allowed_ptr(current, cpumask_of(self));
	put_cpu();

	for_each_online_cpu(cpu) {
		struct text_poke_stress_exec *e;
		struct task_struct *t;

		if (cpu == self || text_poke_stress_nr == max)
			continue;
		e = &text_poke_stress_execs[text_poke_stress_nr];
		*e = (struct text_poke_stress_exec){ .pass = pass };
		t = kthread_create_on_cpu(text_poke_stress_fn, e, cpu,
					  "text_poke_stress/%u");
		if (IS_ERR(t))
			break;
		e->task = t;
		text_poke_stress_nr++;
		wake_up_process(t);
	}
	return text_poke_stress_nr;
}

/**
 * text_poke_stress_stop() - stop the executors and report their passes
 * @passes: where to store the passes they ran, summed
 * @wrong: where to store the wrong results they saw, summed
 *
 * Stops the executors of text_poke_stress_start(), waiting for each, and
 * unpins the caller.
 *
 * Context: Process context; sleeps.
 */
void text_poke_stress_stop(unsigned long *passes, unsigned long *wrong)
{
	unsigned int i;

	*passes = 0;
	*wrong = 0;
	for (i = 0; i < text_poke_stress_nr; i++) {
		kthread_stop(text_poke_stress_execs[i].task);
		*passes += text_poke_stress_execs[i].passes;
		*wrong += text_poke_stress_execs[i].wrong;
	}
	text_poke_stress_nr = 0;
	set_cpus_allowed_ptr(current, cpu_possible_mask);
}

/* The runs of each kind whose times the median is taken of. */
#define TEXT_POKE_TIMED_SAMPLES 1024

static struct text_poke_timed_exec {
	struct task_struct *task;
	unsigned long (*site)(void);
	struct text_poke_timed timed;
	/* It ran the site once; and from when on it counts its runs. */
	bool running;
	bool counting;
	/* The times of the first runs that hit, and of the first plain ones. */
	u64 hit_t[TEXT_POKE_TIMED_SAMPLES];
	u64 plain_t[TEXT_POKE_TIMED_SAMPLES];
} text_poke_timed_exec;

static int text_poke_timed_fn(void *data)
{
	struct text_poke_timed_exec *e = data;

	while (!kthread_should_stop()) {
		unsigned long flags, hits;
		u64 t0, t1;

		/* Interrupts off: a sync IPI must not land inside the timing. */
		local_irq_save(flags);
		hits = __this_cpu_read(text_poke_batch_int3_hits);
		t0 = local_clock();
		e->site();
		t1 = local_clock();
		if (!READ_ONCE(e->counting)) {
			/* Started, not yet flipping: not counted. */
		} else if (__this_cpu_read(text_poke_batch_int3_hits) != hits) {
			if (e->timed.hits < TEXT_POKE_TIMED_SAMPLES)
				e->hit_t[e->timed.hits] = t1 - t0;
			e->timed.hits++;
			e->timed.hit_ns += t1 - t0;
		} else {
			if (e->timed.plain < TEXT_POKE_TIMED_SAMPLES)
				e->plain_t[e->timed.plain] = t1 - t0;
			e->timed.plain++;
			e->timed.plain_ns += t1 - t0;
		}
		local_irq_restore(flags);
		WRITE_ONCE(e->running, true);
		cpu_relax();
		cond_resched();
	}
	return 0;
}

/**
 * text_poke_timed_start() - start an executor that times runs of @site
 * @site: the function the executor calls in a loop
 *
 * Pins the caller to its CPU and starts one kthread on another online CPU
 * that calls @site with interrupts off around each call and times it with
 * local_clock(). A run counts as a hit if it took an INT3 of the text-poke
 * handler on that CPU. Runs are counted once the executor has run @site
 * once. After 0, the caller must call text_poke_timed_stop().
 *
 * Context: Process context; sleeps.
 * Return: 0 once the executor runs; -EBUSY if one is running already;
 * -ENODEV if there is no other online CPU; the error of creating the
 * kthread; or -ETIMEDOUT if it did not run within a second. The caller is
 * unpinned on every error.
 */
int text_poke_timed_start(unsigned long (*site)(void))
{
	struct text_poke_timed_exec *e = &text_poke_timed_exec;
	struct task_struct *t;
	int self, cpu, i;

	if (e->task)
		return -EBUSY;

	self = get_cpu();
	set_cpus_allowed_ptr(current, cpumask_of(self));
	put_cpu();

	cpu = cpumask_any_but(cpu_online_mask, self);
	if (cpu >= nr_cpu_ids) {
		set_cpus_allowed_ptr(current, cpu_possible_mask);
		return -ENODEV;
	}
	*e = (struct text_poke_timed_exec){ .site = site };
	t = kthread_create_on_cpu(text_poke_timed_fn, e, cpu,
				  "text_poke_timed/%u");
	if (IS_ERR(t)) {
		set_cpus_allowed_ptr(current, cpu_possible_mask);
		return PTR_ERR(t);
	}
	e->task = t;
	wake_up_process(t);
	/*
	 * Flips only once the executor runs, in the kernel: its CPU, idle
	 * until then, would take the flips' syncs as work bits, and the
	 * flipping CPU, with no IPI to wait for, might not let it run
	 * before they are over (single-threaded TCG runs another vCPU when
	 * this one waits).
	 */
	for (i = 0; i < HZ && !READ_ONCE(e->running); i++)
		schedule_timeout_uninterruptible(1);
	if (!READ_ONCE(e->running)) {
		kthread_stop(t);
		e->task = NULL;
		set_cpus_allowed_ptr(current, cpu_possible_mask);
		return -ETIMEDOUT;
	}
	WRITE_ONCE(e->counting, true);
	return 0;
}

static int text_poke_timed_cmp(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return x < y ? -1 : x > y;
}

/*
 * Sorts the @n sampled times @t (at most TEXT_POKE_TIMED_SAMPLES) and
 * stores their median and minimum; returns how many took more than four
 * times the median.
 */
static u64 text_poke_timed_stats(u64 *t, u64 n, u64 *med, u64 *min)
{
	u64 i, slow = 0;

	n = min_t(u64, n, TEXT_POKE_TIMED_SAMPLES);
	if (!n)
		return 0;
	sort(t, n, sizeof(*t), text_poke_timed_cmp, NULL);
	*med = t[n / 2];
	*min = t[0];
	for (i = 0; i < n; i++)
		slow += t[i] > 4 * *med;
	return slow;
}

/**
 * text_poke_timed_stop() - stop the timed executor and report its runs
 * @timed: where to store the runs; untouched if no executor was running
 *
 * Stops the executor of text_poke_timed_start(), waiting for it, works out
 * the medians, minimums and slow runs of the sampled times (0 for a kind
 * with no runs), and unpins the caller.
 *
 * Context: Process context; sleeps.
 */
void text_poke_timed_stop(struct text_poke_timed *timed)
{
	struct text_poke_timed_exec *e = &text_poke_timed_exec;

	if (!e->task)
		return;
	kthread_stop(e->task);
	e->task = NULL;
	e->timed.slow = text_poke_timed_stats(e->hit_t, e->timed.hits,
					      &e->timed.hit_med, &e->timed.hit_min) +
			text_poke_timed_stats(e->plain_t, e->timed.plain,
					      &e->timed.plain_med, &e->timed.plain_min);
	*timed = e->timed;
	set_cpus_allowed_ptr(current, cpu_possible_mask);
}

/**
 * text_poke_vstorm() - allocate and free vmalloc memory in a loop
 * @n: how many vmalloc()/vfree() pairs
 * @pages: the pages of each allocation, 1 to 1024
 *
 * Writes each allocation before freeing it, and forces the lazy purge with
 * vm_unmap_aliases() every 64 pairs and at the end.
 *
 * Context: Process context; sleeps.
 * Return: 0, -EINVAL for @n or @pages 0 or @pages over 1024, or -ENOMEM.
 */
int text_poke_vstorm(unsigned int n, unsigned int pages)
{
	unsigned int i;

	if (!n || !pages || pages > 1024)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		void *p = vmalloc(pages * PAGE_SIZE);

		if (!p)
			return -ENOMEM;
		memset(p, i, pages * PAGE_SIZE);
		vfree(p);
		if (i % 64 == 63)
			vm_unmap_aliases();
	}
	vm_unmap_aliases();
	return 0;
}

#ifdef CONFIG_TEXT_POKE_BATCH_BENCH
static DEFINE_STATIC_KEY_FALSE(text_poke_branch_key);

static noinline u64 text_poke_branch_c_unlikely(u64 x)
{
	if (static_branch_unlikely(&text_poke_branch_key))
		return x * 3;
	return x + 1;
}

/*
 * Inlined with a constant @fn, the loop calls it directly: one loop per
 * function, no indirect call.
 */
static __always_inline u64 text_poke_branch_loop(u64 (*fn)(u64), unsigned int n)
{
	unsigned long flags;
	u64 t0, t, x = 0;

	local_irq_save(flags);
	t0 = local_clock();
	while (n--) {
		x = fn(x);
		OPTIMIZER_HIDE_VAR(x);
	}
	t = local_clock() - t0;
	local_irq_restore(flags);
	return t;
}

/**
 * text_poke_branch_run() - time @n calls of a branch function
 * @which: the function, an enum text_poke_branch
 * @n: how many times to call it
 * @ns: where to store the time of the loop
 *
 * Calls the function in a loop with interrupts off and measures the loop
 * with local_clock() (guest instructions under -icount shift=0). Built with
 * CONFIG_TEXT_POKE_BATCH_BENCH.
 *
 * Return: 0, or -EINVAL for an unknown @which (*@ns is not set then).
 */
int text_poke_branch_run(unsigned int which, unsigned int n, u64 *ns)
{
	switch (which) {
	case TEXT_POKE_BRANCH_PLAIN:
		*ns = text_poke_branch_loop(text_poke_branch_plain, n);
		return 0;
	case TEXT_POKE_BRANCH_UNLIKELY:
		*ns = text_poke_branch_loop(text_poke_branch_unlikely, n);
		return 0;
	case TEXT_POKE_BRANCH_LIKELY:
		*ns = text_poke_branch_loop(text_poke_branch_likely, n);
		return 0;
	case TEXT_POKE_BRANCH_ATOMIC:
		*ns = text_poke_branch_loop(text_poke_branch_atomic, n);
		return 0;
	case TEXT_POKE_BRANCH_C_UNLIKELY:
		*ns = text_poke_branch_loop(text_poke_branch_c_unlikely, n);
		return 0;
	}
	return -EINVAL;
}
#endif

/*
 * The local fast path of a per-CPU lock: lock and unlock, nothing in
 * between, each variant in a function of its own that the loop calls.
 */
static DEFINE_PER_CPU(local_lock_t, text_poke_bench_ll) = INIT_LOCAL_LOCK(text_poke_bench_ll);
static DEFINE_PER_CPU(struct qpw_lock, qpw_bench_lock) = QPW_LOCK_UNLOCKED;

static noinline void text_poke_lock_none(void)
{
	barrier();
}

static noinline void text_poke_lock_local(void)
{
	local_lock(&text_poke_bench_ll);
	local_unlock(&text_poke_bench_ll);
}

static noinline void text_poke_lock_qpw(void)
{
	local_qpw_lock(&qpw_bench_lock);
	local_qpw_unlock(&qpw_bench_lock);
}

static u64 text_poke_lock_loop(void (*pass)(void), unsigned int n)
{
	unsigned long flags;
	u64 t0, t;

	local_irq_save(flags);
	t0 = local_clock();
	while (n--)
		pass();
	t = local_clock() - t0;
	local_irq_restore(flags);
	return t;
}

/**
 * qpw_lock_bench() - time the local fast path of per-CPU locks
 * @n: how many lock-unlock pairs of each kind
 * @none: where to store the time of @n calls of an empty function
 * @local: where to store the time of @n local_lock pairs
 * @qpw: where to store the time of @n qpw lock pairs
 * @on: where to store whether qpw is on in this boot
 *
 * Each loop runs with interrupts off and is measured with local_clock()
 * (guest instructions under -icount shift=0).
 *
 * Return: 0, or -EINVAL for @n 0.
 */
int qpw_lock_bench(unsigned int n, u64 *none, u64 *local, u64 *qpw, bool *on)
{
	if (!n)
		return -EINVAL;
	*none = text_poke_lock_loop(text_poke_lock_none, n);
	*local = text_poke_lock_loop(text_poke_lock_local, n);
	*qpw = text_poke_lock_loop(text_poke_lock_qpw, n);
	*on = qpw_enabled();
	return 0;
}

/**
 * text_poke_lru_drain() - run lru_add_drain_all() @n times
 * @n: how many times
 *
 * Context: Process context; sleeps.
 * Return: 0, or -EINVAL for @n 0.
 */
int text_poke_lru_drain(unsigned int n)
{
	if (!n)
		return -EINVAL;
	while (n--) {
		lru_add_drain_all();
		cond_resched();
	}
	return 0;
}

/**
 * text_poke_hold_jump_label() - hold jump_label_mutex for a while
 * @ms: how long, in milliseconds, ten seconds at most
 *
 * Holds the mutex as a key update in flight does, with text_poke_batch_mod_go
 * set meanwhile so that text_poke_mod_test.ko's init function can return.
 *
 * Context: Process context; sleeps.
 * Return: 0, or -EINVAL for more than ten seconds.
 */
int text_poke_hold_jump_label(unsigned int ms)
{
	if (ms > 10000)
		return -EINVAL;
	jump_label_lock();
	WRITE_ONCE(text_poke_batch_mod_go, true);
	msleep(ms);
	WRITE_ONCE(text_poke_batch_mod_go, false);
	jump_label_unlock();
	return 0;
}

#ifdef CONFIG_FAIL_TEXT_POKE_BATCH
/**
 * text_poke_write_fail() - make the write checks of the Rust batch fail
 * @nth: the first check of this task to fail, counting from 1; 0 for none
 * @times: how many checks in a row fail from there (-1: no limit)
 *
 * Sets the fail_text_poke_batch attributes and marks the calling task, the only
 * one whose checks fail. @nth 0 puts the attributes back as at boot and
 * unmarks the task: the caller must do that when done. Built with
 * CONFIG_FAIL_TEXT_POKE_BATCH.
 */
void text_poke_write_fail(unsigned int nth, int times)
{
	bool on = nth;

	fail_text_poke_batch.probability = on ? 100 : 0;
	fail_text_poke_batch.interval = 1;
	fail_text_poke_batch.count = 0;
	/* Every check before the @nth uses up one of @nth's space. */
	atomic_set(&fail_text_poke_batch.space, nth);
	fail_text_poke_batch.verbose = on ? 0 : 2;
	fail_text_poke_batch.task_filter = on;
	atomic_set(&fail_text_poke_batch.times, on ? times : 1);
	current->make_it_fail = on;
}
#endif

/**
 * text_poke_fail_nth() - set the fail-nth count of the calling task
 * @n: the fault-injection point to fail, counting from 1; 0 for none
 *
 * As a write of @n to /proc/self/fail-nth does, with
 * CONFIG_FAULT_INJECTION.
 *
 * Return: what was left of the previous count, 0 once its point was
 * reached; UINT_MAX without CONFIG_FAULT_INJECTION.
 */
unsigned int text_poke_fail_nth(unsigned int n)
{
#ifdef CONFIG_FAULT_INJECTION
	unsigned int left = READ_ONCE(current->fail_nth);

	WRITE_ONCE(current->fail_nth, n);
	return left;
#else
	return UINT_MAX;
#endif
}

/* The buffer of the stale-mapping test, its address, and its first page. */
static u64 *text_poke_vbuf;
static unsigned long text_poke_vaddr;
static struct page *text_poke_vold;
static bool text_poke_vreused;
static DEFINE_MUTEX(text_poke_vlock);

/**
 * text_poke_vread() - read the stale-mapping test's buffer on this CPU
 *
 * Allocates the one-page vmalloc buffer first, filled with TEXT_POKE_VOLD,
 * if there is none, then reads its first word through this CPU's TLB.
 *
 * Context: Process context; sleeps.
 * Return: 0, -ENOMEM, or -EIO if the word read is not TEXT_POKE_VOLD.
 */
int text_poke_vread(void)
{
	int ret = 0;

	mutex_lock(&text_poke_vlock);
	if (!text_poke_vbuf) {
		text_poke_vbuf = vmalloc(PAGE_SIZE);
		if (!text_poke_vbuf) {
			ret = -ENOMEM;
			goto out;
		}
		memset64(text_poke_vbuf, TEXT_POKE_VOLD, PAGE_SIZE / 8);
		text_poke_vaddr = (unsigned long)text_poke_vbuf;
		text_poke_vreused = false;
	}
	/* Through this CPU's TLB. */
	if (READ_ONCE(*text_poke_vbuf) != TEXT_POKE_VOLD)
		ret = -EIO;
out:
	mutex_unlock(&text_poke_vlock);
	return ret;
}

/**
 * text_poke_vreuse() - map the buffer's address again, to new pages
 *
 * Frees the buffer of text_poke_vread(), keeping a reference to its old
 * page so that its contents stay, purges the lazy vmalloc areas (the
 * kernel TLB flush), and allocates one page at the same address, filled
 * with TEXT_POKE_VNEW. If it gets another address, it frees all of it.
 *
 * Context: Process context; sleeps.
 * Return: 0, -EINVAL if there is no buffer or it was reused already, or
 * -EAGAIN if the address could not be had again.
 */
int text_poke_vreuse(void)
{
	unsigned long addr = text_poke_vaddr;
	void *p;
	int ret = 0;

	mutex_lock(&text_poke_vlock);
	if (!text_poke_vbuf || text_poke_vreused) {
		ret = -EINVAL;
		goto out;
	}
	/* The old page keeps its contents: a stale entry would still see them. */
	text_poke_vold = vmalloc_to_page(text_poke_vbuf);
	get_page(text_poke_vold);
	vfree(text_poke_vbuf);
	text_poke_vbuf = NULL;
	/* The lazy purge, and its kernel TLB flush. */
	vm_unmap_aliases();
	/* The same address again (and its guard page), new pages. */
	p = __vmalloc_node_range(PAGE_SIZE, PAGE_SIZE, addr, addr + 2 * PAGE_SIZE,
				 GFP_KERNEL, PAGE_KERNEL, 0, NUMA_NO_NODE,
				 __builtin_return_address(0));
	if ((unsigned long)p != addr) {
		vfree(p);
		put_page(text_poke_vold);
		text_poke_vold = NULL;
		ret = -EAGAIN;
		goto out;
	}
	memset64(p, TEXT_POKE_VNEW, PAGE_SIZE / 8);
	text_poke_vbuf = p;
	text_poke_vreused = true;
out:
	mutex_unlock(&text_poke_vlock);
	return ret;
}

/**
 * text_poke_vcheck() - check the reused address on this CPU and free it
 * @reused: where to store whether text_poke_vreuse() mapped it again
 * @stale: where to store whether this CPU's read of it did not see
 *	TEXT_POKE_VNEW (a stale TLB entry); false if it was not reused
 *
 * Frees the buffer and the old page and forgets the address.
 *
 * Context: Process context; sleeps.
 * Return: 0.
 */
int text_poke_vcheck(bool *reused, bool *stale)
{
	mutex_lock(&text_poke_vlock);
	*reused = text_poke_vreused;
	*stale = false;
	if (text_poke_vreused) {
		/* Through this CPU's TLB, as its last entry left it. */
		*stale = READ_ONCE(*(u64 *)text_poke_vaddr) != TEXT_POKE_VNEW;
		vfree(text_poke_vbuf);
		put_page(text_poke_vold);
	} else {
		vfree(text_poke_vbuf);
	}
	text_poke_vbuf = NULL;
	text_poke_vold = NULL;
	text_poke_vreused = false;
	mutex_unlock(&text_poke_vlock);
	return 0;
}

/* Whether the entry of vmalloc space mapping @addr at @level is a leaf. */
static bool text_poke_vleaf(unsigned long addr, unsigned int level)
{
	pgd_t *pgd = pgd_offset_k(addr);
	p4d_t *p4d;
	pud_t *pud;

	if (pgd_none(*pgd))
		return false;
	p4d = p4d_offset(pgd, addr);
	if (p4d_none(*p4d))
		return false;
	pud = pud_offset(p4d, addr);
	if (level == PUD_SHIFT)
		return pud_leaf(*pud);
	return pud_present(*pud) && !pud_leaf(*pud) &&
	       pmd_leaf(*pmd_offset(pud, addr));
}

/**
 * text_poke_vtables() - map a range whole after one level down
 * @level: PMD_SHIFT or PUD_SHIFT, the size of the range as a shift
 * @cpus: where to store the CPUs that took a function-call IPI meanwhile
 *
 * Maps a range of 1 << @level bytes of vmalloc space one level down (4K
 * pages, or a 2M page), unmaps it, purges, then maps it whole with one
 * huge entry, all PAGE_NONE, of physical memory of the kernel image. Sets
 * *@cpus to the online CPUs, of the first 64, whose function-call IPI
 * count changed during that last mapping; it is not set on the errors
 * before it. Unmaps and frees the range again.
 *
 * Context: Process context; sleeps.
 * Return: 0; -EINVAL for another @level; -EOPNOTSUPP if there is no huge
 * mapping at @level or no aligned range; -ENOMEM; the error of a mapping;
 * or -EAGAIN if vmap kept the page table this time.
 */
int text_poke_vtables(unsigned int level, unsigned long *cpus)
{
	unsigned long size = 1UL << level, addr;
	/* Physical memory of the kernel image, aligned; never accessed. */
	phys_addr_t phys = __pa_symbol(_text) & ~(size - 1);
	unsigned int before[NR_CPUS > 64 ? 64 : NR_CPUS];
	struct vm_struct *area;
	int cpu, ret;

	if (level != PMD_SHIFT && level != PUD_SHIFT)
		return -EINVAL;
	if (level == PUD_SHIFT ? !arch_vmap_pud_supported(PAGE_NONE) :
				 !arch_vmap_pmd_supported(PAGE_NONE))
		return -EOPNOTSUPP;
	/* VM_IOREMAP: aligned to its size. */
	area = get_vm_area(size, VM_IOREMAP);
	if (!area)
		return -ENOMEM;
	addr = (unsigned long)area->addr;
	ret = -EOPNOTSUPP;
	if (!IS_ALIGNED(addr, size))
		goto out;
	/*
	 * One level down first: a page table under the entry. 4K pages of
	 * an address that is not 2M-aligned, or one 2M page.
	 */
	ret = vmap_page_range(addr, addr + PMD_SIZE,
			      phys + (level == PMD_SHIFT ? PAGE_SIZE : 0),
			      PAGE_NONE);
	if (ret)
		goto out;
	vunmap_range(addr, addr + PMD_SIZE);
	/* Nothing lazy left to purge meanwhile. */
	vm_unmap_aliases();

	for_each_online_cpu(cpu)
		if (cpu < ARRAY_SIZE(before))
			before[cpu] = text_poke_batch_ipis_received(cpu);
	/* The page table freed, after a flush, and one huge entry made. */
	ret = vmap_page_range(addr, addr + size, phys, PAGE_NONE);
	*cpus = 0;
	for_each_online_cpu(cpu)
		if (cpu < ARRAY_SIZE(before) &&
		    text_poke_batch_ipis_received(cpu) != before[cpu])
			*cpus |= BIT(cpu);
	if (!ret && !text_poke_vleaf(addr, level))
		ret = -EAGAIN;
	vunmap_range(addr, addr + size);
out:
	free_vm_area(area);
	vm_unmap_aliases();
	return ret;
}

#ifdef CONFIG_CONTEXT_TRACKING_WORK_TLB_FLUSH
/**
 * text_poke_tlb_selftest() - the KUnit test of the entry's TLB flush
 * @way: an enum ct_work_flush, or negative for the entry's own way
 * @stale: where to store what the read after the PTE change saw
 * @flushed: where to store what the read after the flush saw
 * @global: where to store whether the vmalloc mapping was global
 *
 * With interrupts off: reads a vmalloc page on this CPU (its translation
 * now in the TLB), points its PTE at another page without a flush, reads
 * it again (QEMU's TLB, as a CPU's, keeps the old translation), flushes as
 * the entry does (ct_work_flush_tlb_local()) and reads a third time. The
 * reads see TEXT_POKE_VOLD or TEXT_POKE_VNEW. Then puts the PTE back,
 * flushes and frees both pages. Built with CONFIG_CONTEXT_TRACKING_WORK_TLB_FLUSH.
 *
 * Context: Process context; sleeps.
 * Return: the way that flushed; -EINVAL for a way not correct on this CPU,
 * or, with nothing stored, if the page is not mapped with a 4K PTE; or
 * -ENOMEM.
 */
int text_poke_tlb_selftest(int way, u64 *stale, u64 *flushed, bool *global)
{
	struct page *page;
	unsigned long flags;
	unsigned int level;
	pte_t *ptep, old;
	u64 *buf;

	buf = vmalloc(PAGE_SIZE);
	page = alloc_page(GFP_KERNEL);
	if (!buf || !page) {
		vfree(buf);
		if (page)
			__free_page(page);
		return -ENOMEM;
	}
	memset64(buf, TEXT_POKE_VOLD, PAGE_SIZE / 8);
	memset64(page_address(page), TEXT_POKE_VNEW, PAGE_SIZE / 8);
	ptep = lookup_address((unsigned long)buf, &level);
	if (!ptep || level != PG_LEVEL_4K) {
		vfree(buf);
		__free_page(page);
		return -EINVAL;
	}
	local_irq_save(flags);
	(void)READ_ONCE(*buf);
	old = *ptep;
	*global = pte_flags(old) & _PAGE_GLOBAL;
	set_pte(ptep, mk_pte(page, PAGE_KERNEL));
	*stale = READ_ONCE(*buf);
	way = ct_work_flush_tlb_local(way);
	*flushed = READ_ONCE(*buf);
	set_pte(ptep, old);
	local_irq_restore(flags);
	flush_tlb_kernel_range((unsigned long)buf, (unsigned long)buf + PAGE_SIZE);
	vfree(buf);
	__free_page(page);
	return way;
}
#endif

/*
 * register_nmi_handler() is x86's (<asm/nmi.h>), which <linux/nmi.h>
 * includes where ACPI's NMI handling is built: with ACPI, as every
 * configuration of these tests has it (QEMU calibrates the TSC from its
 * tables).
 */
#if defined(CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE) && \
	defined(CONFIG_CONTEXT_TRACKING_WORK_STATS) && \
	defined(CONFIG_HAVE_ACPI_APEI_NMI)
/* What text_poke_nmi_probe() saw on the CPU it was sent to. */
static struct {
	int cpu;
	bool seen;
	unsigned long runs;
	u32 word;
} text_poke_nmi = { .cpu = -1 };

static int text_poke_nmi_probe(unsigned int cmd, struct pt_regs *regs)
{
	int cpu = smp_processor_id();

	if (READ_ONCE(text_poke_nmi.cpu) != cpu)
		return NMI_DONE;
	text_poke_nmi.runs = ct_work_runs(cpu);
	text_poke_nmi.word = READ_ONCE(*ct_work_word(cpu));
	WRITE_ONCE(text_poke_nmi.cpu, -1);
	/* Pairs with the acquires of text_poke_nmi_peek(): runs and word first. */
	smp_store_release(&text_poke_nmi.seen, true);
	return NMI_HANDLED;
}

/**
 * text_poke_nmi_peek() - what an NMI's handler sees of a CPU's deferred work
 * @cpu: the CPU to send the NMI to: online, and not the caller's
 * @runs: where to store how many times @cpu had run deferred work
 * @word: where to store what its work word said
 *
 * Sends an NMI to @cpu and reads what its handler saw, after the NMI's
 * entry (ct_nmi_enter()) took the word.
 *
 * Context: Process context; sleeps.
 * Return: 0; the error of register_nmi_handler(); or -ETIMEDOUT if the
 * handler had not run after 1000 waits of 1 to 2 ms.
 */
int text_poke_nmi_peek(int cpu, unsigned long *runs, u32 *word)
{
	int i, ret;

	ret = register_nmi_handler(NMI_LOCAL, text_poke_nmi_probe, 0,
				   "text_poke_batch_kunit");
	if (ret)
		return ret;
	WRITE_ONCE(text_poke_nmi.seen, false);
	WRITE_ONCE(text_poke_nmi.cpu, cpu);
	__apic_send_IPI(cpu, NMI_VECTOR);
	/* Pairs with the handler's release: its runs and word are seen. */
	for (i = 0; i < 1000 && !smp_load_acquire(&text_poke_nmi.seen); i++)
		usleep_range(1000, 2000);
	WRITE_ONCE(text_poke_nmi.cpu, -1);
	/* Waits for any handler still running. */
	unregister_nmi_handler(NMI_LOCAL, "text_poke_batch_kunit");
	/* As above. */
	if (!smp_load_acquire(&text_poke_nmi.seen))
		return -ETIMEDOUT;
	*runs = text_poke_nmi.runs;
	*word = text_poke_nmi.word;
	return 0;
}
#endif

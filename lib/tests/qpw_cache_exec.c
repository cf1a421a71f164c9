// SPDX-License-Identifier: GPL-2.0
/*
 * The executors of the qpw_cache KUnit suite: its cache is used from
 * kthreads on other CPUs and from a hard interrupt while the suite drains
 * it, and its allocations are made to fail one by one.
 */

#include <linux/completion.h>
#include <linux/cpu.h>
#include <linux/cpuhotplug.h>
#include <linux/cpumask.h>
#include <linux/debug_locks.h>
#include <linux/delay.h>
#include <linux/err.h>
#include <linux/errno.h>
#include <linux/irq_work.h>
#include <linux/jump_label.h>
#include <linux/kallsyms.h>
#include <linux/ktime.h>
#include <linux/kthread.h>
#include <linux/limits.h>
#include <linux/local_lock.h>
#include <linux/lockdep.h>
#include <linux/minmax.h>
#include <linux/moduleparam.h>
#include <linux/percpu.h>
#include <linux/processor.h>
#include <linux/qpw.h>
#include <linux/rtmutex.h>
#include <linux/sched.h>
#include <linux/smp.h>
#include <linux/string.h>
#include <linux/workqueue.h>
#include <kunit/test.h>
#include <kunit/test-bug.h>
#include <trace/events/qpw.h>

#ifdef CONFIG_TEXT_POKE_BATCH_RUST
#include <linux/memory.h>
#include <linux/text-patching.h>
#include <asm/text_poke_batch.h>
#endif

#include "qpw_cache_exec.h"

#define QPW_CACHE_EXEC_MAX	4

struct qpw_cache_exec {
	struct task_struct *task;
	unsigned long (*pass)(void);
	unsigned long passes;
	unsigned long wrong;
};

static struct qpw_cache_exec qpw_cache_execs[QPW_CACHE_EXEC_MAX];
static unsigned int qpw_cache_exec_nr;

static int qpw_cache_exec_fn(void *data)
{
	struct qpw_cache_exec *e = data;

	while (!kthread_should_stop()) {
		e->wrong += e->pass();
		e->passes++;
		/*
		 * A spin loop's pause: it also lets a single-threaded TCG
		 * guest move on to the other vCPUs, where the drains' work
		 * and IPIs wait.
		 */
		cpu_relax();
		cond_resched();
	}
	return 0;
}

/**
 * qpw_cache_exec_start() - run a callback in a loop on other CPUs
 * @pass: called in a loop by each kthread; returns how many wrong results
 *	it saw
 * @max: at most this many kthreads (and at most QPW_CACHE_EXEC_MAX)
 *
 * Pins the caller to its CPU and starts one kthread on each of up to @max
 * other online CPUs. qpw_cache_exec_stop() stops them and unpins the
 * caller.
 *
 * Context: Process context; sleeps.
 * Return: the number of kthreads started, or -EBUSY while others run.
 */
int qpw_cache_exec_start(unsigned long (*pass)(void), unsigned int max)
{
	int self, cpu;

	if (qpw_cache_exec_nr)
		return -EBUSY;
	max = min(max, QPW_CACHE_EXEC_MAX);

	self = get_cpu();
	set_cpus_allowed_ptr(current, cpumask_of(self));
	put_cpu();

	for_each_online_cpu(cpu) {
		struct qpw_cache_exec *e;
		struct task_struct *t;

		if (cpu == self || qpw_cache_exec_nr == max)
			continue;
		e = &qpw_cache_execs[qpw_cache_exec_nr];
		*e = (struct qpw_cache_exec){ .pass = pass };
		t = kthread_create_on_cpu(qpw_cache_exec_fn, e, cpu,
					  "qpw_cache/%u");
		if (IS_ERR(t))
			break;
		e->task = t;
		qpw_cache_exec_nr++;
		wake_up_process(t);
	}
	return qpw_cache_exec_nr;
}

/**
 * qpw_cache_exec_stop() - stop the kthreads of qpw_cache_exec_start()
 * @passes: set to the number of calls of the callback they made
 * @wrong: set to the sum of what those calls returned
 *
 * Stops the kthreads and lets the caller run on any CPU again.
 *
 * Context: Process context; sleeps.
 */
void qpw_cache_exec_stop(unsigned long *passes, unsigned long *wrong)
{
	unsigned int i;

	*passes = 0;
	*wrong = 0;
	for (i = 0; i < qpw_cache_exec_nr; i++) {
		kthread_stop(qpw_cache_execs[i].task);
		*passes += qpw_cache_execs[i].passes;
		*wrong += qpw_cache_execs[i].wrong;
	}
	qpw_cache_exec_nr = 0;
	set_cpus_allowed_ptr(current, cpu_possible_mask);
}

struct qpw_cache_irq {
	struct irq_work work;
	void (*fn)(void *arg);
	void *arg;
};

static void qpw_cache_irq_fn(struct irq_work *work)
{
	struct qpw_cache_irq *t = container_of(work, struct qpw_cache_irq,
					       work);

	t->fn(t->arg);
}

/* Queues @t's irq_work on this CPU and waits until it has run. */
static int qpw_cache_irq_wait(struct qpw_cache_irq *t)
{
	if (irqs_disabled())
		return -EINVAL;
	preempt_disable();
	if (!irq_work_queue(&t->work)) {
		preempt_enable();
		return -EBUSY;
	}
	/* The self-interrupt comes at once: interrupts are on. */
	while (irq_work_is_busy(&t->work))
		cpu_relax();
	preempt_enable();
	return 0;
}

/**
 * qpw_cache_irq_run() - run a function in a hard interrupt on this CPU
 * @fn: the function
 * @arg: its argument
 *
 * Queues a hard irq_work on this CPU that calls @fn(@arg), and waits until
 * it has run.
 *
 * Context: Process context, interrupts on.
 * Return: 0, -EINVAL with interrupts off, or -EBUSY if the irq_work could
 * not be queued.
 */
int qpw_cache_irq_run(void (*fn)(void *arg), void *arg)
{
	struct qpw_cache_irq t = {
		.work = IRQ_WORK_INIT_HARD(qpw_cache_irq_fn),
		.fn = fn,
		.arg = arg,
	};

	return qpw_cache_irq_wait(&t);
}

/**
 * qpw_cache_fail_nth() - fail the calling task's n-th fault-injection point
 * @n: which point from now on fails, counting from 1 (0: none)
 *
 * As a write of @n to /proc/self/fail-nth does.
 *
 * Return: what was left of the previous count (0 once that point was
 * reached), or UINT_MAX without CONFIG_FAULT_INJECTION.
 */
unsigned int qpw_cache_fail_nth(unsigned int n)
{
#ifdef CONFIG_FAULT_INJECTION
	unsigned int left = READ_ONCE(current->fail_nth);

	WRITE_ONCE(current->fail_nth, n);
	return left;
#else
	return UINT_MAX;
#endif
}

static struct {
	struct completion done;
	unsigned int cpu;
	int ret;
} qpw_cache_writer;

static int qpw_cache_writer_fn(void *data)
{
	int ret = remove_cpu(qpw_cache_writer.cpu);

	if (!ret)
		ret = add_cpu(qpw_cache_writer.cpu);
	qpw_cache_writer.ret = ret;
	complete(&qpw_cache_writer.done);
	return 0;
}

/**
 * qpw_cache_writer_start() - take a CPU offline and back from a kthread
 * @cpu: the CPU
 *
 * Starts a kthread that calls remove_cpu(@cpu), then add_cpu(@cpu): a
 * writer of the CPU hotplug lock. qpw_cache_writer_end() waits for it.
 *
 * Context: Process context; sleeps.
 * Return: 0, or the error of kthread_run().
 */
int qpw_cache_writer_start(unsigned int cpu)
{
	struct task_struct *task;

	init_completion(&qpw_cache_writer.done);
	qpw_cache_writer.cpu = cpu;
	qpw_cache_writer.ret = -EINPROGRESS;
	task = kthread_run(qpw_cache_writer_fn, NULL, "qpw_cache_writer");
	return PTR_ERR_OR_ZERO(task);
}

/**
 * qpw_cache_writer_waits() - wait until the writer waits for the lock
 *
 * The caller holds the CPU hotplug lock for reading. Polls until a try to
 * take it for reading fails, which it does once the kthread of
 * qpw_cache_writer_start() waits to take it for writing.
 *
 * Context: Process context; sleeps.
 * Return: true once the kthread waits, false if it finished first.
 */
bool qpw_cache_writer_waits(void)
{
	while (!completion_done(&qpw_cache_writer.done)) {
		if (!cpus_read_trylock())
			return true;
		cpus_read_unlock();
		usleep_range(50, 100);
	}
	return false;
}

/**
 * qpw_cache_writer_end() - wait for the writer to finish
 *
 * Context: Process context; sleeps.
 * Return: 0, or the error of the kthread's remove_cpu() or add_cpu().
 */
int qpw_cache_writer_end(void)
{
	wait_for_completion(&qpw_cache_writer.done);
	return qpw_cache_writer.ret;
}

/**
 * qpw_cache_on_dead() - call a function from a CPU-dead callback
 * @fn: called with each CPU that goes offline
 *
 * Sets up a dynamic CPUHP_BP_PREPARE_DYN state whose teardown is @fn: it
 * runs on a CPU that stays online, with the CPU hotplug lock held for
 * writing, once the CPU is dead. qpw_cache_on_dead_remove() removes it.
 *
 * Context: Process context; sleeps.
 * Return: the state, or a negative errno.
 */
int qpw_cache_on_dead(int (*fn)(unsigned int cpu))
{
	return cpuhp_setup_state_nocalls(CPUHP_BP_PREPARE_DYN, "qpw_cache:dead",
					 NULL, fn);
}

/**
 * qpw_cache_on_dead_remove() - remove the state of qpw_cache_on_dead()
 * @state: what qpw_cache_on_dead() returned
 *
 * Calls no teardown.
 *
 * Context: Process context; sleeps.
 */
void qpw_cache_on_dead_remove(int state)
{
	cpuhp_remove_state_nocalls(state);
}

#if defined(CONFIG_LOCKDEP) && defined(QPW_SPINLOCK)
static DEFINE_PER_CPU(struct qpw_lock, qpw_cache_class_lock);
static struct lock_class_key qpw_cache_class_key;

/**
 * qpw_cache_lock_classes() - the lockdep classes of a qpw lock
 * @shared: set to whether its local_lock and its spinlock have one class
 * @ll_percpu: set to whether the local_lock's class is of a per-CPU lock
 * @sl_normal: set to whether the spinlock's class is of a normal lock
 *
 * With lockdep, and the spinlock beside the local_lock (not PREEMPT_RT):
 * initialises a per-CPU qpw lock with a lock class of its own, and takes
 * this CPU's instance as its owner does with qpw off (the local_lock) and
 * as another CPU does with qpw on (the spinlock).
 *
 * Context: Process context.
 * Return: 0, or -ENODATA if lockdep registered no class (it is off after
 * a report).
 */
int qpw_cache_lock_classes(bool *shared, bool *ll_percpu, bool *sl_normal)
{
	struct lock_class *ll, *sl;
	struct qpw_lock *lock;
	int cpu;

	for_each_possible_cpu(cpu)
		qpw_lock_init_key(per_cpu_ptr(&qpw_cache_class_lock, cpu),
				  "qpw_cache_class", &qpw_cache_class_key);
	lock = get_cpu_ptr(&qpw_cache_class_lock);
	/* As the owner takes it with qpw off, then another CPU with it on. */
	local_lock(&qpw_cache_class_lock.ll);
	local_unlock(&qpw_cache_class_lock.ll);
	spin_lock(&lock->sl);
	spin_unlock(&lock->sl);
	ll = READ_ONCE(lock->ll.dep_map.class_cache[0]);
	sl = READ_ONCE(lock->sl.dep_map.class_cache[0]);
	put_cpu_ptr(&qpw_cache_class_lock);
	/* Lockdep turned off (after a report): it registers no class. */
	if (!ll || !sl)
		return -ENODATA;
	*shared = ll == sl;
	*ll_percpu = ll->lock_type == LD_LOCK_PERCPU;
	*sl_normal = sl->lock_type == LD_LOCK_NORMAL;
	return 0;
}
#endif

#ifdef CONFIG_QPW
/* How long the holder and the probe wait for each other, at most. */
#define QPW_CACHE_HOLD_NS	(5 * NSEC_PER_SEC)
/* Sites of a key the holder watches for an INT3, at most. */
#define QPW_CACHE_SITES		64

/*
 * The holder of qpw_cache_holder_start(): a kthread on another CPU that
 * holds qpw sections across each step of qpw_switch_on(). The probe on
 * qpw_switch_step announces a step (@seq), waits until the holder holds its
 * sections (@held), and once the step is over says so (@ended).
 */
struct qpw_cache_holder {
	struct task_struct *task;
	void (*hold)(void *arg);
	void *arg;
	enum qpw_switch_step step;
	bool was;
	unsigned int seq, held, ended;
	struct qpw_cache_hold_report report;
	unsigned int nr_sites[QPW_SWITCH_END + 1];
	unsigned long sites[QPW_SWITCH_END + 1][QPW_CACHE_SITES];
};

static struct qpw_cache_holder qpw_cache_holder;
static DEFINE_PER_CPU(struct qpw_lock, qpw_cache_hold_lock) = QPW_LOCK_UNLOCKED;

static struct static_key *qpw_cache_step_key(enum qpw_switch_step step)
{
	switch (step) {
	case QPW_SWITCH_LOCKS:
		return &qpw_key.key;
	case QPW_SWITCH_REMOTE:
		return &qpw_remote_key.key;
	default:
		return &qpw_switching_key.key;
	}
}

/* Whether a site of the key of @step holds an INT3: its update has begun. */
static bool qpw_cache_int3_at(const struct qpw_cache_holder *h,
			      enum qpw_switch_step step)
{
	unsigned int i;

	for (i = 0; i < h->nr_sites[step]; i++)
		if (READ_ONCE(*(u8 *)h->sites[step][i]) == 0xcc)
			return true;
	return false;
}

/* Waits, at most QPW_CACHE_HOLD_NS, for step @seq to end. */
static bool qpw_cache_wait_end(const struct qpw_cache_holder *h,
			       unsigned int seq, u64 start)
{
	/* Pairs with the probe's release: the step's update is over. */
	while (smp_load_acquire(&h->ended) != seq) {
		if (ktime_get_ns() - start > QPW_CACHE_HOLD_NS)
			return false;
		cpu_relax();
	}
	return true;
}

/**
 * qpw_cache_hold_irq() - the holder's section with interrupts off
 *
 * Called by the holder's callback inside its own section, when a step of
 * qpw_switch_on() is about to begin. Takes this CPU's instance of a qpw
 * lock with local_qpw_lock_irqsave(), as mm/swap.c takes lock_irq, and
 * lets the step begin. With interrupts off this CPU holds up the step's
 * first sync round: it waits until the key's update has written the INT3
 * at one of its sites (or the step ends without writing any) and releases
 * the lock while the update is under way. Then, interrupts on, it waits
 * for the step to end, which the caller's section spans.
 *
 * Context: The holder's kthread, in a qpw section of its own.
 */
void qpw_cache_hold_irq(void)
{
	struct qpw_cache_holder *h = &qpw_cache_holder;
	/* Pairs with the probe's release: @step is the step announced. */
	unsigned int seq = smp_load_acquire(&h->seq);
	enum qpw_switch_step step = READ_ONCE(h->step);
	unsigned long flags;
	u64 start = ktime_get_ns();
	bool int3 = false;

	local_qpw_lock_irqsave(&qpw_cache_hold_lock, flags);
	/* The lock is held: the probe that waits for this lets the step begin. */
	smp_store_release(&h->held, seq);
	/* Pairs with the probe's release once the step is over. */
	while (smp_load_acquire(&h->ended) != seq &&
	       ktime_get_ns() - start <= QPW_CACHE_HOLD_NS) {
		int3 = qpw_cache_int3_at(h, step);
		if (int3)
			break;
		cpu_relax();
	}
	local_qpw_unlock_irqrestore(&qpw_cache_hold_lock, flags);
	h->report.sections++;
	h->report.int3s += int3;
	if (!qpw_cache_wait_end(h, seq, start))
		h->report.timeouts++;
}

static void qpw_cache_holder_probe(void *data, enum qpw_switch_step step,
				   bool done, bool took)
{
	struct qpw_cache_holder *h = data;
	unsigned int seq = h->seq;
	u64 start;

	if (done) {
		if (!took)
			h->report.refused++;
		else if (h->nr_sites[step] &&
			 static_key_enabled(qpw_cache_step_key(step)) != h->was)
			h->report.written++;
		/* The step is over: the holder may release its sections. */
		smp_store_release(&h->ended, seq);
		return;
	}
	h->report.steps++;
	h->was = static_key_enabled(qpw_cache_step_key(step));
	WRITE_ONCE(h->step, step);
	/* Announces @step to the holder, which reads it after @seq. */
	smp_store_release(&h->seq, seq + 1);
	wake_up_process(h->task);
	/* Called with preemption off: the holder runs on another CPU. */
	start = ktime_get_ns();
	/* Pairs with the holder's release once it holds its lock. */
	while (smp_load_acquire(&h->held) != seq + 1) {
		if (ktime_get_ns() - start > QPW_CACHE_HOLD_NS) {
			h->report.stalls++;
			return;
		}
		cpu_relax();
	}
}

static int qpw_cache_holder_fn(void *data)
{
	struct qpw_cache_holder *h = data;
	unsigned int done = 0;

	for (;;) {
		set_current_state(TASK_INTERRUPTIBLE);
		if (kthread_should_stop())
			break;
		/* Pairs with the probe's release of a step announced. */
		if (smp_load_acquire(&h->seq) == done) {
			schedule();
			continue;
		}
		__set_current_state(TASK_RUNNING);
		done = READ_ONCE(h->seq);
		h->hold(h->arg);
	}
	__set_current_state(TASK_RUNNING);
	return 0;
}

/* The sites of each step's key in the kernel's text, for qpw_cache_int3_at(). */
static void qpw_cache_find_sites(struct qpw_cache_holder *h)
{
	enum qpw_switch_step step;
	struct jump_entry *e;

	for (step = QPW_SWITCH_UNLOCKS; step <= QPW_SWITCH_END; step++) {
		struct static_key *key = qpw_cache_step_key(step);

		for (e = __start___jump_table; e < __stop___jump_table; e++) {
			if (jump_entry_key(e) != key || jump_entry_is_init(e) ||
			    !core_kernel_text(jump_entry_code(e)))
				continue;
			h->sites[step][h->nr_sites[step]++] = jump_entry_code(e);
			if (h->nr_sites[step] == QPW_CACHE_SITES)
				break;
		}
	}
}

/**
 * qpw_cache_holder_start() - hold qpw sections across each step of qpw_switch_on()
 * @cpu: the CPU the holder runs on, not the caller's
 * @hold: called by the holder, on @cpu, when a step is about to begin; it
 *	takes a section of its own, calls qpw_cache_hold_irq() in it and
 *	then releases it
 * @arg: @hold's argument
 *
 * Starts the holder, a kthread on @cpu, and attaches a probe to the
 * qpw_switch_step event: every step of qpw_switch_on() then begins only
 * once the holder holds its sections, and they end after the step.
 *
 * Context: Process context; sleeps.
 * Return: 0, -EBUSY while a holder runs, or the error of the kthread's
 * creation or of the probe's registration.
 */
int qpw_cache_holder_start(unsigned int cpu, void (*hold)(void *arg), void *arg)
{
	struct qpw_cache_holder *h = &qpw_cache_holder;
	struct task_struct *t;
	int ret;

	if (h->task)
		return -EBUSY;
	*h = (struct qpw_cache_holder){ .hold = hold, .arg = arg };
	qpw_cache_find_sites(h);
	t = kthread_create_on_cpu(qpw_cache_holder_fn, h, cpu, "qpw_cache_hold/%u");
	if (IS_ERR(t))
		return PTR_ERR(t);
	ret = register_trace_qpw_switch_step(qpw_cache_holder_probe, h);
	if (ret) {
		kthread_stop(t);
		return ret;
	}
	h->task = t;
	wake_up_process(t);
	return 0;
}

/**
 * qpw_cache_holder_stop() - stop the holder of qpw_cache_holder_start()
 * @cpu: the holder's CPU
 * @report: set to what the holder and the probe saw
 *
 * Also says whether the holder's CPU was left holding its lock: its
 * spinlock (on PREEMPT_RT the local_lock) or, with lockdep, its
 * local_lock.
 *
 * Context: Process context; sleeps.
 */
void qpw_cache_holder_stop(unsigned int cpu, struct qpw_cache_hold_report *report)
{
	struct qpw_cache_holder *h = &qpw_cache_holder;

	unregister_trace_qpw_switch_step(qpw_cache_holder_probe, h);
	tracepoint_synchronize_unregister();
	kthread_stop(h->task);
	h->task = NULL;
	*report = h->report;
#ifdef CONFIG_PREEMPT_RT
	/*
	 * The local_lock is the spinlock other CPUs take; the caller holds
	 * it by definition to __qpw_spinlock_held(): ask the lock.
	 */
	report->locked = rt_mutex_base_is_locked(&__qpw_spinlock(&qpw_cache_hold_lock, cpu)->lock);
#else
	report->locked = __qpw_spinlock_held(&qpw_cache_hold_lock, cpu);
#ifdef CONFIG_DEBUG_LOCK_ALLOC
	report->locked |= !!READ_ONCE(per_cpu_ptr(&qpw_cache_hold_lock, cpu)->ll.owner);
#endif
#endif
}

#ifdef CONFIG_TEXT_POKE_BATCH_RUST
/* A site of qpw_remote_key of this file's own, for qpw_cache_corrupt_site(). */
static noinline bool qpw_cache_remote_site(void)
{
	return qpw_enabled();
}
#endif

/**
 * qpw_cache_corrupt_site() - make a site of qpw_remote_key hold what its key did not put there
 * @corrupt: change the site (a NOP) to another instruction, or put it back
 *
 * The site is this file's own, in a function nothing calls. A key update
 * that finds it changed must be refused, nothing written, which only the
 * Rust text-poke batch does for C callers (upstream's stops the kernel).
 *
 * Context: Process context, the Rust batch active; sleeps.
 * Return: 0; -ENODEV without the Rust batch; -ENOENT if the site is
 * not found, -EINVAL if it holds no NOP, or is not changed when asked to
 * be put back.
 */
int qpw_cache_corrupt_site(bool corrupt)
{
#ifdef CONFIG_TEXT_POKE_BATCH_RUST
	static const u8 nop5[] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };
	static const u8 nop2[] = { 0x66, 0x90 };
	static unsigned long changed;
	static u8 was;
	unsigned long size, off, site = 0;
	struct jump_entry *e;
	u8 *at, by;

	if (!text_poke_batch_active())
		return -ENODEV;
	if (!corrupt) {
		if (!changed)
			return -EINVAL;
		at = (u8 *)changed;
		by = was;
		changed = 0;
		goto poke;
	}
	if (changed ||
	    !kallsyms_lookup_size_offset((unsigned long)qpw_cache_remote_site, &size, &off))
		return -EINVAL;
	for (e = __start___jump_table; e < __stop___jump_table; e++) {
		unsigned long code = jump_entry_code(e);

		if (jump_entry_key(e) == &qpw_remote_key.key &&
		    code >= (unsigned long)qpw_cache_remote_site &&
		    code < (unsigned long)qpw_cache_remote_site + size)
			site = code;
	}
	if (!site)
		return -ENOENT;
	/* The operand of a 5-byte NOP, or a 2-byte NOP's prefix: a NOP still. */
	if (!memcmp((void *)site, nop5, sizeof(nop5)))
		at = (u8 *)site + 4;
	else if (!memcmp((void *)site, nop2, sizeof(nop2)))
		at = (u8 *)site;
	else
		return -EINVAL;
	was = *at;
	by = at == (u8 *)site ? 0x90 : 0x08;
	changed = (unsigned long)at;
	/* For scripts/summarize.py: the refused update warns. */
	pr_warn("@@ expect-warnings qpw_cache text_poke_batch/jump_label\\.rs\n");
poke:
	mutex_lock(&text_mutex);
	text_poke(at, &by, 1);
	mutex_unlock(&text_mutex);
	smp_text_poke_sync_each_cpu();
	return 0;
#else
	return -ENODEV;
#endif
}

static struct qpw_work qpw_cache_work;
static struct task_struct *qpw_cache_work_task;
static int qpw_cache_work_ran_on;

static void qpw_cache_work_fn(struct work_struct *work)
{
	WRITE_ONCE(qpw_cache_work_task, current);
	WRITE_ONCE(qpw_cache_work_ran_on, raw_smp_processor_id());
}

/**
 * qpw_cache_mode() - the mode of qpw, as the keys and a work item show it
 * @cpu: an online CPU other than the caller's
 * @mode: set to what qpw_spinlocks(), qpw_enabled() and the switch's
 *	unlock key read, and to whether qpw_queue_work_on() queued a work
 *	item for @cpu on it rather than running it at once in the caller
 *
 * Context: Process context; sleeps.
 * Return: 0, or -EINVAL if the work ran neither way.
 */
int qpw_cache_mode(unsigned int cpu, struct qpw_cache_mode *mode)
{
	init_qpw_work(&qpw_cache_work, qpw_cache_work_fn, cpu);
	qpw_cache_work_task = NULL;
	qpw_cache_work_ran_on = -1;
	mode->spinlocks = qpw_spinlocks();
	mode->enabled = qpw_enabled();
	mode->switching = static_key_enabled(&qpw_switching_key);
	qpw_queue_work_on(cpu, system_percpu_wq, &qpw_cache_work);
	qpw_flush_work(&qpw_cache_work);
	mode->queued = qpw_cache_work_task != current;
	if (mode->queued && qpw_cache_work_ran_on != cpu)
		return -EINVAL;
	return 0;
}
#endif /* CONFIG_QPW */

#if defined(CONFIG_PROVE_LOCKING) && defined(QPW_SPINLOCK)
/* Whether this boot is for the inversion report: lockdep reports once. */
static bool qpw_cache_inversion;
module_param_named(inversion, qpw_cache_inversion, bool, 0444);

static DEFINE_SPINLOCK(qpw_cache_irq_lock);

static void qpw_cache_irq_lock_fn(void *arg)
{
	spin_lock(&qpw_cache_irq_lock);
	spin_unlock(&qpw_cache_irq_lock);
}

/**
 * qpw_cache_inversion_armed() - whether this boot is for lockdep's report
 *
 * Lockdep reports one problem and turns itself off: the case that makes it
 * report runs in a boot of its own, given qpw_cache_exec.inversion=1.
 * Elsewhere this marks the current KUnit case skipped.
 *
 * Context: A KUnit case.
 * Return: true in that boot, with lockdep still on.
 */
bool qpw_cache_inversion_armed(void)
{
	if (!qpw_cache_inversion) {
		kunit_mark_skipped(kunit_get_current_test(),
				   "lockdep reports once: a boot of its own (qpw_cache_exec.inversion=1)");
		return false;
	}
	/* For scripts/summarize.py: the report is the case's purpose. */
	pr_warn("@@ expect-warnings qpw_cache HARDIRQ-safe -> HARDIRQ-unsafe lock order detected\n");
	return debug_locks;
}

/**
 * qpw_cache_irq_lock_around() - call a function under an interrupt-safe lock
 * @fn: the function
 * @arg: its argument
 *
 * Takes a spinlock in an interrupt on this CPU, which makes it
 * HARDIRQ-safe to lockdep, then calls @fn(@arg) holding it, interrupts off.
 * The interrupt is an irq_work's that is not IRQ_WORK_HARD_IRQ: a hard
 * interrupt on a kernel without PREEMPT_RT, one that a device's handler
 * stands for, where a spinlock_t may be taken.
 *
 * Context: Process context, interrupts on.
 * Return: whether lockdep reported a problem in the call and turned
 * itself off (debug_locks), a negative errno if the interrupt did not
 * run, or -ENOLCK if lockdep was off before the call.
 */
int qpw_cache_irq_lock_around(void (*fn)(void *arg), void *arg)
{
	struct qpw_cache_irq t = {
		.work = IRQ_WORK_INIT(qpw_cache_irq_fn),
		.fn = qpw_cache_irq_lock_fn,
	};
	unsigned long flags;
	int ret;

	ret = qpw_cache_irq_wait(&t);
	if (ret)
		return ret;
	/* Whatever lockdep reports next, the section below made it report. */
	if (!debug_locks)
		return -ENOLCK;
	spin_lock_irqsave(&qpw_cache_irq_lock, flags);
	fn(arg);
	spin_unlock_irqrestore(&qpw_cache_irq_lock, flags);
	return !debug_locks;
}
#endif

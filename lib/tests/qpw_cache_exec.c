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
#include <linux/delay.h>
#include <linux/err.h>
#include <linux/errno.h>
#include <linux/irq_work.h>
#include <linux/kthread.h>
#include <linux/limits.h>
#include <linux/local_lock.h>
#include <linux/lockdep.h>
#include <linux/minmax.h>
#include <linux/percpu.h>
#include <linux/processor.h>
#include <linux/qpw.h>
#include <linux/sched.h>
#include <linux/smp.h>

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

	if (irqs_disabled())
		return -EINVAL;
	preempt_disable();
	if (!irq_work_queue(&t.work)) {
		preempt_enable();
		return -EBUSY;
	}
	/* The self-interrupt comes at once: interrupts are on. */
	while (irq_work_is_busy(&t.work))
		cpu_relax();
	preempt_enable();
	return 0;
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

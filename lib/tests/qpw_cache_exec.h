/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the qpw_cache KUnit suite (qpw_cache_kunit.rs) runs its work on:
 * kthreads on other CPUs, a hard interrupt on this one, and fault injection
 * of this task's allocations.
 */
#ifndef _QPW_CACHE_EXEC_H
#define _QPW_CACHE_EXEC_H

/*
 * Pins the caller to its CPU and starts one kthread on each of up to @max
 * other online CPUs, each calling @pass in a loop; @pass returns how many
 * wrong results it saw. Returns the number of kthreads started, or -EBUSY
 * while others run.
 */
int qpw_cache_exec_start(unsigned long (*pass)(void), unsigned int max);

/*
 * Stops the kthreads, unpins the caller, and reports the passes they ran
 * and the wrong results they saw.
 */
void qpw_cache_exec_stop(unsigned long *passes, unsigned long *wrong);

/*
 * Runs @fn(@arg) in a hard interrupt on this CPU (an irq_work), and waits
 * for it: 0, -EINVAL with interrupts off, -EBUSY if it could not be queued.
 */
int qpw_cache_irq_run(void (*fn)(void *arg), void *arg);

/*
 * With CONFIG_FAULT_INJECTION: makes the @n-th fault-injection point the
 * calling task reaches from now on fail (0: none), as a write of @n to
 * /proc/self/fail-nth does, and returns what was left of the previous
 * count: 0 once that point was reached. UINT_MAX without fault injection.
 */
unsigned int qpw_cache_fail_nth(unsigned int n);

/*
 * Starts a kthread that takes @cpu offline and brings it back
 * (remove_cpu(), add_cpu()): 0, or an error if it could not start.
 */
int qpw_cache_writer_start(unsigned int cpu);

/*
 * Waits until the kthread waits for the CPU hotplug lock, which the caller
 * holds for reading: true, or false if it finished first.
 */
bool qpw_cache_writer_waits(void);

/* Waits for the kthread to finish: 0, or the error of its hotplug. */
int qpw_cache_writer_end(void);

/*
 * Calls @fn(cpu) from a CPU-dead callback (CPUHP_BP_PREPARE_DYN's
 * teardown), with the CPU hotplug lock held for writing, for each CPU
 * that goes offline: the state, to remove, or an error.
 */
int qpw_cache_on_dead(int (*fn)(unsigned int cpu));

/* Removes the state of qpw_cache_on_dead(), calling nothing. */
void qpw_cache_on_dead_remove(int state);

/*
 * With lockdep, and the spinlock beside the local_lock (not PREEMPT_RT):
 * initialises a qpw lock with a lock class of its own, takes this CPU's
 * instance as its owner does with qpw off (the local_lock) and as another
 * CPU does with qpw on (the spinlock), and says whether lockdep gave both
 * one class, and whether each class has its lock's type. -ENODATA if
 * lockdep registered no class (it is off after a report).
 */
int qpw_cache_lock_classes(bool *shared, bool *ll_percpu, bool *sl_normal);

#endif /* _QPW_CACHE_EXEC_H */

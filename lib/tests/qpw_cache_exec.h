/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the qpw_cache KUnit suite (qpw_cache_kunit.rs) runs its work on:
 * kthreads on other CPUs, a hard interrupt on this one, fault injection of
 * this task's allocations, a CPU hotplug writer and a CPU-dead callback.
 * Each is documented where qpw_cache_exec.c defines it.
 */
#ifndef _QPW_CACHE_EXEC_H
#define _QPW_CACHE_EXEC_H

int qpw_cache_exec_start(unsigned long (*pass)(void), unsigned int max);
void qpw_cache_exec_stop(unsigned long *passes, unsigned long *wrong);
int qpw_cache_irq_run(void (*fn)(void *arg), void *arg);
unsigned int qpw_cache_fail_nth(unsigned int n);
int qpw_cache_writer_start(unsigned int cpu);
bool qpw_cache_writer_waits(void);
int qpw_cache_writer_end(void);
int qpw_cache_on_dead(int (*fn)(unsigned int cpu));
void qpw_cache_on_dead_remove(int state);
int qpw_cache_lock_classes(bool *shared, bool *ll_percpu, bool *sl_normal);

#endif /* _QPW_CACHE_EXEC_H */

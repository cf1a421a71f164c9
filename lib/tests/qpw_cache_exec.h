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

/*
 * What the holder of qpw_cache_holder_start() saw: steps of qpw_switch_on()
 * begun, refused, and done with text written (a key changed that has
 * sites in the kernel's text); steps the holder was not ready for in time;
 * sections held across a step, those released with an INT3 of the step
 * written, and the holder's waits that timed out; whether the holder's CPU
 * still held its qpw lock after.
 */
struct qpw_cache_hold_report {
	unsigned int steps, refused, written, stalls;
	unsigned int sections, int3s, timeouts;
	bool locked;
};

/* What qpw_cache_mode() saw. */
struct qpw_cache_mode {
	bool spinlocks, enabled, switching, queued;
};

int qpw_cache_holder_start(unsigned int cpu, void (*hold)(void *arg), void *arg);
void qpw_cache_hold_irq(void);
void qpw_cache_holder_stop(unsigned int cpu, struct qpw_cache_hold_report *report);
int qpw_cache_corrupt_site(bool corrupt);
int qpw_cache_mode(unsigned int cpu, struct qpw_cache_mode *mode);
bool qpw_cache_inversion_armed(void);
int qpw_cache_irq_lock_around(void (*fn)(void *arg), void *arg);

#endif /* _QPW_CACHE_EXEC_H */

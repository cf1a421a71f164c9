// SPDX-License-Identifier: GPL-2.0
/*
 * Executors for the text_poke_rs KUnit stress test and the text_poke_bench
 * benchmark: kthreads on CPUs other than the caller's, running the sites of
 * the key under test in a tight loop while the caller flips the key.
 */

#include <linux/cpumask.h>
#include <linux/err.h>
#include <linux/export.h>
#include <linux/irqflags.h>
#include <linux/jump_label.h>
#include <linux/kthread.h>
#include <linux/percpu.h>
#include <linux/sched.h>
#include <linux/sched/clock.h>
#include <linux/smp.h>

#include <asm/text_poke_rs.h>

#include "text_poke_stress.h"

#define TEXT_POKE_STRESS_MAX	8

DEFINE_STATIC_KEY_FALSE(text_poke_rs_mod_key);
EXPORT_SYMBOL_GPL(text_poke_rs_mod_key);
bool text_poke_rs_mod_go;
EXPORT_SYMBOL_GPL(text_poke_rs_mod_go);

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

static struct text_poke_timed_exec {
	struct task_struct *task;
	unsigned long (*site)(void);
	struct text_poke_timed timed;
} text_poke_timed_exec;

static int text_poke_timed_fn(void *data)
{
	struct text_poke_timed_exec *e = data;

	while (!kthread_should_stop()) {
		unsigned long flags, hits;
		u64 t0, t1;

		/* Interrupts off: a sync IPI must not land inside the timing. */
		local_irq_save(flags);
		hits = __this_cpu_read(text_poke_rs_int3_hits);
		t0 = local_clock();
		e->site();
		t1 = local_clock();
		if (__this_cpu_read(text_poke_rs_int3_hits) != hits) {
			e->timed.hits++;
			e->timed.hit_ns += t1 - t0;
		} else {
			e->timed.plain++;
			e->timed.plain_ns += t1 - t0;
		}
		local_irq_restore(flags);
		cpu_relax();
		cond_resched();
	}
	return 0;
}

int text_poke_timed_start(unsigned long (*site)(void))
{
	struct text_poke_timed_exec *e = &text_poke_timed_exec;
	struct task_struct *t;
	int self, cpu;

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
	return 0;
}

void text_poke_timed_stop(struct text_poke_timed *timed)
{
	struct text_poke_timed_exec *e = &text_poke_timed_exec;

	if (!e->task)
		return;
	kthread_stop(e->task);
	e->task = NULL;
	*timed = e->timed;
	set_cpus_allowed_ptr(current, cpu_possible_mask);
}

// SPDX-License-Identifier: GPL-2.0
/*
 * Executors for the text_poke_rs KUnit stress test: one kthread per CPU
 * other than the test's, each running the sites of the key under test in a
 * tight loop while the test flips the key.
 */

#include <linux/cpumask.h>
#include <linux/err.h>
#include <linux/kthread.h>
#include <linux/sched.h>
#include <linux/smp.h>

#include "text_poke_stress.h"

#define TEXT_POKE_STRESS_MAX	8

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

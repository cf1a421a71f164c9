/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Executors for the text_poke_rs KUnit stress test (kernel/jump_label_rs/
 * kunit.rs): kthreads that run a callback in a loop on other CPUs while
 * the test flips a static key.
 */
#ifndef _KERNEL_JUMP_LABEL_RS_TEXT_POKE_STRESS_H
#define _KERNEL_JUMP_LABEL_RS_TEXT_POKE_STRESS_H

/*
 * Pins the caller to its CPU and starts one executor on each of up to @max
 * other online CPUs, each calling @pass in a loop; @pass returns how many
 * wrong results it saw. Returns the number of executors started, or a
 * negative errno.
 */
int text_poke_stress_start(unsigned long (*pass)(void), unsigned int max);

/*
 * Stops the executors, unpins the caller, and reports the passes they ran
 * and the wrong results they saw.
 */
void text_poke_stress_stop(unsigned long *passes, unsigned long *wrong);

#endif /* _KERNEL_JUMP_LABEL_RS_TEXT_POKE_STRESS_H */

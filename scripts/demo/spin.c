// SPDX-License-Identifier: GPL-2.0
/*
 * A user-space busy loop for the isolation scenario: it never enters the
 * kernel. PAUSE also lets single-threaded TCG move on to the next vCPU at
 * once, where a plain loop would hold it for a whole time slice.
 */
void _start(void)
{
	for (;;)
		__asm__ volatile("pause");
}

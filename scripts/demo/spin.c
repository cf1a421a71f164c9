// SPDX-License-Identifier: GPL-2.0
/*
 * A user-space busy loop for the isolation scenario: it never enters the
 * kernel. Its turns end in PAUSE (relax()), which lets single-threaded TCG
 * move on to the next vCPU.
 */
#include "nolibc.h"

void _start(void)
{
	for (;;)
		relax();
}

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the demo's user programs share, without a C library: a system call
 * of up to three arguments, decimal numbers and strings in and out, and a
 * turn of a busy wait.
 */
#ifndef _JLRS_DEMO_NOLIBC_H
#define _JLRS_DEMO_NOLIBC_H

static inline long syscall3(long nr, long a, long b, long c)
{
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c)
			 : "rcx", "r11", "memory");
	return ret;
}

static inline char *put_number(char *p, unsigned long n)
{
	char digits[20];
	int i = 0;

	do {
		digits[i++] = '0' + n % 10;
		n /= 10;
	} while (n);
	while (i)
		*p++ = digits[--i];
	return p;
}

static inline char *put_string(char *p, const char *s)
{
	while (*s)
		*p++ = *s++;
	return p;
}

static inline unsigned long number(const char *s)
{
	unsigned long n = 0;

	for (; *s >= '0' && *s <= '9'; s++)
		n = n * 10 + (*s - '0');
	return n;
}

/*
 * A turn of a busy wait: RELAX_INSNS instructions, the last a PAUSE.
 * Single-threaded TCG moves on to the next vCPU at a PAUSE, where a plain
 * loop would hold the guest for a whole time slice; but under -icount a
 * loop of PAUSEs alone costs a switch of vCPUs per guest nanosecond, and a
 * guest second with two CPUs waiting minutes of the host's time.
 */
#define RELAX_INSNS 16
static inline void relax(void)
{
	__asm__ volatile(".rept 15\n\tnop\n\t.endr\n\tpause" ::: "memory");
}

#endif /* _JLRS_DEMO_NOLIBC_H */

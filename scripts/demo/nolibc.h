/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the demo's user programs share, without a C library: a system call
 * of up to three arguments, and decimal numbers and strings in and out.
 */
#ifndef _JLRS_DEMO_NOLIBC_H
#define _JLRS_DEMO_NOLIBC_H

static long syscall3(long nr, long a, long b, long c)
{
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c)
			 : "rcx", "r11", "memory");
	return ret;
}

static char *put_number(char *p, unsigned long n)
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

static char *put_string(char *p, const char *s)
{
	while (*s)
		*p++ = *s++;
	return p;
}

static unsigned long number(const char *s)
{
	unsigned long n = 0;

	for (; *s >= '0' && *s <= '9'; s++)
		n = n * 10 + (*s - '0');
	return n;
}

#endif /* _JLRS_DEMO_NOLIBC_H */

// SPDX-License-Identifier: GPL-2.0
/*
 * Short system calls from user space, without a C library (built like
 * spin.c):
 *
 *   syscalls		getpid() and PAUSE forever: a CPU that enters and
 *			leaves the kernel all the time, for the deferral race
 *			tests;
 *   syscalls N		N getpid() calls, then "calls N ns T" with T the
 *			monotonic time they took (guest instructions under
 *			QEMU's -icount shift=0): the kernel-entry benchmark.
 */
#define SYS_write		1
#define SYS_getpid		39
#define SYS_exit		60
#define SYS_clock_gettime	228
#define CLOCK_MONOTONIC		1

struct timespec {
	long tv_sec;
	long tv_nsec;
};

static long syscall3(long nr, long a, long b, long c)
{
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c)
			 : "rcx", "r11", "memory");
	return ret;
}

static unsigned long now_ns(void)
{
	struct timespec ts;

	syscall3(SYS_clock_gettime, CLOCK_MONOTONIC, (long)&ts, 0);
	return ts.tv_sec * 1000000000UL + ts.tv_nsec;
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

/* Called by _start with the initial stack: argc, then argv. */
__attribute__((used, noreturn)) static void start(long *sp)
{
	char **argv = (char **)(sp + 1);
	unsigned long n = 0, i, t0, t1;
	char buf[64], *p = buf;
	const char *s;

	if (sp[0] < 2) {
		for (;;) {
			syscall3(SYS_getpid, 0, 0, 0);
			/* Lets single-threaded TCG move on, as in spin.c. */
			__asm__ volatile("pause");
		}
	}
	for (s = argv[1]; *s >= '0' && *s <= '9'; s++)
		n = n * 10 + (*s - '0');
	t0 = now_ns();
	for (i = 0; i < n; i++)
		syscall3(SYS_getpid, 0, 0, 0);
	t1 = now_ns();
	p = put_string(p, "calls ");
	p = put_number(p, n);
	p = put_string(p, " ns ");
	p = put_number(p, t1 - t0);
	*p++ = '\n';
	syscall3(SYS_write, 1, (long)buf, p - buf);
	for (;;)
		syscall3(SYS_exit, 0, 0, 0);
}

__attribute__((naked)) void _start(void)
{
	__asm__ volatile("mov %rsp, %rdi\n\t"
			 "and $-16, %rsp\n\t"
			 "call start");
}

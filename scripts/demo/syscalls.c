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
 *			QEMU's -icount shift=0): the kernel-entry benchmark;
 *   syscalls vcheck FILE N
 *			the stale-mapping test of deferred kernel TLB
 *			flushes: "vread" to the bench's FILE (the kernel
 *			reads a vmalloc buffer on this CPU), N PAUSEs in user
 *			space while another CPU frees the buffer and reuses
 *			its address, then "vcheck" (the kernel reads it
 *			again), and FILE's answer on standard output.
 */
#define SYS_read		0
#define SYS_write		1
#define SYS_open		2
#define SYS_lseek		8
#define SYS_getpid		39
#define SYS_exit		60
#define SYS_clock_gettime	228
#define CLOCK_MONOTONIC		1
#define O_RDWR			2

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

static unsigned long number(const char *s)
{
	unsigned long n = 0;

	for (; *s >= '0' && *s <= '9'; s++)
		n = n * 10 + (*s - '0');
	return n;
}

static int command(long fd, const char *cmd, long len)
{
	return syscall3(SYS_write, fd, (long)cmd, len) == len ? 0 : -1;
}

static __attribute__((noreturn)) void vcheck(const char *file, unsigned long spins)
{
	static char buf[1024];
	long fd, n;

	fd = syscall3(SYS_open, (long)file, O_RDWR, 0);
	if (fd < 0 || command(fd, "vread", 5)) {
		syscall3(SYS_write, 2, (long)"vread failed\n", 13);
		syscall3(SYS_exit, 1, 0, 0);
	}
	while (spins--)
		__asm__ volatile("pause");
	if (command(fd, "vcheck", 6)) {
		syscall3(SYS_write, 2, (long)"vcheck failed\n", 14);
		syscall3(SYS_exit, 1, 0, 0);
	}
	syscall3(SYS_lseek, fd, 0, 0);
	n = syscall3(SYS_read, fd, (long)buf, sizeof(buf));
	if (n > 0)
		syscall3(SYS_write, 1, (long)buf, n);
	for (;;)
		syscall3(SYS_exit, n > 0 ? 0 : 1, 0, 0);
}

/* Called by _start with the initial stack: argc, then argv. */
__attribute__((used, noreturn)) static void start(long *sp)
{
	char **argv = (char **)(sp + 1);
	unsigned long n, i, t0, t1;
	char buf[64], *p = buf;
	const char *s;

	if (sp[0] < 2) {
		for (;;) {
			syscall3(SYS_getpid, 0, 0, 0);
			/* Lets single-threaded TCG move on, as in spin.c. */
			__asm__ volatile("pause");
		}
	}
	s = argv[1];
	if (sp[0] == 4 && s[0] == 'v')
		vcheck(argv[2], number(argv[3]));
	n = number(s);
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

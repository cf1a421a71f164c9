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
 *			reads a vmalloc buffer on this CPU), N turns of a
 *			busy wait in user space (relax(), each a chance for
 *			the other vCPUs to run) while another CPU frees the
 *			buffer and reuses
 *			its address, then "vcheck" (the kernel reads it
 *			again), and FILE's answer on standard output;
 *   syscalls lru N FILE
 *			the remote drain test of per-CPU folio batches:
 *			faults in N (at most 16) anonymous pages, which wait
 *			in this CPU's LRU batch, then waits in user space
 *			(relax()) until FILE (mapped shared) starts with '1', and
 *			prints "pages N before B after A": how many of the
 *			pages were on an LRU list before and after the
 *			wait (/proc/self/pagemap, /proc/kpageflags).
 *   syscalls lru N FILE mlock
 *			the same with the task's memory locked first, as a
 *			real-time task locks it (mlockall(MCL_CURRENT |
 *			MCL_FUTURE), and MCL_ONFAULT, so that the pages it
 *			faults in are those it counts): the pages wait in
 *			this CPU's mlock batch, and B and A count those on
 *			the unevictable LRU list.
 *   syscalls refill FILE
 *			the per-drain figures of the remote drain benchmark:
 *			until FILE (mapped shared) starts with '1', writes to
 *			a new anonymous page, which waits in this CPU's LRU
 *			batch, and waits 1000 instructions, again and again (the
 *			pages are dropped with MADV_DONTNEED every LRU_PAGES
 *			writes); prints "faults N".
 *   syscalls refill FILE timed
 *			the same, each write timed (clock_gettime() before
 *			and after it): prints "faults N max_ns M mean_ns A",
 *			M the longest write, A their mean: how long the task
 *			stalls on a fault whose CPU's LRU batch another CPU
 *			is draining, or whose CPU an interrupt takes.
 *   syscalls refill FILE [timed] mlock
 *			the same with the task's memory locked first, as for
 *			lru: its pages wait in this CPU's mlock batch, and as
 *			locked pages cannot be dropped, it writes to a new
 *			mapping every LRU_PAGES writes (the old one's unmap
 *			munlocks its pages, through the same batch).
 *   syscalls hotplug FILE
 *			the CPU-hotplug torture of remote drains: while FILE
 *			starts with '0', writes to one new page of its own
 *			after another (up to HOTPLUG_PAGES, none dropped),
 *			each waiting in its CPU's LRU batch until a drain,
 *			and sleeps a millisecond after each; then waits until
 *			FILE starts with '2' and prints "faults F full U
 *			after A": A of the F pages it faulted in on an LRU
 *			list then, U 1 if it ran out of pages before FILE
 *			left '0'.
 *   syscalls modload FILE N
 *			module load under fault injection: the Nth
 *			fault-injection point this task reaches from its
 *			finit_module() of FILE on fails (/proc/thread-self/
 *			fail-nth), and "ret R left L" on standard output: R
 *			finit_module()'s return (0 or -errno), L 0 if the
 *			point was reached (a fault was injected), else not.
 *   syscalls pipe N	seed 004's pipe ping-pong ("perf bench sched pipe"):
 *			this task and a child it forks pass a byte back and
 *			forth through two pipes N times, then "rounds N ns T"
 *			with T the time the N round trips took; run pinned to
 *			one CPU, each round trip is two context switches.
 */
#define SYS_read		0
#define SYS_write		1
#define SYS_open		2
#define SYS_close		3
#define SYS_lseek		8
#define SYS_mmap		9
#define SYS_munmap		11
#define SYS_pipe		22
#define SYS_madvise		28
#define SYS_nanosleep		35
#define SYS_getpid		39
#define SYS_fork		57
#define SYS_exit		60
#define SYS_wait4		61
#define SYS_mlockall		151
#define SYS_clock_gettime	228
#define SYS_finit_module	313
#define CLOCK_MONOTONIC		1
#define O_RDONLY		0
#define O_RDWR			2
#define PROT_READ		1
#define PROT_WRITE		2
#define MAP_SHARED		1
#define MAP_PRIVATE		2
#define MAP_ANONYMOUS		0x20
#define MADV_DONTNEED		4
#define KPF_LRU			5
#define KPF_UNEVICTABLE		18
#define MCL_CURRENT		1
#define MCL_FUTURE		2
#define MCL_ONFAULT		4
#define LRU_PAGES		16

#include "nolibc.h"

struct timespec {
	long tv_sec;
	long tv_nsec;
};

static long syscall6(long nr, long a, long b, long c, long d, long e, long f)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

static unsigned long now_ns(void)
{
	struct timespec ts;

	syscall3(SYS_clock_gettime, CLOCK_MONOTONIC, (long)&ts, 0);
	return ts.tv_sec * 1000000000UL + ts.tv_nsec;
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
		relax();
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

static char area[LRU_PAGES][4096] __attribute__((aligned(4096)));

/* The hotplug torture's pages: every one it faults in stays mapped. */
#define HOTPLUG_PAGES		16384
static char hotplug_area[HOTPLUG_PAGES][4096] __attribute__((aligned(4096)));

/* The 8-byte entry at @index of the file open at @fd, or -1. */
static long entry_at(long fd, unsigned long index, unsigned long *e)
{
	if (syscall3(SYS_lseek, fd, index * 8, 0) != (long)(index * 8))
		return -1;
	return syscall3(SYS_read, fd, (long)e, 8) == 8 ? 0 : -1;
}

/*
 * How many of the first @n pages at @base are on an LRU list (with
 * @unevictable, on the unevictable one), or -1.
 */
static long pages_on_lists(char (*base)[4096], unsigned long n, int unevictable)
{
	long map, flags, count = 0;
	unsigned long i, e, f;

	map = syscall3(SYS_open, (long)"/proc/self/pagemap", O_RDONLY, 0);
	flags = syscall3(SYS_open, (long)"/proc/kpageflags", O_RDONLY, 0);
	for (i = 0; i < n && count >= 0; i++) {
		if (map < 0 || flags < 0 ||
		    entry_at(map, (unsigned long)base[i] / 4096, &e)) {
			count = -1;
			break;
		}
		/* Present, and the PFN (bits 0-54). */
		if (!(e >> 63))
			continue;
		if (entry_at(flags, e & ((1UL << 55) - 1), &f))
			count = -1;
		else
			count += (f >> KPF_LRU) & 1 &
				 (!unevictable || (f >> KPF_UNEVICTABLE) & 1);
	}
	syscall3(SYS_close, map, 0, 0);
	syscall3(SYS_close, flags, 0, 0);
	return count;
}

static long pages_on_lru(char (*base)[4096], unsigned long n)
{
	return pages_on_lists(base, n, 0);
}

static __attribute__((noreturn)) void lru(unsigned long n, const char *file,
					  int mlocked)
{
	volatile char *go;
	long fd, before, after;
	char buf[64], *p = buf;
	unsigned long i;

	if (n > LRU_PAGES)
		n = LRU_PAGES;
	if (mlocked &&
	    syscall3(SYS_mlockall, MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT, 0, 0)) {
		syscall3(SYS_write, 2, (long)"mlockall failed\n", 16);
		syscall3(SYS_exit, 1, 0, 0);
	}
	fd = syscall3(SYS_open, (long)file, O_RDONLY, 0);
	go = (volatile char *)syscall6(SYS_mmap, 0, 4096, PROT_READ, MAP_SHARED, fd, 0);
	if (fd < 0 || (unsigned long)go > -4096UL) {
		syscall3(SYS_write, 2, (long)"cannot map the file\n", 20);
		syscall3(SYS_exit, 1, 0, 0);
	}
	(void)*go;
	for (i = 0; i < n; i++)
		*(volatile char *)area[i] = 1;
	before = pages_on_lists(area, n, mlocked);
	while (*go != '1')
		relax();
	after = pages_on_lists(area, n, mlocked);
	p = put_string(p, "pages ");
	p = put_number(p, n);
	p = put_string(p, " before ");
	p = put_number(p, before < 0 ? n + 1 : (unsigned long)before);
	p = put_string(p, " after ");
	p = put_number(p, after < 0 ? n + 1 : (unsigned long)after);
	*p++ = '\n';
	syscall3(SYS_write, 1, (long)buf, p - buf);
	for (;;)
		syscall3(SYS_exit, before < 0 || after < 0, 0, 0);
}

/*
 * The pages a refill writes to: area, or, with its memory locked, a
 * mapping of the same size that refill_drop() replaces.
 */
static char (*refill_pages)[4096] = area;
static int refill_mlocked;

/* A mapping of LRU_PAGES pages for a locked refill, or exits. */
static char (*refill_map(void))[4096]
{
	long p = syscall6(SYS_mmap, 0, sizeof(area), PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if ((unsigned long)p > -4096UL) {
		syscall3(SYS_write, 2, (long)"cannot map pages\n", 17);
		syscall3(SYS_exit, 1, 0, 0);
	}
	return (char (*)[4096])p;
}

/* Every LRU_PAGES writes: pages to write to anew. */
static void refill_drop(void)
{
	if (!refill_mlocked) {
		syscall3(SYS_madvise, (long)area, sizeof(area), MADV_DONTNEED);
		return;
	}
	syscall3(SYS_munmap, (long)refill_pages, sizeof(area), 0);
	refill_pages = refill_map();
}

/*
 * Step @i of a refill: a write to a new page, and a busy wait of 1000
 * instructions. Timed, it
 * returns how long the write took, else 0.
 */
static unsigned long refill_one(unsigned long i, int timed)
{
	unsigned long j, t0 = 0, t = 0;

	if (i && i % LRU_PAGES == 0)
		refill_drop();
	if (timed)
		t0 = now_ns();
	*(volatile char *)refill_pages[i % LRU_PAGES] = 1;
	if (timed)
		t = now_ns() - t0;
	for (j = 0; j < 1000; j += RELAX_INSNS)
		relax();
	return t;
}

static __attribute__((noreturn)) void hotplug(const char *file)
{
	struct { long sec, nsec; } ms = { 0, 1000000 };
	volatile char *go;
	unsigned long n, full;
	char buf[64], *p = buf;
	long fd, after;

	fd = syscall3(SYS_open, (long)file, O_RDONLY, 0);
	go = (volatile char *)syscall6(SYS_mmap, 0, 4096, PROT_READ, MAP_SHARED, fd, 0);
	if (fd < 0 || (unsigned long)go > -4096UL) {
		syscall3(SYS_write, 2, (long)"cannot map the file\n", 20);
		syscall3(SYS_exit, 1, 0, 0);
	}
	for (n = 0; *go == '0' && n < HOTPLUG_PAGES; n++) {
		*(volatile char *)hotplug_area[n] = 1;
		syscall3(SYS_nanosleep, (long)&ms, 0, 0);
	}
	full = *go == '0';
	while (*go != '2')
		relax();
	after = pages_on_lru(hotplug_area, n);
	p = put_string(p, "faults ");
	p = put_number(p, n);
	p = put_string(p, " full ");
	p = put_number(p, full);
	p = put_string(p, " after ");
	p = put_number(p, after < 0 ? n + 1 : (unsigned long)after);
	*p++ = '\n';
	syscall3(SYS_write, 1, (long)buf, p - buf);
	for (;;)
		syscall3(SYS_exit, after < 0, 0, 0);
}

static __attribute__((noreturn)) void refill(const char *file, int timed, int mlocked)
{
	unsigned long i, t, max = 0, sum = 0;
	volatile char *go;
	char buf[96], *p = buf;
	long fd;

	if (mlocked) {
		if (syscall3(SYS_mlockall, MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT, 0, 0)) {
			syscall3(SYS_write, 2, (long)"mlockall failed\n", 16);
			syscall3(SYS_exit, 1, 0, 0);
		}
		refill_mlocked = 1;
		refill_pages = refill_map();
	}
	fd = syscall3(SYS_open, (long)file, O_RDONLY, 0);
	go = (volatile char *)syscall6(SYS_mmap, 0, 4096, PROT_READ, MAP_SHARED, fd, 0);
	if (fd < 0 || (unsigned long)go > -4096UL) {
		syscall3(SYS_write, 2, (long)"cannot map the file\n", 20);
		syscall3(SYS_exit, 1, 0, 0);
	}
	for (i = 0; *go != '1'; i++) {
		t = refill_one(i, timed);
		sum += t;
		if (t > max)
			max = t;
	}
	p = put_string(p, "faults ");
	p = put_number(p, i);
	if (timed) {
		p = put_string(p, " max_ns ");
		p = put_number(p, max);
		p = put_string(p, " mean_ns ");
		p = put_number(p, i ? sum / i : 0);
	}
	*p++ = '\n';
	syscall3(SYS_write, 1, (long)buf, p - buf);
	for (;;)
		syscall3(SYS_exit, 0, 0, 0);
}

/* Prints "@what N ns NS" and exits. */
static __attribute__((noreturn)) void timed(const char *what, unsigned long n, unsigned long ns)
{
	char buf[64], *p = buf;

	p = put_string(p, what);
	p = put_number(p, n);
	p = put_string(p, " ns ");
	p = put_number(p, ns);
	*p++ = '\n';
	syscall3(SYS_write, 1, (long)buf, p - buf);
	for (;;)
		syscall3(SYS_exit, 0, 0, 0);
}

static __attribute__((noreturn)) void fail(const char *why, long len)
{
	syscall3(SYS_write, 2, (long)why, len);
	for (;;)
		syscall3(SYS_exit, 1, 0, 0);
}

static __attribute__((noreturn)) void pingpong(unsigned long n)
{
	int up[2], down[2], status = -1;
	unsigned long i, t0, t1;
	char c = 0;
	long pid;

	if (syscall3(SYS_pipe, (long)up, 0, 0) || syscall3(SYS_pipe, (long)down, 0, 0))
		fail("pipe failed\n", 12);
	pid = syscall3(SYS_fork, 0, 0, 0);
	if (pid < 0)
		fail("fork failed\n", 12);
	if (pid == 0) {
		for (i = 0; i < n; i++)
			if (syscall3(SYS_read, up[0], (long)&c, 1) != 1 ||
			    syscall3(SYS_write, down[1], (long)&c, 1) != 1)
				fail("child: pipe broken\n", 19);
		for (;;)
			syscall3(SYS_exit, 0, 0, 0);
	}
	t0 = now_ns();
	for (i = 0; i < n; i++)
		if (syscall3(SYS_write, up[1], (long)&c, 1) != 1 ||
		    syscall3(SYS_read, down[0], (long)&c, 1) != 1)
			break;
	t1 = now_ns();
	if (syscall6(SYS_wait4, pid, (long)&status, 0, 0, 0, 0) != pid || status || i != n)
		fail("ping-pong failed\n", 17);
	timed("rounds ", n, t1 - t0);
}

static __attribute__((noreturn)) void modload(const char *file, unsigned long n)
{
	char buf[64], *p = buf;
	long fd, nth, back, ret, left;

	/* Both fail-nth files open first: opening one allocates. */
	fd = syscall3(SYS_open, (long)file, O_RDONLY, 0);
	nth = syscall3(SYS_open, (long)"/proc/thread-self/fail-nth", O_RDWR, 0);
	back = syscall3(SYS_open, (long)"/proc/thread-self/fail-nth", O_RDONLY, 0);
	if (fd < 0 || nth < 0 || back < 0)
		fail("cannot open the module or fail-nth\n", 35);
	p = put_number(p, n);
	if (syscall3(SYS_write, nth, (long)buf, p - buf) != p - buf)
		fail("cannot write fail-nth\n", 22);
	ret = syscall3(SYS_finit_module, fd, (long)"", 0);
	/* What is left of the count: 0 once the point was reached. */
	left = syscall3(SYS_read, back, (long)buf, sizeof(buf));
	if (left <= 0)
		fail("cannot read fail-nth\n", 21);
	left = number(buf);
	p = put_string(buf, "ret ");
	if (ret < 0) {
		*p++ = '-';
		ret = -ret;
	}
	p = put_number(p, ret);
	p = put_string(p, " left ");
	p = put_number(p, left);
	*p++ = '\n';
	syscall3(SYS_write, 1, (long)buf, p - buf);
	for (;;)
		syscall3(SYS_exit, 0, 0, 0);
}

/* Called by _start with the initial stack: argc, then argv. */
__attribute__((used, noreturn)) static void start(long *sp)
{
	char **argv = (char **)(sp + 1);
	unsigned long n, i, t0, t1;
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
	if ((sp[0] == 4 || sp[0] == 5) && s[0] == 'l')
		lru(number(argv[2]), argv[3], sp[0] == 5 && argv[4][0] == 'm');
	if (sp[0] >= 3 && sp[0] <= 5 && s[0] == 'r')
		refill(argv[2], sp[0] >= 4 && argv[3][0] == 't',
		       sp[0] >= 4 && argv[sp[0] - 1][0] == 'm');
	if (sp[0] == 3 && s[0] == 'h')
		hotplug(argv[2]);
	if (sp[0] == 3 && s[0] == 'p')
		pingpong(number(argv[2]));
	if (sp[0] == 4 && s[0] == 'm')
		modload(argv[2], number(argv[3]));
	n = number(s);
	t0 = now_ns();
	for (i = 0; i < n; i++)
		syscall3(SYS_getpid, 0, 0, 0);
	t1 = now_ns();
	timed("calls ", n, t1 - t0);
}

__attribute__((naked)) void _start(void)
{
	__asm__ volatile("mov %rsp, %rdi\n\t"
			 "and $-16, %rsp\n\t"
			 "call start");
}

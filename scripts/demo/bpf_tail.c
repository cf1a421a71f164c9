// SPDX-License-Identifier: GPL-2.0
/*
 * BPF tail calls through a direct jump the JIT patches, without a C library
 * (built like spin.c):
 *
 *   bpf_tail N	loads two raw-tracepoint programs and attaches the first
 *		to task_rename (prctl(PR_SET_NAME) fires it). The first
 *		tail-calls slot 0 of a program array with a constant index,
 *		which the x86 JIT turns into a patched JMP (a NOP while the
 *		slot is empty), and otherwise stores 7 in a result map; the
 *		second stores 42. N times: the second program goes into the
 *		slot (bpf_arch_text_poke() writes the JMP), a rename must
 *		store 42; the slot is emptied (the NOP written back), a
 *		rename must store 7. Prints "tail calls N wrong W" and exits
 *		with 1 if W is not 0, or names the step that failed and exits
 *		with 100.
 */
#include <linux/bpf.h>

#include "nolibc.h"

#define SYS_write	1
#define SYS_exit	60
#define SYS_prctl	157
#define SYS_bpf		321
#define PR_SET_NAME	15

static void zero(void *p, unsigned long n)
{
	asm volatile ("rep stosb" : "+D" (p), "+c" (n) : "a" (0) : "memory");
}

/* Read through a volatile pointer: the compiler would call strlen(). */
static unsigned long length(const volatile char *s)
{
	unsigned long n = 0;

	while (s[n])
		n++;
	return n;
}

static __attribute__((noreturn)) void leave(long code)
{
	syscall3(SYS_exit, code, 0, 0);
	__builtin_unreachable();
}

static char log_buf[4096];

/*
 * Prints "STEP failed: ERR" (a negative errno, or what the program stored)
 * and the verifier's log of the last load, and exits with 100.
 */
static __attribute__((noreturn)) void fail(const char *step, long err)
{
	static char line[256];
	char *p = put_string(line, step);

	p = put_string(p, " failed: ");
	if (err < 0) {
		*p++ = '-';
		err = -err;
	}
	p = put_number(p, err);
	*p++ = '\n';
	syscall3(SYS_write, 1, (long)line, p - line);
	syscall3(SYS_write, 1, (long)log_buf, length(log_buf));
	leave(100);
}

static long sys_bpf(int cmd, union bpf_attr *attr)
{
	return syscall3(SYS_bpf, cmd, (long)attr, sizeof(*attr));
}

static long map_create(unsigned int type, unsigned int value_size)
{
	union bpf_attr a;

	zero(&a, sizeof(a));
	a.map_type = type;
	a.key_size = 4;
	a.value_size = value_size;
	a.max_entries = 1;
	return sys_bpf(BPF_MAP_CREATE, &a);
}

static long map_op(int cmd, long fd, void *value)
{
	union bpf_attr a;
	unsigned int key = 0;

	zero(&a, sizeof(a));
	a.map_fd = fd;
	a.key = (unsigned long)&key;
	a.value = (unsigned long)value;
	return sys_bpf(cmd, &a);
}

#define INSN(c, d, s, o, i) \
	((struct bpf_insn){ .code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i) })
#define LD_MAP_FD(d, fd) \
	INSN(BPF_LD | BPF_DW | BPF_IMM, d, BPF_PSEUDO_MAP_FD, 0, fd), INSN(0, 0, 0, 0, 0)
#define MOV_IMM(d, i)	INSN(BPF_ALU64 | BPF_MOV | BPF_K, d, 0, 0, i)
#define MOV_REG(d, s)	INSN(BPF_ALU64 | BPF_MOV | BPF_X, d, s, 0, 0)
#define ADD_IMM(d, i)	INSN(BPF_ALU64 | BPF_ADD | BPF_K, d, 0, 0, i)
#define CALL(f)		INSN(BPF_JMP | BPF_CALL, 0, 0, 0, f)
#define EXIT()		INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)

/* Stores @value in slot 0 of the result map, then returns 0. */
#define STORE_RESULT(result, value)					\
	LD_MAP_FD(BPF_REG_1, result),					\
	INSN(BPF_ST | BPF_MEM | BPF_W, BPF_REG_10, 0, -4, 0),		\
	MOV_REG(BPF_REG_2, BPF_REG_10),					\
	ADD_IMM(BPF_REG_2, -4),						\
	CALL(BPF_FUNC_map_lookup_elem),					\
	INSN(BPF_JMP | BPF_JEQ | BPF_K, BPF_REG_0, 0, 1, 0),		\
	INSN(BPF_ST | BPF_MEM | BPF_DW, BPF_REG_0, 0, 0, value),	\
	MOV_IMM(BPF_REG_0, 0),						\
	EXIT()

static long prog_load(struct bpf_insn *insns, unsigned int n)
{
	union bpf_attr a;

	zero(&a, sizeof(a));
	zero(log_buf, sizeof(log_buf));
	a.prog_type = BPF_PROG_TYPE_RAW_TRACEPOINT;
	a.insns = (unsigned long)insns;
	a.insn_cnt = n;
	a.license = (unsigned long)"GPL";
	a.log_buf = (unsigned long)log_buf;
	a.log_size = sizeof(log_buf);
	a.log_level = 1;
	return sys_bpf(BPF_PROG_LOAD, &a);
}

/* Fires task_rename, and returns what the programs stored (0 if nothing). */
static long fire(long result)
{
	unsigned long value = 0;
	long err;

	err = map_op(BPF_MAP_UPDATE_ELEM, result, &value);
	if (err)
		fail("clearing the result", err);
	syscall3(SYS_prctl, PR_SET_NAME, (long)"bpf_tail", 0);
	err = map_op(BPF_MAP_LOOKUP_ELEM, result, &value);
	if (err)
		fail("reading the result", err);
	return value;
}

__attribute__((used, noreturn)) static void start(long *sp)
{
	unsigned long i, n = sp[0] > 1 ? number((char *)sp[2]) : 10;
	long slots, result, target, main, link, got, err, wrong = 0;
	static char line[64];
	union bpf_attr a;
	char *p;

	slots = map_create(BPF_MAP_TYPE_PROG_ARRAY, 4);
	if (slots < 0)
		fail("creating the program array", slots);
	result = map_create(BPF_MAP_TYPE_ARRAY, 8);
	if (result < 0)
		fail("creating the result map", result);
	{
		struct bpf_insn second[] = { STORE_RESULT(result, 42) };
		struct bpf_insn first[] = {
			LD_MAP_FD(BPF_REG_2, slots),
			MOV_IMM(BPF_REG_3, 0),
			CALL(BPF_FUNC_tail_call),
			STORE_RESULT(result, 7),
		};

		target = prog_load(second, sizeof(second) / sizeof(second[0]));
		if (target < 0)
			fail("loading the second program", target);
		main = prog_load(first, sizeof(first) / sizeof(first[0]));
		if (main < 0)
			fail("loading the first program", main);
	}
	zero(&a, sizeof(a));
	a.raw_tracepoint.name = (unsigned long)"task_rename";
	a.raw_tracepoint.prog_fd = main;
	link = sys_bpf(BPF_RAW_TRACEPOINT_OPEN, &a);
	if (link < 0)
		fail("attaching to task_rename", link);
	got = fire(result);
	if (got != 7)
		fail("the first program with an empty slot", got);
	for (i = 0; i < n; i++) {
		unsigned int fd = target;

		err = map_op(BPF_MAP_UPDATE_ELEM, slots, &fd);
		if (err)
			fail("filling the slot", err);
		wrong += fire(result) != 42;
		err = map_op(BPF_MAP_DELETE_ELEM, slots, 0);
		if (err)
			fail("emptying the slot", err);
		wrong += fire(result) != 7;
	}
	p = put_string(line, "tail calls ");
	p = put_number(p, n);
	p = put_string(p, " wrong ");
	p = put_number(p, wrong);
	*p++ = '\n';
	syscall3(SYS_write, 1, (long)line, p - line);
	leave(wrong != 0);
}

__attribute__((naked)) void _start(void)
{
	__asm__ volatile("mov %rsp, %rdi\n\t"
			 "and $-16, %rsp\n\t"
			 "call start");
}

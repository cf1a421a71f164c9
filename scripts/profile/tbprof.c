// SPDX-License-Identifier: GPL-2.0
/*
 * A QEMU TCG plugin for scripts/profile.sh: guest instructions executed
 * per translation block of the kernel, dumped and reset whenever the block
 * at mark= is executed, so that each dump covers what the guest ran between
 * two calls of that function (one benchmark command each).
 *
 * Built on the host against QEMU's plugin API, version 1 (QEMU 4.2 and
 * later, Debian 12's 7.2 among them), whose few declarations it needs are
 * written out below: Debian ships no qemu-plugin.h.
 *
 * Arguments: mark=ADDRESS (hex) and out=PREFIX; dump N goes to PREFIX.N,
 * one line per block: its address, its instructions, and the instructions
 * executed in it since the last dump.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;
typedef struct qemu_info_t qemu_info_t;
struct qemu_plugin_tb;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS };
typedef void (*tb_trans_cb)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*vcpu_udata_cb)(unsigned int vcpu, void *udata);
typedef void (*udata_cb)(qemu_plugin_id_t id, void *udata);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, tb_trans_cb cb);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb,
					      enum qemu_plugin_op op,
					      void *ptr, uint64_t imm);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb,
					  vcpu_udata_cb cb,
					  enum qemu_plugin_cb_flags flags,
					  void *udata);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, udata_cb cb,
				    void *udata);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

/* Kernel addresses only: the top half of the address space. */
#define KERNEL_START 0xffff800000000000ULL
#define HASH_BITS 20

struct block {
	uint64_t vaddr;
	uint64_t insns;
	uint64_t executed;
	struct block *hash_next;
	struct block *next;
};

static struct block *hash[1 << HASH_BITS];
static struct block *blocks;
static uint64_t mark;
static const char *out = "tbprof";
static int dumps;

/* A block is its address and its length: one address may be translated
 * into blocks of several lengths. */
static struct block *block_of(uint64_t vaddr, uint64_t insns)
{
	unsigned int h = (vaddr ^ (vaddr >> HASH_BITS) ^ insns * 0x9e37) &
			 ((1 << HASH_BITS) - 1);
	struct block *b;

	for (b = hash[h]; b; b = b->hash_next)
		if (b->vaddr == vaddr && b->insns == insns)
			return b;
	b = calloc(1, sizeof(*b));
	if (!b) {
		fprintf(stderr, "tbprof: out of memory\n");
		exit(1);
	}
	b->vaddr = vaddr;
	b->insns = insns;
	b->hash_next = hash[h];
	hash[h] = b;
	b->next = blocks;
	blocks = b;
	return b;
}

static void dump(void)
{
	char name[4096];
	struct block *b;
	FILE *f;

	snprintf(name, sizeof(name), "%s.%d", out, dumps++);
	f = fopen(name, "w");
	if (!f)
		fprintf(stderr, "tbprof: cannot write %s\n", name);
	for (b = blocks; b; b = b->next) {
		if (b->executed && f)
			fprintf(f, "%llx %llu %llu\n",
				(unsigned long long)b->vaddr,
				(unsigned long long)b->insns,
				(unsigned long long)b->executed);
		b->executed = 0;
	}
	if (f)
		fclose(f);
}

static void on_mark(unsigned int vcpu, void *udata)
{
	dump();
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	uint64_t vaddr = qemu_plugin_tb_vaddr(tb);
	size_t n = qemu_plugin_tb_n_insns(tb);
	struct block *b;

	if (vaddr < KERNEL_START)
		return;
	b = block_of(vaddr, n);
	qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64,
						 &b->executed, n);
	if (vaddr == mark)
		qemu_plugin_register_vcpu_tb_exec_cb(tb, on_mark,
						     QEMU_PLUGIN_CB_NO_REGS,
						     NULL);
}

static void on_guest_exit(qemu_plugin_id_t id, void *udata)
{
	dump();
}

__attribute__((visibility("default")))
int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
			int argc, char **argv)
{
	int i;

	for (i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "mark=", 5)) {
			mark = strtoull(argv[i] + 5, NULL, 16);
		} else if (!strncmp(argv[i], "out=", 4)) {
			out = strdup(argv[i] + 4);
		} else {
			fprintf(stderr, "tbprof: unknown argument %s\n", argv[i]);
			return -1;
		}
	}
	if (!mark) {
		fprintf(stderr, "tbprof: mark= missing\n");
		return -1;
	}
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
	qemu_plugin_register_atexit_cb(id, on_guest_exit, NULL);
	return 0;
}

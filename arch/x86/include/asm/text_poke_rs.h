/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The Rust text-poke batch (kernel/jump_label_rs/) behind smp_text_poke_*():
 * the interface between alternative.c, the C shim and the Rust side.
 */
#ifndef _ASM_X86_TEXT_POKE_RS_H
#define _ASM_X86_TEXT_POKE_RS_H

#include <linux/percpu.h>
#include <linux/types.h>

struct pt_regs;
struct task_struct;

/* Which implementation serves smp_text_poke_*(): "text_poke=" at boot. */
enum text_poke_rs_mode {
	TEXT_POKE_RS_MODE_RUST,
	TEXT_POKE_RS_MODE_C,
	TEXT_POKE_RS_MODE_SERIAL,
};

/* What the INT3 handler does for a CPU that hit a site being patched. */
enum text_poke_rs_emul_kind {
	TEXT_POKE_RS_EMUL_NONE,
	TEXT_POKE_RS_EMUL_INT3,
	TEXT_POKE_RS_EMUL_RET,
	TEXT_POKE_RS_EMUL_CALL,
	TEXT_POKE_RS_EMUL_JMP,
	TEXT_POKE_RS_EMUL_JCC,
};

/**
 * struct text_poke_rs_emul - an instruction for the INT3 handler to emulate
 * @target: where a CALL, JMP or taken Jcc goes
 * @next: the address of the next instruction (CALL's return address)
 * @kind: enum text_poke_rs_emul_kind
 * @cc: a Jcc's condition code
 */
struct text_poke_rs_emul {
	unsigned long target;
	unsigned long next;
	u8 kind;
	u8 cc;
};

/**
 * struct text_poke_rs_stats - what smp_text_poke_*() did, in every mode
 * @batches: batches applied
 * @entries: sites patched
 * @syncs: sync rounds (one IPI to every other online CPU each)
 * @ipis: IPIs sent by sync rounds
 * @int3_hits: INT3s at sites being patched, emulated by the handler
 * @max_batch: the largest batch, in sites
 * @batch_ns: time spent applying batches
 * @own_syncs: sync rounds made by the task text_poke_rs_track() follows
 * @own_entries: sites patched by that task
 */
struct text_poke_rs_stats {
	u64 batches;
	u64 entries;
	u64 syncs;
	u64 ipis;
	u64 int3_hits;
	u64 max_batch;
	u64 batch_ns;
	u64 own_syncs;
	u64 own_entries;
};

#ifdef CONFIG_TEXT_POKE_RS

extern int text_poke_rs_mode;
extern struct task_struct *text_poke_rs_txn_owner;
DECLARE_PER_CPU(unsigned long, text_poke_rs_int3_hits);

static __always_inline bool text_poke_rs_active(void)
{
	return text_poke_rs_mode != TEXT_POKE_RS_MODE_C;
}

/* Counts an emulated INT3; called from noinstr code. */
static __always_inline void text_poke_rs_note_int3(void)
{
	raw_cpu_inc(text_poke_rs_int3_hits);
}

void text_poke_rs_note_sync(void);
void text_poke_rs_note_batch(unsigned int entries);
void text_poke_rs_note_batch_done(void);
void text_poke_rs_read_stats(struct text_poke_rs_stats *stats);
void text_poke_rs_track(bool on);
int text_poke_rs_int3_handler(struct pt_regs *regs);
void text_poke_rs_poked(const void *addr, const void *old, const void *new,
			size_t len);

/* Transactions: the batches of several calls applied as one. */
void text_poke_rs_txn_begin(void);
void text_poke_rs_txn_commit(void);

/* The per-CPU reference handshake with the INT3 handler. */
void text_poke_rs_publish(void);
void text_poke_rs_retire(void);

/* Implemented in Rust. */
void text_poke_rs_batch_add(void *addr, const void *opcode, size_t len,
			    const void *emulate);
void text_poke_rs_batch_finish(void);
bool text_poke_rs_lookup(unsigned long ip, struct text_poke_rs_emul *emul);

#else /* !CONFIG_TEXT_POKE_RS */

static __always_inline bool text_poke_rs_active(void)
{
	return false;
}

static __always_inline void text_poke_rs_note_int3(void)
{
}

static inline void text_poke_rs_note_sync(void)
{
}

static inline void text_poke_rs_note_batch(unsigned int entries)
{
}

static inline void text_poke_rs_note_batch_done(void)
{
}

#endif /* CONFIG_TEXT_POKE_RS */

#endif /* _ASM_X86_TEXT_POKE_RS_H */

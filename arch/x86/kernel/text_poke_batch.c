// SPDX-License-Identifier: GPL-2.0
/*
 * C side of the Rust text-poke batch (text_poke_batch/): the per-CPU
 * reference handshake with the noinstr INT3 entry, the runs of text pages
 * the batch writes through, and text_mutex for the Rust side. What only
 * measurement needs is in text_poke_batch_measure.c.
 */

#include <linux/atomic.h>
#include <linux/cpu.h>
#include <linux/cpumask.h>
#include <linux/context_tracking_work.h>
#include <linux/fault-inject.h>
#include <linux/init.h>
#include <linux/jump_label.h>
#include <linux/kasan.h>
#include <linux/kgdb.h>
#include <linux/memory.h>
#include <linux/mm.h>
#include <linux/mmap_lock.h>
#include <linux/mmu_context.h>
#include <linux/mutex.h>
#include <linux/perf_event.h>
#include <linux/percpu.h>
#include <linux/printk.h>
#include <linux/sched.h>
#include <linux/smp.h>
#include <linux/string.h>
#include <linux/sync_core.h>
#include <linux/text-patching.h>
#include <linux/uaccess.h>
#include <linux/unaligned.h>

#include <asm/kaslr.h>
#include <asm/sections.h>
#include <asm/text_poke_batch.h>
#include <asm/tlbflush.h>

#define CREATE_TRACE_POINTS
#include <trace/events/text_poke_batch.h>

DEFINE_PER_CPU(atomic_t, text_poke_batch_refs);
struct text_poke_batch_vec text_poke_batch_published;

/**
 * text_poke_batch_note_refused - count a key flip the Rust batch refused
 * @key: the key whose flip was refused
 * @wrong: how many of its sites held bytes the flip did not expect
 *
 * Emits the text_poke_batch_refused trace event and counts the refusal.
 */
void text_poke_batch_note_refused(const void *key, unsigned int wrong)
{
	text_poke_batch_count_refused();
	trace_text_poke_batch_refused(key, wrong);
}

/**
 * text_poke_batch_assert_text_held - check with lockdep that text_mutex is held
 */
void text_poke_batch_assert_text_held(void)
{
	lockdep_assert_held(&text_mutex);
}

/**
 * text_poke_batch_publish - show a batch's sites to the INT3 handler
 * @sites: the batch's PokeLocs, sorted by address
 * @nr: how many
 * @index: NULL, or the Index of @sites that narrows the handler's search
 *
 * Publishes the vector before any INT3 is written: a CPU that sees one of
 * the batch's INT3s must find a non-zero count, and the vector with it.
 *
 * Context: text_mutex held; might sleep.
 */
void text_poke_batch_publish(const void *sites, size_t nr, const void *index)
{
	int cpu;

	lockdep_assert_held(&text_mutex);
	text_poke_batch_published.sites = sites;
	text_poke_batch_published.nr = nr;
	text_poke_batch_published.index = index;
	for_each_possible_cpu(cpu)
		atomic_set_release(per_cpu_ptr(&text_poke_batch_refs, cpu), 1);
	/*
	 * As upstream's batch does before each batch: the function tracer
	 * applies thousands of them in a row, which would trip the soft
	 * lockup watchdog without a chance to schedule.
	 */
	cond_resched();
	/* Counts before INT3s; pairs with smp_rmb() in the INT3 handler. */
	smp_wmb();
}

/**
 * text_poke_batch_retire - withdraw what text_poke_batch_publish() showed
 *
 * After the batch's last sync: drops the publisher's references and waits
 * for handlers still looking at the vector.
 */
void text_poke_batch_retire(void)
{
	int cpu;

	for_each_possible_cpu(cpu) {
		atomic_t *refs = per_cpu_ptr(&text_poke_batch_refs, cpu);

		if (unlikely(!atomic_dec_and_test(refs)))
			atomic_cond_read_acquire(refs, !VAL);
	}
	text_poke_batch_published.sites = NULL;
	text_poke_batch_published.nr = 0;
	text_poke_batch_published.index = NULL;
}

#ifdef CONFIG_FAIL_TEXT_POKE_BATCH
/*
 * fail_text_poke_batch: a write of the Rust batch chosen by the fault attributes
 * (/sys/kernel/debug/fail_text_poke_batch/, or set by a test) does not land, as
 * if it had gone to another page. The batch must find it when it reads the
 * write back, and put every site back as it was. Asked once per
 * text_poke() write and once per run of pages (whose first write is then
 * dropped, @run->fail), of batches whose caller can be told: key flips and
 * transactions, not the C callers of smp_text_poke_batch_finish(), which
 * stop the kernel on a batch not applied.
 */
DECLARE_FAULT_ATTR(fail_text_poke_batch);

/**
 * text_poke_batch_faults_armed - whether anything is asked of fail_text_poke_batch now
 *
 * Cheaper than asking should_fail(), which is not.
 *
 * Return: true if its probability is set or the task has a fail-nth count.
 */
bool text_poke_batch_faults_armed(void)
{
	return READ_ONCE(fail_text_poke_batch.probability) ||
	       READ_ONCE(current->fail_nth);
}

/**
 * text_poke_batch_should_fail - whether this write of the Rust batch is dropped
 *
 * Return: true if fail_text_poke_batch chooses it, as should_fail() does.
 */
bool text_poke_batch_should_fail(void)
{
	return text_poke_batch_faults_armed() && should_fail(&fail_text_poke_batch, 1);
}

static int __init text_poke_batch_fail_debugfs(void)
{
	struct dentry *dir;

	dir = fault_create_debugfs_attr("fail_text_poke_batch", NULL,
					&fail_text_poke_batch);
	return PTR_ERR_OR_ZERO(dir);
}
late_initcall(text_poke_batch_fail_debugfs);
#endif

/*
 * Runs of text pages written through one temporary mapping. text_poke()
 * maps the page (or two) of one write in the poking mm, switches to it,
 * writes, switches back and flushes, for every write: three times per
 * site per batch. A run maps up to TEXT_POKE_BATCH_RUN_PAGES pages at once at
 * consecutive addresses of the poking mm, and the batch writes every site
 * of one phase that falls in them before switching back. Runs are mapped
 * at a random place of their own, as random as text_poke_mm_addr, in one
 * PTE table made at boot; 0 until then, and runs are not mapped (the
 * batch writes with text_poke()). Only text_mutex holders map anything in
 * the poking mm.
 */
static unsigned long text_poke_batch_run_addr __ro_after_init;
/*
 * The PTE of the runs' first page and the lock of its table, found once:
 * the table is made at boot and never freed, and x86-64 keeps page tables
 * in the direct map, so the pointers stay valid after pte_unmap().
 */
static pte_t *text_poke_batch_run_ptep __ro_after_init;
static spinlock_t *text_poke_batch_run_ptl __ro_after_init;

/**
 * text_poke_batch_run_place - where runs are mapped for a random value
 * @r: the random value
 *
 * A page among all those between TASK_UNMAPPED_BASE and TASK_SIZE that
 * start TEXT_POKE_BATCH_RUN_PAGES pages within one PTE table. There are as
 * many, within a bit, as there are places for text_poke_mm_addr.
 *
 * Return: the address of the runs' first page in the poking mm.
 */
unsigned long text_poke_batch_run_place(unsigned long r)
{
	unsigned long first = ALIGN(TASK_UNMAPPED_BASE, PMD_SIZE);
	unsigned long pmds = (TASK_SIZE - first) / PMD_SIZE;
	unsigned long slots = PTRS_PER_PTE - TEXT_POKE_BATCH_RUN_PAGES + 1;

	return first + (r % pmds) * PMD_SIZE + (r / pmds % slots) * PAGE_SIZE;
}

/**
 * text_poke_batch_run_area - where runs are mapped
 *
 * Return: the address of the runs' first page in the poking mm, 0 before
 * the boot made their page table.
 */
unsigned long text_poke_batch_run_area(void)
{
	return text_poke_batch_run_addr;
}

/* After poking_init(), before any CPU but the boot CPU runs. */
static int __init text_poke_batch_run_init(void)
{
	unsigned long r = 0, addr;
	spinlock_t *ptl;	/* the lock of the PTE table, taken to make it */
	pte_t *ptep;

	if (IS_ENABLED(CONFIG_RANDOMIZE_BASE))
		r = kaslr_get_random_long("Poking runs");
	addr = text_poke_batch_run_place(r);
	/* Made now: a run that cannot get it would go one write at a time. */
	ptep = get_locked_pte(text_poke_mm, addr, &ptl);
	if (WARN_ON(!ptep))
		return -ENOMEM;
	pte_unmap_unlock(ptep, ptl);
	text_poke_batch_run_ptep = ptep;
	text_poke_batch_run_ptl = ptl;
	text_poke_batch_run_addr = addr;
	return 0;
}
early_initcall(text_poke_batch_run_init);

static unsigned long text_poke_batch_run_base(void)
{
	return text_poke_batch_run_addr;
}

/* The page of text at @addr, as text_poke() finds it; NULL if none. */
static struct page *text_poke_batch_text_page(unsigned long addr)
{
	struct page *page;

	if (core_kernel_text(addr)) {
		page = virt_to_page((void *)addr);
		WARN_ON(!PageReserved(page));
		return page;
	}
	/* Not module or vmalloc'd text: vmalloc_to_page() cannot tell. */
	if (!is_vmalloc_or_module_addr((void *)addr))
		return NULL;
	/* From kgdb: no sleeping, and every other CPU is stopped. */
	if (in_dbg_master())
		return vmalloc_to_page((void *)addr);
	/*
	 * Module text: execmem's ROX ranges can be collapsed into huge
	 * mappings concurrently; init_mm's lock keeps vmalloc_to_page()
	 * from racing with that, as in text_poke().
	 */
	guard(mmap_read_lock)(&init_mm);
	return vmalloc_to_page((void *)addr);
}

/**
 * text_poke_batch_run_mappable - whether pages of text can be mapped for writing
 * @pages: their page addresses
 * @n: how many
 *
 * The Rust batch asks before it writes any byte, and applies nothing if
 * one cannot: this warns, naming the page, and counts it.
 *
 * Return: true if every page can be mapped.
 */
bool text_poke_batch_run_mappable(const unsigned long *pages, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		if (WARN(!text_poke_batch_text_page(pages[i]),
			 "text_poke_batch: no page of text at %pS: batch not applied\n",
			 (void *)pages[i])) {
			text_poke_batch_count_unmapped();
			return false;
		}
	}
	return true;
}

/**
 * text_poke_batch_run_map - map a run of text pages for writing
 * @run: the run, set up here
 * @pages: the pages' addresses
 * @n: how many, at most TEXT_POKE_BATCH_RUN_PAGES
 *
 * Maps the pages in the poking mm for text_poke_batch_run_sites(), until
 * text_poke_batch_run_unmap(). The PTE
 * lock is held only while the PTEs are set, and again while they are
 * cleared: text_mutex keeps every other user of the poking mm out in
 * between, and the runs' page table, made at boot, is never freed.
 * Interrupts are off only while a chunk of writes is made, and preemption
 * only with them, as in text_poke(): between chunks the task may be
 * preempted, though not moved to another CPU until the run is unmapped.
 *
 * Context: text_mutex held.
 * Return: 0, or an error with nothing mapped: -EINVAL for a bad @n,
 * -EAGAIN before the runs' page table is made at boot, -EFAULT for a page
 * that is not text that can be mapped (with a warning).
 */
int text_poke_batch_run_map(struct text_poke_batch_run *run,
			    const unsigned long *pages, unsigned int n)
{
	pgprot_t prot = __pgprot(pgprot_val(PAGE_KERNEL) & ~_PAGE_GLOBAL);
	unsigned long base = text_poke_batch_run_base();
	struct page *page[TEXT_POKE_BATCH_RUN_PAGES];
	unsigned int i;

	lockdep_assert_held(&text_mutex);
	if (!n || n > TEXT_POKE_BATCH_RUN_PAGES)
		return -EINVAL;
	if (!base)
		return -EAGAIN;
	for (i = 0; i < n; i++) {
		page[i] = text_poke_batch_text_page(pages[i]);
		if (WARN_ONCE(!page[i], "text_poke_batch: no page for text at %pS\n",
			      (void *)pages[i]))
			return -EFAULT;
	}
	/* The poking mm is loaded nowhere: no need to keep interrupts out. */
	spin_lock(text_poke_batch_run_ptl);
	for (i = 0; i < n; i++)
		set_pte_at(text_poke_mm, base + i * PAGE_SIZE, text_poke_batch_run_ptep + i,
			   mk_pte(page[i], prot));
	spin_unlock(text_poke_batch_run_ptl);
	/*
	 * Every chunk is written from this CPU: no other holds TLB entries of
	 * the run when it is unmapped.
	 */
	migrate_disable();
	run->n = n;
	run->fail = false;
	return 0;
}

/*
 * Whether the write @w of a run of @size bytes lies within it and reads
 * back as written through the text's own address. Not written: fault
 * injection dropped it.
 */
static bool text_poke_batch_run_landed(const struct text_poke_batch_write *w,
				       unsigned long size)
{
	u32 at = w->at, len = w->bytes[7];

	return len - 1 < TEXT_POKE_BATCH_WRITE_MAX && (unsigned long)at + len <= size &&
	       !memcmp(_stext + w->rel, w->bytes, len);
}

/* A byte store the compiler does not instrument (KASAN), as an asm. */
static __always_inline void text_poke_batch_put(u8 *dst, u8 byte)
{
	asm volatile("movb %1, %0" : "=m" (*dst) : "q" (byte));
}

/* Four bytes, a store the compiler does not instrument either. */
static __always_inline void text_poke_batch_put4(u8 *dst, u32 word)
{
	asm volatile("movl %1, %0" : "=m" (*(u32 *)dst) : "r" (word));
}

/* Into the poking mm, interrupts off, for a chunk of writes of @run. */
static __always_inline void text_poke_batch_run_enter(struct text_poke_batch_run *run)
{
	local_irq_save(run->flags);
	/* A compiler barrier too: the PTEs are set before the writes. */
	run->prev = use_temporary_mm(text_poke_mm);
	kasan_disable_current();
	text_poke_batch_note_mm_switch();
}

/* Back from text_poke_batch_run_enter(). */
static __always_inline void text_poke_batch_run_leave(struct text_poke_batch_run *run)
{
	kasan_enable_current();
	/* Serialising: this CPU sees the new text from here on. */
	unuse_temporary_mm(run->prev);
	local_irq_restore(run->flags);
}

/*
 * The piece @from to @to of the instruction of the site @s, or @fill in its
 * bytes, as a write of its own in @w: false if the instruction has no byte
 * in it.
 */
static bool text_poke_batch_piece(const struct text_poke_batch_site *s,
				  unsigned int from, unsigned int to, int fill,
				  struct text_poke_batch_write *w)
{
	u32 end = min_t(u32, s->w.bytes[7], to);

	if (end <= from)
		return false;
	*w = (struct text_poke_batch_write){ .at = s->w.at + from, .rel = s->w.rel + from };
	if (fill < 0)
		memcpy(w->bytes, s->w.bytes + from, min(end - from, 7U));
	else
		memset(w->bytes, fill, min(end - from, 7U));
	w->bytes[7] = end - from;
	return true;
}

/*
 * The first byte of each of the @n sites @s, or @fill there if @filled,
 * written through a run of @size bytes mapped at @base and read back
 * through the text. Inlined for each @filled it is called with.
 */
static __always_inline unsigned int
text_poke_batch_put_firsts(u8 *base, unsigned long size, const struct text_poke_batch_site *s,
			   unsigned int n, bool filled, u8 fill)
{
	const u8 *text = (const u8 *)_stext;
	unsigned int wrong = 0;

	for (; n; n--, s++) {
		u32 at = s->w.at;
		u8 byte = filled ? fill : s->w.bytes[0];

		if (unlikely((unsigned long)at >= size)) {
			wrong++;
			continue;
		}
		text_poke_batch_put(base + at, byte);
		wrong += READ_ONCE(text[s->w.rel]) != byte;
	}
	return wrong;
}

/*
 * Bytes @from to @to of the instruction of each of the @n sites @s, those
 * it has, as text_poke_batch_put_firsts() writes the first: inlined for
 * each @from and @to it is called with.
 */
static __always_inline unsigned int
text_poke_batch_put_pieces(u8 *base, unsigned long size, const struct text_poke_batch_site *s,
			   unsigned int n, unsigned int from, unsigned int to)
{
	const u8 *text = (const u8 *)_stext;
	unsigned int j, wrong = 0;

	for (; n; n--, s++) {
		u32 len = s->w.bytes[7], at = s->w.at + from, cnt, diff = 0;
		const u8 *txt = text + s->w.rel + from;
		u8 *dst = base + at;
		u64 b;

		if (unlikely(len > TEXT_POKE_BATCH_WRITE_MAX)) {
			wrong++;
			continue;
		}
		len = min(len, to);
		if (len <= from)
			continue;
		cnt = len - from;
		if (unlikely((unsigned long)at + cnt > size)) {
			wrong++;
			continue;
		}
		/*
		 * The bytes as one word, shifted: no index into the site's
		 * bytes, whose bounds check (UBSAN) would call out with user
		 * access on. The four of a JMP's or a CALL's tail in one
		 * store, a single byte as one, anything else byte by byte.
		 */
		b = get_unaligned_le64(s->w.bytes) >> (8 * from);
		switch (cnt) {
		case 1:
			text_poke_batch_put(dst, b);
			wrong += READ_ONCE(*txt) != (u8)b;
			break;
		case 4:
			text_poke_batch_put4(dst, b);
			wrong += get_unaligned((const u32 *)txt) != (u32)b;
			break;
		default:
			for (j = 0; j < cnt; j++) {
				text_poke_batch_put(dst + j, b >> (8 * j));
				diff |= READ_ONCE(txt[j]) ^ (u8)(b >> (8 * j));
			}
			wrong += !!diff;
			break;
		}
	}
	return wrong;
}

/**
 * text_poke_batch_run_sites - write a piece of each site's instruction through a run
 * @run: the run, mapped by text_poke_batch_run_map()
 * @s: the sites, each with its whole new instruction @s->w (one byte at
 *     least) at its place in the run's mapping
 * @n: how many, at most TEXT_POKE_BATCH_RUN_WRITES (more are refused: none
 *     of them is written)
 * @from: the first byte of each instruction to write
 * @to: the byte after the last, or any number past the instruction's end
 *	for all the rest of it
 * @fill: if not negative, the byte to write instead of the instruction's
 *	own, for a piece of one byte at the start (other pieces are refused)
 *
 * Writes, at each site, the bytes of the piece its instruction has (a site
 * with none is skipped), and reads them back through the text's own
 * address, as text_poke() does: a write through a mapping of the wrong
 * page reads back right through the mapping and wrong in the text. The
 * Rust batch makes each site's write once, in the first phase of the INT3
 * protocol, and tells this function which piece of it each phase writes:
 * the protocol is the batch's, this function only writes.
 *
 * The writes are made in the poking mm with interrupts off, as text_poke()
 * makes its one write: an interrupt handler never runs with the writable
 * alias of the text mapped. The Rust batch hands the sites of a run over
 * in chunks of TEXT_POKE_BATCH_RUN_WRITES at most and interrupts come in
 * between, so that the longest interrupts-off section stays near
 * text_poke()'s however many sites a run holds. The TLB entries of the
 * poking mm stay valid from chunk to chunk: its PTEs do not change until
 * text_poke_batch_run_unmap().
 *
 * Context: text_mutex held.
 * Return: how many writes differ, or, not written at all, do not lie
 * within the run or are of an instruction longer than
 * TEXT_POKE_BATCH_WRITE_MAX.
 */
unsigned int text_poke_batch_run_sites(struct text_poke_batch_run *run,
				       const struct text_poke_batch_site *s,
				       unsigned int n, unsigned int from,
				       unsigned int to, int fill)
{
	unsigned long size = run->n * PAGE_SIZE;
	u8 *base = (u8 *)text_poke_batch_run_base();
	bool first = from == 0 && to == 1;
	struct text_poke_batch_write w;
	unsigned int wrong = 0;

	if (WARN_ON_ONCE(n > TEXT_POKE_BATCH_RUN_WRITES || from >= to || fill > U8_MAX ||
			 (fill >= 0 && !first)))
		return n;
	text_poke_batch_run_enter(run);
	if (unlikely(run->fail)) {
		/* Fault injection: the first write of the piece in the run does not land. */
		for (; n; n--, s++) {
			if (text_poke_batch_piece(s, from, to, fill, &w)) {
				run->fail = false;
				wrong += !text_poke_batch_run_landed(&w, size);
				n--;
				s++;
				break;
			}
		}
	}
	lass_stac();
	/*
	 * Byte stores, never instrumented (the poking mm's address has no
	 * KASAN shadow) and never a call with user access on. Each shape of
	 * piece the batch writes has a loop of its own: its first bytes, INT3
	 * in their place, the rest of each instruction.
	 */
	if (first && fill >= 0)
		wrong += text_poke_batch_put_firsts(base, size, s, n, true, fill);
	else if (first)
		wrong += text_poke_batch_put_firsts(base, size, s, n, false, 0);
	else if (from == 1 && to >= TEXT_POKE_BATCH_WRITE_MAX)
		wrong += text_poke_batch_put_pieces(base, size, s, n, 1, TEXT_POKE_BATCH_WRITE_MAX);
	else
		wrong += text_poke_batch_put_pieces(base, size, s, n, from, to);
	lass_clac();
	text_poke_batch_run_leave(run);
	return wrong;
}

/**
 * text_poke_batch_run_unmap - undo text_poke_batch_run_map()
 * @run: the run
 *
 * Context: text_mutex held, by the task that mapped @run.
 */
void text_poke_batch_run_unmap(struct text_poke_batch_run *run)
{
	unsigned long base = text_poke_batch_run_base();
	unsigned int i;

	lockdep_assert_held(&text_mutex);
	/* The PTEs are cleared after the writes. */
	spin_lock(text_poke_batch_run_ptl);
	for (i = 0; i < run->n; i++)
		pte_clear(text_poke_mm, base + i * PAGE_SIZE, text_poke_batch_run_ptep + i);
	/*
	 * No IPI: the poking mm is not loaded anywhere now. Its TLB entries
	 * on this CPU go when it is next switched to.
	 */
	flush_tlb_mm_range(text_poke_mm, base, base + run->n * PAGE_SIZE,
			   PAGE_SHIFT, false);
	spin_unlock(text_poke_batch_run_ptl);
	migrate_enable();
}

/**
 * text_poke_batch_reports - whether perf records rewrites of text now
 *
 * Asked once per batch.
 *
 * Return: true if text_poke_batch_poked() is to be called for each rewrite.
 */
bool text_poke_batch_reports(void)
{
	return perf_event_text_poke_wanted();
}

/**
 * text_poke_batch_poked - record a rewrite of text for perf
 * @addr: where the text was rewritten
 * @old: the bytes before
 * @new: the bytes after
 * @len: how many
 *
 * For decoders that walk the text (Intel PT).
 */
void text_poke_batch_poked(const void *addr, const void *old, const void *new,
			   size_t len)
{
	perf_event_text_poke(addr, old, len, new, len);
}

#ifdef CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE
/* Every path through it serializes: lint checks it (scripts/serialize-check.py). */
static void text_poke_batch_do_sync_core(void *info)
{
	sync_core();
}

/**
 * text_poke_batch_round_mask - the CPU mask of a sync round, cleared
 *
 * One for all rounds, which text_mutex serialises.
 *
 * Context: text_mutex held.
 * Return: the mask.
 */
struct cpumask *text_poke_batch_round_mask(void)
{
	static struct cpumask mask;

	lockdep_assert_held(&text_mutex);
	cpumask_clear(&mask);
	return &mask;
}

/**
 * text_poke_batch_sync_round - sync_core() on every online CPU but those deferred to
 * @round: the round: the CPUs that took a work bit instead of the IPI
 *	   (idle CPUs and isolated CPUs in user space, text_poke_batch/defer.rs)
 *
 * Sends the IPIs to every other CPU, and syncs this one.
 */
void text_poke_batch_sync_round(struct text_poke_batch_round *round)
{
	text_poke_batch_note_sync();
	if (!round->asked.deferred && !round->asked.idle) {
		/* Nobody deferred: the round upstream's batch makes. */
		on_each_cpu(text_poke_batch_do_sync_core, NULL, 1);
	} else {
		/* Serialised by text_mutex, as the round's own mask. */
		static struct cpumask ipis;

		/*
		 * The CPUs to send to, as one mask: a test of each CPU
		 * through a callback would cost an indirect call per CPU.
		 */
		preempt_disable();
		cpumask_andnot(&ipis, cpu_online_mask, round->deferred_cpus);
		__cpumask_set_cpu(smp_processor_id(), &ipis);
		on_each_cpu_mask(&ipis, text_poke_batch_do_sync_core, NULL, true);
		preempt_enable();
	}
	text_poke_batch_note_deferral(&round->asked);
}
#endif /* CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE */

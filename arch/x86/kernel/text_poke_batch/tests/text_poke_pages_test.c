// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit suite text_poke_batch_pages: flips of a key whose sites lie at chosen
 * places in 72 pages of text (text_poke_pages.S): two in one page, one
 * across a page boundary, pages without sites between pages with sites,
 * and more pages than one temporary mapping of a run holds. After every
 * flip each site holds the bytes its key's state asks for, whichever
 * text_poke_batch= mode the kernel booted with; the Rust batch writes each phase
 * of a flip through one mapping per run of pages.
 */

#include <kunit/test.h>
#include <linux/fault-inject.h>
#include <linux/irqflags.h>
#include <linux/jump_label.h>
#include <linux/log2.h>
#include <linux/memory.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/pgtable.h>
#include <linux/preempt.h>
#include <linux/sched.h>
#include <linux/string.h>
#include <linux/text-patching.h>
#include <linux/vmalloc.h>

#include <asm/sections.h>
#include <asm/text_poke_batch.h>

#include "text_poke_stress.h"

DEFINE_STATIC_KEY_FALSE(text_poke_pages_key);

#define TEXT_POKE_PAGES_SITES	72
#define TEXT_POKE_PAGES_PAGES	70

static const u8 text_poke_pages_nop5[] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };

static unsigned int text_poke_pages_nr(void)
{
	return text_poke_pages_sites_end - text_poke_pages_sites;
}

/* The sites are where text_poke_pages.S puts them. */
static void text_poke_pages_layout(struct kunit *test)
{
	const struct text_poke_pages_site *s = text_poke_pages_sites;
	unsigned long first = s[0].code & PAGE_MASK;
	unsigned int i, pages = 0;
	unsigned long last = 0;

	KUNIT_ASSERT_EQ(test, text_poke_pages_nr(), TEXT_POKE_PAGES_SITES);
	KUNIT_EXPECT_EQ(test, offset_in_page(s[0].code), 0x100);
	KUNIT_EXPECT_EQ(test, offset_in_page(s[1].code), 0x800);
	KUNIT_EXPECT_EQ(test, s[2].code - first, PAGE_SIZE + 0x500);
	/* Across the boundary of pages 1 and 2. */
	KUNIT_EXPECT_EQ(test, s[3].code - first, 2 * PAGE_SIZE - 2);
	KUNIT_EXPECT_EQ(test, s[4].code - first, 2 * PAGE_SIZE + 0x40);
	/* Pages 3 and 4 hold no site. */
	KUNIT_EXPECT_EQ(test, s[5].code - first, 5 * PAGE_SIZE + 0x300);
	KUNIT_EXPECT_EQ(test, s[71].code - first, 71 * PAGE_SIZE + 0x300);
	for (i = 0; i < TEXT_POKE_PAGES_SITES; i++) {
		unsigned long p = s[i].code & PAGE_MASK;
		unsigned long q = (s[i].code + 4) & PAGE_MASK;

		pages += (p != last) + (q != p);
		last = q;
	}
	KUNIT_EXPECT_EQ(test, pages, TEXT_POKE_PAGES_PAGES);
}

/* Whether every site holds the NOP (@on false) or a JMP to its target. */
static void text_poke_pages_expect(struct kunit *test, bool on, int flip)
{
	const struct text_poke_pages_site *s = text_poke_pages_sites;
	unsigned int i, wrong = 0;

	for (i = 0; i < text_poke_pages_nr(); i++) {
		const u8 *p = (const u8 *)s[i].code;
		s32 rel;

		memcpy(&rel, p + 1, sizeof(rel));
		if (on ? p[0] != 0xe9 || s[i].code + 5 + rel != s[i].target :
			 memcmp(p, text_poke_pages_nop5, 5)) {
			if (!wrong)
				kunit_err(test, "flip %d: site %u (%pS) holds %5ph\n",
					  flip, i, p, p);
			wrong++;
		}
	}
	KUNIT_EXPECT_EQ_MSG(test, wrong, 0, "flip %d: sites wrong", flip);
}

static u64 text_poke_pages_mm_switches(void)
{
	struct text_poke_batch_stats stats;

	text_poke_batch_read_stats(&stats);
	return stats.mm_switches;
}

/*
 * Every site follows every flip. The temporary-mm switches of a flip:
 * one per write in upstream's batch (c: 3 per site) and one per site per
 * phase in serial (a batch per site); in rust one per chunk of at most
 * TEXT_POKE_BATCH_RUN_WRITES writes of a run per phase: the 70 pages take
 * two runs (TEXT_POKE_BATCH_RUN_PAGES pages at most), the first with the
 * sites of its pages (pages 0 to 2 hold 5, then one a page), the second
 * with the rest. Other text patching in the same moment would add to the
 * count: the exact figure is asked of one flip in three.
 */
static void text_poke_pages_flips(struct kunit *test)
{
	unsigned int first = 5 + TEXT_POKE_BATCH_RUN_PAGES - 3;
	unsigned int chunks = DIV_ROUND_UP(first, TEXT_POKE_BATCH_RUN_WRITES) +
			      DIV_ROUND_UP(TEXT_POKE_PAGES_SITES - first,
					   TEXT_POKE_BATCH_RUN_WRITES);
	u64 want, exact = 0;
	int flip;

	switch (text_poke_batch_cur_mode()) {
	case TEXT_POKE_BATCH_MODE_RUST:
		want = 3 * chunks;
		break;
	default:
		want = 3 * TEXT_POKE_PAGES_SITES;
		break;
	}
	text_poke_pages_expect(test, false, -1);
	for (flip = 0; flip < 6; flip++) {
		bool on = !(flip % 2);
		u64 before = text_poke_pages_mm_switches();
		u64 n;

		if (on)
			static_branch_enable(&text_poke_pages_key);
		else
			static_branch_disable(&text_poke_pages_key);
		n = text_poke_pages_mm_switches() - before;
		KUNIT_EXPECT_GE(test, n, want);
		exact += n == want;
		text_poke_pages_expect(test, on, flip);
	}
	KUNIT_EXPECT_GE_MSG(test, exact, 2, "temporary-mm switches per flip: %llu wanted",
			    want);
}

/*
 * A page of the module area with nothing mapped: its end, which module
 * loading fills last. Within reach of a batch's 32-bit offsets from _stext.
 */
static unsigned long text_poke_pages_unmapped(struct kunit *test)
{
	unsigned long bad = MODULES_END - PAGE_SIZE;

	KUNIT_ASSERT_LT(test, bad - (unsigned long)_stext, (unsigned long)S32_MAX);
	KUNIT_ASSERT_NULL_MSG(test, vmalloc_to_page((void *)bad),
			      "MODULES_END - PAGE_SIZE is mapped: pick another page");
	return bad;
}

/*
 * A batch with text that cannot be mapped is not applied at all: a
 * warning naming the page, nothing written, no sync round, the stats'
 * unmapped count up by one, and the error for a caller that can be told
 * (key flips and transactions, which end their batch with
 * text_poke_batch_finish_checked()). C callers of smp_text_poke_batch_finish()
 * cannot be told: the kernel stops there, as upstream's text_poke() BUG()s,
 * so only the Rust batch is asked. In serial mode too nothing is written:
 * every page is checked before the first site is.
 */
static void text_poke_pages_unmappable(struct kunit *test)
{
	const struct text_poke_pages_site *s = text_poke_pages_sites;
	int mode = text_poke_batch_cur_mode();
	struct text_poke_batch_stats before, after;
	unsigned long bad;
	u8 site[5];
	int ret;

	if (mode == TEXT_POKE_BATCH_MODE_C)
		kunit_skip(test, "upstream's batch BUG()s on text it cannot map");
	bad = text_poke_pages_unmapped(test);
	memcpy(site, (void *)s[0].code, sizeof(site));
	text_poke_batch_track(true);
	text_poke_batch_read_stats(&before);
	kunit_warning_suppress(test) {
		mutex_lock(&text_mutex);
		/* A site rewritten as it is, and text that is not there. */
		smp_text_poke_batch_add((void *)s[0].code, site, sizeof(site), NULL);
		smp_text_poke_batch_add((void *)bad, text_poke_pages_nop5,
					sizeof(text_poke_pages_nop5), NULL);
		ret = text_poke_batch_finish_checked();
		mutex_unlock(&text_mutex);
		KUNIT_EXPECT_SUPPRESSED_WARNING_COUNT(test, 1);
	}
	text_poke_batch_read_stats(&after);
	text_poke_batch_track(false);
	KUNIT_EXPECT_EQ(test, ret, -EFAULT);
	KUNIT_EXPECT_EQ(test, after.unmapped - before.unmapped, 1);
	KUNIT_EXPECT_EQ(test, after.own_syncs - before.own_syncs, 0);
	KUNIT_EXPECT_MEMEQ(test, (void *)s[0].code, site, sizeof(site));
	/* The batch is usable at once: the key still flips. */
	static_branch_enable(&text_poke_pages_key);
	text_poke_pages_expect(test, true, 0);
	static_branch_disable(&text_poke_pages_key);
	text_poke_pages_expect(test, false, 1);
}

/* The piece @from to @to, or @fill, of the sites @site through a run of @page alone. */
static unsigned int text_poke_pages_piece(struct kunit *test, unsigned long page,
					  const struct text_poke_batch_site *site,
					  unsigned int n, unsigned int from,
					  unsigned int to, int fill)
{
	struct text_poke_batch_run run;
	unsigned int wrong;
	int ret;

	mutex_lock(&text_mutex);
	ret = text_poke_batch_run_map(&run, &page, 1);
	wrong = ret ? 0 : text_poke_batch_run_sites(&run, site, n, from, to, fill);
	if (!ret)
		text_poke_batch_run_unmap(&run);
	mutex_unlock(&text_mutex);
	KUNIT_EXPECT_EQ(test, ret, 0);
	return wrong;
}

/*
 * The shim under the runs: a run is mappable only if every page is
 * (warning otherwise), and a site's write through a mapped run that does
 * not lie within it (here one crossing into the page after a one-page
 * run), or is of too many bytes, is refused and counted, a site with no
 * bytes skipped, the others made and read back. The page is unchanged:
 * the one write made puts back a site's own bytes.
 */
static void text_poke_pages_run_bounds(struct kunit *test)
{
	const struct text_poke_pages_site *s = text_poke_pages_sites;
	unsigned long page = s[1].code & PAGE_MASK;
	unsigned long pages[2] = { page, text_poke_pages_unmapped(test) };
	struct text_poke_batch_site site[4] = {};
	unsigned int wrong;
	u8 *copy;

	kunit_warning_suppress(test) {
		KUNIT_EXPECT_FALSE(test, text_poke_batch_run_mappable(pages, 2));
		KUNIT_EXPECT_SUPPRESSED_WARNING_COUNT(test, 1);
	}
	KUNIT_EXPECT_TRUE(test, text_poke_batch_run_mappable(pages, 1));

	copy = kunit_kmalloc(test, PAGE_SIZE, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, copy);
	memcpy(copy, (void *)page, PAGE_SIZE);
	site[0].w.at = offset_in_page(s[1].code);
	site[0].w.rel = s[1].code - (unsigned long)_stext;
	memcpy(site[0].w.bytes, (void *)s[1].code, 5);
	site[0].w.bytes[7] = 5;
	site[1].w.at = PAGE_SIZE - 2;
	site[1].w.rel = site[0].w.rel;
	memset(site[1].w.bytes, 0xcc, 5);
	site[1].w.bytes[7] = 5;
	site[2].w.at = 0x10;
	site[2].w.rel = site[0].w.rel;
	site[3].w.at = 0x10;
	site[3].w.rel = site[0].w.rel;
	site[3].w.bytes[7] = TEXT_POKE_BATCH_WRITE_MAX + 1;

	wrong = text_poke_pages_piece(test, page, site, ARRAY_SIZE(site), 0,
				      TEXT_POKE_BATCH_WRITE_MAX, -1);
	KUNIT_EXPECT_EQ(test, wrong, 2);
	KUNIT_EXPECT_MEMEQ(test, (void *)page, copy, PAGE_SIZE);
}

/*
 * The pieces of prepared sites, through a run: INT3 at a site's first
 * byte, then its tail, then its first byte, as the batch's three phases
 * write them, each read back, from the one write made of the site's whole
 * new instruction (here its own bytes, so that the page ends as it was;
 * its function is never called); any other piece too. A site with no byte
 * in the piece is skipped, even with an offset outside the run (a one-byte
 * instruction's tail); a write outside the run, or of an instruction of
 * too many bytes, is refused and counted; a piece that is empty, or filled
 * but not the first byte alone, is refused whole.
 */
static void text_poke_pages_run_sites(struct kunit *test)
{
	const struct text_poke_pages_site *s = text_poke_pages_sites;
	unsigned long page = s[1].code & PAGE_MASK;
	const u8 *code = (const u8 *)s[1].code;
	struct text_poke_batch_site site[4] = {};
	unsigned int wrong;
	u8 int3 = 0;
	u8 *copy;

	copy = kunit_kmalloc(test, PAGE_SIZE, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, copy);
	memcpy(copy, (void *)page, PAGE_SIZE);
	site[0].w.at = offset_in_page(s[1].code);
	site[0].w.rel = s[1].code - (unsigned long)_stext;
	memcpy(site[0].w.bytes, code, 5);
	site[0].w.bytes[7] = 5;
	/* One byte, outside the run: no tail. */
	site[1].w.at = 2 * PAGE_SIZE;
	site[1].w.rel = site[0].w.rel;
	site[1].w.bytes[0] = INT3_INSN_OPCODE;
	site[1].w.bytes[7] = 1;
	/* A tail across the end of the run. */
	site[2].w.at = PAGE_SIZE - 2;
	site[2].w.rel = site[0].w.rel;
	memcpy(site[2].w.bytes, code, 5);
	site[2].w.bytes[7] = 5;
	/* A tail of too many bytes. */
	site[3] = site[0];
	site[3].w.bytes[7] = TEXT_POKE_BATCH_WRITE_MAX + 1;

	wrong = text_poke_pages_piece(test, page, site, 1, 0, 1, INT3_INSN_OPCODE);
	KUNIT_EXPECT_EQ(test, wrong, 0);
	int3 = READ_ONCE(*code);
	wrong = text_poke_pages_piece(test, page, site, ARRAY_SIZE(site), 1,
				      TEXT_POKE_BATCH_WRITE_MAX, -1);
	KUNIT_EXPECT_EQ(test, wrong, 2);
	wrong = text_poke_pages_piece(test, page, site, 1, 0, 1, -1);
	KUNIT_EXPECT_EQ(test, wrong, 0);
	KUNIT_EXPECT_EQ(test, int3, INT3_INSN_OPCODE);
	KUNIT_EXPECT_MEMEQ(test, (void *)page, copy, PAGE_SIZE);

	/* Two bytes from the middle, and INT3 over the first byte again. */
	wrong = text_poke_pages_piece(test, page, site, 1, 2, 4, -1);
	KUNIT_EXPECT_EQ(test, wrong, 0);
	wrong = text_poke_pages_piece(test, page, site, 1, 0, 1, INT3_INSN_OPCODE);
	KUNIT_EXPECT_EQ(test, wrong, 0);
	KUNIT_EXPECT_EQ(test, READ_ONCE(*code), INT3_INSN_OPCODE);
	wrong = text_poke_pages_piece(test, page, site, 1, 0, 1, -1);
	KUNIT_EXPECT_EQ(test, wrong, 0);
	KUNIT_EXPECT_MEMEQ(test, (void *)page, copy, PAGE_SIZE);

	/* Outside the run: refused, nothing written. */
	wrong = text_poke_pages_piece(test, page, &site[1], 1, 0, 1, INT3_INSN_OPCODE);
	KUNIT_EXPECT_EQ(test, wrong, 1);
	kunit_warning_suppress(test) {
		wrong = text_poke_pages_piece(test, page, site, 1, 1, 1, -1);
		KUNIT_EXPECT_SUPPRESSED_WARNING_COUNT(test, 1);
	}
	kunit_warning_suppress(test) {
		wrong += text_poke_pages_piece(test, page, site, 1, 1, 2, INT3_INSN_OPCODE);
		KUNIT_EXPECT_SUPPRESSED_WARNING_COUNT(test, 1);
	}
	KUNIT_EXPECT_EQ(test, wrong, 2);
	KUNIT_EXPECT_MEMEQ(test, (void *)page, copy, PAGE_SIZE);
}

/*
 * A run keeps interrupts and preemption off only while a chunk of writes
 * is made: they are on once the run is mapped and between chunks, so that
 * a run of many sites is no longer an interrupts-off or preemption-off
 * section of its own. The task stays on its CPU until the run is
 * unmapped. The write puts back the bytes a site holds.
 */
static void text_poke_pages_run_lets_interrupts_in(struct kunit *test)
{
	const struct text_poke_pages_site *s = text_poke_pages_sites;
	unsigned long page = s[1].code & PAGE_MASK;
	struct text_poke_batch_site w = {};
	bool mapped_irqs_off = true, written_irqs_off = true;
	bool preemptible_mapped = false, preemptible_written = false;
	bool pinned_mapped = false, pinned_written = false;
	int cpu_mapped = -1, cpu_written = -2;
	struct text_poke_batch_run run;
	unsigned int wrong = 0;
	int ret;

	w.w.at = offset_in_page(s[1].code);
	w.w.rel = s[1].code - (unsigned long)_stext;
	memcpy(w.w.bytes, (void *)s[1].code, 5);
	w.w.bytes[7] = 5;

	mutex_lock(&text_mutex);
	ret = text_poke_batch_run_map(&run, &page, 1);
	if (!ret) {
		mapped_irqs_off = irqs_disabled();
		preemptible_mapped = preemptible();
		pinned_mapped = current->migration_disabled;
		cpu_mapped = raw_smp_processor_id();
		wrong = text_poke_batch_run_sites(&run, &w, 1, 0, TEXT_POKE_BATCH_WRITE_MAX, -1);
		written_irqs_off = irqs_disabled();
		preemptible_written = preemptible();
		/* A chance to be preempted between chunks: it must not move. */
		cond_resched();
		pinned_written = current->migration_disabled;
		cpu_written = raw_smp_processor_id();
		wrong += text_poke_batch_run_sites(&run, &w, 1, 0, TEXT_POKE_BATCH_WRITE_MAX, -1);
		text_poke_batch_run_unmap(&run);
	}
	mutex_unlock(&text_mutex);
	KUNIT_ASSERT_EQ(test, ret, 0);
	KUNIT_EXPECT_EQ(test, wrong, 0);
	KUNIT_EXPECT_FALSE_MSG(test, mapped_irqs_off, "interrupts off once the run is mapped");
	KUNIT_EXPECT_FALSE_MSG(test, written_irqs_off, "interrupts off between chunks");
	KUNIT_EXPECT_TRUE_MSG(test, preemptible_mapped, "preemption off once the run is mapped");
	KUNIT_EXPECT_TRUE_MSG(test, preemptible_written, "preemption off between chunks");
	KUNIT_EXPECT_TRUE(test, pinned_mapped);
	KUNIT_EXPECT_TRUE(test, pinned_written);
	KUNIT_EXPECT_EQ(test, cpu_mapped, cpu_written);
	KUNIT_EXPECT_FALSE(test, irqs_disabled());
	KUNIT_EXPECT_FALSE(test, current->migration_disabled);
}

/*
 * Runs are mapped at a random place of their own, as random as
 * text_poke_mm_addr: every page between TASK_UNMAPPED_BASE and TASK_SIZE
 * that starts TEXT_POKE_BATCH_RUN_PAGES pages within one PTE table is a place
 * some random value picks, and there are no fewer than half as many as
 * text_poke_mm_addr has (a bit of entropy lost at most). This boot's place
 * is one of them, and its PTE table was made at boot, before any run.
 */
static void text_poke_pages_run_place(struct kunit *test)
{
	unsigned long first = ALIGN(TASK_UNMAPPED_BASE, PMD_SIZE);
	unsigned long span = TEXT_POKE_BATCH_RUN_PAGES * PAGE_SIZE;
	unsigned long pmds = (TASK_SIZE - first) / PMD_SIZE;
	unsigned long slots = PTRS_PER_PTE - TEXT_POKE_BATCH_RUN_PAGES + 1;
	unsigned long places = (TASK_SIZE - TASK_UNMAPPED_BASE - 3 * PAGE_SIZE) / PAGE_SIZE;
	const unsigned long k[] = { 0, 1, slots - 1, slots };
	const unsigned long j[] = { 0, 1, pmds - 1 };
	unsigned long addr = text_poke_batch_run_area();
	unsigned int a, b;
	pmd_t *pmd;

	KUNIT_EXPECT_GE(test, ilog2(pmds * slots) + 1, ilog2(places));
	for (a = 0; a < ARRAY_SIZE(k); a++) {
		for (b = 0; b < ARRAY_SIZE(j); b++) {
			unsigned long at = text_poke_batch_run_place(k[a] * pmds + j[b]);

			KUNIT_EXPECT_EQ(test, at, first + j[b] * PMD_SIZE +
					(k[a] % slots) * PAGE_SIZE);
			KUNIT_EXPECT_LE(test, at + span, TASK_SIZE);
			KUNIT_EXPECT_EQ(test, at & PMD_MASK, (at + span - 1) & PMD_MASK);
		}
	}

	KUNIT_ASSERT_NE_MSG(test, addr, 0, "no place for runs made at boot");
	KUNIT_EXPECT_TRUE(test, PAGE_ALIGNED(addr));
	KUNIT_EXPECT_GE(test, addr, first);
	KUNIT_EXPECT_LE(test, addr + span, TASK_SIZE);
	KUNIT_EXPECT_EQ(test, addr & PMD_MASK, (addr + span - 1) & PMD_MASK);
	pmd = pmd_offset(pud_offset(p4d_offset(pgd_offset(text_poke_mm, addr), addr),
				    addr), addr);
	KUNIT_EXPECT_TRUE(test, pmd_present(*pmd) && !pmd_leaf(*pmd));
}

#ifdef CONFIG_FAIL_TEXT_POKE_BATCH
/*
 * A write of a flip that does not land (fail_text_poke_batch), in each phase:
 * the batch reads it back through the text's address, goes no further and
 * puts every site back. The flip is refused with -EIO and one warning, the
 * key unchanged, every site holds its NOP (no INT3, no new tail left), and
 * the next flip goes through. In rust mode the writes are checked a run of
 * pages at a time, two runs a phase: every one of the six fails in turn.
 * In serial mode each site is its own batch of three text_poke() writes,
 * and the sites applied before the one that fails are put back too: the
 * three writes of the first, a middle and the last site fail in turn; then
 * a first reference (static_key_slow_inc()) meets the same failure.
 * Upstream's text_poke() BUG()s on a write that does not read back.
 */
static void text_poke_pages_write_fails(struct kunit *test)
{
	unsigned int runs = DIV_ROUND_UP(TEXT_POKE_PAGES_PAGES, TEXT_POKE_BATCH_RUN_PAGES);
	static const unsigned int serial[] = { 0, TEXT_POKE_PAGES_SITES / 2,
					       TEXT_POKE_PAGES_SITES - 1 };
	unsigned int nth[3 * ARRAY_SIZE(serial)], n = 0, i;
	int mode = text_poke_batch_cur_mode();
	int ret;

	switch (mode) {
	case TEXT_POKE_BATCH_MODE_RUST:
		for (i = 1; i <= 3 * runs; i++)
			nth[n++] = i;
		break;
	case TEXT_POKE_BATCH_MODE_SERIAL:
		for (i = 0; i < 3 * ARRAY_SIZE(serial); i++)
			nth[n++] = 3 * serial[i / 3] + i % 3 + 1;
		break;
	default:
		kunit_skip(test, "upstream's text_poke() BUG()s on a write that does not land");
	}
	text_poke_pages_expect(test, false, -1);
	for (i = 0; i < n; i++) {
		kunit_warning_suppress(test) {
			text_poke_write_fail(nth[i], 1);
			ret = static_key_set_checked(&text_poke_pages_key.key, true, false);
			text_poke_write_fail(0, 0);
			KUNIT_EXPECT_SUPPRESSED_WARNING_COUNT(test, 1);
		}
		KUNIT_EXPECT_EQ_MSG(test, ret, -EIO, "write check %u", nth[i]);
		KUNIT_EXPECT_FALSE_MSG(test, static_key_enabled(&text_poke_pages_key),
				       "write check %u", nth[i]);
		text_poke_pages_expect(test, false, nth[i]);
	}
	/*
	 * A first reference refused the same way says why, as StaticKey::inc()
	 * returns it: -EIO, no reference taken.
	 */
	kunit_warning_suppress(test) {
		text_poke_write_fail(1, 1);
		ret = static_key_slow_inc_checked(&text_poke_pages_key.key, false);
		text_poke_write_fail(0, 0);
		KUNIT_EXPECT_SUPPRESSED_WARNING_COUNT(test, 1);
	}
	KUNIT_EXPECT_EQ(test, ret, -EIO);
	KUNIT_EXPECT_EQ(test, static_key_count(&text_poke_pages_key.key), 0);
	text_poke_pages_expect(test, false, 1);
	static_branch_enable(&text_poke_pages_key);
	text_poke_pages_expect(test, true, 0);
	static_branch_disable(&text_poke_pages_key);
	text_poke_pages_expect(test, false, 1);
}

/*
 * Fault injection told to fail three write checks in a row (times=3) fails
 * the batch's writes from the first of a phase on, in each phase in turn,
 * and none of the way back: the undo asks it nothing, so the flip is
 * refused with -EIO, every site put back, and the failures the phase did
 * not ask for are left (the phase's other runs ask too). Were the undo's
 * writes checked, they would fail as well: a write of the way back that
 * does not land leaves a batch that can neither be applied nor put back,
 * which stops the kernel.
 */
static void text_poke_pages_undo_not_injected(struct kunit *test)
{
	unsigned int runs = DIV_ROUND_UP(TEXT_POKE_PAGES_PAGES, TEXT_POKE_BATCH_RUN_PAGES);
	int mode = text_poke_batch_cur_mode();
	/* A phase's write checks: one a run, or one a text_poke() in serial mode. */
	unsigned int per_phase = mode == TEXT_POKE_BATCH_MODE_RUST ? runs : 1;
	unsigned int phase, nth;
	int ret;

	if (mode == TEXT_POKE_BATCH_MODE_C)
		kunit_skip(test, "upstream's text_poke() BUG()s on a write that does not land");
	/* Some failures must be left for the undo to ask for. */
	KUNIT_ASSERT_LT(test, per_phase, 3);
	text_poke_pages_expect(test, false, -1);
	for (phase = 0; phase < 3; phase++) {
		nth = phase * per_phase + 1;
		kunit_warning_suppress(test) {
			text_poke_write_fail(nth, 3);
			ret = static_key_set_checked(&text_poke_pages_key.key, true, false);
			KUNIT_EXPECT_EQ_MSG(test, atomic_read(&fail_text_poke_batch.times),
					    3 - per_phase, "write check %u", nth);
			text_poke_write_fail(0, 0);
			KUNIT_EXPECT_SUPPRESSED_WARNING_COUNT(test, 1);
		}
		KUNIT_EXPECT_EQ_MSG(test, ret, -EIO, "write check %u", nth);
		KUNIT_EXPECT_FALSE_MSG(test, static_key_enabled(&text_poke_pages_key),
				       "write check %u", nth);
		text_poke_pages_expect(test, false, nth);
	}
	static_branch_enable(&text_poke_pages_key);
	text_poke_pages_expect(test, true, 0);
	static_branch_disable(&text_poke_pages_key);
	text_poke_pages_expect(test, false, 1);
}
#endif

static struct kunit_case text_poke_pages_cases[] = {
	KUNIT_CASE(text_poke_pages_layout),
	KUNIT_CASE(text_poke_pages_flips),
	KUNIT_CASE(text_poke_pages_unmappable),
	KUNIT_CASE(text_poke_pages_run_bounds),
	KUNIT_CASE(text_poke_pages_run_sites),
	KUNIT_CASE(text_poke_pages_run_lets_interrupts_in),
	KUNIT_CASE(text_poke_pages_run_place),
#ifdef CONFIG_FAIL_TEXT_POKE_BATCH
	KUNIT_CASE(text_poke_pages_write_fails),
	KUNIT_CASE(text_poke_pages_undo_not_injected),
#endif
	{}
};

static struct kunit_suite text_poke_pages_suite = {
	.name = "text_poke_batch_pages",
	.test_cases = text_poke_pages_cases,
};

kunit_test_suite(text_poke_pages_suite);

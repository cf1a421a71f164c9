/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Sites of text_poke_pages_key at chosen places in 72 pages of text, for
 * the text_poke_rs_pages KUnit suite: two sites in page 0, one in page 1,
 * one across the boundary of pages 1 and 2, one in page 2, none in pages 3
 * and 4, then one in each of pages 5 to 71: 72 sites on 70 pages, more
 * than one mapping of a run holds (TEXT_POKE_RS_RUN_PAGES).
 *
 * Each site is the 5-byte NOP of static_branch_unlikely() on a false key,
 * one byte into a function of its own that is never called; the gaps are
 * INT3s. text_poke_pages_sites[] lists each site and its jump target.
 */
#include <linux/annotate.h>
#include <linux/linkage.h>

	.section .text.text_poke_pages, "ax"
	.balign 4096

	.pushsection .rodata.text_poke_pages, "a"
	.balign 8
SYM_DATA_START(text_poke_pages_sites)
	.popsection

.macro TP_SITE page:req, off:req
	.org \page * 4096 + \off - 1, 0xcc
SYM_FUNC_START_LOCAL_NOALIGN(text_poke_pages_\page\()_\off)
	nop
	/* Listed below, never called indirectly. */
	ANNOTATE_NOENDBR
1:	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00
	xor %eax, %eax
	RET
	ANNOTATE_NOENDBR
2:	mov $1, %eax
	RET
SYM_FUNC_END(text_poke_pages_\page\()_\off)
	.pushsection __jump_table, "aw"
	.balign 8
	.long 1b - .
	.long 2b - .
	.quad text_poke_pages_key - .
	.popsection
	.pushsection .rodata.text_poke_pages, "a"
	.quad 1b, 2b
	.popsection
.endm

	TP_SITE 0, 0x100
	TP_SITE 0, 0x800
	TP_SITE 1, 0x500
	TP_SITE 1, 0xffe
	TP_SITE 2, 0x040
	.irp page, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, \
		21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, \
		37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, \
		53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, \
		69, 70, 71
	TP_SITE \page, 0x300
	.endr

	.pushsection .rodata.text_poke_pages, "a"
SYM_DATA_END_LABEL(text_poke_pages_sites, SYM_L_GLOBAL, text_poke_pages_sites_end)
	.popsection

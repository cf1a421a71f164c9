/* SPDX-License-Identifier: GPL-2.0 */
/*
 * TP_SITE, included by the .S files that place static-key sites at chosen places in
 * pages of text (text_poke_pages.S in the kernel image, and
 * text_poke_mod_pages.S in the test module): a site of @key at offset @off
 * of page @page of the current section, which starts page-aligned.
 *
 * Each site is the 5-byte NOP of static_branch_unlikely() on a false key,
 * one byte into a function of its own that is never called; the gaps are
 * INT3s. Each site and its jump target are listed, as a struct
 * text_poke_pages_site, in the section .rodata.@list.
 */
#ifndef TEXT_POKE_PAGES_SITE_S
#define TEXT_POKE_PAGES_SITE_S

#include <linux/annotate.h>
#include <linux/linkage.h>

/*
 * TP_SITES_START and TP_SITES_END bracket the sites of @list: its section
 * of text, page-aligned, and @list_sites[] to @list_sites_end[].
 */
.macro TP_SITES_START list:req
	.section .text.\list, "ax"
	.balign 4096

	.pushsection .rodata.\list, "a"
	.balign 8
SYM_DATA_START(\list\()_sites)
	.popsection
.endm

.macro TP_SITES_END list:req
	.pushsection .rodata.\list, "a"
SYM_DATA_END_LABEL(\list\()_sites, SYM_L_GLOBAL, \list\()_sites_end)
	.popsection
.endm

.macro TP_SITE key:req, list:req, page:req, off:req
	.org \page * 4096 + \off - 1, 0xcc
SYM_FUNC_START_LOCAL_NOALIGN(\list\()_\page\()_\off)
	nop
	/* Listed below, never called indirectly. */
	ANNOTATE_NOENDBR
1:	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00
	xor %eax, %eax
	RET
	ANNOTATE_NOENDBR
2:	mov $1, %eax
	RET
SYM_FUNC_END(\list\()_\page\()_\off)
	.pushsection __jump_table, "aw"
	.balign 8
	.long 1b - .
	.long 2b - .
	.quad \key - .
	.popsection
	.pushsection .rodata.\list, "a"
	.quad 1b, 2b
	.popsection
.endm

#endif /* TEXT_POKE_PAGES_SITE_S */

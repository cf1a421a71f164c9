/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Sites of text_poke_pages_key at chosen places in 72 pages of text, for
 * the text_poke_batch_pages KUnit suite: two sites in page 0, one in page 1,
 * one across the boundary of pages 1 and 2, one in page 2, none in pages 3
 * and 4, then one in each of pages 5 to 71: 72 sites on 70 pages, more
 * than one mapping of a run holds (TEXT_POKE_BATCH_RUN_PAGES).
 *
 * The sites are TP_SITE's (text_poke_pages_site.S). text_poke_pages_sites[]
 * lists each site and its jump target.
 */
#include "text_poke_pages_site.S"

	TP_SITES_START text_poke_pages

.macro TP_PAGE_SITE page:req, off:req
	TP_SITE text_poke_pages_key, text_poke_pages, \page, \off
.endm

	TP_PAGE_SITE 0, 0x100
	TP_PAGE_SITE 0, 0x800
	TP_PAGE_SITE 1, 0x500
	TP_PAGE_SITE 1, 0xffe
	TP_PAGE_SITE 2, 0x040
	.irp page, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, \
		21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, \
		37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, \
		53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, \
		69, 70, 71
	TP_PAGE_SITE \page, 0x300
	.endr

	TP_SITES_END text_poke_pages

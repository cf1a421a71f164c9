/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Sites of text_poke_batch_mod_key, a key of the kernel image, over pages of
 * the test module's text: two in page 0, one across the boundary of pages
 * 0 and 1, none in page 2, one in page 3 and one in page 4. The module's
 * text is vmalloc'd: the Rust batch maps its pages as module text.
 *
 * The sites are TP_SITE's (text_poke_pages_site.S); text_poke_mod_pages_sites[]
 * lists each site and its jump target.
 */
#include "text_poke_pages_site.S"

	TP_SITES_START text_poke_mod_pages

.macro TP_MOD_SITE page:req, off:req
	TP_SITE text_poke_batch_mod_key, text_poke_mod_pages, \page, \off
.endm

	TP_MOD_SITE 0, 0x100
	TP_MOD_SITE 0, 0x900
	TP_MOD_SITE 0, 0xffd
	TP_MOD_SITE 3, 0x200
	TP_MOD_SITE 4, 0x7f0

	TP_SITES_END text_poke_mod_pages

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A site of text_poke_batch_span_key, a key of the kernel image, that holds
 * five one-byte NOPs instead of the 5-byte NOP static_branch_unlikely() puts
 * there. Shaped as TP_SITE's (text_poke_pages_site.S): one byte into a
 * function of its own that is never called.
 */
#include <linux/annotate.h>
#include <linux/linkage.h>

	.text
SYM_FUNC_START_LOCAL(text_poke_mod_bad_site)
	nop
	ANNOTATE_NOENDBR
1:	.byte 0x90, 0x90, 0x90, 0x90, 0x90
	xor %eax, %eax
	RET
	ANNOTATE_NOENDBR
2:	mov $1, %eax
	RET
SYM_FUNC_END(text_poke_mod_bad_site)
	.pushsection __jump_table, "aw"
	.balign 8
	.long 1b - .
	.long 2b - .
	.quad text_poke_batch_span_key - .
	.popsection

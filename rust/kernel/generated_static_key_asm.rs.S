/* SPDX-License-Identifier: GPL-2.0 */

#include <linux/jump_label.h>

// Cut here.

#ifdef CONFIG_HAVE_JUMP_LABEL_HACK
::kernel::concat_literals!("1: jmp {l_yes} # objtool NOPs this if {flags} has bit 1\n\t"
			   JUMP_TABLE_ENTRY("{symb} + {flags}", "{l_yes}"))
#else
::kernel::concat_literals!(".if ({flags} & 2)\n\t1: .byte " __stringify(BYTES_NOP5) "\n\t"
			   ".else\n\t1: jmp {l_yes}\n\t.endif\n\t"
			   JUMP_TABLE_ENTRY("{symb} + ({flags} & 1)", "{l_yes}"))
#endif

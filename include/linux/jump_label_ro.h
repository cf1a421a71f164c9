/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Changes of a static key that is read-only after init, decided and made
 * under jump_label_mutex (kernel/jump_label.c): for Rust's StaticKeyRo
 * (rust/kernel/jump_label/key/ro.rs).
 */
#ifndef _LINUX_JUMP_LABEL_RO_H
#define _LINUX_JUMP_LABEL_RO_H

struct static_key;

enum static_key_ro_op {
	STATIC_KEY_RO_ENABLE,
	STATIC_KEY_RO_DISABLE,
	STATIC_KEY_RO_INC,
	STATIC_KEY_RO_DEC,
};

int static_key_ro_change(struct static_key *key, enum static_key_ro_op op);

#endif /* _LINUX_JUMP_LABEL_RO_H */

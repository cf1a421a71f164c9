/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Static keys defined in C for the Rust static key KUnit suite
 * (rust/kernel/jump_label/key.rs): the Rust API must drive keys that C
 * defines, and C sites must follow what Rust does to them.
 */
#ifndef _RUST_KERNEL_JUMP_LABEL_STATIC_KEY_TEST_H
#define _RUST_KERNEL_JUMP_LABEL_STATIC_KEY_TEST_H

#include <linux/jump_label.h>
#include <linux/types.h>

DECLARE_STATIC_KEY_FALSE(rust_static_key_test_false);
DECLARE_STATIC_KEY_TRUE(rust_static_key_test_true);

bool rust_static_key_test_false_likely(void);
bool rust_static_key_test_false_unlikely(void);
bool rust_static_key_test_true_likely(void);
bool rust_static_key_test_true_unlikely(void);

#endif /* _RUST_KERNEL_JUMP_LABEL_STATIC_KEY_TEST_H */

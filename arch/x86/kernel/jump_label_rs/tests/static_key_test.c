// SPDX-License-Identifier: GPL-2.0
/*
 * C keys and C sites for the Rust static key KUnit suite.
 *
 * Each function is one site of one kind on one key, kept out of line so
 * that it stays a single site.
 */

#include "static_key_test.h"

DEFINE_STATIC_KEY_FALSE(rust_static_key_test_false);
DEFINE_STATIC_KEY_TRUE(rust_static_key_test_true);

noinline bool rust_static_key_test_false_likely(void)
{
	return static_branch_likely(&rust_static_key_test_false);
}

noinline bool rust_static_key_test_false_unlikely(void)
{
	return static_branch_unlikely(&rust_static_key_test_false);
}

noinline bool rust_static_key_test_true_likely(void)
{
	return static_branch_likely(&rust_static_key_test_true);
}

noinline bool rust_static_key_test_true_unlikely(void)
{
	return static_branch_unlikely(&rust_static_key_test_true);
}

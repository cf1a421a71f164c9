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

/**
 * rust_static_key_test_false_likely() - one static_branch_likely() site
 *
 * Its key is rust_static_key_test_false.
 *
 * Return: whether the branch is taken: whether the key, false by default,
 * is enabled.
 */
noinline bool rust_static_key_test_false_likely(void)
{
	return static_branch_likely(&rust_static_key_test_false);
}

/**
 * rust_static_key_test_false_unlikely() - one static_branch_unlikely() site
 *
 * Its key is rust_static_key_test_false.
 *
 * Return: whether the branch is taken: whether the key, false by default,
 * is enabled.
 */
noinline bool rust_static_key_test_false_unlikely(void)
{
	return static_branch_unlikely(&rust_static_key_test_false);
}

/**
 * rust_static_key_test_true_likely() - one static_branch_likely() site
 *
 * Its key is rust_static_key_test_true.
 *
 * Return: whether the branch is taken: whether the key, true by default,
 * is enabled.
 */
noinline bool rust_static_key_test_true_likely(void)
{
	return static_branch_likely(&rust_static_key_test_true);
}

/**
 * rust_static_key_test_true_unlikely() - one static_branch_unlikely() site
 *
 * Its key is rust_static_key_test_true.
 *
 * Return: whether the branch is taken: whether the key, true by default,
 * is enabled.
 */
noinline bool rust_static_key_test_true_unlikely(void)
{
	return static_branch_unlikely(&rust_static_key_test_true);
}

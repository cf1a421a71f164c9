/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The 4,096 sites of text_poke_bench_large_key (CONFIG_TEXT_POKE_BATCH_BENCH_LARGE),
 * the benchmark's largest key: 64 in each of 64 pages, one every 64 bytes,
 * so that a flip writes as many pages as one mapping of the Rust batch
 * holds (TEXT_POKE_BATCH_RUN_PAGES). The key is the benchmark's own
 * (text_poke_bench.rs), which reads the sites' bytes after each flip.
 *
 * The sites are TP_SITE's (text_poke_pages_site.S).
 */
#include "text_poke_pages_site.S"

	TP_SITES_START text_poke_bench_large

	.irp page, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, \
		17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, \
		32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, \
		47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, \
		62, 63
	.irp off, 0x008, 0x048, 0x088, 0x0c8, 0x108, 0x148, 0x188, 0x1c8, \
		0x208, 0x248, 0x288, 0x2c8, 0x308, 0x348, 0x388, 0x3c8, \
		0x408, 0x448, 0x488, 0x4c8, 0x508, 0x548, 0x588, 0x5c8, \
		0x608, 0x648, 0x688, 0x6c8, 0x708, 0x748, 0x788, 0x7c8, \
		0x808, 0x848, 0x888, 0x8c8, 0x908, 0x948, 0x988, 0x9c8, \
		0xa08, 0xa48, 0xa88, 0xac8, 0xb08, 0xb48, 0xb88, 0xbc8, \
		0xc08, 0xc48, 0xc88, 0xcc8, 0xd08, 0xd48, 0xd88, 0xdc8, \
		0xe08, 0xe48, 0xe88, 0xec8, 0xf08, 0xf48, 0xf88, 0xfc8
	TP_SITE text_poke_bench_large_key, text_poke_bench_large, \page, \off
	.endr
	.endr

	TP_SITES_END text_poke_bench_large

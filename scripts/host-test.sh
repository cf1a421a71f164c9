#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Run the host tests (tests/host) with cargo; the target directory lives in
# the cache, outside the checkout, one per checkout: the crate includes the
# kernel sources by path, and cargo would take another checkout's build of
# them for fresh.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
step host-tests
command -v cargo >/dev/null || die "cargo not found"
# The crates' versions are those of tests/host/Cargo.lock (--locked), each
# download with a time limit.
export CARGO_HTTP_TIMEOUT=30 CARGO_NET_RETRY=2
# The cache, for the tests of the tooling itself.
export JLRS_CACHE
export CARGO_TARGET_DIR=$JLRS_CACHE/host-target/$(printf %s "$JLRS_TOP" | md5sum | cut -c1-12)
cargo test --locked --manifest-path "$JLRS_TOP/tests/host/Cargo.toml" "$@"

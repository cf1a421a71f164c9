#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Run the host tests (tests/host) with cargo; the target directory lives in
# the cache, outside the checkout.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
step host-tests
command -v cargo >/dev/null || die "cargo not found"
export CARGO_TARGET_DIR=$JLRS_CACHE/host-target
cargo test --manifest-path "$JLRS_TOP/tests/host/Cargo.toml" "$@"

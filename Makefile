# SPDX-License-Identifier: GPL-2.0
#
# jump_label_rs: the two commands a user runs, and the developer checks.
# Everything downloaded or built goes to $(JLRS_CACHE) (default
# ~/.cache/jump_label_rs), outside the checkout.

SHELL := /bin/bash

.PHONY: all test test-matrix demo series setup base overlay host-test kunit check

all: test

test:
	@scripts/test.sh

test-matrix:
	@scripts/test.sh matrix

demo:
	@scripts/demo.sh

series: base
	@scripts/series.sh

setup:
	@scripts/setup-host.sh

base: setup
	@scripts/fetch-base.sh

overlay: base
	@scripts/apply-overlay.sh

host-test:
	@scripts/host-test.sh

kunit: overlay
	@scripts/kunit.sh

check: overlay
	@scripts/check.sh


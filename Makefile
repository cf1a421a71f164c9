# SPDX-License-Identifier: GPL-2.0
#
# jump_label_rs: the two commands a user runs, and the developer checks.
# Everything downloaded or built goes to $(JLRS_CACHE) (default
# ~/.cache/jump_label_rs), outside the checkout.

SHELL := /bin/bash

.PHONY: all test test-matrix demo series setup base rebase overlay host-test kunit check

all: test

test:
	@scripts/test.sh

test-matrix:
	@scripts/test.sh matrix

# make demo DEMO="sample flip": only those scenarios (scripts/demo.sh).
demo:
	@scripts/demo.sh $(DEMO)

series: base
	@scripts/series.sh check

setup:
	@scripts/setup-host.sh

base: setup
	@scripts/fetch-base.sh

# Move the overlay to the linux-source-7.2 Debian's sid carries today:
# every hook patch must apply to it with no fuzz; scripts/base.pin then
# names it.
rebase: setup
	@scripts/fetch-base.sh --rebase

overlay: base
	@scripts/apply-overlay.sh

host-test:
	@scripts/host-test.sh

kunit: overlay
	@scripts/kunit.sh

check: overlay
	@scripts/check.sh


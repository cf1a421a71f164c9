// SPDX-License-Identifier: GPL-2.0

//! Warnings a KUnit test triggers on purpose.
//!
//! C header: [`include/kunit/test.h`](srctree/include/kunit/test.h).

use crate::bindings;

/// Counts the warnings the current KUnit test triggers on purpose, and keeps them out of the
/// log, until it is dropped: `kunit_start_suppress_warning()` and its companions.
///
/// # Invariants
///
/// `handle` was returned by `kunit_start_suppress_warning(test)` and has not been ended.
pub struct ExpectedWarnings {
    test: *mut bindings::kunit,
    handle: *mut bindings::kunit_suppressed_warning,
}

impl ExpectedWarnings {
    /// Starts counting; `None` outside a KUnit test or if counting could not start (the test is
    /// then marked failed).
    pub fn new() -> Option<Self> {
        // SAFETY: Only reads the current task's test, if any.
        let test = unsafe { bindings::kunit_get_current_test() };
        if test.is_null() {
            return None;
        }
        // SAFETY: `test` is the running test of the current task.
        let handle = unsafe { bindings::kunit_start_suppress_warning(test) };
        if handle.is_null() {
            return None;
        }
        // INVARIANT: `handle` was just started for `test`.
        Some(Self { test, handle })
    }

    /// The warnings counted so far.
    pub fn count(&self) -> i32 {
        // SAFETY: By the type invariant, `handle` is live until `self` is dropped.
        unsafe { bindings::kunit_suppressed_warning_count(self.handle) }
    }
}

impl Drop for ExpectedWarnings {
    fn drop(&mut self) {
        // SAFETY: By the type invariant, `handle` was started for `test` and is ended only here.
        unsafe { bindings::kunit_end_suppress_warning(self.test, self.handle) };
    }
}

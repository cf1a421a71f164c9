// SPDX-License-Identifier: GPL-2.0

//! `scripts/summarize.py`, which turns make test's logs into its closing line and exit status:
//! a run whose logs are complete and clean passes, and each way a test, a boot or a build can
//! fail or vanish fails it.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One run's logs, in a directory of its own.
struct Run {
    dir: PathBuf,
}

/// A KUnit boot that ran `suite` with two passing cases.
fn kunit_json(suite: &str) -> String {
    format!(
        r#"{{"name": "main", "test_cases": [], "sub_groups": [{{"name": "{suite}",
            "test_cases": [{{"name": "a", "status": "PASS"}}, {{"name": "b", "status": "PASS"}}],
            "sub_groups": []}}]}}"#
    )
}

/// A user-space boot, 1 of 1, of a test that plans two cases and reports them: one KTAP
/// document, as scripts/guest-test/init.sh and cases.inc print it.
const GOOD_BOOT: &str = "@@ host boot 1/1 tests=one: qpw=1
TAP version 13
1..1
# boot 7.2.13 cpus=4
  # Subtest: one
  1..2
  ok 1 one_a
  # one_b c=1
  ok 2 one_b
# one took 1 s, exit 0
# kmsg text_poke_batch: one: nothing written
ok 1 one
# Totals: pass:1 fail:0 xfail:0 xpass:0 skip:0 error:0
";

/// The base kernel tree (scripts/fetch-base.sh's), whose KTAP parser summarize.py runs.
fn tree() -> String {
    let cache = std::env::var("JLRS_CACHE").expect("host-test.sh exports JLRS_CACHE");
    let env = fs::read_to_string(Path::new(&cache).join("base.env"))
        .expect("a base tree fetched (scripts/fetch-base.sh)");
    env.lines()
        .find_map(|l| l.strip_prefix("JLRS_PRISTINE="))
        .expect("base.env names the pristine tree")
        .to_owned()
}

impl Run {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("summarize-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let run = Self { dir };
        run.write(
            "host.log",
            "test result: ok. 3 passed; 0 failed; 0 ignored; 0 measured\n",
        );
        run.write("check.log", "check: rustfmt: ok\n");
        run.write("kunit.json", &kunit_json("suite_x"));
        run.write("guest.log", "[    1.0] Testing tracer nop: PASSED\n");
        run.write("cases.log", GOOD_BOOT);
        run
    }

    fn write(&self, name: &str, text: &str) {
        fs::write(self.dir.join(name), text).unwrap();
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).to_str().unwrap().to_owned()
    }

    /// Runs summarize.py on the logs, with `more` arguments; returns its exit status and its
    /// output.
    fn summarize_with(&self, more: &[&str]) -> (i32, String) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/summarize.py");
        let out = Command::new("python3")
            .arg(script)
            .args(["--cargo", &self.path("host.log")])
            .args(["--checks", &self.path("check.log")])
            .args(["--kunit", &self.path("kunit.json")])
            .args(["--guest", &self.path("guest.log")])
            .args(["--cases", &self.path("cases.log")])
            .args(["--tree", &tree()])
            .args(more)
            .output()
            .expect("python3 runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        (out.status.code().unwrap_or(-1), text)
    }

    /// Runs summarize.py on the logs, which must show suite_x.
    fn summarize(&self) -> (i32, String) {
        self.summarize_with(&["--suite", "suite_x"])
    }

    /// Runs summarize.py on the logs with the declarations `toml` of a run `main`.
    fn summarize_declared(&self, toml: &str) -> (i32, String) {
        self.write("expected.toml", toml);
        self.summarize_with(&["--expected", &self.path("expected.toml"), "--run", "main"])
    }

    /// Asserts that summarize.py fails the run with the declarations `toml`, naming `why`.
    fn fails_declared(&self, toml: &str, why: &str) {
        let (rc, out) = self.summarize_declared(toml);
        assert_eq!(rc, 1, "expected a failed run:\n{out}");
        assert!(out.contains(why), "expected '{why}' in:\n{out}");
    }

    /// Asserts that summarize.py fails the run, naming `why` in its output.
    fn fails_with(&self, why: &str) {
        let (rc, out) = self.summarize();
        assert_eq!(rc, 1, "expected a failed run:\n{out}");
        assert!(out.contains(why), "expected '{why}' in:\n{out}");
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn complete_clean_run_passes() {
    let (rc, out) = Run::new("clean").summarize();
    assert_eq!(rc, 0, "{out}");
    // 3 host, 1 lint, 2 KUnit, 1 self-test, 2 user-space.
    assert!(out.contains("9 passed, 0 failed, 0 skipped"), "{out}");
}

/// The guest's own count of the tests it passed and failed, its last line, must be the log's.
#[test]
fn boot_whose_totals_are_not_the_logs_fails() {
    let run = Run::new("totals");
    run.write(
        "cases.log",
        &GOOD_BOOT.replace("pass:1 fail:0", "pass:0 fail:1"),
    );
    run.fails_with("and the log holds 1 tests passed, 0 failed");
}

#[test]
fn boot_that_never_ends_fails() {
    let run = Run::new("noend");
    let cut = GOOD_BOOT.find("# Totals").unwrap();
    run.write("cases.log", &GOOD_BOOT[..cut]);
    run.fails_with("no '# Totals:' line: the guest crashed, hung or timed out after one");
    // Cut in the middle of a test: where, and the case it never reported counts as failed.
    let cut = GOOD_BOOT.find("  # one_b").unwrap();
    run.write("cases.log", &GOOD_BOOT[..cut]);
    run.fails_with("timed out in one, after 1 of its 2 planned cases");
    run.fails_with("user space: 1 passed, 1 failed");
}

#[test]
fn test_with_fewer_cases_than_planned_fails() {
    let run = Run::new("short");
    run.write("cases.log", &GOOD_BOOT.replace("  ok 2 one_b\n", ""));
    run.fails_with("one: reported 1 of its 2 planned cases");
}

#[test]
fn test_without_a_plan_fails() {
    let run = Run::new("noplan");
    run.write("cases.log", &GOOD_BOOT.replace("  1..2\n", ""));
    run.fails_with("one: no plan");
}

/// KTAP the kernel's parser refuses fails the run, in the parser's words.
#[test]
fn ktap_the_parser_refuses_fails() {
    let run = Run::new("numbers");
    run.write("cases.log", &GOOD_BOOT.replace("ok 2 one_b", "ok 3 one_b"));
    run.fails_with("KTAP: one_b: Expected test number 2 but found 3");
}

/// A test init.sh fails with its cases passed (it died early, or exited non-zero with no case
/// failed, or was killed) is a failed case, and says why.
#[test]
fn test_that_dies_early_fails() {
    let run = Run::new("died");
    run.write(
        "cases.log",
        &GOOD_BOOT
            .replace(
                "ok 1 one\n",
                "# one: exit 1 with no case failed\nnot ok 1 one\n",
            )
            .replace("pass:1 fail:0", "pass:0 fail:1"),
    );
    run.fails_with("one failed: exit 1 with no case failed");
    let (_, out) = run.summarize();
    assert!(out.contains("user space: 2 passed, 1 failed"), "{out}");
    // Short of its plan too: the parser gives init.sh's word to the case it found missing.
    run.write(
        "cases.log",
        &GOOD_BOOT
            .replace("  ok 2 one_b\n", "")
            .replace(
                "ok 1 one\n",
                "# one: reported 1 of its 2 planned cases; exit 1 with no case failed\nnot ok 1 one\n",
            )
            .replace("pass:1 fail:0", "pass:0 fail:1"),
    );
    run.fails_with("one failed: reported 1 of its 2 planned cases; exit 1 with no case failed");
}

#[test]
fn test_that_never_ran_fails() {
    let run = Run::new("neverran");
    run.write(
        "cases.log",
        &GOOD_BOOT.replace("tests=one:", "tests=one,two:"),
    );
    run.fails_with("two never ran");
}

#[test]
fn boot_that_never_ran_fails() {
    let run = Run::new("noboot");
    run.write("cases.log", &GOOD_BOOT.replace("boot 1/1", "boot 1/2"));
    run.fails_with("boot 2/2: did not run");
}

/// A boot's console may end mid-line, cut short by the guest's reset, with the next boot's
/// "@@ host boot" line written after it: that line still starts the next boot.
#[test]
fn boot_after_a_console_cut_mid_line_is_counted() {
    let run = Run::new("midline");
    let first = GOOD_BOOT.replace("boot 1/1", "boot 1/2");
    let second = GOOD_BOOT
        .replace("boot 1/1", "boot 2/2")
        .replace("one", "two");
    run.write("cases.log", &format!("{first}reboot: Restartin{second}"));
    let (rc, out) = run.summarize();
    assert_eq!(rc, 0, "{out}");
    // 3 host, 1 lint, 2 KUnit, 1 self-test, 2 user-space cases in each of two boots.
    assert!(out.contains("11 passed, 0 failed, 0 skipped"), "{out}");
}

#[test]
fn failed_case_fails() {
    let run = Run::new("failed");
    run.write(
        "cases.log",
        &GOOD_BOOT
            .replace("  ok 2 one_b", "  # one_b: wrong\n  not ok 2 one_b")
            .replace("ok 1 one\n", "not ok 1 one\n")
            .replace("pass:1 fail:0", "pass:0 fail:1"),
    );
    let (rc, out) = run.summarize();
    assert_eq!(rc, 1, "{out}");
    assert!(out.contains("one.one_b failed: wrong"), "{out}");
    assert!(out.contains("user space: 1 passed, 1 failed"), "{out}");
}

#[test]
fn kunit_suite_that_did_not_run_fails() {
    let run = Run::new("nosuite");
    run.write("kunit.json", &kunit_json("suite_y"));
    run.fails_with("KUnit suite suite_x did not run");
}

#[test]
fn every_suite_of_a_list_must_run() {
    // make test-matrix's production boot: --kunit-of JSON A,B names several suites.
    let run = Run::new("kunitof");
    run.write("of.json", &kunit_json("suite_a"));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/summarize.py");
    let of = |suites: &str| {
        let out = Command::new("python3")
            .arg(&script)
            .args(["--kunit-of", &run.path("of.json"), suites])
            .args(["--suite", "suite_x"])
            .output()
            .expect("python3 runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        (out.status.code().unwrap_or(-1), text)
    };
    let (rc, out) = of("suite_a");
    assert_eq!(rc, 0, "{out}");
    let (rc, out) = of("suite_a,suite_b");
    assert_eq!(rc, 1, "{out}");
    assert!(out.contains("KUnit suite suite_b did not run"), "{out}");
}

#[test]
fn missing_kunit_results_fail() {
    let run = Run::new("nokunit");
    fs::remove_file(run.dir.join("kunit.json")).unwrap();
    run.fails_with("KUnit: no results");
}

#[test]
fn kernel_warning_fails() {
    let run = Run::new("warning");
    run.write(
        "guest.log",
        "[    1.0] Testing tracer nop: PASSED\n[    2.0] WARNING: CPU: 1 at mm/swap.c:1\n",
    );
    let (rc, out) = run.summarize();
    assert_eq!(rc, 1, "{out}");
}

#[test]
fn missing_host_results_fail() {
    let run = Run::new("nohost");
    run.write("host.log", "error: could not compile\n");
    run.fails_with("host tests: no cargo test result found");
}

#[test]
fn sanitizer_reports_fail() {
    for report in [
        "BUG: KASAN: slab-use-after-free in text_poke_batch_run_sites+0x10/0x20",
        "BUG: KCSAN: data-race in ct_work_ask / ct_work_enter",
        "UBSAN: shift-out-of-bounds in kernel/jump_label.c:100:5",
    ] {
        let run = Run::new("sanitizer");
        run.write(
            "guest.log",
            &format!("[    1.0] Testing tracer nop: PASSED\n[    2.0] {report}\n"),
        );
        let (rc, out) = run.summarize();
        assert_eq!(rc, 1, "{report}:\n{out}");
    }
}

#[test]
fn upstream_data_race_is_noted() {
    // Two functions outside the project, with offsets or without: noted, not failed.
    for report in [
        "BUG: KCSAN: data-race in d_alloc_parallel / simple_lookup",
        "BUG: KCSAN: data-race in __module_address+0x10/0x20 / do_init_module+0x30/0x40",
        // KCSAN saw the value change only: one function.
        "BUG: KCSAN: data-race in irq_proc_emit_counts+0x92/0x170",
        // A reader of cpu_online_mask against its writer, even one the project changes: the
        // mask is read without the hotplug lock by design.
        "BUG: KCSAN: data-race in __lru_add_drain_all / set_cpu_online",
        "BUG: KCSAN: data-race in set_cpu_online+0x10/0x20 / ct_work_next_isolated+0x5/0x9",
    ] {
        let run = Run::new("upstream_race");
        run.write(
            "guest.log",
            &format!("[    1.0] Testing tracer nop: PASSED\n[    2.0] {report}\n"),
        );
        let (rc, out) = run.summarize();
        assert_eq!(rc, 0, "{report}:\n{out}");
        assert!(out.contains("upstream's data race"), "{out}");
    }
    // One of the project's functions on either side, C or Rust: a race of its own.
    for report in [
        "BUG: KCSAN: data-race in d_alloc_parallel / ct_work_enter",
        "BUG: KCSAN: data-race in __folio_batch_add_and_move / __lru_add_drain_all",
        "BUG: KCSAN: data-race in _RNvNtCs1_15text_poke_batch5batch3run / memcpy",
        "BUG: KCSAN: data-race in ct_work_enter+0x10/0x20",
        // Not the mask's writer: a name that only contains it.
        "BUG: KCSAN: data-race in __lru_add_drain_all / set_cpu_online_mask_foo",
    ] {
        let run = Run::new("project_race");
        run.write(
            "guest.log",
            &format!("[    1.0] Testing tracer nop: PASSED\n[    2.0] {report}\n"),
        );
        let (rc, out) = run.summarize();
        assert_eq!(rc, 1, "{report}:\n{out}");
    }
}

/// What the clean run shows, declared.
const DECLARED: &str = "[main]
suites = [\"suite_x\"]
selftests = 1
checks = 1
[main.cases]
suite_x = 2
";

#[test]
fn declared_run_passes() {
    let (rc, out) = Run::new("declared").summarize_declared(DECLARED);
    assert_eq!(rc, 0, "{out}");
}

#[test]
fn declared_suite_that_did_not_run_fails() {
    // A suite dropped from the kunitconfig: qpw_cache, say.
    let run = Run::new("declared_suite");
    run.fails_declared(
        &DECLARED.replace("[\"suite_x\"]", "[\"suite_x\", \"qpw_cache\"]"),
        "KUnit suite qpw_cache did not run",
    );
}

#[test]
fn declared_counts_must_match() {
    let run = Run::new("declared_counts");
    run.fails_declared(
        &DECLARED.replace("selftests = 1", "selftests = 36"),
        "1 ftrace startup self-tests ran",
    );
    run.fails_declared(&DECLARED.replace("checks = 1", "checks = 7"), "1 lint checks ran");
    run.fails_declared(
        &DECLARED.replace("suite_x = 2", "suite_x = 327"),
        "KUnit suite suite_x ran 2 cases",
    );
}

#[test]
fn undeclared_skip_fails() {
    let run = Run::new("skips");
    run.write(
        "kunit.json",
        r#"{"name": "main", "test_cases": [], "sub_groups": [{"name": "suite_x",
            "test_cases": [{"name": "a", "status": "PASS"}, {"name": "b", "status": "SKIP"}],
            "sub_groups": []}]}"#,
    );
    run.write(
        "cases.log",
        &GOOD_BOOT.replace("ok 2 one_b", "ok 2 one_b # SKIP not here"),
    );
    run.fails_declared(DECLARED, "suite_x.b skipped, and");
    run.fails_declared(DECLARED, "one_b skipped, and");
    // Declared for another boot: still undeclared here.
    let elsewhere = format!(
        "{DECLARED}[[skip]]\ncase = \"suite_x.b\"\nwhere = \"kunit-c\"\nreason = \"r\"\n"
    );
    run.fails_declared(&elsewhere, "suite_x.b skipped, and");
    // Declared where they happen, each with a reason.
    let both = format!(
        "{DECLARED}[[skip]]\ncase = \"suite_x.b\"\nwhere = \"kunit\\\\.json\"\nreason = \"r\"\n\
         [[skip]]\ncase = \"one_b\"\nwhere = \"qpw=1\"\nreason = \"r\"\n"
    );
    let (rc, out) = run.summarize_declared(&both);
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("2 skipped"), "{out}");
    // A declaration without a reason is refused.
    let bare = format!("{DECLARED}[[skip]]\ncase = \"one_b\"\nwhere = \"qpw=1\"\n");
    run.fails_declared(&bare, "a skip without case, where or reason");
}

/// Two user-space boots, as guest-test.sh logs them, the kernel log printed again by the guest.
fn two_boots(first: &str, second: &str) -> String {
    format!(
        "@@ host boot 1/2 tests=rokey: qpw=1\nTAP version 13\n{first}\n\
         @@ host boot 2/2 tests=qpw: qpw=0\nTAP version 13\n{second}\n"
    )
}

#[test]
fn warning_in_the_guests_kernel_log_fails() {
    // A planted WARN_ON(1): its line reaches the host only in the log the guest prints.
    let run = Run::new("kmsg_warning");
    run.write(
        "guest.log",
        &two_boots(
            "# kmsg WARNING: CPU: 1 PID: 80 at mm/swap.c:10 lru_add_drain_all+0x1/0x2",
            "",
        ),
    );
    run.fails_with("at mm/swap.c:10");
}

#[test]
fn shell_error_in_the_guest_fails() {
    // The guest's init or a test that runs a command it does not have, or writes a file
    // that is not there without saying so, did not do what it meant to.
    for line in [
        "/init: line 19: kmsg: not found",
        "sh: can't create /sys/kernel/debug/text_poke_mod_rs/false_key: nonexistent directory",
        "/tests/defer.sh: line 7: syntax error: unexpected \"fi\"",
    ] {
        let run = Run::new("shell_error");
        run.write("guest.log", &two_boots(line, ""));
        run.fails_with(line);
    }
    // A test's output that only names a shell passes.
    let run = Run::new("shell_words");
    run.write("guest.log", &two_boots("  # users_x sh: 3 runs", ""));
    let (rc, out) = run.summarize();
    assert_eq!(rc, 0, "{out}");
}

#[test]
fn warning_a_test_declares_is_expected_in_its_boot_only() {
    let ro = "# kmsg WARNING: CPU: 1 PID: 80 at rust/kernel/jump_label/key/ro.rs:67 x+0x1/0x2";
    let declared = "@@ expect-warnings rokey rust/kernel/jump_label/key/ro\\.rs";
    let run = Run::new("kmsg_expected");
    run.write("guest.log", &two_boots(&format!("{declared}\n{ro}"), ""));
    let (rc, out) = run.summarize();
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("1 warnings the tests caused on purpose"), "{out}");
    // Another warning in the same boot still fails.
    let other = "# kmsg WARNING: CPU: 2 PID: 81 at mm/swap.c:10 y+0x1/0x2";
    run.write("guest.log", &two_boots(&format!("{declared}\n{ro}\n{other}"), ""));
    run.fails_with("at mm/swap.c:10");
    // The declaration covers its own boot, not the next one.
    run.write("guest.log", &two_boots(declared, ro));
    run.fails_with("at rust/kernel/jump_label/key/ro.rs:67");
    // And never a BUG.
    let bug = "# kmsg BUG: KASAN: slab-out-of-bounds in rust/kernel/jump_label/key/ro.rs";
    run.write("guest.log", &two_boots(&format!("{declared}\n{bug}"), ""));
    run.fails_with("BUG: KASAN");
}

#[test]
fn kernel_log_printed_again_counts_no_self_test() {
    let run = Run::new("kmsg_selftest");
    run.write(
        "guest.log",
        "[    1.0] Testing tracer nop: PASSED\n# kmsg Testing tracer nop: PASSED\n",
    );
    let (rc, out) = run.summarize_declared(DECLARED);
    assert_eq!(rc, 0, "{out}");
}

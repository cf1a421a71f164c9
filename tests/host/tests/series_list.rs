// SPDX-License-Identifier: GPL-2.0

//! `scripts/series.py`'s reading of `scripts/series.list`: which patch of the series adds each
//! overlay file. A path names its file; a pattern takes the files no path names, so that a new
//! file joins its patch without being listed; a file in no patch, a path named twice or missing,
//! and a pattern that matches nothing are refused, naming them.

use std::path::Path;
use std::process::Command;

/// Runs `assign_files()` on `list` (a series.list's sections) and `files` (the overlay): the
/// files of each section, one line per section, or the error.
fn assign(list: &str, files: &[&str]) -> Result<String, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/series.py");
    let program = format!(
        r#"
import importlib.util, sys
spec = importlib.util.spec_from_file_location("series", {script:?})
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
sections = []
for block in {list:?}.split("== ")[1:]:
    lines = block.strip().split("\n")
    sections.append({{"hook": lines[0], "msg": [], "files": lines[1:]}})
m.assign_files(sections, sorted({files:?}))
for s in sections:
    print(s["hook"] + ": " + " ".join(s["files"]))
"#,
        script = script.to_str().unwrap(),
        files = files,
    );
    let out = Command::new("python3")
        .args(["-c", &program])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(stdout)
    }
}

const LIST: &str = "== a
rust/kernel/k/**/*.rs
kernel/x/text_poke_rs_int3.rs
== b
kernel/x/text_poke_*
kernel/x/Makefile
";

#[test]
fn a_new_file_joins_the_patch_of_its_pattern() {
    let files = [
        "rust/kernel/k/key.rs",
        "rust/kernel/k/key/new.rs",
        "kernel/x/text_poke_rs_int3.rs",
        "kernel/x/text_poke_bench.rs",
        "kernel/x/Makefile",
    ];
    assert_eq!(
        assign(LIST, &files).unwrap(),
        "a: kernel/x/text_poke_rs_int3.rs rust/kernel/k/key.rs rust/kernel/k/key/new.rs\n\
         b: kernel/x/Makefile kernel/x/text_poke_bench.rs\n"
    );
}

#[test]
fn a_file_in_no_patch_is_named() {
    let files = [
        "rust/kernel/k/key.rs",
        "kernel/x/text_poke_rs_int3.rs",
        "kernel/x/text_poke_bench.rs",
        "kernel/x/Makefile",
        "kernel/x/other.c",
    ];
    let err = assign(LIST, &files).unwrap_err();
    assert!(err.contains("in no patch"), "{err}");
    assert!(err.contains("kernel/x/other.c"), "{err}");
}

#[test]
fn stale_paths_and_patterns_are_named() {
    let err = assign(LIST, &["kernel/x/Makefile", "kernel/x/text_poke_a.c"]).unwrap_err();
    assert!(
        err.contains("not in the overlay: ['kernel/x/text_poke_rs_int3.rs']"),
        "{err}"
    );
    assert!(
        err.contains("match no file: ['rust/kernel/k/**/*.rs']"),
        "{err}"
    );
    let twice = "== a\nkernel/x/Makefile\n== b\nkernel/x/Makefile\n";
    let err = assign(twice, &["kernel/x/Makefile"]).unwrap_err();
    assert!(err.contains("named twice: ['kernel/x/Makefile']"), "{err}");
}

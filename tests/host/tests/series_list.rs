// SPDX-License-Identifier: GPL-2.0

//! `scripts/series.py`'s reading of `scripts/series.list`: which patch of the series adds each
//! overlay file. A path names its file; a pattern takes the files no path names, so that a new
//! file joins its patch without being listed; a file in no patch, a path named twice or missing,
//! and a pattern that matches nothing are refused, naming them.

use std::path::Path;
use std::process::Command;

/// Runs `body`, Python with `scripts/series.py` imported as `m`: its output, or its output as the
/// error if it failed.
fn series_py(body: &str) -> Result<String, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/series.py");
    let program = format!(
        r#"
import importlib.util, sys
spec = importlib.util.spec_from_file_location("series", {script:?})
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
def read(text):
    """A series.list text's sections, as read_list() gives them, without messages."""
    sections = []
    for block in text.split("== ")[1:]:
        lines = block.strip().split("\n")
        sections.append({{"hook": lines[0], "msg": [], "files": lines[1:]}})
    return sections
{body}"#,
        script = script.to_str().unwrap(),
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

/// Runs `assign_files()` on `list` (a series.list's sections) and `files` (the overlay): the
/// files of each section, one line per section, or the error.
fn assign(list: &str, files: &[&str]) -> Result<String, String> {
    series_py(&format!(
        r#"
sections = read({list:?})
m.assign_files(sections, sorted({files:?}))
for s in sections:
    print(s["hook"] + ": " + " ".join(s["files"]))
"#
    ))
}

const LIST: &str = "== a
rust/kernel/k/**/*.rs
kernel/x/text_poke_batch_int3.rs
== b
kernel/x/text_poke_*
kernel/x/Makefile
";

#[test]
fn a_new_file_joins_the_patch_of_its_pattern() {
    let files = [
        "rust/kernel/k/key.rs",
        "rust/kernel/k/key/new.rs",
        "kernel/x/text_poke_batch_int3.rs",
        "kernel/x/text_poke_bench.rs",
        "kernel/x/Makefile",
    ];
    assert_eq!(
        assign(LIST, &files).unwrap(),
        "a: kernel/x/text_poke_batch_int3.rs rust/kernel/k/key.rs rust/kernel/k/key/new.rs\n\
         b: kernel/x/Makefile kernel/x/text_poke_bench.rs\n"
    );
}

#[test]
fn a_file_in_no_patch_is_named() {
    let files = [
        "rust/kernel/k/key.rs",
        "kernel/x/text_poke_batch_int3.rs",
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
        err.contains("not in the overlay: ['kernel/x/text_poke_batch_int3.rs']"),
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

/// Runs `assign_parts()` on `list`, whose sections add the overlay `files` (path and text):
/// each file with parts as each patch leaves it ("patch path: text", newlines as "|"), or the
/// error.
fn parts(list: &str, files: &[(&str, &str)]) -> Result<String, String> {
    let top = std::env::temp_dir().join(format!("series-parts-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&top);
    for (path, text) in files {
        let p = top.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let names: Vec<&str> = files.iter().map(|f| f.0).collect();
    let out = series_py(&format!(
        r#"
sections = read({list:?})
m.assign_files(sections, sorted({names:?}))
parts = m.assign_parts(sections, {top:?})
for k, s in enumerate(sections):
    for f in sorted(parts):
        if k in parts[f]["patch"]:
            print(s["hook"] + " " + f + ": " + m.file_at(parts[f], k).replace("\n", "|"))
"#,
        top = top.to_str().unwrap(),
    ));
    let _ = std::fs::remove_dir_all(&top);
    out
}

const KEY: &str = "mod a;\n#[cfg(X)]\nmod ro;\n\nfn f() {}\n\n/// Doc.\nfn ro() {\n    x\n}\n\n#[tests]\nmod tests {\n}\n";

#[test]
fn a_later_patch_adds_the_parts_of_a_file_it_names() {
    let list = "== key\nk/key.rs\nk/a.rs\n== ro\nk/ro.rs\nk/key.rs /^mod ro;/\n\
                k/key.rs /^fn ro/,/^}/\n== tests\nk/key.rs /^#.tests/,$\n";
    let files = [("k/key.rs", KEY), ("k/a.rs", "a\n"), ("k/ro.rs", "ro\n")];
    assert_eq!(
        parts(list, &files).unwrap(),
        // Items take their attributes and doc comments; the function's part takes the blank
        // line after it, the tests' the one before them.
        "key k/key.rs: mod a;||fn f() {}|\n\
         ro k/key.rs: mod a;|#[cfg(X)]|mod ro;||fn f() {}||/// Doc.|fn ro() {|    x|}|\n\
         tests k/key.rs: mod a;|#[cfg(X)]|mod ro;||fn f() {}||/// Doc.|fn ro() {|    x|}||#[tests]|mod tests {|}|\n"
    );
}

#[test]
fn a_part_that_is_not_one_place_of_a_later_file_is_refused() {
    let files = [("k/key.rs", KEY), ("k/ro.rs", "ro\n")];
    for (list, says) in [
        (
            "== a\nk/key.rs\nk/ro.rs\n== b\nk/key.rs /^mod/\n",
            "/^mod/ matches 3 lines",
        ),
        (
            "== a\nk/key.rs\nk/ro.rs\n== b\nk/key.rs /^nothing/\n",
            "matches 0 lines",
        ),
        (
            "== a\nk/key.rs\nk/ro.rs\n== b\nk/key.rs /^fn ro/,/^nothing/\n",
            "after line 7",
        ),
        (
            "== a\nk/key.rs /^mod a/\n== b\nk/key.rs\nk/ro.rs\n",
            "no patch before this one",
        ),
        (
            "== a\nk/key.rs\nk/ro.rs\n== b\nk/key.rs /^fn ro/,/^}/\n== c\nk/key.rs /x$/\n",
            "line 9 of k/key.rs is in another part too",
        ),
    ] {
        let err = parts(list, &files).unwrap_err();
        assert!(err.contains(says), "{list}: {err}");
    }
}

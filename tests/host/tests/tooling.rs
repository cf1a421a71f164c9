// SPDX-License-Identifier: GPL-2.0

//! The tooling a newcomer meets first: `scripts/fetch-base.sh` fetches exactly the pinned base
//! and says what to do when it is gone or damaged, and two runs never share a cache at once.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A cache of its own (`JLRS_CACHE`), removed afterwards.
struct Cache {
    dir: PathBuf,
}

impl Cache {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("tooling-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("apt/debs")).unwrap();
        Self { dir }
    }

    /// A pin naming `version` with `sha256`, in the cache's directory.
    fn pin(&self, version: &str, sha256: &str) -> PathBuf {
        let pin = self.dir.join("base.pin");
        fs::write(
            &pin,
            format!("BASE_DEB_VERSION={version}\nBASE_DEB_SHA256={sha256}\n"),
        )
        .unwrap();
        pin
    }

    /// Runs `scripts/fetch-base.sh` in this cache with the pin `pin`.
    fn fetch_base(&self, pin: &Path) -> Output {
        Command::new(top().join("scripts/fetch-base.sh"))
            .env("JLRS_CACHE", &self.dir)
            .env("JLRS_BASE_PIN", pin)
            .env_remove("JLRS_LOCKED")
            .output()
            .expect("fetch-base.sh runs")
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn top() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A pinned version sid no longer carries: the run fails, naming the version, where else its
/// `.deb` may be had, and the one command that moves the overlay to sid's.
#[test]
fn base_gone_from_sid_says_what_to_do() {
    let cache = Cache::new("gone");
    // The sid index make test fetched, so that this asks no mirror; fetched anew if absent.
    let real = PathBuf::from(std::env::var("JLRS_CACHE").expect("host-test.sh exports JLRS_CACHE"));
    let lists = cache.dir.join("apt/lists");
    fs::create_dir_all(&lists).unwrap();
    if let Ok(dir) = fs::read_dir(real.join("apt/lists")) {
        for entry in dir.flatten() {
            if entry.file_name().to_string_lossy().contains("sid") {
                fs::copy(entry.path(), lists.join(entry.file_name())).unwrap();
            }
        }
    }
    let out = cache.fetch_base(&cache.pin("7.2.0-99", &"0".repeat(64)));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    for what in [
        "no longer carries linux-source-7.2 7.2.0-99",
        "linux-source-7.2_7.2.0-99_all.deb",
        "https://snapshot.debian.org/package/linux/7.2.0-99/",
        "make rebase",
    ] {
        assert!(err.contains(what), "expected '{what}' in:\n{err}");
    }
    assert!(!cache.dir.join("base.env").exists(), "{err}");
}

/// A `.deb` of the pinned version whose checksum is not the pinned one is refused and removed,
/// before anything is unpacked.
#[test]
fn base_with_wrong_checksum_is_refused() {
    let cache = Cache::new("checksum");
    let deb = cache.dir.join("apt/debs/linux-source-7.2_7.2.0-99_all.deb");
    fs::write(&deb, "not a Debian package\n").unwrap();
    let out = cache.fetch_base(&cache.pin("7.2.0-99", &"0".repeat(64)));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("not the pinned 0000"), "{err}");
    assert!(!deb.exists(), "the damaged .deb is still there:\n{err}");
    assert!(!cache.dir.join("7.2.0").exists(), "{err}");
    assert!(!cache.dir.join("base.env").exists(), "{err}");
}

/// The pin the tooling fetches is well formed: an exact Debian version of a 7.2.y release and
/// a SHA-256.
#[test]
fn base_pin_is_exact() {
    let pin = fs::read_to_string(top().join("scripts/base.pin")).unwrap();
    let value = |key: &str| {
        pin.lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap_or_else(|| panic!("no {key} in base.pin"))
            .to_owned()
    };
    let version = value("BASE_DEB_VERSION=");
    assert!(
        version.starts_with("7.2.") && version.contains('-'),
        "{version}"
    );
    let sha = value("BASE_DEB_SHA256=");
    assert!(
        sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit()),
        "{sha}"
    );
}

/// A second run on a cache another run holds waits for it, saying so, and goes on once the
/// first is done.
#[test]
fn second_run_waits_for_the_cache() {
    let cache = Cache::new("lock");
    fs::write(cache.dir.join(".lock"), "").unwrap();
    let mut holder = Command::new("flock")
        .arg(cache.dir.join(".lock"))
        .args(["sleep", "3"])
        .spawn()
        .expect("flock runs");
    // Until flock holds the lock.
    let start = Instant::now();
    while Command::new("flock")
        .args(["-n", cache.dir.join(".lock").to_str().unwrap(), "true"])
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success()
    {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "flock never took the lock"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let start = Instant::now();
    // A checksum failure ends the second run as soon as it holds the lock.
    fs::write(
        cache.dir.join("apt/debs/linux-source-7.2_7.2.0-99_all.deb"),
        "",
    )
    .unwrap();
    let out = cache.fetch_base(&cache.pin("7.2.0-99", &"0".repeat(64)));
    let err = stderr(&out);
    holder.wait().unwrap();
    assert!(
        err.contains("waiting for another run using"),
        "no word of the wait:\n{err}"
    );
    assert!(
        start.elapsed() >= Duration::from_secs(1),
        "did not wait:\n{err}"
    );
    assert!(err.contains("not the pinned"), "did not go on:\n{err}");
}

/// `scripts/demo/results.py check|write` on copies of the README and the report.
fn results_py(action: &str, json: &Path, readme: &Path, report: &Path) -> Output {
    Command::new("python3")
        .arg(top().join("scripts/demo/results.py"))
        .arg(action)
        .args([json, readme, report])
        .output()
        .expect("results.py runs")
}

/// Every figure the README's results table and `results/REPORT.md` quote is the one
/// `results/demo.json` gives: the committed files pass the check, and a README whose table
/// quotes one figure differently fails it, naming the file, until `write` puts it back.
#[test]
fn readme_figures_are_demo_json_s() {
    let top = top();
    let json = top.join("results/demo.json");
    let ok = results_py(
        "check",
        &json,
        &top.join("README.md"),
        &top.join("results/REPORT.md"),
    );
    assert!(ok.status.success(), "{}", stderr(&ok));

    let cache = Cache::new("figures");
    let readme = cache.dir.join("README.md");
    let report = cache.dir.join("REPORT.md");
    fs::copy(top.join("results/REPORT.md"), &report).unwrap();
    let text = fs::read_to_string(top.join("README.md")).unwrap();
    let begin = text
        .find("<!-- results: generated")
        .expect("a generated table");
    let row = begin + text[begin..].find("\n| ").unwrap() + 1;
    let row = row + text[row..].find('\n').unwrap() + 1;
    let row = row + text[row..].find('\n').unwrap() + 1;
    // The first figure of the first row, one digit off.
    let digit = row + text[row..].find(|c: char| c.is_ascii_digit()).unwrap();
    let digit = digit + text[digit..].find(" | ").unwrap() + 3;
    let digit = digit + text[digit..].find(|c: char| c.is_ascii_digit()).unwrap();
    let mut bad = text.clone();
    let d = text.as_bytes()[digit];
    bad.replace_range(digit..digit + 1, if d == b'9' { "8" } else { "9" });
    fs::write(&readme, &bad).unwrap();
    let out = results_py("check", &json, &readme, &report);
    assert!(!out.status.success(), "a changed figure passed the check");
    assert!(stderr(&out).contains("quotes figures"), "{}", stderr(&out));
    let out = results_py("write", &json, &readme, &report);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(fs::read_to_string(&readme).unwrap(), text);
}

/// The README is a front door a newcomer reads in minutes: at most 200 lines, no line over 400
/// characters, and a results table of at most 10 rows ([`readme_figures_are_demo_json_s`]
/// checks their figures), which `results/REPORT.md` holds the rest of.
#[test]
fn readme_is_short() {
    let text = fs::read_to_string(top().join("README.md")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() <= 200, "README.md: {} lines", lines.len());
    for (i, l) in lines.iter().enumerate() {
        assert!(
            l.chars().count() <= 400,
            "README.md:{}: {} characters",
            i + 1,
            l.len()
        );
    }
    let begin = lines
        .iter()
        .position(|l| l.starts_with("<!-- results: generated"))
        .expect("a generated table");
    let end = begin
        + lines[begin..]
            .iter()
            .position(|l| l.starts_with("<!-- results: end"))
            .expect("the table's end");
    // The header and its rule, then a row per figure.
    let rows = lines[begin + 1..end]
        .iter()
        .filter(|l| l.starts_with('|'))
        .count()
        - 2;
    assert!(rows <= 10, "README.md: {rows} rows of results");
    assert!(
        text.contains("results/REPORT.md"),
        "the table links no report"
    );
}

/// `make demo`'s hooks scenario: the host benchmark of the idle hooks reports every variant in
/// lines `results.py` reads, and the section it makes says what deferral adds to an idle round
/// trip and to an interrupt in idle: a locked compare-and-exchange and an exchange, which cost
/// cycles on every x86 CPU, over context tracking's own pair of locked adds.
#[test]
fn hook_cycles_feed_the_hooks_section() {
    let cache = Cache::new("hooks");
    let out = Command::new(env!("CARGO_BIN_EXE_hook_cycles"))
        .args(["31", "2000"])
        .output()
        .expect("hook_cycles runs");
    assert!(out.status.success(), "{}", stderr(&out));
    let log = cache.dir.join("host-hooks.log");
    fs::write(&log, &out.stdout).unwrap();
    let res = Command::new("python3")
        .arg(top().join("scripts/demo/results.py"))
        .args(["--log".as_ref(), log.as_os_str()])
        .args(["--out".as_ref(), cache.dir.join("results").as_os_str()])
        .args([
            "--kernel",
            "7.2.0",
            "--cpus",
            "4",
            "--revision",
            "test",
            "--icount",
        ])
        .args(["--scenario", "hooks"])
        .output()
        .expect("results.py runs");
    assert!(res.status.success(), "{}", stderr(&res));
    let doc = fs::read_to_string(cache.dir.join("results/demo.json")).unwrap();
    for v in ["loop", "ct", "idle_off", "idle_on", "irq_off", "irq_on"] {
        assert!(
            doc.contains(&format!("\"variant\": \"{v}\"")),
            "no {v} row:\n{doc}"
        );
    }
    let report = fs::read_to_string(cache.dir.join("results/REPORT.md")).unwrap();
    let adds = report
        .lines()
        .find(|l| l.starts_with("What deferral on adds over off"))
        .unwrap_or_else(|| panic!("no line of what deferral adds:\n{report}"));
    for kind in ["idle: +", "irq: +", "ct_state_inc()` costs "] {
        assert!(adds.contains(kind), "{kind} missing: {adds}");
    }
}

/// A guest's console reaches its log line by line (`jlrs_console`, `scripts/lib.sh`), as the
/// guest prints it: a run that is stopped, or a guest that goes quiet for minutes, leaves a log
/// that ends where the guest is, not 4 KB of output earlier.
#[test]
fn console_lines_reach_the_log_at_once() {
    let cache = Cache::new("console");
    let log = cache.dir.join("console.log");
    let script = format!(
        ". {}/scripts/lib.sh && {{ printf '@@ progress one\\r\\n'; sleep 4; echo end; }} | \
         jlrs_console > {}",
        top().display(),
        log.display(),
    );
    let mut guest = Command::new("bash")
        .args(["-c", &script])
        .env("JLRS_CACHE", &cache.dir)
        .env_remove("JLRS_LOCKED")
        .spawn()
        .expect("bash runs");
    let start = Instant::now();
    let mut seen = String::new();
    while start.elapsed() < Duration::from_secs(3) && seen.is_empty() {
        std::thread::sleep(Duration::from_millis(100));
        seen = fs::read_to_string(&log).unwrap_or_default();
    }
    let status = guest.wait().unwrap();
    assert!(status.success(), "the pipeline failed");
    assert_eq!(
        seen, "@@ progress one\n",
        "the line was not in the log while the guest ran"
    );
    assert_eq!(fs::read_to_string(&log).unwrap(), "@@ progress one\nend\n");
}

/// `make series` walks the prefixes in a copy of the tested tree, mounted over it for the walk
/// alone (`jlrs_in_copy`, `scripts/lib.sh`): the walk reads and writes the copy under the tree's
/// path, and the tree, which other builds read meanwhile, never changes. (The runs are root's,
/// who may make a mount namespace.)
#[test]
fn walk_writes_only_its_copy_of_the_tree() {
    let cache = Cache::new("walk");
    let (tree, copy) = (cache.dir.join("src"), cache.dir.join("series-src"));
    for dir in [&tree, &copy] {
        fs::create_dir_all(dir).unwrap();
    }
    fs::write(tree.join("file"), "tested\n").unwrap();
    fs::write(copy.join("file"), "tested\n").unwrap();
    let script = format!(
        ". {}/scripts/lib.sh && jlrs_can_isolate || {{ echo 'no mount namespace' >&2; exit 1; }}; \
         jlrs_in_copy {copy} {tree} sh -c 'echo prefix > {tree}/file; cat {tree}/file'",
        top().display(),
        copy = copy.display(),
        tree = tree.display(),
    );
    let out = Command::new("bash")
        .args(["-c", &script])
        .env("JLRS_CACHE", &cache.dir)
        .env_remove("JLRS_LOCKED")
        .output()
        .expect("bash runs");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "prefix\n",
        "the walk did not see its write"
    );
    assert_eq!(fs::read_to_string(copy.join("file")).unwrap(), "prefix\n");
    assert_eq!(
        fs::read_to_string(tree.join("file")).unwrap(),
        "tested\n",
        "the walk's write reached the tested tree"
    );
}

/// `make series` fails a prefix whose build warns about a file the series changes, though it
/// builds (`scripts/series-walk.py`): the last patch is built too, with the series' sources
/// touched so that each is compiled. A warning about a file the series does not change
/// (upstream's) does not count, and the walk leaves the tree as it found it.
#[test]
fn walk_fails_a_prefix_that_warns() {
    let cache = Cache::new("walk-warn");
    let (work, src, seed, bin) = (
        cache.dir.join("work"),
        cache.dir.join("src"),
        cache.dir.join("seed"),
        cache.dir.join("bin"),
    );
    for dir in [&work, &seed, &bin] {
        fs::create_dir_all(dir).unwrap();
    }
    fs::write(seed.join(".config"), "CONFIG_X=y\n").unwrap();
    // A make that prints rustc's warning for every file holding WARN, where it is.
    let make = bin.join("make");
    fs::write(
        &make,
        "#!/bin/sh\ncase \"$*\" in *olddefconfig*) exit 0 ;; esac\n\
         for f in *.c *.rs; do grep -q WARN \"$f\" || continue\n\
         echo 'warning: unused import: `kernel::bindings`'; echo \" --> $PWD/$f:8:5\"; done\n",
    )
    .unwrap();
    Command::new("chmod").arg("+x").arg(&make).status().unwrap();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .current_dir(&work)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .output()
            .expect("git runs");
        assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
    };
    let walk = |rs: &str| {
        fs::write(work.join("measure.rs"), rs).unwrap();
        git(&["add", "-A"]);
        git(&["commit", "-q", "--amend", "-m", "rust: add measure.rs"]);
        let _ = fs::remove_dir_all(&src);
        fs::create_dir_all(&src).unwrap();
        for f in ["upstream.c", "hook.c", "measure.rs"] {
            fs::copy(work.join(f), src.join(f)).unwrap();
        }
        let before = fs::metadata(src.join("hook.c"))
            .unwrap()
            .modified()
            .unwrap();
        let out = Command::new("python3")
            .arg(top().join("scripts/series-walk.py"))
            .arg("--work")
            .arg(&work)
            .arg("--src")
            .arg(&src)
            .arg("--build")
            .arg(cache.dir.join("bisect"))
            .arg("--seed")
            .arg(&seed)
            .env(
                "PATH",
                format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
            )
            .output()
            .expect("python3 runs");
        let after = fs::metadata(src.join("hook.c"))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(before, after, "the walk left a source touched");
        out
    };
    git(&["init", "-q"]);
    fs::write(work.join("upstream.c"), "WARN\n").unwrap();
    fs::write(work.join("hook.c"), "base\n").unwrap();
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "base"]);
    git(&["tag", "base"]);
    fs::write(work.join("hook.c"), "hooked\n").unwrap();
    git(&["commit", "-q", "-a", "-m", "hook"]);
    fs::write(work.join("measure.rs"), "\n").unwrap();
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "rust: add measure.rs"]);

    let out = walk("use kernel::bindings; // WARN\n");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "a warning passed: {text}");
    assert!(
        text.contains("patches 1-2 of 2 build with a warning") && text.contains("measure.rs:8:5"),
        "{text}"
    );
    let out = walk("#[cfg(CONFIG_X)]\nuse kernel::bindings;\n");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "upstream's warning failed the walk: {text}{}",
        stderr(&out)
    );
    assert!(
        text.contains("every prefix of the 2 patches builds (2 built now"),
        "{text}"
    );
}

/// The overlay's files, sorted: what git tracks in the directories `scripts/apply-overlay.sh`
/// copies to their kernel paths.
fn overlay_files() -> Vec<String> {
    let ls = Command::new("git")
        .current_dir(top())
        .args([
            "ls-files",
            "--",
            "Documentation",
            "arch",
            "include",
            "init",
            "kernel",
        ])
        .args(["lib", "mm", "rust", "samples", "tools"])
        .output()
        .expect("git runs");
    let mut overlay: Vec<String> = String::from_utf8_lossy(&ls.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    overlay.sort();
    assert!(!overlay.is_empty(), "no overlay file");
    overlay
}

/// A build of `make test-matrix` fails on a warning that names a file of the series
/// (`scripts/build-warnings.py`, which `scripts/test.sh` runs on each build's log), not on
/// upstream's, and touches the file warned about, so that the next incremental build of the
/// same directory compiles it again and warns again instead of passing.
#[test]
fn matrix_build_warnings_fail_and_stay() {
    let cache = Cache::new("build-warnings");
    let src = cache.dir.join("src");
    fs::create_dir_all(src.join("arch/x86/kernel/text_poke_batch")).unwrap();
    let manifest = cache.dir.join("manifest");
    fs::write(
        &manifest,
        "arch/x86/kernel/text_poke_batch.c\narch/x86/kernel/text_poke_batch/measure.rs\n",
    )
    .unwrap();
    let (c, rs) = (
        src.join("arch/x86/kernel/text_poke_batch.c"),
        src.join("arch/x86/kernel/text_poke_batch/measure.rs"),
    );
    for f in [&c, &rs] {
        fs::write(f, "").unwrap();
        let old = Command::new("touch")
            .args(["-d", "2020-01-01"])
            .arg(f)
            .status()
            .unwrap();
        assert!(old.success());
    }
    let mtime = |f: &Path| fs::metadata(f).unwrap().modified().unwrap();
    let (c0, rs0) = (mtime(&c), mtime(&rs));
    let run = |log: &str| {
        let path = cache.dir.join("build.log");
        fs::write(&path, log).unwrap();
        Command::new("python3")
            .arg(top().join("scripts/build-warnings.py"))
            .arg(&path)
            .arg(&manifest)
            .arg("--touch")
            .arg(&src)
            .output()
            .expect("python3 runs")
    };
    // Upstream's warnings, and rustc's summary line, are not the series'.
    let out = run("/s/src/mm/slub.c:9:1: warning: unused variable 'x'\n\
                   warning: 2 warnings emitted\n");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    assert_eq!((mtime(&c), mtime(&rs)), (c0, rs0));
    // rustc's warning, with the "-->" line after it that names the file.
    let out = run("warning: unused import: `kernel::bindings`\n\
                   \x20--> arch/x86/kernel/text_poke_batch/measure.rs:8:5\n");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("measure.rs:8:5"));
    assert!(mtime(&rs) > rs0, "the file warned about was not touched");
    assert_eq!(mtime(&c), c0);
    // objtool's, about the object built from a file of the series.
    let out = run("arch/x86/kernel/text_poke_batch.o: warning: objtool: f+0x1: call\n");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(mtime(&c) > c0, "the object's source was not touched");
    // And scripts/test.sh runs it on every matrix build's log.
    let test_sh = fs::read_to_string(top().join("scripts/test.sh")).unwrap();
    assert!(test_sh.contains("scripts/build-warnings.py"));
    assert!(!test_sh.contains("matrix_kunit build \"$name\" >"));
}

/// The series of `patches/`, in the order of their directories' names: each patch's file name.
fn series() -> Vec<(String, Vec<PathBuf>)> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(top().join("patches"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs.into_iter()
        .map(|d| {
            let mut p: Vec<PathBuf> = fs::read_dir(&d)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "patch"))
                .collect();
            p.sort();
            (d.file_name().unwrap().to_string_lossy().into_owned(), p)
        })
        .collect()
}

/// Each directory of `patches/` is one series as `git format-patch` writes it: a cover letter
/// `[PATCH 0/N]` and patches `[PATCH 1/N]` to `[PATCH N/N]`, numbered in their files' order,
/// and the cover letter's figures are those `results/demo.json` gives (a figure one digit off
/// fails the check).
#[test]
fn series_are_numbered_and_quote_demo_json() {
    let all = series();
    assert!(!all.is_empty(), "patches/ holds no series");
    let mut covers = Vec::new();
    for (name, patches) in &all {
        let n = patches.len() - 1;
        for (i, p) in patches.iter().enumerate() {
            let text = fs::read_to_string(p).unwrap();
            let file = p.file_name().unwrap().to_string_lossy();
            assert!(
                file.starts_with(&format!("{i:04}-")),
                "{name}/{file}: not patch {i}"
            );
            let width = if n >= 10 { 2 } else { 1 };
            let want = format!("Subject: [PATCH {i:0width$}/{n}] ");
            assert!(text.contains(&want), "{name}/{file}: no '{want}'");
        }
        covers.push(patches[0].clone());
    }
    let top = top();
    let json = top.join("results/demo.json");
    let check = |covers: &[PathBuf]| {
        Command::new("python3")
            .arg(top.join("scripts/demo/results.py"))
            .arg("check")
            .args([
                &json,
                &top.join("README.md"),
                &top.join("results/REPORT.md"),
            ])
            .args(covers)
            .output()
            .expect("results.py runs")
    };
    let out = check(&covers);
    assert!(out.status.success(), "{}", stderr(&out));
    let cache = Cache::new("covers");
    let bad = cache.dir.join("0000-cover-letter.patch");
    let text = fs::read_to_string(&covers[covers.len() - 1]).unwrap();
    let at = text.find("Measured by make demo").expect("figures");
    let at = at + text[at..].find("\n- ").unwrap();
    let digit = at + text[at..].find(|c: char| c.is_ascii_digit()).unwrap();
    let mut changed = text.clone();
    let d = text.as_bytes()[digit];
    changed.replace_range(digit..digit + 1, if d == b'9' { "8" } else { "9" });
    fs::write(&bad, changed).unwrap();
    let out = check(&[bad]);
    assert!(!out.status.success(), "a changed figure passed the check");
    assert!(stderr(&out).contains("quotes figures"), "{}", stderr(&out));
}

/// The patches not for merging ("DO NOT MERGE: ..."), which only measure, come last in their
/// series: every patch a maintainer would take, tests included, comes before them and needs
/// none of them.
#[test]
fn measurement_patches_are_last_in_their_series() {
    for (name, patches) in &series() {
        let mut first_dnm: Option<String> = None;
        for p in &patches[1..] {
            let text = fs::read_to_string(p).unwrap();
            let file = p.file_name().unwrap().to_string_lossy().into_owned();
            let subject = text
                .lines()
                .find(|l| l.starts_with("Subject: "))
                .unwrap_or_else(|| panic!("{name}/{file}: no subject"));
            let dnm = subject.contains("] DO NOT MERGE: ");
            match (&first_dnm, dnm) {
                (None, true) => first_dnm = Some(file),
                (Some(before), false) => {
                    panic!("{name}/{file} is for merging, but comes after {before}, which is not")
                }
                _ => {}
            }
        }
    }
}

/// Every overlay file is what the series leaves of it: the series' new files, made by
/// `git apply` of every patch in an empty directory (the hooks into upstream files left out),
/// are the overlay's files, byte for byte, and there are no others.
#[test]
fn overlay_is_the_series_tree() {
    let top = top();
    let overlay = overlay_files();
    let cache = Cache::new("overlay");
    let dir = cache.dir.join("tree");
    fs::create_dir_all(&dir).unwrap();
    for (name, patches) in series() {
        for p in &patches[1..] {
            let mut cmd = Command::new("git");
            cmd.current_dir(&dir).args(["apply", "--unsafe-paths"]);
            for f in &overlay {
                cmd.arg(format!("--include={f}"));
            }
            let out = cmd.arg(p).output().expect("git runs");
            assert!(
                out.status.success(),
                "{name}/{}: {}",
                p.display(),
                stderr(&out)
            );
        }
    }
    for f in &overlay {
        let made = fs::read(dir.join(f)).unwrap_or_default();
        assert!(
            made == fs::read(top.join(f)).unwrap(),
            "{f} is not what patches/ make of it (scripts/series.sh absorb)"
        );
    }
    let found = Command::new("find")
        .current_dir(&dir)
        .args([".", "-type", "f"])
        .output()
        .unwrap();
    let made = String::from_utf8_lossy(&found.stdout).lines().count();
    assert_eq!(
        made,
        overlay.len(),
        "the series adds files the overlay lacks"
    );
}

/// Every overlay file has a maintainer: the series' MAINTAINERS hunks name each once, in an entry
/// of a mechanism, and name no file the overlay does not have.
#[test]
fn every_overlay_file_has_a_maintainers_entry() {
    let overlay = overlay_files();
    let mut named = Vec::new();
    for (_, patches) in series() {
        for p in &patches[1..] {
            let text = fs::read_to_string(p).unwrap();
            let mut on = false;
            for l in text.lines() {
                if l.starts_with("diff --git ") {
                    on = l.ends_with(" b/MAINTAINERS");
                } else if on && l.starts_with("+F:\t") {
                    named.push(l[4..].to_owned());
                } else if on && l.starts_with("-F:\t") {
                    named.retain(|f| f != &l[4..]);
                }
            }
            let subject = text.lines().find(|l| l.starts_with("Subject: ")).unwrap();
            assert!(
                !subject.contains("jump_label_rs:"),
                "{}: the project's name as a subsystem",
                p.display()
            );
        }
    }
    named.sort();
    assert_eq!(named, overlay, "MAINTAINERS and the overlay differ");
}

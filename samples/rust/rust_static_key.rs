// SPDX-License-Identifier: GPL-2.0

//! Rust static key sample.
//!
//! One key, [`SAMPLE_KEY`], defined in Rust and tested at 64 sites. Its debugfs directory
//! `/sys/kernel/debug/rust_static_key/` holds:
//!
//! - `enabled`: reads `0` or `1`; writing `0` or `1` disables or enables the key, anything else
//!   fails with `EINVAL` and leaves the key alone, and so does a write while the key is held by
//!   more than one reference (`EBUSY`);
//! - `count`: the key's reference count;
//! - `sites`: the number of sites;
//! - `site_state`: one line per site: offset from `_stext`, size, the instruction's bytes, what
//!   it is, and whether it is what the key's value calls for;
//! - `run`: runs all 64 sites and tells how many took the enabled direction.

use core::fmt;
use kernel::{
    debugfs::{
        Reader,
        Scope, //
    },
    jump_label::{
        text_offset,
        x86::Decoded,
        StaticKeyFalse, //
    },
    prelude::*,
    uaccess::UserSliceReader,
};

module! {
    type: RustStaticKey,
    name: "rust_static_key",
    authors: ["The jump_label_rs authors"],
    description: "Rust static key sample",
    license: "GPL",
}

/// The sample's key: disabled until written to.
static SAMPLE_KEY: StaticKeyFalse = StaticKeyFalse::new();

/// One site of [`SAMPLE_KEY`]: each `N` is a separate function, so a separate site.
///
/// Returns `x + N + 1` when the key is enabled and `x` when it is not.
#[inline(never)]
fn site<const N: u64>(x: u64) -> u64 {
    if kernel::static_branch_unlikely!(SAMPLE_KEY) {
        x.wrapping_add(N + 1)
    } else {
        x
    }
}

macro_rules! sites {
    ($($n:literal)*) => {
        /// Every site of [`SAMPLE_KEY`].
        static SITES: [fn(u64) -> u64; 64] = [$(site::<$n>),*];
    };
}

sites!(
    0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
    32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61
    62 63
);

/// Runs every site and returns how many took the enabled direction.
fn run_sites() -> usize {
    SITES
        .iter()
        .zip(1u64..)
        .filter(|(site, n)| site(0) == *n)
        .count()
}

/// The debugfs view of [`SAMPLE_KEY`].
struct KeyControl;

impl fmt::Debug for KeyControl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", u8::from(SAMPLE_KEY.is_enabled()))
    }
}

impl Reader for KeyControl {
    fn read_from_slice(&self, reader: &mut UserSliceReader) -> Result {
        let mut buf = [0u8; 2];
        let n = reader.len();
        if n == 0 || n > buf.len() {
            return Err(EINVAL);
        }
        reader.read_slice(&mut buf[..n])?;
        if SAMPLE_KEY.count() > 1 {
            // Switching a counted key would warn: it belongs to whoever holds the references.
            return Err(EBUSY);
        }
        match &buf[..n] {
            b"0" | b"0\n" => SAMPLE_KEY.disable()?,
            b"1" | b"1\n" => SAMPLE_KEY.enable()?,
            _ => return Err(EINVAL),
        }
        Ok(())
    }
}

fn show_count(_: &KeyControl, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    writeln!(f, "{}", SAMPLE_KEY.count())
}

fn show_sites(_: &KeyControl, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match SAMPLE_KEY.site_count() {
        Ok(n) => writeln!(f, "{n}"),
        Err(e) => writeln!(f, "error {}", e.to_errno()),
    }
}

fn show_site_state(_: &KeyControl, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let enabled = SAMPLE_KEY.is_enabled();
    let mut ret = Ok(());
    let walk = SAMPLE_KEY.for_each_site(|site| {
        if ret.is_err() {
            return;
        }
        let bytes = site.read();
        let what = match site.decode() {
            Decoded::Nop => "nop",
            Decoded::Jmp(to) if to == site.target() => "jmp",
            Decoded::Jmp(_) => "jmp-elsewhere",
            Decoded::Int3 => "int3",
            Decoded::Other => "unknown",
        };
        let ok = match site.expected(enabled) {
            Some(want) => want.as_bytes() == &bytes[..site.size()],
            None => false,
        };
        // Offsets rather than addresses, not to reveal where the kernel was loaded.
        ret = write!(f, "_stext+{:#x} {}", text_offset(site.code()), site.size());
        for b in &bytes[..site.size()] {
            ret = ret.and_then(|()| write!(f, " {b:02x}"));
        }
        ret = ret.and_then(|()| writeln!(f, " {what} {}", if ok { "ok" } else { "WRONG" }));
    });
    match walk {
        Ok(()) => ret,
        Err(e) => writeln!(f, "error {}", e.to_errno()),
    }
}

fn show_run(_: &KeyControl, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    writeln!(f, "taken {} of {}", run_sites(), SITES.len())
}

struct RustStaticKey {
    _debugfs: Pin<KBox<Scope<KeyControl>>>,
}

impl kernel::Module for RustStaticKey {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let sites = SAMPLE_KEY.site_count().unwrap_or(0);
        pr_info!("key disabled, {sites} sites\n");
        let debugfs = KBox::pin_init(
            Scope::dir(KeyControl, c"rust_static_key", |control, dir| {
                dir.read_write_file(c"enabled", control);
                dir.read_callback_file(c"count", control, &show_count);
                dir.read_callback_file(c"sites", control, &show_sites);
                dir.read_callback_file(c"site_state", control, &show_site_state);
                dir.read_callback_file(c"run", control, &show_run);
            }),
            GFP_KERNEL,
        )?;
        Ok(Self { _debugfs: debugfs })
    }
}

#[cfg(CONFIG_RUST_STATIC_KEY_KUNIT_TEST)]
#[kernel::prelude::kunit_tests(rust_static_key_sample)]
mod tests {
    use super::*;

    /// Checks all sites of [`SAMPLE_KEY`]: returns the number of sites, of unlikely sites, and of
    /// sites whose bytes are not the NOP of their size (key disabled) or a JMP to their target
    /// (key enabled).
    fn check_all_sites() -> (usize, usize, usize) {
        let enabled = SAMPLE_KEY.is_enabled();
        let (mut sites, mut unlikely, mut wrong) = (0, 0, 0);
        let ret = SAMPLE_KEY.for_each_site(|site| {
            sites += 1;
            if !site.branch() {
                unlikely += 1;
            }
            let bytes = &site.read()[..site.size()];
            // The kernel's NOPs, written out rather than taken from the code under test.
            let nop: &[u8] = match site.size() {
                2 => &[0x66, 0x90],
                _ => &[0x0f, 0x1f, 0x44, 0x00, 0x00],
            };
            let ok = match (enabled, site.decode()) {
                (false, Decoded::Nop) => bytes == nop,
                (true, Decoded::Jmp(to)) => to == site.target(),
                _ => false,
            };
            if !ok {
                wrong += 1;
            }
        });
        if ret.is_err() {
            wrong += 1;
        }
        (sites, unlikely, wrong)
    }

    #[test]
    fn sixty_four_sites_follow_every_flip() {
        assert!(!SAMPLE_KEY.is_enabled());
        assert_eq!(check_all_sites(), (64, 64, 0));
        assert_eq!(run_sites(), 0);
        for _ in 0..8 {
            assert_eq!(SAMPLE_KEY.enable(), Ok(()));
            assert_eq!(check_all_sites(), (64, 64, 0));
            assert_eq!(run_sites(), 64);
            assert_eq!(SAMPLE_KEY.disable(), Ok(()));
            assert_eq!(check_all_sites(), (64, 64, 0));
            assert_eq!(run_sites(), 0);
        }
    }

    #[test]
    fn refcount_drives_all_sites() {
        assert!(SAMPLE_KEY.inc().is_ok());
        assert!(SAMPLE_KEY.inc().is_ok());
        SAMPLE_KEY.dec();
        assert_eq!(check_all_sites(), (64, 64, 0));
        assert_eq!(run_sites(), 64);
        SAMPLE_KEY.dec();
        assert_eq!(check_all_sites(), (64, 64, 0));
        assert_eq!(run_sites(), 0);
    }
}

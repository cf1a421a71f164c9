// SPDX-License-Identifier: GPL-2.0

//! `text_poke_mod_rs.ko`: static keys defined in a Rust module, and Rust sites in a module on a C
//! key of the kernel image, for the tests that load and unload modules (`make test`'s
//! user-space boot, `scripts/guest-test/module_rs.sh`).
//!
//! Sixteen sites on each of four keys: [`MOD_FALSE`] and [`MOD_TRUE`], defined here, `MOD_RO`,
//! defined here read-only after init and enabled by the module's init, and
//! `text_poke_batch_mod_key`, defined in C in the kernel image (`text_poke_stress.c`) and flipped
//! by `text_poke_bench`. The module's own keys are flipped through
//! `/sys/kernel/debug/text_poke_mod_rs/`:
//!
//! - `false_key`, `true_key`, `ro_key`: read `0` or `1`; writing `0` or `1` disables or enables
//!   the key, anything else fails with `EINVAL` and leaves the key alone; a write to `ro_key`
//!   fails with `EPERM` and a warning, since the module's init has returned;
//! - `state`: one line per key, `false_key`, `true_key`, `ro_key` and `c_key`: its value, then
//!   how many of its 16 sites, run now, took the direction that value does not ask for (`c_key 0
//!   wrong 0` when all is right). Meaningful for a key while it is not being flipped. Then
//!   `ro_race R`: what the read-only key race's change of `MOD_RO` returned, an errno (`-1`,
//!   `EPERM`, is right), once it has (the read waits for it); `-2147483648` if there was none.
//!   The race is armed by writing `Y` to `/sys/kernel/debug/text_poke_stress/ro_race` before
//!   the module is loaded, and run while the bench's `holdjl` holds `jump_label_mutex` (see
//!   `ro_race()`).
//!
//! - `span`: for the test of refused flips (`scripts/guest-test/span.sh`), on
//!   `text_poke_batch_span_key`, a key of the kernel image with one site there and 16 here. Reads
//!   `count C image W module W corrupted 0|1`: the key's count, how many of its sites in the
//!   kernel image and here, run now, took the direction its value does not ask for, and whether
//!   a corrupted site still holds the one-byte NOPs written over it. Takes `corrupt image`,
//!   `corrupt module` (one-byte NOPs over the key's first site there), `repair`, `enable` and
//!   `disable` (the Rust API), and `c_enable`, `c_disable`, `c_inc`, `c_dec` (the C functions);
//!   a flip that is refused fails the write with its error;
//! - `txn`: for the test of a module's keys' lifetime (`scripts/guest-test/span.sh`): `open`
//!   opens a transaction that enables `false_key`, kept by this module, which then cannot be
//!   unloaded until `commit` commits it or `drop` drops it; `rate_limit` tries to give
//!   [`MOD_DEFERRED`], a rate-limited key of this module, a rate limit, which is refused with
//!   `EINVAL` and a warning: its delayed work could outlive the module. Reads `open` or `none`.
//!
//! Loading fails with `EINVAL` if a site of the module's own keys does not follow its key's
//! initial value, and with the error if `MOD_RO` cannot be enabled while the init runs.

use core::fmt;
use kernel::{
    bindings,
    debugfs::Scope,
    error::to_result,
    jump_label::{
        StaticKeyDeferredFalse,
        StaticKeyFalse,
        StaticKeyTrue,
        Transaction, //
    },
    new_mutex,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Mutex, //
    },
    uaccess::UserSliceReader,
};

module! {
    type: TextPokeModRs,
    name: "text_poke_mod_rs",
    authors: ["The jump_label_rs authors"],
    description: "Rust static keys and sites in a module",
    license: "GPL",
}

/// A key of this module, disabled until written to.
static MOD_FALSE: StaticKeyFalse = StaticKeyFalse::new();

/// A key of this module, enabled until written to.
static MOD_TRUE: StaticKeyTrue = StaticKeyTrue::new();

/// A rate-limited key of this module: it cannot be given a limit.
static MOD_DEFERRED: StaticKeyDeferredFalse = StaticKeyDeferredFalse::new();

kernel::define_static_key_ro!(
    /// A key of this module that only its init changes: it enables it.
    MOD_RO: false
);

extern "C" {
    // Keys of the kernel image and the test's helpers, in
    // arch/x86/kernel/text_poke_batch/tests/text_poke_stress.c.
    static mut text_poke_batch_mod_key: bindings::static_key_false;
    static mut text_poke_batch_span_key: bindings::static_key_false;
    fn text_poke_span_image_site() -> bool;
    fn text_poke_span_corrupt(module: *mut core::ffi::c_void) -> i32;
    fn text_poke_span_corrupted() -> i32;
    fn text_poke_span_repair();
    static mut text_poke_batch_mod_go: bool;
    static mut text_poke_batch_ro_race: bool;
    fn text_poke_ro_race_start(f: extern "C" fn() -> i32);
    fn text_poke_ro_race_wait() -> i32;
}

/// Sites on each key, one function each. A site returns whether it took its key's enabled
/// direction; the unlikely and likely forms alternate.
macro_rules! sites {
    ($name:ident, $key:path, $($n:literal)*) => {
        static $name: [fn() -> bool; 16] = [$({
            #[inline(never)]
            fn site() -> bool {
                // Keep each function's body distinct, so that none is merged with another.
                core::hint::black_box($n);
                if $n % 2 == 0 {
                    kernel::static_branch_unlikely!($key)
                } else {
                    kernel::static_branch_likely!($key)
                }
            }
            site
        }),*];
    };
}

sites!(FALSE_SITES, MOD_FALSE, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
sites!(TRUE_SITES, MOD_TRUE, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
sites!(C_SITES, text_poke_batch_mod_key, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
sites!(RO_SITES, MOD_RO, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
sites!(SPAN_SITES, text_poke_batch_span_key, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);

/// How many of `sites` did not take the direction `enabled` asks for.
fn wrong_of(sites: &[fn() -> bool], enabled: bool) -> usize {
    sites.iter().filter(|site| site() != enabled).count()
}

/// The sites of the module's own keys that are wrong.
fn own_wrong() -> usize {
    wrong_of(&FALSE_SITES, MOD_FALSE.is_enabled())
        + wrong_of(&TRUE_SITES, MOD_TRUE.is_enabled())
        + wrong_of(&RO_SITES, MOD_RO.is_enabled())
}

/// The C key, as a Rust key.
fn c_key() -> &'static StaticKeyFalse {
    // SAFETY: `text_poke_batch_mod_key` is a `struct static_key_false` of the kernel image, never
    // freed, not read-only.
    unsafe { StaticKeyFalse::from_c(&raw mut text_poke_batch_mod_key) }
}

/// The key with sites in the kernel image and here, as a Rust key.
fn span_key() -> &'static StaticKeyFalse {
    // SAFETY: `text_poke_batch_span_key` is a `struct static_key_false` of the kernel image, never
    // freed, not read-only.
    unsafe { StaticKeyFalse::from_c(&raw mut text_poke_batch_span_key) }
}

/// The debugfs directory's data: this module, whose site `span` corrupts, and the transaction
/// `txn` keeps open.
#[pin_data]
struct Control {
    module: &'static ThisModule,
    #[pin]
    txn: Mutex<Option<Transaction>>,
}

fn show_txn(control: &Control, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let open = control.txn.lock().is_some();
    writeln!(f, "{}", if open { "open" } else { "none" })
}

/// Reads a command of up to 16 bytes, without the spaces and newline around it.
fn command<'a>(reader: &mut UserSliceReader, buf: &'a mut [u8; 16]) -> Result<&'a str> {
    let n = reader.len();
    if n == 0 || n > buf.len() {
        return Err(EINVAL);
    }
    reader.read_slice(&mut buf[..n])?;
    Ok(core::str::from_utf8(&buf[..n]).map_err(|_| EINVAL)?.trim())
}

fn write_txn(control: &Control, reader: &mut UserSliceReader) -> Result {
    match command(reader, &mut [0u8; 16])? {
        "open" => {
            let mut txn = Transaction::new();
            txn.enable(&MOD_FALSE)?;
            let mut held = control.txn.lock();
            if held.is_some() {
                return Err(EBUSY);
            }
            *held = Some(txn);
            Ok(())
        }
        "commit" => {
            let txn = control.txn.lock().take().ok_or(EINVAL)?;
            txn.commit()
        }
        "drop" => {
            drop(control.txn.lock().take().ok_or(EINVAL)?);
            Ok(())
        }
        "rate_limit" => MOD_DEFERRED.rate_limit(100),
        _ => Err(EINVAL),
    }
}

/// Parses `0` or `1`, with or without a newline.
fn parse(reader: &mut UserSliceReader) -> Result<bool> {
    let mut buf = [0u8; 2];
    let n = reader.len();
    if n == 0 || n > buf.len() {
        return Err(EINVAL);
    }
    reader.read_slice(&mut buf[..n])?;
    match &buf[..n] {
        b"0" | b"0\n" => Ok(false),
        b"1" | b"1\n" => Ok(true),
        _ => Err(EINVAL),
    }
}

/// The `show` and `write` functions of a key's file: its value, `0` or `1`, read and written.
macro_rules! key_file {
    ($show:ident, $write:ident, $key:path) => {
        fn $show(_: &Control, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            writeln!(f, "{}", u8::from($key.is_enabled()))
        }

        fn $write(_: &Control, reader: &mut UserSliceReader) -> Result {
            if parse(reader)? {
                $key.enable()
            } else {
                $key.disable()
            }
        }
    };
}

key_file!(show_false, write_false, MOD_FALSE);
key_file!(show_true, write_true, MOD_TRUE);
key_file!(show_ro, write_ro, MOD_RO);

/// A key's name, its value, and its sites.
type KeySites = (&'static str, bool, &'static [fn() -> bool]);

fn show_span(_: &Control, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let key = span_key();
    let enabled = key.is_enabled();
    // SAFETY: A function of the kernel image that runs a site.
    let image = usize::from(unsafe { text_poke_span_image_site() } != enabled);
    let module = wrong_of(&SPAN_SITES, enabled);
    // SAFETY: Only reads the corrupted site.
    let corrupted = unsafe { text_poke_span_corrupted() };
    writeln!(
        f,
        "count {} image {image} module {module} corrupted {corrupted}",
        key.count()
    )
}

fn write_span(control: &Control, reader: &mut UserSliceReader) -> Result {
    let mut buf = [0u8; 16];
    let cmd = command(reader, &mut buf)?;
    let key = span_key();
    let raw = key.as_raw();
    match cmd {
        "corrupt module" => {
            let module = control.module.as_ptr().cast();
            // SAFETY: This module is live while its debugfs file is written.
            to_result(unsafe { text_poke_span_corrupt(module) })
        }
        // SAFETY: NULL names the kernel image.
        "corrupt image" => to_result(unsafe { text_poke_span_corrupt(core::ptr::null_mut()) }),
        "repair" => {
            // SAFETY: Puts back what a corrupted site held, if one is.
            unsafe { text_poke_span_repair() };
            Ok(())
        }
        "enable" => key.enable(),
        "disable" => key.disable(),
        "c_enable" => {
            // SAFETY: A valid key; a debugfs write may sleep.
            unsafe { bindings::static_key_enable(raw) };
            Ok(())
        }
        "c_disable" => {
            // SAFETY: `raw` is the `struct static_key` of `text_poke_batch_span_key`, a key of the
            // kernel image, initialised, never freed and writable (not `_RO`); `jump_label_init()`
            // ran before any module could load. `static_key_disable()` may sleep and takes
            // `cpus_read_lock()`, `jump_label_mutex` and `text_mutex`: a debugfs write runs in task
            // context and holds none of them.
            unsafe { bindings::static_key_disable(raw) };
            Ok(())
        }
        // SAFETY: As for the `static_key_disable()` above: `raw` is a valid, writable key of the
        // kernel image, and this task may sleep and holds none of the locks `static_key_slow_inc()`
        // takes. A count at `INT_MAX` is refused, not overflowed.
        "c_inc" => match unsafe { bindings::static_key_slow_inc(raw) } {
            true => Ok(()),
            false => Err(EINVAL),
        },
        "c_dec" => {
            // SAFETY: As for the `static_key_disable()` above: `raw` is a valid, writable key of
            // the kernel image, and this task may sleep and holds none of the locks
            // `static_key_slow_dec()` takes. A decrement with no reference to drop is caught by its
            // underflow warning and changes nothing.
            unsafe { bindings::static_key_slow_dec(raw) };
            Ok(())
        }
        _ => Err(EINVAL),
    }
}

fn show_state(_: &Control, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let keys: [KeySites; 4] = [
        ("false_key", MOD_FALSE.is_enabled(), &FALSE_SITES),
        ("true_key", MOD_TRUE.is_enabled(), &TRUE_SITES),
        ("ro_key", MOD_RO.is_enabled(), &RO_SITES),
        ("c_key", c_key().is_enabled(), &C_SITES),
    ];
    for (name, enabled, sites) in keys {
        let wrong = wrong_of(sites, enabled);
        writeln!(f, "{name} {} wrong {wrong}", u8::from(enabled))?;
    }
    // SAFETY: Only waits for the race's work item, if any, and reads its result.
    let race = unsafe { text_poke_ro_race_wait() };
    writeln!(f, "ro_race {race}")
}

/// The read-only key race's change, on a work item: `MOD_RO` disabled, its result as an errno.
extern "C" fn ro_race_disable() -> i32 {
    MOD_RO.disable().map_or_else(|e| e.to_errno(), |()| 0)
}

/// Whether a flag of the kernel image (`text_poke_stress.c`) is set: read with a marked load, as
/// every other access to it is marked (`READ_ONCE()`, `WRITE_ONCE()`, debugfs's bool file).
fn flag(flag: *mut bool) -> bool {
    // SAFETY: `flag` is a `bool` of the kernel image, aligned and valid as long as it runs.
    unsafe { Atomic::from_ptr(flag) }.load(Relaxed)
}

/// The read-only key race (`scripts/guest-test/rokey.sh`), when armed: once the test holds
/// `jump_label_mutex` (`text_poke_batch_mod_go`), a work item starts to disable `MOD_RO` and waits
/// for the mutex, and the init returns meanwhile. The module goes live, and its
/// `.data..ro_after_init` read-only, before the work item gets the mutex or after it: either
/// way the change must be refused with `EPERM`, since it is made after the init returned.
fn ro_race() {
    // The test holds the mutex within a second or so; give up after ten.
    for _ in 0..500 {
        if flag(&raw mut text_poke_batch_mod_go) {
            break;
        }
        kernel::time::delay::fsleep(kernel::time::Delta::from_millis(20));
    }
    // SAFETY: `ro_race_disable` is a function of this module, which waits for the work item
    // before it goes away (`TextPokeModRs::drop()`).
    unsafe { text_poke_ro_race_start(ro_race_disable) };
    // Long enough for the work item to wait for the mutex.
    kernel::time::delay::fsleep(kernel::time::Delta::from_millis(200));
}

struct TextPokeModRs {
    _debugfs: Pin<KBox<Scope<Control>>>,
}

impl Drop for TextPokeModRs {
    fn drop(&mut self) {
        // SAFETY: Only waits for the race's work item, if any, which calls into this module.
        unsafe { text_poke_ro_race_wait() };
    }
}

impl kernel::Module for TextPokeModRs {
    fn init(module: &'static ThisModule) -> Result<Self> {
        let wrong = own_wrong();
        if wrong != 0 {
            pr_err!("{wrong} sites do not follow their key's initial value\n");
            return Err(EINVAL);
        }
        // Read-only after init: it may change now, while the init runs.
        MOD_RO.enable()?;
        let wrong = wrong_of(&RO_SITES, true);
        if wrong != 0 {
            pr_err!("{wrong} sites of the read-only key do not follow it, enabled\n");
            return Err(EINVAL);
        }
        let debugfs = KBox::pin_init(
            Scope::dir(
                pin_init!(Control {
                    module,
                    txn <- new_mutex!(None),
                }),
                c"text_poke_mod_rs",
                |control, dir| {
                    dir.read_write_callback_file(c"false_key", control, &show_false, &write_false);
                    dir.read_write_callback_file(c"true_key", control, &show_true, &write_true);
                    dir.read_write_callback_file(c"ro_key", control, &show_ro, &write_ro);
                    dir.read_callback_file(c"state", control, &show_state);
                    dir.read_write_callback_file(c"span", control, &show_span, &write_span);
                    dir.read_write_callback_file(c"txn", control, &show_txn, &write_txn);
                },
            ),
            GFP_KERNEL,
        )?;
        if flag(&raw mut text_poke_batch_ro_race) {
            ro_race();
        }
        Ok(Self { _debugfs: debugfs })
    }
}

// SPDX-License-Identifier: GPL-2.0

// Static-key sites for the KUnit suite (kunit.rs) and the benchmark (text_poke_bench.rs), two
// crates that both `include!()` this file: one way to make a key's sites and to run them.

/// Defines `$site::<A, B>()`, a site of `$key` for every pair of constants it is instantiated
/// with, each in a function of its own: returns `A * 32 + B + 1` when the site branches (the
/// key is enabled) and 0 when it falls through. Each instance returns its own constant, or
/// identical functions would be merged into one. Attributes before `$site` go to the functions.
macro_rules! sites_of {
    ($(#[$attr:meta])* $site:ident, $key:ident) => {
        $(#[$attr])*
        #[inline(never)]
        fn $site<const A: u32, const B: u32>() -> u32 {
            if kernel::static_branch_unlikely!($key) {
                A * 32 + B + 1
            } else {
                0
            }
        }
    };
}

/// Runs the sites `$f::<$a, $b>` for each `$b`; evaluates to how many branched.
macro_rules! run {
    ($f:ident, $a:literal; $($b:literal)*) => {
        $( u32::from($f::<$a, $b>() != 0) + )* 0
    };
}

/// Runs row `$a` of `$f`'s sites, 32 of them; evaluates to how many branched.
macro_rules! row {
    ($f:ident, $a:literal) => {
        run!($f, $a; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28
             29 30 31)
    };
}

/// Runs rows `$a...` of `$f`'s sites; evaluates to how many branched.
macro_rules! rows {
    ($f:ident; $($a:literal)*) => {
        $( row!($f, $a) + )* 0
    };
}

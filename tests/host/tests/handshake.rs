// SPDX-License-Identifier: GPL-2.0

//! Exhaustive interleaving check of the handshake between the patcher and the INT3 handler.
//!
//! The patcher publishes the vector by setting every CPU's reference count to one before it
//! writes any INT3, and retires it only after the last sync, dropping its references and
//! waiting for handlers still inside. A handler takes a reference with inc-not-zero before it
//! reads the vector and drops it after. A sync is an IPI round: it completes once every CPU has
//! taken the IPI, which a CPU inside the INT3 handler (interrupts off) does only after leaving.
//!
//! Every interleaving of the patcher with CPUs executing the site is explored (sequentially
//! consistent: the barriers of the real code provide that order). The protocol must never let a
//! CPU hit an INT3 it cannot resolve, nor read a retired vector. Two broken variants show the
//! check can fail.

use std::collections::HashSet;

const CPUS: usize = 3;
const RUNS: u8 = 2;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// The protocol as implemented.
    Correct,
    /// Counts published after the INT3 is written.
    LatePublish,
    /// No sync after the first bytes are restored.
    NoFinalSync,
}

/// Patcher steps.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum P {
    Publish,
    WriteInt3,
    Sync(u8),
    WriteTail,
    WriteFirst,
    Drop(u8),
    Wait(u8),
    Retire,
    Done,
}

/// A CPU executing the site.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum C {
    /// About to execute the site.
    Run,
    /// Trapped on an INT3, about to take a reference.
    Trapped,
    /// Holds a reference, about to look the site up.
    Lookup,
    /// Looked up, about to drop the reference.
    Put,
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct State {
    p: P,
    /// Index of the patcher's current step in its program.
    pc: u8,
    int3: bool,
    vec_live: bool,
    refs: [i32; CPUS],
    cpu: [C; CPUS],
    runs: [u8; CPUS],
    /// IPI pending per CPU for the current sync.
    ipi: [bool; CPUS],
    /// The current sync's IPIs have been sent.
    sync_sent: bool,
}

fn program(v: Variant) -> Vec<P> {
    let mut p = match v {
        Variant::LatePublish => vec![P::WriteInt3, P::Publish],
        _ => vec![P::Publish, P::WriteInt3],
    };
    p.extend([P::Sync(0), P::WriteTail, P::Sync(1), P::WriteFirst]);
    if v != Variant::NoFinalSync {
        p.push(P::Sync(2));
    }
    for c in 0..CPUS as u8 {
        p.push(P::Drop(c));
        p.push(P::Wait(c));
    }
    p.push(P::Retire);
    p.push(P::Done);
    p
}

/// Explores every interleaving; returns the first violation found.
fn check(v: Variant) -> Result<usize, String> {
    let prog = program(v);
    let start = State {
        p: prog[0],
        pc: 0,
        int3: false,
        vec_live: false,
        refs: [0; CPUS],
        cpu: [C::Run; CPUS],
        runs: [0; CPUS],
        ipi: [false; CPUS],
        sync_sent: false,
    };
    let mut seen = HashSet::new();
    let mut stack = vec![start];
    while let Some(s) = stack.pop() {
        if !seen.insert(s.clone()) {
            continue;
        }
        let mut next = Vec::new();

        // The patcher's step, if enabled.
        let advance = |mut n: State| {
            n.pc += 1;
            n.p = prog[n.pc as usize];
            n
        };
        match s.p {
            P::Publish => {
                let mut n = s.clone();
                n.vec_live = true;
                n.refs = [1; CPUS];
                next.push(advance(n));
            }
            P::WriteInt3 => {
                let mut n = s.clone();
                n.int3 = true;
                next.push(advance(n));
            }
            P::Sync(_) => {
                let mut n = s.clone();
                if !s.sync_sent {
                    n.ipi = [true; CPUS];
                    n.sync_sent = true;
                    next.push(n);
                } else if s.ipi.iter().all(|&p| !p) {
                    n.sync_sent = false;
                    next.push(advance(n));
                }
            }
            P::WriteTail => next.push(advance(s.clone())),
            P::WriteFirst => {
                let mut n = s.clone();
                n.int3 = false;
                next.push(advance(n));
            }
            P::Drop(c) => {
                let mut n = s.clone();
                n.refs[c as usize] -= 1;
                next.push(advance(n));
            }
            P::Wait(c) => {
                if s.refs[c as usize] == 0 {
                    next.push(advance(s.clone()));
                }
            }
            P::Retire => {
                let mut n = s.clone();
                n.vec_live = false;
                next.push(advance(n));
            }
            P::Done => {}
        }

        // Each CPU's step.
        for c in 0..CPUS {
            let mut n = s.clone();
            match s.cpu[c] {
                C::Run => {
                    // Take a pending IPI first if there is one: interrupts are on here.
                    if s.ipi[c] {
                        let mut m = s.clone();
                        m.ipi[c] = false;
                        next.push(m);
                    }
                    if s.runs[c] >= RUNS {
                        continue;
                    }
                    if s.int3 {
                        n.cpu[c] = C::Trapped;
                    } else {
                        n.runs[c] += 1;
                    }
                }
                C::Trapped => {
                    // raw_atomic_inc_not_zero(): failing means an INT3 nobody claims.
                    if s.refs[c] == 0 {
                        return Err(format!("CPU {c} hit an INT3 with no reference to take"));
                    }
                    n.refs[c] += 1;
                    n.cpu[c] = C::Lookup;
                }
                C::Lookup => {
                    if !s.vec_live {
                        return Err(format!("CPU {c} read a retired vector"));
                    }
                    n.cpu[c] = C::Put;
                }
                C::Put => {
                    n.refs[c] -= 1;
                    n.cpu[c] = C::Run;
                    n.runs[c] += 1;
                }
            }
            next.push(n);
        }
        stack.extend(next);
    }
    Ok(seen.len())
}

#[test]
fn handshake_holds_in_every_interleaving() {
    let states = check(Variant::Correct).expect("protocol violated");
    assert!(states > 1000, "explored only {states} states");
}

#[test]
fn publishing_late_is_caught() {
    assert!(check(Variant::LatePublish).is_err());
}

#[test]
fn skipping_the_final_sync_is_caught() {
    assert!(check(Variant::NoFinalSync).is_err());
}

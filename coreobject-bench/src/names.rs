//! The `names` workload: what naming costs coreobject at creation and at
//! free (coreobject alone; the other libraries have no object names).
//!
//! In a fresh heap, `N` objects are created and then freed by one full
//! collection, twice (the second round reuses the freed slots, under new
//! names); the figures are the **second round's**, the steady state of a
//! program that keeps naming and freeing objects: it pays for whatever the
//! first round left to clean up (coreobject drops the index entries of
//! freed names lazily). Three modes, each in its own heap:
//!
//! * **unnamed**: `heap.create`, or `spawn(..).outer(o)` for half of them;
//! * **named**: the same, with `.name(actor.with_number(k))`, where `actor`
//!   is the base `Actor` interned once (`Heap::intern`): no string work;
//! * **named from strings**: the same names given as strings,
//!   `.name(format!("Actor_{k}"))`, which formats, splits and looks up the
//!   base each time;
//! * **generated names**: `.unique_name(actor)`, the base with a number
//!   the heap generates (`Actor_2147483648`, …; Unreal's default naming):
//!   unique by construction, so not looked up at creation. The time
//!   includes putting the names in the index, which happens in batches of
//!   32 during the creation loop.
//!
//! Every other object has an outer, one of 1,000 rooted outers created
//! before the timing starts (so each outer holds about 500 names). All `N`
//! objects are unreachable, and one `Heap::collect` frees exactly them; its
//! time over `N` is the free cost per object. The allocator's fast bins are
//! consolidated before each measurement (`alloc::settle`).
//!
//! A last row is creation without names from **two threads** at once
//! through one `&Heap` (`N / 2` objects each, a fresh heap, the second
//! round), wall time over `N`: the path of per-thread creation caches.
//!
//! Reported: create and free ns/object for each, and the ratios named /
//! unnamed at create and at free (the target: at most 1.3x each), for
//! names the program gives and for generated ones.

use std::time::Instant;

use coreobject::{AnyObj, GcConfig, Heap, HeapConfig, Obj, Object, Spawn};

use crate::harness::{verify, Metric, Outcome, Peer, Run};

/// The workload's parameters.
#[derive(Clone, Debug)]
pub struct Params {
    /// Objects per mode.
    pub objects: usize,
}

/// Outers the objects with an outer are spread over.
pub const OUTERS: usize = 1000;

#[derive(Object)]
struct Actor {
    v: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Unnamed,
    Named,
    Strings,
    Unique,
}

/// The metrics, in table order.
pub fn metrics() -> Vec<Metric> {
    vec![
        Metric::new("create_unnamed", "create, unnamed", "ns/object"),
        Metric::new("create_named", "create, named (Name)", "ns/object"),
        Metric::new(
            "create_named_strings",
            "create, named from strings",
            "ns/object",
        ),
        Metric::new("free_unnamed", "free, unnamed", "ns/object"),
        Metric::new("free_named", "free, named (Name)", "ns/object"),
        Metric::new(
            "free_named_strings",
            "free, named from strings",
            "ns/object",
        ),
        Metric::new("create_ratio", "create named / unnamed", "x"),
        Metric::new("free_ratio", "free named / unnamed", "x"),
        Metric::new("create_unique", "create, generated names", "ns/object"),
        Metric::new("free_unique", "free, generated names", "ns/object"),
        Metric::new(
            "create_unique_ratio",
            "create generated names / unnamed",
            "x",
        ),
        Metric::new("free_unique_ratio", "free generated names / unnamed", "x"),
        Metric::new(
            "create_unnamed_mut",
            "create, unnamed, through &mut Heap (create_mut)",
            "ns/object",
        ),
        Metric::new(
            "create_named_mut",
            "create, named (Name), through &mut Heap (spawn_mut)",
            "ns/object",
        ),
        Metric::new(
            "create_mut_ratio",
            "create named / unnamed, both through &mut Heap",
            "x",
        ),
        Metric::new(
            "create_mut_vs_shared",
            "create unnamed: &mut Heap / &Heap",
            "x",
        ),
        Metric::new(
            "create_unnamed_2threads",
            "create, unnamed, from 2 threads through &Heap (wall time / N)",
            "ns/object",
        ),
    ]
}

/// Unnamed creation from two threads at once through one `&Heap`, `n / 2`
/// objects each, in a fresh heap, twice (the second round reuses the freed
/// slots); the second round's wall time over `n`, ns/object.
fn two_threads(n: usize) -> Result<f64, String> {
    let mut heap = Heap::with_config(HeapConfig {
        max_objects: (n as u32).max(HeapConfig::DEFAULT.max_objects),
        gc: GcConfig::MANUAL,
        ..HeapConfig::DEFAULT
    })
    .map_err(|e| e.to_string())?;
    let mut per = 0.0;
    for _round in 0..2 {
        crate::alloc::settle();
        let shared: &Heap = &heap;
        let t = Instant::now();
        let made: Vec<Vec<Obj<Actor>>> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..2)
                .map(|w| {
                    s.spawn(move || {
                        (0..n / 2)
                            .map(|i| {
                                shared.create(Actor {
                                    v: (w * (n / 2) + i) as u64,
                                })
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        per = t.elapsed().as_secs_f64() * 1e9 / n as f64;
        let m = n / 2 * 2;
        let sum: u64 = made.iter().flatten().map(|&h| heap[h].v).sum();
        verify(&[
            (heap.len() == m, format!("{} objects of {m}", heap.len())),
            (sum == (m as u64) * (m as u64 - 1) / 2, format!("sum {sum}")),
        ])?;
        drop(made);
        let stats = heap.collect().map_err(|e| e.to_string())?;
        verify(&[(stats.freed == m, format!("freed {} of {m}", stats.freed))])?;
    }
    Ok(per)
}

/// One mode: (create ns/object, free ns/object) of each round, or what
/// went wrong.
fn measure(mode: Mode, owner: bool, n: usize) -> Result<[(f64, f64); 2], String> {
    let mut heap = Heap::with_config(HeapConfig {
        max_objects: ((n + OUTERS) as u32).max(HeapConfig::DEFAULT.max_objects),
        gc: GcConfig::MANUAL,
        ..HeapConfig::DEFAULT
    })
    .map_err(|e| e.to_string())?;
    let outers: Vec<AnyObj> = (0..OUTERS)
        .map(|i| {
            heap.spawn(Actor { v: i as u64 })
                .name(format!("Outer_{i}"))
                .root()
                .create()
                .map(|h| h.any())
        })
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let actor = heap.intern("Actor").map_err(|e| e.to_string())?;
    let mut out = [(0.0, 0.0); 2];
    for (round, figures) in out.iter_mut().enumerate() {
        *figures = measure_round(&mut heap, owner, mode, n, round * n, &outers, actor)?;
    }
    Ok(out)
}

/// The name of the `k`-th object a mode names: its number is `k`, or for
/// generated names the `k`-th from 2^31 (the outers' base is another).
fn name_of(mode: Mode, k: usize) -> String {
    match mode {
        Mode::Unique => format!("Actor_{}", (1usize << 31) + k),
        _ => format!("Actor_{k}"),
    }
}

/// Gives a builder the outer and the name of object `k` of `mode`.
fn configure<H>(
    s: Spawn<'_, Actor, H>,
    mode: Mode,
    outer: Option<AnyObj>,
    k: usize,
    actor: coreobject::Name,
) -> Spawn<'_, Actor, H> {
    let s = match outer {
        Some(o) => s.outer(o),
        None => s,
    };
    match mode {
        Mode::Unnamed => s,
        Mode::Named => s.name(actor.with_number(k as u32)),
        Mode::Strings => s.name(format!("Actor_{k}")),
        Mode::Unique => s.unique_name(actor),
    }
}

/// One round: names `Actor_{first}` …; (create, free) ns/object. `owner`:
/// create through `&mut Heap` (`create_mut`, `spawn_mut`).
fn measure_round(
    heap: &mut Heap,
    owner: bool,
    mode: Mode,
    n: usize,
    first: usize,
    outers: &[AnyObj],
    actor: coreobject::Name,
) -> Result<(f64, f64), String> {
    let mut hs: Vec<Obj<Actor>> = Vec::with_capacity(n);
    crate::alloc::settle();

    let t = Instant::now();
    for i in 0..n {
        let value = Actor { v: i as u64 };
        let outer = (i % 2 == 0).then(|| outers[(i / 2) % OUTERS]);
        let h = match (mode == Mode::Unnamed && i % 2 == 1, owner) {
            (true, false) => heap.create(value),
            (true, true) => heap.create_mut(value),
            (false, false) => configure(heap.spawn(value), mode, outer, first + i, actor)
                .create()
                .map_err(|e| e.to_string())?,
            (false, true) => configure(heap.spawn_mut(value), mode, outer, first + i, actor)
                .create()
                .map_err(|e| e.to_string())?,
        };
        hs.push(h);
    }
    let create = t.elapsed();

    // Spot checks: names resolve, in and out of outers.
    let mut checks = vec![(heap.len() == n + OUTERS, format!("{} objects", heap.len()))];
    if mode != Mode::Unnamed {
        for i in [0, 1, n / 2, n - 1] {
            let outer = (i % 2 == 0).then(|| outers[(i / 2) % OUTERS]);
            let name = name_of(mode, first + i);
            let found = heap.find(outer, &name);
            checks.push((
                found == Some(hs[i].any()),
                format!("{name} found as {found:?}"),
            ));
            let named = heap.name_of(hs[i]);
            checks.push((
                named.as_deref() == Some(name.as_str()),
                format!("{name} is named {named:?}"),
            ));
        }
    }
    let sum: u64 = hs.iter().map(|&h| heap[h].v).sum();
    checks.push((sum == (n as u64) * (n as u64 - 1) / 2, format!("sum {sum}")));
    drop(hs);
    crate::alloc::settle();

    let t = Instant::now();
    let stats = heap.collect().map_err(|e| e.to_string())?;
    let free = t.elapsed();
    checks.push((stats.freed == n, format!("freed {} of {n}", stats.freed)));
    checks.push((heap.len() == OUTERS, format!("{} left", heap.len())));
    if mode != Mode::Unnamed {
        checks.push((
            heap.find(Some(outers[0]), &name_of(mode, first)).is_none(),
            "a freed name is still found".into(),
        ));
    }
    verify(&checks)?;
    let per = |d: std::time::Duration| d.as_secs_f64() * 1e9 / n as f64;
    Ok((per(create), per(free)))
}

/// Runs one repetition for `peer` (coreobject only).
pub fn run(peer: Peer, p: &Params) -> Outcome {
    if peer != Peer::CoreObject {
        return Outcome::Na("no object names");
    }
    let n = p.objects;
    let all = [
        (Mode::Unnamed, false),
        (Mode::Named, false),
        (Mode::Strings, false),
        (Mode::Unique, false),
        (Mode::Unnamed, true),
        (Mode::Named, true),
    ]
    .map(|(m, owner)| measure(m, owner, n));
    let threads = two_threads(n);
    let [[u1, unnamed], [n1, named], [s1, strings], [g1, unique], [_, unnamed_mut], [_, named_mut]] =
        match (all, &threads) {
            ([Ok(a), Ok(b), Ok(c), Ok(d), Ok(e), Ok(f)], Ok(_)) => [a, b, c, d, e, f],
            (all, threads) => {
                let why: Vec<String> = all
                    .into_iter()
                    .filter_map(Result::err)
                    .chain(threads.clone().err())
                    .collect();
                return Outcome::Ran(Run {
                    values: vec![f64::NAN; metrics().len()],
                    extra: Vec::new(),
                    check: Err(why.join("; ")),
                });
            }
        };
    Outcome::Ran(Run {
        values: vec![
            unnamed.0,
            named.0,
            strings.0,
            unnamed.1,
            named.1,
            strings.1,
            named.0 / unnamed.0,
            named.1 / unnamed.1,
            unique.0,
            unique.1,
            unique.0 / unnamed.0,
            unique.1 / unnamed.1,
            unnamed_mut.0,
            named_mut.0,
            named_mut.0 / unnamed_mut.0,
            unnamed_mut.0 / unnamed.0,
            threads.unwrap_or(f64::NAN),
        ],
        extra: vec![
            ("first_round_create_unnamed", u1.0),
            ("first_round_create_named", n1.0),
            ("first_round_create_named_strings", s1.0),
            ("first_round_free_unnamed", u1.1),
            ("first_round_free_named", n1.1),
            ("first_round_free_named_strings", s1.1),
            ("first_round_create_unique", g1.0),
            ("first_round_free_unique", g1.1),
        ],
        check: Ok(()),
    })
}

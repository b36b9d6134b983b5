//! The `weak` workload: `M` random weak-handle resolves over `N` objects of
//! which a random 10% have been freed.
//!
//! Every object holds one `u64` (its index). Setup — creating the objects,
//! taking a weak handle to each, freeing the chosen 10% (by a collection, a
//! removal or a drop, whichever the peer uses) — is not timed. The timed loop
//! walks a precomputed list of random indices, resolves each weak handle
//! and, on a hit, reads the value. Verification: the hit count and the sum of
//! the values read must equal the numbers the plan predicts.
//!
//! rust-gc, dumpster and `Box` have no weak references: n/a.

use std::hint::black_box;
use std::time::{Duration, Instant};

use gc_arena::{Arena, Collect, Gc as GaGc, GcWeak, Rootable};

use crate::harness::{verify, Metric, Outcome, Peer, Run};

/// The `weak` parameters.
#[derive(Clone, Debug)]
pub struct Params {
    /// Objects.
    pub objects: usize,
    /// Resolves.
    pub lookups: usize,
    /// Random seed.
    pub seed: u64,
}

/// Fraction of objects freed before the lookups.
pub const FREED_FRAC: f64 = 0.10;

/// Which objects are freed, the lookup sequence and the expected results.
pub struct Plan {
    /// Objects.
    pub n: usize,
    /// Whether each object is freed.
    pub freed: Vec<bool>,
    /// Object indices to resolve, in order.
    pub lookups: Vec<u32>,
    /// Expected hits.
    pub hits: u64,
    /// Expected sum of the values read.
    pub sum: u64,
    /// Expected hits of the chained loop.
    pub chain_hits: u64,
    /// Expected sum of the chained loop.
    pub chain_sum: u64,
}

/// The chained loop's next object: the drawn index moved on by the value
/// the last lookup read (0 on a miss), so each address waits for the
/// previous lookup's result.
#[inline(always)]
fn chain_next(n: usize, drawn: u32, last: usize) -> usize {
    let j = drawn as usize + last;
    if j >= n {
        j - n
    } else {
        j
    }
}

impl Plan {
    /// Draws the plan.
    pub fn new(p: &Params) -> Result<Plan, String> {
        if p.objects == 0 || p.objects > u32::MAX as usize / 2 {
            return Err("--objects must be in 1..2^31".into());
        }
        let n = p.objects;
        let mut rng = fastrand::Rng::with_seed(p.seed);
        let k = ((n as f64) * FREED_FRAC).round() as usize;
        let mut order: Vec<u32> = (0..n as u32).collect();
        for i in 0..k {
            let j = rng.usize(i..n);
            order.swap(i, j);
        }
        let mut freed = vec![false; n];
        for &i in &order[..k] {
            freed[i as usize] = true;
        }
        let lookups: Vec<u32> = (0..p.lookups).map(|_| rng.u32(0..n as u32)).collect();
        let (mut hits, mut sum) = (0, 0);
        for &i in &lookups {
            if !freed[i as usize] {
                hits += 1;
                sum += i as u64;
            }
        }
        let (mut chain_hits, mut chain_sum, mut last) = (0, 0, 0usize);
        for &i in &lookups {
            let j = chain_next(n, i, last);
            last = 0;
            if !freed[j] {
                chain_hits += 1;
                chain_sum += j as u64;
                last = j;
            }
        }
        Ok(Plan {
            n,
            freed,
            lookups,
            hits,
            sum,
            chain_hits,
            chain_sum,
        })
    }
}

/// The metrics: three loops over the same lookups.
pub fn metrics() -> Vec<Metric> {
    vec![
        Metric::new(
            "ns_per_resolve",
            "throughput: independent lookups, one at a time",
            "ns/lookup",
        ),
        Metric::new(
            "ns_per_chained",
            "latency: each lookup's index waits for the last one's value",
            "ns/lookup",
        ),
        Metric::new(
            "ns_per_listed",
            "a list of handles: coreobject Heap::get_many, peers their plain loop",
            "ns/lookup",
        ),
    ]
}

/// What one peer measured: (time, hits, sum) for each loop.
struct Loops {
    plain: (Duration, u64, u64),
    chained: (Duration, u64, u64),
    listed: (Duration, u64, u64),
}

/// The three loops for a peer whose lookups are `resolve(i)` (the listed
/// loop is the plain one: the peer has no batch lookup).
#[inline(always)]
fn loops(plan: &Plan, mut resolve: impl FnMut(usize) -> Option<u64>) -> Loops {
    Loops {
        plain: lookups(plan, &mut resolve),
        chained: chained(plan, &mut resolve),
        listed: lookups(plan, &mut resolve),
    }
}

/// Runs one repetition for `peer`.
pub fn run(peer: Peer, plan: &Plan) -> Outcome {
    let l = match peer {
        Peer::CoreObject => coreobject(plan),
        Peer::GcArena => gc_arena(plan),
        Peer::RustCc => rust_cc(plan),
        Peer::SlotMap => slotmap(plan),
        Peer::Rc => rc(plan),
        Peer::Ideal => ideal(plan),
        Peer::RustGc | Peer::Dumpster => return Outcome::Na("no weak references"),
        Peer::Box => return Outcome::Na("no sharing, so no weak references"),
    };
    let per = |d: Duration| d.as_nanos() as f64 / plan.lookups.len().max(1) as f64;
    let check = |name: &str, (_, hits, sum): (Duration, u64, u64), eh: u64, es: u64| {
        (
            hits == eh && sum == es,
            format!("{name}: {hits} hits, sum {sum}; expected {eh}, {es}"),
        )
    };
    Outcome::Ran(Run {
        values: vec![per(l.plain.0), per(l.chained.0), per(l.listed.0)],
        extra: Vec::new(),
        check: verify(&[
            check("plain", l.plain, plan.hits, plan.sum),
            check("chained", l.chained, plan.chain_hits, plan.chain_sum),
            check("listed", l.listed, plan.hits, plan.sum),
        ]),
    })
}

/// The throughput loop, shared by every peer: `resolve(i)` gives the value
/// of object `i` if its weak handle still resolves.
#[inline(always)]
fn lookups(plan: &Plan, mut resolve: impl FnMut(usize) -> Option<u64>) -> (Duration, u64, u64) {
    let t = Instant::now();
    let (mut hits, mut sum) = (0u64, 0u64);
    for &i in &plan.lookups {
        if let Some(v) = resolve(black_box(i) as usize) {
            hits += 1;
            sum += v;
        }
    }
    (t.elapsed(), black_box(hits), black_box(sum))
}

/// The latency loop: the same draws, each moved on by the value the last
/// lookup read, so lookups cannot overlap.
#[inline(always)]
fn chained(plan: &Plan, mut resolve: impl FnMut(usize) -> Option<u64>) -> (Duration, u64, u64) {
    let t = Instant::now();
    let (mut hits, mut sum, mut last) = (0u64, 0u64, 0usize);
    for &i in &plan.lookups {
        last = match resolve(chain_next(plan.n, black_box(i), last)) {
            Some(v) => {
                hits += 1;
                sum += v;
                v as usize
            }
            None => 0,
        };
    }
    (t.elapsed(), black_box(hits), black_box(sum))
}

/// The listed loop for coreobject: the handles of the draws, resolved by
/// `Heap::get_many`.
fn listed_coreobject(
    plan: &Plan,
    heap: &coreobject::Heap,
    weak: &[coreobject::Weak<CoVal>],
) -> (Duration, u64, u64) {
    let t = Instant::now();
    let (mut hits, mut sum) = (0u64, 0u64);
    let handles = plan.lookups.iter().map(|&i| weak[black_box(i) as usize]);
    for v in heap.get_many(handles).flatten() {
        hits += 1;
        sum += v.v;
    }
    (t.elapsed(), black_box(hits), black_box(sum))
}

// ----- coreobject --------------------------------------------------------

/// A `weak` object in coreobject.
#[derive(coreobject::Object)]
struct CoVal {
    v: u64,
}

/// Keeps the surviving 90% alive.
#[derive(coreobject::Object)]
struct CoKeep {
    keep: Vec<coreobject::Obj<CoVal>>,
}

fn coreobject(plan: &Plan) -> Loops {
    use coreobject::{GcConfig, Heap, HeapConfig, Weak};
    let config = HeapConfig {
        max_objects: (plan.n as u32 + 1).max(HeapConfig::DEFAULT.max_objects),
        gc: GcConfig::MANUAL,
        ..HeapConfig::DEFAULT
    };
    let mut heap = Heap::with_config(config).expect("heap config");
    let mut weak: Vec<Weak<CoVal>> = Vec::with_capacity(plan.n);
    let mut keep = Vec::with_capacity(plan.n);
    for i in 0..plan.n {
        let h = heap.create(CoVal { v: i as u64 });
        weak.push(h.downgrade());
        if !plan.freed[i] {
            keep.push(h);
        }
    }
    let holder = heap.create(CoKeep { keep });
    heap.add_to_root(holder).expect("root");
    heap.collect().expect("collect");
    let get = |i: usize| heap.get(weak[i]).map(|o| o.v);
    Loops {
        plain: lookups(plan, get),
        chained: chained(plan, get),
        listed: listed_coreobject(plan, &heap, &weak),
    }
}

// ----- gc-arena ----------------------------------------------------------

/// The arena's root: strong handles to the survivors, weak ones to all.
struct GaRoot<'gc> {
    keep: Vec<GaGc<'gc, u64>>,
    weak: Vec<GcWeak<'gc, u64>>,
}

// SAFETY: traces every pointer it holds.
unsafe impl<'gc> Collect<'gc> for GaRoot<'gc> {
    fn trace<T: gc_arena::collect::Trace<'gc>>(&self, cc: &mut T) {
        cc.trace(&self.keep);
        cc.trace(&self.weak);
    }
}

fn gc_arena(plan: &Plan) -> Loops {
    let mut arena = Arena::<Rootable![GaRoot<'_>]>::new(|_| GaRoot {
        keep: Vec::new(),
        weak: Vec::new(),
    });
    arena.mutate_root(|mc, root| {
        for i in 0..plan.n {
            let h = GaGc::new(mc, i as u64);
            root.weak.push(GaGc::downgrade(h));
            if !plan.freed[i] {
                root.keep.push(h);
            }
        }
    });
    arena.finish_cycle();
    arena.mutate(|mc, root| loops(plan, |i| root.weak[i].upgrade(mc).map(|g| *g)))
}

// ----- rust-cc -----------------------------------------------------------

fn rust_cc(plan: &Plan) -> Loops {
    use rust_cc::Cc;
    let mut keep: Vec<Option<Cc<u64>>> = Vec::with_capacity(plan.n);
    let mut weak = Vec::with_capacity(plan.n);
    for i in 0..plan.n {
        let h = Cc::new(i as u64);
        weak.push(h.downgrade());
        keep.push(Some(h));
    }
    for (k, &f) in keep.iter_mut().zip(&plan.freed) {
        if f {
            *k = None;
        }
    }
    rust_cc::collect_cycles();
    let out = loops(plan, |i| weak[i].upgrade().map(|c| *c));
    drop(weak);
    drop(keep);
    out
}

// ----- slotmap -----------------------------------------------------------

fn slotmap(plan: &Plan) -> Loops {
    use slotmap::{DefaultKey, SlotMap};
    let mut map: SlotMap<DefaultKey, u64> = SlotMap::new();
    let keys: Vec<DefaultKey> = (0..plan.n).map(|i| map.insert(i as u64)).collect();
    for (&k, &f) in keys.iter().zip(&plan.freed) {
        if f {
            map.remove(k);
        }
    }
    loops(plan, |i| map.get(keys[i]).copied())
}

// ----- Rc ----------------------------------------------------------------

fn rc(plan: &Plan) -> Loops {
    use std::rc::Rc;
    let mut keep: Vec<Option<Rc<u64>>> = (0..plan.n).map(|i| Some(Rc::new(i as u64))).collect();
    let weak: Vec<std::rc::Weak<u64>> = keep
        .iter()
        .map(|k| Rc::downgrade(k.as_ref().expect("all set")))
        .collect();
    for (k, &f) in keep.iter_mut().zip(&plan.freed) {
        if f {
            *k = None;
        }
    }
    let out = loops(plan, |i| weak[i].upgrade().map(|c| *c));
    drop(keep);
    out
}

// ----- ideal -------------------------------------------------------------

/// The floor: a generation per slot next to the value, a handle is (slot,
/// generation).
fn ideal(plan: &Plan) -> Loops {
    let mut slots: Vec<(u32, u64)> = (0..plan.n).map(|i| (1u32, i as u64)).collect();
    let handles: Vec<(u32, u32)> = (0..plan.n as u32).map(|i| (i, 1)).collect();
    for (s, &f) in slots.iter_mut().zip(&plan.freed) {
        if f {
            s.0 += 1;
        }
    }
    loops(plan, |i| {
        let (slot, gen) = handles[i];
        let s = &slots[slot as usize];
        (s.0 == gen).then_some(s.1)
    })
}

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
        Ok(Plan {
            n,
            freed,
            lookups,
            hits,
            sum,
        })
    }
}

/// The metric.
pub fn metrics() -> Vec<Metric> {
    vec![Metric::new("ns_per_resolve", "weak resolve", "ns/lookup")]
}

/// Runs one repetition for `peer`.
pub fn run(peer: Peer, plan: &Plan) -> Outcome {
    let (elapsed, hits, sum) = match peer {
        Peer::CoreObject => coreobject(plan),
        Peer::GcArena => gc_arena(plan),
        Peer::RustCc => rust_cc(plan),
        Peer::SlotMap => slotmap(plan),
        Peer::Rc => rc(plan),
        Peer::Ideal => ideal(plan),
        Peer::RustGc | Peer::Dumpster => return Outcome::Na("no weak references"),
        Peer::Box => return Outcome::Na("no sharing, so no weak references"),
    };
    Outcome::Ran(Run {
        values: vec![elapsed.as_nanos() as f64 / plan.lookups.len().max(1) as f64],
        extra: Vec::new(),
        check: verify(&[
            (
                hits == plan.hits,
                format!("{hits} hits, expected {}", plan.hits),
            ),
            (sum == plan.sum, format!("sum {sum}, expected {}", plan.sum)),
        ]),
    })
}

/// The timed loop, shared by every peer: `resolve(i)` gives the value of
/// object `i` if its weak handle still resolves.
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

fn coreobject(plan: &Plan) -> (Duration, u64, u64) {
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
    lookups(plan, |i| heap.get(weak[i]).map(|o| o.v))
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

fn gc_arena(plan: &Plan) -> (Duration, u64, u64) {
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
    arena.mutate(|mc, root| lookups(plan, |i| root.weak[i].upgrade(mc).map(|g| *g)))
}

// ----- rust-cc -----------------------------------------------------------

fn rust_cc(plan: &Plan) -> (Duration, u64, u64) {
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
    let out = lookups(plan, |i| weak[i].upgrade().map(|c| *c));
    drop(weak);
    drop(keep);
    out
}

// ----- slotmap -----------------------------------------------------------

fn slotmap(plan: &Plan) -> (Duration, u64, u64) {
    use slotmap::{DefaultKey, SlotMap};
    let mut map: SlotMap<DefaultKey, u64> = SlotMap::new();
    let keys: Vec<DefaultKey> = (0..plan.n).map(|i| map.insert(i as u64)).collect();
    for (&k, &f) in keys.iter().zip(&plan.freed) {
        if f {
            map.remove(k);
        }
    }
    lookups(plan, |i| map.get(keys[i]).copied())
}

// ----- Rc ----------------------------------------------------------------

fn rc(plan: &Plan) -> (Duration, u64, u64) {
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
    let out = lookups(plan, |i| weak[i].upgrade().map(|c| *c));
    drop(keep);
    out
}

// ----- ideal -------------------------------------------------------------

/// The floor: a generation per slot next to the value, a handle is (slot,
/// generation).
fn ideal(plan: &Plan) -> (Duration, u64, u64) {
    let mut slots: Vec<(u32, u64)> = (0..plan.n).map(|i| (1u32, i as u64)).collect();
    let handles: Vec<(u32, u32)> = (0..plan.n as u32).map(|i| (i, 1)).collect();
    for (s, &f) in slots.iter_mut().zip(&plan.freed) {
        if f {
            s.0 += 1;
        }
    }
    lookups(plan, |i| {
        let (slot, gen) = handles[i];
        let s = &slots[slot as usize];
        (s.0 == gen).then_some(s.1)
    })
}

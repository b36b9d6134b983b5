//! Micro-benchmarks: `create`, `resolve`, `iterate` and `root`.
//!
//! Every object holds one `u64`. Each is its own table:
//!
//! * **create**: create `N` objects, keeping a handle to each in a vector
//!   reserved beforehand (so every collector sees them as reachable);
//!   ns/object. rust-gc and rust-cc may run their automatic collections
//!   meanwhile; that is part of their cost.
//! * **resolve**: `M` strong-handle dereferences at random among the `N`
//!   objects, summing the values (coreobject checks the handle's serial and
//!   class each time: that is the price of handles that cannot dangle);
//!   ns/op.
//! * **iterate**: visit every live object through the library's own
//!   enumeration, summing the values; ns/object. Only coreobject
//!   (`iter_of`), slotmap (`values`) and ideal (a slice) can enumerate their
//!   objects.
//! * **root**: `M` times, make a random object a root and un-root it again:
//!   coreobject `add_to_root` + `remove_from_root`; gc-arena
//!   `DynamicRootSet::stash` + dropping the `DynamicRoot`; rust-gc, dumpster,
//!   rust-cc and `Rc` clone a handle and drop it (that is how those libraries
//!   add and remove a root or a strong reference); ideal sets and clears a
//!   flag byte. slotmap and `Box` have no such notion: n/a.
//!
//! Setup (creating the objects for resolve, iterate and root) is not timed.
//! Every table verifies its sum or count.

use std::hint::black_box;
use std::time::{Duration, Instant};

use gc_arena::{Arena, Collect, DynamicRootSet, Gc as GaGc, Rootable};

use crate::harness::{verify, Metric, Outcome, Peer, Run};

/// The micro-benchmark parameters.
#[derive(Clone, Debug)]
pub struct Params {
    /// Objects.
    pub objects: usize,
    /// Operations for resolve and root.
    pub ops: usize,
    /// Random seed.
    pub seed: u64,
}

/// One micro-benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bench {
    /// Object creation.
    Create,
    /// Strong handle dereference.
    Resolve,
    /// Enumerating every object.
    Iterate,
    /// Adding and removing a root.
    Root,
}

impl Bench {
    /// Every micro-benchmark, in report order.
    pub const ALL: [Bench; 4] = [Bench::Create, Bench::Resolve, Bench::Iterate, Bench::Root];

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Bench::Create => "micro/create",
            Bench::Resolve => "micro/resolve",
            Bench::Iterate => "micro/iterate",
            Bench::Root => "micro/root",
        }
    }

    /// What each peer does, for the note under the table.
    pub fn note(self) -> &'static str {
        match self {
            Bench::Create => "create N objects holding a u64, keeping every handle (rust-gc and rust-cc may collect meanwhile)",
            Bench::Resolve => "dereference a random strong handle and read its u64 (coreobject: Heap::get, which checks serial and class)",
            Bench::Iterate => "visit every object through the library's own enumeration (coreobject: iter_of)",
            Bench::Root => "coreobject add_to_root + remove_from_root; gc-arena DynamicRootSet::stash + drop; rust-gc/dumpster/rust-cc/Rc clone + drop a handle; ideal set + clear a flag byte",
        }
    }

    /// Its metric.
    pub fn metrics(self) -> Vec<Metric> {
        let (key, title, unit) = match self {
            Bench::Create => ("ns_per_create", "create", "ns/object"),
            Bench::Resolve => ("ns_per_resolve", "resolve", "ns/op"),
            Bench::Iterate => ("ns_per_object", "iterate", "ns/object"),
            Bench::Root => ("ns_per_root_pair", "add+remove root", "ns/op"),
        };
        vec![Metric::new(key, title, unit)]
    }
}

/// The random indices and expected sums.
pub struct Plan {
    /// Objects.
    pub n: usize,
    /// Random object indices (resolve, root).
    pub picks: Vec<u32>,
    /// Sum of the picked indices (each object's value is its index).
    pub picks_sum: u64,
    /// Sum of all values.
    pub all_sum: u64,
}

impl Plan {
    /// Draws the plan.
    pub fn new(p: &Params) -> Result<Plan, String> {
        if p.objects == 0 || p.objects > u32::MAX as usize / 2 {
            return Err("--objects must be in 1..2^31".into());
        }
        let mut rng = fastrand::Rng::with_seed(p.seed);
        let picks: Vec<u32> = (0..p.ops).map(|_| rng.u32(0..p.objects as u32)).collect();
        let n = p.objects as u64;
        Ok(Plan {
            n: p.objects,
            picks_sum: picks.iter().map(|&i| i as u64).sum(),
            picks,
            all_sum: n * (n - 1) / 2,
        })
    }
}

/// Runs one repetition of `bench` for `peer`.
pub fn run(bench: Bench, peer: Peer, plan: &Plan) -> Outcome {
    let r = match peer {
        Peer::CoreObject => coreobject(bench, plan),
        Peer::GcArena => gc_arena(bench, plan),
        Peer::RustGc => rust_gc(bench, plan),
        Peer::Dumpster => dumpster(bench, plan),
        Peer::RustCc => rust_cc(bench, plan),
        Peer::SlotMap => slotmap(bench, plan),
        Peer::Rc => rc(bench, plan),
        Peer::Box => boxed(bench, plan),
        Peer::Ideal => ideal(bench, plan),
    };
    let Some((elapsed, got)) = r else {
        return Outcome::Na(match bench {
            Bench::Iterate => "cannot enumerate its objects",
            _ => "no roots",
        });
    };
    let (ops, want) = match bench {
        Bench::Create => (plan.n, plan.n as u64),
        Bench::Iterate => (plan.n, plan.all_sum),
        Bench::Resolve | Bench::Root => (plan.picks.len(), plan.picks_sum),
    };
    Outcome::Ran(Run {
        values: vec![elapsed.as_nanos() as f64 / ops.max(1) as f64],
        extra: Vec::new(),
        check: verify(&[(got == want, format!("result {got}, expected {want}"))]),
    })
}

type Timed = Option<(Duration, u64)>;

/// Times `f`, which returns the value to verify.
#[inline(always)]
fn timed(f: impl FnOnce() -> u64) -> Timed {
    let t = Instant::now();
    let v = black_box(f());
    Some((t.elapsed(), v))
}

// ----- coreobject --------------------------------------------------------

/// A micro-benchmark object in coreobject.
#[derive(coreobject::Object)]
struct CoVal {
    v: u64,
}

fn coreobject(bench: Bench, plan: &Plan) -> Timed {
    use coreobject::{GcConfig, Heap, HeapConfig, Obj};
    let config = HeapConfig {
        max_objects: (plan.n as u32).max(HeapConfig::DEFAULT.max_objects),
        gc: GcConfig::MANUAL,
        ..HeapConfig::DEFAULT
    };
    let heap = Heap::with_config(config).expect("heap config");
    let mut hs: Vec<Obj<CoVal>> = Vec::with_capacity(plan.n);
    let mut create = || {
        for i in 0..plan.n {
            hs.push(heap.create(CoVal { v: i as u64 }));
        }
        hs.len() as u64
    };
    if bench == Bench::Create {
        return timed(create);
    }
    create();
    match bench {
        Bench::Resolve => timed(|| {
            plan.picks
                .iter()
                .map(|&i| heap.get(hs[i as usize]).map_or(0, |o| o.v))
                .sum()
        }),
        Bench::Iterate => timed(|| heap.iter_of::<CoVal>().map(|(_, o)| o.v).sum()),
        Bench::Root => timed(|| {
            let mut sum = 0;
            for &i in &plan.picks {
                let h = hs[i as usize];
                heap.add_to_root(h).expect("live");
                heap.remove_from_root(h).expect("live");
                sum += i as u64;
            }
            sum
        }),
        Bench::Create => unreachable!(),
    }
}

// ----- gc-arena ----------------------------------------------------------

/// The arena's root: every object, and a dynamic root set.
struct GaRoot<'gc> {
    items: Vec<GaGc<'gc, u64>>,
    set: DynamicRootSet<'gc>,
}

// SAFETY: traces everything it holds.
unsafe impl<'gc> Collect<'gc> for GaRoot<'gc> {
    fn trace<T: gc_arena::collect::Trace<'gc>>(&self, cc: &mut T) {
        cc.trace(&self.items);
        cc.trace(&self.set);
    }
}

fn gc_arena(bench: Bench, plan: &Plan) -> Timed {
    let mut arena = Arena::<Rootable![GaRoot<'_>]>::new(|mc| GaRoot {
        items: Vec::with_capacity(plan.n),
        set: DynamicRootSet::new(mc),
    });
    let mut create = || {
        arena.mutate_root(|mc, root| {
            for i in 0..plan.n {
                root.items.push(GaGc::new(mc, i as u64));
            }
            root.items.len() as u64
        })
    };
    if bench == Bench::Create {
        return timed(create);
    }
    create();
    match bench {
        Bench::Resolve => arena
            .mutate(|_, root| timed(|| plan.picks.iter().map(|&i| *root.items[i as usize]).sum())),
        Bench::Root => arena.mutate(|mc, root| {
            timed(|| {
                let mut sum = 0;
                for &i in &plan.picks {
                    let r = root.set.stash::<Rootable![u64]>(mc, root.items[i as usize]);
                    sum += *root.set.fetch(&r);
                    drop(r);
                }
                sum
            })
        }),
        Bench::Iterate => None,
        Bench::Create => unreachable!(),
    }
}

// ----- rust-gc, dumpster, rust-cc, Rc, Box -------------------------------

/// The shared shape of the handle-per-object peers: `new` makes a handle,
/// `get` reads it, `root` clones and drops it (None: no such notion).
fn handles<H>(
    bench: Bench,
    plan: &Plan,
    new: impl Fn(u64) -> H,
    get: impl Fn(&H) -> u64,
    root: Option<fn(&H) -> u64>,
) -> Timed {
    let mut hs: Vec<H> = Vec::with_capacity(plan.n);
    let mut create = || {
        for i in 0..plan.n {
            hs.push(new(i as u64));
        }
        hs.len() as u64
    };
    if bench == Bench::Create {
        let t = timed(create);
        drop(hs);
        return t;
    }
    create();
    let out = match bench {
        Bench::Resolve => timed(|| plan.picks.iter().map(|&i| get(&hs[i as usize])).sum()),
        Bench::Root => {
            let root = root?;
            timed(|| plan.picks.iter().map(|&i| root(&hs[i as usize])).sum())
        }
        Bench::Iterate => None,
        Bench::Create => unreachable!(),
    };
    drop(hs);
    out
}

/// The root operation of the handle-based peers: take a counted reference
/// (clone, which roots or pins the object) and let it go.
fn clone_and_read<H: Clone + std::ops::Deref<Target = u64>>(h: &H) -> u64 {
    let c = h.clone();
    let v = *c;
    drop(c);
    v
}

fn rust_gc(bench: Bench, plan: &Plan) -> Timed {
    handles(
        bench,
        plan,
        gc::Gc::new,
        |h| **h,
        Some(clone_and_read::<gc::Gc<u64>>),
    )
}

fn dumpster(bench: Bench, plan: &Plan) -> Timed {
    use dumpster::unsync::Gc;
    handles(
        bench,
        plan,
        Gc::new,
        |h| **h,
        Some(clone_and_read::<Gc<u64>>),
    )
}

fn rust_cc(bench: Bench, plan: &Plan) -> Timed {
    use rust_cc::Cc;
    handles(
        bench,
        plan,
        Cc::new,
        |h| **h,
        Some(clone_and_read::<Cc<u64>>),
    )
}

fn rc(bench: Bench, plan: &Plan) -> Timed {
    use std::rc::Rc;
    handles(
        bench,
        plan,
        Rc::new,
        |h| **h,
        Some(clone_and_read::<Rc<u64>>),
    )
}

fn boxed(bench: Bench, plan: &Plan) -> Timed {
    handles(bench, plan, Box::new, |h| **h, None)
}

// ----- slotmap -----------------------------------------------------------

fn slotmap(bench: Bench, plan: &Plan) -> Timed {
    use slotmap::{DefaultKey, SlotMap};
    let mut map: SlotMap<DefaultKey, u64> = SlotMap::new();
    let mut keys: Vec<DefaultKey> = Vec::with_capacity(plan.n);
    let mut create = || {
        for i in 0..plan.n {
            keys.push(map.insert(i as u64));
        }
        keys.len() as u64
    };
    if bench == Bench::Create {
        return timed(create);
    }
    create();
    match bench {
        Bench::Resolve => timed(|| {
            plan.picks
                .iter()
                .map(|&i| map.get(keys[i as usize]).copied().unwrap_or(0))
                .sum()
        }),
        Bench::Iterate => timed(|| map.values().sum()),
        Bench::Root => None,
        Bench::Create => unreachable!(),
    }
}

// ----- ideal -------------------------------------------------------------

fn ideal(bench: Bench, plan: &Plan) -> Timed {
    let mut vals: Vec<u64> = Vec::with_capacity(plan.n);
    let mut create = || {
        for i in 0..plan.n {
            vals.push(i as u64);
        }
        vals.len() as u64
    };
    if bench == Bench::Create {
        return timed(create);
    }
    create();
    match bench {
        Bench::Resolve => timed(|| plan.picks.iter().map(|&i| vals[i as usize]).sum()),
        Bench::Iterate => timed(|| vals.iter().sum()),
        Bench::Root => {
            let mut flags = vec![0u8; plan.n];
            timed(|| {
                let mut sum = 0;
                for &i in &plan.picks {
                    let f = &mut flags[i as usize];
                    *f |= 1;
                    black_box(&mut *f);
                    *f &= !1;
                    sum += vals[i as usize];
                }
                sum
            })
        }
        Bench::Create => unreachable!(),
    }
}

//! The `binary-trees` workload of the Computer Language Benchmarks Game.
//!
//! With `max = max(D, 6)`: build and check one "stretch" tree of depth
//! `max + 1`; build one long-lived tree of depth `max`; then, for each depth
//! `d` in 4, 6, …, `max`, build and check `2^(max - d + 4)` trees of depth
//! `d`; finally check the long-lived tree again. A tree is built bottom-up
//! and "checked" by counting its nodes, so every check must equal the closed
//! form `2^(d+1) - 1` times the number of trees: that is the verification.
//!
//! Every tree but the long-lived one becomes garbage right after its check:
//! `Box` and `Rc` free it on drop, dumpster and rust-cc by reference
//! counting, rust-gc by its own allocation-triggered collections, gc-arena by
//! `collect_debt` after each tree (its pacing), slotmap by the same
//! hand-rolled mark and sweep as `world`, triggered at "objects ≥ max(2 ×
//! objects live after the last collection, 2^18)", the usual grow-by-2
//! policy, and coreobject by `Heap::tick` with generational collection: a
//! minor cycle once 2^18 objects were created since the last cycle
//! (`GcConfig::young_threshold`), and a major one (`Heap::collect`) only
//! when a minor leaves the old generation at max(2 × the last major's
//! survivors, 2^18) objects or more, the same grow-by-2 rule applied to the
//! old generation. `ideal` resets an index arena per tree.
//!
//! coreobject runs that program creating through `&mut Heap`
//! (`Heap::create_mut`, the owner's path), and reports two more: the same
//! pacing creating through `&Heap` (`Heap::create`), and the obvious
//! program with nothing configured (`Heap::new()`, `Heap::create`, `tick`
//! after every tree), each in a column of its own beside the other peers'
//! one time.

use std::rc::Rc;
use std::time::{Duration, Instant};

use gc_arena::{Arena, Collect, Gc as GaGc, Rootable};

use crate::harness::{verify, Metric, Outcome, Peer, Run};

/// Shallowest iteration depth.
pub const MIN_DEPTH: u32 = 4;
/// Smallest object count that triggers a paced collection.
pub const MIN_TRIGGER: usize = 1 << 18;

/// The depths and counts the workload runs.
pub struct Plan {
    /// The deepest iteration depth (and the long-lived tree's).
    pub max_depth: u32,
    /// (depth, number of trees) for each iteration step.
    pub steps: Vec<(u32, u64)>,
}

impl Plan {
    /// The plan for `--depth depth`.
    pub fn new(depth: u32) -> Result<Plan, String> {
        if depth > 26 {
            return Err("--depth must be at most 26".into());
        }
        let max_depth = depth.max(MIN_DEPTH + 2);
        let steps = (MIN_DEPTH..=max_depth)
            .step_by(2)
            .map(|d| (d, 1u64 << (max_depth - d + MIN_DEPTH)))
            .collect();
        Ok(Plan { max_depth, steps })
    }

    /// The checks the benchmark prints, from the closed form: stretch tree,
    /// each step's sum, long-lived tree.
    pub fn expected(&self) -> Vec<u64> {
        let nodes = |d: u32| (1u64 << (d + 1)) - 1;
        let mut v = vec![nodes(self.max_depth + 1)];
        v.extend(self.steps.iter().map(|&(d, n)| n * nodes(d)));
        v.push(nodes(self.max_depth));
        v
    }

    /// Nodes allocated in one run.
    pub fn total_nodes(&self) -> u64 {
        let nodes = |d: u32| (1u64 << (d + 1)) - 1;
        nodes(self.max_depth + 1)
            + nodes(self.max_depth)
            + self.steps.iter().map(|&(d, n)| n * nodes(d)).sum::<u64>()
    }

    /// The benchmark's output for the given checks.
    pub fn output(&self, checks: &[u64]) -> String {
        let mut s = format!(
            "stretch tree of depth {}\t check: {}\n",
            self.max_depth + 1,
            checks[0]
        );
        for (i, &(d, n)) in self.steps.iter().enumerate() {
            s += &format!("{n}\t trees of depth {d}\t check: {}\n", checks[i + 1]);
        }
        s += &format!(
            "long lived tree of depth {}\t check: {}\n",
            self.max_depth,
            checks[checks.len() - 1]
        );
        s
    }
}

/// The metrics.
pub fn metrics() -> Vec<Metric> {
    vec![
        Metric::new("total_ms", "whole benchmark", "ms"),
        Metric::new("ns_per_node", "per node allocated", "ns/node"),
        Metric::new(
            "defaults_ms",
            "coreobject: Heap::new(), Heap::create, tick after each tree (peers: as total)",
            "ms",
        ),
        Metric::new(
            "shared_ms",
            "coreobject: as total, but creating through &Heap (peers: as total)",
            "ms",
        ),
    ]
}

/// Runs one repetition for `peer`.
pub fn run(peer: Peer, plan: &Plan) -> Outcome {
    let t = Instant::now();
    let checks = match peer {
        Peer::CoreObject => coreobject(plan),
        Peer::GcArena => gc_arena(plan),
        Peer::RustGc => rust_gc(plan),
        Peer::Dumpster => dumpster(plan),
        Peer::RustCc => rust_cc(plan),
        Peer::SlotMap => slotmap(plan),
        Peer::Rc => rc(plan),
        Peer::Box => boxed(plan),
        Peer::Ideal => ideal(plan),
    };
    let elapsed: Duration = t.elapsed();
    let expected = plan.expected();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    // coreobject's other two programs; every other peer has one.
    let (mut defaults, mut shared) = (elapsed, elapsed);
    let mut more = Vec::new();
    if peer == Peer::CoreObject {
        let t = Instant::now();
        more.push(("defaults", coreobject_defaults(plan)));
        defaults = t.elapsed();
        let t = Instant::now();
        more.push(("shared", coreobject_shared(plan)));
        shared = t.elapsed();
    }
    let mut checks_ok = vec![(
        checks == expected,
        format!("checks {checks:?}, expected {expected:?}"),
    )];
    checks_ok.extend(more.into_iter().map(|(what, c)| {
        (
            c == expected,
            format!("{what}: checks {c:?}, expected {expected:?}"),
        )
    }));
    Outcome::Ran(Run {
        values: vec![
            ms(elapsed),
            elapsed.as_nanos() as f64 / plan.total_nodes() as f64,
            ms(defaults),
            ms(shared),
        ],
        extra: Vec::new(),
        check: verify(&checks_ok),
    })
}

/// The benchmark's driver, shared by every peer: `tree(d)` builds a tree of
/// depth `d`, checks it and lets it become garbage; `long(d)` builds the
/// long-lived one and returns a closure that checks it at the end.
fn drive<L: FnOnce() -> u64>(
    plan: &Plan,
    mut tree: impl FnMut(u32) -> u64,
    long: impl FnOnce(u32) -> L,
) -> Vec<u64> {
    let mut checks = vec![tree(plan.max_depth + 1)];
    let long_check = long(plan.max_depth);
    for &(d, n) in &plan.steps {
        let mut sum = 0;
        for _ in 0..n {
            sum += tree(d);
        }
        checks.push(sum);
    }
    checks.push(long_check());
    checks
}

// ----- Box and Rc --------------------------------------------------------

struct BoxNode {
    kids: Option<(Box<BoxNode>, Box<BoxNode>)>,
}

fn box_make(d: u32) -> Box<BoxNode> {
    Box::new(BoxNode {
        kids: (d > 0).then(|| (box_make(d - 1), box_make(d - 1))),
    })
}

fn box_check(n: &BoxNode) -> u64 {
    1 + n
        .kids
        .as_ref()
        .map_or(0, |(l, r)| box_check(l) + box_check(r))
}

fn boxed(plan: &Plan) -> Vec<u64> {
    drive(
        plan,
        |d| box_check(&box_make(d)),
        |d| {
            let t = box_make(d);
            move || box_check(&t)
        },
    )
}

struct RcNode {
    kids: Option<(Rc<RcNode>, Rc<RcNode>)>,
}

fn rc_make(d: u32) -> Rc<RcNode> {
    Rc::new(RcNode {
        kids: (d > 0).then(|| (rc_make(d - 1), rc_make(d - 1))),
    })
}

fn rc_check(n: &RcNode) -> u64 {
    1 + n
        .kids
        .as_ref()
        .map_or(0, |(l, r)| rc_check(l) + rc_check(r))
}

fn rc(plan: &Plan) -> Vec<u64> {
    drive(
        plan,
        |d| rc_check(&rc_make(d)),
        |d| {
            let t = rc_make(d);
            move || rc_check(&t)
        },
    )
}

// ----- coreobject --------------------------------------------------------

/// A tree node in coreobject.
#[derive(coreobject::Object)]
struct CoTree {
    left: Option<coreobject::Obj<CoTree>>,
    right: Option<coreobject::Obj<CoTree>>,
}

/// Builds a tree through `&mut Heap` (`Heap::create_mut`): the owner's
/// path, which takes no lock and no locked instruction.
fn co_make(heap: &mut coreobject::Heap, d: u32) -> coreobject::Obj<CoTree> {
    let (left, right) = if d > 0 {
        (Some(co_make(heap, d - 1)), Some(co_make(heap, d - 1)))
    } else {
        (None, None)
    };
    heap.create_mut(CoTree { left, right })
}

fn co_check(heap: &coreobject::Heap, n: coreobject::Obj<CoTree>) -> u64 {
    let t = &heap[n];
    1 + match (t.left, t.right) {
        (Some(l), Some(r)) => co_check(heap, l) + co_check(heap, r),
        _ => 0,
    }
}

fn coreobject(plan: &Plan) -> Vec<u64> {
    use coreobject::{CycleKind, GcConfig, Heap, HeapConfig};
    let config = HeapConfig {
        gc: GcConfig {
            young_threshold: Some(MIN_TRIGGER),
            ..GcConfig::MANUAL
        },
        ..HeapConfig::LARGE
    };
    let heap = std::cell::RefCell::new(Heap::with_config(config).expect("heap config"));
    // Survivors of the last major cycle (none yet): a major runs when the
    // old generation has doubled since (and holds at least MIN_TRIGGER).
    let mut major_live = 0;
    let mut tick = |heap: &mut Heap| {
        if let Some(stats) = heap.tick(Duration::ZERO).completed {
            if stats.kind == CycleKind::Major {
                major_live = stats.live;
            } else if stats.live >= (2 * major_live).max(MIN_TRIGGER) {
                major_live = heap.collect().expect("collect").live;
            }
        }
    };
    drive(
        plan,
        |d| {
            let mut h = heap.borrow_mut();
            let t = co_make(&mut h, d);
            let c = co_check(&h, t);
            tick(&mut h);
            c
        },
        |d| {
            let t = {
                let mut h = heap.borrow_mut();
                let t = co_make(&mut h, d);
                h.add_to_root(t).expect("root");
                t
            };
            let heap = &heap;
            move || co_check(&heap.borrow(), t)
        },
    )
}

/// Builds a tree through `&Heap` (`Heap::create`), as any thread can.
fn co_make_shared(heap: &coreobject::Heap, d: u32) -> coreobject::Obj<CoTree> {
    let (left, right) = if d > 0 {
        (
            Some(co_make_shared(heap, d - 1)),
            Some(co_make_shared(heap, d - 1)),
        )
    } else {
        (None, None)
    };
    heap.create(CoTree { left, right })
}

/// The obvious program: `Heap::new()`, `Heap::create`, `tick` after every
/// tree, nothing configured.
fn coreobject_defaults(plan: &Plan) -> Vec<u64> {
    use coreobject::Heap;
    let heap = std::cell::RefCell::new(Heap::new());
    drive(
        plan,
        |d| {
            let mut h = heap.borrow_mut();
            let t = co_make_shared(&h, d);
            let c = co_check(&h, t);
            h.tick(Duration::ZERO);
            c
        },
        |d| {
            let t = {
                let h = heap.borrow();
                let t = co_make_shared(&h, d);
                h.add_to_root(t).expect("root");
                t
            };
            let heap = &heap;
            move || co_check(&heap.borrow(), t)
        },
    )
}

/// [`coreobject`]'s configuration and pacing, creating through `&Heap`.
fn coreobject_shared(plan: &Plan) -> Vec<u64> {
    use coreobject::{CycleKind, GcConfig, Heap, HeapConfig};
    let config = HeapConfig {
        gc: GcConfig {
            young_threshold: Some(MIN_TRIGGER),
            ..GcConfig::MANUAL
        },
        ..HeapConfig::LARGE
    };
    let heap = std::cell::RefCell::new(Heap::with_config(config).expect("heap config"));
    let mut major_live = 0;
    let mut tick = |heap: &mut Heap| {
        if let Some(stats) = heap.tick(Duration::ZERO).completed {
            if stats.kind == CycleKind::Major {
                major_live = stats.live;
            } else if stats.live >= (2 * major_live).max(MIN_TRIGGER) {
                major_live = heap.collect().expect("collect").live;
            }
        }
    };
    drive(
        plan,
        |d| {
            let mut h = heap.borrow_mut();
            let t = co_make_shared(&h, d);
            let c = co_check(&h, t);
            tick(&mut h);
            c
        },
        |d| {
            let t = {
                let h = heap.borrow();
                let t = co_make_shared(&h, d);
                h.add_to_root(t).expect("root");
                t
            };
            let heap = &heap;
            move || co_check(&heap.borrow(), t)
        },
    )
}

// ----- gc-arena ----------------------------------------------------------

/// A tree node in gc-arena.
struct GaTree<'gc> {
    kids: Option<(GaGc<'gc, GaTree<'gc>>, GaGc<'gc, GaTree<'gc>>)>,
}

// SAFETY: traces both children.
unsafe impl<'gc> Collect<'gc> for GaTree<'gc> {
    fn trace<T: gc_arena::collect::Trace<'gc>>(&self, cc: &mut T) {
        if let Some((l, r)) = &self.kids {
            cc.trace(l);
            cc.trace(r);
        }
    }
}

/// The arena's root: the long-lived tree.
struct GaRoot<'gc> {
    long: Option<GaGc<'gc, GaTree<'gc>>>,
}

// SAFETY: traces the one pointer it holds.
unsafe impl<'gc> Collect<'gc> for GaRoot<'gc> {
    fn trace<T: gc_arena::collect::Trace<'gc>>(&self, cc: &mut T) {
        cc.trace(&self.long);
    }
}

fn ga_make<'gc>(mc: &gc_arena::Mutation<'gc>, d: u32) -> GaGc<'gc, GaTree<'gc>> {
    GaGc::new(
        mc,
        GaTree {
            kids: (d > 0).then(|| (ga_make(mc, d - 1), ga_make(mc, d - 1))),
        },
    )
}

fn ga_check(n: &GaTree<'_>) -> u64 {
    1 + n
        .kids
        .as_ref()
        .map_or(0, |(l, r)| ga_check(l) + ga_check(r))
}

fn gc_arena(plan: &Plan) -> Vec<u64> {
    let arena = std::cell::RefCell::new(Arena::<Rootable![GaRoot<'_>]>::new(|_| GaRoot {
        long: None,
    }));
    drive(
        plan,
        |d| {
            let mut a = arena.borrow_mut();
            let c = a.mutate(|mc, _| ga_check(&ga_make(mc, d)));
            a.collect_debt();
            c
        },
        |d| {
            arena
                .borrow_mut()
                .mutate_root(|mc, root| root.long = Some(ga_make(mc, d)));
            let arena = &arena;
            move || {
                arena
                    .borrow()
                    .mutate(|_, root| ga_check(&root.long.expect("long-lived tree")))
            }
        },
    )
}

// ----- rust-gc, dumpster, rust-cc ----------------------------------------

/// A tree node in rust-gc.
struct RgTree {
    kids: Option<(gc::Gc<RgTree>, gc::Gc<RgTree>)>,
}

impl gc::Finalize for RgTree {}
// SAFETY: marks both children.
unsafe impl gc::Trace for RgTree {
    gc::custom_trace!(
        this,
        // SAFETY: rust-gc's own marker, applied to both children, inside its `Trace`.
        unsafe { mark(&this.kids) }
    );
}

fn rg_make(d: u32) -> gc::Gc<RgTree> {
    gc::Gc::new(RgTree {
        kids: (d > 0).then(|| (rg_make(d - 1), rg_make(d - 1))),
    })
}

fn rg_check(n: &RgTree) -> u64 {
    1 + n
        .kids
        .as_ref()
        .map_or(0, |(l, r)| rg_check(l) + rg_check(r))
}

fn rust_gc(plan: &Plan) -> Vec<u64> {
    drive(
        plan,
        |d| rg_check(&rg_make(d)),
        |d| {
            let t = rg_make(d);
            move || rg_check(&t)
        },
    )
}

/// A tree node in dumpster.
#[derive(dumpster::Trace)]
struct DuTree {
    kids: Option<(dumpster::unsync::Gc<DuTree>, dumpster::unsync::Gc<DuTree>)>,
}

fn du_make(d: u32) -> dumpster::unsync::Gc<DuTree> {
    dumpster::unsync::Gc::new(DuTree {
        kids: (d > 0).then(|| (du_make(d - 1), du_make(d - 1))),
    })
}

fn du_check(n: &DuTree) -> u64 {
    1 + n
        .kids
        .as_ref()
        .map_or(0, |(l, r)| du_check(l) + du_check(r))
}

fn dumpster(plan: &Plan) -> Vec<u64> {
    drive(
        plan,
        |d| du_check(&du_make(d)),
        |d| {
            let t = du_make(d);
            move || du_check(&t)
        },
    )
}

/// A tree node in rust-cc.
#[derive(rust_cc::Trace, rust_cc::Finalize)]
struct CcTree {
    kids: Option<(rust_cc::Cc<CcTree>, rust_cc::Cc<CcTree>)>,
}

fn cc_make(d: u32) -> rust_cc::Cc<CcTree> {
    rust_cc::Cc::new(CcTree {
        kids: (d > 0).then(|| (cc_make(d - 1), cc_make(d - 1))),
    })
}

fn cc_check(n: &CcTree) -> u64 {
    1 + n
        .kids
        .as_ref()
        .map_or(0, |(l, r)| cc_check(l) + cc_check(r))
}

fn rust_cc(plan: &Plan) -> Vec<u64> {
    drive(
        plan,
        |d| cc_check(&cc_make(d)),
        |d| {
            let t = cc_make(d);
            move || cc_check(&t)
        },
    )
}

// ----- slotmap -----------------------------------------------------------

type SmKey = slotmap::DefaultKey;

/// A tree node in the slotmap peer.
struct SmTree {
    kids: Option<(SmKey, SmKey)>,
    marked: bool,
}

fn sm_make(map: &mut slotmap::SlotMap<SmKey, SmTree>, d: u32) -> SmKey {
    let kids = (d > 0).then(|| (sm_make(map, d - 1), sm_make(map, d - 1)));
    map.insert(SmTree {
        kids,
        marked: false,
    })
}

fn sm_check(map: &slotmap::SlotMap<SmKey, SmTree>, k: SmKey) -> u64 {
    1 + map[k]
        .kids
        .map_or(0, |(l, r)| sm_check(map, l) + sm_check(map, r))
}

fn slotmap(plan: &Plan) -> Vec<u64> {
    struct State {
        map: slotmap::SlotMap<SmKey, SmTree>,
        roots: Vec<SmKey>,
        stack: Vec<SmKey>,
        trigger: usize,
    }
    let st = std::cell::RefCell::new(State {
        map: slotmap::SlotMap::new(),
        roots: Vec::new(),
        stack: Vec::new(),
        trigger: MIN_TRIGGER,
    });
    drive(
        plan,
        |d| {
            let st = &mut *st.borrow_mut();
            let t = sm_make(&mut st.map, d);
            let c = sm_check(&st.map, t);
            if st.map.len() >= st.trigger {
                crate::world::slotmap_collect(
                    &mut st.map,
                    &st.roots,
                    &mut st.stack,
                    |n, stack| {
                        if !n.marked {
                            n.marked = true;
                            if let Some((l, r)) = n.kids {
                                stack.push(l);
                                stack.push(r);
                            }
                        }
                        true
                    },
                    |n| std::mem::replace(&mut n.marked, false),
                );
                st.trigger = (2 * st.map.len()).max(MIN_TRIGGER);
            }
            c
        },
        |d| {
            let t = {
                let st = &mut *st.borrow_mut();
                let t = sm_make(&mut st.map, d);
                st.roots.push(t);
                t
            };
            let st = &st;
            move || sm_check(&st.borrow().map, t)
        },
    )
}

// ----- ideal -------------------------------------------------------------

/// The floor: nodes are index pairs in a vector that is reset per tree.
fn id_make(arena: &mut Vec<(u32, u32)>, d: u32) -> u32 {
    let kids = if d > 0 {
        (id_make(arena, d - 1), id_make(arena, d - 1))
    } else {
        (u32::MAX, u32::MAX)
    };
    arena.push(kids);
    arena.len() as u32 - 1
}

fn id_check(arena: &[(u32, u32)], i: u32) -> u64 {
    let (l, r) = arena[i as usize];
    1 + if l == u32::MAX {
        0
    } else {
        id_check(arena, l) + id_check(arena, r)
    }
}

fn ideal(plan: &Plan) -> Vec<u64> {
    let scratch = std::cell::RefCell::new(Vec::new());
    drive(
        plan,
        |d| {
            let mut a = scratch.borrow_mut();
            a.clear();
            let t = id_make(&mut a, d);
            id_check(&a, t)
        },
        |d| {
            let mut long = Vec::new();
            let t = id_make(&mut long, d);
            move || id_check(&long, t)
        },
    )
}

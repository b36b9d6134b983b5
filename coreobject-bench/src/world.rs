//! The `world` workload: a game world of levels, actors and components with
//! random cross references; part of it is detached and one full collection
//! must free exactly that part.
//!
//! # The graph ([`Plan`])
//!
//! * object 0 is the world root; objects 1..=64 are levels;
//! * then actors, each followed by its 4 components; actor `j` (0-based) is
//!   held by level `1 + j % 64`, and holds its 4 components;
//! * every object also holds `K` random references. A random set of actors
//!   (with their components) covering a fraction `F` of all objects is
//!   chosen up front as the garbage; random references *from* live objects
//!   point only at live objects, those from garbage objects point anywhere.
//!   So once the chosen actors are removed from their levels, the garbage is
//!   exactly the detached actors and components.
//!
//! `N` is rounded down to `65 + 5 * actors`.
//!
//! # The layout, the same for every peer
//!
//! Each object holds one vector of references — its tree children first
//! (the root's levels, a level's actors, an actor's components), then its
//! `K` random references — and a zero-sized drop counter ([`Tally`]). The
//! vector is allocated once with its exact length (objects are created
//! first, then linked), so no peer pays for growth slack. Shared mutation
//! uses each library's own cell (`RefLock`, `GcCell`, `RefCell`); coreobject
//! and slotmap mutate through `&mut`.
//!
//! # What is measured, per repetition
//!
//! * **build**: creating the container (heap, arena, map), every object,
//!   linking them, rooting the world and releasing the builder's temporary
//!   handles; reported per object;
//! * **detach** (JSON only): removing the garbage actors from their levels
//!   (reference-counting peers do some of their freeing here);
//! * **collect**: one full collection, in ms and per live object;
//! * **memory**: bytes allocated by build and still held (counting
//!   allocator, per thread), per object.
//!
//! Verification: the drop counter must show no drop during build and exactly
//! the garbage count after the collection. coreobject must also report
//! `freed` and `marked` as expected, and every garbage handle must stop
//! resolving while every live one still resolves; slotmap and ideal check
//! every key or slot the same way.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use gc_arena::{Arena, Collect, Gc as GaGc, RefLock, Rootable};

use crate::alloc::{alloc_calls, live_bytes};
use crate::harness::{verify, Metric, Outcome, Peer, Run};
use crate::tally::{self, Tally};

/// Levels under the world root.
pub const LEVELS: usize = 64;
/// Components per actor.
pub const COMPONENTS: usize = 4;

/// The `world` parameters.
#[derive(Clone, Debug)]
pub struct Params {
    /// Objects (rounded down to `65 + 5 * actors`).
    pub objects: usize,
    /// Random references per object.
    pub edges: usize,
    /// Fraction of objects to detach.
    pub garbage_frac: f64,
    /// Random seed.
    pub seed: u64,
    /// coreobject's marking threads (`GcConfig::threads`).
    pub threads: usize,
    /// coreobject drops freed values on the marking threads too
    /// (`GcConfig::parallel_drop`).
    pub parallel_drop: bool,
}

/// Whether the object `k` places after the last level is an actor (the
/// others are its components).
fn is_actor(k: usize) -> bool {
    let r = k % (1 + COMPONENTS);
    r == 0
}

/// The world graph, shared by every peer (a compressed adjacency list).
pub struct Plan {
    /// Objects.
    pub n: usize,
    offsets: Vec<u32>,
    targets: Vec<u32>,
    children: Vec<u32>,
    /// Whether each object is garbage once detached.
    pub garbage: Vec<bool>,
    /// How many are.
    pub garbage_count: usize,
    /// coreobject's marking threads (`GcConfig::threads`).
    pub threads: usize,
    /// `GcConfig::parallel_drop`.
    pub parallel_drop: bool,
}

impl Plan {
    /// Builds the graph for `p`.
    pub fn new(p: &Params) -> Result<Plan, String> {
        let base = 1 + LEVELS;
        if p.objects < base + 1 + COMPONENTS {
            return Err(format!(
                "--objects must be at least {}",
                base + 1 + COMPONENTS
            ));
        }
        if !(0.0..1.0).contains(&p.garbage_frac) {
            return Err("--garbage-frac must be in [0, 1)".into());
        }
        let actors = (p.objects - base) / (1 + COMPONENTS);
        let n = base + actors * (1 + COMPONENTS);
        if n > u32::MAX as usize / 2 {
            return Err("--objects is too large".into());
        }
        let actor_index = |j: usize| base + j * (1 + COMPONENTS);
        let mut rng = fastrand::Rng::with_seed(p.seed);

        // Garbage: a random set of actors, with their components.
        let want = ((p.garbage_frac * n as f64) / (1 + COMPONENTS) as f64).round() as usize;
        let detach = want.min(actors);
        let mut order: Vec<u32> = (0..actors as u32).collect();
        for i in 0..detach {
            let j = rng.usize(i..actors);
            order.swap(i, j);
        }
        let mut garbage = vec![false; n];
        for &j in &order[..detach] {
            let a = actor_index(j as usize);
            garbage[a..a + 1 + COMPONENTS].fill(true);
        }
        let live: Vec<u32> = (0..n as u32).filter(|&i| !garbage[i as usize]).collect();

        // Tree children.
        let mut kids: Vec<Vec<u32>> = vec![Vec::new(); base];
        kids[0] = (1..=LEVELS as u32).collect();
        for j in 0..actors {
            kids[1 + j % LEVELS].push(actor_index(j) as u32);
        }
        let mut offsets = Vec::with_capacity(n + 1);
        let mut targets = Vec::with_capacity(n - 1 + n * p.edges);
        let mut children = Vec::with_capacity(n);
        for i in 0..n {
            offsets.push(targets.len() as u32);
            let before = targets.len();
            if i < base {
                targets.extend_from_slice(&kids[i]);
            } else if is_actor(i - base) {
                targets.extend((1..=COMPONENTS as u32).map(|c| i as u32 + c));
            }
            children.push((targets.len() - before) as u32);
            for _ in 0..p.edges {
                let t = if garbage[i] {
                    rng.u32(0..n as u32)
                } else {
                    live[rng.usize(0..live.len())]
                };
                targets.push(t);
            }
        }
        offsets.push(targets.len() as u32);
        Ok(Plan {
            n,
            offsets,
            targets,
            children,
            garbage,
            garbage_count: detach * (1 + COMPONENTS),
            threads: p.threads,
            parallel_drop: p.parallel_drop,
        })
    }

    /// Object `i`'s references: children, then random ones.
    #[inline]
    pub fn refs(&self, i: usize) -> &[u32] {
        &self.targets[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// How many of object `i`'s references are tree children (they come
    /// first; the random ones follow).
    #[inline]
    pub fn children(&self, i: usize) -> usize {
        self.children[i] as usize
    }

    /// Live objects (after the detach).
    pub fn live(&self) -> usize {
        self.n - self.garbage_count
    }

    /// Total references.
    pub fn edges(&self) -> usize {
        self.targets.len()
    }

    /// For level `level` (1..=64): whether the reference at `pos` in its
    /// original list survives the detach.
    #[inline]
    pub fn level_keeps(&self, level: usize, pos: usize) -> bool {
        pos >= self.children[level] as usize
            || !self.garbage[self.targets[self.offsets[level] as usize + pos] as usize]
    }

    /// For level `level` (1..=64): how many of its children (actors) are
    /// still live after the detach; they come first in its reference list.
    pub fn kept_children(&self, level: usize) -> usize {
        (0..self.children[level] as usize)
            .filter(|&pos| self.level_keeps(level, pos))
            .count()
    }

    /// A `retain` predicate for level `level`'s reference list, in its
    /// original order: keeps exactly what [`level_keeps`](Self::level_keeps) keeps.
    pub fn detach_filter<T>(&self, level: usize) -> impl FnMut(&T) -> bool + '_ {
        let mut pos = 0;
        move |_| {
            pos += 1;
            self.level_keeps(level, pos - 1)
        }
    }
}

/// The metrics, in order.
pub fn metrics() -> Vec<Metric> {
    vec![
        Metric::new("build_ns_per_object", "build", "ns/object"),
        Metric::new("collect_ms", "full collection", "ms"),
        Metric::new("collect_ns_per_live", "full collection", "ns/live object"),
        Metric::new("bytes_per_object", "heap memory after build", "B/object"),
    ]
}

/// Runs one repetition for `peer`.
pub fn run(peer: Peer, plan: &Plan) -> Outcome {
    match peer {
        Peer::CoreObject => coreobject(plan),
        Peer::GcArena => gc_arena(plan),
        Peer::RustGc => rust_gc(plan),
        Peer::Dumpster => dumpster(plan),
        Peer::RustCc => rust_cc(plan),
        Peer::SlotMap => slotmap(plan),
        Peer::Rc => Outcome::Na("reference counting cannot free the cycles"),
        Peer::Box => Outcome::Na("no shared references"),
        Peer::Ideal => ideal(plan),
    }
}

/// Timings and counts common to every peer.
struct Measured {
    build: Duration,
    detach: Duration,
    collect: Duration,
    bytes: isize,
    allocs: u64,
    drops_in_build: u64,
    drops_after: u64,
}

/// The counting allocator's and the drop counter's readings at one moment.
#[derive(Clone, Copy)]
struct Counters {
    bytes: isize,
    allocs: u64,
    dropped: u64,
}

impl Counters {
    fn now() -> Counters {
        Counters {
            bytes: live_bytes(),
            allocs: alloc_calls(),
            dropped: tally::dropped(),
        }
    }
}

impl Measured {
    /// A repetition's figures from the counters read before the build,
    /// after it, and after the collection.
    fn between(
        [c0, c1, c2]: [Counters; 3],
        build: Duration,
        detach: Duration,
        collect: Duration,
    ) -> Measured {
        Measured {
            build,
            detach,
            collect,
            bytes: c1.bytes - c0.bytes,
            allocs: c1.allocs - c0.allocs,
            drops_in_build: c1.dropped - c0.dropped,
            drops_after: c2.dropped - c1.dropped,
        }
    }
}

fn finish(plan: &Plan, m: Measured, mut checks: Vec<(bool, String)>) -> Outcome {
    checks.push((
        m.drops_in_build == 0,
        format!("{} objects dropped during build", m.drops_in_build),
    ));
    checks.push((
        m.drops_after == plan.garbage_count as u64,
        format!(
            "dropped {} objects, expected exactly the {} detached",
            m.drops_after, plan.garbage_count
        ),
    ));
    Outcome::Ran(Run {
        values: vec![
            m.build.as_nanos() as f64 / plan.n as f64,
            m.collect.as_secs_f64() * 1e3,
            m.collect.as_nanos() as f64 / plan.live().max(1) as f64,
            m.bytes as f64 / plan.n as f64,
        ],
        extra: vec![
            ("detach_ms", m.detach.as_secs_f64() * 1e3),
            ("allocs_per_object", m.allocs as f64 / plan.n as f64),
        ],
        check: verify(&checks),
    })
}

// ----- coreobject --------------------------------------------------------

/// A world object in coreobject.
#[derive(coreobject::Object)]
pub struct CoNode {
    /// Children, then random references.
    pub refs: Vec<coreobject::Obj<CoNode>>,
    tally: Tally,
}

impl CoNode {
    /// A node holding `refs`.
    pub fn new(refs: Vec<coreobject::Obj<CoNode>>) -> CoNode {
        CoNode { refs, tally: Tally }
    }
}

/// Builds `plan`'s world in a new heap with collector settings `gc`, pushing
/// every object's handle onto `handles` (the caller allocates it, so that it
/// stays out of the caller's memory snapshot), and roots the world object.
pub fn co_build(
    plan: &Plan,
    gc: coreobject::GcConfig,
    handles: &mut Vec<coreobject::Obj<CoNode>>,
) -> coreobject::Heap {
    co_build_with_room(plan, gc, 0, handles)
}

/// [`co_build`] in a heap with room for `room` more objects than the world.
pub fn co_build_with_room(
    plan: &Plan,
    gc: coreobject::GcConfig,
    room: usize,
    handles: &mut Vec<coreobject::Obj<CoNode>>,
) -> coreobject::Heap {
    use coreobject::{Heap, HeapConfig, Obj};
    let config = HeapConfig {
        max_objects: ((plan.n + room).min(1 << 31) as u32).max(HeapConfig::DEFAULT.max_objects),
        gc,
        ..HeapConfig::DEFAULT
    };
    let mut heap = Heap::with_config(config).expect("heap config");
    // The builder owns the heap: the owner's creation path (no lock).
    for _ in 0..plan.n {
        handles.push(heap.create_mut(CoNode {
            refs: Vec::new(),
            tally: Tally,
        }));
    }
    for (i, &h) in handles.iter().enumerate() {
        let refs: Vec<Obj<CoNode>> = plan.refs(i).iter().map(|&t| handles[t as usize]).collect();
        heap.get_mut(h).expect("just created").refs = refs;
    }
    heap.add_to_root(handles[0]).expect("root");
    heap
}

/// The levels of a world built by [`co_build`] (`handles[0]` is the world).
pub fn co_levels(
    heap: &coreobject::Heap,
    handles: &[coreobject::Obj<CoNode>],
) -> Vec<coreobject::Obj<CoNode>> {
    heap[handles[0]].refs[..LEVELS].to_vec()
}

/// Removes the garbage actors from their levels.
pub fn co_detach(plan: &Plan, heap: &mut coreobject::Heap, handles: &[coreobject::Obj<CoNode>]) {
    for (l, level) in co_levels(heap, handles).into_iter().enumerate() {
        heap.get_mut(level)
            .expect("level")
            .refs
            .retain(plan.detach_filter(l + 1));
    }
}

/// coreobject's own checks after the collection that should have freed
/// exactly the detached objects: its stats, every handle, the heap's length.
pub fn co_checks(
    plan: &Plan,
    heap: &coreobject::Heap,
    handles: &[coreobject::Obj<CoNode>],
    stats: &coreobject::CollectStats,
) -> Vec<(bool, String)> {
    let wrong = handles
        .iter()
        .enumerate()
        .filter(|&(i, &h)| heap.get(h).is_some() == plan.garbage[i])
        .count();
    vec![
        (
            stats.freed == plan.garbage_count,
            format!(
                "CollectStats.freed {} != {}",
                stats.freed, plan.garbage_count
            ),
        ),
        (
            stats.marked == plan.live(),
            format!("CollectStats.marked {} != {}", stats.marked, plan.live()),
        ),
        (
            wrong == 0,
            format!("{wrong} handles resolve wrongly after the collection"),
        ),
        (
            heap.len() == plan.live(),
            format!("heap.len() {} != {}", heap.len(), plan.live()),
        ),
    ]
}

fn coreobject(plan: &Plan) -> Outcome {
    // Allocated before the memory snapshot: the harness's own handle list.
    let mut handles: Vec<coreobject::Obj<CoNode>> = Vec::with_capacity(plan.n);
    let c0 = Counters::now();
    let t0 = Instant::now();
    let gc = coreobject::GcConfig {
        threads: plan.threads,
        parallel_drop: plan.parallel_drop,
        ..coreobject::GcConfig::MANUAL
    };
    let mut heap = co_build(plan, gc, &mut handles);
    let build = t0.elapsed();
    let mut c1 = Counters::now();
    // Object pages and table chunks that coreobject maps from the system
    // (on Linux) pass the counting allocator by.
    c1.bytes += heap.memory_report().mapped_bytes as isize;

    let t1 = Instant::now();
    co_detach(plan, &mut heap, &handles);
    let detach = t1.elapsed();

    let t2 = Instant::now();
    let stats = heap.collect().expect("collect");
    let collect = t2.elapsed();
    let c2 = Counters::now();

    let checks = co_checks(plan, &heap, &handles, &stats);
    let out = finish(
        plan,
        Measured::between([c0, c1, c2], build, detach, collect),
        checks,
    );
    match out {
        Outcome::Ran(mut run) => {
            run.extra.extend([
                ("gc_mark_ms", stats.mark.as_secs_f64() * 1e3),
                ("gc_mark_threads", stats.mark_threads as f64),
                ("gc_sweep_ms", stats.sweep.as_secs_f64() * 1e3),
                ("gc_destroy_ms", stats.destroy.as_secs_f64() * 1e3),
                ("gc_total_ms", stats.total.as_secs_f64() * 1e3),
            ]);
            Outcome::Ran(run)
        }
        other => other,
    }
}

// ----- gc-arena ----------------------------------------------------------

/// A reference to a world object in gc-arena.
pub type GaRef<'gc> = GaGc<'gc, RefLock<GaNode<'gc>>>;

/// A world object in gc-arena.
pub struct GaNode<'gc> {
    /// Children, then random references.
    pub refs: Vec<GaRef<'gc>>,
    _tally: Tally,
}

// SAFETY: traces every `Gc` the node holds; `Tally`'s `Drop` touches no `Gc`.
unsafe impl<'gc> Collect<'gc> for GaNode<'gc> {
    fn trace<T: gc_arena::collect::Trace<'gc>>(&self, cc: &mut T) {
        cc.trace(&self.refs);
    }
}

/// The arena's root.
pub struct GaRoot<'gc> {
    /// The world object.
    pub world: Option<GaRef<'gc>>,
}

// SAFETY: traces the one `Gc` it holds.
unsafe impl<'gc> Collect<'gc> for GaRoot<'gc> {
    fn trace<T: gc_arena::collect::Trace<'gc>>(&self, cc: &mut T) {
        cc.trace(&self.world);
    }
}

/// The world's arena in gc-arena.
pub type GaArena = Arena<Rootable![GaRoot<'_>]>;

/// Builds `plan`'s world in a new arena, rooted at the world object.
pub fn ga_build(plan: &Plan) -> GaArena {
    let mut arena = GaArena::new(|_| GaRoot { world: None });
    arena.mutate_root(|mc, root| {
        let mut handles: Vec<GaRef<'_>> = Vec::with_capacity(plan.n);
        for _ in 0..plan.n {
            handles.push(GaGc::new(
                mc,
                RefLock::new(GaNode {
                    refs: Vec::new(),
                    _tally: Tally,
                }),
            ));
        }
        for (i, &h) in handles.iter().enumerate() {
            let refs: Vec<GaRef<'_>> = plan.refs(i).iter().map(|&t| handles[t as usize]).collect();
            h.borrow_mut(mc).refs = refs;
        }
        root.world = Some(handles[0]);
    });
    arena
}

/// Removes the garbage actors from their levels (through the write barrier).
pub fn ga_detach(plan: &Plan, arena: &GaArena) {
    arena.mutate(|mc, root| {
        let world = root.world.expect("world");
        let levels: Vec<GaRef<'_>> = world.borrow().refs[..LEVELS].to_vec();
        for (l, &level) in levels.iter().enumerate() {
            level.borrow_mut(mc).refs.retain(plan.detach_filter(l + 1));
        }
    });
}

fn gc_arena(plan: &Plan) -> Outcome {
    let c0 = Counters::now();
    let t0 = Instant::now();
    let mut arena = ga_build(plan);
    let build = t0.elapsed();
    let c1 = Counters::now();

    let t1 = Instant::now();
    ga_detach(plan, &arena);
    let detach = t1.elapsed();

    let t2 = Instant::now();
    arena.finish_cycle();
    let collect = t2.elapsed();
    let c2 = Counters::now();
    finish(
        plan,
        Measured::between([c0, c1, c2], build, detach, collect),
        Vec::new(),
    )
}

// ----- rust-gc -----------------------------------------------------------

type RgRef = gc::Gc<gc::GcCell<RgNode>>;

/// A world object in rust-gc. (`Trace` by hand with rust-gc's own
/// `custom_trace!`: the derive's output trips `non_local_definitions`.)
struct RgNode {
    refs: Vec<RgRef>,
    _tally: Tally,
}

impl gc::Finalize for RgNode {}
// SAFETY: marks every `Gc` the node holds.
unsafe impl gc::Trace for RgNode {
    gc::custom_trace!(
        this,
        // SAFETY: rust-gc's own marker, applied to every `Gc` the node holds, inside its `Trace`.
        unsafe { mark(&this.refs) }
    );
}

// ----- dumpster ----------------------------------------------------------

type DuRef = dumpster::unsync::Gc<RefCell<DuNode>>;

/// A world object in dumpster.
#[derive(dumpster::Trace)]
struct DuNode {
    refs: Vec<DuRef>,
    _tally: Tally,
}

// ----- rust-cc -----------------------------------------------------------

type CcRef = rust_cc::Cc<RefCell<CcNode>>;

/// A world object in rust-cc.
#[derive(rust_cc::Trace, rust_cc::Finalize)]
struct CcNode {
    refs: Vec<CcRef>,
    _tally: Tally,
}

// ----- the reference-counting peers ----------------------------------------

/// The world on rust-gc, dumpster and rust-cc: each shares its nodes through
/// an `Rc`-like handle around a cell, so the three drivers differ only in the
/// handle type, its constructor and the collect call.
macro_rules! rc_like_world {
    ($name:ident, $Ref:ty, $Node:ident, $new:expr, $collect:expr) => {
        fn $name(plan: &Plan) -> Outcome {
            let c0 = Counters::now();
            let t0 = Instant::now();
            let mut handles: Vec<$Ref> = Vec::with_capacity(plan.n);
            for _ in 0..plan.n {
                handles.push(($new)($Node {
                    refs: Vec::new(),
                    _tally: Tally,
                }));
            }
            for (i, h) in handles.iter().enumerate() {
                let refs: Vec<$Ref> = plan
                    .refs(i)
                    .iter()
                    .map(|&t| handles[t as usize].clone())
                    .collect();
                h.borrow_mut().refs = refs;
            }
            let world = handles[0].clone();
            drop(handles);
            let build = t0.elapsed();
            let c1 = Counters::now();

            let t1 = Instant::now();
            let levels: Vec<$Ref> = world.borrow().refs[..LEVELS].to_vec();
            for (l, level) in levels.iter().enumerate() {
                level.borrow_mut().refs.retain(plan.detach_filter(l + 1));
            }
            drop(levels);
            let detach = t1.elapsed();

            let t2 = Instant::now();
            ($collect)();
            let collect = t2.elapsed();
            let c2 = Counters::now();
            let out = finish(
                plan,
                Measured::between([c0, c1, c2], build, detach, collect),
                Vec::new(),
            );
            drop(world);
            out
        }
    };
}

rc_like_world!(
    rust_gc,
    RgRef,
    RgNode,
    |n| gc::Gc::new(gc::GcCell::new(n)),
    gc::force_collect
);
rc_like_world!(
    dumpster,
    DuRef,
    DuNode,
    |n| dumpster::unsync::Gc::new(RefCell::new(n)),
    dumpster::unsync::collect
);
rc_like_world!(
    rust_cc,
    CcRef,
    CcNode,
    |n| rust_cc::Cc::new(RefCell::new(n)),
    rust_cc::collect_cycles
);

// ----- slotmap -----------------------------------------------------------

/// A world object in the slotmap peer; `marked` is its collector's mark bit.
struct SmNode {
    refs: Vec<slotmap::DefaultKey>,
    marked: bool,
    _tally: Tally,
}

/// Hand-rolled mark and sweep over a `SlotMap`: marks from `roots` with an
/// explicit stack, then drops every unmarked node. Returns the count freed.
pub fn slotmap_collect<T>(
    map: &mut slotmap::SlotMap<slotmap::DefaultKey, T>,
    roots: &[slotmap::DefaultKey],
    stack: &mut Vec<slotmap::DefaultKey>,
    mut visit: impl FnMut(&mut T, &mut Vec<slotmap::DefaultKey>) -> bool,
    mut unmark: impl FnMut(&mut T) -> bool,
) -> usize {
    stack.clear();
    stack.extend_from_slice(roots);
    while let Some(k) = stack.pop() {
        if let Some(node) = map.get_mut(k) {
            visit(node, stack);
        }
    }
    let before = map.len();
    map.retain(|_, node| unmark(node));
    before - map.len()
}

fn slotmap(plan: &Plan) -> Outcome {
    use slotmap::{DefaultKey, SlotMap};
    let mut handles: Vec<DefaultKey> = Vec::with_capacity(plan.n);
    let c0 = Counters::now();
    let t0 = Instant::now();
    let mut map: SlotMap<DefaultKey, SmNode> = SlotMap::new();
    for _ in 0..plan.n {
        handles.push(map.insert(SmNode {
            refs: Vec::new(),
            marked: false,
            _tally: Tally,
        }));
    }
    for (i, &h) in handles.iter().enumerate() {
        let refs: Vec<DefaultKey> = plan.refs(i).iter().map(|&t| handles[t as usize]).collect();
        map[h].refs = refs;
    }
    let world = handles[0];
    let build = t0.elapsed();
    let c1 = Counters::now();

    let t1 = Instant::now();
    let levels: Vec<DefaultKey> = map[world].refs[..LEVELS].to_vec();
    for (l, &level) in levels.iter().enumerate() {
        map[level].refs.retain(plan.detach_filter(l + 1));
    }
    let detach = t1.elapsed();

    let t2 = Instant::now();
    let mut stack = Vec::new();
    let freed = slotmap_collect(
        &mut map,
        &[world],
        &mut stack,
        |node, stack| {
            if !node.marked {
                node.marked = true;
                stack.extend_from_slice(&node.refs);
            }
            true
        },
        |node| std::mem::replace(&mut node.marked, false),
    );
    drop(stack);
    let collect = t2.elapsed();
    let c2 = Counters::now();
    let wrong = handles
        .iter()
        .enumerate()
        .filter(|&(i, &k)| map.contains_key(k) == plan.garbage[i])
        .count();
    finish(
        plan,
        Measured::between([c0, c1, c2], build, detach, collect),
        vec![
            (
                freed == plan.garbage_count,
                format!("sweep freed {freed} != {}", plan.garbage_count),
            ),
            (wrong == 0, format!("{wrong} keys resolve wrongly")),
        ],
    )
}

// ----- ideal -------------------------------------------------------------

/// The floor: per object, (start, length) into one edge array; an `alive`
/// bitmap, a mark bitmap and an explicit work list (breadth-first, with
/// software prefetching, as coreobject's marker does: without it a 1M-object
/// mark is bound by memory latency and coreobject beats the "floor").
struct IdealWorld {
    nodes: Vec<(u32, u32)>,
    edges: Vec<u32>,
    alive: Vec<u64>,
}

/// Nodes between being dequeued (edges prefetched) and being scanned.
const RING: usize = 8;

/// Asks the cache for the line at `p`. Only a hint: it never faults,
/// whatever the address.
#[inline(always)]
fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch does not access memory architecturally and never faults.
        #[allow(unused_unsafe)]
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(p.cast::<i8>())
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

fn bit(bits: &[u64], i: usize) -> bool {
    bits[i >> 6] & (1 << (i & 63)) != 0
}

fn ideal(plan: &Plan) -> Outcome {
    let n = plan.n;
    let (b0, a0) = (live_bytes(), alloc_calls());
    let t0 = Instant::now();
    let mut w = IdealWorld {
        nodes: Vec::with_capacity(n),
        edges: Vec::with_capacity(plan.edges()),
        alive: vec![u64::MAX; n.div_ceil(64)],
    };
    let tail = n % 64;
    if tail != 0 {
        *w.alive.last_mut().expect("non-empty") = (1u64 << tail) - 1;
    }
    for i in 0..n {
        let refs = plan.refs(i);
        w.nodes.push((w.edges.len() as u32, refs.len() as u32));
        w.edges.extend_from_slice(refs);
    }
    let build = t0.elapsed();
    let (bytes, allocs) = (live_bytes() - b0, alloc_calls() - a0);

    let t1 = Instant::now();
    for l in 1..=LEVELS {
        let (s, old) = (w.nodes[l].0 as usize, w.nodes[l].1 as usize);
        let mut kept = 0;
        for pos in 0..old {
            if plan.level_keeps(l, pos) {
                w.edges[s + kept] = w.edges[s + pos];
                kept += 1;
            }
        }
        w.nodes[l].1 = kept as u32;
    }
    let detach = t1.elapsed();

    let t2 = Instant::now();
    let mut mark = vec![0u64; n.div_ceil(64)];
    // Breadth-first work list; a node is prefetched when queued, its edges
    // when it is dequeued, and it is scanned RING dequeues later.
    let mut queue: Vec<u32> = vec![0];
    let mut head = 0;
    mark[0] |= 1;
    let mut ring = [(0u32, 0u32); RING];
    let (mut ring_head, mut ring_len) = (0, 0);
    loop {
        while ring_len < RING && head < queue.len() {
            let (s, len) = w.nodes[queue[head] as usize];
            head += 1;
            prefetch(w.edges.as_ptr().wrapping_add(s as usize));
            ring[(ring_head + ring_len) % RING] = (s, len);
            ring_len += 1;
        }
        if ring_len == 0 {
            break;
        }
        let (s, len) = ring[ring_head];
        ring_head = (ring_head + 1) % RING;
        ring_len -= 1;
        for &t in &w.edges[s as usize..(s + len) as usize] {
            let (word, b) = ((t >> 6) as usize, 1u64 << (t & 63));
            if mark[word] & b == 0 {
                mark[word] |= b;
                prefetch(w.nodes.as_ptr().wrapping_add(t as usize));
                queue.push(t);
            }
        }
    }
    let mut freed = 0usize;
    for (a, m) in w.alive.iter_mut().zip(&mark) {
        freed += (*a & !*m).count_ones() as usize;
        *a &= *m;
    }
    let collect = t2.elapsed();
    let wrong = (0..n)
        .filter(|&i| bit(&w.alive, i) == plan.garbage[i])
        .count();
    finish(
        plan,
        Measured {
            build,
            detach,
            collect,
            bytes,
            allocs,
            drops_in_build: 0,
            drops_after: freed as u64,
        },
        vec![(wrong == 0, format!("{wrong} slots alive wrongly"))],
    )
}

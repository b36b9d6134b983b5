//! Review of main since 433680f (review 5): objects created during a cycle
//! are young after it (the settle step), restored ones stay old, the looks,
//! tracing at birth and the purge's fast path.

use coreobject::{AnyObj, CycleKind, GcConfig, Heap, Obj, Object, Phase};

mod common;
use common::{heap_with, step, Rng};

#[derive(Object, Default)]
struct Node {
    id: u64,
    kids: Vec<Obj<Node>>,
    any: Vec<AnyObj>,
}

fn node(id: u64, kids: Vec<Obj<Node>>) -> Node {
    Node {
        id,
        kids,
        any: Vec::new(),
    }
}

fn finish(heap: &mut Heap, kind: CycleKind) {
    while step(heap, kind, 1_000).completed.is_none() {}
}

/// Starts a cycle of `kind` and runs one unit of it: `anchor` (alive)
/// gets a chain of 300 new objects first (30 under miri), so that marking
/// does not finish.
fn begin(heap: &mut Heap, kind: CycleKind, anchor: Obj<Node>) {
    let mut prev = anchor;
    for i in 0..if cfg!(miri) { 30 } else { 300 } {
        let o = heap.create(node(10_000 + i, Vec::new()));
        heap[prev].kids.push(o);
        prev = o;
    }
    let t = step(heap, kind, 1);
    assert!(t.started.is_some() && heap.gc_phase() == Phase::Mark);
}

/// An object restored (`spawn_at` with its old serial) while a cycle marks,
/// holding an object created during that cycle: the restored one stays old
/// (RESTORED keeps its mark at the settle step), the one it holds is young.
/// The next minor cycle must not free the one it holds.
#[test]
fn a_restored_object_keeps_what_it_was_restored_with() {
    let mut lost = Vec::new();
    for kind in [CycleKind::Major, CycleKind::Minor] {
        for through_mut in [false, true] {
            let mut heap = heap_with(GcConfig::MANUAL);
            let root = heap.spawn(node(0, Vec::new())).root().create().unwrap();
            // Slots freed by an earlier cycle, below the high water.
            let gone: Vec<_> = (0..if cfg!(miri) { 40 } else { 400 })
                .map(|i| heap.create(node(i, Vec::new())))
                .collect();
            heap.collect().unwrap();
            begin(&mut heap, kind, root);
            let y = if through_mut {
                heap.create_mut(node(8, Vec::new()))
            } else {
                heap.create(node(8, Vec::new()))
            };
            // The first freed slot not handed out again.
            let r = gone
                .iter()
                .find_map(|g| {
                    heap.spawn_at(g.index(), g.serial(), node(9, vec![y]))
                        .create()
                        .ok()
                })
                .expect("a free slot");
            heap[root].kids.push(r);
            finish(&mut heap, kind);
            heap.collect_minor().unwrap();
            if !heap.contains(y) {
                lost.push((kind, through_mut));
            }
        }
    }
    assert!(
        lost.is_empty(),
        "lost what a restored object holds: {lost:?}"
    );
}

/// An old object holds a handle (made up, `AnyObj::from_bits`) to a slot
/// never used; the object is restored into it with that serial while a
/// cycle marks, above the cycle's high water. The handle names it again
/// (no barrier saw it); it must survive the next minor cycle.
#[test]
fn an_object_restored_above_the_high_water_stays_named_by_old_holders() {
    let mut lost = Vec::new();
    for kind in [CycleKind::Major, CycleKind::Minor] {
        let mut heap = heap_with(GcConfig::MANUAL);
        let root = heap.spawn(node(0, Vec::new())).root().create().unwrap();
        let s = root.serial();
        let far = 5_000u32;
        let h = AnyObj::from_bits(far as u64 | (s as u64) << 32).unwrap();
        heap[root].any.push(h);
        heap.collect().unwrap();
        begin(&mut heap, kind, root);
        let r = heap.spawn_at(far, s, node(9, Vec::new())).create().unwrap();
        assert_eq!(r.any(), h);
        finish(&mut heap, kind);
        assert!(heap.contains(h));
        heap.collect_minor().unwrap();
        if !heap.contains(h) {
            lost.push(kind);
        }
    }
    assert!(lost.is_empty(), "lost a restored object: {lost:?}");
}

// ---------------------------------------------------------------------------
// The seeded model.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// An interior-mutable class: its handles sit behind a lock, changed
/// through `&Heap` (the read barrier).
#[derive(Object, Default)]
struct Bag {
    kids: Mutex<Vec<AnyObj>>,
}

static ARMED: AtomicBool = AtomicBool::new(false);

/// A field whose hand-written `Trace` panics while `ARMED` (the model's
/// heaps only: the model's seeds run one after another in one test).
#[derive(Default)]
struct Bomb;

impl coreobject::Trace for Bomb {
    const KIND: coreobject::RefKind = coreobject::RefKind::Strong;
    fn trace<V: coreobject::Visitor + ?Sized>(&self, _v: &mut V) {
        if ARMED.load(Ordering::Relaxed) {
            panic!("model bomb");
        }
    }
}

#[derive(Object, Default)]
struct Boom {
    bomb: Bomb,
    n: u64,
}

#[derive(Default)]
struct Model {
    /// Every object the model knows of (alive, or freed and restorable).
    kids: BTreeMap<AnyObj, Vec<AnyObj>>,
    bags: BTreeSet<AnyObj>,
    outer: BTreeMap<AnyObj, AnyObj>,
    roots: BTreeSet<AnyObj>,
    strong: Vec<coreobject::StrongObj<Node>>,
    garbage: BTreeSet<AnyObj>,
    /// Alive in the heap (maybe garbage), as of the last check.
    live: BTreeSet<AnyObj>,
    /// The classes of each handle's creations (and restores), in order.
    created: BTreeMap<AnyObj, Vec<&'static str>>,
    /// Handles seen freed: candidates for a restore.
    freed: Vec<AnyObj>,
    /// GC clusters by root: reaching any member keeps every member.
    clusters: BTreeMap<AnyObj, BTreeSet<AnyObj>>,
}

impl Model {
    fn reachable(&self, inners: bool) -> BTreeSet<AnyObj> {
        let mut by_outer: BTreeMap<AnyObj, Vec<AnyObj>> = BTreeMap::new();
        if inners {
            for (&i, &o) in &self.outer {
                if self.live.contains(&i) {
                    by_outer.entry(o).or_default().push(i);
                }
            }
        }
        let mut seen = BTreeSet::new();
        let mut todo: Vec<AnyObj> = self.roots.iter().copied().collect();
        todo.extend(self.strong.iter().map(|s| s.obj().any()));
        while let Some(o) = todo.pop() {
            if !self.live.contains(&o) || self.garbage.contains(&o) {
                continue;
            }
            if seen.insert(o) {
                for m in self.clusters.values().filter(|m| m.contains(&o)) {
                    todo.extend(m.iter().copied());
                }
                todo.extend(self.kids.get(&o).into_iter().flatten().copied());
                todo.extend(self.outer.get(&o).copied());
                todo.extend(by_outer.get(&o).into_iter().flatten().copied());
            }
        }
        seen
    }
}

fn kids_of(heap: &Heap, h: AnyObj) -> Option<Vec<AnyObj>> {
    if let Some(n) = heap.downcast::<Node>(h) {
        return heap.get(n).map(|n| n.any.clone());
    }
    if let Some(b) = heap.downcast::<Bag>(h) {
        return heap.get(b).map(|b| b.kids.lock().unwrap().clone());
    }
    None
}

fn push_kid(heap: &mut Heap, from: AnyObj, kid: AnyObj) -> bool {
    if let Some(n) = heap.downcast::<Node>(from) {
        heap.get_mut(n).unwrap().any.push(kid);
        return true;
    }
    if let Some(b) = heap.downcast::<Bag>(from) {
        // Through `&Heap`: only the read barrier sees it.
        heap.get(b).unwrap().kids.lock().unwrap().push(kid);
        return true;
    }
    false
}

fn cut_kid(heap: &mut Heap, from: AnyObj, at: usize) {
    if let Some(n) = heap.downcast::<Node>(from) {
        heap.get_mut(n).unwrap().any.remove(at);
    } else if let Some(b) = heap.downcast::<Bag>(from) {
        heap.get(b).unwrap().kids.lock().unwrap().remove(at);
    }
}

type Events = Arc<Mutex<Vec<(AnyObj, &'static str)>>>;

/// Every reachable object alive with its children; the delete events add
/// up (each handle deleted as often as it was created, less one if alive;
/// each event with the object's class).
fn check(heap: &Heap, model: &mut Model, events: &Events, inners: bool, ctx: &str) {
    model.live = model
        .kids
        .keys()
        .copied()
        // (Not those the cycle in flight found unreachable: freed soon.)
        .filter(|&h| heap.flags_of(h).is_some_and(|f| !f.unreachable))
        .collect();
    for o in model.reachable(inners) {
        assert!(heap.contains(o), "{ctx}: reachable {o:?} was freed");
        assert_eq!(
            kids_of(heap, o).as_ref(),
            model.kids.get(&o),
            "{ctx}: {o:?}'s children"
        );
    }
    let mut deleted: BTreeMap<AnyObj, Vec<&'static str>> = BTreeMap::new();
    for &(h, class) in events.lock().unwrap().iter() {
        deleted.entry(h).or_default().push(class);
    }
    for (&h, made) in &model.created {
        let alive = heap.flags_of(h).is_some() as usize;
        let d = deleted.get(&h).map_or(&[][..], |v| &v[..]);
        assert_eq!(
            d.len() + alive,
            made.len(),
            "{ctx}: {h:?} created as {made:?}, deleted as {d:?}, alive {alive}"
        );
        assert_eq!(d, &made[..d.len()], "{ctx}: {h:?}'s classes");
    }
    for h in deleted.keys() {
        assert!(
            model.created.contains_key(h),
            "{ctx}: {h:?} deleted, never created"
        );
    }
}

struct Run {
    seed: u64,
    ops: usize,
}

/// Sliced major and minor cycles (budgets 1, 7 and 60), with objects
/// created between slices through `&mut Heap` (traced at birth), `&Heap`
/// and a second thread, objects restored into freed slots with their old
/// serial (`spawn_at`: handles in old holders name them again), links added
/// and cut (also behind a lock, through `&Heap`: the read barrier), roots
/// added and removed, strong handles taken and dropped, garbage marks set
/// and cleared, inners moved, cycles abandoned by a panicking `Trace`,
/// `collect()` and `collect_minor()` forced mid-cycle, and, between cycles,
/// GC clusters created, grown and dissolved and `generational`,
/// `outer_keeps_inners` and the marking threads toggled. Every reachable
/// object must stay alive with its children, and the batch delete listener
/// must hear of each freed object once, with its class (a restored handle
/// once per life). At the end two major cycles leave only the reachable.
/// Its limits: in 300 seeds it found neither the two restore losses the
/// hand-built tests above pin (main's settle step put back) nor the
/// below-the-high-water loss of d1e497c (the settle step's unmarking
/// removed); `review_four`'s model finds the latter. What it found: the
/// stale inner entry (`a_restored_object_is_no_inner_of_its_former_outer`,
/// an object left after two major cycles) and the outer cycle
/// (`a_restore_makes_no_outer_cycle`, `rename` never returned); restores
/// keep an object's former outer since.
fn model_run(r: Run) {
    let ctx0 = format!("seed {}", r.seed);
    let trace = std::env::var("R5_TRACE").is_ok();
    let mut rng = Rng(r.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut inners = rng.one_in(2);
    let mut heap = heap_with(GcConfig {
        threads: 1 + rng.below(2),
        parallel_threshold: 0,
        outer_keeps_inners: inners,
        ..GcConfig::MANUAL
    });
    let events: Events = Arc::default();
    {
        let events = events.clone();
        heap.on_delete_batch(move |b: &[coreobject::ObjectEvent]| {
            let mut e = events.lock().unwrap();
            for ev in b {
                e.push((ev.object, ev.class.name()));
            }
        });
    }
    let node_class = Node::class().name();
    let bag_class = Bag::class().name();
    let mut model = Model::default();
    let mut id = 0u64;
    for _ in 0..3 {
        id += 1;
        let r = heap
            .spawn(node(id, Vec::new()))
            .root()
            .create()
            .unwrap()
            .any();
        model.kids.insert(r, Vec::new());
        model.created.insert(r, vec![node_class]);
        model.roots.insert(r);
        model.live.insert(r);
    }
    let bomb = heap.spawn(Boom::default()).root().create().unwrap();
    let mut kind = CycleKind::Major;
    let mut budget = 7;
    let mut newest: Vec<AnyObj> = Vec::new();
    for op in 0..r.ops {
        let ctx = format!("{ctx0}, op {op}");
        let in_cycle = heap.gc_phase() != Phase::Idle;
        let reach: Vec<AnyObj> = model.reachable(inners).into_iter().collect();
        let live: Vec<AnyObj> = model
            .live
            .iter()
            .copied()
            .filter(|h| heap.contains(*h))
            .collect();
        // The newest objects still alive (most created during the cycle in
        // flight, if any: young after it).
        let recent: Vec<AnyObj> = newest
            .iter()
            .rev()
            .take(16)
            .copied()
            .filter(|h| heap.contains(*h))
            .collect();
        let pick = |rng: &mut Rng| -> AnyObj {
            if rng.one_in(3) && !recent.is_empty() {
                recent[rng.below(recent.len())]
            } else if rng.one_in(4) && !live.is_empty() {
                live[rng.below(live.len())]
            } else {
                reach[rng.below(reach.len())]
            }
        };
        let choice = rng.below(26);
        if trace {
            eprintln!(
                "op {op}: {choice}, phase {:?}, kind {kind:?}",
                heap.gc_phase()
            );
        }
        match choice {
            0..=4 => {
                // Created, through `&mut Heap` or `&Heap`, maybe a bag,
                // maybe with an outer, maybe linked from a reachable object.
                let kids: Vec<AnyObj> = (0..rng.below(3)).map(|_| pick(&mut rng)).collect();
                let outer = rng.one_in(3).then(|| pick(&mut rng));
                let through_mut = rng.one_in(2);
                id += 1;
                let h = if rng.one_in(4) {
                    let b = Bag {
                        kids: Mutex::new(kids.clone()),
                    };
                    let h = match (through_mut, outer) {
                        (true, Some(o)) => heap.spawn_mut(b).outer(o).create().unwrap(),
                        (true, None) => heap.create_mut(b),
                        (false, Some(o)) => heap.spawn(b).outer(o).create().unwrap(),
                        (false, None) => heap.create(b),
                    }
                    .any();
                    model.bags.insert(h);
                    model.created.entry(h).or_default().push(bag_class);
                    h
                } else {
                    let mut n = node(id, Vec::new());
                    n.any = kids.clone();
                    let h = match (through_mut, outer) {
                        (true, Some(o)) => heap.spawn_mut(n).outer(o).create().unwrap(),
                        (true, None) => heap.create_mut(n),
                        (false, Some(o)) => heap.spawn(n).outer(o).create().unwrap(),
                        (false, None) => heap.create(n),
                    }
                    .any();
                    model.bags.remove(&h);
                    model.created.entry(h).or_default().push(node_class);
                    h
                };
                if trace {
                    eprintln!("  new {h:?} kids {kids:?} outer {outer:?} mut {through_mut}");
                }
                model.kids.insert(h, kids);
                model.live.insert(h);
                newest.push(h);
                match outer {
                    Some(o) => model.outer.insert(h, o),
                    None => model.outer.remove(&h),
                };
                if rng.below(3) != 0 {
                    let from = reach[rng.below(reach.len())];
                    if push_kid(&mut heap, from, h) {
                        model.kids.get_mut(&from).unwrap().push(h);
                    }
                }
                if rng.one_in(5) {
                    heap.add_to_root(h).unwrap();
                    model.roots.insert(h);
                }
            }
            5 => {
                // Created through `&Heap` on another thread.
                let picks: Vec<(AnyObj, AnyObj)> =
                    (0..3).map(|_| (pick(&mut rng), pick(&mut rng))).collect();
                let base = id;
                id += 3;
                let made: Vec<(AnyObj, AnyObj, AnyObj)> = std::thread::scope(|s| {
                    let heap = &heap;
                    s.spawn(move || {
                        picks
                            .iter()
                            .enumerate()
                            .map(|(k, &(a, o))| {
                                let mut n = node(base + k as u64, Vec::new());
                                n.any.push(a);
                                let h = heap.spawn(n).outer(o).create().unwrap().any();
                                (h, a, o)
                            })
                            .collect()
                    })
                    .join()
                    .unwrap()
                });
                for (h, a, o) in made {
                    if trace {
                        eprintln!("  shared {h:?} kid {a:?} outer {o:?}");
                    }
                    model.kids.insert(h, vec![a]);
                    model.outer.insert(h, o);
                    model.bags.remove(&h);
                    model.created.entry(h).or_default().push(node_class);
                    model.live.insert(h);
                    newest.push(h);
                    if rng.one_in(2) {
                        let from = reach[rng.below(reach.len())];
                        if push_kid(&mut heap, from, h) {
                            model.kids.get_mut(&from).unwrap().push(h);
                        }
                    }
                }
            }
            6 | 7 => {
                // A link added between reachable (or live) objects.
                let from = pick(&mut rng);
                let to = pick(&mut rng);
                if trace {
                    eprintln!("  link {from:?} -> {to:?}");
                }
                if push_kid(&mut heap, from, to) {
                    model.kids.get_mut(&from).unwrap().push(to);
                }
            }
            8 => {
                // A link cut.
                let from = reach[rng.below(reach.len())];
                let k = model.kids[&from].len();
                if k > 0 {
                    let at = rng.below(k);
                    if trace {
                        eprintln!("  cut {from:?} -> {:?}", model.kids[&from][at]);
                    }
                    cut_kid(&mut heap, from, at);
                    model.kids.get_mut(&from).unwrap().remove(at);
                }
            }
            9 => {
                // A root removed (never the last three), or added.
                let roots: Vec<AnyObj> = model.roots.iter().copied().collect();
                if roots.len() > 3 && rng.one_in(2) {
                    let h = roots[3 + rng.below(roots.len() - 3)];
                    if heap.remove_from_root(h).is_ok() {
                        model.roots.remove(&h);
                    }
                } else {
                    let h = pick(&mut rng);
                    heap.add_to_root(h).unwrap();
                    model.roots.insert(h);
                }
            }
            10 => {
                // A strong handle taken or dropped.
                if !model.strong.is_empty() && rng.one_in(2) {
                    let k = rng.below(model.strong.len());
                    model.strong.swap_remove(k);
                } else if let Some(n) = heap.downcast::<Node>(pick(&mut rng)) {
                    model.strong.push(heap.strong(n).unwrap());
                }
            }
            11 => {
                // Marked as garbage (never the first three roots), or a mark
                // cleared.
                let g: Vec<AnyObj> = model.garbage.iter().copied().collect();
                if !g.is_empty() && rng.one_in(2) {
                    let h = g[rng.below(g.len())];
                    if heap.clear_garbage(h).is_ok() {
                        model.garbage.remove(&h);
                    }
                } else {
                    let h = pick(&mut rng);
                    if model.roots.iter().take(3).all(|&r| r != h)
                        && heap.mark_as_garbage(h).is_ok()
                    {
                        model.garbage.insert(h);
                        // Its cluster is dissolved.
                        model.clusters.retain(|_, m| !m.contains(&h));
                    }
                }
            }
            12 | 13 => {
                // A freed object restored with its old serial: handles to
                // it anywhere name it again.
                if model.freed.is_empty() {
                    continue;
                }
                let mut kids: Vec<AnyObj> = (0..rng.below(3)).map(|_| pick(&mut rng)).collect();
                // Often the newest object (created during the cycle in
                // flight, if any: young after it).
                if let Some(&n) = recent.first() {
                    if rng.one_in(2) {
                        kids.push(n);
                    }
                }
                // (An object that had an outer is restored under it: one
                // restored with another outer is still listed under the old
                // one, see `a_restored_object_is_no_inner_of_its_former_outer`.)
                let new_outer = rng.one_in(3).then(|| pick(&mut rng));
                id += 1;
                // The newest freed slot not handed out again (a refusal
                // changes nothing).
                let mut made = Err(coreobject::Error::GcDisabled);
                let mut h = model.freed[0];
                let mut outer = new_outer;
                for &f in model.freed.iter().rev() {
                    outer = match model.outer.get(&f) {
                        Some(&o) => Some(o),
                        None => new_outer,
                    };
                    let mut n = node(id, Vec::new());
                    n.any = kids.clone();
                    let mut s = heap.spawn_at(f.index(), f.serial(), n);
                    if let Some(o) = outer {
                        s = s.outer(o);
                    }
                    h = f;
                    made = s.create();
                    if made.is_ok() {
                        break;
                    }
                }
                if trace {
                    eprintln!("  restore {h:?}: {made:?}");
                }
                if let Ok(r) = made {
                    assert_eq!(r.any(), h);
                    if trace {
                        eprintln!("  restored {h:?} kids {kids:?} outer {outer:?}");
                    }
                    model.freed.retain(|&f| f != h);
                    model.kids.insert(h, kids);
                    model.bags.remove(&h);
                    model.created.entry(h).or_default().push(node_class);
                    model.live.insert(h);
                    model.garbage.remove(&h);
                    model.roots.remove(&h);
                    match outer {
                        Some(o) => model.outer.insert(h, o),
                        None => model.outer.remove(&h),
                    };
                    if rng.one_in(2) {
                        let from = reach[rng.below(reach.len())];
                        if push_kid(&mut heap, from, h) {
                            model.kids.get_mut(&from).unwrap().push(h);
                        }
                    }
                }
            }
            14 => {
                // An inner moved under another object.
                let movable: Vec<AnyObj> = reach
                    .iter()
                    .copied()
                    .filter(|o| model.outer.contains_key(o))
                    .collect();
                if !movable.is_empty() {
                    let x = movable[rng.below(movable.len())];
                    let to = pick(&mut rng);
                    if heap.rename(x).outer(to).apply().is_ok() {
                        model.outer.insert(x, to);
                    }
                }
            }
            15 if in_cycle && rng.one_in(3) => {
                // A panicking `Trace` abandons the cycle, if marking reaches
                // the bomb (written: re-scanned) in this slice.
                heap.get_mut(bomb).unwrap().n += 1;
                ARMED.store(true, Ordering::Relaxed);
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    step(&mut heap, kind, budget)
                }));
                ARMED.store(false, Ordering::Relaxed);
                if trace {
                    eprintln!("  bomb: {}", if r.is_err() { "abandoned" } else { "no" });
                }
            }
            16 if in_cycle && rng.one_in(4) => {
                heap.collect().unwrap();
            }
            17 if rng.one_in(3) => {
                heap.collect_minor().unwrap();
            }
            19 if !in_cycle => {
                // Clusters change between cycles: one created, grown or
                // dissolved.
                let roots: Vec<AnyObj> = model.clusters.keys().copied().collect();
                match rng.below(3) {
                    0 | 1 if !roots.is_empty() && rng.one_in(2) => {
                        let r = roots[rng.below(roots.len())];
                        let id = heap.cluster_of(r).expect("a cluster root");
                        if rng.one_in(3) {
                            if heap.dissolve_cluster(id).is_ok() {
                                model.clusters.remove(&r);
                            }
                        } else {
                            let h = pick(&mut rng);
                            if heap.add_to_cluster(id, h).is_ok() {
                                model.clusters.get_mut(&r).unwrap().insert(h);
                            }
                        }
                    }
                    _ => {
                        let h = pick(&mut rng);
                        if let Ok(id) = heap.create_cluster(h) {
                            let members = heap.cluster_members(id).into_iter().collect();
                            if trace {
                                eprintln!("  cluster {h:?}: {members:?}");
                            }
                            model.clusters.insert(h, members);
                        }
                    }
                }
            }
            18 if !in_cycle => {
                // Configuration changed between cycles.
                let c = heap.gc_config_mut();
                match rng.below(3) {
                    0 => c.generational = !c.generational,
                    1 => {
                        c.outer_keeps_inners = !c.outer_keeps_inners;
                        inners = c.outer_keeps_inners;
                    }
                    _ => c.threads = 3 - c.threads.clamp(1, 2),
                }
                if trace {
                    let c = heap.gc_config();
                    eprintln!(
                        "  config gen {} inners {} threads {}",
                        c.generational, c.outer_keeps_inners, c.threads
                    );
                }
            }
            _ => {
                // A slice (a new cycle, major or minor, if none is in flight).
                if !in_cycle {
                    kind = if rng.one_in(3) {
                        CycleKind::Major
                    } else {
                        CycleKind::Minor
                    };
                    budget = [1, 7, 60][rng.below(3)];
                }
                step(&mut heap, kind, budget);
            }
        }
        check(&heap, &mut model, &events, inners, &ctx);
        // What is gone may be restored.
        let gone: Vec<AnyObj> = model
            .kids
            .keys()
            .copied()
            .filter(|&h| heap.flags_of(h).is_none() && !model.freed.contains(&h))
            .collect();
        for h in gone {
            model.clusters.remove(&h);
            for m in model.clusters.values_mut() {
                m.remove(&h);
            }
            model.freed.push(h);
            model.garbage.remove(&h);
            model.roots.remove(&h);
        }
        if newest.len() > 64 {
            newest.drain(..newest.len() - 16);
        }
        if model.freed.len() > 64 {
            model.freed.drain(..model.freed.len() - 64);
        }
    }
    model.strong.clear();
    heap.collect().unwrap();
    heap.collect().unwrap();
    check(&heap, &mut model, &events, inners, &ctx0);
    let reach = model.reachable(inners);
    let n = heap.iter_of::<Node>().count() + heap.iter_of::<Bag>().count();
    if n != reach.len() {
        for (h, _) in heap.iter_of::<Node>() {
            if !reach.contains(&h.any()) {
                eprintln!(
                    "left: {h:?} {:?} outer {:?} model outer {:?} created {:?} garbage {}",
                    heap.flags_of(h),
                    heap.outer_of(h),
                    model.outer.get(&h.any()),
                    model.created.get(&h.any()),
                    model.garbage.contains(&h.any())
                );
                eprintln!("  chains {:?}", heap.reference_chains(h, 3));
                for (o, k) in &model.kids {
                    if k.contains(&h.any()) {
                        eprintln!(
                            "  held by {o:?} alive {} reach {}",
                            heap.contains(*o),
                            reach.contains(o)
                        );
                    }
                }
            }
        }
    }
    assert_eq!(n, reach.len(), "{ctx0}: unreachable objects left");
}

/// Replay one seed with `R5_ONE=seed` (`R5_TRACE=1` prints the
/// operations), more seeds with `R5_SEEDS=n`.
#[test]
#[cfg_attr(miri, ignore = "safe code only; minutes under miri")]
fn mixed_model_with_restores_roots_strong_garbage_and_config() {
    let ops = 500;
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload().downcast_ref::<&str>() != Some(&"model bomb") {
            default(info);
        }
    }));
    if let Ok(s) = std::env::var("R5_ONE") {
        model_run(Run {
            seed: s.parse().unwrap(),
            ops,
        });
        return;
    }
    let seeds: u64 = std::env::var("R5_SEEDS").map_or(40, |n| n.parse().unwrap());
    for seed in 0..seeds {
        model_run(Run { seed, ops });
    }
}

/// An inner freed with its entry left in the outer → inners index (dropped
/// lazily, as stale) and then restored into its slot with its old serial
/// and no outer (`spawn_at`): the stale entry names it again. It must not
/// count as an inner of its former outer: not listed by
/// `for_each_with_outer`, and not kept alive by it under
/// `outer_keeps_inners`.
#[test]
fn a_restored_object_is_no_inner_of_its_former_outer() {
    let mut heap = heap_with(GcConfig {
        outer_keeps_inners: true,
        ..GcConfig::MANUAL
    });
    let outer = heap.spawn(node(0, Vec::new())).root().create().unwrap();
    let inners: Vec<_> = (0..4)
        .map(|i| {
            heap.spawn(node(1 + i, Vec::new()))
                .outer(outer)
                .create()
                .unwrap()
        })
        .collect();
    heap.collect().unwrap();
    let gone = inners[0];
    heap.mark_as_garbage(gone).unwrap();
    heap.collect().unwrap();
    assert!(!heap.contains(gone));
    let back = heap
        .spawn_at(gone.index(), gone.serial(), node(9, Vec::new()))
        .create()
        .unwrap();
    assert_eq!(heap.outer_of(back), None);
    let mut listed = Vec::new();
    heap.for_each_with_outer(outer, |o| listed.push(o.id()));
    let mut wrong = Vec::new();
    if listed.contains(&back.any()) {
        wrong.push("listed as an inner of its former outer");
    }
    heap.collect().unwrap();
    heap.collect().unwrap();
    if heap.contains(back) {
        wrong.push("unreachable, kept by its former outer's stale entry");
    }
    assert!(wrong.is_empty(), "{wrong:?}");
}

/// An inner outlives its outer (the outer marked as garbage and freed:
/// the inner keeps a stale outer handle), and the outer is restored with
/// its old serial under that inner (`spawn_at(..).outer(inner)`): each is
/// now the other's outer, a cycle `rename` refuses (`Error::OuterCycle`)
/// and walks without end once it exists (`Rename::apply` follows the new
/// outer's chain until it meets the moved object: a third object moved
/// under either hangs the caller).
#[test]
fn a_restore_makes_no_outer_cycle() {
    let mut heap = heap_with(GcConfig::MANUAL);
    let a = heap.spawn(node(1, Vec::new())).root().create().unwrap();
    let x = heap
        .spawn(node(2, Vec::new()))
        .outer(a)
        .root()
        .create()
        .unwrap();
    heap.mark_as_garbage(a).unwrap();
    heap.collect().unwrap();
    assert!(!heap.contains(a) && heap.contains(x));
    // (`outer_of` answers `None` for a freed outer; the header keeps it.)
    let restored = heap
        .spawn_at(a.index(), a.serial(), node(3, Vec::new()))
        .outer(x)
        .root()
        .create();
    let cycle =
        restored.is_ok() && heap.outer_of(a) == Some(x.any()) && heap.outer_of(x) == Some(a.any());
    // (Were it formed, moving a third object under `x` would not return:
    // not tried here.)
    assert!(!cycle, "a and x are each other's outer");
}

/// The purge's quick path over more than `RELEASE_EVERY` (2,048) frees
/// and `COOL_EVERY` (256) in one cycle, sliced, with a batch delete
/// listener, outers (some freed objects through `free_one`, the rest
/// through the quick path, into the same batch) and clusters: each freed
/// object heard of once, with its class; the slots reused at once, and no
/// stale handle resolves to their new objects.
#[test]
fn a_long_sliced_purge_hears_each_object_once_and_no_stale_handle_resolves() {
    for inners in [false, true] {
        let mut heap = heap_with(GcConfig {
            outer_keeps_inners: inners,
            ..GcConfig::MANUAL
        });
        let events: Events = Arc::default();
        {
            let events = events.clone();
            heap.on_delete_batch(move |b: &[coreobject::ObjectEvent]| {
                let mut e = events.lock().unwrap();
                e.extend(b.iter().map(|ev| (ev.object, ev.class.name())));
            });
        }
        let root = heap.spawn(node(0, Vec::new())).root().create().unwrap();
        let n = if cfg!(miri) { 300 } else { 6_000 };
        let mut doomed = Vec::new();
        for i in 0..n {
            let h = if i % 5 == 0 {
                heap.spawn(node(i, Vec::new()))
                    .outer(doomed.last().copied().unwrap_or(root))
                    .create()
                    .unwrap()
            } else {
                heap.create(node(i, Vec::new()))
            };
            doomed.push(h);
        }
        // All kept through the root for a cycle (a cluster among them).
        let kept: Vec<_> = doomed.clone();
        heap[root].kids.extend(kept.iter().copied());
        heap.create_cluster(kept[1]).unwrap();
        heap.collect().unwrap();
        // What the root reaches: `from`, their outers' chains and (under
        // the rule) the inners of what is reached.
        let closure = |heap: &Heap, from: &[AnyObj]| {
            let mut seen = BTreeSet::new();
            let mut todo = from.to_vec();
            while let Some(o) = todo.pop() {
                if seen.insert(o) {
                    todo.extend(heap.outer_of(o));
                    if inners {
                        heap.for_each_with_outer(o, |r| todo.push(r.id()));
                    }
                }
            }
            seen
        };
        let mut from = vec![root.any()];
        from.extend(kept.iter().map(|k| k.any()));
        from.extend(heap.cluster_members(heap.cluster_of(kept[1]).unwrap()));
        let before = closure(&heap, &from);
        for &h in &doomed {
            assert_eq!(
                heap.contains(h),
                before.contains(&h.any()),
                "inners {inners}"
            );
        }
        // Now all but the root (and what it keeps) goes, a few units at a
        // time.
        heap[root].kids.clear();
        events.lock().unwrap().clear();
        while heap.step(5).completed.is_none() {}
        heap.collect().unwrap();
        let after = closure(&heap, &[root.any()]);
        let mut heard: BTreeMap<AnyObj, usize> = BTreeMap::new();
        for &(h, class) in events.lock().unwrap().iter() {
            assert_eq!(class, Node::class().name());
            *heard.entry(h).or_default() += 1;
        }
        let mut freed = 0;
        for &h in &doomed {
            let alive = heap.contains(h);
            assert_eq!(alive, after.contains(&h.any()), "inners {inners}: {h:?}");
            let gone = (before.contains(&h.any()) && !alive) as usize;
            freed += gone;
            assert_eq!(heard.get(&h.any()).copied().unwrap_or(0), gone, "{h:?}");
        }
        assert_eq!(heard.len(), freed, "inners {inners}");
        assert!(
            freed > 2_048 || cfg!(miri),
            "inners {inners}: {freed} freed"
        );
        // The slots are reused; the old handles stay stale.
        let fresh: Vec<_> = (0..n).map(|i| heap.create(node(i, Vec::new()))).collect();
        for &h in &doomed {
            if !after.contains(&h.any()) {
                assert!(!heap.contains(h) && heap.get(h).is_none());
            }
        }
        for (i, &h) in fresh.iter().enumerate() {
            assert_eq!(heap[h].id, i as u64);
        }
    }
}

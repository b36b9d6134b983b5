//! Minor cycles look only at the young objects that may need a look: the
//! pool's new objects, young objects that joined a GC cluster and young
//! inners filed under an outer since the last cycle started. A seeded model
//! of sliced minor and major cycles with every such case (created through
//! `&mut Heap` and through `&Heap` on a second thread, clusters made
//! between cycles and refused mid-cycle, `outer_keeps_inners` toggled
//! between cycles) checks that nothing reachable is freed and that
//! unreachable young objects go with the first cycle that starts after
//! their creation; a work-unit test checks that plain young objects cost
//! the looks nothing.

use std::collections::{BTreeMap, BTreeSet};

use coreobject::{
    ClusterError, ClusterId, CycleKind, GcConfig, Heap, HeapConfig, Obj, Object, Phase,
};

mod common;
use common::Rng;

#[derive(Object, Default)]
struct Node {
    id: u64,
    kids: Vec<Obj<Node>>,
}

fn full_tests() -> bool {
    std::env::var("COREOBJECT_FULL_TESTS").is_ok_and(|v| v != "0")
}

struct M {
    h: Obj<Node>,
    kids: Vec<u64>,
    rooted: bool,
    pool: bool,
    outer: Option<u64>,
    cluster: Option<u64>,
    /// Cycles started before it was created: it is young in the cycle of
    /// that number (the first that starts after its creation), unless it
    /// was created while a cycle marked (that cycle scanned it: it is old
    /// from then on, and `born` is one less).
    born: u64,
}

#[derive(Default)]
struct Model {
    objs: BTreeMap<u64, M>,
    clusters: BTreeMap<u64, (ClusterId, Vec<u64>)>,
    next: u64,
    /// Cycles started so far.
    starts: u64,
    /// A cycle is marking: what is created now is scanned by it, and old
    /// after it.
    marking: bool,
}

impl Model {
    /// Reached from `seeds` through references, outers, inners (when
    /// `inners`) and cluster mates.
    fn closure(&self, seeds: impl Iterator<Item = u64>, inners: bool) -> BTreeSet<u64> {
        let mut by_outer: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        if inners {
            for (&id, m) in &self.objs {
                if let Some(o) = m.outer {
                    by_outer.entry(o).or_default().push(id);
                }
            }
        }
        let mut seen = BTreeSet::new();
        let mut stack: Vec<u64> = seeds.collect();
        while let Some(id) = stack.pop() {
            let Some(m) = self.objs.get(&id) else {
                continue;
            };
            if !seen.insert(id) {
                continue;
            }
            stack.extend(&m.kids);
            stack.extend(m.outer);
            if let Some(v) = by_outer.get(&id) {
                stack.extend(v);
            }
            if let Some(c) = m.cluster {
                stack.extend(&self.clusters[&c].1);
            }
        }
        seen
    }

    fn seeds(&self) -> impl Iterator<Item = u64> + '_ {
        self.objs
            .iter()
            .filter(|(_, m)| m.rooted || m.pool)
            .map(|(&id, _)| id)
    }

    fn reachable(&self, inners: bool) -> BTreeSet<u64> {
        self.closure(self.seeds(), inners)
    }

    /// What a cycle starting now must free by its end: for a major one,
    /// everything unreachable; for a minor one, the young objects not
    /// reached from the roots, the pool and the old objects (an old object
    /// stays until a major cycle, and keeps what it references).
    fn doomed(&self, kind: CycleKind, inners: bool) -> Vec<u64> {
        let live = match kind {
            CycleKind::Major => self.reachable(inners),
            CycleKind::Minor => {
                let old = self
                    .objs
                    .iter()
                    .filter(|(_, m)| m.born < self.starts)
                    .map(|(&id, _)| id);
                self.closure(self.seeds().chain(old), inners)
            }
        };
        self.objs
            .keys()
            .filter(|id| !live.contains(id))
            .copied()
            .collect()
    }

    fn add(&mut self, h: Obj<Node>, outer: Option<u64>, pool: bool) {
        let id = self.next;
        self.next += 1;
        let m = M {
            h,
            kids: Vec::new(),
            rooted: false,
            pool,
            outer,
            cluster: None,
            born: self.starts - u64::from(self.marking),
        };
        self.objs.insert(id, m);
    }

    fn pick(&self, rng: &mut Rng, among: &BTreeSet<u64>) -> Option<u64> {
        if among.is_empty() {
            return None;
        }
        among.iter().nth(rng.below(among.len())).copied()
    }
}

/// Every reachable object resolves to itself with its kids; drops from the
/// model the objects the heap freed (none of them reachable).
fn check(heap: &Heap, model: &mut Model, inners: bool, at: &str) {
    let reach = model.reachable(inners);
    let mut gone = Vec::new();
    for (&id, m) in &model.objs {
        match heap.get(m.h) {
            Some(n) => {
                assert_eq!(n.id, id, "{at}: object {id} holds another value");
                let kids: Vec<u64> = n
                    .kids
                    .iter()
                    .map(|&k| heap.get(k).map_or(u64::MAX, |k| k.id))
                    .collect();
                if reach.contains(&id) {
                    assert_eq!(kids, m.kids, "{at}: object {id} lost a kid");
                }
            }
            None => {
                assert!(
                    !reach.contains(&id),
                    "{at}: reachable object {id} freed ({:?})",
                    m_desc(m)
                );
                gone.push(id);
            }
        }
    }
    for id in gone {
        model.objs.remove(&id);
        // A cluster goes with its root.
        if let Some((_, members)) = model.clusters.remove(&id) {
            for m in members {
                if let Some(o) = model.objs.get_mut(&m) {
                    o.cluster = None;
                }
            }
        }
    }
}

fn m_desc(m: &M) -> String {
    format!(
        "rooted {} pool {} outer {:?} cluster {:?} born {}",
        m.rooted, m.pool, m.outer, m.cluster, m.born
    )
}

fn node(id: u64, kids: Vec<Obj<Node>>) -> Node {
    Node { id, kids }
}

fn run(seed: u64, ops: usize) {
    let world_n = if cfg!(miri) { 20 } else { 300 };
    // Ballast outside the model, so that creation through `&Heap` goes
    // through the per-thread caches (heaps of 8,192 objects or more).
    let ballast_n = if cfg!(miri) { 0 } else { 9_000 };
    let gc = GcConfig {
        outer_keeps_inners: true,
        ..GcConfig::MANUAL
    };
    let mut heap = Heap::with_config(HeapConfig {
        gc,
        disregard_pool_size: 64,
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    let mut model = Model::default();
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut inners = true;
    // The pool: open while the first cycle runs, filled between its slices,
    // also from a second thread.
    heap.open_disregard_for_gc().unwrap();
    let p = heap.create(node(model.next, Vec::new()));
    model.add(p, None, true);
    let mut cycle: Option<(CycleKind, bool, Vec<u64>)> = None;
    let mut pool_open = true;

    for op in 0..ops {
        let at = format!("seed {seed} op {op}");
        if pool_open && op >= 12 {
            heap.close_disregard_for_gc();
            pool_open = false;
            let ballast = heap.spawn(Node::default()).root().create().unwrap();
            for _ in 0..ballast_n {
                let k = heap.create(Node::default());
                heap[ballast].kids.push(k);
            }
            // The world: a rooted holder of plain objects, old after the
            // first cycle.
            let holder = heap
                .spawn(node(model.next, Vec::new()))
                .root()
                .create()
                .unwrap();
            let hid = model.next;
            model.add(holder, None, false);
            model.objs.get_mut(&hid).unwrap().rooted = true;
            for _ in 0..world_n {
                let k = heap.create(node(model.next, Vec::new()));
                let kid = model.next;
                model.add(k, None, false);
                heap[holder].kids.push(k);
                model.objs.get_mut(&hid).unwrap().kids.push(kid);
            }
            continue;
        }
        let reach = model.reachable(inners);
        let idle = heap.gc_phase() == Phase::Idle;
        model.marking = heap.gc_phase() == Phase::Mark;
        let choice = match rng.below(if pool_open { 4 } else { 20 }) {
            2 | 3 if pool_open => 99,
            c => c,
        };
        match choice {
            // Pool objects while it is open (mid-cycle too), through `&mut`
            // and from a second thread, referencing earlier pool objects.
            0 | 1 if pool_open => {
                let kid = model.pick(&mut rng, &reach).map(|k| (k, model.objs[&k].h));
                let id = model.next;
                let h = if rng.below(2) == 0 {
                    heap.create(node(id, kid.iter().map(|k| k.1).collect()))
                } else {
                    let heap = &heap;
                    std::thread::scope(|s| {
                        s.spawn(|| heap.create(node(id, kid.iter().map(|k| k.1).collect())))
                            .join()
                            .unwrap()
                    })
                };
                model.add(h, None, true);
                model.objs.get_mut(&id).unwrap().kids = kid.iter().map(|k| k.0).collect();
            }
            // Plain young objects: garbage, or stored into a reachable one.
            0..=2 => {
                let id = model.next;
                let h = heap.create_mut(node(id, Vec::new()));
                model.add(h, None, false);
                if rng.below(2) == 0 {
                    if let Some(a) = model.pick(&mut rng, &reach) {
                        heap[model.objs[&a].h].kids.push(h);
                        model.objs.get_mut(&a).unwrap().kids.push(id);
                    }
                }
            }
            // Young inners of (mostly old) outers, kept by nothing else:
            // through `&mut Heap`, or a batch through `&Heap` on a second
            // thread.
            3 | 4 => {
                let Some(o) = model.pick(&mut rng, &reach) else {
                    continue;
                };
                let oh = model.objs[&o].h;
                if rng.below(2) == 0 {
                    let id = model.next;
                    let h = heap
                        .spawn_mut(node(id, Vec::new()))
                        .outer(oh)
                        .create()
                        .unwrap();
                    model.add(h, Some(o), false);
                } else {
                    let n = 1 + rng.below(4);
                    let first = model.next;
                    let heap = &heap;
                    let made: Vec<Obj<Node>> = std::thread::scope(|s| {
                        s.spawn(|| {
                            (0..n as u64)
                                .map(|k| {
                                    heap.spawn(node(first + k, Vec::new()))
                                        .outer(oh)
                                        .create()
                                        .unwrap()
                                })
                                .collect()
                        })
                        .join()
                        .unwrap()
                    });
                    for h in made {
                        model.add(h, Some(o), false);
                    }
                }
            }
            // Plain objects from a second thread, then stored (or not).
            5 => {
                let first = model.next;
                let n = 1 + rng.below(8);
                let heap_ref = &heap;
                let made: Vec<Obj<Node>> = std::thread::scope(|s| {
                    s.spawn(|| {
                        (0..n as u64)
                            .map(|k| heap_ref.create(node(first + k, Vec::new())))
                            .collect()
                    })
                    .join()
                    .unwrap()
                });
                for h in made {
                    let id = model.next;
                    model.add(h, None, false);
                    if rng.below(2) == 0 {
                        if let Some(a) = model.pick(&mut rng, &reach) {
                            heap[model.objs[&a].h].kids.push(h);
                            model.objs.get_mut(&a).unwrap().kids.push(id);
                        }
                    }
                }
            }
            // Links and unlinks between reachable objects.
            6 => {
                if let (Some(a), Some(b)) =
                    (model.pick(&mut rng, &reach), model.pick(&mut rng, &reach))
                {
                    let bh = model.objs[&b].h;
                    heap[model.objs[&a].h].kids.push(bh);
                    model.objs.get_mut(&a).unwrap().kids.push(b);
                }
            }
            7 | 8 => {
                if let Some(a) = model.pick(&mut rng, &reach) {
                    if !model.objs[&a].kids.is_empty() {
                        let k = rng.below(model.objs[&a].kids.len());
                        heap[model.objs[&a].h].kids.remove(k);
                        model.objs.get_mut(&a).unwrap().kids.remove(k);
                    }
                }
            }
            // Roots.
            9 => {
                if let Some(a) = model.pick(&mut rng, &reach) {
                    let m = model.objs.get_mut(&a).unwrap();
                    if !m.pool && m.cluster.is_none() {
                        m.rooted = !m.rooted;
                        if m.rooted {
                            heap.add_to_root(m.h).unwrap();
                        } else {
                            heap.remove_from_root(m.h).unwrap();
                        }
                    }
                }
            }
            // Clusters: made between cycles (refused mid-cycle) from a
            // reachable object, its inside members gathered by the heap.
            10 => {
                let Some(r) = model.pick(&mut rng, &reach) else {
                    continue;
                };
                let rh = model.objs[&r].h;
                match heap.create_cluster(rh) {
                    Ok(c) => {
                        assert!(idle, "{at}: a cluster made mid-cycle");
                        let members: Vec<u64> = heap
                            .cluster_members(c)
                            .iter()
                            .map(|&a| {
                                let found = model.objs.iter().find(|(_, m)| m.h.any() == a);
                                *found.expect("a member in the model").0
                            })
                            .collect();
                        for &m in &members {
                            model.objs.get_mut(&m).unwrap().cluster = Some(r);
                        }
                        model.clusters.insert(r, (c, members));
                    }
                    Err(ClusterError::CycleInFlight) => assert!(!idle),
                    Err(_) => {}
                }
            }
            // A young object kept only by the cluster it joins (one with
            // old members, mostly).
            11 | 12 => {
                let Some((&r, &(c, _))) = model
                    .clusters
                    .iter()
                    .nth(rng.below(model.clusters.len().max(1)))
                else {
                    continue;
                };
                let id = model.next;
                let h = heap.create_mut(node(id, Vec::new()));
                model.add(h, None, false);
                match heap.add_to_cluster(c, h) {
                    Ok(()) => {
                        assert!(idle);
                        model.objs.get_mut(&id).unwrap().cluster = Some(r);
                        model.clusters.get_mut(&r).unwrap().1.push(id);
                    }
                    Err(ClusterError::CycleInFlight) => assert!(!idle),
                    Err(e) => panic!("{at}: {e:?}"),
                }
            }
            13 if idle && rng.below(4) == 0 => {
                if let Some((&r, &(c, _))) = model
                    .clusters
                    .iter()
                    .nth(rng.below(model.clusters.len().max(1)))
                {
                    heap.dissolve_cluster(c).unwrap();
                    for m in model.clusters.remove(&r).unwrap().1 {
                        if let Some(o) = model.objs.get_mut(&m) {
                            o.cluster = None;
                        }
                    }
                }
            }
            // `outer_keeps_inners` toggled between cycles.
            14 if idle && rng.below(3) == 0 => {
                inners = !inners;
                heap.gc_config_mut().outer_keeps_inners = inners;
            }
            _ => {
                // A slice of a minor (mostly) or major cycle, or a whole one.
                let kind = if rng.below(6) == 0 {
                    CycleKind::Major
                } else {
                    CycleKind::Minor
                };
                let work = [1usize, 5, 50, 500][rng.below(4)];
                let t = if cycle.is_none() && rng.below(40) == 0 {
                    let doomed = model.doomed(kind, inners);
                    model.starts += 1;
                    let s = match kind {
                        CycleKind::Major => heap.collect().unwrap(),
                        CycleKind::Minor => heap.collect_minor().unwrap(),
                    };
                    assert_eq!(s.kind, kind);
                    for id in doomed {
                        if let Some(m) = model.objs.get(&id) {
                            assert!(
                                !heap.contains(m.h),
                                "{at}: unreachable object {id} survived a cycle"
                            );
                        }
                    }
                    check(&heap, &mut model, inners, &at);
                    continue;
                } else {
                    if cycle.is_none() {
                        // The kind the step will start (a minor without a
                        // remembered set runs as a major: not here).
                        let doomed = model.doomed(kind, inners);
                        let t = match kind {
                            CycleKind::Major => heap.step(work),
                            CycleKind::Minor => heap.step_minor(work),
                        };
                        assert!(t.started.is_some());
                        model.starts += 1;
                        cycle = Some((kind, inners, doomed));
                        t
                    } else {
                        heap.step(work)
                    }
                };
                if let Some(s) = t.completed {
                    let (k, _, doomed) = cycle.take().unwrap();
                    assert_eq!(s.kind, k);
                    for id in doomed {
                        if let Some(m) = model.objs.get(&id) {
                            assert!(
                                !heap.contains(m.h),
                                "{at}: unreachable object {id} ({}) survived a {k:?} cycle",
                                m_desc(m)
                            );
                        }
                    }
                }
                // Creating a cluster mid-cycle is refused.
                if cycle.is_some() {
                    if let Some(r) = model.pick(&mut rng, &reach) {
                        assert_eq!(
                            heap.create_cluster(model.objs[&r].h).unwrap_err(),
                            ClusterError::CycleInFlight
                        );
                    }
                }
                check(&heap, &mut model, inners, &at);
            }
        }
    }
    // Finish: a whole major cycle frees everything unreachable.
    if cycle.is_some() {
        heap.collect().unwrap();
    }
    check(&heap, &mut model, inners, "end");
    let doomed = model.doomed(CycleKind::Major, inners);
    heap.collect().unwrap();
    for id in doomed {
        assert!(
            !heap.contains(model.objs[&id].h),
            "end: unreachable object {id} survived a major cycle"
        );
    }
    check(&heap, &mut model, inners, "end");
    assert!(heap.verify_clusters().is_empty());
}

#[test]
#[cfg_attr(
    miri,
    ignore = "safe code only (the looks add no unsafe code); minutes under miri, and the table and collector code it reaches runs under miri in the other files"
)]
fn sliced_minor_cycles_keep_what_looks_must_keep() {
    let (seeds, ops) = if cfg!(miri) {
        (1, 80)
    } else if full_tests() {
        (7, 3_000)
    } else {
        (6, 2_500)
    };
    // `LOOKS_SEED=n` replays one seed.
    if let Some(seed) = std::env::var("LOOKS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return run(seed, ops);
    }
    for seed in 1..=seeds {
        run(seed, ops);
    }
}

/// A minor cycle over plain young objects spends no look on them: its
/// marking costs units for what it marks, not for what was allocated.
#[test]
fn plain_young_objects_cost_the_looks_nothing() {
    let n = if cfg!(miri) { 300 } else { 20_000 };
    for inners in [false, true] {
        let mut heap = Heap::with_config(HeapConfig {
            gc: GcConfig {
                outer_keeps_inners: inners,
                ..GcConfig::MANUAL
            },
            ..HeapConfig::DEFAULT
        })
        .unwrap();
        let world = heap.spawn(node(0, Vec::new())).root().create().unwrap();
        heap.collect().unwrap();
        for i in 0..n {
            heap.create(node(i, Vec::new()));
        }
        // A few that do need a look: inners of the old world.
        let kept: Vec<_> = (0..5)
            .map(|i| {
                heap.spawn(node(i, Vec::new()))
                    .outer(world)
                    .create()
                    .unwrap()
            })
            .collect();
        let mut mark_units = 0;
        loop {
            let t = heap.step_minor(1);
            if t.began_in == Phase::Mark || t.started.is_some() {
                mark_units += t.work;
            }
            if let Some(s) = t.completed {
                assert_eq!(s.kind, CycleKind::Minor);
                assert_eq!(s.freed, n as usize + if inners { 0 } else { 5 });
                break;
            }
        }
        assert_eq!(kept.iter().all(|&k| heap.contains(k)), inners);
        // The root list and the inners' looks and marks, whatever `n` is.
        assert!(
            mark_units <= 32,
            "{mark_units} units of marking for {n} plain young objects"
        );
    }
}

fn pool_heap(inners: bool) -> (Heap, Obj<Node>) {
    let mut heap = Heap::with_config(HeapConfig {
        gc: GcConfig {
            outer_keeps_inners: inners,
            ..GcConfig::MANUAL
        },
        disregard_pool_size: 4,
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    heap.open_disregard_for_gc().unwrap();
    let p = heap.create(node(0, Vec::new()));
    heap.close_disregard_for_gc();
    heap.collect().unwrap();
    (heap, p)
}

/// A pool object is permanent: under `outer_keeps_inners` it keeps a young
/// inner, which a minor cycle must not free (main freed it: the look asked
/// whether the outer was marked, and pool objects never are).
#[test]
fn a_young_inner_of_a_pool_object_survives_a_minor_cycle() {
    let (mut heap, p) = pool_heap(true);
    let kid = heap.create(node(2, Vec::new()));
    let y = heap.spawn(node(1, vec![kid])).outer(p).create().unwrap();
    let s = heap.collect_minor().unwrap();
    assert_eq!(s.kind, CycleKind::Minor);
    assert!(heap.contains(y) && heap.contains(kid));
    assert_eq!(heap[y].kids, [kid]);
    heap.collect().unwrap();
    assert!(heap.contains(y) && heap.contains(kid));
}

/// A pool object written while a major cycle marks, storing an object that
/// cycle creates (young after it), joins the remembered set when the cycle
/// completes, as an old object does (main left it out: it asked for the
/// pool object's mark, which it never has), so the next minor cycle keeps
/// what it stored.
#[test]
fn a_pool_object_written_while_a_cycle_marks_keeps_what_it_stores() {
    let (mut heap, p) = pool_heap(false);
    let world = heap.spawn(node(1, Vec::new())).root().create().unwrap();
    for i in 0..100 {
        let k = heap.create(node(10 + i, Vec::new()));
        heap[world].kids.push(k);
    }
    heap.collect().unwrap();
    let t = heap.step(1);
    assert!(t.started.is_some() && heap.gc_phase() == Phase::Mark);
    let x = heap.create(node(2, Vec::new()));
    heap[p].kids.push(x);
    while heap.step(1_000).completed.is_none() {}
    let s = heap.collect_minor().unwrap();
    assert_eq!(s.kind, CycleKind::Minor);
    assert!(
        heap.contains(x),
        "stored in a pool object, freed by a minor cycle"
    );
    assert_eq!(heap[p].kids, [x]);
}

/// An inner created while outers did not keep their inners is looked at by
/// the first minor cycle after the rule is turned on, whether the outer →
/// inners index was kept (for `for_each_with_outer`) or built then.
#[test]
fn inners_made_before_the_rule_is_turned_on_are_looked_at() {
    for index_kept in [false, true] {
        let mut heap = Heap::with_config(HeapConfig {
            gc: GcConfig::MANUAL,
            ..HeapConfig::DEFAULT
        })
        .unwrap();
        let world = heap.spawn(node(0, Vec::new())).root().create().unwrap();
        heap.collect().unwrap();
        if index_kept {
            heap.for_each_with_outer(world, |_| {});
        }
        let y = heap
            .spawn(node(1, Vec::new()))
            .outer(world)
            .create()
            .unwrap();
        heap.gc_config_mut().outer_keeps_inners = true;
        let s = heap.collect_minor().unwrap();
        assert_eq!(s.kind, CycleKind::Minor);
        assert!(heap.contains(y), "index kept: {index_kept}");
        // Turned off: the next cycle frees it (it is old: a major one).
        heap.gc_config_mut().outer_keeps_inners = false;
        heap.collect().unwrap();
        assert!(!heap.contains(y));
    }
}

//! What a minor cycle marks: a seeded model of a random graph with a rooted
//! old world, random writes between slices (handles stored and cut through
//! `get_mut`, positions changed through the data door `data_mut`), objects
//! created during cycles (through `&Heap` and, traced at birth, through
//! `&mut Heap`), handles kept outside the heap (unrooted, often unreachable
//! when a cycle starts) stored into reachable objects mid-cycle, and minor
//! and major cycles sliced at 1-500 units of work (or run whole). Checked
//! after every slice: nothing reachable in the model is freed. Checked at
//! the end: two major cycles leave exactly what the model reaches.
//!
//! With a disregard-for-GC pool: pool objects are held by the world's
//! nodes and written like them (holding young and unrooted objects), and
//! the pool is disabled mid-run, often mid-cycle (its objects become
//! roots). A pool object's mark bit is set when a cycle scans it, so that
//! marking drops handles to it at a bit test: a slice's work units show it.
//!
//! Between cycles the program writes many old objects, each holding many
//! handles (mostly to old objects, a few to young ones): the remembered
//! set a minor cycle starts with is long, and its entries are re-scanned
//! with the memory of the next ones loaded ahead (`gc/mark_phase.rs`).

use std::collections::{BTreeMap, BTreeSet};

use coreobject::{Data, GcConfig, Heap, HeapConfig, Obj, Object};

mod common;
use common::Rng;

#[derive(Object, Data, Default)]
struct Node {
    id: u64,
    pos: [f32; 2],
    kids: Vec<Obj<Node>>,
}

/// The program's view: each object's handles, the root, and the handles it
/// keeps outside the heap.
#[derive(Default)]
struct Model {
    kids: BTreeMap<Obj<Node>, Vec<Obj<Node>>>,
    root: Option<Obj<Node>>,
    kept: Vec<Obj<Node>>,
    /// Objects of the disregard-for-GC pool: permanent (roots once the
    /// pool is disabled).
    pool: Vec<Obj<Node>>,
}

impl Model {
    fn reachable(&self) -> BTreeSet<Obj<Node>> {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<Obj<Node>> = self.root.into_iter().collect();
        stack.extend(self.pool.iter().copied());
        while let Some(o) = stack.pop() {
            if seen.insert(o) {
                stack.extend(self.kids.get(&o).into_iter().flatten().copied());
            }
        }
        seen
    }

    /// Forgets the objects the heap freed (only unreachable ones may be:
    /// the caller checked that first).
    fn forget_freed(&mut self, heap: &Heap) {
        self.kids.retain(|o, _| heap.contains(*o));
        self.kept.retain(|o| heap.contains(*o));
    }
}

fn check(heap: &Heap, model: &Model, ctx: &str) {
    for o in model.reachable() {
        assert!(heap.contains(o), "{ctx}: reachable {o:?} was freed");
        assert_eq!(
            heap.get(o).map(|n| &n.kids),
            model.kids.get(&o),
            "{ctx}: {o:?} holds other handles than the model says"
        );
    }
}

/// One write by the program, through `get_mut` or the data door.
fn write(heap: &mut Heap, model: &mut Model, rng: &mut Rng, next_id: &mut u64) {
    let live: Vec<Obj<Node>> = model.kids.keys().copied().collect();
    if live.is_empty() {
        return;
    }
    let pick = |rng: &mut Rng| live[rng.below(live.len())];
    match rng.below(10) {
        // A handle stored into a live object: to any live object, often one
        // created during the cycle or kept outside the heap.
        0..=2 => {
            let a = pick(rng);
            let b = if !model.kept.is_empty() && rng.below(2) == 0 {
                model.kept[rng.below(model.kept.len())]
            } else {
                pick(rng)
            };
            if heap.contains(a) && heap.contains(b) {
                heap.get_mut(a).unwrap().kids.push(b);
                model.kids.get_mut(&a).unwrap().push(b);
            }
        }
        // A handle cut (kept outside the heap half the time).
        3 | 4 => {
            let a = pick(rng);
            let n = model.kids[&a].len();
            if n > 0 && heap.contains(a) {
                let k = rng.below(n);
                let b = heap.get_mut(a).unwrap().kids.swap_remove(k);
                assert_eq!(b, model.kids.get_mut(&a).unwrap().swap_remove(k));
                if rng.below(2) == 0 {
                    model.kept.push(b);
                }
            }
        }
        // An object created, stored at once into a live one or kept.
        5 | 6 => {
            *next_id += 1;
            let kids: Vec<Obj<Node>> = (0..rng.below(4)).map(|_| pick(rng)).collect();
            let kids: Vec<Obj<Node>> = kids.into_iter().filter(|&k| heap.contains(k)).collect();
            let value = Node {
                id: *next_id,
                pos: [0.0; 2],
                kids: kids.clone(),
            };
            let o = if rng.below(2) == 0 {
                heap.create(value)
            } else {
                heap.spawn(value).create().unwrap()
            };
            model.kids.insert(o, kids);
            let a = pick(rng);
            if rng.below(3) != 0 && heap.contains(a) {
                heap.get_mut(a).unwrap().kids.push(o);
                model.kids.get_mut(&a).unwrap().push(o);
            } else {
                model.kept.push(o);
            }
        }
        // A position changed through the data door, or through `get_mut`.
        7 | 8 => {
            if let Some(d) = heap.data_mut(pick(rng)) {
                d.pos[0] += 1.0;
            }
        }
        _ => {
            if let Some(a) = heap.get_mut(pick(rng)) {
                a.pos[1] += 1.0;
            }
        }
    }
}

/// A rooted world of `n` nodes, each holding `fan` handles to others, all
/// old after a major cycle.
fn world(heap: &mut Heap, model: &mut Model, rng: &mut Rng, n: usize, fan: usize) {
    let root = heap.spawn(Node::default()).root().create().unwrap();
    model.root = Some(root);
    model.kids.insert(root, Vec::new());
    let mut all = vec![root];
    for i in 0..n {
        let o = heap.create(Node {
            id: i as u64,
            ..Node::default()
        });
        model.kids.insert(o, Vec::new());
        all.push(o);
    }
    for &o in &all {
        let mut kids: Vec<Obj<Node>> = (0..fan).map(|_| all[rng.below(all.len())]).collect();
        if o == root {
            kids.extend(all[1..].iter().step_by(3).copied());
        }
        heap.get_mut(o).unwrap().kids.clone_from(&kids);
        model.kids.insert(o, kids);
    }
    heap.collect().unwrap();
    // A small world may leave some nodes unreachable: freed now.
    check(heap, model, "world");
    model.forget_freed(heap);
}

/// Opens the heap's disregard-for-GC pool, fills it with `n` nodes, each
/// holding a handle to the previous one, and closes it.
fn fill_pool(heap: &mut Heap, model: &mut Model, n: usize) {
    heap.open_disregard_for_gc().unwrap();
    for i in 0..n {
        let kids: Vec<Obj<Node>> = model.pool.last().copied().into_iter().collect();
        let o = heap.create(Node {
            id: 500_000 + i as u64,
            pos: [0.0; 2],
            kids: kids.clone(),
        });
        model.kids.insert(o, kids);
        model.pool.push(o);
    }
    heap.close_disregard_for_gc();
}

fn run(seed: u64, rounds: usize, n: usize, pool: usize, threads: usize) {
    let mut heap = Heap::with_config(HeapConfig {
        gc: GcConfig {
            threads,
            parallel_threshold: 0,
            ..GcConfig::MANUAL
        },
        disregard_pool_size: pool as u32,
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    let mut rng = Rng(seed | 1);
    let mut model = Model::default();
    let mut next_id = 1_000_000;
    if pool > 0 {
        fill_pool(&mut heap, &mut model, pool);
    }
    // With a pool: disabled once, at a random slice (or never).
    let mut disable_in = if pool > 0 {
        rng.below(40 * rounds)
    } else {
        usize::MAX
    };
    world(&mut heap, &mut model, &mut rng, n, 8);
    for round in 0..rounds {
        let ctx = format!("seed {seed}, round {round}");
        // Between cycles: writes to many old objects (a long remembered
        // set), young objects stored into some of them.
        for _ in 0..rng.below(n) {
            write(&mut heap, &mut model, &mut rng, &mut next_id);
        }
        let minor = rng.below(4) != 0;
        if rng.below(6) == 0 {
            let s = if minor {
                heap.collect_minor()
            } else {
                heap.collect()
            };
            s.unwrap();
            check(&heap, &model, &ctx);
            model.forget_freed(&heap);
            continue;
        }
        // Sliced: 1-500 units a slice, writes between slices.
        let work = match rng.below(4) {
            0 => 1 + rng.below(4),
            1 => 5 + rng.below(60),
            _ => 1 + rng.below(500),
        };
        let mut slices = 0usize;
        loop {
            let t = if minor {
                heap.step_minor(work)
            } else {
                heap.step(work)
            };
            slices += 1;
            check(&heap, &model, &ctx);
            model.forget_freed(&heap);
            if t.completed.is_some() {
                break;
            }
            disable_in = disable_in.wrapping_sub(1);
            if disable_in == 0 {
                heap.disable_disregard_for_gc();
            }
            assert!(slices < 1_000_000, "{ctx}: the cycle does not end");
            for _ in 0..rng.below(4) {
                write(&mut heap, &mut model, &mut rng, &mut next_id);
            }
        }
    }
    // Two major cycles free everything the model does not reach.
    model.kept.clear();
    heap.collect().unwrap();
    heap.collect().unwrap();
    check(&heap, &model, &format!("seed {seed}, end"));
    let reach = model.reachable();
    assert_eq!(
        heap.len(),
        reach.len(),
        "seed {seed}: unreachable objects left"
    );
}

#[test]
fn minor_and_major_cycles_sliced_keep_what_is_reachable() {
    let (seeds, rounds, n) = if cfg!(miri) { (1, 3, 40) } else { (4, 12, 150) };
    for seed in 0..seeds {
        run(
            0x9e37_79b9_7f4a_7c15 ^ (seed * 0x1000_0001),
            rounds,
            n,
            0,
            1,
        );
    }
}

#[test]
fn with_a_pool_written_and_disabled_mid_cycle_nothing_reachable_is_freed() {
    let (seeds, rounds, n) = if cfg!(miri) { (1, 3, 40) } else { (6, 12, 150) };
    for seed in 0..seeds {
        // Every other seed marks on two threads (the parallel drain
        // drops handles to pool objects at the same bit test).
        let threads = 1 + (seed as usize % 2);
        run(
            0x2545_f491_4f6c_dd1d ^ (seed * 0x1000_0001),
            rounds,
            n,
            12,
            threads,
        );
    }
}

/// `m` young objects, each holding handles to every one of 4 pool objects,
/// stored in the (old) root; the work units of a whole minor cycle, then of
/// a whole major one, each run as one unbudgeted slice.
fn pool_handle_work(m: usize) -> (usize, usize) {
    let mut heap = Heap::with_config(HeapConfig {
        gc: GcConfig::MANUAL,
        disregard_pool_size: 4,
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    let mut model = Model::default();
    fill_pool(&mut heap, &mut model, 4);
    let root = heap.spawn(Node::default()).root().create().unwrap();
    heap.collect().unwrap();
    for k in 0..m {
        let y = heap.create(Node {
            id: k as u64,
            pos: [0.0; 2],
            kids: model.pool.clone(),
        });
        heap.get_mut(root).unwrap().kids.push(y);
    }
    let minor = heap.step_minor(usize::MAX);
    assert!(minor.completed.is_some());
    let major = heap.step(usize::MAX);
    assert!(major.completed.is_some());
    assert_eq!(heap.len(), m + 5, "every object is reachable");
    for &p in &model.pool {
        assert_eq!(
            heap.get(p).map(|n| n.kids.len()),
            Some(usize::from(p != model.pool[0]))
        );
    }
    (minor.work, major.work)
}

#[test]
fn handles_to_pool_objects_cost_marking_a_bit_test() {
    // Each young object costs its pop, its sweep and a little more; its
    // four handles to pool objects would cost four more pops (queue
    // entries that `admit` refuses) if the pool's mark bits were clear.
    let m = if cfg!(miri) { 50 } else { 5_000 };
    let (minor, major) = pool_handle_work(m);
    assert!(
        minor < 4 * m,
        "minor cycle: {minor} units for {m} young objects"
    );
    assert!(major < 4 * m, "major cycle: {major} units for {m} objects");
}

#[test]
fn a_long_remembered_set_of_wide_objects_keeps_its_young_referents() {
    // Every old object written between cycles, each storing one young
    // object among its handles to old ones: the remembered set is the
    // whole world, its entries re-scanned with the next ones loaded ahead.
    let n = if cfg!(miri) { 60 } else { 2_000 };
    for work in [3usize, 64, 500, usize::MAX] {
        let mut heap = Heap::with_config(HeapConfig {
            gc: GcConfig::MANUAL,
            ..HeapConfig::DEFAULT
        })
        .unwrap();
        let mut rng = Rng(0x51ed_2701 ^ work as u64);
        let mut model = Model::default();
        world(&mut heap, &mut model, &mut rng, n, 16);
        let olds: Vec<Obj<Node>> = model.kids.keys().copied().collect();
        for (k, &a) in olds.iter().enumerate() {
            let y = heap.create(Node {
                id: k as u64,
                ..Node::default()
            });
            model.kids.insert(y, Vec::new());
            heap.get_mut(a).unwrap().kids.push(y);
            model.kids.get_mut(&a).unwrap().push(y);
        }
        if work == usize::MAX {
            let s = heap.collect_minor().unwrap();
            assert_eq!(s.remembered, olds.len());
            assert_eq!(s.promoted, olds.len(), "every young object was reached");
        } else {
            // Checked every eighth slice (a freed object stays freed: its
            // handle is stale from then on) and after the last.
            for k in 0.. {
                let t = heap.step_minor(work);
                if k % 8 == 0 || t.completed.is_some() {
                    check(&heap, &model, &format!("work {work}, slice {k}"));
                }
                if t.completed.is_some() {
                    break;
                }
            }
        }
        check(&heap, &model, &format!("work {work}, after"));
        assert_eq!(heap.len(), model.reachable().len());
    }
}

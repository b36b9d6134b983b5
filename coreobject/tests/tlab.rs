//! Per-thread creation caches (`array/tlab.rs`) against a model.
//!
//! Worker threads that live across many collections create through `&Heap`
//! (a read lock on the heap) in two heaps by turns, while the owner creates
//! through `&mut Heap` (the write lock), unroots a random share of what
//! exists, collects, and every few turns drops the second heap and makes a
//! new one, so that workers hold cache entries of heaps that are gone and
//! of epochs that ended. After every owner turn, for both heaps: every
//! rooted object ever created resolves to its own value, no two live
//! objects share an index, `len` equals the model's count, the table's
//! slots below the high water are live or free (none lost), and every
//! object freed stays stale.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use coreobject::{AnyObj, Heap, Obj, Object};

#[derive(Object, Debug)]
struct Val {
    id: u64,
}

/// What one heap should hold: every object created and not yet freed
/// (rooted), and the freed ones.
#[derive(Default)]
struct Model {
    live: HashMap<AnyObj, u64>,
    dead: Vec<Obj<Val>>,
}

struct Shared {
    heap: RwLock<Heap>,
    /// Objects created by workers since the owner last looked: all rooted.
    made: Mutex<Vec<(Obj<Val>, u64)>>,
}

fn shared() -> Arc<Shared> {
    Arc::new(Shared {
        heap: RwLock::new(Heap::new()),
        made: Mutex::new(Vec::new()),
    })
}

/// xorshift: deterministic choices without a dependency.
fn rnd(x: &mut u64, n: u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x % n
}

/// Checks a heap against its model (under the write lock: nothing races).
fn check(heap: &mut Heap, model: &Model, what: &str) {
    let mut indices = HashSet::new();
    for (h, id) in &model.live {
        let o = heap
            .downcast::<Val>(*h)
            .unwrap_or_else(|| panic!("{what}: {h:?} does not resolve"));
        assert_eq!(heap[o].id, *id, "{what}: {h:?} holds another value");
        assert!(
            indices.insert(h.index()),
            "{what}: index {} twice",
            h.index()
        );
    }
    assert_eq!(heap.len(), model.live.len(), "{what}: len");
    assert_eq!(heap.iter().count(), model.live.len(), "{what}: iter");
    for h in &model.dead {
        assert!(heap.get(*h).is_none(), "{what}: freed {h:?} resolves");
    }
    // After a collection (a sync): every slot below the high water is an
    // object or on the free list; no reserved index is lost.
    let t = heap.table_stats();
    assert_eq!(
        t.high_water as usize,
        t.objects + t.free + t.retired as usize,
        "{what}: slots lost: {t:?}"
    );
}

/// One owner turn on one heap: take in the workers' objects, create some
/// through `&mut`, unroot and collect, check.
fn owner_turn(s: &Shared, model: &mut Model, next_id: &mut u64, x: &mut u64, what: &str) {
    let mut heap = s.heap.write().unwrap();
    for (h, id) in s.made.lock().unwrap().drain(..) {
        assert!(
            model.live.insert(h.any(), id).is_none(),
            "{what}: {h:?} twice"
        );
    }
    // The owner creates too, while workers' caches hold reservations.
    for _ in 0..rnd(x, 200) {
        *next_id += 1;
        let h = heap.create_mut(Val { id: *next_id });
        heap.add_to_root(h).unwrap();
        assert!(model.live.insert(h.any(), *next_id).is_none());
    }
    // Check before the collection too: `len` with caches holding indices.
    assert_eq!(
        heap.len(),
        model.live.len(),
        "{what}: len before collecting"
    );
    let victims: Vec<AnyObj> = model
        .live
        .keys()
        .copied()
        .filter(|_| rnd(x, 3) == 0)
        .collect();
    for h in &victims {
        heap.remove_from_root(*h).unwrap();
        model.live.remove(h);
        model.dead.push(heap.downcast::<Val>(*h).unwrap());
    }
    let stats = heap.collect().unwrap();
    assert_eq!(stats.freed, victims.len(), "{what}: freed");
    check(&mut heap, model, what);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "thousands of objects and contended locks; tlab_small below runs the same paths under miri"
)]
fn workers_and_owner_create_between_collections() {
    run(3, 60, 500);
}

/// The same at a size miri can run.
#[test]
fn tlab_small() {
    // One worker under miri: the worker and the owner never contend on a
    // parking_lot lock (the owner works under the write lock), whose contended
    // path -Zmiri-strict-provenance rejects.
    run(
        if cfg!(miri) { 1 } else { 2 },
        4,
        if cfg!(miri) { 12 } else { 40 },
    );
}

/// `workers` threads, `turns` owner turns, up to `per` objects per worker
/// between turns.
fn run(workers: u64, turns: u64, per: u64) {
    let a = shared();
    let b = Arc::new(RwLock::new(shared()));
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..workers)
        .map(|w| {
            let (a, b, stop) = (a.clone(), b.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut x = 0x9E37_79B9_7F4A_7C15 ^ (w + 1);
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    // A heap at a time, by turns: each has its own cache.
                    let b_now = b.read().unwrap().clone();
                    for s in [&a, &b_now] {
                        let heap = s.heap.read().unwrap();
                        let k = rnd(&mut x, per) + 1;
                        let mut mine = Vec::with_capacity(k as usize);
                        for _ in 0..k {
                            n += 1;
                            let id = (w + 1) << 40 | n;
                            let h = heap.create(Val { id });
                            heap.add_to_root(h).unwrap();
                            assert_eq!(heap[h].id, id);
                            mine.push((h, id));
                        }
                        // Still intact while others create; `len` and the
                        // iteration read the other threads' caches as they
                        // refill, and still count this thread's objects.
                        for (h, id) in &mine {
                            assert_eq!(heap[*h].id, *id);
                        }
                        assert!(heap.len() >= mine.len(), "len {}", heap.len());
                        let seen = heap
                            .iter()
                            .filter(|o| o.id().index() >= mine[0].0.index())
                            .count();
                        let want = mine
                            .iter()
                            .filter(|(h, _)| h.index() >= mine[0].0.index())
                            .count();
                        assert!(seen >= want, "iteration missed objects: {seen} < {want}");
                        s.made.lock().unwrap().extend(mine);
                    }
                    std::thread::yield_now();
                }
            })
        })
        .collect();
    let (mut ma, mut mb) = (Model::default(), Model::default());
    let (mut next_id, mut x) = (0u64, 12345u64);
    for turn in 0..turns {
        owner_turn(&a, &mut ma, &mut next_id, &mut x, "heap a");
        let bs = b.read().unwrap().clone();
        owner_turn(&bs, &mut mb, &mut next_id, &mut x, "heap b");
        if turn % 7 == 3 {
            // Drop heap b while workers hold cache entries for it; they
            // go on in a new one.
            let fresh = shared();
            let old = std::mem::replace(&mut *b.write().unwrap(), fresh);
            // Workers may still hold the old one for a moment: drop our
            // model with it (the workers' objects in it are not checked).
            drop(old);
            mb = Model::default();
        }
        std::thread::yield_now();
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    // The workers ended holding reserved indices: nothing is lost.
    owner_turn(&a, &mut ma, &mut next_id, &mut x, "heap a, workers gone");
    let bs = b.read().unwrap().clone();
    owner_turn(&bs, &mut mb, &mut next_id, &mut x, "heap b, workers gone");
    assert!(ma.live.len() + ma.dead.len() > 0);
}

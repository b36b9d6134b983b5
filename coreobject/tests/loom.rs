//! Loom models of the lock-free table (concurrent creation and chunk growth)
//! and of the parallel marker's steal-and-termination protocol.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p coreobject --test loom --release`.
//! Under `cfg(loom)` the table's atomics are loom's (`src/sync.rs`) and a
//! chunk holds 2 items, so two creations can race to install the same chunk.
//! Each model explores the interleavings of two threads creating through one
//! shared heap and checks: distinct indices, the predicted slots (free list
//! first, last-in first-out, then growth), every handle resolving to its own
//! value, a correct `len`, the cap enforced exactly once, and stale handles
//! staying stale.
//!
//! A second group models the parallel marker's steal-and-termination
//! protocol (`gc::Termination`, the code the marker runs, on loom's atomics):
//! crossbeam-deque is not loom-aware, so each worker's deque is a
//! `loom::sync::Mutex<VecDeque>` the owner pops at the back and thieves at
//! the front, as the real deques do, and the seed queue an injector of the
//! same kind that is never refilled. Items are claimed with an atomic flag
//! (the mark bit); the checks: every reachable item is processed exactly
//! once, every worker terminates, and no work is left anywhere; with a
//! stop, every claimed item is processed and every unclaimed one handed
//! back. In normal builds this file is empty.
#![cfg(loom)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use coreobject::{Error, Heap, HeapConfig, Obj, Object, CHUNK_SIZE};
use loom::thread;

#[derive(Object)]
struct Cell {
    value: u32,
}

/// A tiny table. Narrow generations: every model iteration makes a heap, and
/// a narrow heap can always find a tag, however many came before.
fn heap(max_objects: u32) -> Arc<Heap> {
    Arc::new(
        Heap::with_config(HeapConfig {
            max_objects,
            generation_bits: 4,
            ..HeapConfig::DEFAULT
        })
        .unwrap(),
    )
}

/// Runs a loom model and checks it explored more than one interleaving.
fn model(f: impl Fn() + Sync + Send + 'static) {
    // Exhaustive (no preemption bound) unless LOOM_MAX_PREEMPTIONS says otherwise:
    // the models are small enough.
    let builder = loom::model::Builder::new();
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    builder.check(move || {
        counter.fetch_add(1, Ordering::Relaxed);
        f()
    });
    let runs = runs.load(Ordering::Relaxed);
    eprintln!("loom explored {runs} interleavings");
    assert!(
        runs > 1,
        "the model ran once: the table's atomics are not loom's"
    );
}

/// Both threads create into the same, not yet allocated chunk; each builds
/// one and one compare-and-swap wins.
#[test]
fn two_threads_grow_the_same_chunk() {
    assert_eq!(CHUNK_SIZE, 2);
    model(|| {
        let heap = heap(8);
        heap.create(Cell { value: 0 });
        heap.create(Cell { value: 1 }); // chunk 0 is full
        assert_eq!(heap.table_stats().chunks, 1);
        let h = heap.clone();
        let t = thread::spawn(move || h.create(Cell { value: 2 }));
        let b = heap.create(Cell { value: 3 });
        let a = t.join().unwrap();
        let mut got = [a.index(), b.index()];
        got.sort();
        assert_eq!(got, [2, 3]);
        assert_eq!(heap[a].value, 2);
        assert_eq!(heap[b].value, 3);
        assert_eq!(heap.len(), 4);
        assert_eq!(heap.table_stats().chunks, 2);
        assert_eq!(heap.iter().count(), 4);
    });
}

/// One thread creates across a chunk boundary while the other creates and
/// reads back its own object.
#[test]
fn creation_across_a_chunk_boundary() {
    model(|| {
        let heap = heap(8);
        heap.create(Cell { value: 0 });
        let h = heap.clone();
        let t = thread::spawn(move || {
            let a = h.create(Cell { value: 1 });
            assert_eq!(h[a].value, 1);
            a
        });
        let b = heap.create(Cell { value: 2 });
        assert_eq!(heap[b].value, 2);
        let a = t.join().unwrap();
        let mut got = [a.index(), b.index()];
        got.sort();
        assert_eq!(got, [1, 2], "indices 1 (chunk 0) and 2 (chunk 1)");
        assert_eq!(heap[a].value, 1);
        assert_eq!(heap.len(), 3);
    });
}

/// Both threads take slots from the free list at once.
#[test]
fn two_threads_reuse_freed_slots() {
    model(|| {
        let mut heap = heap(8);
        let m = Arc::get_mut(&mut heap).unwrap();
        let keep = m.create(Cell { value: 0 });
        m.add_to_root(keep).unwrap();
        let x: Obj<Cell> = m.create(Cell { value: 1 });
        let y: Obj<Cell> = m.create(Cell { value: 2 });
        assert_eq!(m.collect().unwrap().freed, 2); // free list: [1, 2]
        let h = heap.clone();
        let t = thread::spawn(move || h.create(Cell { value: 10 }));
        let b = heap.create(Cell { value: 20 });
        let a = t.join().unwrap();
        let mut got = [a.index(), b.index()];
        got.sort();
        assert_eq!(got, [1, 2], "both came from the free list");
        assert_eq!(heap[a].value, 10);
        assert_eq!(heap[b].value, 20);
        assert!(heap.get(x).is_none() && heap.get(y).is_none());
        assert_eq!(heap.len(), 3);
        assert_eq!(heap.table_stats().high_water, 3);
        assert_eq!(heap.table_stats().free, 0);
    });
}

/// One free slot: one thread reuses it, the other appends.
#[test]
fn reuse_and_append_race() {
    model(|| {
        let mut heap = heap(8);
        let m = Arc::get_mut(&mut heap).unwrap();
        let keep = m.create(Cell { value: 0 });
        m.add_to_root(keep).unwrap();
        m.create(Cell { value: 1 });
        m.collect().unwrap(); // free list: [1]
        let h = heap.clone();
        let t = thread::spawn(move || h.create(Cell { value: 10 }));
        let b = heap.create(Cell { value: 20 });
        let a = t.join().unwrap();
        let mut got = [a.index(), b.index()];
        got.sort();
        assert_eq!(got, [1, 2]);
        assert_eq!(heap[a].value, 10);
        assert_eq!(heap[b].value, 20);
        assert_eq!(heap.len(), 3);
    });
}

/// One slot left under the cap: exactly one of two racing creations gets it.
#[test]
fn the_cap_admits_exactly_one() {
    model(|| {
        let heap = heap(3);
        heap.create(Cell { value: 0 });
        heap.create(Cell { value: 1 });
        let h = heap.clone();
        let t = thread::spawn(move || h.try_create(Cell { value: 10 }).ok());
        let b = heap.try_create(Cell { value: 20 });
        let a = t.join().unwrap();
        match (a, b) {
            (Some(a), Err(Error::CapReached(r))) => {
                assert_eq!(r.cap, 3);
                assert_eq!(a.index(), 2);
                assert_eq!(heap[a].value, 10);
            }
            (None, Ok(b)) => {
                assert_eq!(b.index(), 2);
                assert_eq!(heap[b].value, 20);
            }
            (a, b) => panic!("both or neither got the slot: {a:?} {b:?}"),
        }
        assert_eq!(heap.len(), 3);
        assert_eq!(heap.table_stats().high_water, 3);
    });
}

/// Three creators at once, across a chunk boundary.
#[test]
fn three_threads_create() {
    model(|| {
        let heap = heap(8);
        heap.create(Cell { value: 0 });
        let spawn = |value| {
            let h = heap.clone();
            thread::spawn(move || h.create(Cell { value }))
        };
        let (t1, t2) = (spawn(1), spawn(2));
        let c = heap.create(Cell { value: 3 });
        let (a, b) = (t1.join().unwrap(), t2.join().unwrap());
        let mut got = [a.index(), b.index(), c.index()];
        got.sort();
        assert_eq!(got, [1, 2, 3]);
        for (h, v) in [(a, 1), (b, 2), (c, 3)] {
            assert_eq!(heap[h].value, v);
        }
        assert_eq!(heap.len(), 4);
        assert_eq!(heap.table_stats().chunks, 2);
    });
}

/// Reading the table while another thread creates: iteration sees each
/// object whole or not at all, and `len` counts the reservation at most once.
#[test]
fn iteration_during_creation() {
    model(|| {
        let heap = heap(8);
        heap.create(Cell { value: 0 });
        heap.create(Cell { value: 1 });
        let h = heap.clone();
        let t = thread::spawn(move || h.create(Cell { value: 2 }));
        let seen: Vec<u32> = heap.iter_of::<Cell>().map(|(_, c)| c.value).collect();
        assert!(seen == [0, 1] || seen == [0, 1, 2], "{seen:?}");
        let len = heap.len();
        assert!(len == 2 || len == 3, "{len}");
        let a = t.join().unwrap();
        assert_eq!(a.index(), 2);
        assert_eq!(heap[a].value, 2);
        assert_eq!(heap.iter().count(), 3);
    });
}

mod termination {
    use std::collections::VecDeque;
    use std::sync::atomic::Ordering;

    use coreobject::gc::Termination;
    use loom::sync::atomic::{AtomicBool, AtomicUsize};
    use loom::sync::{Arc, Mutex};
    use loom::thread;

    /// A tiny work graph: item `i`'s children. Item 3 is reached twice, so
    /// two workers may race to claim it.
    const GRAPH: &[&[usize]] = &[&[1, 2], &[3], &[3], &[]];

    struct World {
        term: Termination,
        /// The seed queue: never refilled.
        injector: Mutex<VecDeque<usize>>,
        deques: Vec<Mutex<VecDeque<usize>>>,
        /// The mark bits.
        claimed: Vec<AtomicBool>,
        processed: Vec<AtomicUsize>,
        /// Handed back by stopped workers.
        leftovers: Mutex<Vec<usize>>,
        /// Stop once this many items were processed (`usize::MAX`: never).
        stop_after: usize,
        done: AtomicUsize,
        /// Items popped and not yet finished (children not yet pushed).
        in_hand: AtomicUsize,
    }

    impl World {
        fn new(workers: usize, stop_after: usize) -> Arc<World> {
            Arc::new(World {
                term: Termination::new(),
                injector: Mutex::new(VecDeque::from([0])),
                deques: (0..workers).map(|_| Mutex::new(VecDeque::new())).collect(),
                claimed: GRAPH.iter().map(|_| AtomicBool::new(false)).collect(),
                processed: GRAPH.iter().map(|_| AtomicUsize::new(0)).collect(),
                leftovers: Mutex::new(Vec::new()),
                stop_after,
                done: AtomicUsize::new(0),
                in_hand: AtomicUsize::new(0),
            })
        }

        /// Takes one item into `me`'s deque: from the injector, then from
        /// the others' fronts.
        fn steal(&self, me: usize) -> bool {
            let n = self.deques.len();
            let got = self.injector.lock().unwrap().pop_front().or_else(|| {
                (1..n).find_map(|k| self.deques[(me + k) % n].lock().unwrap().pop_front())
            });
            match got {
                Some(i) => {
                    self.deques[me].lock().unwrap().push_back(i);
                    true
                }
                None => false,
            }
        }

        fn visible(&self) -> bool {
            !self.injector.lock().unwrap().is_empty()
                || self.deques.iter().any(|d| !d.lock().unwrap().is_empty())
        }

        /// One worker: owner pops at the back; children go to its own deque.
        fn work(&self, me: usize) {
            loop {
                if self.term.is_stopped() {
                    // Hand back what this worker holds, unclaimed.
                    let mut d = self.deques[me].lock().unwrap();
                    self.leftovers.lock().unwrap().extend(d.drain(..));
                    return;
                }
                let next = {
                    let mut d = self.deques[me].lock().unwrap();
                    let next = d.pop_back();
                    if next.is_some() {
                        self.in_hand.fetch_add(1, Ordering::SeqCst);
                    }
                    next
                };
                match next {
                    Some(i) => {
                        if !self.claimed[i].swap(true, Ordering::Relaxed) {
                            self.processed[i].fetch_add(1, Ordering::Relaxed);
                            let mut d = self.deques[me].lock().unwrap();
                            d.extend(GRAPH[i].iter().copied());
                            drop(d);
                            if self.done.fetch_add(1, Ordering::Relaxed) + 1 >= self.stop_after {
                                self.term.stop();
                            }
                        }
                        self.in_hand.fetch_sub(1, Ordering::SeqCst);
                    }
                    None => {
                        let found = self.term.find_work(
                            || self.steal(me),
                            || self.visible(),
                            thread::yield_now,
                        );
                        if !found && !self.term.is_stopped() {
                            // Terminated: no work may exist anywhere.
                            assert_eq!(self.in_hand.load(Ordering::SeqCst), 0, "work in hand");
                            assert!(!self.visible(), "work left in a queue");
                            return;
                        }
                    }
                }
            }
        }
    }

    /// Runs `workers` workers (the first on the model's main thread, joining
    /// before the others start, as the collecting thread does) and checks
    /// the outcome.
    fn run(workers: usize, stop_after: usize) {
        let w = World::new(workers, stop_after);
        w.term.join();
        let threads: Vec<_> = (1..workers)
            .map(|me| {
                let w = w.clone();
                thread::spawn(move || {
                    w.term.join();
                    w.work(me);
                })
            })
            .collect();
        w.work(0);
        for t in threads {
            t.join().unwrap();
        }
        for (i, p) in w.processed.iter().enumerate() {
            let p = p.load(Ordering::Relaxed);
            assert!(p <= 1, "item {i} processed {p} times");
            assert_eq!(p == 1, w.claimed[i].load(Ordering::Relaxed), "item {i}");
        }
        let leftovers = std::mem::take(&mut *w.leftovers.lock().unwrap());
        let rest: Vec<usize> = w.injector.lock().unwrap().drain(..).collect();
        if stop_after == usize::MAX {
            assert!(
                w.processed.iter().all(|p| p.load(Ordering::Relaxed) == 1),
                "every item processed"
            );
            assert!(leftovers.is_empty() && rest.is_empty());
        } else {
            // What was not processed is still reachable from what was
            // handed back: nothing is lost.
            let mut seen: Vec<bool> = w
                .claimed
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect();
            let mut stack: Vec<usize> = leftovers.into_iter().chain(rest).collect();
            while let Some(i) = stack.pop() {
                if !seen[i] {
                    seen[i] = true;
                    stack.extend(GRAPH[i].iter().copied());
                }
            }
            assert!(seen.iter().all(|&s| s), "work lost at a stop: {seen:?}");
        }
        assert!(w.deques.iter().all(|d| d.lock().unwrap().is_empty()));
    }

    /// Explores `f` with at most `preemptions` preemptions (unless
    /// LOOM_MAX_PREEMPTIONS says otherwise): idle workers spin, which an
    /// unbounded exploration cannot finish.
    fn check(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
        let mut builder = loom::model::Builder::new();
        if builder.preemption_bound.is_none() {
            builder.preemption_bound = Some(preemptions);
        }
        // An idle worker's loop takes a few dozen branches per look.
        builder.max_branches = 100_000;
        let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = runs.clone();
        builder.check(move || {
            counter.fetch_add(1, Ordering::Relaxed);
            f()
        });
        eprintln!(
            "loom explored {} interleavings",
            runs.load(Ordering::Relaxed)
        );
    }

    #[test]
    fn two_workers_process_every_item_once_and_terminate() {
        check(4, || run(2, usize::MAX));
    }

    #[test]
    fn three_workers_process_every_item_once_and_terminate() {
        check(1, || run(3, usize::MAX));
    }

    #[test]
    fn a_stop_loses_no_work() {
        check(4, || run(2, 2));
    }
}

#[derive(Object, Default)]
#[object(save)]
struct Saved {
    v: u32,
}

/// The store's dirty set (`save/ids.rs`): two threads creating through one
/// heap refill freed slots below the last capture's high water, each
/// marking its slot with a relaxed `fetch_or` on the same word; the next
/// capture, under `&mut Heap` after both joined, finds both objects (no
/// table walk would).
#[test]
fn concurrent_creation_marks_the_dirty_set() {
    model(|| {
        let mut heap = Heap::with_config(HeapConfig {
            max_objects: 8,
            generation_bits: 4,
            ..HeapConfig::DEFAULT
        })
        .unwrap();
        let mut store = coreobject::save::MemStore::default();
        let a = heap.spawn(Saved { v: 1 }).create().unwrap();
        let b = heap.spawn(Saved { v: 2 }).create().unwrap();
        assert_eq!(heap.save_store(&mut store).unwrap().written, 2);
        heap.collect().unwrap();
        assert!(!heap.contains(a) && !heap.contains(b));
        assert_eq!(heap.save_store(&mut store).unwrap().deleted, 2);
        let heap = Arc::new(heap);
        let other = heap.clone();
        let t = thread::spawn(move || other.spawn(Saved { v: 3 }).create().unwrap());
        let c = heap.spawn(Saved { v: 4 }).create().unwrap();
        let d = t.join().unwrap();
        let mut heap = Arc::try_unwrap(heap)
            .ok()
            .expect("the other thread is done");
        let s = heap.save_store(&mut store).unwrap();
        assert_eq!((s.written, s.created), (2, 2));
        assert_eq!(store.len(), 2);
        assert!(heap.persistent_id(c).is_some() && heap.persistent_id(d).is_some());
    });
}

// ----- per-thread creation caches (`array/tlab.rs`) ------------------------------
//
// Under loom a cache reserves 2 indices per refill and a heap has 3 caches;
// heaps of 48 objects or more have caches (the ones above, at 8, do not,
// and keep their exact slots), and these models' heaps of 64 stay past the
// margin below the cap (12) under which creation reserves one index at a
// time.

/// Checks, through `&mut`, that every slot below the high water is an
/// object or free (a collection has synced the table first), and that the
/// handles are distinct and resolve to their values.
fn no_slot_lost(heap: &mut Heap, handles: &[(Obj<Cell>, u32)]) {
    for (h, v) in handles {
        heap.add_to_root(*h).unwrap();
        assert_eq!(heap[*h].value, *v);
    }
    let mut indices: Vec<u32> = handles.iter().map(|(h, _)| h.index()).collect();
    indices.sort_unstable();
    indices.dedup();
    assert_eq!(
        indices.len(),
        handles.len(),
        "an index was handed out twice"
    );
    assert_eq!(heap.collect().unwrap().freed, 0);
    let t = heap.table_stats();
    assert_eq!(t.objects, handles.len());
    assert_eq!(
        t.high_water as usize,
        t.objects + t.free,
        "reserved indices were lost: {t:?}"
    );
}

/// A thread creates one object (its cache reserves two indices) and ends
/// holding the other, while the main thread creates through its own cache.
/// The next collection returns the unused indices: none is lost, and the
/// next creations reuse them.
#[test]
fn a_thread_ends_holding_reserved_indices() {
    model(|| {
        let heap = heap(64);
        let h = heap.clone();
        let t = thread::spawn(move || h.create(Cell { value: 1 }));
        let b = heap.create(Cell { value: 2 });
        let a = t.join().unwrap();
        let mut heap = Arc::try_unwrap(heap).ok().expect("the thread is done");
        assert_eq!(heap.len(), 2);
        no_slot_lost(&mut heap, &[(a, 1), (b, 2)]);
        // The reserved indices are free again, and taken first.
        let hw = heap.table_stats().high_water;
        let c = heap.create_mut(Cell { value: 3 });
        assert!(c.index() < hw, "a returned index is reused");
        no_slot_lost(&mut heap, &[(a, 1), (b, 2), (c, 3)]);
    });
}

/// A thread creates in heap 1 (claiming a cache there), lets go of it, and
/// creates in heap 2, while the main thread drops heap 1 (which may be
/// freed while the thread's cache entry still names it) and creates twice
/// in heap 2. The thread's stale entry must neither touch heap 1's memory
/// nor pass for a cache of heap 2 (it would then share the main thread's
/// cache, and the two could take the same index).
#[test]
fn a_heap_dropped_while_a_thread_holds_a_cache() {
    model(|| {
        let h1 = heap(64);
        let h2 = heap(64);
        let (t1, t2) = (h1.clone(), h2.clone());
        let t = thread::spawn(move || {
            let a = t1.create(Cell { value: 1 });
            assert_eq!(t1[a].value, 1);
            drop(t1);
            t2.create(Cell { value: 2 })
        });
        drop(h1);
        let d = h2.create(Cell { value: 5 });
        let e = h2.create(Cell { value: 6 });
        let b = t.join().unwrap();
        let mut h2 = Arc::try_unwrap(h2).ok().expect("the thread is done");
        no_slot_lost(&mut h2, &[(b, 2), (d, 5), (e, 6)]);
    });
}

/// Two threads create three objects each: each refills its cache twice,
/// and the refills race on the table's cursor.
#[test]
fn two_threads_refill_concurrently() {
    model(|| {
        let heap = heap(64);
        let h = heap.clone();
        let t = thread::spawn(move || {
            (0..3)
                .map(|v| (h.create(Cell { value: v }), v))
                .collect::<Vec<_>>()
        });
        let mut all: Vec<_> = (10..13)
            .map(|v| (heap.create(Cell { value: v }), v))
            .collect();
        all.extend(t.join().unwrap());
        let mut heap = Arc::try_unwrap(heap).ok().expect("the thread is done");
        assert_eq!(heap.len(), 6);
        no_slot_lost(&mut heap, &all);
    });
}

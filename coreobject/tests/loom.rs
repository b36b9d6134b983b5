//! Loom models of the lock-free table: concurrent creation and chunk growth.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p coreobject --test loom --release`.
//! Under `cfg(loom)` the table's atomics are loom's (`src/sync.rs`) and a
//! chunk holds 2 items, so two creations can race to install the same chunk.
//! Each model explores the interleavings of two threads creating through one
//! shared heap and checks: distinct indices, the predicted slots (free list
//! first, last-in first-out, then growth), every handle resolving to its own
//! value, a correct `len`, the cap enforced exactly once, and stale handles
//! staying stale. In normal builds this file is empty.
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

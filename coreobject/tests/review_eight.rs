//! Review 8 (main at 3b7d73d): a guard for the purge's look ahead
//! (`ObjectArray::load_to_free`) over the free paths `tests/free_ahead.rs`
//! does not take: the `free_one` path (a delete listener), objects with an
//! outer, panicking `Drop`s, and values dropped on two threads, in minor and
//! major cycles run in slices of 1-64 units, with runs of surviving young
//! objects of several lengths (so that the free step catches up with the
//! look ahead). The probe's `prefetch` records an object read after its
//! drop. Fails with the look ahead reading the object it saw instead of its
//! slot afresh (a freed object prefetched, plain and listener paths alike).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use coreobject::{CycleKind, GcConfig, Heap, HeapConfig, Obj, Object, RefKind, Trace, Visitor};

mod common;
use common::Rng;

/// Ids of the probes dropped.
static DROPPED: Mutex<Option<HashSet<u64>>> = Mutex::new(None);
/// Prefetches of a dropped probe.
static READ_FREED: AtomicUsize = AtomicUsize::new(0);
/// Prefetches in all.
static PREFETCHED: AtomicUsize = AtomicUsize::new(0);
/// Whether probes flagged so panic in their drop (off while a heap goes).
static ARMED: AtomicBool = AtomicBool::new(true);

/// Its owner's id, and whether its drop panics.
struct Probe(u64, bool);

impl Trace for Probe {
    const KIND: RefKind = RefKind::Struct;
    fn trace<V: Visitor + ?Sized>(&self, _v: &mut V) {}
    fn prefetch(&self) {
        PREFETCHED.fetch_add(1, Ordering::Relaxed);
        let dropped = DROPPED
            .lock()
            .unwrap()
            .as_ref()
            .is_some_and(|d| d.contains(&self.0));
        if dropped {
            READ_FREED.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        if let Some(d) = DROPPED.lock().unwrap().as_mut() {
            d.insert(self.0);
        }
        if self.1 && ARMED.load(Ordering::Relaxed) {
            panic!("a probe's drop");
        }
    }
}

#[derive(Object)]
struct Node {
    probe: Probe,
    kids: Vec<Obj<Node>>,
}

#[test]
#[cfg_attr(miri, ignore = "tens of thousands of objects on two threads")]
fn the_look_ahead_reads_no_freed_object_on_any_free_path() {
    *DROPPED.lock().unwrap() = Some(HashSet::new());
    for threads in [1, 2] {
        for listener in [false, true] {
            let mut heap = Heap::with_config(HeapConfig {
                gc: GcConfig {
                    generational: true,
                    threads,
                    parallel_threshold: 0,
                    ..GcConfig::MANUAL
                },
                ..HeapConfig::DEFAULT
            })
            .unwrap();
            if listener {
                heap.on_delete(|_| {});
            }
            let config = (threads as u64) * 2 + listener as u64;
            let world = heap
                .spawn(Node {
                    probe: Probe(u64::MAX - config, false),
                    kids: Vec::new(),
                })
                .root()
                .create()
                .unwrap();
            let mut rng = Rng(7 + config);
            let mut id = config << 40;
            let mut kept = Vec::new();
            for round in 0..40 {
                let mut fresh: Vec<Obj<Node>> = Vec::new();
                for i in 0..400 {
                    id += 1;
                    let panics = rng.one_in(50);
                    let value = Node {
                        probe: Probe(id, panics),
                        kids: Vec::new(),
                    };
                    let o = if !fresh.is_empty() && rng.one_in(4) {
                        let outer = fresh[rng.below(fresh.len())];
                        heap.spawn_mut(value).outer(outer).create().unwrap()
                    } else {
                        heap.create_mut(value)
                    };
                    // Every third round, runs of kept objects of 1-121.
                    let run = round % 3 == 0 && (i / (1 + round % 7 * 20)) % 2 == 0;
                    if !panics && (run || rng.one_in(5)) {
                        heap[world].kids.push(o);
                        kept.push(o);
                    }
                    fresh.push(o);
                }
                let kind = if round % 5 == 4 {
                    CycleKind::Major
                } else {
                    CycleKind::Minor
                };
                loop {
                    let work = 1 + rng.below(64);
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        common::step(&mut heap, kind, work)
                    }));
                    // A drop's panic is resumed at the end of its slice.
                    match r {
                        Ok(t) if t.completed.is_none() => {}
                        _ => break,
                    }
                }
                assert!(
                    kept.iter().all(|&o| heap.contains(o)),
                    "threads {threads} listener {listener} round {round}: a kept object lost"
                );
            }
            assert_eq!(
                READ_FREED.load(Ordering::Relaxed),
                0,
                "threads {threads} listener {listener}: a freed object was prefetched"
            );
            ARMED.store(false, Ordering::Relaxed);
            drop(heap);
            ARMED.store(true, Ordering::Relaxed);
        }
    }
    assert!(PREFETCHED.load(Ordering::Relaxed) > 1_000);
}

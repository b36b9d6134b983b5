//! The purge's look ahead at the objects it frees (`array::load_to_free`):
//! besides each object's own line, it asks for the buffers the object's
//! drop hands back to the allocator (what `Trace::prefetch` names) a few
//! objects before the free step reaches it, so that `free` does not wait
//! for the allocator's chunk header (a cache miss per freed object in the
//! `young` workload).
//!
//! The probe is a field whose `Trace::prefetch` records its owner's id, and
//! whose `Drop` records the id as dropped. Garbage of a minor cycle is never
//! scanned by marking, so every prefetch of a garbage object's fields comes
//! from the purge's look ahead.
//!
//! * **Buffers loaded**: in a minor cycle that frees `N` young objects in
//!   one slice, the look ahead asks for the buffers of all of them but the
//!   last few (it runs a fixed number of objects in front of the free
//!   step). Without the look ahead's buffer stage: none.
//! * **Never a freed object**: the look ahead reads an object's buffer
//!   pointers some objects after it first saw it; by then the free step may
//!   have freed it (it catches up when the look ahead stalls over long runs
//!   of surviving young objects, and a slice may end in between). The slot
//!   is read afresh each time, so a freed object is never read: its probe
//!   checks that it was not dropped, over runs of garbage and survivors of
//!   every length, whole and in slices of 1-64 units.
//! * **A panicking `prefetch`**: a hand-written `Trace::prefetch` is user
//!   code, run by the look ahead inside the purge. Its panic is kept and
//!   resumed when the cycle ends, as a `Drop`'s is: the cycle frees all its
//!   garbage, and the heap goes on (creation, minor and major cycles) with
//!   exact counts.

use std::collections::HashSet;
use std::sync::Mutex;

use coreobject::{CycleKind, Heap, Obj, Object, RefKind, Trace, Visitor};

mod common;
use common::Rng;

/// Ids whose probe was asked to prefetch, and ids dropped.
static PREFETCHED: Mutex<Vec<u64>> = Mutex::new(Vec::new());
static DROPPED: Mutex<Option<HashSet<u64>>> = Mutex::new(None);

/// The tests share the two records: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Clears both records (a test's heap may have dropped objects of the
/// same ids as the next one's).
fn reset() {
    PREFETCHED.lock().unwrap().clear();
    *DROPPED.lock().unwrap() = Some(HashSet::new());
}

/// Records prefetches and its drop, by its owner's id.
struct Probe(u64);

impl Trace for Probe {
    const KIND: RefKind = RefKind::Struct;
    fn trace<V: Visitor + ?Sized>(&self, _v: &mut V) {}
    fn prefetch(&self) {
        let dropped = DROPPED
            .lock()
            .unwrap()
            .as_ref()
            .is_some_and(|d| d.contains(&self.0));
        assert!(!dropped, "object {} read after it was freed", self.0);
        PREFETCHED.lock().unwrap().push(self.0);
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        if let Some(d) = DROPPED.lock().unwrap().as_mut() {
            d.insert(self.0);
        }
    }
}

#[derive(Object)]
struct Node {
    probe: Probe,
    kids: Vec<Obj<Node>>,
}

fn node(id: u64, kids: Vec<Obj<Node>>) -> Node {
    Node {
        probe: Probe(id),
        kids,
    }
}

/// A rooted old world of `n` objects (ids from 1,000,000 up).
fn old_world(heap: &mut Heap, n: usize) -> (Obj<Node>, Vec<Obj<Node>>) {
    let world = heap
        .spawn(node(999_999, Vec::new()))
        .root()
        .create()
        .unwrap();
    let mut olds = Vec::new();
    for i in 0..n {
        let o = heap.create(node(1_000_000 + i as u64, Vec::new()));
        heap[world].kids.push(o);
        olds.push(o);
    }
    assert_eq!(heap.collect().unwrap().kind, CycleKind::Major);
    (world, olds)
}

#[test]
fn the_purge_loads_the_buffers_of_the_young_objects_it_frees() {
    let _g = serial();
    let n: u64 = if cfg!(miri) { 40 } else { 2_000 };
    let mut heap = common::generational_heap();
    reset();
    let (_world, olds) = old_world(&mut heap, 8);
    for id in 0..n {
        // Young garbage, each holding a buffer (one handle to an old object).
        heap.create(node(id, vec![olds[id as usize % olds.len()]]));
    }
    let s = heap.collect_minor().unwrap();
    assert_eq!((s.kind, s.freed), (CycleKind::Minor, n as usize));
    let seen: HashSet<u64> = PREFETCHED
        .lock()
        .unwrap()
        .iter()
        .copied()
        .filter(|&id| id < n)
        .collect();
    // All but the last few, which the free step reaches before the look
    // ahead has moved that far past them (8 on this build).
    assert!(
        seen.len() as u64 >= n - 16,
        "the buffers of {} of {n} freed objects were asked for",
        seen.len()
    );
    assert_eq!(DROPPED.lock().unwrap().as_ref().unwrap().len(), n as usize);
}

#[test]
fn the_look_ahead_never_reads_a_freed_object() {
    let _g = serial();
    let rounds = if cfg!(miri) { 2 } else { 24 };
    let mut rng = Rng(0xf4ee_a4ead);
    let mut heap = common::generational_heap();
    reset();
    let (world, olds) = old_world(&mut heap, 16);
    let mut next = 0u64;
    let mut loaded_garbage = 0usize;
    for round in 0..rounds {
        // Runs of garbage and of survivors (stored into the world) of
        // lengths 1-40: the look ahead stalls over survivor runs longer
        // than its scan (16 entries), and the free step catches up.
        let mut garbage = Vec::new();
        let mut kept = Vec::new();
        let runs = if cfg!(miri) { 6 } else { 30 };
        for r in 0..runs {
            let len = 1 + rng.below(40);
            for _ in 0..len {
                let id = next;
                next += 1;
                let o = heap.create(node(id, vec![olds[rng.below(16)]]));
                if r % 2 == 0 {
                    garbage.push((id, o));
                } else {
                    heap[world].kids.push(o);
                    kept.push(o);
                }
            }
        }
        let before = PREFETCHED.lock().unwrap().len();
        // Whole, or in slices that end mid-walk.
        let s = if round % 3 == 0 {
            heap.collect_minor().unwrap()
        } else {
            let work = 1 + rng.below(64);
            loop {
                if let Some(s) = heap.step_minor(work).completed {
                    break s;
                }
            }
        };
        assert_eq!(s.kind, CycleKind::Minor);
        assert_eq!(s.freed, garbage.len(), "round {round}");
        for &(_, o) in &garbage {
            assert!(!heap.contains(o));
        }
        for &o in &kept {
            assert!(heap.contains(o));
        }
        let ids: HashSet<u64> = garbage.iter().map(|&(id, _)| id).collect();
        loaded_garbage += PREFETCHED.lock().unwrap()[before..]
            .iter()
            .filter(|id| ids.contains(id))
            .count();
    }
    // The look ahead did run over these lists (the check above is not
    // vacuous).
    assert!(loaded_garbage > 0);
}

/// Panics in `prefetch` when its flag is set.
struct Touchy(bool);

impl Trace for Touchy {
    const KIND: RefKind = RefKind::Struct;
    fn trace<V: Visitor + ?Sized>(&self, _v: &mut V) {}
    fn prefetch(&self) {
        if self.0 {
            panic!("prefetch");
        }
    }
}

#[derive(Object)]
struct Edgy {
    touchy: Touchy,
    kids: Vec<Obj<Edgy>>,
}

#[test]
fn a_panicking_prefetch_is_resumed_after_the_cycle() {
    let n = if cfg!(miri) { 30 } else { 300 };
    let mut heap = common::generational_heap();
    let world = heap
        .spawn(Edgy {
            touchy: Touchy(false),
            kids: Vec::new(),
        })
        .root()
        .create()
        .unwrap();
    heap.collect().unwrap();
    for round in 0..3 {
        let mut garbage = Vec::new();
        for k in 0..n {
            let o = heap.create(Edgy {
                // Every garbage object past the first few panics when the
                // look ahead asks for its buffers.
                touchy: Touchy(round < 2 && k % 2 == 0),
                kids: vec![world],
            });
            if k % 2 == 0 {
                garbage.push(o);
            } else {
                heap[world].kids.push(o);
            }
        }
        let len = heap.len();
        let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            heap.collect_minor().unwrap()
        }));
        assert_eq!(got.is_err(), round < 2, "round {round}");
        assert_eq!(heap.len(), len - garbage.len(), "round {round}");
        for &o in &garbage {
            assert!(!heap.contains(o));
        }
        assert_eq!(heap[world].kids.len(), (round + 1) * n / 2);
    }
    let s = heap.collect().unwrap();
    assert_eq!(s.freed, 0);
    assert_eq!(s.marked, 1 + 3 * n / 2);
}

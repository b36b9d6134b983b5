//! Captures spread over frames against a model: random creation,
//! mutation (through `get_mut`, the data door and, for an interior-mutable
//! class, behind `&self`), renames and moves between outers, root and
//! garbage marks, and collections (major, minor, sliced) interleaved
//! *between the steps* of a capture. Whenever a capture's final step
//! returns its change set, the change set is committed and loading the store
//! gives exactly the heap's graph as of that frame (persistent ids, classes,
//! fields, handles, names, outers, roots); the store holds exactly the saved
//! objects' ids. Also: a mutator writing between every step cannot keep a
//! capture from ending, and misuse (a stale or foreign capture) is an error.

use coreobject::save::{CaptureBudget, MemStore, SaveStore, StoreError};
use coreobject::{AnyObj, Heap, Obj};
use proptest::prelude::*;

#[path = "common/store_graph.rs"]
mod store_graph;
use store_graph::*;

#[derive(Clone, Debug)]
enum Op {
    Mutate(Mutation),
    Clear {
        who: u8,
    },
    Move {
        who: u8,
        to: Option<u8>,
    },
    Collect(Gc),
    /// One capture step looking at this many slots (a new capture begins
    /// when none is in flight).
    Step(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        16 => mutation().prop_map(Op::Mutate),
        1 => any::<u8>().prop_map(|who| Op::Clear { who }),
        1 => (any::<u8>(), proptest::option::of(any::<u8>())).prop_map(|(who, to)| Op::Move { who, to }),
        3 => gc().prop_map(Op::Collect),
        6 => (1u8..6).prop_map(Op::Step),
    ]
}

/// Whether `inner` is `outer` or inside it.
fn within(heap: &Heap, inner: AnyObj, outer: AnyObj) -> bool {
    let mut cur = Some(inner);
    while let Some(c) = cur {
        if c == outer {
            return true;
        }
        cur = heap.outer_of(c);
    }
    false
}

fn run(ops: &[Op]) {
    let mut store = MemStore::default();
    let mut heap = Heap::new();
    let mut all: Vec<AnyObj> = Vec::new();
    let mut cap = None;
    let mut finished = 0;
    for (k, op) in ops.iter().enumerate() {
        match op {
            Op::Mutate(m) => apply(&mut heap, &mut all, k, m),
            &Op::Clear { who } => {
                // Any object not yet freed, garbage or not.
                let live: Vec<AnyObj> = all
                    .iter()
                    .copied()
                    .filter(|&h| heap.is_garbage(h))
                    .collect();
                if !live.is_empty() {
                    let _ = heap.clear_garbage(live[who as usize % live.len()]);
                }
            }
            &Op::Move { who, to } => {
                if let Some(h) = pick(&all, who, &heap) {
                    let to = to.and_then(|t| pick(&all, t, &heap));
                    // Only with an outer already (an outer is for life
                    // otherwise), to one not inside it.
                    if let Some(t) = to.filter(|&t| !within(&heap, t, h)) {
                        if heap.outer_of(h).is_some() {
                            let _ = heap.rename(h).outer(t).apply();
                        }
                    }
                }
            }
            &Op::Collect(g) => collect(&mut heap, g),
            &Op::Step(n) => {
                let meta = store.meta().unwrap();
                let c = cap.get_or_insert_with(|| heap.capture_begin(meta.as_ref()));
                if let Some((change, _)) = heap
                    .capture_step(c, CaptureBudget::Slots(n as usize))
                    .unwrap()
                {
                    cap = None;
                    store.commit(&change).unwrap();
                    check_store(&heap, &mut store);
                    finished += 1;
                }
            }
        }
    }
    // The capture in flight ends in a bounded number of steps.
    if let Some(mut c) = cap.take() {
        let mut steps = 0;
        let change = loop {
            steps += 1;
            assert!(steps < 100_000, "the capture does not end");
            if let Some((change, _)) = heap.capture_step(&mut c, CaptureBudget::Slots(3)).unwrap() {
                break change;
            }
        };
        store.commit(&change).unwrap();
        check_store(&heap, &mut store);
    }
    // And a whole save from nothing agrees.
    let (change, _) = heap.capture(store.meta().unwrap().as_ref()).unwrap();
    store.commit(&change).unwrap();
    check_store(&heap, &mut store);
    let _ = finished;
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn stepped_captures_match_the_heap_of_their_last_frame(ops in proptest::collection::vec(op(), 1..80)) {
        run(&ops);
    }
}

/// A mutator that writes an object between every step, and creates one,
/// does not keep a capture from ending: the final step takes what was
/// touched meanwhile, whatever the budget.
#[test]
fn a_busy_mutator_cannot_keep_a_capture_from_ending() {
    let mut heap = Heap::new();
    let nodes = rooted_nodes(&mut heap, 500);
    let mut store = MemStore::default();
    heap.save_store(&mut store).unwrap();
    for n in &nodes {
        heap[*n].value += 1;
    }
    let meta = store.meta().unwrap();
    let mut cap = heap.capture_begin(meta.as_ref());
    let mut frame = 0;
    let change = loop {
        frame += 1;
        assert!(frame <= 500 / 10 + 2, "still capturing at frame {frame}");
        if let Some((change, saved)) = heap
            .capture_step(&mut cap, CaptureBudget::Slots(10))
            .unwrap()
        {
            assert!(saved.written >= 500);
            break change;
        }
        // Every frame: a write to an object already captured, a new object.
        heap[nodes[frame % 7]].value += 100;
        heap.spawn(Node {
            value: -(frame as i64),
            ..Node::default()
        })
        .root()
        .create()
        .unwrap();
    };
    store.commit(&change).unwrap();
    check_store(&heap, &mut store);
}

/// A capture of another heap, or one superseded by a later capture, a
/// save or `forget_store`, is refused.
#[test]
fn a_stale_or_foreign_capture_is_refused() {
    let mut heap = Heap::new();
    heap.spawn(Node::default()).root().create().unwrap();
    let mut other = Heap::new();
    let mut cap = heap.capture_begin(None);
    assert!(matches!(
        other.capture_step(&mut cap, CaptureBudget::Unbounded),
        Err(StoreError::StaleCapture)
    ));
    let _newer = heap.capture_begin(None);
    assert!(matches!(
        heap.capture_step(&mut cap, CaptureBudget::Unbounded),
        Err(StoreError::StaleCapture)
    ));
    let mut cap = heap.capture_begin(None);
    heap.save_store(&mut MemStore::default()).unwrap();
    assert!(matches!(
        heap.capture_step(&mut cap, CaptureBudget::Unbounded),
        Err(StoreError::StaleCapture)
    ));
    let mut cap = heap.capture_begin(None);
    heap.forget_store();
    assert!(matches!(
        heap.capture_step(&mut cap, CaptureBudget::Unbounded),
        Err(StoreError::StaleCapture)
    ));
    // A finished capture is spent too.
    let mut cap = heap.capture_begin(None);
    assert!(heap
        .capture_step(&mut cap, CaptureBudget::Unbounded)
        .unwrap()
        .is_some());
    assert!(matches!(
        heap.capture_step(&mut cap, CaptureBudget::Unbounded),
        Err(StoreError::StaleCapture)
    ));
}

/// Churn at scale between steps: objects created and freed by the
/// thousand (minor and sliced collections) while a capture spans many
/// frames; each finished capture holds exactly the live objects.
#[test]
fn churn_between_steps_leaves_no_dead_record() {
    let n = if cfg!(miri) { 200 } else { 5_000 };
    let mut heap = Heap::new();
    let levels = rooted_nodes(&mut heap, 10);
    let mut live: Vec<Obj<Node>> = Vec::new();
    let mut store = MemStore::default();
    let mut rng = 7u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut cap = None;
    let mut done = 0;
    for frame in 0..400 {
        // Create a few dozen, drop as many (kept alive by the level's list).
        for _ in 0..(n / 100) {
            let l = levels[(next() % 10) as usize];
            let o = heap
                .spawn(Node {
                    value: frame,
                    ..Node::default()
                })
                .outer(l)
                .create()
                .unwrap();
            heap[l].next.push(o);
            live.push(o);
        }
        while live.len() > n {
            let k = (next() as usize) % live.len();
            let o = live.swap_remove(k);
            for &l in &levels {
                heap[l].next.retain(|&x| x != o);
            }
        }
        if frame % 3 == 0 {
            heap.collect_minor().unwrap();
        } else {
            heap.step(200);
        }
        let meta = store.meta().unwrap();
        let c = cap.get_or_insert_with(|| heap.capture_begin(meta.as_ref()));
        if let Some((change, _)) = heap.capture_step(c, CaptureBudget::Slots(50)).unwrap() {
            cap = None;
            store.commit(&change).unwrap();
            check_store(&heap, &mut store);
            done += 1;
        }
    }
    assert!(done >= 2, "{done} captures finished");
}

/// Objects created through `&mut Heap` in slots freed before the last
/// save are saved by the next one, written or not: `create_mut` and
/// `spawn_mut` put their slots in the set the next capture looks at, as
/// `create` does (objects are born changed, so a first write adds
/// nothing). Fails with the `&mut` paths' marks removed.
#[test]
fn objects_created_through_mut_in_freed_slots_are_saved() {
    let mut heap = Heap::new();
    let keep = heap.spawn(Node::default()).root().create().unwrap();
    for value in 0..8 {
        heap.create(Node {
            value,
            ..Node::default()
        });
    }
    let mut store = MemStore::default();
    heap.save_store(&mut store).unwrap();
    assert_eq!(heap.collect().unwrap().freed, 8);
    heap.save_store(&mut store).unwrap();
    check_store(&heap, &mut store);
    // Refill freed slots: one object never written, one named, one
    // written once (its first write finds it born changed).
    let quiet = heap.create_mut(Node {
        value: 77,
        ..Node::default()
    });
    let named = heap
        .spawn_mut(Node {
            value: 78,
            ..Node::default()
        })
        .name("Named")
        .create()
        .unwrap();
    let written = heap.create_mut(Node::default());
    heap[written].value = 79;
    heap[keep].next = vec![quiet, named, written];
    heap.save_store(&mut store).unwrap();
    check_store(&heap, &mut store);
}

//! The owner's creation paths (`Heap::create_mut`, `Heap::spawn_mut`), which
//! take no lock, against the shared ones (`Heap::create`, `Heap::spawn`),
//! which are the reference: the same operations on two heaps must hand out
//! the same slots and serials, refuse the same names and leave the same
//! objects. Plus a stress test: threads creating through `&Heap` between
//! rounds in which the owner creates through `&mut Heap` and collects.

use std::collections::HashSet;

use coreobject::{AnyObj, Error, Heap, HeapConfig, Obj, Object};
use proptest::prelude::*;

#[derive(Object, Default)]
struct Node {
    id: u64,
    next: Option<Obj<Node>>,
}

#[derive(Clone, Debug)]
enum Op {
    /// Create an unnamed node linked to the object made `back` creations ago.
    Create { back: usize },
    /// Create a node named `Name_{n}`, under the object made `outer`
    /// creations ago (if any and `with_outer`).
    Named {
        n: u8,
        with_outer: bool,
        outer: usize,
    },
    /// Root or unroot the object made `back` creations ago.
    Root { back: usize, on: bool },
    /// A full collection.
    Collect,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..8usize).prop_map(|back| Op::Create { back }),
        3 => (0..6u8, any::<bool>(), 0..8usize)
            .prop_map(|(n, with_outer, outer)| Op::Named { n, with_outer, outer }),
        3 => (0..8usize, any::<bool>()).prop_map(|(back, on)| Op::Root { back, on }),
        1 => Just(Op::Collect),
    ]
}

/// What one heap did with one operation, for comparing the two heaps.
#[derive(Debug, PartialEq)]
enum Outcome {
    Made(AnyObj),
    Refused(String),
    Rooted(bool),
    Collected(usize),
}

/// Applies `op` to `heap`, through the owner's paths when `owner`.
fn apply(heap: &mut Heap, made: &mut Vec<Obj<Node>>, op: &Op, owner: bool) -> Outcome {
    let pick = |made: &[Obj<Node>], back: usize| made.iter().rev().nth(back).copied();
    let id = made.len() as u64;
    match *op {
        Op::Create { back } => {
            let node = Node {
                id,
                next: pick(made, back),
            };
            let h = if owner {
                heap.try_create_mut(node)
            } else {
                heap.try_create(node)
            };
            match h {
                Ok(h) => {
                    made.push(h);
                    Outcome::Made(h.any())
                }
                Err(e) => Outcome::Refused(untagged(&e)),
            }
        }
        Op::Named {
            n,
            with_outer,
            outer,
        } => {
            let outer = pick(made, outer).filter(|_| with_outer);
            let node = Node { id, next: None };
            let name = format!("Name_{n}");
            let r = if owner {
                let mut s = heap.spawn_mut(node).name(name.as_str());
                if let Some(o) = outer {
                    s = s.outer(o);
                }
                s.create()
            } else {
                let mut s = heap.spawn(node).name(name.as_str());
                if let Some(o) = outer {
                    s = s.outer(o);
                }
                s.create()
            };
            match r {
                Ok(h) => {
                    made.push(h);
                    Outcome::Made(h.any())
                }
                Err(e) => Outcome::Refused(untagged(&e)),
            }
        }
        Op::Root { back, on } => match pick(made, back) {
            Some(h) if on => Outcome::Rooted(heap.add_to_root(h).is_ok()),
            Some(h) => Outcome::Rooted(heap.remove_from_root(h).is_ok()),
            None => Outcome::Rooted(false),
        },
        Op::Collect => Outcome::Collected(heap.collect().expect("collect").freed),
    }
}

/// An error's message without the heap tags it names (the two heaps
/// have different ones).
fn untagged(e: &Error) -> String {
    let mut out = String::new();
    let mut rest = e.to_string();
    while let Some(at) = rest.find("heap ") {
        out.push_str(&rest[..at + 5]);
        rest = rest[at + 5..]
            .trim_start_matches(|c: char| c.is_ascii_digit())
            .to_string();
    }
    out + &rest
}

fn small_heap() -> Heap {
    // A small cap, so that creation also meets the cap.
    Heap::with_config(HeapConfig {
        max_objects: 24,
        ..HeapConfig::DEFAULT
    })
    .expect("config")
}

proptest! {
    #![proptest_config(if cfg!(miri) {
        // Under miri: a few cases, and no regression file (isolation).
        ProptestConfig { cases: 3, failure_persistence: None, ..ProptestConfig::default() }
    } else {
        ProptestConfig { cases: 96, ..ProptestConfig::default() }
    })]

    /// Both paths hand out the same slots and serials, refuse the same
    /// creations (cap, name taken, dead outer), keep the same names and
    /// objects alive, and the objects hold what was put in them.
    #[test]
    fn owner_paths_match_shared_paths(ops in prop::collection::vec(op(), 1..120)) {
        let (mut shared, mut owner) = (small_heap(), small_heap());
        let (mut made_s, mut made_o) = (Vec::new(), Vec::new());
        for op in &ops {
            let a = apply(&mut shared, &mut made_s, op, false);
            let b = apply(&mut owner, &mut made_o, op, true);
            // Two heaps have different tags: compare slots and generations.
            let norm = |o: Outcome| match o {
                Outcome::Made(h) => Outcome::Refused(format!(
                    "made {} gen {}",
                    h.index(),
                    coreobject::serial::generation(h.serial())
                )),
                o => o,
            };
            prop_assert_eq!(norm(a), norm(b), "after {:?}", op);
            prop_assert_eq!(shared.len(), owner.len());
        }
        for (s, o) in made_s.iter().zip(&made_o) {
            prop_assert_eq!(shared.get(*s).map(|n| n.id), owner.get(*o).map(|n| n.id));
            prop_assert_eq!(shared.name_of(*s), owner.name_of(*o));
            prop_assert_eq!(shared.outer_of(*s).map(|h| h.index()), owner.outer_of(*o).map(|h| h.index()));
            if let Some(n) = owner.get(*o) {
                prop_assert_eq!(n.next.map(|h| h.index()), shared[*s].next.map(|h| h.index()));
            }
        }
    }
}

/// At the cap, the owner's path refuses with the cap report and leaves the
/// heap as it was; freeing makes room again, and the slot comes back with
/// a newer generation (its old handle stays stale).
#[test]
fn owner_path_at_the_cap() {
    let mut heap = Heap::with_config(HeapConfig {
        max_objects: 3,
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    let hs: Vec<_> = (0..3)
        .map(|id| heap.create_mut(Node { id, next: None }))
        .collect();
    let err = heap.try_create_mut(Node::default()).unwrap_err();
    assert!(matches!(err, Error::CapReached(_)), "{err}");
    assert_eq!(heap.len(), 3);
    heap.add_to_root(hs[0]).unwrap();
    heap.add_to_root(hs[2]).unwrap();
    assert_eq!(heap.collect().unwrap().freed, 1);
    let again = heap.create_mut(Node { id: 9, next: None });
    assert_eq!(again.index(), hs[1].index());
    assert_ne!(again.serial(), hs[1].serial());
    assert!(heap.get(hs[1]).is_none());
    assert_eq!(heap[again].id, 9);
    assert_eq!(heap[hs[2]].id, 2);
}

/// Threads create through `&Heap` while no one holds it mutably; between
/// those rounds the owner creates through `&mut Heap`, roots a chain of
/// survivors and collects. Every handle ever issued is distinct; survivors
/// resolve to what was put in them, everything else is stale.
#[test]
#[cfg_attr(
    miri,
    ignore = "threads contending on parking_lot locks: its contended path casts integers to pointers, which strict provenance refuses"
)]
fn threads_and_owner_share_the_table() {
    const THREADS: usize = 3;
    const PER_THREAD: u64 = 2_000;
    const ROUNDS: u64 = 6;
    let mut heap = Heap::new();
    let mut seen: HashSet<AnyObj> = HashSet::new();
    let mut kept: Vec<(Obj<Node>, u64)> = Vec::new();
    let mut dropped: Vec<Obj<Node>> = Vec::new();
    for round in 0..ROUNDS {
        // The owner: a chain, its head rooted, plus garbage.
        let mut prev = None;
        for i in 0..PER_THREAD {
            let id = round << 32 | i;
            let h = heap.create_mut(Node { id, next: prev });
            assert!(seen.insert(h.any()), "handle issued twice: {h:?}");
            if i % 2 == 0 {
                prev = Some(h);
                kept.push((h, id));
            } else {
                dropped.push(h);
            }
        }
        heap.add_to_root(prev.unwrap()).unwrap();
        // The threads: objects that become garbage, and one rooted each.
        let made: Vec<Vec<Obj<Node>>> = std::thread::scope(|s| {
            let heap = &heap;
            let workers: Vec<_> = (0..THREADS as u64)
                .map(|t| {
                    s.spawn(move || {
                        let mut v = Vec::new();
                        for i in 0..PER_THREAD {
                            let id = round << 32 | (t + 1) << 24 | i;
                            v.push(heap.create(Node { id, next: None }));
                        }
                        heap.add_to_root(v[0]).unwrap();
                        v
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        for (t, v) in made.iter().enumerate() {
            for (i, h) in v.iter().enumerate() {
                assert!(seen.insert(h.any()), "handle issued twice: {h:?}");
                let id = round << 32 | (t as u64 + 1) << 24 | i as u64;
                assert_eq!(heap[*h].id, id);
                if i == 0 {
                    kept.push((*h, id));
                } else {
                    dropped.push(*h);
                }
            }
        }
        // More from the owner after the threads, then a collection.
        for i in 0..PER_THREAD / 4 {
            let h = heap.create_mut(Node {
                id: u64::MAX - i,
                next: None,
            });
            assert!(seen.insert(h.any()));
            dropped.push(h);
        }
        heap.collect().unwrap();
        for &(h, id) in &kept {
            assert_eq!(heap.get(h).map(|n| n.id), Some(id), "{h:?} lost");
        }
        for &h in &dropped {
            assert!(heap.get(h).is_none(), "{h:?} survived");
        }
        assert_eq!(heap.len(), kept.len());
    }
}

proptest! {
    #![proptest_config(if cfg!(miri) {
        ProptestConfig { cases: 3, failure_persistence: None, ..ProptestConfig::default() }
    } else {
        ProptestConfig { cases: 64, ..ProptestConfig::default() }
    })]

    /// `get_many` gives, for every handle in order, what `get` gives: live,
    /// freed, garbage and foreign handles, lists shorter and longer than its
    /// read-ahead.
    #[test]
    fn get_many_matches_get(
        n in 1..200usize,
        keep in prop::collection::vec(any::<bool>(), 200),
        picks in prop::collection::vec((0..220usize, 0..4u8), 0..300),
    ) {
        let mut heap = Heap::new();
        let other = Heap::new();
        let foreign = other.create(Node { id: 7, next: None });
        let made: Vec<_> = (0..n).map(|i| heap.create_mut(Node { id: i as u64, next: None })).collect();
        for (h, &k) in made.iter().zip(&keep) {
            if k {
                heap.add_to_root(*h).unwrap();
            }
        }
        heap.collect().unwrap();
        let garbage = made.iter().zip(&keep).find(|(_, &k)| k).map(|(h, _)| *h);
        if let Some(g) = garbage {
            heap.mark_as_garbage(g).unwrap();
        }
        let handles: Vec<Obj<Node>> = picks
            .iter()
            .map(|&(i, kind)| match kind {
                0 => foreign,
                _ => made[i % n],
            })
            .collect();
        let one: Vec<Option<u64>> = handles.iter().map(|&h| heap.get(h).map(|v| v.id)).collect();
        let many: Vec<Option<u64>> = heap.get_many(handles.iter().copied()).map(|v| v.map(|v| v.id)).collect();
        prop_assert_eq!(&one, &many);
        for (h, v) in handles.iter().zip(&many) {
            let expect = (*h != foreign && keep[h.index() as usize % 200] && Some(*h) != garbage).then_some(h.index() as u64);
            // Slot i holds object i (a fresh heap fills slots in order).
            prop_assert_eq!(*v, expect);
        }
    }
}

/// Counts the drops of [`Owns`] values.
static OWNS_DROPPED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A value with drop glue of its own (a `Vec`) and a `Drop` impl.
#[derive(Object)]
struct Owns {
    bytes: Vec<u8>,
    peer: Option<Obj<Plain>>,
}

impl Drop for Owns {
    fn drop(&mut self) {
        assert_eq!(self.bytes.len(), 3, "an Owns value dropped twice or torn");
        OWNS_DROPPED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Plain data and handles: no drop glue, so the purge frees it without a
/// call into the class.
#[derive(Object)]
struct Plain {
    v: u64,
    peer: Option<Obj<Owns>>,
}

/// The purge calls a class's drop only when its values need one, and frees
/// the others all the same: after collections that free a mix of both, every
/// `Owns` value was dropped exactly once (against a count kept here), the
/// heap holds exactly the rooted objects, and the freed slots are reused.
#[test]
fn purge_drops_what_needs_dropping() {
    let n = if cfg!(miri) { 40 } else { 2_000 };
    let mut heap = Heap::new();
    let mut kept = Vec::new();
    let mut created_owns = 0;
    let mut top = 0;
    for round in 0..3 {
        let before = OWNS_DROPPED.load(std::sync::atomic::Ordering::Relaxed);
        let mut dead_owns = 0;
        for i in 0..n {
            let p = heap.create_mut(Plain { v: i, peer: None });
            let o = heap.create(Owns {
                bytes: vec![1, 2, 3],
                peer: Some(p),
            });
            created_owns += 1;
            top = top.max(p.index()).max(o.index());
            heap.get_mut(p).unwrap().peer = Some(o);
            if i % 10 == 0 {
                heap.add_to_root(p).unwrap();
                kept.push((p, o));
            } else {
                dead_owns += 1;
            }
        }
        let stats = heap.collect().unwrap();
        assert_eq!(stats.live, 2 * kept.len(), "round {round}");
        assert_eq!(heap.len(), 2 * kept.len(), "round {round}");
        let dropped = OWNS_DROPPED.load(std::sync::atomic::Ordering::Relaxed) - before;
        assert_eq!(dropped, dead_owns, "round {round}: Owns values dropped");
        for &(p, o) in &kept {
            assert_eq!(heap[o].bytes, [1, 2, 3]);
            assert_eq!(heap[p].peer, Some(o));
        }
    }
    // The table did not grow past the live objects plus one round's garbage.
    assert!(
        (top as usize) < 2 * (kept.len() + n as usize),
        "slots not reused"
    );
    drop(heap);
    assert_eq!(
        OWNS_DROPPED.load(std::sync::atomic::Ordering::Relaxed),
        created_owns,
        "every Owns value dropped once, the rooted ones with the heap"
    );
}

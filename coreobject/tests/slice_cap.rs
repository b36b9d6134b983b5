//! The slice that ignored its budget at a million objects (issue 24,
//! branch `slicecap`): whatever the budget, one marking slice of the
//! bench's 1M-object world took about 3 ms (1 ms and 2 ms budgets). Two
//! steps did work in one slice that the budget did not see:
//!
//! * **Objects traced whole were one unit each.** The budget reads the
//!   clock every 128 units, so a slice could trace 128 objects of up to
//!   65,536 handles before it noticed its deadline (the world's 64 levels,
//!   14,000 handles each, in one go). A drain now charges an object traced
//!   whole a unit per 32 pieces beyond its first 32.
//!   `a_drain_charges_objects_traced_whole_by_their_pieces`: every slice of
//!   `step(n)` of a major cycle over 600 objects of 4,000 handles (48 of
//!   256 under miri, `step(40)`) traces at most `32 * n + 18 * 4,000` handles, counted
//!   by the handles' own `Trace` (the rings' 16 objects, one more, and the
//!   holder; each of at most 4,000). Charged one unit each, as before, a
//!   slice of `step(64)` traces 80 of them (320,000 handles).
//! * **The work queue grew inside a slice.** A queue that outgrows its
//!   buffer copies itself into one twice its size (and the new buffer is
//!   faulted in): 3-7 ms at a million objects. A cycle's start now makes
//!   the queue's room, twice the objects the cycle may mark.
//!   `marking_grows_no_queue_inside_a_slice`: a world of 512 levels of
//!   120,000 actors, each actor holding two handles to other actors,
//!   marked in slices of `step(1_024)`: the collector's memory does not
//!   change from the first marking slice to the last (without the room made
//!   at the start, the queue doubles in later slices).
//!
//! (The third step, a major cycle's start listing every slot handed out
//! since the last cycle only to drop the list, has a unit test in
//! `heap/collect.rs`.)

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use coreobject::{Obj, Object, Phase, RefKind, Trace, Visitor};

/// Handles of `Counted` traced so far, by any visitor.
static TRACED: AtomicUsize = AtomicUsize::new(0);

/// A handle that counts its traces.
#[derive(Clone, Copy)]
struct Counted(Obj<Leaf>);

impl Trace for Counted {
    const KIND: RefKind = RefKind::Strong;
    fn trace<V: Visitor + ?Sized>(&self, v: &mut V) {
        TRACED.fetch_add(1, Ordering::Relaxed);
        v.visit(self.0.any());
    }
}

#[derive(Object, Default)]
struct Leaf {
    n: u32,
}

/// Below the size at which an object is traced in pieces (65,536), so
/// traced whole.
#[derive(Object, Default)]
struct Bag {
    refs: Vec<Counted>,
}

#[derive(Object, Default)]
struct Holder {
    bags: Vec<Obj<Bag>>,
}

#[test]
fn a_drain_charges_objects_traced_whole_by_their_pieces() {
    // (bags, handles per bag, leaves)
    let (bags, per_bag, leaves) = if cfg!(miri) {
        (48, 256, 64)
    } else {
        (600, 4_000, 4_096)
    };
    // The rings' 16 objects, the one whose charge ends the slice, and the
    // holder, each traced whole.
    let slack = 18 * per_bag;
    let mut heap = common::generational_heap();
    let leaf: Vec<Obj<Leaf>> = (0..leaves).map(|_| heap.create(Leaf::default())).collect();
    let bag: Vec<Obj<Bag>> = (0..bags)
        .map(|b| {
            let refs = (0..per_bag)
                .map(|k| Counted(leaf[(b * 7 + k) % leaves]))
                .collect();
            heap.create(Bag { refs })
        })
        .collect();
    heap.spawn(Holder { bags: bag.clone() })
        .root()
        .create()
        .unwrap();
    let budgets: &[usize] = if cfg!(miri) { &[40] } else { &[64, 256] };
    for &n in budgets {
        let limit = 32 * n + slack;
        let mut most = 0;
        let mut slices = 0;
        let before_cycle = TRACED.load(Ordering::Relaxed);
        loop {
            let before = TRACED.load(Ordering::Relaxed);
            let t = heap.step(n);
            most = most.max(TRACED.load(Ordering::Relaxed) - before);
            slices += 1;
            if t.completed.is_some() {
                break;
            }
        }
        let traced = TRACED.load(Ordering::Relaxed) - before_cycle;
        assert_eq!(traced, bags * per_bag, "every bag traced once");
        assert!(
            most <= limit,
            "step({n}): a slice traced {most} handles (limit {limit}, {slices} slices)"
        );
        assert!(bag.iter().all(|&b| heap.contains(b)));
        assert!(leaf.iter().all(|&l| heap.contains(l)));
    }
}

#[derive(Object, Default)]
struct Actor {
    next: Vec<Obj<Actor>>,
}

#[derive(Object, Default)]
struct Level {
    actors: Vec<Obj<Actor>>,
}

#[derive(Object, Default)]
struct World {
    levels: Vec<Obj<Level>>,
}

#[test]
fn marking_grows_no_queue_inside_a_slice() {
    let (actors, levels, n) = if cfg!(miri) {
        (600, 64, 16)
    } else {
        (120_000, 512, 1_024)
    };
    let mut heap = common::generational_heap();
    let actor: Vec<Obj<Actor>> = (0..actors)
        .map(|_| heap.create_mut(Actor::default()))
        .collect();
    // Each actor holds two others (a fixed scramble), so an actor may be
    // queued once per reference before it is marked.
    for (k, &a) in actor.iter().enumerate() {
        let next = vec![
            actor[(k * 7_919 + 13) % actors],
            actor[(k * 104_729 + 71) % actors],
        ];
        heap.get_mut(a).unwrap().next = next;
    }
    let level: Vec<Obj<Level>> = (0..levels)
        .map(|l| {
            let actors = actor.iter().copied().skip(l).step_by(levels).collect();
            heap.create_mut(Level { actors })
        })
        .collect();
    heap.spawn(World { levels: level }).root().create().unwrap();

    let mut first: Option<usize> = None;
    let mut marking_slices = 0;
    loop {
        let t = heap.step(n);
        if t.ended_in != Phase::Mark || t.completed.is_some() {
            break;
        }
        marking_slices += 1;
        let bytes = heap.memory_report().collector_bytes;
        match first {
            None => first = Some(bytes),
            Some(f) => assert_eq!(
                bytes, f,
                "slice {marking_slices}: the collector's memory changed while marking"
            ),
        }
    }
    assert!(marking_slices > 2, "{marking_slices} marking slices");
    while heap.gc_phase() != Phase::Idle {
        heap.step(n);
    }
    let last = heap.last_collection().unwrap();
    assert_eq!(last.freed, 0, "{last:?}");
    assert_eq!(last.marked, actors + levels + 1, "{last:?}");
}

//! Review 9 (main at abc1f4a, the `iterate` merge): `iter`, `iter_of` and
//! the table's chunk-at-a-time walk while other threads create through
//! `&Heap`.
//!
//! The owner iterates through `&Heap` while two or three threads create
//! apples and pears; each creator publishes how many objects it has made,
//! so the owner knows, before it makes an iterator, a set of objects that
//! existed then. The heap starts with a gap (`create_at` two chunks up, so
//! that the creators install the gap's chunk while walks run), freed slots
//! (which the creators reuse below the walk's end), and garbage that is
//! not yet collected. Every iterator must yield each object made before it
//! exactly once, nothing twice, nothing hidden, and, from `iter_of`, only
//! its class, each with the handle its creator got and the value it gave.
//!
//! Fails with the walk's end read as of the last sync (the creators'
//! reservations left out), with the walk stopping at a missing chunk, with
//! the class comparison or the hidden filter dropped, and (the panic test)
//! with `iter_of`'s class check made lazily, in the walk.

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};

use coreobject::{AnyObj, GcConfig, Heap, HeapConfig, Object, CHUNK_SIZE};

#[derive(Object)]
struct Apple {
    v: u64,
}

#[derive(Object)]
struct Pear {
    v: u64,
}

/// Creator threads.
const THREADS: usize = if cfg!(miri) { 2 } else { 3 };
/// Objects per creator: more than a chunk, so that the creators cross
/// chunk boundaries (the table's chunks are 128 items under miri).
const PER_THREAD: u64 = if cfg!(miri) {
    CHUNK_SIZE as u64 + 16
} else {
    3 * CHUNK_SIZE as u64 / 2
};
/// Objects a creator makes per round of the owner's.
const BLOCK: u64 = PER_THREAD / 12;
/// Objects made before the threads start, in chunk 0.
const BEFORE: u64 = if cfg!(miri) { 48 } else { 4096 };
/// The creator id of the objects made before the threads.
const OWNER: u64 = THREADS as u64;

/// The value of creator `t`'s `i`-th object.
fn value(t: u64, i: u64) -> u64 {
    t << 32 | i
}

/// Whether creator `t`'s `i`-th object is a pear (else an apple).
fn is_pear(t: u64, i: u64) -> bool {
    (i + t) % 3 == 0
}

/// What the owner knows: for each creator (and the owner, last), the
/// handle each object got, as seen by an iterator, and which objects are
/// live (not garbage).
struct Model {
    /// Per creator: the handle an iterator yielded for each object.
    handles: Vec<Vec<Option<AnyObj>>>,
    /// The owner's objects that are live (the others were made garbage).
    owner_live: Vec<bool>,
}

/// Which objects one iterator yielded: per creator, a count per object.
struct Seen(Vec<Vec<u8>>);

impl Seen {
    fn new() -> Seen {
        let mut v: Vec<Vec<u8>> = (0..THREADS).map(|_| vec![0; PER_THREAD as usize]).collect();
        v.push(vec![0; BEFORE as usize + 1]);
        Seen(v)
    }

    /// Records that an iterator yielded `h` with value `v`, of class
    /// `pear`; checks it against the model.
    fn saw(&mut self, m: &mut Model, what: &str, h: AnyObj, v: u64, pear: bool) {
        let (t, i) = (v >> 32, v & 0xffff_ffff);
        assert!(
            t <= OWNER && (i as usize) < self.0[t as usize].len(),
            "{what}: a value nobody made: {v:#x} at {h:?}"
        );
        assert_eq!(
            pear,
            is_pear(t, i),
            "{what}: object ({t}, {i}) at {h:?} yielded as the wrong class"
        );
        if t == OWNER {
            assert!(
                m.owner_live[i as usize],
                "{what}: garbage ({t}, {i}) at {h:?} yielded"
            );
        }
        let n = &mut self.0[t as usize][i as usize];
        *n += 1;
        assert_eq!(*n, 1, "{what}: object ({t}, {i}) at {h:?} yielded twice");
        let known = &mut m.handles[t as usize][i as usize];
        match *known {
            None => *known = Some(h),
            Some(k) => assert_eq!(k, h, "{what}: object ({t}, {i}) under two handles"),
        }
    }

    /// Checks that every object made before the iterator (creator `t`'s
    /// first `made[t]`; the owner's live ones) of the classes asked for was
    /// yielded.
    fn check(&self, m: &Model, what: &str, made: &[u64], pear: Option<bool>) {
        for (t, &n) in made.iter().enumerate() {
            for i in 0..n {
                let t = t as u64;
                if pear.is_some_and(|p| p != is_pear(t, i)) {
                    continue;
                }
                if t == OWNER && !m.owner_live[i as usize] {
                    continue;
                }
                assert_eq!(
                    self.0[t as usize][i as usize], 1,
                    "{what}: object ({t}, {i}), made before the iterator, not yielded once \
                     (made before it: {made:?})"
                );
            }
        }
    }
}

/// One round of the owner's: all three iterators, each against what the
/// creators had published before it was made.
fn round(heap: &Heap, m: &mut Model, progress: &[AtomicU64]) {
    let made = |owner_made: u64| -> Vec<u64> {
        let mut v: Vec<u64> = progress.iter().map(|p| p.load(Ordering::Acquire)).collect();
        v.push(owner_made);
        v
    };
    let owner_made = BEFORE + 1;

    // `iter_of::<Apple>`, driven by `next`.
    let before = made(owner_made);
    let mut seen = Seen::new();
    for (h, a) in heap.iter_of::<Apple>() {
        seen.saw(m, "iter_of::<Apple>", h.any(), a.v, false);
    }
    seen.check(m, "iter_of::<Apple>", &before, Some(false));

    // `iter_of::<Pear>`, folded (the walk's loop per chunk).
    let before = made(owner_made);
    let seen = heap
        .iter_of::<Pear>()
        .fold(Seen::new(), |mut seen, (h, p)| {
            seen.saw(m, "iter_of::<Pear>", h.any(), p.v, true);
            seen
        });
    seen.check(m, "iter_of::<Pear>", &before, Some(true));

    // `iter`, both classes.
    let before = made(owner_made);
    let mut seen = Seen::new();
    for o in heap.iter() {
        let (v, pear) = match o.typed::<Apple>() {
            Some((_, a)) => (a.v, false),
            None => (o.typed::<Pear>().expect("an apple or a pear").1.v, true),
        };
        seen.saw(m, "iter", o.id(), v, pear);
    }
    seen.check(m, "iter", &before, None);
}

/// Iteration concurrent with creation through `&Heap` (see the module doc).
#[test]
fn iteration_while_threads_create() {
    let mut heap = Heap::with_config(HeapConfig {
        max_objects: 8 * CHUNK_SIZE,
        gc: GcConfig::MANUAL,
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    let mut model = Model {
        handles: (0..=THREADS)
            .map(|t| {
                let n = if t == THREADS { BEFORE + 1 } else { PER_THREAD };
                vec![None; n as usize]
            })
            .collect(),
        owner_live: vec![true; BEFORE as usize + 1],
    };
    // The owner's objects: chunk 0, then one two chunks up (chunk 1 is a
    // gap, installed by whichever creator first takes a slot in it).
    let mut owner = Vec::new();
    for i in 0..BEFORE {
        let h = if is_pear(OWNER, i) {
            heap.create(Pear { v: value(OWNER, i) }).any()
        } else {
            heap.create(Apple { v: value(OWNER, i) }).any()
        };
        heap.add_to_root(h).unwrap();
        owner.push(h);
    }
    let far = heap
        .create_at(
            2 * CHUNK_SIZE + 5,
            Apple {
                v: value(OWNER, BEFORE),
            },
        )
        .unwrap();
    assert!(!is_pear(OWNER, BEFORE), "the far object is an apple");
    heap.add_to_root(far).unwrap();
    owner.push(far.any());
    // Every fifth freed (so the creators reuse slots below the walks'
    // end), then every seventh left garbage, uncollected (hidden).
    for (i, &h) in owner.iter().enumerate().take(BEFORE as usize) {
        if i % 5 == 1 {
            heap.remove_from_root(h).unwrap();
            heap.mark_as_garbage(h).unwrap();
            model.owner_live[i] = false;
        }
    }
    heap.collect().unwrap();
    for (i, &h) in owner.iter().enumerate().take(BEFORE as usize) {
        if i % 5 == 1 {
            assert!(!heap.contains(h), "the collection freed {i}");
        } else if i % 7 == 3 {
            heap.mark_as_garbage(h).unwrap();
            model.owner_live[i] = false;
        }
    }

    let progress: Vec<AtomicU64> = (0..THREADS).map(|_| AtomicU64::new(0)).collect();
    let started = AtomicU64::new(0);
    round(&heap, &mut model, &progress);
    let made: Vec<Vec<AnyObj>> = std::thread::scope(|s| {
        let heap = &heap;
        let progress = &progress;
        let started = &started;
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                s.spawn(move || {
                    let mut v = Vec::with_capacity(PER_THREAD as usize);
                    for i in 0..PER_THREAD {
                        // Block k waits until the owner's round k has
                        // started, so that the rounds overlap creation.
                        while started.load(Ordering::Acquire) < i / BLOCK {
                            std::thread::yield_now();
                        }
                        let t = t as u64;
                        let x = value(t, i);
                        v.push(if is_pear(t, i) {
                            heap.create(Pear { v: x }).any()
                        } else {
                            heap.create(Apple { v: x }).any()
                        });
                        progress[t as usize].store(i + 1, Ordering::Release);
                    }
                    v
                })
            })
            .collect();
        let rounds = catch_unwind(AssertUnwindSafe(|| {
            let mut rounds = 0;
            while !workers.iter().all(|w| w.is_finished()) || rounds < 2 {
                started.fetch_add(1, Ordering::Release);
                round(heap, &mut model, progress);
                rounds += 1;
            }
            rounds
        }));
        // A failed round lets the creators finish, so that the scope ends.
        started.store(u64::MAX, Ordering::Release);
        let rounds = rounds.unwrap_or_else(|p| std::panic::resume_unwind(p));
        assert!(rounds >= (PER_THREAD - 1) / BLOCK, "{rounds} rounds");
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    round(&heap, &mut model, &progress);
    // Every iterator yielded each object under the handle its creator got.
    for (t, v) in made.iter().enumerate() {
        for (i, &h) in v.iter().enumerate() {
            assert_eq!(model.handles[t][i], Some(h), "object ({t}, {i})");
        }
    }
    for (i, &h) in owner.iter().enumerate() {
        if model.owner_live[i] {
            assert_eq!(model.handles[THREADS][i], Some(h), "the owner's {i}");
        }
    }
}

common::forged_class!(Forged, Apple);

/// `iter_of` checks the class when the iterator is made, not when it is
/// first advanced: a forged class panics even if the iterator is never
/// driven, and a driven one never yields an apple as a `Forged`.
#[test]
fn iter_of_a_forged_class_panics_when_made() {
    let heap = Heap::new();
    let apple = heap.create(Apple { v: 7 });
    let p = catch_unwind(AssertUnwindSafe(|| {
        let _it = heap.iter_of::<Forged>();
    }))
    .expect_err("iter_of::<Forged> panics when made");
    let msg = p
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(
        msg.contains("returns the class of another type"),
        "message: {msg}"
    );
    assert_eq!(heap[apple].v, 7);
}

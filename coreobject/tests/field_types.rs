//! Field types beyond handles and containers: the integer atomics and
//! `AtomicBool` (plain data), and `Mutex`/`RwLock` from `std::sync` and from
//! `parking_lot` (traced through to what they guard, like `Box` and `Arc`),
//! also behind an `Arc`.
//!
//! Checks each field's `RefKind` in the class table; that an object reachable
//! only through a lock survives a collection and is freed once the lock no
//! longer holds it; that a poisoned `std` lock is still traced; that a lock
//! held briefly by another thread is waited for, not skipped; and that a lock
//! held for longer than `trace::LOCK_WAIT` (by another thread, or by the
//! collecting thread itself) makes `collect` panic with a message naming the
//! lock, with nothing freed, and that the next collection after the release
//! keeps the referent alive.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{
    AtomicBool, AtomicI16, AtomicI32, AtomicI64, AtomicI8, AtomicIsize, AtomicPtr, AtomicU16,
    AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
use std::sync::{mpsc, Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use coreobject::trace::LOCK_WAIT;
use coreobject::{FieldInfo, Heap, Obj, Object, RefKind, Trace, Visitor, Weak};
use parking_lot as pl;

/// The target of every reference below.
#[derive(Object, Default)]
struct Leaf {
    n: u32,
}

fn fields_of(class: &coreobject::Class) -> Vec<(&'static str, &'static str, RefKind)> {
    class
        .fields()
        .iter()
        .map(|f: &FieldInfo| (f.name, f.type_name, f.kind))
        .collect()
}

fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else {
        String::from("<non-string panic>")
    }
}

// ---------------------------------------------------------------- atomics

#[derive(Object, Default)]
struct Counters {
    b: AtomicBool,
    i8: AtomicI8,
    i16: AtomicI16,
    i32: AtomicI32,
    i64: AtomicI64,
    isize: AtomicIsize,
    u8: AtomicU8,
    u16: AtomicU16,
    u32: AtomicU32,
    u64: AtomicU64,
    usize: AtomicUsize,
}

#[derive(Object)]
struct Tracker {
    hits: AtomicU64,
    alive: AtomicBool,
    target: Obj<Leaf>,
    #[object(skip)]
    raw: AtomicPtr<u8>,
}

fn assert_plain<T: Trace + ?Sized>() {
    assert!(!T::NEEDS_TRACE, "{}", std::any::type_name::<T>());
    assert_eq!(T::KIND, RefKind::Plain, "{}", std::any::type_name::<T>());
}

#[test]
fn atomics_are_plain_data() {
    assert_plain::<AtomicBool>();
    assert_plain::<AtomicI8>();
    assert_plain::<AtomicI16>();
    assert_plain::<AtomicI32>();
    assert_plain::<AtomicI64>();
    assert_plain::<AtomicIsize>();
    assert_plain::<AtomicU8>();
    assert_plain::<AtomicU16>();
    assert_plain::<AtomicU32>();
    assert_plain::<AtomicU64>();
    assert_plain::<AtomicUsize>();

    use RefKind::Plain;
    assert_eq!(
        fields_of(Counters::class()),
        [
            ("b", "AtomicBool", Plain),
            ("i8", "AtomicI8", Plain),
            ("i16", "AtomicI16", Plain),
            ("i32", "AtomicI32", Plain),
            ("i64", "AtomicI64", Plain),
            ("isize", "AtomicIsize", Plain),
            ("u8", "AtomicU8", Plain),
            ("u16", "AtomicU16", Plain),
            ("u32", "AtomicU32", Plain),
            ("u64", "AtomicU64", Plain),
            ("usize", "AtomicUsize", Plain),
        ]
    );
    assert!(!Counters::class().needs_trace(), "atomics hold no handles");
    assert!(Counters::class().has_default());
    assert_eq!(
        fields_of(Tracker::class()),
        [
            ("hits", "AtomicU64", Plain),
            ("alive", "AtomicBool", Plain),
            ("target", "Obj<Leaf>", RefKind::Strong),
            ("raw", "AtomicPtr<u8>", RefKind::Skipped),
        ]
    );

    // Atomics live happily next to handles, and are updated through `&Heap`.
    let mut heap = Heap::new();
    let counters = heap.create(Counters::default());
    heap.add_to_root(counters).unwrap();
    let target = heap.create(Leaf { n: 4 });
    let tracker = heap.create(Tracker {
        hits: AtomicU64::new(0),
        alive: AtomicBool::new(true),
        target,
        raw: AtomicPtr::new(std::ptr::null_mut()),
    });
    heap.add_to_root(tracker).unwrap();
    let stray = heap.create(Leaf::default());
    heap[tracker].hits.fetch_add(3, Ordering::Relaxed);
    heap[counters].i16.store(-7, Ordering::Relaxed);
    let stats = heap.collect().unwrap();
    assert_eq!((stats.marked, stats.freed), (3, 1));
    assert!(heap.get(stray).is_none());
    assert_eq!(heap[target].n, 4);
    assert_eq!(heap[tracker].hits.load(Ordering::Relaxed), 3);
    assert!(heap[tracker].alive.load(Ordering::Relaxed));
    assert!(heap[tracker].raw.load(Ordering::Relaxed).is_null());
    assert_eq!(heap[counters].i16.load(Ordering::Relaxed), -7);
}

// ---------------------------------------------------------------- kinds

#[derive(Object)]
struct Locks {
    std_mutex: Mutex<Vec<Obj<Leaf>>>,
    std_rwlock: RwLock<Option<Obj<Leaf>>>,
    pl_mutex: pl::Mutex<Obj<Leaf>>,
    pl_rwlock: pl::RwLock<HashMap<u32, Obj<Leaf>>>,
    shared: Arc<Vec<Obj<Leaf>>>,
    weak: Mutex<Option<Weak<Leaf>>>,
    count: Mutex<u32>,
    name: pl::RwLock<String>,
    #[object(skip)]
    skipped: pl::Mutex<Vec<Obj<Leaf>>>,
}

#[test]
fn a_lock_field_has_the_kind_of_what_it_guards() {
    use RefKind::{Container, Plain, Skipped, Strong};
    assert_eq!(
        fields_of(Locks::class()),
        [
            ("std_mutex", "Mutex<Vec<Obj<Leaf>>>", Container),
            ("std_rwlock", "RwLock<Option<Obj<Leaf>>>", Strong),
            ("pl_mutex", "pl::Mutex<Obj<Leaf>>", Strong),
            (
                "pl_rwlock",
                "pl::RwLock<HashMap<u32, Obj<Leaf>>>",
                Container
            ),
            ("shared", "Arc<Vec<Obj<Leaf>>>", Container),
            ("weak", "Mutex<Option<Weak<Leaf>>>", RefKind::Weak),
            ("count", "Mutex<u32>", Plain),
            ("name", "pl::RwLock<String>", Plain),
            ("skipped", "pl::Mutex<Vec<Obj<Leaf>>>", Skipped),
        ]
    );
    assert!(Locks::class().needs_trace());
    const {
        assert!(<Mutex<Obj<Leaf>> as Trace>::NEEDS_TRACE);
        assert!(<pl::RwLock<Vec<Obj<Leaf>>> as Trace>::NEEDS_TRACE);
        assert!(!<RwLock<Vec<Weak<Leaf>>> as Trace>::NEEDS_TRACE);
        assert!(!<pl::Mutex<u64> as Trace>::NEEDS_TRACE);
    }
    // Consistent with `Box` and `Arc`: the wrapper is transparent.
    assert_eq!(
        <Mutex<Vec<Obj<Leaf>>> as Trace>::KIND,
        <Box<Vec<Obj<Leaf>>> as Trace>::KIND
    );
    assert_eq!(
        <pl::RwLock<Obj<Leaf>> as Trace>::KIND,
        <Arc<Obj<Leaf>> as Trace>::KIND
    );

    #[derive(Object)]
    struct OnlyPlainLocks {
        a: Mutex<u32>,
        b: pl::RwLock<Vec<Weak<Leaf>>>,
        c: Arc<pl::Mutex<String>>,
    }
    assert!(
        !OnlyPlainLocks::class().needs_trace(),
        "locks around plain data hold no handles"
    );
    let _ = |o: OnlyPlainLocks| (o.a, o.b, o.c);
}

#[test]
fn every_lock_field_is_traced_and_only_those() {
    let mut heap = Heap::new();
    let leaf = |n| heap.create(Leaf { n });
    let (a, b, c, d, e, w, s) = (
        leaf(1),
        leaf(2),
        leaf(3),
        leaf(4),
        leaf(5),
        leaf(6),
        leaf(7),
    );
    let outside = Arc::new(vec![e]);
    let locks = heap.create(Locks {
        std_mutex: Mutex::new(vec![a]),
        std_rwlock: RwLock::new(Some(b)),
        pl_mutex: pl::Mutex::new(c),
        pl_rwlock: pl::RwLock::new(HashMap::from([(9, d)])),
        shared: outside.clone(),
        weak: Mutex::new(Some(w.downgrade())),
        count: Mutex::new(0),
        name: pl::RwLock::new("locks".into()),
        skipped: pl::Mutex::new(vec![s]),
    });
    heap.add_to_root(locks).unwrap();
    let stats = heap.collect().unwrap();
    for (what, l) in [
        ("std_mutex", a),
        ("std_rwlock", b),
        ("pl_mutex", c),
        ("pl_rwlock", d),
        ("shared", e),
    ] {
        assert!(heap.get(l).is_some(), "{what} should be traced");
    }
    assert!(heap.get(w).is_none(), "a weak handle in a lock is weak");
    assert!(heap.get(s).is_none(), "a skipped lock is never traced");
    assert_eq!((stats.marked, stats.freed), (6, 2));
    // Tracing released every lock it took.
    let l = &heap[locks];
    assert!(l.std_mutex.try_lock().is_ok() && l.std_rwlock.try_write().is_ok());
    assert!(l.pl_mutex.try_lock().is_some() && l.pl_rwlock.try_write().is_some());
    assert_eq!(Arc::strong_count(&outside), 2);
    assert_eq!(
        l.skipped.lock()[0],
        s,
        "the skipped handle is kept, just stale"
    );
}

// ------------------------------------------------- keep alive, then free

/// Roots a holder made by `make` around one leaf, with an unreferenced
/// decoy beside it. Collects: the leaf survives (twice, so a lock left taken
/// by the first trace would show), the decoy does not. Then `clear` removes
/// the reference, and the next collection frees the leaf.
fn keeps_then_frees<T: Object>(make: impl FnOnce(Obj<Leaf>) -> T, clear: impl FnOnce(&mut T)) {
    let mut heap = Heap::new();
    let leaf = heap.create(Leaf { n: 42 });
    let decoy = heap.create(Leaf::default());
    let holder = heap.create(make(leaf));
    heap.add_to_root(holder).unwrap();
    for _ in 0..2 {
        let stats = heap.collect().unwrap();
        assert_eq!(heap[leaf].n, 42, "reachable only through the lock");
        assert!(heap.get(decoy).is_none());
        assert_eq!(stats.marked, 2);
    }
    clear(&mut heap[holder]);
    let stats = heap.collect().unwrap();
    assert!(heap.get(leaf).is_none(), "no longer referenced");
    assert_eq!((stats.marked, stats.freed), (1, 1));
}

#[derive(Object)]
struct StdMutexHolder {
    refs: Mutex<Vec<Obj<Leaf>>>,
}

#[derive(Object)]
struct StdRwLockHolder {
    refs: RwLock<Option<Obj<Leaf>>>,
}

#[derive(Object)]
struct PlMutexHolder {
    refs: pl::Mutex<Vec<Option<Obj<Leaf>>>>,
}

#[derive(Object)]
struct PlRwLockHolder {
    refs: pl::RwLock<Option<Obj<Leaf>>>,
}

/// A lock shared outside the heap. The derive refuses to trace such a field
/// itself (`tests/ui/shared_lock_field.rs`: code outside the heap could move
/// a handle while the collector traces); a `trace_with` function may still
/// report it, the program then promising that no handle moves in it during
/// a collection. Here it is only filled, emptied and held, never moved in.
#[derive(Object)]
#[object(trace_with = trace_shared)]
struct SharedHolder {
    #[object(skip)]
    refs: Arc<Mutex<Vec<Obj<Leaf>>>>,
}

fn trace_shared<V: Visitor + ?Sized>(h: &SharedHolder, v: &mut V) {
    Trace::trace(&*h.refs, v)
}

#[test]
fn std_mutex_keeps_its_contents_alive() {
    keeps_then_frees(
        |l| StdMutexHolder {
            refs: Mutex::new(vec![l]),
        },
        |h| h.refs.lock().unwrap().clear(),
    );
}

#[test]
fn std_rwlock_keeps_its_contents_alive() {
    keeps_then_frees(
        |l| StdRwLockHolder {
            refs: RwLock::new(Some(l)),
        },
        |h| *h.refs.write().unwrap() = None,
    );
}

#[test]
fn parking_lot_mutex_keeps_its_contents_alive() {
    keeps_then_frees(
        |l| PlMutexHolder {
            refs: pl::Mutex::new(vec![None, Some(l)]),
        },
        |h| h.refs.get_mut()[1] = None,
    );
}

#[test]
fn parking_lot_rwlock_keeps_its_contents_alive() {
    keeps_then_frees(
        |l| PlRwLockHolder {
            refs: pl::RwLock::new(Some(l)),
        },
        |h| *h.refs.write() = None,
    );
}

#[test]
fn arc_of_a_mutex_keeps_its_contents_alive() {
    keeps_then_frees(
        |l| SharedHolder {
            refs: Arc::new(Mutex::new(vec![l])),
        },
        |h| h.refs.lock().unwrap().clear(),
    );
}

/// A shared list: every holder keeps its contents alive, and a clone of the
/// `Arc` outside the heap is not a root.
#[test]
fn arc_of_a_mutex_shared_inside_and_outside_the_heap() {
    let mut heap = Heap::new();
    let leaf = heap.create(Leaf { n: 1 });
    let outside = Arc::new(Mutex::new(vec![leaf]));
    let a = heap.create(SharedHolder {
        refs: outside.clone(),
    });
    let b = heap.create(SharedHolder {
        refs: outside.clone(),
    });
    heap.add_to_root(a).unwrap();
    heap.add_to_root(b).unwrap();
    heap.collect().unwrap();
    assert!(heap.get(leaf).is_some());

    // Either holder suffices.
    heap.remove_from_root(a).unwrap();
    heap.collect().unwrap();
    assert!(heap.get(a).is_none() && heap.get(leaf).is_some());
    assert_eq!(Arc::strong_count(&outside), 2, "a's clone was dropped");

    // A new reference added from outside the heap is seen by the next trace.
    let late = heap.create(Leaf { n: 2 });
    outside.lock().unwrap().push(late);
    heap.collect().unwrap();
    assert_eq!(heap[late].n, 2);

    // Removing the references (from outside) frees them.
    outside.lock().unwrap().clear();
    heap.collect().unwrap();
    assert!(heap.get(leaf).is_none() && heap.get(late).is_none());

    // The outside clone is not a root: once no object holds the list, what
    // it names is freed, and the handles it keeps go stale.
    let again = heap.create(Leaf { n: 3 });
    outside.lock().unwrap().push(again);
    heap.remove_from_root(b).unwrap();
    heap.collect().unwrap();
    assert!(heap.get(b).is_none() && heap.get(again).is_none());
    assert!(heap.is_empty());
    assert_eq!(Arc::strong_count(&outside), 1);
}

// ---------------------------------------------------------------- poison

#[test]
fn a_poisoned_std_mutex_is_still_traced() {
    let mut heap = Heap::new();
    let leaf = heap.create(Leaf { n: 8 });
    let holder = heap.create(StdMutexHolder {
        refs: Mutex::new(vec![leaf]),
    });
    heap.add_to_root(holder).unwrap();
    let p = catch_unwind(AssertUnwindSafe(|| {
        let _guard = heap[holder].refs.lock().unwrap();
        panic!("poisons the mutex");
    }))
    .unwrap_err();
    assert_eq!(panic_text(p), "poisons the mutex");
    assert!(heap[holder].refs.is_poisoned());

    heap.collect().unwrap();
    heap.collect().unwrap();
    assert_eq!(heap[leaf].n, 8, "traced although poisoned");
    assert!(
        heap[holder].refs.is_poisoned(),
        "tracing does not clear poison"
    );

    heap[holder]
        .refs
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
    heap.collect().unwrap();
    assert!(heap.get(leaf).is_none());
}

#[test]
fn a_poisoned_std_rwlock_is_still_traced() {
    let mut heap = Heap::new();
    let leaf = heap.create(Leaf { n: 9 });
    let holder = heap.create(StdRwLockHolder {
        refs: RwLock::new(Some(leaf)),
    });
    heap.add_to_root(holder).unwrap();
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let _guard = heap[holder].refs.write().unwrap();
        panic!("poisons the rwlock");
    }));
    assert!(heap[holder].refs.is_poisoned());

    heap.collect().unwrap();
    assert_eq!(heap[leaf].n, 9, "traced although poisoned");

    *heap[holder]
        .refs
        .write()
        .unwrap_or_else(PoisonError::into_inner) = None;
    heap.collect().unwrap();
    assert!(heap.get(leaf).is_none());
}

// ---------------------------------------------------------------- held locks

/// Holds `lock` on another thread from when this returns until the sender
/// it returns is used (or dropped); the thread's handle comes with it.
fn hold_elsewhere<T: Send + 'static>(
    lock: Arc<Mutex<T>>,
    for_at_most: Option<Duration>,
) -> (mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    let (locked_tx, locked_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        let guard = lock.lock().unwrap();
        locked_tx.send(()).unwrap();
        match for_at_most {
            Some(d) => std::thread::sleep(d),
            None => {
                let _ = release_rx.recv();
            }
        }
        drop(guard);
    });
    locked_rx.recv().unwrap();
    (release_tx, t)
}

#[test]
fn a_lock_held_briefly_elsewhere_is_waited_for() {
    let mut heap = Heap::new();
    let leaf = heap.create(Leaf { n: 5 });
    let list = Arc::new(Mutex::new(vec![leaf]));
    let holder = heap.create(SharedHolder { refs: list.clone() });
    heap.add_to_root(holder).unwrap();
    let hold = Duration::from_millis(100);
    assert!(hold * 4 < LOCK_WAIT, "the test needs room below the bound");
    let t0 = Instant::now();
    let (_release, t) = hold_elsewhere(list, Some(hold));
    heap.collect().unwrap();
    assert!(
        t0.elapsed() >= hold - Duration::from_millis(5),
        "the trace must wait for the lock, not skip it"
    );
    assert_eq!(heap[leaf].n, 5);
    t.join().unwrap();
}

#[test]
fn a_lock_held_elsewhere_too_long_panics_and_loses_nothing() {
    let mut heap = Heap::new();
    let leaf = heap.create(Leaf { n: 6 });
    let decoy = heap.create(Leaf::default());
    let list = Arc::new(Mutex::new(vec![leaf]));
    let holder = heap.create(SharedHolder { refs: list.clone() });
    heap.add_to_root(holder).unwrap();

    let (release, t) = hold_elsewhere(list, None);
    let t0 = Instant::now();
    let p = catch_unwind(AssertUnwindSafe(|| heap.collect())).unwrap_err();
    let waited = t0.elapsed();
    let text = panic_text(p);
    assert!(waited >= LOCK_WAIT, "gave up after {waited:?}");
    assert!(waited < LOCK_WAIT * 3, "took {waited:?}");
    assert!(
        text.contains("Mutex<alloc::vec::Vec<coreobject::handle::Obj<field_types::Leaf>>>"),
        "the message names the lock's type: {text}"
    );
    assert!(text.contains("held across a garbage collection"), "{text}");
    assert!(text.contains(&format!("{LOCK_WAIT:?}")), "{text}");

    // The abandoned collection freed nothing, not even the garbage.
    assert_eq!(heap[leaf].n, 6);
    assert!(heap.get(decoy).is_some());
    assert!(heap.get(holder).is_some());

    release.send(()).unwrap();
    t.join().unwrap();
    let stats = heap.collect().unwrap();
    assert_eq!(
        heap[leaf].n, 6,
        "the referent survived the failed collection"
    );
    assert!(heap.get(decoy).is_none());
    assert_eq!((stats.marked, stats.freed), (2, 1));
}

/// The collecting thread itself holds a lock (through an `Arc` clone outside
/// the heap): a `try_read` fails, and tracing panics instead of deadlocking.
#[test]
fn a_lock_held_by_the_collecting_thread_panics_instead_of_deadlocking() {
    #[derive(Object)]
    #[object(trace_with = trace_pins)]
    struct Board {
        #[object(skip)]
        pins: Arc<pl::RwLock<Vec<Obj<Leaf>>>>,
    }
    fn trace_pins<V: Visitor + ?Sized>(b: &Board, v: &mut V) {
        Trace::trace(&*b.pins, v)
    }
    let mut heap = Heap::new();
    let leaf = heap.create(Leaf { n: 10 });
    let pins = Arc::new(pl::RwLock::new(vec![leaf]));
    let board = heap.create(Board { pins: pins.clone() });
    heap.add_to_root(board).unwrap();

    let guard = pins.write();
    let p = catch_unwind(AssertUnwindSafe(|| heap.collect())).unwrap_err();
    let text = panic_text(p);
    // parking_lot's locks are `lock_api`'s, over parking_lot's raw lock.
    assert!(
        text.contains(
            "RwLock<parking_lot::raw_rwlock::RawRwLock, \
             alloc::vec::Vec<coreobject::handle::Obj<field_types::Leaf>>>"
        ),
        "the message names the lock's type: {text}"
    );
    assert!(text.contains("held across a garbage collection"), "{text}");
    assert_eq!(heap[leaf].n, 10);
    drop(guard);

    heap.collect().unwrap();
    assert_eq!(heap[leaf].n, 10);
    pins.write().clear();
    heap.collect().unwrap();
    assert!(heap.get(leaf).is_none());
}

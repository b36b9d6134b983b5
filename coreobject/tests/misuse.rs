//! Misuse: every way of holding the heap wrong gets a clear error, and the
//! heap stays consistent afterwards.
//!
//! Runtime errors checked here (variant and `Display` text): stale, foreign,
//! garbage and wrong-class handles; the object cap (the message names the cap
//! and the per-class counts); taken and out-of-range `create_at` indices; bad
//! names and outers; permanent pool objects; a disabled collector; bad heap
//! configs. Panics inside create and delete listeners leave the heap
//! consistent: later creations and collections work and the counts are right.
//!
//! Two misuses are ruled out at compile time and so are only described here
//! (the compile-fail tests live in `tests/ui`):
//!
//! * **A listener mutating the heap.** Listeners get an [`ObjectEvent`] and no
//!   heap reference, must be `Send + Sync + 'static` (so they cannot borrow
//!   one), and are registered through `&mut Heap`; a listener cannot call
//!   `create`, `get_mut` or `collect` on the heap that runs it.
//! * **Collecting mid-iteration.** `iter()` borrows `&Heap` and `collect()`
//!   takes `&mut Heap`, so a collection inside a loop over objects does not
//!   compile. What is testable at run time is the intended pattern: gather
//!   handles while iterating, then collect.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

use coreobject::{
    AnyObj, Error, GcConfig, Heap, HeapConfig, Obj, Object, ObjectEvent, ResolveError,
};

#[derive(Object, Default, Debug)]
struct Rock {
    weight: u32,
}

#[derive(Object, Default, Debug)]
struct Tree;

#[derive(Object, Default, Debug)]
struct Bomb;

fn capped(max_objects: u32) -> Heap {
    Heap::with_config(HeapConfig {
        max_objects,
        ..HeapConfig::DEFAULT
    })
    .unwrap()
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

#[test]
fn stale_handle() {
    let mut heap = Heap::new();
    let h = heap.create(Rock { weight: 1 });
    heap.collect().unwrap();
    let again = heap.create(Rock { weight: 2 }); // same slot, new serial
    assert_eq!(again.index(), h.index());

    let err = heap.try_get(h).unwrap_err();
    assert_eq!(err, ResolveError::Stale(h.any()));
    let text = err.to_string();
    assert!(text.starts_with("stale handle AnyObj<_>(#0 gen "), "{text}");
    assert!(text.ends_with("its object was freed"), "{text}");
    assert!(heap.get(h).is_none());
    assert!(heap.get_mut(h).is_none());
    assert!(heap.strong(h).is_none());
    assert!(heap.upgrade(h.downgrade()).is_none());
    assert_eq!(
        heap.add_to_root(h),
        Err(coreobject::Error::Resolve(ResolveError::Stale(h.any())))
    );
    assert_eq!(
        heap.remove_from_root(h),
        Err(coreobject::Error::Resolve(ResolveError::Stale(h.any())))
    );
    assert_eq!(
        heap.mark_as_garbage(h),
        Err(coreobject::Error::Resolve(ResolveError::Stale(h.any())))
    );
    assert_eq!(
        heap.clear_garbage(h),
        Err(coreobject::Error::Resolve(ResolveError::Stale(h.any())))
    );
    assert!(heap.class_of(h).is_none());
    assert!(heap.path_name(h).is_none());
    assert_eq!(heap.strong_count(h), 0);
    // None of that touched the new occupant.
    assert_eq!(heap[again].weight, 2);
    assert!(!heap.is_rooted(again));
    assert!(!heap.is_garbage(again));
}

#[test]
fn foreign_handle() {
    let a = Heap::new();
    let b = Heap::new();
    let h = a.create(Rock { weight: 1 });
    b.create(Rock { weight: 2 });
    let err = b.try_get(h).unwrap_err();
    assert_eq!(
        err,
        ResolveError::Foreign {
            handle: h.any(),
            handle_heap: a.tag(),
            this_heap: b.tag()
        }
    );
    assert_eq!(
        err.to_string(),
        format!(
            "foreign handle {:?}: it was made by heap {}, this is heap {}",
            h.any(),
            a.tag(),
            b.tag()
        )
    );
    assert!(matches!(
        b.add_to_root(h),
        Err(coreobject::Error::Resolve(ResolveError::Foreign { .. }))
    ));
    // As an outer, a foreign handle is refused too.
    let spawned = b.spawn(Rock::default()).outer(h).create();
    assert!(matches!(
        spawned,
        Err(coreobject::Error::Resolve(ResolveError::Foreign { .. }))
    ));
    assert_eq!(b.len(), 1);
}

#[test]
fn garbage_and_wrong_class_handles() {
    let mut heap = Heap::new();
    // A wrong class can only be met in a slot restored under an old serial.
    let old = heap.create(Rock::default());
    heap.collect().unwrap();
    let tree = heap
        .create_at_with_serial(old.index(), old.serial(), Tree)
        .unwrap();
    let err = heap.try_get(old).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("handle {:?} names a Tree, not a Rock", tree.any())
    );
    let rock = heap.create(Rock::default());
    heap.mark_as_garbage(rock).unwrap();
    let err = heap.try_get(rock).unwrap_err();
    assert_eq!(err, ResolveError::Garbage(rock.any()));
    assert!(
        err.to_string().contains("garbage or being destroyed"),
        "{err}"
    );
    assert!(heap.get_even_if_garbage(rock).is_some());
    // Garbage cannot become an outer or a root.
    assert!(matches!(
        heap.spawn(Tree).outer(rock).create(),
        Err(coreobject::Error::Resolve(ResolveError::Garbage(_)))
    ));
    assert_eq!(
        heap.add_to_root(rock),
        Err(coreobject::Error::Resolve(ResolveError::Garbage(
            rock.any()
        )))
    );
    heap.clear_garbage(rock).unwrap();
    assert!(heap.get(rock).is_some(), "clear_garbage undoes the mark");
}

#[test]
fn object_cap_reached_names_the_cap_and_the_classes() {
    let mut heap = capped(5);
    let rocks: Vec<Obj<Rock>> = (0..3).map(|w| heap.create(Rock { weight: w })).collect();
    heap.create(Tree);
    heap.create(Tree);
    let err = heap.try_create(Bomb).unwrap_err();
    let Error::CapReached(report) = &err else {
        panic!("expected CapReached, got {err:?}");
    };
    assert_eq!(report.cap, 5);
    assert_eq!(report.by_class, [("Rock", 3), ("Tree", 2)]);
    let text = err.to_string();
    assert_eq!(
        text,
        "object cap of 5 reached (raise HeapConfig::max_objects); objects by class: Rock 3, Tree 2"
    );
    // A failed creation changes nothing; repeated failures neither.
    for _ in 0..3 {
        assert!(matches!(heap.try_create(Bomb), Err(Error::CapReached(_))));
    }
    assert!(matches!(
        heap.spawn(Bomb).name("b").create(),
        Err(Error::CapReached(_))
    ));
    assert_eq!(heap.len(), 5);
    assert_eq!(heap.table_stats().high_water, 5);
    // `create` panics with the same text.
    let p = catch_unwind(AssertUnwindSafe(|| heap.create(Bomb))).unwrap_err();
    assert_eq!(panic_text(p), text);
    assert_eq!(heap.len(), 5);

    // Freeing makes room again: exactly as much as was freed.
    heap.add_to_root(rocks[0]).unwrap();
    assert_eq!(heap.collect().unwrap().freed, 4);
    assert_eq!(heap.len(), 1);
    let more: Vec<_> = (0..4).map(|_| heap.try_create(Bomb).unwrap()).collect();
    assert!(more.iter().all(|h| h.index() < 5));
    assert!(heap.try_create(Bomb).is_err());
    assert_eq!(heap.len(), 5);
    assert_eq!(heap[rocks[0]].weight, 0);
}

#[test]
fn cap_report_lists_ten_classes_then_a_count() {
    #[derive(Object, Default)]
    struct C0;
    #[derive(Object, Default)]
    struct C1;
    #[derive(Object, Default)]
    struct C2;
    #[derive(Object, Default)]
    struct C3;
    #[derive(Object, Default)]
    struct C4;
    #[derive(Object, Default)]
    struct C5;
    #[derive(Object, Default)]
    struct C6;
    #[derive(Object, Default)]
    struct C7;
    #[derive(Object, Default)]
    struct C8;
    #[derive(Object, Default)]
    struct C9;
    let heap = capped(13);
    heap.create(C0);
    heap.create(C1);
    heap.create(C2);
    heap.create(C3);
    heap.create(C4);
    heap.create(C5);
    heap.create(C6);
    heap.create(C7);
    heap.create(C8);
    heap.create(C9);
    heap.create(Rock::default());
    heap.create(Rock::default());
    heap.create(Tree);
    let text = heap.try_create(Tree).unwrap_err().to_string();
    assert!(text.contains("object cap of 13 reached"), "{text}");
    assert!(
        text.contains(": Rock 2, C0 1,"),
        "most numerous first: {text}"
    );
    assert!(text.ends_with(" and 2 more classes"), "{text}");
}

#[test]
fn taken_and_out_of_range_indices() {
    let mut heap = capped(10);
    let r = heap.create(Rock { weight: 9 });
    let err = heap.create_at(0, Rock::default()).unwrap_err();
    assert_eq!(err, Error::IndexTaken(0));
    assert_eq!(err.to_string(), "index 0 is taken");
    let err = heap.create_at(10, Rock::default()).unwrap_err();
    assert_eq!(err, Error::IndexPastCap { index: 10, cap: 10 });
    assert_eq!(err.to_string(), "index 10 is past the object cap of 10");
    assert_eq!(heap.len(), 1);
    assert_eq!(heap[r].weight, 9);
    assert_eq!(heap.create_at(9, Rock::default()).unwrap().index(), 9);
    assert_eq!(heap.create(Rock::default()).index(), 1);
}

#[test]
fn bad_names_and_outers() {
    let mut heap = Heap::new();
    let err = heap
        .spawn(Rock::default())
        .name("a.b")
        .create()
        .unwrap_err();
    assert_eq!(err, Error::InvalidName("a.b".into()));
    assert!(err.to_string().contains("contain no '.'"), "{err}");
    assert_eq!(
        heap.spawn(Rock::default()).name("").create().unwrap_err(),
        Error::InvalidName(String::new())
    );
    let first = heap.spawn(Rock::default()).name("Rock").create().unwrap();
    let err = heap.spawn(Tree).name("Rock").create().unwrap_err();
    assert_eq!(
        err.to_string(),
        "an object named \"Rock\" already exists under that outer"
    );
    assert_eq!(heap.len(), 1, "refused creations allocate nothing");
    heap.collect().unwrap();
    let err = heap.spawn(Tree).outer(first).create().unwrap_err();
    assert_eq!(
        err,
        coreobject::Error::Resolve(ResolveError::Stale(first.any())),
        "a freed outer is refused"
    );
    assert!(heap.is_empty());
}

#[test]
fn pool_objects_are_permanent() {
    let mut heap = Heap::with_config(HeapConfig {
        disregard_pool_size: 4,
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    heap.open_disregard_for_gc().unwrap();
    let a = heap.create(Rock::default());
    heap.close_disregard_for_gc();
    let err = heap.mark_as_garbage(a).unwrap_err();
    assert_eq!(err, Error::Permanent(a.any()));
    assert!(err.to_string().contains("is permanent"), "{err}");
    heap.collect().unwrap();
    assert!(heap.contains(a));
}

#[test]
fn disabled_collector_refuses_to_collect() {
    let mut heap = Heap::with_config(HeapConfig {
        gc: GcConfig::DEBUG,
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    let h = heap.create(Rock::default());
    heap.set_enabled(false);
    let err = heap.collect().unwrap_err();
    assert_eq!(err, Error::GcDisabled);
    assert!(err.to_string().contains("set_enabled(false)"), "{err}");
    assert!(heap
        .tick(std::time::Duration::from_secs(1))
        .completed
        .is_none());
    assert!(heap.contains(h));
    heap.set_enabled(true);
    assert_eq!(heap.collect().unwrap().freed, 1);
}

#[test]
fn bad_configs_are_refused() {
    let bad = [
        (
            HeapConfig {
                max_objects: 0,
                ..HeapConfig::DEFAULT
            },
            "max_objects",
        ),
        (
            HeapConfig {
                max_objects: (1 << 31) + 1,
                ..HeapConfig::DEFAULT
            },
            "max_objects",
        ),
        (
            HeapConfig {
                generation_bits: 0,
                ..HeapConfig::DEFAULT
            },
            "generation_bits",
        ),
        (
            HeapConfig {
                generation_bits: 23,
                ..HeapConfig::DEFAULT
            },
            "generation_bits",
        ),
        (
            HeapConfig {
                max_objects: 8,
                disregard_pool_size: 9,
                ..HeapConfig::DEFAULT
            },
            "disregard_pool_size",
        ),
    ];
    for (config, field) in bad {
        let err = Heap::with_config(config.clone()).unwrap_err();
        assert!(matches!(err, Error::Config(_)), "{config:?}: {err:?}");
        let text = err.to_string();
        assert!(text.starts_with("invalid heap config: "), "{text}");
        assert!(text.contains(field), "{text}");
    }
}

/// A create listener that panics: the panic leaves `create`, but the object
/// is registered and the heap stays usable.
#[test]
fn panicking_create_listener_leaves_the_heap_consistent() {
    let mut heap = Heap::new();
    let heard = Arc::new(AtomicUsize::new(0));
    let h2 = heard.clone();
    heap.on_create(move |e: &ObjectEvent| {
        h2.fetch_add(1, SeqCst);
        if e.class.name() == "Bomb" {
            panic!("listener refuses bombs");
        }
    });
    let rock = heap.create(Rock { weight: 1 });
    heap.add_to_root(rock).unwrap();
    let p = catch_unwind(AssertUnwindSafe(|| heap.create(Bomb))).unwrap_err();
    assert_eq!(panic_text(p), "listener refuses bombs");
    let p = catch_unwind(AssertUnwindSafe(|| {
        heap.spawn(Bomb).name("named_bomb").create()
    }))
    .unwrap_err();
    assert_eq!(panic_text(p), "listener refuses bombs");
    assert_eq!(heard.load(SeqCst), 3);

    // Both bombs exist (unrooted); the table and names are intact.
    assert_eq!(heap.len(), 3);
    assert_eq!(heap.class_counts(), [("Bomb", 2), ("Rock", 1)]);
    let named: AnyObj = heap
        .find(None, "named_bomb")
        .expect("registered before the panic");
    assert!(heap.downcast::<Bomb>(named).is_some());

    // Later creations and collections work; the bombs are collected normally.
    let tree = heap.create(Tree);
    assert_eq!(tree.index(), 3);
    heap.add_to_root(tree).unwrap();
    assert_eq!(heap.collect().unwrap().freed, 2);
    assert_eq!(heap.len(), 2);
    assert_eq!(heap.find(None, "named_bomb"), None);
    assert_eq!(heap[rock].weight, 1);
    let reused = heap.create(Rock { weight: 2 });
    assert_eq!(
        reused.index(),
        2,
        "freed slots 1, 2 reused last-in first-out"
    );
    assert_eq!(heard.load(SeqCst), 5);
}

/// A delete listener that panics: the sweep completes (every object is
/// freed, every other listener runs), then the panic is resumed from
/// `collect`.
#[test]
fn panicking_delete_listener_leaves_the_heap_consistent() {
    let mut heap = Heap::new();
    let deleted = Arc::new(AtomicUsize::new(0));
    let d = deleted.clone();
    heap.on_delete(move |_: &ObjectEvent| {
        d.fetch_add(1, SeqCst);
    });
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    heap.on_delete(move |_: &ObjectEvent| {
        if c.fetch_add(1, SeqCst) == 1 {
            panic!("second delete");
        }
    });
    let keep = heap.create(Rock { weight: 7 });
    heap.add_to_root(keep).unwrap();
    let doomed: Vec<Obj<Rock>> = (0..5).map(|w| heap.create(Rock { weight: w })).collect();
    let p = catch_unwind(AssertUnwindSafe(|| heap.collect())).unwrap_err();
    assert_eq!(panic_text(p), "second delete");

    assert_eq!(
        deleted.load(SeqCst),
        5,
        "the other listener heard every delete"
    );
    assert_eq!(calls.load(SeqCst), 5);
    assert!(doomed.iter().all(|h| heap.get(*h).is_none()));
    assert_eq!(heap.len(), 1);
    assert_eq!(heap.table_stats().free, 5);
    assert_eq!(heap.gc_totals().collections, 1);
    assert_eq!(heap.gc_totals().total_freed, 5);
    assert_eq!(heap[keep].weight, 7);

    // The freed slots are reused, and the next collection runs normally.
    let again: Vec<_> = (0..5).map(|_| heap.create(Tree)).collect();
    let mut slots: Vec<u32> = again.iter().map(|h| h.index()).collect();
    slots.sort();
    assert_eq!(slots, [1, 2, 3, 4, 5]);
    assert_eq!(heap.collect().unwrap().freed, 5);
    assert_eq!(deleted.load(SeqCst), 10);
    assert_eq!(heap.len(), 1);
}

/// The borrow checker forbids `collect` inside `for o in heap.iter()`; the
/// supported pattern is to gather handles, end the iteration, then collect.
#[test]
fn iterate_then_collect() {
    let mut heap = Heap::new();
    for w in 0..10 {
        let h = heap.create(Rock { weight: w });
        heap.add_to_root(h).unwrap();
    }
    let light: Vec<Obj<Rock>> = heap
        .iter_of::<Rock>()
        .filter(|(_, r)| r.weight < 4)
        .map(|(h, _)| h)
        .collect();
    for h in &light {
        heap.mark_as_garbage(*h).unwrap();
    }
    assert_eq!(heap.collect().unwrap().freed, 4);
    let left: Vec<u32> = heap.iter_of::<Rock>().map(|(_, r)| r.weight).collect();
    assert_eq!(left, [4, 5, 6, 7, 8, 9]);
    // Mutation goes through `&mut Heap` too: gather, then mutate.
    let all: Vec<Obj<Rock>> = heap.iter_of::<Rock>().map(|(h, _)| h).collect();
    for h in all {
        heap[h].weight *= 10;
    }
    let left: Vec<u32> = heap.iter_of::<Rock>().map(|(_, r)| r.weight).collect();
    assert_eq!(left, [40, 50, 60, 70, 80, 90]);
}

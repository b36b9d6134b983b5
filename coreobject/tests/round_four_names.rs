//! Round four of hardening, the names and lookups part: generated names
//! after a used-up range, names used in another heap, the disregard pool's
//! overflow, error texts, and the lookups a user reaches for (`heap[weak]`,
//! `get_disjoint_mut`, typed `find`).

use coreobject::{Error, Heap, Name, Object};

#[derive(Object, Default)]
struct Shell;

/// Item 8: once one object holds the largest number of a base, generated
/// names are searched for; each search resumes where the last stopped, so
/// many names cost linear work. (A search from a fixed start costs i tries
/// for the i-th name: 20,000 names were some 2 * 10^8 lookups, minutes in a
/// debug build; here they take milliseconds.)
#[test]
fn generated_names_after_a_used_up_range_stay_linear() {
    let heap = Heap::new();
    let shell = heap.intern("Shell").unwrap();
    heap.spawn(Shell)
        .name(shell.with_number(Name::MAX_NUMBER))
        .create()
        .unwrap();
    let world = heap.create(Shell);
    let mut seen = std::collections::HashSet::new();
    for i in 0..20_000u32 {
        let mut s = heap.spawn(Shell).unique_name(shell);
        if i % 2 == 0 {
            s = s.outer(world);
        }
        let h = s.create().unwrap();
        let n = heap.name(h).unwrap().number().unwrap();
        assert!((1 << 31..Name::MAX_NUMBER).contains(&n), "{n}");
        assert!(seen.insert(n), "{n} given twice");
        let outer = (i % 2 == 0).then_some(world.any());
        assert_eq!(heap.find_name(outer, heap.name(h).unwrap()), Some(h.any()));
    }
}

/// Item 9: a `Name` made by one heap is refused by another, whatever ids
/// the two tables use: it reads as nothing there, finds nothing, and
/// naming an object with it fails with `StaleName`.
#[test]
fn a_name_from_another_heap_is_refused() {
    let a = Heap::new();
    let b = Heap::new();
    // The same ids in both tables: entry 0 in each.
    let alpha = a.intern("Alpha").unwrap();
    let beta = b.intern("Beta").unwrap();
    assert_eq!(b.name_string(beta).as_deref(), Some("Beta"));
    assert_eq!(b.name_string(alpha), None);
    assert_eq!(b.name_string(alpha.with_number(3)), None);
    assert_eq!(a.name_string(beta), None);
    assert_eq!(a.name_string(alpha).as_deref(), Some("Alpha"));

    let err = b.spawn(Shell).name(alpha).create().unwrap_err();
    assert_eq!(err, Error::StaleName(alpha));
    let err = b.spawn(Shell).unique_name(alpha).create().unwrap_err();
    assert_eq!(err, Error::StaleName(alpha));
    assert_eq!(b.len(), 0, "nothing was created");

    let named = b.spawn(Shell).name(beta).create().unwrap();
    assert_eq!(b.find_name(None, alpha), None);
    assert_eq!(b.find_name(None, beta), Some(named.any()));
    assert_ne!(alpha, beta);
    // And in the first heap, its own name still works.
    let x = a.spawn(Shell).name(alpha).create().unwrap();
    assert_eq!(a.name_of(x).as_deref(), Some("Alpha"));
}

/// Item 9, with a heap dropped and another made: the new heap may take
/// the old heap's tag, and its table starts from the same ids, but names of
/// the old heap stay foreign.
#[test]
fn a_name_from_a_dropped_heap_is_refused() {
    let old = Heap::new();
    let gone = old.intern("Gone").unwrap();
    drop(old);
    for _ in 0..4 {
        let heap = Heap::new();
        heap.intern("Here").unwrap();
        assert_eq!(heap.name_string(gone), None);
        assert_eq!(
            heap.spawn(Shell).name(gone).create().unwrap_err(),
            Error::StaleName(gone)
        );
    }
}

#[derive(Object, Default)]
struct Coin;

/// Item 13: refusing to unroot a class default says so (it used to say the
/// object "cannot be marked as garbage", which was not what was asked).
#[test]
fn the_permanent_error_names_both_refusals() {
    let heap = Heap::new();
    let cdo = heap.class_default::<Coin>().unwrap();
    let unroot = heap.remove_from_root(cdo).unwrap_err();
    assert_eq!(unroot, Error::Permanent(cdo.any()));
    let text = unroot.to_string();
    assert!(
        text.contains("is permanent (a class default object"),
        "{text}"
    );
    assert!(
        text.contains("a class default object can neither leave the root set"),
        "{text}"
    );
    let mark = heap.mark_as_garbage(cdo).unwrap_err();
    assert!(mark.to_string().contains("cannot be marked as garbage"));
}

#[derive(Object, Default)]
struct Rock;

macro_rules! classes {
    ($($c:ident)*) => {
        $(#[derive(Object, Default)] struct $c;)*
        /// Creates one object of each class.
        fn one_of_each(heap: &Heap) {
            $(heap.create($c);)*
        }
    };
}
classes!(C1 C2 C3 C4 C5 C6 C7 C8 C9 C10 C11 C12);

/// Item 13: the cap message lists the classes separated by commas, with
/// no comma at the end, and says how many classes it left out.
#[test]
fn the_cap_message_ends_cleanly() {
    let config = |max_objects| coreobject::HeapConfig {
        max_objects,
        ..coreobject::HeapConfig::DEFAULT
    };
    let heap = Heap::with_config(config(3)).unwrap();
    for _ in 0..3 {
        heap.create(Rock);
    }
    let text = heap.try_create(Rock).unwrap_err().to_string();
    assert_eq!(
        text,
        "object cap of 3 reached (raise HeapConfig::max_objects); objects by class: Rock 3"
    );

    let heap = Heap::with_config(config(12)).unwrap();
    one_of_each(&heap);
    let text = heap.try_create(Rock).unwrap_err().to_string();
    assert!(text.ends_with(" 1 and 2 more classes"), "{text}");
    assert!(text.contains("by class: C"), "{text}");
    assert_eq!(text.matches(", ").count(), 9, "{text}");

    let heap = Heap::with_config(config(11)).unwrap();
    one_of_each_but_one(&heap);
    let text = heap.try_create(Rock).unwrap_err().to_string();
    assert!(text.ends_with(" and 1 more class"), "{text}");
}

/// Eleven classes: all of [`one_of_each`]'s but the last.
fn one_of_each_but_one(heap: &Heap) {
    heap.create(C1);
    heap.create(C2);
    heap.create(C3);
    heap.create(C4);
    heap.create(C5);
    heap.create(C6);
    heap.create(C7);
    heap.create(C8);
    heap.create(C9);
    heap.create(C10);
    heap.create(C11);
}

#[derive(Object, Default)]
struct Node {
    next: Option<coreobject::Obj<Node>>,
    hp: i32,
}

fn manual() -> Heap {
    Heap::with_config(coreobject::HeapConfig {
        gc: coreobject::GcConfig::MANUAL,
        ..coreobject::HeapConfig::DEFAULT
    })
    .unwrap()
}

/// Item 15: `heap[weak]` reads the object as `heap[obj]` does.
#[test]
fn a_weak_handle_indexes_the_heap() {
    let mut heap = manual();
    let n = heap.create(Node { next: None, hp: 4 });
    let w = n.downgrade();
    assert_eq!(heap[w].hp, 4);
    heap.add_to_root(n).unwrap();
    heap.collect().unwrap();
    assert_eq!(heap[w].hp, 4);
}

/// Item 15: indexing with a stale weak handle panics with a message that
/// names the handle and says why.
#[test]
#[should_panic(expected = "its object was freed")]
fn a_stale_weak_handle_panics_with_the_reason() {
    let mut heap = manual();
    let w = heap.create(Node::default()).downgrade();
    heap.collect().unwrap();
    let _ = heap[w].hp;
}

/// Item 15: `heap[any]` has no sensible output; `Heap::object` is the
/// untyped lookup.
#[test]
fn an_untyped_handle_gives_a_view() {
    let mut heap = manual();
    let n = heap.spawn(Node::default()).name("N_1").create().unwrap();
    let view = heap.object(n.any()).unwrap();
    assert_eq!(view.id(), n.any());
    assert_eq!(view.class().name(), "Node");
    assert_eq!(view.display_name(), "N_1");
    assert_eq!(view.typed::<Node>().map(|(h, _)| h), Some(n));
    heap.mark_as_garbage(n).unwrap();
    assert!(heap.object(n).is_none(), "garbage is not shown, as by get");
    heap.collect().unwrap();
    assert!(heap.object(n).is_none());
    assert!(Heap::new().object(n).is_none(), "foreign");
}

/// Item 15: two objects borrowed mutably at once; refused for the same
/// object twice, a stale handle and a foreign one.
#[test]
fn disjoint_mutable_borrows() {
    let mut heap = manual();
    let [a, b, c] = [1, 2, 3].map(|hp| heap.create(Node { next: None, hp }));
    {
        let [x, y, z] = heap.get_disjoint_mut([c, a, b]).unwrap();
        std::mem::swap(&mut x.hp, &mut y.hp);
        z.hp *= 10;
    }
    assert_eq!((heap[a].hp, heap[b].hp, heap[c].hp), (3, 20, 1));
    assert!(heap.get_disjoint_mut([a, b, a]).is_none());
    assert!(heap
        .get_disjoint_mut([a.downgrade(), a.downgrade()])
        .is_none());
    let other = Heap::new();
    let foreign = other.create(Node::default());
    assert!(heap.get_disjoint_mut([a, foreign]).is_none());
    heap.add_to_root(a).unwrap();
    heap.collect().unwrap();
    assert!(heap.get_disjoint_mut([a, b]).is_none(), "b was freed");
    assert_eq!(heap.get_disjoint_mut([a]).map(|[x]| x.hp), Some(3));
    let none: [coreobject::Obj<Node>; 0] = [];
    assert!(heap.get_disjoint_mut(none).is_some());
}

/// Item 15: writes through `get_disjoint_mut` pass the write barrier. Two
/// old objects each get a young object that nothing else holds; a minor
/// cycle, which re-scans only the old objects the barrier remembered, must
/// keep both.
#[test]
fn disjoint_writes_are_seen_by_a_minor_cycle() {
    let mut heap = manual();
    let a = heap.spawn(Node::default()).root().create().unwrap();
    let b = heap.spawn(Node::default()).root().create().unwrap();
    heap.collect().unwrap(); // a and b are old now
    let (ya, yb) = (heap.create(Node::default()), heap.create(Node::default()));
    let [x, y] = heap.get_disjoint_mut([a, b]).unwrap();
    x.next = Some(ya);
    y.next = Some(yb);
    heap.collect_minor().unwrap();
    assert!(heap.contains(ya) && heap.contains(yb));
    assert_eq!(heap[a].next, Some(ya));
}

/// Item 15: and a cluster member changed through `get_disjoint_mut` has its
/// references gathered again, as with `get_mut`.
#[test]
fn disjoint_writes_into_a_cluster_are_seen() {
    let mut heap = manual();
    let root = heap.spawn(Node::default()).root().create().unwrap();
    let other = heap.spawn(Node::default()).root().create().unwrap();
    heap.create_cluster(root).unwrap();
    heap.collect().unwrap();
    let fresh = heap.create(Node { next: None, hp: 8 });
    let [r, _] = heap.get_disjoint_mut([root, other]).unwrap();
    r.next = Some(fresh);
    heap.collect().unwrap();
    assert!(heap.contains(fresh));
    assert!(heap.verify_clusters().is_empty());
}

/// Item 15: typed finds, by outer and name and by path.
#[test]
fn typed_finds_check_the_class() {
    let heap = Heap::new();
    let world = heap.spawn(Coin).name("World").create().unwrap();
    let hero = heap
        .spawn(Node { next: None, hp: 5 })
        .outer(world)
        .name("Hero")
        .create()
        .unwrap();
    assert_eq!(heap.find_of::<Node>(Some(world.any()), "Hero"), Some(hero));
    assert_eq!(heap.find_of::<Coin>(Some(world.any()), "Hero"), None);
    assert_eq!(heap.find_of::<Node>(None, "Hero"), None);
    assert_eq!(heap.find_of::<Coin>(None, "World"), Some(world));
    assert_eq!(heap.find_path_of::<Node>("World.Hero"), Some(hero));
    assert_eq!(heap.find_path_of::<Coin>("World.Hero"), None);
    assert_eq!(heap.find_path_of::<Node>("World.Nobody"), None);
    heap.mark_as_garbage(hero).unwrap();
    assert_eq!(heap.find_path_of::<Node>("World.Hero"), None);
}

fn pool_of(size: u32) -> Heap {
    Heap::with_config(coreobject::HeapConfig {
        disregard_pool_size: size,
        gc: coreobject::GcConfig::MANUAL,
        ..coreobject::HeapConfig::DEFAULT
    })
    .unwrap()
}

/// Item 12: with room for 2, a 3rd object made while the pool is open is
/// refused (it used to land outside the pool, where the collector could
/// free it), by every way of creating one; closing the pool makes room for
/// ordinary objects again.
#[test]
fn a_full_open_pool_refuses_more_objects() {
    use coreobject::PoolError;
    let full = Error::DisregardPool(PoolError::Full);
    let mut heap = pool_of(2);
    heap.open_disregard_for_gc().unwrap();
    let a = heap.create(Node { next: None, hp: 1 });
    let b = heap.spawn(Node::default()).name("B").create().unwrap();
    assert_eq!(heap.try_create(Node::default()).unwrap_err(), full);
    assert_eq!(
        heap.spawn(Node::default()).name("C").create().unwrap_err(),
        full
    );
    assert_eq!(
        heap.spawn(Node::default())
            .unique_name("C")
            .create()
            .unwrap_err(),
        full
    );
    assert_eq!(heap.class_default::<Coin>(), None);
    assert_eq!(heap.len(), 2);
    assert_eq!(heap.find(None, "C"), None, "a refused name is not kept");
    let text = full.to_string();
    assert!(text.contains("pool is full"), "{text}");
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        heap.create(Node::default());
    }))
    .unwrap_err();
    let message = panic.downcast_ref::<String>().unwrap();
    assert_eq!(*message, text);

    heap.close_disregard_for_gc();
    assert_eq!(heap.disregard_len(), 2);
    let c = heap.spawn(Node::default()).name("C").create().unwrap();
    assert_eq!(c.index(), 2, "the slot after the pool");
    assert!(!heap.flags_of(c).unwrap().disregard);
    heap.collect().unwrap();
    assert!(heap.contains(a) && heap.contains(b), "permanent");
    assert!(!heap.contains(c), "an ordinary object, unreachable");
    assert!(heap.class_default::<Coin>().is_some());
}

/// Item 12, with threads racing for the pool's last slots: exactly the
/// pool's size succeed, every object made is in the pool, and the slots
/// the losers reserved are free again once the pool closes.
#[test]
fn racing_creations_fill_the_pool_exactly() {
    const SIZE: u32 = 64;
    let mut heap = pool_of(SIZE);
    heap.open_disregard_for_gc().unwrap();
    let made: Vec<Vec<coreobject::Obj<Node>>> = std::thread::scope(|s| {
        let heap = &heap;
        let workers: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(move || {
                    let mut mine = Vec::new();
                    for _ in 0..40 {
                        match heap.try_create(Node::default()) {
                            Ok(h) => mine.push(h),
                            Err(e) => {
                                assert_eq!(e, Error::DisregardPool(coreobject::PoolError::Full))
                            }
                        }
                    }
                    mine
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let made: Vec<_> = made.into_iter().flatten().collect();
    assert_eq!(made.len(), SIZE as usize);
    assert!(made.iter().all(|&h| h.index() < SIZE));
    assert!(made.iter().all(|&h| heap.flags_of(h).unwrap().disregard));
    heap.close_disregard_for_gc();
    let stats = heap.table_stats();
    assert_eq!(stats.disregard, SIZE);
    assert_eq!(stats.objects, SIZE as usize);
    // Reserved and given up past the end: on the free list, reused first.
    assert_eq!(stats.free as u32, stats.high_water - SIZE);
    let before = stats.high_water;
    for _ in 0..stats.free {
        let h = heap.create(Node::default());
        assert!(h.index() >= SIZE && h.index() < before);
    }
    heap.collect().unwrap();
    heap.collect_minor().unwrap();
    assert_eq!(heap.len(), SIZE as usize);
}

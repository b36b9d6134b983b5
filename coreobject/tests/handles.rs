//! Handles: `Obj<T>`, `Weak<T>` and `AnyObj`.
//!
//! Checks that handles are 8-byte `Copy + Eq + Hash + Debug` values whose
//! `Debug` shows index, generation and heap; that weak handles downgrade and
//! upgrade; that `AnyObj` downcasts check the class; that `heap[h]` panics
//! with a clear message for stale and foreign handles; that a slot whose
//! (deliberately narrow) generation counter runs out is retired and no old
//! handle ever resolves; that handles from another heap never resolve, not
//! even after that heap is dropped and its tag reused; that heap tags are
//! recycled, so a process can create and drop heaps indefinitely; and that
//! `create_at` refuses taken indices and fills free ones.

use std::collections::HashSet;
use std::fmt::Debug;
use std::hash::Hash;

use coreobject::{serial, AnyObj, Error, Heap, HeapConfig, Obj, Object, ResolveError, Weak};

#[derive(Object, Default, Debug, PartialEq)]
struct Hero {
    hp: u32,
}

#[derive(Object, Default, Debug)]
struct Rock;

fn narrow(generation_bits: u32) -> HeapConfig {
    HeapConfig {
        generation_bits,
        ..HeapConfig::DEFAULT
    }
}

fn assert_handle_traits<T: Copy + Eq + Hash + Debug + Send + Sync + 'static>() {}

#[test]
fn handles_are_eight_byte_copy_eq_hash_debug_values() {
    assert_eq!(std::mem::size_of::<Obj<Hero>>(), 8);
    assert_eq!(std::mem::size_of::<Weak<Hero>>(), 8);
    assert_eq!(std::mem::size_of::<AnyObj>(), 8);
    assert_eq!(std::mem::size_of::<Option<Obj<Hero>>>(), 8);
    assert_eq!(std::mem::size_of::<Option<Weak<Hero>>>(), 8);
    assert_eq!(std::mem::size_of::<Option<AnyObj>>(), 8);
    assert_handle_traits::<Obj<Hero>>();
    assert_handle_traits::<Weak<Hero>>();
    assert_handle_traits::<AnyObj>();

    let heap = Heap::new();
    let a = heap.create(Hero { hp: 1 });
    let b = heap.create(Hero { hp: 2 });
    let copy = a; // Copy: `a` stays usable
    assert_eq!(copy, a);
    assert_ne!(a, b);
    let set: HashSet<Obj<Hero>> = [a, copy, b, a].into_iter().collect();
    assert_eq!(set.len(), 2);
    let set: HashSet<AnyObj> = [a.any(), b.any(), copy.any()].into_iter().collect();
    assert_eq!(set.len(), 2);
    assert_eq!(a.index(), 0);
    assert_eq!(b.index(), 1);
    assert_eq!(serial::tag(a.serial()), heap.tag());
    assert_eq!(AnyObj::from(a), a.any());
    assert_eq!(AnyObj::from_bits(a.any().to_bits()), Some(a.any()));
    assert_eq!(AnyObj::from_bits(u64::from(a.index())), None, "serial 0");
}

#[test]
fn debug_shows_index_generation_and_heap() {
    let mut heap = Heap::new();
    heap.create(Hero::default());
    let h = heap.create(Hero::default());
    let generation = serial::generation(h.serial());
    let want = format!("(#1 gen {generation} heap {})", heap.tag());
    assert_eq!(format!("{h:?}"), format!("Obj<Hero>{want}"));
    assert_eq!(format!("{:?}", h.downgrade()), format!("Weak<Hero>{want}"));
    assert_eq!(format!("{:?}", h.any()), format!("AnyObj<_>{want}"));

    // After the slot is freed and reused, the new handle shows the next generation.
    heap.collect().unwrap();
    heap.create(Hero::default()); // takes slot 1 (freed last, reused first)
    let again = heap.create(Hero::default());
    assert_eq!(again.index(), 0);
    let reused = heap.create(Hero::default());
    assert_eq!(reused.index(), 2, "both freed slots are taken");
    let first_reuse = heap.iter().map(|o| o.id()).find(|id| id.index() == 1);
    let first_reuse = first_reuse.expect("slot 1 is live again");
    assert_eq!(serial::generation(first_reuse.serial()), generation + 1);
    assert!(format!("{first_reuse:?}").contains(&format!("#1 gen {} ", generation + 1)));
}

#[test]
fn downgrade_and_upgrade() {
    let mut heap = Heap::new();
    let h = heap.create(Hero { hp: 7 });
    let w = h.downgrade();
    assert_eq!(w.any(), h.any());
    assert_eq!(w.to_obj(), h);
    assert_eq!(heap.upgrade(w), Some(h));
    assert_eq!(heap.get(w).map(|x| x.hp), Some(7));

    heap.collect().unwrap(); // nothing roots it
    assert_eq!(heap.upgrade(w), None);
    assert!(heap.get(w).is_none());
    assert!(heap.get(w.to_obj()).is_none());

    // The slot is reused by an object of the same class: the weak handle
    // still never resolves.
    let n = heap.create(Hero { hp: 9 });
    assert_eq!(n.index(), w.index());
    assert_ne!(n.serial(), w.serial());
    assert_eq!(heap.upgrade(w), None);
    assert!(heap.get(w).is_none());
    assert_eq!(heap[n].hp, 9);
}

#[test]
fn any_downcast_checks_the_class() {
    let heap = Heap::new();
    let hero = heap.create(Hero { hp: 3 });
    let rock = heap.create(Rock);
    let any = hero.any();
    assert_eq!(heap.downcast::<Hero>(any), Some(hero));
    assert_eq!(heap.downcast::<Rock>(any), None);
    assert_eq!(heap.downcast::<Rock>(rock.any()), Some(rock));
    assert!(std::ptr::eq(heap.class_of(any).unwrap(), Hero::class()));
    assert_eq!(heap.class_of(rock).unwrap().name(), "Rock");

    // SAFETY: `any` came from an `Obj<Hero>`.
    assert_eq!(heap[unsafe { any.assume::<Hero>() }].hp, 3);
}

/// The one way safe code can make a typed handle's serial name an object of
/// another class: `create_at_with_serial` (undo) restoring a slot's last
/// serial with a different class. Such objects are flagged, and typed
/// resolves compare the class there.
#[test]
fn a_restored_slot_checks_the_class() {
    let mut heap = Heap::new();
    let hero = heap.create(Hero { hp: 3 });
    let weak = hero.downgrade();
    heap.collect().unwrap(); // unrooted: freed
    let rock = heap
        .create_at_with_serial(hero.index(), hero.serial(), Rock)
        .unwrap();
    assert_eq!(rock.any(), hero.any(), "the old serial is back");
    assert!(heap.get(hero).is_none());
    assert!(heap.get(weak).is_none());
    assert!(heap.get_even_if_garbage(hero).is_none());
    assert!(heap.get_mut(hero).is_none());
    assert!(heap.upgrade(weak).is_none());
    assert!(heap.strong(hero).is_none());
    assert_eq!(heap.downcast::<Hero>(hero.any()), None);
    let err = heap.try_get(hero).unwrap_err();
    assert_eq!(
        err,
        ResolveError::WrongClass {
            handle: hero.any(),
            expected: "Hero",
            actual: "Rock",
        }
    );
    assert!(
        err.to_string().contains("names a Rock, not a Hero"),
        "{err}"
    );
    assert!(heap.get(rock).is_some());
    assert_eq!(heap.downcast::<Rock>(hero.any()), Some(rock));

    // The same restore with the same class: old handles resolve (undo).
    heap.collect().unwrap();
    let back = heap
        .create_at_with_serial(hero.index(), hero.serial(), Hero { hp: 8 })
        .unwrap();
    assert_eq!(back, hero);
    assert_eq!(heap[hero].hp, 8);
    assert_eq!(heap.get(weak).map(|h| h.hp), Some(8));
    // Once freed, the slot moves on and a plain create there is unflagged.
    heap.collect().unwrap();
    let next = heap.create(Hero { hp: 1 });
    assert_eq!(next.index(), hero.index());
    assert!(heap.get(hero).is_none());
    assert_eq!(heap[next].hp, 1);
}

#[test]
fn made_up_handles_never_resolve() {
    let heap = Heap::new();
    let h = heap.create(Hero { hp: 1 });
    let bits = h.any().to_bits();
    let wrong_serial = AnyObj::from_bits(bits + (1 << 32)).unwrap();
    let wrong_index = AnyObj::from_bits(bits + 1).unwrap();
    let far_index = AnyObj::from_bits(bits | 0xFFFF_FFFF).unwrap();
    for made_up in [wrong_serial, wrong_index, far_index] {
        assert!(heap.downcast::<Hero>(made_up).is_none(), "{made_up:?}");
        // SAFETY: `made_up` names no live object (the heap holds only `h`).
        let typed = unsafe { made_up.assume::<Hero>() };
        assert!(heap.get(typed).is_none(), "{made_up:?}");
        assert!(!heap.contains(made_up));
        assert!(heap.try_get(typed).is_err());
    }
}

#[test]
#[should_panic(expected = "]: stale handle AnyObj<_>(#0 gen ")]
fn indexing_with_a_stale_handle_panics_clearly() {
    let mut heap = Heap::new();
    let h = heap.create(Hero { hp: 1 });
    heap.collect().unwrap();
    let _ = heap[h].hp;
}

#[test]
#[should_panic(expected = "its object was freed")]
fn mutable_indexing_with_a_stale_handle_panics_clearly() {
    let mut heap = Heap::new();
    let h = heap.create(Hero { hp: 1 });
    heap.collect().unwrap();
    heap.create(Hero { hp: 2 }); // reuses the slot
    heap[h].hp = 5;
}

#[test]
#[should_panic(expected = "]: foreign handle AnyObj<_>(#0 gen ")]
fn indexing_with_a_foreign_handle_panics_clearly() {
    let a = Heap::new();
    let b = Heap::new();
    let h = a.create(Hero { hp: 1 });
    b.create(Hero { hp: 2 }); // same index, other heap
    let _ = b[h].hp;
}

/// With `generation_bits: 2` a slot carries 4 generations; when the 4th
/// object in it is freed the slot is retired instead of wrapping around.
#[test]
fn exhausted_slot_is_retired_and_old_handles_never_resolve() {
    for bits in [1u32, 2, 3] {
        let mut heap = Heap::with_config(narrow(bits)).unwrap();
        let uses = 1u32 << bits;
        let mut old: Vec<Obj<Hero>> = Vec::new();
        for n in 0..uses {
            let h = heap.create(Hero { hp: n });
            assert_eq!(h.index(), 0, "bits {bits}: use {n} reuses slot 0");
            if let Some(prev) = old.last() {
                assert_eq!(
                    serial::generation(h.serial()),
                    serial::generation(prev.serial()) + 1
                );
            }
            old.push(h);
            assert_eq!(heap.collect().unwrap().freed, 1);
            for o in &old {
                assert!(heap.get(*o).is_none());
            }
        }
        let stats = heap.table_stats();
        assert_eq!(stats.retired, 1, "bits {bits}: slot 0 is retired");
        assert_eq!(stats.free, 0, "a retired slot is not on the free list");
        assert_eq!(heap.len(), 0);

        // The next object must go elsewhere, and slot 0 is never handed out again.
        let mut keep = Vec::new();
        for n in 0..20 {
            let h = heap.create(Hero { hp: 100 + n });
            heap.add_to_root(h).unwrap();
            assert_ne!(h.index(), 0);
            keep.push(h);
        }
        assert_eq!(
            heap.create_at(0, Hero::default()),
            Err(Error::IndexTaken(0))
        );
        heap.collect().unwrap();
        assert_eq!(heap.len(), 20);
        for (n, h) in keep.iter().enumerate() {
            assert_eq!(heap[*h].hp, 100 + n as u32);
        }
        for o in &old {
            assert!(heap.get(*o).is_none(), "bits {bits}: {o:?} resolved");
            assert!(matches!(heap.try_get(*o), Err(ResolveError::Stale(_))));
        }
    }
}

/// Many slots run out together; the table keeps working with fresh slots and
/// `len` stays right.
#[test]
fn retiring_many_slots_keeps_the_table_consistent() {
    let mut heap = Heap::with_config(narrow(1)).unwrap();
    let mut old = Vec::new();
    // Objects per round (fewer under miri).
    let per: u32 = if cfg!(miri) { 20 } else { 50 };
    for round in 0..6u32 {
        for n in 0..per {
            old.push(heap.create(Hero {
                hp: round * 100 + n,
            }));
        }
        assert_eq!(heap.len(), per as usize);
        assert_eq!(heap.collect().unwrap().freed, per as usize);
        assert!(heap.is_empty());
    }
    let stats = heap.table_stats();
    // Each slot holds 2 generations: 6 rounds used 3 rounds' worth of
    // slots (150 for 300 objects), all retired.
    assert_eq!(stats.retired, 3 * per);
    assert_eq!(stats.high_water, 3 * per);
    assert_eq!(stats.free, 0);
    assert!(old.iter().all(|h| heap.get(*h).is_none()));
    let unique: HashSet<AnyObj> = old.iter().map(|h| h.any()).collect();
    assert_eq!(unique.len(), old.len(), "no handle was ever issued twice");
}

#[test]
fn foreign_handles_are_reported_and_never_resolve() {
    let a = Heap::new();
    let b = Heap::new();
    assert_ne!(a.tag(), b.tag(), "live heaps have distinct tags");
    let h = a.create(Hero { hp: 1 });
    let mine = b.create(Hero { hp: 2 });
    assert_eq!(h.index(), mine.index());
    let foreign = ResolveError::Foreign {
        handle: h.any(),
        handle_heap: a.tag(),
        this_heap: b.tag(),
    };
    assert_eq!(b.try_get(h).map(|x| x.hp), Err(foreign.clone()));
    assert!(b.get(h).is_none());
    assert!(b.get(h.downgrade()).is_none());
    assert!(!b.contains(h));
    assert_eq!(b.add_to_root(h), Err(foreign.clone().into()));
    assert_eq!(b.mark_as_garbage(h), Err(foreign.clone().into()));
    assert!(b.strong(h).is_none());
    assert!(b.upgrade(h.downgrade()).is_none());
    let text = foreign.to_string();
    assert!(
        text.contains(&format!(
            "made by heap {}, this is heap {}",
            a.tag(),
            b.tag()
        )),
        "{text}"
    );
    assert_eq!(a[h].hp, 1);
    assert_eq!(b[mine].hp, 2);
}

/// A dropped heap's tag goes back to the pool with its floor raised past
/// every generation it issued; the heap that gets the tag next never
/// resolves the old handles. (With the tag shared, the new heap cannot tell
/// the handle came from elsewhere: it reports `Stale`.)
#[test]
#[cfg_attr(
    miri,
    ignore = "walks the ring of 1,023 tags, a heap each: minutes under miri"
)]
fn old_handles_never_resolve_after_their_tag_is_reused() {
    let mut a = Heap::with_config(narrow(4)).unwrap();
    let tag = a.tag();
    let mut old = Vec::new();
    for n in 0..5 {
        old.push(a.create(Hero { hp: n })); // slot 0, five generations
        a.collect().unwrap();
    }
    for n in 0..8 {
        let h = a.create(Hero { hp: n });
        a.add_to_root(h).unwrap();
        old.push(h);
    }
    let highest = old
        .iter()
        .map(|h| serial::generation(h.serial()))
        .max()
        .unwrap();
    drop(a);

    // Tags are handed out round-robin; walk the ring until ours comes back.
    // Other tests in this binary create heaps meanwhile, and one of them may
    // hold our tag for a while: walk for up to a minute, not a fixed count.
    let mut b = None;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        let heap = Heap::with_config(narrow(4)).unwrap();
        if heap.tag() == tag {
            b = Some(heap);
            break;
        }
    }
    let b = b.expect("the tag came back");
    let mut fresh = Vec::new();
    for n in 0..16 {
        let h = b.create(Hero { hp: 1000 + n });
        assert!(
            serial::generation(h.serial()) > highest,
            "new generation {} not above old {highest}",
            serial::generation(h.serial())
        );
        fresh.push(h);
    }
    for h in &old {
        assert!(b.get(*h).is_none(), "{h:?} resolved in the tag's next heap");
        assert!(!b.contains(*h));
        let err = b.try_get(*h).unwrap_err();
        assert!(
            matches!(err, ResolveError::Foreign { .. }),
            "a generation below the new heap's floor is an older heap's: {err:?}"
        );
    }
    for (n, h) in fresh.iter().enumerate() {
        assert_eq!(b[*h].hp, 1000 + n as u32);
    }
}

/// Heaps come and go in long-running programs and in test suites (one heap
/// per proptest case). Full-width heaps must not use up the 1023 tags for
/// good: a heap that issued handles gives its tag back with a raised floor,
/// and later heaps must still be able to take it. (1,100 heaps: more than
/// there are tags. Each allocates a 64K-item chunk, hence not more.)
#[test]
#[cfg_attr(
    miri,
    ignore = "1,100 heaps, more than there are tags: the count is the point, and takes miri minutes"
)]
fn heaps_can_be_created_and_dropped_indefinitely() {
    let mut kept_alive = Vec::new();
    for n in 0..1_100u32 {
        let heap =
            Heap::with_config(HeapConfig::DEFAULT).unwrap_or_else(|e| panic!("heap #{n}: {e}"));
        let h = heap.create(Hero { hp: n });
        assert_eq!(heap[h].hp, n);
        if n % 250 == 0 {
            kept_alive.push((heap, h));
        }
    }
    // Handles of the heaps still alive resolve only in their own heap.
    for (i, (heap, h)) in kept_alive.iter().enumerate() {
        assert_eq!(heap[*h].hp, i as u32 * 250);
        for (j, (other, _)) in kept_alive.iter().enumerate() {
            if i != j {
                assert!(other.get(*h).is_none());
            }
        }
    }
}

#[test]
fn create_at_refuses_taken_indices_and_fills_free_ones() {
    let mut heap = Heap::with_config(HeapConfig {
        max_objects: 64,
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    let five = heap.create_at(5, Hero { hp: 5 }).unwrap();
    assert_eq!(five.index(), 5);
    heap.add_to_root(five).unwrap();
    // The skipped indices 0..5 are free and handed out lowest first.
    let mut low = Vec::new();
    for n in 0..5 {
        let h = heap.create(Hero { hp: n });
        heap.add_to_root(h).unwrap();
        assert_eq!(h.index(), n);
        low.push(h);
    }
    assert_eq!(heap.create(Hero::default()).index(), 6);

    assert_eq!(
        heap.create_at(5, Hero::default()),
        Err(Error::IndexTaken(5))
    );
    assert_eq!(
        heap.create_at(2, Hero::default()),
        Err(Error::IndexTaken(2))
    );
    assert_eq!(
        heap.create_at(64, Hero::default()),
        Err(Error::IndexPastCap { index: 64, cap: 64 })
    );
    assert_eq!(
        heap.create_at(u32::MAX, Hero::default()),
        Err(Error::IndexPastCap {
            index: u32::MAX,
            cap: 64
        })
    );
    assert_eq!(heap[five].hp, 5, "a refused create_at changes nothing");
    assert_eq!(heap.len(), 7);

    // Free indices 1 and 3 (and the unrooted 6); claim 1, the one under the top.
    heap.remove_from_root(low[1]).unwrap();
    heap.remove_from_root(low[3]).unwrap();
    assert_eq!(heap.collect().unwrap().freed, 3);
    let one = heap.create_at(1, Hero { hp: 11 }).unwrap();
    assert_eq!(one.index(), 1);
    assert_ne!(one.serial(), low[1].serial());
    assert!(heap.get(low[1]).is_none());
    assert_eq!(heap[one].hp, 11);
    // The rest of the free list is still used last-in first-out: 6 then 3.
    assert_eq!(heap.create(Hero::default()).index(), 6);
    assert_eq!(heap.create(Hero::default()).index(), 3);
    assert_eq!(heap.create(Hero::default()).index(), 7);
    assert!(heap.get(low[3]).is_none());
    assert_eq!(heap.len(), 8);
}

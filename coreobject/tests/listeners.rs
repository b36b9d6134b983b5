//! Listeners, the disregard-for-GC pool, classes and names.
//!
//! * Create and delete listeners are registered and removed through their
//!   `HookId` tokens; create listeners run in registration order, delete
//!   listeners in reverse; each learns the object's index, serial and class;
//!   every listener hears of shutdown once when the heap drops; the sizes
//!   listeners report add up in `listeners_allocated_size` and the memory
//!   report.
//! * The disregard-for-GC pool opens, closes and is disabled; objects created
//!   while it is open take the lowest indices and are never collected or
//!   recycled; `iter_gc_considered`, `first_gc_index` and `disregard_len`
//!   describe only the range the collector considers.
//! * Classes and names: lookup by outer and name and by dotted path,
//!   `for_each_with_outer`, iteration of all objects and by class,
//!   `class_of`, per-class counts and class default objects.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

use coreobject::{
    AnyObj, CreateListener, DeleteListener, Error, Heap, HeapConfig, HookId, Obj, Object,
    ObjectEvent,
};

#[derive(Object, Default)]
struct Actor {
    hp: u32,
}

#[derive(Object, Default)]
struct Level {
    actors: Vec<Obj<Actor>>,
}

#[derive(Object)]
#[object(name = "Weapon")]
struct Gun {
    ammo: u32,
}

impl Default for Gun {
    fn default() -> Self {
        Gun { ammo: 30 }
    }
}

#[derive(Object)]
struct NoDefault {
    _x: u8,
}

type Log = Arc<Mutex<Vec<String>>>;

fn log() -> Log {
    Arc::new(Mutex::new(Vec::new()))
}

fn taken(log: &Log) -> Vec<String> {
    std::mem::take(&mut *log.lock().unwrap())
}

fn pool_heap(size: u32) -> Heap {
    Heap::with_config(HeapConfig {
        disregard_pool_size: size,
        ..HeapConfig::DEFAULT
    })
    .unwrap()
}

// ----- listeners -------------------------------------------------------------

#[test]
fn create_listeners_run_in_order_and_learn_index_serial_and_class() {
    let seen: Arc<Mutex<Vec<(usize, ObjectEvent)>>> = Arc::new(Mutex::new(Vec::new()));
    let mut heap = Heap::new();
    let mut ids = Vec::new();
    for n in 0..3 {
        let s = seen.clone();
        ids.push(heap.on_create(move |e: &ObjectEvent| s.lock().unwrap().push((n, *e))));
    }
    assert_eq!(
        ids.iter().collect::<HashSet<_>>().len(),
        3,
        "distinct tokens"
    );
    let a = heap.create(Actor { hp: 1 });
    let g = heap.spawn(Gun::default()).name("gun").create().unwrap();
    let events = std::mem::take(&mut *seen.lock().unwrap());
    let order: Vec<usize> = events.iter().map(|(n, _)| *n).collect();
    assert_eq!(order, [0, 1, 2, 0, 1, 2]);
    for (_, e) in &events[..3] {
        assert_eq!(e.object, a.any());
        assert_eq!(e.object.index(), a.index());
        assert_eq!(e.object.serial(), a.serial());
        assert!(std::ptr::eq(e.class, Actor::class()));
    }
    for (_, e) in &events[3..] {
        assert_eq!(e.object, g.any());
        assert_eq!(e.class.name(), "Weapon");
    }
}

#[test]
fn delete_listeners_run_in_reverse_registration_order() {
    let log = log();
    let mut heap = Heap::new();
    for n in 0..3 {
        let l = log.clone();
        heap.on_delete(move |e: &ObjectEvent| {
            l.lock()
                .unwrap()
                .push(format!("{n}:{}#{}", e.class.name(), e.object.index()))
        });
    }
    let keep = heap.create(Actor::default());
    heap.add_to_root(keep).unwrap();
    let gone = heap.create(Actor::default());
    heap.create(Gun::default());
    assert!(taken(&log).is_empty(), "no deletes before a collection");
    heap.collect().unwrap();
    assert_eq!(
        taken(&log),
        [
            "2:Actor#1",
            "1:Actor#1",
            "0:Actor#1",
            "2:Weapon#2",
            "1:Weapon#2",
            "0:Weapon#2"
        ]
    );
    assert!(heap.get(gone).is_none());
}

#[test]
fn delete_listener_learns_the_freed_handle() {
    let seen: Arc<Mutex<Vec<ObjectEvent>>> = Arc::new(Mutex::new(Vec::new()));
    let mut heap = Heap::new();
    let s = seen.clone();
    heap.on_delete(move |e: &ObjectEvent| s.lock().unwrap().push(*e));
    let a = heap.create(Actor::default());
    let b = heap.create(Level::default());
    heap.collect().unwrap();
    let events = seen.lock().unwrap().clone();
    let got: Vec<(AnyObj, &str)> = events.iter().map(|e| (e.object, e.class.name())).collect();
    assert_eq!(got, [(a.any(), "Actor"), (b.any(), "Level")]);
}

#[test]
fn listeners_are_removed_by_token() {
    let creates = Arc::new(AtomicUsize::new(0));
    let deletes = Arc::new(AtomicUsize::new(0));
    let mut heap = Heap::new();
    let c = creates.clone();
    let cid = heap.on_create(move |_: &ObjectEvent| {
        c.fetch_add(1, SeqCst);
    });
    let d = deletes.clone();
    let did = heap.on_delete(move |_: &ObjectEvent| {
        d.fetch_add(1, SeqCst);
    });
    assert_ne!(cid, did);
    heap.create(Actor::default());
    heap.collect().unwrap();
    assert_eq!((creates.load(SeqCst), deletes.load(SeqCst)), (1, 1));

    assert!(heap.remove_listener(cid));
    assert!(!heap.remove_listener(cid), "already removed");
    heap.create(Actor::default());
    heap.collect().unwrap();
    assert_eq!((creates.load(SeqCst), deletes.load(SeqCst)), (1, 2));

    assert!(heap.remove_listener(did));
    heap.create(Actor::default());
    heap.collect().unwrap();
    assert_eq!((creates.load(SeqCst), deletes.load(SeqCst)), (1, 2));
    // A token from another kind of registration is not a listener.
    let cb = heap.on_post_collect(|_| {});
    assert!(!heap.remove_listener(cb));
    assert!(heap.remove_gc_callback(cb));
}

/// A listener that owns memory, counts its events and hears of shutdown.
struct Recorder {
    buffer: Vec<u64>,
    events: Arc<AtomicUsize>,
    shutdowns: Arc<AtomicUsize>,
}

impl Recorder {
    fn new(capacity: usize) -> (Recorder, Arc<AtomicUsize>, Arc<AtomicUsize>) {
        let events = Arc::new(AtomicUsize::new(0));
        let shutdowns = Arc::new(AtomicUsize::new(0));
        let r = Recorder {
            buffer: Vec::with_capacity(capacity),
            events: events.clone(),
            shutdowns: shutdowns.clone(),
        };
        (r, events, shutdowns)
    }
}

impl CreateListener for Recorder {
    fn on_create(&self, _: &ObjectEvent) {
        self.events.fetch_add(1, SeqCst);
    }
    fn on_shutdown(&self) {
        self.shutdowns.fetch_add(1, SeqCst);
    }
    fn allocated_size(&self) -> usize {
        self.buffer.capacity() * std::mem::size_of::<u64>()
    }
}

impl DeleteListener for Recorder {
    fn on_delete(&self, _: &ObjectEvent) {
        self.events.fetch_add(1, SeqCst);
    }
    fn on_shutdown(&self) {
        self.shutdowns.fetch_add(1, SeqCst);
    }
    fn allocated_size(&self) -> usize {
        self.buffer.capacity() * std::mem::size_of::<u64>()
    }
}

#[test]
fn listeners_hear_of_shutdown_once_when_the_heap_drops() {
    let mut heap = Heap::new();
    let (c, c_events, c_down) = Recorder::new(0);
    let (d, d_events, d_down) = Recorder::new(0);
    let (gone, _, gone_down) = Recorder::new(0);
    heap.add_create_listener(c);
    heap.add_delete_listener(d);
    let gone_id = heap.add_delete_listener(gone);
    assert!(heap.remove_listener(gone_id));
    heap.create(Actor::default());
    heap.collect().unwrap();
    heap.create(Actor::default()); // still alive at shutdown
    assert_eq!((c_events.load(SeqCst), d_events.load(SeqCst)), (2, 1));
    assert_eq!((c_down.load(SeqCst), d_down.load(SeqCst)), (0, 0));
    drop(heap);
    assert_eq!(c_down.load(SeqCst), 1);
    assert_eq!(d_down.load(SeqCst), 1);
    assert_eq!(gone_down.load(SeqCst), 0, "a removed listener is not told");
    // Dropping the heap is not a collection: no delete events for the survivor.
    assert_eq!(d_events.load(SeqCst), 1);
}

#[test]
fn listener_allocated_sizes_are_reported() {
    let mut heap = Heap::new();
    assert_eq!(heap.listeners_allocated_size(), 0);
    let (a, ..) = Recorder::new(100);
    let (b, ..) = Recorder::new(28);
    let a_bytes = a.allocated_size_create();
    let b_bytes = b.allocated_size_create();
    assert!(a_bytes >= 800 && b_bytes >= 224);
    let a_id = heap.add_create_listener(a);
    heap.add_delete_listener(b);
    heap.on_create(|_: &ObjectEvent| {}); // closures report nothing
    assert_eq!(heap.listeners_allocated_size(), a_bytes + b_bytes);
    assert_eq!(heap.memory_report().listener_bytes, a_bytes + b_bytes);
    assert!(heap.remove_listener(a_id));
    assert_eq!(heap.listeners_allocated_size(), b_bytes);
    assert_eq!(heap.memory_report().listener_bytes, b_bytes);
}

impl Recorder {
    fn allocated_size_create(&self) -> usize {
        CreateListener::allocated_size(self)
    }
}

#[test]
fn tokens_are_unique_across_kinds() {
    let mut heap = Heap::new();
    let ids: Vec<HookId> = vec![
        heap.on_create(|_: &ObjectEvent| {}),
        heap.on_delete(|_: &ObjectEvent| {}),
        heap.on_pre_collect(|_| {}),
        heap.on_post_collect(|_| {}),
        heap.on_create(|_: &ObjectEvent| {}),
    ];
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), ids.len());
}

// ----- the disregard-for-GC pool ---------------------------------------------

#[test]
fn pool_objects_take_the_lowest_indices_and_are_never_collected() {
    let mut heap = pool_heap(8);
    assert_eq!(heap.first_gc_index(), 0);
    assert!(!heap.is_disregard_open());
    heap.open_disregard_for_gc().unwrap();
    assert!(heap.is_disregard_open());
    let assets: Vec<Obj<Actor>> = (0..3).map(|hp| heap.create(Actor { hp })).collect();
    assert_eq!(heap.disregard_len(), 3);
    heap.close_disregard_for_gc();
    assert!(!heap.is_disregard_open());
    let idx: Vec<u32> = assets.iter().map(|a| a.index()).collect();
    assert_eq!(idx, [0, 1, 2]);
    assert_eq!(heap.first_gc_index(), 3);
    assert_eq!(heap.disregard_len(), 3);
    assert_eq!(heap.table_stats().disregard, 3);

    // Unrooted, unreferenced: still never collected, however often we collect
    // and create. Their slots never reach the free list.
    for round in 0..5u32 {
        let made: Vec<_> = (0..10).map(|hp| heap.create(Actor { hp })).collect();
        assert!(made.iter().all(|h| h.index() >= 3), "round {round}");
        let stats = heap.collect().unwrap();
        assert_eq!(stats.freed, 10);
        assert_eq!(stats.marked, 0, "pool objects are not counted as marked");
        assert_eq!(heap.len(), 3);
        for (hp, a) in assets.iter().enumerate() {
            assert_eq!(heap[*a].hp, hp as u32);
        }
    }
    assert!(heap.iter().all(|o| o.is_disregard()));
    assert_eq!(
        heap.mark_as_garbage(assets[0]),
        Err(Error::Permanent(assets[0].any()))
    );
    assert!(heap.get(assets[0]).is_some());
    assert_eq!(
        heap.create_at(1, Actor::default()),
        Err(Error::IndexTaken(1))
    );
}

#[test]
fn pool_objects_keep_what_they_reference_alive() {
    let mut heap = pool_heap(4);
    heap.open_disregard_for_gc().unwrap();
    let level = heap.create(Level::default());
    heap.close_disregard_for_gc();
    let held = heap.create(Actor { hp: 5 });
    let loose = heap.create(Actor { hp: 6 });
    heap[level].actors.push(held);
    assert_eq!(heap.collect().unwrap().freed, 1);
    assert_eq!(heap[held].hp, 5);
    assert!(heap.get(loose).is_none());
}

#[test]
fn gc_considered_iteration_skips_the_pool() {
    let mut heap = pool_heap(16);
    heap.open_disregard_for_gc().unwrap();
    let pool: HashSet<AnyObj> = (0..4).map(|hp| heap.create(Actor { hp }).any()).collect();
    heap.close_disregard_for_gc();
    let outside: HashSet<AnyObj> = (0..6)
        .map(|hp| {
            let h = heap.create(Actor { hp: hp + 10 });
            heap.add_to_root(h).unwrap();
            h.any()
        })
        .collect();
    let considered: HashSet<AnyObj> = heap.iter_gc_considered().map(|o| o.id()).collect();
    assert_eq!(considered, outside);
    assert!(heap.iter_gc_considered().all(|o| !o.is_disregard()));
    assert!(heap
        .iter_gc_considered()
        .all(|o| o.id().index() >= heap.first_gc_index()));
    let all: HashSet<AnyObj> = heap.iter().map(|o| o.id()).collect();
    assert_eq!(all, pool.union(&outside).copied().collect());
    assert_eq!(heap.len(), 10);
    assert_eq!(heap.disregard_len(), 4);
    assert_eq!(heap.first_gc_index(), 4);
    assert_eq!(heap.collect().unwrap().marked, 6);
}

#[test]
fn a_full_pool_refuses_objects_until_closed() {
    let mut heap = pool_heap(2);
    heap.open_disregard_for_gc().unwrap();
    let a = heap.create(Actor { hp: 1 });
    let b = heap.create(Actor { hp: 2 });
    // Past the pool's room: refused while it is open, ordinary once closed.
    assert_eq!(
        heap.try_create(Actor { hp: 3 }),
        Err(Error::DisregardPool(coreobject::PoolError::Full))
    );
    heap.close_disregard_for_gc();
    let c = heap.create(Actor { hp: 3 });
    assert_eq!(heap.disregard_len(), 2);
    assert_eq!(heap.first_gc_index(), 2);
    assert_eq!(heap.collect().unwrap().freed, 1);
    assert!(heap.contains(a) && heap.contains(b));
    assert!(!heap.contains(c));
    // Reopening is refused (the pool is full, and slots past it were used).
    let err = heap.open_disregard_for_gc().unwrap_err();
    assert!(matches!(err, Error::DisregardPool(_)), "{err:?}");
    assert!(!heap.is_disregard_open());
}

#[test]
fn a_pool_filled_exactly_refuses_to_reopen() {
    let mut heap = pool_heap(2);
    heap.open_disregard_for_gc().unwrap();
    heap.create(Actor::default());
    heap.create(Actor::default());
    heap.close_disregard_for_gc();
    assert_eq!(
        heap.open_disregard_for_gc(),
        Err(Error::DisregardPool(coreobject::PoolError::Full))
    );
    let mut no_pool = pool_heap(0);
    let err = no_pool.open_disregard_for_gc().unwrap_err();
    assert!(
        err.to_string().contains("disregard_pool_size is 0"),
        "{err}"
    );
}

#[test]
fn pool_reopens_only_while_every_object_is_in_it() {
    let mut heap = pool_heap(8);
    heap.open_disregard_for_gc().unwrap();
    heap.open_disregard_for_gc().unwrap(); // already open: fine
    heap.create(Actor::default());
    heap.close_disregard_for_gc();
    heap.close_disregard_for_gc(); // already closed: fine
    heap.open_disregard_for_gc().unwrap();
    let second = heap.create(Actor::default());
    heap.close_disregard_for_gc();
    assert_eq!(second.index(), 1);
    assert_eq!(heap.disregard_len(), 2);
    heap.create(Actor::default());
    let err = heap.open_disregard_for_gc().unwrap_err();
    assert!(matches!(err, Error::DisregardPool(_)));
    assert!(
        err.to_string()
            .contains("slots outside the pool have been used"),
        "{err}"
    );
    assert!(!heap.is_disregard_open());
}

#[test]
fn disabling_the_pool_roots_its_objects() {
    let mut heap = pool_heap(8);
    heap.open_disregard_for_gc().unwrap();
    let a = heap.create(Actor { hp: 1 });
    let b = heap.create(Actor { hp: 2 });
    heap.close_disregard_for_gc();
    let x = heap.create(Actor { hp: 3 });
    heap.disable_disregard_for_gc();
    assert_eq!(heap.disregard_len(), 0);
    assert_eq!(heap.first_gc_index(), 0);
    assert!(heap.is_rooted(a) && heap.is_rooted(b));
    assert!(heap.iter().all(|o| !o.is_disregard()));
    assert_eq!(heap.iter_gc_considered().count(), 3);
    assert_eq!(heap.collect().unwrap().freed, 1, "only the unrooted x");
    assert!(!heap.contains(x));
    // Now ordinary objects: unroot and they go; their slots are recycled.
    heap.remove_from_root(a).unwrap();
    heap.mark_as_garbage(b).unwrap();
    assert_eq!(heap.collect().unwrap().freed, 2);
    assert!(heap.is_empty());
    let reused: HashSet<u32> = (0..3)
        .map(|_| heap.create(Actor::default()).index())
        .collect();
    assert_eq!(reused, [0, 1, 2].into_iter().collect());
    // The pool cannot be reopened.
    assert!(matches!(
        heap.open_disregard_for_gc(),
        Err(Error::DisregardPool(_))
    ));
}

// ----- classes and names ---------------------------------------------------

struct World {
    heap: Heap,
    world: Obj<Level>,
    level: Obj<Level>,
    hero: Obj<Actor>,
    orc: Obj<Actor>,
    gun: Obj<Gun>,
}

fn world() -> World {
    let heap = Heap::new();
    let world = heap
        .spawn(Level::default())
        .name("World")
        .root()
        .create()
        .unwrap();
    let level = heap
        .spawn(Level::default())
        .outer(world)
        .name("Level_3")
        .create()
        .unwrap();
    let hero = heap
        .spawn(Actor { hp: 100 })
        .outer(level)
        .name("Hero")
        .create()
        .unwrap();
    let orc = heap
        .spawn(Actor { hp: 30 })
        .outer(level)
        .name("Orc")
        .create()
        .unwrap();
    let gun = heap.spawn(Gun { ammo: 7 }).outer(hero).create().unwrap(); // unnamed
                                                                         // An outer does not keep its inners alive (the reverse holds): root them all.
    for h in [level.any(), hero.any(), orc.any(), gun.any()] {
        heap.add_to_root(h).unwrap();
    }
    World {
        heap,
        world,
        level,
        hero,
        orc,
        gun,
    }
}

#[test]
fn lookup_by_outer_and_name_and_by_path() {
    let w = world();
    let heap = &w.heap;
    assert_eq!(heap.find(None, "World"), Some(w.world.any()));
    assert_eq!(
        heap.find(Some(w.world.any()), "Level_3"),
        Some(w.level.any())
    );
    assert_eq!(heap.find(Some(w.level.any()), "Hero"), Some(w.hero.any()));
    assert_eq!(heap.find(None, "Hero"), None, "Hero lives under Level_3");
    assert_eq!(heap.find(Some(w.world.any()), "Hero"), None);
    assert_eq!(heap.find_path("World.Level_3.Hero"), Some(w.hero.any()));
    assert_eq!(heap.find_path("World.Level_3.Orc"), Some(w.orc.any()));
    assert_eq!(heap.find_path("World.Level_3"), Some(w.level.any()));
    assert_eq!(heap.find_path("World.Level_4.Hero"), None);
    assert_eq!(heap.find_path("Level_3.Hero"), None);
    assert_eq!(heap.path_name(w.hero).unwrap(), "World.Level_3.Hero");
    let gun_path = heap.path_name(w.gun).unwrap();
    assert_eq!(
        gun_path,
        format!("World.Level_3.Hero.Weapon_{}", w.gun.index())
    );
    assert_eq!(heap.name_of(w.hero).as_deref(), Some("Hero"));
    assert_eq!(heap.name_of(w.gun), None);
    assert_eq!(heap.outer_of(w.hero), Some(w.level.any()));
    assert_eq!(heap.outer_of(w.world), None);
}

#[test]
fn names_are_unique_per_outer_and_freed_with_their_object() {
    let w = world();
    let mut heap = w.heap;
    // The same name under another outer is fine; under the same outer it is not.
    let other_hero = heap
        .spawn(Actor::default())
        .outer(w.hero)
        .name("Hero")
        .create()
        .unwrap();
    assert_eq!(
        heap.path_name(other_hero).unwrap(),
        "World.Level_3.Hero.Hero"
    );
    let dup = heap
        .spawn(Actor::default())
        .outer(w.level)
        .name("Hero")
        .create();
    assert_eq!(
        dup.unwrap_err(),
        Error::NameTaken {
            name: "Hero".into()
        }
    );
    let level = w.level;
    heap.mark_as_garbage(w.orc).unwrap();
    heap.collect().unwrap();
    assert!(heap.contains(level));
    assert_eq!(heap.find(Some(level.any()), "Orc"), None);
    assert_eq!(heap.find_path("World.Level_3.Orc"), None);
    let new_orc = heap
        .spawn(Actor { hp: 31 })
        .outer(level)
        .name("Orc")
        .create()
        .unwrap();
    assert_eq!(heap.find_path("World.Level_3.Orc"), Some(new_orc.any()));
    assert_ne!(new_orc.any(), w.orc.any());
}

#[test]
fn for_each_with_outer_visits_direct_inners_only() {
    let w = world();
    let mut inners = Vec::new();
    w.heap.for_each_with_outer(w.level, |o| inners.push(o.id()));
    inners.sort();
    let mut want = vec![w.hero.any(), w.orc.any()];
    want.sort();
    assert_eq!(inners, want);
    let mut under_hero = Vec::new();
    w.heap.for_each_with_outer(w.hero, |o| {
        under_hero.push((o.id(), o.class().name(), o.outer()))
    });
    assert_eq!(under_hero, [(w.gun.any(), "Weapon", Some(w.hero.any()))]);
    let mut none = 0;
    w.heap.for_each_with_outer(w.gun, |_| none += 1);
    assert_eq!(none, 0);
}

#[test]
fn iteration_all_and_by_class() {
    let w = world();
    let heap = &w.heap;
    let all: Vec<AnyObj> = heap.iter().map(|o| o.id()).collect();
    assert_eq!(
        all,
        [
            w.world.any(),
            w.level.any(),
            w.hero.any(),
            w.orc.any(),
            w.gun.any()
        ],
        "index order"
    );
    let actors: Vec<(Obj<Actor>, u32)> = heap.iter_of::<Actor>().map(|(h, a)| (h, a.hp)).collect();
    assert_eq!(actors, [(w.hero, 100), (w.orc, 30)]);
    let guns: Vec<u32> = heap.iter_of::<Gun>().map(|(_, g)| g.ammo).collect();
    assert_eq!(guns, [7]);
    assert_eq!(heap.iter_of::<NoDefault>().count(), 0);
    // Garbage objects are not iterated.
    heap.mark_as_garbage(w.orc).unwrap();
    assert_eq!(heap.iter_of::<Actor>().count(), 1);
    assert_eq!(heap.iter().count(), 4);
    assert_eq!(heap.len(), 5, "still allocated until collected");
    let names: Vec<String> = heap.iter().map(|o| o.display_name()).collect();
    assert_eq!(
        names,
        [
            "World".to_string(),
            "Level_3".into(),
            "Hero".into(),
            format!("Weapon_{}", w.gun.index())
        ]
    );
}

#[test]
fn class_of_and_per_class_counts() {
    let w = world();
    let heap = &w.heap;
    assert!(std::ptr::eq(heap.class_of(w.hero).unwrap(), Actor::class()));
    assert!(std::ptr::eq(heap.class_of(w.gun).unwrap(), Gun::class()));
    assert_eq!(heap.class_of(w.world).unwrap().name(), "Level");
    heap.create(Gun::default());
    heap.create(Gun::default());
    assert_eq!(
        heap.class_counts(),
        [("Weapon", 3), ("Actor", 2), ("Level", 2)]
    );
    let mut heap = w.heap;
    heap.collect().unwrap(); // the two loose guns go
    assert_eq!(
        heap.class_counts(),
        [("Actor", 2), ("Level", 2), ("Weapon", 1)]
    );
    assert!(heap.class_of(w.hero).is_some());
}

#[test]
fn class_default_objects() {
    let mut heap = Heap::new();
    let cdo = heap.class_default::<Gun>().unwrap();
    assert_eq!(heap[cdo].ammo, 30);
    assert_eq!(heap.class_default::<Gun>(), Some(cdo), "made once");
    assert!(heap.is_rooted(cdo));
    assert_eq!(heap.name_of(cdo).as_deref(), Some("Default__Weapon"));
    assert_eq!(heap.find(None, "Default__Weapon"), Some(cdo.any()));
    assert!(Gun::class().has_default());
    assert!(!NoDefault::class().has_default());
    assert_eq!(heap.class_default::<NoDefault>(), None);
    let actor_cdo = heap.class_default::<Actor>().unwrap();
    assert_ne!(actor_cdo.any(), cdo.any());
    heap.collect().unwrap();
    assert_eq!(heap[cdo].ammo, 30, "class defaults are rooted");
    assert_eq!(heap.len(), 2);
    // It can be neither marked as garbage nor unrooted: it lives as long as
    // the heap, with whatever the program wrote into it.
    heap.get_mut(cdo).unwrap().ammo = 1;
    assert_eq!(heap.mark_as_garbage(cdo), Err(Error::Permanent(cdo.any())));
    assert_eq!(heap.class_default::<Gun>(), Some(cdo));
    assert_eq!(heap.remove_from_root(cdo), Err(Error::Permanent(cdo.any())));
    heap.collect().unwrap();
    assert_eq!(heap.class_default::<Gun>(), Some(cdo));
    assert_eq!(heap[cdo].ammo, 1);
}

// ---------------------------------------------------------------- batches

/// Hooks that keep an object pending for one poll, so that some deletions
/// happen in a tick after the cycle.
#[derive(Object, Default)]
#[object(lifecycle)]
struct Slow {
    polls: std::sync::atomic::AtomicU32,
}

impl coreobject::Lifecycle for Slow {
    fn is_ready_for_finish_destroy(&mut self) -> bool {
        self.polls.fetch_add(1, SeqCst) >= 1
    }
}

/// Per-object and batch delete listeners side by side, under sliced purges
/// and deferred finishes: each hears every deletion exactly once, the
/// batches in the order the per-object listener heard them, one call per
/// slice that freed something.
#[test]
fn batch_and_per_object_delete_listeners_hear_every_deletion_once() {
    let mut heap = Heap::with_config(HeapConfig {
        gc: coreobject::GcConfig {
            incremental_debt: None,
            ..coreobject::GcConfig::MANUAL
        },
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    let single: Arc<Mutex<Vec<AnyObj>>> = Arc::default();
    let batches: Arc<Mutex<Vec<Vec<AnyObj>>>> = Arc::default();
    let s = single.clone();
    heap.on_delete(move |e: &ObjectEvent| s.lock().unwrap().push(e.object));
    let b = batches.clone();
    heap.on_delete_batch(move |events: &[ObjectEvent]| {
        assert!(!events.is_empty(), "no empty batches");
        b.lock()
            .unwrap()
            .push(events.iter().map(|e| e.object).collect());
    });
    let n = if cfg!(miri) { 40 } else { 2_000 };
    let mut made = HashSet::new();
    for i in 0..n {
        let h = if i % 10 == 0 {
            heap.create(Slow::default()).any()
        } else {
            heap.create(Actor::default()).any()
        };
        made.insert(h);
    }
    let mut slices = 0;
    let work = if cfg!(miri) { 4 } else { 64 };
    while heap.step(work).completed.is_none() {
        slices += 1;
    }
    // The slow ones finish in a later tick.
    while heap.pending_destroy() > 0 {
        heap.tick(std::time::Duration::from_millis(1));
    }
    let single = single.lock().unwrap().clone();
    let batches = batches.lock().unwrap().clone();
    let flat: Vec<AnyObj> = batches.iter().flatten().copied().collect();
    assert_eq!(single.len(), n);
    assert_eq!(flat, single, "batches in the per-object order");
    assert_eq!(
        single.iter().copied().collect::<HashSet<_>>(),
        made,
        "each once"
    );
    assert!(batches.len() > 2 && slices > 2, "{} batches", batches.len());
    assert!(flat.iter().all(|&h| !heap.contains(h)), "stale when heard");
}

/// A batch listener does not keep a stop-the-world purge from dropping
/// values on the marking workers.
#[test]
#[cfg_attr(miri, ignore = "starts parallel-marking workers")]
fn a_batch_listener_keeps_parallel_drops() {
    let mut heap = Heap::with_config(HeapConfig {
        gc: coreobject::GcConfig {
            threads: 2,
            parallel_threshold: 0,
            parallel_drop: true,
            ..coreobject::GcConfig::MANUAL
        },
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    heap.on_delete_batch(move |events: &[ObjectEvent]| {
        c.fetch_add(events.len(), SeqCst);
    });
    for _ in 0..20_000 {
        heap.create(Actor::default());
    }
    let stats = heap.collect().unwrap();
    assert_eq!((stats.freed, stats.drop_threads), (20_000, 2));
    assert_eq!(count.load(SeqCst), 20_000);
}

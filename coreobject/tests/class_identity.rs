//! Class identity and class default objects (issue 7).
//!
//! * A class is its type: `Object` is an `unsafe trait`, and creation refuses
//!   a class built for another type (the compile-time half is
//!   `tests/ui/forged_class.rs`).
//! * Class defaults are keyed by type, and their names never collide with one
//!   another nor with a user's: types that share a short name, a user object
//!   called `Default__X`, and class names containing `.` all get defaults.
//! * `T::default()` runs with no heap lock held: it may ask for other class
//!   defaults, a cycle panics with a clear message, and racing threads share
//!   one default.
//! * `Heap::flags_of` shows an object's item flags.
//!
//! Tests that deadlocked before the fix run under [`within`], so that they
//! fail instead of hanging.

mod common;

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Barrier, OnceLock};
use std::time::Duration;

use coreobject::{DestroyCx, Error, Heap, HeapConfig, Lifecycle, Obj, Object, ObjectFlags};

/// Runs `f` on its own thread and returns its result, or fails the test if
/// it has not returned within ten seconds (a deadlock).
fn within<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(catch_unwind(AssertUnwindSafe(f)));
    });
    // Miri's clock counts interpreted steps: give it room.
    let limit = Duration::from_secs(if cfg!(miri) { 3600 } else { 10 });
    match rx.recv_timeout(limit) {
        Ok(Ok(r)) => r,
        Ok(Err(p)) => std::panic::resume_unwind(p),
        Err(_) => panic!("deadlocked: no result within {limit:?}"),
    }
}

/// The message of a caught panic.
fn message(p: Box<dyn Any + Send>) -> String {
    match p.downcast::<String>() {
        Ok(s) => *s,
        Err(p) => p
            .downcast::<&str>()
            .map(|s| s.to_string())
            .unwrap_or_default(),
    }
}

// ----- 1. a class is its type ---------------------------------------------------

#[derive(Object, Default)]
struct Named {
    id: u64,
}

common::forged_class!(Forged, Named);

#[test]
fn creation_refuses_a_class_built_for_another_type() {
    let heap = Heap::new();
    let p = catch_unwind(AssertUnwindSafe(|| {
        heap.create(Forged {
            _text: vec!["not a u64".into()],
        });
    }))
    .expect_err("a forged class is refused");
    let msg = message(p);
    assert!(
        msg.contains("returns the class of another type"),
        "message: {msg}"
    );
    assert!(msg.contains("class_identity::Forged"), "message: {msg}");
    assert!(msg.contains("#[derive(Object)]"), "message: {msg}");
    assert_eq!(heap.iter().count(), 0, "no object carries the forged class");
    // The heap goes on (the slot reserved for the refused object stays empty).
    let mut heap = heap;
    let n = heap.create(Named { id: 7 });
    heap.add_to_root(n).unwrap();
    heap.collect().unwrap();
    assert_eq!(heap[n].id, 7);
}

#[test]
fn a_forged_class_never_resolves_another_type() {
    let heap = Heap::new();
    let named = heap.create(Named { id: 7 });
    let downcast = || {
        heap.downcast::<Forged>(named.any());
    };
    let iter_of = || {
        heap.iter_of::<Forged>().count();
    };
    for (what, f) in [("downcast", &downcast as &dyn Fn()), ("iter_of", &iter_of)] {
        let p = catch_unwind(AssertUnwindSafe(f)).expect_err(what);
        let msg = message(p);
        assert!(
            msg.contains("returns the class of another type"),
            "{what}: {msg}"
        );
    }
    assert_eq!(heap[named].id, 7);
}

/// The derive writes the `unsafe impl`; a crate that forbids unsafe code can
/// still use it.
#[forbid(unsafe_code)]
mod safe_user {
    #[derive(coreobject::Object, Default)]
    pub struct Plain {
        pub x: u32,
    }
}

#[test]
fn the_derive_needs_no_unsafe_from_its_user() {
    let heap = Heap::new();
    let p = heap.create(safe_user::Plain { x: 3 });
    assert_eq!(heap[p].x, 3);
    assert_eq!(
        safe_user::Plain::class().type_id(),
        std::any::TypeId::of::<safe_user::Plain>()
    );
}

// ----- 2. class defaults do not depend on short names ------------------------------

mod first {
    #[derive(coreobject::Object)]
    pub struct Twin {
        pub from: &'static str,
    }
    impl Default for Twin {
        fn default() -> Self {
            Twin { from: "first" }
        }
    }
}

mod second {
    #[derive(coreobject::Object)]
    pub struct Twin {
        pub from: &'static str,
    }
    impl Default for Twin {
        fn default() -> Self {
            Twin { from: "second" }
        }
    }
}

#[test]
fn classes_have_full_paths() {
    assert_eq!(first::Twin::class().name(), "Twin");
    assert_eq!(second::Twin::class().name(), "Twin");
    assert_eq!(first::Twin::class().path(), "class_identity::first::Twin");
    assert_eq!(second::Twin::class().path(), "class_identity::second::Twin");
    assert_ne!(first::Twin::class(), second::Twin::class());
    assert!(format!("{:?}", first::Twin::class()).contains("class_identity::first::Twin"));
}

#[test]
fn types_sharing_a_short_name_each_get_a_class_default() {
    let heap = Heap::new();
    let a = heap.class_default::<first::Twin>().expect("first default");
    let b = heap
        .class_default::<second::Twin>()
        .expect("second default, although its class name is taken");
    assert_ne!(a.any(), b.any());
    assert_eq!(heap[a].from, "first");
    assert_eq!(heap[b].from, "second");
    // The first takes the short name; the second falls back to its path.
    assert_eq!(heap.name_of(a).as_deref(), Some("Default__Twin"));
    assert_eq!(
        heap.name_of(b).as_deref(),
        Some("Default__class_identity::second::Twin")
    );
    assert_eq!(heap.find(None, "Default__Twin"), Some(a.any()));
    assert_eq!(
        heap.find_path("Default__class_identity::second::Twin"),
        Some(b.any())
    );
    // Asked again, each type finds its own.
    assert_eq!(heap.class_default::<first::Twin>(), Some(a));
    assert_eq!(heap.class_default::<second::Twin>(), Some(b));
}

#[derive(Object)]
struct Taken {
    v: u32,
}

impl Default for Taken {
    fn default() -> Self {
        Taken { v: 9 }
    }
}

#[test]
fn a_user_object_cannot_take_a_class_default_name() {
    let heap = Heap::new();
    for name in ["Default__Taken", "Default__", "Default__Anything"] {
        assert_eq!(
            heap.spawn(Taken { v: 1 }).name(name).create().unwrap_err(),
            Error::InvalidName(name.to_string())
        );
    }
    // Under an outer too.
    let outer = heap.create(Named::default());
    assert!(matches!(
        heap.spawn(Taken { v: 1 })
            .outer(outer)
            .name("Default__Taken")
            .create(),
        Err(Error::InvalidName(_))
    ));
    // Other names that merely look alike are fine.
    heap.spawn(Taken { v: 2 })
        .name("Default_Taken")
        .create()
        .unwrap();
    heap.spawn(Taken { v: 3 })
        .name("MyDefault__Taken")
        .create()
        .unwrap();
    let cdo = heap
        .class_default::<Taken>()
        .expect("the name is still free");
    assert_eq!(heap[cdo].v, 9);
    assert_eq!(heap.find(None, "Default__Taken"), Some(cdo.any()));
}

#[derive(Object, Default)]
#[object(name = "/Script/Engine.Actor")]
struct Actor {
    hp: u32,
}

#[test]
fn class_names_with_dots_get_a_class_default() {
    let heap = Heap::new();
    let cdo = heap.class_default::<Actor>().expect("a default");
    assert_eq!(heap[cdo].hp, 0);
    assert_eq!(
        heap.name_of(cdo).as_deref(),
        Some("Default__/Script/Engine_Actor")
    );
    assert_eq!(
        heap.find_path("Default__/Script/Engine_Actor"),
        Some(cdo.any())
    );
    assert_eq!(heap.class_default::<Actor>(), Some(cdo));
}

// ----- 3. Default runs with no lock held -------------------------------------------

fn chain_heap() -> &'static Heap {
    static HEAP: OnceLock<Heap> = OnceLock::new();
    HEAP.get_or_init(Heap::new)
}

/// Unreal-style: a class default built from another class's default.
#[derive(Object)]
struct Pawn {
    weapon: Option<Obj<Weapon>>,
    ammo: u32,
}

impl Default for Pawn {
    fn default() -> Self {
        let heap = chain_heap();
        let weapon = heap.class_default::<Weapon>().expect("weapon default");
        Pawn {
            weapon: Some(weapon),
            ammo: heap[weapon].ammo,
        }
    }
}

#[derive(Object)]
struct Weapon {
    ammo: u32,
}

impl Default for Weapon {
    fn default() -> Self {
        Weapon { ammo: 30 }
    }
}

#[test]
fn a_default_may_ask_for_another_class_default() {
    let (pawn, weapon) = within(|| {
        let heap = chain_heap();
        (
            heap.class_default::<Pawn>().expect("pawn default"),
            heap.class_default::<Weapon>().expect("weapon default"),
        )
    });
    let heap = chain_heap();
    assert_eq!(heap[pawn].weapon, Some(weapon));
    assert_eq!(heap[pawn].ammo, 30);
    assert_eq!(heap.iter_of::<Pawn>().count(), 1);
    assert_eq!(heap.iter_of::<Weapon>().count(), 1);
}

fn cycle_heap() -> &'static Heap {
    static HEAP: OnceLock<Heap> = OnceLock::new();
    HEAP.get_or_init(Heap::new)
}

#[derive(Object)]
struct Ouroboros {
    tail: Option<Obj<Ouroboros>>,
}

impl Default for Ouroboros {
    fn default() -> Self {
        Ouroboros {
            tail: cycle_heap().class_default::<Ouroboros>(),
        }
    }
}

#[derive(Object)]
struct Chicken {
    egg: Option<Obj<Egg>>,
}

impl Default for Chicken {
    fn default() -> Self {
        Chicken {
            egg: cycle_heap().class_default::<Egg>(),
        }
    }
}

#[derive(Object)]
struct Egg {
    chicken: Option<Obj<Chicken>>,
}

impl Default for Egg {
    fn default() -> Self {
        Egg {
            chicken: cycle_heap().class_default::<Chicken>(),
        }
    }
}

#[test]
fn a_default_that_asks_for_itself_panics() {
    let msg = within(|| {
        message(
            catch_unwind(|| cycle_heap().class_default::<Ouroboros>())
                .expect_err("a self-recursive default panics"),
        )
    });
    assert!(
        msg.contains("class_default::<class_identity::Ouroboros>"),
        "message: {msg}"
    );
    assert!(
        msg.contains("cycle: class_identity::Ouroboros -> class_identity::Ouroboros"),
        "message: {msg}"
    );
    assert!(
        msg.contains("cannot be built from itself"),
        "message: {msg}"
    );

    let msg = within(|| {
        message(
            catch_unwind(|| cycle_heap().class_default::<Chicken>())
                .expect_err("a cycle through another class panics"),
        )
    });
    assert!(
        msg.contains(
            "cycle: class_identity::Chicken -> class_identity::Egg -> class_identity::Chicken"
        ),
        "message: {msg}"
    );

    // Nothing half-built is left behind, and the thread can go on.
    within(|| {
        let heap = cycle_heap();
        assert_eq!(heap.iter_of::<Ouroboros>().count(), 0);
        assert_eq!(heap.iter_of::<Chicken>().count(), 0);
        assert_eq!(heap.iter_of::<Egg>().count(), 0);
        assert!(heap.class_default::<Weapon>().is_some());
    });
}

static RACED_MADE: AtomicUsize = AtomicUsize::new(0);
static RACED_DROPPED: AtomicUsize = AtomicUsize::new(0);
/// Both racers are inside `Default` at once before either returns.
static RACED_GATE: Barrier = Barrier::new(2);

#[derive(Object)]
struct Raced {
    n: u32,
}

impl Default for Raced {
    fn default() -> Self {
        RACED_MADE.fetch_add(1, SeqCst);
        RACED_GATE.wait();
        Raced { n: 5 }
    }
}

impl Drop for Raced {
    fn drop(&mut self) {
        RACED_DROPPED.fetch_add(1, SeqCst);
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "the racing threads contend on a parking_lot lock, whose contended path casts integers to pointers (rejected by -Zmiri-strict-provenance)"
)]
fn racing_threads_share_one_class_default() {
    within(|| {
        let heap = Heap::new();
        let (a, b) = std::thread::scope(|s| {
            let t1 = s.spawn(|| heap.class_default::<Raced>());
            let t2 = s.spawn(|| heap.class_default::<Raced>());
            (t1.join().unwrap(), t2.join().unwrap())
        });
        let cdo = a.expect("a default");
        assert_eq!(b, Some(cdo), "both threads get the same handle");
        assert_eq!(heap[cdo].n, 5);
        assert_eq!(RACED_MADE.load(SeqCst), 2, "both ran Default");
        assert_eq!(
            RACED_DROPPED.load(SeqCst),
            1,
            "the loser's value is dropped"
        );
        assert_eq!(heap.iter_of::<Raced>().count(), 1, "one object in the heap");
        assert_eq!(heap.len(), 1, "no leaked slot");
        drop(heap);
        assert_eq!(RACED_DROPPED.load(SeqCst), 2);
    });
}

// ----- 4. flags_of ------------------------------------------------------------------

static SLOW_READY: AtomicBool = AtomicBool::new(false);

#[derive(Object, Default)]
#[object(lifecycle)]
struct Slow;

impl Lifecycle for Slow {
    fn is_ready_for_finish_destroy(&mut self) -> bool {
        SLOW_READY.load(SeqCst)
    }
    fn finish_destroy(&mut self, _cx: &DestroyCx<'_>) {}
}

#[test]
fn flags_of_shows_every_flag() {
    let mut heap = Heap::new();
    let c = heap.create(Named::default());
    let none = heap.flags_of(c).unwrap();
    assert_eq!(none, ObjectFlags::default());
    assert_eq!(none.to_string(), "none");

    heap.add_to_root(c).unwrap();
    let s1 = heap.strong(c).unwrap();
    let s2 = heap.strong(c).unwrap();
    let f = heap.flags_of(c).unwrap();
    assert!(f.rooted && !f.garbage && !f.unreachable && !f.class_default);
    assert_eq!(f.strong_count, 2);
    assert_eq!(f.cluster_root, None);
    assert_eq!(f.to_string(), "rooted | strong_count=2");
    drop((s1, s2));
    heap.remove_from_root(c).unwrap();

    // Garbage objects still answer, unlike `get`.
    heap.mark_as_garbage(c).unwrap();
    assert!(heap.get(c).is_none());
    assert_eq!(heap.flags_of(c).unwrap().to_string(), "garbage");

    let cdo = heap.class_default::<Named>().unwrap();
    let f = heap.flags_of(cdo).unwrap();
    assert!(f.class_default && f.rooted);
    assert_eq!(f.to_string(), "rooted | class_default");

    // Hooks, and unreachable while `finish_destroy` waits.
    let slow = heap.create(Slow);
    assert_eq!(heap.flags_of(slow).unwrap().to_string(), "has_hooks");
    heap.collect().unwrap();
    assert_eq!(heap.pending_destroy(), 1);
    assert!(heap.get_even_if_garbage(slow).is_none());
    let f = heap.flags_of(slow).unwrap();
    assert!(f.unreachable && f.has_hooks);
    assert_eq!(f.to_string(), "unreachable | has_hooks");
    SLOW_READY.store(true, SeqCst);
    heap.collect().unwrap();

    // Freed objects and foreign handles: `None`.
    assert_eq!(heap.flags_of(c), None);
    assert_eq!(heap.flags_of(slow), None);
    assert_eq!(Heap::new().flags_of(cdo), None);
}

#[test]
fn flags_of_shows_the_disregard_pool() {
    let mut heap = Heap::with_config(HeapConfig {
        disregard_pool_size: 4,
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    heap.open_disregard_for_gc().unwrap();
    let p = heap.create(Named::default());
    heap.close_disregard_for_gc();
    let f = heap.flags_of(p).unwrap();
    assert!(f.disregard && !f.rooted);
    assert_eq!(f.to_string(), "disregard");
}

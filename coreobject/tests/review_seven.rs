//! Review 7: the free step's `NO_DROP` item field (a slot's size class,
//! set at creation for values without drop glue, without an outer, in a
//! pooled slot) and the disregard-for-GC pool's mark bits, through the
//! public API only.
//!
//! * Every way an object enters a slot (`create`, `create_mut`, `spawn`,
//!   `spawn_mut` with an outer, `create_at`, `create_at_with_serial`,
//!   `spawn_at` with an outer, creation through `&Heap` on other threads,
//!   `Heap::load`, `Heap::restore`; `rename` to a new outer), with classes of several sizes with and
//!   without drop glue going through the same slots many times: values
//!   checked after every cycle (a slot freed into the wrong size class
//!   shows as a neighbour's value overwritten), every drop counted once,
//!   the bytes freed and each size class's object count in
//!   `memory_report` equal to the model's.
//! * Pool objects with mark bits: pools opened and closed mid-cycle, pool
//!   objects created during a cycle holding young objects, disabled
//!   mid-cycle, clusters referencing pool objects, two marking threads;
//!   and former pool objects (after `disable_disregard_for_gc`, ordinary
//!   rooted objects as its docs say) unrooted and freed, their slots
//!   reused by objects holding young ones.
//!
//! The tests share drop counters: they run one at a time (`ONE`).

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex;

use coreobject::save::Selection;
use coreobject::{AnyObj, CycleKind, Error, GcConfig, Heap, HeapConfig, Obj, Object};

use common::{step, Rng};

static ONE: Mutex<()> = Mutex::new(());

fn one() -> std::sync::MutexGuard<'static, ()> {
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

static DROPS: AtomicUsize = AtomicUsize::new(0);

/// Counts its drops (a field of classes with drop glue).
#[derive(Default)]
struct Tally;

impl Drop for Tally {
    fn drop(&mut self) {
        DROPS.fetch_add(1, SeqCst);
    }
}

/// 16 bytes, no drop glue.
#[derive(Object, Default)]
#[object(save)]
struct Small {
    v: u64,
}

/// 56 bytes, no drop glue, a handle.
#[derive(Object, Default)]
#[object(save)]
struct Mid {
    v: u64,
    pad: [u64; 4],
    next: Option<Obj<Small>>,
}

/// 16 bytes (Small's size class), drop glue.
#[derive(Object, Default)]
#[object(save)]
struct Tallied {
    v: u64,
    #[object(transient)]
    #[object(skip)]
    _t: Tally,
}

/// 16 bytes, drop glue that frees memory (miri sees a leak or a double free).
#[derive(Object, Default)]
#[object(save)]
struct Boxed {
    v: Box<u64>,
}

/// 40 bytes, drop glue.
#[derive(Object, Default)]
#[object(save)]
struct Texty {
    v: u64,
    s: String,
    #[object(transient)]
    #[object(skip)]
    _t: Tally,
}

/// Aligned to 16 (32 bytes), no drop glue.
#[derive(Object, Default)]
#[object(save)]
#[repr(align(16))]
struct Wide {
    v: u64,
}

/// One object of the model, typed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum H {
    Small(Obj<Small>),
    Mid(Obj<Mid>),
    Tallied(Obj<Tallied>),
    Boxed(Obj<Boxed>),
    Texty(Obj<Texty>),
    Wide(Obj<Wide>),
}

impl H {
    fn any(self) -> AnyObj {
        match self {
            H::Small(h) => h.any(),
            H::Mid(h) => h.any(),
            H::Tallied(h) => h.any(),
            H::Boxed(h) => h.any(),
            H::Texty(h) => h.any(),
            H::Wide(h) => h.any(),
        }
    }

    /// Its value if it resolves; panics if the value is torn.
    fn value(self, heap: &Heap) -> Option<u64> {
        match self {
            H::Small(h) => heap.get(h).map(|o| o.v),
            H::Mid(h) => heap.get(h).map(|o| {
                assert!(o.pad.iter().all(|&p| p == !o.v), "Mid's pad torn");
                o.v
            }),
            H::Tallied(h) => heap.get(h).map(|o| o.v),
            H::Boxed(h) => heap.get(h).map(|o| *o.v),
            H::Texty(h) => heap.get(h).map(|o| {
                assert_eq!(o.s, o.v.to_string(), "Texty's string torn");
                o.v
            }),
            H::Wide(h) => heap.get(h).map(|o| o.v),
        }
    }

    fn size(self) -> usize {
        match self {
            H::Small(_) => Small::class().size(),
            H::Mid(_) => Mid::class().size(),
            H::Tallied(_) => Tallied::class().size(),
            H::Boxed(_) => Boxed::class().size(),
            H::Texty(_) => Texty::class().size(),
            H::Wide(_) => Wide::class().size(),
        }
    }

    /// Values whose drop a `Tally` counts.
    fn tallies(self) -> usize {
        usize::from(matches!(self, H::Tallied(_) | H::Texty(_)))
    }

    fn kind(self) -> usize {
        match self {
            H::Small(_) => 0,
            H::Mid(_) => 1,
            H::Tallied(_) => 2,
            H::Boxed(_) => 3,
            H::Texty(_) => 4,
            H::Wide(_) => 5,
        }
    }
}

/// How an object is put into a slot.
#[derive(Clone, Copy)]
enum Way {
    Create,
    CreateMut,
    Spawn,
    SpawnMutOuter(Obj<Small>),
    SpawnOuter(Obj<Small>),
    At(u32),
    AtSerial(AnyObj),
    SpawnAtOuter(AnyObj, Obj<Small>),
}

/// Puts `value` into a slot the way `way` says; whether it has an outer.
fn put<T: Object>(heap: &mut Heap, value: T, way: Way) -> (Obj<T>, bool) {
    match way {
        Way::Create => (heap.create(value), false),
        Way::CreateMut => (heap.create_mut(value), false),
        Way::Spawn => (heap.spawn(value).create().unwrap(), false),
        Way::SpawnMutOuter(o) => (heap.spawn_mut(value).outer(o).create().unwrap(), true),
        Way::SpawnOuter(o) => (heap.spawn(value).outer(o).create().unwrap(), true),
        Way::At(i) => (heap.create_at(i, value).unwrap(), false),
        Way::AtSerial(old) => (
            heap.create_at_with_serial(old.index(), old.serial(), value)
                .unwrap(),
            false,
        ),
        Way::SpawnAtOuter(old, o) => (
            heap.spawn_at(old.index(), old.serial(), value)
                .outer(o)
                .create()
                .unwrap(),
            true,
        ),
    }
}

/// An object of kind `kind` holding `v`, put in the way `way` says.
fn make(heap: &mut Heap, kind: usize, v: u64, way: Way) -> (H, bool) {
    match kind {
        0 => {
            let (h, o) = put(heap, Small { v }, way);
            (H::Small(h), o)
        }
        1 => {
            let (h, o) = put(
                heap,
                Mid {
                    v,
                    pad: [!v; 4],
                    next: None,
                },
                way,
            );
            (H::Mid(h), o)
        }
        2 => {
            let (h, o) = put(heap, Tallied { v, _t: Tally }, way);
            (H::Tallied(h), o)
        }
        3 => {
            let (h, o) = put(heap, Boxed { v: Box::new(v) }, way);
            (H::Boxed(h), o)
        }
        4 => {
            let (h, o) = put(
                heap,
                Texty {
                    v,
                    s: v.to_string(),
                    _t: Tally,
                },
                way,
            );
            (H::Texty(h), o)
        }
        _ => {
            let (h, o) = put(heap, Wide { v }, way);
            (H::Wide(h), o)
        }
    }
}

/// The same from `&Heap` (other threads): no outer.
fn make_shared(heap: &Heap, kind: usize, v: u64) -> H {
    match kind {
        0 => H::Small(heap.create(Small { v })),
        1 => H::Mid(heap.create(Mid {
            v,
            pad: [!v; 4],
            next: None,
        })),
        2 => H::Tallied(heap.create(Tallied { v, _t: Tally })),
        3 => H::Boxed(heap.create(Boxed { v: Box::new(v) })),
        4 => H::Texty(heap.create(Texty {
            v,
            s: v.to_string(),
            _t: Tally,
        })),
        _ => H::Wide(heap.create(Wide { v })),
    }
}

/// An object of the model.
#[derive(Clone, Copy, Debug)]
struct Entry {
    h: H,
    v: u64,
    outer: bool,
}

impl Entry {
    /// The bytes of its slot: its class's size, plus 8 for an outer
    /// (rounded up to its alignment: 16 for `Wide`).
    fn slot(&self) -> usize {
        let prefix = match self.h {
            H::Wide(_) => 16,
            _ => 8,
        };
        self.h.size() + if self.outer { prefix } else { 0 }
    }
}

/// Each size class's objects in `memory_report` (slot size → objects).
fn page_objects(heap: &Heap) -> BTreeMap<usize, usize> {
    heap.memory_report()
        .page_classes
        .iter()
        .filter(|c| c.objects > 0)
        .map(|c| (c.slot, c.objects))
        .collect()
}

/// What the model says each size class holds.
fn model_objects<'a>(entries: impl Iterator<Item = &'a Entry>) -> BTreeMap<usize, usize> {
    let mut m = BTreeMap::new();
    for e in entries {
        *m.entry(e.slot()).or_insert(0) += 1;
    }
    m
}

/// Marking threads: `threads`, but one under miri (which stops inside
/// rayon and crossbeam-epoch under strict provenance, see `.ci/run`).
fn marking(threads: usize) -> usize {
    if cfg!(miri) {
        1
    } else {
        threads
    }
}

fn full_tests() -> bool {
    std::env::var_os("COREOBJECT_FULL_TESTS").is_some_and(|v| v != "0")
}

/// Rounds of creation and collection: objects of six classes (three
/// without drop glue, of three size classes; three with, two of them in
/// the 16-byte class) put into slots every way there is, often into the
/// slot of a freed object of another class (`create_at`,
/// `create_at_with_serial`, `spawn_at`), many of them through `&Heap` on
/// two other threads, some while a cycle is in flight; collected whole or
/// in slices, major or minor, on one or two marking threads. After each
/// cycle every rooted object holds its value; after a major one every
/// unrooted object is gone, the heap holds exactly the model's objects and
/// each size class's count in `memory_report` is the model's. At the end
/// every drop ran once and the bytes freed are the classes' sizes.
fn slot_reuse(seed: u64, threads: usize) {
    let _one = one();
    let mut rng = Rng(seed);
    let mut heap = Heap::with_config(HeapConfig {
        gc: GcConfig {
            threads: marking(threads),
            parallel_threshold: 0,
            ..GcConfig::MANUAL
        },
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    let drops0 = DROPS.load(SeqCst);
    let bytes0 = heap.gc_totals().total_freed_bytes;
    let outer = heap.create_mut(Small { v: u64::MAX });
    heap.add_to_root(outer).unwrap();
    // Objects with an outer move between the two (`rename`).
    let outer2 = heap.create_mut(Small { v: u64::MAX - 1 });
    heap.add_to_root(outer2).unwrap();
    let outers = [
        Entry {
            h: H::Small(outer),
            v: u64::MAX,
            outer: false,
        },
        Entry {
            h: H::Small(outer2),
            v: u64::MAX - 1,
            outer: false,
        },
    ];
    let (rounds, per_round, shared) = if cfg!(miri) {
        (4, 24, 4)
    } else if full_tests() {
        (40, 400, 100)
    } else {
        (24, 250, 60)
    };
    let mut live: Vec<Entry> = Vec::new();
    let mut gone: Vec<Entry> = Vec::new();
    // Freed objects, for `create_at_with_serial` and `spawn_at`.
    let mut freed: Vec<Entry> = Vec::new();
    // Each slot's last occupant's serial.
    let mut last: HashMap<u32, u32> = HashMap::new();
    let (mut created_bytes, mut tallies) = (0usize, 0usize);
    let mut v = 0u64;
    let mut ways = [0usize; 8];
    for round in 0..rounds {
        let occupied: HashSet<u32> = live
            .iter()
            .chain(&gone)
            .map(|e| e.h.any().index())
            .chain([outer.index(), outer2.index()])
            .collect();
        let mut taken = occupied;
        let mut batch = Vec::new();
        for _ in 0..per_round {
            v += 1;
            let kind = rng.below(6);
            // A freed slot of another object, if one is free and its serial
            // is still the one its last occupant had (undo).
            let reuse = if freed.is_empty() || rng.one_in(3) {
                None
            } else {
                let k = rng.below(freed.len());
                let old = freed.swap_remove(k).h.any();
                (!taken.contains(&old.index())).then_some(old)
            };
            let way = match (reuse, rng.below(8)) {
                (Some(old), 0..=2) if last.get(&old.index()) == Some(&old.serial()) => {
                    Way::AtSerial(old)
                }
                (Some(old), 3) if last.get(&old.index()) == Some(&old.serial()) => {
                    Way::SpawnAtOuter(old, outer)
                }
                (Some(old), _) => Way::At(old.index()),
                (None, 0) => Way::Create,
                (None, 1 | 2) => Way::CreateMut,
                (None, 3) => Way::Spawn,
                (None, 4) => Way::SpawnMutOuter(outer),
                (None, 5) => Way::SpawnOuter(outer),
                (None, _) => Way::CreateMut,
            };
            ways[match way {
                Way::Create => 0,
                Way::CreateMut => 1,
                Way::Spawn => 2,
                Way::SpawnMutOuter(_) => 3,
                Way::SpawnOuter(_) => 4,
                Way::At(_) => 5,
                Way::AtSerial(_) => 6,
                Way::SpawnAtOuter(..) => 7,
            }] += 1;
            let (h, has_outer) = make(&mut heap, kind, v, way);
            taken.insert(h.any().index());
            batch.push(Entry {
                h,
                v,
                outer: has_outer,
            });
        }
        // Creation through `&Heap` on two other threads.
        let base = v;
        let made: Vec<Vec<Entry>> = std::thread::scope(|s| {
            let heap = &heap;
            let spawned: Vec<_> = (0..2u64)
                .map(|t| {
                    s.spawn(move || {
                        let mut rng = Rng(seed ^ ((round as u64 + 1) * 0x9e37) ^ (t + 1));
                        (0..shared as u64)
                            .map(|k| {
                                let v = base + 1 + t * shared as u64 + k;
                                let h = make_shared(heap, rng.below(6), v);
                                Entry { h, v, outer: false }
                            })
                            .collect()
                    })
                })
                .collect();
            spawned.into_iter().map(|j| j.join().unwrap()).collect()
        });
        v += 2 * shared as u64;
        batch.extend(made.into_iter().flatten());
        for e in batch {
            // Moved to the other outer, or refused one (no room for it).
            if rng.one_in(4) {
                let to = if heap.outer_of(e.h.any()) == Some(outer.any()) {
                    outer2
                } else {
                    outer
                };
                let moved = heap.rename(e.h.any()).outer(to).apply();
                if e.outer {
                    moved.unwrap();
                } else {
                    assert_eq!(moved, Err(Error::NoOuterSlot(e.h.any())));
                }
            }
            last.insert(e.h.any().index(), e.h.any().serial());
            created_bytes += e.h.size();
            tallies += e.h.tallies();
            if rng.one_in(3) {
                heap.add_to_root(e.h.any()).unwrap();
                live.push(e);
            } else {
                gone.push(e);
            }
        }
        live.retain(|e| {
            let keep = !rng.one_in(4);
            if !keep {
                heap.remove_from_root(e.h.any()).unwrap();
                gone.push(*e);
            }
            keep
        });
        let kind = if round % 3 == 2 {
            CycleKind::Major
        } else {
            CycleKind::Minor
        };
        if rng.one_in(2) {
            // Sliced, with objects created between slices (born during the
            // cycle: `BORN` besides their `NO_DROP` field).
            loop {
                let t = step(&mut heap, kind, 1 + rng.below(40));
                if t.completed.is_some() {
                    break;
                }
                if rng.one_in(3) {
                    v += 1;
                    let k = rng.below(6);
                    let way = if rng.one_in(2) {
                        Way::CreateMut
                    } else {
                        Way::SpawnOuter(outer)
                    };
                    let (h, has_outer) = make(&mut heap, k, v, way);
                    last.insert(h.any().index(), h.any().serial());
                    created_bytes += h.size();
                    tallies += h.tallies();
                    gone.push(Entry {
                        h,
                        v,
                        outer: has_outer,
                    });
                }
            }
        } else if kind == CycleKind::Major {
            heap.collect().unwrap();
        } else {
            heap.collect_minor().unwrap();
        }
        for e in &live {
            assert_eq!(e.h.value(&heap), Some(e.v), "round {round}: {e:?} changed");
        }
        if kind == CycleKind::Major {
            // Objects created during the sliced cycle survive it: one more.
            heap.collect().unwrap();
            for e in gone.drain(..) {
                assert_eq!(e.h.value(&heap), None, "round {round}: {e:?} not freed");
                freed.push(e);
            }
            assert_eq!(heap.len(), live.len() + 2, "round {round}");
            assert_eq!(
                page_objects(&heap),
                model_objects(live.iter().chain(&outers)),
                "round {round}: objects per size class"
            );
            for e in &live {
                assert_eq!(e.h.value(&heap), Some(e.v), "round {round}: {e:?} changed");
            }
        }
    }
    if !cfg!(miri) {
        assert!(
            ways.iter().all(|&n| n > 0),
            "every way of putting an object into a slot ran: {ways:?}"
        );
    }
    for e in live.drain(..) {
        heap.remove_from_root(e.h.any()).unwrap();
    }
    heap.remove_from_root(outer).unwrap();
    heap.remove_from_root(outer2).unwrap();
    heap.collect().unwrap();
    assert_eq!(heap.len(), 0);
    assert_eq!(DROPS.load(SeqCst) - drops0, tallies, "each drop once");
    assert_eq!(
        heap.gc_totals().total_freed_bytes - bytes0,
        (created_bytes + 2 * Small::class().size()) as u64,
        "bytes freed"
    );
    let report = heap.memory_report();
    assert_eq!(report.object_bytes, 0);
    assert_eq!(page_objects(&heap), BTreeMap::new(), "every slot freed");
}

#[test]
fn slots_reused_by_every_way_of_creation_free_into_their_own_class() {
    let seeds = if cfg!(miri) { 1 } else { 8 };
    for seed in 1..=seeds {
        slot_reuse(0x5851_f42d_4c95_7f2d ^ seed, 1 + (seed as usize % 2));
    }
}

/// Objects of every class (with and without outers) saved and brought
/// back by `Heap::restore` (their old slots and serials) and by
/// `Heap::load` into a heap whose slots held objects of other classes:
/// freeing the unrooted ones drops each value with drop glue once and
/// leaves each size class with the model's count; new objects in the freed
/// slots keep their values, and at the end nothing is left.
#[test]
fn loaded_and_restored_objects_free_into_their_own_class() {
    let _one = one();
    let n = if cfg!(miri) { 24 } else { 600 };
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut heap = Heap::new();
    let outer = heap.create_mut(Small { v: u64::MAX });
    heap.add_to_root(outer).unwrap();
    let mut saved = Vec::new();
    for v in 0..n {
        let kind = rng.below(6);
        let way = if rng.one_in(3) {
            Way::SpawnMutOuter(outer)
        } else {
            Way::CreateMut
        };
        let (h, has_outer) = make(&mut heap, kind, v, way);
        if rng.one_in(3) {
            heap.add_to_root(h.any()).unwrap();
        }
        saved.push(Entry {
            h,
            v,
            outer: has_outer,
        });
    }
    let mut bytes = Vec::new();
    heap.save(Selection::all(), &mut bytes).unwrap();

    // Into a heap whose slots held objects of other classes, freed.
    let mut other = Heap::new();
    for v in 0..n {
        let kind = rng.below(6);
        make(&mut other, kind, v, Way::CreateMut);
    }
    other.collect().unwrap();
    assert_eq!(other.len(), 0);
    let loaded = other.load(&bytes[..]).unwrap();
    assert_eq!(loaded.objects.len(), saved.len() + 1);
    let restored = Heap::restore(&bytes[..]).unwrap();
    let want: BTreeMap<u64, (usize, bool)> =
        saved.iter().map(|e| (e.v, (e.h.kind(), e.outer))).collect();
    for (which, mut heap) in [("load", other), ("restore", restored)] {
        let drops0 = DROPS.load(SeqCst);
        let bytes0 = heap.gc_totals().total_freed_bytes;
        // The saved objects as this heap holds them, found by value.
        let ids: Vec<AnyObj> = heap.iter().map(|o| o.id()).collect();
        let mut kept = None;
        let mut entries: Vec<Entry> = Vec::new();
        for id in ids {
            let e = classify(&heap, id);
            if e.v == u64::MAX {
                kept = Some(e);
                continue;
            }
            assert_eq!(
                want.get(&e.v),
                Some(&(e.h.kind(), e.outer)),
                "{which}: {e:?}"
            );
            entries.push(e);
        }
        let kept = kept.expect("the outer");
        assert_eq!(entries.len(), saved.len(), "{which}");
        assert_eq!(
            page_objects(&heap),
            model_objects(entries.iter().chain([&kept])),
            "{which}: objects per size class"
        );
        // Everything but the outer unrooted and freed.
        let (mut tallies, mut freed_bytes) = (0, 0);
        for e in &entries {
            if heap.is_rooted(e.h.any()) {
                heap.remove_from_root(e.h.any()).unwrap();
            }
            tallies += e.h.tallies();
            freed_bytes += e.h.size();
        }
        heap.collect().unwrap();
        assert_eq!(heap.len(), 1, "{which}");
        assert_eq!(kept.h.value(&heap), Some(u64::MAX));
        assert_eq!(DROPS.load(SeqCst) - drops0, tallies, "{which}: drops");
        assert_eq!(
            heap.gc_totals().total_freed_bytes - bytes0,
            freed_bytes as u64,
            "{which}: bytes freed"
        );
        assert_eq!(
            page_objects(&heap),
            model_objects([&kept].into_iter()),
            "{which}: objects per size class after the free"
        );
        // New objects of other classes in the freed slots keep their values.
        let mut fresh = Vec::new();
        for v in 0..n {
            let kind = rng.below(6);
            let way = if rng.one_in(3) {
                Way::SpawnMutOuter(match kept.h {
                    H::Small(o) => o,
                    _ => unreachable!(),
                })
            } else {
                Way::CreateMut
            };
            let (h, outer) = make(&mut heap, kind, v, way);
            heap.add_to_root(h.any()).unwrap();
            fresh.push(Entry { h, v, outer });
        }
        for e in &fresh {
            assert_eq!(e.h.value(&heap), Some(e.v), "{which}: {e:?}");
        }
        assert_eq!(
            page_objects(&heap),
            model_objects(fresh.iter().chain([&kept])),
            "{which}: objects per size class, refilled"
        );
        let drops1 = DROPS.load(SeqCst);
        for e in &fresh {
            heap.remove_from_root(e.h.any()).unwrap();
        }
        heap.remove_from_root(kept.h.any()).unwrap();
        heap.collect().unwrap();
        assert_eq!(heap.len(), 0);
        assert_eq!(
            DROPS.load(SeqCst) - drops1,
            fresh.iter().map(|e| e.h.tallies()).sum::<usize>()
        );
        assert_eq!(page_objects(&heap), BTreeMap::new(), "{which}");
    }
}

/// The model entry of the live object `h`, whatever its class.
fn classify(heap: &Heap, h: AnyObj) -> Entry {
    let outer = heap.outer_of(h).is_some();
    for kind in 0..6 {
        let typed = match kind {
            0 => heap.downcast::<Small>(h).map(H::Small),
            1 => heap.downcast::<Mid>(h).map(H::Mid),
            2 => heap.downcast::<Tallied>(h).map(H::Tallied),
            3 => heap.downcast::<Boxed>(h).map(H::Boxed),
            4 => heap.downcast::<Texty>(h).map(H::Texty),
            _ => heap.downcast::<Wide>(h).map(H::Wide),
        };
        if let Some(t) = typed {
            let v = t.value(heap).expect("live");
            return Entry { h: t, v, outer };
        }
    }
    panic!("{h:?} is of no class of this file")
}

// ----- the pool's mark bits ------------------------------------------------------

/// A node of the pool models.
#[derive(Object, Default)]
struct Node {
    id: u64,
    kids: Vec<Obj<Node>>,
}

/// The program's view of a graph of nodes: each node's handles, the roots
/// and the pool (its objects permanent, or roots once it is disabled).
#[derive(Default)]
struct Graph {
    kids: BTreeMap<Obj<Node>, Vec<Obj<Node>>>,
    roots: BTreeSet<Obj<Node>>,
    pool: Vec<Obj<Node>>,
}

impl Graph {
    fn reachable(&self) -> BTreeSet<Obj<Node>> {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<Obj<Node>> = self.roots.iter().chain(&self.pool).copied().collect();
        while let Some(o) = stack.pop() {
            if seen.insert(o) {
                stack.extend(self.kids.get(&o).into_iter().flatten().copied());
            }
        }
        seen
    }

    /// Every reachable node is alive and holds the model's handles.
    fn check(&self, heap: &Heap, ctx: &str) {
        for o in self.reachable() {
            assert_eq!(
                heap.get(o).map(|n| &n.kids),
                self.kids.get(&o),
                "{ctx}: reachable {o:?} freed or changed"
            );
        }
    }

    fn forget_freed(&mut self, heap: &Heap) {
        self.kids.retain(|o, _| heap.contains(*o));
    }

    fn add(&mut self, heap: &mut Heap, id: u64, kids: Vec<Obj<Node>>, shared: bool) -> Obj<Node> {
        let value = Node {
            id,
            kids: kids.clone(),
        };
        let o = if shared {
            heap.create(value)
        } else {
            heap.create_mut(value)
        };
        self.kids.insert(o, kids);
        o
    }

    /// Stores `b` into `a` through `get_mut`.
    fn link(&mut self, heap: &mut Heap, a: Obj<Node>, b: Obj<Node>) {
        heap.get_mut(a).unwrap().kids.push(b);
        self.kids.get_mut(&a).unwrap().push(b);
    }

    /// Cuts `a`'s last handle, if it has one.
    fn cut(&mut self, heap: &mut Heap, a: Obj<Node>) {
        if let Some(b) = self.kids.get_mut(&a).unwrap().pop() {
            assert_eq!(heap.get_mut(a).unwrap().kids.pop(), Some(b));
        }
    }
}

fn pool_heap(threads: usize, pool: u32) -> Heap {
    Heap::with_config(HeapConfig {
        gc: GcConfig {
            threads: marking(threads),
            parallel_threshold: 0,
            ..GcConfig::MANUAL
        },
        disregard_pool_size: pool,
        ..HeapConfig::DEFAULT
    })
    .unwrap()
}

/// A heap whose only objects are pool objects, with a cycle in flight: the
/// pool open when it started, or opened again mid-cycle (allowed: no slot
/// outside it is used), pool
/// objects created then (through `&Heap` and `&mut Heap`), the pool closed
/// mid-cycle, young objects created and stored only into those pool objects
/// (and cut again) between slices; then many sliced minor and major cycles
/// with the same writes, the pool disabled at some slice. Nothing reachable
/// is freed; at the end the heap holds what the model reaches.
fn pool_opened_mid_cycle(seed: u64, threads: usize) {
    let _one = one();
    let mut rng = Rng(seed);
    let mut heap = pool_heap(threads, 64);
    let mut g = Graph::default();
    let mut id = 0;
    heap.open_disregard_for_gc().unwrap();
    for _ in 0..3 {
        id += 1;
        let kids = g.pool.last().copied().into_iter().collect();
        let o = g.add(&mut heap, id, kids, rng.one_in(2));
        g.pool.push(o);
    }
    // Half the time the pool is still open when the cycle starts.
    let open_at_start = rng.one_in(2);
    if !open_at_start {
        heap.close_disregard_for_gc();
    }
    let first = if rng.one_in(2) {
        CycleKind::Major
    } else {
        CycleKind::Minor
    };
    // The cycle starts and scans part of the pool.
    let t = step(&mut heap, first, 1);
    assert!(t.completed.is_none(), "seed {seed}: the cycle is in flight");
    if !open_at_start {
        heap.open_disregard_for_gc().unwrap();
    }
    for _ in 0..3 {
        id += 1;
        let kids = vec![g.pool[rng.below(g.pool.len())]];
        let o = g.add(&mut heap, id, kids, rng.one_in(2));
        g.pool.push(o);
        assert!(heap.flags_of(o).unwrap().disregard);
    }
    heap.close_disregard_for_gc();
    let (rounds, writes) = if cfg!(miri) { (4, 3) } else { (16, 6) };
    let mut disable_at = rng.below(rounds * 8);
    let mut kind = first;
    // The pool's objects (roots once the pool is disabled).
    let holders = g.pool.clone();
    for round in 0..rounds {
        let ctx = format!("seed {seed}, round {round}");
        let mut slices = 0;
        loop {
            // Writes: young nodes stored into pool nodes (often the newest),
            // handles cut, young nodes holding young nodes.
            for _ in 0..rng.below(writes) {
                let pool_node = if rng.one_in(2) {
                    holders[holders.len() - 1 - rng.below(3)]
                } else {
                    holders[rng.below(holders.len())]
                };
                match rng.below(5) {
                    0 | 1 => {
                        id += 1;
                        let live: Vec<Obj<Node>> = g.kids.keys().copied().collect();
                        let kids: Vec<Obj<Node>> = (0..rng.below(3))
                            .map(|_| live[rng.below(live.len())])
                            .filter(|&k| heap.contains(k))
                            .collect();
                        let o = g.add(&mut heap, id, kids, rng.one_in(2));
                        g.link(&mut heap, pool_node, o);
                    }
                    2 | 3 => g.cut(&mut heap, pool_node),
                    _ => {
                        let live: Vec<Obj<Node>> = g.kids.keys().copied().collect();
                        let a = live[rng.below(live.len())];
                        let b = live[rng.below(live.len())];
                        if heap.contains(a) && heap.contains(b) {
                            g.link(&mut heap, a, b);
                        }
                    }
                }
            }
            let t = step(&mut heap, kind, 1 + rng.below(100));
            slices += 1;
            g.check(&heap, &ctx);
            g.forget_freed(&heap);
            if disable_at == 0 {
                heap.disable_disregard_for_gc();
                // Every former pool object is a root now: the model says so.
                g.roots.extend(g.pool.drain(..));
            }
            disable_at = disable_at.wrapping_sub(1);
            if t.completed.is_some() {
                break;
            }
            assert!(slices < 100_000, "{ctx}: the cycle does not end");
        }
        kind = if rng.one_in(3) {
            CycleKind::Major
        } else {
            CycleKind::Minor
        };
    }
    heap.collect().unwrap();
    heap.collect().unwrap();
    g.check(&heap, &format!("seed {seed}, end"));
    assert_eq!(heap.len(), g.reachable().len(), "seed {seed}: leftovers");
}

#[test]
fn pool_objects_created_mid_cycle_keep_their_young_objects() {
    let seeds = if cfg!(miri) { 2 } else { 64 };
    for seed in 0..seeds {
        pool_opened_mid_cycle(
            0x9e37_79b9_7f4a_7c15 ^ (seed * 0x1000_0001),
            1 + seed as usize % 2,
        );
    }
}

/// Former pool objects (the pool disabled, at once or mid-cycle: rooted,
/// ordinary objects, as `disable_disregard_for_gc` promises) keep their
/// young objects while rooted; unrooted or marked as garbage, they are
/// freed (a major cycle frees the unrooted ones, a minor one the garbage
/// ones), and objects created in their slots hold young objects that
/// minor cycles must not lose (a mark bit left on the slot would make the
/// new object look old and unscanned).
fn former_pool(seed: u64, threads: usize, mid_cycle: bool) {
    let _one = one();
    let mut rng = Rng(seed);
    let n = if cfg!(miri) { 8 } else { 48 };
    let mut heap = pool_heap(threads, n as u32);
    let mut g = Graph::default();
    let mut id = 0;
    heap.open_disregard_for_gc().unwrap();
    for _ in 0..n {
        id += 1;
        let o = g.add(&mut heap, id, Vec::new(), false);
        g.pool.push(o);
    }
    heap.close_disregard_for_gc();
    let root = g.add(&mut heap, 0, Vec::new(), false);
    heap.add_to_root(root).unwrap();
    g.roots.insert(root);
    // Pool objects hold young objects; a major and a minor cycle set and
    // keep their mark bits.
    for &p in &g.pool.clone() {
        id += 1;
        let y = g.add(&mut heap, id, Vec::new(), true);
        g.link(&mut heap, p, y);
    }
    heap.collect().unwrap();
    heap.collect_minor().unwrap();
    g.check(&heap, "before the disable");
    if mid_cycle {
        let kind = if rng.one_in(2) {
            CycleKind::Major
        } else {
            CycleKind::Minor
        };
        let mut disabled = false;
        loop {
            let t = step(&mut heap, kind, 1 + rng.below(8));
            if !disabled {
                heap.disable_disregard_for_gc();
                g.roots.extend(g.pool.drain(..));
                disabled = true;
            }
            g.check(&heap, "disabled mid-cycle");
            if t.completed.is_some() {
                break;
            }
        }
    } else {
        heap.disable_disregard_for_gc();
        g.roots.extend(g.pool.drain(..));
    }
    let former: Vec<Obj<Node>> = g.roots.iter().copied().filter(|&o| o != root).collect();
    for &f in &former {
        assert!(heap.is_rooted(f));
        assert!(!heap.flags_of(f).unwrap().disregard);
    }
    // Young objects stored into former pool objects survive minor cycles.
    for &f in &former {
        id += 1;
        let y = g.add(&mut heap, id, Vec::new(), true);
        g.link(&mut heap, f, y);
    }
    heap.collect_minor().unwrap();
    g.check(&heap, "young objects of former pool objects");
    // Half unrooted (a major cycle frees them), a quarter marked as garbage
    // (a minor cycle frees them).
    let mut unrooted = Vec::new();
    let mut garbage = Vec::new();
    for &f in &former {
        match rng.below(4) {
            0 | 1 => {
                heap.remove_from_root(f).unwrap();
                g.roots.remove(&f);
                unrooted.push(f);
            }
            2 => {
                heap.remove_from_root(f).unwrap();
                heap.mark_as_garbage(f).unwrap();
                g.roots.remove(&f);
                garbage.push(f);
            }
            _ => {}
        }
    }
    // A minor cycle frees the garbage ones, then a major the unrooted ones.
    for (minor, gone, what) in [
        (true, &garbage, "a garbage"),
        (false, &unrooted, "an unrooted"),
    ] {
        if minor {
            heap.collect_minor().unwrap();
        } else {
            heap.collect().unwrap();
        }
        let when = if minor { "minor" } else { "major" };
        g.check(&heap, &format!("{when} after the unrooting"));
        for &f in gone {
            assert!(
                !heap.contains(f),
                "seed {seed}: {what} former pool object kept"
            );
        }
        g.forget_freed(&heap);
    }
    assert_eq!(heap.len(), g.reachable().len(), "seed {seed}");
    // New objects take the freed slots (some of them former pool slots,
    // below the old pool end), each holding a young object, reachable only
    // through an old root written since the last cycle.
    let freed_slots: BTreeSet<u32> = unrooted.iter().chain(&garbage).map(|f| f.index()).collect();
    let mut in_old_slots = 0;
    for _ in 0..2 * n {
        id += 1;
        let y = g.add(&mut heap, id, Vec::new(), rng.one_in(2));
        id += 1;
        let x = g.add(&mut heap, id, vec![y], rng.one_in(2));
        in_old_slots += usize::from(freed_slots.contains(&x.index()));
        g.link(&mut heap, root, x);
    }
    if !freed_slots.is_empty() {
        assert!(
            in_old_slots > 0,
            "seed {seed}: no new object in a former pool slot"
        );
    }
    if rng.one_in(2) {
        heap.collect_minor().unwrap();
    } else {
        while heap.step_minor(1 + rng.below(16)).completed.is_none() {}
    }
    g.check(
        &heap,
        &format!("seed {seed}: new objects in former pool slots"),
    );
    heap.collect().unwrap();
    g.check(&heap, &format!("seed {seed}: end"));
    g.forget_freed(&heap);
    assert_eq!(heap.len(), g.reachable().len(), "seed {seed}: leftovers");
}

#[test]
fn former_pool_objects_are_ordinary_and_their_slots_safe_to_reuse() {
    let seeds = if cfg!(miri) { 1 } else { 32 };
    for seed in 0..seeds {
        let s = 0x2545_f491_4f6c_dd1d ^ (seed * 0x1000_0001);
        former_pool(s, 1 + seed as usize % 2, false);
        former_pool(s, 1 + seed as usize % 2, true);
    }
}

/// Clusters whose members reference pool objects, which hold young
/// objects written through `get_mut` between and during cycles (minor and
/// major, sliced, two marking threads): a cluster's external references
/// reach pool objects at a bit test; nothing the pool holds is freed, and a
/// cluster reachable only through a pool object lives.
#[test]
fn clusters_referencing_pool_objects_keep_what_the_pool_holds() {
    let _one = one();
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let (levels, rounds) = if cfg!(miri) { (2, 3) } else { (6, 30) };
    for threads in [1, 2] {
        let mut heap = pool_heap(threads, 16);
        let mut g = Graph::default();
        let mut id = 0;
        heap.open_disregard_for_gc().unwrap();
        for _ in 0..4 {
            id += 1;
            let o = g.add(&mut heap, id, Vec::new(), false);
            g.pool.push(o);
        }
        heap.close_disregard_for_gc();
        let root = g.add(&mut heap, 0, Vec::new(), false);
        heap.add_to_root(root).unwrap();
        g.roots.insert(root);
        // Levels: a cluster of a root and members, each member holding a
        // pool object; half the levels hang from the world's root, the
        // others from a pool object only.
        let mut clusters = Vec::new();
        for l in 0..levels {
            id += 1;
            let level = g.add(&mut heap, id, Vec::new(), false);
            let mut members = Vec::new();
            for _ in 0..4 {
                id += 1;
                let p = g.pool[rng.below(g.pool.len())];
                let m = g.add(&mut heap, id, vec![p], false);
                g.link(&mut heap, level, m);
                members.push(m);
            }
            if l % 2 == 0 {
                g.link(&mut heap, root, level);
            } else {
                let p = g.pool[rng.below(g.pool.len())];
                g.link(&mut heap, p, level);
            }
            heap.collect().unwrap();
            let c = heap.create_cluster(level).unwrap();
            for m in members {
                heap.add_to_cluster(c, m).unwrap();
            }
            clusters.push(c);
        }
        heap.collect().unwrap();
        g.check(&heap, "clusters made");
        for round in 0..rounds {
            let ctx = format!("{threads} threads, round {round}");
            let kind = if round % 4 == 3 {
                CycleKind::Major
            } else {
                CycleKind::Minor
            };
            loop {
                for _ in 0..rng.below(4) {
                    let p = g.pool[rng.below(g.pool.len())];
                    if rng.one_in(3) {
                        // Keep the levels hanging from the pool.
                        if g.kids[&p].len() > 1 {
                            let last = *g.kids[&p].last().unwrap();
                            if heap.cluster_of(last).is_none() {
                                g.cut(&mut heap, p);
                            }
                        }
                    } else {
                        id += 1;
                        let o = g.add(&mut heap, id, Vec::new(), rng.one_in(2));
                        g.link(&mut heap, p, o);
                    }
                }
                let t = step(&mut heap, kind, 1 + rng.below(20));
                g.check(&heap, &ctx);
                g.forget_freed(&heap);
                if t.completed.is_some() {
                    break;
                }
            }
        }
        assert!(heap.verify_clusters().is_empty());
        for c in clusters {
            let _ = heap.dissolve_cluster(c);
        }
        heap.collect().unwrap();
        heap.collect().unwrap();
        g.check(&heap, "end");
        assert_eq!(
            heap.len(),
            g.reachable().len(),
            "{threads} threads: leftovers"
        );
    }
}

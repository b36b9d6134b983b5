//! The free step's path for objects whose class it need not read (the item's
//! `NO_DROP` field: no drop glue, no outer, a pooled slot, set at creation):
//! mixed with classes that have drop glue, hooks, outers and large or
//! over-aligned layouts, in whole and sliced, major and minor cycles. Every
//! value with drop glue is dropped exactly once, hooks run in their order
//! for every class, the bytes freed are the classes' sizes, and the slots
//! freed without the class are handed out again without overlapping a live
//! object (every survivor keeps its value). Sized for miri.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use coreobject::{AnyObj, CycleKind, DestroyCx, Heap, Lifecycle, Obj, Object};

use common::{manual_heap, step, Rng};

/// No drop glue, pooled: freed through the `NO_DROP` field.
#[derive(Object)]
struct Plain {
    value: u64,
    next: Option<Obj<Plain>>,
}

/// Aligned to 16 (still pooled), no drop glue.
#[derive(Object)]
#[repr(align(16))]
struct Wide {
    value: u64,
}

/// Larger than any pooled slot: the global allocator's.
#[derive(Object)]
struct Big {
    #[object(skip)]
    values: [u64; 600],
}

static COUNTED_DROPS: AtomicUsize = AtomicUsize::new(0);

/// Drop glue of its own: each drop counted.
#[derive(Object)]
struct Counted {
    value: u64,
}

impl Drop for Counted {
    fn drop(&mut self) {
        COUNTED_DROPS.fetch_add(1, Ordering::SeqCst);
    }
}

static OWNED_DROPS: AtomicUsize = AtomicUsize::new(0);

/// Counts its drops, as a field of a class with no `Drop` of its own.
struct Tally;

impl Drop for Tally {
    fn drop(&mut self) {
        OWNED_DROPS.fetch_add(1, Ordering::SeqCst);
    }
}

/// Drop glue through a field only.
#[derive(Object)]
struct Owns {
    value: u64,
    #[object(skip)]
    _tally: Tally,
}

/// Hook calls, in order: (what, value).
static HOOKS: Mutex<Vec<(&'static str, u64)>> = Mutex::new(Vec::new());

/// Hooks, no drop glue: its hooks run, then it is freed without its class.
#[derive(Object)]
#[object(lifecycle)]
struct Hooked {
    value: u64,
}

impl Lifecycle for Hooked {
    fn begin_destroy(&mut self, _cx: &DestroyCx<'_>) {
        HOOKS.lock().unwrap().push(("begin", self.value));
    }
    fn finish_destroy(&mut self, _cx: &DestroyCx<'_>) {
        HOOKS.lock().unwrap().push(("finish", self.value));
    }
}

/// One live object of any kind, with the value it must hold.
#[derive(Clone, Copy)]
enum Any {
    Plain(Obj<Plain>),
    Wide(Obj<Wide>),
    Big(Obj<Big>),
    Counted(Obj<Counted>),
    Owns(Obj<Owns>),
    Hooked(Obj<Hooked>),
    /// A `Plain` created with an outer (the outer is kept alive).
    Inner(Obj<Plain>),
}

impl Any {
    fn any(self) -> AnyObj {
        match self {
            Any::Plain(h) | Any::Inner(h) => h.any(),
            Any::Wide(h) => h.any(),
            Any::Big(h) => h.any(),
            Any::Counted(h) => h.any(),
            Any::Owns(h) => h.any(),
            Any::Hooked(h) => h.any(),
        }
    }

    /// Its value, if it resolves.
    fn value(self, heap: &Heap) -> Option<u64> {
        match self {
            Any::Plain(h) | Any::Inner(h) => heap.get(h).map(|o| o.value),
            Any::Wide(h) => heap.get(h).map(|o| o.value),
            Any::Big(h) => heap.get(h).map(|o| {
                assert!(o.values.iter().all(|&v| v == o.values[0]));
                o.values[0]
            }),
            Any::Counted(h) => heap.get(h).map(|o| o.value),
            Any::Owns(h) => heap.get(h).map(|o| o.value),
            Any::Hooked(h) => heap.get(h).map(|o| o.value),
        }
    }

    /// Bytes it takes in its allocation, as the stats count them.
    fn size(self) -> usize {
        match self {
            Any::Plain(_) | Any::Inner(_) => Plain::class().size(),
            Any::Wide(_) => Wide::class().size(),
            Any::Big(_) => Big::class().size(),
            Any::Counted(_) => Counted::class().size(),
            Any::Owns(_) => Owns::class().size(),
            Any::Hooked(_) => Hooked::class().size(),
        }
    }
}

fn create(heap: &mut Heap, rng: &mut Rng, outer: Obj<Plain>, value: u64) -> Any {
    match rng.below(7) {
        0 | 1 => Any::Plain(heap.create_mut(Plain { value, next: None })),
        2 => Any::Wide(heap.create(Wide { value })),
        3 => match rng.below(4) {
            0 => Any::Big(heap.create(Big {
                values: [value; 600],
            })),
            1 => Any::Counted(heap.create(Counted { value })),
            2 => Any::Owns(heap.create_mut(Owns {
                value,
                _tally: Tally,
            })),
            _ => Any::Hooked(heap.create(Hooked { value })),
        },
        4 => Any::Counted(heap.create_mut(Counted { value })),
        5 => Any::Hooked(heap.create_mut(Hooked { value })),
        _ => Any::Inner(
            heap.spawn_mut(Plain { value, next: None })
                .outer(outer)
                .create()
                .unwrap(),
        ),
    }
}

/// Rounds of creation and collection against a model of what lives: each
/// round creates objects of every kind, roots some, unroots others, and
/// collects whole or in slices (major or minor); after every cycle each
/// rooted object holds its value, and after a major one every unrooted
/// object is gone. At the end, with everything freed: each value with drop
/// glue was dropped once, each hooked object had `begin_destroy` then
/// `finish_destroy` once, and the bytes freed are the sum of the classes'
/// sizes.
/// With `heard`, a batch delete listener counts the objects it hears of
/// (which takes the purge's quick loop instead of its plainest one).
fn run(seed: u64, sliced: bool, listen: bool) {
    // The counters are shared by the tests of this file: one at a time.
    static ONE: Mutex<()> = Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let mut rng = Rng(seed);
    let mut heap = manual_heap(1);
    let heard = std::sync::Arc::new(AtomicUsize::new(0));
    if listen {
        let heard = heard.clone();
        heap.on_delete_batch(move |batch: &[coreobject::ObjectEvent]| {
            heard.fetch_add(batch.len(), Ordering::SeqCst);
        });
    }
    let mut created = 1;
    let outer = heap.create_mut(Plain {
        value: u64::MAX,
        next: None,
    });
    heap.add_to_root(outer).unwrap();
    let (rounds, per_round) = if cfg!(miri) { (4, 40) } else { (30, 600) };
    let mut live: Vec<(Any, u64)> = Vec::new();
    let mut gone: Vec<Any> = Vec::new();
    let mut bytes = Plain::class().size();
    let (mut counted, mut owned, mut hooked) = (0, 0, 0);
    let counted0 = COUNTED_DROPS.load(Ordering::SeqCst);
    let owned0 = OWNED_DROPS.load(Ordering::SeqCst);
    HOOKS.lock().unwrap().clear();
    let mut value = 0;
    for round in 0..rounds {
        for _ in 0..per_round {
            value += 1;
            let a = create(&mut heap, &mut rng, outer, value);
            bytes += a.size();
            created += 1;
            match a {
                Any::Counted(_) => counted += 1,
                Any::Owns(_) => owned += 1,
                Any::Hooked(_) => hooked += 1,
                _ => {}
            }
            if rng.one_in(3) {
                heap.add_to_root(a.any()).unwrap();
                live.push((a, value));
            } else {
                gone.push(a);
            }
        }
        live.retain(|&(a, _)| {
            let keep = !rng.one_in(4);
            if !keep {
                heap.remove_from_root(a.any()).unwrap();
                gone.push(a);
            }
            keep
        });
        let kind = if round % 3 == 2 {
            CycleKind::Major
        } else {
            CycleKind::Minor
        };
        if sliced {
            while step(&mut heap, kind, 1 + rng.below(64)).completed.is_none() {}
        } else if kind == CycleKind::Major {
            heap.collect().unwrap();
        } else {
            heap.collect_minor().unwrap();
        }
        for &(a, v) in &live {
            assert_eq!(
                a.value(&heap),
                Some(v),
                "round {round}: a rooted object changed"
            );
        }
        if kind == CycleKind::Major {
            for a in gone.drain(..) {
                assert_eq!(a.value(&heap), None, "round {round}: not freed");
            }
            assert_eq!(heap.len(), live.len() + 1, "round {round}");
        }
    }
    for (a, _) in live.drain(..) {
        heap.remove_from_root(a.any()).unwrap();
    }
    heap.remove_from_root(outer).unwrap();
    heap.collect().unwrap();
    assert_eq!(heap.len(), 0);
    assert_eq!(
        COUNTED_DROPS.load(Ordering::SeqCst) - counted0,
        counted,
        "Drop impls"
    );
    assert_eq!(
        OWNED_DROPS.load(Ordering::SeqCst) - owned0,
        owned,
        "drop glue of fields"
    );
    let calls = std::mem::take(&mut *HOOKS.lock().unwrap());
    assert_eq!(calls.len(), 2 * hooked, "each hook once per hooked object");
    let mut begun = std::collections::HashSet::new();
    for (what, v) in calls {
        match what {
            "begin" => assert!(begun.insert(v), "begin_destroy twice"),
            _ => assert!(begun.remove(&v), "finish_destroy before begin_destroy"),
        }
    }
    assert!(begun.is_empty());
    assert_eq!(
        heap.gc_totals().total_freed_bytes,
        bytes as u64,
        "bytes freed"
    );
    if listen {
        assert_eq!(heard.load(Ordering::SeqCst), created, "objects heard of");
    }
}

#[test]
fn whole_cycles_free_every_kind_of_object() {
    for seed in 1..=3 {
        run(seed, false, false);
    }
}

#[test]
fn sliced_cycles_free_every_kind_of_object() {
    for seed in 1..=3 {
        run(seed, true, false);
    }
}

/// The same through the purge's quick loop (a batch delete listener).
#[test]
fn the_quick_loop_frees_every_kind_of_object() {
    for seed in 1..=2 {
        run(seed, false, true);
        run(seed, true, true);
    }
}

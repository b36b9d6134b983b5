//! Large objects are traced in pieces (issue 24): an object whose `Vec`
//! holds a million handles is many units of work, spread over slices.
//!
//! * **Work per slice** — one rooted object holds 1,048,576 handles (to
//!   4,096 leaves, each named 256 times; `cfg!(miri)` shrinks it to 6,096
//!   handles, still split). Every
//!   slice of `step(n)` and `step_minor(n)` traces at most
//!   `C * n + SLACK` handles, counted by the handles' own `Trace` (not by
//!   the collector's unit count), with `C` = 64 and `SLACK` = 81,920 (the
//!   rings' 16 objects and one more, each traced up to one piece of 4,096,
//!   on top of 32 handles per unit). Tracing the object whole, as before
//!   pieces, traces all of it in one slice.
//! * **Changes mid-trace** — the object is grown, shrunk and has handles
//!   moved from its untraced tail into its traced head (through `get_mut`)
//!   between slices: nothing reachable is freed, what was dropped is freed
//!   by the next cycle.
//! * **The derive's cursor** — for a derived struct and enum, every split of
//!   `0..trace_units()` into ranges reports exactly what `trace` reports.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use coreobject::{AnyObj, CycleKind, Heap, Obj, Object, RefKind, Trace, Visitor};

/// Handles traced so far, by any visitor.
static TRACED: AtomicUsize = AtomicUsize::new(0);

/// Held by every test that traces `Counted` values: `TRACED` is one
/// counter for the whole test binary, whose tests run on parallel threads.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

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

#[derive(Object, Default)]
struct Big {
    id: u32,
    refs: Vec<Counted>,
}

const C: usize = 64;
const SLACK: usize = 20 * 4_096;

/// Leaves, and handles in the big object (above 4,096 under miri too, so
/// that it is split).
fn sizes() -> (usize, usize) {
    if cfg!(miri) {
        (64, 4_096 + 2_000)
    } else {
        (4_096, 1 << 20)
    }
}

/// Budgets tried per cycle.
fn budgets() -> &'static [usize] {
    if cfg!(miri) {
        &[1_000]
    } else {
        &[256, 1_000, 4_000]
    }
}

/// Runs slices of `n` units of a `kind` cycle until one completes, calling
/// `between` after each; returns the most handles one slice traced and the
/// number of slices.
fn run(
    heap: &mut Heap,
    kind: CycleKind,
    n: usize,
    mut between: impl FnMut(&mut Heap, usize),
) -> (usize, usize) {
    let mut most = 0;
    let mut slices = 0;
    loop {
        let before = TRACED.load(Ordering::Relaxed);
        let t = match kind {
            CycleKind::Major => heap.step(n),
            CycleKind::Minor => heap.step_minor(n),
        };
        most = most.max(TRACED.load(Ordering::Relaxed) - before);
        assert!(t.work <= 2 * n + 64, "a slice did {} units for {n}", t.work);
        slices += 1;
        if t.completed.is_some() {
            return (most, slices);
        }
        between(heap, slices);
    }
}

#[test]
fn a_million_handles_in_one_object_are_traced_over_many_slices() {
    let _serial = serial();
    let (leaves, handles) = sizes();
    let mut heap = common::generational_heap();
    let leaf: Vec<Obj<Leaf>> = (0..leaves).map(|_| heap.create(Leaf::default())).collect();
    let refs = (0..handles).map(|k| Counted(leaf[k % leaves])).collect();
    let big = heap
        .spawn(Big { id: 0, refs })
        .root()
        .create()
        .expect("a fresh name");
    for &n in budgets() {
        let limit = C * n + SLACK;
        let (most, slices) = run(&mut heap, CycleKind::Major, n, |_, _| {});
        assert!(
            most <= limit,
            "major, step({n}): a slice traced {most} handles (limit {limit})"
        );
        assert!(cfg!(miri) || slices > 1, "{slices}");
        assert!(leaf.iter().all(|&l| heap.contains(l)));
    }
    // A minor cycle: the big object is old and was written, so it is in
    // the remembered set and re-scanned, in pieces too.
    heap.get_mut(big).unwrap().id += 1;
    let young: Vec<_> = (0..leaves).map(|_| heap.create(Leaf::default())).collect();
    heap.get_mut(big)
        .unwrap()
        .refs
        .extend(young.iter().step_by(2).map(|&y| Counted(y)));
    let n = 1_000;
    let limit = C * n + SLACK;
    let (most, _) = run(&mut heap, CycleKind::Minor, n, |_, _| {});
    assert!(
        most <= limit,
        "minor, step({n}): a slice traced {most} handles (limit {limit})"
    );
    let last = heap.last_collection().unwrap();
    assert_eq!(last.kind, CycleKind::Minor);
    assert_eq!(last.freed, young.len() / 2, "{last:?}");
    assert!(young.iter().step_by(2).all(|&y| heap.contains(y)));
}

#[test]
fn an_object_changed_while_traced_in_pieces_keeps_what_it_references() {
    let _serial = serial();
    let (leaves, handles) = sizes();
    let handles = if cfg!(miri) { handles } else { handles / 4 };
    let mut heap = common::generational_heap();
    let leaf: Vec<Obj<Leaf>> = (0..leaves).map(|_| heap.create(Leaf::default())).collect();
    // The big object holds the leaves in its tail only: the head is
    // filled with one leaf, so the tail is traced last.
    let mut refs: Vec<Counted> = vec![Counted(leaf[0]); handles - leaves];
    refs.extend(leaf.iter().map(|&l| Counted(l)));
    let big = heap.spawn(Big { id: 0, refs }).root().create().unwrap();
    // Objects created now, held only outside the heap until stored.
    let extra: Vec<_> = (0..64).map(|_| heap.create(Leaf::default())).collect();
    heap.collect().unwrap();
    let kept_extra: Vec<_> = extra
        .iter()
        .copied()
        .filter(|&e| heap.contains(e))
        .collect();
    assert!(kept_extra.is_empty(), "unreferenced objects are freed");
    let extra: Vec<_> = (0..64).map(|_| heap.create(Leaf::default())).collect();

    let (_, slices) = run(&mut heap, CycleKind::Major, 200, |heap, slice| {
        let b = heap.get_mut(big).unwrap();
        match slice {
            // Move every leaf from the untraced tail into the traced head,
            // and overwrite the tail: only the head names them now.
            1 => {
                let len = b.refs.len();
                for k in 0..leaves {
                    b.refs[k] = b.refs[len - leaves + k];
                    b.refs[len - leaves + k] = Counted(leaf[0]);
                }
            }
            // Grow it with objects held outside the heap until now.
            2 => b.refs.extend(extra.iter().map(|&e| Counted(e))),
            // Shrink it below where the cursor stands.
            3 => {
                let keep = leaves + extra.len();
                let tail: Vec<_> = b.refs[b.refs.len() - extra.len()..].to_vec();
                b.refs.truncate(leaves);
                b.refs.extend(tail);
                assert_eq!(b.refs.len(), keep);
            }
            _ => {}
        }
    });
    assert!(cfg!(miri) || slices > 4, "the cycle ran {slices} slices");
    assert!(
        leaf.iter().all(|&l| heap.contains(l)),
        "a moved leaf was freed"
    );
    assert!(
        extra.iter().all(|&e| heap.contains(e)),
        "a stored object was freed"
    );
    // Dropping the leaves frees them with the next cycle.
    heap.get_mut(big).unwrap().refs.truncate(1);
    heap.collect().unwrap();
    let alive = leaf.iter().filter(|&&l| heap.contains(l)).count();
    assert_eq!(alive, 1, "only leaf 0 is still referenced");
    assert_eq!(extra.iter().filter(|&&e| heap.contains(e)).count(), 0);
}

/// Records the handles reported, in order.
struct Record(Vec<AnyObj>);
impl Visitor for Record {
    fn visit(&mut self, obj: AnyObj) {
        self.0.push(obj);
    }
}

#[derive(Trace, Default)]
struct Inner {
    a: Option<Obj<Leaf>>,
    many: Vec<Obj<Leaf>>,
}

#[derive(Object, Default)]
struct Mixed {
    first: Option<Obj<Leaf>>,
    plain: u64,
    list: Vec<Obj<Leaf>>,
    #[object(skip)]
    #[allow(dead_code)]
    skipped: Vec<Obj<Leaf>>,
    boxed: Option<Box<[Obj<Leaf>]>>,
    nested: Inner,
    queue: std::collections::VecDeque<Obj<Leaf>>,
    last: Option<Obj<Leaf>>,
}

#[derive(Trace)]
enum Shape {
    Empty,
    One(Obj<Leaf>),
    Two {
        x: Vec<Obj<Leaf>>,
        y: Option<Obj<Leaf>>,
    },
}

/// Every split of `0..trace_units()` into ranges of `width` (and ranges
/// beyond the end) reports what `trace` reports, in the same order.
fn check_splits<T: Trace>(value: &T) {
    let mut whole = Record(Vec::new());
    value.trace(&mut whole);
    let units = value.trace_units();
    for width in 1..=units.max(1) + 1 {
        let mut parts = Record(Vec::new());
        let mut at = 0;
        while at < units + 3 {
            value.trace_range(&mut parts, at, at + width);
            at += width;
        }
        assert_eq!(parts.0, whole.0, "width {width} of {units}");
    }
}

#[test]
fn the_derives_cursor_splits_a_trace_into_exact_pieces() {
    let _serial = serial();
    let heap = Heap::new();
    let l: Vec<Obj<Leaf>> = (0..12).map(|_| heap.create(Leaf::default())).collect();
    let mut queue: std::collections::VecDeque<_> = l[..5].iter().copied().collect();
    // A deque whose contents wrap around its buffer (two slices).
    queue.pop_front();
    queue.pop_front();
    queue.push_back(l[9]);
    queue.push_back(l[10]);
    let m = Mixed {
        first: Some(l[0]),
        plain: 7,
        list: l[1..4].to_vec(),
        skipped: l.clone(),
        boxed: Some(l[4..6].to_vec().into_boxed_slice()),
        nested: Inner {
            a: None,
            many: l[6..9].to_vec(),
        },
        queue,
        last: Some(l[11]),
    };
    // first 1 + list 3 + boxed 2 + nested (a 0 + many 3) + queue 5 + last 1.
    assert_eq!(m.trace_units(), 15);
    check_splits(&m);
    check_splits(&Mixed::default());
    check_splits(&Shape::Empty);
    check_splits(&Shape::One(l[0]));
    let two = Shape::Two {
        x: l[..4].to_vec(),
        y: Some(l[5]),
    };
    assert_eq!(two.trace_units(), 5);
    check_splits(&two);
    check_splits(&vec![Some(l[1]), None, Some(l[2])]);
}

//! Review of the looks of minor cycles and of tracing at birth (review 4).

use coreobject::{CycleKind, GcConfig, Heap, HeapConfig, Obj, Object, Phase};

#[derive(Object, Default)]
struct Node {
    id: u64,
    kids: Vec<Obj<Node>>,
}

fn node(id: u64, kids: Vec<Obj<Node>>) -> Node {
    Node { id, kids }
}

fn heap_with(gc: GcConfig) -> Heap {
    Heap::with_config(HeapConfig {
        gc,
        ..HeapConfig::DEFAULT
    })
    .unwrap()
}

fn finish(heap: &mut Heap, kind: CycleKind) {
    loop {
        let t = match kind {
            CycleKind::Major => heap.step(1_000),
            _ => heap.step_minor(1_000),
        };
        if t.completed.is_some() {
            return;
        }
    }
}

/// Under `outer_keeps_inners`, an inner kept only by its outer is moved
/// (`rename`) while a cycle marks under an object that was created through
/// `&mut Heap` during that cycle (traced at birth: black, passed over by the
/// born scan). The moved inner is still reachable and must survive.
#[test]
fn inner_moved_under_an_object_traced_at_birth_survives() {
    let mut lost = Vec::new();
    for (kind, birth_mut) in [
        (CycleKind::Major, true),
        (CycleKind::Major, false),
        (CycleKind::Minor, true),
        (CycleKind::Minor, false),
    ] {
        let mut heap = heap_with(GcConfig {
            outer_keeps_inners: true,
            ..GcConfig::MANUAL
        });
        let root = heap.spawn(node(0, Vec::new())).root().create().unwrap();
        heap.collect().unwrap();
        // Young (for the minor cycle): enough objects that the first slice does not finish marking.
        let mut prev = root;
        for i in 0..200 {
            let o = heap.create(node(100 + i, Vec::new()));
            heap[prev].kids.push(o);
            prev = o;
        }
        let p = heap.spawn(node(1, Vec::new())).outer(prev).create().unwrap();
        let w = heap.spawn(node(2, Vec::new())).outer(p).create().unwrap();
        assert!(heap.contains(w));
        let t = match kind {
            CycleKind::Major => heap.step(1),
            _ => heap.step_minor(1),
        };
        assert!(t.started.is_some() && heap.gc_phase() == Phase::Mark);
        let n = if birth_mut {
            heap.spawn_mut(node(3, Vec::new()))
                .outer(root)
                .create()
                .unwrap()
        } else {
            heap.spawn(node(3, Vec::new())).outer(root).create().unwrap()
        };
        heap[root].kids.push(n);
        heap.rename(w).outer(n).apply().unwrap();
        finish(&mut heap, kind);
        let ctx = format!("{kind:?}, created through &mut: {birth_mut}");
        assert!(heap.contains(n), "{ctx}: n");
        if !heap.contains(w) {
            lost.push(ctx);
            continue;
        }
        assert_eq!(heap.outer_of(w), Some(n.into()), "{ctx}");
        heap.collect().unwrap();
        assert!(heap.contains(w), "{ctx}: freed by the next major cycle");
    }
    assert!(lost.is_empty(), "the moved inner was freed: {lost:?}");
}

/// The same move while a cycle marks, under an object marked already (the
/// root, scanned by the first slice): not specific to tracing at birth.
#[test]
fn inner_moved_under_a_marked_outer_survives() {
    let mut lost = Vec::new();
    for kind in [CycleKind::Major, CycleKind::Minor] {
        let mut heap = heap_with(GcConfig {
            outer_keeps_inners: true,
            ..GcConfig::MANUAL
        });
        let root = heap.spawn(node(0, Vec::new())).root().create().unwrap();
        heap.collect().unwrap();
        let mut prev = root;
        for i in 0..200 {
            let o = heap.create(node(100 + i, Vec::new()));
            heap[prev].kids.push(o);
            prev = o;
        }
        let p = heap.spawn(node(1, Vec::new())).outer(prev).create().unwrap();
        let w = heap.spawn(node(2, Vec::new())).outer(p).create().unwrap();
        let t = match kind {
            CycleKind::Major => heap.step(4),
            _ => heap.step_minor(4),
        };
        assert!(t.started.is_some() && heap.gc_phase() == Phase::Mark);
        heap.rename(w).outer(root).apply().unwrap();
        finish(&mut heap, kind);
        if !heap.contains(w) {
            lost.push(format!("{kind:?}"));
        }
    }
    assert!(lost.is_empty(), "the moved inner was freed: {lost:?}");
}

static ARMED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A field whose hand-written `Trace` panics while `ARMED`.
#[derive(Default)]
struct Bomb;

impl coreobject::Trace for Bomb {
    const KIND: coreobject::RefKind = coreobject::RefKind::Strong;
    fn trace<V: coreobject::Visitor + ?Sized>(&self, _v: &mut V) {
        if ARMED.load(std::sync::atomic::Ordering::Relaxed) {
            panic!("bomb");
        }
    }
}

#[derive(Object, Default)]
struct Boom {
    bomb: Bomb,
    kid: Option<Obj<Node>>,
}

/// Marking heap: a root with a long chain, one slice in.
fn marking_heap(gc: GcConfig, kind: CycleKind) -> (Heap, Obj<Node>) {
    let mut heap = heap_with(gc);
    let root = heap.spawn(node(0, Vec::new())).root().create().unwrap();
    heap.collect().unwrap();
    let mut prev = root;
    for i in 0..200 {
        let o = heap.create(node(100 + i, Vec::new()));
        heap[prev].kids.push(o);
        prev = o;
    }
    let t = match kind {
        CycleKind::Major => heap.step(1),
        _ => heap.step_minor(1),
    };
    assert!(t.started.is_some() && heap.gc_phase() == Phase::Mark);
    (heap, root)
}

/// A hand-written `Trace` that panics when an object is created through
/// `&mut Heap` while a cycle marks: tracing at birth runs it inside
/// `spawn_mut(..).create()`. The panic may propagate, but the object it
/// leaves in the heap (reachable through `iter_of`) must be whole: its name
/// in the index, filed under its outer (kept by it under
/// `outer_keeps_inners`), and create listeners told about it (they hear of
/// it being deleted later, so their counts must add up). On main the
/// tracing ran before that bookkeeping, which the panic skipped.
#[test]
fn a_trace_panic_at_birth_leaves_the_object_whole() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let gc = GcConfig {
        outer_keeps_inners: true,
        ..GcConfig::MANUAL
    };
    let (mut heap, root) = marking_heap(gc, CycleKind::Major);
    let (made, gone) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let m = made.clone();
    heap.on_create(move |_| {
        m.fetch_add(1, Ordering::Relaxed);
    });
    let g = gone.clone();
    heap.on_delete(move |_| {
        g.fetch_add(1, Ordering::Relaxed);
    });
    ARMED.store(true, Ordering::Relaxed);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        heap.spawn_mut(Boom::default())
            .name("Boom")
            .outer(root)
            .create()
            .unwrap()
    }));
    ARMED.store(false, Ordering::Relaxed);
    assert!(r.is_err(), "Trace ran at birth");
    let b: Vec<_> = heap.iter_of::<Boom>().map(|(o, _)| o).collect();
    assert_eq!(b.len(), 1);
    let b = b[0];
    assert_eq!(made.load(Ordering::Relaxed), 1, "create listeners not told");
    assert_eq!(heap.find(Some(root.into()), "Boom"), Some(b.into()));
    let mut inners = Vec::new();
    heap.for_each_with_outer(root, |o| inners.push(o.id()));
    assert_eq!(inners, [b.any()], "not filed under its outer");
    finish(&mut heap, CycleKind::Major);
    heap.collect().unwrap();
    assert!(heap.contains(b), "an inner of the root, kept by it");
    assert_eq!(
        made.load(Ordering::Relaxed),
        gone.load(Ordering::Relaxed) + heap.iter_of::<Boom>().count()
    );
}

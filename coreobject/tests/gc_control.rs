//! Controlling the collector: what it frees, when it runs, what it reports.
//!
//! Checks that unreachable cycles are collected; `mark_as_garbage` semantics
//! (hidden from `get` and weak handles at once, still visible through
//! `get_even_if_garbage`, freed by the next collection even when rooted,
//! referenced or strongly held, undone by `clear_garbage`); that a disabled
//! collector refuses `collect` with `Error::GcDisabled` and `tick` never
//! collects; each `tick` trigger (interval, object count, bytes, every frame);
//! that disabling the disregard-for-GC pool turns its objects into rooted
//! ordinary ones; that pre- and post-collection callbacks run in
//! registration order around the destruction hooks with the right data; the
//! stats (`last_collection`, `gc_totals`, per-phase durations); and that a
//! `StrongObj` dropped on another thread releases its object; and that an
//! incremental cycle that falls behind a fast mutator stretches its slices
//! (`incremental_stretch`) instead of being finished at once by the debt rule.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use coreobject::{
    AnyObj, CollectStats, Error, GcConfig, Heap, HeapConfig, Obj, Object, ObjectEvent,
    ResolveError, StrongObj, Weak,
};

#[derive(Object, Default)]
struct Node {
    next: Vec<Obj<Node>>,
    weak: Option<Weak<Node>>,
    value: u32,
}

fn manual() -> Heap {
    heap_with(GcConfig::MANUAL)
}

fn heap_with(gc: GcConfig) -> Heap {
    Heap::with_config(HeapConfig {
        gc,
        ..HeapConfig::DEFAULT
    })
    .unwrap()
}

fn node(heap: &Heap, value: u32) -> Obj<Node> {
    heap.create(Node {
        value,
        ..Node::default()
    })
}

#[test]
fn unreachable_cycles_are_collected_reachable_ones_kept() {
    let mut heap = manual();
    let (a, b, c) = (node(&heap, 1), node(&heap, 2), node(&heap, 3));
    heap[a].next.push(b);
    heap[b].next.push(c);
    heap[c].next.push(a);
    let selfloop = node(&heap, 4);
    heap[selfloop].next.push(selfloop);
    let s = heap.collect().unwrap();
    assert_eq!((s.marked, s.freed), (0, 4));
    assert!(heap.is_empty());

    let (a, b) = (node(&heap, 1), node(&heap, 2));
    heap[a].next.push(b);
    heap[b].next.push(a);
    heap.add_to_root(b).unwrap();
    let s = heap.collect().unwrap();
    assert_eq!((s.marked, s.freed), (2, 0));
    assert_eq!(heap[heap[b].next[0]].value, 1);
}

#[test]
fn garbage_is_hidden_at_once_and_freed_even_when_referenced() {
    let mut heap = manual();
    let root = node(&heap, 0);
    heap.add_to_root(root).unwrap();
    let g = node(&heap, 7);
    let only_via_g = node(&heap, 8);
    heap[g].next.push(only_via_g);
    heap[root].next.push(g);
    heap[root].weak = Some(g.downgrade());
    let strong = heap.strong(g).unwrap();
    heap.add_to_root(g).unwrap();

    heap.mark_as_garbage(g).unwrap();
    assert!(heap.is_garbage(g));
    assert!(!heap.contains(g));
    assert!(heap.get(g).is_none());
    assert!(heap.get(g.downgrade()).is_none());
    assert!(heap.get(&strong).is_none());
    assert!(heap.upgrade(g.downgrade()).is_none());
    assert_eq!(heap.try_get(g).err(), Some(ResolveError::Garbage(g.any())));
    assert_eq!(heap.get_even_if_garbage(g).unwrap().value, 7);
    assert_eq!(heap.get_even_if_garbage(g.downgrade()).unwrap().value, 7);
    assert!(heap.get_mut(g).is_none(), "garbage cannot be edited");
    assert!(heap.strong(g).is_none(), "no new strong handles to garbage");
    assert!(heap.add_to_root(g).is_err());
    assert_eq!(heap.len(), 3, "still allocated until the collection");

    // Rooted, strongly held, referenced: freed anyway. Its own references are
    // not traced, so what only it kept alive goes too.
    let s = heap.collect().unwrap();
    assert_eq!((s.marked, s.freed), (1, 2));
    assert!(heap.get_even_if_garbage(g).is_none());
    assert_eq!(heap.try_get(g).err(), Some(ResolveError::Stale(g.any())));
    assert!(heap.get(only_via_g).is_none());
    // The references that pointed at it are stale now, forever.
    assert!(heap.get(heap[root].next[0]).is_none());
    assert!(heap.get(heap[root].weak.unwrap()).is_none());
    assert_eq!(heap.strong_count(g), 0);
    drop(strong);
    let reuse = node(&heap, 9);
    assert!(heap.get(g).is_none() && heap.get(reuse).is_some());
    assert!(
        heap.get(heap[root].next[0]).is_none(),
        "not even after slot reuse"
    );
}

#[test]
fn clear_garbage_undoes_the_mark() {
    let mut heap = manual();
    let a = node(&heap, 1);
    heap.add_to_root(a).unwrap();
    heap.mark_as_garbage(a).unwrap();
    assert!(heap.get(a).is_none());
    heap.clear_garbage(a).unwrap();
    assert_eq!(heap[a].value, 1);
    assert_eq!(heap.collect().unwrap().freed, 0);
    assert!(heap.contains(a));
}

#[test]
fn pool_objects_cannot_be_garbage() {
    let mut heap = Heap::with_config(HeapConfig {
        disregard_pool_size: 4,
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    heap.open_disregard_for_gc().unwrap();
    let p = node(&heap, 1);
    heap.close_disregard_for_gc();
    assert_eq!(heap.mark_as_garbage(p), Err(Error::Permanent(p.any())));
    let child = node(&heap, 2);
    heap[p].next.push(child);
    let s = heap.collect().unwrap();
    assert_eq!(
        (s.marked, s.freed),
        (1, 0),
        "the pool keeps its child alive"
    );
    assert_eq!(heap.first_gc_index(), 1);
}

#[test]
fn disabling_the_pool_roots_its_objects() {
    let mut heap = Heap::with_config(HeapConfig {
        disregard_pool_size: 4,
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    heap.open_disregard_for_gc().unwrap();
    let (p, q) = (node(&heap, 1), node(&heap, 2));
    heap.close_disregard_for_gc();
    let child = node(&heap, 3);
    heap[q].next.push(child);
    heap.disable_disregard_for_gc();
    assert_eq!((heap.disregard_len(), heap.first_gc_index()), (0, 0));
    assert!(heap.is_rooted(p) && heap.is_rooted(q));
    let s = heap.collect().unwrap();
    assert_eq!((s.roots, s.marked, s.freed), (2, 3, 0));
    // Now ordinary objects: unrooted, they are collected.
    heap.remove_from_root(q).unwrap();
    heap.mark_as_garbage(p).unwrap();
    assert_eq!(heap.collect().unwrap().freed, 3);
    assert!(heap.is_empty());
}

#[test]
fn a_disabled_collector_refuses_to_collect() {
    let mut heap = heap_with(GcConfig::DEBUG);
    let a = node(&heap, 1);
    heap.set_enabled(false);
    assert!(!heap.is_enabled());
    let err = heap.collect().unwrap_err();
    assert_eq!(err, Error::GcDisabled);
    assert_eq!(
        err.to_string(),
        "garbage collection is disabled (Heap::set_enabled(false))"
    );
    assert!(
        heap.tick(Duration::from_secs(3600)).completed.is_none(),
        "every_frame, yet no collection"
    );
    assert!(heap.contains(a));
    assert_eq!(heap.gc_totals().collections, 0);
    assert!(heap.last_collection().is_none());
    heap.set_enabled(true);
    assert_eq!(heap.tick(Duration::ZERO).completed.unwrap().freed, 1);
}

#[test]
fn tick_collects_on_the_interval() {
    let mut heap = heap_with(GcConfig {
        interval: Some(Duration::from_millis(100)),
        ..GcConfig::MANUAL
    });
    node(&heap, 0);
    for _ in 0..6 {
        assert!(heap.tick(Duration::from_millis(16)).completed.is_none());
    }
    // 7 * 16 = 112 ms.
    let s = heap
        .tick(Duration::from_millis(16))
        .completed
        .expect("interval passed");
    assert_eq!(s.freed, 1);
    // The clock restarts after a collection.
    assert!(heap.tick(Duration::from_millis(99)).completed.is_none());
    assert!(heap.tick(Duration::from_millis(1)).completed.is_some());
    // A manual collection restarts it too.
    assert!(heap.tick(Duration::from_millis(60)).completed.is_none());
    heap.collect().unwrap();
    assert!(heap.tick(Duration::from_millis(60)).completed.is_none());
    assert!(heap.tick(Duration::from_millis(40)).completed.is_some());
    assert_eq!(heap.gc_totals().collections, 4);
}

#[test]
fn tick_collects_at_the_object_threshold() {
    let mut heap = heap_with(GcConfig {
        object_threshold: Some(10),
        ..GcConfig::MANUAL
    });
    let root = node(&heap, 0);
    heap.add_to_root(root).unwrap();
    for i in 1..9 {
        node(&heap, i);
        assert!(
            heap.tick(Duration::ZERO).completed.is_none(),
            "{} objects",
            heap.len()
        );
    }
    node(&heap, 9);
    assert_eq!(heap.len(), 10);
    let s = heap.tick(Duration::ZERO).completed.expect("10 objects");
    assert_eq!((s.freed, s.live), (9, 1));
    assert!(heap.tick(Duration::ZERO).completed.is_none());
}

#[test]
fn tick_collects_at_the_bytes_threshold() {
    let size = Node::class().size();
    let mut heap = heap_with(GcConfig {
        bytes_threshold: Some(5 * size),
        ..GcConfig::MANUAL
    });
    for i in 0..4 {
        node(&heap, i);
    }
    assert!(
        heap.tick(Duration::ZERO).completed.is_none(),
        "4 objects' bytes"
    );
    node(&heap, 4);
    let s = heap
        .tick(Duration::ZERO)
        .completed
        .expect("5 objects' bytes");
    assert_eq!((s.freed, s.freed_bytes), (5, 5 * size));
    // The count restarts after each collection (manual ones too).
    for i in 0..4 {
        node(&heap, i);
    }
    heap.collect().unwrap();
    for i in 0..4 {
        node(&heap, i);
    }
    assert!(heap.tick(Duration::ZERO).completed.is_none());
    node(&heap, 4);
    assert!(heap.tick(Duration::ZERO).completed.is_some());
}

#[test]
fn tick_collects_every_frame_when_asked() {
    let mut heap = heap_with(GcConfig::MANUAL);
    assert!(heap.tick(Duration::ZERO).completed.is_none());
    heap.gc_config_mut().every_frame = true;
    for i in 0..3 {
        node(&heap, i);
        assert_eq!(heap.tick(Duration::ZERO).completed.unwrap().freed, 1);
    }
    assert_eq!(heap.gc_totals().collections, 3);
}

#[test]
fn default_config_collects_after_61_seconds() {
    let mut heap = Heap::new();
    node(&heap, 0);
    assert!(heap.tick(Duration::from_secs(61)).completed.is_none());
    assert!(heap.tick(Duration::from_millis(100)).completed.is_some());
}

#[test]
fn callbacks_run_in_order_around_destruction() {
    let log: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
    let mut heap = manual();
    let l = log.clone();
    let pre1 = heap.on_pre_collect(move |p| {
        l.lock()
            .unwrap()
            .push(format!("pre1 #{} objects={}", p.collection, p.objects))
    });
    let l = log.clone();
    heap.on_pre_collect(move |p| l.lock().unwrap().push(format!("pre2 #{}", p.collection)));
    let l = log.clone();
    heap.on_delete(move |e: &ObjectEvent| {
        l.lock()
            .unwrap()
            .push(format!("delete #{}", e.object.index()))
    });
    let seen: Arc<Mutex<Vec<CollectStats>>> = Arc::new(Mutex::new(Vec::new()));
    let (l, s2) = (log.clone(), seen.clone());
    let post1 = heap.on_post_collect(move |s| {
        l.lock()
            .unwrap()
            .push(format!("post1 freed={} live={}", s.freed, s.live));
        s2.lock().unwrap().push(s.clone());
    });
    let l = log.clone();
    heap.on_post_collect(move |s| l.lock().unwrap().push(format!("post2 marked={}", s.marked)));

    let keep = node(&heap, 0);
    heap.add_to_root(keep).unwrap();
    let gone = node(&heap, 1);
    let stats = heap.collect().unwrap();
    assert_eq!(
        *log.lock().unwrap(),
        [
            "pre1 #1 objects=2".to_string(),
            "pre2 #1".to_string(),
            format!("delete #{}", gone.index()),
            "post1 freed=1 live=1".to_string(),
            "post2 marked=1".to_string(),
        ]
    );
    assert_eq!(
        seen.lock().unwrap()[0],
        stats,
        "post callbacks see the returned stats"
    );

    log.lock().unwrap().clear();
    assert!(heap.remove_gc_callback(pre1));
    assert!(heap.remove_gc_callback(post1));
    assert!(!heap.remove_gc_callback(post1), "already removed");
    heap.collect().unwrap();
    assert_eq!(*log.lock().unwrap(), ["pre2 #2", "post2 marked=1"]);
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[test]
fn stats_and_totals_add_up() {
    let mut heap = manual();
    assert!(heap.last_collection().is_none());
    assert_eq!(heap.gc_totals().collections, 0);
    let size = Node::class().size();
    let root = node(&heap, 0);
    heap.add_to_root(root).unwrap();
    let mut all = Vec::new();
    let mut freed_per = Vec::new();
    let kept = if cfg!(miri) { 20 } else { 1000 };
    for round in 1..=3usize {
        let mut prev = root;
        // A chain of `kept` kept plus 2 * kept * round dropped.
        for i in 0..kept {
            let n = node(&heap, i as u32);
            heap[prev].next = vec![n];
            prev = n;
        }
        for i in 0..2 * kept * round {
            node(&heap, i as u32);
        }
        let s = heap.collect().unwrap();
        assert_eq!(s.roots, 1);
        assert_eq!(s.marked, kept + 1);
        assert_eq!(
            s.unreachable,
            2 * kept * round + if round > 1 { kept } else { 0 }
        );
        assert_eq!(s.freed, s.unreachable);
        assert_eq!(s.freed_bytes, s.freed * size);
        assert_eq!((s.pending, s.live), (0, kept + 1));
        assert!(s.total > Duration::ZERO);
        assert!(s.mark > Duration::ZERO && s.destroy > Duration::ZERO);
        assert!(s.mark + s.sweep + s.destroy <= s.total, "{s:?}");
        assert_eq!(heap.last_collection(), Some(&s));
        let t = heap.gc_totals();
        assert_eq!(t.collections, round as u64);
        assert_eq!(t.last_freed, s.freed);
        freed_per.push(s.freed);
        all.push(s);
    }
    let t = heap.gc_totals().clone();
    assert_eq!(t.total_freed, freed_per.iter().sum::<usize>() as u64);
    assert_eq!(t.total_freed_bytes, t.total_freed * size as u64);
    assert_eq!(t.total_time, all.iter().map(|s| s.total).sum::<Duration>());
    assert_eq!(t.max_pause, all.iter().map(|s| s.total).max().unwrap());
}

#[test]
fn strong_handles_are_send_and_release_from_another_thread() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<StrongObj<Node>>();
    send_sync::<Obj<Node>>();
    send_sync::<Weak<Node>>();
    send_sync::<AnyObj>();
    send_sync::<Heap>();

    let mut heap = manual();
    let a = node(&heap, 1);
    let s1 = heap.strong(a).unwrap();
    let s2 = s1.clone();
    assert_eq!(heap.strong_count(a), 2);
    let t1 = std::thread::spawn(move || drop(s1));
    t1.join().unwrap();
    assert_eq!(heap.strong_count(a), 1);
    assert_eq!(heap.collect().unwrap().freed, 0);
    std::thread::spawn(move || {
        assert_eq!(s2.obj(), a);
        drop(s2)
    })
    .join()
    .unwrap();
    assert_eq!(heap.strong_count(a), 0);
    let s = heap.collect().unwrap();
    assert_eq!((s.roots, s.freed), (0, 1));
    assert!(heap.get(a).is_none());
}

#[test]
fn a_strong_handle_may_outlive_its_heap() {
    let heap = manual();
    let s = heap.strong(node(&heap, 1)).unwrap();
    drop(heap);
    std::thread::spawn(move || drop(s)).join().unwrap();
}

#[test]
fn a_panicking_post_callback_is_resumed_after_the_books_are_kept() {
    let mut heap = manual();
    let keep = node(&heap, 1);
    heap.add_to_root(keep).unwrap();
    let lost = node(&heap, 2);
    let calls = Arc::new(Mutex::new(0));
    let c = calls.clone();
    heap.on_post_collect(move |_: &CollectStats| {
        *c.lock().unwrap() += 1;
        panic!("post-collect callback failed");
    });
    let c = calls.clone();
    heap.on_post_collect(move |_: &CollectStats| *c.lock().unwrap() += 10);

    let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| heap.collect()))
        .expect_err("the callback's panic is resumed from collect");
    assert_eq!(
        err.downcast_ref::<&str>(),
        Some(&"post-collect callback failed")
    );
    assert_eq!(*calls.lock().unwrap(), 11, "the later callback still ran");
    let t = heap.gc_totals();
    assert_eq!((t.collections, t.last_freed, t.total_freed), (1, 1, 1));
    assert_eq!(heap.last_collection().map(|s| s.freed), Some(1));
    assert!(heap.get(lost).is_none());
    assert_eq!(heap[keep].value, 1);
    let again = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| heap.collect()));
    assert!(again.is_err());
    assert_eq!(heap.gc_totals().collections, 2);
    assert_eq!(
        heap[keep].value, 1,
        "no root lost across panicking collections"
    );
}

#[test]
fn the_object_threshold_ignores_the_disregard_pool() {
    let mut heap = Heap::with_config(HeapConfig {
        disregard_pool_size: 8,
        gc: GcConfig {
            object_threshold: Some(3),
            ..GcConfig::MANUAL
        },
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    heap.open_disregard_for_gc().unwrap();
    for v in 0..5 {
        node(&heap, v);
    }
    heap.close_disregard_for_gc();
    let a = node(&heap, 10);
    heap.add_to_root(a).unwrap();
    node(&heap, 11);
    assert!(
        heap.tick(Duration::from_millis(1)).completed.is_none(),
        "7 objects, but only 2 the collector considers"
    );
    node(&heap, 12);
    let s = heap
        .tick(Duration::from_millis(1))
        .completed
        .expect("3 considered objects");
    assert_eq!(s.trigger, coreobject::Trigger::ObjectCount);
    assert_eq!(s.freed, 2);
    assert!(heap.tick(Duration::from_millis(1)).completed.is_none());
}

/// A mutator that creates garbage much faster than a 100 µs slice can
/// collect: without stretching, the debt rule finishes cycles at once
/// (`forced`); with a generous stretch the slices run longer and no cycle is
/// forced. Each cycle's work (marking 50K objects, sweeping the garbage)
/// takes milliseconds, and creation reaches the debt limit in a few ticks.
#[test]
#[cfg_attr(
    miri,
    ignore = "timed slices: sizes that make them matter are too slow under miri"
)]
fn a_cycle_behind_the_mutator_stretches_its_slices() {
    const LIVE: usize = 50_000;
    const PER_TICK: usize = 10_000;
    let run = |stretch: f64| {
        let mut heap = heap_with(GcConfig {
            incremental: Some(Duration::from_micros(100)),
            incremental_debt: Some(1.0),
            incremental_stretch: stretch,
            object_threshold: Some(LIVE + PER_TICK),
            ..GcConfig::MANUAL
        });
        let root = node(&heap, 0);
        heap.add_to_root(root).unwrap();
        let kids: Vec<_> = (0..LIVE as u32).map(|i| node(&heap, i)).collect();
        heap[root].next = kids;
        let (mut forced, mut completed, mut max_slice) = (0, 0, Duration::ZERO);
        for _ in 0..60 {
            for i in 0..PER_TICK as u32 {
                node(&heap, i); // garbage at once
            }
            if let Some(s) = heap.tick(Duration::from_millis(16)).completed {
                completed += 1;
                forced += usize::from(s.forced);
                max_slice = max_slice.max(s.max_slice);
            }
        }
        assert_eq!(heap[root].next.len(), LIVE);
        assert!(heap.iter_of::<Node>().count() > LIVE);
        (forced, completed, max_slice)
    };
    let (forced, completed, _) = run(1.0);
    assert!(completed >= 2, "{completed} cycles");
    assert!(
        forced >= 1,
        "no stretch: {forced} of {completed} cycles forced"
    );
    let (forced, completed, max_slice) = run(2_000.0);
    assert!(completed >= 2, "{completed} cycles");
    assert_eq!(
        forced, 0,
        "stretched: {forced} of {completed} cycles forced"
    );
    assert!(
        max_slice > Duration::from_micros(200),
        "max slice {max_slice:?}"
    );
}

/// Slices far shorter than the scan of one large object: a slice whose
/// deadline passes hands the objects waiting in its pipeline back to the
/// queue unscanned (and unmarked). The cycle still ends, marks exactly the
/// reachable objects and frees exactly the rest, while the program keeps
/// rewiring the hubs between slices.
#[test]
#[cfg_attr(
    miri,
    ignore = "timed slices: sizes that make them matter are too slow under miri"
)]
fn slices_shorter_than_a_scan_still_mark_exactly() {
    const HUBS: u32 = 40;
    const LEAVES: u32 = 4_000;
    let mut heap = heap_with(GcConfig {
        incremental: Some(Duration::from_micros(10)),
        incremental_stretch: 1.0,
        ..GcConfig::MANUAL
    });
    let root = node(&heap, 0);
    heap.add_to_root(root).unwrap();
    let leaves: Vec<_> = (0..LEAVES).map(|i| node(&heap, i)).collect();
    let hubs: Vec<_> = (0..HUBS).map(|i| node(&heap, i)).collect();
    for (k, &h) in hubs.iter().enumerate() {
        // Each hub lists every leaf but its own stripe's; hub 0 lists all.
        heap[h].next = leaves
            .iter()
            .enumerate()
            .filter(|&(j, _)| k == 0 || j % HUBS as usize != k)
            .map(|(_, &l)| l)
            .collect();
    }
    heap[root].next = hubs.clone();
    let garbage: Vec<_> = (0..500).map(|i| node(&heap, i)).collect();
    heap.gc_config_mut().every_frame = true;
    let mut ticks = 0;
    let stats = loop {
        let t = heap.tick(Duration::from_millis(16));
        heap.gc_config_mut().every_frame = false;
        ticks += 1;
        // The program moves the first leaf reference between hubs 1 and 2
        // (through the write barrier) every slice.
        let (a, b) = (hubs[1 + ticks % 2], hubs[2 - ticks % 2]);
        let x = heap[a].next[0];
        heap[a].next[0] = heap[b].next[0];
        heap[b].next[0] = x;
        if let Some(s) = t.completed {
            break s;
        }
        assert!(ticks < 1_000_000, "the cycle does not end");
    };
    assert!(
        stats.slices > 10,
        "{} slices: too few to test",
        stats.slices
    );
    assert_eq!(stats.freed, garbage.len());
    assert_eq!(stats.marked, 1 + HUBS as usize + LEAVES as usize);
    assert!(garbage.iter().all(|&g| heap.get(g).is_none()));
    assert!(leaves.iter().all(|&l| heap.get(l).is_some()));
}

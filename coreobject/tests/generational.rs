//! Generational collection: minor cycles against hand-built scenarios, one
//! for each way a young object can be reached from an old one, and the
//! policy (triggers, `automatic_majors`, a minor asked for without the
//! remembered set). The randomized oracles are `gc_model.rs` (whole minor
//! cycles, checked exactly) and `incremental.rs` (sliced ones).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use coreobject::{
    AnyObj, CycleKind, GcConfig, Heap, HeapConfig, Obj, Object, Referencer, Trigger, Visitor,
};

mod common;
use common::heap_with;

#[derive(Object, Default)]
struct Node {
    kids: Vec<Obj<Node>>,
    value: u64,
}

#[derive(Object, Default)]
struct Locked {
    kids: parking_lot::Mutex<Vec<Obj<Node>>>,
}

fn manual() -> Heap {
    heap_with(GcConfig::MANUAL)
}

/// A rooted old world of `n` nodes.
fn old_world(heap: &mut Heap, n: usize) -> Obj<Node> {
    // Miri interprets every step: a smaller world shows the same.
    let n = if cfg!(miri) { n.min(150) } else { n };
    let node = |value| Node {
        value,
        ..Node::default()
    };
    let world = common::rooted_world(heap, n, node, |w| &mut w.kids);
    let s = heap.collect().unwrap();
    assert_eq!(s.kind, CycleKind::Major);
    world
}

#[test]
fn a_minor_cycle_marks_only_what_changed() {
    let mut heap = manual();
    let world = old_world(&mut heap, 2_000);
    let old_kid = heap[world].kids[7];
    // A young object stored in an old one, a young one stored in a young
    // one, young garbage, and an old object that drops its last reference
    // (it stays until a major cycle).
    let a = heap.create(Node::default());
    let b = heap.create(Node::default());
    heap[a].kids.push(b);
    heap[old_kid].kids.push(a);
    let lost = heap.create(Node::default());
    let dropped_old = heap[world].kids.pop().unwrap();
    let s = heap.collect_minor().unwrap();
    assert_eq!(s.kind, CycleKind::Minor);
    assert_eq!(s.young, 3);
    assert_eq!(s.remembered, 2, "world and old_kid");
    assert_eq!((s.marked, s.promoted, s.freed), (2, 2, 1));
    assert!(heap.contains(a) && heap.contains(b) && !heap.contains(lost));
    assert!(heap.contains(dropped_old), "old: kept until a major cycle");
    let totals = heap.gc_totals();
    assert_eq!((totals.minor_collections, totals.major_collections), (1, 1));
    // Nothing changed since: the next minor marks nothing at all.
    let s = heap.collect_minor().unwrap();
    assert_eq!((s.young, s.remembered, s.marked, s.freed), (0, 0, 0, 0));
    let s = heap.collect().unwrap();
    assert_eq!(s.freed, 1, "the dropped old object");
    assert!(!heap.contains(dropped_old));
}

#[test]
fn a_minor_cycle_frees_old_objects_marked_as_garbage() {
    let mut heap = manual();
    let world = old_world(&mut heap, 10);
    let g = heap[world].kids[3];
    // Something young that only the garbage object reaches goes with it.
    let only_via_g = heap.create(Node::default());
    heap[g].kids.push(only_via_g);
    heap.mark_as_garbage(g).unwrap();
    let s = heap.collect_minor().unwrap();
    assert_eq!(s.freed, 2);
    assert!(heap.get_even_if_garbage(g).is_none());
    assert!(!heap.contains(only_via_g));
    // Its slot is reused by a young object, which must not look old.
    let fresh = heap.create(Node::default());
    let s = heap.collect_minor().unwrap();
    assert_eq!(s.freed, 1);
    assert!(!heap.contains(fresh));
}

#[test]
fn interior_mutable_old_objects_are_remembered_when_borrowed() {
    let mut heap = manual();
    let bag = heap.spawn(Locked::default()).root().create().unwrap();
    heap.collect().unwrap();
    // Changed through `&Heap` only: no `get_mut`.
    let young = heap.create(Node {
        value: 5,
        ..Node::default()
    });
    heap.get(bag).unwrap().kids.lock().push(young);
    let s = heap.collect_minor().unwrap();
    assert_eq!(s.remembered, 1);
    assert_eq!(heap.get(young).map(|n| n.value), Some(5));
    // And from another thread.
    let other = heap.create(Node {
        value: 6,
        ..Node::default()
    });
    std::thread::scope(|s| {
        s.spawn(|| heap.get(bag).unwrap().kids.lock().push(other));
    });
    heap.collect_minor().unwrap();
    assert_eq!(heap.get(other).map(|n| n.value), Some(6));
}

#[test]
fn old_outers_keep_young_inners_under_the_reverse_rule() {
    let mut heap = heap_with(GcConfig {
        outer_keeps_inners: true,
        ..GcConfig::MANUAL
    });
    let package = heap.spawn(Node::default()).root().create().unwrap();
    heap.collect().unwrap();
    let asset = heap.spawn(Node::default()).outer(package).create().unwrap();
    let loose = heap.create(Node::default());
    let s = heap.collect_minor().unwrap();
    assert!(heap.contains(asset), "kept by its old outer");
    assert!(!heap.contains(loose));
    assert_eq!(s.freed, 1);
}

#[test]
fn pool_objects_are_old_and_their_changes_remembered() {
    let mut heap = Heap::with_config(HeapConfig {
        disregard_pool_size: 8,
        gc: GcConfig::MANUAL,
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    heap.open_disregard_for_gc().unwrap();
    let early = heap.create(Node::default());
    let asset = heap.create(Node::default());
    heap.close_disregard_for_gc();
    // The first minor cycle finds the new pool objects young and scans them.
    let target = heap.create(Node {
        value: 9,
        ..Node::default()
    });
    heap[early].kids.push(target);
    heap.collect_minor().unwrap();
    assert!(heap.contains(target));
    heap.collect().unwrap();
    let young = heap.create(Node::default());
    heap[asset].kids.push(young);
    let s = heap.collect_minor().unwrap();
    assert_eq!(s.remembered, 1);
    assert!(heap.contains(young) && heap.contains(target));
}

#[test]
fn roots_strong_handles_and_referencers_reach_young_objects() {
    struct Held(Mutex<Vec<AnyObj>>);
    impl Referencer for Held {
        fn add_referenced_objects(&self, v: &mut dyn Visitor) {
            self.0.lock().unwrap().iter().for_each(|h| v.visit(*h));
        }
    }
    let mut heap = manual();
    old_world(&mut heap, 100);
    let held = Arc::new(Held(Mutex::new(Vec::new())));
    heap.add_referencer(held.clone());
    let rooted = heap.spawn(Node::default()).root().create().unwrap();
    let strong_target = heap.create(Node::default());
    let strong = heap.strong(strong_target).unwrap();
    let reported = heap.create(Node::default());
    held.0.lock().unwrap().push(reported.any());
    let lost = heap.create(Node::default());
    let s = heap.collect_minor().unwrap();
    assert_eq!(s.freed, 1);
    assert!(heap.contains(rooted) && heap.contains(strong_target) && heap.contains(reported));
    assert!(!heap.contains(lost));
    drop(strong);
    held.0.lock().unwrap().clear();
    heap.remove_from_root(rooted).unwrap();
    // They are old now: a minor keeps them, a major frees them.
    assert_eq!(heap.collect_minor().unwrap().freed, 0);
    assert_eq!(heap.collect().unwrap().freed, 3);
}

#[test]
fn objects_created_during_a_sliced_cycle_are_kept_and_later_considered() {
    let mut heap = manual();
    let world = old_world(&mut heap, 3_000);
    let _ = heap.step(64); // a major cycle in flight
    let during = heap.create(Node::default());
    heap[world].kids.push(during);
    let orphan = heap.create(Node::default());
    while heap.step(64).completed.is_none() {}
    assert!(heap.contains(during) && heap.contains(orphan), "born black");
    heap.collect_minor().unwrap();
    assert!(heap.contains(during));
    heap.collect().unwrap();
    assert!(heap.contains(during) && !heap.contains(orphan));
}

#[test]
fn without_the_remembered_set_a_minor_runs_as_a_major() {
    let mut heap = heap_with(GcConfig {
        generational: false,
        ..GcConfig::MANUAL
    });
    let world = old_world(&mut heap, 10);
    heap[world].kids.clear();
    let s = heap.collect_minor().unwrap();
    assert_eq!((s.kind, s.freed), (CycleKind::Major, 10));
    // Turned on, it takes effect once a cycle completes.
    heap.gc_config_mut().generational = true;
    let s = heap.collect_minor().unwrap();
    assert_eq!(s.kind, CycleKind::Major);
    let s = heap.collect_minor().unwrap();
    assert_eq!(s.kind, CycleKind::Minor);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "policy: when cycles start and of which kind, in safe code; the creation and collection paths it reaches run under miri in the other tests"
)]
fn tick_runs_minors_on_the_young_threshold_and_majors_on_the_others() {
    let mut heap = heap_with(GcConfig {
        young_threshold: Some(500),
        object_threshold: Some(20_000),
        ..GcConfig::MANUAL
    });
    let world = old_world(&mut heap, 1_000);
    let base = heap[world].kids.len();
    let mut minors = 0;
    let frames = if cfg!(miri) { 20 } else { 200 };
    for frame in 0..frames {
        for i in 0..100u64 {
            let n = heap.create(Node {
                value: i,
                ..Node::default()
            });
            if i % 10 == 0 {
                heap[world].kids.push(n); // survives
            }
        }
        heap[world].value = frame;
        if let Some(s) = heap.tick(Duration::from_millis(16)).completed {
            match s.kind {
                CycleKind::Minor => {
                    assert_eq!(s.trigger, Trigger::Young);
                    minors += 1;
                }
                CycleKind::Major => {}
            }
        }
    }
    assert!(minors >= frames / 7, "{minors} minor cycles");
    assert_eq!(heap[world].kids.len(), base + frames as usize * 10);
    // Forbid automatic majors: only minors run, however much is allocated.
    heap.gc_config_mut().automatic_majors = false;
    heap.gc_config_mut().object_threshold = Some(1);
    let before = heap.gc_totals().major_collections;
    for _ in 0..if cfg!(miri) { 3 } else { 20 } {
        for _ in 0..if cfg!(miri) { 300 } else { 600 } {
            heap.create(Node::default());
        }
        heap.tick(Duration::from_millis(16));
    }
    assert_eq!(heap.gc_totals().major_collections, before);
}

/// Before any major cycle nothing is old: the young threshold's first cycle
/// is a major one. And the interval counts from the last major cycle, so
/// minor ones do not put it off.
#[test]
#[cfg_attr(
    miri,
    ignore = "policy: when cycles start and of which kind, in safe code; the creation and collection paths it reaches run under miri in the other tests"
)]
fn the_first_cycle_is_major_and_minors_do_not_reset_the_interval() {
    let mut heap = heap_with(GcConfig {
        young_threshold: Some(100),
        interval: Some(Duration::from_millis(100)),
        ..GcConfig::MANUAL
    });
    let mut kinds = Vec::new();
    for _ in 0..12 {
        for _ in 0..150 {
            heap.create(Node::default());
        }
        if let Some(s) = heap.tick(Duration::from_millis(16)).completed {
            kinds.push((s.kind, s.trigger));
        }
    }
    assert_eq!(kinds[0], (CycleKind::Major, Trigger::Young), "{kinds:?}");
    assert!(
        kinds.contains(&(CycleKind::Minor, Trigger::Young)),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&(CycleKind::Major, Trigger::Interval)),
        "minors every tick must not put off the interval: {kinds:?}"
    );
}

/// With minor cycles on the young threshold, growth watches the old
/// generation: young garbage, however much, starts minors; a major comes
/// when what survives has doubled since the last major cycle.
#[test]
#[cfg_attr(
    miri,
    ignore = "60,000 objects for a policy: the table holds 4,096 under miri"
)]
fn growth_watches_the_old_generation_when_minors_run() {
    let mut heap = heap_with(GcConfig {
        // Above what doubling the old generation would allow: counted over
        // every object, growth would start majors before it is reached.
        young_threshold: Some(6_000),
        growth: Some(2.0),
        growth_floor: 0,
        ..GcConfig::MANUAL
    });
    let world = old_world(&mut heap, 5_000);
    let mut kinds = Vec::new();
    for frame in 0..60 {
        for i in 0..1_000 {
            let n = heap.create(Node::default());
            // From frame 30 on, a tenth of what is created survives.
            if frame >= 30 && i % 10 == 0 {
                heap[world].kids.push(n);
            }
        }
        if let Some(s) = heap.tick(Duration::from_millis(16)).completed {
            kinds.push((frame, s.kind, s.trigger));
        }
    }
    let minors_early = kinds
        .iter()
        .filter(|k| k.0 < 30 && k.1 == CycleKind::Minor)
        .count();
    assert!(minors_early >= 3, "{kinds:?}");
    assert!(
        kinds.iter().all(|k| k.0 >= 30 || k.1 == CycleKind::Minor),
        "young garbage alone starts no major: {kinds:?}"
    );
    let _ = world;
}

/// Runs a major cycle in explicit slices of 64 work units, creating `per`
/// unreachable objects between two slices (born during the cycle: they
/// survive it). Returns the cycle's stats.
fn major_with_births(heap: &mut Heap, per: usize) -> coreobject::CollectStats {
    loop {
        let t = heap.step(64);
        if let Some(s) = t.completed {
            assert_eq!(s.kind, CycleKind::Major);
            return s;
        }
        for _ in 0..per {
            heap.create(Node::default());
        }
    }
}

/// Ticks (16 ms each), creating `per` unreachable objects before each,
/// until a cycle starts; returns the objects allocated when it started
/// (the pool holds none here) and its trigger.
fn objects_when_a_cycle_starts(heap: &mut Heap, per: usize) -> (usize, Trigger) {
    for _ in 0..100_000 {
        for _ in 0..per {
            heap.create(Node::default());
        }
        let before = heap.len();
        let t = heap.tick(Duration::from_millis(16));
        if let Some(trigger) = t.started {
            return (before, trigger);
        }
    }
    panic!("no cycle started");
}

/// The growth trigger's goal is twice what the last major cycle found
/// alive, not twice what was allocated when it ended: the objects created
/// while a cycle runs in slices survive it whatever they are, and a goal
/// that counted them grew by them at every major cycle (the demo at 300K:
/// 1.11M objects allocated at its peak, 2.4x the stop-the-world mode's).
/// Checked without minor cycles (every object counts) and with them (the
/// old generation counts, less what was created during the last cycle).
#[test]
#[cfg_attr(
    miri,
    ignore = "tens of thousands of objects for a policy: the table holds 4,096 under miri"
)]
fn the_growth_goal_is_twice_what_the_last_major_cycle_marked() {
    for generational in [false, true] {
        let mut heap = heap_with(GcConfig {
            generational,
            // Minor cycles on (the old generation counts), but none due.
            young_threshold: generational.then_some(usize::MAX / 2),
            growth: Some(2.0),
            growth_floor: 0,
            ..GcConfig::MANUAL
        });
        let world = old_world(&mut heap, 2_000);
        let s = major_with_births(&mut heap, 200);
        let live = 2_001;
        assert!(s.born >= 2_000, "the cycle ran in slices: {s:?}");
        assert!(s.marked <= live + s.born, "{s:?}");
        // Without minors, growth counts every object: due at twice the
        // live heap, so at the first tick (4,000 more objects would be
        // needed against the count after the cycle).
        // With minors, it counts the old generation: what was created
        // during the cycle is young, and the first minor cycle finds it
        // dead, so the old generation is the live heap and a major is due
        // only when that doubles.
        if generational {
            let m = heap.collect_minor().unwrap();
            assert_eq!(m.kind, CycleKind::Minor);
            assert_eq!(heap.len(), live);
            // Old objects dying and kept old: stored in the world until a
            // minor cycle promotes them, then dropped.
            let mut kept = 0;
            let trigger = loop {
                for _ in 0..100 {
                    let n = heap.create(Node::default());
                    heap[world].kids.push(n);
                }
                kept += 100;
                let t = heap.collect_minor().unwrap();
                assert_eq!(t.kind, CycleKind::Minor);
                heap[world].kids.truncate(2_000);
                let t = heap.tick(Duration::from_millis(16));
                if let Some(trigger) = t.started {
                    break trigger;
                }
                assert!(kept < 10 * live, "no major cycle");
            };
            assert_eq!(trigger, Trigger::Growth);
            // Due when the old generation (the live heap and the kept
            // ones, promoted) reached twice what the major marked: within
            // one step of 100 of it, not twice the count after it.
            let goal = 2 * s.marked.min(live + s.born);
            assert!(
                live + kept >= goal && live + kept < goal + 100,
                "major due with {kept} promoted on {live} live; goal {goal} ({s:?})"
            );
        } else {
            let (at, trigger) = objects_when_a_cycle_starts(&mut heap, 100);
            assert_eq!(trigger, Trigger::Growth);
            let goal = 2 * s.marked.min(live + s.born);
            assert!(
                at >= goal && at <= goal.max(live + s.born) + 100,
                "due at {at} objects; goal {goal} ({s:?})"
            );
            assert!(
                at < 2 * (live + s.born),
                "due at {at}: twice the objects allocated after the cycle ({}), not the live heap ({s:?})",
                live + s.born
            );
        }
    }
}

/// Timed cycles are paced (Go's pacer): a major cycle run in slices lets
/// the program create objects until it ends, so the growth trigger starts
/// the next one before the heap reaches its goal, by what the last one let
/// the program create; and, with minor cycles, not before one has run
/// since the last major cycle (it frees the young garbage for less).
#[test]
#[cfg_attr(
    miri,
    ignore = "tens of thousands of objects for a policy: the table holds 4,096 under miri"
)]
fn a_timed_major_cycle_starts_early_enough_to_end_at_its_goal() {
    let timed = |growth| {
        heap_with(GcConfig {
            // Timed (a deadline no tick reaches here: each runs a whole cycle).
            incremental: Some(Duration::from_secs(3_600)),
            young_threshold: Some(usize::MAX / 2),
            growth: Some(growth),
            growth_floor: 0,
            // The major cycle below is not finished at once however much
            // the program creates during it.
            incremental_debt: None,
            ..GcConfig::MANUAL
        })
    };
    // per: objects created between two slices of 64 units of the major.
    let run = |heap: &mut Heap, growth: f64, per: usize| {
        let _world = old_world(heap, 16_000);
        let live = 16_001;
        for _ in 0..16_000 {
            heap.create(Node::default()); // garbage: the cycle frees some
        }
        // A major cycle in slices while the program creates objects: what
        // it let the program create is the lead the next one is given.
        let s = major_with_births(heap, per);
        assert_eq!(s.freed, 16_000, "{s:?}");
        let goal = (s.marked.min(live + s.born) as f64 * growth) as usize;
        // No minor cycle has run since the major one: no major is due,
        // whatever the heap holds.
        let t = heap.tick(Duration::from_millis(16));
        assert_eq!(t.started, None, "a major right after a major one");
        let m = heap.collect_minor().unwrap();
        assert_eq!(heap.len(), live, "{m:?}");
        // Ticks, 100 new objects before each, until a cycle starts or the
        // heap is 4,000 objects past the goal.
        let mut started = None;
        while started.is_none() && heap.len() < goal + 4_000 {
            for _ in 0..100 {
                heap.create(Node::default());
            }
            let before = heap.len();
            started = heap
                .tick(Duration::from_millis(16))
                .started
                .map(|t| (before, t));
        }
        (started, goal, s.born)
    };
    // About 12,000 objects created during a cycle of about 1,000 slices,
    // the goal twice the live heap: a lead well short of the runway
    // (16,000; the lead was 7,000-9,000 where the major started, in six runs).
    let (started, goal, born) = run(&mut timed(2.0), 2.0, 12);
    assert!(born >= 2_000, "{born}");
    let (at, trigger) = started.expect("a major cycle");
    assert_eq!(trigger, Trigger::Growth);
    assert!(
        at + 1_000 <= goal,
        "a paced major starts before the heap reaches its goal ({at} objects, goal {goal}, {born} created during the last major)"
    );
    // Ten times as many (40 a slice: the cycle's last step, which looks at
    // what was created during it, gains 24 a slice), the goal a quarter
    // above the live heap: a lead past the runway (4,000; the lead is
    // ten times the first case's here), the collector behind the program. Starting at
    // once would not end the cycle by the goal; the old generation decides
    // (here it never grows: young garbage does).
    let (started, goal, born) = run(&mut timed(1.25), 1.25, 40);
    assert!(born >= 40_000, "{born}");
    assert_eq!(
        started, None,
        "behind the program, no early start (goal {goal}, {born} created during the last major)"
    );
}

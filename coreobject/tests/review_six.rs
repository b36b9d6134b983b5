//! Review of main since 96c65fb (review 6): restores at every point of a
//! cycle (the settle step's `revived`), restored objects under the same or
//! another outer (`filed_elsewhere`), outer chains through a restored
//! handle, loads during a cycle and the handles around a restored serial.
//! `review_five.rs` pins the restore losses it found; these tests sweep the
//! points a restore can happen at instead of one of them.

use std::cell::Cell;
use std::sync::Mutex;

use coreobject::{AnyObj, CycleKind, GcConfig, Heap, HeapConfig, Obj, Object, Phase};

mod common;
use common::{step, Rng};

#[derive(Object, Default)]
struct Node {
    id: u64,
    kids: Vec<AnyObj>,
}

/// Interior-mutable: its handles change through `&Heap` (the read barrier).
#[derive(Object, Default)]
struct Bag {
    kids: Mutex<Vec<AnyObj>>,
}

fn node(id: u64) -> Node {
    Node {
        id,
        kids: Vec::new(),
    }
}

fn heap_with(threads: usize, inners: bool) -> Heap {
    Heap::with_config(HeapConfig {
        gc: GcConfig {
            threads,
            parallel_threshold: 0,
            outer_keeps_inners: inners,
            ..GcConfig::MANUAL
        },
        ..HeapConfig::DEFAULT
    })
    .unwrap()
}

fn finish(heap: &mut Heap, kind: CycleKind) {
    while heap.gc_phase() != Phase::Idle {
        step(heap, kind, 1_000);
    }
}

const CHAIN: u64 = if cfg!(miri) { 20 } else { 200 };

/// Gives `anchor` a chain of new objects, so that a cycle takes many
/// slices, then starts a cycle of `kind` and runs `slices` slices of 3
/// units. `false` if the cycle completed before.
fn begin_and_run(heap: &mut Heap, kind: CycleKind, anchor: Obj<Node>, slices: usize) -> bool {
    let mut prev = anchor;
    for i in 0..CHAIN {
        let o = heap.create(node(10_000 + i));
        heap[prev].kids.push(o.any());
        prev = o;
    }
    let t = step(heap, kind, 3);
    assert!(t.started.is_some());
    for _ in 0..slices {
        if heap.gc_phase() == Phase::Idle {
            return false;
        }
        step(heap, kind, 3);
    }
    heap.gc_phase() != Phase::Idle
}

/// Freed objects whose slots are not handed out again soon (below the high
/// water): created, then marked as garbage and collected, while `root`
/// holds a handle to each (stale from then on: no barrier sees it name the
/// slot again after a restore).
fn freed_below(heap: &mut Heap, root: Obj<Node>, n: usize) -> Vec<AnyObj> {
    let gone: Vec<AnyObj> = (0..n).map(|i| heap.create(node(i as u64)).any()).collect();
    heap[root].kids.extend(gone.iter().copied());
    for &g in &gone {
        heap.mark_as_garbage(g).unwrap();
    }
    heap.collect().unwrap();
    for &g in &gone {
        assert!(!heap.contains(g));
    }
    gone
}

/// How many freed slots a test keeps to restore into: more than a cycle's
/// creations (`CHAIN`, `litter`) take back.
const SPARE: usize = if cfg!(miri) { 80 } else { 800 };

/// `make` for each of `candidates` in turn until one's slot is free (not
/// handed out again since): its result.
fn restore_first<R>(
    heap: &mut Heap,
    candidates: &[AnyObj],
    mut make: impl FnMut(&mut Heap, AnyObj) -> Result<R, coreobject::Error>,
) -> R {
    for &g in candidates {
        match make(heap, g) {
            Ok(r) => return r,
            Err(coreobject::Error::IndexTaken(_)) => {}
            Err(e) => panic!("restore of {g:?} refused: {e:?}"),
        }
    }
    panic!("no free slot among {} candidates", candidates.len());
}

/// How a restored object is named by a reachable holder.
#[derive(Clone, Copy, Debug)]
enum Holder {
    /// A handle kept in an old object from before the restore (stale until
    /// the restore: no barrier sees it).
    Stale,
    /// Pushed through `get_mut` after the restore (the write barrier).
    Written,
    /// Pushed into a `Bag` through `&Heap` on another thread (the read
    /// barrier).
    Shared,
}

/// A restore at every slice of a major and a minor cycle (marking below and
/// above the high water, the settle step, the purge), on one and two
/// marking threads, named by each kind of holder, holding an object created
/// during the cycle through `&mut Heap` and one created through `&Heap` on
/// another thread; the cycle finished by slices or by a forced `collect()`.
/// While named, the restored object and both it holds survive the next
/// minor and major cycles; cut, they are gone after the next major one.
#[test]
fn restores_at_every_slice_keep_what_they_hold() {
    let mut lost = Vec::new();
    let mut kept = Vec::new();
    let mut points = 0;
    let mut combo = 0;
    let mut phases = [0usize; 3];
    let max_slices = if cfg!(miri) { 6 } else { 400 };
    // Every `STRIDE`th slice, from an offset that differs per combination:
    // together they cover every slice (the settle step's too).
    const STRIDE: usize = if cfg!(miri) { 3 } else { 9 };
    for threads in [1, 2] {
        for kind in [CycleKind::Major, CycleKind::Minor] {
            for holder in [Holder::Stale, Holder::Written, Holder::Shared] {
                for forced in [false, true] {
                    for above in [false, true] {
                        combo += 1;
                        let mut slices = combo % STRIDE;
                        while slices < max_slices {
                            let ctx = format!(
                                "threads {threads}, {kind:?}, {holder:?}, forced {forced}, above {above}, slice {slices}"
                            );
                            let Some((phase, outcome)) =
                                restore_at(threads, kind, holder, forced, above, slices)
                            else {
                                break;
                            };
                            phases[phase as usize] += 1;
                            match outcome {
                                Outcome::Ok => {}
                                Outcome::Lost(what) => lost.push(format!("{ctx}: {what}")),
                                Outcome::Kept(what) => kept.push(format!("{ctx}: {what}")),
                            }
                            points += 1;
                            slices += STRIDE;
                        }
                    }
                }
            }
        }
    }
    eprintln!("{points} restore points (idle, mark, purge): {phases:?}");
    assert!(
        phases[1] > 0 && phases[2] > 0,
        "restores while marking and purging: {phases:?}"
    );
    assert!(
        lost.is_empty(),
        "{} lost, first: {:#?}",
        lost.len(),
        &lost[..lost.len().min(8)]
    );
    assert!(
        kept.is_empty(),
        "{} kept, first: {:#?}",
        kept.len(),
        &kept[..kept.len().min(8)]
    );
}

enum Outcome {
    Ok,
    Lost(String),
    Kept(String),
}

fn restore_at(
    threads: usize,
    kind: CycleKind,
    holder: Holder,
    forced: bool,
    above: bool,
    slices: usize,
) -> Option<(Phase, Outcome)> {
    let mut heap = heap_with(threads, false);
    let root = heap.spawn(node(0)).root().create().unwrap();
    let bag = heap.spawn(Bag::default()).root().create().unwrap();
    let gone = freed_below(&mut heap, root, SPARE);
    // A handle to a slot far above anything handed out, held by `root`.
    let far = AnyObj::from_bits(50_000 | (root.serial() as u64) << 32).unwrap();
    if above {
        heap[root].kids.push(far);
    }
    if matches!(holder, Holder::Stale) {
        // Both kinds of stale handle stay in `root`; only the restored one
        // is reachable through it.
    } else {
        heap[root].kids.clear();
    }
    // An old object, cut from `bag` just before the restore holds it.
    let q = heap.create(node(4)).any();
    heap[bag].kids.lock().unwrap().push(q);
    heap.collect().unwrap();
    if !begin_and_run(&mut heap, kind, root, slices) {
        return None;
    }
    let phase = heap.gc_phase();
    heap[bag].kids.lock().unwrap().clear();
    let y = heap.create(node(1)).any();
    let z = std::thread::scope(|s| {
        let heap = &heap;
        s.spawn(move || heap.create(node(2)).any()).join().unwrap()
    });
    let n = || Node {
        id: 9,
        kids: vec![y, z, q],
    };
    let r = if above {
        heap.spawn_at(far.index(), far.serial(), n())
            .create()
            .unwrap()
            .any()
    } else {
        restore_first(&mut heap, &gone, |heap, g| {
            heap.spawn_at(g.index(), g.serial(), n())
                .create()
                .map(|r| r.any())
        })
    };
    match holder {
        Holder::Stale => {}
        Holder::Written => heap[root].kids.push(r),
        Holder::Shared => std::thread::scope(|s| {
            let heap = &heap;
            s.spawn(move || heap[bag].kids.lock().unwrap().push(r))
                .join()
                .unwrap();
        }),
    }
    if forced {
        heap.collect().unwrap();
    } else {
        finish(&mut heap, kind);
    }
    for (i, c) in ["minor", "minor", "major", "minor"].into_iter().enumerate() {
        match c {
            "minor" => heap.collect_minor().unwrap(),
            _ => heap.collect().unwrap(),
        };
        for (what, h) in [
            ("restored", r),
            ("held (&mut)", y),
            ("held (&Heap)", z),
            ("held (old)", q),
        ] {
            if !heap.contains(h) {
                return Some((
                    phase,
                    Outcome::Lost(format!("{what} after cycle {i} ({c})")),
                ));
            }
        }
    }
    // Cut: gone with the next major cycle.
    heap[root].kids.retain(|&k| k != r);
    heap[bag].kids.lock().unwrap().clear();
    heap.collect().unwrap();
    for (what, h) in [
        ("restored", r),
        ("held (&mut)", y),
        ("held (&Heap)", z),
        ("held (old)", q),
    ] {
        if heap.contains(h) {
            return Some((
                phase,
                Outcome::Kept(format!("{what} after the cut and a major")),
            ));
        }
    }
    Some((phase, Outcome::Ok))
}

/// A restore named by nothing, at every slice of a major and a minor
/// cycle: it is garbage from the start, so it may survive the cycle in
/// flight (allocation is black) and the next minor one (`revived`), which
/// marks it and so makes it old; the next major cycle frees it.
#[test]
fn an_unnamed_restore_is_gone_after_the_next_major() {
    let mut kept = Vec::new();
    let mut survived_minors = [0usize; 3];
    let max_slices = if cfg!(miri) { 6 } else { 400 };
    for kind in [CycleKind::Major, CycleKind::Minor] {
        for slices in 0..max_slices {
            let mut heap = heap_with(1, false);
            let root = heap.spawn(node(0)).root().create().unwrap();
            let gone = freed_below(&mut heap, root, SPARE);
            heap[root].kids.clear();
            if !begin_and_run(&mut heap, kind, root, slices) {
                break;
            }
            let y = heap.create(node(1)).any();
            let r = restore_first(&mut heap, &gone, |heap, g| {
                let n = Node {
                    id: 9,
                    kids: vec![y],
                };
                heap.spawn_at(g.index(), g.serial(), n)
                    .create()
                    .map(|r| r.any())
            });
            let plain = heap.create(node(3)).any();
            finish(&mut heap, kind);
            let mut minors = 0;
            while minors < 2 && heap.contains(r) {
                heap.collect_minor().unwrap();
                if heap.contains(r) {
                    minors += 1;
                }
            }
            survived_minors[minors] += 1;
            assert!(
                !heap.contains(plain),
                "{kind:?} slice {slices}: a plain object outlived a minor cycle"
            );
            heap.collect().unwrap();
            if heap.contains(r) || heap.contains(y) {
                kept.push((kind, slices));
            }
        }
    }
    eprintln!("minor cycles an unnamed restore survived (0, 1, 2+): {survived_minors:?}");
    assert!(kept.is_empty(), "kept after a major: {kept:?}");
}

// ---------------------------------------------------------------------------
// Outers and inners.

/// What `for_each_with_outer` lists under `outer`, less the `Bag`s (the
/// live inners `inners_of` adds).
fn listed(heap: &Heap, outer: AnyObj) -> Vec<AnyObj> {
    let mut seen = Vec::new();
    heap.for_each_with_outer(outer, |o| seen.push(o.id()));
    seen.retain(|&h| heap.downcast::<Bag>(h).is_none());
    seen
}

/// When in a cycle the restore happens.
#[derive(Clone, Copy, Debug)]
enum When {
    Idle,
    Marking,
    Purging,
}

fn enter(heap: &mut Heap, kind: CycleKind, anchor: Obj<Node>, when: When) {
    match when {
        When::Idle => {}
        When::Marking => assert!(begin_and_run(heap, kind, anchor, 1)),
        When::Purging => {
            assert!(begin_and_run(heap, kind, anchor, 0));
            while heap.gc_phase() == Phase::Mark {
                step(heap, kind, 3);
            }
            assert_eq!(heap.gc_phase(), Phase::Purge, "{kind:?}: no sliced purge");
        }
    }
}

/// Unreachable garbage, so that a purge has something to do in slices.
fn litter(heap: &mut Heap) {
    for i in 0..if cfg!(miri) { 30 } else { 300 } {
        heap.create(node(20_000 + i));
    }
}

/// `SPARE` inners of `o` (rooted), kept by it, then marked as garbage and
/// freed: `o`'s entry keeps their stale handles (it is compacted once half
/// of it is stale, so `o` keeps more live inners, `Bag`s, besides).
fn inners_of(heap: &mut Heap, o: Obj<Node>) -> Vec<AnyObj> {
    for _ in 0..SPARE + 2 {
        heap.spawn(Bag::default()).outer(o).create().unwrap();
    }
    let a: Vec<AnyObj> = (0..SPARE)
        .map(|i| heap.spawn(node(i as u64)).outer(o).create().unwrap().any())
        .collect();
    heap.collect().unwrap();
    assert!(heap.contains(a[0]), "kept by its outer");
    for &h in &a {
        heap.mark_as_garbage(h).unwrap();
    }
    heap.collect().unwrap();
    assert!(!heap.contains(a[0]));
    a
}

/// An inner `a` of a rooted outer `o` is freed (marked as garbage); `o`'s
/// entry keeps `a`'s stale handle. `a` is restored at its serial with
/// `.outer(o)` again, at each point of a cycle: both the stale and the new
/// entry name it. It is listed once under `o`, kept by `o` alone under
/// `outer_keeps_inners` (one and two marking threads, minor and major
/// cycles), and freed with `o` once `o` is unrooted.
#[test]
fn a_restore_under_the_same_outer_is_listed_once_and_kept() {
    let mut bad = Vec::new();
    for threads in [1, 2] {
        for kind in [CycleKind::Major, CycleKind::Minor] {
            for when in [When::Idle, When::Marking, When::Purging] {
                let mut heap = heap_with(threads, true);
                let o = heap.spawn(node(0)).root().create().unwrap();
                let a = inners_of(&mut heap, o);
                litter(&mut heap);
                enter(&mut heap, kind, o, when);
                let y = heap.create(node(2)).any();
                let r = restore_first(&mut heap, &a, |heap, g| {
                    let n = Node {
                        id: 3,
                        kids: vec![y],
                    };
                    heap.spawn_at(g.index(), g.serial(), n).outer(o).create()
                });
                let ctx = format!("threads {threads}, {kind:?}, {when:?}");
                if listed(&heap, o.any()) != [r.any()] {
                    bad.push(format!("{ctx}: listed {:?}", listed(&heap, o.any())));
                }
                finish(&mut heap, kind);
                for c in 0..4 {
                    if c % 2 == 0 {
                        heap.collect_minor().unwrap();
                    } else {
                        heap.collect().unwrap();
                    }
                    if !heap.contains(r) || !heap.contains(y) {
                        bad.push(format!("{ctx}: lost after cycle {c}"));
                        break;
                    }
                }
                if listed(&heap, o.any()) != [r.any()] {
                    bad.push(format!("{ctx}: listed after {:?}", listed(&heap, o.any())));
                }
                heap.remove_from_root(o).unwrap();
                heap.collect().unwrap();
                if heap.contains(o) || heap.contains(r) || heap.contains(y) {
                    bad.push(format!("{ctx}: kept after its outer was unrooted"));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// `a`, an inner of `o`, freed; restored under another outer `x` (both
/// rooted), then moved back under `o` with `rename`: listed once under `o`,
/// not under `x`; kept by `o`; `x` keeps it no more (unrooting `o` frees
/// it while `x` stays rooted). Then moved to `x` again: kept by `x`, and
/// `o`'s two entries (stale and moved back) keep it no more.
#[test]
fn a_restore_under_another_outer_renamed_back() {
    let mut bad = Vec::new();
    for threads in [1, 2] {
        for kind in [CycleKind::Major, CycleKind::Minor] {
            for when in [When::Idle, When::Marking, When::Purging] {
                for back_and_forth in [false, true] {
                    let ctx =
                        format!("threads {threads}, {kind:?}, {when:?}, twice {back_and_forth}");
                    let mut heap = heap_with(threads, true);
                    let o = heap.spawn(node(0)).root().create().unwrap();
                    let x = heap.spawn(node(5)).root().create().unwrap();
                    let a = inners_of(&mut heap, o);
                    litter(&mut heap);
                    enter(&mut heap, kind, o, when);
                    let r = restore_first(&mut heap, &a, |heap, g| {
                        heap.spawn_at(g.index(), g.serial(), node(3))
                            .outer(x)
                            .create()
                    });
                    if listed(&heap, o.any()) != [] as [AnyObj; 0]
                        || listed(&heap, x.any()) != [r.any()]
                    {
                        bad.push(format!(
                            "{ctx}: restored: under o {:?}, x {:?}",
                            listed(&heap, o.any()),
                            listed(&heap, x.any())
                        ));
                    }
                    heap.rename(r).outer(o).apply().unwrap();
                    if back_and_forth {
                        heap.rename(r).outer(x).apply().unwrap();
                    }
                    let (home, other) = if back_and_forth { (x, o) } else { (o, x) };
                    if listed(&heap, home.any()) != [r.any()]
                        || !listed(&heap, other.any()).is_empty()
                    {
                        bad.push(format!(
                            "{ctx}: moved: home {:?}, other {:?}",
                            listed(&heap, home.any()),
                            listed(&heap, other.any())
                        ));
                    }
                    finish(&mut heap, kind);
                    heap.collect_minor().unwrap();
                    heap.collect().unwrap();
                    heap.collect_minor().unwrap();
                    if !heap.contains(r) {
                        bad.push(format!("{ctx}: lost while its outer is rooted"));
                        continue;
                    }
                    heap.remove_from_root(home).unwrap();
                    heap.collect().unwrap();
                    if heap.contains(r) {
                        bad.push(format!("{ctx}: kept by its former outer"));
                    }
                    if !heap.contains(other) {
                        bad.push(format!("{ctx}: the rooted other outer freed"));
                    }
                }
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// A chain `top ← mid ← low` (each the outer of the next); `mid` is marked
/// as garbage and freed while `low` survives (rooted): `outer_of(low)` is
/// `None`. `mid` restored at its serial under `top` again: its header names
/// `top`, and `low`'s names `mid` again. What `outer_of` answers and what
/// `for_each_with_outer` lists must agree, and under `outer_keeps_inners`
/// (an outer keeps its inners) `low`, unrooted, must live as long as
/// `outer_of(low)` names the live, reachable `mid`.
#[test]
fn a_restore_in_the_middle_of_an_outer_chain() {
    let mut bad = Vec::new();
    for threads in [1, 2] {
        for when in [When::Idle, When::Marking] {
            let ctx = format!("threads {threads}, {when:?}");
            let mut heap = heap_with(threads, true);
            let top = heap.spawn(node(0)).root().create().unwrap();
            let mut lows = std::collections::BTreeMap::new();
            let mids: Vec<AnyObj> = (0..SPARE)
                .map(|i| {
                    let mid = heap.spawn(node(1)).outer(top).create().unwrap();
                    let low = heap
                        .spawn(node(i as u64))
                        .outer(mid)
                        .root()
                        .create()
                        .unwrap();
                    lows.insert(mid.any(), low);
                    mid.any()
                })
                .collect();
            for &mid in &mids {
                heap.mark_as_garbage(mid).unwrap();
            }
            heap.collect().unwrap();
            assert!(!heap.contains(mids[0]) && heap.contains(lows[&mids[0]]));
            assert_eq!(heap.outer_of(lows[&mids[0]]), None);
            enter(&mut heap, CycleKind::Major, top, when);
            let r = restore_first(&mut heap, &mids, |heap, g| {
                heap.spawn_at(g.index(), g.serial(), node(3))
                    .outer(top)
                    .create()
            });
            let low = lows[&r.any()];
            finish(&mut heap, CycleKind::Major);
            let says = heap.outer_of(low);
            let lists = listed(&heap, r.any()).contains(&low.any());
            if says == Some(r.any()) && !lists {
                bad.push(format!("{ctx}: outer_of(low) = mid, not listed under mid"));
            }
            heap.remove_from_root(low).unwrap();
            heap.collect().unwrap();
            heap.collect().unwrap();
            if says == Some(r.any()) && heap.contains(r) && !heap.contains(low) {
                bad.push(format!(
                    "{ctx}: low freed while outer_of named the reachable mid"
                ));
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

// ---------------------------------------------------------------------------
// A cycle abandoned by a panicking `Trace`, then a restore.

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
}

#[derive(Default)]
struct Bomb;

impl coreobject::Trace for Bomb {
    const KIND: coreobject::RefKind = coreobject::RefKind::Strong;
    fn trace<V: coreobject::Visitor + ?Sized>(&self, _v: &mut V) {
        if ARMED.with(|a| a.get()) {
            panic!("review6 bomb");
        }
    }
}

#[derive(Object, Default)]
struct Boom {
    bomb: Bomb,
    n: u64,
}

/// A cycle abandoned by a panic in `Trace` (one marking thread), a restore
/// holding a new object before the next cycle, then minor and major
/// cycles: kept while named, freed after a cut and a major cycle.
#[test]
fn a_restore_between_an_abandoned_cycle_and_the_next() {
    let mut bad = Vec::new();
    for kind in [CycleKind::Major, CycleKind::Minor] {
        for next in [CycleKind::Major, CycleKind::Minor] {
            let ctx = format!("abandoned {kind:?}, then {next:?}");
            let mut heap = heap_with(1, false);
            let root = heap.spawn(node(0)).root().create().unwrap();
            let bomb = heap.spawn(Boom::default()).root().create().unwrap();
            let gone = freed_below(&mut heap, root, SPARE);
            assert!(begin_and_run(&mut heap, kind, root, 1));
            heap.get_mut(bomb).unwrap().n += 1;
            ARMED.with(|a| a.set(true));
            let mut abandoned = false;
            for _ in 0..10_000 {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    step(&mut heap, kind, 3)
                }));
                if r.is_err() {
                    abandoned = true;
                    break;
                }
                if heap.gc_phase() == Phase::Idle {
                    break;
                }
            }
            ARMED.with(|a| a.set(false));
            assert!(abandoned, "{ctx}: the bomb did not go off");
            let y = heap.create(node(1)).any();
            // (`root` still holds the stale handles: they name the restore.)
            let r = restore_first(&mut heap, &gone, |heap, g| {
                let n = Node {
                    id: 9,
                    kids: vec![y],
                };
                heap.spawn_at(g.index(), g.serial(), n)
                    .create()
                    .map(|r| r.any())
            });
            if !matches!(heap.gc_phase(), Phase::Idle) {
                finish(&mut heap, kind);
            }
            for c in [next, CycleKind::Minor, CycleKind::Major, CycleKind::Minor] {
                match c {
                    CycleKind::Major => heap.collect().unwrap(),
                    _ => heap.collect_minor().unwrap(),
                };
                if !heap.contains(r) || !heap.contains(y) {
                    bad.push(format!("{ctx}: lost after a {c:?} cycle"));
                    break;
                }
            }
            heap[root].kids.clear();
            heap.collect().unwrap();
            if heap.contains(r) || heap.contains(y) {
                bad.push(format!("{ctx}: kept after the cut"));
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

// ---------------------------------------------------------------------------
// Loading a saved graph while a cycle is in flight.

#[derive(Object, Default)]
#[object(save)]
struct Room {
    doors: Vec<Obj<Room>>,
    n: u64,
}

/// A saved ring of rooms loaded at every slice of a major and a minor
/// cycle: the loaded first room linked from an old object (or left
/// unlinked) after the load. Linked, every room survives the cycle, the
/// next minor and major ones with its doors; unlinked, all are gone after
/// the next major cycle.
#[test]
fn a_load_during_a_cycle() {
    let rooms = if cfg!(miri) { 5 } else { 40 };
    let bytes = {
        let mut src = Heap::new();
        let all: Vec<Obj<Room>> = (0..rooms)
            .map(|n| {
                src.create(Room {
                    doors: Vec::new(),
                    n,
                })
            })
            .collect();
        for (i, &r) in all.iter().enumerate() {
            let next = all[(i + 1) % all.len()];
            src[r].doors.push(next);
        }
        let mut b = Vec::new();
        src.save(
            coreobject::save::Selection::set(all.iter().copied()),
            &mut b,
        )
        .unwrap();
        b
    };
    let mut bad = Vec::new();
    let max_slices = if cfg!(miri) { 4 } else { 200 };
    for kind in [CycleKind::Major, CycleKind::Minor] {
        for linked in [true, false] {
            for slices in 0..max_slices {
                let ctx = format!("{kind:?}, linked {linked}, slice {slices}");
                let mut heap = heap_with(1, false);
                let root = heap.spawn(node(0)).root().create().unwrap();
                heap.collect().unwrap();
                if !begin_and_run(&mut heap, kind, root, slices) {
                    break;
                }
                let l = heap.load(&bytes[..]).unwrap();
                let loaded: Vec<Obj<Room>> = l
                    .objects
                    .iter()
                    .map(|&h| heap.downcast::<Room>(h).unwrap())
                    .collect();
                if linked {
                    heap[root].kids.push(loaded[0].any());
                }
                finish(&mut heap, kind);
                for c in 0..3 {
                    if c == 1 {
                        heap.collect().unwrap();
                    } else {
                        heap.collect_minor().unwrap();
                    }
                    let alive = loaded.iter().filter(|&&h| heap.contains(h)).count();
                    if linked && alive != loaded.len() {
                        bad.push(format!(
                            "{ctx}: {alive} of {} alive after cycle {c}",
                            loaded.len()
                        ));
                        break;
                    }
                }
                if linked {
                    let n: Vec<u64> = loaded
                        .iter()
                        .filter_map(|&h| heap.get(h))
                        .map(|r| heap[r.doors[0]].n)
                        .collect();
                    let want: Vec<u64> = (0..rooms).map(|n| (n + 1) % rooms).collect();
                    if n != want {
                        bad.push(format!("{ctx}: doors lead to {n:?}"));
                    }
                } else if loaded.iter().any(|&h| heap.contains(h)) {
                    bad.push(format!("{ctx}: unlinked rooms kept after a major cycle"));
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{} bad, first: {:#?}",
        bad.len(),
        &bad[..bad.len().min(8)]
    );
}

// ---------------------------------------------------------------------------
// Handles around a restored serial.

/// The handle with serial `s` at `h`'s index.
fn at_serial(h: AnyObj, s: u32) -> AnyObj {
    AnyObj::from_bits(h.index() as u64 | (s as u64) << 32).unwrap()
}

/// After a restore at the last occupant's serial `s` (undo): the handles
/// at `s - 1` and `s + 1` (an earlier occupant's, the next one's) resolve
/// to nothing, and `Weak` handles to the former occupant upgrade again, to
/// the new object (the documented point of a restore: "handles that named
/// the slot's last occupant … resolve to the new one"). Once the restored
/// object is freed, the slot's next occupant gets a serial above `s` and
/// neither `s` nor a `Weak` to it resolves to it. The same for a restore
/// at a generation the slot never issued (`s + 3`): `s .. s + 2` stay dead.
/// Checked at every point of a cycle.
#[test]
fn handles_around_a_restored_serial() {
    let mut bad = Vec::new();
    for kind in [CycleKind::Major, CycleKind::Minor] {
        for when in [When::Idle, When::Marking, When::Purging] {
            for newer in [0u32, 3] {
                let ctx = format!("{kind:?}, {when:?}, newer by {newer}");
                let mut heap = heap_with(1, false);
                let root = heap.spawn(node(0)).root().create().unwrap();
                // Two occupants of each slot: the first's handle is `s - 1`
                // or earlier, the second's `s`.
                let firsts: Vec<AnyObj> = (0..SPARE)
                    .map(|i| heap.create(node(i as u64)).any())
                    .collect();
                heap.collect().unwrap();
                let seconds: Vec<Obj<Node>> = firsts
                    .iter()
                    .map(|f| heap.create_at(f.index(), node(2)).unwrap())
                    .collect();
                let spare: Vec<AnyObj> = seconds.iter().map(|o| o.any()).collect();
                heap.collect().unwrap();
                litter(&mut heap);
                enter(&mut heap, kind, root, when);
                let r = restore_first(&mut heap, &spare, |heap, g| {
                    heap.create_at_with_serial(g.index(), g.serial() + newer, node(3))
                });
                let ra = r.any();
                let s = ra.serial();
                let k = seconds
                    .iter()
                    .position(|g| g.index() == ra.index())
                    .unwrap();
                let (first, second) = (firsts[k], seconds[k]);
                assert!(first.serial() < second.serial() && second.serial() + newer == s);
                let w = second.downgrade();
                for t in [first.serial(), s - 1, s + 1, s + 2] {
                    if t != s && heap.contains(at_serial(ra, t)) {
                        bad.push(format!("{ctx}: serial {t} resolves beside {s}"));
                    }
                }
                if (heap.upgrade(w) == Some(r)) != (newer == 0) {
                    bad.push(format!(
                        "{ctx}: Weak to the former occupant upgrades: {:?}",
                        heap.upgrade(w)
                    ));
                }
                heap[root].kids.push(ra);
                finish(&mut heap, kind);
                heap[root].kids.clear();
                heap.collect().unwrap();
                if heap.contains(ra) {
                    bad.push(format!("{ctx}: restored object not freed"));
                    continue;
                }
                // The slot's next occupant: no handle from before names it.
                let next = heap.create_at(ra.index(), node(4)).unwrap();
                if next.serial() <= s {
                    bad.push(format!(
                        "{ctx}: next serial {} not above {s}",
                        next.serial()
                    ));
                }
                for t in [first.serial(), second.serial(), s] {
                    if heap.contains(at_serial(ra, t)) {
                        bad.push(format!("{ctx}: serial {t} resolves to the next occupant"));
                    }
                }
                if heap.upgrade(w).is_some() || heap.upgrade(r.downgrade()).is_some() {
                    bad.push(format!("{ctx}: a Weak resolves to the next occupant"));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// A seeded mix of the above: restores (of freed slots, at their serials,
/// with or without their former outer) at random points of sliced cycles,
/// under `outer_keeps_inners` or not, with a model of reachability that
/// follows outers through headers (`outer_of`) both ways. Every reachable
/// object stays; after two major cycles nothing unreachable does.
#[test]
fn seeded_restores_against_a_model() {
    let seeds = if cfg!(miri) { 2 } else { 60 };
    for seed in 1..=seeds {
        model_run(seed);
    }
}

fn model_run(seed: u64) {
    use std::collections::{BTreeMap, BTreeSet};
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let inners = rng.one_in(2);
    let mut heap = heap_with(1 + rng.below(2), inners);
    let root = heap.spawn(node(0)).root().create().unwrap();
    // Every object ever made: its kids, its outer (as its header has it).
    let mut kids: BTreeMap<AnyObj, Vec<AnyObj>> = BTreeMap::new();
    let mut outer: BTreeMap<AnyObj, AnyObj> = BTreeMap::new();
    kids.insert(root.any(), Vec::new());
    // Marked as garbage (until restored); found freed while unreachable.
    let mut dead: BTreeSet<AnyObj> = BTreeSet::new();
    let mut gone: BTreeSet<AnyObj> = BTreeSet::new();
    let mut freed: Vec<AnyObj> = Vec::new();
    let mut restored: Vec<AnyObj> = Vec::new();
    let mut kind = CycleKind::Major;
    let ops = if cfg!(miri) { 60 } else { 600 };
    let reachable = |kids: &BTreeMap<AnyObj, Vec<AnyObj>>,
                     outer: &BTreeMap<AnyObj, AnyObj>,
                     dead: &BTreeSet<AnyObj>,
                     gone: &BTreeSet<AnyObj>| {
        let out = |h: &AnyObj| dead.contains(h) || gone.contains(h);
        let mut by_outer: BTreeMap<AnyObj, Vec<AnyObj>> = BTreeMap::new();
        if inners {
            for (i, o) in outer.iter().filter(|(i, _)| !out(i)) {
                by_outer.entry(*o).or_default().push(*i);
            }
        }
        let mut seen = BTreeSet::new();
        let mut todo = vec![root.any()];
        while let Some(h) = todo.pop() {
            if out(&h) || !seen.insert(h) {
                continue;
            }
            todo.extend(kids.get(&h).into_iter().flatten().copied());
            todo.extend(outer.get(&h).copied());
            todo.extend(by_outer.get(&h).into_iter().flatten().copied());
        }
        seen
    };
    let mut id = 0;
    for op in 0..ops {
        let ctx = format!("seed {seed}, op {op}, inners {inners}");
        let reach: Vec<AnyObj> = reachable(&kids, &outer, &dead, &gone).into_iter().collect();
        id += 1;
        match rng.below(10) {
            0..=3 => {
                // Create, maybe with an outer, linked from a reachable one.
                let from = reach[rng.below(reach.len())];
                let o = rng.one_in(3).then(|| reach[rng.below(reach.len())]);
                let h = match o {
                    Some(o) => heap.spawn(node(id)).outer(o).create().unwrap().any(),
                    None => heap.create(node(id)).any(),
                };
                kids.insert(h, Vec::new());
                match o {
                    Some(o) => outer.insert(h, o),
                    None => outer.remove(&h),
                };
                if rng.below(4) != 0 {
                    let n = heap.downcast::<Node>(from).unwrap();
                    heap[n].kids.push(h);
                    kids.get_mut(&from).unwrap().push(h);
                }
            }
            4 => {
                // Cut a link.
                let from = reach[rng.below(reach.len())];
                let n = heap.downcast::<Node>(from).unwrap();
                if !heap[n].kids.is_empty() {
                    let k = rng.below(heap[n].kids.len());
                    heap[n].kids.remove(k);
                    kids.get_mut(&from).unwrap().remove(k);
                }
            }
            5 => {
                // Mark as garbage (not the root): freed, maybe restored later.
                let h = reach[rng.below(reach.len())];
                if h != root.any() {
                    heap.mark_as_garbage(h).unwrap();
                    dead.insert(h);
                    freed.push(h);
                }
            }
            6 if !freed.is_empty() => {
                // Restore a freed one, with its old outer, another, or none.
                let g = freed.swap_remove(rng.below(freed.len()));
                let o = match rng.below(3) {
                    0 => outer.get(&g).copied(),
                    1 => Some(reach[rng.below(reach.len())]),
                    _ => None,
                };
                let mut n = node(id);
                n.kids = reach.iter().filter(|_| rng.one_in(8)).copied().collect();
                let at = heap.spawn_at(g.index(), g.serial(), n);
                let at = match o {
                    Some(o) => at.outer(o),
                    None => at,
                };
                match at.create() {
                    Ok(r) => {
                        kids.insert(r.any(), heap[r].kids.clone());
                        match o {
                            Some(o) => outer.insert(r.any(), o),
                            None => outer.remove(&r.any()),
                        };
                        dead.remove(&g);
                        gone.remove(&g);
                        restored.push(g);
                    }
                    // Not freed yet, or an outer cycle.
                    Err(_) => freed.push(g),
                }
            }
            7 => {
                if heap.gc_phase() == Phase::Idle {
                    kind = if rng.one_in(3) {
                        CycleKind::Major
                    } else {
                        CycleKind::Minor
                    };
                }
                step(&mut heap, kind, 1 + rng.below(20));
            }
            8 if rng.one_in(4) => {
                if rng.one_in(2) {
                    heap.collect().unwrap();
                } else {
                    heap.collect_minor().unwrap();
                }
            }
            _ => {}
        }
        let reach = reachable(&kids, &outer, &dead, &gone);
        for &h in &reach {
            assert!(
                heap.contains(h),
                "{ctx}: reachable {h:?} freed (outer {:?}, restored outers {:?})",
                outer.get(&h),
                restored
            );
        }
        // Dead for good: an unreachable object the heap no longer resolves
        // (freed, or condemned by the purge in flight) never comes back,
        // not even as an inner of an outer restored at its serial
        // (`a_restore_during_a_purge_does_not_revive_a_condemned_inner`).
        for &h in kids.keys() {
            if !reach.contains(&h) && !heap.contains(h) {
                gone.insert(h);
            }
        }
    }
    finish(&mut heap, kind);
    heap.collect().unwrap();
    heap.collect().unwrap();
    let reach = reachable(&kids, &outer, &dead, &gone);
    for h in kids.keys() {
        if heap.contains(*h) && !reach.contains(h) {
            panic!("seed {seed}: unreachable {h:?} left after two major cycles");
        }
    }
}

/// Seed 327 of the model, made small. An inner `i` outlives its outer `o`
/// (`o` is marked as garbage and freed by a minor cycle; `i` is old), so
/// nothing reaches `i` any more. A major cycle's mark condemns it; during
/// that cycle's purge `o` is restored at its serial under a live outer.
/// `i` was dead before the restore (`contains` is false from the end of
/// marking: the purge may already have run its `begin_destroy`) and stays
/// dead: the restored `o` gets back only the inners that were still live,
/// lists none, and the purge frees `i`. The restored `o` itself is kept.
#[test]
fn a_restore_during_a_purge_does_not_revive_a_condemned_inner() {
    for threads in [1, 2] {
        let mut heap = heap_with(threads, true);
        let root = heap.spawn(node(0)).root().create().unwrap();
        let n = SPARE as u64;
        let pairs: Vec<(AnyObj, AnyObj)> = (0..n)
            .map(|k| {
                let o = heap.create(node(k));
                heap[root].kids.push(o.any());
                let i = heap.spawn(node(100 + k)).outer(o).create().unwrap();
                (o.any(), i.any())
            })
            .collect();
        heap.collect().unwrap();
        for &(o, _) in &pairs {
            heap.mark_as_garbage(o).unwrap();
        }
        heap.collect_minor().unwrap();
        for &(o, i) in &pairs {
            assert!(!heap.contains(o), "freed by the minor cycle");
            assert!(heap.contains(i), "old: outlives its outer");
        }
        enter(&mut heap, CycleKind::Major, root, When::Purging);
        let anchor = heap.create(node(1));
        heap[root].kids.push(anchor.any());
        let (o, i, r) = pairs
            .iter()
            .find_map(|&(o, i)| {
                assert!(!heap.contains(i), "condemned by the mark");
                let r = heap
                    .spawn_at(o.index(), o.serial(), node(2))
                    .outer(anchor)
                    .create()
                    .ok()?;
                Some((o, i, r))
            })
            .expect("a free slot to restore into");
        assert_eq!(r.any(), o);
        // Not freed yet: `o`'s index entry still names it.
        assert!(heap.flags_of(i).is_some(), "threads {threads}: freed early");
        assert!(
            !heap.contains(i),
            "threads {threads}: a condemned inner revived"
        );
        assert!(
            listed(&heap, o).is_empty(),
            "threads {threads}: lists a dead inner"
        );
        finish(&mut heap, CycleKind::Major);
        assert!(
            heap.flags_of(i).is_none(),
            "threads {threads}: freed by the purge"
        );
        assert!(
            heap.contains(o),
            "threads {threads}: the restored outer is kept"
        );
        heap.collect().unwrap();
        assert!(heap.contains(o) && heap.contains(anchor));
        assert!(listed(&heap, o).is_empty());
        heap.mark_as_garbage(o).unwrap();
        heap.collect().unwrap();
        assert!(!heap.contains(o) && heap.contains(anchor));
    }
}

/// A slot restored at its former occupant's serial with another class:
/// the former occupant's typed handles (`Obj`, `Weak`) resolve to nothing
/// (a typed resolve of a restored object compares the class), while its
/// `AnyObj` names the new object. At every point of a cycle.
#[test]
fn a_restore_with_another_class_is_not_reached_through_old_typed_handles() {
    let mut bad = Vec::new();
    for kind in [CycleKind::Major, CycleKind::Minor] {
        for when in [When::Idle, When::Marking, When::Purging] {
            let ctx = format!("{kind:?}, {when:?}");
            let mut heap = heap_with(1, false);
            let root = heap.spawn(node(0)).root().create().unwrap();
            let bags: Vec<Obj<Bag>> = (0..SPARE).map(|_| heap.create(Bag::default())).collect();
            heap.collect().unwrap();
            let spare: Vec<AnyObj> = bags.iter().map(|b| b.any()).collect();
            litter(&mut heap);
            enter(&mut heap, kind, root, when);
            let r = restore_first(&mut heap, &spare, |heap, g| {
                heap.spawn_at(g.index(), g.serial(), node(7)).create()
            });
            heap[root].kids.push(r.any());
            let old = bags[spare.iter().position(|&g| g == r.any()).unwrap()];
            if heap.get(old).is_some() || heap.upgrade(old.downgrade()).is_some() {
                bad.push(format!("{ctx}: the old Bag handle resolves"));
            }
            if heap.downcast::<Bag>(r.any()).is_some()
                || heap.downcast::<Node>(old.any()) != Some(r)
            {
                bad.push(format!("{ctx}: downcasts"));
            }
            finish(&mut heap, kind);
            heap.collect_minor().unwrap();
            if heap.get(old).is_some() || heap.get(r).map(|n| n.id) != Some(7) {
                bad.push(format!("{ctx}: after the cycle"));
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

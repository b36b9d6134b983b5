//! Parallel marking (`GcConfig::threads`): the same heap history collected
//! with 1, 2 and 4 marking threads (more threads than this machine may have
//! cores) frees the same objects and marks the same count, which is also
//! what a breadth-first search of a model graph finds; large chains and
//! fan-outs mark on two threads; a panic in `Trace` code on a worker
//! abandons the collection and frees nothing. Sized down under miri
//! (`cfg!(miri)`), which runs the workers as threads too; but miri stops
//! inside the dependencies first: with `-Zmiri-strict-provenance`,
//! crossbeam-epoch's tagged pointers (rayon's and our deques) are
//! integer-to-pointer casts; under Stacked Borrows its intrusive list is
//! flagged; under Tree Borrows with permissive provenance the chain, panic
//! and fan-out tests pass and then rayon's `in_place_scope` is flagged for
//! freeing the scope while a finished job's frame still holds a protected
//! reference to it (rayon-core's code, as in its issues #952 and #1008).
//! So CI's strict-provenance miri run skips every test here that starts
//! workers (the one that stays on one thread runs), and then runs the chain
//! and worker-panic tests again under Tree Borrows with permissive
//! provenance, which get through the dependencies and so check this
//! crate's parallel marker.

use std::collections::{BTreeSet, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use coreobject::{AnyObj, GcConfig, Heap, HeapConfig, Obj, Object, Referencer, StrongObj, Visitor};

#[derive(Object, Default)]
struct Node {
    list: Vec<Obj<Node>>,
    slot: Option<Obj<Node>>,
}

#[derive(Default)]
struct External(Mutex<Vec<AnyObj>>);

impl Referencer for External {
    fn add_referenced_objects(&self, v: &mut dyn Visitor) {
        for &h in self.0.lock().unwrap().iter() {
            v.visit(h);
        }
    }
}

/// A tiny deterministic generator (xorshift64*), so that every thread count
/// replays the same history.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

fn heap(threads: usize, outer_keeps_inners: bool) -> Heap {
    Heap::with_config(HeapConfig {
        disregard_pool_size: 64,
        gc: GcConfig {
            threads,
            parallel_threshold: 0,
            outer_keeps_inners,
            ..GcConfig::MANUAL
        },
        ..HeapConfig::DEFAULT
    })
    .unwrap()
}

/// The model of one object.
struct M {
    h: Obj<Node>,
    alive: bool,
    pool: bool,
    rooted: bool,
    garbage: bool,
    outer: Option<usize>,
    edges: Vec<usize>,
    slot: Option<usize>,
}

/// What one run observed: per collection, the marked count and the set of
/// model ids freed.
type Trace = Vec<(usize, BTreeSet<usize>)>;

/// Replays the history of `seed` on a heap marking with `threads`, checking
/// each collection against a breadth-first search of the model.
fn run(seed: u64, threads: usize, outer_keeps_inners: bool) -> Trace {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut heap = heap(threads, outer_keeps_inners);
    let ext = Arc::new(External::default());
    heap.add_referencer(ext.clone());
    let mut ms: Vec<M> = Vec::new();
    let mut strong: Vec<(usize, StrongObj<Node>)> = Vec::new();
    let mut reported: Vec<usize> = Vec::new();

    // A pool whose objects keep their targets alive.
    heap.open_disregard_for_gc().unwrap();
    for _ in 0..8 {
        let h = heap.create(Node::default());
        ms.push(M {
            h,
            alive: true,
            pool: true,
            rooted: false,
            garbage: false,
            outer: None,
            edges: Vec::new(),
            slot: None,
        });
    }
    heap.close_disregard_for_gc();

    let mut out = Trace::new();
    let rounds = if cfg!(miri) { 2 } else { 6 };
    for _round in 0..rounds {
        // Grow.
        let mut live: Vec<usize> = (0..ms.len())
            .filter(|&i| ms[i].alive && !ms[i].pool && !ms[i].garbage)
            .collect();
        let grow = if cfg!(miri) {
            rng.below(60) + 20
        } else {
            rng.below(1500) + 200
        };
        for _ in 0..grow {
            let outer = (!live.is_empty() && rng.chance(20)).then(|| live[rng.below(live.len())]);
            let h = match outer {
                Some(o) => heap.spawn(Node::default()).outer(ms[o].h).create().unwrap(),
                None => heap.create(Node::default()),
            };
            ms.push(M {
                h,
                alive: true,
                pool: false,
                rooted: false,
                garbage: false,
                outer,
                edges: Vec::new(),
                slot: None,
            });
            live.push(ms.len() - 1);
        }
        let live: Vec<usize> = (0..ms.len()).filter(|&i| ms[i].alive).collect();
        let pick = |rng: &mut Rng| live[rng.below(live.len())];
        // Edges, roots, strong handles, garbage marks, reports.
        for _ in 0..live.len() * 2 {
            let (a, b) = (pick(&mut rng), pick(&mut rng));
            if ms[a].garbage {
                continue;
            }
            match rng.below(100) {
                0..=59 => {
                    heap[ms[a].h].list.push(ms[b].h);
                    ms[a].edges.push(b);
                }
                60..=79 => {
                    heap[ms[a].h].slot = Some(ms[b].h);
                    ms[a].slot = Some(b);
                }
                80..=84 => {
                    heap[ms[a].h].list.clear();
                    ms[a].edges.clear();
                }
                85..=86 if !ms[a].pool => {
                    heap.add_to_root(ms[a].h).unwrap();
                    ms[a].rooted = true;
                }
                87..=88 if ms[a].rooted => {
                    heap.remove_from_root(ms[a].h).unwrap();
                    ms[a].rooted = false;
                }
                89 if !ms[a].pool => {
                    strong.push((a, heap.strong(ms[a].h).unwrap()));
                }
                90 if !strong.is_empty() => {
                    strong.swap_remove(rng.below(strong.len()));
                }
                91 if !ms[a].pool && !ms[a].rooted => {
                    heap.mark_as_garbage(ms[a].h).unwrap();
                    ms[a].garbage = true;
                }
                92 => {
                    reported.push(a);
                    ext.0.lock().unwrap().push(ms[a].h.any());
                }
                93 if !reported.is_empty() => {
                    let k = rng.below(reported.len());
                    reported.swap_remove(k);
                    ext.0.lock().unwrap().swap_remove(k);
                }
                _ => {}
            }
        }

        // The model's answer.
        let mut seen = vec![false; ms.len()];
        let mut queue = VecDeque::new();
        let grey = |i: usize, seen: &mut Vec<bool>, queue: &mut VecDeque<usize>| {
            if ms[i].alive && !ms[i].garbage && !ms[i].pool && !seen[i] {
                seen[i] = true;
                queue.push_back(i);
            }
        };
        let mut starts: Vec<usize> = Vec::new();
        starts.extend((0..ms.len()).filter(|&i| ms[i].alive && ms[i].rooted));
        starts.extend(strong.iter().map(|(i, _)| *i));
        starts.extend(reported.iter().copied());
        for i in (0..ms.len()).filter(|&i| ms[i].pool) {
            starts.extend(ms[i].edges.iter().copied());
            starts.extend(ms[i].slot);
        }
        for i in starts {
            grey(i, &mut seen, &mut queue);
        }
        let mut inners = vec![Vec::new(); ms.len()];
        for (k, m) in ms.iter().enumerate() {
            if let Some(o) = m.outer {
                inners[o].push(k);
            }
        }
        while let Some(i) = queue.pop_front() {
            let m = &ms[i];
            let mut next: Vec<usize> = m.edges.clone();
            next.extend(m.slot);
            next.extend(m.outer);
            if outer_keeps_inners {
                next.extend(inners[i].iter().copied());
            }
            for k in next {
                grey(k, &mut seen, &mut queue);
            }
        }
        let marked = seen.iter().filter(|&&s| s).count();

        let stats = heap.collect().unwrap();
        let mut freed = BTreeSet::new();
        for (i, m) in ms.iter_mut().enumerate() {
            if m.alive && !heap.contains(m.h) {
                m.alive = false;
                freed.insert(i);
            }
        }
        for (i, m) in ms.iter().enumerate() {
            let expect = m.pool || seen[i];
            assert_eq!(
                heap.contains(m.h),
                expect,
                "seed {seed}, threads {threads}: object {i}"
            );
        }
        assert_eq!(stats.marked, marked, "seed {seed}, threads {threads}");
        assert_eq!(
            stats.mark_threads, threads,
            "seed {seed}: the drain ran on the threads asked for"
        );
        // Freed objects leave the model's edges.
        for m in ms.iter_mut() {
            m.rooted &= m.alive;
        }
        let alive: Vec<bool> = ms.iter().map(|m| m.alive).collect();
        for (i, m) in ms.iter_mut().enumerate() {
            if alive[i] {
                m.edges.retain(|&k| alive[k]);
                m.slot = m.slot.filter(|&k| alive[k]);
            }
        }
        for m in ms.iter().filter(|m| m.alive) {
            let alive_handles: Vec<_> = m.edges.iter().map(|&k| ms[k].h).collect();
            heap[m.h].list = alive_handles;
            heap[m.h].slot = m.slot.map(|k| ms[k].h);
        }
        reported.retain(|&k| alive[k]);
        *ext.0.lock().unwrap() = reported.iter().map(|&k| ms[k].h.any()).collect();
        out.push((stats.marked, freed));
    }
    out
}

#[test]
#[cfg_attr(
    miri,
    ignore = "the workers run on rayon and crossbeam, where miri stops first (see the header)"
)]
fn thread_counts_free_the_same_objects() {
    let seeds = if cfg!(miri) { 1 } else { 6 };
    for seed in 1..=seeds {
        let one = run(seed, 1, false);
        assert_eq!(run(seed, 2, false), one, "seed {seed}, 2 threads");
        assert_eq!(run(seed, 4, false), one, "seed {seed}, 4 threads");
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "the workers run on rayon and crossbeam, where miri stops first (see the header)"
)]
fn thread_counts_free_the_same_objects_when_outers_keep_inners() {
    let last = if cfg!(miri) { 11 } else { 13 };
    for seed in 11..=last {
        let one = run(seed, 1, true);
        assert_eq!(run(seed, 2, true), one, "seed {seed}, 2 threads");
        assert_eq!(run(seed, 4, true), one, "seed {seed}, 4 threads");
    }
}

#[test]
fn small_heaps_mark_on_one_thread() {
    let mut heap = Heap::with_config(HeapConfig {
        gc: GcConfig {
            threads: 4,
            ..GcConfig::MANUAL
        },
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    let a = heap.create(Node::default());
    heap.add_to_root(a).unwrap();
    let s = heap.collect().unwrap();
    assert_eq!((s.marked, s.mark_threads), (1, 1));
    assert!(
        GcConfig {
            threads: 0,
            ..GcConfig::DEFAULT
        }
        .mark_threads()
        .clamp(1, 16)
            == GcConfig {
                threads: 0,
                ..GcConfig::DEFAULT
            }
            .mark_threads()
    );
}

fn two_threads() -> Heap {
    Heap::with_config(HeapConfig {
        gc: GcConfig {
            threads: 2,
            // The heaps here are above the default threshold, but not under miri.
            parallel_threshold: 0,
            ..GcConfig::MANUAL
        },
        ..HeapConfig::DEFAULT
    })
    .unwrap()
}

#[test]
#[cfg_attr(
    miri,
    ignore = "the workers run on rayon and crossbeam, where miri stops first (see the header)"
)]
fn a_million_object_chain_on_two_threads() {
    const N: usize = if cfg!(miri) { 300 } else { 1_000_000 };
    let mut heap = two_threads();
    let head = heap.create(Node::default());
    heap.add_to_root(head).unwrap();
    let mut prev = head;
    let mut cut = None;
    for i in 1..N {
        let h = heap.create(Node::default());
        heap[prev].slot = Some(h);
        if i == N / 2 {
            cut = Some(prev);
        }
        prev = h;
    }
    let s = heap.collect().unwrap();
    assert_eq!((s.marked, s.freed, s.mark_threads), (N, 0, 2));
    heap[cut.unwrap()].slot = None;
    let s = heap.collect().unwrap();
    assert_eq!((s.marked, s.freed), (N / 2, N / 2));
    assert!(!heap.contains(prev));
}

#[test]
#[cfg_attr(
    miri,
    ignore = "the workers run on rayon and crossbeam, where miri stops first (see the header)"
)]
fn a_wide_fan_out_on_two_threads() {
    const N: usize = if cfg!(miri) { 400 } else { 400_000 };
    let mut heap = two_threads();
    let hub = heap.create(Node::default());
    heap.add_to_root(hub).unwrap();
    let mut leaves = Vec::with_capacity(N);
    for _ in 0..N {
        leaves.push(heap.create(Node::default()));
    }
    // Each leaf points at one more, so the workers have second-level work.
    for k in 0..N / 2 {
        heap[leaves[k]].slot = Some(leaves[N / 2 + k]);
    }
    heap[hub].list = leaves[..N / 2].to_vec();
    let s = heap.collect().unwrap();
    assert_eq!((s.marked, s.freed, s.mark_threads), (N + 1, 0, 2));
    // Unreachable every fourth first-level leaf: it and its child go.
    heap[hub].list = leaves[..N / 2]
        .iter()
        .enumerate()
        .filter(|(k, _)| k % 4 != 0)
        .map(|(_, &h)| h)
        .collect();
    let s = heap.collect().unwrap();
    let gone = N / 8 * 2;
    assert_eq!((s.marked, s.freed), (N + 1 - gone, gone));
}

#[test]
#[cfg_attr(
    miri,
    ignore = "the workers run on rayon and crossbeam, where miri stops first (see the header)"
)]
fn a_panic_on_a_worker_abandons_the_collection() {
    static ARMED: AtomicBool = AtomicBool::new(false);
    static MAIN: Mutex<Option<std::thread::ThreadId>> = Mutex::new(None);
    fn explode(this: &Bomb, v: &mut (impl Visitor + ?Sized)) {
        // Panic on a worker thread, not on the collector's own.
        let off_main = Some(std::thread::current().id()) != *MAIN.lock().unwrap();
        if off_main && ARMED.swap(false, Ordering::SeqCst) {
            panic!("trace failed on a worker");
        }
        for &h in &this.kids {
            v.visit(h.any());
        }
    }
    #[derive(Object, Default)]
    #[object(trace_with = explode)]
    struct Bomb {
        kids: Vec<Obj<Bomb>>,
    }
    const N: usize = if cfg!(miri) { 300 } else { 200_000 };
    const GARBAGE: usize = if cfg!(miri) { 20 } else { 1000 };
    let mut heap = two_threads();
    let root = heap.create(Bomb::default());
    heap.add_to_root(root).unwrap();
    // A root with many subtrees, so that the second worker has work to steal.
    let mut all = vec![root];
    for i in 1..N {
        let h = heap.create(Bomb::default());
        let parent = all[(i - 1) / 8];
        heap[parent].kids.push(h);
        all.push(h);
    }
    *MAIN.lock().unwrap() = Some(std::thread::current().id());
    // On a busy machine the collector's thread may mark everything before
    // the second worker runs: then the collection succeeds; try again.
    let mut attempts = 0;
    let (err, garbage) = loop {
        attempts += 1;
        assert!(attempts <= 50, "no worker thread ever traced an object");
        let garbage: Vec<_> = (0..GARBAGE).map(|_| heap.create(Bomb::default())).collect();
        ARMED.store(true, Ordering::SeqCst);
        let len = heap.len();
        match catch_unwind(AssertUnwindSafe(|| heap.collect())) {
            Ok(s) => {
                let s = s.unwrap();
                assert_eq!((s.marked, s.freed), (N, GARBAGE));
                ARMED.store(false, Ordering::SeqCst);
            }
            Err(err) => {
                assert_eq!(
                    heap.len(),
                    len,
                    "nothing was freed by the failed collection"
                );
                break (err, garbage);
            }
        }
    };
    assert!(!ARMED.load(Ordering::SeqCst), "the panic was raised");
    let msg = err.downcast_ref::<&str>().copied().unwrap_or("");
    assert_eq!(msg, "trace failed on a worker");
    assert!(garbage.iter().all(|&g| heap.contains(g)));

    // The next collection still knows every root, and frees the garbage.
    let s = heap.collect().unwrap();
    assert_eq!(
        (s.roots, s.marked, s.freed, s.mark_threads),
        (1, N, GARBAGE, 2)
    );
    assert!(all.iter().all(|&h| heap.contains(h)));
}

/// Many short drains on more workers than cores: exercises termination
/// (workers going idle, seeing work, stealing) far more often than large
/// heaps do. Every collection must mark exactly the reachable objects.
#[test]
#[cfg_attr(
    miri,
    ignore = "the workers run on rayon and crossbeam, where miri stops first (see the header)"
)]
fn many_small_drains_on_eight_workers_terminate_with_the_right_count() {
    let mut rng = Rng(7);
    let rounds = if cfg!(miri) { 4 } else { 200 };
    for round in 0..rounds {
        let mut heap = Heap::with_config(HeapConfig {
            gc: GcConfig {
                threads: 8,
                parallel_threshold: 0,
                ..GcConfig::MANUAL
            },
            ..HeapConfig::DEFAULT
        })
        .unwrap();
        let n = 1 + rng.below(300);
        let hs: Vec<_> = (0..n).map(|_| heap.create(Node::default())).collect();
        // A random tree over the first `reach` objects, hanging from object 0.
        let reach = 1 + rng.below(n);
        for k in 1..reach {
            let parent = hs[rng.below(k)];
            heap[parent].list.push(hs[k]);
        }
        heap.add_to_root(hs[0]).unwrap();
        let s = heap.collect().unwrap();
        assert_eq!(
            (s.marked, s.freed, s.mark_threads),
            (reach, n - reach, 8),
            "round {round}"
        );
    }
}

/// Budgeted slices on two workers: each marking slice stops near its
/// budget, with what it marked scanned and the rest of its work kept for the
/// next slice, and the cycle marks exactly what one thread marks.
#[test]
#[cfg_attr(
    miri,
    ignore = "the workers run on rayon and crossbeam, where miri stops first (see the header)"
)]
fn budgeted_slices_on_two_threads_stop_near_the_budget_and_lose_nothing() {
    const N: usize = if cfg!(miri) { 600 } else { 100_000 };
    const BUDGET: usize = if cfg!(miri) { 40 } else { 2_000 };
    let mut heap = Heap::with_config(HeapConfig {
        gc: GcConfig {
            threads: 2,
            parallel_threshold: 0,
            incremental_debt: None,
            ..GcConfig::MANUAL
        },
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    let root = heap.create(Node::default());
    heap.add_to_root(root).unwrap();
    let mut all = vec![root];
    for i in 1..N {
        let h = heap.create(Node::default());
        let parent = all[(i - 1) / 3];
        heap[parent].list.push(h);
        all.push(h);
    }
    let garbage: Vec<_> = (0..N / 10).map(|_| heap.create(Node::default())).collect();
    let mut marking_slices = 0;
    let stats = loop {
        let marking = heap.gc_phase() != coreobject::Phase::Purge;
        let t = heap.step(BUDGET);
        if marking && t.phase != coreobject::Phase::Purge && t.completed.is_none() {
            marking_slices += 1;
            // A poll interval of pops per worker, and its rings, past the budget.
            assert!(t.work <= BUDGET + 2 * 64 + 2 * 16, "slice did {}", t.work);
        }
        if let Some(s) = t.completed {
            break s;
        }
    };
    assert_eq!(
        (stats.marked, stats.freed, stats.mark_threads),
        (N, N / 10, 2)
    );
    assert!(marking_slices >= N / BUDGET / 2, "{marking_slices} slices");
    assert!(all.iter().all(|&h| heap.contains(h)));
    assert!(garbage.iter().all(|&g| !heap.contains(g)));
}

/// Runs a collection to its end: at once, or in marking slices of `budget`.
fn collect_in(heap: &mut Heap, budget: Option<usize>) -> coreobject::CollectStats {
    match budget {
        None => heap.collect().unwrap(),
        Some(b) => loop {
            if let Some(s) = heap.step(b).completed {
                break s;
            }
        },
    }
}

/// Full size or the default run's: `COREOBJECT_FULL_TESTS=1` (CI's test
/// step) runs the full count; a plain `cargo test --workspace` runs
/// less, to stay quick.
fn full_tests() -> bool {
    std::env::var_os("COREOBJECT_FULL_TESTS").is_some_and(|v| v != "0")
}

/// Claims race: workers claim an object with a plain load and store of its
/// byte, so two may claim and scan the same object at once; the marked
/// count must still count it once, and no object may be lost. Hubs that
/// each list every leaf in the same order make the workers pop the same
/// leaves at about the same time; a random graph with many parents per
/// object adds races at unrelated places. Several cycles in a row (claims
/// are cleared per cycle) with edges cut between them, whole and in
/// budgeted slices, on 2 and 4 workers; every count is checked against a
/// breadth-first search, and every reachable object must survive.
#[test]
#[cfg_attr(
    miri,
    ignore = "the workers run on rayon and crossbeam, where miri stops first (see the header)"
)]
fn racing_claims_mark_each_object_once_and_lose_none() {
    const HUBS: usize = if cfg!(miri) { 3 } else { 16 };
    // A quarter of the full size by default; full size in CI.
    let (leaves_n, random_n) = if cfg!(miri) {
        (100, 100)
    } else if full_tests() {
        (20_000, 30_000)
    } else {
        (5_000, 7_500)
    };
    const EDGES: usize = 8;
    for threads in [2, 4] {
        for budget in [None, Some(if cfg!(miri) { 50 } else { 3_000 })] {
            let mut rng = Rng(0x5eed + threads as u64);
            let mut heap = Heap::with_config(HeapConfig {
                gc: GcConfig {
                    threads,
                    parallel_threshold: 0,
                    incremental_debt: None,
                    ..GcConfig::MANUAL
                },
                ..HeapConfig::DEFAULT
            })
            .unwrap();
            // Model: `edges[k]` are object k's references.
            let mut hs: Vec<Obj<Node>> = Vec::new();
            let mut edges: Vec<Vec<usize>> = Vec::new();
            let mut new = |heap: &mut Heap, edges: &mut Vec<Vec<usize>>| {
                hs.push(heap.create(Node::default()));
                edges.push(Vec::new());
                hs.len() - 1
            };
            let hubs: Vec<usize> = (0..HUBS).map(|_| new(&mut heap, &mut edges)).collect();
            let leaves: Vec<usize> = (0..leaves_n).map(|_| new(&mut heap, &mut edges)).collect();
            for &l in &leaves {
                let kid = new(&mut heap, &mut edges);
                edges[l].push(kid);
            }
            for &h in &hubs {
                edges[h] = leaves.clone();
            }
            let random: Vec<usize> = (0..random_n).map(|_| new(&mut heap, &mut edges)).collect();
            for &r in &random {
                for _ in 0..EDGES {
                    edges[r].push(random[rng.below(random_n)]);
                }
            }
            // Hubs reach into the random graph too, and it back into the leaves.
            for (k, &h) in hubs.iter().enumerate() {
                edges[h].push(random[k]);
            }
            for _ in 0..random_n / 10 {
                let r = random[rng.below(random_n)];
                edges[r].push(leaves[rng.below(leaves_n)]);
            }
            // Unreachable objects, for the purge to find.
            for _ in 0..1000 {
                let g = new(&mut heap, &mut edges);
                edges[g].push(leaves[rng.below(leaves_n)]);
            }
            let hs = hs;
            for (k, e) in edges.iter().enumerate() {
                heap[hs[k]].list = e.iter().map(|&t| hs[t]).collect();
            }
            for &h in &hubs {
                heap.add_to_root(hs[h]).unwrap();
            }
            let mut alive = vec![true; hs.len()];
            for round in 0..4 {
                let mut seen = vec![false; hs.len()];
                let mut queue: VecDeque<usize> = hubs.iter().copied().collect();
                for &h in &hubs {
                    seen[h] = true;
                }
                while let Some(k) = queue.pop_front() {
                    for &t in &edges[k] {
                        if !seen[t] {
                            seen[t] = true;
                            queue.push_back(t);
                        }
                    }
                }
                let reachable = seen.iter().filter(|&&s| s).count();
                let freed = (0..hs.len()).filter(|&k| alive[k] && !seen[k]).count();
                let s = collect_in(&mut heap, budget);
                let at = format!("threads {threads}, budget {budget:?}, round {round}");
                assert_eq!(s.mark_threads, threads, "{at}");
                assert_eq!((s.marked, s.freed), (reachable, freed), "{at}");
                for k in 0..hs.len() {
                    assert_eq!(heap.contains(hs[k]), seen[k], "{at}: object {k}");
                }
                alive = seen;
                // Cut: every hub loses a slice of the leaves, and some random
                // objects lose their edges.
                let quarter = leaves_n / 4;
                for (j, &h) in hubs.iter().enumerate() {
                    // Leaves are numbered from `HUBS` on, in order.
                    let a = HUBS + (j * 7 + round * 3) % 4 * quarter;
                    edges[h].retain(|t| !(a..a + quarter).contains(t));
                }
                for _ in 0..random_n / 20 {
                    edges[random[rng.below(random_n)]].clear();
                }
                for k in 0..hs.len() {
                    edges[k].retain(|&t| alive[t]);
                    if alive[k] {
                        heap[hs[k]].list = edges[k].iter().map(|&t| hs[t]).collect();
                    }
                }
            }
        }
    }
}

// ----- parallel destruction ----------------------------------------------------

/// An object whose `Drop` records its id (each must be dropped exactly once)
/// and, when `boom` is set, panics.
#[derive(Object)]
struct Dropper {
    id: u32,
    #[object(skip)]
    seen: Arc<Vec<std::sync::atomic::AtomicU8>>,
    #[object(skip)]
    boom: bool,
    kids: Vec<Obj<Dropper>>,
}

impl Drop for Dropper {
    fn drop(&mut self) {
        self.seen[self.id as usize].fetch_add(1, Ordering::Relaxed);
        if self.boom {
            panic!("Dropper {} panics in Drop", self.id);
        }
    }
}

/// Creates `n` objects, roots every `keep`-th one, and collects; returns the
/// heap, the stats (or the panic), and how often each object was dropped.
fn drop_run(
    n: usize,
    keep: usize,
    boom: Option<u32>,
    config: GcConfig,
    listener: bool,
) -> (Heap, std::thread::Result<coreobject::CollectStats>, Vec<u8>) {
    let mut heap = Heap::with_config(HeapConfig {
        gc: config,
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    if listener {
        heap.on_delete(|_: &coreobject::ObjectEvent| {});
    }
    let seen = Arc::new(
        (0..n)
            .map(|_| std::sync::atomic::AtomicU8::new(0))
            .collect::<Vec<_>>(),
    );
    for i in 0..n {
        let h = heap.create(Dropper {
            id: i as u32,
            seen: seen.clone(),
            boom: boom == Some(i as u32),
            kids: Vec::with_capacity(2),
        });
        if i % keep == 0 {
            heap.add_to_root(h).unwrap();
        }
    }
    let stats = catch_unwind(AssertUnwindSafe(|| heap.collect().unwrap()));
    let counts = seen.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    (heap, stats, counts)
}

fn parallel_drop_config() -> GcConfig {
    GcConfig {
        threads: 2,
        parallel_threshold: 0,
        parallel_drop: true,
        ..GcConfig::MANUAL
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "the workers run on rayon and crossbeam, where miri stops first (see the header)"
)]
fn hook_free_objects_are_dropped_on_two_threads_exactly_once() {
    let n = 3 * coreobject::gc::PARALLEL_DROP_MIN;
    let (heap, stats, counts) = drop_run(n, 3, None, parallel_drop_config(), false);
    let stats = stats.expect("no panic");
    assert_eq!(stats.drop_threads, 2);
    assert_eq!(stats.freed, n - n.div_ceil(3));
    assert_eq!(heap.len(), n.div_ceil(3));
    for (i, &c) in counts.iter().enumerate() {
        let expected = u8::from(i % 3 != 0);
        assert_eq!(c, expected, "object {i} dropped {c} times");
    }
    // The freed slots are reused, and the memory with them.
    let mut heap = heap;
    let again = heap.create(Node::default());
    assert!(heap.get(again).is_some());
    assert_eq!(heap.collect().unwrap().freed, 1);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "the workers run on rayon and crossbeam, where miri stops first (see the header)"
)]
fn a_panicking_drop_on_a_worker_is_resumed_after_every_other_drop() {
    let n = 2 * coreobject::gc::PARALLEL_DROP_MIN;
    // The object near the end falls in the pool thread's half.
    let boom = (n - 5) as u32;
    let (mut heap, stats, counts) = drop_run(n, 4, Some(boom), parallel_drop_config(), false);
    let panic = stats.expect_err("the Drop panic is resumed from collect");
    let msg = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("panics in Drop"), "{msg}");
    for (i, &c) in counts.iter().enumerate() {
        let expected = u8::from(i % 4 != 0);
        assert_eq!(c, expected, "object {i} dropped {c} times");
    }
    assert_eq!(heap.len(), n / 4);
    // The heap is whole: a later collection frees nothing more, and creation works.
    assert_eq!(heap.collect().unwrap().freed, 0);
    let h = heap.create(Node::default());
    assert!(heap.get(h).is_some());
}

#[test]
#[cfg_attr(
    miri,
    ignore = "the workers run on rayon and crossbeam, where miri stops first (see the header)"
)]
fn delete_listeners_small_purges_and_one_thread_drop_on_the_calling_thread() {
    let n = 2 * coreobject::gc::PARALLEL_DROP_MIN;
    // A delete listener keeps destruction in order on the calling thread.
    let (_, stats, counts) = drop_run(n, 2, None, parallel_drop_config(), true);
    assert_eq!(stats.unwrap().drop_threads, 1);
    assert!(counts
        .iter()
        .enumerate()
        .all(|(i, &c)| c == u8::from(i % 2 != 0)));
    // Too little to free.
    let (_, stats, _) = drop_run(1000, 2, None, parallel_drop_config(), false);
    assert_eq!(stats.unwrap().drop_threads, 1);
    // One thread asked for.
    let (_, stats, _) = drop_run(n, 2, None, GcConfig::MANUAL, false);
    assert_eq!(stats.unwrap().drop_threads, 1);
    // Two marking threads, but parallel drops not asked for.
    let config = GcConfig {
        parallel_drop: false,
        ..parallel_drop_config()
    };
    let (_, stats, _) = drop_run(n, 2, None, config, false);
    let stats = stats.unwrap();
    assert_eq!((stats.mark_threads, stats.drop_threads), (2, 1));
}

//! Saves into a store that cost what changed. A world of N objects (1M by
//! default) in 1,000 rooted levels, each object with an outer, a name,
//! three scalars and 1-4 handles (the `saveload` world); then, R times
//! (3), in one run:
//!
//! * **whole**: the first save into a new store (every object written),
//!   durable;
//! * **incremental**: K objects (10,000) changed through `get_mut`, then
//!   `Heap::save_store` into the same store: capture (on the calling thread)
//!   and commit (durable) timed apart;
//! * **capture per 100K**: the incremental capture's time per 100,000
//!   captured objects.
//!
//! Stores: redb (with `--features redb`) and the file store (the whole
//! store rewritten per save, so an incremental save there costs a whole
//! file). Then, into a store in memory, the capture alone: R captures of K
//! changed objects (ns per captured object, against a whole capture's ns
//! per object in the same run), and a capture spread over frames (1 ms
//! steps, the mutator writing 100 objects between steps): steps, the
//! longest step and the final step.
//!
//! `cargo run --release -p coreobject-bench --features redb -- store [--objects N] [--changed K] [--reps R]`
//! (part of `all`, at 20,000 objects with `--quick`).
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use coreobject::save::{CaptureBudget, ChangeSet, FileStore, MemStore, SaveStore, StoreSaved};
use coreobject::{Heap, Obj};

use crate::saveload::{world_and_things, Thing, LEVELS};

/// The `saveload` world.
fn world(n: usize) -> (Heap, Vec<Obj<Thing>>) {
    let (heap, things, _) = world_and_things(n).unwrap();
    (heap, things)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

struct Row {
    whole: f64,
    capture: f64,
    commit: f64,
    incremental: f64,
}

/// Changes `k` random objects (some twice), then captures what changed
/// since the store's last save: the change set, its counts, and the
/// capture's time.
fn change_and_capture(
    heap: &mut Heap,
    things: &[Obj<Thing>],
    k: usize,
    rng: &mut fastrand::Rng,
    store: &mut dyn SaveStore,
) -> (ChangeSet, StoreSaved, Duration) {
    for _ in 0..k {
        let t = things[rng.usize(..things.len())];
        heap[t].a += 1;
    }
    let meta = store.meta().unwrap();
    let t = Instant::now();
    let (change, saved) = heap.capture(meta.as_ref()).unwrap();
    let d = t.elapsed();
    assert!(saved.written <= k && saved.written > k / 2);
    (change, saved, d)
}

fn once(
    heap: &mut Heap,
    things: &[Obj<Thing>],
    k: usize,
    rng: &mut fastrand::Rng,
    store: &mut dyn SaveStore,
) -> Row {
    heap.forget_store();
    let t = Instant::now();
    let s = heap.save_store(store).unwrap();
    let whole = ms(t.elapsed());
    assert_eq!(s.written, things.len() + LEVELS);
    let (change, _, capture) = change_and_capture(heap, things, k, rng, store);
    let t = Instant::now();
    store.commit(&change).unwrap();
    let commit = t.elapsed();
    Row {
        whole,
        capture: ms(capture),
        commit: ms(commit),
        incremental: ms(capture + commit),
    }
}

fn bench(
    name: &str,
    heap: &mut Heap,
    things: &[Obj<Thing>],
    k: usize,
    runs: usize,
    open: &dyn Fn(&Path) -> Box<dyn SaveStore>,
    dir: &Path,
) {
    let mut rng = fastrand::Rng::with_seed(27);
    let mut rows = Vec::new();
    for r in 0..runs {
        let path: PathBuf = dir.join(format!("{name}-{r}"));
        let _ = std::fs::remove_dir_all(&path);
        let _ = std::fs::remove_file(&path);
        let mut store = open(&path);
        let row = once(heap, things, k, &mut rng, &mut *store);
        println!(
            "{name} run {r}: whole {:.1} ms, incremental {:.1} ms (capture {:.2} ms, commit {:.1} ms)",
            row.whole, row.incremental, row.capture, row.commit
        );
        rows.push(row);
        drop(store);
        let _ = std::fs::remove_dir_all(&path);
        let _ = std::fs::remove_file(&path);
    }
    let col = |f: fn(&Row) -> f64| median(&mut rows.iter().map(f).collect::<Vec<_>>());
    let (whole, inc, cap, commit) = (
        col(|r| r.whole),
        col(|r| r.incremental),
        col(|r| r.capture),
        col(|r| r.commit),
    );
    println!(
        "{name} medians of {runs}: whole {whole:.1} ms | incremental {inc:.1} ms (capture {cap:.2}, commit {commit:.1}) | incremental / whole {:.3} | capture {:.2} ms per 100K changed",
        inc / whole,
        cap * 100_000.0 / k as f64
    );
}

/// The capture alone, into a store in memory.
fn capture_only(heap: &mut Heap, things: &[Obj<Thing>], k: usize, runs: usize) {
    let mut rng = fastrand::Rng::with_seed(28);
    let mut store = MemStore::default();
    heap.forget_store();
    let t = Instant::now();
    let (change, whole) = heap.capture(None).unwrap();
    let whole_ns = t.elapsed().as_nanos() as f64 / whole.written as f64;
    store.commit(&change).unwrap();
    drop(change);
    let mut per = Vec::new();
    for r in 0..runs {
        let (change, saved, d) = change_and_capture(heap, things, k, &mut rng, &mut store);
        store.commit(&change).unwrap();
        let ns = d.as_nanos() as f64 / saved.written as f64;
        println!(
            "capture run {r}: {} objects in {:.2} ms, {ns:.0} ns per object",
            saved.written,
            ms(d)
        );
        per.push(ns);
    }
    let med = median(&mut per);
    println!(
        "capture medians of {runs}: {med:.0} ns per captured object ({:.2} ms per 100K) | whole capture {whole_ns:.0} ns per object | incremental / whole per object {:.2}",
        med * 1e5 / 1e6,
        med / whole_ns
    );

    // Spread over frames: 1 ms steps, 100 writes between steps.
    for _ in 0..k {
        let t = things[rng.usize(..things.len())];
        heap[t].a += 1;
    }
    let meta = store.meta().unwrap();
    let mut cap = heap.capture_begin(meta.as_ref());
    let mut longest = Duration::ZERO;
    let (saved, last) = loop {
        let t = Instant::now();
        let done = heap
            .capture_step(&mut cap, CaptureBudget::Time(Duration::from_millis(1)))
            .unwrap();
        let d = t.elapsed();
        longest = longest.max(d);
        if let Some((change, saved)) = done {
            store.commit(&change).unwrap();
            break (saved, d);
        }
        for _ in 0..100 {
            let t = things[rng.usize(..things.len())];
            heap[t].a += 1;
        }
    };
    println!(
        "capture in 1 ms steps, 100 writes between steps: {} steps, {} objects written, longest step {:.2} ms, final step {:.2} ms",
        cap.steps(),
        saved.written,
        ms(longest),
        ms(last)
    );
}

/// Runs the store benchmark: `n` objects, `k` changed, `runs` repetitions
/// (`stores`: with the redb and file rows, else the capture alone).
pub fn run(n: usize, k: usize, runs: usize, stores: bool) {
    let (mut heap, things) = world(n);
    println!(
        "store: world of {} objects, {k} changed per incremental save",
        heap.len()
    );
    let dir = std::env::temp_dir().join(format!("coreobject-bench-store-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    #[cfg(feature = "redb")]
    if stores {
        bench(
            "redb",
            &mut heap,
            &things,
            k,
            runs,
            &|p| Box::new(coreobject::save::RedbStore::open(p).unwrap()),
            &dir,
        );
    }
    if stores {
        bench(
            "file",
            &mut heap,
            &things,
            k,
            runs,
            &|p| Box::new(FileStore::open(p, 2).unwrap()),
            &dir,
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    capture_only(&mut heap, &things, k, runs);
}

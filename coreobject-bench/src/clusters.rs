//! The `clusters` workload: what GC clusters save a full collection.
//!
//! A world of `n` objects: one rooted world object holding `levels`
//! levels; each level holds its share of nine tenths of the objects as
//! props (each prop references the next one in its level and one shared
//! asset), and the last tenth are the shared assets, held by the world.
//! The same world is built twice, in two heaps; in the second every level
//! becomes a GC cluster (`Heap::create_cluster`). Each heap then runs
//! `reps` full collections that free nothing; printed are the medians of
//! their times and marking times, their ratio, and what making the
//! clusters cost. Every collection is checked to free nothing and mark
//! every object.

use std::time::{Duration, Instant};

use coreobject::{GcConfig, Heap, HeapConfig, Obj, Object};

#[derive(Object, Default)]
struct World {
    levels: Vec<Obj<Level>>,
    assets: Vec<Obj<Asset>>,
}

#[derive(Object, Default)]
struct Level {
    props: Vec<Obj<Prop>>,
}

#[derive(Object)]
struct Prop {
    next: Option<Obj<Prop>>,
    asset: Obj<Asset>,
    hp: u64,
}

/// Shared between levels: kept out of their clusters.
#[derive(Object, Default)]
#[object(cluster = false)]
struct Asset {
    bytes: u64,
}

/// Builds the world; with `kit`, each level's props draw their assets from
/// that many of the shared assets (as a game level uses a kit of meshes and
/// materials), otherwise each prop references any asset.
fn build(n: usize, levels: usize, kit: Option<usize>) -> (Heap, Vec<Obj<Level>>) {
    let heap = Heap::with_config(HeapConfig {
        max_objects: (n as u32 + 16).max(HeapConfig::DEFAULT.max_objects),
        gc: GcConfig::MANUAL,
        ..HeapConfig::DEFAULT
    })
    .expect("heap");
    let mut heap = heap;
    let world = heap.spawn(World::default()).root().create().expect("world");
    let shared = n / 10;
    let assets: Vec<Obj<Asset>> = (0..shared)
        .map(|i| heap.create(Asset { bytes: i as u64 }))
        .collect();
    let per_level = (n - shared) / levels;
    let mut all_levels = Vec::with_capacity(levels);
    for l in 0..levels {
        // Props live inside their level (their outer), so the level's
        // cluster takes them in; the shared assets stay outside.
        let level = heap.create(Level::default());
        let mut props = Vec::with_capacity(per_level);
        let mut next = None;
        for k in 0..per_level {
            let pick = match kit {
                Some(kit) => l * 7919 + (k % kit.max(1)) * 104_729,
                None => l * 7919 + k * 104_729,
            };
            let asset = assets[pick % shared.max(1)];
            let p = heap
                .spawn(Prop {
                    next,
                    asset,
                    hp: k as u64,
                })
                .outer(level)
                .create()
                .expect("prop");
            next = Some(p);
            props.push(p);
        }
        heap[level].props = props;
        all_levels.push(level);
    }
    heap[world].levels = all_levels.clone();
    heap[world].assets = assets;
    (heap, all_levels)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Builds both worlds, once with props referencing any asset and once
/// with level kits of `kit` assets (if not 0), and prints the comparisons.
pub fn run(n: usize, levels: usize, reps: usize, kit: usize) -> Result<(), String> {
    println!(
        "coreobject-bench clusters: {n} objects, {levels} levels (9/10 of the objects in them), {reps} full collections each"
    );
    compare(n, levels, reps, None)?;
    if kit > 0 {
        compare(n, levels, reps, Some(kit))?;
    }
    Ok(())
}

/// Work units per slice of the incremental cycles.
const SLICE: usize = 4096;

fn compare(n: usize, levels: usize, reps: usize, kit: Option<usize>) -> Result<(), String> {
    match kit {
        None => println!("props reference any of the shared assets:"),
        Some(k) => println!("each level's props reference a kit of {k} shared assets:"),
    }
    let (mut plain, _) = build(n, levels, kit);
    let (mut clustered, lv) = build(n, levels, kit);
    let t = Instant::now();
    for &l in &lv {
        clustered.create_cluster(l).map_err(|e| e.to_string())?;
    }
    let make = t.elapsed();
    let report = clustered.cluster_report();
    let live = plain.len();
    let mut rows = Vec::new();
    for (name, heap) in [("unclustered", &mut plain), ("clustered", &mut clustered)] {
        let (mut total, mut mark, mut sliced, mut slices) = (Vec::new(), Vec::new(), Vec::new(), 0);
        for _ in 0..reps.max(1) {
            let s = heap.collect().map_err(|e| e.to_string())?;
            if s.freed != 0 || s.marked != live || heap.len() != live {
                return Err(format!(
                    "{name}: a collection freed {} and marked {} of {live}",
                    s.freed, s.marked
                ));
            }
            total.push(s.total);
            mark.push(s.mark);
            // The same cycle in slices of SLICE units.
            let (mut time, mut n) = (Duration::ZERO, 0);
            let s = loop {
                let tick = heap.step(SLICE);
                time += tick.time;
                n += 1;
                if let Some(s) = tick.completed {
                    break s;
                }
            };
            if s.freed != 0 || s.marked != live {
                return Err(format!("{name}: a sliced cycle freed {}", s.freed));
            }
            sliced.push(time);
            slices = n;
        }
        rows.push((name, median(total), median(mark), median(sliced), slices));
    }
    println!(
        "  {:<12} {:>12} {:>12} {:>16} {:>8}",
        "world", "collect ms", "mark ms", "sliced cycle ms", "slices"
    );
    for (name, total, mark, sliced, slices) in &rows {
        println!(
            "  {:<12} {:>12.2} {:>12.2} {:>16.2} {:>8}",
            name,
            total.as_secs_f64() * 1e3,
            mark.as_secs_f64() * 1e3,
            sliced.as_secs_f64() * 1e3,
            slices
        );
    }
    let ratio = rows[0].1.as_secs_f64() / rows[1].1.as_secs_f64();
    let mark_ratio = rows[0].2.as_secs_f64() / rows[1].2.as_secs_f64();
    let sliced_ratio = rows[0].3.as_secs_f64() / rows[1].3.as_secs_f64();
    println!(
        "  clustered collection {ratio:.2}x faster (marking {mark_ratio:.2}x, sliced cycle {sliced_ratio:.2}x); {} objects in {} clusters referencing {} objects outside them, made in {:.2} ms ({:.2}x the unclustered marking)",
        report.total_members,
        report.clusters.len(),
        report.total_external_refs,
        make.as_secs_f64() * 1e3,
        make.as_secs_f64() / rows[0].2.as_secs_f64()
    );
    Ok(())
}

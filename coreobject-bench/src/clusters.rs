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

fn build(n: usize, levels: usize) -> (Heap, Vec<Obj<Level>>) {
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
        let mut props = Vec::with_capacity(per_level);
        let mut next = None;
        for k in 0..per_level {
            let asset = assets[(l * 7919 + k * 104_729) % shared.max(1)];
            let p = heap.create(Prop {
                next,
                asset,
                hp: k as u64,
            });
            next = Some(p);
            props.push(p);
        }
        all_levels.push(heap.create(Level { props }));
    }
    heap[world].levels = all_levels.clone();
    heap[world].assets = assets;
    (heap, all_levels)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Builds both worlds and prints the comparison.
pub fn run(n: usize, levels: usize, reps: usize) -> Result<(), String> {
    println!(
        "coreobject-bench clusters: {n} objects, {levels} levels (9/10 of the objects in them), {reps} full collections each"
    );
    let (mut plain, _) = build(n, levels);
    let (mut clustered, lv) = build(n, levels);
    let t = Instant::now();
    for &l in &lv {
        clustered.create_cluster(l).map_err(|e| e.to_string())?;
    }
    let make = t.elapsed();
    let members: usize = clustered.cluster_report().total_members;
    let live = plain.len();
    let mut rows = Vec::new();
    for (name, heap) in [("unclustered", &mut plain), ("clustered", &mut clustered)] {
        let (mut total, mut mark) = (Vec::new(), Vec::new());
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
        }
        rows.push((name, median(total), median(mark)));
    }
    println!("  {:<12} {:>12} {:>12}", "world", "collect ms", "mark ms");
    for (name, total, mark) in &rows {
        println!(
            "  {:<12} {:>12.2} {:>12.2}",
            name,
            total.as_secs_f64() * 1e3,
            mark.as_secs_f64() * 1e3
        );
    }
    let ratio = rows[0].1.as_secs_f64() / rows[1].1.as_secs_f64();
    let mark_ratio = rows[0].2.as_secs_f64() / rows[1].2.as_secs_f64();
    println!(
        "  clustered collection {ratio:.2}x faster (marking {mark_ratio:.2}x); {members} objects in {levels} clusters, made in {:.2} ms ({:.2}x the unclustered marking)",
        make.as_secs_f64() * 1e3,
        make.as_secs_f64() / rows[0].2.as_secs_f64()
    );
    Ok(())
}

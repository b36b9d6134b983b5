//! The `pages` workload: object memory after a peak.
//!
//! A million 56-byte objects, held by one rooted holder; then four in five
//! die, and the survivors churn: each round one percent of them die at
//! random and as many are created, and a full collection runs. Printed at
//! checkpoints: the heap's object bytes against the bytes of its object
//! pages ([`MemoryReport`](coreobject::MemoryReport)). Objects never move,
//! so pages empty out only as their survivors die; creation fills the
//! fullest pages first, so that the sparse ones are left to empty.
//!
//! Two ways to die at the fall: **random** (every page keeps about a fifth)
//! and **thinning** (the oldest objects survive most: 40% of the first
//! down to none of the last, so pages differ in how full they stay).
//! Deterministic: no timing enters the figures.

use coreobject::{GcConfig, Heap, HeapConfig, Obj, Object};

#[derive(Object)]
struct Blob {
    v: [u64; 6],
}

#[derive(Object, Default)]
struct Holder {
    kids: Vec<Obj<Blob>>,
}

/// Runs both scenarios with a peak of `peak` objects and `rounds` churn
/// rounds, printing a table each.
pub fn run(peak: usize, rounds: usize) -> Result<(), String> {
    println!("coreobject-bench pages: {peak} objects at the peak, then a fifth churning 1% a round for {rounds} rounds");
    for thinning in [false, true] {
        println!();
        println!(
            "  {} survivors",
            if thinning { "thinning" } else { "random" }
        );
        println!(
            "  {:<16} {:>9} {:>13} {:>13} {:>7} {:>8}",
            "when", "objects", "object bytes", "page bytes", "ratio", "in use"
        );
        scenario(peak, rounds, thinning)?;
    }
    Ok(())
}

fn scenario(peak: usize, rounds: usize, thinning: bool) -> Result<(), String> {
    let mut heap = Heap::with_config(HeapConfig {
        max_objects: (peak as u32 + 1).max(1 << 16),
        gc: GcConfig::MANUAL,
        ..HeapConfig::DEFAULT
    })
    .map_err(|e| e.to_string())?;
    let root = heap.create(Holder::default());
    heap.add_to_root(root).map_err(|e| e.to_string())?;
    let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move |n: usize| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng % n as u64) as usize
    };
    let report = |heap: &Heap, when: &str| {
        let r = heap.memory_report();
        println!(
            "  {when:<16} {:>9} {:>13} {:>13} {:>6.2}x {:>7.0}%",
            heap.len() - 1,
            r.object_bytes,
            r.page_bytes,
            r.page_bytes as f64 / r.object_bytes.max(1) as f64,
            r.slot_bytes as f64 * 100.0 / r.page_bytes.max(1) as f64
        );
    };
    for i in 0..peak {
        let b = heap.create(Blob { v: [i as u64; 6] });
        heap[root].kids.push(b);
    }
    heap.collect().map_err(|e| e.to_string())?;
    report(&heap, "peak");
    let kids = std::mem::take(&mut heap[root].kids);
    let n = kids.len();
    let kept: Vec<_> = if thinning {
        kids.into_iter()
            .enumerate()
            .filter(|&(i, _)| next(1_000_000) < (400_000.0 * (1.0 - i as f64 / n as f64)) as usize)
            .map(|(_, k)| k)
            .collect()
    } else {
        let mut kids = kids;
        while kids.len() > n / 5 {
            let i = next(kids.len());
            kids.swap_remove(i);
        }
        kids
    };
    heap[root].kids = kept;
    heap.collect().map_err(|e| e.to_string())?;
    report(&heap, "after the fall");
    let step = (heap[root].kids.len() / 100).max(1);
    for r in 1..=rounds {
        for _ in 0..step {
            let len = heap[root].kids.len();
            let i = next(len);
            heap[root].kids.swap_remove(i);
        }
        for i in 0..step {
            let b = heap.create(Blob { v: [i as u64; 6] });
            heap[root].kids.push(b);
        }
        heap.collect().map_err(|e| e.to_string())?;
        if r % (rounds / 4).max(1) == 0 {
            report(&heap, &format!("round {r}"));
        }
    }
    Ok(())
}

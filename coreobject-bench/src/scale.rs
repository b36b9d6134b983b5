//! The `scale` workload: how coreobject's cost per object changes from a
//! million objects to fifty million.
//!
//! One tree of `Node { kids: Vec<Obj<Node>>, v: u64 }` with fan-out 8, built
//! top-down from one rooted node (node `i`'s children are `8i+1 ..= 8i+8`).
//! Then two full collections: one that frees nothing, and one after the root
//! drops 7 of its 8 subtrees, which frees most of the nodes (62-76% at the
//! default sizes: the last level fills from the left, so the kept subtree is
//! the largest). For each:
//! time per object, and the resident memory (RSS) it adds at its peak
//! (`VmHWM` after resetting it through `/proc/self/clear_refs`).
//!
//! Each size and repetition runs in a fresh process (this executable with
//! the hidden `--worker` flag), so that RSS is the heap's own and not what a
//! previous run left in the allocator.

use std::time::Instant;

use coreobject::{GcConfig, Heap, HeapConfig, Obj, Object};
use serde_json::{json, Value};

#[derive(Object)]
struct Node {
    kids: Vec<Obj<Node>>,
    v: u64,
}

/// Fan-out of the tree.
const FAN: usize = 8;

/// Resident and peak resident bytes of this process.
fn rss() -> (u64, u64) {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        s.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Resets the peak RSS to the current RSS (Linux: `clear_refs` value 5).
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Nodes in the subtree of node `i` of an `n`-node tree.
fn subtree(n: usize, i: usize) -> usize {
    let (mut count, mut lo, mut hi) = (0, i, i);
    while lo < n {
        count += hi.min(n - 1) - lo + 1;
        lo = lo * FAN + 1;
        hi = hi * FAN + FAN;
    }
    count
}

/// One full collection: its stats, its time, how much its peak RSS rose
/// above the RSS before it, and the RSS after it.
fn timed_collect(
    heap: &mut Heap,
) -> Result<(coreobject::CollectStats, std::time::Duration, u64, u64), String> {
    reset_peak();
    let (before, _) = rss();
    let t = Instant::now();
    let stats = heap.collect().map_err(|e| e.to_string())?;
    let time = t.elapsed();
    let (after, peak) = rss();
    Ok((stats, time, peak.saturating_sub(before), after))
}

/// One measurement at `n` objects; returns its figures as JSON.
pub fn measure(n: usize) -> Result<Value, String> {
    let (rss0, _) = rss();
    let mut heap = Heap::with_config(HeapConfig {
        max_objects: (n as u32).max(1 << 16),
        gc: GcConfig::MANUAL,
        ..HeapConfig::DEFAULT
    })
    .map_err(|e| e.to_string())?;

    // Build: parents are remembered only while they still take children.
    let t = Instant::now();
    let root = heap.create(Node {
        kids: Vec::new(),
        v: 0,
    });
    heap.add_to_root(root).map_err(|e| e.to_string())?;
    let mut parents = std::collections::VecDeque::new();
    parents.push_back(root);
    for i in 1..n {
        let parent = *parents.front().expect("a parent with room");
        let kid = heap.create(Node {
            kids: Vec::new(),
            v: i as u64,
        });
        let p = &mut heap[parent];
        p.kids.push(kid);
        if p.kids.len() == FAN {
            parents.pop_front();
        }
        if i * FAN + 1 < n {
            parents.push_back(kid);
        }
    }
    drop(parents);
    let build = t.elapsed();
    let (rss_built, _) = rss();

    // A collection that frees nothing.
    let (keep, collect_none, grow_none, _) = timed_collect(&mut heap)?;
    if keep.freed != 0 || heap.len() != n {
        return Err(format!(
            "scale {n}: the first collection freed {} of {n}",
            keep.freed
        ));
    }

    // Drop 7 of the root's 8 subtrees: a collection that frees most.
    let dropped: usize = (2..=FAN).map(|i| subtree(n, i)).sum();
    heap[root].kids.truncate(1);
    let (most, collect_most, grow_most, after) = timed_collect(&mut heap)?;
    if most.freed != dropped || heap.len() != n - dropped {
        return Err(format!(
            "scale {n}: the second collection freed {} (expected {dropped}), {} left",
            most.freed,
            heap.len()
        ));
    }
    let sum: u64 = heap.iter_of::<Node>().map(|(_, v)| v.v).sum();
    let kept = n - dropped;
    std::hint::black_box(sum);

    let per = |d: std::time::Duration, k: usize| d.as_secs_f64() * 1e9 / k as f64;
    Ok(json!({
        "objects": n,
        "freed": most.freed,
        "freed_fraction": most.freed as f64 / n as f64,
        "kept": kept,
        "build_ns_per_object": per(build, n),
        "heap_rss_bytes_per_object": rss_built.saturating_sub(rss0) as f64 / n as f64,
        "collect_none_ns_per_object": per(collect_none, n),
        "collect_none_rss_growth_bytes_per_object": grow_none as f64 / n as f64,
        "collect_most_ns_per_object": per(collect_most, n),
        "collect_most_rss_growth_bytes_per_object": grow_most as f64 / n as f64,
        "rss_after_most_bytes": after,
        "mark_ms": most.mark.as_secs_f64() * 1e3,
        "destroy_ms": most.destroy.as_secs_f64() * 1e3,
    }))
}

/// The metrics, in table order: (JSON key, title, unit).
pub const METRICS: [(&str, &str, &str); 7] = [
    ("build_ns_per_object", "build", "ns/object"),
    (
        "heap_rss_bytes_per_object",
        "heap RSS after build",
        "B/object",
    ),
    (
        "collect_none_ns_per_object",
        "collection freeing none",
        "ns/object",
    ),
    (
        "collect_none_rss_growth_bytes_per_object",
        "  its RSS growth",
        "B/object",
    ),
    ("freed_fraction", "share the next one frees", ""),
    (
        "collect_most_ns_per_object",
        "collection freeing most",
        "ns/object",
    ),
    (
        "collect_most_rss_growth_bytes_per_object",
        "  its RSS growth",
        "B/object",
    ),
];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        f64::NAN
    } else {
        v[v.len() / 2]
    }
}

/// Runs every size `reps` times, each in a fresh worker process, and prints
/// the table of medians and one `JSON {...}` line.
pub fn run(sizes: &[usize], reps: usize) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    println!(
        "coreobject-bench scale: fan-out-8 tree, medians of {reps} runs, each in a fresh process"
    );
    let mut all = Vec::new();
    for &n in sizes {
        let mut runs = Vec::new();
        for _ in 0..reps {
            let out = std::process::Command::new(&exe)
                .args(["--worker", "scale", "--sizes", &n.to_string()])
                .output()
                .map_err(|e| format!("cannot run a worker: {e}"))?;
            let text = String::from_utf8_lossy(&out.stdout);
            let line = text
                .lines()
                .find_map(|l| l.strip_prefix("SCALE "))
                .ok_or_else(|| {
                    format!(
                        "scale {n}: the worker failed: {}",
                        String::from_utf8_lossy(&out.stderr)
                    )
                })?;
            let v: Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
            runs.push(v);
        }
        all.push((n, runs));
    }
    println!();
    print!("  {:<28} {:>9}", "metric", "unit");
    for (n, _) in &all {
        print!(" {:>12}", format!("{}M", n / 1_000_000));
    }
    println!("   last/first");
    let mut medians = serde_json::Map::new();
    for (key, title, unit) in METRICS {
        print!("  {title:<28} {unit:>9}");
        let mut row = Vec::new();
        for (_, runs) in &all {
            let m = median(runs.iter().filter_map(|r| r[key].as_f64()).collect());
            row.push(m);
            if m < 10.0 {
                print!(" {m:>12.2}");
            } else {
                print!(" {m:>12.1}");
            }
        }
        let ratio = row.last().unwrap_or(&f64::NAN) / row.first().unwrap_or(&f64::NAN);
        println!("   {ratio:>6.2}x");
        medians.insert(key.to_string(), json!(row));
    }
    println!();
    println!(
        "  every run verified: the first collection freed nothing, the second exactly the dropped subtrees"
    );
    let json = json!({
        "bench": "coreobject-bench scale",
        "sizes": sizes,
        "reps": reps,
        "medians": medians,
        "runs": all.iter().map(|(n, r)| json!({"objects": n, "runs": r})).collect::<Vec<_>>(),
    });
    println!("JSON {json}");
    Ok(())
}

//! The `weak` workload's three loops for one peer, repeated in one process
//! on one heap, for profiling and for A/B runs of the resolve path: `N`
//! objects (a random tenth freed), `M` random lookups of their weak handles,
//! each loop timed `R` times; prints each loop's minimum and median in
//! ns/lookup, wall clock, and the median of the thread's CPU time (which a
//! shared machine disturbs less: time spent waiting for a core is left out).
//! For coreobject it also prints the build's time per object (creation,
//! downgrades and one collection) and the process's `Rss` and
//! `AnonHugePages` from `/proc/self/smaps_rollup`, to tell which pages the
//! lookups walk.
//!
//! `cargo run --release -p coreobject-bench --bin resolve_loop -- coreobject [N M R]`
//! (or `slotmap`); with `COREOBJECT_HUGE_PAGES=1` in the environment the
//! heap is made with `HeapConfig::huge_pages` (BENCHMARKS.md, "Huge pages as
//! a setting"). The lookups are the same draws for both peers; every loop's
//! hit count and sum is checked against the plan.
mod common;
use common::{cpu_ns, median};
use std::hint::black_box;
use std::time::Instant;

use coreobject::{GcConfig, Heap, HeapConfig, Obj, Object, Weak};

#[derive(Object)]
struct Val {
    v: u64,
}

#[derive(Object)]
struct Keep {
    keep: Vec<Obj<Val>>,
}

struct Plan {
    n: usize,
    freed: Vec<bool>,
    lookups: Vec<u32>,
    hits: u64,
    sum: u64,
}

fn plan(n: usize, m: usize) -> Plan {
    let mut rng = fastrand::Rng::with_seed(1);
    let freed: Vec<bool> = (0..n).map(|_| rng.u32(0..10) == 0).collect();
    let lookups: Vec<u32> = (0..m).map(|_| rng.u32(0..n as u32)).collect();
    let (mut hits, mut sum) = (0, 0);
    for &i in &lookups {
        if !freed[i as usize] {
            hits += 1;
            sum += i as u64;
        }
    }
    Plan {
        n,
        freed,
        lookups,
        hits,
        sum,
    }
}

/// Times `f` `r` times; `f` returns (hits, sum) and the plain loops' are checked.
fn timed(
    name: &str,
    r: usize,
    m: usize,
    check: Option<(u64, u64)>,
    mut f: impl FnMut() -> (u64, u64),
) {
    let mut cpu = Vec::with_capacity(r);
    let mut ns: Vec<f64> = (0..r)
        .map(|_| {
            let c = cpu_ns();
            let t = Instant::now();
            let got = black_box(f());
            let d = t.elapsed().as_nanos() as f64 / m as f64;
            cpu.push(cpu_ns().saturating_sub(c) as f64 / m as f64);
            if let Some(want) = check {
                assert_eq!(got, want, "{name}: wrong hits or sum");
            }
            d
        })
        .collect();
    ns.sort_by(f64::total_cmp);
    println!(
        "{name:>8}: min {:7.2} median {:7.2} ns/lookup, cpu median {:7.2}",
        ns[0],
        ns[ns.len() / 2],
        median(cpu)
    );
}

#[inline(always)]
fn plain(p: &Plan, mut get: impl FnMut(usize) -> Option<u64>) -> (u64, u64) {
    let (mut hits, mut sum) = (0u64, 0u64);
    for &i in &p.lookups {
        if let Some(v) = get(black_box(i) as usize) {
            hits += 1;
            sum += v;
        }
    }
    (hits, sum)
}

#[inline(always)]
fn chained(p: &Plan, mut get: impl FnMut(usize) -> Option<u64>) -> (u64, u64) {
    let (mut hits, mut sum, mut last) = (0u64, 0u64, 0usize);
    for &i in &p.lookups {
        let mut j = i as usize + last;
        if j >= p.n {
            j -= p.n;
        }
        last = match get(black_box(j)) {
            Some(v) => {
                hits += 1;
                sum += v;
                v as usize
            }
            None => 0,
        };
    }
    (hits, sum)
}

/// Prints the process's resident and huge-page memory (Linux), to see
/// which pages the lookups walk.
fn memory() {
    let Ok(s) = std::fs::read_to_string("/proc/self/smaps_rollup") else {
        return;
    };
    let kb = |key: &str| {
        s.lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .unwrap_or(0)
    };
    println!(
        "  memory: Rss {} kB, AnonHugePages {} kB",
        kb("Rss:"),
        kb("AnonHugePages:")
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let peer = args.get(1).map(String::as_str).unwrap_or("coreobject");
    let num = |k: usize, d: usize| args.get(k).map_or(d, |s| s.parse().expect("a number"));
    let (n, m, r) = (num(2, 1_000_000), num(3, 2_000_000), num(4, 9));
    let p = plan(n, m);
    let want = Some((p.hits, p.sum));
    match peer {
        "coreobject" => {
            let config = HeapConfig {
                max_objects: (n as u32 + 1).max(HeapConfig::DEFAULT.max_objects),
                gc: GcConfig::MANUAL,
                huge_pages: std::env::var("COREOBJECT_HUGE_PAGES").is_ok_and(|v| v == "1"),
                ..HeapConfig::DEFAULT
            };
            println!("   huge_pages: {}", config.huge_pages);
            let (c0, t0) = (cpu_ns(), Instant::now());
            let mut heap = Heap::with_config(config).expect("heap config");
            let mut weak: Vec<Weak<Val>> = Vec::with_capacity(n);
            let mut keep = Vec::with_capacity(n);
            for i in 0..n {
                let h = heap.create(Val { v: i as u64 });
                weak.push(h.downgrade());
                if !p.freed[i] {
                    keep.push(h);
                }
            }
            let holder = heap.create(Keep { keep });
            heap.add_to_root(holder).expect("root");
            heap.collect().expect("collect");
            println!(
                "   build: {:7.2} ns/object, cpu {:7.2} (with one collection)",
                t0.elapsed().as_nanos() as f64 / n as f64,
                cpu_ns().saturating_sub(c0) as f64 / n as f64
            );
            memory();
            let heap = &heap;
            let get = |i: usize| heap.get(weak[i]).map(|o| o.v);
            timed("plain", r, m, want, || plain(&p, get));
            timed("chained", r, m, None, || chained(&p, get));
            timed("get_many", r, m, want, || {
                let hs = p.lookups.iter().map(|&i| weak[black_box(i) as usize]);
                let (mut hits, mut sum) = (0u64, 0u64);
                for v in heap.get_many(hs).flatten() {
                    hits += 1;
                    sum += v.v;
                }
                (hits, sum)
            });
        }
        "slotmap" => {
            let mut map = slotmap::SlotMap::with_capacity(n);
            let keys: Vec<slotmap::DefaultKey> = (0..n).map(|i| map.insert(i as u64)).collect();
            for (i, &k) in keys.iter().enumerate() {
                if p.freed[i] {
                    map.remove(k);
                }
            }
            let map = &map;
            let get = |i: usize| map.get(keys[i]).copied();
            timed("plain", r, m, want, || plain(&p, get));
            timed("chained", r, m, None, || chained(&p, get));
        }
        other => panic!("unknown peer {other}: coreobject or slotmap"),
    }
}

//! The `young` workload: what a minor (generational) cycle costs a program
//! that keeps a big world and allocates every frame, beside a full
//! collection of the same heap (coreobject alone; no peer collects by
//! generation).
//!
//! # Per repetition, per world size `N`
//!
//! 1. The `world` of `N` objects is built with [`world`]'s own builder
//!    (nothing detached: every object stays reachable through the tree of
//!    levels, actors and components), then collected once (`Heap::collect`),
//!    so that every object is old. A second full collection of that heap is
//!    timed (JSON: `full_no_garbage_ms`).
//! 2. `F + 1` **frames**, each of which
//!    * creates `Y` objects (world nodes holding one reference to a random
//!      world object); a tenth of them (every tenth) is stored into a random
//!      world object through `Heap::get_mut` (pushed onto its references),
//!      the rest is dropped;
//!    * changes 1% of the world objects: one of the object's random
//!      references (never a tree child, so nothing becomes unreachable) is
//!      rewritten through `get_mut` to point at another random world object;
//!    * then runs one **minor cycle** (`Heap::collect_minor`), timed with
//!      `Instant` around the call; the mutator's work is timed apart (JSON).
//!
//!    Frame 0 ends with a full collection (`Heap::collect`) instead, timed
//!    the same way: the **full** reference, a full collection of the same
//!    heap as a minor sees, one frame's garbage included. The minors that
//!    follow run on a heap that has grown by the stored objects since, so
//!    the comparison does not flatter them.
//! 3. A last full collection of the heap as the frames left it (JSON:
//!    `full_end_ms`).
//!
//! Verification, every frame: the cycle was a minor one (frame 0: a major
//! one that marked every object still reachable); a minor considered the
//! `Y` new objects, re-scanned exactly the distinct world objects the frame
//! changed (the remembered set), promoted the stored ones and freed exactly
//! the dropped ones (`CollectStats` and `heap.len()`); every dropped handle
//! stops resolving and every stored one still resolves. At the end, the full
//! collection frees nothing (the frames made no old garbage) and every
//! stored object is still there.
//!
//! Reported: the minor cycle per frame (median and p99, nearest rank, over
//! the frames of a repetition), the full collection ending frame 0,
//! the ratio minor median / full (the target: at most 1/20 at 1M),
//! and the minor's cost per object it had to look at (young objects plus
//! remembered ones), which should stay flat from 100K to 10M objects if the
//! cost follows what the frame did and not the heap. Note that "1% of the
//! old objects" grows with `N`, so the remembered set does too: 1K changes
//! a frame at 100K, 100K at 10M.

use std::time::{Duration, Instant};

use coreobject::{CycleKind, GcConfig, Obj};

use crate::harness::{verify, Metric, Outcome, Peer, Run};
use crate::incremental::{involuntary_switches, quantile};
use crate::world::{self, CoNode, Plan};

/// The workload's name prefix (one workload per world size).
pub const NAME: &str = "young";

/// Fraction of a frame's new objects stored into old objects.
pub const STORED_EVERY: usize = 10;
/// Fraction of the old objects changed each frame, by default.
pub const CHANGED_FRAC: f64 = 0.01;
/// The size the ratio target is defined at.
pub const TARGET_OBJECTS: usize = 1_000_000;
/// The target: a minor cycle costs at most this fraction of a full one.
pub const TARGET_RATIO: f64 = 1.0 / 20.0;

/// The workload's parameters (one world size).
#[derive(Clone, Debug)]
pub struct Params {
    /// Frames.
    pub frames: usize,
    /// Objects created per frame.
    pub per_frame: usize,
    /// Fraction of the world objects changed per frame (at least one).
    pub changed_frac: f64,
    /// Random seed.
    pub seed: u64,
}

/// The workload's name at `n` objects: `young-100K`, `young-1M`, ...
pub fn name(n: usize) -> String {
    let short = if n >= 1_000_000 && n % 1_000_000 == 0 {
        format!("{}M", n / 1_000_000)
    } else if n >= 1000 && n % 1000 == 0 {
        format!("{}K", n / 1000)
    } else {
        n.to_string()
    };
    format!("{NAME}-{short}")
}

/// Whether `w` is one of this workload's results.
pub fn is_young(w: &crate::harness::WorkloadResult) -> bool {
    w.name.starts_with(NAME)
}

/// Metric indices.
const P50: usize = 0;
const P99: usize = 1;
const FULL: usize = 2;
const RATIO: usize = 3;
const PER_OBJECT: usize = 4;

/// The metrics, in table order.
pub fn metrics() -> Vec<Metric> {
    vec![
        Metric::new("minor_p50_ms", "minor cycle per frame, median", "ms"),
        Metric::new("minor_p99_ms", "minor cycle per frame, p99", "ms"),
        Metric::new(
            "full_ms",
            "full collection of the heap a frame leaves (frame 0)",
            "ms",
        ),
        Metric::new("minor_over_full", "minor median / full", "x"),
        Metric::new(
            "minor_ns_per_object",
            "minor median per young or remembered object",
            "ns",
        ),
    ]
}

/// Bytes one world object needs, generously (table item, header, node,
/// its reference vector, the plan and the handle list), to decide whether
/// a size fits in the memory available.
pub const BYTES_PER_OBJECT: usize = 300;

/// The memory the system says is available (Linux `MemAvailable`), if known.
pub fn available_bytes() -> Option<usize> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: usize = info
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// Runs one repetition for `peer` (coreobject only).
pub fn run(peer: Peer, plan: &Plan, p: &Params) -> Outcome {
    if peer != Peer::CoreObject {
        return Outcome::Na("no generational collection");
    }
    match measure(plan, p) {
        Ok(run) => Outcome::Ran(run),
        Err(why) => Outcome::Ran(Run {
            values: vec![f64::NAN; metrics().len()],
            extra: Vec::new(),
            check: Err(why),
        }),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(xs: &[f64]) -> f64 {
    crate::report::summarize(xs).map_or(f64::NAN, |s| s.median)
}

fn measure(plan: &Plan, p: &Params) -> Result<Run, String> {
    let n = plan.n;
    let stored_per_frame = p.per_frame.div_ceil(STORED_EVERY);
    let changed_per_frame = ((n as f64 * p.changed_frac).round() as usize).max(1);
    let room = (p.frames + 1) * stored_per_frame + p.per_frame;
    let mut handles: Vec<Obj<CoNode>> = Vec::with_capacity(n);
    let gc = GcConfig {
        generational: true,
        ..GcConfig::MANUAL
    };
    let mut heap = world::co_build_with_room(plan, gc, room, &mut handles);
    let fail = |what: String| Err::<Run, String>(what);

    // Every object old, then the full reference.
    let t = Instant::now();
    let first = heap.collect().map_err(|e| e.to_string())?;
    let first_ms = ms(t.elapsed());
    crate::alloc::settle();
    let t = Instant::now();
    let full = heap.collect().map_err(|e| e.to_string())?;
    let full_ms = ms(t.elapsed());
    verify(&[
        (
            first.freed == 0,
            format!("first collection freed {}", first.freed),
        ),
        (
            full.kind == CycleKind::Major && full.freed == 0 && full.marked == n,
            format!(
                "full collection: {:?}, freed {}, marked {} of {n}",
                full.kind, full.freed, full.marked
            ),
        ),
    ])?;

    let mut rng = fastrand::Rng::with_seed(p.seed);
    // The frame in which each world object was last changed (+1), to count
    // the distinct changed objects: the remembered set a minor must scan.
    let mut touched: Vec<u32> = vec![0; n];
    let mut kept: Vec<Obj<CoNode>> = Vec::with_capacity((p.frames + 1) * stored_per_frame);
    let mut dropped: Vec<Obj<CoNode>> = Vec::with_capacity(p.per_frame);
    let mut minors = Vec::with_capacity(p.frames);
    let mut mutator = Vec::with_capacity(p.frames);
    let (mut mark, mut sweep, mut destroy) = (Vec::new(), Vec::new(), Vec::new());
    // The minor's wall time around the call less its CollectStats::total
    // (which leaves out the cycle's start and close).
    let mut other = Vec::new();
    let mut remembered_total = 0usize;
    let mut preempted = 0usize;
    let mut expected_len = n;
    // Frame 0 ends with a full collection instead (the reference: a full
    // collection of the heap as a frame leaves it), the others with a minor.
    let mut full_frame_ms = f64::NAN;
    for frame in 0..=p.frames {
        let major = frame == 0;
        let stamp = frame as u32 + 1;
        let mut distinct = 0usize;
        let mut touch = |o: usize, touched: &mut Vec<u32>| {
            if touched[o] != stamp {
                touched[o] = stamp;
                distinct += 1;
            }
        };
        dropped.clear();
        let kept_before = kept.len();
        let t = Instant::now();
        for k in 0..p.per_frame {
            let to = handles[rng.usize(0..n)];
            let h = heap.create(CoNode::new(vec![to]));
            if k % STORED_EVERY == 0 {
                let o = rng.usize(0..n);
                heap.get_mut(handles[o]).expect("world object").refs.push(h);
                touch(o, &mut touched);
                kept.push(h);
            } else {
                dropped.push(h);
            }
        }
        for _ in 0..changed_per_frame {
            let o = rng.usize(0..n);
            let skip = plan.children(o);
            let to = handles[rng.usize(0..n)];
            let refs = &mut heap.get_mut(handles[o]).expect("world object").refs;
            // The random references follow the tree children; the stored
            // young objects were pushed after them, so stay within the plan's.
            let random = plan.refs(o).len() - skip;
            if random == 0 {
                refs.push(to);
            } else {
                refs[skip + rng.usize(0..random)] = to;
            }
            touch(o, &mut touched);
        }
        mutator.push(ms(t.elapsed()));
        expected_len += kept.len() - kept_before;

        let switches = involuntary_switches();
        let t = Instant::now();
        let stats = if major {
            heap.collect()
        } else {
            heap.collect_minor()
        }
        .map_err(|e| e.to_string())?;
        let took = t.elapsed();
        if major {
            full_frame_ms = ms(took);
        } else {
            if switches.is_some() && involuntary_switches() != switches {
                preempted += 1;
            }
            minors.push(ms(took));
            mark.push(ms(stats.mark));
            sweep.push(ms(stats.sweep));
            destroy.push(ms(stats.destroy));
            other.push(ms(took.saturating_sub(stats.total)));
            remembered_total += stats.remembered;
        }

        let stored = kept.len() - kept_before;
        let lost = kept[kept_before..]
            .iter()
            .filter(|&&h| !heap.contains(h))
            .count();
        let alive = dropped.iter().filter(|&&h| heap.contains(h)).count();
        let kind = if major {
            CycleKind::Major
        } else {
            CycleKind::Minor
        };
        let bad = [
            (
                stats.kind == kind,
                format!("frame {frame}: a {:?} cycle ran", stats.kind),
            ),
            (
                major || stats.young == p.per_frame,
                format!("frame {frame}: young {} != {}", stats.young, p.per_frame),
            ),
            (
                major || stats.remembered == distinct,
                format!(
                    "frame {frame}: remembered {} != {distinct} objects changed",
                    stats.remembered
                ),
            ),
            (
                major || stats.promoted == stored,
                format!("frame {frame}: promoted {} != {stored}", stats.promoted),
            ),
            (
                !major || stats.marked == expected_len,
                format!(
                    "frame {frame}: full collection marked {} of {expected_len}",
                    stats.marked
                ),
            ),
            (
                stats.freed == dropped.len(),
                format!("frame {frame}: freed {} != {}", stats.freed, dropped.len()),
            ),
            (
                heap.len() == expected_len,
                format!("frame {frame}: heap.len() {} != {expected_len}", heap.len()),
            ),
            (
                lost == 0,
                format!("frame {frame}: {lost} stored objects were freed"),
            ),
            (
                alive == 0,
                format!("frame {frame}: {alive} dropped objects still resolve"),
            ),
        ];
        if let Err(why) = verify(&bad) {
            return fail(why);
        }
    }

    crate::alloc::settle();
    let t = Instant::now();
    let end = heap.collect().map_err(|e| e.to_string())?;
    let full_end_ms = ms(t.elapsed());
    let lost = kept.iter().filter(|&&h| !heap.contains(h)).count();
    verify(&[
        (
            end.freed == 0 && end.marked == expected_len,
            format!(
                "last full collection: freed {}, marked {} of {expected_len}",
                end.freed, end.marked
            ),
        ),
        (
            lost == 0,
            format!("{lost} stored objects gone after the last full collection"),
        ),
    ])?;

    let mut sorted = minors.clone();
    sorted.sort_by(f64::total_cmp);
    let p50 = quantile(&sorted, 0.5);
    let p99 = quantile(&sorted, 0.99);
    let remembered = remembered_total as f64 / p.frames as f64;
    let looked_at = p.per_frame as f64 + remembered;
    Ok(Run {
        values: vec![
            p50,
            p99,
            full_frame_ms,
            p50 / full_frame_ms,
            p50 * 1e6 / looked_at,
        ],
        extra: vec![
            ("minor_max_ms", sorted[sorted.len() - 1]),
            (
                "minor_mean_ms",
                minors.iter().sum::<f64>() / minors.len() as f64,
            ),
            ("minor_mark_ms", median(&mark)),
            ("minor_sweep_ms", median(&sweep)),
            ("minor_destroy_ms", median(&destroy)),
            ("minor_outside_stats_total_ms", median(&other)),
            ("remembered_per_frame", remembered),
            ("stored_per_frame", stored_per_frame as f64),
            ("changed_per_frame", changed_per_frame as f64),
            ("mutator_ms_per_frame", median(&mutator)),
            ("preempted_frames", preempted as f64),
            ("first_collect_ms", first_ms),
            ("full_no_garbage_ms", full_ms),
            ("full_mark_ms", ms(full.mark)),
            ("full_end_ms", full_end_ms),
            ("objects_at_end", expected_len as f64),
        ],
        check: Ok(()),
    })
}

fn extra_median(r: &crate::harness::PeerResult, key: &str) -> Option<f64> {
    r.extra
        .iter()
        .find(|(k, _)| k == key)
        .and_then(|(_, v)| crate::report::summarize(v))
        .map(|s| s.median)
}

fn param(w: &crate::harness::WorkloadResult, k: &str) -> Option<String> {
    w.params
        .iter()
        .find(|(key, _)| key == k)
        .map(|(_, v)| v.clone())
}

/// Prints one table for every size's results: a row per world size, with
/// the medians over repetitions.
pub fn print_table(results: &[&crate::harness::WorkloadResult]) {
    use crate::harness::Status;
    let Some(first) = results.first() else {
        return;
    };
    let params: Vec<String> = first
        .params
        .iter()
        .filter(|(k, _)| k != "objects")
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    println!();
    println!("== {NAME} ({})", params.join(", "));
    println!();
    println!(
        "  coreobject alone; medians over repetitions of each repetition's figure; minor p50/p99: over the frames \
         (nearest rank); full: Heap::collect ending frame 0 (the N-object world and one frame's objects); \
         per object: minor median / (young + remembered)"
    );
    println!(
        "  {:>8} {:>9} {:>9} {:>9} {:>9} {:>10} {:>11} {:>9} {:>10} {:>9} {:>5}  check",
        "objects",
        "p50 ms",
        "p99 ms",
        "max ms",
        "full ms",
        "minor/full",
        "remembered",
        "ns/object",
        "full end",
        "preempted",
        "reps"
    );
    for w in results {
        for r in &w.peers {
            if matches!(r.status, Status::Na(_)) {
                continue;
            }
            let med = |m: usize| crate::report::summarize(&r.samples[m]).map(|s| s.median);
            let cell = |x: Option<f64>, prec: usize| {
                x.map_or("n/a".to_string(), |x| format!("{x:.prec$}"))
            };
            let status = match &r.status {
                Status::Ok => "ok".to_string(),
                Status::Failed(msg) => format!("FAILED: {msg}"),
                Status::Na(why) => format!("n/a: {why}"),
            };
            println!(
                "  {:>8} {:>9} {:>9} {:>9} {:>9} {:>10} {:>11} {:>9} {:>10} {:>9} {:>5}  {}",
                param(w, "objects").unwrap_or_default(),
                cell(med(P50), 3),
                cell(med(P99), 3),
                cell(extra_median(r, "minor_max_ms"), 3),
                cell(med(FULL), 2),
                med(RATIO).map_or("n/a".to_string(), |x| format!("1/{:.0}", 1.0 / x)),
                cell(extra_median(r, "remembered_per_frame"), 0),
                cell(med(PER_OBJECT), 1),
                cell(extra_median(r, "full_end_ms"), 2),
                cell(extra_median(r, "preempted_frames"), 0),
                r.reps(),
                status
            );
        }
    }
    for w in results {
        for n in &w.notes {
            println!("  note: {n}");
        }
    }
}

/// The target, from this run's figures: at the 1M-object world, a
/// minor cycle costs at most 1/20 of a full collection.
pub fn targets(results: &[crate::harness::WorkloadResult]) -> Vec<crate::report::Target> {
    let young: Vec<&crate::harness::WorkloadResult> =
        results.iter().filter(|w| is_young(w)).collect();
    let objects = |w: &crate::harness::WorkloadResult| {
        param(w, "objects").and_then(|v| v.parse::<usize>().ok())
    };
    // The 1M world if measured, else the largest one measured.
    let Some(w) = young
        .iter()
        .find(|w| objects(w) == Some(TARGET_OBJECTS))
        .or_else(|| young.iter().max_by_key(|w| objects(w)))
    else {
        return Vec::new();
    };
    let per_object: Vec<String> = young
        .iter()
        .map(|w| {
            format!(
                "{} {}",
                param(w, "objects").unwrap_or_default(),
                crate::report::median_of(w, Peer::CoreObject, PER_OBJECT)
                    .map_or("n/a".to_string(), |x| format!("{x:.0} ns")),
            )
        })
        .collect();
    vec![crate::report::Target {
        name: "young 1M: minor cycle <= 1/20 of a full one".into(),
        measured: crate::report::median_of(w, Peer::CoreObject, RATIO),
        limit: TARGET_RATIO,
        unit: "x",
        at_target_size: objects(w) == Some(TARGET_OBJECTS),
        note: format!(
            "minor median / full; minor per young or remembered object: {}",
            per_object.join(", ")
        ),
    }]
}

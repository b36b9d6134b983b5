//! `coreobject-bench`: coreobject against gc-arena 0.7, rust-gc (`gc` 0.5),
//! dumpster 2.1, rust-cc 0.6, slotmap 1.1 (with a hand-rolled mark and
//! sweep), `Rc`/`Box` where they can express the workload, and an `ideal`
//! floor (struct-of-arrays, a bitmap mark, an explicit work list with
//! prefetching, no per-object allocation) — all in one run.
//!
//! ```text
//! coreobject-bench <world|incremental|young|weak|binary-trees|micro|names|saveload|store|all> [flags] [--quick]
//! ```
//!
//! # Workloads
//!
//! * [`world`]: levels, actors, components and `K` random references per
//!   object; a fraction `F` of actors is detached and one full collection
//!   must free exactly them. Build time, collection time and heap bytes per
//!   object. **The layout, the same for every peer**: each object is one
//!   vector of references (tree children first, then the random ones),
//!   allocated once at its exact length, plus a zero-sized drop counter; see
//!   the module docs.
//! * [`incremental`]: the same world, collected as one whole incremental
//!   cycle of frames (a few barriered writes, then one collector step bounded
//!   by a budget of 1, 2 and 5 ms) by coreobject and gc-arena, beside each
//!   one's stop-the-world collection of the same world: steps, p50/p99/max
//!   step, cycle total.
//! * [`young`]: coreobject alone, generational: the world of `N` objects
//!   made old by a full collection, then frames that each create 30K objects
//!   (a tenth stored into old objects through `get_mut`, the rest dropped)
//!   and change 1% of the old objects, each followed by a minor cycle
//!   (`Heap::collect_minor`): minor median and p99 per frame against a full
//!   collection of the same heap, at 100K, 1M and 10M objects.
//! * [`weak`]: `M` random weak-handle resolves over `N` objects, 10% freed.
//! * [`trees`] (`binary-trees`): the Benchmarks Game workload, checked
//!   against the closed form `2^(d+1) - 1` nodes per tree.
//! * [`micro`]: create, resolve, iterate, and root add/remove.
//! * [`names`]: coreobject alone, creating and freeing `N` objects (half
//!   with an outer) unnamed, named with interned `Name`s, and named from
//!   strings: ns/object at create and free, and named / unnamed ratios.
//! * [`saveload`]: coreobject alone, with postcard, bitcode and serde_json
//!   on the same data as plain structs in the same repetition: save,
//!   instantiate and restore of a world of `N` named objects with outers.
//!
//! A second binary, `par_start` (`src/bin/par_start.rs`, coreobject only),
//! measures what starting parallel marking costs on a small heap:
//! `cargo run --release -p coreobject-bench --bin par_start -- 1000 2000`.
//!
//! # Method
//!
//! Each peer runs in a **worker process of its own** (this executable,
//! re-run with `--peers <peer>` and a hidden `--worker` flag, printing its
//! results as `WORKER {…}` lines), because a thread inherits the glibc malloc
//! arena of an exited one: in one process, a rust-cc `world` run made the
//! `binary-trees` of coreobject and rust-gc 4–7x slower. `--in-process` runs
//! every peer in one process instead. Within a worker, each repetition runs
//! on a fresh thread with a **1 GiB stack** (reserved, not committed),
//! because rust-gc and dumpster mark recursively and rust-cc traces
//! recursively: a deep reference chain would overflow a normal stack.
//!
//! Each table shows the median over repetitions with min–max, the ratio to
//! `ideal` and to the best peer (for coreobject's row: to the best peer other
//! than coreobject). A peer that has used up its time budget (`--budget`)
//! gets no further repetitions, except that the peers a workload's targets
//! compare always get 3; the `reps` column says how many ran, so a very slow
//! peer may show 1. Every repetition is verified; any failure makes the exit
//! status non-zero. The last line of output is `JSON {…}` with every figure.

mod alloc;
mod clusters;
mod harness;
mod incremental;
mod micro;
mod names;
mod pages;
mod report;
mod saveload;
mod scale;
mod store;
mod tally;
mod trees;
mod weak;
mod world;
mod young;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use serde_json::json;

use harness::{Peer, Settings, Status, WorkloadResult};
use report::Target;

#[global_allocator]
static GLOBAL: alloc::Counting = alloc::Counting;

/// Benchmarks coreobject against gc-arena, rust-gc, dumpster, rust-cc,
/// slotmap, Rc/Box and an ideal floor in one run, verifying every result.
/// Each peer runs in a worker process of its own, each repetition on a fresh
/// thread with a 1 GiB stack (rust-gc and dumpster mark recursively). Prints
/// tables of medians with min-max and ratios, a targets table, then one line
/// `JSON {...}`.
#[derive(Parser, Debug)]
#[command(name = "coreobject-bench", version)]
struct Cli {
    #[command(subcommand)]
    workload: Workload,
    #[command(flatten)]
    common: Common,
}

#[derive(Args, Debug, Clone)]
struct Common {
    /// Small sizes and 3 repetitions: the CI smoke run.
    #[arg(long, global = true)]
    quick: bool,
    /// Repetitions per peer (default 5, or 3 with --quick).
    #[arg(long, global = true)]
    reps: Option<usize>,
    /// Seconds after which a peer gets no more repetitions (default 1.0, or
    /// 0.5 with --quick). At least one always runs, and at least 3 (or
    /// --reps, if lower) for the peers a workload's targets compare.
    #[arg(long, global = true)]
    budget: Option<f64>,
    /// Comma-separated peers to run (default: all). Names: coreobject,
    /// gc-arena, rust-gc, dumpster, rust-cc, slotmap, Rc, Box, ideal.
    #[arg(long, global = true, value_delimiter = ',')]
    peers: Vec<String>,
    /// Print every repetition to stderr.
    #[arg(long, short, global = true)]
    verbose: bool,
    /// Run every peer in this process instead of one worker process per
    /// peer (faster to start, but a library's leftover allocator state can
    /// then slow down the peers that run after it).
    #[arg(long, global = true)]
    in_process: bool,
    /// Internal: run in this process and print `WORKER {json}` lines for the
    /// parent process.
    #[arg(long, global = true, hide = true)]
    worker: bool,
}

#[derive(Subcommand, Debug)]
enum Workload {
    /// World graph: build, detach a fraction, one full collection, memory.
    World(WorldArgs),
    /// The world collected as one incremental cycle of budgeted steps
    /// (coreobject and gc-arena), beside their stop-the-world collection.
    Incremental(IncrementalArgs),
    /// coreobject alone: minor cycles after frames of allocation and a few
    /// changes to a big old world, beside a full collection, at 100K, 1M
    /// and 10M objects.
    Young(YoungArgs),
    /// Random weak-handle resolves with 10% of the objects freed.
    Weak(WeakArgs),
    /// The Benchmarks Game binary-trees.
    BinaryTrees(TreesArgs),
    /// Create, resolve, iterate, and root add/remove.
    Micro(MicroArgs),
    /// coreobject alone: create and free objects unnamed, named with
    /// interned names, and named from strings.
    Names(NamesArgs),
    /// coreobject alone, with serde peers in the same repetition: save,
    /// instantiate and restore a 1M-object world against postcard, bitcode
    /// and serde_json on the same data as plain structs.
    Saveload(SaveloadArgs),
    /// Every workload with its defaults (`all --quick`: the CI smoke run).
    All,
    /// coreobject alone, from 1M to 50M objects: build, a collection that
    /// frees none and one that frees most, time and RSS per object. Not part
    /// of `all`.
    Scale(ScaleArgs),
    /// coreobject alone: object page memory after a peak, as a fifth of the
    /// objects survive and churn. Not part of `all`.
    Pages(PagesArgs),
    /// coreobject alone: a full collection of a world whose levels (nine
    /// tenths of the objects) are GC clusters, against the same world
    /// without clusters. Not part of `all`
    Clusters(ClustersArgs),
    /// coreobject alone: whole and incremental saves into redb (with
    /// `--features redb`) and the file store, and the capture alone (ns per
    /// captured object, steps of a capture spread over frames). Part of
    /// `all` (at 20,000 objects with --quick).
    Store(StoreArgs),
}

#[derive(Args, Debug, Default)]
struct StoreArgs {
    /// Objects [default: 1000000; --quick: 20000].
    #[arg(long)]
    objects: Option<usize>,
    /// Objects changed per incremental save [default: 10000; --quick: 2000].
    #[arg(long)]
    changed: Option<usize>,
    /// The capture alone (no redb or file rows).
    #[arg(long)]
    capture_only: bool,
}

#[derive(Args, Debug, Default)]
struct ClustersArgs {
    /// Objects [default: 1000000].
    #[arg(long)]
    objects: Option<usize>,
    /// Levels, each a cluster [default: 1000].
    #[arg(long)]
    levels: Option<usize>,
    /// Full collections per world [default: 5].
    #[arg(long)]
    reps: Option<usize>,
    /// A second pair of worlds in which each level's props use a kit of
    /// this many assets; 0 for none [default: 64].
    #[arg(long)]
    kit: Option<usize>,
}

#[derive(Args, Debug, Default)]
struct PagesArgs {
    /// Objects at the peak [default: 1000000].
    #[arg(long)]
    objects: Option<usize>,
    /// Churn rounds after the fall, each replacing 1% of the survivors and
    /// collecting [default: 600].
    #[arg(long)]
    rounds: Option<usize>,
}

#[derive(Args, Debug, Default)]
struct ScaleArgs {
    /// Comma-separated object counts [default: 1000000,10000000,50000000;
    /// --quick: 100000,400000].
    #[arg(long, value_delimiter = ',')]
    sizes: Vec<usize>,
}

#[derive(Args, Debug, Default, Clone)]
struct WorldArgs {
    /// Objects [default: 1000000; --quick: 100000].
    #[arg(long)]
    objects: Option<usize>,
    /// Random references per object [default: 2].
    #[arg(long)]
    edges: Option<usize>,
    /// Fraction of objects detached (garbage) [default: 0.10].
    #[arg(long)]
    garbage_frac: Option<f64>,
    /// Random seed [default: 1].
    #[arg(long)]
    seed: Option<u64>,
    /// coreobject's marking threads, `GcConfig::threads` (0 = all cores,
    /// at most 16), comma-separated for one run each: the first is reported
    /// as `world`, the others as `world-<n>t` [default: 1].
    #[arg(long, value_delimiter = ',')]
    threads: Vec<usize>,
    /// coreobject drops freed values on the marking threads too
    /// (`GcConfig::parallel_drop`; with `--threads` above 1).
    #[arg(long)]
    parallel_drop: bool,
}

#[derive(Args, Debug, Default)]
struct IncrementalArgs {
    #[command(flatten)]
    world: WorldArgs,
    /// Comma-separated step budgets in ms, one table row per budget and
    /// library [default: 1,2,5].
    #[arg(long, value_delimiter = ',')]
    budgets: Vec<f64>,
    /// Actor swaps between levels per frame, 2 barriered reference writes
    /// each [default: 4].
    #[arg(long)]
    swaps: Option<usize>,
}

#[derive(Args, Debug, Default)]
struct YoungArgs {
    /// Comma-separated world sizes, one table row each [default:
    /// 100000,1000000,10000000, the largest only if the memory available
    /// holds it; --quick: 100000].
    #[arg(long, value_delimiter = ',')]
    sizes: Vec<usize>,
    /// Frames, each followed by a minor cycle [default: 100; --quick: 10].
    #[arg(long)]
    frames: Option<usize>,
    /// Objects created per frame, a tenth of them kept [default: 30000].
    #[arg(long)]
    per_frame: Option<usize>,
    /// Fraction of the world objects changed per frame [default: 0.01].
    #[arg(long)]
    changed_frac: Option<f64>,
    /// Random references per world object [default: 2].
    #[arg(long)]
    edges: Option<usize>,
    /// Random seed [default: 1].
    #[arg(long)]
    seed: Option<u64>,
}

#[derive(Args, Debug, Default)]
struct WeakArgs {
    /// Objects [default: 1000000; --quick: 100000].
    #[arg(long)]
    objects: Option<usize>,
    /// Weak resolves [default: 2000000; --quick: 500000].
    #[arg(long)]
    lookups: Option<usize>,
    /// Random seed [default: 1].
    #[arg(long)]
    seed: Option<u64>,
}

#[derive(Args, Debug, Default)]
struct TreesArgs {
    /// Maximum tree depth, or several comma-separated (`--depth 16,18`: a
    /// table for each, one after the other) [default: 16; --quick: 12].
    #[arg(long, value_delimiter = ',')]
    depth: Vec<u32>,
}

#[derive(Args, Debug, Default)]
struct MicroArgs {
    /// Objects [default: 200000; --quick: 20000].
    #[arg(long)]
    objects: Option<usize>,
    /// Operations for resolve and root [default: 2000000; --quick: 500000].
    #[arg(long)]
    ops: Option<usize>,
    /// Random seed [default: 1].
    #[arg(long)]
    seed: Option<u64>,
}

#[derive(Args, Debug, Default)]
struct NamesArgs {
    /// Objects per mode [default: 1000000; --quick: 20000].
    #[arg(long)]
    objects: Option<usize>,
}

#[derive(Args, Debug, Default)]
struct SaveloadArgs {
    /// Objects [default: 1000000; --quick: 20000].
    #[arg(long)]
    objects: Option<usize>,
}

/// Sizes the targets are defined at.
const TARGET_WORLD_OBJECTS: usize = 1_000_000;
const TARGET_TREE_DEPTH: u32 = 16;
const TARGET_NAMES_OBJECTS: usize = 1_000_000;
const TARGET_SAVELOAD_OBJECTS: usize = 1_000_000;

fn pick<T>(v: Option<T>, quick: bool, full: T, small: T) -> T {
    v.unwrap_or(if quick { small } else { full })
}

fn world_params(quick: bool, a: &WorldArgs) -> world::Params {
    world::Params {
        objects: pick(a.objects, quick, 1_000_000, 100_000),
        edges: a.edges.unwrap_or(2),
        garbage_frac: a.garbage_frac.unwrap_or(0.10),
        seed: a.seed.unwrap_or(1),
        threads: a.threads.first().copied().unwrap_or(1),
        parallel_drop: a.parallel_drop,
    }
}

fn run_world(s: &Settings, quick: bool, a: &WorldArgs) -> Result<WorkloadResult, String> {
    let p = world_params(quick, a);
    let plan = world::Plan::new(&p)?;
    let mut w = harness::run_workload(
        s,
        "world",
        &[Peer::CoreObject, Peer::GcArena, Peer::SlotMap, Peer::Ideal],
        vec![
            ("objects", plan.n.to_string()),
            ("edges", p.edges.to_string()),
            ("garbage_frac", p.garbage_frac.to_string()),
            ("seed", p.seed.to_string()),
            ("threads", p.threads.to_string()),
            ("garbage", plan.garbage_count.to_string()),
            ("live", plan.live().to_string()),
            ("references", plan.edges().to_string()),
        ],
        world::metrics(),
        |peer| world::run(peer, &plan),
    );
    let payload = 24.0 + 8.0 * plan.edges() as f64 / plan.n as f64;
    w.notes.push(
        "layout (every peer): one Vec of references per object (children, then the random ones), allocated at its exact length".into(),
    );
    w.notes.push(format!(
        "memory: the payload alone (Vec header + 8-byte references) is {payload:.1} B/object; the rest is each library's \
         own overhead (coreobject: a 24 B table item + a 16 B object header; ideal uses 4-byte indices)"
    ));
    w.notes.push(
        "build includes the automatic collections rust-gc, dumpster and rust-cc run meanwhile, and releasing the builder's handles; \
         detach times and coreobject's mark/sweep/destroy split are in the JSON"
            .into(),
    );
    Ok(w)
}

/// Issue 24's probe: 1,000 groups of 1,200 objects (100 with `--quick`),
/// incremental with a 1 ms budget per tick, 4 handles per object, then
/// with one rooted object holding a handle to every live object (4 and 16
/// handles per object). Prints each cycle's longest tick, its longest tick
/// the thread was not switched out in, and its marking and sweep times.
/// The environment variable `PROBE_MS` sets another budget (a large one,
/// `PROBE_MS=5000`, runs each cycle in one tick: stop-the-world marking).
fn probe_large(quick: bool) {
    let groups = if quick { 100 } else { 1_000 };
    let budget = std::env::var("PROBE_MS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .map_or(Duration::from_millis(1), |x| {
            Duration::from_secs_f64(x / 1e3)
        });
    println!();
    println!(
        "== incremental probe: {groups} groups of 1,200 objects, budget 1 ms per tick, 3 cycles \
         (a tenth of each group garbage; new garbage before cycles 2 and 3)"
    );
    for (handles, hub) in [(4, false), (4, true), (16, true)] {
        let cycles = incremental::probe(groups, 1_200, handles, hub, budget, 3);
        let per: Vec<String> = cycles
            .iter()
            .map(|c| {
                format!(
                    "{:.2} ms, unpreempted {:.2} ms ({} ticks, {} marked in {:.1} ms, {} freed in {:.1} ms)",
                    c.longest_ms, c.unpreempted_ms, c.ticks, c.marked, c.mark_ms, c.freed, c.sweep_ms
                )
            })
            .collect();
        println!(
            "  {handles:>2} handles/object{}: longest tick per cycle: {}",
            if hub { ", one object holding all" } else { "" },
            per.join("; ")
        );
    }
}

/// One workload per budget, on the peers of `settings` that collect
/// incrementally (none: no workload).
fn run_incremental(
    s: &Settings,
    quick: bool,
    a: &IncrementalArgs,
) -> Result<Vec<WorkloadResult>, String> {
    let peers: Vec<Peer> = s
        .peers
        .iter()
        .copied()
        .filter(|p| incremental::PEERS.contains(p))
        .collect();
    if peers.is_empty() {
        return Ok(Vec::new());
    }
    let s = Settings { peers, ..s.clone() };
    let mut budgets: Vec<f64> = Vec::new();
    for &b in &a.budgets {
        if !budgets.contains(&b) {
            budgets.push(b);
        }
    }
    if budgets.is_empty() {
        budgets = vec![1.0, 2.0, 5.0];
    }
    if let Some(b) = budgets.iter().find(|b| !(b.is_finite() && **b > 0.0)) {
        return Err(format!("--budgets: {b} is not a positive number of ms"));
    }
    let p = world_params(quick, &a.world);
    let plan = world::Plan::new(&p)?;
    let swaps = a.swaps.unwrap_or(4);
    Ok(budgets
        .iter()
        .map(|&ms| {
            let ip = incremental::Params {
                budget: Duration::from_secs_f64(ms / 1e3),
                swaps,
                seed: p.seed,
            };
            let mut w = harness::run_workload(
                &s,
                &incremental::name(ms),
                &incremental::PEERS,
                vec![
                    ("objects", plan.n.to_string()),
                    ("edges", p.edges.to_string()),
                    ("garbage_frac", p.garbage_frac.to_string()),
                    ("seed", p.seed.to_string()),
                    ("garbage", plan.garbage_count.to_string()),
                    ("live", plan.live().to_string()),
                    ("swaps_per_frame", swaps.to_string()),
                    ("budget_ms", ms.to_string()),
                ],
                incremental::metrics(),
                |peer| incremental::run(peer, &plan, &ip),
            );
            w.notes.extend([
                format!(
                    "a frame: {swaps} swaps of live actors between random levels (2 reference writes each, through the write barrier), \
                     then one collector step, timed alone; STW is the same repetition's full collection of an identical world, \
                     built alongside; the allocator's fast bins are consolidated before each of the two measurements"
                ),
                "coreobject: one Heap::tick with GcConfig::incremental = budget per step".into(),
                format!(
                    "gc-arena 0.7 (no time-bounded step): a step adds {} units of allocation debt (adjust_debt) and runs cycle_debt, \
                     checking the clock between such chunks until the budget is used or the cycle is back to Sleeping",
                    incremental::GA_CHUNK
                ),
            ]);
            w
        })
        .collect())
}

/// The young workload, one result per world size, on coreobject alone (no
/// workload if `settings` does not run coreobject).
fn run_young(s: &Settings, quick: bool, a: &YoungArgs) -> Result<Vec<WorkloadResult>, String> {
    if !s.peers.contains(&Peer::CoreObject) {
        return Ok(Vec::new());
    }
    let mut notes = Vec::new();
    let sizes = if !a.sizes.is_empty() {
        a.sizes.clone()
    } else if quick {
        vec![100_000]
    } else {
        let mut v = vec![100_000, 1_000_000];
        let big = 10_000_000;
        match young::available_bytes() {
            Some(have) if have >= 2 * big * young::BYTES_PER_OBJECT => v.push(big),
            have => notes.push(format!(
                "{big} objects skipped: {} available, this run wants {:.1} GB",
                have.map_or("unknown memory".to_string(), |b| format!(
                    "{:.1} GB",
                    b as f64 / 1e9
                )),
                (2 * big * young::BYTES_PER_OBJECT) as f64 / 1e9
            )),
        }
        v
    };
    let p = young::Params {
        frames: pick(a.frames, quick, 100, 10).max(1),
        per_frame: a.per_frame.unwrap_or(30_000).max(1),
        changed_frac: a.changed_frac.unwrap_or(young::CHANGED_FRAC),
        seed: a.seed.unwrap_or(1),
    };
    if !(0.0..=1.0).contains(&p.changed_frac) {
        return Err("--changed-frac must be in [0, 1]".into());
    }
    let s = Settings {
        peers: vec![Peer::CoreObject],
        ..s.clone()
    };
    let mut out = Vec::new();
    for &n in &sizes {
        let plan = world::Plan::new(&world::Params {
            objects: n,
            edges: a.edges.unwrap_or(2),
            garbage_frac: 0.0,
            seed: p.seed,
            threads: 1,
            parallel_drop: false,
        })?;
        let mut w = harness::run_workload(
            &s,
            &young::name(n),
            &[Peer::CoreObject],
            vec![
                ("objects", plan.n.to_string()),
                ("edges", a.edges.unwrap_or(2).to_string()),
                ("frames", p.frames.to_string()),
                ("per_frame", p.per_frame.to_string()),
                (
                    "stored_per_frame",
                    p.per_frame.div_ceil(young::STORED_EVERY).to_string(),
                ),
                ("changed_frac", p.changed_frac.to_string()),
                ("seed", p.seed.to_string()),
            ],
            young::metrics(),
            |peer| young::run(peer, &plan, &p),
        );
        if out.is_empty() {
            w.notes.push(
                "a frame: create the objects (one reference each, to a random world object), store every tenth into a random world \
                 object through get_mut and drop the rest, rewrite one random reference of 1% of the world objects through get_mut; \
                 then Heap::collect_minor, timed alone. Full: the first frame (after the world was made old) ends with Heap::collect \
                 instead, timed the same way: a full collection of the heap a frame leaves; full end (ms): Heap::collect of the heap \
                 the last frame left (N + stored objects, no garbage)"
                    .into(),
            );
            w.notes.append(&mut notes);
        }
        out.push(w);
    }
    Ok(out)
}

fn run_weak(s: &Settings, quick: bool, a: &WeakArgs) -> Result<WorkloadResult, String> {
    let p = weak::Params {
        objects: pick(a.objects, quick, 1_000_000, 100_000),
        lookups: pick(a.lookups, quick, 2_000_000, 500_000),
        seed: a.seed.unwrap_or(1),
    };
    let plan = weak::Plan::new(&p)?;
    let mut w = harness::run_workload(
        s,
        "weak",
        &[Peer::CoreObject, Peer::SlotMap, Peer::Ideal],
        vec![
            ("objects", p.objects.to_string()),
            ("lookups", p.lookups.to_string()),
            ("freed_frac", weak::FREED_FRAC.to_string()),
            ("expected_hits", plan.hits.to_string()),
            ("seed", p.seed.to_string()),
        ],
        weak::metrics(),
        |peer| weak::run(peer, &plan),
    );
    w.notes.push(
        "a lookup resolves a weak handle and reads the object's u64: coreobject Heap::get(Weak), gc-arena GcWeak::upgrade, \
         rust-cc and Rc Weak::upgrade, slotmap SlotMap::get, ideal a generation compare"
            .into(),
    );
    Ok(w)
}

/// binary-trees at each depth asked for, one workload each: the first
/// named `binary-trees`, the others `binary-trees-d{depth}` (workloads are
/// told apart by name).
fn run_trees(s: &Settings, quick: bool, a: &TreesArgs) -> Result<Vec<WorkloadResult>, String> {
    if a.depth.is_empty() {
        return Ok(vec![run_tree_depth(
            s,
            pick(None, quick, TARGET_TREE_DEPTH, 12),
        )?]);
    }
    a.depth
        .iter()
        .enumerate()
        .map(|(k, &d)| {
            let mut w = run_tree_depth(s, d)?;
            if k > 0 {
                w.name = format!("binary-trees-d{d}");
            }
            Ok(w)
        })
        .collect()
}

fn run_tree_depth(s: &Settings, depth: u32) -> Result<WorkloadResult, String> {
    let plan = trees::Plan::new(depth)?;
    let mut w = harness::run_workload(
        s,
        "binary-trees",
        &[
            Peer::CoreObject,
            Peer::Rc,
            Peer::Box,
            Peer::Dumpster,
            Peer::Ideal,
        ],
        vec![
            ("depth", plan.max_depth.to_string()),
            ("nodes", plan.total_nodes().to_string()),
        ],
        trees::metrics(),
        |peer| trees::run(peer, &plan),
    );
    w.notes.push(format!(
        "garbage is freed by: Box/Rc/dumpster/rust-cc on drop, rust-gc by its own triggers, gc-arena by collect_debt after each tree, \
         slotmap by mark and sweep at max(2 x live, {t}) objects, coreobject by Heap::tick with generational collection (a minor \
         cycle every {t} objects created, a major when the old generation reaches max(2 x the last major's survivors, {t})), \
         ideal by resetting an index arena",
        t = trees::MIN_TRIGGER
    ));
    w.notes.push(format!(
        "every peer's output was checked against the closed form:\n{}",
        plan.output(&plan.expected())
            .lines()
            .map(|l| format!("        {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    ));
    Ok(w)
}

fn run_micro(s: &Settings, quick: bool, a: &MicroArgs) -> Result<Vec<WorkloadResult>, String> {
    let p = micro::Params {
        objects: pick(a.objects, quick, 200_000, 20_000),
        ops: pick(a.ops, quick, 2_000_000, 500_000),
        seed: a.seed.unwrap_or(1),
    };
    let plan = micro::Plan::new(&p)?;
    Ok(micro::Bench::ALL
        .iter()
        .map(|&b| {
            let mut params = vec![("objects", p.objects.to_string())];
            if matches!(b, micro::Bench::Resolve | micro::Bench::Root) {
                params.push(("ops", p.ops.to_string()));
            }
            let mut w =
                harness::run_workload(s, b.name(), &Peer::ALL, params, b.metrics(), |peer| {
                    micro::run(b, peer, &plan)
                });
            w.notes.push(b.note().to_string());
            w
        })
        .collect())
}

/// The names workload, on coreobject alone (no workload if `settings` does
/// not run coreobject).
fn run_names(s: &Settings, quick: bool, a: &NamesArgs) -> Result<Vec<WorkloadResult>, String> {
    if !s.peers.contains(&Peer::CoreObject) {
        return Ok(Vec::new());
    }
    let p = names::Params {
        objects: pick(a.objects, quick, 1_000_000, 20_000),
    };
    if p.objects < 2 || p.objects > u32::MAX as usize / 2 {
        return Err("--objects must be in 2..2^31".into());
    }
    let s = Settings {
        peers: vec![Peer::CoreObject],
        ..s.clone()
    };
    let mut w = harness::run_workload(
        &s,
        "names",
        &[Peer::CoreObject],
        vec![
            ("objects", p.objects.to_string()),
            ("outers", names::OUTERS.to_string()),
        ],
        names::metrics(),
        |peer| names::run(peer, &p),
    );
    w.notes.push(
        "each mode in a fresh heap: N objects, every other one under one of 1000 rooted outers, then one collect frees exactly them, twice; \
         the figures are the second round's (steady state: freed slots reused, new names, the first round's deferred clean-up paid); \
         named = .name(interned.with_number(k)), from strings = .name(format!(\"Actor_{k}\")); the ratios compare named (Name) with unnamed"
            .into(),
    );
    Ok(vec![w])
}

/// The saveload workload, on coreobject alone (its peers run inside each
/// repetition; no workload if `settings` does not run coreobject).
fn run_saveload(
    s: &Settings,
    quick: bool,
    a: &SaveloadArgs,
) -> Result<Vec<WorkloadResult>, String> {
    if !s.peers.contains(&Peer::CoreObject) {
        return Ok(Vec::new());
    }
    let p = saveload::Params {
        objects: pick(a.objects, quick, TARGET_SAVELOAD_OBJECTS, 20_000),
    };
    if p.objects < 1 || p.objects > u32::MAX as usize / 2 {
        return Err("--objects must be in 1..2^31".into());
    }
    let s = Settings {
        peers: vec![Peer::CoreObject],
        ..s.clone()
    };
    let mut w = harness::run_workload(
        &s,
        "saveload",
        &[Peer::CoreObject],
        vec![
            ("objects", p.objects.to_string()),
            ("levels", saveload::LEVELS.to_string()),
        ],
        saveload::metrics(),
        |peer| saveload::run(peer, &p),
    );
    w.notes.push(
        "N objects in 1000 rooted levels, each with an outer, a name, three scalars and 1-4 handles; \
         coreobject: Heap::save of the whole heap (binary), Heap::load into an empty heap, Heap::restore; \
         peers on the same data as plain structs (u32 indices, the name as a String) encoded as one Vec; \
         postcard decode + create = decode, then spawn each object with its outer and name, then patch the handles"
            .into(),
    );
    Ok(vec![w])
}

/// The targets the team is tracked on, from this run's figures.
fn targets(results: &[WorkloadResult]) -> Vec<Target> {
    let mut out = Vec::new();
    let find = |name: &str| results.iter().find(|w| w.name == name);
    let param = |w: &WorkloadResult, k: &str| {
        w.params
            .iter()
            .find(|(key, _)| *key == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let ratio = |w: &WorkloadResult, m: usize, a: Peer, b: Peer| {
        Some(report::median_of(w, a, m)? / report::median_of(w, b, m)?)
    };
    let at_world_size = |w: &WorkloadResult| {
        param(w, "objects") == TARGET_WORLD_OBJECTS.to_string()
            && param(w, "edges") == "2"
            && param(w, "garbage_frac") == "0.1"
    };
    if let Some(w) = find("world") {
        let at = at_world_size(w);
        for other in [Peer::GcArena, Peer::SlotMap] {
            out.push(Target {
                name: format!("world 1M collect >= 3x faster than {}", other.name()),
                measured: ratio(w, 1, Peer::CoreObject, other),
                limit: 1.0 / 3.0,
                unit: "x",
                at_target_size: at,
                note: "coreobject / peer time".into(),
            });
        }
        out.push(Target {
            name: "world 1M build >= 3x faster than gc-arena".into(),
            measured: ratio(w, 0, Peer::CoreObject, Peer::GcArena),
            limit: 1.0 / 3.0,
            unit: "x",
            at_target_size: at,
            note: "coreobject / gc-arena time".into(),
        });
        out.push(Target {
            name: "world memory <= 64 B/object".into(),
            measured: report::median_of(w, Peer::CoreObject, 3),
            limit: 64.0,
            unit: " B",
            at_target_size: at,
            note: "coreobject".into(),
        });
    }
    if let Some(w) = find("weak") {
        out.push(Target {
            name: "weak resolve <= 1.1x slotmap".into(),
            measured: ratio(w, 0, Peer::CoreObject, Peer::SlotMap),
            limit: 1.1,
            unit: "x",
            at_target_size: true,
            note: "coreobject / slotmap time".into(),
        });
        out.push(Target {
            name: "weak resolve, listed (Heap::get_many) <= 2.0x slotmap".into(),
            measured: ratio(w, 2, Peer::CoreObject, Peer::SlotMap),
            limit: 2.0,
            unit: "x",
            at_target_size: true,
            note: "coreobject get_many / slotmap plain loop".into(),
        });
        out.push(Target {
            name: "weak resolve, chained (latency) <= 2.0x slotmap".into(),
            measured: ratio(w, 1, Peer::CoreObject, Peer::SlotMap),
            limit: 2.0,
            unit: "x",
            at_target_size: true,
            note: "coreobject / slotmap time, each lookup waiting for the last".into(),
        });
    }
    // Depth 16 is the target size; issue 27 asks for depth 18 beside it.
    for w in results
        .iter()
        .filter(|w| w.name.starts_with("binary-trees"))
    {
        let depth = param(w, "depth");
        let at = depth == TARGET_TREE_DEPTH.to_string() || depth == "18";
        out.push(Target {
            name: format!("binary-trees depth {depth} <= 1.5x Box"),
            measured: ratio(w, 0, Peer::CoreObject, Peer::Box),
            limit: 1.5,
            unit: "x",
            at_target_size: at,
            note: "coreobject / Box time".into(),
        });
        // Issue 27: the same program with nothing configured.
        for other in [Peer::Box, Peer::Rc, Peer::Dumpster] {
            out.push(Target {
                name: format!(
                    "binary-trees depth {depth} <= 1.0x {} (Heap::new(), create, tick)",
                    other.name()
                ),
                measured: ratio(w, 2, Peer::CoreObject, other),
                limit: 1.0,
                unit: "x",
                at_target_size: at,
                note: format!("coreobject defaults / {} time", other.name()),
            });
        }
        // Issue 18: at most Box's time, and faster than Rc and dumpster.
        for (other, limit) in [(Peer::Box, 1.0), (Peer::Rc, 1.0), (Peer::Dumpster, 1.0)] {
            out.push(Target {
                name: format!(
                    "binary-trees depth {depth} <= 1.0x {} (generational)",
                    other.name()
                ),
                measured: ratio(w, 0, Peer::CoreObject, other),
                limit,
                unit: "x",
                at_target_size: at,
                note: format!("coreobject / {} time", other.name()),
            });
        }
    }
    if let Some(w) = find("micro/create") {
        out.push(Target {
            name: "micro create (unnamed, &Heap) <= 1.0x Box::new".into(),
            measured: ratio(w, 0, Peer::CoreObject, Peer::Box),
            limit: 1.0,
            unit: "x",
            at_target_size: param(w, "objects") == "200000",
            note: "coreobject Heap::create / Box::new time, every handle kept".into(),
        });
    }
    if let Some(w) = find("names") {
        out.push(Target {
            name: "names create named <= 1.3x unnamed (&mut Heap)".into(),
            measured: report::median_of(w, Peer::CoreObject, 14),
            limit: 1.3,
            unit: "x",
            at_target_size: param(w, "objects") == TARGET_NAMES_OBJECTS.to_string(),
            note: "spawn_mut(..).name(..) / create_mut and spawn_mut(..).outer(..)".into(),
        });
        for (m, what, how) in [
            (6, "create named", "named (Name)"),
            (7, "free named", "named (Name)"),
            (10, "create generated names", "generated names"),
            (11, "free generated names", "generated names"),
        ] {
            out.push(Target {
                name: format!("names {what} <= 1.3x unnamed"),
                measured: report::median_of(w, Peer::CoreObject, m),
                limit: 1.3,
                unit: "x",
                at_target_size: param(w, "objects") == TARGET_NAMES_OBJECTS.to_string(),
                note: format!("coreobject {how} / unnamed time"),
            });
        }
    }
    if let Some(w) = find("saveload") {
        let at = param(w, "objects") == TARGET_SAVELOAD_OBJECTS.to_string();
        for (m, name, limit, unit, note) in [
            (
                0,
                "saveload save <= 40 ns/object",
                40.0,
                " ns",
                "coreobject save",
            ),
            (
                14,
                "saveload save <= 1.2x postcard encode",
                1.2,
                "x",
                "save / postcard encode",
            ),
            (
                15,
                "saveload instantiate <= 1.3x postcard decode + create",
                1.3,
                "x",
                "instantiate / (postcard decode + create)",
            ),
            (
                16,
                "saveload restore <= 1.0x instantiate",
                1.0,
                "x",
                "restore / instantiate",
            ),
            (
                17,
                "saveload bytes <= 1.1x (postcard + 6 B/object)",
                1.1,
                "x",
                "coreobject bytes / (postcard bytes + 6 per object)",
            ),
        ] {
            out.push(Target {
                name: name.into(),
                measured: report::median_of(w, Peer::CoreObject, m),
                limit,
                unit,
                at_target_size: at,
                note: note.into(),
            });
        }
    }
    out.extend(incremental::targets(results, at_world_size));
    out.extend(young::targets(results));
    out
}

/// Runs the chosen workload(s) in this process for `settings.peers`.
fn run_here(cli: &Cli, settings: &Settings) -> Result<Vec<WorkloadResult>, String> {
    let quick = cli.common.quick;
    let one = |r: Result<WorkloadResult, String>| r.map(|w| vec![w]);
    match &cli.workload {
        Workload::World(a) => {
            let counts = if a.threads.is_empty() {
                vec![1]
            } else {
                a.threads.clone()
            };
            let mut all = Vec::new();
            for (k, &t) in counts.iter().enumerate() {
                let one_count = WorldArgs {
                    threads: vec![t],
                    ..a.clone()
                };
                let mut w = run_world(settings, quick, &one_count)?;
                if k > 0 {
                    w.name = format!("world-{t}t");
                }
                all.push(w);
            }
            Ok(all)
        }
        Workload::Incremental(a) => run_incremental(settings, quick, a),
        Workload::Young(a) => run_young(settings, quick, a),
        Workload::Weak(a) => one(run_weak(settings, quick, a)),
        Workload::BinaryTrees(a) => run_trees(settings, quick, a),
        Workload::Micro(a) => run_micro(settings, quick, a),
        Workload::Names(a) => run_names(settings, quick, a),
        Workload::Saveload(a) => run_saveload(settings, quick, a),
        Workload::Scale(_) => Err("scale runs outside the peer harness".into()),
        Workload::Pages(_) => Err("pages runs outside the peer harness".into()),
        Workload::Clusters(_) => Err("clusters runs outside the peer harness".into()),
        Workload::Store(_) => Err("store runs outside the peer harness".into()),
        Workload::All => {
            let mut all = one(run_world(settings, quick, &WorldArgs::default()))?;
            all.extend(one(run_weak(settings, quick, &WeakArgs::default()))?);
            all.extend(run_trees(settings, quick, &TreesArgs::default())?);
            all.extend(run_micro(settings, quick, &MicroArgs::default())?);
            all.extend(run_names(settings, quick, &NamesArgs::default())?);
            all.extend(run_saveload(settings, quick, &SaveloadArgs::default())?);
            all.extend(run_young(settings, quick, &YoungArgs::default())?);
            all.extend(run_incremental(
                settings,
                quick,
                &IncrementalArgs::default(),
            )?);
            Ok(all)
        }
    }
}

/// Runs every peer in a child process of its own (this executable with the
/// same arguments, `--peers <that peer>` and the hidden `--worker`), and
/// merges what they report.
///
/// Why: a thread that starts after another one exited inherits its glibc
/// malloc arena, fragmentation and all. Measured here, one rust-cc `world`
/// run made coreobject's and rust-gc's `binary-trees` in the same process 4
/// to 7 times slower. Separate processes keep each library's allocator and
/// thread-local collector state to itself.
fn run_isolated(settings: &Settings) -> Result<Vec<WorkloadResult>, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let mut args: Vec<String> = Vec::new();
    let mut skip = false;
    for a in std::env::args().skip(1) {
        if skip {
            skip = false;
        } else if a == "--peers" {
            skip = true;
        } else if !a.starts_with("--peers=") {
            args.push(a);
        }
    }
    let mut merged: Vec<WorkloadResult> = Vec::new();
    let mut missing: Vec<(Peer, String)> = Vec::new();
    for &peer in &settings.peers {
        let t = Instant::now();
        eprintln!("  {}: running in a worker process ...", peer.name());
        let out = std::process::Command::new(&exe)
            .args(&args)
            .args(["--peers", peer.name(), "--worker"])
            .stderr(std::process::Stdio::inherit())
            .output()
            .map_err(|e| format!("cannot start a worker: {e}"))?;
        if out.status.code() == Some(2) {
            return Err(format!("the {} worker refused the arguments", peer.name()));
        }
        let mut got = Vec::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if let Some(j) = line.strip_prefix("WORKER ") {
                let w = serde_json::from_str(j)
                    .ok()
                    .and_then(|v| harness::decode(&v))
                    .ok_or_else(|| format!("malformed worker line from {}", peer.name()))?;
                got.push(w);
            }
        }
        eprintln!(
            "  {}: done in {:.1} s{}",
            peer.name(),
            t.elapsed().as_secs_f64(),
            if out.status.success() {
                String::new()
            } else {
                format!(" (worker exited with {})", out.status)
            }
        );
        if !out.status.success() || got.is_empty() {
            missing.push((peer, format!("worker exited with {}", out.status)));
        }
        for w in got {
            match merged.iter_mut().find(|m| m.name == w.name) {
                Some(m) => m.peers.extend(w.peers),
                None => merged.push(w),
            }
        }
    }
    // A worker that died part-way: its peer fails every workload it did not report.
    for (peer, why) in missing {
        for w in &mut merged {
            if !w.peers.iter().any(|r| r.peer == peer) {
                w.peers.push(harness::PeerResult {
                    peer,
                    status: Status::Failed(why.clone()),
                    samples: vec![Vec::new(); w.metrics.len()],
                    extra: Vec::new(),
                    wall: Duration::ZERO,
                });
            }
        }
    }
    if merged.is_empty() {
        return Err("no worker reported any result".into());
    }
    for w in &mut merged {
        w.peers
            .sort_by_key(|r| Peer::ALL.iter().position(|&p| p == r.peer));
    }
    Ok(merged)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let c = &cli.common;
    let mut peers = Vec::new();
    for name in &c.peers {
        match Peer::parse(name) {
            Some(p) => peers.push(p),
            None => {
                eprintln!("unknown peer {name:?}; known: coreobject, gc-arena, rust-gc, dumpster, rust-cc, slotmap, Rc, Box, ideal");
                return ExitCode::from(2);
            }
        }
    }
    if let Workload::Clusters(a) = &cli.workload {
        let run = clusters::run(
            a.objects.unwrap_or(1_000_000),
            a.levels.unwrap_or(1_000),
            a.reps.unwrap_or(5),
            a.kit.unwrap_or(64),
        );
        return match run {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let store_run = |a: &StoreArgs| {
        store::run(
            pick(a.objects, c.quick, 1_000_000, 20_000),
            pick(a.changed, c.quick, 10_000, 2_000),
            c.reps.unwrap_or(3).max(1),
            !a.capture_only,
        )
    };
    if let Workload::Store(a) = &cli.workload {
        store_run(a);
        return ExitCode::SUCCESS;
    }
    if let Workload::Pages(a) = &cli.workload {
        return match pages::run(a.objects.unwrap_or(1_000_000), a.rounds.unwrap_or(600)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if let Workload::Scale(a) = &cli.workload {
        let sizes = if !a.sizes.is_empty() {
            a.sizes.clone()
        } else if c.quick {
            vec![100_000, 400_000]
        } else {
            vec![1_000_000, 10_000_000, 50_000_000]
        };
        let result = if c.worker {
            scale::measure(sizes[0]).map(|v| println!("SCALE {v}"))
        } else {
            scale::run(&sizes, c.reps.unwrap_or(3).max(1))
        };
        return match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let incremental_only = matches!(cli.workload, Workload::Incremental(_));
    let names_only = matches!(
        cli.workload,
        Workload::Names(_) | Workload::Young(_) | Workload::Saveload(_)
    );
    let peers: Vec<Peer> = Peer::ALL
        .into_iter()
        .filter(|p| peers.is_empty() || peers.contains(p))
        .filter(|p| !incremental_only || incremental::PEERS.contains(p))
        .filter(|p| !names_only || *p == Peer::CoreObject)
        .collect();
    if peers.is_empty() {
        eprintln!("no peer to run: the incremental workload runs on coreobject and gc-arena only, names and young on coreobject only");
        return ExitCode::from(2);
    }
    let settings = Settings {
        reps: c.reps.unwrap_or(if c.quick { 3 } else { 5 }).max(1),
        budget: Duration::from_secs_f64(c.budget.unwrap_or(if c.quick { 0.5 } else { 1.0 })),
        min_reps: 3,
        peers,
        verbose: c.verbose,
    };
    let quick = c.quick;

    if c.worker {
        return match run_here(&cli, &settings) {
            Ok(results) => {
                for w in &results {
                    println!("WORKER {}", harness::encode(w));
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        };
    }

    println!(
        "coreobject-bench{}: up to {} repetitions per peer; a peer stops repeating after {:.1} s \
         (the peers a workload's targets compare always get {}); {}; every repetition runs on a \
         fresh thread with a {} MiB stack (rust-gc and dumpster mark recursively)",
        if quick { " --quick" } else { "" },
        settings.reps,
        settings.budget.as_secs_f64(),
        settings.min_reps.min(settings.reps),
        if c.in_process {
            "all peers in this process (--in-process)"
        } else {
            "each peer in a worker process of its own"
        },
        harness::STACK_BYTES >> 20,
    );
    let t0 = Instant::now();
    let results = if c.in_process {
        run_here(&cli, &settings)
    } else {
        run_isolated(&settings)
    };
    let results = match results {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    // The probe runs in this process, after the workers (it prints as it goes).
    if matches!(cli.workload, Workload::Incremental(_) | Workload::All)
        && settings.peers.contains(&Peer::CoreObject)
    {
        probe_large(quick);
    }
    let mut printed_incremental = false;
    let mut printed_young = false;
    for w in &results {
        if young::is_young(w) {
            if !printed_young {
                printed_young = true;
                let group: Vec<&WorkloadResult> =
                    results.iter().filter(|w| young::is_young(w)).collect();
                young::print_table(&group);
            }
        } else if !incremental::is_incremental(w) {
            report::print_workload(w);
        } else if !printed_incremental {
            printed_incremental = true;
            let group: Vec<&WorkloadResult> = results
                .iter()
                .filter(|w| incremental::is_incremental(w))
                .collect();
            incremental::print_table(&group);
        }
    }
    let targets = targets(&results);
    report::print_targets(&targets);
    if matches!(cli.workload, Workload::All) {
        println!();
        store_run(&StoreArgs::default());
    }
    let failed: Vec<String> = results
        .iter()
        .filter(|w| w.failed())
        .map(|w| w.name.clone())
        .collect();
    let wall = t0.elapsed().as_secs_f64();
    println!();
    if failed.is_empty() {
        println!("all results verified ({wall:.1} s)");
    } else {
        println!(
            "VERIFICATION FAILED in: {} ({wall:.1} s)",
            failed.join(", ")
        );
    }
    let json = json!({
        "bench": "coreobject-bench",
        "quick": quick,
        "isolated": !c.in_process,
        "reps": settings.reps,
        "budget_seconds": settings.budget.as_secs_f64(),
        "min_reps_key_peers": settings.min_reps.min(settings.reps),
        "stack_bytes": harness::STACK_BYTES,
        "wall_seconds": wall,
        "verified": failed.is_empty(),
        "workloads": results.iter().map(report::workload_json).collect::<Vec<_>>(),
        "targets": report::targets_json(&targets),
    });
    println!("JSON {json}");
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

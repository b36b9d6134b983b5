//! The `incremental` workload: one whole collection cycle of the `world`,
//! run as a sequence of frames with a time budget per collector step, on the
//! two peers that can collect incrementally (coreobject and gc-arena).
//!
//! # Per repetition, per library
//!
//! Two identical worlds are built with [`world`]'s own builders, from the
//! same [`Plan`], and the same actors are detached from both; only then is
//! either collected:
//!
//! 1. **Stop-the-world**: one full collection of the first world
//!    (coreobject `Heap::collect`, gc-arena `Arena::finish_cycle`), timed as
//!    the `world` workload times it.
//! 2. **Incremental**: frames on the second world until one whole cycle has
//!    completed. Each frame
//!    * swaps `S` pairs of live actors between random levels (2 reference
//!      writes per swap, through the library's write path: coreobject
//!      `heap[level].refs[k] = actor`, gc-arena `Gc<RefLock<_>>::borrow_mut`,
//!      i.e. `Gc::write`'s barrier). Every live object stays reachable, so
//!      the expected garbage is unchanged; but an actor moved from a level
//!      not yet traced into one already traced is lost (unless something
//!      else still to be traced refers to it) if the write barrier does not
//!      re-grey that level, so the verification also checks the barriers
//!      (with gc-arena's writes made through a raw pointer instead, the
//!      `--quick` run fails now and then at 4 swaps per frame, every time
//!      at 100);
//!    * then runs **one collector step** bounded by the budget `B`, timed
//!      with `Instant` around the call (the mutator's writes are timed
//!      apart, JSON only).
//!
//!    The same driver ([`cycle`]) runs both libraries; they differ only in
//!    the methods of [`Stepped`].
//! 3. **Verification**, of both collections: exactly the detached objects
//!    were dropped during each (the `Tally` drop counter), none during the
//!    builds; coreobject also checks its `CollectStats` and every handle (as
//!    in `world`), and gc-arena that its live `Gc` count is the live object
//!    count.
//!
//! Reported per library and budget: steps, p50/p99/max step (nearest rank),
//! the cycle total (sum of the steps), the stop-the-world collection of the
//! same repetition, and cycle total / stop-the-world (per repetition, then
//! the median). Before each of the two measurements the allocator's fast
//! bins are consolidated ([`alloc::settle`]): otherwise the second
//! collection pays, at its first large allocation, for coalescing the
//! 200,000 small chunks (at 1M objects) the first one freed, which made
//! whichever ran second about 1.3x slower.
//!
//! On a loaded machine the scheduler's time slices (about 4 ms) land in
//! some steps whatever the collector does; the p99 then measures the
//! machine. So each step also records whether the thread was switched out
//! involuntarily during it (`/proc/thread-self/status`, read outside the
//! timed region): the table shows how many were, and the p99 of the others
//! (JSON: `preempted_steps`, `unpreempted_p99_ms`). The targets use the
//! plain p99.
//!
//! # How each library takes a step
//!
//! * **coreobject**: `GcConfig::incremental = Some(B)`; one `Heap::tick` is
//!   one step (it runs at most one slice of `B`). The cycle is started by
//!   `GcConfig::every_frame` on the first tick, switched off once
//!   `Tick::started` says the cycle began; it ends with `Tick::completed`.
//! * **gc-arena 0.7** has no time-bounded step; its incremental collector is
//!   paced by *allocation debt* (`Metrics::allocation_debt`), and
//!   `Arena::cycle_debt` runs the current cycle until the debt is paid,
//!   returning early when the cycle finishes. So a step is: repeatedly add
//!   [`GA_CHUNK`] units of debt by hand (`Metrics::adjust_debt`, since this
//!   world allocates nothing during the cycle), call `cycle_debt`, and check
//!   the clock between chunks, stopping once `B` has elapsed or the phase is
//!   back to `Sleeping`. Before the first step the debt the build left
//!   (one unit per allocation) is cancelled with `adjust_debt(-debt)`, so the
//!   cycle starts with the first chunk rather than all at once. With the
//!   default `Pacing`, one unit is 2 objects marked and traced, 20 live
//!   objects swept, or 2 garbage objects dropped and freed; `cycle_debt`
//!   checks the debt after each object (tracing one object marks all its
//!   children, so a chunk can overshoot; the overshoot is carried as
//!   negative debt into the next chunk).

use std::time::{Duration, Instant};

use gc_arena::arena::CollectionPhase;

use crate::alloc;
use crate::harness::{verify, Metric, Outcome, Peer, Run};
use crate::report::{self, Target};
use crate::tally;
use crate::world::{self, Plan, LEVELS};

/// The peers with an incremental collector.
pub const PEERS: [Peer; 2] = [Peer::CoreObject, Peer::GcArena];

/// Units of gc-arena allocation debt paid per chunk of a step.
pub const GA_CHUNK: f64 = 32.0;

/// The frame time passed to `Heap::tick` (no time trigger is set, so it
/// does not matter).
const FRAME_DT: Duration = Duration::from_micros(16_667);

/// A cycle that takes more steps than this is reported as failed.
const MAX_STEPS: usize = 10_000_000;

/// Workload names start with this, followed by the budget.
pub const NAME: &str = "incremental";

/// The name of the workload for budget `ms`.
pub fn name(ms: f64) -> String {
    format!("{NAME}-{ms}ms")
}

/// The parameters of one budget's workload.
#[derive(Clone, Debug)]
pub struct Params {
    /// The time budget of one collector step.
    pub budget: Duration,
    /// Actor swaps per frame (two reference writes each).
    pub swaps: usize,
    /// Seed of the frames' swaps.
    pub seed: u64,
}

/// Metric indices, in [`metrics`]' order.
pub const STEPS: usize = 0;
/// Median step.
pub const P50: usize = 1;
/// 99th percentile step.
pub const P99: usize = 2;
/// Longest step.
pub const MAX: usize = 3;
/// Sum of the steps.
pub const CYCLE: usize = 4;
/// Stop-the-world collection.
pub const STW: usize = 5;
/// Cycle / stop-the-world.
pub const RATIO: usize = 6;

/// The metrics, in order.
pub fn metrics() -> Vec<Metric> {
    vec![
        Metric::new("steps", "steps", "count"),
        Metric::new("step_p50_ms", "p50", "ms"),
        Metric::new("step_p99_ms", "p99", "ms"),
        Metric::new("step_max_ms", "max", "ms"),
        Metric::new("cycle_ms", "cycle", "ms"),
        Metric::new("stw_ms", "STW", "ms"),
        Metric::new("cycle_vs_stw", "cycle/STW", "x"),
    ]
}

/// Runs one repetition for `peer`.
pub fn run(peer: Peer, plan: &Plan, p: &Params) -> Outcome {
    match peer {
        Peer::CoreObject => measure::<CoWorld>(plan, p),
        Peer::GcArena => measure::<GaWorld>(plan, p),
        _ => Outcome::Na("no incremental collector"),
    }
}

/// Swapping actor `a` (level, position) with actor `b`.
#[derive(Clone, Copy, Debug)]
pub struct Swap {
    /// Level index (0-based, into the world's levels) and position of one actor.
    pub a: (usize, usize),
    /// The other.
    pub b: (usize, usize),
}

/// A library's world, driven one frame at a time by [`cycle`].
trait Stepped: Sized {
    /// Builds and detaches `plan`'s world; `budget` is the step budget of
    /// an incremental world, `None` for a stop-the-world one.
    fn build(plan: &Plan, budget: Option<Duration>) -> Self;
    /// One full stop-the-world collection.
    fn collect(&mut self);
    /// The frame's mutator writes.
    fn frame(&mut self, swaps: &[Swap]);
    /// One collector step within `budget`: `Ok(true)` once the cycle has
    /// completed.
    fn step(&mut self, budget: Duration) -> Result<bool, String>;
    /// The library's own checks after a collection.
    fn checks(&self, plan: &Plan) -> Vec<(bool, String)>;
    /// Library figures for the JSON.
    fn extra(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
}

/// What one incremental cycle did.
struct Cycle {
    /// Every step's duration (at least one).
    steps: Vec<Duration>,
    /// Whether the thread was involuntarily switched out during each step
    /// (all `false` where the count cannot be read).
    preempted: Vec<bool>,
    /// The mutator's writes, in total.
    mutator: Duration,
    /// Why the cycle stopped before completing, if it did.
    error: Option<String>,
}

/// The frame loop: mutator writes, then one timed step, until the cycle
/// completes.
fn cycle<W: Stepped>(w: &mut W, plan: &Plan, p: &Params) -> Cycle {
    let levels: Vec<(usize, usize)> = (0..LEVELS)
        .map(|l| (l, plan.kept_children(l + 1)))
        .filter(|&(_, kept)| kept > 0)
        .collect();
    let mut rng = fastrand::Rng::with_seed(p.seed);
    let mut pick = move || {
        let (l, kept) = levels[rng.usize(..levels.len())];
        (l, rng.usize(..kept))
    };
    let mut swaps = Vec::with_capacity(p.swaps);
    let mut out = Cycle {
        steps: Vec::new(),
        preempted: Vec::new(),
        mutator: Duration::ZERO,
        error: None,
    };
    loop {
        swaps.clear();
        if plan.live() > 1 + LEVELS {
            swaps.extend((0..p.swaps).map(|_| Swap {
                a: pick(),
                b: pick(),
            }));
        }
        let t0 = Instant::now();
        w.frame(&swaps);
        let mutator = t0.elapsed();
        let switches = involuntary_switches();
        let t1 = Instant::now();
        let done = w.step(p.budget);
        out.steps.push(t1.elapsed());
        out.preempted
            .push(matches!((switches, involuntary_switches()), (Some(a), Some(b)) if b > a));
        out.mutator += mutator;
        match done {
            Ok(true) => return out,
            Ok(false) if out.steps.len() < MAX_STEPS => {}
            Ok(false) => {
                out.error = Some(format!("the cycle did not complete in {MAX_STEPS} steps"));
                return out;
            }
            Err(e) => {
                out.error = Some(e);
                return out;
            }
        }
    }
}

/// How many times the OS has switched this thread out involuntarily (Linux:
/// `/proc/thread-self/status`), read outside the timed steps: on a loaded
/// machine a step the scheduler preempts takes a time slice longer (about
/// 4 ms), whatever the collector does, so the JSON tells those steps apart.
pub(crate) fn involuntary_switches() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/thread-self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("nonvoluntary_ctxt_switches:"))?
        .trim()
        .parse()
        .ok()
}

/// The nearest-rank `q` quantile of sorted `xs`.
pub(crate) fn quantile(xs: &[f64], q: f64) -> f64 {
    let rank = (q * xs.len() as f64).ceil() as usize;
    xs[rank.clamp(1, xs.len()) - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn measure<W: Stepped>(plan: &Plan, p: &Params) -> Outcome {
    let garbage = plan.garbage_count as u64;
    let mut checks = Vec::new();
    let mut drops = |what: &str, got: u64, want: u64| {
        checks.push((
            got == want,
            format!("{what}: dropped {got} objects, expected {want}"),
        ));
    };

    // Two identical worlds, both built before either collects: neither
    // collection then runs on memory the other has just freed, or finds the
    // collector's scratch memory already touched by the other.
    let d0 = tally::dropped();
    let mut stw_world = W::build(plan, None);
    let mut inc_world = W::build(plan, Some(p.budget));
    let d1 = tally::dropped();
    drops("the builds", d1 - d0, 0);

    // Each measurement starts with glibc's fast bins consolidated: else the
    // incremental cycle's first large allocation would consolidate the
    // chunks the stop-the-world collection just freed, on its clock.
    alloc::settle();
    let t = Instant::now();
    stw_world.collect();
    let stw = t.elapsed();
    let d2 = tally::dropped();
    drops("stop-the-world collection", d2 - d1, garbage);

    alloc::settle();
    let cycle = cycle(&mut inc_world, plan, p);
    let d3 = tally::dropped();
    drops("incremental cycle", d3 - d2, garbage);
    if let Some(e) = &cycle.error {
        checks.push((false, format!("incremental: {e}")));
    }
    checks.extend(
        stw_world
            .checks(plan)
            .into_iter()
            .map(|(ok, m)| (ok, format!("stop-the-world: {m}"))),
    );
    checks.extend(
        inc_world
            .checks(plan)
            .into_iter()
            .map(|(ok, m)| (ok, format!("incremental: {m}"))),
    );

    let mut steps: Vec<f64> = cycle.steps.iter().copied().map(ms).collect();
    let total: f64 = steps.iter().sum();
    let mut clean: Vec<f64> = steps
        .iter()
        .zip(&cycle.preempted)
        .filter(|&(_, &p)| !p)
        .map(|(&t, _)| t)
        .collect();
    clean.sort_by(f64::total_cmp);
    steps.sort_by(f64::total_cmp);
    let stw = ms(stw);
    let mut extra = vec![
        ("frames", cycle.steps.len() as f64),
        ("writes", (2 * p.swaps * cycle.steps.len()) as f64),
        ("mutator_ms", ms(cycle.mutator)),
        ("p99_vs_budget", quantile(&steps, 0.99) / ms(p.budget)),
        (
            "preempted_steps",
            cycle.preempted.iter().filter(|&&p| p).count() as f64,
        ),
    ];
    if !clean.is_empty() {
        extra.extend([
            ("unpreempted_p99_ms", quantile(&clean, 0.99)),
            ("unpreempted_max_ms", clean[clean.len() - 1]),
        ]);
    }
    extra.extend(inc_world.extra());
    Outcome::Ran(Run {
        values: vec![
            steps.len() as f64,
            quantile(&steps, 0.5),
            quantile(&steps, 0.99),
            steps[steps.len() - 1],
            total,
            stw,
            total / stw,
        ],
        extra,
        check: verify(&checks),
    })
}

// ----- coreobject --------------------------------------------------------

struct CoWorld {
    heap: coreobject::Heap,
    handles: Vec<coreobject::Obj<world::CoNode>>,
    levels: Vec<coreobject::Obj<world::CoNode>>,
    started: bool,
    stats: Option<coreobject::CollectStats>,
    tick_time: Duration,
    /// The longest `Tick::time` of the ticks that ended in the mark phase,
    /// in the purge phase, and of the one that completed the cycle.
    max_mark: Duration,
    max_purge: Duration,
    last: Duration,
}

impl Stepped for CoWorld {
    fn build(plan: &Plan, budget: Option<Duration>) -> Self {
        let gc = coreobject::GcConfig {
            incremental: budget,
            ..coreobject::GcConfig::MANUAL
        };
        let mut handles = Vec::with_capacity(plan.n);
        let mut heap = world::co_build(plan, gc, &mut handles);
        world::co_detach(plan, &mut heap, &handles);
        let levels = world::co_levels(&heap, &handles);
        // Starts the cycle on the first tick (switched off in `step`).
        heap.gc_config_mut().every_frame = budget.is_some();
        CoWorld {
            heap,
            handles,
            levels,
            started: false,
            stats: None,
            tick_time: Duration::ZERO,
            max_mark: Duration::ZERO,
            max_purge: Duration::ZERO,
            last: Duration::ZERO,
        }
    }

    fn collect(&mut self) {
        self.stats = Some(self.heap.collect().expect("collect"));
    }

    fn frame(&mut self, swaps: &[Swap]) {
        for s in swaps {
            let (la, lb) = (self.levels[s.a.0], self.levels[s.b.0]);
            let x = self.heap[la].refs[s.a.1];
            let y = self.heap[lb].refs[s.b.1];
            self.heap[la].refs[s.a.1] = y;
            self.heap[lb].refs[s.b.1] = x;
        }
    }

    fn step(&mut self, _budget: Duration) -> Result<bool, String> {
        let tick = self.heap.tick(FRAME_DT);
        if !self.started {
            if tick.started.is_none() {
                return Err("the first tick did not start a cycle".into());
            }
            self.started = true;
            self.heap.gc_config_mut().every_frame = false;
        } else if tick.started.is_some() {
            return Err("a second cycle started before the first completed".into());
        }
        self.tick_time += tick.time;
        if tick.completed.is_some() {
            self.last = tick.time;
        } else if tick.phase == coreobject::Phase::Mark {
            self.max_mark = self.max_mark.max(tick.time);
        } else if tick.phase == coreobject::Phase::Purge {
            self.max_purge = self.max_purge.max(tick.time);
        }
        match tick.completed {
            Some(stats) => {
                self.stats = Some(stats);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn checks(&self, plan: &Plan) -> Vec<(bool, String)> {
        match &self.stats {
            Some(stats) => world::co_checks(plan, &self.heap, &self.handles, stats),
            None => vec![(false, "no collection completed".into())],
        }
    }

    fn extra(&self) -> Vec<(&'static str, f64)> {
        let mut out = vec![
            ("tick_time_ms", ms(self.tick_time)),
            ("max_mark_tick_ms", ms(self.max_mark)),
            ("max_purge_tick_ms", ms(self.max_purge)),
            ("last_tick_ms", ms(self.last)),
        ];
        if let Some(s) = &self.stats {
            out.extend([
                ("stats_slices", s.slices as f64),
                ("stats_max_slice_ms", ms(s.max_slice)),
                ("stats_total_ms", ms(s.total)),
            ]);
        }
        out
    }
}

// ----- gc-arena ----------------------------------------------------------

struct GaWorld {
    arena: world::GaArena,
    chunks: usize,
    max_chunk: Duration,
}

impl Stepped for GaWorld {
    fn build(plan: &Plan, _budget: Option<Duration>) -> Self {
        let arena = world::ga_build(plan);
        world::ga_detach(plan, &arena);
        // Cancel the debt of the build's allocations: the cycle then starts
        // with the first chunk of the first step, not all at once.
        let debt = arena.metrics().allocation_debt();
        arena.metrics().adjust_debt(-debt);
        GaWorld {
            arena,
            chunks: 0,
            max_chunk: Duration::ZERO,
        }
    }

    fn collect(&mut self) {
        self.arena.finish_cycle();
    }

    fn frame(&mut self, swaps: &[Swap]) {
        self.arena.mutate(|mc, root| {
            let world = root.world.expect("world").borrow();
            for s in swaps {
                let (la, lb) = (world.refs[s.a.0], world.refs[s.b.0]);
                let x = la.borrow().refs[s.a.1];
                let y = lb.borrow().refs[s.b.1];
                la.borrow_mut(mc).refs[s.a.1] = y;
                lb.borrow_mut(mc).refs[s.b.1] = x;
            }
        });
    }

    fn step(&mut self, budget: Duration) -> Result<bool, String> {
        let t0 = Instant::now();
        let mut last = t0;
        loop {
            self.arena.metrics().adjust_debt(GA_CHUNK);
            self.arena.cycle_debt();
            self.chunks += 1;
            if self.arena.collection_phase() == CollectionPhase::Sleeping {
                return Ok(true);
            }
            let now = Instant::now();
            self.max_chunk = self.max_chunk.max(now - last);
            last = now;
            if now - t0 >= budget {
                return Ok(false);
            }
        }
    }

    fn checks(&self, plan: &Plan) -> Vec<(bool, String)> {
        let live = self.arena.metrics().total_gc_count();
        vec![(
            live == plan.live(),
            format!("{live} live Gc values, expected {}", plan.live()),
        )]
    }

    fn extra(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("chunks", self.chunks as f64),
            ("max_chunk_ms", ms(self.max_chunk)),
        ]
    }
}

// ----- report ------------------------------------------------------------

/// Whether `w` is one of this workload's results.
pub fn is_incremental(w: &crate::harness::WorkloadResult) -> bool {
    w.name.starts_with(NAME)
}

fn param(w: &crate::harness::WorkloadResult, k: &str) -> Option<String> {
    w.params
        .iter()
        .find(|(key, _)| key == k)
        .map(|(_, v)| v.clone())
}

fn budget_ms(w: &crate::harness::WorkloadResult) -> Option<f64> {
    param(w, "budget_ms")?.parse().ok()
}

/// The median of a peer's JSON-only figure `key`.
fn extra_median(r: &crate::harness::PeerResult, key: &str) -> Option<f64> {
    r.extra
        .iter()
        .find(|(k, _)| k == key)
        .and_then(|(_, v)| report::summarize(v))
        .map(|s| s.median)
}

/// Prints one table for every budget's results: a row per budget and
/// library, with the medians over repetitions.
pub fn print_table(results: &[&crate::harness::WorkloadResult]) {
    use crate::harness::Status;
    let Some(first) = results.first() else {
        return;
    };
    let params: Vec<String> = first
        .params
        .iter()
        .filter(|(k, _)| k != "budget_ms")
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    println!();
    println!("== {NAME} ({})", params.join(", "));
    println!();
    println!(
        "  one whole cycle as frames of mutator writes + one collector step each; medians over repetitions; \
         preempted: steps during which the OS switched the thread out (a time slice, ~4 ms, lands in that step); \
         p99 unpre: the p99 (ms) of the other steps"
    );
    println!(
        "  {:>6}  {:<11} {:>7} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9} {:>10} {:>9} {:>9} {:>5}  check",
        "budget",
        "peer",
        "steps",
        "p50 ms",
        "p99 ms",
        "max ms",
        "cycle ms",
        "STW ms",
        "cycle/STW",
        "p99/budget",
        "preempted",
        "p99 unpre",
        "reps"
    );
    for w in results {
        let b = budget_ms(w).unwrap_or(f64::NAN);
        for r in &w.peers {
            let med = |m: usize| report::summarize(&r.samples[m]).map(|s| s.median);
            let cell =
                |m: usize, prec: usize| med(m).map_or("n/a".to_string(), |x| format!("{x:.prec$}"));
            let preempted =
                extra_median(r, "preempted_steps").map_or("n/a".to_string(), |x| format!("{x:.0}"));
            let clean = extra_median(r, "unpreempted_p99_ms")
                .map_or("n/a".to_string(), |x| format!("{x:.3}"));
            let status = match &r.status {
                Status::Ok => "ok".to_string(),
                Status::Failed(msg) => format!("FAILED: {msg}"),
                Status::Na(why) => format!("n/a: {why}"),
            };
            println!(
                "  {:>6}  {:<11} {:>7} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9} {:>10} {:>9} {:>9} {:>5}  {}",
                format!("{b} ms"),
                r.peer.name(),
                cell(STEPS, 0),
                cell(P50, 3),
                cell(P99, 3),
                cell(MAX, 3),
                cell(CYCLE, 2),
                cell(STW, 2),
                med(RATIO).map_or("n/a".to_string(), |x| format!("{x:.2}x")),
                med(P99).map_or("n/a".to_string(), |x| format!("{:.2}x", x / b)),
                preempted,
                clean,
                r.reps(),
                status
            );
        }
    }
    for n in &first.notes {
        println!("  note: {n}");
    }
}

/// The targets: per budget, coreobject's slice p99 within 1.05x the budget
/// and its cycle within 1.25x its own stop-the-world collection, with
/// gc-arena's figure beside it in the note.
pub fn targets(
    results: &[crate::harness::WorkloadResult],
    at_size: impl Fn(&crate::harness::WorkloadResult) -> bool,
) -> Vec<Target> {
    let mut out = Vec::new();
    for w in results.iter().filter(|w| is_incremental(w)) {
        let Some(b) = budget_ms(w) else { continue };
        let p99 = |peer| report::median_of(w, peer, P99).map(|x| x / b);
        let ratio = |peer| report::median_of(w, peer, RATIO);
        let beside = |x: Option<f64>| {
            format!(
                "coreobject; gc-arena {}",
                x.map_or("n/a".to_string(), |x| format!("{x:.2}x"))
            )
        };
        let clean = |peer| {
            w.ok(peer)
                .and_then(|r| extra_median(r, "unpreempted_p99_ms"))
                .map_or("n/a".to_string(), |x| format!("{:.2}x", x / b))
        };
        out.push(Target {
            name: format!("incremental {b} ms: step p99 <= 1.05x budget"),
            measured: p99(Peer::CoreObject),
            limit: 1.05,
            unit: "x",
            at_target_size: at_size(w),
            note: format!(
                "{}; unpreempted steps: coreobject {}, gc-arena {}",
                beside(p99(Peer::GcArena)),
                clean(Peer::CoreObject),
                clean(Peer::GcArena)
            ),
        });
        out.push(Target {
            name: format!("incremental {b} ms: cycle <= 1.25x own STW"),
            measured: ratio(Peer::CoreObject),
            limit: 1.25,
            unit: "x",
            at_target_size: at_size(w),
            note: beside(ratio(Peer::GcArena)),
        });
    }
    out
}

/// One cycle of [`probe`].
pub struct ProbeCycle {
    /// Ticks (slices) the cycle took.
    pub ticks: usize,
    /// The longest tick, ms.
    pub longest_ms: f64,
    /// The longest tick during which the thread was not switched out
    /// involuntarily, ms.
    pub unpreempted_ms: f64,
    /// Objects the cycle freed.
    pub freed: usize,
    /// Objects the cycle marked.
    pub marked: usize,
    /// The cycle's marking time (its slices' share), ms.
    pub mark_ms: f64,
    /// The cycle's sweep and destroy time, ms.
    pub sweep_ms: f64,
}

/// The 1.2M probe of issue 24: coreobject alone, a world of `groups`
/// groups of `per_group` objects, each holding `handles` handles to
/// objects of its own group (the group's first object rooted), collected
/// incrementally with a `budget` per tick (`incremental_stretch` 1.0, the
/// default), for `cycles` whole cycles. With `hub`, one rooted object also
/// holds a handle to every object (its `Vec` is the large object). A tenth
/// of each group is unreachable garbage, rebuilt before every cycle.
/// Returns what each cycle did.
pub fn probe(
    groups: usize,
    per_group: usize,
    handles: usize,
    hub: bool,
    budget: Duration,
    cycles: usize,
) -> Vec<ProbeCycle> {
    use coreobject::{GcConfig, Heap, HeapConfig, Obj, Object};

    #[derive(Object, Default)]
    struct ProbeNode {
        refs: Vec<Obj<ProbeNode>>,
    }

    let gc = GcConfig {
        incremental: Some(budget),
        every_frame: true,
        ..GcConfig::MANUAL
    };
    let mut heap = Heap::with_config(HeapConfig {
        max_objects: u32::try_from(groups * per_group * 2 + 1024).unwrap_or(u32::MAX),
        gc,
        ..HeapConfig::DEFAULT
    })
    .expect("probe heap");
    let mut rng = fastrand::Rng::with_seed(0x5eed);
    let garbage = per_group / 10;
    let build = |heap: &mut Heap, rng: &mut fastrand::Rng| {
        let mut all = Vec::with_capacity(groups * per_group);
        for _ in 0..groups {
            let live = per_group - garbage;
            let base = all.len();
            for _ in 0..per_group {
                all.push(heap.create(ProbeNode::default()));
            }
            for k in 0..per_group {
                // Live objects name live ones; garbage names anything.
                let span = if k < live { live } else { per_group };
                let refs = (0..handles)
                    .map(|_| all[base + rng.usize(..span)])
                    .collect();
                heap[all[base + k]].refs = refs;
            }
            heap.add_to_root(all[base]).expect("root");
            // The group's live objects hang from its first one.
            let kids: Vec<_> = all[base + 1..base + live].to_vec();
            heap[all[base]].refs.extend(kids);
        }
        all
    };
    let all = build(&mut heap, &mut rng);
    if hub {
        let h = heap.create(ProbeNode {
            refs: all
                .chunks(per_group)
                .flat_map(|g| g[..per_group - garbage].iter().copied())
                .collect(),
        });
        heap.add_to_root(h).expect("root");
    }
    heap.collect().expect("first collection");
    let mut out = Vec::new();
    for c in 0..cycles {
        if c > 0 {
            // New garbage for this cycle: groups of objects naming each other.
            let mut g = Vec::with_capacity(groups * garbage);
            for _ in 0..groups * garbage {
                g.push(heap.create(ProbeNode::default()));
            }
            for k in 0..g.len() {
                let refs = (0..handles).map(|_| g[rng.usize(..g.len())]).collect();
                heap[g[k]].refs = refs;
            }
        }
        heap.gc_config_mut().every_frame = true;
        let mut ticks = 0usize;
        let mut longest = Duration::ZERO;
        let mut unpreempted = Duration::ZERO;
        let freed = loop {
            let sw0 = involuntary_switches();
            let t0 = Instant::now();
            let t = heap.tick(Duration::from_millis(16));
            let dt = t0.elapsed();
            let switched = involuntary_switches() != sw0;
            if t.started.is_some() {
                heap.gc_config_mut().every_frame = false;
            }
            ticks += 1;
            longest = longest.max(dt);
            if !switched {
                unpreempted = unpreempted.max(dt);
            }
            if let Some(s) = t.completed {
                break s;
            }
        };
        out.push(ProbeCycle {
            ticks,
            longest_ms: ms(longest),
            unpreempted_ms: ms(unpreempted),
            freed: freed.freed,
            marked: freed.marked,
            mark_ms: ms(freed.mark),
            sweep_ms: ms(freed.sweep + freed.destroy),
        });
    }
    out
}

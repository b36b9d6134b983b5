//! `coreobject-demo`: a simulated game world on coreobject.
//!
//! A rooted world holds streamed levels full of actors and their components;
//! actors hold assets from the disregard-for-GC pool and track each other
//! through weak handles. Two objects in three are static level content
//! (props, their components and each level's package of assets), created
//! when a level loads and freed when it unloads; with `--clusters on` (the
//! default) each level's static content and package are GC clusters, made
//! at load, and `--clusters off` builds the same world without them. Every frame actors spawn, die (marked as garbage or
//! detached from their level), retarget and fire projectiles, and the
//! collector runs when its policy says so ([`coreobject::Heap::tick`]):
//! generationally by default (minor cycles over the objects created since
//! the last cycle, major ones over the whole heap, a slice of at most
//! `--budget-ms` per frame), incrementally with only major cycles with
//! `--gc incremental`, or stop-the-world with `--gc full`.
//!
//! At the end the demo prints a summary (population, collections, minor and
//! major cycles apart, pauses,
//! the collector's time per frame against the budget, peak memory, what was
//! freed, the top classes, why one actor is alive, the memory report),
//! writes an SVG chart of the collector's time per frame and a JSON file of
//! every statistic (and, with `--trace`, a Chrome trace-event file), and
//! checks invariants independently of the collector. It exits with status 1
//! if one is violated, 2 on an error.
//!
//! ```sh
//! cargo run --release -p coreobject-demo -- --objects 100000 --frames 600 --seed 1 --out out
//! cargo run --release -p coreobject-demo -- --gc full --trace out/trace.json
//! cargo run --release -p coreobject-demo -- --gc full --clusters off
//! cargo run --release -p coreobject-demo -- --save-at 300     # save, load back, check
//! cargo run --release -p coreobject-demo -- --load out/world.save
//! ```
//!
//! `--save-at N` saves the whole world after frame `N` to `<out>/world.save`,
//! loads it back into fresh heaps (an exact restore and an instantiation),
//! checks that they hold the same graph, and reports the save and load
//! times and the file's size (also in `<out>/save.json`); `--load FILE`
//! restores such a file and checks it (see `saving.rs`).

mod autosave;
mod chart;
mod check;
mod model;
mod progress;
mod report;
mod saving;
mod stats;
mod trace;
mod world;

use std::collections::BTreeMap;
use std::error::Error;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use coreobject::MemoryReport;

use crate::progress::{GcSoFar, Progress};
use crate::report::{
    ByKind, Chain, ClusterSummary, CycleShape, PeakMemory, RunReport, RunSettings, Timing,
};
use crate::stats::{micros, rss_bytes, GcPerFrame, Percentiles};
use crate::world::{Clusters, FinalGc, GcMode, Moves, Settings, Sim, Span, DT, GC_INTERVAL};

/// Simulates a game world on coreobject and reports on its garbage collector.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Cli {
    /// Target population: objects alive at once. Two in three are static
    /// level content, loaded with the levels; the dynamic rest (actors,
    /// their components, projectiles) rises and falls by 20%.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(100..=100_000_000))]
    objects: u64,
    /// Frames to simulate (60 a simulated second).
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u32).range(1..))]
    frames: u32,
    /// Random seed: the same seed gives the same world (exactly so with
    /// `--gc full`; incremental and generational slices are cut by
    /// wall-clock time).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Directory for pauses.svg and stats.json (created if missing).
    #[arg(long, default_value = "out")]
    out: PathBuf,
    /// How the collector runs: generational (minor cycles when a tenth of
    /// the target population was created since the last cycle, major ones
    /// when the old generation has doubled, or every 10 s; a budgeted slice
    /// per frame),
    /// incremental (major cycles only, a budgeted slice per frame) or full
    /// (major cycles only, each stop-the-world, in one frame).
    #[arg(long, value_enum, default_value_t = GcMode::Generational)]
    gc: GcMode,
    /// The collector's time budget per frame, in milliseconds (fractions
    /// allowed). Generational and incremental modes cap each tick at it
    /// (`GcConfig::incremental_stretch` is 1); full mode only counts the
    /// frames over it.
    #[arg(long, default_value_t = 2.0, value_parser = parse_budget_ms)]
    budget_ms: f64,
    /// Generational mode: start a minor cycle when this many objects were
    /// created since the last cycle (default: a tenth of `--objects`, at
    /// least 256).
    #[arg(long, value_name = "OBJECTS", value_parser = clap::value_parser!(u64).range(1..))]
    young_threshold: Option<u64>,
    /// GC clusters: on makes each level's static content (its props and
    /// their components) and its package of assets a cluster when the level
    /// loads, which the collector keeps or frees whole; off builds the same
    /// world without clusters, to compare.
    #[arg(long, value_enum, default_value_t = Clusters::On)]
    clusters: Clusters,
    /// How every live actor and projectile moves each frame: through the
    /// data door (`Heap::data_mut`, free for the collector) or through
    /// `get_mut` (re-scanned while a cycle marks).
    #[arg(long, value_enum, default_value_t = Moves::Door)]
    moves: Moves,
    /// Short-lived effects (projectiles living 2-7 frames) created each
    /// frame, in percent of `--objects`.
    #[arg(long, value_name = "PERCENT", default_value_t = 100.0 * world::EFFECTS_SHARE)]
    effects: f64,
    /// Also write a Chrome trace-event file here (opens in Perfetto and
    /// chrome://tracing): game logic and collector slices per frame, and
    /// the live-object count.
    #[arg(long, value_name = "PATH")]
    trace: Option<PathBuf>,
    /// Save the whole world after this frame to `<out>/world.save`, load it
    /// back into fresh heaps (exact restore and instantiate), check that
    /// they hold the same graph, and report save and load times and the
    /// file's size.
    #[arg(long, value_name = "FRAME")]
    save_at: Option<u32>,
    /// Instead of simulating: restore a world saved with `--save-at`,
    /// report what it holds, collect it and check that it saves to the
    /// same bytes.
    #[arg(long, value_name = "FILE")]
    load: Option<PathBuf>,
    /// Autosave into `<out>/autosave.redb` every this many seconds: capture
    /// on the game thread, commit on a worker (see `autosave.rs`).
    #[arg(long, value_name = "SECONDS")]
    autosave: Option<f64>,
    /// The autosave's capture budget per frame, in milliseconds: a capture
    /// runs one step a frame until its final step (which takes what the
    /// frames changed meanwhile).
    #[arg(long, default_value_t = 1.0, value_parser = parse_budget_ms)]
    capture_budget_ms: f64,
    /// Instead of simulating: load the last autosave in `<out>`.
    #[arg(long)]
    resume: bool,
}

/// A budget in milliseconds: positive, finite, at most a second.
fn parse_budget_ms(s: &str) -> Result<f64, String> {
    let ms: f64 = s
        .trim()
        .parse()
        .map_err(|e| format!("not a number of milliseconds: {e}"))?;
    if ms.is_finite() && ms > 0.0 && ms <= 1000.0 {
        Ok(ms)
    } else {
        Err(format!(
            "{s} ms: the budget must be above 0 and at most 1000 ms"
        ))
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("coreobject-demo: an invariant was violated (see above)");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("coreobject-demo: error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Runs the demo. `Ok(false)` if an invariant was violated.
fn run(cli: &Cli) -> Result<bool, Box<dyn Error>> {
    if let Some(file) = &cli.load {
        return saving::load(file);
    }
    if cli.resume {
        return autosave::resume(&cli.out);
    }
    std::fs::create_dir_all(&cli.out)
        .map_err(|e| format!("cannot create {}: {e}", cli.out.display()))?;
    let settings = Settings {
        objects: usize::try_from(cli.objects)?,
        frames: cli.frames,
        seed: cli.seed,
        gc: cli.gc,
        budget: Duration::from_secs_f64(cli.budget_ms / 1000.0),
        young_threshold: cli.young_threshold.map(usize::try_from).transpose()?,
        clusters: cli.clusters,
        moves: cli.moves,
        effects: cli.effects.max(0.0) / 100.0,
    };
    eprintln!(
        "building a world of {} objects (seed {}, clusters {}, {} collection{})...",
        report::thousands(cli.objects),
        cli.seed,
        cli.clusters.name(),
        cli.gc.name(),
        if cli.gc.sliced() {
            format!(
                ", {} ms budget per frame, moves through {}",
                cli.budget_ms,
                cli.moves.name()
            )
        } else {
            String::new()
        }
    );
    let progress = Progress::new(u64::from(cli.frames));
    let save_at = cli.save_at.map(|f| (f, cli.out.join("world.save")));
    let mut autosaver = match cli.autosave {
        Some(s) => Some(autosave::Autosave::start(
            &cli.out,
            s,
            Duration::from_secs_f64(cli.capture_budget_ms / 1000.0),
        )?),
        None => None,
    };
    let (report, memory_report, timeline, saved) =
        simulate(settings, &progress, save_at, autosaver.as_mut())?;

    print!("{}", report.summary(&memory_report));
    let mut saved_ok = true;
    if let Some(s) = &saved {
        print!("{}", s.summary());
        saved_ok = s.restore_same && s.instantiate_same;
        let path = cli.out.join("save.json");
        std::fs::write(&path, serde_json::to_string_pretty(s)?)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        println!(
            "wrote {} and {}",
            cli.out.join("world.save").display(),
            path.display()
        );
    } else if let Some(f) = cli.save_at {
        println!(
            "--save-at {f}: the run has {} frames; nothing saved",
            cli.frames
        );
    }
    let capture_steps: Vec<(u32, f64)> = autosaver
        .as_ref()
        .map(|a| a.steps().to_vec())
        .unwrap_or_default();
    if let Some(a) = autosaver {
        a.finish(&cli.out, &report.frames, cli.budget_ms)?;
    }
    let svg = cli.out.join("pauses.svg");
    let json = cli.out.join("stats.json");
    let title = format!(
        "coreobject-demo: {} frames, {} objects target, seed {}, clusters {}, {} collection{}",
        cli.frames,
        report::thousands(cli.objects),
        cli.seed,
        cli.clusters.name(),
        cli.gc.name(),
        if cli.gc.sliced() {
            format!(" ({} ms budget)", cli.budget_ms)
        } else {
            String::new()
        }
    );
    chart::write_svg(&svg, &title, &report, &capture_steps)
        .map_err(|e| format!("cannot write {}: {e}", svg.display()))?;
    report
        .write_json(&json)
        .map_err(|e| format!("cannot write {}: {e}", json.display()))?;
    println!("\nwrote {} and {}", svg.display(), json.display());
    if let Some(path) = &cli.trace {
        trace::write(path, &report, &timeline)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        println!(
            "wrote {} (open it in Perfetto or chrome://tracing)",
            path.display()
        );
    }
    Ok(saved_ok && report.checks.iter().all(|c| c.ok))
}

/// When the run's stretches outside the frames happened, for the trace.
#[derive(Clone, Debug)]
pub struct Timeline {
    /// Building the world.
    pub setup: Span,
    /// Finishing the cycle in flight and the final collection.
    pub final_gc: FinalGc,
    /// The reference chains, memory report and checks.
    pub checks: Span,
}

/// Builds the world, simulates every frame, runs a final collection and the
/// checks, and gathers the report (with the heap's memory report, which the
/// summary prints as the heap formats it, and the timeline for the trace).
#[allow(clippy::type_complexity)]
fn simulate(
    settings: Settings,
    progress: &Progress,
    save_at: Option<(u32, PathBuf)>,
    mut autosaver: Option<&mut autosave::Autosave>,
) -> Result<
    (
        RunReport,
        MemoryReport,
        Timeline,
        Option<saving::SaveReport>,
    ),
    Box<dyn Error>,
> {
    let started = Instant::now();
    let frame_count = settings.frames;
    let budget_us = micros(settings.budget);
    let mut sim = Sim::new(settings)?;
    let setup = started.elapsed();
    let setup_span = Span {
        start_us: 0.0,
        dur_us: micros(sim.epoch.elapsed()),
    };
    // Sampled once the world is built, then twice a frame and at the end.
    let mut rss_peak = rss_bytes().map(|b| (b, 0));

    let mut frames = Vec::with_capacity(frame_count as usize);
    let mut collections = Vec::new();
    let mut so_far = GcSoFar {
        mode: sim.settings.gc,
        budget_us,
        ..GcSoFar::default()
    };
    let mut saved = None;
    let frames_started = Instant::now();
    for f in 0..frame_count {
        let (record, collection) = sim.step(f)?;
        so_far.add(&record);
        raise_peak(&mut rss_peak, record.rss_bytes, f);
        progress.frame(&record, &so_far);
        frames.push(record);
        collections.extend(collection);
        if let Some((_, path)) = save_at.as_ref().filter(|(at, _)| *at == f) {
            saved = Some(saving::save_at(&sim.heap, path, f)?);
        }
        if let Some(a) = autosaver.as_deref_mut() {
            a.after_frame(&mut sim.heap, f)?;
        }
    }
    progress.finish();
    let frames_time = frames_started.elapsed();

    let checks_started = Instant::now();
    let final_gc = sim.final_collection(frame_count)?;
    let drain_gc_us = final_gc.drain.map_or(0.0, |(_, gc)| gc);
    collections.extend(final_gc.records.iter().cloned());
    let checks_from = Instant::now();
    let subject = check::chain_subject(&sim);
    let chains = subject
        .map(|a| sim.heap.reference_chains(a, 3))
        .unwrap_or_default();
    let chain = subject.zip(chains.first());
    let checks = check::verify(&sim, &collections, chain);
    let memory_report = sim.heap.memory_report();
    let checks_time = checks_started.elapsed();
    let checks_span = Span {
        start_us: sim.since_start(checks_from),
        dur_us: micros(checks_from.elapsed()),
    };
    let rss_end = rss_bytes();
    raise_peak(&mut rss_peak, rss_end, frame_count);

    let (live_peak_frame, live_peak) = frames
        .iter()
        .map(|f| (f.frame, f.live_before_tick.max(f.live)))
        .max_by_key(|&(frame, n)| (n, std::cmp::Reverse(frame)))
        .unwrap_or_default();
    let mut by_trigger = BTreeMap::new();
    for c in &collections {
        *by_trigger.entry(c.trigger).or_insert(0) += 1;
    }
    let pauses: Vec<f64> = collections.iter().map(|c| c.cycle_us).collect();
    let gc_per_frame = GcPerFrame::of(&frames, budget_us);
    // The collector's time as the ticks measured it: every frame's, the
    // drain's and the final collection's.
    let gc_us = frames.iter().map(|f| f.gc_us).sum::<f64>()
        + drain_gc_us
        + collections.last().map_or(0.0, |c| c.cycle_us);
    let cycle_shape = CycleShape {
        end_of_run_ticks: final_gc.drain_ticks,
        end_of_run_max_tick_us: final_gc.drain_max_tick_us,
        ..CycleShape::of(&collections)
    };
    let totals = sim.heap.gc_totals().clone();
    let reference_chain = chain.map(|(actor, c)| {
        let why = if sim.recent_detached.contains(&actor) {
            "detached from its level, yet alive: an actor still in a level owns it"
        } else {
            "a live actor (no detached actor survived)"
        };
        let name = sim.heap.path_name(actor).unwrap_or_default();
        Chain::new(name, why.to_string(), c, chains.len())
    });
    let report = RunReport {
        settings: RunSettings {
            objects: sim.settings.objects,
            frames: frame_count,
            seed: sim.settings.seed,
            dt_s: DT.as_secs_f64(),
            gc_interval_s: world::gc_config(&sim.settings)
                .interval
                .unwrap_or(GC_INTERVAL)
                .as_secs_f64(),
            gc_object_threshold: world::gc_config(&sim.settings)
                .object_threshold
                .unwrap_or(0),
            gc: sim.settings.gc,
            gc_young_threshold: world::young_threshold(&sim.settings),
            budget_ms: budget_us / 1000.0,
            clusters: sim.settings.clusters,
            moves: sim.settings.moves,
            static_share: world::STATIC_SHARE,
        },
        timing: Timing {
            setup_s: setup.as_secs_f64(),
            frames_s: frames_time.as_secs_f64(),
            checks_s: checks_time.as_secs_f64(),
            total_s: started.elapsed().as_secs_f64(),
            gc_s: gc_us / 1e6,
        },
        live_end: sim.heap.len(),
        live_peak,
        live_peak_frame,
        collections: collections.len(),
        collections_by_trigger: by_trigger,
        by_kind: ByKind::of(&collections),
        pause: Percentiles::of(&pauses),
        pause_describes: match sim.settings.gc {
            GcMode::Full => "the stop-the-world pause of each collection",
            GcMode::Incremental | GcMode::Generational => {
                "the collector's total time in each cycle, summed over its slices (Tick::time \
                 from the tick that started it to the one that completed it); no frame waits \
                 this long, see gc_per_frame. The final explicit collection is a real pause"
            }
        },
        gc_per_frame,
        cycle_shape,
        peak_memory: PeakMemory {
            live_objects: live_peak,
            live_objects_frame: live_peak_frame,
            rss_bytes: rss_peak.map(|(b, _)| b),
            rss_frame: rss_peak.map(|(_, f)| f),
            rss_end_bytes: rss_end,
        },
        freed_objects: totals.total_freed,
        freed_bytes: totals.total_freed_bytes,
        counters: sim.counters.clone(),
        top_classes: sim.heap.class_counts(),
        clusters: ClusterSummary::of(&sim),
        memory: (&memory_report).into(),
        reference_chain,
        table: sim.heap.table_stats().into(),
        checks,
        frames,
        collection_log: collections,
    };
    let timeline = Timeline {
        setup: setup_span,
        final_gc,
        checks: checks_span,
    };
    Ok((report, memory_report, timeline, saved))
}

/// Raises `peak` (a value and the frame it was seen in) to `sample`.
fn raise_peak(peak: &mut Option<(u64, u32)>, sample: Option<u64>, frame: u32) {
    if let Some(v) = sample {
        if !matches!(*peak, Some((p, _)) if p >= v) {
            *peak = Some((v, frame));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{simulate, Clusters, GcMode, Progress, Settings};
    use crate::report::RunReport;

    fn small(objects: usize, frames: u32, seed: u64, gc: GcMode, budget: Duration) -> RunReport {
        let settings = Settings {
            objects,
            frames,
            seed,
            gc,
            budget,
            young_threshold: None,
            clusters: Clusters::On,
            moves: crate::world::Moves::Door,
            effects: crate::world::EFFECTS_SHARE,
        };
        simulate(settings, &Progress::hidden(), None, None)
            .unwrap()
            .0
    }

    /// `--save-at`: the world saved mid-run (a generational cycle may be in
    /// flight) loads back both ways as the same graph, and `--load` accepts
    /// the file.
    #[test]
    fn a_world_saved_mid_run_loads_back_as_the_same_graph() {
        let dir = std::env::temp_dir().join(format!("coreobject-demo-save-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("world.save");
        let settings = Settings {
            objects: 3_000,
            frames: 30,
            seed: 3,
            gc: GcMode::Generational,
            budget: Duration::from_millis(2),
            young_threshold: None,
            clusters: Clusters::On,
            moves: crate::world::Moves::Door,
            effects: crate::world::EFFECTS_SHARE,
        };
        let (_, _, _, saved) = simulate(
            settings,
            &Progress::hidden(),
            Some((20, path.clone())),
            None,
        )
        .unwrap();
        let saved = saved.expect("saved at frame 20");
        assert!(saved.restore_same && saved.instantiate_same, "{saved:?}");
        assert!(
            saved.objects > 1_000 && saved.bytes > saved.objects * 10,
            "{saved:?}"
        );
        assert!(crate::saving::load(&path).unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Every invariant holds, the collector ran on its own, and the
    /// per-frame figures are consistent.
    fn invariants_hold(report: &RunReport) {
        for c in &report.checks {
            assert!(c.ok, "{}: {}", c.name, c.detail);
        }
        assert!(report.collections >= 2, "tick collected at least once");
        let g = &report.gc_per_frame;
        assert!(g.frames_with_gc > 0 && g.frames_with_gc <= report.frames.len());
        assert!(g.p50_us <= g.p99_us && g.p99_us <= g.max_us);
        assert_eq!(report.peak_memory.live_objects, report.live_peak);
    }

    /// A small world, run to the end: every invariant holds, and level
    /// streaming and both kinds of death happened.
    fn holds_every_invariant(report: &RunReport) {
        invariants_hold(report);
        assert_eq!(report.counters.levels_unloaded, 2);
        assert!(report.counters.actors_marked_garbage > 0);
        assert!(report.counters.actors_detached > 0);
        assert!(report.counters.weak_stale_freed > 0);
        assert!(report.reference_chain.is_some());
    }

    #[test]
    fn small_world_holds_every_invariant_stop_the_world() {
        let r = small(3_000, 45, 7, GcMode::Full, Duration::from_millis(2));
        holds_every_invariant(&r);
        majors_only(&r);
        assert!(r.collection_log.iter().all(|c| c.slices == 1));
    }

    #[test]
    fn small_world_holds_every_invariant_incrementally() {
        let r = small(3_000, 45, 7, GcMode::Incremental, Duration::from_millis(2));
        holds_every_invariant(&r);
        majors_only(&r);
        slices_are_frames_slices(&r);
    }

    /// The default mode: minor cycles between major ones, every invariant
    /// holding (an old object a minor cycle left alive is checked again
    /// after the next cycle, and must be gone after the next major one).
    #[test]
    fn small_world_holds_every_invariant_generationally() {
        let r = small(3_000, 45, 7, GcMode::Generational, Duration::from_millis(2));
        holds_every_invariant(&r);
        slices_are_frames_slices(&r);
        let k = &r.by_kind;
        assert!(k.minor.cycles > 0 && k.major.cycles > 0, "{k:?}");
        assert!(r.collection_log.iter().any(|c| c.kind == "minor"));
        assert!(r.counters.dead_handles_freed_by_minors > 0);
        assert!(r.counters.dead_handles_carried > 0, "{:?}", r.counters);
        assert!(k.minor.young_mean > 0.0, "{k:?}");
    }

    /// Only the generational mode runs minor cycles.
    fn majors_only(r: &RunReport) {
        assert_eq!(r.by_kind.minor.cycles, 0);
        assert!(r.collection_log.iter().all(|c| c.kind == "major"));
    }

    /// The longest slice reported is one a frame ran: it fits in the
    /// longest frame's collector time. The ticks that finish the cycle in
    /// flight after the last frame are reported apart.
    fn slices_are_frames_slices(r: &RunReport) {
        let shape = &r.cycle_shape;
        assert!(
            shape.max_slice_us <= r.gc_per_frame.max_us,
            "longest slice {} us, longest frame's collector time {} us",
            shape.max_slice_us,
            r.gc_per_frame.max_us
        );
        let drained = r.collection_log.iter().filter(|c| c.after_frames).count();
        assert_eq!(drained, shape.finished_after_frames);
        assert_eq!(drained > 0, shape.end_of_run_ticks > 0, "{shape:?}");
    }

    /// A budget far too small for a cycle: cycles span many frames, objects
    /// die while one is in flight, and the invariants still hold.
    #[test]
    fn tiny_budget_holds_every_invariant() {
        let r = small(
            3_000,
            60,
            11,
            GcMode::Incremental,
            Duration::from_micros(20),
        );
        invariants_hold(&r);
        assert!(r.cycle_shape.slices_max > 1, "{:?}", r.cycle_shape);
        assert!(r.cycle_shape.frames_max > 1, "{:?}", r.cycle_shape);
        slices_are_frames_slices(&r);
        assert!(r.counters.dead_handles_deferred > 0);
    }

    /// The same seed gives the same world when collections are
    /// stop-the-world. (Incremental slices are cut by wall-clock time, so
    /// when a cycle completes, and with it which weak targets went stale,
    /// depends on the machine.)
    #[test]
    fn runs_are_deterministic() {
        let run = |seed| {
            let r = small(1_000, 20, seed, GcMode::Full, Duration::from_millis(2));
            (r.counters.objects_created, r.freed_objects, r.live_end)
        };
        assert_eq!(run(3), run(3));
    }

    #[test]
    fn budget_parsing() {
        assert_eq!(super::parse_budget_ms("0.5"), Ok(0.5));
        assert_eq!(super::parse_budget_ms("2"), Ok(2.0));
        for bad in ["0", "-1", "NaN", "inf", "x", "1001"] {
            assert!(super::parse_budget_ms(bad).is_err(), "{bad}");
        }
    }
}

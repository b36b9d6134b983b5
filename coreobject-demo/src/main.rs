//! `coreobject-demo`: a simulated game world on coreobject.
//!
//! A rooted world holds streamed levels full of actors and their components;
//! actors hold assets from the disregard-for-GC pool and track each other
//! through weak handles. Every frame actors spawn, die (marked as garbage or
//! detached from their level), retarget and fire projectiles, and the
//! collector runs when its policy says so ([`coreobject::Heap::tick`]).
//!
//! At the end the demo prints a summary (population, collections, pauses,
//! what was freed, the top classes, why one actor is alive, the memory
//! report), writes an SVG chart of the pauses and a JSON file of every
//! statistic, and checks invariants independently of the collector. It
//! exits with status 1 if one is violated, 2 on an error.
//!
//! ```sh
//! cargo run --release -p coreobject-demo -- --objects 100000 --frames 600 --seed 1 --out out
//! ```

mod chart;
mod check;
mod model;
mod progress;
mod report;
mod stats;
mod world;

use std::collections::BTreeMap;
use std::error::Error;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use coreobject::MemoryReport;

use crate::progress::Progress;
use crate::report::{Chain, RunReport, RunSettings, Timing};
use crate::stats::Percentiles;
use crate::world::{Settings, Sim, DT, GC_INTERVAL};

/// Simulates a game world on coreobject and reports on its garbage collector.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Cli {
    /// Target population: objects alive at once (it rises and falls by 20%).
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(100..=100_000_000))]
    objects: u64,
    /// Frames to simulate (60 a simulated second).
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u32).range(1..))]
    frames: u32,
    /// Random seed: the same seed gives the same world.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Directory for pauses.svg and stats.json (created if missing).
    #[arg(long, default_value = "out")]
    out: PathBuf,
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
    std::fs::create_dir_all(&cli.out)
        .map_err(|e| format!("cannot create {}: {e}", cli.out.display()))?;
    let settings = Settings {
        objects: usize::try_from(cli.objects)?,
        frames: cli.frames,
        seed: cli.seed,
    };
    eprintln!(
        "building a world of {} objects (seed {})...",
        report::thousands(cli.objects),
        cli.seed
    );
    let progress = Progress::new(u64::from(cli.frames));
    let (report, memory_report) = simulate(settings, &progress)?;

    print!("{}", report.summary(&memory_report));
    let svg = cli.out.join("pauses.svg");
    let json = cli.out.join("stats.json");
    let title = format!(
        "coreobject-demo: {} frames, {} objects target, seed {}",
        cli.frames,
        report::thousands(cli.objects),
        cli.seed
    );
    chart::write_svg(&svg, &title, &report.frames, &report.collection_log)
        .map_err(|e| format!("cannot write {}: {e}", svg.display()))?;
    report
        .write_json(&json)
        .map_err(|e| format!("cannot write {}: {e}", json.display()))?;
    println!("\nwrote {} and {}", svg.display(), json.display());
    Ok(report.checks.iter().all(|c| c.ok))
}

/// Builds the world, simulates every frame, runs a final collection and the
/// checks, and gathers the report (with the heap's memory report, which the
/// summary prints as the heap formats it).
fn simulate(
    settings: Settings,
    progress: &Progress,
) -> Result<(RunReport, MemoryReport), Box<dyn Error>> {
    let started = Instant::now();
    let frame_count = settings.frames;
    let mut sim = Sim::new(settings)?;
    let setup = started.elapsed();

    let mut frames = Vec::with_capacity(frame_count as usize);
    let mut collections = Vec::new();
    let frames_started = Instant::now();
    for f in 0..frame_count {
        let (record, collection) = sim.step(f)?;
        progress.frame(&record, sim.heap.gc_totals().collections);
        frames.push(record);
        collections.extend(collection);
    }
    progress.finish();
    let frames_time = frames_started.elapsed();

    let checks_started = Instant::now();
    collections.push(sim.final_collection(frame_count)?);
    let subject = check::chain_subject(&sim);
    let chains = subject
        .map(|a| sim.heap.reference_chains(a, 3))
        .unwrap_or_default();
    let chain = subject.zip(chains.first());
    let checks = check::verify(&sim, &collections, chain);
    let memory_report = sim.heap.memory_report();
    let checks_time = checks_started.elapsed();

    let (live_peak_frame, live_peak) = frames
        .iter()
        .map(|f| (f.frame, f.live_before_tick.max(f.live)))
        .max_by_key(|&(frame, n)| (n, std::cmp::Reverse(frame)))
        .unwrap_or_default();
    let mut by_trigger = BTreeMap::new();
    for c in &collections {
        *by_trigger.entry(c.trigger).or_insert(0) += 1;
    }
    let pauses: Vec<f64> = collections.iter().map(|c| c.total_us).collect();
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
            gc_interval_s: GC_INTERVAL.as_secs_f64(),
            gc_object_threshold: world::gc_config(sim.settings.objects)
                .object_threshold
                .unwrap_or(0),
        },
        timing: Timing {
            setup_s: setup.as_secs_f64(),
            frames_s: frames_time.as_secs_f64(),
            checks_s: checks_time.as_secs_f64(),
            total_s: started.elapsed().as_secs_f64(),
            gc_s: totals.total_time.as_secs_f64(),
        },
        live_end: sim.heap.len(),
        live_peak,
        live_peak_frame,
        collections: collections.len(),
        collections_by_trigger: by_trigger,
        pause: Percentiles::of(&pauses),
        freed_objects: totals.total_freed,
        freed_bytes: totals.total_freed_bytes,
        counters: sim.counters.clone(),
        top_classes: sim.heap.class_counts(),
        memory: (&memory_report).into(),
        reference_chain,
        table: sim.heap.table_stats().into(),
        checks,
        frames,
        collection_log: collections,
    };
    Ok((report, memory_report))
}

#[cfg(test)]
mod tests {
    use super::{simulate, Progress, Settings};

    /// A small world, run to the end: every invariant holds, the collector
    /// ran on its own, and level streaming and both kinds of death happened.
    #[test]
    fn small_world_holds_every_invariant() {
        let settings = Settings {
            objects: 3_000,
            frames: 45,
            seed: 7,
        };
        let (report, _) = simulate(settings, &Progress::hidden()).unwrap();
        for c in &report.checks {
            assert!(c.ok, "{}: {}", c.name, c.detail);
        }
        assert!(report.collections >= 2, "tick collected at least once");
        assert_eq!(report.counters.levels_unloaded, 2);
        assert!(report.counters.actors_marked_garbage > 0);
        assert!(report.counters.actors_detached > 0);
        assert!(report.counters.weak_stale_freed > 0);
        assert!(report.reference_chain.is_some());
    }

    /// The same seed gives the same world.
    #[test]
    fn runs_are_deterministic() {
        let run = |seed| {
            let s = Settings {
                objects: 1_000,
                frames: 20,
                seed,
            };
            let (r, _) = simulate(s, &Progress::hidden()).unwrap();
            (r.counters.objects_created, r.freed_objects, r.live_end)
        };
        assert_eq!(run(3), run(3));
    }
}

//! The run's report: assembled once at the end, printed as a summary table
//! and written as JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use coreobject::{MemoryReport, RefChain, RootKind, TableStats};
use serde::Serialize;

use crate::check::Check;
use crate::stats::{CollectionRecord, Counters, FrameRecord, GcPerFrame, Percentiles};
use crate::world::{Clusters, GcMode, Sim};

/// What the run was asked to do.
#[derive(Clone, Debug, Serialize)]
pub struct RunSettings {
    /// Target population.
    pub objects: usize,
    /// Frames simulated.
    pub frames: u32,
    /// Random seed.
    pub seed: u64,
    /// Simulated seconds per frame.
    pub dt_s: f64,
    /// The collector's interval trigger, in simulated seconds.
    pub gc_interval_s: f64,
    /// The collector's object-count trigger.
    pub gc_object_threshold: usize,
    /// How the collector ran: `"generational"`, `"incremental"` or `"full"`.
    pub gc: GcMode,
    /// Generational mode: objects created since the last cycle that start
    /// a minor one (`GcConfig::young_threshold`); `null` otherwise.
    pub gc_young_threshold: Option<usize>,
    /// The per-frame budget, in milliseconds (enforced when incremental).
    pub budget_ms: f64,
    /// Whether levels' static content and packages were GC clusters:
    /// `"on"` or `"off"`.
    pub clusters: Clusters,
    /// Share of the target population that is static level content.
    pub static_share: f64,
}

/// The GC clusters at the end of the run (`Heap::cluster_report`) and the
/// static content they hold.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ClusterSummary {
    /// Clusters alive at the end.
    pub clusters: usize,
    /// Their members.
    pub members: usize,
    /// Distinct objects outside their cluster that members reference.
    pub external_refs: usize,
    /// The largest cluster's members.
    pub largest: usize,
    /// Static objects alive at the end (the loaded levels' static content
    /// and packages): the members, with clusters on.
    pub static_objects: usize,
    /// Clusters made during the run (unloaded levels' included).
    pub created: u64,
    /// Times one waited for a cycle in flight to complete.
    pub deferred: u64,
}

impl ClusterSummary {
    /// The clusters of `sim`'s heap now.
    pub fn of(sim: &Sim) -> ClusterSummary {
        let r = sim.heap.cluster_report();
        ClusterSummary {
            clusters: r.clusters.len(),
            members: r.total_members,
            external_refs: r.total_external_refs,
            largest: r.clusters.iter().map(|c| c.members).max().unwrap_or(0),
            static_objects: sim.static_objects,
            created: sim.counters.clusters_created,
            deferred: sim.counters.clusters_deferred,
        }
    }
}

/// Wall-clock times of the run's phases, in seconds.
#[derive(Clone, Debug, Serialize)]
pub struct Timing {
    /// Building the world (pool assets and the initial population).
    pub setup_s: f64,
    /// Simulating the frames, collections included.
    pub frames_s: f64,
    /// Final collection, reference chain, memory report and checks.
    pub checks_s: f64,
    /// Everything.
    pub total_s: f64,
    /// The collector's time: `Tick::time` summed over every tick (the
    /// frames' and those that finished the last cycle), plus the final
    /// explicit collection.
    pub gc_s: f64,
}

/// How completed cycles spread over slices and frames (the final explicit
/// collection left out).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct CycleShape {
    /// Cycles counted.
    pub cycles: usize,
    /// Mean slices per cycle.
    pub slices_mean: f64,
    /// Most slices in a cycle.
    pub slices_max: usize,
    /// Mean frames from a cycle's start to its completion, both included.
    pub frames_mean: f64,
    /// Most frames a cycle spanned.
    pub frames_max: u32,
    /// The longest slice of any cycle completed during the frames
    /// (`CollectStats::max_slice`), in microseconds. A cycle still in flight
    /// when the frames ended is finished by ticks outside any frame (see
    /// `end_of_run_*`), so its `max_slice` is left out here.
    pub max_slice_us: f64,
    /// Cycles finished after the last frame (0 or 1): counted above, but
    /// not in `max_slice_us`.
    pub finished_after_frames: usize,
    /// Ticks that finished the cycle in flight after the last frame.
    pub end_of_run_ticks: usize,
    /// The longest of those ticks (`Tick::time`), in microseconds. No frame
    /// waited for it: these ticks advance no time and may run the rest of
    /// the cycle in one piece.
    pub end_of_run_max_tick_us: f64,
    /// Cycles the collector finished at once because allocation outpaced
    /// them (`CollectStats::forced`).
    pub forced: usize,
}

impl CycleShape {
    /// The shape of the cycles in `log`, but the final explicit one.
    pub fn of(log: &[CollectionRecord]) -> CycleShape {
        let cycles: Vec<&CollectionRecord> =
            log.iter().filter(|c| c.trigger != "final check").collect();
        if cycles.is_empty() {
            return CycleShape::default();
        }
        let n = cycles.len() as f64;
        let frames = |c: &CollectionRecord| c.frame - c.started_frame + 1;
        CycleShape {
            cycles: cycles.len(),
            slices_mean: cycles.iter().map(|c| c.slices as f64).sum::<f64>() / n,
            slices_max: cycles.iter().map(|c| c.slices).max().unwrap_or(0),
            frames_mean: cycles.iter().map(|c| f64::from(frames(c))).sum::<f64>() / n,
            frames_max: cycles.iter().map(|c| frames(c)).max().unwrap_or(0),
            max_slice_us: cycles
                .iter()
                .filter(|c| !c.after_frames)
                .map(|c| c.max_slice_us)
                .fold(0.0, f64::max),
            finished_after_frames: cycles.iter().filter(|c| c.after_frames).count(),
            end_of_run_ticks: 0,
            end_of_run_max_tick_us: 0.0,
            forced: cycles.iter().filter(|c| c.forced).count(),
        }
    }
}

/// The completed cycles of one kind (the final explicit collection left
/// out: it is the end-of-run check's, not the policy's).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct KindSummary {
    /// Cycles completed.
    pub cycles: usize,
    /// Of those, cycles forced to finish at once (`CollectStats::forced`).
    pub forced: usize,
    /// Percentiles of the collector's time in each cycle
    /// ([`CollectionRecord::cycle_us`]: the pause stop-the-world, the sum
    /// of its slices incrementally).
    pub cycle: Percentiles,
    /// The longest slice of any of them, in microseconds.
    pub max_slice_us: f64,
    /// Mean slices per cycle.
    pub slices_mean: f64,
    /// Mean frames from start to completion, both included.
    pub frames_mean: f64,
    /// Marking time summed over the cycles, in microseconds.
    pub mark_us: f64,
    /// Sweeping time (finding unreachable objects, `begin_destroy`) summed.
    pub sweep_us: f64,
    /// Destroying time (finishing, freeing, dropping) summed.
    pub destroy_us: f64,
    /// Objects freed.
    pub freed: u64,
    /// Bytes freed.
    pub freed_bytes: u64,
    /// `destroy_us` per freed object, in nanoseconds (0 if none freed).
    pub destroy_ns_per_freed: f64,
    /// Objects marked, summed.
    pub marked: u64,
    /// Minor cycles: mean young objects considered.
    pub young_mean: f64,
    /// Minor cycles: mean old objects re-scanned (the remembered set).
    pub remembered_mean: f64,
    /// Minor cycles: mean young objects promoted.
    pub promoted_mean: f64,
}

impl KindSummary {
    /// The summary of the cycles in `log` whose kind is `kind`, but the
    /// final explicit collection.
    pub fn of(log: &[CollectionRecord], kind: &str) -> KindSummary {
        let cycles: Vec<&CollectionRecord> = log
            .iter()
            .filter(|c| c.kind == kind && c.trigger != "final check")
            .collect();
        if cycles.is_empty() {
            return KindSummary::default();
        }
        let n = cycles.len() as f64;
        let sum = |f: fn(&CollectionRecord) -> f64| cycles.iter().map(|c| f(c)).sum::<f64>();
        let totals: Vec<f64> = cycles.iter().map(|c| c.cycle_us).collect();
        let freed = cycles.iter().map(|c| c.freed as u64).sum::<u64>();
        let destroy_us = sum(|c| c.destroy_us);
        KindSummary {
            cycles: cycles.len(),
            forced: cycles.iter().filter(|c| c.forced).count(),
            cycle: Percentiles::of(&totals),
            max_slice_us: cycles.iter().map(|c| c.max_slice_us).fold(0.0, f64::max),
            slices_mean: sum(|c| c.slices as f64) / n,
            frames_mean: sum(|c| f64::from(c.frame - c.started_frame + 1)) / n,
            mark_us: sum(|c| c.mark_us),
            sweep_us: sum(|c| c.sweep_us),
            destroy_us,
            freed,
            freed_bytes: cycles.iter().map(|c| c.freed_bytes as u64).sum(),
            destroy_ns_per_freed: if freed == 0 {
                0.0
            } else {
                destroy_us * 1000.0 / freed as f64
            },
            marked: cycles.iter().map(|c| c.marked as u64).sum(),
            young_mean: sum(|c| c.young as f64) / n,
            remembered_mean: sum(|c| c.remembered as f64) / n,
            promoted_mean: sum(|c| c.promoted as f64) / n,
        }
    }
}

/// Minor and major cycles apart.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct ByKind {
    /// Minor cycles: young objects only.
    pub minor: KindSummary,
    /// Major cycles: the whole heap.
    pub major: KindSummary,
}

impl ByKind {
    /// Both summaries of `log`.
    pub fn of(log: &[CollectionRecord]) -> ByKind {
        ByKind {
            minor: KindSummary::of(log, "minor"),
            major: KindSummary::of(log, "major"),
        }
    }
}

/// The most memory the run held.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct PeakMemory {
    /// Most objects allocated at once (sampled before and after each tick).
    pub live_objects: usize,
    /// The frame of that peak.
    pub live_objects_frame: u32,
    /// Highest resident set size seen, in bytes (`/proc/self/statm`,
    /// sampled once the world was built, before and after every tick, and
    /// at the end; `null` where it cannot be read).
    pub rss_bytes: Option<u64>,
    /// The frame of that peak (the frame count for the end of the run).
    pub rss_frame: Option<u32>,
    /// Resident set size at the end of the run, in bytes.
    pub rss_end_bytes: Option<u64>,
}

/// One class's live objects and memory.
#[derive(Clone, Debug, Serialize)]
pub struct ClassRow {
    /// Class name.
    pub class: &'static str,
    /// Live objects.
    pub count: usize,
    /// Bytes of their allocations (header and value).
    pub bytes: usize,
}

/// [`MemoryReport`] in a serializable form.
#[derive(Clone, Debug, Serialize)]
pub struct Memory {
    /// Per class, largest first.
    pub classes: Vec<ClassRow>,
    /// Object allocations.
    pub object_bytes: usize,
    /// The object table's chunks.
    pub table_bytes: usize,
    /// The collector's own structures.
    pub collector_bytes: usize,
    /// What listeners own.
    pub listener_bytes: usize,
}

impl From<&MemoryReport> for Memory {
    fn from(r: &MemoryReport) -> Memory {
        Memory {
            classes: r
                .classes
                .iter()
                .map(|c| ClassRow {
                    class: c.class,
                    count: c.count,
                    bytes: c.bytes,
                })
                .collect(),
            object_bytes: r.object_bytes,
            table_bytes: r.table_bytes,
            collector_bytes: r.collector_bytes,
            listener_bytes: r.listener_bytes,
        }
    }
}

/// One link of a reference chain.
#[derive(Clone, Debug, Serialize)]
pub struct Link {
    /// Display name.
    pub label: String,
    /// Class name.
    pub class: &'static str,
    /// Field path to the next link.
    pub via: Option<String>,
}

/// The "who keeps it alive" answer for one actor.
#[derive(Clone, Debug, Serialize)]
pub struct Chain {
    /// The actor's path name.
    pub subject: String,
    /// Why the actor was picked.
    pub why_picked: String,
    /// The chain as `heap.reference_chains` prints it.
    pub text: String,
    /// How the chain is rooted.
    pub root: String,
    /// Its links, from the root to the actor.
    pub links: Vec<Link>,
    /// Shortest chains found (up to the number asked for).
    pub chains_found: usize,
}

impl Chain {
    /// Describes `chain`, the first of `found` chains to `subject`.
    pub fn new(subject: String, why_picked: String, chain: &RefChain, found: usize) -> Chain {
        Chain {
            subject,
            why_picked,
            text: chain.to_string(),
            root: match &chain.root {
                RootKind::Rooted => "rooted".to_string(),
                RootKind::Strong(n) => format!("{n} strong handles"),
                RootKind::Disregard => "disregard-for-GC pool".to_string(),
                RootKind::Referencer(name) => format!("referencer {name}"),
            },
            links: chain
                .links
                .iter()
                .map(|l| Link {
                    label: l.label.clone(),
                    class: l.class,
                    via: l.via.clone(),
                })
                .collect(),
            chains_found: found,
        }
    }
}

/// Counts describing the object table at the end.
#[derive(Clone, Debug, Serialize)]
pub struct Table {
    /// Objects allocated.
    pub objects: usize,
    /// Slots handed out at least once.
    pub high_water: u32,
    /// Freed slots waiting for reuse.
    pub free: usize,
    /// Chunks allocated.
    pub chunks: usize,
    /// The object cap.
    pub cap: u32,
    /// Objects in the disregard-for-GC pool.
    pub disregard: u32,
}

impl From<TableStats> for Table {
    fn from(t: TableStats) -> Table {
        Table {
            objects: t.objects,
            high_water: t.high_water,
            free: t.free,
            chunks: t.chunks,
            cap: t.cap,
            disregard: t.disregard,
        }
    }
}

/// Every statistic of the run.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    /// What was asked.
    pub settings: RunSettings,
    /// How long it took.
    pub timing: Timing,
    /// Objects allocated at the end.
    pub live_end: usize,
    /// Most objects allocated at once (sampled before each tick).
    pub live_peak: usize,
    /// The frame of the peak.
    pub live_peak_frame: u32,
    /// Completed collection cycles, the final explicit collection included.
    pub collections: usize,
    /// Collections per trigger.
    pub collections_by_trigger: BTreeMap<&'static str, usize>,
    /// Minor and major cycles apart (the final explicit collection left
    /// out).
    pub by_kind: ByKind,
    /// Percentiles, over every completed cycle, of the collector's time in
    /// it ([`CollectionRecord::cycle_us`]): with `--gc full` the pause of
    /// each stop-the-world collection; incrementally the per-cycle total,
    /// summed over the cycle's slices, which is not a pause (see
    /// `pause_describes` and `gc_per_frame`).
    pub pause: Percentiles,
    /// What `pause` measures in this run's mode, in words.
    pub pause_describes: &'static str,
    /// The collector's time in each frame (`Tick::time`), over the frames in
    /// which it did something, against the budget.
    pub gc_per_frame: GcPerFrame,
    /// How cycles spread over slices and frames.
    pub cycle_shape: CycleShape,
    /// Peak live objects and peak resident memory.
    pub peak_memory: PeakMemory,
    /// Objects freed in total.
    pub freed_objects: u64,
    /// Bytes of object allocations freed in total.
    pub freed_bytes: u64,
    /// Event counts.
    pub counters: Counters,
    /// Live objects per class, most numerous first.
    pub top_classes: Vec<(&'static str, usize)>,
    /// The GC clusters at the end.
    pub clusters: ClusterSummary,
    /// The memory report.
    pub memory: Memory,
    /// Why one actor is alive.
    pub reference_chain: Option<Chain>,
    /// The object table.
    pub table: Table,
    /// End-of-run invariants.
    pub checks: Vec<Check>,
    /// Every frame.
    pub frames: Vec<FrameRecord>,
    /// Every collection.
    pub collection_log: Vec<CollectionRecord>,
}

/// `1234567` as `1,234,567`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A byte count in the largest binary unit that keeps it above one.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Microseconds as milliseconds with two decimals.
fn ms(us: f64) -> String {
    format!("{:.2} ms", us / 1000.0)
}

/// Nanoseconds, rounded.
fn ns(ns: f64) -> String {
    format!("{ns:.0} ns")
}

/// One kind's cycles on a line: count, forced, cycle time p50 and max.
fn kind_line(k: &KindSummary, mode: GcMode) -> String {
    if k.cycles == 0 {
        return "none".to_string();
    }
    let what = if mode.sliced() {
        "cycle total (summed over slices)"
    } else {
        "pause"
    };
    format!(
        "{} ({} forced); {what} p50 / max {} / {}; longest slice {}; {:.1} slices, {:.1} \
         frames mean",
        k.cycles,
        k.forced,
        ms(k.cycle.p50_us),
        ms(k.cycle.max_us),
        ms(k.max_slice_us),
        k.slices_mean,
        k.frames_mean
    )
}

impl RunReport {
    /// The summary table printed at the end of the run.
    pub fn summary(&self, memory_report: &MemoryReport) -> String {
        let mut s = String::new();
        let c = &self.counters;
        let row = |s: &mut String, k: &str, v: String| {
            let _ = writeln!(s, "  {k:<30} {v}");
        };
        let _ = writeln!(
            s,
            "coreobject-demo: {} frames, target {} objects, seed {}, clusters {}",
            self.settings.frames,
            thousands(self.settings.objects as u64),
            self.settings.seed,
            self.settings.clusters.name()
        );
        let _ = writeln!(s);
        row(
            &mut s,
            "wall time",
            format!(
                "{:.2} s (setup {:.2} s, frames {:.2} s, checks {:.2} s; collecting {:.2} s)",
                self.timing.total_s,
                self.timing.setup_s,
                self.timing.frames_s,
                self.timing.checks_s,
                self.timing.gc_s
            ),
        );
        row(
            &mut s,
            "objects live (end / peak)",
            format!(
                "{} / {} (peak at frame {})",
                thousands(self.live_end as u64),
                thousands(self.live_peak as u64),
                self.live_peak_frame
            ),
        );
        row(
            &mut s,
            "objects created",
            format!(
                "{} ({} actors, {} static props, {} components, {} projectiles, {} in the pool)",
                thousands(c.objects_created),
                thousands(c.actors_spawned),
                thousands(c.static_props_created),
                thousands(c.components_created),
                thousands(c.projectiles_fired),
                self.table.disregard
            ),
        );
        let cl = &self.clusters;
        row(
            &mut s,
            "static content",
            format!(
                "{} objects live at the end ({:.0}% of the live objects: levels' props, their \
                 components and packages, {:.0}% of the target population)",
                thousands(cl.static_objects as u64),
                100.0 * cl.static_objects as f64 / self.live_end.max(1) as f64,
                100.0 * self.settings.static_share
            ),
        );
        row(
            &mut s,
            "GC clusters",
            match self.settings.clusters {
                Clusters::On => format!(
                    "on: {} clusters, {} members (largest {}), {} objects referenced from outside \
                     at the end; {} made during the run ({} waits for a cycle in flight); collecting \
                     {:.3} s in all",
                    thousands(cl.clusters as u64),
                    thousands(cl.members as u64),
                    thousands(cl.largest as u64),
                    thousands(cl.external_refs as u64),
                    cl.created,
                    cl.deferred,
                    self.timing.gc_s
                ),
                Clusters::Off => format!(
                    "off: the same static content, not clustered; collecting {:.3} s in all",
                    self.timing.gc_s
                ),
            },
        );
        row(
            &mut s,
            "collector",
            match self.settings.gc {
                GcMode::Generational => format!(
                    "generational, a slice of at most {} per frame; a minor cycle each {} \
                     objects created",
                    ms(self.gc_per_frame.budget_us),
                    thousands(self.settings.gc_young_threshold.unwrap_or(0) as u64)
                ),
                GcMode::Incremental => format!(
                    "incremental (major cycles only), a slice of at most {} per frame",
                    ms(self.gc_per_frame.budget_us)
                ),
                GcMode::Full => format!(
                    "full (stop-the-world); budget {} for comparison only",
                    ms(self.gc_per_frame.budget_us)
                ),
            },
        );
        let triggers = self
            .collections_by_trigger
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect::<Vec<_>>()
            .join(", ");
        row(
            &mut s,
            "collections",
            format!(
                "{} completed cycles ({triggers}); majors: every {:.1} s since the last cycle or \
                 at {} objects",
                self.collections,
                self.settings.gc_interval_s,
                thousands(self.settings.gc_object_threshold as u64)
            ),
        );
        for (label, k) in [
            ("minor cycles", &self.by_kind.minor),
            ("major cycles", &self.by_kind.major),
        ] {
            if k.cycles == 0 && label == "minor cycles" && self.settings.gc != GcMode::Generational
            {
                continue;
            }
            row(&mut s, label, kind_line(k, self.settings.gc));
            if k.cycles > 0 {
                row(
                    &mut s,
                    "",
                    format!(
                        "mark {} / sweep {} / destroy {} in all; freed {} ({} destroy per \
                         freed object){}",
                        ms(k.mark_us),
                        ms(k.sweep_us),
                        ms(k.destroy_us),
                        thousands(k.freed),
                        ns(k.destroy_ns_per_freed),
                        if label == "minor cycles" {
                            format!(
                                "; mean {} young, {} remembered, {} promoted",
                                thousands(k.young_mean.round() as u64),
                                thousands(k.remembered_mean.round() as u64),
                                thousands(k.promoted_mean.round() as u64)
                            )
                        } else {
                            String::new()
                        }
                    ),
                );
            }
        }
        let shape = &self.cycle_shape;
        if self.settings.gc.sliced() {
            row(
                &mut s,
                "cycle length",
                format!(
                    "{:.1} slices mean, {} max; {:.1} frames mean, {} max; longest slice {}{}; \
                     {} forced to finish",
                    shape.slices_mean,
                    shape.slices_max,
                    shape.frames_mean,
                    shape.frames_max,
                    ms(shape.max_slice_us),
                    if shape.finished_after_frames > 0 {
                        " (cycles completed during the frames)"
                    } else {
                        ""
                    },
                    shape.forced
                ),
            );
            if shape.end_of_run_ticks > 0 {
                row(
                    &mut s,
                    "after the last frame",
                    format!(
                        "the cycle in flight finished in {} tick{} (longest {}, in no frame; \
                         left out of the longest slice above)",
                        shape.end_of_run_ticks,
                        if shape.end_of_run_ticks == 1 { "" } else { "s" },
                        ms(shape.end_of_run_max_tick_us)
                    ),
                );
            }
        }
        row(
            &mut s,
            match self.settings.gc {
                GcMode::Full => "pause p50 / p99 / max",
                GcMode::Incremental | GcMode::Generational => "cycle total p50 / p99 / max",
            },
            format!(
                "{} / {} / {} (mean {}){}",
                ms(self.pause.p50_us),
                ms(self.pause.p99_us),
                ms(self.pause.max_us),
                ms(self.pause.mean_us),
                match self.settings.gc {
                    GcMode::Full => "",
                    GcMode::Incremental | GcMode::Generational => {
                        ", summed over slices: not a pause"
                    }
                }
            ),
        );
        let g = &self.gc_per_frame;
        row(
            &mut s,
            "gc per frame p50 / p99 / max",
            format!(
                "{} / {} / {} (mean {}) over {} frames with GC work",
                ms(g.p50_us),
                ms(g.p99_us),
                ms(g.max_us),
                ms(g.mean_us),
                g.frames_with_gc
            ),
        );
        row(
            &mut s,
            "frames over budget",
            format!(
                "{} of {} frames with GC work (budget {}); {} over twice the budget",
                g.frames_over_budget,
                g.frames_with_gc,
                ms(g.budget_us),
                g.frames_over_double_budget
            ),
        );
        let peak = &self.peak_memory;
        let rss = match (peak.rss_bytes, peak.rss_frame) {
            (Some(b), Some(f)) => format!(
                "RSS {} (frame {f}), {} at the end",
                bytes(b),
                peak.rss_end_bytes.map_or("?".to_string(), bytes)
            ),
            _ => "RSS unknown (no /proc/self/statm)".to_string(),
        };
        row(
            &mut s,
            "peak memory",
            format!(
                "{} objects (frame {}); {rss}",
                thousands(peak.live_objects as u64),
                peak.live_objects_frame
            ),
        );
        row(
            &mut s,
            "freed (objects / bytes)",
            format!(
                "{} / {}",
                thousands(self.freed_objects),
                bytes(self.freed_bytes)
            ),
        );
        row(
            &mut s,
            "actors killed",
            format!(
                "{} marked as garbage, {} detached from their level",
                thousands(c.actors_marked_garbage),
                thousands(c.actors_detached)
            ),
        );
        row(
            &mut s,
            "levels",
            format!("{} loaded, {} unloaded", c.levels_loaded, c.levels_unloaded),
        );
        row(
            &mut s,
            "weak targets",
            format!(
                "{} resolved, {} stale ({} freed, {} garbage), {} re-resolved",
                thousands(c.weak_checked),
                thousands(c.weak_stale_freed + c.weak_stale_garbage),
                thousands(c.weak_stale_freed),
                thousands(c.weak_stale_garbage),
                thousands(c.weak_reresolved)
            ),
        );
        row(
            &mut s,
            "stale actor entries pruned",
            thousands(c.stale_actor_entries_pruned),
        );
        row(
            &mut s,
            "dead handles verified stale",
            format!(
                "{} ({} by minor cycles; {} left alive by a minor and checked again)",
                thousands(c.dead_handles_verified),
                thousands(c.dead_handles_freed_by_minors),
                thousands(c.dead_handles_carried)
            ),
        );
        row(
            &mut s,
            "object table",
            format!(
                "high water {}, {} free slots, {} chunks, cap {}",
                thousands(u64::from(self.table.high_water)),
                thousands(self.table.free as u64),
                self.table.chunks,
                thousands(u64::from(self.table.cap))
            ),
        );

        let _ = writeln!(s, "\ntop classes by live objects");
        for (class, n) in self.top_classes.iter().take(8) {
            let _ = writeln!(s, "  {class:<30} {:>10}", thousands(*n as u64));
        }

        let _ = writeln!(s, "\nwho keeps it alive (heap.reference_chains)");
        match &self.reference_chain {
            Some(ch) => {
                let _ = writeln!(s, "  {} ({})", ch.subject, ch.why_picked);
                let _ = writeln!(s, "  {}", ch.text);
            }
            None => {
                let _ = writeln!(s, "  (no live actor)");
            }
        }

        let _ = writeln!(s, "\nmemory report (heap.memory_report)");
        for line in memory_report.to_string().lines() {
            let _ = writeln!(s, "  {line}");
        }

        let _ = writeln!(s, "\ninvariants");
        for ch in &self.checks {
            let _ = writeln!(
                s,
                "  [{}] {}: {}",
                if ch.ok { " ok " } else { "FAIL" },
                ch.name,
                ch.detail
            );
        }
        s
    }

    /// Writes the report as pretty JSON.
    pub fn write_json(&self, path: &Path) -> std::io::Result<()> {
        let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
        serde_json::to_writer_pretty(&mut file, self).map_err(std::io::Error::other)?;
        std::io::Write::flush(&mut file)
    }
}

#[cfg(test)]
mod tests {
    use super::{bytes, thousands, CycleShape};
    use crate::stats::CollectionRecord;

    fn cycle(
        frame: u32,
        max_slice_us: f64,
        after_frames: bool,
        trigger: &'static str,
    ) -> CollectionRecord {
        CollectionRecord {
            frame,
            started_frame: frame.saturating_sub(3),
            trigger,
            kind: "major",
            cycle_us: 4.0 * max_slice_us,
            total_us: 4.0 * max_slice_us,
            slices: 4,
            max_slice_us,
            after_frames,
            forced: false,
            born: 0,
            young: 0,
            remembered: 0,
            promoted: 0,
            mark_us: 0.0,
            sweep_us: 0.0,
            destroy_us: 0.0,
            roots: 1,
            marked: 1,
            unreachable: 0,
            freed: 0,
            freed_bytes: 0,
            live_after: 1,
        }
    }

    /// The cycle finished after the last frame (one long tick outside any
    /// frame) does not set the longest slice; the final explicit
    /// collection is not a cycle's slice either.
    #[test]
    fn the_end_of_run_slice_is_not_the_longest() {
        let log = [
            cycle(10, 2_100.0, false, "object count"),
            cycle(20, 3_000.0, false, "object count"),
            cycle(30, 60_000.0, true, "object count"),
            cycle(30, 90_000.0, false, "final check"),
        ];
        let shape = CycleShape::of(&log);
        assert_eq!(shape.cycles, 3);
        assert_eq!(shape.max_slice_us, 3_000.0);
        assert_eq!(shape.finished_after_frames, 1);
    }

    #[test]
    fn formatting() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(3 << 20), "3.0 MiB");
    }
}

//! What the run measures: per-frame and per-collection records, counters,
//! and the percentiles computed from them. Everything here serializes to the
//! JSON report.

use serde::Serialize;

/// Event counts accumulated over the run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Counters {
    /// Objects created, the disregard-for-GC pool included.
    pub objects_created: u64,
    /// Actors spawned.
    pub actors_spawned: u64,
    /// Components created.
    pub components_created: u64,
    /// Projectiles fired.
    pub projectiles_fired: u64,
    /// Static props placed by levels as they loaded.
    pub static_props_created: u64,
    /// GC clusters made (`--clusters on`): a level's package and its static
    /// content each.
    pub clusters_created: u64,
    /// Times a cluster waited because a cycle was in flight (clusters are
    /// made between cycles).
    pub clusters_deferred: u64,
    /// Projectiles that expired and were dropped by their level.
    pub projectiles_expired: u64,
    /// Actors killed with `mark_as_garbage`.
    pub actors_marked_garbage: u64,
    /// Actors removed from their level's list (collected unless something
    /// else still holds them).
    pub actors_detached: u64,
    /// Levels loaded (the initial ones included).
    pub levels_loaded: u64,
    /// Levels unloaded (removed from the world).
    pub levels_unloaded: u64,
    /// Weak target handles resolved by thinking actors.
    pub weak_checked: u64,
    /// Weak targets found stale because their actor was freed.
    pub weak_stale_freed: u64,
    /// Weak targets found stale because their actor was marked as garbage
    /// and not yet collected.
    pub weak_stale_garbage: u64,
    /// Stale weak targets replaced by a newly resolved live target.
    pub weak_reresolved: u64,
    /// Stale strong handles dropped from level actor lists.
    pub stale_actor_entries_pruned: u64,
    /// Loadout changes (an actor picked up a pool asset).
    pub assets_equipped: u64,
    /// Handles of objects known to be dead that were checked to resolve to
    /// nothing after a collection.
    pub dead_handles_verified: u64,
    /// Of those, handles of objects that died while a cycle was in flight:
    /// they were checked at the end of the cycle after it (an object that
    /// the running cycle had already marked may legitimately survive it).
    pub dead_handles_deferred: u64,
    /// Of the handles verified, those a minor cycle freed.
    pub dead_handles_freed_by_minors: u64,
    /// Times a minor cycle left a known-dead handle resolving (an old
    /// object that became unreachable: only a major cycle frees it), so that
    /// the next cycle checked it again. Actors marked as garbage are never
    /// carried: every cycle must free them.
    pub dead_handles_carried: u64,
}

/// One simulated frame.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FrameRecord {
    /// Frame number, from 0.
    pub frame: u32,
    /// The frame's target population.
    pub target: usize,
    /// `heap.len()` at the end of the frame (after any collection).
    pub live: usize,
    /// `heap.len()` just before the collector's tick.
    pub live_before_tick: usize,
    /// Objects created this frame.
    pub created: u64,
    /// Actors marked as garbage this frame.
    pub marked_garbage: u64,
    /// Actors detached this frame.
    pub detached: u64,
    /// Stale weak targets found this frame.
    pub weak_stale: u64,
    /// When the game logic started, in microseconds since the run started.
    pub start_us: f64,
    /// Wall time of the game logic, in microseconds.
    pub logic_us: f64,
    /// When `heap.tick` was called, in microseconds since the run started.
    pub tick_start_us: f64,
    /// Wall time of `heap.tick`, in microseconds.
    pub tick_us: f64,
    /// The collector's time inside this frame's tick, whatever the phase
    /// (`Tick::time`), in microseconds.
    pub gc_us: f64,
    /// Whether the collector did anything in this tick (`Tick::did_work`):
    /// the frames the per-frame GC figures count.
    pub gc_worked: bool,
    /// Whether the thread was switched out involuntarily during the tick
    /// (`nonvoluntary_ctxt_switches` in `/proc/thread-self/status` moved):
    /// on a loaded machine the scheduler's time slices, not the collector,
    /// then make a tick long.
    pub gc_preempted: bool,
    /// The collector's phase after the tick (`Tick::phase`).
    pub gc_phase: &'static str,
    /// Objects the tick processed: marked, swept or destroyed (`Tick::work`).
    pub gc_work: usize,
    /// Objects the tick freed (`Tick::freed`).
    pub gc_freed: usize,
    /// What started a cycle in this tick, if one started.
    pub gc_started: Option<&'static str>,
    /// The kind of the cycle this tick worked on, `"minor"` or `"major"`
    /// (the one it completed, or the one in flight after it); `None` for a
    /// tick with no cycle.
    pub gc_kind: Option<&'static str>,
    /// The cycle that completed in this tick, if one did: its per-cycle
    /// total (see [`CollectionRecord::cycle_us`]), in microseconds.
    pub pause_us: Option<f64>,
    /// Resident set size at the end of the frame, in bytes (`None` where
    /// `/proc/self/statm` cannot be read).
    pub rss_bytes: Option<u64>,
}

/// One completed collection cycle, from [`coreobject::CollectStats`] and the
/// ticks that ran it.
#[derive(Clone, Debug, Serialize)]
pub struct CollectionRecord {
    /// Frame it completed in.
    pub frame: u32,
    /// Frame it started in (the same as `frame` for a stop-the-world
    /// collection).
    pub started_frame: u32,
    /// Which trigger fired: `"interval"` or `"object count"`; `"final check"`
    /// for the explicit collection before the end-of-run checks.
    pub trigger: &'static str,
    /// `"minor"` (young objects only) or `"major"` (the whole heap):
    /// `CollectStats::kind`.
    pub kind: &'static str,
    /// The collector's time in this cycle, in microseconds: the sum of
    /// `Tick::time` over the ticks from the one that started the cycle to
    /// the one that completed it (`CollectStats::total` for the explicit
    /// final collection). For a stop-the-world collection this is its
    /// pause; for an incremental cycle no frame waits this long in one piece.
    pub cycle_us: f64,
    /// `CollectStats::total`, in microseconds.
    pub total_us: f64,
    /// Slices the cycle took (`CollectStats::slices`; 1 stop-the-world).
    pub slices: usize,
    /// The longest slice (`CollectStats::max_slice`), in microseconds.
    pub max_slice_us: f64,
    /// Whether the cycle was finished after the last frame, by the end of
    /// the run's ticks that advance no time (`Sim::final_collection`): its
    /// last slices ran outside any frame, so `max_slice_us` may be one of
    /// them, not a slice a frame waited for.
    pub after_frames: bool,
    /// Whether allocation outpaced the budgeted cycle and the collector
    /// finished it at once, unbudgeted (`CollectStats::forced`).
    pub forced: bool,
    /// Objects created while the cycle was in flight (`CollectStats::born`;
    /// all survive it).
    pub born: usize,
    /// Gathering roots and marking, in microseconds.
    pub mark_us: f64,
    /// Finding unreachable objects and `begin_destroy`, in microseconds.
    pub sweep_us: f64,
    /// Finishing, freeing and dropping, in microseconds.
    pub destroy_us: f64,
    /// Minor cycles: the young objects considered (`CollectStats::young`).
    pub young: usize,
    /// Minor cycles: old objects re-scanned because the program changed
    /// them (`CollectStats::remembered`).
    pub remembered: usize,
    /// Minor cycles: young objects that survived and are now old
    /// (`CollectStats::promoted`).
    pub promoted: usize,
    /// Roots found.
    pub roots: usize,
    /// Objects marked reachable.
    pub marked: usize,
    /// Objects found unreachable.
    pub unreachable: usize,
    /// Objects freed.
    pub freed: usize,
    /// Bytes freed.
    pub freed_bytes: usize,
    /// Objects allocated afterwards.
    pub live_after: usize,
}

/// Pause percentiles, in microseconds (nearest rank).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Percentiles {
    /// Median.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// Longest.
    pub max_us: f64,
    /// Mean.
    pub mean_us: f64,
}

impl Percentiles {
    /// Nearest-rank percentiles of `samples` (all zero if empty).
    pub fn of(samples: &[f64]) -> Percentiles {
        if samples.is_empty() {
            return Percentiles::default();
        }
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        let rank = |p: f64| {
            let r = (p / 100.0 * s.len() as f64).ceil() as usize;
            s[r.clamp(1, s.len()) - 1]
        };
        Percentiles {
            p50_us: rank(50.0),
            p90_us: rank(90.0),
            p99_us: rank(99.0),
            max_us: s[s.len() - 1],
            mean_us: s.iter().sum::<f64>() / s.len() as f64,
        }
    }
}

/// The collector's time per frame (`Tick::time`), over the frames in which
/// it did something (`Tick::did_work`: it started or completed a cycle, or
/// processed or freed objects). Idle ticks, which only check the triggers,
/// are left out, so the percentiles describe the frames the collector
/// actually cost something, not a run that is mostly idle.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct GcPerFrame {
    /// The budget, in microseconds: `--budget-ms`. Incremental mode holds
    /// each tick to it; full mode does not, and counts against it only for
    /// comparison.
    pub budget_us: f64,
    /// Frames in which the collector did something: the samples.
    pub frames_with_gc: usize,
    /// Median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// Longest.
    pub max_us: f64,
    /// Mean.
    pub mean_us: f64,
    /// Frames whose collector time exceeded the budget (by any amount: a
    /// slice checks its deadline every few hundred objects, so a few tens of
    /// microseconds over is common).
    pub frames_over_budget: usize,
    /// Frames whose collector time exceeded the budget by more than 10%:
    /// real overruns, apart from slices that used their budget and stopped
    /// at the deadline's granularity.
    pub frames_overrun: usize,
    /// Frames whose collector time exceeded twice the budget.
    pub frames_over_double_budget: usize,
    /// Frames with GC work whose tick was preempted (see
    /// [`FrameRecord::gc_preempted`]).
    pub frames_preempted: usize,
    /// The others' 99th percentile and longest, and their real overruns
    /// (by more than 10%): the collector's own figures on a loaded machine.
    pub unpreempted_p99_us: f64,
    /// See [`unpreempted_p99_us`](Self::unpreempted_p99_us).
    pub unpreempted_max_us: f64,
    /// See [`unpreempted_p99_us`](Self::unpreempted_p99_us).
    pub unpreempted_overruns: usize,
}

impl GcPerFrame {
    /// The figures over `frames`, against a budget of `budget_us`.
    pub fn of(frames: &[FrameRecord], budget_us: f64) -> GcPerFrame {
        let samples: Vec<f64> = frames
            .iter()
            .filter(|f| f.gc_worked)
            .map(|f| f.gc_us)
            .collect();
        let p = Percentiles::of(&samples);
        let calm: Vec<f64> = frames
            .iter()
            .filter(|f| f.gc_worked && !f.gc_preempted)
            .map(|f| f.gc_us)
            .collect();
        let q = Percentiles::of(&calm);
        GcPerFrame {
            budget_us,
            frames_with_gc: samples.len(),
            p50_us: p.p50_us,
            p99_us: p.p99_us,
            max_us: p.max_us,
            mean_us: p.mean_us,
            frames_over_budget: samples.iter().filter(|&&t| t > budget_us).count(),
            frames_overrun: samples.iter().filter(|&&t| t > 1.1 * budget_us).count(),
            frames_over_double_budget: samples.iter().filter(|&&t| t > 2.0 * budget_us).count(),
            frames_preempted: frames
                .iter()
                .filter(|f| f.gc_worked && f.gc_preempted)
                .count(),
            unpreempted_p99_us: q.p99_us,
            unpreempted_max_us: q.max_us,
            unpreempted_overruns: calm.iter().filter(|&&t| t > 1.1 * budget_us).count(),
        }
    }
}

/// The calling thread's involuntary context switches so far
/// (`/proc/thread-self/status`), `None` where that cannot be read.
pub fn involuntary_switches() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/thread-self/status").ok()?;
    let line = status
        .lines()
        .find(|l| l.starts_with("nonvoluntary_ctxt_switches:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The process's resident set size in bytes: the second field of
/// `/proc/self/statm` (in pages) times the page size. `None` where that
/// file does not exist (not Linux) or cannot be parsed.
pub fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * page_size())
}

/// The page size, from the auxiliary vector the kernel handed the process
/// (`AT_PAGESZ` in `/proc/self/auxv`); 4 KiB if it cannot be read.
fn page_size() -> u64 {
    static PAGE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *PAGE.get_or_init(|| {
        const AT_PAGESZ: u64 = 6;
        const WORD: usize = std::mem::size_of::<usize>();
        let auxv = std::fs::read("/proc/self/auxv").unwrap_or_default();
        let word = |b: &[u8]| {
            let mut w = [0u8; WORD];
            w.copy_from_slice(b);
            usize::from_ne_bytes(w) as u64
        };
        auxv.chunks_exact(2 * WORD)
            .map(|pair| (word(&pair[..WORD]), word(&pair[WORD..])))
            .find(|&(key, _)| key == AT_PAGESZ)
            .map(|(_, v)| v)
            .filter(|&v| v.is_power_of_two())
            .unwrap_or(4096)
    })
}

/// Microseconds in a duration, as a float.
pub fn micros(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

#[cfg(test)]
mod tests {
    use super::{FrameRecord, GcPerFrame, Percentiles};

    #[test]
    fn nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        let p = Percentiles::of(&v);
        assert_eq!(
            (p.p50_us, p.p90_us, p.p99_us, p.max_us),
            (50.0, 90.0, 99.0, 100.0)
        );
        assert_eq!(Percentiles::of(&[7.0]).p50_us, 7.0);
        assert_eq!(Percentiles::of(&[]).max_us, 0.0);
    }

    #[test]
    fn gc_per_frame_counts_only_frames_with_gc() {
        let frame = |gc_us, gc_worked| FrameRecord {
            gc_us,
            gc_worked,
            ..FrameRecord::default()
        };
        let frames = [
            frame(0.5, false),
            frame(1000.0, true),
            frame(2500.0, true),
            frame(1500.0, true),
            frame(2100.0, true),
            frame(0.3, false),
        ];
        let g = GcPerFrame::of(&frames, 2000.0);
        assert_eq!(g.frames_with_gc, 4);
        assert_eq!(g.frames_over_budget, 2);
        assert_eq!(
            g.frames_overrun, 1,
            "2.1 ms used the budget, 2.5 ms overran it"
        );
        assert_eq!(g.frames_over_double_budget, 0);
        assert_eq!(g.max_us, 2500.0);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn rss_is_read() {
        let rss = super::rss_bytes().expect("/proc/self/statm");
        assert!(rss > 0 && rss % super::page_size() == 0);
    }
}

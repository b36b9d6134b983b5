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
    /// Wall time of the game logic, in microseconds.
    pub logic_us: f64,
    /// Wall time of `heap.tick`, in microseconds.
    pub tick_us: f64,
    /// The collection's pause, if one ran this frame, in microseconds.
    pub pause_us: Option<f64>,
}

/// One collection, from [`coreobject::CollectStats`].
#[derive(Clone, Debug, Serialize)]
pub struct CollectionRecord {
    /// Frame it ran in.
    pub frame: u32,
    /// Which trigger fired: `"interval"` or `"object count"`; `"final check"`
    /// for the explicit collection before the end-of-run checks.
    pub trigger: &'static str,
    /// Whole pause, in microseconds.
    pub total_us: f64,
    /// Gathering roots and marking, in microseconds.
    pub mark_us: f64,
    /// Finding unreachable objects and `begin_destroy`, in microseconds.
    pub sweep_us: f64,
    /// Finishing, freeing and dropping, in microseconds.
    pub destroy_us: f64,
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

/// Microseconds in a duration, as a float.
pub fn micros(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

#[cfg(test)]
mod tests {
    use super::Percentiles;

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
}

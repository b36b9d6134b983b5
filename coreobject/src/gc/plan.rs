//! The collector's policy: which kind of cycle a tick starts, and when
//! (the triggers), and how long a timed slice may run to keep up with the
//! program (pacing). The mechanism that runs a cycle is in `gc/mod.rs`.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::budget::Budget;
use super::{Collector, Cycle, CycleKind, Step, Trigger};
use crate::array::ObjectArray;

/// The share of [`GcConfig::incremental_debt`]'s allowance by which a paced
/// cycle aims to end.
const PACE_TARGET: f64 = 0.8;

/// The share of the debt limit from which a timed slice grows (see
/// `Collector::grade`).
const GRADE_FROM: f64 = 0.5;

/// How many times its budget a timed slice may take when the objects created
/// during its cycle reach the debt limit (see `Collector::grade`).
const GRADE_STRETCH: f64 = 1.5;

impl Collector {
    /// The first trigger that fires now, if the collector is enabled, and
    /// the kind of cycle it starts: the young threshold starts a minor
    /// cycle, every other trigger a major one (unless
    /// [`GcConfig::automatic_majors`] is off).
    pub(super) fn due_trigger(&self, array: &ObjectArray) -> Option<(Trigger, CycleKind)> {
        let c = &self.config;
        let considered = || array.len().saturating_sub(array.pool_end() as usize);
        let major = |t| Some((t, CycleKind::Major));
        let minors = c.generational && (c.young_threshold.is_some() || c.young_share.is_some());
        if !self.enabled {
            None
        } else if c.every_frame {
            major(Trigger::EveryFrame)
        } else if !c.automatic_majors {
            self.young_due(array)
        } else if c.interval.is_some_and(|i| self.since_last >= i) {
            major(Trigger::Interval)
        } else if c.object_threshold.is_some_and(|t| considered() >= t) {
            major(Trigger::ObjectCount)
        } else if c
            .bytes_threshold
            .is_some_and(|t| self.bytes_since_gc.load(Ordering::Relaxed) >= t)
        {
            major(Trigger::Bytes)
        } else if c
            .growth
            .is_some_and(|g| self.growth_due(g, considered(), minors))
        {
            major(Trigger::Growth)
        } else {
            self.young_due(array)
        }
    }

    /// Whether the growth trigger fires: the heap's goal is `growth` times
    /// the live heap the last major cycle found (the objects it marked; at
    /// least [`GcConfig::growth_floor`](crate::GcConfig::growth_floor), and
    /// at least one object more than it marked).
    ///
    /// * A cycle run whole starts when the heap reaches the goal: with
    ///   minor cycles (`minors`), the old generation (what survived the last
    ///   cycle, less what was created while it ran: young objects are the
    ///   minors' business), otherwise every
    ///   object the collector considers.
    /// * A timed cycle also starts early enough to end at the goal (Go's
    ///   pacer): the program goes on creating objects while it runs, and no
    ///   minor cycle runs meanwhile, so it starts when every object
    ///   considered, young ones included, plus the objects the program is
    ///   expected to create while it runs ([`MajorPace::lead`]), reaches
    ///   the goal. Started at the goal instead, a sliced cycle ends with the
    ///   heap above it by all it let the program create (in a game's
    ///   frames, as much again as the live heap). With minor cycles, not
    ///   before one has run since the last major cycle: the objects
    ///   created while that one ran are young, and a minor cycle frees
    ///   those that died for less than a major one (a collector that
    ///   cannot keep up would otherwise run major cycles back to back).
    ///   Nor when the lead is as long as the runway from the live heap to
    ///   the goal: the collector is behind the program, and the old
    ///   generation (every object, without minor cycles) alone decides.
    fn growth_due(&self, growth: f64, considered: usize, minors: bool) -> bool {
        let c = &self.config;
        let base = self.major_survivors;
        // Never under the live heap plus one object, whatever the floor and
        // factor: with a floor of 0 (no floor) an emptied heap's goal was
        // 0, reached by an empty heap, and a major cycle started every
        // tick with nothing to free (so did a factor below 1, unvalidated
        // through `gc_config_mut`).
        let goal = ((base as f64 * growth) as usize)
            .max(c.growth_floor)
            .max(base.saturating_add(1));
        let now = if minors {
            self.old_survivors
        } else {
            considered
        };
        if now >= goal {
            return true;
        }
        let timed = c.incremental.is_some_and(|b| b != Duration::MAX);
        if !timed || (minors && self.minors_since_major == 0) {
            return false;
        }
        let lead = self
            .major_pace
            .map_or(0, |p| p.lead(base, considered.saturating_sub(base)));
        // A lead as long as the whole runway from the live heap to the goal:
        // the collector cannot finish a major cycle before the heap passes
        // the goal however early it starts (it is behind the program), and
        // starting one as soon as it may would run major cycles nearly back
        // to back, each marking the whole heap, where minor cycles free the
        // young garbage for less. Then the old generation alone decides.
        lead < goal.saturating_sub(base) && considered.saturating_add(lead) >= goal
    }

    /// A minor cycle, if the young threshold (set, or derived from the
    /// heap by [`GcConfig::young_share`](crate::GcConfig::young_share)) is
    /// reached.
    fn young_due(&self, array: &ObjectArray) -> Option<(Trigger, CycleKind)> {
        let considered = array.len().saturating_sub(array.pool_end() as usize);
        let c = &self.config;
        let derived = || {
            let share = c.young_share.filter(|s| s.is_finite() && *s > 0.0)?;
            Some(((self.survivors as f64 * share) as usize).max(c.growth_floor))
        };
        // At least one object created since the last cycle: a threshold of
        // 0 (a zero floor on an emptied heap, or set) started a minor cycle
        // every tick with nothing young to look at.
        let t = c
            .young_threshold
            .or_else(derived)
            .filter(|_| c.generational)?
            .max(1);
        // Before any major cycle nothing is old, and a minor one would mark
        // the whole heap anyway (with a minor's policy): the first is major.
        let kind = if self.totals.major_collections == 0 {
            CycleKind::Major
        } else {
            CycleKind::Minor
        };
        (considered >= self.survivors.saturating_add(t)).then_some((Trigger::Young, kind))
    }

    /// Paces a timed slice ([`GcConfig::incremental_stretch`]). The objects
    /// created since the previous slice owe the cycle their share of its
    /// time, so that it ends by the time creation reaches [`PACE_TARGET`]
    /// of the debt limit (the rest is slack for the estimate's error): the cycle's time is estimated from the last completed cycle's
    /// time per object alive at its start ([`estimate`](Self::estimate)).
    /// What a slice cannot pay within `incremental_stretch` times its budget
    /// is carried to the next. A cycle found behind schedule (a larger share
    /// of the allowance created than of the cycle done, see
    /// [`progress`](Self::progress)) gets the whole stretch.
    pub(super) fn pace(&self, cycle: &mut Cycle, budget: &mut Budget, t0: Instant) {
        let born = cycle.born.len();
        let new = born - cycle.born_paced.min(born);
        cycle.born_paced = born;
        self.grade(cycle, budget, t0);
        // The estimate is a major cycle's; a minor one is paced by its budget.
        if cycle.kind == CycleKind::Minor {
            return;
        }
        let (Some(limit), Some(slice)) = (self.config.incremental_debt, self.config.incremental)
        else {
            return;
        };
        let stretch = self.config.incremental_stretch;
        if cycle.forced || stretch <= 1.0 || budget.deadline().is_none() {
            return;
        }
        let live = cycle.live_at_start.max(1) as f64;
        let Some(cycle_secs) = self.estimate(cycle, live) else {
            return;
        };
        // The whole cycle's time, spread over the objects the debt allows
        // before the pacing target.
        // Every step saturates: settings set through `gc_config_mut` are not
        // validated, and no value may make a tick panic mid-cycle.
        let allowance = PACE_TARGET * limit.max(f64::MIN_POSITIVE) * live;
        let share = cycle_secs / allowance;
        let secs = |s: f64| Duration::try_from_secs_f64(s).unwrap_or(Duration::MAX);
        cycle.owed = cycle.owed.saturating_add(secs(new as f64 * share));
        let cap = secs(slice.as_secs_f64() * stretch);
        // Behind schedule (more of the allowance used than of the cycle
        // done): the whole stretch, whatever the estimate says is owed.
        let used = born as f64 / allowance;
        if used > self.progress(cycle, live) {
            budget.extend(t0.checked_add(cap));
        } else if cycle.owed > slice {
            budget.extend(t0.checked_add(cycle.owed.min(cap)));
        }
    }

    /// The graduated response to debt, for every timed slice of a minor or
    /// major cycle, whatever [`GcConfig::incremental_stretch`]: once the
    /// objects created during the cycle pass [`GRADE_FROM`] of the debt
    /// limit ([`GcConfig::incremental_debt`] times the objects alive at its
    /// start), a slice may run longer, in proportion, up to
    /// [`GRADE_STRETCH`] times its budget when the limit is reached. So a
    /// cycle that falls behind gets more time a little at a time rather
    /// than being finished at once when the limit passes.
    fn grade(&self, cycle: &Cycle, budget: &mut Budget, t0: Instant) {
        let (Some(limit), Some(slice)) = (self.config.incremental_debt, self.config.incremental)
        else {
            return;
        };
        if cycle.forced || budget.deadline().is_none() {
            return;
        }
        if let Some(d) = graded(slice, limit, cycle.live_at_start, cycle.born.len()) {
            budget.extend(t0.checked_add(d));
        }
    }

    /// How far along the cycle is, roughly, in `0..=1`: marking counted as
    /// the first half (by the objects marked against those alive at the
    /// start), the sweep and the free steps as a quarter each (by their
    /// position in the table).
    fn progress(&self, cycle: &Cycle, live: f64) -> f64 {
        let span = cycle.hw.saturating_sub(cycle.pool_end).max(1) as f64;
        let at = |i: u32| i.saturating_sub(cycle.pool_end) as f64 / span;
        match cycle.step {
            Step::Pool(_) | Step::Remembered(_) => 0.0,
            Step::Mark => 0.5 * (cycle.stats.marked as f64 / live).min(1.0),
            Step::Sweep(i) => 0.5 + 0.25 * at(i),
            Step::Poll(_) | Step::Finish(_) => 0.75,
            Step::Free(i) => 0.75 + 0.25 * at(i),
            Step::Settle(_) => 1.0,
        }
    }

    /// A cycle's whole collector time, in seconds: from the last completed
    /// cycle's time per live object; in a heap's first cycle, from this one's
    /// marking so far (marking taken as half the cycle, and as far along as
    /// the objects marked are a share of those alive at the start, which
    /// errs long when much of the heap is garbage). `None` before any marking.
    fn estimate(&self, cycle: &Cycle, live: f64) -> Option<f64> {
        if let Some(per_live) = self.secs_per_live {
            return Some(per_live * live);
        }
        let mark = cycle.stats.mark.as_secs_f64();
        if self.marking {
            let marked = cycle.stats.marked as f64;
            (marked > 0.0).then(|| 2.0 * mark * live / marked)
        } else {
            Some(2.0 * mark)
        }
    }
}

/// What the last major cycle run in slices measured, from which the growth
/// trigger estimates the next one's lead: the objects the program will
/// create while it runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct MajorPace {
    /// Objects created per second of the collector's time in the cycle.
    born_per_sec: f64,
    /// Marking's time per object marked, in seconds.
    mark_secs: f64,
    /// The purge's time (sweep, destruction, freeing) per object freed, in
    /// seconds (marking's, when the cycle freed nothing).
    free_secs: f64,
}

impl MajorPace {
    /// From a completed major cycle's stats; `None` when it ran whole (no
    /// object could be created while it ran) or measured nothing.
    pub(super) fn from_stats(s: &super::CollectStats) -> Option<MajorPace> {
        let total = s.total.as_secs_f64();
        (s.slices > 1 && total > 0.0).then(|| MajorPace {
            born_per_sec: s.born as f64 / total,
            mark_secs: s.mark.as_secs_f64() / s.marked.max(1) as f64,
            // A cycle that freed nothing measured no freeing: taken to cost
            // what marking an object does.
            free_secs: match s.freed {
                0 => s.mark.as_secs_f64() / s.marked.max(1) as f64,
                n => (s.sweep + s.destroy).as_secs_f64() / n as f64,
            },
        })
    }

    /// The objects the program is expected to create while a major cycle
    /// marks `live` objects and frees `garbage`, with a quarter more for the
    /// estimate's error (the cycle aims to end at [`PACE_TARGET`] of its
    /// lead): the last cycle's creation rate times the time its costs per
    /// object give this one. Marking and freeing are costed apart because
    /// freeing an object costs several times marking one, so a cycle's
    /// length follows the garbage it finds, not only the heap it marks.
    pub(super) fn lead(&self, live: usize, garbage: usize) -> usize {
        let secs = self.mark_secs * live as f64 + self.free_secs * garbage as f64;
        let lead = self.born_per_sec * secs / PACE_TARGET;
        if lead.is_finite() && lead > 0.0 {
            lead.min(usize::MAX as f64) as usize
        } else {
            0
        }
    }
}

/// How long a timed slice of `slice` may run when `born` objects were
/// created during a cycle that began with `live` alive, under the debt
/// limit `limit` (see `Collector::grade`): `None` below [`GRADE_FROM`] of
/// the limit, then growing in proportion up to [`GRADE_STRETCH`] times
/// `slice` at the limit.
fn graded(slice: Duration, limit: f64, live: usize, born: usize) -> Option<Duration> {
    if limit.is_nan() || limit <= 0.0 {
        return None;
    }
    let r = born as f64 / (limit * live.max(1) as f64);
    if r <= GRADE_FROM {
        return None;
    }
    let f = ((r - GRADE_FROM) / (1.0 - GRADE_FROM)).min(1.0);
    Duration::try_from_secs_f64(slice.as_secs_f64() * (1.0 + (GRADE_STRETCH - 1.0) * f)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The graduated response: nothing up to half the debt limit, then a
    /// slice grows in proportion, to 1.5 times its budget at the limit and
    /// no further; a limit that is not a positive number grows nothing.
    #[test]
    fn slices_grow_gradually_with_the_debt() {
        let ms = Duration::from_millis;
        let at = |born| graded(ms(2), 1.0, 1_000, born);
        assert_eq!(at(0), None);
        assert_eq!(at(500), None);
        assert_eq!(at(750), Some(ms(2).mul_f64(1.25)));
        assert_eq!(at(1_000), Some(ms(3)));
        assert_eq!(at(5_000), Some(ms(3)));
        assert_eq!(graded(ms(2), 2.0, 1_000, 1_500), Some(ms(2).mul_f64(1.25)));
        assert_eq!(graded(ms(2), f64::NAN, 1_000, 5_000), None);
        assert_eq!(graded(ms(2), 0.0, 1_000, 5_000), None);
    }

    /// The lead of a paced major cycle: the objects the last one let the
    /// program create per second of its time, times this one's time from
    /// the last one's costs per object marked and per object freed, and a
    /// quarter more for the estimate's error; nothing from a cycle run
    /// whole.
    #[test]
    fn a_major_cycles_lead_follows_its_marking_and_its_freeing() {
        let s = crate::CollectStats {
            slices: 40,
            total: Duration::from_secs(4),
            mark: Duration::from_secs(1),
            sweep: Duration::from_secs(1),
            destroy: Duration::from_secs(2),
            marked: 1_000,
            freed: 1_000,
            born: 4_000,
            ..crate::CollectStats::default()
        };
        let p = MajorPace::from_stats(&s).unwrap();
        // 1,000 objects created a second; marking 1 ms an object, freeing 3.
        let near = |a: usize, b: usize| a.abs_diff(b) <= 1;
        assert!(
            near(p.lead(1_000, 1_000), 5_000),
            "{}",
            p.lead(1_000, 1_000)
        );
        assert!(near(p.lead(1_000, 0), 1_250), "{}", p.lead(1_000, 0));
        assert!(
            near(p.lead(2_000, 3_000), 13_750),
            "{}",
            p.lead(2_000, 3_000)
        );
        assert_eq!(
            MajorPace::from_stats(&crate::CollectStats {
                slices: 1,
                ..s.clone()
            }),
            None
        );
        // Nothing freed: freeing taken to cost what marking does.
        let none_freed = MajorPace::from_stats(&crate::CollectStats { freed: 0, ..s }).unwrap();
        assert!(
            near(none_freed.lead(1_000, 1_000), 2_500),
            "{}",
            none_freed.lead(1_000, 1_000)
        );
    }
}

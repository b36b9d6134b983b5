//! How much one slice may do: a deadline, a count of work units, or both.
//!
//! A unit is one object marked, scanned, swept, polled, finished or freed
//! (a bitmap word without objects counts as one too). The clock is read
//! every [`CLOCK_EVERY`] units, which bounds how far a slice can overrun its
//! deadline by the cost of that many units (a few microseconds).

use std::time::Instant;

/// Units between two readings of the clock.
pub(crate) const CLOCK_EVERY: usize = 128;

/// The allowance of one slice.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Budget {
    deadline: Option<Instant>,
    work: usize,
    until_clock: usize,
    /// Units taken so far, whatever the limits (what a tick reports as its
    /// work).
    used: usize,
    /// The work units left when the deadline spent the budget: a later
    /// [`extend`](Self::extend) gives them back.
    timed_out: Option<usize>,
}

impl Budget {
    /// No limit: a stop-the-world collection.
    pub(crate) fn unlimited() -> Budget {
        Budget::new(None, usize::MAX)
    }

    pub(crate) fn new(deadline: Option<Instant>, work: usize) -> Budget {
        Budget {
            deadline,
            work: work.max(1),
            until_clock: CLOCK_EVERY,
            used: 0,
            timed_out: None,
        }
    }

    /// Moves the deadline later, to `to` (a paced slice; see
    /// [`GcConfig::incremental_stretch`](crate::GcConfig::incremental_stretch)).
    /// A budget the old deadline had spent gets its work units back (if
    /// `to` has passed too, the next reading of the clock spends it again).
    /// No effect without a deadline.
    pub(crate) fn extend(&mut self, to: Option<Instant>) {
        if let Some(d) = self.deadline {
            // `None`: a deadline past the clock's range, so none at all.
            self.deadline = to.map(|to| d.max(to));
            if let Some(work) = self.timed_out.take() {
                self.work = work;
            }
        }
    }

    /// Whether this is a stop-the-world allowance (no deadline, no work limit).
    pub(crate) fn is_unlimited(&self) -> bool {
        self.work == usize::MAX && self.deadline.is_none()
    }

    /// Takes `n` units. Returns `true` once the budget is spent.
    #[inline(always)]
    pub(crate) fn spend(&mut self, n: usize) -> bool {
        self.used = self.used.saturating_add(n);
        if self.work == usize::MAX && self.deadline.is_none() {
            return false;
        }
        self.work = self.work.saturating_sub(n);
        if self.work == 0 {
            return true;
        }
        if n >= self.until_clock {
            self.until_clock = CLOCK_EVERY;
            if self.deadline.is_some_and(|d| Instant::now() >= d) {
                self.timed_out = Some(self.work);
                self.work = 0;
                return true;
            }
        } else {
            self.until_clock -= n;
        }
        false
    }

    /// Takes one unit of work that ran user code (a destruction hook, a
    /// delete listener, a `Drop`): the clock is read every
    /// [`CLOCK_EVERY`]` / 16` of those, since each may cost microseconds.
    #[inline(always)]
    pub(crate) fn spend_costly(&mut self) -> bool {
        if self.deadline.is_some() {
            self.until_clock = self.until_clock.saturating_sub(15).max(1);
        }
        self.spend(1)
    }

    /// Work units left (`usize::MAX` when unlimited in work).
    #[inline(always)]
    pub(crate) fn work_left(&self) -> usize {
        self.work
    }

    /// The deadline, if the budget has one.
    #[inline(always)]
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Units taken so far (by [`spend`](Self::spend) and
    /// [`note`](Self::note)), whether or not the budget limits them.
    #[inline(always)]
    pub(crate) fn used(&self) -> usize {
        self.used
    }

    /// Counts `n` units done elsewhere (a parallel drain's workers) without
    /// charging them to the allowance.
    #[inline(always)]
    pub(crate) fn note(&mut self, n: usize) {
        self.used = self.used.saturating_add(n);
    }

    /// Spends the whole budget: a parallel drain found it spent.
    #[inline(always)]
    pub(crate) fn exhaust(&mut self) {
        self.work = 0;
    }

    /// Whether the budget is spent.
    #[inline(always)]
    pub(crate) fn is_spent(&self) -> bool {
        self.work == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A deadline that spent the budget, then moved later: the work comes
    /// back (the drain after a finishing slice's owed re-scans relies on it).
    #[test]
    fn extending_a_spent_deadline_gives_the_work_back() {
        let now = Instant::now();
        let mut b = Budget::new(Some(now), usize::MAX);
        assert!(b.spend(CLOCK_EVERY), "the deadline has passed");
        assert!(b.is_spent());
        b.extend(now.checked_add(Duration::from_secs(3600)));
        assert!(!b.is_spent());
        assert!(!b.spend(CLOCK_EVERY));
        // Spent by its work count, not its deadline: extending gives nothing.
        let mut w = Budget::new(now.checked_add(Duration::from_secs(3600)), 2);
        assert!(w.spend(2));
        w.extend(now.checked_add(Duration::from_secs(7200)));
        assert!(w.is_spent());
    }
}

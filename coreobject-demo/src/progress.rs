//! Progress reporting: an `indicatif` bar on a terminal, a plain line every
//! tenth of the run otherwise (CI logs, pipes).

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::report::thousands;
use crate::stats::FrameRecord;
use crate::world::GcMode;

/// The collector's figures so far, for the progress line.
#[derive(Clone, Debug)]
pub struct GcSoFar {
    /// How the collector runs.
    pub mode: GcMode,
    /// The per-frame budget, in microseconds.
    pub budget_us: f64,
    /// Cycles completed.
    pub cycles: usize,
    /// Of those, minor cycles.
    pub minors: usize,
    /// Frames in which the collector did something.
    pub frames_with_gc: usize,
    /// Of those, frames over the budget by more than 10% (real overruns).
    pub over_budget: usize,
    /// Of those, frames over twice the budget.
    pub over_double: usize,
    /// The longest collector time in a frame, in microseconds.
    pub max_us: f64,
    /// The collector's phase after the last tick.
    pub phase: &'static str,
}

impl Default for GcSoFar {
    fn default() -> GcSoFar {
        GcSoFar {
            mode: GcMode::Generational,
            budget_us: 0.0,
            cycles: 0,
            minors: 0,
            frames_with_gc: 0,
            over_budget: 0,
            over_double: 0,
            max_us: 0.0,
            phase: "idle",
        }
    }
}

impl GcSoFar {
    /// Counts one frame.
    pub fn add(&mut self, f: &FrameRecord) {
        self.cycles += usize::from(f.pause_us.is_some());
        self.minors += usize::from(f.pause_us.is_some() && f.gc_kind == Some("minor"));
        self.phase = f.gc_phase;
        if f.gc_worked {
            self.frames_with_gc += 1;
            self.over_budget += usize::from(f.gc_us > 1.1 * self.budget_us);
            self.over_double += usize::from(f.gc_us > 2.0 * self.budget_us);
            self.max_us = self.max_us.max(f.gc_us);
        }
    }

    /// One line's worth.
    fn describe(&self) -> String {
        let ms = |us: f64| format!("{:.2} ms", us / 1000.0);
        let phase = if self.mode.sliced() {
            format!(", gc {}", self.phase)
        } else {
            String::new()
        };
        let minors = if self.mode == GcMode::Generational {
            format!(" ({} minor)", self.minors)
        } else {
            String::new()
        };
        format!(
            "{} cycles{minors}{phase}; gc/frame max {}, {} of {} over {} by more than 10% ({} over twice)",
            self.cycles,
            ms(self.max_us),
            self.over_budget,
            self.frames_with_gc,
            ms(self.budget_us),
            self.over_double
        )
    }
}

/// Reports frames as they complete.
pub struct Progress {
    bar: ProgressBar,
    /// Print plain lines instead of drawing the bar.
    plain: bool,
    total: u64,
}

impl Progress {
    /// A progress report over `total` frames, drawn on stderr.
    pub fn new(total: u64) -> Progress {
        let plain = !std::io::stderr().is_terminal();
        let bar = if plain {
            ProgressBar::hidden()
        } else {
            let bar = ProgressBar::new(total);
            let style = ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} frames  {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            bar.enable_steady_tick(Duration::from_millis(100));
            bar
        };
        Progress { bar, plain, total }
    }

    /// A report that prints nothing (for tests).
    #[cfg(test)]
    pub fn hidden() -> Progress {
        Progress {
            bar: ProgressBar::hidden(),
            plain: false,
            total: 0,
        }
    }

    /// Reports one finished frame.
    pub fn frame(&self, f: &FrameRecord, gc: &GcSoFar) {
        let done = u64::from(f.frame) + 1;
        let msg = format!("{} objects, {}", thousands(f.live as u64), gc.describe());
        if self.plain {
            let step = (self.total / 10).max(1);
            if done % step == 0 || done == self.total {
                eprintln!("frame {done}/{}: {msg}", self.total);
            }
        } else {
            self.bar.set_position(done);
            if done % 5 == 0 || done == self.total {
                self.bar.set_message(msg);
            }
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

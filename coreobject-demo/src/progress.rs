//! Progress reporting: an `indicatif` bar on a terminal, a plain line every
//! tenth of the run otherwise (CI logs, pipes).

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::report::thousands;
use crate::stats::FrameRecord;

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
    pub fn frame(&self, f: &FrameRecord, collections: u64) {
        let done = u64::from(f.frame) + 1;
        let msg = format!(
            "{} objects, {collections} collections",
            thousands(f.live as u64)
        );
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

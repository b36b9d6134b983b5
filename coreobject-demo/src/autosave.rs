//! Autosaving into redb while the world runs (`--autosave SECONDS`), and
//! resuming from the last autosave (`--resume`).
//!
//! Every `SECONDS`, after a frame, a capture of what changed since the
//! previous autosave (the first one: the whole world) begins on the game
//! thread, and runs one step a frame within the capture budget
//! (`--capture-budget-ms`, [`Heap::capture_step`]) until its final step
//! returns the change set: the world as of that frame. A worker thread then
//! commits it to `<out>/autosave.redb`, one durable transaction per save,
//! while the next frames run. At most one save is in flight: a save falls
//! due while the previous one is still being captured or written waits.
//! Each capture step is drawn on the collector's chart (`pauses.svg`),
//! stacked on the frame's GC slice, and each save's capture time beside the
//! collector's time per frame in `<out>/autosave.svg`; every save is listed
//! in `<out>/autosave.json`, and the summary compares the frames that ran a
//! capture step with the GC budget plus the capture budget.
//!
//! `--resume` loads the last autosave into a fresh heap, reports what it
//! holds and how long the load took, and collects it.

use std::collections::BTreeMap;
use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use coreobject::save::{Capture, CaptureBudget, ChangeSet, RedbStore, SaveStore, StoreMeta};
use coreobject::{Heap, HeapConfig};
use plotters::prelude::*;

use crate::stats::FrameRecord;

/// One autosave.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SaveRecord {
    /// The frame after which its final capture step ran.
    pub frame: u32,
    /// The frame after which its capture began.
    pub began: u32,
    /// Capture steps on the game thread.
    pub steps: usize,
    /// Capture on the game thread (all its steps), in milliseconds.
    pub capture_ms: f64,
    /// Its longest step, in milliseconds.
    pub longest_step_ms: f64,
    /// Commit on the worker thread, in milliseconds.
    pub commit_ms: f64,
    /// Records written (created or changed objects).
    pub written: usize,
    /// Records deleted (freed objects).
    pub deleted: usize,
    /// Objects in the save.
    pub objects: usize,
    /// Objects the heap held in that frame (`Heap::len`: class defaults
    /// and garbage not yet collected included).
    pub heap_len: usize,
}

/// The autosaver: the period, the worker, the saves so far.
pub struct Autosave {
    every: Duration,
    last: Instant,
    path: PathBuf,
    meta: Option<StoreMeta>,
    tx: Option<Sender<ChangeSet>>,
    busy: Arc<AtomicBool>,
    worker: Option<JoinHandle<Result<Vec<f64>, String>>>,
    saves: Vec<SaveRecord>,
    /// Each capture step's budget.
    budget: Duration,
    /// The capture in flight: it, the frame it began after, its time so
    /// far, its longest step.
    cap: Option<(Capture, u32, Duration, Duration)>,
    /// Each capture step: the frame, its time in milliseconds.
    steps: Vec<(u32, f64)>,
}

impl Autosave {
    /// Starts a new autosave store at `<out>/autosave.redb` (replacing an
    /// older one), saving every `seconds`, capturing `budget` a frame.
    pub fn start(out: &Path, seconds: f64, budget: Duration) -> Result<Autosave, Box<dyn Error>> {
        let path = out.join("autosave.redb");
        let _ = std::fs::remove_file(&path);
        let mut store = RedbStore::open(&path)?;
        let meta = store.meta()?;
        let (tx, rx) = channel::<ChangeSet>();
        let busy = Arc::new(AtomicBool::new(false));
        let flag = busy.clone();
        let worker = std::thread::spawn(move || -> Result<Vec<f64>, String> {
            let mut times = Vec::new();
            for change in rx {
                let t = Instant::now();
                store.commit(&change).map_err(|e| e.to_string())?;
                times.push(t.elapsed().as_secs_f64() * 1e3);
                flag.store(false, Ordering::Release);
            }
            Ok(times)
        });
        Ok(Autosave {
            every: Duration::from_secs_f64(seconds),
            last: Instant::now(),
            path,
            meta,
            tx: Some(tx),
            busy,
            worker: Some(worker),
            saves: Vec::new(),
            budget,
            cap: None,
            steps: Vec::new(),
        })
    }

    /// After frame `frame`: runs a step of the capture in flight, or
    /// begins one if a save is due and none is in flight; hands the change
    /// set to the worker when the final step returns it. Returns the step's
    /// time.
    pub fn after_frame(
        &mut self,
        heap: &mut Heap,
        frame: u32,
    ) -> Result<Option<Duration>, Box<dyn Error>> {
        if self.cap.is_none() {
            if self.last.elapsed() < self.every || self.busy.load(Ordering::Acquire) {
                return Ok(None);
            }
            let t = Instant::now();
            let cap = heap.capture_begin(self.meta.as_ref());
            let begin = t.elapsed();
            self.cap = Some((cap, frame, begin, begin));
        }
        let (cap, began, total, longest) = self.cap.as_mut().expect("in flight");
        let t = Instant::now();
        let done = heap.capture_step(cap, CaptureBudget::Time(self.budget))?;
        let step = t.elapsed();
        *total += step;
        *longest = (*longest).max(step);
        self.steps.push((frame, step.as_secs_f64() * 1e3));
        let Some((change, saved)) = done else {
            return Ok(Some(step));
        };
        let (cap, began, total, longest) = (cap.steps(), *began, *total, *longest);
        self.cap = None;
        self.meta = Some(change.meta.clone());
        self.busy.store(true, Ordering::Release);
        if let Some(tx) = &self.tx {
            tx.send(change).map_err(|_| "the autosave worker stopped")?;
        }
        self.last = Instant::now();
        self.saves.push(SaveRecord {
            frame,
            began,
            steps: cap,
            capture_ms: total.as_secs_f64() * 1e3,
            longest_step_ms: longest.as_secs_f64() * 1e3,
            commit_ms: 0.0,
            written: saved.written,
            deleted: saved.deleted,
            objects: saved.objects,
            heap_len: heap.len(),
        });
        Ok(Some(step))
    }

    /// Each capture step so far: the frame it ran after, its milliseconds.
    pub fn steps(&self) -> &[(u32, f64)] {
        &self.steps
    }

    /// Waits for the last commit, writes `autosave.json` and `autosave.svg`
    /// and prints a summary.
    pub fn finish(
        mut self,
        out: &Path,
        frames: &[FrameRecord],
        budget_ms: f64,
    ) -> Result<(), Box<dyn Error>> {
        drop(self.tx.take());
        let commits = self
            .worker
            .take()
            .expect("started")
            .join()
            .map_err(|_| "the autosave worker panicked")??;
        for (s, c) in self.saves.iter_mut().zip(commits) {
            s.commit_ms = c;
        }
        let json = out.join("autosave.json");
        std::fs::write(&json, serde_json::to_string_pretty(&self.saves)?)?;
        let svg = out.join("autosave.svg");
        chart(&svg, frames, &self.saves, budget_ms)?;
        let max = |f: fn(&SaveRecord) -> f64| self.saves.iter().map(f).fold(0.0, f64::max);
        let gc_at = |frame: u32| {
            frames
                .iter()
                .find(|f| f.frame == frame)
                .map_or(0.0, |f| f.gc_us / 1e3)
        };
        // The frames that ran a capture step, against both budgets.
        let capture_budget_ms = self.budget.as_secs_f64() * 1e3;
        let allowed = budget_ms + capture_budget_ms;
        let during: Vec<f64> = self
            .steps
            .iter()
            .map(|&(frame, ms)| ms + gc_at(frame))
            .collect();
        let worst = during.iter().copied().fold(0.0, f64::max);
        let over = during.iter().filter(|&&ms| ms > allowed).count();
        let gc_over = self
            .steps
            .iter()
            .filter(|&&(frame, _)| gc_at(frame) > budget_ms)
            .count();
        let step_over = self
            .steps
            .iter()
            .filter(|&&(_, ms)| ms > capture_budget_ms)
            .count();
        println!(
            "\nautosave: {} saves into {} | capture max {:.2} ms in {} steps at most, longest step {:.2} ms, commit (worker) max {:.1} ms | written max {} records",
            self.saves.len(),
            self.path.display(),
            max(|s| s.capture_ms),
            self.saves.iter().map(|s| s.steps).max().unwrap_or(0),
            max(|s| s.longest_step_ms),
            max(|s| s.commit_ms),
            self.saves.iter().map(|s| s.written).max().unwrap_or(0),
        );
        println!(
            "autosave frames (a capture step ran): {} | GC + capture step: worst {:.2} ms against GC budget + capture budget {:.2} + {:.2} = {:.2} ms | {} frame{} over (in {} the GC alone was over its budget, in {} the capture step over its own)",
            during.len(),
            worst,
            budget_ms,
            capture_budget_ms,
            allowed,
            over,
            if over == 1 { "" } else { "s" },
            gc_over,
            step_over
        );
        println!("wrote {} and {}", json.display(), svg.display());
        Ok(())
    }
}

/// The collector's time per frame and each autosave's capture time.
fn chart(
    path: &Path,
    frames: &[FrameRecord],
    saves: &[SaveRecord],
    budget_ms: f64,
) -> Result<(), Box<dyn Error>> {
    let root = SVGBackend::new(path, (1400, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let x_end = frames.last().map_or(1.0, |f| f64::from(f.frame) + 1.0);
    let y_max = frames
        .iter()
        .map(|f| f.gc_us / 1e3)
        .chain(saves.iter().map(|s| s.capture_ms))
        .fold(budget_ms, f64::max)
        * 1.2;
    let mut c = ChartBuilder::on(&root)
        .margin(14)
        .caption(
            "collector time per frame and autosave capture time (game thread)",
            ("sans-serif", 18),
        )
        .x_label_area_size(38)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_end, 0.0..y_max)?;
    c.configure_mesh().x_desc("frame").y_desc("ms").draw()?;
    c.draw_series(LineSeries::new(
        frames.iter().map(|f| (f64::from(f.frame), f.gc_us / 1e3)),
        BLUE.stroke_width(1),
    ))?
    .label("collector (GC slices) per frame")
    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLUE));
    c.draw_series(LineSeries::new(
        [(0.0, budget_ms), (x_end, budget_ms)],
        BLACK.mix(0.5).stroke_width(1),
    ))?
    .label("GC budget")
    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK.mix(0.5)));
    c.draw_series(saves.iter().map(|s| {
        let x = f64::from(s.frame);
        Rectangle::new([(x - 0.4, 0.0), (x + 0.4, s.capture_ms)], RED.filled())
    }))?
    .label("autosave capture")
    .legend(|(x, y)| Rectangle::new([(x, y - 4), (x + 12, y + 4)], RED.filled()));
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// `--resume`: loads the last autosave in `<out>/autosave.redb`.
pub fn resume(out: &Path) -> Result<bool, Box<dyn Error>> {
    crate::saving::register_classes()?;
    let path = out.join("autosave.redb");
    if !path.exists() {
        return Err(format!(
            "{}: no autosave (run with --autosave first)",
            path.display()
        )
        .into());
    }
    let mut store = RedbStore::open(&path)?;
    let meta = store.meta()?.ok_or("the autosave store holds no save")?;
    let records = store.read_all()?.len();
    let mut heap = Heap::with_config(HeapConfig {
        max_objects: (records as u32)
            .saturating_mul(2)
            .max(HeapConfig::DEFAULT.max_objects),
        ..HeapConfig::DEFAULT
    })?;
    let t = Instant::now();
    let loaded = heap.load_store(&mut store, None)?;
    let load = t.elapsed();
    let mut by_class: BTreeMap<&str, usize> = BTreeMap::new();
    for o in heap.iter() {
        *by_class.entry(o.class().name()).or_default() += 1;
    }
    println!(
        "resumed {} objects from save {} of {} in {:.1} ms",
        loaded.objects.len(),
        meta.saves,
        path.display(),
        load.as_secs_f64() * 1e3
    );
    for (class, n) in &by_class {
        println!("  {class:<16} {n}");
    }
    let stats = heap.collect()?;
    println!("collected: {} objects left", heap.len());
    let _ = stats;
    Ok(loaded.objects.len() == records)
}

//! The Chrome trace-event file (`--trace PATH`), in the JSON object format
//! `{"traceEvents": [...]}` that Perfetto and chrome://tracing open.
//!
//! One process with two tracks, both on the demo's single thread:
//!
//! - tid 1, "game": building the world, each frame's game logic, and the
//!   end-of-run checks, as complete events (`"ph": "X"`);
//! - tid 2, "collector": each tick in which the collector did something
//!   (`Tick::did_work`), named by what the slice did and carrying its phase
//!   (`Tick::phase`, the phase the tick left the collector in) in `args`,
//!   then the end of the run's collecting.
//!
//! Counters (`"ph": "C"`): the live-object count once per frame (after the
//! tick) and once after the final collection, and the process's resident
//! set size. Times are microseconds since the run started; the events on
//! one track never overlap.
//!
//! Why not `tracing-chrome` over the library's spans (`gc.slice`,
//! `gc.mark`, ..., see `coreobject::gc`, and its `examples/gc_timeline.rs`):
//! it writes only begin/end and instant events on the emitting thread's
//! track, so the live-object and RSS counters would be lost, the collector
//! would share the game's track (both run on one thread), and the slices'
//! per-cycle arguments (trigger, slices, cycle time, over budget), which
//! come from `Tick` and the report, would need the same code as here. The
//! writer below is kept; the library's spans serve programs that install a
//! subscriber of their own.

use std::io::Write as _;
use std::path::Path;

use serde::Serialize;
use serde_json::{json, Value};

use crate::report::RunReport;
use crate::stats::FrameRecord;
use crate::world::{GcMode, Span};
use crate::Timeline;

const PID: u32 = 1;
/// The game's track.
pub const GAME: u32 = 1;
/// The collector's track.
pub const COLLECTOR: u32 = 2;

/// One trace event.
#[derive(Debug, Serialize)]
struct Event {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    cat: Option<&'static str>,
    ph: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ts: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    pid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    tid: Option<u32>,
    #[serde(skip_serializing_if = "Value::is_null")]
    args: Value,
}

/// Microseconds rounded to whole nanoseconds.
fn ns(us: f64) -> f64 {
    (us * 1000.0).round() / 1000.0
}

impl Event {
    /// A complete event on track `tid`. Its start and end are rounded to
    /// whole nanoseconds (rounding is monotone, so spans that did not
    /// overlap still do not).
    fn complete(name: String, cat: &'static str, tid: u32, span: Span, args: Value) -> Event {
        let start = ns(span.start_us);
        let end = ns(span.start_us + span.dur_us.max(0.0));
        Event {
            name,
            cat: Some(cat),
            ph: "X",
            ts: Some(start),
            dur: Some(ns(end - start)),
            pid: PID,
            tid: Some(tid),
            args,
        }
    }

    /// A counter sample.
    fn counter(name: &str, ts: f64, args: Value) -> Event {
        Event {
            name: name.to_string(),
            cat: None,
            ph: "C",
            ts: Some(ns(ts)),
            dur: None,
            pid: PID,
            tid: None,
            args,
        }
    }

    /// A metadata event naming the process (`tid: None`) or a track.
    fn metadata(what: &'static str, tid: Option<u32>, name: &str) -> Event {
        Event {
            name: what.to_string(),
            cat: None,
            ph: "M",
            ts: None,
            dur: None,
            pid: PID,
            tid,
            args: json!({ "name": name }),
        }
    }
}

/// What a frame's collector slice did, for its name.
fn slice_name(f: &FrameRecord, mode: GcMode) -> String {
    match (mode, f.pause_us.is_some()) {
        (GcMode::Full, true) => format!(
            "GC collection, stop-the-world ({})",
            f.gc_started.unwrap_or("?")
        ),
        (GcMode::Incremental | GcMode::Generational, true) => {
            format!("GC slice: {} cycle complete", f.gc_kind.unwrap_or("?"))
        }
        (_, false) if f.gc_phase == "idle" => "GC: freeing pending objects".to_string(),
        (_, false) => match f.gc_kind {
            Some(kind) => format!("GC slice: {kind} {}", f.gc_phase),
            None => format!("GC slice: {}", f.gc_phase),
        },
    }
}

/// The trace of a run, as a JSON value.
pub fn trace(report: &RunReport, timeline: &Timeline) -> Value {
    let mode = report.settings.gc;
    let budget_us = report.gc_per_frame.budget_us;
    let mut ev = vec![
        Event::metadata("process_name", None, "coreobject-demo"),
        Event::metadata("thread_name", Some(GAME), "game"),
        Event::metadata("thread_name", Some(COLLECTOR), "collector (heap.tick)"),
        Event::complete(
            "build world".to_string(),
            "setup",
            GAME,
            timeline.setup,
            json!({ "objects": report.settings.objects }),
        ),
    ];
    for f in &report.frames {
        ev.push(Event::complete(
            "game logic".to_string(),
            "frame",
            GAME,
            Span {
                start_us: f.start_us,
                dur_us: f.logic_us,
            },
            json!({
                "frame": f.frame,
                "created": f.created,
                "marked_garbage": f.marked_garbage,
                "detached": f.detached,
            }),
        ));
        if f.gc_worked {
            // The collector's own time (Tick::time) from the start of the
            // call: it fits within the call, so slices never overlap.
            let mut args = json!({
                "frame": f.frame,
                "phase": f.gc_phase,
                "work": f.gc_work,
                "freed": f.gc_freed,
                "started": f.gc_started,
                "kind": f.gc_kind,
                "completed": f.pause_us.is_some(),
                "tick_wall_us": f.tick_us,
            });
            if mode.sliced() {
                args["budget_us"] = json!(budget_us);
                args["over_budget"] = json!(f.gc_us > budget_us);
            }
            if let Some(cycle) = report
                .collection_log
                .iter()
                .find(|c| f.pause_us.is_some() && c.frame == f.frame)
            {
                args["cycle"] = json!({
                    "trigger": cycle.trigger,
                    "kind": cycle.kind,
                    "started_frame": cycle.started_frame,
                    "slices": cycle.slices,
                    "cycle_us": cycle.cycle_us,
                    "freed": cycle.freed,
                });
            }
            ev.push(Event::complete(
                slice_name(f, mode),
                "gc",
                COLLECTOR,
                Span {
                    start_us: f.tick_start_us,
                    dur_us: f.gc_us,
                },
                args,
            ));
        }
        let end = f.tick_start_us + f.tick_us;
        ev.push(Event::counter(
            "live objects",
            end,
            json!({ "objects": f.live }),
        ));
        if let Some(rss) = f.rss_bytes {
            ev.push(Event::counter(
                "RSS (MiB)",
                end,
                json!({ "rss": rss as f64 / f64::from(1 << 20) }),
            ));
        }
    }
    let fin = &timeline.final_gc;
    if let Some((span, gc_us)) = fin.drain {
        ev.push(Event::complete(
            "GC: finish the cycle in flight".to_string(),
            "gc",
            COLLECTOR,
            span,
            json!({ "ticks": fin.drain_ticks, "collector_us": gc_us }),
        ));
    }
    let last = fin.records.last();
    ev.push(Event::complete(
        "GC: final collection, stop-the-world".to_string(),
        "gc",
        COLLECTOR,
        fin.collect,
        json!({
            "phase": "idle",
            "freed": last.map(|c| c.freed),
            "live_after": last.map(|c| c.live_after),
        }),
    ));
    if let Some(c) = last {
        ev.push(Event::counter(
            "live objects",
            fin.collect.start_us + fin.collect.dur_us,
            json!({ "objects": c.live_after }),
        ));
    }
    ev.push(Event::complete(
        "checks".to_string(),
        "checks",
        GAME,
        timeline.checks,
        json!({ "passed": report.checks.iter().filter(|c| c.ok).count(), "of": report.checks.len() }),
    ));
    json!({
        "traceEvents": ev,
        "displayTimeUnit": "ms",
        "otherData": {
            "gc": mode,
            "budget_ms": report.settings.budget_ms,
            "objects": report.settings.objects,
            "frames": report.settings.frames,
            "seed": report.settings.seed,
        },
    })
}

/// Writes the trace of a run to `path`, creating its directory if missing.
pub fn write(path: &Path, report: &RunReport, timeline: &Timeline) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
    serde_json::to_writer(&mut file, &trace(report, timeline)).map_err(std::io::Error::other)?;
    file.flush()
}

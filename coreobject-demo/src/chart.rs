//! The SVG chart: above, the collector's time per frame against the budget
//! (generational and incremental modes; minor cycles' slices in their own
//! colours) or its pauses per frame (full mode); below, the live object
//! count, with a marker where each cycle completed (minor and major apart).

use std::error::Error;
use std::path::Path;

use plotters::prelude::*;

use crate::report::RunReport;
use crate::stats::{CollectionRecord, FrameRecord};
use crate::world::GcMode;

const GREY: RGBColor = RGBColor(150, 150, 150);
const INTERVAL: RGBColor = RGBColor(31, 119, 180);
const THRESHOLD: RGBColor = RGBColor(255, 127, 14);
const FINAL: RGBColor = RGBColor(44, 160, 44);
const BUDGET: RGBColor = RGBColor(214, 39, 40);
const MINOR: RGBColor = RGBColor(148, 103, 189);
const MINOR_DONE: RGBColor = RGBColor(227, 119, 194);
const CAPTURE: RGBColor = RGBColor(23, 190, 207);

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// Draws the run's frames and collections into an SVG file at `path`, with
/// the autosave's capture steps (frame, milliseconds) stacked on the
/// collector's bars.
pub fn write_svg(
    path: &Path,
    title: &str,
    report: &RunReport,
    captures: &[(u32, f64)],
) -> Result<(), Box<dyn Error>> {
    let frames = &report.frames;
    let root = SVGBackend::new(path, (1200, 820)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 22))?;
    let (top, bottom) = root.split_vertically(440);

    let x_end = frames.len() as f64 + 1.0;
    // Bars a few pixels wide whatever the frame count.
    let half = (x_end / 400.0).max(0.4);
    match report.settings.gc {
        GcMode::Full => draw_pauses(&top, frames, &report.collection_log, x_end, half)?,
        GcMode::Incremental | GcMode::Generational => draw_slices(
            &top,
            frames,
            report.gc_per_frame.budget_us,
            report.settings.gc == GcMode::Generational,
            x_end,
            half,
            captures,
        )?,
    }
    draw_live(&bottom, frames, &report.collection_log, x_end)?;
    root.present()?;
    Ok(())
}

/// The collector's time in each frame (`Tick::time`), a bar per frame in
/// which it did something, coloured by the phase the tick left it in, and
/// the budget as a horizontal line; in generational mode, minor cycles'
/// slices have colours of their own. Bars taller than twenty budgets (a
/// cycle forced to finish at once can take hundreds of milliseconds) are
/// clipped, so that the budget line stays readable; the caption says how
/// many and the longest.
fn draw_slices(
    top: &Area<'_>,
    frames: &[FrameRecord],
    budget_us: f64,
    generational: bool,
    x_end: f64,
    half: f64,
    captures: &[(u32, f64)],
) -> Result<(), Box<dyn Error>> {
    let budget_ms = budget_us / 1000.0;
    let gc_ms = |frame: u32| {
        frames
            .get(frame as usize)
            .filter(|f| f.frame == frame && f.gc_worked)
            .map_or(0.0, |f| f.gc_us / 1000.0)
    };
    let clip_ms = 20.0 * budget_ms;
    let max_ms = frames
        .iter()
        .filter(|f| f.gc_worked)
        .map(|f| f.gc_us / 1000.0)
        .chain(captures.iter().map(|&(frame, ms)| gc_ms(frame) + ms))
        .fold(budget_ms, f64::max);
    let clipped = frames
        .iter()
        .filter(|f| f.gc_worked && f.gc_us / 1000.0 > clip_ms)
        .count();
    let note = if clipped > 0 {
        format!("; {clipped} bars clipped at {clip_ms:.0} ms, the longest {max_ms:.0} ms")
    } else {
        String::new()
    };
    let top_ms = max_ms.min(clip_ms) * 1.15;
    let mut chart = ChartBuilder::on(top)
        .margin(14)
        .caption(
            format!(
                "collector time per frame (Tick::time; bars) and the {budget_ms:.2} ms budget \
                 (line){note}"
            ),
            ("sans-serif", 16),
        )
        .x_label_area_size(38)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_end, 0.0..top_ms.max(0.01))?;
    chart
        .configure_mesh()
        .x_desc("frame")
        .y_desc("milliseconds")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.2}"))
        .draw()?;
    let kinds: &[(&str, RGBColor)] = if generational {
        &SLICE_KINDS_GENERATIONAL
    } else {
        &SLICE_KINDS
    };
    for &(label, color) in kinds {
        let bars: Vec<_> = frames
            .iter()
            .filter(|f| f.gc_worked && slice_kind(f, generational) == label)
            .map(|f| {
                let x = f64::from(f.frame);
                let bar = (f.gc_us / 1000.0).min(top_ms);
                Rectangle::new([(x - half, 0.0), (x + half, bar)], color.filled())
            })
            .collect();
        if bars.is_empty() {
            continue;
        }
        chart
            .draw_series(bars)?
            .label(label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 18, y + 5)], color.filled()));
    }
    if !captures.is_empty() {
        // Each autosave capture step, on top of the frame's collector time.
        let bars = captures.iter().map(|&(frame, ms)| {
            let x = f64::from(frame);
            let base = gc_ms(frame).min(top_ms);
            let bar = (base + ms).min(top_ms);
            Rectangle::new([(x - half, base), (x + half, bar)], CAPTURE.filled())
        });
        chart
            .draw_series(bars)?
            .label("autosave capture step (on the frame's GC time)")
            .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 18, y + 5)], CAPTURE.filled()));
    }
    chart
        .draw_series(LineSeries::new(
            [(0.0, budget_ms), (x_end, budget_ms)],
            BUDGET.stroke_width(2),
        ))?
        .label(format!("budget ({budget_ms:.2} ms)"))
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BUDGET.stroke_width(2)));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// The legend of the collector bars when only major cycles run.
const SLICE_KINDS: [(&str, RGBColor); 4] = [
    ("slice, cycle marking", INTERVAL),
    ("slice, cycle purging", THRESHOLD),
    ("slice that completed a cycle", FINAL),
    ("idle tick that freed objects", GREY),
];

/// The legend of the collector bars in generational mode.
const SLICE_KINDS_GENERATIONAL: [(&str, RGBColor); 6] = [
    ("major cycle: slice, marking", INTERVAL),
    ("major cycle: slice, purging", THRESHOLD),
    ("major cycle: slice that completed it", FINAL),
    ("minor cycle: slice", MINOR),
    ("minor cycle: slice that completed it", MINOR_DONE),
    ("idle tick that freed objects", GREY),
];

/// Which legend entry a frame's collector bar belongs to.
fn slice_kind(f: &FrameRecord, generational: bool) -> &'static str {
    let done = f.pause_us.is_some();
    if generational && f.gc_kind == Some("minor") {
        return if done {
            "minor cycle: slice that completed it"
        } else {
            "minor cycle: slice"
        };
    }
    let [marking, purging, completed, idle] = if generational {
        [
            SLICE_KINDS_GENERATIONAL[0].0,
            SLICE_KINDS_GENERATIONAL[1].0,
            SLICE_KINDS_GENERATIONAL[2].0,
            SLICE_KINDS_GENERATIONAL[5].0,
        ]
    } else {
        SLICE_KINDS.map(|(label, _)| label)
    };
    if done {
        completed
    } else {
        match f.gc_phase {
            "mark" => marking,
            "purge" => purging,
            _ => idle,
        }
    }
}

/// Stop-the-world pauses, a bar per collection, and the game logic's time.
fn draw_pauses(
    top: &Area<'_>,
    frames: &[FrameRecord],
    collections: &[CollectionRecord],
    x_end: f64,
    half: f64,
) -> Result<(), Box<dyn Error>> {
    let max_ms = collections
        .iter()
        .map(|c| c.cycle_us)
        .chain(frames.iter().map(|f| f.logic_us))
        .fold(0.0, f64::max)
        / 1000.0;
    let mut pauses = ChartBuilder::on(top)
        .margin(14)
        .caption(
            "collector pause per frame (bars) and game logic time per frame (line)",
            ("sans-serif", 16),
        )
        .x_label_area_size(38)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_end, 0.0..(max_ms * 1.15).max(0.1))?;
    pauses
        .configure_mesh()
        .x_desc("frame")
        .y_desc("milliseconds")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.1}"))
        .draw()?;
    pauses
        .draw_series(LineSeries::new(
            frames
                .iter()
                .map(|f| (f64::from(f.frame), f.logic_us / 1000.0)),
            GREY.stroke_width(1),
        ))?
        .label("game logic")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], GREY));
    for (trigger, color) in [
        ("interval", INTERVAL),
        ("object count", THRESHOLD),
        ("final check", FINAL),
    ] {
        let bars: Vec<_> = collections
            .iter()
            .filter(|c| c.trigger == trigger)
            .map(|c| {
                let x = f64::from(c.frame);
                Rectangle::new(
                    [(x - half, 0.0), (x + half, c.cycle_us / 1000.0)],
                    color.filled(),
                )
            })
            .collect();
        if bars.is_empty() {
            continue;
        }
        pauses
            .draw_series(bars)?
            .label(format!("collection ({trigger})"))
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 18, y + 5)], color.filled()));
    }
    pauses
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// The objects allocated before and after each tick, the target, and a
/// marker where each cycle completed (a circle for a minor cycle, a
/// triangle for a major one).
fn draw_live(
    bottom: &Area<'_>,
    frames: &[FrameRecord],
    collections: &[CollectionRecord],
    x_end: f64,
) -> Result<(), Box<dyn Error>> {
    let max_live = frames
        .iter()
        .map(|f| f.live_before_tick.max(f.live))
        .chain(frames.iter().map(|f| f.target))
        .max()
        .unwrap_or(1) as f64;
    let mut live = ChartBuilder::on(bottom)
        .margin(14)
        .caption(
            "objects allocated (before and after each tick) and the target population",
            ("sans-serif", 16),
        )
        .x_label_area_size(38)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_end, 0.0..max_live * 1.1)?;
    live.configure_mesh()
        .x_desc("frame")
        .y_desc("objects")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{:.0}k", y / 1000.0))
        .draw()?;
    live.draw_series(LineSeries::new(
        frames.iter().map(|f| (f64::from(f.frame), f.target as f64)),
        GREY.stroke_width(1),
    ))?
    .label("target population")
    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], GREY));
    // A sawtooth: allocation climbs during a frame, drops at a collection.
    let saw = frames.iter().flat_map(|f| {
        let x = f64::from(f.frame);
        [(x, f.live_before_tick as f64), (x + 0.5, f.live as f64)]
    });
    live.draw_series(LineSeries::new(saw, INTERVAL.stroke_width(2)))?
        .label("objects allocated (heap.len())")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], INTERVAL.stroke_width(2)));
    // Where cycles completed, at the count they left (frames only: the
    // final explicit collection and a cycle finished after the frames are
    // not drawn).
    let done = |kind: &'static str| {
        collections
            .iter()
            .filter(move |c| c.kind == kind && c.trigger != "final check" && !c.after_frames)
            .map(|c| (f64::from(c.frame) + 0.5, c.live_after as f64))
    };
    if done("minor").next().is_some() {
        live.draw_series(done("minor").map(|p| Circle::new(p, 4, MINOR.filled())))?
            .label("minor cycle completed")
            .legend(|(x, y)| Circle::new((x + 9, y), 4, MINOR.filled()));
    }
    if done("major").next().is_some() {
        live.draw_series(done("major").map(|p| TriangleMarker::new(p, 6, FINAL.filled())))?
            .label("major cycle completed")
            .legend(|(x, y)| TriangleMarker::new((x + 9, y), 6, FINAL.filled()));
    }
    live.configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

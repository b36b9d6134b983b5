//! Tables, targets and the JSON line.
//!
//! Every table shows, per peer, the **median** over repetitions with the
//! min–max range, the ratio to `ideal` (`×ideal`) and to the best peer
//! (`×best`). The best peer is the lowest median among the peers other than
//! `ideal`; for coreobject's own row `×best` compares with the best peer
//! *other than coreobject*, so a value below 1 means coreobject wins.

use serde_json::{json, Value};

use crate::harness::{Peer, PeerResult, Status, WorkloadResult};

/// Summary statistics of a sample.
#[derive(Clone, Copy, Debug)]
pub struct Summary {
    /// The median (mean of the middle two for an even count).
    pub median: f64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
}

/// Summarizes a non-empty sample.
pub fn summarize(xs: &[f64]) -> Option<Summary> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Some(Summary {
        median,
        min: v[0],
        max: v[n - 1],
    })
}

fn fmt_num(x: f64) -> String {
    let a = x.abs();
    if a >= 1000.0 {
        format!("{x:.0}")
    } else if a >= 100.0 {
        format!("{x:.1}")
    } else if a >= 10.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

fn fmt_ratio(r: Option<f64>) -> String {
    match r {
        Some(r) if r.is_finite() => format!("{r:.2}x"),
        _ => "-".to_string(),
    }
}

/// The median of a peer's metric `m`, if the peer ran and verified.
pub fn median_of(w: &WorkloadResult, peer: Peer, m: usize) -> Option<f64> {
    w.ok(peer)
        .and_then(|r| summarize(&r.samples[m]))
        .map(|s| s.median)
}

/// The lowest median of metric `m` among peers other than `ideal` and other
/// than `except`.
pub fn best_median(w: &WorkloadResult, m: usize, except: Option<Peer>) -> Option<(Peer, f64)> {
    w.peers
        .iter()
        .filter(|r| r.peer != Peer::Ideal && Some(r.peer) != except)
        .filter_map(|r| median_of(w, r.peer, m).map(|x| (r.peer, x)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
}

fn vs_best(w: &WorkloadResult, r: &PeerResult, m: usize, med: f64) -> Option<f64> {
    if r.peer == Peer::Ideal {
        return None;
    }
    let except = (r.peer == Peer::CoreObject).then_some(Peer::CoreObject);
    best_median(w, m, except).map(|(_, b)| med / b)
}

/// The title line of a workload: name and parameters.
pub fn title(w: &WorkloadResult) -> String {
    let params: Vec<String> = w.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{} ({})", w.name, params.join(", "))
}

/// Prints one table per metric of a workload.
pub fn print_workload(w: &WorkloadResult) {
    println!();
    println!("== {}", title(w));
    for (m, metric) in w.metrics.iter().enumerate() {
        println!();
        println!("  {} [{}], lower is better", metric.title, metric.unit);
        println!(
            "  {:<11} {:>11} {:>23} {:>8} {:>8} {:>5}  check",
            "peer", "median", "min-max", "xideal", "xbest", "reps"
        );
        let ideal = median_of(w, Peer::Ideal, m);
        for r in &w.peers {
            let status = match &r.status {
                Status::Ok => "ok".to_string(),
                Status::Failed(msg) => format!("FAILED: {msg}"),
                Status::Na(why) => format!("n/a: {why}"),
            };
            match (&r.status, summarize(&r.samples[m])) {
                (Status::Na(_), _) | (_, None) => {
                    println!(
                        "  {:<11} {:>11} {:>23} {:>8} {:>8} {:>5}  {}",
                        r.peer.name(),
                        "n/a",
                        "",
                        "",
                        "",
                        r.reps(),
                        status
                    );
                }
                (_, Some(s)) => {
                    let xi = ideal.map(|i| s.median / i);
                    let xb = vs_best(w, r, m, s.median);
                    println!(
                        "  {:<11} {:>11} {:>23} {:>8} {:>8} {:>5}  {}",
                        r.peer.name(),
                        fmt_num(s.median),
                        format!("{} - {}", fmt_num(s.min), fmt_num(s.max)),
                        fmt_ratio(xi),
                        fmt_ratio(xb),
                        r.reps(),
                        status
                    );
                }
            }
        }
    }
    for n in &w.notes {
        println!("  note: {n}");
    }
}

/// The JSON for one workload.
pub fn workload_json(w: &WorkloadResult) -> Value {
    let params: serde_json::Map<String, Value> = w
        .params
        .iter()
        .map(|(k, v)| {
            let val = if let Ok(i) = v.parse::<i64>() {
                json!(i)
            } else {
                v.parse::<f64>()
                    .ok()
                    .and_then(|x| serde_json::Number::from_f64(x).map(Value::Number))
                    .unwrap_or_else(|| Value::String(v.clone()))
            };
            (k.to_string(), val)
        })
        .collect();
    let metrics: Vec<Value> = w
        .metrics
        .iter()
        .enumerate()
        .map(|(m, metric)| {
            let ideal = median_of(w, Peer::Ideal, m);
            let rows: Vec<Value> = w
                .peers
                .iter()
                .map(|r| {
                    let (status, reason) = match &r.status {
                        Status::Ok => ("ok", None),
                        Status::Failed(msg) => ("failed", Some(msg.clone())),
                        Status::Na(why) => ("n/a", Some(why.to_string())),
                    };
                    let s = summarize(&r.samples[m]);
                    json!({
                        "peer": r.peer.name(),
                        "status": status,
                        "reason": reason,
                        "reps": r.reps(),
                        "median": s.map(|s| s.median),
                        "min": s.map(|s| s.min),
                        "max": s.map(|s| s.max),
                        "samples": r.samples[m],
                        "vs_ideal": s.and_then(|s| ideal.map(|i| s.median / i)),
                        "vs_best": s.and_then(|s| vs_best(w, r, m, s.median)),
                    })
                })
                .collect();
            json!({ "metric": metric.key, "title": metric.title, "unit": metric.unit, "rows": rows })
        })
        .collect();
    let extra: Vec<Value> = w
        .peers
        .iter()
        .filter(|r| !r.extra.is_empty())
        .map(|r| {
            let fields: serde_json::Map<String, Value> = r
                .extra
                .iter()
                .map(|(k, vs)| {
                    (
                        k.to_string(),
                        json!({ "median": summarize(vs).map(|s| s.median), "samples": vs }),
                    )
                })
                .collect();
            json!({ "peer": r.peer.name(), "values": fields })
        })
        .collect();
    json!({
        "workload": w.name,
        "params": params,
        "metrics": metrics,
        "extra": extra,
        "wall_seconds": w
            .peers
            .iter()
            .map(|r| (r.peer.name().to_string(), json!(r.wall.as_secs_f64())))
            .collect::<serde_json::Map<String, Value>>(),
        "notes": w.notes,
    })
}

/// One tracked target.
pub struct Target {
    /// What is tracked, e.g. "world 1M collect >= 3x faster than gc-arena".
    pub name: String,
    /// The measured value, as printed.
    pub measured: Option<f64>,
    /// The limit the measured value must not exceed.
    pub limit: f64,
    /// Unit of `measured` and `limit`.
    pub unit: &'static str,
    /// Whether the run used the target's parameters (else it is indicative).
    pub at_target_size: bool,
    /// Extra words for the table.
    pub note: String,
}

impl Target {
    /// `Some(met)` if measured.
    pub fn met(&self) -> Option<bool> {
        self.measured.map(|m| m <= self.limit)
    }
}

/// Prints the targets table.
pub fn print_targets(targets: &[Target]) {
    if targets.is_empty() {
        return;
    }
    println!();
    println!("== targets (measured in this run)");
    println!(
        "  {:<52} {:>10} {:>10}  result",
        "target", "measured", "limit"
    );
    for t in targets {
        let measured = t
            .measured
            .map_or("n/a".to_string(), |m| format!("{m:.2}{}", t.unit));
        let verdict = match t.met() {
            Some(true) => "met",
            Some(false) => "MISSED",
            None => "not measured",
        };
        let size = if t.at_target_size {
            String::new()
        } else {
            " (not at target size: indicative only)".to_string()
        };
        println!(
            "  {:<52} {:>10} {:>10}  {verdict}{size}{}",
            t.name,
            measured,
            format!("{:.2}{}", t.limit, t.unit),
            if t.note.is_empty() {
                String::new()
            } else {
                format!("  [{}]", t.note)
            }
        );
    }
}

/// The JSON for the targets.
pub fn targets_json(targets: &[Target]) -> Value {
    Value::Array(
        targets
            .iter()
            .map(|t| {
                json!({
                    "target": t.name,
                    "measured": t.measured,
                    "limit": t.limit,
                    "unit": t.unit,
                    "met": t.met(),
                    "at_target_size": t.at_target_size,
                    "note": t.note,
                })
            })
            .collect(),
    )
}

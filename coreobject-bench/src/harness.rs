//! Running peers: each repetition of each peer's workload runs on a fresh
//! thread with a 1 GiB stack, and the results are collected into
//! [`WorkloadResult`]s for the report.
//!
//! A fresh thread per repetition matters twice: the thread-local collectors
//! of rust-gc, dumpster and rust-cc start empty every time, and the allocation
//! counter ([`crate::alloc`]) sees only that repetition. The big stack is
//! there because rust-gc and dumpster mark (and rust-cc traces) recursively,
//! so a long reference chain in a million-object graph needs a deep stack; it
//! is only reserved address space, not memory.
//!
//! The results also travel between processes ([`encode`], [`decode`]): by
//! default `main` runs each peer in a worker process of its own.

use std::time::{Duration, Instant};

/// Stack size of the threads that run the peers.
pub const STACK_BYTES: usize = 1 << 30;

/// A library (or baseline) the workloads run against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    /// This crate: handles into a chunked object table, tracing collector.
    CoreObject,
    /// `gc-arena` 0.7: arena-branded `Gc` pointers, incremental mark and sweep.
    GcArena,
    /// `gc` 0.5 (rust-gc): rooted `Gc` pointers, recursive mark and sweep.
    RustGc,
    /// `dumpster` 2.1 (`unsync`): reference counting plus a cycle search.
    Dumpster,
    /// `rust-cc` 0.6: reference counting plus a trial-deletion cycle collector.
    RustCc,
    /// `slotmap` 1.1 with a hand-rolled mark and sweep (explicit stack).
    SlotMap,
    /// `std::rc::Rc` (no cycle collection).
    Rc,
    /// `std::boxed::Box` (unique ownership, no sharing).
    Box,
    /// The floor: struct-of-arrays, a bitmap mark, an explicit work list
    /// (with prefetching), no per-object allocation.
    Ideal,
}

impl Peer {
    /// Every peer, in report order.
    pub const ALL: [Peer; 9] = [
        Peer::CoreObject,
        Peer::GcArena,
        Peer::RustGc,
        Peer::Dumpster,
        Peer::RustCc,
        Peer::SlotMap,
        Peer::Rc,
        Peer::Box,
        Peer::Ideal,
    ];

    /// The name used in tables, JSON and `--peers`.
    pub fn name(self) -> &'static str {
        match self {
            Peer::CoreObject => "coreobject",
            Peer::GcArena => "gc-arena",
            Peer::RustGc => "rust-gc",
            Peer::Dumpster => "dumpster",
            Peer::RustCc => "rust-cc",
            Peer::SlotMap => "slotmap",
            Peer::Rc => "Rc",
            Peer::Box => "Box",
            Peer::Ideal => "ideal",
        }
    }

    /// Parses a name from [`Peer::name`] (case-insensitive).
    pub fn parse(s: &str) -> Option<Peer> {
        Peer::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s.trim()))
    }
}

/// How many times to repeat, and how long to keep repeating.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Repetitions per peer (at most).
    pub reps: usize,
    /// A peer whose repetitions have taken this long (teardown included) gets
    /// no more, so one slow peer cannot blow the run time. At least one
    /// repetition always runs, and at least `min_reps` for the peers a
    /// workload's targets compare.
    pub budget: Duration,
    /// Repetitions the key peers of a workload always get.
    pub min_reps: usize,
    /// The peers to run.
    pub peers: Vec<Peer>,
    /// Print every repetition to stderr.
    pub verbose: bool,
}

/// What one repetition of a peer's workload produced.
pub enum Outcome {
    /// The peer cannot express the workload; the reason goes in the table.
    Na(&'static str),
    /// It ran.
    Ran(Run),
}

/// The measurements of one repetition.
pub struct Run {
    /// One value per metric of the workload, in the workload's order.
    pub values: Vec<f64>,
    /// Values that go only into the JSON (e.g. collector phase timings).
    pub extra: Vec<(&'static str, f64)>,
    /// The verification: `Err` says what was wrong.
    pub check: Result<(), String>,
}

/// A metric a workload reports (lower is always better).
#[derive(Clone, Debug)]
pub struct Metric {
    /// Short key for the JSON.
    pub key: String,
    /// Column title.
    pub title: String,
    /// Unit, e.g. `ns/object`.
    pub unit: String,
}

impl Metric {
    /// A metric.
    pub fn new(key: &str, title: &str, unit: &str) -> Metric {
        Metric {
            key: key.into(),
            title: title.into(),
            unit: unit.into(),
        }
    }
}

/// A peer's status after its repetitions.
#[derive(Clone, Debug)]
pub enum Status {
    /// Every repetition ran and verified.
    Ok,
    /// Verification failed or the workload panicked.
    Failed(String),
    /// Not applicable, and why.
    Na(String),
}

/// One peer's results for a workload.
pub struct PeerResult {
    /// The peer.
    pub peer: Peer,
    /// The status.
    pub status: Status,
    /// Samples, one `Vec` per metric, one value per repetition.
    pub samples: Vec<Vec<f64>>,
    /// Extra samples for the JSON, by key.
    pub extra: Vec<(String, Vec<f64>)>,
    /// Wall time of all repetitions, teardown included.
    pub wall: Duration,
}

impl PeerResult {
    /// Repetitions that produced samples.
    pub fn reps(&self) -> usize {
        self.samples.first().map_or(0, Vec::len)
    }
}

/// A workload's results over all peers.
pub struct WorkloadResult {
    /// Workload name, e.g. `world`.
    pub name: String,
    /// Parameters, for the title and the JSON.
    pub params: Vec<(String, String)>,
    /// The metrics, in column order.
    pub metrics: Vec<Metric>,
    /// Per peer.
    pub peers: Vec<PeerResult>,
    /// Lines printed under the tables.
    pub notes: Vec<String>,
}

impl WorkloadResult {
    /// The result of one peer, if it ran (`Ok` status) and has samples.
    pub fn ok(&self, peer: Peer) -> Option<&PeerResult> {
        self.peers
            .iter()
            .find(|r| r.peer == peer && matches!(r.status, Status::Ok) && r.reps() > 0)
    }

    /// Whether any peer failed.
    pub fn failed(&self) -> bool {
        self.peers
            .iter()
            .any(|r| matches!(r.status, Status::Failed(_)))
    }
}

/// Runs `f` on a new thread with a [`STACK_BYTES`] stack; a panic becomes
/// `Err` with its message.
pub fn on_big_stack<R: Send>(f: impl FnOnce() -> R + Send) -> Result<R, String> {
    std::thread::scope(|s| {
        let handle = std::thread::Builder::new()
            .name("peer".into())
            .stack_size(STACK_BYTES)
            .spawn_scoped(s, f)
            .map_err(|e| format!("could not spawn the peer thread: {e}"))?;
        handle.join().map_err(|p| {
            if let Some(s) = p.downcast_ref::<&str>() {
                format!("panicked: {s}")
            } else if let Some(s) = p.downcast_ref::<String>() {
                format!("panicked: {s}")
            } else {
                "panicked".to_string()
            }
        })
    })
}

/// Runs a workload against every peer in `settings`, repeating each up to
/// `settings.reps` times within `settings.budget` (but at least
/// `settings.min_reps` times for the `key` peers).
///
/// Repetitions run in rounds — every peer's first repetition, then every
/// peer's second, and so on — so that, when several peers share a process
/// (`--in-process`), a change in the machine's load during the run affects
/// all of them alike rather than whichever peer happened to run then.
pub fn run_workload(
    settings: &Settings,
    name: &str,
    key: &[Peer],
    params: Vec<(&str, String)>,
    metrics: Vec<Metric>,
    f: impl Fn(Peer) -> Outcome + Sync,
) -> WorkloadResult {
    let mut peers: Vec<PeerResult> = settings
        .peers
        .iter()
        .map(|&peer| PeerResult {
            peer,
            status: Status::Ok,
            samples: vec![Vec::new(); metrics.len()],
            extra: Vec::new(),
            wall: Duration::ZERO,
        })
        .collect();
    let mut active = vec![true; peers.len()];
    for rep in 0..settings.reps.max(1) {
        for (res, on) in peers.iter_mut().zip(active.iter_mut()) {
            if !*on {
                continue;
            }
            let peer = res.peer;
            let t0 = Instant::now();
            let outcome = on_big_stack(|| f(peer));
            res.wall += t0.elapsed();
            match outcome {
                Err(msg) => res.status = Status::Failed(msg),
                Ok(Outcome::Na(why)) => res.status = Status::Na(why.to_string()),
                Ok(Outcome::Ran(run)) => {
                    assert_eq!(run.values.len(), metrics.len(), "{name}: metric count");
                    for (s, v) in res.samples.iter_mut().zip(&run.values) {
                        s.push(*v);
                    }
                    for (k, v) in run.extra {
                        match res.extra.iter_mut().find(|(key, _)| key == k) {
                            Some((_, vs)) => vs.push(v),
                            None => res.extra.push((k.to_string(), vec![v])),
                        }
                    }
                    if settings.verbose {
                        let vals: Vec<String> = metrics
                            .iter()
                            .zip(&run.values)
                            .map(|(m, v)| format!("{} {:.2} {}", m.title, v, m.unit))
                            .collect();
                        eprintln!(
                            "  {name:<14} {:<10} rep {}/{}  {}",
                            peer.name(),
                            rep + 1,
                            settings.reps,
                            vals.join(", ")
                        );
                    }
                    if let Err(msg) = run.check {
                        res.status = Status::Failed(msg);
                    }
                }
            }
            let min_reps = if key.contains(&peer) {
                settings.min_reps.min(settings.reps)
            } else {
                1
            };
            let spent = rep + 1 >= min_reps && res.wall >= settings.budget;
            if !matches!(res.status, Status::Ok) || spent {
                *on = false;
            }
            if let Status::Failed(msg) = &res.status {
                eprintln!("  {name}: {} FAILED: {msg}", peer.name());
            }
        }
    }
    WorkloadResult {
        name: name.to_string(),
        params: params
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        metrics,
        peers,
        notes: Vec::new(),
    }
}

/// Builds a verification result from a list of (condition, message) pairs.
pub fn verify(checks: &[(bool, String)]) -> Result<(), String> {
    let failed: Vec<&str> = checks
        .iter()
        .filter(|(ok, _)| !ok)
        .map(|(_, m)| m.as_str())
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("; "))
    }
}

/// Encodes a workload's results for the trip from a worker process to the
/// parent (one `WORKER {…}` line per workload on the worker's stdout).
pub fn encode(w: &WorkloadResult) -> serde_json::Value {
    use serde_json::json;
    let peers: Vec<serde_json::Value> = w
        .peers
        .iter()
        .map(|r| {
            let (status, reason) = match &r.status {
                Status::Ok => ("ok", None),
                Status::Failed(m) => ("failed", Some(m.clone())),
                Status::Na(m) => ("n/a", Some(m.clone())),
            };
            json!({
                "peer": r.peer.name(),
                "status": status,
                "reason": reason,
                "samples": r.samples,
                "extra": r.extra,
                "wall": r.wall.as_secs_f64(),
            })
        })
        .collect();
    json!({
        "name": w.name,
        "params": w.params,
        "metrics": w.metrics.iter().map(|m| [&m.key, &m.title, &m.unit]).collect::<Vec<_>>(),
        "notes": w.notes,
        "peers": peers,
    })
}

/// Decodes what [`encode`] wrote; `None` if it is malformed.
pub fn decode(v: &serde_json::Value) -> Option<WorkloadResult> {
    let strings = |v: &serde_json::Value| -> Option<Vec<String>> {
        v.as_array()?
            .iter()
            .map(|s| s.as_str().map(String::from))
            .collect()
    };
    let floats = |v: &serde_json::Value| -> Option<Vec<f64>> {
        v.as_array()?
            .iter()
            .map(serde_json::Value::as_f64)
            .collect()
    };
    let pairs = |v: &serde_json::Value| -> Option<Vec<(String, String)>> {
        v.as_array()?
            .iter()
            .map(|p| {
                let p = strings(p)?;
                (p.len() == 2).then(|| (p[0].clone(), p[1].clone()))
            })
            .collect()
    };
    let metrics = v["metrics"]
        .as_array()?
        .iter()
        .map(|m| {
            let m = strings(m)?;
            (m.len() == 3).then(|| Metric::new(&m[0], &m[1], &m[2]))
        })
        .collect::<Option<Vec<_>>>()?;
    let peers = v["peers"]
        .as_array()?
        .iter()
        .map(|r| {
            let reason = r["reason"].as_str().unwrap_or_default().to_string();
            let status = match r["status"].as_str()? {
                "ok" => Status::Ok,
                "failed" => Status::Failed(reason),
                _ => Status::Na(reason),
            };
            let extra = r["extra"]
                .as_array()?
                .iter()
                .map(|e| Some((e[0].as_str()?.to_string(), floats(&e[1])?)))
                .collect::<Option<Vec<_>>>()?;
            Some(PeerResult {
                peer: Peer::parse(r["peer"].as_str()?)?,
                status,
                samples: r["samples"]
                    .as_array()?
                    .iter()
                    .map(floats)
                    .collect::<Option<Vec<_>>>()?,
                extra,
                wall: Duration::from_secs_f64(r["wall"].as_f64()?),
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(WorkloadResult {
        name: v["name"].as_str()?.to_string(),
        params: pairs(&v["params"])?,
        metrics,
        peers,
        notes: strings(&v["notes"])?,
    })
}

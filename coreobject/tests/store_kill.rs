//! Crash safety for real: a child process (this test binary, run again with
//! an environment variable) saves a changing world into a store as fast as
//! it can and is killed with SIGKILL at a random moment, over and over.
//! Each time the store must reopen and load, whole, the last save the child
//! committed (or a later one it was committing): the parent replays the
//! same deterministic world up to that save in memory and compares the two
//! graphs by persistent id.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use coreobject::save::{FileStore, MemStore, PersistentId, SaveStore};
use coreobject::{Heap, Obj, Object};

#[derive(Object, Default, Debug)]
#[object(save)]
struct Counter {
    save: u64,
    nodes: Vec<Obj<Node>>,
}

#[derive(Object, Default, Debug)]
#[object(save)]
struct Node {
    value: u64,
    next: Option<Obj<Node>>,
    label: String,
}

const NODES: u64 = 3000;
const CHILD: &str = "COREOBJECT_STORE_KILL_CHILD";

/// The world after save `s` (deterministic): `s == 1` builds it, each later
/// save changes some values, frees a node, adds one, collects now and then.
fn step(heap: &mut Heap, counter: &mut Option<Obj<Counter>>, s: u64) {
    let c = match *counter {
        Some(c) => c,
        None => {
            let c = heap
                .spawn(Counter::default())
                .name("Counter")
                .root()
                .create()
                .unwrap();
            let mut nodes = Vec::new();
            for i in 0..NODES {
                let n = heap
                    .spawn(Node {
                        value: i,
                        next: nodes.last().copied(),
                        label: format!("node {i}"),
                    })
                    .outer(c)
                    .create()
                    .unwrap();
                nodes.push(n);
            }
            heap[c].nodes = nodes;
            *counter = Some(c);
            c
        }
    };
    heap[c].save = s;
    let len = heap[c].nodes.len() as u64;
    for j in 0..40u64 {
        let k = ((s * 7919 + j * 104_729) % len) as usize;
        let n = heap[c].nodes[k];
        heap[n].value = s * 1000 + j;
    }
    let gone = heap[c].nodes.remove((s * 31 % len) as usize);
    let _ = gone;
    let prev = heap[c].nodes.last().copied();
    let n = heap
        .spawn(Node {
            value: s,
            next: prev,
            label: format!("born {s}"),
        })
        .outer(c)
        .create()
        .unwrap();
    heap[c].nodes.push(n);
    if s % 4 == 0 {
        heap.collect().unwrap();
    }
}

#[derive(Debug, PartialEq)]
struct Seen {
    class: &'static str,
    save: u64,
    value: u64,
    label: String,
    refs: Vec<Option<PersistentId>>,
    name: Option<String>,
    outer: Option<PersistentId>,
    rooted: bool,
}

fn graph(heap: &Heap) -> BTreeMap<PersistentId, Seen> {
    let pid = |h: coreobject::AnyObj| heap.persistent_id(h);
    heap.iter()
        .map(|o| {
            let mut s = Seen {
                class: o.class().name(),
                save: 0,
                value: 0,
                label: String::new(),
                refs: Vec::new(),
                name: heap.name_of(o.id()).map(|n| n.to_string()),
                outer: heap.outer_of(o.id()).and_then(pid),
                rooted: o.is_rooted(),
            };
            if let Some(c) = o.downcast::<Counter>() {
                s.save = c.save;
                s.refs = c.nodes.iter().map(|n| pid(n.any())).collect();
            } else if let Some(n) = o.downcast::<Node>() {
                s.value = n.value;
                s.label = n.label.clone();
                s.refs = vec![n.next.and_then(|n| pid(n.any()))];
            }
            (pid(o.id()).expect("every object saved"), s)
        })
        .collect()
}

fn open(kind: &str, path: &Path) -> Box<dyn SaveStore> {
    match kind {
        "file" => Box::new(FileStore::open(path, 2).unwrap()),
        #[cfg(feature = "redb")]
        "redb" => Box::new(coreobject::save::RedbStore::open(path).unwrap()),
        other => panic!("unknown store {other}"),
    }
}

/// The child: saves forever, printing each committed save's number.
fn child(kind: &str, path: &Path) -> ! {
    use std::io::Write;
    let mut store = open(kind, path);
    let mut heap = Heap::new();
    let mut counter = None;
    let mut out = std::io::stdout().lock();
    for s in 1.. {
        step(&mut heap, &mut counter, s);
        heap.save_store(&mut *store).unwrap();
        writeln!(out, "{s}").unwrap();
        out.flush().unwrap();
    }
    unreachable!()
}

/// The world after `saves` saves, replayed in memory.
fn replay(saves: u64) -> BTreeMap<PersistentId, Seen> {
    let mut heap = Heap::new();
    let mut counter = None;
    let mut mem = MemStore::default();
    for s in 1..=saves {
        step(&mut heap, &mut counter, s);
        heap.save_store(&mut mem).unwrap();
    }
    graph(&heap)
}

fn kill_repeatedly(kind: &str, budget: Duration) -> usize {
    coreobject::save::register::<Counter>().unwrap();
    coreobject::save::register::<Node>().unwrap();
    let exe = std::env::current_exe().unwrap();
    let base: PathBuf =
        std::env::temp_dir().join(format!("coreobject-kill-{kind}-{}", std::process::id()));
    let start = Instant::now();
    let mut rng = start.elapsed().as_nanos() as u64 ^ 0x9e37_79b9_7f4a_7c15;
    let mut runs = 0;
    while runs < 3 || start.elapsed() < budget {
        runs += 1;
        let path = base.join(format!("run{runs}"));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        let store_path = if kind == "file" {
            path.clone()
        } else {
            path.join("world.redb")
        };
        let mut proc = Command::new(&exe)
            .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
            .env(CHILD, format!("{kind}:{}", store_path.display()))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Wait for the first commit, then kill at a random moment after it.
        let mut lines = BufReader::new(proc.stdout.take().unwrap()).lines();
        // (libtest prints its own lines first; the first number may share
        // a line with "test child_entry ...").
        let number = |l: &str| {
            l.split_whitespace()
                .last()
                .and_then(|w| w.parse::<u64>().ok())
        };
        let mut last = 0u64;
        for l in lines.by_ref().map_while(Result::ok) {
            if let Some(n) = number(&l) {
                last = n;
                break;
            }
        }
        assert!(last >= 1, "the child committed nothing");
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        std::thread::sleep(Duration::from_micros(rng % 150_000));
        proc.kill().unwrap(); // SIGKILL
        proc.wait().unwrap();
        for l in lines.map_while(Result::ok) {
            if let Some(n) = number(&l) {
                last = last.max(n);
            }
        }
        let mut store = open(kind, &store_path);
        let meta = store.meta().unwrap().expect("a committed save");
        assert!(
            meta.saves >= last && meta.saves <= last + 1,
            "store at save {}, child reported {last}",
            meta.saves
        );
        let mut heap = Heap::new();
        heap.load_store(&mut *store, None).unwrap();
        assert_eq!(
            graph(&heap),
            replay(meta.saves),
            "run {runs}: save {}",
            meta.saves
        );
        drop(store);
        let _ = std::fs::remove_dir_all(&path);
    }
    let _ = std::fs::remove_dir_all(&base);
    runs
}

#[test]
fn child_entry() {
    if let Ok(spec) = std::env::var(CHILD) {
        let (kind, path) = spec.split_once(':').unwrap();
        child(kind, Path::new(path));
    }
}

#[test]
fn file_store_survives_sigkill() {
    let runs = kill_repeatedly("file", Duration::from_secs(2));
    assert!(runs >= 3);
}

#[cfg(feature = "redb")]
#[test]
fn redb_store_survives_sigkill() {
    let runs = kill_repeatedly("redb", Duration::from_secs(2));
    assert!(runs >= 3);
}

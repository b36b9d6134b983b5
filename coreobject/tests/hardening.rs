//! Regression tests for issue 7's leftovers, one per fix:
//!
//! * dropping a heap is panic safe: a panicking `Drop` of an object or
//!   `on_shutdown` of a listener stops neither the other drops nor the
//!   release of the heap's tag, and the first panic is resumed afterwards;
//! * `tick(Duration::MAX)` twice does not overflow the collector's clock,
//!   stop-the-world or incremental;
//! * `memory_report().collector_bytes` counts the mark bitmap and work list;
//! * `reference_chains` does not panic when a referencer reports objects
//!   created, on another thread, after it sized its tables;
//! * the growth trigger fires exactly at `max(growth_floor, growth x
//!   survivors)`, and an invalid growth factor is refused;
//! * a tick that only finishes deferred objects says so;
//! * the `serde` feature serializes every report (`--features serde`).
//!
//! Sizes shrink under miri (`cfg!(miri)`), which runs this file too.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, Once};
use std::time::Duration;

use coreobject::{
    AnyObj, ConfigError, CreateListener, DeleteListener, Error, GcConfig, Heap, HeapConfig,
    Lifecycle, Obj, Object, ObjectEvent, Phase, Referencer, RootKind, Trigger, Visitor,
};

/// Panics these tests raise on purpose start with this, and the panic hook
/// keeps them off the test output.
const EXPECTED: &str = "hardening: ";

fn quiet_expected_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let msg = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str));
            if !msg.is_some_and(|m| m.starts_with(EXPECTED)) {
                previous(info);
            }
        }));
    });
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else {
        "<non-string panic>".to_string()
    }
}

fn manual(gc: GcConfig) -> Heap {
    Heap::with_config(HeapConfig {
        gc,
        ..HeapConfig::DEFAULT
    })
    .unwrap()
}

// ----- a. dropping a heap is panic safe ----------------------------------------

/// Counts its drops; panics in `Drop` if it has a message.
#[derive(Object)]
struct Bomb {
    #[object(skip)]
    drops: Arc<AtomicUsize>,
    #[object(skip)]
    panic_with: Option<&'static str>,
}

impl Drop for Bomb {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
        if let Some(msg) = self.panic_with {
            panic!("{msg}");
        }
    }
}

fn bomb(drops: &Arc<AtomicUsize>, panic_with: Option<&'static str>) -> Bomb {
    Bomb {
        drops: drops.clone(),
        panic_with,
    }
}

/// Drops the heap, returning the message of the panic it resumed, if any.
fn drop_heap(heap: Heap) -> Option<String> {
    catch_unwind(AssertUnwindSafe(move || drop(heap)))
        .err()
        .map(|p| panic_message(&*p))
}

#[test]
fn heap_drop_drops_every_object_past_panicking_drops() {
    quiet_expected_panics();
    let n = if cfg!(miri) { 40 } else { 300 };
    let drops = Arc::new(AtomicUsize::new(0));
    let heap = Heap::new();
    for i in 0..n {
        let msg = match i {
            10 => Some("hardening: the first panicking drop"),
            25 => Some("hardening: the second panicking drop"),
            _ => None,
        };
        let h = heap.create(bomb(&drops, msg));
        if i % 3 == 0 {
            heap.add_to_root(h).unwrap();
        }
    }
    assert_eq!(
        drop_heap(heap).as_deref(),
        Some("hardening: the first panicking drop")
    );
    assert_eq!(drops.load(Ordering::SeqCst), n, "every object was dropped");
}

/// A listener whose `on_shutdown` panics or counts.
struct Shutdown {
    calls: Arc<AtomicUsize>,
    panic_with: Option<&'static str>,
}

impl Shutdown {
    fn shutdown(&self) {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if let Some(msg) = self.panic_with {
            panic!("{msg}");
        }
    }
}

impl CreateListener for Shutdown {
    fn on_create(&self, _: &ObjectEvent) {}
    fn on_shutdown(&self) {
        self.shutdown();
    }
}

impl DeleteListener for Shutdown {
    fn on_delete(&self, _: &ObjectEvent) {}
    fn on_shutdown(&self) {
        self.shutdown();
    }
}

#[test]
fn heap_drop_runs_on_past_a_panicking_listener_shutdown() {
    quiet_expected_panics();
    let drops = Arc::new(AtomicUsize::new(0));
    let calls = Arc::new(AtomicUsize::new(0));
    let mut heap = Heap::new();
    heap.add_create_listener(Shutdown {
        calls: calls.clone(),
        panic_with: Some("hardening: create listener shutdown"),
    });
    heap.add_create_listener(Shutdown {
        calls: calls.clone(),
        panic_with: None,
    });
    heap.add_delete_listener(Shutdown {
        calls: calls.clone(),
        panic_with: Some("hardening: delete listener shutdown"),
    });
    heap.add_delete_listener(Shutdown {
        calls: calls.clone(),
        panic_with: None,
    });
    for i in 0..20 {
        heap.create(bomb(&drops, (i == 5).then_some("hardening: a drop")));
    }
    // The listeners' shutdown runs before the objects drop: its panic is the
    // first one, and the one resumed.
    assert_eq!(
        drop_heap(heap).as_deref(),
        Some("hardening: create listener shutdown")
    );
    assert_eq!(calls.load(Ordering::SeqCst), 4, "every listener shut down");
    assert_eq!(drops.load(Ordering::SeqCst), 20, "every object was dropped");
}

#[test]
#[cfg_attr(
    miri,
    ignore = "1,100 heaps, more than there are tags: the count is the point, and takes miri minutes"
)]
fn heaps_whose_drop_panics_release_their_tags() {
    quiet_expected_panics();
    // At most 1023 heaps are live at once: a heap whose drop leaked its tag
    // would exhaust them well within this loop.
    let drops = Arc::new(AtomicUsize::new(0));
    let heaps = 1100;
    for i in 0..heaps {
        let heap = Heap::with_config(HeapConfig::DEFAULT)
            .unwrap_or_else(|e| panic!("heap {i}: {e} (a dropped heap kept its tag)"));
        heap.create(bomb(&drops, Some("hardening: every heap's drop panics")));
        heap.create(bomb(&drops, None));
        heap.create(bomb(&drops, Some("hardening: twice")));
        assert_eq!(
            drop_heap(heap).as_deref(),
            Some("hardening: every heap's drop panics")
        );
    }
    assert_eq!(drops.load(Ordering::SeqCst), 3 * heaps);
    assert!(Heap::with_config(HeapConfig::DEFAULT).is_ok());
}

// ----- b. the collector's clock saturates ---------------------------------------

#[derive(Object, Default)]
struct Node {
    next: Option<Obj<Node>>,
    kids: Vec<Obj<Node>>,
}

#[test]
fn tick_duration_max_twice_does_not_overflow() {
    let incremental = GcConfig {
        incremental: Some(Duration::from_millis(2)),
        ..GcConfig::MANUAL
    };
    for gc in [GcConfig::MANUAL, incremental] {
        let mode = if gc.incremental.is_some() {
            "incremental"
        } else {
            "stop-the-world"
        };
        // No trigger: the clock just runs.
        let mut heap = manual(gc.clone());
        let keep = heap.create(Node::default());
        heap.add_to_root(keep).unwrap();
        heap.create(Node::default());
        for _ in 0..3 {
            let t = heap.tick(Duration::MAX);
            assert!(t.started.is_none(), "{mode}: no trigger is set");
        }
        assert_eq!(heap.len(), 2, "{mode}");

        // An interval, with the collector disabled: the clock saturates, and
        // the collection is still due once the collector is enabled again.
        let mut heap = manual(GcConfig {
            interval: Some(Duration::from_secs(60)),
            ..gc
        });
        let keep = heap.create(Node::default());
        heap.add_to_root(keep).unwrap();
        heap.create(Node::default());
        heap.set_enabled(false);
        heap.tick(Duration::MAX);
        heap.tick(Duration::MAX);
        heap.set_enabled(true);
        let stats = loop {
            if let Some(stats) = heap.tick(Duration::ZERO).completed {
                break stats;
            }
        };
        assert_eq!(stats.trigger, Trigger::Interval, "{mode}");
        assert_eq!((stats.freed, heap.len()), (1, 1), "{mode}");
        assert_eq!(heap.gc_phase(), Phase::Idle, "{mode}");
    }
}

// ----- c. the collector's memory includes its mark work list ----------------------

/// The collector's bytes before and after the first collection of a heap
/// of `n + 1` objects that `build` links to a root.
fn collector_bytes(
    n: usize,
    build: impl Fn(&mut Heap, Obj<Node>, Vec<Obj<Node>>),
) -> (usize, usize) {
    let mut heap = manual(GcConfig::MANUAL);
    let root = heap.create(Node::default());
    heap.add_to_root(root).unwrap();
    let nodes: Vec<_> = (0..n).map(|_| heap.create(Node::default())).collect();
    build(&mut heap, root, nodes);
    let before = heap.memory_report().collector_bytes;
    let stats = heap.collect().unwrap();
    assert_eq!(stats.marked, n + 1);
    (before, heap.memory_report().collector_bytes)
}

#[test]
fn collector_bytes_count_the_mark_bitmap_and_work_list() {
    let n = if cfg!(miri) { 100 } else { 100_000 };
    // A chain: the work list stays short, the bitmap has a bit per slot.
    let (before, after) = collector_bytes(n, |heap, root, nodes| {
        heap[root].next = Some(nodes[0]);
        for w in nodes.windows(2) {
            heap[w[0]].next = Some(w[1]);
        }
    });
    assert!(after > before, "{after} after, {before} before");
    assert!(
        after - before >= n / 8,
        "chain: {after} after, {before} before, want at least {} more",
        n / 8
    );
    // A star: the root's scan queues all its children at once, so the work
    // list held `n` entries of at least 4 bytes.
    let (before, after) = collector_bytes(n, |heap, root, nodes| heap[root].kids = nodes);
    let floor = n / 8 + 4 * n;
    assert!(
        after - before >= floor,
        "star: {after} after, {before} before, want at least {floor} more"
    );
}

// ----- d. reference_chains racing creation ----------------------------------------

/// A link of a chain built after it is created (through the locks).
#[derive(Object, Default)]
struct Link {
    next: Mutex<Option<Obj<Link>>>,
    end: Mutex<Option<Obj<Node>>>,
}

/// A referencer that, each time it is asked, has another thread create
/// objects (through `&Heap`) and reports those: they are newer than the
/// table `reference_chains` sized when it started.
struct Spawner {
    ask: Mutex<Option<mpsc::Sender<()>>>,
    made: Mutex<mpsc::Receiver<Vec<AnyObj>>>,
    /// Also reports made-up handles past any slot in use.
    bogus: bool,
}

/// Closes the spawner's channel when dropped, so that the creating thread
/// ends even if the test panics.
struct Close<'a>(&'a Spawner);

impl Drop for Close<'_> {
    fn drop(&mut self) {
        let mut ask = match self.0.ask.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        ask.take();
    }
}

impl Referencer for Spawner {
    fn add_referenced_objects(&self, v: &mut dyn Visitor) {
        if let Some(ask) = &*self.ask.lock().unwrap() {
            ask.send(()).unwrap();
            for h in self.made.lock().unwrap().recv().unwrap() {
                v.visit(h);
            }
        }
        if self.bogus {
            for index in [10_000u32, 1 << 20, u32::MAX - 1] {
                let bits = u64::from(index) | (1u64 << 32);
                v.visit(AnyObj::from_bits(bits).unwrap());
            }
        }
    }
    fn referencer_name(&self) -> String {
        "Spawner".into()
    }
}

#[test]
fn reference_chains_survives_objects_created_while_it_runs() {
    let mut heap = Heap::new();
    let (ask_tx, ask_rx) = mpsc::channel();
    let (made_tx, made_rx) = mpsc::channel();
    let spawner = Arc::new(Spawner {
        ask: Mutex::new(Some(ask_tx)),
        made: Mutex::new(made_rx),
        bogus: true,
    });
    heap.add_referencer(spawner.clone());
    let target = heap.create(Node::default());
    let rounds = if cfg!(miri) { 2 } else { 20 };
    let batch = if cfg!(miri) { 8 } else { 500 };
    let heap = &heap;
    std::thread::scope(|s| {
        s.spawn(move || {
            // Each batch: a chain from a head, which the referencer
            // reports, to the target. Each link is newer than the one
            // before it: the head sizes nothing past itself.
            while ask_rx.recv().is_ok() {
                let head = heap.create(Link::default());
                let mut last = head;
                for _ in 1..batch {
                    let h = heap.create(Link::default());
                    *heap[last].next.lock().unwrap() = Some(h);
                    last = h;
                }
                *heap[last].end.lock().unwrap() = Some(target);
                made_tx.send(vec![head.any()]).unwrap();
            }
        });
        let _close = Close(&spawner);
        for round in 0..rounds {
            let before = heap.table_stats().high_water;
            let chains = heap.reference_chains(target, 4);
            assert!(heap.table_stats().high_water > before);
            assert_eq!(chains.len(), 1, "round {round}: {chains:?}");
            let chain = &chains[0];
            assert_eq!(chain.root, RootKind::Referencer("Spawner".into()));
            assert_eq!(chain.links.len(), batch + 1, "round {round}");
            assert!(chain.links[0].object.index() >= before);
            assert_eq!(chain.links.last().unwrap().object, target.any());
            assert_eq!(chain.links[0].via.as_deref(), Some("next"));
            assert_eq!(chain.links[batch - 1].via.as_deref(), Some("end"));
        }
    });
    // Nothing reported but made-up handles: no chain, no panic.
    assert!(heap.reference_chains(target, 4).is_empty());
}

// ----- e. the growth trigger ----------------------------------------------------------

#[test]
fn growth_trigger_fires_at_the_floor_then_at_twice_the_survivors() {
    let floor = if cfg!(miri) { 16 } else { 100 };
    let mut heap = manual(GcConfig {
        growth: Some(2.0),
        growth_floor: floor,
        ..GcConfig::MANUAL
    });
    let none = |heap: &mut Heap, why: &str| {
        let t = heap.tick(Duration::from_millis(16));
        assert!(t.started.is_none() && t.completed.is_none(), "{why}: {t:?}");
    };
    let fires = |heap: &mut Heap, why: &str| {
        let t = heap.tick(Duration::from_millis(16));
        assert_eq!(t.started, Some(Trigger::Growth), "{why}");
        t.completed.expect("stop-the-world: the cycle completes")
    };

    // No survivors yet: the floor decides.
    let root = heap.create(Node::default());
    heap.add_to_root(root).unwrap();
    let mut kept = vec![];
    for _ in 1..floor - 1 {
        kept.push(heap.create(Node::default()));
    }
    heap[root].kids = kept;
    none(&mut heap, "below the floor");
    heap.create(Node::default()); // floor objects, one of them garbage
    let stats = fires(&mut heap, "at the floor");
    assert_eq!((stats.freed, heap.len()), (1, floor - 1));

    // floor - 1 survivors: the goal is twice that.
    let goal = 2 * (floor - 1);
    while heap.len() < goal - 1 {
        heap.create(Node::default());
    }
    none(&mut heap, "one object short of twice the survivors");
    heap.create(Node::default());
    let stats = fires(&mut heap, "at twice the survivors");
    assert_eq!(stats.freed, goal - (floor - 1));
    assert_eq!(heap.len(), floor - 1);

    // Few survivors: the floor decides again.
    heap[root].kids.clear();
    heap.collect().unwrap();
    assert_eq!(heap.len(), 1);
    while heap.len() < floor - 1 {
        heap.create(Node::default());
    }
    none(&mut heap, "twice one survivor, but below the floor");
    heap.create(Node::default());
    fires(&mut heap, "at the floor again");
}

#[test]
fn an_invalid_slice_stretch_is_refused() {
    let with = |stretch| HeapConfig {
        gc: GcConfig {
            incremental_stretch: stretch,
            ..GcConfig::MANUAL
        },
        ..HeapConfig::DEFAULT
    };
    for bad in [0.999, 0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert_eq!(
            Heap::with_config(with(bad)).err(),
            Some(Error::Config(ConfigError::Stretch)),
            "stretch {bad}"
        );
    }
    for good in [1.0, 4.0, 100.0] {
        assert!(Heap::with_config(with(good)).is_ok(), "stretch {good}");
    }
}

#[test]
fn an_invalid_growth_factor_is_refused() {
    for bad in [1.0, 0.5, 0.0, -2.0, f64::NAN] {
        let cfg = HeapConfig {
            gc: GcConfig {
                growth: Some(bad),
                ..GcConfig::MANUAL
            },
            ..HeapConfig::DEFAULT
        };
        assert_eq!(
            Heap::with_config(cfg).err(),
            Some(Error::Config(ConfigError::Growth)),
            "growth {bad}"
        );
    }
    for good in [1.000_001, 2.0, 8.0] {
        let cfg = HeapConfig {
            gc: GcConfig {
                growth: Some(good),
                ..GcConfig::MANUAL
            },
            ..HeapConfig::DEFAULT
        };
        assert!(Heap::with_config(cfg).is_ok(), "growth {good}");
    }
}

// ----- f. a tick that finishes deferred objects says so -----------------------------

/// Not ready for `finish_destroy` until told.
#[derive(Object)]
#[object(lifecycle)]
struct Slow {
    #[object(skip)]
    ready: Arc<AtomicBool>,
}

impl Lifecycle for Slow {
    fn is_ready_for_finish_destroy(&mut self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }
}

#[test]
fn a_tick_that_only_finishes_deferred_objects_reports_them() {
    let incremental = GcConfig {
        incremental: Some(Duration::from_millis(50)),
        ..GcConfig::MANUAL
    };
    for gc in [GcConfig::MANUAL, incremental] {
        let mut heap = manual(gc);
        let ready = Arc::new(AtomicBool::new(false));
        for _ in 0..3 {
            heap.create(Slow {
                ready: ready.clone(),
            });
        }
        let stats = heap.collect().unwrap();
        assert_eq!((stats.unreachable, stats.freed, stats.pending), (3, 0, 3));

        // Not ready: the tick polls, and did nothing worth reporting.
        let t = heap.tick(Duration::from_millis(16));
        assert_eq!((t.freed, t.work), (0, 0), "{t:?}");
        assert!(t.completed.is_none() && t.started.is_none());
        assert_eq!(heap.pending_destroy(), 3);

        ready.store(true, Ordering::SeqCst);
        let t = heap.tick(Duration::from_millis(16));
        assert_eq!(t.freed, 3, "{t:?}");
        assert!(t.completed.is_none() && t.started.is_none(), "{t:?}");
        assert_eq!(t.phase, Phase::Idle);
        assert!(t.did_work());
        assert_eq!(heap.pending_destroy(), 0);
        assert!(heap.is_empty());
        assert_eq!(heap.gc_totals().total_freed, 3);
    }
}

// ----- g. the serde feature -----------------------------------------------------------

#[cfg(feature = "serde")]
#[test]
fn reports_serialize_to_json() {
    use serde_json::{json, to_value};

    let mut heap = manual(GcConfig {
        every_frame: true,
        ..GcConfig::MANUAL
    });
    let target = heap.create(Node::default());
    let root = heap.create(Node {
        next: Some(target),
        kids: Vec::new(),
    });
    heap.add_to_root(root).unwrap();
    heap.create(Node::default());

    let stats = heap.collect().unwrap();
    let v = to_value(&stats).unwrap();
    assert_eq!(v["freed"], json!(1));
    assert_eq!(v["trigger"], json!("Explicit"));

    let v = to_value(heap.gc_totals()).unwrap();
    assert_eq!(v["collections"], json!(1));

    let t = heap.tick(Duration::from_millis(16));
    let v = to_value(&t).unwrap();
    assert_eq!(v["started"], json!("EveryFrame"));
    assert_eq!(v["completed"]["marked"], json!(2));
    assert_eq!(v["phase"], json!("Idle"));

    let v = to_value(heap.memory_report()).unwrap();
    assert_eq!(v["classes"][0]["class"], json!("Node"));
    assert_eq!(v["classes"][0]["count"], json!(2));

    let chains = heap.reference_chains(target, 4);
    let v = to_value(&chains[0]).unwrap();
    assert_eq!(v["root"], json!("Rooted"));
    assert_eq!(v["links"][1]["object"]["index"], json!(target.index()));
    assert_eq!(v["links"][1]["object"]["serial"], json!(target.serial()));
    assert_eq!(v["links"][0]["via"], json!("next"));

    let v = to_value(heap.table_stats()).unwrap();
    assert_eq!(v["objects"], json!(2));
}

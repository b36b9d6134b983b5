//! Destruction hooks, in Unreal's order, and what happens when they panic.
//!
//! Checks, with an event log shared by objects, delete listeners and `Drop`:
//! every unreachable object gets `begin_destroy` before any gets
//! `finish_destroy`; `finish_destroy` runs only once
//! `is_ready_for_finish_destroy` says so (an object not ready stays pending,
//! hidden from `get`, counted by `pending_destroy`, polled by later
//! collections and by `tick`, and never resurrected by a reference); then the
//! delete listeners run (newest first), the slot's serial moves on and its
//! index is reused, and last the value is dropped. Hooks can read other
//! objects through `DestroyCx`, unreachable ones included. A panic in
//! `begin_destroy`, `is_ready_for_finish_destroy`, `finish_destroy`, `Drop` or
//! a delete listener (or while marking, in a `Referencer` or a custom trace
//! function) is resumed from `collect` only after the heap is consistent: no
//! object is lost or freed twice, and the next collection works. The
//! deferred-finish timeout warning is emitted through `tracing`, once.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use coreobject::{
    AnyObj, DestroyCx, GcConfig, Heap, HeapConfig, Lifecycle, Obj, Object, ObjectEvent, Referencer,
    Visitor,
};

type Log = Arc<Mutex<Vec<String>>>;

fn log() -> Log {
    Arc::new(Mutex::new(Vec::new()))
}

fn take(log: &Log) -> Vec<String> {
    std::mem::take(&mut *log.lock().unwrap())
}

/// Where a [`Probe`] panics, if anywhere.
#[derive(Clone, Copy, PartialEq, Debug)]
enum PanicAt {
    Never,
    Begin,
    Ready,
    Finish,
    Drop,
}

#[derive(Object)]
#[object(lifecycle)]
struct Probe {
    name: &'static str,
    peer: Option<Obj<Probe>>,
    #[object(skip)]
    log: Log,
    #[object(skip)]
    ready: Arc<AtomicBool>,
    #[object(skip)]
    panic_at: PanicAt,
}

impl Probe {
    fn new(name: &'static str, log: &Log) -> Probe {
        Probe {
            name,
            peer: None,
            log: log.clone(),
            ready: Arc::new(AtomicBool::new(true)),
            panic_at: PanicAt::Never,
        }
    }
    fn push(&self, what: String) {
        self.log.lock().unwrap().push(what);
    }
}

impl Lifecycle for Probe {
    fn begin_destroy(&mut self, cx: &DestroyCx<'_>) {
        let peer = self.peer.map(|p| match cx.get(p) {
            Some(o) => format!(" peer={}", o.name),
            None => " peer=gone".to_string(),
        });
        // SAFETY: `this` is the Probe being destroyed.
        let this = unsafe { cx.this().assume::<Probe>() };
        assert!(cx.get(this).is_none(), "self is borrowed mutably");
        self.push(format!("begin {}{}", self.name, peer.unwrap_or_default()));
        if self.panic_at == PanicAt::Begin {
            panic!("begin_destroy of {}", self.name);
        }
    }
    fn is_ready_for_finish_destroy(&mut self) -> bool {
        let r = self.ready.load(Ordering::SeqCst);
        self.push(format!("ready? {} {r}", self.name));
        if self.panic_at == PanicAt::Ready {
            panic!("is_ready of {}", self.name);
        }
        r
    }
    fn finish_destroy(&mut self, cx: &DestroyCx<'_>) {
        let peer = self.peer.map(|p| match cx.get(p) {
            Some(o) => format!(" peer={}", o.name),
            None => " peer=gone".to_string(),
        });
        self.push(format!("finish {}{}", self.name, peer.unwrap_or_default()));
        if self.panic_at == PanicAt::Finish {
            panic!("finish_destroy of {}", self.name);
        }
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.push(format!("drop {}", self.name));
        if self.panic_at == PanicAt::Drop {
            panic!("drop of {}", self.name);
        }
    }
}

/// A heap that collects only when asked, with two delete listeners logging
/// the class and index of each deleted object.
fn heap_with_listeners(log: &Log) -> Heap {
    let mut heap = Heap::with_config(HeapConfig {
        gc: GcConfig::MANUAL,
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    for tag in ["L1", "L2"] {
        let l = log.clone();
        heap.on_delete(move |e: &ObjectEvent| {
            l.lock()
                .unwrap()
                .push(format!("{tag} {} #{}", e.class.name(), e.object.index()));
        });
    }
    heap
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

#[test]
fn hooks_run_in_unreal_order() {
    let log = log();
    let mut heap = heap_with_listeners(&log);
    let keep = heap.create(Probe::new("keep", &log));
    heap.add_to_root(keep).unwrap();
    let a = heap.create(Probe::new("a", &log));
    let mut bv = Probe::new("b", &log);
    bv.peer = Some(a);
    let b = heap.create(bv);
    heap[a].peer = Some(keep);
    let (ai, bi) = (a.index(), b.index());

    let stats = heap.collect().unwrap();
    assert_eq!((stats.unreachable, stats.freed, stats.pending), (2, 2, 0));
    assert_eq!(
        take(&log),
        [
            // begin_destroy on every unreachable object first; hooks read
            // other objects, reachable or not.
            "begin a peer=keep".to_string(),
            "begin b peer=a".to_string(),
            "ready? a true".to_string(),
            "ready? b true".to_string(),
            "finish a peer=keep".to_string(),
            "finish b peer=a".to_string(),
            // Then per object: listeners (newest first), then the drop.
            format!("L2 Probe #{ai}"),
            format!("L1 Probe #{ai}"),
            "drop a".to_string(),
            format!("L2 Probe #{bi}"),
            format!("L1 Probe #{bi}"),
            "drop b".to_string(),
        ]
    );
    // The serials moved on and the indices went back to the free list (LIFO).
    let c = heap.create(Probe::new("c", &log));
    let d = heap.create(Probe::new("d", &log));
    assert_eq!((c.index(), d.index()), (bi, ai));
    assert_ne!(c.serial(), b.serial());
    assert_ne!(d.serial(), a.serial());
    assert!(heap.get(a).is_none() && heap.get(b).is_none());
    assert_eq!(heap[keep].name, "keep");
    drop(heap);
    // Dropping the heap drops the rest without destruction hooks.
    let mut rest = take(&log);
    rest.sort();
    assert_eq!(rest, ["drop c", "drop d", "drop keep"]);
}

#[test]
fn destroy_context_sees_unreachable_objects_but_not_freed_ones() {
    #[derive(Object)]
    #[object(lifecycle)]
    struct Reader {
        other: Option<Obj<Reader>>,
        #[object(skip)]
        seen: Log,
    }
    impl Lifecycle for Reader {
        fn begin_destroy(&mut self, cx: &DestroyCx<'_>) {
            if let Some(o) = self.other {
                let s = format!(
                    "begin: get={} unreachable={} name={:?}",
                    cx.get(o).is_some(),
                    cx.is_unreachable(o),
                    cx.display_name(o)
                );
                self.seen.lock().unwrap().push(s);
            }
        }
    }
    let seen = log();
    let mut heap = Heap::new();
    let old = heap
        .spawn(Reader {
            other: None,
            seen: seen.clone(),
        })
        .name("Old")
        .create()
        .unwrap();
    heap.collect().unwrap(); // `old` is freed now
    let live = heap
        .spawn(Reader {
            other: None,
            seen: seen.clone(),
        })
        .name("Live")
        .root()
        .create()
        .unwrap();
    let peer = heap
        .spawn(Reader {
            other: None,
            seen: seen.clone(),
        })
        .name("Peer")
        .create()
        .unwrap();
    heap.create(Reader {
        other: Some(old),
        seen: seen.clone(),
    });
    heap.create(Reader {
        other: Some(live),
        seen: seen.clone(),
    });
    heap.create(Reader {
        other: Some(peer),
        seen: seen.clone(),
    });
    assert_eq!(heap.collect().unwrap().freed, 4);
    assert_eq!(
        take(&seen),
        [
            "begin: get=false unreachable=false name=None",
            "begin: get=true unreachable=false name=Some(\"Live\")",
            "begin: get=true unreachable=true name=Some(\"Peer\")",
        ]
    );
}

#[test]
fn an_object_not_ready_waits_and_is_polled_by_collections_and_ticks() {
    let log = log();
    let mut heap = heap_with_listeners(&log);
    let root = heap.create(Probe::new("root", &log));
    heap.add_to_root(root).unwrap();
    let slow = Probe::new("slow", &log);
    let ready = slow.ready.clone();
    ready.store(false, Ordering::SeqCst);
    let slow = heap.create(slow);
    let child = heap.create(Probe::new("child", &log));
    heap[slow].peer = Some(child);
    let si = slow.index();

    let s = heap.collect().unwrap();
    assert_eq!((s.unreachable, s.freed, s.pending, s.live), (2, 1, 1, 2));
    assert_eq!(heap.pending_destroy(), 1);
    assert_eq!(heap.len(), 2, "a pending object is still allocated");
    assert!(heap.get(slow).is_none());
    assert!(heap.get_even_if_garbage(slow).is_none(), "being destroyed");
    assert!(!heap.contains(slow));
    let ci = child.index();
    assert_eq!(
        take(&log),
        [
            "begin slow peer=child".to_string(),
            "begin child".to_string(),
            "ready? slow false".to_string(),
            "ready? child true".to_string(),
            "finish child".to_string(),
            format!("L2 Probe #{ci}"),
            format!("L1 Probe #{ci}"),
            "drop child".to_string(),
        ]
    );

    // A reference from a live object does not resurrect it.
    heap[root].peer = Some(slow);
    let s = heap.collect().unwrap();
    assert_eq!((s.marked, s.unreachable, s.freed, s.pending), (1, 0, 0, 1));
    assert_eq!(take(&log), ["ready? slow false"], "polled, not begun again");

    // Ticks that do not collect still poll.
    assert!(heap.tick(Duration::from_millis(16)).completed.is_none());
    assert_eq!(take(&log), ["ready? slow false"]);
    assert_eq!(heap.pending_destroy(), 1);
    let collections = heap.gc_totals().collections;
    let total = heap.gc_totals().total_freed;

    ready.store(true, Ordering::SeqCst);
    assert!(heap.tick(Duration::from_millis(16)).completed.is_none());
    assert_eq!(
        take(&log),
        [
            "ready? slow true".to_string(),
            // The peer was freed earlier: the hook sees it gone.
            "finish slow peer=gone".to_string(),
            format!("L2 Probe #{si}"),
            format!("L1 Probe #{si}"),
            "drop slow".to_string(),
        ]
    );
    assert_eq!(heap.pending_destroy(), 0);
    assert_eq!(heap.len(), 1);
    assert_eq!(
        heap.gc_totals().collections,
        collections,
        "a tick that only finishes is no collection"
    );
    assert_eq!(heap.gc_totals().total_freed, total + 1);
    // The freed slot is reused with a new serial; the old handle stays stale.
    let again = heap.create(Probe::new("again", &log));
    assert_eq!(again.index(), si);
    assert!(heap.get(slow).is_none());
    let stale = heap[root].peer.unwrap();
    assert!(
        heap.get(stale).is_none(),
        "the old reference does not reach the new object"
    );
}

/// Runs one collection over `a`, `b`, `c` (unreachable, `b` panicking at
/// `at`) next to a rooted object with a child, and checks the heap after.
fn panicking_collection(at: PanicAt, expect: &str) {
    let log = log();
    let mut heap = heap_with_listeners(&log);
    let root = heap.create(Probe::new("root", &log));
    heap.add_to_root(root).unwrap();
    let kid = heap.create(Probe::new("kid", &log));
    heap[root].peer = Some(kid);
    let a = heap.create(Probe::new("a", &log));
    let mut bv = Probe::new("b", &log);
    bv.panic_at = at;
    let b = heap.create(bv);
    let c = heap.create(Probe::new("c", &log));
    let doomed = [a.index(), b.index(), c.index()];

    let err = catch_unwind(AssertUnwindSafe(|| heap.collect())).expect_err("the panic is resumed");
    assert_eq!(panic_message(&*err), expect);
    let events = take(&log);
    // Every doomed object went through every step exactly once.
    for name in ["a", "b", "c"] {
        for step in ["begin", "finish", "drop"] {
            let n = events
                .iter()
                .filter(|e| e.starts_with(step) && e.split(' ').nth(1) == Some(name))
                .count();
            assert_eq!(n, 1, "{step} {name} in {events:?}");
        }
    }
    for i in doomed {
        for l in ["L1", "L2"] {
            assert_eq!(
                events
                    .iter()
                    .filter(|e| **e == format!("{l} Probe #{i}"))
                    .count(),
                1
            );
        }
    }
    assert!(!events
        .iter()
        .any(|e| e.contains("root") || e.contains("kid")));

    // The heap is consistent: survivors intact, the doomed gone, stats recorded.
    assert_eq!(heap.len(), 2);
    assert_eq!(heap.pending_destroy(), 0);
    assert!(heap.get(a).is_none() && heap.get(b).is_none() && heap.get(c).is_none());
    assert_eq!(heap[kid].name, "kid");
    let last = heap
        .last_collection()
        .expect("the collection completed")
        .clone();
    assert_eq!((last.freed, last.marked), (3, 2));
    assert_eq!(heap.gc_totals().total_freed, 3);
    assert_eq!(heap.table_stats().free, 3, "each slot freed exactly once");

    // The next collection works, and each freed slot is handed out once.
    let s = heap.collect().unwrap();
    assert_eq!((s.marked, s.freed), (2, 0));
    let fresh: Vec<u32> = (0..4)
        .map(|_| heap.create(Probe::new("n", &log)).index())
        .collect();
    let mut reused = fresh[..3].to_vec();
    reused.sort();
    let mut want = doomed.to_vec();
    want.sort();
    assert_eq!(reused, want);
    assert_eq!(fresh[3], 5, "then a new slot");
    assert_eq!(heap.collect().unwrap().freed, 4);
    assert_eq!(heap.len(), 2);
}

#[test]
fn panic_in_begin_destroy_is_resumed_after_a_complete_collection() {
    panicking_collection(PanicAt::Begin, "begin_destroy of b");
}

#[test]
fn panic_in_is_ready_counts_as_ready() {
    panicking_collection(PanicAt::Ready, "is_ready of b");
}

#[test]
fn panic_in_finish_destroy_is_resumed_after_a_complete_collection() {
    panicking_collection(PanicAt::Finish, "finish_destroy of b");
}

#[test]
fn panic_in_drop_is_resumed_after_a_complete_collection() {
    panicking_collection(PanicAt::Drop, "drop of b");
}

#[test]
fn panic_in_a_delete_listener_is_resumed_and_other_listeners_still_run() {
    let log = log();
    let mut heap = heap_with_listeners(&log);
    let l = log.clone();
    // Registered last, so it runs first for each object.
    heap.on_delete(move |e: &ObjectEvent| {
        l.lock().unwrap().push(format!("L3 #{}", e.object.index()));
        panic!("listener saw #{}", e.object.index());
    });
    let root = heap.create(Probe::new("root", &log));
    heap.add_to_root(root).unwrap();
    let a = heap.create(Probe::new("a", &log));
    let b = heap.create(Probe::new("b", &log));
    let err = catch_unwind(AssertUnwindSafe(|| heap.collect())).unwrap_err();
    assert_eq!(
        panic_message(&*err),
        format!("listener saw #{}", a.index()),
        "the first panic"
    );
    let (ai, bi) = (a.index(), b.index());
    assert_eq!(
        take(&log),
        [
            "begin a".to_string(),
            "begin b".to_string(),
            "ready? a true".to_string(),
            "ready? b true".to_string(),
            "finish a".to_string(),
            "finish b".to_string(),
            format!("L3 #{ai}"),
            format!("L2 Probe #{ai}"),
            format!("L1 Probe #{ai}"),
            "drop a".to_string(),
            format!("L3 #{bi}"),
            format!("L2 Probe #{bi}"),
            format!("L1 Probe #{bi}"),
            "drop b".to_string(),
        ]
    );
    assert_eq!(heap.len(), 1);
    assert_eq!(heap.gc_totals().total_freed, 2);
}

#[test]
fn two_panics_resume_the_first() {
    let log = log();
    let mut heap = heap_with_listeners(&log);
    let mut a = Probe::new("a", &log);
    a.panic_at = PanicAt::Finish;
    let mut b = Probe::new("b", &log);
    b.panic_at = PanicAt::Begin;
    heap.create(a);
    heap.create(b);
    let err = catch_unwind(AssertUnwindSafe(|| heap.collect())).unwrap_err();
    // b's begin_destroy runs before a's finish_destroy.
    assert_eq!(panic_message(&*err), "begin_destroy of b");
    assert!(heap.is_empty());
    assert_eq!(heap.collect().unwrap().freed, 0);
}

#[test]
fn panic_in_a_tick_that_finishes_pending_objects() {
    let log = log();
    let mut heap = heap_with_listeners(&log);
    let mut p = Probe::new("p", &log);
    p.panic_at = PanicAt::Finish;
    let ready = p.ready.clone();
    ready.store(false, Ordering::SeqCst);
    let p = heap.create(p);
    heap.collect().unwrap();
    assert_eq!(heap.pending_destroy(), 1);
    ready.store(true, Ordering::SeqCst);
    let err = catch_unwind(AssertUnwindSafe(|| heap.tick(Duration::from_millis(1)))).unwrap_err();
    assert_eq!(panic_message(&*err), "finish_destroy of p");
    assert_eq!(heap.pending_destroy(), 0);
    assert!(heap.is_empty());
    assert!(heap.get_even_if_garbage(p).is_none());
    assert_eq!(heap.gc_totals().total_freed, 1);
}

/// A referencer that panics once, while the collector is marking.
struct Flaky {
    armed: AtomicBool,
    holds: AnyObj,
}
impl Referencer for Flaky {
    fn add_referenced_objects(&self, v: &mut dyn Visitor) {
        if self.armed.swap(false, Ordering::SeqCst) {
            panic!("referencer failed");
        }
        v.visit(self.holds);
    }
}

#[test]
fn panic_while_marking_loses_no_root() {
    let log = log();
    let mut heap = heap_with_listeners(&log);
    let root = heap.create(Probe::new("root", &log));
    heap.add_to_root(root).unwrap();
    let kid = heap.create(Probe::new("kid", &log));
    heap[root].peer = Some(kid);
    let held = heap.create(Probe::new("held", &log));
    let strong = heap.strong(held).unwrap();
    let ext = heap.create(Probe::new("ext", &log));
    heap.add_referencer(Arc::new(Flaky {
        armed: AtomicBool::new(true),
        holds: ext.any(),
    }));
    let err = catch_unwind(AssertUnwindSafe(|| heap.collect())).unwrap_err();
    assert_eq!(panic_message(&*err), "referencer failed");
    assert_eq!(heap.len(), 4, "nothing was freed by the failed collection");
    assert!(take(&log).is_empty());

    // The next collection still knows every root.
    let s = heap.collect().unwrap();
    assert_eq!((s.marked, s.freed), (4, 0), "{:?}", take(&log));
    assert_eq!(heap[kid].name, "kid");
    assert_eq!(heap.get(&strong).unwrap().name, "held");
    assert_eq!(heap[ext].name, "ext");
}

#[test]
fn panic_in_a_custom_trace_function_loses_no_root() {
    static ARMED: AtomicBool = AtomicBool::new(false);
    fn explode(_this: &Bomb, _v: &mut (impl Visitor + ?Sized)) {
        if ARMED.swap(false, Ordering::SeqCst) {
            panic!("trace failed");
        }
    }
    #[derive(Object, Default)]
    #[object(trace_with = explode)]
    struct Bomb {
        next: Option<Obj<Bomb>>,
    }
    let mut heap = Heap::new();
    let a = heap.create(Bomb::default());
    let b = heap.create(Bomb { next: Some(a) });
    heap.add_to_root(b).unwrap();
    ARMED.store(true, Ordering::SeqCst);
    let err = catch_unwind(AssertUnwindSafe(|| heap.collect())).unwrap_err();
    assert_eq!(panic_message(&*err), "trace failed");
    let s = heap.collect().unwrap();
    assert_eq!((s.roots, s.marked, s.freed), (1, 2, 0));
    assert!(heap.get(a).is_some());
}

/// A `tracing` subscriber that records WARN events' messages.
struct Warnings(Arc<Mutex<Vec<String>>>);

struct Message(String);
impl tracing::field::Visit for Message {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl tracing::Subscriber for Warnings {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if *event.metadata().level() == tracing::Level::WARN {
            let mut m = Message(String::new());
            event.record(&mut m);
            self.0.lock().unwrap().push(m.0);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[test]
fn a_slow_finish_is_warned_about_once() {
    let warnings = Arc::new(Mutex::new(Vec::new()));
    let sub = Warnings(warnings.clone());
    // Miri's clock counts interpreted steps, and runs fast: a longer timeout.
    let timeout = Duration::from_millis(if cfg!(miri) { 10_000 } else { 30 });
    tracing::subscriber::with_default(sub, || {
        let log = log();
        let mut heap = Heap::with_config(HeapConfig {
            gc: GcConfig {
                finish_destroy_timeout: timeout,
                ..GcConfig::MANUAL
            },
            ..HeapConfig::DEFAULT
        })
        .unwrap();
        let p = Probe::new("slow", &log);
        let ready = p.ready.clone();
        ready.store(false, Ordering::SeqCst);
        heap.create(p);
        heap.collect().unwrap();
        heap.tick(Duration::ZERO);
        assert!(
            warnings.lock().unwrap().is_empty(),
            "not yet past the timeout"
        );
        std::thread::sleep(timeout + Duration::from_millis(10));
        heap.tick(Duration::ZERO);
        heap.collect().unwrap();
        heap.tick(Duration::ZERO);
        assert_eq!(
            *warnings.lock().unwrap(),
            ["object is still not ready for finish_destroy"],
            "warned once"
        );
        ready.store(true, Ordering::SeqCst);
        heap.tick(Duration::ZERO);
        assert_eq!(heap.pending_destroy(), 0);
    });
}

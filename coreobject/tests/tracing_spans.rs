//! The collector's `tracing` spans: one per slice (`gc.slice`, with its
//! phase, work done, objects freed and whether it completed the cycle) and
//! one per phase inside it (`gc.mark`, `gc.sweep`, `gc.destroy`, `gc.free`),
//! so that a subscriber such as `tracing-chrome` draws the collector on a
//! timeline. A small layer records every span's name, parent and fields.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use coreobject::{GcConfig, Heap, HeapConfig, Lifecycle, Obj, Object};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::Subscriber;
use tracing_subscriber::layer::{Context, SubscriberExt as _};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// A closed span: its name, its parent's name and its fields as text.
#[derive(Clone, Debug)]
struct Closed {
    name: &'static str,
    parent: Option<&'static str>,
    fields: BTreeMap<&'static str, String>,
}

impl Closed {
    fn field(&self, f: &str) -> Option<&str> {
        self.fields.get(f).map(String::as_str)
    }
    fn num(&self, f: &str) -> usize {
        self.field(f)
            .unwrap_or_else(|| panic!("{} has no {f} field: {self:?}", self.name))
            .parse()
            .unwrap_or_else(|_| panic!("{}.{f} is not a number: {self:?}", self.name))
    }
}

/// The fields of an open span, kept in its extensions.
struct Fields(BTreeMap<&'static str, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name(), value.to_string());
    }
}

/// Records every span when it closes.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Closed>>>);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recorder {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields(BTreeMap::new());
        attrs.record(&mut fields);
        ctx.span(id).unwrap().extensions_mut().insert(fields);
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let span = ctx.span(id).unwrap();
        let mut ext = span.extensions_mut();
        values.record(ext.get_mut::<Fields>().unwrap());
    }
    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let span = ctx.span(&id).unwrap();
        let fields = span.extensions_mut().remove::<Fields>().unwrap().0;
        self.0.lock().unwrap().push(Closed {
            name: span.name(),
            parent: span.parent().map(|p| p.name()),
            fields,
        });
    }
}

/// Runs `f` with the recorder as this thread's subscriber; returns the
/// spans closed, in order.
fn record(f: impl FnOnce()) -> Vec<Closed> {
    let rec = Recorder::default();
    let subscriber = tracing_subscriber::registry().with(rec.clone());
    tracing::subscriber::with_default(subscriber, f);
    let spans = rec.0.lock().unwrap().clone();
    spans
}

#[derive(Object, Default)]
struct Node {
    kids: Vec<Obj<Node>>,
}

/// A class with destruction hooks, so that the destroy phase has work.
#[derive(Object, Default)]
#[object(lifecycle)]
struct Hooked;

impl Lifecycle for Hooked {
    fn begin_destroy(&mut self, _cx: &coreobject::DestroyCx<'_>) {}
}

/// A rooted tree of `live` nodes and `dead` unreachable ones, half of them
/// with hooks.
fn heap(config: GcConfig, live: usize, dead: usize) -> Heap {
    let heap = Heap::with_config(HeapConfig {
        gc: config,
        ..HeapConfig::default()
    })
    .unwrap();
    let mut heap = heap;
    let root = heap.create(Node::default());
    heap.add_to_root(root).unwrap();
    for _ in 0..live {
        let n = heap.create(Node::default());
        heap[root].kids.push(n);
    }
    for i in 0..dead {
        if i % 2 == 0 {
            heap.create(Node::default());
        } else {
            heap.create(Hooked);
        }
    }
    heap
}

const PHASES: [&str; 4] = ["gc.mark", "gc.sweep", "gc.destroy", "gc.free"];

#[test]
fn a_full_collection_has_a_span_per_phase() {
    let mut heap = heap(GcConfig::default(), 100, 50);
    let mut stats = None;
    let spans = record(|| stats = Some(heap.collect().unwrap()));
    let stats = stats.unwrap();
    assert_eq!(stats.freed, 50);
    let names: Vec<&str> = spans.iter().map(|s| s.name).collect();
    for phase in PHASES {
        let span = spans
            .iter()
            .find(|s| s.name == phase)
            .unwrap_or_else(|| panic!("no {phase} span in {names:?}"));
        assert_eq!(span.parent, Some("gc.slice"), "{span:?}");
    }
    let slices: Vec<&Closed> = spans.iter().filter(|s| s.name == "gc.slice").collect();
    assert_eq!(slices.len(), 1, "{names:?}");
    let slice = slices[0];
    assert_eq!(slice.parent, Some("gc.collect"));
    assert_eq!(slice.field("phase"), Some("mark"));
    assert_eq!(slice.field("completed"), Some("true"));
    assert_eq!(slice.num("freed"), 50);
    assert_eq!(
        slice.num("work"),
        stats.marked + stats.unreachable + stats.freed
    );
    assert!(slice.field("heap").is_some(), "{slice:?}");
    let collect = spans.iter().find(|s| s.name == "gc.collect").unwrap();
    assert_eq!(collect.field("trigger"), Some("Explicit"));
}

#[test]
fn every_incremental_slice_records_its_phase_and_work() {
    let mut heap = heap(GcConfig::default(), 300, 200);
    let spans = record(|| loop {
        if heap.step(16).completed.is_some() {
            break;
        }
    });
    let slices: Vec<&Closed> = spans.iter().filter(|s| s.name == "gc.slice").collect();
    assert!(slices.len() > 10, "{} slices", slices.len());
    for s in &slices {
        assert!(matches!(s.field("phase"), Some("mark" | "purge")), "{s:?}");
        assert!(s.num("work") <= 16 + 64, "{s:?}");
        s.num("freed");
        assert!(s.field("forced").is_some(), "{s:?}");
    }
    assert!(slices.iter().any(|s| s.field("phase") == Some("mark")));
    assert!(slices.iter().any(|s| s.field("phase") == Some("purge")));
    let completed: Vec<_> = slices
        .iter()
        .filter(|s| s.field("completed") == Some("true"))
        .collect();
    assert_eq!(completed.len(), 1);
    assert_eq!(slices.iter().map(|s| s.num("freed")).sum::<usize>(), 200);
    assert!(slices.iter().map(|s| s.num("work")).sum::<usize>() >= 300 + 200);
    for phase in PHASES {
        assert!(
            spans
                .iter()
                .any(|s| s.name == phase && s.parent == Some("gc.slice")),
            "no {phase} span inside a slice"
        );
    }
}

/// With no subscriber, collections still run (the spans are disabled).
#[test]
fn no_subscriber_no_spans() {
    let mut heap = heap(GcConfig::default(), 10, 10);
    assert_eq!(heap.collect().unwrap().freed, 10);
}

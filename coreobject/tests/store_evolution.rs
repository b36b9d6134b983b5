//! A store written by an older version of a class loads by the evolution
//! rules of packages (fields added, removed, renamed; a version with a
//! migration hook), and a store whose records of one class carry two
//! layouts (old records never rewritten, changed ones saved with the new
//! layout) loads whole.
//!
//! The older version is a class of this file whose entry in the store's
//! class table is renamed to the current class's name, as if an older build
//! of the program had written it.

use coreobject::save::{FieldError, FieldReader, MemStore, SaveStore};
use coreobject::{Heap, Obj, Object};

/// Version 1 of `Gauge`, as an older build had it.
#[derive(Object, Default, Debug)]
#[object(save)]
struct GaugeV1 {
    fraction: f32,
    caption: String,
    removed: u64,
    peer: Option<Obj<GaugeV1>>,
}

/// Today's `Gauge`: `fraction` (0..1) became `percent` (migration),
/// `caption` was renamed `label`, `removed` is gone, `max` is new.
#[derive(Object, Default, Debug)]
#[object(save, version = 2, migrate = from_v1)]
struct Gauge {
    percent: f32,
    #[object(rename_from = "caption")]
    label: String,
    #[object(default = hundred)]
    max: u32,
    peer: Option<Obj<Gauge>>,
}

fn hundred() -> u32 {
    100
}

fn from_v1(g: &mut Gauge, old: &FieldReader<'_>) -> Result<(), FieldError> {
    if old.version() == 1 {
        if let Some(f) = old.old::<f32>("fraction")? {
            g.percent = f * 100.0;
        }
    }
    Ok(())
}

/// A store of `n` version-1 gauges in a ring, written by "the old build".
fn old_store(n: usize) -> MemStore {
    let mut heap = Heap::new();
    let mut all = Vec::new();
    for i in 0..n {
        let g = heap
            .spawn(GaugeV1 {
                fraction: i as f32 / 10.0,
                caption: format!("g{i}"),
                removed: 7,
                peer: None,
            })
            .name(format!("G{i}").as_str())
            .root()
            .create()
            .unwrap();
        all.push(g);
    }
    for i in 0..n {
        heap[all[i]].peer = Some(all[(i + 1) % n]);
    }
    let (mut change, _) = heap.capture(None).unwrap();
    for c in &mut change.meta.classes {
        if c.name == "GaugeV1" {
            c.name = "Gauge".into();
        }
    }
    let mut store = MemStore::default();
    store.commit(&change).unwrap();
    store
}

fn find(heap: &Heap, name: &str) -> Obj<Gauge> {
    heap.downcast::<Gauge>(heap.find(None, name).unwrap())
        .unwrap()
}

#[test]
fn an_older_class_version_loads_by_the_evolution_rules() {
    coreobject::save::register::<Gauge>().unwrap();
    let mut store = old_store(4);
    let mut heap = Heap::new();
    let loaded = heap.load_store(&mut store, None).unwrap();
    assert_eq!(loaded.objects.len(), 4);
    for i in 0..4 {
        let g = find(&heap, &format!("G{i}"));
        assert_eq!(heap[g].percent, i as f32 / 10.0 * 100.0);
        assert_eq!(heap[g].label, format!("g{i}"));
        assert_eq!(heap[g].max, 100);
        let peer = heap[g].peer.unwrap();
        assert_eq!(
            heap.name_of(peer).unwrap().to_string(),
            format!("G{}", (i + 1) % 4)
        );
    }
}

#[test]
fn records_of_two_layouts_in_one_store_load_whole() {
    coreobject::save::register::<Gauge>().unwrap();
    let mut store = old_store(4);
    let mut heap = Heap::new();
    heap.load_store(&mut store, None).unwrap();
    // Loaded objects are unchanged: nothing to write.
    assert_eq!(heap.save_store(&mut store).unwrap().written, 0);
    // One changed object is rewritten with today's layout; the others keep
    // version 1 in the store.
    let g1 = find(&heap, "G1");
    heap[g1].max = 5;
    let s = heap.save_store(&mut store).unwrap();
    assert_eq!((s.written, s.created, s.deleted), (1, 0, 0));
    let meta = store.meta().unwrap().unwrap();
    let versions: Vec<u32> = meta
        .classes
        .iter()
        .filter(|c| c.name == "Gauge")
        .map(|c| c.version)
        .collect();
    assert_eq!(versions, [1, 2]);

    let mut again = Heap::new();
    again.load_store(&mut store, None).unwrap();
    for i in 0..4 {
        let g = find(&again, &format!("G{i}"));
        // The migration ran for the old records only: percent is not
        // scaled twice for the rewritten one.
        assert_eq!(again[g].percent, i as f32 / 10.0 * 100.0, "G{i}");
        assert_eq!(again[g].max, if i == 1 { 5 } else { 100 });
        assert_eq!(
            again.persistent_id(g),
            heap.persistent_id(find(&heap, &format!("G{i}")))
        );
    }
}

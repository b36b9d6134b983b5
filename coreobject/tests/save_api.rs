//! Saving and loading: the rules at the edges (imports, weak handles,
//! resolvers, handles inside containers, refusals).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

use coreobject::save::{LoadError, LoadOptions, SaveError, SaveOptions, Selection, WeakOutside};
use coreobject::{AnyObj, Heap, Obj, Object, ObjectEvent, Weak};

#[derive(Object, Default, Debug)]
#[object(save)]
struct Room {
    doors: HashMap<u32, Obj<Room>>,
    nested: Option<Vec<(Obj<Room>, Weak<Room>)>>,
    seen: Option<Weak<Room>>,
    any: Vec<AnyObj>,
}

#[derive(Object, Default)]
struct Unsaveable;

#[derive(Object, Default)]
#[object(save)]
struct Lamp {
    on: bool,
}

fn bytes_of(heap: &Heap, sel: Selection) -> Vec<u8> {
    let mut b = Vec::new();
    heap.save(sel, &mut b).unwrap();
    b
}

#[test]
fn handles_outside_a_save_are_refused() {
    let heap = Heap::new();
    let r = heap.create(Room::default());
    let err = serde_json::to_string(&r).unwrap_err().to_string();
    assert!(err.contains("Heap::save"), "{err}");
    let err = serde_json::from_str::<Obj<Room>>("1")
        .unwrap_err()
        .to_string();
    assert!(err.contains("Heap::load"), "{err}");
}

#[test]
fn handles_in_containers_are_remapped() {
    let mut heap = Heap::new();
    let a = heap.create(Room::default());
    let b = heap.create(Room::default());
    heap[a].doors.insert(7, b);
    heap[a].nested = Some(vec![(a, b.downgrade())]);
    heap[b].any = vec![a.any(), b.any()];
    let bytes = bytes_of(&heap, Selection::set([a, b]));
    let mut other = Heap::new();
    other.create(Lamp::default()); // shift the indices
    let l = other.load(&bytes[..]).unwrap();
    let (a2, b2) = (
        other.downcast::<Room>(l.objects[0]).unwrap(),
        other.downcast::<Room>(l.objects[1]).unwrap(),
    );
    assert_ne!(a2.index(), a.index());
    assert_eq!(other[a2].doors[&7], b2);
    assert_eq!(other[a2].nested, Some(vec![(a2, b2.downgrade())]));
    assert_eq!(other[b2].any, vec![a2.any(), b2.any()]);
}

#[test]
fn outside_objects_are_imports_by_path() {
    let mut heap = Heap::new();
    let hall = heap
        .spawn(Room::default())
        .name("Hall")
        .root()
        .create()
        .unwrap();
    let kitchen = heap
        .spawn(Room::default())
        .name("Kitchen")
        .outer(hall)
        .create()
        .unwrap();
    let attic = heap.spawn(Room::default()).name("Attic").create().unwrap();
    heap.add_to_root(attic).unwrap();
    heap[kitchen].doors.insert(1, hall);
    heap[kitchen].seen = Some(attic.downgrade());
    let mut b = Vec::new();
    let saved = heap.save(Selection::subtree(kitchen), &mut b).unwrap();
    assert_eq!(saved.imports, [hall.any(), attic.any()]);

    // A weak handle outside the save can be written as none instead.
    let opts = SaveOptions::default().with_weak_outside(WeakOutside::None);
    let mut b2 = Vec::new();
    let saved = heap
        .save_with(Selection::subtree(kitchen), &opts, &mut b2)
        .unwrap();
    assert_eq!(saved.imports, [hall.any()]);

    // Into a heap with a Hall but no Attic: the attic is unresolved, listed,
    // and its handle never resolves. The kitchen is found under the hall.
    let mut other = Heap::new();
    let hall2 = other
        .spawn(Room::default())
        .name("Hall")
        .root()
        .create()
        .unwrap();
    let l = other.load(&b[..]).unwrap();
    assert_eq!(l.imports, [Some(hall2.any()), None]);
    assert_eq!(l.unresolved.len(), 1);
    assert_eq!(l.unresolved[0].path, "Attic");
    assert_eq!(l.unresolved[0].class, "Room");
    let k2 = other.downcast::<Room>(l.objects[0]).unwrap();
    assert_eq!(other[k2].doors[&1], hall2);
    assert!(other.get(other[k2].seen.unwrap()).is_none());
    assert_eq!(other.find_path("Hall.Kitchen"), Some(k2.any()));

    // A resolver finds what the path does not (and a wrong class is refused).
    let mut third = Heap::new();
    third
        .spawn(Room::default())
        .name("Hall")
        .root()
        .create()
        .unwrap();
    let spare = third
        .spawn(Room::default())
        .name("Spare")
        .root()
        .create()
        .unwrap();
    let lamp = third.spawn(Lamp::default()).root().create().unwrap();
    let asked = std::cell::Cell::new(0);
    let mut opts = LoadOptions::with_resolver(|p| {
        asked.set(asked.get() + 1);
        assert_eq!(p.path, "Attic");
        Some(spare.any())
    });
    let l = third.load_with(&b[..], &mut opts).unwrap();
    drop(opts);
    assert_eq!(asked.get(), 1);
    assert!(l.unresolved.is_empty());
    assert_eq!(l.imports[1], Some(spare.any()));
    let mut fourth = Heap::new();
    let mut opts = LoadOptions::with_resolver(|_| Some(lamp.any()));
    let l = fourth.load_with(&b[..], &mut opts).unwrap();
    assert_eq!(l.unresolved.len(), 2, "a Lamp is not a Room; no Hall here");
}

#[test]
fn unnamed_outside_objects_and_unsaveable_classes_are_refused() {
    let mut heap = Heap::new();
    let a = heap.create(Room::default());
    let b = heap.create(Room::default());
    heap[a].doors.insert(0, b);
    let err = heap.save(Selection::set([a]), Vec::new()).unwrap_err();
    assert!(
        matches!(err, SaveError::UnnamedImport { object, .. } if object == b.any()),
        "{err}"
    );
    let u = heap.create(Unsaveable);
    let err = heap.save(Selection::all(), Vec::new()).unwrap_err();
    assert!(
        matches!(err, SaveError::NotSaveable { class: "Unsaveable", object } if object == u.any())
    );
    heap.collect().unwrap();
    let err = heap.save(Selection::set([a]), Vec::new()).unwrap_err();
    assert!(matches!(err, SaveError::NotAlive(h) if h == a.any()));
}

#[test]
fn restore_needs_a_whole_heap() {
    let heap = Heap::new();
    let a = heap.spawn(Lamp::default()).root().create().unwrap();
    let err = Heap::restore(&bytes_of(&heap, Selection::set([a]))[..]).unwrap_err();
    assert!(matches!(err, LoadError::NotRestorable(_)), "{err}");
}

#[test]
fn create_listeners_hear_loaded_objects_after_the_graph_is_whole() {
    let heap = Heap::new();
    let a = heap.spawn(Lamp { on: true }).root().create().unwrap();
    let bytes = bytes_of(&heap, Selection::set([a]));
    let mut other = Heap::new();
    let heard = Arc::new(AtomicUsize::new(0));
    let h = heard.clone();
    other.on_create(move |e: &ObjectEvent| {
        assert_eq!(e.class.name(), "Lamp");
        h.fetch_add(1, SeqCst);
    });
    other.load(&bytes[..]).unwrap();
    assert_eq!(heard.load(SeqCst), 1);
}

/// A package whose tables are edited as JSON.
fn edited(f: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
    let mut heap = Heap::new();
    let hall = heap
        .spawn(Room::default())
        .name("Hall")
        .root()
        .create()
        .unwrap();
    let attic = heap
        .spawn(Room::default())
        .name("Attic")
        .outer(hall)
        .create()
        .unwrap();
    let k = heap
        .spawn(Room::default())
        .name("K")
        .outer(hall)
        .create()
        .unwrap();
    heap[k].doors.insert(0, attic);
    let mut b = Vec::new();
    heap.save_with(Selection::set([k]), &SaveOptions::json(), &mut b)
        .unwrap();
    let mut v: serde_json::Value = serde_json::from_slice(&b).unwrap();
    f(&mut v);
    serde_json::to_vec(&v).unwrap()
}

#[test]
fn cycles_and_bad_indices_are_errors() {
    let mut heap = Heap::new();
    // Imports: 0 is Hall, 1 is Hall.Attic; make Hall's outer Attic.
    let b = edited(|v| v["imports"][0]["outer"] = (-2).into());
    let err = heap.load(&b[..]).unwrap_err();
    assert!(matches!(err, LoadError::ImportCycle { .. }), "{err}");
    let b = edited(|v| v["exports"][0]["outer"] = 1.into());
    let err = heap.load(&b[..]).unwrap_err();
    assert!(matches!(err, LoadError::OuterCycle { export: 0 }), "{err}");
    let b = edited(|v| v["exports"][0]["outer"] = (-9).into());
    let err = heap.load(&b[..]).unwrap_err();
    assert!(err.to_string().contains("out of range"), "{err}");
    assert!(heap.is_empty());
}

#[derive(
    coreobject::Trace, serde::Serialize, serde::Deserialize, Debug, PartialEq, Clone, Copy,
)]
enum Kind {
    Wood,
    Iron,
}

#[derive(Object)]
#[object(save)]
struct Gate {
    kind: Kind,
    width: u32,
}

#[test]
fn a_missing_field_without_default_is_an_error() {
    let heap = Heap::new();
    let g = heap
        .spawn(Gate {
            kind: Kind::Iron,
            width: 3,
        })
        .root()
        .create()
        .unwrap();
    let mut b = Vec::new();
    heap.save_with(Selection::set([g]), &SaveOptions::json(), &mut b)
        .unwrap();
    let mut other = Heap::new();
    let l = other.load(&b[..]).unwrap();
    let g2 = other.downcast::<Gate>(l.objects[0]).unwrap();
    assert_eq!((other[g2].kind, other[g2].width), (Kind::Iron, 3));
    // An older file without `kind` (the first field): no Default to fall back on.
    let mut v: serde_json::Value = serde_json::from_slice(&b).unwrap();
    v["classes"][0]["fields"].as_array_mut().unwrap().remove(0);
    v["exports"][0]["fields"].as_array_mut().unwrap().remove(0);
    let err = other
        .load(&serde_json::to_vec(&v).unwrap()[..])
        .unwrap_err();
    assert!(
        err.to_string().contains("`kind`") && err.to_string().contains("no Default"),
        "{err}"
    );
    assert_eq!(other.len(), 1);
}

/// Regression: objects inside an object marked as garbage were saved with
/// no outer, so two such inners of one name clashed on load.
#[test]
fn inners_of_dead_outers_are_left_out_of_a_whole_heap_save() {
    let heap = Heap::new();
    let keep = heap
        .spawn(Lamp::default())
        .name("Keep")
        .root()
        .create()
        .unwrap();
    for outer in ["A", "B"] {
        let o = heap
            .spawn(Lamp::default())
            .name(outer)
            .root()
            .create()
            .unwrap();
        heap.spawn(Lamp { on: true })
            .name("X")
            .outer(o)
            .create()
            .unwrap();
        heap.mark_as_garbage(o).unwrap();
    }
    let mut b = Vec::new();
    let saved = heap.save(Selection::all(), &mut b).unwrap();
    assert_eq!(saved.exports, [keep.any()]);
    let mut other = Heap::new();
    other.load(&b[..]).unwrap();
    assert_eq!(other.len(), 1);
    let copy = Heap::restore(&b[..]).unwrap();
    assert_eq!(copy.len(), 1);
}

#[test]
fn selections_from_handles_and_lists() {
    let heap = Heap::new();
    let a = heap
        .spawn(Lamp::default())
        .name("A")
        .root()
        .create()
        .unwrap();
    let b = heap
        .spawn(Lamp::default())
        .name("B")
        .outer(a)
        .create()
        .unwrap();
    let c = heap
        .spawn(Lamp::default())
        .name("C")
        .root()
        .create()
        .unwrap();
    let saved = heap.save(a, Vec::new()).unwrap();
    assert_eq!(saved.exports, [a.any(), b.any()]);
    let saved = heap.save(vec![c.any(), a.any()], Vec::new()).unwrap();
    assert_eq!(saved.exports, [a.any(), c.any()]);
    let saved = heap.save(&[b.any()][..], Vec::new()).unwrap();
    assert_eq!(
        (saved.exports, saved.imports),
        (vec![b.any()], vec![a.any()])
    );
}

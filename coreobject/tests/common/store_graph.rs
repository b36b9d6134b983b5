//! What the store tests share: two saveable classes (one interior-mutable)
#![allow(dead_code)] // each test file that includes this uses a part of it
//! and the graph a save of a heap must give back, by persistent id.

use std::collections::BTreeMap;
use std::sync::Mutex;

use coreobject::save::{PersistentId, SaveStore};
use coreobject::{AnyObj, Heap, Obj, Object, Weak};

#[derive(Object, Default, Debug)]
#[object(save)]
pub struct Node {
    pub value: i64,
    pub label: String,
    pub next: Vec<Obj<Node>>,
    pub weak: Option<Weak<Node>>,
    pub cell: Option<Obj<Cell>>,
}

#[derive(Object, Default, Debug)]
#[object(save, interior_mut = true)]
pub struct Cell {
    pub v: Mutex<i64>,
}

/// An object as the store must give it back: everything by persistent id.
#[derive(Clone, Debug, PartialEq)]
pub enum Shape {
    Node {
        value: i64,
        label: String,
        next: Vec<Option<PersistentId>>,
        weak: Option<Option<PersistentId>>,
        cell: Option<Option<PersistentId>>,
    },
    Cell(i64),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Seen {
    pub shape: Shape,
    pub name: Option<String>,
    pub outer: Option<PersistentId>,
    pub rooted: bool,
}

/// Whether a save takes `h`: alive, and so is every object on its outer
/// chain (objects inside a dead object go with it).
pub fn saved(heap: &Heap, h: AnyObj) -> bool {
    let mut cur = Some(h);
    while let Some(c) = cur {
        if !heap.contains(c) {
            return false;
        }
        cur = heap.outer_of(c);
    }
    true
}

/// The graph of what a save of `heap` takes, by persistent id (every such
/// object must have one; a handle to an object not saved reads as none).
pub fn graph(heap: &Heap) -> BTreeMap<PersistentId, Seen> {
    let pid = |h: AnyObj| heap.persistent_id(h).filter(|_| saved(heap, h));
    let mut out = BTreeMap::new();
    for o in heap.iter().filter(|o| saved(heap, o.id())) {
        let id = pid(o.id()).unwrap_or_else(|| panic!("{:?} has no persistent id", o.id()));
        let shape = if let Some(n) = o.downcast::<Node>() {
            Shape::Node {
                value: n.value,
                label: n.label.clone(),
                next: n.next.iter().map(|h| pid(h.any())).collect(),
                weak: n.weak.map(|w| pid(w.any())),
                cell: n.cell.map(|c| pid(c.any())),
            }
        } else if let Some(c) = o.downcast::<Cell>() {
            Shape::Cell(*c.v.lock().unwrap())
        } else {
            panic!("unknown class");
        };
        let seen = Seen {
            shape,
            name: heap.name_of(o.id()).map(|n| n.to_string()),
            outer: heap.outer_of(o.id()).map(|h| pid(h).expect("outer saved")),
            rooted: o.is_rooted(),
        };
        assert!(out.insert(id, seen).is_none(), "id {id:?} twice");
    }
    out
}

pub fn pick(list: &[AnyObj], k: u8, heap: &Heap) -> Option<AnyObj> {
    let live: Vec<AnyObj> = list.iter().copied().filter(|&h| heap.contains(h)).collect();
    (!live.is_empty()).then(|| live[k as usize % live.len()])
}

pub fn check_store(heap: &Heap, store: &mut dyn SaveStore) {
    let want = graph(heap);
    let ids: Vec<PersistentId> = store
        .read_all()
        .unwrap()
        .into_iter()
        .map(|(k, _)| PersistentId::from_bits(k).unwrap())
        .collect();
    assert_eq!(ids, want.keys().copied().collect::<Vec<_>>(), "store ids");
    let mut copy = Heap::new();
    let loaded = copy.load_store(store, None).unwrap();
    assert_eq!(loaded.objects.len(), want.len());
    assert_eq!(graph(&copy), want, "loaded graph");
}

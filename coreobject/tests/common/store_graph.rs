//! What the store tests share: two saveable classes (one interior-mutable)
#![allow(dead_code)] // each test file that includes this uses a part of it
//! and the graph a save of a heap must give back, by persistent id.

use std::collections::BTreeMap;
use std::sync::Mutex;

use coreobject::save::{PersistentId, SaveStore};
use coreobject::{AnyObj, Heap, Obj, Object, Weak};
use proptest::prelude::*;

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

/// A change to the graph that both store models make between saves.
#[derive(Clone, Debug)]
pub enum Mutation {
    Create {
        outer: Option<u8>,
        named: bool,
        rooted: bool,
        value: i64,
    },
    CreateCell {
        outer: Option<u8>,
        v: i64,
    },
    Set {
        who: u8,
        value: i64,
    },
    Link {
        who: u8,
        to: u8,
        weak: bool,
    },
    Unlink {
        who: u8,
    },
    /// Behind `&self`: counted as changed by its class.
    Poke {
        who: u8,
        v: i64,
    },
    Root {
        who: u8,
        on: bool,
    },
    Garbage {
        who: u8,
    },
}

pub fn mutation() -> impl Strategy<Value = Mutation> {
    use Mutation::*;
    prop_oneof![
        4 => (proptest::option::of(any::<u8>()), any::<bool>(), proptest::bool::weighted(0.4), any::<i64>())
            .prop_map(|(outer, named, rooted, value)| Create { outer, named, rooted, value }),
        1 => (proptest::option::of(any::<u8>()), any::<i64>()).prop_map(|(outer, v)| CreateCell { outer, v }),
        4 => (any::<u8>(), any::<i64>()).prop_map(|(who, value)| Set { who, value }),
        3 => (any::<u8>(), any::<u8>(), any::<bool>()).prop_map(|(who, to, weak)| Link { who, to, weak }),
        1 => any::<u8>().prop_map(|who| Unlink { who }),
        1 => (any::<u8>(), any::<i64>()).prop_map(|(who, v)| Poke { who, v }),
        1 => (any::<u8>(), any::<bool>()).prop_map(|(who, on)| Root { who, on }),
        1 => any::<u8>().prop_map(|who| Garbage { who }),
    ]
}

/// Applies `m` (the `k`th op of a run) to `heap`; `all` lists every object
/// the run created.
pub fn apply(heap: &mut Heap, all: &mut Vec<AnyObj>, k: usize, m: &Mutation) {
    let node = |heap: &Heap, all: &[AnyObj], who: u8| {
        pick(all, who, heap).and_then(|h| heap.downcast::<Node>(h))
    };
    match *m {
        Mutation::Create {
            outer,
            named,
            rooted,
            value,
        } => {
            let outer = outer.and_then(|o| pick(all, o, heap));
            let mut b = heap.spawn(Node {
                value,
                label: format!("n{k}"),
                ..Node::default()
            });
            if let Some(o) = outer {
                b = b.outer(o);
            }
            if named {
                b = b.name(format!("N{k}").as_str());
            }
            if rooted {
                b = b.root();
            }
            all.push(b.create().unwrap().any());
        }
        Mutation::CreateCell { outer, v } => {
            let outer = outer.and_then(|o| pick(all, o, heap));
            let mut b = heap.spawn(Cell { v: Mutex::new(v) }).root();
            if let Some(o) = outer {
                b = b.outer(o);
            }
            let c = b.create().unwrap();
            all.push(c.any());
            // Someone holds it.
            if let Some(n) = node(heap, all, k as u8) {
                heap[n].cell = Some(c);
            }
        }
        Mutation::Set { who, value } => {
            if let Some(n) = node(heap, all, who) {
                heap[n].value = value;
            }
        }
        Mutation::Link { who, to, weak } => {
            if let (Some(n), Some(t)) = (node(heap, all, who), node(heap, all, to)) {
                if weak {
                    heap[n].weak = Some(t.downgrade());
                } else {
                    heap[n].next.push(t);
                }
            }
        }
        Mutation::Unlink { who } => {
            if let Some(n) = node(heap, all, who) {
                heap[n].next.clear();
            }
        }
        Mutation::Poke { who, v } => {
            if let Some(c) = pick(all, who, heap).and_then(|h| heap.downcast::<Cell>(h)) {
                *heap.get(c).unwrap().v.lock().unwrap() = v;
            }
        }
        Mutation::Root { who, on } => {
            if let Some(h) = pick(all, who, heap) {
                if on {
                    heap.add_to_root(h).unwrap();
                } else {
                    heap.remove_from_root(h).unwrap();
                }
            }
        }
        Mutation::Garbage { who } => {
            if let Some(h) = pick(all, who, heap) {
                heap.mark_as_garbage(h).unwrap();
            }
        }
    }
}

/// `count` objects of value `0..count`, each a root.
pub fn rooted_nodes(heap: &mut Heap, count: i64) -> Vec<Obj<Node>> {
    (0..count)
        .map(|i| {
            heap.spawn(Node {
                value: i,
                ..Node::default()
            })
            .root()
            .create()
            .unwrap()
        })
        .collect()
}

/// A collection between captures or saves.
#[derive(Clone, Copy, Debug)]
pub enum Gc {
    Major,
    Minor,
    /// Two slices of a cycle, with captures or saves allowed between them.
    Sliced,
}

pub fn gc() -> impl Strategy<Value = Gc> {
    prop_oneof![Just(Gc::Major), Just(Gc::Minor), Just(Gc::Sliced)]
}

pub fn collect(heap: &mut Heap, gc: Gc) {
    match gc {
        Gc::Major => {
            heap.collect().unwrap();
        }
        Gc::Minor => {
            heap.collect_minor().unwrap();
        }
        Gc::Sliced => {
            heap.step(3);
            heap.step(3);
        }
    }
}

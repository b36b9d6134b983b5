//! `#[derive(Object)]` and `#[derive(Trace)]`: reflection and tracing.
//!
//! Checks the class table the derive registers (class name, each field's
//! name, `type_name` as written and `RefKind`) for many field types: handles,
//! `Option`, `Vec`, arrays, `Box`, `Arc`, tuples, `HashMap`/`BTreeMap` (keys
//! and values), `HashSet`/`BTreeSet`, `VecDeque`, nested `#[derive(Trace)]`
//! structs, enums with data, generic `#[derive(Trace)]` structs, tuple
//! structs, raw identifiers, weak and `#[object(skip)]` fields. Every field is
//! then exercised by a collection: an object reachable only through a traced
//! field survives, one reachable only through a weak or skipped field does
//! not. Also `#[object(name = "…")]`, `#[object(trace_with = f)]` (a custom
//! `AddReferencedObjects`, on objects and on nested structs), objects that
//! are enums, `Class::needs_trace`, and class default objects, which exist
//! only for types implementing `Default`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use coreobject::{AnyObj, Error, FieldInfo, Heap, Obj, Object, RefKind, Trace, Visitor, Weak};

/// The target of every reference below.
#[derive(Object, Default)]
struct Leaf {
    n: u32,
}

#[derive(Trace, Default)]
struct Slots {
    first: Option<Obj<Leaf>>,
    rest: Vec<Obj<Leaf>>,
    count: u32,
}

#[derive(Trace, Default)]
enum Order {
    #[default]
    Idle,
    Attack(Obj<Leaf>, u32),
    Patrol {
        points: Vec<Obj<Leaf>>,
        #[object(skip)]
        ignored: Option<Obj<Leaf>>,
    },
}

#[derive(Trace)]
struct Pair<A, B> {
    a: A,
    b: Vec<B>,
}

#[derive(Object)]
#[allow(clippy::box_collection)] // a boxed container is one of the shapes under test
struct Everything {
    opt: Option<Obj<Leaf>>,
    vec: Vec<Obj<Leaf>>,
    arr: [Option<Obj<Leaf>>; 3],
    boxed: Box<Obj<Leaf>>,
    boxed_vec: Box<Vec<Option<Obj<Leaf>>>>,
    hmap: HashMap<String, Obj<Leaf>>,
    hkeys: HashMap<Obj<Leaf>, u32>,
    bmap: BTreeMap<u32, Obj<Leaf>>,
    hset: HashSet<Obj<Leaf>>,
    bset: BTreeSet<Obj<Leaf>>,
    deque: VecDeque<Obj<Leaf>>,
    nested: Slots,
    order: Order,
    pair: Pair<Obj<Leaf>, Option<Obj<Leaf>>>,
    plain_pair: Pair<u32, String>,
    tuple: (u32, Option<Obj<Leaf>>),
    shared: Option<Arc<Obj<Leaf>>>,
    any: Option<AnyObj>,
    weak: Option<Weak<Leaf>>,
    weaks: Vec<Weak<Leaf>>,
    #[object(skip)]
    skipped: Vec<Obj<Leaf>>,
    #[object(skip)]
    lock: Mutex<u8>,
    r#type: &'static str,
    count: u64,
}

fn fields_of(class: &coreobject::Class) -> Vec<(&'static str, &'static str, RefKind)> {
    class
        .fields()
        .iter()
        .map(|f: &FieldInfo| (f.name, f.type_name, f.kind))
        .collect()
}

#[test]
fn reflection_names_types_and_kinds() {
    use RefKind::*;
    let class = Everything::class();
    assert_eq!(class.name(), "Everything");
    for f in class.fields() {
        println!("{:<12} {:<10?} {}", f.name, f.kind, f.type_name);
    }
    assert_eq!(
        fields_of(class),
        [
            ("opt", "Option<Obj<Leaf>>", Strong),
            ("vec", "Vec<Obj<Leaf>>", Container),
            ("arr", "[Option<Obj<Leaf>>; 3]", Container),
            ("boxed", "Box<Obj<Leaf>>", Strong),
            ("boxed_vec", "Box<Vec<Option<Obj<Leaf>>>>", Container),
            ("hmap", "HashMap<String, Obj<Leaf>>", Container),
            ("hkeys", "HashMap<Obj<Leaf>, u32>", Container),
            ("bmap", "BTreeMap<u32, Obj<Leaf>>", Container),
            ("hset", "HashSet<Obj<Leaf>>", Container),
            ("bset", "BTreeSet<Obj<Leaf>>", Container),
            ("deque", "VecDeque<Obj<Leaf>>", Container),
            ("nested", "Slots", Struct),
            ("order", "Order", Struct),
            ("pair", "Pair<Obj<Leaf>, Option<Obj<Leaf>>>", Struct),
            ("plain_pair", "Pair<u32, String>", Plain),
            ("tuple", "(u32, Option<Obj<Leaf>>)", Struct),
            ("shared", "Option<Arc<Obj<Leaf>>>", Strong),
            ("any", "Option<AnyObj>", Strong),
            ("weak", "Option<Weak<Leaf>>", Weak),
            ("weaks", "Vec<Weak<Leaf>>", Container),
            ("skipped", "Vec<Obj<Leaf>>", Skipped),
            ("lock", "Mutex<u8>", Skipped),
            ("type", "&'static str", Plain),
            ("count", "u64", Plain),
        ]
    );
    assert!(class.needs_trace());
    assert!(
        !class.has_default(),
        "`Obj` has no default, so neither has `Everything`"
    );
    assert!(!Leaf::class().needs_trace(), "plain data only");
}

#[test]
fn more_type_names() {
    #[derive(Object)]
    struct Odd {
        #[object(skip)]
        f: fn(u32) -> u32,
        nested_arr: [[Obj<Leaf>; 2]; 2],
        slice: Option<&'static [u8]>,
        boxed_slice: Box<[Obj<Leaf>]>,
        path: std::collections::VecDeque<Weak<Leaf>>,
        #[object(skip)]
        callback: Box<dyn Fn(u32) -> u32 + Send + Sync>,
    }
    let _ = |o: Odd| {
        (
            o.f,
            o.nested_arr,
            o.slice,
            o.boxed_slice,
            o.path,
            (o.callback)(1),
        )
    };
    assert_eq!(
        fields_of(Odd::class()),
        [
            ("f", "fn(u32) -> u32", RefKind::Skipped),
            ("nested_arr", "[[Obj<Leaf>; 2]; 2]", RefKind::Container),
            ("slice", "Option<&'static [u8]>", RefKind::Plain),
            ("boxed_slice", "Box<[Obj<Leaf>]>", RefKind::Container),
            (
                "path",
                "std::collections::VecDeque<Weak<Leaf>>",
                RefKind::Container
            ),
            (
                "callback",
                "Box<dyn Fn(u32) -> u32 + Send + Sync>",
                RefKind::Skipped
            ),
        ]
    );
    assert!(!Odd::class().has_default());
}

type Named = Vec<(&'static str, Obj<Leaf>)>;

/// Makes an `Everything` whose every field holds its own fresh leaves.
/// Returns it with the leaves that must survive and those that must not.
fn populate(heap: &Heap) -> (Everything, Named, Named) {
    let mut keep = Vec::new();
    let mut lose = Vec::new();
    let mut leaf = |heap: &Heap, what: &'static str, survives: bool| {
        let l = heap.create(Leaf::default());
        if survives {
            keep.push((what, l));
        } else {
            lose.push((what, l));
        }
        l
    };
    let v = Everything {
        opt: Some(leaf(heap, "opt", true)),
        vec: vec![leaf(heap, "vec[0]", true), leaf(heap, "vec[1]", true)],
        arr: [
            Some(leaf(heap, "arr[0]", true)),
            None,
            Some(leaf(heap, "arr[2]", true)),
        ],
        boxed: Box::new(leaf(heap, "boxed", true)),
        boxed_vec: Box::new(vec![None, Some(leaf(heap, "boxed_vec", true))]),
        hmap: HashMap::from([("a".into(), leaf(heap, "hmap", true))]),
        hkeys: HashMap::from([(leaf(heap, "hkeys", true), 1)]),
        bmap: BTreeMap::from([(3, leaf(heap, "bmap", true))]),
        hset: HashSet::from([leaf(heap, "hset", true)]),
        bset: BTreeSet::from([leaf(heap, "bset", true)]),
        deque: VecDeque::from([leaf(heap, "deque", true)]),
        nested: Slots {
            first: Some(leaf(heap, "nested.first", true)),
            rest: vec![leaf(heap, "nested.rest", true)],
            count: 2,
        },
        order: Order::Patrol {
            points: vec![leaf(heap, "order.points", true)],
            ignored: Some(leaf(heap, "order.ignored", false)),
        },
        pair: Pair {
            a: leaf(heap, "pair.a", true),
            b: vec![None, Some(leaf(heap, "pair.b", true))],
        },
        plain_pair: Pair {
            a: 1,
            b: vec!["x".into()],
        },
        tuple: (1, Some(leaf(heap, "tuple.1", true))),
        shared: Some(Arc::new(leaf(heap, "shared", true))),
        any: Some(leaf(heap, "any", true).any()),
        weak: Some(leaf(heap, "weak", false).downgrade()),
        weaks: vec![leaf(heap, "weaks", false).downgrade()],
        skipped: vec![leaf(heap, "skipped", false)],
        lock: Mutex::new(0),
        r#type: "t",
        count: 0,
    };
    (v, keep, lose)
}

#[test]
fn every_field_kind_is_traced_and_only_those() {
    let mut heap = Heap::new();
    let (v, keep, lose) = populate(&heap);
    let e = heap.create(v);
    heap.add_to_root(e).unwrap();
    let s = heap.collect().unwrap();
    for (what, l) in &keep {
        assert!(heap.get(*l).is_some(), "{what} should be traced");
    }
    for (what, l) in &lose {
        assert!(heap.get(*l).is_none(), "{what} should not be traced");
    }
    assert_eq!((s.marked, s.freed), (keep.len() + 1, lose.len()));
    // The weak handles went stale with their objects.
    let v = &heap[e];
    assert!(heap.get(v.weak.unwrap()).is_none());
    assert!(heap.get(v.weaks[0]).is_none());
    let _ = (v.lock.lock().unwrap(), &v.skipped, v.r#type, v.count);

    // Switching the enum's variant switches what it keeps alive.
    let attack = heap.create(Leaf { n: 7 });
    heap[e].order = Order::Attack(attack, 3);
    heap.collect().unwrap();
    assert_eq!(heap[attack].n, 7);
    let (_, order_point) = keep.iter().find(|(w, _)| *w == "order.points").unwrap();
    assert!(heap.get(*order_point).is_none());
    heap[e].order = Order::Idle;
    heap.collect().unwrap();
    assert!(heap.get(attack).is_none());
}

#[derive(Object)]
#[object(name = "Weapon")]
struct Gun(Option<Obj<Leaf>>, u32, Weak<Leaf>);

#[test]
fn tuple_structs_and_renamed_classes() {
    assert_eq!(Gun::class().name(), "Weapon");
    assert_eq!(
        fields_of(Gun::class()),
        [
            ("0", "Option<Obj<Leaf>>", RefKind::Strong),
            ("1", "u32", RefKind::Plain),
            ("2", "Weak<Leaf>", RefKind::Weak),
        ]
    );
    let mut heap = Heap::new();
    let (a, b) = (heap.create(Leaf::default()), heap.create(Leaf::default()));
    let g = heap.create(Gun(Some(a), 3, b.downgrade()));
    heap.add_to_root(g).unwrap();
    assert_eq!(
        heap.display_name(g).unwrap(),
        format!("Weapon_{}", g.index())
    );
    heap.collect().unwrap();
    assert!(heap.get(a).is_some() && heap.get(b).is_none());
    assert_eq!(heap[g].1, 3);
}

/// An object that is an enum: the current variant's fields are traced.
#[derive(Object)]
enum Slot {
    Empty,
    One(Obj<Leaf>),
    Many {
        items: Vec<Obj<Leaf>>,
        label: String,
    },
}

#[test]
fn objects_can_be_enums() {
    assert_eq!(
        fields_of(Slot::class()),
        [
            ("One.0", "Obj<Leaf>", RefKind::Strong),
            ("Many.items", "Vec<Obj<Leaf>>", RefKind::Container),
            ("Many.label", "String", RefKind::Plain),
        ]
    );
    let mut heap = Heap::new();
    let (a, b, c) = (
        heap.create(Leaf::default()),
        heap.create(Leaf::default()),
        heap.create(Leaf::default()),
    );
    let s = heap.create(Slot::Many {
        items: vec![b, c],
        label: "x".into(),
    });
    heap.add_to_root(s).unwrap();
    assert_eq!(heap.collect().unwrap().freed, 1);
    assert!(heap.get(a).is_none() && heap.get(c).is_some());
    heap[s] = Slot::One(b);
    assert_eq!(heap.collect().unwrap().freed, 1);
    assert!(heap.get(b).is_some() && heap.get(c).is_none());
    heap[s] = Slot::Empty;
    assert_eq!(heap.collect().unwrap().freed, 1);
    assert!(matches!(heap[s], Slot::Empty));
}

/// A cache the derive cannot see into (a `Mutex`), reported by hand.
#[derive(Object, Default)]
#[object(trace_with = report_cache)]
struct Cache {
    direct: Option<Obj<Leaf>>,
    #[object(skip)]
    entries: Mutex<Vec<AnyObj>>,
}

fn report_cache<V: Visitor + ?Sized>(this: &Cache, v: &mut V) {
    for h in this.entries.lock().unwrap().iter() {
        v.visit(*h);
    }
}

/// The same on a nested struct, with no handle fields at all.
#[derive(Trace, Default)]
#[object(trace_with = Self::report)]
struct Hidden {
    #[object(skip)]
    bits: Vec<u64>,
}

impl Hidden {
    fn report<V: Visitor + ?Sized>(&self, v: &mut V) {
        for b in &self.bits {
            if let Some(h) = AnyObj::from_bits(*b) {
                v.visit(h);
            }
        }
    }
}

#[derive(Object, Default)]
struct HasHidden {
    hidden: Hidden,
}

#[test]
fn trace_with_adds_hand_written_references() {
    assert!(Cache::class().needs_trace());
    assert!(HasHidden::class().needs_trace());
    assert_eq!(
        fields_of(HasHidden::class()),
        [("hidden", "Hidden", RefKind::Struct)]
    );
    let mut heap = Heap::new();
    let (a, b, c, d) = (
        heap.create(Leaf { n: 1 }),
        heap.create(Leaf { n: 2 }),
        heap.create(Leaf { n: 3 }),
        heap.create(Leaf { n: 4 }),
    );
    let cache = heap.create(Cache {
        direct: Some(a),
        entries: Mutex::new(vec![b.any()]),
    });
    let hh = heap.create(HasHidden {
        hidden: Hidden {
            bits: vec![c.any().to_bits()],
        },
    });
    heap.add_to_root(cache).unwrap();
    heap.add_to_root(hh).unwrap();
    let s = heap.collect().unwrap();
    assert_eq!((s.marked, s.freed), (5, 1));
    assert!(heap.get(a).is_some(), "fields are still traced");
    assert!(heap.get(b).is_some(), "and the hand-written references too");
    assert!(heap.get(c).is_some());
    assert!(heap.get(d).is_none());
    heap[cache].entries.lock().unwrap().clear();
    heap.collect().unwrap();
    assert!(heap.get(b).is_none());
}

#[derive(Object)]
struct NoDefault {
    leaf: Obj<Leaf>,
}

#[derive(Object)]
#[object(name = "Rifle")]
struct WithDefault {
    ammo: u32,
    sight: Option<Obj<Leaf>>,
}

impl Default for WithDefault {
    fn default() -> Self {
        WithDefault {
            ammo: 30,
            sight: None,
        }
    }
}

#[test]
fn class_defaults_exist_only_for_default_types() {
    let mut heap = Heap::new();
    assert!(!NoDefault::class().has_default());
    assert!(heap.class_default::<NoDefault>().is_none());
    assert!(WithDefault::class().has_default());
    let cdo = heap.class_default::<WithDefault>().unwrap();
    assert_eq!(heap[cdo].ammo, 30);
    assert_eq!(heap.class_default::<WithDefault>(), Some(cdo), "made once");
    assert_eq!(heap.name_of(cdo).as_deref(), Some("Default__Rifle"));
    assert_eq!(heap.find(None, "Default__Rifle"), Some(cdo.any()));
    assert!(heap.is_rooted(cdo));
    // Rooted: it survives, and keeps what it references.
    let sight = heap.create(Leaf::default());
    heap[cdo].sight = Some(sight);
    let l = heap.create(Leaf::default());
    let nd = heap.create(NoDefault { leaf: l });
    let s = heap.collect().unwrap();
    assert_eq!(s.freed, 2, "the NoDefault object and its leaf");
    assert!(heap.get(nd).is_none());
    assert_eq!(heap.class_default::<WithDefault>(), Some(cdo));
    assert!(heap.get(sight).is_some());
    // It cannot be marked as garbage, so it always resolves.
    assert_eq!(heap.mark_as_garbage(cdo), Err(Error::Permanent(cdo.any())));
    assert_eq!(heap.class_default::<WithDefault>(), Some(cdo));
    // Nor removed from the root set: it lives as long as the heap, and
    // handles to it never go stale.
    assert_eq!(heap.remove_from_root(cdo), Err(Error::Permanent(cdo.any())));
    assert!(heap.is_rooted(cdo));
    heap.collect().unwrap();
    assert!(heap.get(cdo).is_some());
    assert_eq!(heap.class_default::<WithDefault>(), Some(cdo));
    assert_eq!(heap[cdo].ammo, 30);
}

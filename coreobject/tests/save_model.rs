//! Saving and loading against a model: random graphs with outers, names,
//! weak handles, roots, pool objects, clusters and freed slots.
//!
//! * Exact restore: every object comes back at its index and serial, with
//!   its class, fields, name, outer, root and pool flags and cluster; freed
//!   handles stay stale; saving the restored heap gives the same bytes.
//! * Instantiate a random subtree into a heap that holds other objects and
//!   copies of the objects outside the subtree: the new objects are
//!   isomorphic to the saved ones under the returned map, imports resolve to
//!   the copies, nothing else in the target changes, and saving the new
//!   subtree gives the same bytes.
//! * Mutated and truncated bytes of real saves: an error or a load, never a
//!   panic, and a failed load leaves the heap as it was.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use coreobject::save::{LoadError, SaveOptions, Selection};
use coreobject::{AnyObj, Heap, HeapConfig, Obj, Object, Weak};
use proptest::prelude::*;

#[derive(Object, Default, Debug)]
#[object(save)]
struct Node {
    value: i64,
    label: String,
    strong: Vec<Obj<Node>>,
    weak: Option<Weak<Node>>,
    any: Option<AnyObj>,
    by_key: BTreeMap<u8, Obj<Leaf>>,
    #[object(transient)]
    scratch: u32,
}

#[derive(Object, Default, Debug)]
#[object(save)]
struct Leaf {
    x: u32,
}

/// A recipe for a graph.
#[derive(Clone, Debug)]
struct Recipe {
    pool: u8,
    nodes: Vec<NodeSpec>,
    leaves: u8,
    clusters: Vec<u8>,
}

#[derive(Clone, Debug)]
struct NodeSpec {
    value: i64,
    outer: Option<u8>,
    named: bool,
    rooted: bool,
    strong: Vec<u8>,
    weak: Option<u8>,
    any: Option<u8>,
    leaf: Option<(u8, u8)>,
}

fn recipe() -> impl Strategy<Value = Recipe> {
    let node = (
        any::<i64>(),
        proptest::option::of(any::<u8>()),
        any::<bool>(),
        proptest::bool::weighted(0.3),
        proptest::collection::vec(any::<u8>(), 0..3),
        proptest::option::of(any::<u8>()),
        proptest::option::of(any::<u8>()),
        proptest::option::of((any::<u8>(), any::<u8>())),
    )
        .prop_map(
            |(value, outer, named, rooted, strong, weak, any, leaf)| NodeSpec {
                value,
                outer,
                named,
                rooted,
                strong,
                weak,
                any,
                leaf,
            },
        );
    (
        0u8..4,
        proptest::collection::vec(node, 1..24),
        0u8..6,
        proptest::collection::vec(any::<u8>(), 0..3),
    )
        .prop_map(|(pool, nodes, leaves, clusters)| Recipe {
            pool,
            nodes,
            leaves,
            clusters,
        })
}

/// A built graph: every node (pool ones first) and leaf, and handles of
/// objects freed since.
struct Built {
    heap: Heap,
    nodes: Vec<Obj<Node>>,
    freed: Vec<AnyObj>,
}

/// Builds `r`; with `all_named`, every object gets a name (needed where
/// objects outside a save are imports).
fn build(r: &Recipe, all_named: bool) -> Built {
    let mut heap = Heap::with_config(HeapConfig {
        disregard_pool_size: 8,
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    let mut nodes = Vec::new();
    if r.pool > 0 {
        heap.open_disregard_for_gc().unwrap();
        for p in 0..r.pool {
            let h = heap
                .spawn(Node {
                    value: -(p as i64),
                    label: format!("pool {p}"),
                    ..Node::default()
                })
                .name(format!("Pool_{p}"))
                .create()
                .unwrap();
            nodes.push(h);
        }
        heap.close_disregard_for_gc();
    }
    let mut leaves = Vec::new();
    for l in 0..r.leaves {
        let s = heap.spawn(Leaf { x: l as u32 * 7 }).root();
        let s = if all_named {
            s.name(format!("Leaf_{l}"))
        } else {
            s
        };
        leaves.push(s.create().unwrap());
    }
    for (i, n) in r.nodes.iter().enumerate() {
        let mut s = heap.spawn(Node {
            value: n.value,
            label: format!("node {i}"),
            scratch: 99,
            ..Node::default()
        });
        if let Some(o) = n.outer {
            if !nodes.is_empty() {
                s = s.outer(nodes[o as usize % nodes.len()]);
            }
        }
        if n.named || all_named {
            s = s.name(format!("N{i}"));
        }
        if n.rooted {
            s = s.root();
        }
        nodes.push(s.create().unwrap());
    }
    let first = r.pool as usize;
    for (i, n) in r.nodes.iter().enumerate() {
        let me = nodes[first + i];
        let pick = |k: u8| nodes[k as usize % nodes.len()];
        heap[me].strong = n.strong.iter().map(|&k| pick(k)).collect();
        heap[me].weak = n.weak.map(|k| pick(k).downgrade());
        heap[me].any = n.any.map(|k| pick(k).any());
        if let (Some((key, l)), false) = (n.leaf, leaves.is_empty()) {
            let leaf = leaves[l as usize % leaves.len()];
            heap[me].by_key.insert(key % 4, leaf);
        }
    }
    // Free what nothing holds: freed slots, stale weak handles.
    let before: Vec<AnyObj> = heap.iter().map(|o| o.id()).collect();
    heap.collect().unwrap();
    let freed: Vec<AnyObj> = before.into_iter().filter(|&h| !heap.contains(h)).collect();
    nodes.retain(|&n| heap.contains(n));
    for &c in &r.clusters {
        if !nodes.is_empty() {
            let _ = heap.create_cluster(nodes[c as usize % nodes.len()]);
        }
    }
    Built { heap, nodes, freed }
}

/// A node's fields: value, label, strong, weak, any, by key, scratch.
type NodeView = (
    i64,
    String,
    Vec<Ref>,
    Option<Ref>,
    Option<Ref>,
    Vec<(u8, Ref)>,
    u32,
);

/// Everything observable about one object, with handles turned into
/// positions in the list viewed (or paths, for objects outside it).
#[derive(Debug, PartialEq, Eq)]
struct View {
    class: &'static str,
    name: Option<String>,
    outer: Option<Ref>,
    rooted: bool,
    pool: bool,
    value: Option<NodeView>,
    leaf: Option<u32>,
    cluster: Option<(Ref, BTreeSet<Ref>)>,
}

/// A handle in a view: a position in the saved order, an outside object's
/// path, or a handle that resolves to nothing.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ref {
    In(usize),
    Out(String),
    Dead,
}

fn view(heap: &Heap, h: AnyObj, pos: &HashMap<AnyObj, usize>) -> View {
    let r = |x: AnyObj| -> Ref {
        if let Some(&p) = pos.get(&x) {
            Ref::In(p)
        } else if heap.contains(x) {
            Ref::Out(heap.path_name(x).unwrap())
        } else {
            Ref::Dead
        }
    };
    let flags = heap.flags_of(h).unwrap();
    let value = heap.downcast::<Node>(h).map(|n| {
        let v = &heap[n];
        (
            v.value,
            v.label.clone(),
            v.strong.iter().map(|s| r(s.any())).collect(),
            v.weak.map(|w| r(w.any())),
            v.any.map(r),
            v.by_key.iter().map(|(k, l)| (*k, r(l.any()))).collect(),
            v.scratch,
        )
    });
    let cluster = heap.cluster_of(h).map(|c| {
        (
            r(c.root()),
            heap.cluster_members(c).into_iter().map(r).collect(),
        )
    });
    View {
        class: heap.class_of(h).unwrap().name(),
        name: heap.name_of(h).map(|n| n.to_string()),
        outer: heap.outer_of(h).map(r),
        rooted: flags.rooted,
        pool: flags.disregard,
        value,
        leaf: heap.downcast::<Leaf>(h).map(|l| heap[l].x),
        cluster,
    }
}

fn views(heap: &Heap, objs: &[AnyObj]) -> Vec<View> {
    let pos: HashMap<AnyObj, usize> = objs.iter().enumerate().map(|(i, &h)| (h, i)).collect();
    objs.iter().map(|&h| view(heap, h, &pos)).collect()
}

/// What a view of a saved object becomes after a load: transient fields
/// come back as their default, pool objects as rooted ones.
fn loaded_form(mut v: View, instantiate: bool) -> View {
    if let Some(x) = &mut v.value {
        x.6 = 0;
    }
    if instantiate {
        if v.pool {
            v.pool = false;
            v.rooted = true;
        }
        // A cluster comes along if its root does, with its saved members.
        v.cluster = match v.cluster {
            Some((Ref::In(r), members)) => Some((
                Ref::In(r),
                members
                    .into_iter()
                    .filter(|m| matches!(m, Ref::In(_)))
                    .collect(),
            )),
            _ => None,
        };
    }
    v
}

/// Everything in a heap: its objects and their views.
fn snapshot(heap: &Heap) -> (Vec<AnyObj>, Vec<View>) {
    let all: Vec<AnyObj> = heap.iter().map(|o| o.id()).collect();
    let v = views(heap, &all);
    (all, v)
}

proptest! {
    // A few cases under miri: a sample of real and mutated saves checked
    // for undefined behaviour.
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 2 } else { 48 },
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn exact_restore(r in recipe(), json in any::<bool>()) {
        let b = build(&r, false);
        let opts = if json { SaveOptions::json() } else { SaveOptions::default() };
        let mut bytes = Vec::new();
        let saved = b.heap.save_with(Selection::all(), &opts, &mut bytes).unwrap();
        let all: Vec<AnyObj> = b.heap.iter().map(|o| o.id()).collect();
        prop_assert_eq!(&saved.exports, &all);
        let before = views(&b.heap, &all);

        // While the saved heap lives, its tag is taken: a fresh one, same
        // indices and generations.
        let copy = Heap::restore(&bytes[..]).unwrap();
        prop_assert_ne!(copy.tag(), b.heap.tag());
        let moved: Vec<AnyObj> = all.iter().map(|&h| copy.rehome(h)).collect();
        for (&h, &m) in all.iter().zip(&moved) {
            prop_assert_eq!(h.index(), m.index());
            prop_assert!(copy.contains(m));
        }
        prop_assert_eq!(copy.len(), b.heap.len());
        let after: Vec<View> = views(&copy, &moved);
        let expect: Vec<View> = before.into_iter().map(|v| loaded_form(v, false)).collect();
        prop_assert_eq!(&after, &expect);
        drop(copy);

        // Once it is gone, the restore takes its tag back: old handles
        // resolve again, freed ones stay stale, and the bytes are the same.
        let tag = b.heap.tag();
        let Built { heap, freed, nodes } = b;
        drop(heap);
        let back = Heap::restore(&bytes[..]).unwrap();
        prop_assert_eq!(back.tag(), tag);
        prop_assert_eq!(&views(&back, &all), &expect);
        for &n in &nodes {
            prop_assert!(back.get(n).is_some());
        }
        for &f in &freed {
            prop_assert!(!back.contains(f));
        }
        let mut again = Vec::new();
        back.save_with(Selection::all(), &opts, &mut again).unwrap();
        prop_assert!(again == bytes, "restore then save changed the bytes");
        prop_assert!(back.verify_clusters().is_empty());
        // New objects never take a freed object's serial.
        let mut back = back;
        for _ in 0..freed.len() {
            back.create(Leaf::default());
        }
        for &f in &freed {
            prop_assert!(!back.contains(f));
        }
        back.collect().unwrap();
    }

    #[test]
    fn instantiate_subtree(r in recipe(), pick in any::<u8>(), extra in 0usize..5, json in any::<bool>()) {
        let b = build(&r, true);
        let candidates: Vec<Obj<Node>> = b.nodes.iter().copied()
            .filter(|&n| !b.heap.flags_of(n).unwrap().disregard)
            .collect();
        prop_assume!(!candidates.is_empty());
        let root = candidates[pick as usize % candidates.len()];
        let opts = if json { SaveOptions::json() } else { SaveOptions::default() };
        let mut sub = Vec::new();
        let saved = b.heap.save_with(Selection::subtree(root), &opts, &mut sub).unwrap();
        prop_assert_eq!(saved.exports[0].index() <= root.index(), true);

        // The target: unrelated objects, then copies of everything outside
        // the subtree (whose handles into the subtree are unresolved there).
        let inside: BTreeSet<AnyObj> = saved.exports.iter().copied().collect();
        let outside: Vec<AnyObj> = b.heap.iter().map(|o| o.id()).filter(|h| !inside.contains(h)).collect();
        let mut target = Heap::new();
        for i in 0..extra {
            target.spawn(Leaf { x: 1000 + i as u32 }).root().create().unwrap();
        }
        let mut rest = Vec::new();
        b.heap.save(Selection::set(outside.iter().copied()), &mut rest).unwrap();
        let copies = target.load(&rest[..]).unwrap();
        let before = snapshot(&target);

        let loaded = target.load(&sub[..]).unwrap();
        prop_assert!(loaded.unresolved.is_empty(), "{:?}", loaded.unresolved);
        prop_assert_eq!(loaded.objects.len(), saved.exports.len());
        // Imports resolved to the copies of the outside objects.
        let copy_of: HashMap<AnyObj, AnyObj> = outside.iter().copied().zip(copies.objects.iter().copied()).collect();
        for (imp, got) in saved.imports.iter().zip(&loaded.imports) {
            prop_assert_eq!(Some(copy_of[imp]), *got);
        }
        // Isomorphic under the map (outside objects compared by path).
        let want: Vec<View> = views(&b.heap, &saved.exports).into_iter().map(|v| loaded_form(v, true)).collect();
        prop_assert_eq!(views(&target, &loaded.objects), want);
        // Nothing else changed: the same objects, each as it was.
        let new: BTreeSet<AnyObj> = loaded.objects.iter().copied().collect();
        let old_after: Vec<AnyObj> = target.iter().map(|o| o.id()).filter(|h| !new.contains(h)).collect();
        prop_assert_eq!(&old_after, &before.0);
        prop_assert_eq!(views(&target, &old_after), before.1);
        // Save, load, save: the same bytes.
        let mut again = Vec::new();
        target.save_with(Selection::subtree(loaded.objects[saved.exports.iter().position(|&h| h == root.any()).unwrap()]), &opts, &mut again).unwrap();
        prop_assert!(again == sub, "instantiate then save changed the bytes");
        target.collect().unwrap();
    }

    #[test]
    fn mutated_bytes_never_panic(
        r in recipe(),
        json in any::<bool>(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..4), 1..6),
        cut in proptest::option::of(any::<prop::sample::Index>()),
    ) {
        let b = build(&r, false);
        let opts = if json { SaveOptions::json() } else { SaveOptions::default() };
        let mut bytes = Vec::new();
        b.heap.save_with(Selection::all(), &opts, &mut bytes).unwrap();
        let Built { heap, .. } = b;
        drop(heap);
        for (at, byte, kind) in edits {
            if bytes.is_empty() { break; }
            let i = at.index(bytes.len());
            match kind {
                0 => bytes[i] ^= byte | 1,
                1 => bytes[i] = byte,
                2 => bytes.insert(i, byte),
                _ => { bytes.remove(i); }
            }
        }
        if let Some(c) = cut {
            let n = c.index(bytes.len() + 1);
            bytes.truncate(n);
        }
        // A load into a heap with objects: on error, nothing changed.
        let mut target = Heap::new();
        target.spawn(Leaf { x: 5 }).name("Keep").root().create().unwrap();
        let before = snapshot(&target);
        let before_stats = target.table_stats();
        match target.load(&bytes[..]) {
            Ok(l) => prop_assert_eq!(target.len(), before.0.len() + l.objects.len()),
            Err(_) => {
                prop_assert_eq!(snapshot(&target), before);
                prop_assert_eq!(target.table_stats().objects, before_stats.objects);
                // The slots reserved for the load were given back.
                prop_assert!(target.table_stats().free + before_stats.high_water as usize
                    >= target.table_stats().high_water as usize);
            }
        }
        target.collect().unwrap();
        if let Ok(h) = Heap::restore(&bytes[..]) {
            let mut h = h;
            h.collect().unwrap();
        }
    }
}

#[test]
fn errors_name_what_and_where() {
    let heap = Heap::new();
    heap.spawn(Node {
        value: 1,
        ..Node::default()
    })
    .name("A")
    .root()
    .create()
    .unwrap();
    let mut bytes = Vec::new();
    heap.save(Selection::all(), &mut bytes).unwrap();

    let mut target = Heap::new();
    let err = |b: &[u8], t: &mut Heap| t.load(b).unwrap_err();
    assert!(matches!(err(b"nope", &mut target), LoadError::BadMagic));
    assert!(matches!(
        err(&bytes[..3], &mut target),
        LoadError::Truncated { .. }
    ));
    let mut v = bytes.clone();
    v[6] = 9; // format version
    assert!(matches!(
        err(&v, &mut target),
        LoadError::Version { found: 9, .. }
    ));
    let cut = err(&bytes[..bytes.len() - 1], &mut target);
    assert!(
        matches!(
            cut,
            LoadError::Truncated {
                what: "payloads",
                ..
            }
        ),
        "{cut}"
    );
    // Load twice: the second copy's name is taken at the top level.
    target.load(&bytes[..]).unwrap();
    let taken = err(&bytes, &mut target);
    assert!(
        matches!(taken, LoadError::NameTaken { ref path, .. } if path == "A"),
        "{taken}"
    );
    assert_eq!(target.len(), 1);
}

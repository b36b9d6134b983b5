//! Incremental saves into a store against a model: random creation,
//! mutation (through `get_mut` and, for an interior-mutable class, behind
//! `&self`), renaming of roots, freeing (garbage marks and lost roots) and
//! collections (major, minor, sliced) between saves. After every save,
//! loading the store into a fresh heap gives exactly the heap's graph, by
//! persistent id: classes, fields, handles, names, outers and roots; the
//! store holds exactly the live objects' ids; and a save with nothing
//! changed writes nothing but the interior-mutable objects.

use coreobject::save::{FileStore, MemStore, SaveStore};
use coreobject::{AnyObj, Data, Heap, Obj, Object};
use proptest::prelude::*;

#[path = "common/store_graph.rs"]
mod store_graph;
use store_graph::*;

#[derive(Clone, Debug)]
enum Op {
    Mutate(Mutation),
    Collect(Gc),
    Save,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        16 => mutation().prop_map(Op::Mutate),
        3 => gc().prop_map(Op::Collect),
        3 => Just(Op::Save),
    ]
}

fn run(ops: &[Op], store: &mut dyn SaveStore) {
    let mut heap = Heap::new();
    let mut all: Vec<AnyObj> = Vec::new();
    for (k, op) in ops.iter().enumerate() {
        match op {
            Op::Mutate(m) => apply(&mut heap, &mut all, k, m),
            &Op::Collect(g) => collect(&mut heap, g),
            Op::Save => {
                heap.save_store(store).unwrap();
                check_store(&heap, store);
                // Nothing changed: only interior-mutable objects rewritten.
                let again = heap.save_store(store).unwrap();
                let live_cells = heap
                    .iter()
                    .filter(|o| o.downcast::<Cell>().is_some() && saved(&heap, o.id()))
                    .count();
                assert_eq!(again.written, live_cells, "a save with nothing changed");
                assert_eq!((again.created, again.deleted), (0, 0));
            }
        }
    }
    heap.save_store(store).unwrap();
    check_store(&heap, store);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn incremental_saves_match_the_heap(ops in proptest::collection::vec(op(), 1..60)) {
        run(&ops, &mut MemStore::default());
    }
}

#[test]
fn file_store_saves_match_the_heap() {
    let dir = std::env::temp_dir().join(format!("coreobject-store-model-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 8,
        ..ProptestConfig::default()
    });
    runner
        .run(&proptest::collection::vec(op(), 1..40), |ops| {
            let _ = std::fs::remove_dir_all(&dir);
            let mut store = FileStore::open(&dir, 2).unwrap();
            run(&ops, &mut store);
            // Reopened: the last save, whole; only the last two files kept.
            let mut again = FileStore::open(&dir, 2).unwrap();
            assert_eq!(again.read_all().unwrap(), store.read_all().unwrap());
            assert_eq!(again.meta().unwrap(), store.meta().unwrap());
            let files = std::fs::read_dir(&dir).unwrap().count();
            assert!(files <= 2, "{files} files kept");
            Ok(())
        })
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_subtree_loads_by_its_root_id() {
    let mut heap = Heap::new();
    let level = heap
        .spawn(Node::default())
        .name("Level")
        .root()
        .create()
        .unwrap();
    let a = heap
        .spawn(Node {
            value: 1,
            ..Node::default()
        })
        .outer(level)
        .name("A")
        .create()
        .unwrap();
    let b = heap
        .spawn(Node {
            value: 2,
            ..Node::default()
        })
        .outer(a)
        .create()
        .unwrap();
    let other = heap
        .spawn(Node {
            value: 3,
            ..Node::default()
        })
        .root()
        .create()
        .unwrap();
    heap[b].next = vec![a, other];
    let mut store = MemStore::default();
    heap.save_store(&mut store).unwrap();
    let root = heap.persistent_id(level).unwrap();

    let mut copy = Heap::new();
    let loaded = copy.load_store(&mut store, Some(root)).unwrap();
    assert_eq!(loaded.objects.len(), 3);
    let b2 = copy
        .find_persistent(heap.persistent_id(b).unwrap())
        .unwrap();
    let b2 = copy.downcast::<Node>(b2).unwrap();
    assert_eq!(copy[b2].value, 2);
    let a2 = copy[b2].next[0];
    assert_eq!(copy.path_name(a2).as_deref(), Some("Level.A"));
    // The object outside the subtree is not loaded: a handle that never resolves.
    assert!(copy.get(copy[b2].next[1]).is_none());
    assert!(copy.persistent_id(copy[b2].next[1]).is_none());
}

#[test]
fn a_failed_load_leaves_the_heap_unchanged() {
    let mut heap = Heap::new();
    heap.spawn(Node::default())
        .name("Taken")
        .root()
        .create()
        .unwrap();
    let mut store = MemStore::default();
    heap.save_store(&mut store).unwrap();
    // The name is taken in the target heap: an error, nothing created.
    let before = heap.len();
    assert!(heap.load_store(&mut store, None).is_err());
    assert_eq!(heap.len(), before);
    // An empty store.
    assert!(matches!(
        Heap::new().load_store(&mut MemStore::default(), None),
        Err(coreobject::save::StoreError::Empty)
    ));
}

#[cfg(feature = "redb")]
#[test]
fn redb_store_saves_match_the_heap() {
    let dir = std::env::temp_dir().join(format!("coreobject-store-redb-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 8,
        ..ProptestConfig::default()
    });
    let k = std::sync::atomic::AtomicUsize::new(0);
    runner
        .run(&proptest::collection::vec(op(), 1..40), |ops| {
            let k = k.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let mut store =
                coreobject::save::RedbStore::open(dir.join(format!("m{k}.redb"))).unwrap();
            run(&ops, &mut store);
            Ok(())
        })
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// redb's log of saves and its folding into the base, against the heap: a
/// world large enough that small saves go to the log, then fold.
#[cfg(feature = "redb")]
#[test]
fn redb_log_and_fold_match_the_heap() {
    let path =
        std::env::temp_dir().join(format!("coreobject-store-fold-{}.redb", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let mut store = coreobject::save::RedbStore::open(&path).unwrap();
    let mut heap = Heap::new();
    let mut rng = 12345u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut nodes = rooted_nodes(&mut heap, 200);
    heap.save_store(&mut store).unwrap();
    for round in 0..30 {
        for _ in 0..5 {
            let n = nodes[next() as usize % nodes.len()];
            heap[n].value = next() as i64;
        }
        let n = heap
            .spawn(Node {
                value: round,
                ..Node::default()
            })
            .root()
            .create()
            .unwrap();
        nodes.push(n);
        let gone = nodes.swap_remove(next() as usize % nodes.len());
        heap.remove_from_root(gone).unwrap();
        if round % 3 == 0 {
            heap.collect().unwrap();
        }
        heap.save_store(&mut store).unwrap();
        check_store(&heap, &mut store);
    }
    drop(store);
    let _ = std::fs::remove_file(&path);
}

#[derive(Object, Data, Default, Debug)]
#[object(save)]
struct Pos {
    x: i64,
    next: Option<Obj<Pos>>,
}

/// Every door that changes an object marks it for the next save: the data
/// door (which skips the collector's barrier), `get_disjoint_mut`, a rename,
/// and a restore with `spawn_at` (same slot and serial, new contents).
#[test]
fn every_write_door_marks_the_object_changed() {
    let mut heap = Heap::new();
    let root = heap
        .spawn(Pos::default())
        .name("Root")
        .root()
        .create()
        .unwrap();
    let a = heap
        .spawn(Pos::default())
        .outer(root)
        .name("A")
        .create()
        .unwrap();
    let b = heap
        .spawn(Pos::default())
        .outer(root)
        .name("B")
        .create()
        .unwrap();
    heap[root].next = Some(a);
    heap[a].next = Some(b);
    let mut store = MemStore::default();
    heap.save_store(&mut store).unwrap();
    let written = |heap: &mut Heap, store: &mut MemStore| heap.save_store(store).unwrap().written;
    assert_eq!(written(&mut heap, &mut store), 0, "nothing changed");
    *heap.data_mut(a).unwrap().x = 7;
    assert_eq!(written(&mut heap, &mut store), 1, "the data door");
    let [pa, pb] = heap.get_disjoint_mut([a, b]).unwrap();
    (pa.x, pb.x) = (1, 2);
    assert_eq!(written(&mut heap, &mut store), 2, "get_disjoint_mut");
    heap.rename(b).name("Bee").apply().unwrap();
    assert_eq!(written(&mut heap, &mut store), 1, "a rename");
    // Undo of a deletion: the same handle, new contents.
    heap[a].next = None;
    let (b_id, b_name) = (heap.persistent_id(b).unwrap(), heap.name_of(b).unwrap());
    heap.collect().unwrap();
    assert!(!heap.contains(b));
    heap.spawn_at(b.index(), b.serial(), Pos { x: 9, next: None })
        .outer(root)
        .name(b_name)
        .create()
        .unwrap();
    heap[a].next = Some(b);
    heap.save_store(&mut store).unwrap();
    let mut copy = Heap::new();
    copy.load_store(&mut store, None).unwrap();
    let value = |id| {
        let h = copy.find_persistent(id).expect("loaded");
        let p = copy.downcast::<Pos>(h).unwrap();
        (copy[p].x, copy.path_name(p).unwrap())
    };
    assert_eq!(
        value(heap.persistent_id(a).unwrap()),
        (1, "Root.A".to_string())
    );
    let b_now = heap.persistent_id(b).unwrap();
    assert_eq!(
        value(b_now).0,
        9,
        "the restored contents (id {b_id:?} then {b_now:?})"
    );
    assert_eq!(value(b_now).1, "Root.Bee");
}

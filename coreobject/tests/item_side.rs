//! Strong counts and cluster roots are kept per slot beside the table's items
//! (the side entries, `array/item.rs`): each slot's are its own, across a
//! chunk boundary (the last slot of chunk 0, the first of chunk 1, the
//! first and last slots of the table), and a reused slot starts with none.
//! Sized by `CHUNK_SIZE`, which is small under miri.

use coreobject::{ClusterId, GcConfig, Heap, HeapConfig, Obj, Object, CHUNK_SIZE};

#[derive(Object, Default)]
struct Node {
    tag: u32,
}

/// What the heap says of the object in a slot: strong count, cluster root.
fn side_of(heap: &Heap, h: Obj<Node>) -> (usize, Option<u32>) {
    let f = heap.flags_of(h).expect("alive");
    assert_eq!(f.strong_count as usize, heap.strong_count(h));
    (f.strong_count as usize, f.cluster_root)
}

fn heap() -> Heap {
    Heap::with_config(HeapConfig {
        max_objects: 2 * CHUNK_SIZE + 2,
        gc: GcConfig::MANUAL,
        ..HeapConfig::DEFAULT
    })
    .expect("config")
}

#[test]
fn strong_counts_and_cluster_roots_stay_with_their_slot() {
    let mut heap = heap();
    let c = CHUNK_SIZE;
    // Slots at the start of the table, around the boundary of chunks 0 and
    // 1, and at the end: strong handles on some (a different count on
    // each), two clusters over the others, across the boundary.
    let strong_slots = [0, c - 1, c, c + 1, 2 * c + 1];
    let (root_a, members_a) = (1, [c - 2]);
    let (root_b, members_b) = (c + 2, [c - 3, 2 * c]);
    let mut slots: Vec<u32> = strong_slots.to_vec();
    slots.extend([root_a, root_b].iter().chain(&members_a).chain(&members_b));
    let hs: Vec<Obj<Node>> = slots
        .iter()
        .map(|&i| heap.create_at(i, Node { tag: i }).expect("free slot"))
        .collect();
    let at = |i: u32| hs[slots.iter().position(|&s| s == i).unwrap()];
    let mut strong = Vec::new();
    for (k, &i) in strong_slots.iter().enumerate() {
        for _ in 0..=k {
            strong.push(heap.strong(at(i)).unwrap());
        }
    }
    for (root, members) in [(root_a, &members_a[..]), (root_b, &members_b[..])] {
        heap.add_to_root(at(root)).unwrap();
        let cl: ClusterId = heap.create_cluster(at(root)).unwrap();
        for &m in members {
            heap.add_to_cluster(cl, at(m)).unwrap();
        }
    }
    let want = |i: u32| -> (usize, Option<u32>) {
        if let Some(k) = strong_slots.iter().position(|&s| s == i) {
            (k + 1, None)
        } else if i == root_a || members_a.contains(&i) {
            (0, Some(root_a))
        } else {
            (0, Some(root_b))
        }
    };
    let check = |heap: &Heap, when: &str| {
        for &i in &slots {
            let h = at(i);
            assert_eq!(heap.get(h).map(|n| n.tag), Some(i), "slot {i} {when}");
            assert_eq!(side_of(heap, h), want(i), "slot {i} {when}");
        }
    };
    check(&heap, "as set");
    assert_eq!(heap.cluster_of(at(c - 1)), None);
    assert_eq!(heap.cluster_of(at(2 * c)), heap.cluster_of(at(root_b)));

    // A collection keeps what the strong handles and the clusters keep, and
    // changes none of it.
    heap.collect().unwrap();
    check(&heap, "after a collection");

    // Clones count on their slot, drops count down, from another thread too.
    let more = strong.last().unwrap().clone();
    assert_eq!(side_of(&heap, at(2 * c + 1)).0, 6);
    let gone: Vec<_> = std::mem::take(&mut strong);
    std::thread::spawn(move || drop((more, gone)))
        .join()
        .unwrap();
    for &i in &strong_slots {
        assert_eq!(side_of(&heap, at(i)), (0, None), "slot {i} with no handles");
    }

    // Everything goes: slots reused by new objects start with no strong
    // count and no cluster.
    heap.remove_from_root(at(root_a)).unwrap();
    heap.remove_from_root(at(root_b)).unwrap();
    heap.collect().unwrap();
    for &h in &hs {
        assert!(heap.get(h).is_none(), "slot {} freed", h.index());
    }
    let mut new = Vec::new();
    for &i in &slots {
        let h = heap.create_at(i, Node { tag: i + 1 }).expect("freed slot");
        assert_eq!(h.index(), i);
        assert_eq!(side_of(&heap, h), (0, None), "reused slot {i}");
        assert_eq!(heap.cluster_of(h), None);
        heap.add_to_root(h).unwrap();
        new.push(h);
    }
    // The new objects take strong handles and join clusters as new: a
    // former cluster root as a member, a former member as a root.
    let at = |i: u32| new[slots.iter().position(|&s| s == i).unwrap()];
    let cl = heap.create_cluster(at(c - 3)).unwrap();
    heap.remove_from_root(at(root_b)).unwrap();
    heap.add_to_cluster(cl, at(root_b)).unwrap();
    let s = heap.strong(at(root_a)).unwrap();
    assert_eq!(side_of(&heap, at(c - 3)), (0, Some(c - 3)));
    assert_eq!(side_of(&heap, at(root_b)), (0, Some(c - 3)));
    assert_eq!(side_of(&heap, at(root_a)), (1, None));
    assert_eq!(side_of(&heap, at(c)), (0, None));
    drop(s);
    assert_eq!(side_of(&heap, at(root_a)), (0, None));
}

/// A slot freed while a strong handle counts on it is not reused until the
/// handle goes; then it is, with no count left.
#[test]
fn a_parked_slot_comes_back_without_its_count() {
    let mut heap = heap();
    let i = CHUNK_SIZE;
    let h = heap.create_at(i, Node { tag: 1 }).unwrap();
    let s = heap.strong(h).unwrap();
    heap.mark_as_garbage(h).unwrap();
    heap.collect().unwrap();
    assert!(heap.get(h).is_none());
    assert!(heap.create_at(i, Node { tag: 2 }).is_err(), "parked");
    drop(s);
    heap.collect().unwrap();
    let n = heap.create_at(i, Node { tag: 3 }).expect("released");
    assert_eq!(side_of(&heap, n), (0, None));
}

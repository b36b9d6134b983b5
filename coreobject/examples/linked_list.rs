//! A doubly linked list on a coreobject heap, for reading beside gc-arena's
//! and slotmap's linked-list examples.
//!
//! Nodes point at each other with `Obj` handles, forward and back, so the
//! list is full of cycles: the collector frees a node once no path from the
//! root reaches it, cycles or not. Handles are 8-byte `Copy` values that can
//! never dangle: a removed node's handle simply stops resolving.
//!
//! Run with `cargo run -p coreobject --example linked_list`.

use coreobject::{Heap, Obj, Object};

#[derive(Object)]
struct Node {
    value: i32,
    prev: Option<Obj<Node>>,
    next: Option<Obj<Node>>,
}

/// The list itself is an object too: rooting it keeps every node alive.
#[derive(Object, Default)]
struct List {
    head: Option<Obj<Node>>,
    tail: Option<Obj<Node>>,
    len: usize,
}

fn push_back(heap: &mut Heap, list: Obj<List>, value: i32) -> Obj<Node> {
    let tail = heap[list].tail;
    let node = heap.create(Node {
        value,
        prev: tail,
        next: None,
    });
    match tail {
        Some(t) => heap[t].next = Some(node),
        None => heap[list].head = Some(node),
    }
    heap[list].tail = Some(node);
    heap[list].len += 1;
    node
}

fn push_front(heap: &mut Heap, list: Obj<List>, value: i32) -> Obj<Node> {
    let head = heap[list].head;
    let node = heap.create(Node {
        value,
        prev: None,
        next: head,
    });
    match head {
        Some(h) => heap[h].prev = Some(node),
        None => heap[list].tail = Some(node),
    }
    heap[list].head = Some(node);
    heap[list].len += 1;
    node
}

/// Unlinks a node; the collector frees it later.
fn remove(heap: &mut Heap, list: Obj<List>, node: Obj<Node>) {
    let (prev, next) = (heap[node].prev, heap[node].next);
    match prev {
        Some(p) => heap[p].next = next,
        None => heap[list].head = next,
    }
    match next {
        Some(n) => heap[n].prev = prev,
        None => heap[list].tail = prev,
    }
    heap[list].len -= 1;
}

fn values(heap: &Heap, list: Obj<List>) -> Vec<i32> {
    let mut out = Vec::new();
    let mut cur = heap[list].head;
    while let Some(n) = cur {
        out.push(heap[n].value);
        cur = heap[n].next;
    }
    out
}

fn main() {
    let mut heap = Heap::new();
    let list = heap.create(List::default());
    heap.add_to_root(list).unwrap();

    for v in 1..=3 {
        push_back(&mut heap, list, v);
    }
    let zero = push_front(&mut heap, list, 0);
    assert_eq!(values(&heap, list), [0, 1, 2, 3]);

    remove(&mut heap, list, zero);
    // The node still exists (it points into the list), but nothing reaches it.
    assert!(heap.get(zero).is_some());
    let stats = heap.collect().unwrap();
    assert_eq!(stats.freed, 1);
    assert!(heap.get(zero).is_none(), "its handle is stale, forever");
    assert_eq!(values(&heap, list), [1, 2, 3]);

    // Dropping the root frees the whole list, cycles and all.
    heap.remove_from_root(list).unwrap();
    assert_eq!(heap.collect().unwrap().freed, 4);
    assert!(heap.is_empty());
    println!("linked list: ok");
}

//! Graph shapes that would break a recursive marker, on a normal 8 MiB stack.
//!
//! * A chain of 10 million objects (each holding `Option<Obj<Node>>`) is
//!   built on a thread with an 8 MiB stack, rooted at its head and collected
//!   (every object marked, none freed), then unrooted and collected again
//!   (every object freed).
//! * A wide fan-out: one root holding a million children in a `Vec`.
//! * Cycles: a long ring, many small rings and self-loops are freed when
//!   unreachable and kept whole when one member is rooted.

use std::time::Instant;

use coreobject::{Heap, HeapConfig, Obj, Object};

#[derive(Object)]
struct Node {
    next: Option<Obj<Node>>,
}

#[derive(Object, Default)]
struct Hub {
    children: Vec<Obj<Node>>,
}

/// Runs `f` on a thread with an 8 MiB stack, as a game's main thread has.
fn on_8mib_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap();
}

fn big_heap(objects: u32) -> Heap {
    Heap::with_config(HeapConfig {
        max_objects: objects.next_power_of_two(),
        ..HeapConfig::DEFAULT
    })
    .unwrap()
}

/// Builds a chain of `n` objects, each pointing at the one created before,
/// roots its head, and checks two collections.
fn chain(n: u32) {
    let t = Instant::now();
    let mut heap = big_heap(n);
    let mut head = heap.create(Node { next: None });
    let tail = head;
    for _ in 1..n {
        head = heap.create(Node { next: Some(head) });
    }
    assert_eq!(heap.len(), n as usize);
    let built = t.elapsed();
    heap.add_to_root(head).unwrap();
    let s = heap.collect().unwrap();
    assert_eq!((s.roots, s.marked, s.freed), (1, n as usize, 0));
    assert!(heap.get(tail).is_some(), "the far end is reached");
    heap.remove_from_root(head).unwrap();
    let s2 = heap.collect().unwrap();
    assert_eq!((s2.marked, s2.freed), (0, n as usize));
    assert!(heap.is_empty());
    assert!(heap.get(tail).is_none() && heap.get(head).is_none());
    eprintln!(
        "chain of {n}: built in {built:?}; marked in {:?} (collection {:?}); freed in {:?}",
        s.mark, s.total, s2.total
    );
}

/// About 10 s and 830 MB in the debug test profile (2.7 s to build, 1.0 s to
/// mark, 5.8 s to free), so it runs by default.
#[test]
#[cfg_attr(miri, ignore = "10 million objects: the size is the point")]
fn ten_million_object_chain_on_an_8_mib_stack() {
    on_8mib_stack(|| chain(10_000_000));
}

#[test]
#[cfg_attr(miri, ignore = "a million children: the size is the point")]
fn wide_fan_out() {
    on_8mib_stack(|| {
        const N: usize = 1_000_000;
        let mut heap = big_heap(N as u32 + 1);
        let hub = heap.create(Hub::default());
        heap.add_to_root(hub).unwrap();
        let children: Vec<Obj<Node>> = (0..N).map(|_| heap.create(Node { next: None })).collect();
        heap[hub].children = children.clone();
        let s = heap.collect().unwrap();
        assert_eq!((s.marked, s.freed), (N + 1, 0));
        // Drop every other child from the hub: exactly those go.
        heap[hub].children = children.iter().copied().step_by(2).collect();
        let s = heap.collect().unwrap();
        assert_eq!((s.marked, s.freed), (N / 2 + 1, N / 2));
        for (i, c) in children.iter().enumerate().take(1000) {
            assert_eq!(heap.get(*c).is_some(), i % 2 == 0);
        }
        heap.remove_from_root(hub).unwrap();
        assert_eq!(heap.collect().unwrap().freed, N / 2 + 1);
        assert!(heap.is_empty());
    });
}

/// Links `nodes` into a ring.
fn ring(heap: &mut Heap, len: usize) -> Vec<Obj<Node>> {
    let nodes: Vec<Obj<Node>> = (0..len).map(|_| heap.create(Node { next: None })).collect();
    for (i, &n) in nodes.iter().enumerate() {
        heap[n].next = Some(nodes[(i + 1) % len]);
    }
    nodes
}

#[test]
#[cfg_attr(miri, ignore = "a 300,000-object ring: the size is the point")]
fn cycles_are_collected_and_kept_whole() {
    on_8mib_stack(|| {
        let mut heap = big_heap(1 << 20);
        let long = ring(&mut heap, 300_000);
        let small: Vec<Vec<Obj<Node>>> = (0..1000).map(|_| ring(&mut heap, 3)).collect();
        let selfish: Vec<Vec<Obj<Node>>> = (0..1000).map(|_| ring(&mut heap, 1)).collect();
        let total = 300_000 + 3000 + 1000;
        assert_eq!(heap.len(), total);

        // Root one member of the long ring and of every tenth small ring.
        heap.add_to_root(long[150_000]).unwrap();
        for r in small.iter().step_by(10) {
            heap.add_to_root(r[2]).unwrap();
        }
        heap.add_to_root(selfish[0][0]).unwrap();
        let kept = 300_000 + 100 * 3 + 1;
        let s = heap.collect().unwrap();
        assert_eq!((s.marked, s.freed), (kept, total - kept));
        assert!(long.iter().all(|n| heap.get(*n).is_some()));
        for (i, r) in small.iter().enumerate() {
            assert!(r.iter().all(|n| heap.get(*n).is_some() == (i % 10 == 0)));
        }
        assert!(heap.get(selfish[0][0]).is_some() && heap.get(selfish[1][0]).is_none());

        // Unrooted, the cycles go too.
        heap.remove_from_root(long[150_000]).unwrap();
        for r in small.iter().step_by(10) {
            heap.remove_from_root(r[2]).unwrap();
        }
        heap.remove_from_root(selfish[0][0]).unwrap();
        assert_eq!(heap.collect().unwrap().freed, kept);
        assert!(heap.is_empty());
    });
}

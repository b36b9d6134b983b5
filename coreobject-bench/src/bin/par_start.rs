//! Start overhead of parallel marking: a 4-ary tree of N objects (60,000
//! by default) collected R times (200) with 1 and 2 marking threads, with
//! `parallel_threshold` 0; prints p10/p50/p90 of the collection and of its
//! mark phase. `cargo run --release -p coreobject-bench --bin par_start --
//! 1000 2000`: the difference between the rows is what waking the pool
//! costs.
use std::time::Instant;

use coreobject::{GcConfig, Heap, HeapConfig, Obj, Object};

#[derive(Object, Default)]
struct Node {
    kids: Vec<Obj<Node>>,
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map_or(60_000, |s| s.parse().unwrap());
    let reps: usize = std::env::args().nth(2).map_or(200, |s| s.parse().unwrap());
    for threads in [1, 2, 1, 2] {
        let mut heap = Heap::with_config(HeapConfig {
            gc: GcConfig {
                threads,
                parallel_threshold: 0,
                ..GcConfig::MANUAL
            },
            ..HeapConfig::DEFAULT
        })
        .unwrap();
        let root = heap.create(Node::default());
        heap.add_to_root(root).unwrap();
        let mut all = vec![root];
        for i in 1..n {
            let h = heap.create(Node::default());
            let parent = all[(i - 1) / 4];
            heap[parent].kids.push(h);
            all.push(h);
        }
        heap.collect().unwrap();
        let mut totals = Vec::new();
        let mut marks = Vec::new();
        for _ in 0..reps {
            let t = Instant::now();
            let s = heap.collect().unwrap();
            totals.push(t.elapsed().as_secs_f64() * 1e6);
            marks.push(s.mark.as_secs_f64() * 1e6);
            assert_eq!(s.marked, n);
        }
        totals.sort_by(f64::total_cmp);
        marks.sort_by(f64::total_cmp);
        println!(
            "threads {threads}: collect p50 {:.0} us (p10 {:.0}, p90 {:.0}); mark p50 {:.0} us (p10 {:.0}, p90 {:.0})",
            totals[reps / 2], totals[reps / 10], totals[reps * 9 / 10],
            marks[reps / 2], marks[reps / 10], marks[reps * 9 / 10]
        );
    }
}

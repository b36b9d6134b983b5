//! The `world` workload's coreobject build alone, for profiles and A/B
//! runs: `N` objects created through `&mut Heap` (`create_mut`), then each
//! given a `Vec` of three handles through `get_mut` (its child and two
//! random others, as the world's actors), `R` times in fresh heaps. Prints
//! the median wall-clock and thread CPU ns per object (CPU from
//! `/proc/thread-self/schedstat`: time switched out on a loaded machine is
//! not counted) of the two phases, and of the same gathering into plain
//! `Vec`s of `u32` (the workload's own share: no object model).
//!
//! `cargo run --release -p coreobject-bench --bin world_build -- [N R]`
mod common;
use common::{cpu_ns, median};
use std::time::Instant;

use coreobject::{GcConfig, Heap, HeapConfig, Obj, Object};

#[derive(Object)]
struct Node {
    refs: Vec<Obj<Node>>,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let num = |k: usize, d: usize| args.get(k).map_or(d, |s| s.parse().expect("a number"));
    let (n, reps) = (num(1, 1_000_000), num(2, 5));
    let mut rng = fastrand::Rng::with_seed(1);
    let refs: Vec<[u32; 3]> = (0..n)
        .map(|i| {
            [
                ((i + 1) % n) as u32,
                rng.u32(0..n as u32),
                rng.u32(0..n as u32),
            ]
        })
        .collect();
    let (mut cw, mut cc, mut ww, mut wc, mut pw, mut pc) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    let per = |v: &mut Vec<f64>, x: f64| v.push(x / n as f64);
    for _ in 0..reps {
        let mut heap = Heap::with_config(HeapConfig {
            max_objects: (n as u32).max(HeapConfig::DEFAULT.max_objects),
            gc: GcConfig::MANUAL,
            ..HeapConfig::DEFAULT
        })
        .expect("heap config");
        let mut handles: Vec<Obj<Node>> = Vec::with_capacity(n);
        let (t, c) = (Instant::now(), cpu_ns());
        for _ in 0..n {
            handles.push(heap.create_mut(Node { refs: Vec::new() }));
        }
        per(&mut cw, t.elapsed().as_nanos() as f64);
        per(&mut cc, (cpu_ns() - c) as f64);
        let (t, c) = (Instant::now(), cpu_ns());
        for (i, &h) in handles.iter().enumerate() {
            let r: Vec<Obj<Node>> = refs[i].iter().map(|&t| handles[t as usize]).collect();
            heap.get_mut(h).expect("just created").refs = r;
        }
        per(&mut ww, t.elapsed().as_nanos() as f64);
        per(&mut wc, (cpu_ns() - c) as f64);
        // The same gathering with no object model: plain index lists.
        let (t, c) = (Instant::now(), cpu_ns());
        let plain: Vec<Vec<u32>> = refs.iter().map(|r| r.to_vec()).collect();
        per(&mut pw, t.elapsed().as_nanos() as f64);
        per(&mut pc, (cpu_ns() - c) as f64);
        assert_eq!(heap.len(), n);
        assert_eq!(heap[handles[n - 1]].refs[0], handles[0]);
        assert_eq!(plain.len(), n);
    }
    println!(
        "create wall {:.1} cpu {:.1} | fill wall {:.1} cpu {:.1} | plain lists wall {:.1} cpu {:.1} ns/object",
        median(cw),
        median(cc),
        median(ww),
        median(wc),
        median(pw),
        median(pc)
    );
}

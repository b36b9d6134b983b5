//! The `names` workload's `&mut Heap` rows alone, for profiling and A/B
//! runs: in a heap with 1,000 rooted outers, `N` objects are created
//! through `&mut Heap` (every other one under an outer, as in `names`),
//! unnamed (`create_mut`, and `spawn_mut(..).outer(o)`) and named
//! (`spawn_mut(..).name(actor.with_number(k))`), then freed by one
//! collection, `R` rounds each, each mode in a heap of its own. Prints each
//! mode's median over the rounds after the first, in wall-clock ns and in
//! the thread's CPU ns per object (from `/proc/thread-self/schedstat`, so
//! that time switched out on a loaded machine is not counted), and the
//! named / unnamed ratio of both. In named mode, after each round's
//! creation, every name is then looked up once through `&Heap`
//! (`find_name`): the first lookups after a batch of creations, which
//! pay for whatever the creation left for later (records waiting outside
//! the index); printed as `find`, CPU ns per object. `free` is the
//! collection that frees each round's objects, CPU ns per object.
//!
//! `cargo run --release -p coreobject-bench --bin names_loop -- [N R]`
mod common;
use common::{cpu_ns, median};
use std::time::Instant;

use coreobject::{AnyObj, GcConfig, Heap, HeapConfig, Obj, Object};

#[derive(Object)]
struct Actor {
    v: u64,
}

/// (wall, cpu, find cpu, free cpu) ns per object of each round after the
/// first.
fn mode(named: bool, n: usize, rounds: usize) -> (f64, f64, f64, f64) {
    let mut heap = Heap::with_config(HeapConfig {
        max_objects: ((n + 1000) as u32).max(HeapConfig::DEFAULT.max_objects),
        gc: GcConfig::MANUAL,
        ..HeapConfig::DEFAULT
    })
    .expect("heap config");
    let outers: Vec<AnyObj> = (0..1000)
        .map(|i| {
            heap.spawn(Actor { v: i })
                .name(format!("Outer_{i}"))
                .root()
                .create()
                .expect("outer")
                .any()
        })
        .collect();
    let actor = heap.intern("Actor").expect("intern");
    let (mut wall, mut cpu, mut find, mut free) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let mut hs: Vec<Obj<Actor>> = Vec::with_capacity(n);
        let (t, c) = (Instant::now(), cpu_ns());
        for i in 0..n {
            let value = Actor { v: i as u64 };
            let outer = (i % 2 == 0).then(|| outers[(i / 2) % outers.len()]);
            let h = if !named && outer.is_none() {
                heap.create_mut(value)
            } else {
                let s = heap.spawn_mut(value);
                let s = match outer {
                    Some(o) => s.outer(o),
                    None => s,
                };
                let s = if named {
                    s.name(actor.with_number((round * n + i) as u32))
                } else {
                    s
                };
                s.create().expect("create")
            };
            hs.push(h);
        }
        let (w, c) = (t.elapsed().as_nanos() as f64, (cpu_ns() - c) as f64);
        assert_eq!(
            hs.iter().map(|&h| heap[h].v).sum::<u64>(),
            (n as u64) * (n as u64 - 1) / 2
        );
        if named {
            let c = cpu_ns();
            for (i, h) in hs.iter().enumerate() {
                let outer = (i % 2 == 0).then(|| outers[(i / 2) % outers.len()]);
                let name = actor.with_number((round * n + i) as u32);
                assert_eq!(heap.find_name(outer, name), Some(h.any()));
            }
            find.push((cpu_ns() - c) as f64 / n as f64);
        }
        drop(hs);
        let f = cpu_ns();
        assert_eq!(heap.collect().expect("collect").freed, n);
        let f = (cpu_ns() - f) as f64 / n as f64;
        if round > 0 {
            free.push(f);
            wall.push(w / n as f64);
            cpu.push(c / n as f64);
        } else {
            find.clear();
        }
    }
    let find = if find.is_empty() { 0.0 } else { median(find) };
    (median(wall), median(cpu), find, median(free))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let num = |k: usize, d: usize| args.get(k).map_or(d, |s| s.parse().expect("a number"));
    let (n, rounds) = (num(1, 1_000_000), num(2, 4).max(2));
    let (uw, uc, _, uf) = mode(false, n, rounds);
    let (nw, nc, nf, nfree) = mode(true, n, rounds);
    println!(
        "unnamed wall {uw:.1} cpu {uc:.1} | named wall {nw:.1} cpu {nc:.1} ns/object | named/unnamed wall {:.2}x cpu {:.2}x | find cpu {nf:.1} | free cpu unnamed {uf:.1} named {nfree:.1}",
        nw / uw,
        nc / uc
    );
}

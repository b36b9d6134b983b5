//! Creation on its own, one program per process, so that the process's CPU
//! time (`perf stat -e task-clock`) is that program's alone on a loaded
//! machine: `create_threads MODE THREADS N ROUNDS`, where MODE is `shared`
//! (`Heap::create` through one `&Heap` from THREADS threads at once, N / THREADS
//! objects each), `mut` (`Heap::create_mut`, one thread) or `box`
//! (`Box::new` into a `Vec`, THREADS threads). Each round creates N objects
//! holding a `u64`, keeping every handle, then frees them all (a collection,
//! or dropping the boxes); the first round is a warm-up. Prints the wall time
//! of the later rounds' creation per object, and a checksum.
//!
//! `cargo run --release -p coreobject-bench --bin create_threads -- shared 2 1000000 6`
use std::time::Instant;

use coreobject::{Heap, Obj, Object};

#[derive(Object)]
struct V {
    v: u64,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("shared");
    let threads: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(2);
    let n: usize = args
        .get(3)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let rounds: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(6);
    let per = n / threads;
    let mut heap = Heap::new();
    let mut sum = 0u64;
    let mut ns = 0.0;
    for round in 0..rounds {
        let t = Instant::now();
        match mode {
            "shared" => {
                let shared: &Heap = &heap;
                let made: Vec<Vec<Obj<V>>> = std::thread::scope(|s| {
                    let ws: Vec<_> = (0..threads)
                        .map(|w| {
                            s.spawn(move || {
                                (0..per)
                                    .map(|i| {
                                        shared.create(V {
                                            v: (w * per + i) as u64,
                                        })
                                    })
                                    .collect::<Vec<_>>()
                            })
                        })
                        .collect();
                    ws.into_iter().map(|w| w.join().unwrap()).collect()
                });
                if round > 0 {
                    ns += t.elapsed().as_secs_f64();
                }
                sum += made.iter().flatten().map(|&h| heap[h].v).sum::<u64>();
                drop(made);
                heap.collect().unwrap();
            }
            "mut" => {
                let made: Vec<Obj<V>> =
                    (0..n).map(|i| heap.create_mut(V { v: i as u64 })).collect();
                if round > 0 {
                    ns += t.elapsed().as_secs_f64();
                }
                sum += made.iter().map(|&h| heap[h].v).sum::<u64>();
                drop(made);
                heap.collect().unwrap();
            }
            "box" => {
                let made: Vec<Vec<Box<u64>>> = std::thread::scope(|s| {
                    let ws: Vec<_> = (0..threads)
                        .map(|w| {
                            s.spawn(move || {
                                (0..per)
                                    .map(|i| Box::new((w * per + i) as u64))
                                    .collect::<Vec<_>>()
                            })
                        })
                        .collect();
                    ws.into_iter().map(|w| w.join().unwrap()).collect()
                });
                if round > 0 {
                    ns += t.elapsed().as_secs_f64();
                }
                sum += made.iter().flatten().map(|b| **b).sum::<u64>();
            }
            m => panic!("unknown mode {m}: shared, mut or box"),
        }
    }
    let created = (rounds.saturating_sub(1) * per * threads).max(1);
    println!(
        "{mode} threads {threads} n {n}: {:.1} ns/object (wall, creation only), checksum {sum}",
        ns * 1e9 / created as f64
    );
}

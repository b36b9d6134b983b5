//! A level of named actors unloaded under incremental collection (branch
//! purgesteps: the name index's tidy at a purge's end, in steps). `N` objects named
//! `Actor_k` (interned base, numbered), one in ten rooted, every name looked
//! up once (so they enter the name index), the rest freed by a cycle run in
//! `heap.tick(2 ms)` slices (`cargo run --release -p coreobject-bench --bin
//! tidy_slices -- [N R]`). Prints, per round, the ticks of the cycle, the
//! longest tick's wall time and the longest tick's thread CPU time (from
//! schedstat, so time switched out is not counted).
mod common;
use common::{cpu_ns, median};
use std::time::{Duration, Instant};

use coreobject::{GcConfig, Heap, HeapConfig, Object};

#[derive(Object)]
struct Actor {
    v: u64,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let num = |k: usize, d: usize| args.get(k).map_or(d, |s| s.parse().expect("a number"));
    let (n, rounds) = (num(1, 1_000_000), num(2, 3));
    let mut heap = Heap::with_config(HeapConfig {
        max_objects: ((2 * n + 1000) as u32).max(HeapConfig::DEFAULT.max_objects),
        gc: GcConfig {
            incremental: Some(Duration::from_millis(2)),
            every_frame: true,
            ..GcConfig::MANUAL
        },
        ..HeapConfig::DEFAULT
    })
    .expect("heap config");
    let actor = heap.intern("Actor").expect("intern");
    let mut longest = Vec::new();
    for round in 0..rounds {
        let mut kept = Vec::new();
        for i in 0..n {
            let k = (round * n + i) as u32;
            let h = heap
                .spawn_mut(Actor { v: i as u64 })
                .name(actor.with_number(k))
                .create()
                .expect("create");
            if i % 10 == 0 {
                heap.add_to_root(h).unwrap();
                kept.push(h);
            }
        }
        for i in 0..n {
            let k = (round * n + i) as u32;
            assert!(heap.find_name(None, actor.with_number(k)).is_some());
        }
        let (mut ticks, mut most_wall, mut most_cpu) = (0, Duration::ZERO, 0u64);
        let mut all = Vec::new();
        let freed = loop {
            let (t, c) = (Instant::now(), cpu_ns());
            let tick = heap.tick(Duration::from_millis(2));
            let (w, c) = (t.elapsed(), cpu_ns() - c);
            ticks += 1;
            most_wall = most_wall.max(w);
            most_cpu = most_cpu.max(c);
            all.push((
                w,
                tick.work,
                format!("{:?}->{:?}", tick.began_in, tick.ended_in),
                ticks,
            ));
            if let Some(stats) = tick.completed {
                break stats.freed;
            }
        };
        // Ticks until the tidy is done: the next cycle's are not counted.
        println!(
            "round {round}: freed {freed} in {ticks} ticks; longest tick wall {:.2} ms, cpu {:.2} ms",
            most_wall.as_secs_f64() * 1e3,
            most_cpu as f64 / 1e6
        );
        longest.push(most_wall.as_secs_f64() * 1e3);
        all.sort_by_key(|a| std::cmp::Reverse(a.0));
        for (w, work, ph, k) in all.iter().take(4) {
            println!(
                "  tick {k}: {:.2} ms, {work} units, {ph}",
                w.as_secs_f64() * 1e3
            );
        }
        for h in kept {
            heap.remove_from_root(h).unwrap();
        }
        heap.collect().expect("collect");
    }
    println!("median longest tick wall {:.2} ms", median(longest));
}

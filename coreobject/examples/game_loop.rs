//! A small game loop: spawn, destroy, weak targets, and a collector that
//! runs incrementally inside each frame's tick.
//!
//! Run with `cargo run --release -p coreobject --example game_loop`.

use std::time::{Duration, Instant};

use coreobject::{GcConfig, Heap, HeapConfig, Obj, Object, Weak};

#[derive(Object, Default)]
struct World {
    actors: Vec<Obj<Actor>>,
}

#[derive(Object)]
struct Actor {
    hp: i32,
    /// Whom this actor chases: a weak handle, so it keeps no one alive.
    target: Option<Weak<Actor>>,
    /// What it carries: strong handles, traced.
    items: Vec<Obj<Item>>,
}

#[derive(Object)]
struct Item {
    weight: u32,
}

const FRAME: Duration = Duration::from_micros(16_667);

fn main() {
    let gc = GcConfig {
        // At most 1 ms of collection per frame.
        incremental: Some(Duration::from_millis(1)),
        // A cycle each time the heap doubles since the last one's survivors.
        growth: Some(2.0),
        growth_floor: 10_000,
        ..GcConfig::MANUAL
    };
    let mut heap = Heap::with_config(HeapConfig {
        gc,
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    let world = heap.create(World::default());
    heap.add_to_root(world).unwrap();

    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let (mut slowest, mut cycles, mut killed) = (Duration::ZERO, 0, 0);
    for frame in 0..600 {
        // Spawn a few actors carrying items, each chasing a random other one.
        for _ in 0..200 {
            let items = (0..3).map(|w| heap.create(Item { weight: w })).collect();
            let n = heap[world].actors.len();
            let target = (n > 0).then(|| heap[world].actors[next() as usize % n].downgrade());
            let actor = heap.create(Actor {
                hp: 10,
                target,
                items,
            });
            heap[world].actors.push(actor);
        }
        // Actors hit their targets; the dead leave the world.
        let actors = heap[world].actors.clone();
        for a in actors {
            if let Some(t) = heap[a].target.and_then(|w| heap.upgrade(w)) {
                heap[t].hp -= (next() % 4) as i32;
            }
        }
        let before = heap[world].actors.len();
        let alive: Vec<_> = {
            let w = &heap[world];
            w.actors
                .iter()
                .copied()
                .filter(|&a| heap[a].hp > 0)
                .collect()
        };
        killed += before - alive.len();
        heap[world].actors = alive;

        let t = Instant::now();
        let tick = heap.tick(FRAME);
        slowest = slowest.max(t.elapsed());
        if let Some(stats) = tick.completed {
            cycles += 1;
            if cycles <= 3 {
                println!(
                    "frame {frame}: cycle {cycles} freed {} objects in {} slices (longest {:?})",
                    stats.freed, stats.slices, stats.max_slice
                );
            }
        }
    }
    let carried: u32 = heap[world]
        .actors
        .iter()
        .flat_map(|&a| heap[a].items.clone())
        .map(|i| heap[i].weight)
        .sum();
    println!(
        "600 frames: {killed} actors killed, {cycles} cycles, longest tick {slowest:?}, {} live objects, carried weight {carried}",
        heap.len()
    );
}

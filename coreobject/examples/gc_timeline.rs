//! The collector on a timeline: a small game loop whose frames and collector
//! slices are written as a Chrome trace (open it in Perfetto,
//! <https://ui.perfetto.dev>, or `chrome://tracing`).
//!
//! The collector emits `tracing` spans: `gc.collect` around an explicit
//! collection, `gc.slice` for each slice (fields `phase`, `work`, `freed`,
//! `completed`, `forced`), and inside it `gc.mark`, `gc.sweep`, `gc.destroy`
//! and `gc.free`. Any subscriber sees them; this example uses
//! `tracing-chrome`, and wraps each frame in a span of its own.
//!
//! Run with `cargo run --release -p coreobject --example gc_timeline [PATH]`
//! (the trace goes to `target/gc_timeline.json` by default).

use std::time::Duration;

use coreobject::{GcConfig, Heap, HeapConfig, Obj, Object};
use tracing_subscriber::layer::SubscriberExt as _;

#[derive(Object, Default)]
struct World {
    actors: Vec<Obj<Actor>>,
}

#[derive(Object, Default)]
struct Actor {
    parts: Vec<Obj<Part>>,
}

#[derive(Object, Default)]
struct Part {
    hp: u32,
}

const FRAME: Duration = Duration::from_micros(16_667);

fn main() {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/gc_timeline.json".to_string());
    let (chrome, guard) = tracing_chrome::ChromeLayerBuilder::new()
        .file(&path)
        // Span fields (the slices' phase, work and freed) as event args.
        .include_args(true)
        .build();
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(chrome))
        .expect("no other subscriber is set");

    let gc = GcConfig {
        // At most 1 ms of collection per tick.
        incremental: Some(Duration::from_millis(1)),
        // A cycle each time the heap doubles since the last one's survivors.
        growth: Some(2.0),
        growth_floor: 20_000,
        ..GcConfig::MANUAL
    };
    let mut heap = Heap::with_config(HeapConfig {
        gc,
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    let world = heap.create(World::default());
    heap.add_to_root(world).unwrap();

    let mut cycles = 0;
    for frame in 0..300u32 {
        let _frame = tracing::info_span!("frame", frame).entered();
        {
            let _logic = tracing::info_span!("game logic").entered();
            // Spawn actors with parts; drop the oldest ones from the world.
            for _ in 0..400 {
                let parts = (0..4).map(|hp| heap.create(Part { hp })).collect();
                let actor = heap.create(Actor { parts });
                heap[world].actors.push(actor);
            }
            let actors = &mut heap[world].actors;
            if actors.len() > 20_000 {
                actors.drain(..2_000);
            }
        }
        let tick = heap.tick(FRAME);
        cycles += usize::from(tick.completed.is_some());
    }
    heap.collect().unwrap();
    drop(guard); // flushes the trace file
    println!(
        "{cycles} cycles in 300 frames, {} objects live; wrote {path} (open it in https://ui.perfetto.dev)",
        heap.len()
    );
}

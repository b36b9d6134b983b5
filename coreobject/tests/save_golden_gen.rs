//! Writes the old-version golden packages that `save_golden.rs` loads: a
//! ship and its crates as version 1 of their classes laid them out. Run
//! only to make them again (they are committed):
//! `cargo test -p coreobject --test save_golden_gen -- --ignored`.

use coreobject::save::{SaveOptions, Selection};
use coreobject::{Heap, Obj, Object};

/// Version 1 of the class now called `Ship`.
#[derive(Object, Default)]
#[object(save, name = "Boat")]
struct Boat {
    name: String,
    hull: u32,
    crew_size: u16,
    speed_kmh: f32,
    cargo: Vec<Obj<Crate>>,
}

/// Version 1 of `Crate`: it had a label.
#[derive(Object, Default)]
#[object(save, name = "Crate")]
struct Crate {
    label: String,
    weight: u32,
}

#[test]
#[ignore = "writes tests/golden/; run by hand when the old layouts are to be made again"]
fn write_golden_v1() {
    let heap = Heap::new();
    let port = heap
        .spawn(Crate {
            label: "port".into(),
            weight: 0,
        })
        .name("Port")
        .root()
        .create()
        .unwrap();
    let ship = heap
        .spawn(Boat {
            name: "Mary".into(),
            hull: 3,
            crew_size: 12,
            speed_kmh: 37.04,
            cargo: Vec::new(),
        })
        .name("Mary")
        .outer(port)
        .create()
        .unwrap();
    let a = heap
        .spawn(Crate {
            label: "tea".into(),
            weight: 40,
        })
        .outer(ship)
        .create()
        .unwrap();
    let b = heap
        .spawn(Crate {
            label: "rum".into(),
            weight: 25,
        })
        .outer(ship)
        .name("Rum")
        .create()
        .unwrap();
    let mut heap = heap;
    heap[ship].cargo = vec![a, b, port];
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden");
    let mut bin = Vec::new();
    heap.save(Selection::subtree(ship), &mut bin).unwrap();
    std::fs::write(format!("{dir}/ship_v1.bin"), bin).unwrap();
    let mut json = Vec::new();
    heap.save_with(Selection::subtree(ship), &SaveOptions::json(), &mut json)
        .unwrap();
    std::fs::write(format!("{dir}/ship_v1.json"), json).unwrap();
}

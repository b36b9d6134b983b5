//! The `saveload` workload: saving and loading a world (coreobject alone,
//! with serde peers measured in the same repetition on the same data).
//!
//! The world: `N` objects in 1,000 rooted levels; every object has an
//! outer (its level), a name (`Thing_k`), three scalars (`u64`, `f32`,
//! `u32`) and 1 to 4 strong handles to random objects. coreobject:
//!
//! * **save**: `Heap::save(Selection::all())` into a `Vec` (binary form);
//! * **instantiate**: `Heap::load` of those bytes into an empty heap (decode,
//!   create, patch every handle, take every name);
//! * **restore**: `Heap::restore` of the same bytes (a new heap, exact).
//!
//! Peers, on the same data as plain structs (`u32` indices for handles and
//! the outer, the name as a `String`), a `Vec` of them encoded whole:
//! postcard, bitcode (its own derive) and serde_json, each encode and
//! decode; and "postcard decode + create": decoding with postcard then
//! creating the same objects in a heap (`spawn` with outer and name, then
//! the handles patched), what a program without `Heap::load` writes.
//!
//! Reported: ns/object for each, bytes/object for each form, and the issue's
//! ratios: save / postcard encode, instantiate / (postcard decode + create),
//! restore / instantiate, and coreobject bytes / (postcard bytes + 6 per
//! object).

use std::time::Instant;

use coreobject::save::Selection;
use coreobject::{GcConfig, Heap, HeapConfig, Obj, Object};
use serde::{Deserialize, Serialize};

use crate::harness::{verify, Metric, Outcome, Peer, Run};

/// The workload's parameters.
#[derive(Clone, Debug)]
pub struct Params {
    /// Objects.
    pub objects: usize,
}

/// Levels the objects are spread over (each rooted, each an outer).
pub const LEVELS: usize = 1000;

/// A rooted level, the outer of a thousandth of the objects.
#[derive(Object, Default)]
#[object(save)]
pub(crate) struct Level {
    index: u32,
}

/// An object of the world: three scalars and 1-4 handles.
#[derive(Object, Default)]
#[object(save)]
pub(crate) struct Thing {
    pub(crate) a: u64,
    b: f32,
    c: u32,
    links: Vec<Obj<Thing>>,
}

/// The same object as plain data.
#[derive(Clone, Serialize, Deserialize, bitcode::Encode, bitcode::Decode, PartialEq, Debug)]
pub(crate) struct Plain {
    a: u64,
    b: f32,
    c: u32,
    links: Vec<u32>,
    outer: u32,
    name: String,
}

/// The metrics, in table order.
pub fn metrics() -> Vec<Metric> {
    vec![
        Metric::new("save", "coreobject save", "ns/object"),
        Metric::new("instantiate", "coreobject instantiate", "ns/object"),
        Metric::new("restore", "coreobject restore", "ns/object"),
        Metric::new("postcard_encode", "postcard encode", "ns/object"),
        Metric::new("postcard_decode", "postcard decode", "ns/object"),
        Metric::new(
            "postcard_decode_create",
            "postcard decode + create",
            "ns/object",
        ),
        Metric::new("bitcode_encode", "bitcode encode", "ns/object"),
        Metric::new("bitcode_decode", "bitcode decode", "ns/object"),
        Metric::new("json_encode", "serde_json encode", "ns/object"),
        Metric::new("json_decode", "serde_json decode", "ns/object"),
        Metric::new("bytes", "coreobject bytes", "B/object"),
        Metric::new("postcard_bytes", "postcard bytes", "B/object"),
        Metric::new("bitcode_bytes", "bitcode bytes", "B/object"),
        Metric::new("json_bytes", "serde_json bytes", "B/object"),
        Metric::new("save_ratio", "save / postcard encode", "x"),
        Metric::new(
            "instantiate_ratio",
            "instantiate / (postcard decode + create)",
            "x",
        ),
        Metric::new("restore_ratio", "restore / instantiate", "x"),
        Metric::new("size_ratio", "bytes / (postcard + 6 B)", "x"),
    ]
}

pub(crate) fn config(n: usize) -> HeapConfig {
    HeapConfig {
        max_objects: ((n + LEVELS) as u32).max(HeapConfig::DEFAULT.max_objects),
        gc: GcConfig::MANUAL,
        ..HeapConfig::DEFAULT
    }
}

/// The world, and the same data as plain structs (levels first).
fn world(n: usize) -> Result<(Heap, Vec<Plain>), String> {
    world_and_things(n).map(|(heap, _, plain)| (heap, plain))
}

/// The world, its objects' handles (levels not included), and the same
/// data as plain structs (levels first).
#[allow(clippy::type_complexity)]
pub(crate) fn world_and_things(n: usize) -> Result<(Heap, Vec<Obj<Thing>>, Vec<Plain>), String> {
    let mut heap = Heap::with_config(config(n)).map_err(|e| e.to_string())?;
    let mut rng = fastrand::Rng::with_seed(25);
    let mut plain = Vec::with_capacity(n + LEVELS);
    let mut levels = Vec::with_capacity(LEVELS);
    for i in 0..LEVELS {
        let l = heap
            .spawn(Level { index: i as u32 })
            .name(format!("Level_{i}"))
            .root()
            .create()
            .map_err(|e| e.to_string())?;
        levels.push(l);
        plain.push(Plain {
            a: 0,
            b: 0.0,
            c: i as u32,
            links: Vec::new(),
            outer: u32::MAX,
            name: format!("Level_{i}"),
        });
    }
    let mut things = Vec::with_capacity(n);
    for k in 0..n {
        let level = k % LEVELS;
        let t = Thing {
            a: rng.u64(..),
            b: rng.f32(),
            c: rng.u32(..1000),
            links: Vec::new(),
        };
        plain.push(Plain {
            a: t.a,
            b: t.b,
            c: t.c,
            links: Vec::new(),
            outer: level as u32,
            name: format!("Thing_{k}"),
        });
        let h = heap
            .spawn(t)
            .outer(levels[level])
            .name(format!("Thing_{k}"))
            .create()
            .map_err(|e| e.to_string())?;
        things.push(h);
    }
    for k in 0..n {
        let m = rng.usize(1..=4);
        let links: Vec<u32> = (0..m).map(|_| rng.u32(..n as u32)).collect();
        heap[things[k]].links = links.iter().map(|&j| things[j as usize]).collect();
        plain[LEVELS + k].links = links.iter().map(|&j| (LEVELS as u32) + j).collect();
    }
    Ok((heap, things, plain))
}

/// What a program without `Heap::load` writes: create each object with its
/// outer and name, then patch the handles.
fn create_from_plain(plain: &[Plain]) -> Result<Heap, String> {
    let mut heap = Heap::with_config(config(plain.len())).map_err(|e| e.to_string())?;
    let mut levels = Vec::with_capacity(LEVELS);
    let mut things: Vec<Obj<Thing>> = Vec::with_capacity(plain.len());
    for p in plain {
        if p.outer == u32::MAX {
            let l = heap
                .spawn(Level { index: p.c })
                .name(p.name.as_str())
                .root()
                .create()
                .map_err(|e| e.to_string())?;
            levels.push(l);
        } else {
            let t = Thing {
                a: p.a,
                b: p.b,
                c: p.c,
                links: Vec::new(),
            };
            let h = heap
                .spawn(t)
                .outer(levels[p.outer as usize])
                .name(p.name.as_str())
                .create()
                .map_err(|e| e.to_string())?;
            things.push(h);
        }
    }
    for (p, &t) in plain[LEVELS..].iter().zip(&things) {
        heap[t].links = p
            .links
            .iter()
            .map(|&j| things[j as usize - LEVELS])
            .collect();
    }
    Ok(heap)
}

/// One repetition.
pub fn run(peer: Peer, p: &Params) -> Outcome {
    if peer != Peer::CoreObject {
        return Outcome::Na("coreobject alone (peers run inside its repetition)");
    }
    match measure(p.objects) {
        Ok(run) => Outcome::Ran(run),
        Err(e) => Outcome::Ran(Run {
            values: vec![f64::NAN; metrics().len()],
            extra: Vec::new(),
            check: Err(e),
        }),
    }
}

fn measure(n: usize) -> Result<Run, String> {
    let (heap, plain) = world(n)?;
    let total = (n + LEVELS) as f64;
    let per = |t: Instant| t.elapsed().as_secs_f64() * 1e9 / total;
    let mut checks = Vec::new();

    crate::alloc::settle();
    let t = Instant::now();
    let mut bytes = Vec::new();
    heap.save(Selection::all(), &mut bytes)
        .map_err(|e| e.to_string())?;
    let save = per(t);

    crate::alloc::settle();
    let t = Instant::now();
    let mut loaded_heap = Heap::with_config(config(n)).map_err(|e| e.to_string())?;
    let loaded = loaded_heap.load(&bytes[..]).map_err(|e| e.to_string())?;
    let instantiate = per(t);
    checks.push((
        loaded_heap.len() == heap.len(),
        format!("instantiated {} of {}", loaded_heap.len(), heap.len()),
    ));
    let k = LEVELS + n / 2;
    let (orig, copy) = (
        heap.iter().nth(k).map(|o| o.id()),
        loaded.objects.get(k).copied(),
    );
    if let (Some(o), Some(c)) = (orig, copy) {
        checks.push((
            heap.path_name(o) == loaded_heap.path_name(c),
            "a path differs".into(),
        ));
    }
    drop(loaded_heap);

    crate::alloc::settle();
    let t = Instant::now();
    let restored = Heap::restore_with(&bytes[..], Some(config(n))).map_err(|e| e.to_string())?;
    let restore = per(t);
    checks.push((
        restored.len() == heap.len(),
        format!("restored {} of {}", restored.len(), heap.len()),
    ));
    if let Some(o) = orig {
        let back = restored.rehome(o);
        checks.push((
            restored.path_name(back) == heap.path_name(o),
            "a restored path differs".into(),
        ));
    }
    drop(restored);

    crate::alloc::settle();
    let t = Instant::now();
    let pc = postcard::to_allocvec(&plain).map_err(|e| e.to_string())?;
    let postcard_encode = per(t);
    crate::alloc::settle();
    let t = Instant::now();
    let back: Vec<Plain> = postcard::from_bytes(&pc).map_err(|e| e.to_string())?;
    let postcard_decode = per(t);
    let created = create_from_plain(&back)?;
    let postcard_decode_create = per(t);
    checks.push((back == plain, "postcard round trip".into()));
    checks.push((created.len() == heap.len(), "created count".into()));
    drop((created, back));

    crate::alloc::settle();
    let t = Instant::now();
    let bc = bitcode::encode(&plain);
    let bitcode_encode = per(t);
    let t = Instant::now();
    let back: Vec<Plain> = bitcode::decode(&bc).map_err(|e| e.to_string())?;
    let bitcode_decode = per(t);
    checks.push((back == plain, "bitcode round trip".into()));
    drop(back);

    crate::alloc::settle();
    let t = Instant::now();
    let js = serde_json::to_vec(&plain).map_err(|e| e.to_string())?;
    let json_encode = per(t);
    let t = Instant::now();
    let back: Vec<Plain> = serde_json::from_slice(&js).map_err(|e| e.to_string())?;
    let json_decode = per(t);
    checks.push((back.len() == plain.len(), "serde_json round trip".into()));
    drop(back);

    let size = |b: usize| b as f64 / total;
    let values = vec![
        save,
        instantiate,
        restore,
        postcard_encode,
        postcard_decode,
        postcard_decode_create,
        bitcode_encode,
        bitcode_decode,
        json_encode,
        json_decode,
        size(bytes.len()),
        size(pc.len()),
        size(bc.len()),
        size(js.len()),
        save / postcard_encode,
        instantiate / postcard_decode_create,
        restore / instantiate,
        size(bytes.len()) / (size(pc.len()) + 6.0),
    ];
    Ok(Run {
        values,
        extra: Vec::new(),
        check: verify(&checks),
    })
}

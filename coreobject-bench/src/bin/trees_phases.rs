//! binary-trees (the `binary-trees` workload's plan: a stretch tree of depth
//! D + 1, a long-lived tree of depth D, then `2^(D - d + 4)` trees of each
//! depth d in 4, 6, …, D) as the obvious program writes it: `Heap::new()`,
//! `Heap::create` (or `Heap::create_mut` with `mut`), `tick` after every
//! tree; `YT=n` in the environment sets `GcConfig::young_threshold`, `GEN=0`
//! turns `GcConfig::generational` off (major cycles only). Prints
//! the checksum (14,985,902 at depth 16) and where the time went: building,
//! checking, `tick`, and the cycles' own mark / sweep / destroy times.
//!
//! `cargo run --release -p coreobject-bench --bin trees_phases -- 16`: one
//! process runs one program, so that the process's CPU time is that
//! program's alone (the `binary-trees` workload runs three programs in one
//! worker); wall-clock figures on a loaded machine include time spent
//! switched out.
use std::time::{Duration, Instant};

use coreobject::{CycleKind, Heap, HeapConfig, Obj, Object};

#[derive(Object)]
struct T {
    left: Option<Obj<T>>,
    right: Option<Obj<T>>,
}

fn make(h: &Heap, d: u32) -> Obj<T> {
    let (left, right) = if d > 0 {
        (Some(make(h, d - 1)), Some(make(h, d - 1)))
    } else {
        (None, None)
    };
    h.create(T { left, right })
}

fn make_mut(h: &mut Heap, d: u32) -> Obj<T> {
    let (left, right) = if d > 0 {
        (Some(make_mut(h, d - 1)), Some(make_mut(h, d - 1)))
    } else {
        (None, None)
    };
    h.create_mut(T { left, right })
}

fn check(h: &Heap, n: Obj<T>) -> u64 {
    let t = &h[n];
    1 + match (t.left, t.right) {
        (Some(l), Some(r)) => check(h, l) + check(h, r),
        _ => 0,
    }
}

fn main() {
    let max: u32 = std::env::args()
        .nth(1)
        .map_or(16, |s| s.parse().expect("depth"));
    let owner = std::env::args().nth(2).as_deref() == Some("mut");
    let yt = std::env::var("YT").ok();
    let gen = std::env::var("GEN").ok();
    let mut h = if yt.is_none() && gen.is_none() {
        Heap::new()
    } else {
        let mut c = HeapConfig::DEFAULT;
        if let Some(v) = yt {
            c.gc.young_threshold = Some(v.parse().expect("YT"));
        }
        if let Some(v) = gen {
            c.gc.generational = v != "0";
        }
        Heap::with_config(c).expect("config")
    };
    let (mut build, mut walk, mut tick) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let (mut mark, mut sweep, mut destroy) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let (mut cycles, mut minors) = (0, 0);
    let t0 = Instant::now();
    let mut tree = |h: &mut Heap, d: u32| -> u64 {
        let a = Instant::now();
        let t = if owner { make_mut(h, d) } else { make(h, d) };
        let b = Instant::now();
        let c = check(h, t);
        let e = Instant::now();
        let done = h.tick(Duration::ZERO).completed;
        tick += e.elapsed();
        build += b - a;
        walk += e - b;
        if let Some(s) = done {
            mark += s.mark;
            sweep += s.sweep;
            destroy += s.destroy;
            cycles += 1;
            minors += usize::from(s.kind == CycleKind::Minor);
        }
        c
    };
    let mut sum = tree(&mut h, max + 1);
    let long = if owner {
        make_mut(&mut h, max)
    } else {
        make(&h, max)
    };
    h.add_to_root(long).expect("root");
    for d in (4..=max).step_by(2) {
        for _ in 0..(1u64 << (max - d + 4)) {
            sum += tree(&mut h, d);
        }
    }
    sum += check(&h, long);
    println!(
        "checksum {sum}; wall {:?}: build {build:?}, check {walk:?}, tick {tick:?} \
         (mark {mark:?}, sweep {sweep:?}, destroy {destroy:?}; {cycles} cycles, {minors} minor)",
        t0.elapsed()
    );
}

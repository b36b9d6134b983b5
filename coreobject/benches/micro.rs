//! Micro-benchmarks of the object table's hot paths against the data
//! structures it competes with: `slotmap::SlotMap`, `Box` and `Vec`.
//!
//! ```sh
//! cargo bench -p coreobject --bench micro -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! Every group reports throughput per element, so criterion's `thrpt` line
//! and `time / elements` give the per-object cost. Groups:
//!
//! * `create`: 10k creations into a fresh (or, for `heap_reused`, collected)
//!   container, against `SlotMap::insert` and `Box::new` of the same payload;
//! * `resolve`: random live handles, access order precomputed, over 1k (hot
//!   caches) and 100k objects;
//! * `resolve_stale`: handles whose objects are gone resolve to `None`;
//! * `iterate`: summing a field over every live object;
//! * `roots`: `add_to_root` followed by `remove_from_root`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use coreobject::{Heap, HeapConfig, Obj, Object};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use slotmap::{DefaultKey, SlotMap};

/// A 32-byte payload, as a plain struct and as an object.
#[derive(Object, Clone, Copy, Default)]
struct Payload {
    a: u64,
    b: u64,
    c: u64,
    d: u64,
}

const _: () = assert!(std::mem::size_of::<Payload>() == 32);

fn payload(i: u64) -> Payload {
    Payload {
        a: i,
        b: i ^ 0x5555,
        c: i.wrapping_mul(3),
        d: !i,
    }
}

/// Objects created per `create` iteration.
const CREATE_BATCH: u64 = 10_000;
/// Objects in the `resolve`, `resolve_stale` and `iterate` sets.
const LARGE: u64 = 100_000;
/// A set small enough to stay in L1/L2.
const SMALL: u64 = 1_000;
/// Objects rooted and unrooted per `roots` iteration.
const ROOT_BATCH: u64 = 10_000;

/// Settings for every heap in this file.
///
/// With the full 22 generation bits a heap tag can only be leased while its
/// generation floor is 0, and dropping a heap that issued any serial raises
/// that floor, so only 1023 default heaps that created an object can ever
/// exist in one process (`create/heap` makes thousands). With fewer bits the
/// floor has room to climb. Long-lived heaps keep 20 bits (a million reuses
/// per slot); the per-iteration heaps of `create/heap` use 16.
fn config(generation_bits: u32, max_objects: u32, preallocate: bool) -> HeapConfig {
    HeapConfig {
        max_objects,
        preallocate,
        generation_bits,
        ..HeapConfig::DEFAULT
    }
}

/// A long-lived heap with the default cap.
fn long_lived_heap() -> Heap {
    Heap::with_config(config(20, HeapConfig::DEFAULT.max_objects, false)).expect("heap")
}

/// splitmix64: a tiny deterministic generator for access orders.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// A random permutation of `0..n` (Fisher-Yates).
fn permutation(n: u64, seed: u64) -> Vec<usize> {
    let mut rng = SplitMix(seed);
    let mut v: Vec<usize> = (0..n as usize).collect();
    for i in (1..v.len()).rev() {
        let j = (rng.next() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}

fn reorder<T: Copy>(items: &[T], order: &[usize]) -> Vec<T> {
    order.iter().map(|&i| items[i]).collect()
}

// ----- create ----------------------------------------------------------------

fn create(c: &mut Criterion) {
    let mut g = c.benchmark_group("create");
    g.throughput(Throughput::Elements(CREATE_BATCH));

    // A fresh heap per iteration, its chunk preallocated in (untimed) setup;
    // the heap and its objects are dropped after the timed region.
    g.bench_function("heap", |b| {
        b.iter_batched(
            || Heap::with_config(config(16, CREATE_BATCH as u32, true)).expect("heap"),
            |heap| {
                for i in 0..CREATE_BATCH {
                    black_box(heap.create(payload(i)));
                }
                heap
            },
            BatchSize::PerIteration,
        )
    });

    // One long-lived heap, collected (untimed) between batches: creation
    // reuses freed slots, the steady state of a running game.
    g.bench_function("heap_reused", |b| {
        let mut heap = long_lived_heap();
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let start = Instant::now();
                for i in 0..CREATE_BATCH {
                    black_box(heap.create(payload(i)));
                }
                total += start.elapsed();
                heap.collect().expect("collect");
            }
            total
        })
    });

    g.bench_function("slotmap", |b| {
        b.iter_batched(
            || SlotMap::<DefaultKey, Payload>::with_capacity(CREATE_BATCH as usize),
            |mut sm| {
                for i in 0..CREATE_BATCH {
                    black_box(sm.insert(payload(i)));
                }
                sm
            },
            BatchSize::PerIteration,
        )
    });

    // The boxes are kept (as the heap keeps its objects) and freed untimed.
    g.bench_function("box", |b| {
        b.iter_batched(
            || Vec::<Box<Payload>>::with_capacity(CREATE_BATCH as usize),
            |mut v| {
                for i in 0..CREATE_BATCH {
                    v.push(Box::new(payload(i)));
                }
                v
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

// ----- resolve -----------------------------------------------------------------

/// The same `n` payloads in each container, and one random access order.
struct Sets {
    heap: Heap,
    handles: Vec<Obj<Payload>>,
    sm: SlotMap<DefaultKey, Payload>,
    keys: Vec<DefaultKey>,
    sm_boxed: SlotMap<DefaultKey, Box<Payload>>,
    boxed_keys: Vec<DefaultKey>,
    vec: Vec<Payload>,
    indices: Vec<usize>,
}

impl Sets {
    fn new(n: u64) -> Sets {
        // One container at a time, so that each one's allocations are
        // contiguous rather than interleaved with the others'.
        let heap = long_lived_heap();
        let handles: Vec<Obj<Payload>> = (0..n).map(|i| heap.create(payload(i))).collect();
        let mut sm = SlotMap::with_capacity(n as usize);
        let keys: Vec<DefaultKey> = (0..n).map(|i| sm.insert(payload(i))).collect();
        let mut sm_boxed = SlotMap::with_capacity(n as usize);
        let boxed_keys: Vec<DefaultKey> = (0..n)
            .map(|i| sm_boxed.insert(Box::new(payload(i))))
            .collect();
        let vec: Vec<Payload> = (0..n).map(payload).collect();
        let order = permutation(n, 0xC0DE ^ n);
        Sets {
            heap,
            handles: reorder(&handles, &order),
            sm,
            keys: reorder(&keys, &order),
            sm_boxed,
            boxed_keys: reorder(&boxed_keys, &order),
            vec,
            indices: order,
        }
    }
}

fn resolve(c: &mut Criterion) {
    let mut g = c.benchmark_group("resolve");
    for n in [SMALL, LARGE] {
        let s = Sets::new(n);
        let expected: u64 = (0..n).sum();
        g.throughput(Throughput::Elements(n));

        g.bench_function(format!("heap/{n}"), |b| {
            b.iter(|| {
                let mut sum = 0u64;
                for &h in &s.handles {
                    sum = sum.wrapping_add(s.heap.get(h).map_or(0, |p| p.a));
                }
                assert_eq!(sum, expected);
                sum
            })
        });
        g.bench_function(format!("slotmap/{n}"), |b| {
            b.iter(|| {
                let mut sum = 0u64;
                for &k in &s.keys {
                    sum = sum.wrapping_add(s.sm.get(k).map_or(0, |p| p.a));
                }
                assert_eq!(sum, expected);
                sum
            })
        });
        // Same indirection as the heap (a slot, then a separate allocation).
        g.bench_function(format!("slotmap_boxed/{n}"), |b| {
            b.iter(|| {
                let mut sum = 0u64;
                for &k in &s.boxed_keys {
                    sum = sum.wrapping_add(s.sm_boxed.get(k).map_or(0, |p| p.a));
                }
                assert_eq!(sum, expected);
                sum
            })
        });
        g.bench_function(format!("vec/{n}"), |b| {
            b.iter(|| {
                let mut sum = 0u64;
                for &i in &s.indices {
                    sum = sum.wrapping_add(s.vec[i].a);
                }
                assert_eq!(sum, expected);
                sum
            })
        });
    }
    g.finish();
}

/// Writes through the one mutation door, which is also the write barrier:
/// `heap/` after a collection (every object old, so the first write of each
/// after it joins the remembered set and later ones find it there),
/// `heap_young/` with no collection (every object young: the barrier tests a
/// mark bit), `heap_no_gen/` with generational bookkeeping off.
fn get_mut(c: &mut Criterion) {
    let mut g = c.benchmark_group("get_mut");
    for n in [SMALL, LARGE] {
        g.throughput(Throughput::Elements(n));
        for (name, collect, gen) in [
            ("heap", true, true),
            ("heap_young", false, true),
            ("heap_no_gen", true, false),
        ] {
            let mut s = Sets::new(n);
            s.heap.gc_config_mut().generational = gen;
            for &h in &s.handles {
                s.heap.add_to_root(h).unwrap();
            }
            if collect {
                // Twice: the setting takes effect when a cycle completes.
                s.heap.collect().unwrap();
                s.heap.collect().unwrap();
            }
            g.bench_function(format!("{name}/{n}"), |b| {
                b.iter(|| {
                    for &h in &s.handles {
                        if let Some(p) = s.heap.get_mut(h) {
                            p.a = p.a.wrapping_add(1);
                        }
                    }
                })
            });
        }
        let mut s = Sets::new(n);
        g.bench_function(format!("slotmap/{n}"), |b| {
            b.iter(|| {
                for &k in &s.keys {
                    if let Some(p) = s.sm.get_mut(k) {
                        p.a = p.a.wrapping_add(1);
                    }
                }
            })
        });
    }
    g.finish();
}

// ----- resolve stale -------------------------------------------------------------

fn resolve_stale(c: &mut Criterion) {
    let mut g = c.benchmark_group("resolve_stale");
    g.throughput(Throughput::Elements(LARGE));

    let mut heap = long_lived_heap();
    let handles: Vec<Obj<Payload>> = (0..LARGE).map(|i| heap.create(payload(i))).collect();
    let stats = heap.collect().expect("collect");
    assert_eq!(stats.freed, LARGE as usize, "nothing is rooted");
    let order = permutation(LARGE, 0x57A1E);
    let stale = reorder(&handles, &order);

    let mut sm = SlotMap::<DefaultKey, Payload>::with_capacity(LARGE as usize);
    let keys: Vec<DefaultKey> = (0..LARGE).map(|i| sm.insert(payload(i))).collect();
    for &k in &keys {
        sm.remove(k);
    }
    let stale_keys = reorder(&keys, &order);

    g.bench_function("heap", |b| {
        b.iter(|| {
            let mut misses = 0usize;
            for &h in &stale {
                misses += heap.get(h).is_none() as usize;
            }
            assert_eq!(misses, LARGE as usize);
            misses
        })
    });
    g.bench_function("slotmap", |b| {
        b.iter(|| {
            let mut misses = 0usize;
            for &k in &stale_keys {
                misses += sm.get(k).is_none() as usize;
            }
            assert_eq!(misses, LARGE as usize);
            misses
        })
    });
    g.finish();
}

// ----- iterate ---------------------------------------------------------------------

fn iterate(c: &mut Criterion) {
    let mut g = c.benchmark_group("iterate");
    g.throughput(Throughput::Elements(LARGE));
    let s = Sets::new(LARGE);
    let expected: u64 = (0..LARGE).sum();

    g.bench_function("heap_iter_of", |b| {
        b.iter(|| {
            let sum: u64 = s.heap.iter_of::<Payload>().map(|(_, p)| p.a).sum();
            assert_eq!(sum, expected);
            sum
        })
    });
    g.bench_function("slotmap_values", |b| {
        b.iter(|| {
            let sum: u64 = s.sm.values().map(|p| p.a).sum();
            assert_eq!(sum, expected);
            sum
        })
    });
    g.bench_function("slotmap_boxed_values", |b| {
        b.iter(|| {
            let sum: u64 = s.sm_boxed.values().map(|p| p.a).sum();
            assert_eq!(sum, expected);
            sum
        })
    });
    g.bench_function("vec_iter", |b| {
        b.iter(|| {
            let sum: u64 = black_box(&s.vec).iter().map(|p| p.a).sum();
            assert_eq!(sum, expected);
            sum
        })
    });
    g.finish();
}

// ----- roots -------------------------------------------------------------------------

fn roots(c: &mut Criterion) {
    let mut g = c.benchmark_group("roots");
    g.throughput(Throughput::Elements(ROOT_BATCH));
    let heap = long_lived_heap();
    let handles: Vec<Obj<Payload>> = (0..ROOT_BATCH).map(|i| heap.create(payload(i))).collect();

    g.bench_function("add_remove", |b| {
        b.iter(|| {
            for &h in &handles {
                heap.add_to_root(h).expect("live");
                heap.remove_from_root(h).expect("live");
            }
        })
    });
    g.finish();
    assert!(!heap.is_rooted(handles[0]));
}

// `create` runs last: it makes and drops thousands of heaps, and the
// allocator's state after that (glibc raises its mmap threshold once a 1.5 MiB
// chunk is freed, so later chunks and objects interleave on the brk heap)
// scatters objects built afterwards and makes `resolve` 3-5x slower.
criterion_group!(
    benches,
    resolve,
    get_mut,
    resolve_stale,
    iterate,
    roots,
    create
);
criterion_main!(benches);

//! Review of the per-thread creation caches (`array/tlab.rs`): scenarios
//! where a cache's reserved indices or object slots make a `&Heap` reader
//! or creator see something wrong.

use std::sync::atomic::{AtomicBool, Ordering};

use coreobject::{Heap, HeapConfig, Object};

/// The caches' batch of indices and the smallest heap that has caches
/// (`tlab::BATCH` and `tlab::MIN_CAP`; smaller under miri).
const BATCH: u32 = if cfg!(miri) { 8 } else { 64 };
const MIN_CAP: u32 = BATCH * 128;

#[derive(Object, Debug)]
struct Small {
    a: u64,
}

/// `memory_report` (through `&Heap`) reads each size class's object count
/// under its lock, then subtracts the slots held in caches, read later.
/// A refill between the two (a thread creating through `&Heap`) puts
/// `SLAB_BATCH - 1` slots in a cache after their class's count was read:
/// the subtraction goes below zero (a panic with overflow checks, a huge
/// count without them). Here the class holds one object before each refill.
#[test]
fn memory_report_while_a_thread_refills_its_cache() {
    let mut heap = Heap::new();
    let keep = heap.create_mut(Small { a: 0 });
    heap.add_to_root(keep).unwrap();
    let rounds = if cfg!(miri) { 4 } else { 3000 };
    for round in 0..rounds {
        // Frees the last round's object: the class is back to one object,
        // and the sync empties every cache (a new epoch, so the next
        // creation through `&Heap` refills).
        heap.collect().unwrap();
        let done = AtomicBool::new(false);
        let heap = &heap;
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut x = 0u64;
                for i in 0..(round % 64) * 50 {
                    x = x.wrapping_add(std::hint::black_box(i));
                }
                std::hint::black_box(x);
                heap.create(Small { a: 1 });
                done.store(true, Ordering::Release);
            });
            s.spawn(|| loop {
                let last = done.load(Ordering::Acquire);
                let r = heap.memory_report();
                for c in &r.page_classes {
                    assert!(
                        c.objects <= 1 << 20,
                        "round {round}: class of {} bytes reports {} objects",
                        c.slot,
                        c.objects
                    );
                }
                if last {
                    break;
                }
            });
        });
    }
}

/// A heap of `cap` objects at most, holding one object from a thread that
/// then ended, leaving the rest of its cache's batch reserved.
fn a_finished_threads_batch(cap: u32) -> Heap {
    let heap = Heap::with_config(HeapConfig {
        max_objects: cap,
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    std::thread::scope(|s| {
        s.spawn(|| heap.create(Small { a: 0 }));
    });
    heap
}

/// A thread that created once through `&Heap` keeps its cache's other
/// reserved indices until the next sync under `&mut`: another thread
/// creating through `&Heap` meanwhile may run into the cap up to a batch
/// early (documented), and creation through `&mut Heap` then syncs and
/// fills the heap to its exact cap.
#[test]
fn creation_through_shared_heap_reaches_the_cap() {
    let cap = MIN_CAP;
    let mut heap = a_finished_threads_batch(cap);
    let shared = &heap;
    // Another thread fills the heap through `&Heap`.
    let made = std::thread::scope(|s| {
        s.spawn(|| {
            let mut made = 0u32;
            while shared.try_create(Small { a: 1 }).is_ok() {
                made += 1;
            }
            made
        })
        .join()
        .unwrap()
    });
    assert!(
        1 + made + BATCH > cap,
        "creation through &Heap failed at {} objects, more than a batch before the cap {cap}",
        1 + made
    );
    let stats = heap.table_stats();
    assert_eq!(
        stats.objects + stats.reserved + stats.free,
        cap as usize,
        "{stats:?}"
    );
    let mut more = 0;
    while heap.try_create_mut(Small { a: 2 }).is_ok() {
        more += 1;
    }
    assert_eq!(1 + made + more, cap, "the cap through &mut Heap is exact");
    assert_eq!(heap.len(), cap as usize);
}

#[derive(Object)]
struct Big {
    bytes: Box<[u8; 16]>,
    pad: [u64; 1024],
}

/// A cache claimed by a creation whose object is too large for the pages
/// holds no slots (its class field is 0, "none"); `held_slots` reports it
/// as class `usize::MAX` with no slots, and `page_classes` asks for that
/// class's slot size: `(usize::MAX + 1) * 8`, an overflow. No race: one
/// thread creates a large object through `&Heap`, then `memory_report`.
#[test]
fn memory_report_after_a_large_object_through_shared_heap() {
    let mut heap = Heap::new();
    let small = heap.create_mut(Small { a: 0 });
    heap.add_to_root(small).unwrap();
    let shared = &heap;
    std::thread::scope(|s| {
        s.spawn(|| {
            shared.create(Big {
                bytes: Box::new([1; 16]),
                pad: [0; 1024],
            })
        });
    });
    let r = heap.memory_report();
    assert!(r.page_classes.iter().all(|c| c.objects <= 1));
}

/// The same through `&mut Heap`: `try_create_mut` settles the caches
/// before giving up, so a finished thread's cache holding free indices
/// does not make it report the cap early.
#[test]
fn creation_through_mut_heap_reaches_the_cap() {
    let cap = MIN_CAP;
    let mut heap = a_finished_threads_batch(cap);
    let mut made = 0u32;
    while heap.try_create_mut(Small { a: 1 }).is_ok() {
        made += 1;
    }
    assert_eq!(
        1 + made,
        cap,
        "creation through &mut Heap failed at the cap with {} objects in a heap of {cap}",
        heap.len()
    );
}

/// `table_stats` between collections: every slot below the high water is
/// an object, free, retired, or reserved in a thread's cache (a finished
/// thread's unused batch that is not just above the cursor); a collection
/// gives the reserved ones back to `free`.
#[test]
fn table_stats_account_for_every_slot_between_collections() {
    let mut heap = Heap::new();
    for v in 0..2 {
        std::thread::scope(|s| {
            s.spawn(|| heap.create(Small { a: v }));
        });
    }
    let t = heap.table_stats();
    assert_eq!(t.objects, 2);
    assert_eq!(
        t.high_water as usize,
        t.objects + t.free + t.retired as usize + t.reserved,
        "slots unaccounted for: {t:?}"
    );
    assert!(t.reserved > 0, "the first thread's batch is a hole: {t:?}");
    heap.collect().unwrap();
    let t = heap.table_stats();
    assert_eq!(t.reserved, 0, "{t:?}");
    assert_eq!(
        t.high_water as usize,
        t.objects + t.free + t.retired as usize,
        "{t:?}"
    );
}

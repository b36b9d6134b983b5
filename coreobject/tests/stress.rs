//! Multi-threaded stress of the lock-free table.
//!
//! Several threads create objects through one shared `&Heap` at once (with
//! `std::thread::scope`), rooting some, reading back their own objects and
//! racing for the same name. Between rounds the heap collects, freeing the
//! unrooted half plus some survivors, so the next round's creations take
//! slots from the free list while others append. After every round: every
//! handle resolves to its own value, live indices are unique, the slots
//! reused are exactly the ones freed, the table grew by exactly the rest,
//! `len` is right and every freed handle is stale. Strong handles are dropped
//! on worker threads as well.

use std::collections::HashSet;
use std::sync::Barrier;

use coreobject::{Error, Heap, Obj, Object, StrongObj};

#[derive(Object, Debug, PartialEq)]
struct Item {
    round: u32,
    thread: u32,
    n: u32,
}

const THREADS: u32 = 4;
const PER_THREAD: u32 = 4_000;
const ROUNDS: u32 = 5;

#[test]
#[cfg_attr(
    miri,
    ignore = "the threads contend on parking_lot locks (roots, names), whose contended path casts integers to pointers (rejected by -Zmiri-strict-provenance); unsafe_core races creation without them"
)]
fn concurrent_creation_with_frees_between_rounds() {
    let mut heap = Heap::new();
    let mut live: Vec<Obj<Item>> = Vec::new();
    let mut dead: Vec<Obj<Item>> = Vec::new();
    let mut freed_last_round: Vec<u32> = Vec::new();

    for round in 0..ROUNDS {
        let high_water_before = heap.table_stats().high_water;
        let free_before = heap.table_stats().free;
        assert_eq!(free_before, freed_last_round.len());
        let shared: &Heap = &heap;
        let start = &Barrier::new(THREADS as usize);
        let (made, name_wins) = std::thread::scope(|s| {
            let workers: Vec<_> = (0..THREADS)
                .map(|thread| {
                    s.spawn(move || {
                        start.wait(); // all threads create at once
                        let mut mine = Vec::with_capacity(PER_THREAD as usize);
                        let mut won_name = false;
                        for n in 0..PER_THREAD {
                            let h = shared.create(Item { round, thread, n });
                            if n % 2 == 0 {
                                shared.add_to_root(h).unwrap();
                            }
                            // Read back at once, while the others keep creating.
                            assert_eq!(shared[h], Item { round, thread, n });
                            mine.push(h);
                            if n == PER_THREAD / 2 {
                                // Every thread races for the same name.
                                let spawned = shared
                                    .spawn(Item {
                                        round,
                                        thread,
                                        n: u32::MAX,
                                    })
                                    .name(format!("contested_{round}"))
                                    .create();
                                match spawned {
                                    Ok(_) => won_name = true,
                                    Err(Error::NameTaken { .. }) => {}
                                    Err(e) => panic!("{e}"),
                                }
                            }
                        }
                        // Earlier handles are still intact.
                        for (n, h) in mine.iter().enumerate() {
                            assert_eq!(shared[*h].n, n as u32);
                        }
                        (mine, won_name)
                    })
                })
                .collect();
            let mut made = Vec::new();
            let mut wins = 0;
            for w in workers {
                let (mine, won) = w.join().unwrap();
                made.extend(mine);
                wins += usize::from(won);
            }
            (made, wins)
        });
        assert_eq!(
            name_wins, 1,
            "round {round}: exactly one thread gets the name"
        );
        let winner = heap
            .find(None, &format!("contested_{round}"))
            .and_then(|h| heap.downcast::<Item>(h))
            .expect("the name resolves");
        assert_eq!(heap[winner].n, u32::MAX);

        // Every handle resolves to its own value; indices are unique.
        let created = made.len() + 1; // + the named one
        assert_eq!(made.len(), (THREADS * PER_THREAD) as usize);
        for h in &made {
            let v = &heap[*h];
            assert_eq!(v.round, round);
        }
        let mut indices: HashSet<u32> = live.iter().map(|h| h.index()).collect();
        for h in made.iter().copied().chain([winner]) {
            assert!(
                indices.insert(h.index()),
                "index {} handed out twice",
                h.index()
            );
        }
        assert_eq!(heap.len(), live.len() + created);
        assert_eq!(heap.iter().count(), heap.len());

        // The slots taken are last round's freed ones plus fresh ones. Each
        // thread creates through its own cache of reserved indices (batches
        // of 64), so a thread's last batch may be left partly unused: freed
        // slots skipped, or fresh ones left as holes below the high water,
        // reserved until the next collection returns them to the free list
        // (checked below: `free` counts them then). At most one partial
        // batch per thread.
        let new_indices: HashSet<u32> = made.iter().chain([&winner]).map(|h| h.index()).collect();
        let reused: HashSet<u32> = freed_last_round.iter().copied().collect();
        let skipped = reused.difference(&new_indices).count();
        let fresh = created - (reused.len() - skipped);
        let high_water = heap.table_stats().high_water;
        let holes = high_water - (high_water_before + fresh as u32);
        assert!(
            skipped + (holes as usize) < (THREADS * 64) as usize,
            "round {round}: {skipped} freed slots skipped, {holes} fresh ones unused"
        );
        for i in new_indices.difference(&reused) {
            assert!((high_water_before..high_water).contains(i));
        }
        assert_eq!(heap.table_stats().free, 0);
        for h in &dead {
            assert!(heap.get(*h).is_none(), "stale {h:?} resolved");
        }

        // Keep the rooted half; drop every third survivor from the root set.
        let (rooted, unrooted): (Vec<Obj<Item>>, Vec<Obj<Item>>) =
            made.iter().partition(|h| heap[**h].n % 2 == 0);
        live.extend(rooted);
        let mut keep = Vec::new();
        for (k, h) in live.drain(..).enumerate() {
            if k % 3 == 0 {
                heap.remove_from_root(h).unwrap();
                dead.push(h);
            } else {
                keep.push(h);
            }
        }
        live = keep;
        dead.extend(unrooted);
        dead.push(winner);
        let before = heap.len();
        let stats = heap.collect().unwrap();
        assert_eq!(stats.freed, before - live.len());
        assert_eq!(heap.len(), live.len());
        for h in &dead {
            assert!(heap.get(*h).is_none());
        }
        for h in &live {
            assert_eq!(heap[*h].n % 2, 0);
        }
        let live_indices: HashSet<u32> = live.iter().map(|h| h.index()).collect();
        freed_last_round = (0..heap.table_stats().high_water)
            .filter(|i| !live_indices.contains(i))
            .collect();
        assert_eq!(freed_last_round.len(), heap.table_stats().free);
    }
}

/// Strong handles taken on one thread and dropped on others, while the
/// owning thread creates; afterwards the collector frees exactly what is no
/// longer held.
#[test]
fn strong_handles_dropped_on_worker_threads() {
    // Objects held, and objects the owning thread creates meanwhile (fewer
    // under miri).
    let (held, made): (u32, u32) = if cfg!(miri) { (80, 60) } else { (400, 500) };
    let mut heap = Heap::new();
    let objs: Vec<Obj<Item>> = (0..held)
        .map(|n| {
            heap.create(Item {
                round: 0,
                thread: 0,
                n,
            })
        })
        .collect();
    let strong: Vec<StrongObj<Item>> = objs.iter().map(|h| heap.strong(*h).unwrap()).collect();
    heap.collect().unwrap();
    assert_eq!(heap.len(), held as usize, "all held by strong handles");

    let (odd, even): (Vec<_>, Vec<_>) = strong.into_iter().partition(|s| s.obj().index() % 2 == 1);
    let shared: &Heap = &heap;
    let kept = std::thread::scope(|s| {
        let mut chunks = odd.into_iter();
        for _ in 0..THREADS {
            let batch: Vec<StrongObj<Item>> = chunks
                .by_ref()
                .take((held / 2 / THREADS) as usize)
                .collect();
            s.spawn(move || drop(batch));
        }
        let creator = s.spawn(move || {
            (0..made)
                .map(|n| {
                    shared.create(Item {
                        round: 1,
                        thread: 9,
                        n,
                    })
                })
                .collect::<Vec<_>>()
        });
        let clones: Vec<StrongObj<Item>> = even.to_vec();
        s.spawn(move || drop(clones));
        creator.join().unwrap();
        even
    });
    assert!(objs
        .iter()
        .all(|h| heap.strong_count(*h) == usize::from(h.index() % 2 == 0)));
    let stats = heap.collect().unwrap();
    assert_eq!(stats.freed, (held / 2 + made) as usize);
    assert_eq!(heap.len(), (held / 2) as usize);
    for h in &objs {
        assert_eq!(heap.get(*h).is_some(), h.index() % 2 == 0);
    }
    drop(kept);
    heap.collect().unwrap();
    assert!(heap.is_empty());
}

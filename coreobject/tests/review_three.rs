//! Review of the merged free path (branch free) and timed finishing slices
//! (branch slice): each test names the risk it guards.

use std::time::Duration;

use coreobject::{GcConfig, Heap, HeapConfig, Obj, Object, Phase};

#[derive(Object, Default)]
struct Actor {
    pos: u64,
    next: Option<Obj<Actor>>,
    text: Option<String>,
}

/// Actors in the tests (small under miri).
fn actors() -> usize {
    if cfg!(miri) {
        300
    } else {
        3_000
    }
}

fn heap_with(gc: GcConfig) -> Heap {
    Heap::with_config(HeapConfig {
        gc,
        ..HeapConfig::DEFAULT
    })
    .unwrap()
}

/// A rooted chain of `n` actors; returns them, root first.
fn chain(heap: &mut Heap, n: usize) -> Vec<Obj<Actor>> {
    let mut all = Vec::with_capacity(n);
    let mut prev: Option<Obj<Actor>> = None;
    for i in 0..n {
        let a = heap.create_mut(Actor {
            pos: i as u64,
            next: None,
            text: None,
        });
        if let Some(p) = prev {
            heap.get_mut(p).unwrap().next = Some(a);
        } else {
            heap.add_to_root(a).unwrap();
        }
        prev = Some(a);
        all.push(a);
    }
    all
}

/// A game that moves every actor every frame (a write through `get_mut`
/// that stores no handle) and creates nothing, collected by timed ticks
/// whose budget is too small for the re-scans a finishing slice owes:
/// marking must still end within a bounded number of slices (issue 24:
/// "marking ends within a bounded number of slices under a mutator that
/// writes every object every frame"). Before branch slice a finishing
/// slice re-scanned all it owed (the writes since the previous slice plus
/// a sixteenth of the older entries), so the list emptied within about 16
/// slices; a timed slice now stops its owed re-scans at its deadline and
/// the debt limit, which counts created objects only, never fires.
#[test]
fn timed_cycle_ends_under_a_mutator_that_moves_every_actor() {
    for generational in [false, true] {
        let mut heap = heap_with(GcConfig {
            generational,
            ..GcConfig::MANUAL
        });
        let all = chain(&mut heap, actors());
        heap.collect().unwrap();
        heap.gc_config_mut().incremental = Some(Duration::from_nanos(1));
        // Start a major cycle with a slice of a few units, then tick.
        heap.step(8);
        assert_eq!(heap.gc_phase(), Phase::Mark);
        let bound = 4 * actors() + 64;
        let mut slices = 1;
        let stats = loop {
            for &a in &all {
                heap.get_mut(a).unwrap().pos += 1;
            }
            let t = heap.tick(Duration::from_millis(16));
            slices += 1;
            if let Some(s) = t.completed {
                break s;
            }
            assert!(
                slices <= bound,
                "generational {generational}: the cycle still runs after {slices} slices \
                 (phase {:?})",
                heap.gc_phase()
            );
        };
        assert_eq!(stats.freed, 0);
        assert!(!stats.forced, "finished by the debt rule");
        for (i, &a) in all.iter().enumerate() {
            assert!(heap.get(a).unwrap().pos > i as u64);
        }
    }
}

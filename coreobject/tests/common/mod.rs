//! Helpers the integration tests share. A test file that wants them says
//! `mod common;` (cargo builds no test of its own from this folder).

// Each test file is its own crate and uses only some of these.
#![allow(dead_code)]

use coreobject::{CycleKind, GcConfig, Heap, HeapConfig, Obj, Object, Tick};

/// A xorshift generator (13, 7, 17): seeded models replay exactly from
/// their seed, and a failing seed printed by a test reproduces it.
pub struct Rng(pub u64);

impl Rng {
    /// The next value; the state must not be zero.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A value in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// True once in `n` calls on average.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }
}

/// A heap whose collector runs only when asked ([`GcConfig::MANUAL`]),
/// marking on `threads` threads from the first object on.
pub fn manual_heap(threads: usize) -> Heap {
    let gc = GcConfig {
        threads,
        parallel_threshold: 0,
        ..GcConfig::MANUAL
    };
    Heap::with_config(HeapConfig {
        gc,
        ..HeapConfig::DEFAULT
    })
    .unwrap()
}

/// A heap with this collector configuration and the other defaults.
pub fn heap_with(gc: GcConfig) -> Heap {
    Heap::with_config(HeapConfig {
        gc,
        ..HeapConfig::DEFAULT
    })
    .unwrap()
}

/// A heap that keeps the remembered set (minor cycles run as minor ones),
/// collected only when asked.
pub fn generational_heap() -> Heap {
    heap_with(GcConfig {
        generational: true,
        ..GcConfig::MANUAL
    })
}

/// A rooted object (`node(0)`) holding `n` objects `node(0)` to
/// `node(n - 1)` in its list `kids`, created through `&Heap` in that order:
/// a world whose reachable set a test knows.
pub fn rooted_world<T: Object>(
    heap: &mut Heap,
    n: usize,
    node: impl Fn(u64) -> T,
    kids: impl Fn(&mut T) -> &mut Vec<Obj<T>>,
) -> Obj<T> {
    let world = heap.spawn(node(0)).root().create().unwrap();
    for i in 0..n {
        let k = heap.create(node(i as u64));
        kids(&mut heap[world]).push(k);
    }
    world
}

/// One slice of `work` units of a cycle of this kind (a minor one when
/// not [`CycleKind::Major`]), started if none is in flight.
pub fn step(heap: &mut Heap, kind: CycleKind, work: usize) -> Tick {
    match kind {
        CycleKind::Major => heap.step(work),
        _ => heap.step_minor(work),
    }
}

/// Declares `$forged`, a type whose hand-written `Object` impl answers
/// `$real`'s class: deliberately broken, and unlike `$real` it owns heap
/// memory (`_text`), so that a library that took it for `$real` would read
/// one as the other. The tests that use it check the library refuses it.
#[allow(unused_macros)]
macro_rules! forged_class {
    ($forged:ident, $real:ty) => {
        /// Owns heap memory, which the class it claims does not.
        struct $forged {
            _text: Vec<String>,
        }

        impl coreobject::Trace for $forged {
            const NEEDS_TRACE: bool = false;
            fn trace<V: coreobject::Visitor + ?Sized>(&self, _v: &mut V) {}
        }

        impl coreobject::Lifecycle for $forged {
            const HAS_HOOKS: bool = false;
        }

        // SAFETY: deliberately broken (it answers another type's class):
        // the tests that declare it check the library refuses it before
        // any object is taken for the wrong type.
        unsafe impl coreobject::Object for $forged {
            fn class() -> &'static coreobject::Class {
                <$real as coreobject::Object>::class()
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use forged_class;

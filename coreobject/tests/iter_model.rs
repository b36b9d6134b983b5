//! A model test of iteration: `iter`, `iter_of` and `live_count` against a
//! map of the live objects.
//!
//! Random interleavings of creation (the next free slot, or a chosen index
//! in one of the first four chunks: at a chunk's first or last slot, or
//! anywhere in it, so that chunks are skipped whole and the high water
//! stops mid-chunk), marking as garbage, and collection, over objects of two
//! classes. After every operation the iterators must yield exactly the
//! model's live objects of the class asked for, in index order, with their
//! handles and values, whether driven item by item (`next`, as a `for` loop drives it) or folded
//! (`fold`, which the table's walk runs a chunk at a time).

use std::collections::BTreeMap;

use coreobject::{AnyObj, GcConfig, Heap, HeapConfig, Object, CHUNK_SIZE};
use proptest::prelude::*;

#[derive(Object)]
struct Apple {
    v: u64,
}

#[derive(Object)]
struct Pear {
    v: u64,
}

#[derive(Clone, Debug)]
enum Op {
    /// Create in the next slot the table hands out.
    Create {
        pear: bool,
    },
    /// Create at `chunk * CHUNK_SIZE + offset`; `offset` is resolved by
    /// [`offset`].
    CreateAt {
        chunk: u32,
        offset: u32,
        pear: bool,
    },
    /// Mark the `k`-th live object (in index order, modulo) as garbage.
    Garbage(usize),
    Collect,
}

/// Chunks the test creates in.
const CHUNKS: u32 = 4;

/// An offset inside a chunk: its first slot, its second, its last, or
/// anywhere.
fn offset(pick: u32) -> u32 {
    match pick % 4 {
        0 => 0,
        1 => 1,
        2 => CHUNK_SIZE - 1,
        _ => (pick / 4) % CHUNK_SIZE,
    }
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => any::<bool>().prop_map(|pear| Op::Create { pear }),
        2 => (0..CHUNKS, any::<u32>(), any::<bool>())
            .prop_map(|(chunk, offset, pear)| Op::CreateAt { chunk, offset, pear }),
        3 => any::<usize>().prop_map(Op::Garbage),
        1 => Just(Op::Collect),
    ]
}

/// The live objects: index → (handle, is a pear, value).
type Model = BTreeMap<u32, (AnyObj, bool, u64)>;

fn expected(m: &Model, pear: Option<bool>) -> Vec<(AnyObj, u64)> {
    m.values()
        .filter(|(_, p, _)| pear.map_or(true, |want| *p == want))
        .map(|&(h, _, v)| (h, v))
        .collect()
}

fn check(heap: &Heap, m: &Model) -> Result<(), TestCaseError> {
    // Every live object, by `next`.
    let mut all = Vec::new();
    for o in heap.iter() {
        let v = match o.typed::<Apple>() {
            Some((_, a)) => a.v,
            None => o.typed::<Pear>().expect("an apple or a pear").1.v,
        };
        all.push((o.id(), v));
    }
    prop_assert_eq!(&all, &expected(m, None), "iter (next)");
    // Every live object, folded.
    let folded = heap.iter().fold(Vec::new(), |mut acc, o| {
        acc.push(o.id());
        acc
    });
    let ids: Vec<AnyObj> = expected(m, None).into_iter().map(|(h, _)| h).collect();
    prop_assert_eq!(folded, ids, "iter (fold)");
    prop_assert_eq!(heap.live_count(), m.len());
    // By class, by `next` and folded.
    let mut apples = Vec::new();
    for (h, a) in heap.iter_of::<Apple>() {
        apples.push((h.any(), a.v));
    }
    prop_assert_eq!(
        &apples,
        &expected(m, Some(false)),
        "iter_of::<Apple> (next)"
    );
    let pears = heap.iter_of::<Pear>().fold(Vec::new(), |mut acc, (h, p)| {
        acc.push((h.any(), p.v));
        acc
    });
    prop_assert_eq!(&pears, &expected(m, Some(true)), "iter_of::<Pear> (fold)");
    let sum: u64 = heap.iter_of::<Pear>().map(|(_, p)| p.v).sum();
    prop_assert_eq!(
        sum,
        expected(m, Some(true)).iter().map(|&(_, v)| v).sum::<u64>()
    );
    Ok(())
}

fn run(ops: &[Op]) -> Result<(), TestCaseError> {
    let mut heap = Heap::with_config(HeapConfig {
        max_objects: CHUNKS * CHUNK_SIZE,
        gc: GcConfig::MANUAL,
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    let mut m = Model::new();
    // Every operation gets a fresh value, so values identify objects.
    for (value, op) in (1u64..).zip(ops) {
        let made = match *op {
            Op::Create { pear: false } => heap.try_create(Apple { v: value }).map(|h| h.any()),
            Op::Create { pear: true } => heap.try_create(Pear { v: value }).map(|h| h.any()),
            Op::CreateAt {
                chunk,
                offset: o,
                pear,
            } => {
                let index = chunk * CHUNK_SIZE + offset(o);
                if pear {
                    heap.create_at(index, Pear { v: value }).map(|h| h.any())
                } else {
                    heap.create_at(index, Apple { v: value }).map(|h| h.any())
                }
            }
            Op::Garbage(k) => {
                if !m.is_empty() {
                    let (&index, &(h, _, _)) = m.iter().nth(k % m.len()).unwrap();
                    heap.mark_as_garbage(h).unwrap();
                    m.remove(&index);
                }
                check(&heap, &m)?;
                continue;
            }
            Op::Collect => {
                heap.collect().unwrap();
                check(&heap, &m)?;
                continue;
            }
        };
        let pear = matches!(
            op,
            Op::Create { pear: true } | Op::CreateAt { pear: true, .. }
        );
        // A taken slot or the cap refuses a creation; the model keeps it out.
        if let Ok(h) = made {
            heap.add_to_root(h).unwrap();
            prop_assert!(
                m.insert(h.index(), (h, pear, value)).is_none(),
                "slot reused while live"
            );
        }
        check(&heap, &m)?;
    }
    Ok(())
}

/// Operations per case (fewer under miri, and in unoptimised builds, where
/// each check walks up to four chunks five times at a few nanoseconds an
/// item: 128 cases of 80 took minutes in CI's debug run).
const MAX_OPS: usize = if cfg!(miri) {
    20
} else if cfg!(debug_assertions) {
    40
} else {
    80
};

/// Cases (see [`MAX_OPS`]).
const CASES: u32 = if cfg!(debug_assertions) { 16 } else { 128 };

proptest! {
    #![proptest_config(if cfg!(miri) {
        // Under miri: a few cases, and no regression file (its isolation
        // keeps the file system away).
        ProptestConfig { cases: 3, failure_persistence: None, ..ProptestConfig::default() }
    } else {
        ProptestConfig { cases: CASES, ..ProptestConfig::default() }
    })]

    #[test]
    fn iteration_matches_model(ops in prop::collection::vec(op(), 1..MAX_OPS)) {
        run(&ops)?;
    }
}

/// The walk's edges, deterministically: objects at both ends of chunks 0, 2
/// and 3 with chunk 1 never allocated, and the high water one past a
/// chunk's first slot.
#[test]
fn iteration_crosses_chunks_and_skips_missing_ones() {
    let mut heap = Heap::with_config(HeapConfig {
        max_objects: CHUNKS * CHUNK_SIZE,
        gc: GcConfig::MANUAL,
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    let mut want = Vec::new();
    for (k, index) in [
        CHUNK_SIZE - 1,
        2 * CHUNK_SIZE,
        3 * CHUNK_SIZE - 1,
        0,
        3 * CHUNK_SIZE,
    ]
    .into_iter()
    .enumerate()
    {
        let h = heap.create_at(index, Apple { v: k as u64 }).unwrap();
        heap.add_to_root(h).unwrap();
        want.push((index, k as u64));
    }
    want.sort_unstable();
    let got: Vec<(u32, u64)> = heap
        .iter_of::<Apple>()
        .map(|(h, a)| (h.index(), a.v))
        .collect();
    assert_eq!(got, want);
    let mut by_next = Vec::new();
    for o in heap.iter() {
        by_next.push(o.id().index());
    }
    assert_eq!(by_next, want.iter().map(|&(i, _)| i).collect::<Vec<_>>());
    assert_eq!(heap.table_stats().high_water, 3 * CHUNK_SIZE + 1);
}

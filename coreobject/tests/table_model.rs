//! A model test of the object table.
//!
//! Random sequences of operations (create, create at an index, unroot, mark
//! as garbage, mutate, collect) run against a [`Heap`] and against a small
//! model: a `HashMap` of live objects plus the table's free list, high-water
//! mark, per-slot generations and retired-slot count. After every operation:
//!
//! * every live handle resolves to its own current value;
//! * no stale handle ever resolves (every handle ever issued is kept);
//! * garbage handles resolve only through `get_even_if_garbage`;
//! * `len`, the free-list length, the high-water mark and the retired count
//!   match the model;
//! * each creation takes exactly the slot the model predicts: freed slots are
//!   reused last-in first-out, then the table grows, then the cap is reached;
//! * each serial has the generation the model predicts, and a slot whose
//!   (narrow) generation counter runs out is retired.

use std::collections::HashMap;

use coreobject::{serial, Error, Heap, HeapConfig, Obj, Object, ResolveError};
use proptest::prelude::*;

#[derive(Object)]
struct Cell {
    value: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Rooted,
    Unrooted,
    Garbage,
}

#[derive(Clone, Debug)]
enum Op {
    Create { root: bool },
    CreateAt { index: u32, root: bool },
    Unroot(usize),
    MarkGarbage(usize),
    Mutate(usize),
    Collect,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        // Most created objects are rooted (three in four), so that some survive.
        6 => prop::bool::weighted(0.75).prop_map(|root| Op::Create { root }),
        1 => (0u32..48, prop::bool::weighted(0.75))
            .prop_map(|(index, root)| Op::CreateAt { index, root }),
        2 => any::<usize>().prop_map(Op::Unroot),
        2 => any::<usize>().prop_map(Op::MarkGarbage),
        2 => any::<usize>().prop_map(Op::Mutate),
        2 => Just(Op::Collect),
    ]
}

/// What the table should look like.
struct Model {
    cap: u32,
    /// Generations a slot may carry: `floor..=limit`.
    span: u32,
    /// The generation of every fresh slot; learned from the first handle.
    floor: Option<u32>,
    high_water: u32,
    /// Free indices; the last is reused first.
    free: Vec<u32>,
    /// The generation a slot's next object gets, once the slot was freed.
    next_gen: HashMap<u32, u32>,
    retired: u32,
    live: HashMap<Obj<Cell>, (u64, State)>,
}

impl Model {
    fn new(cap: u32, bits: u32) -> Model {
        let span = if bits >= serial::GENERATION_BITS {
            serial::MAX_GENERATION
        } else {
            (1 << bits) - 1
        };
        Model {
            cap,
            span,
            floor: None,
            high_water: 0,
            free: Vec::new(),
            next_gen: HashMap::new(),
            retired: 0,
            live: HashMap::new(),
        }
    }

    /// The slot the next `create` takes, if any.
    fn next_index(&self) -> Option<u32> {
        match self.free.last() {
            Some(&i) => Some(i),
            None => (self.high_water < self.cap).then_some(self.high_water),
        }
    }

    fn take(&mut self, index: u32) {
        if self.free.last() == Some(&index) {
            self.free.pop();
        } else {
            assert_eq!(index, self.high_water);
            self.high_water += 1;
        }
    }

    /// Live objects by index, so that picks are deterministic.
    fn sorted(&self, include_garbage: bool) -> Vec<Obj<Cell>> {
        let mut v: Vec<_> = self
            .live
            .iter()
            .filter(|(_, (_, s))| include_garbage || *s != State::Garbage)
            .map(|(h, _)| *h)
            .collect();
        v.sort_by_key(|h| h.index());
        v
    }

    /// Checks a new handle's generation and records it.
    fn created(&mut self, h: Obj<Cell>, value: u64, root: bool) -> Result<(), TestCaseError> {
        let generation = serial::generation(h.serial());
        match self.next_gen.get(&h.index()) {
            Some(&g) => prop_assert_eq!(generation, g, "reused slot {}", h.index()),
            None => {
                let floor = *self.floor.get_or_insert(generation);
                prop_assert_eq!(generation, floor, "fresh slot {}", h.index());
            }
        }
        let state = if root { State::Rooted } else { State::Unrooted };
        prop_assert!(self.live.insert(h, (value, state)).is_none());
        Ok(())
    }

    /// Frees every object that is not rooted or is garbage, lowest index
    /// first (the order the sweep pushes them on the free list).
    fn collect(&mut self) -> usize {
        let mut dead: Vec<Obj<Cell>> = self
            .live
            .iter()
            .filter(|(_, (_, s))| *s != State::Rooted)
            .map(|(h, _)| *h)
            .collect();
        dead.sort_by_key(|h| h.index());
        let floor = self.floor.unwrap_or(0); // unknown only while nothing was created
        let limit = floor.saturating_add(self.span).min(serial::MAX_GENERATION);
        for h in &dead {
            self.live.remove(h);
            let generation = serial::generation(h.serial());
            if generation >= limit {
                self.retired += 1;
                self.next_gen.remove(&h.index());
            } else {
                self.next_gen.insert(h.index(), generation + 1);
                self.free.push(h.index());
            }
        }
        dead.len()
    }
}

fn check(heap: &Heap, m: &Model, issued: &[Obj<Cell>]) -> Result<(), TestCaseError> {
    prop_assert_eq!(heap.len(), m.live.len());
    let stats = heap.table_stats();
    prop_assert_eq!(stats.high_water, m.high_water);
    prop_assert_eq!(stats.free, m.free.len());
    prop_assert_eq!(stats.retired, m.retired);
    prop_assert_eq!(stats.objects, m.live.len());
    for &h in issued {
        match m.live.get(&h) {
            Some(&(value, State::Rooted | State::Unrooted)) => {
                prop_assert_eq!(heap.get(h).map(|c| c.value), Some(value), "{:?}", h);
                prop_assert!(heap.contains(h));
                prop_assert_eq!(heap.upgrade(h.downgrade()), Some(h));
            }
            Some(&(value, State::Garbage)) => {
                prop_assert!(heap.get(h).is_none(), "garbage {:?} resolved", h);
                prop_assert_eq!(heap.try_get(h).err(), Some(ResolveError::Garbage(h.any())));
                prop_assert_eq!(heap.get_even_if_garbage(h).map(|c| c.value), Some(value));
                prop_assert!(heap.is_garbage(h));
            }
            None => {
                prop_assert!(heap.get(h).is_none(), "stale {:?} resolved", h);
                prop_assert!(heap.get_even_if_garbage(h).is_none());
                prop_assert!(!heap.contains(h));
                prop_assert_eq!(heap.try_get(h).err(), Some(ResolveError::Stale(h.any())));
            }
        }
    }
    let visible = m
        .live
        .values()
        .filter(|(_, s)| *s != State::Garbage)
        .count();
    prop_assert_eq!(heap.iter().count(), visible);
    Ok(())
}

fn run(bits: u32, cap: u32, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut heap = Heap::with_config(HeapConfig {
        max_objects: cap,
        generation_bits: bits,
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    let mut m = Model::new(cap, bits);
    let mut issued: Vec<Obj<Cell>> = Vec::new();
    // Every operation gets a fresh value, so values identify objects.
    for (value, op) in (1u64..).zip(ops) {
        match *op {
            Op::Create { root } => {
                let predicted = m.next_index();
                match heap.try_create(Cell { value }) {
                    Ok(h) => {
                        prop_assert_eq!(Some(h.index()), predicted, "create took the wrong slot");
                        m.take(h.index());
                        if root {
                            heap.add_to_root(h).unwrap();
                        }
                        m.created(h, value, root)?;
                        issued.push(h);
                    }
                    Err(Error::CapReached(report)) => {
                        prop_assert_eq!(predicted, None, "cap reported early");
                        prop_assert_eq!(report.cap, cap);
                        let counted: usize = report.by_class.iter().map(|(_, n)| n).sum();
                        prop_assert_eq!(counted, m.live.len());
                    }
                    Err(e) => prop_assert!(false, "unexpected error {}", e),
                }
            }
            Op::CreateAt { index, root } => {
                let result = heap.create_at(index, Cell { value });
                if index >= cap {
                    prop_assert_eq!(result.err(), Some(Error::IndexPastCap { index, cap }));
                } else if index < m.high_water {
                    match m.free.iter().rposition(|&i| i == index) {
                        Some(pos) => {
                            let h = result.map_err(|e| TestCaseError::fail(e.to_string()))?;
                            prop_assert_eq!(h.index(), index);
                            m.free.remove(pos);
                            if root {
                                heap.add_to_root(h).unwrap();
                            }
                            m.created(h, value, root)?;
                            issued.push(h);
                        }
                        // In use or retired.
                        None => prop_assert_eq!(result.err(), Some(Error::IndexTaken(index))),
                    }
                } else {
                    let h = result.map_err(|e| TestCaseError::fail(e.to_string()))?;
                    prop_assert_eq!(h.index(), index);
                    // The skipped indices become free, lowest on top.
                    m.free.extend((m.high_water..index).rev());
                    m.high_water = index + 1;
                    if root {
                        heap.add_to_root(h).unwrap();
                    }
                    m.created(h, value, root)?;
                    issued.push(h);
                }
            }
            Op::Unroot(k) => {
                let live = m.sorted(true);
                if !live.is_empty() {
                    let h = live[k % live.len()];
                    heap.remove_from_root(h).unwrap();
                    prop_assert!(!heap.is_rooted(h));
                    let entry = m.live.get_mut(&h).unwrap();
                    if entry.1 == State::Rooted {
                        entry.1 = State::Unrooted;
                    }
                }
            }
            Op::MarkGarbage(k) => {
                let live = m.sorted(true);
                if !live.is_empty() {
                    let h = live[k % live.len()];
                    heap.mark_as_garbage(h).unwrap();
                    m.live.get_mut(&h).unwrap().1 = State::Garbage;
                }
            }
            Op::Mutate(k) => {
                let live = m.sorted(false);
                if !live.is_empty() {
                    let h = live[k % live.len()];
                    heap.get_mut(h).unwrap().value = value;
                    m.live.get_mut(&h).unwrap().0 = value;
                }
            }
            Op::Collect => {
                let stats = heap.collect().unwrap();
                let freed = m.collect();
                prop_assert_eq!(stats.freed, freed);
                prop_assert_eq!(stats.live, m.live.len());
            }
        }
        check(&heap, &m, &issued)?;
    }
    Ok(())
}

/// Operations per case (fewer under miri).
const MAX_OPS: usize = if cfg!(miri) { 25 } else { 150 };

proptest! {
    #![proptest_config(if cfg!(miri) {
        // Under miri: a few cases, and no regression file (its isolation
        // keeps the file system away).
        ProptestConfig { cases: 3, failure_persistence: None, ..ProptestConfig::default() }
    } else {
        ProptestConfig { cases: 200, ..ProptestConfig::default() }
    })]

    /// Narrow generation counters (slots retire after 2 to 8 objects) and the
    /// full width; caps from tiny (the cap is hit often) to roomy.
    #[test]
    fn table_matches_model(
        bits in prop::sample::select(vec![1u32, 2, 3, 22]),
        cap in 1u32..40,
        ops in prop::collection::vec(op(), 1..MAX_OPS),
    ) {
        run(bits, cap, &ops)?;
    }
}

#[test]
fn freed_slots_are_reused_last_in_first_out() {
    let mut heap = Heap::new();
    let hs: Vec<_> = (0..10)
        .map(|value| {
            let h = heap.create(Cell { value });
            heap.add_to_root(h).unwrap();
            h
        })
        .collect();
    for i in [2, 7, 5] {
        heap.remove_from_root(hs[i]).unwrap();
    }
    assert_eq!(heap.collect().unwrap().freed, 3);
    // Freed in index order 2, 5, 7; reused 7, 5, 2; then the table grows.
    let order: Vec<u32> = (0..4)
        .map(|value| heap.create(Cell { value }).index())
        .collect();
    assert_eq!(order, [7, 5, 2, 10]);
    for i in [2, 5, 7] {
        assert!(heap.get(hs[i]).is_none());
    }
}

#[test]
fn a_deterministic_sequence_runs_through_the_model() {
    use Op::*;
    let ops = [
        Create { root: true },
        Create { root: false },
        Create { root: true },
        MarkGarbage(0),
        Collect,
        Create { root: true },
        CreateAt {
            index: 9,
            root: true,
        },
        Create { root: true },
        Unroot(1),
        Mutate(2),
        Collect,
        Create { root: true },
        Create { root: true },
        Collect,
    ];
    run(2, 12, &ops).unwrap();
    run(22, 3, &ops).unwrap();
}

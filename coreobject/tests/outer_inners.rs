//! The outer rule, both ways: by default (Unreal 5) an inner keeps its outer
//! alive; with `GcConfig::outer_keeps_inners` (seed 001) an outer also keeps
//! its inners alive. Fixed cases, slot reuse, `for_each_with_outer`, and a
//! model: random objects with random outers and field edges, random roots
//! and garbage marks, collected stop-the-world or in small incremental steps
//! (with inners created between the steps), checked against a breadth-first
//! search over fields + outers (+ inners when the rule is on).

use std::collections::{BTreeSet, VecDeque};

use coreobject::{AnyObj, GcConfig, Heap, HeapConfig, Obj, Object, Phase};
use proptest::prelude::*;
use proptest::sample::Index;

#[derive(Object, Default)]
struct Node {
    id: usize,
    list: Vec<Obj<Node>>,
}

fn heap(outer_keeps_inners: bool) -> Heap {
    let gc = GcConfig {
        outer_keeps_inners,
        ..GcConfig::MANUAL
    };
    Heap::with_config(HeapConfig {
        gc,
        ..HeapConfig::DEFAULT
    })
    .unwrap()
}

fn inners_of(heap: &Heap, outer: impl Into<AnyObj>) -> Vec<AnyObj> {
    let mut v = Vec::new();
    heap.for_each_with_outer(outer, |o| v.push(o.id()));
    v
}

// The option is off in every preset.
const _: () = {
    assert!(!GcConfig::DEFAULT.outer_keeps_inners);
    assert!(!GcConfig::MANUAL.outer_keeps_inners);
    assert!(!GcConfig::DEBUG.outer_keeps_inners);
    assert!(!HeapConfig::DEFAULT.gc.outer_keeps_inners);
};

#[test]
fn the_option_is_off_by_default() {
    assert!(!GcConfig::default().outer_keeps_inners);
    assert!(!Heap::new().gc_config().outer_keeps_inners);
}

#[test]
fn by_default_an_inner_keeps_its_outer_and_not_the_reverse() {
    let mut heap = heap(false);
    // A rooted outer alone does not keep its inner.
    let outer = heap.spawn(Node::default()).root().create().unwrap();
    let inner = heap.spawn(Node::default()).outer(outer).create().unwrap();
    let stats = heap.collect().unwrap();
    assert_eq!(stats.freed, 1);
    assert!(heap.contains(outer) && !heap.contains(inner));
    assert!(inners_of(&heap, outer).is_empty());

    // A rooted inner keeps its outer (and the outer's outer).
    let top = heap.create(Node::default());
    let mid = heap.spawn(Node::default()).outer(top).create().unwrap();
    let leaf = heap
        .spawn(Node::default())
        .outer(mid)
        .root()
        .create()
        .unwrap();
    let sibling = heap.spawn(Node::default()).outer(mid).create().unwrap();
    let stats = heap.collect().unwrap();
    assert_eq!(stats.freed, 1, "only the sibling");
    assert!(heap.contains(top) && heap.contains(mid) && heap.contains(leaf));
    assert!(!heap.contains(sibling));
    assert_eq!(inners_of(&heap, mid), [leaf.any()]);
    heap.remove_from_root(leaf).unwrap();
    assert_eq!(heap.collect().unwrap().freed, 3);
    assert_eq!(heap.len(), 1);
}

#[test]
fn with_the_option_a_rooted_outer_keeps_its_whole_chain() {
    let mut heap = heap(true);
    let outer = heap.spawn(Node::default()).root().create().unwrap();
    let inner = heap.spawn(Node::default()).outer(outer).create().unwrap();
    let innermost = heap.spawn(Node::default()).outer(inner).create().unwrap();
    // Referenced from inside the chain, but also from outside.
    let shared = heap.create(Node::default());
    heap[innermost].list.push(shared);
    let keeper = heap.spawn(Node::default()).root().create().unwrap();
    heap[keeper].list.push(shared);
    let loose = heap.create(Node::default());

    let stats = heap.collect().unwrap();
    assert_eq!(stats.freed, 1, "only the loose object");
    assert!(!heap.contains(loose));
    for h in [outer, inner, innermost, shared] {
        assert!(heap.contains(h));
    }
    // Inners still keep their outer: rooting the innermost keeps all three.
    heap.remove_from_root(outer).unwrap();
    heap.add_to_root(innermost).unwrap();
    assert_eq!(heap.collect().unwrap().freed, 0);
    heap.remove_from_root(innermost).unwrap();

    // Unrooted, the chain goes; what else references survives.
    let stats = heap.collect().unwrap();
    assert_eq!(stats.freed, 3);
    for h in [outer, inner, innermost] {
        assert!(!heap.contains(h));
    }
    assert!(heap.contains(shared));
    assert!(inners_of(&heap, outer).is_empty());
}

#[test]
fn a_garbage_outer_keeps_no_inner_and_its_survivors_lose_it() {
    let mut heap = heap(true);
    let outer = heap.spawn(Node::default()).root().create().unwrap();
    let kept = heap.spawn(Node::default()).outer(outer).create().unwrap();
    let lost = heap.spawn(Node::default()).outer(outer).create().unwrap();
    let holder = heap.spawn(Node::default()).root().create().unwrap();
    heap[holder].list.push(kept);
    heap.mark_as_garbage(outer).unwrap();
    // Still filed until the outer is freed (garbage inners are skipped).
    assert_eq!(inners_of(&heap, outer), [kept.any(), lost.any()]);
    let stats = heap.collect().unwrap();
    assert_eq!(stats.freed, 2, "the outer and its unreferenced inner");
    assert!(heap.contains(kept) && !heap.contains(lost));
    assert_eq!(heap.outer_of(kept), None);
    assert!(inners_of(&heap, outer).is_empty());
    heap[holder].list.clear();
    assert_eq!(heap.collect().unwrap().freed, 1);
}

#[test]
fn a_reused_outer_slot_does_not_keep_the_old_inners() {
    for flag in [false, true] {
        let mut heap = heap(flag);
        let outer = heap.create(Node::default());
        let inner = heap.spawn(Node::default()).outer(outer).create().unwrap();
        let holder = heap.spawn(Node::default()).root().create().unwrap();
        heap[holder].list.push(inner);
        heap.mark_as_garbage(outer).unwrap();
        assert_eq!(heap.collect().unwrap().freed, 1);
        // Freed slots are reused last in, first out.
        let successor = heap.spawn(Node::default()).root().create().unwrap();
        assert_eq!(successor.index(), outer.index());
        assert!(inners_of(&heap, successor).is_empty());
        heap[holder].list.clear();
        let stats = heap.collect().unwrap();
        assert_eq!(stats.freed, 1, "flag {flag}");
        assert!(!heap.contains(inner));
    }
}

#[test]
fn a_stale_inner_entry_does_not_keep_the_slot_s_new_object() {
    let mut heap = heap(true);
    let outer = heap.spawn(Node::default()).root().create().unwrap();
    let inners: Vec<_> = (0..8)
        .map(|_| heap.spawn(Node::default()).outer(outer).create().unwrap())
        .collect();
    // One inner goes (its entry is not compacted away: 1 stale of 8).
    heap.mark_as_garbage(inners[3]).unwrap();
    assert_eq!(heap.collect().unwrap().freed, 1);
    // Its slot goes to an unrelated object with no outer and no referrer.
    let stranger = heap.create(Node::default());
    assert_eq!(stranger.index(), inners[3].index());
    let stats = heap.collect().unwrap();
    assert_eq!(stats.freed, 1, "the stranger is not the old inner");
    assert!(!heap.contains(stranger));
    assert_eq!(stats.live, 8);
    // A new inner in the same slot is filed anew.
    let again = heap.spawn(Node::default()).outer(outer).create().unwrap();
    assert_eq!(again.index(), inners[3].index());
    assert_eq!(heap.collect().unwrap().freed, 0);
    let mut want: Vec<AnyObj> = inners.iter().map(|h| h.any()).collect();
    want[3] = again.any();
    assert_eq!(inners_of(&heap, outer), want);
}

#[test]
fn many_inners_are_compacted_and_listed_in_index_order() {
    let mut heap = heap(false);
    let outer = heap.spawn(Node::default()).root().create().unwrap();
    let holder = heap.spawn(Node::default()).root().create().unwrap();
    let mut live: Vec<Obj<Node>> = Vec::new();
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut rand = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    // Compaction comes at half stale, whatever the length: miri takes
    // fewer rounds of fewer inners.
    let (rounds, per_round) = if cfg!(miri) { (6, 30) } else { (12, 200) };
    for round in 0..rounds {
        for _ in 0..per_round {
            live.push(heap.spawn(Node::default()).outer(outer).create().unwrap());
        }
        // Drop a random share of them; the rest stay referenced.
        let keep = live.len() * (1 + rand(3)) / 4;
        while live.len() > keep {
            live.swap_remove(rand(live.len()));
        }
        heap[holder].list = live.clone();
        heap.collect().unwrap();
        let mut want: Vec<AnyObj> = live.iter().map(|h| h.any()).collect();
        want.sort_by_key(|h| h.index());
        assert_eq!(inners_of(&heap, outer), want, "round {round}");
    }
    heap[holder].list.clear();
    heap.collect().unwrap();
    assert!(inners_of(&heap, outer).is_empty());
    assert_eq!(heap.len(), 2);
}

#[test]
fn pool_objects_keep_their_inners_with_the_option() {
    for flag in [false, true] {
        let mut heap = Heap::with_config(HeapConfig {
            disregard_pool_size: 4,
            gc: GcConfig {
                outer_keeps_inners: flag,
                ..GcConfig::MANUAL
            },
            ..HeapConfig::DEFAULT
        })
        .unwrap();
        heap.open_disregard_for_gc().unwrap();
        let asset = heap.create(Node::default());
        heap.close_disregard_for_gc();
        let inner = heap.spawn(Node::default()).outer(asset).create().unwrap();
        heap.collect().unwrap();
        assert_eq!(heap.contains(inner), flag);
    }
}

#[test]
fn reference_chains_follow_inners_with_the_option() {
    let mut heap = heap(true);
    let world = heap
        .spawn(Node::default())
        .name("World")
        .root()
        .create()
        .unwrap();
    let level = heap
        .spawn(Node::default())
        .outer(world)
        .name("Level")
        .create()
        .unwrap();
    let hero = heap.spawn(Node::default()).name("Hero").create().unwrap();
    heap[level].list.push(hero);
    let chains = heap.reference_chains(hero, 4);
    assert_eq!(chains.len(), 1);
    assert_eq!(
        chains[0].to_string(),
        "(rooted) World(inner) -> Level.list[0] -> Hero"
    );
    heap.gc_config_mut().outer_keeps_inners = false;
    assert!(heap.reference_chains(hero, 4).is_empty());
    heap.collect().unwrap();
    assert!(!heap.contains(hero) && !heap.contains(level));
}

// ----- the model ---------------------------------------------------------------

struct MObj {
    h: Obj<Node>,
    alive: bool,
    garbage: bool,
    rooted: bool,
    outer: Option<usize>,
    list: Vec<usize>,
}

impl MObj {
    fn resolvable(&self) -> bool {
        self.alive && !self.garbage
    }
}

#[derive(Clone, Debug)]
enum Op {
    /// With an outer picked among the resolvable objects, or none.
    Create(Option<Index>),
    /// A field edge, to any object ever created (a dead one gives a stale handle).
    Link(Index, Index),
    Unlink(Index, Index),
    Root(Index),
    Unroot(Index),
    Garbage(Index),
    Collect,
    /// An incremental cycle in steps of `work`, creating one inner under
    /// each picked outer after the steps that end in the mark phase.
    Incremental {
        work: usize,
        born: Vec<Index>,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => proptest::option::weighted(0.7, any::<Index>()).prop_map(Op::Create),
        6 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Op::Link(a, b)),
        2 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Op::Unlink(a, b)),
        2 => any::<Index>().prop_map(Op::Root),
        2 => any::<Index>().prop_map(Op::Unroot),
        1 => any::<Index>().prop_map(Op::Garbage),
        2 => Just(Op::Collect),
        2 => (1usize..6, proptest::collection::vec(any::<Index>(), 0..4))
            .prop_map(|(work, born)| Op::Incremental { work, born }),
    ]
}

struct World {
    heap: Heap,
    flag: bool,
    objs: Vec<MObj>,
}

impl World {
    fn new(flag: bool) -> World {
        World {
            heap: heap(flag),
            flag,
            objs: Vec::new(),
        }
    }

    fn resolvable(&self) -> Vec<usize> {
        (0..self.objs.len())
            .filter(|&i| self.objs[i].resolvable())
            .collect()
    }

    /// Picks a resolvable object, if any.
    fn pick_live(&self, i: &Index) -> Option<usize> {
        let live = self.resolvable();
        (!live.is_empty()).then(|| live[i.index(live.len())])
    }

    fn create(&mut self, outer: Option<usize>) -> usize {
        let id = self.objs.len();
        let mut s = self.heap.spawn(Node {
            id,
            list: Vec::new(),
        });
        if let Some(o) = outer {
            s = s.outer(self.objs[o].h);
        }
        let h = s.create().expect("outer is live");
        self.objs.push(MObj {
            h,
            alive: true,
            garbage: false,
            rooted: false,
            outer,
            list: Vec::new(),
        });
        id
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Create(outer) => {
                let outer = outer.as_ref().and_then(|o| self.pick_live(o));
                self.create(outer);
            }
            Op::Link(from, to) => {
                let (Some(f), false) = (self.pick_live(from), self.objs.is_empty()) else {
                    return;
                };
                let t = to.index(self.objs.len());
                let target = self.objs[t].h;
                self.heap[self.objs[f].h].list.push(target);
                self.objs[f].list.push(t);
            }
            Op::Unlink(from, which) => {
                let Some(f) = self.pick_live(from) else {
                    return;
                };
                if self.objs[f].list.is_empty() {
                    return;
                }
                let k = which.index(self.objs[f].list.len());
                self.heap[self.objs[f].h].list.remove(k);
                self.objs[f].list.remove(k);
            }
            Op::Root(i) => {
                if let Some(i) = self.pick_live(i) {
                    self.heap.add_to_root(self.objs[i].h).unwrap();
                    self.objs[i].rooted = true;
                }
            }
            Op::Unroot(i) => {
                if let Some(i) = self.pick_live(i) {
                    self.heap.remove_from_root(self.objs[i].h).unwrap();
                    self.objs[i].rooted = false;
                }
            }
            Op::Garbage(i) => {
                if let Some(i) = self.pick_live(i) {
                    self.heap.mark_as_garbage(self.objs[i].h).unwrap();
                    self.objs[i].garbage = true;
                }
            }
            Op::Collect => {
                let expected = self.expected_freed(&[]);
                let stats = self.heap.collect().unwrap();
                self.settle(expected, stats.freed);
            }
            Op::Incremental { work, born } => {
                let mut born = born.iter();
                let mut new = Vec::new();
                let stats = loop {
                    let tick = self.heap.step(*work);
                    if let Some(stats) = tick.completed {
                        break stats;
                    }
                    if self.heap.gc_phase() != Phase::Mark {
                        continue;
                    }
                    if let Some(pick) = born.next() {
                        // Under any resolvable object: the cycle has not
                        // condemned anything yet.
                        if let Some(o) = self.pick_live(pick) {
                            new.push(self.create(Some(o)));
                        }
                    }
                };
                // Objects created during the cycle are black: they survive,
                // and so does everything they reach (their outers first).
                let expected = self.expected_freed(&new);
                self.settle(expected, stats.freed);
            }
        }
    }

    /// The objects a collection must free: those alive that are not
    /// reachable from the roots and `extra` (objects created during an
    /// incremental cycle) over fields, outers and, with the option, inners.
    /// Garbage objects are never reached.
    fn expected_freed(&self, extra: &[usize]) -> BTreeSet<usize> {
        let n = self.objs.len();
        let mut inners = vec![Vec::new(); n];
        for (i, m) in self.objs.iter().enumerate() {
            if let Some(o) = m.outer {
                inners[o].push(i);
            }
        }
        let mut seen = vec![false; n];
        let mut queue: VecDeque<usize> = (0..n)
            .filter(|&i| self.objs[i].rooted && self.objs[i].alive)
            .chain(extra.iter().copied())
            .collect();
        while let Some(i) = queue.pop_front() {
            let m = &self.objs[i];
            if seen[i] || !m.resolvable() {
                continue;
            }
            seen[i] = true;
            queue.extend(m.list.iter().copied());
            queue.extend(m.outer);
            if self.flag {
                queue.extend(inners[i].iter().copied());
            }
        }
        (0..n).filter(|&i| self.objs[i].alive && !seen[i]).collect()
    }

    /// Checks a collection against the model, then updates the model.
    fn settle(&mut self, expected: BTreeSet<usize>, freed: usize) {
        for (i, m) in self.objs.iter_mut().enumerate() {
            let gone = expected.contains(&i);
            assert_eq!(
                self.heap.get_even_if_garbage(m.h).is_some(),
                m.alive && !gone,
                "object {i} (flag {})",
                self.flag
            );
            if gone {
                m.alive = false;
            }
        }
        assert_eq!(freed, expected.len(), "freed (flag {})", self.flag);
        for i in 0..self.objs.len() {
            if let Some(n) = self.heap.get(self.objs[i].h) {
                assert_eq!(n.id, i);
            }
        }
        self.check_outers();
    }

    /// `for_each_with_outer` of every object ever created (dead ones
    /// included: they have no inners), against the model.
    fn check_outers(&self) {
        assert_eq!(
            self.heap.len(),
            self.objs.iter().filter(|m| m.alive).count()
        );
        for (o, om) in self.objs.iter().enumerate() {
            let mut want: Vec<AnyObj> = if om.alive {
                self.objs
                    .iter()
                    .filter(|m| m.outer == Some(o) && m.resolvable())
                    .map(|m| m.h.any())
                    .collect()
            } else {
                Vec::new()
            };
            want.sort_by_key(|h| h.index());
            assert_eq!(inners_of(&self.heap, om.h), want, "inners of {o}");
        }
    }
}

/// Operations per case (fewer under miri).
const MAX_OPS: usize = if cfg!(miri) { 25 } else { 100 };

proptest! {
    #![proptest_config(if cfg!(miri) {
        // Under miri: a few cases, and no regression file (its isolation
        // keeps the file system away).
        ProptestConfig { cases: 3, failure_persistence: None, ..ProptestConfig::default() }
    } else {
        ProptestConfig { cases: 128, ..ProptestConfig::default() }
    })]

    #[test]
    fn collection_matches_the_model_under_both_rules(ops in proptest::collection::vec(op(), 1..MAX_OPS)) {
        for flag in [false, true] {
            let mut w = World::new(flag);
            for op in &ops {
                w.apply(op);
                w.check_outers();
            }
            w.apply(&Op::Collect);
            // Unrooting everything frees everything.
            for m in &w.objs {
                if m.resolvable() {
                    w.heap.remove_from_root(m.h).unwrap();
                }
            }
            for m in &mut w.objs {
                m.rooted = false;
            }
            w.apply(&Op::Collect);
            prop_assert!(w.heap.is_empty());
        }
    }
}

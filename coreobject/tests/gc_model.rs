//! Model test of the collector: random object graphs checked against a plain
//! breadth-first search.
//!
//! Each case builds a heap (with a few objects in the disregard-for-GC pool),
//! then runs random operations: creating objects (some with an outer), adding
//! and removing strong edges through `Vec`, `Option` and `HashMap` fields and
//! weak edges through a `Vec<Weak<_>>`, editing through both `get_mut` and
//! `heap[h]`, rooting and unrooting, taking and dropping `StrongObj` handles
//! (some dropped on another thread), marking and clearing garbage, changing
//! what an external `Referencer` reports, and collecting. A model graph
//! mirrors every change. After each collection the test checks that exactly
//! the objects the model cannot reach from its roots (plus garbage-marked
//! ones) were freed, that every other object kept its fields, that weak and
//! strong handles resolve exactly while their object lives, and that the
//! `CollectStats` counts (roots, marked, unreachable, freed, live) agree with
//! the model. Pool objects are never freed and keep their targets alive.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use coreobject::{
    AnyObj, Error, GcConfig, Heap, HeapConfig, HookId, Obj, Object, Referencer, ResolveError,
    StrongObj, Visitor, Weak,
};
use proptest::prelude::*;
use proptest::sample::Index;

#[derive(Object)]
struct Node {
    id: usize,
    list: Vec<Obj<Node>>,
    slot: Option<Obj<Node>>,
    map: HashMap<u8, Obj<Node>>,
    weak: Vec<Weak<Node>>,
}

impl Node {
    fn new(id: usize) -> Node {
        Node {
            id,
            list: Vec::new(),
            slot: None,
            map: HashMap::new(),
            weak: Vec::new(),
        }
    }
}

/// An outside structure holding handles (Unreal's `FGCObject`).
#[derive(Default)]
struct External(Mutex<Vec<AnyObj>>);

impl Referencer for External {
    fn add_referenced_objects(&self, v: &mut dyn Visitor) {
        for &h in self.0.lock().unwrap().iter() {
            v.visit(h);
        }
    }
}

/// What the model knows about one object ever created.
struct MObj {
    h: Obj<Node>,
    alive: bool,
    garbage: bool,
    rooted: bool,
    pool: bool,
    outer: Option<usize>,
    list: Vec<usize>,
    slot: Option<usize>,
    map: BTreeMap<u8, usize>,
    weak: Vec<usize>,
    /// Survived a collection: a minor cycle takes it as alive.
    old: bool,
    /// Freed while a `StrongObj` to it was held: its slot is parked (not
    /// reused, not restorable) until a cycle starts with no such handle.
    parked: bool,
}

impl MObj {
    fn new(h: Obj<Node>, pool: bool, outer: Option<usize>) -> MObj {
        MObj {
            h,
            alive: true,
            garbage: false,
            rooted: false,
            pool,
            outer,
            list: Vec::new(),
            slot: None,
            map: BTreeMap::new(),
            weak: Vec::new(),
            old: false,
            parked: false,
        }
    }

    fn strong_edges(&self) -> impl Iterator<Item = usize> + '_ {
        self.list
            .iter()
            .copied()
            .chain(self.slot)
            .chain(self.map.values().copied())
            .chain(self.outer)
    }

    fn resolvable(&self) -> bool {
        self.alive && !self.garbage
    }
}

#[derive(Clone, Copy, Debug)]
enum EdgeKind {
    List,
    Slot,
    Map(u8),
    Weak,
}

#[derive(Clone, Debug)]
enum Op {
    Create {
        outer: Option<Index>,
    },
    Link {
        from: Index,
        to: Index,
        kind: EdgeKind,
    },
    Unlink {
        from: Index,
        which: Index,
    },
    Clear {
        from: Index,
    },
    Root(Index),
    Unroot(Index),
    Hold(Index),
    Release {
        which: Index,
        other_thread: bool,
    },
    Garbage(Index),
    ClearGarbage(Index),
    /// Restores a freed object into its slot with its old serial
    /// (`create_at_with_serial`): handles to it held anywhere resolve again.
    Restore(Index),
    RefAdd(Index),
    RefRemove(Index),
    ToggleReferencer,
    Collect,
    /// A minor cycle: frees the young objects that neither the roots nor
    /// any old object reaches, and every object marked as garbage.
    CollectMinor,
}

fn op() -> impl Strategy<Value = Op> {
    let kind = prop_oneof![
        3 => Just(EdgeKind::List),
        1 => Just(EdgeKind::Slot),
        1 => (0u8..4).prop_map(EdgeKind::Map),
        2 => Just(EdgeKind::Weak),
    ];
    prop_oneof![
        6 => proptest::option::weighted(0.3, any::<Index>()).prop_map(|outer| Op::Create { outer }),
        10 => (any::<Index>(), any::<Index>(), kind).prop_map(|(from, to, kind)| Op::Link { from, to, kind }),
        2 => (any::<Index>(), any::<Index>()).prop_map(|(from, which)| Op::Unlink { from, which }),
        1 => any::<Index>().prop_map(|from| Op::Clear { from }),
        2 => any::<Index>().prop_map(Op::Root),
        2 => any::<Index>().prop_map(Op::Unroot),
        2 => any::<Index>().prop_map(Op::Hold),
        2 => (any::<Index>(), any::<bool>()).prop_map(|(which, other_thread)| Op::Release { which, other_thread }),
        2 => any::<Index>().prop_map(Op::Garbage),
        1 => any::<Index>().prop_map(Op::ClearGarbage),
        2 => any::<Index>().prop_map(Op::Restore),
        1 => any::<Index>().prop_map(Op::RefAdd),
        1 => any::<Index>().prop_map(Op::RefRemove),
        1 => Just(Op::ToggleReferencer),
        3 => Just(Op::Collect),
        3 => Just(Op::CollectMinor),
    ]
}

struct World {
    heap: Heap,
    objs: Vec<MObj>,
    /// Strong handles held, with the model object each roots.
    held: Vec<(usize, StrongObj<Node>)>,
    ext: Arc<External>,
    /// What the referencer reports, in order (stale handles included).
    ext_model: Vec<usize>,
    ext_id: Option<HookId>,
    total_freed: u64,
    collections: u64,
    /// Objects restored, or whose garbage mark was cleared, since the last
    /// collection: the next minor cycle starts from them (handles held by old
    /// objects that no barrier saw may name them again).
    revived: BTreeSet<usize>,
}

const POOL: usize = 3;

impl World {
    fn new() -> World {
        World::on(1)
    }

    /// A world whose heap marks on `threads` workers (every drain parallel
    /// when above 1).
    fn on(threads: usize) -> World {
        let heap = Heap::with_config(HeapConfig {
            disregard_pool_size: POOL as u32,
            max_objects: 4096,
            gc: GcConfig {
                threads,
                parallel_threshold: 0,
                ..GcConfig::DEFAULT
            },
            ..HeapConfig::DEFAULT
        })
        .unwrap();
        let mut w = World {
            heap,
            objs: Vec::new(),
            held: Vec::new(),
            ext: Arc::new(External::default()),
            ext_model: Vec::new(),
            ext_id: None,
            total_freed: 0,
            collections: 0,
            revived: BTreeSet::new(),
        };
        w.heap.open_disregard_for_gc().unwrap();
        for _ in 0..POOL {
            let id = w.objs.len();
            let h = w.heap.create(Node::new(id));
            w.objs.push(MObj::new(h, true, None));
        }
        w.heap.close_disregard_for_gc();
        assert_eq!(w.heap.disregard_len(), POOL as u32);
        w.ext_id = Some(w.heap.add_referencer(w.ext.clone()));
        w
    }

    fn pick(&self, i: &Index) -> usize {
        i.index(self.objs.len())
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Create { outer } => {
                let id = self.objs.len();
                let outer = outer.as_ref().map(|o| self.pick(o));
                match outer {
                    None => {
                        let h = self.heap.create(Node::new(id));
                        self.objs.push(MObj::new(h, false, None));
                    }
                    Some(o) => {
                        let res = self
                            .heap
                            .spawn(Node::new(id))
                            .outer(self.objs[o].h)
                            .create();
                        if self.objs[o].resolvable() {
                            let h = res.expect("outer is live");
                            assert_eq!(self.heap.outer_of(h), Some(self.objs[o].h.any()));
                            self.objs.push(MObj::new(h, false, Some(o)));
                        } else {
                            assert!(res.is_err(), "spawned under a dead or garbage outer");
                        }
                    }
                }
            }
            Op::Link { from, to, kind } => {
                let (f, t) = (self.pick(from), self.pick(to));
                let target = self.objs[t].h;
                if !self.objs[f].resolvable() {
                    assert!(self.heap.get_mut(self.objs[f].h).is_none());
                    return;
                }
                let fh = self.objs[f].h;
                match *kind {
                    // `heap[h]` for one kind of edit, `get_mut` for the others.
                    EdgeKind::List => {
                        self.heap[fh].list.push(target);
                        self.objs[f].list.push(t);
                    }
                    EdgeKind::Slot => {
                        self.heap.get_mut(fh).unwrap().slot = Some(target);
                        self.objs[f].slot = Some(t);
                    }
                    EdgeKind::Map(k) => {
                        self.heap.get_mut(fh).unwrap().map.insert(k, target);
                        self.objs[f].map.insert(k, t);
                    }
                    EdgeKind::Weak => {
                        self.heap[fh].weak.push(target.downgrade());
                        self.objs[f].weak.push(t);
                    }
                }
            }
            Op::Unlink { from, which } => {
                let f = self.pick(from);
                let fh = self.objs[f].h;
                let Some(node) = self.heap.get_mut(fh) else {
                    assert!(!self.objs[f].resolvable());
                    return;
                };
                let m = &mut self.objs[f];
                if m.list.is_empty() {
                    node.slot = None;
                    m.slot = None;
                    if let Some((&k, _)) = m.map.iter().next() {
                        node.map.remove(&k);
                        m.map.remove(&k);
                    }
                } else {
                    let i = which.index(m.list.len());
                    node.list.remove(i);
                    m.list.remove(i);
                }
            }
            Op::Clear { from } => {
                let f = self.pick(from);
                let fh = self.objs[f].h;
                let Some(node) = self.heap.get_mut(fh) else {
                    assert!(!self.objs[f].resolvable());
                    return;
                };
                node.list.clear();
                node.slot = None;
                node.map.clear();
                node.weak.clear();
                let m = &mut self.objs[f];
                m.list.clear();
                m.slot = None;
                m.map.clear();
                m.weak.clear();
            }
            Op::Root(i) => {
                let i = self.pick(i);
                let res = self.heap.add_to_root(self.objs[i].h);
                if self.objs[i].resolvable() {
                    res.unwrap();
                    self.objs[i].rooted = true;
                    assert!(self.heap.is_rooted(self.objs[i].h));
                } else {
                    assert!(res.is_err());
                }
            }
            Op::Unroot(i) => {
                let i = self.pick(i);
                let res = self.heap.remove_from_root(self.objs[i].h);
                if self.objs[i].alive {
                    // Garbage objects may still be unrooted.
                    res.unwrap();
                    self.objs[i].rooted = false;
                    assert!(!self.heap.is_rooted(self.objs[i].h));
                } else {
                    assert!(
                        matches!(res, Err(coreobject::Error::Resolve(ResolveError::Stale(_)))),
                        "{res:?}"
                    );
                }
            }
            Op::Hold(i) => {
                let i = self.pick(i);
                match self.heap.strong(self.objs[i].h) {
                    Some(s) => {
                        assert!(self.objs[i].resolvable());
                        assert_eq!(s.obj(), self.objs[i].h);
                        self.held.push((i, s));
                    }
                    None => assert!(!self.objs[i].resolvable()),
                }
            }
            Op::Release {
                which,
                other_thread,
            } => {
                if self.held.is_empty() {
                    return;
                }
                let k = which.index(self.held.len());
                let (_, s) = self.held.swap_remove(k);
                if *other_thread {
                    std::thread::spawn(move || drop(s)).join().unwrap();
                } else {
                    drop(s);
                }
            }
            Op::Garbage(i) => {
                let i = self.pick(i);
                let res = self.heap.mark_as_garbage(self.objs[i].h);
                let m = &mut self.objs[i];
                if !m.alive {
                    assert!(
                        matches!(res, Err(coreobject::Error::Resolve(ResolveError::Stale(_)))),
                        "{res:?}"
                    );
                } else if m.pool {
                    assert_eq!(res, Err(Error::Permanent(m.h.any())));
                } else {
                    res.unwrap();
                    m.garbage = true;
                    assert!(self.heap.is_garbage(m.h));
                    assert!(self.heap.get_even_if_garbage(m.h).is_some());
                }
            }
            Op::ClearGarbage(i) => {
                let i = self.pick(i);
                let res = self.heap.clear_garbage(self.objs[i].h);
                if self.objs[i].alive {
                    res.unwrap();
                    if std::mem::replace(&mut self.objs[i].garbage, false) {
                        self.revived.insert(i);
                    }
                } else {
                    assert!(res.is_err());
                }
            }
            Op::Restore(i) => {
                let i = self.pick(i);
                let h = self.objs[i].h;
                let res = self
                    .heap
                    .create_at_with_serial(h.index(), h.serial(), Node::new(i));
                // Refused while the object lives, or once its slot served
                // another object (reused, or reused and freed again): the
                // slot's last occupant is the newest object with its index.
                let last = (0..self.objs.len())
                    .rev()
                    .find(|&j| self.objs[j].h.index() == h.index());
                if self.objs[i].alive || self.objs[i].parked || last != Some(i) {
                    assert!(res.is_err(), "restored over a live or reused slot: {res:?}");
                } else {
                    assert_eq!(res, Ok(h));
                    let pool = self.objs[i].pool;
                    self.objs[i] = MObj::new(h, pool, None);
                    self.revived.insert(i);
                }
            }
            Op::RefAdd(i) => {
                let i = self.pick(i);
                self.ext.0.lock().unwrap().push(self.objs[i].h.any());
                self.ext_model.push(i);
            }
            Op::RefRemove(i) => {
                if self.ext_model.is_empty() {
                    return;
                }
                let k = i.index(self.ext_model.len());
                self.ext.0.lock().unwrap().remove(k);
                self.ext_model.remove(k);
            }
            Op::ToggleReferencer => match self.ext_id.take() {
                Some(id) => assert!(self.heap.remove_referencer(id)),
                None => self.ext_id = Some(self.heap.add_referencer(self.ext.clone())),
            },
            Op::Collect => self.collect_and_check(),
            Op::CollectMinor => self.collect_minor_and_check(),
        }
        self.check_handles();
    }

    /// Model roots: indices the collector should start from, and the
    /// `roots` count it should report.
    fn model_roots(&self) -> (Vec<usize>, usize) {
        let mut starts = Vec::new();
        let mut count = 0;
        let held: BTreeSet<usize> = self.held.iter().map(|(i, _)| *i).collect();
        for (i, m) in self.objs.iter().enumerate() {
            // Every allocated object in the root set or with strong handles is
            // a root candidate, garbage or not (garbage is then not marked).
            if m.alive && (m.rooted || held.contains(&i)) {
                count += 1;
                starts.push(i);
            }
        }
        if self.ext_id.is_some() {
            count += self.ext_model.len();
            starts.extend(self.ext_model.iter().copied());
        }
        // Pool objects are permanent; their references are roots.
        for m in self.objs.iter().filter(|m| m.pool) {
            starts.extend(m.strong_edges());
        }
        (starts, count)
    }

    /// The objects a plain BFS reaches from the model roots (pool objects
    /// are not visited as targets: they are never marked).
    fn reachable(&self) -> BTreeSet<usize> {
        let (starts, _) = self.model_roots();
        self.reachable_from(starts)
    }

    /// What a BFS reaches from `starts` through objects not marked as
    /// garbage (pool objects are not visited as targets).
    fn reachable_from(&self, starts: Vec<usize>) -> BTreeSet<usize> {
        let mut seen = BTreeSet::new();
        let mut queue: VecDeque<usize> = starts.into();
        while let Some(i) = queue.pop_front() {
            let m = &self.objs[i];
            if !m.resolvable() || m.pool || !seen.insert(i) {
                continue;
            }
            queue.extend(m.strong_edges());
        }
        seen
    }

    /// A minor cycle, checked exactly: old objects (alive after the last
    /// collection) are taken as alive, so the young objects freed are those
    /// that neither the roots nor any old object that is not garbage
    /// reaches; every object marked as garbage goes too.
    fn collect_minor_and_check(&mut self) {
        let (mut starts, _) = self.model_roots();
        starts.extend(
            (0..self.objs.len()).filter(|&i| self.objs[i].old && self.objs[i].resolvable()),
        );
        starts.extend(std::mem::take(&mut self.revived));
        let kept = self.reachable_from(starts);
        let doomed: Vec<usize> = (0..self.objs.len())
            .filter(|&i| {
                let m = &self.objs[i];
                m.alive && !m.pool && (m.garbage || (!m.old && !kept.contains(&i)))
            })
            .collect();
        let young_kept = (0..self.objs.len())
            .filter(|&i| {
                let m = &self.objs[i];
                m.alive && !m.pool && !m.old && !m.garbage && kept.contains(&i)
            })
            .count();
        self.note_parking(&doomed);
        let stats = self.heap.collect_minor().expect("collector enabled");
        self.collections += 1;
        assert_eq!(stats.kind, coreobject::CycleKind::Minor);
        for &i in &doomed {
            self.objs[i].alive = false;
        }
        self.total_freed += doomed.len() as u64;
        let live = self.objs.iter().filter(|m| m.alive).count();
        assert_eq!(stats.freed, doomed.len(), "freed by the minor cycle");
        assert_eq!(stats.unreachable, doomed.len(), "unreachable");
        assert_eq!(stats.promoted, young_kept, "promoted");
        assert_eq!(stats.live, live, "live");
        let totals = self.heap.gc_totals();
        assert_eq!(totals.collections, self.collections);
        assert_eq!(totals.total_freed, self.total_freed);
        self.check_survivors(&kept);
    }

    fn collect_and_check(&mut self) {
        let reach = self.reachable();
        let (_, roots) = self.model_roots();
        let doomed: Vec<usize> = (0..self.objs.len())
            .filter(|&i| {
                let m = &self.objs[i];
                m.alive && !m.pool && !reach.contains(&i)
            })
            .collect();
        self.note_parking(&doomed);
        let stats = self.heap.collect().expect("collector enabled");
        self.collections += 1;
        self.revived.clear();
        for &i in &doomed {
            self.objs[i].alive = false;
        }
        self.total_freed += doomed.len() as u64;
        let live = self.objs.iter().filter(|m| m.alive).count();
        assert_eq!(stats.marked, reach.len(), "marked");
        assert_eq!(stats.mark_threads, self.heap.gc_config().threads, "threads");
        assert_eq!(stats.unreachable, doomed.len(), "unreachable");
        assert_eq!(stats.freed, doomed.len(), "freed");
        assert_eq!(stats.pending, 0);
        assert_eq!(stats.roots, roots, "roots");
        assert_eq!(stats.live, live, "live");
        assert_eq!(
            stats.freed_bytes,
            doomed.len() * Node::class().size(),
            "freed bytes"
        );
        let totals = self.heap.gc_totals();
        assert_eq!(totals.collections, self.collections);
        assert_eq!(totals.last_freed, doomed.len());
        assert_eq!(totals.total_freed, self.total_freed);
        assert_eq!(self.heap.last_collection(), Some(&stats));
        self.check_survivors(&reach);
    }

    /// A cycle starts: parked slots no handle counts on are released; the
    /// `doomed` it frees are parked if a strong handle to them is held.
    fn note_parking(&mut self, doomed: &[usize]) {
        let held: BTreeSet<usize> = self.held.iter().map(|(i, _)| *i).collect();
        for (i, m) in self.objs.iter_mut().enumerate() {
            if m.parked && !held.contains(&i) {
                m.parked = false;
            }
        }
        for &i in doomed {
            self.objs[i].parked = held.contains(&i);
        }
    }

    /// Every survivor kept its fields, and every object the model says is
    /// alive resolves; all of them are old now.
    fn check_survivors(&mut self, reach: &BTreeSet<usize>) {
        for m in self.objs.iter_mut() {
            m.old = m.alive;
        }
        // Every survivor kept its fields.
        for (i, m) in self.objs.iter().enumerate() {
            let Some(node) = self.heap.get_even_if_garbage(m.h) else {
                assert!(!m.alive, "object {i} lost");
                continue;
            };
            assert!(m.alive, "object {i} should have been freed");
            assert_eq!(node.id, i);
            let list: Vec<_> = m.list.iter().map(|&t| self.objs[t].h).collect();
            assert_eq!(node.list, list);
            assert_eq!(node.slot, m.slot.map(|t| self.objs[t].h));
            let map: BTreeMap<u8, Obj<Node>> =
                m.map.iter().map(|(&k, &t)| (k, self.objs[t].h)).collect();
            assert_eq!(
                node.map
                    .iter()
                    .map(|(&k, &v)| (k, v))
                    .collect::<BTreeMap<_, _>>(),
                map
            );
            assert_eq!(node.weak.len(), m.weak.len());
            for (w, &t) in node.weak.iter().zip(&m.weak) {
                assert_eq!(w.any(), self.objs[t].h.any());
                assert_eq!(
                    self.heap.get(*w).is_some(),
                    self.objs[t].resolvable(),
                    "weak edge {i} -> {t}"
                );
            }
            // Strong edges of a survivor that is not garbage point at survivors
            // (or at objects garbage-collected through MarkAsGarbage).
            if m.resolvable() {
                for t in m.strong_edges() {
                    let tm = &self.objs[t];
                    assert!(
                        tm.alive || !reach.contains(&t),
                        "reachable target {t} of {i} freed"
                    );
                }
            }
        }
    }

    /// Cheap check after every operation: which handles resolve.
    fn check_handles(&self) {
        let live = self.objs.iter().filter(|m| m.alive).count();
        assert_eq!(self.heap.len(), live, "heap.len()");
        for (i, m) in self.objs.iter().enumerate() {
            assert_eq!(self.heap.contains(m.h), m.resolvable(), "contains {i}");
            assert_eq!(
                self.heap.get(m.h.downgrade()).is_some(),
                m.resolvable(),
                "weak handle to {i}"
            );
            if m.resolvable() {
                assert_eq!(self.heap[m.h].id, i);
            }
        }
        for (i, s) in &self.held {
            assert_eq!(self.heap.get(s).is_some(), self.objs[*i].resolvable());
        }
        // Strong counts agree with the handles held.
        for (i, m) in self.objs.iter().enumerate() {
            if m.alive {
                let n = self.held.iter().filter(|(j, _)| *j == i).count();
                assert_eq!(self.heap.strong_count(m.h), n, "strong count of {i}");
            }
        }
    }
}

/// Operations per case (fewer under miri, which takes a third of a second
/// for each).
const MAX_OPS: usize = if cfg!(miri) { 25 } else { 160 };

/// Marking threads each history runs on. Under miri only one: the workers
/// run on rayon and crossbeam, which miri stops in (see `tests/parallel.rs`).
const THREADS: &[usize] = if cfg!(miri) { &[1] } else { &[1, 2, 4] };

/// Full size or the default run's: `COREOBJECT_FULL_TESTS=1` (CI's test
/// step) runs the full count; a plain `cargo test --workspace` runs
/// less, to stay quick.
fn full_tests() -> bool {
    std::env::var_os("COREOBJECT_FULL_TESTS").is_some_and(|v| v != "0")
}

proptest! {
    #![proptest_config(if cfg!(miri) {
        // Under miri: a few cases, and no regression file (its isolation
        // keeps the file system away).
        ProptestConfig { cases: 2, failure_persistence: None, ..ProptestConfig::default() }
    } else {
        // A quarter of the cases by default; all of them in CI.
        ProptestConfig {
            cases: if full_tests() { 256 } else { 64 },
            ..ProptestConfig::default()
        }
    })]

    /// Each history runs on 1, 2 and 4 marking threads (more than this
    /// machine's cores), each checked against the model, so all three
    /// free the same objects.
    #[test]
    fn collection_frees_exactly_the_unreachable(ops in proptest::collection::vec(op(), 1..MAX_OPS)) {
        for &threads in THREADS {
            run_ops(&ops, threads);
        }
    }
}

/// Applies `ops` on a heap marking with `threads`, then drops every root
/// and checks all but the pool go.
fn run_ops(ops: &[Op], threads: usize) {
    /// Names the thread count in a failure's output.
    struct Threads(usize);
    impl Drop for Threads {
        fn drop(&mut self) {
            if std::thread::panicking() {
                eprintln!("(marking on {} threads)", self.0);
            }
        }
    }
    let _threads = Threads(threads);
    {
        let mut w = World::on(threads);
        for op in ops {
            w.apply(op);
        }
        // Finish with a full cleanup: drop every root and check all go.
        w.apply(&Op::Collect);
        for (_, s) in std::mem::take(&mut w.held) {
            drop(s);
        }
        for m in &mut w.objs {
            if m.alive {
                w.heap.remove_from_root(m.h).unwrap();
                m.rooted = false;
                if !m.pool {
                    let _ = w.heap.clear_garbage(m.h);
                    m.garbage = false;
                }
            }
        }
        w.ext.0.lock().unwrap().clear();
        w.ext_model.clear();
        for i in 0..POOL {
            let h = w.objs[i].h;
            w.heap.get_mut(h).unwrap().list.clear();
            w.heap[h].slot = None;
            w.heap[h].map.clear();
            let m = &mut w.objs[i];
            m.list.clear();
            m.slot = None;
            m.map.clear();
        }
        w.apply(&Op::Collect);
        assert_eq!(w.heap.len(), POOL, "threads {threads}");
    }
}

/// A fixed scenario with every kind of root and edge, as a readable example
/// of what the model checks.
#[test]
fn every_root_kind_and_the_pool_keep_their_targets() {
    let mut w = World::new();
    // 3..=12: ten plain objects.
    for _ in 0..10 {
        w.apply(&Op::Create { outer: None });
    }
    let h: Vec<Obj<Node>> = w.objs.iter().map(|m| m.h).collect();
    // Pool object 0 -> 3 (list); 3 -> 4 (map); 4 -weak-> 5.
    w.heap[h[0]].list.push(h[3]);
    w.objs[0].list.push(3);
    w.heap[h[3]].map.insert(1, h[4]);
    w.objs[3].map.insert(1, 4);
    w.heap[h[4]].weak.push(h[5].downgrade());
    w.objs[4].weak.push(5);
    // 6 rooted -> 7 (slot); 8 held strongly; 9 reported by the referencer;
    // 10 has outer 11 (so keeps 11 alive) and is rooted; 12 is garbage but rooted.
    w.heap.add_to_root(h[6]).unwrap();
    w.objs[6].rooted = true;
    w.heap.get_mut(h[6]).unwrap().slot = Some(h[7]);
    w.objs[6].slot = Some(7);
    let s = w.heap.strong(h[8]).unwrap();
    w.held.push((8, s));
    w.ext.0.lock().unwrap().push(h[9].any());
    w.ext_model.push(9);
    let inner = w
        .heap
        .spawn(Node::new(13))
        .outer(h[11])
        .root()
        .create()
        .unwrap();
    let mut m = MObj::new(inner, false, Some(11));
    m.rooted = true;
    w.objs.push(m);
    w.heap.add_to_root(h[12]).unwrap();
    w.objs[12].rooted = true;
    w.heap.mark_as_garbage(h[12]).unwrap();
    w.objs[12].garbage = true;
    w.check_handles();

    let reach = w.reachable();
    assert_eq!(reach, BTreeSet::from([3, 4, 6, 7, 8, 9, 11, 13]));
    w.collect_and_check();
    // Freed: 5 (weak only), 10 (nothing), 12 (garbage though rooted).
    for i in [5, 10, 12] {
        assert!(!w.objs[i].alive);
        assert!(w.heap.get_even_if_garbage(h[i]).is_none());
    }
    let weak = w.heap[h[4]].weak[0];
    assert!(
        w.heap.get(weak).is_none(),
        "weak edge went stale with its object"
    );
}

//! The purge's plain free loop (no outer links, listeners or clusters)
//! gives a slice's freed indices back to the free list in one batch, and
//! freed slots back to their pages a run at a time. Against a model, over
//! whole and sliced, minor and major cycles (slices of 1 to 64 units, so a
//! batch ends inside a cycle), with creation between slices, named objects
//! and strong handles: every freed index is reused exactly once before
//! the table grows, no two live objects share an index, every live handle
//! resolves to its own value, and a stale handle never resolves.
//!
//! The same model with a batch delete listener, GC clusters and objects
//! with outers (the purge's quick loop, which frees an object that has no
//! outer and is none through the batch and the rest through `free_one`,
//! into the same batch): the listener hears exactly the freed objects,
//! each once, with their class, in the order they were freed (slot order
//! in a major cycle); a freed cluster root takes its cluster with it; each
//! outer lists exactly its live inners.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use coreobject::{AnyObj, GcConfig, Heap, HeapConfig, Obj, Object, ObjectEvent};

#[derive(Object)]
struct Leaf {
    value: u64,
    /// A value that needs dropping, in some objects: the plain loop's drop.
    text: Option<String>,
}

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What the heap has beside the plain case.
#[derive(Clone, Copy, Default)]
struct Extras {
    /// A batch delete listener.
    listener: bool,
    /// Single-object GC clusters on some objects.
    clusters: bool,
    /// Some objects created with an outer (kept, rooted, never freed).
    outers: bool,
}

struct Model {
    heap: Heap,
    /// Live objects: handle -> value.
    live: HashMap<Obj<Leaf>, u64>,
    /// Every handle freed so far.
    dead: Vec<Obj<Leaf>>,
    next_value: u64,
    named: u64,
    extras: Extras,
    /// What the batch listener heard, one entry per call.
    heard: Arc<Mutex<Vec<Vec<ObjectEvent>>>>,
    /// The outers (rooted for good, not in `live`) and each live inner's.
    outers: Vec<Obj<Leaf>>,
    inner_of: HashMap<Obj<Leaf>, Obj<Leaf>>,
    /// Live objects that are the root of a cluster of their own.
    cluster_roots: HashSet<Obj<Leaf>>,
}

impl Model {
    fn new(heap: Heap, extras: Extras) -> Model {
        let mut m = Model {
            heap,
            live: HashMap::new(),
            dead: Vec::new(),
            next_value: 0,
            named: 0,
            extras,
            heard: Arc::default(),
            outers: Vec::new(),
            inner_of: HashMap::new(),
            cluster_roots: HashSet::new(),
        };
        if extras.listener {
            let heard = m.heard.clone();
            m.heap.on_delete_batch(move |batch: &[ObjectEvent]| {
                heard.lock().unwrap().push(batch.to_vec())
            });
        }
        if extras.outers {
            for k in 0..4 {
                let o = m
                    .heap
                    .spawn_mut(Leaf {
                        value: u64::MAX - k,
                        text: None,
                    })
                    .root()
                    .create()
                    .unwrap();
                m.outers.push(o);
            }
            // Turns the outer → inners index on.
            m.heap.for_each_with_outer(m.outers[0], |_| {});
        }
        m
    }

    /// Creates a rooted object (named, with an outer, or a cluster root at
    /// random); `quiet` when no cycle is in flight (clusters are made then).
    fn create(&mut self, rng: &mut Rng, quiet: bool) -> Obj<Leaf> {
        let value = self.next_value;
        self.next_value += 1;
        let leaf = Leaf {
            value,
            text: (value % 3 == 0).then(|| format!("leaf {value}")),
        };
        let outer = (self.extras.outers && rng.below(4) == 0)
            .then(|| self.outers[rng.below(self.outers.len() as u64) as usize]);
        let h = if rng.below(8) == 0 || outer.is_some() {
            self.named += 1;
            let name = format!("leaf_{}", self.named);
            let mut spawn = self.heap.spawn_mut(leaf);
            if let Some(o) = outer {
                spawn = spawn.outer(o);
            }
            spawn.name(name.as_str()).root().create()
        } else {
            let h = self.heap.create_mut(leaf);
            self.heap.add_to_root(h).unwrap();
            Ok(h)
        }
        .unwrap();
        if let Some(o) = outer {
            self.inner_of.insert(h, o);
        } else if self.extras.clusters && quiet && rng.below(8) == 0 {
            self.heap
                .create_cluster(h)
                .expect("a fresh object makes a cluster");
            self.cluster_roots.insert(h);
        }
        self.live.insert(h, value);
        h
    }

    /// The batch listener heard exactly `freed`, each once, with its
    /// class; in a `major` cycle, in slot order (the order the free step
    /// walks the bitmap). Clusters and outers match the model.
    fn check_heard(&mut self, freed: &[Obj<Leaf>], major: bool) {
        if self.extras.listener {
            let heard: Vec<ObjectEvent> = self.heard.lock().unwrap().drain(..).flatten().collect();
            let mut once = HashSet::new();
            for e in &heard {
                assert!(once.insert(e.object), "{:?} heard twice", e.object);
                assert_eq!(e.class.name(), "Leaf");
            }
            let expected: HashSet<AnyObj> = freed.iter().map(|&h| AnyObj::from(h)).collect();
            assert_eq!(
                once, expected,
                "the listener heard other objects than were freed"
            );
            if major {
                let indices: Vec<u32> = heard.iter().map(|e| e.object.index()).collect();
                assert!(
                    indices.windows(2).all(|w| w[0] < w[1]),
                    "a major cycle's deletions out of slot order: {indices:?}"
                );
            }
        }
        for h in freed {
            self.cluster_roots.remove(h);
            self.inner_of.remove(h);
        }
        if self.extras.clusters {
            assert_eq!(
                self.heap.clusters().len(),
                self.cluster_roots.len(),
                "a freed cluster root's cluster is still there"
            );
            for &r in &self.cluster_roots {
                assert!(self.heap.cluster_of(r).is_some(), "{r:?} lost its cluster");
            }
        }
        for &o in &self.outers {
            let mut listed = HashSet::new();
            self.heap.for_each_with_outer(o, |r| {
                listed.insert(r.id());
            });
            let inners: HashSet<AnyObj> = self
                .inner_of
                .iter()
                .filter(|&(_, &oo)| oo == o)
                .map(|(&h, _)| AnyObj::from(h))
                .collect();
            assert_eq!(listed, inners, "outer {o:?} lists other inners");
            for &i in &inners {
                assert_eq!(self.heap.outer_of(i), Some(AnyObj::from(o)));
            }
        }
    }

    /// Every live handle resolves to its own value at its own index, once;
    /// every freed handle is stale.
    fn check(&self) {
        let mut indices = HashSet::new();
        for (&h, &v) in &self.live {
            let leaf = self.heap.get(h).expect("a live object resolves");
            assert_eq!(leaf.value, v, "handle {h:?} resolves to another object");
            assert!(indices.insert(h.index()), "index {} twice", h.index());
        }
        for &h in &self.dead {
            assert!(self.heap.get(h).is_none(), "stale {h:?} resolves");
            assert!(
                !self.heap.contains(AnyObj::from(h)),
                "stale {h:?} contained"
            );
        }
        let t = self.heap.table_stats();
        assert_eq!(t.objects, self.live.len() + self.outers.len());
        assert_eq!(
            t.high_water as usize,
            t.objects + t.free + t.retired as usize + t.reserved,
            "{t:?}"
        );
    }
}

fn run(seed: u64, rounds: usize, size: usize, extras: Extras) {
    let mut rng = Rng(seed | 1);
    let heap = Heap::with_config(HeapConfig {
        gc: GcConfig::MANUAL,
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    let mut m = Model::new(heap, extras);
    for round in 0..rounds {
        for _ in 0..size {
            m.create(&mut rng, true);
        }
        // Unroot a random part (sometimes nearly all, sometimes few).
        let share = 1 + rng.below(10);
        let doomed: Vec<_> = m
            .live
            .keys()
            .copied()
            .filter(|_| rng.below(10) < share)
            .collect();
        // A strong handle on a few: freed, but its index parked.
        let mut strong = Vec::new();
        for &h in &doomed {
            m.heap.remove_from_root(h).unwrap();
            if rng.below(50) == 0 {
                strong.push(m.heap.strong(h).unwrap());
            }
        }
        let strong_held: HashSet<_> = strong.iter().map(|s| s.obj()).collect();
        let minor = rng.below(2) == 0;
        let sliced = rng.below(3) != 0;
        let work = 1 + rng.below(64) as usize;
        if sliced {
            let mut slices = 0u32;
            loop {
                slices += 1;
                let tick = if minor {
                    m.heap.step_minor(work)
                } else {
                    m.heap.step(work)
                };
                if tick.completed.is_some() {
                    break;
                }
                // Creation between slices takes indices from the free list
                // as it stands: never one a batch has not returned yet.
                if rng.below(4) == 0 {
                    m.create(&mut rng, false);
                }
                if slices % 16 == 0 {
                    m.check_live_only(&doomed, &strong_held);
                }
            }
        } else if minor {
            m.heap.collect_minor().unwrap();
        } else {
            m.heap.collect().unwrap();
        }
        // A minor cycle frees only young objects: the doomed ones that a
        // previous cycle made old survive it (unrooted) until a major one.
        let survivors: Vec<_> = doomed
            .iter()
            .copied()
            .filter(|&h| m.heap.get(h).is_some() || strong_held.contains(&h))
            .collect();
        let mut freed = Vec::new();
        for &h in &doomed {
            let value = m.live.remove(&h).unwrap();
            if survivors.contains(&h) && !strong_held.contains(&h) {
                // Still there (old, unrooted): root it again and keep it.
                m.heap.add_to_root(h).unwrap();
                m.live.insert(h, value);
            } else if !strong_held.contains(&h) {
                m.dead.push(h);
                freed.push(h);
            }
        }
        m.check_heard(&freed, !minor);
        // A strong handle keeps its object alive: it was never freed.
        for s in &strong {
            let h = s.obj();
            assert!(m.heap.get(h).is_some(), "a strongly held object was freed");
            m.heap.add_to_root(h).unwrap();
            let v = m.heap.get(h).unwrap().value;
            m.live.insert(h, v);
        }
        drop(strong);
        m.check();
        // Reuse: as many creations as slots are free take exactly the free
        // indices, each once, and the table does not grow.
        let t = m.heap.table_stats();
        let hw = t.high_water;
        let mut reused = HashSet::new();
        for _ in 0..t.free {
            let h = m.create(&mut rng, true);
            assert!(
                reused.insert(h.index()),
                "index {} handed out twice",
                h.index()
            );
        }
        assert_eq!(
            m.heap.table_stats().high_water,
            hw,
            "round {round}: the table grew"
        );
        assert_eq!(m.heap.table_stats().free, 0);
        m.check();
    }
}

impl Model {
    /// Between slices: the objects not doomed resolve to their values, and
    /// no index is shared.
    fn check_live_only(&self, doomed: &[Obj<Leaf>], strong: &HashSet<Obj<Leaf>>) {
        let doomed: HashSet<_> = doomed.iter().collect();
        let mut indices = HashSet::new();
        for (&h, &v) in &self.live {
            if doomed.contains(&h) && !strong.contains(&h) {
                continue;
            }
            let leaf = self.heap.get(h).expect("a live object resolves");
            assert_eq!(leaf.value, v);
            assert!(indices.insert(h.index()), "index {} twice", h.index());
        }
        for &h in &self.dead {
            assert!(self.heap.get(h).is_none(), "stale {h:?} resolves");
        }
    }
}

#[test]
fn batched_frees_reuse_each_index_once() {
    let (seeds, rounds, size) = if cfg!(miri) { (1, 3, 40) } else { (4, 8, 600) };
    for seed in 0..seeds {
        run(0x9e37_79b9 * (seed + 1), rounds, size, Extras::default());
    }
}

/// The quick loop: a batch delete listener, clusters and outers, alone and
/// together.
#[test]
fn batched_frees_with_listener_clusters_and_outers() {
    let (seeds, rounds, size) = if cfg!(miri) { (1, 3, 40) } else { (3, 8, 600) };
    let all = Extras {
        listener: true,
        clusters: true,
        outers: true,
    };
    let cases = [
        Extras {
            listener: true,
            ..Extras::default()
        },
        Extras {
            clusters: true,
            ..Extras::default()
        },
        Extras {
            outers: true,
            ..Extras::default()
        },
        all,
    ];
    let cases = if cfg!(miri) { &cases[3..] } else { &cases[..] };
    for (k, &extras) in cases.iter().enumerate() {
        for seed in 0..seeds {
            run(0x5851_f42d * (seed + 1) + k as u64, rounds, size, extras);
        }
    }
}

//! The purge's plain free loop (no outer links, listeners or clusters)
//! gives a slice's freed indices back to the free list in one batch, and
//! freed slots back to their pages a run at a time. Against a model, over
//! whole and sliced, minor and major cycles (slices of 1 to 64 units, so a
//! batch ends inside a cycle), with creation between slices, named objects
//! and strong handles: every freed index is reused exactly once before
//! the table grows, no two live objects share an index, every live handle
//! resolves to its own value, and a stale handle never resolves.

use std::collections::{HashMap, HashSet};

use coreobject::{AnyObj, GcConfig, Heap, HeapConfig, Obj, Object};

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

struct Model {
    heap: Heap,
    /// Live objects: handle -> value.
    live: HashMap<Obj<Leaf>, u64>,
    /// Every handle freed so far.
    dead: Vec<Obj<Leaf>>,
    next_value: u64,
    named: u64,
}

impl Model {
    fn create(&mut self, rng: &mut Rng) -> Obj<Leaf> {
        let value = self.next_value;
        self.next_value += 1;
        let leaf = Leaf {
            value,
            text: (value % 3 == 0).then(|| format!("leaf {value}")),
        };
        let h = if rng.below(8) == 0 {
            self.named += 1;
            let name = format!("leaf_{}", self.named);
            self.heap
                .spawn_mut(leaf)
                .name(name.as_str())
                .root()
                .create()
        } else {
            let h = self.heap.create_mut(leaf);
            self.heap.add_to_root(h).unwrap();
            Ok(h)
        }
        .unwrap();
        self.live.insert(h, value);
        h
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
        assert_eq!(t.objects, self.live.len());
        assert_eq!(
            t.high_water as usize,
            t.objects + t.free + t.retired as usize + t.reserved,
            "{t:?}"
        );
    }
}

fn run(seed: u64, rounds: usize, size: usize) {
    let mut rng = Rng(seed | 1);
    let heap = Heap::with_config(HeapConfig {
        gc: GcConfig::MANUAL,
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    let mut m = Model {
        heap,
        live: HashMap::new(),
        dead: Vec::new(),
        next_value: 0,
        named: 0,
    };
    for round in 0..rounds {
        for _ in 0..size {
            m.create(&mut rng);
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
                    m.create(&mut rng);
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
        for &h in &doomed {
            let value = m.live.remove(&h).unwrap();
            if survivors.contains(&h) && !strong_held.contains(&h) {
                // Still there (old, unrooted): root it again and keep it.
                m.heap.add_to_root(h).unwrap();
                m.live.insert(h, value);
            } else if !strong_held.contains(&h) {
                m.dead.push(h);
            }
        }
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
            let h = m.create(&mut rng);
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
        run(0x9e37_79b9 * (seed + 1), rounds, size);
    }
}

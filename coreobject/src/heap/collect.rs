//! Collecting: whole, minor and incremental cycles, the collector's settings and callbacks.

use std::time::Duration;

use crate::config::GcConfig;
use crate::error::Error;
use crate::gc::{
    CollectStats, Collector, CycleKind, GcTotals, Phase, PreCollect, Stage, Tick, Trigger,
};
use crate::listener::HookId;

use super::Heap;

impl Heap {
    /// Splits the heap into the collector and what it works on.
    pub(super) fn stage(&mut self) -> (&mut Collector, Stage<'_>) {
        if self.gc.config().outer_keeps_inners {
            self.ensure_inners();
        }
        self.refresh_clusters();
        (
            &mut self.gc,
            Stage {
                array: &mut self.array,
                names: &mut self.names,
                listeners: &self.listeners,
                referencers: &self.referencers,
                inners: self.inners.get_mut(),
                clusters: self.clusters.get_mut(),
                store_dirty: &self.store_dirty,
            },
        )
    }

    /// Runs a full collection now (Unreal's `CollectGarbage`), finishing
    /// first any incremental cycle in flight. Refused with
    /// [`Error::GcDisabled`] while the collector is disabled.
    ///
    /// # Panics
    /// Resumes the first panic raised by a destruction hook, a delete
    /// listener, a `Drop` or a post-collection callback, after the collection
    /// has completed, its totals are counted and the heap is consistent (see
    /// [`Lifecycle`](crate::Lifecycle)). A panic in a pre-collection callback
    /// propagates at once, before anything is marked. A panic while marking (a
    /// hand-written `Trace` or a [`Referencer`](crate::Referencer)) abandons the cycle with
    /// nothing freed and no root forgotten.
    ///
    /// ```
    /// # use coreobject::{Error, Heap, Object};
    /// # #[derive(Object, Default)] struct Coin;
    /// let mut heap = Heap::new();
    /// heap.create(Coin);
    /// heap.set_enabled(false);
    /// assert_eq!(heap.collect(), Err(Error::GcDisabled));
    /// heap.set_enabled(true);
    /// assert_eq!(heap.collect().unwrap().freed, 1);
    /// ```
    pub fn collect(&mut self) -> Result<CollectStats, Error> {
        if !self.gc.is_enabled() {
            return Err(Error::GcDisabled);
        }
        let (gc, stage) = self.stage();
        Ok(gc.collect(stage, Trigger::Explicit, CycleKind::Major))
    }

    /// Runs a **minor** cycle now (finishing first any cycle in flight): it
    /// marks from the roots, the referencers, the old objects changed since
    /// the last cycle (through [`get_mut`](Self::get_mut), or borrowed at all
    /// if their class is interior-mutable) and the young objects reachable
    /// from those, and frees the young objects it did not reach and every
    /// object marked as garbage. Objects that survived an earlier cycle are
    /// taken as alive, so an old object that became unreachable waits for
    /// the next major cycle ([`collect`](Self::collect)), and so does what
    /// only it references. Its cost follows what the program created and
    /// changed since the last cycle, not the size of the heap.
    ///
    /// Without [`GcConfig::generational`](crate::GcConfig::generational)
    /// since the last cycle completed, it runs a major cycle instead
    /// ([`CollectStats::kind`] says which ran). Refused with
    /// [`Error::GcDisabled`] while the collector is disabled.
    ///
    /// # Panics
    /// As [`collect`](Self::collect).
    ///
    /// ```
    /// use coreobject::{CycleKind, Heap, Obj, Object};
    /// #[derive(Object, Default)]
    /// struct Node { next: Vec<Obj<Node>> }
    /// let mut heap = Heap::new();
    /// let world = heap.spawn(Node::default()).root().create().unwrap();
    /// for _ in 0..1_000 {
    ///     let n = heap.create(Node::default());
    ///     heap[world].next.push(n);
    /// }
    /// heap.collect().unwrap(); // the world is old now
    /// let kept = heap.create(Node::default());
    /// heap[world].next.push(kept); // remembered: `world` is old and changed
    /// heap.create(Node::default()); // young garbage
    /// let stats = heap.collect_minor().unwrap();
    /// assert_eq!(stats.kind, CycleKind::Minor);
    /// assert_eq!((stats.young, stats.remembered, stats.freed), (2, 1, 1));
    /// assert!(stats.marked < 10, "old objects are not marked again");
    /// assert!(heap.contains(kept));
    /// ```
    pub fn collect_minor(&mut self) -> Result<CollectStats, Error> {
        if !self.gc.is_enabled() {
            return Err(Error::GcDisabled);
        }
        let (gc, stage) = self.stage();
        Ok(gc.collect(stage, Trigger::Explicit, CycleKind::Minor))
    }

    /// Advances the collector by one frame of `dt`.
    ///
    /// Stop-the-world ([`GcConfig::incremental`](crate::GcConfig::incremental)
    /// is `None`): collects if a trigger fires (interval, object count,
    /// bytes, growth, or every frame), and otherwise finishes objects whose
    /// destruction was deferred and that are now ready. Incremental: runs at
    /// most one slice of the budget: starts a cycle when a trigger fires,
    /// otherwise continues marking or purging the cycle in flight, otherwise
    /// polls deferred objects. The returned [`Tick`] says what it did.
    ///
    /// # Panics
    /// As [`collect`](Self::collect), at the end of the slice in which the
    /// panic was caught.
    ///
    /// ```
    /// use coreobject::{GcConfig, Heap, HeapConfig, Object, Trigger};
    /// use std::time::Duration;
    /// #[derive(Object, Default)] struct Spark;
    /// let cfg = HeapConfig { gc: GcConfig { interval: Some(Duration::from_millis(50)), ..GcConfig::MANUAL }, ..HeapConfig::DEFAULT };
    /// let mut heap = Heap::with_config(cfg).unwrap();
    /// heap.create(Spark);
    /// assert!(heap.tick(Duration::from_millis(16)).completed.is_none());
    /// let stats = heap.tick(Duration::from_millis(40)).completed.unwrap();
    /// assert_eq!(stats.trigger, Trigger::Interval);
    /// assert!(heap.is_empty());
    /// ```
    ///
    /// Incremental, with a budget of 2 ms per tick:
    ///
    /// ```
    /// use coreobject::{GcConfig, Heap, HeapConfig, Obj, Object, Phase};
    /// use std::time::Duration;
    /// #[derive(Object, Default)] struct Node { next: Option<Obj<Node>> }
    /// let gc = GcConfig { incremental: Some(Duration::from_millis(2)), every_frame: true, ..GcConfig::MANUAL };
    /// let mut heap = Heap::with_config(HeapConfig { gc, ..HeapConfig::DEFAULT }).unwrap();
    /// let keep = heap.create(Node::default());
    /// heap.add_to_root(keep).unwrap();
    /// let lost = heap.create(Node::default());
    /// let stats = loop {
    ///     let tick = heap.tick(Duration::from_millis(16));
    ///     if let Some(stats) = tick.completed { break stats; }
    ///     assert_ne!(tick.phase, Phase::Idle);
    /// };
    /// assert_eq!(stats.freed, 1);
    /// assert!(heap.get(lost).is_none() && heap.get(keep).is_some());
    /// ```
    pub fn tick(&mut self, dt: Duration) -> Tick {
        let (gc, stage) = self.stage();
        gc.tick(stage, dt)
    }

    /// Runs one slice of at most `work` units of collection (objects
    /// marked, swept, finished or freed, at least one), whatever the clock:
    /// the cycle in flight continues, or a new one starts. For programs that
    /// pace collection by work rather than time, as gc-arena does, and for
    /// deterministic tests of incremental collection.
    ///
    /// ```
    /// use coreobject::{Heap, Obj, Object, Phase};
    /// #[derive(Object, Default)] struct Node { next: Option<Obj<Node>> }
    /// let mut heap = Heap::new();
    /// let root = heap.create(Node::default());
    /// heap.add_to_root(root).unwrap();
    /// for _ in 0..100 { heap.create(Node::default()); }
    /// let mut slices = 0;
    /// let stats = loop {
    ///     slices += 1;
    ///     if let Some(stats) = heap.step(10).completed { break stats; }
    /// };
    /// assert_eq!(stats.freed, 100);
    /// assert!(slices > 10, "{slices} slices");
    /// assert_eq!(heap.gc_phase(), Phase::Idle);
    /// ```
    pub fn step(&mut self, work: usize) -> Tick {
        let (gc, stage) = self.stage();
        gc.step(stage, work, CycleKind::Major)
    }

    /// [`step`](Self::step), starting a minor cycle (see
    /// [`collect_minor`](Self::collect_minor)) if none is in flight.
    pub fn step_minor(&mut self, work: usize) -> Tick {
        let (gc, stage) = self.stage();
        gc.step(stage, work, CycleKind::Minor)
    }

    /// Where the collector is: idle, marking or purging a cycle.
    pub fn gc_phase(&self) -> Phase {
        self.gc.phase()
    }

    /// Enables or disables the collector (Unreal's `DisallowGC`, as a
    /// switch). While disabled, `collect` is refused and `tick` starts
    /// no cycle (a cycle in flight goes on).
    pub fn set_enabled(&mut self, enabled: bool) {
        self.gc.set_enabled(enabled);
    }

    /// Whether the collector is enabled.
    pub fn is_enabled(&self) -> bool {
        self.gc.is_enabled()
    }

    /// The collector's settings.
    pub fn gc_config(&self) -> &GcConfig {
        self.gc.config()
    }

    /// The collector's settings, to change triggers at run time.
    ///
    /// ```
    /// # use coreobject::Heap;
    /// let mut heap = Heap::new();
    /// heap.gc_config_mut().every_frame = true;
    /// ```
    pub fn gc_config_mut(&mut self) -> &mut GcConfig {
        self.gc.config_mut()
    }

    /// Stats of the last completed cycle.
    pub fn last_collection(&self) -> Option<&CollectStats> {
        self.gc.last()
    }

    /// Running totals.
    pub fn gc_totals(&self) -> &GcTotals {
        self.gc.totals()
    }

    /// Objects waiting for `is_ready_for_finish_destroy`.
    pub fn pending_destroy(&self) -> usize {
        self.gc.pending_len()
    }

    /// Registers a callback run before each cycle.
    pub fn on_pre_collect(&mut self, f: impl FnMut(&PreCollect) + Send + Sync + 'static) -> HookId {
        let id = self.next_hook_id();
        self.gc.on_pre(id, Box::new(f));
        id
    }

    /// Registers a callback run after each cycle, with its stats.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # use std::sync::{Arc, Mutex};
    /// let seen = Arc::new(Mutex::new(0));
    /// let mut heap = Heap::new();
    /// let s = seen.clone();
    /// heap.on_post_collect(move |st| *s.lock().unwrap() += st.freed + 1);
    /// heap.collect().unwrap();
    /// assert_eq!(*seen.lock().unwrap(), 1);
    /// ```
    pub fn on_post_collect(
        &mut self,
        f: impl FnMut(&CollectStats) + Send + Sync + 'static,
    ) -> HookId {
        let id = self.next_hook_id();
        self.gc.on_post(id, Box::new(f));
        id
    }

    /// Removes a pre- or post-collection callback.
    pub fn remove_gc_callback(&mut self, id: HookId) -> bool {
        self.gc.remove_callback(id)
    }
}

#[cfg(test)]
mod tests {
    use crate::{GcConfig, Heap, HeapConfig, Obj, Object, Phase};

    #[derive(Object)]
    struct Dot(u32);

    #[derive(Object, Default)]
    struct Bag {
        dots: Vec<Obj<Dot>>,
    }

    /// The objects created during a sliced cycle join its born list at
    /// every slice. The list started each cycle empty and doubled as it
    /// went, copying all it held inside a slice: in the demo at a million
    /// objects, purge slices of 3-15 ms that did 40 units of work, late in
    /// a major cycle when the list held millions. A cycle's start now
    /// makes the list's room with the queue's (and the buffer is kept for
    /// the next cycle), so no slice reallocates it. Objects are created
    /// between every two slices of a major cycle, with and without
    /// generational bookkeeping, into slots freed earlier; the list's
    /// buffer keeps its size from the first slice to the last, in marking
    /// and in the purge; every object created during the cycle survives
    /// it, and the garbage is freed. Fails without the room (the list
    /// doubles in later slices), or when the first slice hands the room to
    /// the allocator's record (`take_born` instead of `take_born_into`).
    #[test]
    #[cfg_attr(
        miri,
        ignore = "safe collector bookkeeping (the born list's room, retired buffers); the unsafe code it reaches runs in the other miri tests, and these three took about 100 s there"
    )]
    fn no_slice_of_a_cycle_grows_its_born_list() {
        // (objects kept, garbage, created between two slices, budget)
        let (kept, garbage, per, n) = if cfg!(miri) {
            (200, 200, 4, 16)
        } else {
            (20_000, 20_000, 16, 64)
        };
        for generational in [false, true] {
            let mut heap = Heap::with_config(HeapConfig {
                gc: GcConfig {
                    generational,
                    ..GcConfig::MANUAL
                },
                ..HeapConfig::DEFAULT
            })
            .unwrap();
            let dots: Vec<Obj<Dot>> = (0..kept).map(|k| heap.create_mut(Dot(k as u32))).collect();
            heap.spawn(Bag { dots: dots.clone() })
                .root()
                .create()
                .unwrap();
            // Slots freed below the high water, for the objects created
            // during the cycle (a game's steady state).
            for k in 0..2 * garbage {
                heap.create_mut(Dot(k as u32));
            }
            heap.collect().unwrap();
            let lost: Vec<Obj<Dot>> = (0..garbage)
                .map(|k| heap.create_mut(Dot(k as u32)))
                .collect();

            let mut room: Option<usize> = None;
            let mut slices = 0;
            let mut purge_slices = 0;
            let mut born = Vec::new();
            let stats = loop {
                let t = heap.step(n);
                if let Some(stats) = t.completed {
                    break stats;
                }
                slices += 1;
                purge_slices += usize::from(t.phase == Phase::Purge);
                let cap = heap.gc.born_capacity();
                match room {
                    None => room = Some(cap),
                    Some(r) => assert_eq!(
                        cap,
                        r,
                        "generational {generational}, slice {slices} ({:?}, {} created so far): \
                         the born list's buffer was reallocated",
                        t.phase,
                        born.len()
                    ),
                }
                for k in 0..per {
                    born.push(heap.create_mut(Dot(k as u32)));
                }
            };
            let (most, purging) = if cfg!(miri) { (30, 15) } else { (100, 50) };
            assert!(
                slices > most && purge_slices > purging,
                "{slices} slices, {purge_slices} purging"
            );
            assert!(born.len() > garbage / 4, "{} created", born.len());
            assert_eq!(stats.freed, garbage, "{stats:?}");
            assert_eq!(stats.born, born.len(), "{stats:?}");
            assert!(lost.iter().all(|&d| !heap.contains(d)));
            assert!(dots.iter().all(|&d| heap.contains(d)));
            assert!(
                born.iter().all(|&d| heap.contains(d)),
                "an object created during the cycle was freed by it"
            );
            assert_eq!(heap.len(), kept + 1 + born.len());
        }
    }

    /// A major cycle keeps no young list, so its start does not list the
    /// slots handed out since the last cycle (it did, and dropped the
    /// list: every object of a heap built since, 1.5 ms at a million, in
    /// the cycle's first slice). Fails with the listing back (`stop_recording`
    /// removed from `Collector::start`): the list holds every object.
    #[test]
    fn a_major_cycle_start_lists_no_young_object() {
        let n: usize = if cfg!(miri) { 600 } else { 100_000 };
        let mut heap = Heap::with_config(HeapConfig {
            gc: GcConfig::MANUAL,
            ..HeapConfig::DEFAULT
        })
        .unwrap();
        assert!(heap.gc_config().generational);
        for k in 0..n {
            heap.create_mut(Dot(k as u32));
        }
        let t = heap.step(1);
        assert!(t.started.is_some());
        assert!(
            heap.gc.young_capacity() < n / 2,
            "the start listed {} slots",
            heap.gc.young_capacity()
        );
        while heap.step(1_000).completed.is_none() {}
        assert_eq!(heap.len(), 0, "nothing was rooted");
    }

    /// A non-generational manual heap and a rooted bag, for the rooms'
    /// tests: what `grow_bag` creates stays reachable through the bag.
    fn rooted_bag() -> (Heap, Obj<Bag>) {
        let heap = Heap::with_config(HeapConfig {
            gc: GcConfig {
                generational: false,
                ..GcConfig::MANUAL
            },
            ..HeapConfig::DEFAULT
        })
        .unwrap();
        let bag = heap.spawn(Bag::default()).root().create().unwrap();
        (heap, bag)
    }

    /// A heap with this collector configuration whose rooted bag holds `n`
    /// objects.
    fn dotted_heap(gc: GcConfig, n: usize) -> Heap {
        let mut heap = Heap::with_config(HeapConfig {
            gc,
            ..HeapConfig::DEFAULT
        })
        .unwrap();
        let dots: Vec<Obj<Dot>> = (0..n).map(|k| heap.create_mut(Dot(k as u32))).collect();
        heap.spawn(Bag { dots }).root().create().unwrap();
        heap
    }

    /// Creates `k` objects through `&mut Heap`, each stored in `bag`.
    fn grow_bag(heap: &mut Heap, bag: Obj<Bag>, k: usize) {
        for j in 0..k {
            let d = heap.create_mut(Dot(j as u32));
            heap.get_mut(bag).unwrap().dots.push(d);
        }
    }

    /// A cycle's start that replaces the work queue's and the born list's
    /// buffers with bigger ones (the heap grew) gives the old ones back a
    /// piece per slice, not in that slice: dropped there, their touched
    /// pages went back to the kernel at once (5-9 ms of `munmap` in a
    /// cycle's first slice in the demo at a million objects). Fails when
    /// the start drops them (nothing retired after its slice).
    #[test]
    #[cfg_attr(
        miri,
        ignore = "safe collector bookkeeping (the born list's room, retired buffers); the unsafe code it reaches runs in the other miri tests, and these three took about 100 s there"
    )]
    fn replaced_buffers_go_back_a_piece_per_slice() {
        use crate::gc::retire::PIECE_BYTES;
        let (n, per) = if cfg!(miri) { (1_000, 2) } else { (50_000, 16) };
        let (mut heap, keep) = rooted_bag();
        let grow = |heap: &mut Heap, k: usize| grow_bag(heap, keep, k);
        grow(&mut heap, n);
        // A sliced cycle with objects created during it: its queue and
        // born list hold pages.
        while heap.step(64).completed.is_none() {
            for _ in 0..per {
                heap.create_mut(Dot(0));
            }
        }
        assert_eq!(heap.gc.retired_bytes(), 0);
        grow(&mut heap, 2 * n);
        let t = heap.step(64);
        assert!(t.started.is_some());
        let first = heap.gc.retired_bytes();
        // The old queue's room (8 bytes an entry) and the old born list's
        // (4 bytes), twice the objects then, less the piece given back.
        assert!(
            first + PIECE_BYTES >= 2 * n * (8 + 4),
            "the start gave back {} bytes at once",
            2 * n * 12 - first
        );
        let mut last = first;
        let mut slices = 1;
        while heap.step(64).completed.is_none() {
            let now = heap.gc.retired_bytes();
            assert!(
                now + PIECE_BYTES >= last && now <= last,
                "slice {slices}: {last} -> {now} bytes"
            );
            last = now;
            slices += 1;
        }
        assert_eq!(
            heap.gc.retired_bytes(),
            0,
            "all given back in {slices} slices"
        );
        assert_eq!(heap.len(), 3 * n + 1);
    }

    /// A cycle that creates more objects than its born list has room for
    /// (a mutator allocating fast, a cycle stretched over many frames):
    /// the list grows through a bigger buffer filled a piece per slice,
    /// and the old buffer is retired (given back in pieces), never by an
    /// append that copies the list whole inside a slice. Each slice after
    /// which the list's buffer has changed retired the old one. Fails when
    /// the slices do not advance the growth (`GrowingList::advance` not
    /// called: appends reallocate the list, nothing is retired).
    #[test]
    #[cfg_attr(
        miri,
        ignore = "safe collector bookkeeping (the born list's room, retired buffers); the unsafe code it reaches runs in the other miri tests, and these three took about 100 s there"
    )]
    fn a_born_list_past_its_room_grows_a_piece_per_slice() {
        let (kept, per, n) = if cfg!(miri) {
            (600, 12, 16)
        } else {
            (40_000, 48, 64)
        };
        let mut heap = dotted_heap(
            GcConfig {
                generational: false,
                // Never forced to finish, however many it creates.
                incremental_debt: None,
                ..GcConfig::MANUAL
            },
            kept,
        );
        let mut grown = 0;
        let mut room = 0;
        let mut born = 0;
        loop {
            let retired = heap.gc.retired_bytes();
            let t = heap.step(n);
            if t.completed.is_some() {
                break;
            }
            let cap = heap.gc.born_capacity();
            if room != 0 && cap != room {
                grown += 1;
                assert!(
                    heap.gc.retired_bytes() > retired,
                    "the born list went from {room} to {cap} entries ({born} created) \
                     and retired nothing"
                );
            }
            room = cap;
            for k in 0..per {
                heap.create_mut(Dot(k as u32));
            }
            born += per;
        }
        assert!(
            grown >= 1,
            "the list never grew ({born} created, room {room})"
        );
        assert_eq!(heap.len(), kept + 1 + born);
    }

    /// A node holding handles to others (a fan of references).
    #[derive(Object, Default)]
    struct Fan {
        to: Vec<Obj<Fan>>,
    }

    /// A non-generational manual heap holding `n` fans, each with `k`
    /// handles to fans picked by a xorshift generator, all held by a
    /// rooted fan: a cycle queues each fan once per handle to it that it
    /// reaches before the fan is marked, many times the objects.
    fn fanned_heap(n: usize, k: usize) -> Heap {
        let (mut heap, _) = rooted_bag();
        let all: Vec<Obj<Fan>> = (0..n).map(|_| heap.create_mut(Fan::default())).collect();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for &f in &all {
            heap.get_mut(f).unwrap().to = (0..k)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    all[(x % n as u64) as usize]
                })
                .collect();
        }
        heap.spawn(Fan { to: all }).root().create().unwrap();
        heap
    }

    /// A heap whose cycles queue many times its objects (5,000 fans of
    /// 64 handles: each fan is queued once per handle reached before it
    /// is marked, 100,000-odd entries against the start's room of 20,000):
    /// the first sliced cycle grows the queue, and later starts keep it
    /// (its high water is what cycles use), and so do whole collections
    /// (whose one drain grows the queue from its roots). Fails when a
    /// start measures the queue against the room it makes alone (every
    /// start retired it, about 1 MB, and the cycle grew it again inside
    /// its slices), or when the drain notes the queue's length only when
    /// it begins (a whole collection's queue is retired again).
    #[test]
    #[cfg_attr(
        miri,
        ignore = "safe collector bookkeeping (rooms and retired buffers, as the born list's tests in heap/collect.rs)"
    )]
    fn a_queue_that_cycles_fill_past_its_room_is_kept() {
        let (n, k, cycles) = (5_000, 64, 4);
        let mut heap = fanned_heap(n, k);
        let mut grew = Vec::new();
        for c in 0..cycles {
            let retired = heap.gc.retired_total();
            let t = heap.step(256);
            assert!(t.started.is_some());
            assert_eq!(
                heap.gc.retired_total(),
                retired,
                "cycle {c}: the start retired a buffer (queue {} entries)",
                heap.gc.queue_capacity()
            );
            let at_start = heap.gc.queue_capacity();
            while heap.step(256).completed.is_none() {}
            if heap.gc.queue_capacity() != at_start {
                grew.push(c);
            }
            assert_eq!(heap.len(), n + 2, "cycle {c}: nothing is garbage");
        }
        assert_eq!(grew, [0], "cycles whose queue grew inside their slices");
        for c in 0..2 {
            let retired = heap.gc.retired_total();
            heap.collect().unwrap();
            assert_eq!(
                heap.gc.retired_total(),
                retired,
                "whole collection {c} retired a buffer (queue {} entries)",
                heap.gc.queue_capacity()
            );
        }
        assert_eq!(heap.len(), n + 2);
    }

    /// A generational heap of 2,000 objects whose every major cycle
    /// creates 70,000 (freed by the minor cycle after it): the lists that
    /// hold them (the born list, the young list, the allocator's record,
    /// trading buffers) and the work queue (whose room a minor start makes
    /// for its 70,000 young objects) are kept from round to round, so
    /// that after the first two rounds no slice (no start, no cycle's
    /// end) retires a buffer. Fails when a start measures the lists against
    /// the room a major start makes alone (the major start retired the
    /// born list), when the queue's use leaves out the room a minor start
    /// made (the major start retired it, the minor start made it again),
    /// or when a minor start makes its born list afresh instead of taking
    /// the empty buffer left in the record (its end retired one).
    #[test]
    #[cfg_attr(
        miri,
        ignore = "safe collector bookkeeping (rooms and retired buffers, as the born list's tests in heap/collect.rs)"
    )]
    fn rooms_that_major_and_minor_cycles_take_turns_at_are_kept() {
        let (live, per, made) = (2_000, 2_000, 70_000);
        let mut heap = dotted_heap(
            GcConfig {
                generational: true,
                incremental_debt: None,
                ..GcConfig::MANUAL
            },
            live,
        );
        // Slices of major (`step`) or minor cycles; after the first two
        // rounds, no slice may retire a buffer.
        let slice = |heap: &mut Heap, minor: bool, round: usize, what: &str| {
            let before = heap.gc.retired_total();
            let t = if minor {
                heap.step_minor(64)
            } else {
                heap.step(64)
            };
            let after = heap.gc.retired_total();
            assert!(
                round < 2 || after <= before,
                "round {round}, {what}: a slice retired {} bytes",
                after - before
            );
            t
        };
        for round in 0..5 {
            assert!(slice(&mut heap, false, round, "major start")
                .started
                .is_some());
            let mut born = 0;
            while slice(&mut heap, false, round, "major").completed.is_none() {
                if born < made {
                    for j in 0..per {
                        heap.create_mut(Dot(j as u32));
                    }
                    born += per;
                }
            }
            assert_eq!(heap.len(), live + 1 + born, "round {round}: born black");
            assert!(slice(&mut heap, true, round, "minor start")
                .started
                .is_some());
            while slice(&mut heap, true, round, "minor").completed.is_none() {}
            assert_eq!(heap.len(), live + 1, "round {round}: the minor freed them");
        }
    }

    /// The allocator's record of the slots handed out is collector
    /// memory: after a generational sliced cycle it holds the cycle's born
    /// list (whose room the start made: `HEADROOM` times twice the live
    /// objects), and the memory report's collector line counts it with
    /// the work queue. Fails when the report leaves the record out.
    #[test]
    fn the_collectors_bytes_count_the_allocators_record() {
        use crate::gc::retire::HEADROOM;
        let n: usize = if cfg!(miri) { 300 } else { 20_000 };
        let mut heap = dotted_heap(
            GcConfig {
                generational: true,
                ..GcConfig::MANUAL
            },
            n,
        );
        while heap.step(64).completed.is_none() {}
        let queue = heap.gc.queue_capacity() * 8;
        let born_room = HEADROOM * 2 * (n + 1) * 4;
        let counted = heap.memory_report().collector_bytes;
        assert!(
            counted >= queue + born_room,
            "collector {counted} B, the queue {queue} B and the born list's room {born_room} B"
        );
    }

    /// A heap that grows by a quarter between sliced cycles: a start
    /// replaces its queue's and born list's rooms when they are too small,
    /// with [`retire::HEADROOM`](crate::gc::retire::HEADROOM) times the room,
    /// so about once per doubling (the model: log2 of the growth, plus
    /// the first), not at every start; and ticks with no cycle in flight
    /// give back [`IDLE_PIECES`] pieces each. Fails without the headroom
    /// (a replacement at every start) or without the idle pieces (the
    /// retired pile never drains between cycles).
    #[test]
    #[cfg_attr(
        miri,
        ignore = "safe collector bookkeeping (rooms and retired buffers, as the born list's tests in heap/collect.rs)"
    )]
    fn a_growing_heap_replaces_its_rooms_once_per_doubling() {
        use crate::gc::retire::{IDLE_PIECES, PIECE_BYTES};
        let (n, rounds) = (40_000usize, 8);
        let (mut heap, bag) = rooted_bag();
        let grow = |heap: &mut Heap, k: usize| grow_bag(heap, bag, k);
        grow(&mut heap, n);
        let mut replaced = 0;
        for _ in 0..rounds {
            let (queue, born) = (heap.gc.queue_capacity(), heap.gc.spare_capacity());
            let t = heap.step(64);
            assert!(t.started.is_some());
            let now = (heap.gc.queue_capacity(), heap.gc.born_capacity());
            if now.0 != queue || now.1 != born {
                replaced += 1;
            }
            while heap.step(64).completed.is_none() {}
            let live = heap.len();
            grow(&mut heap, live / 4);
        }
        let grown = heap.len() as f64 / n as f64;
        let most = grown.log2().ceil() as usize + 1;
        assert!(
            replaced <= most,
            "rooms replaced at {replaced} of {rounds} starts, the heap grew {grown:.1}x"
        );
        // A doubling whose cycle ends in one slice: the pile the
        // replacement left is given back by idle ticks.
        let live = heap.len();
        grow(&mut heap, live);
        assert!(heap.step(64).started.is_some());
        assert!(heap.step(1 << 40).completed.is_some());
        let pile = heap.gc.retired_bytes();
        let bufs = heap.gc.retired_len();
        let most_ticks = pile / (IDLE_PIECES * PIECE_BYTES) + bufs + 1;
        let mut ticks = 0;
        while heap.gc.retired_bytes() > 0 && ticks <= most_ticks {
            let t = heap.tick(std::time::Duration::from_millis(16));
            assert!(t.started.is_none(), "a manual heap's tick started a cycle");
            ticks += 1;
        }
        assert_eq!(
            heap.gc.retired_bytes(),
            0,
            "{pile} bytes in {bufs} buffers retired, {ticks} idle ticks"
        );
    }
}

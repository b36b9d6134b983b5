//! The garbage collector: stop-the-world mark and sweep over the object table.
//!
//! A collection runs in four phases, each a `tracing` span:
//!
//! 1. **roots** — objects in the root set ([`Heap::add_to_root`]), objects with
//!    [`StrongObj`](crate::StrongObj) handles, the references of
//!    disregard-for-GC pool objects, and everything external
//!    [`Referencer`](crate::Referencer)s report;
//! 2. **mark** — a breadth-first work queue over reflected fields and
//!    outers, run as a prefetching pipeline (module `gc/mark.rs`): the
//!    table item, the object and its reference buffers are each requested
//!    a few steps before they are read. Objects marked as garbage are never
//!    marked, so references to them go stale;
//! 3. **sweep** — every allocated, unmarked object outside the pool is flagged
//!    unreachable and gets `begin_destroy`;
//! 4. **destroy** — objects ready for it get `finish_destroy`, delete
//!    listeners, a new slot serial and a free index, then are dropped
//!    (module `gc/sweep.rs`). Objects whose class has no hooks are flagged
//!    in their item and skip the hook calls.
//!
//! Marks live in a side bitmap (one bit per slot), cleared with a `memset` of
//! `slots / 8` bytes per collection: for a million objects that is 128 KiB,
//! so flipping the meaning of the mark bit, as Unreal does to skip a pass over
//! its 24-byte items, would buy nothing here.
//!
//! ```
//! use coreobject::{Heap, Obj, Object};
//! #[derive(Object, Default)]
//! struct Cell { next: Option<Obj<Cell>> }
//! let mut heap = Heap::new();
//! let a = heap.create(Cell::default());
//! let b = heap.create(Cell { next: Some(a) });
//! heap[a].next = Some(b); // a cycle, unreachable
//! let stats = heap.collect().unwrap();
//! assert_eq!(stats.freed, 2);
//! assert_eq!(heap.gc_totals().total_freed, 2);
//! ```

pub(crate) mod debug;
pub(crate) mod mark;
pub(crate) mod sweep;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::config::GcConfig;
use crate::error::Error;
use crate::handle::AnyObj;
use crate::heap::Heap;
use crate::item::flags;
use crate::listener::HookId;
use crate::trace::Visitor;

pub use debug::{ClassMemory, MemoryReport, RefChain, RefLink, RootKind};
pub(crate) use mark::Marker;
pub use sweep::DestroyCx;
use sweep::{guard, Caught, Pending};

/// What started a collection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Trigger {
    /// [`Heap::collect`] was called.
    #[default]
    Explicit,
    /// [`GcConfig::every_frame`](crate::GcConfig::every_frame): every tick.
    EveryFrame,
    /// [`GcConfig::interval`](crate::GcConfig::interval) elapsed.
    Interval,
    /// [`GcConfig::object_threshold`](crate::GcConfig::object_threshold) reached.
    ObjectCount,
    /// [`GcConfig::bytes_threshold`](crate::GcConfig::bytes_threshold) reached.
    Bytes,
}

/// What one collection did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CollectStats {
    /// What started it.
    pub trigger: Trigger,
    /// Time gathering roots and marking.
    pub mark: Duration,
    /// Time finding unreachable objects and running `begin_destroy`.
    pub sweep: Duration,
    /// Time finishing, freeing and dropping.
    pub destroy: Duration,
    /// Wall time of the whole collection, pre-collection callbacks included.
    pub total: Duration,
    /// Roots found (root set, strong handles, referencers' reports).
    pub roots: usize,
    /// Objects marked reachable (pool objects are not counted).
    pub marked: usize,
    /// Objects found unreachable this time.
    pub unreachable: usize,
    /// Objects freed (this time's and earlier pending ones now ready).
    pub freed: usize,
    /// Bytes of object allocations freed (header and value).
    pub freed_bytes: usize,
    /// Objects still waiting for `is_ready_for_finish_destroy`.
    pub pending: usize,
    /// Objects allocated after the collection.
    pub live: usize,
    /// Slices the cycle took (1 for a stop-the-world collection).
    pub slices: usize,
    /// The longest slice.
    pub max_slice: Duration,
}

/// Where the collector is in a cycle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Phase {
    /// No cycle in flight.
    #[default]
    Idle,
    /// Marking: tracing from the roots, in slices when incremental.
    Mark,
    /// Purging: flagging unreachable objects, `begin_destroy`,
    /// `finish_destroy`, delete listeners and freeing, in slices when
    /// incremental.
    Purge,
}

/// What one [`Heap::tick`] did.
///
/// With [`GcConfig::incremental`](crate::GcConfig::incremental) set, a tick
/// runs at most one budgeted slice of a cycle; without it, a tick either
/// runs a whole collection (when a trigger fires) or polls objects waiting
/// to finish destruction.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tick {
    /// The collector's phase after this tick.
    pub phase: Phase,
    /// Time spent in the collector during this tick, whatever the phase.
    pub time: Duration,
    /// Objects processed during this tick: marked, swept or destroyed.
    pub work: usize,
    /// Objects freed during this tick (this cycle's and earlier pending ones).
    pub freed: usize,
    /// The trigger of a cycle that started during this tick.
    pub started: Option<Trigger>,
    /// The stats of a cycle that completed during this tick.
    pub completed: Option<CollectStats>,
}

impl Tick {
    /// Whether the tick did anything at all.
    pub fn did_work(&self) -> bool {
        self.started.is_some() || self.completed.is_some() || self.work > 0 || self.freed > 0
    }
}

/// Running totals (the Mundi collector's last/total counts).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GcTotals {
    /// Collections run.
    pub collections: u64,
    /// Objects freed by the last collection.
    pub last_freed: usize,
    /// Objects freed in total (by collections and by ticks that finished
    /// pending objects).
    pub total_freed: u64,
    /// Bytes freed in total.
    pub total_freed_bytes: u64,
    /// Time spent collecting in total.
    pub total_time: Duration,
    /// The longest collection.
    pub max_pause: Duration,
}

/// What pre-collection callbacks learn.
#[derive(Clone, Copy, Debug)]
pub struct PreCollect {
    /// The number this collection will have (1 for the first).
    pub collection: u64,
    /// Objects allocated before it.
    pub objects: usize,
}

type PreHook = Box<dyn FnMut(&PreCollect) + Send + Sync>;
type PostHook = Box<dyn FnMut(&CollectStats) + Send + Sync>;

/// Buffers a collection fills and empties; see [`Collector::scratch`].
#[derive(Default)]
pub(crate) struct Scratch {
    /// The previous root-candidate list.
    roots: Vec<u32>,
    /// Slots found unreachable by this collection.
    pub(crate) newly: Vec<u32>,
    /// Pending objects ready to finish, with whether their class has hooks.
    pub(crate) ready: Vec<(u32, bool)>,
    /// The spare pending list.
    pub(crate) waiting: Vec<Pending>,
}

/// The collector's state, owned by the heap.
pub(crate) struct Collector {
    pub(crate) config: GcConfig,
    pub(crate) enabled: bool,
    pub(crate) bits: Vec<u64>,
    queue: std::collections::VecDeque<u64>,
    pub(crate) pending: Vec<Pending>,
    pub(crate) parked: Vec<u32>,
    /// Scratch buffers kept between collections, so that a collection
    /// allocates nothing once the heap has reached its working size.
    pub(crate) scratch: Scratch,
    totals: GcTotals,
    last: Option<CollectStats>,
    since_last: Duration,
    pre: Vec<(HookId, PreHook)>,
    post: Vec<(HookId, PostHook)>,
}

impl Collector {
    pub(crate) fn new(config: GcConfig) -> Self {
        Collector {
            config,
            enabled: true,
            bits: Vec::new(),
            queue: std::collections::VecDeque::new(),
            pending: Vec::new(),
            parked: Vec::new(),
            scratch: Scratch::default(),
            totals: GcTotals::default(),
            last: None,
            since_last: Duration::ZERO,
            pre: Vec::new(),
            post: Vec::new(),
        }
    }

    pub(crate) fn parked_len(&self) -> usize {
        self.parked.len()
    }
}

impl Heap {
    /// Runs a full collection now. Refused with [`Error::GcDisabled`] while
    /// the collector is disabled.
    ///
    /// # Panics
    /// Resumes the first panic raised by a destruction hook, a delete
    /// listener, a `Drop` or a post-collection callback, after the collection
    /// has completed, its totals are counted and the heap is consistent (see
    /// [`Lifecycle`](crate::Lifecycle)). A panic in a pre-collection callback
    /// propagates at once, before anything is marked. A panic while marking (a
    /// hand-written `Trace` or a [`Referencer`](crate::Referencer)) abandons
    /// the collection with nothing freed and no root forgotten.
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
        if !self.gc.enabled {
            return Err(Error::GcDisabled);
        }
        Ok(self.collect_now(Trigger::Explicit))
    }

    fn collect_now(&mut self, trigger: Trigger) -> CollectStats {
        let t0 = Instant::now();
        let _span = tracing::info_span!("gc.collect", heap = self.lease.tag).entered();
        let pre = PreCollect {
            collection: self.gc.totals.collections + 1,
            objects: self.len(),
        };
        for (_, cb) in &mut self.gc.pre {
            cb(&pre);
        }
        self.table.sync();
        self.release_parked();

        let mut stats = CollectStats {
            trigger,
            ..CollectStats::default()
        };
        {
            let _s = tracing::debug_span!("gc.mark").entered();
            let (roots, marked) = self.mark();
            stats.roots = roots;
            stats.marked = marked;
        }
        let t1 = Instant::now();
        let mut caught: Caught = None;
        {
            let _s = tracing::debug_span!("gc.sweep").entered();
            let newly = self.find_unreachable();
            stats.unreachable = newly.len();
            self.begin_destroy_all(&newly, &mut caught);
            self.gc.scratch.newly = newly;
        }
        let t2 = Instant::now();
        {
            let _s = tracing::debug_span!("gc.destroy").entered();
            let freed = self.finish_ready(&mut caught);
            stats.freed = freed.objects;
            stats.freed_bytes = freed.bytes;
        }
        let t3 = Instant::now();
        stats.mark = t1 - t0;
        stats.sweep = t2 - t1;
        stats.destroy = t3 - t2;
        stats.pending = self.gc.pending.len();
        stats.live = self.len();

        self.bytes_since_gc.store(0, Ordering::Relaxed);
        self.gc.since_last = Duration::ZERO;
        stats.total = t0.elapsed();
        stats.slices = 1;
        stats.max_slice = stats.total;
        let t = &mut self.gc.totals;
        t.collections += 1;
        t.last_freed = stats.freed;
        t.total_freed += stats.freed as u64;
        t.total_freed_bytes += stats.freed_bytes as u64;
        t.total_time += stats.total;
        t.max_pause = t.max_pause.max(stats.total);
        self.gc.last = Some(stats.clone());
        tracing::debug!(
            marked = stats.marked,
            freed = stats.freed,
            total_us = stats.total.as_micros() as u64,
            "collection done"
        );
        // Last, so that a panicking callback finds the books already kept.
        for (_, cb) in &mut self.gc.post {
            guard(&mut caught, || cb(&stats));
        }
        if let Some(p) = caught {
            std::panic::resume_unwind(p);
        }
        stats
    }

    /// Marks from every root. Returns (roots, marked).
    fn mark(&mut self) -> (usize, usize) {
        let hw = self.table.high_water();
        let words = (hw as usize).div_ceil(64);
        self.gc.bits.clear();
        self.gc.bits.resize(words, 0);
        let mut queue = std::mem::take(&mut self.gc.queue);
        let chunks = &*self.table.chunks;

        // Root candidates: drop stale and duplicate entries, keep the rest.
        let candidates = std::mem::take(self.root_candidates.get_mut());
        for &i in &candidates {
            chunks
                .at(i)
                .flags
                .fetch_and(!flags::LISTED, Ordering::Relaxed);
        }
        let mut kept = std::mem::take(&mut self.gc.scratch.roots);
        kept.clear();
        let mut marker = Marker::new(chunks, &mut self.gc.bits, &mut queue, hw);
        let mut roots = 0;
        for &i in &candidates {
            let item = chunks.at(i);
            if item.object().is_none() {
                continue;
            }
            let rooted =
                item.flags() & flags::ROOT != 0 || item.refcount.load(Ordering::Acquire) > 0;
            if !rooted || item.flags.fetch_or(flags::LISTED, Ordering::Relaxed) & flags::LISTED != 0
            {
                continue;
            }
            kept.push(i);
            roots += 1;
            if let Some(s) = std::num::NonZeroU32::new(item.serial()) {
                marker.visit(AnyObj::new(i, s));
            }
        }
        // Store the root list before any user code (trace functions,
        // referencers) runs: if one panics, no root is forgotten.
        *self.root_candidates.get_mut() = kept;
        self.gc.scratch.roots = candidates;

        // The pool's objects are permanent; what they reference stays alive.
        let pool_end = if self.pool.open {
            hw.min(self.pool.capacity)
        } else {
            self.pool.end
        };
        for i in 0..pool_end {
            let item = chunks.at(i);
            if item.flags() & flags::DISREGARD != 0 {
                if let Some(p) = item.object() {
                    marker.scan(p);
                }
            }
        }

        for (_, r) in &self.referencers {
            let mut counting = CountVisits {
                inner: &mut marker,
                n: 0,
            };
            r.add_referenced_objects(&mut counting);
            roots += counting.n;
        }
        marker.drain();
        let marked = marker.marked;
        self.gc.queue = queue;
        (roots, marked)
    }

    /// Advances the collection policy by one frame of `dt`; collects if a
    /// trigger fires (interval, object count, bytes, or every frame), and
    /// otherwise polls objects waiting to finish destruction.
    ///
    /// # Panics
    /// As [`collect`](Self::collect).
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
    pub fn tick(&mut self, dt: Duration) -> Tick {
        let t0 = Instant::now();
        self.gc.since_last = self.gc.since_last.saturating_add(dt);
        if let Some(trigger) = self.due_trigger() {
            let stats = self.collect_now(trigger);
            return Tick {
                phase: Phase::Idle,
                time: t0.elapsed(),
                work: stats.marked + stats.unreachable,
                freed: stats.freed,
                started: Some(trigger),
                completed: Some(stats),
            };
        }
        let mut tick = Tick::default();
        if !self.gc.pending.is_empty() {
            self.table.sync();
            let mut caught: Caught = None;
            let freed = self.finish_ready(&mut caught);
            self.gc.totals.total_freed += freed.objects as u64;
            self.gc.totals.total_freed_bytes += freed.bytes as u64;
            tick.freed = freed.objects;
            tick.work = freed.objects;
            tick.time = t0.elapsed();
            if let Some(p) = caught {
                std::panic::resume_unwind(p);
            }
        }
        tick
    }

    /// The first trigger that fires now, if the collector is enabled.
    fn due_trigger(&self) -> Option<Trigger> {
        let c = &self.gc.config;
        if !self.gc.enabled {
            None
        } else if c.every_frame {
            Some(Trigger::EveryFrame)
        } else if c.interval.is_some_and(|i| self.gc.since_last >= i) {
            Some(Trigger::Interval)
        } else if c
            .object_threshold
            .is_some_and(|t| self.len() - self.disregard_len() as usize >= t)
        {
            Some(Trigger::ObjectCount)
        } else if c
            .bytes_threshold
            .is_some_and(|t| self.bytes_since_gc.load(Ordering::Relaxed) >= t)
        {
            Some(Trigger::Bytes)
        } else {
            None
        }
    }

    /// Enables or disables the collector (Mundi's `SetEnabled`, Unreal's
    /// `DisallowGC`). While disabled, `collect` is refused and `tick` never
    /// collects.
    pub fn set_enabled(&mut self, enabled: bool) {
        self.gc.enabled = enabled;
    }

    /// Whether the collector is enabled.
    pub fn is_enabled(&self) -> bool {
        self.gc.enabled
    }

    /// The collector's settings, to change triggers at run time.
    ///
    /// ```
    /// # use coreobject::Heap;
    /// let mut heap = Heap::new();
    /// heap.gc_config_mut().every_frame = true;
    /// ```
    pub fn gc_config_mut(&mut self) -> &mut GcConfig {
        &mut self.gc.config
    }

    /// Stats of the last collection.
    pub fn last_collection(&self) -> Option<&CollectStats> {
        self.gc.last.as_ref()
    }

    /// Running totals.
    pub fn gc_totals(&self) -> &GcTotals {
        &self.gc.totals
    }

    /// Objects waiting for `is_ready_for_finish_destroy`.
    pub fn pending_destroy(&self) -> usize {
        self.gc.pending.len()
    }

    /// Registers a callback run before each collection.
    pub fn on_pre_collect(&mut self, f: impl FnMut(&PreCollect) + Send + Sync + 'static) -> HookId {
        let id = self.next_hook_id();
        self.gc.pre.push((id, Box::new(f)));
        id
    }

    /// Registers a callback run after each collection, with its stats.
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
        self.gc.post.push((id, Box::new(f)));
        id
    }

    /// Removes a pre- or post-collection callback.
    pub fn remove_gc_callback(&mut self, id: HookId) -> bool {
        let before = self.gc.pre.len() + self.gc.post.len();
        self.gc.pre.retain(|(i, _)| *i != id);
        self.gc.post.retain(|(i, _)| *i != id);
        before != self.gc.pre.len() + self.gc.post.len()
    }
}

/// Counts the handles a referencer reports, for stats.
struct CountVisits<'m, 'a> {
    inner: &'m mut Marker<'a>,
    n: usize,
}

impl Visitor for CountVisits<'_, '_> {
    fn visit(&mut self, obj: AnyObj) {
        self.n += 1;
        self.inner.visit(obj);
    }
}

#[cfg(test)]
mod tests {
    use crate::class::{Class, ClassDesc, Lifecycle, Object};
    use crate::handle::Obj;
    use crate::trace::{Trace, Visitor};
    use crate::Heap;

    /// A class written out by hand: what `#[derive(Object)]` generates.
    struct Node {
        next: Vec<Obj<Node>>,
        value: u64,
    }
    impl Trace for Node {
        fn trace<V: Visitor + ?Sized>(&self, v: &mut V) {
            self.next.trace(v)
        }
    }
    impl Lifecycle for Node {}
    impl Object for Node {
        fn class() -> &'static Class {
            static CLASS: Class = Class::new::<Node>(ClassDesc {
                name: "Node",
                fields: &[],
                make_default: || None,
            });
            &CLASS
        }
    }
    fn node(heap: &Heap, value: u64) -> Obj<Node> {
        heap.create(Node {
            next: Vec::new(),
            value,
        })
    }

    #[test]
    fn unreachable_objects_are_freed_and_reachable_kept() {
        let mut heap = Heap::new();
        let root = node(&heap, 0);
        heap.add_to_root(root).unwrap();
        let a = node(&heap, 1);
        let b = node(&heap, 2);
        let lost = node(&heap, 3);
        heap[root].next.push(a);
        heap[a].next.push(b);
        heap[b].next.push(root);
        let s = heap.collect().unwrap();
        assert_eq!((s.marked, s.freed, s.roots), (3, 1, 1));
        assert!(heap.get(lost).is_none());
        assert_eq!(heap[b].value, 2);
        // The freed slot is reused, with a new serial.
        let c = node(&heap, 4);
        assert_eq!(c.index(), lost.index());
        assert_ne!(c.serial(), lost.serial());
        assert!(heap.get(lost).is_none());
        assert_eq!(heap.len(), 4);
    }

    #[test]
    fn garbage_is_freed_even_when_referenced() {
        let mut heap = Heap::new();
        let root = node(&heap, 0);
        heap.add_to_root(root).unwrap();
        let a = node(&heap, 1);
        let b = node(&heap, 2);
        heap[root].next.extend([a, b]);
        heap.mark_as_garbage(a).unwrap();
        assert!(heap.get(a).is_none());
        let s = heap.collect().unwrap();
        assert_eq!(s.freed, 1);
        assert!(heap.get_even_if_garbage(a).is_none());
        assert!(heap.get(b).is_some());
    }

    #[test]
    fn strong_handles_root_and_park_slots() {
        let mut heap = Heap::new();
        let a = node(&heap, 1);
        let s = heap.strong(a).unwrap();
        heap.collect().unwrap();
        assert!(heap.get(&s).is_some());
        heap.mark_as_garbage(a).unwrap();
        heap.collect().unwrap();
        assert!(heap.get(&s).is_none());
        // The slot is parked while `s` lives: a new object must not take it.
        let b = node(&heap, 2);
        assert_ne!(b.index(), a.index());
        drop(s);
        heap.collect().unwrap(); // b is unrooted: freed; a's slot released
        let c = node(&heap, 3);
        let d = node(&heap, 4);
        let mut got = [c.index(), d.index()];
        got.sort();
        let mut want = [a.index(), b.index()];
        want.sort();
        assert_eq!(got, want);
    }

    #[test]
    fn deep_chain_marks_without_recursion() {
        let mut heap = Heap::new();
        let head = node(&heap, 0);
        heap.add_to_root(head).unwrap();
        let mut cur = head;
        for i in 1..200_000 {
            let n = node(&heap, i);
            heap[cur].next.push(n);
            cur = n;
        }
        let s = heap.collect().unwrap();
        assert_eq!(s.marked, 200_000);
        heap.remove_from_root(head).unwrap();
        assert_eq!(heap.collect().unwrap().freed, 200_000);
        assert!(heap.is_empty());
    }
}

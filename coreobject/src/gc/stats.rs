//! What collections report: triggers, per-cycle stats, running totals,
//! and what each [`Heap::tick`](crate::Heap::tick) did.

use std::time::Duration;

/// What started a collection.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Trigger {
    /// [`Heap::collect`](crate::Heap::collect) was called.
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
    /// [`GcConfig::growth`](crate::GcConfig::growth): the objects allocated
    /// (the old generation, with minor cycles) grew by that factor since the
    /// last major cycle marked the live heap, or will have by the time a
    /// timed cycle started now ends.
    Growth,
    /// [`GcConfig::young_threshold`](crate::GcConfig::young_threshold): that
    /// many objects were created since the last cycle (a minor cycle).
    Young,
}

/// Which objects a cycle considers.
///
/// A **major** cycle marks every live object and frees every unreachable
/// one ([`Heap::collect`](crate::Heap::collect)). A **minor** cycle
/// ([`Heap::collect_minor`](crate::Heap::collect_minor)) treats the objects
/// that survived an earlier cycle as alive (they are *old*) and considers
/// only the *young* ones, created since the last cycle: it marks from the
/// roots, the old objects the program changed since then, and the young
/// objects reachable from those, and frees the young objects it did not
/// reach, plus every object marked as garbage. Its cost follows what the
/// program allocated and changed, not the heap's size. See [`crate::gc`].
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CycleKind {
    /// Young objects only.
    Minor,
    /// The whole heap.
    #[default]
    Major,
}

/// What one collection did.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CollectStats {
    /// What started it.
    pub trigger: Trigger,
    /// Minor or major.
    pub kind: CycleKind,
    /// Minor cycles: the young objects it considered (created since the
    /// previous cycle, and old ones marked as garbage since).
    pub young: usize,
    /// Minor cycles: old objects re-scanned because the program changed
    /// them since the previous cycle (the remembered set).
    pub remembered: usize,
    /// Minor cycles: young objects that survived and are now old.
    pub promoted: usize,
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
    /// Whether allocation outpaced the budgeted cycle and it was finished at
    /// once ([`GcConfig::incremental_debt`](crate::GcConfig::incremental_debt)).
    pub forced: bool,
    /// Objects created while the cycle was in flight (all survive it).
    pub born: usize,
    /// Threads the mark phase's unbudgeted drains were given: 1 unless
    /// [`GcConfig::threads`](crate::GcConfig::threads) asks for more and the
    /// heap is large enough ([`GcConfig::parallel_threshold`](crate::GcConfig::parallel_threshold)).
    pub mark_threads: usize,
    /// Threads the freed objects' values were dropped on: more than 1 only
    /// with [`GcConfig::parallel_drop`](crate::GcConfig::parallel_drop), in
    /// an unbudgeted purge with no delete listener and at least
    /// [`PARALLEL_DROP_MIN`](crate::gc::PARALLEL_DROP_MIN) objects to free.
    pub drop_threads: usize,
}

/// Where the collector is in a cycle.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
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

/// What one [`Heap::tick`](crate::Heap::tick) did.
///
/// With [`GcConfig::incremental`](crate::GcConfig::incremental) set, a tick
/// runs at most one budgeted slice of a cycle; without it, a tick either
/// runs a whole collection (when a trigger fires) or polls objects waiting
/// to finish destruction.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tick {
    /// The collector's phase after this tick (`Idle` once a cycle
    /// completed, even if this tick ran all of it: see
    /// [`began_in`](Self::began_in) and [`ended_in`](Self::ended_in)).
    pub phase: Phase,
    /// The phase this tick's collector work began in: `Mark` for a tick
    /// that started a cycle, `Purge` for one that only finished objects
    /// waiting for destruction, `Idle` for a tick that did no cycle work.
    pub began_in: Phase,
    /// The phase this tick's collector work ended in: `Purge` for a tick
    /// that completed a cycle, `Idle` for a tick that did no cycle work.
    pub ended_in: Phase,
    /// Time spent in the collector during this tick, whatever the phase.
    pub time: Duration,
    /// Work units done during this tick: objects marked or scanned (pool
    /// objects, young and remembered objects of a minor cycle, objects
    /// created or changed during the cycle), queue entries popped or
    /// dropped, bitmap words and young-list entries walked, objects swept,
    /// polled, finished or freed (the costs are listed in the
    /// [`gc`](crate::gc) module's docs). A slice of
    /// [`Heap::step`](crate::Heap::step)`(n)` does about `n`: the budget is
    /// checked after each unit, and a drain finishes the few objects in its
    /// prefetch pipeline.
    pub work: usize,
    /// Objects freed during this tick (this cycle's and earlier pending ones).
    pub freed: usize,
    /// The trigger of a cycle that started during this tick.
    pub started: Option<Trigger>,
    /// The stats of a cycle that completed during this tick.
    pub completed: Option<CollectStats>,
}

impl Tick {
    /// Whether the tick did anything at all: ran a slice of a cycle (even
    /// one whose budget was gone before its first unit of work), started or
    /// completed one, or freed objects.
    pub fn did_work(&self) -> bool {
        self.began_in != Phase::Idle
            || self.started.is_some()
            || self.completed.is_some()
            || self.work > 0
            || self.freed > 0
    }
}

/// Running totals over every cycle the heap has completed, and the last one's count.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GcTotals {
    /// Collections run.
    pub collections: u64,
    /// Of those, minor cycles.
    pub minor_collections: u64,
    /// Of those, major cycles.
    pub major_collections: u64,
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
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Clone, Copy, Debug)]
pub struct PreCollect {
    /// The number this collection will have (1 for the first).
    pub collection: u64,
    /// Objects allocated before it.
    pub objects: usize,
}

//! Heap and collector settings: plain structs with public fields and `const`
//! presets.

use std::time::Duration;

/// Settings for a [`Heap`](crate::Heap).
///
/// ```
/// use coreobject::{Heap, HeapConfig};
/// let heap = Heap::with_config(HeapConfig { max_objects: 1 << 20, ..HeapConfig::DEFAULT }).unwrap();
/// assert_eq!(heap.max_objects(), 1 << 20);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct HeapConfig {
    /// The object cap (Unreal's `MaxObjectsInGame`). At most 2^31.
    pub max_objects: u32,
    /// Allocate every chunk up front instead of on first use.
    pub preallocate: bool,
    /// Slots the disregard-for-GC pool may take (Unreal's
    /// `MaxObjectsNotConsideredByGC`). The pool is closed until
    /// [`Heap::open_disregard_for_gc`](crate::Heap::open_disregard_for_gc).
    pub disregard_pool_size: u32,
    /// Width of each slot's generation counter, 1..=22. A slot is retired
    /// (never reused) when its counter would wrap. Lower it to test that.
    pub generation_bits: u32,
    /// Collector settings.
    pub gc: GcConfig,
    /// Ask the system for 2 MiB pages (`MADV_HUGEPAGE`) for the object
    /// table's chunks and the pages objects live in. `false` in every preset.
    ///
    /// Worth it for large, read-heavy heaps (many handle resolves over
    /// millions of objects) on a host where memory is plentiful and cheap to
    /// fault in: fewer TLB misses per lookup. Measured on a 2-core KVM guest
    /// with transparent huge pages in `madvise` mode (BENCHMARKS.md,
    /// "Resolve and huge pages" and "Huge pages as a setting"): random weak
    /// resolves over 1M objects took 7-13% less CPU time (1.86x slotmap
    /// instead of 2.00x in the throughput loop, 1.42x instead of 1.63x in
    /// the chained one), but **building** the heap took 1.6-1.9x the CPU
    /// time (about 3x the wall time at 50M objects; at 10M, from 0.8x to
    /// 2.4x between runs), the time going to the kernel zeroing each fresh
    /// 2 MiB page as it faults it in. So leave it
    /// off for heaps that are built often, short-lived, or small (a heap
    /// under a few MiB gains nothing), and measure before turning it on.
    ///
    /// Only on Linux with transparent huge pages (`enabled` set to `always`
    /// or `madvise`; with `never` the advice is accepted and ignored), and
    /// never under miri or loom; elsewhere the setting does nothing. The
    /// advice is given to each 2 MiB run of memory before it is filled.
    /// Runs a heap kept for reuse after it went are reused only by heaps with
    /// the same setting (a heap with it on may also take and advise a plain
    /// one). A page of objects returned to the system (64 KiB at a time,
    /// after a collection freed it) splits the huge page backing it into
    /// 4 KiB ones; the kernel may merge them again later.
    ///
    /// ```
    /// use coreobject::{Heap, HeapConfig, Object};
    /// #[derive(Object, Default)]
    /// struct Cell(u64);
    /// let config = HeapConfig { huge_pages: true, ..HeapConfig::DEFAULT };
    /// let mut heap = Heap::with_config(config).unwrap();
    /// let cells: Vec<_> = (0..10_000).map(|i| heap.create(Cell(i))).collect();
    /// assert_eq!(heap.get(cells[42]).map(|c| c.0), Some(42));
    /// ```
    pub huge_pages: bool,
}

impl HeapConfig {
    /// Unreal's defaults: 2,162,688 objects, lazy chunks, no pool.
    ///
    /// Under miri the cap is 4,096: with miri's 128-item chunks, Unreal's
    /// cap needs a 16,896-entry chunk directory, which the interpreter takes
    /// seconds to build and drop for every heap, and even 65,536 costs a
    /// tenth of a second per heap and per table scan.
    pub const DEFAULT: HeapConfig = HeapConfig {
        max_objects: if cfg!(miri) { 1 << 12 } else { 2_162_688 },
        preallocate: false,
        disregard_pool_size: 0,
        generation_bits: crate::serial::GENERATION_BITS,
        gc: GcConfig::DEFAULT,
        huge_pages: false,
    };

    /// The largest table: 2^31 objects.
    pub const LARGE: HeapConfig = HeapConfig {
        max_objects: 1 << 31,
        ..HeapConfig::DEFAULT
    };
}

impl Default for HeapConfig {
    fn default() -> Self {
        HeapConfig::DEFAULT
    }
}

/// When [`Heap::tick`](crate::Heap::tick) collects, and how destruction waits.
///
/// ```
/// use coreobject::GcConfig;
/// use std::time::Duration;
/// let every_minute = GcConfig { interval: Some(Duration::from_secs(60)), ..GcConfig::DEFAULT };
/// assert_eq!(GcConfig::DEBUG.every_frame, true);
/// # let _ = every_minute;
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct GcConfig {
    /// Collect when this much time has passed (as told by `tick`) since the
    /// last collection (Unreal's `gc.TimeBetweenPurgingPendingKillObjects`).
    pub interval: Option<Duration>,
    /// Collect when this many objects the collector considers are allocated
    /// (objects in the disregard-for-GC pool do not count).
    pub object_threshold: Option<usize>,
    /// Collect when this many bytes of objects were created since the last
    /// collection (object allocations only: header and value, not what the
    /// value owns). Creation counts bytes only while this is set, so that
    /// heaps without it pay nothing: turning it on later through
    /// [`Heap::gc_config_mut`](crate::Heap::gc_config_mut) counts from then on.
    pub bytes_threshold: Option<usize>,
    /// Collect on every tick (for debugging).
    pub every_frame: bool,
    /// Collect when the objects the collector considers have grown by this
    /// factor since the last major cycle found the live heap (the objects it
    /// marked; Lua's pause, gc-arena's pacing, Go's `GOGC`): 2.0 collects
    /// each time the heap doubles. Must be above 1. With minor cycles
    /// ([`young_threshold`](Self::young_threshold),
    /// [`young_share`](Self::young_share)) the old generation is what
    /// counts. With an [`incremental`](Self::incremental) budget, the
    /// program creates objects while a cycle runs, so a major cycle starts
    /// early enough to end when every object, young ones included, reaches
    /// the goal (Go's pacer): by the objects the last major cycle let the
    /// program create per second of its time, times this one's time
    /// estimated from the last one's costs per object marked and freed, and
    /// a quarter more for the estimate's error; with minor cycles, not
    /// before one has run since the last major cycle.
    pub growth: Option<f64>,
    /// With [`growth`](Self::growth): never collect below this many objects
    /// (and, with [`young_share`](Self::young_share), never derive a young
    /// threshold below it). 0 means no floor: the goal is then the growth
    /// factor's alone, but never under the live heap the last major cycle
    /// marked plus one object, so a heap that empties (0 marked) collects
    /// again once an object is created, not on every tick; likewise a
    /// minor cycle waits for at least one object created since the last
    /// cycle, whatever the threshold.
    ///
    /// ```
    /// use coreobject::{GcConfig, Heap, HeapConfig, Object};
    /// use std::time::Duration;
    /// #[derive(Object, Default)]
    /// struct Spark;
    /// let gc = GcConfig { growth_floor: 0, ..GcConfig::DEFAULT };
    /// let mut heap = Heap::with_config(HeapConfig { gc, ..HeapConfig::DEFAULT }).unwrap();
    /// heap.create(Spark);
    /// heap.collect().unwrap();
    /// assert_eq!(heap.len(), 0);
    /// // An empty heap starts no cycle...
    /// for _ in 0..10 {
    ///     assert!(heap.tick(Duration::from_millis(16)).started.is_none());
    /// }
    /// // ...and with no floor, two objects from empty are growth enough.
    /// heap.create(Spark);
    /// heap.create(Spark);
    /// heap.tick(Duration::from_millis(16));
    /// assert_eq!(heap.len(), 0);
    /// ```
    pub growth_floor: usize,
    /// Incremental collection: the time budget of each [`Heap::tick`](crate::Heap::tick)'s
    /// slice (Unreal's `gc.IncrementalReachabilityTimeLimit` and
    /// `gc.IncrementalGCTimePerFrame`). `None` collects stop-the-world.
    ///
    /// What a budget means: by default a **cap**. Every step of a cycle
    /// works in pieces and reads the clock every few dozen units of work, so
    /// a slice stops at its deadline, overrunning it only by the work it has
    /// in hand: the scan of one object (a single object holding a million
    /// handles is one scan), and, in the slice that ends marking, the
    /// re-scan of the objects the program changed through
    /// [`Heap::get_mut`](crate::Heap::get_mut) since the previous slice
    /// (writes through [`Heap::data_mut`](crate::Heap::data_mut) cost
    /// nothing). With [`incremental_stretch`](Self::incremental_stretch)
    /// above 1, a slice whose cycle falls behind the program may run up to
    /// that many times the budget instead. `Duration::MAX` means no deadline.
    pub incremental: Option<Duration>,
    /// Incremental collection: when objects created during a cycle exceed
    /// this multiple of the objects alive at its start (which pacing, see
    /// [`incremental_stretch`](Self::incremental_stretch), tries to prevent),
    /// the next tick finishes the cycle at once (Unreal's rule when a new collection is
    /// due while one is pending), bounding peak memory at about
    /// `(1 + incremental_debt)` times the live heap. `None` never forces.
    pub incremental_debt: Option<f64>,
    /// Incremental collection: how far a slice may stretch its time budget
    /// when the cycle falls behind the mutator (Go's GC assists, Lua's step
    /// multiplier). Each slice owes work in proportion to the objects created
    /// since the previous one, so that the cycle ends before they reach
    /// [`incremental_debt`](Self::incremental_debt); a slice that has not paid
    /// it by its deadline runs on until it has, or until `incremental_stretch`
    /// times its budget has passed. `1.0`, the default, does not stretch for
    /// pacing: the budget is a cap until the cycle's debt passes half of
    /// [`incremental_debt`](Self::incremental_debt)'s limit; from there a
    /// slice may grow in proportion, up to 1.5 times its budget at the
    /// limit, whatever this setting (a finishing slice of marking, which
    /// owes the re-scans of what the program wrote, may also take up to
    /// 1.5 times it). A cycle that passes the limit is finished at once by
    /// the debt rule, in one long pause; [`CollectStats::forced`](crate::CollectStats::forced)
    /// says so.
    ///
    /// ```
    /// use std::time::Duration;
    /// use coreobject::{GcConfig, Heap, HeapConfig, Object};
    /// #[derive(Object, Default)]
    /// struct Spark(u64);
    /// let gc = GcConfig {
    ///     incremental: Some(Duration::from_millis(2)),
    ///     incremental_stretch: 4.0, // a slice may take up to 8 ms to keep up
    ///     ..GcConfig::MANUAL
    /// };
    /// let mut heap = Heap::with_config(HeapConfig { gc, ..HeapConfig::DEFAULT }).unwrap();
    /// heap.create(Spark(1));
    /// heap.tick(Duration::from_millis(16));
    /// ```
    pub incremental_stretch: f64,
    /// Warn (through `tracing`) when an object has waited this long for
    /// `is_ready_for_finish_destroy`.
    pub finish_destroy_timeout: Duration,
    /// Which way the outer reference keeps objects alive.
    ///
    /// * `false` (the default, Unreal 5's rule): an **inner keeps its
    ///   outer** alive, as if the outer were one more field of the inner. An
    ///   outer alone does not keep its inners: one reachable from nothing
    ///   else is freed (and outlives its outer if it is reachable, the
    ///   inner's [`Heap::outer_of`](crate::Heap::outer_of) then answering
    ///   `None`).
    /// * `true` (as if marking ran `ForEachObjectWithOuter` on every object
    ///   it traces, marking each inner): an **outer keeps its inners** alive
    ///   *as well*; inners still keep their outer. So an object reachable
    ///   from a root keeps its whole outer tree alive (its outers, their
    ///   inners, theirs, …) unless parts of it are marked as garbage.
    ///
    /// Inners are found through an outer → inners index kept at creation and
    /// free, never by scanning the table; with `false`, marking pays one
    /// predictable branch per object for the option. A change takes effect
    /// at the next cycle.
    ///
    /// ```
    /// use coreobject::{GcConfig, Heap, HeapConfig, Object};
    /// #[derive(Object, Default)]
    /// struct Package;
    /// let gc = GcConfig { outer_keeps_inners: true, ..GcConfig::MANUAL };
    /// let mut heap = Heap::with_config(HeapConfig { gc, ..HeapConfig::DEFAULT }).unwrap();
    /// let pkg = heap.spawn(Package).root().create().unwrap();
    /// let asset = heap.spawn(Package).outer(pkg).create().unwrap();
    /// heap.collect().unwrap();
    /// assert!(heap.contains(asset), "kept by its outer");
    /// heap.gc_config_mut().outer_keeps_inners = false;
    /// heap.collect().unwrap();
    /// assert!(!heap.contains(asset), "an outer alone keeps no inner");
    /// ```
    pub outer_keeps_inners: bool,
    /// Threads that mark: 1 (the default)
    /// marks on the collecting thread alone; 0 takes
    /// [`available_parallelism`](std::thread::available_parallelism), at
    /// most 16. With more than one, the drain of the mark phase runs on that
    /// many workers (the collecting thread and the threads of a pool the
    /// heap starts on its first parallel drain and keeps) with work stealing; what is marked, and so what is freed, is the
    /// same for every count. Budgeted incremental slices
    /// ([`incremental`](Self::incremental)) use the workers too, within the
    /// slice's budget: the slice's wall time is what it bounds. User
    /// [`Trace`](crate::Trace) code then runs on the worker threads (objects
    /// are `Sync`); a panic in it abandons the collection as on one thread.
    pub threads: usize,
    /// With [`threads`](Self::threads) above 1: mark on one thread anyway
    /// when fewer objects than this are allocated when the cycle starts
    /// (waking the pool's threads and waiting for them to finish costs tens
    /// of microseconds; small heaps mark faster alone). 50,000 by default.
    pub parallel_threshold: usize,
    /// In cycles that mark on several threads ([`threads`](Self::threads)
    /// above 1, and [`parallel_threshold`](Self::parallel_threshold)
    /// reached): drop the values of freed objects on the marking workers too (Unreal's
    /// `gc.MultithreadedDestructionEnabled`), in stop-the-world purges that
    /// free at least [`PARALLEL_DROP_MIN`](crate::gc::PARALLEL_DROP_MIN)
    /// objects and have no delete listener (those run in order, on the
    /// collecting thread, as do destruction hooks and the names index).
    /// `false` by default: with glibc's allocator, `Drop`s that free
    /// buffers allocated on another thread contend for that thread's arena.
    /// Measured again once freeing a named object stopped freeing strings:
    /// on a 2-core VM the purge of a million-object world (100,000 objects
    /// freed, each with a small `Vec`) still took 1.7x longer on two threads
    /// than on one. Worth trying with a thread-caching allocator, or when
    /// `Drop` does real work.
    ///
    /// ```
    /// use coreobject::{GcConfig, Heap, HeapConfig, Object};
    /// #[derive(Object, Default)]
    /// struct Shard { data: Vec<u64> }
    /// let gc = GcConfig { threads: 2, parallel_threshold: 0, parallel_drop: true, ..GcConfig::MANUAL };
    /// let mut heap = Heap::with_config(HeapConfig { gc, ..HeapConfig::DEFAULT }).unwrap();
    /// for _ in 0..20_000 {
    ///     heap.create(Shard { data: vec![1; 4] });
    /// }
    /// let stats = heap.collect().unwrap();
    /// assert_eq!((stats.freed, stats.drop_threads), (20_000, 2));
    /// ```
    pub parallel_drop: bool,
    /// Generational collection: keep, between cycles, the set of old objects
    /// the program changed (the write barrier in [`Heap::get_mut`](crate::Heap::get_mut),
    /// and the read barrier of interior-mutable classes), so that minor
    /// cycles ([`Heap::collect_minor`](crate::Heap::collect_minor),
    /// [`young_threshold`](Self::young_threshold)) can skip the old objects
    /// that did not change. Costs one more call in `get_mut` (a bitmap test,
    /// and a push the first time an old object changes after a cycle). With
    /// `false`, a minor cycle asked for runs as a major one. Takes effect
    /// when the next cycle completes.
    pub generational: bool,
    /// With [`generational`](Self::generational): [`Heap::tick`](crate::Heap::tick)
    /// starts a **minor** cycle when the objects the collector considers
    /// have grown by this many since the last cycle (the first time, before
    /// any major cycle has run, a major one: nothing is old yet). The other
    /// triggers start major cycles: [`growth`](Self::growth) then compares
    /// the old generation (the last cycle's survivors) with the last major
    /// cycle's survivors, and [`interval`](Self::interval) counts from the
    /// last major cycle. Takes precedence over
    /// [`young_share`](Self::young_share).
    pub young_threshold: Option<usize>,
    /// With [`generational`](Self::generational) and no
    /// [`young_threshold`](Self::young_threshold): the young generation's
    /// size as a share of the heap, so that minor cycles need no tuning.
    /// [`Heap::tick`](crate::Heap::tick) starts a minor cycle when the
    /// objects created since the last cycle reach this share of the objects
    /// that survived it (and at least [`growth_floor`](Self::growth_floor)),
    /// as Lua's generational mode and the JVMs size their young generation
    /// from the heap. `Some(0.25)` by default: a heap of a million objects
    /// runs a minor cycle each 250,000 objects created, and a major one
    /// when the old generation has doubled ([`growth`](Self::growth)).
    /// `None` (and [`MANUAL`](Self::MANUAL)) runs no automatic minor cycle.
    ///
    /// ```
    /// use coreobject::{CycleKind, Heap, Object};
    /// use std::time::Duration;
    /// #[derive(Object, Default)]
    /// struct Spark;
    /// let mut heap = Heap::new();
    /// let mut kinds = Vec::new();
    /// for _ in 0..20 {
    ///     for _ in 0..1_000 {
    ///         heap.create(Spark); // short-lived: never stored anywhere
    ///     }
    ///     if let Some(stats) = heap.tick(Duration::from_millis(16)).completed {
    ///         kinds.push(stats.kind);
    ///     }
    /// }
    /// assert_eq!(kinds[0], CycleKind::Major, "nothing is old before the first cycle");
    /// assert!(kinds[1..].iter().all(|&k| k == CycleKind::Minor), "{kinds:?}");
    /// ```
    pub young_share: Option<f64>,
    /// Whether [`Heap::tick`](crate::Heap::tick) may start a major cycle on
    /// its own (interval, object count, bytes, growth). `false` leaves only
    /// minor cycles to `tick`: a game can forbid the long full collections
    /// during play and call [`Heap::collect`](crate::Heap::collect) at a
    /// loading screen. [`every_frame`](Self::every_frame) still collects.
    pub automatic_majors: bool,
}

impl GcConfig {
    /// [`Heap::tick`](crate::Heap::tick) collects when the objects the
    /// collector considers have doubled since the last cycle's survivors (and
    /// number at least [`growth_floor`](Self::growth_floor), 1,024), as Lua
    /// and gc-arena pace, and at the latest every 61.1 seconds of tick time
    /// (Unreal's `gc.TimeBetweenPurgingPendingKillObjects`). So a program
    /// that creates objects every frame collects without any setting.
    ///
    /// ```
    /// use coreobject::{Heap, Object};
    /// use std::time::Duration;
    /// #[derive(Object, Default)]
    /// struct Spark;
    /// let mut heap = Heap::new();
    /// let mut cycles = 0;
    /// for _ in 0..10 {
    ///     for _ in 0..1_000 {
    ///         heap.create(Spark);
    ///     }
    ///     cycles += heap.tick(Duration::from_millis(16)).completed.is_some() as usize;
    /// }
    /// assert!(cycles >= 4, "collected by growth, long before 61.1 s");
    /// ```
    pub const DEFAULT: GcConfig = GcConfig {
        interval: Some(Duration::from_millis(61_100)),
        object_threshold: None,
        bytes_threshold: None,
        every_frame: false,
        growth: Some(2.0),
        growth_floor: 1024,
        incremental: None,
        incremental_debt: Some(1.0),
        incremental_stretch: 1.0,
        finish_destroy_timeout: Duration::from_secs(5),
        outer_keeps_inners: false,
        threads: 1,
        parallel_threshold: 50_000,
        parallel_drop: false,
        generational: true,
        young_threshold: None,
        young_share: Some(0.25),
        automatic_majors: true,
    };

    /// Collect only when asked.
    pub const MANUAL: GcConfig = GcConfig {
        interval: None,
        growth: None,
        young_share: None,
        ..GcConfig::DEFAULT
    };

    /// Collect every frame.
    pub const DEBUG: GcConfig = GcConfig {
        every_frame: true,
        ..GcConfig::DEFAULT
    };
}

impl GcConfig {
    /// The largest [`incremental_stretch`](Self::incremental_stretch) a heap
    /// accepts.
    pub const MAX_STRETCH: f64 = 1_000_000.0;

    /// Checks the settings a heap refuses: a zero budget, a growth factor
    /// not above 1, a stretch outside `1.0..=MAX_STRETCH`, a debt limit that
    /// is not a positive number. Each error names its field. A budget of
    /// [`Duration::MAX`] is accepted and means no deadline.
    ///
    /// Settings changed through
    /// [`Heap::gc_config_mut`](crate::Heap::gc_config_mut) are not checked
    /// there; the collector treats out-of-range values as their nearest
    /// meaningful ones (a NaN debt never forces a cycle, a huge stretch or
    /// budget means no deadline), so no setting can make a tick panic.
    pub fn validate(&self) -> Result<(), crate::error::ConfigError> {
        use crate::error::ConfigError;
        if self.incremental == Some(Duration::ZERO) {
            return Err(ConfigError::ZeroBudget);
        }
        if self.growth.is_some_and(|g| g.is_nan() || g <= 1.0) {
            return Err(ConfigError::Growth);
        }
        if !(1.0..=Self::MAX_STRETCH).contains(&self.incremental_stretch) {
            return Err(ConfigError::Stretch);
        }
        if self
            .incremental_debt
            .is_some_and(|d| d.is_nan() || d <= 0.0)
        {
            return Err(ConfigError::Debt);
        }
        Ok(())
    }
}

impl GcConfig {
    /// The marking threads [`threads`](Self::threads) asks for: 0 means
    /// [`available_parallelism`](std::thread::available_parallelism), at most 16.
    pub fn mark_threads(&self) -> usize {
        match self.threads {
            0 => std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(16),
            n => n,
        }
    }
}

impl Default for GcConfig {
    fn default() -> Self {
        GcConfig::DEFAULT
    }
}

//! The garbage collector: mark and sweep over the object array, stop-the-world
//! or incremental under a per-tick time budget.
//!
//! A cycle runs in two phases (each traced, see [Tracing](#tracing)):
//!
//! 1. **mark** — from the roots: objects in the root set
//!    ([`Heap::add_to_root`](crate::Heap::add_to_root)), objects with
//!    [`StrongObj`](crate::StrongObj) handles, the references of
//!    disregard-for-GC pool objects, and everything external
//!    [`Referencer`]s report; then a breadth-first work
//!    queue over reflected fields and outers, run as a prefetching pipeline
//!    (module `gc/mark.rs`). Objects marked as garbage are never marked, so
//!    references to them go stale.
//! 2. **purge** (module `gc/sweep.rs`) — every allocated, unmarked object
//!    outside the pool is flagged unreachable and gets `begin_destroy`; then
//!    objects ready for it get `finish_destroy`; then delete listeners run,
//!    the slot's serial moves on, its index returns to the free list and the
//!    value is dropped. Objects whose class has no hooks skip the hook calls
//!    and cost no scratch memory: the purge finds them in the mark bitmap.
//!
//! Marks live in a side bitmap (one bit per slot), cleared with a `memset` of
//! `slots / 8` bytes per cycle: for a million objects that is 128 KiB.
//!
//! With [`GcConfig::threads`] above 1, the drains of the mark phase's work
//! queue (all of a stop-the-world collection's; each incremental slice's,
//! under its budget) run on that many work-stealing workers over an atomic
//! view of the same bitmap (module `gc/par.rs`), once at least
//! [`GcConfig::parallel_threshold`] objects are alive when the cycle starts.
//! A budgeted parallel drain ends with every object it marked scanned and
//! the rest of its work back in the collector's queue, as a single-threaded
//! one does. The pool scan, the re-scans and the referencer reports stay on
//! the collecting thread. What is marked, and so what is freed, does not
//! depend on the thread count.
//!
//! # Outers and inners
//!
//! An object created with an outer ([`Spawn::outer`](crate::Spawn::outer))
//! keeps that outer alive, as in Unreal 5: the outer is an implicit field.
//! With [`GcConfig::outer_keeps_inners`] (as if marking ran
//! `ForEachObjectWithOuter` on every object it traces), an outer *also* keeps its
//! inners alive: scanning an object visits the inners filed under it in the
//! outer → inners index, which creation and the purge keep up to date (so
//! marking never searches the table). Both directions then hold, so an
//! object reachable from a root keeps its whole outer tree alive, up and
//! down, unless parts of it are marked as garbage. The rule is read when a
//! cycle starts. An inner created during an incremental cycle needs no
//! barrier under either rule: like every object created then, it is born
//! black, and the next cycle finds it in the index.
//!
//! # Incremental collection
//!
//! With [`GcConfig::incremental`], each [`Heap::tick`](crate::Heap::tick)
//! runs one slice of at most that budget, and the program runs between
//! slices. What keeps that correct:
//!
//! * **The write barrier.** [`Heap::get_mut`](crate::Heap::get_mut) (and
//!   `heap[h] = …`) is the only way to change an object. While a cycle marks,
//!   it puts the object on a re-scan list (once until marking looks at the
//!   list, through an item flag); marking re-scans every listed object that
//!   was already marked, so a reference stored into a scanned object is
//!   found. When no cycle marks, the barrier is one predictable branch.
//!   [`Heap::data_mut`](crate::Heap::data_mut) is a second door that skips
//!   it: it reaches only the fields whose type cannot hold a strong handle
//!   ([`Data`](crate::Data)), so the object's references stay what marking
//!   saw, and a game that moves every actor every frame through it costs
//!   the collector nothing.
//! * **The read barrier of interior-mutable classes.** An object whose
//!   handles sit behind a lock or in an atomic
//!   ([`Trace::INTERIOR_MUT`](crate::Trace::INTERIOR_MUT)) can change with
//!   only a `&T`, which it can get only from the heap ([`Heap::get`](crate::Heap::get),
//!   iteration). While a cycle marks, handing out a `&T` for such an object
//!   puts it on the same re-scan list. So only the objects the program used
//!   since the previous slice are re-scanned, never every interior-mutable
//!   object in the heap; other classes pay nothing (the flag is tested in
//!   the same instruction as the garbage flags).
//! * **Allocation is black.** Objects created while a cycle is in flight,
//!   through `&Heap` on any thread or `&mut Heap`, carry a `BORN` flag: the
//!   cycle never frees them, and marking scans them (they are found, without
//!   any lock at creation, in the slots the index allocator handed out since
//!   the previous slice). An object created through `&mut Heap`
//!   ([`Heap::create_mut`](crate::Heap::create_mut),
//!   [`Heap::spawn_mut`](crate::Heap::spawn_mut)) while a cycle marks is
//!   traced at creation instead, while its value is in the cache: its mark
//!   bit is set and what it references is shaded (a handle to a marked
//!   object, an old one in a minor cycle, or one created during the cycle
//!   costs a bit test; the others are kept in a buffer that the looks below
//!   queue, dropping those marked by then at a bit test each), and the born
//!   scan passes over it at the cost of a bitmap test (a unit per 32). A write to it after
//!   that lists it for a re-scan like any other. Outside marking this costs
//!   creation one predictable branch.
//! * **New roots are seen.** Roots added and strong handles taken during a
//!   cycle join the root list, which marking reads again at its end, as it
//!   does every referencer's report and every object whose garbage mark was
//!   cleared.
//! * **Unreachable means gone.** From the moment marking ends, an object it
//!   did not reach resolves to nothing, even before the purge reaches it:
//!   resolution consults the cycle's mark bitmap until every such object is
//!   flagged.
//! * **Progress.** Marking ends in a slice whose looks at what the program
//!   did (new roots, cleared garbage marks, objects created, the re-scan
//!   list, referencer reports) grey nothing new: no mutator runs inside a
//!   slice. The re-scan list holds each object changed since marking last
//!   looked at it once; until the work queue first runs dry it is only
//!   gathered, so it can hold what the program changed during the whole
//!   cycle, and the looks work it off under the budget. From then on
//!   (marking is *finishing*) every slice first scans the objects created
//!   since the previous one and re-scans, whatever its budget, the objects
//!   changed since the previous one plus a sixteenth of the entries the
//!   first look left (at least 32): the list never grows from slice to
//!   slice, the older entries are gone within 16 slices, and a final look
//!   re-scans what the program changed since the previous slice, not during
//!   the cycle. That owed work is counted as the slice's work but not
//!   charged to its budget. A slice of [`Heap::step`](crate::Heap::step)
//!   does all of it; a timed slice (a tick) stops it at its deadline,
//!   leaves the rest listed, and then drains for half its budget, so it
//!   takes at most 1.5 times its budget. A program that writes more than
//!   that can re-scan makes the list grow, so this holds for 16 such cut
//!   slices a cycle: from the 17th, every slice does all it owes again,
//!   beyond its deadline (a sixteenth of the list as it then stands, plus
//!   the program's writes), so marking still ends within 16 more slices
//!   when the program writes every object every frame and creates none
//!   (when it creates, the debt limit below may end the cycle first).
//!   (A minor cycle's remembered set, the old objects changed since the
//!   last cycle, is re-scanned in budgeted pieces when the cycle starts.)
//!   The looks queue only handles
//!   that would mark something, and queued handles that turn out to mark
//!   nothing (stale, garbage, already marked) are dropped at a unit per
//!   eight, so no slice drops more than its budget allows. Every slice
//!   either marks an unmarked object or drops queued entries; objects
//!   created during the cycle are black, and the entries are bounded by the
//!   references of the objects marked, so marking ends after a number of
//!   slices bounded by the objects and references alive when it began,
//!   plus 16, plus 16 timed slices cut at their deadline (the finishing slices that work off the re-scan list's older
//!   entries; after them each slice's looks re-scan only what the program
//!   changed since the previous one, which the slice has already done),
//!   whatever the mutator does (with [`Heap::step`](crate::Heap::step)`(1)`
//!   too).
//! * **What each step costs.** In units of work ([`Tick::work`]), each
//!   slice stopping at its budget: a major cycle's forgetting of the
//!   remembered set the last cycle left (one unit per entry, before
//!   anything is scanned), the pool's scan (one unit per pool
//!   slot), a minor cycle's looks at the young objects that may need one
//!   (one per pool object created, object that joined a cluster and, under
//!   [`GcConfig::outer_keeps_inners`], inner filed under an outer since the
//!   previous cycle started: plain young objects cost nothing) and its
//!   remembered set (one per remembered object), the drain
//!   (one per object marked or queue entry popped, one per eight dead
//!   entries dropped, and for an object traced whole one more per 32
//!   pieces beyond its first 32, so that the clock is read after each large
//!   one), the looks at what the program did (one per object
//!   created through `&Heap` or changed, one per 32 objects traced at
//!   their creation, one per eight handles such objects shaded; a finishing slice also owes, beyond its budget,
//!   one per object changed since the previous slice and a sixteenth of
//!   the re-scan list its first look left), the sweep (one per 64-slot bitmap word of a major
//!   cycle, or eight young-list entries of a minor one, and one per object
//!   flagged), the destruction hooks and the free step (one per object).
//!   The bookkeeping between steps (starting a cycle, ending marking,
//!   promotion after a minor cycle) is proportional to what the program
//!   created or changed, except a major cycle's start, which clears the
//!   mark bitmap (`slots / 8` bytes, one `memset`; the remembered set's
//!   flags are cleared by the first marking slices, under their budgets,
//!   and the slots handed out since the last cycle are not listed, since
//!   a major cycle has no young list). A cycle's start also makes the work
//!   queue's room (twice the objects it may mark, an allocation whose
//!   pages are touched as entries arrive), so that the queue does not
//!   copy itself into a larger buffer inside a slice; a cycle that queues
//!   more than that still does, once: the next starts keep the queue it
//!   grew to (its high water counts, see `retire::Used`). A large object is
//!   split: one of more than 65,536 pieces
//!   ([`Trace::trace_units`](crate::Trace::trace_units), an element of a
//!   `Vec` or a handle field each) is traced 4,096 pieces at a time, at one
//!   unit per 32 pieces, its cursor kept across slices (a `Vec` of a million
//!   handles is about 32,000 units, over as many slices as that takes). What
//!   a slice cannot split: one piece (an element of a `Vec`, traced whole),
//!   an object of up to 65,536 pieces (a few hundred microseconds at
//!   most; charged a unit per 32 pieces after it is traced, so at most
//!   one such object and those already in the marker's rings run past a
//!   deadline), the first 4,096 pieces of a larger one, an object whose `Trace` keeps the
//!   default of one piece (maps, sets, locks, hand-written impls,
//!   `trace_with` classes), and any object traced by a parallel marking
//!   worker (workers trace whole; the collecting thread continues objects
//!   split before).
//! * **Keeping up.** A timed slice is paced: the objects created since the
//!   previous slice owe the cycle a share of its estimated time (from the
//!   last cycle's time per live object), sized so that the cycle ends by the
//!   time creation reaches 80% of [`GcConfig::incremental_debt`] times the
//!   objects alive at its start. A slice that owes more than its budget runs
//!   longer, up to [`GcConfig::incremental_stretch`] times the budget, and
//!   carries the rest. Whatever the stretch, once creation passes half the
//!   debt limit a timed slice of a minor or major cycle grows in
//!   proportion, up to 1.5 times its budget at the limit (a graduated
//!   response before the forced finish). If creation still exceeds the debt limit, the next
//!   tick finishes the cycle at once (as Unreal does when a new collection is
//!   due while one is pending); [`CollectStats::forced`] says so.
//! * **Starting in time.** The growth trigger's goal is
//!   [`GcConfig::growth`] times what the last major cycle marked (not the
//!   objects allocated after it, which count all it let the program
//!   create). A timed major cycle starts when the objects allocated plus
//!   its lead, what the program is expected to create while it runs (the
//!   last timed major cycle's creation per second of collector time, times
//!   this one's time from that cycle's costs per object marked and per
//!   object freed, and a quarter more), reach the goal, so that it ends
//!   near the goal rather than past it by all it let the program create
//!   (Go's pacer); with minor cycles, not before one has run since the
//!   last major cycle.
//!
//! # Generational collection
//!
//! With [`GcConfig::generational`] (the default), a cycle's mark bits
//! outlive it: an object marked by the last cycle is **old**, one created
//! since is **young** (sticky mark bits, as in MMTk's sticky plans, Ruby's
//! and JavaScriptCore's collectors). A **minor** cycle
//! ([`Heap::collect_minor`](crate::Heap::collect_minor), or `tick` when
//! [`GcConfig::young_threshold`] is reached) keeps the old marks and so never
//! enters an old object unless it changed:
//!
//! * **Marking** starts from the roots, strong handles and referencers (old
//!   ones are already marked, so visiting them costs a bit test), the
//!   **remembered set**, the new objects in the disregard-for-GC pool, the
//!   young members of GC clusters with old members, and, under
//!   [`GcConfig::outer_keeps_inners`], the young inners of old outers (or of
//!   pool objects). Those young objects are listed as the facts become
//!   known: the pool's new objects are a range of indices (handed out in
//!   order, never freed), an object joining a cluster (between cycles
//!   only) and an inner filed under its outer (at creation through `&Heap`
//!   on any thread or `&mut Heap`, or by a move, whenever the outer →
//!   inners index is kept) are pushed on lists each cycle's start takes,
//!   so marking never looks at every young object.
//!   The remembered set is the write barrier's list kept between cycles:
//!   the first `get_mut` of an old object (or of a pool object) after a
//!   cycle puts it there, and the read barrier of interior-mutable classes
//!   puts such an old object there the first time it is borrowed at all;
//!   during a purge every changed object is remembered. Young objects it
//!   reaches are marked, and are old from then on (promotion after one
//!   cycle).
//! * **Sweeping** visits only the slots the allocator handed out since the
//!   last cycle started (the allocator records them as it syncs) and the old
//!   objects marked as garbage since (their mark is cleared, so that the
//!   cycle frees them; what only they kept alive goes with them if young, or
//!   with the next major cycle if old). No walk over all slots, no clear of
//!   the bitmap.
//! * An old object that became unreachable stays until the next **major**
//!   cycle ([`Heap::collect`](crate::Heap::collect), and every other
//!   trigger), which clears the marks and the remembered set and marks the
//!   whole heap. [`GcConfig::automatic_majors`] lets a program forbid them in
//!   `tick` and ask for one at a loading screen.
//! * Objects created during a cycle survive it (allocation is black); those
//!   created while it marked were scanned by it and are old after it, those
//!   created during its purge are young for the next.
//!
//! One cycle is in flight at a time: a minor one due while an incremental
//! major one runs waits for it to end (as in Lua). Minor cycles run in
//! slices under the same budget ([`Heap::step_minor`](crate::Heap::step_minor),
//! `tick`). What it costs the program: one more call in `get_mut` (a bit
//! test, and a push the first time an old object changes after a cycle),
//! one flag test in `get` for interior-mutable classes, and 4 bytes per
//! object created between cycles. A panic that abandons a cycle drops the
//! remembered set: the next cycle is a major one.
//!
//! ```
//! use coreobject::{CycleKind, GcConfig, Heap, HeapConfig, Obj, Object};
//! #[derive(Object, Default)]
//! struct Node { kids: Vec<Obj<Node>> }
//! let gc = GcConfig { young_threshold: Some(1_000), ..GcConfig::MANUAL };
//! let mut heap = Heap::with_config(HeapConfig { gc, ..HeapConfig::DEFAULT }).unwrap();
//! let world = heap.spawn(Node::default()).root().create().unwrap();
//! heap.collect().unwrap(); // a major cycle: `world` is old
//! for _ in 0..1_000 {
//!     heap.create(Node::default()); // young garbage
//! }
//! let kept = heap.create(Node::default());
//! heap[world].kids.push(kept);
//! let stats = heap.tick(std::time::Duration::from_millis(16)).completed.unwrap();
//! assert_eq!((stats.kind, stats.freed, stats.remembered), (CycleKind::Minor, 1_000, 1));
//! assert!(heap.contains(kept));
//! ```
//!
//! # Tracing
//!
//! The collector reports its work as [`tracing`](https://docs.rs/tracing)
//! spans (level `INFO`, targets `coreobject::gc` and `coreobject::gc::sweep`), so that a subscriber such
//! as `tracing-chrome` or `tracing-tracy` shows it on a timeline:
//!
//! | span | when | fields |
//! |---|---|---|
//! | `gc.collect` | [`Heap::collect`](crate::Heap::collect) | `heap`, `trigger` |
//! | `gc.slice` | each slice of a cycle (a stop-the-world collection is one) | `heap`; `phase` (`"mark"` or `"purge"`, where the slice began); recorded when it ends: `work` (objects marked, flagged unreachable or freed), `freed`, `completed` (it ended the cycle), `forced` |
//! | `gc.mark` | the slice's marking, inside `gc.slice` | |
//! | `gc.sweep` | flagging unreachable objects and `begin_destroy` | `from` (the slot it resumed at) |
//! | `gc.destroy` | polling `is_ready_for_finish_destroy` (`step = "poll"`), then `finish_destroy` (`step = "finish"`) | `step`, `from` |
//! | `gc.free` | delete listeners, freeing, dropping | `from` |
//! | `gc.finish_pending` | a tick outside a cycle that finishes and frees objects whose `finish_destroy` was deferred | `pending` |
//!
//! There is a span per slice and per phase, never per object: with no
//! subscriber, or one that ignores them, a span costs a check of its
//! call site's cached interest. The crate's `examples/gc_timeline.rs`
//! writes a Chrome trace of a game loop with `tracing-chrome`. Two
//! `DEBUG` events, `cycle started` and `cycle done`, carry a cycle's
//! trigger and totals.
//!
//! Handles on the stack are not roots, in either mode: an object reachable
//! only from a local handle when marking ends is freed by that cycle, even if
//! the handle is stored into a live object later (the store then holds a
//! stale handle, never a dangling one).
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

mod barrier;
mod budget;
pub(crate) mod debug;
pub(crate) mod mark;
mod mark_phase;
mod par;
mod plan;
pub(crate) mod retire;
pub(crate) mod stats;
mod sweep;

use std::collections::{HashMap, VecDeque};
use std::num::NonZeroU32;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use rustc_hash::FxBuildHasher;

use crate::array::{flags, ObjectArray};
use crate::cluster::Clusters;
use crate::config::GcConfig;
use crate::handle::AnyObj;
use crate::inners::Inners;
use crate::lifecycle::{guard, resume, Caught};
use crate::listener::{HookId, Listeners};
use crate::names::Names;
use crate::referencer::Referencer;
use crate::trace::Visitor;

use budget::Budget;
pub(crate) use mark::Marker;
pub(crate) use par::ParMarker;
/// The parallel marker's termination protocol, for `tests/loom.rs`.
#[cfg(loom)]
#[doc(hidden)]
pub use par::Termination;
pub use stats::{CollectStats, CycleKind, GcTotals, Phase, PreCollect, Tick, Trigger};
use sweep::Pending;
pub use sweep::PARALLEL_DROP_MIN;

type PreHook = Box<dyn FnMut(&PreCollect) + Send + Sync>;
type PostHook = Box<dyn FnMut(&CollectStats) + Send + Sync>;

/// Everything a collection touches, borrowed from the heap for one slice.
pub(crate) struct Stage<'h> {
    pub(crate) array: &'h mut ObjectArray,
    pub(crate) names: &'h mut RwLock<Names>,
    pub(crate) listeners: &'h Listeners,
    pub(crate) referencers: &'h [(HookId, Arc<dyn Referencer>)],
    /// The outer → inners index: read by marking, kept by the purge.
    pub(crate) inners: &'h mut Inners,
    /// GC clusters: read by marking, a cluster forgotten when its root is freed.
    pub(crate) clusters: &'h mut Clusters,
    /// The slots a store's next capture looks at: the sweep and the purge
    /// mark the objects they find unreachable and free.
    pub(crate) store_dirty: &'h crate::save::ids::Dirty,
}

/// Where a cycle in flight is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Scanning the pool's objects, from this index (a major cycle), or
    /// looking at the young objects that may need it, from this position
    /// (a minor one: the pool's new objects from `Cycle::pool_lo`, then
    /// `Cycle::looks`, the objects that joined a cluster or were filed
    /// under an outer since the previous cycle started; the young members
    /// of clusters with old members and the young inners of old outers
    /// among them are greyed).
    Pool(u32),
    /// Re-scanning the remembered set (a minor cycle's old objects changed
    /// since the last cycle), from this position.
    Remembered(usize),
    /// Draining the work queue and re-scanning what changed.
    Mark,
    /// Flagging unreachable objects and running `begin_destroy`, from this
    /// slot.
    Sweep(u32),
    /// Polling pending objects' `is_ready_for_finish_destroy`, from this
    /// position in the pending list.
    Poll(usize),
    /// Running `finish_destroy` on the ready ones, from this position.
    Finish(usize),
    /// Freeing, from this slot.
    Free(u32),
    /// Clearing the `BORN` flags of objects created during the cycle, from
    /// this position in its list.
    Settle(usize),
}

impl Step {
    fn phase(self) -> Phase {
        match self {
            Step::Pool(_) | Step::Remembered(_) | Step::Mark => Phase::Mark,
            _ => Phase::Purge,
        }
    }
}

/// A cycle in flight.
struct Cycle {
    step: Step,
    stats: CollectStats,
    /// The high water when the cycle started: slots at or above it are newer.
    hw: u32,
    /// The pool's end when the cycle started.
    pool_end: u32,
    /// Objects the collector considered when the cycle started.
    live_at_start: usize,
    /// Threads this cycle's drains run on (decided once: with `threads: 0`
    /// it asks the OS).
    threads: usize,
    /// How much of the root list marking has read.
    roots_seen: usize,
    /// Objects created during the cycle, found so far.
    born: retire::GrowingList,
    /// The young list's length when the cycle started: with the born
    /// list's at its end, what it used of the list buffers (see
    /// `Collector::list_used`).
    young_at_start: usize,
    /// How many of `born` marking has scanned.
    born_seen: usize,
    /// Pending objects found not ready by this cycle's poll step.
    waiting: Vec<Pending>,
    /// Pending objects found ready, to finish.
    ready: Vec<u32>,
    /// The cycle must finish in the next slice, whatever the budget.
    forced: bool,
    /// How many of `born` earlier slices' pacing has counted.
    born_paced: usize,
    /// Collector time the objects created so far still owe the cycle.
    owed: Duration,
    /// [`GcConfig::outer_keeps_inners`] when the cycle started.
    outer_keeps_inners: bool,
    /// Minor or major.
    kind: CycleKind,
    /// How many of `born` marking scanned (all those created before it
    /// ended). Every object in `born` is young after the cycle.
    scanned_born: usize,
    /// Generational: the objects the program changed while the cycle marked
    /// (the re-scan list as marking worked it off), once each (see
    /// `Collector::written_seen`). The only old objects that may hold a
    /// handle to an object created during the cycle, so they join the
    /// remembered set when it completes, and what the cycle created stays
    /// young.
    written: Vec<u32>,
    /// How many of `written` the settle step has put in the remembered set.
    written_done: usize,
    /// Minor cycles: the slots the sweep and the free steps visit (the young
    /// objects, old ones marked as garbage; the free step adds the pending
    /// objects finished this cycle). Major cycles walk the bitmap instead.
    list: Vec<u32>,
    /// The remembered set when the cycle started: a minor cycle re-scans it
    /// in budgeted pieces ([`Step::Remembered`]); a major one clears its
    /// entries' flags in budgeted pieces before it scans anything
    /// (`forgotten`), then empties it.
    remembered: Vec<u32>,
    /// Major cycles: how many entries of `remembered` have had their flag
    /// cleared. Until an entry has, a write to its object does not list it
    /// again; no object has been scanned yet, so marking reads it as it is.
    forgotten: usize,
    /// Minor cycles: whether each GC cluster met among the young objects
    /// has an old member, decided once per cycle (kept across slices).
    old_clusters: HashMap<u32, bool, FxBuildHasher>,
    /// Minor cycles: the pool's end when the previous cycle started. The
    /// pool's young objects (created since then, its indices being handed
    /// out in order and never freed) are those from here to `pool_end`.
    pool_lo: u32,
    /// Minor cycles: the slots of the objects that joined a GC cluster since
    /// the previous cycle started and, under
    /// [`GcConfig::outer_keeps_inners`], of those filed under an outer since
    /// then: with the pool's young objects, the only ones a look may keep
    /// (see `mark_phase::look_at_young`). Old ones among them cost a bit
    /// test.
    looks: Vec<u32>,
    /// Marking has looked at the re-scan list (its queue ran dry once):
    /// from then on every marking slice first re-scans what the program
    /// changed since the previous slice (and a few older entries), so
    /// that the list left for the final look is bounded by one slice's
    /// writes, not the cycle's.
    finishing: bool,
    /// Older entries of the re-scan list each finishing slice owes (see
    /// `mark_phase::FINISH_SLICES`).
    backlog_share: usize,
    /// Timed finishing slices whose deadline stopped the re-scans they
    /// owed: after `mark_phase::FINISH_SLICES` of them, every slice does
    /// all it owes, whatever its deadline (see `mark_phase::cut`).
    cut_slices: usize,
}

/// The collector: its settings, its state between slices, its books.
pub(crate) struct Collector {
    config: GcConfig,
    enabled: bool,
    cycle: Option<Box<Cycle>>,
    /// Whether a cycle is marking: the write barrier is on.
    marking: bool,
    /// Whether a cycle is in flight: creation flags objects `BORN`.
    in_flight: bool,
    /// Whether the remembered set has been kept since the last cycle
    /// completed ([`GcConfig::generational`] then): a minor cycle may run.
    /// Between cycles the re-scan list is that set, `bits` holds the old
    /// objects (marked by the last cycle), and the allocator records the
    /// slots it hands out.
    gen: bool,
    /// Slots handed out since the last cycle started (with `gen`): the young
    /// objects a minor cycle sweeps.
    young: Vec<u32>,
    /// Buffers of a completed cycle kept for the next one (its `born` and
    /// `written` lists).
    spare_list: Vec<u32>,
    /// A completed cycle's `looks` buffer, kept for the next one.
    spare_looks: Vec<u32>,
    /// The pool's end when the last cycle started (see `Cycle::pool_lo`).
    pool_seen: u32,
    spare_written: Vec<u32>,
    /// Objects marked as garbage since the last cycle (with `gen`): a minor
    /// cycle frees the old ones among them too.
    garbage: Mutex<Vec<AnyObj>>,
    /// The live heap the growth trigger measures from: the objects the
    /// last major cycle marked (alive at its start and reachable), at most
    /// the objects considered after it. Not the count after it: a cycle run
    /// in slices lets the program create objects while it runs, which
    /// survive it whatever they are, and a base that counted them would
    /// grow by them at every major cycle (the goal with it).
    major_survivors: usize,
    /// What the last major cycle run in slices tells of the next one's
    /// length and of the heap's growth meanwhile (see
    /// `Collector::growth_due`); `None` before one or after one run whole.
    major_pace: Option<plan::MajorPace>,
    /// Minor cycles completed since the last major one.
    minors_since_major: usize,
    /// The old generation after the last cycle: the objects considered
    /// after it, less those created while it ran (they survive it, young).
    old_survivors: usize,
    bits: Vec<u64>,
    queue: VecDeque<u64>,
    /// Objects traced in part: handle bits and next piece (see
    /// `mark::PIECES`). Empty between cycles.
    partial: Vec<(u64, usize)>,
    /// Objects changed during marking: through `get_mut`, or handed out as
    /// `&T` if their class is interior-mutable (the array's touched list,
    /// moved here at each slice).
    regrey: Vec<u32>,
    /// The re-scan list's length when the last marking slice ended: the
    /// entries above it are what the program changed since.
    regrey_kept: usize,
    /// Objects whose garbage mark was cleared during marking (from `&Heap`).
    greyed: Mutex<Vec<AnyObj>>,
    /// One bit per slot: the slots in the cycle's `written` list (all clear
    /// between cycles; set and cleared a slot at a time).
    written_seen: Vec<u64>,
    /// One bit per slot: objects created through `&mut Heap` while the
    /// cycle marked, traced at creation (see [`Collector::trace_at_birth`]),
    /// which the born scan passes over, clearing the bit (all clear between
    /// cycles).
    traced: Vec<u64>,
    /// Handles that objects traced at birth hold to objects not marked when
    /// they were created, waiting for marking's looks at what the program
    /// did (see [`Marker::take_shaded`]): by then most are marked, and
    /// dropping one costs a bit test, where queueing it at once would cost
    /// the drain a dead entry. Empty between cycles.
    shaded: VecDeque<u64>,
    /// Objects that held handles may name again, noted outside marking (with
    /// `gen`): a cleared garbage mark, a restore. The next minor cycle
    /// starts from them; a major one forgets them.
    revived: Mutex<Vec<AnyObj>>,
    /// Objects waiting for `is_ready_for_finish_destroy` (classes with hooks only).
    pending: Vec<Pending>,
    /// Deletions a purge slice gathers for the batch delete listeners (kept
    /// for its buffer).
    deleted: Vec<crate::listener::ObjectEvent>,
    /// When the collector was made: pending objects note their wait from it.
    epoch: std::time::Instant,
    /// The previous root-candidate list, kept for its buffer.
    roots_scratch: Vec<u32>,
    bytes_since_gc: AtomicUsize,
    /// Objects the collector considered after the last cycle.
    survivors: usize,
    totals: GcTotals,
    last: Option<CollectStats>,
    since_last: Duration,
    /// The last completed cycle's collector time per object alive at its
    /// start, in seconds: what pacing estimates a cycle's time from.
    secs_per_live: Option<f64>,
    pre: Vec<(HookId, PreHook)>,
    post: Vec<(HookId, PostHook)>,
    /// The parallel marker's worker threads, started on the first parallel
    /// drain and kept (rebuilt when the thread count changes).
    pool: Option<par::Pool>,
    /// Work units the last slice did (see [`Tick::work`]).
    slice_work: usize,
    /// Buffers a cycle's start replaced with bigger ones, given back a
    /// piece per slice.
    retired: retire::Retired,
    /// The work queue's high water in the cycle in flight, as its drains
    /// saw it (see `Marker::with_queue_peak`), or the room its start made
    /// if that is more.
    queue_peak: usize,
    /// The work queue's high water in the last cycle of each kind: a
    /// start keeps a queue that big (see `retire::oversized`).
    queue_used: retire::Used,
    /// The longest of the young list at the start and the born list at
    /// the end of the last cycle of each kind: a start keeps list buffers
    /// that big (the two lists and the allocator's record trade buffers).
    list_used: retire::Used,
}

impl Collector {
    pub(crate) fn new(config: GcConfig) -> Self {
        let gen = config.generational;
        Collector {
            config,
            enabled: true,
            cycle: None,
            marking: false,
            in_flight: false,
            gen,
            young: Vec::new(),
            spare_list: Vec::new(),
            spare_looks: Vec::new(),
            pool_seen: 0,
            spare_written: Vec::new(),
            garbage: Mutex::new(Vec::new()),
            major_survivors: 0,
            major_pace: None,
            minors_since_major: 0,
            old_survivors: 0,
            bits: Vec::new(),
            queue: VecDeque::new(),
            partial: Vec::new(),
            regrey: Vec::new(),
            regrey_kept: 0,
            greyed: Mutex::new(Vec::new()),
            revived: Mutex::new(Vec::new()),
            written_seen: Vec::new(),
            traced: Vec::new(),
            shaded: VecDeque::new(),
            pending: Vec::new(),
            deleted: Vec::new(),
            epoch: std::time::Instant::now(),
            roots_scratch: Vec::new(),
            bytes_since_gc: AtomicUsize::new(0),
            survivors: 0,
            totals: GcTotals::default(),
            last: None,
            since_last: Duration::ZERO,
            secs_per_live: None,
            pre: Vec::new(),
            post: Vec::new(),
            pool: None,
            slice_work: 0,
            retired: retire::Retired::default(),
            queue_peak: 0,
            queue_used: retire::Used::default(),
            list_used: retire::Used::default(),
        }
    }

    // ----- settings and books -------------------------------------------------

    pub(crate) fn config(&self) -> &GcConfig {
        &self.config
    }
    pub(crate) fn config_mut(&mut self) -> &mut GcConfig {
        &mut self.config
    }
    pub(crate) fn set_enabled(&mut self, on: bool) {
        self.enabled = on;
    }
    pub(crate) fn is_enabled(&self) -> bool {
        self.enabled
    }
    pub(crate) fn totals(&self) -> &GcTotals {
        &self.totals
    }
    pub(crate) fn last(&self) -> Option<&CollectStats> {
        self.last.as_ref()
    }
    /// The young list's buffer (a unit test's look at a cycle's start).
    #[cfg(test)]
    pub(crate) fn young_capacity(&self) -> usize {
        self.young.capacity()
    }
    /// Bytes of replaced buffers not given back yet.
    #[cfg(test)]
    pub(crate) fn retired_bytes(&self) -> usize {
        self.retired.bytes()
    }
    /// The work queue's room.
    #[cfg(test)]
    pub(crate) fn queue_capacity(&self) -> usize {
        self.queue.capacity()
    }
    /// The born list's buffer kept between cycles.
    #[cfg(test)]
    pub(crate) fn spare_capacity(&self) -> usize {
        self.spare_list.capacity()
    }
    /// Bytes of buffers ever retired to go back in pieces (buffers of
    /// more than a piece), given back or not.
    #[cfg(test)]
    pub(crate) fn retired_total(&self) -> usize {
        self.retired.total()
    }
    /// Retired buffers not wholly given back yet.
    #[cfg(test)]
    pub(crate) fn retired_len(&self) -> usize {
        self.retired.len()
    }
    /// Room in the born list of the cycle in flight (0 without one).
    #[cfg(test)]
    pub(crate) fn born_capacity(&self) -> usize {
        self.cycle.as_ref().map_or(0, |c| c.born.capacity())
    }

    pub(crate) fn pending_len(&self) -> usize {
        self.pending.len()
    }
    /// Whether a cycle is marking: objects created through `&mut Heap` are
    /// then traced at creation ([`trace_at_birth`](Self::trace_at_birth)).
    #[inline(always)]
    pub(crate) fn is_marking(&self) -> bool {
        self.marking
    }
    pub(crate) fn phase(&self) -> Phase {
        self.cycle.as_ref().map_or(Phase::Idle, |c| c.step.phase())
    }
    pub(crate) fn on_pre(&mut self, id: HookId, f: PreHook) {
        self.pre.push((id, f));
    }
    pub(crate) fn on_post(&mut self, id: HookId, f: PostHook) {
        self.post.push((id, f));
    }
    pub(crate) fn remove_callback(&mut self, id: HookId) -> bool {
        let before = self.pre.len() + self.post.len();
        self.pre.retain(|(i, _)| *i != id);
        self.post.retain(|(i, _)| *i != id);
        before != self.pre.len() + self.post.len()
    }

    /// Bytes the collector holds: bitmap, work lists, pending objects.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.bits.capacity() * 8
            + self.queue.capacity() * 8
            + self.retired.bytes()
            + self.partial.capacity() * 16
            + self.regrey.capacity() * 4
            + (self.spare_list.capacity() + self.spare_written.capacity()) * 4
            + self.young.capacity() * 4
            + self.spare_looks.capacity() * 4
            + self.pending.capacity() * std::mem::size_of::<Pending>()
            + self.roots_scratch.capacity() * 4
            + self.traced.capacity() * 8
            + self.shaded.capacity() * 8
            + self.cycle.as_ref().map_or(0, |c| {
                c.born.bytes()
                    + c.looks.capacity() * 4
                    + c.waiting.capacity() * std::mem::size_of::<Pending>()
            })
    }

    // ----- driving ----------------------------------------------------------------

    /// Runs a whole collection of `kind` now: finishes a cycle in flight
    /// first.
    pub(crate) fn collect(
        &mut self,
        mut stage: Stage<'_>,
        trigger: Trigger,
        kind: CycleKind,
    ) -> CollectStats {
        let _span =
            tracing::info_span!("gc.collect", heap = stage.array.tag(), ?trigger, ?kind).entered();
        if self.cycle.is_some() {
            self.run(&mut stage, Budget::unlimited());
        }
        self.start(&mut stage, trigger, kind, false);
        self.run(&mut stage, Budget::unlimited())
            .expect("an unbudgeted slice finishes its cycle")
    }

    /// One frame's worth of collection; see [`Heap::tick`](crate::Heap::tick).
    pub(crate) fn tick(&mut self, stage: Stage<'_>, dt: Duration) -> Tick {
        let t0 = Instant::now();
        self.since_last = self.since_last.saturating_add(dt);
        // A budget too large to add to the clock has no deadline.
        let budget = Budget::new(
            self.config.incremental.and_then(|b| t0.checked_add(b)),
            usize::MAX,
        );
        let trigger = self.due_trigger(stage.array);
        self.slice(stage, t0, budget, trigger)
    }

    /// One slice of at most `work` units of the cycle in flight, starting
    /// one if none is; see [`Heap::step`](crate::Heap::step).
    pub(crate) fn step(&mut self, stage: Stage<'_>, work: usize, kind: CycleKind) -> Tick {
        let trigger = self.enabled.then_some((Trigger::Explicit, kind));
        self.slice(stage, Instant::now(), Budget::new(None, work), trigger)
    }

    fn slice(
        &mut self,
        mut stage: Stage<'_>,
        t0: Instant,
        budget: Budget,
        trigger: Option<(Trigger, CycleKind)>,
    ) -> Tick {
        let mut tick = Tick::default();
        let freed_before = self.totals.total_freed;
        if self.cycle.is_none() {
            if let Some((trigger, kind)) = trigger {
                self.start(&mut stage, trigger, kind, !budget.is_unlimited());
                tick.started = Some(trigger);
            }
        }
        if let Some(c) = &self.cycle {
            tick.began_in = c.step.phase();
            tick.completed = self.run(&mut stage, budget);
            tick.work = self.slice_work;
            tick.ended_in = match tick.completed {
                Some(_) => Phase::Purge,
                None => self.phase(),
            };
        } else if !self.pending.is_empty() {
            tick.began_in = Phase::Purge;
            tick.ended_in = Phase::Purge;
            stage.array.sync();
            let mut caught: Caught = None;
            let freed = self.finish_pending(&mut stage, &mut caught);
            self.totals.total_freed += freed.objects as u64;
            self.totals.total_freed_bytes += freed.bytes as u64;
            tick.work = freed.objects;
            tick.freed = freed.objects;
            tick.time = t0.elapsed();
            resume(caught);
        }
        if self.cycle.is_none() && tick.completed.is_none() {
            // No cycle ran in this tick: more of the retired buffers go
            // back than a slice's piece.
            for _ in 0..retire::IDLE_PIECES {
                self.retired.give_back_piece();
            }
        }
        tick.freed = (self.totals.total_freed - freed_before) as usize;
        tick.phase = self.phase();
        tick.time = t0.elapsed();
        tick
    }

    /// Starts a cycle: callbacks, the root list, the bitmap. A minor cycle
    /// asked for while the remembered set was not kept runs as a major one.
    /// Starts a cycle; `sliced`: it runs in budgeted slices (the work
    /// queue's room is made for it).
    fn start(&mut self, stage: &mut Stage<'_>, trigger: Trigger, kind: CycleKind, sliced: bool) {
        let kind = if self.gen { kind } else { CycleKind::Major };
        let pre = PreCollect {
            collection: self.totals.collections + 1,
            objects: stage.array.len(),
        };
        for (_, cb) in &mut self.pre {
            cb(&pre);
        }
        let array = &mut *stage.array;
        if kind == CycleKind::Major {
            // A major cycle keeps no young list, so the slots handed out
            // since the last sync are not recorded: `sync` would write
            // each one's index into the list this start then drops (every
            // object of a heap built since the last cycle: 1.5 ms at a
            // million, in the cycle's first slice). What was recorded
            // before is moved out whole (a buffer swap), and dropped below.
            array.take_born(&mut self.young);
            array.stop_recording();
        }
        array.sync();
        // The young objects: slots handed out since the last cycle started.
        array.take_born(&mut self.young);
        let young_at_start = self.young.len();
        array.release_parked();
        array.start_recording();
        let hw = array.high_water();
        let pool_end = array.pool_end();
        let pool_lo = std::mem::replace(&mut self.pool_seen, pool_end);
        // The young objects a minor cycle looks at, recorded as the facts
        // became known (joining a cluster, being filed under an outer); the
        // entries recorded from now on are for the next cycle.
        let mut looks = std::mem::take(&mut self.spare_looks);
        looks.clear();
        if kind == CycleKind::Minor && self.config.outer_keeps_inners {
            std::mem::swap(&mut looks, &mut stage.inners.filed);
        }
        stage.inners.filed.clear();
        if kind == CycleKind::Minor {
            looks.extend_from_slice(&stage.clusters.joined);
        }
        stage.clusters.joined.clear();
        let array = &mut *stage.array;
        let mut list = Vec::new();
        let mut remembered = 0;
        match kind {
            CycleKind::Major => {
                // Every object is marked afresh: no old objects, no
                // remembered set. The set's entries keep their flags until
                // the first marking slices clear them, in budgeted pieces,
                // before anything is scanned (see `Cycle::forgotten`).
                self.bits.clear();
                array.take_touched(&mut self.regrey);
                self.young.clear();
                self.garbage.get_mut().clear();
                self.revived.get_mut().clear();
            }
            CycleKind::Minor => {
                // Old objects stay marked (sticky marks): marking never
                // enters them, and the sweep visits the young ones only.
                list = std::mem::take(&mut self.young);
                // Old objects marked as garbage lose their mark, so that
                // this cycle frees them (and what only they kept alive).
                for h in self.garbage.get_mut().drain(..) {
                    let i = h.index();
                    if array.lookup(h, 0).is_ok() && array.at(i).flags() & flags::GARBAGE != 0 {
                        if let Some(w) = self.bits.get_mut((i >> 6) as usize) {
                            *w &= !(1 << (i & 63));
                        }
                        list.push(i);
                    }
                }
                array.take_touched(&mut self.regrey);
                remembered = self.regrey.len();
            }
        }
        self.bits.resize((hw as usize).div_ceil(64), 0);
        self.queue.clear();
        // The work queue's room for the cycle, made while it is empty: a
        // queue that grows mid-slice copies itself into a buffer twice its
        // size and faults that buffer in, work proportional to the heap in
        // one slice (3-7 ms at a million objects on a 1 ms budget). Made
        // here it is an allocation whose pages are touched as entries
        // arrive. Twice the objects the cycle may mark, since an object
        // can be queued once per reference to it before it is marked; a
        // cycle that queues more still grows the queue in a slice. A cycle
        // run whole has no slice to keep short: its queue grows as before.
        let room = 2 * match kind {
            CycleKind::Major => array.len(),
            CycleKind::Minor => list.len() + remembered,
        };
        // The other way round, a room made for a heap that was many times
        // this one (a burst of objects created during a cycle, freed by
        // the next) is given back: kept, it held the burst's size through
        // every later cycle. Measured against the room a major cycle's
        // start makes, whatever this cycle's kind, so that a minor cycle
        // (whose own room is its young objects') does not replace the
        // buffer the next major one needs, or against what the last cycle
        // of either kind used if that was more: a queue that cycles fill
        // past the room (objects holding many handles) or lists that they
        // do (many objects created during major cycles, freed by the minor
        // ones between) were retired at every start and grown again inside
        // the cycle's slices (see `retire::oversized`).
        let major_room = 2 * array.len();
        let queue_room = major_room.max(self.queue_used.most());
        let list_room = major_room.max(self.list_used.most()).max(young_at_start);
        let shrink_queue = retire::oversized(self.queue.capacity(), 8, queue_room);
        if (sliced && self.queue.capacity() < room) || shrink_queue {
            // The old buffer is given back in pieces, in later slices
            // (see `retire`): dropped here, its touched pages went back
            // to the kernel in this slice.
            self.retired
                .retire(Vec::from(std::mem::take(&mut self.queue)));
            if sliced {
                self.queue = VecDeque::with_capacity(retire::HEADROOM * room);
            }
        }
        // The born list's room, for the same reason: the objects created
        // during a sliced cycle join it at every slice, and a list that
        // outgrows its buffer copies all it holds into one twice its size
        // inside that slice (in the demo at a million objects, 2-15 ms
        // late in a cycle, in the purge, when the list held millions; the
        // buffer started empty each cycle). Room for as many as the queue
        // has (twice the objects live, or young and remembered); a cycle
        // that creates more than half of that grows the list a piece per
        // slice (`retire::GrowingList`). The buffer is kept from cycle to
        // cycle, so the room is made again only as the heap grows.
        let mut born = std::mem::take(&mut self.spare_list);
        born.clear();
        if kind == CycleKind::Major && self.young.capacity() > born.capacity() {
            // Cleared above: the young list's buffer serves.
            std::mem::swap(&mut born, &mut self.young);
        }
        // Or the buffer the young list's swap left in the allocator's
        // record, empty (a minor start): kept there, it was the record's
        // until the cycle's end handed the record this born list, then
        // retired, while this start made a new born list.
        array.trade_born(&mut born);
        if (sliced && born.capacity() < room) || retire::oversized(born.capacity(), 4, list_room) {
            // As the queue's old buffer, the old list's goes in pieces.
            self.retired.retire(std::mem::take(&mut born));
            if sliced {
                born = Vec::with_capacity(retire::HEADROOM * room);
            }
        }
        // The smaller of the two a major start swapped, still a burst's.
        self.retired.retire_if_oversized(&mut self.young, list_room);
        self.shaded.clear();
        self.partial.clear();
        self.regrey_kept = 0;
        // The room a start of this kind makes counts as used: a minor
        // cycle's room for many young objects (garbage created during a
        // major cycle) was retired by the next major start and made again
        // by the next minor one.
        self.queue_peak = room;
        let mut cycle = Box::new(Cycle {
            step: Step::Pool(0),
            stats: CollectStats {
                trigger,
                kind,
                young: list.len(),
                remembered,
                mark_threads: 1,
                drop_threads: 1,
                ..CollectStats::default()
            },
            hw,
            pool_end,
            live_at_start: array.len(),
            threads: if array.len() >= self.config.parallel_threshold {
                self.config.mark_threads()
            } else {
                1
            },
            roots_seen: 0,
            born: retire::GrowingList::new(born),
            young_at_start,
            born_seen: 0,
            waiting: Vec::new(),
            ready: Vec::new(),
            forced: false,
            born_paced: 0,
            owed: Duration::ZERO,
            outer_keeps_inners: self.config.outer_keeps_inners,
            kind,
            scanned_born: 0,
            written: std::mem::take(&mut self.spare_written),
            written_done: 0,
            list,
            remembered: std::mem::take(&mut self.regrey),
            forgotten: 0,
            old_clusters: HashMap::default(),
            pool_lo,
            looks,
            finishing: false,
            backlog_share: 0,
            cut_slices: 0,
        });

        // Root candidates: drop stale and duplicate entries, keep the rest.
        // No user code runs here, so the kept list is whole before any can panic.
        let candidates = std::mem::take(array.roots_mut());
        for &i in &candidates {
            array.at(i).clear(flags::LISTED);
        }
        let mut kept = std::mem::take(&mut self.roots_scratch);
        kept.clear();
        // Roots are only visited here, not scanned: no index needed.
        let mut marker = Marker::new(array.chunks(), &mut self.bits, &mut self.queue, hw, None);
        for &i in &candidates {
            let item = array.at(i);
            if item.object().is_none() || !item.is_root() || !item.list() {
                continue;
            }
            kept.push(i);
            cycle.stats.roots += 1;
            if let Some(s) = NonZeroU32::new(item.serial()) {
                marker.visit(AnyObj::new(i, s));
            }
        }
        // Objects that held handles may name again (cleared garbage marks,
        // restores): live ones are marked and traced like the remembered set.
        for h in self.revived.get_mut().drain(..) {
            marker.visit(h);
        }
        cycle.roots_seen = kept.len();
        *array.roots_mut() = kept;
        // Its entries are not needed again (the next start clears it).
        self.roots_scratch = candidates;
        self.roots_scratch.clear();
        // The root list of a heap many times this one (roots added and
        // removed by the hundred thousand): the two buffers trade places at
        // every start, so each is given back (in pieces) within two cycles
        // instead of kept for good.
        self.retired
            .retire_if_oversized(&mut self.roots_scratch, 2 * array.len());
        self.cycle = Some(cycle);
        self.in_flight = true;
        self.marking = true;
        array.watch(true);
        tracing::debug!(heap = array.tag(), ?trigger, ?kind, "cycle started");
    }

    /// Runs the cycle in flight until it completes (returning its stats) or
    /// the budget is spent.
    fn run(&mut self, stage: &mut Stage<'_>, budget: Budget) -> Option<CollectStats> {
        let t0 = Instant::now();
        let mut cycle = self.cycle.take().expect("a cycle in flight");
        let span = slice_span(stage.array.tag(), cycle.step.phase());
        let (work0, freed0) = (work_done(&cycle.stats), cycle.stats.freed);
        // Before a forced cycle's budget is lifted: its slice is still one
        // of a sliced cycle.
        let unbudgeted = budget.is_unlimited();
        let mut budget = if cycle.forced {
            Budget::unlimited()
        } else {
            budget
        };
        // A piece of the buffers a cycle's start replaced (see `retire`);
        // all of them in an unbudgeted run (a whole collection, which has
        // no slice to keep short: a piece per collection would keep them
        // for hundreds of collections).
        if unbudgeted {
            self.retired.give_back_all();
        } else {
            self.retired.give_back_piece();
        }
        // Fold in the slots handed out since the previous slice before
        // anything is freed (freeing writes the allocator's cursor).
        stage.array.sync();
        stage.array.take_born_into(cycle.born.appendable());
        // A piece of the born list's growth, if it is half full (see
        // `GrowingList`): never a copy of the whole list in one slice.
        cycle.born.advance(&mut self.retired);
        self.pace(&mut cycle, &mut budget, t0);
        let mut caught: Caught = None;
        let mut done = false;
        if matches!(cycle.step, Step::Pool(_) | Step::Remembered(_) | Step::Mark) {
            let ts = Instant::now();
            let _mark = tracing::info_span!("gc.mark").entered();
            let marked = catch_unwind(AssertUnwindSafe(|| {
                self.mark_slice(stage, &mut cycle, &mut budget)
            }));
            cycle.stats.mark += ts.elapsed();
            match marked {
                Ok(true) => {}
                Ok(false) => {}
                Err(p) => {
                    self.abandon(stage, cycle);
                    std::panic::resume_unwind(p);
                }
            }
        }
        if !matches!(cycle.step, Step::Pool(_) | Step::Remembered(_) | Step::Mark) {
            done = self.purge_slice(stage, &mut cycle, &mut budget, &mut caught);
        }
        let slice = t0.elapsed();
        self.slice_work = budget.used();
        cycle.owed = cycle.owed.saturating_sub(slice);
        cycle.stats.slices += 1;
        cycle.stats.max_slice = cycle.stats.max_slice.max(slice);
        cycle.stats.total += slice;
        record_slice(&span, &cycle, work0, freed0, done);
        let out = if done {
            Some(self.complete(stage, cycle, &mut caught))
        } else {
            if let Some(limit) = self.config.incremental_debt {
                stage.array.sync();
                stage.array.take_born_into(cycle.born.appendable());
                let born = cycle.born.len();
                if born as f64 > limit * cycle.live_at_start.max(1) as f64 {
                    cycle.forced = true;
                }
            }
            self.cycle = Some(cycle);
            None
        };
        resume(caught);
        out
    }

    /// A panic escaped user code while marking: forget the cycle, free
    /// nothing, lose no root.
    fn abandon(&mut self, stage: &mut Stage<'_>, mut cycle: Box<Cycle>) {
        let array = &mut *stage.array;
        array.sync();
        array.take_born_into(cycle.born.appendable());
        array.stop_recording();
        for &i in cycle.born.iter() {
            array.at(i).clear(flags::BORN);
        }
        for &i in &cycle.written {
            self.written_seen[(i >> 6) as usize] &= !(1 << (i & 63));
        }
        // Objects traced at birth that the born scan did not reach.
        for &i in &cycle.born[cycle.born_seen.min(cycle.born.len())..] {
            if let Some(w) = self.traced.get_mut((i >> 6) as usize) {
                *w &= !(1 << (i & 63));
            }
        }
        array.watch(false);
        array.take_touched(&mut self.regrey);
        for i in std::mem::take(&mut self.regrey) {
            array.at(i).clear(flags::REGREY);
        }
        for &i in &cycle.remembered {
            array.at(i).clear(flags::REGREY);
        }
        self.greyed.lock().clear();
        self.queue.clear();
        self.shaded.clear();
        self.partial.clear();
        self.marking = false;
        self.in_flight = false;
        // The remembered set and the old marks are no longer whole: the
        // next cycle is a major one.
        self.gen = false;
        self.young.clear();
        array.watch(false);
    }

    /// Closes a cycle: books, callbacks.
    fn complete(
        &mut self,
        stage: &mut Stage<'_>,
        mut cycle: Box<Cycle>,
        caught: &mut Caught,
    ) -> CollectStats {
        let array = &mut *stage.array;
        array.sync();
        array.take_born_into(cycle.born.appendable());
        // What `Settle` did not reach (objects created since its last slice).
        if let Step::Settle(k) = cycle.step {
            for &i in &cycle.born[k.min(cycle.born.len())..] {
                // Created since marking ended: unmarked, young.
                sweep::settle_born(&mut self.revived, array.at(i), i);
            }
        }
        cycle.stats.born = cycle.born.len();
        // What the cycle used of its rooms, for the next starts (see
        // `retire::Used`).
        self.queue_used.note(cycle.kind, self.queue_peak);
        self.list_used
            .note(cycle.kind, cycle.young_at_start.max(cycle.stats.born));
        // The remembered set's buffer goes back to the re-scan list, which
        // the next cycle fills: allocating it afresh would make glibc
        // consolidate the chunks the purge just freed, inside that cycle's
        // start (11 ms at a million objects).
        if self.regrey.is_empty() && self.regrey.capacity() < cycle.remembered.capacity() {
            cycle.remembered.clear();
            std::mem::swap(&mut self.regrey, &mut cycle.remembered);
        }
        // Sized by a heap many times this one (a big heap's remembered
        // set): given back in pieces rather than kept for good.
        self.retired
            .retire_if_oversized(&mut self.regrey, 2 * array.len());
        std::mem::swap(&mut array.condemned.marks, &mut self.bits);
        array.condemned.active = false;
        self.in_flight = false;
        self.pending.append(&mut cycle.waiting);
        // Generational: the marks stay as the old generation, the allocator
        // keeps recording (objects created during the cycle are young for
        // the next one), and both barriers keep the remembered set.
        self.gen = self.config.generational;
        if self.gen {
            // Objects created during the cycle stay young (no mark bit: the
            // settle step cleared the bits marking gave those below the high
            // water, restored ones included), so a short-lived one goes with
            // the next minor cycle instead of waiting for a major one. The old objects that may reference
            // them are those changed since the cycle started: those changed
            // while it marked (`written`) join the remembered set here, and
            // those changed since marking ended are in it already.
            // The bitmap is not grown to the high water here: the slots
            // above its end are young (every reader between cycles treats a
            // missing word as unmarked), and the next cycle's start grows it
            // once. (A growth here reallocated it in this step: 13.9 ms once
            // at a million objects.)
            // (The settle step did most of them, under its budget.)
            for &i in &cycle.written[cycle.written_done..] {
                let old = self
                    .bits
                    .get((i >> 6) as usize)
                    .is_some_and(|w| w & (1 << (i & 63)) != 0);
                sweep::remember_written(
                    &mut self.written_seen,
                    &mut self.regrey,
                    array.at(i),
                    i,
                    old,
                );
            }
            // The objects created during the cycle are the front of the
            // next young list: handed to the allocator's record as they
            // are, so neither this step nor the next cycle's start copies
            // them (a million objects at a time in the demo).
            self.young.clear();
            let spare = array.prepend_born(cycle.born.take(&mut self.retired));
            // The recorded list's buffer (objects created since the last
            // slice, or a burst's room): in pieces, as the others.
            self.retired.retire(spare);
        } else {
            for &i in &cycle.written {
                self.written_seen[(i >> 6) as usize] &= !(1 << (i & 63));
            }
            array.stop_recording();
            self.young.clear();
            self.garbage.get_mut().clear();
            array.take_touched(&mut self.regrey);
            for i in self.regrey.drain(..) {
                array.at(i).clear(flags::REGREY);
            }
        }
        array.watch(self.gen);

        // Big buffers are kept for the next cycle: freeing them here would
        // make the allocator consolidate the chunks the purge just freed,
        // inside this step (several milliseconds at a million objects).
        let mut list = std::mem::take(&mut cycle.list);
        if cycle.born.capacity() > list.capacity() {
            // Not generational: the born list's buffer (and its room) is
            // the one to keep.
            list = cycle.born.take(&mut self.retired);
        }
        list.clear();
        self.spare_list = list;
        let mut looks = std::mem::take(&mut cycle.looks);
        looks.clear();
        self.spare_looks = looks;
        let mut written = std::mem::take(&mut cycle.written);
        written.clear();
        self.spare_written = written;
        // Sized by a heap many times this one (every old object written
        // while a big heap's cycle marked): kept, it held that size through
        // every later cycle. Given back in pieces, as the buffers a start
        // replaces (see `retire::oversized`).
        self.retired
            .retire_if_oversized(&mut self.spare_written, 2 * array.len());
        if self.shaded.is_empty() && retire::oversized(self.shaded.capacity(), 8, 2 * array.len()) {
            // Emptied by the end of marking; sized by a burst of objects
            // traced at birth (each handle they held to an unmarked
            // object), not by this heap: given back in pieces, as the
            // others.
            self.retired
                .retire(Vec::from(std::mem::take(&mut self.shaded)));
        }
        let mut stats = cycle.stats;
        stats.pending = self.pending.len();
        stats.live = array.len();
        stats.forced = cycle.forced;
        self.survivors = array.len().saturating_sub(array.pool_end() as usize);
        self.old_survivors = self.survivors.saturating_sub(stats.born);
        self.bytes_since_gc.store(0, Ordering::Relaxed);
        let t = &mut self.totals;
        match stats.kind {
            CycleKind::Major => {
                // The interval counts from the last major cycle: minor ones
                // in between do not put it off.
                self.since_last = Duration::ZERO;
                self.major_survivors = stats.marked.min(self.survivors);
                self.major_pace = plan::MajorPace::from_stats(&stats);
                self.minors_since_major = 0;
                self.secs_per_live =
                    Some(stats.total.as_secs_f64() / cycle.live_at_start.max(1) as f64);
                t.major_collections += 1;
            }
            CycleKind::Minor => {
                stats.promoted = stats.marked;
                self.minors_since_major += 1;
                t.minor_collections += 1;
            }
        }
        t.collections += 1;
        t.last_freed = stats.freed;
        t.total_freed += stats.freed as u64;
        t.total_freed_bytes += stats.freed_bytes as u64;
        t.total_time += stats.total;
        t.max_pause = t.max_pause.max(stats.max_slice);
        self.last = Some(stats.clone());
        tracing::debug!(
            marked = stats.marked,
            freed = stats.freed,
            slices = stats.slices,
            total_us = stats.total.as_micros() as u64,
            "cycle done"
        );
        // Last, so that a panicking callback finds the books already kept.
        for (_, cb) in &mut self.post {
            guard(caught, || cb(&stats));
        }
        stats
    }
}

/// The span of one slice (`gc.slice`), entered; `work`, `freed`, `completed`
/// and `forced` are recorded by [`record_slice`] when the slice ends.
fn slice_span(heap: u32, phase: Phase) -> tracing::span::EnteredSpan {
    let phase = match phase {
        Phase::Mark => "mark",
        _ => "purge",
    };
    let empty = tracing::field::Empty;
    tracing::info_span!(
        "gc.slice",
        heap,
        phase,
        work = empty,
        freed = empty,
        completed = empty,
        forced = empty
    )
    .entered()
}

/// Objects processed so far in a cycle: marked, flagged unreachable, freed.
fn work_done(s: &CollectStats) -> usize {
    s.marked + s.unreachable + s.freed
}

/// Records on a slice's span what it did (see [`slice_span`]).
fn record_slice(span: &tracing::Span, cycle: &Cycle, work0: usize, freed0: usize, done: bool) {
    if span.is_disabled() {
        return;
    }
    span.record("work", work_done(&cycle.stats).saturating_sub(work0));
    span.record("freed", cycle.stats.freed.saturating_sub(freed0));
    span.record("completed", done);
    span.record("forced", cycle.forced);
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

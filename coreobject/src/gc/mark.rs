//! Marking: an explicit work queue, never recursion.
//!
//! Marking a large graph is bound by cache misses, not by instructions: each
//! object costs a miss on its table item, one on its allocation and one on
//! any buffer its references live in (a `Vec`'s, say). The marker therefore
//! runs every object through a three-stage pipeline, so that each miss is
//! requested long before it is needed and many are in flight at once:
//!
//! 1. **queue** — a visited handle whose slot is not yet marked joins a FIFO
//!    queue (breadth-first order). Its table item is prefetched when it is a
//!    few entries from the front, so that it has arrived when its turn comes.
//! 2. **ring A** — popping validates the handle against the item (serial
//!    matches, not garbage, not in the pool, not yet marked), sets its bit
//!    in the side bitmap and prefetches the object's allocation.
//! 3. **ring B** — on entering this ring the object's
//!    [`Trace::prefetch`](crate::Trace::prefetch) asks for the buffers its
//!    `trace` will read; on leaving it, the object is scanned, and its
//!    references join the queue.
//!
//! With [`GcConfig::outer_keeps_inners`](crate::GcConfig::outer_keeps_inners),
//! scanning an object also visits its inners, found in the outer → inners
//! index by the object's handle. The pipeline is then built with rings that
//! carry that handle next to the pointer (a key that is 0 for objects with no
//! inners); with the rule off, it is built with today's rings of bare
//! pointers, and the default path pays nothing per object for the option.
//!
//! A 10-million-object chain needs 10 million queue *entries* on the heap,
//! and no call-stack depth at all. The same handle may be queued more than
//! once (it is marked only when popped, after validation); the bitmap test
//! at pop makes the repeats cheap.

use std::collections::VecDeque;
use std::ptr::NonNull;

use super::budget::Budget;
use crate::array::{flags, Chunks, Item};
use crate::cluster::{Clusters, MarkWords};
use crate::handle::AnyObj;
use crate::inners::Inners;
use crate::object::Header;
use crate::trace::{prefetch_line, Visitor};

/// Objects in flight in each ring: enough to cover a memory miss with the
/// work of the objects ahead of them.
pub(super) const RING: usize = 8;

/// How far behind the queue's front a table item is prefetched. Prefetching
/// at push time would be too early: in breadth-first order the queue can
/// hold a whole frontier, and the line would be evicted before its turn.
const LOOKAHEAD: usize = 32;

/// Dead queue entries (that would mark nothing) dropped per work unit by
/// [`Marker::skip_dead_front`]: each costs a load of its table item, a
/// fraction of a scan.
const SKIPS_PER_UNIT: usize = 8;

/// The pieces (see [`Trace::trace_units`](crate::Trace::trace_units)) of
/// an object traced at once: an object of more is traced this many at a
/// time, its cursor kept on the marker's stack of partly traced objects,
/// so one object of a million handles is many units of work, spread over
/// as many slices as the budget needs. Tens of microseconds of tracing:
/// small against a slice, and large enough that objects of a few thousand
/// handles are traced whole, in the order they queue their references (a
/// first version split at 256 pieces, and marking a world of 1,000 objects
/// of 1,079 handles each took about 1.5x as long, from the changed order:
/// fastest of 12 stop-the-world cycles, 65 ms against 44 ms).
pub(crate) const PIECES: usize = 4096;

/// Objects of at most this many pieces are traced whole (charged a unit
/// per [`PIECES_PER_UNIT`] pieces once traced, see
/// [`Marker::traced_whole`]), as before pieces existed (a few hundred microseconds at most):
/// splitting the 5,000-18,000-handle levels of the demo, which are written
/// every frame and so re-scanned every frame, made its 1M-object run worse
/// (peak live 11.4M against 9.2M, interleaved runs; cause not found), so
/// only objects beyond this are split, in parts of [`PIECES`].
/// (Under miri, whose tests use smaller heaps, [`PIECES`], so that they
/// still reach the split path.)
pub(crate) const SPLIT_ABOVE: usize = if cfg!(miri) { PIECES } else { 16 * PIECES };

/// The queue's length below which an object traced in part is continued
/// before the queue is popped.
const PARTIAL_BELOW: usize = 16 * PIECES;

/// Pieces per unit of work charged to the budget: tracing a piece (an
/// element of a `Vec`, a handle field) costs about a visit, a fraction of
/// an object's scan.
pub(crate) const PIECES_PER_UNIT: usize = 32;

/// What the rings carry for each object to scan.
pub(super) trait Carry {
    type Slot: Copy;
    const EMPTY: Self::Slot;
    /// The slot of the object at `p`, whose handle is `bits` and item flags `f`.
    fn pack(p: NonNull<Header>, bits: u64, f: u32) -> Self::Slot;
    /// The object's header and its inner key (see [`Marker::scan`]).
    fn unpack(s: Self::Slot) -> (NonNull<Header>, u64);
    /// The object's handle bits (to put it back on the queue unscanned).
    fn bits(s: Self::Slot) -> u64;
}

/// The header and the handle: outers keep no inners (the default).
pub(super) struct Bare;

impl Carry for Bare {
    type Slot = (NonNull<Header>, u64);
    const EMPTY: Self::Slot = (NonNull::dangling(), 0);
    #[inline(always)]
    fn pack(p: NonNull<Header>, bits: u64, _: u32) -> Self::Slot {
        (p, bits)
    }
    #[inline(always)]
    fn unpack(s: Self::Slot) -> (NonNull<Header>, u64) {
        (s.0, 0)
    }
    #[inline(always)]
    fn bits(s: Self::Slot) -> u64 {
        s.1
    }
}

/// The header, the handle, and whether it is an outer with inners (when
/// outers keep their inners alive).
pub(super) struct Keyed;

impl Carry for Keyed {
    type Slot = (NonNull<Header>, u64, bool);
    const EMPTY: Self::Slot = (NonNull::dangling(), 0, false);
    #[inline(always)]
    fn pack(p: NonNull<Header>, bits: u64, f: u32) -> Self::Slot {
        (p, bits, f & flags::OUTER != 0)
    }
    #[inline(always)]
    fn unpack(s: Self::Slot) -> (NonNull<Header>, u64) {
        (s.0, if s.2 { s.1 } else { 0 })
    }
    #[inline(always)]
    fn bits(s: Self::Slot) -> u64 {
        s.1
    }
}

pub(super) struct Ring<C: Carry> {
    slots: [C::Slot; RING],
    head: usize,
    len: usize,
}

impl<C: Carry> Ring<C> {
    pub(super) fn new() -> Self {
        Ring {
            slots: [C::EMPTY; RING],
            head: 0,
            len: 0,
        }
    }

    #[inline(always)]
    pub(super) fn is_full(&self) -> bool {
        self.len == RING
    }

    #[inline(always)]
    pub(super) fn push(&mut self, p: C::Slot) {
        debug_assert!(!self.is_full());
        self.slots[(self.head + self.len) % RING] = p;
        self.len += 1;
    }

    #[inline(always)]
    pub(super) fn pop(&mut self) -> Option<C::Slot> {
        if self.len == 0 {
            return None;
        }
        let p = self.slots[self.head];
        self.head = (self.head + 1) % RING;
        self.len -= 1;
        Some(p)
    }
}

/// The admission test, the same for every marker: a queued handle greys
/// its object (returned with its item flags) only if the slot still holds
/// the object it names, which is neither garbage, nor being destroyed, nor
/// in the pool (pool objects are scanned by the cycle's pool step, never
/// greyed; that step also sets their mark bits, so that handles to them
/// seldom reach this test). The mark bit is the caller's to test and set.
#[inline(always)]
pub(super) fn admit(item: &Item, serial: u32) -> Option<(NonNull<Header>, u32)> {
    let f = item.flags();
    if item.serial() != serial || f & (flags::DEAD | flags::DISREGARD) != 0 {
        return None;
    }
    Some((item.object()?, f))
}

/// What greying a clustered object asks of a marker, the same for every
/// marker: the whole cluster is kept.
pub(super) enum ClusterStep<'c> {
    /// No member changed since the cluster's references out were gathered
    /// (and outers do not keep inners): set every member's mark bit by
    /// OR-ing `words` into the bitmap (below the cycle's high water), visit
    /// `external`, and scan not even the object popped. Every member is
    /// alive: members die only with their whole cluster, and a garbage mark
    /// dissolves it.
    Whole {
        words: &'c MarkWords,
        external: &'c [AnyObj],
    },
    /// Otherwise: visit these, to be traced like any object. The root
    /// visits every member; any other member visits only the root. So each
    /// cycle lists the members once, when the root is greyed, and a cluster
    /// of n members costs O(n), not n visits of n members each.
    Trace(&'c [AnyObj]),
}

/// The [`ClusterStep`] for the object in slot `i`, whose item's cluster
/// field is `root` (0: in no cluster, `None`).
#[inline(always)]
pub(super) fn cluster_step<'c>(
    clusters: Option<&'c Clusters>,
    i: u32,
    root: u32,
    inners: bool,
) -> Option<ClusterStep<'c>> {
    let c = clusters.filter(|_| root != 0)?;
    Some(match c.whole_of(root).filter(|_| !inners) {
        Some((words, external)) => ClusterStep::Whole { words, external },
        None => {
            // The members, the root first.
            let members = c.members_of(root);
            let n = if i.wrapping_add(1) == root {
                members.len()
            } else {
                members.len().min(1)
            };
            ClusterStep::Trace(&members[..n])
        }
    })
}

/// The bits of bitmap word `w` that name slots below `high_water`.
#[inline(always)]
pub(super) fn below(w: u32, high_water: u32) -> u64 {
    let first = u64::from(w) << 6;
    let hw = u64::from(high_water);
    if first + 64 <= hw {
        !0
    } else if first >= hw {
        0
    } else {
        (1u64 << (hw - first)) - 1
    }
}

/// What popping the queue gave.
enum Pop<S> {
    /// The queue is empty.
    Empty,
    /// The entry was stale, garbage, in the pool or already marked.
    Skip,
    /// A newly marked object, to scan.
    Grey(S),
}

/// How often (in ring turns, about one per object) a drain samples the
/// queue's length for its high water (see [`Marker::with_queue_peak`]).
const PEAK_EVERY: u32 = 64;

/// The collector's visitor.
pub(crate) struct Marker<'a> {
    chunks: &'a Chunks,
    bits: &'a mut [u64],
    queue: &'a mut VecDeque<u64>,
    high_water: u32,
    /// The outer → inners index, when outers keep their inners alive.
    inners: Option<&'a Inners>,
    /// GC clusters, when there are any: greying a member greys them all.
    clusters: Option<&'a Clusters>,
    /// Objects traced in part: (handle bits, next piece). `None`: every
    /// object is traced whole (the root look, which scans nothing).
    partial: Option<&'a mut Vec<(u64, usize)>>,
    /// Units owed for first pieces traced beyond an object's scan, charged
    /// at the next spend.
    owed: usize,
    /// Units owed for objects the drain traced whole beyond their first
    /// unit (see [`traced_whole`](Self::traced_whole)).
    whole: usize,
    pub(crate) marked: usize,
    /// Where drains note the queue's high water, if anywhere (see
    /// [`with_queue_peak`](Self::with_queue_peak)).
    queue_peak: Option<&'a mut usize>,
}

impl<'a> Marker<'a> {
    pub(crate) fn new(
        chunks: &'a Chunks,
        bits: &'a mut [u64],
        queue: &'a mut VecDeque<u64>,
        high_water: u32,
        inners: Option<&'a Inners>,
    ) -> Self {
        Marker {
            chunks,
            bits,
            queue,
            high_water,
            inners,
            clusters: None,
            partial: None,
            owed: 0,
            whole: 0,
            marked: 0,
            queue_peak: None,
        }
    }

    /// Drains raise `peak` to the longest the queue was when they looked
    /// (before each object's pop: within one object's handles of its high
    /// water), for the room the next cycles keep (`retire::Used`).
    pub(crate) fn with_queue_peak(mut self, peak: &'a mut usize) -> Self {
        self.queue_peak = Some(peak);
        self
    }

    /// Raises the noted high water to `len`.
    #[inline]
    fn note_peak(&mut self, len: usize) {
        if let Some(p) = self.queue_peak.as_deref_mut() {
            *p = (*p).max(len);
        }
    }

    /// Objects of more than [`PIECES`] pieces are traced in parts, their
    /// cursors kept on `partial` (empty when marking is over).
    pub(crate) fn with_partial(mut self, partial: &'a mut Vec<(u64, usize)>) -> Self {
        self.partial = Some(partial);
        self
    }

    /// Whether a large object may be traced in parts.
    #[inline(always)]
    pub(crate) fn splits(&self) -> bool {
        self.partial.is_some()
    }

    /// Notes that the object whose handle is `bits` has been traced up to
    /// piece `next` (see `class.rs`'s `trace_mark`).
    #[inline]
    pub(crate) fn defer(&mut self, bits: u64, next: usize) {
        if let Some(partial) = self.partial.as_deref_mut() {
            partial.push((bits, next));
            self.owed += next / PIECES_PER_UNIT - 1;
        }
    }

    /// Whether objects traced in part wait.
    #[inline(always)]
    fn has_partial(&self) -> bool {
        self.partial.as_ref().is_some_and(|p| !p.is_empty())
    }

    /// Traces the next [`PIECES`] pieces of the last object traced in part;
    /// returns `true` once the budget is spent. An object whose slot no
    /// longer holds it is dropped (a stale cursor marks nothing); one that
    /// shrank is traced to its current length; one that grew, to its new
    /// one.
    fn continue_partial(&mut self, budget: &mut Budget) -> bool {
        let Some((bits, from)) = self.partial.as_deref_mut().and_then(Vec::pop) else {
            return budget.is_spent();
        };
        let (i, serial) = (bits as u32, (bits >> 32) as u32);
        let item = self.chunks.at(i);
        let Some(p) = item.object().filter(|_| item.serial() == serial) else {
            return budget.spend(1);
        };
        // SAFETY: `p` is the slot's live object (its serial matches) and the
        // collection holds `&mut Heap`, so nothing frees it while it is traced.
        let h = unsafe { p.as_ref() };
        let to = from.saturating_add(PIECES);
        // SAFETY: the vtable belongs to the header's own class.
        let n = unsafe { (h.class().vt.trace_range_mark)(p, self, from, to) };
        if to < n {
            if let Some(partial) = self.partial.as_deref_mut() {
                partial.push((bits, to));
            }
        }
        let traced = n.min(to).saturating_sub(from);
        budget.spend(traced.div_ceil(PIECES_PER_UNIT).max(1) + std::mem::take(&mut self.owed))
    }

    /// Greying a member of one of `clusters` greys every member.
    pub(crate) fn with_clusters(mut self, clusters: &'a Clusters) -> Self {
        self.clusters = (!clusters.is_empty()).then_some(clusters);
        self
    }

    #[inline(always)]
    fn is_marked(&self, i: u32) -> bool {
        self.bits[(i >> 6) as usize] & (1 << (i & 63)) != 0
    }

    /// Scans the live object in slot `i` (its `item`, pointing at `p`),
    /// outside the queue: pool objects, objects created or changed during
    /// an incremental cycle.
    #[inline(always)]
    /// Puts the objects in the rings (marked, not scanned) back at the
    /// queue's front, unmarked, in the order they were popped: grey again,
    /// so every marked object stays scanned when the slice ends.
    fn requeue<C: Carry>(&mut self, a: &mut Ring<C>, b: &mut Ring<C>) {
        let mut back = [0u64; 2 * RING];
        let mut n = 0;
        while let Some(s) = b.pop().or_else(|| a.pop()) {
            back[n] = C::bits(s);
            n += 1;
        }
        for &bits in back[..n].iter().rev() {
            let i = bits as u32;
            self.bits[(i >> 6) as usize] &= !(1 << (i & 63));
            self.marked -= 1;
            self.queue.push_front(bits);
        }
    }

    pub(crate) fn scan_slot(&mut self, i: u32, item: &Item, p: NonNull<Header>) {
        let key = if self.inners.is_some() {
            Keyed::pack(
                p,
                u64::from(i) | (u64::from(item.serial()) << 32),
                item.flags(),
            )
            .1
        } else {
            0
        };
        self.scan(p, key, u64::from(i) | (u64::from(item.serial()) << 32));
        self.whole = 0;
    }

    /// Notes that an object of `pieces` pieces was traced whole: the drain
    /// charges it a unit per [`PIECES_PER_UNIT`] pieces beyond its first
    /// unit at its next pop, so that a slice reads the clock after each
    /// large object instead of after 128 of them (the budget's
    /// `CLOCK_EVERY`): at a million objects, the 64 levels of the bench's
    /// world, 14,000 handles each, took 1 ms as 64 units. Objects scanned
    /// outside the drain (`scan_slot`) are charged by their own loops, as
    /// before.
    #[inline(always)]
    pub(crate) fn traced_whole(&mut self, pieces: usize) {
        if pieces >= 2 * PIECES_PER_UNIT {
            self.whole += pieces / PIECES_PER_UNIT - 1;
        }
    }

    /// Traces one object's references: fields and outer, and, when `key`
    /// (its handle's bits, when outers keep inners and it has some) is not
    /// 0, the inners filed under it. `bits` is its handle's: an object of
    /// more than [`PIECES`] pieces is traced in parts, resumed from there.
    #[inline(always)]
    fn scan(&mut self, p: NonNull<Header>, key: u64, bits: u64) {
        // SAFETY: `p` is a live header (validated when popped, or a pool object),
        // and the collection holds `&mut Heap`, so nothing mutates or frees it.
        let h = unsafe { p.as_ref() };
        if h.class().needs_trace() {
            // SAFETY: the vtable belongs to the header's own class.
            unsafe { (h.class().vt.trace_mark)(p, self, bits) }
        }
        // SAFETY: as above; `p` is the item's pointer, with its slot's provenance.
        if let Some(o) = unsafe { Header::outer(p) } {
            self.visit(o);
        }
        if key != 0 {
            self.visit_inners(key);
        }
    }

    /// Visits the inners of the object whose handle is `key`. Stale handles
    /// among them are dropped when popped, like any other.
    fn visit_inners(&mut self, key: u64) {
        if let Some(inners) = self.inners {
            for &h in inners.of(key) {
                if !filed_elsewhere(self.chunks, h, key) {
                    self.visit(h);
                }
            }
        }
    }

    /// Asks for the memory `scan` will read behind the object's pointers.
    #[inline(always)]
    pub(super) fn prefetch_refs(p: NonNull<Header>) {
        // SAFETY: as in `scan`.
        let h = unsafe { p.as_ref() };
        if h.class().needs_trace() {
            // SAFETY: the vtable belongs to the header's own class.
            unsafe { (h.class().vt.prefetch)(p) }
        }
    }

    /// Pops and validates the next queued handle; marks it.
    #[inline(always)]
    fn pop_grey<C: Carry>(&mut self) -> Pop<C::Slot> {
        let Some(bits) = self.queue.pop_front() else {
            return Pop::Empty;
        };
        if let Some(&ahead) = self.queue.get(LOOKAHEAD) {
            if let Some(item) = self.chunks.get(ahead as u32) {
                prefetch_line(item as *const _);
            }
        }
        let (i, serial) = (bits as u32, (bits >> 32) as u32);
        if self.is_marked(i) {
            return Pop::Skip;
        }
        let item = self.chunks.at(i);
        let Some((p, f)) = admit(item, serial) else {
            return Pop::Skip;
        };
        self.set_mark(i);
        self.marked += 1;
        prefetch_line(p.as_ptr());
        match cluster_step(self.clusters, i, item.cluster_root(), self.inners.is_some()) {
            Some(ClusterStep::Whole { words, external }) => {
                for &(w, m) in words {
                    let m = m & below(w, self.high_water);
                    if m == 0 {
                        continue;
                    }
                    let word = &mut self.bits[w as usize];
                    self.marked += (m & !*word).count_ones() as usize;
                    *word |= m;
                }
                for &e in external {
                    self.visit(e);
                }
                return Pop::Skip;
            }
            Some(ClusterStep::Trace(members)) => {
                for &m in members {
                    self.visit(m);
                }
            }
            None => {}
        }
        Pop::Grey(C::pack(p, bits, f))
    }

    /// Drops the queue's front entries that would mark nothing (stale,
    /// garbage, pool or already marked handles), charging the budget one
    /// unit per [`SKIPS_PER_UNIT`] entries. Returns `true` if that empties
    /// the queue. So a drain reports a queue that holds nothing to mark as
    /// dry, and marking can end in a slice whose looks greyed nothing new;
    /// and a queue of many such entries (a breadth-first drain leaves one
    /// per reference to an object queued twice) is worked off over several
    /// slices, never in one.
    fn skip_dead_front(&mut self, budget: &mut Budget) -> bool {
        let mut n = 0usize;
        while let Some(&bits) = self.queue.front() {
            let (i, serial) = (bits as u32, (bits >> 32) as u32);
            if !self.is_marked(i) && admit(self.chunks.at(i), serial).is_some() {
                return false;
            }
            if n % SKIPS_PER_UNIT == 0 && budget.spend(1) {
                return false;
            }
            n += 1;
            self.queue.pop_front();
        }
        true
    }

    /// The queue's length: where the entries queued from now on begin
    /// (for [`drop_inadmissible_from`](Self::drop_inadmissible_from)).
    #[inline]
    pub(crate) fn queue_len(&self) -> usize {
        self.queue.len()
    }

    /// Drops, in place, the entries queued from position `from` on that
    /// would mark nothing (see [`admit`]): the looks at what the program did
    /// (re-scans, new roots, referencer reports) often queue stale or
    /// garbage handles, and filtering them here, once, leaves no dead
    /// entries for a later slice to drop and costs the marking pipeline's
    /// hot path nothing.
    pub(crate) fn drop_inadmissible_from(&mut self, from: usize) {
        let mut kept = from;
        for r in from..self.queue.len() {
            let bits = self.queue[r];
            let (i, serial) = (bits as u32, (bits >> 32) as u32);
            if !self.is_marked(i) && admit(self.chunks.at(i), serial).is_some() {
                self.queue[kept] = bits;
                kept += 1;
            }
        }
        self.queue.truncate(kept);
    }

    /// Queues the handles objects traced at birth shaded (see
    /// `Collector::trace_at_birth`) whose objects are still unmarked,
    /// dropping the others at a bit test each, while the budget lasts: one
    /// unit per [`SKIPS_PER_UNIT`] handles (the queued ones cost their pop
    /// as any entry). Returns `true` once `shaded` is empty.
    pub(crate) fn take_shaded(&mut self, shaded: &mut VecDeque<u64>, budget: &mut Budget) -> bool {
        let mut n = 0usize;
        while let Some(bits) = shaded.pop_front() {
            let i = bits as u32;
            if i < self.high_water && !self.is_marked(i) {
                self.queue.push_back(bits);
            }
            n += 1;
            if n % SKIPS_PER_UNIT == 0 && budget.spend(1) {
                return shaded.is_empty();
            }
        }
        if n % SKIPS_PER_UNIT != 0 {
            budget.spend(1);
        }
        true
    }

    /// Sets slot `i`'s mark bit (below the cycle's high water).
    #[inline(always)]
    pub(crate) fn set_mark(&mut self, i: u32) {
        if i < self.high_water {
            self.bits[(i >> 6) as usize] |= 1 << (i & 63);
        }
    }

    /// Whether slot `i` is marked; slots at or above the cycle's high water
    /// were created during it and count as marked.
    #[inline(always)]
    pub(crate) fn is_black(&self, i: u32) -> bool {
        i >= self.high_water || self.is_marked(i)
    }

    /// Marks everything reachable from what was visited so far, or until
    /// the budget is spent. Returns `true` when the queue ran dry (or holds
    /// only handles that mark nothing), `false` when the budget stopped it; either way every object marked so far has
    /// been scanned (a stopped drain puts the objects still waiting in its
    /// rings back on the queue, unmarked), so the mutator may run.
    pub(crate) fn drain(&mut self, budget: &mut Budget) -> bool {
        let mut peak = self.queue.len();
        let dry = if self.inners.is_some() {
            self.pipeline::<Keyed>(budget, &mut peak)
        } else {
            self.pipeline::<Bare>(budget, &mut peak)
        };
        self.note_peak(peak.max(self.queue.len()));
        dry
    }

    /// [`drain`](Self::drain) on the pool's workers and this thread (see
    /// module `gc/par.rs`), under the same budget and with the same promise:
    /// every object marked has been scanned when it returns.
    ///
    /// # Panics
    /// Resumes a panic raised by `Trace` code on any worker.
    pub(crate) fn drain_parallel(&mut self, pool: &super::par::Pool, budget: &mut Budget) -> bool {
        // The workers queue in their own buffers: the collector's holds
        // what is queued before and what is left after.
        self.note_peak(self.queue.len());
        // Objects traced in part are continued on this thread (the workers
        // trace every object whole), filling the queue for the workers.
        while self.has_partial() {
            if self.continue_partial(budget) {
                return false;
            }
        }
        if self.queue.is_empty() {
            // Nothing to wake workers for (the last look usually finds nothing).
            return true;
        }
        if budget.is_spent() {
            return self.skip_dead_front(budget);
        }
        let (marked, dry) = super::par::drain(
            self.chunks,
            self.bits,
            self.queue,
            self.high_water,
            self.inners,
            self.clusters,
            pool,
            budget,
        );
        self.marked += marked;
        self.note_peak(self.queue.len());
        dry || self.skip_dead_front(budget)
    }

    /// [`drain`](Self::drain), with rings carrying `C`; raises `peak` to
    /// the queue's length before every [`PEAK_EVERY`]th refill of ring A
    /// (after the last object's scan queued its handles).
    fn pipeline<C: Carry>(&mut self, budget: &mut Budget, peak: &mut usize) -> bool {
        let (mut a, mut b) = (Ring::<C>::new(), Ring::<C>::new());
        let mut open = !budget.is_spent();
        // Whether this drain has scanned an object.
        let mut scanned = false;
        // The queue's length is sampled every `PEAK_EVERY` turns, not at
        // each: read at every object it cost marking about 4.5% (a 1M
        // world's `gc_mark_ms`, 67.5 against 70.5 ms, medians of nine). The
        // high water is then known to within `PEAK_EVERY` objects' handles,
        // plenty for the room the next cycles keep.
        let mut turn = 0u32;
        loop {
            turn = turn.wrapping_add(1);
            if turn % PEAK_EVERY == 0 {
                *peak = (*peak).max(self.queue.len());
            }
            // Stage 2: keep ring A full from the queue.
            while open && !a.is_full() {
                if self.queue.len() < PARTIAL_BELOW && self.has_partial() {
                    // The next pieces of an object traced in part go ahead
                    // of what they queue: its handles are queued in their
                    // order (a `Vec` of objects allocated together is then
                    // marked in memory order), a few pieces ahead.
                    open = !self.continue_partial(budget);
                    continue;
                }
                match self.pop_grey::<C>() {
                    Pop::Empty => break,
                    Pop::Skip => open = !budget.spend(1),
                    Pop::Grey(p) => {
                        a.push(p);
                        open = !budget.spend(1 + std::mem::take(&mut self.whole));
                    }
                }
            }
            if !open && scanned && budget.deadline().is_some() {
                // The deadline has passed: the objects waiting in the rings
                // go back to the queue unmarked, to be scanned by a later
                // slice, instead of now (two rings of large objects would
                // overrun it). Only once this drain has scanned something, so
                // every slice makes progress; a work budget (no deadline)
                // flushes the rings, as its unit count promises.
                self.requeue(&mut a, &mut b);
                return false;
            }
            // Stage 3: move one object from A into B, scanning B's oldest to
            // make room. Once A runs dry, B drains (its scans may refill the
            // queue, and the loop goes round again).
            if let Some(p) = a.pop() {
                if b.is_full() {
                    let slot = b.pop().expect("a full ring has an oldest entry");
                    let (oldest, key) = C::unpack(slot);
                    self.scan(oldest, key, C::bits(slot));
                    scanned = true;
                }
                Self::prefetch_refs(C::unpack(p).0);
                b.push(p);
            } else if let Some(slot) = b.pop() {
                let (oldest, key) = C::unpack(slot);
                self.scan(oldest, key, C::bits(slot));
                scanned = true;
            } else if self.has_partial() {
                // The queue and the rings are empty: the next pieces of an
                // object traced in part refill the queue.
                if !open {
                    return false;
                }
                open = !self.continue_partial(budget);
                scanned = true;
            } else {
                return open || self.skip_dead_front(budget);
            }
        }
    }
}

impl Visitor for Marker<'_> {
    #[inline(always)]
    fn visit(&mut self, obj: AnyObj) {
        let i = obj.index();
        if i >= self.high_water || self.is_marked(i) {
            return;
        }
        self.queue.push_back(obj.to_bits());
    }
}

/// Whether `h`, filed under the outer whose handle is `key`, is a restored
/// object (`spawn_at`) whose own outer is another one or none: a restore
/// takes a former occupant's handle, and with it the stale entry the former
/// occupant left under its outer (see `inners`), which must not keep it.
/// Costs the inner's item load; only restored objects read their header.
#[inline]
pub(super) fn filed_elsewhere(chunks: &Chunks, h: AnyObj, key: u64) -> bool {
    let Some(item) = chunks.get(h.index()) else {
        return false;
    };
    if item.flags() & flags::RESTORED == 0 || item.serial() != h.serial() {
        return false;
    }
    let Some(p) = item.object() else {
        return false;
    };
    // SAFETY: the item holds a live object under `h`'s serial, and objects are freed only outside marking.
    unsafe { Header::outer(p) }.map(AnyObj::to_bits) != Some(key)
}

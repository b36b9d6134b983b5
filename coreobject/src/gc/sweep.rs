//! The purge, in Unreal's order: `begin_destroy` on every unreachable object;
//! `finish_destroy` once `is_ready_for_finish_destroy`; delete listeners; the
//! slot's serial moves on and its index returns to the free list; the value
//! is dropped.
//!
//! Three walks, each of which may stop at a deadline and resume in a later
//! slice:
//!
//! 1. **sweep** — over the mark bitmap: every allocated, unmarked object of
//!    the cycle's range that is not in the pool, not born during the cycle
//!    and not already unreachable is flagged `UNREACHABLE`; objects whose
//!    class has hooks get `begin_destroy` and join the pending list;
//! 2. **finish** — over the pending list (this cycle's and earlier ones'):
//!    objects ready get `finish_destroy` and the `FINISHED` flag, the others
//!    wait for a later cycle or tick;
//! 3. **free** — over the bitmap again: unreachable objects that are
//!    hook-free or finished are freed.
//!
//! Hook-free objects therefore cost no scratch memory at all: the bitmap
//! finds them twice. Every `begin_destroy` of a cycle runs before any of its
//! `finish_destroy`, and every `finish_destroy` before any free, so hooks may
//! read any other unreachable object through their [`DestroyCx`].
//!
//! Every hook, listener and `Drop` runs under `catch_unwind`: see
//! [`lifecycle`](crate::lifecycle).

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::budget::Budget;
use super::{Collector, Cycle, CycleKind, Stage, Step};
use crate::array::{flags, Doomed, FreeAhead, Item, COOL_EVERY};
use crate::handle::AnyObj;
use crate::lifecycle::{guard, Caught, DestroyCx};
use crate::listener::ObjectEvent;
use crate::trace::prefetch_line;

/// Objects a purge must free before it drops their values on several
/// threads: below this, handing work to the pool costs more than it saves.
pub const PARALLEL_DROP_MIN: usize = 16_384;

/// An object with destruction hooks, waiting for `is_ready_for_finish_destroy`.
/// Eight bytes: its slot, and when it started waiting, in milliseconds
/// since the collector's epoch ([`WARNED`] once it has been warned about).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pending {
    index: u32,
    since_ms: u32,
}

const _: () = assert!(std::mem::size_of::<Pending>() == 8);

/// `Pending::since_ms` of an object already warned about.
const WARNED: u32 = u32::MAX;

/// Milliseconds from `epoch` to `t`, saturating below [`WARNED`].
fn millis(epoch: Instant, t: Instant) -> u32 {
    let ms = t.saturating_duration_since(epoch).as_millis();
    ms.min(u128::from(WARNED - 1)) as u32
}

/// Counts from one destruction pass.
#[derive(Default)]
pub(crate) struct Freed {
    pub(crate) objects: usize,
    pub(crate) bytes: usize,
}

/// The handle of the object in an allocated slot.
fn handle_of(item: &Item, index: u32) -> AnyObj {
    let serial = NonZeroU32::new(item.serial()).expect("allocated slot has a serial");
    AnyObj::new(index, serial)
}

/// What handling one slot cost.
enum Cost {
    /// Nothing to do there.
    Skip,
    /// Flags and bookkeeping.
    Cheap,
    /// User code ran (a hook, a delete listener).
    Costly,
}

/// Calls `f` on each zero bit of `marks` from `start` up to `to`, charging
/// the budget one unit per bitmap word and one per object `f` reports it
/// handled. Returns where to resume when the budget runs out, or `None` once
/// `to` is reached.
#[inline(always)]
fn walk_zeros(
    marks: &[u64],
    start: u32,
    to: u32,
    budget: &mut Budget,
    mut f: impl FnMut(u32) -> Cost,
) -> Option<u32> {
    let mut w = start as usize / 64;
    // Bits below `start` in its word are done already.
    let mut zeros = !marks.get(w).copied().unwrap_or(u64::MAX) & (u64::MAX << (start % 64));
    while (w * 64) < to as usize {
        while zeros != 0 {
            let i = (w * 64) as u32 + zeros.trailing_zeros();
            zeros &= zeros - 1;
            if i >= to {
                return None;
            }
            let spent = match f(i) {
                Cost::Skip => false,
                Cost::Cheap => budget.spend(1),
                Cost::Costly => budget.spend_costly(),
            };
            if spent {
                return Some(i + 1);
            }
        }
        w += 1;
        if budget.spend(1) {
            return Some((w * 64) as u32);
        }
        zeros = !marks.get(w).copied().unwrap_or(u64::MAX);
    }
    None
}

/// Whether slot `i`'s bit is set in `marks`.
#[inline]
fn marked(marks: &[u64], i: u32) -> bool {
    marks
        .get((i >> 6) as usize)
        .is_some_and(|w| w & (1 << (i & 63)) != 0)
}

/// [`walk_zeros`] for a minor cycle: calls `f` on each slot of `list` from
/// position `start` that is below `to` and unmarked, charging the budget as
/// `walk_zeros` does (and one unit per eight skipped entries), and `ahead`
/// on the slot [`SWEEP_AHEAD`] entries further on, marked or not, where the
/// list is scattered ([`scattered_at`]). Returns the position to resume
/// from, or `None` at the end of the list.
#[inline(always)]
fn walk_list(
    list: &[u32],
    marks: &[u64],
    start: u32,
    to: u32,
    budget: &mut Budget,
    mut ahead: impl FnMut(u32),
    mut f: impl FnMut(u32) -> Cost,
) -> Option<u32> {
    let mut k = start as usize;
    while k < list.len() {
        // A block at a time, so that the choice costs one test per block.
        let end = (k / SPREAD_BLOCK + 1) * SPREAD_BLOCK;
        let block = &list[k..end.min(list.len())];
        let scattered = scattered_at(list, k + SWEEP_AHEAD);
        for (n, &i) in block.iter().enumerate() {
            let at = k + n;
            if scattered {
                if let Some(&j) = list.get(at + SWEEP_AHEAD) {
                    ahead(j);
                }
            }
            let cost = if i >= to || marked(marks, i) {
                Cost::Skip
            } else {
                f(i)
            };
            let spent = match cost {
                Cost::Skip => at % 8 == 7 && budget.spend(1),
                Cost::Cheap => budget.spend(1),
                Cost::Costly => budget.spend_costly(),
            };
            if spent {
                return Some(at as u32 + 1);
            }
        }
        k += block.len();
    }
    None
}

/// Whether the free step frees the object in `item`: it is unreachable,
/// and hook-free or finished.
#[inline]
fn frees(item: &Item) -> bool {
    let f = item.flags();
    item.object().is_some()
        && f & flags::UNREACHABLE != 0
        && f & (flags::HOOKS | flags::FINISHED) != flags::HOOKS
}

/// Freed indices the free step gathers before it returns them to the free
/// list ([`release_freed`](crate::array::ObjectArray::release_freed)) and
/// reads the clock soon after: returning them (with the page run's flush
/// and a cooled page) took 7-11 ns each in the demo at 300K objects, so a
/// slice that returned its 20,000-60,000 only after its deadline ran
/// 0.2-0.5 ms over it.
const RELEASE_EVERY: usize = 2048;

/// Young-list entries ahead of the one it visits whose table item the
/// sweep of a minor cycle prefetches.
const SWEEP_AHEAD: usize = 16;

/// Young-list entries per block whose spread decides whether their table
/// items are prefetched ([`scattered_at`]).
const SPREAD_BLOCK: usize = 64;

/// Whether the young-list entries from position `k` lie scattered over the
/// table: the last of the next [`SPREAD_BLOCK`] (or of the list) more than
/// four times as many slots away from the first, either way. Dense runs (a
/// program that frees and re-creates whole structures, as binary-trees
/// does) are left to the hardware prefetcher, for which a software prefetch
/// per entry only costs instructions.
#[inline]
fn scattered_at(list: &[u32], k: usize) -> bool {
    let Some(&a) = list.get(k) else {
        return false;
    };
    let b = list
        .get(k + SPREAD_BLOCK - 1)
        .or(list.last())
        .copied()
        .unwrap_or(a);
    a.abs_diff(b) > (4 * SPREAD_BLOCK) as u32
}

/// Objects the purge starts loading ahead of the one it frees: twice
/// [`FREE_AHEAD`](crate::array::FREE_AHEAD), so that the buffers of an
/// object, which the look ahead asks for that many objects after its own
/// line, are on their way that many objects before it is freed.
const AHEAD: usize = 2 * crate::array::FREE_AHEAD;

/// Bitmap words a [`Lead`] reads for one call at most: past that it waits,
/// so a run of marked objects costs it no more than the walk behind pays.
const LEAD_SCAN: usize = 16;

/// A cursor over the same slots as the free step's walk ([`walk_zeros`]
/// or [`walk_list`]), kept [`AHEAD`] objects in front of it, that starts
/// loading each object (and its name record) before the walk reaches it:
/// the objects a purge frees lie scattered over the pages, and each first
/// touch is a cache miss. In the demo at 300,000 objects this took the
/// free step from about 123 to 87 ns per object.
struct Lead<'a> {
    marks: &'a [u64],
    /// The young list of a minor cycle: the lead goes over its entries
    /// from position `w` instead of the bitmap.
    list: Option<&'a [u32]>,
    /// The next word (or list position) to read, and the unread zero bits
    /// of the last word.
    w: usize,
    zeros: u64,
    to: u32,
    /// Objects loaded ahead that the walk has not reached yet.
    gap: usize,
}

impl<'a> Lead<'a> {
    /// A lead over the zero bits of `marks` from `start` up to `to`, or
    /// with `list`, over its unmarked slots below `to` from position
    /// `start`.
    fn new(marks: &'a [u64], list: Option<&'a [u32]>, start: u32, to: u32) -> Self {
        let (w, zeros) = match list {
            Some(_) => (start as usize, 0),
            None => {
                let w = start as usize / 64;
                let word = marks.get(w).copied().unwrap_or(u64::MAX);
                (w + 1, !word & (u64::MAX << (start % 64)))
            }
        };
        Lead {
            marks,
            list,
            w,
            zeros,
            to,
            gap: 0,
        }
    }

    /// The next slot, or `None` at the end or after [`LEAD_SCAN`] words
    /// (or list entries) without one (a later call goes on from there).
    #[inline]
    fn next(&mut self) -> Option<u32> {
        if let Some(list) = self.list {
            for _ in 0..LEAD_SCAN {
                let &i = list.get(self.w)?;
                self.w += 1;
                if i < self.to && !marked(self.marks, i) {
                    return Some(i);
                }
            }
            return None;
        }
        for _ in 0..LEAD_SCAN {
            if self.zeros != 0 {
                let i = ((self.w - 1) * 64) as u32 + self.zeros.trailing_zeros();
                self.zeros &= self.zeros - 1;
                return (i < self.to).then_some(i);
            }
            if self.w * 64 >= self.to as usize {
                return None;
            }
            self.zeros = !self.marks.get(self.w).copied().unwrap_or(u64::MAX);
            self.w += 1;
        }
        None
    }

    /// The walk reached an object it frees (`freed`) or a slot it skips:
    /// moves the lead on until it is [`AHEAD`] objects in front, calling
    /// `load` on each slot it passes, which says whether it is one the walk
    /// will free.
    #[inline]
    fn step(&mut self, freed: bool, mut load: impl FnMut(u32) -> bool) {
        if freed {
            self.gap = self.gap.saturating_sub(1);
        }
        while self.gap < AHEAD {
            let Some(j) = self.next() else { return };
            if load(j) {
                self.gap += 1;
            }
        }
    }
}

impl Collector {
    /// Runs purge steps until the cycle's purge is done (`true`) or the
    /// budget is spent.
    pub(super) fn purge_slice(
        &mut self,
        stage: &mut Stage<'_>,
        cycle: &mut Cycle,
        budget: &mut Budget,
        caught: &mut Caught,
    ) -> bool {
        let ts = Instant::now();
        let (from, to) = (cycle.pool_end, cycle.hw);
        loop {
            match cycle.step {
                Step::Sweep(start) => {
                    let _span = tracing::info_span!("gc.sweep", from = start).entered();
                    let array = &*stage.array;
                    let names = &*stage.names;
                    let epoch = self.epoch;
                    let pending = &mut self.pending;
                    let stats = &mut cycle.stats;
                    let dirty = stage.store_dirty;
                    let sweep_one = |i| {
                        let Some(item) = array.item(i) else {
                            return Cost::Skip;
                        };
                        let f = item.flags();
                        if item.object().is_none()
                            || f & (flags::DISREGARD | flags::UNREACHABLE | flags::BORN) != 0
                        {
                            return Cost::Skip;
                        }
                        // The purge holds the heap's `&mut`: no locked instruction.
                        item.set_exclusive(flags::UNREACHABLE);
                        stats.unreachable += 1;
                        // The store hook: a capture drops its record.
                        dirty.mark_subtree(i);
                        if f & flags::HOOKS != 0 {
                            let this = handle_of(item, i);
                            let p = item.object().expect("checked above");
                            let cx = DestroyCx::new(array, names, this);
                            // SAFETY: `p` is live and of its header's class; the purge
                            // holds the heap exclusively, and `cx` never hands out `this`.
                            guard(caught, || unsafe {
                                (p.as_ref().class().vt.begin_destroy)(p, &cx)
                            });
                            pending.push(Pending {
                                index: i,
                                since_ms: millis(epoch, ts),
                            });
                            return Cost::Costly;
                        }
                        Cost::Cheap
                    };
                    let marks = &array.condemned.marks;
                    // The table item of a young slot the walk reaches soon:
                    // young slots lie scattered over the table (creation
                    // reuses freed slots), and each first touch here was a
                    // cache miss (about half of this walk's time in the
                    // demo at 1M objects).
                    let ahead = |j| {
                        if let Some(item) = array.item(j) {
                            prefetch_line(item);
                        }
                    };
                    let resume = match cycle.kind {
                        CycleKind::Major => walk_zeros(marks, start, to, budget, sweep_one),
                        CycleKind::Minor => {
                            walk_list(&cycle.list, marks, start, to, budget, ahead, sweep_one)
                        }
                    };
                    if let Some(next) = resume {
                        cycle.step = Step::Sweep(next);
                        cycle.stats.sweep += ts.elapsed();
                        return false;
                    }
                    // Every unreachable object is flagged: resolution needs
                    // the bitmap no longer.
                    stage.array.condemned.active = false;
                    // Start a page epoch, and make room in the free list's
                    // directory (its blocks come one at a time as the frees
                    // need them, so no step here copies the list).
                    stage.array.reserve_frees(cycle.stats.unreachable);
                    cycle.stats.sweep += ts.elapsed();
                    cycle.step = Step::Poll(0);
                }
                Step::Poll(mut k) => {
                    let _span =
                        tracing::info_span!("gc.destroy", step = "poll", from = k).entered();
                    let tf = Instant::now();
                    let timeout = self.config.finish_destroy_timeout;
                    while k < self.pending.len() {
                        let p = &mut self.pending[k];
                        k += 1;
                        if poll(stage, p, self.epoch, timeout, caught) {
                            cycle.ready.push(p.index);
                        } else {
                            cycle.waiting.push(*p);
                        }
                        if budget.spend_costly() {
                            cycle.step = Step::Poll(k);
                            cycle.stats.destroy += tf.elapsed();
                            return false;
                        }
                    }
                    // Those not ready wait; `complete` puts them back.
                    self.pending.clear();
                    cycle.stats.destroy += tf.elapsed();
                    cycle.step = Step::Finish(0);
                }
                Step::Finish(mut k) => {
                    let _span =
                        tracing::info_span!("gc.destroy", step = "finish", from = k).entered();
                    let tf = Instant::now();
                    while k < cycle.ready.len() {
                        finish(stage, cycle.ready[k], caught);
                        k += 1;
                        if budget.spend_costly() {
                            cycle.step = Step::Finish(k);
                            cycle.stats.destroy += tf.elapsed();
                            return false;
                        }
                    }
                    if cycle.kind == CycleKind::Minor {
                        // Objects finished now that earlier cycles found.
                        cycle.list.extend_from_slice(&cycle.ready);
                    }
                    cycle.ready.clear();
                    cycle.stats.destroy += tf.elapsed();
                    cycle.step = Step::Free(match cycle.kind {
                        CycleKind::Major => from,
                        CycleKind::Minor => 0,
                    });
                }
                Step::Free(start) => {
                    let _span = tracing::info_span!("gc.free", from = start).entered();
                    let tf = Instant::now();
                    // With `parallel_drop`, a stop-the-world purge with enough
                    // to free and no delete listener (they run in order, on
                    // this thread) drops the values on the marking pool: the slots are emptied here,
                    // the values dropped on the workers, the memory taken back
                    // here.
                    let pool = self.pool.as_ref().filter(|p| {
                        self.config.parallel_drop
                            && cycle.kind == CycleKind::Major
                            && cycle.threads > 1
                            && p.threads() == cycle.threads
                            && start == from
                            && budget.is_unlimited()
                            && stage.listeners.delete.is_empty()
                            && cycle.stats.unreachable >= PARALLEL_DROP_MIN
                    });
                    let mut doomed = pool.map(|_| Doomed::default());
                    // The common case, decided once per slice: no
                    // per-object delete listener and no parallel drop. Then
                    // an object with no outer that is no outer itself (every
                    // object, when no object has inners) needs none of
                    // `free_one`'s lookups: its batch delete event, cluster
                    // root and name are settled from its item and header,
                    // and its index joins the free list with the slice's
                    // others, in one batch. The others go through
                    // `free_one`, into the same batch.
                    let quick = doomed.is_none() && stage.listeners.delete.is_empty();
                    let linked = !stage.inners.is_empty();
                    let clustered = !stage.clusters.is_empty();
                    let events = !stage.listeners.delete_batch.is_empty();
                    // The plainest case (none of the above either) has a
                    // branch of its own, which binary-trees takes.
                    let plain = quick && !linked && !clustered && !events;
                    let mut freeing = std::mem::take(&mut stage.array.freeing);
                    let mut batch = std::mem::take(&mut self.deleted);
                    let marks = std::mem::take(&mut stage.array.condemned.marks);
                    let stats = &mut cycle.stats;
                    let list = (cycle.kind == CycleKind::Minor).then_some(&cycle.list[..]);
                    let mut lead = Lead::new(&marks, list, start, to);
                    let mut ahead = FreeAhead::new();
                    // Objects freed since a cooled page last gave its
                    // memory back.
                    let mut since_cool = 0;
                    // The items come through a clone of the table's chunks,
                    // so that the walk's item can be handed to the `&mut`
                    // free below (`free_batched_at`) instead of looked up
                    // in the chunk directory a second time.
                    let chunks = Arc::clone(stage.array.chunks());
                    let free = |i| {
                        let Some(item) = chunks.get(i) else {
                            return Cost::Skip;
                        };
                        let f = item.flags();
                        let freed = frees(item);
                        {
                            let array = &*stage.array;
                            let names = &*stage.names.get_mut();
                            lead.step(freed, |j| {
                                let Some(item) = array.item(j).filter(|item| frees(item)) else {
                                    return false;
                                };
                                array.load_to_free(&mut ahead, item, j, caught);
                                if item.flags() & flags::NAMED != 0 {
                                    names.prefetch_record(j);
                                }
                                true
                            });
                        }
                        if !freed {
                            return Cost::Skip;
                        }
                        let costly = f & flags::HOOKS != 0 || !stage.listeners.delete.is_empty();
                        stats.freed_bytes += if plain {
                            if f & flags::NAMED != 0 {
                                stage.names.get_mut().remove(i);
                            }
                            // The store hook: a capture drops its record.
                            stage.store_dirty.mark(i);
                            stage.array.free_batched_at(item, i, caught, &mut freeing)
                        } else if quick
                            // Whether it has an outer or is one, from its
                            // item and the header the lead started loading.
                            && !(linked
                                && (f & flags::OUTER != 0
                                    || stage.array.header_at(i).is_some_and(|h| h.has_outer())))
                        {
                            if events {
                                let header = stage.array.header_at(i);
                                batch.push(ObjectEvent {
                                    object: handle_of(item, i),
                                    class: header.expect("freeing a live object").class(),
                                });
                            }
                            // A cluster goes with its root (see `free_one`).
                            if clustered && item.cluster_root() == i.wrapping_add(1) {
                                stage.clusters.by_root.remove(&i);
                            }
                            if f & flags::NAMED != 0 {
                                stage.names.get_mut().remove(i);
                            }
                            // The store hook: a capture drops its record.
                            stage.store_dirty.mark(i);
                            stage.array.free_batched_at(item, i, caught, &mut freeing)
                        } else {
                            let release = match doomed.as_mut() {
                                Some(d) => Release::Later(d),
                                None => Release::Batched(&mut freeing),
                            };
                            free_one(stage, i, caught, release, &mut batch)
                        };
                        stats.freed += 1;
                        if freeing.len() >= RELEASE_EVERY {
                            // Inside the budget (see `RELEASE_EVERY`).
                            stage.array.release_freed(&mut freeing);
                            return Cost::Costly;
                        }
                        since_cool += 1;
                        if since_cool == COOL_EVERY {
                            // Inside the budget: an `madvise` may cost
                            // microseconds, so the clock is read soon after.
                            since_cool = 0;
                            stage.array.cool();
                            return Cost::Costly;
                        }
                        if costly {
                            Cost::Costly
                        } else {
                            Cost::Cheap
                        }
                    };
                    let resume = match cycle.kind {
                        CycleKind::Major => walk_zeros(&marks, start, to, budget, free),
                        CycleKind::Minor => {
                            walk_list(&cycle.list, &marks, start, to, budget, |_| {}, free)
                        }
                    };
                    stage.array.condemned.marks = marks;
                    stage.array.release_freed(&mut freeing);
                    stage.array.freeing = freeing;
                    if let (Some(pool), Some(mut doomed)) = (pool, doomed) {
                        let first: parking_lot::Mutex<Caught> = parking_lot::Mutex::new(None);
                        let parts = doomed.parts(pool.threads());
                        cycle.stats.drop_threads = parts.len();
                        pool.run_each(parts, |part| {
                            if let Some(p) = part.drop_values() {
                                first.lock().get_or_insert(p);
                            }
                        });
                        if let Some(p) = first.into_inner() {
                            caught.get_or_insert(p);
                        }
                        stage.array.release(doomed, caught);
                    }
                    stage.listeners.deliver_batch(&mut batch, caught);
                    self.deleted = batch;
                    cycle.stats.destroy += tf.elapsed();
                    if let Some(next) = resume {
                        cycle.step = Step::Free(next);
                        return false;
                    }
                    // Every free of the cycle is done: drop the name
                    // index's stale entries if they have come to dominate
                    // it, in steps below, or at once in a whole collection
                    // (cheaper in all, and it has no slice to keep).
                    if budget.is_unlimited() {
                        stage.names.get_mut().tidy_whole();
                    } else {
                        stage.names.get_mut().tidy_begin();
                    }
                    cycle.step = Step::Settle(0);
                }
                Step::Settle(mut k) => {
                    // The names' tidy, a step at a time: a unit of the
                    // budget per 16 of its work units (an index entry looked
                    // at each; a record read, a random line, is 16).
                    if k == 0 {
                        loop {
                            let (done, work) =
                                stage.names.get_mut().tidy_step(crate::names::TIDY_STEP);
                            let spent = budget.spend(work.div_ceil(16).max(1));
                            if done {
                                break;
                            }
                            if spent {
                                return false;
                            }
                        }
                    }
                    // Objects created during the cycle lose their protection;
                    // the last few (created since this slice began) are
                    // cleared by `complete`, under the same borrow.
                    stage.array.sync();
                    stage.array.take_born_into(cycle.born.appendable());
                    while k < cycle.born.len() {
                        let i = cycle.born[k];
                        // Young after the cycle, as every object created
                        // during it: the born scan (or tracing at birth)
                        // marked it if its slot is below the high water,
                        // which would make it old, holding handles to young
                        // objects (created above the high water) that no
                        // remembered set lists.
                        if let Some(w) = stage.array.condemned.marks.get_mut((i >> 6) as usize) {
                            *w &= !(1 << (i & 63));
                        }
                        settle_born(&mut self.revived, stage.array.at(i), i);
                        k += 1;
                        if budget.spend(1) && k < cycle.born.len() {
                            cycle.step = Step::Settle(k);
                            return false;
                        }
                    }
                    cycle.step = Step::Settle(k);
                    // Generational: the old objects changed while the cycle
                    // marked join the remembered set here, in budgeted
                    // pieces, rather than all in `complete` (70,000-170,000
                    // of them a cycle in the demo at 1M).
                    if self.config.generational {
                        let marks = &stage.array.condemned.marks;
                        while cycle.written_done < cycle.written.len() {
                            let i = cycle.written[cycle.written_done];
                            cycle.written_done += 1;
                            let old = marks
                                .get((i >> 6) as usize)
                                .is_some_and(|w| w & (1 << (i & 63)) != 0);
                            remember_written(
                                &mut self.written_seen,
                                &mut self.regrey,
                                stage.array.at(i),
                                i,
                                old,
                            );
                            if budget.spend(1) && cycle.written_done < cycle.written.len() {
                                return false;
                            }
                        }
                    }
                    return true;
                }
                Step::Pool(_) | Step::Remembered(_) | Step::Mark => {
                    unreachable!("purge before marking ended")
                }
            }
        }
    }

    /// Outside a cycle: finishes and frees every pending object that is ready.
    pub(super) fn finish_pending(&mut self, stage: &mut Stage<'_>, caught: &mut Caught) -> Freed {
        let _span =
            tracing::info_span!("gc.finish_pending", pending = self.pending.len()).entered();
        let timeout = self.config.finish_destroy_timeout;
        let mut ready = Vec::new();
        let mut pending = std::mem::take(&mut self.pending);
        pending.retain_mut(|p| {
            let done = poll(stage, p, self.epoch, timeout, caught);
            if done {
                ready.push(p.index);
            }
            !done
        });
        self.pending = pending;
        for &i in &ready {
            finish(stage, i, caught);
        }
        let mut freed = Freed::default();
        let mut batch = std::mem::take(&mut self.deleted);
        for i in ready {
            freed.bytes += free_one(stage, i, caught, Release::Now, &mut batch);
            freed.objects += 1;
        }
        stage.listeners.deliver_batch(&mut batch, caught);
        self.deleted = batch;
        freed
    }
}

/// Polls one pending object's `is_ready_for_finish_destroy`; warns once
/// when it has waited too long.
fn poll(
    stage: &mut Stage<'_>,
    p: &mut Pending,
    epoch: Instant,
    timeout: Duration,
    caught: &mut Caught,
) -> bool {
    let item = stage.array.at(p.index);
    let ptr = item.object().expect("pending object still allocated");
    let mut ready = true;
    guard(caught, || {
        // SAFETY: `ptr` is live and of its header's class; the purge holds the
        // heap exclusively.
        ready = unsafe { (ptr.as_ref().class().vt.is_ready)(ptr) }
    });
    if !ready && p.since_ms != WARNED {
        let waited = Duration::from_millis(u64::from(millis(epoch, Instant::now()) - p.since_ms));
        if waited >= timeout {
            p.since_ms = WARNED;
            tracing::warn!(
                object = ?handle_of(item, p.index),
                ?waited,
                "object is still not ready for finish_destroy"
            );
        }
    }
    ready
}

/// Runs `finish_destroy` and flags the object `FINISHED`.
fn finish(stage: &mut Stage<'_>, index: u32, caught: &mut Caught) {
    let array = &*stage.array;
    let item = array.at(index);
    let ptr = item.object().expect("finished object still allocated");
    let cx = DestroyCx::new(array, stage.names, handle_of(item, index));
    // SAFETY: as in `poll`; `cx` never hands out the object being finished.
    guard(caught, || unsafe {
        (ptr.as_ref().class().vt.finish_destroy)(ptr, &cx)
    });
    item.set(flags::FINISHED);
}

/// An object created during the cycle leaves the born list (its `BORN`
/// flag cleared). A restored one (`create_at_with_serial`) is named again
/// by handles held in old objects that no barrier saw, so the next minor
/// cycle starts from it (`Collector::revived`), as from a revival between
/// cycles.
pub(super) fn settle_born(revived: &mut parking_lot::Mutex<Vec<AnyObj>>, item: &Item, i: u32) {
    if item.clear_exclusive(flags::BORN) & flags::RESTORED != 0 && item.object().is_some() {
        revived.get_mut().push(handle_of(item, i));
    }
}

/// How [`free_one`] frees the slot and the value.
enum Release<'a> {
    /// At once ([`ObjectArray::free`](crate::array::ObjectArray::free)).
    Now,
    /// Into the purge slice's batch
    /// ([`free_batched`](crate::array::ObjectArray::free_batched)): the
    /// caller releases it before it gives the heap back.
    Batched(&'a mut Vec<u32>),
    /// The value joins `Doomed`, to be dropped on the pool.
    Later(&'a mut Doomed),
}

/// Delete listeners, the name, then the slot and the value, then the
/// object's place in the outer → inners index. Returns the bytes freed.
fn free_one(
    stage: &mut Stage<'_>,
    index: u32,
    caught: &mut Caught,
    release: Release<'_>,
    batch: &mut Vec<ObjectEvent>,
) -> usize {
    let item = stage.array.at(index);
    let this = handle_of(item, index);
    // (its outer, whether it is an outer), read before the slot is emptied.
    let links = (!stage.inners.is_empty()).then(|| {
        let outer = stage.array.outer(this, 0).expect("freeing a live object");
        (outer, item.flags() & flags::OUTER != 0)
    });
    let listeners = stage.listeners;
    if !listeners.delete.is_empty() || !listeners.delete_batch.is_empty() {
        let header = stage.array.header(this, 0).expect("freeing a live object");
        let event = ObjectEvent {
            object: this,
            class: header.class(),
        };
        for (_, l) in listeners.delete.iter().rev() {
            guard(caught, || l.on_delete(&event));
        }
        if !listeners.delete_batch.is_empty() {
            batch.push(event);
        }
    }
    // A cluster goes with its root (its members go in the same cycle: the
    // cluster is reached whole or not at all).
    if item.cluster_root() == index.wrapping_add(1) {
        stage.clusters.by_root.remove(&index);
    }
    if item.flags() & flags::NAMED != 0 {
        stage.names.get_mut().remove(index);
    }
    // The store hook: a capture drops its record (if the sweep did not).
    stage.store_dirty.mark(index);
    let bytes = match release {
        Release::Now => stage.array.free(index, caught),
        Release::Batched(freeing) => stage.array.free_batched(index, caught, freeing),
        Release::Later(d) => stage.array.free_later(index, d),
    };
    if let Some((outer, is_outer)) = links {
        if is_outer {
            // The store hook: an inner outliving its outer is saved with
            // no outer now (and so may be the objects inside it).
            for h in stage.inners.of(this.to_bits()) {
                stage.store_dirty.mark_subtree(h.index());
            }
            let array = &*stage.array;
            stage
                .inners
                .forget_outer(this, |h| array.lookup(h, 0).is_ok());
        }
        if let Some(o) = outer {
            let array = &*stage.array;
            // The slot's serial has moved on, so `this` counts as stale.
            // The outer, if alive, has no inners left. (A freed outer's
            // entry stays while inners outlive it, and its slot may hold
            // another object now, whose flag is not this entry's.)
            if stage.inners.forget_inner(o, |h| array.lookup(h, 0).is_ok())
                && array.lookup(o, 0).is_ok()
            {
                array.at(o.index()).clear(flags::OUTER);
            }
        }
    }
    bytes
}

/// Slot `i`, in a cycle's `written` list (see `Cycle::written`), leaves it
/// (its bit in `seen` is cleared) and, if it is an `old` object still alive
/// and not yet listed, joins the remembered set `regrey`: it may hold a
/// handle to an object the cycle created, which stays young. Objects in the
/// disregard-for-GC pool count as old.
pub(super) fn remember_written(
    seen: &mut [u64],
    regrey: &mut Vec<u32>,
    item: &Item,
    i: u32,
    old: bool,
) {
    seen[(i >> 6) as usize] &= !(1 << (i & 63));
    // A pool object is old without a mark (as in the write barrier).
    if (old || item.flags() & flags::DISREGARD != 0)
        && item.object().is_some()
        && item.flags() & flags::UNREACHABLE == 0
        && item.set(flags::REGREY) & flags::REGREY == 0
    {
        regrey.push(i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The slots `walk_list` asks `ahead` for, and those it visits.
    fn walk(list: &[u32], start: u32) -> (Vec<u32>, Vec<u32>) {
        let (mut asked, mut visited) = (Vec::new(), Vec::new());
        let mut budget = Budget::unlimited();
        let end = walk_list(
            list,
            &[],
            start,
            u32::MAX,
            &mut budget,
            |j| asked.push(j),
            |i| {
                visited.push(i);
                Cost::Cheap
            },
        );
        assert_eq!(end, None);
        (asked, visited)
    }

    /// A scattered young list: the sweep asks for the item [`SWEEP_AHEAD`]
    /// entries ahead of each it visits (from any starting position), so
    /// that its first touch of each item is no cache miss.
    #[test]
    fn the_sweep_loads_scattered_items_ahead() {
        let n = if cfg!(miri) { 300 } else { 5_000 };
        let list: Vec<u32> = (0..n).map(|k| (k * 7_919) % 1_000_003).collect();
        for start in [0, 1, 63, 64, 65, 200] {
            let (asked, visited) = walk(&list, start);
            assert_eq!(visited, list[start as usize..]);
            assert_eq!(asked, list[start as usize + SWEEP_AHEAD..]);
        }
    }

    /// A dense one (slots in a run, as a program that frees and re-creates
    /// whole structures leaves it) is left to the hardware prefetcher;
    /// where a dense run and a scattered one meet, only blocks whose
    /// entries ahead are scattered are asked for.
    #[test]
    fn the_sweep_leaves_dense_runs_to_the_hardware() {
        let n = if cfg!(miri) { 256 } else { 4_096 };
        let dense: Vec<u32> = (0..n).collect();
        let (asked, visited) = walk(&dense, 0);
        assert_eq!(visited, dense);
        assert!(
            asked.is_empty(),
            "{} prefetches on a dense list",
            asked.len()
        );
        // Dense, then scattered: the blocks whose entries ahead are dense
        // ask for nothing, the others for each entry ahead.
        let mut mixed = dense.clone();
        mixed.extend((0..n).map(|k| n + (k * 7_919) % 1_000_003));
        let (asked, _) = walk(&mixed, 0);
        let want: Vec<u32> = (0..mixed.len())
            .filter(|&k| scattered_at(&mixed, k / SPREAD_BLOCK * SPREAD_BLOCK + SWEEP_AHEAD))
            .filter_map(|k| mixed.get(k + SWEEP_AHEAD).copied())
            .collect();
        assert_eq!(asked, want);
        assert!(asked.len() >= n as usize - 2 * SPREAD_BLOCK);
        assert!(asked.len() < mixed.len() - n as usize / 2);
    }
}

//! One slice of the mark phase: the pool's objects, the referencers, the
//! drain of the work queue, and the looks at what the program did since the
//! previous slice (new roots, cleared garbage marks, objects created, the
//! re-scan list), until a look greys nothing new. The marker itself (queue,
//! pipeline, stealing) is in `gc/mark.rs` and `gc/par.rs`.

use std::collections::HashMap;
use std::num::NonZeroU32;

use rustc_hash::FxBuildHasher;

use super::budget::Budget;
use super::{par, Collector, CountVisits, Cycle, CycleKind, Marker, Stage, Step};
use crate::array::{flags, Chunks};
use crate::handle::AnyObj;
use crate::trace::{prefetch_line, Visitor};

impl Collector {
    /// One marking slice. Returns `true` when marking is complete (the cycle
    /// has moved on to the purge).
    pub(super) fn mark_slice(
        &mut self,
        stage: &mut Stage<'_>,
        cycle: &mut Cycle,
        budget: &mut Budget,
    ) -> bool {
        let done = self.mark_slice_inner(stage, cycle, budget);
        // What the program writes from now on is what the next slice owes.
        self.regrey_kept = self.regrey.len();
        done
    }

    fn mark_slice_inner(
        &mut self,
        stage: &mut Stage<'_>,
        cycle: &mut Cycle,
        budget: &mut Budget,
    ) -> bool {
        stage.array.sync();
        stage.array.take_born_into(cycle.born.appendable());
        stage.array.take_touched(&mut self.regrey);
        // Objects changed since the previous slice (the re-scan list is a
        // stack: they are on top of what earlier slices left).
        let written_since = self.regrey.len().saturating_sub(self.regrey_kept);
        // Drains of a large enough heap run on several threads, budgeted or not.
        let threads = cycle.threads;
        if threads > 1 && self.pool.as_ref().map(par::Pool::threads) != Some(threads) {
            // A pool whose threads cannot start leaves marking on this thread.
            self.pool = par::Pool::new(threads);
        }
        let pool = self.pool.as_ref().filter(|_| threads > 1);
        let chunks = stage.array.chunks().clone();
        let inners = cycle.outer_keeps_inners.then_some(&*stage.inners);
        let clusters = &*stage.clusters;
        let mut marker = Marker::new(&chunks, &mut self.bits, &mut self.queue, cycle.hw, inners)
            .with_clusters(clusters)
            .with_partial(&mut self.partial)
            .with_queue_peak(&mut self.queue_peak);
        let drain = |marker: &mut Marker<'_>, budget: &mut Budget| match pool {
            Some(pool) => marker.drain_parallel(pool, budget),
            None => marker.drain(budget),
        };
        let generational = self.config.generational;
        cycle.stats.mark_threads = cycle
            .stats
            .mark_threads
            .max(pool.map_or(1, par::Pool::threads));

        // A major cycle forgets the last cycle's remembered set: each
        // entry's flag is cleared (so that a write lists the object again),
        // in budgeted pieces, before any object is scanned. Writes until
        // then need no re-scan: marking will read the objects as they are.
        // One unit per entry. Objects written meanwhile may hold handles to
        // objects this cycle creates, which stay young: they are noted as
        // written, as a minor cycle's remembered set is below.
        if cycle.kind == CycleKind::Major && matches!(cycle.step, Step::Pool(_)) {
            while cycle.forgotten < cycle.remembered.len() {
                let i = cycle.remembered[cycle.forgotten];
                cycle.forgotten += 1;
                chunks.at(i).clear(flags::REGREY);
                if generational && !cycle.born.is_empty() {
                    note_written(&mut self.written_seen, &mut cycle.written, i);
                }
                if budget.spend(1) && cycle.forgotten < cycle.remembered.len() {
                    return false;
                }
            }
            cycle.remembered.clear();
            cycle.forgotten = 0;
        }
        // The pool's objects are permanent; what they reference stays alive.
        if let Step::Pool(from) = cycle.step {
            let mut i = from;
            if cycle.kind == CycleKind::Minor {
                // The pool is old: pool objects changed since the last cycle
                // are in the remembered set, and only new ones (young: from
                // `pool_lo` on) are scanned. Then the looks at the young
                // objects that joined a cluster or were filed under an outer
                // since the last cycle (`looks`): no other young object can
                // need one. One unit per entry, in budgeted pieces.
                // Whether each cluster met has an old member is decided once
                // per cluster and cycle (a level's content is young together).
                let mut old_cluster = std::mem::take(&mut cycle.old_clusters);
                let mut k = from as usize;
                let pool_young = cycle.pool_end.saturating_sub(cycle.pool_lo) as usize;
                while k < pool_young + cycle.looks.len() {
                    if k < pool_young {
                        let p = cycle.pool_lo + k as u32;
                        let item = chunks.at(p);
                        if item.flags() & flags::DISREGARD != 0 {
                            // Its mark bit too (see the major loop below).
                            marker.set_mark(p);
                            if let Some(o) = item.object() {
                                marker.scan_slot(p, item, o);
                            }
                        }
                    } else {
                        let y = cycle.looks[k - pool_young];
                        look_at_young(&mut marker, &mut old_cluster, stage, cycle, y);
                    }
                    k += 1;
                    if budget.spend(1) {
                        cycle.step = Step::Pool(k as u32);
                        cycle.old_clusters = old_cluster;
                        return false;
                    }
                }
                i = cycle.pool_end;
            }
            while i < cycle.pool_end {
                let item = chunks.at(i);
                if item.flags() & flags::DISREGARD != 0 {
                    // A pool object is scanned here, never greyed (`admit`
                    // refuses it), and nothing frees it: its mark bit is
                    // set anyway, so that every handle to it marking meets
                    // later costs a bit test, not a queue entry and a load
                    // of its item (in the demo at 1M, a third of a minor
                    // cycle's pops were its components' handles to pooled
                    // assets). Every test of a pool object's bit treats it
                    // as marked already (the write barrier, the re-scans,
                    // the looks: `DISREGARD` or black), the sweep and the
                    // hiding never read bits below the pool's end, and a
                    // minor cycle keeps the bit (sticky, as an old
                    // object's): young pool objects get theirs above.
                    marker.set_mark(i);
                    if let Some(p) = item.object() {
                        marker.scan_slot(i, item, p);
                    }
                }
                i += 1;
                if budget.spend(1) {
                    cycle.step = Step::Pool(i);
                    return false;
                }
            }
            cycle.step = Step::Remembered(0);
        }
        // A minor cycle's remembered set: the old objects changed since the
        // last cycle, re-scanned in budgeted pieces (each one's flag is
        // cleared first, so that a write after its re-scan lists it again
        // for the looks below). The entries lie scattered over the heap:
        // the items, objects and reference buffers of the next ones are
        // loaded ahead, as the re-scan list's are (see [`ahead`]).
        if let Step::Remembered(from) = cycle.step {
            let mut k = from;
            while k < cycle.remembered.len() {
                let i = cycle.remembered[k];
                ahead_of(
                    &marker,
                    &chunks,
                    cycle.remembered.get(k + RESCAN_AHEAD).copied(),
                    cycle.remembered.get(k + RESCAN_AHEAD / 2).copied(),
                    cycle.remembered.get(k + RESCAN_AHEAD / 4).copied(),
                );
                k += 1;
                let item = chunks.at(i);
                let f = item.clear(flags::REGREY);
                // A write before its re-scan does not list it again, and may
                // have stored a handle to an object created during the cycle
                // (which stays young): kept for the next remembered set, if
                // the cycle has created any object so far.
                if !cycle.born.is_empty() {
                    note_written(&mut self.written_seen, &mut cycle.written, i);
                }
                if f & flags::UNREACHABLE == 0
                    && (marker.is_black(i) || f & (flags::BORN | flags::DISREGARD) != 0)
                {
                    if let Some(p) = item.object() {
                        marker.scan_slot(i, item, p);
                    }
                }
                if budget.spend(1) {
                    cycle.step = Step::Remembered(k);
                    return false;
                }
            }
            cycle.remembered.clear();
            for (_, r) in stage.referencers {
                let mut counting = CountVisits {
                    inner: &mut marker,
                    n: 0,
                };
                r.add_referenced_objects(&mut counting);
                cycle.stats.roots += counting.n;
            }
            cycle.step = Step::Mark;
        }

        if cycle.finishing {
            // What objects traced at birth since the previous slice shaded:
            // budgeted, as the scan below (the looks queue the rest), and
            // never in the way of the re-scans this slice owes.
            marker.take_shaded(&mut self.shaded, budget);
            // Objects created since the previous slice: black, but their
            // references must be traced. Until the queue first runs dry
            // they wait for the looks (by then most of what they reference
            // is marked, and each of their handles costs a bit test); from
            // then on they are scanned first in each slice, so that a
            // re-scan they were listed for since they were created is void
            // (see `scan_born`). Budgeted: the looks scan the rest.
            scan_born(
                &mut marker,
                &chunks,
                &cycle.born,
                &mut cycle.born_seen,
                &mut self.traced,
                Written {
                    seen: &mut self.written_seen,
                    list: &mut cycle.written,
                    on: generational,
                },
                budget,
            );
        }
        if cycle.finishing {
            // Marking has looked at the re-scan list before and left some of
            // it: this slice re-scans what the program changed since the
            // previous one, and a share of the older entries (a sixteenth of
            // those left when the queue first ran dry, at least
            // [`RESCAN_FLOOR`]), whatever its budget. So the list never
            // grows from slice to slice, the older entries are gone within
            // [`FINISH_SLICES`] slices, and what a final look re-scans is
            // what the program changed since the previous slice. That work
            // is counted, not charged, and a timed slice's deadline moves
            // back by its time: the drain below still gets its budget, so
            // marking keeps its pace however much the program writes.
            let t = std::time::Instant::now();
            let older = self.regrey.len() - written_since;
            let must = written_since + older.min(cycle.backlog_share);
            // A timed slice (a tick) keeps its budget as a cap: the owed
            // re-scans stop at its deadline, and the drain then gets at
            // least [`DRAIN_SHARE`] of the budget, so the slice takes at
            // most 1 + `DRAIN_SHARE` times its budget however much the
            // program wrote. What the owed re-scans leave joins the older
            // entries (a program that writes more than a slice can re-scan
            // then makes the list grow, and the debt limit finishes the
            // cycle). A slice counted in work units keeps the structural
            // bound: it re-scans everything owed, and so does every timed
            // slice once [`FINISH_SLICES`] of them were cut (see
            // [`cut`]), with a share of the list as it stands then.
            let timed = budget
                .deadline()
                .zip(self.config.incremental)
                .filter(|_| !cut(cycle.cut_slices));
            if cut(cycle.cut_slices) && cycle.cut_slices == FINISH_SLICES {
                cycle.cut_slices += 1;
                cycle.backlog_share = older.div_ceil(FINISH_SLICES).max(RESCAN_FLOOR);
            }
            let must = if cut(cycle.cut_slices) {
                written_since + older.min(cycle.backlog_share)
            } else {
                must
            };
            let owed = rescan(
                &mut marker,
                &chunks,
                &mut self.regrey,
                Written {
                    seen: &mut self.written_seen,
                    list: &mut cycle.written,
                    on: generational,
                },
                must,
                timed.map(|(d, _)| d),
                budget,
            );
            if owed == Rescanned::Cut {
                cycle.cut_slices += 1;
            }
            match timed {
                Some((_, slice)) => {
                    let now = std::time::Instant::now();
                    budget.extend(now.checked_add(slice.mul_f64(DRAIN_SHARE)));
                }
                None => budget.extend(budget.deadline().and_then(|d| d.checked_add(t.elapsed()))),
            }
        }

        loop {
            if !drain(&mut marker, budget) {
                cycle.stats.marked += std::mem::take(&mut marker.marked);
                return false;
            }
            // The queue is dry. Look at everything the program did since the
            // previous slice; if none of it greys an object, marking is done.
            // The looks keep only handles that would mark something (their
            // entries are filtered once, below), so they leave no dead
            // entries for a later slice to drop.
            let looks_from = marker.queue_len();
            // New roots and strong handles.
            let roots = &stage.array.roots_mut()[cycle.roots_seen..];
            for &i in roots {
                let item = chunks.at(i);
                if item.is_root() {
                    if let Some(s) = NonZeroU32::new(item.serial()) {
                        marker.visit(AnyObj::new(i, s));
                    }
                }
            }
            cycle.roots_seen += roots.len();
            // Objects whose garbage mark was cleared.
            for h in std::mem::take(&mut *self.greyed.lock()) {
                marker.visit(h);
            }
            // Objects created since the previous look: black, but their
            // references must be traced. Budgeted: a mutator allocating
            // fast can create many between two slices.
            // (Once marking is finishing, most were scanned when the slice
            // began.) Those traced at birth have shaded what they referenced
            // unmarked then: what is still unmarked is queued.
            let all = marker.take_shaded(&mut self.shaded, budget)
                && scan_born(
                    &mut marker,
                    &chunks,
                    &cycle.born,
                    &mut cycle.born_seen,
                    &mut self.traced,
                    Written {
                        seen: &mut self.written_seen,
                        list: &mut cycle.written,
                        on: generational,
                    },
                    budget,
                );
            if !all {
                marker.drop_inadmissible_from(looks_from);
                cycle.stats.marked += std::mem::take(&mut marker.marked);
                return false;
            }
            // Objects changed since they were last looked at: through
            // `get_mut` (the write barrier), or, for interior-mutable
            // classes, handed out as `&T` at all (the read barrier). Re-scan
            // the ones already scanned; the others will be scanned, as they
            // are now, if reached. The list holds each object changed since
            // marking last emptied it once, so it can hold what the program
            // changed during the whole cycle: it is worked off under the
            // budget, and a slice that stops before its end leaves the rest
            // for the next ones, which owe, before anything else, what the
            // program changed in between (see `finishing`).
            if !cycle.finishing {
                cycle.finishing = true;
                cycle.backlog_share = self.regrey.len().div_ceil(FINISH_SLICES).max(RESCAN_FLOOR);
            }
            let emptied = Rescanned::Emptied
                == rescan(
                    &mut marker,
                    &chunks,
                    &mut self.regrey,
                    Written {
                        seen: &mut self.written_seen,
                        list: &mut cycle.written,
                        on: generational,
                    },
                    0,
                    None,
                    budget,
                );
            if !emptied {
                marker.drop_inadmissible_from(looks_from);
                cycle.stats.marked += std::mem::take(&mut marker.marked);
                return false;
            }
            // Referencers report afresh: nothing tells us what they changed.
            for (_, r) in stage.referencers {
                r.add_referenced_objects(&mut marker);
            }
            marker.drop_inadmissible_from(looks_from);
            // Done when what the program did greys nothing new. (The queue
            // may still hold entries: stale handles and garbage objects are
            // queued by every look, and never marked.)
            let before = marker.marked;
            if !drain(&mut marker, budget) {
                cycle.stats.marked += std::mem::take(&mut marker.marked);
                return false;
            }
            if marker.marked == before {
                break;
            }
        }
        cycle.stats.marked += std::mem::take(&mut marker.marked);
        debug_assert!(
            self.shaded.is_empty(),
            "the looks queued every shaded handle"
        );
        // Marking is over: hand the bitmap to the array, which hides what it
        // did not reach until the sweep has flagged all of it.
        self.marking = false;
        let array = &mut *stage.array;
        // Generational: the purge's changes are remembered for the next cycle.
        array.watch(self.gen);
        let c = &mut array.condemned;
        std::mem::swap(&mut c.marks, &mut self.bits);
        c.start = cycle.pool_end;
        c.end = cycle.hw;
        c.active = true;
        cycle.scanned_born = cycle.born_seen;
        // A major cycle's sweep walks the bitmap from the pool's end; a minor
        // one walks its list from the start.
        cycle.step = Step::Sweep(match cycle.kind {
            CycleKind::Major => cycle.pool_end,
            CycleKind::Minor => 0,
        });
        true
    }
}

/// The share of its budget a timed finishing slice keeps for the drain after
/// the re-scans it owes (which stop at its deadline): such a slice takes at
/// most `1 + DRAIN_SHARE` times its budget.
pub(super) const DRAIN_SHARE: f64 = 0.5;

/// Whether a cycle whose timed finishing slices had their owed re-scans cut
/// by their deadline `cut_slices` times has had its share: from then on every
/// slice re-scans all it owes, whatever its deadline, so that a program that
/// writes more each frame than a slice can re-scan (and creates nothing, so
/// no debt forces the cycle) cannot keep marking from ending.
/// (`cut_slices` goes one past [`FINISH_SLICES`] when the share of the
/// list each slice owes is recomputed for that switch.)
fn cut(cut_slices: usize) -> bool {
    cut_slices >= FINISH_SLICES
}

/// How a [`rescan`] ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Rescanned {
    /// The list is empty.
    Emptied,
    /// The budget ran out, or the owed entries were done, with entries left.
    Left,
    /// A timed rescan's deadline came before the owed entries were done.
    Cut,
}

/// Owed re-scans between two readings of the clock when they stop at a
/// deadline (a re-scan costs up to a microsecond).
const OWED_CLOCK_EVERY: usize = 16;

/// Entries of the re-scan list that a slice re-scans once marking has first
/// looked at it, on top of what the program changed since the previous
/// slice, whatever its budget: the list shrinks by at least this much a
/// slice (or empties), however fast the program writes.
pub(super) const RESCAN_FLOOR: usize = 32;

/// Slices within which a finishing marking re-scans the entries its first
/// look left on the re-scan list (on top of what the program changes).
pub(super) const FINISH_SLICES: usize = 16;

/// Where a cycle lists the objects changed while it marked (see
/// [`note_written`]); `on` in generational mode.
struct Written<'w> {
    seen: &'w mut Vec<u64>,
    list: &'w mut Vec<u32>,
    on: bool,
}

/// Re-scans objects of the re-scan list `regrey`, newest first: the first
/// `must` counted as work done (not charged to the budget), the others while
/// the budget lasts; with `until` (a timed slice), the first `must` only,
/// and only until that time, the rest left on the list. A listed object is re-scanned if marking has scanned it
/// (it is black) or if it was created during the cycle or is in the pool (it
/// is scanned whatever it holds); the others are scanned, as they are now,
/// if reached. An entry whose flag was cleared since it was listed (by
/// [`scan_born`], which scanned the object after the write) is dropped.
/// Listed objects lie scattered over the heap: the items and objects of the
/// next entries are loaded ahead, as marking's pipeline does. Says whether
/// the list is empty, or why it stopped.
fn rescan(
    marker: &mut Marker<'_>,
    chunks: &Chunks,
    regrey: &mut Vec<u32>,
    written: Written<'_>,
    must: usize,
    until: Option<std::time::Instant>,
    budget: &mut Budget,
) -> Rescanned {
    let mut n = 0usize;
    while let Some(i) = regrey.pop() {
        if let Some(d) = until {
            // Timed: the owed entries only, until `d`; the rest stays listed.
            if n >= must {
                regrey.push(i);
                return Rescanned::Left;
            }
            if n % OWED_CLOCK_EVERY == 0 && std::time::Instant::now() >= d {
                regrey.push(i);
                return Rescanned::Cut;
            }
        }
        let len = regrey.len();
        let from_top = |d: usize| len.checked_sub(d).map(|k| regrey[k]);
        ahead_of(
            marker,
            chunks,
            from_top(RESCAN_AHEAD),
            from_top(RESCAN_AHEAD / 2),
            from_top(RESCAN_AHEAD / 4),
        );
        let item = chunks.at(i);
        let f = item.clear(flags::REGREY);
        if f & flags::REGREY == 0 {
            continue;
        }
        if written.on {
            note_written(written.seen, written.list, i);
        }
        if f & flags::UNREACHABLE == 0
            && (marker.is_black(i) || f & (flags::BORN | flags::DISREGARD) != 0)
        {
            if let Some(p) = item.object() {
                marker.scan_slot(i, item, p);
            }
        }
        n += 1;
        if n <= must {
            budget.note(1);
        } else if budget.spend(1) {
            return if regrey.is_empty() {
                Rescanned::Emptied
            } else {
                Rescanned::Left
            };
        }
    }
    Rescanned::Emptied
}

/// Entries of the re-scan list (or a minor cycle's remembered set) loaded
/// ahead of the one re-scanned: the
/// item of the one this far down the stack, the object of the one half as
/// far, the buffers behind the object's references of the one a quarter
/// as far (each loaded a few entries after the line it reads was asked
/// for).
const RESCAN_AHEAD: usize = 12;

/// Asks for the memory the re-scans of the next entries of a list of
/// objects to re-scan will read: the item of `far`, the object of `mid`
/// (asked for [`RESCAN_AHEAD`] / 2 entries earlier as `far`), and the
/// buffers behind the references of `near`, if it will be scanned (the
/// same test as the re-scan's: live, and black, created during the cycle or
/// in the pool; a young entry of a minor cycle's remembered set, which is
/// not, costs its item only).
#[inline(always)]
fn ahead_of(
    marker: &Marker<'_>,
    chunks: &Chunks,
    far: Option<u32>,
    mid: Option<u32>,
    near: Option<u32>,
) {
    if let Some(item) = far.and_then(|i| chunks.get(i)) {
        prefetch_line(item as *const _);
    }
    if let Some(p) = mid.and_then(|i| chunks.get(i)).and_then(|it| it.object()) {
        prefetch_line(p.as_ptr());
    }
    if let Some(i) = near {
        if let Some(item) = chunks.get(i) {
            let f = item.flags();
            if f & flags::UNREACHABLE == 0
                && (marker.is_black(i) || f & (flags::BORN | flags::DISREGARD) != 0)
            {
                if let Some(p) = item.object() {
                    Marker::prefetch_refs(p);
                }
            }
        }
    }
}

/// Objects traced at birth the born scan passes over per unit of work (a
/// bitmap test each, against a scan's cold item and object).
const PASSED_PER_UNIT: usize = 32;

/// Scans the objects created during the cycle from position `*seen` of
/// `born` (each one once: black, but its references must be traced), while
/// the budget lasts. An object listed for a re-scan since it was created
/// has its flag cleared here (and is noted as written): this scan reads it
/// as it is, after the write, and [`rescan`] drops the entry. An object
/// traced at its creation (its bit in `traced` set, see
/// [`Collector::trace_at_birth`]) is passed over at the cost of that bit
/// test, its bit cleared and no unit spent: a write to it since then listed
/// it for a re-scan, which [`rescan`] does (it is `BORN`); one unit per
/// [`PASSED_PER_UNIT`] such objects, so that a slice passes over a bounded
/// number. Returns `true` once all of `born` is scanned.
fn scan_born(
    marker: &mut Marker<'_>,
    chunks: &Chunks,
    born: &[u32],
    seen: &mut usize,
    traced: &mut [u64],
    written: Written<'_>,
    budget: &mut Budget,
) -> bool {
    let mut passed = 0usize;
    while *seen < born.len() {
        let i = born[*seen];
        *seen += 1;
        if let Some(w) = traced.get_mut((i >> 6) as usize) {
            let bit = 1u64 << (i & 63);
            if *w & bit != 0 {
                *w &= !bit;
                passed += 1;
                if passed % PASSED_PER_UNIT == 0 && budget.spend(1) {
                    return *seen == born.len();
                }
                continue;
            }
        }
        marker.set_mark(i);
        let item = chunks.at(i);
        let mut f = item.flags();
        if f & flags::REGREY != 0 {
            f = item.clear(flags::REGREY);
            if written.on {
                note_written(written.seen, written.list, i);
            }
        }
        // Scanned even if marked as garbage since: it survives this
        // cycle, so what it references must too (else clearing the
        // mark later would expose freed children).
        if f & flags::UNREACHABLE == 0 {
            if let Some(p) = item.object() {
                marker.scan_slot(i, item, p);
            }
        }
        if budget.spend(1) {
            return *seen == born.len();
        }
    }
    true
}

impl Collector {
    /// Traces the object just created in slot `i` through `&mut Heap` while
    /// a cycle marks (the caller checks [`is_marking`](Self::is_marking)),
    /// as [`scan_born`] would have later: sets its mark bit (below the
    /// cycle's high water; the slots above count as marked) and shades what
    /// its fields and outer reference, as [`Marker::visit`] does (handles to
    /// marked objects, old ones in a minor cycle among them, and to objects
    /// created during the cycle cost a bit test; the others wait in
    /// `shaded` for the looks, which queue those still unmarked then, see
    /// [`Marker::take_shaded`]). The object is in the cache: its
    /// value was just written. A new object has no inners and is in no
    /// cluster, and a pool object is scanned like any other. Its bit in
    /// `traced` tells the born scan to pass it over.
    #[inline(never)]
    pub(crate) fn trace_at_birth(&mut self, chunks: &Chunks, i: u32) {
        let Some(cycle) = self.cycle.as_deref() else {
            return;
        };
        let item = chunks.at(i);
        let Some(p) = item.object() else {
            return;
        };
        // What it references is shaded into `shaded`, not the work queue.
        let mut marker = Marker::new(chunks, &mut self.bits, &mut self.shaded, cycle.hw, None);
        marker.set_mark(i);
        marker.scan_slot(i, item, p);
        let (w, bit) = ((i >> 6) as usize, 1u64 << (i & 63));
        if w >= self.traced.len() {
            self.traced.resize(w + 1, 0);
        }
        self.traced[w] |= bit;
    }
}

/// A minor cycle's look at object `y`, which joined a cluster or was filed
/// under an outer since the last cycle: a young member of a cluster with
/// old members or a young inner of an old outer (when outers keep inners)
/// is greyed. An old (marked) one, or one already greyed, costs a bit test.
/// (The slot may hold another object by now: the look is at what it holds.)
fn look_at_young(
    marker: &mut Marker<'_>,
    old_cluster: &mut HashMap<u32, bool, FxBuildHasher>,
    stage: &Stage<'_>,
    cycle: &Cycle,
    y: u32,
) {
    if marker.is_black(y) {
        return;
    }
    let item = stage.array.chunks().at(y);
    let f = item.flags();
    let (Some(_), Some(s)) = (item.object(), NonZeroU32::new(item.serial())) else {
        return;
    };
    // The pool's new objects are scanned from its range.
    if f & flags::DISREGARD != 0 {
        return;
    }
    let root = item.cluster_root();
    if root != 0
        && f & flags::DEAD == 0
        && *old_cluster.entry(root).or_insert_with(|| {
            // Young members are not black yet: any black
            // member is an old one.
            stage
                .clusters
                .members_of(root)
                .iter()
                .any(|m| marker.is_black(m.index()))
        })
    {
        // A young member of a cluster with old members: the
        // cluster is alive, and keeps it.
        marker.visit(AnyObj::new(y, s));
    } else if cycle.outer_keeps_inners && f & flags::DEAD == 0 {
        // An old outer is alive, and keeps its young inners; so does a pool
        // object (permanent, and never marked).
        let h = AnyObj::new(y, s);
        if let Ok(Some(o)) = stage.array.outer(h, flags::DEAD) {
            let kept = marker.is_black(o.index())
                || stage.array.chunks().at(o.index()).flags() & flags::DISREGARD != 0;
            if kept && stage.array.lookup(o, flags::DEAD).is_ok() {
                marker.visit(h);
            }
        }
    }
}

/// Lists slot `i` in a cycle's `written` objects, once (`seen`: one bit per
/// slot): they join the remembered set when the cycle completes, since any
/// of them may now hold a handle to an object the cycle created (which stays
/// young).
fn note_written(seen: &mut Vec<u64>, written: &mut Vec<u32>, i: u32) {
    let (w, bit) = ((i >> 6) as usize, 1u64 << (i & 63));
    if w >= seen.len() {
        seen.resize(w + 1, 0);
    }
    if seen[w] & bit == 0 {
        seen[w] |= bit;
        written.push(i);
    }
}

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
use crate::array::flags;
use crate::handle::AnyObj;
use crate::trace::Visitor;

impl Collector {
    /// One marking slice. Returns `true` when marking is complete (the cycle
    /// has moved on to the purge).
    pub(super) fn mark_slice(
        &mut self,
        stage: &mut Stage<'_>,
        cycle: &mut Cycle,
        budget: &mut Budget,
    ) -> bool {
        stage.array.sync();
        stage.array.take_born(&mut cycle.born);
        stage.array.take_touched(&mut self.regrey);
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
            .with_partial(&mut self.partial);
        let drain = |marker: &mut Marker<'_>, budget: &mut Budget| match pool {
            Some(pool) => marker.drain_parallel(pool, budget),
            None => marker.drain(budget),
        };
        cycle.stats.mark_threads = cycle
            .stats
            .mark_threads
            .max(pool.map_or(1, par::Pool::threads));

        // The pool's objects are permanent; what they reference stays alive.
        if let Step::Pool(from) = cycle.step {
            let mut i = from;
            if cycle.kind == CycleKind::Minor {
                // The pool is old: pool objects changed since the last cycle
                // are in the remembered set, and only new ones (young) are
                // scanned. One flag test per young object, in budgeted
                // pieces: the young list is what the program allocated.
                // Whether each cluster met has an old member is decided once
                // per cluster and cycle (a level's content is young together).
                let mut old_cluster = std::mem::take(&mut cycle.old_clusters);
                let mut k = from as usize;
                while k < cycle.list.len() {
                    let y = cycle.list[k];
                    k += 1;
                    look_at_young(&mut marker, &mut old_cluster, stage, cycle, y);
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
        // for the looks below).
        if let Step::Remembered(from) = cycle.step {
            let mut k = from;
            while k < cycle.remembered.len() {
                let i = cycle.remembered[k];
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
            while cycle.born_seen < cycle.born.len() {
                let i = cycle.born[cycle.born_seen];
                cycle.born_seen += 1;
                marker.set_mark(i);
                let item = chunks.at(i);
                // Scanned even if marked as garbage since: it survives this
                // cycle, so what it references must too (else clearing the
                // mark later would expose freed children).
                if item.flags() & flags::UNREACHABLE == 0 {
                    if let Some(p) = item.object() {
                        marker.scan_slot(i, item, p);
                    }
                }
                if budget.spend(1) {
                    marker.drop_inadmissible_from(looks_from);
                    cycle.stats.marked += std::mem::take(&mut marker.marked);
                    return false;
                }
            }
            // Objects changed since they were last looked at: through
            // `get_mut` (the write barrier), or, for interior-mutable
            // classes, handed out as `&T` at all (the read barrier). Re-scan
            // the ones already scanned; the others will be scanned, as they
            // are now, if reached. The whole list, always: it holds each
            // object changed since the previous slice once, so its cost is
            // the program's writes, never the heap; it is charged to the
            // budget; and a mutator that writes between every two slices
            // cannot keep marking from ending (a partial pass could be
            // refilled as fast as it is worked off).
            while let Some(i) = self.regrey.pop() {
                let item = chunks.at(i);
                let f = item.clear(flags::REGREY);
                if self.config.generational {
                    note_written(&mut self.written_seen, &mut cycle.written, i);
                }
                if f & flags::UNREACHABLE == 0
                    && (marker.is_black(i) || f & (flags::BORN | flags::DISREGARD) != 0)
                {
                    if let Some(p) = item.object() {
                        marker.scan_slot(i, item, p);
                    }
                }
                budget.spend(1);
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

/// A minor cycle's look at young object `y`: a new pool object is
/// scanned, a young member of a cluster with old members or a young
/// inner of an old outer (when outers keep inners) is greyed.
fn look_at_young(
    marker: &mut Marker<'_>,
    old_cluster: &mut HashMap<u32, bool, FxBuildHasher>,
    stage: &Stage<'_>,
    cycle: &Cycle,
    y: u32,
) {
    let item = stage.array.chunks().at(y);
    let f = item.flags();
    let (Some(p), Some(s)) = (item.object(), NonZeroU32::new(item.serial())) else {
        return;
    };
    if f & flags::DISREGARD != 0 {
        marker.scan_slot(y, item, p);
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
        // An old outer is alive, and keeps its young inners.
        let h = AnyObj::new(y, s);
        if let Ok(Some(o)) = stage.array.outer(h, flags::DEAD) {
            if marker.is_black(o.index()) && stage.array.lookup(o, flags::DEAD).is_ok() {
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

//! The outer → inners index (the outer half of Unreal's
//! `FUObjectHashTables`, its `ObjectOuterMap`): for each live object that
//! was given as the outer of others, the handles of those inners.
//!
//! It serves [`Heap::for_each_with_outer`](crate::Heap::for_each_with_outer)
//! and, with [`GcConfig::outer_keeps_inners`](crate::GcConfig::outer_keeps_inners),
//! the marker, which then visits an object's inners when it scans it. Only
//! objects created with an outer pay anything: one push at creation, one
//! counter bump at free; objects without an outer never touch it.
//!
//! # Keys and stale entries
//!
//! An entry is keyed by the outer's whole handle (index and serial), and is
//! dropped when the outer is freed, so a slot reused by another object never
//! inherits the old object's inners. An inner is stored as a whole handle
//! too, and is *not* searched for when it is freed (that would cost the
//! length of its outer's list): its outer's entry only counts one more stale
//! handle, and is compacted once half of it is stale, which keeps both the
//! memory and the time amortized O(1) per inner. A stale handle can never be
//! taken for another object: the marker, like every resolution, checks the
//! serial, and a freed slot's serial has moved on for good.

use rustc_hash::FxHashMap;

use crate::handle::AnyObj;

/// One outer's inners.
#[derive(Default)]
struct Entry {
    /// Every inner created with this outer since the last compaction, in
    /// creation order; `stale` of them have been freed since.
    inners: Vec<AnyObj>,
    stale: usize,
}

/// The index; see the module docs. The heap keeps it behind a lock (inners
/// are created through `&Heap`, on any thread); the collector borrows it
/// exclusively for a slice.
#[derive(Default)]
pub(crate) struct Inners {
    by_outer: FxHashMap<u64, Entry>,
    /// Slots of the inners filed since the last cycle started (created
    /// with an outer, or moved under one): the only young objects a minor
    /// cycle looks at for an old outer that keeps them (see
    /// `gc::mark_phase::look_at_young`). Taken by each cycle's start.
    pub(crate) filed: Vec<u32>,
}

impl Inners {
    /// Whether no object has inners (then freeing needs no bookkeeping).
    #[inline(always)]
    pub(crate) fn is_empty(&self) -> bool {
        self.by_outer.is_empty()
    }

    /// Takes `inner` off `outer`'s list: it moved to another outer
    /// ([`Heap::rename`](crate::Heap::rename)). O(inners of `outer`).
    pub(crate) fn remove(&mut self, outer: AnyObj, inner: AnyObj) {
        if let Some(e) = self.by_outer.get_mut(&outer.to_bits()) {
            if let Some(k) = e.inners.iter().position(|&h| h == inner) {
                e.inners.remove(k);
            }
        }
    }

    /// Records that `inner` was created with `outer`, a live object.
    pub(crate) fn insert(&mut self, outer: AnyObj, inner: AnyObj) {
        self.filed.push(inner.index());
        self.by_outer
            .entry(outer.to_bits())
            .or_default()
            .inners
            .push(inner);
    }

    /// The inners of the object whose handle is `outer_bits`, possibly with
    /// stale handles among them, in creation order.
    #[inline]
    pub(crate) fn of(&self, outer_bits: u64) -> &[AnyObj] {
        self.by_outer
            .get(&outer_bits)
            .map_or(&[], |e| e.inners.as_slice())
    }

    /// An outer was freed: forgets its inners, but for those `live`
    /// accepts. Their headers still name the outer's handle, which a
    /// restore (`Heap::spawn_at` at the outer's serial) makes resolve
    /// again; the entry then lists them as that outer's inners once more.
    /// The entry goes with its last inner ([`forget_inner`](Self::forget_inner)).
    /// O(inners of `outer`), as the entry's drop already was.
    pub(crate) fn forget_outer(&mut self, outer: AnyObj, live: impl Fn(AnyObj) -> bool) {
        let key = outer.to_bits();
        if let Some(e) = self.by_outer.get_mut(&key) {
            e.inners.retain(|&h| live(h));
            e.stale = 0;
            if e.inners.is_empty() {
                self.by_outer.remove(&key);
            }
        }
    }

    /// Whether the object whose handle is `outer_bits` has an entry (a
    /// restored outer whose former inners survived it).
    pub(crate) fn has_entry(&self, outer_bits: u64) -> bool {
        self.by_outer.contains_key(&outer_bits)
    }

    /// An inner of `outer` was freed (its slot's serial has already moved
    /// on). Compacts the outer's entry, keeping the inners `live` accepts,
    /// once half of it is stale. Returns `true` if that left the outer with
    /// no inners (its entry is gone).
    pub(crate) fn forget_inner(&mut self, outer: AnyObj, live: impl Fn(AnyObj) -> bool) -> bool {
        let key = outer.to_bits();
        // No entry: the outer was freed first (in this purge or an earlier one).
        let Some(e) = self.by_outer.get_mut(&key) else {
            return false;
        };
        e.stale += 1;
        if e.stale * 2 < e.inners.len() {
            return false;
        }
        e.inners.retain(|&h| live(h));
        e.stale = 0;
        // (Never shrunk here: the purge allocates nothing while it frees.)
        if e.inners.is_empty() {
            self.by_outer.remove(&key);
            return true;
        }
        false
    }

    /// Bytes the index holds (its table and lists), for memory reports.
    pub(crate) fn allocated_bytes(&self) -> usize {
        self.by_outer.capacity() * (std::mem::size_of::<(u64, Entry)>() + 1)
            + self
                .by_outer
                .values()
                .map(|e| e.inners.capacity() * std::mem::size_of::<AnyObj>())
                .sum::<usize>()
            + self.filed.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::num::NonZeroU32;

    fn obj(i: u32, generation: u32) -> AnyObj {
        AnyObj::new(i, NonZeroU32::new((1 << 22) | generation).unwrap())
    }

    #[test]
    fn compaction_keeps_the_live_and_drops_emptied_entries() {
        let mut ix = Inners::default();
        let outer = obj(0, 0);
        let inners: Vec<_> = (1..=6).map(|i| obj(i, 0)).collect();
        for &h in &inners {
            ix.insert(outer, h);
        }
        let mut live: HashSet<AnyObj> = inners.iter().copied().collect();
        // Two frees: below half stale, nothing compacted.
        for h in &inners[..2] {
            live.remove(h);
            assert!(!ix.forget_inner(outer, |h| live.contains(&h)));
        }
        assert_eq!(ix.of(outer.to_bits()).len(), 6);
        // The third reaches half: compacted to the three live ones, in order.
        live.remove(&inners[2]);
        assert!(!ix.forget_inner(outer, |h| live.contains(&h)));
        assert_eq!(ix.of(outer.to_bits()), &inners[3..]);
        // A reused slot under the same outer is a different handle.
        let reused = obj(1, 1);
        ix.insert(outer, reused);
        live.insert(reused);
        for h in [inners[3], inners[4], inners[5], reused] {
            live.remove(&h);
            ix.forget_inner(outer, |h| live.contains(&h));
        }
        assert!(ix.is_empty(), "the last inner's free drops the entry");
        // Another generation of the outer's slot is another key.
        ix.insert(outer, inners[0]);
        assert!(ix.of(obj(0, 1).to_bits()).is_empty());
        // An outer freed while an inner lives keeps that inner's entry (a
        // restore at the outer's serial finds it); the inner's own free
        // then drops it.
        ix.insert(outer, inners[1]);
        ix.forget_outer(outer, |h| h == inners[1]);
        assert_eq!(ix.of(outer.to_bits()), [inners[1]]);
        assert!(ix.has_entry(outer.to_bits()));
        assert!(ix.forget_inner(outer, |_| false));
        assert!(ix.is_empty());
        // Freeing an inner whose outer is gone is harmless.
        assert!(!ix.forget_inner(outer, |_| true));
    }
}

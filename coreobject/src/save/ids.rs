//! Persistent ids and the "changed since the last save" bits, kept beside
//! the object table.
//!
//! A persistent id is a `u64`: the origin (the store or process that first
//! saved the object) in the high 24 bits, a serial per origin in the low 40.
//! Handles stay 8-byte index + serial; persistent ids live only in saves
//! and stores. The heap keeps, per slot, the id of the object it holds (and
//! that object's serial, so a reused slot is never taken for its former
//! object), a reverse map from id to slot, and one bit per slot set by the
//! write barrier.

use std::sync::atomic::Ordering::Relaxed;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::sync::AtomicU64;

/// Bits of a persistent id that hold the per-origin serial.
pub const SERIAL_BITS: u32 = 40;

/// A saved object's identity across sessions and processes.
///
/// ```
/// use coreobject::save::PersistentId;
/// let id = PersistentId::new(3, 17).unwrap();
/// assert_eq!((id.origin(), id.serial()), (3, 17));
/// assert_eq!(PersistentId::from_bits(id.bits()), Some(id));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PersistentId(u64);

impl PersistentId {
    /// The id with `origin` (below 2^24) and `serial` (1 to 2^40 - 1).
    pub fn new(origin: u32, serial: u64) -> Option<PersistentId> {
        (origin < (1 << 24) && serial != 0 && serial < (1 << SERIAL_BITS))
            .then(|| PersistentId((u64::from(origin) << SERIAL_BITS) | serial))
    }
    /// The id whose bits are `bits` (`None` for a serial of 0).
    pub fn from_bits(bits: u64) -> Option<PersistentId> {
        (bits & ((1 << SERIAL_BITS) - 1) != 0).then_some(PersistentId(bits))
    }
    /// The bits, as stored.
    pub fn bits(self) -> u64 {
        self.0
    }
    /// The origin that assigned it.
    pub fn origin(self) -> u32 {
        (self.0 >> SERIAL_BITS) as u32
    }
    /// Its serial within the origin.
    pub fn serial(self) -> u64 {
        self.0 & ((1 << SERIAL_BITS) - 1)
    }
}

/// Per slot: the serial of the object the id belongs to, the id, whether
/// the object's record is in the store.
#[derive(Clone, Copy, Default)]
pub(crate) struct Entry {
    pub(crate) serial: u32,
    pub(crate) id: u64,
    pub(crate) stored: bool,
}

/// The heap's side table of persistent ids and changed bits.
#[derive(Default)]
pub(crate) struct Tracker {
    pub(crate) entries: Vec<Entry>,
    pub(crate) by_id: FxHashMap<u64, u32>,
    /// The next serial to hand out (at least the store's).
    pub(crate) next: u64,
    /// Whether the next capture looks at every slot (no capture yet, or
    /// [`forget_store`](crate::Heap::forget_store)): `false` once one began.
    pub(crate) tracking: bool,
    /// The high water when the last capture began: slots from here on are
    /// new since, and not in the dirty set.
    pub(crate) high_water: u32,
    /// The saved rooted objects' ids.
    pub(crate) roots: FxHashSet<u64>,
    /// Slots holding a saved object of an interior-mutable class (captured
    /// at every save's final step).
    pub(crate) interior: FxHashSet<u32>,
    /// How many entries are `stored`.
    pub(crate) count: usize,
    /// Moves on when a capture begins or ends, or the store is loaded or
    /// forgotten: a [`Capture`](super::Capture) of another epoch is stale.
    pub(crate) epoch: u64,
}

impl Tracker {
    /// The id of the object with handle (`index`, `serial`), if it has one.
    #[inline]
    pub(crate) fn id_of(&self, index: u32, serial: u32) -> Option<u64> {
        match self.entries.get(index as usize) {
            Some(e) if e.id != 0 && e.serial == serial => Some(e.id),
            _ => None,
        }
    }

    /// Sets slot `slot`'s entry's `stored`, keeping the count.
    pub(crate) fn set_stored(&mut self, slot: u32, stored: bool) {
        let e = &mut self.entries[slot as usize];
        self.count = self.count - usize::from(e.stored) + usize::from(stored);
        e.stored = stored;
    }

    /// Gives the object (`index`, `serial`) the id `id`, replacing whatever
    /// the slot held.
    pub(crate) fn assign(&mut self, index: u32, serial: u32, id: u64, stored: bool) {
        let i = index as usize;
        if self.entries.len() <= i {
            self.entries.resize(i + 1, Entry::default());
        }
        let old = self.entries[i];
        if old.id != 0 && old.id != id {
            self.by_id.remove(&old.id);
        }
        self.count = self.count - usize::from(old.stored) + usize::from(stored);
        self.entries[i] = Entry { serial, id, stored };
        self.by_id.insert(id, index);
    }
}

/// Slots to look at in the next capture: one bit per slot below the high
/// water of the last capture's start, set by every door that changes what
/// a save of the slot would hold (the first write through `get_mut` or a
/// data view, a rename, a creation, a root or garbage mark, the sweep
/// finding the object unreachable, the purge freeing it). Slots at or above
/// that high water are new since, and a capture looks at all of them.
///
/// The bits are set through `&Heap` on any thread (a relaxed `fetch_or`:
/// only the bit matters, and it is read under `&mut Heap`, which orders
/// every earlier set before the read) and taken under `&mut Heap`.
/// Before the first capture the set is empty and setting a bit costs a
/// bounds check.
///
/// A second set marks the slots whose objects' *inners* a capture must look
/// at too: a garbage mark set or cleared, a move to another outer, the
/// sweep finding the object unreachable (each can change whether the
/// objects inside it are saved).
#[derive(Default)]
pub(crate) struct Dirty {
    words: Vec<AtomicU64>,
    subtree: Vec<AtomicU64>,
}

impl Dirty {
    /// Marks slot `index` (nothing if it is beyond the covered range).
    #[inline]
    pub(crate) fn mark(&self, index: u32) {
        if let Some(w) = self.words.get((index >> 6) as usize) {
            w.fetch_or(1 << (index & 63), Relaxed);
        }
    }

    /// [`mark`](Self::mark) for the holder of `&mut Heap` (a write through
    /// `get_mut`): no other thread sets bits meanwhile, so a plain load and
    /// store do what `fetch_or` does, without its locked instruction.
    #[inline]
    pub(crate) fn mark_mut(&mut self, index: u32) {
        if let Some(w) = self.words.get((index >> 6) as usize) {
            w.store(w.load(Relaxed) | 1 << (index & 63), Relaxed);
        }
    }

    /// Marks slot `index`, and its object's inners.
    #[inline]
    pub(crate) fn mark_subtree(&self, index: u32) {
        self.mark(index);
        if let Some(w) = self.subtree.get((index >> 6) as usize) {
            w.fetch_or(1 << (index & 63), Relaxed);
        }
    }

    /// Appends the marked slots to `out` and those marked with their inners
    /// to `subtree`, ascending, clears them, and covers at least
    /// `high_water` slots from now on.
    pub(crate) fn take(&mut self, high_water: u32, out: &mut Vec<u32>, subtree: &mut Vec<u32>) {
        for (set, out) in [(&mut self.words, out), (&mut self.subtree, subtree)] {
            for (k, w) in set.iter_mut().enumerate() {
                let mut bits = w.swap(0, Relaxed);
                while bits != 0 {
                    out.push((k as u32) * 64 + bits.trailing_zeros());
                    bits &= bits - 1;
                }
            }
            let want = (high_water as usize).div_ceil(64);
            while set.len() < want {
                set.push(AtomicU64::new(0));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Dirty;

    /// `mark_mut` (the `&mut Heap` door's plain store) marks exactly what
    /// `mark` (the shared door's `fetch_or`) marks, against a set: random
    /// slots inside and past the covered range, taken between rounds.
    /// Fails if `mark_mut` drops a bit, or sets its neighbours'.
    #[test]
    fn mark_mut_marks_what_mark_marks() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut rand = move |n: u32| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % u64::from(n)) as u32
        };
        let (mut shared, mut owned) = (Dirty::default(), Dirty::default());
        let (mut a, mut b, mut sub) = (Vec::new(), Vec::new(), Vec::new());
        // Smaller under miri (about 30 s at the full size there).
        let (rounds, marks) = if cfg!(miri) { (6u32, 60) } else { (20, 300) };
        for round in 0..rounds {
            let covered = 64 * round;
            let mut model = std::collections::BTreeSet::new();
            for _ in 0..marks {
                let i = rand(covered + 200);
                shared.mark(i);
                owned.mark_mut(i);
                if i < covered {
                    model.insert(i);
                }
            }
            a.clear();
            b.clear();
            shared.take(covered + 64, &mut a, &mut sub);
            owned.take(covered + 64, &mut b, &mut sub);
            let want: Vec<u32> = model.into_iter().collect();
            assert_eq!(a, want, "round {round}: mark");
            assert_eq!(b, want, "round {round}: mark_mut");
        }
    }
}

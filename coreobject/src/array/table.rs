//! The object table (Unreal's `FChunkedFixedUObjectArray` plus the index
//! allocator of `FUObjectArray`).
//!
//! Items live in chunks of [`CHUNK_SIZE`] that are allocated on first use (or
//! all at once, with preallocation) and never move, so a `&Item` stays valid
//! for the table's life. The chunk directory is sized for the object cap up
//! front; installing a chunk is one compare-and-swap.
//!
//! # Index allocation: one atomic
//!
//! Like `hecs`'s entity reservation, every creation makes a single
//! `fetch_sub` on `cursor`:
//!
//! * a positive previous value `n` means "take `free[n - 1]`": freed indices are
//!   reused last-in, first-out;
//! * a previous value `n <= 0` means "append": the new index is
//!   `high_water - n`.
//!
//! The free list itself only changes under `&mut Table` (when the collector
//! frees objects), so concurrent creators read it without a lock. `sync`
//! folds the cursor back into `free` and `high_water` at each such point.

use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::item::Item;
use crate::sync::{AtomicI64, AtomicPtr};

/// Items per chunk (Unreal's `NumElementsPerChunk`).
#[cfg(not(any(loom, miri)))]
pub const CHUNK_SIZE: u32 = 64 * 1024;
/// Items per chunk: small under miri, whose interpreter would spend minutes
/// initializing 64K-item chunks, and which then crosses chunk boundaries.
#[cfg(all(miri, not(loom)))]
pub const CHUNK_SIZE: u32 = 256;
/// Items per chunk: small under loom, so a model can grow the table.
#[cfg(loom)]
pub const CHUNK_SIZE: u32 = 2;
const CHUNK_SHIFT: u32 = CHUNK_SIZE.trailing_zeros();

/// The chunk directory. Shared (through an `Arc`) with every
/// [`StrongObj`](crate::StrongObj), whose drop must reach its item's ref count
/// on any thread, even after the heap is gone.
pub(crate) struct Chunks {
    dir: Box<[AtomicPtr<Item>]>,
}

// SAFETY: all shared state is atomics; chunk memory is only freed in `drop`.
unsafe impl Sync for Chunks {}
// SAFETY: as above; the raw chunk pointers own plain `Item`s.
unsafe impl Send for Chunks {}

impl Chunks {
    fn new(cap: u32) -> Chunks {
        let n = cap.div_ceil(CHUNK_SIZE) as usize;
        Chunks {
            dir: (0..n)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
        }
    }

    /// The item at `index`, if its chunk exists.
    #[inline(always)]
    pub(crate) fn get(&self, index: u32) -> Option<&Item> {
        item_in(&self.dir, index)
    }

    /// The item at `index`, which the caller knows is allocated.
    #[inline(always)]
    pub(crate) fn at(&self, index: u32) -> &Item {
        match self.get(index) {
            Some(item) => item,
            None => unreachable_chunk(index),
        }
    }

    /// Makes sure the chunk holding `index` exists. Lock-free: racing
    /// threads each build one, one wins the CAS, the others drop theirs.
    fn ensure(&self, index: u32) {
        let slot = &self.dir[(index >> CHUNK_SHIFT) as usize];
        if !slot.load(Ordering::Acquire).is_null() {
            return;
        }
        let fresh: Box<[Item]> = (0..CHUNK_SIZE).map(|_| Item::new()).collect();
        let fresh = Box::into_raw(fresh) as *mut Item;
        if slot
            .compare_exchange(
                std::ptr::null_mut(),
                fresh,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
        {
            // SAFETY: `fresh` came from `Box::into_raw` of a CHUNK_SIZE slice just above
            // and lost the race, so nobody else has seen it.
            drop(unsafe { Box::from_raw(chunk_slice(fresh)) });
        }
    }

    pub(crate) fn allocated_chunks(&self) -> usize {
        self.dir
            .iter()
            .filter(|c| !c.load(Ordering::Relaxed).is_null())
            .count()
    }
}

/// The item at `index` in a chunk directory, if its chunk exists.
#[inline(always)]
fn item_in(dir: &[AtomicPtr<Item>], index: u32) -> Option<&Item> {
    let base = dir
        .get((index >> CHUNK_SHIFT) as usize)?
        .load(Ordering::Acquire);
    if base.is_null() {
        return None;
    }
    // SAFETY: a non-null directory entry points at CHUNK_SIZE items that live as long
    // as the directory (chunks never move or shrink), and the offset is < CHUNK_SIZE.
    Some(unsafe { &*base.add((index & (CHUNK_SIZE - 1)) as usize) })
}

#[cold]
#[inline(never)]
fn unreachable_chunk(index: u32) -> ! {
    panic!("coreobject internal error: item {index} lies in an unallocated chunk")
}

fn chunk_slice(base: *mut Item) -> *mut [Item] {
    std::ptr::slice_from_raw_parts_mut(base, CHUNK_SIZE as usize)
}

impl Drop for Chunks {
    fn drop(&mut self) {
        for c in self.dir.iter() {
            let p = c.load(Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: every non-null entry came from `Box::into_raw` in `ensure`, and
                // `drop` runs once, after every other owner of the `Arc` is gone.
                drop(unsafe { Box::from_raw(chunk_slice(p)) });
            }
        }
    }
}

/// The table: chunks plus the index allocator.
pub(crate) struct Table {
    pub(crate) chunks: Arc<Chunks>,
    /// `chunks.dir`, copied out of the `Arc` so that a lookup makes one
    /// dependent load fewer (see [`Table::item`]).
    dir: NonNull<AtomicPtr<Item>>,
    dir_len: usize,
    cap: u32,
    /// See the module docs.
    cursor: AtomicI64,
    /// Freed indices; the last one is reused first.
    free: Vec<u32>,
    /// Slots `[0, high_water)` have been handed out at least once (as of the
    /// last `sync`).
    high_water: u32,
    /// While a collection cycle is in flight: every index handed out since
    /// it started (by `reserve`, seen at `sync`, or by `claim`).
    taken: Option<Vec<u32>>,
}

// SAFETY: `dir` points into the directory that `chunks` owns, which is only
// ever accessed through atomics; everything else in `Table` is `Send + Sync`.
unsafe impl Send for Table {}
// SAFETY: as above.
unsafe impl Sync for Table {}

impl Table {
    pub(crate) fn new(cap: u32, preallocate: bool) -> Table {
        let chunks = Arc::new(Chunks::new(cap));
        if preallocate {
            for c in 0..cap.div_ceil(CHUNK_SIZE) {
                chunks.ensure(c * CHUNK_SIZE);
            }
        }
        let dir = NonNull::from(&chunks.dir[..]).cast::<AtomicPtr<Item>>();
        let dir_len = chunks.dir.len();
        Table {
            chunks,
            dir,
            dir_len,
            cap,
            cursor: AtomicI64::new(0),
            free: Vec::new(),
            high_water: 0,
            taken: None,
        }
    }

    pub(crate) fn cap(&self) -> u32 {
        self.cap
    }

    /// The item at `index`, if its chunk exists: [`Chunks::get`] without the
    /// hop through the `Arc`, for the resolve path.
    #[inline(always)]
    pub(crate) fn item(&self, index: u32) -> Option<&Item> {
        // SAFETY: `dir` points at the `dir_len` directory entries owned by
        // `self.chunks`, which lives (and never moves its directory) as long as `self`.
        let dir = unsafe { std::slice::from_raw_parts(self.dir.as_ptr(), self.dir_len) };
        item_in(dir, index)
    }

    /// Reserves a slot index, lock-free, from any thread. `None` at the cap.
    /// The slot's chunk exists when this returns.
    #[inline]
    pub(crate) fn reserve(&self) -> Option<u32> {
        let n = self.cursor.fetch_sub(1, Ordering::Relaxed);
        let index = if n > 0 {
            self.free[(n - 1) as usize]
        } else {
            let i = self.high_water as i64 - n;
            if i >= self.cap as i64 {
                return None;
            }
            i as u32
        };
        self.chunks.ensure(index);
        Some(index)
    }

    /// Slots handed out so far, including reservations since the last `sync`.
    #[inline]
    pub(crate) fn high_water(&self) -> u32 {
        let n = self.cursor.load(Ordering::Acquire);
        let appended = if n < 0 { -n } else { 0 };
        (self.high_water as i64 + appended).min(self.cap as i64) as u32
    }

    /// Folds concurrent reservations into `free` and `high_water`.
    pub(crate) fn sync(&mut self) {
        let n = self.cursor.load(Ordering::Acquire);
        let keep = n.max(0) as usize;
        let hw = if n >= 0 {
            self.high_water
        } else {
            (self.high_water as i64 - n).min(self.cap as i64) as u32
        };
        if let Some(taken) = &mut self.taken {
            taken.extend(self.free.get(keep..).unwrap_or(&[]).iter().rev());
            taken.extend(self.high_water..hw);
        }
        self.free.truncate(keep);
        self.high_water = hw;
        self.cursor.store(self.free.len() as i64, Ordering::Release);
    }

    /// Returns a freed index to the free list (call `sync` first).
    pub(crate) fn release(&mut self, index: u32) {
        debug_assert_eq!(
            self.cursor.load(Ordering::Relaxed),
            self.free.len() as i64,
            "release without sync: reservations would be lost"
        );
        self.free.push(index);
        self.cursor.store(self.free.len() as i64, Ordering::Release);
    }

    /// Claims a specific free index (Unreal's `AlreadyAllocatedIndex`).
    /// Returns `false` if the index is in use. Call `sync` first.
    pub(crate) fn claim(&mut self, index: u32) -> bool {
        if index >= self.cap {
            return false;
        }
        if index < self.high_water {
            let Some(pos) = self.free.iter().rposition(|&i| i == index) else {
                return false;
            };
            self.free.remove(pos);
        } else {
            // Skipped indices become free, lowest on top so they are used in order.
            self.free.extend((self.high_water..index).rev());
            self.high_water = index + 1;
        }
        self.cursor.store(self.free.len() as i64, Ordering::Release);
        self.chunks.ensure(index);
        if let Some(taken) = &mut self.taken {
            taken.push(index);
        }
        true
    }

    /// Makes room for `n` more freed indices, so that freeing allocates
    /// nothing.
    pub(crate) fn reserve_free(&mut self, n: usize) {
        self.free.reserve(n);
    }

    /// Starts or stops recording the indices handed out (see `taken`).
    pub(crate) fn record(&mut self, on: bool) {
        self.taken = on.then(|| self.taken.take().unwrap_or_default());
        if let Some(t) = &mut self.taken {
            t.clear();
        }
    }

    /// Moves the recorded indices into `out`.
    pub(crate) fn take_recorded(&mut self, out: &mut Vec<u32>) {
        if let Some(t) = &mut self.taken {
            out.append(t);
        }
    }

    /// Indices currently on the free list (as of the last `sync`).
    #[cfg(test)]
    pub(crate) fn free_len(&self) -> usize {
        self.free.len()
    }

    /// Free-list entries not yet taken by a reservation.
    #[inline]
    pub(crate) fn free_remaining(&self) -> usize {
        self.cursor.load(Ordering::Acquire).max(0) as usize
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn reserve_appends_then_reuses_lifo() {
        let mut t = Table::new(10, false);
        assert_eq!(t.reserve(), Some(0));
        assert_eq!(t.reserve(), Some(1));
        assert_eq!(t.reserve(), Some(2));
        t.sync();
        assert_eq!(t.high_water(), 3);
        t.release(0);
        t.release(2);
        assert_eq!(t.reserve(), Some(2));
        assert_eq!(t.reserve(), Some(0));
        assert_eq!(t.reserve(), Some(3));
        t.sync();
        assert_eq!(t.high_water(), 4);
        assert_eq!(t.free_len(), 0);
    }

    #[test]
    fn reserve_stops_at_cap_and_sync_clamps() {
        let mut t = Table::new(2, false);
        assert!(t.reserve().is_some());
        assert!(t.reserve().is_some());
        assert_eq!(t.reserve(), None);
        assert_eq!(t.reserve(), None);
        assert_eq!(t.high_water(), 2);
        t.sync();
        assert_eq!(t.high_water(), 2);
        t.release(1);
        assert_eq!(t.reserve(), Some(1));
    }

    #[test]
    fn claim_takes_free_or_fresh_indices_only() {
        let mut t = Table::new(100, false);
        t.reserve();
        t.sync();
        assert!(!t.claim(0), "index 0 is in use");
        assert!(t.claim(5));
        assert!(!t.claim(5));
        // 1..5 became free and are handed out in order.
        assert_eq!(t.reserve(), Some(1));
        assert_eq!(t.reserve(), Some(2));
        assert!(!t.claim(100));
    }

    #[test]
    fn chunks_are_lazy_unless_preallocated() {
        let t = Table::new(3 * CHUNK_SIZE, false);
        assert_eq!(t.chunks.allocated_chunks(), 0);
        t.reserve();
        assert_eq!(t.chunks.allocated_chunks(), 1);
        let p = Table::new(3 * CHUNK_SIZE, true);
        assert_eq!(p.chunks.allocated_chunks(), 3);
    }
}

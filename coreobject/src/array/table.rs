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
//! `fetch_sub` on `cursor`. As of the last `sync`, `cursor` counts the free
//! slots: the live entries of the free list plus the gap slots (see below).
//! A previous value `n` means:
//!
//! * `n > gaps`: take the free list's live entry of rank `n - gaps - 1`
//!   (counted from the bottom): freed indices are reused last-in, first-out;
//! * `0 < n <= gaps`: take the gap slot of rank `gaps - n`: gap slots are
//!   handed out lowest first, once the free list is used up;
//! * `n <= 0`: append: the new index is `high_water - n`.
//!
//! The free list and the gaps only change under `&mut Table` (when the
//! collector frees objects, and in `claim`), so concurrent creators read them
//! without a lock. `sync` folds the cursor back into them and `high_water` at
//! each such point.
//!
//! # Claiming a chosen index (`create_at`) in O(1)
//!
//! * Past the high water: the skipped indices become free, and the high water
//!   moves past the claimed one. Up to [`SMALL_GAP`] of them join the free list,
//!   lowest on top, so that they are handed out next and in order. A longer
//!   run becomes a **gap**: a range of never-used slots, kept per chunk as a
//!   run or, once claims have split it, a bitmap. A gap costs no memory per
//!   index and no chunk until an index in it is handed out.
//! * In a gap: the index leaves its chunk's run or bitmap.
//! * On the free list: the entry becomes a tombstone, found through a side map
//!   index -> position (built on the first such claim); the live entries keep
//!   their order. While tombstones exist, `reserve` finds the live entry of a
//!   rank through a Fenwick tree; the list is compacted once half of it is dead.
//!
//! So slots below `high_water` are in use, free (free list or gap), parked or
//! retired: gap slots are not objects, and may lie in chunks that were never
//! allocated ([`Chunks::at`] reads those as empty).

use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::item::Item;
use super::vm;
use crate::sync::{AtomicI64, AtomicPtr};

/// Items per chunk (Unreal's `NumElementsPerChunk`).
#[cfg(not(any(loom, miri)))]
pub const CHUNK_SIZE: u32 = 64 * 1024;
/// Items per chunk: small under miri, whose interpreter would spend minutes
/// initializing 64K-item chunks, and which then crosses chunk boundaries.
/// Every heap's first object builds a chunk, so its size is a cost per
/// test; it stays above `SMALL_GAP`, so that a far `create_at` still
/// leaves a gap, as it does natively.
#[cfg(all(miri, not(loom)))]
pub const CHUNK_SIZE: u32 = 128;
/// Items per chunk: small under loom, so a model can grow the table.
#[cfg(loom)]
pub const CHUNK_SIZE: u32 = 2;
const CHUNK_SHIFT: u32 = CHUNK_SIZE.trailing_zeros();

/// Bytes of one chunk.
const CHUNK_BYTES: usize = CHUNK_SIZE as usize * std::mem::size_of::<Item>();

/// Chunks mapped together from the system, when [`vm::ENABLED`]: the fewest
/// that fill whole 2 MiB units (4 chunks of 1.5 MiB make three), so that a
/// system with transparent huge pages always on can back them whole.
const GROUP: usize = if vm::ENABLED {
    let mut k = 1;
    while k * CHUNK_BYTES % vm::HUGE != 0 {
        k += 1;
    }
    k
} else {
    1
};

/// Chunks below this fault in item by item as they are first used; later
/// ones are filled in one system call when installed ([`vm::populate`]),
/// which costs a heap past 64K objects its memory a chunk at a time.
const LAZY_CHUNKS: usize = 1;

/// The chunk directory. Shared (through an `Arc`) with every
/// [`StrongObj`](crate::StrongObj), whose drop must reach its item's ref count
/// on any thread, even after the heap is gone.
pub(crate) struct Chunks {
    dir: Box<[AtomicPtr<Item>]>,
    /// When [`vm::ENABLED`]: the mappings of [`GROUP`] chunks each, made on
    /// first use; chunk `c` lies in group `c / GROUP`. Empty otherwise.
    groups: Box<[AtomicPtr<u8>]>,
    /// Whether groups are advised huge pages when mapped
    /// ([`HeapConfig::huge_pages`](crate::HeapConfig::huge_pages)).
    huge: bool,
    /// What [`at`](Chunks::at) gives for a slot whose chunk was never
    /// allocated: an empty, never-used item. Only ever read.
    vacant: Item,
}

// SAFETY: all shared state is atomics; chunk memory is only freed in `drop`.
unsafe impl Sync for Chunks {}
// SAFETY: as above; the raw chunk pointers own plain `Item`s.
unsafe impl Send for Chunks {}

impl Chunks {
    fn new(cap: u32, huge: bool) -> Chunks {
        let n = cap.div_ceil(CHUNK_SIZE) as usize;
        let groups = if vm::ENABLED { n.div_ceil(GROUP) } else { 0 };
        Chunks {
            dir: (0..n)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
            groups: (0..groups)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
            huge,
            vacant: Item::new(),
        }
    }

    /// The item at `index`, if its chunk exists.
    #[inline(always)]
    pub(crate) fn get(&self, index: u32) -> Option<&Item> {
        item_in(&self.dir, index)
    }

    /// The item at `index`. A slot whose chunk was never allocated (a gap
    /// slot left by `create_at`, or the index of a made-up or foreign
    /// handle) reads as an empty, never-used item: serial 0, no object, no
    /// flags. Only slots handed out (whose chunks exist) are ever written.
    #[inline(always)]
    pub(crate) fn at(&self, index: u32) -> &Item {
        match self.get(index) {
            Some(item) => item,
            None => &self.vacant,
        }
    }

    /// Makes sure the chunk holding `index` exists. Lock-free: racing
    /// threads each build one, one wins the CAS, the others drop theirs.
    /// `fill`: fault a chunk that this call installs in now (past the
    /// first [`LAZY_CHUNKS`]), as creation does; preallocation does not, so
    /// that a preallocated table still costs memory only as it is used.
    #[inline(always)]
    fn ensure(&self, index: u32, fill: bool) {
        let slot = &self.dir[(index >> CHUNK_SHIFT) as usize];
        if slot.load(Ordering::Acquire).is_null() {
            self.install(index, fill);
        }
    }

    /// [`ensure`](Self::ensure) when the chunk is missing: builds it.
    #[cold]
    #[inline(never)]
    fn install(&self, index: u32, fill: bool) {
        let slot = &self.dir[(index >> CHUNK_SHIFT) as usize];
        if vm::ENABLED {
            let c = (index >> CHUNK_SHIFT) as usize;
            let chunk = self
                .group(c / GROUP)
                .wrapping_add((c % GROUP) * CHUNK_BYTES);
            // Racing threads store the same pointer: whoever loses has nothing to undo.
            let won = slot
                .compare_exchange(
                    std::ptr::null_mut(),
                    chunk.cast(),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok();
            if won && fill && c >= LAZY_CHUNKS {
                vm::populate(chunk, CHUNK_BYTES);
            }
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

    /// Bytes mapped for group `g`: its chunks, rounded up to whole huge
    /// pages (only the last group may have fewer than [`GROUP`] chunks).
    fn group_bytes(&self, g: usize) -> usize {
        let chunks = GROUP.min(self.dir.len() - g * GROUP);
        (chunks * CHUNK_BYTES).next_multiple_of(vm::HUGE)
    }

    /// The mapping of group `g`, made now if it was not. Lock-free: racing
    /// threads each map one, one wins the CAS, the others unmap theirs.
    fn group(&self, g: usize) -> *mut u8 {
        let entry = &self.groups[g];
        let base = entry.load(Ordering::Acquire);
        if !base.is_null() {
            return base;
        }
        let bytes = self.group_bytes(g);
        // Advised (with `huge`) before any chunk of it is populated.
        let (fresh, dirty) = vm::take(bytes, false, self.huge);
        // SAFETY: a run of `bytes >= dirty` that nobody else holds.
        unsafe { fresh.write_bytes(0, dirty) };
        // Zeroed memory is a run of vacant items: every field of `Item::new()` is zero.
        match entry.compare_exchange(
            std::ptr::null_mut(),
            fresh,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => fresh,
            Err(winner) => {
                // SAFETY: `fresh` was taken just above with `bytes` and lost the race,
                // so nobody else has seen it.
                unsafe { vm::give(fresh, bytes, 0, self.huge) };
                winner
            }
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

fn chunk_slice(base: *mut Item) -> *mut [Item] {
    std::ptr::slice_from_raw_parts_mut(base, CHUNK_SIZE as usize)
}

impl Drop for Chunks {
    fn drop(&mut self) {
        let v = &self.vacant;
        debug_assert!(
            std::thread::panicking()
                || (v.object().is_none() && v.serial() == 0 && v.flags() == 0 && v.refcount() == 0),
            "coreobject internal error: the vacant item was written to"
        );
        if vm::ENABLED {
            for (g, entry) in self.groups.iter().enumerate() {
                let p = entry.load(Ordering::Acquire);
                if p.is_null() {
                    continue;
                }
                let bytes = self.group_bytes(g);
                // Only the chunks installed were written: the next heap to take
                // this group zeroes those.
                let installed = (g * GROUP..((g + 1) * GROUP).min(self.dir.len()))
                    .filter(|&c| !self.dir[c].load(Ordering::Acquire).is_null())
                    .max()
                    .map_or(0, |c| c + 1 - g * GROUP);
                // SAFETY: a non-null group came from `vm::take` of `group_bytes(g)`
                // bytes, and `drop` runs once, after every other owner is gone.
                unsafe { vm::give(p, bytes, installed * CHUNK_BYTES, self.huge) };
            }
            return;
        }
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

/// [`Table::walk`]: the items of a range of indices, a chunk at a time.
pub(crate) struct Walk<'t> {
    table: &'t Table,
    /// The current chunk's items still to visit; the first is at `index`.
    items: std::slice::Iter<'t, Item>,
    index: u32,
    /// Where the range's part in the next chunk starts.
    next: u32,
    end: u32,
}

impl Walk<'_> {
    /// Moves on to the next chunk with items in range that exists; false at
    /// the end of the range.
    #[inline]
    fn advance(&mut self) -> bool {
        while self.next < self.end {
            let start = self.next;
            let c = start >> CHUNK_SHIFT;
            let stop = (start | (CHUNK_SIZE - 1)).saturating_add(1).min(self.end);
            self.next = stop;
            if let Some(chunk) = self.table.chunk(c) {
                let lo = (start & (CHUNK_SIZE - 1)) as usize;
                self.items = chunk[lo..lo + (stop - start) as usize].iter();
                self.index = start;
                return true;
            }
        }
        false
    }
}

impl<'t> Iterator for Walk<'t> {
    type Item = (u32, &'t Item);

    #[inline]
    fn next(&mut self) -> Option<(u32, &'t Item)> {
        loop {
            if let Some(item) = self.items.next() {
                let i = self.index;
                self.index += 1;
                return Some((i, item));
            }
            if !self.advance() {
                return None;
            }
        }
    }

    /// A loop per chunk, so that `sum`, `count` and `for_each` run over a
    /// plain slice.
    #[inline]
    fn fold<B, F: FnMut(B, Self::Item) -> B>(mut self, init: B, mut f: F) -> B {
        let mut acc = init;
        loop {
            let base = self.index;
            for (k, item) in std::mem::take(&mut self.items).enumerate() {
                acc = f(acc, (base + k as u32, item));
            }
            if !self.advance() {
                return acc;
            }
        }
    }
}

/// Skipped runs up to this long join the free list; longer ones become gaps.
pub(crate) const SMALL_GAP: u32 = 64;

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
    /// Freed indices (and short skipped runs); the last live one is reused first.
    free: FreeList,
    /// Never-used slots below the high water, handed out after the free list.
    gaps: Gaps,
    /// Every slot in `[0, high_water)` has been handed out at least once or
    /// is a gap slot (as of the last `sync`).
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
    #[cfg(test)]
    pub(crate) fn new(cap: u32, preallocate: bool) -> Table {
        Table::with_huge_pages(cap, preallocate, false)
    }

    /// [`new`](Self::new), its chunk groups advised huge pages if `huge`
    /// ([`HeapConfig::huge_pages`](crate::HeapConfig::huge_pages)).
    pub(crate) fn with_huge_pages(cap: u32, preallocate: bool, huge: bool) -> Table {
        let chunks = Arc::new(Chunks::new(cap, huge));
        if preallocate {
            for c in 0..cap.div_ceil(CHUNK_SIZE) {
                chunks.ensure(c * CHUNK_SIZE, false);
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
            free: FreeList::default(),
            gaps: Gaps::default(),
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

    /// The items of chunk `c`, if it exists: [`item`](Self::item) for a
    /// whole chunk, one directory load for `CHUNK_SIZE` items.
    #[inline(always)]
    fn chunk(&self, c: u32) -> Option<&[Item]> {
        // SAFETY: `dir` points at the `dir_len` directory entries owned by
        // `self.chunks`, which lives (and never moves its directory) as long as `self`.
        let dir = unsafe { std::slice::from_raw_parts(self.dir.as_ptr(), self.dir_len) };
        let base = dir.get(c as usize)?.load(Ordering::Acquire);
        if base.is_null() {
            return None;
        }
        // SAFETY: a non-null directory entry points at CHUNK_SIZE items that live as
        // long as the directory (chunks never move or shrink); items are atomics, so
        // shared references to them may coexist with other threads' stores.
        Some(unsafe { std::slice::from_raw_parts(base, CHUNK_SIZE as usize) })
    }

    /// The items at indices `from .. end` whose chunks exist, in index
    /// order, with their indices: the iterators' walk, which loads the chunk
    /// directory once per chunk instead of once per item and skips chunks
    /// never allocated (gaps left by `create_at`) whole.
    #[inline]
    pub(crate) fn walk(&self, from: u32, end: u32) -> Walk<'_> {
        Walk {
            table: self,
            items: [].iter(),
            index: from,
            next: from,
            end,
        }
    }

    /// Reserves a slot index, lock-free, from any thread: one `fetch_sub`.
    /// `None` at the cap. The slot's chunk exists when this returns.
    #[inline]
    pub(crate) fn reserve(&self) -> Option<u32> {
        let n = self.cursor.fetch_sub(1, Ordering::Relaxed);
        let index = self.index_at(n)?;
        self.chunks.ensure(index, true);
        Some(index)
    }

    /// Reserves `k` cursor values at once, lock-free: one `fetch_sub` for a
    /// batch (a per-thread cache's refill, see `tlab`). Returns the highest;
    /// the batch is `n - k + 1 ..= n`, and [`value_index`](Self::value_index)
    /// turns each into the index that a lone reservation finding the cursor
    /// there would take. Until the next [`sync`](Self::sync) they stay
    /// valid; `sync` counts every value taken, so the values left unused go
    /// back through [`sync_returning`](Self::sync_returning).
    #[inline]
    pub(crate) fn reserve_values(&self, k: i64) -> i64 {
        self.cursor.fetch_sub(k, Ordering::Relaxed)
    }

    /// The index of cursor value `v` (taken by
    /// [`reserve_values`](Self::reserve_values) since the last `sync`), with
    /// its chunk made; `None` past the cap.
    #[inline]
    pub(crate) fn value_index(&self, v: i64) -> Option<u32> {
        let index = self.index_at(v)?;
        self.chunks.ensure(index, true);
        Some(index)
    }

    /// Cursor values at or below this map past the cap (as of the last `sync`).
    #[inline]
    pub(crate) fn past_cap(&self) -> i64 {
        self.high_water as i64 - self.cap as i64
    }

    /// The cursor (see the module docs).
    #[inline]
    pub(crate) fn cursor(&self) -> i64 {
        self.cursor.load(Ordering::Acquire)
    }

    /// Moves the cursor back up to `n`: the values below `n` down to the old
    /// cursor were reserved and never used (a cache's, settled through
    /// `&mut`), so they are as if never taken.
    pub(crate) fn untake(&mut self, n: i64) {
        debug_assert!(n >= self.cursor.load(Ordering::Relaxed));
        self.cursor.store(n, Ordering::Release);
    }

    /// [`high_water`](Self::high_water) with the cursor at `n`.
    #[inline]
    pub(crate) fn high_water_at(&self, n: i64) -> u32 {
        let appended = if n < 0 { -n } else { 0 };
        (self.high_water as i64 + appended).min(self.cap as i64) as u32
    }

    /// [`sync`](Self::sync), then gives back `holes`: ranges `lo ..= next`
    /// of cursor values that caches reserved and never used (none at or
    /// below [`past_cap`](Self::past_cap)). Their indices go on the free
    /// list and out of the record of indices handed out, where `sync` puts
    /// the value `v` at a known place (it records values from the highest
    /// down: position `unreserved - v` among this sync's entries), so each
    /// leaves it in O(1). Costs the holes, not the reservations or the table.
    pub(crate) fn sync_returning(&mut self, holes: &[(i64, i64)], buf: &mut Vec<(usize, u32)>) {
        if holes.is_empty() {
            self.sync();
            return;
        }
        let top = self.unreserved();
        let before = self.taken.as_ref().map_or(0, Vec::len);
        buf.clear();
        for &(lo, next) in holes {
            for v in lo..=next {
                if let Some(i) = self.index_at(v) {
                    buf.push((before + (top - v) as usize, i));
                }
            }
        }
        self.sync();
        if let Some(t) = &mut self.taken {
            // Highest position first, so that each swap_remove moves an
            // entry that is not a hole, or one already checked.
            buf.sort_unstable_by_key(|&(p, _)| std::cmp::Reverse(p));
            for &(p, i) in buf.iter() {
                debug_assert_eq!(t.get(p), Some(&i), "a hole's record is misplaced");
                t.swap_remove(p);
            }
        }
        self.free.reserve(buf.len());
        for &(_, i) in buf.iter() {
            self.free.push(i);
        }
        self.cursor.store(self.unreserved(), Ordering::Release);
    }

    /// The index a reservation that found the cursor at `n` takes: from the
    /// free list while `n` is past the gaps, then from the gaps, then fresh
    /// past the high water. `None` at the cap.
    #[inline(always)]
    fn index_at(&self, n: i64) -> Option<u32> {
        let gaps = self.gaps.len as i64;
        if n > gaps {
            Some(self.free.live_at((n - gaps - 1) as usize))
        } else if n > 0 {
            Some(self.gaps.select((gaps - n) as u32))
        } else {
            let i = self.high_water as i64 - n;
            (i < self.cap as i64).then_some(i as u32)
        }
    }

    /// [`reserve`](Self::reserve) for a caller that holds the table
    /// exclusively: the same cursor step as a plain load and store, so no
    /// locked instruction. Concurrent reservations are impossible (they need
    /// `&Table`), so the fetch-and-subtract has nothing to order against.
    #[inline]
    pub(crate) fn reserve_mut(&mut self) -> Option<u32> {
        let n = self.cursor.load(Ordering::Relaxed);
        let index = self.index_at(n)?;
        self.cursor.store(n - 1, Ordering::Relaxed);
        self.chunks.ensure(index, true);
        Some(index)
    }

    /// One past the highest slot handed out so far, including reservations
    /// since the last `sync`. Gap slots below it are not objects.
    #[inline]
    pub(crate) fn high_water(&self) -> u32 {
        let n = self.cursor.load(Ordering::Acquire);
        let appended = if n < 0 { -n } else { 0 };
        (self.high_water as i64 + appended).min(self.cap as i64) as u32
    }

    /// The cursor value that says "nothing reserved since the last `sync`".
    fn unreserved(&self) -> i64 {
        (self.free.len() + self.gaps.len as usize) as i64
    }

    /// Folds concurrent reservations into the free list, the gaps and
    /// `high_water`.
    pub(crate) fn sync(&mut self) {
        let n = self.cursor.load(Ordering::Acquire);
        let gaps = self.gaps.len as i64;
        let mut taken = self.taken.as_mut();
        if n >= gaps {
            self.free
                .take_top((n - gaps) as usize, taken.as_deref_mut());
        } else {
            self.free.take_top(0, taken.as_deref_mut());
            self.gaps
                .take_lowest((gaps - n.max(0)) as u32, taken.as_deref_mut());
            if n < 0 {
                let hw = (self.high_water as i64 - n).min(self.cap as i64) as u32;
                if let Some(t) = taken {
                    t.extend(self.high_water..hw);
                }
                self.high_water = hw;
            }
        }
        self.cursor.store(self.unreserved(), Ordering::Release);
    }

    /// Returns a freed index to the free list (call `sync` first).
    pub(crate) fn release(&mut self, index: u32) {
        debug_assert_eq!(
            self.cursor.load(Ordering::Relaxed),
            self.unreserved(),
            "release without sync: reservations would be lost"
        );
        self.free.push(index);
        self.cursor.store(self.unreserved(), Ordering::Release);
    }

    /// Returns freed indices to the free list in one batch, as that many
    /// [`release`](Self::release) calls in order would (call `sync` first).
    pub(crate) fn release_batch(&mut self, indices: &[u32]) {
        if indices.is_empty() {
            return;
        }
        debug_assert_eq!(
            self.cursor.load(Ordering::Relaxed),
            self.unreserved(),
            "release without sync: reservations would be lost"
        );
        self.free.extend(indices);
        self.cursor.store(self.unreserved(), Ordering::Release);
    }

    /// Whether `claim(index)` would succeed (call `sync` first).
    pub(crate) fn claimable(&mut self, index: u32) -> bool {
        index < self.cap
            && (index >= self.high_water
                || self.gaps.contains(index)
                || self.free.position(index).is_some())
    }

    /// Claims a specific free index (Unreal's `AlreadyAllocatedIndex`) in
    /// O(1) amortized (see the module docs). Returns `false` if the index is
    /// in use, parked, retired or past the cap. Call `sync` first.
    pub(crate) fn claim(&mut self, index: u32) -> bool {
        if index >= self.cap {
            return false;
        }
        debug_assert_eq!(
            self.cursor.load(Ordering::Relaxed),
            self.unreserved(),
            "claim without sync"
        );
        if index < self.high_water {
            if !self.gaps.remove(index) && !self.free.remove(index) {
                return false;
            }
        } else {
            let hw = self.high_water;
            if index - hw <= SMALL_GAP {
                // Lowest on top, so that they are handed out in order.
                for i in (hw..index).rev() {
                    self.free.push(i);
                }
            } else {
                self.gaps.add(hw, index, self.dir_len);
            }
            self.high_water = index + 1;
        }
        self.cursor.store(self.unreserved(), Ordering::Release);
        self.chunks.ensure(index, true);
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

    /// Moves the recorded indices into `out`: into an empty `out` by
    /// swapping buffers (no copy, however many were recorded).
    pub(crate) fn take_recorded(&mut self, out: &mut Vec<u32>) {
        if let Some(t) = &mut self.taken {
            if out.is_empty() {
                std::mem::swap(out, t);
            } else {
                out.append(t);
            }
        }
    }

    /// Moves the recorded indices to the end of `out`, keeping `out`'s
    /// buffer when it has room for them (a copy of the indices recorded
    /// since the last call, no growth), and swapping buffers only when an
    /// empty `out` has no room (no copy). For a cycle's born list, whose
    /// room is made when the cycle starts: [`take_recorded`](Self::take_recorded)
    /// would hand that room to the table at the first call, and the list
    /// would then double inside later slices, copying all it holds.
    pub(crate) fn take_recorded_into(&mut self, out: &mut Vec<u32>) {
        if let Some(t) = &mut self.taken {
            if out.is_empty() && out.capacity() < t.len() {
                std::mem::swap(out, t);
            } else {
                out.append(t);
            }
        }
    }

    /// Swaps the record's buffer into an empty `out` when the record holds
    /// nothing and has more room: a cycle's born list takes the room a
    /// buffer swap left in the record (the last cycle's born list) instead
    /// of a new allocation, and the record keeps the smaller one.
    pub(crate) fn trade_recorded(&mut self, out: &mut Vec<u32>) {
        if let Some(t) = &mut self.taken {
            if t.is_empty() && out.is_empty() && t.capacity() > out.capacity() {
                std::mem::swap(out, t);
            }
        }
    }

    /// Bytes the record of indices handed out holds (its buffer's room).
    pub(crate) fn recorded_bytes(&self) -> usize {
        self.taken.as_ref().map_or(0, |t| t.capacity() * 4)
    }

    /// Makes `list` the front of the recorded indices (those recorded since
    /// follow it), without copying it; returns the buffer it replaces.
    /// Not recording: returns `list`.
    pub(crate) fn prepend_recorded(&mut self, mut list: Vec<u32>) -> Vec<u32> {
        if let Some(t) = &mut self.taken {
            list.append(t);
            std::mem::swap(t, &mut list);
        }
        list
    }

    /// Live entries on the free list (as of the last `sync`).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn free_len(&self) -> usize {
        self.free.len()
    }

    /// Gap slots (as of the last `sync`).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn gap_len(&self) -> u32 {
        self.gaps.len
    }

    /// Free slots not yet taken by a reservation: free-list entries and gap
    /// slots.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn free_remaining(&self) -> usize {
        self.cursor.load(Ordering::Acquire).max(0) as usize
    }
}

// ----- the free list ----------------------------------------------------------

/// A free-list entry claimed out of the middle of the list.
const TOMB: u32 = u32::MAX;

/// The free list: a stack of indices whose entries `claim` can remove from
/// anywhere in O(1) amortized while the others keep their order.
#[derive(Default)]
struct FreeList {
    /// Entries, bottom first; [`TOMB`] where one was claimed. In blocks, so
    /// that the list grows without copying itself (see [`Blocks`]).
    v: Blocks,
    /// Tombstones in `v`.
    dead: usize,
    /// One per live entry of `v`, while `dead > 0`: finds the live entry of
    /// a rank.
    ranks: Option<Fenwick>,
    /// Index -> position in `v`, built by the first `claim` that needs it and
    /// kept up from then on. Entries taken by reservations go stale in place
    /// and are checked against `v`; a rebuild drops them once they dominate.
    pos: Option<FxHashMap<u32, u32>>,
}

impl FreeList {
    /// Live entries.
    fn len(&self) -> usize {
        self.v.len() - self.dead
    }

    /// The live entry of rank `r`, counted from the bottom.
    #[inline(always)]
    fn live_at(&self, r: usize) -> u32 {
        if self.dead == 0 {
            self.v.get(r)
        } else {
            self.live_at_slow(r)
        }
    }

    #[inline(never)]
    fn live_at_slow(&self, r: usize) -> u32 {
        let ranks = self
            .ranks
            .as_ref()
            .expect("ranks kept while tombstones exist");
        self.v.get(ranks.select(r as u32).0)
    }

    /// Makes room for `n` more pushes in the directory of blocks and in the
    /// side structures of claims, if any; the blocks themselves come one at a
    /// time as pushes need them.
    fn reserve(&mut self, n: usize) {
        self.v.reserve(n);
        if let Some(ranks) = &mut self.ranks {
            ranks.t.reserve(n);
        }
        if let Some(pos) = &mut self.pos {
            pos.reserve(n);
        }
    }

    fn push(&mut self, index: u32) {
        if let Some(pos) = &mut self.pos {
            pos.insert(index, self.v.len() as u32);
        }
        if let Some(ranks) = &mut self.ranks {
            ranks.push(1);
        }
        self.v.push(index);
    }

    /// [`push`](Self::push) of each of `indices`, in order: one copy while
    /// no `claim` has needed positions or ranks.
    fn extend(&mut self, indices: &[u32]) {
        if self.pos.is_none() && self.ranks.is_none() {
            self.v.extend_from_slice(indices);
        } else {
            for &i in indices {
                self.push(i);
            }
        }
    }

    /// Where `index` is on the list, if it is.
    fn position(&mut self, index: u32) -> Option<usize> {
        if self.v.last() == Some(index) {
            return Some(self.v.len() - 1);
        }
        let v = &self.v;
        let pos = self.pos.get_or_insert_with(|| positions(v));
        let p = *pos.get(&index)? as usize;
        (p < v.len() && v.get(p) == index).then_some(p)
    }

    /// Takes `index` off the list; `false` if it is not on it.
    fn remove(&mut self, index: u32) -> bool {
        let Some(p) = self.position(index) else {
            return false;
        };
        if let Some(pos) = &mut self.pos {
            pos.remove(&index);
        }
        if p + 1 == self.v.len() {
            self.v.pop();
            self.trim();
            return true;
        }
        self.v.set(p, TOMB);
        self.dead += 1;
        match &mut self.ranks {
            Some(ranks) => ranks.add(p, -1),
            None => {
                self.ranks = Some(Fenwick::from_counts(
                    self.v.iter_from(0).map(|i| u32::from(i != TOMB)),
                ))
            }
        }
        if self.dead * 2 > self.v.len() {
            self.compact();
        }
        true
    }

    /// Pops tombstones off the top and fits `ranks` to `v`.
    fn trim(&mut self) {
        while self.v.last() == Some(TOMB) {
            self.v.pop();
            self.dead -= 1;
        }
        if self.dead == 0 {
            self.ranks = None;
        } else if let Some(ranks) = &mut self.ranks {
            ranks.truncate(self.v.len());
        }
    }

    /// Drops the tombstones.
    fn compact(&mut self) {
        self.v.retain(|i| i != TOMB);
        self.dead = 0;
        self.ranks = None;
        if self.pos.is_some() {
            self.pos = Some(positions(&self.v));
        }
    }

    /// Drops the live entries of rank `keep` and up (reservations took
    /// them), adding them to `taken`.
    fn take_top(&mut self, keep: usize, taken: Option<&mut Vec<u32>>) {
        if keep >= self.len() {
            return;
        }
        let split = match &self.ranks {
            None => keep,
            Some(ranks) => ranks.select(keep as u32).0,
        };
        if let Some(t) = taken {
            for s in self.v.slices_from(split).rev() {
                if self.dead == 0 {
                    t.extend(s.iter().rev());
                } else {
                    t.extend(s.iter().rev().filter(|&&i| i != TOMB));
                }
            }
        }
        if self.dead > 0 {
            self.dead -= self.v.iter_from(split).filter(|&i| i == TOMB).count();
        }
        self.v.truncate(split);
        self.trim();
        if self
            .pos
            .as_ref()
            .is_some_and(|p| p.len() > 2 * self.v.len() + 1024)
        {
            self.pos = Some(positions(&self.v));
        }
    }
}

/// The index -> position map of a free list.
fn positions(v: &Blocks) -> FxHashMap<u32, u32> {
    v.iter_from(0)
        .enumerate()
        .filter(|&(_, i)| i != TOMB)
        .map(|(p, i)| (i, p as u32))
        .collect()
}

/// Entries per block of a [`Blocks`]: 16 KiB.
#[cfg(not(any(test, miri)))]
const FREE_BLOCK: usize = 4096;
/// Entries per block: small in tests, so that the models cross blocks often.
#[cfg(any(test, miri))]
const FREE_BLOCK: usize = 8;

/// A growable array of `u32` kept in fixed-size blocks that never move: it
/// grows by one block at a time, never by copying what it holds, so a push
/// costs O(1) at worst (a `Vec`'s growth copies the whole list, a step
/// proportional to the heap inside one slice of the purge). Blocks emptied
/// by a shrink are kept for the next growth, as a `Vec` keeps its capacity.
#[derive(Default)]
struct Blocks {
    /// Every block allocated so far; those past `len` hold no entries.
    /// Boxed so that the directory's growth moves pointers, not entries.
    #[allow(clippy::vec_box)]
    dir: Vec<Box<[u32; FREE_BLOCK]>>,
    len: usize,
}

impl Blocks {
    #[inline(always)]
    fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    fn get(&self, i: usize) -> u32 {
        debug_assert!(i < self.len);
        self.dir[i / FREE_BLOCK][i % FREE_BLOCK]
    }

    #[inline]
    fn set(&mut self, i: usize, x: u32) {
        debug_assert!(i < self.len);
        self.dir[i / FREE_BLOCK][i % FREE_BLOCK] = x;
    }

    fn last(&self) -> Option<u32> {
        (self.len > 0).then(|| self.get(self.len - 1))
    }

    /// Makes sure the block that entry `len` goes to exists: one block
    /// allocated, or none.
    #[inline]
    fn room(&mut self) {
        if self.len == self.dir.len() * FREE_BLOCK {
            let block: Box<[u32]> = vec![0; FREE_BLOCK].into_boxed_slice();
            self.dir
                .push(block.try_into().expect("a block of FREE_BLOCK entries"));
        }
    }

    #[inline]
    fn push(&mut self, x: u32) {
        self.room();
        let i = self.len;
        self.dir[i / FREE_BLOCK][i % FREE_BLOCK] = x;
        self.len += 1;
    }

    fn pop(&mut self) -> Option<u32> {
        let x = self.last()?;
        self.len -= 1;
        Some(x)
    }

    fn truncate(&mut self, n: usize) {
        self.len = self.len.min(n);
    }

    /// Pushes each of `xs`, in order, a block's part at a time.
    fn extend_from_slice(&mut self, mut xs: &[u32]) {
        while !xs.is_empty() {
            self.room();
            let (b, o) = (self.len / FREE_BLOCK, self.len % FREE_BLOCK);
            let k = xs.len().min(FREE_BLOCK - o);
            self.dir[b][o..o + k].copy_from_slice(&xs[..k]);
            self.len += k;
            xs = &xs[k..];
        }
    }

    /// The entries `from..len`, bottom first, as slices of whole blocks'
    /// parts.
    fn slices_from(&self, from: usize) -> impl DoubleEndedIterator<Item = &[u32]> + '_ {
        let end = self.len;
        let first = from.min(end) / FREE_BLOCK;
        (first..end.div_ceil(FREE_BLOCK)).map(move |b| {
            let lo = if b == first { from % FREE_BLOCK } else { 0 };
            let hi = end.min((b + 1) * FREE_BLOCK) - b * FREE_BLOCK;
            &self.dir[b][lo..hi]
        })
    }

    /// The entries `from..len`, bottom first.
    fn iter_from(&self, from: usize) -> impl DoubleEndedIterator<Item = u32> + '_ {
        self.slices_from(from).flat_map(|s| s.iter().copied())
    }

    /// Keeps the entries for which `keep` holds, in order.
    fn retain(&mut self, mut keep: impl FnMut(u32) -> bool) {
        let mut w = 0;
        for r in 0..self.len {
            let x = self.get(r);
            if keep(x) {
                self.set(w, x);
                w += 1;
            }
        }
        self.len = w;
    }

    /// Makes room in the directory for `n` more entries (pointers only: a
    /// block's worth of entries costs one), so that pushing them moves no
    /// directory.
    fn reserve(&mut self, n: usize) {
        let blocks = (self.len + n).div_ceil(FREE_BLOCK);
        self.dir.reserve(blocks.saturating_sub(self.dir.len()));
    }
}

// ----- gaps -----------------------------------------------------------------

const WORDS: usize = (CHUNK_SIZE as usize).div_ceil(64);
/// Words per block of a [`Bits`]; a block's count lets `select` skip it.
const BLOCK_WORDS: usize = 64;
const BLOCKS: usize = WORDS.div_ceil(BLOCK_WORDS);

/// Never-used slots below the high water, per chunk: O(1) to add a range
/// (per chunk it spans), to remove one slot, and to find the slot of a rank.
struct Gaps {
    /// Gap slots in all.
    len: u32,
    /// Per chunk of the directory; empty while there are no gaps.
    spans: Vec<Span>,
    /// Gap slots per chunk.
    counts: Fenwick,
}

impl Default for Gaps {
    fn default() -> Gaps {
        Gaps {
            len: 0,
            spans: Vec::new(),
            counts: Fenwick::new(0),
        }
    }
}

impl Gaps {
    /// Adds the never-used slots `[from, to)`.
    fn add(&mut self, from: u32, to: u32, chunks: usize) {
        if self.spans.is_empty() {
            self.spans = (0..chunks).map(|_| Span::Run(0, 0)).collect();
            self.counts = Fenwick::new(chunks);
        }
        let mut i = from;
        while i < to {
            let c = (i >> CHUNK_SHIFT) as usize;
            let base = i & !(CHUNK_SIZE - 1);
            let end = to.min(base + CHUNK_SIZE);
            self.spans[c].add(i - base, end - base);
            self.counts.add(c, i64::from(end - i));
            i = end;
        }
        self.len += to - from;
    }

    fn contains(&self, i: u32) -> bool {
        self.spans
            .get((i >> CHUNK_SHIFT) as usize)
            .is_some_and(|s| s.contains(i & (CHUNK_SIZE - 1)))
    }

    /// Takes slot `i` out; `false` if it is not a gap slot.
    fn remove(&mut self, i: u32) -> bool {
        let c = (i >> CHUNK_SHIFT) as usize;
        if !self
            .spans
            .get_mut(c)
            .is_some_and(|s| s.remove(i & (CHUNK_SIZE - 1)))
        {
            return false;
        }
        self.counts.add(c, -1);
        self.len -= 1;
        if self.len == 0 {
            *self = Gaps::default();
        }
        true
    }

    /// The gap slot of rank `k` (lowest first); `k < len`.
    #[inline(never)]
    fn select(&self, k: u32) -> u32 {
        let (c, r) = self.counts.select(k);
        ((c as u32) << CHUNK_SHIFT) + self.spans[c].select(r)
    }

    /// Takes out the `k` lowest gap slots (reservations took them), adding
    /// them to `taken`.
    fn take_lowest(&mut self, mut k: u32, mut taken: Option<&mut Vec<u32>>) {
        while k > 0 {
            let (c, _) = self.counts.select(0);
            let base = (c as u32) << CHUNK_SHIFT;
            let n = k.min(self.spans[c].len());
            self.spans[c].take_lowest(n, |o| {
                if let Some(t) = taken.as_deref_mut() {
                    t.push(base + o);
                }
            });
            self.counts.add(c, -i64::from(n));
            self.len -= n;
            k -= n;
        }
        if self.len == 0 && !self.spans.is_empty() {
            *self = Gaps::default();
        }
    }
}

/// The gap slots of one chunk, as offsets into it.
enum Span {
    /// The offsets `lo..hi`.
    Run(u32, u32),
    /// Any set, once claims have split a run.
    Bits(Box<Bits>),
}

impl Span {
    fn len(&self) -> u32 {
        match self {
            Span::Run(lo, hi) => hi - lo,
            Span::Bits(b) => b.len,
        }
    }

    fn contains(&self, o: u32) -> bool {
        match self {
            Span::Run(lo, hi) => (*lo..*hi).contains(&o),
            Span::Bits(b) => b.get(o),
        }
    }

    /// Adds the offsets `lo..hi`, none of which is in the span.
    fn add(&mut self, lo: u32, hi: u32) {
        match self {
            Span::Run(a, b) if a == b => *self = Span::Run(lo, hi),
            Span::Run(_, b) if *b == lo => *b = hi,
            Span::Run(a, _) if *a == hi => *a = lo,
            Span::Run(a, b) => {
                let mut bits = Bits::new();
                bits.set_range(*a, *b);
                bits.set_range(lo, hi);
                *self = Span::Bits(bits);
            }
            Span::Bits(bits) => bits.set_range(lo, hi),
        }
    }

    /// Takes offset `o` out; `false` if it is not in the span.
    fn remove(&mut self, o: u32) -> bool {
        match self {
            Span::Run(lo, hi) if !(*lo..*hi).contains(&o) => false,
            Span::Run(lo, _) if *lo == o => {
                *lo += 1;
                true
            }
            Span::Run(_, hi) if *hi == o + 1 => {
                *hi -= 1;
                true
            }
            Span::Run(lo, hi) => {
                let mut bits = Bits::new();
                bits.set_range(*lo, o);
                bits.set_range(o + 1, *hi);
                *self = Span::Bits(bits);
                true
            }
            Span::Bits(bits) => {
                if !bits.clear(o) {
                    return false;
                }
                if bits.len == 0 {
                    *self = Span::Run(0, 0);
                }
                true
            }
        }
    }

    /// The offset of rank `k`; `k < len`.
    fn select(&self, k: u32) -> u32 {
        match self {
            Span::Run(lo, _) => lo + k,
            Span::Bits(b) => b.select(k),
        }
    }

    /// Takes out the `k` lowest offsets, lowest first; `k <= len`.
    fn take_lowest(&mut self, k: u32, mut out: impl FnMut(u32)) {
        match self {
            Span::Run(lo, _) => {
                (*lo..*lo + k).for_each(out);
                *lo += k;
            }
            Span::Bits(bits) => {
                bits.take_lowest(k, &mut out);
                if bits.len == 0 {
                    *self = Span::Run(0, 0);
                }
            }
        }
    }
}

/// A set of offsets into a chunk (8 KiB for 64K slots, only in chunks that
/// also hold slots handed out, whose items take 1.5 MiB).
struct Bits {
    words: Box<[u64]>,
    /// Set bits per block of [`BLOCK_WORDS`] words.
    blocks: Box<[u32]>,
    len: u32,
}

impl Bits {
    fn new() -> Box<Bits> {
        Box::new(Bits {
            words: vec![0; WORDS].into_boxed_slice(),
            blocks: vec![0; BLOCKS].into_boxed_slice(),
            len: 0,
        })
    }

    fn get(&self, o: u32) -> bool {
        self.words[o as usize / 64] & (1 << (o % 64)) != 0
    }

    /// Sets the offsets `lo..hi`, none of which is set.
    fn set_range(&mut self, lo: u32, hi: u32) {
        let mut o = lo;
        while o < hi {
            let w = o as usize / 64;
            let start = o % 64;
            let n = (64 - start).min(hi - o);
            let mask = if n == 64 {
                u64::MAX
            } else {
                ((1u64 << n) - 1) << start
            };
            debug_assert_eq!(self.words[w] & mask, 0, "gap slot added twice");
            self.words[w] |= mask;
            self.blocks[w / BLOCK_WORDS] += n;
            self.len += n;
            o += n;
        }
    }

    /// Clears offset `o`; `false` if it was not set.
    fn clear(&mut self, o: u32) -> bool {
        let w = o as usize / 64;
        let bit = 1u64 << (o % 64);
        if self.words[w] & bit == 0 {
            return false;
        }
        self.words[w] &= !bit;
        self.blocks[w / BLOCK_WORDS] -= 1;
        self.len -= 1;
        true
    }

    /// The offset of rank `k`; `k < len`.
    fn select(&self, mut k: u32) -> u32 {
        for (b, &count) in self.blocks.iter().enumerate() {
            if k >= count {
                k -= count;
                continue;
            }
            let first = b * BLOCK_WORDS;
            for (w, &word) in self.words[first..].iter().enumerate() {
                let ones = word.count_ones();
                if k >= ones {
                    k -= ones;
                    continue;
                }
                let mut x = word;
                for _ in 0..k {
                    x &= x - 1;
                }
                return ((first + w) * 64) as u32 + x.trailing_zeros();
            }
        }
        unreachable!("coreobject internal error: gap rank past the span")
    }

    /// Clears the `k` lowest offsets, reporting each, lowest first.
    fn take_lowest(&mut self, mut k: u32, out: &mut impl FnMut(u32)) {
        let mut w = 0;
        while k > 0 {
            let mut x = self.words[w];
            while x != 0 && k > 0 {
                out((w * 64) as u32 + x.trailing_zeros());
                x &= x - 1;
                k -= 1;
                self.blocks[w / BLOCK_WORDS] -= 1;
                self.len -= 1;
            }
            self.words[w] = x;
            w += 1;
        }
    }
}

// ----- ranks ----------------------------------------------------------------

/// A Fenwick (binary indexed) tree of counts: "which position holds the
/// unit of rank k" in O(log n), and O(log n) updates and appends.
struct Fenwick {
    /// `t[i]` (1-based) sums the counts of positions `(i - lowbit(i), i]`;
    /// `t[0]` is unused.
    t: Vec<u32>,
}

impl Fenwick {
    fn new(n: usize) -> Fenwick {
        Fenwick { t: vec![0; n + 1] }
    }

    /// A tree over the given counts, in O(n).
    fn from_counts(counts: impl Iterator<Item = u32>) -> Fenwick {
        let mut t = vec![0];
        t.extend(counts);
        let n = t.len() - 1;
        for i in 1..=n {
            let j = i + (i & i.wrapping_neg());
            if j <= n {
                t[j] += t[i];
            }
        }
        Fenwick { t }
    }

    fn len(&self) -> usize {
        self.t.len() - 1
    }

    /// Adds `delta` to the count at position `i` (0-based).
    fn add(&mut self, i: usize, delta: i64) {
        let mut k = i + 1;
        while k < self.t.len() {
            self.t[k] = (i64::from(self.t[k]) + delta) as u32;
            k += k & k.wrapping_neg();
        }
    }

    /// Appends a position with count `v`.
    fn push(&mut self, v: u32) {
        let k = self.t.len();
        let low = k - (k & k.wrapping_neg());
        let mut sum = v;
        let mut j = k - 1;
        while j > low {
            sum += self.t[j];
            j -= j & j.wrapping_neg();
        }
        self.t.push(sum);
    }

    /// Keeps the first `n` positions.
    fn truncate(&mut self, n: usize) {
        self.t.truncate(n + 1);
    }

    /// The position (0-based) that holds the unit of rank `k` (0-based), and
    /// the rank of that unit within the position. `k` must be below the total.
    fn select(&self, mut k: u32) -> (usize, u32) {
        let n = self.len();
        let mut pos = 0;
        let mut step = if n == 0 { 0 } else { 1 << n.ilog2() };
        while step > 0 {
            let next = pos + step;
            if next <= n && self.t[next] <= k {
                pos = next;
                k -= self.t[next];
            }
            step >>= 1;
        }
        debug_assert!(pos < n, "coreobject internal error: rank past the total");
        (pos, k)
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
    fn free_list_grows_by_blocks_reuses_lifo_each_once() {
        // Several blocks (FREE_BLOCK is 8 in tests) and a partial one.
        let n = (FREE_BLOCK * 5 + 3) as u32;
        let mut t = Table::new(2 * n, false);
        for i in 0..n {
            assert_eq!(t.reserve(), Some(i));
        }
        t.sync();
        // A permutation of 0..n, freed in batches and singly across block ends.
        let order: Vec<u32> = (0..n).map(|i| (i * 7) % n).collect();
        t.release_batch(&order[..11]);
        for &i in &order[11..21] {
            t.release(i);
        }
        t.release_batch(&order[21..]);
        let blocks = t.free.v.dir.len();
        assert_eq!(blocks, (n as usize).div_ceil(FREE_BLOCK));
        // Half reused through the cursor, folded back by a sync mid-list.
        let half = order.len() / 2;
        for &want in order[half..].iter().rev() {
            assert_eq!(t.reserve(), Some(want));
        }
        t.sync();
        assert_eq!(t.free_len(), half);
        // Freed again on top: the kept blocks take them, none is allocated.
        t.release_batch(&order[half..]);
        assert_eq!(t.free.v.dir.len(), blocks);
        // Last in, first out, each index exactly once, then fresh ones.
        for &want in order.iter().rev() {
            assert_eq!(t.reserve(), Some(want));
        }
        assert_eq!(t.reserve(), Some(n));
        t.sync();
        assert_eq!(t.free_len(), 0);
        assert_eq!(t.free.v.dir.len(), blocks);
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
    #[cfg_attr(
        miri,
        ignore = "minutes under miri; the same code runs natively and in the model below"
    )]
    fn fenwick_selects_ranks_through_pushes_adds_and_truncation() {
        let mut counts: Vec<u32> = Vec::new();
        let mut f = Fenwick::new(0);
        let mut x = 12345u64;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for step in 0..3000 {
            match rnd(10) {
                0..=4 => {
                    let v = rnd(3) as u32;
                    counts.push(v);
                    f.push(v);
                }
                5..=7 if !counts.is_empty() => {
                    let i = rnd(counts.len() as u64) as usize;
                    if counts[i] > 0 && rnd(2) == 0 {
                        counts[i] -= 1;
                        f.add(i, -1);
                    } else {
                        counts[i] += 1;
                        f.add(i, 1);
                    }
                }
                8 if !counts.is_empty() && step % 7 == 0 => {
                    let n = rnd(counts.len() as u64) as usize;
                    counts.truncate(n);
                    f.truncate(n);
                }
                _ => {
                    let g = Fenwick::from_counts(counts.iter().copied());
                    assert_eq!(g.t, f.t, "built and grown trees differ");
                }
            }
            let total: u32 = counts.iter().sum();
            for k in (0..total).step_by(1 + total as usize / 16) {
                let (mut pos, mut rest) = (0, k);
                while rest >= counts[pos] {
                    rest -= counts[pos];
                    pos += 1;
                }
                assert_eq!(f.select(k), (pos, rest), "rank {k} of {counts:?}");
            }
        }
    }

    #[test]
    fn claim_from_the_middle_keeps_the_order_of_the_rest() {
        let mut t = Table::new(1000, false);
        for _ in 0..10 {
            t.reserve();
        }
        t.sync();
        for i in 0..10 {
            t.release(i);
        }
        // Free list, bottom to top: 0..10. Claim 3, 0 and 7: tombstones.
        assert!(t.claim(3));
        assert!(t.claim(0));
        assert!(t.claim(7));
        assert!(!t.claim(3), "claimed twice");
        assert_eq!(t.free_len(), 7);
        assert_eq!(t.free_remaining(), 7);
        assert_eq!(t.reserve(), Some(9));
        assert_eq!(t.reserve(), Some(8));
        assert_eq!(t.reserve(), Some(6));
        t.sync();
        assert!(!t.claim(8), "taken by a reservation");
        assert!(t.claim(1));
        assert_eq!(t.free_len(), 3);
        t.release(8);
        let got: Vec<_> = (0..5).map(|_| t.reserve().unwrap()).collect();
        assert_eq!(got, [8, 5, 4, 2, 10]);
    }

    #[test]
    fn tombstones_are_compacted_and_stale_positions_ignored() {
        // Compaction comes at half dead, whatever the length: miri takes
        // a shorter list.
        let n: u32 = if cfg!(miri) { 400 } else { 2000 };
        let mut t = Table::new(10_000, false);
        for _ in 0..n {
            t.reserve();
        }
        t.sync();
        let mut expect: Vec<u32> = (0..n).collect();
        for &i in &expect {
            t.release(i);
        }
        // Claim 3 of every 4, scattered: the list compacts on the way.
        for i in (0..n).filter(|i| i % 4 != 1) {
            assert!(t.claim(i));
        }
        expect.retain(|i| i % 4 == 1);
        assert_eq!(t.free.dead, t.free.v.len() - expect.len());
        assert!(t.free.v.len() < n as usize / 2, "compacted");
        // Reservations take the top in order; stale positions then refuse.
        let top: Vec<_> = (0..10).map(|_| t.reserve().unwrap()).collect();
        let want: Vec<_> = expect.iter().rev().take(10).copied().collect();
        assert_eq!(top, want);
        t.sync();
        for i in top {
            assert!(!t.claim(i));
        }
        expect.truncate(expect.len() - 10);
        while let Some(i) = expect.pop() {
            assert_eq!(t.reserve(), Some(i));
        }
        assert_eq!(t.reserve(), Some(n));
    }

    #[test]
    fn long_skips_become_gaps_used_after_the_free_list() {
        let mut t = Table::new(4 * CHUNK_SIZE, false);
        for _ in 0..3 {
            t.reserve();
        }
        t.sync();
        t.release(1);
        let far = 2 * CHUNK_SIZE + 5;
        assert!(t.claim(far));
        assert_eq!(t.free_len(), 1, "no free-list entry per skipped index");
        assert_eq!(t.gap_len(), far - 3);
        assert_eq!(t.high_water(), far + 1);
        assert_eq!(t.chunks.allocated_chunks(), 2);
        // Claims split the gap, in any chunk.
        assert!(t.claim(4));
        assert!(t.claim(CHUNK_SIZE + 9));
        assert!(!t.claim(4));
        assert!(!t.claim(far));
        t.record(true);
        assert_eq!(t.reserve(), Some(1), "the free list first");
        assert_eq!(t.reserve(), Some(3), "then gaps, lowest first");
        assert_eq!(t.reserve(), Some(5));
        t.sync();
        let mut taken = Vec::new();
        t.take_recorded(&mut taken);
        taken.sort_unstable();
        assert_eq!(taken, [1, 3, 5]);
        assert_eq!(t.gap_len(), far - 3 - 4);
        assert_eq!(t.free_remaining(), (far - 7) as usize);
        // A gap slot of a chunk never allocated.
        assert!(t.claim(CHUNK_SIZE + 100));
        assert_eq!(t.chunks.allocated_chunks(), 3);
    }

    #[test]
    fn unallocated_chunks_read_as_vacant() {
        let mut t = Table::new(3 * CHUNK_SIZE, false);
        assert!(t.claim(2 * CHUNK_SIZE));
        assert!(t.item(CHUNK_SIZE).is_none());
        let v = t.chunks.at(CHUNK_SIZE + 1);
        assert!(v.object().is_none());
        assert_eq!((v.serial(), v.flags(), v.refcount()), (0, 0, 0));
    }

    /// The allocator against a plain reference: a `Vec` free list with
    /// order-preserving removal, a sorted set of gap slots, a high water.
    // Too slow under miri (hundreds of random operation lists); runs natively.
    #[cfg(not(miri))]
    mod reference {
        use std::collections::BTreeSet;

        use proptest::prelude::*;

        use super::super::*;

        #[derive(Clone, Debug)]
        enum Op {
            Reserve(u8),
            Release(usize),
            Claim(u32),
            ClaimFar(u32),
            Sync,
        }

        struct Model {
            free: Vec<u32>,
            gaps: BTreeSet<u32>,
            hw: u32,
            used: BTreeSet<u32>,
        }

        fn run(cap: u32, ops: &[Op]) -> Result<(), TestCaseError> {
            let mut t = Table::new(cap, false);
            let mut m = Model {
                free: Vec::new(),
                gaps: BTreeSet::new(),
                hw: 0,
                used: BTreeSet::new(),
            };
            t.record(true);
            let mut handed = Vec::new();
            for op in ops {
                match *op {
                    Op::Reserve(n) => {
                        for _ in 0..n {
                            let want = if let Some(i) = m.free.pop() {
                                Some(i)
                            } else if let Some(i) = m.gaps.pop_first() {
                                Some(i)
                            } else if m.hw < cap {
                                m.hw += 1;
                                Some(m.hw - 1)
                            } else {
                                None
                            };
                            prop_assert_eq!(t.reserve(), want);
                            if let Some(i) = want {
                                prop_assert!(m.used.insert(i));
                                handed.push(i);
                            }
                        }
                    }
                    Op::Release(k) => {
                        t.sync();
                        if !m.used.is_empty() {
                            let i = *m.used.iter().nth(k % m.used.len()).unwrap();
                            m.used.remove(&i);
                            m.free.push(i);
                            t.release(i);
                        }
                    }
                    Op::Claim(x) | Op::ClaimFar(x) => {
                        t.sync();
                        let i = match *op {
                            Op::Claim(_) => x % (m.hw + 70).min(cap + 1),
                            _ => x % (cap + 1),
                        };
                        let want = if i >= cap {
                            false
                        } else if i < m.hw {
                            if m.gaps.remove(&i) {
                                true
                            } else if let Some(p) = m.free.iter().position(|&f| f == i) {
                                m.free.remove(p);
                                true
                            } else {
                                false
                            }
                        } else {
                            if i - m.hw <= SMALL_GAP {
                                m.free.extend((m.hw..i).rev());
                            } else {
                                m.gaps.extend(m.hw..i);
                            }
                            m.hw = i + 1;
                            true
                        };
                        prop_assert_eq!(t.claim(i), want, "claim {}", i);
                        if want {
                            prop_assert!(m.used.insert(i));
                            handed.push(i);
                        }
                    }
                    Op::Sync => t.sync(),
                }
                prop_assert_eq!(t.high_water(), m.hw);
                prop_assert_eq!(t.free_remaining(), m.free.len() + m.gaps.len());
                prop_assert_eq!(m.used.len() + m.free.len() + m.gaps.len(), m.hw as usize);
            }
            t.sync();
            prop_assert_eq!(t.free_len(), m.free.len());
            prop_assert_eq!(t.gap_len() as usize, m.gaps.len());
            let mut taken = Vec::new();
            t.take_recorded(&mut taken);
            taken.sort_unstable();
            handed.sort_unstable();
            prop_assert_eq!(taken, handed);
            Ok(())
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                4 => (1u8..6).prop_map(Op::Reserve),
                3 => any::<usize>().prop_map(Op::Release),
                4 => any::<u32>().prop_map(Op::Claim),
                1 => any::<u32>().prop_map(Op::ClaimFar),
                1 => Just(Op::Sync),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

            #[test]
            fn table_matches_reference(
                cap in prop::sample::select(vec![5u32, 200, 2 * CHUNK_SIZE + 300]),
                ops in prop::collection::vec(op(), 1..120),
            ) {
                run(cap, &ops)?;
            }
        }
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

    /// `HeapConfig::huge_pages`: a table made with it has its chunk groups
    /// advised huge pages (`hg` in the mapping's flags), one made without
    /// it does not, even when its group is a spare an advised table gave back.
    #[cfg(all(target_os = "linux", not(miri), not(loom)))]
    #[test]
    fn chunk_groups_are_advised_with_huge_pages() {
        let flags_of = |t: &Table| {
            t.reserve();
            vm::vm_flags(t.chunks.at(0) as *const Item as usize)
        };
        for round in 0..3 {
            let on = Table::with_huge_pages(3 * CHUNK_SIZE, false, true);
            let Some((thp, flags)) = flags_of(&on) else {
                return;
            };
            if !thp {
                return;
            }
            assert!(
                flags.split(' ').any(|f| f == "hg"),
                "round {round}: {flags}"
            );
            drop(on);
            // The advised group just went to the spare list.
            let off = Table::with_huge_pages(3 * CHUNK_SIZE, false, false);
            let (_, flags) = flags_of(&off).unwrap();
            assert!(
                !flags.split(' ').any(|f| f == "hg"),
                "round {round}: {flags}"
            );
        }
    }

    /// Chunks mapped in groups (natively on Linux) read as vacant in every
    /// group, the last one short, and keep what is written to them apart.
    #[test]
    fn chunks_in_every_group_start_vacant() {
        let n = 2 * GROUP as u32 + 1;
        let mut t = Table::new(n * CHUNK_SIZE, false);
        let picks = [0, GROUP as u32 * CHUNK_SIZE + 3, n * CHUNK_SIZE - 1];
        for &i in &picks {
            assert!(t.claim(i));
        }
        assert_eq!(t.chunks.allocated_chunks(), 3);
        for &i in &picks {
            let item = t.chunks.at(i);
            assert!(item.object().is_none());
            assert_eq!((item.serial(), item.flags(), item.refcount()), (0, 0, 0));
            item.set(1 << 3);
        }
        for &i in &picks {
            assert_eq!(t.chunks.at(i).flags(), 1 << 3);
            assert_eq!(t.chunks.at(i + 1 - 2 * (i % 2)).flags(), 0);
        }
    }
}

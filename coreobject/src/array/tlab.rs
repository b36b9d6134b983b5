//! Per-thread creation caches (a JVM's thread-local allocation buffers;
//! `hecs`'s `reserve`): creation through `&Heap` takes its slot index and
//! its object slot from a cache that belongs to the creating thread, and
//! pays one atomic per batch instead of a locked instruction per object.
//!
//! # Where the state lives
//!
//! The caches are the heap's: a fixed row of [`SLOTS`] [`Cache`]s in the
//! object array. A thread finds its own through a thread-local list of
//! `(key, slot)` pairs, plain integers: the thread-local never points into
//! a heap, so a heap dropped while other threads still list it leaves them
//! nothing to touch. A key names one heap in one **epoch**: it comes from a
//! process-wide counter, so it is never reused, by this heap or another.
//!
//! * A thread that creates through `&Heap` and has no entry for the heap's
//!   key claims the next free cache with one `fetch_add` (once per thread
//!   per epoch; past [`SLOTS`] threads, creation takes the shared path).
//! * A cache holds a range of the table's cursor values (one `fetch_sub`
//!   reserves [`BATCH`]) and up to [`SLAB_BATCH`] object slots of one size
//!   class (taken under one take of that class's lock). Only its owner
//!   writes it while the heap is shared (`len` and `high_water` read every
//!   cache, and a cache's cursor values are one word, so never half a
//!   refill); its fields are atomics with relaxed loads and stores only,
//!   which compile to plain moves.
//! * Every `sync` of the table (each point where a collection, a claim or a
//!   load looks at the free list: all under `&mut`) first **reclaims**
//!   every cache: unused cursor values just above the cursor are given
//!   back by moving it (exact: one thread's cache leaves no trace), the
//!   indices of the others go back to the free list (and out of the record
//!   of slots born), unused object slots back
//!   to their pages, and the epoch ends: the key changes, so every
//!   thread's entry goes stale and the next creation claims a fresh cache.
//!   A thread that ended holding reserved indices loses nothing: its cache
//!   is the heap's, and the next reclaim empties it.
//! * Near the cap (fewer than [`MARGIN`] slots left) creation reserves one
//!   index at a time, as before: no cache is claimed there, and a cache
//!   claimed earlier is no longer refilled with indices. What caches took
//!   before stays theirs until the next sync, so creation through `&Heap`
//!   may report the cap reached while other threads' caches (or those of
//!   threads that ended) still hold up to `BATCH - 1` unused indices each.
//!   Creation through `&mut Heap` at the cap syncs and tries again, and
//!   every collection syncs, so the cap is exact there.

use std::cell::Cell;
use std::ptr::NonNull;
use std::sync::atomic::Ordering::Relaxed;

use crate::sync::{AtomicI64, AtomicPtr, AtomicU32, AtomicUsize};

/// Caches per heap (threads creating at once through `&Heap` with a cache).
#[cfg(not(loom))]
pub(crate) const SLOTS: usize = 16;
#[cfg(loom)]
pub(crate) const SLOTS: usize = 3;

/// Cursor values (slot indices) reserved per refill.
#[cfg(not(any(loom, miri)))]
pub(crate) const BATCH: i64 = 64;
#[cfg(all(miri, not(loom)))]
pub(crate) const BATCH: i64 = 8;
#[cfg(loom)]
pub(crate) const BATCH: i64 = 2;

/// Object slots taken per refill.
#[cfg(not(any(loom, miri)))]
pub(crate) const SLAB_BATCH: usize = 32;
#[cfg(all(miri, not(loom)))]
pub(crate) const SLAB_BATCH: usize = 4;
#[cfg(loom)]
pub(crate) const SLAB_BATCH: usize = 2;

/// Below this many slots left under the cap, creation reserves one index at
/// a time: every cache may be refilling at once.
pub(crate) const MARGIN: u32 = (SLOTS as u32) * (BATCH as u32) * 2;

/// Heaps whose cap is below this have no caches: near the cap creation
/// reserves one index at a time anyway, and a tiny heap keeps the exact
/// order of the shared path (the free list last-in first-out, then growth).
pub(crate) const MIN_CAP: u32 = 4 * MARGIN;

/// The process-wide source of keys (never reused). Not a loom atomic: it
/// only hands out distinct numbers, and loom models start many heaps.
static NEXT_KEY: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn new_key() -> u64 {
    NEXT_KEY.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Thread-local entries kept: heaps a thread creates in by turns.
const MINE: usize = 4;

#[cfg(not(loom))]
std::thread_local! {
    static ENTRIES: [Cell<(u64, u32)>; MINE] = const { [const { Cell::new((0, 0)) }; MINE] };
}
#[cfg(loom)]
loom::thread_local! {
    static ENTRIES: [Cell<(u64, u32)>; MINE] = [const { Cell::new((0, 0)) }; MINE];
}

/// One thread's cache. See the module docs. Aligned to two cache lines, so
/// that threads writing their own caches on every creation never share a
/// line (nor its adjacent-line prefetch pair).
#[repr(align(128))]
pub(crate) struct Cache {
    /// The reserved, unused cursor values `lo ..= lo + left - 1`, in one
    /// word (`lo << 8 | left`), so that a thread reading another's cache
    /// (`len`, `high_water`) never sees half a refill.
    values: AtomicI64,
    /// The size class of `slots`, plus one (0: none).
    class: AtomicUsize,
    /// Object slots `slots[..count]` are reserved and unused.
    count: AtomicU32,
    slots: [AtomicPtr<u8>; SLAB_BATCH],
}

impl Cache {
    fn new() -> Cache {
        Cache {
            values: AtomicI64::new(0),
            class: AtomicUsize::new(0),
            count: AtomicU32::new(0),
            slots: std::array::from_fn(|_| AtomicPtr::new(std::ptr::null_mut())),
        }
    }

    /// The next reserved cursor value, if any is left.
    #[inline(always)]
    pub(crate) fn take_value(&self) -> Option<i64> {
        let w = self.values.load(Relaxed);
        let left = w & 0xff;
        if left == 0 {
            return None;
        }
        self.values.store(w - 1, Relaxed);
        Some((w >> 8) + left - 1)
    }

    /// Takes the batch `n - k + 1 ..= n` (from the table's
    /// `reserve_values`), of which the caller uses `n` at once.
    #[inline]
    pub(crate) fn refill_values(&self, n: i64, k: i64) {
        debug_assert!((1..=255).contains(&k));
        self.values.store((n - k + 1) << 8 | (k - 1), Relaxed);
    }

    /// A reserved object slot of size class `c`, if the cache holds one.
    #[inline(always)]
    pub(crate) fn take_slot(&self, c: usize) -> Option<NonNull<u8>> {
        if self.class.load(Relaxed) != c + 1 {
            return None;
        }
        let n = self.count.load(Relaxed);
        if n == 0 {
            return None;
        }
        self.count.store(n - 1, Relaxed);
        NonNull::new(self.slots[n as usize - 1].load(Relaxed))
    }

    /// Whether the cache may be refilled with slots of another class: it
    /// holds none.
    #[inline]
    pub(crate) fn slots_empty(&self) -> bool {
        self.count.load(Relaxed) == 0
    }

    /// Adds a reserved slot of size class `c` (the cache holds none of
    /// another class, see [`slots_empty`](Self::slots_empty)).
    #[inline]
    pub(crate) fn put_slot(&self, c: usize, p: NonNull<u8>) {
        self.class.store(c + 1, Relaxed);
        let n = self.count.load(Relaxed);
        self.slots[n as usize].store(p.as_ptr(), Relaxed);
        self.count.store(n + 1, Relaxed);
    }

    /// The lowest unused cursor value, and how many are left.
    fn unused_values(&self) -> (i64, i64) {
        let w = self.values.load(Relaxed);
        (w >> 8, w & 0xff)
    }

    /// Unused object slots: their class and count.
    fn unused_slots(&self) -> (usize, usize) {
        let c = self.class.load(Relaxed);
        (
            c.wrapping_sub(1),
            if c == 0 {
                0
            } else {
                self.count.load(Relaxed) as usize
            },
        )
    }
}

/// The heap's caches. See the module docs.
pub(crate) struct Caches {
    /// Whether the heap has caches at all: its cap is at least
    /// [`MIN_CAP`]. Tiny heaps reserve one index at a time.
    enabled: bool,
    /// This heap's key in the current epoch. Changed only through `&mut`.
    key: u64,
    /// Caches handed to threads in this epoch (may pass [`SLOTS`]: claims
    /// past the end find none).
    claimed: AtomicUsize,
    caches: Box<[Cache]>,
}

impl Caches {
    pub(crate) fn new(cap: u32) -> Caches {
        Caches {
            enabled: cap >= MIN_CAP,
            key: new_key(),
            claimed: AtomicUsize::new(0),
            caches: (0..SLOTS).map(|_| Cache::new()).collect(),
        }
    }

    /// The calling thread's cache, claimed now if it has none in this
    /// epoch and `roomy()` says the table is far from its cap; `None` once
    /// every cache is taken, or near the cap.
    #[inline]
    pub(crate) fn mine(&self, roomy: impl FnOnce() -> bool) -> Option<&Cache> {
        if !self.enabled {
            return None;
        }
        let key = self.key;
        let slot = ENTRIES.with(|e| {
            for entry in e {
                let (k, s) = entry.get();
                if k == key {
                    return Some(s);
                }
            }
            None
        });
        match slot {
            Some(s) => self.caches.get(s as usize),
            None => self.claim(roomy),
        }
    }

    #[cold]
    #[inline(never)]
    fn claim(&self, roomy: impl FnOnce() -> bool) -> Option<&Cache> {
        if !roomy() || self.claimed.load(Relaxed) >= SLOTS {
            return None;
        }
        let s = self.claimed.fetch_add(1, Relaxed);
        let cache = self.caches.get(s)?;
        // Newest first: shift the others down, dropping the oldest.
        ENTRIES.with(|e| {
            for i in (1..MINE).rev() {
                e[i].set(e[i - 1].get());
            }
            e[0].set((self.key, s as u32));
        });
        Some(cache)
    }

    /// The caches in use this epoch.
    fn in_use(&self) -> &[Cache] {
        if !self.enabled {
            return &[];
        }
        let n = self.claimed.load(Relaxed).min(SLOTS);
        &self.caches[..n]
    }

    /// Settles the caches' unused cursor values against the table's
    /// `cursor`: a cache whose unused values lie just above the cursor
    /// (`lo == cursor + 1`) gives them back by moving the cursor up to its
    /// `next`, as if they had never been reserved; repeated while one fits.
    /// The others are holes, each given to `hole(lo, next)`. Returns the
    /// cursor after. So one thread's cache settles exactly, and several
    /// leave at most one partial batch each as holes. Reads only: exact
    /// when no thread is creating, an estimate while some are.
    pub(crate) fn settle(&self, cursor: i64, mut hole: impl FnMut(i64, i64)) -> i64 {
        let mut r = [(0i64, 0i64); SLOTS];
        let mut n = 0;
        for c in self.in_use() {
            let (lo, left) = c.unused_values();
            if left > 0 {
                r[n] = (lo, lo + left - 1);
                n += 1;
            }
        }
        let mut cur = cursor;
        while let Some(k) = r[..n].iter().position(|&(lo, _)| lo == cur + 1) {
            cur = r[k].1;
            r[k] = r[n - 1];
            n -= 1;
        }
        for &(lo, next) in &r[..n] {
            hole(lo, next);
        }
        cur
    }

    /// Unused object slots held by caches: each one's size class and count.
    pub(crate) fn held_slots(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.in_use().iter().map(Cache::unused_slots)
    }

    /// Empties every cache (under `&mut`, so no thread is creating; call
    /// [`settle`](Self::settle) first for their cursor values): `slot`
    /// gets each unused object slot with its size class. Ends the epoch.
    pub(crate) fn reclaim(&mut self, mut slot: impl FnMut(usize, NonNull<u8>)) {
        if !self.enabled || self.claimed.load(Relaxed) == 0 {
            return;
        }
        for c in self.in_use() {
            let (class, n) = c.unused_slots();
            for s in &c.slots[..n] {
                if let Some(p) = NonNull::new(s.load(Relaxed)) {
                    slot(class, p);
                }
            }
            c.values.store(0, Relaxed);
            c.count.store(0, Relaxed);
            c.class.store(0, Relaxed);
        }
        self.claimed.store(0, Relaxed);
        self.key = new_key();
    }
}

//! The object array (Unreal's `FUObjectArray`): the slots, the slot
//! protocol, and the one safe door through which a handle becomes a
//! reference.
//!
//! Everything that knows how a slot is filled, checked, emptied, retired or
//! parked lives here; the heap and the collector call these methods and
//! never touch an [`Item`] themselves.
//!
//! # The slot protocol
//!
//! * **fill**: a slot reserved by the lock-free allocator ([`table`]) gets its
//!   object, its flags and then its serial; a handle resolves only once the
//!   serial is stored.
//! * **resolve**: a handle resolves while its slot carries exactly its serial
//!   and an object, and the object's flags do not hide it.
//! * **free**: the slot is emptied and its generation bumped, so every
//!   handle to the old object is stale for good; the index then returns to
//!   the free list, or is **retired** when the generation has run out, or is
//!   **parked** while a [`StrongObj`](crate::StrongObj) still counts on the
//!   slot.

mod item;
mod slab;
mod table;
mod tlab;
mod vm;

use std::fmt;
use std::num::NonZeroU32;
use std::ptr::NonNull;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::class::{Class, Object};
use crate::error::{ResolveError, SerialRefusal};
use crate::handle::{AnyObj, Obj};
use crate::lifecycle::{guard, Caught};
use crate::names::Names;
use crate::object::{slot_of, Header, ObjBox};
use crate::serial::{self, TagLease};

pub(crate) use item::{flags, Item, RETIRED};
pub(crate) use slab::{Slabs, PAGE};
pub(crate) use table::Chunks;

/// Objects the purge's look ahead ([`ObjectArray::load_to_free`]) is in
/// front of the one whose buffers it starts loading: the object's own line
/// is asked for this many looks earlier, so that its buffer pointers are
/// there when they are read.
pub(crate) const FREE_AHEAD: usize = 8;

/// A slot index no object has.
const NO_SLOT: u32 = u32::MAX;

/// The slots [`ObjectArray::load_to_free`] looked at last, oldest next.
pub(crate) struct FreeAhead {
    ring: [u32; FREE_AHEAD],
    pos: usize,
}

impl FreeAhead {
    /// A look ahead that has seen no slot yet.
    pub(crate) fn new() -> Self {
        FreeAhead {
            ring: [NO_SLOT; FREE_AHEAD],
            pos: 0,
        }
    }
}
use table::Table;
pub use table::CHUNK_SIZE;

/// Objects the purge frees per page whose memory it gives back
/// ([`ObjectArray::cool`]).
pub(crate) const COOL_EVERY: usize = 256;

/// State of the disregard-for-GC pool.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Pool {
    /// Objects created now go into the pool (while their index fits).
    pub(crate) open: bool,
    /// Indices below this may hold pool objects.
    pub(crate) capacity: u32,
    /// First index the collector considers (Unreal's `ObjFirstGCIndex`).
    pub(crate) end: u32,
}

/// What the collector hides while it purges a cycle incrementally: objects
/// below `end` that are neither marked nor born during the cycle are
/// unreachable, and resolve to nothing from the moment marking ends, even
/// before the purge reaches them.
#[derive(Default)]
pub(crate) struct Condemned {
    /// The mark bitmap of the cycle being purged.
    pub(crate) marks: Vec<u64>,
    /// The pool's end at the cycle's start: slots below it were permanent
    /// then, and the purge never visits them (even if the pool has been
    /// disabled since).
    pub(crate) start: u32,
    /// The high water at the cycle's start; slots at or above it are newer.
    pub(crate) end: u32,
    /// Whether the hiding applies (between the end of marking and the end
    /// of the unreachable scan).
    pub(crate) active: bool,
}

impl Condemned {
    #[inline(always)]
    pub(crate) fn is_marked(&self, i: u32) -> bool {
        self.marks[(i >> 6) as usize] & (1 << (i & 63)) != 0
    }
}

/// The [`flags::NO_DROP`] field of an object of type `T` created with
/// `outer`: its slot's size class plus one when `T` has no drop glue, the
/// object has no outer and its layout is pooled; 0 otherwise.
#[inline(always)]
fn no_drop_bits<T>(outer: Option<AnyObj>) -> u32 {
    if outer.is_some() {
        0
    } else {
        NoDrop::<T>::BITS
    }
}

/// Holds [`no_drop_bits`]'s constant for objects without an outer,
/// computed once per type at compile time.
struct NoDrop<T>(std::marker::PhantomData<T>);

impl<T> NoDrop<T> {
    const BITS: u32 = if std::mem::needs_drop::<ObjBox<T>>() {
        0
    } else {
        match slab::class_of(std::alloc::Layout::new::<ObjBox<T>>()) {
            Some(c) => (c as u32 + 1) << flags::NO_DROP_SHIFT,
            None => 0,
        }
    };
}

/// Empties `item` (slot `index`) and moves its serial on: retired (counted
/// in `retired`) once its generation reaches `limit`, parked (in `parked`)
/// while a strong handle counts on it. Returns the object it held and
/// whether the index goes back to the free list now (the caller's job).
/// The body of [`ObjectArray::vacate_slot`], over the fields it changes,
/// so that a caller holding the item need not look it up again.
#[inline(always)]
fn vacate_in(
    item: &Item,
    limit: u32,
    retired: &mut u32,
    parked: &mut Vec<u32>,
    index: u32,
) -> (NonNull<Header>, bool) {
    let s = item.serial();
    let retire = serial::generation(s) >= limit;
    let p = item
        .vacate(if retire { RETIRED } else { s + 1 })
        .expect("freeing an empty slot");
    if retire {
        *retired += 1;
        (p, false)
    } else if item.refcount() > 0 {
        // A StrongObj still counts on this slot: reuse it only once that drops.
        parked.push(index);
        (p, false)
    } else {
        (p, true)
    }
}

/// The slots, their allocator, the root list and the pool.
pub(crate) struct ObjectArray {
    table: Table,
    lease: TagLease,
    pool: Pool,
    /// Indices that may be roots (`ROOT` flag or non-zero ref count).
    roots: Mutex<Vec<u32>>,
    /// Slots retired because their generation counter ran out.
    retired: u32,
    /// Freed slots that a `StrongObj` still counts on.
    parked: Vec<u32>,
    /// Whether a cycle marks: the read barrier of interior-mutable objects
    /// is on ([`touch`](Self::touch)). Written only through `&mut self`.
    watching: bool,
    /// Interior-mutable objects handed out as `&T` while marking, for the
    /// collector's re-scan.
    touched: Mutex<Vec<u32>>,
    /// Unreachable objects the purge has not reached yet.
    pub(crate) condemned: Condemned,
    /// The objects' memory.
    slabs: Slabs,
    /// Per-thread creation caches (`tlab`).
    caches: tlab::Caches,
    /// Unused cached cursor values, gathered by a reclaim, and their
    /// indices (kept for their room).
    holes: Vec<(i64, i64)>,
    unused: Vec<(usize, u32)>,
    /// The purge's buffer of freed indices (see
    /// [`free_batched`](Self::free_batched)), kept for its room; empty
    /// between slices.
    pub(crate) freeing: Vec<u32>,
    /// The purge's freed slots not yet given back to their page (see
    /// [`free_batched`](Self::free_batched)); empty between slices.
    run: slab::FreeRun,
}

impl fmt::Debug for ObjectArray {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectArray")
            .field("tag", &self.lease.tag)
            .field("live", &self.len())
            .field("cap", &self.table.cap())
            .finish_non_exhaustive()
    }
}

impl ObjectArray {
    #[cfg(test)]
    pub(crate) fn new(cap: u32, preallocate: bool, pool_capacity: u32, lease: TagLease) -> Self {
        Self::with_huge_pages(cap, preallocate, pool_capacity, lease, false)
    }

    /// [`new`](Self::new), asking for huge pages if `huge` (`HeapConfig::huge_pages`).
    pub(crate) fn with_huge_pages(
        cap: u32,
        preallocate: bool,
        pool_capacity: u32,
        lease: TagLease,
        huge: bool,
    ) -> Self {
        ObjectArray {
            table: Table::with_huge_pages(cap, preallocate, huge),
            lease,
            pool: Pool {
                open: false,
                capacity: pool_capacity,
                end: 0,
            },
            roots: Mutex::new(Vec::new()),
            retired: 0,
            parked: Vec::new(),
            watching: false,
            touched: Mutex::new(Vec::new()),
            condemned: Condemned::default(),
            slabs: Slabs::new(huge),
            caches: tlab::Caches::new(cap),
            holes: Vec::new(),
            unused: Vec::new(),
            freeing: Vec::new(),
            run: slab::FreeRun::default(),
        }
    }

    pub(crate) fn tag(&self) -> u32 {
        self.lease.tag
    }

    pub(crate) fn cap(&self) -> u32 {
        self.table.cap()
    }

    pub(crate) fn chunks(&self) -> &Arc<Chunks> {
        &self.table.chunks
    }

    /// The item at `index`, if its chunk exists.
    #[inline(always)]
    pub(crate) fn item(&self, index: u32) -> Option<&Item> {
        self.table.item(index)
    }

    /// The header of the object in slot `index`, if the slot holds one.
    #[inline(always)]
    pub(crate) fn header_at(&self, index: u32) -> Option<&Header> {
        let p = self.item(index)?.object()?;
        // SAFETY: an item's pointer heads a live object until its slot is
        // vacated, which takes `&mut self`, so not while this borrow lasts.
        Some(unsafe { p.as_ref() })
    }

    /// The item at `index`, which the caller knows is allocated.
    #[inline(always)]
    pub(crate) fn at(&self, index: u32) -> &Item {
        self.table.chunks.at(index)
    }

    // ----- filling ------------------------------------------------------------

    /// Reserves a slot index, lock-free, from any thread. `None` at the cap,
    /// and while the disregard-for-GC pool is open, once it is full (an
    /// object past its end would not be permanent).
    ///
    /// Through the calling thread's cache (`tlab`): one atomic per batch of
    /// [`tlab::BATCH`] indices; near the cap, or once every cache is taken,
    /// one per index.
    #[inline]
    pub(crate) fn reserve(&self) -> Option<u32> {
        if self.pool.open {
            return self.reserve_in_pool();
        }
        let Some(cache) = self.caches.mine(|| self.roomy()) else {
            return self.table.reserve();
        };
        match cache.take_value() {
            Some(v) => self.table.value_index(v),
            None => self.refill(cache),
        }
    }

    /// Refills `cache` with a batch of cursor values and takes the first;
    /// near the cap, reserves one index alone instead.
    #[cold]
    #[inline(never)]
    fn refill(&self, cache: &tlab::Cache) -> Option<u32> {
        if !self.roomy() {
            return self.table.reserve();
        }
        let n = self.table.reserve_values(tlab::BATCH);
        cache.refill_values(n, tlab::BATCH);
        self.table.value_index(n)
    }

    /// Whether the table is far enough from its cap for per-thread caches
    /// (see `tlab`).
    fn roomy(&self) -> bool {
        self.table.cap() - self.table.high_water() >= tlab::MARGIN
    }

    /// Memory for an object of `layout` through `&self`: from the calling
    /// thread's cache when it has one (one lock per [`tlab::SLAB_BATCH`]
    /// slots), else under the size class's lock.
    #[inline]
    fn alloc_slot(&self, layout: std::alloc::Layout) -> NonNull<u8> {
        if let (Some(c), Some(cache)) = (slab::class_of(layout), self.caches.mine(|| self.roomy()))
        {
            if let Some(p) = cache.take_slot(c) {
                return p;
            }
            if cache.slots_empty() {
                return self.refill_slots(cache, c);
            }
        }
        self.slabs.alloc(layout)
    }

    /// Refills `cache` with slots of size class `c` and takes one.
    #[cold]
    #[inline(never)]
    fn refill_slots(&self, cache: &tlab::Cache, c: usize) -> NonNull<u8> {
        let mut got = [None; tlab::SLAB_BATCH];
        // Filled under the size class's lock, handed to the cache after it.
        self.slabs.alloc_batch(c, &mut got);
        let (first, rest) = got.split_first().expect("a batch has slots");
        // Last in first: the cache hands them out in the order the page gave them.
        for p in rest.iter().rev().flatten() {
            cache.put_slot(c, *p);
        }
        first.expect("alloc_batch fills every slot")
    }

    /// Empties every thread's cache (see `tlab`), then folds reservations
    /// into the free list: unused cached indices go back on it.
    fn sync_caches(&mut self) {
        let past_cap = self.table.past_cap();
        let mut holes = std::mem::take(&mut self.holes);
        holes.clear();
        let cursor = self.caches.settle(self.table.cursor(), |lo, next| {
            if next > past_cap {
                holes.push((lo.max(past_cap + 1), next));
            }
        });
        self.table.untake(cursor);
        let slabs = &mut self.slabs;
        self.caches.reclaim(|c, p| {
            // SAFETY: `p` came from `alloc_batch(c, ..)` into a cache and was never
            // handed to an object; the reclaim empties the cache, so it is not used again.
            unsafe { slabs.free_unused(c, p) }
        });
        self.table.sync_returning(&holes, &mut self.unused);
        self.holes = holes;
    }

    /// [`reserve`](Self::reserve) while the pool is open: a slot inside
    /// it, or `None`. While it is open, slots are handed out in order from
    /// the high water (opening needs the pool's end there, and no slot is
    /// freed until it closes), so the high water says whether one is left.
    /// Creations that race for the last ones may reserve slots past the
    /// end: those are refused too, stay empty, and
    /// [`release_refused`](Self::release_refused) frees them when the pool
    /// closes.
    #[cold]
    fn reserve_in_pool(&self) -> Option<u32> {
        if self.table.high_water() >= self.pool.capacity {
            return None;
        }
        let index = self.table.reserve()?;
        (index < self.pool.capacity).then_some(index)
    }

    /// Frees the slots past the pool's end that creations racing for its
    /// last slots reserved and gave up (see
    /// [`reserve_in_pool`](Self::reserve_in_pool)). Called as the pool
    /// closes, before any slot past its end holds an object (a slot that
    /// does, or is free already, is left as it is).
    pub(crate) fn release_refused(&mut self) {
        self.sync_caches();
        for i in self.pool.capacity..self.table.high_water() {
            let empty = self
                .item(i)
                .is_some_and(|item| item.object().is_none() && item.serial() != RETIRED);
            debug_assert!(empty, "slot {i} past the open pool's end is in use");
            if empty && !self.table.claimable(i) {
                self.table.release(i);
            }
        }
    }

    /// Claims a specific free index (for `create_at`), in O(1) amortized.
    pub(crate) fn claim(&mut self, index: u32) -> Result<(), crate::Error> {
        self.check_claim(index)?;
        if !self.table.claim(index) {
            return Err(crate::Error::IndexTaken(index));
        }
        Ok(())
    }

    /// Syncs, then refuses an index past the cap, in the pool, or holding an
    /// object or a retired serial (cheap checks that spare the free list a
    /// lookup).
    fn check_claim(&mut self, index: u32) -> Result<(), crate::Error> {
        self.sync_caches();
        if index >= self.table.cap() {
            return Err(crate::Error::IndexPastCap {
                index,
                cap: self.table.cap(),
            });
        }
        let item = self.item(index);
        if let Some(item) = item.filter(|item| item.object().is_some()) {
            // Still holding an object the purge in flight frees: flagged
            // unreachable (or waiting for `is_ready_for_finish_destroy`), or
            // about to be.
            let f = item.flags();
            if index >= self.pool.end
                && (f & flags::UNREACHABLE != 0
                    || (self.condemned.active && self.is_condemned(index, f)))
            {
                return Err(crate::Error::SlotBeingFreed(index));
            }
        }
        let occupied = item.is_some_and(|item| item.object().is_some() || item.serial() == RETIRED);
        if index < self.pool.end || occupied {
            return Err(crate::Error::IndexTaken(index));
        }
        Ok(())
    }

    /// Claims a specific free index and sets the serial its object will get
    /// (for `create_at_with_serial`; Unreal's `AllocateUObjectIndex` with an
    /// `AlreadyAllocatedIndex` and a `SerialNumber`).
    ///
    /// A slot's generation only moves forward, and a free slot's serial is
    /// the next one to issue, so its last occupant had `serial - 1`. Accepted:
    /// that serial (restoring the last occupant: handles to it resolve again),
    /// or any serial of this heap's tag from the current one up to the limit
    /// (a generation the slot never issued). A never-used slot accepts any
    /// generation of this heap. Refused: another tag, a generation outside
    /// the heap's range, a retired slot, anything older than the last
    /// occupant, to which handles to a later occupant would then resolve,
    /// and the tag's last two generations unless the slot issued them
    /// (they would retire the tag for the process).
    pub(crate) fn claim_with_serial(
        &mut self,
        index: u32,
        serial: u32,
    ) -> Result<(), crate::Error> {
        let refuse = |reason| crate::Error::SerialRefused {
            index,
            serial,
            reason,
        };
        self.sync_caches();
        if index >= self.table.cap() {
            return Err(crate::Error::IndexPastCap {
                index,
                cap: self.table.cap(),
            });
        }
        let (tag, generation) = (serial::tag(serial), serial::generation(serial));
        if tag != self.lease.tag {
            return Err(refuse(SerialRefusal::OtherHeap));
        }
        if generation < self.lease.floor || generation > self.lease.limit {
            return Err(refuse(SerialRefusal::OutOfRange));
        }
        let current = self.item(index).map_or(0, Item::serial);
        if current == RETIRED {
            return Err(refuse(SerialRefusal::Retired));
        }
        self.check_claim(index)?;
        if !self.table.claimable(index) {
            return Err(crate::Error::IndexTaken(index));
        }
        if current != 0 && serial < current - 1 {
            return Err(refuse(SerialRefusal::Older));
        }
        // A tag goes back to the pool with its floor past the highest
        // generation its heap issued; a floor at the top retires it for the
        // process. Restoring what the slot already issued changes nothing;
        // jumping to the top would burn the tag for every later heap.
        let issued = current != 0 && serial < current;
        if !issued && generation >= serial::MAX_GENERATION - 1 {
            return Err(refuse(SerialRefusal::WouldRetireTag));
        }
        let claimed = self.table.claim(index);
        debug_assert!(claimed, "claimable index refused");
        // The slot is empty and exclusively ours: `fill` issues the serial it carries.
        self.at(index).vacate(serial);
        Ok(())
    }

    /// Fills a reserved slot with a new object. The caller owns `index`
    /// exclusively. `extra` are flags to set at birth.
    #[inline]
    pub(crate) fn fill<T: Object>(
        &self,
        index: u32,
        value: T,
        outer: Option<AnyObj>,
        extra: u32,
    ) -> Obj<T> {
        let p = ObjBox::alloc_with(value, outer, |layout| self.alloc_slot(layout));
        self.publish::<T>(index, p, extra | no_drop_bits::<T>(outer))
    }

    /// Creation through exclusive access: reserves a slot and fills it
    /// without a lock or a locked instruction (the `&mut` proves that no
    /// other thread reserves or allocates). `None` at the cap, and `value`
    /// is dropped.
    #[inline]
    pub(crate) fn create_mut<T: Object>(
        &mut self,
        value: T,
        outer: Option<AnyObj>,
        extra: u32,
    ) -> Option<Obj<T>> {
        let index = match self.table.reserve_mut() {
            Some(i) => i,
            None => self.reserve_mut_settled()?,
        };
        let p = ObjBox::alloc_mut(&mut self.slabs, value, outer);
        Some(self.publish::<T>(index, p, extra | no_drop_bits::<T>(outer)))
    }

    /// [`create_mut`](Self::create_mut) at the cap: indices reserved in the
    /// threads' caches (see `tlab`) go back to the free list, then one more
    /// try, so that creation through `&mut` fails only when the heap is full.
    #[cold]
    #[inline(never)]
    fn reserve_mut_settled(&mut self) -> Option<u32> {
        self.sync_caches();
        self.table.reserve_mut()
    }

    /// Fills a reserved slot (owned by the caller) with the object `p`,
    /// fresh from [`ObjBox::alloc_with`], and gives its handle.
    #[inline(always)]
    fn publish<T: Object>(&self, index: u32, p: NonNull<Header>, extra: u32) -> Obj<T> {
        let item = self.at(index);
        let old = item.serial();
        // A fresh slot starts at the tag's floor; a reused one already carries
        // the generation its last free bumped it to.
        let serial = if old == 0 {
            serial::make(self.lease.tag, self.lease.floor)
        } else {
            old
        };
        debug_assert_ne!(old, RETIRED, "retired slot handed out");
        let mut f = extra;
        if T::HAS_HOOKS {
            f |= flags::HOOKS;
        }
        if T::INTERIOR_MUT {
            f |= flags::INTERIOR;
        }
        if !T::CAN_BE_IN_CLUSTER {
            f |= flags::NO_CLUSTER;
        }
        if self.pool.open && index < self.pool.capacity {
            f |= flags::DISREGARD;
        }
        item.fill(p, f, serial);
        let h = AnyObj::new(index, NonZeroU32::new(serial).expect("tag is never 0"));
        // SAFETY: the slot now holds a `T` under this serial.
        unsafe { h.assume() }
    }

    // ----- resolving ------------------------------------------------------------

    /// Finds a handle's live header, hiding objects whose flags meet `hidden`.
    #[inline(always)]
    pub(crate) fn lookup(&self, h: AnyObj, hidden: u32) -> Result<NonNull<Header>, ResolveError> {
        let (p, f) = self.find(h)?;
        if f & hidden != 0 || self.condemned.active {
            return self.hidden(h, p, f, hidden);
        }
        Ok(p)
    }

    /// The slot's object and flags, if its serial is the handle's.
    #[inline(always)]
    fn find(&self, h: AnyObj) -> Result<(NonNull<Header>, u32), ResolveError> {
        let Some(item) = self.table.item(h.index()) else {
            return Err(self.miss(h));
        };
        if item.serial() != h.serial() {
            return Err(self.miss(h));
        }
        let Some(p) = item.object() else {
            return Err(self.miss(h));
        };
        Ok((p, item.flags()))
    }

    /// The rest of [`lookup`](Self::lookup), off the fast path: whether the
    /// flags `f` or the purge in flight hide the object.
    #[cold]
    #[inline(never)]
    fn hidden(
        &self,
        h: AnyObj,
        p: NonNull<Header>,
        f: u32,
        hidden: u32,
    ) -> Result<NonNull<Header>, ResolveError> {
        if f & hidden != 0 {
            return Err(ResolveError::Garbage(h));
        }
        if self.condemned.active
            && hidden & flags::UNREACHABLE != 0
            && self.is_condemned(h.index(), f)
        {
            return Err(ResolveError::Garbage(h));
        }
        Ok(p)
    }

    /// Whether the purge in flight will find slot `i` unreachable.
    #[cold]
    fn is_condemned(&self, i: u32, f: u32) -> bool {
        i >= self.condemned.start
            && i < self.condemned.end
            && f & (flags::BORN | flags::DISREGARD) == 0
            && !self.condemned.is_marked(i)
    }

    #[cold]
    fn miss(&self, h: AnyObj) -> ResolveError {
        let t = serial::tag(h.serial());
        // Every slot of this heap starts at its lease's floor: a generation
        // below it was issued by an earlier heap that held the same tag.
        if t != self.lease.tag || serial::generation(h.serial()) < self.lease.floor {
            ResolveError::Foreign {
                handle: h,
                handle_heap: t,
                this_heap: self.lease.tag,
            }
        } else {
            ResolveError::Stale(h)
        }
    }

    /// Gives a live object (not garbage) that has an outer another one.
    /// `Ok(false)`: it was created without an outer, so it has no room for
    /// one.
    pub(crate) fn set_outer(&mut self, h: AnyObj, outer: AnyObj) -> Result<bool, ResolveError> {
        let p = self.lookup(h, flags::DEAD)?;
        // SAFETY: `p` is a live header, from the item, with its slot's provenance.
        if unsafe { p.as_ref() }.has_outer() {
            // SAFETY: as above, it has an outer, and `&mut self` keeps every other reader out.
            unsafe { Header::set_outer(p, outer) };
            return Ok(true);
        }
        Ok(false)
    }

    /// The outer of a live object.
    #[inline]
    pub(crate) fn outer(&self, h: AnyObj, hidden: u32) -> Result<Option<AnyObj>, ResolveError> {
        let p = self.lookup(h, hidden)?;
        // SAFETY: `p` is a live header, from the item, with its slot's provenance.
        Ok(unsafe { Header::outer(p) })
    }

    /// The typed handle for a live object of class `T` (hidden per `hidden`).
    pub(crate) fn downcast<T: Object>(&self, h: AnyObj, hidden: u32) -> Option<Obj<T>> {
        if !self.header(h, hidden).ok()?.class().is::<T>() {
            return None;
        }
        // SAFETY: the object this serial names is a `T` (its class was just compared).
        Some(unsafe { h.assume() })
    }

    /// The header of a live object.
    #[inline]
    pub(crate) fn header(&self, h: AnyObj, hidden: u32) -> Result<&Header, ResolveError> {
        let p = self.lookup(h, hidden)?;
        // SAFETY: `p` is a live header; objects are freed only through `&mut self`.
        Ok(unsafe { p.as_ref() })
    }

    /// A typed lookup. The class is compared only in restored slots: see
    /// [`resolve`](Self::resolve) for why no other slot needs it.
    #[inline(always)]
    fn typed<T: Object>(&self, h: AnyObj, hidden: u32) -> Result<NonNull<Header>, ResolveError> {
        let (p, f) = self.find(h)?;
        if f & (hidden | flags::RESTORED | flags::INTERIOR) != 0 || self.condemned.active {
            return self.typed_slow::<T>(h, p, f, hidden);
        }
        Ok(p)
    }

    /// Starts loading the item a handle names (a hint: nothing is read).
    #[inline(always)]
    pub(crate) fn prefetch_item(&self, h: AnyObj) {
        if let Some(item) = self.table.item(h.index()) {
            crate::trace::prefetch_line(item);
        }
    }

    /// Starts loading the object in the slot a handle names, whoever holds
    /// it (a hint: a stale handle costs a wasted load, nothing more).
    #[inline(always)]
    pub(crate) fn prefetch_object(&self, h: AnyObj) {
        if let Some(p) = self.table.item(h.index()).and_then(Item::object) {
            crate::trace::prefetch_line(p.as_ptr());
        }
    }

    /// The read barrier of interior-mutable objects: while a cycle marks, a
    /// `&T` handed out for one (which can change its handles behind a lock)
    /// puts it on the re-scan list, once until marking looks at the list.
    #[inline]
    pub(crate) fn touch(&self, index: u32, f: u32) {
        if f & flags::INTERIOR != 0 && self.watching && f & flags::REGREY == 0 {
            self.touch_slow(index);
        }
    }

    #[cold]
    fn touch_slow(&self, index: u32) {
        if self.at(index).set(flags::REGREY) & flags::REGREY == 0 {
            self.touched.lock().push(index);
        }
    }

    /// Turns the read barrier of interior-mutable objects on or off (on
    /// while a cycle marks).
    pub(crate) fn watch(&mut self, on: bool) {
        self.watching = on;
    }

    /// Moves the objects touched through the read barrier onto `list`.
    pub(crate) fn take_touched(&mut self, list: &mut Vec<u32>) {
        list.append(self.touched.get_mut());
    }

    #[cold]
    #[inline(never)]
    fn typed_slow<T: Object>(
        &self,
        h: AnyObj,
        p: NonNull<Header>,
        f: u32,
        hidden: u32,
    ) -> Result<NonNull<Header>, ResolveError> {
        let p = self.hidden(h, p, f, hidden)?;
        self.touch(h.index(), f);
        if f & flags::RESTORED != 0 {
            // SAFETY: `p` is a live header; reading its class is a shared read.
            let class = unsafe { p.as_ref() }.class();
            if !class.is::<T>() {
                return Err(ResolveError::WrongClass {
                    handle: h,
                    expected: T::class().name(),
                    actual: class.name(),
                });
            }
        }
        Ok(p)
    }

    /// The one safe door from a handle to a shared reference.
    ///
    /// The proof, stated once. The lookup found a live header in a slot whose
    /// serial is the handle's. A serial names one object for the slot's whole
    /// life: freeing moves the slot's generation on, a slot whose generation
    /// would wrap is retired, and a heap's tag starts above every generation an
    /// earlier heap with that tag issued ([`crate::serial`]). A typed handle
    /// (`Obj<T>`, `Weak<T>`, `&StrongObj<T>`; [`Handle`](crate::Handle) is
    /// sealed) is minted only by creating a `T` (the slot's new serial), by a
    /// class check made while the serial matched (`Heap::downcast`, iteration
    /// by class), by converting another handle to the same `T`, or by the
    /// `unsafe` [`AnyObj::assume`], whose caller promises it. So the object
    /// is the one the handle was minted for, a `T`, and its header heads an
    /// `ObjBox<T>`. The exception is [`Heap::create_at_with_serial`](crate::Heap::create_at_with_serial),
    /// which gives a serial already issued (or never issued) to a new object
    /// of any class: it flags the slot `RESTORED`, and [`typed`](Self::typed)
    /// compares the class there. Objects are freed and mutably borrowed only
    /// through `&mut self`, which cannot coexist with the returned `&T`.
    /// (Destruction hooks borrow their own object mutably while a
    /// `&ObjectArray` exists: [`DestroyCx`](crate::DestroyCx) refuses that
    /// one object.)
    #[inline(always)]
    pub(crate) fn resolve<T: Object>(&self, h: AnyObj, hidden: u32) -> Result<&T, ResolveError> {
        let p = self.typed::<T>(h, hidden)?;
        // SAFETY: see above.
        Ok(unsafe { ObjBox::<T>::value(p) })
    }

    /// The one safe door from a handle to an exclusive reference; also
    /// gives the object's item, for the write barrier.
    #[inline(always)]
    pub(crate) fn resolve_mut<T: Object>(
        &mut self,
        h: AnyObj,
    ) -> Result<(&mut T, &Item), ResolveError> {
        let p = self.typed::<T>(h, flags::DEAD)?;
        let item = self.at(h.index());
        // SAFETY: as in `resolve`, and `&mut self` excludes every other reference to
        // the value (the item is a separate allocation, only ever shared).
        Ok((unsafe { ObjBox::<T>::value_mut(p) }, item))
    }

    /// Exclusive references to `N` objects at once, through the same door
    /// as [`resolve_mut`](Self::resolve_mut): `None` if any handle does not
    /// resolve, or two name the same slot. Also gives each object's item and
    /// index, for the write barrier.
    pub(crate) fn resolve_disjoint_mut<T: Object, const N: usize>(
        &mut self,
        hs: [AnyObj; N],
    ) -> Option<[(&mut T, &Item, u32); N]> {
        let mut found = [(NonNull::<Header>::dangling(), 0u32); N];
        for (k, h) in hs.iter().enumerate() {
            if hs[..k].iter().any(|o| o.index() == h.index()) {
                return None;
            }
            found[k] = (self.typed::<T>(*h, flags::DEAD).ok()?, h.index());
        }
        let this = &*self;
        Some(found.map(|(p, i)| {
            // SAFETY: as in `resolve_mut`, each `p` heads a live `ObjBox<T>`
            // and `&mut self` excludes every reference made elsewhere; the
            // slots are pairwise distinct, and a slot holds one object in an
            // allocation of its own, so these references never overlap.
            let v = unsafe { ObjBox::<T>::value_mut(p) };
            (v, this.at(i), i)
        }))
    }

    /// Whether iteration and resolution hide slot `i` (with flags `f`):
    /// garbage, being destroyed, or condemned by the purge in flight.
    #[inline]
    pub(crate) fn hides(&self, i: u32, f: u32) -> bool {
        f & flags::DEAD != 0 || (self.condemned.active && self.is_condemned(i, f))
    }

    // ----- roots ----------------------------------------------------------------

    /// Puts an index on the root-candidate list.
    pub(crate) fn list_root(&self, index: u32) {
        self.roots.lock().push(index);
    }

    /// The root-candidate list, for the collector to filter.
    pub(crate) fn roots_mut(&mut self) -> &mut Vec<u32> {
        self.roots.get_mut()
    }

    /// Takes a strong count on a live object's slot.
    pub(crate) fn strong<T>(&self, h: Obj<T>) -> crate::StrongObj<T> {
        let (s, prev) = crate::StrongObj::acquire(&self.table.chunks, h);
        if prev == 0 && self.at(h.index()).list() {
            self.list_root(h.index());
        }
        s
    }

    // ----- freeing ----------------------------------------------------------------

    /// Empties a slot, moves its serial on (bump, or retire when the
    /// generation has run out), returns the index to the free list (or parks
    /// it while a strong handle counts on it), and drops the object, catching
    /// a panicking `Drop`. Returns the bytes freed.
    pub(crate) fn free(&mut self, index: u32, caught: &mut Caught) -> usize {
        let p = self.unlink(index);
        // SAFETY: `p` left its slot just now.
        unsafe { self.drop_unlinked(p, caught, false) }
    }

    /// [`free`](Self::free) for the purge's plain loop: a reusable index
    /// joins `freed` instead of the free list, and
    /// [`release_freed`](Self::release_freed) returns a slice's worth in one
    /// batch. Until then those indices are neither free nor objects, so the
    /// caller flushes before it gives the heap back; so with the slots,
    /// which go back to their pages a run at a time
    /// ([`Slabs::free_in_run`]).
    #[inline]
    pub(crate) fn free_batched(
        &mut self,
        index: u32,
        caught: &mut Caught,
        freed: &mut Vec<u32>,
    ) -> usize {
        let (p, reusable) = self.vacate_slot(index);
        if reusable {
            freed.push(index);
        }
        // SAFETY: `p` left its slot just now; `release_freed` flushes the run
        // before the slabs are used otherwise.
        unsafe { self.drop_unlinked(p, caught, true) }
    }

    /// [`free_batched`](Self::free_batched) of the object in `item`, slot
    /// `index`'s item, which the caller looked up already (through a clone
    /// of [`chunks`](Self::chunks), so that it may hold it across this
    /// `&mut` call): no second lookup in the chunk directory. An object
    /// whose flags carry [`flags::NO_DROP`] is freed without a read of its
    /// header or its class: no drop, and its slot's size class and size
    /// come from the flags.
    #[inline(always)]
    pub(crate) fn free_batched_at(
        &mut self,
        item: &Item,
        index: u32,
        caught: &mut Caught,
        freed: &mut Vec<u32>,
    ) -> usize {
        debug_assert!(std::ptr::eq(item, self.at(index)), "another slot's item");
        let no_drop = flags::no_drop_class(item.flags());
        let (p, reusable) = vacate_in(
            item,
            self.lease.limit,
            &mut self.retired,
            &mut self.parked,
            index,
        );
        if reusable {
            freed.push(index);
        }
        match no_drop {
            Some(c) => {
                let bytes = Slabs::class_slot(c);
                // The object was created without an outer (so its slot starts
                // at its header), its value needs no drop, and `c` is its
                // layout's size class, which is also its class's size.
                #[cfg(debug_assertions)]
                {
                    // SAFETY: `p` heads a live object (its value not dropped yet).
                    let h = unsafe { p.as_ref() };
                    debug_assert!(!h.has_outer() && !h.class().needs_drop());
                    debug_assert_eq!(slab::class_of(h.class().layout()), Some(c));
                    debug_assert_eq!(h.class().size(), bytes);
                }
                // SAFETY: `p` left its slot just now and its value has no drop
                // glue; it was allocated from these slabs with a layout of
                // size class `c` at the slot's start (no outer), and
                // `release_freed` flushes the run before the slabs are used
                // otherwise.
                unsafe { self.slabs.free_in_run_class(&mut self.run, p.cast(), c) };
                bytes
            }
            // SAFETY: as in `free_batched`.
            None => unsafe { self.drop_unlinked(p, caught, true) },
        }
    }

    /// The purge's look ahead at slot `index`, whose object it will free
    /// (its item is `item`): starts loading the object, and the buffers its
    /// drop will hand back to the allocator (its `Vec`s' and `Box`es', as
    /// [`Trace::prefetch`](crate::Trace::prefetch) names them) of the object
    /// it looked at [`FREE_AHEAD`] calls before (objects flagged
    /// [`flags::NO_DROP`] are not counted), if that one is still in its slot
    /// and has a drop. Those buffers lie scattered over the
    /// allocator's memory, and `free` reads the chunk header in front of
    /// each: a cache miss per freed object when nothing loaded it (most of a
    /// minor cycle's time in the `young` workload at a million objects).
    #[inline(always)]
    pub(crate) fn load_to_free(
        &self,
        ahead: &mut FreeAhead,
        item: &Item,
        index: u32,
        caught: &mut Caught,
    ) {
        if let Some(p) = item.object() {
            crate::trace::prefetch_line(p.as_ptr());
        }
        // An object without drop glue hands nothing back to the allocator
        // (binary-trees' nodes): it costs the ring nothing.
        if flags::no_drop_class(item.flags()).is_some() {
            return;
        }
        let k = ahead.pos;
        ahead.pos = (k + 1) % FREE_AHEAD;
        let earlier = std::mem::replace(&mut ahead.ring[k], index);
        if earlier == NO_SLOT {
            return;
        }
        // The slot is read afresh: its object may have been freed since
        // (the walk frees behind this look), and then it holds none.
        let Some(item) = self.item(earlier) else {
            return;
        };
        if let Some(p) = item.object() {
            // SAFETY: an item's pointer heads a live object until its slot
            // is vacated, which takes `&mut self`, so not during this call.
            let class = unsafe { p.as_ref() }.class();
            if class.needs_drop() && class.needs_trace() {
                // A hand-written `Trace::prefetch` is user code: a panic in
                // it is kept for the end of the cycle, as a `Drop`'s is, so
                // that the free step still flushes what it batched.
                guard(caught, || {
                    // SAFETY: `p` heads a live object of the header's own
                    // class, whose vtable this is; the purge holds the heap
                    // exclusively, so this shared read of its value races
                    // with no write.
                    unsafe { (class.vt.prefetch)(p) }
                });
            }
        }
    }

    /// Returns the indices [`free_batched`](Self::free_batched) gathered to
    /// the free list, in the order they were freed, and empties `freed`.
    pub(crate) fn release_freed(&mut self, freed: &mut Vec<u32>) {
        self.slabs.flush_run(&mut self.run);
        // Pages that cooled at the epoch give their memory back a few at a
        // time: one here, and one per [`COOL_EVERY`] objects freed, which
        // the purge's walk gives back itself ([`cool`](Self::cool)), inside
        // its budget.
        self.slabs.cool(1);
        self.table.release_batch(freed);
        freed.clear();
    }

    /// Gives back the memory of one page that cooled at the last epochs,
    /// if there is one (an `madvise`, which costs about as much as freeing
    /// a few dozen objects): the purge calls this once per [`COOL_EVERY`]
    /// objects it frees, and charges it to its budget.
    pub(crate) fn cool(&mut self) {
        self.slabs.cool(1);
    }

    /// Drops the value of an object that has left its slot, catching a
    /// panicking `Drop`, and takes its memory back: at once, or with
    /// `in_run` into the purge's run of slots ([`Slabs::free_in_run`]).
    /// Returns its class's size.
    ///
    /// # Safety
    /// `p` heads a live object that no slot points at any more (it came from
    /// [`unlink`](Self::unlink) or [`vacate_slot`](Self::vacate_slot)), and
    /// nothing else drops it; with `in_run`, the run is flushed
    /// ([`release_freed`](Self::release_freed)) before the slabs are used
    /// otherwise.
    #[inline(always)]
    unsafe fn drop_unlinked(
        &mut self,
        p: NonNull<Header>,
        caught: &mut Caught,
        in_run: bool,
    ) -> usize {
        // SAFETY: `p` was a live header that the slot no longer points at, so
        // this is its one and only drop.
        let class = unsafe { p.as_ref() }.class();
        if class.needs_drop() {
            // SAFETY: as above; the vtable is the object's own class's.
            guard(caught, || unsafe { (class.vt.drop)(p) });
        }
        // SAFETY: the value is dropped (a panicking `Drop` leaves it half-dropped,
        // but never used again), its header is intact, and nothing points at it.
        unsafe {
            let (slot, layout) = slot_of(p);
            if in_run {
                self.slabs.free_in_run(&mut self.run, slot, layout);
            } else {
                self.slabs.free(slot, layout);
            }
        }
        class.size()
    }

    /// [`free`](Self::free) without the drop and the memory: the object
    /// joins `doomed`, whose values may then be dropped on other threads
    /// ([`Doomed::parts`]) before [`release`](Self::release) takes the memory
    /// back. Returns the bytes the object counts for.
    pub(crate) fn free_later(&mut self, index: u32, doomed: &mut Doomed) -> usize {
        let p = self.unlink(index);
        doomed.ptrs.push(p);
        // SAFETY: `p` heads a live object (its value is not dropped yet).
        unsafe { p.as_ref() }.class().size()
    }

    /// Drops the values `doomed` still holds, on this thread, and takes the
    /// memory of all of them back.
    pub(crate) fn release(&mut self, mut doomed: Doomed, caught: &mut Caught) {
        if !doomed.dropped {
            for part in doomed.parts(1) {
                if let Some(p) = part.drop_values() {
                    caught.get_or_insert(p);
                }
            }
        }
        for &p in &doomed.ptrs {
            // SAFETY: `p` left its slot in `free_later`, its value is dropped
            // (by a part, each exactly once), its header is intact.
            unsafe {
                let (slot, layout) = slot_of(p);
                self.slabs.free(slot, layout);
            }
        }
        doomed.ptrs.clear();
    }

    /// Empties a slot and recycles its index; returns the object it held.
    #[inline]
    fn unlink(&mut self, index: u32) -> NonNull<Header> {
        let (p, reusable) = self.vacate_slot(index);
        if reusable {
            self.table.release(index);
        }
        p
    }

    /// Empties a slot and moves its serial on (retiring it, or parking it
    /// while a strong handle counts on it); returns the object it held and
    /// whether the index goes back to the free list now (the caller's job).
    #[inline(always)]
    fn vacate_slot(&mut self, index: u32) -> (NonNull<Header>, bool) {
        let item = self.table.chunks.at(index);
        vacate_in(
            item,
            self.lease.limit,
            &mut self.retired,
            &mut self.parked,
            index,
        )
    }

    /// Makes room for `n` more freed slots in the free list's directory of
    /// blocks (the list grows a block at a time, never by copying itself).
    ///
    /// Called once per purge, before it frees: also starts a new page epoch,
    /// which puts the pages emptied by the previous purge and not reused
    /// since on the cooling list ([`release_freed`](Self::release_freed)
    /// gives their memory back, a few pages per slice).
    pub(crate) fn reserve_frees(&mut self, n: usize) {
        self.slabs.epoch();
        self.table.reserve_free(n);
    }

    /// Returns parked slots whose strong count has dropped to zero.
    pub(crate) fn release_parked(&mut self) {
        let mut parked = std::mem::take(&mut self.parked);
        parked.retain(|&i| {
            let keep = self.table.chunks.at(i).refcount() > 0;
            if !keep {
                self.table.release(i);
            }
            keep
        });
        self.parked = parked;
    }

    // ----- saving and restoring (see `save/`) ----------------------------------------

    /// The tag lease: the generations this heap may hand out.
    pub(crate) fn lease(&self) -> TagLease {
        self.lease
    }

    /// Each slot below the high water that ever held an object, with its
    /// serial and whether it holds an object now (`f(index, serial, occupied)`).
    /// Never-used slots (serial 0) are left out.
    pub(crate) fn for_each_used_slot(&self, mut f: impl FnMut(u32, u32, bool)) {
        self.for_each_allocated(self.high_water(), |i, item| {
            let s = item.serial();
            if s != 0 {
                f(i, s, item.object().is_some());
            }
        });
    }

    /// Makes `index`, never used in this heap, a free slot whose next serial
    /// is `serial` ([`RETIRED`]: never handed out again), as the slot of a
    /// freed object is. For an exact restore.
    pub(crate) fn restore_free(&mut self, index: u32, serial: u32) -> Result<(), crate::Error> {
        self.check_claim(index)?;
        if !self.table.claim(index) {
            return Err(crate::Error::IndexTaken(index));
        }
        self.at(index).vacate(serial);
        if serial == RETIRED {
            self.retired += 1;
        } else {
            self.table.release(index);
        }
        Ok(())
    }

    /// The handle the next object placed in slot `index` (reserved or
    /// claimed) gets: what [`fill`](Self::fill) issues.
    pub(crate) fn next_handle(&self, index: u32) -> AnyObj {
        let old = self.at(index).serial();
        let serial = if old == 0 {
            serial::make(self.lease.tag, self.lease.floor)
        } else {
            old
        };
        AnyObj::new(index, NonZeroU32::new(serial).expect("tag is never 0"))
    }

    /// Gives back reserved slots that were never filled (a load that failed
    /// after reserving its objects' slots).
    pub(crate) fn unreserve(&mut self, indices: &[u32]) {
        self.sync_caches();
        for &i in indices {
            self.table.release(i);
        }
    }

    // ----- counts -------------------------------------------------------------------

    /// Folds concurrent reservations into the free list and high water.
    pub(crate) fn sync(&mut self) {
        self.sync_caches();
    }

    pub(crate) fn high_water(&self) -> u32 {
        self.table.high_water_at(self.settled().0)
    }

    /// Starts recording the slots handed out (a collection cycle begins).
    pub(crate) fn start_recording(&mut self) {
        self.table.record(true);
    }

    /// Stops recording (the cycle ended).
    pub(crate) fn stop_recording(&mut self) {
        self.table.record(false);
    }

    /// Moves the slots handed out since the last call into `out` (call
    /// `sync` first to include reservations from `&self`).
    pub(crate) fn take_born(&mut self, out: &mut Vec<u32>) {
        self.table.take_recorded(out);
    }

    /// [`take_born`](Self::take_born) into a list whose buffer was sized
    /// ahead (a cycle's born list): appended while it has room, so the
    /// buffer stays `out`'s.
    pub(crate) fn take_born_into(&mut self, out: &mut Vec<u32>) {
        self.table.take_recorded_into(out);
    }

    /// Gives an empty `out` the record's buffer if that is empty and has
    /// more room (see `Table::trade_recorded`).
    pub(crate) fn trade_born(&mut self, out: &mut Vec<u32>) {
        self.table.trade_recorded(out);
    }

    /// Bytes of the buffer recording the slots handed out (collector
    /// memory: it becomes a cycle's young or born list).
    pub(crate) fn recorded_bytes(&self) -> usize {
        self.table.recorded_bytes()
    }

    /// Puts `list` before the slots handed out since the last
    /// [`take_born`](Self::take_born), so that the next one returns them
    /// all, without copying `list`; returns a spare buffer.
    pub(crate) fn prepend_born(&mut self, list: Vec<u32>) -> Vec<u32> {
        self.table.prepend_recorded(list)
    }

    /// Objects allocated.
    pub(crate) fn len(&self) -> usize {
        let (cursor, holes) = self.settled();
        // Saturating: while other threads create, the caches are read as
        // they go (each cache consistently, the set of them not).
        (self.table.high_water_at(cursor) as usize)
            .saturating_sub(cursor.max(0) as usize)
            .saturating_sub(self.retired as usize)
            .saturating_sub(self.parked.len())
            .saturating_sub(holes)
    }

    /// The cursor with the caches' unused values settled (see
    /// `tlab::Caches::settle`), and the slots left reserved in holes.
    fn settled(&self) -> (i64, usize) {
        let past_cap = self.table.past_cap();
        let mut holes = 0;
        let cursor = self.caches.settle(self.table.cursor(), |lo, next| {
            holes += (next - lo.max(past_cap + 1) + 1).max(0) as usize;
        });
        (cursor, holes)
    }

    /// Slots reserved in threads' caches and not used (holes; see `settled`).
    pub(crate) fn reserved(&self) -> usize {
        self.settled().1
    }

    pub(crate) fn free_remaining(&self) -> usize {
        self.settled().0.max(0) as usize
    }

    pub(crate) fn retired(&self) -> u32 {
        self.retired
    }

    /// Objects allocated outside the pages, and their bytes.
    pub(crate) fn large_objects(&self) -> (usize, usize) {
        self.slabs.large()
    }

    /// The pages of each size class that holds any.
    pub(crate) fn page_classes(&self) -> Vec<slab::PageClass> {
        let mut classes = self.slabs.occupancy();
        // Slots reserved in caches hold no object yet. A cache with none has
        // no class; and while other threads refill theirs, a class's count
        // read above may predate slots read in a cache now: an estimate then.
        for (c, n) in self.caches.held_slots().filter(|&(_, n)| n > 0) {
            let size = Slabs::class_slot(c);
            if let Some(pc) = classes.iter_mut().find(|pc| pc.slot == size) {
                pc.objects = pc.objects.saturating_sub(n);
            }
        }
        classes
    }

    pub(crate) fn allocated_chunks(&self) -> usize {
        self.table.chunks.allocated_chunks()
    }

    /// Whether pages and chunks are mapped from the system directly rather
    /// than allocated from the global allocator.
    pub(crate) const MAPPED: bool = vm::ENABLED;

    /// Bytes of the root list and parked list.
    pub(crate) fn list_bytes(&self) -> usize {
        (self.roots.lock().capacity() + self.parked.capacity()) * 4
    }

    // ----- the pool ----------------------------------------------------------------

    pub(crate) fn pool(&self) -> Pool {
        self.pool
    }

    pub(crate) fn pool_mut(&mut self) -> &mut Pool {
        &mut self.pool
    }

    /// The end of the pool's index range, open or closed.
    pub(crate) fn pool_end(&self) -> u32 {
        if self.pool.open {
            self.table.high_water().min(self.pool.capacity)
        } else {
            self.pool.end
        }
    }

    // ----- iteration ------------------------------------------------------------------

    /// The live object in slot `index`, if any.
    #[inline]
    pub(crate) fn slot<'h>(
        &'h self,
        names: &'h RwLock<Names>,
        index: u32,
    ) -> Option<ObjectRef<'h>> {
        self.slot_item(names, index, self.table.item(index)?)
    }

    /// The items at indices `from .. end` whose chunks exist, in index
    /// order, a chunk at a time (see `Table::walk`).
    #[inline]
    pub(crate) fn walk(&self, from: u32, end: u32) -> table::Walk<'_> {
        self.table.walk(from, end)
    }

    /// Every live object of class `T` at indices `from .. end` (what
    /// [`slot`](Self::slot), the hidden filter and [`ObjectRef::typed`]
    /// give, in one pass over the items). `T`'s class is checked once, before
    /// the walk, so that each slot costs one pointer comparison.
    ///
    /// # Panics
    /// If `T::class()` was built for another type (a broken `unsafe impl Object`).
    #[inline]
    pub(crate) fn live_of<T: Object>(
        &self,
        from: u32,
        end: u32,
    ) -> impl Iterator<Item = (Obj<T>, &T)> + '_ {
        let class = Class::checked::<T>();
        self.walk(from, end).filter_map(move |(index, item)| {
            let header = item.object()?;
            let serial = NonZeroU32::new(item.serial())?;
            let f = item.flags();
            if self.hides(index, f) {
                return None;
            }
            // SAFETY: `header` is live while `&self` is borrowed.
            if !std::ptr::eq(unsafe { header.as_ref() }.class(), class) {
                return None;
            }
            self.touch(index, f);
            // SAFETY: the class is `T`'s (checked above), so the header heads an
            // ObjBox<T>, live while `&self` is borrowed, and the serial names it.
            unsafe {
                Some((
                    AnyObj::new(index, serial).assume(),
                    ObjBox::<T>::value(header),
                ))
            }
        })
    }

    /// [`slot`](Self::slot) for an item the caller found.
    #[inline]
    pub(crate) fn slot_item<'h>(
        &'h self,
        names: &'h RwLock<Names>,
        index: u32,
        item: &'h Item,
    ) -> Option<ObjectRef<'h>> {
        let header = item.object()?;
        let serial = NonZeroU32::new(item.serial())?;
        Some(ObjectRef {
            names,
            array: self,
            id: AnyObj::new(index, serial),
            // SAFETY: `header` is live while `&self` is borrowed.
            header: unsafe { header.as_ref() },
            value: header,
            flags: item.flags(),
        })
    }

    /// Calls `f` with every slot below `end` whose chunk exists, skipping
    /// whole chunks that were never allocated (gaps left by `create_at`).
    pub(crate) fn for_each_allocated(&self, end: u32, mut f: impl FnMut(u32, &Item)) {
        let mut i = 0;
        while i < end {
            match self.item(i) {
                Some(item) => {
                    f(i, item);
                    i += 1;
                }
                None => i = (i | (CHUNK_SIZE - 1)).saturating_add(1),
            }
        }
    }

    /// Objects per class, most numerous first: the live ones (those
    /// resolution does not hide), or with `allocated` every object in the
    /// table.
    pub(crate) fn class_counts(&self, allocated: bool) -> Vec<(&'static str, usize)> {
        let mut by: std::collections::HashMap<*const Class, (&'static str, usize)> =
            std::collections::HashMap::new();
        self.for_each_allocated(self.high_water(), |i, item| {
            if !allocated && self.hides(i, item.flags()) {
                return;
            }
            if let Some(p) = item.object() {
                // SAFETY: `p` is a live header while `&self` is borrowed.
                let c = unsafe { p.as_ref() }.class();
                by.entry(c as *const Class).or_insert((c.name(), 0)).1 += 1;
            }
        });
        let mut v: Vec<_> = by.into_values().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        v
    }

    /// Drops every object, runs on: a panicking `Drop` does not stop the
    /// others. Releases the tag. Returns the first panic.
    pub(crate) fn drop_all(&mut self) -> Caught {
        self.sync_caches();
        let mut caught: Caught = None;
        let mut highest: Option<u32> = (self.retired > 0).then_some(self.lease.limit);
        let tag = self.lease.tag;
        let mut slabs = std::mem::take(&mut self.slabs);
        let mut live = Vec::new();
        self.for_each_allocated(self.table.high_water(), |_, item| {
            let s = item.serial();
            if serial::tag(s) == tag {
                let g = serial::generation(s);
                highest = Some(highest.map_or(g, |h| h.max(g)));
            }
            if let Some(p) = item.take() {
                // SAFETY: `p` is a live header owned by this slot; it was just unlinked,
                // so it is dropped exactly once, and no reference into the heap remains.
                guard(&mut caught, || unsafe { (p.as_ref().class().vt.drop)(p) });
                // SAFETY: the value is dropped and its header intact.
                let (slot, layout) = unsafe { slot_of(p) };
                if Slabs::pooled(layout) {
                    if Slabs::RELEASE_NEEDS_SLOTS {
                        live.push(slot);
                    }
                } else {
                    // SAFETY: a global-allocator slot, dropped, used no more.
                    unsafe { slabs.free(slot, layout) };
                }
            }
        });
        // SAFETY: every object is dropped; `live` holds the slots of those in pages.
        unsafe { slabs.release(live.into_iter()) };
        serial::release(self.lease, highest);
        // The tag is released once; a second call finds nothing to drop.
        self.lease.tag = 0;
        caught
    }
}

impl Drop for ObjectArray {
    fn drop(&mut self) {
        if self.lease.tag != 0 {
            // Panics were already reported by the heap's drop; a bare array
            // (never the case outside tests) swallows them rather than abort.
            drop(self.drop_all());
        }
    }
}

/// Objects taken out of their slots whose values are still to be dropped
/// (see [`ObjectArray::free_later`]). No slot or handle reaches them any
/// more: this list owns them.
#[derive(Default)]
pub(crate) struct Doomed {
    ptrs: Vec<NonNull<Header>>,
    /// The values were handed out to [`parts`](Self::parts) to drop.
    dropped: bool,
}

// SAFETY: the list owns its objects outright (no slot points at them), and
// every object is `Send + Sync` (the `Object` bound).
unsafe impl Send for Doomed {}

impl Doomed {
    /// Splits the list into at most `n` parts whose values may be dropped on
    /// different threads. Only the first call hands out the values; later
    /// calls give nothing, so no value is dropped twice.
    pub(crate) fn parts(&mut self, n: usize) -> Vec<DoomedPart<'_>> {
        if std::mem::replace(&mut self.dropped, true) || self.ptrs.is_empty() {
            return Vec::new();
        }
        let size = self.ptrs.len().div_ceil(n.max(1));
        self.ptrs
            .chunks(size)
            .map(|c| DoomedPart { ptrs: c })
            .collect()
    }
}

/// A share of a [`Doomed`] list, to drop on one thread.
pub(crate) struct DoomedPart<'a> {
    ptrs: &'a [NonNull<Header>],
}

// SAFETY: a part is the only handle to its objects' values (`Doomed::parts`
// hands each out once), and every object is `Send + Sync`.
unsafe impl Send for DoomedPart<'_> {}

impl DoomedPart<'_> {
    /// Drops every value in the part, on the calling thread; a panicking
    /// `Drop` does not stop the others. Returns the first panic.
    pub(crate) fn drop_values(self) -> Caught {
        let mut caught: Caught = None;
        for &p in self.ptrs {
            // SAFETY: `p` left its slot, and this part is the one place its value is
            // dropped (the part is consumed); the vtable is its class's.
            guard(&mut caught, || unsafe { (p.as_ref().class().vt.drop)(p) });
        }
        caught
    }
}

/// A live object seen while iterating.
#[derive(Clone, Copy)]
pub struct ObjectRef<'h> {
    names: &'h RwLock<Names>,
    /// For the read barrier of interior-mutable objects.
    array: &'h ObjectArray,
    id: AnyObj,
    header: &'h Header,
    value: NonNull<Header>,
    flags: u32,
}

impl<'h> ObjectRef<'h> {
    pub(crate) fn header_ptr(&self) -> NonNull<Header> {
        self.value
    }
    pub(crate) fn flags(&self) -> u32 {
        self.flags
    }
    /// The object's handle.
    pub fn id(&self) -> AnyObj {
        self.id
    }
    /// Its class.
    pub fn class(&self) -> &'static Class {
        self.header.class()
    }
    /// Its outer, if any.
    pub fn outer(&self) -> Option<AnyObj> {
        // SAFETY: `value` is the item's pointer to a header live for 'h.
        unsafe { Header::outer(self.value) }
    }
    /// Whether it is in the disregard-for-GC pool.
    pub fn is_disregard(&self) -> bool {
        self.flags & flags::DISREGARD != 0
    }
    /// Whether it is in the root set.
    pub fn is_rooted(&self) -> bool {
        self.flags & flags::ROOT != 0
    }
    /// The value, if it is a `T`.
    #[inline]
    pub fn downcast<T: Object>(&self) -> Option<&'h T> {
        if !self.class().is::<T>() {
            return None;
        }
        self.array.touch(self.id.index(), self.flags);
        // SAFETY: the class matches, so the header heads an ObjBox<T>, live for 'h.
        Some(unsafe { ObjBox::<T>::value(self.value) })
    }
    /// Its typed handle and value, if it is a `T`.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Coin(u32);
    /// let heap = Heap::new();
    /// let c = heap.create(Coin(4));
    /// let o = heap.iter().next().unwrap();
    /// let (h, v) = o.typed::<Coin>().unwrap();
    /// assert_eq!((h, v.0), (c, 4));
    /// ```
    #[inline]
    pub fn typed<T: Object>(&self) -> Option<(Obj<T>, &'h T)> {
        let v = self.downcast::<T>()?;
        // SAFETY: the object this serial names is a `T` (`downcast` compared the class).
        Some((unsafe { self.id.assume() }, v))
    }
    /// Its display name: its name, or `Class_index` if it has none.
    pub fn display_name(&self) -> String {
        match self.names.read().name_of(self.id.index()) {
            Some(n) => n.to_string(),
            None => format!("{}_{}", self.class().name(), self.id.index()),
        }
    }
}

impl fmt::Debug for ObjectRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({:?})", self.class().name(), self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static DROPS: AtomicUsize = AtomicUsize::new(0);

    #[derive(crate::Object)]
    struct Counted {
        #[object(skip)]
        buf: Vec<u64>,
    }

    impl Drop for Counted {
        fn drop(&mut self) {
            DROPS.fetch_add(self.buf.len(), Ordering::Relaxed);
        }
    }

    /// `free_later` empties the slots at once; the values are dropped by the
    /// parts (each once: a second `parts` call hands out nothing), and
    /// `release` takes the memory back; a list never split is dropped by
    /// `release` itself. Runs under miri (no threads).
    #[test]
    fn doomed_objects_are_dropped_once_and_released() {
        let lease = serial::acquire(22).expect("a tag");
        let mut array = ObjectArray::new(1 << 12, false, 0, lease);
        let mut handles = Vec::new();
        for _ in 0..40 {
            let i = array.reserve().expect("room");
            handles.push(array.fill(i, Counted { buf: vec![1] }, None, 0).any());
        }
        array.sync();
        let before = DROPS.load(Ordering::Relaxed);
        let mut doomed = Doomed::default();
        for h in &handles[..30] {
            array.free_later(h.index(), &mut doomed);
            assert!(array.lookup(*h, 0).is_err(), "stale at once");
        }
        let parts = doomed.parts(3);
        assert_eq!(parts.len(), 3);
        for part in parts {
            assert!(part.drop_values().is_none());
        }
        assert!(doomed.parts(3).is_empty(), "handed out once");
        let mut caught = None;
        array.release(doomed, &mut caught);
        assert!(caught.is_none());
        // Never split: `release` drops them.
        let mut rest = Doomed::default();
        for h in &handles[30..] {
            array.free_later(h.index(), &mut rest);
        }
        array.release(rest, &mut caught);
        assert!(caught.is_none());
        // (`Counted` is this test's alone, so the count is exact.)
        assert_eq!(DROPS.load(Ordering::Relaxed), before + 40);
        assert_eq!(array.len(), 0);
    }

    /// The `NO_DROP` field is set at creation exactly for objects whose value
    /// has no drop glue, that have no outer and whose slot is in the pages,
    /// and names their slot's size class; `free_batched_at` frees such an
    /// object into its own size class (the next object of that layout gets
    /// its slot back) and counts its class's size, and drops the others'
    /// values. Runs under miri.
    #[test]
    fn the_no_drop_field_frees_without_the_class() {
        static BIG_DROPS: AtomicUsize = AtomicUsize::new(0);
        #[derive(crate::Object)]
        struct Plain {
            a: u64,
            b: u32,
        }
        #[derive(crate::Object)]
        #[repr(align(16))]
        struct Wide {
            a: u64,
        }
        #[derive(crate::Object)]
        #[repr(align(32))]
        struct Overaligned {
            a: u64,
        }
        #[derive(crate::Object)]
        #[allow(dead_code)]
        struct Big {
            #[object(skip)]
            a: [u64; 600],
        }
        #[derive(crate::Object)]
        #[allow(dead_code)]
        struct Owns {
            #[object(skip)]
            v: Box<u64>,
        }
        struct Counts;
        impl Drop for Counts {
            fn drop(&mut self) {
                BIG_DROPS.fetch_add(1, Ordering::Relaxed);
            }
        }
        #[derive(crate::Object)]
        #[allow(dead_code)]
        struct Dropping {
            #[object(skip)]
            c: Counts,
        }
        let lease = serial::acquire(22).expect("a tag");
        let mut array = ObjectArray::new(1 << 12, false, 0, lease);
        let take = |array: &mut ObjectArray| array.reserve().expect("room");
        let field =
            |array: &ObjectArray, h: AnyObj| flags::no_drop_class(array.at(h.index()).flags());
        let class_of = |c: &Class| slab::class_of(c.layout());

        let i = take(&mut array);
        let plain = array.fill(i, Plain { a: 1, b: 2 }, None, 0).any();
        assert_eq!(field(&array, plain), class_of(Plain::class()));
        assert!(field(&array, plain).is_some());
        let i = take(&mut array);
        let inner = array.fill(i, Plain { a: 3, b: 4 }, Some(plain), 0).any();
        assert_eq!(field(&array, inner), None, "an object with an outer");
        let i = take(&mut array);
        let wide = array.fill(i, Wide { a: 5 }, None, 0).any();
        assert_eq!(field(&array, wide), class_of(Wide::class()));
        assert!(field(&array, wide).is_some());
        let i = take(&mut array);
        let over = array.fill(i, Overaligned { a: 6 }, None, 0).any();
        assert_eq!(field(&array, over), None, "aligned past the pages");
        let i = take(&mut array);
        let big = array.fill(i, Big { a: [7; 600] }, None, 0).any();
        assert_eq!(field(&array, big), None, "larger than a pooled slot");
        let i = take(&mut array);
        let owns = array.fill(i, Owns { v: Box::new(8) }, None, 0).any();
        assert_eq!(field(&array, owns), None, "a value with drop glue");
        let i = take(&mut array);
        let dropping = array.fill(i, Dropping { c: Counts }, None, 0).any();
        assert_eq!(field(&array, dropping), None, "a value with drop glue");
        // Through `&mut` creation too.
        let mine = array
            .create_mut(Plain { a: 9, b: 10 }, None, 0)
            .unwrap()
            .any();
        assert_eq!(field(&array, mine), class_of(Plain::class()));
        array.sync();

        let before = BIG_DROPS.load(Ordering::Relaxed);
        let all = [plain, inner, wide, over, big, owns, dropping, mine];
        let sizes = [
            Plain::class().size(),
            Plain::class().size(),
            Wide::class().size(),
            Overaligned::class().size(),
            Big::class().size(),
            Owns::class().size(),
            Dropping::class().size(),
            Plain::class().size(),
        ];
        let slots: Vec<_> = all
            .iter()
            .map(|h| array.at(h.index()).object().unwrap())
            .collect();
        let chunks = Arc::clone(array.chunks());
        let mut caught = None;
        let mut freed = Vec::new();
        for (h, size) in all.iter().zip(sizes) {
            let item = chunks.get(h.index()).expect("allocated");
            assert_eq!(
                array.free_batched_at(item, h.index(), &mut caught, &mut freed),
                size
            );
            assert!(array.lookup(*h, 0).is_err(), "stale at once");
        }
        array.release_freed(&mut freed);
        assert!(caught.is_none());
        assert_eq!(
            BIG_DROPS.load(Ordering::Relaxed),
            before + 1,
            "dropped once"
        );
        assert_eq!(array.len(), 0);
        // Each pooled slot went back to its own size class, last freed first
        // out: `mine`'s slot, then `plain`'s (the inner's slot, larger by its
        // outer, is of another class: `wide`'s, which gets its own back).
        let again = array
            .create_mut(Plain { a: 11, b: 12 }, None, 0)
            .unwrap()
            .any();
        assert_eq!(array.at(again.index()).object(), Some(slots[7]));
        let again = array
            .create_mut(Plain { a: 13, b: 14 }, None, 0)
            .unwrap()
            .any();
        assert_eq!(array.at(again.index()).object(), Some(slots[0]));
        let again = array.create_mut(Wide { a: 15 }, None, 0).unwrap().any();
        assert_eq!(array.at(again.index()).object(), Some(slots[2]));
    }

    /// `resolve_disjoint_mut` hands out references that do not overlap:
    /// writes through each land in its own object, and a slot named twice,
    /// or a stale handle, gives nothing. Runs under miri.
    #[test]
    fn disjoint_mutable_references() {
        #[derive(crate::Object)]
        struct Cell {
            #[object(skip)]
            v: Vec<u32>,
        }
        let lease = serial::acquire(22).expect("a heap tag");
        let mut array = ObjectArray::new(64, false, 0, lease);
        let hs: Vec<AnyObj> = (0..4)
            .map(|k| {
                let i = array.reserve().unwrap();
                array.fill(i, Cell { v: vec![k] }, None, 0).any()
            })
            .collect();
        let [a, b, c] = array
            .resolve_disjoint_mut::<Cell, 3>([hs[2], hs[0], hs[3]])
            .unwrap();
        assert_eq!((a.2, b.2, c.2), (2, 0, 3));
        std::mem::swap(&mut a.0.v, &mut b.0.v);
        c.0.v.push(9);
        let read = |array: &ObjectArray, h: AnyObj| array.resolve::<Cell>(h, 0).unwrap().v.clone();
        assert_eq!(read(&array, hs[0]), [2]);
        assert_eq!(read(&array, hs[2]), [0]);
        assert_eq!(read(&array, hs[3]), [3, 9]);
        assert!(array
            .resolve_disjoint_mut::<Cell, 2>([hs[1], hs[1]])
            .is_none());
        let stale = AnyObj::new(hs[1].index(), NonZeroU32::new(hs[1].serial() + 1).unwrap());
        assert!(array
            .resolve_disjoint_mut::<Cell, 2>([hs[0], stale])
            .is_none());
    }

    /// While the pool is open, a full pool reserves nothing; slots that
    /// racing creations reserved past its end are freed when it closes.
    #[test]
    fn a_full_open_pool_reserves_nothing() {
        let lease = serial::acquire(22).expect("a heap tag");
        let mut array = ObjectArray::new(64, false, 2, lease);
        array.pool_mut().open = true;
        assert_eq!(array.reserve(), Some(0));
        assert_eq!(array.reserve(), Some(1));
        assert_eq!(array.reserve(), None);
        assert_eq!(array.high_water(), 2, "a refusal reserves nothing");
        // Two creations that passed the check as the last slot went.
        assert_eq!(array.table.reserve(), Some(2));
        assert_eq!(array.table.reserve(), Some(3));
        assert_eq!(array.reserve(), None);
        array.release_refused();
        array.pool_mut().open = false;
        assert_eq!(array.table.free_len(), 2);
        let mut again = [array.reserve().unwrap(), array.reserve().unwrap()];
        again.sort_unstable();
        assert_eq!(again, [2, 3]);
    }
}

//! One entry of the object array (Unreal's `FUObjectItem`), its flags, and
//! the verbs that change them.
//!
//! # Layout (24 bytes, `#[repr(C)]`)
//!
//! ```text
//!  0..8    object        *Header   null while the slot is free
//!  8..12   serial        u32       heap tag | generation; 0 = never used
//! 12..16   flags         u32       ROOT, GARBAGE, UNREACHABLE, DISREGARD, … (atomic)
//! 16..20   cluster_root  u32       Unreal's ClusterRootIndex; 0 = in no cluster
//! 20..24   refcount      u32       strong handles (`StrongObj`) keeping it alive
//! ```
//!
//! A lookup reads the first 16 bytes (object, serial, flags). Items start
//! at every multiple of 24, so of the 8 offsets they take in a 64-byte
//! line, only one (56) puts those 16 bytes across two lines; with the
//! serial after the flags and the cluster root (bytes 0..20), two did.
//!
//! The mark bit is *not* here: the collector keeps marks in a side bitmap
//! (one bit per slot), which is denser to clear and to scan.
//!
//! Every write to an item goes through a method below, so the rules of the
//! slot protocol sit next to the fields they govern.

use std::ptr::NonNull;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

use crate::object::Header;
use crate::sync::{AtomicPtr, AtomicU32};

/// Item flags (Unreal's `EInternalObjectFlags`).
pub(crate) mod flags {
    /// `AddToRoot`: never collected while set.
    pub const ROOT: u32 = 1 << 0;
    /// `MarkAsGarbage`: collected at the next collection, referenced or not.
    pub const GARBAGE: u32 = 1 << 1;
    /// Found unreachable; `begin_destroy` has run or is about to; awaiting
    /// finish and free.
    pub const UNREACHABLE: u32 = 1 << 2;
    /// The slot index is in the array's list of root candidates.
    pub const LISTED: u32 = 1 << 3;
    /// Lives in the disregard-for-GC pool: permanent, never swept.
    pub const DISREGARD: u32 = 1 << 4;
    /// A class default object.
    pub const DEFAULT_OBJECT: u32 = 1 << 5;
    /// The class has destruction hooks ([`Lifecycle::HAS_HOOKS`](crate::Lifecycle::HAS_HOOKS)):
    /// copied here at creation so the sweep can skip hook-free objects
    /// without touching their memory.
    pub const HOOKS: u32 = 1 << 6;
    /// Created while a collection cycle was in flight: alive for that cycle
    /// (allocated black), whatever the mark bitmap says.
    pub const BORN: u32 = 1 << 7;
    /// Waiting in the collector's re-scan list (set by the write barrier,
    /// so that an object mutated many times is queued once).
    pub const REGREY: u32 = 1 << 8;
    /// `finish_destroy` has run; the slot is freed next.
    pub const FINISHED: u32 = 1 << 9;
    /// Objects were created with this one as their outer: it has an entry
    /// in the outer → inners index (so objects without one never probe it).
    pub const OUTER: u32 = 1 << 10;
    /// Has a name in the names index (so unnamed objects never probe it).
    pub const NAMED: u32 = 1 << 11;
    /// Created by [`Heap::create_at_with_serial`](crate::Heap::create_at_with_serial),
    /// whose serial may have named an object of another class: typed
    /// resolves compare the class here, and nowhere else.
    pub const RESTORED: u32 = 1 << 12;
    /// Its class can change its handles behind a shared reference
    /// ([`Trace::INTERIOR_MUT`](crate::Trace::INTERIOR_MUT)): while a cycle
    /// marks, every door that hands out a `&T` to it puts it on the re-scan
    /// list, as `get_mut` does for every object.
    pub const INTERIOR: u32 = 1 << 13;
    /// Its class may not be in a GC cluster (`#[object(cluster = false)]`),
    /// here so that gathering a cluster needs no look at the object.
    pub const NO_CLUSTER: u32 = 1 << 14;
    /// Created, or written through `get_mut`, since the last save into a
    /// store (set at creation and by the write barrier, cleared by the
    /// save's capture: `save/store.rs`); objects a load places start
    /// without it.
    pub const CHANGED: u32 = 1 << 15;
    /// Hidden from `get`: garbage or being destroyed.
    pub const DEAD: u32 = GARBAGE | UNREACHABLE;
    /// Bits 16..26, set at creation: non-zero when freeing the object needs
    /// neither its class nor a read of its memory (its value has no drop
    /// glue, it has no outer, and its slot is in the pages), and then its
    /// slot's size class plus one ([`no_drop_class`]). The free step takes
    /// the slot's size class and the bytes freed from here instead of
    /// loading the header and the class; objects with it 0 are freed as
    /// before. A class with hooks may have it: `begin_destroy` and
    /// `finish_destroy` run in the sweep and the finish step, by `HOOKS`.
    pub const NO_DROP: u32 = 0x3ff << NO_DROP_SHIFT;
    /// The position of [`NO_DROP`]'s field.
    pub const NO_DROP_SHIFT: u32 = 16;

    /// The size class [`NO_DROP`] names in the flags `f`, if it is set.
    #[inline(always)]
    pub fn no_drop_class(f: u32) -> Option<usize> {
        ((f & NO_DROP) >> NO_DROP_SHIFT)
            .checked_sub(1)
            .map(|c| c as usize)
    }
}

/// A table entry. See the module docs for the layout.
#[repr(C)]
pub(crate) struct Item {
    object: AtomicPtr<Header>,
    serial: AtomicU32,
    flags: AtomicU32,
    cluster_root: AtomicU32,
    refcount: AtomicU32,
}

#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<Item>() == 24);

/// The serial of a retired slot: heap tag 0, which no handle carries.
pub(crate) const RETIRED: u32 = 1;

/// The most [`StrongObj`](crate::StrongObj) handles one object may have.
const MAX_REFCOUNT: u32 = i32::MAX as u32;

impl Item {
    pub(crate) fn new() -> Item {
        Item {
            object: AtomicPtr::new(std::ptr::null_mut()),
            serial: AtomicU32::new(0),
            flags: AtomicU32::new(0),
            cluster_root: AtomicU32::new(0),
            refcount: AtomicU32::new(0),
        }
    }

    // ----- reads ------------------------------------------------------------

    #[inline(always)]
    pub(crate) fn flags(&self) -> u32 {
        self.flags.load(Relaxed)
    }

    #[inline(always)]
    pub(crate) fn serial(&self) -> u32 {
        self.serial.load(Acquire)
    }

    #[inline(always)]
    pub(crate) fn object(&self) -> Option<NonNull<Header>> {
        NonNull::new(self.object.load(Acquire))
    }

    #[inline(always)]
    pub(crate) fn refcount(&self) -> u32 {
        self.refcount.load(Acquire)
    }

    /// The index of the item's cluster root plus one; 0 = in no cluster.
    #[inline]
    pub(crate) fn cluster_root(&self) -> u32 {
        self.cluster_root.load(Relaxed)
    }

    /// Files the item's object in the cluster whose root is in slot
    /// `root - 1` (0: in none).
    #[inline]
    pub(crate) fn set_cluster_root(&self, root: u32) {
        self.cluster_root.store(root, Relaxed);
    }

    /// Whether the item is a root: rooted, or held by a strong handle.
    #[inline]
    pub(crate) fn is_root(&self) -> bool {
        self.flags() & flags::ROOT != 0 || self.refcount() > 0
    }

    // ----- the slot's life ----------------------------------------------------

    /// Publishes an object in a slot its caller owns exclusively: flags
    /// first, then the pointer, then the serial (readers check the serial
    /// last, so a half-filled slot never resolves).
    #[inline]
    pub(crate) fn fill(&self, p: NonNull<Header>, flags: u32, serial: u32) {
        self.flags.store(flags, Relaxed);
        self.cluster_root.store(0, Relaxed);
        self.object.store(p.as_ptr(), Release);
        self.serial.store(serial, Release);
    }

    /// Empties the slot and moves its serial to `next` (the next generation,
    /// or [`RETIRED`]). Returns the object it held.
    ///
    /// Only the holder of the array's `&mut` frees a slot (the purge, a
    /// restore), so no other thread reads or writes the pointer meanwhile:
    /// a plain load and store do what a swap would, without its locked
    /// instruction. Readers that come later synchronize through the `&mut`
    /// borrow's end, as for every other write under it.
    #[inline]
    pub(crate) fn vacate(&self, next: u32) -> Option<NonNull<Header>> {
        let p = self.object.load(Relaxed);
        self.object.store(std::ptr::null_mut(), Relaxed);
        self.flags.store(0, Relaxed);
        self.serial.store(next, Release);
        NonNull::new(p)
    }

    /// Empties the slot for good (the heap is going away). Returns the object.
    pub(crate) fn take(&self) -> Option<NonNull<Header>> {
        NonNull::new(self.object.swap(std::ptr::null_mut(), AcqRel))
    }

    // ----- flags --------------------------------------------------------------

    /// Sets flags; returns the previous ones.
    #[inline]
    pub(crate) fn set(&self, f: u32) -> u32 {
        self.flags.fetch_or(f, Relaxed)
    }

    /// [`set`](Self::set) for the holder of the array's `&mut` (the purge):
    /// no other thread reads or writes the flags meanwhile, so a plain load
    /// and store do what `fetch_or` does, without its locked instruction
    /// (as in [`vacate`](Self::vacate)). Called without that exclusivity it
    /// could lose a racing writer's flag, never more: both are atomic.
    #[inline]
    pub(crate) fn set_exclusive(&self, f: u32) {
        self.flags.store(self.flags.load(Relaxed) | f, Relaxed);
    }

    /// Clears flags; returns the previous ones.
    #[inline]
    pub(crate) fn clear(&self, f: u32) -> u32 {
        self.flags.fetch_and(!f, Relaxed)
    }

    /// [`clear`](Self::clear) for the holder of the array's `&mut`, as
    /// [`set_exclusive`](Self::set_exclusive) is for `set`: a plain load and
    /// store, no locked instruction. Returns the previous flags.
    #[inline]
    pub(crate) fn clear_exclusive(&self, f: u32) -> u32 {
        let old = self.flags.load(Relaxed);
        self.flags.store(old & !f, Relaxed);
        old
    }

    /// Sets `ROOT`; true if the index must join the root list.
    pub(crate) fn add_root(&self) -> bool {
        self.set(flags::ROOT | flags::LISTED) & flags::LISTED == 0
    }

    /// Marks the index as listed; true if it was not (it must join the list).
    pub(crate) fn list(&self) -> bool {
        self.set(flags::LISTED) & flags::LISTED == 0
    }

    // ----- strong handles -----------------------------------------------------

    /// Takes a strong count. Returns the previous count.
    ///
    /// # Panics
    /// Past [`MAX_REFCOUNT`] handles to one object.
    pub(crate) fn acquire(&self) -> u32 {
        let prev = self.refcount.fetch_add(1, Relaxed);
        if prev >= MAX_REFCOUNT {
            self.refcount.fetch_sub(1, Relaxed);
            panic!("more than {MAX_REFCOUNT} StrongObj handles to one object");
        }
        prev
    }

    /// Drops a strong count.
    pub(crate) fn release(&self) {
        self.refcount.fetch_sub(1, Release);
    }
}

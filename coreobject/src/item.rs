//! One entry of the object table (Unreal's `FUObjectItem`).
//!
//! # Layout (24 bytes, `#[repr(C)]`)
//!
//! ```text
//!  0..8    object        *Header   null while the slot is free
//!  8..12   flags         u32       ROOT, GARBAGE, UNREACHABLE, DISREGARD, … (atomic)
//! 12..16   cluster_root  u32       Unreal's ClusterRootIndex; 0 = in no cluster
//! 16..20   serial        u32       heap tag | generation; 0 = never used
//! 20..24   refcount      u32       strong handles (`StrongObj`) keeping it alive
//! ```
//!
//! The mark bit is *not* here: the collector keeps marks in a side bitmap
//! (one bit per slot), which is denser to clear and to scan.

use std::sync::atomic::Ordering;

use crate::object::Header;
use crate::sync::{AtomicPtr, AtomicU32};

/// Item flags (Unreal's `EInternalObjectFlags`).
pub(crate) mod flags {
    /// `AddToRoot`: never collected while set.
    pub const ROOT: u32 = 1 << 0;
    /// `MarkAsGarbage`: collected at the next collection, referenced or not.
    pub const GARBAGE: u32 = 1 << 1;
    /// Found unreachable; `begin_destroy` has run; awaiting finish and free.
    pub const UNREACHABLE: u32 = 1 << 2;
    /// The slot index is in the heap's list of root candidates.
    pub const LISTED: u32 = 1 << 3;
    /// Lives in the disregard-for-GC pool: permanent, never swept.
    pub const DISREGARD: u32 = 1 << 4;
    /// A class default object.
    pub const DEFAULT_OBJECT: u32 = 1 << 5;
    /// The class has destruction hooks ([`Lifecycle::HAS_HOOKS`](crate::Lifecycle::HAS_HOOKS)):
    /// copied here at creation so the sweep can skip hook-free objects
    /// without touching their memory.
    pub const HOOKS: u32 = 1 << 6;
    /// Hidden from `get`: garbage or being destroyed.
    pub const DEAD: u32 = GARBAGE | UNREACHABLE;
}

/// A table entry. See the module docs for the layout.
#[repr(C)]
pub(crate) struct Item {
    pub(crate) object: AtomicPtr<Header>,
    pub(crate) flags: AtomicU32,
    pub(crate) cluster_root: AtomicU32,
    pub(crate) serial: AtomicU32,
    pub(crate) refcount: AtomicU32,
}

#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<Item>() == 24);

/// The serial of a retired slot: heap tag 0, which no handle carries.
pub(crate) const RETIRED: u32 = 1;

impl Item {
    pub(crate) fn new() -> Item {
        Item {
            object: AtomicPtr::new(std::ptr::null_mut()),
            flags: AtomicU32::new(0),
            cluster_root: AtomicU32::new(0),
            serial: AtomicU32::new(0),
            refcount: AtomicU32::new(0),
        }
    }

    #[inline(always)]
    pub(crate) fn flags(&self) -> u32 {
        self.flags.load(Ordering::Relaxed)
    }

    #[inline(always)]
    pub(crate) fn serial(&self) -> u32 {
        self.serial.load(Ordering::Acquire)
    }

    #[inline(always)]
    pub(crate) fn object(&self) -> Option<std::ptr::NonNull<Header>> {
        std::ptr::NonNull::new(self.object.load(Ordering::Acquire))
    }
}

//! A counting global allocator, for the heap bytes per object of the `world`
//! workload.
//!
//! Counts are kept **per thread** in plain `Cell`s (no atomics, so counting
//! costs about a nanosecond per allocation and does not skew the
//! allocation-heavy workloads). Every peer's workload runs on a thread of its
//! own, so the difference of [`live_bytes`] between two points on that thread
//! is exactly what the peer allocated and kept between them. Memory freed on
//! another thread than the one that allocated it would skew the counts, which
//! no workload here does.
//!
//! The counts are of *requested* bytes (`Layout::size`), not of what the
//! system allocator rounds them up to: allocator slack is the same for every
//! peer and is not theirs to control.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, with per-thread counts.
pub struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

#[inline(always)]
fn add(bytes: isize, allocs: u64) {
    // `try_with`: allocations made while a thread's locals are being torn down
    // are simply not counted.
    let _ = LIVE.try_with(|c| c.set(c.get() + bytes));
    if allocs != 0 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + allocs));
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged;
// the counting touches only thread-local `Cell`s with const initializers, which
// never allocate.
unsafe impl GlobalAlloc for Counting {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            add(layout.size() as isize, 1);
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            add(layout.size() as isize, 1);
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as is.
        unsafe { System.dealloc(ptr, layout) };
        add(-(layout.size() as isize), 0);
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as is.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            add(new_size as isize - layout.size() as isize, 1);
        }
        p
    }
}

/// Bytes allocated and not yet freed by this thread (may be negative if the
/// thread freed memory another thread allocated).
pub fn live_bytes() -> isize {
    LIVE.with(Cell::get)
}

/// Allocation calls (including reallocations) made by this thread.
pub fn alloc_calls() -> u64 {
    ALLOCS.with(Cell::get)
}

/// Makes the system allocator settle the small chunks freed so far, so that
/// the next measurement does not pay for what an earlier one freed: glibc
/// malloc keeps freed small chunks in "fast bins" uncoalesced, and
/// coalesces all of them at the next request of a large-bin size, such as
/// this one (64 KiB, below the `mmap` threshold).
pub fn settle() {
    drop(std::hint::black_box(Vec::<u8>::with_capacity(64 << 10)));
}

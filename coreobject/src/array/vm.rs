//! Memory straight from the system, for the object pages and the table's
//! chunks: 2 MiB-aligned runs that the kernel may back with transparent huge
//! pages.
//!
//! A heap of a hundred million objects touches gigabytes of fresh memory. In
//! 4 KiB pages that is one page fault per 4 KiB (hundreds of thousands of
//! faults a gigabyte, most of the build's time in the kernel); a 2 MiB huge
//! page takes one fault, and one TLB entry, for 512 of them. Linux hands out
//! huge pages for a region when asked (`madvise(MADV_HUGEPAGE)`, which is
//! what `/sys/kernel/mm/transparent_hugepage/enabled` set to `madvise`
//! waits for), and only for 2 MiB-aligned ranges, hence the alignment.
//!
//! Only on Linux (and never under miri or loom, which cannot run the system
//! calls); elsewhere [`ENABLED`] is false and callers use the global
//! allocator as before.

/// Whether runs come from here (Linux) or callers use the global allocator.
pub(crate) const ENABLED: bool = cfg!(all(target_os = "linux", not(miri), not(loom)));

/// The huge page size, and the alignment of every run.
pub(crate) const HUGE: usize = 2 << 20;

#[cfg(all(target_os = "linux", not(miri), not(loom)))]
mod sys {
    use std::alloc::{handle_alloc_error, Layout};
    use std::ptr;

    use super::HUGE;

    /// Maps `bytes` (a multiple of [`HUGE`]) of zeroed memory aligned to
    /// [`HUGE`]; asks for huge pages if `huge`. Aborts through
    /// `handle_alloc_error` if the system refuses.
    pub(crate) fn map(bytes: usize, huge: bool) -> *mut u8 {
        debug_assert!(bytes > 0 && bytes % HUGE == 0);
        let len = bytes + HUGE;
        // SAFETY: a fresh anonymous private mapping at an address the kernel chooses
        // touches no memory anybody else owns.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            handle_alloc_error(
                Layout::from_size_align(bytes, HUGE).expect("HUGE is a power of two"),
            );
        }
        let p = p.cast::<u8>();
        let head = (HUGE - (p as usize & (HUGE - 1))) & (HUGE - 1);
        let tail = len - head - bytes;
        // SAFETY: `head <= HUGE`, so the aligned start and the run after it lie inside
        // the mapping just made.
        let run = unsafe { p.add(head) };
        // SAFETY: the unaligned head and the tail past the run lie inside the mapping
        // just made, and nothing points into them.
        unsafe {
            if head > 0 {
                libc::munmap(p.cast(), head);
            }
            if tail > 0 {
                libc::munmap(run.add(bytes).cast(), tail);
            }
        }
        if huge {
            // SAFETY: advice on a range this mapping owns; it changes no contents.
            // A kernel without transparent huge pages refuses it, which is harmless.
            unsafe { libc::madvise(run.cast(), bytes, libc::MADV_HUGEPAGE) };
        }
        run
    }

    /// Unmaps a run from [`map`].
    ///
    /// # Safety
    /// `p` and `bytes` are a run from [`map`], mapped still, and nothing
    /// points into it any more.
    pub(crate) unsafe fn unmap(p: *mut u8, bytes: usize) {
        // SAFETY: the caller's contract.
        unsafe { libc::munmap(p.cast(), bytes) };
    }

    /// Gives the memory of `bytes` at `p` back to the system; the range
    /// stays mapped and reads as zeros when next touched.
    ///
    /// # Safety
    /// The range lies in a run from [`map`] and holds nothing anybody reads
    /// again before writing.
    pub(crate) unsafe fn decommit(p: *mut u8, bytes: usize) {
        // SAFETY: the caller's contract: the range is ours and its contents are dead.
        unsafe { libc::madvise(p.cast(), bytes, libc::MADV_DONTNEED) };
    }
}

#[cfg(not(all(target_os = "linux", not(miri), not(loom))))]
mod sys {
    //! Never called: [`ENABLED`](super::ENABLED) is false.

    pub(crate) fn map(_bytes: usize, _huge: bool) -> *mut u8 {
        unreachable!("vm::map without system runs")
    }

    /// # Safety
    /// Never called.
    pub(crate) unsafe fn unmap(_p: *mut u8, _bytes: usize) {
        unreachable!("vm::unmap without system runs")
    }

    /// # Safety
    /// Never called.
    pub(crate) unsafe fn decommit(_p: *mut u8, _bytes: usize) {
        unreachable!("vm::decommit without system runs")
    }
}

pub(crate) use sys::{decommit, map, unmap};

//! Memory straight from the system, for the object pages and the table's
//! chunks, in 2 MiB-aligned runs.
//!
//! A heap of a hundred million objects touches gigabytes of fresh memory,
//! and with the global allocator each 4 KiB of it costs a page fault (the
//! table's even two: a read maps the shared zero page, the first write
//! copies it). Here:
//!
//! * Runs are mapped directly (`mmap`), so pages need no allocator header
//!   or alignment slack, and a returned page's memory goes back to the
//!   system at once ([`decommit`]).
//! * Once a heap is past its first few megabytes, a run is filled in one
//!   system call when mapped ([`populate`], `MADV_POPULATE_WRITE`) instead
//!   of one fault per 4 KiB as objects land in it: the kernel still zeroes
//!   every page, but the fault entries and exits go.
//! * Runs are aligned to 2 MiB, so that a system whose transparent huge
//!   pages are `always` on can back them with huge pages. They do not ask
//!   for them (`MADV_HUGEPAGE`): on a KVM guest whose free memory is handed
//!   back to its host, faulting huge pages in made building a 50M-object
//!   heap 2-3x slower (the time went to zeroing them, `clear_page_erms`),
//!   and marking no faster. Measured again on branch `resolve2`
//!   (BENCHMARKS.md, "Resolve and huge pages"): with every run advised,
//!   random weak resolves over 1M objects took 7-13% less CPU time (fewer
//!   TLB misses, presumably: the guest cannot count them), but building the
//!   heap took 1.6x the CPU time at 1M and 1.7x at 50M (3x the wall
//!   time), and collapsing the pages after the build (`MADV_COLLAPSE`)
//!   cost more than faulting them in; so runs do not ask by default.
//! * A heap made with [`HeapConfig::huge_pages`](crate::HeapConfig::huge_pages)
//!   does ask: each run it takes (table chunk groups and object runs) is
//!   advised `MADV_HUGEPAGE` before anything in it is populated.
//!   The slab's per-page decommit ([`decommit`], `MADV_DONTNEED` on 64
//!   KiB) on a run the kernel backs with a huge page splits that page's
//!   mapping: the 64 KiB leave `Rss`, the rest of the 2 MiB stays resident
//!   in 4 KiB entries (no longer counted in `AnonHugePages`), and writing
//!   the 64 KiB again faults 4 KiB pages (seen on Linux 6.18, BENCHMARKS.md
//!   "Huge pages as a setting"). The range is a huge page again only if
//!   `khugepaged` collapses it (the advice stays on).
//!
//! * A heap that goes hands its runs to a process-wide spare list (up to
//!   64 MiB of them, resident), which the next heap's runs come
//!   from before new ones are mapped: a program that makes and drops heaps
//!   one after another (a test suite, a level load) does not fault the same
//!   memory in again each time, as it would not with the global allocator.
//!   Each spare remembers whether it was advised: a heap without huge pages
//!   takes only spares never advised (advice cannot be taken back to the
//!   system's default: `MADV_NOHUGEPAGE` would forbid huge pages even where
//!   transparent huge pages are `always` on), and a heap with them prefers
//!   advised spares and advises a plain one when it takes it.
//!
//! Only on Linux (and never under miri or loom, which cannot run the system
//! calls); elsewhere [`ENABLED`] is false and callers use the global
//! allocator as before.

/// Whether runs come from here (Linux) or callers use the global allocator.
pub(crate) const ENABLED: bool = cfg!(all(target_os = "linux", not(miri), not(loom)));

/// The alignment of every run, and the unit of their sizes: a huge page.
pub(crate) const HUGE: usize = 2 << 20;

#[cfg(all(target_os = "linux", not(miri), not(loom)))]
mod sys {
    use std::alloc::{handle_alloc_error, Layout};
    use std::ptr;

    use parking_lot::Mutex;

    use super::HUGE;

    /// Bytes of runs kept for reuse after their heap is gone.
    const SPARE_BYTES: usize = 64 << 20;

    /// Runs of heaps that are gone, their contents dead: (address, bytes,
    /// how many leading bytes may have been written, whether the run was
    /// advised `MADV_HUGEPAGE`).
    struct Spare(Vec<(*mut u8, usize, usize, bool)>);

    // SAFETY: the runs are owned by the list alone; nobody else holds their addresses.
    unsafe impl Send for Spare {}

    static SPARE: Mutex<Spare> = Mutex::new(Spare(Vec::new()));

    /// A run of `bytes` (a multiple of [`HUGE`]): a spare one if there is
    /// one of that size and a fitting advice, else a new one (filled if
    /// `fill`). With `huge`, the run is advised `MADV_HUGEPAGE` (before it
    /// is filled). Also returns how many leading bytes may hold what an
    /// earlier heap wrote; the rest reads as zeros.
    pub(crate) fn take(bytes: usize, fill: bool, huge: bool) -> (*mut u8, usize) {
        let mut spare = SPARE.lock();
        // An advised spare for an advised taker first, then (for it) a plain
        // one, which it advises; a plain taker never gets an advised spare.
        let found = spare
            .0
            .iter()
            .position(|&(_, b, _, h)| b == bytes && h == huge)
            .or_else(|| {
                if huge {
                    spare.0.iter().position(|&(_, b, _, _)| b == bytes)
                } else {
                    None
                }
            });
        if let Some(i) = found {
            let (run, _, dirty, advised) = spare.0.swap_remove(i);
            drop(spare);
            if huge && !advised {
                advise(run, bytes);
            }
            return (run, dirty);
        }
        drop(spare);
        (map(bytes, fill, huge), 0)
    }

    /// Asks for huge pages over `bytes` at `p` (`MADV_HUGEPAGE`). A kernel
    /// without transparent huge pages refuses, which is harmless.
    fn advise(p: *mut u8, bytes: usize) {
        // SAFETY: advice changes no contents; a range outside a mapping is refused.
        unsafe { libc::madvise(p.cast(), bytes, libc::MADV_HUGEPAGE) };
    }

    /// Gives back a run from [`take`] of which at most the first `dirty`
    /// bytes were written, `huge` if it was taken with `huge`: kept for the
    /// next heap while the spare list has room, unmapped otherwise.
    ///
    /// # Safety
    /// `run` and `bytes` are a mapped run, and nothing in it is used again.
    pub(crate) unsafe fn give(run: *mut u8, bytes: usize, dirty: usize, huge: bool) {
        let mut spare = SPARE.lock();
        let held: usize = spare.0.iter().map(|&(_, b, _, _)| b).sum();
        if held + bytes <= SPARE_BYTES {
            spare.0.push((run, bytes, dirty.min(bytes), huge));
            return;
        }
        drop(spare);
        // SAFETY: the caller's contract: a mapped run of `bytes`, dead.
        unsafe { unmap(run, bytes) };
    }

    /// Maps `bytes` (a multiple of [`HUGE`]) of zeroed memory aligned to
    /// [`HUGE`], advised `MADV_HUGEPAGE` if `huge`, then touched in advance
    /// if `fill`. Aborts through `handle_alloc_error` if the system refuses.
    fn map(bytes: usize, fill: bool, huge: bool) -> *mut u8 {
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
        // SAFETY: `head < HUGE`, so the aligned start and the run after it lie inside
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
            advise(run, bytes);
        }
        if fill {
            populate(run, bytes);
        }
        run
    }

    /// Faults `bytes` at `p` in now, in one system call, as if each 4 KiB
    /// had been written. A kernel older than 5.14 refuses, which is
    /// harmless: the pages then fault in when touched.
    pub(crate) fn populate(p: *mut u8, bytes: usize) {
        // SAFETY: populating changes no contents (fresh pages read as zeros either
        // way); a range outside a mapping is refused, not touched.
        unsafe { libc::madvise(p.cast(), bytes, libc::MADV_POPULATE_WRITE) };
    }

    /// Unmaps a run from [`map`].
    ///
    /// # Safety
    /// `p` and `bytes` are a run from [`map`], mapped still, and nothing
    /// points into it any more.
    unsafe fn unmap(p: *mut u8, bytes: usize) {
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

    pub(crate) fn take(_bytes: usize, _fill: bool, _huge: bool) -> (*mut u8, usize) {
        unreachable!("vm::take without system runs")
    }

    /// # Safety
    /// Never called.
    pub(crate) unsafe fn give(_run: *mut u8, _bytes: usize, _dirty: usize, _huge: bool) {
        unreachable!("vm::give without system runs")
    }

    pub(crate) fn populate(_p: *mut u8, _bytes: usize) {
        unreachable!("vm::populate without system runs")
    }

    /// # Safety
    /// Never called.
    pub(crate) unsafe fn decommit(_p: *mut u8, _bytes: usize) {
        unreachable!("vm::decommit without system runs")
    }
}

pub(crate) use sys::{decommit, give, populate, take};

/// The `VmFlags` of the mapping holding `addr` in `/proc/self/smaps` (`hg`
/// there: advised `MADV_HUGEPAGE`), and whether transparent huge pages can
/// be asked for at all (the system's `enabled` is not `never`).
#[cfg(all(test, target_os = "linux", not(miri), not(loom)))]
pub(crate) fn vm_flags(addr: usize) -> Option<(bool, String)> {
    let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let mut inside = false;
    for line in smaps.lines() {
        if let Some(flags) = line.strip_prefix("VmFlags:") {
            if inside {
                return Some((!thp.contains("[never]"), flags.trim().to_string()));
            }
        } else if let Some((range, _)) = line.split_once(' ') {
            if let Some((lo, hi)) = range.split_once('-') {
                if let (Ok(lo), Ok(hi)) =
                    (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                {
                    inside = (lo..hi).contains(&addr);
                }
            }
        }
    }
    None
}

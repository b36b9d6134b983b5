//! Object memory (Unreal's `GUObjectAllocator`; object pooling):
//! objects live in 64 KiB pages carved into equal slots, one set of pages
//! per **size class**, instead of one global-allocator block each.
//!
//! # Why
//!
//! A block from the global allocator costs its own header (8 bytes with
//! glibc) and rounding to 16, and freeing a million of them walks the
//! allocator's bins one by one (`free`, `malloc_consolidate`). A slot in a
//! page costs its size, rounded to 8, and freeing it pushes it on its page's
//! list.
//!
//! # Layout
//!
//! ```text
//! page (64 KiB, aligned to 64 KiB)
//!  0..64        PageHead   free list, list links, live count, bump offset
//!  64..         slot, slot, slot, …   (all of one size, a multiple of 8)
//! ```
//!
//! The page of a slot is its address rounded down to 64 KiB, so freeing
//! needs no lookup. Objects aligned to more than 16, or larger than
//! [`MAX_SLOT`], come from the global allocator as before.
//!
//! # Rules
//!
//! * Each size class keeps its pages with room on [`BANDS`] doubly linked
//!   lists by occupancy (a page with `live` of `cap` slots in use is in band
//!   `1 + (live - 1) * BANDS / (cap - 1)`, roughly), plus a list of its
//!   empty pages. Allocation takes a page of the **fullest band** that has
//!   one, and an empty page only when no page is partly used. So new objects
//!   fill the pages that are nearly full, and the nearly empty ones are left
//!   to empty out as their objects die, and then be returned. This pays when
//!   pages differ in occupancy (`coreobject-bench pages`, thinning
//!   survivors: 18% fewer page bytes after 600 rounds of churn than filling
//!   whichever page freed a slot last); when deaths are spread evenly, every
//!   page keeps its share until churn thins it, whatever the order. A page
//!   moves between bands when its count crosses a band's edge: O(1), no
//!   sorting.
//! * Within a page, allocation takes the most recently freed slot (LIFO:
//!   likely still in cache), else the next never-used slot; a page that is
//!   full leaves the lists.
//! * A page whose last object is freed is kept for reuse while its size
//!   class holds fewer than [`KEEP_EMPTY`] empty pages, and returned
//!   otherwise.
//! * On Linux, pages are carved out of 2 MiB-aligned runs mapped from the
//!   system (see `vm`), from the third run on filled when mapped. A
//!   returned page is reused first for the next page any size class needs;
//!   its memory goes back to the system (`MADV_DONTNEED`) only if it is
//!   still unused a whole collection later, so that a program that frees
//!   and re-creates a similar number of objects every cycle (binary-trees,
//!   a game's per-frame garbage) refills warm pages instead of faulting
//!   zeroed ones in again. Elsewhere each page is one global-allocator
//!   block.
//! * Objects never move: the table's item points at the slot for the
//!   object's whole life.
//! * Creation goes through `&Heap` from any thread, so each size class sits
//!   behind its own lock, held for a handful of instructions; threads
//!   creating objects of different sizes never meet (a new page takes the
//!   page source's lock too, once per page). Freeing happens in a
//!   collection, which holds the heap exclusively, and takes no lock.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ptr::{self, NonNull};

use parking_lot::Mutex;

use super::vm;

/// Page size and alignment. Smaller under miri, so that tests cross page
/// boundaries at miri-sized counts.
pub(crate) const PAGE: usize = if cfg!(miri) { 4096 } else { 64 * 1024 };

/// Slot sizes are multiples of this. A slot's address is a multiple of the
/// largest power of two dividing its size (pages start 64-aligned), so an
/// object aligned to 16 (whose size is a multiple of 16) lands aligned.
const GRAIN: usize = 8;

/// The largest alignment a pooled object may need.
const MAX_ALIGN: usize = 16;

/// Where the first slot of a page starts (the head, rounded to a cache line).
const FIRST: usize = 64;

/// The largest pooled slot: at least 15 slots per page.
pub(crate) const MAX_SLOT: usize = (PAGE - FIRST) / 15 / GRAIN * GRAIN;

/// Empty pages each size class keeps for reuse before returning more.
pub(crate) const KEEP_EMPTY: usize = 2;

/// Occupancy bands of the pages with room, per size class.
pub(crate) const BANDS: usize = 4;

/// The list index of a full page, which is on no list.
const FULL: u8 = BANDS as u8 + 1;

const CLASSES: usize = MAX_SLOT / GRAIN;

// An item's `NO_DROP` field holds a size class plus one in 10 bits.
const _: () = assert!(CLASSES < 0x3ff);

/// Runs a heap maps whose pages fault in as they are touched; later runs
/// are filled when mapped (see `vm`), which costs a heap past this size its
/// memory 2 MiB at a time.
const LAZY_RUNS: usize = 2;

/// The head of a page.
#[repr(C)]
struct PageHead {
    /// Most recently freed slot, whose first word links to the next one.
    free: *mut u8,
    /// Neighbours on the page's list.
    prev: *mut PageHead,
    next: *mut PageHead,
    /// Objects in the page.
    live: u32,
    /// Offset of the first never-used slot.
    bump: u32,
    /// The list the page is on: 0 the empty pages, `1..=BANDS` the bands of
    /// pages partly used, [`FULL`] none.
    list: u8,
}

const _: () = assert!(std::mem::size_of::<PageHead>() <= FIRST);
const _: () = assert!(PAGE.is_power_of_two() && MAX_SLOT >= 256);
// Every page holds at least 15 slots, so each band spans at least 3 counts.
const _: () = assert!((PAGE - FIRST) / MAX_SLOT > 3 * BANDS);
const _: () = assert!(vm::HUGE % PAGE == 0);

fn page_layout() -> Layout {
    Layout::from_size_align(PAGE, PAGE).expect("PAGE is a power of two")
}

/// The page holding `p`.
fn page_of(p: *mut u8) -> *mut PageHead {
    // Rounding the address down keeps `p`'s provenance: the page is one allocation.
    p.wrapping_sub(p as usize & (PAGE - 1)).cast()
}

/// Freed slots of one page not yet given back to it (see
/// [`Slabs::free_in_run`]).
#[derive(Debug)]
pub(crate) struct FreeRun {
    class: usize,
    page: *mut PageHead,
    /// The slot freed first (its link is written by the flush) and last.
    first: *mut u8,
    last: *mut u8,
    n: u32,
}

impl Default for FreeRun {
    fn default() -> Self {
        FreeRun {
            class: 0,
            page: ptr::null_mut(),
            first: ptr::null_mut(),
            last: ptr::null_mut(),
            n: 0,
        }
    }
}

// SAFETY: a run is plain bookkeeping of slots its `Slabs` owns; it is used
// only with the `&mut` of that `Slabs`.
unsafe impl Send for FreeRun {}
// SAFETY: as for `Send`: a shared `FreeRun` gives no access to its slots.
unsafe impl Sync for FreeRun {}

/// Where pages come from and go back to: on Linux, 2 MiB runs mapped from
/// the system and a stack of returned pages (their memory already given
/// back); elsewhere, the global allocator.
struct PageSource {
    /// Returned pages whose memory is still committed ("warm"), most
    /// recently returned on top: reused first, with no page fault.
    warm: Vec<*mut u8>,
    /// The fewest pages `warm` held since the last [`epoch`](Self::epoch):
    /// its bottom `low` pages were not reused in all that time.
    low: usize,
    /// Pages returned before the last epoch and not reused since, still
    /// committed: their memory goes back a few pages at a time
    /// ([`cool`](Self::cool)), so that no slice pays for all of them.
    cooling: Vec<*mut u8>,
    /// Returned pages whose memory went back to the system, for reuse
    /// before carving new ones.
    free: Vec<*mut u8>,
    /// The newest run's pages not yet handed out: `next..end`.
    next: *mut u8,
    end: *mut u8,
    /// Every run, to unmap when the heap goes.
    runs: Vec<*mut u8>,
    /// Whether runs are advised huge pages when taken
    /// ([`HeapConfig::huge_pages`](crate::HeapConfig::huge_pages)).
    huge: bool,
}

// SAFETY: the source owns its runs and pages outright; nobody else holds its pointers.
unsafe impl Send for PageSource {}

impl PageSource {
    const fn new(huge: bool) -> PageSource {
        PageSource {
            huge,
            warm: Vec::new(),
            low: 0,
            cooling: Vec::new(),
            free: Vec::new(),
            next: ptr::null_mut(),
            end: ptr::null_mut(),
            runs: Vec::new(),
        }
    }

    /// A page of `PAGE` bytes aligned to `PAGE`, uninitialized.
    fn get(&mut self) -> *mut u8 {
        if !vm::ENABLED {
            let layout = page_layout();
            // SAFETY: the layout has a non-zero size.
            let p = unsafe { alloc(layout) };
            if p.is_null() {
                handle_alloc_error(layout);
            }
            return p;
        }
        if let Some(p) = self.warm.pop() {
            self.low = self.low.min(self.warm.len());
            return p;
        }
        if let Some(p) = self.cooling.pop() {
            return p;
        }
        if let Some(p) = self.free.pop() {
            return p;
        }
        if self.next == self.end {
            // A spare run holds dead bytes, which pages never read before writing.
            // Advised (with `huge`) before it is filled.
            let (run, _) = vm::take(vm::HUGE, self.runs.len() >= LAZY_RUNS, self.huge);
            self.runs.push(run);
            // Room for every page carved so far to come back, so that `put`
            // (inside a collection's purge) never allocates.
            let carved = self.runs.len() * (vm::HUGE / PAGE);
            self.free.reserve(carved - self.free.len());
            self.warm.reserve(carved - self.warm.len());
            self.cooling.reserve(carved - self.cooling.len());
            self.next = run;
            // SAFETY: the run is `HUGE` bytes long.
            self.end = unsafe { run.add(vm::HUGE) };
        }
        let p = self.next;
        // SAFETY: `next < end`, both in the newest run, and `HUGE` is a multiple of PAGE.
        self.next = unsafe { p.add(PAGE) };
        p
    }

    /// Takes a page back.
    ///
    /// # Safety
    /// `p` came from [`get`](Self::get) of this source, and nothing in it
    /// is used again.
    unsafe fn put(&mut self, p: *mut u8) {
        if !vm::ENABLED {
            // SAFETY: the caller's contract: a block from `get`'s `alloc` with this layout.
            unsafe { dealloc(p, page_layout()) };
            return;
        }
        self.warm.push(p);
    }

    /// Moves the pages returned before the last epoch and not reused since
    /// to `cooling` (called once per collection, as its purge begins), whose
    /// memory [`cool`](Self::cool) gives back a few pages at a time during
    /// the purge: a page freed by one collection stays committed until the
    /// next, so a program that frees and re-creates about as many objects
    /// each cycle refills the same pages without faulting them in again,
    /// while a heap that shrank returns its memory one cycle later. This
    /// step moves pointers only; no `madvise` here.
    fn epoch(&mut self) {
        let cold = self.low;
        self.cooling.extend(self.warm.drain(..cold));
        self.low = self.warm.len();
    }

    /// Gives back the memory of up to `k` pages that cooled at an epoch
    /// (each one `madvise`, so the purge spreads them over its slices).
    fn cool(&mut self, k: usize) {
        for _ in 0..k {
            let Some(p) = self.cooling.pop() else { return };
            // SAFETY: a page of one of our runs, returned by `put` (its contents
            // are dead) and not handed out since: `get` takes it off `cooling`.
            unsafe { vm::decommit(p, PAGE) };
            self.free.push(p);
        }
    }

    /// Returns every run (to the spare list, or to the system).
    ///
    /// # Safety
    /// Nothing in any page from this source is used again.
    unsafe fn release_runs(&mut self) {
        for run in self.runs.drain(..) {
            // SAFETY: each run came from `vm::take` of `HUGE` bytes; the caller's
            // contract says nothing in it is used again.
            unsafe { vm::give(run, vm::HUGE, vm::HUGE, self.huge) };
        }
        self.free.clear();
        self.cooling.clear();
        self.warm.clear();
        self.low = 0;
        self.next = ptr::null_mut();
        self.end = ptr::null_mut();
    }
}

impl Drop for PageSource {
    fn drop(&mut self) {
        // SAFETY: the source is going; every page came from it (the slabs release
        // theirs before their source drops, see `Slabs::release` and `Slabs::drop`).
        unsafe { self.release_runs() };
    }
}

/// One size class: its pages with room by occupancy, and counts.
struct Slab {
    slot: u32,
    /// `lists[0]`: empty pages; `lists[b]`: pages whose live count is in
    /// `lo[b]..lo[b + 1]`.
    lists: [*mut PageHead; BANDS + 1],
    /// The lowest live count of each list; `lo[FULL]` is the slots per page.
    lo: [u32; BANDS + 2],
    /// Bit `b` set when `lists[b]` is not empty.
    mask: u32,
    pages: usize,
    empty: usize,
    /// Objects in this class's pages.
    live: usize,
}

// SAFETY: a slab owns its pages outright; the raw pointers never alias another slab's.
unsafe impl Send for Slab {}

impl Slab {
    fn new(slot: usize) -> Slab {
        let cap = ((PAGE - FIRST) / slot) as u32;
        let mut lo = [0; BANDS + 2];
        for (b, l) in lo.iter_mut().enumerate().skip(1) {
            *l = 1 + ((b as u32 - 1) * (cap - 1)).div_ceil(BANDS as u32);
        }
        debug_assert_eq!(lo[FULL as usize], cap);
        Slab {
            slot: slot as u32,
            lists: [ptr::null_mut(); BANDS + 1],
            lo,
            mask: 0,
            pages: 0,
            empty: 0,
            live: 0,
        }
    }

    /// Puts `page` (on no list) at the head of list `b` (not [`FULL`]).
    fn link(&mut self, page: *mut PageHead, b: u8) {
        let head = self.lists[b as usize];
        // SAFETY: `page` is one of this slab's pages and on no list; `head` is null or
        // a page of this slab.
        unsafe {
            (*page).prev = ptr::null_mut();
            (*page).next = head;
            if !head.is_null() {
                (*head).prev = page;
            }
            (*page).list = b;
        }
        self.lists[b as usize] = page;
        self.mask |= 1 << b;
    }

    /// Takes `page` off its list, if it is on one.
    fn unlink(&mut self, page: *mut PageHead) {
        // SAFETY: `page` is one of this slab's pages; its neighbours are too.
        unsafe {
            let b = (*page).list;
            if b == FULL {
                return;
            }
            let (prev, next) = ((*page).prev, (*page).next);
            if prev.is_null() {
                self.lists[b as usize] = next;
                if next.is_null() {
                    self.mask &= !(1 << b);
                }
            } else {
                (*prev).next = next;
            }
            if !next.is_null() {
                (*next).prev = prev;
            }
            (*page).list = FULL;
        }
    }

    /// Moves `page` to list `b` ([`FULL`]: off every list).
    fn move_to(&mut self, page: *mut PageHead, b: u8) {
        self.unlink(page);
        if b != FULL {
            self.link(page, b);
        }
    }

    #[cold]
    fn new_page(&mut self, page: *mut u8) -> *mut PageHead {
        let page = page.cast::<PageHead>();
        // SAFETY: `page` is a fresh page of PAGE bytes, aligned for PageHead.
        unsafe {
            page.write(PageHead {
                free: ptr::null_mut(),
                prev: ptr::null_mut(),
                next: ptr::null_mut(),
                live: 0,
                bump: FIRST as u32,
                list: FULL,
            })
        };
        self.pages += 1;
        self.empty += 1;
        self.link(page, 0);
        page
    }

    /// A slot; `source` gives a fresh page when no listed page has room
    /// (through its lock for [`Slabs::alloc`], directly for
    /// [`Slabs::alloc_mut`]).
    #[inline(always)]
    fn alloc(&mut self, source: impl FnOnce() -> *mut u8) -> NonNull<u8> {
        // The fullest band with a page, else an empty page, else a new one.
        let partly = self.mask & !1;
        let b = if partly != 0 {
            31 - partly.leading_zeros()
        } else if self.mask != 0 {
            0
        } else {
            self.new_page(source());
            0
        } as usize;
        let page = self.lists[b];
        // SAFETY: `page` heads a list, so it is a live page of this slab with room
        // (fewer than `cap` objects): its free list or its bump offset names an
        // unused slot of its own.
        unsafe {
            let head = &mut *page;
            let slot = if !head.free.is_null() {
                let s = head.free;
                head.free = s.cast::<*mut u8>().read();
                s
            } else {
                debug_assert!(head.bump as usize + self.slot as usize <= PAGE);
                let s = page.cast::<u8>().add(head.bump as usize);
                head.bump += self.slot;
                s
            };
            if b == 0 {
                self.empty -= 1;
            }
            head.live += 1;
            self.live += 1;
            if head.live == self.lo[b + 1] {
                self.move_to(page, b as u8 + 1);
            }
            NonNull::new_unchecked(slot)
        }
    }

    /// # Safety
    /// `p` is a slot this slab handed out and has not taken back since.
    unsafe fn free(&mut self, p: NonNull<u8>, source: &mut PageSource) {
        let page = page_of(p.as_ptr());
        // SAFETY: `p` lies in one of this slab's live pages (the caller's contract),
        // and its slot is free from now on, so its first word may hold the link.
        let (live, b) = unsafe {
            let head = &mut *page;
            p.as_ptr().cast::<*mut u8>().write(head.free);
            head.free = p.as_ptr();
            head.live -= 1;
            (head.live, head.list)
        };
        self.live -= 1;
        // SAFETY: `page` is a live page of this slab (the caller's contract).
        unsafe { self.rebanded(page, live, b, source) };
    }

    /// [`free`](Self::free) of `n` slots of one page at once: `first` ..
    /// `last` are chained through their first words (`last` freed last, its
    /// link to the one freed before it, ...), and `first`'s link is written
    /// here. The page ends as `n` single frees in that order leave it.
    ///
    /// # Safety
    /// Every slot of the chain lies in `page`, a live page of this slab, was
    /// handed out and is free from now on; `n` counts them.
    unsafe fn free_chain(
        &mut self,
        page: *mut PageHead,
        first: *mut u8,
        last: *mut u8,
        n: u32,
        source: &mut PageSource,
    ) {
        // SAFETY: the caller's contract: `page` is live and `first` one of its
        // free slots, whose first word may hold the link.
        let (live, b) = unsafe {
            let head = &mut *page;
            first.cast::<*mut u8>().write(head.free);
            head.free = last;
            head.live -= n;
            (head.live, head.list)
        };
        self.live -= n as usize;
        // SAFETY: `page` is a live page of this slab (the caller's contract).
        unsafe { self.rebanded(page, live, b, source) };
    }

    /// After frees left `live` objects in `page`, which was in band `b`:
    /// moves it down to the band its count belongs to (one or several
    /// bands lower), or, emptied, keeps it as one of the empty pages or
    /// gives it back to `source`.
    ///
    /// # Safety
    /// `page` is a live page of this slab, listed in band `b`.
    unsafe fn rebanded(&mut self, page: *mut PageHead, live: u32, b: u8, source: &mut PageSource) {
        if live >= self.lo[b as usize] {
            return;
        }
        if live > 0 {
            let mut nb = b - 1;
            while live < self.lo[nb as usize] {
                nb -= 1;
            }
            self.move_to(page, nb);
        } else if self.empty >= KEEP_EMPTY {
            self.unlink(page);
            self.pages -= 1;
            // SAFETY: the page came from `source` and holds no object any more.
            unsafe { source.put(page.cast()) };
        } else {
            self.move_to(page, 0);
            self.empty += 1;
        }
    }

    /// Moves this slab's listed pages into `pages` and empties the lists
    /// (pages off the lists are full; [`Slabs::release`] finds them through
    /// the live objects' slots).
    fn release_all(&mut self, pages: &mut Vec<*mut PageHead>) {
        for list in &mut self.lists {
            let mut p = *list;
            while !p.is_null() {
                // SAFETY: `p` is a live page of this slab.
                let next = unsafe { (*p).next };
                pages.push(p);
                p = next;
            }
            *list = ptr::null_mut();
        }
        self.mask = 0;
        self.pages = 0;
        self.empty = 0;
        self.live = 0;
    }

    fn occupancy(&self) -> PageClass {
        PageClass {
            slot: self.slot as usize,
            pages: self.pages,
            empty_pages: self.empty,
            objects: self.live,
        }
    }
}

/// One size class's pages, for the memory report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PageClass {
    /// Slot size in bytes.
    pub(crate) slot: usize,
    /// Pages held (in use and kept empty).
    pub(crate) pages: usize,
    /// Of those, empty pages kept for reuse.
    pub(crate) empty_pages: usize,
    /// Objects in the pages.
    pub(crate) objects: usize,
}

/// The object memory of one heap: a slab per size class, the source of
/// their pages, and the objects too large or too aligned to pool.
pub(crate) struct Slabs {
    classes: Box<[Mutex<Slab>]>,
    /// Objects allocated from the global allocator, live: count and bytes.
    large: Mutex<(usize, usize)>,
    source: Mutex<PageSource>,
}

impl std::fmt::Debug for Slabs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slabs")
            .field("page_bytes", &self.page_bytes())
            .finish()
    }
}

/// The size class of a pooled layout, or `None` for the global allocator.
#[inline(always)]
pub(crate) const fn class_of(layout: Layout) -> Option<usize> {
    if layout.size() <= MAX_SLOT && layout.align() <= MAX_ALIGN && layout.size() > 0 {
        Some((layout.size() - 1) / GRAIN)
    } else {
        None
    }
}

/// The layout a large object is allocated with.
/// A block from the global allocator for an object outside the pages, and
/// the layout it was allocated with.
fn alloc_large(layout: Layout) -> (NonNull<u8>, Layout) {
    let layout = large_layout(layout);
    // SAFETY: the layout has a non-zero size.
    let p = unsafe { alloc(layout) };
    (
        NonNull::new(p).unwrap_or_else(|| handle_alloc_error(layout)),
        layout,
    )
}

fn large_layout(layout: Layout) -> Layout {
    let layout = layout.pad_to_align();
    Layout::from_size_align(layout.size().max(1), layout.align()).expect("valid layout")
}

impl Default for Slabs {
    fn default() -> Self {
        Slabs::new(false)
    }
}

impl Slabs {
    /// Slabs whose runs are advised huge pages if `huge`
    /// ([`HeapConfig::huge_pages`](crate::HeapConfig::huge_pages)).
    pub(crate) fn new(huge: bool) -> Self {
        Slabs {
            classes: (0..CLASSES)
                .map(|c| Mutex::new(Slab::new((c + 1) * GRAIN)))
                .collect(),
            large: Mutex::new((0, 0)),
            source: Mutex::new(PageSource::new(huge)),
        }
    }
}

impl Drop for Slabs {
    /// Returns the empty pages (those [`release`](Self::release) has not
    /// taken already). Pages holding objects are the array's to release.
    fn drop(&mut self) {
        if vm::ENABLED {
            // The source unmaps its runs when it drops, right after this.
            return;
        }
        let source = self.source.get_mut();
        for slab in self.classes.iter_mut() {
            let slab = slab.get_mut();
            let mut p = slab.lists[0];
            while !p.is_null() {
                // SAFETY: `p` is an empty page of this slab.
                let next = unsafe { (*p).next };
                slab.unlink(p);
                // SAFETY: an empty page from `source`, now off the lists.
                unsafe { source.put(p.cast()) };
                p = next;
            }
        }
    }
}

impl Slabs {
    /// Whether [`release`](Self::release) needs the slots of the objects
    /// still allocated (only when pages are global-allocator blocks: runs
    /// from the system go back whole).
    pub(crate) const RELEASE_NEEDS_SLOTS: bool = !vm::ENABLED;

    /// Memory for one object of `layout`. Thread-safe.
    #[inline]
    pub(crate) fn alloc(&self, layout: Layout) -> NonNull<u8> {
        match class_of(layout) {
            Some(c) => self.classes[c].lock().alloc(|| self.source.lock().get()),
            None => {
                let (p, layout) = alloc_large(layout);
                let mut large = self.large.lock();
                large.0 += 1;
                large.1 += layout.size();
                p
            }
        }
    }

    /// [`alloc`](Self::alloc) for the exclusive owner: the same slot, without
    /// taking the size class's lock (no locked instruction).
    #[inline]
    pub(crate) fn alloc_mut(&mut self, layout: Layout) -> NonNull<u8> {
        match class_of(layout) {
            Some(c) => {
                let source = self.source.get_mut();
                self.classes[c].get_mut().alloc(|| source.get())
            }
            None => {
                let (p, layout) = alloc_large(layout);
                let large = self.large.get_mut();
                large.0 += 1;
                large.1 += layout.size();
                p
            }
        }
    }

    /// Fills `out` with slots of size class `c` under one take of its lock
    /// (a per-thread cache's refill: one lock for `out.len()` creations).
    /// The slots count as in use until each holds an object or goes back
    /// through [`free_unused`](Self::free_unused).
    #[inline]
    pub(crate) fn alloc_batch(&self, c: usize, out: &mut [Option<NonNull<u8>>]) {
        let mut slab = self.classes[c].lock();
        for o in out {
            *o = Some(slab.alloc(|| self.source.lock().get()));
        }
    }

    /// Gives back a slot of size class `c` that [`alloc_batch`](Self::alloc_batch)
    /// handed out and that never held an object.
    ///
    /// # Safety
    /// `p` came from `alloc_batch(c, ..)` of this `Slabs`, holds no object
    /// and is not used again.
    pub(crate) unsafe fn free_unused(&mut self, c: usize, p: NonNull<u8>) {
        // SAFETY: the caller's contract: `p` is a slot of size class `c`, unused.
        unsafe { self.classes[c].get_mut().free(p, self.source.get_mut()) }
    }

    /// The slot size of size class `c`.
    pub(crate) fn class_slot(c: usize) -> usize {
        (c + 1) * GRAIN
    }

    /// Takes back the memory of one object.
    ///
    /// # Safety
    /// `p` came from [`alloc`](Self::alloc), [`alloc_mut`](Self::alloc_mut) or
    /// [`alloc_batch`](Self::alloc_batch) of this `Slabs` with the same
    /// `layout`, its object is dropped, and it is not used again.
    #[inline]
    pub(crate) unsafe fn free(&mut self, p: NonNull<u8>, layout: Layout) {
        match class_of(layout) {
            // SAFETY: the caller's contract: `p` is a slot of this size class.
            Some(c) => unsafe { self.classes[c].get_mut().free(p, self.source.get_mut()) },
            None => {
                let layout = large_layout(layout);
                let large = self.large.get_mut();
                large.0 -= 1;
                large.1 -= layout.size();
                // SAFETY: `p` was allocated by the global allocator with this layout.
                unsafe { dealloc(p.as_ptr(), layout) }
            }
        }
    }

    /// [`free`](Self::free), gathered per page: a pooled slot joins `run`
    /// (a chain of freed slots of one page, flushed when a slot of another
    /// page or class comes), so that a page's count, band and list change
    /// once per run instead of once per slot. The purge frees objects in
    /// creation order, mostly page after page. Call
    /// [`flush_run`](Self::flush_run) before any other use of these slabs.
    ///
    /// # Safety
    /// As for [`free`](Self::free).
    #[inline]
    pub(crate) unsafe fn free_in_run(&mut self, run: &mut FreeRun, p: NonNull<u8>, layout: Layout) {
        let Some(c) = class_of(layout) else {
            // SAFETY: the caller's contract.
            return unsafe { self.free(p, layout) };
        };
        // SAFETY: the caller's contract, and `c` is `layout`'s size class.
        unsafe { self.free_in_run_class(run, p, c) }
    }

    /// [`free_in_run`](Self::free_in_run) of a pooled slot whose size class
    /// the caller knows (from the item's `NO_DROP` field), so that neither
    /// the layout nor the object's class is needed.
    ///
    /// # Safety
    /// As for [`free`](Self::free), with `c` the size class of the layout
    /// `p` was allocated with (which [`class_of`] maps to `Some(c)`).
    #[inline(always)]
    pub(crate) unsafe fn free_in_run_class(&mut self, run: &mut FreeRun, p: NonNull<u8>, c: usize) {
        debug_assert!(c < CLASSES);
        let p = p.as_ptr();
        let page = page_of(p);
        if run.n > 0 && (run.page != page || run.class != c) {
            self.flush_run(run);
        }
        if run.n == 0 {
            run.class = c;
            run.page = page;
            run.first = p;
        } else {
            // SAFETY: `p` is free from now on (the caller's contract), so its
            // first word may hold the link to the slot freed before it.
            unsafe { p.cast::<*mut u8>().write(run.last) };
        }
        run.last = p;
        run.n += 1;
    }

    /// Gives the slots gathered in `run` back to their page, and empties it.
    pub(crate) fn flush_run(&mut self, run: &mut FreeRun) {
        if run.n == 0 {
            return;
        }
        let slab = self.classes[run.class].get_mut();
        // SAFETY: `free_in_run` chained `run.n` freed slots of size class
        // `run.class`, all in `run.page`, from `run.first` to `run.last`.
        unsafe { slab.free_chain(run.page, run.first, run.last, run.n, self.source.get_mut()) };
        run.n = 0;
    }

    /// Starts a new page epoch (once per collection, as its purge begins):
    /// pages emptied before the last one and not reused since start to cool,
    /// and [`cool`](Self::cool) gives their memory back to the system (see
    /// `PageSource::epoch`).
    pub(crate) fn epoch(&mut self) {
        if vm::ENABLED {
            self.source.get_mut().epoch();
        }
    }

    /// Gives back the memory of up to `k` pages that cooled at the last
    /// epochs (see [`epoch`](Self::epoch)); the purge calls this as it frees,
    /// in proportion to what it freed.
    pub(crate) fn cool(&mut self, k: usize) {
        if vm::ENABLED {
            self.source.get_mut().cool(k);
        }
    }

    /// Whether objects of `layout` live in pages (and so are released with
    /// them by [`release`](Self::release)).
    #[inline]
    pub(crate) fn pooled(layout: Layout) -> bool {
        class_of(layout).is_some()
    }

    /// Releases every page. Objects in them must already be dropped; `live`
    /// are the slots of objects still allocated (their pages may be full,
    /// hence off every list), needed only when
    /// [`RELEASE_NEEDS_SLOTS`](Self::RELEASE_NEEDS_SLOTS). Objects from the
    /// global allocator must have been freed with [`free`](Self::free).
    ///
    /// # Safety
    /// Every object in the pages is dropped and no pointer into them is used
    /// again.
    pub(crate) unsafe fn release(&mut self, live: impl Iterator<Item = NonNull<u8>>) {
        let mut pages = Vec::new();
        for slab in self.classes.iter_mut() {
            slab.get_mut().release_all(&mut pages);
        }
        let source = self.source.get_mut();
        if vm::ENABLED {
            // SAFETY: the caller's contract: nothing in any page is used again.
            unsafe { source.release_runs() };
            return;
        }
        for p in live {
            let page = page_of(p.as_ptr());
            // SAFETY: `p` is a slot of a live page of these slabs.
            let head = unsafe { &mut *page };
            if head.list == FULL {
                // Mark it once, so it is collected once.
                head.list = 0;
                pages.push(page);
            }
        }
        for page in pages {
            // SAFETY: each page came from `source` and is listed once (listed pages
            // were on one list, full ones were marked above); nothing in it is used again.
            unsafe { source.put(page.cast()) };
        }
    }

    /// Bytes in pages (live, free and empty slots alike).
    pub(crate) fn page_bytes(&self) -> usize {
        self.classes.iter().map(|s| s.lock().pages).sum::<usize>() * PAGE
    }

    /// Objects from the global allocator, and their bytes.
    pub(crate) fn large(&self) -> (usize, usize) {
        *self.large.lock()
    }

    /// The size classes that hold pages, smallest slot first.
    pub(crate) fn occupancy(&self) -> Vec<PageClass> {
        self.classes
            .iter()
            .map(|s| s.lock().occupancy())
            .filter(|c| c.pages > 0)
            .collect()
    }
}

#[cfg(test)]
impl Slab {
    /// Checks the lists against the pages' counts: each listed page is in
    /// the band of its count, the masks and counts agree. Returns the listed
    /// pages.
    fn check(&self) -> Vec<usize> {
        let mut listed = Vec::new();
        let mut empty = 0;
        for (b, &first) in self.lists.iter().enumerate() {
            assert_eq!(
                self.mask & (1 << b) != 0,
                !first.is_null(),
                "mask of list {b}"
            );
            let mut prev = ptr::null_mut();
            let mut p = first;
            while !p.is_null() {
                // SAFETY: a page on this slab's lists is live.
                let h = unsafe { &*p };
                assert_eq!(h.list as usize, b, "list tag");
                assert_eq!(h.prev, prev, "back link");
                assert!(
                    h.live >= self.lo[b] && h.live < self.lo[b + 1],
                    "band of {}",
                    h.live
                );
                if b == 0 {
                    empty += 1;
                }
                listed.push(p as usize);
                prev = p;
                p = h.next;
            }
        }
        assert_eq!(empty, self.empty, "empty count");
        assert!(self.empty <= KEEP_EMPTY, "empty pages beyond the keep");
        listed
    }

    /// The band a page with `live` objects belongs in.
    fn band(&self, live: u32) -> usize {
        (0..=FULL as usize)
            .rev()
            .find(|&b| live >= self.lo[b])
            .expect("lo[0] is 0")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bands_split_the_counts() {
        for c in 0..CLASSES {
            let s = Slab::new((c + 1) * GRAIN);
            let cap = ((PAGE - FIRST) / ((c + 1) * GRAIN)) as u32;
            assert_eq!((s.lo[0], s.lo[1], s.lo[FULL as usize]), (0, 1, cap));
            assert!(s.lo.windows(2).all(|w| w[0] < w[1]), "{:?}", s.lo);
        }
    }

    #[test]
    fn slots_are_reused_lifo_and_pages_return() {
        let mut s = Slabs::default();
        let l = Layout::from_size_align(48, 8).unwrap();
        let per_page = (PAGE - FIRST) / 48;
        let ps: Vec<_> = (0..per_page * 3 + 1).map(|_| s.alloc(l)).collect();
        assert_eq!(s.page_bytes(), 4 * PAGE);
        for w in ps.windows(2) {
            assert_ne!(w[0], w[1]);
        }
        // SAFETY: each slot came from `s` and holds no object.
        unsafe { s.free(ps[5], l) };
        assert_eq!(s.alloc(l), ps[5]);
        // Emptying every page: KEEP_EMPTY stay, the rest go.
        for &p in &ps {
            // SAFETY: as above.
            unsafe { s.free(p, l) };
        }
        assert_eq!(s.page_bytes(), KEEP_EMPTY * PAGE);
        let again: Vec<_> = (0..per_page * 3).map(|_| s.alloc(l)).collect();
        assert_eq!(s.page_bytes(), 3 * PAGE);
        let o = s.occupancy();
        assert_eq!(o.len(), 1);
        assert_eq!(
            (o[0].slot, o[0].pages, o[0].empty_pages, o[0].objects),
            (48, 3, 0, per_page * 3)
        );
        // SAFETY: every object is gone; the slots are the live ones.
        unsafe { s.release(again.into_iter()) };
        assert_eq!(s.page_bytes(), 0);
    }

    /// Runs that cross several bands at once, empty a page, or span pages
    /// leave the lists as single frees do (`check`), and as many slots can
    /// be taken again, each once.
    #[test]
    fn runs_of_frees_leave_the_pages_as_single_frees_do() {
        let l = Layout::from_size_align(24, 8).unwrap();
        let per_page = (PAGE - FIRST) / 24;
        for (runs, single) in [
            (vec![per_page * 3], 0),
            (vec![per_page / 2, 7, per_page], 5),
        ] {
            let mut s = Slabs::default();
            let mut ps: Vec<_> = (0..per_page * 4).map(|_| s.alloc(l)).collect();
            for p in &ps {
                // SAFETY: a fresh block of 24 bytes (cleared: a page reused
                // from the loop's first pass could hold the right links).
                unsafe { p.as_ptr().write_bytes(0, 24) };
            }
            let c = class_of(l).unwrap();
            let mut freed = Vec::new();
            // Single frees first: a run's flush links to them.
            for p in ps.drain(..single) {
                // SAFETY: `p` came from `s` with `l`, and is freed once.
                unsafe { s.free(p, l) };
                freed.push(p);
            }
            for n in runs {
                let mut run = FreeRun::default();
                for p in ps.drain(..n.min(ps.len())) {
                    // SAFETY: as above.
                    unsafe { s.free_in_run(&mut run, p, l) };
                    freed.push(p);
                }
                s.flush_run(&mut run);
                let slab = s.classes[c].lock();
                slab.check();
                assert_eq!(slab.live, ps.len());
            }
            // As many slots again: each once, none a live one, each a slot
            // of a page (a free list cut short would send the bump past
            // its page's end, into the next page's head). Not the same
            // addresses: an emptied page past `KEEP_EMPTY` goes back.
            let mut again: Vec<_> = freed.iter().map(|_| s.alloc(l)).collect();
            let live: std::collections::HashSet<_> = ps.iter().collect();
            for p in &again {
                let at = p.as_ptr() as usize & (PAGE - 1);
                assert!(at >= FIRST && at + 24 <= PAGE, "slot at {at} of its page");
                assert!(!live.contains(p), "a live slot handed out");
            }
            again.sort();
            let n = again.len();
            again.dedup();
            assert_eq!(again.len(), n, "a slot handed out twice");
            for p in again.into_iter().chain(ps) {
                // SAFETY: as above.
                unsafe { s.free(p, l) };
            }
            let slab = s.classes[c].lock();
            slab.check();
            assert_eq!(slab.live, 0);
        }
    }

    /// A page emptied by one collection stays committed (warm) through the
    /// next epoch and is reused before any cold page; one still unused a
    /// whole epoch later gives its memory back and joins the cold list.
    #[test]
    fn returned_pages_stay_warm_for_one_epoch() {
        if !vm::ENABLED {
            return;
        }
        let mut s = Slabs::default();
        let l = Layout::from_size_align(48, 8).unwrap();
        let per_page = (PAGE - FIRST) / 48;
        let n = KEEP_EMPTY + 3;
        let ps: Vec<_> = (0..per_page * n).map(|_| s.alloc(l)).collect();
        let counts = |s: &mut Slabs| {
            let src = s.source.get_mut();
            (src.warm.len(), src.free.len())
        };
        s.epoch();
        for &p in &ps {
            // SAFETY: each slot came from `s` and holds no object.
            unsafe { s.free(p, l) };
        }
        // KEEP_EMPTY stay with the class; the other 3 return, warm.
        assert_eq!(counts(&mut s), (3, 0));
        // A new page comes from the warm ones (the last returned first).
        let top = *s.source.get_mut().warm.last().unwrap();
        let q: Vec<_> = (0..per_page * (KEEP_EMPTY + 1))
            .map(|_| s.alloc(l))
            .collect();
        assert!(q.iter().any(|&p| page_of(p.as_ptr()).cast::<u8>() == top));
        assert_eq!(counts(&mut s), (2, 0));
        // The first epoch after the returns: they came back within it, so
        // nothing cools yet.
        s.epoch();
        assert_eq!(counts(&mut s), (2, 0));
        // A whole epoch unused: both cool, one page per call; until then a
        // cooling page is reused before any cold one.
        s.epoch();
        assert_eq!(counts(&mut s), (0, 0));
        assert_eq!(s.source.get_mut().cooling.len(), 2);
        let top = *s.source.get_mut().cooling.last().unwrap();
        let p = s.source.get_mut().get();
        assert_eq!(p, top);
        // SAFETY: `p` came from this source's `get` and holds nothing.
        unsafe { s.source.get_mut().put(p) };
        // Returned again, it is warm for one epoch and cools at the next.
        s.epoch();
        assert_eq!(counts(&mut s), (1, 0));
        s.epoch();
        assert_eq!(counts(&mut s), (0, 0));
        assert_eq!(s.source.get_mut().cooling.len(), 2);
        s.cool(1);
        assert_eq!(counts(&mut s), (0, 1));
        s.cool(5);
        assert_eq!(counts(&mut s), (0, 2));
        assert!(s.source.get_mut().cooling.is_empty());
        // Cold pages are reused too, once no warm one is left.
        let r: Vec<_> = (0..per_page * 2).map(|_| s.alloc(l)).collect();
        assert_eq!(counts(&mut s), (0, 0));
        for &p in q.iter().chain(&r) {
            // SAFETY: as above.
            unsafe { s.free(p, l) };
        }
    }

    /// After a peak, a steady population that churns (one object freed at
    /// random, one created) gathers in few pages, and the rest are returned:
    /// new objects go to the fullest pages, so the sparse ones empty out.
    #[test]
    fn pages_empty_out_after_a_peak() {
        let mut s = Slabs::default();
        let l = Layout::from_size_align(48, 8).unwrap();
        let per_page = (PAGE - FIRST) / 48;
        let peak_pages = if cfg!(miri) { 12 } else { 40 };
        let mut live: Vec<_> = (0..per_page * peak_pages).map(|_| s.alloc(l)).collect();
        assert_eq!(s.page_bytes(), peak_pages * PAGE);
        let mut rng = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |n: usize| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng % n as u64) as usize
        };
        // Nine in ten die, at random: every page keeps about a tenth.
        while live.len() > per_page * peak_pages / 10 {
            let p = live.swap_remove(next(live.len()));
            // SAFETY: each slot came from `s`, is live, and holds no object.
            unsafe { s.free(p, l) };
        }
        let population = live.len();
        assert!(
            s.page_bytes() > (peak_pages - 4) * PAGE,
            "the peak's pages stay at first"
        );
        for _ in 0..population * 10 {
            let p = live.swap_remove(next(live.len()));
            // SAFETY: as above.
            unsafe { s.free(p, l) };
            live.push(s.alloc(l));
        }
        let least = population.div_ceil(per_page);
        assert!(
            s.page_bytes() <= (2 * least + KEEP_EMPTY) * PAGE,
            "{} pages for {population} objects ({least} pages at least)",
            s.page_bytes() / PAGE
        );
        // SAFETY: no slot holds an object; these are the live ones.
        unsafe { s.release(live.into_iter()) };
    }

    #[test]
    fn large_and_overaligned_layouts_use_the_global_allocator() {
        let mut s = Slabs::default();
        let big = Layout::from_size_align(MAX_SLOT + 1, 8).unwrap();
        let wide = Layout::from_size_align(64, 64).unwrap();
        // Aligned to 16: pooled, and every slot lands aligned.
        let sixteen = Layout::from_size_align(48, 16).unwrap();
        let ps: Vec<_> = (0..200).map(|_| s.alloc(sixteen)).collect();
        assert!(ps.iter().all(|p| p.as_ptr() as usize % 16 == 0));
        for p in ps {
            // SAFETY: each came from `s` with this layout.
            unsafe { s.free(p, sixteen) };
        }
        assert!(!Slabs::pooled(big) && !Slabs::pooled(wide));
        let pages = s.page_bytes();
        assert!(pages <= KEEP_EMPTY * PAGE, "empty pages beyond the keep");
        let (a, b) = (s.alloc(big), s.alloc(wide));
        assert_eq!(b.as_ptr() as usize % 64, 0);
        assert_eq!(s.large(), (2, big.pad_to_align().size() + 64));
        assert_eq!(s.page_bytes(), pages);
        // SAFETY: both came from `s` with these layouts.
        unsafe {
            s.free(a, big);
            s.free(b, wide);
        }
        assert_eq!(s.large(), (0, 0));
    }

    /// Random allocations and frees of a few layouts against a model (the
    /// set of live blocks): blocks never overlap, each keeps the bytes
    /// written into it until freed, pages hold exactly the live slots plus
    /// the empty pages kept (never more than [`KEEP_EMPTY`] per size class),
    /// each page sits in the band of its count, and each allocation goes to
    /// a page of the fullest band that has one (an empty or new page only
    /// when no page is partly used).
    mod model {
        use super::*;
        use proptest::prelude::*;
        use std::collections::HashMap;

        const LAYOUTS: [(usize, usize); 5] =
            [(8, 8), (40, 8), (48, 16), (200, 8), (MAX_SLOT + 8, 8)];

        #[derive(Debug, Clone)]
        enum Op {
            Alloc(usize),
            Free(usize),
            /// Frees this many of the live blocks through `free_in_run`,
            /// oldest first (as the purge frees in creation order), from a
            /// random position, then flushes.
            FreeRun(usize, usize),
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                3 => (0..LAYOUTS.len()).prop_map(Op::Alloc),
                2 => any::<usize>().prop_map(Op::Free),
                1 => (any::<usize>(), 1..200usize).prop_map(|(i, n)| Op::FreeRun(i, n)),
            ]
        }

        /// Objects per page, by the model, of size class `c`.
        fn counts(live: &[(NonNull<u8>, Layout, u8)], c: usize) -> HashMap<usize, u32> {
            let mut m = HashMap::new();
            for (p, l, _) in live {
                if class_of(*l) == Some(c) {
                    *m.entry(page_of(p.as_ptr()) as usize).or_insert(0) += 1;
                }
            }
            m
        }

        fn run(ops: &[Op]) -> Result<(), TestCaseError> {
            let mut s = Slabs::default();
            let mut live: Vec<(NonNull<u8>, Layout, u8)> = Vec::new();
            for (n, op) in ops.iter().enumerate() {
                match *op {
                    Op::Alloc(k) => {
                        let (size, align) = LAYOUTS[k];
                        let l = Layout::from_size_align(size, align).unwrap();
                        // The fullest band with a page, by the model, before.
                        let before = class_of(l).map(|c| {
                            let slab = s.classes[c].lock();
                            let counts = counts(&live, c);
                            let best = counts
                                .values()
                                .map(|&k| slab.band(k))
                                .filter(|&b| b < FULL as usize)
                                .max();
                            (c, counts, best)
                        });
                        let p = s.alloc(l);
                        if let Some((c, counts, best)) = before {
                            let page = page_of(p.as_ptr()) as usize;
                            let slab = s.classes[c].lock();
                            match (best, counts.get(&page)) {
                                (Some(b), Some(&k)) => {
                                    prop_assert_eq!(slab.band(k), b, "not the fullest band")
                                }
                                (Some(b), None) => {
                                    prop_assert!(false, "a fresh page while band {} has one", b)
                                }
                                (None, Some(&k)) => {
                                    prop_assert!(false, "a full page ({} objects) took one more", k)
                                }
                                (None, None) => {}
                            }
                        }
                        prop_assert_eq!(p.as_ptr() as usize % align, 0);
                        let (a, b) = (p.as_ptr() as usize, p.as_ptr() as usize + size);
                        for &(q, m, _) in &live {
                            let (c, d) = (q.as_ptr() as usize, q.as_ptr() as usize + m.size());
                            prop_assert!(b <= c || d <= a, "overlap");
                        }
                        let tag = n as u8;
                        // SAFETY: `p` is a fresh block of `size` bytes.
                        unsafe { p.as_ptr().write_bytes(tag, size) };
                        live.push((p, l, tag));
                    }
                    Op::Free(i) if !live.is_empty() => {
                        let (p, l, tag) = live.swap_remove(i % live.len());
                        // SAFETY: `p` is live, of `l.size()` bytes.
                        let bytes = unsafe { std::slice::from_raw_parts(p.as_ptr(), l.size()) };
                        prop_assert!(bytes.iter().all(|&b| b == tag), "block changed");
                        // SAFETY: `p` came from `s` with `l`, and is freed once.
                        unsafe { s.free(p, l) };
                    }
                    Op::FreeRun(i, n) if !live.is_empty() => {
                        let from = i % live.len();
                        let to = (from + n).min(live.len());
                        let mut run = FreeRun::default();
                        for (p, l, tag) in live.drain(from..to) {
                            // SAFETY: `p` is live, of `l.size()` bytes.
                            let bytes = unsafe { std::slice::from_raw_parts(p.as_ptr(), l.size()) };
                            prop_assert!(bytes.iter().all(|&b| b == tag), "block changed");
                            // SAFETY: `p` came from `s` with `l`, and is freed once.
                            unsafe { s.free_in_run(&mut run, p, l) };
                        }
                        s.flush_run(&mut run);
                    }
                    Op::Free(_) | Op::FreeRun(..) => {}
                }
                // Every page holding a live slot exists, plus the empty ones
                // kept (at most KEEP_EMPTY per size class); each listed page
                // is in its count's band, and a page off the lists is full.
                for &(size, align) in &LAYOUTS {
                    let l = Layout::from_size_align(size, align).unwrap();
                    let Some(c) = class_of(l) else { continue };
                    let counts = counts(&live, c);
                    let slab = s.classes[c].lock();
                    let listed = slab.check();
                    let cap = slab.lo[FULL as usize];
                    for (page, &k) in &counts {
                        let on = listed.contains(page);
                        prop_assert_eq!(
                            on,
                            k < cap,
                            "page with {} of {} objects listed: {}",
                            k,
                            cap,
                            on
                        );
                    }
                    prop_assert_eq!(slab.pages, counts.len() + slab.empty);
                    prop_assert_eq!(
                        slab.live,
                        counts.values().map(|&k| k as usize).sum::<usize>()
                    );
                    prop_assert!(slab.empty <= KEEP_EMPTY);
                }
                let large: Vec<_> = live.iter().filter(|(_, l, _)| !Slabs::pooled(*l)).collect();
                let large_bytes = large
                    .iter()
                    .map(|(_, l, _)| large_layout(*l).size())
                    .sum::<usize>();
                prop_assert_eq!(s.large(), (large.len(), large_bytes));
            }
            for (p, l, _) in live.iter().filter(|(_, l, _)| !Slabs::pooled(*l)) {
                // SAFETY: a live global-allocator block of `s`, freed once.
                unsafe { s.free(*p, *l) };
            }
            let pooled: Vec<_> = live
                .iter()
                .filter(|(_, l, _)| Slabs::pooled(*l))
                .map(|x| x.0)
                .collect();
            // SAFETY: no block holds an object; these are the live pooled ones.
            unsafe { s.release(pooled.into_iter()) };
            prop_assert_eq!(s.page_bytes(), 0);
            Ok(())
        }

        proptest! {
            #![proptest_config(if cfg!(miri) {
                ProptestConfig { cases: 2, failure_persistence: None, ..ProptestConfig::default() }
            } else {
                ProptestConfig { cases: 64, ..ProptestConfig::default() }
            })]

            #[test]
            fn slabs_match_the_model(ops in prop::collection::vec(op(), 1..if cfg!(miri) { 100 } else { 2000 })) {
                run(&ops)?;
            }
        }
    }
}

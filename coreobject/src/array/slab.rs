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
//!  0..64        PageHead   free list, room-list links, live count, bump offset
//!  64..         slot, slot, slot, …   (all of one size, a multiple of 8)
//! ```
//!
//! The page of a slot is its address rounded down to 64 KiB, so freeing
//! needs no lookup. Objects aligned to more than 16, or larger than
//! [`MAX_SLOT`], come from the global allocator as before.
//!
//! # Rules
//!
//! * Each size class keeps the pages that have room on a doubly linked
//!   **room list**; allocation takes the first page's most recently freed
//!   slot (LIFO: likely still in cache), else its next never-used slot, and
//!   a page that is full leaves the list.
//! * Freeing a slot puts its page back on the room list. A page whose last
//!   object is freed is kept for reuse while its size class holds fewer than
//!   [`KEEP_EMPTY`] empty pages, and returned to the system otherwise.
//! * Objects never move: the table's item points at the slot for the
//!   object's whole life.
//! * Creation goes through `&Heap` from any thread, so each size class sits
//!   behind its own lock, held for a handful of instructions; threads
//!   creating objects of different sizes never meet. Freeing happens in a
//!   collection, which holds the heap exclusively, and takes no lock.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ptr::{self, NonNull};

use parking_lot::Mutex;

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

const CLASSES: usize = MAX_SLOT / GRAIN;

/// The head of a page.
#[repr(C)]
struct PageHead {
    /// Most recently freed slot, whose first word links to the next one.
    free: *mut u8,
    /// Neighbours on the room list.
    prev: *mut PageHead,
    next: *mut PageHead,
    /// Objects in the page.
    live: u32,
    /// Offset of the first never-used slot.
    bump: u32,
    /// On the room list.
    listed: bool,
}

const _: () = assert!(std::mem::size_of::<PageHead>() <= FIRST);
const _: () = assert!(PAGE.is_power_of_two() && MAX_SLOT >= 256);

fn page_layout() -> Layout {
    Layout::from_size_align(PAGE, PAGE).expect("PAGE is a power of two")
}

/// The page holding `p`.
fn page_of(p: *mut u8) -> *mut PageHead {
    // Rounding the address down keeps `p`'s provenance: the page is one allocation.
    p.wrapping_sub(p as usize & (PAGE - 1)).cast()
}

/// One size class: its pages with room, and counts.
struct Slab {
    slot: u32,
    room: *mut PageHead,
    pages: usize,
    empty: usize,
}

// SAFETY: a slab owns its pages outright; the raw pointers never alias another slab's.
unsafe impl Send for Slab {}

impl Slab {
    fn new(slot: usize) -> Slab {
        Slab {
            slot: slot as u32,
            room: ptr::null_mut(),
            pages: 0,
            empty: 0,
        }
    }

    fn link(&mut self, page: *mut PageHead) {
        // SAFETY: `page` is one of this slab's pages and not on the list.
        unsafe {
            (*page).prev = ptr::null_mut();
            (*page).next = self.room;
            if !self.room.is_null() {
                (*self.room).prev = page;
            }
            (*page).listed = true;
        }
        self.room = page;
    }

    fn unlink(&mut self, page: *mut PageHead) {
        // SAFETY: `page` is one of this slab's pages and on the list.
        unsafe {
            let (prev, next) = ((*page).prev, (*page).next);
            if prev.is_null() {
                self.room = next;
            } else {
                (*prev).next = next;
            }
            if !next.is_null() {
                (*next).prev = prev;
            }
            (*page).listed = false;
        }
    }

    fn new_page(&mut self) -> *mut PageHead {
        let layout = page_layout();
        // SAFETY: the layout has a non-zero size.
        let page = unsafe { alloc(layout) }.cast::<PageHead>();
        if page.is_null() {
            handle_alloc_error(layout);
        }
        // SAFETY: `page` is a fresh allocation of PAGE bytes, aligned for PageHead.
        unsafe {
            page.write(PageHead {
                free: ptr::null_mut(),
                prev: ptr::null_mut(),
                next: ptr::null_mut(),
                live: 0,
                bump: FIRST as u32,
                listed: false,
            })
        };
        self.pages += 1;
        self.empty += 1;
        self.link(page);
        page
    }

    fn alloc(&mut self) -> NonNull<u8> {
        loop {
            let page = if self.room.is_null() {
                self.new_page()
            } else {
                self.room
            };
            // SAFETY: `page` is a live page of this slab; its free list and bump
            // offset only ever name its own unused slots.
            unsafe {
                let head = &mut *page;
                let slot = if !head.free.is_null() {
                    let s = head.free;
                    head.free = s.cast::<*mut u8>().read();
                    s
                } else if head.bump as usize + self.slot as usize <= PAGE {
                    let s = page.cast::<u8>().add(head.bump as usize);
                    head.bump += self.slot;
                    s
                } else {
                    self.unlink(page);
                    continue;
                };
                if head.live == 0 {
                    self.empty -= 1;
                }
                head.live += 1;
                return NonNull::new_unchecked(slot);
            }
        }
    }

    /// # Safety
    /// `p` is a slot this slab handed out and has not taken back since.
    unsafe fn free(&mut self, p: NonNull<u8>) {
        let page = page_of(p.as_ptr());
        // SAFETY: `p` lies in one of this slab's live pages (the caller's contract),
        // and its slot is free from now on, so its first word may hold the link.
        unsafe {
            let head = &mut *page;
            p.as_ptr().cast::<*mut u8>().write(head.free);
            head.free = p.as_ptr();
            head.live -= 1;
            if !head.listed {
                self.link(page);
            }
            if head.live == 0 {
                if self.empty >= KEEP_EMPTY {
                    self.unlink(page);
                    self.pages -= 1;
                    dealloc(page.cast(), page_layout());
                } else {
                    self.empty += 1;
                }
            }
        }
    }

    /// Moves this slab's room-list pages into `full` and empties the list
    /// (pages off the list are full; [`Slabs::release`] finds them through
    /// the live objects' slots).
    fn release_all(&mut self, full: &mut Vec<*mut PageHead>) {
        let mut p = self.room;
        while !p.is_null() {
            // SAFETY: `p` is a live page of this slab.
            let next = unsafe { (*p).next };
            full.push(p);
            p = next;
        }
        self.room = ptr::null_mut();
    }
}

/// The object memory of one heap: a slab per size class, and counts of the
/// objects too large or too aligned to pool.
pub(crate) struct Slabs {
    classes: Box<[Mutex<Slab>]>,
    /// Objects allocated from the global allocator, live.
    large: Mutex<usize>,
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
fn class_of(layout: Layout) -> Option<usize> {
    if layout.size() <= MAX_SLOT && layout.align() <= MAX_ALIGN && layout.size() > 0 {
        Some((layout.size() - 1) / GRAIN)
    } else {
        None
    }
}

impl Default for Slabs {
    fn default() -> Self {
        Slabs {
            classes: (0..CLASSES)
                .map(|c| Mutex::new(Slab::new((c + 1) * GRAIN)))
                .collect(),
            large: Mutex::new(0),
        }
    }
}

impl Drop for Slabs {
    /// Returns the empty pages (those [`release`](Self::release) has not
    /// taken already). Pages holding objects are the array's to release.
    fn drop(&mut self) {
        for slab in self.classes.iter_mut() {
            let slab = slab.get_mut();
            let mut p = slab.room;
            while !p.is_null() {
                // SAFETY: `p` is a live page of this slab.
                let (next, live) = unsafe { ((*p).next, (*p).live) };
                if live == 0 {
                    slab.unlink(p);
                    // SAFETY: an empty page from `new_page`, now off the list.
                    unsafe { dealloc(p.cast(), page_layout()) };
                }
                p = next;
            }
        }
    }
}

impl Slabs {
    /// Memory for one object of `layout`. Thread-safe.
    #[inline]
    pub(crate) fn alloc(&self, layout: Layout) -> NonNull<u8> {
        match class_of(layout) {
            Some(c) => self.classes[c].lock().alloc(),
            None => {
                let layout = layout.pad_to_align();
                let size = layout.size().max(1);
                let layout = Layout::from_size_align(size, layout.align()).expect("valid layout");
                // SAFETY: the layout has a non-zero size.
                let p = unsafe { alloc(layout) };
                *self.large.lock() += 1;
                NonNull::new(p).unwrap_or_else(|| handle_alloc_error(layout))
            }
        }
    }

    /// Takes back the memory of one object.
    ///
    /// # Safety
    /// `p` came from [`alloc`](Self::alloc) of this `Slabs` with the same
    /// `layout`, its object is dropped, and it is not used again.
    #[inline]
    pub(crate) unsafe fn free(&mut self, p: NonNull<u8>, layout: Layout) {
        match class_of(layout) {
            // SAFETY: the caller's contract: `p` is a slot of this size class.
            Some(c) => unsafe { self.classes[c].get_mut().free(p) },
            None => {
                let layout = layout.pad_to_align();
                let size = layout.size().max(1);
                let layout = Layout::from_size_align(size, layout.align()).expect("valid layout");
                *self.large.get_mut() -= 1;
                // SAFETY: `p` was allocated by the global allocator with this layout.
                unsafe { dealloc(p.as_ptr(), layout) }
            }
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
    /// hence off every room list). Objects from the global allocator must
    /// have been freed with [`free`](Self::free).
    ///
    /// # Safety
    /// Every object in the pages is dropped and no pointer into them is used
    /// again.
    pub(crate) unsafe fn release(&mut self, live: impl Iterator<Item = NonNull<u8>>) {
        let mut pages = Vec::new();
        for slab in self.classes.iter_mut() {
            slab.get_mut().release_all(&mut pages);
        }
        for p in live {
            let page = page_of(p.as_ptr());
            // SAFETY: `p` is a slot of a live page of these slabs.
            let head = unsafe { &mut *page };
            if !head.listed {
                // Mark it once, so it is collected once.
                head.listed = true;
                pages.push(page);
            }
        }
        for page in pages {
            // SAFETY: each page was allocated by `new_page` with this layout and is
            // listed once (room-list pages carry `listed`, full ones were marked above).
            unsafe { dealloc(page.cast(), page_layout()) };
        }
        for slab in self.classes.iter_mut() {
            let s = slab.get_mut();
            s.pages = 0;
            s.empty = 0;
        }
    }

    /// Bytes in pages (live, free and empty slots alike).
    pub(crate) fn page_bytes(&self) -> usize {
        self.classes.iter().map(|s| s.lock().pages).sum::<usize>() * PAGE
    }

    /// Objects from the global allocator.
    pub(crate) fn large(&self) -> usize {
        *self.large.lock()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // SAFETY: every object is gone; the slots are the live ones.
        unsafe { s.release(again.into_iter()) };
        assert_eq!(s.page_bytes(), 0);
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
        assert_eq!((s.large(), s.page_bytes()), (2, pages));
        // SAFETY: both came from `s` with these layouts.
        unsafe {
            s.free(a, big);
            s.free(b, wide);
        }
        assert_eq!(s.large(), 0);
    }

    /// Random allocations and frees of a few layouts against a model (the
    /// set of live blocks): blocks never overlap, each keeps the bytes
    /// written into it until freed, and pages hold no more than the live
    /// slots need plus the empty pages each size class may keep.
    mod model {
        use super::*;
        use proptest::prelude::*;

        const LAYOUTS: [(usize, usize); 5] =
            [(8, 8), (40, 8), (48, 16), (200, 8), (MAX_SLOT + 8, 8)];

        #[derive(Debug, Clone)]
        enum Op {
            Alloc(usize),
            Free(usize),
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                3 => (0..LAYOUTS.len()).prop_map(Op::Alloc),
                2 => any::<usize>().prop_map(Op::Free),
            ]
        }

        fn run(ops: &[Op]) -> Result<(), TestCaseError> {
            let mut s = Slabs::default();
            let mut live: Vec<(NonNull<u8>, Layout, u8)> = Vec::new();
            for (n, op) in ops.iter().enumerate() {
                match *op {
                    Op::Alloc(k) => {
                        let (size, align) = LAYOUTS[k];
                        let l = Layout::from_size_align(size, align).unwrap();
                        let p = s.alloc(l);
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
                    Op::Free(_) => {}
                }
                // Every page holding a live slot exists; at most KEEP_EMPTY
                // more (empty ones) per size class.
                for &(size, align) in &LAYOUTS {
                    let l = Layout::from_size_align(size, align).unwrap();
                    let Some(c) = class_of(l) else { continue };
                    let mut used: Vec<usize> = live
                        .iter()
                        .filter(|(_, m, _)| class_of(*m) == Some(c))
                        .map(|(p, _, _)| page_of(p.as_ptr()) as usize)
                        .collect();
                    used.sort_unstable();
                    used.dedup();
                    let pages = s.classes[c].lock().pages;
                    prop_assert!(
                        pages >= used.len() && pages <= used.len() + KEEP_EMPTY,
                        "class {}: {} pages for {} in use",
                        c,
                        pages,
                        used.len()
                    );
                }
                let large = live.iter().filter(|(_, l, _)| !Slabs::pooled(*l)).count();
                prop_assert_eq!(s.large(), large);
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

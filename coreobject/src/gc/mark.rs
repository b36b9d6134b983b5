//! Marking: an explicit work list, never recursion.
//!
//! Grey objects wait on `stack` as packed handles (index + serial). Popping
//! one validates it (serial matches, not garbage, not yet marked), sets its
//! bit in the side bitmap, prefetches its memory and parks it in a small FIFO
//! ring; objects are scanned only when they leave the ring, by which time the
//! prefetch has usually landed. Pushing a handle prefetches its table item.
//! A 10-million-object chain therefore needs 10 million stack *entries* on
//! the heap, and no call-stack depth at all.

use std::ptr::NonNull;

use crate::handle::AnyObj;
use crate::item::flags;
use crate::object::Header;
use crate::table::Chunks;
use crate::trace::Visitor;

/// Objects in flight between prefetch and scan.
const RING: usize = 8;

#[inline(always)]
fn prefetch<T>(p: *const T) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is only a hint; it never faults, whatever the address.
        #[allow(unused_unsafe)]
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(p as *const i8)
        }
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = p;
}

/// The collector's visitor.
pub(crate) struct Marker<'a> {
    chunks: &'a Chunks,
    bits: &'a mut [u64],
    stack: &'a mut Vec<u64>,
    high_water: u32,
    pub(crate) marked: usize,
}

impl<'a> Marker<'a> {
    pub(crate) fn new(
        chunks: &'a Chunks,
        bits: &'a mut [u64],
        stack: &'a mut Vec<u64>,
        high_water: u32,
    ) -> Self {
        Marker {
            chunks,
            bits,
            stack,
            high_water,
            marked: 0,
        }
    }

    #[inline(always)]
    fn is_marked(&self, i: u32) -> bool {
        self.bits[(i >> 6) as usize] & (1 << (i & 63)) != 0
    }

    /// Traces one object's references (fields and outer).
    #[inline(always)]
    pub(crate) fn scan(&mut self, p: NonNull<Header>) {
        // SAFETY: `p` is a live header (validated when popped, or a pool object),
        // and the collection holds `&mut Heap`, so nothing mutates or frees it.
        let h = unsafe { p.as_ref() };
        if h.class.needs_trace() {
            // SAFETY: the vtable belongs to the header's own class.
            unsafe { (h.class.vt.trace_mark)(p, self) }
        }
        if let Some(o) = h.outer {
            self.visit(o);
        }
    }

    /// Pops and validates the next grey object; marks it.
    #[inline(always)]
    fn pop_grey(&mut self) -> Option<Option<NonNull<Header>>> {
        let bits = self.stack.pop()?;
        let (i, serial) = (bits as u32, (bits >> 32) as u32);
        if self.is_marked(i) {
            return Some(None);
        }
        let item = self.chunks.at(i);
        if item.serial() != serial || item.flags() & (flags::DEAD | flags::DISREGARD) != 0 {
            return Some(None);
        }
        let Some(p) = item.object() else {
            return Some(None);
        };
        self.bits[(i >> 6) as usize] |= 1 << (i & 63);
        self.marked += 1;
        prefetch(p.as_ptr());
        Some(Some(p))
    }

    /// Marks everything reachable from what was visited so far.
    pub(crate) fn drain(&mut self) {
        let mut ring = [NonNull::<Header>::dangling(); RING];
        let (mut head, mut len) = (0usize, 0usize);
        loop {
            while len < RING {
                match self.pop_grey() {
                    None => break,
                    Some(None) => continue,
                    Some(Some(p)) => {
                        ring[(head + len) % RING] = p;
                        len += 1;
                    }
                }
            }
            if len == 0 {
                break;
            }
            let p = ring[head];
            head = (head + 1) % RING;
            len -= 1;
            self.scan(p);
        }
    }
}

impl Visitor for Marker<'_> {
    #[inline(always)]
    fn visit(&mut self, obj: AnyObj) {
        let i = obj.index();
        if i >= self.high_water || self.is_marked(i) {
            return;
        }
        prefetch(self.chunks.at(i) as *const _);
        self.stack.push(obj.to_bits());
    }
}

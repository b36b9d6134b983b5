//! Marking: an explicit work queue, never recursion.
//!
//! Marking a large graph is bound by cache misses, not by instructions: each
//! object costs a miss on its table item, one on its allocation and one on
//! any buffer its references live in (a `Vec`'s, say). The marker therefore
//! runs every object through a three-stage pipeline, so that each miss is
//! requested long before it is needed and many are in flight at once:
//!
//! 1. **queue** — a visited handle whose slot is not yet marked joins a FIFO
//!    queue (breadth-first order). Its table item is prefetched when it is a
//!    few entries from the front, so that it has arrived when its turn comes.
//! 2. **ring A** — popping validates the handle against the item (serial
//!    matches, not garbage, not in the pool, not yet marked), sets its bit
//!    in the side bitmap and prefetches the object's allocation.
//! 3. **ring B** — on entering this ring the object's
//!    [`Trace::prefetch`](crate::Trace::prefetch) asks for the buffers its
//!    `trace` will read; on leaving it, the object is scanned, and its
//!    references join the queue.
//!
//! A 10-million-object chain needs 10 million queue *entries* on the heap,
//! and no call-stack depth at all. The same handle may be queued more than
//! once (it is marked only when popped, after validation); the bitmap test
//! at pop makes the repeats cheap.

use std::collections::VecDeque;
use std::ptr::NonNull;

use std::time::Instant;

use crate::array::{flags, Chunks};
use crate::handle::AnyObj;
use crate::object::Header;
use crate::trace::{prefetch_line, Visitor};

/// Objects in flight in each ring: enough to cover a memory miss with the
/// work of the objects ahead of them.
const RING: usize = 8;

/// How far behind the queue's front a table item is prefetched. Prefetching
/// at push time would be too early: in breadth-first order the queue can
/// hold a whole frontier, and the line would be evicted before its turn.
const LOOKAHEAD: usize = 32;

/// A fixed-size FIFO of object pointers.
struct Ring {
    slots: [NonNull<Header>; RING],
    head: usize,
    len: usize,
}

impl Ring {
    fn new() -> Ring {
        Ring {
            slots: [NonNull::dangling(); RING],
            head: 0,
            len: 0,
        }
    }

    #[inline(always)]
    fn is_full(&self) -> bool {
        self.len == RING
    }

    #[inline(always)]
    fn push(&mut self, p: NonNull<Header>) {
        debug_assert!(!self.is_full());
        self.slots[(self.head + self.len) % RING] = p;
        self.len += 1;
    }

    #[inline(always)]
    fn pop(&mut self) -> Option<NonNull<Header>> {
        if self.len == 0 {
            return None;
        }
        let p = self.slots[self.head];
        self.head = (self.head + 1) % RING;
        self.len -= 1;
        Some(p)
    }
}

/// How often (in objects scanned) a budgeted drain reads the clock.
const CLOCK_EVERY: usize = 256;

/// What popping the queue gave.
enum Pop {
    /// The queue is empty.
    Empty,
    /// The entry was stale, garbage, in the pool or already marked.
    Skip,
    /// A newly marked object, to scan.
    Grey(NonNull<Header>),
}

/// The collector's visitor.
pub(crate) struct Marker<'a> {
    chunks: &'a Chunks,
    bits: &'a mut [u64],
    queue: &'a mut VecDeque<u64>,
    high_water: u32,
    pub(crate) marked: usize,
}

impl<'a> Marker<'a> {
    pub(crate) fn new(
        chunks: &'a Chunks,
        bits: &'a mut [u64],
        queue: &'a mut VecDeque<u64>,
        high_water: u32,
    ) -> Self {
        Marker {
            chunks,
            bits,
            queue,
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

    /// Asks for the memory `scan` will read behind the object's pointers.
    #[inline(always)]
    fn prefetch_refs(p: NonNull<Header>) {
        // SAFETY: as in `scan`.
        let h = unsafe { p.as_ref() };
        if h.class.needs_trace() {
            // SAFETY: the vtable belongs to the header's own class.
            unsafe { (h.class.vt.prefetch)(p) }
        }
    }

    /// Pops and validates the next queued handle; marks it.
    #[inline(always)]
    fn pop_grey(&mut self) -> Pop {
        let Some(bits) = self.queue.pop_front() else {
            return Pop::Empty;
        };
        if let Some(&ahead) = self.queue.get(LOOKAHEAD) {
            if let Some(item) = self.chunks.get(ahead as u32) {
                prefetch_line(item as *const _);
            }
        }
        let (i, serial) = (bits as u32, (bits >> 32) as u32);
        if self.is_marked(i) {
            return Pop::Skip;
        }
        let item = self.chunks.at(i);
        if item.serial() != serial || item.flags() & (flags::DEAD | flags::DISREGARD) != 0 {
            return Pop::Skip;
        }
        let Some(p) = item.object() else {
            return Pop::Skip;
        };
        self.set_mark(i);
        self.marked += 1;
        prefetch_line(p.as_ptr());
        Pop::Grey(p)
    }

    /// Sets slot `i`'s mark bit (below the cycle's high water).
    #[inline(always)]
    pub(crate) fn set_mark(&mut self, i: u32) {
        if i < self.high_water {
            self.bits[(i >> 6) as usize] |= 1 << (i & 63);
        }
    }

    /// Whether slot `i` is marked; slots at or above the cycle's high water
    /// were created during it and count as marked.
    #[inline(always)]
    pub(crate) fn is_black(&self, i: u32) -> bool {
        i >= self.high_water || self.is_marked(i)
    }

    /// Marks everything reachable from what was visited so far, or until
    /// `deadline` passes. Returns `true` when the queue ran dry, `false` when
    /// the deadline stopped it; either way every object marked so far has
    /// been scanned (the rings are flushed), so the mutator may run.
    pub(crate) fn drain(&mut self, deadline: Option<Instant>) -> bool {
        let (mut a, mut b) = (Ring::new(), Ring::new());
        let mut until_clock = CLOCK_EVERY;
        let mut open = true;
        loop {
            // Stage 2: keep ring A full from the queue.
            while open && !a.is_full() {
                match self.pop_grey() {
                    Pop::Empty => break,
                    Pop::Skip => continue,
                    Pop::Grey(p) => a.push(p),
                }
            }
            // Stage 3: move one object from A into B, scanning B's oldest to
            // make room. Once A runs dry, B drains (its scans may refill the
            // queue, and the loop goes round again).
            if let Some(p) = a.pop() {
                if b.is_full() {
                    let oldest = b.pop().expect("a full ring has an oldest entry");
                    self.scan(oldest);
                }
                Self::prefetch_refs(p);
                b.push(p);
            } else if let Some(oldest) = b.pop() {
                self.scan(oldest);
            } else if open && !self.queue.is_empty() {
                continue;
            } else {
                return open;
            }
            until_clock -= 1;
            if until_clock == 0 {
                until_clock = CLOCK_EVERY;
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    // Stop taking new objects; flush the rings.
                    open = false;
                }
            }
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
        self.queue.push_back(obj.to_bits());
    }
}

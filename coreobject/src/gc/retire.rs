//! Buffers the collector has replaced, given back to the allocator a piece
//! per slice.
//!
//! A cycle's start makes room for its work queue and born list (see
//! `Collector::start`); when the heap has grown past the room of the
//! buffers kept from the last cycle, they are replaced by bigger ones. The
//! old ones hold pages the last cycle touched (millions of entries at a
//! million objects), and dropping one gives them all back in that slice:
//! 5-9 ms of `munmap` in a cycle's first slice in the demo at a million
//! objects. Retired here instead, each is shrunk by [`PIECE_BYTES`] in each
//! later slice (a `realloc` to a smaller size gives back only the tail),
//! until it is gone.

use super::CycleKind;

/// Bytes a slice gives back at most (less under miri, whose tests use
/// small heaps).
pub(crate) const PIECE_BYTES: usize = if cfg!(miri) { 4096 } else { 256 * 1024 };

/// How many times the room a cycle's start needs a replaced buffer is
/// made with: a growing heap then replaces its rooms once per doubling,
/// not at nearly every cycle's start (each replacement retires buffers
/// whose touched pages pile up until given back; in an instrumented 1M
/// incremental demo run, about 300 MiB). The headroom costs address
/// space, not memory: the queue is cleared (its head back at the start)
/// at every cycle's start and the born list appended from its start, so
/// pages past what a cycle uses are not touched.
pub(crate) const HEADROOM: usize = 2;

/// How many times the room a cycle's start would make a kept buffer may
/// hold before the start retires it (see [`oversized`]), on top of the
/// [`HEADROOM`] a replaced buffer is made with.
pub(crate) const SHRINK_PAST: usize = 4;

/// Pieces a tick with no cycle in flight gives back: nothing else runs
/// in it, so the pile a burst of replacements left goes faster.
pub(crate) const IDLE_PIECES: usize = 8;

/// Whether a kept buffer of `capacity` entries of `size` bytes is too big
/// for a heap whose cycles need `room` entries: more than
/// [`SHRINK_PAST`] times that room with its [`HEADROOM`], and more than a
/// piece. A buffer sized
/// by a burst (a cycle that created many times the live heap) is then
/// retired at a later cycle's start instead of being kept forever; the
/// factor leaves a heap that shrinks and grows back within it replacing
/// nothing, and the piece keeps small heaps from replacing small buffers.
/// `room` counts what the last cycles really used (see [`Used`]), not
/// only what a start makes: a buffer that every cycle fills past the
/// start's room is kept, not retired and grown again at every cycle.
pub(crate) fn oversized(capacity: usize, size: usize, room: usize) -> bool {
    let bytes = capacity.saturating_mul(size);
    bytes > PIECE_BYTES && capacity > (SHRINK_PAST * HEADROOM).saturating_mul(room)
}

/// Entries the last completed cycle of each kind used of a buffer kept
/// from cycle to cycle (the work queue's high water, the born and young
/// lists' lengths), for [`oversized`]: measured against the room a start
/// makes alone, a buffer a cycle really needs past that room (objects
/// holding many handles, each queued once per reference before it is
/// marked; many objects created during each major cycle and freed by the
/// minor one after) was retired at every start and grown again inside
/// that cycle's slices. Kept per kind, so that a minor cycle's small use
/// does not give back what the next major one needs; replaced by the next
/// cycle of the same kind, so that a one-off burst is still given back.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Used {
    major: usize,
    minor: usize,
}

impl Used {
    /// Notes what a completed cycle of `kind` used.
    pub(crate) fn note(&mut self, kind: CycleKind, entries: usize) {
        match kind {
            CycleKind::Major => self.major = entries,
            CycleKind::Minor => self.minor = entries,
        }
    }

    /// The most the last cycle of either kind used.
    pub(crate) fn most(&self) -> usize {
        self.major.max(self.minor)
    }
}

/// A buffer that can give its memory back in pieces.
trait Shrink: Send + Sync {
    /// Gives back about `bytes` of the buffer's room; `true` once it holds
    /// none.
    fn give_back(&mut self, bytes: usize) -> bool;
    /// The buffer's room in bytes.
    fn bytes(&self) -> usize;
}

impl<T: Send + Sync> Shrink for Vec<T> {
    fn give_back(&mut self, bytes: usize) -> bool {
        let size = std::mem::size_of::<T>().max(1);
        let keep = self.capacity().saturating_sub(bytes / size);
        self.clear();
        if keep == 0 {
            *self = Vec::new();
            return true;
        }
        self.shrink_to(keep);
        false
    }

    fn bytes(&self) -> usize {
        self.capacity() * std::mem::size_of::<T>()
    }
}

/// Retired buffers, newest last.
#[derive(Default)]
pub(crate) struct Retired {
    bufs: Vec<Box<dyn Shrink>>,
    /// Bytes ever retired to go back in pieces (more than one), for
    /// tests' counts.
    total: usize,
}

impl Retired {
    /// Takes `v` to give back in pieces (at once if it is one piece or
    /// less).
    pub(crate) fn retire<T: Send + Sync + 'static>(&mut self, mut v: Vec<T>) {
        v.clear();
        if v.bytes() > PIECE_BYTES {
            self.total += v.bytes();
            self.bufs.push(Box::new(v));
        }
    }

    /// Retires `buf` (leaving it empty and unallocated) when it holds
    /// nothing and is [`oversized`] for a heap whose cycles need `room`
    /// entries; a buffer still holding entries is never taken.
    pub(crate) fn retire_if_oversized<T: Send + Sync + 'static>(
        &mut self,
        buf: &mut Vec<T>,
        room: usize,
    ) {
        if buf.is_empty() && oversized(buf.capacity(), std::mem::size_of::<T>(), room) {
            self.retire(std::mem::take(buf));
        }
    }

    /// Gives back one piece of the newest retired buffer.
    pub(crate) fn give_back_piece(&mut self) {
        if let Some(b) = self.bufs.last_mut() {
            if b.give_back(PIECE_BYTES) {
                self.bufs.pop();
            }
        }
    }

    /// Gives back every retired buffer at once (an unbudgeted slice: a
    /// whole collection has no slice to keep short).
    pub(crate) fn give_back_all(&mut self) {
        self.bufs.clear();
    }

    /// Bytes the retired buffers still hold.
    pub(crate) fn bytes(&self) -> usize {
        self.bufs.iter().map(|b| b.bytes()).sum()
    }

    /// Bytes ever retired to go back in pieces, given back or not.
    #[cfg(test)]
    pub(crate) fn total(&self) -> usize {
        self.total
    }

    /// Buffers not wholly given back yet.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.bufs.len()
    }
}

/// Entries a [`GrowingList`] copies into its next buffer per slice at
/// least, on top of twice those appended since the last slice.
pub(crate) const COPY_PIECE: usize = if cfg!(miri) { 64 } else { 65_536 };

/// A list that a cycle appends to at every slice (its born list) and that
/// never copies itself whole inside one slice: once it is half full, a
/// buffer twice its size is filled with a copy of it a piece per slice
/// ([`advance`](Self::advance)), and takes its place when the copy has
/// caught up; the old buffer is then [`Retired`]. Appends go to the
/// current buffer meanwhile (half of it is room), and a piece copies
/// [`COPY_PIECE`] entries plus twice what was appended since the last
/// slice, so the copy catches up before that room is spent. Reads see
/// the current buffer (`Deref`).
#[derive(Default)]
pub(crate) struct GrowingList {
    v: Vec<u32>,
    /// The next buffer: a copy of `v`'s first entries, or empty.
    next: Vec<u32>,
    /// `v`'s length at the last `advance`.
    seen: usize,
}

impl GrowingList {
    pub(crate) fn new(v: Vec<u32>) -> Self {
        GrowingList {
            seen: v.len(),
            v,
            next: Vec::new(),
        }
    }

    /// The list to append to.
    pub(crate) fn appendable(&mut self) -> &mut Vec<u32> {
        &mut self.v
    }

    /// One slice's piece of the growth, if one is under way or due.
    pub(crate) fn advance(&mut self, retired: &mut Retired) {
        self.advance_by(retired, COPY_PIECE);
    }

    /// [`advance`](Self::advance), copying at least `piece` entries.
    fn advance_by(&mut self, retired: &mut Retired, piece: usize) {
        let appended = self.v.len().saturating_sub(self.seen);
        if self.next.capacity() == 0 && self.v.len() > self.v.capacity() / 2 {
            // Twice the room, untouched until the copy reaches it.
            self.next = Vec::with_capacity((2 * self.v.capacity()).max(piece));
        }
        if self.next.capacity() > 0 {
            let from = self.next.len();
            let to = self.v.len().min(from + piece + 2 * appended);
            self.next.extend_from_slice(&self.v[from..to]);
            if self.next.len() == self.v.len() {
                let old = std::mem::replace(&mut self.v, std::mem::take(&mut self.next));
                retired.retire(old);
            }
        }
        self.seen = self.v.len();
    }

    /// The current buffer, leaving the list empty; a growth under way is
    /// retired.
    pub(crate) fn take(&mut self, retired: &mut Retired) -> Vec<u32> {
        retired.retire(std::mem::take(&mut self.next));
        self.seen = 0;
        std::mem::take(&mut self.v)
    }

    /// Room in bytes, the next buffer's included.
    pub(crate) fn bytes(&self) -> usize {
        (self.v.capacity() + self.next.capacity()) * 4
    }
}

impl std::ops::Deref for GrowingList {
    type Target = Vec<u32>;
    fn deref(&self) -> &Vec<u32> {
        &self.v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Appends of 20 entries a slice to a list of 256 (pieces of 64): it
    /// grows without ever copying more than a piece in one slice, keeps
    /// its entries in order, and its buffer is never reallocated by an
    /// append. Fails when the growth copies the list whole (or lets the
    /// appends reallocate it).
    #[test]
    fn a_growing_list_copies_a_piece_per_slice() {
        let mut retired = Retired::default();
        let piece = 64;
        let mut l = GrowingList::new(Vec::with_capacity(256));
        let per = 20u32;
        let mut model = Vec::new();
        let mut grew = 0;
        for slice in 0..200u32 {
            let (cap, ptr) = (l.capacity(), l.as_ptr());
            let extra: Vec<u32> = (0..per).map(|k| k + 7 * slice).collect();
            l.appendable().extend_from_slice(&extra);
            model.extend_from_slice(&extra);
            assert_eq!(
                (l.capacity(), l.as_ptr()),
                (cap, ptr),
                "slice {slice}: an append grew it"
            );
            let copied = l.next.len();
            l.advance_by(&mut retired, piece);
            if l.as_ptr() != ptr {
                grew += 1;
            }
            let copied_now = if l.as_ptr() != ptr {
                l.len()
            } else {
                l.next.len()
            } - copied;
            assert!(
                copied_now <= piece + 2 * per as usize,
                "slice {slice}: {copied_now} entries copied in one slice"
            );
            assert_eq!(&l[..], &model[..]);
            retired.give_back_piece();
        }
        assert!(grew >= 2, "grew {grew} times");
        let v = l.take(&mut retired);
        assert_eq!(v, model);
    }

    /// A retired buffer is given back a piece at a time, then dropped; a
    /// small one at once.
    #[test]
    fn a_retired_buffer_goes_in_pieces() {
        let mut r = Retired::default();
        r.retire(Vec::<u64>::with_capacity(100));
        assert_eq!(r.len(), 0, "one piece or less: dropped at once");
        let pieces = 5;
        r.retire(vec![7u32; pieces * PIECE_BYTES / 4]);
        assert_eq!(r.bytes(), pieces * PIECE_BYTES);
        for k in 1..pieces {
            r.give_back_piece();
            assert_eq!(r.bytes(), (pieces - k) * PIECE_BYTES, "piece {k}");
        }
        r.give_back_piece();
        assert_eq!((r.len(), r.bytes()), (0, 0));
    }
}

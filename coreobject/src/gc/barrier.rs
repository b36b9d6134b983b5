//! What creation and mutation tell the collector: the flags an object is
//! born with, the bytes allocated, the write barrier (the re-scan list while
//! marking, the remembered set between cycles), garbage marks set and
//! cleared. The read barrier of interior-mutable classes lives with the
//! array (`ObjectArray::touch`), which hands out the references.

use std::sync::atomic::Ordering;

use super::Collector;
use crate::array::{flags, Item};
use crate::handle::AnyObj;

impl Collector {
    /// Flags to give an object created now.
    #[inline(always)]
    pub(crate) fn birth_flags(&self) -> u32 {
        if self.in_flight {
            flags::BORN
        } else {
            0
        }
    }

    /// Counts bytes allocated, for the bytes trigger.
    #[inline(always)]
    pub(crate) fn note_alloc(&self, bytes: usize) {
        if self.config.bytes_threshold.is_some() {
            self.bytes_since_gc.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    /// The write barrier: every mutable access passes here. While marking,
    /// every changed object joins the re-scan list. Between cycles
    /// (generational), an old one does: the remembered set, which the next
    /// minor cycle re-scans. Old: marked by the last cycle, or in the pool;
    /// during a purge, every object counts as old. Inline: a flag test (an
    /// object already listed) and a bit test (a young one) on the fast path.
    #[inline(always)]
    pub(crate) fn barrier(&mut self, item: &Item, index: u32) {
        // `in_flight`: a cycle that started non-generational (after an
        // abandoned cycle, or with `generational` turned on since) ends
        // generational, and what its purge saw written must be remembered.
        if self.marking | self.gen | self.in_flight {
            let f = item.flags();
            if f & flags::REGREY == 0
                && (self.in_flight
                    || f & flags::DISREGARD != 0
                    || self
                        .bits
                        .get((index >> 6) as usize)
                        .is_some_and(|w| w & (1 << (index & 63)) != 0))
            {
                self.remember(item, index);
            }
        }
    }

    #[cold]
    fn remember(&mut self, item: &Item, index: u32) {
        if item.set(flags::REGREY) & flags::REGREY == 0 {
            self.regrey.push(index);
        }
    }

    /// An object was marked as garbage: a minor cycle must free it even if
    /// it is old.
    pub(crate) fn note_garbage(&self, h: AnyObj) {
        if self.gen {
            self.garbage.lock().push(h);
        }
    }

    /// Handles held somewhere may resolve to `h` again without any write
    /// the barrier saw: its garbage mark was cleared, or it was restored into
    /// its slot with its old serial. Their holders may be old objects that no
    /// minor cycle re-scans, so while a cycle marks, marking looks at `h`;
    /// otherwise the next minor cycle starts from it, as from the remembered
    /// set (a major one finds it from its holders, if it has any).
    pub(crate) fn note_revived(&self, h: AnyObj) {
        if self.marking {
            self.greyed.lock().push(h);
        } else if self.gen {
            self.revived.lock().push(h);
        }
    }
}

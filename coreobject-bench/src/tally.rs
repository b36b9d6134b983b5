//! [`Tally`]: a zero-sized field whose `Drop` counts how many objects a
//! peer has really dropped, on whichever thread drops them (coreobject may
//! drop values on its marking workers: `GcConfig::parallel_drop`). Each
//! peer runs in a process of its own and its repetitions one after
//! another, so the difference of two readings is that peer's drops.
//!
//! Every `world` object of every peer carries one, so verifying "exactly the
//! detached objects were freed" does not depend on a library's own statistics
//! (only coreobject reports any). It implements each library's tracing trait
//! as "nothing inside".

use std::sync::atomic::{AtomicU64, Ordering};

static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Objects whose `Tally` this process has dropped so far.
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// The drop counter. Zero-sized: it adds no bytes to the objects.
#[derive(Default)]
pub struct Tally;

impl Drop for Tally {
    #[inline]
    fn drop(&mut self) {
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }
}

impl coreobject::Trace for Tally {
    const NEEDS_TRACE: bool = false;
    const KIND: coreobject::RefKind = coreobject::RefKind::Plain;
    #[inline(always)]
    fn trace<V: coreobject::Visitor + ?Sized>(&self, _v: &mut V) {}
}

// SAFETY: `Tally` holds no `Gc` pointers; its `Drop` touches none.
unsafe impl<'gc> gc_arena::Collect<'gc> for Tally {
    const NEEDS_TRACE: bool = false;
}

impl gc::Finalize for Tally {}
// SAFETY: `Tally` holds no `Gc` pointers.
unsafe impl gc::Trace for Tally {
    gc::unsafe_empty_trace!();
}

// SAFETY: `Tally` holds no `Gc` pointers, so there is nothing to visit.
unsafe impl<V: dumpster::Visitor> dumpster::TraceWith<V> for Tally {
    #[inline]
    fn accept(&self, _visitor: &mut V) -> Result<(), ()> {
        Ok(())
    }
}

impl rust_cc::Finalize for Tally {}
// SAFETY: `Tally` holds no `Cc` pointers; its `Drop` touches none.
unsafe impl rust_cc::Trace for Tally {
    #[inline]
    fn trace(&self, _ctx: &mut rust_cc::Context<'_>) {}
}

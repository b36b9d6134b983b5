//! [`Tally`]: a zero-sized field whose `Drop` counts, per thread, how many
//! objects a peer has really dropped.
//!
//! Every `world` object of every peer carries one, so verifying "exactly the
//! detached objects were freed" does not depend on a library's own statistics
//! (only coreobject reports any). It implements each library's tracing trait
//! as "nothing inside".

use std::cell::Cell;

thread_local! {
    static DROPPED: Cell<u64> = const { Cell::new(0) };
}

/// Objects whose `Tally` this thread has dropped so far.
pub fn dropped() -> u64 {
    DROPPED.with(Cell::get)
}

/// The drop counter. Zero-sized: it adds no bytes to the objects.
#[derive(Default)]
pub struct Tally;

impl Drop for Tally {
    #[inline]
    fn drop(&mut self) {
        let _ = DROPPED.try_with(|c| c.set(c.get() + 1));
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

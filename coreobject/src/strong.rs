//! RAII strong handles (Unreal's `TStrongObjectPtr`).
//!
//! A [`StrongObj`] keeps its object alive through the item's ref count: the
//! collector treats any object with a non-zero count as a root. It can be
//! cloned and dropped on any thread, and may outlive the heap (the table's
//! chunk memory is shared with it).
//!
//! ```
//! use coreobject::{Heap, Object};
//! #[derive(Object, Default)]
//! struct Sound;
//! let mut heap = Heap::new();
//! let s = heap.create(Sound);
//! let keep = heap.strong(s).unwrap();
//! heap.collect().unwrap();
//! assert!(heap.get(&keep).is_some());
//! std::thread::spawn(move || drop(keep)).join().unwrap();
//! heap.collect().unwrap();
//! assert!(heap.get(s).is_none());
//! ```

use std::fmt;
use std::sync::Arc;

use crate::array::Chunks;
use crate::handle::{AnyObj, Handle, Obj};

/// A strong handle that roots its object while it exists.
pub struct StrongObj<T> {
    chunks: Arc<Chunks>,
    raw: Obj<T>,
}

impl<T> StrongObj<T> {
    /// Takes a count on `raw`'s slot. Returns the previous count.
    pub(crate) fn acquire(chunks: &Arc<Chunks>, raw: Obj<T>) -> (StrongObj<T>, u32) {
        let prev = chunks.at(raw.index()).acquire();
        (
            StrongObj {
                chunks: chunks.clone(),
                raw,
            },
            prev,
        )
    }

    /// The plain handle.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Sound;
    /// let heap = Heap::new();
    /// let s = heap.create(Sound);
    /// assert_eq!(heap.strong(s).unwrap().obj(), s);
    /// ```
    pub fn obj(&self) -> Obj<T> {
        self.raw
    }
}

impl<T> Clone for StrongObj<T> {
    fn clone(&self) -> Self {
        StrongObj::acquire(&self.chunks, self.raw).0
    }
}

impl<T> Drop for StrongObj<T> {
    fn drop(&mut self) {
        self.chunks.at(self.raw.index()).release();
    }
}

impl<T> fmt::Debug for StrongObj<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Strong{:?}", self.obj())
    }
}

impl<T: 'static> Handle for &StrongObj<T> {
    type Target = T;
    fn any_obj(&self) -> AnyObj {
        self.raw.any()
    }
}

//! Create and delete listeners, and external referencers.

use std::sync::Arc;

use crate::listener::{CreateListener, DeleteListener, HookId, ObjectEvent};
use crate::referencer::Referencer;

use super::Heap;

impl Heap {
    /// Registers a [`CreateListener`].
    pub fn add_create_listener(&mut self, l: impl CreateListener) -> HookId {
        let id = self.next_hook_id();
        self.listeners.create.push((id, Box::new(l)));
        id
    }

    /// Registers a [`DeleteListener`].
    pub fn add_delete_listener(&mut self, l: impl DeleteListener) -> HookId {
        let id = self.next_hook_id();
        self.listeners.delete.push((id, Box::new(l)));
        id
    }

    /// Registers a closure as a create listener.
    ///
    /// ```
    /// # use coreobject::{Heap, Object, ObjectEvent};
    /// # use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    /// # use std::sync::Arc;
    /// # #[derive(Object, Default)] struct Coin;
    /// let n = Arc::new(AtomicUsize::new(0));
    /// let mut heap = Heap::new();
    /// let n2 = n.clone();
    /// let id = heap.on_create(move |_: &ObjectEvent| { n2.fetch_add(1, SeqCst); });
    /// heap.create(Coin);
    /// assert!(heap.remove_listener(id));
    /// heap.create(Coin);
    /// assert_eq!(n.load(SeqCst), 1);
    /// ```
    pub fn on_create(&mut self, f: impl Fn(&ObjectEvent) + Send + Sync + 'static) -> HookId {
        self.add_create_listener(f)
    }

    /// Registers a closure as a delete listener.
    pub fn on_delete(&mut self, f: impl Fn(&ObjectEvent) + Send + Sync + 'static) -> HookId {
        self.add_delete_listener(f)
    }

    /// Registers a delete listener that hears deletions in batches: one call
    /// per purge slice that freed objects (a whole stop-the-world purge is
    /// one slice), and one per [`tick`](Self::tick) that frees objects whose
    /// `finish_destroy` was pending, with every object it freed, in the order
    /// they were freed. Beside the per-object listeners
    /// ([`on_delete`](Self::on_delete)), which hear each object just before
    /// it is freed, it costs one call per slice instead of one per object,
    /// and does not keep the purge from dropping values on several threads
    /// ([`GcConfig::parallel_drop`](crate::GcConfig::parallel_drop)). It runs
    /// after the slice has freed them, so the handles are already stale:
    /// use them as keys. Batch listeners run most recently added first,
    /// under the same panic rule as the other listeners. Remove one with
    /// [`remove_listener`](Self::remove_listener).
    ///
    /// ```
    /// # use coreobject::{AnyObj, Heap, Object, ObjectEvent};
    /// # use std::sync::{Arc, Mutex};
    /// # #[derive(Object, Default)] struct Coin;
    /// let seen: Arc<Mutex<Vec<usize>>> = Arc::default();
    /// let mut heap = Heap::new();
    /// let log = seen.clone();
    /// heap.on_delete_batch(move |batch: &[ObjectEvent]| log.lock().unwrap().push(batch.len()));
    /// let coins: Vec<AnyObj> = (0..3).map(|_| heap.create(Coin).any()).collect();
    /// heap.collect().unwrap();
    /// assert_eq!(*seen.lock().unwrap(), [3]); // one call, three deletions
    /// assert!(coins.iter().all(|&c| !heap.contains(c)));
    /// ```
    pub fn on_delete_batch(
        &mut self,
        f: impl Fn(&[ObjectEvent]) + Send + Sync + 'static,
    ) -> HookId {
        let id = self.next_hook_id();
        self.listeners.delete_batch.push((id, Box::new(f)));
        id
    }

    /// Removes a listener. `false` if the id is unknown.
    pub fn remove_listener(&mut self, id: HookId) -> bool {
        self.listeners.remove(id)
    }

    /// Heap memory that listeners report owning.
    pub fn listeners_allocated_size(&self) -> usize {
        self.listeners.allocated_size()
    }

    /// Registers an external referencer (Unreal's `FGCObject`).
    pub fn add_referencer(&mut self, r: Arc<dyn Referencer>) -> HookId {
        let id = self.next_hook_id();
        self.referencers.push((id, r));
        id
    }

    /// Removes an external referencer. `false` if the id is unknown.
    pub fn remove_referencer(&mut self, id: HookId) -> bool {
        let before = self.referencers.len();
        self.referencers.retain(|(i, _)| *i != id);
        before != self.referencers.len()
    }
}

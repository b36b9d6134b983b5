//! Saves into a store (the `save/store.rs` room's doors into the heap):
//! persistent ids, incremental saves, loads by id.

use crate::array::ObjectRef;
use crate::handle::AnyObj;
use crate::save::capture;
use crate::save::ids::Tracker;
use crate::save::store::{
    self, ChangeSet, SaveStore, StoreError, StoreLoaded, StoreMeta, StoreSaved,
};
use crate::save::{Capture, CaptureBudget, PersistentId, DEFAULT_ORIGIN, PURGE_WAIT};

use super::Heap;

impl Heap {
    /// The persistent id of a live object, if it has been saved into a store
    /// (or loaded from one).
    ///
    /// ```
    /// use coreobject::save::MemStore;
    /// use coreobject::{Heap, Object};
    /// #[derive(Object, Default)]
    /// #[object(save)]
    /// struct Coin;
    /// let mut heap = Heap::new();
    /// let c = heap.spawn(Coin).root().create().unwrap();
    /// assert_eq!(heap.persistent_id(c), None);
    /// heap.save_store(&mut MemStore::default()).unwrap();
    /// let id = heap.persistent_id(c).unwrap();
    /// assert_eq!(heap.find_persistent(id), Some(c.any()));
    /// ```
    pub fn persistent_id(&self, obj: impl Into<AnyObj>) -> Option<PersistentId> {
        let h = obj.into();
        self.object_ref(h)?;
        PersistentId::from_bits(self.store.id_of(h.index(), h.serial())?)
    }

    /// The live object with persistent id `id`, if any.
    pub fn find_persistent(&self, id: PersistentId) -> Option<AnyObj> {
        let &index = self.store.by_id.get(&id.bits())?;
        let e = self.store.entries.get(index as usize)?;
        let serial = std::num::NonZeroU32::new(e.serial)?;
        let h = AnyObj::new(index, serial);
        (e.id == id.bits() && self.object_ref(h).is_some()).then_some(h)
    }

    /// Saves what changed since the last save into `store`, in one commit:
    /// the objects created or changed (written through `get_mut`, or of an
    /// interior-mutable class), the deletion of those freed, the roots and
    /// the class table (see [`save::store`](crate::save)). The first save
    /// into a store writes every object.
    ///
    /// ```
    /// use coreobject::save::{MemStore, SaveStore};
    /// use coreobject::{Heap, Object};
    /// #[derive(Object, Default)]
    /// #[object(save)]
    /// struct Coin { value: u32 }
    /// let mut heap = Heap::new();
    /// let a = heap.spawn(Coin { value: 1 }).root().create().unwrap();
    /// let b = heap.spawn(Coin { value: 2 }).root().create().unwrap();
    /// let mut store = MemStore::default();
    /// heap.save_store(&mut store).unwrap();
    /// heap[a].value = 10;
    /// heap.remove_from_root(b).unwrap();
    /// heap.collect();
    /// let s = heap.save_store(&mut store).unwrap();
    /// assert_eq!((s.written, s.deleted), (1, 1));
    /// assert_eq!(store.len(), 1);
    /// ```
    pub fn save_store(&mut self, store: &mut dyn SaveStore) -> Result<StoreSaved, StoreError> {
        let meta = store.meta()?;
        let (change, saved) = self.capture(meta.as_ref())?;
        store.commit(&change)?;
        Ok(saved)
    }

    /// The game thread's half of a save, in one go: encodes what changed
    /// since the last capture into a change set that owns its bytes, to be
    /// committed with [`SaveStore::commit`] on any thread while the heap
    /// runs on. `meta` is the store's ([`SaveStore::meta`], or the previous
    /// change set's `meta`); `None` for a new store. The change set is the
    /// heap as it is now: an object changed after this call is captured
    /// again by the next one. If the commit fails, call
    /// [`forget_store`](Self::forget_store) so that the next save writes
    /// everything again. [`capture_begin`](Self::capture_begin) spreads the
    /// same work over frames.
    ///
    /// ```
    /// use coreobject::save::{MemStore, SaveStore};
    /// use coreobject::{Heap, Object};
    /// #[derive(Object, Default)]
    /// #[object(save)]
    /// struct Coin { value: u32 }
    /// let mut heap = Heap::new();
    /// let c = heap.spawn(Coin { value: 1 }).root().create().unwrap();
    /// let mut store = MemStore::default();
    /// let (change, _) = heap.capture(None).unwrap();
    /// heap[c].value = 2; // after the capture: in the next save
    /// let writer = std::thread::spawn(move || {
    ///     store.commit(&change).unwrap();
    ///     store
    /// });
    /// let mut store = writer.join().unwrap();
    /// assert_eq!(heap.save_store(&mut store).unwrap().written, 1);
    /// ```
    pub fn capture(
        &mut self,
        meta: Option<&StoreMeta>,
    ) -> Result<(ChangeSet, StoreSaved), StoreError> {
        let mut cap = self.capture_begin(meta);
        loop {
            if let Some(done) = self.capture_step(&mut cap, CaptureBudget::Unbounded)? {
                return Ok(done);
            }
        }
    }

    /// Begins a capture to be spread over frames, like a GC slice: advance
    /// it with [`capture_step`](Self::capture_step) once a frame until that
    /// returns the change set. The change set is the heap as of the frame
    /// the final step ran in (see [`Capture`] for how: objects written
    /// after their capture are captured again by the final step, whose cost
    /// is what the mutator touched meanwhile). Beginning costs the number of
    /// slots changed since the last capture, not the table.
    ///
    /// ```
    /// use coreobject::save::{CaptureBudget, MemStore, SaveStore};
    /// use coreobject::{Heap, Object};
    /// #[derive(Object, Default)]
    /// #[object(save)]
    /// struct Coin { value: u32 }
    /// let mut heap = Heap::new();
    /// let coins: Vec<_> = (0..100)
    ///     .map(|v| heap.spawn(Coin { value: v }).root().create().unwrap())
    ///     .collect();
    /// let mut store = MemStore::default();
    /// let mut cap = heap.capture_begin(None);
    /// let change = loop {
    ///     if let Some((change, _)) = heap.capture_step(&mut cap, CaptureBudget::Slots(10)).unwrap() {
    ///         break change;
    ///     }
    ///     heap[coins[0]].value = 1000; // the game runs on between steps
    /// };
    /// assert!(cap.steps() > 10);
    /// store.commit(&change).unwrap(); // on any thread
    /// let mut copy = Heap::new();
    /// copy.load_store(&mut store, None).unwrap();
    /// assert_eq!(copy.iter().filter_map(|o| o.downcast::<Coin>().map(|c| c.value)).max(), Some(1000));
    /// ```
    pub fn capture_begin(&mut self, meta: Option<&StoreMeta>) -> Capture {
        let mut meta = meta
            .cloned()
            .unwrap_or_else(|| StoreMeta::new(DEFAULT_ORIGIN));
        meta.next_serial = meta.next_serial.max(self.store.next).max(1);
        // Inners follow an outer whose saved state flips.
        self.ensure_inners();
        let hw = self.array.high_water();
        let tr = &mut self.store;
        tr.epoch += 1;
        let mut cap = Capture::new(self.array.tag(), tr.epoch, meta, hw);
        let mut list = Vec::new();
        self.store_dirty.take(hw, &mut list, &mut cap.subtree);
        if tr.tracking {
            cap.queue = list;
            cap.range = tr.high_water.min(hw)..hw;
        } else {
            // Every slot, and every slot an id was kept for.
            tr.roots.clear();
            tr.interior.clear();
            cap.range = 0..hw.max(tr.entries.len() as u32);
            tr.tracking = true;
        }
        tr.high_water = hw;
        cap
    }

    /// Advances a capture by about `budget` (see [`CaptureBudget`]);
    /// returns the change set once the final step ran, and `None` before.
    /// The final step runs in the step after the one that looked at the
    /// last slot found at the start, and looks at every slot marked since
    /// (see [`Capture`]). Fails with [`StoreError::StaleCapture`] for a
    /// capture of another heap or one superseded; an encoding error ends
    /// the capture (begin another after [`forget_store`](Self::forget_store)).
    pub fn capture_step(
        &mut self,
        cap: &mut Capture,
        budget: CaptureBudget,
    ) -> Result<Option<(ChangeSet, StoreSaved)>, StoreError> {
        if cap.tag != self.array.tag() || cap.epoch != self.store.epoch {
            return Err(StoreError::StaleCapture);
        }
        cap.steps += 1;
        if !cap.last {
            let mut tr = std::mem::take(&mut self.store);
            let res = capture::work(self, &mut tr, cap, budget);
            self.store = tr;
            let done = res?;
            if !cap.drained() || (done > 0 && budget != CaptureBudget::Unbounded) {
                return Ok(None);
            }
            cap.last = true;
        }
        // The final step.
        if self.array.condemned.active {
            if cap.waited < PURGE_WAIT {
                cap.waited += 1;
                return Ok(None);
            }
            cap.range = 0..self.array.high_water();
        }
        let hw = self.array.high_water();
        let mut list = Vec::new();
        self.store_dirty.take(hw, &mut list, &mut cap.subtree);
        cap.subtree.sort_unstable();
        list.extend(cap.high_water..hw);
        list.extend(self.store.interior.iter().copied());
        list.sort_unstable();
        list.dedup();

        cap.queue = list;
        cap.next = 0;
        let mut tr = std::mem::take(&mut self.store);
        let res = capture::work(self, &mut tr, cap, CaptureBudget::Unbounded);
        let out = res.map(|_| capture::finish(&mut tr, cap));
        tr.high_water = hw;
        tr.epoch += 1;
        self.store = tr;
        out.map(Some)
    }

    /// Forgets which objects are in the store (keeping their ids): the next
    /// save writes every object again.
    pub fn forget_store(&mut self) {
        for e in &mut self.store.entries {
            e.stored = false;
        }
        self.store.count = 0;
        self.store.tracking = false;
        self.store.epoch += 1;
    }

    /// Loads the last save in `store` into this heap (every object, or the
    /// outer subtree under `root`): new objects with the saved names,
    /// outers, roots and persistent ids, every handle patched. A handle to
    /// an object not in the store (or not in the subtree) loads as a handle
    /// that never resolves. On error the heap is unchanged.
    pub fn load_store(
        &mut self,
        store: &mut dyn SaveStore,
        root: Option<PersistentId>,
    ) -> Result<StoreLoaded, StoreError> {
        let mut tr: Tracker = std::mem::take(&mut self.store);
        tr.epoch += 1;
        let res = store::load(self, &mut tr, store, root);
        self.store = tr;
        res
    }

    /// The object in slot `index`, if any, and whether `get` hides it
    /// (garbage, being destroyed, condemned).
    pub(crate) fn store_slot(&self, index: u32) -> Option<(ObjectRef<'_>, bool)> {
        let o = self.array.slot(&self.names, index)?;
        let hidden = self.array.hides(index, o.flags());
        Some((o, hidden))
    }

    /// Starts loading slot `index`'s table item (or, with `object`, the
    /// object it points at): a hint for a capture's next slots.
    #[inline]
    pub(crate) fn store_prefetch(&self, index: u32, object: bool) {
        // Only the index matters to a prefetch.
        let h = AnyObj::new(index, std::num::NonZeroU32::MIN);
        if object {
            self.array.prefetch_object(h);
        } else {
            self.array.prefetch_item(h);
        }
    }

    /// Appends the slots of `outer`'s inners (from the outer index, which
    /// a capture turns on) to `out`.
    pub(crate) fn store_inners(&self, outer: AnyObj, out: &mut Vec<u32>) {
        if self.inners_on.load(std::sync::atomic::Ordering::Acquire) {
            out.extend(
                self.inners
                    .lock()
                    .of(outer.to_bits())
                    .iter()
                    .map(|h| h.index()),
            );
        }
    }

    /// Clears slot `index`'s changed-since-the-last-save flag (its object
    /// was just captured).
    pub(crate) fn store_unchange(&self, index: u32) {
        self.array.at(index).clear(crate::array::flags::CHANGED);
    }
}

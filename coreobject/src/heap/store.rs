//! Saves into a store (the `save/store.rs` room's doors into the heap):
//! persistent ids, incremental saves, loads by id.

use crate::handle::AnyObj;
use crate::save::ids::Tracker;
use crate::save::store::{
    self, ChangeSet, SaveStore, StoreError, StoreLoaded, StoreMeta, StoreSaved,
};
use crate::save::{PersistentId, DEFAULT_ORIGIN};

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

    /// The game thread's half of a save: encodes what changed since the last
    /// capture into a change set that owns its bytes, to be committed with
    /// [`SaveStore::commit`] on any thread while the heap runs on. `meta` is
    /// the store's ([`SaveStore::meta`], or the previous change set's
    /// `meta`); `None` for a new store. The change set is the heap as it is
    /// now: an object changed after this call is captured again by the next
    /// one. If the commit fails, call [`forget_store`](Self::forget_store)
    /// so that the next save writes everything again.
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
        let fresh = StoreMeta::new(DEFAULT_ORIGIN);
        let meta = meta.unwrap_or(&fresh);
        let mut tr = std::mem::take(&mut self.store);
        let res = store::capture(self, &mut tr, meta);
        self.store = tr;
        res
    }

    /// Forgets which objects are in the store (keeping their ids): the next
    /// save writes every object again.
    pub fn forget_store(&mut self) {
        for e in &mut self.store.entries {
            e.stored = false;
        }
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
        let res = store::load(self, &mut tr, store, root);
        self.store = tr;
        res
    }

    /// Each slot holding an object: index, serial, item flags, whether
    /// `get` hides it (garbage, being destroyed, condemned). One sequential
    /// pass over the table, no object's memory read.
    pub(crate) fn store_scan(&self, mut f: impl FnMut(u32, u32, u32, bool)) {
        let array = &self.array;
        array.for_each_allocated(array.high_water(), |i, item| {
            if item.object().is_some() {
                let fl = item.flags();
                f(i, item.serial(), fl, array.hides(i, fl));
            }
        });
    }

    /// Clears slot `index`'s changed-since-the-last-save flag (its object
    /// was just captured).
    pub(crate) fn store_unchange(&self, index: u32) {
        self.array.at(index).clear(crate::array::flags::CHANGED);
    }
}

//! Saving and loading (the `save` module's doors into the heap): `save`,
//! `load`, `restore`, and what they need of the heap's insides.

use std::io::{Read, Write};
use std::sync::Arc;

use crate::array::{Chunks, ObjectRef};
use crate::class::Object;
use crate::config::HeapConfig;
use crate::error::Error;
use crate::handle::{AnyObj, Obj};
use crate::save::{self, LoadError, LoadOptions, Loaded, SaveError, SaveOptions, Saved, Selection};
use crate::serial::{self, TagLease};

use super::Heap;

impl Heap {
    /// Saves `selection` to `writer` as a binary package (see
    /// [`save`](crate::save) for what is saved): a [`Selection`], or a
    /// handle (its outer subtree), or a list of handles (that set). Returns the saved objects in
    /// export order and the objects outside the save they refer to. Nothing
    /// is written unless the whole package could be built.
    ///
    /// ```
    /// use coreobject::save::Selection;
    /// use coreobject::{Heap, Object};
    /// #[derive(Object, Default)]
    /// #[object(save)]
    /// struct Coin { value: u32 }
    /// let heap = Heap::new();
    /// let c = heap.spawn(Coin { value: 5 }).root().create().unwrap();
    /// let mut bytes = Vec::new();
    /// let saved = heap.save(Selection::all(), &mut bytes).unwrap();
    /// assert_eq!(saved.exports, [c.any()]);
    /// assert_eq!(saved.bytes, bytes.len());
    /// ```
    pub fn save(
        &self,
        selection: impl Into<Selection>,
        writer: impl Write,
    ) -> Result<Saved, SaveError> {
        self.save_with(selection, &SaveOptions::default(), writer)
    }

    /// [`save`](Self::save) with options: the JSON form, weak handles to
    /// objects outside the save written as none.
    ///
    /// ```
    /// use coreobject::save::{SaveOptions, Selection};
    /// use coreobject::{Heap, Object};
    /// #[derive(Object, Default)]
    /// #[object(save)]
    /// struct Coin { value: u32 }
    /// let heap = Heap::new();
    /// heap.spawn(Coin { value: 5 }).name("Gold").create().unwrap();
    /// let mut text = Vec::new();
    /// heap.save_with(Selection::all(), &SaveOptions::json(), &mut text).unwrap();
    /// let text = String::from_utf8(text).unwrap();
    /// assert!(text.contains("\"Gold\"") && text.contains("\"value\""));
    /// ```
    pub fn save_with(
        &self,
        selection: impl Into<Selection>,
        options: &SaveOptions,
        mut writer: impl Write,
    ) -> Result<Saved, SaveError> {
        let (pkg, mut saved) = save::build(self, &selection.into(), options)?;
        let mut out = Vec::with_capacity(16 * pkg.exports.len() + 1024);
        match options.format {
            save::Format::Json => {
                pkg.write_json(&mut out)
                    .map_err(|message| SaveError::Encode {
                        class: "",
                        field: "",
                        message,
                    })?;
                writer.write_all(&out)?;
                saved.bytes = out.len();
            }
            _ => {
                debug_assert!(pkg.payloads_in_order());
                pkg.write_binary_head(&mut out);
                writer.write_all(&out)?;
                writer.write_all(&pkg.data)?;
                saved.bytes = out.len() + pkg.data.len();
            }
        }
        writer.flush()?;
        Ok(saved)
    }

    /// Instantiates a package into this heap: new objects, every handle
    /// patched, imports found by path (see [`save`](crate::save)). Returns
    /// the new object of each export and the imports found nowhere. On error
    /// the heap is unchanged.
    ///
    /// ```
    /// use coreobject::save::Selection;
    /// use coreobject::{Heap, Obj, Object};
    /// #[derive(Object, Default)]
    /// #[object(save)]
    /// struct Node { next: Option<Obj<Node>>, value: i32 }
    /// let mut heap = Heap::new();
    /// let a = heap.create(Node { next: None, value: 1 });
    /// let b = heap.create(Node { next: Some(a), value: 2 });
    /// heap[a].next = Some(b); // a cycle
    /// let mut bytes = Vec::new();
    /// heap.save(Selection::set([a, b]), &mut bytes).unwrap();
    ///
    /// let loaded = heap.load(&bytes[..]).unwrap(); // a second copy
    /// let a2 = heap.downcast::<Node>(loaded.objects[0]).unwrap();
    /// let b2 = heap[a2].next.unwrap();
    /// assert_eq!((heap[a2].value, heap[b2].value), (1, 2));
    /// assert_eq!(heap[b2].next, Some(a2));
    /// assert_ne!(a2, a);
    /// ```
    pub fn load(&mut self, reader: impl Read) -> Result<Loaded, LoadError> {
        self.load_with(reader, &mut LoadOptions::default())
    }

    /// [`load`](Self::load) with options: a resolver for imports not found by
    /// path.
    pub fn load_with(
        &mut self,
        mut reader: impl Read,
        options: &mut LoadOptions<'_>,
    ) -> Result<Loaded, LoadError> {
        let mut input = Vec::new();
        reader.read_to_end(&mut input)?;
        save::instantiate(self, input, options)
    }

    /// Restores a whole-heap package ([`Selection::All`]) into a new heap,
    /// exactly: same indices and serials, roots, pool, names, outers and
    /// clusters (see [`save`](crate::save) for the heap tag).
    ///
    /// ```
    /// use coreobject::save::Selection;
    /// use coreobject::{Heap, Obj, Object};
    /// #[derive(Object, Default)]
    /// #[object(save)]
    /// struct Node { next: Option<Obj<Node>> }
    /// let heap = Heap::new();
    /// let a = heap.spawn(Node::default()).root().create().unwrap();
    /// let mut bytes = Vec::new();
    /// heap.save(Selection::all(), &mut bytes).unwrap();
    /// drop(heap);
    ///
    /// let heap = Heap::restore(&bytes[..]).unwrap();
    /// assert!(heap.get(a).is_some()); // the old handle resolves again
    /// assert!(heap.is_rooted(a));
    /// ```
    pub fn restore(reader: impl Read) -> Result<Heap, LoadError> {
        Heap::restore_with(reader, None)
    }

    /// [`restore`](Self::restore) with settings for the new heap (its object
    /// cap, pool size and generation width must hold what was saved);
    /// `None`: the saved heap's cap, pool size and generation width with
    /// [`HeapConfig::DEFAULT`]'s other settings.
    pub fn restore_with(
        mut reader: impl Read,
        config: Option<HeapConfig>,
    ) -> Result<Heap, LoadError> {
        let mut input = Vec::new();
        reader.read_to_end(&mut input)?;
        save::restore(input, config)
    }

    /// A handle of the saved heap, as this restored heap names the same
    /// object: the same handle when the restore took the saved heap's tag,
    /// else the same index and generation under this heap's tag. A handle
    /// that then names no live object here is returned unchanged. Typed
    /// handles: `heap.downcast::<T>(heap.rehome(h.any()))`.
    ///
    /// ```
    /// use coreobject::save::Selection;
    /// use coreobject::{Heap, Object};
    /// #[derive(Object, Default)]
    /// #[object(save)]
    /// struct Coin;
    /// let heap = Heap::new();
    /// let c = heap.spawn(Coin).root().create().unwrap();
    /// let mut bytes = Vec::new();
    /// heap.save(Selection::all(), &mut bytes).unwrap();
    /// let copy = Heap::restore(&bytes[..]).unwrap(); // `heap` still holds its tag
    /// assert!(copy.get(c).is_none());
    /// let c2 = copy.downcast::<Coin>(copy.rehome(c.any())).unwrap();
    /// assert_eq!(c2.index(), c.index());
    /// ```
    pub fn rehome(&self, h: AnyObj) -> AnyObj {
        let serial = serial::make(self.tag(), serial::generation(h.serial()));
        match std::num::NonZeroU32::new(serial).map(|s| AnyObj::new(h.index(), s)) {
            Some(here) if self.contains(here) => here,
            _ => h,
        }
    }

    // ----- for `save/` ------------------------------------------------------------

    /// The live object in slot `h`, if `h` names it.
    pub(crate) fn object_ref(&self, h: AnyObj) -> Option<ObjectRef<'_>> {
        let o = self.array.slot(&self.names, h.index())?;
        (o.id() == h && !self.array.hides(h.index(), o.flags())).then_some(o)
    }

    /// The name index, read-locked (no name may be taken while it is held).
    pub(crate) fn save_names(&self) -> parking_lot::RwLockReadGuard<'_, crate::names::Names> {
        self.names.read()
    }

    pub(crate) fn save_chunks(&self) -> Arc<Chunks> {
        self.array.chunks().clone()
    }

    pub(crate) fn save_lease(&self) -> TagLease {
        self.array.lease()
    }

    pub(crate) fn save_high_water(&self) -> u32 {
        self.array.high_water()
    }

    /// Each used slot: index, serial, whether it holds an object.
    pub(crate) fn save_used_slots(&self, f: impl FnMut(u32, u32, bool)) {
        self.array.for_each_used_slot(f)
    }

    /// Reserves `n` slots, lowest first; gives them back if the cap is hit.
    pub(crate) fn load_reserve(&mut self, n: usize) -> Result<Vec<u32>, LoadError> {
        // Other threads' cached indices first go back on the free list.
        self.array.sync();
        let mut got = Vec::with_capacity(n);
        for _ in 0..n {
            match self.array.reserve() {
                Some(i) => got.push(i),
                None => {
                    self.array.unreserve(&got);
                    return Err(LoadError::Cap(self.cap_error().to_string()));
                }
            }
        }
        self.array.sync();
        got.sort_unstable();
        Ok(got)
    }

    /// Gives back reserved slots (a load that failed).
    pub(crate) fn load_unreserve(&mut self, slots: &[u32]) {
        self.array.unreserve(slots);
    }

    /// The handle the object placed next in reserved slot `index` gets.
    pub(crate) fn load_next_handle(&self, index: u32) -> AnyObj {
        self.array.next_handle(index)
    }

    /// Names objects about to be placed in their slots (`wanted`: handle,
    /// outer, name base, stored number). On failure takes back the names
    /// given and returns the position of the one refused.
    pub(crate) fn load_names(
        &mut self,
        wanted: &[(AnyObj, Option<AnyObj>, &str, u32)],
    ) -> Result<(), (usize, Error)> {
        let names = self.names.get_mut();
        for (k, &(h, outer, base, number)) in wanted.iter().enumerate() {
            // A key is inserted right after its claim (nothing may change the
            // index in between); the slot is filled later, under `&mut self`.
            match names.claim_parts(outer, base, number) {
                Ok(key) => names.insert(h, key),
                Err(e) => {
                    for (h, ..) in &wanted[..k] {
                        names.remove(h.index());
                    }
                    return Err((k, e));
                }
            }
        }
        self.name_hint.update(names);
        Ok(())
    }

    /// Places a decoded object in a reserved (or claimed) slot, with item
    /// flags `extra`. No listener hears of it yet.
    pub(crate) fn load_place<T: Object>(
        &self,
        index: u32,
        value: T,
        outer: Option<AnyObj>,
        extra: u32,
    ) -> Obj<T> {
        self.publish_quiet(index, value, outer, extra)
    }

    /// Notifies create listeners of loaded objects, once the graph is whole.
    pub(crate) fn load_notify(&self, objects: &[AnyObj]) {
        if !self.listeners.create.is_empty() {
            for &o in objects {
                self.notify_create(o);
            }
        }
    }

    /// Makes a GC cluster of `members` (the root first) as they were saved;
    /// members that may not join one now are left out. `false` if the root
    /// may not be a cluster's root.
    pub(crate) fn load_cluster(&mut self, members: &[AnyObj]) -> bool {
        let Some((&root, rest)) = members.split_first() else {
            return false;
        };
        if self.gc.phase() != crate::Phase::Idle || self.clusterable(root, true).is_err() {
            return false;
        }
        let tag = root.index() + 1;
        self.array.at(root.index()).set_cluster_root(tag);
        let mut kept = vec![root];
        for &m in rest {
            if self.clusterable(m, false).is_ok() {
                self.array.at(m.index()).set_cluster_root(tag);
                kept.push(m);
            }
        }
        let clusters = self.clusters.get_mut();
        clusters.joined.extend(kept.iter().map(|m| m.index()));
        let c = crate::cluster::Cluster::new(kept, &mut clusters.seen);
        clusters.by_root.insert(root.index(), c);
        // Its references out are gathered before the next cycle.
        clusters.stale.push(root.index());
        true
    }

    /// A new heap for an exact restore, with the tag lease already claimed.
    /// (Check its settings first, with [`restore_check`](Self::restore_check).)
    pub(crate) fn restore_heap(config: HeapConfig, lease: TagLease) -> Heap {
        Heap::with_lease(config, lease)
    }

    /// Refuses settings a heap cannot be made with.
    pub(crate) fn restore_check(config: &HeapConfig) -> Result<(), Error> {
        Heap::check_config(config)
    }

    /// Claims slot `index` for an object with `serial` (exact restore).
    pub(crate) fn restore_claim(&mut self, index: u32, serial: u32) -> Result<(), Error> {
        self.array.claim_with_serial(index, serial)
    }

    /// Makes `index` a free slot whose next serial is `serial` (exact restore).
    pub(crate) fn restore_free(&mut self, index: u32, serial: u32) -> Result<(), Error> {
        self.array.restore_free(index, serial)
    }

    /// Closes the restored pool at `end`.
    pub(crate) fn restore_pool(&mut self, end: u32) {
        let pool = self.array.pool_mut();
        pool.end = end;
        pool.open = false;
    }
}

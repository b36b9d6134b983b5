//! Resolving handles: `get`, `get_mut` (the one mutation door and write barrier), class and outer queries.

use std::marker::PhantomData;
use std::num::NonZeroU32;
use std::ops::Index;

use crate::array::{flags, ObjectRef};
use crate::class::{Class, Object};
use crate::error::ResolveError;
use crate::handle::{AnyObj, Handle, Obj, Weak};
use crate::trace::Data;

use super::{index_failed, Heap};
use crate::array::Item;
use crate::cluster::Clusters;
use crate::gc::Collector;
use crate::save::ids::Dirty;

/// What a write through `&mut T` (or a move to another outer) tells the
/// heap about the object in slot `index`: the collector's write barrier, the
/// change mark saves into a store read, and its GC cluster, whose references
/// out are gathered again before the next cycle.
#[inline(always)]
pub(super) fn note_write(
    gc: &mut Collector,
    clusters: &mut Clusters,
    dirty: &mut Dirty,
    item: &Item,
    index: u32,
) {
    gc.barrier(item, index);
    note_changed(dirty, item, index);
    let cluster = item.cluster_root();
    if cluster != 0 {
        clusters.changed(cluster);
    }
}

/// Marks the object changed since the last save into a store (once per
/// save: a flag test on the fast path), and the first time puts its slot in
/// the set the next capture looks at. Objects are born changed (their slot
/// is in that set from their creation), so a new object's first write
/// finds the flag set; the `&mut Dirty` says the caller holds `&mut Heap`.
#[inline(always)]
pub(super) fn note_changed(dirty: &mut Dirty, item: &Item, index: u32) {
    if item.flags() & flags::CHANGED == 0 {
        first_change(dirty, item, index);
    }
}

#[cold]
#[inline(never)]
fn first_change(dirty: &mut Dirty, item: &Item, index: u32) {
    // The caller holds `&mut Heap`: no other thread sets this item's flags
    // or the set's bits meanwhile, so neither needs a locked instruction.
    item.set_exclusive(flags::CHANGED);
    dirty.mark_mut(index);
}

/// Handles [`GetMany`] reads ahead of the one it resolves: the item of the
/// farthest is requested, the object of the one halfway is.
const LOOKAHEAD: usize = 16;

/// The iterator [`Heap::get_many`] returns: one `Option<&T>` per handle, in
/// order, as [`Heap::get`] gives it.
#[must_use = "iterators are lazy"]
pub struct GetMany<'h, T, I> {
    heap: &'h Heap,
    handles: I,
    /// The handles read ahead, a ring: `len` of them from `head`.
    ring: [AnyObj; LOOKAHEAD],
    head: usize,
    len: usize,
    _target: PhantomData<fn() -> T>,
}

impl<T, I> std::fmt::Debug for GetMany<'_, T, I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GetMany")
            .field("read_ahead", &self.len)
            .finish_non_exhaustive()
    }
}

impl<'h, H, I> Iterator for GetMany<'h, H::Target, I>
where
    H: Handle,
    H::Target: Object,
    I: Iterator<Item = H>,
{
    type Item = Option<&'h H::Target>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let array = &self.heap.array;
        // Keep the ring full: each handle read in gets its item requested;
        // the one read in `LOOKAHEAD / 2` handles ago, whose item has had
        // time to arrive, gets its object requested.
        while self.len < LOOKAHEAD {
            let Some(h) = self.handles.next() else { break };
            let h = h.any_obj();
            array.prefetch_item(h);
            self.ring[(self.head + self.len) % LOOKAHEAD] = h;
            self.len += 1;
            if self.len > LOOKAHEAD / 2 {
                array.prefetch_object(
                    self.ring[(self.head + self.len - 1 - LOOKAHEAD / 2) % LOOKAHEAD],
                );
            }
        }
        if self.len == 0 {
            return None;
        }
        let h = self.ring[self.head];
        self.head = (self.head + 1) % LOOKAHEAD;
        self.len -= 1;
        Some(array.resolve::<H::Target>(h, flags::DEAD).ok())
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let (lo, hi) = self.handles.size_hint();
        (
            lo.saturating_add(self.len),
            hi.and_then(|h| h.checked_add(self.len)),
        )
    }
}

impl Heap {
    /// Resolves many handles, each as [`get`](Self::get) would, reading
    /// ahead: while one handle resolves, the table entries and objects of
    /// the next few are already on their way from memory. Over handles
    /// spread across a large heap, this overlaps the two dependent loads of
    /// each lookup (the table entry, then the object) with the lookups
    /// after it.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// #[derive(Object, Default)]
    /// struct Coin(u32);
    /// let mut heap = Heap::new();
    /// let coins: Vec<_> = (0..100).map(|i| heap.create(Coin(i))).collect();
    /// heap.add_to_root(coins[7]).unwrap();
    /// heap.collect().unwrap(); // frees all but coin 7
    /// let found: Vec<Option<u32>> = heap.get_many(coins.iter().copied()).map(|c| c.map(|c| c.0)).collect();
    /// assert_eq!(found.len(), 100);
    /// assert_eq!(found[7], Some(7));
    /// assert_eq!(found.iter().flatten().count(), 1);
    /// ```
    pub fn get_many<H, I>(&self, handles: I) -> GetMany<'_, H::Target, I::IntoIter>
    where
        H: Handle,
        H::Target: Object,
        I: IntoIterator<Item = H>,
    {
        let filler = AnyObj::new(0, NonZeroU32::MIN);
        GetMany {
            heap: self,
            handles: handles.into_iter(),
            ring: [filler; LOOKAHEAD],
            head: 0,
            len: 0,
            _target: PhantomData,
        }
    }

    /// Resolves a handle: `None` if the object is gone or garbage, or the
    /// handle is from another heap (or names a slot restored with another
    /// class). The class is not compared: a typed handle's serial names an
    /// object of its class for the slot's whole life.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// #[derive(Object, Default)]
    /// struct Coin(u32);
    /// let heap = Heap::new();
    /// let c = heap.create(Coin(5));
    /// assert_eq!(heap.get(c).map(|c| c.0), Some(5));
    /// let other = Heap::new();
    /// assert!(other.get(c).is_none(), "foreign handle");
    /// ```
    #[inline]
    pub fn get<H: Handle>(&self, h: H) -> Option<&H::Target>
    where
        H::Target: Object,
    {
        self.array.resolve(h.any_obj(), flags::DEAD).ok()
    }

    /// Like [`get`](Self::get), but says why a handle does not resolve.
    ///
    /// ```
    /// # use coreobject::{Heap, Object, ResolveError};
    /// # #[derive(Object, Default)] struct Coin;
    /// let a = Heap::new();
    /// let b = Heap::new();
    /// let c = a.create(Coin);
    /// assert!(matches!(b.try_get(c), Err(ResolveError::Foreign { .. })));
    /// ```
    #[inline]
    pub fn try_get<H: Handle>(&self, h: H) -> Result<&H::Target, ResolveError>
    where
        H::Target: Object,
    {
        self.array.resolve(h.any_obj(), flags::DEAD)
    }

    /// Resolves a handle even if its object is marked as garbage (Unreal's
    /// `bEvenIfPendingKill`). Objects already being destroyed still give `None`.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Coin;
    /// let heap = Heap::new();
    /// let c = heap.create(Coin);
    /// heap.mark_as_garbage(c).unwrap();
    /// assert!(heap.get(c).is_none());
    /// assert!(heap.get_even_if_garbage(c).is_some());
    /// ```
    pub fn get_even_if_garbage<H: Handle>(&self, h: H) -> Option<&H::Target>
    where
        H::Target: Object,
    {
        self.array.resolve(h.any_obj(), flags::UNREACHABLE).ok()
    }

    /// Exclusive access to an object: the one door for mutation, which an
    /// incremental collector uses as its write barrier.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// #[derive(Object, Default)]
    /// struct Door { open: bool }
    /// let mut heap = Heap::new();
    /// let d = heap.create(Door::default());
    /// heap.get_mut(d).unwrap().open = true;
    /// assert!(heap[d].open);
    /// ```
    #[inline]
    pub fn get_mut<H: Handle>(&mut self, h: H) -> Option<&mut H::Target>
    where
        H::Target: Object,
    {
        self.try_get_mut(h).ok()
    }

    /// The one door for mutation, saying why a handle does not resolve:
    /// `get_mut` and `heap[h]` both pass through here, and so through the
    /// incremental collector's write barrier.
    #[inline]
    pub fn try_get_mut<H: Handle>(&mut self, h: H) -> Result<&mut H::Target, ResolveError>
    where
        H::Target: Object,
    {
        let h = h.any_obj();
        let (v, item) = self.array.resolve_mut::<H::Target>(h)?;
        note_write(
            &mut self.gc,
            self.clusters.get_mut(),
            &mut self.store_dirty,
            item,
            h.index(),
        );
        Ok(v)
    }

    /// The data door: exclusive access to the fields of an object that
    /// cannot hold strong handles (its class's [`Data`] view), **without**
    /// the write barrier. Moving an actor this way costs the collector
    /// nothing: the object joins no re-scan list and no remembered set, and
    /// its GC cluster keeps its gathered references. `None` when the handle
    /// does not resolve, as for [`get_mut`](Self::get_mut).
    ///
    /// ```
    /// use coreobject::{Data, Heap, Object};
    /// #[derive(Object, Data, Default)]
    /// struct Actor { pos: [f32; 2] }
    /// let mut heap = Heap::new();
    /// let a = heap.create(Actor::default());
    /// heap.data_mut(a).unwrap().pos[1] = 4.0;
    /// assert_eq!(heap[a].pos, [0.0, 4.0]);
    /// ```
    #[inline]
    pub fn data_mut<H: Handle>(&mut self, h: H) -> Option<<H::Target as Data>::View<'_>>
    where
        H::Target: Object + Data,
    {
        self.try_data_mut(h).ok()
    }

    /// [`data_mut`](Self::data_mut), saying why a handle does not resolve.
    ///
    /// ```
    /// # use coreobject::{Data, Heap, Object, ResolveError};
    /// # #[derive(Object, Data, Default)] struct Actor { hp: u32 }
    /// let mut heap = Heap::new();
    /// let a = heap.create(Actor::default());
    /// heap.mark_as_garbage(a).unwrap();
    /// assert!(matches!(heap.try_data_mut(a), Err(ResolveError::Garbage(_))));
    /// ```
    #[inline]
    pub fn try_data_mut<H: Handle>(
        &mut self,
        h: H,
    ) -> Result<<H::Target as Data>::View<'_>, ResolveError>
    where
        H::Target: Object + Data,
    {
        // No barrier: the view reaches no field that can hold a handle, so
        // the object's references stay what marking and the remembered set
        // saw.
        let index = h.any_obj().index();
        let (v, item) = self.array.resolve_mut::<H::Target>(h.any_obj())?;
        note_changed(&mut self.store_dirty, item, index);
        Ok(v.data_view())
    }

    /// Exclusive access to several objects at once (slotmap's
    /// `get_disjoint_mut`): `None` if any handle does not resolve (as
    /// [`get_mut`](Self::get_mut) would give `None`) or two handles name
    /// the same object. Each object passes through the write barrier, as
    /// with `get_mut`.
    ///
    /// ```
    /// use coreobject::{Heap, Object};
    /// #[derive(Object, Default)]
    /// struct Account { balance: i64 }
    /// let mut heap = Heap::new();
    /// let a = heap.create(Account { balance: 100 });
    /// let b = heap.create(Account { balance: 5 });
    /// let [from, to] = heap.get_disjoint_mut([a, b]).unwrap();
    /// from.balance -= 30;
    /// to.balance += 30;
    /// assert_eq!((heap[a].balance, heap[b].balance), (70, 35));
    /// assert!(heap.get_disjoint_mut([a, a]).is_none(), "the same object twice");
    /// ```
    pub fn get_disjoint_mut<H: Handle, const N: usize>(
        &mut self,
        hs: [H; N],
    ) -> Option<[&mut H::Target; N]>
    where
        H::Target: Object,
    {
        let found = self
            .array
            .resolve_disjoint_mut::<H::Target, N>(hs.map(|h| h.any_obj()))?;
        Some(found.map(|(v, item, index)| {
            // What `try_get_mut` tells the heap, for each object.
            note_write(
                &mut self.gc,
                self.clusters.get_mut(),
                &mut self.store_dirty,
                item,
                index,
            );
            v
        }))
    }

    /// A view of any live object through an untyped handle: its class,
    /// outer, name, and its value once [downcast](ObjectRef::downcast).
    /// `None` where [`get`](Self::get) would give `None`.
    ///
    /// There is no `heap[any]`: indexing must return a reference to
    /// something the heap holds, and the value's type is known only at run
    /// time. Index with the typed handle instead ([`downcast`](Self::downcast)
    /// makes one), or use this view.
    ///
    /// ```
    /// use coreobject::{Heap, Object};
    /// #[derive(Object, Default)]
    /// struct Lamp { lit: bool }
    /// let heap = Heap::new();
    /// let any = heap.spawn(Lamp { lit: true }).name("Hall").create().unwrap().any();
    /// let view = heap.object(any).unwrap();
    /// assert_eq!(view.class().name(), "Lamp");
    /// assert_eq!(view.display_name(), "Hall");
    /// assert!(view.downcast::<Lamp>().unwrap().lit);
    /// ```
    pub fn object(&self, h: impl Into<AnyObj>) -> Option<ObjectRef<'_>> {
        let h = h.into();
        self.array.lookup(h, flags::DEAD).ok()?;
        self.array.slot(&self.names, h.index())
    }

    /// Whether the handle names a live (not garbage) object of any class.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Coin;
    /// let heap = Heap::new();
    /// let c = heap.create(Coin);
    /// assert!(heap.contains(c));
    /// ```
    pub fn contains(&self, h: impl Into<AnyObj>) -> bool {
        self.array.lookup(h.into(), flags::DEAD).is_ok()
    }

    /// The strong handle for a live weak one (Unreal's `TWeakObjectPtr::Get`).
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Coin;
    /// let heap = Heap::new();
    /// let w = heap.create(Coin).downgrade();
    /// assert!(heap.upgrade(w).is_some());
    /// ```
    pub fn upgrade<T: Object>(&self, w: Weak<T>) -> Option<Obj<T>> {
        self.array.resolve::<T>(w.any(), flags::DEAD).ok()?;
        Some(w.to_obj())
    }

    /// Checks an untyped handle's class and returns the typed handle.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Coin;
    /// # #[derive(Object, Default)] struct Gem;
    /// let heap = Heap::new();
    /// let any = heap.create(Coin).any();
    /// assert!(heap.downcast::<Coin>(any).is_some());
    /// assert!(heap.downcast::<Gem>(any).is_none());
    /// ```
    pub fn downcast<T: Object>(&self, h: AnyObj) -> Option<Obj<T>> {
        self.array.downcast(h, flags::DEAD)
    }

    /// The class of a live object (Unreal's `GetClass`).
    pub fn class_of(&self, h: impl Into<AnyObj>) -> Option<&'static Class> {
        Some(
            self.array
                .header(h.into(), flags::UNREACHABLE)
                .ok()?
                .class(),
        )
    }

    /// The outer of a live object, if it has one that is still alive.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Coin;
    /// let heap = Heap::new();
    /// let purse = heap.create(Coin);
    /// let c = heap.spawn(Coin).outer(purse).create().unwrap();
    /// assert_eq!(heap.outer_of(c), Some(purse.any()));
    /// ```
    pub fn outer_of(&self, h: impl Into<AnyObj>) -> Option<AnyObj> {
        let outer = self.array.outer(h.into(), flags::UNREACHABLE).ok()??;
        self.array
            .lookup(outer, flags::UNREACHABLE)
            .ok()
            .map(|_| outer)
    }

    /// Whether the object is marked as garbage (or being destroyed).
    pub fn is_garbage(&self, h: impl Into<AnyObj>) -> bool {
        matches!(
            self.array.lookup(h.into(), flags::DEAD),
            Err(ResolveError::Garbage(_))
        )
    }
}

impl<T: Object> Index<Weak<T>> for Heap {
    type Output = T;
    /// `heap[weak]`, as `heap[obj]`: the object a weak handle names.
    ///
    /// # Panics
    /// If the handle does not resolve (its object was freed, is garbage, or
    /// belongs to another heap); the message says why. Use
    /// [`Heap::get`] or [`Heap::upgrade`] when that may happen.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// #[derive(Object, Default)]
    /// struct Target { hp: i32 }
    /// let heap = Heap::new();
    /// let w = heap.create(Target { hp: 7 }).downgrade();
    /// assert_eq!(heap[w].hp, 7);
    /// ```
    #[inline]
    #[track_caller]
    fn index(&self, h: Weak<T>) -> &T {
        match self.try_get(h) {
            Ok(v) => v,
            Err(e) => index_failed(h, e),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::array::flags;
    use crate::Heap;

    #[derive(crate::Object)]
    struct Cell(u32);

    /// Every way to create an object makes it born changed (its slot is in
    /// the capture's set from its creation), so that its first write
    /// through `get_mut` finds `CHANGED` set and takes no locked
    /// instruction; a write after the flag is cleared (as a capture does)
    /// sets it again. Fails with `CHANGED` left out of the birth flags.
    #[test]
    fn objects_are_born_changed_and_writes_mark_them_again() {
        let mut heap = Heap::new();
        let made = [
            heap.create(Cell(1)),
            heap.create_mut(Cell(2)),
            heap.spawn(Cell(3)).name("Three").create().unwrap(),
            heap.spawn_mut(Cell(4)).name("Four").create().unwrap(),
        ];
        for h in made {
            let f = heap.array.at(h.index()).flags();
            assert_ne!(f & flags::CHANGED, 0, "{h:?} born without CHANGED");
            heap.store_unchange(h.index());
            assert_eq!(heap.array.at(h.index()).flags() & flags::CHANGED, 0);
            heap.get_mut(h).unwrap().0 += 10;
            let f = heap.array.at(h.index()).flags();
            assert_ne!(f & flags::CHANGED, 0, "{h:?} written but not CHANGED");
        }
    }
}

//! Resolving handles: `get`, `get_mut` (the one mutation door and write barrier), class and outer queries.

use crate::array::flags;
use crate::class::{Class, Object};
use crate::error::ResolveError;
use crate::handle::{AnyObj, Handle, Obj, Weak};

use super::Heap;

impl Heap {
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
        self.gc.barrier(item, h.index());
        if item.flags() & flags::CHANGED == 0 {
            // Changed since the last save into a store (set once per save).
            item.set(flags::CHANGED);
        }
        let cluster = item.cluster_root();
        if cluster != 0 {
            // A member changes: its cluster's references out are gathered
            // again before the next cycle.
            self.clusters.get_mut().changed(cluster);
        }
        Ok(v)
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

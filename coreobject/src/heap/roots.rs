//! Roots, strong handles and garbage marks.

use crate::array::flags;
use crate::class::Object;
use crate::error::Error;
use crate::handle::{AnyObj, Obj};
use crate::strong::StrongObj;

use super::{Heap, ObjectFlags};

impl Heap {
    /// Adds an object to the root set (Unreal's `AddToRoot`).
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Coin;
    /// let mut heap = Heap::new();
    /// let c = heap.create(Coin);
    /// heap.add_to_root(c).unwrap();
    /// heap.collect().unwrap();
    /// assert!(heap.is_rooted(c));
    /// heap.remove_from_root(c).unwrap();
    /// heap.collect().unwrap();
    /// assert!(!heap.contains(c));
    /// ```
    pub fn add_to_root(&self, h: impl Into<AnyObj>) -> Result<(), Error> {
        let h = h.into();
        self.array.lookup(h, flags::DEAD)?;
        if self.array.at(h.index()).add_root() {
            self.array.list_root(h.index());
        }
        self.store_dirty.mark(h.index());
        Ok(())
    }

    /// Removes an object from the root set (Unreal's `RemoveFromRoot`).
    /// Class default objects stay rooted for the heap's life: removing one
    /// is refused with [`Error::Permanent`].
    ///
    /// ```
    /// # use coreobject::{Error, Heap, Object};
    /// # #[derive(Object, Default)] struct Coin;
    /// let heap = Heap::new();
    /// let cdo = heap.class_default::<Coin>().unwrap();
    /// assert_eq!(heap.remove_from_root(cdo), Err(Error::Permanent(cdo.any())));
    /// assert!(heap.is_rooted(cdo));
    /// ```
    pub fn remove_from_root(&self, h: impl Into<AnyObj>) -> Result<(), Error> {
        let h = h.into();
        self.array.lookup(h, flags::UNREACHABLE)?;
        let item = self.array.at(h.index());
        if item.flags() & flags::DEFAULT_OBJECT != 0 {
            return Err(Error::Permanent(h));
        }
        item.clear(flags::ROOT);
        self.store_dirty.mark(h.index());
        Ok(())
    }

    /// Whether the object is in the root set.
    pub fn is_rooted(&self, h: impl Into<AnyObj>) -> bool {
        let h = h.into();
        self.array.lookup(h, flags::UNREACHABLE).is_ok()
            && self.array.at(h.index()).flags() & flags::ROOT != 0
    }

    /// All of an object's item flags at once, for debugging. Answers for
    /// every allocated object, garbage and unreachable ones included (unlike
    /// [`get`](Self::get)); `None` only if the handle is stale or foreign.
    ///
    /// ```
    /// use coreobject::{Heap, Object};
    /// #[derive(Object, Default)]
    /// struct Coin;
    /// let heap = Heap::new();
    /// let c = heap.create(Coin);
    /// assert_eq!(heap.flags_of(c).unwrap().to_string(), "none");
    /// heap.add_to_root(c).unwrap();
    /// let _keep = heap.strong(c).unwrap();
    /// let f = heap.flags_of(c).unwrap();
    /// assert!(f.rooted && !f.garbage);
    /// assert_eq!(f.strong_count, 1);
    /// assert_eq!(f.to_string(), "rooted | strong_count=1");
    /// let cdo = heap.class_default::<Coin>().unwrap();
    /// assert_eq!(heap.flags_of(cdo).unwrap().to_string(), "rooted | class_default");
    /// ```
    pub fn flags_of(&self, h: impl Into<AnyObj>) -> Option<ObjectFlags> {
        let h = h.into();
        self.array.lookup(h, 0).ok()?;
        let item = self.array.at(h.index());
        let f = item.flags();
        let condemned = f & flags::DEAD == 0 && self.array.hides(h.index(), f);
        Some(ObjectFlags {
            rooted: f & flags::ROOT != 0,
            garbage: f & flags::GARBAGE != 0,
            unreachable: f & flags::UNREACHABLE != 0 || condemned,
            disregard: f & flags::DISREGARD != 0,
            class_default: f & flags::DEFAULT_OBJECT != 0,
            has_hooks: f & flags::HOOKS != 0,
            strong_count: item.refcount(),
            cluster_root: item.cluster_root().checked_sub(1),
        })
    }

    /// A strong RAII handle that roots the object while it lives (Unreal's
    /// `TStrongObjectPtr`). `None` if the object is not alive.
    pub fn strong<T: Object>(&self, h: Obj<T>) -> Option<StrongObj<T>> {
        self.array.resolve::<T>(h.any(), flags::DEAD).ok()?;
        Some(self.array.strong(h))
    }

    /// The number of [`StrongObj`] handles to an object.
    pub fn strong_count(&self, h: impl Into<AnyObj>) -> usize {
        let h = h.into();
        match self.array.lookup(h, flags::UNREACHABLE) {
            Ok(_) => self.array.at(h.index()).refcount() as usize,
            Err(_) => 0,
        }
    }

    /// Marks an object as garbage (Unreal's `MarkAsGarbage`): `get` stops
    /// resolving it at once, and the next collection frees it even if it is
    /// still referenced or rooted. References to it then go stale. Objects in
    /// the disregard-for-GC pool and class default objects are permanent:
    /// marking them is refused with [`Error::Permanent`].
    ///
    /// ```
    /// # use coreobject::{Heap, Obj, Object};
    /// #[derive(Object, Default)]
    /// struct Enemy { target: Option<Obj<Enemy>> }
    /// let mut heap = Heap::new();
    /// let a = heap.create(Enemy::default());
    /// let b = heap.create(Enemy { target: Some(a) });
    /// heap.add_to_root(b).unwrap();
    /// heap.mark_as_garbage(a).unwrap();
    /// heap.collect().unwrap();
    /// assert!(heap.get_even_if_garbage(a).is_none(), "freed although referenced");
    /// ```
    pub fn mark_as_garbage(&self, h: impl Into<AnyObj>) -> Result<(), Error> {
        let h = h.into();
        self.array.lookup(h, flags::UNREACHABLE)?;
        let item = self.array.at(h.index());
        if item.flags() & (flags::DISREGARD | flags::DEFAULT_OBJECT) != 0 {
            return Err(Error::Permanent(h));
        }
        if item.set(flags::GARBAGE) & flags::GARBAGE == 0 {
            self.gc.note_garbage(h);
            // Unreal's rule: a member marked as garbage dissolves its cluster.
            self.dissolve_cluster_of(h);
        }
        self.store_dirty.mark_subtree(h.index());
        Ok(())
    }

    /// Clears the garbage mark (Unreal's `ClearGarbage`), if the object has
    /// not been collected yet.
    pub fn clear_garbage(&self, h: impl Into<AnyObj>) -> Result<(), Error> {
        let h = h.into();
        self.array.lookup(h, flags::UNREACHABLE)?;
        if self.array.at(h.index()).clear(flags::GARBAGE) & flags::GARBAGE != 0 {
            self.gc.note_revived(h);
        }
        self.store_dirty.mark_subtree(h.index());
        Ok(())
    }
}

//! Iteration and counts.

use std::any::TypeId;
use std::collections::HashMap;

use crate::array::{flags, ObjectRef};
use crate::class::{Building, Class, Object};
use crate::handle::{AnyObj, Obj};

use super::{Heap, TableStats};

impl Heap {
    /// Objects **allocated**: the table's occupied slots. That is the live
    /// objects, plus objects marked as garbage or found unreachable that the
    /// collector has not freed yet, plus objects awaiting `finish_destroy`.
    /// O(1). Exact when no other thread is creating; while threads create
    /// through `&Heap`, a snapshot that may lag their newest objects. For the objects [`get`](Self::get) resolves, which
    /// [`iter`](Self::iter) visits, see [`live_count`](Self::live_count).
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Coin;
    /// let heap = Heap::new();
    /// let c = heap.create(Coin);
    /// heap.create(Coin);
    /// heap.mark_as_garbage(c).unwrap();
    /// assert_eq!(heap.len(), 2);        // allocated
    /// assert_eq!(heap.live_count(), 1); // resolvable
    /// ```
    pub fn len(&self) -> usize {
        self.array.len()
    }

    /// Objects **live**: those [`get`](Self::get) resolves, which
    /// [`iter`](Self::iter) visits (allocated objects less those marked as
    /// garbage or found unreachable). Walks the table: O(high water).
    pub fn live_count(&self) -> usize {
        self.iter().count()
    }

    /// Whether no objects are allocated.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Counts describing the table.
    pub fn table_stats(&self) -> TableStats {
        TableStats {
            objects: self.len(),
            high_water: self.array.high_water(),
            free: self.array.free_remaining(),
            reserved: self.array.reserved(),
            retired: self.array.retired(),
            chunks: self.array.allocated_chunks(),
            cap: self.array.cap(),
            disregard: self.disregard_len(),
        }
    }

    pub(super) fn iter_range(&self, from: u32) -> impl Iterator<Item = ObjectRef<'_>> + '_ {
        self.array
            .walk(from, self.array.high_water())
            .filter_map(move |(i, item)| self.array.slot_item(&self.names, i, item))
            .filter(|o| !self.array.hides(o.id().index(), o.flags()))
    }

    /// Every live object, in index order (Unreal's `FThreadSafeObjectIterator`).
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Coin;
    /// let heap = Heap::new();
    /// heap.create(Coin);
    /// heap.create(Coin);
    /// assert_eq!(heap.iter().filter(|o| o.class().name() == "Coin").count(), 2);
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = ObjectRef<'_>> + '_ {
        self.iter_range(0)
    }

    /// Every live object of class `T` (Unreal's `TObjectIterator<T>`), in
    /// index order. One pass over the table that compares each object's
    /// class with `T`'s (a pointer comparison; `T`'s class is checked once,
    /// when the iterator is made).
    ///
    /// # Panics
    /// If `T::class()` returns another type's class (a broken `unsafe impl
    /// Object`; `#[derive(Object)]` never does).
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// #[derive(Object, Default)]
    /// struct Coin(u32);
    /// let heap = Heap::new();
    /// heap.create(Coin(2));
    /// heap.create(Coin(3));
    /// assert_eq!(heap.iter_of::<Coin>().map(|(_, c)| c.0).sum::<u32>(), 5);
    /// ```
    pub fn iter_of<T: Object>(&self) -> impl Iterator<Item = (Obj<T>, &T)> + '_ {
        self.array.live_of::<T>(0, self.array.high_water())
    }

    /// Live objects the collector considers: everything outside the
    /// disregard-for-GC pool.
    pub fn iter_gc_considered(&self) -> impl Iterator<Item = ObjectRef<'_>> + '_ {
        self.iter_range(self.array.pool().end)
            .filter(|o| !o.is_disregard())
    }

    /// Calls `f` for each live object whose outer is `outer`, in index order
    /// (Unreal's `ForEachObjectWithOuter`, without recursion into inners'
    /// inners). Reads the outer → inners index, so it costs the number of
    /// `outer`'s inners, not the size of the table. An outer that is gone
    /// has no inners, as [`outer_of`](Self::outer_of) of its surviving inners
    /// is `None`. `f` may create objects; those it creates under `outer` are
    /// not visited.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Level;
    /// let heap = Heap::new();
    /// let world = heap.create(Level);
    /// let a = heap.spawn(Level).outer(world).create().unwrap();
    /// let b = heap.spawn(Level).outer(world).create().unwrap();
    /// heap.spawn(Level).outer(a).create().unwrap(); // an inner's inner
    /// let mut seen = Vec::new();
    /// heap.for_each_with_outer(world, |o| seen.push(o.id()));
    /// assert_eq!(seen, [a.any(), b.any()]);
    /// ```
    pub fn for_each_with_outer(&self, outer: impl Into<AnyObj>, mut f: impl FnMut(ObjectRef<'_>)) {
        let outer = outer.into();
        // A freed outer has no inners (its entry may stay while inners
        // that outlived it live: a restore at its serial finds them).
        if self.array.lookup(outer, 0).is_err() {
            return;
        }
        self.ensure_inners();
        // Copied out, so that `f` runs with no lock held.
        let mut inners = self.inners.lock().of(outer.to_bits()).to_vec();
        inners.sort_unstable_by_key(|h| h.index());
        inners.dedup();
        for h in inners {
            let Some(o) = self.array.slot(&self.names, h.index()) else {
                continue;
            };
            // A restored object (`spawn_at`) takes the handle of a former
            // occupant whose stale entry may still stand under the former
            // occupant's outer: only its own header says which outer it has.
            if o.id() == h
                && !self.array.hides(h.index(), o.flags())
                && (o.flags() & flags::RESTORED == 0 || self.array.outer(h, 0) == Ok(Some(outer)))
            {
                f(o)
            }
        }
    }

    /// **Live** objects per class (what [`iter_of`](Self::iter_of) visits,
    /// summed per class; objects marked as garbage or found unreachable are
    /// not counted), most numerous first. Walks the table.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Coin;
    /// let heap = Heap::new();
    /// let c = heap.create(Coin);
    /// heap.create(Coin);
    /// heap.mark_as_garbage(c).unwrap();
    /// assert_eq!(heap.class_counts(), [("Coin", 1)]);
    /// assert_eq!(heap.iter_of::<Coin>().count(), 1);
    /// ```
    pub fn class_counts(&self) -> Vec<(&'static str, usize)> {
        self.array.class_counts(false)
    }

    /// The class default object of `T` (Unreal's CDO): made on first request
    /// from `T::default()`, rooted and permanent (it cannot be marked as
    /// garbage). `None` if `T` does not implement `Default`, or if no slot
    /// is free (the object cap is reached, or the disregard-for-GC pool is
    /// open and full).
    ///
    /// Class defaults are found by type, never by name. Each is also named,
    /// at the top level: `Default__` + its class name, or, when another
    /// class's default already holds that name (two types that share a
    /// name), `Default__` + its [class path](Class::path) (with a `_2`, `_3`,
    /// … suffix in the rare case that is taken too), every `.` replaced by
    /// `_`. Names starting with `Default__` are reserved for class defaults:
    /// [`Spawn::name`](crate::Spawn::name) refuses them with [`Error::InvalidName`](crate::Error::InvalidName), so a class
    /// default never collides with a user's object.
    ///
    /// `T::default()` runs with no heap lock held, so it may create objects
    /// and ask for other classes' defaults (as Unreal's CDO constructors do).
    /// Two threads that ask at once may both run `T::default()`: one value
    /// becomes the class default, the other is dropped without ever entering
    /// the heap, and both threads get the same handle.
    ///
    /// # Panics
    /// If `T::default()` asks for `T`'s own class default, directly or
    /// through other classes' defaults (it could only recurse forever); the
    /// message names the cycle. A panic in `T::default()` propagates.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// #[derive(Object)]
    /// struct Gun { ammo: u32 }
    /// impl Default for Gun { fn default() -> Self { Gun { ammo: 30 } } }
    /// let heap = Heap::new();
    /// let cdo = heap.class_default::<Gun>().unwrap();
    /// assert_eq!(heap[cdo].ammo, 30);
    /// assert_eq!(heap.class_default::<Gun>(), Some(cdo));
    /// assert_eq!(heap.name_of(cdo).as_deref(), Some("Default__Gun"));
    /// assert!(heap.spawn(Gun { ammo: 1 }).name("Default__Gun").create().is_err());
    /// ```
    pub fn class_default<T: Object>(&self) -> Option<Obj<T>> {
        let key = TypeId::of::<T>();
        let live = |map: &HashMap<TypeId, AnyObj>| self.downcast::<T>(*map.get(&key)?);
        if let Some(o) = live(&self.defaults.read()) {
            return Some(o);
        }
        let make = (Class::checked::<T>().vt.make_default)()?;
        // Build with no lock held: `T::default()` is user code.
        let value = {
            let _building = Building::enter::<T>();
            *make()
                .downcast::<T>()
                .expect("a class's make_default builds its own type")
        };
        let mut map = self.defaults.write();
        if let Some(o) = live(&map) {
            // Another thread won the race; drop our value outside the lock.
            drop(map);
            drop(value);
            return Some(o);
        }
        let Some(index) = self.array.reserve() else {
            drop(map);
            return None;
        };
        let mut names = self.names.write();
        let name = names.default_name(T::class());
        let name_key = names.claim_default(&name);
        let h = self.publish_quiet(index, value, None, 0);
        self.array.at(h.index()).set(flags::DEFAULT_OBJECT);
        names.insert(h.any(), name_key);
        self.array.at(h.index()).set(flags::NAMED);
        drop(names);
        self.add_to_root(h).expect("a fresh object is alive");
        map.insert(key, h.any());
        drop(map);
        self.notify_create(h.any());
        Some(h)
    }
}

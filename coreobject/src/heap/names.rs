//! Names: finding objects by outer and name, paths, interned names.

use std::sync::Arc;

use parking_lot::{RwLockReadGuard, RwLockWriteGuard};

use crate::array::flags;
use crate::class::Object;
use crate::error::Error;
use crate::handle::{AnyObj, Obj};
use crate::names::{Name, Names};

use super::Heap;

impl Heap {
    /// The names, read-locked, with the records that wait outside the index
    /// entered first if there are more than a few (under the write lock,
    /// taken only then): a lookup reads the few left one by one.
    fn names_for_lookup(&self) -> RwLockReadGuard<'_, Names> {
        let names = self.names.read();
        if !names.should_flush() {
            return names;
        }
        drop(names);
        let mut names = self.names.write();
        names.flush();
        RwLockWriteGuard::downgrade(names)
    }

    /// The object's name as a string, if it was given one. Allocates for a
    /// numbered name; [`name`](Self::name) does not.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Level;
    /// let heap = Heap::new();
    /// let l = heap.spawn(Level).name("Level_3").create().unwrap();
    /// assert_eq!(heap.name_of(l).as_deref(), Some("Level_3"));
    /// assert_eq!(heap.name_of(heap.create(Level)), None);
    /// ```
    pub fn name_of(&self, h: impl Into<AnyObj>) -> Option<Arc<str>> {
        let h = h.into();
        self.array.lookup(h, flags::UNREACHABLE).ok()?;
        self.names.read().name_of(h.index())
    }

    /// The object's [`Name`], if it was given one. No allocation and no
    /// string work: compare it with names from [`intern`](Self::intern), or
    /// turn it into a string with [`name_string`](Self::name_string).
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Actor;
    /// let heap = Heap::new();
    /// let actor = heap.intern("Actor").unwrap();
    /// let a = heap.spawn(Actor).name("Actor_9").create().unwrap();
    /// let n = heap.name(a).unwrap();
    /// assert_eq!(n, actor.with_number(9));
    /// assert_eq!(n.number(), Some(9));
    /// ```
    pub fn name(&self, h: impl Into<AnyObj>) -> Option<Name> {
        let h = h.into();
        self.array.lookup(h, flags::UNREACHABLE).ok()?;
        self.names.read().name(h.index())
    }

    /// Interns a name (Unreal's `FName` constructor): splits it into base
    /// and number (`Actor_12` is `Actor` with 12; see [`Name`] for the rule)
    /// and keeps the base in this heap's name table for the heap's life, so
    /// the [`Name`] stays valid. Intern the bases you reuse, then name
    /// objects with [`Name::with_number`] without any string work.
    ///
    /// Strings given to [`Spawn::name`](crate::Spawn::name) are not kept this way: the table
    /// holds a base only while an object uses it, so naming objects with
    /// ever-new strings does not grow it without bound.
    ///
    /// Refuses, with [`Error::InvalidName`], what [`Spawn::name`](crate::Spawn::name) refuses:
    /// an empty name, a `.`, and the `Default__` prefix.
    ///
    /// ```
    /// let heap = coreobject::Heap::new();
    /// let a = heap.intern("Actor_12").unwrap();
    /// assert_eq!(a, heap.intern("Actor").unwrap().with_number(12));
    /// assert_eq!(heap.name_string(a).as_deref(), Some("Actor_12"));
    /// assert!(heap.intern("World.Level").is_err());
    /// ```
    pub fn intern(&self, name: &str) -> Result<Name, Error> {
        self.names.write().intern(name)
    }

    /// How many base strings this heap's name table holds: those interned
    /// with [`intern`](Self::intern), and those of objects' names (freed with
    /// the last object that uses them). `Actor_1` and `Actor_2` share one.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Actor;
    /// let mut heap = Heap::new();
    /// heap.spawn(Actor).name("Actor_1").create().unwrap();
    /// heap.spawn(Actor).name("Actor_2").create().unwrap();
    /// assert_eq!(heap.name_table_len(), 1);
    /// heap.collect().unwrap(); // nothing roots them
    /// assert_eq!(heap.name_table_len(), 0);
    /// ```
    pub fn name_table_len(&self) -> usize {
        self.names.read().strings()
    }

    /// A [`Name`]'s string, e.g. `Actor_12`; `None` if this heap does not
    /// hold it (see [`Error::StaleName`]).
    ///
    /// ```
    /// let heap = coreobject::Heap::new();
    /// let wheel = heap.intern("Wheel").unwrap();
    /// assert_eq!(heap.name_string(wheel).as_deref(), Some("Wheel"));
    /// assert_eq!(heap.name_string(wheel.with_number(0)).as_deref(), Some("Wheel_0"));
    /// ```
    pub fn name_string(&self, name: Name) -> Option<String> {
        self.names.read().name_string(name)
    }

    /// A display name: the object's name, or `Class_index` if it has none.
    pub fn display_name(&self, h: impl Into<AnyObj>) -> Option<String> {
        let h = h.into();
        if let Some(n) = self.name_of(h) {
            return Some(n.to_string());
        }
        Some(format!("{}_{}", self.class_of(h)?.name(), h.index()))
    }

    /// The dotted path of display names from the outermost object
    /// (Unreal's `GetPathName`), e.g. `World.Level_3.Hero`.
    pub fn path_name(&self, h: impl Into<AnyObj>) -> Option<String> {
        let h = h.into();
        let mut parts = vec![self.display_name(h)?];
        let mut cur = self.outer_of(h);
        let mut guard = 0;
        while let Some(o) = cur {
            parts.push(self.display_name(o)?);
            cur = self.outer_of(o);
            guard += 1;
            if guard > 10_000 {
                break;
            }
        }
        parts.reverse();
        Some(parts.join("."))
    }

    /// Finds a named object by outer and name (Unreal's `FindObject`).
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Level;
    /// let heap = Heap::new();
    /// let w = heap.spawn(Level).name("World").create().unwrap();
    /// assert_eq!(heap.find(None, "World"), Some(w.any()));
    /// assert_eq!(heap.find(Some(w.any()), "World"), None);
    /// ```
    pub fn find(&self, outer: Option<AnyObj>, name: &str) -> Option<AnyObj> {
        let h = self.names_for_lookup().find(outer, name)?;
        self.contains(h).then_some(h)
    }

    /// Finds a named object by outer and [`Name`]: integer lookups only.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Level;
    /// let heap = Heap::new();
    /// let level = heap.intern("Level").unwrap();
    /// let l = heap.spawn(Level).name(level.with_number(3)).create().unwrap();
    /// assert_eq!(heap.find_name(None, level.with_number(3)), Some(l.any()));
    /// assert_eq!(heap.find_name(None, level), None);
    /// ```
    pub fn find_name(&self, outer: Option<AnyObj>, name: Name) -> Option<AnyObj> {
        let h = self.names_for_lookup().find_name(outer, name)?;
        self.contains(h).then_some(h)
    }

    /// Finds an object by dotted path, e.g. `"World.Level_3.Hero"`.
    pub fn find_path(&self, path: &str) -> Option<AnyObj> {
        let mut cur: Option<AnyObj> = None;
        for part in path.split('.') {
            cur = Some(self.find(cur, part)?);
        }
        cur
    }

    /// [`find`](Self::find) for an object of class `T` (Unreal's
    /// `FindObject<T>`): the typed handle, or `None` if no object has that
    /// name under `outer` or the one that has is not a `T`.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Level;
    /// # #[derive(Object, Default)] struct Actor;
    /// let heap = Heap::new();
    /// let level = heap.spawn(Level).name("Level_1").create().unwrap();
    /// assert_eq!(heap.find_of::<Level>(None, "Level_1"), Some(level));
    /// assert_eq!(heap.find_of::<Actor>(None, "Level_1"), None);
    /// ```
    pub fn find_of<T: Object>(&self, outer: Option<AnyObj>, name: &str) -> Option<Obj<T>> {
        self.downcast(self.find(outer, name)?)
    }

    /// [`find_path`](Self::find_path) for an object of class `T`: the typed
    /// handle, or `None` if the path names no object or one that is not a
    /// `T` (the objects along the path may be of any class).
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct World;
    /// # #[derive(Object, Default)] struct Actor { hp: i32 }
    /// let heap = Heap::new();
    /// let world = heap.spawn(World).name("World").create().unwrap();
    /// heap.spawn(Actor { hp: 9 }).outer(world).name("Hero").create().unwrap();
    /// let hero = heap.find_path_of::<Actor>("World.Hero").unwrap();
    /// assert_eq!(heap[hero].hp, 9);
    /// assert!(heap.find_path_of::<World>("World.Hero").is_none());
    /// ```
    pub fn find_path_of<T: Object>(&self, path: &str) -> Option<Obj<T>> {
        self.downcast(self.find_path(path)?)
    }
}

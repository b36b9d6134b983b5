//! Renaming objects and moving them between outers (Unreal's `UObject::Rename`).

use crate::array::flags;
use crate::error::Error;
use crate::handle::AnyObj;
use crate::names::{IntoName, NameArg};

use super::Heap;

/// A rename in preparation: see [`Heap::rename`].
#[must_use = "call .apply() to rename the object"]
#[derive(Debug)]
pub struct Rename<'h> {
    heap: &'h mut Heap,
    obj: AnyObj,
    name: Option<NameArg>,
    outer: Option<AnyObj>,
}

impl Heap {
    /// Renames an object, moves it under another outer, or both (Unreal's
    /// `UObject::Rename`): `heap.rename(obj).name(n).outer(o).apply()`.
    /// What is not given is kept. The name must be free under the outer the
    /// object ends up with; a handle to the object stays the same, its path
    /// changes.
    ///
    /// Refused, with nothing changed: an object that is not alive, a class
    /// default object ([`Error::Permanent`]), a name [`Spawn::name`](crate::Spawn::name)
    /// would refuse or that is taken ([`Error::NameTaken`]), an outer that is
    /// not alive, the object itself or inside it ([`Error::OuterCycle`]), and
    /// a new outer for an object created without one ([`Error::NoOuterSlot`]:
    /// the outer lives in the object's memory, which has no room for one).
    ///
    /// The object's outer is a reference the collector follows, so a move
    /// counts as a change of the object, as [`get_mut`](Self::get_mut) does.
    ///
    /// ```
    /// use coreobject::{Error, Heap, Object};
    /// #[derive(Object, Default)]
    /// struct Level;
    /// #[derive(Object, Default)]
    /// struct Knight;
    ///
    /// let mut heap = Heap::new();
    /// let world = heap.spawn(Level).name("World").root().create().unwrap();
    /// let one = heap.spawn(Level).outer(world).name("Level_1").root().create().unwrap();
    /// let two = heap.spawn(Level).outer(world).name("Level_2").root().create().unwrap();
    /// let k = heap.spawn(Knight).outer(one).name("Knight").create().unwrap();
    /// heap.rename(k).name("Sir_Knight").outer(two).apply().unwrap();
    /// assert_eq!(heap.path_name(k).as_deref(), Some("World.Level_2.Sir_Knight"));
    /// assert_eq!(heap.find_path("World.Level_1.Knight"), None);
    /// // A level cannot move under its own knight.
    /// assert!(matches!(heap.rename(two).outer(k).apply(), Err(Error::OuterCycle { .. })));
    /// ```
    pub fn rename(&mut self, obj: impl Into<AnyObj>) -> Rename<'_> {
        Rename {
            heap: self,
            obj: obj.into(),
            name: None,
            outer: None,
        }
    }
}

impl Rename<'_> {
    /// The new name (a string or a [`Name`](crate::Name)).
    pub fn name(mut self, name: impl IntoName) -> Self {
        self.name = Some(name.into_name_arg());
        self
    }

    /// The new outer.
    pub fn outer(mut self, outer: impl Into<AnyObj>) -> Self {
        self.outer = Some(outer.into());
        self
    }

    /// Renames and moves the object.
    pub fn apply(self) -> Result<(), Error> {
        let Rename {
            heap,
            obj,
            name,
            outer,
        } = self;
        heap.array.lookup(obj, flags::DEAD)?;
        let item = heap.array.at(obj.index());
        if item.flags() & flags::DEFAULT_OBJECT != 0 {
            return Err(Error::Permanent(obj));
        }
        let old_outer = heap.array.outer(obj, flags::DEAD)?;
        let new_outer = outer.or(old_outer);
        if let Some(o) = outer.filter(|&o| Some(o) != old_outer) {
            heap.array.lookup(o, flags::DEAD)?;
            if old_outer.is_none() {
                return Err(Error::NoOuterSlot(obj));
            }
            // The new outer's chain must not pass through the object.
            let mut up = Some(o);
            while let Some(u) = up {
                if u == obj {
                    return Err(Error::OuterCycle {
                        object: obj,
                        outer: o,
                    });
                }
                up = heap.array.outer(u, 0).ok().flatten();
            }
        }
        // The name, under the outer the object ends up with: claimed before
        // anything changes, so a taken name changes nothing.
        let names = heap.names.get_mut();
        let name = match name {
            Some(n) => Some(n),
            None if new_outer != old_outer => names.name(obj.index()).map(|n| n.into_name_arg()),
            None => None,
        };
        if let Some(name) = name {
            let key = match names.claim(new_outer, &name) {
                Ok(key) => key,
                // Its own name, under the same outer: nothing to do.
                Err(Error::NameTaken { name })
                    if new_outer == old_outer
                        && names.name_of(obj.index()).as_deref() == Some(name.as_str()) =>
                {
                    return Ok(());
                }
                Err(e) => return Err(e),
            };
            names.remove(obj.index());
            names.insert(obj, key);
            heap.name_hint.update(names);
            heap.array.at(obj.index()).set(flags::NAMED);
        }
        if let (Some(old), Some(new)) = (old_outer, new_outer.filter(|&n| Some(n) != old_outer)) {
            let moved = heap.array.set_outer(obj, new)?;
            debug_assert!(moved, "an object with an outer has room for one");
            if heap.inners_on.load(std::sync::atomic::Ordering::Acquire) {
                heap.inners.get_mut().remove(old, obj);
            }
            heap.note_inner(new, obj);
            // While a cycle marks, the new outer may be black already (marked
            // and scanned, or traced at birth): the moved object is greyed so
            // that an outer keeping its inners does not lose it.
            if heap.gc.is_marking() {
                heap.gc.note_revived(obj);
            }
            // Whether its inners are saved may change with it.
            heap.store_dirty.mark_subtree(obj.index());
            // The outer is a traced reference: the object changed.
            let item = heap.array.at(obj.index());
            super::access::note_write(
                &mut heap.gc,
                heap.clusters.get_mut(),
                &mut heap.store_dirty,
                item,
                obj.index(),
            );
        }
        // Its record in a store names it and its outer.
        super::access::note_changed(
            &mut heap.store_dirty,
            heap.array.at(obj.index()),
            obj.index(),
        );
        Ok(())
    }
}

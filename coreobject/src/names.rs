//! Object names and the (outer, name) index (Unreal's `FUObjectHashTables`,
//! for named objects only: unnamed objects cost nothing here).
//!
//! Class default objects live in the same index, at the top level (no
//! outer), under names that start with [`DEFAULT_PREFIX`]. User names may
//! not start with it ([`Names::check`]), so a class default's name never
//! collides with a user's, and [`Names::default_name`] picks one that no
//! other class default holds.
//!
//! Both maps hash with `rustc-hash`'s Fx hash: keys are slot indices, handle
//! bits and short names chosen by the program, not by an attacker, and the
//! index is touched on every named creation and every freed named object.

use std::collections::HashMap;
use std::sync::Arc;

use rustc_hash::FxBuildHasher;

use crate::class::Class;
use crate::error::Error;
use crate::handle::AnyObj;

type FxMap<K, V> = HashMap<K, V, FxBuildHasher>;

#[derive(Default)]
pub(crate) struct Names {
    /// outer bits (or 0) → name → object. Nested so that a lookup by `&str`
    /// needs no allocation (`Arc<str>: Borrow<str>`).
    by_outer: FxMap<u64, FxMap<Arc<str>, AnyObj>>,
    /// slot index → (name, outer bits or 0).
    by_index: FxMap<u32, (Arc<str>, u64)>,
}

fn outer_key(outer: Option<AnyObj>) -> u64 {
    outer.map_or(0, AnyObj::to_bits)
}

/// The prefix of class default objects' names (Unreal's `Default__`),
/// reserved for them.
pub(crate) const DEFAULT_PREFIX: &str = "Default__";

impl Names {
    /// Checks a user's name: non-empty, no `.` (the path separator), and not
    /// starting with the reserved [`DEFAULT_PREFIX`].
    pub(crate) fn check(name: &str) -> Result<(), Error> {
        if name.is_empty() || name.contains('.') || name.starts_with(DEFAULT_PREFIX) {
            return Err(Error::InvalidName(name.to_string()));
        }
        Ok(())
    }

    /// A top-level name for the class default object of `class` that no
    /// object holds: `Default__` + the class name; if another class default
    /// holds that (two classes share a name), `Default__` + the class path;
    /// if even that is held (types local to functions), the path with the
    /// first free `_2`, `_3`, … suffix. Every `.` becomes `_`, so the name
    /// is a valid path segment.
    pub(crate) fn default_name(&self, class: &Class) -> String {
        let free = |n: &String| self.find(None, n).is_none();
        let short = format!("{DEFAULT_PREFIX}{}", class.name()).replace('.', "_");
        if free(&short) {
            return short;
        }
        let long = format!("{DEFAULT_PREFIX}{}", class.path()).replace('.', "_");
        if free(&long) {
            return long;
        }
        (2u64..)
            .map(|n| format!("{long}_{n}"))
            .find(free)
            .expect("a free suffix")
    }

    pub(crate) fn find(&self, outer: Option<AnyObj>, name: &str) -> Option<AnyObj> {
        self.by_outer.get(&outer_key(outer))?.get(name).copied()
    }

    pub(crate) fn insert(&mut self, obj: AnyObj, outer: Option<AnyObj>, name: &str) {
        let name: Arc<str> = Arc::from(name);
        let key = outer_key(outer);
        self.by_outer
            .entry(key)
            .or_default()
            .insert(name.clone(), obj);
        self.by_index.insert(obj.index(), (name, key));
    }

    pub(crate) fn name_of(&self, index: u32) -> Option<Arc<str>> {
        self.by_index.get(&index).map(|(n, _)| n.clone())
    }

    /// Forgets the name of a freed slot.
    pub(crate) fn remove(&mut self, index: u32) {
        let Some((name, key)) = self.by_index.remove(&index) else {
            return;
        };
        if let Some(children) = self.by_outer.get_mut(&key) {
            children.remove(&*name);
            if children.is_empty() {
                self.by_outer.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::NonZeroU32;

    fn obj(i: u32) -> AnyObj {
        AnyObj::new(i, NonZeroU32::new(1 << 22).unwrap())
    }

    #[test]
    fn names_are_found_per_outer_and_forgotten_on_remove() {
        let mut n = Names::default();
        let (world, a, b) = (obj(0), obj(1), obj(2));
        n.insert(a, Some(world), "Hero");
        n.insert(b, None, "Hero");
        assert_eq!(n.find(Some(world), "Hero"), Some(a));
        assert_eq!(n.find(None, "Hero"), Some(b));
        assert_eq!(n.find(Some(a), "Hero"), None);
        assert_eq!(n.name_of(1).as_deref(), Some("Hero"));
        n.remove(1);
        assert_eq!(n.find(Some(world), "Hero"), None);
        assert!(
            !n.by_outer.contains_key(&world.to_bits()),
            "empty outer dropped"
        );
        n.remove(2);
        assert!(n.by_index.is_empty());
        n.remove(2); // removing twice is harmless
    }

    #[test]
    fn the_default_prefix_is_reserved() {
        assert!(Names::check("Hero").is_ok());
        assert!(Names::check("Default_Hero").is_ok());
        for bad in ["", "A.B", "Default__Hero", "Default__"] {
            assert_eq!(
                Names::check(bad),
                Err(Error::InvalidName(bad.to_string())),
                "{bad:?}"
            );
        }
    }
}

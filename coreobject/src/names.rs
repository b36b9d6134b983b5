//! Object names and the (outer, name) index (Unreal's `FUObjectHashTables`,
//! for named objects only: unnamed objects cost nothing here).

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::Error;
use crate::handle::AnyObj;

#[derive(Default)]
pub(crate) struct Names {
    /// (outer bits or 0, name) → object.
    by_key: HashMap<(u64, Arc<str>), AnyObj>,
    /// slot index → (name, outer bits or 0).
    by_index: HashMap<u32, (Arc<str>, u64)>,
}

fn outer_key(outer: Option<AnyObj>) -> u64 {
    outer.map_or(0, AnyObj::to_bits)
}

impl Names {
    pub(crate) fn check(name: &str) -> Result<(), Error> {
        if name.is_empty() || name.contains('.') {
            return Err(Error::InvalidName(name.to_string()));
        }
        Ok(())
    }

    pub(crate) fn find(&self, outer: Option<AnyObj>, name: &str) -> Option<AnyObj> {
        self.by_key
            .get(&(outer_key(outer), Arc::<str>::from(name)))
            .copied()
    }

    pub(crate) fn insert(&mut self, obj: AnyObj, outer: Option<AnyObj>, name: &str) {
        let name: Arc<str> = Arc::from(name);
        let key = outer_key(outer);
        self.by_key.insert((key, name.clone()), obj);
        self.by_index.insert(obj.index(), (name, key));
    }

    pub(crate) fn name_of(&self, index: u32) -> Option<Arc<str>> {
        self.by_index.get(&index).map(|(n, _)| n.clone())
    }

    /// Forgets the name of a freed slot.
    pub(crate) fn remove(&mut self, index: u32) {
        if let Some((name, key)) = self.by_index.remove(&index) {
            self.by_key.remove(&(key, name));
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.by_index.is_empty()
    }
}

//! External referencers (Unreal's `FGCObject`): things outside the heap that
//! hold handles and report them at each collection.
//!
//! ```
//! use coreobject::{AnyObj, Heap, Object, Referencer, Visitor};
//! use std::sync::{Arc, Mutex};
//!
//! #[derive(Object, Default)]
//! struct Texture;
//!
//! /// An asset cache living outside the heap.
//! struct Cache(Mutex<Vec<AnyObj>>);
//! impl Referencer for Cache {
//!     fn add_referenced_objects(&self, v: &mut dyn Visitor) {
//!         for h in self.0.lock().unwrap().iter() { v.visit(*h); }
//!     }
//! }
//!
//! let mut heap = Heap::new();
//! let tex = heap.create(Texture);
//! let cache = Arc::new(Cache(Mutex::new(vec![tex.any()])));
//! let id = heap.add_referencer(cache.clone());
//! heap.collect().unwrap();
//! assert!(heap.get(tex).is_some());
//! heap.remove_referencer(id);
//! heap.collect().unwrap();
//! assert!(heap.get(tex).is_none());
//! ```

use crate::trace::Visitor;

/// Reports the handles an outside structure holds. Registered with
/// [`Heap::add_referencer`](crate::Heap::add_referencer).
pub trait Referencer: Send + Sync {
    /// Report every handle that must stay alive.
    fn add_referenced_objects(&self, v: &mut dyn Visitor);
    /// A name for reference-chain reports.
    fn referencer_name(&self) -> String {
        "external referencer".to_string()
    }
}

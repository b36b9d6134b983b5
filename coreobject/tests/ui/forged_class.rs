//! A safe, hand-written `impl Object` that answers another type's class would
//! make the heap read, trace and drop a `Forged` as a `Named`. `Object` is an
//! `unsafe trait`, so this does not compile (E0200).

use coreobject::{Class, Heap, Lifecycle, Object, Trace, Visitor};

#[derive(Object, Default)]
struct Named {
    id: u64,
}

struct Forged(Vec<String>);

impl Trace for Forged {
    const NEEDS_TRACE: bool = false;
    fn trace<V: Visitor + ?Sized>(&self, _v: &mut V) {}
}

impl Lifecycle for Forged {
    const HAS_HOOKS: bool = false;
}

impl Object for Forged {
    fn class() -> &'static Class {
        Named::class()
    }
}

fn main() {
    let heap = Heap::new();
    let f = heap.create(Forged(vec!["not a u64".into()]));
    let _ = heap.get(f);
}

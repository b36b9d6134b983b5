//! Typed handles resolve without comparing the class, so viewing an untyped
//! handle as a typed one without a check is `unsafe` (E0133); the safe way is
//! `Heap::downcast`.

use coreobject::{Heap, Object};

#[derive(Object, Default)]
struct Rock(u64);

#[derive(Object, Default)]
struct Tree(Vec<String>);

fn main() {
    let heap = Heap::new();
    let any = heap.create(Rock(7)).any();
    let _ = heap.get(any.assume::<Tree>());
}

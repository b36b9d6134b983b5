use coreobject::{Heap, ObjectEvent};

fn main() {
    let mut heap = Heap::new();
    // A delete listener runs inside a collection; it may not collect again.
    heap.on_delete(|_e: &ObjectEvent| {
        heap.collect().unwrap();
    });
}

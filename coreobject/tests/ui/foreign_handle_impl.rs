//! `Handle` is sealed: a type outside the crate that claimed to name a `Tree`
//! while carrying a `Rock`'s handle would make `Heap::get` read one type as
//! another, so it cannot implement `Handle` (E0277).

use coreobject::{AnyObj, Handle, Heap, Object};

#[derive(Object, Default)]
struct Rock(u64);

#[derive(Object, Default)]
struct Tree(Vec<String>);

struct Liar(AnyObj);

impl Handle for Liar {
    type Target = Tree;
    fn any_obj(&self) -> AnyObj {
        self.0
    }
}

fn main() {
    let heap = Heap::new();
    let rock = heap.create(Rock(7));
    let _ = heap.get(Liar(rock.any()));
}

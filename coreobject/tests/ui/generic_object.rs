use coreobject::{Obj, Object};

#[derive(Object)]
struct Holder<T: Object> {
    item: Option<Obj<T>>,
}

fn main() {}

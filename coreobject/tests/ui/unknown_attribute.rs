use coreobject::{Obj, Object, Trace};

#[derive(Object)]
#[object(nmae = "Typo")]
struct A {
    x: Option<Obj<A>>,
}

#[derive(Object)]
struct B {
    #[object(weak)]
    x: Option<Obj<B>>,
}

#[derive(Trace)]
#[object(skip)]
struct C {
    x: Option<Obj<A>>,
}

#[derive(Trace)]
#[object(name = "D")]
struct D {
    x: u32,
}

fn main() {}

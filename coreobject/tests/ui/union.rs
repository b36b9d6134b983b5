use coreobject::Object;

#[derive(Object)]
union Bits {
    i: u32,
    f: f32,
}

fn main() {}

use coreobject::{Heap, Object};

#[derive(Object, Default)]
struct Gem {
    carats: u32,
}

fn main() {
    let mut heap = Heap::new();
    let g = heap.create(Gem { carats: 2 });
    heap.add_to_root(g).unwrap();
    let gem: &Gem = heap.get(g).unwrap();
    heap.collect().unwrap();
    println!("{}", gem.carats);
}

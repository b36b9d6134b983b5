//! The store benchmark alone (see `src/store.rs`):
//! `cargo run --release -p coreobject-bench --features redb --bin store -- [N] [K] [R] [--capture-only]`.
#[path = "../store.rs"]
mod store;

fn main() {
    let arg = |i: usize, d: usize| std::env::args().nth(i).map_or(d, |s| s.parse().unwrap());
    let capture_only = std::env::args().any(|a| a == "--capture-only");
    store::run(arg(1, 1_000_000), arg(2, 10_000), arg(3, 3), !capture_only);
}

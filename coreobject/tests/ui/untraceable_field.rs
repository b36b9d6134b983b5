use coreobject::{Obj, Object};

/// Holds no `Trace` implementation.
struct Stats {
    kills: u32,
}

#[derive(Object)]
struct Player {
    friend: Option<Obj<Player>>,
    stats: Stats,
}

fn main() {}

use std::sync::{Arc, Mutex};

use coreobject::{AnyObj, Object};

/// Two objects can hold clones of the `Arc`, and so can a thread outside the
/// heap, which could move a handle while the collector traces.
#[derive(Object)]
struct Inventory {
    count: u32,
    shared: Arc<Mutex<Vec<AnyObj>>>,
}

fn main() {}

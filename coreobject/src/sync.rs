//! The atomics the lock-free table and the parallel marker's termination
//! protocol use: `std`'s, or loom's under `cfg(loom)` so that `tests/loom.rs`
//! can explore every interleaving of concurrent creation, and of workers
//! stealing and going idle.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    AtomicBool, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize,
};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{
    AtomicBool, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize,
};

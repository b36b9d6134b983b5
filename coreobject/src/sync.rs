//! The atomics the lock-free table uses: `std`'s, or loom's under `cfg(loom)`
//! so that `tests/loom.rs` can explore every interleaving of concurrent creation.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicI64, AtomicPtr, AtomicU32};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicI64, AtomicPtr, AtomicU32};

//! # coreobject
//!
//! Unreal Engine's CoreUObject object model, in safe Rust: every object lives
//! in one chunked **object table**, is named by a small `Copy` **handle**
//! (index + serial) that can never dangle, and is kept alive by a **tracing
//! garbage collector** that starts from an explicit root set.
//!
//! ## A first heap
//!
//! ```
//! use coreobject::{Heap, Obj, Object, Weak};
//!
//! #[derive(Object, Default)]
//! struct World { levels: Vec<Obj<Level>> }
//!
//! #[derive(Object, Default)]
//! struct Level { actors: Vec<Obj<Actor>> }
//!
//! #[derive(Object, Default)]
//! struct Actor { hp: i32, target: Option<Weak<Actor>> }
//!
//! let mut heap = Heap::new();
//! let world = heap.create(World::default());
//! heap.add_to_root(world).unwrap();            // roots start the trace
//!
//! let level = heap.create(Level::default());
//! heap[world].levels.push(level);              // reachable through World.levels
//! let hero = heap.create(Actor { hp: 100, target: None });
//! let orc = heap.create(Actor { hp: 30, target: Some(hero.downgrade()) });
//! heap[level].actors.push(hero);               // the orc is referenced by no one
//!
//! let stats = heap.collect().unwrap();
//! assert_eq!(stats.freed, 1);                  // the orc
//! assert!(heap.get(orc).is_none());            // its handle is stale, forever
//! assert_eq!(heap[hero].hp, 100);
//! ```
//!
//! ## The pieces
//!
//! * **Handles** ([`handle`]): [`Obj<T>`], [`Weak<T>`] and [`AnyObj`] are
//!   8 bytes: a slot index and a serial. Resolving checks the serial, so a
//!   handle to a freed object, or one from another heap, resolves to `None`
//!   (or a precise [`Error`]) and never to another object.
//! * **The table** ([`table`], [`item`]): 64K-item chunks that never move; a
//!   lock-free, one-atomic index allocator that reuses freed slots LIFO; a
//!   disregard-for-GC pool of permanent objects at the lowest indices.
//! * **Classes** ([`class`], [`trace`]): `#[derive(Object)]` registers a type's
//!   name and fields and writes its [`Trace`] implementation. Every handle
//!   field is traced unless it is a [`Weak`] or marked `#[object(skip)]`.
//! * **The collector** ([`gc`]): roots, strong handles and external
//!   referencers; iterative marking through fields and outers; Unreal's
//!   destruction order (`begin_destroy`, `is_ready_for_finish_destroy`,
//!   `finish_destroy`); `mark_as_garbage`; stats, triggers, callbacks; and
//!   debugging reports.
//!
//! ## The safety story
//!
//! Safe code never holds a raw pointer to an object: it holds handles, and
//! borrows from [`Heap::get`] that cannot outlive `&Heap`. Collection takes
//! `&mut Heap`, so the borrow checker guarantees no borrow survives it; every
//! collection runs at a safe point. Mutation goes through [`Heap::get_mut`],
//! the single door an incremental collector can use as its write barrier.
//! [`Trace`] is a *safe* trait: a wrong implementation can free an object too
//! early, but its handles then resolve to `None`; nothing dangles.
//!
//! Handles on the stack are **not** roots (as with Unreal's raw pointers, but
//! checked): an object reachable only from a local handle is freed by the next
//! collection. Root it, hold a [`StrongObj`], or store it in a reachable field.
//!
//! The unsafe code lives in [`table`] (chunk memory), `object` (the
//! allocation behind each object), [`class`] (type-erased calls), [`heap`]
//! (typed resolution), the collector's mark, sweep and debug walks, and one
//! prefetch hint in [`trace`]; each block names its invariant.
//!
//! ## Glossary: Unreal → coreobject
//!
//! | Unreal | coreobject |
//! |---|---|
//! | `FUObjectArray`, `GUObjectArray` | [`Heap`] (one per instance; no global) |
//! | `FChunkedFixedUObjectArray` | the table's chunks ([`table::CHUNK_SIZE`]) |
//! | `FUObjectItem` | the 24-byte item ([`item`]) |
//! | `UObject*`, `TObjectPtr<T>` | [`AnyObj`], [`Obj<T>`] |
//! | `TWeakObjectPtr<T>` | [`Weak<T>`] |
//! | `TStrongObjectPtr<T>` | [`StrongObj<T>`] |
//! | `UCLASS`, `UPROPERTY` | `#[derive(Object)]`, its fields ([`Class`], [`FieldInfo`]) |
//! | `USTRUCT` | `#[derive(Trace)]` |
//! | `AddReferencedObjects` | a hand-written [`Trace`] impl, or `#[object(trace_with = f)]` |
//! | `FGCObject` | [`Referencer`] |
//! | `AddToRoot` / `RemoveFromRoot` | [`Heap::add_to_root`] / [`Heap::remove_from_root`] |
//! | `MarkAsGarbage` / `IsValid` | [`Heap::mark_as_garbage`] / [`Heap::contains`] |
//! | `Get(bEvenIfPendingKill)` | [`Heap::get_even_if_garbage`] |
//! | `BeginDestroy`, `IsReadyForFinishDestroy`, `FinishDestroy` | [`Lifecycle`] |
//! | `CollectGarbage` | [`Heap::collect`] |
//! | `gc.TimeBetweenPurgingPendingKillObjects` | [`GcConfig::interval`] with [`Heap::tick`] |
//! | `DisallowGC` / Mundi's `SetEnabled` | [`Heap::set_enabled`] |
//! | `OpenDisregardForGC`, `CloseDisregardForGC` | [`Heap::open_disregard_for_gc`], [`Heap::close_disregard_for_gc`] |
//! | `FUObjectCreateListener`, `FUObjectDeleteListener` | [`CreateListener`], [`DeleteListener`] |
//! | `TObjectIterator<T>` | [`Heap::iter_of`] |
//! | `ForEachObjectWithOuter` | [`Heap::for_each_with_outer`] |
//! | `FindObject`, `StaticFindObject` | [`Heap::find`], [`Heap::find_path`] |
//! | `GetPathName` | [`Heap::path_name`] |
//! | `obj refs` | [`Heap::reference_chains`] |
//! | `memreport` | [`Heap::memory_report`] |
//! | class default object (CDO) | [`Heap::class_default`] |
//! | `AlreadyAllocatedIndex` | [`Heap::create_at`] |
//! | `MaxObjectsInGame`, `MaxObjectsNotConsideredByGC` | [`HeapConfig::max_objects`], [`HeapConfig::disregard_pool_size`] |

#![warn(missing_docs)]

// Lets the derives' `::coreobject::…` paths resolve inside this crate too.
extern crate self as coreobject;

/// The README's examples, run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

pub mod class;
pub mod config;
pub mod error;
pub mod gc;
pub mod handle;
pub mod heap;
pub mod item;
pub mod listener;
mod names;
mod object;
pub mod referencer;
pub mod serial;
pub mod strong;
mod sync;
pub mod table;
pub mod trace;

#[doc(hidden)]
pub use class::{__private, ClassDesc};
pub use class::{Class, FieldInfo, Lifecycle, Object};
pub use config::{GcConfig, HeapConfig};
pub use coreobject_derive::{Object, Trace};
pub use error::{CapReport, Error};
pub use gc::{
    ClassMemory, CollectStats, DestroyCx, GcTotals, MemoryReport, Phase, PreCollect, RefChain,
    RefLink, RootKind, Tick, Trigger,
};
pub use handle::{AnyObj, Handle, Obj, Weak};
pub use heap::{Heap, ObjectRef, Spawn, TableStats};
pub use listener::{CreateListener, DeleteListener, HookId, ObjectEvent};
pub use referencer::Referencer;
pub use strong::StrongObj;
pub use trace::{PathSeg, RefKind, Trace, Visitor};

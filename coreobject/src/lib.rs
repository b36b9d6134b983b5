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
//! ## The rooms
//!
//! `ls src` is the architecture, one concept per module:
//!
//! * **`heap.rs`**: [`Heap`], a facade with private fields. Creation,
//!   resolution, roots, names, iteration, the pool, listeners and the
//!   collector's controls are all methods here, and each is a few lines that
//!   delegate to the rooms below. It holds no `unsafe` block.
//! * **`array/`**: the object array (Unreal's `FUObjectArray`). `table.rs`
//!   holds the 64K-item chunks that never move and the lock-free, one-atomic
//!   index allocator that reuses freed slots LIFO; `item.rs` the 24-byte item
//!   and every verb that writes it; `slab.rs` the objects' memory (64 KiB
//!   pages per size class); `mod.rs` the slot protocol (fill, resolve,
//!   free: bump, retire or park), the root list, the disregard-for-GC pool,
//!   and **the one safe door** through which a handle becomes a `&T` or
//!   `&mut T`, where the liveness proof is written once.
//! * **`handle.rs`**, **`serial.rs`**: [`Obj<T>`], [`Weak<T>`] and [`AnyObj`]
//!   are 8 bytes, a slot index and a serial (heap tag and generation).
//!   Resolving checks the serial, so a handle to a freed object, or one from
//!   another heap, resolves to `None` (or a precise [`ResolveError`]) and
//!   never to another object.
//! * **`class.rs`**, **`object.rs`**, **[`trace`]**: `#[derive(Object)]`
//!   registers a type's name and fields and writes its [`Trace`]
//!   implementation; every handle field is traced unless it is a [`Weak`] or
//!   marked `#[object(skip)]`. An object is an 8-byte header (its class),
//!   then the value, in a slot of its size class's pages (`array/slab.rs`,
//!   Unreal's `GUObjectAllocator`); an object with an outer carries it in the
//!   8 bytes before the header.
//! * **`lifecycle.rs`**: [`Lifecycle`], Unreal's destruction hooks, and
//!   [`DestroyCx`], what hooks may see (the array and the names, never the heap).
//! * **[`gc`]**: the collector, a state machine with private fields that
//!   borrows what it works on for the length of one slice (`Stage`: the
//!   array, the names, the listeners, the referencers) and owns its phase and
//!   work lists between slices. `mark.rs` is the prefetching, non-recursive
//!   marker; `sweep.rs` the purge in Unreal's order; `stats.rs` what a cycle
//!   and a tick report; `debug.rs` reference chains and memory reports;
//!   `par.rs` parallel marking on a persistent worker pool.
//! * **`inners.rs`**: the outer → inners index, kept at creation and free,
//!   for [`Heap::for_each_with_outer`] and, with
//!   [`GcConfig::outer_keeps_inners`], for the marker (see [`gc`]).
//! * **`names.rs`**, **`listener.rs`**, **`strong.rs`**, **`referencer.rs`**,
//!   **`config.rs`**, **`error.rs`**: the (outer, name) index, create and
//!   delete listeners, [`StrongObj`], [`Referencer`], [`HeapConfig`] and
//!   [`GcConfig`], and small error types ([`ResolveError`], [`PoolError`],
//!   [`ConfigError`]) wrapped by [`Error`].
//!
//! ## Layout
//!
//! ```text
//! handle (8 bytes)   index: u32 | serial: u32 = [ heap tag: 10 bits | generation: 22 bits ]
//! item (24 bytes)    object: *Header | flags: u32 | cluster_root: u32 | serial: u32 | refcount: u32
//! object             [outer: AnyObj, if any] | header (8 bytes: class: &'static Class, tag bit 0 = has an outer) | value: T
//! page (64 KiB)      head (64 bytes: free list, room-list links, live count, bump offset) | slots of one size
//! ```
//!
//! The sizes are asserted at compile time. Marks are not in the item: the
//! collector keeps one bit per slot in a side bitmap.
//!
//! ## Two ways to report references by hand
//!
//! A [`Referencer`] (Unreal's `FGCObject`) lives *outside* the heap and is
//! registered with it; it is called through `&mut dyn Visitor`, so it can be
//! stored as a trait object:
//!
//! ```
//! use coreobject::{AnyObj, Heap, Object, Referencer, Visitor};
//! use std::sync::{Arc, Mutex};
//! #[derive(Object, Default)]
//! struct Texture;
//! struct Cache(Mutex<Vec<AnyObj>>);
//! impl Referencer for Cache {
//!     fn add_referenced_objects(&self, v: &mut dyn Visitor) {
//!         self.0.lock().unwrap().iter().for_each(|h| v.visit(*h));
//!     }
//! }
//! let mut heap = Heap::new();
//! let tex = heap.create(Texture);
//! heap.add_referencer(Arc::new(Cache(Mutex::new(vec![tex.any()]))));
//! heap.collect().unwrap();
//! assert!(heap.contains(tex));
//! ```
//!
//! `#[object(trace_with = f)]` (Unreal's `AddReferencedObjects`) lives *on a
//! class*: `f` is generic over the visitor, so the collector's own marker is
//! inlined into it:
//!
//! ```
//! use coreobject::{Heap, Obj, Object, Visitor};
//! #[derive(Object, Default)]
//! #[object(trace_with = report_packed)]
//! struct Squad {
//!     #[object(skip)]
//!     packed: Vec<u64>, // handles packed as bits, invisible to the derive
//! }
//! #[derive(Object, Default)]
//! struct Soldier;
//! fn report_packed<V: Visitor + ?Sized>(s: &Squad, v: &mut V) {
//!     for &bits in &s.packed {
//!         if let Some(h) = coreobject::AnyObj::from_bits(bits) { v.visit(h) }
//!     }
//! }
//! let mut heap = Heap::new();
//! let soldier = heap.create(Soldier);
//! let squad = heap.create(Squad { packed: vec![soldier.any().to_bits()] });
//! heap.add_to_root(squad).unwrap();
//! heap.collect().unwrap();
//! assert!(heap.contains(soldier));
//! ```
//!
//! ## The safety story
//!
//! Safe code never holds a raw pointer to an object: it holds handles, and
//! borrows from [`Heap::get`] that cannot outlive `&Heap`. Collection takes
//! `&mut Heap`, so the borrow checker guarantees no borrow survives it; every
//! collection, and every slice of an incremental one, runs at a safe point.
//! Mutation goes through [`Heap::get_mut`] (and `heap[h] = …`), the single
//! door, which is also the incremental collector's write barrier: safe code
//! cannot bypass it. [`Trace`] is a *safe* trait: a wrong implementation can
//! free an object too early, but its handles then resolve to `None`; nothing
//! dangles.
//! [`Object`], by contrast, is an `unsafe trait`, because the heap takes an
//! object's type from its class: `#[derive(Object)]` writes the `unsafe impl`
//! and keeps its contract, so safe code cannot make the heap read one type as
//! another (and the heap also checks a class's type id whenever it creates or
//! matches a `T`, in every build, at no cost for derived classes).
//!
//! Handles on the stack are **not** roots (as with Unreal's raw pointers, but
//! checked): an object reachable only from a local handle is freed by the next
//! collection. Root it, hold a [`StrongObj`], or store it in a reachable field.
//!
//! The unsafe code lives in `array/` (chunk memory and the one door from a
//! handle to a reference), `object.rs` (the allocation behind each object),
//! `class.rs` (type-erased calls), the collector's mark, sweep and debug
//! walks, `lifecycle.rs`, and one prefetch hint in [`trace`]; each block
//! names its invariant.
//!
//! ## Glossary: Unreal → coreobject
//!
//! | Unreal | coreobject |
//! |---|---|
//! | `FUObjectArray`, `GUObjectArray` | [`Heap`] (one per instance; no global) |
//! | `FChunkedFixedUObjectArray` | the array's chunks ([`CHUNK_SIZE`]) |
//! | `FUObjectItem` | the 24-byte item (see [Layout](#layout)) |
//! | `GUObjectAllocator`, Mundi's object pooling | the array's pages per size class ([`MemoryReport::page_bytes`]) |
//! | `gc.MultithreadedGC`, parallel reachability | [`GcConfig::threads`] |
//! | `UObject*`, `TObjectPtr<T>` | [`AnyObj`], [`Obj<T>`] |
//! | `Cast<T>` | [`Heap::downcast`], [`ObjectRef::typed`]; unchecked: `unsafe` [`AnyObj::assume`] |
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
//! | `gc.IncrementalReachabilityTimeLimit`, `gc.IncrementalGCTimePerFrame` | [`GcConfig::incremental`] with [`Heap::tick`] |
//! | a new collection due while one is pending (full purge) | [`GcConfig::incremental_debt`]; before it, pacing: [`GcConfig::incremental_stretch`] |
//! | `AllocateUObjectIndex` with a `SerialNumber` (undo, replication) | [`Heap::create_at_with_serial`] |
//! | `IsIncrementalPurgePending`, `IsGarbageCollecting` | [`Heap::gc_phase`] |
//! | `gc.TimeBetweenPurgingPendingKillObjects` | [`GcConfig::interval`] with [`Heap::tick`] |
//! | `DisallowGC` / Mundi's `SetEnabled` | [`Heap::set_enabled`] |
//! | `OpenDisregardForGC`, `CloseDisregardForGC` | [`Heap::open_disregard_for_gc`], [`Heap::close_disregard_for_gc`] |
//! | `FUObjectCreateListener`, `FUObjectDeleteListener` | [`CreateListener`], [`DeleteListener`] |
//! | `TObjectIterator<T>` | [`Heap::iter_of`] |
//! | `ForEachObjectWithOuter` | [`Heap::for_each_with_outer`] |
//! | `UObject::Outer` (an inner keeps its outer) | [`Spawn::outer`]; seed 001's reverse rule: [`GcConfig::outer_keeps_inners`] |
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

mod array;
mod class;
mod config;
mod error;
pub mod gc;
mod handle;
mod heap;
mod inners;
mod lifecycle;
mod listener;
mod names;
mod object;
mod referencer;
pub mod serial;
mod strong;
mod sync;
pub mod trace;

pub use array::{ObjectRef, CHUNK_SIZE};
#[doc(hidden)]
pub use class::{__private, ClassDesc};
pub use class::{Class, FieldInfo, Object};
pub use config::{GcConfig, HeapConfig};
pub use coreobject_derive::{Object, Trace};
pub use error::{CapReport, ConfigError, Error, PoolError, ResolveError, SerialRefusal};
pub use gc::debug::{ClassMemory, MemoryReport, PageClassMemory, RefChain, RefLink, RootKind};
pub use gc::{CollectStats, GcTotals, Phase, PreCollect, Tick, Trigger};
pub use handle::{AnyObj, Handle, Obj, Weak};
pub use heap::{Heap, ObjectFlags, Spawn, TableStats};
pub use lifecycle::{DestroyCx, Lifecycle};
pub use listener::{CreateListener, DeleteListener, HookId, ObjectEvent};
pub use referencer::Referencer;
pub use strong::StrongObj;
pub use trace::{PathSeg, RefKind, Trace, Visitor};

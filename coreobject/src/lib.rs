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
//! The chapters below show the rest of what a program uses: changing
//! objects, names and outers, keeping objects alive from outside the heap,
//! incremental collection, listeners, reporting references by hand, reports
//! as JSON and the collector on a timeline. The crate's `examples/` directory
//! has whole programs (`cargo run --release -p coreobject --example
//! game_loop`). A [glossary](#glossary-unreal--coreobject) from Unreal's
//! names to these ends the page.
//!
//! ## Changing objects: clone the handle list, then mutate
//!
//! `heap[h]` and [`Heap::get`] borrow the heap shared; [`Heap::get_mut`]
//! (and `heap[h] = …`) borrows it exclusively. So a loop over one object's
//! handles cannot change the objects they name while it still borrows the
//! first:
//!
//! ```compile_fail,E0502
//! # use coreobject::{Heap, Obj, Object};
//! # #[derive(Object, Default)] struct Squad { members: Vec<Obj<Soldier>> }
//! # #[derive(Object, Default)] struct Soldier { hp: i32 }
//! # let mut heap = Heap::new();
//! # let squad = heap.create(Squad::default());
//! for &m in &heap[squad].members {          // borrows `heap` shared...
//!     heap.get_mut(m).unwrap().hp -= 10;    // ...error: also borrowed mutably
//! }
//! ```
//!
//! Handles are 8-byte `Copy` values: clone the (small) list of handles
//! first, then mutate. A handle to an object freed meanwhile resolves to
//! `None`, never to another object.
//!
//! ```
//! use coreobject::{Heap, Obj, Object};
//! #[derive(Object, Default)]
//! struct Squad { members: Vec<Obj<Soldier>> }
//! #[derive(Object, Default)]
//! struct Soldier { hp: i32 }
//!
//! let mut heap = Heap::new();
//! let squad = heap.create(Squad::default());
//! for _ in 0..3 {
//!     let s = heap.create(Soldier { hp: 100 });
//!     heap[squad].members.push(s);
//! }
//! let members = heap[squad].members.clone();   // 8 bytes a handle
//! for m in members {
//!     if let Some(soldier) = heap.get_mut(m) {
//!         soldier.hp -= 10;
//!     }
//! }
//! assert!(heap[squad].members.iter().all(|&m| heap[m].hp == 90));
//! ```
//!
//! To change two or more objects at once, [`Heap::get_disjoint_mut`]
//! borrows them together (`let [a, b] = heap.get_disjoint_mut([x, y])?`).
//!
//! `get_mut` is also the incremental collector's write barrier (see
//! [Incremental collection](#incremental-collection-and-heaptick)), so it
//! (with `get_disjoint_mut`, which passes each object through the same
//! barrier) is the one way to change an object.
//!
//! ## Names, outers and `spawn`
//!
//! [`Heap::spawn`] creates an object with options: a name, an outer (the
//! object it lives in, Unreal's `Outer`) and a root flag. Names are unique
//! among the objects of one outer; [`Heap::find`], [`Heap::find_path`] and
//! [`Heap::path_name`] use them. An object keeps its outer alive, as in
//! Unreal 5 ([`GcConfig::outer_keeps_inners`] adds the reverse).
//! `spawn`, like [`Heap::create`], takes `&Heap`, so any thread may create.
//! The code that owns the heap can create through `&mut Heap` instead,
//! with [`Heap::create_mut`] and [`Heap::spawn_mut`]: the same objects and
//! handles, without any lock or atomic read-modify-write (the borrow
//! proves no other thread is creating). [`Heap::get_many`] resolves a list
//! of handles, reading the next ones' entries and objects ahead.
//! A name is a [`Name`]: an interned base plus a number, as Unreal's
//! `FName` (`Level_1` is `Level` and 1), so [`Heap::intern`] once and
//! [`Name::with_number`] cost no string work; [`Spawn::unique_name`] lets
//! the heap pick the number (from 2^31 up, never taken by another object),
//! which also skips the uniqueness lookup: the cheapest name for objects
//! made by the thousand.
//!
//! ```
//! use coreobject::{Heap, Object};
//! #[derive(Object, Default)]
//! struct World;
//! #[derive(Object, Default)]
//! struct Level { index: u32 }
//!
//! let mut heap = Heap::new();
//! let world = heap.spawn(World).name("World").root().create().unwrap();
//! let level = heap.spawn(Level { index: 1 }).outer(world).name("Level_1").create().unwrap();
//! assert_eq!(heap.find_path("World.Level_1"), Some(level.any()));
//! assert_eq!(heap.path_name(level).as_deref(), Some("World.Level_1"));
//! // Taken under this outer: refused, with an error that says so.
//! assert!(heap.spawn(Level::default()).outer(world).name("Level_1").create().is_err());
//! // Nothing holds the level, so it is freed, and its name with it.
//! heap.collect().unwrap();
//! assert_eq!(heap.find_path("World.Level_1"), None);
//! ```
//!
//! ## Keeping an object alive from outside: `StrongObj`
//!
//! Handles on the stack are not roots. To keep an object alive from code
//! outside the heap (a system, a UI widget, another thread), root it
//! ([`Heap::add_to_root`], until [`Heap::remove_from_root`]) or hold a
//! [`StrongObj`] (Unreal's `TStrongObjectPtr`), which roots it while any
//! clone of it lives and can be sent to another thread:
//!
//! ```
//! use coreobject::{Heap, Object};
//! #[derive(Object, Default)]
//! struct Texture;
//!
//! let mut heap = Heap::new();
//! let tex = heap.create(Texture);
//! let strong = heap.strong(tex).unwrap();      // roots it while it lives
//! heap.collect().unwrap();
//! assert!(heap.contains(tex));
//! assert_eq!(strong.obj(), tex);
//! drop(strong);
//! heap.collect().unwrap();
//! assert!(!heap.contains(tex));
//! ```
//!
//! ## Incremental collection and `Heap::tick`
//!
//! [`Heap::collect`] collects at once. A game calls [`Heap::tick`] once a
//! frame instead: the [`GcConfig`] triggers (time between collections,
//! object count, bytes, heap growth) decide when a cycle starts, and with
//! [`GcConfig::incremental`] set, each tick runs one slice of the cycle of
//! at most that budget (a cap by default: [`GcConfig::incremental`] says
//! what a slice finishes past it, [`GcConfig::incremental_stretch`] how to
//! let it run longer) and returns; the program runs between slices.
//! [`Heap::data_mut`] changes an object's handle-free fields at no cost to
//! the collector (see [`Data`]).
//! The returned [`Tick`] says what the slice did (`started`, `completed`
//! with the cycle's [`CollectStats`], `phase`, `work`, `freed`, `time`).
//! Objects created during a cycle survive it, and [`Heap::get_mut`] tells
//! the collector what changed, so nothing reachable is freed. [`Heap::step`]
//! runs a slice bounded by work instead of time.
//!
//! ```
//! use coreobject::{GcConfig, Heap, HeapConfig, Obj, Object};
//! use std::time::Duration;
//! #[derive(Object, Default)]
//! struct World { actors: Vec<Obj<Actor>> }
//! #[derive(Object, Default)]
//! struct Actor { hp: i32 }
//!
//! let gc = GcConfig {
//!     incremental: Some(Duration::from_millis(2)), // a slice of about 2 ms per tick
//!     growth: Some(2.0),                           // a cycle when the heap doubles
//!     growth_floor: 1_000,
//!     ..GcConfig::MANUAL
//! };
//! let mut heap = Heap::with_config(HeapConfig { gc, ..HeapConfig::DEFAULT }).unwrap();
//! let world = heap.spawn(World::default()).root().create().unwrap();
//! let mut freed = 0;
//! for _frame in 0..100 {
//!     // Game logic: 100 new actors a frame; the world keeps the last 500.
//!     for _ in 0..100 {
//!         let a = heap.create(Actor { hp: 100 });
//!         heap[world].actors.push(a);
//!     }
//!     let actors = &mut heap[world].actors;
//!     if actors.len() > 500 {
//!         actors.drain(..100);
//!     }
//!     // The collector's share of the frame.
//!     let tick = heap.tick(Duration::from_millis(16));
//!     if let Some(stats) = tick.completed {
//!         freed += stats.freed;
//!     }
//! }
//! assert!(freed > 0);
//! assert!(heap[world].actors.iter().all(|&a| heap.contains(a)));
//! ```
//!
//! How marking stays correct while the program runs, and how slices are
//! paced, is told in [`gc`].
//!
//! ## Minor cycles and GC clusters
//!
//! Two ways to make a collection cost less than the whole heap.
//! **Generational collection** (on by default): [`Heap::collect_minor`]
//! marks only from what changed since the last cycle and frees only young
//! objects (see [`gc`]'s chapter); [`Heap::tick`] runs them on its own,
//! each time the objects created reach a share of the heap
//! ([`GcConfig::young_share`], a quarter by default, or a fixed
//! [`GcConfig::young_threshold`]). **GC clusters** (Unreal's
//! `FUObjectCluster`, made at run time): [`Heap::create_cluster`] groups an
//! object and what it reaches inside it (objects whose outer chain reaches
//! it; everything else it references stays outside, kept alive as an
//! external reference), and the collector keeps or frees the group as one
//! unit; [`Heap::cluster_report`] lists them, [`Heap::verify_clusters`]
//! checks their bookkeeping, and [`Heap::neighbourhood_dot`] draws the
//! references around an object for Graphviz.
//!
//! ```
//! use coreobject::{Heap, Obj, Object};
//! #[derive(Object, Default)]
//! struct Level { props: Vec<Obj<Prop>> }
//! #[derive(Object, Default)]
//! struct Prop;
//! let mut heap = Heap::new();
//! let level = heap.spawn(Level::default()).root().create().unwrap();
//! for _ in 0..10 {
//!     let p = heap.spawn(Prop).outer(level).create().unwrap(); // inside the level
//!     heap[level].props.push(p);
//! }
//! let cluster = heap.create_cluster(level).unwrap();
//! assert_eq!(heap.cluster_members(cluster).len(), 11);
//! heap.collect().unwrap();
//! assert!(heap.verify_clusters().is_empty());
//! heap.remove_from_root(level).unwrap();
//! assert_eq!(heap.collect().unwrap().freed, 11); // freed as one unit
//! ```
//!
//! ## Listening to creation and deletion
//!
//! Create and delete listeners (Unreal's `FUObjectCreateListener` and
//! `FUObjectDeleteListener`) see every object come and go, with its handle
//! and class: [`Heap::on_create`] and [`Heap::on_delete`] take closures,
//! [`Heap::add_create_listener`] and [`Heap::add_delete_listener`] a
//! [`CreateListener`] or [`DeleteListener`]. They get no reference to the
//! heap, so they cannot re-enter it. A create listener runs on the creating
//! thread (creation takes `&Heap`, so listeners are `Send + Sync`); a
//! delete listener runs during the purge, after `finish_destroy` and before
//! the slot is freed.
//!
//! ```
//! use coreobject::{Heap, Object, ObjectEvent};
//! use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
//! use std::sync::Arc;
//! #[derive(Object, Default)]
//! struct Coin;
//!
//! let mut heap = Heap::new();
//! let (made, gone) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
//! let m = made.clone();
//! heap.on_create(move |e: &ObjectEvent| {
//!     assert_eq!(e.class.name(), "Coin");
//!     m.fetch_add(1, SeqCst);
//! });
//! let g = gone.clone();
//! let id = heap.on_delete(move |_: &ObjectEvent| { g.fetch_add(1, SeqCst); });
//! heap.create(Coin);
//! heap.create(Coin);
//! heap.collect().unwrap();                     // nothing holds the coins
//! assert_eq!((made.load(SeqCst), gone.load(SeqCst)), (2, 2));
//! assert!(heap.remove_listener(id));
//! ```
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
//! ## Reports as JSON: the `serde` feature
//!
//! With the `serde` feature (`coreobject = { version = "0.1", features =
//! ["serde"] }`), the collector's reports implement `serde::Serialize`:
//! [`CollectStats`], [`GcTotals`], [`Tick`], [`MemoryReport`], [`RefChain`]
//! and [`TableStats`], for logs, dashboards or a JSON file per run. Objects
//! are saved by [`Heap::save`] (see [`save`]), which writes handles as
//! package indices; a handle serialized outside a save is an error.
//!
#![cfg_attr(feature = "serde", doc = "```")]
#![cfg_attr(not(feature = "serde"), doc = "```ignore")]
//! // Needs the `serde` feature; `cargo test -p coreobject --features serde --doc` runs it.
//! use coreobject::{Heap, Object};
//! #[derive(Object, Default)]
//! struct Coin;
//!
//! let mut heap = Heap::new();
//! heap.create(Coin);
//! let stats = heap.collect().unwrap();
//! let json = serde_json::to_value(&stats).unwrap();
//! assert_eq!(json["freed"], 1);
//! let totals = serde_json::to_string(heap.gc_totals()).unwrap();
//! assert!(totals.contains("\"collections\":1"));
//! ```
//!
//! ## Saving and loading
//!
//! Classes that opt in with `#[object(save)]` can be saved: the whole heap,
//! a level and everything inside it, or a set of objects, to a package
//! with Unreal's layout (name, class, import and export tables; a handle on
//! disk is a package index), binary or JSON. [`Heap::load`] instantiates a
//! package into a live heap with every handle patched; [`Heap::restore`]
//! makes an exact copy of a saved heap, every old handle resolving again.
//! Old saves load after fields are added, removed, renamed or reordered.
//! The [`save`] module is the chapter: what is and is not saved, the two
//! ways to load, the evolution rules, the errors.
//!
//! A world saved every few minutes should not be rewritten each time:
//! [`Heap::save_store`] writes into a [`save::SaveStore`] (a file, or an
//! embedded redb database with the `redb` feature) only the objects created
//! or changed since the last save, keyed by persistent ids that outlive the
//! process ([`Heap::persistent_id`]), in one crash-safe commit.
//! [`Heap::capture`] is the game thread's half (it costs the objects that
//! changed, not the table, and [`Heap::capture_step`] spreads it over frames
//! like a GC slice); the commit runs on a worker while the game goes on, and
//! a crash at any point leaves the last committed save whole (see the
//! [`save`] chapter's "Saves that cost what changed", "Saving while the game
//! runs" and "Crash safety").
//!
//! ```
//! use coreobject::save::Selection;
//! use coreobject::{Heap, Obj, Object};
//! #[derive(Object, Default)]
//! #[object(save)]
//! struct Door { open: bool, next: Option<Obj<Door>> }
//!
//! let mut heap = Heap::new();
//! let a = heap.spawn(Door::default()).name("A").root().create().unwrap();
//! let b = heap.spawn(Door { open: true, next: Some(a) }).name("B").outer(a).create().unwrap();
//! heap[a].next = Some(b);
//! let mut bytes = Vec::new();
//! heap.save(Selection::subtree(a), &mut bytes).unwrap();
//!
//! let mut other = Heap::new();
//! other.load(&bytes[..]).unwrap();
//! let b2 = other.find_path("A.B").unwrap();
//! assert!(other[other.downcast::<Door>(b2).unwrap()].open);
//! ```
//!
//! ## The collector on a timeline: `tracing`
//!
//! The collector emits [`tracing`](https://docs.rs/tracing) spans: one per
//! slice (`gc.slice`, with its phase, work done and objects freed) and one
//! per phase inside it (`gc.mark`, `gc.sweep`, `gc.destroy`, `gc.free`). With
//! a subscriber such as `tracing-chrome` or `tracing-tracy` installed, the
//! collector shows up on a timeline beside the program's own spans; without
//! one they cost next to nothing. The spans and their fields are listed in
//! [`gc`](gc#tracing); `examples/gc_timeline.rs` writes a Chrome trace
//! (`cargo run --release -p coreobject --example gc_timeline`).
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
//! ## Inside the crate
//!
//! For contributors and the curious: `ls src` is the architecture, one
//! concept per module. The design decisions behind it, how the crate is
//! tested and what is not done yet are in the contributor chapter,
//! `CONTRIBUTING.md` at the root of the repository; every measurement, with
//! the command that produces it, is in `BENCHMARKS.md` beside it.
//!
//! * **`heap/`**: [`Heap`], a facade with private fields, one file per
//!   topic of its methods: `create.rs` (creating, class defaults),
//!   `access.rs` (resolving; `get_mut`, the write barrier's caller),
//!   `roots.rs` (roots, strong handles, garbage marks), `names.rs`,
//!   `iter.rs` (iteration and counts), `pool.rs` (the disregard-for-GC
//!   pool), `hooks.rs` (listeners and referencers), `collect.rs` (cycles and
//!   the collector's settings), `clusters.rs` (GC clusters, their report and
//!   check, Graphviz pictures), `debug.rs` (reports). Each method is a few
//!   lines that delegate to the rooms below. It holds no `unsafe` block, and
//!   `gc/` never imports it.
//! * **`array/`**: the object array (Unreal's `FUObjectArray`). `table.rs`
//!   holds the 64K-item chunks that never move and the lock-free, one-atomic
//!   index allocator that reuses freed slots LIFO; `item.rs` the 24-byte item
//!   and every verb that writes it; `slab.rs` the objects' memory (64 KiB
//!   pages per size class); `tlab.rs` the per-thread creation caches
//!   (batches of reserved indices and object slots for creation through
//!   `&Heap`, owned by the heap, settled at every sync); `mod.rs` the slot protocol (fill, resolve,
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
//!   work lists between slices. `mod.rs` drives a cycle (start, slices,
//!   completion); `plan.rs` is the policy (which kind of cycle a tick
//!   starts, pacing); `barrier.rs` what creation and mutation tell the
//!   collector (the write barrier, the remembered set); `mark_phase.rs` one
//!   slice of marking (the pool, the drain, the looks at what the program
//!   did); `mark.rs` is the prefetching, non-recursive marker and `par.rs`
//!   its parallel form on a persistent worker pool; `sweep.rs` the purge in
//!   Unreal's order; `stats.rs` what a cycle and a tick report; `debug.rs`
//!   reference chains and memory reports.
//! * **`cluster.rs`**: GC clusters' bookkeeping (members by root) and
//!   their report types; the markers grey a cluster's members together.
//! * **`inners.rs`**: the outer → inners index, kept at creation and free,
//!   for [`Heap::for_each_with_outer`] and, with
//!   [`GcConfig::outer_keeps_inners`], for the marker (see [`gc`]).
//! * **`names.rs`**, **`listener.rs`**, **`strong.rs`**, **`referencer.rs`**,
//!   **`config.rs`**, **`error.rs`**: the (outer, name) index, create and
//!   delete listeners, [`StrongObj`], [`Referencer`], [`HeapConfig`] and
//!   [`GcConfig`], and small error types ([`ResolveError`], [`PoolError`],
//!   [`ConfigError`]) wrapped by [`Error`].
//! * **[`save`]** (with `heap/save.rs`, its door into the heap): packages.
//!   `package.rs` the tables and both forms on disk, `write.rs` a package
//!   from a selection, `read.rs` the checks and both ways to load,
//!   `schema.rs` a file's class layout matched to today's once per class,
//!   `registry.rs` classes by name, `handles.rs` the save or load in
//!   progress that handles' serde impls (in `handle.rs`) consult. It reads
//!   objects through their classes as the collector does; `#[object(save)]`
//!   writes each class's field code (`coreobject-derive/src/save.rs`).
//!   Stores (with `heap/store.rs`): `ids.rs` persistent ids beside the
//!   object table and the dirty set of slots (what changed since the last
//!   save is an item flag set by `get_mut`; its first setting, creation,
//!   root and garbage marks, the sweep and the purge mark the slot dirty),
//!   `capture.rs` the capture in budgeted steps, `store.rs` the records, the
//!   load by id and the file store, `redb_store.rs` the redb store.
//!
//! ### Memory layout
//!
//! ```text
//! handle (8 bytes)   index: u32 | serial: u32 = [ heap tag: 10 bits | generation: 22 bits ]
//! item (24 bytes)    object: *Header | serial: u32 | flags: u32 | cluster_root: u32 | refcount: u32
//! object             [outer: AnyObj, if any] | header (8 bytes: class: &'static Class, tag bit 0 = has an outer) | value: T
//! page (64 KiB)      head (64 bytes: free list, room-list links, live count, bump offset) | slots of one size
//! ```
//!
//! The sizes are asserted at compile time. Marks are not in the item: the
//! collector keeps one bit per slot in a side bitmap.
//!
//! ## Glossary: Unreal → coreobject
//!
//! | Unreal | coreobject |
//! |---|---|
//! | `FUObjectArray`, `GUObjectArray` | [`Heap`] (one per instance; no global) |
//! | `FChunkedFixedUObjectArray` | the array's chunks ([`CHUNK_SIZE`]) |
//! | `FUObjectItem` | the 24-byte item (see [Memory layout](#memory-layout)) |
//! | `GUObjectAllocator`, object pooling | the array's pages per size class ([`MemoryReport::page_bytes`]) |
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
//! | `AllocateUObjectIndex` with a `SerialNumber` (undo, replication) | [`Heap::create_at_with_serial`], with a name and an outer: [`Heap::spawn_at`] |
//! | `UObject::Rename` | [`Heap::rename`] |
//! | `IsIncrementalPurgePending`, `IsGarbageCollecting` | [`Heap::gc_phase`] |
//! | `gc.TimeBetweenPurgingPendingKillObjects` | [`GcConfig::interval`] with [`Heap::tick`] |
//! | `DisallowGC` (as an on/off switch) | [`Heap::set_enabled`] |
//! | `OpenDisregardForGC`, `CloseDisregardForGC` | [`Heap::open_disregard_for_gc`], [`Heap::close_disregard_for_gc`] |
//! | `FUObjectCreateListener`, `FUObjectDeleteListener` | [`CreateListener`], [`DeleteListener`] |
//! | `TObjectIterator<T>` | [`Heap::iter_of`] |
//! | `ForEachObjectWithOuter` | [`Heap::for_each_with_outer`] |
//! | `UObject::Outer` (an inner keeps its outer) | [`Spawn::outer`]; the reverse (an outer keeps its inners): [`GcConfig::outer_keeps_inners`] |
//! | (no Unreal equivalent) generational minor cycles | [`Heap::collect_minor`], [`CycleKind`], [`GcConfig::young_threshold`] |
//! | `FUObjectCluster`, `CreateCluster`, `ClusterRootIndex` | [`Heap::create_cluster`], [`ClusterId`], [`Heap::cluster_of`] |
//! | `CanBeInCluster` | `#[object(cluster = false)]`, [`Class::can_be_in_cluster`] |
//! | `gc.ListClusters` | [`Heap::cluster_report`] |
//! | `FName` | [`Name`] (interned base + number: [`Heap::intern`], [`Name::with_number`], [`Heap::name`]) |
//! | `MakeUniqueObjectName` (its fast path) | [`Spawn::unique_name`] |
//! | `FindObject`, `StaticFindObject` | [`Heap::find`], [`Heap::find_path`]; typed: [`Heap::find_of`], [`Heap::find_path_of`] |
//! | `GetPathName` | [`Heap::path_name`] |
//! | `obj refs` | [`Heap::reference_chains`] |
//! | `memreport` | [`Heap::memory_report`] |
//! | class default object (CDO) | [`Heap::class_default`] |
//! | `AlreadyAllocatedIndex` | [`Heap::create_at`] |
//! | `MaxObjectsInGame`, `MaxObjectsNotConsideredByGC` | [`HeapConfig::max_objects`], [`HeapConfig::disregard_pool_size`] |
//! | `FArchive`, `Serialize(FArchive&)` | serde, field by field ([`save::FieldWriter`], [`save::FieldReader`]) |
//! | `FLinkerSave`, `SavePackage` | [`Heap::save`], [`save::Selection`] |
//! | `FLinkerLoad`, `LoadPackage` (with `FindObject` for imports) | [`Heap::load`] (instantiate), [`Heap::restore`] (exact) |
//! | export table, import table, `FPackageIndex` | the package's tables; package indices (see [`save`]) |
//! | `SaveGame` property flag, `Transient` | `#[object(save)]` on the class, `#[object(transient)]` on a field |
//! | tagged properties, `CustomVersion`, `CoreRedirects` | fields matched by name, `#[object(version, migrate)]`, `#[object(rename_from)]` |
//! | `SaveGameToSlot`, `AsyncSaveGameToSlot` | [`Heap::save_store`]; [`Heap::capture`] (or [`Heap::capture_step`] over frames) then [`save::SaveStore::commit`] on a worker |
//! | `FRemoteObjectId` (server id + serial) | [`save::PersistentId`] (origin + serial) |

#![warn(missing_docs)]

// Lets the derives' `::coreobject::…` paths resolve inside this crate too.
extern crate self as coreobject;

/// The README's examples, run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

mod array;
mod class;
mod cluster;
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
pub mod save;
pub mod serial;
mod strong;
mod sync;
pub mod trace;

pub use array::{ObjectRef, CHUNK_SIZE};
#[doc(hidden)]
pub use class::{__private, ClassDesc};
pub use class::{Class, FieldInfo, Object};
pub use cluster::{ClusterError, ClusterId, ClusterInfo, ClusterReport, ClusterViolation};
pub use config::{GcConfig, HeapConfig};
pub use coreobject_derive::{Data, Object, Trace};
pub use error::{CapReport, ConfigError, Error, PoolError, ResolveError, SerialRefusal};
pub use gc::debug::{ClassMemory, MemoryReport, PageClassMemory, RefChain, RefLink, RootKind};
pub use gc::{CollectStats, CycleKind, GcTotals, Phase, PreCollect, Tick, Trigger};
pub use handle::{AnyObj, Handle, Obj, Weak};
pub use heap::{GetMany, Heap, ObjectFlags, Rename, Spawn, SpawnAt, TableStats};
pub use lifecycle::{DestroyCx, Lifecycle};
pub use listener::{CreateListener, DeleteListener, HookId, ObjectEvent};
pub use names::{IntoName, Name};
pub use referencer::Referencer;
pub use save::{LoadError, Loaded, SaveError, Selection};
pub use strong::StrongObj;
pub use trace::{Data, PathSeg, RefKind, Sealed, Trace, Visitor};

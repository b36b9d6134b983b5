//! The heap (Unreal's `FUObjectArray` with its object hash): creation,
//! resolution, roots, names, iteration and the disregard-for-GC pool.
//!
//! Creation, resolution and rooting take `&Heap` and work from any thread.
//! Mutation of an object ([`Heap::get_mut`]) and collection take `&mut Heap`,
//! so the borrow checker puts every collection at a safe point: no `&T` into
//! the heap survives one.

use std::any::TypeId;
use std::collections::HashMap;
use std::fmt;
use std::ops::{Index, IndexMut};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::array::ObjectArray;
use crate::class::Object;
use crate::cluster::Clusters;
use crate::config::HeapConfig;
use crate::error::{ConfigError, Error, ResolveError};
use crate::gc::Collector;
use crate::handle::{AnyObj, Obj};
use crate::inners::Inners;
use crate::lifecycle::Caught;
use crate::listener::{HookId, Listeners};
use crate::names::{Hint as NameHint, IntoName, NameArg, Names};
use crate::referencer::Referencer;
use crate::serial;

mod access;
mod clusters;
mod collect;
mod create;
mod debug;
mod hooks;
mod iter;
mod names;
mod pool;
mod rename;
mod roots;
mod save;
mod store;

pub use access::GetMany;
pub use create::SpawnAt;
pub use rename::Rename;

/// An object heap: the object table, its collector and everything registered
/// with it. See the [crate docs](crate) for a tour.
///
/// ```
/// use coreobject::{Heap, Obj, Object};
///
/// #[derive(Object, Default)]
/// struct Node { next: Option<Obj<Node>>, value: i64 }
///
/// let mut heap = Heap::new();
/// let a = heap.create(Node { next: None, value: 1 });
/// let b = heap.create(Node { next: Some(a), value: 2 });
/// heap.add_to_root(b).unwrap();
/// let stats = heap.collect().unwrap();
/// assert_eq!(stats.marked, 2);
/// assert_eq!(heap[heap[b].next.unwrap()].value, 1);
/// ```
pub struct Heap {
    array: ObjectArray,
    config: HeapConfig,
    names: RwLock<Names>,
    /// Where the name index's entries are, for a prefetch before the lock.
    name_hint: NameHint,
    /// The outer → inners index (objects created with an outer only), built
    /// on first need (`for_each_with_outer`, or a cycle with
    /// `GcConfig::outer_keeps_inners`) and kept from then on, so that programs
    /// that use neither pay nothing at creation or free.
    inners: Mutex<Inners>,
    /// GC clusters ([`Heap::create_cluster`]).
    clusters: Mutex<Clusters>,
    /// Whether the index is built and kept.
    inners_on: AtomicBool,
    listeners: Listeners,
    referencers: Vec<(HookId, Arc<dyn Referencer>)>,
    defaults: RwLock<HashMap<TypeId, AnyObj>>,
    gc: Collector,
    next_hook: u64,
    /// Persistent ids and changed-since-the-last-save bits (`save/ids.rs`).
    store: crate::save::ids::Tracker,
    /// Slots a capture looks at (`save/ids.rs`), marked through `&self`.
    store_dirty: crate::save::ids::Dirty,
}

impl Default for Heap {
    fn default() -> Self {
        Heap::new()
    }
}

impl fmt::Debug for Heap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Heap")
            .field("tag", &self.array.tag())
            .field("live", &self.len())
            .field("cap", &self.array.cap())
            .finish_non_exhaustive()
    }
}

/// Counts describing the object table.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableStats {
    /// Objects allocated (live, garbage or awaiting destruction).
    pub objects: usize,
    /// Slots handed out at least once.
    pub high_water: u32,
    /// Freed slots waiting for reuse.
    pub free: usize,
    /// Slots that threads creating through `&Heap` reserved in batches and
    /// have not used yet (at most one batch of 63 per thread); they go back
    /// to `free` at the next collection, or any call that takes `&mut Heap`
    /// to create at the cap. Between those, `high_water` is `objects +
    /// free + retired + reserved`.
    pub reserved: usize,
    /// Slots retired because their generation counter ran out.
    pub retired: u32,
    /// Chunks allocated.
    pub chunks: usize,
    /// The object cap.
    pub cap: u32,
    /// Objects in the disregard-for-GC pool.
    pub disregard: u32,
}

/// One object's item flags, for debugging (Unreal's `EInternalObjectFlags`).
/// From [`Heap::flags_of`]; its `Display` lists the flags that are set.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ObjectFlags {
    /// In the root set ([`Heap::add_to_root`]).
    pub rooted: bool,
    /// Marked as garbage ([`Heap::mark_as_garbage`]) and not collected yet.
    pub garbage: bool,
    /// Found unreachable by the collector: being destroyed (hooks running or
    /// awaiting `is_ready_for_finish_destroy`), or condemned by the
    /// incremental purge in flight and not swept yet.
    pub unreachable: bool,
    /// In the disregard-for-GC pool: permanent.
    pub disregard: bool,
    /// A class default object ([`Heap::class_default`]): permanent.
    pub class_default: bool,
    /// Its class has destruction hooks ([`Lifecycle::HAS_HOOKS`](crate::Lifecycle::HAS_HOOKS)).
    pub has_hooks: bool,
    /// [`StrongObj`](crate::StrongObj) handles keeping it alive.
    pub strong_count: u32,
    /// The slot index of its cluster's root (Unreal's `ClusterRootIndex`), if
    /// it is in a GC cluster ([`Heap::create_cluster`]).
    pub cluster_root: Option<u32>,
}

impl fmt::Display for ObjectFlags {
    /// The set flags, separated by ` | `, e.g. `rooted | class_default |
    /// strong_count=2`; `none` when nothing is set.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bools = [
            (self.rooted, "rooted"),
            (self.garbage, "garbage"),
            (self.unreachable, "unreachable"),
            (self.disregard, "disregard"),
            (self.class_default, "class_default"),
            (self.has_hooks, "has_hooks"),
        ];
        let mut sep = "";
        for (_, name) in bools.iter().filter(|(set, _)| *set) {
            write!(f, "{sep}{name}")?;
            sep = " | ";
        }
        if self.strong_count > 0 {
            write!(f, "{sep}strong_count={}", self.strong_count)?;
            sep = " | ";
        }
        if let Some(root) = self.cluster_root {
            write!(f, "{sep}cluster_root={root}")?;
            sep = " | ";
        }
        if sep.is_empty() {
            f.write_str("none")?;
        }
        Ok(())
    }
}

/// A builder for objects with an outer, a name, or a root flag. From
/// [`Heap::spawn`].
///
/// ```
/// use coreobject::{Heap, Object};
/// #[derive(Object, Default)]
/// struct Level;
/// let heap = Heap::new();
/// let world = heap.spawn(Level).name("World").root().create().unwrap();
/// let lvl = heap.spawn(Level).outer(world).name("Level_3").create().unwrap();
/// assert_eq!(heap.path_name(lvl).unwrap(), "World.Level_3");
/// assert_eq!(heap.find_path("World.Level_3"), Some(lvl.any()));
/// ```
///
/// From [`Heap::spawn_mut`], the builder holds the heap exclusively and
/// [`create`](Spawn::create) takes no lock.
#[must_use = "call .create() to make the object"]
#[derive(Debug)]
pub struct Spawn<'h, T: Object, H = &'h Heap> {
    heap: H,
    value: T,
    outer: Option<AnyObj>,
    name: Option<NameArg>,
    unique: bool,
    root: bool,
    _heap: std::marker::PhantomData<&'h Heap>,
}

impl<T: Object, H> Spawn<'_, T, H> {
    /// Sets the outer (the object this one lives in). The new object keeps
    /// its outer alive; with [`GcConfig::outer_keeps_inners`](crate::GcConfig::outer_keeps_inners) the outer keeps
    /// it alive too.
    pub fn outer(mut self, outer: impl Into<AnyObj>) -> Self {
        self.outer = Some(outer.into());
        self
    }
    /// Names the object; names are unique among objects with the same outer.
    /// Takes a string (`&str`, `String`, …) or a [`Name`](crate::Name): a `Name` from
    /// [`Heap::intern`] and [`Name::with_number`](crate::Name::with_number) costs no string work, which
    /// matters when naming many objects `Actor_0`, `Actor_1`, ….
    ///
    /// [`create`](Self::create) refuses a name that is empty, contains `.`
    /// or starts with `Default__` ([`Error::InvalidName`]), one already
    /// taken under the same outer ([`Error::NameTaken`]), and a `Name` this
    /// heap does not hold ([`Error::StaleName`]).
    ///
    /// ```
    /// use coreobject::{Error, Heap, Object};
    /// #[derive(Object, Default)]
    /// struct Actor;
    /// let heap = Heap::new();
    /// let actor = heap.intern("Actor").unwrap();
    /// for i in 0..3 {
    ///     heap.spawn(Actor).name(actor.with_number(i)).create().unwrap();
    /// }
    /// assert!(heap.find(None, "Actor_2").is_some());
    /// let taken = heap.spawn(Actor).name("Actor_1").create().unwrap_err();
    /// assert!(matches!(taken, Error::NameTaken { .. }));
    /// ```
    pub fn name(mut self, name: impl IntoName) -> Self {
        self.name = Some(name.into_name_arg());
        self.unique = false;
        self
    }
    /// Names the object with a name no object has had under this heap's
    /// generated numbering: `base` (a string or a [`Name`](crate::Name);
    /// a number it carries is ignored) with the next number of the base's
    /// own counter, from 2^31 up (`Actor_2147483648`, `Actor_2147483649`,
    /// …), like the fast path of Unreal's `MakeUniqueObjectName`. A program
    /// that names objects itself with numbers in that range moves the
    /// counter past them, so the name is unique by construction and is not
    /// looked up when the object is created: this is the cheapest way to
    /// name many objects. The name is found by [`Heap::find`] and
    /// [`Heap::name`] like any other.
    ///
    /// [`create`](Self::create) refuses a base that is empty, contains `.`
    /// or starts with `Default__` ([`Error::InvalidName`]) and a `Name` this
    /// heap does not hold ([`Error::StaleName`]).
    ///
    /// ```
    /// use coreobject::{Heap, Object};
    /// #[derive(Object, Default)]
    /// struct Bullet;
    /// let heap = Heap::new();
    /// let bullet = heap.intern("Bullet").unwrap();
    /// let a = heap.spawn(Bullet).unique_name(bullet).create().unwrap();
    /// let b = heap.spawn(Bullet).unique_name(bullet).create().unwrap();
    /// assert_eq!(heap.name_of(a).as_deref(), Some("Bullet_2147483648"));
    /// assert_eq!(heap.name(b), Some(bullet.with_number((1 << 31) + 1)));
    /// assert_eq!(heap.find(None, "Bullet_2147483649"), Some(b.any()));
    /// ```
    pub fn unique_name(mut self, base: impl IntoName) -> Self {
        self.name = Some(base.into_name_arg());
        self.unique = true;
        self
    }
    /// Adds the object to the root set.
    pub fn root(mut self) -> Self {
        self.root = true;
        self
    }
}

impl<T: Object> Spawn<'_, T> {
    /// Creates the object.
    #[inline]
    pub fn create(self) -> Result<Obj<T>, Error> {
        let h = self
            .heap
            .create_full(self.value, self.outer, self.name.as_ref(), self.unique)?;
        if self.root {
            self.heap.add_to_root(h)?;
        }
        Ok(h)
    }
}

impl Heap {
    /// A heap with [`HeapConfig::DEFAULT`].
    ///
    /// # Panics
    /// If 1023 heaps are alive at once (see [`Heap::with_config`]).
    ///
    /// ```
    /// let heap = coreobject::Heap::new();
    /// assert!(heap.is_empty());
    /// ```
    pub fn new() -> Heap {
        Heap::with_config(HeapConfig::DEFAULT).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A heap with the given settings.
    ///
    /// ```
    /// use coreobject::{Error, Heap, HeapConfig};
    /// let bad = HeapConfig { max_objects: 0, ..HeapConfig::DEFAULT };
    /// assert!(matches!(Heap::with_config(bad), Err(Error::Config(_))));
    /// ```
    pub fn with_config(config: HeapConfig) -> Result<Heap, Error> {
        Heap::check_config(&config)?;
        let lease = serial::acquire(config.generation_bits).ok_or(Error::TooManyHeaps {
            live_limit: serial::LIVE_LIMIT,
        })?;
        Ok(Heap::with_lease(config, lease))
    }

    /// Refuses settings a heap cannot be made with.
    fn check_config(config: &HeapConfig) -> Result<(), Error> {
        if config.max_objects == 0 || config.max_objects > 1 << 31 {
            return Err(ConfigError::MaxObjects.into());
        }
        if config.generation_bits == 0 || config.generation_bits > serial::GENERATION_BITS {
            return Err(ConfigError::GenerationBits.into());
        }
        if config.disregard_pool_size > config.max_objects {
            return Err(ConfigError::PoolSize.into());
        }
        config.gc.validate()?;
        Ok(())
    }

    /// A heap with checked settings and a tag already claimed.
    fn with_lease(config: HeapConfig, lease: serial::TagLease) -> Heap {
        let mut array = ObjectArray::with_huge_pages(
            config.max_objects,
            config.preallocate,
            config.disregard_pool_size,
            lease,
            config.huge_pages,
        );
        if config.gc.generational {
            // Every object starts young: the allocator records them for the
            // first minor cycle, and the barriers watch from the start.
            array.start_recording();
            array.watch(true);
        }
        Heap {
            array,
            names: RwLock::new(Names::default()),
            name_hint: NameHint::default(),
            inners: Mutex::new(Inners::default()),
            clusters: Mutex::new(Clusters::default()),
            inners_on: AtomicBool::new(false),
            listeners: Listeners::default(),
            referencers: Vec::new(),
            defaults: RwLock::new(HashMap::new()),
            gc: Collector::new(config.gc.clone()),
            config,
            next_hook: 1,
            store: Default::default(),
            store_dirty: Default::default(),
        }
    }

    /// The settings this heap was made with (the collector's may have changed
    /// since: see [`Heap::gc_config_mut`]).
    pub fn config(&self) -> &HeapConfig {
        &self.config
    }

    /// The object cap.
    pub fn max_objects(&self) -> u32 {
        self.array.cap()
    }

    /// This heap's tag: the high bits of every serial it hands out.
    pub fn tag(&self) -> u32 {
        self.array.tag()
    }

    fn next_hook_id(&mut self) -> HookId {
        self.next_hook += 1;
        HookId(self.next_hook)
    }
}

impl Drop for Heap {
    /// Runs every listener's `on_shutdown`, then drops every object; a panic
    /// in any of them does not stop the others. The first panic is resumed
    /// afterwards, unless the heap is dropped while already unwinding (a
    /// second panic would abort the process): then it is reported through
    /// `tracing` and dropped.
    fn drop(&mut self) {
        let mut caught: Caught = None;
        self.listeners.shutdown(&mut caught);
        let dropping = self.array.drop_all();
        if caught.is_none() {
            caught = dropping;
        }
        if let Some(p) = caught {
            if std::thread::panicking() {
                tracing::error!("a listener or an object's Drop panicked while the heap was dropped during unwinding");
            } else {
                std::panic::resume_unwind(p);
            }
        }
    }
}

impl<T: Object> Index<Obj<T>> for Heap {
    type Output = T;
    /// # Panics
    /// If the handle does not resolve; the message says why.
    #[inline]
    #[track_caller]
    fn index(&self, h: Obj<T>) -> &T {
        match self.try_get(h) {
            Ok(v) => v,
            Err(e) => index_failed(h, e),
        }
    }
}

/// The panic of `heap[h]`, out of line so that indexing stays small enough to inline.
#[cold]
#[inline(never)]
#[track_caller]
fn index_failed(h: impl fmt::Debug, e: ResolveError) -> ! {
    panic!("heap[{h:?}]: {e}")
}

impl<T: Object> IndexMut<Obj<T>> for Heap {
    /// # Panics
    /// If the handle does not resolve; the message says why.
    #[inline]
    #[track_caller]
    fn index_mut(&mut self, h: Obj<T>) -> &mut T {
        match self.try_get_mut(h) {
            Ok(v) => v,
            Err(e) => index_failed(h, e),
        }
    }
}

// SAFETY-relevant: `Heap` is Send + Sync because every object is (Object: Send +
// Sync), shared state is atomics or locks, and hooks are Send + Sync.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Heap>();
};

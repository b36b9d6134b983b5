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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

use crate::array::{flags, ObjectArray, ObjectRef, Pool};
use crate::class::{Building, Class, Object};
use crate::config::{GcConfig, HeapConfig};
use crate::error::{CapReport, ConfigError, Error, PoolError, ResolveError};
use crate::gc::debug::{MemoryReport, RefChain, Reports};
use crate::gc::{
    CollectStats, Collector, CycleKind, GcTotals, Phase, PreCollect, Stage, Tick, Trigger,
};
use crate::handle::{AnyObj, Handle, Obj, Weak};
use crate::inners::Inners;
use crate::lifecycle::Caught;
use crate::listener::{CreateListener, DeleteListener, HookId, Listeners, ObjectEvent};
use crate::names::{IntoName, Name, NameArg, Names};
use crate::referencer::Referencer;
use crate::serial;
use crate::strong::StrongObj;

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
    /// The outer → inners index (objects created with an outer only), built
    /// on first need (`for_each_with_outer`, or a cycle with
    /// `GcConfig::outer_keeps_inners`) and kept from then on, so that programs
    /// that use neither pay nothing at creation or free.
    inners: Mutex<Inners>,
    /// Whether the index is built and kept.
    inners_on: AtomicBool,
    listeners: Listeners,
    referencers: Vec<(HookId, Arc<dyn Referencer>)>,
    defaults: RwLock<HashMap<TypeId, AnyObj>>,
    gc: Collector,
    next_hook: u64,
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
    /// [`StrongObj`] handles keeping it alive.
    pub strong_count: u32,
    /// The slot index of its cluster's root (Unreal's `ClusterRootIndex`), if
    /// it is in a cluster. The collector does not make clusters yet, so this
    /// is always `None` for now.
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
#[must_use = "call .create() to make the object"]
#[derive(Debug)]
pub struct Spawn<'h, T: Object> {
    heap: &'h Heap,
    value: T,
    outer: Option<AnyObj>,
    name: Option<NameArg>,
    root: bool,
}

impl<'h, T: Object> Spawn<'h, T> {
    /// Sets the outer (the object this one lives in). The new object keeps
    /// its outer alive; with [`GcConfig::outer_keeps_inners`] the outer keeps
    /// it alive too.
    pub fn outer(mut self, outer: impl Into<AnyObj>) -> Self {
        self.outer = Some(outer.into());
        self
    }
    /// Names the object; names are unique among objects with the same outer.
    /// Takes a string (`&str`, `String`, …) or a [`Name`]: a `Name` from
    /// [`Heap::intern`] and [`Name::with_number`] costs no string work, which
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
        self
    }
    /// Adds the object to the root set.
    pub fn root(mut self) -> Self {
        self.root = true;
        self
    }
    /// Creates the object.
    pub fn create(self) -> Result<Obj<T>, Error> {
        let h = self
            .heap
            .create_full(self.value, self.outer, self.name.as_ref())?;
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
        let lease = serial::acquire(config.generation_bits).ok_or(Error::TooManyHeaps {
            live_limit: serial::LIVE_LIMIT,
        })?;
        let mut array = ObjectArray::new(
            config.max_objects,
            config.preallocate,
            config.disregard_pool_size,
            lease,
        );
        if config.gc.generational {
            // Every object starts young: the allocator records them for the
            // first minor cycle, and the barriers watch from the start.
            array.start_recording();
            array.watch(true);
        }
        Ok(Heap {
            array,
            names: RwLock::new(Names::default()),
            inners: Mutex::new(Inners::default()),
            inners_on: AtomicBool::new(false),
            listeners: Listeners::default(),
            referencers: Vec::new(),
            defaults: RwLock::new(HashMap::new()),
            gc: Collector::new(config.gc.clone()),
            config,
            next_hook: 1,
        })
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

    // ----- creation ---------------------------------------------------------

    /// Creates an object and returns its handle. Thread-safe: takes `&self`.
    ///
    /// # Panics
    /// If the object cap is reached; the message lists the classes filling
    /// the table. Use [`try_create`](Self::try_create) to get the error.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// #[derive(Object, Default)]
    /// struct Gem { carats: u8 }
    /// let heap = Heap::new();
    /// let g = heap.create(Gem { carats: 2 });
    /// assert_eq!(heap[g].carats, 2);
    /// ```
    #[inline]
    pub fn create<T: Object>(&self, value: T) -> Obj<T> {
        match self.try_create(value) {
            Ok(h) => h,
            Err(e) => panic!("{e}"),
        }
    }

    /// Creates an object, or reports that the cap is reached.
    ///
    /// ```
    /// use coreobject::{Error, Heap, HeapConfig, Object};
    /// #[derive(Object, Default)]
    /// struct Gem;
    /// let heap = Heap::with_config(HeapConfig { max_objects: 1, ..HeapConfig::DEFAULT }).unwrap();
    /// heap.try_create(Gem).unwrap();
    /// let err = heap.try_create(Gem).unwrap_err();
    /// assert!(err.to_string().contains("object cap of 1 reached"));
    /// assert!(err.to_string().contains("Gem 1"));
    /// ```
    #[inline]
    pub fn try_create<T: Object>(&self, value: T) -> Result<Obj<T>, Error> {
        match self.array.reserve() {
            Some(index) => Ok(self.publish(index, value, None, 0)),
            None => Err(self.cap_error()),
        }
    }

    /// Starts building an object with an outer, a name or a root flag.
    pub fn spawn<T: Object>(&self, value: T) -> Spawn<'_, T> {
        Spawn {
            heap: self,
            value,
            outer: None,
            name: None,
            root: false,
        }
    }

    fn create_full<T: Object>(
        &self,
        value: T,
        outer: Option<AnyObj>,
        name: Option<&NameArg>,
    ) -> Result<Obj<T>, Error> {
        if let Some(o) = outer {
            self.array.lookup(o, flags::DEAD)?;
        }
        let Some(name) = name else {
            let index = self.array.reserve().ok_or_else(|| self.cap_error())?;
            return Ok(self.publish(index, value, outer, 0));
        };
        // Hold the name lock across creation so two threads cannot both take a name.
        let mut names = self.names.write();
        let key = names.claim(outer, name)?;
        let index = match self.array.reserve() {
            Some(i) => i,
            None => {
                names.release(key);
                drop(names);
                return Err(self.cap_error());
            }
        };
        let h = self.publish_quiet(index, value, outer, 0);
        names.insert(h.any(), key);
        self.array.at(h.index()).set(flags::NAMED);
        drop(names);
        self.notify_create(h.any());
        Ok(h)
    }

    /// Creates an object at a chosen free index (Unreal's
    /// `AlreadyAllocatedIndex`, for undo/redo or replication). Indices
    /// skipped past the high water become free: they are not objects, and
    /// cost neither memory per index nor a chunk until one is handed out.
    /// O(1) amortized. See also
    /// [`create_at_with_serial`](Self::create_at_with_serial).
    ///
    /// ```
    /// use coreobject::{Error, Heap, Object};
    /// #[derive(Object, Default)]
    /// struct Prop;
    /// let mut heap = Heap::new();
    /// let p = heap.create_at(40, Prop).unwrap();
    /// assert_eq!(p.index(), 40);
    /// assert_eq!(heap.create_at(40, Prop).unwrap_err(), Error::IndexTaken(40));
    /// ```
    pub fn create_at<T: Object>(&mut self, index: u32, value: T) -> Result<Obj<T>, Error> {
        if self.array.pool().open {
            return Err(PoolError::CreateAtWhileOpen.into());
        }
        self.array.claim(index)?;
        Ok(self.publish(index, value, None, 0))
    }

    /// Creates an object at a chosen free index with a chosen serial
    /// (Unreal's `AllocateUObjectIndex` with an `AlreadyAllocatedIndex` and
    /// a `SerialNumber`), for undo and replication: handles that named the
    /// slot's last occupant, or an object elsewhere, resolve to the new one.
    ///
    /// A slot's generation only moves forward, and a free slot's current
    /// serial is the next one to issue. Accepted are the serial of the slot's
    /// last occupant (undo), a serial of this heap's tag the slot never issued
    /// (a newer generation, up to the heap's limit), and, for a slot never
    /// used, any generation of this heap. Refused with
    /// [`Error::SerialRefused`]: another heap's tag, a generation outside this
    /// heap's range, a retired slot, a generation older than the last
    /// occupant's (handles to a later occupant would resolve to the new
    /// object), and one of the tag's last two generations
    /// ([`serial::MAX_GENERATION`](crate::serial::MAX_GENERATION)` - 1` and
    /// up) that the slot never issued: a heap tag returns to the pool above
    /// every generation its heap issued, so those would retire the tag for
    /// the process ([`SerialRefusal::WouldRetireTag`](crate::SerialRefusal::WouldRetireTag)).
    /// A taken index is refused with [`Error::IndexTaken`]. Once
    /// the object is freed, its slot moves past `serial` as usual.
    ///
    /// ```
    /// use coreobject::{Error, Heap, Object};
    /// #[derive(Object, Default)]
    /// struct Prop(u32);
    /// let mut heap = Heap::new();
    /// let old = heap.create(Prop(1));
    /// heap.collect().unwrap(); // unrooted: freed
    /// assert!(heap.get(old).is_none());
    /// let back = heap.create_at_with_serial(old.index(), old.serial(), Prop(2)).unwrap();
    /// assert_eq!(back, old);
    /// assert_eq!(heap[old].0, 2);
    /// let err = heap.create_at_with_serial(old.index(), old.serial(), Prop(3));
    /// assert_eq!(err, Err(Error::IndexTaken(old.index())));
    /// ```
    pub fn create_at_with_serial<T: Object>(
        &mut self,
        index: u32,
        serial: u32,
        value: T,
    ) -> Result<Obj<T>, Error> {
        if self.array.pool().open {
            return Err(PoolError::CreateAtWhileOpen.into());
        }
        self.array.claim_with_serial(index, serial)?;
        // Handles to another class may carry this serial: typed resolves of
        // this object compare the class (see `ObjectArray::resolve`).
        Ok(self.publish(index, value, None, flags::RESTORED))
    }

    #[inline]
    fn publish<T: Object>(
        &self,
        index: u32,
        value: T,
        outer: Option<AnyObj>,
        extra: u32,
    ) -> Obj<T> {
        let h = self.publish_quiet(index, value, outer, extra);
        if !self.listeners.create.is_empty() {
            self.notify_create(h.any());
        }
        h
    }

    /// Fills a reserved slot, with item flags `extra` besides the usual
    /// ones. The caller owns `index` exclusively.
    #[inline]
    fn publish_quiet<T: Object>(
        &self,
        index: u32,
        value: T,
        outer: Option<AnyObj>,
        extra: u32,
    ) -> Obj<T> {
        self.gc.note_alloc(T::class().size());
        let h = self
            .array
            .fill(index, value, outer, self.gc.birth_flags() | extra);
        if let Some(o) = outer {
            self.note_inner(o, h.any());
        }
        h
    }

    /// Files a new object under its outer (alive, checked by the caller; it
    /// cannot be freed meanwhile: that takes `&mut self`).
    fn note_inner(&self, outer: AnyObj, inner: AnyObj) {
        // SeqCst with `ensure_inners`: either this sees the index on, or the
        // scan that turns it on sees this object (or both: duplicates are
        // harmless and removed when read).
        if self.inners_on.load(Ordering::SeqCst) {
            self.inners.lock().insert(outer, inner);
            self.array.at(outer.index()).set(flags::OUTER);
        }
    }

    /// Builds the outer → inners index from the table, once.
    fn ensure_inners(&self) {
        if self.inners_on.load(Ordering::Acquire) {
            return;
        }
        let mut index = self.inners.lock();
        if self.inners_on.load(Ordering::SeqCst) {
            return;
        }
        self.inners_on.store(true, Ordering::SeqCst);
        for i in 0..self.array.high_water() {
            let Some(o) = self.array.slot(&self.names, i) else {
                continue;
            };
            if let Some(outer) = o.outer() {
                if self.array.lookup(outer, 0).is_ok() {
                    index.insert(outer, o.id());
                    self.array.at(outer.index()).set(flags::OUTER);
                }
            }
        }
    }

    fn notify_create(&self, obj: AnyObj) {
        if let Ok(header) = self.array.header(obj, 0) {
            let event = ObjectEvent {
                object: obj,
                class: header.class(),
            };
            for (_, l) in &self.listeners.create {
                l.on_create(&event);
            }
        }
    }

    #[cold]
    fn cap_error(&self) -> Error {
        Error::CapReached(CapReport {
            cap: self.array.cap(),
            by_class: self.array.class_counts(true),
        })
    }

    // ----- resolution -------------------------------------------------------

    /// Resolves a handle: `None` if the object is gone or garbage, or the
    /// handle is from another heap (or names a slot restored with another
    /// class). The class is not compared: a typed handle's serial names an
    /// object of its class for the slot's whole life.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// #[derive(Object, Default)]
    /// struct Coin(u32);
    /// let heap = Heap::new();
    /// let c = heap.create(Coin(5));
    /// assert_eq!(heap.get(c).map(|c| c.0), Some(5));
    /// let other = Heap::new();
    /// assert!(other.get(c).is_none(), "foreign handle");
    /// ```
    #[inline]
    pub fn get<H: Handle>(&self, h: H) -> Option<&H::Target>
    where
        H::Target: Object,
    {
        self.array.resolve(h.any_obj(), flags::DEAD).ok()
    }

    /// Like [`get`](Self::get), but says why a handle does not resolve.
    ///
    /// ```
    /// # use coreobject::{Heap, Object, ResolveError};
    /// # #[derive(Object, Default)] struct Coin;
    /// let a = Heap::new();
    /// let b = Heap::new();
    /// let c = a.create(Coin);
    /// assert!(matches!(b.try_get(c), Err(ResolveError::Foreign { .. })));
    /// ```
    #[inline]
    pub fn try_get<H: Handle>(&self, h: H) -> Result<&H::Target, ResolveError>
    where
        H::Target: Object,
    {
        self.array.resolve(h.any_obj(), flags::DEAD)
    }

    /// Resolves a handle even if its object is marked as garbage (Unreal's
    /// `bEvenIfPendingKill`). Objects already being destroyed still give `None`.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Coin;
    /// let heap = Heap::new();
    /// let c = heap.create(Coin);
    /// heap.mark_as_garbage(c).unwrap();
    /// assert!(heap.get(c).is_none());
    /// assert!(heap.get_even_if_garbage(c).is_some());
    /// ```
    pub fn get_even_if_garbage<H: Handle>(&self, h: H) -> Option<&H::Target>
    where
        H::Target: Object,
    {
        self.array.resolve(h.any_obj(), flags::UNREACHABLE).ok()
    }

    /// Exclusive access to an object: the one door for mutation, which an
    /// incremental collector uses as its write barrier.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// #[derive(Object, Default)]
    /// struct Door { open: bool }
    /// let mut heap = Heap::new();
    /// let d = heap.create(Door::default());
    /// heap.get_mut(d).unwrap().open = true;
    /// assert!(heap[d].open);
    /// ```
    #[inline]
    pub fn get_mut<H: Handle>(&mut self, h: H) -> Option<&mut H::Target>
    where
        H::Target: Object,
    {
        self.try_get_mut(h).ok()
    }

    /// The one door for mutation, saying why a handle does not resolve:
    /// `get_mut` and `heap[h]` both pass through here, and so through the
    /// incremental collector's write barrier.
    #[inline]
    pub fn try_get_mut<H: Handle>(&mut self, h: H) -> Result<&mut H::Target, ResolveError>
    where
        H::Target: Object,
    {
        let h = h.any_obj();
        let (v, item) = self.array.resolve_mut::<H::Target>(h)?;
        self.gc.barrier(item, h.index());
        Ok(v)
    }

    /// Whether the handle names a live (not garbage) object of any class.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Coin;
    /// let heap = Heap::new();
    /// let c = heap.create(Coin);
    /// assert!(heap.contains(c));
    /// ```
    pub fn contains(&self, h: impl Into<AnyObj>) -> bool {
        self.array.lookup(h.into(), flags::DEAD).is_ok()
    }

    /// The strong handle for a live weak one (Unreal's `TWeakObjectPtr::Get`).
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Coin;
    /// let heap = Heap::new();
    /// let w = heap.create(Coin).downgrade();
    /// assert!(heap.upgrade(w).is_some());
    /// ```
    pub fn upgrade<T: Object>(&self, w: Weak<T>) -> Option<Obj<T>> {
        self.array.resolve::<T>(w.any(), flags::DEAD).ok()?;
        Some(w.to_obj())
    }

    /// Checks an untyped handle's class and returns the typed handle.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Coin;
    /// # #[derive(Object, Default)] struct Gem;
    /// let heap = Heap::new();
    /// let any = heap.create(Coin).any();
    /// assert!(heap.downcast::<Coin>(any).is_some());
    /// assert!(heap.downcast::<Gem>(any).is_none());
    /// ```
    pub fn downcast<T: Object>(&self, h: AnyObj) -> Option<Obj<T>> {
        self.array.downcast(h, flags::DEAD)
    }

    /// The class of a live object (Unreal's `GetClass`).
    pub fn class_of(&self, h: impl Into<AnyObj>) -> Option<&'static Class> {
        Some(
            self.array
                .header(h.into(), flags::UNREACHABLE)
                .ok()?
                .class(),
        )
    }

    /// The outer of a live object, if it has one that is still alive.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Coin;
    /// let heap = Heap::new();
    /// let purse = heap.create(Coin);
    /// let c = heap.spawn(Coin).outer(purse).create().unwrap();
    /// assert_eq!(heap.outer_of(c), Some(purse.any()));
    /// ```
    pub fn outer_of(&self, h: impl Into<AnyObj>) -> Option<AnyObj> {
        let outer = self.array.outer(h.into(), flags::UNREACHABLE).ok()??;
        self.array
            .lookup(outer, flags::UNREACHABLE)
            .ok()
            .map(|_| outer)
    }

    /// Whether the object is marked as garbage (or being destroyed).
    pub fn is_garbage(&self, h: impl Into<AnyObj>) -> bool {
        matches!(
            self.array.lookup(h.into(), flags::DEAD),
            Err(ResolveError::Garbage(_))
        )
    }

    // ----- roots and garbage ----------------------------------------------

    /// Adds an object to the root set (Unreal's `AddToRoot`).
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Coin;
    /// let mut heap = Heap::new();
    /// let c = heap.create(Coin);
    /// heap.add_to_root(c).unwrap();
    /// heap.collect().unwrap();
    /// assert!(heap.is_rooted(c));
    /// heap.remove_from_root(c).unwrap();
    /// heap.collect().unwrap();
    /// assert!(!heap.contains(c));
    /// ```
    pub fn add_to_root(&self, h: impl Into<AnyObj>) -> Result<(), Error> {
        let h = h.into();
        self.array.lookup(h, flags::DEAD)?;
        if self.array.at(h.index()).add_root() {
            self.array.list_root(h.index());
        }
        Ok(())
    }

    /// Removes an object from the root set (Unreal's `RemoveFromRoot`).
    /// Class default objects stay rooted for the heap's life: removing one
    /// is refused with [`Error::Permanent`].
    ///
    /// ```
    /// # use coreobject::{Error, Heap, Object};
    /// # #[derive(Object, Default)] struct Coin;
    /// let heap = Heap::new();
    /// let cdo = heap.class_default::<Coin>().unwrap();
    /// assert_eq!(heap.remove_from_root(cdo), Err(Error::Permanent(cdo.any())));
    /// assert!(heap.is_rooted(cdo));
    /// ```
    pub fn remove_from_root(&self, h: impl Into<AnyObj>) -> Result<(), Error> {
        let h = h.into();
        self.array.lookup(h, flags::UNREACHABLE)?;
        let item = self.array.at(h.index());
        if item.flags() & flags::DEFAULT_OBJECT != 0 {
            return Err(Error::Permanent(h));
        }
        item.clear(flags::ROOT);
        Ok(())
    }

    /// Whether the object is in the root set.
    pub fn is_rooted(&self, h: impl Into<AnyObj>) -> bool {
        let h = h.into();
        self.array.lookup(h, flags::UNREACHABLE).is_ok()
            && self.array.at(h.index()).flags() & flags::ROOT != 0
    }

    /// All of an object's item flags at once, for debugging. Answers for
    /// every allocated object, garbage and unreachable ones included (unlike
    /// [`get`](Self::get)); `None` only if the handle is stale or foreign.
    ///
    /// ```
    /// use coreobject::{Heap, Object};
    /// #[derive(Object, Default)]
    /// struct Coin;
    /// let heap = Heap::new();
    /// let c = heap.create(Coin);
    /// assert_eq!(heap.flags_of(c).unwrap().to_string(), "none");
    /// heap.add_to_root(c).unwrap();
    /// let _keep = heap.strong(c).unwrap();
    /// let f = heap.flags_of(c).unwrap();
    /// assert!(f.rooted && !f.garbage);
    /// assert_eq!(f.strong_count, 1);
    /// assert_eq!(f.to_string(), "rooted | strong_count=1");
    /// let cdo = heap.class_default::<Coin>().unwrap();
    /// assert_eq!(heap.flags_of(cdo).unwrap().to_string(), "rooted | class_default");
    /// ```
    pub fn flags_of(&self, h: impl Into<AnyObj>) -> Option<ObjectFlags> {
        let h = h.into();
        self.array.lookup(h, 0).ok()?;
        let item = self.array.at(h.index());
        let f = item.flags();
        let condemned = f & flags::DEAD == 0 && self.array.hides(h.index(), f);
        Some(ObjectFlags {
            rooted: f & flags::ROOT != 0,
            garbage: f & flags::GARBAGE != 0,
            unreachable: f & flags::UNREACHABLE != 0 || condemned,
            disregard: f & flags::DISREGARD != 0,
            class_default: f & flags::DEFAULT_OBJECT != 0,
            has_hooks: f & flags::HOOKS != 0,
            strong_count: item.refcount(),
            cluster_root: Some(item.cluster_root()).filter(|&r| r != 0),
        })
    }

    /// A strong RAII handle that roots the object while it lives (Unreal's
    /// `TStrongObjectPtr`). `None` if the object is not alive.
    pub fn strong<T: Object>(&self, h: Obj<T>) -> Option<StrongObj<T>> {
        self.array.resolve::<T>(h.any(), flags::DEAD).ok()?;
        Some(self.array.strong(h))
    }

    /// The number of [`StrongObj`] handles to an object.
    pub fn strong_count(&self, h: impl Into<AnyObj>) -> usize {
        let h = h.into();
        match self.array.lookup(h, flags::UNREACHABLE) {
            Ok(_) => self.array.at(h.index()).refcount() as usize,
            Err(_) => 0,
        }
    }

    /// Marks an object as garbage (Unreal's `MarkAsGarbage`): `get` stops
    /// resolving it at once, and the next collection frees it even if it is
    /// still referenced or rooted. References to it then go stale. Objects in
    /// the disregard-for-GC pool and class default objects are permanent:
    /// marking them is refused with [`Error::Permanent`].
    ///
    /// ```
    /// # use coreobject::{Heap, Obj, Object};
    /// #[derive(Object, Default)]
    /// struct Enemy { target: Option<Obj<Enemy>> }
    /// let mut heap = Heap::new();
    /// let a = heap.create(Enemy::default());
    /// let b = heap.create(Enemy { target: Some(a) });
    /// heap.add_to_root(b).unwrap();
    /// heap.mark_as_garbage(a).unwrap();
    /// heap.collect().unwrap();
    /// assert!(heap.get_even_if_garbage(a).is_none(), "freed although referenced");
    /// ```
    pub fn mark_as_garbage(&self, h: impl Into<AnyObj>) -> Result<(), Error> {
        let h = h.into();
        self.array.lookup(h, flags::UNREACHABLE)?;
        let item = self.array.at(h.index());
        if item.flags() & (flags::DISREGARD | flags::DEFAULT_OBJECT) != 0 {
            return Err(Error::Permanent(h));
        }
        if item.set(flags::GARBAGE) & flags::GARBAGE == 0 {
            self.gc.note_garbage(h);
        }
        Ok(())
    }

    /// Clears the garbage mark (Unreal's `ClearGarbage`), if the object has
    /// not been collected yet.
    pub fn clear_garbage(&self, h: impl Into<AnyObj>) -> Result<(), Error> {
        let h = h.into();
        self.array.lookup(h, flags::UNREACHABLE)?;
        if self.array.at(h.index()).clear(flags::GARBAGE) & flags::GARBAGE != 0 {
            self.gc.note_cleared_garbage(h);
        }
        Ok(())
    }

    // ----- names ----------------------------------------------------------

    /// The object's name as a string, if it was given one. Allocates for a
    /// numbered name; [`name`](Self::name) does not.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Level;
    /// let heap = Heap::new();
    /// let l = heap.spawn(Level).name("Level_3").create().unwrap();
    /// assert_eq!(heap.name_of(l).as_deref(), Some("Level_3"));
    /// assert_eq!(heap.name_of(heap.create(Level)), None);
    /// ```
    pub fn name_of(&self, h: impl Into<AnyObj>) -> Option<Arc<str>> {
        let h = h.into();
        self.array.lookup(h, flags::UNREACHABLE).ok()?;
        self.names.read().name_of(h.index())
    }

    /// The object's [`Name`], if it was given one. No allocation and no
    /// string work: compare it with names from [`intern`](Self::intern), or
    /// turn it into a string with [`name_string`](Self::name_string).
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Actor;
    /// let heap = Heap::new();
    /// let actor = heap.intern("Actor").unwrap();
    /// let a = heap.spawn(Actor).name("Actor_9").create().unwrap();
    /// let n = heap.name(a).unwrap();
    /// assert_eq!(n, actor.with_number(9));
    /// assert_eq!(n.number(), Some(9));
    /// ```
    pub fn name(&self, h: impl Into<AnyObj>) -> Option<Name> {
        let h = h.into();
        self.array.lookup(h, flags::UNREACHABLE).ok()?;
        self.names.read().name(h.index())
    }

    /// Interns a name (Unreal's `FName` constructor): splits it into base
    /// and number (`Actor_12` is `Actor` with 12; see [`Name`] for the rule)
    /// and keeps the base in this heap's name table for the heap's life, so
    /// the [`Name`] stays valid. Intern the bases you reuse, then name
    /// objects with [`Name::with_number`] without any string work.
    ///
    /// Strings given to [`Spawn::name`] are not kept this way: the table
    /// holds a base only while an object uses it, so naming objects with
    /// ever-new strings does not grow it without bound.
    ///
    /// Refuses, with [`Error::InvalidName`], what [`Spawn::name`] refuses:
    /// an empty name, a `.`, and the `Default__` prefix.
    ///
    /// ```
    /// let heap = coreobject::Heap::new();
    /// let a = heap.intern("Actor_12").unwrap();
    /// assert_eq!(a, heap.intern("Actor").unwrap().with_number(12));
    /// assert_eq!(heap.name_string(a).as_deref(), Some("Actor_12"));
    /// assert!(heap.intern("World.Level").is_err());
    /// ```
    pub fn intern(&self, name: &str) -> Result<Name, Error> {
        self.names.write().intern(name)
    }

    /// How many base strings this heap's name table holds: those interned
    /// with [`intern`](Self::intern), and those of objects' names (freed with
    /// the last object that uses them). `Actor_1` and `Actor_2` share one.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Actor;
    /// let mut heap = Heap::new();
    /// heap.spawn(Actor).name("Actor_1").create().unwrap();
    /// heap.spawn(Actor).name("Actor_2").create().unwrap();
    /// assert_eq!(heap.name_table_len(), 1);
    /// heap.collect().unwrap(); // nothing roots them
    /// assert_eq!(heap.name_table_len(), 0);
    /// ```
    pub fn name_table_len(&self) -> usize {
        self.names.read().strings()
    }

    /// A [`Name`]'s string, e.g. `Actor_12`; `None` if this heap does not
    /// hold it (see [`Error::StaleName`]).
    ///
    /// ```
    /// let heap = coreobject::Heap::new();
    /// let wheel = heap.intern("Wheel").unwrap();
    /// assert_eq!(heap.name_string(wheel).as_deref(), Some("Wheel"));
    /// assert_eq!(heap.name_string(wheel.with_number(0)).as_deref(), Some("Wheel_0"));
    /// ```
    pub fn name_string(&self, name: Name) -> Option<String> {
        self.names.read().name_string(name)
    }

    /// A display name: the object's name, or `Class_index` if it has none.
    pub fn display_name(&self, h: impl Into<AnyObj>) -> Option<String> {
        let h = h.into();
        if let Some(n) = self.name_of(h) {
            return Some(n.to_string());
        }
        Some(format!("{}_{}", self.class_of(h)?.name(), h.index()))
    }

    /// The dotted path of display names from the outermost object
    /// (Unreal's `GetPathName`), e.g. `World.Level_3.Hero`.
    pub fn path_name(&self, h: impl Into<AnyObj>) -> Option<String> {
        let h = h.into();
        let mut parts = vec![self.display_name(h)?];
        let mut cur = self.outer_of(h);
        let mut guard = 0;
        while let Some(o) = cur {
            parts.push(self.display_name(o)?);
            cur = self.outer_of(o);
            guard += 1;
            if guard > 10_000 {
                break;
            }
        }
        parts.reverse();
        Some(parts.join("."))
    }

    /// Finds a named object by outer and name (Unreal's `FindObject`).
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Level;
    /// let heap = Heap::new();
    /// let w = heap.spawn(Level).name("World").create().unwrap();
    /// assert_eq!(heap.find(None, "World"), Some(w.any()));
    /// assert_eq!(heap.find(Some(w.any()), "World"), None);
    /// ```
    pub fn find(&self, outer: Option<AnyObj>, name: &str) -> Option<AnyObj> {
        let h = self.names.read().find(outer, name)?;
        self.contains(h).then_some(h)
    }

    /// Finds a named object by outer and [`Name`]: integer lookups only.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Level;
    /// let heap = Heap::new();
    /// let level = heap.intern("Level").unwrap();
    /// let l = heap.spawn(Level).name(level.with_number(3)).create().unwrap();
    /// assert_eq!(heap.find_name(None, level.with_number(3)), Some(l.any()));
    /// assert_eq!(heap.find_name(None, level), None);
    /// ```
    pub fn find_name(&self, outer: Option<AnyObj>, name: Name) -> Option<AnyObj> {
        let h = self.names.read().find_name(outer, name)?;
        self.contains(h).then_some(h)
    }

    /// Finds an object by dotted path, e.g. `"World.Level_3.Hero"`.
    pub fn find_path(&self, path: &str) -> Option<AnyObj> {
        let mut cur: Option<AnyObj> = None;
        for part in path.split('.') {
            cur = Some(self.find(cur, part)?);
        }
        cur
    }

    // ----- iteration and counts -------------------------------------------

    /// Objects **allocated**: the table's occupied slots. That is the live
    /// objects, plus objects marked as garbage or found unreachable that the
    /// collector has not freed yet, plus objects awaiting `finish_destroy`.
    /// O(1). For the objects [`get`](Self::get) resolves, which
    /// [`iter`](Self::iter) visits, see [`live_count`](Self::live_count).
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Coin;
    /// let heap = Heap::new();
    /// let c = heap.create(Coin);
    /// heap.create(Coin);
    /// heap.mark_as_garbage(c).unwrap();
    /// assert_eq!(heap.len(), 2);        // allocated
    /// assert_eq!(heap.live_count(), 1); // resolvable
    /// ```
    pub fn len(&self) -> usize {
        self.array.len()
    }

    /// Objects **live**: those [`get`](Self::get) resolves, which
    /// [`iter`](Self::iter) visits (allocated objects less those marked as
    /// garbage or found unreachable). Walks the table: O(high water).
    pub fn live_count(&self) -> usize {
        self.iter().count()
    }

    /// Whether no objects are allocated.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Counts describing the table.
    pub fn table_stats(&self) -> TableStats {
        TableStats {
            objects: self.len(),
            high_water: self.array.high_water(),
            free: self.array.free_remaining(),
            retired: self.array.retired(),
            chunks: self.array.allocated_chunks(),
            cap: self.array.cap(),
            disregard: self.disregard_len(),
        }
    }

    fn iter_range(&self, from: u32) -> impl Iterator<Item = ObjectRef<'_>> + '_ {
        (from..self.array.high_water())
            .filter_map(move |i| self.array.slot(&self.names, i))
            .filter(|o| !self.array.hides(o.id().index(), o.flags()))
    }

    /// Every live object, in index order (Unreal's `FThreadSafeObjectIterator`).
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Coin;
    /// let heap = Heap::new();
    /// heap.create(Coin);
    /// heap.create(Coin);
    /// assert_eq!(heap.iter().filter(|o| o.class().name() == "Coin").count(), 2);
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = ObjectRef<'_>> + '_ {
        self.iter_range(0)
    }

    /// Every live object of class `T` (Unreal's `TObjectIterator<T>`).
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// #[derive(Object, Default)]
    /// struct Coin(u32);
    /// let heap = Heap::new();
    /// heap.create(Coin(2));
    /// heap.create(Coin(3));
    /// assert_eq!(heap.iter_of::<Coin>().map(|(_, c)| c.0).sum::<u32>(), 5);
    /// ```
    pub fn iter_of<T: Object>(&self) -> impl Iterator<Item = (Obj<T>, &T)> + '_ {
        self.iter().filter_map(|o| o.typed::<T>())
    }

    /// Live objects the collector considers: everything outside the
    /// disregard-for-GC pool.
    pub fn iter_gc_considered(&self) -> impl Iterator<Item = ObjectRef<'_>> + '_ {
        self.iter_range(self.array.pool().end)
            .filter(|o| !o.is_disregard())
    }

    /// Calls `f` for each live object whose outer is `outer`, in index order
    /// (Unreal's `ForEachObjectWithOuter`, without recursion into inners'
    /// inners). Reads the outer → inners index, so it costs the number of
    /// `outer`'s inners, not the size of the table. An outer that is gone
    /// has no inners, as [`outer_of`](Self::outer_of) of its surviving inners
    /// is `None`. `f` may create objects; those it creates under `outer` are
    /// not visited.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Level;
    /// let heap = Heap::new();
    /// let world = heap.create(Level);
    /// let a = heap.spawn(Level).outer(world).create().unwrap();
    /// let b = heap.spawn(Level).outer(world).create().unwrap();
    /// heap.spawn(Level).outer(a).create().unwrap(); // an inner's inner
    /// let mut seen = Vec::new();
    /// heap.for_each_with_outer(world, |o| seen.push(o.id()));
    /// assert_eq!(seen, [a.any(), b.any()]);
    /// ```
    pub fn for_each_with_outer(&self, outer: impl Into<AnyObj>, mut f: impl FnMut(ObjectRef<'_>)) {
        let outer = outer.into();
        self.ensure_inners();
        // Copied out, so that `f` runs with no lock held.
        let mut inners = self.inners.lock().of(outer.to_bits()).to_vec();
        inners.sort_unstable_by_key(|h| h.index());
        inners.dedup();
        for h in inners {
            let Some(o) = self.array.slot(&self.names, h.index()) else {
                continue;
            };
            if o.id() == h && !self.array.hides(h.index(), o.flags()) {
                f(o)
            }
        }
    }

    /// **Live** objects per class (what [`iter_of`](Self::iter_of) visits,
    /// summed per class; objects marked as garbage or found unreachable are
    /// not counted), most numerous first. Walks the table.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Coin;
    /// let heap = Heap::new();
    /// let c = heap.create(Coin);
    /// heap.create(Coin);
    /// heap.mark_as_garbage(c).unwrap();
    /// assert_eq!(heap.class_counts(), [("Coin", 1)]);
    /// assert_eq!(heap.iter_of::<Coin>().count(), 1);
    /// ```
    pub fn class_counts(&self) -> Vec<(&'static str, usize)> {
        self.array.class_counts(false)
    }

    /// The class default object of `T` (Unreal's CDO): made on first request
    /// from `T::default()`, rooted and permanent (it cannot be marked as
    /// garbage). `None` if `T` does not implement `Default`, or if the object
    /// cap is reached.
    ///
    /// Class defaults are found by type, never by name. Each is also named,
    /// at the top level: `Default__` + its class name, or, when another
    /// class's default already holds that name (two types that share a
    /// name), `Default__` + its [class path](Class::path) (with a `_2`, `_3`,
    /// … suffix in the rare case that is taken too), every `.` replaced by
    /// `_`. Names starting with `Default__` are reserved for class defaults:
    /// [`Spawn::name`] refuses them with [`Error::InvalidName`], so a class
    /// default never collides with a user's object.
    ///
    /// `T::default()` runs with no heap lock held, so it may create objects
    /// and ask for other classes' defaults (as Unreal's CDO constructors do).
    /// Two threads that ask at once may both run `T::default()`: one value
    /// becomes the class default, the other is dropped without ever entering
    /// the heap, and both threads get the same handle.
    ///
    /// # Panics
    /// If `T::default()` asks for `T`'s own class default, directly or
    /// through other classes' defaults (it could only recurse forever); the
    /// message names the cycle. A panic in `T::default()` propagates.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// #[derive(Object)]
    /// struct Gun { ammo: u32 }
    /// impl Default for Gun { fn default() -> Self { Gun { ammo: 30 } } }
    /// let heap = Heap::new();
    /// let cdo = heap.class_default::<Gun>().unwrap();
    /// assert_eq!(heap[cdo].ammo, 30);
    /// assert_eq!(heap.class_default::<Gun>(), Some(cdo));
    /// assert_eq!(heap.name_of(cdo).as_deref(), Some("Default__Gun"));
    /// assert!(heap.spawn(Gun { ammo: 1 }).name("Default__Gun").create().is_err());
    /// ```
    pub fn class_default<T: Object>(&self) -> Option<Obj<T>> {
        let key = TypeId::of::<T>();
        let live = |map: &HashMap<TypeId, AnyObj>| self.downcast::<T>(*map.get(&key)?);
        if let Some(o) = live(&self.defaults.read()) {
            return Some(o);
        }
        let make = (Class::checked::<T>().vt.make_default)()?;
        // Build with no lock held: `T::default()` is user code.
        let value = {
            let _building = Building::enter::<T>();
            *make()
                .downcast::<T>()
                .expect("a class's make_default builds its own type")
        };
        let mut map = self.defaults.write();
        if let Some(o) = live(&map) {
            // Another thread won the race; drop our value outside the lock.
            drop(map);
            drop(value);
            return Some(o);
        }
        let Some(index) = self.array.reserve() else {
            drop(map);
            return None;
        };
        let mut names = self.names.write();
        let name = names.default_name(T::class());
        let name_key = names.claim_default(&name);
        let h = self.publish_quiet(index, value, None, 0);
        self.array.at(h.index()).set(flags::DEFAULT_OBJECT);
        names.insert(h.any(), name_key);
        self.array.at(h.index()).set(flags::NAMED);
        drop(names);
        self.add_to_root(h).expect("a fresh object is alive");
        map.insert(key, h.any());
        drop(map);
        self.notify_create(h.any());
        Some(h)
    }

    // ----- disregard-for-GC pool -----------------------------------------

    /// Opens the disregard-for-GC pool (Unreal's `OpenDisregardForGC`):
    /// objects created until it closes take the lowest indices, up to
    /// [`HeapConfig::disregard_pool_size`], and are never collected.
    /// Their references are still traced, so what they point at stays alive.
    ///
    /// Only possible before any slot outside the pool has been used (the
    /// pool's indices stay contiguous from 0), even if those objects have
    /// since been freed: as in Unreal, open it at start-up.
    ///
    /// ```
    /// use coreobject::{Heap, HeapConfig, Object};
    /// #[derive(Object, Default)]
    /// struct Asset;
    /// let mut heap = Heap::with_config(HeapConfig { disregard_pool_size: 16, ..HeapConfig::DEFAULT }).unwrap();
    /// heap.open_disregard_for_gc().unwrap();
    /// let a = heap.create(Asset);
    /// heap.close_disregard_for_gc();
    /// heap.collect().unwrap();
    /// assert!(heap.contains(a));
    /// assert_eq!(heap.disregard_len(), 1);
    /// ```
    pub fn open_disregard_for_gc(&mut self) -> Result<(), Error> {
        let pool = self.array.pool();
        if pool.open {
            return Ok(());
        }
        if pool.capacity == 0 {
            return Err(PoolError::NoRoom.into());
        }
        self.array.sync();
        if self.array.high_water() != pool.end {
            return Err(PoolError::SlotsUsed.into());
        }
        if pool.end >= pool.capacity {
            return Err(PoolError::Full.into());
        }
        self.array.pool_mut().open = true;
        Ok(())
    }

    /// Closes the pool (Unreal's `CloseDisregardForGC`).
    pub fn close_disregard_for_gc(&mut self) {
        if !self.array.pool().open {
            return;
        }
        self.array.sync();
        let end = self.array.high_water().min(self.array.pool().capacity);
        let pool = self.array.pool_mut();
        pool.end = end;
        pool.open = false;
    }

    /// Disables the pool for good (Unreal's `DisableDisregardForGC`). Objects
    /// already in it become ordinary objects; they are added to the root set
    /// so that none is lost.
    pub fn disable_disregard_for_gc(&mut self) {
        self.close_disregard_for_gc();
        for i in 0..self.array.pool().end {
            let Some(item) = self.array.item(i) else {
                continue;
            };
            if item.clear(flags::DISREGARD) & flags::DISREGARD != 0 && item.add_root() {
                self.array.list_root(i);
            }
        }
        *self.array.pool_mut() = Pool::default();
    }

    /// Whether the pool is open.
    pub fn is_disregard_open(&self) -> bool {
        self.array.pool().open
    }

    /// Objects in the pool.
    pub fn disregard_len(&self) -> u32 {
        self.array.pool_end()
    }

    /// The first index the collector considers (Unreal's `ObjFirstGCIndex`).
    pub fn first_gc_index(&self) -> u32 {
        self.array.pool().end
    }

    // ----- listeners and referencers ----------------------------------

    /// Registers a [`CreateListener`].
    pub fn add_create_listener(&mut self, l: impl CreateListener) -> HookId {
        let id = self.next_hook_id();
        self.listeners.create.push((id, Box::new(l)));
        id
    }

    /// Registers a [`DeleteListener`].
    pub fn add_delete_listener(&mut self, l: impl DeleteListener) -> HookId {
        let id = self.next_hook_id();
        self.listeners.delete.push((id, Box::new(l)));
        id
    }

    /// Registers a closure as a create listener.
    ///
    /// ```
    /// # use coreobject::{Heap, Object, ObjectEvent};
    /// # use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    /// # use std::sync::Arc;
    /// # #[derive(Object, Default)] struct Coin;
    /// let n = Arc::new(AtomicUsize::new(0));
    /// let mut heap = Heap::new();
    /// let n2 = n.clone();
    /// let id = heap.on_create(move |_: &ObjectEvent| { n2.fetch_add(1, SeqCst); });
    /// heap.create(Coin);
    /// assert!(heap.remove_listener(id));
    /// heap.create(Coin);
    /// assert_eq!(n.load(SeqCst), 1);
    /// ```
    pub fn on_create(&mut self, f: impl Fn(&ObjectEvent) + Send + Sync + 'static) -> HookId {
        self.add_create_listener(f)
    }

    /// Registers a closure as a delete listener.
    pub fn on_delete(&mut self, f: impl Fn(&ObjectEvent) + Send + Sync + 'static) -> HookId {
        self.add_delete_listener(f)
    }

    /// Registers a delete listener that hears deletions in batches: one call
    /// per purge slice that freed objects (a whole stop-the-world purge is
    /// one slice), and one per [`tick`](Self::tick) that frees objects whose
    /// `finish_destroy` was pending, with every object it freed, in the order
    /// they were freed. Beside the per-object listeners
    /// ([`on_delete`](Self::on_delete)), which hear each object just before
    /// it is freed, it costs one call per slice instead of one per object,
    /// and does not keep the purge from dropping values on several threads
    /// ([`GcConfig::parallel_drop`](crate::GcConfig::parallel_drop)). It runs
    /// after the slice has freed them, so the handles are already stale:
    /// use them as keys. Batch listeners run most recently added first,
    /// under the same panic rule as the other listeners. Remove one with
    /// [`remove_listener`](Self::remove_listener).
    ///
    /// ```
    /// # use coreobject::{AnyObj, Heap, Object, ObjectEvent};
    /// # use std::sync::{Arc, Mutex};
    /// # #[derive(Object, Default)] struct Coin;
    /// let seen: Arc<Mutex<Vec<usize>>> = Arc::default();
    /// let mut heap = Heap::new();
    /// let log = seen.clone();
    /// heap.on_delete_batch(move |batch: &[ObjectEvent]| log.lock().unwrap().push(batch.len()));
    /// let coins: Vec<AnyObj> = (0..3).map(|_| heap.create(Coin).any()).collect();
    /// heap.collect().unwrap();
    /// assert_eq!(*seen.lock().unwrap(), [3]); // one call, three deletions
    /// assert!(coins.iter().all(|&c| !heap.contains(c)));
    /// ```
    pub fn on_delete_batch(
        &mut self,
        f: impl Fn(&[ObjectEvent]) + Send + Sync + 'static,
    ) -> HookId {
        let id = self.next_hook_id();
        self.listeners.delete_batch.push((id, Box::new(f)));
        id
    }

    /// Removes a listener. `false` if the id is unknown.
    pub fn remove_listener(&mut self, id: HookId) -> bool {
        self.listeners.remove(id)
    }

    /// Heap memory that listeners report owning.
    pub fn listeners_allocated_size(&self) -> usize {
        self.listeners.allocated_size()
    }

    /// Registers an external referencer (Unreal's `FGCObject`).
    pub fn add_referencer(&mut self, r: Arc<dyn Referencer>) -> HookId {
        let id = self.next_hook_id();
        self.referencers.push((id, r));
        id
    }

    /// Removes an external referencer. `false` if the id is unknown.
    pub fn remove_referencer(&mut self, id: HookId) -> bool {
        let before = self.referencers.len();
        self.referencers.retain(|(i, _)| *i != id);
        before != self.referencers.len()
    }

    // ----- collection --------------------------------------------------------

    /// Splits the heap into the collector and what it works on.
    fn stage(&mut self) -> (&mut Collector, Stage<'_>) {
        if self.gc.config().outer_keeps_inners {
            self.ensure_inners();
        }
        (
            &mut self.gc,
            Stage {
                array: &mut self.array,
                names: &mut self.names,
                listeners: &self.listeners,
                referencers: &self.referencers,
                inners: self.inners.get_mut(),
            },
        )
    }

    /// Runs a full collection now (Unreal's `CollectGarbage`), finishing
    /// first any incremental cycle in flight. Refused with
    /// [`Error::GcDisabled`] while the collector is disabled.
    ///
    /// # Panics
    /// Resumes the first panic raised by a destruction hook, a delete
    /// listener, a `Drop` or a post-collection callback, after the collection
    /// has completed, its totals are counted and the heap is consistent (see
    /// [`Lifecycle`](crate::Lifecycle)). A panic in a pre-collection callback
    /// propagates at once, before anything is marked. A panic while marking (a
    /// hand-written `Trace` or a [`Referencer`]) abandons the cycle with
    /// nothing freed and no root forgotten.
    ///
    /// ```
    /// # use coreobject::{Error, Heap, Object};
    /// # #[derive(Object, Default)] struct Coin;
    /// let mut heap = Heap::new();
    /// heap.create(Coin);
    /// heap.set_enabled(false);
    /// assert_eq!(heap.collect(), Err(Error::GcDisabled));
    /// heap.set_enabled(true);
    /// assert_eq!(heap.collect().unwrap().freed, 1);
    /// ```
    pub fn collect(&mut self) -> Result<CollectStats, Error> {
        if !self.gc.is_enabled() {
            return Err(Error::GcDisabled);
        }
        let (gc, stage) = self.stage();
        Ok(gc.collect(stage, Trigger::Explicit, CycleKind::Major))
    }

    /// Runs a **minor** cycle now (finishing first any cycle in flight): it
    /// marks from the roots, the referencers, the old objects changed since
    /// the last cycle (through [`get_mut`](Self::get_mut), or borrowed at all
    /// if their class is interior-mutable) and the young objects reachable
    /// from those, and frees the young objects it did not reach and every
    /// object marked as garbage. Objects that survived an earlier cycle are
    /// taken as alive, so an old object that became unreachable waits for
    /// the next major cycle ([`collect`](Self::collect)), and so does what
    /// only it references. Its cost follows what the program created and
    /// changed since the last cycle, not the size of the heap.
    ///
    /// Without [`GcConfig::generational`](crate::GcConfig::generational)
    /// since the last cycle completed, it runs a major cycle instead
    /// ([`CollectStats::kind`] says which ran). Refused with
    /// [`Error::GcDisabled`] while the collector is disabled.
    ///
    /// # Panics
    /// As [`collect`](Self::collect).
    ///
    /// ```
    /// use coreobject::{CycleKind, Heap, Obj, Object};
    /// #[derive(Object, Default)]
    /// struct Node { next: Vec<Obj<Node>> }
    /// let mut heap = Heap::new();
    /// let world = heap.spawn(Node::default()).root().create().unwrap();
    /// for _ in 0..1_000 {
    ///     let n = heap.create(Node::default());
    ///     heap[world].next.push(n);
    /// }
    /// heap.collect().unwrap(); // the world is old now
    /// let kept = heap.create(Node::default());
    /// heap[world].next.push(kept); // remembered: `world` is old and changed
    /// heap.create(Node::default()); // young garbage
    /// let stats = heap.collect_minor().unwrap();
    /// assert_eq!(stats.kind, CycleKind::Minor);
    /// assert_eq!((stats.young, stats.remembered, stats.freed), (2, 1, 1));
    /// assert!(stats.marked < 10, "old objects are not marked again");
    /// assert!(heap.contains(kept));
    /// ```
    pub fn collect_minor(&mut self) -> Result<CollectStats, Error> {
        if !self.gc.is_enabled() {
            return Err(Error::GcDisabled);
        }
        let (gc, stage) = self.stage();
        Ok(gc.collect(stage, Trigger::Explicit, CycleKind::Minor))
    }

    /// Advances the collector by one frame of `dt`.
    ///
    /// Stop-the-world ([`GcConfig::incremental`](crate::GcConfig::incremental)
    /// is `None`): collects if a trigger fires (interval, object count,
    /// bytes, growth, or every frame), and otherwise finishes objects whose
    /// destruction was deferred and that are now ready. Incremental: runs at
    /// most one slice of the budget: starts a cycle when a trigger fires,
    /// otherwise continues marking or purging the cycle in flight, otherwise
    /// polls deferred objects. The returned [`Tick`] says what it did.
    ///
    /// # Panics
    /// As [`collect`](Self::collect), at the end of the slice in which the
    /// panic was caught.
    ///
    /// ```
    /// use coreobject::{GcConfig, Heap, HeapConfig, Object, Trigger};
    /// use std::time::Duration;
    /// #[derive(Object, Default)] struct Spark;
    /// let cfg = HeapConfig { gc: GcConfig { interval: Some(Duration::from_millis(50)), ..GcConfig::MANUAL }, ..HeapConfig::DEFAULT };
    /// let mut heap = Heap::with_config(cfg).unwrap();
    /// heap.create(Spark);
    /// assert!(heap.tick(Duration::from_millis(16)).completed.is_none());
    /// let stats = heap.tick(Duration::from_millis(40)).completed.unwrap();
    /// assert_eq!(stats.trigger, Trigger::Interval);
    /// assert!(heap.is_empty());
    /// ```
    ///
    /// Incremental, with a budget of 2 ms per tick:
    ///
    /// ```
    /// use coreobject::{GcConfig, Heap, HeapConfig, Obj, Object, Phase};
    /// use std::time::Duration;
    /// #[derive(Object, Default)] struct Node { next: Option<Obj<Node>> }
    /// let gc = GcConfig { incremental: Some(Duration::from_millis(2)), every_frame: true, ..GcConfig::MANUAL };
    /// let mut heap = Heap::with_config(HeapConfig { gc, ..HeapConfig::DEFAULT }).unwrap();
    /// let keep = heap.create(Node::default());
    /// heap.add_to_root(keep).unwrap();
    /// let lost = heap.create(Node::default());
    /// let stats = loop {
    ///     let tick = heap.tick(Duration::from_millis(16));
    ///     if let Some(stats) = tick.completed { break stats; }
    ///     assert_ne!(tick.phase, Phase::Idle);
    /// };
    /// assert_eq!(stats.freed, 1);
    /// assert!(heap.get(lost).is_none() && heap.get(keep).is_some());
    /// ```
    pub fn tick(&mut self, dt: Duration) -> Tick {
        let (gc, stage) = self.stage();
        gc.tick(stage, dt)
    }

    /// Runs one slice of at most `work` units of collection (objects
    /// marked, swept, finished or freed, at least one), whatever the clock:
    /// the cycle in flight continues, or a new one starts. For programs that
    /// pace collection by work rather than time, as gc-arena does, and for
    /// deterministic tests of incremental collection.
    ///
    /// ```
    /// use coreobject::{Heap, Obj, Object, Phase};
    /// #[derive(Object, Default)] struct Node { next: Option<Obj<Node>> }
    /// let mut heap = Heap::new();
    /// let root = heap.create(Node::default());
    /// heap.add_to_root(root).unwrap();
    /// for _ in 0..100 { heap.create(Node::default()); }
    /// let mut slices = 0;
    /// let stats = loop {
    ///     slices += 1;
    ///     if let Some(stats) = heap.step(10).completed { break stats; }
    /// };
    /// assert_eq!(stats.freed, 100);
    /// assert!(slices > 10, "{slices} slices");
    /// assert_eq!(heap.gc_phase(), Phase::Idle);
    /// ```
    pub fn step(&mut self, work: usize) -> Tick {
        let (gc, stage) = self.stage();
        gc.step(stage, work, CycleKind::Major)
    }

    /// [`step`](Self::step), starting a minor cycle (see
    /// [`collect_minor`](Self::collect_minor)) if none is in flight.
    pub fn step_minor(&mut self, work: usize) -> Tick {
        let (gc, stage) = self.stage();
        gc.step(stage, work, CycleKind::Minor)
    }

    /// Where the collector is: idle, marking or purging a cycle.
    pub fn gc_phase(&self) -> Phase {
        self.gc.phase()
    }

    /// Enables or disables the collector (Unreal's `DisallowGC`, as a
    /// switch). While disabled, `collect` is refused and `tick` starts
    /// no cycle (a cycle in flight goes on).
    pub fn set_enabled(&mut self, enabled: bool) {
        self.gc.set_enabled(enabled);
    }

    /// Whether the collector is enabled.
    pub fn is_enabled(&self) -> bool {
        self.gc.is_enabled()
    }

    /// The collector's settings.
    pub fn gc_config(&self) -> &GcConfig {
        self.gc.config()
    }

    /// The collector's settings, to change triggers at run time.
    ///
    /// ```
    /// # use coreobject::Heap;
    /// let mut heap = Heap::new();
    /// heap.gc_config_mut().every_frame = true;
    /// ```
    pub fn gc_config_mut(&mut self) -> &mut GcConfig {
        self.gc.config_mut()
    }

    /// Stats of the last completed cycle.
    pub fn last_collection(&self) -> Option<&CollectStats> {
        self.gc.last()
    }

    /// Running totals.
    pub fn gc_totals(&self) -> &GcTotals {
        self.gc.totals()
    }

    /// Objects waiting for `is_ready_for_finish_destroy`.
    pub fn pending_destroy(&self) -> usize {
        self.gc.pending_len()
    }

    /// Registers a callback run before each cycle.
    pub fn on_pre_collect(&mut self, f: impl FnMut(&PreCollect) + Send + Sync + 'static) -> HookId {
        let id = self.next_hook_id();
        self.gc.on_pre(id, Box::new(f));
        id
    }

    /// Registers a callback run after each cycle, with its stats.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # use std::sync::{Arc, Mutex};
    /// let seen = Arc::new(Mutex::new(0));
    /// let mut heap = Heap::new();
    /// let s = seen.clone();
    /// heap.on_post_collect(move |st| *s.lock().unwrap() += st.freed + 1);
    /// heap.collect().unwrap();
    /// assert_eq!(*seen.lock().unwrap(), 1);
    /// ```
    pub fn on_post_collect(
        &mut self,
        f: impl FnMut(&CollectStats) + Send + Sync + 'static,
    ) -> HookId {
        let id = self.next_hook_id();
        self.gc.on_post(id, Box::new(f));
        id
    }

    /// Removes a pre- or post-collection callback.
    pub fn remove_gc_callback(&mut self, id: HookId) -> bool {
        self.gc.remove_callback(id)
    }

    // ----- debugging ------------------------------------------------------------

    fn reports(&self) -> Reports<'_> {
        if self.gc.config().outer_keeps_inners {
            self.ensure_inners();
        }
        Reports {
            array: &self.array,
            names: &self.names,
            referencers: &self.referencers,
            inners: self.gc.config().outer_keeps_inners.then_some(&self.inners),
        }
    }

    /// The shortest reference chains from a root to `target`: why it is
    /// alive (Unreal's `obj refs`). Returns up to `max` chains, all of the
    /// shortest length; empty if nothing keeps the object alive.
    ///
    /// ```
    /// use coreobject::{Heap, Obj, Object};
    /// #[derive(Object, Default)]
    /// struct World { levels: Vec<Obj<Level>> }
    /// #[derive(Object, Default)]
    /// struct Level { actors: Vec<Obj<Hero>> }
    /// #[derive(Object, Default)]
    /// struct Hero;
    ///
    /// let mut heap = Heap::new();
    /// let hero = heap.spawn(Hero).name("Hero").create().unwrap();
    /// let level = heap.create(Level { actors: vec![hero] });
    /// let world = heap.spawn(World { levels: vec![level] }).name("World").root().create().unwrap();
    /// let chains = heap.reference_chains(hero, 4);
    /// assert_eq!(chains[0].to_string(), format!("(rooted) World.levels[0] -> Level_{}.actors[0] -> Hero", level.index()));
    /// ```
    pub fn reference_chains(&self, target: impl Into<AnyObj>, max: usize) -> Vec<RefChain> {
        self.reports().reference_chains(target, max)
    }

    /// Memory per class and for the heap's own structures (Unreal's
    /// `memreport`).
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// #[derive(Object, Default)]
    /// struct Mesh { verts: [f32; 30] }
    /// let heap = Heap::new();
    /// heap.create(Mesh::default());
    /// let r = heap.memory_report();
    /// assert_eq!(r.classes[0].class, "Mesh");
    /// assert!(r.classes[0].bytes >= 120);
    /// println!("{r}");
    /// ```
    pub fn memory_report(&self) -> MemoryReport {
        let collector = self.gc.memory_bytes() + self.inners.lock().allocated_bytes();
        self.reports()
            .memory_report(collector, self.listeners_allocated_size())
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

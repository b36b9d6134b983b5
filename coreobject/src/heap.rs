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
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::class::{Class, Object};
use crate::config::HeapConfig;
use crate::error::{CapReport, Error};
use crate::gc::Collector;
use crate::handle::{AnyObj, Handle, Obj, Weak};
use crate::item::{flags, Item, RETIRED};
use crate::listener::{CreateListener, DeleteListener, HookId, Listeners, ObjectEvent};
use crate::names::Names;
use crate::object::{Header, ObjBox};
use crate::referencer::Referencer;
use crate::serial::{self, TagLease};
use crate::strong::StrongObj;
use crate::table::Table;

/// State of the disregard-for-GC pool.
#[derive(Debug, Default)]
pub(crate) struct Pool {
    /// Objects created now go into the pool (while their index fits).
    pub(crate) open: bool,
    /// Indices below this may hold pool objects.
    pub(crate) capacity: u32,
    /// First index the collector considers (Unreal's `ObjFirstGCIndex`).
    pub(crate) end: u32,
}

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
    pub(crate) table: Table,
    pub(crate) lease: TagLease,
    config: HeapConfig,
    pub(crate) pool: Pool,
    /// Indices that may be roots (`ROOT` flag or non-zero ref count).
    pub(crate) root_candidates: Mutex<Vec<u32>>,
    pub(crate) names: RwLock<Names>,
    pub(crate) listeners: Listeners,
    pub(crate) referencers: Vec<(HookId, Arc<dyn Referencer>)>,
    defaults: RwLock<HashMap<TypeId, AnyObj>>,
    pub(crate) bytes_since_gc: AtomicUsize,
    /// Slots retired because their generation counter ran out.
    pub(crate) retired: u32,
    pub(crate) gc: Collector,
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
            .field("tag", &self.lease.tag)
            .field("live", &self.len())
            .field("cap", &self.table.cap())
            .finish_non_exhaustive()
    }
}

/// Counts describing the object table.
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
pub struct Spawn<'h, T: Object> {
    heap: &'h Heap,
    value: T,
    outer: Option<AnyObj>,
    name: Option<String>,
    root: bool,
}

impl<'h, T: Object> Spawn<'h, T> {
    /// Sets the outer (the object this one lives in; it keeps the outer alive).
    pub fn outer(mut self, outer: impl Into<AnyObj>) -> Self {
        self.outer = Some(outer.into());
        self
    }
    /// Names the object; names are unique among objects with the same outer.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
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
            .create_full(self.value, self.outer, self.name.as_deref())?;
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
            return Err(Error::Config("max_objects must be in 1..=2^31"));
        }
        if config.generation_bits == 0 || config.generation_bits > serial::GENERATION_BITS {
            return Err(Error::Config("generation_bits must be in 1..=22"));
        }
        if config.disregard_pool_size > config.max_objects {
            return Err(Error::Config("disregard_pool_size exceeds max_objects"));
        }
        let lease = serial::acquire(config.generation_bits)?;
        Ok(Heap {
            table: Table::new(config.max_objects, config.preallocate),
            lease,
            pool: Pool {
                open: false,
                capacity: config.disregard_pool_size,
                end: 0,
            },
            root_candidates: Mutex::new(Vec::new()),
            names: RwLock::new(Names::default()),
            listeners: Listeners::default(),
            referencers: Vec::new(),
            defaults: RwLock::new(HashMap::new()),
            bytes_since_gc: AtomicUsize::new(0),
            retired: 0,
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
        self.table.cap()
    }

    /// This heap's tag: the high bits of every serial it hands out.
    pub fn tag(&self) -> u32 {
        self.lease.tag
    }

    pub(crate) fn next_hook_id(&mut self) -> HookId {
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
        match self.table.reserve() {
            Some(index) => Ok(self.publish(index, value, None)),
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
        name: Option<&str>,
    ) -> Result<Obj<T>, Error> {
        if let Some(o) = outer {
            self.lookup(o, flags::DEAD)?;
        }
        let Some(name) = name else {
            let index = self.table.reserve().ok_or_else(|| self.cap_error())?;
            return Ok(self.publish(index, value, outer));
        };
        Names::check(name)?;
        // Hold the name lock across creation so two threads cannot both take a name.
        let mut names = self.names.write();
        if names.find(outer, name).is_some() {
            return Err(Error::NameTaken {
                name: name.to_string(),
            });
        }
        let index = match self.table.reserve() {
            Some(i) => i,
            None => {
                drop(names);
                return Err(self.cap_error());
            }
        };
        let h = self.publish_quiet(index, value, outer);
        names.insert(h.any(), outer, name);
        drop(names);
        self.notify_create(h.any());
        Ok(h)
    }

    /// Creates an object at a chosen free index (Unreal's
    /// `AlreadyAllocatedIndex`, for undo/redo or replication).
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
        self.table.sync();
        if index >= self.table.cap() {
            return Err(Error::IndexPastCap {
                index,
                cap: self.table.cap(),
            });
        }
        if index < self.pool.end || !self.table.claim(index) {
            return Err(Error::IndexTaken(index));
        }
        Ok(self.publish(index, value, None))
    }

    #[inline]
    fn publish<T: Object>(&self, index: u32, value: T, outer: Option<AnyObj>) -> Obj<T> {
        let h = self.publish_quiet(index, value, outer);
        if !self.listeners.create.is_empty() {
            self.notify_create(h.any());
        }
        h
    }

    /// Fills a reserved slot. The caller owns `index` exclusively.
    #[inline]
    fn publish_quiet<T: Object>(&self, index: u32, value: T, outer: Option<AnyObj>) -> Obj<T> {
        let item = self.table.chunks.at(index);
        let old = item.serial.load(Ordering::Relaxed);
        // A fresh slot starts at the tag's floor; a reused one already carries
        // the generation its last free bumped it to.
        let serial = if old == 0 {
            serial::make(self.lease.tag, self.lease.floor)
        } else {
            old
        };
        debug_assert_ne!(old, RETIRED, "retired slot handed out");
        let mut f = if T::HAS_HOOKS { flags::HOOKS } else { 0 };
        if self.pool.open && index < self.pool.capacity {
            f |= flags::DISREGARD;
        }
        item.flags.store(f, Ordering::Relaxed);
        item.cluster_root.store(0, Ordering::Relaxed);
        item.object
            .store(ObjBox::alloc(value, outer).as_ptr(), Ordering::Release);
        item.serial.store(serial, Ordering::Release);
        if self.gc.config.bytes_threshold.is_some() {
            self.bytes_since_gc
                .fetch_add(T::class().size(), Ordering::Relaxed);
        }
        // Not unsafe: the serial is non-zero because the tag is non-zero.
        AnyObj::new(
            index,
            std::num::NonZeroU32::new(serial).expect("tag is never 0"),
        )
        .assume()
    }

    fn notify_create(&self, obj: AnyObj) {
        if let Ok(p) = self.lookup(obj, 0) {
            let event = ObjectEvent {
                object: obj,
                // SAFETY: `p` is a live header (just looked up under `&self`).
                class: unsafe { p.as_ref() }.class,
            };
            for (_, l) in &self.listeners.create {
                l.on_create(&event);
            }
        }
    }

    #[cold]
    fn cap_error(&self) -> Error {
        Error::CapReached(CapReport {
            cap: self.table.cap(),
            by_class: self.class_counts(),
        })
    }

    // ----- resolution -------------------------------------------------------

    /// Finds a handle's live header, hiding objects whose flags meet `hidden`.
    #[inline(always)]
    pub(crate) fn lookup(&self, h: AnyObj, hidden: u32) -> Result<NonNull<Header>, Error> {
        let Some(item) = self.table.item(h.index()) else {
            return Err(self.miss(h));
        };
        if item.serial() != h.serial() {
            return Err(self.miss(h));
        }
        let Some(p) = item.object() else {
            return Err(self.miss(h));
        };
        if item.flags() & hidden != 0 {
            return Err(Error::Garbage(h));
        }
        Ok(p)
    }

    #[cold]
    fn miss(&self, h: AnyObj) -> Error {
        let t = serial::tag(h.serial());
        // Every slot of this heap starts at its lease's floor: a generation
        // below it was issued by an earlier heap that held the same tag.
        if t != self.lease.tag || serial::generation(h.serial()) < self.lease.floor {
            Error::Foreign {
                handle: h,
                handle_heap: t,
                this_heap: self.lease.tag,
            }
        } else {
            Error::Stale(h)
        }
    }

    #[inline(always)]
    pub(crate) fn typed<T: Object>(
        &self,
        h: AnyObj,
        hidden: u32,
    ) -> Result<NonNull<Header>, Error> {
        let p = self.lookup(h, hidden)?;
        // SAFETY: `p` is a live header; reading its class is a shared read.
        let class = unsafe { p.as_ref() }.class;
        if !class.is::<T>() {
            return Err(Error::WrongClass {
                handle: h,
                expected: T::class().name(),
                actual: class.name(),
            });
        }
        Ok(p)
    }

    /// Resolves a handle: `None` if the object is gone, garbage, of another
    /// class, or the handle is from another heap.
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
        let p = self.typed::<H::Target>(h.any_obj(), flags::DEAD).ok()?;
        // SAFETY: `p` heads a live ObjBox<Target> (class checked), and it cannot be
        // freed or mutably borrowed while `&self` is borrowed.
        Some(unsafe { ObjBox::<H::Target>::value(p) })
    }

    /// Like [`get`](Self::get), but says why a handle does not resolve.
    ///
    /// ```
    /// # use coreobject::{Error, Heap, Object};
    /// # #[derive(Object, Default)] struct Coin;
    /// let a = Heap::new();
    /// let b = Heap::new();
    /// let c = a.create(Coin);
    /// assert!(matches!(b.try_get(c), Err(Error::Foreign { .. })));
    /// ```
    #[inline]
    pub fn try_get<H: Handle>(&self, h: H) -> Result<&H::Target, Error>
    where
        H::Target: Object,
    {
        let p = self.typed::<H::Target>(h.any_obj(), flags::DEAD)?;
        // SAFETY: as in `get`.
        Ok(unsafe { ObjBox::<H::Target>::value(p) })
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
        let p = self
            .typed::<H::Target>(h.any_obj(), flags::UNREACHABLE)
            .ok()?;
        // SAFETY: as in `get`.
        Some(unsafe { ObjBox::<H::Target>::value(p) })
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
    /// `get_mut` and `heap[h]` both pass through here.
    #[inline]
    fn try_get_mut<H: Handle>(&mut self, h: H) -> Result<&mut H::Target, Error>
    where
        H::Target: Object,
    {
        let p = self.typed::<H::Target>(h.any_obj(), flags::DEAD)?;
        self.write_barrier(h.any_obj());
        // SAFETY: `p` heads a live ObjBox<Target>; `&mut self` guarantees no other
        // reference into the heap exists for the returned lifetime.
        Ok(unsafe { ObjBox::<H::Target>::value_mut(p) })
    }

    /// Hook for the incremental collector: every mutable access passes here.
    #[inline(always)]
    fn write_barrier(&mut self, _obj: AnyObj) {}

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
        self.lookup(h.into(), flags::DEAD).is_ok()
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
        self.typed::<T>(w.any(), flags::DEAD).ok()?;
        Some(w.strong())
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
        self.typed::<T>(h, flags::DEAD).ok()?;
        Some(h.assume())
    }

    /// The class of a live object (Unreal's `GetClass`).
    pub fn class_of(&self, h: impl Into<AnyObj>) -> Option<&'static Class> {
        let p = self.lookup(h.into(), flags::UNREACHABLE).ok()?;
        // SAFETY: `p` is a live header.
        Some(unsafe { p.as_ref() }.class)
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
        let p = self.lookup(h.into(), flags::UNREACHABLE).ok()?;
        // SAFETY: `p` is a live header.
        let outer = unsafe { p.as_ref() }.outer?;
        self.lookup(outer, flags::UNREACHABLE).ok().map(|_| outer)
    }

    /// Whether the object is marked as garbage (or being destroyed).
    pub fn is_garbage(&self, h: impl Into<AnyObj>) -> bool {
        matches!(self.lookup(h.into(), flags::DEAD), Err(Error::Garbage(_)))
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
        self.lookup(h, flags::DEAD)?;
        let item = self.table.chunks.at(h.index());
        let prev = item
            .flags
            .fetch_or(flags::ROOT | flags::LISTED, Ordering::Relaxed);
        if prev & flags::LISTED == 0 {
            self.root_candidates.lock().push(h.index());
        }
        Ok(())
    }

    /// Removes an object from the root set (Unreal's `RemoveFromRoot`).
    pub fn remove_from_root(&self, h: impl Into<AnyObj>) -> Result<(), Error> {
        let h = h.into();
        self.lookup(h, flags::UNREACHABLE)?;
        self.table
            .chunks
            .at(h.index())
            .flags
            .fetch_and(!flags::ROOT, Ordering::Relaxed);
        Ok(())
    }

    /// Whether the object is in the root set.
    pub fn is_rooted(&self, h: impl Into<AnyObj>) -> bool {
        let h = h.into();
        self.lookup(h, flags::UNREACHABLE).is_ok()
            && self.table.chunks.at(h.index()).flags() & flags::ROOT != 0
    }

    /// A strong RAII handle that roots the object while it lives (Unreal's
    /// `TStrongObjectPtr`). `None` if the object is not alive.
    pub fn strong<T: Object>(&self, h: Obj<T>) -> Option<StrongObj<T>> {
        self.typed::<T>(h.any(), flags::DEAD).ok()?;
        let (s, prev) = StrongObj::acquire(&self.table.chunks, h.any());
        if prev == 0 {
            let item = self.table.chunks.at(h.index());
            if item.flags.fetch_or(flags::LISTED, Ordering::Relaxed) & flags::LISTED == 0 {
                self.root_candidates.lock().push(h.index());
            }
        }
        Some(s)
    }

    /// The number of [`StrongObj`] handles to an object.
    pub fn strong_count(&self, h: impl Into<AnyObj>) -> usize {
        let h = h.into();
        match self.lookup(h, flags::UNREACHABLE) {
            Ok(_) => self
                .table
                .chunks
                .at(h.index())
                .refcount
                .load(Ordering::Relaxed) as usize,
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
        self.lookup(h, flags::UNREACHABLE)?;
        let item = self.table.chunks.at(h.index());
        if item.flags() & (flags::DISREGARD | flags::DEFAULT_OBJECT) != 0 {
            return Err(Error::Permanent(h));
        }
        item.flags.fetch_or(flags::GARBAGE, Ordering::Relaxed);
        Ok(())
    }

    /// Clears the garbage mark (Unreal's `ClearGarbage`), if the object has
    /// not been collected yet.
    pub fn clear_garbage(&self, h: impl Into<AnyObj>) -> Result<(), Error> {
        let h = h.into();
        self.lookup(h, flags::UNREACHABLE)?;
        self.table
            .chunks
            .at(h.index())
            .flags
            .fetch_and(!flags::GARBAGE, Ordering::Relaxed);
        Ok(())
    }

    // ----- names ----------------------------------------------------------

    /// The object's name, if it was given one.
    pub fn name_of(&self, h: impl Into<AnyObj>) -> Option<Arc<str>> {
        let h = h.into();
        self.lookup(h, flags::UNREACHABLE).ok()?;
        self.names.read().name_of(h.index())
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

    /// Finds an object by dotted path, e.g. `"World.Level_3.Hero"`.
    pub fn find_path(&self, path: &str) -> Option<AnyObj> {
        let mut cur: Option<AnyObj> = None;
        for part in path.split('.') {
            cur = Some(self.find(cur, part)?);
        }
        cur
    }

    // ----- iteration and counts -------------------------------------------

    /// Objects allocated: live ones, garbage ones not yet collected, and ones
    /// awaiting `finish_destroy`.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Coin;
    /// let heap = Heap::new();
    /// heap.create(Coin);
    /// assert_eq!(heap.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        let t = self.table_stats_quick();
        t.0 as usize - t.1 - self.retired as usize - self.gc.parked_len()
    }

    fn table_stats_quick(&self) -> (u32, usize) {
        (self.table.high_water(), self.table.free_remaining())
    }

    /// Whether no objects are allocated.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Counts describing the table.
    pub fn table_stats(&self) -> TableStats {
        TableStats {
            objects: self.len(),
            high_water: self.table.high_water(),
            free: self.table.free_remaining(),
            retired: self.retired,
            chunks: self.table.chunks.allocated_chunks(),
            cap: self.table.cap(),
            disregard: self.disregard_len(),
        }
    }

    #[inline]
    pub(crate) fn slot(&self, index: u32) -> Option<ObjectRef<'_>> {
        let item: &Item = self.table.item(index)?;
        let header = item.object()?;
        let serial = std::num::NonZeroU32::new(item.serial())?;
        Some(ObjectRef {
            heap: self,
            id: AnyObj::new(index, serial),
            header,
            flags: item.flags(),
        })
    }

    fn iter_range(&self, from: u32) -> impl Iterator<Item = ObjectRef<'_>> + '_ {
        (from..self.table.high_water())
            .filter_map(move |i| self.slot(i))
            .filter(|o| o.flags & flags::DEAD == 0)
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
        self.iter().filter_map(|o| {
            let v = o.downcast::<T>()?;
            Some((o.id.assume(), v))
        })
    }

    /// Live objects the collector considers: everything outside the
    /// disregard-for-GC pool.
    pub fn iter_gc_considered(&self) -> impl Iterator<Item = ObjectRef<'_>> + '_ {
        self.iter_range(self.pool.end)
            .filter(|o| o.flags & flags::DISREGARD == 0)
    }

    /// Calls `f` for each live object whose outer is `outer` (Unreal's
    /// `ForEachObjectWithOuter`, without recursion into inners' inners).
    pub fn for_each_with_outer(&self, outer: impl Into<AnyObj>, mut f: impl FnMut(ObjectRef<'_>)) {
        let outer = outer.into();
        for o in self.iter() {
            if o.header().outer == Some(outer) {
                f(o)
            }
        }
    }

    /// Live objects per class, most numerous first.
    pub fn class_counts(&self) -> Vec<(&'static str, usize)> {
        let mut by: HashMap<*const Class, (&'static str, usize)> = HashMap::new();
        for i in 0..self.table.high_water() {
            if let Some(o) = self.slot(i) {
                let c = o.class();
                by.entry(c as *const Class).or_insert((c.name(), 0)).1 += 1;
            }
        }
        let mut v: Vec<_> = by.into_values().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        v
    }

    /// The class default object of `T` (Unreal's CDO): made on first request
    /// from `T::default()`, rooted, named `Default__ClassName`. `None` if `T`
    /// does not implement `Default`.
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
    /// ```
    pub fn class_default<T: Object>(&self) -> Option<Obj<T>> {
        let key = TypeId::of::<T>();
        if let Some(h) = self.defaults.read().get(&key) {
            if let Some(o) = self.downcast::<T>(*h) {
                return Some(o);
            }
        }
        let mut map = self.defaults.write();
        if let Some(o) = map.get(&key).and_then(|h| self.downcast::<T>(*h)) {
            return Some(o);
        }
        let boxed = (T::class().vt.make_default)()?;
        let value = *boxed.downcast::<T>().ok()?;
        let name = format!("Default__{}", T::class().name());
        let h = self.spawn(value).name(name).root().create().ok()?;
        self.table
            .chunks
            .at(h.index())
            .flags
            .fetch_or(flags::DEFAULT_OBJECT, Ordering::Relaxed);
        map.insert(key, h.any());
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
        if self.pool.open {
            return Ok(());
        }
        if self.pool.capacity == 0 {
            return Err(Error::DisregardPool(
                "the pool has no room (HeapConfig::disregard_pool_size is 0, or it was disabled)",
            ));
        }
        self.table.sync();
        if self.table.high_water() != self.pool.end {
            return Err(Error::DisregardPool(
                "slots outside the pool have been used; open the pool before creating other objects",
            ));
        }
        if self.pool.end >= self.pool.capacity {
            return Err(Error::DisregardPool("the pool is full"));
        }
        self.pool.open = true;
        Ok(())
    }

    /// Closes the pool (Unreal's `CloseDisregardForGC`).
    pub fn close_disregard_for_gc(&mut self) {
        if !self.pool.open {
            return;
        }
        self.table.sync();
        self.pool.end = self.table.high_water().min(self.pool.capacity);
        self.pool.open = false;
    }

    /// Disables the pool for good (Unreal's `DisableDisregardForGC`). Objects
    /// already in it become ordinary objects; they are added to the root set
    /// so that none is lost.
    pub fn disable_disregard_for_gc(&mut self) {
        self.close_disregard_for_gc();
        for i in 0..self.pool.end {
            let item = self.table.chunks.at(i);
            if item.flags() & flags::DISREGARD != 0 {
                let prev = item.flags.fetch_and(!flags::DISREGARD, Ordering::Relaxed);
                item.flags
                    .fetch_or(flags::ROOT | flags::LISTED, Ordering::Relaxed);
                if prev & flags::LISTED == 0 {
                    self.root_candidates.get_mut().push(i);
                }
            }
        }
        self.pool = Pool::default();
    }

    /// Whether the pool is open.
    pub fn is_disregard_open(&self) -> bool {
        self.pool.open
    }

    /// Objects in the pool.
    pub fn disregard_len(&self) -> u32 {
        if self.pool.open {
            self.table.high_water().min(self.pool.capacity)
        } else {
            self.pool.end
        }
    }

    /// The first index the collector considers (Unreal's `ObjFirstGCIndex`).
    pub fn first_gc_index(&self) -> u32 {
        self.pool.end
    }

    // ----- listeners and referencers ----------------------------------

    /// Registers a create listener. See [`crate::listener`].
    pub fn add_create_listener(&mut self, l: impl CreateListener) -> HookId {
        let id = self.next_hook_id();
        self.listeners.create.push((id, Box::new(l)));
        id
    }

    /// Registers a delete listener. See [`crate::listener`].
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
}

impl Drop for Heap {
    fn drop(&mut self) {
        self.listeners.shutdown();
        self.table.sync();
        let mut highest: Option<u32> = (self.retired > 0).then_some(self.lease.limit);
        for i in 0..self.table.high_water() {
            let item = self.table.chunks.at(i);
            let s = item.serial.load(Ordering::Relaxed);
            if serial::tag(s) == self.lease.tag {
                let g = serial::generation(s);
                highest = Some(highest.map_or(g, |h| h.max(g)));
            }
            let p = item.object.swap(std::ptr::null_mut(), Ordering::AcqRel);
            if let Some(p) = NonNull::new(p) {
                // SAFETY: `p` is a live header owned by this slot; it was just unlinked,
                // so it is dropped exactly once, and no reference into the heap remains.
                unsafe { (p.as_ref().class.vt.drop)(p) };
            }
        }
        serial::release(self.lease, highest);
    }
}

/// A live object seen while iterating.
#[derive(Clone, Copy)]
pub struct ObjectRef<'h> {
    heap: &'h Heap,
    id: AnyObj,
    header: NonNull<Header>,
    flags: u32,
}

impl<'h> ObjectRef<'h> {
    pub(crate) fn header_ptr(&self) -> NonNull<Header> {
        self.header
    }
    fn header(&self) -> &'h Header {
        // SAFETY: the header is live while the heap is borrowed for 'h.
        unsafe { self.header.as_ref() }
    }
    /// The object's handle.
    pub fn id(&self) -> AnyObj {
        self.id
    }
    /// Its class.
    pub fn class(&self) -> &'static Class {
        self.header().class
    }
    /// Its outer, if any.
    pub fn outer(&self) -> Option<AnyObj> {
        self.header().outer
    }
    /// Whether it is in the disregard-for-GC pool.
    pub fn is_disregard(&self) -> bool {
        self.flags & flags::DISREGARD != 0
    }
    /// Whether it is in the root set.
    pub fn is_rooted(&self) -> bool {
        self.flags & flags::ROOT != 0
    }
    /// The value, if it is a `T`.
    pub fn downcast<T: Object>(&self) -> Option<&'h T> {
        if !self.class().is::<T>() {
            return None;
        }
        // SAFETY: the class matches, so the header heads an ObjBox<T>, live for 'h.
        Some(unsafe { ObjBox::<T>::value(self.header) })
    }
    /// Its display name.
    pub fn display_name(&self) -> String {
        self.heap
            .display_name(self.id)
            .unwrap_or_else(|| format!("#{}", self.id.index()))
    }
}

impl fmt::Debug for ObjectRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({:?})", self.class().name(), self.id)
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
fn index_failed(h: impl fmt::Debug, e: Error) -> ! {
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

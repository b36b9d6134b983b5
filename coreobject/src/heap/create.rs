//! Creating objects: `create`, `spawn`, at a chosen index or serial, and class default objects.

use std::marker::PhantomData;
use std::sync::atomic::Ordering;

use crate::array::flags;
use crate::class::Object;
use crate::error::{CapReport, Error, PoolError};
use crate::handle::{AnyObj, Obj};
use crate::listener::ObjectEvent;
use crate::names::{IntoName, NameArg};

use super::{Heap, Spawn};

/// An object to restore at a chosen index and serial, with a name, an outer
/// or a root flag: see [`Heap::spawn_at`]. Refused as
/// [`create_at_with_serial`](Heap::create_at_with_serial) refuses a slot or
/// a serial, and as [`Spawn::create`] refuses a name or an outer.
#[must_use = "call .create() to make the object"]
#[derive(Debug)]
pub struct SpawnAt<'h, T: Object> {
    heap: &'h mut Heap,
    index: u32,
    serial: u32,
    value: T,
    outer: Option<AnyObj>,
    name: Option<NameArg>,
    root: bool,
}

impl<T: Object> Spawn<'_, T, &mut Heap> {
    /// Creates the object, as [`Spawn::create`], without a lock.
    #[inline]
    pub fn create(self) -> Result<Obj<T>, Error> {
        let heap = self.heap;
        let h = heap.create_full_mut(self.value, self.outer, self.name.as_ref(), self.unique)?;
        if self.root {
            heap.add_to_root(h)?;
        }
        Ok(h)
    }
}

impl<'h, T: Object> Spawn<'h, T, &'h mut Heap> {
    /// Restores the object at a chosen free index with a chosen serial
    /// instead of a fresh slot: `heap.spawn_mut(v).name(n).outer(o).at(index,
    /// serial).create()` is [`Heap::spawn_at`] with the options set so far
    /// (a [`unique_name`](Spawn::unique_name) is taken as the name itself).
    ///
    /// ```
    /// use coreobject::{Heap, Object};
    /// #[derive(Object, Default)]
    /// struct Prop;
    /// let mut heap = Heap::new();
    /// let p = heap.spawn_mut(Prop).name("Crate").create().unwrap();
    /// heap.collect().unwrap(); // nothing holds it
    /// let back = heap.spawn_mut(Prop).name("Crate").at(p.index(), p.serial()).create().unwrap();
    /// assert_eq!((back, heap.path_name(p).as_deref()), (p, Some("Crate")));
    /// ```
    pub fn at(self, index: u32, serial: u32) -> SpawnAt<'h, T> {
        SpawnAt {
            heap: self.heap,
            index,
            serial,
            value: self.value,
            outer: self.outer,
            name: self.name,
            root: self.root,
        }
    }
}

impl<T: Object> SpawnAt<'_, T> {
    /// Sets the outer, as [`Spawn::outer`].
    pub fn outer(mut self, outer: impl Into<AnyObj>) -> Self {
        self.outer = Some(outer.into());
        self
    }
    /// Names the object, as [`Spawn::name`].
    pub fn name(mut self, name: impl IntoName) -> Self {
        self.name = Some(name.into_name_arg());
        self
    }
    /// Adds the object to the root set.
    pub fn root(mut self) -> Self {
        self.root = true;
        self
    }
    /// Restores the object. Nothing changes if it is refused.
    pub fn create(self) -> Result<Obj<T>, Error> {
        let heap = self.heap;
        if heap.array.pool().open {
            return Err(PoolError::CreateAtWhileOpen.into());
        }
        if let Some(o) = self.outer {
            heap.array.lookup(o, flags::DEAD)?;
            // Objects that outlived the slot's last occupant may still name
            // it as their outer: the new outer's chain must not pass
            // through the restored handle (an outer cycle, as `rename`
            // refuses).
            let me = AnyObj::from_bits(self.index as u64 | (self.serial as u64) << 32);
            let mut up = Some(o);
            while let Some(u) = up {
                if Some(u) == me {
                    return Err(Error::OuterCycle {
                        object: u,
                        outer: o,
                    });
                }
                up = heap.array.outer(u, 0).ok().flatten();
            }
        }
        let key = match &self.name {
            Some(name) => Some(heap.names.get_mut().claim(self.outer, name)?),
            None => None,
        };
        if let Err(e) = heap.array.claim_with_serial(self.index, self.serial) {
            if let Some(key) = key {
                heap.names.get_mut().release(key);
            }
            return Err(e);
        }
        // Handles to another class may carry this serial: typed resolves of
        // this object compare the class (see `ObjectArray::resolve`).
        let named = if key.is_some() { flags::NAMED } else { 0 };
        // Changed for a store too: the slot's old serial may name a saved
        // record whose contents this object replaces.
        let extra = flags::RESTORED | flags::CHANGED | named;
        let h = heap.publish_quiet(self.index, self.value, self.outer, extra);
        if let Some(key) = key {
            let names = heap.names.get_mut();
            names.insert(h.any(), key);
            heap.name_hint.update(names);
        }
        if !heap.listeners.create.is_empty() {
            heap.notify_create(h.any());
        }
        // Inners of the former occupant that outlived it name it again
        // (their headers hold this handle): it is their outer once more.
        if heap.inners.get_mut().has_entry(h.any().to_bits()) {
            heap.array.at(self.index).set(flags::OUTER);
        }
        // Handles held anywhere (in old objects too) name it again.
        heap.gc.note_revived(h.any());
        if self.root {
            heap.add_to_root(h)?;
        }
        Ok(h)
    }
}

impl Heap {
    /// Creates an object and returns its handle. Thread-safe: takes `&self`.
    ///
    /// # Panics
    /// If the object cap is reached; the message lists the classes filling
    /// the table. Also if the disregard-for-GC pool is open and full (see
    /// [`open_disregard_for_gc`](Self::open_disregard_for_gc)). Use
    /// [`try_create`](Self::try_create) to get the error.
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

    /// Creates an object through exclusive access to the heap: the same
    /// object and handle as [`create`](Self::create), without a lock or a
    /// locked instruction (the borrow proves that no other thread is
    /// creating). The path to take when the heap is owned by the code that
    /// fills it, as in a game's main loop between collections.
    ///
    /// # Panics
    /// If the object cap is reached, as [`create`](Self::create).
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// #[derive(Object, Default)]
    /// struct Node { next: Option<coreobject::Obj<Node>> }
    /// let mut heap = Heap::new();
    /// let tail = heap.create_mut(Node { next: None });
    /// let head = heap.create_mut(Node { next: Some(tail) });
    /// assert_eq!(heap[head].next, Some(tail));
    /// ```
    #[inline]
    pub fn create_mut<T: Object>(&mut self, value: T) -> Obj<T> {
        match self.try_create_mut(value) {
            Ok(h) => h,
            Err(e) => panic!("{e}"),
        }
    }

    /// [`create_mut`](Self::create_mut), or the error that the cap is
    /// reached (as [`try_create`](Self::try_create)).
    ///
    /// ```
    /// use coreobject::{Heap, HeapConfig, Object};
    /// #[derive(Object, Default)]
    /// struct Gem;
    /// let mut heap = Heap::with_config(HeapConfig { max_objects: 1, ..HeapConfig::DEFAULT }).unwrap();
    /// heap.try_create_mut(Gem).unwrap();
    /// assert!(heap.try_create_mut(Gem).is_err());
    /// ```
    #[inline]
    pub fn try_create_mut<T: Object>(&mut self, value: T) -> Result<Obj<T>, Error> {
        let birth = self.gc.birth_flags() | flags::CHANGED;
        match self.array.create_mut(value, None, birth) {
            Some(h) => {
                // Born changed: its slot joins the capture's set, as in
                // `publish_quiet` (a plain store: `&mut self`).
                self.store_dirty.mark_mut(h.index());
                self.gc.note_alloc(T::class().size());
                if !self.listeners.create.is_empty() {
                    self.notify_create(h.any());
                }
                // While a cycle marks, traced now, in the cache (one
                // predictable branch otherwise). Last: a hand-written
                // `Trace` that panics leaves a whole object.
                if self.gc.is_marking() {
                    self.gc.trace_at_birth(self.array.chunks(), h.index());
                }
                Ok(h)
            }
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
            unique: false,
            root: false,
            _heap: PhantomData,
        }
    }

    /// [`spawn`](Self::spawn) through exclusive access: the builder's
    /// [`create`](Spawn::create) takes neither the name lock nor any other,
    /// as [`create_mut`](Self::create_mut). Refuses what `spawn` refuses.
    ///
    /// ```
    /// use coreobject::{Heap, Object};
    /// #[derive(Object, Default)]
    /// struct Level;
    /// let mut heap = Heap::new();
    /// let world = heap.spawn_mut(Level).name("World").root().create().unwrap();
    /// let lvl = heap.spawn_mut(Level).outer(world).name("Level_3").create().unwrap();
    /// assert_eq!(heap.path_name(lvl).unwrap(), "World.Level_3");
    /// assert!(heap.spawn_mut(Level).outer(world).name("Level_3").create().is_err());
    /// ```
    pub fn spawn_mut<T: Object>(&mut self, value: T) -> Spawn<'_, T, &mut Heap> {
        Spawn {
            heap: self,
            value,
            outer: None,
            name: None,
            unique: false,
            root: false,
            _heap: PhantomData,
        }
    }

    /// [`create_full`](Self::create_full) through exclusive access: no lock.
    fn create_full_mut<T: Object>(
        &mut self,
        value: T,
        outer: Option<AnyObj>,
        name: Option<&NameArg>,
        unique: bool,
    ) -> Result<Obj<T>, Error> {
        if let Some(o) = outer {
            self.array.lookup(o, flags::DEAD)?;
        }
        let key = match name {
            Some(name) => {
                let names = self.names.get_mut();
                let key = if unique {
                    names.claim_unique(outer, name)?
                } else {
                    names.claim(outer, name)?
                };
                self.name_hint.update(names);
                Some(key)
            }
            None => None,
        };
        let named = if key.is_some() { flags::NAMED } else { 0 };
        let extra = self.gc.birth_flags() | flags::CHANGED | named;
        let Some(h) = self.array.create_mut(value, outer, extra) else {
            if let Some(key) = key {
                self.names.get_mut().release(key);
            }
            return Err(self.cap_error());
        };
        // Born changed: its slot joins the capture's set, as in
        // `publish_quiet` (a plain store: `&mut self`).
        self.store_dirty.mark_mut(h.index());
        self.gc.note_alloc(T::class().size());
        if let Some(key) = key {
            self.names.get_mut().insert(h.any(), key);
        }
        if let Some(o) = outer {
            if *self.inners_on.get_mut() {
                self.inners.get_mut().insert(o, h.any());
                self.array.at(o.index()).set(flags::OUTER);
            }
        }
        if !self.listeners.create.is_empty() {
            self.notify_create(h.any());
        }
        // While a cycle marks, traced now, in the cache (one predictable
        // branch otherwise). Last: a hand-written `Trace` that panics leaves
        // a whole object (named, filed under its outer, announced).
        if self.gc.is_marking() {
            self.gc.trace_at_birth(self.array.chunks(), h.index());
        }
        Ok(h)
    }

    #[inline]
    pub(super) fn create_full<T: Object>(
        &self,
        value: T,
        outer: Option<AnyObj>,
        name: Option<&NameArg>,
        unique: bool,
    ) -> Result<Obj<T>, Error> {
        if let Some(name) = name {
            return self.create_named(value, outer, name, unique);
        }
        if let Some(o) = outer {
            self.array.lookup(o, flags::DEAD)?;
        }
        let index = self.array.reserve().ok_or_else(|| self.cap_error())?;
        Ok(self.publish(index, value, outer, 0))
    }

    /// [`create_full`](Self::create_full) with a name: `name` itself, or
    /// with `unique`, its base and a generated number.
    fn create_named<T: Object>(
        &self,
        value: T,
        outer: Option<AnyObj>,
        name: &NameArg,
        unique: bool,
    ) -> Result<Obj<T>, Error> {
        if !unique {
            // Start loading the name's filter word: it arrives while the
            // outer is checked and the lock taken.
            self.name_hint.prefetch(name);
        }
        if let Some(o) = outer {
            self.array.lookup(o, flags::DEAD)?;
        }
        // Hold the name lock across creation so two threads cannot both take a name.
        let mut names = self.names.write();
        let key = if unique {
            names.claim_unique(outer, name)?
        } else {
            names.claim(outer, name)?
        };
        self.name_hint.update(&names);
        let index = match self.array.reserve() {
            Some(i) => i,
            None => {
                names.release(key);
                drop(names);
                return Err(self.cap_error());
            }
        };
        // Filled with its NAMED flag: the record is in place before the lock
        // goes, and nothing frees an object while the lock is held.
        let h = self.publish_quiet(index, value, outer, flags::NAMED | flags::CHANGED);
        names.insert(h.any(), key);
        drop(names);
        if !self.listeners.create.is_empty() {
            self.notify_create(h.any());
        }
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
        self.spawn_at(index, serial, value).create()
    }

    /// Starts building an object restored at a chosen free index with a
    /// chosen serial, as [`create_at_with_serial`](Self::create_at_with_serial)
    /// does, with what a [`spawn`](Self::spawn) carries: a name, an outer and
    /// a root flag. An undo log that recorded an object's handle, name and
    /// outer brings it back whole: handles to it resolve again, and so do
    /// its path and [`outer_of`](Self::outer_of). Objects that outlived it
    /// and were its inners are its inners again (their headers kept its
    /// handle): [`for_each_with_outer`](Self::for_each_with_outer) lists
    /// them, and with [`GcConfig::outer_keeps_inners`](crate::GcConfig::outer_keeps_inners)
    /// it keeps them alive. [`SpawnAt::create`] refuses an outer whose own
    /// chain of outers passes through the restored handle
    /// ([`Error::OuterCycle`]), as [`rename`](Self::rename) does.
    ///
    /// ```
    /// use coreobject::{Heap, Object};
    /// #[derive(Object, Default)]
    /// struct Level;
    /// #[derive(Object, Default)]
    /// struct Knight { hp: u32 }
    ///
    /// let mut heap = Heap::new();
    /// let level = heap.spawn(Level).name("Level_1").root().create().unwrap();
    /// let knight = heap.spawn(Knight { hp: 10 }).outer(level).name("Knight").create().unwrap();
    /// // Delete, remembering what undo needs (the name as a string: a `Name`
    /// // is good only while the heap holds its base).
    /// let (name, outer) = (heap.name_of(knight).unwrap(), heap.outer_of(knight).unwrap());
    /// heap.mark_as_garbage(knight).unwrap();
    /// heap.collect().unwrap();
    /// assert!(heap.get(knight).is_none());
    /// // Undo.
    /// let back = heap
    ///     .spawn_at(knight.index(), knight.serial(), Knight { hp: 10 })
    ///     .name(name)
    ///     .outer(outer)
    ///     .create()
    ///     .unwrap();
    /// assert_eq!(back, knight);
    /// assert_eq!(heap.path_name(knight).as_deref(), Some("Level_1.Knight"));
    /// assert_eq!(heap.outer_of(knight), Some(level.any()));
    /// ```
    pub fn spawn_at<T: Object>(&mut self, index: u32, serial: u32, value: T) -> SpawnAt<'_, T> {
        SpawnAt {
            heap: self,
            index,
            serial,
            value,
            outer: None,
            name: None,
            root: false,
        }
    }

    #[inline]
    pub(super) fn publish<T: Object>(
        &self,
        index: u32,
        value: T,
        outer: Option<AnyObj>,
        extra: u32,
    ) -> Obj<T> {
        // Born `CHANGED`: a capture looks at a slot filled since the last
        // one (`publish_quiet` marks it), so the object's first write
        // through `get_mut` has nothing to add and finds the flag set (no
        // locked instruction on the item). Objects a load places are not:
        // they are what the store holds.
        let h = self.publish_quiet(index, value, outer, extra | flags::CHANGED);
        if !self.listeners.create.is_empty() {
            self.notify_create(h.any());
        }
        h
    }

    /// Fills a reserved slot, with item flags `extra` besides the usual
    /// ones. The caller owns `index` exclusively.
    #[inline]
    pub(super) fn publish_quiet<T: Object>(
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
        // A capture looks at a slot refilled since the last one.
        self.store_dirty.mark(index);
        if let Some(o) = outer {
            self.note_inner(o, h.any());
        }
        h
    }

    /// Files a new object under its outer (alive, checked by the caller; it
    /// cannot be freed meanwhile: that takes `&mut self`).
    pub(super) fn note_inner(&self, outer: AnyObj, inner: AnyObj) {
        // SeqCst with `ensure_inners`: either this sees the index on, or the
        // scan that turns it on sees this object (or both: duplicates are
        // harmless and removed when read).
        if self.inners_on.load(Ordering::SeqCst) {
            self.inners.lock().insert(outer, inner);
            self.array.at(outer.index()).set(flags::OUTER);
        }
    }

    /// Builds the outer → inners index from the table, once.
    pub(super) fn ensure_inners(&self) {
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

    pub(super) fn notify_create(&self, obj: AnyObj) {
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
    pub(super) fn cap_error(&self) -> Error {
        if let Some(e) = self.pool_refusal() {
            return e;
        }
        Error::CapReached(CapReport {
            cap: self.array.cap(),
            by_class: self.array.class_counts(true),
        })
    }
}

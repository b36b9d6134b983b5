//! Reference tracing: how the collector finds the handles inside an object.
//!
//! Every field of a class must say what it holds. [`Trace`] is that statement: a
//! type implements it by reporting each strong handle it contains to a
//! [`Visitor`]. `#[derive(Object)]` and `#[derive(Trace)]` write the
//! implementation for you, field by field, so a handle field you forgot to
//! annotate is still traced: the only ways *not* to trace a field are an
//! explicit `#[object(skip)]` or a [`Weak`] handle.
//!
//! `Trace` is a safe trait. A wrong implementation cannot cause undefined
//! behaviour, because handles never dangle: an object whose reference was not
//! reported is freed, and the handle then resolves to `None`.
//!
//! ```
//! use coreobject::{Heap, Obj, Object, Trace};
//!
//! #[derive(Trace, Default)]
//! struct Inventory { slots: Vec<Option<Obj<Item>>>, gold: u32 }
//!
//! #[derive(Object, Default)]
//! struct Item { weight: f32 }
//!
//! #[derive(Object, Default)]
//! struct Player { inventory: Inventory }
//!
//! let mut heap = Heap::new();
//! let sword = heap.create(Item { weight: 3.5 });
//! let player = heap.create(Player::default());
//! heap.add_to_root(player).unwrap();
//! heap[player].inventory.slots.push(Some(sword));
//! heap.collect().unwrap();
//! assert!(heap.get(sword).is_some(), "reached through Player.inventory.slots[0]");
//! ```
//!
//! ## Atomics and locks
//!
//! The integer atomics and `AtomicBool` are plain data. `AtomicPtr` is
//! deliberately not traceable: a raw pointer field could smuggle a pointer
//! into an object past the handle discipline, so a field holding one must be
//! marked `#[object(skip)]`, and is then never traced.
//!
//! ```compile_fail
//! use std::sync::atomic::AtomicPtr;
//! #[derive(coreobject::Object)]
//! struct Raw { p: AtomicPtr<u8> } // error: `AtomicPtr<u8>` cannot be traced
//! ```
//!
//! `Mutex<T>` and `RwLock<T>`, from `std::sync` and from `parking_lot`, are
//! traced through to their `T`, like `Box` and `Arc`: a lock field has the
//! [`RefKind`] of what it guards. The **locking rule**: tracing takes the lock
//! with `try_lock` (`try_read` for an `RwLock`) and never blocks on it, so it
//! cannot deadlock; and it never skips the contents, since skipping could free
//! a live object. A poisoned `std` lock is traced like any other. While a
//! collection runs no borrow of any object exists (it takes `&mut Heap`), so
//! a lock can only be held by code that reaches it some other way, such as
//! from the same thread while a `&Heap` walk such as
//! [`Heap::reference_chains`](crate::Heap::reference_chains) runs. Tracing then retries, backing off, for up to [`LOCK_WAIT`] in
//! total, and if the lock is still held it **panics**, naming the lock's
//! type. A panic while marking abandons the collection with nothing freed
//! and no root forgotten; once the lock is released, the next collection
//! works. So: never hold a lock inside a heap object across a collection.
//! The contents are only read, and only for as long as tracing them takes.
//!
//! ```
//! use coreobject::{Heap, Obj, Object};
//! use parking_lot::Mutex;
//!
//! #[derive(Object, Default)]
//! struct Quest { stage: u32 }
//!
//! #[derive(Object, Default)]
//! struct Journal { open: Mutex<Vec<Obj<Quest>>> }
//!
//! let mut heap = Heap::new();
//! let journal = heap.create(Journal::default());
//! heap.add_to_root(journal).unwrap();
//! let quest = heap.create(Quest { stage: 1 });
//! heap[journal].open.lock().push(quest); // the guard is dropped at once
//!
//! heap.collect().unwrap();
//! assert_eq!(heap[quest].stage, 1, "kept alive through Journal.open");
//!
//! heap[journal].open.lock().clear();
//! heap.collect().unwrap();
//! assert!(heap.get(quest).is_none(), "no longer referenced");
//! ```
//!
//! A lock *shared* outside the heap is another matter. A handle that code
//! outside the heap moves, while a collection traces, from a container the
//! collector has not reached yet into one it has already traced would be
//! missed, and its object freed while reachable. So an `Arc<T>` (or a
//! `&'static T`) whose `T` holds handles behind a lock or other interior
//! mutability is refused at compile time, with a message that says what to
//! do instead: keep the lock in the object (reached only through the heap,
//! whose barriers see every change), or report shared handles from one
//! [`Referencer`](crate::Referencer) whose report reads them under one lock.
//!
//! ```compile_fail
//! use std::sync::{Arc, Mutex};
//! #[derive(coreobject::Object)]
//! struct Shared { list: Arc<Mutex<Vec<coreobject::AnyObj>>> } // error: see above
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::hash::BuildHasher;
use std::sync::TryLockError;
use std::time::{Duration, Instant};

use crate::handle::{AnyObj, Obj, Weak};

/// What a field holds, as far as the collector is concerned.
///
/// Recorded for every field of every class in [`FieldInfo`](crate::FieldInfo);
/// the derive computes it from each field's type through [`Trace::KIND`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RefKind {
    /// Plain data: no handles inside.
    Plain,
    /// A strong handle ([`Obj`] or [`AnyObj`]): keeps its target alive.
    Strong,
    /// A weak handle ([`Weak`]): does not keep its target alive.
    Weak,
    /// A container (`Vec`, `Option`, map, set, array, `Box`) with handles inside.
    Container,
    /// A nested struct or enum with handles inside.
    Struct,
    /// A field marked `#[object(skip)]`: never traced.
    Skipped,
}

impl RefKind {
    /// The kind of a container whose elements are of kind `inner`.
    ///
    /// ```
    /// use coreobject::RefKind;
    /// assert_eq!(RefKind::container(RefKind::Strong), RefKind::Container);
    /// assert_eq!(RefKind::container(RefKind::Plain), RefKind::Plain);
    /// ```
    pub const fn container(inner: RefKind) -> RefKind {
        match inner {
            RefKind::Plain | RefKind::Skipped => RefKind::Plain,
            _ => RefKind::Container,
        }
    }

    /// The kind of a struct or enum that does (`true`) or does not hold handles.
    ///
    /// ```
    /// use coreobject::RefKind;
    /// assert_eq!(RefKind::nested(true), RefKind::Struct);
    /// ```
    pub const fn nested(needs_trace: bool) -> RefKind {
        if needs_trace {
            RefKind::Struct
        } else {
            RefKind::Plain
        }
    }
}

/// One step of the path from an object to a handle inside it, for reports such
/// as [`Heap::reference_chains`](crate::Heap::reference_chains).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PathSeg {
    /// A named field (`levels`).
    Field(&'static str),
    /// A tuple field or enum variant field by position (`0`).
    Position(usize),
    /// An enum variant (`Some`, `Target`).
    Variant(&'static str),
    /// The n-th element of a sequence or set, in iteration order (`[3]`).
    Index(usize),
    /// The key of the n-th map entry, in iteration order.
    Key(usize),
    /// The value of the n-th map entry, in iteration order.
    Value(usize),
}

/// Receives the handles an object reports while it is traced.
///
/// The collector's marker is one visitor; the reference-chain debugger is
/// another. `enter`/`leave` bracket each step into a field or element so that
/// a visitor can name the path; the marker ignores them, and they compile to
/// nothing there.
///
/// ```
/// use coreobject::{AnyObj, PathSeg, Trace, Visitor};
///
/// struct Count(usize);
/// impl Visitor for Count {
///     fn visit(&mut self, _obj: AnyObj) { self.0 += 1; }
/// }
/// let handles: Vec<Option<AnyObj>> = vec![None, None];
/// let mut c = Count(0);
/// handles.trace(&mut c);
/// assert_eq!(c.0, 0);
/// ```
pub trait Visitor {
    /// Called for every strong handle.
    fn visit(&mut self, obj: AnyObj);
    /// Called before tracing into a field or element.
    #[inline(always)]
    fn enter(&mut self, _seg: PathSeg) {}
    /// Called after tracing out of a field or element.
    #[inline(always)]
    fn leave(&mut self) {}
}

/// A type whose strong handles the collector can find.
///
/// Implemented for handles, plain data (including the integer atomics and
/// `AtomicBool`, but not `AtomicPtr`), the standard containers, `std` and
/// `parking_lot` locks (see the [module docs](self#atomics-and-locks) for the
/// locking rule), and by the derives. Write it by hand for a custom container
/// (this is Unreal's `AddReferencedObjects`): report every strong handle to
/// `v.visit`.
///
/// ```
/// use coreobject::{AnyObj, RefKind, Trace, Visitor};
///
/// /// A ring buffer the derive cannot see into.
/// struct Ring { slots: [Option<AnyObj>; 4], head: usize }
///
/// impl Trace for Ring {
///     const KIND: RefKind = RefKind::Container;
///     fn trace<V: Visitor + ?Sized>(&self, v: &mut V) {
///         for h in self.slots.iter().flatten() {
///             v.visit(*h);
///         }
///     }
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be traced by the garbage collector",
    label = "this field's type does not implement `Trace`",
    note = "derive it with `#[derive(Trace)]`, implement `Trace` by hand (report every handle it holds), or mark the field `#[object(skip)]` if it holds no object handles"
)]
pub trait Trace {
    /// Whether values of this type can hold strong handles at all. The
    /// collector skips tracing objects whose class holds none.
    const NEEDS_TRACE: bool = true;
    /// What a field of this type holds, for class reflection.
    const KIND: RefKind = RefKind::nested(Self::NEEDS_TRACE);
    /// Whether the handles inside can change through a shared reference
    /// (behind a lock or in an atomic). The write barrier of incremental
    /// collection is [`Heap::get_mut`](crate::Heap::get_mut); objects of such
    /// classes can change without it, so while a cycle marks, every `&T`
    /// handed out for one ([`Heap::get`](crate::Heap::get), iteration) puts
    /// it on the same re-scan list: a read barrier, one flag test in `get`,
    /// paid only by these classes. The derives and the container impls
    /// compute it (`#[object(trace_with = f)]` classes are `true` unless they
    /// say `interior_mut = false`); a hand-written `Trace` whose `trace`
    /// reads state behind interior mutability must set it to `true`.
    const INTERIOR_MUT: bool = false;
    /// Report every strong handle in `self` to `v`.
    fn trace<V: Visitor + ?Sized>(&self, v: &mut V);

    /// How many pieces [`trace_range`](Self::trace_range) can split
    /// tracing `self` into: the collector traces an object of more than
    /// 65,536 pieces (a `Vec` of a million handles) 4,096 pieces at a time,
    /// across as many incremental slices as it takes, instead of in one go
    /// (an object of fewer is traced whole, charged a unit of work per 32
    /// pieces).
    ///
    /// The default is one piece (the whole of [`trace`](Self::trace)).
    /// `Vec`, slices, arrays and `VecDeque` count one piece per element
    /// (an element is traced whole); `Option`, `Box`, `Arc` and `&'static`
    /// forward to what they hold; the derives add up their fields' counts
    /// (a flat cursor across the fields, a handle field being one piece).
    /// Maps, sets and locks keep the default. The count is read again
    /// before each piece, so a value that grows or shrinks between two
    /// pieces is traced up to its current length (a change between two
    /// slices goes through [`Heap::get_mut`](crate::Heap::get_mut), whose
    /// write barrier traces the object again).
    ///
    /// ```
    /// use coreobject::{AnyObj, Trace};
    /// let v: Vec<Option<AnyObj>> = vec![None; 5];
    /// assert_eq!(v.trace_units(), 5);
    /// assert_eq!(Some(v).trace_units(), 5);
    /// ```
    #[inline(always)]
    fn trace_units(&self) -> usize {
        1
    }

    /// Report the strong handles of pieces `start..end` (see
    /// [`trace_units`](Self::trace_units)) to `v`. Pieces at or beyond
    /// `trace_units()` report nothing. Ranges that cover `0..trace_units()`
    /// together report exactly what [`trace`](Self::trace) reports: an
    /// override must keep that promise, or the collector may free an
    /// object the value references. The default reports everything for a
    /// range that contains piece 0, nothing otherwise.
    ///
    /// ```
    /// use coreobject::{AnyObj, Trace, Visitor};
    /// # use std::num::NonZeroU32;
    /// struct Count(usize);
    /// impl Visitor for Count {
    ///     fn visit(&mut self, _obj: AnyObj) { self.0 += 1; }
    /// }
    /// # #[derive(coreobject::Object)] struct Rock;
    /// # let heap = coreobject::Heap::new();
    /// let rocks: Vec<AnyObj> = (0..10).map(|_| heap.create(Rock).any()).collect();
    /// let mut c = Count(0);
    /// rocks.trace_range(&mut c, 2, 5);
    /// assert_eq!(c.0, 3);
    /// rocks.trace_range(&mut c, 8, 100); // clamped to the length
    /// assert_eq!(c.0, 5);
    /// ```
    #[inline]
    fn trace_range<V: Visitor + ?Sized>(&self, v: &mut V, start: usize, end: usize) {
        if start == 0 && end > 0 {
            self.trace(v)
        }
    }

    /// Asks the CPU to start loading memory that [`trace`](Self::trace) will
    /// read behind a pointer (a `Vec`'s buffer, a `Box`'s target), so that
    /// the marker overlaps those cache misses with other work. Only a hint:
    /// the default does nothing, and an implementation must have no effect
    /// besides the hint. The derives forward it to every traced field.
    /// The purge calls it too, on objects a few places ahead of the ones it
    /// frees, so that their `Drop` finds the buffers loaded; a panic in it
    /// is caught and resumed when the slice ends (the cycle stays in
    /// flight), as a `Drop`'s is.
    ///
    /// ```
    /// use coreobject::{Obj, Trace};
    /// # #[derive(coreobject::Object)] struct Rock;
    /// let refs: Vec<Obj<Rock>> = Vec::new();
    /// refs.prefetch(); // a hint; nothing observable happens
    /// ```
    #[inline(always)]
    fn prefetch(&self) {}
}

/// Starts loading the cache line at `p`. Never faults, whatever `p` is.
#[inline(always)]
pub(crate) fn prefetch_line<T: ?Sized>(p: *const T) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is only a hint; it never faults, whatever the address.
        #[allow(unused_unsafe)]
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(p as *const u8 as *const i8)
        }
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = p;
}

macro_rules! plain {
    ($($t:ty),* $(,)?) => {$(
        impl Trace for $t {
            const NEEDS_TRACE: bool = false;
            const KIND: RefKind = RefKind::Plain;
            #[inline(always)]
            fn trace<V: Visitor + ?Sized>(&self, _v: &mut V) {}
        }
    )*};
}

plain!(
    (),
    bool,
    char,
    u8,
    u16,
    u32,
    u64,
    u128,
    usize,
    i8,
    i16,
    i32,
    i64,
    i128,
    isize,
    f32,
    f64,
    String,
    str,
    std::time::Duration,
    std::time::Instant,
    std::path::PathBuf,
    std::num::NonZeroU32,
    std::num::NonZeroU64,
    std::num::NonZeroUsize,
);

#[cfg(target_has_atomic = "8")]
plain!(
    std::sync::atomic::AtomicBool,
    std::sync::atomic::AtomicI8,
    std::sync::atomic::AtomicU8,
);
#[cfg(target_has_atomic = "16")]
plain!(std::sync::atomic::AtomicI16, std::sync::atomic::AtomicU16);
#[cfg(target_has_atomic = "32")]
plain!(std::sync::atomic::AtomicI32, std::sync::atomic::AtomicU32);
#[cfg(target_has_atomic = "64")]
plain!(std::sync::atomic::AtomicI64, std::sync::atomic::AtomicU64);
#[cfg(target_has_atomic = "ptr")]
plain!(
    std::sync::atomic::AtomicIsize,
    std::sync::atomic::AtomicUsize,
);
// No `AtomicPtr`: see the module docs.

impl<T: ?Sized> Trace for std::marker::PhantomData<T> {
    const NEEDS_TRACE: bool = false;
    const KIND: RefKind = RefKind::Plain;
    #[inline(always)]
    fn trace<V: Visitor + ?Sized>(&self, _v: &mut V) {}
}

impl<T: Trace + ?Sized> Trace for &'static T {
    const NEEDS_TRACE: bool = T::NEEDS_TRACE;
    const INTERIOR_MUT: bool = shared_is_frozen::<T>();
    const KIND: RefKind = T::KIND;
    #[inline]
    fn trace<V: Visitor + ?Sized>(&self, v: &mut V) {
        (**self).trace(v)
    }
    #[inline]
    fn trace_units(&self) -> usize {
        (**self).trace_units()
    }
    #[inline]
    fn trace_range<V: Visitor + ?Sized>(&self, v: &mut V, start: usize, end: usize) {
        (**self).trace_range(v, start, end)
    }
}

impl<T: Trace + ?Sized> Trace for Box<T> {
    const NEEDS_TRACE: bool = T::NEEDS_TRACE;
    const INTERIOR_MUT: bool = T::INTERIOR_MUT;
    const KIND: RefKind = T::KIND;
    #[inline]
    fn trace<V: Visitor + ?Sized>(&self, v: &mut V) {
        (**self).trace(v)
    }
    #[inline]
    fn trace_units(&self) -> usize {
        (**self).trace_units()
    }
    #[inline]
    fn trace_range<V: Visitor + ?Sized>(&self, v: &mut V, start: usize, end: usize) {
        (**self).trace_range(v, start, end)
    }
    #[inline(always)]
    fn prefetch(&self) {
        if T::NEEDS_TRACE {
            prefetch_line(&**self as *const T)
        }
    }
}

impl<T: Trace> Trace for Option<T> {
    const NEEDS_TRACE: bool = T::NEEDS_TRACE;
    const INTERIOR_MUT: bool = T::INTERIOR_MUT;
    const KIND: RefKind = match T::KIND {
        // An optional handle is still a handle field.
        RefKind::Strong => RefKind::Strong,
        RefKind::Weak => RefKind::Weak,
        k => RefKind::container(k),
    };
    #[inline]
    fn trace<V: Visitor + ?Sized>(&self, v: &mut V) {
        if let Some(x) = self {
            x.trace(v)
        }
    }
    #[inline]
    fn trace_units(&self) -> usize {
        self.as_ref().map_or(0, T::trace_units)
    }
    #[inline]
    fn trace_range<V: Visitor + ?Sized>(&self, v: &mut V, start: usize, end: usize) {
        if let Some(x) = self {
            x.trace_range(v, start, end)
        }
    }
    #[inline(always)]
    fn prefetch(&self) {
        if let Some(x) = self {
            x.prefetch()
        }
    }
}

fn trace_seq<'a, T: Trace + 'a, V: Visitor + ?Sized>(
    items: impl Iterator<Item = &'a T>,
    v: &mut V,
) {
    if !T::NEEDS_TRACE {
        return;
    }
    for (i, x) in items.enumerate() {
        v.enter(PathSeg::Index(i));
        x.trace(v);
        v.leave();
    }
}

/// Traces elements `start..end` of a slice (clamped to its length), each
/// element whole, named `base + i`: the pieces of `Vec`, slices, arrays.
#[inline]
fn trace_slice_range<T: Trace, V: Visitor + ?Sized>(
    items: &[T],
    v: &mut V,
    start: usize,
    end: usize,
    base: usize,
) {
    if !T::NEEDS_TRACE {
        return;
    }
    let end = end.min(items.len());
    if start >= end {
        return;
    }
    for (k, x) in items[start..end].iter().enumerate() {
        v.enter(PathSeg::Index(base + start + k));
        x.trace(v);
        v.leave();
    }
}

/// One piece per element when elements can hold handles, else none.
#[inline(always)]
fn seq_units<T: Trace>(len: usize) -> usize {
    if T::NEEDS_TRACE {
        len
    } else {
        0
    }
}

macro_rules! seq {
    ($($name:ident<$t:ident $(, $s:ident)?>),* $(,)?) => {$(
        impl<$t: Trace $(, $s)?> Trace for $name<$t $(, $s)?> {
            const NEEDS_TRACE: bool = $t::NEEDS_TRACE;
            const INTERIOR_MUT: bool = $t::INTERIOR_MUT;
            const KIND: RefKind = RefKind::container($t::KIND);
            #[inline]
            fn trace<V: Visitor + ?Sized>(&self, v: &mut V) {
                trace_seq(self.iter(), v)
            }
        }
    )*};
}

seq!(BTreeSet<T>, HashSet<T, S>);

impl<T: Trace> Trace for VecDeque<T> {
    const NEEDS_TRACE: bool = T::NEEDS_TRACE;
    const INTERIOR_MUT: bool = T::INTERIOR_MUT;
    const KIND: RefKind = RefKind::container(T::KIND);
    #[inline]
    fn trace<V: Visitor + ?Sized>(&self, v: &mut V) {
        trace_seq(self.iter(), v)
    }
    #[inline]
    fn trace_units(&self) -> usize {
        seq_units::<T>(self.len())
    }
    fn trace_range<V: Visitor + ?Sized>(&self, v: &mut V, start: usize, end: usize) {
        // The second slice's positions continue the first's.
        let (a, b) = self.as_slices();
        trace_slice_range(a, v, start, end, 0);
        let (s, e) = (start.saturating_sub(a.len()), end.saturating_sub(a.len()));
        trace_slice_range(b, v, s, e, a.len());
    }
}

impl<T: Trace> Trace for Vec<T> {
    const NEEDS_TRACE: bool = T::NEEDS_TRACE;
    const INTERIOR_MUT: bool = T::INTERIOR_MUT;
    const KIND: RefKind = RefKind::container(T::KIND);
    #[inline]
    fn trace<V: Visitor + ?Sized>(&self, v: &mut V) {
        trace_seq(self.iter(), v)
    }
    #[inline]
    fn trace_units(&self) -> usize {
        seq_units::<T>(self.len())
    }
    #[inline]
    fn trace_range<V: Visitor + ?Sized>(&self, v: &mut V, start: usize, end: usize) {
        trace_slice_range(self, v, start, end, 0)
    }
    #[inline(always)]
    fn prefetch(&self) {
        if T::NEEDS_TRACE {
            prefetch_line(self.as_ptr())
        }
    }
}

impl<T: Trace> Trace for [T] {
    const NEEDS_TRACE: bool = T::NEEDS_TRACE;
    const INTERIOR_MUT: bool = T::INTERIOR_MUT;
    const KIND: RefKind = RefKind::container(T::KIND);
    #[inline]
    fn trace<V: Visitor + ?Sized>(&self, v: &mut V) {
        trace_seq(self.iter(), v)
    }
    #[inline]
    fn trace_units(&self) -> usize {
        seq_units::<T>(self.len())
    }
    #[inline]
    fn trace_range<V: Visitor + ?Sized>(&self, v: &mut V, start: usize, end: usize) {
        trace_slice_range(self, v, start, end, 0)
    }
}

impl<T: Trace, const N: usize> Trace for [T; N] {
    const NEEDS_TRACE: bool = T::NEEDS_TRACE;
    const INTERIOR_MUT: bool = T::INTERIOR_MUT;
    const KIND: RefKind = RefKind::container(T::KIND);
    #[inline]
    fn trace<V: Visitor + ?Sized>(&self, v: &mut V) {
        trace_seq(self.iter(), v)
    }
    #[inline]
    fn trace_units(&self) -> usize {
        seq_units::<T>(self.len())
    }
    #[inline]
    fn trace_range<V: Visitor + ?Sized>(&self, v: &mut V, start: usize, end: usize) {
        trace_slice_range(self, v, start, end, 0)
    }
}

fn trace_map<'a, K: Trace + 'a, T: Trace + 'a, V: Visitor + ?Sized>(
    entries: impl Iterator<Item = (&'a K, &'a T)>,
    v: &mut V,
) {
    if !K::NEEDS_TRACE && !T::NEEDS_TRACE {
        return;
    }
    for (i, (k, x)) in entries.enumerate() {
        if K::NEEDS_TRACE {
            v.enter(PathSeg::Key(i));
            k.trace(v);
            v.leave();
        }
        if T::NEEDS_TRACE {
            v.enter(PathSeg::Value(i));
            x.trace(v);
            v.leave();
        }
    }
}

impl<K: Trace, T: Trace, S: BuildHasher> Trace for HashMap<K, T, S> {
    const NEEDS_TRACE: bool = K::NEEDS_TRACE || T::NEEDS_TRACE;
    const INTERIOR_MUT: bool = K::INTERIOR_MUT | T::INTERIOR_MUT;
    const KIND: RefKind = RefKind::container(if K::NEEDS_TRACE { K::KIND } else { T::KIND });
    #[inline]
    fn trace<V: Visitor + ?Sized>(&self, v: &mut V) {
        trace_map(self.iter(), v)
    }
}

impl<K: Trace, T: Trace> Trace for BTreeMap<K, T> {
    const NEEDS_TRACE: bool = K::NEEDS_TRACE || T::NEEDS_TRACE;
    const INTERIOR_MUT: bool = K::INTERIOR_MUT | T::INTERIOR_MUT;
    const KIND: RefKind = RefKind::container(if K::NEEDS_TRACE { K::KIND } else { T::KIND });
    #[inline]
    fn trace<V: Visitor + ?Sized>(&self, v: &mut V) {
        trace_map(self.iter(), v)
    }
}

macro_rules! tuple {
    ($(($($n:tt $t:ident),+)),* $(,)?) => {$(
        impl<$($t: Trace),+> Trace for ($($t,)+) {
            const NEEDS_TRACE: bool = false $(|| $t::NEEDS_TRACE)+;
            const INTERIOR_MUT: bool = false $(| $t::INTERIOR_MUT)+;
            const KIND: RefKind = RefKind::nested(Self::NEEDS_TRACE);
            #[inline]
            fn trace<V: Visitor + ?Sized>(&self, v: &mut V) {
                $(
                    if $t::NEEDS_TRACE {
                        v.enter(PathSeg::Position($n));
                        self.$n.trace(v);
                        v.leave();
                    }
                )+
            }
        }
    )*};
}

tuple!(
    (0 A),
    (0 A, 1 B),
    (0 A, 1 B, 2 C),
    (0 A, 1 B, 2 C, 3 D),
    (0 A, 1 B, 2 C, 3 D, 4 E),
);

/// `false`, or a compile error when `T` holds handles behind interior
/// mutability: the contents of an `Arc<T>` or a `&'static T` are shared
/// with code outside the heap, which can move a handle from a container
/// the collector has not traced yet into one it has, while it traces. No
/// barrier sees that, so such a field could lose a reachable object.
const fn shared_is_frozen<T: Trace + ?Sized>() -> bool {
    if T::INTERIOR_MUT {
        panic!(concat!(
            "coreobject: a traced `Arc<T>` or `&'static T` must not hold object handles ",
            "behind a lock or other interior mutability: code outside the heap could move a ",
            "handle while the collector traces, and a reachable object could be freed. Keep the ",
            "lock in the object itself (a `Mutex<Vec<AnyObj>>` field, reached only through the ",
            "heap), report the shared handles from one `Referencer` whose report takes the lock ",
            "once, or mark the field `#[object(skip)]`."
        ))
    }
    false
}

impl<T: Trace + ?Sized> Trace for std::sync::Arc<T> {
    const NEEDS_TRACE: bool = T::NEEDS_TRACE;
    /// Never: an `Arc` whose contents hold handles behind a lock does not
    /// compile as a traced field (see [`Trace::INTERIOR_MUT`]).
    const INTERIOR_MUT: bool = shared_is_frozen::<T>();
    const KIND: RefKind = T::KIND;
    /// Traces through the `Arc`: every object that holds a clone reports the
    /// handles inside, which is what keeps them alive.
    #[inline]
    fn trace<V: Visitor + ?Sized>(&self, v: &mut V) {
        (**self).trace(v)
    }
    #[inline]
    fn trace_units(&self) -> usize {
        (**self).trace_units()
    }
    #[inline]
    fn trace_range<V: Visitor + ?Sized>(&self, v: &mut V, start: usize, end: usize) {
        (**self).trace_range(v, start, end)
    }
    #[inline(always)]
    fn prefetch(&self) {
        if T::NEEDS_TRACE {
            prefetch_line(&**self as *const T)
        }
    }
}

/// How long tracing waits, in total, for a lock inside a heap object that
/// someone else holds, before it panics. See the
/// [module docs](self#atomics-and-locks) for the locking rule.
pub const LOCK_WAIT: Duration = Duration::from_secs(1);

/// The longest single sleep between two attempts at a held lock.
const LOCK_NAP_MAX: Duration = Duration::from_millis(10);

/// Takes a lock for tracing: `attempt` is one `try_lock` (or `try_read`) that
/// yields the guard, or `None` while someone else holds the lock. `L` is the
/// lock's type, for the panic message.
///
/// # Panics
/// If the lock is still held after [`LOCK_WAIT`].
#[inline]
fn lock_for_trace<L: ?Sized, G>(mut attempt: impl FnMut() -> Option<G>) -> G {
    match attempt() {
        Some(guard) => guard,
        None => wait_for_lock::<L, G>(&mut attempt),
    }
}

/// The slow path of [`lock_for_trace`]: spins, then yields, then sleeps in
/// growing steps, retrying after each, for [`LOCK_WAIT`] in total.
#[cold]
#[inline(never)]
fn wait_for_lock<L: ?Sized, G>(attempt: &mut dyn FnMut() -> Option<G>) -> G {
    let start = Instant::now();
    for round in 0..6 {
        for _ in 0..1 << round {
            std::hint::spin_loop();
        }
        if let Some(guard) = attempt() {
            return guard;
        }
    }
    for _ in 0..8 {
        std::thread::yield_now();
        if let Some(guard) = attempt() {
            return guard;
        }
    }
    let mut nap = Duration::from_micros(50);
    loop {
        let waited = start.elapsed();
        if waited >= LOCK_WAIT {
            break;
        }
        std::thread::sleep(nap.min(LOCK_WAIT - waited));
        if let Some(guard) = attempt() {
            return guard;
        }
        nap = (nap * 2).min(LOCK_NAP_MAX);
    }
    panic!(
        "coreobject: cannot trace a `{}`: the lock stayed held for {:?} while the heap \
         traced the object that contains it. A lock inside a heap object must not be \
         held across a garbage collection (or a `&Heap` walk such as \
         `reference_chains`): tracing neither blocks on it nor skips its contents. \
         The collection was abandoned with nothing freed; release the lock and collect again.",
        std::any::type_name::<L>(),
        LOCK_WAIT,
    )
}

impl<T: Trace + ?Sized> Trace for std::sync::Mutex<T> {
    const NEEDS_TRACE: bool = T::NEEDS_TRACE;
    const KIND: RefKind = T::KIND;
    const INTERIOR_MUT: bool = T::NEEDS_TRACE;
    /// Traces the contents under `try_lock`, poisoned or not; see the
    /// [locking rule](self#atomics-and-locks).
    fn trace<V: Visitor + ?Sized>(&self, v: &mut V) {
        if !T::NEEDS_TRACE {
            return;
        }
        let guard = lock_for_trace::<Self, _>(|| match self.try_lock() {
            Ok(g) => Some(g),
            Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        });
        (*guard).trace(v)
    }
}

impl<T: Trace + ?Sized> Trace for std::sync::RwLock<T> {
    const NEEDS_TRACE: bool = T::NEEDS_TRACE;
    const KIND: RefKind = T::KIND;
    const INTERIOR_MUT: bool = T::NEEDS_TRACE;
    /// Traces the contents under `try_read`, poisoned or not; see the
    /// [locking rule](self#atomics-and-locks).
    fn trace<V: Visitor + ?Sized>(&self, v: &mut V) {
        if !T::NEEDS_TRACE {
            return;
        }
        let guard = lock_for_trace::<Self, _>(|| match self.try_read() {
            Ok(g) => Some(g),
            Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        });
        (*guard).trace(v)
    }
}

impl<T: Trace + ?Sized> Trace for parking_lot::Mutex<T> {
    const NEEDS_TRACE: bool = T::NEEDS_TRACE;
    const KIND: RefKind = T::KIND;
    const INTERIOR_MUT: bool = T::NEEDS_TRACE;
    /// Traces the contents under `try_lock`; see the
    /// [locking rule](self#atomics-and-locks).
    fn trace<V: Visitor + ?Sized>(&self, v: &mut V) {
        if !T::NEEDS_TRACE {
            return;
        }
        let guard = lock_for_trace::<Self, _>(|| self.try_lock());
        (*guard).trace(v)
    }
}

impl<T: Trace + ?Sized> Trace for parking_lot::RwLock<T> {
    const NEEDS_TRACE: bool = T::NEEDS_TRACE;
    const KIND: RefKind = T::KIND;
    const INTERIOR_MUT: bool = T::NEEDS_TRACE;
    /// Traces the contents under `try_read`; see the
    /// [locking rule](self#atomics-and-locks).
    fn trace<V: Visitor + ?Sized>(&self, v: &mut V) {
        if !T::NEEDS_TRACE {
            return;
        }
        let guard = lock_for_trace::<Self, _>(|| self.try_read());
        (*guard).trace(v)
    }
}

impl<T> Trace for Obj<T> {
    const NEEDS_TRACE: bool = true;
    const KIND: RefKind = RefKind::Strong;
    #[inline(always)]
    fn trace<V: Visitor + ?Sized>(&self, v: &mut V) {
        v.visit(self.any())
    }
}

impl<T> Trace for Weak<T> {
    const NEEDS_TRACE: bool = false;
    const KIND: RefKind = RefKind::Weak;
    #[inline(always)]
    fn trace<V: Visitor + ?Sized>(&self, _v: &mut V) {}
}

impl Trace for AnyObj {
    const NEEDS_TRACE: bool = true;
    const KIND: RefKind = RefKind::Strong;
    #[inline(always)]
    fn trace<V: Visitor + ?Sized>(&self, v: &mut V) {
        v.visit(*self)
    }
}

/// The data door of a class: a view of the fields that cannot hold strong
/// handles, writable without the collector's write barrier.
///
/// [`Heap::get_mut`](crate::Heap::get_mut) is the general door for
/// mutation, and while a cycle marks (or, with generational collection,
/// between cycles for old objects) it tells the collector that the object
/// changed, so that its references are looked at again. A write that cannot
/// store a handle (a position, a health count) does not need that:
/// [`Heap::data_mut`](crate::Heap::data_mut) hands out this view instead,
/// and costs the collector nothing.
///
/// Implement it with `#[derive(Data)]` next to `#[derive(Object)]`. The
/// view is a struct named after the class with `Data` appended
/// (`Actor` → `ActorData`), with one public field per field of the class:
/// a field whose type can hold strong handles
/// ([`Trace::NEEDS_TRACE`]) is a [`Sealed`] placeholder, every other field
/// is a `&mut` to it. Which is which is decided by the compiler from the
/// field's type, so a handle-holding field can never be reached through
/// the door. Fields marked `#[object(skip)]` are never traced, so they are
/// writable too; a class with `#[object(trace_with = …)]` (which may read
/// any field) cannot derive `Data`, nor should a class whose `Trace` is
/// written by hand and reads handles from a field whose type says it holds
/// none (packed handle bits in a `u64`, say). Named-field structs only.
///
/// A hand-written implementation must keep the same promise: the view must
/// not give a way to change any handle the class's [`Trace`] reports, or
/// incremental and minor cycles may free objects it references.
///
/// ```
/// use coreobject::{Data, Heap, Obj, Object};
/// #[derive(Object, Data, Default)]
/// struct Actor {
///     pos: [f32; 2],
///     health: u32,
///     target: Option<Obj<Actor>>,
/// }
/// let mut heap = Heap::new();
/// let a = heap.create(Actor::default());
/// let view = heap.data_mut(a).unwrap();
/// view.pos[0] += 1.5;
/// *view.health = 100;
/// // `view.target` is sealed: storing a handle goes through `get_mut`.
/// assert_eq!((heap[a].pos, heap[a].health), ([1.5, 0.0], 100));
/// ```
///
/// A handle-holding field is not writable through the view:
///
/// ```compile_fail
/// use coreobject::{Data, Heap, Obj, Object};
/// #[derive(Object, Data, Default)]
/// struct Actor { target: Option<Obj<Actor>> }
/// let mut heap = Heap::new();
/// let a = heap.create(Actor::default());
/// *heap.data_mut(a).unwrap().target = Some(a);
/// ```
pub trait Data {
    /// The view: `&mut` to every field that cannot hold handles.
    type View<'a>
    where
        Self: 'a;
    /// The view of `self`'s handle-free fields.
    fn data_view(&mut self) -> Self::View<'_>;
}

/// A field of a [`Data`] view that can hold strong handles: it gives no
/// access (read it through [`Heap::get`](crate::Heap::get), change it
/// through [`Heap::get_mut`](crate::Heap::get_mut)).
pub struct Sealed<'a, T: ?Sized>(std::marker::PhantomData<&'a mut T>);

impl<T: ?Sized> std::fmt::Debug for Sealed<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealed")
    }
}

/// What `#[derive(Data)]` uses to pick a view field's type from
/// [`Trace::NEEDS_TRACE`]; not for direct use.
#[doc(hidden)]
pub mod data_door {
    use super::Sealed;

    /// `HOLDS`: whether the field's type can hold strong handles.
    #[derive(Debug)]
    pub struct Pick<const HOLDS: bool>;

    /// The view field for a `T` field.
    pub trait DataField<'a, T: ?Sized + 'a> {
        /// `&mut T`, or [`Sealed`] for a type that can hold handles.
        type Out;
        /// The view field of `f`.
        fn door(f: &'a mut T) -> Self::Out;
    }

    impl<'a, T: ?Sized + 'a> DataField<'a, T> for Pick<false> {
        type Out = &'a mut T;
        #[inline(always)]
        fn door(f: &'a mut T) -> &'a mut T {
            f
        }
    }

    impl<'a, T: ?Sized + 'a> DataField<'a, T> for Pick<true> {
        type Out = Sealed<'a, T>;
        #[inline(always)]
        fn door(_: &'a mut T) -> Sealed<'a, T> {
            Sealed(std::marker::PhantomData)
        }
    }
}

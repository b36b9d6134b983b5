//! Reference tracing: how the collector finds the handles inside an object.
//!
//! Every field of a class must say what it holds. [`Trace`] is that statement: a
//! type implements it by reporting each strong handle it contains to a
//! [`Visitor`]. `#[derive(Object)]` and `#[derive(Trace)]` write the
//! implementation for you, field by field, so a handle field you forgot to
//! annotate is still traced: the only ways *not* to trace a field are an
//! explicit `#[object(skip)]` or a [`Weak`](crate::Weak) handle.
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

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::hash::BuildHasher;

use crate::handle::AnyObj;

/// What a field holds, as far as the collector is concerned.
///
/// Recorded for every field of every class in [`FieldInfo`](crate::FieldInfo);
/// the derive computes it from each field's type through [`Trace::KIND`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RefKind {
    /// Plain data: no handles inside.
    Plain,
    /// A strong handle ([`Obj`](crate::Obj) or [`AnyObj`]): keeps its target alive.
    Strong,
    /// A weak handle ([`Weak`](crate::Weak)): does not keep its target alive.
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
/// Implemented for handles, plain data, the standard containers, and by the
/// derives. Write it by hand for a custom container (this is Unreal's
/// `AddReferencedObjects`): report every strong handle to `v.visit`.
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
    /// Report every strong handle in `self` to `v`.
    fn trace<V: Visitor + ?Sized>(&self, v: &mut V);

    /// Asks the CPU to start loading memory that [`trace`](Self::trace) will
    /// read behind a pointer (a `Vec`'s buffer, a `Box`'s target), so that
    /// the marker overlaps those cache misses with other work. Only a hint:
    /// the default does nothing, and an implementation must have no effect
    /// besides the hint. The derives forward it to every traced field.
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

impl<T: ?Sized> Trace for std::marker::PhantomData<T> {
    const NEEDS_TRACE: bool = false;
    const KIND: RefKind = RefKind::Plain;
    #[inline(always)]
    fn trace<V: Visitor + ?Sized>(&self, _v: &mut V) {}
}

impl<T: Trace + ?Sized> Trace for &'static T {
    const NEEDS_TRACE: bool = T::NEEDS_TRACE;
    const KIND: RefKind = T::KIND;
    #[inline]
    fn trace<V: Visitor + ?Sized>(&self, v: &mut V) {
        (**self).trace(v)
    }
}

impl<T: Trace + ?Sized> Trace for Box<T> {
    const NEEDS_TRACE: bool = T::NEEDS_TRACE;
    const KIND: RefKind = T::KIND;
    #[inline]
    fn trace<V: Visitor + ?Sized>(&self, v: &mut V) {
        (**self).trace(v)
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

macro_rules! seq {
    ($($name:ident<$t:ident $(, $s:ident)?>),* $(,)?) => {$(
        impl<$t: Trace $(, $s)?> Trace for $name<$t $(, $s)?> {
            const NEEDS_TRACE: bool = $t::NEEDS_TRACE;
            const KIND: RefKind = RefKind::container($t::KIND);
            #[inline]
            fn trace<V: Visitor + ?Sized>(&self, v: &mut V) {
                trace_seq(self.iter(), v)
            }
        }
    )*};
}

seq!(VecDeque<T>, BTreeSet<T>, HashSet<T, S>);

impl<T: Trace> Trace for Vec<T> {
    const NEEDS_TRACE: bool = T::NEEDS_TRACE;
    const KIND: RefKind = RefKind::container(T::KIND);
    #[inline]
    fn trace<V: Visitor + ?Sized>(&self, v: &mut V) {
        trace_seq(self.iter(), v)
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
    const KIND: RefKind = RefKind::container(T::KIND);
    #[inline]
    fn trace<V: Visitor + ?Sized>(&self, v: &mut V) {
        trace_seq(self.iter(), v)
    }
}

impl<T: Trace, const N: usize> Trace for [T; N] {
    const NEEDS_TRACE: bool = T::NEEDS_TRACE;
    const KIND: RefKind = RefKind::container(T::KIND);
    #[inline]
    fn trace<V: Visitor + ?Sized>(&self, v: &mut V) {
        trace_seq(self.iter(), v)
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
    const KIND: RefKind = RefKind::container(if K::NEEDS_TRACE { K::KIND } else { T::KIND });
    #[inline]
    fn trace<V: Visitor + ?Sized>(&self, v: &mut V) {
        trace_map(self.iter(), v)
    }
}

impl<K: Trace, T: Trace> Trace for BTreeMap<K, T> {
    const NEEDS_TRACE: bool = K::NEEDS_TRACE || T::NEEDS_TRACE;
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

impl<T: Trace + ?Sized> Trace for std::sync::Arc<T> {
    const NEEDS_TRACE: bool = T::NEEDS_TRACE;
    const KIND: RefKind = T::KIND;
    /// Traces through the `Arc`: every object that holds a clone reports the
    /// handles inside, which is what keeps them alive.
    #[inline]
    fn trace<V: Visitor + ?Sized>(&self, v: &mut V) {
        (**self).trace(v)
    }
    #[inline(always)]
    fn prefetch(&self) {
        if T::NEEDS_TRACE {
            prefetch_line(&**self as *const T)
        }
    }
}

impl Trace for AnyObj {
    const NEEDS_TRACE: bool = true;
    const KIND: RefKind = RefKind::Strong;
    #[inline(always)]
    fn trace<V: Visitor + ?Sized>(&self, v: &mut V) {
        v.visit(*self)
    }
}

//! Classes: what `#[derive(Object)]` registers about a type (Unreal's `UClass`).
//!
//! A [`Class`] is a `static` the derive writes for each object type: its name,
//! its full path, its reflected fields, and the type-erased functions the heap
//! calls to trace, destroy and drop objects of that type. Classes are compared
//! by address, never by name: two types may share a name.
//!
//! ```
//! use coreobject::{Heap, Obj, Object, RefKind, Weak};
//!
//! #[derive(Object, Default)]
//! struct Turret { target: Option<Weak<Turret>>, owner: Option<Obj<Turret>>, ammo: u32 }
//!
//! let class = Turret::class();
//! assert_eq!(class.name(), "Turret");
//! assert!(class.path().ends_with("::Turret"));
//! let kinds: Vec<_> = class.fields().iter().map(|f| (f.name, f.kind)).collect();
//! assert_eq!(kinds, [("target", RefKind::Weak), ("owner", RefKind::Strong), ("ammo", RefKind::Plain)]);
//! ```

use std::alloc::Layout;
use std::any::TypeId;
use std::cell::RefCell;
use std::fmt;
use std::ptr::NonNull;

use self::__private::MakeDefault;
use crate::gc::{Marker, ParMarker};
use crate::lifecycle::{DestroyCx, Lifecycle};
use crate::object::{Header, ObjBox};
use crate::trace::{RefKind, Trace, Visitor};

/// An object type: a `'static`, `Send + Sync` value with a [`Class`].
///
/// Implement it with `#[derive(Object)]`. The derive also implements
/// [`Trace`] (every field, unless `#[object(skip)]`) and, unless the type asks
/// for `#[object(lifecycle)]`, an empty [`Lifecycle`].
///
/// ```
/// use coreobject::{Object, Obj};
/// #[derive(Object)]
/// #[object(name = "Weapon")]
/// struct Gun { owner: Option<Obj<Gun>> }
/// assert_eq!(Gun::class().name(), "Weapon");
/// ```
///
/// # Safety
///
/// The heap takes an object's type from its class: it traces, destroys and
/// drops each object through the functions its class was built with, and
/// resolves a handle as a `T` exactly when the object's class is (by address)
/// `T::class()`. Unchecked, a `class()` that answered another type's class
/// would make the heap read, trace and drop one type as another. So an
/// implementation must:
///
/// * return the class built by `Class::new::<Self>` (for `Self`, not for
///   another type), and
/// * return the same `&'static Class`, one `static`, on every call.
///
/// That is why the trait is `unsafe`. **Implement it with the derive**:
/// `#[derive(Object)]` writes an `unsafe impl` that keeps both rules, and is
/// itself safe to use (the promise is the derive's, not yours), so a crate
/// with `#![forbid(unsafe_code)]` can still derive objects. A hand-written
/// `impl Object for T` without `unsafe` does not compile (E0200), so safe
/// code cannot forge a class.
///
/// As a second line of defence, the heap checks, in every build, that
/// `T::class()` was built for `T` whenever it creates a `T` or matches an
/// object's class against `T` (resolving, downcasting, iterating), and panics
/// if it was not. For a derived class the check compares two constants, and
/// an optimized build folds it away.
pub unsafe trait Object: Trace + Lifecycle + Send + Sync + 'static {
    /// Whether objects of this class may join a GC cluster (Unreal's
    /// `CanBeInCluster`); `#[object(cluster = false)]` says no.
    const CAN_BE_IN_CLUSTER: bool = true;
    /// The class of this type: the one `static` built by
    /// `Class::new::<Self>` (see the trait's safety section).
    fn class() -> &'static Class;
}

/// One reflected field of a class (Unreal's `FProperty`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldInfo {
    /// Field name (or position, for tuple structs).
    pub name: &'static str,
    /// The field's type, as written in the source.
    pub type_name: &'static str,
    /// What the field holds.
    pub kind: RefKind,
}

/// What the derive passes to [`Class::new`].
#[doc(hidden)]
#[derive(Debug)]
pub struct ClassDesc {
    pub name: &'static str,
    /// `module_path!()::Type`, unique per type but for types local to
    /// functions.
    pub path: &'static str,
    pub fields: &'static [FieldInfo],
    /// The type's `Default`, type-erased, if it has one.
    pub make_default: fn() -> Option<MakeDefault>,
    /// How to save and load its objects (`#[object(save)]`).
    pub save: Option<&'static crate::save::SaveVtable>,
}

/// The type-erased operations on one class. Each takes a pointer to the
/// object's [`Header`] and casts it back to `ObjBox<T>` for the `T` the
/// function was instantiated with.
pub(crate) struct Vtable {
    /// `trace` with the collector's visitor; an object of many pieces
    /// (see [`Trace::trace_units`](crate::Trace::trace_units)) is traced
    /// in its first [`PIECES`](crate::gc::mark::PIECES) (when it has more
    /// than [`SPLIT_ABOVE`](crate::gc::mark::SPLIT_ABOVE)) and left to the
    /// marker to continue (the `u64`: the object's handle bits).
    pub(crate) trace_mark: unsafe fn(NonNull<Header>, &mut Marker<'_>, u64),
    /// Traces pieces `start..end` with the collector's visitor; returns the
    /// object's count of pieces now.
    pub(crate) trace_range_mark: unsafe fn(NonNull<Header>, &mut Marker<'_>, usize, usize) -> usize,
    /// `trace` with a parallel marking worker's visitor.
    pub(crate) trace_par: unsafe fn(NonNull<Header>, &mut ParMarker<'_>),
    pub(crate) prefetch: unsafe fn(NonNull<Header>),
    pub(crate) trace_dyn: unsafe fn(NonNull<Header>, &mut dyn Visitor),
    pub(crate) begin_destroy: unsafe fn(NonNull<Header>, &DestroyCx<'_>),
    pub(crate) is_ready: unsafe fn(NonNull<Header>) -> bool,
    pub(crate) finish_destroy: unsafe fn(NonNull<Header>, &DestroyCx<'_>),
    /// Drops the value in place (the slot's memory is released by the array).
    pub(crate) drop: unsafe fn(NonNull<Header>),
    pub(crate) type_id: fn() -> TypeId,
    pub(crate) make_default: fn() -> Option<MakeDefault>,
}

/// A registered object type (Unreal's `UClass`).
///
/// ```
/// use coreobject::{Heap, Object};
/// #[derive(Object, Default)]
/// struct Crate { planks: u8 }
/// let heap = Heap::new();
/// let c = heap.create(Crate { planks: 4 });
/// assert!(std::ptr::eq(heap.class_of(c).unwrap(), Crate::class()));
/// assert!(Crate::class().has_default());
/// ```
pub struct Class {
    name: &'static str,
    path: &'static str,
    fields: &'static [FieldInfo],
    size: usize,
    layout: Layout,
    needs_trace: bool,
    interior_mut: bool,
    has_hooks: bool,
    /// Whether dropping a value of this class runs any code
    /// (`std::mem::needs_drop`): the purge skips the drop call otherwise.
    needs_drop: bool,
    can_be_in_cluster: bool,
    save: Option<&'static crate::save::SaveVtable>,
    pub(crate) vt: Vtable,
}

// SAFETY: the functions in `Vtable` are only called with a header of an object
// of class `T`; that invariant is upheld by the heap, which stores the class
// pointer in the header when the object is created.
unsafe fn trace_mark<T: Object>(p: NonNull<Header>, m: &mut Marker<'_>, bits: u64) {
    // SAFETY: `p` heads a live `ObjBox<T>` (the vtable's contract).
    let v = unsafe { ObjBox::<T>::value(p) };
    // A constant for classes of fixed size: the test folds away for them.
    let n = v.trace_units();
    if n > crate::gc::mark::SPLIT_ABOVE && m.splits() {
        v.trace_range(m, 0, crate::gc::mark::PIECES);
        m.defer(bits, crate::gc::mark::PIECES);
    } else {
        v.trace(m);
        m.traced_whole(n);
    }
}
unsafe fn trace_range_mark<T: Object>(
    p: NonNull<Header>,
    m: &mut Marker<'_>,
    start: usize,
    end: usize,
) -> usize {
    // SAFETY: `p` heads a live `ObjBox<T>` (the vtable's contract).
    let v = unsafe { ObjBox::<T>::value(p) };
    let n = v.trace_units();
    let end = end.min(n);
    if start < end {
        v.trace_range(m, start, end);
    }
    n
}
unsafe fn trace_par<T: Object>(p: NonNull<Header>, m: &mut ParMarker<'_>) {
    // SAFETY: `p` heads a live `ObjBox<T>` (the vtable's contract); `T: Sync`,
    // so tracing it from a marking worker is a shared read.
    unsafe { ObjBox::<T>::value(p).trace(m) }
}
unsafe fn prefetch<T: Object>(p: NonNull<Header>) {
    // SAFETY: `p` heads a live `ObjBox<T>` (the vtable's contract).
    unsafe { ObjBox::<T>::value(p).prefetch() }
}
unsafe fn trace_dyn<T: Object>(p: NonNull<Header>, v: &mut dyn Visitor) {
    // SAFETY: `p` heads a live `ObjBox<T>` (the vtable's contract).
    unsafe { ObjBox::<T>::value(p).trace(v) }
}
unsafe fn begin_destroy<T: Object>(p: NonNull<Header>, cx: &DestroyCx<'_>) {
    // SAFETY: `p` heads a live `ObjBox<T>` that the sweep owns exclusively.
    unsafe { ObjBox::<T>::value_mut(p).begin_destroy(cx) }
}
unsafe fn is_ready<T: Object>(p: NonNull<Header>) -> bool {
    // SAFETY: `p` heads a live `ObjBox<T>` that the sweep owns exclusively.
    unsafe { ObjBox::<T>::value_mut(p).is_ready_for_finish_destroy() }
}
unsafe fn finish_destroy<T: Object>(p: NonNull<Header>, cx: &DestroyCx<'_>) {
    // SAFETY: `p` heads a live `ObjBox<T>` that the sweep owns exclusively.
    unsafe { ObjBox::<T>::value_mut(p).finish_destroy(cx) }
}
unsafe fn drop_value<T: Object>(p: NonNull<Header>) {
    // SAFETY: `p` heads a live `ObjBox<T>`, dropped exactly once (the vtable's contract).
    unsafe { ObjBox::<T>::drop_in_place(p) }
}

impl Class {
    /// Builds a class for `T`. Called by the derive inside a `static`.
    #[doc(hidden)]
    pub const fn new<T: Object>(desc: ClassDesc) -> Class {
        Class {
            name: desc.name,
            path: desc.path,
            fields: desc.fields,
            size: std::mem::size_of::<ObjBox<T>>(),
            layout: Layout::new::<ObjBox<T>>(),
            needs_trace: T::NEEDS_TRACE,
            interior_mut: T::INTERIOR_MUT,
            has_hooks: T::HAS_HOOKS,
            needs_drop: std::mem::needs_drop::<ObjBox<T>>(),
            can_be_in_cluster: T::CAN_BE_IN_CLUSTER,
            save: desc.save,
            vt: Vtable {
                trace_mark: trace_mark::<T>,
                trace_range_mark: trace_range_mark::<T>,
                trace_par: trace_par::<T>,
                prefetch: prefetch::<T>,
                trace_dyn: trace_dyn::<T>,
                begin_destroy: begin_destroy::<T>,
                is_ready: is_ready::<T>,
                finish_destroy: finish_destroy::<T>,
                drop: drop_value::<T>,
                type_id: TypeId::of::<T>,
                make_default: desc.make_default,
            },
        }
    }

    /// The class name (the type name unless `#[object(name = "…")]`). Not
    /// unique: types in different modules may share it.
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// The full path of the class's type, `module::path::Type`, as
    /// `module_path!()` spells it (Unreal's `/Script/Module.Class`). Unique
    /// per type, except for types declared inside functions of one module.
    /// The heap never uses it as identity (that is the class's address and
    /// its type id); it names class defaults whose class name is taken.
    ///
    /// ```
    /// # use coreobject::Object;
    /// mod engine {
    ///     #[derive(coreobject::Object)]
    ///     #[object(name = "Actor")]
    ///     pub struct Pawn;
    /// }
    /// assert_eq!(engine::Pawn::class().name(), "Actor");
    /// assert!(engine::Pawn::class().path().ends_with("::engine::Pawn"));
    /// ```
    pub const fn path(&self) -> &'static str {
        self.path
    }

    /// The reflected fields, in declaration order.
    pub const fn fields(&self) -> &'static [FieldInfo] {
        self.fields
    }

    /// Bytes one object of this class takes in its allocation (header
    /// included), not counting memory the value owns elsewhere.
    pub const fn size(&self) -> usize {
        self.size
    }

    /// The layout of an object of this class without an outer: header and value.
    pub(crate) const fn layout(&self) -> Layout {
        self.layout
    }

    /// Whether objects of this class can hold strong handles. The marker does
    /// not look inside objects whose class holds none.
    pub const fn needs_trace(&self) -> bool {
        self.needs_trace
    }

    /// Whether handles inside objects of this class can change through a
    /// shared reference ([`Trace::INTERIOR_MUT`]).
    pub const fn interior_mut(&self) -> bool {
        self.interior_mut
    }

    /// Whether objects of this class may join a GC cluster
    /// ([`Heap::create_cluster`](crate::Heap::create_cluster)); a class opts
    /// out with `#[object(cluster = false)]` (Unreal's `CanBeInCluster`).
    pub const fn can_be_in_cluster(&self) -> bool {
        self.can_be_in_cluster
    }

    /// Whether objects of this class can be saved (`#[object(save)]`; see
    /// [`save`](crate::save)).
    ///
    /// ```
    /// use coreobject::Object;
    /// #[derive(Object, Default)]
    /// #[object(save)]
    /// struct Crate { planks: u8 }
    /// assert!(Crate::class().is_saveable());
    /// ```
    pub const fn is_saveable(&self) -> bool {
        self.save.is_some()
    }

    /// How objects of this class are saved, if they can be.
    pub(crate) const fn save_vtable(&self) -> Option<&'static crate::save::SaveVtable> {
        self.save
    }

    /// Whether objects of this class have destruction hooks
    /// ([`Lifecycle::HAS_HOOKS`]). The sweep does not call them otherwise.
    pub const fn has_hooks(&self) -> bool {
        self.has_hooks
    }

    /// Whether dropping an object of this class runs any code: `false` for
    /// values of plain data and handles, which the purge frees without a
    /// call into the class.
    pub(crate) const fn needs_drop(&self) -> bool {
        self.needs_drop
    }

    /// Whether the type implements `Default`, so that the heap can make a
    /// class default object for it ([`Heap::class_default`](crate::Heap::class_default)).
    /// Does not run `Default`.
    pub fn has_default(&self) -> bool {
        (self.vt.make_default)().is_some()
    }

    /// The Rust type id of the class's type.
    pub fn type_id(&self) -> TypeId {
        (self.vt.type_id)()
    }

    /// Whether this is `T`'s class: compares addresses, after checking that
    /// `T::class()` is the class built for `T` ([`checked`](Self::checked),
    /// free for a derived class), so that no handle resolves as a type whose
    /// `unsafe impl Object` forges another's class.
    #[inline(always)]
    pub(crate) fn is<T: Object>(&self) -> bool {
        std::ptr::eq(self, Class::checked::<T>())
    }

    /// `T::class()`, checked to be the class built for `T`: the `Object`
    /// contract, enforced at creation and whenever a class is matched against
    /// a type. The check is real, in every build; for a derived class both
    /// type ids are constants, so an optimized build folds it away.
    ///
    /// # Panics
    /// If `T::class()` was built for another type (a broken `unsafe impl Object`).
    #[inline(always)]
    pub(crate) fn checked<T: Object>() -> &'static Class {
        let class = T::class();
        if (class.vt.type_id)() != TypeId::of::<T>() {
            forged::<T>(class)
        }
        class
    }
}

#[cold]
#[inline(never)]
fn forged<T>(class: &Class) -> ! {
    panic!(
        "`{}::class()` returns the class of another type ({} at {}): the `unsafe impl Object` \
         breaks the trait's contract; implement it with #[derive(Object)]",
        std::any::type_name::<T>(),
        class.name,
        class.path,
    )
}

thread_local! {
    /// The class defaults this thread is building, outermost first.
    static BUILDING: RefCell<Vec<&'static Class>> = const { RefCell::new(Vec::new()) };
}

/// Marks `T`'s class default as being built on this thread, while `T::default()`
/// runs, so that a `Default` that asks for its own class default (directly or
/// through other classes' defaults) panics instead of recursing forever.
pub(crate) struct Building(());

impl Building {
    /// # Panics
    /// If this thread is already building `T`'s class default.
    pub(crate) fn enter<T: Object>() -> Building {
        let class = T::class();
        let cycle = BUILDING.with(|b| {
            let mut b = b.borrow_mut();
            let start = b.iter().position(|c| std::ptr::eq(*c, class));
            let cycle = start.map(|i| {
                b[i..]
                    .iter()
                    .chain([&class])
                    .map(|c| c.path)
                    .collect::<Vec<_>>()
                    .join(" -> ")
            });
            if cycle.is_none() {
                b.push(class);
            }
            cycle
        });
        if let Some(cycle) = cycle {
            panic!(
                "class_default::<{}>: the class default is asked for while its own `Default` \
                 runs (cycle: {cycle}); a class default cannot be built from itself",
                class.path
            );
        }
        Building(())
    }
}

impl Drop for Building {
    fn drop(&mut self) {
        // `try_with`: harmless if the thread's locals are already gone.
        let _ = BUILDING.try_with(|b| b.borrow_mut().pop());
    }
}

impl fmt::Debug for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Class")
            .field("name", &self.name)
            .field("path", &self.path)
            .field("size", &self.size)
            .field("fields", &self.fields)
            .finish()
    }
}

impl PartialEq for Class {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}
impl Eq for Class {}

/// Support code for the derives. Not public API.
#[doc(hidden)]
pub mod __private {
    use std::any::Any;
    use std::marker::PhantomData;

    /// Autoref specialization: picks the `Default` path when `T: Default`.
    pub struct Probe<T>(pub PhantomData<T>);

    impl<T> std::fmt::Debug for Probe<T> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("Probe")
        }
    }

    /// A type-erased `T::default()`.
    pub type MakeDefault = fn() -> Box<dyn Any + Send + Sync>;

    pub trait ViaDefault {
        fn make_default(&self) -> Option<MakeDefault>;
    }
    impl<T: Default + Any + Send + Sync> ViaDefault for Probe<T> {
        fn make_default(&self) -> Option<MakeDefault> {
            Some(|| Box::new(T::default()))
        }
    }

    pub trait NoDefault {
        fn make_default(&self) -> Option<MakeDefault>;
    }
    impl<T> NoDefault for &Probe<T> {
        fn make_default(&self) -> Option<MakeDefault> {
            None
        }
    }
}

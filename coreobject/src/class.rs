//! Classes: what `#[derive(Object)]` registers about a type (Unreal's `UClass`).
//!
//! A [`Class`] is a `static` the derive writes for each object type: its name,
//! its reflected fields, and the type-erased functions the heap calls to trace,
//! destroy and drop objects of that type. Classes are compared by address.
//!
//! ```
//! use coreobject::{Heap, Obj, Object, RefKind, Weak};
//!
//! #[derive(Object, Default)]
//! struct Turret { target: Option<Weak<Turret>>, owner: Option<Obj<Turret>>, ammo: u32 }
//!
//! let class = Turret::class();
//! assert_eq!(class.name(), "Turret");
//! let kinds: Vec<_> = class.fields().iter().map(|f| (f.name, f.kind)).collect();
//! assert_eq!(kinds, [("target", RefKind::Weak), ("owner", RefKind::Strong), ("ammo", RefKind::Plain)]);
//! ```

use std::any::{Any, TypeId};
use std::fmt;
use std::ptr::NonNull;

use crate::gc::Marker;
use crate::lifecycle::{DestroyCx, Lifecycle};
use crate::object::{Header, ObjBox};
use crate::trace::{RefKind, Trace, Visitor};

/// An object type: a `'static`, `Send + Sync` value with a [`Class`].
///
/// Implement it with `#[derive(Object)]`, never by hand. The derive also
/// implements [`Trace`] (every field, unless `#[object(skip)]`) and, unless the
/// type asks for `#[object(lifecycle)]`, an empty [`Lifecycle`].
///
/// ```
/// use coreobject::{Object, Obj};
/// #[derive(Object)]
/// #[object(name = "Weapon")]
/// struct Gun { owner: Option<Obj<Gun>> }
/// assert_eq!(Gun::class().name(), "Weapon");
/// ```
pub trait Object: Trace + Lifecycle + Send + Sync + 'static {
    /// The class of this type.
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
pub struct ClassDesc {
    pub name: &'static str,
    pub fields: &'static [FieldInfo],
    pub make_default: fn() -> Option<Box<dyn Any + Send + Sync>>,
}

/// The type-erased operations on one class. Each takes a pointer to the
/// object's [`Header`] and casts it back to `ObjBox<T>` for the `T` the
/// function was instantiated with.
pub(crate) struct Vtable {
    pub(crate) trace_mark: unsafe fn(NonNull<Header>, &mut Marker<'_>),
    pub(crate) prefetch: unsafe fn(NonNull<Header>),
    pub(crate) trace_dyn: unsafe fn(NonNull<Header>, &mut dyn Visitor),
    pub(crate) begin_destroy: unsafe fn(NonNull<Header>, &DestroyCx<'_>),
    pub(crate) is_ready: unsafe fn(NonNull<Header>) -> bool,
    pub(crate) finish_destroy: unsafe fn(NonNull<Header>, &DestroyCx<'_>),
    pub(crate) drop: unsafe fn(NonNull<Header>),
    pub(crate) type_id: fn() -> TypeId,
    pub(crate) make_default: fn() -> Option<Box<dyn Any + Send + Sync>>,
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
    fields: &'static [FieldInfo],
    size: usize,
    needs_trace: bool,
    has_hooks: bool,
    pub(crate) vt: Vtable,
}

// SAFETY: the functions in `Vtable` are only called with a header of an object
// of class `T`; that invariant is upheld by the heap, which stores the class
// pointer in the header when the object is created.
unsafe fn trace_mark<T: Object>(p: NonNull<Header>, m: &mut Marker<'_>) {
    // SAFETY: `p` heads a live `ObjBox<T>` (the vtable's contract).
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
unsafe fn drop_box<T: Object>(p: NonNull<Header>) {
    // SAFETY: `p` came from `ObjBox::<T>::alloc` and is dropped exactly once.
    unsafe { ObjBox::<T>::free(p) }
}

impl Class {
    /// Builds a class for `T`. Called by the derive inside a `static`.
    #[doc(hidden)]
    pub const fn new<T: Object>(desc: ClassDesc) -> Class {
        Class {
            name: desc.name,
            fields: desc.fields,
            size: std::mem::size_of::<ObjBox<T>>(),
            needs_trace: T::NEEDS_TRACE,
            has_hooks: T::HAS_HOOKS,
            vt: Vtable {
                trace_mark: trace_mark::<T>,
                prefetch: prefetch::<T>,
                trace_dyn: trace_dyn::<T>,
                begin_destroy: begin_destroy::<T>,
                is_ready: is_ready::<T>,
                finish_destroy: finish_destroy::<T>,
                drop: drop_box::<T>,
                type_id: TypeId::of::<T>,
                make_default: desc.make_default,
            },
        }
    }

    /// The class name (the type name unless `#[object(name = "…")]`).
    pub const fn name(&self) -> &'static str {
        self.name
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

    /// Whether objects of this class can hold strong handles. The marker does
    /// not look inside objects whose class holds none.
    pub const fn needs_trace(&self) -> bool {
        self.needs_trace
    }

    /// Whether objects of this class have destruction hooks
    /// ([`Lifecycle::HAS_HOOKS`]). The sweep does not call them otherwise.
    pub const fn has_hooks(&self) -> bool {
        self.has_hooks
    }

    /// Whether the type implements `Default`, so that the heap can make a
    /// class default object for it ([`Heap::class_default`](crate::Heap::class_default)).
    pub fn has_default(&self) -> bool {
        (self.vt.make_default)().is_some()
    }

    /// The Rust type id of the class's type.
    pub fn type_id(&self) -> TypeId {
        (self.vt.type_id)()
    }

    pub(crate) fn is<T: Object>(&self) -> bool {
        std::ptr::eq(self, T::class())
    }
}

impl fmt::Debug for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Class")
            .field("name", &self.name)
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

    pub trait ViaDefault {
        fn make_default(&self) -> Option<Box<dyn Any + Send + Sync>>;
    }
    impl<T: Default + Any + Send + Sync> ViaDefault for Probe<T> {
        fn make_default(&self) -> Option<Box<dyn Any + Send + Sync>> {
            Some(Box::new(T::default()))
        }
    }

    pub trait NoDefault {
        fn make_default(&self) -> Option<Box<dyn Any + Send + Sync>>;
    }
    impl<T> NoDefault for &Probe<T> {
        fn make_default(&self) -> Option<Box<dyn Any + Send + Sync>> {
            None
        }
    }
}

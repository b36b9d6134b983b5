//! Handles: 8-byte `Copy` names for objects that can never dangle.
//!
//! # Layout
//!
//! ```text
//!  bits 0..32   index   slot in the object table (FUObjectArray index)
//!  bits 32..64  serial  [ heap tag: 10 bits | generation: 22 bits ]
//! ```
//!
//! A handle resolves only while the slot at `index` carries exactly the same
//! `serial`. Freeing an object bumps its slot's generation, so every handle to
//! it goes stale for good; a slot whose generation would wrap is retired
//! instead of reused (see [`crate::serial`]). The heap tag is unique among
//! live heaps and its generations never repeat across heaps that shared it,
//! so a handle from another heap never resolves either.
//!
//! [`Obj<T>`] is strong (traced), [`Weak<T>`] is not, and [`AnyObj`] is the
//! untyped strong handle. All three are the same 8 bytes; the serial is never
//! zero, so `Option` of any of them is 8 bytes too.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;
use std::num::NonZeroU32;

use crate::serial;

/// An untyped strong handle: Unreal's `UObject*`, but checked.
///
/// ```
/// use coreobject::{Heap, Object};
/// #[derive(Object, Default)]
/// struct Rock;
/// let heap = Heap::new();
/// let any = heap.create(Rock).any();
/// assert!(heap.downcast::<Rock>(any).is_some());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(C)]
pub struct AnyObj {
    index: u32,
    serial: NonZeroU32,
}

const _: () = assert!(std::mem::size_of::<AnyObj>() == 8);
const _: () = assert!(std::mem::size_of::<Option<AnyObj>>() == 8);
const _: () = assert!(std::mem::size_of::<Obj<()>>() == 8);
const _: () = assert!(std::mem::size_of::<Option<Weak<()>>>() == 8);

impl AnyObj {
    pub(crate) const fn new(index: u32, serial: NonZeroU32) -> Self {
        AnyObj { index, serial }
    }

    /// The object's slot in the table.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Rock;
    /// let heap = Heap::new();
    /// assert_eq!(heap.create(Rock).any().index(), 0);
    /// ```
    #[inline]
    pub const fn index(self) -> u32 {
        self.index
    }

    /// The serial number: heap tag and generation.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Rock;
    /// let heap = Heap::new();
    /// assert_ne!(heap.create(Rock).any().serial(), 0);
    /// ```
    #[inline]
    pub const fn serial(self) -> u32 {
        self.serial.get()
    }

    /// Packs the handle into 64 bits, for serialization or replication.
    ///
    /// ```
    /// # use coreobject::{AnyObj, Heap, Object};
    /// # #[derive(Object, Default)] struct Rock;
    /// let heap = Heap::new();
    /// let h = heap.create(Rock).any();
    /// assert_eq!(AnyObj::from_bits(h.to_bits()), Some(h));
    /// ```
    #[inline]
    pub const fn to_bits(self) -> u64 {
        (self.index as u64) | ((self.serial.get() as u64) << 32)
    }

    /// Unpacks [`to_bits`](Self::to_bits). Any value is safe to unpack: a
    /// made-up handle simply never resolves. `None` if the serial is zero.
    ///
    /// ```
    /// # use coreobject::AnyObj;
    /// assert_eq!(AnyObj::from_bits(7), None);
    /// ```
    #[inline]
    pub const fn from_bits(bits: u64) -> Option<Self> {
        match NonZeroU32::new((bits >> 32) as u32) {
            Some(serial) => Some(AnyObj {
                index: bits as u32,
                serial,
            }),
            None => None,
        }
    }

    /// Views this handle as a typed one **without** checking the class.
    /// [`Heap::downcast`](crate::Heap::downcast) is the checked, safe way.
    ///
    /// Typed handles resolve without comparing the class (the serial already
    /// names one object, of one class, for the slot's whole life), so a wrong
    /// guess here would read one type as another.
    ///
    /// # Safety
    /// Whenever this handle's object is alive, it must be a `T`: the handle
    /// came from an `Obj<T>` or `Weak<T>` ([`Obj::any`]), from
    /// `Heap::downcast::<T>`, or from creating a `T`. A handle that names no
    /// live object (stale, foreign, made up) is fine: it never resolves.
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Rock(u32);
    /// let heap = Heap::new();
    /// let any = heap.create(Rock(7)).any();
    /// // SAFETY: `any` came from an `Obj<Rock>`.
    /// let rock = unsafe { any.assume::<Rock>() };
    /// assert_eq!(heap[rock].0, 7);
    /// ```
    #[inline]
    pub const unsafe fn assume<T>(self) -> Obj<T> {
        Obj {
            raw: self,
            _t: PhantomData,
        }
    }

    fn fmt_with(self, f: &mut fmt::Formatter<'_>, kind: &str, ty: &str) -> fmt::Result {
        write!(
            f,
            "{kind}<{ty}>(#{} gen {} heap {})",
            self.index,
            serial::generation(self.serial.get()),
            serial::tag(self.serial.get())
        )
    }
}

impl fmt::Debug for AnyObj {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_with(f, "AnyObj", "_")
    }
}

fn short_type_name<T>() -> &'static str {
    let full = std::any::type_name::<T>();
    full.rsplit("::").next().unwrap_or(full)
}

/// A typed strong handle: Unreal's `TObjectPtr<T>`.
///
/// Eight bytes, `Copy`. Stored in an object's field it keeps its target alive
/// (it is traced); held anywhere else (a local, a `Vec` outside the heap) it
/// is only a name, and resolves to `None` once its object is collected.
/// Resolve it with [`Heap::get`](crate::Heap::get), `heap[h]`, or
/// [`Heap::get_mut`](crate::Heap::get_mut).
///
/// ```
/// use coreobject::{Heap, Object};
/// #[derive(Object, Default)]
/// struct Hero { hp: u32 }
/// let mut heap = Heap::new();
/// let hero = heap.create(Hero { hp: 10 });
/// heap[hero].hp += 5;
/// assert_eq!(heap[hero].hp, 15);
/// println!("{hero:?}"); // Obj<Hero>(#0 gen 0 heap 3)
/// ```
pub struct Obj<T> {
    raw: AnyObj,
    _t: PhantomData<fn() -> T>,
}

/// A typed weak handle: Unreal's `TWeakObjectPtr<T>`.
///
/// Same 8 bytes as [`Obj<T>`], but not traced: it never keeps its object
/// alive. Once the object is freed the weak handle is stale forever, even
/// after the slot is reused.
///
/// ```
/// use coreobject::{Heap, Object};
/// #[derive(Object, Default)]
/// struct Target;
/// let mut heap = Heap::new();
/// let weak = heap.create(Target).downgrade();
/// assert!(heap.get(weak).is_some());
/// heap.collect().unwrap(); // nothing roots it
/// assert!(heap.get(weak).is_none());
/// ```
pub struct Weak<T> {
    raw: AnyObj,
    _t: PhantomData<fn() -> T>,
}

macro_rules! typed_handle {
    ($name:ident) => {
        impl<T> $name<T> {
            /// The untyped handle.
            #[inline]
            pub const fn any(self) -> AnyObj {
                self.raw
            }
            /// The object's slot in the table.
            #[inline]
            pub const fn index(self) -> u32 {
                self.raw.index
            }
            /// The serial number: heap tag and generation.
            #[inline]
            pub const fn serial(self) -> u32 {
                self.raw.serial.get()
            }
            /// The weak form of this handle.
            #[inline]
            pub const fn downgrade(self) -> Weak<T> {
                Weak {
                    raw: self.raw,
                    _t: PhantomData,
                }
            }
        }
        impl<T> Clone for $name<T> {
            #[inline]
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<T> Copy for $name<T> {}
        impl<T> PartialEq for $name<T> {
            #[inline]
            fn eq(&self, other: &Self) -> bool {
                self.raw == other.raw
            }
        }
        impl<T> Eq for $name<T> {}
        impl<T> PartialOrd for $name<T> {
            fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
                Some(self.cmp(other))
            }
        }
        impl<T> Ord for $name<T> {
            fn cmp(&self, other: &Self) -> std::cmp::Ordering {
                self.raw.cmp(&other.raw)
            }
        }
        impl<T> Hash for $name<T> {
            #[inline]
            fn hash<H: Hasher>(&self, state: &mut H) {
                self.raw.hash(state)
            }
        }
        impl<T> fmt::Debug for $name<T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.raw
                    .fmt_with(f, stringify!($name), short_type_name::<T>())
            }
        }
        impl<T> From<$name<T>> for AnyObj {
            #[inline]
            fn from(h: $name<T>) -> AnyObj {
                h.raw
            }
        }
    };
}

typed_handle!(Obj);
typed_handle!(Weak);

impl<T> Weak<T> {
    /// The same handle as an [`Obj<T>`], unchecked. Resolving it still checks that
    /// the object is alive; see also [`Heap::upgrade`](crate::Heap::upgrade).
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// # #[derive(Object, Default)] struct Rock;
    /// let heap = Heap::new();
    /// let h = heap.create(Rock);
    /// assert_eq!(h.downgrade().to_obj(), h);
    /// ```
    #[inline]
    pub const fn to_obj(self) -> Obj<T> {
        Obj {
            raw: self.raw,
            _t: PhantomData,
        }
    }
}

/// A typed handle: [`Obj`], [`Weak`] or a [`StrongObj`](crate::StrongObj).
/// [`Heap::get`](crate::Heap::get) and friends take any of them. Sealed:
/// resolving trusts the handle's `Target`, so only this crate implements it.
///
/// ```
/// # use coreobject::{Handle, Heap, Object};
/// # #[derive(Object, Default)] struct Rock;
/// let heap = Heap::new();
/// let h = heap.create(Rock);
/// assert_eq!(h.downgrade().any_obj(), h.any());
/// ```
pub trait Handle: sealed::Sealed {
    /// The type the handle resolves to.
    type Target: 'static;
    /// The untyped handle.
    fn any_obj(&self) -> AnyObj;
}

mod sealed {
    /// Only this crate's handles are [`Handle`](super::Handle)s: resolving one
    /// trusts its `Target` (see `ObjectArray::resolve`).
    pub trait Sealed {}
    impl<T> Sealed for super::Obj<T> {}
    impl<T> Sealed for super::Weak<T> {}
    impl<T> Sealed for &crate::StrongObj<T> {}
}

impl<T: 'static> Handle for Obj<T> {
    type Target = T;
    #[inline]
    fn any_obj(&self) -> AnyObj {
        self.raw
    }
}

impl<T: 'static> Handle for Weak<T> {
    type Target = T;
    #[inline]
    fn any_obj(&self) -> AnyObj {
        self.raw
    }
}

// ----- serde: handles as package indices (see `save`) --------------------------

/// Writes a handle as a package index of the save in progress: a handle
/// cannot be serialized outside [`Heap::save`](crate::Heap::save).
fn serialize_handle<S: serde::Serializer>(h: AnyObj, weak: bool, s: S) -> Result<S::Ok, S::Error> {
    match crate::save::handles::save_index(h, weak) {
        Some(i) => s.serialize_i32(i),
        None => Err(serde::ser::Error::custom(
            crate::save::handles::OUTSIDE_SAVE,
        )),
    }
}

/// Reads a package index of the load in progress; `class`, if given, is the
/// class the handle's target must have.
fn deserialize_handle<'de, D: serde::Deserializer<'de>>(
    d: D,
    class: Option<&'static crate::Class>,
) -> Result<AnyObj, D::Error> {
    let i = <i32 as serde::Deserialize>::deserialize(d)?;
    crate::save::handles::load_handle(i, class).map_err(serde::de::Error::custom)
}

impl serde::Serialize for AnyObj {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_handle(*self, false, s)
    }
}

impl<'de> serde::Deserialize<'de> for AnyObj {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        deserialize_handle(d, None)
    }
}

impl<T> serde::Serialize for Obj<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_handle(self.raw, false, s)
    }
}

impl<'de, T: crate::Object> serde::Deserialize<'de> for Obj<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // The load checked the target's class against `T`'s (or the handle
        // names nothing and never resolves).
        let raw = deserialize_handle(d, Some(crate::class::Class::checked::<T>()))?;
        Ok(Obj {
            raw,
            _t: PhantomData,
        })
    }
}

impl<T> serde::Serialize for Weak<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_handle(self.raw, true, s)
    }
}

impl<'de, T: crate::Object> serde::Deserialize<'de> for Weak<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // As for `Obj<T>`: the class was checked.
        let raw = deserialize_handle(d, Some(crate::class::Class::checked::<T>()))?;
        Ok(Weak {
            raw,
            _t: PhantomData,
        })
    }
}

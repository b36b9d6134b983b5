//! The allocation behind every object: a 16-byte header, then the value.
//!
//! ```text
//! ObjBox<T> (#[repr(C)], one allocation per object)
//!  0..8    class  &'static Class   how to trace, destroy and drop it
//!  8..16   outer  Option<AnyObj>   Unreal's Outer: an implicit strong reference
//!  16..    value  T
//! ```
//!
//! The item in the object table points at the header. Everything that turns
//! that pointer back into a `T` lives in this module and in the class vtable.

use std::ptr::NonNull;

use crate::class::Class;
use crate::handle::AnyObj;
use crate::Object;

/// The common prefix of every object allocation.
#[repr(C)]
pub(crate) struct Header {
    pub(crate) class: &'static Class,
    pub(crate) outer: Option<AnyObj>,
}

const _: () = assert!(std::mem::size_of::<Header>() == 16);

/// One object: header, then value. `#[repr(C)]` puts the header first, so a
/// pointer to the box is a pointer to its header.
#[repr(C)]
pub(crate) struct ObjBox<T> {
    header: Header,
    value: T,
}

impl<T: Object> ObjBox<T> {
    /// Allocates a box and leaks it as a header pointer.
    ///
    /// # Panics
    /// If `T::class()` was built for another type ([`Class::checked`]):
    /// every object is born here, so no object ever carries a forged class
    /// (the slot reserved for a refused object stays empty).
    pub(crate) fn alloc(value: T, outer: Option<AnyObj>) -> NonNull<Header> {
        let class = Class::checked::<T>();
        let b = Box::new(ObjBox {
            header: Header { class, outer },
            value,
        });
        NonNull::from(Box::leak(b)).cast()
    }

    /// Shared access to the value.
    ///
    /// # Safety
    /// `p` heads a live `ObjBox<T>` with no `&mut` to it for `'a`.
    #[inline(always)]
    pub(crate) unsafe fn value<'a>(p: NonNull<Header>) -> &'a T {
        // SAFETY: the caller guarantees `p` is a live `ObjBox<T>` not mutably borrowed.
        unsafe { &(*p.cast::<ObjBox<T>>().as_ptr()).value }
    }

    /// Exclusive access to the value.
    ///
    /// # Safety
    /// `p` heads a live `ObjBox<T>` with no other reference to it for `'a`.
    #[inline(always)]
    pub(crate) unsafe fn value_mut<'a>(p: NonNull<Header>) -> &'a mut T {
        // SAFETY: the caller guarantees `p` is a live `ObjBox<T>` borrowed by no one else.
        unsafe { &mut (*p.cast::<ObjBox<T>>().as_ptr()).value }
    }

    /// Drops the box.
    ///
    /// # Safety
    /// `p` came from [`alloc`](Self::alloc) for this `T` and is not used again.
    pub(crate) unsafe fn free(p: NonNull<Header>) {
        // SAFETY: `p` was leaked from a `Box<ObjBox<T>>` by `alloc` and is freed once.
        drop(unsafe { Box::from_raw(p.cast::<ObjBox<T>>().as_ptr()) })
    }
}

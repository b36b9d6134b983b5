//! The memory behind every object: an 8-byte header, then the value; an
//! object created with an outer carries it in the 8 bytes before the header.
//!
//! ```text
//! slot (from the object's size class, see array/slab.rs)
//!  [-8..0   outer   AnyObj           only when the header's tag bit says so]
//!  0..8     class   &'static Class   how to trace, destroy and drop it; bit 0
//!                                    tags "has an outer"
//!  8..      value   T
//! ```
//!
//! The header keeps the class because every hot path needs it next to the
//! value: marking dispatches `trace` through it, and a typed resolve checks
//! it. The outer (Unreal's `Outer`, an implicit strong reference) is paid
//! for only by the objects that have one, so an object without an outer
//! costs 8 bytes of header instead of 16.
//!
//! The item in the object table points at the header. Everything that turns
//! that pointer back into a `T` lives in this module and in the class vtable.

use std::alloc::Layout;
use std::ptr::NonNull;

use crate::array::Slabs;
use crate::class::Class;
use crate::handle::AnyObj;
use crate::Object;

/// The common prefix of every object.
#[repr(C)]
pub(crate) struct Header {
    /// The class, with bit 0 set when an outer precedes the header.
    class: NonNull<Class>,
}

const _: () = assert!(std::mem::size_of::<Header>() == 8);
const _: () = assert!(std::mem::size_of::<AnyObj>() == 8);
const _: () = assert!(std::mem::align_of::<Class>() >= 2);

// SAFETY: the header holds only a pointer to a `&'static Class`, which is `Sync`.
unsafe impl Send for Header {}
// SAFETY: as above.
unsafe impl Sync for Header {}

impl Header {
    /// The object's class.
    #[inline(always)]
    pub(crate) fn class(&self) -> &'static Class {
        let tag = self.class.as_ptr() as usize & 1;
        // SAFETY: untagging gives back the `&'static Class` stored at creation.
        unsafe { &*self.class.as_ptr().wrapping_byte_sub(tag) }
    }

    /// Whether an outer precedes the header.
    #[inline(always)]
    pub(crate) fn has_outer(&self) -> bool {
        self.class.as_ptr() as usize & 1 != 0
    }

    /// Replaces the outer of the object `p` heads, which has one.
    ///
    /// # Safety
    /// `p` is a live header with an outer ([`has_outer`](Self::has_outer)),
    /// with the provenance of its whole slot, and nothing reads or writes the
    /// object meanwhile (the caller holds the array exclusively).
    pub(crate) unsafe fn set_outer(p: NonNull<Header>, outer: AnyObj) {
        // SAFETY: the tag says `alloc` reserved an AnyObj in the 8 bytes before the header, and no one else accesses it.
        unsafe { p.as_ptr().cast::<AnyObj>().sub(1).write(outer) }
    }

    /// The outer of the object `p` heads.
    ///
    /// # Safety
    /// `p` is a live header, with the provenance of its whole slot (as the
    /// item's pointer has).
    #[inline(always)]
    pub(crate) unsafe fn outer(p: NonNull<Header>) -> Option<AnyObj> {
        // SAFETY: `p` is live (the caller's contract).
        if unsafe { p.as_ref() }.has_outer() {
            // SAFETY: the tag says `alloc` wrote an AnyObj in the 8 bytes before the header.
            Some(unsafe { p.as_ptr().cast::<AnyObj>().sub(1).read() })
        } else {
            None
        }
    }
}

/// One object: header, then value. `#[repr(C)]` puts the header first, so a
/// pointer to the box is a pointer to its header.
#[repr(C)]
pub(crate) struct ObjBox<T> {
    header: Header,
    value: T,
}

/// The bytes before the header of an object with an outer: the outer's 8,
/// rounded up to the object's alignment.
const fn prefix(layout: Layout) -> usize {
    if layout.align() > 8 {
        layout.align()
    } else {
        8
    }
}

/// The slot layout of an object of `class`, and the header's offset in it.
#[inline(always)]
pub(crate) fn slot_layout(class: &Class, with_outer: bool) -> (Layout, usize) {
    let l = class.layout();
    if with_outer {
        let pre = prefix(l);
        let size = l.size() + pre;
        // A valid layout grown by a multiple of its alignment stays valid.
        let grown = Layout::from_size_align(size, l.align()).expect("object too large");
        (grown, pre)
    } else {
        (l, 0)
    }
}

impl<T: Object> ObjBox<T> {
    /// Moves `value` into a slot from `slabs`, through exclusive access to
    /// them (no lock), and returns its header.
    ///
    /// # Panics
    /// If `T::class()` was built for another type ([`Class::checked`]):
    /// every object is born here or in [`alloc_with`](Self::alloc_with), so
    /// no object ever carries a forged class (the slot reserved for a
    /// refused object stays empty).
    #[inline]
    pub(crate) fn alloc_mut(slabs: &mut Slabs, value: T, outer: Option<AnyObj>) -> NonNull<Header> {
        let class = Class::checked::<T>();
        let (layout, pre) = slot_layout(class, outer.is_some());
        Self::place(class, slabs.alloc_mut(layout), pre, value, outer)
    }

    /// Moves `value` into a slot from `get` (given the slot's layout, it
    /// returns a fresh slot of it from the heap's slabs, through a
    /// per-thread cache or a size class's lock: see `array::tlab`), and
    /// returns its header. Panics as [`alloc_mut`](Self::alloc_mut).
    #[inline]
    pub(crate) fn alloc_with(
        value: T,
        outer: Option<AnyObj>,
        get: impl FnOnce(Layout) -> NonNull<u8>,
    ) -> NonNull<Header> {
        let class = Class::checked::<T>();
        let (layout, pre) = slot_layout(class, outer.is_some());
        Self::place(class, get(layout), pre, value, outer)
    }

    /// Writes the outer (if any) and the box into a fresh slot `base` of the
    /// layout [`slot_layout`] gave with `pre` bytes before the box.
    #[inline(always)]
    fn place(
        class: &'static Class,
        base: NonNull<u8>,
        pre: usize,
        value: T,
        outer: Option<AnyObj>,
    ) -> NonNull<Header> {
        let tag = usize::from(outer.is_some());
        let class_ptr = NonNull::from(class).as_ptr().wrapping_byte_add(tag);
        // SAFETY: `base` is a fresh slot of the layout `slot_layout` gave: `pre` bytes
        // (room for the outer) then an `ObjBox<T>` at an offset that keeps its alignment.
        unsafe {
            let p = base.as_ptr().add(pre).cast::<ObjBox<T>>();
            if let Some(o) = outer {
                p.cast::<AnyObj>().sub(1).write(o);
            }
            p.write(ObjBox {
                header: Header {
                    class: NonNull::new_unchecked(class_ptr),
                },
                value,
            });
            NonNull::new_unchecked(p).cast()
        }
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

    /// Drops the value in place; the memory stays (see [`release`]).
    ///
    /// # Safety
    /// `p` heads a live `ObjBox<T>` that nothing uses again.
    pub(crate) unsafe fn drop_in_place(p: NonNull<Header>) {
        // SAFETY: the caller's contract: a live ObjBox<T>, dropped exactly once.
        unsafe { std::ptr::drop_in_place(p.cast::<ObjBox<T>>().as_ptr()) }
    }
}

/// The start of the slot whose object `p` heads, and its layout.
///
/// # Safety
/// `p` is a header written by [`ObjBox::alloc_with`] (its value may be dropped,
/// the header is plain data and stays readable until the slot is released).
pub(crate) unsafe fn slot_of(p: NonNull<Header>) -> (NonNull<u8>, Layout) {
    // SAFETY: the caller's contract: the header is readable.
    let h = unsafe { p.as_ref() };
    let (layout, pre) = slot_layout(h.class(), h.has_outer());
    // SAFETY: `alloc` put the header `pre` bytes into the slot.
    (unsafe { p.cast::<u8>().sub(pre) }, layout)
}

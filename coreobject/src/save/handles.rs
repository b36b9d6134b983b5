//! The save or load in progress on this thread, which handles' `Serialize`
//! and `Deserialize` (in `handle.rs`) consult to write and read package
//! indices. A context is moved into the thread-local for the length of the
//! payloads and taken back out after, also when a field's code panics.

use std::cell::RefCell;
use std::num::NonZeroU32;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::array::{flags, Chunks};
use crate::class::Class;
use crate::handle::AnyObj;

/// What a handle serialized outside a save says.
pub(crate) const OUTSIDE_SAVE: &str =
    "a coreobject handle can only be serialized by Heap::save: its index and serial mean nothing outside its heap";
const OUTSIDE_LOAD: &str =
    "a coreobject handle can only be deserialized by Heap::load or Heap::restore";

/// The handle that unresolved imports and dangling references load as: heap
/// tag 0, which no heap has, so it never resolves.
pub(crate) const NOWHERE: AnyObj = AnyObj::new(u32::MAX, NonZeroU32::MIN);

/// Export numbers by handle.
pub(crate) enum ExportMap {
    /// By slot index: (serial, export + 1). For saves of the whole heap.
    Dense(Vec<(u32, u32)>),
    /// For subtrees and sets: O(saved objects), not O(heap).
    Sparse(FxHashMap<AnyObj, u32>),
}

impl ExportMap {
    #[inline]
    pub(crate) fn get(&self, h: AnyObj) -> Option<u32> {
        match self {
            ExportMap::Dense(v) => match v.get(h.index() as usize) {
                Some(&(s, e)) if s == h.serial() && e != 0 => Some(e - 1),
                _ => None,
            },
            ExportMap::Sparse(m) => m.get(&h).copied(),
        }
    }
}

/// A save in progress.
pub(crate) struct SaveCx {
    pub(crate) exports: ExportMap,
    pub(crate) chunks: Arc<Chunks>,
    /// Weak handles to objects outside the save are written as none.
    pub(crate) weak_none: bool,
    /// A handle to an object still in its slot but marked as garbage (or
    /// found unreachable) is written as a reference, not as none: a store's
    /// record outlives the mark, which can be cleared (the object, while
    /// excluded from the store, loads as a handle that never resolves).
    pub(crate) keep_dead: bool,
    pub(crate) imports: FxHashMap<AnyObj, u32>,
    /// Imports in order of first reference, with the export that first
    /// referred to each.
    pub(crate) import_list: Vec<(AnyObj, u32)>,
    /// The export whose payload is being written.
    pub(crate) current: u32,
}

impl SaveCx {
    /// The package index of `h`: its export, an import (added on first
    /// sight), or 0 for a handle that names no live object (or a weak one
    /// outside the save, if asked).
    #[inline]
    pub(crate) fn index_of(&mut self, h: AnyObj, weak: bool) -> i32 {
        if let Some(e) = self.exports.get(h) {
            return e as i32 + 1;
        }
        self.import(h, weak)
    }

    #[cold]
    fn import(&mut self, h: AnyObj, weak: bool) -> i32 {
        if let Some(&i) = self.imports.get(&h) {
            return -(i as i32) - 1;
        }
        let alive = self.chunks.get(h.index()).is_some_and(|item| {
            item.serial() == h.serial()
                && item.object().is_some()
                && (self.keep_dead || item.flags() & flags::DEAD == 0)
        });
        if !alive || (weak && self.weak_none) {
            return 0;
        }
        let i = self.import_list.len() as u32;
        self.imports.insert(h, i);
        self.import_list.push((h, self.current));
        -(i as i32) - 1
    }
}

/// A load in progress: the handle of every export and import, and its class.
pub(crate) struct LoadCx {
    pub(crate) exports: Vec<(AnyObj, &'static Class)>,
    /// `None`: unresolved.
    pub(crate) imports: Vec<Option<(AnyObj, &'static Class)>>,
}

impl LoadCx {
    fn handle(&self, i: i32, want: Option<&'static Class>) -> Result<AnyObj, String> {
        let found = match i {
            0 => return Ok(NOWHERE),
            i if i > 0 => *self.exports.get(i as usize - 1).ok_or_else(|| {
                format!(
                    "handle to export {} of {}: out of range",
                    i - 1,
                    self.exports.len()
                )
            })?,
            i => {
                let k = (-(i64::from(i)) - 1) as usize;
                match self.imports.get(k) {
                    None => {
                        return Err(format!(
                            "handle to import {k} of {}: out of range",
                            self.imports.len()
                        ))
                    }
                    Some(None) => return Ok(NOWHERE),
                    Some(Some(x)) => *x,
                }
            }
        };
        match want {
            Some(w) if !std::ptr::eq(w, found.1) => Err(format!(
                "a handle to a `{}` where a `{}` is expected",
                found.1.name(),
                w.name()
            )),
            _ => Ok(found.0),
        }
    }
}

enum Active {
    Idle,
    Save(SaveCx),
    Load(LoadCx),
}

thread_local! {
    static ACTIVE: RefCell<Active> = const { RefCell::new(Active::Idle) };
}

/// Puts the thread's context back to idle when dropped (also on unwind).
struct Reset;

impl Drop for Reset {
    fn drop(&mut self) {
        let _ = ACTIVE.try_with(|a| {
            if let Ok(mut a) = a.try_borrow_mut() {
                *a = Active::Idle;
            }
        });
    }
}

fn idle() -> bool {
    ACTIVE.with(|a| matches!(*a.borrow(), Active::Idle))
}

/// Runs `f` with `cx` as this thread's save in progress; returns what `f`
/// returned and the context. `None` if a save or load is already in progress.
pub(crate) fn saving<R>(cx: SaveCx, f: impl FnOnce() -> R) -> Option<(R, SaveCx)> {
    if !idle() {
        return None;
    }
    ACTIVE.with(|a| *a.borrow_mut() = Active::Save(cx));
    let reset = Reset;
    let r = f();
    let cx = ACTIVE.with(|a| std::mem::replace(&mut *a.borrow_mut(), Active::Idle));
    drop(reset);
    match cx {
        Active::Save(cx) => Some((r, cx)),
        _ => unreachable!("the save context was replaced"),
    }
}

/// As [`saving`], for a load.
pub(crate) fn loading<R>(cx: LoadCx, f: impl FnOnce() -> R) -> Option<R> {
    if !idle() {
        return None;
    }
    ACTIVE.with(|a| *a.borrow_mut() = Active::Load(cx));
    let _reset = Reset;
    Some(f())
}

/// Whether this thread is saving or loading.
pub(crate) fn busy() -> bool {
    !idle()
}

/// The package index a handle is written as; `None` outside a save.
#[inline]
pub(crate) fn save_index(h: AnyObj, weak: bool) -> Option<i32> {
    ACTIVE.with(|a| match &mut *a.borrow_mut() {
        Active::Save(cx) => Some(cx.index_of(h, weak)),
        _ => None,
    })
}

/// The handle a package index reads as.
#[inline]
pub(crate) fn load_handle(i: i32, want: Option<&'static Class>) -> Result<AnyObj, String> {
    ACTIVE.with(|a| match &*a.borrow() {
        Active::Load(cx) => cx.handle(i, want),
        _ => Err(OUTSIDE_LOAD.to_owned()),
    })
}

/// Runs `f` on this thread's save in progress, if any.
pub(crate) fn with_save<R>(f: impl FnOnce(&mut SaveCx) -> R) -> Option<R> {
    ACTIVE.with(|a| match &mut *a.borrow_mut() {
        Active::Save(cx) => Some(f(cx)),
        _ => None,
    })
}

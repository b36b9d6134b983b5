//! Destruction: the hooks a class may write (Unreal's `BeginDestroy`,
//! `IsReadyForFinishDestroy`, `FinishDestroy`), what they may see while they
//! run, and how a panicking hook is contained.
//!
//! Every hook, listener and `Drop` runs under `catch_unwind`. A panic does not
//! stop the sweep: the object is destroyed as if the hook had returned (a
//! panicking `is_ready_for_finish_destroy` counts as ready), every other object
//! is handled normally, and the first panic is resumed once the heap is
//! consistent again.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use parking_lot::RwLock;

use crate::array::{flags, ObjectArray};
use crate::class::Object;
use crate::handle::{AnyObj, Handle};
use crate::names::Names;

/// A panic caught while running user code, to resume afterwards.
pub(crate) type Caught = Option<Box<dyn Any + Send + 'static>>;

/// Runs `f`, keeping the first panic in `caught`. True if `f` returned.
pub(crate) fn guard(caught: &mut Caught, f: impl FnOnce()) -> bool {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(()) => true,
        Err(p) => {
            if caught.is_none() {
                *caught = Some(p);
            }
            false
        }
    }
}

/// Resumes a caught panic, if any.
pub(crate) fn resume(caught: Caught) {
    if let Some(p) = caught {
        std::panic::resume_unwind(p);
    }
}

/// Destruction hooks, in Unreal's order (`BeginDestroy`,
/// `IsReadyForFinishDestroy`, `FinishDestroy`).
///
/// The collector calls `begin_destroy` on every unreachable object, then,
/// once `is_ready_for_finish_destroy` says so (it is polled on later
/// collections and ticks), `finish_destroy`, then runs the delete listeners,
/// frees the slot and drops the value. Derive `Object` with
/// `#[object(lifecycle)]` to write these yourself.
///
/// The hooks may read other objects through the [`DestroyCx`], unreachable
/// ones included, but cannot reach the heap mutably, so they cannot resurrect
/// anything. A panic in a hook does not stop the collection: the object is
/// destroyed as if the hook had returned, the sweep completes, and the panic
/// is then resumed from [`Heap::collect`](crate::Heap::collect).
///
/// ```
/// use coreobject::{DestroyCx, Heap, Lifecycle, Object};
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// static CLOSED: AtomicUsize = AtomicUsize::new(0);
///
/// #[derive(Object)]
/// #[object(lifecycle)]
/// struct File { fd: i32 }
/// impl Lifecycle for File {
///     fn begin_destroy(&mut self, _cx: &DestroyCx<'_>) { CLOSED.fetch_add(1, Ordering::SeqCst); }
/// }
/// let mut heap = Heap::new();
/// heap.create(File { fd: 3 });
/// heap.collect().unwrap();
/// assert_eq!(CLOSED.load(Ordering::SeqCst), 1);
/// ```
pub trait Lifecycle {
    /// Whether the type overrides any hook. The empty implementation that
    /// `#[derive(Object)]` writes sets it to `false`, and the collector then
    /// skips the three calls (and the memory they touch) for each dying
    /// object. Leave it at `true` when you write hooks.
    const HAS_HOOKS: bool = true;

    /// First hook: release what can be released at once.
    fn begin_destroy(&mut self, _cx: &DestroyCx<'_>) {}
    /// Polled until it returns `true` (for work still in flight).
    fn is_ready_for_finish_destroy(&mut self) -> bool {
        true
    }
    /// Last hook before the delete listeners run and the value is dropped.
    fn finish_destroy(&mut self, _cx: &DestroyCx<'_>) {}
}

/// What destruction hooks may see: other objects, read-only, unreachable
/// ones included, but never the heap itself (so no resurrection, no
/// re-entrant collection).
///
/// ```
/// use coreobject::{DestroyCx, Heap, Lifecycle, Obj, Object};
/// #[derive(Object)]
/// #[object(lifecycle)]
/// struct Child { parent: Obj<Parent> }
/// #[derive(Object, Default)]
/// struct Parent { name: String }
/// impl Lifecycle for Child {
///     fn begin_destroy(&mut self, cx: &DestroyCx<'_>) {
///         // The parent is unreachable too, but still allocated.
///         assert_eq!(cx.get(self.parent).unwrap().name, "p");
///     }
/// }
/// let mut heap = Heap::new();
/// let parent = heap.create(Parent { name: "p".into() });
/// heap.create(Child { parent });
/// assert_eq!(heap.collect().unwrap().freed, 2);
/// ```
pub struct DestroyCx<'a> {
    array: &'a ObjectArray,
    names: &'a RwLock<Names>,
    this: AnyObj,
}

impl std::fmt::Debug for DestroyCx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DestroyCx")
            .field("this", &self.this)
            .finish()
    }
}

impl<'a> DestroyCx<'a> {
    pub(crate) fn new(array: &'a ObjectArray, names: &'a RwLock<Names>, this: AnyObj) -> Self {
        DestroyCx { array, names, this }
    }

    /// The object being destroyed.
    pub fn this(&self) -> AnyObj {
        self.this
    }

    /// Reads another object that is still allocated (even if unreachable or
    /// garbage). `None` for the object being destroyed itself (it is borrowed
    /// mutably by the hook) and for freed objects.
    pub fn get<H: Handle>(&self, h: H) -> Option<&'a H::Target>
    where
        H::Target: Object,
    {
        let h = h.any_obj();
        if h.index() == self.this.index() {
            return None;
        }
        self.array.resolve::<H::Target>(h, 0).ok()
    }

    /// Whether `h` is unreachable (being destroyed in this collection or earlier).
    pub fn is_unreachable(&self, h: impl Into<AnyObj>) -> bool {
        let h = h.into();
        self.array.lookup(h, 0).is_ok()
            && self.array.at(h.index()).flags() & flags::UNREACHABLE != 0
    }

    /// The display name of an allocated object (its name, or `Class_index`).
    pub fn display_name(&self, h: impl Into<AnyObj>) -> Option<String> {
        let h = h.into();
        let header = self.array.header(h, 0).ok()?;
        if let Some(n) = self.names.read().name_of(h.index()) {
            return Some(n.to_string());
        }
        Some(format!("{}_{}", header.class().name(), h.index()))
    }
}

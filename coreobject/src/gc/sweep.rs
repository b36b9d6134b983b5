//! Sweeping and destruction, in Unreal's order: `begin_destroy` on every
//! unreachable object; `finish_destroy` once `is_ready_for_finish_destroy`;
//! delete listeners; the slot's serial moves on and its index returns to the
//! free list; the value is dropped.
//!
//! Every hook, listener and `Drop` runs under `catch_unwind`. A panic does not
//! stop the sweep: the object is destroyed as if the hook had returned (a
//! panicking `is_ready_for_finish_destroy` counts as ready), every other object
//! is handled normally, and the first panic is resumed once the heap is
//! consistent again.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::class::Object;
use crate::handle::{AnyObj, Handle};
use crate::heap::Heap;
use crate::item::{flags, RETIRED};
use crate::listener::ObjectEvent;
use crate::object::{Header, ObjBox};
use crate::serial;
use crate::trace::prefetch_line;

/// A panic caught during the sweep, to resume afterwards.
pub(crate) type Caught = Option<Box<dyn Any + Send + 'static>>;

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

/// An object waiting for `is_ready_for_finish_destroy`.
pub(crate) struct Pending {
    pub(crate) index: u32,
    /// Whether its class has hooks (the item's `HOOKS` flag): if not, it is
    /// ready at once and its memory need not be touched until it is freed.
    hooks: bool,
    since: Instant,
    warned: bool,
}

/// How far ahead the destruction passes prefetch object headers.
const AHEAD: usize = 8;

/// Starts loading the header of the object in slot `index`.
#[inline(always)]
fn prefetch_header(heap: &Heap, index: Option<&u32>) {
    if let Some(p) = index.and_then(|&i| heap.table.chunks.at(i).object()) {
        prefetch_line(p.as_ptr());
    }
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
    heap: &'a Heap,
    this: AnyObj,
}

impl<'a> DestroyCx<'a> {
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
        let p = self.heap.typed::<H::Target>(h, 0).ok()?;
        // SAFETY: `p` heads a live ObjBox<Target> other than the one the hook borrows
        // mutably; hooks run one at a time and nothing frees objects meanwhile.
        Some(unsafe { ObjBox::<H::Target>::value(p) })
    }

    /// Whether `h` is unreachable (being destroyed in this collection or earlier).
    pub fn is_unreachable(&self, h: impl Into<AnyObj>) -> bool {
        let h = h.into();
        self.heap.lookup(h, 0).is_ok()
            && self.heap.table.chunks.at(h.index()).flags() & flags::UNREACHABLE != 0
    }

    /// The display name of an allocated object (its name, or `Class_index`).
    pub fn display_name(&self, h: impl Into<AnyObj>) -> Option<String> {
        let h = h.into();
        let p = self.heap.lookup(h, 0).ok()?;
        if let Some(n) = self.heap.names.read().name_of(h.index()) {
            return Some(n.to_string());
        }
        // SAFETY: `p` is a live header; the hook's `&mut` covers only the value after it.
        let class = unsafe { p.as_ref() }.class;
        Some(format!("{}_{}", class.name(), h.index()))
    }
}

/// Counts from one destruction pass.
#[derive(Default)]
pub(crate) struct Freed {
    pub(crate) objects: usize,
    pub(crate) bytes: usize,
}

impl Heap {
    fn header_at(&self, index: u32) -> (NonNull<Header>, AnyObj) {
        let item = self.table.chunks.at(index);
        let p = item.object().expect("unreachable object still allocated");
        let serial = std::num::NonZeroU32::new(item.serial()).expect("allocated slot has a serial");
        (p, AnyObj::new(index, serial))
    }

    /// Flags every allocated, unmarked object outside the pool as unreachable.
    pub(crate) fn find_unreachable(&mut self) -> Vec<u32> {
        let start = self.pool.end;
        let hw = self.table.high_water();
        let mut out = std::mem::take(&mut self.gc.scratch.newly);
        out.clear();
        let words = (hw as usize).div_ceil(64);
        for w in (start as usize / 64)..words {
            let mut zeros = !self.gc.bits[w];
            while zeros != 0 {
                let i = (w * 64) as u32 + zeros.trailing_zeros();
                zeros &= zeros - 1;
                if i < start || i >= hw {
                    continue;
                }
                let item = self.table.chunks.at(i);
                if item.object().is_none()
                    || item.flags() & (flags::DISREGARD | flags::UNREACHABLE) != 0
                {
                    continue;
                }
                item.flags.fetch_or(flags::UNREACHABLE, Ordering::Relaxed);
                out.push(i);
            }
        }
        out
    }

    /// Runs `begin_destroy` on newly unreachable objects and queues them.
    pub(crate) fn begin_destroy_all(&mut self, newly: &[u32], caught: &mut Caught) {
        let now = Instant::now();
        let mut pending = std::mem::take(&mut self.gc.pending);
        pending.reserve(newly.len());
        {
            let heap: &Heap = self;
            for &i in newly {
                let hooks = heap.table.chunks.at(i).flags() & flags::HOOKS != 0;
                if hooks {
                    let (p, this) = heap.header_at(i);
                    let cx = DestroyCx { heap, this };
                    // SAFETY: `p` is live and of the header's class; the sweep holds
                    // `&mut Heap`, and `cx` never hands out the object being destroyed.
                    guard(caught, || unsafe {
                        (p.as_ref().class.vt.begin_destroy)(p, &cx)
                    });
                }
                pending.push(Pending {
                    index: i,
                    hooks,
                    since: now,
                    warned: false,
                });
            }
        }
        self.gc.pending = pending;
    }

    /// Finishes and frees every pending object that is ready.
    pub(crate) fn finish_ready(&mut self, caught: &mut Caught) -> Freed {
        let timeout = self.gc.config.finish_destroy_timeout;
        let mut ready = std::mem::take(&mut self.gc.scratch.ready);
        ready.clear();
        let mut waiting = std::mem::take(&mut self.gc.scratch.waiting);
        waiting.clear();
        let mut pending = std::mem::take(&mut self.gc.pending);
        for mut p in pending.drain(..) {
            if !p.hooks {
                ready.push((p.index, false));
                continue;
            }
            let (ptr, this) = self.header_at(p.index);
            let mut is_ready = true;
            // SAFETY: as in `begin_destroy_all`.
            guard(caught, || {
                is_ready = unsafe { (ptr.as_ref().class.vt.is_ready)(ptr) }
            });
            if is_ready {
                ready.push((p.index, true));
                continue;
            }
            if !p.warned && p.since.elapsed() >= timeout {
                p.warned = true;
                tracing::warn!(
                    object = ?this,
                    waited = ?p.since.elapsed(),
                    "object is still not ready for finish_destroy"
                );
            }
            waiting.push(p);
        }
        self.gc.pending = waiting;
        self.gc.scratch.waiting = pending;
        {
            let heap: &Heap = self;
            for &(i, _) in ready.iter().filter(|(_, hooks)| *hooks) {
                let (p, this) = heap.header_at(i);
                let cx = DestroyCx { heap, this };
                // SAFETY: as in `begin_destroy_all`.
                guard(caught, || unsafe {
                    (p.as_ref().class.vt.finish_destroy)(p, &cx)
                });
            }
        }
        let mut freed = Freed::default();
        for (k, &(i, _)) in ready.iter().enumerate() {
            prefetch_header(self, ready.get(k + AHEAD).map(|(i, _)| i));
            freed.bytes += self.free_slot(i, caught);
            freed.objects += 1;
        }
        self.gc.scratch.ready = ready;
        freed
    }

    /// Delete listeners, serial bump, free list, drop. Returns the bytes freed.
    fn free_slot(&mut self, index: u32, caught: &mut Caught) -> usize {
        let (p, this) = self.header_at(index);
        // SAFETY: `p` is live until dropped below.
        let class = unsafe { p.as_ref() }.class;
        let event = ObjectEvent {
            object: this,
            class,
        };
        for (_, l) in self.listeners.delete.iter().rev() {
            guard(caught, || l.on_delete(&event));
        }
        if !self.names.get_mut().is_empty() {
            self.names.get_mut().remove(index);
        }
        let item = self.table.chunks.at(index);
        item.object.store(std::ptr::null_mut(), Ordering::Release);
        item.flags.store(0, Ordering::Relaxed);
        let s = this.serial();
        if serial::generation(s) >= self.lease.limit {
            item.serial.store(RETIRED, Ordering::Release);
            self.retired += 1;
        } else {
            item.serial.store(s + 1, Ordering::Release);
            if item.refcount.load(Ordering::Acquire) > 0 {
                // A StrongObj still counts on this slot: reuse it only once that drops.
                self.gc.parked.push(index);
            } else {
                self.table.release(index);
            }
        }
        // SAFETY: the slot no longer points at `p`, so this is its one and only drop.
        guard(caught, || unsafe { (class.vt.drop)(p) });
        class.size()
    }

    /// Returns parked slots whose strong count has dropped to zero.
    pub(crate) fn release_parked(&mut self) {
        let chunks = self.table.chunks.clone();
        let mut keep = Vec::new();
        for i in std::mem::take(&mut self.gc.parked) {
            if chunks.at(i).refcount.load(Ordering::Acquire) > 0 {
                keep.push(i);
            } else {
                self.table.release(i);
            }
        }
        self.gc.parked = keep;
    }
}

//! Create and delete listeners (Unreal's `FUObjectCreateListener` and
//! `FUObjectDeleteListener`).
//!
//! A listener is told the index, serial and class of each object created or
//! deleted. It receives no heap reference, and registering one takes
//! `&mut Heap`, so a listener cannot re-enter the heap mutably: where Unreal
//! would deadlock (or corrupt the array), this does not compile.
//!
//! Create listeners run on the creating thread, after the object is in the
//! table; if one panics, the panic leaves `create` but the object stays
//! registered (unrooted, it is collected like any other). Delete listeners run
//! during the sweep, in reverse registration order; a panic there is held
//! until the sweep is complete and then resumed from `collect`.
//!
//! ```
//! use coreobject::{Heap, Object, ObjectEvent};
//! use std::sync::{Arc, Mutex};
//! #[derive(Object, Default)]
//! struct Bullet;
//! let log = Arc::new(Mutex::new(Vec::new()));
//! let mut heap = Heap::new();
//! let l = log.clone();
//! heap.on_delete(move |e: &ObjectEvent| l.lock().unwrap().push(e.class.name()));
//! heap.create(Bullet);
//! heap.collect().unwrap();
//! assert_eq!(*log.lock().unwrap(), ["Bullet"]);
//! ```

use crate::class::Class;
use crate::handle::AnyObj;
use crate::lifecycle::{guard, Caught};

/// What a listener learns about an object.
#[derive(Clone, Copy, Debug)]
pub struct ObjectEvent {
    /// The object's handle: its index and serial.
    pub object: AnyObj,
    /// Its class.
    pub class: &'static Class,
}

/// Hears of every object created.
pub trait CreateListener: Send + Sync + 'static {
    /// Called after an object is added to the table.
    fn on_create(&self, event: &ObjectEvent);
    /// Called once when the heap drops.
    fn on_shutdown(&self) {}
    /// Heap memory the listener itself owns, for memory reports.
    fn allocated_size(&self) -> usize {
        0
    }
}

/// Hears of every object deleted.
pub trait DeleteListener: Send + Sync + 'static {
    /// Called after `finish_destroy`, before the slot is freed.
    fn on_delete(&self, event: &ObjectEvent);
    /// Called once when the heap drops.
    fn on_shutdown(&self) {}
    /// Heap memory the listener itself owns, for memory reports.
    fn allocated_size(&self) -> usize {
        0
    }
}

impl<F: Fn(&ObjectEvent) + Send + Sync + 'static> CreateListener for F {
    fn on_create(&self, event: &ObjectEvent) {
        self(event)
    }
}

impl<F: Fn(&ObjectEvent) + Send + Sync + 'static> DeleteListener for F {
    fn on_delete(&self, event: &ObjectEvent) {
        self(event)
    }
}

/// The token returned when registering a listener, callback or referencer;
/// pass it back to remove the registration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HookId(pub(crate) u64);

/// Registered listeners, in registration order.
/// A delete listener that hears a purge slice's deletions at once.
pub(crate) type BatchListener = Box<dyn Fn(&[ObjectEvent]) + Send + Sync>;

#[derive(Default)]
pub(crate) struct Listeners {
    pub(crate) create: Vec<(HookId, Box<dyn CreateListener>)>,
    pub(crate) delete: Vec<(HookId, Box<dyn DeleteListener>)>,
    /// Batch delete listeners ([`Heap::on_delete_batch`](crate::Heap::on_delete_batch)).
    pub(crate) delete_batch: Vec<(HookId, BatchListener)>,
}

impl Listeners {
    pub(crate) fn remove(&mut self, id: HookId) -> bool {
        let count = |l: &Self| l.create.len() + l.delete.len() + l.delete_batch.len();
        let before = count(self);
        self.create.retain(|(i, _)| *i != id);
        self.delete.retain(|(i, _)| *i != id);
        self.delete_batch.retain(|(i, _)| *i != id);
        before != count(self)
    }

    /// Hands `events` (deletions, in the order they happened) to every batch
    /// delete listener, the most recently added first, and empties it.
    pub(crate) fn deliver_batch(&self, events: &mut Vec<ObjectEvent>, caught: &mut Caught) {
        if events.is_empty() {
            return;
        }
        for (_, l) in self.delete_batch.iter().rev() {
            guard(caught, || l(events));
        }
        events.clear();
    }

    pub(crate) fn allocated_size(&self) -> usize {
        self.create
            .iter()
            .map(|(_, l)| l.allocated_size())
            .sum::<usize>()
            + self
                .delete
                .iter()
                .map(|(_, l)| l.allocated_size())
                .sum::<usize>()
    }

    /// Tells every listener the heap is going away; a panicking one does not
    /// stop the others.
    pub(crate) fn shutdown(&self, caught: &mut Caught) {
        for (_, l) in &self.create {
            guard(caught, || l.on_shutdown());
        }
        for (_, l) in &self.delete {
            guard(caught, || l.on_shutdown());
        }
    }
}

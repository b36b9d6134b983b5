//! Error types: [`ResolveError`] for a handle that does not resolve, wrapped
//! by the heap-wide [`Error`], with [`PoolError`] and [`ConfigError`] for
//! the disregard-for-GC pool and heap settings.

use std::fmt;

use crate::handle::AnyObj;

/// Why a handle does not resolve.
///
/// ```
/// use coreobject::{Heap, Object, ResolveError};
/// #[derive(Object, Default)]
/// struct Rock;
/// let mut heap = Heap::new();
/// let h = heap.create(Rock);
/// heap.collect().unwrap();
/// assert_eq!(heap.try_get(h).err(), Some(ResolveError::Stale(h.any())));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResolveError {
    /// The handle's object was freed (its slot may since hold another one).
    #[error("stale handle {0:?}: its object was freed")]
    Stale(AnyObj),
    /// The handle was made by another heap.
    #[error(
        "foreign handle {handle:?}: it was made by heap {handle_heap}, this is heap {this_heap}"
    )]
    Foreign {
        /// The handle.
        handle: AnyObj,
        /// The tag of the heap that made it.
        handle_heap: u32,
        /// This heap's tag.
        this_heap: u32,
    },
    /// The object is marked as garbage or is being destroyed.
    #[error("handle {0:?} names an object that is garbage or being destroyed")]
    Garbage(AnyObj),
    /// The object is of another class. Only a slot restored by
    /// [`Heap::create_at_with_serial`](crate::Heap::create_at_with_serial)
    /// can give this: elsewhere a typed handle's serial names an object of
    /// its own class (see [`AnyObj::assume`]).
    #[error("handle {handle:?} names a {actual}, not a {expected}")]
    WrongClass {
        /// The handle.
        handle: AnyObj,
        /// The class asked for.
        expected: &'static str,
        /// The object's class.
        actual: &'static str,
    },
}

/// Why the disregard-for-GC pool refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PoolError {
    /// `HeapConfig::disregard_pool_size` is 0, or the pool was disabled.
    #[error(
        "the pool has no room (HeapConfig::disregard_pool_size is 0, or the pool was disabled)"
    )]
    NoRoom,
    /// Slots outside the pool were used before it was opened.
    #[error("slots outside the pool have been used; open the pool before creating other objects")]
    SlotsUsed,
    /// Every pool slot is taken: refused when the pool is opened, and when
    /// an object is created while it is open (the object would not be
    /// permanent).
    #[error("the pool is full (HeapConfig::disregard_pool_size); close it before creating more objects, or make it larger")]
    Full,
    /// `create_at` while the pool is open would interleave pool and ordinary slots.
    #[error("create_at is refused while the pool is open: permanent and ordinary objects never interleave")]
    CreateAtWhileOpen,
}

/// Why [`Heap::create_at_with_serial`](crate::Heap::create_at_with_serial)
/// refused a serial.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SerialRefusal {
    /// The serial's heap tag is not this heap's.
    #[error("its heap tag is not this heap's")]
    OtherHeap,
    /// The generation lies outside the range this heap issues.
    #[error("its generation lies outside the range this heap issues")]
    OutOfRange,
    /// The slot is retired: its generations ran out.
    #[error("the slot is retired: its generations ran out")]
    Retired,
    /// Older than the slot's last occupant: handles to a later occupant
    /// would resolve to the new object.
    #[error("it is older than the slot's last occupant: handles to a later occupant would resolve to the new object")]
    Older,
    /// One of the tag's last two generations, which the slot never issued:
    /// after this heap, no heap could use the tag again (it would be retired
    /// for the process, and heaps could run out of tags while few are alive).
    #[error("it is one of the heap tag's last two generations: the tag would be retired for the process when this heap is dropped")]
    WouldRetireTag,
}

/// A [`HeapConfig`](crate::HeapConfig) value out of range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `max_objects` is 0 or above 2^31.
    #[error("max_objects must be in 1..=2^31")]
    MaxObjects,
    /// `generation_bits` is 0 or above 22.
    #[error("generation_bits must be in 1..=22")]
    GenerationBits,
    /// The pool is larger than the table.
    #[error("disregard_pool_size exceeds max_objects")]
    PoolSize,
    /// A zero incremental budget.
    #[error("GcConfig::incremental must be a non-zero budget")]
    ZeroBudget,
    /// A growth factor not above 1.
    #[error("GcConfig::growth must be above 1.0")]
    Growth,
    /// A slice stretch below 1, above [`MAX_STRETCH`](crate::GcConfig::MAX_STRETCH),
    /// or not a number.
    #[error("GcConfig::incremental_stretch must be a number from 1.0 to 1,000,000.0")]
    Stretch,
    /// A debt limit that is not a positive number.
    #[error("GcConfig::incremental_debt must be a positive number (or None)")]
    Debt,
}

/// Everything that can go wrong when using a [`Heap`](crate::Heap).
///
/// ```
/// use coreobject::{Error, Heap, Object, ResolveError};
/// #[derive(Object, Default)]
/// struct Rock;
/// let mut heap = Heap::new();
/// let h = heap.create(Rock);
/// heap.collect().unwrap();
/// assert_eq!(heap.add_to_root(h), Err(Error::Resolve(ResolveError::Stale(h.any()))));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A handle does not resolve.
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    /// The object cap is reached.
    #[error("{0}")]
    CapReached(CapReport),
    /// `create_at` named an index in use (or retired, or in the pool).
    #[error("index {0} is taken")]
    IndexTaken(u32),
    /// `create_at` (or a restore) named the slot of an object the collector
    /// found unreachable and is freeing: the slot is free once the cycle's
    /// purge has freed it (keep calling `tick`, or call `collect`), and, for
    /// a class with destruction hooks, once its `is_ready_for_finish_destroy`
    /// says yes.
    #[error(
        "index {0} still holds an object the collector is freeing; it is free once the purge \
         frees it (keep calling `tick`, or call `collect`)"
    )]
    SlotBeingFreed(u32),
    /// [`Heap::rename`](crate::Heap::rename) was asked to give an outer to
    /// an object created without one: such an object has no room for an
    /// outer. Create it with [`Spawn::outer`](crate::Spawn::outer) if it is
    /// to move between outers.
    #[error("{0:?} was created without an outer, so it cannot be moved under one")]
    NoOuterSlot(AnyObj),
    /// [`Heap::rename`](crate::Heap::rename) was asked to move an object
    /// under itself or one of its own inners.
    #[error("{object:?} cannot be moved under {outer:?}: that is the object itself or inside it")]
    OuterCycle {
        /// The object to move.
        object: AnyObj,
        /// The outer asked for.
        outer: AnyObj,
    },
    /// `create_at` named an index at or past the cap.
    #[error("index {index} is past the object cap of {cap}")]
    IndexPastCap {
        /// The index asked for.
        index: u32,
        /// The cap.
        cap: u32,
    },
    /// `create_at_with_serial` named a serial this heap could not have
    /// issued for that slot, or one that a handle to another object could
    /// confuse with the new object.
    #[error("serial {serial:#x} refused for index {index}: {reason}")]
    SerialRefused {
        /// The index asked for.
        index: u32,
        /// The serial asked for.
        serial: u32,
        /// Why.
        reason: SerialRefusal,
    },
    /// Another object with this outer already has this name.
    #[error("an object named {name:?} already exists under that outer")]
    NameTaken {
        /// The name.
        name: String,
    },
    /// A [`Name`](crate::Name) this heap does not hold: made by another
    /// heap, or one whose base the heap has since forgotten (no object used
    /// it and it was not interned with [`Heap::intern`](crate::Heap::intern)).
    #[error("name {0:?} is not in this heap's name table (made by another heap, or forgotten)")]
    StaleName(crate::Name),
    /// A name may not be empty or contain `.`.
    #[error("invalid object name {0:?}: names are non-empty and contain no '.'")]
    InvalidName(String),
    /// The object is permanent: objects in the disregard-for-GC pool and
    /// class default objects cannot be marked as garbage, and a class
    /// default object can neither leave the root set nor be renamed.
    #[error("{0:?} is permanent (a class default object, or in the disregard-for-GC pool): it cannot be marked as garbage, and a class default object can neither leave the root set nor be renamed")]
    Permanent(AnyObj),
    /// The disregard-for-GC pool cannot do that now.
    #[error("disregard-for-GC pool: {0}")]
    DisregardPool(#[from] PoolError),
    /// The collector is disabled.
    #[error("garbage collection is disabled (Heap::set_enabled(false))")]
    GcDisabled,
    /// Every heap tag is held by a live heap.
    #[error("too many live heaps: at most {live_limit} can exist at once")]
    TooManyHeaps {
        /// How many heaps may be alive at once.
        live_limit: u32,
    },
    /// A [`HeapConfig`](crate::HeapConfig) value is out of range.
    #[error("invalid heap config: {0}")]
    Config(#[from] ConfigError),
}

/// What [`Error::CapReached`] reports: the cap and the classes filling it
/// (the dump Unreal users ask for when the object array overflows).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapReport {
    /// The object cap.
    pub cap: u32,
    /// Objects per class name, most numerous first.
    pub by_class: Vec<(&'static str, usize)>,
}

impl fmt::Display for CapReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "object cap of {} reached (raise HeapConfig::max_objects); objects by class:",
            self.cap
        )?;
        let mut sep = " ";
        for (name, n) in self.by_class.iter().take(10) {
            write!(f, "{sep}{name} {n}")?;
            sep = ", ";
        }
        match self.by_class.len() {
            0 => f.write_str(" none"),
            11 => f.write_str(" and 1 more class"),
            more @ 12.. => write!(f, " and {} more classes", more - 10),
            _ => Ok(()),
        }
    }
}

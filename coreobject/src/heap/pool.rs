//! The disregard-for-GC pool (Unreal's `OpenDisregardForGC`).

use crate::array::{flags, Pool};
use crate::error::{Error, PoolError};

use super::Heap;

impl Heap {
    /// Opens the disregard-for-GC pool (Unreal's `OpenDisregardForGC`):
    /// objects created until it closes take the lowest indices, up to
    /// [`HeapConfig::disregard_pool_size`](crate::HeapConfig::disregard_pool_size), and are never collected.
    /// Their references are still traced, so what they point at stays alive.
    ///
    /// Only possible before any slot outside the pool has been used (the
    /// pool's indices stay contiguous from 0), even if those objects have
    /// since been freed: as in Unreal, open it at start-up.
    ///
    /// While it is open, every object created goes into the pool. Once the
    /// pool is full, creating another is refused with
    /// [`PoolError::Full`] ([`Heap::try_create`], [`Spawn::create`](crate::Spawn::create);
    /// [`Heap::create`] panics with that message, and
    /// [`Heap::class_default`] gives `None`) rather than making an object
    /// the collector could free: close the pool first, or make it larger.
    ///
    /// ```
    /// use coreobject::{Heap, HeapConfig, Object};
    /// #[derive(Object, Default)]
    /// struct Asset;
    /// let mut heap = Heap::with_config(HeapConfig { disregard_pool_size: 16, ..HeapConfig::DEFAULT }).unwrap();
    /// heap.open_disregard_for_gc().unwrap();
    /// let a = heap.create(Asset);
    /// heap.close_disregard_for_gc();
    /// heap.collect().unwrap();
    /// assert!(heap.contains(a));
    /// assert_eq!(heap.disregard_len(), 1);
    /// ```
    ///
    /// A full pool refuses more objects while it is open:
    ///
    /// ```
    /// use coreobject::{Error, Heap, HeapConfig, Object, PoolError};
    /// #[derive(Object, Default)]
    /// struct Asset;
    /// let mut heap = Heap::with_config(HeapConfig { disregard_pool_size: 2, ..HeapConfig::DEFAULT }).unwrap();
    /// heap.open_disregard_for_gc().unwrap();
    /// heap.create(Asset);
    /// heap.create(Asset);
    /// assert_eq!(heap.try_create(Asset).unwrap_err(), Error::DisregardPool(PoolError::Full));
    /// heap.close_disregard_for_gc();
    /// let ordinary = heap.create(Asset); // outside the pool: collectable
    /// assert_eq!(heap.disregard_len(), 2);
    /// assert!(!heap.flags_of(ordinary).unwrap().disregard);
    /// ```
    pub fn open_disregard_for_gc(&mut self) -> Result<(), Error> {
        let pool = self.array.pool();
        if pool.open {
            return Ok(());
        }
        if pool.capacity == 0 {
            return Err(PoolError::NoRoom.into());
        }
        self.array.sync();
        if self.array.high_water() != pool.end {
            return Err(PoolError::SlotsUsed.into());
        }
        if pool.end >= pool.capacity {
            return Err(PoolError::Full.into());
        }
        self.array.pool_mut().open = true;
        Ok(())
    }

    /// Closes the pool (Unreal's `CloseDisregardForGC`).
    pub fn close_disregard_for_gc(&mut self) {
        if !self.array.pool().open {
            return;
        }
        self.array.release_refused();
        let end = self.array.high_water().min(self.array.pool().capacity);
        let pool = self.array.pool_mut();
        pool.end = end;
        pool.open = false;
    }

    /// Why a creation found no slot, if the pool is the reason: it is open
    /// and full.
    #[cold]
    pub(super) fn pool_refusal(&self) -> Option<Error> {
        let pool = self.array.pool();
        (pool.open && self.array.high_water() >= pool.capacity).then(|| PoolError::Full.into())
    }

    /// Disables the pool for good (Unreal's `DisableDisregardForGC`). Objects
    /// already in it become ordinary objects; they are added to the root set
    /// so that none is lost.
    pub fn disable_disregard_for_gc(&mut self) {
        self.close_disregard_for_gc();
        for i in 0..self.array.pool().end {
            let Some(item) = self.array.item(i) else {
                continue;
            };
            if item.clear(flags::DISREGARD) & flags::DISREGARD != 0 && item.add_root() {
                self.array.list_root(i);
            }
        }
        *self.array.pool_mut() = Pool::default();
    }

    /// Whether the pool is open.
    pub fn is_disregard_open(&self) -> bool {
        self.array.pool().open
    }

    /// Objects in the pool.
    pub fn disregard_len(&self) -> u32 {
        self.array.pool_end()
    }

    /// The first index the collector considers (Unreal's `ObjFirstGCIndex`).
    pub fn first_gc_index(&self) -> u32 {
        self.array.pool().end
    }
}

//! The game thread's half of a save into a store, in budgeted steps.
//!
//! A capture looks only at the slots something happened to since the last
//! capture began (the heap's dirty set, `save/ids.rs`), plus the slots new
//! since then; the first capture into a store (or after
//! [`Heap::forget_store`]) looks at every slot. For each slot it looks at,
//! it compares what a save would hold now with what the store will hold
//! once the capture commits, and encodes the object, drops its record, or
//! does nothing.
//!
//! # What snapshot a capture is
//!
//! The change set a capture returns is the heap as of the frame its final
//! step ran in. Steps before the final one encode objects as they are then;
//! every door that changes an object afterwards (a write through `get_mut`,
//! a data view, a rename, a creation, a root or garbage mark, the sweep, the
//! purge) marks its slot again, and the final step looks at every slot so
//! marked since the capture began, encoding again the objects written after
//! their capture (the *re-capture rule*) and dropping those freed. The final
//! step's cost is therefore bounded by what the mutator touched during the
//! capture, not by the budget: a mutator writing every frame cannot keep a
//! capture from ending. Objects of interior-mutable classes (which change
//! behind `&self`, unseen) are encoded in the final step, every save.
//!
//! A GC purge in flight hides the objects it will free without marking them
//! until its sweep reaches them; a final step that finds one in flight
//! waits (returns `None`) for up to [`PURGE_WAIT`] steps, then looks at
//! every slot instead.

use std::time::{Duration, Instant};

use rustc_hash::{FxHashMap, FxHashSet};

use super::error::SaveError;
use super::handles::{self, ExportMap, SaveCx};
use super::ids::{PersistentId, Tracker};
use super::package::Format;
use super::registry::register_class;
use super::store::{
    class_entry, outers_alive, ChangeSet, ObjectRecord, StoreError, StoreMeta, StoreSaved,
    RECORD_POOL,
};
use super::FieldWriter;
use crate::array::{flags, ObjectRef};
use crate::heap::Heap;
use crate::names::Names;

/// How far ahead of the slot it looks at a capture asks for the table
/// items (and, half as far, the objects) of the slots to come.
const AHEAD: usize = 8;

/// How many steps a final step waits for a GC purge in flight to finish
/// before it looks at every slot.
pub const PURGE_WAIT: u32 = 32;

/// How much of a capture one [`Heap::capture_step`] does (at least one slot,
/// except in the final step, which does what it must).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaptureBudget {
    /// Stop once this much time has passed (the clock is read every 32
    /// slots).
    Time(Duration),
    /// Stop after looking at this many slots.
    Slots(usize),
    /// Do it all in one step.
    Unbounded,
}

/// A capture in flight: begun by [`Heap::capture_begin`], advanced by
/// [`Heap::capture_step`] until that returns the change set. It owns what
/// it encoded so far (nothing borrowed from the heap). Beginning another
/// capture, saving, loading or forgetting the store supersedes it: its next
/// step fails with [`StoreError::StaleCapture`].
#[derive(Debug)]
pub struct Capture {
    pub(crate) tag: u32,
    pub(crate) epoch: u64,
    pub(crate) meta: StoreMeta,
    /// Slots to look at: `extra` first (inners of objects whose saved state
    /// flipped), then `queue` from `next`, then `range`.
    pub(crate) extra: Vec<u32>,
    pub(crate) queue: Vec<u32>,
    pub(crate) next: usize,
    /// Slots marked with their inners (ascending, as taken from the dirty
    /// set; looked up by binary search).
    pub(crate) subtree: Vec<u32>,
    pub(crate) range: std::ops::Range<u32>,
    /// The high water when the capture began.
    pub(crate) high_water: u32,
    /// Whether the final step has begun.
    pub(crate) last: bool,
    pub(crate) waited: u32,
    pub(crate) put: Records,
    pub(crate) delete: FxHashSet<u64>,
    pub(crate) class_ids: FxHashMap<usize, u32>,
    pub(crate) steps: usize,
    pub(crate) looked: usize,
}

impl Capture {
    /// Steps taken so far.
    pub fn steps(&self) -> usize {
        self.steps
    }
    /// Slots looked at so far.
    pub fn slots_looked_at(&self) -> usize {
        self.looked
    }
    /// Records encoded so far (an object encoded again counts once).
    pub fn encoded(&self) -> usize {
        self.put.len()
    }

    pub(crate) fn new(tag: u32, epoch: u64, meta: StoreMeta, high_water: u32) -> Capture {
        Capture {
            tag,
            epoch,
            meta,
            extra: Vec::new(),
            queue: Vec::new(),
            next: 0,
            subtree: Vec::new(),
            range: 0..0,
            high_water,
            last: false,
            waited: 0,
            put: Records::default(),
            delete: FxHashSet::default(),
            class_ids: FxHashMap::default(),
            steps: 0,
            looked: 0,
        }
    }

    /// The next slot, and whether it is part of a subtree walk.
    fn pop(&mut self) -> Option<(u32, bool)> {
        if let Some(i) = self.extra.pop() {
            return Some((i, true));
        }
        if let Some(&i) = self.queue.get(self.next) {
            self.next += 1;
            return Some((i, false));
        }
        self.range.next().map(|i| (i, false))
    }

    /// Whether nothing is left to look at.
    pub(crate) fn drained(&self) -> bool {
        self.extra.is_empty() && self.next >= self.queue.len() && self.range.is_empty()
    }
}

/// The records encoded so far: a list, and each id's position in it (so
/// that growing the index moves 16-byte entries, not records).
#[derive(Debug, Default)]
pub(crate) struct Records {
    list: Vec<(u64, ObjectRecord)>,
    /// Each record's slot.
    slots: Vec<u32>,
    at: FxHashMap<u64, u32>,
}

impl Records {
    fn len(&self) -> usize {
        self.list.len()
    }
    fn reserve(&mut self, n: usize) {
        self.list.reserve(n);
        self.slots.reserve(n);
        self.at.reserve(n);
    }
    fn contains(&self, id: u64) -> bool {
        self.at.contains_key(&id)
    }
    fn insert(&mut self, id: u64, slot: u32, rec: ObjectRecord) {
        match self.at.get(&id) {
            Some(&k) => self.list[k as usize].1 = rec,
            None => {
                self.at.insert(id, self.list.len() as u32);
                self.list.push((id, rec));
                self.slots.push(slot);
            }
        }
    }
    fn remove(&mut self, id: u64) {
        if let Some(k) = self.at.remove(&id) {
            self.list.swap_remove(k as usize);
            self.slots.swap_remove(k as usize);
            if let Some(&(moved, _)) = self.list.get(k as usize) {
                self.at.insert(moved, k);
            }
        }
    }
}

/// The id of `(index, serial)`, given one now if it has none (the record
/// of the slot's former object, if any, dropped first).
fn id_for(tr: &mut Tracker, cap: &mut Capture, index: u32, serial: u32) -> Result<u64, StoreError> {
    if let Some(id) = tr.id_of(index, serial) {
        return Ok(id);
    }
    drop_record(tr, cap, index);
    let meta = &mut cap.meta;
    let id = PersistentId::new(meta.origin, meta.next_serial)
        .ok_or_else(|| StoreError::Backend("persistent ids used up".into()))?;
    meta.next_serial += 1;
    tr.assign(index, serial, id.bits(), false);
    Ok(id.bits())
}

/// Drops the record of the object slot `i`'s entry names (gone, or no
/// longer saved): no longer written, deleted if the store holds it.
fn drop_record(tr: &mut Tracker, cap: &mut Capture, i: u32) {
    let Some(e) = tr.entries.get(i as usize).copied() else {
        return;
    };
    if e.id == 0 {
        return;
    }
    cap.put.remove(e.id);
    if e.stored {
        cap.delete.insert(e.id);
    }
    tr.roots.remove(&e.id);
    tr.interior.remove(&i);
}

/// Looks at slots until the budget is spent or none is left; returns how
/// many it looked at.
pub(crate) fn work(
    heap: &Heap,
    tr: &mut Tracker,
    cap: &mut Capture,
    budget: CaptureBudget,
) -> Result<usize, StoreError> {
    if handles::busy() {
        return Err(SaveError::Nested.into());
    }
    let cx = SaveCx {
        exports: ExportMap::Sparse(FxHashMap::default()),
        chunks: heap.save_chunks(),
        weak_none: false,
        keep_dead: true,
        imports: FxHashMap::default(),
        import_list: Vec::new(),
        current: 0,
    };
    let names = heap.save_names();
    let start = Instant::now();
    let room = (cap.queue.len() - cap.next + cap.range.len()).min(match budget {
        CaptureBudget::Slots(n) => n,
        _ => usize::MAX,
    });
    cap.put.reserve(room.min(1 << 20));
    let mut done = 0usize;
    let (res, _) = handles::saving(cx, || -> Result<(), StoreError> {
        loop {
            let stop = match budget {
                CaptureBudget::Unbounded => false,
                CaptureBudget::Slots(n) => done >= n.max(1),
                CaptureBudget::Time(t) => done > 0 && done % 32 == 0 && start.elapsed() >= t,
            };
            if stop {
                break;
            }
            let Some((i, walk)) = cap.pop() else { break };
            // The slots a few ahead: their table items, objects and
            // tracker entries are on their way while this one is encoded.
            if let Some(&j) = cap.queue.get(cap.next + AHEAD) {
                heap.store_prefetch(j, false);
                if let Some(e) = tr.entries.get(j as usize) {
                    crate::trace::prefetch_line(e);
                }
            }
            if let Some(&j) = cap.queue.get(cap.next + AHEAD / 2) {
                heap.store_prefetch(j, true);
            }
            visit(heap, &names, tr, cap, i, walk)?;
            done += 1;
        }
        Ok(())
    })
    .ok_or(SaveError::Nested)?;
    drop(names);
    res?;
    cap.looked += done;
    Ok(done)
}

/// Brings the capture's view of slot `i` up to date (`walk`: and its
/// inners', as part of a subtree walk).
fn visit(
    heap: &Heap,
    names: &Names,
    tr: &mut Tracker,
    cap: &mut Capture,
    i: u32,
    walk: bool,
) -> Result<(), StoreError> {
    let e = tr.entries.get(i as usize).copied().unwrap_or_default();
    let now = heap
        .store_slot(i)
        .filter(|(o, _)| o.flags() & flags::DEFAULT_OBJECT == 0);
    let keep = now
        .as_ref()
        .is_some_and(|(o, hidden)| !hidden && outers_alive(heap, o));
    let same = e.id != 0
        && now
            .as_ref()
            .is_some_and(|(o, _)| o.id().serial() == e.serial);
    // Whether the store holds (or will, once this capture commits) the
    // object now in the slot.
    let was = same && (cap.put.contains(e.id) || (e.stored && !cap.delete.contains(&e.id)));
    if !(same && keep) {
        // The slot's recorded object is gone, or no longer saved.
        drop_record(tr, cap, i);
    }
    let Some((o, _)) = now else { return Ok(()) };
    // Whether the objects inside this one are saved may have changed (a
    // garbage mark set or cleared, a move, found unreachable, its outer
    // freed: the doors mark it so): the whole subtree is looked at. (An
    // object seen for the first time needs no walk: its inners are new too,
    // or came by a move, which marks them.)
    if (walk || cap.subtree.binary_search(&i).is_ok()) && o.flags() & flags::OUTER != 0 {
        heap.store_inners(o.id(), &mut cap.extra);
    }
    if !keep {
        // Its next change marks it dirty again (it may be saved again by
        // then: a garbage mark cleared, a move out of a garbage outer).
        heap.store_unchange(o.id().index());
        return Ok(());
    }
    let (index, serial) = (o.id().index(), o.id().serial());
    let f = o.flags();
    let id = id_for(tr, cap, index, serial)?;
    if !was || f & (flags::CHANGED | flags::INTERIOR) != 0 {
        let rec = encode(heap, names, tr, cap, &o)?;
        if !cap.delete.is_empty() {
            cap.delete.remove(&id);
        }
        cap.put.insert(id, index, rec);
        heap.store_unchange(index);
    }
    if o.is_rooted() {
        tr.roots.insert(id);
    } else if !tr.roots.is_empty() {
        tr.roots.remove(&id);
    }
    if f & flags::INTERIOR != 0 {
        tr.interior.insert(index);
    }
    Ok(())
}

/// One object's record.
fn encode(
    heap: &Heap,
    names: &Names,
    tr: &mut Tracker,
    cap: &mut Capture,
    o: &ObjectRef<'_>,
) -> Result<ObjectRecord, StoreError> {
    let class = o.class();
    let vt = class.save_vtable().ok_or(SaveError::NotSaveable {
        class: class.name(),
        object: o.id(),
    })?;
    let key = class as *const crate::class::Class as usize;
    let class_id = match cap.class_ids.get(&key) {
        Some(&c) => c,
        None => {
            register_class(class)?;
            let c = class_entry(&mut cap.meta, class, vt);
            cap.class_ids.insert(key, c);
            c
        }
    };
    let mut payload = Vec::with_capacity(64);
    handles::with_save(|cx| {
        cx.imports.clear();
        cx.import_list.clear();
    });
    let mut w = FieldWriter {
        out: &mut payload,
        format: Format::Binary,
        class: class.name(),
        fields: vt.fields,
        next: 0,
    };
    (vt.save)(o, &mut w)?;
    let list = handles::with_save(|cx| std::mem::take(&mut cx.import_list)).unwrap_or_default();
    let mut refs = Vec::with_capacity(list.len());
    for &(h, _) in &list {
        // An object not saved yet gets its id now: if it is saved later
        // (in this capture or another), this record finds it.
        refs.push(id_for(tr, cap, h.index(), h.serial())?);
    }
    handles::with_save(|cx| cx.import_list = list);
    // The outer is saved too (`outers_alive` held): its id now, if new.
    let outer = match heap.outer_of(o.id()) {
        Some(h) => id_for(tr, cap, h.index(), h.serial())?,
        None => 0,
    };
    let name = names
        .name_parts(o.id().index())
        .map(|(_, text, number)| (text.to_owned(), number));
    Ok(ObjectRecord {
        class: class_id,
        outer,
        name,
        flags: if o.is_disregard() { RECORD_POOL } else { 0 },
        refs,
        payload,
    })
}

/// Ends a drained capture: the change set, and the tracker as the store
/// will be once it commits.
pub(crate) fn finish(tr: &mut Tracker, cap: &mut Capture) -> (ChangeSet, StoreSaved) {
    let mut meta = cap.meta.clone();
    // In the order encoded (slot order for a first capture): records are
    // large, and a store sorts its keys itself.
    let put = std::mem::take(&mut cap.put.list);
    let slots = std::mem::take(&mut cap.put.slots);
    cap.put.at = FxHashMap::default();
    let mut delete: Vec<u64> = cap.delete.drain().collect();
    delete.sort_unstable();
    let mut created = 0;
    for ((id, _), &slot) in put.iter().zip(&slots) {
        // (A record's slot still holds its object: one freed or replaced
        // since its capture had its record dropped.)
        debug_assert_eq!(tr.entries[slot as usize].id, *id);
        if !tr.entries[slot as usize].stored {
            created += 1;
        }
        tr.set_stored(slot, true);
    }
    for id in &delete {
        if let Some(&slot) = tr.by_id.get(id) {
            if tr.entries[slot as usize].id == *id {
                tr.set_stored(slot, false);
            }
        }
    }
    let mut roots: Vec<u64> = tr.roots.iter().copied().collect();
    roots.sort_unstable();
    meta.roots = roots;
    meta.saves += 1;
    tr.next = meta.next_serial;
    let saved = StoreSaved {
        written: put.len(),
        created,
        deleted: delete.len(),
        objects: tr.count,
    };
    (ChangeSet { meta, put, delete }, saved)
}

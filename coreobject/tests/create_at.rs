//! `create_at` and `create_at_with_serial`: creating at a chosen index.
//!
//! * Far past the high water, even in chunks never allocated, the heap stays
//!   whole: collection (stop-the-world and incremental), the pool, iteration,
//!   reports and drop cope with the chunks the skipped range never needed,
//!   even when a made-up or foreign handle points into them.
//! * `create_at` is refused while the disregard-for-GC pool is open.
//! * `create_at` is O(1) amortized, with memory proportional to the objects,
//!   not to the index: a far index costs no memory per skipped slot, and
//!   claiming deep in the free list does not scan it. Skipped slots are free
//!   slots, not objects, in `len` and `table_stats`.
//! * `create_at_with_serial` restores an object under its old serial (undo)
//!   or a new generation (replication), and refuses serials this heap could
//!   not have issued for the slot, or that a handle could confuse.
//! * A model test of random creations, chosen indices and serials, and
//!   collections against a map of slots. Restores sometimes use another
//!   class: a typed handle resolves only to an object of its own class under
//!   its serial (`WrongClass` for the restored other one), never misreads it.
//!
//! The timing of 100,000 descending `create_at` calls is printed by an
//! ignored test: `cargo test --release -p coreobject --test create_at --
//! --ignored --nocapture`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell as StdCell;
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use coreobject::{
    serial, AnyObj, Error, GcConfig, Heap, HeapConfig, Obj, Object, PoolError, ResolveError,
    CHUNK_SIZE,
};
use proptest::prelude::*;

// ----- a per-thread allocation counter ----------------------------------------

struct Counting;

thread_local! {
    static ALLOCATED: StdCell<usize> = const { StdCell::new(0) };
}

// SAFETY: defers to the system allocator; the counter is a thread-local `Cell`
// with a const initializer, which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATED.try_with(|a| a.set(a.get() + layout.size()));
        // SAFETY: same layout contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let grown = new_size.saturating_sub(layout.size());
        let _ = ALLOCATED.try_with(|a| a.set(a.get() + grown));
        // SAFETY: `ptr` came from `System` with `layout`; same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Bytes this thread allocated while running `f`.
fn allocated_by<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let before = ALLOCATED.with(StdCell::get);
    let r = f();
    (r, ALLOCATED.with(StdCell::get) - before)
}

// ----- objects ----------------------------------------------------------------

#[derive(Object, Default, Debug)]
struct Cell {
    value: u64,
    link: Option<AnyObj>,
}

fn cell(value: u64) -> Cell {
    Cell { value, link: None }
}

/// Another class, laid out differently, for restores that change a slot's
/// class under an old serial: reading one as the other would be caught (and
/// is undefined behaviour under miri).
#[derive(Object, Default, Debug)]
struct Other {
    name: String,
    value: u64,
}

/// The serial of generation 0 under heap tag `tag`.
fn tag_base(tag: u32) -> u32 {
    tag << serial::GENERATION_BITS
}

fn heap_with(max_objects: u32, generation_bits: u32) -> Heap {
    Heap::with_config(HeapConfig {
        max_objects,
        generation_bits,
        ..HeapConfig::DEFAULT
    })
    .unwrap()
}

// ----- 1. past the first chunk ----------------------------------------------------

#[test]
fn create_at_past_the_first_chunk_leaves_the_heap_whole() {
    let mut other = Heap::new();
    let foreign = other.create_at(CHUNK_SIZE + 3, cell(0)).unwrap();
    let made_up =
        AnyObj::from_bits(u64::from(CHUNK_SIZE + 7) | (u64::from(tag_base(other.tag())) << 32))
            .unwrap();

    let mut heap = Heap::new();
    let far = heap
        .create_at(
            2 * CHUNK_SIZE + 5,
            Cell {
                value: 1,
                link: Some(foreign.any()),
            },
        )
        .unwrap();
    heap.add_to_root(far).unwrap();
    let also = heap
        .create_at(
            3 * CHUNK_SIZE,
            Cell {
                value: 2,
                link: Some(made_up),
            },
        )
        .unwrap();
    heap.add_to_root(also).unwrap();
    assert_eq!(
        heap.table_stats().chunks,
        2,
        "only the chunks holding objects"
    );

    // Marking follows links into chunks this heap never allocated.
    let stats = heap.collect().unwrap();
    assert_eq!((stats.marked, stats.freed), (2, 0));
    assert_eq!(heap[far].value, 1);
    assert_eq!(heap.iter().count(), 2);
    assert_eq!(heap.class_counts(), vec![("Cell", 2)]);
    assert!(!heap.reference_chains(far, 2).is_empty());
    assert_eq!(heap.memory_report().classes[0].count, 2);
    heap.disable_disregard_for_gc();

    // Skipped slots are handed out, lowest first, allocating their chunk then.
    let low = heap.create(cell(3));
    assert_eq!(low.index(), 0);
    assert_eq!(heap.table_stats().chunks, 3);
    assert_eq!(heap.collect().unwrap().freed, 1);
    heap.remove_from_root(far).unwrap();
    assert_eq!(heap.collect().unwrap().freed, 1);
    assert!(heap.get(far).is_none());
    assert_eq!(heap[also].value, 2);
    drop(heap);
    drop(other);
}

#[test]
fn incremental_collection_crosses_unallocated_chunks() {
    let gc = GcConfig {
        incremental: Some(Duration::from_micros(1)),
        every_frame: true,
        ..GcConfig::MANUAL
    };
    let mut heap = Heap::with_config(HeapConfig {
        gc,
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    let other = Heap::new();
    let keep = heap.create_at(4 * CHUNK_SIZE + 1, cell(1)).unwrap();
    heap.add_to_root(keep).unwrap();
    let foreign = other.create(cell(0));
    heap.get_mut(keep).unwrap().link = Some(
        AnyObj::from_bits(u64::from(2 * CHUNK_SIZE) | (foreign.any().to_bits() & !0xffff_ffff))
            .unwrap(),
    );
    let lost = heap.create_at(6 * CHUNK_SIZE, cell(2)).unwrap();
    let mut completed = 0;
    for round in 0..2000 {
        // Create during the cycle, in gap slots and far away.
        if round % 50 == 0 {
            let h = heap.create(cell(3));
            heap.add_to_root(h).unwrap();
        }
        if heap.tick(Duration::from_millis(16)).completed.is_some() {
            completed += 1;
            if completed == 3 {
                break;
            }
        }
    }
    assert_eq!(completed, 3);
    assert!(heap.get(lost).is_none());
    assert_eq!(heap[keep].value, 1);
}

// ----- 2. the pool --------------------------------------------------------------

#[test]
fn create_at_is_refused_while_the_pool_is_open() {
    let mut heap = Heap::with_config(HeapConfig {
        disregard_pool_size: 100,
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    heap.open_disregard_for_gc().unwrap();
    heap.create(cell(1));
    heap.create(cell(2));
    assert_eq!(
        heap.create_at(10, cell(3)),
        Err(Error::DisregardPool(PoolError::CreateAtWhileOpen))
    );
    assert_eq!(
        heap.create_at_with_serial(10, 0, cell(3)),
        Err(Error::DisregardPool(PoolError::CreateAtWhileOpen))
    );
    assert_eq!(heap.disregard_len(), 2);
    heap.close_disregard_for_gc();
    assert_eq!((heap.first_gc_index(), heap.disregard_len()), (2, 2));
    assert_eq!(heap.table_stats().high_water, 2, "nothing skipped");
    // Ordinary objects after the pool are collected.
    let a = heap.create(cell(4));
    let b = heap.create_at(10, cell(5)).unwrap();
    let c = heap.create(cell(6));
    assert_eq!((a.index(), c.index()), (2, 3));
    assert_eq!(heap.collect().unwrap().freed, 3);
    assert!(heap.get(b).is_none());
    assert_eq!(heap.len(), 2);
    assert_eq!(heap.disregard_len(), 2);
}

// ----- 3. cost ----------------------------------------------------------------------

#[test]
#[cfg_attr(
    miri,
    ignore = "caps of 2^26 and 2^31: with miri's 128-item chunks, chunk directories of millions of entries"
)]
fn far_indices_cost_memory_per_object_not_per_index() {
    let mut small = heap_with(1 << 26, 22);
    let (_, bytes) = allocated_by(|| small.create_at((1 << 26) - 1, cell(0)).unwrap());
    assert!(bytes < 4 << 20, "{bytes} bytes for one object");
    drop(small);

    let mut heap = heap_with(1 << 31, 22);
    let last = (1 << 31) - 1;
    let (h, bytes) = allocated_by(|| heap.create_at(last, cell(1)).unwrap());
    assert!(bytes < 4 << 20, "{bytes} bytes for one object");
    assert_eq!(h.index(), last);
    let (_, bytes) = allocated_by(|| heap.create_at(last - 1, cell(2)).unwrap());
    assert!(bytes < 1 << 10, "{bytes} bytes for a second object");

    let stats = heap.table_stats();
    assert_eq!(heap.len(), 2);
    assert_eq!(stats.objects, 2);
    assert_eq!(stats.high_water, 1 << 31);
    assert_eq!(
        stats.free,
        (1 << 31) - 2,
        "skipped slots are free, not objects"
    );
    assert_eq!(stats.chunks, 1);
    // The lowest skipped slots come first; the collector frees them as usual.
    assert_eq!(heap.create(cell(3)).index(), 0);
    assert_eq!(heap.create(cell(4)).index(), 1);
    assert_eq!(heap.len(), 4);
    assert_eq!(heap.table_stats().chunks, 2);
    // (Not collected here: the collector's mark bitmap spans the high water.)
}

#[test]
fn skipped_slots_count_as_free_and_are_used_after_freed_ones() {
    // Any cap past index 1000 does; miri's 128-item chunks make 2^20 an
    // 8,192-entry chunk directory.
    let mut heap = heap_with(if cfg!(miri) { 1 << 12 } else { 1 << 20 }, 22);
    let hs: Vec<_> = (0..3).map(|v| heap.create(cell(v))).collect();
    for &h in &hs[..2] {
        heap.add_to_root(h).unwrap();
    }
    assert_eq!(heap.collect().unwrap().freed, 1); // index 2 is free
    let far = heap.create_at(1000, cell(10)).unwrap();
    heap.add_to_root(far).unwrap();
    // A claim splits the skipped range.
    let mid = heap.create_at(500, cell(11)).unwrap();
    heap.add_to_root(mid).unwrap();
    let stats = heap.table_stats();
    assert_eq!((heap.len(), stats.high_water, stats.free), (4, 1001, 997));
    assert_eq!(heap.create_at(500, cell(0)), Err(Error::IndexTaken(500)));
    let order: Vec<u32> = (0..4).map(|v| heap.create(cell(v)).index()).collect();
    assert_eq!(order, [2, 3, 4, 5], "the freed slot, then the skipped ones");
    assert_eq!(heap.len(), 8);
    assert_eq!(heap.table_stats().free, 993);
}

/// Creates `n` objects at indices `n - 1` down to 0 on a fresh heap.
fn descending(n: u32) -> Duration {
    let mut heap = Heap::new();
    let t = Instant::now();
    for i in (0..n).rev() {
        heap.create_at(i, cell(u64::from(i))).unwrap();
    }
    let d = t.elapsed();
    assert_eq!(heap.len(), n as usize);
    assert_eq!(heap.table_stats().free, 0);
    d
}

/// Frees `n` objects, then restores each at its index, lowest first: every
/// claim is at the bottom of the free list. With `serial`, under its old
/// serial, so that the old handles resolve again.
fn undo_ascending(n: u32, serial: bool) -> Duration {
    let mut heap = Heap::new();
    let hs: Vec<_> = (0..n).map(|i| heap.create(cell(u64::from(i)))).collect();
    heap.collect().unwrap();
    let t = Instant::now();
    for h in &hs {
        if serial {
            heap.create_at_with_serial(h.index(), h.serial(), cell(0))
                .unwrap();
        } else {
            heap.create_at(h.index(), cell(0)).unwrap();
        }
    }
    let d = t.elapsed();
    assert_eq!(heap.len(), n as usize);
    assert_eq!(hs.iter().all(|&h| heap.get(h).is_some()), serial);
    d
}

#[test]
#[cfg_attr(miri, ignore = "a timing test of 150,000 calls")]
fn many_create_at_calls_take_linear_time() {
    // Quadratic before (a free-list scan and shift per call): minutes in a
    // debug build. Linear now: well under a second each.
    let limit = Duration::from_secs(10);
    let d = descending(100_000);
    assert!(d < limit, "100,000 descending create_at calls took {d:?}");
    let d = undo_ascending(50_000, true);
    assert!(d < limit, "50,000 deep free-list claims took {d:?}");
}

#[test]
#[ignore = "timing; run in release with --nocapture"]
fn time_descending_create_at() {
    let d = descending(100_000);
    println!("100,000 descending create_at calls: {d:?}");
    let d = undo_ascending(100_000, false);
    println!("100,000 ascending create_at calls, each at the bottom of the free list: {d:?}");
    let d = undo_ascending(100_000, true);
    println!("the same with create_at_with_serial: {d:?}");
}

// ----- 4. serials -----------------------------------------------------------------

#[test]
fn create_at_with_serial_restores_old_handles() {
    let mut heap = Heap::new();
    let h = heap.create(cell(1));
    let weak = h.downgrade();
    heap.collect().unwrap();
    assert!(heap.get(h).is_none());
    let back = heap
        .create_at_with_serial(h.index(), h.serial(), cell(2))
        .unwrap();
    assert_eq!(back, h);
    assert_eq!(heap.get(h).map(|c| c.value), Some(2));
    assert_eq!(heap.upgrade(weak), Some(h));
    assert_eq!(
        heap.create_at_with_serial(h.index(), h.serial(), cell(3)),
        Err(Error::IndexTaken(h.index()))
    );
    // Freed again, the slot moves past the serial as usual.
    heap.collect().unwrap();
    let next = heap.create(cell(4));
    assert_eq!(next.index(), h.index());
    assert_eq!(next.serial(), h.serial() + 1);
    assert!(heap.get(h).is_none());
}

#[test]
fn create_at_with_serial_refuses_what_a_handle_could_confuse() {
    let mut heap = Heap::new();
    let first = heap.create(cell(1));
    heap.collect().unwrap();
    let second = heap.create(cell(2));
    assert_eq!(second.index(), first.index());
    heap.collect().unwrap();
    // The slot issues `second.serial() + 1` next; its last occupant was `second`.
    let index = first.index();
    let refused = |r: Result<Obj<Cell>, Error>| matches!(r, Err(Error::SerialRefused { .. }));

    // Two generations back: a handle to `second` would resolve to it.
    let err = heap
        .create_at_with_serial(index, first.serial(), cell(0))
        .unwrap_err();
    assert!(refused(Err(err.clone())), "{err}");
    assert!(
        err.to_string()
            .contains("older than the slot's last occupant"),
        "{err}"
    );
    // Another heap's tag.
    let other = Heap::new();
    let foreign = tag_base(other.tag());
    let err = heap
        .create_at_with_serial(index, foreign, cell(0))
        .unwrap_err();
    assert!(err.to_string().contains("heap tag"), "{err}");
    // Tag 0 (never issued), and this tag past the generation range.
    assert!(refused(heap.create_at_with_serial(index, 1, cell(0))));
    let mut narrow = heap_with(1000, 3); // generations floor..=floor + 7
    let n = narrow.create(cell(0));
    let err = narrow
        .create_at_with_serial(5, n.serial() + 8, cell(0))
        .unwrap_err();
    assert!(err.to_string().contains("outside the range"), "{err}");
    // Below the floor (or, at floor 0, under another tag).
    assert!(refused(narrow.create_at_with_serial(
        5,
        n.serial() - 1,
        cell(0)
    )));
    assert!(narrow
        .create_at_with_serial(5, n.serial() + 7, cell(0))
        .is_ok());
    // A fresh generation is fine; so is the last occupant's serial.
    let newer = heap
        .create_at_with_serial(index, second.serial() + 5, cell(3))
        .unwrap();
    assert!(heap.get(second).is_none() && heap.get(first).is_none());
    assert_eq!(heap[newer].value, 3);
    heap.collect().unwrap();
    let again = heap
        .create_at_with_serial(index, newer.serial(), cell(4))
        .unwrap();
    assert_eq!(again, newer);
    // The index taken.
    assert_eq!(
        heap.create_at_with_serial(index, newer.serial() + 1, cell(0)),
        Err(Error::IndexTaken(index))
    );
    assert_eq!(
        heap.create_at_with_serial(u32::MAX, newer.serial(), cell(0)),
        Err(Error::IndexPastCap {
            index: u32::MAX,
            cap: heap.max_objects()
        })
    );
    assert_eq!(heap.len(), 1);
}

#[test]
fn create_at_with_serial_refuses_retired_slots_and_fills_fresh_ones() {
    let mut heap = heap_with(100, 1); // two generations per slot
    let a = heap.create(cell(1));
    heap.collect().unwrap();
    let b = heap.create(cell(2));
    assert_eq!(b.index(), a.index());
    heap.collect().unwrap(); // the slot retires
    assert_eq!(heap.table_stats().retired, 1);
    let err = heap
        .create_at_with_serial(a.index(), b.serial(), cell(0))
        .unwrap_err();
    assert!(err.to_string().contains("retired"), "{err}");
    assert_eq!(
        heap.create_at(a.index(), cell(0)),
        Err(Error::IndexTaken(a.index()))
    );
    // A never-used slot (far, or skipped) takes any generation of the heap.
    let top = heap.create_at_with_serial(90, b.serial(), cell(3)).unwrap();
    assert_eq!(top.serial(), b.serial());
    let mid = heap.create_at_with_serial(40, a.serial(), cell(4)).unwrap();
    assert_eq!(heap[mid].value, 4);
    assert_eq!(heap[top].value, 3);
    // At the limit: freed, it retires.
    heap.collect().unwrap();
    assert_eq!(heap.table_stats().retired, 2);
    assert_eq!(heap.len(), 0);
}

// ----- 5. the model -------------------------------------------------------------

/// A slot in the model: its live object, or the generation it issues next.
#[derive(Clone, Copy, Debug)]
struct Live {
    serial: u32,
    value: u64,
    rooted: bool,
    /// An `Other` (restored with another class), not a `Cell`.
    other: bool,
}

#[derive(Clone, Debug)]
enum Target {
    /// An index the model knows: live, freed or retired (picked by `k`).
    Known(usize),
    /// Just past the high water.
    Near(u32),
    /// In a chunk further up.
    Chunks(u32, u32),
    /// Near the cap.
    Top(u32),
    /// Anywhere, the cap included.
    Any(u32),
}

#[derive(Clone, Debug)]
enum Pick {
    /// The slot's last occupant (or the floor for a fresh slot).
    Last,
    /// The slot's next serial plus `k`.
    Ahead(u32),
    /// `k + 2` generations behind the next one.
    Behind(u32),
    /// Another heap's tag.
    Foreign,
    /// Past the generation limit.
    Past,
}

#[derive(Clone, Debug)]
enum Op {
    Create {
        root: bool,
    },
    CreateAt {
        at: Target,
        root: bool,
    },
    WithSerial {
        at: Target,
        pick: Pick,
        root: bool,
        other: bool,
    },
    Unroot(usize),
    Collect,
}

struct Model {
    cap: u32,
    floor: u32,
    limit: u32,
    tag: u32,
    hw: u32,
    live: HashMap<u32, Live>,
    /// The generation each used, free slot issues next.
    next: HashMap<u32, u32>,
    retired: HashSet<u32>,
}

impl Model {
    fn resolve(&self, target: &Target) -> u32 {
        match *target {
            Target::Known(k) => {
                let mut known: Vec<u32> = self
                    .live
                    .keys()
                    .chain(self.next.keys())
                    .chain(self.retired.iter())
                    .copied()
                    .collect();
                known.sort_unstable();
                known.get(k % known.len().max(1)).copied().unwrap_or(0)
            }
            Target::Near(d) => self.hw.saturating_add(d),
            Target::Chunks(c, d) => self.hw.saturating_add(c * CHUNK_SIZE).saturating_add(d),
            Target::Top(d) => self.cap.saturating_sub(1 + d),
            Target::Any(x) => x % (self.cap + 1),
        }
    }

    /// The serial a fresh object in slot `i` gets.
    fn fresh(&self, i: u32) -> u32 {
        tag_base(self.tag) + self.next.get(&i).copied().unwrap_or(self.floor)
    }

    fn is_free(&self, i: u32) -> bool {
        i < self.cap && !self.live.contains_key(&i) && !self.retired.contains(&i)
    }

    fn took(&mut self, i: u32, serial: u32, value: u64, rooted: bool, other: bool) {
        self.next.remove(&i);
        self.hw = self.hw.max(i + 1);
        let old = self.live.insert(
            i,
            Live {
                serial,
                value,
                rooted,
                other,
            },
        );
        assert!(old.is_none(), "slot {i} handed out twice");
    }

    fn collect(&mut self) -> usize {
        let dead: Vec<u32> = self
            .live
            .iter()
            .filter(|(_, l)| !l.rooted)
            .map(|(&i, _)| i)
            .collect();
        for &i in &dead {
            let l = self.live.remove(&i).unwrap();
            let g = serial::generation(l.serial);
            if g >= self.limit {
                self.retired.insert(i);
            } else {
                self.next.insert(i, g + 1);
            }
        }
        dead.len()
    }
}

fn check(heap: &Heap, m: &Model, issued: &Issued) -> Result<(), TestCaseError> {
    prop_assert_eq!(heap.len(), m.live.len());
    let stats = heap.table_stats();
    prop_assert_eq!(stats.high_water, m.hw);
    prop_assert_eq!(stats.retired as usize, m.retired.len());
    prop_assert_eq!(
        stats.free,
        m.hw as usize - m.live.len() - m.retired.len(),
        "free slots"
    );
    // A typed handle resolves exactly when its slot holds its serial, and
    // then to the model's value if the class is its own; under its serial an
    // object of the other class gives `WrongClass`, never a value.
    let expect = |h: AnyObj, other: bool| match m.live.get(&h.index()) {
        Some(l) if l.serial == h.serial() => Some((l.other == other).then_some(l.value)),
        _ => None,
    };
    for &h in &issued.cells {
        match expect(h.any(), false) {
            Some(Some(v)) => prop_assert_eq!(heap.get(h).map(|c| c.value), Some(v), "{:?}", h),
            Some(None) => {
                prop_assert!(heap.get(h).is_none(), "{:?} resolved as a Cell", h);
                let e = heap.try_get(h).err();
                prop_assert!(
                    matches!(e, Some(ResolveError::WrongClass { .. })),
                    "{:?}",
                    e
                );
            }
            None => {
                prop_assert!(heap.get(h).is_none(), "dead {:?} resolved", h);
                prop_assert_eq!(heap.try_get(h).err(), Some(ResolveError::Stale(h.any())));
            }
        }
    }
    for &h in &issued.others {
        match expect(h.any(), true) {
            Some(Some(v)) => {
                let o = heap.get(h);
                prop_assert_eq!(o.map(|o| o.value), Some(v), "{:?}", h);
                prop_assert_eq!(o.map(|o| o.name.clone()), Some(format!("other {v}")));
            }
            Some(None) => prop_assert!(heap.get(h).is_none(), "{:?} resolved as an Other", h),
            None => prop_assert!(heap.get(h).is_none(), "dead {:?} resolved", h),
        }
    }
    Ok(())
}

/// Every typed handle issued so far, by class.
#[derive(Default)]
struct Issued {
    cells: Vec<Obj<Cell>>,
    others: Vec<Obj<Other>>,
}

fn run(cap: u32, bits: u32, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut heap = heap_with(cap, bits);
    let other = Heap::new();
    // Learn the floor from a first object, then free it.
    let probe = heap.create(cell(0));
    let floor = serial::generation(probe.serial());
    let span = if bits >= serial::GENERATION_BITS {
        serial::MAX_GENERATION
    } else {
        (1 << bits) - 1
    };
    let mut m = Model {
        cap,
        floor,
        limit: floor.saturating_add(span).min(serial::MAX_GENERATION),
        tag: heap.tag(),
        hw: 0,
        live: HashMap::new(),
        next: HashMap::new(),
        retired: HashSet::new(),
    };
    m.took(0, probe.serial(), 0, false, false);
    prop_assert_eq!(heap.collect().unwrap().freed, m.collect());
    let mut issued = Issued {
        cells: vec![probe],
        others: Vec::new(),
    };
    for (value, op) in (1u64..).zip(ops) {
        match op {
            Op::Create { root } => match heap.try_create(cell(value)) {
                Ok(h) => {
                    prop_assert!(m.is_free(h.index()), "create took {:?}", h);
                    prop_assert_eq!(h.serial(), m.fresh(h.index()));
                    if *root {
                        heap.add_to_root(h).unwrap();
                    }
                    m.took(h.index(), h.serial(), value, *root, false);
                    issued.cells.push(h);
                }
                Err(Error::CapReached(_)) => {
                    prop_assert_eq!(m.live.len() + m.retired.len(), cap as usize, "early cap");
                }
                Err(e) => prop_assert!(false, "{}", e),
            },
            Op::CreateAt { at, root } => {
                let i = m.resolve(at);
                let r = heap.create_at(i, cell(value));
                if i >= cap {
                    prop_assert_eq!(r.err(), Some(Error::IndexPastCap { index: i, cap }));
                } else if !m.is_free(i) {
                    prop_assert_eq!(r.err(), Some(Error::IndexTaken(i)));
                } else {
                    let h = r.map_err(|e| TestCaseError::fail(e.to_string()))?;
                    prop_assert_eq!(h.index(), i);
                    prop_assert_eq!(h.serial(), m.fresh(i));
                    if *root {
                        heap.add_to_root(h).unwrap();
                    }
                    m.took(i, h.serial(), value, *root, false);
                    issued.cells.push(h);
                }
            }
            Op::WithSerial {
                at,
                pick,
                root,
                other: as_other,
            } => {
                let i = m.resolve(at);
                let base = tag_base(m.tag);
                let next = m.next.get(&i).copied();
                let s = match *pick {
                    Pick::Last => base + next.map_or(m.floor, |g| g - 1),
                    Pick::Ahead(k) => base + next.unwrap_or(m.floor) + k,
                    Pick::Behind(k) => base + next.unwrap_or(m.floor).saturating_sub(k + 2),
                    Pick::Foreign => tag_base(other.tag()) + m.floor,
                    Pick::Past => base + m.limit + 1,
                };
                let g = serial::generation(s);
                let r = if *as_other {
                    heap.create_at_with_serial(
                        i,
                        s,
                        Other {
                            name: format!("other {value}"),
                            value,
                        },
                    )
                    .map(|h| h.any())
                } else {
                    heap.create_at_with_serial(i, s, cell(value))
                        .map(|h| h.any())
                };
                let refused = matches!(r, Err(Error::SerialRefused { .. }));
                if i >= cap {
                    prop_assert_eq!(r.err(), Some(Error::IndexPastCap { index: i, cap }));
                } else if serial::tag(s) != m.tag || g < m.floor || g > m.limit {
                    prop_assert!(refused, "{:?}", r);
                } else if m.retired.contains(&i) {
                    prop_assert!(refused, "{:?}", r);
                } else if m.live.contains_key(&i) {
                    prop_assert_eq!(r.err(), Some(Error::IndexTaken(i)));
                } else if next.is_some_and(|n| g + 1 < n) {
                    prop_assert!(refused, "{:?}", r);
                } else {
                    let h = r.map_err(|e| TestCaseError::fail(e.to_string()))?;
                    prop_assert_eq!((h.index(), h.serial()), (i, s));
                    if *root {
                        heap.add_to_root(h).unwrap();
                    }
                    m.took(i, s, value, *root, *as_other);
                    if *as_other {
                        issued.others.push(heap.downcast(h).expect("just created"));
                    } else {
                        issued.cells.push(heap.downcast(h).expect("just created"));
                    }
                }
            }
            Op::Unroot(k) => {
                let mut rooted: Vec<u32> = m
                    .live
                    .iter()
                    .filter(|(_, l)| l.rooted)
                    .map(|(&i, _)| i)
                    .collect();
                rooted.sort_unstable();
                if !rooted.is_empty() {
                    let i = rooted[k % rooted.len()];
                    let l = m.live.get_mut(&i).unwrap();
                    l.rooted = false;
                    let h = AnyObj::from_bits(u64::from(i) | (u64::from(l.serial) << 32)).unwrap();
                    heap.remove_from_root(h).unwrap();
                }
            }
            Op::Collect => {
                let stats = heap.collect().unwrap();
                prop_assert_eq!(stats.freed, m.collect());
            }
        }
        check(&heap, &m, &issued)?;
    }
    Ok(())
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        4 => any::<usize>().prop_map(Target::Known),
        3 => (0u32..100).prop_map(Target::Near),
        1 => (1u32..3, 0u32..CHUNK_SIZE).prop_map(|(c, d)| Target::Chunks(c, d)),
        1 => (0u32..3).prop_map(Target::Top),
        1 => any::<u32>().prop_map(Target::Any),
    ]
}

fn pick() -> impl Strategy<Value = Pick> {
    prop_oneof![
        3 => Just(Pick::Last),
        2 => (0u32..3).prop_map(Pick::Ahead),
        2 => (0u32..2).prop_map(Pick::Behind),
        1 => Just(Pick::Foreign),
        1 => Just(Pick::Past),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let root = prop::bool::weighted(0.7);
    prop_oneof![
        5 => root.prop_map(|root| Op::Create { root }),
        4 => (target(), root).prop_map(|(at, root)| Op::CreateAt { at, root }),
        4 => (target(), pick(), root, prop::bool::weighted(0.4))
            .prop_map(|(at, pick, root, other)| Op::WithSerial { at, pick, root, other }),
        2 => any::<usize>().prop_map(Op::Unroot),
        2 => Just(Op::Collect),
    ]
}

/// Operations per case (fewer under miri).
const MAX_OPS: usize = if cfg!(miri) { 25 } else { 120 };

proptest! {
    #![proptest_config(if cfg!(miri) {
        // Under miri: a few cases, and no regression file (its isolation
        // keeps the file system away).
        ProptestConfig { cases: 3, failure_persistence: None, ..ProptestConfig::default() }
    } else {
        ProptestConfig { cases: 40, ..ProptestConfig::default() }
    })]

    /// Caps from tiny (the cap is hit) to several chunks (far indices land
    /// in chunks never allocated); generations from two per slot to full.
    #[test]
    fn create_at_matches_model(
        cap in prop::sample::select(vec![8u32, 150, 3 * CHUNK_SIZE + 77]),
        bits in prop::sample::select(vec![1u32, 2, 22]),
        ops in prop::collection::vec(op(), 1..MAX_OPS),
    ) {
        run(cap, bits, &ops)?;
    }
}

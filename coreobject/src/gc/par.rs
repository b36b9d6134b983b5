//! Parallel marking: the drain of a stop-the-world mark phase, on several
//! threads.
//!
//! With [`GcConfig::threads`](crate::GcConfig::threads) above 1 and at least
//! [`GcConfig::parallel_threshold`](crate::GcConfig::parallel_threshold)
//! objects alive when the cycle started, an *unbudgeted* drain of the work
//! queue (a stop-the-world collection, or an incremental cycle forced to
//! finish) runs here instead of on [`Marker`](super::Marker). Budgeted
//! incremental slices stay single-threaded: a slice must stop at its budget
//! with every marked object scanned, which the single marker does exactly.
//!
//! * **Work.** Each worker queues what it visits in a private FIFO (no
//!   atomics; breadth-first, like the single marker: on graphs built in
//!   creation order, as the bench's world is, depth-first order cost 35-40%
//!   more per object through worse locality in the table) and owns a LIFO
//!   deque ([`crossbeam_deque::Worker`]) others can steal from; the handles
//!   queued before the drain (roots, pool and referencer reports) seed a
//!   shared [`Injector`]. Every few dozen pipeline steps a worker whose deque
//!   is empty looks whether another is hungry (counted idle), and if so
//!   moves the older half of its queue to its deque. A worker with nothing
//!   left steals a batch from the injector, then from the other workers'
//!   deques.
//! * **Marks.** The collector's side bitmap is viewed as `[AtomicU64]` for
//!   the drain. A handle is validated like the single marker does (serial,
//!   not garbage, not in the pool), then claimed with `fetch_or`: exactly one
//!   worker sees its bit flip, counts it and scans it. Marking computes the
//!   reachable set, which does not depend on the order, so the marked set,
//!   and with it what the purge frees, is the same for every thread count.
//! * **Pipeline.** Each worker runs a smaller version of the single marker's
//!   prefetch pipeline: popped handles wait in a ring while their table item
//!   loads, validated objects wait while their allocation loads, and objects
//!   wait again while the buffers their `trace` reads load.
//! * **Termination.** A worker whose deque and rings are empty and that
//!   finds nothing to steal counts itself idle. While idle it looks for
//!   visible work (injector or any deque not empty); if it sees some, it
//!   un-counts itself and tries to steal. Work is only ever added to a
//!   deque or a private queue by its owner while the owner is busy (not counted
//!   idle), and the injector is never refilled, so when all workers are counted idle no work exists anywhere,
//!   and none can appear: every worker then leaves.
//! * **Panics.** A panic in user `Trace` code is caught on the worker, which
//!   raises an abort flag that the others poll; after the scope has joined
//!   them all, the first panic is resumed on the collector's thread, which
//!   abandons the cycle as it does for a single-threaded panic.
//!
//! Workers are scoped threads started for each drain: a drain that pays
//! for threading marks at least tens of thousands of objects (milliseconds),
//! against tens of microseconds to start and join a few threads, and a heap
//! keeps no threads alive between collections.

use std::collections::VecDeque;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use crossbeam_deque::{Injector, Steal, Stealer, Worker};
use crossbeam_utils::Backoff;

use super::mark::{Bare, Carry, Keyed, Ring, RING};
use crate::array::{flags, Chunks};
use crate::handle::AnyObj;
use crate::inners::Inners;
use crate::object::Header;
use crate::trace::{prefetch_line, Visitor};

// The bitmap is a `[u64]` viewed as `[AtomicU64]` during the drain.
const _: () = assert!(
    std::mem::size_of::<AtomicU64>() == std::mem::size_of::<u64>()
        && std::mem::align_of::<AtomicU64>() == std::mem::align_of::<u64>()
);

/// Objects scanned between two looks at the abort flag and at whether
/// another worker is hungry.
const POLL_EVERY: usize = 64;

/// Everything the workers share.
pub(crate) struct Shared<'a> {
    chunks: &'a Chunks,
    bits: &'a [AtomicU64],
    high_water: u32,
    inners: Option<&'a Inners>,
    injector: Injector<u64>,
    stealers: Vec<Stealer<u64>>,
    /// Workers that found no work.
    idle: AtomicUsize,
    /// Workers running (fewer than asked if a thread could not start).
    running: AtomicUsize,
    /// A worker panicked: everyone stops.
    abort: AtomicBool,
}

impl Shared<'_> {
    #[inline(always)]
    fn is_marked(&self, i: u32) -> bool {
        self.bits[(i >> 6) as usize].load(Ordering::Relaxed) & (1 << (i & 63)) != 0
    }

    /// Whether any deque or the injector looks non-empty.
    fn any_work(&self) -> bool {
        !self.injector.is_empty() || self.stealers.iter().any(|s| !s.is_empty())
    }
}

/// A worker's visitor: what `Trace` code sees on a marking thread.
pub(crate) struct ParMarker<'a> {
    shared: &'a Shared<'a>,
    /// The worker's shared deque: batches it gives away, and what it stole.
    local: Worker<u64>,
    /// The worker's private FIFO: where `visit` pushes, with no atomics
    /// (a pop from the shared deque costs a full fence, which would also
    /// wait for the pipeline's loads in flight).
    queue: VecDeque<u64>,
    marked: usize,
}

/// A small FIFO of handles whose table items are being loaded.
struct Handles {
    slots: [u64; RING],
    head: usize,
    len: usize,
}

impl Handles {
    #[inline(always)]
    fn push(&mut self, bits: u64) {
        debug_assert!(self.len < RING);
        self.slots[(self.head + self.len) % RING] = bits;
        self.len += 1;
    }

    #[inline(always)]
    fn pop(&mut self) -> Option<u64> {
        if self.len == 0 {
            return None;
        }
        let bits = self.slots[self.head];
        self.head = (self.head + 1) % RING;
        self.len -= 1;
        Some(bits)
    }
}

/// Marks everything reachable from `queue` (emptied) on `threads` workers,
/// the calling thread being one of them. Returns the objects marked.
///
/// # Panics
/// Resumes the first panic raised by `Trace` code on any worker, after all
/// of them have stopped.
pub(crate) fn drain(
    chunks: &Chunks,
    bits: &mut [u64],
    queue: &mut VecDeque<u64>,
    high_water: u32,
    inners: Option<&Inners>,
    threads: usize,
) -> usize {
    let threads = threads.max(1);
    // SAFETY: `AtomicU64` has the size and alignment of `u64` (asserted
    // above), and the exclusive borrow of `bits` outlives every use of the view.
    let atomic: &[AtomicU64] = unsafe { &*(bits as *mut [u64] as *const [AtomicU64]) };
    let injector = Injector::new();
    for b in queue.drain(..) {
        injector.push(b);
    }
    let workers: Vec<Worker<u64>> = (0..threads).map(|_| Worker::new_lifo()).collect();
    let shared = Shared {
        chunks,
        bits: atomic,
        high_water,
        inners,
        injector,
        stealers: workers.iter().map(Worker::stealer).collect(),
        idle: AtomicUsize::new(0),
        running: AtomicUsize::new(threads),
        abort: AtomicBool::new(false),
    };
    let results = std::thread::scope(|s| {
        let mut workers = workers.into_iter().enumerate();
        let (_, first) = workers.next().expect("at least one worker");
        let shared = &shared;
        let handles: Vec<_> = workers
            .filter_map(|(me, w)| {
                let spawned = std::thread::Builder::new()
                    .name(format!("coreobject-mark-{me}"))
                    .spawn_scoped(s, move || work(shared, w, me));
                if spawned.is_err() {
                    // Its deque is empty and stays so: the others need not wait for it.
                    shared.running.fetch_sub(1, Ordering::SeqCst);
                }
                spawned.ok()
            })
            .collect();
        let mut out = vec![work(shared, first, 0)];
        out.extend(handles.into_iter().map(|h| h.join().unwrap_or_else(Err)));
        out
    });
    let mut total = 0;
    let mut panic = None;
    for r in results {
        match r {
            Ok(n) => total += n,
            Err(p) => {
                panic.get_or_insert(p);
            }
        }
    }
    if let Some(p) = panic {
        resume_unwind(p);
    }
    total
}

/// One worker, from start to termination; a panic is caught and returned.
fn work(shared: &Shared<'_>, local: Worker<u64>, me: usize) -> std::thread::Result<usize> {
    catch_unwind(AssertUnwindSafe(|| {
        let mut m = ParMarker {
            shared,
            local,
            queue: VecDeque::new(),
            marked: 0,
        };
        if shared.inners.is_some() {
            m.run::<Keyed>(me);
        } else {
            m.run::<Bare>(me);
        }
        m.marked
    }))
    .inspect_err(|_| shared.abort.store(true, Ordering::SeqCst))
}

impl ParMarker<'_> {
    /// Runs the pipeline over the local deque, then steals, until
    /// termination or abort.
    fn run<C: Carry>(&mut self, me: usize) {
        let mut h = Handles {
            slots: [0; RING],
            head: 0,
            len: 0,
        };
        let (mut a, mut b) = (Ring::<C>::new(), Ring::<C>::new());
        let mut until_poll = POLL_EVERY;
        loop {
            loop {
                until_poll -= 1;
                if until_poll == 0 {
                    until_poll = POLL_EVERY;
                    if self.shared.abort.load(Ordering::Relaxed) {
                        return;
                    }
                    self.share();
                }
                // Stage 1: popped handles wait for their table item.
                while h.len < RING {
                    let Some(bits) = self.queue.pop_front().or_else(|| self.local.pop()) else {
                        break;
                    };
                    if let Some(item) = self.shared.chunks.get(bits as u32) {
                        prefetch_line(item as *const _);
                    }
                    h.push(bits);
                }
                // Stage 2: validate and claim the oldest; its allocation loads.
                if let Some(bits) = h.pop() {
                    if let Some(p) = self.grey::<C>(bits) {
                        if a.is_full() {
                            let q = a.pop().expect("a full ring has an oldest entry");
                            self.stage_b::<C>(&mut b, q);
                        }
                        a.push(p);
                    }
                    continue;
                }
                // Stage 3: what `trace` reads loads; then the object is scanned.
                if let Some(q) = a.pop() {
                    self.stage_b::<C>(&mut b, q);
                } else if let Some(q) = b.pop() {
                    let (p, key) = C::unpack(q);
                    self.scan(p, key);
                } else {
                    break;
                }
            }
            if !self.find_work(me) {
                return;
            }
        }
    }

    /// When another worker is hungry and this one's shared deque is empty,
    /// moves the older half of the private queue there, for stealing.
    #[inline(always)]
    fn share(&mut self) {
        if self.queue.len() >= 2
            && self.shared.idle.load(Ordering::Relaxed) > 0
            && self.local.is_empty()
        {
            let half = self.queue.len() / 2;
            for bits in self.queue.drain(..half) {
                self.local.push(bits);
            }
        }
    }

    /// Moves `q` into ring B, scanning B's oldest to make room.
    #[inline(always)]
    fn stage_b<C: Carry>(&mut self, b: &mut Ring<C>, q: C::Slot) {
        if b.is_full() {
            let (p, key) = C::unpack(b.pop().expect("a full ring has an oldest entry"));
            self.scan(p, key);
        }
        let (p, _) = C::unpack(q);
        // SAFETY: `p` was validated live when claimed, and the collection holds
        // `&mut Heap`, so nothing frees or mutates it during the drain.
        let h = unsafe { p.as_ref() };
        if h.class.needs_trace() {
            // SAFETY: the vtable belongs to the header's own class.
            unsafe { (h.class.vt.prefetch)(p) }
        }
        b.push(q);
    }

    /// Validates a popped handle and claims its mark bit; the object to scan
    /// if this worker claimed it.
    #[inline(always)]
    fn grey<C: Carry>(&mut self, bits: u64) -> Option<C::Slot> {
        let sh = self.shared;
        let (i, serial) = (bits as u32, (bits >> 32) as u32);
        if i >= sh.high_water || sh.is_marked(i) {
            return None;
        }
        let item = sh.chunks.at(i);
        let f = item.flags();
        if item.serial() != serial || f & (flags::DEAD | flags::DISREGARD) != 0 {
            return None;
        }
        let p = item.object()?;
        let bit = 1u64 << (i & 63);
        if sh.bits[(i >> 6) as usize].fetch_or(bit, Ordering::Relaxed) & bit != 0 {
            return None;
        }
        self.marked += 1;
        prefetch_line(p.as_ptr());
        Some(C::pack(p, bits, f))
    }

    /// Traces one object's references (see `Marker::scan`).
    #[inline(always)]
    fn scan(&mut self, p: NonNull<Header>, key: u64) {
        // SAFETY: `p` was validated live when claimed, and the collection holds
        // `&mut Heap`, so nothing frees or mutates it; objects are `Sync`.
        let h = unsafe { p.as_ref() };
        if h.class.needs_trace() {
            // SAFETY: the vtable belongs to the header's own class.
            unsafe { (h.class.vt.trace_par)(p, self) }
        }
        if let Some(o) = h.outer {
            self.visit(o);
        }
        if key != 0 {
            if let Some(inners) = self.shared.inners {
                for &h in inners.of(key) {
                    self.visit(h);
                }
            }
        }
    }

    /// Steals a batch into the local deque: from the injector, then from
    /// the other workers. Whether anything was stolen.
    fn steal(&mut self, me: usize) -> bool {
        let sh = self.shared;
        let n = sh.stealers.len();
        loop {
            let mut retry = false;
            match sh.injector.steal_batch_and_pop(&self.local) {
                Steal::Success(bits) => {
                    self.local.push(bits);
                    return true;
                }
                Steal::Retry => retry = true,
                Steal::Empty => {}
            }
            for k in 1..n {
                match sh.stealers[(me + k) % n].steal_batch_and_pop(&self.local) {
                    Steal::Success(bits) => {
                        self.local.push(bits);
                        return true;
                    }
                    Steal::Retry => retry = true,
                    Steal::Empty => {}
                }
            }
            if !retry {
                return false;
            }
        }
    }

    /// Called with the private queue, the local deque and the rings empty: steals, or waits
    /// idle until work shows up (`true`) or every worker is idle (`false`).
    fn find_work(&mut self, me: usize) -> bool {
        if self.steal(me) {
            return true;
        }
        let sh = self.shared;
        sh.idle.fetch_add(1, Ordering::SeqCst);
        let backoff = Backoff::new();
        loop {
            if sh.abort.load(Ordering::Relaxed) {
                return false;
            }
            if sh.idle.load(Ordering::SeqCst) >= sh.running.load(Ordering::SeqCst) {
                return false;
            }
            if sh.any_work() {
                sh.idle.fetch_sub(1, Ordering::SeqCst);
                if self.steal(me) {
                    return true;
                }
                sh.idle.fetch_add(1, Ordering::SeqCst);
            }
            if backoff.is_completed() {
                std::thread::yield_now();
            } else {
                backoff.snooze();
            }
        }
    }
}

impl Visitor for ParMarker<'_> {
    #[inline(always)]
    fn visit(&mut self, obj: AnyObj) {
        let i = obj.index();
        if i >= self.shared.high_water || self.shared.is_marked(i) {
            return;
        }
        self.queue.push_back(obj.to_bits());
    }
}

//! Parallel marking: the drain of the mark phase, on several threads.
//!
//! With [`GcConfig::threads`](crate::GcConfig::threads) above 1 and at least
//! [`GcConfig::parallel_threshold`](crate::GcConfig::parallel_threshold)
//! objects alive when the cycle started, every drain of the work queue runs
//! here instead of on [`Marker`](super::Marker): the whole of a
//! stop-the-world collection's, and in an incremental cycle each slice's,
//! under the slice's budget, which then bounds the slice's wall time.
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
//!   not garbage, not in the pool), then claimed with a plain (`Relaxed`)
//!   load of its bitmap word and, if its bit is clear, a plain store of the
//!   word with the bit added: no locked instruction, no extra memory. The
//!   worker appends the slot to a private claim list and scans the object.
//!   Two workers can race: both find the bit clear and both scan the object
//!   (harmless: its children are visited twice), or one's store overwrites
//!   a bit the other set in the same word since it loaded it (that object
//!   may then be claimed and scanned again, which needs another race). Bits
//!   set before the drain are never lost, since every store writes back a
//!   word loaded during it. After the workers join, the collecting thread
//!   sets the bit of every listed slot (restoring lost ones), so the bitmap
//!   ends up exactly the set claimed, before the single marker, the write
//!   barrier or the purge read it; the count of marked objects is exact:
//!   the bitmap's popcount growth for unbudgeted drains, and for budgeted
//!   slices (whose claims the budget bounds) a clear-then-set pass over the
//!   lists that counts each slot once ([`settle`]). The lists cost 4 bytes
//!   per object claimed, only during the drain. Marking computes the
//!   reachable set, which does not depend on the order, so the marked set,
//!   and with it what the purge frees, is the same for every thread count.
//! * **Pipeline.** Each worker runs a smaller version of the single marker's
//!   prefetch pipeline: popped handles wait in a ring while their table item
//!   loads, validated objects wait while their allocation loads, and objects
//!   wait again while the buffers their `trace` reads load.
//! * **Termination** ([`Termination`]). Workers join the drain when their
//!   thread gets to it (the collecting thread first, at once; pool threads
//!   when they wake). A worker whose deque and rings are empty and that
//!   finds nothing to steal counts itself idle. While idle it looks for
//!   visible work (injector or any deque not empty); if it sees some, it
//!   un-counts itself and tries to steal. Work is only ever added to a deque
//!   or a private queue by its owner while the owner is busy (not counted
//!   idle), the injector is never refilled, and a worker joins holding
//!   nothing, so when every joined worker is counted idle no work exists
//!   anywhere and none can appear: every worker then leaves. A worker that
//!   joins after that finds nothing and leaves too.
//! * **Budget.** In a budgeted slice the workers count the handles they pop
//!   (the single marker's unit) into a shared total and read the clock
//!   every few dozen steps; the first to find the budget spent raises the
//!   stop flag. A stopped worker claims nothing more, scans every object it
//!   has claimed (its bit is set, so it must be scanned before the slice
//!   ends), and hands back the handles it holds unclaimed; they, and what
//!   is left in the injector, go back to the collector's queue for the next
//!   slice. The overrun is at most a poll interval of pops per worker plus
//!   its rings' scans.
//! * **Panics.** A panic in user `Trace` code is caught on the worker, which
//!   raises an abort flag that the others poll; after the scope has joined
//!   them all, the first panic is resumed on the collector's thread, which
//!   abandons the cycle as it does for a single-threaded panic.
//!
//! **Threads.** The collecting thread is worker 0; the others are the
//! threads of a [`rayon::ThreadPool`] the collector builds on its first
//! parallel drain and keeps (rebuilt if `threads` changes), entered with
//! [`in_place_scope`](rayon::ThreadPool::in_place_scope) so that workers
//! borrow the bitmap and the table with no lifetime erasure. Against the
//! alternatives: scoped threads started per drain (what this module did
//! first) cost a thread start and join per drain, 50-100 µs for one extra
//! thread here, paid by every slice of an incremental cycle; a pool of our
//! own would need its own parking, wake-up and panic plumbing, which rayon
//! has, well tested. Rayon's own work stealing (`join`/`scope` per object)
//! is not used for the marking itself: a task per object costs more than
//! scanning one, and the drain needs a termination test rayon has no hook
//! for; so the crossbeam-deque queues stay, and rayon only runs one
//! long-lived job per worker.

//!
//! **What limits it.** With `fetch_or` claims (world 1M on a 2-core KVM
//! guest), 37-50% of a worker's samples sat on the `lock bts` and the
//! instruction after it: a locked read-modify-write waits for the loads and
//! stores before it, so it drained the prefetch pipeline at every claim.
//! With the plain-store claim the store has no samples of its own; in a
//! `perf record` (cpu-clock) of the 2-thread world at 1M, a worker's
//! samples in its loop sit on the table item's serial load and compare
//! (~28%, the item's prefetch arrived late) and right after the prefetches
//! of the table item (~24%) and of the object (~20%), which stall when the
//! core's outstanding misses are at their limit: marking is now bound by
//! memory, as the single marker is. Stealing and termination stay under 1%.
//! Setting the listed bits after the drain is serial on the collecting
//! thread: 2-3.5 ms for 1.8M claims (world 2M), 2-4% of the mark. Medians over
//! 13 interleaved invocations each (3 reps; load 0.8-1.2, some 2M runs up
//! to 1.8), `fetch_or` → plain store: 1M, 1 thread 72 ms / 77 ms (same
//! code), 2 threads 59 ms → 51 ms; 2M, 1 thread 170 / 160 ms, 2 threads
//! 137 ms → 111 ms. The machine is shared and single batches vary by ±30%:
//! the last same-session batch alone had 1M 2 threads 47 → 57 ms and 2M
//! 107 → 98 ms. A claim byte per slot (no lost updates, at 1 byte per
//! object) was tried first and was slower: `visit`'s check of the byte
//! missed the cache (a 1-2 MB array both workers write) on 77% of its
//! samples. Giving each worker its own index ranges, so that workers stop
//! sharing table and bitmap lines, is the next step.

use std::collections::VecDeque;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use crossbeam_deque::{Injector, Steal, Stealer, Worker};
use crossbeam_utils::Backoff;
use parking_lot::Mutex;

use super::budget::Budget;
use super::mark::{admit, below, cluster_step, Bare, Carry, ClusterStep, Keyed, Ring, RING};
use crate::array::Chunks;
use crate::cluster::Clusters;
use crate::handle::AnyObj;
use crate::inners::Inners;
use crate::object::Header;
use crate::trace::{prefetch_line, Visitor};

// The bitmap is a `[u64]` viewed as `[AtomicU64]` during the drain.
const _: () = assert!(
    std::mem::size_of::<AtomicU64>() == std::mem::size_of::<u64>()
        && std::mem::align_of::<AtomicU64>() == std::mem::align_of::<u64>()
);

/// Pipeline steps between two looks at the stop flag, the budget and
/// whether another worker is hungry.
const POLL_EVERY: usize = 64;

/// The termination protocol of a parallel drain: which workers have joined,
/// which are idle, and whether the drain was told to stop.
///
/// A worker calls [`join`](Self::join) before it looks for work, and
/// [`find_work`](Self::find_work) whenever it holds none. The protocol
/// relies on three rules the caller keeps: a worker joins holding no work;
/// work is only added (to a worker's own queues) by a worker that is not
/// counted idle; and the shared source the drain was seeded with is never
/// refilled. Then, once every joined worker is counted idle, no work exists
/// anywhere, and `find_work` returns `false` to all of them.
///
/// Under `cfg(loom)` its atomics are loom's, and `tests/loom.rs` checks the
/// protocol with stand-in deques.
#[derive(Debug)]
pub struct Termination {
    /// Workers counted idle.
    idle: crate::sync::AtomicUsize,
    /// Workers that have joined.
    joined: crate::sync::AtomicUsize,
    /// Everyone stops (a spent budget, or a panic).
    stop: crate::sync::AtomicBool,
}

impl Default for Termination {
    fn default() -> Self {
        Termination::new()
    }
}

impl Termination {
    /// A protocol no worker has joined yet.
    pub fn new() -> Self {
        Termination {
            idle: crate::sync::AtomicUsize::new(0),
            joined: crate::sync::AtomicUsize::new(0),
            stop: crate::sync::AtomicBool::new(false),
        }
    }

    /// A worker takes part from now on; it must hold no work yet.
    pub fn join(&self) {
        self.joined.fetch_add(1, Ordering::SeqCst);
    }

    /// Tells every worker to stop looking for work.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Whether [`stop`](Self::stop) was called.
    pub fn is_stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Whether some worker is counted idle (hungry for work to steal).
    pub fn any_idle(&self) -> bool {
        self.idle.load(Ordering::Relaxed) > 0
    }

    /// Called by a joined worker holding no work: `steal` tries to take some
    /// (returning whether it did), `visible` tells whether any is in sight
    /// (a hint: it may be gone by the time `steal` looks), and `pause` waits
    /// a little between looks. Returns `true` once `steal` succeeded,
    /// `false` when every joined worker is idle or the drain was stopped.
    pub fn find_work(
        &self,
        mut steal: impl FnMut() -> bool,
        visible: impl Fn() -> bool,
        mut pause: impl FnMut(),
    ) -> bool {
        if self.is_stopped() {
            return false;
        }
        if steal() {
            return true;
        }
        self.idle.fetch_add(1, Ordering::SeqCst);
        loop {
            if self.is_stopped() {
                return false;
            }
            // Idle first: `joined` only grows, so reading it second can only
            // make the test stricter.
            if self.idle.load(Ordering::SeqCst) >= self.joined.load(Ordering::SeqCst) {
                return false;
            }
            if visible() {
                self.idle.fetch_sub(1, Ordering::SeqCst);
                if steal() {
                    return true;
                }
                self.idle.fetch_add(1, Ordering::SeqCst);
            }
            pause();
        }
    }
}

/// How much a parallel drain may do.
struct Allowance {
    /// Handles the workers may pop in all; `usize::MAX`: no limit.
    limit: usize,
    deadline: Option<Instant>,
    /// Pops counted so far (only kept when limited).
    spent: AtomicUsize,
    /// Pipeline steps between two polls.
    poll_every: usize,
}

impl Allowance {
    fn is_unlimited(&self) -> bool {
        self.limit == usize::MAX && self.deadline.is_none()
    }
}

/// What one worker claimed: slots one by one, and bits a word at a time.
type Claims = (Vec<u32>, Vec<(u32, u64)>);

/// Everything the workers share.
pub(crate) struct Shared<'a> {
    chunks: &'a Chunks,
    bits: &'a [AtomicU64],
    high_water: u32,
    inners: Option<&'a Inners>,
    clusters: Option<&'a Clusters>,
    injector: Injector<u64>,
    stealers: Vec<Stealer<u64>>,
    term: Termination,
    allowance: Allowance,
    /// A worker panicked: everyone stops, and nothing is flushed.
    abort: AtomicBool,
    /// Unclaimed handles stopped workers hand back.
    leftovers: Mutex<Vec<u64>>,
    /// Per worker: the slots it claimed, or the panic that stopped it.
    results: Mutex<Vec<std::thread::Result<Claims>>>,
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
    /// The slots this worker claimed. A slot can be in two workers' lists
    /// (see [`grey`](Self::grey)).
    claimed: Vec<u32>,
    /// The bits this worker claimed a word at a time (GC clusters' members),
    /// as `(word, bits)`.
    claimed_words: Vec<(u32, u64)>,
    /// Handles popped since the last poll (budgeted drains only).
    pops: usize,
    /// This worker's index among the stealers.
    me: usize,
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

/// The workers a parallel drain runs on besides the collecting thread.
pub(crate) struct Pool {
    pool: rayon::ThreadPool,
}

impl Pool {
    /// A pool for drains on `threads` workers (`threads - 1` threads), or
    /// `None` if the threads could not be started.
    pub(crate) fn new(threads: usize) -> Option<Pool> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads.max(2) - 1)
            .thread_name(|i| format!("coreobject-mark-{}", i + 1))
            .build()
            .ok()?;
        Some(Pool { pool })
    }

    /// The workers a drain on this pool runs on, the collecting thread
    /// included.
    pub(crate) fn threads(&self) -> usize {
        self.pool.current_num_threads() + 1
    }

    /// Runs `f` on every item, the first on the calling thread and the
    /// others on the pool's threads, and returns once all are done. `f`
    /// must not panic (rayon would resume it here, after the others).
    pub(crate) fn run_each<T: Send>(&self, items: Vec<T>, f: impl Fn(T) + Sync) {
        let mut items = items.into_iter();
        let first = items.next();
        let f = &f;
        self.pool.in_place_scope(|s| {
            for item in items {
                s.spawn(move |_| f(item));
            }
            if let Some(item) = first {
                f(item);
            }
        });
    }
}

/// Marks what is reachable from `queue` on the pool's threads and the
/// calling thread, within `budget`. Returns the objects marked (slots whose
/// bit was clear when the drain started and is set now), and whether
/// the queue ran dry (`false`: the budget stopped the drain, and the
/// unclaimed handles are back in `queue`; every object marked has been
/// scanned either way).
///
/// # Panics
/// Resumes the first panic raised by `Trace` code on any worker, after all
/// of them have stopped.
// The marker's state, passed apart so that each borrow is as narrow as it can be.
#[allow(clippy::too_many_arguments)]
pub(crate) fn drain(
    chunks: &Chunks,
    bits: &mut [u64],
    queue: &mut VecDeque<u64>,
    high_water: u32,
    inners: Option<&Inners>,
    clusters: Option<&Clusters>,
    pool: &Pool,
    budget: &mut Budget,
) -> (usize, bool) {
    if budget.is_spent() {
        return (0, false);
    }
    let threads = pool.threads();
    // SAFETY: `AtomicU64` has the size and alignment of `u64` (asserted
    // above), and the exclusive borrow of `bits` outlives every use of the view.
    let atomic: &[AtomicU64] = unsafe { &*(bits as *mut [u64] as *const [AtomicU64]) };
    let injector = Injector::new();
    for b in queue.drain(..) {
        injector.push(b);
    }
    let workers: Vec<Worker<u64>> = (0..threads).map(|_| Worker::new_lifo()).collect();
    let limit = budget.work_left();
    let before = (limit == usize::MAX && budget.deadline().is_none()).then(|| popcount(atomic));
    let allowance = Allowance {
        limit,
        deadline: budget.deadline(),
        spent: AtomicUsize::new(0),
        // Small allowances are polled more often, so that the overrun stays
        // in proportion.
        poll_every: (limit / (threads * 4)).clamp(1, POLL_EVERY),
    };
    let shared = Shared {
        chunks,
        bits: atomic,
        high_water,
        inners,
        clusters,
        injector,
        stealers: workers.iter().map(Worker::stealer).collect(),
        term: Termination::new(),
        allowance,
        abort: AtomicBool::new(false),
        leftovers: Mutex::new(Vec::new()),
        results: Mutex::new(Vec::with_capacity(threads)),
    };
    let shared = &shared;
    pool.pool.in_place_scope(|s| {
        let mut workers = workers.into_iter();
        let first = workers.next().expect("at least one worker");
        // The collecting thread joins first, so that the drain never waits
        // for a pool thread to wake before it can end.
        shared.term.join();
        for (me, w) in workers.enumerate() {
            s.spawn(move |_| {
                shared.term.join();
                work(shared, w, me + 1);
            });
        }
        work(shared, first, 0);
    });
    let mut lists = Vec::with_capacity(threads);
    let mut panic = None;
    for r in std::mem::take(&mut *shared.results.lock()) {
        match r {
            Ok(list) => lists.push(list),
            Err(p) => {
                panic.get_or_insert(p);
            }
        }
    }
    if let Some(p) = panic {
        resume_unwind(p);
    }
    let stopped = shared.term.is_stopped();
    if stopped {
        queue.extend(std::mem::take(&mut *shared.leftovers.lock()));
        loop {
            match shared.injector.steal() {
                Steal::Success(b) => queue.push_back(b),
                Steal::Retry => {}
                Steal::Empty => break,
            }
        }
        budget.note(shared.allowance.spent.load(Ordering::Relaxed));
        budget.exhaust();
    } else if !shared.allowance.is_unlimited() {
        budget.spend(shared.allowance.spent.load(Ordering::Relaxed));
    }
    let marked = settle(atomic, &lists, before);
    if shared.allowance.is_unlimited() {
        budget.note(marked);
    }
    (marked, !stopped)
}

/// The number of bits set in `bits` (read with plain loads: no worker runs).
fn popcount(bits: &[AtomicU64]) -> usize {
    bits.iter()
        .map(|w| w.load(Ordering::Relaxed).count_ones() as usize)
        .sum()
}

/// After a drain whose workers have all joined: sets the bit of every slot
/// in `lists` (a claim lost to a racing store, see [`ParMarker::grey`], is
/// restored here) and returns how many distinct slots they hold, which is
/// the number of objects the drain marked.
///
/// With `before`, the bitmap's popcount when the drain started (taken for
/// unbudgeted drains, which usually mark much of the heap), the count is the
/// popcount's growth. Without it (budgeted slices, whose claims are bounded
/// by the budget while the bitmap may be large), the listed bits are first
/// cleared: every slot claimed was clear when the drain started, and no
/// store during the drain cleared a bit that was set then (each stored a
/// word it had loaded during the drain, with a bit added), so this gives
/// back the bitmap as it was at the start, and setting them again counts
/// each slot once.
fn settle(bits: &[AtomicU64], lists: &[Claims], before: Option<usize>) -> usize {
    // Single-threaded now: plain loads and stores. Every claim, as the
    // bits it sets in one word.
    let claims = || {
        let slots = lists.iter().flat_map(|l| &l.0);
        let slots = slots.map(|&i| (i >> 6, 1u64 << (i & 63)));
        slots.chain(lists.iter().flat_map(|l| l.1.iter().copied()))
    };
    // Sets the bits; how many were clear.
    let set = |(w, m): (u32, u64)| {
        let w = &bits[w as usize];
        let old = w.load(Ordering::Relaxed);
        w.store(old | m, Ordering::Relaxed);
        (m & !old).count_ones() as usize
    };
    match before {
        Some(before) => {
            claims().for_each(|c| {
                set(c);
            });
            popcount(bits) - before
        }
        None => {
            for (w, m) in claims() {
                let w = &bits[w as usize];
                w.store(w.load(Ordering::Relaxed) & !m, Ordering::Relaxed);
            }
            claims().map(set).sum()
        }
    }
}

/// One worker, from start to termination; a panic is caught and recorded.
fn work(shared: &Shared<'_>, local: Worker<u64>, me: usize) {
    let r = catch_unwind(AssertUnwindSafe(|| {
        let mut m = ParMarker {
            shared,
            local,
            queue: VecDeque::new(),
            claimed: Vec::new(),
            claimed_words: Vec::new(),
            pops: 0,
            me,
        };
        if shared.inners.is_some() {
            m.run::<Keyed>();
        } else {
            m.run::<Bare>();
        }
        (m.claimed, m.claimed_words)
    }));
    if r.is_err() {
        shared.abort.store(true, Ordering::SeqCst);
        shared.term.stop();
    }
    shared.results.lock().push(r);
}

impl ParMarker<'_> {
    /// Runs the pipeline over the local queues, then steals, until
    /// termination, a spent budget or an abort.
    fn run<C: Carry>(&mut self) {
        let mut h = Handles {
            slots: [0; RING],
            head: 0,
            len: 0,
        };
        let (mut a, mut b) = (Ring::<C>::new(), Ring::<C>::new());
        let poll_every = self.shared.allowance.poll_every;
        let mut until_poll = poll_every;
        'drain: loop {
            loop {
                until_poll -= 1;
                if until_poll == 0 {
                    until_poll = poll_every;
                    if self.poll() {
                        break 'drain;
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
                    self.pops += 1;
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
            if !self.find_work() {
                break;
            }
        }
        if self.shared.abort.load(Ordering::Relaxed) {
            return;
        }
        // Stopped (or terminated, and then all of this is empty): scan what
        // this worker claimed, hand back what it did not.
        while let Some(q) = b.pop() {
            let (p, key) = C::unpack(q);
            self.scan(p, key);
        }
        while let Some(q) = a.pop() {
            let (p, key) = C::unpack(q);
            self.scan(p, key);
        }
        let mut back: Vec<u64> = Vec::new();
        while let Some(bits) = h.pop() {
            back.push(bits);
        }
        back.extend(self.queue.drain(..));
        while let Some(bits) = self.local.pop() {
            back.push(bits);
        }
        if !back.is_empty() {
            self.shared.leftovers.lock().append(&mut back);
        }
    }

    /// Looks at the abort and stop flags and, in a budgeted drain, counts
    /// this worker's pops and reads the clock. Whether to stop.
    fn poll(&mut self) -> bool {
        let sh = self.shared;
        if sh.abort.load(Ordering::Relaxed) || sh.term.is_stopped() {
            return true;
        }
        let al = &sh.allowance;
        if al.is_unlimited() {
            return false;
        }
        let pops = std::mem::take(&mut self.pops);
        let spent = al.spent.fetch_add(pops, Ordering::Relaxed) + pops;
        if spent >= al.limit || al.deadline.is_some_and(|d| Instant::now() >= d) {
            sh.term.stop();
            return true;
        }
        false
    }

    /// When another worker is hungry and this one's shared deque is empty,
    /// moves the older half of the private queue there, for stealing.
    #[inline(always)]
    fn share(&mut self) {
        if self.queue.len() >= 2 && self.shared.term.any_idle() && self.local.is_empty() {
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
        if h.class().needs_trace() {
            // SAFETY: the vtable belongs to the header's own class.
            unsafe { (h.class().vt.prefetch)(p) }
        }
        b.push(q);
    }

    /// Validates a popped handle and claims its mark bit; the object to scan
    /// if this worker claimed it.
    ///
    /// The claim is a plain load and store of the bitmap word, not a locked
    /// read-modify-write (see the module doc). Two workers can both find the
    /// bit clear and both claim the object: it is scanned twice, which
    /// marks nothing wrong. And a store can overwrite a bit another worker
    /// set in the same word since this one loaded it: that object may then
    /// be claimed and scanned again. Each claim goes on the worker's list,
    /// from which [`settle`] restores lost bits and counts each slot once.
    #[inline(always)]
    fn grey<C: Carry>(&mut self, bits: u64) -> Option<C::Slot> {
        let sh = self.shared;
        let (i, serial) = (bits as u32, (bits >> 32) as u32);
        if i >= sh.high_water || sh.is_marked(i) {
            return None;
        }
        let item = sh.chunks.at(i);
        let (p, f) = admit(item, serial)?;
        let (w, bit) = (&sh.bits[(i >> 6) as usize], 1u64 << (i & 63));
        let old = w.load(Ordering::Relaxed);
        if old & bit != 0 {
            return None;
        }
        w.store(old | bit, Ordering::Relaxed);
        self.claimed.push(i);
        match cluster_step(sh.clusters, i, item.cluster_root(), sh.inners.is_some()) {
            Some(ClusterStep::Whole { words, external }) => {
                for &(w, m) in words {
                    let m = m & below(w, sh.high_water);
                    if m == 0 {
                        continue;
                    }
                    // Claimed like any object, so that `settle` restores
                    // the bits if a racing store loses them.
                    let new = m & !sh.bits[w as usize].fetch_or(m, Ordering::Relaxed);
                    if new != 0 {
                        self.claimed_words.push((w, new));
                    }
                }
                for &e in external {
                    self.visit(e);
                }
                return None;
            }
            Some(ClusterStep::Trace(members)) => {
                for &m in members {
                    self.visit(m);
                }
            }
            None => {}
        }
        prefetch_line(p.as_ptr());
        Some(C::pack(p, bits, f))
    }

    /// Traces one object's references (see `Marker::scan`).
    #[inline(always)]
    fn scan(&mut self, p: NonNull<Header>, key: u64) {
        // SAFETY: `p` was validated live when claimed, and the collection holds
        // `&mut Heap`, so nothing frees or mutates it; objects are `Sync`.
        let h = unsafe { p.as_ref() };
        if h.class().needs_trace() {
            // SAFETY: the vtable belongs to the header's own class.
            unsafe { (h.class().vt.trace_par)(p, self) }
        }
        // SAFETY: as above; `p` is the item's pointer, with its slot's provenance.
        if let Some(o) = unsafe { Header::outer(p) } {
            self.visit(o);
        }
        if key != 0 {
            if let Some(inners) = self.shared.inners {
                for &h in inners.of(key) {
                    if !super::mark::filed_elsewhere(self.shared.chunks, h, key) {
                        self.visit(h);
                    }
                }
            }
        }
    }

    /// Steals a batch into the local deque: from the injector, then from
    /// the other workers. Whether anything was stolen.
    fn steal(local: &Worker<u64>, sh: &Shared<'_>, me: usize) -> bool {
        let n = sh.stealers.len();
        loop {
            let mut retry = false;
            match sh.injector.steal_batch_and_pop(local) {
                Steal::Success(bits) => {
                    local.push(bits);
                    return true;
                }
                Steal::Retry => retry = true,
                Steal::Empty => {}
            }
            for k in 1..n {
                match sh.stealers[(me + k) % n].steal_batch_and_pop(local) {
                    Steal::Success(bits) => {
                        local.push(bits);
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

    /// Called with the private queue, the local deque and the rings empty:
    /// steals, or waits idle until work shows up (`true`) or the drain ends
    /// (`false`).
    fn find_work(&mut self) -> bool {
        let sh = self.shared;
        let (local, me) = (&self.local, self.me);
        let backoff = Backoff::new();
        sh.term.find_work(
            || Self::steal(local, sh, me),
            || sh.any_work(),
            || {
                if backoff.is_completed() {
                    std::thread::yield_now();
                } else {
                    backoff.snooze();
                }
            },
        )
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

//! A compact tour of every unsafe path, sized for miri.
//!
//! CI runs it under miri, with the library's unit tests and the other test
//! targets at miri sizes:
//! `MIRIFLAGS="-Zmiri-strict-provenance" cargo +nightly miri test -p coreobject --lib --tests`.
//! It exercises: creation, `get`/`get_mut`/indexing of objects that own heap
//! memory; freeing and slot reuse; table growth past one chunk (chunks hold
//! 256 items under miri); strong handles dropped on other threads, also after
//! the heap is gone; collections with lifecycle hooks that read other dying
//! objects, a pending `finish_destroy`, and panics in hooks and `Drop`; the
//! disregard-for-GC pool; concurrent creation from two threads; iteration;
//! and dropping a heap that still holds objects (miri's leak check then
//! proves every object was dropped). Every test also asserts its outcome, so
//! it is a normal test outside miri too.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

use coreobject::CHUNK_SIZE;
use coreobject::{
    DestroyCx, Heap, HeapConfig, Lifecycle, Obj, Object, ObjectEvent, StrongObj, Weak,
};

/// A cap of four chunks: the chunk directory is sized for the cap, and under
/// miri (256-item chunks) the default cap's 8,448-entry directory costs
/// seconds per heap to build and drop.
fn small() -> HeapConfig {
    HeapConfig {
        max_objects: 4 * CHUNK_SIZE,
        ..HeapConfig::DEFAULT
    }
}

fn heap() -> Heap {
    Heap::with_config(small()).unwrap()
}

#[derive(Object, Default)]
struct Blob {
    name: String,
    data: Vec<u64>,
    next: Option<Obj<Blob>>,
    peer: Option<Weak<Blob>>,
}

fn blob(n: u64) -> Blob {
    Blob {
        name: format!("blob{n}"),
        data: vec![n; (n % 5) as usize],
        next: None,
        peer: None,
    }
}

/// Records its destruction; reads its (also dying) partner in `begin_destroy`;
/// makes the collector wait one poll before `finish_destroy`.
#[derive(Object)]
#[object(lifecycle)]
struct Tracked {
    label: String,
    partner: Option<Obj<Tracked>>,
    polls: u32,
    #[object(skip)]
    log: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Lifecycle for Tracked {
    fn begin_destroy(&mut self, cx: &DestroyCx<'_>) {
        let partner = self
            .partner
            .and_then(|p| cx.get(p))
            .map(|p| p.label.clone());
        // SAFETY: `this` is the Tracked being destroyed.
        let this = unsafe { cx.this().assume::<Tracked>() };
        assert!(cx.get(this).is_none());
        self.log
            .lock()
            .unwrap()
            .push(format!("begin {} partner {partner:?}", self.label));
    }
    fn is_ready_for_finish_destroy(&mut self) -> bool {
        self.polls += 1;
        self.polls > 1
    }
    fn finish_destroy(&mut self, _cx: &DestroyCx<'_>) {
        self.log
            .lock()
            .unwrap()
            .push(format!("finish {}", self.label));
    }
}

static DROPS: AtomicUsize = AtomicUsize::new(0);

/// Counts drops; panics in `Drop` when asked to.
#[derive(Object)]
struct Loud {
    payload: Box<[u8; 16]>,
    panic_on_drop: bool,
}

impl Drop for Loud {
    fn drop(&mut self) {
        DROPS.fetch_add(1, SeqCst);
        assert_eq!(self.payload[3], 3);
        if self.panic_on_drop {
            panic!("drop panic");
        }
    }
}

fn loud(panic_on_drop: bool) -> Loud {
    let mut payload = Box::new([0u8; 16]);
    payload[3] = 3;
    Loud {
        payload,
        panic_on_drop,
    }
}

#[test]
fn create_get_and_mutate() {
    let mut heap = heap();
    let hs: Vec<Obj<Blob>> = (0..40).map(|n| heap.create(blob(n))).collect();
    for (n, h) in hs.iter().enumerate() {
        assert_eq!(heap[*h].name, format!("blob{n}"));
        assert_eq!(heap.get(*h).unwrap().data.len(), n % 5);
    }
    for (n, h) in hs.iter().enumerate() {
        let b = heap.get_mut(*h).unwrap();
        b.data.push(1000 + n as u64);
        b.name.push('!');
        heap[*h].next = Some(hs[(n + 1) % hs.len()]);
    }
    let total: u64 = heap
        .iter_of::<Blob>()
        .map(|(_, b)| b.data.iter().sum::<u64>())
        .sum();
    let want: u64 = (0..40u64).map(|n| n * (n % 5) + 1000 + n).sum();
    assert_eq!(total, want);
    let borrowed: Vec<&Blob> = hs.iter().map(|h| &heap[*h]).collect();
    assert!(borrowed.iter().all(|b| b.name.ends_with('!')));
    heap.add_to_root(hs[0]).unwrap(); // the ring keeps all alive
    assert_eq!(heap.collect().unwrap().freed, 0);
    assert_eq!(heap.len(), 40);
}

#[test]
fn free_reuse_and_growth_past_one_chunk() {
    let mut heap = heap();
    let n = CHUNK_SIZE as u64 + 44;
    let hs: Vec<Obj<Blob>> = (0..n).map(|i| heap.create(blob(i))).collect();
    assert_eq!(heap.table_stats().chunks, 2);
    for h in hs.iter().step_by(2) {
        heap.add_to_root(*h).unwrap();
    }
    let stats = heap.collect().unwrap();
    assert_eq!(stats.freed as u64, n / 2);
    // Refill the freed slots: same indices, new serials, new values.
    let again: Vec<Obj<Blob>> = (0..n / 2).map(|i| heap.create(blob(i + 10_000))).collect();
    assert!(again.iter().all(|h| h.index() % 2 == 1));
    for (i, h) in hs.iter().enumerate() {
        assert_eq!(heap.get(*h).is_some(), i % 2 == 0);
    }
    for (i, h) in again.iter().enumerate() {
        assert_eq!(heap[*h].name, format!("blob{}", i as u64 + 10_000));
    }
    assert_eq!(heap.table_stats().chunks, 2);
    assert_eq!(heap.len() as u64, n);
    let grown = heap.create(blob(7));
    assert_eq!(u64::from(grown.index()), n);
}

#[test]
fn strong_handles_dropped_on_other_threads_and_after_the_heap() {
    let mut heap = heap();
    let a = heap.create(blob(1));
    let b = heap.create(blob(2));
    let sa = heap.strong(a).unwrap();
    let sb = heap.strong(b).unwrap();
    let sb2 = sb.clone();
    assert_eq!(heap.strong_count(b), 2);
    std::thread::spawn(move || drop(sa)).join().unwrap();
    heap.collect().unwrap();
    assert!(heap.get(a).is_none());
    assert_eq!(heap.get(&sb).unwrap().name, "blob2");
    // A strong handle to a garbage object parks its slot until it drops.
    heap.mark_as_garbage(b).unwrap();
    heap.collect().unwrap();
    assert!(heap.get(&sb).is_none());
    let c = heap.create(blob(3));
    assert_ne!(c.index(), b.index());
    drop(sb);
    // The heap goes first; the last strong handle drops on another thread.
    drop(heap);
    std::thread::spawn(move || drop(sb2)).join().unwrap();
}

#[test]
fn collection_runs_lifecycle_hooks_in_order() {
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut heap = heap();
    let deleted = Arc::new(AtomicUsize::new(0));
    let d = deleted.clone();
    heap.on_delete(move |e: &ObjectEvent| {
        assert_eq!(e.class.name(), "Tracked");
        d.fetch_add(1, SeqCst);
    });
    let tracked = |label: &str, partner| Tracked {
        label: label.into(),
        partner,
        polls: 0,
        log: log.clone(),
    };
    let x = heap.create(tracked("x", None));
    let y = heap.create(tracked("y", Some(x)));
    heap[x].partner = Some(y);
    let stats = heap.collect().unwrap();
    assert_eq!((stats.unreachable, stats.freed, stats.pending), (2, 0, 2));
    assert!(heap.get(x).is_none(), "unreachable objects do not resolve");
    assert_eq!(heap.len(), 2);
    let stats = heap.collect().unwrap(); // second poll: ready
    assert_eq!((stats.freed, stats.pending), (2, 0));
    assert_eq!(deleted.load(SeqCst), 2);
    assert_eq!(
        *log.lock().unwrap(),
        [
            "begin x partner Some(\"y\")",
            "begin y partner Some(\"x\")",
            "finish x",
            "finish y"
        ]
    );
    assert!(heap.is_empty());
}

#[test]
fn panics_in_drop_are_contained() {
    let mut heap = heap();
    let before = DROPS.load(SeqCst);
    heap.create(loud(false));
    heap.create(loud(true));
    heap.create(loud(false));
    let p = catch_unwind(AssertUnwindSafe(|| heap.collect())).unwrap_err();
    assert_eq!(p.downcast_ref::<&str>(), Some(&"drop panic"));
    assert!(DROPS.load(SeqCst) - before >= 3);
    assert!(heap.is_empty());
    let again = heap.create(loud(false));
    assert_eq!(heap[again].payload[3], 3);
}

#[test]
fn disregard_pool_objects_survive_and_trace() {
    let mut heap = Heap::with_config(HeapConfig {
        disregard_pool_size: 8,
        ..small()
    })
    .unwrap();
    heap.open_disregard_for_gc().unwrap();
    let asset = heap.create(blob(1));
    heap.close_disregard_for_gc();
    let held = heap.create(blob(2));
    heap[asset].next = Some(held);
    heap.create(blob(3));
    assert_eq!(heap.collect().unwrap().freed, 1);
    assert_eq!(heap[heap[asset].next.unwrap()].name, "blob2");
    assert_eq!(heap.iter_gc_considered().count(), 1);
    heap.disable_disregard_for_gc();
    heap.remove_from_root(asset).unwrap();
    assert_eq!(heap.collect().unwrap().freed, 2);
}

#[test]
fn concurrent_creation_from_two_threads() {
    let mut heap = heap();
    let shared: &Heap = &heap;
    let (a, b) = std::thread::scope(|s| {
        let make = |base: u64| {
            s.spawn(move || {
                (0..60)
                    .map(|i| {
                        let h = shared.create(blob(base + i));
                        if i % 3 == 0 {
                            shared.add_to_root(h).unwrap();
                        }
                        assert_eq!(shared[h].name, format!("blob{}", base + i));
                        h
                    })
                    .collect::<Vec<_>>()
            })
        };
        let (ta, tb) = (make(0), make(1000));
        (ta.join().unwrap(), tb.join().unwrap())
    });
    let mut indices: Vec<u32> = a.iter().chain(&b).map(|h| h.index()).collect();
    indices.sort();
    indices.dedup();
    assert_eq!(indices.len(), 120);
    assert_eq!(heap.len(), 120);
    assert_eq!(heap.collect().unwrap().freed, 80);
    for (i, h) in a.iter().enumerate() {
        assert_eq!(
            heap.get(*h).map(|x| x.name.clone()),
            (i % 3 == 0).then(|| format!("blob{i}"))
        );
    }
    // Both threads again, now taking slots from the free list.
    let shared: &Heap = &heap;
    let again = std::thread::scope(|s| {
        let t = s.spawn(move || (0..40).map(|i| shared.create(blob(i))).collect::<Vec<_>>());
        let mine: Vec<_> = (0..40).map(|i| shared.create(blob(i + 40))).collect();
        let mut all = t.join().unwrap();
        all.extend(mine);
        all
    });
    assert_eq!(heap.len(), 120);
    // Each thread creates through its own cache of reserved indices
    // (batches of 64, fewer under miri): one may reserve more of the free
    // list than it uses and leave the other to append, by at most a batch
    // per thread. The next collection gives the unused ones back.
    let high_water = heap.table_stats().high_water;
    assert!(
        (120..120 + 2 * 64).contains(&high_water),
        "{high_water}: the free list first, then at most a batch per thread"
    );
    assert!(again.iter().all(|h| heap.get(*h).is_some()));
    assert_eq!(heap.collect().unwrap().freed, 80);
    let t = heap.table_stats();
    assert_eq!((t.objects, t.high_water), (40, high_water));
    assert_eq!(
        t.free,
        high_water as usize - 40,
        "no reserved index is lost"
    );
}

#[test]
fn weak_handles_and_names() {
    let mut heap = heap();
    let world = heap.spawn(blob(0)).name("World").root().create().unwrap();
    let hero = heap
        .spawn(blob(1))
        .outer(world)
        .name("Hero")
        .create()
        .unwrap();
    let orc = heap.create(blob(2));
    heap[hero].peer = Some(orc.downgrade());
    heap.add_to_root(hero).unwrap();
    heap.collect().unwrap();
    assert!(heap.get(heap[hero].peer.unwrap()).is_none());
    assert_eq!(heap.find_path("World.Hero"), Some(hero.any()));
    assert_eq!(heap.path_name(hero).unwrap(), "World.Hero");
    let names: Vec<String> = heap.iter().map(|o| o.display_name()).collect();
    assert_eq!(names, ["World", "Hero"]);
}

#[test]
fn dropping_a_heap_with_live_objects_drops_them() {
    let before = DROPS.load(SeqCst);
    let heap = heap();
    let hs: Vec<_> = (0..30).map(|_| heap.create(loud(false))).collect();
    heap.add_to_root(hs[0]).unwrap();
    let ring: Vec<Obj<Blob>> = (0..30).map(|n| heap.create(blob(n))).collect();
    let _strong: StrongObj<Blob> = heap.strong(ring[3]).unwrap();
    drop(heap);
    assert!(DROPS.load(SeqCst) - before >= 30);
}

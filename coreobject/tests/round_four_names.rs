//! Round four of hardening, the names and lookups part: generated names
//! after a used-up range, names used in another heap, the disregard pool's
//! overflow, error texts, and the lookups a user reaches for (`heap[weak]`,
//! `get_disjoint_mut`, typed `find`).

use coreobject::{Error, Heap, Name, Object};

#[derive(Object, Default)]
struct Shell;

/// Item 8: once one object holds the largest number of a base, generated
/// names are searched for; each search resumes where the last stopped, so
/// many names cost linear work. (A search from a fixed start costs i tries
/// for the i-th name: 20,000 names were some 2 * 10^8 lookups, minutes in a
/// debug build; here they take milliseconds.)
#[test]
fn generated_names_after_a_used_up_range_stay_linear() {
    let heap = Heap::new();
    let shell = heap.intern("Shell").unwrap();
    heap.spawn(Shell)
        .name(shell.with_number(Name::MAX_NUMBER))
        .create()
        .unwrap();
    let world = heap.create(Shell);
    let mut seen = std::collections::HashSet::new();
    for i in 0..20_000u32 {
        let mut s = heap.spawn(Shell).unique_name(shell);
        if i % 2 == 0 {
            s = s.outer(world);
        }
        let h = s.create().unwrap();
        let n = heap.name(h).unwrap().number().unwrap();
        assert!(n >= 1 << 31 && n < Name::MAX_NUMBER, "{n}");
        assert!(seen.insert(n), "{n} given twice");
        let outer = (i % 2 == 0).then_some(world.any());
        assert_eq!(heap.find_name(outer, heap.name(h).unwrap()), Some(h.any()));
    }
}

/// Item 9: a `Name` made by one heap is refused by another, whatever ids
/// the two tables use: it reads as nothing there, finds nothing, and
/// naming an object with it fails with `StaleName`.
#[test]
fn a_name_from_another_heap_is_refused() {
    let a = Heap::new();
    let b = Heap::new();
    // The same ids in both tables: entry 0 in each.
    let alpha = a.intern("Alpha").unwrap();
    let beta = b.intern("Beta").unwrap();
    assert_eq!(b.name_string(beta).as_deref(), Some("Beta"));
    assert_eq!(b.name_string(alpha), None);
    assert_eq!(b.name_string(alpha.with_number(3)), None);
    assert_eq!(a.name_string(beta), None);
    assert_eq!(a.name_string(alpha).as_deref(), Some("Alpha"));

    let err = b.spawn(Shell).name(alpha).create().unwrap_err();
    assert_eq!(err, Error::StaleName(alpha));
    let err = b.spawn(Shell).unique_name(alpha).create().unwrap_err();
    assert_eq!(err, Error::StaleName(alpha));
    assert_eq!(b.len(), 0, "nothing was created");

    let named = b.spawn(Shell).name(beta).create().unwrap();
    assert_eq!(b.find_name(None, alpha), None);
    assert_eq!(b.find_name(None, beta), Some(named.any()));
    assert_ne!(alpha, beta);
    // And in the first heap, its own name still works.
    let x = a.spawn(Shell).name(alpha).create().unwrap();
    assert_eq!(a.name_of(x).as_deref(), Some("Alpha"));
}

/// Item 9, with a heap dropped and another made: the new heap may take
/// the old heap's tag, and its table starts from the same ids, but names of
/// the old heap stay foreign.
#[test]
fn a_name_from_a_dropped_heap_is_refused() {
    let old = Heap::new();
    let gone = old.intern("Gone").unwrap();
    drop(old);
    for _ in 0..4 {
        let heap = Heap::new();
        heap.intern("Here").unwrap();
        assert_eq!(heap.name_string(gone), None);
        assert_eq!(
            heap.spawn(Shell).name(gone).create().unwrap_err(),
            Error::StaleName(gone)
        );
    }
}

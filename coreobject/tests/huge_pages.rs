//! `HeapConfig::huge_pages`: the runs holding a heap's objects are advised
//! huge pages (`MADV_HUGEPAGE`, shown as `hg` in the mapping's `VmFlags` in
//! `/proc/self/smaps`) exactly when the heap asks, including runs that a
//! heap of the other setting gave back to the process-wide spare list.
//!
//! Linux only (and not under miri, which maps nothing); skipped where
//! transparent huge pages are `never` or missing.
#![cfg(all(target_os = "linux", not(miri)))]

use std::collections::HashSet;
use std::sync::Mutex;

use coreobject::{GcConfig, Heap, HeapConfig, Obj, Object};

#[derive(Object, Default)]
struct Cell(u64);

/// The tests share the process-wide spare list: one at a time, so that
/// what a test gives back is what its next heap takes.
static LOCK: Mutex<()> = Mutex::new(());

const RUN: usize = 2 << 20;

/// Whether transparent huge pages can be asked for here.
fn thp_available() -> bool {
    match std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled") {
        Ok(s) => !s.contains("[never]"),
        Err(_) => false,
    }
}

/// `VmFlags` of every mapping, by address range.
fn mappings() -> Vec<(usize, usize, Vec<String>)> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let mut out = Vec::new();
    let mut range = (0, 0);
    for line in smaps.lines() {
        if let Some(flags) = line.strip_prefix("VmFlags:") {
            out.push((
                range.0,
                range.1,
                flags.split_whitespace().map(String::from).collect(),
            ));
        } else if let Some((r, _)) = line.split_once(' ') {
            if let Some((lo, hi)) = r.split_once('-') {
                if let (Ok(lo), Ok(hi)) =
                    (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                {
                    range = (lo, hi);
                }
            }
        }
    }
    out
}

/// How many of `addrs` lie in mappings advised huge pages, and how many not.
fn advised(addrs: &[usize]) -> (usize, usize) {
    let maps = mappings();
    let mut counts = (0, 0);
    for &a in addrs {
        let (_, _, flags) = maps
            .iter()
            .find(|(lo, hi, _)| (*lo..*hi).contains(&a))
            .unwrap_or_else(|| panic!("{a:#x} in no mapping"));
        if flags.iter().any(|f| f == "hg") {
            counts.0 += 1;
        } else {
            counts.1 += 1;
        }
    }
    counts
}

/// A heap with the setting and `n` objects, and the address of each.
fn build(huge: bool, n: usize) -> (Heap, Vec<Obj<Cell>>, Vec<usize>) {
    let heap = Heap::with_config(HeapConfig {
        huge_pages: huge,
        gc: GcConfig::MANUAL,
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    let objs: Vec<_> = (0..n as u64).map(|i| heap.create(Cell(i))).collect();
    let addrs = objs
        .iter()
        .map(|&o| heap.get(o).unwrap() as *const Cell as usize)
        .collect();
    (heap, objs, addrs)
}

fn runs(addrs: &[usize]) -> HashSet<usize> {
    addrs.iter().map(|a| a & !(RUN - 1)).collect()
}

#[test]
fn default_presets_leave_it_off() {
    for config in [
        HeapConfig::DEFAULT,
        HeapConfig::LARGE,
        HeapConfig::default(),
    ] {
        assert!(!config.huge_pages, "{config:?}");
    }
}

#[test]
fn on_advises_every_object_run() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !thp_available() {
        return;
    }
    let (heap, objs, addrs) = build(true, 200_000);
    assert!(runs(&addrs).len() >= 2, "the objects fill a few runs");
    assert_eq!(advised(&addrs), (addrs.len(), 0));
    assert_eq!(heap.get(objs[199_999]).unwrap().0, 199_999);
}

#[test]
fn off_advises_none() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !thp_available() {
        return;
    }
    let (_heap, _objs, addrs) = build(false, 200_000);
    assert_eq!(advised(&addrs), (0, addrs.len()));
}

/// An advised heap's runs, spare once it goes, are not handed to a heap
/// without the setting; a plain heap's spare runs are advised when a heap
/// with it takes them.
#[test]
fn spare_runs_take_the_taking_heaps_setting() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !thp_available() {
        return;
    }
    let (a, _, a_addrs) = build(true, 50_000);
    assert_eq!(advised(&a_addrs), (a_addrs.len(), 0));
    drop(a);
    // A's advised runs are spare now; B must not get them.
    let (b, _, b_addrs) = build(false, 50_000);
    assert_eq!(advised(&b_addrs), (0, b_addrs.len()));
    let b_runs = runs(&b_addrs);
    drop(b);
    // C needs more runs than the spare list holds (64 MiB at most, of
    // which the table's groups take some), so it takes B's plain ones too.
    let (_c, _, c_addrs) = build(true, 2_000_000);
    assert!(
        runs(&c_addrs).intersection(&b_runs).next().is_some(),
        "C reused none of B's runs"
    );
    assert_eq!(advised(&c_addrs), (c_addrs.len(), 0));
}

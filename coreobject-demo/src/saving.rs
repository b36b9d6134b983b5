//! Saving the world at a frame (`--save-at N`) and loading a save
//! (`--load FILE`).
//!
//! `--save-at N` saves the whole heap after frame `N` to `<out>/world.save`
//! ([`Heap::save`] of [`Selection::All`], the binary form), then loads it
//! back twice, each into a fresh heap, and checks the copies:
//!
//! * **restore** ([`Heap::restore`]): an exact copy. Checked: saving every
//!   object of the copy gives, byte for byte, the package of every object of
//!   the original (same classes, fields, names, outers, roots and pool, and
//!   every handle to the same object), and the copy's objects sit at the
//!   original's indices.
//! * **instantiate** ([`Heap::load`]): new objects in an empty heap. Checked:
//!   the same number of objects of each class, and the same paths.
//!
//! `--load FILE` restores a save into a fresh heap, reports what it holds
//! (the frame it was saved at, objects per class), collects it, and checks
//! that saving it again gives the file's bytes.

use std::collections::BTreeMap;
use std::error::Error;
use std::path::Path;
use std::time::Instant;

use coreobject::save::Selection;
use coreobject::{AnyObj, Heap, HeapConfig};

use crate::model::{
    Actor, Asset, Component, Level, Package, Projectile, StaticContent, StaticProp, World,
};

/// Registers the world's classes for loading by name (a save written by
/// another run names them; this run has saved none yet).
pub fn register_classes() -> Result<(), Box<dyn Error>> {
    use coreobject::save::register;
    register::<World>()?;
    register::<Level>()?;
    register::<StaticContent>()?;
    register::<StaticProp>()?;
    register::<Actor>()?;
    register::<Component>()?;
    register::<Projectile>()?;
    register::<Package>()?;
    register::<Asset>()?;
    Ok(())
}

/// What `--save-at` measured and checked.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SaveReport {
    /// The frame after which the world was saved.
    pub frame: u32,
    /// Objects saved.
    pub objects: usize,
    /// The file's size.
    pub bytes: usize,
    /// `Heap::save`, in milliseconds.
    pub save_ms: f64,
    /// `Heap::restore`, in milliseconds.
    pub restore_ms: f64,
    /// `Heap::load` into an empty heap, in milliseconds.
    pub instantiate_ms: f64,
    /// The restored copy is the same graph.
    pub restore_same: bool,
    /// The instantiated copy has the same objects per class and paths.
    pub instantiate_same: bool,
    /// What differed, if anything.
    pub problems: Vec<String>,
}

impl SaveReport {
    /// The summary's lines.
    pub fn summary(&self) -> String {
        let mb = self.bytes as f64 / 1e6;
        let mut s = format!(
            "save at frame {}: {} objects, {:.1} MB ({:.1} B/object) saved in {:.1} ms; \
             restored in {:.1} ms (same graph: {}); instantiated in {:.1} ms (same objects: {})\n",
            self.frame,
            self.objects,
            mb,
            self.bytes as f64 / self.objects.max(1) as f64,
            self.save_ms,
            self.restore_ms,
            yes(self.restore_same),
            self.instantiate_ms,
            yes(self.instantiate_same),
        );
        for p in &self.problems {
            s.push_str(&format!("  save check: {p}\n"));
        }
        s
    }
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "NO"
    }
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// The package of `objects` (no heap section, so two heaps holding the
/// same graph at the same indices give the same bytes).
fn package_of(heap: &Heap, objects: &[AnyObj]) -> Result<Vec<u8>, Box<dyn Error>> {
    let mut b = Vec::new();
    heap.save(Selection::set(objects.iter().copied()), &mut b)?;
    Ok(b)
}

/// Objects per class name.
fn class_counts(heap: &Heap, objects: &[AnyObj]) -> BTreeMap<&'static str, usize> {
    let mut m = BTreeMap::new();
    for &o in objects {
        *m.entry(heap.class_of(o).map_or("?", |c| c.name()))
            .or_insert(0) += 1;
    }
    m
}

/// Saves `heap` to `path`, loads it back both ways and checks the copies.
pub fn save_at(heap: &Heap, path: &Path, frame: u32) -> Result<SaveReport, Box<dyn Error>> {
    let t = Instant::now();
    let mut bytes = Vec::new();
    let saved = heap.save(Selection::all(), &mut bytes)?;
    let save_ms = ms(t);
    std::fs::write(path, &bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    let mut problems = Vec::new();

    // Exact restore: the same objects at the same indices, saving to the
    // same bytes.
    let t = Instant::now();
    let restored = Heap::restore(&bytes[..])?;
    let restore_ms = ms(t);
    let again: Vec<AnyObj> = saved.exports.iter().map(|&h| restored.rehome(h)).collect();
    let placed = saved
        .exports
        .iter()
        .zip(&again)
        .all(|(&h, &r)| r.index() == h.index() && restored.contains(r));
    if !placed {
        problems.push("a restored object is not at its index".into());
    }
    let same_bytes = package_of(heap, &saved.exports)? == package_of(&restored, &again)?;
    if !same_bytes {
        problems.push("the restored objects save to other bytes".into());
    }
    let restore_same = placed && same_bytes && restored.len() == saved.exports.len();
    drop(restored);

    // Instantiate into an empty heap: the same objects per class, names
    // and outers.
    let t = Instant::now();
    let mut copy = Heap::with_config(HeapConfig {
        max_objects: heap.max_objects(),
        ..HeapConfig::DEFAULT
    })?;
    let loaded = copy.load(&bytes[..])?;
    let instantiate_ms = ms(t);
    let mut instantiate_same = copy.len() == saved.exports.len()
        && class_counts(heap, &saved.exports) == class_counts(&copy, &loaded.objects);
    if !instantiate_same {
        problems.push(format!(
            "instantiated {} objects of {}, or other classes",
            copy.len(),
            saved.exports.len()
        ));
    }
    let outer_name = |h: &Heap, o: AnyObj| h.outer_of(o).and_then(|x| h.name_of(x));
    for (&a, &b) in saved.exports.iter().zip(&loaded.objects) {
        if heap.name_of(a) != copy.name_of(b) || outer_name(heap, a) != outer_name(&copy, b) {
            problems.push(format!(
                "{:?} is not at {:?}",
                copy.path_name(b),
                heap.path_name(a)
            ));
            instantiate_same = false;
            break;
        }
    }
    Ok(SaveReport {
        frame,
        objects: saved.exports.len(),
        bytes: bytes.len(),
        save_ms,
        restore_ms,
        instantiate_ms,
        restore_same,
        instantiate_same,
        problems,
    })
}

/// `--load FILE`: restores the save, reports on it, collects it and checks
/// that saving it again gives the same bytes. `Ok(false)` if not.
pub fn load(path: &Path) -> Result<bool, Box<dyn Error>> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    register_classes()?;
    let t = Instant::now();
    let mut heap = Heap::restore(&bytes[..])?;
    let restore_ms = ms(t);
    let world = heap
        .find_path("World")
        .and_then(|w| heap.downcast::<World>(w));
    let frame = world.map(|w| heap[w].frame);
    println!(
        "restored {} ({:.1} MB) in {:.1} ms: {} objects, saved at frame {}",
        path.display(),
        bytes.len() as f64 / 1e6,
        restore_ms,
        heap.len(),
        frame.map_or("?".into(), |f| f.to_string()),
    );
    for (class, n) in heap.class_counts().iter().take(8) {
        println!("  {class:<14} {n}");
    }
    let mut again = Vec::new();
    heap.save(Selection::all(), &mut again)?;
    let same = again == bytes;
    println!(
        "saved again: {}",
        if same {
            "the same bytes"
        } else {
            "OTHER BYTES"
        }
    );
    let t = Instant::now();
    let stats = heap.collect()?;
    println!(
        "a full collection of the restored world: {} live, {} freed (unreachable when saved), {:.1} ms",
        heap.len(),
        stats.freed,
        ms(t)
    );
    Ok(same && world.is_some())
}

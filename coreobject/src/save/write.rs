//! Building a package from a heap.

use std::collections::HashMap;

use rustc_hash::FxHashMap;

use super::error::SaveError;
use super::handles::{self, ExportMap, SaveCx};
use super::package::{xflags, ClassRec, ExportRec, HeapRec, ImportRec, Package};
use super::registry::register_class;
use super::{FieldWriter, SaveOptions, SaveVtable, Saved, Selection, WeakOutside};
use crate::array::{flags, ObjectRef, RETIRED};
use crate::class::Class;
use crate::handle::AnyObj;
use crate::heap::Heap;
use crate::names::split;
use crate::serial;

/// Strings, each once, numbered in order of first use.
#[derive(Default)]
struct Strings {
    ids: HashMap<String, u32>,
    list: Vec<String>,
}

impl Strings {
    fn id(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        let i = self.list.len() as u32;
        self.ids.insert(s.to_owned(), i);
        self.list.push(s.to_owned());
        i
    }

    /// A name as (base, number + 1 or 0).
    fn name(&mut self, full: &str) -> (u32, u32) {
        let (base, number) = split(full);
        (self.id(base), number)
    }
}

/// Starts loading the export map's entries for an object's handles, a few
/// objects before it is saved: the handles point anywhere in the heap.
pub(crate) struct Ahead<'a>(&'a [(u32, u32)]);

impl crate::trace::Visitor for Ahead<'_> {
    #[inline(always)]
    fn visit(&mut self, obj: AnyObj) {
        if let Some(e) = self.0.get(obj.index() as usize) {
            crate::trace::prefetch_line(e);
        }
    }
}

pub(crate) fn ahead<T: crate::Object>(o: &ObjectRef<'_>, a: &mut Ahead<'_>) {
    if let Some(v) = o.downcast::<T>() {
        crate::Trace::trace(v, a);
    }
}

/// How many objects ahead the export map is prefetched.
const AHEAD: usize = 8;

/// Whether every object on `o`'s outer chain is alive.
fn outers_alive(heap: &Heap, o: &ObjectRef<'_>) -> bool {
    let mut cur = o.outer();
    while let Some(outer) = cur {
        match heap.object_ref(outer) {
            Some(r) => cur = r.outer(),
            None => return false,
        }
    }
    true
}

/// The objects a selection saves, in index order.
fn gather<'h>(heap: &'h Heap, sel: &Selection) -> Result<Vec<ObjectRef<'h>>, SaveError> {
    let saveable = |o: &ObjectRef<'_>| o.flags() & flags::DEFAULT_OBJECT == 0;
    let mut out: Vec<ObjectRef<'h>> = match sel {
        // Objects inside an object that is no longer alive (marked as
        // garbage, or found unreachable by a cycle in flight) go with it.
        Selection::All => heap
            .iter()
            .filter(|o| saveable(o) && outers_alive(heap, o))
            .collect(),
        Selection::Set(list) => {
            let mut out = Vec::with_capacity(list.len());
            for &h in list {
                let o = heap.object_ref(h).ok_or(SaveError::NotAlive(h))?;
                out.push(o);
            }
            out
        }
        Selection::Subtree(root) => {
            let r = heap.object_ref(*root).ok_or(SaveError::NotAlive(*root))?;
            let mut ids = vec![r.id()];
            let mut next = 0;
            while next < ids.len() {
                let o = ids[next];
                next += 1;
                heap.for_each_with_outer(o, |inner| {
                    if saveable(&inner) && !inner.is_disregard() {
                        ids.push(inner.id());
                    }
                });
            }
            ids.iter().filter_map(|&h| heap.object_ref(h)).collect()
        }
    };
    out.sort_unstable_by_key(|o| o.id().index());
    out.dedup_by_key(|o| o.id().index());
    Ok(out)
}

/// Builds the package of `sel`.
pub(crate) fn build(
    heap: &Heap,
    sel: &Selection,
    opts: &SaveOptions,
) -> Result<(Package, Saved), SaveError> {
    if handles::busy() {
        return Err(SaveError::Nested);
    }
    let objects = gather(heap, sel)?;
    let whole = matches!(sel, Selection::All);
    let mut vts: Vec<&'static SaveVtable> = Vec::with_capacity(objects.len());
    for o in &objects {
        let class = o.class();
        let vt = class.save_vtable().ok_or(SaveError::NotSaveable {
            class: class.name(),
            object: o.id(),
        })?;
        vts.push(vt);
    }
    let exports = if whole {
        let mut v = vec![(0u32, 0u32); heap.save_high_water() as usize];
        for (e, o) in objects.iter().enumerate() {
            v[o.id().index() as usize] = (o.id().serial(), e as u32 + 1);
        }
        ExportMap::Dense(v)
    } else {
        let mut m = FxHashMap::default();
        m.reserve(objects.len());
        for (e, o) in objects.iter().enumerate() {
            m.insert(o.id(), e as u32);
        }
        ExportMap::Sparse(m)
    };
    let cx = SaveCx {
        exports,
        chunks: heap.save_chunks(),
        keep_dead: false,
        weak_none: opts.weak_outside == WeakOutside::None,
        imports: FxHashMap::default(),
        import_list: Vec::new(),
        current: 0,
    };

    let mut strings = Strings::default();
    // Name bases by the name table's id: string ids.
    let mut bases: FxHashMap<u32, u32> = FxHashMap::default();
    let names = heap.save_names();
    let mut classes: Vec<ClassRec> = Vec::new();
    let mut class_ids: FxHashMap<*const Class, u32> = FxHashMap::default();
    let mut recs = Vec::with_capacity(objects.len());
    let mut data = Vec::with_capacity(objects.len() * 16);
    let (res, mut cx) = handles::saving(cx, || -> Result<(), SaveError> {
        for (e, o) in objects.iter().enumerate() {
            let class = o.class();
            let vt = vts[e];
            let class_id = match class_ids.get(&(class as *const Class)) {
                Some(&c) => c,
                None => {
                    register_class(class)?;
                    let c = classes.len() as u32;
                    classes.push(ClassRec {
                        name: strings.id(class.name()),
                        version: vt.version,
                        fields: vt.fields.iter().map(|f| strings.id(f.name)).collect(),
                    });
                    class_ids.insert(class as *const Class, c);
                    c
                }
            };
            // One look at the save in progress per object: the export being
            // written, its outer's index, and the prefetch for a later one.
            let outer = handles::with_save(|cx| {
                cx.current = e as u32;
                if let (ExportMap::Dense(map), Some(next)) = (&cx.exports, objects.get(e + AHEAD)) {
                    (vts[e + AHEAD].ahead)(next, &mut Ahead(map));
                }
                o.outer().map_or(0, |outer| cx.index_of(outer, false))
            })
            .unwrap_or(0);
            let name = names
                .name_parts(o.id().index())
                .map(|(base, text, number)| {
                    let id = *bases.entry(base).or_insert_with(|| strings.id(text));
                    (id, number)
                });
            let mut fl = 0;
            if o.is_rooted() {
                fl |= xflags::ROOT;
            }
            if o.is_disregard() {
                fl |= xflags::POOL;
            }
            let start = data.len();
            let mut w = FieldWriter {
                out: &mut data,
                format: opts.format,
                class: class.name(),
                fields: vt.fields,
                next: 0,
            };
            (vt.save)(o, &mut w)?;
            recs.push(ExportRec {
                class: class_id,
                outer,
                name,
                flags: fl,
                payload: (start, data.len()),
            });
        }
        Ok(())
    })
    .ok_or(SaveError::Nested)?;
    drop(names);
    res?;

    // Imports: each by class and name under its outer (an export or
    // another import, appended as found).
    let mut imports = Vec::new();
    let mut next = 0;
    while next < cx.import_list.len() {
        let (obj, referrer) = cx.import_list[next];
        next += 1;
        let class = heap.class_of(obj).map_or("", |c| c.name());
        let Some(name) = heap.name_of(obj) else {
            let r = objects[referrer as usize].id();
            return Err(SaveError::UnnamedImport {
                object: obj,
                class,
                referrer: heap.path_name(r).unwrap_or_default(),
            });
        };
        let outer = heap
            .outer_of(obj)
            .map_or(0, |outer| cx.index_of(outer, false));
        imports.push(ImportRec {
            class: strings.id(class),
            outer,
            name: strings.name(&name),
        });
    }

    // Clusters whose root is saved, with their saved members.
    let mut clusters = Vec::new();
    for c in heap.clusters() {
        if let Some(root) = cx.exports.get(c.root()) {
            let members = heap
                .cluster_members(c)
                .into_iter()
                .filter(|&m| m != c.root())
                .filter_map(|m| cx.exports.get(m))
                .collect();
            clusters.push((root, members));
        }
    }
    clusters.sort_unstable();

    let heap_rec = whole.then(|| heap_rec(heap, &objects, &cx.exports));
    let saved = Saved {
        exports: objects.iter().map(|o| o.id()).collect(),
        imports: cx.import_list.iter().map(|&(h, _)| h).collect(),
        bytes: 0,
    };
    let pkg = Package {
        format: opts.format,
        strings: strings.list,
        classes,
        imports,
        exports: recs,
        clusters,
        heap: heap_rec,
        data,
    };
    Ok((pkg, saved))
}

/// What an exact restore needs beyond the objects: the tag, the settings,
/// each object's slot and serial, each used free slot's next serial.
fn heap_rec(heap: &Heap, objects: &[ObjectRef<'_>], exports: &ExportMap) -> HeapRec {
    let lease = heap.save_lease();
    let mut free = Vec::new();
    heap.save_used_slots(|i, s, occupied| {
        let me = crate::serial::make(lease.tag, serial::generation(s));
        let exported = std::num::NonZeroU32::new(me)
            .is_some_and(|nz| exports.get(AnyObj::new(i, nz)).is_some());
        if exported && occupied {
            return;
        }
        // Stored as generation + 1 of the next serial, 0 for retired.
        let next = if s == RETIRED {
            0
        } else if occupied {
            // An object not saved (garbage, a class default): as if freed.
            let g = serial::generation(s);
            if g >= lease.limit {
                0
            } else {
                g + 2
            }
        } else {
            serial::generation(s) + 1
        };
        free.push((i, next));
    });
    HeapRec {
        tag: lease.tag,
        floor: lease.floor,
        limit: lease.limit,
        generation_bits: heap.config().generation_bits,
        cap: heap.max_objects(),
        pool_capacity: heap.config().disregard_pool_size,
        pool_end: heap.disregard_len(),
        slots: objects
            .iter()
            .map(|o| (o.id().index(), serial::generation(o.id().serial())))
            .collect(),
        free,
    }
}

//! Reading a package: checks, then instantiate into a live heap or restore
//! a new one exactly.

use std::num::NonZeroU32;

use super::error::{FieldError, LoadError};
use super::handles::{self, LoadCx};
use super::package::{malformed, xflags, Package};
use super::registry::lookup;
use super::schema::{string, Plan};
use super::{FieldReader, ImportPath, LoadOptions, Loaded, SaveObject};
use crate::array::{flags, RETIRED};
use crate::class::Class;
use crate::config::HeapConfig;
use crate::handle::AnyObj;
use crate::heap::Heap;
use crate::serial::{self, TagLease};

/// One class's decoded objects, type-erased.
pub(crate) trait Batch {
    fn decode(&mut self, r: &mut FieldReader<'_>) -> Result<(), FieldError>;
    /// Places the decoded objects, in decoding order, in `places`.
    fn place(self: Box<Self>, heap: &Heap, places: &[Place]);
}

/// Where a decoded object goes.
pub(crate) struct Place {
    pub(crate) index: u32,
    pub(crate) outer: Option<AnyObj>,
    pub(crate) flags: u32,
}

struct Typed<T>(Vec<T>);

impl<T: SaveObject> Batch for Typed<T> {
    fn decode(&mut self, r: &mut FieldReader<'_>) -> Result<(), FieldError> {
        self.0.push(T::load_fields(r)?);
        Ok(())
    }

    fn place(self: Box<Self>, heap: &Heap, places: &[Place]) {
        debug_assert_eq!(self.0.len(), places.len());
        for (v, p) in self.0.into_iter().zip(places) {
            heap.load_place(p.index, v, p.outer, p.flags);
        }
    }
}

pub(crate) fn new_batch<T: SaveObject>() -> Box<dyn Batch> {
    Box::new(Typed::<T>(Vec::new()))
}

/// Per class: its decoded objects, and their exports in order.
type Decoded = (Vec<Box<dyn Batch>>, Vec<Vec<u32>>);

/// A package whose tables are checked, its classes found and planned.
struct Checked<'p> {
    pkg: &'p Package,
    plans: Vec<Plan<'p>>,
    /// Per import: its name as text.
    import_names: Vec<String>,
}

fn name_text(pkg: &Package, (base, number): (u32, u32), what: &str) -> Result<String, LoadError> {
    let base = string(pkg, base, what)?;
    Ok(match number {
        0 => base.to_owned(),
        n => format!("{base}_{}", n - 1),
    })
}

/// A package index's range check.
fn check_index(pkg: &Package, i: i32, what: &str, at: usize) -> Result<(), LoadError> {
    let ok = match i {
        0 => true,
        i if i > 0 => (i as usize) <= pkg.exports.len(),
        i => (-(i64::from(i)) as usize) <= pkg.imports.len(),
    };
    if ok {
        Ok(())
    } else {
        Err(malformed(
            format!(
                "{what} {at}: package index {i} out of range ({} exports, {} imports)",
                pkg.exports.len(),
                pkg.imports.len()
            ),
            0,
        ))
    }
}

fn check(pkg: &Package) -> Result<Checked<'_>, LoadError> {
    let mut plans = Vec::with_capacity(pkg.classes.len());
    for rec in &pkg.classes {
        let name = string(pkg, rec.name, "class name")?;
        let class = lookup(name).ok_or_else(|| LoadError::UnknownClass {
            name: name.to_owned(),
        })?;
        plans.push(Plan::new(pkg, rec, class)?);
    }
    let mut import_names = Vec::with_capacity(pkg.imports.len());
    for (k, imp) in pkg.imports.iter().enumerate() {
        string(pkg, imp.class, "import class")?;
        check_index(pkg, imp.outer, "import", k)?;
        import_names.push(name_text(pkg, imp.name, "import name")?);
    }
    // An import's outer chain must end (at none or an export).
    for k in 0..pkg.imports.len() {
        let mut cur = pkg.imports[k].outer;
        let mut steps = 0;
        while cur < 0 {
            steps += 1;
            if steps > pkg.imports.len() {
                return Err(LoadError::ImportCycle { import: k });
            }
            cur = pkg.imports[(-(i64::from(cur)) - 1) as usize].outer;
        }
    }
    for (k, e) in pkg.exports.iter().enumerate() {
        if e.class as usize >= pkg.classes.len() {
            return Err(malformed(
                format!(
                    "export {k}: class {} of {} out of range",
                    e.class,
                    pkg.classes.len()
                ),
                0,
            ));
        }
        check_index(pkg, e.outer, "export", k)?;
        if e.flags & !xflags::ALL != 0 {
            return Err(malformed(
                format!("export {k}: unknown flags {:#x}", e.flags),
                0,
            ));
        }
        if let Some((base, _)) = e.name {
            string(pkg, base, "export name")?;
        }
    }
    // An export's outer chain must end too: outers among exports form a
    // forest. Colours: 0 unseen, 1 on the current chain, 2 done.
    let mut colour = vec![0u8; pkg.exports.len()];
    let mut chain = Vec::new();
    for k in 0..pkg.exports.len() {
        if colour[k] == 2 {
            continue;
        }
        let mut cur = k;
        loop {
            match colour[cur] {
                2 => break,
                1 => return Err(LoadError::OuterCycle { export: cur }),
                _ => {}
            }
            colour[cur] = 1;
            chain.push(cur);
            let o = pkg.exports[cur].outer;
            if o <= 0 {
                break;
            }
            cur = o as usize - 1;
        }
        for c in chain.drain(..) {
            colour[c] = 2;
        }
    }
    for (root, members) in &pkg.clusters {
        for &m in std::iter::once(root).chain(members) {
            if m as usize >= pkg.exports.len() {
                return Err(malformed(
                    format!("cluster member {m} of {} exports", pkg.exports.len()),
                    0,
                ));
            }
        }
    }
    Ok(Checked {
        pkg,
        plans,
        import_names,
    })
}

impl Checked<'_> {
    /// An export's name as text (checked to be in range).
    fn export_name(&self, k: usize) -> Option<String> {
        let n = self.pkg.exports[k].name?;
        name_text(self.pkg, n, "export name").ok()
    }

    /// An export's display path inside the package, for errors.
    fn export_path(&self, k: usize) -> String {
        let mut parts = Vec::new();
        let mut cur = k as i32 + 1;
        for _ in 0..64 {
            match cur {
                0 => break,
                i if i > 0 => {
                    let e = i as usize - 1;
                    parts.push(self.export_name(e).unwrap_or_else(|| {
                        let c = self.plans[self.pkg.exports[e].class as usize].class;
                        format!("{}#{e}", c.name())
                    }));
                    cur = self.pkg.exports[e].outer;
                }
                i => {
                    let m = (-(i64::from(i)) - 1) as usize;
                    parts.push(self.import_names[m].clone());
                    cur = self.pkg.imports[m].outer;
                }
            }
        }
        parts.reverse();
        parts.join(".")
    }

    /// Each named export's handle, outer, name base and stored number.
    fn wanted_names(
        &self,
        handles: &[AnyObj],
        outer_of: impl Fn(usize) -> Option<AnyObj>,
    ) -> Vec<(AnyObj, Option<AnyObj>, &str, u32)> {
        let pkg = self.pkg;
        (0..pkg.exports.len())
            .filter_map(|k| {
                let (base, number) = pkg.exports[k].name?;
                let base = pkg.strings[base as usize].as_str();
                Some((handles[k], outer_of(k), base, number))
            })
            .collect()
    }

    fn import_path(&self, k: usize) -> String {
        let mut parts = vec![self.import_names[k].clone()];
        let o = self.pkg.imports[k].outer;
        match o {
            0 => {}
            o if o > 0 => parts.insert(0, self.export_path(o as usize - 1)),
            o => parts.insert(0, self.import_path((-(i64::from(o)) - 1) as usize)),
        }
        parts.join(".")
    }

    /// Decodes every export into per-class batches, with `cx` as the load in
    /// progress. Returns the batches and, per class, its exports in order.
    fn decode(&self, cx: LoadCx) -> Result<Decoded, LoadError> {
        let mut batches: Vec<Box<dyn Batch>> = self.plans.iter().map(|p| (p.vt.batch)()).collect();
        let mut members = vec![Vec::new(); self.plans.len()];
        let res = handles::loading(cx, || -> Result<(), LoadError> {
            let (mut file, mut current) = (Vec::new(), Vec::new());
            for (k, e) in self.pkg.exports.iter().enumerate() {
                let plan = &self.plans[e.class as usize];
                let payload = &self.pkg.data[e.payload.0..e.payload.1];
                let res = plan.split(payload, &mut file, &mut current).and_then(|()| {
                    let mut r = FieldReader {
                        format: self.pkg.format,
                        version: plan.version,
                        current: &current,
                        file: &file,
                    };
                    batches[e.class as usize].decode(&mut r)
                });
                if let Err(source) = res {
                    return Err(LoadError::Payload {
                        export: k,
                        path: self.export_path(k),
                        class: plan.class.name().to_owned(),
                        source,
                    });
                }
                members[e.class as usize].push(k as u32);
            }
            Ok(())
        });
        res.ok_or(LoadError::Nested)??;
        Ok((batches, members))
    }
}

/// Instantiates a package into `heap`.
pub(crate) fn instantiate(
    heap: &mut Heap,
    input: Vec<u8>,
    opts: &mut LoadOptions<'_>,
) -> Result<Loaded, LoadError> {
    if handles::busy() {
        return Err(LoadError::Nested);
    }
    let pkg = Package::parse(input)?;
    let c = check(&pkg)?;
    let n = pkg.exports.len();
    let slots = heap.load_reserve(n)?;
    let handles: Vec<AnyObj> = slots.iter().map(|&i| heap.load_next_handle(i)).collect();

    // Imports, outers first (the checks above ruled out cycles).
    let mut imports: Vec<Option<(AnyObj, &'static Class)>> = vec![None; pkg.imports.len()];
    let mut done = vec![false; pkg.imports.len()];
    let mut unresolved = Vec::new();
    for k in 0..pkg.imports.len() {
        let mut stack = vec![k];
        while let Some(&i) = stack.last() {
            if done[i] {
                stack.pop();
                continue;
            }
            let imp = &pkg.imports[i];
            let outer = match imp.outer {
                0 => None,
                o if o > 0 => Some(Some(handles[o as usize - 1])),
                o => {
                    let m = (-(i64::from(o)) - 1) as usize;
                    if !done[m] {
                        stack.push(m);
                        continue;
                    }
                    Some(imports[m].map(|(h, _)| h))
                }
            };
            let want = &pkg.strings[imp.class as usize];
            let matches = |h: AnyObj| -> Option<(AnyObj, &'static Class)> {
                let class = heap.class_of(h)?;
                (class.name() == want.as_str()).then_some((h, class))
            };
            let found = match outer {
                None => heap.find(None, &c.import_names[i]),
                Some(Some(o)) => heap.find(Some(o), &c.import_names[i]),
                Some(None) => None,
            }
            .and_then(matches);
            let found = match found {
                Some(f) => Some(f),
                None => {
                    let path = ImportPath {
                        path: c.import_path(i),
                        class: want.clone(),
                    };
                    let via = opts
                        .resolver
                        .as_mut()
                        .and_then(|r| r(&path))
                        .and_then(matches);
                    if via.is_none() {
                        unresolved.push(path);
                    }
                    via
                }
            };
            imports[i] = found;
            done[i] = true;
            stack.pop();
        }
    }

    let cx = LoadCx {
        exports: pkg
            .exports
            .iter()
            .zip(&handles)
            .map(|(e, &h)| (h, c.plans[e.class as usize].class))
            .collect(),
        imports: imports.clone(),
    };
    let (batches, members) = match c.decode(cx) {
        Ok(x) => x,
        Err(e) => {
            heap.load_unreserve(&slots);
            return Err(e);
        }
    };

    let outer_of = |k: usize| -> Option<AnyObj> {
        match pkg.exports[k].outer {
            0 => None,
            o if o > 0 => Some(handles[o as usize - 1]),
            o => imports[(-(i64::from(o)) - 1) as usize].map(|(h, _)| h),
        }
    };
    let wanted = c.wanted_names(&handles, outer_of);
    if let Err((k, e)) = heap.load_names(&wanted) {
        heap.load_unreserve(&slots);
        return Err(name_taken(&pkg, &c, n, k, &e));
    }

    // From here on nothing fails.
    for (batch, list) in batches.into_iter().zip(&members) {
        let places: Vec<Place> = list
            .iter()
            .map(|&k| {
                let k = k as usize;
                let named = pkg.exports[k].name.is_some();
                Place {
                    index: slots[k],
                    outer: outer_of(k),
                    flags: if named { flags::NAMED } else { 0 },
                }
            })
            .collect();
        batch.place(heap, &places);
    }
    for (k, e) in pkg.exports.iter().enumerate() {
        // Objects of the saved heap's pool were permanent: rooted here.
        if e.flags & (xflags::ROOT | xflags::POOL) != 0 {
            heap.add_to_root(handles[k])
                .expect("a loaded object is alive");
        }
    }
    for (root, list) in &pkg.clusters {
        let m: Vec<AnyObj> = std::iter::once(root)
            .chain(list)
            .map(|&i| handles[i as usize])
            .collect();
        heap.load_cluster(&m);
    }
    heap.load_notify(&handles);
    Ok(Loaded {
        objects: handles,
        imports: imports.iter().map(|i| i.map(|(h, _)| h)).collect(),
        unresolved,
    })
}

/// Restores a whole-heap package into a new heap.
pub(crate) fn restore(input: Vec<u8>, config: Option<HeapConfig>) -> Result<Heap, LoadError> {
    if handles::busy() {
        return Err(LoadError::Nested);
    }
    let pkg = Package::parse(input)?;
    let c = check(&pkg)?;
    let Some(rec) = &pkg.heap else {
        return Err(LoadError::NotRestorable(
            "is not a save of a whole heap (Selection::All)".into(),
        ));
    };
    if let Some(k) = (0..pkg.imports.len()).next() {
        return Err(LoadError::NotRestorable(format!(
            "refers to {} objects outside it (the first: {}), which a new heap cannot hold",
            pkg.imports.len(),
            c.import_path(k)
        )));
    }
    let config = config.unwrap_or(HeapConfig {
        max_objects: rec.cap,
        disregard_pool_size: rec.pool_capacity,
        generation_bits: rec.generation_bits,
        ..HeapConfig::DEFAULT
    });
    Heap::restore_check(&config).map_err(|e| LoadError::Heap(e.to_string()))?;
    // Every generation in the file must be one the heap may hand out.
    let bad = |g: u32| g < rec.floor || g > rec.limit;
    if let Some(&(i, g)) = rec.slots.iter().find(|&&(_, g)| bad(g)) {
        return Err(LoadError::Slot {
            index: i,
            reason: format!("generation {g} outside {}..={}", rec.floor, rec.limit),
        });
    }
    if let Some(&(i, g)) = rec.free.iter().find(|&&(_, g)| g != 0 && bad(g - 1)) {
        return Err(LoadError::Slot {
            index: i,
            reason: format!("generation {} outside {}..={}", g - 1, rec.floor, rec.limit),
        });
    }
    let lease = take_tag(rec.tag, rec.floor, rec.limit, config.generation_bits)?;
    let tag = lease.tag;
    let handle = |(i, g): (u32, u32)| {
        AnyObj::new(
            i,
            NonZeroU32::new(serial::make(tag, g)).expect("the tag is never 0"),
        )
    };
    let handles: Vec<AnyObj> = rec.slots.iter().map(|&s| handle(s)).collect();
    // A heap that fails to fill is dropped: nothing of it is seen.
    let mut heap = Heap::restore_heap(config, lease);

    let cx = LoadCx {
        exports: pkg
            .exports
            .iter()
            .zip(&handles)
            .map(|(e, &h)| (h, c.plans[e.class as usize].class))
            .collect(),
        imports: Vec::new(),
    };
    let (batches, members) = c.decode(cx)?;

    // Slots in index order: objects' and free ones.
    let mut order: Vec<(u32, Option<usize>, u32)> = rec
        .slots
        .iter()
        .enumerate()
        .map(|(k, &(i, g))| (i, Some(k), g))
        .chain(rec.free.iter().map(|&(i, g)| (i, None, g)))
        .collect();
    order.sort_unstable_by_key(|&(i, _, _)| i);
    for (i, export, g) in order {
        let res = match export {
            Some(k) => heap.restore_claim(i, handles[k].serial()),
            None if g == 0 => heap.restore_free(i, RETIRED),
            None => heap.restore_free(i, serial::make(tag, g - 1)),
        };
        res.map_err(|e| LoadError::Slot {
            index: i,
            reason: e.to_string(),
        })?;
    }
    let n = pkg.exports.len();
    let outer_of = |k: usize| -> Option<AnyObj> {
        match pkg.exports[k].outer {
            o if o > 0 => Some(handles[o as usize - 1]),
            _ => None,
        }
    };
    let wanted = c.wanted_names(&handles, outer_of);
    if let Err((k, e)) = heap.load_names(&wanted) {
        return Err(name_taken(&pkg, &c, n, k, &e));
    }
    for (batch, list) in batches.into_iter().zip(&members) {
        let places: Vec<Place> = list
            .iter()
            .map(|&k| {
                let k = k as usize;
                let e = &pkg.exports[k];
                let mut f = 0;
                if e.name.is_some() {
                    f |= flags::NAMED;
                }
                if e.flags & xflags::POOL != 0 {
                    f |= flags::DISREGARD;
                }
                Place {
                    index: handles[k].index(),
                    outer: outer_of(k),
                    flags: f,
                }
            })
            .collect();
        batch.place(&heap, &places);
    }
    heap.restore_pool(rec.pool_end);
    for (k, e) in pkg.exports.iter().enumerate() {
        if e.flags & xflags::ROOT != 0 {
            heap.add_to_root(handles[k]).map_err(|e| LoadError::Slot {
                index: handles[k].index(),
                reason: e.to_string(),
            })?;
        }
    }
    for (root, list) in &pkg.clusters {
        let m: Vec<AnyObj> = std::iter::once(root)
            .chain(list)
            .map(|&i| handles[i as usize])
            .collect();
        heap.load_cluster(&m);
    }
    Ok(heap)
}

/// The saved heap's tag if no live heap holds it, else a fresh one whose
/// range holds the saved generations.
/// The error for a load whose `k`-th named export (of the first `n`) finds
/// its name taken in the target heap: it names the export's path.
fn name_taken(pkg: &Package, c: &Checked<'_>, n: usize, k: usize, e: &crate::Error) -> LoadError {
    let k = (0..n)
        .filter(|&x| pkg.exports[x].name.is_some())
        .nth(k)
        .unwrap_or(0);
    LoadError::NameTaken {
        path: c.export_path(k),
        reason: e.to_string(),
    }
}

fn take_tag(tag: u32, floor: u32, limit: u32, bits: u32) -> Result<TagLease, LoadError> {
    if let Some(l) = serial::acquire_tag(tag, floor, limit) {
        return Ok(l);
    }
    match serial::acquire(bits) {
        Some(l) if l.floor <= floor && l.limit >= limit => Ok(l),
        Some(l) => {
            serial::release(l, None);
            Err(LoadError::Heap(format!(
                "the saved heap's tag {tag} is held by a live heap, and no free tag has room for generations {floor}..={limit}"
            )))
        }
        None => Err(LoadError::Heap("too many heaps are alive".into())),
    }
}

//! Saves that cost what changed: records keyed by persistent id in a
//! [`SaveStore`], written incrementally.
//!
//! A store holds, per saved object, one [`ObjectRecord`] keyed by its
//! [`PersistentId`], and one [`StoreMeta`]: the class table (each class's
//! name, version and field names, once), the set of roots, and the next
//! serial to hand out. A record's payload is the package's field encoding
//! (so the evolution rules of packages apply unchanged); its handles are
//! written as indices into the record's own list of referenced ids.
//!
//! [`Heap::save_store`](crate::Heap::save_store) writes only the objects
//! created or changed since the last save and deletes the freed ones, in
//! one commit. Changed means written through `get_mut` (or `heap[h]`), the
//! one door for mutation, which sets a flag in the object's table entry; objects of
//! interior-mutable classes count as changed at every save. Creation and
//! freeing are found by comparing the live objects with the ids the heap
//! keeps per slot.
//!
//! Saving while the game runs is two steps:
//! [`Heap::capture`](crate::Heap::capture) on the game thread encodes the
//! changed objects into a [`ChangeSet`] (owned bytes, nothing borrowed from
//! the heap), and [`SaveStore::commit`] writes it, on any thread. The
//! change set is a consistent snapshot of the heap at the moment of the
//! capture: the capture runs under `&mut Heap`, so nothing changes during
//! it, and it clears the changed bits, so an object written after its
//! capture is captured again by the next save.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use super::error::{LoadError, SaveError};
use super::handles::{self, LoadCx};
use super::ids::{PersistentId, Tracker};
use super::package::{ClassRec, Format, Package};
use super::read::{Batch, Place};
use super::registry::lookup;
use super::schema::Plan;
use super::{FieldReader, SaveVtable};
use crate::array::{flags, ObjectRef};
use crate::class::Class;
use crate::handle::AnyObj;
use crate::heap::Heap;

/// The origin a store is given when none is asked for.
pub const DEFAULT_ORIGIN: u32 = 1;

/// A record flag: the object was in the disregard-for-GC pool (it loads
/// rooted).
pub const RECORD_POOL: u8 = 1;

/// One saved object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRecord {
    /// Its class, an index into [`StoreMeta::classes`].
    pub class: u32,
    /// Its outer's persistent id, 0 for none.
    pub outer: u64,
    /// Its name, as base and stored number (0: no number, n: `_{n-1}`).
    pub name: Option<(String, u32)>,
    /// [`RECORD_POOL`] or 0.
    pub flags: u8,
    /// The persistent ids its handles name (0: an object not saved).
    pub refs: Vec<u64>,
    /// Its fields, as a package writes them; a handle is `-(k + 1)` for
    /// `refs[k]`.
    pub payload: Vec<u8>,
}

/// One class layout in a store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassEntry {
    /// The class name.
    pub name: String,
    /// Its layout version.
    pub version: u32,
    /// Its saved fields, in order.
    pub fields: Vec<String>,
}

/// What a store keeps beside the records.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreMeta {
    /// The origin of the ids this store hands out.
    pub origin: u32,
    /// The next serial to hand out.
    pub next_serial: u64,
    /// Every class layout a record uses (never removed: old records keep
    /// their layout, and load by the evolution rules).
    pub classes: Vec<ClassEntry>,
    /// The rooted objects' ids, ascending.
    pub roots: Vec<u64>,
    /// How many saves were committed.
    pub saves: u64,
}

impl StoreMeta {
    /// An empty store's meta, handing out ids of `origin`.
    pub fn new(origin: u32) -> StoreMeta {
        StoreMeta {
            origin,
            next_serial: 1,
            classes: Vec::new(),
            roots: Vec::new(),
            saves: 0,
        }
    }
}

/// One save: records to write, ids to delete, the new meta. Written in one
/// commit (all or nothing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangeSet {
    /// The meta after this save.
    pub meta: StoreMeta,
    /// Records created or changed.
    pub put: Vec<(u64, ObjectRecord)>,
    /// Ids of objects freed.
    pub delete: Vec<u64>,
}

/// What went wrong with a store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Encoding an object failed.
    #[error(transparent)]
    Save(#[from] SaveError),
    /// Decoding an object failed.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The backend's I/O failed.
    #[error("store I/O: {0}")]
    Io(#[from] std::io::Error),
    /// The store's contents do not decode.
    #[error("corrupt store: {0}")]
    Corrupt(String),
    /// The backend refused (its own error, as text).
    #[error("store backend: {0}")]
    Backend(String),
    /// Nothing was ever committed to the store.
    #[error("the store holds no save")]
    Empty,
    /// No record has this id.
    #[error("no object {0:#x} in the store")]
    NotFound(u64),
    /// The capture was begun on another heap, or superseded by a later
    /// capture, save, load or `forget_store` on this one.
    #[error("the capture is not this heap's capture in flight")]
    StaleCapture,
}

/// Records keyed by persistent id, committed a change set at a time.
pub trait SaveStore {
    /// The meta of the last commit, `None` for an empty store.
    fn meta(&mut self) -> Result<Option<StoreMeta>, StoreError>;
    /// Every record, in id order.
    fn read_all(&mut self) -> Result<Vec<(u64, ObjectRecord)>, StoreError>;
    /// Writes a change set, all or nothing: after a crash the store holds
    /// either the last commit or this one.
    fn commit(&mut self, change: &ChangeSet) -> Result<(), StoreError>;
}

/// A store in memory (for tests and as a staging area).
///
/// ```
/// use coreobject::save::{MemStore, SaveStore};
/// use coreobject::{Heap, Object};
/// #[derive(Object, Default)]
/// #[object(save)]
/// struct Coin { value: u32 }
/// let mut heap = Heap::new();
/// let c = heap.spawn(Coin { value: 1 }).root().create().unwrap();
/// let mut store = MemStore::default();
/// assert_eq!(heap.save_store(&mut store).unwrap().written, 1);
/// heap[c].value = 2;
/// assert_eq!(heap.save_store(&mut store).unwrap().written, 1);
/// assert_eq!(heap.save_store(&mut store).unwrap().written, 0);
/// ```
#[derive(Clone, Debug, Default)]
pub struct MemStore {
    meta: Option<StoreMeta>,
    objects: BTreeMap<u64, ObjectRecord>,
}

impl MemStore {
    /// How many records it holds.
    pub fn len(&self) -> usize {
        self.objects.len()
    }
    /// Whether it holds no record.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }
}

fn apply(objects: &mut BTreeMap<u64, ObjectRecord>, change: &ChangeSet) {
    for id in &change.delete {
        objects.remove(id);
    }
    for (id, r) in &change.put {
        objects.insert(*id, r.clone());
    }
}

impl SaveStore for MemStore {
    fn meta(&mut self) -> Result<Option<StoreMeta>, StoreError> {
        Ok(self.meta.clone())
    }
    fn read_all(&mut self) -> Result<Vec<(u64, ObjectRecord)>, StoreError> {
        Ok(self.objects.iter().map(|(&k, v)| (k, v.clone())).collect())
    }
    fn commit(&mut self, change: &ChangeSet) -> Result<(), StoreError> {
        apply(&mut self.objects, change);
        self.meta = Some(change.meta.clone());
        Ok(())
    }
}

// ----- the file backend ---------------------------------------------------------

const FILE_MAGIC: &[u8; 8] = b"COSTORE1";
const FILE_EXT: &str = "costore";

/// FNV-1a, 64 bits: the file's checksum.
fn checksum(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

type FileBody = (StoreMeta, Vec<(u64, ObjectRecord)>);

/// A store kept as whole files in a directory: each commit writes the whole
/// store to a temporary file, flushes it to disk, renames it into place and
/// flushes the directory, then deletes all but the last `keep` files.
/// Opening takes the newest file whose checksum holds, so a crash at any
/// point leaves the last committed save (or the one being written, if its
/// rename reached the disk).
///
/// ```
/// use coreobject::save::{FileStore, SaveStore};
/// use coreobject::{Heap, Object};
/// #[derive(Object, Default)]
/// #[object(save)]
/// struct Coin { value: u32 }
/// let dir = std::env::temp_dir().join(format!("coreobject-doc-{}", std::process::id()));
/// let mut heap = Heap::new();
/// heap.spawn(Coin { value: 7 }).name("Gold").root().create().unwrap();
/// let mut store = FileStore::open(&dir, 2).unwrap();
/// heap.save_store(&mut store).unwrap();
///
/// let mut again = FileStore::open(&dir, 2).unwrap();
/// let mut copy = Heap::new();
/// copy.load_store(&mut again, None).unwrap();
/// let gold = copy.find(None, "Gold").unwrap();
/// assert_eq!(copy[copy.downcast::<Coin>(gold).unwrap()].value, 7);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// ```
#[derive(Debug)]
pub struct FileStore {
    dir: PathBuf,
    keep: usize,
    /// The number of the newest file.
    number: u64,
    meta: Option<StoreMeta>,
    objects: BTreeMap<u64, ObjectRecord>,
}

impl FileStore {
    /// Opens (or creates) the store in `dir`, keeping the last `keep` saves
    /// (at least 1). Leftover temporary files are deleted.
    pub fn open(dir: impl AsRef<Path>, keep: usize) -> Result<FileStore, StoreError> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir)?;
        let mut numbered = Vec::new();
        for e in fs::read_dir(&dir)? {
            let path = e?.path();
            match path.extension().and_then(|x| x.to_str()) {
                Some("tmp") => {
                    let _ = fs::remove_file(&path);
                }
                Some(FILE_EXT) => {
                    if let Some(n) = path
                        .file_stem()
                        .and_then(|s| s.to_str())
                        .and_then(|s| s.strip_prefix("save-"))
                        .and_then(|s| s.parse::<u64>().ok())
                    {
                        numbered.push((n, path));
                    }
                }
                _ => {}
            }
        }
        numbered.sort_unstable_by_key(|f| std::cmp::Reverse(f.0));
        let mut store = FileStore {
            dir,
            keep: keep.max(1),
            number: numbered.first().map_or(0, |f| f.0),
            meta: None,
            objects: BTreeMap::new(),
        };
        for (_, path) in &numbered {
            if let Ok((meta, objects)) = read_file(path) {
                store.meta = Some(meta);
                store.objects = objects.into_iter().collect();
                break;
            }
        }
        Ok(store)
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, n: u64) -> PathBuf {
        self.dir.join(format!("save-{n:016}.{FILE_EXT}"))
    }
}

fn read_file(path: &Path) -> Result<FileBody, StoreError> {
    let bytes = fs::read(path)?;
    if bytes.len() < FILE_MAGIC.len() + 8 || &bytes[..8] != FILE_MAGIC {
        return Err(StoreError::Corrupt(format!(
            "{}: bad magic",
            path.display()
        )));
    }
    let (body, sum) = bytes.split_at(bytes.len() - 8);
    let sum = u64::from_le_bytes(sum.try_into().expect("8 bytes"));
    if checksum(body) != sum {
        return Err(StoreError::Corrupt(format!(
            "{}: checksum mismatch",
            path.display()
        )));
    }
    postcard::from_bytes(&body[8..]).map_err(|e| StoreError::Corrupt(e.to_string()))
}

impl SaveStore for FileStore {
    fn meta(&mut self) -> Result<Option<StoreMeta>, StoreError> {
        Ok(self.meta.clone())
    }

    fn read_all(&mut self) -> Result<Vec<(u64, ObjectRecord)>, StoreError> {
        Ok(self.objects.iter().map(|(&k, v)| (k, v.clone())).collect())
    }

    fn commit(&mut self, change: &ChangeSet) -> Result<(), StoreError> {
        let mut objects = std::mem::take(&mut self.objects);
        let before: Vec<(u64, Option<ObjectRecord>)> = change
            .delete
            .iter()
            .chain(change.put.iter().map(|(k, _)| k))
            .map(|&k| (k, objects.get(&k).cloned()))
            .collect();
        apply(&mut objects, change);
        let res = self.write(&change.meta, &objects);
        if res.is_err() {
            // Put the records back as they were.
            for (k, old) in before.into_iter().rev() {
                match old {
                    Some(r) => objects.insert(k, r),
                    None => objects.remove(&k),
                };
            }
        } else {
            self.meta = Some(change.meta.clone());
        }
        self.objects = objects;
        res
    }
}

impl FileStore {
    fn write(
        &mut self,
        meta: &StoreMeta,
        objects: &BTreeMap<u64, ObjectRecord>,
    ) -> Result<(), StoreError> {
        #[derive(Serialize)]
        struct Body<'a>(&'a StoreMeta, Vec<(u64, &'a ObjectRecord)>);
        let mut out = FILE_MAGIC.to_vec();
        let body = Body(meta, objects.iter().map(|(&k, v)| (k, v)).collect());
        let out = postcard::to_extend(&body, std::mem::take(&mut out))
            .map(|mut o: Vec<u8>| {
                let sum = checksum(&o);
                o.extend_from_slice(&sum.to_le_bytes());
                o
            })
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let n = self.number + 1;
        let tmp = self.dir.join(format!("save-{n:016}.tmp"));
        {
            let mut f = File::create(&tmp)?;
            f.write_all(&out)?;
            f.sync_all()?;
        }
        fs::rename(&tmp, self.path(n))?;
        sync_dir(&self.dir)?;
        self.number = n;
        // Older saves beyond `keep`.
        if n > self.keep as u64 {
            for old in (1..=n - self.keep as u64).rev() {
                let p = self.path(old);
                if fs::remove_file(&p).is_err() {
                    break;
                }
            }
        }
        Ok(())
    }
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

// ----- capture ------------------------------------------------------------------

/// What [`Heap::save_store`](crate::Heap::save_store) or
/// [`Heap::capture`](crate::Heap::capture) found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreSaved {
    /// Records written (created or changed objects).
    pub written: usize,
    /// Of them, objects saved for the first time.
    pub created: usize,
    /// Records deleted (freed objects).
    pub deleted: usize,
    /// Live objects in the save.
    pub objects: usize,
}

/// Whether every outer on `o`'s chain is alive: an object inside one marked
/// as garbage (or found unreachable) goes with it. An outer already freed
/// counts as none, as [`Heap::outer_of`] says.
pub(crate) fn outers_alive(heap: &Heap, o: &ObjectRef<'_>) -> bool {
    let mut cur = heap.outer_of(o.id());
    while let Some(outer) = cur {
        if heap.object_ref(outer).is_none() {
            return false;
        }
        cur = heap.outer_of(outer);
    }
    true
}

/// The class table index of `class`'s current layout, added if new.
pub(crate) fn class_entry(meta: &mut StoreMeta, class: &'static Class, vt: &SaveVtable) -> u32 {
    let found = meta.classes.iter().position(|c| {
        c.name == class.name()
            && c.version == vt.version
            && c.fields.len() == vt.fields.len()
            && c.fields.iter().zip(vt.fields).all(|(a, b)| a == b.name)
    });
    match found {
        Some(i) => i as u32,
        None => {
            meta.classes.push(ClassEntry {
                name: class.name().to_owned(),
                version: vt.version,
                fields: vt.fields.iter().map(|f| f.name.to_owned()).collect(),
            });
            meta.classes.len() as u32 - 1
        }
    }
}

// ----- load ---------------------------------------------------------------------

/// What [`Heap::load_store`](crate::Heap::load_store) made.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreLoaded {
    /// Each loaded object with its persistent id, in id order.
    pub objects: Vec<(PersistentId, AnyObj)>,
}

/// The records of the subtree under `root` (its outer chain reaches it).
fn subtree(
    records: Vec<(u64, ObjectRecord)>,
    root: u64,
) -> Result<Vec<(u64, ObjectRecord)>, StoreError> {
    let outer: FxHashMap<u64, u64> = records.iter().map(|(k, r)| (*k, r.outer)).collect();
    if !outer.contains_key(&root) {
        return Err(StoreError::NotFound(root));
    }
    let mut inside: FxHashMap<u64, bool> = FxHashMap::default();
    inside.insert(root, true);
    let mut keep = Vec::new();
    for (k, r) in records {
        let mut chain = Vec::new();
        let mut cur = k;
        let yes = loop {
            if let Some(&v) = inside.get(&cur) {
                break v;
            }
            if chain.len() > outer.len() {
                return Err(StoreError::Corrupt(format!("outer cycle at {k:#x}")));
            }
            chain.push(cur);
            match outer.get(&cur) {
                Some(&o) if o != 0 => cur = o,
                _ => break false,
            }
        };
        for c in chain {
            inside.insert(c, yes);
        }
        if yes {
            keep.push((k, r));
        }
    }
    Ok(keep)
}

/// Loads the store (or the subtree under `root`) into `heap`.
pub(crate) fn load(
    heap: &mut Heap,
    tr: &mut Tracker,
    store: &mut dyn SaveStore,
    root: Option<PersistentId>,
) -> Result<StoreLoaded, StoreError> {
    if handles::busy() {
        return Err(LoadError::Nested.into());
    }
    let meta = store.meta()?.ok_or(StoreError::Empty)?;
    let mut records = store.read_all()?;
    if let Some(r) = root {
        records = subtree(records, r.bits())?;
    }
    let n = records.len();
    let at: FxHashMap<u64, usize> = records
        .iter()
        .enumerate()
        .map(|(k, (id, _))| (*id, k))
        .collect();

    // The class table as a package's, to plan each layout once.
    let mut pkg = Package {
        format: Format::Binary,
        ..Package::default()
    };
    for c in &meta.classes {
        let name = pkg.strings.len() as u32;
        pkg.strings.push(c.name.clone());
        let mut fields = Vec::with_capacity(c.fields.len());
        for f in &c.fields {
            fields.push(pkg.strings.len() as u32);
            pkg.strings.push(f.clone());
        }
        pkg.classes.push(ClassRec {
            name,
            version: c.version,
            fields,
        });
    }
    let mut plans: Vec<Option<Plan<'_>>> = (0..meta.classes.len()).map(|_| None).collect();
    for (id, r) in &records {
        let c = r.class as usize;
        if c >= plans.len() {
            return Err(StoreError::Corrupt(format!(
                "object {id:#x}: class {c} of {}",
                plans.len()
            )));
        }
        if plans[c].is_none() {
            let name = &meta.classes[c].name;
            let class =
                lookup(name).ok_or_else(|| LoadError::UnknownClass { name: name.clone() })?;
            plans[c] = Some(Plan::new(&pkg, &pkg.classes[c], class)?);
        }
    }
    // Outers among loaded records form a forest.
    let mut colour = vec![0u8; n];
    for k in 0..n {
        let mut chain = Vec::new();
        let mut cur = k;
        loop {
            match colour[cur] {
                2 => break,
                1 => {
                    return Err(StoreError::Corrupt(format!(
                        "outer cycle at {:#x}",
                        records[cur].0
                    )))
                }
                _ => {}
            }
            colour[cur] = 1;
            chain.push(cur);
            match at.get(&records[cur].1.outer) {
                Some(&o) => cur = o,
                None => break,
            }
        }
        for c in chain {
            colour[c] = 2;
        }
    }

    let slots = heap.load_reserve(n)?;
    let handles: Vec<AnyObj> = slots.iter().map(|&i| heap.load_next_handle(i)).collect();
    let class_of = |k: usize| plans[records[k].1.class as usize].as_ref().map(|p| p.class);

    let mut batches: Vec<Option<Box<dyn Batch>>> = plans
        .iter()
        .map(|p| p.as_ref().map(|p| (p.vt.batch)()))
        .collect();
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); plans.len()];
    let (mut file, mut current) = (Vec::new(), Vec::new());
    for (k, (id, r)) in records.iter().enumerate() {
        let c = r.class as usize;
        let plan = plans[c].as_ref().expect("planned above");
        let cx = LoadCx {
            exports: Vec::new(),
            imports: r
                .refs
                .iter()
                .map(|rid| at.get(rid).and_then(|&j| Some((handles[j], class_of(j)?))))
                .collect(),
        };
        let batch = batches[c].as_mut().expect("planned above");
        let res = handles::loading(cx, || {
            plan.split(&r.payload, &mut file, &mut current)
                .and_then(|()| {
                    let mut rd = FieldReader {
                        format: Format::Binary,
                        version: plan.version,
                        current: &current,
                        file: &file,
                    };
                    batch.decode(&mut rd)
                })
        });
        match res {
            Some(Ok(())) => members[c].push(k),
            Some(Err(source)) => {
                heap.load_unreserve(&slots);
                return Err(LoadError::Payload {
                    export: k,
                    path: format!("{id:#x}"),
                    class: plan.class.name().to_owned(),
                    source,
                }
                .into());
            }
            None => {
                heap.load_unreserve(&slots);
                return Err(LoadError::Nested.into());
            }
        }
    }

    let outer_of = |k: usize| at.get(&records[k].1.outer).map(|&o| handles[o]);
    let wanted: Vec<(AnyObj, Option<AnyObj>, &str, u32)> = records
        .iter()
        .enumerate()
        .filter_map(|(k, (_, r))| {
            let (base, number) = r.name.as_ref()?;
            Some((handles[k], outer_of(k), base.as_str(), *number))
        })
        .collect();
    if let Err((k, e)) = heap.load_names(&wanted) {
        heap.load_unreserve(&slots);
        return Err(LoadError::NameTaken {
            path: wanted[k].2.to_owned(),
            reason: e.to_string(),
        }
        .into());
    }

    // From here on nothing fails.
    for (batch, list) in batches.into_iter().zip(&members) {
        let Some(batch) = batch else { continue };
        let places: Vec<Place> = list
            .iter()
            .map(|&k| Place {
                index: slots[k],
                outer: outer_of(k),
                flags: if records[k].1.name.is_some() {
                    flags::NAMED
                } else {
                    0
                },
            })
            .collect();
        batch.place(heap, &places);
    }
    for (k, (id, r)) in records.iter().enumerate() {
        if r.flags & RECORD_POOL != 0 || meta.roots.binary_search(id).is_ok() {
            heap.add_to_root(handles[k])
                .expect("a loaded object is alive");
        }
    }
    heap.load_notify(&handles);
    let mut out = Vec::with_capacity(n);
    for (k, (id, _)) in records.iter().enumerate() {
        tr.assign(handles[k].index(), handles[k].serial(), *id, true);
        if let Some(p) = PersistentId::from_bits(*id) {
            out.push((p, handles[k]));
        }
    }
    tr.next = tr.next.max(meta.next_serial);
    Ok(StoreLoaded { objects: out })
}

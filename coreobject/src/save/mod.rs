//! # Saving and loading object graphs
//!
//! A heap's objects, or a part of them, are written to a **package** (Unreal's
//! `FLinkerSave` writing a `.uasset`) and read back either into a live heap
//! or as an exact copy of the heap that was saved.
//!
//! ```
//! use coreobject::save::Selection;
//! use coreobject::{Heap, Obj, Object, Weak};
//!
//! #[derive(Object, Default)]
//! #[object(save)]
//! struct Level { actors: Vec<Obj<Actor>> }
//!
//! #[derive(Object, Default)]
//! #[object(save)]
//! struct Actor { hp: i32, target: Option<Weak<Actor>> }
//!
//! let mut heap = Heap::new();
//! let level = heap.spawn(Level::default()).name("Level_1").root().create().unwrap();
//! let hero = heap.spawn(Actor { hp: 100, target: None }).outer(level).name("Hero").create().unwrap();
//! let orc = heap.spawn(Actor { hp: 30, target: Some(hero.downgrade()) }).outer(level).create().unwrap();
//! heap[level].actors = vec![hero, orc];
//!
//! // Save the level and everything inside it.
//! let mut bytes = Vec::new();
//! let saved = heap.save(Selection::subtree(level), &mut bytes).unwrap();
//! assert_eq!(saved.exports.len(), 3);
//!
//! // Instantiate it into another heap: new objects, every handle patched.
//! let mut other = Heap::new();
//! let loaded = other.load(&bytes[..]).unwrap();
//! let new_level = other.downcast::<Level>(loaded.objects[0]).unwrap();
//! let actors = other[new_level].actors.clone();
//! assert_eq!(other[actors[1]].hp, 30);
//! assert_eq!(other[actors[1]].target, Some(actors[0].downgrade()));
//! assert_eq!(other.path_name(actors[0]).as_deref(), Some("Level_1.Hero"));
//! assert!(other.is_rooted(new_level));
//! ```
//!
//! ## What a package holds
//!
//! As an Unreal package: a **name table** (every string once), a **class
//! table** (each class's name, version and field names, once per file), an
//! **import table** (objects outside the save that saved objects refer to,
//! each written as Unreal writes imports: its class and name under its
//! outer, itself an import), an **export table** (per saved object: class,
//! outer, name, root and pool flags) and the exports' **payloads**: their
//! fields, each written on its own so that an old layout can be matched to
//! a new one. A handle on disk is one integer, a *package index*: positive
//! for an export, negative for an import, zero for none. The same graph
//! always gives the same bytes, and saving what a load made gives the bytes
//! it was loaded from. The layout is described in `package.rs`.
//!
//! Two forms: [`Format::Binary`] (the default; field values through
//! postcard, chosen over bitcode because a package encodes one field at a
//! time, and bitcode's gains come from encoding many values of one type
//! together) and [`Format::Json`], pretty JSON for diffs and golden files.
//! Loading tells them apart by their first bytes.
//!
//! ## What is saved
//!
//! Classes opt in with `#[object(save)]` (an existing class may hold locks,
//! caches or handles to the outside world; nothing is saved by accident).
//! Every field is written through serde, so field types need `Serialize`
//! and `Deserialize`, and handles ([`Obj`](crate::Obj), [`Weak`](crate::Weak),
//! [`AnyObj`]) anywhere serde walks (a `Vec`, an `Option`, a
//! map, your own structs and enums) are written as package indices by the
//! save in progress, so a handle cannot be forgotten. Serializing a handle
//! outside a save is an error, never its raw index and serial. Use ordered
//! maps (`BTreeMap`) in saved fields if you want the same bytes from the
//! same graph: a `HashMap` iterates in a random order.
//!
//! | attribute | where | meaning |
//! |---|---|---|
//! | `#[object(save)]` | type | the class can be saved |
//! | `#[object(version = N)]` | type | the class's layout version (1 if not given) |
//! | `#[object(migrate = f)]` | type | `f(&mut Self, &FieldReader) -> Result<(), FieldError>`, called when a file's version differs |
//! | `#[object(rename_from = "Old")]` | type | the class was called `Old` in older files (repeatable) |
//! | `#[object(transient)]` | field | not saved; loads as `Default` (or its `default`) |
//! | `#[object(default = path)]` | field | `path()` when the file lacks the field |
//! | `#[object(rename_from = "old")]` | field | the field was called `old` in older files (repeatable) |
//!
//! Per object, a package keeps its class, fields, name, outer, and whether
//! it is rooted or in the disregard-for-GC pool. A whole-heap save leaves
//! out objects whose outer chain holds an object that is no longer alive
//! (they go with it); in an explicit set, such an outer is written as none.
//! It does not keep: listeners,
//! referencers, [`StrongObj`](crate::StrongObj) counts, garbage marks (an
//! object marked as garbage is not saved), class default objects (a handle
//! to one is an import, `Default__Class`), or anything of the collector's
//! state. An exact restore also keeps clusters, slot indices, serials and
//! the slots' generations.
//!
//! ## What a save takes
//!
//! A [`Selection`]: the whole heap, an outer subtree (an object and every
//! object whose outer chain reaches it, the unit a game saves or streams; it
//! costs the subtree's size, not the heap's), or an explicit set. A handle
//! to a live object outside the selection becomes an import, written by
//! path, so the object must be named (and its outers too):
//! [`SaveError::UnnamedImport`] otherwise. [`SaveOptions::weak_outside`]
//! writes weak handles to objects outside the save as none instead. A handle
//! to a freed object is written as none. A subtree leaves out objects in the
//! disregard-for-GC pool (they are imports, found again by path); the whole
//! heap and an explicit set include them.
//!
//! ## Two ways to load
//!
//! * [`Heap::load`](crate::Heap::load) (*instantiate*) creates new objects in
//!   a live heap and patches every handle. Imports are found by path
//!   ([`Heap::find_path`](crate::Heap::find_path)), then by
//!   [`LoadOptions::resolver`] if one is given (Unreal's load-if-find-fails);
//!   an import found nowhere, or found with another class, is **unresolved**:
//!   handles to it load as handles that never resolve (an `Option<Obj<T>>`
//!   is `Some` of such a handle), and it is listed in [`Loaded::unresolved`].
//!   Names are taken as saved; a name taken in the heap is an error.
//! * [`Heap::restore`](crate::Heap::restore) (*exact restore*) makes a new
//!   heap from a whole-heap save: same indices and serials, roots, pool,
//!   names, outers, clusters, and each used free slot's next serial, so
//!   every handle kept anywhere (a network message, an undo log) resolves as
//!   before. The new heap takes the saved heap's tag when no live heap holds
//!   it; when one does (the saved heap is still alive), it takes a fresh
//!   tag, objects keep their indices and generations, and old handles are
//!   foreign to it: translate them with [`Heap::rehome`](crate::Heap::rehome).
//!   Not kept: the order of the free list (freed slots are handed out again
//!   lowest first), never-used slots below the high-water mark, and the
//!   configuration beyond the object cap, pool size and generation width
//!   (see [`Heap::restore_with`](crate::Heap::restore_with)).
//!
//! Every export's slot is reserved before any payload is decoded, so every
//! handle, including non-optional ones and cycles, has its target's final
//! value while its holder is decoded: no placeholders and no creation order.
//!
//! Loading runs no user code but the field types' `Deserialize`, migration
//! hooks and, once the whole graph exists, create listeners. A failed load
//! changes nothing: objects are decoded into a scratch list, names are
//! claimed, and only then are objects placed in their slots.
//!
//! ## Old saves load: the evolution rules
//!
//! A file's class layout is matched to the current one once per class per
//! file, so the per-object cost does not grow with evolution:
//!
//! * a field the file lacks gets `Default`, or its `#[object(default = f)]`;
//! * a field the class no longer has is skipped (a migration hook can still
//!   read it with [`FieldReader::old`]);
//! * a field renamed is found by `#[object(rename_from = "old")]`;
//! * fields may be reordered: they are matched by name;
//! * a class renamed is found by `#[object(rename_from = "Old")]` on the
//!   class (registered under both names);
//! * anything else (a field's type or meaning changed): bump
//!   `#[object(version = N)]` and give `#[object(migrate = f)]`, which runs
//!   after the fields are read when the file's version is not `N`.
//!
//! A field whose type changed without a migration fails to decode, with an
//! error naming the object and the field.
//!
//! ## The class registry
//!
//! Loading finds classes by name in a process-wide registry. Saving
//! registers the classes it writes; a program that loads files it did not
//! write in this run registers its classes first with [`register`]. An
//! unknown class is an error that names it. (Registration is explicit
//! rather than link-time: the link-time registries rely on linker sections
//! that not every target keeps.)
//!
//! ## Errors
//!
//! Bad input is an error, never a panic, undefined behaviour or a half-built
//! heap: a truncated file, a wrong magic or version, an index out of range, a
//! payload that does not decode, an import or outer cycle; each names what
//! and where ([`LoadError`]).
//!
//! ## Saves that cost what changed
//!
//! A package is the whole selection, every time. A game that saves a large
//! world every few minutes saves into a [`SaveStore`] instead: one record
//! per object keyed by its [`PersistentId`], the class table, the roots.
//!
//! * **Persistent ids.** The first save of an object gives it a `u64`: the
//!   store's origin in the high 24 bits, a serial in the low 40 (Unreal's
//!   remote object ids have the same shape). The heap keeps it beside the
//!   object table, [`Heap::persistent_id`](crate::Heap::persistent_id) reads
//!   it, [`Heap::find_persistent`](crate::Heap::find_persistent) finds the
//!   object back, and a load gives each object its saved id. Handles stay
//!   8-byte index + serial; ids live only in stores.
//! * **What changed.** `get_mut` (and `heap[h]`), the one door for mutation,
//!   sets a flag in the object's table entry, once per save: a test of the
//!   flags word the collector's barrier reads anyway. Objects of interior-mutable classes (which can
//!   change behind `&self`) are rewritten at every save, as the collector
//!   re-scans them. The first write also puts the object's slot in the
//!   heap's *dirty set* (one bit per slot), and so do creation, root and
//!   garbage marks, a rename or move, the collector's sweep (an object found
//!   unreachable) and its purge (an object freed, and the inners of a freed
//!   outer). A capture looks only at those slots and at the slots new since
//!   the last one, and compares each with the id kept for it (a slot reused
//!   by a new object is told apart by its serial): it costs what changed,
//!   not the table. Before a heap's first capture the dirty set is empty
//!   and marking it costs a bounds check; the first capture into a store
//!   (and the one after [`Heap::forget_store`](crate::Heap::forget_store))
//!   looks at every slot.
//! * **One commit.** [`Heap::save_store`](crate::Heap::save_store) writes
//!   the changed and created records, deletes the freed ones and updates
//!   the meta in one commit of the store. A record's handles are persistent
//!   ids, so unchanged records stay valid; a handle to an object not in the
//!   store (freed, or inside an object marked as garbage) loads as a handle
//!   that never resolves. Records keep the class layout they were written
//!   with: a store whose records of one class carry several layouts loads
//!   by the evolution rules above.
//! * **Loading** ([`Heap::load_store`](crate::Heap::load_store)) reads every
//!   record, or the outer subtree under one id (a level), and creates the
//!   objects as [`Heap::load`](crate::Heap::load) does.
//!
//! ### Saving while the game runs
//!
//! A save is two halves. The *capture* runs on the game thread: it looks at
//! the dirty slots and encodes the changed objects into a [`ChangeSet`]
//! that owns its bytes. [`SaveStore::commit`] writes the change set, on a
//! worker thread, while the game keeps running and changing objects.
//! Commits must be applied in capture order (one worker, one queue), and a
//! capture passes the previous change set's [`ChangeSet::meta`] on. If a
//! commit fails, [`Heap::forget_store`](crate::Heap::forget_store) makes the
//! next save write everything again.
//!
//! [`Heap::capture`](crate::Heap::capture) captures in one go: the change
//! set is the heap as it is then. A large capture can instead be spread
//! over frames like a GC slice: [`Heap::capture_begin`](crate::Heap::capture_begin),
//! then [`Heap::capture_step`](crate::Heap::capture_step) once a frame with
//! a [`CaptureBudget`] (time, or slots), until a step returns the change
//! set. The game runs between steps, and the change set is **the heap as
//! of the frame the final step ran in**:
//!
//! * steps before the final one encode the slots that were dirty when the
//!   capture began, as they are at that step, and clear their changed flag;
//! * any change after that marks the slot dirty again (the write doors, and
//!   creation, freeing, roots, garbage marks, the collector), and the final
//!   step looks at every slot marked since the capture began: an object
//!   written after its capture is encoded again (the *re-capture rule*), one
//!   freed is dropped from the change set (and deleted from the store if
//!   it was there), one created is added, and objects of interior-mutable
//!   classes are encoded there, as they are in that frame;
//! * so the final step costs what the mutator touched during the capture,
//!   whatever the budget: a mutator writing every frame cannot keep a
//!   capture from ending, it only makes the final step longer. A GC purge
//!   in flight hides the objects it is about to free before its sweep marks
//!   them; the final step then waits up to [`PURGE_WAIT`] steps for the
//!   purge to end, then looks at every slot instead.
//!
//! One capture is in flight per heap: beginning another, saving, loading
//! or forgetting the store makes the old one's next step fail with
//! [`StoreError::StaleCapture`], as does a step on another heap.
//!
//! ### Crash safety
//!
//! A commit is all or nothing. [`FileStore`] writes the whole store to a
//! temporary file, flushes it to disk, renames it into place and flushes
//! the directory, then deletes all but the last N files; opening takes the
//! newest file whose checksum holds. `RedbStore` (feature `redb`, which
//! needs Rust 1.85) commits one durable redb transaction. Either way a
//! process killed at any point leaves the last committed save whole (or
//! the one being committed, if it reached the disk): the test suite kills a
//! saving child process with SIGKILL at random moments and loads the store
//! after each kill.
//!
//! ## Unreal → coreobject
//!
//! | Unreal | here |
//! |---|---|
//! | `FArchive`, `operator<<` | serde, field by field ([`FieldWriter`], [`FieldReader`]) |
//! | `FLinkerSave`, `SavePackage` | [`Heap::save`](crate::Heap::save) |
//! | `FLinkerLoad`, `LoadPackage` | [`Heap::load`](crate::Heap::load) |
//! | `FPackageIndex`, export and import tables | package indices, the export and import tables |
//! | tagged properties, `CustomVersion` | fields matched by name, `#[object(version, migrate)]` |
//! | `CoreRedirects` | `#[object(rename_from = "…")]` |
//! | `UPROPERTY(Transient)` | `#[object(transient)]` |
//! | `SaveGame` flag | `#[object(save)]` on the class |

pub(crate) mod capture;
mod error;
pub(crate) mod handles;
pub(crate) mod ids;
mod package;
mod read;
#[cfg(feature = "redb")]
mod redb_store;
mod registry;
mod schema;
pub(crate) mod store;
mod write;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::array::ObjectRef;
use crate::class::Object;
use crate::handle::AnyObj;

pub use capture::{Capture, CaptureBudget, PURGE_WAIT};
pub use error::{FieldError, LoadError, SaveError};
pub use ids::PersistentId;
pub use package::Format;
pub(crate) use read::{instantiate, restore};
#[cfg(feature = "redb")]
pub use redb_store::RedbStore;
pub use registry::register;
pub use store::{
    ChangeSet, ClassEntry, FileStore, MemStore, ObjectRecord, SaveStore, StoreError, StoreLoaded,
    StoreMeta, StoreSaved, DEFAULT_ORIGIN, RECORD_POOL,
};
pub(crate) use write::build;

/// A class that can be saved: written by `#[object(save)]`.
pub trait SaveObject: Object + Sized {
    /// The layout version (`#[object(version = N)]`, 1 if not given).
    const VERSION: u32;
    /// The saved fields, in declaration order (transient ones left out).
    const FIELDS: &'static [SavedField];
    /// Names the class had in older files (`#[object(rename_from = "…")]`).
    const RENAMED_FROM: &'static [&'static str];
    /// Writes the saved fields, in [`FIELDS`](Self::FIELDS) order.
    fn save_fields(&self, w: &mut FieldWriter<'_>) -> Result<(), SaveError>;
    /// Reads the fields (by the plan the reader was made with), then runs
    /// the migration hook if the file's version differs.
    fn load_fields(r: &mut FieldReader<'_>) -> Result<Self, FieldError>;
}

/// What `#[object(save)]` uses for a field a file lacks when the field has
/// no `default = f`: its type's `Default`, if it has one (found by autoref
/// specialization, so a type without one still compiles: a file without
/// the field is then an error).
#[doc(hidden)]
pub mod __default {
    use std::marker::PhantomData;

    /// The probe.
    pub struct Probe<T>(pub PhantomData<T>);

    impl<T> std::fmt::Debug for Probe<T> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("Probe")
        }
    }

    /// Picked when `T: Default`.
    pub trait Has<T> {
        /// `T::default`.
        fn get(&self) -> Option<fn() -> T>;
    }
    impl<T: Default> Has<T> for Probe<T> {
        fn get(&self) -> Option<fn() -> T> {
            Some(T::default)
        }
    }

    /// Picked otherwise.
    pub trait Lacks<T> {
        /// None.
        fn get(&self) -> Option<fn() -> T>;
    }
    impl<T> Lacks<T> for &Probe<T> {
        fn get(&self) -> Option<fn() -> T> {
            None
        }
    }
}

/// One saved field of a class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SavedField {
    /// Its name.
    pub name: &'static str,
    /// Names it had in older files.
    pub rename_from: &'static [&'static str],
}

/// How a class's objects are saved and loaded, type-erased; one `static`
/// per class, written by `#[object(save)]`.
pub struct SaveVtable {
    pub(crate) version: u32,
    pub(crate) fields: &'static [SavedField],
    pub(crate) renamed_from: &'static [&'static str],
    pub(crate) save: fn(&ObjectRef<'_>, &mut FieldWriter<'_>) -> Result<(), SaveError>,
    /// Starts loading what saving the object will look up for its handles.
    pub(crate) ahead: fn(&ObjectRef<'_>, &mut write::Ahead<'_>),
    pub(crate) batch: fn() -> Box<dyn read::Batch>,
}

impl std::fmt::Debug for SaveVtable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaveVtable")
            .field("version", &self.version)
            .field("fields", &self.fields)
            .finish_non_exhaustive()
    }
}

impl SaveVtable {
    /// The table for `T`.
    #[doc(hidden)]
    pub const fn new<T: SaveObject>() -> SaveVtable {
        SaveVtable {
            version: T::VERSION,
            fields: T::FIELDS,
            renamed_from: T::RENAMED_FROM,
            save: save_one::<T>,
            ahead: write::ahead::<T>,
            batch: read::new_batch::<T>,
        }
    }
}

fn save_one<T: SaveObject>(o: &ObjectRef<'_>, w: &mut FieldWriter<'_>) -> Result<(), SaveError> {
    match o.downcast::<T>() {
        Some(v) => v.save_fields(w),
        None => unreachable!("a class's save table is called with its own objects"),
    }
}

/// Writes one object's fields into the package (used by `#[object(save)]`).
#[derive(Debug)]
pub struct FieldWriter<'a> {
    out: &'a mut Vec<u8>,
    format: Format,
    class: &'static str,
    fields: &'static [SavedField],
    next: usize,
}

impl FieldWriter<'_> {
    /// Writes the next field's value.
    pub fn field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), SaveError> {
        let start = self.out.len();
        // One byte for the length, the common case; moved if it needs more.
        self.out.push(0);
        let res = match self.format {
            Format::Binary => postcard::serialize_with_flavor(value, Append(&mut *self.out))
                .map_err(|e| e.to_string()),
            Format::Json => serde_json::to_writer(&mut *self.out, value).map_err(|e| e.to_string()),
        };
        let field = self.fields.get(self.next).map_or("?", |f| f.name);
        self.next += 1;
        if let Err(message) = res {
            self.out.truncate(start);
            return Err(SaveError::Encode {
                class: self.class,
                field,
                message,
            });
        }
        let len = self.out.len() - start - 1;
        if len < 0x80 {
            self.out[start] = len as u8;
        } else {
            let mut prefix = Vec::with_capacity(10);
            package::put(&mut prefix, len as u64);
            self.out.splice(start..start + 1, prefix);
        }
        Ok(())
    }
}

/// postcard's output straight onto the end of a `Vec`.
struct Append<'a>(&'a mut Vec<u8>);

impl postcard::ser_flavors::Flavor for Append<'_> {
    type Output = ();
    #[inline]
    fn try_push(&mut self, b: u8) -> postcard::Result<()> {
        self.0.push(b);
        Ok(())
    }
    #[inline]
    fn try_extend(&mut self, b: &[u8]) -> postcard::Result<()> {
        self.0.extend_from_slice(b);
        Ok(())
    }
    fn finalize(self) -> postcard::Result<()> {
        Ok(())
    }
}

/// Reads one object's fields from a package (used by `#[object(save)]` and
/// by migration hooks).
#[derive(Debug)]
pub struct FieldReader<'a> {
    format: Format,
    version: u32,
    /// Per current field: its bytes in the file, if the file has it.
    current: &'a [Option<&'a [u8]>],
    /// Per field in the file: its name and bytes.
    file: &'a [(&'a str, &'a [u8])],
}

impl FieldReader<'_> {
    /// The class version the file was written with.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The current layout's field `i`, if the file has it.
    pub fn field<T: DeserializeOwned>(&mut self, i: usize) -> Result<Option<T>, FieldError> {
        match self.current.get(i).copied().flatten() {
            None => Ok(None),
            Some(bytes) => decode(self.format, bytes, "").map(Some).map_err(|mut e| {
                // Named only on the error path: the file's name for it.
                e.field = self
                    .file
                    .iter()
                    .find(|(_, b)| std::ptr::eq(*b, bytes))
                    .map_or("?", |(n, _)| n)
                    .to_owned();
                e
            }),
        }
    }

    /// The field the file calls `name`, whatever the current layout does
    /// with it: for migration hooks, to read a field that was removed or
    /// whose type changed.
    ///
    /// ```
    /// use coreobject::save::{FieldError, FieldReader};
    /// use coreobject::Object;
    /// #[derive(Object, Default)]
    /// #[object(save, version = 2, migrate = from_v1)]
    /// struct Gauge { percent: f32 }
    /// // Version 1 had `fraction: f32` in 0..1.
    /// fn from_v1(g: &mut Gauge, old: &FieldReader<'_>) -> Result<(), FieldError> {
    ///     if let Some(f) = old.old::<f32>("fraction")? {
    ///         g.percent = f * 100.0;
    ///     }
    ///     Ok(())
    /// }
    /// ```
    pub fn old<T: DeserializeOwned>(&self, name: &str) -> Result<Option<T>, FieldError> {
        match self.file.iter().find(|(n, _)| *n == name) {
            None => Ok(None),
            Some((n, bytes)) => decode(self.format, bytes, n).map(Some),
        }
    }
}

fn decode<T: DeserializeOwned>(format: Format, bytes: &[u8], field: &str) -> Result<T, FieldError> {
    let res = match format {
        Format::Binary => match postcard::take_from_bytes::<T>(bytes) {
            Ok((v, [])) => Ok(v),
            Ok((_, rest)) => Err(format!(
                "{} bytes left over: the field's type does not match the file",
                rest.len()
            )),
            Err(e) => Err(e.to_string()),
        },
        Format::Json => serde_json::from_slice(bytes).map_err(|e| e.to_string()),
    };
    res.map_err(|message| FieldError::custom(field, message))
}

/// What [`Heap::save`](crate::Heap::save) writes.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Selection {
    /// Every live object (for [`Heap::restore`](crate::Heap::restore)).
    All,
    /// An object and every object whose outer chain reaches it.
    Subtree(AnyObj),
    /// These objects.
    Set(Vec<AnyObj>),
}

impl Selection {
    /// The whole heap.
    pub fn all() -> Selection {
        Selection::All
    }
    /// An outer subtree.
    pub fn subtree(root: impl Into<AnyObj>) -> Selection {
        Selection::Subtree(root.into())
    }
    /// An explicit set (order and duplicates do not matter).
    pub fn set<H: Into<AnyObj>>(objects: impl IntoIterator<Item = H>) -> Selection {
        Selection::Set(objects.into_iter().map(Into::into).collect())
    }
}

/// An object: its outer subtree.
impl From<AnyObj> for Selection {
    fn from(root: AnyObj) -> Selection {
        Selection::Subtree(root)
    }
}

/// An object: its outer subtree.
impl<T> From<crate::Obj<T>> for Selection {
    fn from(root: crate::Obj<T>) -> Selection {
        Selection::Subtree(root.any())
    }
}

/// A list of objects: that set.
impl From<Vec<AnyObj>> for Selection {
    fn from(objects: Vec<AnyObj>) -> Selection {
        Selection::Set(objects)
    }
}

/// A list of objects: that set.
impl From<&[AnyObj]> for Selection {
    fn from(objects: &[AnyObj]) -> Selection {
        Selection::Set(objects.to_vec())
    }
}

/// What a weak handle to an object outside the save becomes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum WeakOutside {
    /// An import, found again by path on load (the default).
    #[default]
    Import,
    /// None.
    None,
}

/// How to save.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SaveOptions {
    /// Binary (default) or JSON.
    pub format: Format,
    /// Weak handles to objects outside the save.
    pub weak_outside: WeakOutside,
}

impl SaveOptions {
    /// The JSON form.
    pub fn json() -> SaveOptions {
        SaveOptions::default().with_format(Format::Json)
    }

    /// These options in another format.
    pub fn with_format(mut self, format: Format) -> SaveOptions {
        self.format = format;
        self
    }

    /// These options with another rule for weak handles to objects outside
    /// the save.
    ///
    /// ```
    /// use coreobject::save::{SaveOptions, WeakOutside};
    /// let o = SaveOptions::json().with_weak_outside(WeakOutside::None);
    /// assert_eq!(o.weak_outside, WeakOutside::None);
    /// ```
    pub fn with_weak_outside(mut self, rule: WeakOutside) -> SaveOptions {
        self.weak_outside = rule;
        self
    }
}

/// What [`Heap::save`](crate::Heap::save) wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Saved {
    /// The saved objects, in export order: a load's [`Loaded::objects`]
    /// lists their copies in the same order.
    pub exports: Vec<AnyObj>,
    /// The objects outside the save that it refers to, in import order.
    pub imports: Vec<AnyObj>,
    /// Bytes written.
    pub bytes: usize,
}

/// An import (an object outside the package) as the package names it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ImportPath {
    /// Its dotted path (`World.Level_1.Door`).
    pub path: String,
    /// Its class name.
    pub class: String,
}

/// Finds imports that [`Heap::find_path`](crate::Heap::find_path) did not.
pub type Resolver<'a> = Box<dyn FnMut(&ImportPath) -> Option<AnyObj> + 'a>;

/// How to load.
#[derive(Default)]
#[non_exhaustive]
pub struct LoadOptions<'a> {
    /// Called for each import not found by path (or found with another
    /// class); what it returns is used if its class matches.
    pub resolver: Option<Resolver<'a>>,
}

impl std::fmt::Debug for LoadOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadOptions")
            .field("resolver", &self.resolver.is_some())
            .finish()
    }
}

impl<'a> LoadOptions<'a> {
    /// Options with an import resolver.
    pub fn with_resolver(f: impl FnMut(&ImportPath) -> Option<AnyObj> + 'a) -> Self {
        LoadOptions {
            resolver: Some(Box::new(f)),
        }
    }
}

/// What [`Heap::load`](crate::Heap::load) made.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Loaded {
    /// The new object of each export, in export order (the order of
    /// [`Saved::exports`]).
    pub objects: Vec<AnyObj>,
    /// The handle each import resolved to (`None`: unresolved).
    pub imports: Vec<Option<AnyObj>>,
    /// The imports found nowhere: handles to them load as handles that never
    /// resolve.
    pub unresolved: Vec<ImportPath>,
}

//! A [`SaveStore`] in an embedded [redb](https://docs.rs/redb) database:
//! a table of records keyed by persistent id (the base), a log of the
//! saves since the base was last brought up to date (one value per save),
//! and the meta. A commit is one durable redb transaction, so a crash
//! leaves the last commit whole.
//!
//! Why a log: the changed objects of a save are spread over the whole id
//! range, so writing them into the base touches one B-tree page each (10K
//! changed objects of a 1M-object world rewrite about half of its pages).
//! A save appends one value instead, and the base is brought up to date
//! (the log folded into it) in the commit that makes the log hold more
//! records than a quarter of the base.

use std::path::Path;

use redb::{Database, ReadableTable, ReadableTableMetadata, TableDefinition};

use super::store::{ChangeSet, ObjectRecord, SaveStore, StoreError, StoreMeta};

const OBJECTS: TableDefinition<'_, u64, &[u8]> = TableDefinition::new("objects");
const LOG: TableDefinition<'_, u64, &[u8]> = TableDefinition::new("log");
const META: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("meta");
const META_KEY: &str = "meta";
/// (records in the base, records in the log, the log's next key).
const COUNTS_KEY: &str = "counts";

/// One save in the log: records written, ids deleted.
type LogEntry = (Vec<(u64, ObjectRecord)>, Vec<u64>);

fn backend(e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(e.to_string())
}

fn encode<T: serde::Serialize>(v: &T) -> Result<Vec<u8>, StoreError> {
    postcard::to_allocvec(v).map_err(|e| StoreError::Corrupt(e.to_string()))
}

fn decode<'a, T: serde::Deserialize<'a>>(b: &'a [u8]) -> Result<T, StoreError> {
    postcard::from_bytes(b).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// A store in a redb database file (feature `redb`). An incremental save
/// is one transaction that writes the changed records and deletes the
/// freed ones; each commit is durable (flushed to disk) before it returns.
///
/// ```
/// use coreobject::save::{RedbStore, SaveStore};
/// use coreobject::{Heap, Object};
/// #[derive(Object, Default)]
/// #[object(save)]
/// struct Coin { value: u32 }
/// let path = std::env::temp_dir().join(format!("coreobject-redb-doc-{}", std::process::id()));
/// let mut heap = Heap::new();
/// let c = heap.spawn(Coin { value: 1 }).name("Gold").root().create().unwrap();
/// let mut store = RedbStore::open(&path).unwrap();
/// heap.save_store(&mut store).unwrap();
/// heap[c].value = 2;
/// assert_eq!(heap.save_store(&mut store).unwrap().written, 1);
/// drop(store);
///
/// let mut store = RedbStore::open(&path).unwrap();
/// let mut copy = Heap::new();
/// copy.load_store(&mut store, None).unwrap();
/// let gold = copy.downcast::<Coin>(copy.find(None, "Gold").unwrap()).unwrap();
/// assert_eq!(copy[gold].value, 2);
/// # drop(store);
/// # std::fs::remove_file(&path).unwrap();
/// ```
pub struct RedbStore {
    db: Database,
}

impl std::fmt::Debug for RedbStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedbStore").finish_non_exhaustive()
    }
}

impl RedbStore {
    /// Opens the database at `path`, creating it if it does not exist
    /// (redb recovers a database whose last writer crashed).
    pub fn open(path: impl AsRef<Path>) -> Result<RedbStore, StoreError> {
        let db = Database::create(path).map_err(backend)?;
        Ok(RedbStore { db })
    }
}

impl SaveStore for RedbStore {
    fn meta(&mut self) -> Result<Option<StoreMeta>, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        let table = match txn.open_table(META) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(backend(e)),
        };
        match table.get(META_KEY).map_err(backend)? {
            Some(v) => Ok(Some(decode(v.value())?)),
            None => Ok(None),
        }
    }

    fn read_all(&mut self) -> Result<Vec<(u64, ObjectRecord)>, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        let table = match txn.open_table(OBJECTS) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(e) => return Err(backend(e)),
        };
        let mut all = std::collections::BTreeMap::new();
        for e in table.iter().map_err(backend)? {
            let (k, v) = e.map_err(backend)?;
            all.insert(k.value(), decode::<ObjectRecord>(v.value())?);
        }
        match txn.open_table(LOG) {
            Ok(log) => {
                for e in log.iter().map_err(backend)? {
                    let (_, v) = e.map_err(backend)?;
                    let (put, delete): LogEntry = decode(v.value())?;
                    for id in delete {
                        all.remove(&id);
                    }
                    all.extend(put);
                }
            }
            Err(redb::TableError::TableDoesNotExist(_)) => {}
            Err(e) => return Err(backend(e)),
        }
        Ok(all.into_iter().collect())
    }

    fn commit(&mut self, change: &ChangeSet) -> Result<(), StoreError> {
        let txn = self.db.begin_write().map_err(backend)?;
        {
            let mut meta = txn.open_table(META).map_err(backend)?;
            let (mut base, mut logged, mut next): (u64, u64, u64) =
                match meta.get(COUNTS_KEY).map_err(backend)? {
                    Some(v) => decode(v.value())?,
                    None => (0, 0, 0),
                };
            let mut objects = txn.open_table(OBJECTS).map_err(backend)?;
            let mut log = txn.open_table(LOG).map_err(backend)?;
            let records = (change.put.len() + change.delete.len()) as u64;
            if base == 0 || (logged + records) * 4 > base {
                // Fold the log and this save into the base.
                let mut entries: Vec<LogEntry> = Vec::new();
                for e in log.iter().map_err(backend)? {
                    let (_, v) = e.map_err(backend)?;
                    entries.push(decode(v.value())?);
                }
                log.retain(|_, _| false).map_err(backend)?;
                for (put, delete) in &entries {
                    write_base(&mut objects, put, delete)?;
                }
                write_base(&mut objects, &change.put, &change.delete)?;
                base = objects.len().map_err(backend)?;
                logged = 0;
            } else {
                #[derive(serde::Serialize)]
                struct Entry<'a>(&'a [(u64, ObjectRecord)], &'a [u64]);
                let bytes = encode(&Entry(&change.put, &change.delete))?;
                log.insert(next, bytes.as_slice()).map_err(backend)?;
                next += 1;
                logged += records;
            }
            meta.insert(META_KEY, encode(&change.meta)?.as_slice())
                .map_err(backend)?;
            meta.insert(COUNTS_KEY, encode(&(base.max(1), logged, next))?.as_slice())
                .map_err(backend)?;
        }
        txn.commit().map_err(backend)
    }
}

/// Writes records into the base and deletes ids from it.
fn write_base(
    objects: &mut redb::Table<'_, u64, &[u8]>,
    put: &[(u64, ObjectRecord)],
    delete: &[u64],
) -> Result<(), StoreError> {
    for id in delete {
        objects.remove(id).map_err(backend)?;
    }
    let mut buf = Vec::new();
    for (id, r) in put {
        buf.clear();
        let bytes = postcard::to_extend(r, std::mem::take(&mut buf))
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        objects.insert(id, bytes.as_slice()).map_err(backend)?;
        buf = bytes;
    }
    Ok(())
}

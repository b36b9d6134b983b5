//! Object names and the (outer, name) index (Unreal's `FName` and
//! `FUObjectHashTables`, for named objects only: unnamed objects cost
//! nothing here).
//!
//! # Names are integers
//!
//! A name is a **base**, an id into the heap's table of interned strings,
//! plus an optional **number**: `Actor_123` is the base `Actor` with the
//! number 123, as in Unreal's `FName`. The parse rule ([`split`]): a name
//! that ends in `_` and decimal digits has a number when the digits have no
//! leading zero (unless they are exactly `0`), fit in [`Name::MAX_NUMBER`],
//! and leave a non-empty base. Otherwise the whole string is the base: `A_0`
//! is `A` with 0, while `A_01`, `A_`, `_5` and `A_99999999999` are bases
//! without a number. Every name string has exactly one (base, number) form
//! and back, so comparing names compares integers.
//!
//! Each named object's (serial, base, number, outer, slot) sits in a dense
//! array of records ([`Records`], with the record id of each slot in pages
//! indexed by slot), and the index from `(outer, base, number)` to the
//! object ([`Index`]) is one open-addressing array of 4-byte entries, each
//! a record id and the rest of its bits from its key's hash: the key itself
//! is read back from the record when those bits match. An entry in the
//! index is one random cache line, so records whose names need no probe
//! wait outside it until a lookup needs them (see below); naming and
//! freeing allocate nothing past amortized growth and touch no string once
//! the base is interned.
//!
//! # Freeing is lazy
//!
//! The collector frees objects in slot order, so clearing a slot's record is
//! a nearly sequential write; removing its key from the index would be a
//! random access into an array as large as the named population (a cache
//! miss at a million names). So a free clears only the record (its id goes
//! to a free list) and leaves the index entry behind, **stale**: an entry
//! counts only when its record holds a live object under the key looked
//! for, and every reader checks that. A stale entry is overwritten when a
//! key with its hash bits is named again, and all stale entries are dropped
//! when the index would pass 3/4 full: it is then made again from the live
//! records, at most half full (grown, kept or shrunk), like the amortized
//! rehash it replaces.
//!
//! # The table is bounded by what is in use
//!
//! Each base counts the objects named with it. When the count falls to zero
//! the base is forgotten: its string is freed and its id goes to a free list
//! for the next new string, under a new stamp. Every entry takes a stamp
//! that no other entry of any heap in the process ever takes, and a
//! [`Name`] carries its entry's stamp: so a `Name` still holding the old id,
//! or one made by another heap, is refused (never read as another string).
//! Bases interned with [`Heap::intern`](crate::Heap::intern) are kept for
//! the heap's life, like every Unreal `FName`: intern the few bases
//! a program reuses, and name one-off objects with strings. So a program
//! that names objects with ever-new strings keeps only the strings of its
//! live objects.
//!
//! # Generated names skip the probe
//!
//! [`Spawn::unique_name`](crate::Spawn::unique_name) names an object with a
//! base and a number from the base's own counter, from 2^31 up (the fast
//! path of Unreal's `MakeUniqueObjectName` numbers its names out of a
//! program's way too). A program that names an object itself with a number
//! in that range moves the counter past it, so a generated name is unique
//! by construction: creating the object needs no probe of the index, whose
//! line is the one cache miss of a named creation. Once a base's counter
//! runs past the largest number, its generated names are searched for
//! instead, from a cursor kept in the base's entry, so each search resumes
//! where the last one stopped (amortized O(1) a name, never a scan from the
//! start of the range). Records with counted names wait outside the index
//! (see below).
//!
//! # Free names skip the probe too
//!
//! Beside the index, a filter holds the live names (base and number, under
//! any outer): a run of 32 numbers of a base is one tagged word of a hashed
//! line, exact, and names whose line is full go to a plain bit filter
//! ([`Index::filter`]). A name the filter says is free is held by no
//! object, so naming an object with it needs no probe either. A program
//! that names objects in runs of numbers (`Actor_0`, `Actor_1`, …) reads
//! one filter word per 32 names, in cache, instead of one index line per
//! name. A name the filter cannot clear (held, or held until a free, or a
//! bit of the spill filter that another name set) falls back to the probe,
//! after the waiting records enter the index.
//!
//! # Records wait outside the index until a lookup needs them
//!
//! A record whose name needed no probe (generated, or cleared by the
//! filter) is not put in the index at creation: its id joins a list of
//! waiting records, so creating a named object writes its record, its
//! slot's record id and a filter word, and no random index line. The
//! waiting records enter the index together ([`Names::flush`]), in order
//! of their homes (a sweep over the index), or by a rebuild when they would
//! fill it, the first time something needs the index: a probe (a name the
//! filter cannot clear, a class default, a search for a generated name),
//! or a lookup through `&Heap` while more than [`PENDING`] wait (taken
//! under the write lock, only then; a lookup reads fewer one by one). A
//! free of a waiting record leaves it out of the index (a bit per record
//! id says which records wait), so a population named and freed between
//! lookups never touches the index at all. The end of a purge drops the
//! freed ids from the list.
//!
//! Class default objects live in the same index, at the top level (no
//! outer), under names that start with [`DEFAULT_PREFIX`]. User names may
//! not start with it ([`Names::check`]), so a class default's name never
//! collides with a user's, and [`Names::default_name`] picks one that no
//! other class default holds.
//!
//! The string table hashes with `rustc-hash`'s Fx hash, and the index with
//! two multiply-xorshift rounds ([`hash`]): keys are handle bits, small ids
//! and short strings chosen by the program, not by an attacker.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use rustc_hash::FxBuildHasher;

use crate::class::Class;
use crate::error::Error;
use crate::handle::AnyObj;
use crate::trace::prefetch_line;

type FxMap<K, V> = HashMap<K, V, FxBuildHasher>;

/// An object name as integers (Unreal's `FName`): an interned base string
/// and an optional number, so `Actor_123` is the base `Actor` with the
/// number 123. `Copy`, 16 bytes; comparing two names compares integers.
///
/// Make one with [`Heap::intern`](crate::Heap::intern), once per base, then
/// give objects numbered names with [`with_number`](Name::with_number): that
/// costs no string work at all. [`Spawn::name`](crate::Spawn::name) takes a
/// `Name` or a string, and [`Heap::name`](crate::Heap::name) reads an
/// object's name back without allocating.
///
/// A string is split into base and number by Unreal's rule: a trailing `_`
/// and decimal digits are the number if the digits have no leading zero
/// (unless they are exactly `0`), the number is at most
/// [`Name::MAX_NUMBER`], and the base before the `_` is not empty; otherwise
/// the whole string is the base. So `Actor_0` has the number 0, while
/// `Actor_01`, `Actor_` and `_7` have none.
///
/// A `Name` belongs to the heap that made it. One from another heap, and
/// one whose base the heap has forgotten (no object uses it and it was not
/// interned with [`Heap::intern`](crate::Heap::intern)), is refused with
/// [`Error::StaleName`]; it never reads as another string.
///
/// ```
/// use coreobject::{Heap, Object};
/// #[derive(Object, Default)]
/// struct Actor;
/// let heap = Heap::new();
/// let base = heap.intern("Actor").unwrap();
/// let a = heap.spawn(Actor).name(base.with_number(123)).create().unwrap();
/// assert_eq!(heap.name_of(a).as_deref(), Some("Actor_123"));
/// assert_eq!(heap.name(a), Some(base.with_number(123)));
/// assert_eq!(heap.find(None, "Actor_123"), Some(a.any()));
/// // The same string names the same `Name`.
/// assert_eq!(heap.intern("Actor_123").unwrap(), base.with_number(123));
/// assert_eq!(heap.intern("Actor_123").unwrap().number(), Some(123));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Name {
    /// The base's id in the heap's table.
    base: u32,
    /// 0 for no number, else the number + 1.
    number: u32,
    /// The stamp of that table entry when this name was made: unique to
    /// the entry's use for that string, among every heap of the process.
    stamp: u64,
}

impl Name {
    /// The largest number a name can carry: `u32::MAX - 1`.
    pub const MAX_NUMBER: u32 = u32::MAX - 1;

    /// This name's base with the number `n`: for a name made from `Actor`
    /// (or from `Actor_5`), `with_number(7)` is `Actor_7`.
    ///
    /// # Panics
    /// If `n` is above [`Name::MAX_NUMBER`].
    ///
    /// ```
    /// let heap = coreobject::Heap::new();
    /// let wheel = heap.intern("Wheel").unwrap();
    /// assert_eq!(wheel.with_number(0).number(), Some(0));
    /// assert_eq!(heap.name_string(wheel.with_number(3)).as_deref(), Some("Wheel_3"));
    /// ```
    #[inline]
    pub fn with_number(self, n: u32) -> Name {
        assert!(
            n <= Name::MAX_NUMBER,
            "a name's number is at most Name::MAX_NUMBER"
        );
        Name {
            number: n + 1,
            ..self
        }
    }

    /// The number, if the name has one.
    ///
    /// ```
    /// let heap = coreobject::Heap::new();
    /// assert_eq!(heap.intern("Level_3").unwrap().number(), Some(3));
    /// assert_eq!(heap.intern("Level_03").unwrap().number(), None);
    /// assert_eq!(heap.intern("Level").unwrap().number(), None);
    /// ```
    #[inline]
    pub fn number(self) -> Option<u32> {
        self.number.checked_sub(1)
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Name(#{}s{}", self.base, self.stamp)?;
        if let Some(n) = self.number() {
            write!(f, "_{n}")?;
        }
        f.write_str(")")
    }
}

mod sealed {
    /// What [`Spawn::name`](crate::Spawn::name) was given.
    #[derive(Debug)]
    pub enum NameArg {
        Text(String),
        Name(super::Name),
    }
}
pub(crate) use sealed::NameArg;

/// What [`Spawn::name`](crate::Spawn::name) accepts: a string (`&str`,
/// `String`, …), split into base and number when the object is created, or
/// a [`Name`], which costs no string work.
///
/// ```
/// use coreobject::{Heap, Object};
/// #[derive(Object, Default)]
/// struct Gem;
/// let heap = Heap::new();
/// let ruby = heap.intern("Ruby").unwrap();
/// heap.spawn(Gem).name("Opal").create().unwrap();
/// heap.spawn(Gem).name(String::from("Jade_2")).create().unwrap();
/// heap.spawn(Gem).name(ruby.with_number(1)).create().unwrap();
/// assert!(heap.find_path("Ruby_1").is_some());
/// ```
pub trait IntoName {
    #[doc(hidden)]
    fn into_name_arg(self) -> sealed::NameArg;
}

impl IntoName for Name {
    fn into_name_arg(self) -> NameArg {
        NameArg::Name(self)
    }
}
impl IntoName for &Name {
    fn into_name_arg(self) -> NameArg {
        NameArg::Name(*self)
    }
}
impl IntoName for String {
    fn into_name_arg(self) -> NameArg {
        NameArg::Text(self)
    }
}
impl IntoName for &String {
    fn into_name_arg(self) -> NameArg {
        NameArg::Text(self.clone())
    }
}
impl IntoName for &str {
    fn into_name_arg(self) -> NameArg {
        NameArg::Text(self.to_string())
    }
}
impl IntoName for &mut str {
    fn into_name_arg(self) -> NameArg {
        NameArg::Text(self.to_string())
    }
}
impl IntoName for Box<str> {
    fn into_name_arg(self) -> NameArg {
        NameArg::Text(self.into())
    }
}
impl IntoName for Cow<'_, str> {
    fn into_name_arg(self) -> NameArg {
        NameArg::Text(self.into_owned())
    }
}
impl IntoName for Arc<str> {
    fn into_name_arg(self) -> NameArg {
        NameArg::Text(self.to_string())
    }
}
impl IntoName for char {
    fn into_name_arg(self) -> NameArg {
        NameArg::Text(self.to_string())
    }
}

/// The number a name's digits stand for, stored as number + 1 (0: none).
const NO_NUMBER: u32 = 0;

/// The first generated number ([`Spawn::unique_name`](crate::Spawn::unique_name)),
/// as stored: generated names are numbered from 2^31 up, as Unreal's fast
/// unique names are, so that a program's own numbering (`Actor_0`,
/// `Actor_1`, …) never meets them.
const UNIQUE_FIRST: u32 = (1 << 31) + 1;

/// Records waiting to enter the index that a lookup through a shared
/// borrow reads one by one, rather than entering them under the write lock
/// ([`Names::should_flush`]). Batches of up to this many are entered with
/// their lines prefetched together; larger ones in order of their homes.
const PENDING: usize = 32;

/// Splits a name into its base and stored number (number + 1, or 0 for
/// none), by the rule in the [module docs](self).
pub(crate) fn split(s: &str) -> (&str, u32) {
    let b = s.as_bytes();
    let digits = b.iter().rev().take_while(|c| c.is_ascii_digit()).count();
    // Digits, a `_` before them and a non-empty base before that.
    if digits == 0 || digits + 1 >= b.len() || b[b.len() - digits - 1] != b'_' {
        return (s, NO_NUMBER);
    }
    let at = b.len() - digits;
    let d = &s[at..];
    if d.len() > 1 && d.starts_with('0') {
        return (s, NO_NUMBER);
    }
    match d.parse::<u32>() {
        Ok(n) if n <= Name::MAX_NUMBER => (&s[..at - 1], n + 1),
        _ => (s, NO_NUMBER),
    }
}

/// The next entry stamp ([`Entry::stamp`]): shared by every heap of the
/// process, so no two entries, of one heap or of two, ever hold the same
/// stamp (a 64-bit counter does not run out).
static NEXT_STAMP: AtomicU64 = AtomicU64::new(1);

/// A stamp no entry has held.
fn new_stamp() -> u64 {
    NEXT_STAMP.fetch_add(1, Ordering::Relaxed)
}

/// One string of the table.
struct Entry {
    /// `None` while the entry is free.
    text: Option<Arc<str>>,
    /// Objects named with this base.
    uses: u32,
    /// Taken anew (from [`NEXT_STAMP`]) each time the entry is given a
    /// string; a [`Name`] must match it.
    stamp: u64,
    /// Interned by the user: kept for the heap's life.
    pinned: bool,
    /// Whether a user may name an object with the base alone, and with the
    /// base and a number ([`Names::check`] on each form).
    plain_ok: bool,
    numbered_ok: bool,
    /// The next generated number ([`Names::claim_unique`]), stored as the
    /// number plus one: from [`UNIQUE_FIRST`] up, and past every number in
    /// that range that an object was given by name. Once the range is used
    /// up, the number the search for a free one tries first.
    next_unique: u32,
    /// The counter ran past [`Name::MAX_NUMBER`]: generated names are
    /// searched for, from `next_unique` on.
    used_up: bool,
}

/// The interned strings.
#[derive(Default)]
struct Table {
    entries: Vec<Entry>,
    /// Free entry ids, reused last in first out.
    free: Vec<u32>,
    by_text: FxMap<Arc<str>, u32>,
}

impl Table {
    fn get(&self, text: &str) -> Option<u32> {
        self.by_text.get(text).copied()
    }

    /// The live entry `name` refers to.
    fn entry(&self, name: Name) -> Option<&Entry> {
        let e = self.entries.get(name.base as usize)?;
        (e.text.is_some() && e.stamp == name.stamp).then_some(e)
    }

    /// The id of `text`, adding it (with no uses) if it is new.
    fn intern(&mut self, text: &str) -> u32 {
        if let Some(id) = self.get(text) {
            return id;
        }
        let arc: Arc<str> = Arc::from(text);
        let entry = Entry {
            text: Some(arc.clone()),
            uses: 0,
            stamp: new_stamp(),
            pinned: false,
            plain_ok: Names::check(text).is_ok(),
            numbered_ok: Names::check(&format!("{text}_0")).is_ok(),
            next_unique: UNIQUE_FIRST,
            used_up: false,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.entries[id as usize] = entry;
                id
            }
            None => {
                let id = u32::try_from(self.entries.len()).expect("fewer than 2^32 names");
                self.entries.push(entry);
                id
            }
        };
        self.by_text.insert(arc, id);
        id
    }

    fn name(&self, id: u32, number: u32) -> Name {
        Name {
            base: id,
            number,
            stamp: self.entries[id as usize].stamp,
        }
    }

    /// Drops one use of `id`, forgetting it if that was the last and it is
    /// not pinned.
    fn release(&mut self, id: u32) {
        let e = &mut self.entries[id as usize];
        e.uses -= 1;
        if e.uses == 0 && !e.pinned {
            self.forget(id);
        }
    }

    fn forget(&mut self, id: u32) {
        let e = &mut self.entries[id as usize];
        let text = e.text.take().expect("forgetting a live entry");
        self.by_text.remove(&*text);
        // Its next string takes a new stamp, so no old `Name` matches it.
        self.free.push(id);
    }

    fn text(&self, id: u32) -> &Arc<str> {
        self.entries[id as usize]
            .text
            .as_ref()
            .expect("a used entry has its text")
    }

    /// Writes base and number as one string.
    fn display(&self, id: u32, number: u32) -> Cow<'_, Arc<str>> {
        let text = self.text(id);
        match number.checked_sub(1) {
            None => Cow::Borrowed(text),
            Some(n) => Cow::Owned(Arc::from(format!("{text}_{n}"))),
        }
    }
}

/// One named object's record: its serial (0 once it is freed), its base id
/// and stored number, its outer's bits (0: none) and its slot. The index
/// keeps only record ids; a key is read back from here.
#[derive(Clone, Copy, Default)]
struct Rec {
    serial: u32,
    base: u32,
    number: u32,
    /// The outer's bits, low and high half (`u32`s keep the record at 24
    /// bytes).
    outer: [u32; 2],
    slot: u32,
}

impl Rec {
    /// The outer, as a handle.
    fn outer_obj(&self) -> Option<AnyObj> {
        AnyObj::from_bits(self.outer())
    }

    #[inline]
    fn outer(&self) -> u64 {
        u64::from(self.outer[0]) | (u64::from(self.outer[1]) << 32)
    }

    /// Whether this record names a live object under `key`.
    #[inline]
    fn is(&self, key: &Key) -> bool {
        self.serial != 0
            && self.base == key.base
            && self.number == key.number
            && self.outer() == key.outer
    }

    #[inline]
    fn hash(&self) -> u64 {
        hash(self.outer(), self.base, self.number)
    }
}

/// Slots per page of [`Records::by_slot`].
const PAGE: usize = 1024;

/// The named objects' records, dense: a record id is taken from a free
/// list when an object is named and given back when it is freed, so ids
/// stay below the most objects named at once. Beside them, per slot, the
/// id of its record plus one (0: none), in pages of [`PAGE`] slots
/// allocated when the first named object lands in them and kept for the
/// heap's life: 4 bytes per slot below the highest named one, nothing for
/// a heap without names.
#[derive(Default)]
struct Records {
    recs: Vec<Rec>,
    /// Ids of freed records, reused last in first out.
    free: Vec<u32>,
    by_slot: Vec<Option<Box<[u32]>>>,
    /// One bit per record id: set while the record is live. 128 KiB at a
    /// million records, so a tidy step ([`Names::tidy_step`]) tells most
    /// stale index entries from live ones without reading their records.
    live: Vec<u64>,
}

impl Records {
    /// The record id of slot `index`, if it holds a named object.
    #[inline]
    fn id_of(&self, index: u32) -> Option<u32> {
        let i = index as usize;
        let page = self.by_slot.get(i / PAGE)?.as_ref()?;
        page[i % PAGE].checked_sub(1)
    }

    /// The live record of slot `index`.
    #[inline]
    fn named(&self, index: u32) -> Option<&Rec> {
        let r = &self.recs[self.id_of(index)? as usize];
        (r.serial != 0).then_some(r)
    }

    /// The object named `key`, if record `id` holds it.
    #[inline]
    fn holder(&self, id: u32, key: &Key) -> Option<AnyObj> {
        let r = self.recs.get(id as usize).filter(|r| r.is(key))?;
        Some(AnyObj::new(r.slot, NonZeroU32::new(r.serial)?))
    }

    /// A new record for `rec`; its id.
    #[inline]
    fn add(&mut self, rec: Rec) -> u32 {
        let id = match self.free.pop() {
            Some(id) => {
                self.recs[id as usize] = rec;
                id
            }
            None => {
                let id = u32::try_from(self.recs.len()).expect("fewer than 2^32 named objects");
                self.recs.push(rec);
                id
            }
        };
        let i = rec.slot as usize;
        if self.by_slot.len() <= i / PAGE {
            self.by_slot.resize_with(i / PAGE + 1, || None);
        }
        let page = self.by_slot[i / PAGE].get_or_insert_with(|| vec![0; PAGE].into_boxed_slice());
        page[i % PAGE] = id + 1;
        let word = id as usize / 64;
        if self.live.len() <= word {
            self.live.resize(word + 1, 0);
        }
        self.live[word] |= 1 << (id % 64);
        id
    }

    /// Whether record `id` may be live: false proves it free.
    #[inline]
    fn maybe_live(&self, id: u32) -> bool {
        self.live
            .get(id as usize / 64)
            .is_some_and(|w| w & (1 << (id % 64)) != 0)
    }

    /// Frees the record of slot `index`; its id and base id, if it had one.
    #[inline]
    fn remove(&mut self, index: u32) -> Option<(u32, u32)> {
        let i = index as usize;
        let page = self.by_slot.get_mut(i / PAGE)?.as_mut()?;
        let id = std::mem::take(&mut page[i % PAGE]).checked_sub(1)?;
        let r = &mut self.recs[id as usize];
        r.serial = 0;
        self.live[id as usize / 64] &= !(1 << (id % 64));
        self.free.push(id);
        Some((id, r.base))
    }

    /// Live records (named objects).
    #[inline]
    fn live(&self) -> usize {
        self.recs.len() - self.free.len()
    }
}

/// An index key: outer bits (0 for none), base id and stored number, with
/// its hash and, once [`claim`](Names::claim)ed, the index entry it takes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Key {
    outer: u64,
    base: u32,
    number: u32,
    hash: u64,
    /// The entry to fill, and whether it holds a stale entry now.
    at: usize,
    reuse: bool,
}

impl Key {
    /// [`Key::at`] of a generated name: it waits among the pending records.
    const PENDING: usize = usize::MAX;

    #[inline]
    fn new(outer: Option<AnyObj>, base: u32, number: u32) -> Key {
        let outer = outer.map_or(0, AnyObj::to_bits);
        Key {
            outer,
            base,
            number,
            hash: hash(outer, base, number),
            at: 0,
            reuse: false,
        }
    }
}

/// log2 of [`RUN`].
const RUN_BITS: u32 = 4;

/// Names that share a home run of the index: [`RUN`] consecutive numbers
/// of one base under one outer (`Actor_16` … `Actor_31` in `Level_1`) have
/// consecutive home entries, 64 bytes of 4-byte entries, so a program that
/// names objects in runs of numbers touches one or two index lines per
/// [`RUN`] names instead of one line per name.
const RUN: u32 = 1 << RUN_BITS;

/// Hashes a key: two multiply-xorshift rounds over the outer, the base and
/// the number's bits above its low [`RUN_BITS`], whose result's low
/// [`RUN_BITS`] bits are replaced by the number's own. So the keys of a
/// run ([`RUN`]) share every bit but those, which [`Index::home`] puts at
/// the bottom of the home entry, and the runs of different outers, bases
/// or numbers land far apart.
#[inline]
fn hash(outer: u64, base: u32, number: u32) -> u64 {
    let name = (u64::from(base) << 32) | u64::from(number >> RUN_BITS);
    let mut h = outer.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ name;
    h ^= h >> 32;
    h = h.wrapping_mul(0xD6E8_FEB8_6659_FD93);
    h ^= h >> 32;
    h = h.wrapping_mul(0xD6E8_FEB8_6659_FD93);
    h ^= h >> 32;
    (h & !u64::from(RUN - 1)) | u64::from(number & (RUN - 1))
}

/// log2 of the numbers of one base that share a filter word: a group.
const GROUP_BITS: u32 = 5;

/// Words of one line of the filter: a group's word is one of them.
const LINE: usize = 8;

/// A hash of the group of the name `(base, number)`: its base and the
/// number's bits above the low `shift`.
#[inline]
fn group_hash(base: u32, number: u32, shift: u32) -> u64 {
    let group = (u64::from(base) << 32) | u64::from(number >> shift);
    let mut h = group.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    h ^= h >> 29;
    h = h.wrapping_mul(0xD6E8_FEB8_6659_FD93);
    h ^ (h >> 32)
}

/// The first word of the filter line of the name `(base, number)` in a
/// filter of `words` words (a power of two, at least [`LINE`]), and its
/// group's tag: odd, so never 0 (a free word).
#[inline]
fn filter_line(base: u32, number: u32, words: usize) -> (usize, u32) {
    let h = group_hash(base, number, GROUP_BITS);
    let line = (h >> 32) as usize & (words / LINE).wrapping_sub(1);
    (line * LINE, (h as u32) | 1)
}

/// The word of the name `(base, number)` in the spill filter of `words`
/// words (a power of two): a hash of the base and the number's bits above
/// the low six.
#[inline]
fn spill_word(base: u32, number: u32, words: usize) -> usize {
    (group_hash(base, number, 6) >> 32) as usize & words.wrapping_sub(1)
}

/// Marks the name `(base, number)` as held in the filter `filter` with its
/// spill filter `spill` (see [`Index::hold`]).
#[inline]
fn hold_in(filter: &mut [u64], spill: &mut [u64], base: u32, number: u32) {
    let (line, tag) = filter_line(base, number, filter.len());
    let bit = 1u64 << (number & ((1 << GROUP_BITS) - 1));
    for w in &mut filter[line..line + LINE] {
        let t = (*w >> 32) as u32;
        if t == tag {
            *w |= bit;
            return;
        }
        if t == 0 {
            *w = (u64::from(tag) << 32) | bit;
            return;
        }
    }
    let word = spill_word(base, number, spill.len());
    spill[word] |= 1 << (number & 63);
}

/// Work units of a tidy step ([`Names::tidy_step`]) for one index entry
/// looked at; a record read to tell a live entry from a stale one (a
/// random cache line) costs [`READ_COST`].
const READ_COST: usize = 16;

/// The index from (outer, base, number) to the object: open addressing
/// with linear probing over one array of 4-byte entries, 0 for empty. With
/// `2^bits` entries, an entry is a record id plus one in its low `bits`
/// bits and, above them, `32 - bits` bits of its key's hash (the tag); the
/// top `bits` bits of the hash pick the key's first entry. The key itself
/// is read back from the record when a tag matches. So naming an object
/// with a new name touches one cache line of the index (the probe reads the
/// line the insert then writes), and a million names fit in 8 MiB.
///
/// Entries are never emptied one by one (see the module docs on lazy
/// freeing); a stale entry is overwritten when a probe for a key with its
/// tag meets it, and all are dropped by [`rebuild`](Self::rebuild).
#[derive(Default)]
struct Index {
    /// A power of two long (at most 2^32), or empty.
    entries: Vec<u32>,
    /// log2 of the length.
    bits: u32,
    /// Entries that are not empty (live and stale).
    used: usize,
    /// Stale entries: one per named object freed since the last rebuild,
    /// less those overwritten.
    stale: usize,
    /// A filter over the names (base and number, under any outer) of every
    /// live record, in the index or waiting: [`FILTER_BITS`] bits per
    /// record or more, sized with the records array, not with the index. A
    /// name it says is free is held by no live object under any outer, so
    /// naming an object with it needs no probe, and its record can wait
    /// outside the index (see [`Names::take_key`]).
    ///
    /// A **group** is 2^[`GROUP_BITS`] consecutive numbers of one base
    /// (`Actor_32` … `Actor_63`). A hash of the group picks a line of
    /// [`LINE`] words, and the group takes the first free word of it: a
    /// 32-bit tag of the group above a bitmap of its numbers held. So a
    /// run of numbers is recorded exactly, one word per 32 names, and a
    /// name of another group that hashes to the same line is not mistaken
    /// for it (its tag differs): names in runs never collide, where a
    /// plain bit per name would set whole words that other runs then hit,
    /// each hit a flush of the waiting records. A group that finds its line
    /// full goes to the `spill` filter instead (one bit per name, 64
    /// numbers to a hashed word), which a lookup reads only when the line
    /// is full. Freed names keep their bits until the filter is made again
    /// from the live records: a stale bit only costs a probe.
    filter: Vec<u64>,
    /// The spill filter: half as many words as `filter`.
    spill: Vec<u64>,
    /// The filter being made again beside `filter`, a piece per tidy step
    /// ([`Names::tidy_step`]), and its spill filter; kept between builds
    /// (the one swapped out), so that a build allocates nothing once the
    /// filter's size is settled.
    next_filter: Vec<u64>,
    next_spill: Vec<u64>,
}

/// Filter bits per record, at least: 1-2 MiB at a million records, in
/// cache where the index is not. The filter is sized by the records array
/// (its length: the most records held at once, which it keeps), not by the
/// index, since records wait outside the index until a lookup needs them
/// ([`Names::flush`]); so a program that names and frees a population over
/// and over does not grow the filter again each time.
const FILTER_BITS: usize = 16;

/// Filter words for `records` records: a power of two, at least [`LINE`].
#[inline]
fn filter_words(records: usize) -> usize {
    (records * FILTER_BITS)
        .div_ceil(64)
        .max(LINE)
        .next_power_of_two()
}

/// Index entries in one window of [`order_by_home`]: 4 KiB.
const WINDOW_BITS: u32 = 10;

/// Puts `items` (an entry's home in the high 32 bits, anything in the low
/// ones) in order of their home's window of 2^[`WINDOW_BITS`] entries, for
/// an index of `2^bits` entries: one counting pass over the windows when
/// there are about as many items as windows, else a sort. Placing the
/// items in that order is a sweep over the index, window after window,
/// each window's lines loaded once, instead of one random line per item.
fn order_by_home(items: &mut Vec<u64>, scratch: &mut Vec<u64>, bits: u32) {
    if bits <= WINDOW_BITS || items.len() < 2 {
        return;
    }
    let windows = 1usize << (bits - WINDOW_BITS);
    if items.len() < windows {
        items.sort_unstable_by_key(|&it| it >> 32);
        return;
    }
    let window = |it: u64| ((it >> 32) >> WINDOW_BITS) as usize;
    let mut starts = vec![0u32; windows + 1];
    for &it in items.iter() {
        starts[window(it) + 1] += 1;
    }
    for w in 0..windows {
        starts[w + 1] += starts[w];
    }
    scratch.clear();
    scratch.resize(items.len(), 0);
    for &it in items.iter() {
        let at = &mut starts[window(it)];
        scratch[*at as usize] = it;
        *at += 1;
    }
    std::mem::swap(items, scratch);
}

impl Index {
    #[inline]
    fn mask(&self) -> usize {
        self.entries.len() - 1
    }

    /// The first entry a key with hash `h` probes: its run's (the top
    /// `bits - RUN_BITS` bits of the hash, times [`RUN`]) plus the low
    /// [`RUN_BITS`] bits of the hash (of the number). The index has at
    /// least [`RUN`] entries.
    #[inline]
    fn home(&self, h: u64) -> usize {
        ((((h >> RUN_BITS) >> (64 - self.bits)) << RUN_BITS) | (h & u64::from(RUN - 1))) as usize
    }

    /// The entry of record `id` under a key with hash `h`.
    #[inline]
    fn entry(&self, h: u64, id: u32) -> u32 {
        let tag = u64::from(h as u32) << self.bits;
        (tag | (u64::from(id) + 1)) as u32
    }

    /// Whether entry `e` and hash `h` have the same tag.
    #[inline]
    fn same_tag(&self, e: u32, h: u64) -> bool {
        ((u64::from(e) ^ (u64::from(h as u32) << self.bits)) & 0xFFFF_FFFF) >> self.bits == 0
    }

    /// The record id in entry `e`.
    #[inline]
    fn id(&self, e: u32) -> u32 {
        ((u64::from(e) & ((1 << self.bits) - 1)) - 1) as u32
    }

    /// Whether a live record may hold the name `(base, number)` under some
    /// outer: false proves that none does. Objects named in a run of
    /// numbers (`Actor_0`, `Actor_1`, …, or generated names) read one word
    /// per 32 of them, in cache where an index line would be a miss per
    /// name. A group's word, if it has one, comes before any free word of
    /// its line (words are taken in order and kept until the filter is
    /// made again), so the scan stops at the first free one.
    #[inline]
    fn may_hold(&self, base: u32, number: u32) -> bool {
        if self.filter.is_empty() {
            return false;
        }
        let (line, tag) = filter_line(base, number, self.filter.len());
        let bit = 1u64 << (number & ((1 << GROUP_BITS) - 1));
        for &w in &self.filter[line..line + LINE] {
            let t = (w >> 32) as u32;
            if t == tag {
                return w & bit != 0;
            }
            if t == 0 {
                return false;
            }
        }
        let word = spill_word(base, number, self.spill.len());
        self.spill[word] & (1 << (number & 63)) != 0
    }

    /// Marks the name `(base, number)` as held in the filter: in its
    /// group's word, taking the first free one of its line if it has none,
    /// or in the spill filter if the line is full.
    #[inline]
    fn hold(&mut self, base: u32, number: u32) {
        hold_in(&mut self.filter, &mut self.spill, base, number);
    }

    /// Whether one more entry keeps the load at most 3/4.
    #[inline]
    fn has_room(&self) -> bool {
        (self.used + 1) * 4 <= self.entries.len() * 3
    }

    /// Probes for `key`: the live object holding it, or else the entry a
    /// new object named `key` takes (the first stale entry met with its
    /// tag, or the empty one that ends the probe). The index must not be
    /// full.
    #[inline]
    fn probe(&self, recs: &Records, key: &Key) -> Result<(usize, bool), AnyObj> {
        let mask = self.mask();
        let mut at = self.home(key.hash);
        let mut reuse = None;
        loop {
            let e = self.entries[at];
            if e == 0 {
                return Ok(reuse.map_or((at, false), |r| (r, true)));
            }
            if self.same_tag(e, key.hash) {
                let id = self.id(e);
                if let Some(o) = recs.holder(id, key) {
                    return Err(o);
                }
                if reuse.is_none() && !self.current(recs, e) {
                    reuse = Some(at);
                }
            }
            at = (at + 1) & mask;
        }
    }

    /// Whether entry `e` is its record's own: the record is live and its
    /// key's entry is `e`.
    #[inline]
    fn current(&self, recs: &Records, e: u32) -> bool {
        let id = self.id(e);
        recs.recs
            .get(id as usize)
            .is_some_and(|r| r.serial != 0 && self.entry(r.hash(), id) == e)
    }

    /// The live object holding `key`.
    #[inline]
    fn find(&self, recs: &Records, key: &Key) -> Option<AnyObj> {
        if self.entries.is_empty() {
            return None;
        }
        self.probe(recs, key).err()
    }

    /// Makes the index again from the live records, at most half full and
    /// with room for every record id: grows it, keeps its size or shrinks
    /// it; and the filter from them too, at its size for the records array.
    /// The records are read in order, and their entries placed in order of
    /// their homes ([`order_by_home`]): a sweep over the index.
    fn rebuild(&mut self, recs: &Records) {
        let live = recs.live();
        let len = (2 * (live + 1))
            .max(recs.recs.len() + 2)
            .next_power_of_two()
            .max(16);
        if self.entries.len() == len {
            // Cheaper than fresh pages: no page faults.
            self.entries.fill(0);
        } else {
            self.entries = vec![0; len];
        }
        self.bits = len.trailing_zeros();
        self.used = 0;
        self.stale = 0;
        self.clear_filter(filter_words(recs.recs.len() + 1));
        let mut items = Vec::with_capacity(live);
        for (id, r) in recs.recs.iter().enumerate() {
            if r.serial == 0 {
                continue;
            }
            let h = r.hash();
            self.hold(r.base, r.number);
            items.push(((self.home(h) as u64) << 32) | u64::from(self.entry(h, id as u32)));
        }
        order_by_home(&mut items, &mut Vec::new(), self.bits);
        for it in items {
            self.place((it >> 32) as usize, it as u32);
        }
    }

    /// Empties the filter, with at least `words` words: its size is kept
    /// if larger (it is sized by the records array, which never shrinks).
    fn clear_filter(&mut self, words: usize) {
        if self.filter.len() >= words {
            self.filter.fill(0);
            self.spill.fill(0);
        } else {
            self.filter = vec![0; words];
            self.spill = vec![0; words / 2];
        }
    }

    /// Makes the filter again from the live records, without their freed
    /// names' bits, with at least `words` words.
    fn rebuild_filter(&mut self, recs: &Records, words: usize) {
        self.clear_filter(words);
        for r in &recs.recs {
            if r.serial != 0 {
                self.hold(r.base, r.number);
            }
        }
    }

    /// Fills entry `at` (empty, or stale if `reuse`) for record `id` under
    /// a key with hash `h`.
    #[inline]
    fn put(&mut self, at: usize, reuse: bool, h: u64, id: u32) {
        self.entries[at] = self.entry(h, id);
        if reuse {
            self.stale = self.stale.saturating_sub(1);
        } else {
            self.used += 1;
        }
    }

    /// Puts entry `e` in the first free entry from `at`.
    #[inline]
    fn place(&mut self, mut at: usize, e: u32) {
        let mask = self.mask();
        while self.entries[at] != 0 {
            at = (at + 1) & mask;
        }
        self.entries[at] = e;
        self.used += 1;
    }

    /// Drops the stale entries of the run of entries from `at` (not empty)
    /// to the next empty one: if any of them is proven stale by the live
    /// bits of the records (no read), every entry of the run is checked
    /// against its record, the run is emptied and the live ones are placed
    /// again from their homes, in order. Returns the entry after the run,
    /// the run's length and the work done (entries looked at, plus
    /// [`READ_COST`] per record read).
    ///
    /// Linear probing stays intact: an entry's path from its home to it
    /// holds no empty entry. Runs after the empty one are not touched, and
    /// their paths do not cross it. A live entry of the run has its home in
    /// the run or before it (in entries still full), so placed again in
    /// order it lands at its old entry or before, inside the run; `at` may
    /// be in the middle of a longer run (entries named since the sweep
    /// passed), which the same holds for.
    fn sweep_run(
        &mut self,
        recs: &Records,
        at: usize,
        kept: &mut Vec<u64>,
    ) -> (usize, usize, usize) {
        let mask = self.mask();
        let mut end = at;
        let mut proven = false;
        while self.entries[end] != 0 {
            proven |= !recs.maybe_live(self.id(self.entries[end]));
            end = (end + 1) & mask;
        }
        let len = (end.wrapping_sub(at)) & mask;
        if !proven {
            return (end, len, len);
        }
        kept.clear();
        let mut work = len;
        let mut p = at;
        while p != end {
            let e = self.entries[p];
            let id = self.id(e);
            if recs.maybe_live(id) {
                work += READ_COST;
                let r = &recs.recs[id as usize];
                let h = r.hash();
                if r.serial != 0 && self.entry(h, id) == e {
                    kept.push(((self.home(h) as u64) << 32) | u64::from(e));
                }
            }
            self.entries[p] = 0;
            p = (p + 1) & mask;
        }
        self.used -= len;
        self.stale = self.stale.saturating_sub(len - kept.len());
        for &it in kept.iter() {
            self.place((it >> 32) as usize, it as u32);
        }
        (end, len, work)
    }
}

/// Where the index's filter is, kept beside the lock that guards it (in
/// the heap) so that a creation can start loading the filter word its
/// name reads before it takes the lock: the load then overlaps the work
/// before the claim. Read without synchronization, so possibly out of
/// date: it is only ever used for a prefetch, a hint that never faults.
#[derive(Default)]
pub(crate) struct Hint {
    filter: AtomicUsize,
    words: AtomicUsize,
}

impl Hint {
    /// Starts loading the filter word of `name`, if it is a [`Name`] (a
    /// string needs the table to find its base).
    #[inline]
    pub(crate) fn prefetch(&self, name: &NameArg) {
        let NameArg::Name(n) = name else { return };
        if cfg!(miri) {
            // A prefetch does nothing under miri, and the address is made
            // from an integer, which strict provenance refuses.
            return;
        }
        let filter = self.filter.load(Ordering::Relaxed);
        if filter == 0 {
            return;
        }
        let words = self.words.load(Ordering::Relaxed);
        if words < LINE {
            return;
        }
        let (line, _) = filter_line(n.base, n.number, words);
        prefetch_line((filter as *const u64).wrapping_add(line));
    }

    /// Records where the filter of `names` is now.
    #[inline]
    pub(crate) fn update(&self, names: &Names) {
        let filter = names.index.filter.as_ptr() as usize;
        if self.filter.load(Ordering::Relaxed) != filter
            || self.words.load(Ordering::Relaxed) != names.index.filter.len()
        {
            self.words
                .store(names.index.filter.len(), Ordering::Relaxed);
            self.filter.store(filter, Ordering::Relaxed);
        }
    }
}

#[derive(Default)]
pub(crate) struct Names {
    table: Table,
    /// (outer, base, number) → object; entries whose object was freed stay
    /// (stale) until overwritten or dropped by a rebuild.
    index: Index,
    /// The named objects' serials, bases, numbers and outers.
    recs: Records,
    /// Ids of records not in the index yet, in the order they were named:
    /// every record whose name needed no probe (a generated name, or one
    /// the filter proved free) waits here until something needs the index
    /// ([`flush`](Self::flush)). An id counts only while its bit in
    /// `waiting` is set: a freed record's id stays in the list, and may
    /// come again if the id is reused, until the list is entered or
    /// compacted.
    pending: Vec<u32>,
    /// One bit per record id: the record is live and waits in `pending`.
    waiting: Vec<u64>,
    /// Records waiting (bits set in `waiting`).
    waiting_live: usize,
    /// Names freed since the filter was last made from the records (their
    /// bits are still set).
    filter_stale: usize,
    /// Scratch space of [`order_by_home`] and of a tidy step's runs.
    scratch: Vec<u64>,
    /// The tidy begun at the end of a purge, done in steps
    /// ([`tidy_step`](Self::tidy_step)).
    tidy: Tidy,
    /// Numbers tried by the searches for generated names of used-up bases.
    #[cfg(test)]
    searched: u64,
}

/// A tidy in flight ([`Names::tidy_begin`]): a sweep of the index that drops
/// its stale entries a run at a time, and a filter made again beside the
/// one in use, a piece at a time. Between steps, everything reads the
/// index and the filter in use as before: the sweep leaves the index
/// valid after each run, and the filter in use only ever gains bits until
/// the new one replaces it.
#[derive(Default)]
struct Tidy {
    sweep: Option<Sweep>,
    build: Option<Build>,
}

/// The index sweep: the next entry to look at, entries left to look at,
/// and the index's length when it began (a rebuild ends it).
#[derive(Clone, Copy)]
struct Sweep {
    at: usize,
    left: usize,
    len: usize,
}

/// The filter build: words of the new filter and spill filter cleared so
/// far, the next record to enter, and the names freed before it began
/// (their bits are not in the new filter).
#[derive(Clone, Copy)]
struct Build {
    cleared: usize,
    next: usize,
    freed_before: usize,
}

/// Index entries (or records, or filter lines) a tidy step takes at most
/// before its caller checks its budget, past the run it is in.
pub(crate) const TIDY_STEP: usize = 4096;

/// The prefix of class default objects' names (Unreal's `Default__`),
/// reserved for them.
pub(crate) const DEFAULT_PREFIX: &str = "Default__";

impl Names {
    /// Checks a user's name: non-empty, no `.` (the path separator), and not
    /// starting with the reserved [`DEFAULT_PREFIX`].
    pub(crate) fn check(name: &str) -> Result<(), Error> {
        if name.is_empty() || name.contains('.') || name.starts_with(DEFAULT_PREFIX) {
            return Err(Error::InvalidName(name.to_string()));
        }
        Ok(())
    }

    /// A top-level name for the class default object of `class` that no
    /// object holds: `Default__` + the class name; if another class default
    /// holds that (two classes share a name), `Default__` + the class path;
    /// if even that is held (types local to functions), the path with the
    /// first free `_2`, `_3`, … suffix. Every `.` becomes `_`, so the name
    /// is a valid path segment.
    pub(crate) fn default_name(&mut self, class: &Class) -> String {
        self.flush();
        let free = |n: &String| self.find(None, n).is_none();
        let short = format!("{DEFAULT_PREFIX}{}", class.name()).replace('.', "_");
        if free(&short) {
            return short;
        }
        let long = format!("{DEFAULT_PREFIX}{}", class.path()).replace('.', "_");
        if free(&long) {
            return long;
        }
        (2u64..)
            .map(|n| format!("{long}_{n}"))
            .find(free)
            .expect("a free suffix")
    }

    /// Finds by string: no allocation, and a base never interned means no
    /// such object.
    pub(crate) fn find(&self, outer: Option<AnyObj>, name: &str) -> Option<AnyObj> {
        let (base, number) = split(name);
        let id = self.table.get(base)?;
        self.lookup(&Key::new(outer, id, number))
    }

    /// The live object holding `key`: none if the filter says so, else in
    /// the index or among the pending records (read one by one: callers
    /// that may meet many [`flush`](Self::flush) first).
    fn lookup(&self, key: &Key) -> Option<AnyObj> {
        if !self.index.may_hold(key.base, key.number) {
            return None;
        }
        if let Some(o) = self.index.find(&self.recs, key) {
            return Some(o);
        }
        self.pending
            .iter()
            .find_map(|&id| self.recs.holder(id, key))
    }

    /// Finds by [`Name`]; a name this table does not hold finds nothing.
    pub(crate) fn find_name(&self, outer: Option<AnyObj>, name: Name) -> Option<AnyObj> {
        self.table.entry(name)?;
        self.lookup(&Key::new(outer, name.base, name.number))
    }

    /// Interns `text` for the user (kept for the heap's life).
    pub(crate) fn intern(&mut self, text: &str) -> Result<Name, Error> {
        Names::check(text)?;
        let (base, number) = split(text);
        let id = self.table.intern(base);
        self.table.entries[id as usize].pinned = true;
        Ok(self.table.name(id, number))
    }

    /// Takes `name` under `outer` for an object about to be created: checks
    /// it, interns its base, counts one use of it and finds the index entry
    /// it will take. Refuses a taken name. The key must then be
    /// [`insert`](Self::insert)ed or [`release`](Self::release)d, with no
    /// other change to the index in between.
    pub(crate) fn claim(&mut self, outer: Option<AnyObj>, name: &NameArg) -> Result<Key, Error> {
        let key = match name {
            NameArg::Text(s) => {
                Names::check(s)?;
                let (base, number) = split(s);
                let id = self.table.intern(base);
                Key::new(outer, id, number)
            }
            NameArg::Name(n) => {
                let e = self.table.entry(*n).ok_or(Error::StaleName(*n))?;
                let ok = if n.number == NO_NUMBER {
                    e.plain_ok
                } else {
                    e.numbered_ok
                };
                if !ok {
                    return Err(Error::InvalidName(
                        self.table.display(n.base, n.number).to_string(),
                    ));
                }
                Key::new(outer, n.base, n.number)
            }
        };
        self.take_key(key)
    }

    /// [`claim`](Self::claim) for a name already split into its base and
    /// stored number (a saved package's), with no string work but the
    /// base's lookup. Refuses a base that [`split`] would split further:
    /// the pair must be the one the name's text splits into.
    pub(crate) fn claim_parts(
        &mut self,
        outer: Option<AnyObj>,
        base: &str,
        number: u32,
    ) -> Result<Key, Error> {
        Names::check(base)?;
        if split(base).1 != NO_NUMBER {
            return Err(Error::InvalidName(base.to_owned()));
        }
        let id = self.table.intern(base);
        self.take_key(Key::new(outer, id, number))
    }

    /// Counts a use of `key`'s base and finds the index entry it will take.
    /// A key the filter proves free is not probed: its record waits among
    /// the pending ones, like a generated name's, and enters the index in
    /// the next batch.
    fn take_key(&mut self, mut key: Key) -> Result<Key, Error> {
        self.table.entries[key.base as usize].uses += 1;
        self.filter_room();
        if !self.index.may_hold(key.base, key.number) {
            key.at = Key::PENDING;
            self.pass_unique(&key);
            return Ok(key);
        }
        self.flush();
        self.make_room();
        match self.index.probe(&self.recs, &key) {
            Ok((at, reuse)) => {
                key.at = at;
                key.reuse = reuse;
                self.pass_unique(&key);
                Ok(key)
            }
            Err(_) => {
                let name = self.table.display(key.base, key.number).to_string();
                self.table.release(key.base);
                Err(Error::NameTaken { name })
            }
        }
    }

    /// Takes a generated name: the base of `name` (its number, if any, is
    /// ignored) with the next number of the base's own counter, from 2^31
    /// up ([`UNIQUE_FIRST`]). No object holds it: the counter only grows,
    /// and [`claim`](Self::claim) moves it past any number in that range a
    /// program names an object with. So nothing is probed: the record waits
    /// among the [`PENDING`] ones and enters the index with them in one
    /// batch. Once a base's counter has run past the largest number, its
    /// names are taken as Unreal's `MakeUniqueObjectName` does: numbers of
    /// the range tried in turn until a free one, each with a probe, from
    /// where the base's last search stopped (a cursor in its entry), so
    /// the tries of a search skip only numbers taken since the cursor last
    /// passed them.
    pub(crate) fn claim_unique(
        &mut self,
        outer: Option<AnyObj>,
        name: &NameArg,
    ) -> Result<Key, Error> {
        let base = match name {
            NameArg::Text(s) => {
                Names::check(s)?;
                self.table.intern(split(s).0)
            }
            NameArg::Name(n) => {
                self.table.entry(*n).ok_or(Error::StaleName(*n))?;
                n.base
            }
        };
        if !self.table.entries[base as usize].numbered_ok {
            let text = self.table.display(base, NO_NUMBER).to_string();
            return Err(Error::InvalidName(text));
        }
        let e = &mut self.table.entries[base as usize];
        if !e.used_up {
            let number = e.next_unique;
            match number.checked_add(1) {
                Some(next) => e.next_unique = next,
                // Every number of the range was given once: the search
                // starts again from the first.
                None => (e.next_unique, e.used_up) = (UNIQUE_FIRST, true),
            }
            e.uses += 1;
            // The insert marks the key in the filter.
            self.filter_room();
            let mut key = Key::new(outer, base, number);
            key.at = Key::PENDING;
            return Ok(key);
        }
        // Used up: try the range's numbers in turn from the cursor, which
        // moves past each number tried.
        let mut number = e.next_unique;
        self.flush();
        loop {
            let next = if number == u32::MAX {
                UNIQUE_FIRST
            } else {
                number + 1
            };
            #[cfg(test)]
            {
                self.searched += 1;
            }
            if self.lookup(&Key::new(outer, base, number)).is_none() {
                self.table.entries[base as usize].next_unique = next;
                return self.claim(outer, &NameArg::Name(self.table.name(base, number)));
            }
            number = next;
        }
    }

    /// After a name in the generated range was taken by a program: its
    /// base's counter moves past it, so it is never generated. Past the
    /// largest number, the counter is used up and stays where it was: the
    /// numbers from there on were never generated, so the search for free
    /// ones starts there.
    #[inline]
    fn pass_unique(&mut self, key: &Key) {
        let e = &mut self.table.entries[key.base as usize];
        if key.number >= e.next_unique && !e.used_up {
            match key.number.checked_add(1) {
                Some(next) => e.next_unique = next,
                None => e.used_up = true,
            }
        }
    }

    /// Puts the pending records, if any, in the index: what every use of
    /// the index but a lookup through [`lookup`](Self::lookup) does first.
    #[inline]
    pub(crate) fn flush(&mut self) {
        if !self.pending.is_empty() {
            self.enter_pending();
        }
    }

    /// Whether a lookup through a shared borrow should rather
    /// [`flush`](Self::flush) first (under the write lock) than read the
    /// pending records one by one.
    #[inline]
    pub(crate) fn should_flush(&self) -> bool {
        self.pending.len() > PENDING
    }

    /// Marks record `id` as waiting in `pending`.
    #[inline]
    fn wait(&mut self, id: u32) {
        let word = id as usize / 64;
        if self.waiting.len() <= word {
            self.waiting.resize(word + 1, 0);
        }
        self.waiting[word] |= 1 << (id % 64);
        self.waiting_live += 1;
        if self.pending.len() >= 2 * self.waiting_live + 1024 {
            // Freed ids fill the list (renames, with no purge or lookup
            // between): it keeps at most about twice the waiting ones.
            self.compact_waiting();
        }
        self.pending.push(id);
    }

    /// Drops the freed ids from the list of waiting records, and any id
    /// listed twice.
    fn compact_waiting(&mut self) {
        // Each live waiting id once: the bits mark the ones kept.
        let waiting = &mut self.waiting;
        self.pending.retain(|&id| {
            let (word, bit) = (id as usize / 64, 1u64 << (id % 64));
            let keep = waiting[word] & bit != 0;
            waiting[word] &= !bit;
            keep
        });
        for &id in &self.pending {
            self.waiting[id as usize / 64] |= 1 << (id % 64);
        }
    }

    /// Forgets every waiting record (a rebuild placed them all).
    fn forget_waiting(&mut self) {
        self.pending.clear();
        self.waiting.fill(0);
        self.waiting_live = 0;
    }

    /// Makes the index and the filter again from the live records, the
    /// waiting ones too.
    fn rebuild_all(&mut self) {
        self.index.rebuild(&self.recs);
        self.filter_stale = 0;
        self.forget_waiting();
        self.tidy = Tidy::default();
    }

    /// [`flush`](Self::flush) with records in the list: the live ones
    /// enter the index, a small batch with its lines loaded together, a
    /// large one in order of their homes (a sweep over the index); or the
    /// index is made again if they would fill it past 3/4.
    fn enter_pending(&mut self) {
        if self.waiting_live == 0 {
            self.pending.clear();
            return;
        }
        if (self.index.used + self.waiting_live) * 4 > self.index.entries.len() * 3
            || !self.ids_fit()
        {
            // The rebuild places every live record, the pending ones too.
            self.rebuild_all();
            return;
        }
        let mut items = std::mem::take(&mut self.scratch);
        items.clear();
        for k in 0..self.pending.len() {
            let id = self.pending[k];
            let (word, bit) = (id as usize / 64, 1u64 << (id % 64));
            // Each live waiting record once: its bit goes as it is taken.
            if self.waiting[word] & bit == 0 {
                continue;
            }
            self.waiting[word] &= !bit;
            let at = self.index.home(self.recs.recs[id as usize].hash());
            items.push(((at as u64) << 32) | u64::from(id));
        }
        self.pending.clear();
        self.waiting_live = 0;
        if items.len() <= PENDING {
            for &it in &items {
                prefetch_line(&self.index.entries[(it >> 32) as usize]);
            }
        } else {
            let mut spare = Vec::new();
            order_by_home(&mut items, &mut spare, self.index.bits);
        }
        for &it in &items {
            let id = it as u32;
            let r = self.recs.recs[id as usize];
            let key = Key::new(r.outer_obj(), r.base, r.number);
            match self.index.probe(&self.recs, &key) {
                Ok((at, reuse)) => self.index.put(at, reuse, key.hash, id),
                // A stale entry of this record id, whose hash bits match
                // the new key's, already leads to it.
                Err(o) if o.index() == r.slot => {
                    self.index.stale = self.index.stale.saturating_sub(1);
                }
                Err(o) => debug_assert!(false, "waiting name taken by {o:?}"),
            }
        }
        self.scratch = items;
    }

    /// Makes room in the filter for one more record: when the records
    /// array outgrows it, the filter is made again from the records at
    /// twice that size.
    #[inline]
    fn filter_room(&mut self) {
        let records = self.recs.recs.len() + 1;
        if self.index.filter.len() < filter_words(records) {
            self.index
                .rebuild_filter(&self.recs, filter_words(2 * records));
            self.filter_stale = 0;
            self.tidy.build = None;
        }
    }

    /// Whether every record id, and the next one, fits an entry's id bits
    /// (pending records take ids before they take entries).
    #[inline]
    fn ids_fit(&self) -> bool {
        self.recs.recs.len() + 2 <= self.index.entries.len()
    }

    /// Rebuilds the index if one more entry would fill it past 3/4 or its
    /// record id would not fit.
    #[inline]
    fn make_room(&mut self) {
        while !self.index.has_room() || !self.ids_fit() {
            self.rebuild_all();
        }
    }

    /// Takes a class default's name (from [`default_name`](Self::default_name),
    /// so free, and exempt from [`check`](Self::check)).
    pub(crate) fn claim_default(&mut self, name: &str) -> Key {
        let (base, number) = split(name);
        let id = self.table.intern(base);
        self.table.entries[id as usize].uses += 1;
        let mut key = Key::new(None, id, number);
        self.filter_room();
        self.flush();
        self.make_room();
        (key.at, key.reuse) = self
            .index
            .probe(&self.recs, &key)
            .expect("a class default's name is free");
        self.pass_unique(&key);
        key
    }

    /// Gives back a [`claim`](Self::claim)ed key that names no object.
    pub(crate) fn release(&mut self, key: Key) {
        self.table.release(key.base);
    }

    /// Names `obj` with a claimed key.
    #[inline]
    pub(crate) fn insert(&mut self, obj: AnyObj, key: Key) {
        let id = self.recs.add(Rec {
            serial: obj.serial(),
            base: key.base,
            number: key.number,
            outer: [key.outer as u32, (key.outer >> 32) as u32],
            slot: obj.index(),
        });
        self.index.hold(key.base, key.number);
        if self
            .tidy
            .build
            .is_some_and(|b| b.cleared >= self.index.filter.len() * 3 / 2)
        {
            // The new filter, cleared, may have passed this record's id
            // already (while it is cleared, its pass over the records is
            // still to come).
            let idx = &mut self.index;
            hold_in(
                &mut idx.next_filter,
                &mut idx.next_spill,
                key.base,
                key.number,
            );
        }
        if key.at == Key::PENDING {
            self.wait(id);
            return;
        }
        self.index.put(key.at, key.reuse, key.hash, id);
    }

    /// The name of the object in slot `index`, as one string.
    pub(crate) fn name_of(&self, index: u32) -> Option<Arc<str>> {
        let r = self.recs.named(index)?;
        Some(self.table.display(r.base, r.number).into_owned())
    }

    /// The name of the object in slot `index` as its base's id, the base's
    /// text and the stored number (number + 1, or 0), with no string work
    /// (for saving).
    pub(crate) fn name_parts(&self, index: u32) -> Option<(u32, &str, u32)> {
        let r = self.recs.named(index)?;
        Some((r.base, self.table.text(r.base), r.number))
    }

    /// The name of the object in slot `index`.
    pub(crate) fn name(&self, index: u32) -> Option<Name> {
        let r = self.recs.named(index)?;
        Some(self.table.name(r.base, r.number))
    }

    /// A [`Name`]'s string, if this table holds it.
    pub(crate) fn name_string(&self, name: Name) -> Option<String> {
        self.table.entry(name)?;
        Some(self.table.display(name.base, name.number).to_string())
    }

    /// Starts loading the record of the object in slot `index`, which the
    /// purge is about to [`remove`](Self::remove).
    #[inline]
    pub(crate) fn prefetch_record(&self, index: u32) {
        if let Some(r) = self
            .recs
            .id_of(index)
            .and_then(|id| self.recs.recs.get(id as usize))
        {
            prefetch_line(r);
        }
    }

    /// Forgets the name of a freed slot. Its index entry goes stale (see
    /// the [module docs](self)).
    #[inline]
    pub(crate) fn remove(&mut self, index: u32) {
        let Some((id, base)) = self.recs.remove(index) else {
            return;
        };
        let (word, bit) = (id as usize / 64, 1u64 << (id % 64));
        match self.waiting.get_mut(word) {
            // Still waiting: it has no index entry; its id stays in the
            // list, without its bit.
            Some(w) if *w & bit != 0 => {
                *w &= !bit;
                self.waiting_live -= 1;
            }
            _ => self.index.stale += 1,
        }
        self.filter_stale += 1;
        self.table.release(base);
    }

    /// After a purge: if stale entries fill at least a quarter of the
    /// index and outnumber the live names twice over, begins a sweep that
    /// drops them and a new filter without the freed names' bits, so that
    /// the next names find empty entries and clear filter bits instead of
    /// paying for the freed ones' (a probe each, and a rebuild in the
    /// middle of the creations). Likewise the filter alone, when the names
    /// freed since it was made outnumber the live ones twice over and its
    /// words (one bit each or more). Both are done in steps
    /// ([`tidy_step`](Self::tidy_step)), none proportional to the heap:
    /// at a million names a rebuild of the index in one go took about 20 ms.
    ///
    /// The list of waiting records drops the freed ones.
    pub(crate) fn tidy_begin(&mut self) {
        if self.tidy.sweep.is_none() && self.index_is_stale() && !self.index.entries.is_empty() {
            self.tidy.sweep = Some(Sweep {
                at: 0,
                left: self.index.entries.len(),
                len: self.index.entries.len(),
            });
            self.begin_build();
        } else if self.filter_is_stale() {
            self.begin_build();
        }
        self.drop_freed_waiting();
    }

    /// Whether stale entries fill at least a quarter of the index and
    /// outnumber the live names twice over.
    fn index_is_stale(&self) -> bool {
        self.index.stale * 4 >= self.index.entries.len() && self.index.stale >= 2 * self.recs.live()
    }

    /// Whether the names freed since the filter was made outnumber the live
    /// ones twice over and its words.
    fn filter_is_stale(&self) -> bool {
        self.filter_stale >= 2 * self.recs.live() && self.filter_stale >= self.index.filter.len()
    }

    /// The list of waiting records drops the freed ones.
    fn drop_freed_waiting(&mut self) {
        if self.waiting_live == 0 {
            self.pending.clear();
        } else if self.pending.len() > 2 * self.waiting_live + PENDING {
            self.compact_waiting();
        }
    }

    /// The tidy of [`tidy_begin`](Self::tidy_begin) done at once, for a
    /// collection that runs whole (no budget): the index made again from
    /// the live records, or the filter alone. In one go the rebuild costs
    /// less than the steps' sweep and filter build together (at 300K
    /// objects in the demo's stop-the-world mode, a cycle's longest pause
    /// went from about 22 to 37 ms with the steps).
    pub(crate) fn tidy_whole(&mut self) {
        if self.index_is_stale() {
            // Places every live record, the waiting ones too; ends any tidy.
            self.rebuild_all();
            return;
        }
        if self.tidy.build.is_none() && self.filter_is_stale() {
            // At least the size the records need (a filter kept bigger
            // stays as it is): an empty filter asked for one word would get
            // no spill words, which `hold` indexes.
            let words = filter_words(self.recs.recs.len() + 1);
            self.index.rebuild_filter(&self.recs, words);
            self.filter_stale = 0;
        }
        self.drop_freed_waiting();
        // A tidy begun by an earlier sliced cycle and not finished (none
        // is: each ends in its cycle's settle step) finishes here.
        while !self.tidy_step(usize::MAX).0 {}
    }

    /// Begins making the filter again, if that is not under way.
    fn begin_build(&mut self) {
        if self.tidy.build.is_none() && !self.index.filter.is_empty() {
            self.tidy.build = Some(Build {
                cleared: 0,
                next: 0,
                freed_before: self.filter_stale,
            });
        }
    }

    /// One step of the tidy begun by [`tidy_begin`](Self::tidy_begin):
    /// about `limit` units of work (index entries looked at, records read
    /// at [`READ_COST`] each, records entered in the new filter, filter
    /// lines cleared), and at most one run of the index past them. Returns
    /// whether the tidy is done, and the work done.
    pub(crate) fn tidy_step(&mut self, limit: usize) -> (bool, usize) {
        let mut work = 0;
        while work < limit {
            if let Some(mut sw) = self.tidy.sweep {
                if sw.len != self.index.entries.len() || sw.left == 0 {
                    self.end_sweep();
                    continue;
                }
                let mask = self.index.mask();
                while work < limit && sw.left > 0 && self.index.entries[sw.at] == 0 {
                    sw.at = (sw.at + 1) & mask;
                    sw.left -= 1;
                    work += 1;
                }
                if work < limit && sw.left > 0 {
                    let mut kept = std::mem::take(&mut self.scratch);
                    let (end, len, w) = self.index.sweep_run(&self.recs, sw.at, &mut kept);
                    self.scratch = kept;
                    sw.at = end;
                    sw.left = sw.left.saturating_sub(len);
                    work += w;
                }
                self.tidy.sweep = Some(sw);
                continue;
            }
            if let Some(mut b) = self.tidy.build {
                let idx = &mut self.index;
                let words = idx.filter.len();
                if idx.next_filter.len() != words || idx.next_spill.len() != words / 2 {
                    idx.next_filter = vec![0; words];
                    idx.next_spill = vec![0; words / 2];
                    b.cleared = usize::MAX;
                }
                // Clearing: a unit per line of LINE words.
                while b.cleared < words + words / 2 && work < limit {
                    let to = b
                        .cleared
                        .saturating_add((limit - work).saturating_mul(LINE))
                        .min(words + words / 2);
                    if b.cleared < words {
                        idx.next_filter[b.cleared..to.min(words)].fill(0);
                    }
                    if to > words {
                        idx.next_spill[b.cleared.max(words) - words..to - words].fill(0);
                    }
                    work += (to - b.cleared).div_ceil(LINE);
                    b.cleared = to;
                }
                while b.next < self.recs.recs.len() && work < limit {
                    let r = &self.recs.recs[b.next];
                    if r.serial != 0 {
                        hold_in(&mut idx.next_filter, &mut idx.next_spill, r.base, r.number);
                    }
                    b.next += 1;
                    work += 1;
                }
                if b.next >= self.recs.recs.len() && b.cleared >= words + words / 2 {
                    std::mem::swap(&mut idx.filter, &mut idx.next_filter);
                    std::mem::swap(&mut idx.spill, &mut idx.next_spill);
                    self.filter_stale -= b.freed_before.min(self.filter_stale);
                    self.tidy.build = None;
                } else {
                    self.tidy.build = Some(b);
                }
                continue;
            }
            return (true, work);
        }
        (self.tidy.sweep.is_none() && self.tidy.build.is_none(), work)
    }

    /// Ends the index sweep. Stale entries whose record ids were named
    /// again were kept where their run held no entry proven stale: the
    /// count of stale entries becomes what is left past the live names'.
    fn end_sweep(&mut self) {
        self.tidy.sweep = None;
        let in_index = self.recs.live() - self.waiting_live;
        self.index.stale = self.index.used.saturating_sub(in_index);
    }

    /// [`tidy_begin`](Self::tidy_begin) and every step: the whole tidy at
    /// once (tests).
    #[cfg(test)]
    pub(crate) fn tidy(&mut self) {
        self.tidy_begin();
        while !self.tidy_step(usize::MAX).0 {}
    }

    /// Strings in the table (live entries).
    pub(crate) fn strings(&self) -> usize {
        self.table.by_text.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::NonZeroU32;

    fn obj(i: u32) -> AnyObj {
        AnyObj::new(i, NonZeroU32::new(1 << 22).unwrap())
    }

    fn text(s: &str) -> NameArg {
        NameArg::Text(s.to_string())
    }

    fn name(n: &mut Names, o: AnyObj, outer: Option<AnyObj>, s: &str) {
        let key = n.claim(outer, &text(s)).unwrap();
        n.insert(o, key);
    }

    #[test]
    #[cfg_attr(miri, ignore = "safe code only: names.rs has no unsafe block")]
    fn the_parse_rule() {
        let max = Name::MAX_NUMBER;
        let cases: &[(&str, &str, Option<u32>)] = &[
            ("Actor_123", "Actor", Some(123)),
            ("A_0", "A", Some(0)),
            ("A_01", "A_01", None),
            ("A_00", "A_00", None),
            ("A_", "A_", None),
            ("A", "A", None),
            ("_5", "_5", None),
            ("5", "5", None),
            ("A5", "A5", None),
            ("A__5", "A_", Some(5)),
            ("A_1_2", "A_1", Some(2)),
            ("A_-1", "A_-1", None),
            ("A_4294967294", "A", Some(max)),
            ("A_4294967295", "A_4294967295", None),
            ("A_99999999999999999999", "A_99999999999999999999", None),
            ("Ünï_7", "Ünï", Some(7)),
            ("A_٣", "A_٣", None), // not an ASCII digit
        ];
        for &(s, base, number) in cases {
            let (b, n) = split(s);
            assert_eq!((b, n.checked_sub(1)), (base, number), "{s:?}");
            // Every string round-trips through its (base, number) form.
            let back = match n.checked_sub(1) {
                Some(n) => format!("{b}_{n}"),
                None => b.to_string(),
            };
            assert_eq!(back, s);
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "safe code only: names.rs has no unsafe block")]
    fn names_are_found_per_outer_and_forgotten_on_remove() {
        let mut n = Names::default();
        let (world, a, b) = (obj(0), obj(1), obj(2));
        name(&mut n, a, Some(world), "Hero");
        name(&mut n, b, None, "Hero");
        assert_eq!(n.find(Some(world), "Hero"), Some(a));
        assert_eq!(n.find(None, "Hero"), Some(b));
        assert_eq!(n.find(Some(a), "Hero"), None);
        assert_eq!(n.name_of(1).as_deref(), Some("Hero"));
        assert_eq!(n.strings(), 1, "one base for both");
        n.remove(1);
        assert_eq!(n.find(Some(world), "Hero"), None);
        assert_eq!(n.find(None, "Hero"), Some(b));
        n.remove(2);
        assert_eq!(n.index.used, n.index.stale, "every entry is stale");
        n.flush();
        n.index.rebuild(&n.recs);
        assert_eq!(n.index.used, 0);
        assert_eq!(n.strings(), 0, "the last use forgets the string");
        n.remove(2); // removing twice is harmless
    }

    #[test]
    #[cfg_attr(miri, ignore = "safe code only: names.rs has no unsafe block")]
    fn numbered_names_share_their_base() {
        let mut n = Names::default();
        for i in 0..10 {
            name(&mut n, obj(i), None, &format!("Actor_{i}"));
        }
        name(&mut n, obj(10), None, "Actor_07");
        assert_eq!(n.strings(), 2, "Actor and Actor_07");
        assert_eq!(n.name_of(3).as_deref(), Some("Actor_3"));
        assert_eq!(n.find(None, "Actor_7"), Some(obj(7)));
        assert_eq!(n.find(None, "Actor_07"), Some(obj(10)));
        assert_eq!(n.find(None, "Actor_11"), None);
        assert_eq!(n.find(None, "Actor"), None);
        let taken = n.claim(None, &text("Actor_3")).unwrap_err();
        assert_eq!(
            taken,
            Error::NameTaken {
                name: "Actor_3".into()
            }
        );
    }

    #[test]
    #[cfg_attr(miri, ignore = "safe code only: names.rs has no unsafe block")]
    fn freed_entries_are_reused_and_old_names_refused() {
        let mut n = Names::default();
        name(&mut n, obj(1), None, "One");
        let old = n.name(1).unwrap();
        assert_eq!(n.name_string(old).as_deref(), Some("One"));
        n.remove(1);
        assert_eq!(n.name_string(old), None);
        name(&mut n, obj(2), None, "Two");
        let new = n.name(2).unwrap();
        assert_eq!(new.base, old.base, "the id is reused");
        assert_ne!(new, old, "with a new stamp");
        assert_eq!(
            n.claim(None, &NameArg::Name(old)),
            Err(Error::StaleName(old))
        );
        assert_eq!(n.find_name(None, old), None);
        assert_eq!(n.table.entries.len(), 1);
        // Churn: the table stays at the live strings (less of it under
        // miri, where each name costs milliseconds).
        for i in 0..if cfg!(miri) { 200u32 } else { 1000 } {
            name(&mut n, obj(10 + i), None, &format!("N{i}x"));
            n.remove(10 + i);
        }
        assert_eq!(n.table.entries.len(), 2);
        assert_eq!(n.strings(), 1);
        // And the index does not keep the stale entries of the churn.
        assert!(n.index.entries.len() <= 16, "{}", n.index.entries.len());
    }

    #[test]
    #[cfg_attr(miri, ignore = "safe code only: names.rs has no unsafe block")]
    fn stale_entries_are_overwritten_or_compacted() {
        let mut n = Names::default();
        name(&mut n, obj(1), None, "A_1");
        // In the index (a free name waits outside it until a flush).
        n.flush();
        n.remove(1);
        assert_eq!((n.index.used, n.index.stale), (1, 1));
        assert_eq!(n.find(None, "A_1"), None, "a stale entry finds nothing");
        assert_eq!(n.name_of(1), None);
        // The same slot, a new object (next serial), the same name.
        let again = AnyObj::new(1, NonZeroU32::new((1 << 22) + 1).unwrap());
        name(&mut n, again, None, "A_1");
        assert_eq!((n.index.used, n.index.stale), (1, 0), "overwritten");
        assert_eq!(n.find(None, "A_1"), Some(again));
        // Many live names, then all freed, then as many new ones: the index
        // stays within twice the most it held live.
        for i in 0..100 {
            name(&mut n, obj(10 + i), None, &format!("B_{i}"));
        }
        n.flush();
        let most = n.index.entries.len();
        for round in 1..10 {
            for i in 0..100 {
                n.remove(10 + i);
            }
            for i in 0..100 {
                let o = AnyObj::new(10 + i, NonZeroU32::new((1 << 22) + round).unwrap());
                name(&mut n, o, None, &format!("B_{}", round * 100 + i));
            }
            assert!(n.index.entries.len() <= 2 * most, "round {round}");
            assert_eq!(
                n.find(None, &format!("B_{}", round * 100 + 5))
                    .map(|o| o.index()),
                Some(15)
            );
            assert_eq!(n.find(None, &format!("B_{}", round * 100 - 95)), None);
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "safe code only: names.rs has no unsafe block")]
    fn interned_bases_are_kept_and_failed_claims_give_back() {
        let mut n = Names::default();
        let base = n.intern("Actor").unwrap();
        assert_eq!(n.strings(), 1);
        name(&mut n, obj(1), None, "Actor_1");
        n.remove(1);
        assert_eq!(
            n.name_string(base.with_number(4)).as_deref(),
            Some("Actor_4")
        );
        // A refused claim does not keep its string.
        name(&mut n, obj(2), None, "Solo");
        assert!(n.claim(None, &text("Solo")).is_err());
        n.remove(2);
        assert_eq!(n.strings(), 1);
        let key = n.claim(None, &text("Gone")).unwrap();
        n.release(key);
        assert_eq!(n.strings(), 1);
        assert_eq!(n.find(None, "Gone"), None);
    }

    #[test]
    #[cfg_attr(miri, ignore = "safe code only: names.rs has no unsafe block")]
    fn rebuilds_keep_exactly_the_live_names() {
        // Packed slots and slots on pages of their own.
        for spread in [1u32, PAGE as u32] {
            let mut n = Names::default();
            let at = |i: u32, round: u32| {
                AnyObj::new(i * spread, NonZeroU32::new((1 << 22) + round).unwrap())
            };
            let outer = Some(obj(7));
            // Fewer under miri, where each name costs milliseconds.
            let count: u32 = if cfg!(miri) { 150 } else { 600 };
            for i in 0..count {
                let o = (i % 3 == 0).then_some(outer).flatten();
                name(&mut n, at(i, 0), o, &format!("A_{i}"));
            }
            // Free two thirds, then name their slots again, under new names.
            for i in (0..count).filter(|i| i % 3 != 1) {
                n.remove(i * spread);
            }
            for i in (0..count).filter(|i| i % 3 == 2) {
                name(&mut n, at(i, 1), None, &format!("B_{i}"));
            }
            n.flush();
            n.index.rebuild(&n.recs);
            let live = count as usize / 3 * 2;
            assert_eq!((n.index.used, n.index.stale), (live, 0), "spread {spread}");
            for i in 0..count {
                let o = (i % 3 == 0).then_some(outer).flatten();
                let a = n.find(o, &format!("A_{i}"));
                let b = n.find(None, &format!("B_{i}"));
                match i % 3 {
                    0 => assert_eq!((a, b), (None, None)),
                    1 => assert_eq!((a, b), (Some(at(i, 0)), None)),
                    _ => assert_eq!((a, b), (None, Some(at(i, 1)))),
                }
            }
        }
    }

    /// Names given, taken, freed and generated at random, against a
    /// `HashMap` from (outer, name string) to slot: every claim is refused
    /// exactly when the model holds the name, and after each step every
    /// name of the space is found exactly where the model has it. Names
    /// come in runs of numbers (the filter's words), under a few outers
    /// and none, with plain bases and generated numbers; frees leave stale
    /// entries and stale filter bits behind, and bursts of frees end with
    /// a [`Names::tidy`]. Fails if a name's filter bit is not set on insert
    /// (a taken name would be given twice).
    #[test]
    #[cfg_attr(miri, ignore = "safe code only: names.rs has no unsafe block")]
    fn the_filter_never_hides_a_live_name() {
        use std::collections::HashMap;
        let steps = if cfg!(miri) { 400 } else { 20_000 };
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut rand = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut n = Names::default();
        let mut model: HashMap<(Option<AnyObj>, String), u32> = HashMap::new();
        // Live slots and their (outer, name); serials grow so a reused
        // slot is a new object.
        let mut live: HashMap<u32, (Option<AnyObj>, String)> = HashMap::new();
        let mut serial = 1u32 << 22;
        let mut most = 0;
        let outers = [None, Some(obj(900_001)), Some(obj(900_002))];
        let space = |k: u64| -> String {
            match k % 5 {
                0 => "Plain".to_string(),
                1 | 2 => format!("Actor_{}", k / 5),
                3 => format!("Prop_{}", 64 * (k / 5)),
                _ => format!("Actor_{}", (1u64 << 31) + k / 5),
            }
        };
        for step in 0..steps {
            match rand(10) {
                0..=5 => {
                    let slot = rand(300) as u32;
                    if live.contains_key(&slot) {
                        continue;
                    }
                    let outer = outers[rand(3) as usize];
                    serial += 1;
                    let o = AnyObj::new(slot, NonZeroU32::new(serial).unwrap());
                    let key = if rand(8) == 0 {
                        n.claim_unique(outer, &text("Actor"))
                    } else {
                        let s = space(rand(400));
                        let got = n.claim(outer, &text(&s));
                        let held = model.contains_key(&(outer, s.clone()));
                        assert_eq!(got.is_err(), held, "step {step}: claim {s} under {outer:?}");
                        got
                    };
                    let Ok(key) = key else { continue };
                    n.insert(o, key);
                    let s = n.name_of(slot).unwrap().to_string();
                    assert!(
                        model.insert((outer, s.clone()), slot).is_none(),
                        "{s} twice"
                    );
                    live.insert(slot, (outer, s));
                }
                6 if rand(4) == 0 => {
                    // Many frees, then what a purge's end does.
                    for _ in 0..200 {
                        let slot = rand(300) as u32;
                        n.remove(slot);
                        if let Some(k) = live.remove(&slot) {
                            model.remove(&k);
                        }
                    }
                    n.tidy();
                }
                _ => {
                    let slot = rand(300) as u32;
                    n.remove(slot);
                    if let Some(k) = live.remove(&slot) {
                        model.remove(&k);
                    }
                }
            }
            most = most.max(model.len());
            if step % 97 == 0 || step + 1 == steps {
                for k in 0..400 {
                    for outer in outers {
                        let s = space(k);
                        let want = model.get(&(outer, s.clone())).copied();
                        let got = n.find(outer, &s).map(|o| o.index());
                        assert_eq!(got, want, "step {step}: find {s} under {outer:?}");
                    }
                }
                for (&slot, (outer, s)) in &live {
                    assert_eq!(n.find(*outer, s).map(|o| o.index()), Some(slot));
                }
            }
        }
        assert!(most > 50, "the space was used: {most}");
    }

    /// Names given in runs of numbers under one outer share index lines:
    /// 1,024 names `A_0` … `A_1023` under one outer (and as many under
    /// none, interleaved) take at most one 64-byte line of entries per 8 of
    /// them, where hashed homes would spread them over nearly every line
    /// of the index; and most sit in their home entry, not in a pile-up
    /// of their run behind one home. Fails with the number's low bits
    /// hashed with the rest ([`hash`]: lines), or left out of
    /// [`Index::home`] (homes).
    #[test]
    #[cfg_attr(miri, ignore = "safe code only: names.rs has no unsafe block")]
    fn runs_of_numbers_share_index_lines() {
        let all: u32 = if cfg!(miri) { 64 } else { 1024 };
        let mut n = Names::default();
        let outer = Some(obj(1_000_000));
        for i in 0..all {
            name(&mut n, obj(2 * i), outer, &format!("A_{i}"));
            name(&mut n, obj(2 * i + 1), None, &format!("B_{i}"));
        }
        n.flush();
        // Where each of the outer's names sits in the index.
        let mut lines = std::collections::HashSet::new();
        let mut at_home = 0;
        let place: HashMap<u32, usize> = (n.index.entries.iter().enumerate())
            .filter(|&(_, &e)| e != 0)
            .map(|(at, &e)| (e, at))
            .collect();
        for i in 0..all {
            let id = n.recs.id_of(2 * i).unwrap();
            let h = n.recs.recs[id as usize].hash();
            let at = place[&n.index.entry(h, id)];
            lines.insert(at / RUN as usize);
            at_home += usize::from(at == n.index.home(h));
        }
        assert!(
            at_home * 2 >= all as usize,
            "{at_home} of {all} names in their home entry"
        );
        let runs = (all / RUN) as usize;
        assert!(
            lines.len() <= 2 * runs,
            "{} names in runs took {} lines of {} ({runs} runs)",
            all,
            lines.len(),
            n.index.entries.len() / RUN as usize
        );
        // And every name is still found, under its own outer only.
        for i in 0..all {
            assert_eq!(n.find(outer, &format!("A_{i}")), Some(obj(2 * i)));
            assert_eq!(n.find(None, &format!("A_{i}")), None);
            assert_eq!(n.find(None, &format!("B_{i}")), Some(obj(2 * i + 1)));
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "safe code only: names.rs has no unsafe block")]
    fn tidy_drops_stale_entries_and_bits_when_they_dominate() {
        // Smaller under miri; the same shares either way.
        let all: u32 = if cfg!(miri) { 200 } else { 1000 };
        let mut n = Names::default();
        for i in 0..all {
            name(&mut n, obj(i), None, &format!("A_{i}"));
        }
        // In the index (free names wait outside it until a flush).
        n.flush();
        // A few frees: nothing to tidy.
        for i in 0..all / 100 {
            n.remove(i);
        }
        n.tidy();
        assert_eq!(n.index.stale, all as usize / 100);
        // Most freed: the index is made again from the tenth left live.
        for i in all / 100..all / 10 * 9 {
            n.remove(i);
        }
        n.tidy();
        assert_eq!((n.index.used, n.index.stale), (all as usize / 10, 0));
        // The freed names' filter bits are gone: no probe for them.
        assert!(!n.index.may_hold(n.table.get("A").unwrap(), 6));
        for i in 0..all {
            let want = (i >= all / 10 * 9).then(|| obj(i));
            assert_eq!(n.find(None, &format!("A_{i}")), want, "A_{i}");
        }
        // And the names can be given again.
        name(&mut n, obj(5), None, "A_5");
        assert_eq!(n.find(None, "A_5"), Some(obj(5)));
    }

    #[test]
    #[cfg_attr(miri, ignore = "safe code only: names.rs has no unsafe block")]
    fn the_default_prefix_is_reserved() {
        assert!(Names::check("Hero").is_ok());
        assert!(Names::check("Default_Hero").is_ok());
        for bad in ["", "A.B", "Default__Hero", "Default__"] {
            assert_eq!(
                Names::check(bad),
                Err(Error::InvalidName(bad.to_string())),
                "{bad:?}"
            );
        }
        // A number can complete the prefix: `Default_` + `_5`.
        let mut n = Names::default();
        let d = n.intern("Default_").unwrap();
        assert_eq!(
            n.claim(None, &NameArg::Name(d.with_number(5))),
            Err(Error::InvalidName("Default__5".into()))
        );
        assert!(n.claim(None, &NameArg::Name(d)).is_ok());
        assert!(n.intern("Default__X").is_err());
    }

    /// Names slot `i` with a generated name on `base` under `outer`.
    fn unique(n: &mut Names, i: u32, outer: Option<AnyObj>, base: &str) -> Key {
        let key = n.claim_unique(outer, &text(base)).unwrap();
        n.insert(obj(i), key);
        key
    }

    #[test]
    #[cfg_attr(miri, ignore = "safe code only: names.rs has no unsafe block")]
    fn generated_names_wait_then_enter_the_index() {
        let mut n = Names::default();
        let world = obj(0);
        // Fewer than PENDING: all wait, and are found among the pending.
        for i in 1..=10 {
            let outer = (i % 2 == 0).then_some(world);
            let k = unique(&mut n, i, outer, "Bullet_7");
            assert_eq!(
                k.number,
                UNIQUE_FIRST + i - 1,
                "the number given is ignored"
            );
        }
        assert_eq!(n.pending.len(), 10);
        assert_eq!(n.index.used, 0);
        assert_eq!(n.find(Some(world), "Bullet_2147483649"), Some(obj(2)));
        assert_eq!(n.find(None, "Bullet_2147483648"), Some(obj(1)));
        assert_eq!(
            n.find(None, "Bullet_2147483649"),
            None,
            "under another outer"
        );
        assert_eq!(n.name_of(3).as_deref(), Some("Bullet_2147483650"));
        // More than PENDING still wait (nothing needed the index); a
        // flush enters them all.
        for i in 11..=PENDING as u32 + 1 {
            unique(&mut n, i, None, "Bullet");
        }
        assert_eq!(n.pending.len(), PENDING + 1);
        assert!(n.should_flush());
        assert_eq!(n.index.used, 0);
        n.flush();
        assert!(n.pending.is_empty());
        assert_eq!(n.index.used, PENDING + 1);
        assert_eq!(n.find(Some(world), "Bullet_2147483649"), Some(obj(2)));
        // A program's own name in the range: refused while a pending
        // record holds it, and moves the counter past it when free.
        unique(&mut n, 40, None, "Bullet");
        let taken = n.claim(None, &text(&format!("Bullet_{}", (1u64 << 31) + 33)));
        assert!(matches!(taken, Err(Error::NameTaken { .. })), "{taken:?}");
        assert!(
            n.pending.is_empty(),
            "a probe in the range enters the pending first"
        );
        name(&mut n, obj(41), None, "Bullet_2147483700");
        let k = unique(&mut n, 42, None, "Bullet");
        assert_eq!(k.number, UNIQUE_FIRST + 53, "past 2147483700");
        // A free of a waiting record leaves it out of the index; its
        // record id may be reused at once.
        let id = n.recs.id_of(42).unwrap();
        assert_eq!((n.pending.len(), n.waiting_live), (2, 2), "41 and 42");
        n.remove(42);
        assert_eq!((n.waiting_live, n.index.stale), (1, 0));
        // A generated name waits without a look at the filter.
        assert_eq!(unique(&mut n, 43, None, "Bullet").number, UNIQUE_FIRST + 54);
        assert_eq!(n.recs.id_of(43), Some(id), "the same id again");
        assert_eq!(n.pending[1..], [id, id]);
        n.flush();
        assert_eq!((n.index.used, n.index.stale), (PENDING + 4, 0));
        assert_eq!(n.find(None, "Bullet_2147483702"), Some(obj(43)));
        assert_eq!(n.find(None, "Bullet_2147483701"), None);
        assert_eq!(n.find(None, "Bullet_2147483701"), None);
        assert_eq!(n.find(None, "Bullet_2147483700"), Some(obj(41)));
    }

    /// Renames with no lookup and no purge between them (a free and a new
    /// name each, the new name waiting) leave freed ids in the list of
    /// waiting records: it is compacted as it grows, so it stays within
    /// about twice the waiting records. Fails without the compaction in
    /// [`Names::wait`] (10,000 ids for 4 waiting records).
    #[test]
    #[cfg_attr(miri, ignore = "safe code only: names.rs has no unsafe block")]
    fn renames_without_lookups_keep_the_waiting_list_bounded() {
        let mut n = Names::default();
        // Generated names wait without a look at the filter: no flush.
        for i in 0..4 {
            unique(&mut n, i, None, "Fixed");
        }
        let mut last = 0;
        for k in 0..10_000u32 {
            n.remove(1);
            last = unique(&mut n, 1, None, "Moving").number;
            assert!(n.pending.len() <= 2 * n.waiting_live + 1024 + 1, "{k}");
        }
        assert_eq!(n.waiting_live, 4);
        let name = |number: u32| format!("Moving_{}", number - 1);
        assert_eq!(n.find(None, &name(last)), Some(obj(1)));
        assert_eq!(n.find(None, &name(last - 1)), None);
        n.flush();
        assert_eq!(n.waiting_live, 0);
        assert_eq!(n.find(None, &name(last)), Some(obj(1)));
        assert_eq!(n.find(None, &format!("Fixed_{}", 1u64 << 31)), Some(obj(0)));
    }

    #[test]
    #[cfg_attr(miri, ignore = "safe code only: names.rs has no unsafe block")]
    fn a_used_up_range_falls_back_to_probing() {
        let mut n = Names::default();
        // The largest number moves the counter past the end of the range.
        name(&mut n, obj(1), None, &format!("Shell_{}", Name::MAX_NUMBER));
        let id = n.table.get("Shell").unwrap();
        assert!(n.table.entries[id as usize].used_up);
        let mut seen = std::collections::HashSet::new();
        for i in 2..40 {
            let k = unique(&mut n, i, None, "Shell");
            assert!(k.number >= UNIQUE_FIRST);
            assert!(seen.insert(k.number), "{} given twice", k.number);
            assert_ne!(k.number, Name::MAX_NUMBER + 1, "taken by obj 1");
        }
        // Names the filter proves free wait among the pending; the rest
        // were probed. Either way each is found.
        for i in 2..40 {
            let name = n.name_of(i).unwrap();
            assert_eq!(n.find(None, &name), Some(obj(i)));
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "safe code only: names.rs has no unsafe block")]
    fn a_used_up_range_is_searched_from_a_cursor() {
        let mut n = Names::default();
        // Five generated names, then the largest number: the range is used
        // up where the counter stood.
        for i in 1..=5 {
            unique(&mut n, i, None, "Shell");
        }
        name(&mut n, obj(6), None, &format!("Shell_{}", Name::MAX_NUMBER));
        let id = n.table.get("Shell").unwrap() as usize;
        assert!(n.table.entries[id].used_up);
        assert_eq!(n.table.entries[id].next_unique, UNIQUE_FIRST + 5);
        // Many names, under two outers by turns: each search succeeds on
        // its first try (a search from a fixed start tries i + 1 numbers
        // for the i-th name: quadratic).
        // (Miri runs a few hundred: each name takes it milliseconds.)
        let count = if cfg!(miri) { 200u32 } else { 20_000 };
        for i in 0..count {
            let outer = (i % 2 == 0).then_some(obj(0));
            let k = unique(&mut n, 10 + i, outer, "Shell");
            assert_eq!(k.number, UNIQUE_FIRST + 5 + i);
        }
        assert_eq!(n.searched, u64::from(count));
        // At the end of the range the search wraps to its start, and skips
        // the numbers held there under the same outer, once.
        n.table.entries[id].next_unique = u32::MAX - 1;
        n.searched = 0;
        assert_eq!(unique(&mut n, 30_000, None, "Shell").number, u32::MAX - 1);
        // Tried: the largest (obj 6), the five first ones, then a number
        // held only under the other outer.
        assert_eq!(
            unique(&mut n, 30_001, None, "Shell").number,
            UNIQUE_FIRST + 5
        );
        assert_eq!(n.searched, 1 + 7);
        assert_eq!(
            unique(&mut n, 30_002, None, "Shell").number,
            UNIQUE_FIRST + 7
        );
        // Every name is still found, and only once.
        for i in 0..count {
            let outer = (i % 2 == 0).then_some(obj(0));
            let name = n.name_of(10 + i).unwrap();
            assert_eq!(n.find(outer, &name), Some(obj(10 + i)));
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "safe code only: names.rs has no unsafe block")]
    fn a_counter_that_runs_out_by_itself_wraps_to_the_search() {
        let mut n = Names::default();
        let k = unique(&mut n, 1, None, "Tail");
        let id = k.base as usize;
        n.table.entries[id].next_unique = u32::MAX;
        assert_eq!(unique(&mut n, 2, None, "Tail").number, u32::MAX);
        assert!(n.table.entries[id].used_up);
        assert_eq!(n.table.entries[id].next_unique, UNIQUE_FIRST);
        // The first number is held (slot 1): the search takes the next.
        assert_eq!(unique(&mut n, 3, None, "Tail").number, UNIQUE_FIRST + 1);
        // A forgotten base starts again with a fresh counter.
        for i in 1..=3 {
            n.remove(i);
        }
        assert_eq!(unique(&mut n, 4, None, "Tail").number, UNIQUE_FIRST);
        assert!(!n.table.entries[id].used_up);
    }

    /// A tidy of a million names, of which 900,000 were freed (a level of
    /// named actors unloaded): no step does more than a constant times its
    /// limit of work units (index entries looked at, records read, filter
    /// lines cleared, records entered in the new filter), it takes many
    /// steps, and at its end the index holds exactly the live names, with
    /// no stale entry, and the filter no freed name's bit. Fails if a step
    /// ignores its limit (the whole index in one step, as `rebuild_all`
    /// did: 2M entries).
    #[test]
    #[cfg_attr(miri, ignore = "safe code only: names.rs has no unsafe block")]
    fn no_tidy_step_touches_more_than_its_limit() {
        const ALL: u32 = 1_000_000;
        const LIMIT: usize = 1024;
        let mut n = Names::default();
        let base = n.intern("Actor").unwrap();
        for i in 0..ALL {
            let key = n.claim(None, &NameArg::Name(base.with_number(i))).unwrap();
            n.insert(obj(i), key);
        }
        n.flush();
        // Nine in ten freed, in slot order, as a purge frees them.
        for i in (0..ALL).filter(|i| i % 10 != 3) {
            n.remove(i);
        }
        let live = (ALL / 10) as usize;
        assert!(n.index.stale >= 2 * live && n.index.stale * 4 >= n.index.entries.len());
        n.tidy_begin();
        assert!(n.tidy.sweep.is_some() && n.tidy.build.is_some());
        let (mut steps, mut most, mut total) = (0usize, 0usize, 0usize);
        loop {
            let (done, work) = n.tidy_step(LIMIT);
            steps += 1;
            most = most.max(work);
            total += work;
            if done {
                break;
            }
        }
        // A step stops at its limit, past at most the run of the index it
        // is in: a few dozen entries at this load, each read at READ_COST.
        assert!(
            most <= 4 * LIMIT,
            "a step did {most} units of work, over 4 x {LIMIT} (total {total} in {steps} steps)"
        );
        assert!(steps > 100, "{steps} steps");
        assert_eq!((n.index.used, n.index.stale), (live, 0));
        assert_eq!(n.filter_stale, 0);
        for i in (0..ALL).step_by(7) {
            let want = (i % 10 == 3).then(|| obj(i));
            assert_eq!(n.find_name(None, base.with_number(i)), want, "Actor_{i}");
            // A freed name's bit is gone from the filter.
            assert_eq!(
                n.index.may_hold(base.base, base.with_number(i).number),
                want.is_some()
            );
        }
    }

    mod tidy_model {
        use super::*;
        use proptest::prelude::*;
        use std::collections::HashMap;

        #[derive(Clone, Debug)]
        enum Op {
            /// Names slot `.0` under outer `.1` with name `.2` of the space.
            Create(u32, usize, u32),
            /// Names slot `.0` with a generated name under outer `.1`.
            Unique(u32, usize),
            /// Renames slot `.0`: outer `.1`, name `.2`.
            Rename(u32, usize, u32),
            Free(u32),
            /// Frees every live slot but those `== .0` mod 4, then what a
            /// purge's end does (a level unloaded).
            Unload(u32),
            /// What a purge's end does.
            Begin,
            /// A tidy step of this limit.
            Step(usize),
            Flush,
        }

        const SLOTS: u32 = 120;

        fn space(k: u32) -> String {
            match k % 4 {
                0 => format!("Plain{}", k / 4 % 5),
                1 | 2 => format!("Actor_{}", k / 4),
                _ => format!("Prop_{}", 64 * (k / 4)),
            }
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                6 => (0..SLOTS, 0usize..3, 0u32..200).prop_map(|(s, o, k)| Op::Create(s, o, k)),
                1 => (0..SLOTS, 0usize..3).prop_map(|(s, o)| Op::Unique(s, o)),
                2 => (0..SLOTS, 0usize..3, 0u32..200).prop_map(|(s, o, k)| Op::Rename(s, o, k)),
                2 => (0..SLOTS).prop_map(Op::Free),
                1 => (0u32..4).prop_map(Op::Unload),
                1 => Just(Op::Begin),
                4 => (1usize..24).prop_map(Op::Step),
                1 => Just(Op::Flush),
            ]
        }

        /// Claims `s` under `outer` as operation `i` (`what` it does, for
        /// the message): refused exactly when `model` holds the name.
        fn claim_checked(
            n: &mut Names,
            model: &HashMap<(Option<AnyObj>, String), u32>,
            outer: Option<AnyObj>,
            s: &str,
            what: &str,
            i: usize,
        ) -> Result<Option<Key>, TestCaseError> {
            let got = n.claim(outer, &text(s));
            let held = model.contains_key(&(outer, s.to_string()));
            prop_assert_eq!(
                got.is_err(),
                held,
                "op {}: {} {} under {:?}",
                i,
                what,
                s,
                outer
            );
            Ok(got.ok())
        }

        /// Runs `ops` against a `HashMap` from (outer, name) to slot: each
        /// claim is refused exactly when the model holds the name, and
        /// after each operation every name a slot holds is found at it and
        /// a sample of the space finds what the model says, while tidies
        /// are in flight between operations.
        fn run(ops: &[Op]) -> Result<(), TestCaseError> {
            let mut n = Names::default();
            let outers = [None, Some(obj(900_001)), Some(obj(900_002))];
            let mut model: HashMap<(Option<AnyObj>, String), u32> = HashMap::new();
            let mut live: HashMap<u32, (AnyObj, Option<AnyObj>, String)> = HashMap::new();
            let mut serial = 1u32 << 22;
            let free = |n: &mut Names,
                        model: &mut HashMap<(Option<AnyObj>, String), u32>,
                        live: &mut HashMap<u32, (AnyObj, Option<AnyObj>, String)>,
                        slot: u32| {
                n.remove(slot);
                if let Some((_, o, s)) = live.remove(&slot) {
                    model.remove(&(o, s));
                }
            };
            for (i, op) in ops.iter().enumerate() {
                if let Op::Create(slot, ..) | Op::Unique(slot, _) = *op {
                    if live.contains_key(&slot) {
                        continue;
                    }
                }
                match *op {
                    Op::Create(slot, o, k) => {
                        let (outer, s) = (outers[o], space(k));
                        if let Some(key) = claim_checked(&mut n, &model, outer, &s, "claim", i)? {
                            serial += 1;
                            let ob = AnyObj::new(slot, NonZeroU32::new(serial).unwrap());
                            n.insert(ob, key);
                            model.insert((outer, s.clone()), slot);
                            live.insert(slot, (ob, outer, s));
                        }
                    }
                    Op::Unique(slot, o) => {
                        let outer = outers[o];
                        let key = n.claim_unique(outer, &text("Gen")).unwrap();
                        serial += 1;
                        let ob = AnyObj::new(slot, NonZeroU32::new(serial).unwrap());
                        n.insert(ob, key);
                        let s = n.name_of(slot).unwrap().to_string();
                        prop_assert!(
                            model.insert((outer, s.clone()), slot).is_none(),
                            "{} twice",
                            s
                        );
                        live.insert(slot, (ob, outer, s));
                    }
                    Op::Rename(slot, o, k) => {
                        // As `Heap::rename`: claim the new name, then free
                        // the old one and give the object the new one.
                        let Some((ob, old_outer, old)) = live.get(&slot).cloned() else {
                            continue;
                        };
                        let (outer, s) = (outers[o], space(k));
                        if let Some(key) = claim_checked(&mut n, &model, outer, &s, "rename to", i)?
                        {
                            n.remove(slot);
                            n.insert(ob, key);
                            model.remove(&(old_outer, old));
                            model.insert((outer, s.clone()), slot);
                            live.insert(slot, (ob, outer, s));
                        }
                    }
                    Op::Free(slot) => free(&mut n, &mut model, &mut live, slot),
                    Op::Unload(keep) => {
                        for slot in (0..SLOTS).filter(|s| s % 4 != keep) {
                            free(&mut n, &mut model, &mut live, slot);
                        }
                        n.tidy_begin();
                    }
                    Op::Begin => n.tidy_begin(),
                    Op::Step(limit) => {
                        n.tidy_step(limit);
                    }
                    Op::Flush => n.flush(),
                }
                for (&slot, (ob, outer, s)) in &live {
                    prop_assert_eq!(
                        n.find(*outer, s),
                        Some(*ob),
                        "op {}: {} of slot {}",
                        i,
                        s,
                        slot
                    );
                }
                for k in (i as u32 % 7..200).step_by(7) {
                    for outer in outers {
                        let s = space(k);
                        let want = model.get(&(outer, s.clone())).copied();
                        let got = n.find(outer, &s).map(|o| o.index());
                        prop_assert_eq!(got, want, "op {}: find {} under {:?}", i, s, outer);
                    }
                }
            }
            // Finished, the tidy leaves an index of live names only when
            // no record id was named again (then stale entries may stay).
            while !n.tidy_step(usize::MAX).0 {}
            for ((outer, s), &slot) in &model {
                prop_assert_eq!(n.find(*outer, s).map(|o| o.index()), Some(slot));
            }
            Ok(())
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

            /// Names created, renamed, generated and freed across purges,
            /// with the tidy's index sweep and filter build in flight in
            /// small steps between them.
            #[test]
            #[cfg_attr(miri, ignore = "safe code only: names.rs has no unsafe block")]
            fn names_stay_right_while_a_tidy_is_in_flight(
                ops in prop::collection::vec(op(), 1..400),
            ) {
                run(&ops)?;
            }
        }
    }
}

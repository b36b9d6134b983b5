//! A model test of the name index.
//!
//! Random sequences of operations (create with or without a name and an
//! outer, by string or by interned [`Name`], unroot, collect, find, find by
//! path) run against a [`Heap`] and against a model: a `HashMap` from
//! (outer, name string) to the object, plus each object's name, outer and
//! root flag. Names include numeric suffixes and the edges of the parse rule
//! (`A_0`, `A_01`, `A_`, plain `A`, numbers at and past the largest). After
//! every operation, every live object's name, display name and path match
//! the model, every model entry is found by `find`, `find_name` and
//! `find_path`, and names not in the model are found nowhere. Collections
//! free what the model says is unreachable (roots and their outer chains
//! survive), so slots and index entries are reused.
//!
//! Creations may also ask for a generated name (`Spawn::unique_name`): the
//! model keeps each base's counter (from 2^31, moved past every number in
//! that range the test names an object with, and reset when the base is
//! forgotten), and the heap must give exactly the next number, or, once a
//! base's range is used up, some free number in it.
//!
//! A second heap interns names too: every `Name` it makes is refused here
//! (`StaleName`), and it reads none of this heap's names, whatever ids the
//! two tables share.
//!
//! Two more tests: interned strings survive while any object uses them,
//! and the table does not grow when names churn.

use std::collections::{HashMap, HashSet};

use coreobject::{AnyObj, Error, Heap, Name, Object};
use proptest::prelude::*;

#[derive(Object, Default)]
struct Cell;

/// Names the test draws from: the parse rule's edges, and a few numbered
/// families.
const POOL: &[&str] = &[
    "A",
    "A_0",
    "A_00",
    "A_01",
    "A_1",
    "A_",
    "A__1",
    "_1",
    "A_4294967294",
    "A_4294967295",
    "A_99999999999",
    "B",
    "B_7",
    "Actor_123",
];

#[derive(Clone, Debug)]
enum NameGen {
    Pool(usize),
    /// `Actor_<n>` or `Level_<n>`.
    Numbered(bool, u32),
}

impl NameGen {
    fn text(&self) -> String {
        match self {
            NameGen::Pool(i) => POOL[i % POOL.len()].to_string(),
            NameGen::Numbered(actor, n) => {
                format!("{}_{n}", if *actor { "Actor" } else { "Level" })
            }
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Create {
        name: Option<NameGen>,
        /// Index into the live objects (mod their count), if any.
        outer: Option<usize>,
        root: bool,
        /// Name it through `Heap::intern` + a `Name` instead of a string.
        by_name: bool,
        /// A generated name on the name's base (`Spawn::unique_name`).
        unique: bool,
    },
    Unroot(usize),
    Collect,
    Find(NameGen, Option<usize>),
    /// Interns the name in a second heap and uses that `Name` here: it
    /// must be refused (`StaleName`), read as nothing and find nothing.
    Foreign(NameGen, Option<usize>),
}

fn name_gen() -> impl Strategy<Value = NameGen> {
    prop_oneof![
        2 => any::<usize>().prop_map(NameGen::Pool),
        1 => (any::<bool>(), 0u32..6).prop_map(|(a, n)| NameGen::Numbered(a, n)),
        1 => (any::<bool>(), prop_oneof![Just(u32::MAX - 1), Just(u32::MAX), any::<u32>()])
            .prop_map(|(a, n)| NameGen::Numbered(a, n)),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (
            prop::option::weighted(0.8, name_gen()),
            prop::option::of(any::<usize>()),
            prop::bool::weighted(0.6),
            any::<bool>(),
            prop::bool::weighted(0.3),
        )
            .prop_map(|(name, outer, root, by_name, unique)| Op::Create {
                name,
                outer,
                root,
                by_name,
                unique,
            }),
        2 => any::<usize>().prop_map(Op::Unroot),
        1 => Just(Op::Collect),
        2 => (name_gen(), prop::option::of(any::<usize>())).prop_map(|(n, o)| Op::Find(n, o)),
        1 => (name_gen(), prop::option::of(any::<usize>())).prop_map(|(n, o)| Op::Foreign(n, o)),
    ]
}

#[derive(Clone, Debug)]
struct Live {
    name: Option<String>,
    outer: Option<AnyObj>,
    rooted: bool,
}

#[derive(Default)]
struct Model {
    names: HashMap<(Option<AnyObj>, String), AnyObj>,
    live: HashMap<AnyObj, Live>,
    /// Live objects in creation order (for picking by index).
    order: Vec<AnyObj>,
    /// Each base's next generated number (absent: 2^31); past the largest
    /// name number once the range is used up.
    counters: HashMap<String, u64>,
    /// Bases interned with `Heap::intern`: kept for the heap's life.
    pinned: HashSet<String>,
}

/// The first generated number.
const UNIQUE_FROM: u64 = 1 << 31;

/// The largest number a name can carry.
const MAX_NUMBER: u64 = u32::MAX as u64 - 1;

/// A name's base and number, by the parse rule of the `names` module.
fn split(s: &str) -> (&str, Option<u64>) {
    let digits = s.bytes().rev().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits + 1 >= s.len() || s.as_bytes()[s.len() - digits - 1] != b'_' {
        return (s, None);
    }
    let d = &s[s.len() - digits..];
    if d.len() > 1 && d.starts_with('0') {
        return (s, None);
    }
    match d.parse::<u64>() {
        Ok(n) if n <= MAX_NUMBER => (&s[..s.len() - digits - 1], Some(n)),
        _ => (s, None),
    }
}

impl Model {
    fn pick(&self, i: usize) -> Option<AnyObj> {
        (!self.order.is_empty()).then(|| self.order[i % self.order.len()])
    }

    /// Frees what no root reaches (an inner keeps its outer alive).
    fn collect(&mut self) -> usize {
        let mut keep: HashSet<AnyObj> = HashSet::new();
        for (&h, l) in &self.live {
            if l.rooted {
                let mut cur = Some(h);
                while let Some(c) = cur {
                    if !keep.insert(c) {
                        break;
                    }
                    cur = self.live[&c].outer;
                }
            }
        }
        let before = self.live.len();
        self.live.retain(|h, _| keep.contains(h));
        self.order.retain(|h| keep.contains(h));
        self.names.retain(|_, h| keep.contains(h));
        before - self.live.len()
    }

    /// Forgets the counters of bases no live object is named with and the
    /// test never interned, as the heap forgets those bases.
    fn forget_unused_bases(&mut self) {
        let used: HashSet<String> = self
            .live
            .values()
            .filter_map(|l| l.name.as_deref())
            .map(|n| split(n).0.to_string())
            .collect();
        let pinned = &self.pinned;
        self.counters
            .retain(|b, _| used.contains(b) || pinned.contains(b));
    }

    /// A program named an object `name`: a number in the generated range
    /// moves its base's counter past it.
    fn pass(&mut self, name: &str) {
        let (base, n) = split(name);
        if let Some(n) = n.filter(|&n| n >= UNIQUE_FROM) {
            let c = self.counters.entry(base.to_string()).or_insert(UNIQUE_FROM);
            *c = (*c).max(n + 1);
        }
    }

    fn path(&self, h: AnyObj) -> Option<String> {
        let mut parts = Vec::new();
        let mut cur = Some(h);
        while let Some(c) = cur {
            parts.push(self.live[&c].name.clone()?);
            cur = self.live[&c].outer;
        }
        parts.reverse();
        Some(parts.join("."))
    }
}

/// Whether `s` is a name `Spawn::name` accepts.
fn valid(s: &str) -> bool {
    !s.is_empty() && !s.contains('.') && !s.starts_with("Default__")
}

/// `other` is a second heap, whose table the [`Op::Foreign`] names fill:
/// it reads none of `heap`'s names.
fn check(heap: &Heap, other: &Heap, m: &Model) {
    assert_eq!(heap.len(), m.live.len());
    for (&h, l) in &m.live {
        assert_eq!(heap.name_of(h).as_deref(), l.name.as_deref(), "{h:?}");
        let name = heap.name(h);
        assert_eq!(name.is_some(), l.name.is_some());
        if let Some(n) = name {
            assert_eq!(heap.name_string(n), l.name);
            assert_eq!(heap.find_name(l.outer, n), Some(h));
            assert_eq!(other.name_string(n), None, "read by another heap");
        }
        let display = heap.display_name(h).unwrap();
        match &l.name {
            Some(n) => assert_eq!(&display, n),
            None => assert_eq!(display, format!("Cell_{}", h.index())),
        }
        if let Some(p) = m.path(h) {
            assert_eq!(heap.path_name(h).as_deref(), Some(p.as_str()));
            assert_eq!(heap.find_path(&p), Some(h), "{p}");
        }
    }
    for ((outer, name), &h) in &m.names {
        assert_eq!(heap.find(*outer, name), Some(h), "{outer:?} {name}");
    }
}

fn run(ops: &[Op]) {
    let mut heap = Heap::new();
    let other = Heap::new();
    let mut m = Model::default();
    for op in ops {
        match op {
            Op::Create {
                name: Some(name),
                outer,
                root,
                by_name,
                unique: true,
            } => {
                let outer = outer.and_then(|i| m.pick(i));
                let text = name.text();
                let base = split(&text).0.to_string();
                let mut s = heap.spawn(Cell);
                if let Some(o) = outer {
                    s = s.outer(o);
                }
                s = if *by_name {
                    m.pinned.insert(base.clone());
                    s.unique_name(heap.intern(&base).unwrap())
                } else {
                    s.unique_name(text.as_str())
                };
                if *root {
                    s = s.root();
                }
                let h = s.create().unwrap().any();
                let got = heap.name_of(h).expect("a generated name");
                let (got_base, n) = split(&got);
                assert_eq!(got_base, base, "{got}");
                let n = n.expect("a number");
                assert!(n >= UNIQUE_FROM, "{got}");
                assert!(
                    !m.names.contains_key(&(outer, got.to_string())),
                    "{got} taken"
                );
                let next = m.counters.entry(base).or_insert(UNIQUE_FROM);
                if *next <= MAX_NUMBER {
                    assert_eq!(n, *next, "{got}: not the next number");
                    *next += 1;
                }
                m.names.insert((outer, got.to_string()), h);
                m.live.insert(
                    h,
                    Live {
                        name: Some(got.to_string()),
                        outer,
                        rooted: *root,
                    },
                );
                m.order.push(h);
            }
            Op::Create {
                name,
                outer,
                root,
                by_name,
                ..
            } => {
                let outer = outer.and_then(|i| m.pick(i));
                let text = name.as_ref().map(NameGen::text);
                let mut s = heap.spawn(Cell);
                if let Some(o) = outer {
                    s = s.outer(o);
                }
                if let Some(t) = &text {
                    s = if *by_name {
                        match heap.intern(t) {
                            Ok(n) => {
                                m.pinned.insert(split(t).0.to_string());
                                s.name(n)
                            }
                            Err(e) => {
                                assert!(!valid(t), "{t}: {e}");
                                continue;
                            }
                        }
                    } else {
                        s.name(t.as_str())
                    };
                }
                if *root {
                    s = s.root();
                }
                let got = s.create();
                match &text {
                    Some(t) if !valid(t) => {
                        assert_eq!(got.unwrap_err(), Error::InvalidName(t.clone()));
                        continue;
                    }
                    Some(t) if m.names.contains_key(&(outer, t.clone())) => {
                        assert_eq!(got.unwrap_err(), Error::NameTaken { name: t.clone() });
                        m.forget_unused_bases();
                        check(&heap, &other, &m);
                        continue;
                    }
                    _ => {}
                }
                let h = got.unwrap().any();
                if let Some(t) = &text {
                    m.names.insert((outer, t.clone()), h);
                    m.pass(t);
                }
                m.live.insert(
                    h,
                    Live {
                        name: text,
                        outer,
                        rooted: *root,
                    },
                );
                m.order.push(h);
            }
            Op::Unroot(i) => {
                if let Some(h) = m.pick(*i) {
                    heap.remove_from_root(h).unwrap();
                    m.live.get_mut(&h).unwrap().rooted = false;
                }
            }
            Op::Collect => {
                let freed = m.collect();
                assert_eq!(heap.collect().unwrap().freed, freed);
                m.forget_unused_bases();
            }
            Op::Find(name, outer) => {
                let outer = outer.and_then(|i| m.pick(i));
                let t = name.text();
                let want = m.names.get(&(outer, t.clone())).copied();
                assert_eq!(heap.find(outer, &t), want, "{outer:?} {t}");
                if outer.is_none() {
                    assert_eq!(heap.find_path(&t), want, "{t}");
                }
            }
            Op::Foreign(name, outer) => {
                let outer = outer.and_then(|i| m.pick(i));
                let t = name.text();
                let Ok(f) = other.intern(&t) else { continue };
                assert_eq!(heap.name_string(f), None, "{t}");
                assert_eq!(heap.find_name(outer, f), None, "{t}");
                let mut s = heap.spawn(Cell);
                if let Some(o) = outer {
                    s = s.outer(o);
                }
                assert_eq!(s.name(f).create().err(), Some(Error::StaleName(f)));
                let unique = heap.spawn(Cell).unique_name(f).create().err();
                assert_eq!(unique, Some(Error::StaleName(f)));
            }
        }
        check(&heap, &other, &m);
    }
    // Everything unrooted and collected: no name is left.
    for h in m.order.clone() {
        heap.remove_from_root(h).unwrap();
    }
    heap.collect().unwrap();
    assert!(heap.is_empty());
    for (outer, name) in m.names.keys() {
        assert_eq!(heap.find(*outer, name), None);
    }
}

/// Operations per case (fewer under miri).
const MAX_OPS: usize = if cfg!(miri) { 25 } else { 120 };

/// Full size or the default run's: `COREOBJECT_FULL_TESTS=1` (CI's test
/// step) runs the full count; a plain `cargo test --workspace` runs
/// less, to stay quick.
fn full_tests() -> bool {
    std::env::var_os("COREOBJECT_FULL_TESTS").is_some_and(|v| v != "0")
}

proptest! {
    #![proptest_config(if cfg!(miri) {
        // Under miri: a few cases, and no regression file (its isolation
        // keeps the file system away).
        ProptestConfig { cases: 3, failure_persistence: None, ..ProptestConfig::default() }
    } else {
        // A quarter of the cases by default; all of them in CI.
        ProptestConfig {
            cases: if full_tests() { 256 } else { 64 },
            ..ProptestConfig::default()
        }
    })]

    #[test]
    fn the_name_index_matches_the_model(ops in prop::collection::vec(op(), 1..MAX_OPS)) {
        run(&ops);
    }
}

#[test]
fn interned_strings_survive_while_an_object_uses_them() {
    let mut heap = Heap::new();
    let keep = heap.spawn(Cell).name("Keeper_5").root().create().unwrap();
    let n = heap.name(keep).unwrap();
    let temp = heap.spawn(Cell).name("Temp").create().unwrap();
    let temp_name = heap.name(temp).unwrap();
    assert_eq!(heap.name_table_len(), 2);
    heap.collect().unwrap();
    // `Temp` had no other user: forgotten, and its `Name` is refused.
    assert_eq!(heap.name_table_len(), 1);
    assert_eq!(heap.name_string(temp_name), None);
    assert_eq!(
        heap.spawn(Cell).name(temp_name).create().unwrap_err(),
        Error::StaleName(temp_name)
    );
    // `Keeper` is still used: its `Name` still works, with other numbers too.
    for i in 0..4 {
        heap.spawn(Cell)
            .name(format!("Other_{i}"))
            .create()
            .unwrap();
        heap.collect().unwrap();
    }
    assert_eq!(heap.name_string(n).as_deref(), Some("Keeper_5"));
    let k6 = heap
        .spawn(Cell)
        .name(n.with_number(6))
        .root()
        .create()
        .unwrap();
    assert_eq!(heap.find_path("Keeper_6"), Some(k6.any()));
    // An interned base outlives every object.
    let base: Name = heap.intern("Pinned").unwrap();
    heap.spawn(Cell).name(base.with_number(1)).create().unwrap();
    heap.collect().unwrap();
    assert_eq!(heap.name_string(base).as_deref(), Some("Pinned"));
    assert_eq!(heap.name_table_len(), 2, "Keeper and Pinned");
}

#[test]
fn the_table_does_not_grow_when_names_churn() {
    let mut heap = Heap::new();
    let rounds = if cfg!(miri) { 5 } else { 200 };
    let keep = heap.spawn(Cell).name("Root").root().create().unwrap();
    for r in 0..rounds {
        for i in 0..20 {
            // A new base string every time, under the root and at the top.
            let s = format!("N{r}x{i}");
            heap.spawn(Cell).name(s.as_str()).create().unwrap();
            heap.spawn(Cell).outer(keep).name(s).create().unwrap();
        }
        assert!(heap.name_table_len() <= 41);
        heap.collect().unwrap();
        assert_eq!(heap.name_table_len(), 1, "round {r}: only Root is left");
    }
    assert_eq!(heap.find(None, "N0x0"), None);
    assert_eq!(heap.find_path("Root"), Some(keep.any()));
}

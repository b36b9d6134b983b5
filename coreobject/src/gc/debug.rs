//! Debugging: who keeps an object alive (Unreal's `obj refs`) and where the
//! memory goes (Unreal's `memreport`).

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::array::{flags, Item, ObjectArray, CHUNK_SIZE};
use crate::handle::AnyObj;
use crate::inners::Inners;
use crate::listener::HookId;
use crate::names::Names;
use crate::referencer::Referencer;
use crate::trace::{PathSeg, Visitor};

/// Why the first object of a [`RefChain`] is alive.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RootKind {
    /// It is in the root set (`add_to_root`).
    Rooted,
    /// `StrongObj` handles point at it (this many).
    Strong(usize),
    /// It is in the disregard-for-GC pool.
    Disregard,
    /// An external referencer reports it (its name).
    Referencer(String),
}

/// One object on a reference chain.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefLink {
    /// The object (serialized as `{"index": …, "serial": …}`).
    #[cfg_attr(feature = "serde", serde(serialize_with = "serialize_handle"))]
    pub object: AnyObj,
    /// Its display name (its name, or `Class_index`).
    pub label: String,
    /// Its class name.
    pub class: &'static str,
    /// The field path to the next object (`levels[3]`, or `(outer)` for the
    /// implicit outer reference, or `(inner)` when the next object is kept
    /// by this one as its outer, with
    /// [`GcConfig::outer_keeps_inners`](crate::GcConfig::outer_keeps_inners));
    /// `None` on the last link. `(cluster)` when the next object is kept
    /// because it shares this one's GC cluster.
    pub via: Option<String>,
    /// The GC cluster the object belongs to, if any: a chain through a
    /// cluster keeps every member of it.
    #[cfg_attr(feature = "serde", serde(skip))]
    pub cluster: Option<crate::ClusterId>,
}

/// A path from a root to an object: why it is alive.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefChain {
    /// Why the first link is alive.
    pub root: RootKind,
    /// From the root to the object asked about.
    pub links: Vec<RefLink>,
}

/// A handle in a report, as its index and serial: two numbers any JSON
/// reader holds exactly (the packed 64 bits would not fit a double).
#[cfg(feature = "serde")]
fn serialize_handle<S: serde::Serializer>(h: &AnyObj, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeStruct;
    let mut st = s.serialize_struct("AnyObj", 2)?;
    st.serialize_field("index", &h.index())?;
    st.serialize_field("serial", &h.serial())?;
    st.end()
}

impl fmt::Display for RefChain {
    /// `(rooted) World.levels[3] -> Level_3.actors[17] -> Hero`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.root {
            RootKind::Rooted => write!(f, "(rooted) ")?,
            RootKind::Strong(n) => write!(f, "(strong x{n}) ")?,
            RootKind::Disregard => write!(f, "(disregard pool) ")?,
            RootKind::Referencer(name) => write!(f, "({name}) ")?,
        }
        for (i, l) in self.links.iter().enumerate() {
            if i > 0 {
                write!(f, " -> ")?;
            }
            write!(f, "{}", l.label)?;
            if let Some(via) = &l.via {
                if via.starts_with('[') || via.starts_with('(') {
                    write!(f, "{via}")?;
                } else {
                    write!(f, ".{via}")?;
                }
            }
        }
        Ok(())
    }
}

/// Collects an object's outgoing strong edges, in trace order, into a
/// borrowed vector.
struct Append<'v>(&'v mut Vec<AnyObj>);
impl Visitor for Append<'_> {
    fn visit(&mut self, obj: AnyObj) {
        self.0.push(obj);
    }
}

/// Collects edges with their field paths.
struct Paths {
    segs: Vec<PathSeg>,
    out: Vec<String>,
}
impl Visitor for Paths {
    fn visit(&mut self, _obj: AnyObj) {
        let mut s = String::new();
        for seg in &self.segs {
            match seg {
                PathSeg::Field(n) => {
                    if !s.is_empty() {
                        s.push('.');
                    }
                    s.push_str(n);
                }
                PathSeg::Position(i) => {
                    if !s.is_empty() {
                        s.push('.');
                    }
                    s.push_str(&i.to_string());
                }
                PathSeg::Variant(v) => {
                    s.push_str(&format!("::{v}"));
                }
                PathSeg::Index(i) => s.push_str(&format!("[{i}]")),
                PathSeg::Key(i) => s.push_str(&format!("[key {i}]")),
                PathSeg::Value(i) => s.push_str(&format!("[value {i}]")),
            }
        }
        self.out.push(s);
    }
    fn enter(&mut self, seg: PathSeg) {
        self.segs.push(seg);
    }
    fn leave(&mut self) {
        self.segs.pop();
    }
}

/// One class's share of memory.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassMemory {
    /// Class name.
    pub class: &'static str,
    /// Objects allocated.
    pub count: usize,
    /// Bytes of their allocations (header and value; not what values own).
    pub bytes: usize,
}

/// The object pages of one size class (see [`MemoryReport::page_classes`]).
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageClassMemory {
    /// Slot size in bytes: objects of up to this size (rounded up to 8) share
    /// these pages.
    pub slot: usize,
    /// Pages held, in use or kept empty.
    pub pages: usize,
    /// Of those, empty pages kept for reuse.
    pub empty_pages: usize,
    /// Objects in the pages.
    pub objects: usize,
}

impl PageClassMemory {
    /// Bytes of the pages.
    pub fn page_bytes(&self) -> usize {
        self.pages * PAGE_SIZE
    }

    /// Bytes of the slots holding objects.
    pub fn slot_bytes(&self) -> usize {
        self.objects * self.slot
    }
}

/// The size of an object page: 64 KiB.
const PAGE_SIZE: usize = crate::array::PAGE;

/// Where the heap's memory goes (Unreal's `memreport`).
///
/// Objects of up to about 4 KiB live in 64 KiB pages, one set of pages per
/// size class ([`page_classes`](Self::page_classes)); larger or more aligned
/// ones are allocated one by one ([`large_bytes`](Self::large_bytes)).
/// [`total_bytes`](Self::total_bytes) adds up what the heap holds; memory
/// that objects own (a `Vec`'s buffer, a `String`) is not counted.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryReport {
    /// Per class, largest first.
    pub classes: Vec<ClassMemory>,
    /// Object allocations in total (the classes' sizes).
    pub object_bytes: usize,
    /// Memory reserved for objects in 64 KiB pages: live slots, slots free
    /// for reuse, and the empty pages each size class keeps.
    pub page_bytes: usize,
    /// Of [`page_bytes`](Self::page_bytes), the slots that hold objects.
    pub slot_bytes: usize,
    /// Empty pages kept for reuse (at most two per size class; more are
    /// returned to the system).
    pub empty_pages: usize,
    /// The pages of each size class that holds any, smallest slot first.
    pub page_classes: Vec<PageClassMemory>,
    /// Objects too large (or too aligned) for a page, allocated one by one.
    pub large_objects: usize,
    /// Their bytes.
    pub large_bytes: usize,
    /// The table's chunks (24 bytes a slot).
    pub table_bytes: usize,
    /// Of [`page_bytes`](Self::page_bytes) and
    /// [`table_bytes`](Self::table_bytes), what is mapped from the operating
    /// system directly rather than allocated from the global allocator (on
    /// Linux, all of both), and so invisible to a counting global allocator.
    pub mapped_bytes: usize,
    /// The collector's mark bitmap and work lists, the record of the slots
    /// handed out since a cycle began, the free list and the outer →
    /// inners index.
    pub collector_bytes: usize,
    /// What listeners report owning.
    pub listener_bytes: usize,
}

impl MemoryReport {
    /// Everything the heap holds: pages, large objects, table, collector and
    /// listeners.
    pub fn total_bytes(&self) -> usize {
        self.page_bytes
            + self.large_bytes
            + self.table_bytes
            + self.collector_bytes
            + self.listener_bytes
    }
}

impl fmt::Display for MemoryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let row =
            |f: &mut fmt::Formatter<'_>, label: &str, count: &dyn fmt::Display, bytes: usize| {
                writeln!(f, "{label:<28} {count:>10} {bytes:>14}")
            };
        let percent = |part: usize, whole: usize| {
            if whole == 0 {
                0.0
            } else {
                part as f64 * 100.0 / whole as f64
            }
        };
        writeln!(f, "{:<28} {:>10} {:>14}", "class", "objects", "bytes")?;
        for c in &self.classes {
            row(f, c.class, &c.count, c.bytes)?;
        }
        let count: usize = self.classes.iter().map(|c| c.count).sum();
        row(f, "(objects)", &count, self.object_bytes)?;
        let pages = self.page_bytes / PAGE_SIZE;
        row(
            f,
            &format!(
                "(pages, {:.0}% in use)",
                percent(self.slot_bytes, self.page_bytes)
            ),
            &pages,
            self.page_bytes,
        )?;
        for c in &self.page_classes {
            row(
                f,
                &format!(
                    "  {} B slots, {:.0}%, {} empty",
                    c.slot,
                    percent(c.slot_bytes(), c.page_bytes()),
                    c.empty_pages
                ),
                &c.pages,
                c.page_bytes(),
            )?;
        }
        row(f, "(large objects)", &self.large_objects, self.large_bytes)?;
        row(f, "(table)", &"", self.table_bytes)?;
        row(f, "(collector)", &"", self.collector_bytes)?;
        row(f, "(listeners)", &"", self.listener_bytes)?;
        write!(f, "{:<28} {:>10} {:>14}", "(total)", "", self.total_bytes())
    }
}

/// The heap's parts a report reads.
pub(crate) struct Reports<'a> {
    pub(crate) array: &'a ObjectArray,
    pub(crate) names: &'a RwLock<Names>,
    pub(crate) referencers: &'a [(HookId, Arc<dyn Referencer>)],
    /// The outer → inners index, when outers keep their inners alive.
    pub(crate) inners: Option<&'a Mutex<Inners>>,
    /// GC clusters: a member keeps the other members.
    pub(crate) clusters: &'a Mutex<crate::cluster::Clusters>,
}

impl Reports<'_> {
    /// The object's own references: fields, outer, inners (not its cluster
    /// mates).
    pub(crate) fn own_edges_of(&self, index: u32) -> Vec<AnyObj> {
        self.edges(index, false).0
    }

    /// Appends the object's own references (as
    /// [`own_edges_of`](Self::own_edges_of)) to `out`, with no allocation of
    /// its own; whether the slot holds an object.
    pub(crate) fn own_edges_into(&self, index: u32, out: &mut Vec<AnyObj>) -> bool {
        let Some(o) = self.array.slot(self.names, index) else {
            return false;
        };
        let p = o.header_ptr();
        // SAFETY: `p` is a live header of its own class; `&self` keeps it alive.
        unsafe { (p.as_ref().class().vt.trace_dyn)(p, &mut Append(out)) };
        if let Some(outer) = o.outer() {
            out.push(outer);
        }
        if let Some(inners) = self.inners {
            out.extend_from_slice(inners.lock().of(o.id().to_bits()));
        }
        true
    }

    /// What the collector would visit scanning the object, and how many of
    /// those are its fields, its outer and its inners (the rest are the
    /// other members of its GC cluster).
    fn edges(&self, index: u32, mates: bool) -> (Vec<AnyObj>, usize) {
        let mut e = Vec::new();
        let live = self.own_edges_into(index, &mut e);
        let own = e.len();
        let root = self.array.at(index).cluster_root();
        if live && mates && root != 0 {
            let clusters = self.clusters.lock();
            e.extend(
                clusters
                    .members_of(root)
                    .iter()
                    .filter(|m| m.index() != index),
            );
        }
        (e, own)
    }

    /// The cluster whose root's item field is `root_plus_one`, if its root
    /// lives.
    pub(crate) fn cluster_named(&self, root_plus_one: u32) -> Option<crate::ClusterId> {
        let i = root_plus_one.checked_sub(1)?;
        let o = self.array.slot(self.names, i)?;
        (self.array.at(i).cluster_root() == root_plus_one).then_some(crate::ClusterId(o.id()))
    }

    fn via_of(&self, index: u32, k: usize) -> String {
        let mut paths = Paths {
            segs: Vec::new(),
            out: Vec::new(),
        };
        let mut has_outer = false;
        if let Some(o) = self.array.slot(self.names, index) {
            let p = o.header_ptr();
            // SAFETY: as in `edges_of`.
            unsafe { (p.as_ref().class().vt.trace_dyn)(p, &mut paths) };
            has_outer = o.outer().is_some();
        }
        let fields = paths.out.len();
        let own = self.edges(index, false).1;
        match paths.out.get(k) {
            Some(path) => path.clone(),
            None if k == fields && has_outer => "(outer)".to_string(),
            None if k >= own => "(cluster)".to_string(),
            None => "(inner)".to_string(),
        }
    }

    pub(crate) fn reference_chains(&self, target: impl Into<AnyObj>, max: usize) -> Vec<RefChain> {
        let target = target.into();
        if self.array.lookup(target, 0).is_err() || max == 0 {
            return Vec::new();
        }
        let hw = self.array.high_water();
        let mut depth = vec![u32::MAX; hw as usize];
        let mut parents: HashMap<u32, Vec<(u32, usize)>> = HashMap::new();
        let mut root_of: HashMap<u32, RootKind> = HashMap::new();
        let mut queue = VecDeque::new();
        let mut seed = |i: u32, kind: RootKind, depth: &mut Vec<u32>, queue: &mut VecDeque<u32>| {
            if i as usize >= depth.len() {
                depth.resize(i as usize + 1, u32::MAX);
            }
            if depth[i as usize] == u32::MAX {
                depth[i as usize] = 0;
                root_of.insert(i, kind);
                queue.push_back(i);
            }
        };
        for i in 0..hw {
            let Some(o) = self.array.slot(self.names, i) else {
                continue;
            };
            let item = self.array.at(i);
            let f = item.flags();
            if f & flags::DEAD != 0 {
                continue;
            }
            let rc = item.refcount() as usize;
            if f & flags::ROOT != 0 {
                seed(i, RootKind::Rooted, &mut depth, &mut queue);
            } else if rc > 0 {
                seed(i, RootKind::Strong(rc), &mut depth, &mut queue);
            } else if o.is_disregard() {
                seed(i, RootKind::Disregard, &mut depth, &mut queue);
            }
        }
        for (_, r) in self.referencers {
            let mut e = Vec::new();
            r.add_referenced_objects(&mut Append(&mut e));
            for h in e {
                if self.array.lookup(h, flags::DEAD).is_ok() {
                    seed(
                        h.index(),
                        RootKind::Referencer(r.referencer_name()),
                        &mut depth,
                        &mut queue,
                    );
                }
            }
        }
        let t = target.index();
        if t as usize >= depth.len() {
            depth.resize(t as usize + 1, u32::MAX);
        }
        // Clusters whose mates were listed: once per cluster, from its first
        // member reached (the nearest to a root), or a search through a
        // cluster of n members would cost n * n edges.
        let mut expanded = std::collections::HashSet::new();
        while let Some(u) = queue.pop_front() {
            let d = depth[u as usize];
            if depth[t as usize] != u32::MAX && d >= depth[t as usize] {
                break;
            }
            let cluster = self.array.at(u).cluster_root();
            let mates = cluster != 0 && expanded.insert(cluster);
            for (k, v) in self.edges(u, mates).0.into_iter().enumerate() {
                if self.array.lookup(v, flags::DEAD).is_err() {
                    continue;
                }
                let vi = v.index();
                // Objects created (through `&Heap`, on another thread) after
                // the table was sized join it here.
                if vi as usize >= depth.len() {
                    depth.resize(vi as usize + 1, u32::MAX);
                }
                let dv = &mut depth[vi as usize];
                if *dv == u32::MAX {
                    *dv = d + 1;
                    parents.insert(vi, vec![(u, k)]);
                    queue.push_back(vi);
                } else if *dv == d + 1 {
                    let ps = parents.entry(vi).or_default();
                    if ps.len() < max {
                        ps.push((u, k));
                    }
                }
            }
        }
        if depth[t as usize] == u32::MAX {
            return Vec::new();
        }
        // Walk back from the target through the shortest-path parents.
        let mut chains = Vec::new();
        let mut stack: Vec<Vec<(u32, Option<usize>)>> = vec![vec![(t, None)]];
        while let Some(partial) = stack.pop() {
            if chains.len() >= max {
                break;
            }
            let head = partial.last().expect("non-empty").0;
            if depth[head as usize] == 0 {
                chains.push(self.render_chain(&partial, root_of[&head].clone()));
                continue;
            }
            for &(p, k) in parents.get(&head).into_iter().flatten() {
                let mut next = partial.clone();
                next.push((p, Some(k)));
                stack.push(next);
            }
        }
        chains
    }

    fn render_chain(&self, rev: &[(u32, Option<usize>)], root: RootKind) -> RefChain {
        // `rev` runs target → root; each entry's edge index leads to the entry before it.
        let mut links = Vec::with_capacity(rev.len());
        for (n, &(i, k)) in rev.iter().enumerate().rev() {
            let o = self
                .array
                .slot(self.names, i)
                .expect("on chain, so allocated");
            let _ = n;
            links.push(RefLink {
                object: o.id(),
                label: o.display_name(),
                class: o.class().name(),
                via: k.map(|k| self.via_of(i, k)),
                cluster: self.cluster_named(self.array.at(i).cluster_root()),
            });
        }
        RefChain { root, links }
    }

    pub(crate) fn memory_report(
        &self,
        collector_bytes: usize,
        listener_bytes: usize,
    ) -> MemoryReport {
        let mut by: HashMap<*const crate::Class, ClassMemory> = HashMap::new();
        for i in 0..self.array.high_water() {
            if let Some(o) = self.array.slot(self.names, i) {
                let c = o.class();
                let e = by.entry(c as *const _).or_insert(ClassMemory {
                    class: c.name(),
                    count: 0,
                    bytes: 0,
                });
                e.count += 1;
                e.bytes += c.size();
            }
        }
        let mut classes: Vec<_> = by.into_values().collect();
        classes.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.class.cmp(b.class)));
        let page_classes: Vec<_> = self
            .array
            .page_classes()
            .into_iter()
            .map(|c| PageClassMemory {
                slot: c.slot,
                pages: c.pages,
                empty_pages: c.empty_pages,
                objects: c.objects,
            })
            .collect();
        let (large_objects, large_bytes) = self.array.large_objects();
        let page_bytes = page_classes.iter().map(|c| c.page_bytes()).sum();
        let table_bytes =
            self.array.allocated_chunks() * CHUNK_SIZE as usize * std::mem::size_of::<Item>();
        MemoryReport {
            object_bytes: classes.iter().map(|c| c.bytes).sum(),
            classes,
            page_bytes,
            slot_bytes: page_classes.iter().map(|c| c.slot_bytes()).sum(),
            empty_pages: page_classes.iter().map(|c| c.empty_pages).sum(),
            page_classes,
            large_objects,
            large_bytes,
            table_bytes,
            mapped_bytes: if ObjectArray::MAPPED {
                page_bytes + table_bytes
            } else {
                0
            },
            collector_bytes: collector_bytes
                + self.array.free_remaining() * 4
                + self.array.list_bytes()
                + self.array.recorded_bytes(),
            listener_bytes,
        }
    }
}

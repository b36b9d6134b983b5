//! GC clusters (Unreal's `FUObjectCluster`): sets of objects kept or freed
//! as one unit. Reaching any member keeps every member. While no member has
//! changed since the cluster's references out were gathered, a reached
//! cluster costs the collector those references and one OR per bitmap word
//! its members' slots fall in (a few per 64 members created together), not
//! a trace of each member. A member changed through `get_mut` makes the
//! cluster stale: it is traced member by member until its references out
//! are gathered again, between cycles, so no write into a member can break
//! the rule. The item's cluster field holds the root's slot index plus one.
//!
//! The bookkeeping lives here; [`Heap`](crate::Heap) creates, grows and
//! dissolves clusters, and the collector reads the members when it greys a
//! clustered object and forgets a cluster when its root is freed.

use std::collections::HashMap;
use std::fmt;

use rustc_hash::FxBuildHasher;

use crate::handle::AnyObj;

/// A GC cluster, named by its root object (Unreal's `ClusterRootIndex`).
///
/// ```
/// use coreobject::{Heap, Obj, Object};
/// #[derive(Object, Default)]
/// struct Level { props: Vec<Obj<Prop>> }
/// #[derive(Object, Default)]
/// struct Prop;
/// let mut heap = Heap::new();
/// let level = heap.spawn(Level::default()).root().create().unwrap();
/// for _ in 0..3 {
///     let p = heap.spawn(Prop).outer(level).create().unwrap();
///     heap[level].props.push(p);
/// }
/// let cluster = heap.create_cluster(level).unwrap();
/// assert_eq!(cluster.root(), level.any());
/// assert_eq!(heap.cluster_members(cluster).len(), 4);
/// assert_eq!(heap.cluster_of(heap[level].props[0]), Some(cluster));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterId(pub(crate) AnyObj);

impl ClusterId {
    /// The cluster's root object.
    pub fn root(self) -> AnyObj {
        self.0
    }
}

impl fmt::Display for ClusterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cluster {}", self.0.index())
    }
}

/// Why a cluster operation was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// The object is not alive (stale, foreign, or marked as garbage).
    #[error("the object is not alive")]
    NotAlive,
    /// The cluster does not exist (dissolved, or its root was freed).
    #[error("no such cluster")]
    NoSuchCluster,
    /// The object is already in a cluster.
    #[error("the object is already in a cluster")]
    AlreadyClustered,
    /// The object may not join a cluster: it is in the disregard-for-GC
    /// pool, a class default object, rooted (only a cluster's root may be),
    /// or of a class that opted out (`#[object(cluster = false)]`).
    #[error(
        "the object may not join a cluster (pool, class default, rooted, or its class opted out)"
    )]
    NotClusterable,
    /// A collection cycle is in flight: clusters change only between cycles.
    #[error("a collection cycle is in flight; finish it first")]
    CycleInFlight,
}

/// Mark bits by bitmap word: `(word, bits)` pairs.
pub(crate) type MarkWords = [(u32, u64)];

/// One cluster: its root and its members (the root first).
#[derive(Debug)]
pub(crate) struct Cluster {
    pub(crate) members: Vec<AnyObj>,
    /// The members' mark bits, by bitmap word: `(word, bits)` pairs, words
    /// ascending. A reached cluster is marked by OR-ing these into the mark
    /// bitmap, a few instructions per 64 slots when members were created
    /// together (as a level's objects are), instead of a test per member.
    pub(crate) words: Vec<(u32, u64)>,
    /// The references from members to objects outside the cluster, while no
    /// member has changed since they were gathered: a reached cluster then
    /// costs the collector these, not a trace of every member. `None`: trace
    /// the members (a member changed, or one is interior-mutable).
    pub(crate) external: Option<Vec<AnyObj>>,
}

/// Every cluster, by the root's slot index.
#[derive(Debug, Default)]
pub(crate) struct Clusters {
    pub(crate) by_root: HashMap<u32, Cluster, FxBuildHasher>,
    /// Roots of clusters whose external references are to be gathered again.
    pub(crate) stale: Vec<u32>,
    /// All clear between gatherings: a bitmap by slot of the references out
    /// listed so far, while a cluster is gathered.
    pub(crate) seen: Vec<u64>,
    /// Slots of the objects that joined a cluster since the last cycle
    /// started (clusters change only between cycles): the only young
    /// objects a minor cycle looks at for their cluster (see
    /// `gc::mark_phase::look_at_young`). Taken by each cycle's start.
    pub(crate) joined: Vec<u32>,
}

impl Clusters {
    /// A member of the cluster whose item field says `root_plus_one` changed:
    /// its external references must be gathered again.
    #[cold]
    pub(crate) fn changed(&mut self, root_plus_one: u32) {
        let root = root_plus_one.wrapping_sub(1);
        if let Some(c) = self.by_root.get_mut(&root) {
            if c.external.take().is_some() {
                self.stale.push(root);
            }
        }
    }

    /// The cluster's members' mark words and its external references, if
    /// those are current.
    #[inline]
    pub(crate) fn whole_of(&self, root_plus_one: u32) -> Option<(&MarkWords, &[AnyObj])> {
        let c = self.by_root.get(&root_plus_one.wrapping_sub(1))?;
        Some((&c.words, c.external.as_deref()?))
    }

    /// The members of the cluster whose item field says `root_plus_one`.
    #[inline]
    pub(crate) fn members_of(&self, root_plus_one: u32) -> &[AnyObj] {
        self.by_root
            .get(&root_plus_one.wrapping_sub(1))
            .map_or(&[], |c| &c.members)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.by_root.is_empty()
    }
}

impl Cluster {
    /// A cluster of `members` (the root first), its references out not yet
    /// gathered. `scratch` is a bitmap by slot, all clear (and left so).
    pub(crate) fn new(members: Vec<AnyObj>, scratch: &mut Vec<u64>) -> Self {
        let mut c = Cluster {
            members,
            words: Vec::new(),
            external: None,
        };
        c.index_words(scratch);
        c
    }

    /// Computes [`words`](Self::words) from the members, in a bitmap by slot
    /// (`scratch`, all clear and left so) when their slots are close enough
    /// together for its words to be read in order, else by sorting.
    pub(crate) fn index_words(&mut self, scratch: &mut Vec<u64>) {
        self.words.clear();
        let slots = self.members.iter().map(|m| m.index());
        let (Some(lo), Some(hi)) = (slots.clone().min(), slots.clone().max()) else {
            return;
        };
        let (lo, hi) = (lo >> 6, hi >> 6);
        if (hi - lo) as usize <= 4 * self.members.len() {
            if hi as usize >= scratch.len() {
                scratch.resize(hi as usize + 1, 0);
            }
            for i in slots {
                scratch[(i >> 6) as usize] |= 1u64 << (i & 63);
            }
            for (w, bits) in scratch[lo as usize..=hi as usize].iter_mut().enumerate() {
                if *bits != 0 {
                    self.words.push((lo + w as u32, std::mem::take(bits)));
                }
            }
            return;
        }
        let mut slots: Vec<u32> = slots.collect();
        slots.sort_unstable();
        for i in slots {
            let (w, bit) = (i >> 6, 1u64 << (i & 63));
            match self.words.last_mut() {
                Some((last, bits)) if *last == w => *bits |= bit,
                _ => self.words.push((w, bit)),
            }
        }
    }
}

/// One cluster in a [`ClusterReport`] (Unreal's `gc.ListClusters`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterInfo {
    /// The cluster.
    pub id: ClusterId,
    /// The root's display name.
    pub root_name: String,
    /// Members alive, the root included.
    pub members: usize,
    /// Distinct objects outside the cluster that members reference (2,000
    /// props that all point at the same 6 assets: 6).
    pub external_refs: usize,
    /// References from members to objects outside the cluster, each counted
    /// (the props above: 2,000).
    pub external_ref_count: usize,
    /// Other clusters those references reach.
    pub referenced_clusters: Vec<ClusterId>,
}

/// Every cluster with its size and external references, and totals
/// ([`Heap::cluster_report`](crate::Heap::cluster_report)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterReport {
    /// The clusters, largest first.
    pub clusters: Vec<ClusterInfo>,
    /// Members of all clusters.
    pub total_members: usize,
    /// Distinct objects referenced from outside, summed over the clusters.
    pub total_external_refs: usize,
}

impl fmt::Display for ClusterReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} clusters, {} members, {} objects referenced from outside",
            self.clusters.len(),
            self.total_members,
            self.total_external_refs
        )?;
        for c in &self.clusters {
            writeln!(
                f,
                "  {} ({}): {} members, {} external references ({} objects), {} referenced clusters",
                c.id,
                c.root_name,
                c.members,
                c.external_ref_count,
                c.external_refs,
                c.referenced_clusters.len()
            )?;
        }
        Ok(())
    }
}

/// What [`Heap::verify_clusters`](crate::Heap::verify_clusters) finds wrong
/// with the clusters' bookkeeping. By construction it finds nothing: it is
/// the oracle the tests check against.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClusterViolation {
    /// A live member whose item does not name its cluster's root.
    WrongRoot {
        /// The cluster.
        cluster: ClusterId,
        /// The member.
        member: AnyObj,
    },
    /// A live object whose item names a cluster that does not list it.
    NotListed {
        /// The object.
        object: AnyObj,
    },
    /// A member that may not be in a cluster (pool, garbage, or its class
    /// opted out).
    Ineligible {
        /// The cluster.
        cluster: ClusterId,
        /// The member.
        member: AnyObj,
    },
    /// A member that is freed while its cluster's root lives.
    Lost {
        /// The cluster.
        cluster: ClusterId,
        /// The freed member.
        member: AnyObj,
    },
}

//! GC clusters (Unreal's `FUObjectCluster`), made at run time from any
//! object graph, and the debugging surface around them: the cluster report,
//! the bookkeeping check, and Graphviz pictures of references.

use std::collections::{BTreeSet, HashSet};
use std::fmt::Write as _;

use crate::array::flags;
use crate::cluster::{
    Cluster, ClusterError, ClusterId, ClusterInfo, ClusterReport, ClusterViolation, Clusters,
};
use crate::gc::Phase;
use crate::handle::AnyObj;
use crate::trace::prefetch_line;

use super::Heap;

impl Heap {
    /// Whether `h` may join a cluster (as its root when `root`).
    pub(super) fn clusterable(&self, h: AnyObj, root: bool) -> Result<(), ClusterError> {
        self.array
            .lookup(h, flags::DEAD)
            .map_err(|_| ClusterError::NotAlive)?;
        let item = self.array.at(h.index());
        if item.cluster_root() != 0 {
            return Err(ClusterError::AlreadyClustered);
        }
        if item.flags() & BARRED != 0 || (!root && item.is_root()) {
            return Err(ClusterError::NotClusterable);
        }
        Ok(())
    }

    fn no_cycle(&self) -> Result<(), ClusterError> {
        if self.gc.phase() == Phase::Idle {
            Ok(())
        } else {
            Err(ClusterError::CycleInFlight)
        }
    }

    /// Makes a GC cluster (Unreal's `CreateCluster`): `root` and the
    /// objects **inside** it (whose outer chain reaches `root`, Unreal's
    /// `IsIn`) that it reaches through traced references (fields, outers
    /// and, with [`GcConfig::outer_keeps_inners`](crate::GcConfig::outer_keeps_inners),
    /// inners) and that may join one: not rooted, not held by a
    /// [`StrongObj`](crate::StrongObj), not in the disregard-for-GC pool, not
    /// a class default object, not marked as garbage, not in another
    /// cluster, and of a class that did not opt out
    /// (`#[object(cluster = false)]`). The search goes on through members
    /// only. Everything else a member references (the root's own outer, a
    /// shared asset, another level) is an **external reference** of the
    /// cluster: it keeps its target alive while the cluster lives, and never
    /// makes it a member. So clustering a level's content never swallows
    /// the level that holds it, nor the levels it references. Objects
    /// without an outer inside the root join only through
    /// [`add_to_cluster`](Self::add_to_cluster).
    ///
    /// The collector keeps or frees a cluster as one unit: reaching any
    /// member keeps every member, so a member reachable only through the
    /// others lives while any of them is reachable. Writes into members need
    /// no care (members are still traced, so what they reference now stays
    /// alive). Marking a member as garbage dissolves its cluster, as in
    /// Unreal.
    ///
    /// Refused while a collection cycle is in flight
    /// ([`ClusterError::CycleInFlight`]).
    ///
    /// ```
    /// use coreobject::{Heap, Obj, Object};
    /// #[derive(Object, Default)]
    /// struct Node { next: Option<Obj<Node>> }
    /// let mut heap = Heap::new();
    /// let a = heap.create(Node::default());
    /// let b = heap.spawn(Node::default()).outer(a).create().unwrap(); // inside `a`
    /// let other = heap.create(Node::default()); // not inside `a`
    /// heap[a].next = Some(b);
    /// heap[b].next = Some(other);
    /// let c = heap.create_cluster(a).unwrap();
    /// assert_eq!(heap.cluster_of(other), None); // an external reference
    /// heap.add_to_root(b).unwrap(); // only `b` is reachable now
    /// heap.collect().unwrap();
    /// assert!(heap.contains(a), "kept with its cluster");
    /// assert_eq!(heap.cluster_members(c), [a.any(), b.any()]);
    /// ```
    pub fn create_cluster(&mut self, root: impl Into<AnyObj>) -> Result<ClusterId, ClusterError> {
        let root = root.into();
        self.no_cycle()?;
        self.clusterable(root, true)?;
        let tag = root.index() + 1;
        self.array.at(root.index()).set_cluster_root(tag);
        let mut seen = std::mem::take(&mut self.clusters.get_mut().seen);
        let mut members = vec![root];
        let external = self.walk(tag, &mut members, true, &mut seen);
        let clusters = self.clusters.get_mut();
        // The next minor cycle looks at the young ones among them.
        clusters.joined.extend(members.iter().map(|m| m.index()));
        let mut c = Cluster::new(members, &mut seen);
        c.external = external;
        clusters.seen = seen;
        clusters.by_root.insert(root.index(), c);
        Ok(ClusterId(root))
    }

    /// Gathers the references from the members of the cluster whose items
    /// say `tag` to objects outside it, so that a reached cluster costs the
    /// collector those rather than a trace of every member; with `grow`,
    /// first gathers the members: objects reached through traced references
    /// that may join (the item's cluster field, set as one joins, is the
    /// walk's visited mark). Each reference out is listed once (`seen`, a
    /// bitmap by slot, all clear and left so). `None` for clusters whose
    /// members are to be traced: those with an interior-mutable member
    /// (which can change without `get_mut`), and all of them while outers
    /// keep their inners (an inner created later is not a change of its
    /// outer).
    fn walk(
        &self,
        tag: u32,
        members: &mut Vec<AnyObj>,
        grow: bool,
        seen: &mut Vec<u64>,
    ) -> Option<Vec<AnyObj>> {
        let reports = self.reports();
        let mut cacheable = !self.gc.config().outer_keeps_inners;
        let (mut edges, mut external) = (Vec::new(), Vec::new());
        // References to no live object now: a slot restored with its serial,
        // or a garbage mark cleared, makes them resolve again without any
        // write into a member, so they are listed too (the marker drops the
        // ones still dead when it meets them).
        let mut dormant = Vec::new();
        let mut next = 0;
        // A batch of members at a time: their references' items are asked
        // for before the first is looked at, so that the misses overlap (as
        // in marking).
        while next < members.len() {
            let batch = next..members.len().min(next + GATHER_BATCH);
            next = batch.end;
            edges.clear();
            for &m in &members[batch] {
                if self.array.lookup(m, 0).is_ok() {
                    cacheable &= self.array.at(m.index()).flags() & flags::INTERIOR == 0;
                    reports.own_edges_into(m.index(), &mut edges);
                }
            }
            for &e in &edges {
                if let Some(item) = self.array.item(e.index()) {
                    prefetch_line(item as *const _);
                }
            }
            for &e in &edges {
                match self.join(e, tag) {
                    Join::Member if grow && self.inside(e, members[0]) => {
                        self.array.at(e.index()).set_cluster_root(tag);
                        members.push(e);
                    }
                    Join::Member | Join::Outside => list_once(seen, &mut external, e),
                    Join::Dead => dormant.push(e),
                    Join::Inside => {}
                }
            }
        }
        for e in &external {
            seen[(e.index() >> 6) as usize] = 0;
        }
        cacheable.then(|| {
            // Listed by whole handle: a dormant one may share its slot with a
            // live one listed above, or with another dormant one.
            dormant.sort_unstable();
            dormant.dedup();
            external.append(&mut dormant);
            external.shrink_to_fit();
            external
        })
    }

    /// What a reference met while the cluster whose members' items say
    /// `tag` is gathered leads to.
    fn join(&self, e: AnyObj, tag: u32) -> Join {
        let Some(item) = self.array.item(e.index()) else {
            return Join::Dead;
        };
        let f = item.flags();
        if item.serial() != e.serial() || item.object().is_none() || f & flags::DEAD != 0 {
            return Join::Dead;
        }
        // `clusterable`'s tests, on the item already loaded.
        match item.cluster_root() {
            r if r == tag => Join::Inside,
            0 if f & BARRED == 0 && !item.is_root() => Join::Member,
            _ => Join::Outside,
        }
    }

    /// Whether `e`'s outer chain reaches `root` (Unreal's `IsIn`): only
    /// such objects join a cluster as it is gathered. Outer chains end: an
    /// outer is older than its inners, and [`rename`](Self::rename) refuses
    /// to make an object its own outer.
    fn inside(&self, e: AnyObj, root: AnyObj) -> bool {
        let mut o = self.array.outer(e, 0).ok().flatten();
        while let Some(h) = o {
            if h == root {
                return true;
            }
            o = self.array.outer(h, 0).ok().flatten();
        }
        false
    }

    /// Gathers a cluster's references out again (see [`walk`](Self::walk)).
    fn gather_external(&mut self, root: u32) {
        let clusters = self.clusters.get_mut();
        let mut seen = std::mem::take(&mut clusters.seen);
        let c = clusters.by_root.get_mut(&root);
        let mut members = std::mem::take(&mut c.expect("a cluster to gather").members);
        let external = self.walk(root + 1, &mut members, false, &mut seen);
        let clusters = self.clusters.get_mut();
        clusters.seen = seen;
        let c = clusters
            .by_root
            .get_mut(&root)
            .expect("a cluster to gather");
        c.members = members;
        c.external = external;
    }

    /// Gathers again the external references of clusters whose members
    /// changed, between cycles.
    pub(super) fn refresh_clusters(&mut self) {
        if self.clusters.get_mut().stale.is_empty() || self.gc.phase() != Phase::Idle {
            return;
        }
        for root in std::mem::take(&mut self.clusters.get_mut().stale) {
            if self.clusters.get_mut().by_root.contains_key(&root) {
                self.gather_external(root);
            }
        }
    }

    /// Adds one object to a cluster (it must be allowed to join one, as for
    /// [`create_cluster`](Self::create_cluster)).
    pub fn add_to_cluster(
        &mut self,
        cluster: ClusterId,
        obj: impl Into<AnyObj>,
    ) -> Result<(), ClusterError> {
        let obj = obj.into();
        self.no_cycle()?;
        self.live_cluster(cluster)?;
        self.clusterable(obj, false)?;
        self.array
            .at(obj.index())
            .set_cluster_root(cluster.0.index() + 1);
        let clusters = self.clusters.get_mut();
        clusters.joined.push(obj.index());
        let c = clusters.by_root.get_mut(&cluster.0.index());
        let c = c.expect("checked alive");
        c.members.push(obj);
        let (w, bit) = (obj.index() >> 6, 1u64 << (obj.index() & 63));
        match c.words.binary_search_by_key(&w, |&(w, _)| w) {
            Ok(k) => c.words[k].1 |= bit,
            Err(k) => c.words.insert(k, (w, bit)),
        }
        // Its references out are gathered again before the next cycle.
        clusters.changed(cluster.0.index() + 1);
        Ok(())
    }

    /// A cluster whose root is alive: not freed, and not being destroyed
    /// (a root that waits in `is_ready_for_finish_destroy` takes its cluster
    /// with it).
    fn live_cluster(&self, cluster: ClusterId) -> Result<(), ClusterError> {
        let i = cluster.0.index();
        let alive = self.array.lookup(cluster.0, flags::UNREACHABLE).is_ok()
            && self.array.at(i).cluster_root() == i + 1
            && self.clusters.lock().by_root.contains_key(&i);
        alive.then_some(()).ok_or(ClusterError::NoSuchCluster)
    }

    /// Dissolves a cluster: its members become ordinary objects (each kept
    /// or freed on its own from the next cycle on). Returns how many there
    /// were.
    pub fn dissolve_cluster(&mut self, cluster: ClusterId) -> Result<usize, ClusterError> {
        self.live_cluster(cluster)?;
        Ok(dissolve(
            self.clusters.get_mut(),
            &self.array,
            cluster.0.index(),
        ))
    }

    /// Dissolves the cluster of a member marked as garbage (from `&self`).
    pub(super) fn dissolve_cluster_of(&self, h: AnyObj) {
        let root = self.array.at(h.index()).cluster_root();
        if root != 0 {
            dissolve(&mut self.clusters.lock(), &self.array, root - 1);
        }
    }

    /// The cluster the object belongs to (Unreal's `GetOwnerIndex` of its
    /// item), if any.
    pub fn cluster_of(&self, obj: impl Into<AnyObj>) -> Option<ClusterId> {
        let obj = obj.into();
        self.array.lookup(obj, flags::UNREACHABLE).ok()?;
        self.reports()
            .cluster_named(self.array.at(obj.index()).cluster_root())
    }

    /// The members of a cluster that are alive, the root first. Empty if
    /// the cluster does not exist.
    pub fn cluster_members(&self, cluster: ClusterId) -> Vec<AnyObj> {
        if self.live_cluster(cluster).is_err() {
            return Vec::new();
        }
        let tag = cluster.0.index() + 1;
        let clusters = self.clusters.lock();
        clusters
            .members_of(tag)
            .iter()
            .copied()
            .filter(|&m| {
                self.array.lookup(m, flags::UNREACHABLE).is_ok()
                    && self.array.at(m.index()).cluster_root() == tag
            })
            .collect()
    }

    /// Every cluster, by root index.
    pub fn clusters(&self) -> Vec<ClusterId> {
        let mut roots: Vec<u32> = self.clusters.lock().by_root.keys().copied().collect();
        roots.sort_unstable();
        let reports = self.reports();
        roots
            .into_iter()
            .filter_map(|i| reports.cluster_named(i + 1))
            .collect()
    }

    /// Each cluster's root, size, references out of it and the clusters
    /// those reach, largest first, with totals (Unreal's `gc.ListClusters`).
    ///
    /// ```
    /// use coreobject::{Heap, Obj, Object};
    /// #[derive(Object, Default)]
    /// struct Node { next: Vec<Obj<Node>> }
    /// let mut heap = Heap::new();
    /// let shared = heap.spawn(Node::default()).root().create().unwrap();
    /// let a = heap.create(Node::default());
    /// let b = heap.spawn(Node::default()).outer(a).create().unwrap();
    /// heap[a].next = vec![b, shared];
    /// heap[b].next = vec![shared];
    /// heap.create_cluster(a).unwrap();
    /// let report = heap.cluster_report();
    /// // Two references out, to one object.
    /// assert_eq!((report.total_members, report.total_external_refs), (2, 1));
    /// assert_eq!(report.clusters[0].external_ref_count, 2);
    /// assert!(report.to_string().starts_with("1 clusters, 2 members"));
    /// ```
    pub fn cluster_report(&self) -> ClusterReport {
        let reports = self.reports();
        let mut out = ClusterReport::default();
        for id in self.clusters() {
            let tag = id.0.index() + 1;
            let members = self.cluster_members(id);
            let mut external = 0;
            let mut targets = HashSet::new();
            let mut referenced = BTreeSet::new();
            for m in &members {
                for e in reports.own_edges_of(m.index()) {
                    if self.array.lookup(e, flags::DEAD).is_err() {
                        continue;
                    }
                    let r = self.array.at(e.index()).cluster_root();
                    if r == tag {
                        continue;
                    }
                    external += 1;
                    targets.insert(e);
                    if let Some(other) = reports.cluster_named(r) {
                        referenced.insert(other);
                    }
                }
            }
            out.total_members += members.len();
            out.total_external_refs += targets.len();
            out.clusters.push(ClusterInfo {
                id,
                root_name: self.display_name(id.0).unwrap_or_default(),
                members: members.len(),
                external_refs: targets.len(),
                external_ref_count: external,
                referenced_clusters: referenced.into_iter().collect(),
            });
        }
        out.clusters
            .sort_by(|a, b| b.members.cmp(&a.members).then(a.id.cmp(&b.id)));
        out
    }

    /// Checks the clusters' bookkeeping and returns what is wrong, as data
    /// (Unreal logs "Encountered N object(s) breaking GC Clusters
    /// assumptions"). By construction it finds nothing: every write into a
    /// member is traced as usual, so no assumption can be broken.
    pub fn verify_clusters(&self) -> Vec<ClusterViolation> {
        let mut v = Vec::new();
        let clusters = self.clusters.lock();
        let mut listed = HashSet::new();
        for (&root, c) in &clusters.by_root {
            let tag = root + 1;
            let Some(&root_h) = c.members.first() else {
                continue;
            };
            let id = ClusterId(root_h);
            // A root being destroyed (its `finish_destroy` may wait for
            // cycles) is not alive: its members went with it.
            let root_alive = self.array.lookup(root_h, flags::UNREACHABLE).is_ok();
            for &m in &c.members {
                listed.insert(m);
                match self.array.header(m, 0) {
                    Ok(h) => {
                        let item = self.array.at(m.index());
                        let f = item.flags();
                        if item.cluster_root() != tag {
                            // Dissolved members are not listed any more;
                            // a slot reused by another object is not ours.
                            continue;
                        }
                        if f & (flags::DISREGARD | flags::GARBAGE) != 0
                            || !h.class().can_be_in_cluster()
                        {
                            v.push(ClusterViolation::Ineligible {
                                cluster: id,
                                member: m,
                            });
                        }
                    }
                    Err(_) if root_alive => v.push(ClusterViolation::Lost {
                        cluster: id,
                        member: m,
                    }),
                    Err(_) => {}
                }
            }
            if root_alive && self.array.at(root).cluster_root() != tag {
                v.push(ClusterViolation::WrongRoot {
                    cluster: id,
                    member: root_h,
                });
            }
        }
        drop(clusters);
        for o in self.iter_all_allocated() {
            let r = self.array.at(o.index()).cluster_root();
            // An object being destroyed (flagged unreachable, or not reached
            // by the marking that just ended) is not a live one: a purge in
            // slices frees a cluster's root, which forgets the cluster, a
            // slice or more before its other members, all unreachable.
            if r != 0 && !listed.contains(&o) && self.array.lookup(o, flags::UNREACHABLE).is_ok() {
                v.push(ClusterViolation::NotListed { object: o });
            }
        }
        v
    }

    fn iter_all_allocated(&self) -> Vec<AnyObj> {
        let mut out = Vec::new();
        self.array
            .for_each_allocated(self.array.high_water(), |i, item| {
                if item.object().is_some() {
                    if let Some(s) = std::num::NonZeroU32::new(item.serial()) {
                        out.push(AnyObj::new(i, s));
                    }
                }
            });
        out
    }

    /// A Graphviz DOT picture of the objects within `depth` references of
    /// `obj` (Unreal's `obj refs` as a picture): one node per object,
    /// labelled with its display name, one edge per reference the collector
    /// follows (fields, outers, inners; cluster members are boxed together
    /// in a `subgraph cluster_N`).
    ///
    /// ```
    /// use coreobject::{Heap, Obj, Object};
    /// #[derive(Object, Default)]
    /// struct Node { next: Vec<Obj<Node>> }
    /// let heap = Heap::new();
    /// let a = heap.spawn(Node::default()).name("A").create().unwrap();
    /// let b = heap.spawn(Node::default()).name("B").create().unwrap();
    /// let mut heap = heap;
    /// heap[a].next.push(b);
    /// let dot = heap.neighbourhood_dot(a, 2);
    /// assert!(dot.starts_with("digraph refs {"));
    /// assert!(dot.contains(&format!("n{} -> n{};", a.index(), b.index())));
    /// ```
    pub fn neighbourhood_dot(&self, obj: impl Into<AnyObj>, depth: usize) -> String {
        let obj = obj.into();
        let reports = self.reports();
        let mut nodes = vec![obj];
        let mut edges = Vec::new();
        let mut seen: HashSet<AnyObj> = HashSet::from([obj]);
        let mut frontier = vec![obj];
        if self.array.lookup(obj, 0).is_err() {
            nodes.clear();
            frontier.clear();
        }
        for _ in 0..depth {
            let mut next = Vec::new();
            for &h in &frontier {
                for e in reports.own_edges_of(h.index()) {
                    if self.array.lookup(e, 0).is_err() {
                        continue;
                    }
                    edges.push((h, e));
                    if seen.insert(e) {
                        nodes.push(e);
                        next.push(e);
                    }
                }
            }
            frontier = next;
        }
        edges.sort_unstable();
        edges.dedup();
        self.dot(&nodes, &edges)
    }

    /// [`reference_chains`](Self::reference_chains) as a Graphviz DOT
    /// picture: every object on the chains, and the references between
    /// consecutive ones.
    pub fn reference_chains_dot(&self, target: impl Into<AnyObj>, max: usize) -> String {
        let mut nodes = Vec::new();
        let mut seen = HashSet::new();
        let mut edges = Vec::new();
        for chain in self.reference_chains(target, max) {
            for w in chain.links.windows(2) {
                edges.push((w[0].object, w[1].object));
            }
            for l in chain.links {
                if seen.insert(l.object) {
                    nodes.push(l.object);
                }
            }
        }
        edges.sort_unstable();
        edges.dedup();
        self.dot(&nodes, &edges)
    }

    fn dot(&self, nodes: &[AnyObj], edges: &[(AnyObj, AnyObj)]) -> String {
        let mut s = String::from("digraph refs {\n");
        let mut by_cluster: std::collections::BTreeMap<u32, Vec<AnyObj>> = Default::default();
        for &n in nodes {
            let label = self
                .display_name(n)
                .unwrap_or_default()
                .replace('\\', "\\\\")
                .replace('"', "\\\"");
            let _ = writeln!(s, "  n{} [label=\"{label}\"];", n.index());
            let r = self.array.at(n.index()).cluster_root();
            if r != 0 {
                by_cluster.entry(r - 1).or_default().push(n);
            }
        }
        for &(a, b) in edges {
            let _ = writeln!(s, "  n{} -> n{};", a.index(), b.index());
        }
        for (root, members) in by_cluster {
            let _ = write!(s, "  subgraph cluster_{root} {{ label=\"cluster {root}\";");
            for m in members {
                let _ = write!(s, " n{};", m.index());
            }
            s.push_str(" }\n");
        }
        s.push_str("}\n");
        s
    }
}

/// Members whose references are gathered together.
const GATHER_BATCH: usize = 16;

/// Item flags that keep an object out of every cluster: the pool, class
/// defaults, classes that opted out (the flag mirrors the class).
const BARRED: u32 = flags::DISREGARD | flags::DEFAULT_OBJECT | flags::NO_CLUSTER;

/// Where a reference met while gathering a cluster leads.
enum Join {
    /// To an object that may join the cluster (and does, while members
    /// are gathered).
    Member,
    /// To a member.
    Inside,
    /// To a live object outside the cluster: a reference out.
    Outside,
    /// To no live object (stale, garbage, or being destroyed).
    Dead,
}

/// Pushes `e` on `external` unless `seen` (a bitmap by slot) says it is
/// there already.
fn list_once(seen: &mut Vec<u64>, external: &mut Vec<AnyObj>, e: AnyObj) {
    let (w, bit) = ((e.index() >> 6) as usize, 1u64 << (e.index() & 63));
    if w >= seen.len() {
        seen.resize(w + 1, 0);
    }
    if seen[w] & bit == 0 {
        seen[w] |= bit;
        external.push(e);
    }
}

/// Dissolves the cluster whose root is in slot `root`: its members' items
/// no longer name it. Returns how many members it listed.
fn dissolve(clusters: &mut Clusters, array: &crate::array::ObjectArray, root: u32) -> usize {
    let Some(c) = clusters.by_root.remove(&root) else {
        return 0;
    };
    for m in &c.members {
        // The member still in its slot (alive, garbage or unreachable).
        let item = array.at(m.index());
        if item.serial() == m.serial() && item.cluster_root() == root + 1 {
            item.set_cluster_root(0);
        }
    }
    c.members.len()
}

#[cfg(test)]
mod tests {
    use crate::{GcConfig, Heap, HeapConfig, Object, ObjectEvent};

    #[derive(Object, Default)]
    struct Crate {
        _n: u64,
    }

    /// The purge's quick loop (a batch delete listener beside the clusters,
    /// so not the plainest loop) forgets the cluster of a root it frees,
    /// in whole and sliced cycles: no entry outlives its root.
    #[test]
    fn a_freed_root_takes_its_cluster_entry() {
        let mut heap = Heap::with_config(HeapConfig {
            gc: GcConfig::MANUAL,
            ..HeapConfig::DEFAULT
        })
        .unwrap();
        heap.on_delete_batch(|_: &[ObjectEvent]| {});
        let n = if cfg!(miri) { 12 } else { 200 };
        for (round, sliced) in [(0, false), (1, true), (2, false)] {
            let objs: Vec<_> = (0..n)
                .map(|_| heap.spawn_mut(Crate::default()).root().create().unwrap())
                .collect();
            for &h in objs.iter().step_by(3) {
                heap.create_cluster(h).unwrap();
            }
            for &h in objs.iter().skip(round % 2).step_by(2) {
                heap.remove_from_root(h).unwrap();
            }
            if sliced {
                while heap.step(5).completed.is_none() {}
            } else {
                heap.collect().unwrap();
            }
            let live_roots = objs
                .iter()
                .step_by(3)
                .filter(|&&h| heap.contains(h))
                .count();
            assert!(live_roots < objs.len().div_ceil(3), "some roots were freed");
            let entries = heap.clusters.lock().by_root.len();
            let before: usize = heap.clusters().len();
            assert_eq!(entries, before, "round {round}: an entry outlived its root");
            // Tidy up for the next round: every object goes.
            for &h in &objs {
                if heap.contains(h) {
                    heap.remove_from_root(h).unwrap();
                }
            }
            heap.collect().unwrap();
            assert_eq!(heap.clusters.lock().by_root.len(), 0, "round {round}");
        }
    }
}

//! End-of-run invariants, checked independently of the collector.
//!
//! After a final collection (and, when the run ends mid-cycle, after
//! finishing that cycle first) the demo walks the world itself, following
//! the fields it knows each class has (not the derive's generated tracing),
//! and compares what it finds with what the heap holds. Whether the
//! collector ran stop-the-world, incrementally or generationally, the checks
//! are the same (the final collection is a major one: after it, no
//! unreachable object may survive).

use std::collections::HashSet;
use std::sync::atomic::Ordering;

use coreobject::{AnyObj, Heap, Obj, Object, RefChain, RootKind};
use serde::Serialize;

use crate::model::{
    Actor, Asset, Component, Level, Package, Projectile, StaticContent, StaticProp, World,
};
use crate::stats::CollectionRecord;
use crate::world::{GcMode, Sim};

/// One invariant and whether it held.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    /// What was checked.
    pub name: &'static str,
    /// Whether it held.
    pub ok: bool,
    /// Numbers behind the verdict.
    pub detail: String,
}

fn check(name: &'static str, ok: bool, detail: String) -> Check {
    Check { name, ok, detail }
}

/// What the independent walk from the world found.
struct Walk {
    /// Live objects reached (the pool's included, through the registry).
    reached: HashSet<AnyObj>,
    /// Strong edges followed.
    edges: u64,
    /// Strong edges whose target is gone because it was marked as garbage.
    stale_garbage: u64,
    /// Strong edges whose target is gone although nothing killed it.
    lost: Vec<AnyObj>,
    /// Actors reached.
    actors: usize,
}

/// Walks every strong reference from the world, by the classes' fields.
fn walk(sim: &Sim) -> Walk {
    let heap = &sim.heap;
    let mut w = Walk {
        reached: HashSet::new(),
        edges: 0,
        stale_garbage: 0,
        lost: Vec::new(),
        actors: 0,
    };
    let mut stack: Vec<AnyObj> = vec![sim.world.any()];
    let mut out: Vec<AnyObj> = Vec::new();
    while let Some(h) = stack.pop() {
        if !heap.contains(h) {
            if sim.marked_garbage.contains(&h) {
                w.stale_garbage += 1;
            } else {
                w.lost.push(h);
            }
            continue;
        }
        if !w.reached.insert(h) {
            continue;
        }
        out.clear();
        edges_of(heap, h, &mut out);
        if heap.class_of(h).is_some_and(|c| c == Actor::class()) {
            w.actors += 1;
        }
        w.edges += out.len() as u64;
        stack.extend(out.iter().copied());
        // An object keeps its outer alive.
        if let Some(outer) = heap.outer_of(h) {
            w.edges += 1;
            stack.push(outer);
        }
    }
    w
}

/// The strong handles in one object, by its class's fields.
fn edges_of(heap: &Heap, h: AnyObj, out: &mut Vec<AnyObj>) {
    fn get<T: Object>(heap: &Heap, h: AnyObj) -> Option<&T> {
        heap.get(heap.downcast::<T>(h)?)
    }
    if let Some(w) = get::<World>(heap, h) {
        out.extend(w.levels.iter().map(|l| l.any()));
        out.extend(w.registry.values().map(|a| a.any()));
    } else if let Some(l) = get::<Level>(heap, h) {
        out.extend(l.actors.iter().map(|a| a.any()));
        out.extend(l.projectiles.iter().map(|p| p.any()));
        out.extend(l.static_content.map(|c| c.any()));
        out.extend(l.package.map(|p| p.any()));
    } else if let Some(c) = get::<StaticContent>(heap, h) {
        out.extend(c.props.iter().map(|p| p.any()));
    } else if let Some(p) = get::<StaticProp>(heap, h) {
        out.extend(p.components.iter().map(|c| c.any()));
    } else if let Some(a) = get::<Actor>(heap, h) {
        out.extend(a.root.map(|c| c.any()));
        out.extend(a.components.iter().map(|c| c.any()));
        out.extend(a.sockets.values().map(|c| c.any()));
        out.extend(a.owner.map(|o| o.any()));
        out.extend(a.loadout.weapon.map(|x| x.any()));
        out.extend(a.loadout.slots.iter().flatten().map(|x| x.any()));
    } else if let Some(c) = get::<Component>(heap, h) {
        out.extend(c.attach_parent.map(|p| p.any()));
        out.extend(c.asset.map(|x| x.any()));
        out.extend(c.material.map(|x| x.any()));
    } else if get::<Projectile>(heap, h).is_some() {
        // Only a weak instigator.
    } else if let Some(p) = get::<Package>(heap, h) {
        out.extend(p.assets.iter().map(|a| a.any()));
    } else if let Some(a) = get::<Asset>(heap, h) {
        out.extend(a.deps.iter().map(|d| d.any()));
    }
}

/// Picks the actor for the "who keeps it alive" report: preferably one that
/// was detached from its level but survives because an actor still in the
/// level owns it; otherwise any live actor.
pub fn chain_subject(sim: &Sim) -> Option<Obj<Actor>> {
    let survivor = sim
        .recent_detached
        .iter()
        .rev()
        .copied()
        .find(|&a| sim.heap.contains(a));
    survivor.or_else(|| {
        sim.levels()
            .iter()
            .flat_map(|&l| sim.heap[l].actors.clone())
            .find(|&a| sim.heap.contains(a))
    })
}

/// Runs every end-of-run check. `collections` are all the collections the
/// run recorded, the final one included.
pub fn verify(
    sim: &Sim,
    collections: &[CollectionRecord],
    chain: Option<(Obj<Actor>, &RefChain)>,
) -> Vec<Check> {
    let heap = &sim.heap;
    let mut checks = Vec::new();
    let w = walk(sim);

    checks.push(check(
        "reachable objects resolve",
        w.lost.is_empty(),
        format!(
            "{} strong edges followed from World; {} lead to actors marked as garbage (stale, as \
             they should be); {} lead to freed objects nobody killed{}",
            w.edges,
            w.stale_garbage,
            w.lost.len(),
            w.lost
                .first()
                .map(|h| format!(", e.g. {h:?}"))
                .unwrap_or_default()
        ),
    ));

    let live: Vec<AnyObj> = heap.iter().map(|o| o.id()).collect();
    let leaked: Vec<&AnyObj> = live.iter().filter(|h| !w.reached.contains(h)).collect();
    checks.push(check(
        "only reachable objects survive",
        leaked.is_empty() && live.len() == heap.len() && w.reached.len() == heap.len(),
        format!(
            "heap.len() = {}, iterated {}, reached from World {} ({} actors); {} alive but \
             unreachable{}",
            heap.len(),
            live.len(),
            w.reached.len(),
            w.actors,
            leaked.len(),
            leaked
                .first()
                .map(|h| format!(", e.g. {}", heap.path_name(**h).unwrap_or_default()))
                .unwrap_or_default()
        ),
    ));

    checks.push(check(
        "known-dead handles resolve to nothing",
        sim.violation_count == 0 && sim.graves_pending == 0,
        format!(
            "{} handles of objects killed or made unreachable were checked when the first \
             cycle that started after their death completed ({} died mid-cycle, so that was \
             the cycle after; {} were freed by minor cycles; {} times a minor cycle left an \
             old one alive and it was checked again at the next cycle, at the latest the \
             next major one); {} still resolved{}; {} were never checked",
            sim.counters.dead_handles_verified,
            sim.counters.dead_handles_deferred,
            sim.counters.dead_handles_freed_by_minors,
            sim.counters.dead_handles_carried,
            sim.violation_count,
            sim.violations
                .first()
                .map(|v| format!(", e.g. {v}"))
                .unwrap_or_default(),
            sim.graves_pending
        ),
    ));

    let created = sim.events.created.load(Ordering::Relaxed);
    let deleted = sim.events.deleted.load(Ordering::Relaxed);
    let totals = heap.gc_totals();
    checks.push(check(
        "creations minus deletions equal heap.len()",
        created == sim.counters.objects_created
            && deleted == totals.total_freed
            && created - deleted == heap.len() as u64,
        format!(
            "created {} (listener {}), deleted {} (listener), freed {} (collector), live {}",
            sim.counters.objects_created,
            created,
            deleted,
            totals.total_freed,
            heap.len()
        ),
    ));

    let destroyed = sim.events.actors_destroyed.load(Ordering::Relaxed);
    let live_actors = heap.iter_of::<Actor>().count() as u64;
    checks.push(check(
        "every freed actor ran begin_destroy",
        sim.counters.actors_spawned == destroyed + live_actors,
        format!(
            "spawned {}, begin_destroy ran {destroyed} times, live {live_actors}",
            sim.counters.actors_spawned
        ),
    ));

    let freed_sum: u64 = collections.iter().map(|c| c.freed as u64).sum();
    let minors = collections.iter().filter(|c| c.kind == "minor").count() as u64;
    let majors = collections.iter().filter(|c| c.kind == "major").count() as u64;
    let kinds_ok = minors == totals.minor_collections
        && majors == totals.major_collections
        && (sim.settings.gc == GcMode::Generational || minors == 0);
    checks.push(check(
        "collection stats add up",
        collections.len() as u64 == totals.collections
            && kinds_ok
            && freed_sum == totals.total_freed
            && sim.tick_freed == totals.total_freed
            && sim.protocol_errors.is_empty(),
        format!(
            "{} cycles completed by the records ({minors} minor, {majors} major), {} counted by \
             the heap ({} minor, {} major); freed {freed_sum} by the cycles' stats, {} by the \
             ticks, {} by the totals; {} tick protocol errors{}",
            collections.len(),
            totals.collections,
            totals.minor_collections,
            totals.major_collections,
            sim.tick_freed,
            totals.total_freed,
            sim.protocol_errors.len(),
            sim.protocol_errors
                .first()
                .map(|e| format!(", e.g. {e}"))
                .unwrap_or_default()
        ),
    ));

    let pool: Vec<AnyObj> = heap
        .iter()
        .filter(|o| o.is_disregard())
        .map(|o| o.id())
        .collect();
    let pool_assets = pool
        .iter()
        .filter(|&&o| {
            let class = heap.class_of(o);
            class == Some(Asset::class()) || class == Some(Package::class())
        })
        .count();
    let pool_ok = heap.disregard_len() as usize == sim.pool_objects
        && pool.len() == sim.pool_objects
        && pool_assets == sim.pool_objects;
    checks.push(check(
        "the disregard-for-GC pool is intact",
        pool_ok,
        format!(
            "{} pool objects created, {} in the pool now",
            sim.pool_objects,
            heap.disregard_len()
        ),
    ));

    checks.push(clusters(sim));

    let (ok, detail) = match chain {
        Some((actor, c)) => {
            let first = c.links.first().map(|l| l.object);
            let last = c.links.last().map(|l| l.object);
            (
                c.root == RootKind::Rooted
                    && first == Some(sim.world.any())
                    && last == Some(actor.any()),
                format!("{} links from World to the actor", c.links.len()),
            )
        }
        None => (false, "no reference chain to a live actor".to_string()),
    };
    checks.push(check(
        "the reference chain leads from World to the actor",
        ok,
        detail,
    ));
    checks
}

/// The GC clusters: with `--clusters on`, every loaded level's package and
/// static content are clusters of their own, their members are exactly the
/// static objects the simulation knows to be alive (no actor, projectile or
/// level in any), and the collector's bookkeeping check
/// (`Heap::verify_clusters`) finds nothing; with `--clusters off`, there
/// are none.
pub fn clusters(sim: &Sim) -> Check {
    let heap = &sim.heap;
    let report = heap.cluster_report();
    if !sim.settings.clusters.on() {
        return check(
            "GC clusters hold",
            heap.clusters().is_empty() && sim.cluster_errors.is_empty(),
            format!(
                "clusters off: {} clusters (none expected); {} static objects unclustered",
                report.clusters.len(),
                sim.static_objects
            ),
        );
    }
    let violations = heap.verify_clusters();
    let levels = sim.levels();
    let mut unclustered = Vec::new();
    for &l in &levels {
        let level = &heap[l];
        let roots = [
            level.static_content.map(|c| c.any()),
            level.package.map(|p| p.any()),
        ];
        for root in roots.into_iter().flatten() {
            let own = heap.cluster_of(root).is_some_and(|c| {
                c.root() == root && heap.cluster_members(c).first() == Some(&root)
            });
            if !own {
                unclustered.push(heap.path_name(root).unwrap_or_default());
            }
        }
    }
    let dynamic = [Actor::class(), Projectile::class(), Level::class()];
    let mut dynamic_members = 0;
    for c in heap.clusters() {
        for m in heap.cluster_members(c) {
            if heap.class_of(m).is_some_and(|k| dynamic.contains(&k)) {
                dynamic_members += 1;
            }
        }
    }
    let ok = violations.is_empty()
        && unclustered.is_empty()
        && dynamic_members == 0
        && report.clusters.len() == 2 * levels.len()
        && report.total_members == sim.static_objects
        && sim.pending_clusters.is_empty()
        && sim.cluster_errors.is_empty();
    check(
        "GC clusters hold",
        ok,
        format!(
            "{} clusters for {} levels (a package and static content each), {} members for {} \
             static objects alive; {} members of dynamic classes; {} loaded levels' roots not \
             clustered{}; verify_clusters found {}{}; {} waiting; {} errors{}",
            report.clusters.len(),
            levels.len(),
            report.total_members,
            sim.static_objects,
            dynamic_members,
            unclustered.len(),
            unclustered
                .first()
                .map(|n| format!(", e.g. {n}"))
                .unwrap_or_default(),
            violations.len(),
            violations
                .first()
                .map(|v| format!(", e.g. {v:?}"))
                .unwrap_or_default(),
            sim.pending_clusters.len(),
            sim.cluster_errors.len(),
            sim.cluster_errors
                .first()
                .map(|e| format!(", e.g. {e}"))
                .unwrap_or_default()
        ),
    )
}

#[cfg(test)]
mod tests {
    //! The GC clusters in a small world, and checks that catch a cluster
    //! keeping something alive that it should not.

    use std::time::Duration;

    use super::{chain_subject, verify, Check};
    use crate::model::{Component, ComponentKind, Transform};
    use crate::world::{Clusters, GcMode, Settings, Sim};

    /// Builds a small world, runs `frames` frames (levels stream at a third
    /// and two thirds of them), finishes collecting, and runs every check.
    fn run(gc: GcMode, clusters: Clusters, frames: u32) -> (Sim, Vec<Check>) {
        let mut sim = Sim::new(Settings {
            objects: 3_000,
            frames,
            seed: 9,
            gc,
            budget: Duration::from_micros(200),
            young_threshold: None,
            clusters,
            moves: crate::world::Moves::Door,
            effects: crate::world::EFFECTS_SHARE,
        })
        .unwrap();
        let mut records = Vec::new();
        for f in 0..frames {
            records.extend(sim.step(f).unwrap().1);
        }
        records.extend(sim.final_collection(frames).unwrap().records);
        let checks = recheck(&sim, &records);
        (sim, checks)
    }

    fn recheck(sim: &Sim, records: &[crate::stats::CollectionRecord]) -> Vec<Check> {
        let subject = chain_subject(sim);
        let chains = subject
            .map(|a| sim.heap.reference_chains(a, 1))
            .unwrap_or_default();
        verify(sim, records, subject.zip(chains.first()))
    }

    fn all_ok(checks: &[Check]) {
        for c in checks {
            assert!(c.ok, "{}: {}", c.name, c.detail);
        }
    }

    fn failed<'a>(checks: &'a [Check], name: &str) -> &'a Check {
        let c = checks.iter().find(|c| c.name == name).unwrap();
        assert!(!c.ok, "{name} should fail: {}", c.detail);
        c
    }

    /// With clusters on, in every collector mode: each loaded level's
    /// package and static content are clusters, the bookkeeping check finds
    /// nothing, the clusters of unloaded levels went with them, and every
    /// invariant holds (known-dead static content was freed on time).
    #[test]
    fn clusters_hold_in_every_mode() {
        for gc in [GcMode::Full, GcMode::Incremental, GcMode::Generational] {
            let (sim, checks) = run(gc, Clusters::On, 45);
            all_ok(&checks);
            let heap = &sim.heap;
            assert_eq!(heap.clusters().len(), 2 * sim.levels().len(), "{gc:?}");
            assert!(heap.verify_clusters().is_empty(), "{gc:?}");
            let c = &sim.counters;
            assert_eq!(c.levels_unloaded, 2, "{gc:?}");
            assert_eq!(c.clusters_created, 2 * c.levels_loaded, "{gc:?}");
            let report = heap.cluster_report();
            assert!(report.total_members > heap.len() / 2, "{gc:?}: {report}");
            assert_eq!(report.total_members, sim.static_objects, "{gc:?}");
            for l in sim.levels() {
                let sc = heap[l].static_content.unwrap();
                let cluster = heap.cluster_of(sc).unwrap();
                assert_eq!(cluster.root(), sc.any());
                let props = heap[sc].props.len();
                assert!(heap.cluster_members(cluster).len() > props, "{gc:?}");
            }
        }
    }

    /// Clusters off: the same world (stop-the-world runs are
    /// deterministic), with no cluster, every check holding.
    #[test]
    fn clusters_off_builds_the_same_world() {
        let (on, _) = run(GcMode::Full, Clusters::On, 30);
        let (off, checks) = run(GcMode::Full, Clusters::Off, 30);
        all_ok(&checks);
        assert!(off.heap.clusters().is_empty());
        assert_eq!(off.counters.clusters_created, 0);
        assert_eq!(on.counters.objects_created, off.counters.objects_created);
        assert_eq!(on.heap.len(), off.heap.len());
        assert_eq!(on.static_objects, off.static_objects);
    }

    /// The checks fail when a cluster keeps an unreachable object alive (a
    /// cluster is kept whole), and when a loaded level's static content is
    /// not clustered.
    #[test]
    fn the_checks_catch_a_cluster_gone_wrong() {
        let (mut sim, checks) = run(GcMode::Full, Clusters::On, 20);
        all_ok(&checks);
        let level = sim.levels()[0];
        let sc = sim.heap[level].static_content.unwrap();
        let cluster = sim.heap.cluster_of(sc).unwrap();
        // An object nothing references, added to the cluster: it survives
        // the collection with its cluster, unreachable.
        let stray = sim.heap.create(Component {
            kind: ComponentKind::Scene,
            attach_parent: None,
            asset: None,
            material: None,
            relative: Transform::default(),
        });
        sim.counters.objects_created += 1;
        sim.heap.add_to_cluster(cluster, stray).unwrap();
        let stats = sim.heap.collect().unwrap();
        assert_eq!(stats.freed, 0);
        assert!(sim.heap.contains(stray));
        let checks = recheck(&sim, &[]);
        failed(&checks, "only reachable objects survive");
        failed(&checks, "GC clusters hold");

        // A loaded level's package no longer clustered.
        let (mut sim, _) = run(GcMode::Full, Clusters::On, 20);
        let package = sim.heap[sim.levels()[1]].package.unwrap();
        let cluster = sim.heap.cluster_of(package).unwrap();
        sim.heap.dissolve_cluster(cluster).unwrap();
        let checks = recheck(&sim, &[]);
        let c = failed(&checks, "GC clusters hold");
        assert!(
            c.detail.contains("1 loaded levels' roots not clustered"),
            "{}",
            c.detail
        );
    }
}

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

use crate::model::{Actor, Asset, Component, Level, Package, Projectile, World};
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

    let pool_ok = heap.disregard_len() as usize == sim.pool_objects
        && heap.iter().filter(|o| o.is_disregard()).count() == sim.pool_objects
        && heap.iter_of::<Asset>().count() + heap.iter_of::<Package>().count() == sim.pool_objects;
    checks.push(check(
        "the disregard-for-GC pool is intact",
        pool_ok,
        format!(
            "{} pool objects created, {} in the pool now",
            sim.pool_objects,
            heap.disregard_len()
        ),
    ));

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

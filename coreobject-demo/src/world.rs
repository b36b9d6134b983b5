//! The simulation: builds the world, then advances it frame by frame.
//!
//! Each frame, in order:
//!
//! 1. levels drop stale entries from their actor lists (actors marked as
//!    garbage resolve to nothing, and are pruned here);
//! 2. at two points in the run a level is unloaded (removed from the world,
//!    so everything in it becomes unreachable) and a fresh one is loaded;
//! 3. a share of the actors die: most are marked as garbage, the rest are
//!    detached from their level (collected unless another actor still owns
//!    them strongly);
//! 4. a share of the actors think: they resolve their weak target lists,
//!    count the stale entries and re-resolve replacements, fire projectiles
//!    and pick up assets from the disregard-for-GC pool;
//! 5. projectiles fly and expire;
//! 6. new actors spawn until the population reaches this frame's target
//!    (which rises and falls in waves);
//! 7. the collector ticks: [`Heap::tick`] collects when its interval has
//!    passed or too many objects are allocated.
//!
//! After each collection, every handle of an object the simulation knows is
//! dead (actors it marked as garbage and their components, expired
//! projectiles, unloaded levels and their contents) must resolve to nothing.

use std::collections::{HashMap, HashSet, VecDeque};
use std::f64::consts::TAU;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use coreobject::{
    AnyObj, Error, GcConfig, Heap, HeapConfig, Obj, Object, ObjectEvent, ResolveError, Trigger,
};

use crate::model::{
    Actor, Archetype, Asset, AssetKind, Component, ComponentKind, Level, Loadout, Package,
    Projectile, Transform, World,
};
use crate::stats::{micros, CollectionRecord, Counters, FrameRecord};

/// Simulated time per frame (60 frames a second).
pub const DT: Duration = Duration::from_nanos(16_666_667);
/// The collector's interval trigger, in simulated time.
pub const GC_INTERVAL: Duration = Duration::from_millis(500);
/// Levels loaded at once.
const LEVELS: u32 = 8;
/// Share of actors that die each frame.
const CHURN: f64 = 0.015;
/// Share of deaths that are `mark_as_garbage` (the rest are detachments).
const GARBAGE_SHARE: f64 = 0.6;
/// Share of actors that think each frame.
const THINK_SHARE: f64 = 0.1;
/// Chance that a thinking shooter fires.
const FIRE_CHANCE: f64 = 0.08;
/// Chance that a thinking actor picks up an asset.
const EQUIP_CHANCE: f64 = 0.05;
/// Chance that a new actor is owned by another actor of its level.
const OWNER_CHANCE: f64 = 0.25;
/// Weak targets an actor tracks.
const MAX_TARGETS: usize = 3;
/// Length of one population wave, in frames.
const WAVE_FRAMES: f64 = 300.0;
/// Relative amplitude of the population wave.
const WAVE_AMPLITUDE: f64 = 0.2;
/// At most this share of the target population spawns in one frame.
const SPAWN_BUDGET: f64 = 0.05;
/// Recently detached actors remembered for the "who keeps it alive" query.
const DETACHED_MEMORY: usize = 256;
/// Violations kept verbatim (the rest are only counted).
const MAX_VIOLATIONS: usize = 20;

/// What the user asked for.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Target population (objects).
    pub objects: usize,
    /// Frames to simulate.
    pub frames: u32,
    /// Random seed.
    pub seed: u64,
}

/// The collector policy the demo runs with: collect every [`GC_INTERVAL`],
/// or as soon as half again the target population is allocated (the
/// permanent pool does not count toward the threshold).
pub fn gc_config(objects: usize) -> GcConfig {
    GcConfig {
        interval: Some(GC_INTERVAL),
        object_threshold: Some(objects * 3 / 2),
        ..GcConfig::MANUAL
    }
}

/// Pool assets by what components and loadouts use them for.
#[derive(Default)]
struct Assets {
    meshes: Vec<Obj<Asset>>,
    materials: Vec<Obj<Asset>>,
    sounds: Vec<Obj<Asset>>,
    all: Vec<Obj<Asset>>,
}

/// A handle of an object known to be unreachable: it must resolve to
/// nothing after the next collection.
#[derive(Clone, Copy, Debug)]
enum Grave {
    Actor(Obj<Actor>),
    Component(Obj<Component>),
    Projectile(Obj<Projectile>),
    Level(Obj<Level>),
}

/// Whether `h`'s object has been freed: not just hidden as garbage, but gone.
fn freed<T: Object>(heap: &Heap, h: Obj<T>) -> bool {
    matches!(heap.try_get(h), Err(ResolveError::Stale(_)))
        && heap.get_even_if_garbage(h).is_none()
        && heap.class_of(h).is_none()
}

/// Create and delete events as the heap's listeners saw them.
#[derive(Default)]
pub struct EventCounts {
    /// Objects created.
    pub created: AtomicU64,
    /// Objects deleted.
    pub deleted: AtomicU64,
    /// Actors that ran `begin_destroy`.
    pub actors_destroyed: Arc<AtomicU64>,
}

/// The game world and everything the run measures about it.
pub struct Sim {
    /// The heap holding every object.
    pub heap: Heap,
    /// The rooted world.
    pub world: Obj<World>,
    /// What the user asked for.
    pub settings: Settings,
    /// Event counts.
    pub counters: Counters,
    /// What create and delete listeners saw.
    pub events: Arc<EventCounts>,
    /// Invariant violations found during the run (the first few).
    pub violations: Vec<String>,
    /// Violations found during the run, in total.
    pub violation_count: u64,
    /// Every actor marked as garbage. Strong handles to these may go stale;
    /// to nothing else.
    pub marked_garbage: HashSet<AnyObj>,
    /// Recently detached actors (some stay alive through an owner).
    pub recent_detached: VecDeque<Obj<Actor>>,
    /// Objects in the disregard-for-GC pool.
    pub pool_objects: usize,
    rng: fastrand::Rng,
    assets: Assets,
    next_actor: u64,
    next_level: u32,
    /// Objects the simulation considers alive (in a level, not killed).
    population: usize,
    graves: Vec<Grave>,
}

impl Sim {
    /// Builds the world: assets in the disregard-for-GC pool, the rooted
    /// world, its levels, and actors up to the target population.
    pub fn new(settings: Settings) -> Result<Sim, Error> {
        let max_objects = (settings.objects.saturating_mul(4) + (1 << 16))
            .max(HeapConfig::DEFAULT.max_objects as usize)
            .min(1 << 31) as u32;
        let mut heap = Heap::with_config(HeapConfig {
            max_objects,
            disregard_pool_size: 4096,
            gc: gc_config(settings.objects),
            ..HeapConfig::DEFAULT
        })?;
        let events = Arc::new(EventCounts::default());
        let e = events.clone();
        heap.on_create(move |_: &ObjectEvent| {
            e.created.fetch_add(1, Ordering::Relaxed);
        });
        let e = events.clone();
        heap.on_delete(move |_: &ObjectEvent| {
            e.deleted.fetch_add(1, Ordering::Relaxed);
        });

        let mut rng = fastrand::Rng::with_seed(settings.seed);
        let mut counters = Counters::default();
        let assets = load_assets(&mut heap, &mut rng, &mut counters)?;
        let pool_objects = heap.disregard_len() as usize;

        let registry: HashMap<String, Obj<Asset>> = assets
            .all
            .iter()
            .filter_map(|&a| Some((heap.path_name(a)?, a)))
            .collect();
        let world = heap
            .spawn(World {
                levels: Vec::new(),
                registry,
                frame: 0,
            })
            .name("World")
            .root()
            .create()?;
        counters.objects_created += 1;

        let mut sim = Sim {
            heap,
            world,
            settings,
            counters,
            events,
            violations: Vec::new(),
            violation_count: 0,
            marked_garbage: HashSet::new(),
            recent_detached: VecDeque::new(),
            pool_objects,
            rng,
            assets,
            next_actor: 0,
            next_level: 0,
            population: 0,
            graves: Vec::new(),
        };
        for _ in 0..LEVELS {
            sim.load_level()?;
        }
        while sim.population < sim.settings.objects {
            let level = sim.pick_spawn_level();
            sim.spawn_actor(level)?;
        }
        Ok(sim)
    }

    /// Records an invariant violation.
    fn violation(&mut self, msg: String) {
        self.violation_count += 1;
        if self.violations.len() < MAX_VIOLATIONS {
            self.violations.push(msg);
        }
    }

    /// The loaded levels.
    pub fn levels(&self) -> Vec<Obj<Level>> {
        self.heap[self.world].levels.clone()
    }

    /// Simulates frame `frame`, then ticks the collector.
    pub fn step(&mut self, frame: u32) -> Result<(FrameRecord, Option<CollectionRecord>), Error> {
        let t0 = Instant::now();
        let created_before = self.counters.objects_created;
        let garbage_before = self.counters.actors_marked_garbage;
        let detached_before = self.counters.actors_detached;
        let stale_before = self.counters.weak_stale_freed + self.counters.weak_stale_garbage;

        self.heap[self.world].frame = u64::from(frame);
        self.compact_levels();
        let every = self.settings.frames / 3;
        if every >= 2 && frame > 0 && frame % every == 0 {
            self.stream_level()?;
        }
        self.kill_actors();
        self.think()?;
        self.fly_projectiles();
        self.spawn_to_target(frame)?;
        let logic = t0.elapsed();

        let live_before_tick = self.heap.len();
        let t1 = Instant::now();
        let stats = self.heap.tick(DT).completed;
        let tick = t1.elapsed();

        let collection = stats.map(|s| {
            self.check_graves();
            collection_record(frame, &s)
        });
        let record = FrameRecord {
            frame,
            target: self.target_population(frame),
            live: self.heap.len(),
            live_before_tick,
            created: self.counters.objects_created - created_before,
            marked_garbage: self.counters.actors_marked_garbage - garbage_before,
            detached: self.counters.actors_detached - detached_before,
            weak_stale: self.counters.weak_stale_freed + self.counters.weak_stale_garbage
                - stale_before,
            logic_us: micros(logic),
            tick_us: micros(tick),
            pause_us: collection.as_ref().map(|c| c.total_us),
        };
        Ok((record, collection))
    }

    /// Runs the final, explicit collection before the invariant checks.
    pub fn final_collection(&mut self, frame: u32) -> Result<CollectionRecord, Error> {
        let s = self.heap.collect()?;
        self.check_graves();
        Ok(collection_record(frame, &s))
    }

    /// After a collection: every known-dead handle must resolve to nothing.
    fn check_graves(&mut self) {
        let graves = std::mem::take(&mut self.graves);
        let collection = self.heap.gc_totals().collections;
        for g in graves {
            let ok = match g {
                Grave::Actor(h) => freed(&self.heap, h),
                Grave::Component(h) => freed(&self.heap, h),
                Grave::Projectile(h) => freed(&self.heap, h),
                Grave::Level(h) => freed(&self.heap, h),
            };
            if ok {
                self.counters.dead_handles_verified += 1;
            } else {
                self.violation(format!(
                    "{g:?} is known to be unreachable but still resolves after collection {collection}"
                ));
            }
        }
    }

    // ----- the world's structure ------------------------------------------

    /// Creates a level, adds it to the world, and returns it.
    fn load_level(&mut self) -> Result<Obj<Level>, Error> {
        let number = self.next_level;
        self.next_level += 1;
        let level = self
            .heap
            .spawn(Level {
                number,
                actors: Vec::new(),
                projectiles: Vec::new(),
            })
            .outer(self.world)
            .name(format!("Level_{number}"))
            .create()?;
        self.counters.objects_created += 1;
        self.counters.levels_loaded += 1;
        self.heap[self.world].levels.push(level);
        Ok(level)
    }

    /// Unloads a random level and loads a new one in its place. Everything
    /// in the old level becomes unreachable: owners are always in the same
    /// level, and nothing else holds actors strongly.
    fn stream_level(&mut self) -> Result<(), Error> {
        let levels = self.levels();
        if levels.is_empty() {
            return Ok(());
        }
        let i = self.rng.usize(..levels.len());
        let level = self.heap[self.world].levels.remove(i);
        self.counters.levels_unloaded += 1;
        self.graves.push(Grave::Level(level));
        let (actors, projectiles) = {
            let l = &self.heap[level];
            (l.actors.clone(), l.projectiles.clone())
        };
        for a in actors {
            if let Some(actor) = self.heap.get(a) {
                self.population -= 1 + actor.components.len();
                self.graves.push(Grave::Actor(a));
                self.graves
                    .extend(actor.components.iter().map(|&c| Grave::Component(c)));
            }
        }
        for p in projectiles {
            if self.heap.contains(p) {
                self.population -= 1;
                self.graves.push(Grave::Projectile(p));
            }
        }
        self.load_level()?;
        Ok(())
    }

    /// Drops actor entries that no longer resolve (marked as garbage, or
    /// already collected) from every level's list.
    fn compact_levels(&mut self) {
        for level in self.levels() {
            let mut actors = std::mem::take(&mut self.heap[level].actors);
            let before = actors.len();
            actors.retain(|&a| self.heap.contains(a));
            self.counters.stale_actor_entries_pruned += (before - actors.len()) as u64;
            self.heap[level].actors = actors;
        }
    }

    /// Picks a level for a new actor: the emptier of two random ones.
    fn pick_spawn_level(&mut self) -> Obj<Level> {
        let levels = &self.heap[self.world].levels;
        let a = levels[self.rng.usize(..levels.len())];
        let b = levels[self.rng.usize(..levels.len())];
        if self.heap[a].actors.len() <= self.heap[b].actors.len() {
            a
        } else {
            b
        }
    }

    fn random_transform(&mut self, spread: f32) -> Transform {
        let mut c = || (self.rng.f32() - 0.5) * spread;
        Transform {
            position: [c(), c(), c() * 0.1],
            yaw: c(),
        }
    }

    /// Creates a component of `actor`.
    fn component(
        &mut self,
        actor: Obj<Actor>,
        name: &str,
        kind: ComponentKind,
        parent: Option<Obj<Component>>,
    ) -> Result<Obj<Component>, Error> {
        let (asset, material) = match kind {
            ComponentKind::Mesh | ComponentKind::Wheel => (
                pick(&mut self.rng, &self.assets.meshes),
                pick(&mut self.rng, &self.assets.materials),
            ),
            ComponentKind::Audio => (pick(&mut self.rng, &self.assets.sounds), None),
            _ => (None, None),
        };
        let relative = self.random_transform(2.0);
        let c = self
            .heap
            .spawn(Component {
                kind,
                attach_parent: parent,
                asset,
                material,
                relative,
            })
            .outer(actor)
            .name(name)
            .create()?;
        self.counters.objects_created += 1;
        self.counters.components_created += 1;
        Ok(c)
    }

    /// Spawns an actor with its components into `level`.
    fn spawn_actor(&mut self, level: Obj<Level>) -> Result<Obj<Actor>, Error> {
        let id = self.next_actor;
        self.next_actor += 1;
        let archetype = match self.rng.u32(..100) {
            0..40 => Archetype::Soldier,
            40..60 => Archetype::Turret,
            60..85 => Archetype::Pickup,
            _ => Archetype::Vehicle,
        };
        let owner = if self.rng.f64() < OWNER_CHANCE {
            let actors = &self.heap[level].actors;
            let candidate = (!actors.is_empty()).then(|| actors[self.rng.usize(..actors.len())]);
            candidate.filter(|&o| self.heap.contains(o))
        } else {
            None
        };
        let transform = self.random_transform(10_000.0);
        let actor = self
            .heap
            .spawn(Actor {
                id,
                archetype,
                team: self.rng.u8(..4),
                hp: 100,
                transform,
                root: None,
                components: Vec::new(),
                sockets: HashMap::new(),
                owner,
                targets: Vec::new(),
                loadout: Loadout::default(),
                destroyed: self.events.actors_destroyed.clone(),
            })
            .outer(level)
            .name(format!("{}_{id}", archetype.prefix()))
            .create()?;
        self.counters.objects_created += 1;
        self.counters.actors_spawned += 1;

        let root = self.component(actor, "Root", ComponentKind::Scene, None)?;
        let mut components = vec![root];
        let mut sockets = HashMap::new();
        match archetype {
            Archetype::Soldier => {
                let mesh = self.component(actor, "Mesh", ComponentKind::Mesh, Some(root))?;
                let collider =
                    self.component(actor, "Collider", ComponentKind::Collider, Some(root))?;
                let weapon = self.component(actor, "Weapon", ComponentKind::Socket, Some(mesh))?;
                let audio = self.component(actor, "Audio", ComponentKind::Audio, Some(root))?;
                sockets.insert("weapon", weapon);
                sockets.insert("voice", audio);
                components.extend([mesh, collider, weapon, audio]);
            }
            Archetype::Turret => {
                let mesh = self.component(actor, "Mesh", ComponentKind::Mesh, Some(root))?;
                let collider =
                    self.component(actor, "Collider", ComponentKind::Collider, Some(root))?;
                let muzzle = self.component(actor, "Muzzle", ComponentKind::Socket, Some(mesh))?;
                sockets.insert("muzzle", muzzle);
                components.extend([mesh, collider, muzzle]);
            }
            Archetype::Pickup => {
                let mesh = self.component(actor, "Mesh", ComponentKind::Mesh, Some(root))?;
                components.push(mesh);
            }
            Archetype::Vehicle => {
                let body = self.component(actor, "Body", ComponentKind::Mesh, Some(root))?;
                let collider =
                    self.component(actor, "Collider", ComponentKind::Collider, Some(root))?;
                components.extend([body, collider]);
                for w in 0..4 {
                    let wheel = self.component(
                        actor,
                        &format!("Wheel_{w}"),
                        ComponentKind::Wheel,
                        Some(body),
                    )?;
                    components.push(wheel);
                }
                sockets.insert("driver", body);
            }
        }
        let rng = &mut self.rng;
        let all = &self.assets.all;
        let loadout = Loadout {
            weapon: if archetype.shoots() {
                pick(rng, all)
            } else {
                None
            },
            slots: (0..rng.usize(0..4))
                .map(|_| if rng.bool() { pick(rng, all) } else { None })
                .collect(),
            ammo: rng.u32(0..300),
        };

        self.population += 1 + components.len();
        let a = &mut self.heap[actor];
        a.root = Some(root);
        a.components = components;
        a.sockets = sockets;
        a.loadout = loadout;
        self.heap[level].actors.push(actor);
        Ok(actor)
    }

    // ----- the frame's events ---------------------------------------------

    /// Picks a live actor at random: its level and position in the list.
    fn random_live_actor(&mut self, levels: &[Obj<Level>]) -> Option<(Obj<Level>, usize)> {
        for _ in 0..8 {
            let level = levels[self.rng.usize(..levels.len())];
            let actors = &self.heap[level].actors;
            if actors.is_empty() {
                continue;
            }
            let i = self.rng.usize(..actors.len());
            if self.heap.contains(actors[i]) {
                return Some((level, i));
            }
        }
        None
    }

    /// Kills a share of the actors: marks most as garbage and detaches the
    /// rest from their level.
    fn kill_actors(&mut self) {
        let levels = self.levels();
        if levels.is_empty() {
            return;
        }
        let actors: usize = levels.iter().map(|&l| self.heap[l].actors.len()).sum();
        let expected = actors as f64 * CHURN;
        let kills = expected.floor() as usize + usize::from(self.rng.f64() < expected.fract());
        for _ in 0..kills {
            let Some((level, i)) = self.random_live_actor(&levels) else {
                break;
            };
            let actor = self.heap[level].actors[i];
            let components = self.heap[actor].components.clone();
            self.population -= 1 + components.len();
            if self.rng.f64() < GARBAGE_SHARE {
                // Stays in the level's list until the next compaction: the
                // handle there resolves to nothing from now on.
                self.heap
                    .mark_as_garbage(actor)
                    .expect("a live actor can be marked as garbage");
                self.counters.actors_marked_garbage += 1;
                self.marked_garbage.insert(actor.any());
                self.graves.push(Grave::Actor(actor));
                self.graves
                    .extend(components.into_iter().map(Grave::Component));
            } else {
                self.heap[level].actors.swap_remove(i);
                self.counters.actors_detached += 1;
                if self.recent_detached.len() == DETACHED_MEMORY {
                    self.recent_detached.pop_front();
                }
                self.recent_detached.push_back(actor);
            }
        }
    }

    /// A share of the actors think: check and re-resolve their weak
    /// targets, move, fire, and pick up assets.
    fn think(&mut self) -> Result<(), Error> {
        for level in self.levels() {
            let actors = self.heap[level].actors.clone();
            if actors.is_empty() {
                continue;
            }
            let thinkers = (actors.len() as f64 * THINK_SHARE).ceil() as usize;
            for _ in 0..thinkers {
                let me = actors[self.rng.usize(..actors.len())];
                let Some(actor) = self.heap.get(me) else {
                    continue;
                };
                let archetype = actor.archetype;
                let position = actor.transform.position;
                let old_targets = actor.targets.clone();

                let mut targets = Vec::with_capacity(MAX_TARGETS);
                let mut stale = 0;
                for t in old_targets {
                    self.counters.weak_checked += 1;
                    match self.heap.try_get(t) {
                        Ok(_) => targets.push(t),
                        Err(ResolveError::Garbage(_)) => {
                            stale += 1;
                            self.counters.weak_stale_garbage += 1;
                        }
                        Err(_) => {
                            stale += 1;
                            self.counters.weak_stale_freed += 1;
                        }
                    }
                }
                // Re-resolve: replace lost targets with live actors nearby.
                let mut tries = 0;
                while targets.len() < MAX_TARGETS && tries < 2 * MAX_TARGETS {
                    tries += 1;
                    let c = actors[self.rng.usize(..actors.len())];
                    if c != me && self.heap.contains(c) && !targets.contains(&c.downgrade()) {
                        targets.push(c.downgrade());
                        if stale > 0 {
                            stale -= 1;
                            self.counters.weak_reresolved += 1;
                        }
                    }
                }

                if archetype.shoots() && self.rng.f64() < FIRE_CHANCE {
                    if let Some(&target) = targets.first() {
                        self.fire(level, me, position, target.to_obj())?;
                    }
                }
                let equip = if self.rng.f64() < EQUIP_CHANCE {
                    pick(&mut self.rng, &self.assets.all)
                } else {
                    None
                };
                let step = [self.rng.f32() - 0.5, self.rng.f32() - 0.5];
                let a = &mut self.heap[me];
                a.targets = targets;
                a.transform.position[0] += step[0];
                a.transform.position[1] += step[1];
                a.transform.yaw = step[0].atan2(step[1]);
                if let Some(asset) = equip {
                    self.counters.assets_equipped += 1;
                    match a.loadout.slots.iter_mut().find(|s| s.is_none()) {
                        Some(slot) => *slot = Some(asset),
                        None => a.loadout.weapon = Some(asset),
                    }
                }
            }
        }
        Ok(())
    }

    /// Fires a projectile from `shooter` at `target`.
    fn fire(
        &mut self,
        level: Obj<Level>,
        shooter: Obj<Actor>,
        from: [f32; 3],
        target: Obj<Actor>,
    ) -> Result<(), Error> {
        let to = self.heap[target].transform.position;
        let d = [to[0] - from[0], to[1] - from[1], to[2] - from[2]];
        let len = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt().max(1e-3);
        let speed = 40.0 / len;
        let ttl = self.rng.u16(20..90);
        let p = self.heap.try_create(Projectile {
            instigator: shooter.downgrade(),
            velocity: [d[0] * speed, d[1] * speed, d[2] * speed],
            position: from,
            ttl,
        })?;
        self.counters.objects_created += 1;
        self.counters.projectiles_fired += 1;
        self.population += 1;
        self.heap[level].projectiles.push(p);
        Ok(())
    }

    /// Moves projectiles; expired ones are dropped by their level and
    /// become unreachable.
    fn fly_projectiles(&mut self) {
        let dt = DT.as_secs_f32();
        for level in self.levels() {
            let list = std::mem::take(&mut self.heap[level].projectiles);
            let mut kept = Vec::with_capacity(list.len());
            for p in list {
                let Some(pr) = self.heap.get_mut(p) else {
                    continue;
                };
                for k in 0..3 {
                    pr.position[k] += pr.velocity[k] * dt;
                }
                pr.ttl -= 1;
                if pr.ttl == 0 {
                    self.population -= 1;
                    self.counters.projectiles_expired += 1;
                    self.graves.push(Grave::Projectile(p));
                } else {
                    kept.push(p);
                }
            }
            self.heap[level].projectiles = kept;
        }
    }

    /// This frame's target population: the requested one, in waves.
    pub fn target_population(&self, frame: u32) -> usize {
        let wave = 1.0 + WAVE_AMPLITUDE * (TAU * f64::from(frame) / WAVE_FRAMES).sin();
        (self.settings.objects as f64 * wave) as usize
    }

    /// Spawns actors until the population reaches this frame's target, or
    /// this frame's spawn budget is spent.
    fn spawn_to_target(&mut self, frame: u32) -> Result<(), Error> {
        let target = self.target_population(frame);
        let budget = ((self.settings.objects as f64 * SPAWN_BUDGET) as u64).max(8);
        let start = self.counters.objects_created;
        while self.population < target && self.counters.objects_created - start < budget {
            let level = self.pick_spawn_level();
            self.spawn_actor(level)?;
        }
        Ok(())
    }
}

/// A random element of `from`, if any.
fn pick(rng: &mut fastrand::Rng, from: &[Obj<Asset>]) -> Option<Obj<Asset>> {
    (!from.is_empty()).then(|| from[rng.usize(..from.len())])
}

/// Opens the disregard-for-GC pool and loads packages of assets into it.
fn load_assets(
    heap: &mut Heap,
    rng: &mut fastrand::Rng,
    counters: &mut Counters,
) -> Result<Assets, Error> {
    const PACKAGES: [(&str, &str); 6] = [
        ("Characters", "Soldier"),
        ("Props", "Crate"),
        ("Vehicles", "Jeep"),
        ("Weapons", "Rifle"),
        ("Environment", "Rock"),
        ("Audio", "Shot"),
    ];
    heap.open_disregard_for_gc()?;
    let mut assets = Assets::default();
    for (package_name, stem) in PACKAGES {
        let package = heap
            .spawn(Package { assets: Vec::new() })
            .name(package_name)
            .create()?;
        counters.objects_created += 1;
        let mut contents = Vec::new();
        for i in 0..16 {
            let mut make = |kind: AssetKind, prefix: &str, deps: Vec<Obj<Asset>>| {
                let a = heap
                    .spawn(Asset {
                        kind,
                        size_kb: rng.u32(16..4096),
                        deps,
                    })
                    .outer(package)
                    .name(format!("{prefix}_{stem}_{i:02}"))
                    .create();
                counters.objects_created += 1;
                a
            };
            if package_name == "Audio" {
                let s = make(AssetKind::Sound, "S", Vec::new())?;
                assets.sounds.push(s);
                contents.push(s);
                continue;
            }
            let t = make(AssetKind::Texture, "T", Vec::new())?;
            let m = make(AssetKind::Material, "M", vec![t])?;
            let sm = make(AssetKind::Mesh, "SM", vec![m])?;
            assets.materials.push(m);
            assets.meshes.push(sm);
            contents.extend([t, m, sm]);
        }
        assets.all.extend(&contents);
        heap[package].assets = contents;
    }
    heap.close_disregard_for_gc();
    Ok(assets)
}

/// Converts the collector's stats into a record.
fn collection_record(frame: u32, s: &coreobject::CollectStats) -> CollectionRecord {
    CollectionRecord {
        frame,
        trigger: trigger_name(s.trigger),
        total_us: micros(s.total),
        mark_us: micros(s.mark),
        sweep_us: micros(s.sweep),
        destroy_us: micros(s.destroy),
        roots: s.roots,
        marked: s.marked,
        unreachable: s.unreachable,
        freed: s.freed,
        freed_bytes: s.freed_bytes,
        live_after: s.live,
    }
}

/// How the report names what started a collection.
pub fn trigger_name(t: Trigger) -> &'static str {
    match t {
        Trigger::Explicit => "final check",
        Trigger::EveryFrame => "every frame",
        Trigger::Interval => "interval",
        Trigger::ObjectCount => "object count",
        Trigger::Bytes => "bytes",
        _ => "growth",
    }
}

//! The simulation: builds the world, then advances it frame by frame.
//!
//! Each frame, in order:
//!
//! 1. levels drop stale entries from their actor lists (actors marked as
//!    garbage resolve to nothing, and are pruned here);
//! 2. at two points in the run a level is unloaded (removed from the world,
//!    so everything in it becomes unreachable, its static content and its
//!    package included) and a fresh one is loaded, with its own static
//!    content and package;
//! 3. a share of the actors die: most are marked as garbage, the rest are
//!    detached from their level (collected unless another actor still owns
//!    them strongly);
//! 4. a share of the actors think: they resolve their weak target lists,
//!    count the stale entries and re-resolve replacements, fire projectiles
//!    and pick up assets from the disregard-for-GC pool;
//! 5. projectiles fly and expire;
//! 6. new actors spawn until the population reaches this frame's target
//!    (which rises and falls in waves);
//! 7. the collector ticks: [`Heap::tick`] starts a major cycle when its
//!    interval has passed or too many objects are allocated, and (with
//!    `--gc generational`, the default) a minor cycle when enough objects
//!    were created since the last cycle. With `--gc full` the cycle runs
//!    whole, stop-the-world, in that tick; with `--gc incremental` and
//!    `--gc generational` each tick runs one slice of at most the budget, so
//!    a cycle spans several frames;
//! 8. with `--clusters on`, the static content and package of a level loaded
//!    while a cycle was in flight become GC clusters once it has completed
//!    (clusters are made between cycles).
//!
//! **Static and dynamic objects.** [`STATIC_SHARE`] of the target
//! population is static level content: each level, when it loads, places
//! props (static meshes, geometry, lights, each with its components) and
//! loads a package of its own assets. They live exactly as long as the
//! level, so a game clusters them at load (Unreal clusters a level's static
//! actors and a package's assets): with `--clusters on` (the default) each
//! level's static content and its package are GC clusters, which the
//! collector keeps or frees whole. The rest of the population, actors with
//! their components and projectiles, is dynamic: it spawns, dies and
//! churns every frame, and is never clustered (its classes opt out).
//! `--clusters off` builds the same world without clusters.
//!
//! Every handle of an object the simulation knows is dead (actors it marked
//! as garbage and their components, expired projectiles, unloaded levels and
//! their contents) must resolve to nothing once the first **major** cycle
//! that started after its death has completed (`Tick::completed`).
//! Stop-the-world, that is the collection in the same frame's tick.
//! Incrementally, an object that dies while a cycle is in flight may already
//! have been marked by it, and then survives it as floating garbage: its
//! handle is checked at the end of the cycle after. A minor cycle treats the
//! objects that survived an earlier cycle as alive, so an old unreachable
//! object legitimately survives it: its handle is carried over to the next
//! cycle, and only a major one's completion makes it a violation. An actor
//! marked as garbage before a cycle started must be freed by it whatever
//! its kind (a minor frees every object marked as garbage). No later: a
//! handle still resolving then is a violation.

use std::collections::{HashMap, HashSet, VecDeque};
use std::f64::consts::TAU;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use coreobject::{
    AnyObj, ClusterError, CollectStats, CycleKind, Error, GcConfig, Heap, HeapConfig, Name, Obj,
    Object, ObjectEvent, Phase, ResolveError, Tick, Trigger,
};
use serde::Serialize;

use crate::model::{
    Actor, Archetype, Asset, AssetKind, Component, ComponentKind, Level, Loadout, Package,
    Projectile, PropKind, StaticContent, StaticProp, Transform, World,
};
use crate::stats::{
    involuntary_switches, micros, rss_bytes, CollectionRecord, Counters, FrameRecord,
};

/// Simulated time per frame (60 frames a second).
pub const DT: Duration = Duration::from_nanos(16_666_667);
/// The collector's interval trigger, in simulated time.
pub const GC_INTERVAL: Duration = Duration::from_millis(500);
/// Levels loaded at once.
const LEVELS: u32 = 8;
/// Share of the target population that is static level content (props and
/// their components, and each level's package of assets), created when a
/// level loads and freed when it unloads. In a game level, placed static
/// geometry outnumbers what moves and dies; two objects in three is on the
/// low side of that.
pub const STATIC_SHARE: f64 = 2.0 / 3.0;
/// Meshes (each with its material and texture) in a level's own package.
const LEVEL_PACKAGE_MESHES: usize = 16;
/// Chance that a static prop's mesh is a shared one from the pool rather
/// than one of its level's package.
const SHARED_MESH_CHANCE: f64 = 0.2;
/// Share of actors that die each frame.
const CHURN: f64 = 0.015;
/// Share of deaths that are `mark_as_garbage` (the rest are detachments).
const GARBAGE_SHARE: f64 = 0.6;
/// Short-lived effects created each frame by default, as a share of the
/// target population (`--effects`, in percent): with the actors' churn and
/// level streaming, about 3% of the population is created a frame, 30,000
/// objects at 1,000,000.
pub const EFFECTS_SHARE: f64 = 0.026;
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
/// Ticks the end of the run may take to finish a cycle in flight before it
/// gives up (and reports it) rather than loop for ever.
const MAX_DRAIN_TICKS: usize = 1_000_000;

/// How the collector runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum GcMode {
    /// Minor cycles (young objects only) when [`young_threshold`] objects
    /// were created since the last cycle, major ones on the interval and
    /// the object count; each tick runs one slice of a cycle, held to the
    /// budget.
    Generational,
    /// Major cycles only; each tick runs one slice of a cycle, held to the
    /// budget.
    Incremental,
    /// Major cycles only, each run whole in the tick that starts it
    /// (stop-the-world).
    Full,
}

impl GcMode {
    /// The mode's name, as `--gc` spells it.
    pub fn name(self) -> &'static str {
        match self {
            GcMode::Generational => "generational",
            GcMode::Incremental => "incremental",
            GcMode::Full => "full",
        }
    }

    /// Whether each tick runs a budgeted slice (rather than whole cycles).
    pub fn sliced(self) -> bool {
        self != GcMode::Full
    }
}

/// Objects created since the last cycle that start a minor one in
/// generational mode: `settings.young_threshold` if set, else a tenth of
/// the target population (with the demo's churn, about five frames'
/// creation), at least 256.
pub fn young_threshold(settings: &Settings) -> Option<usize> {
    (settings.gc == GcMode::Generational).then(|| {
        settings
            .young_threshold
            .unwrap_or((settings.objects / 10).max(256))
    })
}

/// Whether the demo makes GC clusters (`--clusters`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Clusters {
    /// Each level's static content and its package become GC clusters when
    /// the level loads.
    On,
    /// The same world, without clusters.
    Off,
}

impl Clusters {
    /// Whether clusters are made.
    pub fn on(self) -> bool {
        self == Clusters::On
    }

    /// `"on"` or `"off"`, as `--clusters` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Clusters::On => "on",
            Clusters::Off => "off",
        }
    }
}

/// How actors and projectiles move every frame (`--moves`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Moves {
    /// Through the data door (`Heap::data_mut`): positions and weak
    /// target lists cannot hold strong handles, so moving and re-aiming
    /// cost the collector nothing; only a pick-up goes through `get_mut`.
    Door,
    /// Through `Heap::get_mut`, the general door: while a cycle marks,
    /// every moved object is re-scanned; between cycles, every old one
    /// joins the remembered set.
    GetMut,
}

impl Moves {
    /// `"door"` or `"get-mut"`, as `--moves` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Moves::Door => "door",
            Moves::GetMut => "get-mut",
        }
    }
}

/// What the user asked for.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Target population (objects).
    pub objects: usize,
    /// Frames to simulate.
    pub frames: u32,
    /// Random seed.
    pub seed: u64,
    /// How the collector runs.
    pub gc: GcMode,
    /// The collector's time budget per frame (enforced only when
    /// incremental; the yardstick of the per-frame figures in both modes).
    pub budget: Duration,
    /// Generational mode: objects created since the last cycle that start a
    /// minor one; `None` for the default ([`young_threshold`]).
    pub young_threshold: Option<usize>,
    /// Whether levels' static content and packages become GC clusters.
    pub clusters: Clusters,
    /// How every live actor and projectile moves each frame.
    pub moves: Moves,
    /// Short-lived effects created a frame, as a share of the target
    /// population ([`EFFECTS_SHARE`] by default).
    pub effects: f64,
}

impl Settings {
    /// Static objects each level loads with (its props with their
    /// components, and its package): [`STATIC_SHARE`] of the target
    /// population, spread over the levels.
    pub fn static_per_level(&self) -> usize {
        (self.objects as f64 * STATIC_SHARE / f64::from(LEVELS)) as usize
    }

    /// The dynamic part of the target population (actors, their components
    /// and projectiles), before the waves.
    pub fn dynamic_objects(&self) -> usize {
        self.objects
            .saturating_sub(self.static_per_level() * LEVELS as usize)
            .max(1)
    }
}

/// The collector policy the demo runs with: start a major cycle every
/// [`GC_INTERVAL`] (counted from the last cycle, minor or major), or as
/// soon as half again the target population is allocated (the permanent
/// pool does not count toward the threshold); in generational mode, a minor
/// cycle when [`young_threshold`] objects were created since the last
/// cycle; with `incremental` and `generational`, in slices of
/// `settings.budget`.
///
/// `incremental` and `full` turn [`GcConfig::generational`] off: no
/// remembered set is kept (the write barrier costs what it did before
/// minor cycles existed) and only major cycles run, as before.
pub fn gc_config(settings: &Settings) -> GcConfig {
    let generational = settings.gc == GcMode::Generational;
    GcConfig {
        interval: Some(GC_INTERVAL),
        object_threshold: Some(settings.objects * 3 / 2),
        incremental: settings.gc.sliced().then_some(settings.budget),
        generational,
        young_threshold: young_threshold(settings),
        ..GcConfig::MANUAL
    }
    .with_generational_majors(generational)
}

/// Generational mode: major cycles when the old generation has doubled
/// since the last major one (the library's default, `GcConfig::growth`),
/// and at the latest every [`GENERATIONAL_INTERVAL`], rather than on the
/// object count and every [`GC_INTERVAL`]: with most of what a frame
/// creates dying young, the object count measures the young garbage, which
/// minor cycles collect, and a major cycle due every half second would run
/// back to back and leave no room for minor ones.
trait GenerationalMajors {
    fn with_generational_majors(self, on: bool) -> Self;
}

impl GenerationalMajors for GcConfig {
    fn with_generational_majors(self, on: bool) -> GcConfig {
        if !on {
            return self;
        }
        GcConfig {
            interval: Some(GENERATIONAL_INTERVAL),
            object_threshold: None,
            growth: GcConfig::DEFAULT.growth,
            growth_floor: settings_floor(&self),
            ..self
        }
    }
}

/// The growth trigger's floor: the young threshold (no major cycle before
/// the old generation holds that much).
fn settings_floor(c: &GcConfig) -> usize {
    c.young_threshold.unwrap_or(GcConfig::DEFAULT.growth_floor)
}

/// Generational mode: the longest time between two major cycles.
pub const GENERATIONAL_INTERVAL: Duration = Duration::from_secs(10);

/// A cycle in flight: started, not yet completed.
#[derive(Clone, Copy, Debug)]
struct Cycle {
    /// Frame whose tick started it.
    started_frame: u32,
    /// The collector's time in it so far (`Tick::time` summed).
    time: Duration,
    /// Its kind as far as the start told: minor if the young threshold
    /// started it (`Trigger::Young`). `CollectStats::kind` says for sure
    /// when it completes.
    kind: CycleKind,
}

/// A stretch of the run, for the trace: microseconds since the run started.
#[derive(Clone, Copy, Debug, Default)]
pub struct Span {
    /// Start.
    pub start_us: f64,
    /// Length.
    pub dur_us: f64,
}

/// What the end of the run did to the collector.
#[derive(Clone, Debug)]
pub struct FinalGc {
    /// The cycles completed: the one in flight when the frames ended, if
    /// any (finished by ticking without advancing time), then the explicit
    /// collection.
    pub records: Vec<CollectionRecord>,
    /// Finishing the cycle in flight, if one was, and the collector's time
    /// in it.
    pub drain: Option<(Span, f64)>,
    /// Ticks it took.
    pub drain_ticks: usize,
    /// The longest of those ticks (`Tick::time`), in microseconds: no
    /// frame waited for it.
    pub drain_max_tick_us: f64,
    /// The explicit, stop-the-world collection.
    pub collect: Span,
}

/// Assets by what components and loadouts use them for (the pool's, or a
/// level package's).
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
    StaticContent(Obj<StaticContent>),
    StaticProp(Obj<StaticProp>),
    Package(Obj<Package>),
    Asset(Obj<Asset>),
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

/// The name bases the simulation uses, interned once
/// ([`Heap::intern`]): actors are `Soldier_<id>`, …, levels `Level_<n>`,
/// components `Root`, `Mesh`, …, `Wheel_<n>`.
struct Bases {
    soldier: Name,
    turret: Name,
    pickup: Name,
    vehicle: Name,
    level: Name,
    root: Name,
    mesh: Name,
    collider: Name,
    weapon: Name,
    audio: Name,
    muzzle: Name,
    body: Name,
    wheel: Name,
    static_content: Name,
    prop: Name,
    content: Name,
}

impl Bases {
    fn intern(heap: &Heap) -> Result<Bases, Error> {
        let n = |s: &str| heap.intern(s);
        Ok(Bases {
            soldier: n(Archetype::Soldier.prefix())?,
            turret: n(Archetype::Turret.prefix())?,
            pickup: n(Archetype::Pickup.prefix())?,
            vehicle: n(Archetype::Vehicle.prefix())?,
            level: n("Level")?,
            root: n("Root")?,
            mesh: n("Mesh")?,
            collider: n("Collider")?,
            weapon: n("Weapon")?,
            audio: n("Audio")?,
            muzzle: n("Muzzle")?,
            body: n("Body")?,
            wheel: n("Wheel")?,
            static_content: n("StaticContent")?,
            prop: n("Prop")?,
            content: n("Content")?,
        })
    }

    /// `<Archetype>_<id>` as a [`Name`], or as a string if the id does not
    /// fit a name's number.
    fn actor(&self, archetype: Archetype, id: u64) -> Result<Name, String> {
        let base = match archetype {
            Archetype::Soldier => self.soldier,
            Archetype::Turret => self.turret,
            Archetype::Pickup => self.pickup,
            Archetype::Vehicle => self.vehicle,
        };
        match u32::try_from(id) {
            Ok(n) if n <= Name::MAX_NUMBER => Ok(base.with_number(n)),
            _ => Err(format!("{}_{id}", archetype.prefix())),
        }
    }
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
    /// Static objects alive: the loaded levels' static content and packages
    /// (with `--clusters on`, the clusters' members).
    pub static_objects: usize,
    /// Cluster roots (levels' packages and static content) waiting for the
    /// cycle in flight to complete before they are clustered.
    pub pending_clusters: Vec<AnyObj>,
    /// Cluster operations that failed other than for a cycle in flight.
    pub cluster_errors: Vec<String>,
    /// When the run started: the trace's time zero.
    pub epoch: Instant,
    /// Objects freed, summed over every tick's `Tick::freed` and the final
    /// collection's `CollectStats::freed`.
    pub tick_freed: u64,
    /// Breaches of the tick protocol: a cycle that ended without reporting
    /// its stats, or ticks that never finished one.
    pub protocol_errors: Vec<String>,
    /// Known-dead handles not yet checked (waiting for a cycle to start, or
    /// for the one in flight to complete); none once the run is over.
    pub graves_pending: usize,
    rng: fastrand::Rng,
    assets: Assets,
    next_actor: u64,
    next_level: u32,
    /// Name bases interned once, so naming an object does no string work.
    names: Bases,
    /// Dynamic objects the simulation considers alive (actors in a level,
    /// not killed, their components, projectiles in flight).
    population: usize,
    /// Handles of objects that died since the last cycle started: the next
    /// cycle to start must free them.
    graves: Vec<Grave>,
    /// Handles the cycle in flight must free.
    cycle_graves: Vec<Grave>,
    /// The cycle in flight.
    cycle: Option<Cycle>,
}

impl Sim {
    /// Builds the world: assets in the disregard-for-GC pool, the rooted
    /// world, its levels, and actors up to the target population.
    pub fn new(settings: Settings) -> Result<Sim, Error> {
        let epoch = Instant::now();
        // Room for floating garbage: an incremental collector that falls
        // behind allocation holds several times the target population (the
        // table's chunks are allocated on first use, so the cap costs
        // nothing until then).
        let max_objects = (settings.objects.saturating_mul(16) + (1 << 16))
            .max(HeapConfig::DEFAULT.max_objects as usize)
            .min(1 << 31) as u32;
        let mut heap = Heap::with_config(HeapConfig {
            max_objects,
            disregard_pool_size: 4096,
            gc: gc_config(&settings),
            ..HeapConfig::DEFAULT
        })?;
        let events = Arc::new(EventCounts::default());
        let e = events.clone();
        heap.on_create(move |_: &ObjectEvent| {
            e.created.fetch_add(1, Ordering::Relaxed);
        });
        // Deletions are heard a batch at a time (one call per purge slice):
        // a game frees thousands of objects a frame.
        let e = events.clone();
        heap.on_delete_batch(move |batch: &[ObjectEvent]| {
            e.deleted.fetch_add(batch.len() as u64, Ordering::Relaxed);
        });

        let mut rng = fastrand::Rng::with_seed(settings.seed);
        let mut counters = Counters::default();
        let assets = load_assets(&mut heap, &mut rng, &mut counters)?;
        let pool_objects = heap.disregard_len() as usize;

        let registry: std::collections::BTreeMap<String, Obj<Asset>> = assets
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

        let names = Bases::intern(&heap)?;
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
            static_objects: 0,
            pending_clusters: Vec::new(),
            cluster_errors: Vec::new(),
            epoch,
            tick_freed: 0,
            protocol_errors: Vec::new(),
            graves_pending: 0,
            rng,
            assets,
            next_actor: 0,
            next_level: 0,
            names,
            population: 0,
            graves: Vec::new(),
            cycle_graves: Vec::new(),
            cycle: None,
        };
        for _ in 0..LEVELS {
            sim.load_level()?;
        }
        while sim.population < sim.settings.dynamic_objects() {
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

    /// Microseconds from the start of the run to `t`.
    pub fn since_start(&self, t: Instant) -> f64 {
        micros(t.saturating_duration_since(self.epoch))
    }

    /// Simulates frame `frame`, then ticks the collector.
    pub fn step(&mut self, frame: u32) -> Result<(FrameRecord, Option<CollectionRecord>), Error> {
        let t0 = Instant::now();
        let graves_before = self.graves.len();
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
        self.spray_effects()?;
        self.move_actors();
        self.fly_projectiles();
        self.spawn_to_target(frame)?;
        let logic = t0.elapsed();
        if self.cycle.is_some() {
            self.counters.dead_handles_deferred += (self.graves.len() - graves_before) as u64;
        }

        let live_before_tick = self.heap.len();
        let rss_before_tick = rss_bytes();
        let switches = involuntary_switches();
        let t1 = Instant::now();
        let tick = self.heap.tick(DT);
        let tick_wall = t1.elapsed();
        let preempted = matches!((switches, involuntary_switches()), (Some(a), Some(b)) if b > a);

        let collection = self.after_tick(frame, &tick);
        self.make_pending_clusters();
        let gc_kind = match &collection {
            Some(c) => Some(c.kind),
            None => self.cycle_kind().map(kind_name),
        };
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
            start_us: self.since_start(t0),
            logic_us: micros(logic),
            tick_start_us: self.since_start(t1),
            tick_us: micros(tick_wall),
            gc_us: micros(tick.time),
            gc_worked: tick.did_work(),
            gc_preempted: preempted,
            gc_phase: phase_name(tick.phase),
            gc_work: tick.work,
            gc_freed: tick.freed,
            gc_started: tick.started.map(trigger_name),
            gc_kind,
            pause_us: collection.as_ref().map(|c| c.cycle_us),
            rss_bytes: rss_before_tick.max(rss_bytes()),
        };
        Ok((record, collection))
    }

    /// Keeps the books after a tick: starts and completes cycles, and when
    /// one completes, checks the handles it had to free and returns its
    /// record.
    fn after_tick(&mut self, frame: u32, tick: &Tick) -> Option<CollectionRecord> {
        self.tick_freed += tick.freed as u64;
        let was_in_flight = self.cycle.is_some();
        // A cycle that starts in this tick covers every death so far. (One
        // that completes without a start having been seen started in this
        // tick too, after those deaths.)
        if !was_in_flight
            && (tick.started.is_some() || tick.completed.is_some() || tick.phase != Phase::Idle)
        {
            self.begin_cycle(frame, tick.started);
        }
        if let Some(c) = &mut self.cycle {
            c.time += tick.time;
        }
        let mut record = None;
        if let Some(stats) = &tick.completed {
            let cycle = self.cycle.take().unwrap_or(Cycle {
                started_frame: frame,
                time: tick.time,
                kind: stats.kind,
            });
            let graves = std::mem::take(&mut self.cycle_graves);
            self.check_graves(graves, stats.kind);
            record = Some(collection_record(frame, cycle, stats));
            // The tick completed the cycle in flight and started the next.
            if was_in_flight && (tick.started.is_some() || tick.phase != Phase::Idle) {
                self.begin_cycle(frame, tick.started);
            }
        } else if let Some(c) = self.cycle.filter(|_| tick.phase == Phase::Idle) {
            self.cycle = None;
            self.protocol_errors.push(format!(
                "the cycle started in frame {} went idle in frame {frame} without reporting \
                 completion",
                c.started_frame
            ));
            // Its handles go to the next cycle rather than go unchecked.
            let mut graves = std::mem::take(&mut self.cycle_graves);
            graves.append(&mut self.graves);
            self.graves = graves;
        }
        self.graves_pending = self.graves.len() + self.cycle_graves.len();
        record
    }

    /// A cycle started in `frame`'s tick (by `trigger`, if the tick said):
    /// it must free every object known to be dead by now (if it is a minor
    /// one: the actors marked as garbage; the rest may carry over).
    fn begin_cycle(&mut self, frame: u32, trigger: Option<Trigger>) {
        self.cycle = Some(Cycle {
            started_frame: frame,
            time: Duration::ZERO,
            kind: match trigger {
                Some(Trigger::Young) => CycleKind::Minor,
                _ => CycleKind::Major,
            },
        });
        self.cycle_graves.append(&mut self.graves);
    }

    /// The kind of the cycle in flight, as far as its start told.
    pub fn cycle_kind(&self) -> Option<CycleKind> {
        self.cycle.map(|c| c.kind)
    }

    /// Ends the run's collecting: finishes the cycle in flight, if any, by
    /// ticking without advancing simulated time, then runs an explicit,
    /// stop-the-world collection before the invariant checks.
    pub fn final_collection(&mut self, frame: u32) -> Result<FinalGc, Error> {
        let mut records = Vec::new();
        let mut drain = None;
        let mut drain_ticks = 0;
        let mut drain_max_tick = Duration::ZERO;
        if self.cycle.is_some() {
            let t = Instant::now();
            let mut gc = Duration::ZERO;
            while self.cycle.is_some() {
                if drain_ticks == MAX_DRAIN_TICKS {
                    self.protocol_errors.push(format!(
                        "{MAX_DRAIN_TICKS} ticks after the last frame, a cycle is still in flight"
                    ));
                    break;
                }
                let tick = self.heap.tick(Duration::ZERO);
                drain_ticks += 1;
                gc += tick.time;
                drain_max_tick = drain_max_tick.max(tick.time);
                // A cycle completed here had its last slices after the
                // frames: its longest slice is not a frame's.
                records.extend(self.after_tick(frame, &tick).map(|mut r| {
                    r.after_frames = true;
                    r
                }));
            }
            let span = Span {
                start_us: self.since_start(t),
                dur_us: micros(t.elapsed()),
            };
            drain = Some((span, micros(gc)));
        }
        self.make_pending_clusters();
        let t = Instant::now();
        let s = self.heap.collect()?;
        let collect = Span {
            start_us: self.since_start(t),
            dur_us: micros(t.elapsed()),
        };
        self.tick_freed += s.freed as u64;
        self.cycle = None;
        self.begin_cycle(frame, Some(s.trigger));
        let graves = std::mem::take(&mut self.cycle_graves);
        self.check_graves(graves, s.kind);
        self.cycle = None;
        self.graves_pending = self.graves.len() + self.cycle_graves.len();
        let cycle = Cycle {
            started_frame: frame,
            time: s.total,
            kind: s.kind,
        };
        records.push(collection_record(frame, cycle, &s));
        Ok(FinalGc {
            records,
            drain,
            drain_ticks,
            drain_max_tick_us: micros(drain_max_tick),
            collect,
        })
    }

    /// After a cycle of `kind` that started after every death in `graves`:
    /// after a major one, every handle must resolve to nothing. After a
    /// minor one, the actors marked as garbage must be gone too, but an old
    /// object that became unreachable legitimately survives: its handle is
    /// carried over to the next cycle (it died before that one starts).
    fn check_graves(&mut self, graves: Vec<Grave>, kind: CycleKind) {
        let totals = self.heap.gc_totals();
        let (collection, minors) = (totals.collections, totals.minor_collections);
        let mut carried = Vec::new();
        for g in graves {
            let ok = match g {
                Grave::Actor(h) => freed(&self.heap, h),
                Grave::Component(h) => freed(&self.heap, h),
                Grave::Projectile(h) => freed(&self.heap, h),
                Grave::Level(h) => freed(&self.heap, h),
                Grave::StaticContent(h) => freed(&self.heap, h),
                Grave::StaticProp(h) => freed(&self.heap, h),
                Grave::Package(h) => freed(&self.heap, h),
                Grave::Asset(h) => freed(&self.heap, h),
            };
            let garbage = matches!(g, Grave::Actor(h) if self.marked_garbage.contains(&h.any()));
            if ok {
                self.counters.dead_handles_verified += 1;
                if kind == CycleKind::Minor {
                    self.counters.dead_handles_freed_by_minors += 1;
                }
            } else if kind == CycleKind::Minor && !garbage {
                self.counters.dead_handles_carried += 1;
                carried.push(g);
            } else {
                let what = match kind {
                    CycleKind::Minor => format!(
                        "is marked as garbage but still resolves after collection {collection} \
                         (minor cycle {minors})"
                    ),
                    CycleKind::Major => format!(
                        "is known to be unreachable but still resolves after collection \
                         {collection} (a major cycle)"
                    ),
                };
                self.violation(format!("{g:?} {what}"));
            }
        }
        // Ahead of the deaths since the cycle started: the same next cycle.
        carried.append(&mut self.graves);
        self.graves = carried;
    }

    // ----- the world's structure ------------------------------------------

    /// Creates a level with its package and static content, adds it to the
    /// world, clusters what it loaded (with `--clusters on`), and returns it.
    fn load_level(&mut self) -> Result<Obj<Level>, Error> {
        let number = self.next_level;
        self.next_level += 1;
        let level = self
            .heap
            .spawn_mut(Level {
                number,
                actors: Vec::new(),
                projectiles: Vec::new(),
                static_content: None,
                package: None,
            })
            .outer(self.world)
            .name(self.names.level.with_number(number))
            .create()?;
        self.counters.objects_created += 1;
        self.counters.levels_loaded += 1;
        let quota = self.settings.static_per_level();
        let created_before = self.counters.objects_created;
        let (package, assets) = self.load_level_package(level, number)?;
        let static_content = self
            .heap
            .spawn_mut(StaticContent { props: Vec::new() })
            .outer(level)
            .name(self.names.static_content)
            .create()?;
        self.counters.objects_created += 1;
        let mut props = Vec::new();
        let mut made = (self.counters.objects_created - created_before) as usize;
        while made < quota {
            let prop = self.static_prop(static_content, props.len() as u32, &assets)?;
            made += 1 + self.heap[prop].components.len();
            props.push(prop);
        }
        self.counters.static_props_created += props.len() as u64;
        self.heap[static_content].props = props;
        let l = &mut self.heap[level];
        l.static_content = Some(static_content);
        l.package = Some(package);
        self.static_objects += (self.counters.objects_created - created_before) as usize;
        self.heap[self.world].levels.push(level);
        if self.settings.clusters.on() {
            // The package first: the static content's cluster then stops at
            // the package's assets rather than take them in.
            self.pending_clusters
                .extend([package.any(), static_content.any()]);
            self.make_pending_clusters();
        }
        Ok(level)
    }

    /// Loads a level's own package: textures, materials and meshes used by
    /// its static props only.
    fn load_level_package(
        &mut self,
        level: Obj<Level>,
        number: u32,
    ) -> Result<(Obj<Package>, Assets), Error> {
        let package = self
            .heap
            .spawn_mut(Package { assets: Vec::new() })
            .outer(level)
            .name(self.names.content)
            .create()?;
        self.counters.objects_created += 1;
        let mut assets = Assets::default();
        for i in 0..LEVEL_PACKAGE_MESHES {
            let mut make = |heap: &Heap, kind: AssetKind, prefix: &str, deps: Vec<Obj<Asset>>| {
                heap.spawn(Asset {
                    kind,
                    size_kb: self.rng.u32(16..4096),
                    deps,
                })
                .outer(package)
                .name(format!("{prefix}_L{number}_{i:02}"))
                .create()
            };
            let t = make(&self.heap, AssetKind::Texture, "T", Vec::new())?;
            let m = make(&self.heap, AssetKind::Material, "M", vec![t])?;
            let sm = make(&self.heap, AssetKind::Mesh, "SM", vec![m])?;
            self.counters.objects_created += 3;
            assets.materials.push(m);
            assets.meshes.push(sm);
            assets.all.extend([t, m, sm]);
        }
        self.heap[package].assets = assets.all.clone();
        Ok((package, assets))
    }

    /// Places a static prop (with its components) in a level's static
    /// content.
    fn static_prop(
        &mut self,
        static_content: Obj<StaticContent>,
        n: u32,
        level_assets: &Assets,
    ) -> Result<Obj<StaticProp>, Error> {
        let kind = match self.rng.u32(..100) {
            0..50 => PropKind::Geometry,
            50..90 => PropKind::Decoration,
            _ => PropKind::Light,
        };
        let transform = self.random_transform(10_000.0);
        let name = if n <= Name::MAX_NUMBER {
            self.names.prop.with_number(n)
        } else {
            self.names.prop
        };
        let prop = self
            .heap
            .spawn_mut(StaticProp {
                kind,
                transform,
                components: Vec::new(),
            })
            .outer(static_content)
            .name(name)
            .create()?;
        self.counters.objects_created += 1;
        let shapes: &[(Name, ComponentKind)] = match kind {
            PropKind::Geometry => &[
                (self.names.mesh, ComponentKind::Mesh),
                (self.names.collider, ComponentKind::Collider),
            ],
            PropKind::Decoration => &[(self.names.mesh, ComponentKind::Mesh)],
            PropKind::Light => &[
                (self.names.root, ComponentKind::Scene),
                (self.names.mesh, ComponentKind::Mesh),
            ],
        };
        let mut components: Vec<Obj<Component>> = Vec::with_capacity(shapes.len());
        for &(name, kind) in shapes {
            let (asset, material) = if kind == ComponentKind::Mesh {
                let from = if self.rng.f64() < SHARED_MESH_CHANCE {
                    &self.assets
                } else {
                    level_assets
                };
                (
                    pick(&mut self.rng, &from.meshes),
                    pick(&mut self.rng, &from.materials),
                )
            } else {
                (None, None)
            };
            let relative = self.random_transform(2.0);
            let c = self
                .heap
                .spawn_mut(Component {
                    kind,
                    attach_parent: components.first().copied(),
                    asset,
                    material,
                    relative,
                })
                .outer(prop)
                .name(name)
                .create()?;
            self.counters.objects_created += 1;
            self.counters.components_created += 1;
            components.push(c);
        }
        self.heap[prop].components = components;
        Ok(prop)
    }

    /// Clusters the roots waiting for it (levels' packages and static
    /// content), unless a cycle is in flight: then they wait for the next
    /// call. A root that is gone by then (its level unloaded and collected)
    /// is dropped.
    fn make_pending_clusters(&mut self) {
        if self.pending_clusters.is_empty() {
            return;
        }
        for root in std::mem::take(&mut self.pending_clusters) {
            match self.heap.create_cluster(root) {
                Ok(_) => self.counters.clusters_created += 1,
                Err(ClusterError::CycleInFlight) => {
                    self.counters.clusters_deferred += 1;
                    self.pending_clusters.push(root);
                }
                Err(ClusterError::NotAlive) if !self.heap.contains(root) => {}
                Err(e) => self
                    .cluster_errors
                    .push(format!("create_cluster({root:?}): {e}")),
            }
        }
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
        let (actors, projectiles, static_content, package) = {
            let l = &self.heap[level];
            (
                l.actors.clone(),
                l.projectiles.clone(),
                l.static_content,
                l.package,
            )
        };
        if let Some(sc) = static_content {
            self.graves.push(Grave::StaticContent(sc));
            self.static_objects -= 1;
            for &p in &self.heap[sc].props {
                let components = &self.heap[p].components;
                self.static_objects -= 1 + components.len();
                self.graves.push(Grave::StaticProp(p));
                self.graves
                    .extend(components.iter().map(|&c| Grave::Component(c)));
            }
        }
        if let Some(package) = package {
            let assets = &self.heap[package].assets;
            self.static_objects -= 1 + assets.len();
            self.graves.push(Grave::Package(package));
            self.graves.extend(assets.iter().map(|&a| Grave::Asset(a)));
        }
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
        name: Name,
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
            .spawn_mut(Component {
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
            .spawn_mut(Actor {
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
            .outer(level);
        let actor = match self.names.actor(archetype, id) {
            Ok(name) => actor.name(name),
            Err(text) => actor.name(text),
        }
        .create()?;
        self.counters.objects_created += 1;
        self.counters.actors_spawned += 1;

        let root = self.component(actor, self.names.root, ComponentKind::Scene, None)?;
        let mut components = vec![root];
        let mut sockets = HashMap::new();
        match archetype {
            Archetype::Soldier => {
                let mesh =
                    self.component(actor, self.names.mesh, ComponentKind::Mesh, Some(root))?;
                let collider = self.component(
                    actor,
                    self.names.collider,
                    ComponentKind::Collider,
                    Some(root),
                )?;
                let weapon =
                    self.component(actor, self.names.weapon, ComponentKind::Socket, Some(mesh))?;
                let audio =
                    self.component(actor, self.names.audio, ComponentKind::Audio, Some(root))?;
                sockets.insert("weapon", weapon);
                sockets.insert("voice", audio);
                components.extend([mesh, collider, weapon, audio]);
            }
            Archetype::Turret => {
                let mesh =
                    self.component(actor, self.names.mesh, ComponentKind::Mesh, Some(root))?;
                let collider = self.component(
                    actor,
                    self.names.collider,
                    ComponentKind::Collider,
                    Some(root),
                )?;
                let muzzle =
                    self.component(actor, self.names.muzzle, ComponentKind::Socket, Some(mesh))?;
                sockets.insert("muzzle", muzzle);
                components.extend([mesh, collider, muzzle]);
            }
            Archetype::Pickup => {
                let mesh =
                    self.component(actor, self.names.mesh, ComponentKind::Mesh, Some(root))?;
                components.push(mesh);
            }
            Archetype::Vehicle => {
                let body =
                    self.component(actor, self.names.body, ComponentKind::Mesh, Some(root))?;
                let collider = self.component(
                    actor,
                    self.names.collider,
                    ComponentKind::Collider,
                    Some(root),
                )?;
                components.extend([body, collider]);
                for w in 0..4 {
                    let wheel = self.component(
                        actor,
                        self.names.wheel.with_number(w),
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
                // Weak targets and the transform cannot hold strong handles:
                // through the data door they cost the collector nothing.
                // Only a pick-up stores a strong handle (`get_mut`).
                let (slot, transform) = if self.settings.moves == Moves::Door {
                    let a = self.heap.data_mut(me).expect("a thinking actor is live");
                    (a.targets, a.transform)
                } else {
                    let a = &mut self.heap[me];
                    (&mut a.targets, &mut a.transform)
                };
                *slot = targets;
                transform.position[0] += step[0];
                transform.position[1] += step[1];
                transform.yaw = step[0].atan2(step[1]);
                if let Some(asset) = equip {
                    let a = &mut self.heap[me];
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

    /// Short-lived effects (tracers, sparks): `settings.effects` of the
    /// target population a frame, each a projectile that lives a few
    /// frames, fired by a random actor of a random level. Most of what a
    /// game creates dies young, and this is most of what the demo creates.
    fn spray_effects(&mut self) -> Result<(), Error> {
        let levels = self.levels();
        let n = (self.settings.objects as f64 * self.settings.effects) as usize;
        for k in 0..n {
            let level = levels[k % levels.len()];
            let actors = &self.heap[level].actors;
            if actors.len() < 2 {
                continue;
            }
            let (a, b) = (
                actors[self.rng.usize(..actors.len())],
                actors[self.rng.usize(..actors.len())],
            );
            // Actors marked as garbage stay listed until pruned.
            let Some(from) = self.heap.get(a).map(|a| a.transform.position) else {
                continue;
            };
            if !self.heap.contains(b) {
                continue;
            }
            let ttl = self.rng.u16(2..8);
            self.fire_for(level, a, from, b, ttl)?;
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
        let ttl = self.rng.u16(20..90);
        self.fire_for(level, shooter, from, target, ttl)
    }

    /// Fires a projectile that lives `ttl` frames.
    fn fire_for(
        &mut self,
        level: Obj<Level>,
        shooter: Obj<Actor>,
        from: [f32; 3],
        target: Obj<Actor>,
        ttl: u16,
    ) -> Result<(), Error> {
        let to = self.heap[target].transform.position;
        let d = [to[0] - from[0], to[1] - from[1], to[2] - from[2]];
        let len = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt().max(1e-3);
        let speed = 40.0 / len;
        let p = self.heap.try_create_mut(Projectile {
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

    /// Every live actor moves a step, as in a game: through the data door,
    /// or through `get_mut` with `--moves get-mut`.
    fn move_actors(&mut self) {
        let door = self.settings.moves == Moves::Door;
        let frame = self.heap[self.world].frame as f32;
        for level in self.levels() {
            for k in 0..self.heap[level].actors.len() {
                let actor = self.heap[level].actors[k];
                let drift = [(frame * 0.01).sin() * 0.1, (frame * 0.01).cos() * 0.1];
                if door {
                    if let Some(a) = self.heap.data_mut(actor) {
                        a.transform.position[0] += drift[0];
                        a.transform.position[1] += drift[1];
                    }
                } else if let Some(a) = self.heap.get_mut(actor) {
                    a.transform.position[0] += drift[0];
                    a.transform.position[1] += drift[1];
                }
            }
        }
    }

    /// Moves projectiles; expired ones are dropped by their level and
    /// become unreachable.
    fn fly_projectiles(&mut self) {
        let dt = DT.as_secs_f32();
        for level in self.levels() {
            let list = std::mem::take(&mut self.heap[level].projectiles);
            let mut kept = Vec::with_capacity(list.len());
            for p in list {
                let ttl = if self.settings.moves == Moves::Door {
                    let Some(pr) = self.heap.data_mut(p) else {
                        continue;
                    };
                    for k in 0..3 {
                        pr.position[k] += pr.velocity[k] * dt;
                    }
                    *pr.ttl -= 1;
                    *pr.ttl
                } else {
                    let Some(pr) = self.heap.get_mut(p) else {
                        continue;
                    };
                    for k in 0..3 {
                        pr.position[k] += pr.velocity[k] * dt;
                    }
                    pr.ttl -= 1;
                    pr.ttl
                };
                if ttl == 0 {
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

    /// This frame's target population: the levels' static content, and
    /// the dynamic part in waves.
    pub fn target_population(&self, frame: u32) -> usize {
        self.settings.static_per_level() * LEVELS as usize + self.dynamic_target(frame)
    }

    /// This frame's target of dynamic objects: the dynamic part of the
    /// requested population, in waves.
    fn dynamic_target(&self, frame: u32) -> usize {
        let wave = 1.0 + WAVE_AMPLITUDE * (TAU * f64::from(frame) / WAVE_FRAMES).sin();
        (self.settings.dynamic_objects() as f64 * wave) as usize
    }

    /// Spawns actors until the dynamic population reaches this frame's
    /// target, or this frame's spawn budget is spent.
    fn spawn_to_target(&mut self, frame: u32) -> Result<(), Error> {
        let target = self.dynamic_target(frame);
        let budget = ((self.settings.dynamic_objects() as f64 * SPAWN_BUDGET) as u64).max(8);
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

/// Converts a completed cycle and the collector's stats into a record.
fn collection_record(frame: u32, cycle: Cycle, s: &CollectStats) -> CollectionRecord {
    CollectionRecord {
        frame,
        started_frame: cycle.started_frame,
        trigger: trigger_name(s.trigger),
        kind: kind_name(s.kind),
        cycle_us: micros(cycle.time),
        total_us: micros(s.total),
        slices: s.slices,
        max_slice_us: micros(s.max_slice),
        after_frames: false,
        forced: s.forced,
        born: s.born,
        mark_us: micros(s.mark),
        sweep_us: micros(s.sweep),
        destroy_us: micros(s.destroy),
        young: s.young,
        remembered: s.remembered,
        promoted: s.promoted,
        roots: s.roots,
        marked: s.marked,
        unreachable: s.unreachable,
        freed: s.freed,
        freed_bytes: s.freed_bytes,
        live_after: s.live,
    }
}

/// How the report names a phase of the collector.
pub fn phase_name(p: Phase) -> &'static str {
    match p {
        Phase::Idle => "idle",
        Phase::Mark => "mark",
        Phase::Purge => "purge",
        _ => "other",
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
        Trigger::Young => "young",
        _ => "growth",
    }
}

/// How the report names a kind of cycle.
pub fn kind_name(k: CycleKind) -> &'static str {
    match k {
        CycleKind::Minor => "minor",
        CycleKind::Major => "major",
    }
}

#[cfg(test)]
mod tests {
    //! The cycle bookkeeping, fed synthetic ticks shaped like an incremental
    //! collector's: a start in one tick, the completion frames later.

    use std::time::Duration;

    use coreobject::{CollectStats, CycleKind, Phase, Tick, Trigger};

    use super::{Clusters, GcMode, Grave, Settings, Sim};

    fn sim() -> Sim {
        Sim::new(Settings {
            objects: 500,
            frames: 10,
            seed: 3,
            gc: GcMode::Incremental,
            budget: Duration::from_millis(2),
            young_threshold: None,
            moves: super::Moves::Door,
            effects: super::EFFECTS_SHARE,
            clusters: Clusters::On,
        })
        .unwrap()
    }

    /// Marks a live actor as garbage, as `kill_actors` does.
    fn kill_one(sim: &mut Sim) {
        let level = sim.levels()[0];
        let actor = *sim.heap[level]
            .actors
            .iter()
            .find(|&&a| sim.heap.contains(a))
            .unwrap();
        sim.heap.mark_as_garbage(actor).unwrap();
        sim.marked_garbage.insert(actor.any());
        sim.graves.push(Grave::Actor(actor));
    }

    fn started() -> Tick {
        Tick {
            phase: Phase::Mark,
            work: 1,
            started: Some(Trigger::Interval),
            ..Tick::default()
        }
    }

    fn slice(phase: Phase) -> Tick {
        Tick {
            phase,
            work: 1,
            ..Tick::default()
        }
    }

    fn completed(stats: CollectStats) -> Tick {
        Tick {
            phase: Phase::Idle,
            work: 1,
            completed: Some(stats),
            ..Tick::default()
        }
    }

    /// A death while a cycle is in flight is not held against that cycle,
    /// but against the next one; and a handle that still resolves when that
    /// one completes is a violation.
    #[test]
    fn deaths_mid_cycle_are_checked_after_the_next_cycle() {
        let mut sim = sim();
        assert!(sim.after_tick(0, &started()).is_none());
        kill_one(&mut sim);
        assert!(sim.after_tick(1, &slice(Phase::Mark)).is_none());
        assert!(sim.after_tick(2, &slice(Phase::Purge)).is_none());
        // The cycle completes without freeing it: floating garbage, fine.
        let record = sim
            .after_tick(3, &completed(CollectStats::default()))
            .unwrap();
        assert_eq!((record.started_frame, record.frame), (0, 3));
        assert_eq!(sim.violation_count, 0);
        assert_eq!(sim.graves_pending, 1);
        // The next cycle started after the death: it must free it.
        sim.after_tick(4, &started());
        sim.after_tick(5, &completed(CollectStats::default()));
        assert_eq!(sim.violation_count, 1, "{:?}", sim.violations);
        assert_eq!(sim.graves_pending, 0);
        assert!(sim.protocol_errors.is_empty());
    }

    /// A death before a cycle starts is checked when it completes, and a
    /// collection that freed it passes.
    #[test]
    fn deaths_before_a_cycle_are_checked_when_it_completes() {
        let mut sim = sim();
        kill_one(&mut sim);
        sim.after_tick(0, &started());
        assert_eq!(sim.graves_pending, 1);
        let stats = sim.heap.collect().unwrap();
        let record = sim.after_tick(2, &completed(stats)).unwrap();
        assert_eq!(record.started_frame, 0);
        assert_eq!((sim.violation_count, sim.graves_pending), (0, 0));
        assert_eq!(sim.counters.dead_handles_verified, 1);
    }

    fn minor() -> CollectStats {
        CollectStats {
            trigger: Trigger::Young,
            kind: CycleKind::Minor,
            ..CollectStats::default()
        }
    }

    /// An actor made unreachable (not marked as garbage), as a level
    /// unload leaves its actors.
    fn orphan_one(sim: &mut Sim) {
        let level = sim.levels()[0];
        let actor = sim.heap[level].actors[0];
        sim.graves.push(Grave::Actor(actor));
    }

    /// A minor cycle may leave an old unreachable object alive: its handle
    /// is carried to the next cycle, again past minors, and a major one
    /// that leaves it resolving is a violation.
    #[test]
    fn minor_cycles_carry_old_graves_to_the_next_major() {
        let mut sim = sim();
        orphan_one(&mut sim);
        let young = Tick {
            started: Some(Trigger::Young),
            ..started()
        };
        sim.after_tick(0, &young);
        assert_eq!(sim.cycle_kind(), Some(CycleKind::Minor));
        let record = sim.after_tick(1, &completed(minor())).unwrap();
        assert_eq!(record.kind, "minor");
        assert_eq!((sim.violation_count, sim.graves_pending), (0, 1));
        sim.after_tick(2, &young);
        sim.after_tick(3, &completed(minor()));
        assert_eq!((sim.violation_count, sim.graves_pending), (0, 1));
        assert_eq!(sim.counters.dead_handles_carried, 2);
        sim.after_tick(4, &started());
        assert_eq!(sim.cycle_kind(), Some(CycleKind::Major));
        let record = sim
            .after_tick(5, &completed(CollectStats::default()))
            .unwrap();
        assert_eq!(record.kind, "major");
        assert_eq!((sim.violation_count, sim.graves_pending), (1, 0));
        assert!(sim.violations[0].contains("major"), "{:?}", sim.violations);
    }

    /// An actor marked as garbage before a minor cycle started must be
    /// freed by it; one a real minor cycle freed passes.
    #[test]
    fn minor_cycles_must_free_garbage() {
        let mut sim = sim();
        kill_one(&mut sim);
        sim.after_tick(0, &started());
        sim.after_tick(1, &completed(minor()));
        assert_eq!((sim.violation_count, sim.graves_pending), (1, 0));
        assert!(
            sim.violations[0].contains("garbage"),
            "{:?}",
            sim.violations
        );

        let mut sim = sim_generational();
        kill_one(&mut sim);
        sim.after_tick(0, &started());
        let stats = sim.heap.collect_minor().unwrap();
        assert_eq!(stats.kind, CycleKind::Minor);
        sim.after_tick(1, &completed(stats));
        assert_eq!((sim.violation_count, sim.graves_pending), (0, 0));
        assert_eq!(sim.counters.dead_handles_freed_by_minors, 1);
    }

    fn sim_generational() -> Sim {
        Sim::new(Settings {
            objects: 500,
            frames: 10,
            seed: 3,
            gc: GcMode::Generational,
            budget: Duration::from_millis(2),
            young_threshold: None,
            moves: super::Moves::Door,
            effects: super::EFFECTS_SHARE,
            clusters: Clusters::On,
        })
        .unwrap()
    }

    /// A tick that completes one cycle and starts the next hands later
    /// deaths to the new one; a cycle that goes idle without completing is
    /// a protocol error, and its handles are not lost.
    #[test]
    fn back_to_back_cycles_and_protocol_errors() {
        let mut sim = sim();
        sim.after_tick(0, &started());
        kill_one(&mut sim);
        let both = Tick {
            started: Some(Trigger::ObjectCount),
            ..completed(CollectStats::default())
        };
        let both = Tick {
            phase: Phase::Mark,
            ..both
        };
        assert!(sim.after_tick(1, &both).is_some());
        assert_eq!(sim.violation_count, 0);
        assert!(sim.cycle.is_some_and(|c| c.started_frame == 1));
        assert_eq!(sim.cycle_graves.len(), 1);
        sim.after_tick(2, &slice(Phase::Idle));
        assert_eq!(sim.protocol_errors.len(), 1);
        assert_eq!(sim.graves_pending, 1);
    }
}

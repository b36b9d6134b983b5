//! The game world's object types.
//!
//! Every type here is a garbage-collected object (`#[derive(Object)]`) or a
//! plain struct nested inside one (`#[derive(Trace)]`). Strong references
//! ([`Obj`]) keep their targets alive; weak ones ([`Weak`]) do not.
//!
//! Who points at whom:
//!
//! ```text
//! World (rooted) ── levels ──▶ Level ── actors ──────▶ Actor ── components ──▶ Component
//!   │                           │ └──── projectiles ──▶ Projectile   │  owner (strong, same level)
//!   │                           │                                    │  targets (weak)
//!   │                           │                                    │  loadout.* ──▶ Asset (pool)
//!   │                           ├─ static_content ──▶ StaticContent ── props ──▶ StaticProp ── components ──▶ Component
//!   │                           └─ package ─────────▶ Package ── assets ──▶ Asset (the level's own) ◀── mesh / material
//!   └─ registry ──▶ Asset (disregard-for-GC pool) ◀── mesh / material of actors' components (and of some props')
//! ```
//!
//! Outers: an actor's outer is its level, a component's outer is its actor
//! (or its static prop), a static prop's outer is its level's static
//! content, whose outer is the level, as is the level's package's; a level's
//! outer is the world, an asset's outer is its package. An object keeps its
//! outer alive.
//!
//! What is static and what is dynamic: a level's static content (its props
//! and their components) and its package (its assets) are created when the
//! level loads and live exactly as long as it, so with `--clusters on` each
//! is made a GC cluster at load. Levels, actors and projectiles change
//! every frame and die on their own: their classes opt out of clusters
//! (`#[object(cluster = false)]`), so a cluster's search stops at them and
//! a cluster never keeps a dead actor alive.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use coreobject::{Data, DestroyCx, Lifecycle, Obj, Object, Trace, Weak};

/// The root of the game: rooted for the whole run.
#[derive(Object)]
#[object(save)]
pub struct World {
    /// Loaded levels. Removing one from here unloads it.
    pub levels: Vec<Obj<Level>>,
    /// Assets by name (they live in the disregard-for-GC pool).
    pub registry: BTreeMap<String, Obj<Asset>>,
    /// The current frame.
    pub frame: u64,
}

/// A streamed level: owns its actors and projectiles, its static content
/// and its package. Its actor list changes every frame, so it never joins a
/// GC cluster (the search from its static content stops here).
#[derive(Object)]
#[object(save)]
#[object(cluster = false)]
pub struct Level {
    /// The level's number (its name is `Level_<number>`).
    pub number: u32,
    /// Actors placed in the level. May hold stale handles of actors marked
    /// as garbage until the level compacts the list.
    pub actors: Vec<Obj<Actor>>,
    /// Projectiles in flight.
    pub projectiles: Vec<Obj<Projectile>>,
    /// What was placed in the level at load and stays until it unloads.
    pub static_content: Option<Obj<StaticContent>>,
    /// The level's own assets, loaded and unloaded with it.
    pub package: Option<Obj<Package>>,
}

/// A level's static content: the root of its props, created when the level
/// loads (with `--clusters on`, the root of a GC cluster). Its outer is the
/// level.
#[derive(Object)]
#[object(save)]
pub struct StaticContent {
    /// The props placed in the level.
    pub props: Vec<Obj<StaticProp>>,
}

/// What a static prop is; decides its components.
#[derive(serde::Serialize, serde::Deserialize, Trace, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PropKind {
    /// A mesh with a collider: walls, rocks, buildings.
    Geometry,
    /// A mesh only: decoration, foliage.
    Decoration,
    /// A light: a scene component and a mesh.
    Light,
}

/// A prop placed in a level at load (Unreal's static mesh actors): never
/// moves, never dies before its level. Its outer is the level's static
/// content; its components' outer is the prop.
#[derive(Object)]
#[object(save)]
pub struct StaticProp {
    /// What it is.
    pub kind: PropKind,
    /// Where it stands.
    pub transform: Transform,
    /// Its components (the root first).
    pub components: Vec<Obj<Component>>,
}

/// What kind of actor this is; decides its components.
#[derive(serde::Serialize, serde::Deserialize, Trace, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Archetype {
    /// Root, mesh, collider, a weapon socket and audio.
    Soldier,
    /// Root, mesh and collider; fires projectiles.
    Turret,
    /// Root and mesh.
    Pickup,
    /// Root, body mesh, collider and four wheels attached to the body.
    Vehicle,
}

impl Archetype {
    /// The prefix of actor names of this archetype.
    pub fn prefix(self) -> &'static str {
        match self {
            Archetype::Soldier => "Soldier",
            Archetype::Turret => "Turret",
            Archetype::Pickup => "Pickup",
            Archetype::Vehicle => "Vehicle",
        }
    }

    /// Whether actors of this archetype shoot.
    pub fn shoots(self) -> bool {
        matches!(self, Archetype::Soldier | Archetype::Turret)
    }
}

/// A position and heading (plain data, traced as nothing).
#[derive(serde::Serialize, serde::Deserialize, Trace, Clone, Copy, Debug, Default, PartialEq)]
pub struct Transform {
    /// World position.
    pub position: [f32; 3],
    /// Heading in radians.
    pub yaw: f32,
}

/// What an actor carries: a nested traced struct holding asset handles.
#[derive(serde::Serialize, serde::Deserialize, Trace, Clone, Debug, Default)]
pub struct Loadout {
    /// The equipped weapon's mesh.
    pub weapon: Option<Obj<Asset>>,
    /// Inventory slots.
    pub slots: Vec<Option<Obj<Asset>>>,
    /// Rounds left.
    pub ammo: u32,
}

/// A game actor. Its outer is its level. Actors spawn and die during play,
/// so they never join a GC cluster (a cluster is kept or freed whole: a dead
/// actor in one would live as long as it).
#[derive(Object, Data)]
#[object(save)]
#[object(lifecycle, cluster = false)]
pub struct Actor {
    /// Unique number (its name is `<Archetype>_<id>`).
    pub id: u64,
    /// What it is.
    pub archetype: Archetype,
    /// Team number.
    pub team: u8,
    /// Hit points.
    pub hp: i32,
    /// Where it is.
    pub transform: Transform,
    /// The root of its component hierarchy.
    pub root: Option<Obj<Component>>,
    /// All its components (the root included).
    pub components: Vec<Obj<Component>>,
    /// Named attachment points (not saved: a loaded actor has none).
    #[object(transient)]
    pub sockets: HashMap<&'static str, Obj<Component>>,
    /// The actor that spawned this one. Strong: a detached owner stays
    /// alive while one of its children is in a level.
    pub owner: Option<Obj<Actor>>,
    /// Actors it is aiming at. Weak: a target that dies goes stale.
    pub targets: Vec<Weak<Actor>>,
    /// What it carries.
    pub loadout: Loadout,
    /// The simulation's count of destroyed actors, bumped by
    /// `begin_destroy`. Holds no handles, so it is not traced.
    #[object(skip, transient)]
    pub destroyed: Arc<AtomicU64>,
}

impl Lifecycle for Actor {
    fn begin_destroy(&mut self, _cx: &DestroyCx<'_>) {
        self.destroyed.fetch_add(1, Ordering::Relaxed);
    }
}

/// What a component does.
#[derive(serde::Serialize, serde::Deserialize, Trace, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ComponentKind {
    /// The root scene component.
    Scene,
    /// A static mesh.
    Mesh,
    /// A collision shape.
    Collider,
    /// A sound emitter.
    Audio,
    /// A wheel (attached to a vehicle's body).
    Wheel,
    /// An attachment point.
    Socket,
}

/// A part of an actor or of a static prop. Its outer is its actor or prop.
#[derive(Object)]
#[object(save)]
pub struct Component {
    /// What it does.
    pub kind: ComponentKind,
    /// The component it is attached to, within the same actor.
    pub attach_parent: Option<Obj<Component>>,
    /// The mesh, sound or shape asset it renders or plays.
    pub asset: Option<Obj<Asset>>,
    /// Its material, for meshes.
    pub material: Option<Obj<Asset>>,
    /// Offset from its parent.
    pub relative: Transform,
}

/// A short-lived projectile, held by its level until it expires (never in a
/// GC cluster).
#[derive(Object, Data)]
#[object(save)]
#[object(cluster = false)]
pub struct Projectile {
    /// Who fired it (weak: the shooter may die first).
    pub instigator: Weak<Actor>,
    /// Where it is going.
    pub velocity: [f32; 3],
    /// Where it is.
    pub position: [f32; 3],
    /// Frames left to live.
    pub ttl: u16,
}

/// A content package: the outer of its assets. The shared packages live in
/// the disregard-for-GC pool; each level has one of its own, loaded and
/// unloaded with it (with `--clusters on`, a GC cluster).
#[derive(Object)]
#[object(save)]
pub struct Package {
    /// The package's assets.
    pub assets: Vec<Obj<Asset>>,
}

/// What an asset holds.
#[derive(serde::Serialize, serde::Deserialize, Trace, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AssetKind {
    /// Texture data.
    Texture,
    /// A material (depends on textures).
    Material,
    /// A static mesh.
    Mesh,
    /// A sound wave.
    Sound,
}

/// A loaded asset: in the disregard-for-GC pool (never collected), or in a
/// level's package (collected with it).
#[derive(Object)]
#[object(save)]
pub struct Asset {
    /// What it is.
    pub kind: AssetKind,
    /// Its notional size.
    pub size_kb: u32,
    /// Assets it depends on (materials on textures).
    pub deps: Vec<Obj<Asset>>,
}

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
//!   │                           └──── projectiles ──▶ Projectile   │  owner (strong, same level)
//!   └─ registry ──▶ Asset (disregard-for-GC pool)                  │  targets (weak)
//!                     ▲                                            │  loadout.* ──▶ Asset
//!                     └──────────── mesh / material ───────────────┘
//! ```
//!
//! Outers: an actor's outer is its level, a component's outer is its actor,
//! a level's outer is the world, an asset's outer is its package. An object
//! keeps its outer alive.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use coreobject::{DestroyCx, Lifecycle, Obj, Object, Trace, Weak};

/// The root of the game: rooted for the whole run.
#[derive(Object)]
pub struct World {
    /// Loaded levels. Removing one from here unloads it.
    pub levels: Vec<Obj<Level>>,
    /// Assets by name (they live in the disregard-for-GC pool).
    pub registry: HashMap<String, Obj<Asset>>,
    /// The current frame.
    pub frame: u64,
}

/// A streamed level: owns its actors and projectiles.
#[derive(Object)]
pub struct Level {
    /// The level's number (its name is `Level_<number>`).
    pub number: u32,
    /// Actors placed in the level. May hold stale handles of actors marked
    /// as garbage until the level compacts the list.
    pub actors: Vec<Obj<Actor>>,
    /// Projectiles in flight.
    pub projectiles: Vec<Obj<Projectile>>,
}

/// What kind of actor this is; decides its components.
#[derive(Trace, Clone, Copy, Debug, PartialEq, Eq, Hash)]
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
#[derive(Trace, Clone, Copy, Debug, Default, PartialEq)]
pub struct Transform {
    /// World position.
    pub position: [f32; 3],
    /// Heading in radians.
    pub yaw: f32,
}

/// What an actor carries: a nested traced struct holding asset handles.
#[derive(Trace, Clone, Debug, Default)]
pub struct Loadout {
    /// The equipped weapon's mesh.
    pub weapon: Option<Obj<Asset>>,
    /// Inventory slots.
    pub slots: Vec<Option<Obj<Asset>>>,
    /// Rounds left.
    pub ammo: u32,
}

/// A game actor. Its outer is its level.
#[derive(Object)]
#[object(lifecycle)]
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
    /// Named attachment points.
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
    #[object(skip)]
    pub destroyed: Arc<AtomicU64>,
}

impl Lifecycle for Actor {
    fn begin_destroy(&mut self, _cx: &DestroyCx<'_>) {
        self.destroyed.fetch_add(1, Ordering::Relaxed);
    }
}

/// What a component does.
#[derive(Trace, Clone, Copy, Debug, PartialEq, Eq)]
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

/// A part of an actor. Its outer is its actor.
#[derive(Object)]
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

/// A short-lived projectile, held by its level until it expires.
#[derive(Object)]
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

/// A content package in the disregard-for-GC pool; the outer of its assets.
#[derive(Object)]
pub struct Package {
    /// The package's assets.
    pub assets: Vec<Obj<Asset>>,
}

/// What an asset holds.
#[derive(Trace, Clone, Copy, Debug, PartialEq, Eq)]
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

/// A loaded asset in the disregard-for-GC pool: never collected.
#[derive(Object)]
pub struct Asset {
    /// What it is.
    pub kind: AssetKind,
    /// Its notional size.
    pub size_kb: u32,
    /// Assets it depends on (materials on textures).
    pub deps: Vec<Obj<Asset>>,
}

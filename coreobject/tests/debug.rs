//! Debugging reports: `reference_chains` (Unreal's `obj refs`) and
//! `memory_report` (Unreal's `memreport`).
//!
//! Checks that `reference_chains` returns the shortest chains (all of them,
//! up to the limit) from a root to an object, with each step's field path
//! rendered as `World.levels[3] -> Level_5.actors[17] -> Hero`, for every
//! kind of root (root set, `StrongObj`, `Referencer`, disregard-for-GC pool),
//! through outers, nested structs, options, maps and enums; that unreachable,
//! garbage-only-reachable and stale targets have no chain; and that the
//! memory report's per-class counts and bytes agree with the heap and add up.

use std::collections::HashMap;
use std::sync::Arc;

use coreobject::{
    AnyObj, Heap, HeapConfig, Obj, Object, RefChain, RefLink, Referencer, RootKind, Trace, Visitor,
};

#[derive(Object, Default)]
struct World {
    levels: Vec<Obj<Level>>,
}

#[derive(Object, Default)]
struct Level {
    actors: Vec<Obj<Actor>>,
}

#[derive(Object, Default)]
struct Actor {
    hp: u32,
}

#[derive(Trace, Default)]
struct Inventory {
    slots: Vec<Option<Obj<Actor>>>,
}

#[derive(Trace, Default)]
enum Hand {
    #[default]
    Empty,
    Holding(Obj<Actor>),
}

#[derive(Object, Default)]
struct Player {
    weapon: Option<Obj<Actor>>,
    inventory: Inventory,
    by_name: HashMap<String, Obj<Actor>>,
    hand: Hand,
    pair: (u32, Option<Obj<Actor>>),
}

fn chains(heap: &Heap, target: impl Into<AnyObj>, max: usize) -> Vec<String> {
    let mut v: Vec<String> = heap
        .reference_chains(target, max)
        .iter()
        .map(RefChain::to_string)
        .collect();
    v.sort();
    v
}

/// World (rooted) with four levels of eighteen actors; the last actor of
/// level 3 is the hero.
fn world(heap: &Heap) -> (Obj<World>, Vec<Obj<Level>>, Obj<Actor>) {
    let world = heap
        .spawn(World::default())
        .name("World")
        .root()
        .create()
        .unwrap();
    let hero = heap.spawn(Actor { hp: 100 }).name("Hero").create().unwrap();
    let mut levels = Vec::new();
    for l in 0..4 {
        let actors: Vec<Obj<Actor>> = (0..18)
            .map(|i| {
                if l == 3 && i == 17 {
                    hero
                } else {
                    heap.create(Actor::default())
                }
            })
            .collect();
        levels.push(heap.create(Level { actors }));
    }
    (world, levels, hero)
}

#[test]
fn the_shortest_chain_names_every_field() {
    let mut heap = Heap::new();
    let (world, levels, hero) = world(&heap);
    heap[world].levels = levels.clone();
    let l3 = levels[3].index();
    assert_eq!(
        chains(&heap, hero, 4),
        [format!(
            "(rooted) World.levels[3] -> Level_{l3}.actors[17] -> Hero"
        )]
    );
    let c = &heap.reference_chains(hero, 1)[0];
    assert_eq!(c.root, RootKind::Rooted);
    assert_eq!(
        c.links,
        [
            RefLink {
                object: world.any(),
                label: "World".into(),
                class: "World",
                via: Some("levels[3]".into()),
                cluster: None,
            },
            RefLink {
                object: levels[3].any(),
                label: format!("Level_{l3}"),
                class: "Level",
                via: Some("actors[17]".into()),
                cluster: None,
            },
            RefLink {
                object: hero.any(),
                label: "Hero".into(),
                class: "Actor",
                via: None,
                cluster: None,
            },
        ]
    );
    // A root's chain is the root alone.
    assert_eq!(chains(&heap, world, 4), ["(rooted) World"]);
}

#[test]
fn every_shortest_chain_up_to_the_limit_and_no_longer_ones() {
    let mut heap = Heap::new();
    let (world, levels, hero) = world(&heap);
    heap[world].levels = levels.clone();
    // Three more paths of the same length, and a longer one through an outer:
    // Far (rooted) keeps its outer Pkg alive, Pkg.levels[0] -> Side -> Hero.
    heap[levels[0]].actors[2] = hero;
    heap[levels[1]].actors.push(hero);
    heap[levels[2]].actors.clear();
    heap[levels[2]].actors.push(hero);
    let side = heap.create(Level { actors: vec![hero] });
    let pkg = heap
        .spawn(World { levels: vec![side] })
        .name("Pkg")
        .create()
        .unwrap();
    heap.spawn(Actor::default())
        .outer(pkg)
        .name("Far")
        .root()
        .create()
        .unwrap();
    let [l0, l1, l2, l3] = [0, 1, 2, 3].map(|i| levels[i].index());
    let all = chains(&heap, hero, 10);
    assert_eq!(
        all,
        [
            format!("(rooted) World.levels[0] -> Level_{l0}.actors[2] -> Hero"),
            format!("(rooted) World.levels[1] -> Level_{l1}.actors[18] -> Hero"),
            format!("(rooted) World.levels[2] -> Level_{l2}.actors[0] -> Hero"),
            format!("(rooted) World.levels[3] -> Level_{l3}.actors[17] -> Hero"),
        ]
    );
    assert_eq!(heap.reference_chains(hero, 2).len(), 2);
    assert!(heap.reference_chains(hero, 0).is_empty());
    let one = chains(&heap, hero, 1);
    assert!(all.contains(&one[0]));
    // Without the short paths, the long one is the answer.
    heap[world].levels.clear();
    assert_eq!(
        chains(&heap, hero, 10),
        [format!(
            "(rooted) Far(outer) -> Pkg.levels[0] -> Level_{}.actors[0] -> Hero",
            side.index()
        )]
    );
}

#[test]
fn no_chain_to_unreachable_garbage_only_or_stale_objects() {
    let mut heap = Heap::new();
    let (world, levels, hero) = world(&heap);
    assert!(
        heap.reference_chains(hero, 4).is_empty(),
        "levels not linked yet"
    );
    heap[world].levels = vec![levels[3]];
    assert_eq!(heap.reference_chains(hero, 4).len(), 1);
    heap.mark_as_garbage(levels[3]).unwrap();
    assert!(
        heap.reference_chains(hero, 4).is_empty(),
        "only through garbage"
    );
    assert!(heap.reference_chains(levels[3], 4).is_empty());
    heap.collect().unwrap();
    assert!(heap.reference_chains(hero, 4).is_empty(), "stale");
}

/// An outside registry (Unreal's `FGCObject`) with a name for reports.
struct Registry(Vec<AnyObj>);
impl Referencer for Registry {
    fn add_referenced_objects(&self, v: &mut dyn Visitor) {
        for h in &self.0 {
            v.visit(*h);
        }
    }
    fn referencer_name(&self) -> String {
        "AssetRegistry".into()
    }
}

#[test]
fn strong_handles_referencers_pool_and_outers_are_roots_too() {
    let mut heap = Heap::with_config(HeapConfig {
        disregard_pool_size: 8,
        ..HeapConfig::DEFAULT
    })
    .unwrap();
    heap.open_disregard_for_gc().unwrap();
    let asset = heap
        .spawn(Level::default())
        .name("Assets")
        .create()
        .unwrap();
    heap.close_disregard_for_gc();

    let pooled = heap.spawn(Actor::default()).name("Mesh").create().unwrap();
    heap[asset].actors.push(pooled);
    assert_eq!(
        chains(&heap, pooled, 4),
        ["(disregard pool) Assets.actors[0] -> Mesh"]
    );

    let cache = heap.spawn(Level::default()).name("Cache").create().unwrap();
    let s1 = heap.strong(cache).unwrap();
    let _s2 = s1.clone();
    let held = heap.spawn(Actor::default()).name("Held").create().unwrap();
    heap[cache].actors.push(held);
    assert_eq!(
        chains(&heap, held, 4),
        ["(strong x2) Cache.actors[0] -> Held"]
    );

    let tex = heap.spawn(Actor::default()).name("Tex").create().unwrap();
    heap.add_referencer(Arc::new(Registry(vec![tex.any()])));
    assert_eq!(chains(&heap, tex, 4), ["(AssetRegistry) Tex"]);

    // An object keeps its outer alive: the chain runs through `(outer)`.
    let package = heap
        .spawn(Level::default())
        .name("Package")
        .create()
        .unwrap();
    let inner = heap
        .spawn(Actor::default())
        .outer(package)
        .name("Inner")
        .root()
        .create()
        .unwrap();
    let _ = inner;
    assert_eq!(
        chains(&heap, package, 4),
        ["(rooted) Inner(outer) -> Package"]
    );
    let c = &heap.reference_chains(package, 1)[0];
    assert_eq!(c.links[0].via.as_deref(), Some("(outer)"));

    // The collector agrees with the report: everything above survives.
    heap.collect().unwrap();
    for h in [pooled.any(), held.any(), tex.any(), package.any()] {
        assert!(heap.contains(h));
    }
}

#[test]
fn paths_through_options_structs_maps_enums_and_tuples() {
    let mut heap = Heap::new();
    let player = heap
        .spawn(Player::default())
        .name("Player")
        .root()
        .create()
        .unwrap();
    let named = |heap: &Heap, n: &str| heap.spawn(Actor::default()).name(n).create().unwrap();
    let (sword, bow, axe, shield, gem) = (
        named(&heap, "Sword"),
        named(&heap, "Bow"),
        named(&heap, "Axe"),
        named(&heap, "Shield"),
        named(&heap, "Gem"),
    );
    let p = &mut heap[player];
    p.weapon = Some(sword);
    p.inventory.slots = vec![None, Some(bow)];
    p.by_name.insert("axe".into(), axe);
    p.hand = Hand::Holding(shield);
    p.pair = (7, Some(gem));
    assert_eq!(chains(&heap, sword, 4), ["(rooted) Player.weapon -> Sword"]);
    assert_eq!(
        chains(&heap, bow, 4),
        ["(rooted) Player.inventory.slots[1] -> Bow"]
    );
    assert_eq!(
        chains(&heap, axe, 4),
        ["(rooted) Player.by_name[value 0] -> Axe"]
    );
    assert_eq!(
        chains(&heap, shield, 4),
        ["(rooted) Player.hand::Holding.0 -> Shield"]
    );
    assert_eq!(chains(&heap, gem, 4), ["(rooted) Player.pair.1 -> Gem"]);
}

#[test]
fn memory_report_adds_up() {
    let mut heap = Heap::new();
    let (world, levels, _) = world(&heap);
    heap[world].levels = levels;
    for _ in 0..5 {
        heap.create(Player::default());
    }
    let r = heap.memory_report();
    let counts: HashMap<&str, usize> = r.classes.iter().map(|c| (c.class, c.count)).collect();
    assert_eq!(
        counts,
        HashMap::from([("World", 1), ("Level", 4), ("Actor", 72), ("Player", 5)])
    );
    for c in &r.classes {
        let size = match c.class {
            "World" => World::class().size(),
            "Level" => Level::class().size(),
            "Actor" => Actor::class().size(),
            _ => Player::class().size(),
        };
        assert_eq!(c.bytes, c.count * size, "{}", c.class);
    }
    assert!(
        r.classes.windows(2).all(|w| w[0].bytes >= w[1].bytes),
        "largest first"
    );
    assert_eq!(
        r.object_bytes,
        r.classes.iter().map(|c| c.bytes).sum::<usize>()
    );
    assert_eq!(r.classes.iter().map(|c| c.count).sum::<usize>(), heap.len());
    let mut by_class = heap.class_counts();
    by_class.sort();
    let mut from_report: Vec<_> = r.classes.iter().map(|c| (c.class, c.count)).collect();
    from_report.sort();
    assert_eq!(by_class, from_report);
    assert_eq!(
        r.table_bytes,
        heap.table_stats().chunks * coreobject::CHUNK_SIZE as usize * 24
    );
    let text = r.to_string();
    assert!(
        text.lines()
            .any(|l| l.starts_with("Actor") && l.contains(" 72 ")),
        "{text}"
    );

    // After a collection only the reachable remain, and the report follows.
    let s = heap.collect().unwrap();
    let after = heap.memory_report();
    assert_eq!(r.object_bytes - after.object_bytes, s.freed_bytes);
    assert!(!after.classes.iter().any(|c| c.class == "Player"));
}

/// A value too large for a page.
#[derive(Object)]
struct Texture {
    texels: [u64; 1024],
}

#[test]
fn memory_report_counts_pages_large_objects_and_a_total() {
    let heap = Heap::new();
    for _ in 0..1000 {
        heap.create(Player::default());
    }
    heap.create(Texture { texels: [0; 1024] });
    let r = heap.memory_report();
    assert_eq!(r.large_objects, 1);
    assert!(
        r.large_bytes >= Texture::class().size(),
        "{}",
        r.large_bytes
    );
    // Every pooled object sits in a slot of its size class, rounded to 8.
    let pooled: usize = r
        .classes
        .iter()
        .filter(|c| c.class != "Texture")
        .map(|c| c.bytes)
        .sum();
    assert!(r.slot_bytes >= pooled && r.slot_bytes <= r.page_bytes);
    assert_eq!(
        r.page_bytes,
        r.page_classes.iter().map(|c| c.page_bytes()).sum::<usize>()
    );
    assert_eq!(
        r.empty_pages,
        r.page_classes.iter().map(|c| c.empty_pages).sum::<usize>()
    );
    assert_eq!(
        r.page_classes.iter().map(|c| c.objects).sum::<usize>(),
        heap.len() - 1,
        "every object but the large one is in a page"
    );
    assert_eq!(
        r.total_bytes(),
        r.page_bytes + r.large_bytes + r.table_bytes + r.collector_bytes + r.listener_bytes
    );
    let text = r.to_string();
    let row = |label: &str| {
        text.lines()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no {label} row in\n{text}"))
            .to_string()
    };
    assert!(row("(large objects)").contains(&r.large_bytes.to_string()));
    assert!(row("(total)").ends_with(&r.total_bytes().to_string()));
    assert!(row("(pages, ").contains(&r.page_bytes.to_string()));
}

//! Old saves load: the committed packages in `tests/golden/` were written by
//! version 1 of these classes (`save_golden_gen.rs` keeps that layout), and
//! load into today's, one evolution rule each:
//!
//! * class renamed: `Boat` is now `Ship` (`rename_from = "Boat"`);
//! * field renamed: `crew_size` is now `crew`;
//! * field added: `fuel` (its `default = full_tank`) and `flag` (`Default`);
//! * field removed: `Crate::label` is skipped;
//! * fields reordered: `name` moved after `cargo`;
//! * version and migration: 1 had `speed_kmh`, 2 has `speed_knots`;
//! * transient: `cache` is never saved and loads as `Default`.
//!
//! The packages written by today's classes are golden too (`ship_v2.*`):
//! a change to the format shows up as a diff of those files. Set
//! `UPDATE_GOLDEN=1` to write them again after a deliberate change.

use coreobject::save::{register, FieldError, FieldReader, LoadError, SaveOptions, Selection};
use coreobject::{Heap, Obj, Object};

#[derive(Object, Default, Debug)]
#[object(save, version = 2, migrate = ship_from_v1, rename_from = "Boat")]
struct Ship {
    hull: u32,
    #[object(rename_from = "crew_size")]
    crew: u16,
    #[object(default = full_tank)]
    fuel: f32,
    flag: Option<String>,
    speed_knots: f32,
    cargo: Vec<Obj<Crate>>,
    name: String,
    #[object(transient)]
    cache: u64,
}

fn full_tank() -> f32 {
    100.0
}

fn ship_from_v1(ship: &mut Ship, old: &FieldReader<'_>) -> Result<(), FieldError> {
    assert_eq!(old.version(), 1);
    let kmh: f32 = old.old("speed_kmh")?.unwrap_or_default();
    ship.speed_knots = kmh / 1.852;
    Ok(())
}

#[derive(Object, Default, Debug)]
#[object(save)]
struct Crate {
    weight: u32,
}

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden");

fn golden(name: &str) -> Vec<u8> {
    std::fs::read(format!("{DIR}/{name}")).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// A heap with the port the ship's package imports.
fn harbour() -> (Heap, Obj<Crate>) {
    let heap = Heap::new();
    let port = heap
        .spawn(Crate { weight: 0 })
        .name("Port")
        .root()
        .create()
        .unwrap();
    (heap, port)
}

fn check_v1(file: &str) {
    register::<Ship>().unwrap();
    register::<Crate>().unwrap();
    let (mut heap, port) = harbour();
    let loaded = heap.load(&golden(file)[..]).unwrap();
    assert!(loaded.unresolved.is_empty());
    let ship = heap
        .downcast::<Ship>(loaded.objects[0])
        .expect("Boat loads as a Ship");
    let s = &heap[ship];
    assert_eq!(s.hull, 3);
    assert_eq!(s.crew, 12, "renamed field");
    assert_eq!(s.fuel, 100.0, "added field with a default");
    assert_eq!(s.flag, None, "added field");
    assert!(
        (s.speed_knots - 20.0).abs() < 1e-3,
        "migrated: {}",
        s.speed_knots
    );
    assert_eq!(s.name, "Mary", "reordered field");
    assert_eq!(s.cache, 0, "transient");
    let cargo = s.cargo.clone();
    assert_eq!(cargo.len(), 3);
    assert_eq!(heap[cargo[0]].weight, 40, "removed field skipped");
    assert_eq!(heap[cargo[1]].weight, 25);
    assert_eq!(cargo[2], port, "import found by path");
    assert_eq!(heap.path_name(cargo[1]).as_deref(), Some("Port.Mary.Rum"));
    assert_eq!(heap.outer_of(cargo[0]), Some(ship.any()));
}

#[test]
#[cfg_attr(miri, ignore = "reads tests/golden/; miri runs isolated")]
fn v1_binary_loads() {
    check_v1("ship_v1.bin");
}

#[test]
#[cfg_attr(miri, ignore = "reads tests/golden/; miri runs isolated")]
fn v1_json_loads() {
    check_v1("ship_v1.json");
}

/// Today's classes write exactly the committed bytes, which load back.
#[test]
#[cfg_attr(miri, ignore = "reads tests/golden/; miri runs isolated")]
fn v2_is_stable() {
    let (mut heap, port) = harbour();
    let ship = heap
        .spawn(Ship {
            hull: 4,
            crew: 9,
            fuel: 55.5,
            flag: Some("blue".into()),
            speed_knots: 18.0,
            cargo: Vec::new(),
            name: "Anne".into(),
            cache: 7,
        })
        .outer(port)
        .name("Anne")
        .create()
        .unwrap();
    let c = heap
        .spawn(Crate { weight: 3 })
        .outer(ship)
        .create()
        .unwrap();
    heap[ship].cargo = vec![c, port];
    for (file, opts) in [
        ("ship_v2.bin", SaveOptions::default()),
        ("ship_v2.json", SaveOptions::json()),
    ] {
        let mut bytes = Vec::new();
        heap.save_with(Selection::subtree(ship), &opts, &mut bytes)
            .unwrap();
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::write(format!("{DIR}/{file}"), &bytes).unwrap();
        }
        assert!(
            bytes == golden(file),
            "{file}: the format changed (UPDATE_GOLDEN=1 to accept)"
        );
        let (mut other, _) = harbour();
        let loaded = other.load(&bytes[..]).unwrap();
        let s = other.downcast::<Ship>(loaded.objects[0]).unwrap();
        assert_eq!((other[s].crew, other[s].fuel, other[s].cache), (9, 55.5, 0));
        assert_eq!(other[s].flag.as_deref(), Some("blue"));
    }
}

#[test]
#[cfg_attr(miri, ignore = "reads tests/golden/; miri runs isolated")]
fn unknown_class_is_named() {
    let text = String::from_utf8(golden("ship_v1.json"))
        .unwrap()
        .replace("\"Boat\"", "\"Yacht\"");
    let (mut heap, _) = harbour();
    let err = heap.load(text.as_bytes()).unwrap_err();
    assert!(
        matches!(&err, LoadError::UnknownClass { name } if name == "Yacht"),
        "{err}"
    );
    assert!(err.to_string().contains("Yacht"));
    assert_eq!(heap.len(), 1);
}

#[test]
#[cfg_attr(miri, ignore = "reads tests/golden/; miri runs isolated")]
fn wrong_field_type_names_the_field() {
    register::<Ship>().unwrap();
    register::<Crate>().unwrap();
    // `hull` written as a string.
    let text = String::from_utf8(golden("ship_v1.json")).unwrap().replacen(
        "\"Mary\",\n        3,",
        "\"Mary\",\n        \"three\",",
        1,
    );
    let (mut heap, _) = harbour();
    let err = heap.load(text.as_bytes()).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, LoadError::Payload { export: 0, .. }), "{msg}");
    assert!(msg.contains("hull") && msg.contains("Port.Mary"), "{msg}");
    assert_eq!(heap.len(), 1);
}

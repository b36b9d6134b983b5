//! Classes by name, for loading: a process-wide registry.

use std::collections::HashMap;

use parking_lot::RwLock;

use super::error::SaveError;
use super::SaveObject;
use crate::class::Class;

/// Class by name, and by old name (`rename_from`).
struct Registry {
    by_name: HashMap<&'static str, &'static Class>,
    by_old_name: HashMap<&'static str, &'static Class>,
}

static REGISTRY: RwLock<Option<Registry>> = RwLock::new(None);

/// Registers `T` for loading by name (and by its old names,
/// `#[object(rename_from = "…")]`). Saving registers the classes it writes,
/// so a program needs this only for files written by another run.
/// Registering a class twice is harmless.
///
/// ```
/// use coreobject::Object;
/// #[derive(Object, Default)]
/// #[object(save)]
/// struct Lamp { on: bool }
/// coreobject::save::register::<Lamp>().unwrap();
/// ```
///
/// # Errors
/// [`SaveError::ClassNameClash`] if another class is registered under the
/// same name (give one `#[object(name = "…")]`).
pub fn register<T: SaveObject>() -> Result<(), SaveError> {
    register_class(T::class())
}

/// Registers a saveable class.
pub(crate) fn register_class(class: &'static Class) -> Result<(), SaveError> {
    if lookup_exact(class.name()).is_some_and(|c| std::ptr::eq(c, class)) {
        return Ok(());
    }
    let mut reg = REGISTRY.write();
    let reg = reg.get_or_insert_with(|| Registry {
        by_name: HashMap::new(),
        by_old_name: HashMap::new(),
    });
    if let Some(other) = reg.by_name.get(class.name()) {
        if !std::ptr::eq(*other, class) {
            return Err(SaveError::ClassNameClash {
                name: class.name(),
                first: other.path(),
                second: class.path(),
            });
        }
    }
    reg.by_name.insert(class.name(), class);
    if let Some(vt) = class.save_vtable() {
        for old in vt.renamed_from {
            reg.by_old_name.entry(old).or_insert(class);
        }
    }
    Ok(())
}

fn lookup_exact(name: &str) -> Option<&'static Class> {
    REGISTRY.read().as_ref()?.by_name.get(name).copied()
}

/// The class registered under `name`, or that was once called `name`.
pub(crate) fn lookup(name: &str) -> Option<&'static Class> {
    let reg = REGISTRY.read();
    let reg = reg.as_ref()?;
    reg.by_name
        .get(name)
        .or_else(|| reg.by_old_name.get(name))
        .copied()
}

//! What can go wrong saving and loading.

use crate::handle::AnyObj;

/// Why a save failed. Nothing is written to the writer before the package
/// is complete, so a failed save leaves it untouched (an I/O error while
/// writing aside).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SaveError {
    /// An object to be saved has a class without `#[object(save)]`.
    #[error("object {object:?} is of class `{class}`, which cannot be saved: derive it with #[object(save)]")]
    NotSaveable {
        /// The class's name.
        class: &'static str,
        /// The object.
        object: AnyObj,
    },
    /// A saved object refers to an object outside the save that has no name
    /// (or whose outer chain holds one), so it cannot be found again by path.
    #[error("export {referrer} refers to {object:?} (class `{class}`), outside the save and without a name: name it, or save it too")]
    UnnamedImport {
        /// The outside object.
        object: AnyObj,
        /// Its class's name.
        class: &'static str,
        /// The display path of the first saved object that refers to it.
        referrer: String,
    },
    /// A field's value could not be encoded.
    #[error("class `{class}`, field `{field}`: {message}")]
    Encode {
        /// The class's name.
        class: &'static str,
        /// The field's name.
        field: &'static str,
        /// What the encoder said.
        message: String,
    },
    /// An object asked for is not alive.
    #[error("no live object {0:?} to save")]
    NotAlive(AnyObj),
    /// Two different classes would be saved under one name.
    #[error(
        "two classes are named `{name}` ({first} and {second}): give one #[object(name = \"…\")]"
    )]
    ClassNameClash {
        /// The shared name.
        name: &'static str,
        /// The first class's path.
        first: &'static str,
        /// The second class's path.
        second: &'static str,
    },
    /// A save (or load) is already in progress on this thread: a field's
    /// `Serialize` tried to save again.
    #[error("a save or load is already in progress on this thread")]
    Nested,
    /// Writing failed.
    #[error("writing the package: {0}")]
    Io(#[from] std::io::Error),
}

/// Why a load or a restore failed. A failed load leaves the heap as it was:
/// no object is created, no name taken, no slot kept.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// Reading failed.
    #[error("reading the package: {0}")]
    Io(#[from] std::io::Error),
    /// The input is not a package: it starts with neither the binary magic
    /// nor a JSON object.
    #[error("not a coreobject package (bad magic)")]
    BadMagic,
    /// The package was written by a newer (or unknown) format version.
    #[error("package format version {found} is not supported (this build reads {supported})")]
    Version {
        /// The version in the file.
        found: u32,
        /// The version this build reads.
        supported: u32,
    },
    /// The input ends inside a table.
    #[error("truncated package: ran out of bytes reading {what} at byte {at}")]
    Truncated {
        /// What was being read.
        what: &'static str,
        /// The byte offset.
        at: usize,
    },
    /// A table entry does not make sense (an index out of range, a count
    /// larger than the input, a string that is not UTF-8, …).
    #[error("malformed package: {what} (at byte {at})")]
    Malformed {
        /// What is wrong, with the index involved.
        what: String,
        /// The byte offset, or 0 for the text form.
        at: usize,
    },
    /// The text form does not parse.
    #[error("malformed text package: {0}")]
    Text(String),
    /// A class in the package is not registered (see [`register`](super::register)).
    #[error(
        "unknown class `{name}`: register it with coreobject::save::register::<T>() before loading"
    )]
    UnknownClass {
        /// The class name in the package.
        name: String,
    },
    /// An import's outer chain loops.
    #[error("import cycle: import {import}'s outer chain comes back to itself")]
    ImportCycle {
        /// The import (0-based) where the loop was found.
        import: usize,
    },
    /// An export's outer chain loops.
    #[error("outer cycle: export {export}'s outer chain comes back to itself")]
    OuterCycle {
        /// The export (0-based).
        export: usize,
    },
    /// An object's fields do not decode.
    #[error("export {export} ({path}, class `{class}`): {source}")]
    Payload {
        /// The export (0-based).
        export: usize,
        /// Its path in the package.
        path: String,
        /// Its class.
        class: String,
        /// What went wrong, and in which field.
        source: FieldError,
    },
    /// A name is taken in the target heap.
    #[error("cannot load `{path}`: the name is taken ({reason})")]
    NameTaken {
        /// The object's path in the package.
        path: String,
        /// What the heap said.
        reason: String,
    },
    /// An exact restore needs every object in the package.
    #[error("cannot restore: the package {0}")]
    NotRestorable(String),
    /// An exact restore could not put an object or a free slot back.
    #[error("cannot restore slot {index}: {reason}")]
    Slot {
        /// The slot.
        index: u32,
        /// What the heap said.
        reason: String,
    },
    /// The heap could not be made (too many heaps alive, bad settings).
    #[error("cannot make the heap: {0}")]
    Heap(String),
    /// The heap's object cap is reached.
    #[error("the object cap is reached: {0}")]
    Cap(String),
    /// A load or save is already in progress on this thread.
    #[error("a save or load is already in progress on this thread")]
    Nested,
}

/// Why one field did not decode (inside [`LoadError::Payload`]), or a
/// migration hook's own error.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("field `{field}`: {message}")]
pub struct FieldError {
    /// The field (its name in the file).
    pub field: String,
    /// What went wrong.
    pub message: String,
}

impl FieldError {
    /// An error for a migration hook to return.
    ///
    /// ```
    /// let e = coreobject::save::FieldError::custom("hp", "negative");
    /// assert_eq!(e.to_string(), "field `hp`: negative");
    /// ```
    pub fn custom(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}

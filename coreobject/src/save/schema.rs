//! Matching a file's class layout to the current one: once per class per
//! file, so that reading an object costs the same however the class evolved.

use super::error::{FieldError, LoadError};
use super::package::{malformed, ClassRec, Package, Reader};
use super::SaveVtable;
use crate::class::Class;

/// How to read one class's objects from one file.
pub(crate) struct Plan<'p> {
    pub(crate) class: &'static Class,
    pub(crate) vt: &'static SaveVtable,
    pub(crate) version: u32,
    /// Per field in the file: its name.
    pub(crate) file_names: Vec<&'p str>,
    /// Per field in the file: the current field it fills, if any.
    pub(crate) to_current: Vec<Option<usize>>,
}

impl<'p> Plan<'p> {
    /// Matches `rec`'s fields (by name, then by the current fields' old
    /// names) to `class`'s.
    pub(crate) fn new(
        pkg: &'p Package,
        rec: &ClassRec,
        class: &'static Class,
    ) -> Result<Plan<'p>, LoadError> {
        let vt = class.save_vtable().ok_or_else(|| {
            malformed(
                format!(
                    "class `{}` is registered but cannot be loaded (no #[object(save)])",
                    class.name()
                ),
                0,
            )
        })?;
        let mut file_names = Vec::with_capacity(rec.fields.len());
        for &f in &rec.fields {
            file_names.push(string(pkg, f, "class field name")?);
        }
        let mut taken = vec![false; vt.fields.len()];
        let mut to_current = vec![None; file_names.len()];
        // Exact names first, so that a field renamed while another took its
        // old name is not matched twice.
        for (k, name) in file_names.iter().enumerate() {
            if let Some(i) = vt.fields.iter().position(|f| f.name == *name) {
                if !taken[i] {
                    taken[i] = true;
                    to_current[k] = Some(i);
                }
            }
        }
        for (k, name) in file_names.iter().enumerate() {
            if to_current[k].is_some() {
                continue;
            }
            let old = vt
                .fields
                .iter()
                .enumerate()
                .position(|(i, f)| !taken[i] && f.rename_from.contains(name));
            if let Some(i) = old {
                taken[i] = true;
                to_current[k] = Some(i);
            }
        }
        Ok(Plan {
            class,
            vt,
            version: rec.version,
            file_names,
            to_current,
        })
    }

    /// Splits one payload into its fields: `file` gets each file field's
    /// name and bytes, `current` each current field's bytes (or `None`).
    pub(crate) fn split<'a>(
        &self,
        payload: &'a [u8],
        file: &mut Vec<(&'a str, &'a [u8])>,
        current: &mut Vec<Option<&'a [u8]>>,
    ) -> Result<(), FieldError>
    where
        'p: 'a,
    {
        file.clear();
        current.clear();
        current.resize(self.vt.fields.len(), None);
        let mut r = Reader::new(payload);
        for (k, name) in self.file_names.iter().enumerate() {
            let len = r
                .u64("field length")
                .map_err(|e| FieldError::custom(*name, e.to_string()))?;
            let bytes = usize::try_from(len)
                .ok()
                .and_then(|n| r.bytes(n, "field").ok())
                .ok_or_else(|| {
                    FieldError::custom(*name, format!("{len} bytes announced, fewer left"))
                })?;
            file.push((name, bytes));
            if let Some(i) = self.to_current[k] {
                current[i] = Some(bytes);
            }
        }
        if r.pos != payload.len() {
            return Err(FieldError::custom(
                "",
                format!(
                    "{} bytes after the last field of the class table",
                    payload.len() - r.pos
                ),
            ));
        }
        Ok(())
    }
}

/// String `i` of the package.
pub(crate) fn string<'p>(pkg: &'p Package, i: u32, what: &str) -> Result<&'p str, LoadError> {
    pkg.strings
        .get(i as usize)
        .map(String::as_str)
        .ok_or_else(|| {
            malformed(
                format!("{what}: string {i} of {} out of range", pkg.strings.len()),
                0,
            )
        })
}

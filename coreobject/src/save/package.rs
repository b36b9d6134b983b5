//! The package in memory, and its two forms on disk: binary and JSON.
//!
//! Binary layout (integers are LEB128 varints; signed ones zigzag):
//!
//! ```text
//! magic "COPKG\0" | format version | flags (1: heap section present)
//! strings:  count, then per string: byte length, UTF-8 bytes
//! classes:  count, then per class: name (string), version, field count, field names (strings)
//! imports:  count, then per import: class name (string), outer (package index), name base (string), name number
//! exports:  count, then per export: class (class table index), outer (package index),
//!           name base (string + 1, 0 for none) [and its number], flags, payload length
//! clusters: count, then per cluster: root (export), member count, members (exports)
//! heap:     (exact restore only) tag, floor, limit, generation bits, cap, pool capacity,
//!           pool end, per export: index gap, generation; free slots: count, (index, serial)
//! payloads: byte length, then every export's payload in export order
//! ```
//!
//! A name number is stored plus one (0: the name has none). A package index
//! is positive for an export (export `i` is `i + 1`), negative for an import
//! (import `i` is `-(i + 1)`), zero for none. A payload is its class's
//! fields in the class table's order, each a byte length and the field's
//! value in the package's format (postcard, or JSON text).

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::error::LoadError;

pub(crate) const MAGIC: &[u8; 6] = b"COPKG\0";
/// The format version this build writes and reads.
pub(crate) const VERSION: u32 = 1;
const JSON_TAG: &str = "coreobject-package";

pub(crate) mod xflags {
    /// In the root set.
    pub const ROOT: u32 = 1;
    /// In the disregard-for-GC pool.
    pub const POOL: u32 = 2;
    /// Every flag this version knows.
    pub const ALL: u32 = ROOT | POOL;
}

/// Which encoding a package's field values use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// Compact binary (postcard for field values): the default.
    #[default]
    Binary,
    /// Pretty-printed JSON, for diffs and golden files.
    Json,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ClassRec {
    pub name: u32,
    pub version: u32,
    pub fields: Vec<u32>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ImportRec {
    pub class: u32,
    pub outer: i32,
    /// Base string and number + 1.
    pub name: (u32, u32),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ExportRec {
    pub class: u32,
    pub outer: i32,
    pub name: Option<(u32, u32)>,
    pub flags: u32,
    /// Byte range of the payload in `Package::data`.
    pub payload: (usize, usize),
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct HeapRec {
    pub tag: u32,
    pub floor: u32,
    pub limit: u32,
    pub generation_bits: u32,
    pub cap: u32,
    pub pool_capacity: u32,
    pub pool_end: u32,
    /// Per export: slot index and serial.
    pub slots: Vec<(u32, u32)>,
    /// Free slots that were used: index and the next serial
    /// (`RETIRED` for a retired slot).
    pub free: Vec<(u32, u32)>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Package {
    pub format: Format,
    pub strings: Vec<String>,
    pub classes: Vec<ClassRec>,
    pub imports: Vec<ImportRec>,
    pub exports: Vec<ExportRec>,
    pub clusters: Vec<(u32, Vec<u32>)>,
    pub heap: Option<HeapRec>,
    /// The payloads (for a parsed binary package, the whole input).
    pub data: Vec<u8>,
}

// ----- varints ---------------------------------------------------------------

#[inline]
pub(crate) fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[inline]
fn put_i(out: &mut Vec<u8>, v: i32) {
    put(out, ((v << 1) ^ (v >> 31)) as u32 as u64);
}

#[cfg(test)]
/// Bytes a varint of `v` takes.
#[inline]
pub(crate) fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// A bounds-checked reader over a byte slice.
pub(crate) struct Reader<'a> {
    pub buf: &'a [u8],
    pub pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    #[inline]
    pub(crate) fn u64(&mut self, what: &'static str) -> Result<u64, LoadError> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(LoadError::Truncated { what, at: self.pos });
            };
            self.pos += 1;
            if shift == 63 && b > 1 {
                break;
            }
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(malformed(format!("{what}: varint too long"), self.pos))
    }

    #[inline]
    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, LoadError> {
        let at = self.pos;
        let v = self.u64(what)?;
        u32::try_from(v).map_err(|_| malformed(format!("{what}: {v} is too large"), at))
    }

    fn i32(&mut self, what: &'static str) -> Result<i32, LoadError> {
        let z = self.u32(what)?;
        Ok(((z >> 1) as i32) ^ -((z & 1) as i32))
    }

    /// A count of items that take at least one byte each.
    fn count(&mut self, what: &'static str) -> Result<usize, LoadError> {
        let at = self.pos;
        let n = self.u64(what)?;
        if n > (self.buf.len() - self.pos) as u64 {
            return Err(malformed(
                format!("{what}: count {n} exceeds the bytes left"),
                at,
            ));
        }
        Ok(n as usize)
    }

    pub(crate) fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], LoadError> {
        if n > self.buf.len() - self.pos {
            return Err(LoadError::Truncated { what, at: self.pos });
        }
        let b = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(b)
    }
}

pub(crate) fn malformed(what: String, at: usize) -> LoadError {
    LoadError::Malformed { what, at }
}

// ----- binary ------------------------------------------------------------------

impl Package {
    /// The binary form.
    #[cfg(test)]
    pub(crate) fn write_binary(&self, out: &mut Vec<u8>) {
        self.write_binary_head(out);
        for e in &self.exports {
            out.extend_from_slice(&self.data[e.payload.0..e.payload.1]);
        }
    }

    /// Whether the payloads are `data`, whole and in export order (so that
    /// the binary form is the head, then `data`).
    pub(crate) fn payloads_in_order(&self) -> bool {
        let mut at = 0;
        for e in &self.exports {
            if e.payload.0 != at {
                return false;
            }
            at = e.payload.1;
        }
        at == self.data.len()
    }

    /// The binary form up to the payloads: the payload bytes follow it.
    pub(crate) fn write_binary_head(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(MAGIC);
        put(out, VERSION.into());
        put(out, u64::from(self.heap.is_some()));
        put(out, self.strings.len() as u64);
        for s in &self.strings {
            put(out, s.len() as u64);
            out.extend_from_slice(s.as_bytes());
        }
        put(out, self.classes.len() as u64);
        for c in &self.classes {
            put(out, c.name.into());
            put(out, c.version.into());
            put(out, c.fields.len() as u64);
            for &f in &c.fields {
                put(out, f.into());
            }
        }
        put(out, self.imports.len() as u64);
        for i in &self.imports {
            put(out, i.class.into());
            put_i(out, i.outer);
            put(out, i.name.0.into());
            put(out, i.name.1.into());
        }
        put(out, self.exports.len() as u64);
        for e in &self.exports {
            put(out, e.class.into());
            put_i(out, e.outer);
            match e.name {
                None => put(out, 0),
                Some((base, number)) => {
                    put(out, u64::from(base) + 1);
                    put(out, number.into());
                }
            }
            put(out, e.flags.into());
            put(out, (e.payload.1 - e.payload.0) as u64);
        }
        put(out, self.clusters.len() as u64);
        for (root, members) in &self.clusters {
            put(out, (*root).into());
            put(out, members.len() as u64);
            for &m in members {
                put(out, m.into());
            }
        }
        if let Some(h) = &self.heap {
            for v in [
                h.tag,
                h.floor,
                h.limit,
                h.generation_bits,
                h.cap,
                h.pool_capacity,
                h.pool_end,
            ] {
                put(out, v.into());
            }
            let mut next = 0u32;
            for &(index, serial) in &h.slots {
                put(out, u64::from(index.wrapping_sub(next)));
                put(out, serial.into());
                next = index.wrapping_add(1);
            }
            put(out, h.free.len() as u64);
            for &(index, serial) in &h.free {
                put(out, index.into());
                put(out, serial.into());
            }
        }
        let total: usize = self.exports.iter().map(|e| e.payload.1 - e.payload.0).sum();
        put(out, total as u64);
    }

    /// Parses the binary form; the payloads stay where they are in `input`,
    /// which becomes the package's `data`.
    pub(crate) fn read_binary(input: Vec<u8>) -> Result<Package, LoadError> {
        let mut p = Package::default();
        let mut r = Reader::new(&input);
        if r.bytes(MAGIC.len(), "magic").ok() != Some(&MAGIC[..]) {
            return Err(LoadError::BadMagic);
        }
        let version = r.u32("format version")?;
        if version != VERSION {
            return Err(LoadError::Version {
                found: version,
                supported: VERSION,
            });
        }
        let flags = r.u32("flags")?;
        if flags > 1 {
            return Err(malformed(
                format!("unknown package flags {flags:#x}"),
                r.pos,
            ));
        }
        let n = r.count("string count")?;
        p.strings.reserve(n);
        for _ in 0..n {
            let len = r.count("string length")?;
            let at = r.pos;
            let b = r.bytes(len, "string")?;
            let s = std::str::from_utf8(b)
                .map_err(|_| malformed("a string that is not UTF-8".into(), at))?;
            p.strings.push(s.to_owned());
        }
        let n = r.count("class count")?;
        for _ in 0..n {
            let name = r.u32("class name")?;
            let version = r.u32("class version")?;
            let k = r.count("field count")?;
            let mut fields = Vec::with_capacity(k);
            for _ in 0..k {
                fields.push(r.u32("field name")?);
            }
            p.classes.push(ClassRec {
                name,
                version,
                fields,
            });
        }
        let n = r.count("import count")?;
        for _ in 0..n {
            let class = r.u32("import class")?;
            let outer = r.i32("import outer")?;
            let base = r.u32("import name")?;
            let number = r.u32("import name number")?;
            p.imports.push(ImportRec {
                class,
                outer,
                name: (base, number),
            });
        }
        let n = r.count("export count")?;
        p.exports.reserve(n);
        let mut lens = Vec::with_capacity(n);
        for _ in 0..n {
            let class = r.u32("export class")?;
            let outer = r.i32("export outer")?;
            let base = r.u32("export name")?;
            let name = if base == 0 {
                None
            } else {
                Some((base - 1, r.u32("export name number")?))
            };
            let flags = r.u32("export flags")?;
            let at = r.pos;
            let len = r.u64("payload length")?;
            let len = usize::try_from(len)
                .map_err(|_| malformed(format!("payload length {len} too large"), at))?;
            lens.push(len);
            p.exports.push(ExportRec {
                class,
                outer,
                name,
                flags,
                payload: (0, 0),
            });
        }
        let n = r.count("cluster count")?;
        for _ in 0..n {
            let root = r.u32("cluster root")?;
            let k = r.count("cluster member count")?;
            let mut members = Vec::with_capacity(k);
            for _ in 0..k {
                members.push(r.u32("cluster member")?);
            }
            p.clusters.push((root, members));
        }
        if flags & 1 != 0 {
            let mut h = HeapRec {
                tag: r.u32("heap tag")?,
                floor: r.u32("heap floor")?,
                limit: r.u32("heap limit")?,
                generation_bits: r.u32("generation bits")?,
                cap: r.u32("heap cap")?,
                pool_capacity: r.u32("pool capacity")?,
                pool_end: r.u32("pool end")?,
                ..HeapRec::default()
            };
            let mut next = 0u32;
            h.slots.reserve(p.exports.len());
            for _ in 0..p.exports.len() {
                let at = r.pos;
                let gap = r.u32("slot index")?;
                let index = next
                    .checked_add(gap)
                    .filter(|&i| i < u32::MAX)
                    .ok_or_else(|| malformed("slot index overflows".into(), at))?;
                h.slots.push((index, r.u32("slot serial")?));
                next = index + 1;
            }
            let k = r.count("free slot count")?;
            for _ in 0..k {
                h.free
                    .push((r.u32("free slot index")?, r.u32("free slot serial")?));
            }
            p.heap = Some(h);
        }
        let at = r.pos;
        let total = r.u64("payload bytes")?;
        let mut start = r.pos;
        let left = (input.len() - start) as u64;
        if total != left || lens.iter().map(|&l| l as u64).sum::<u64>() != total {
            if total > left {
                return Err(LoadError::Truncated {
                    what: "payloads",
                    at: input.len(),
                });
            }
            return Err(malformed(
                format!("payloads take {total} bytes; the export table says otherwise, or {left} bytes follow"),
                at,
            ));
        }
        for (e, len) in p.exports.iter_mut().zip(lens) {
            e.payload = (start, start + len);
            start += len;
        }
        p.data = input;
        Ok(p)
    }
}

// ----- JSON ----------------------------------------------------------------------

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonPackage {
    format: String,
    version: u32,
    strings: Vec<String>,
    classes: Vec<JsonClass>,
    imports: Vec<JsonImport>,
    exports: Vec<JsonExport>,
    #[serde(default)]
    clusters: Vec<(u32, Vec<u32>)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    heap: Option<HeapRec>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonClass {
    name: u32,
    version: u32,
    fields: Vec<u32>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonImport {
    class: u32,
    outer: i32,
    name: (u32, u32),
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonExport {
    class: u32,
    #[serde(default)]
    outer: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<(u32, u32)>,
    #[serde(default)]
    flags: u32,
    fields: Vec<Box<RawValue>>,
}

impl Package {
    /// The text form: pretty JSON, each field value as its own JSON.
    pub(crate) fn write_json(&self, out: &mut Vec<u8>) -> Result<(), String> {
        let mut exports = Vec::with_capacity(self.exports.len());
        for e in &self.exports {
            let mut r = Reader::new(&self.data[e.payload.0..e.payload.1]);
            let mut fields = Vec::new();
            while r.pos < r.buf.len() {
                let len = r.count("field length").map_err(|e| e.to_string())?;
                let b = r.bytes(len, "field").map_err(|e| e.to_string())?;
                let text = std::str::from_utf8(b).map_err(|e| e.to_string())?;
                fields.push(RawValue::from_string(text.to_owned()).map_err(|e| e.to_string())?);
            }
            exports.push(JsonExport {
                class: e.class,
                outer: e.outer,
                name: e.name,
                flags: e.flags,
                fields,
            });
        }
        let doc = JsonPackage {
            format: JSON_TAG.into(),
            version: VERSION,
            strings: self.strings.clone(),
            classes: self
                .classes
                .iter()
                .map(|c| JsonClass {
                    name: c.name,
                    version: c.version,
                    fields: c.fields.clone(),
                })
                .collect(),
            imports: self
                .imports
                .iter()
                .map(|i| JsonImport {
                    class: i.class,
                    outer: i.outer,
                    name: i.name,
                })
                .collect(),
            exports,
            clusters: self.clusters.clone(),
            heap: self.heap.clone(),
        };
        serde_json::to_writer_pretty(&mut *out, &doc).map_err(|e| e.to_string())?;
        out.push(b'\n');
        Ok(())
    }

    pub(crate) fn read_json(input: &[u8]) -> Result<Package, LoadError> {
        let doc: JsonPackage =
            serde_json::from_slice(input).map_err(|e| LoadError::Text(e.to_string()))?;
        if doc.format != JSON_TAG {
            return Err(LoadError::BadMagic);
        }
        if doc.version != VERSION {
            return Err(LoadError::Version {
                found: doc.version,
                supported: VERSION,
            });
        }
        let mut p = Package {
            format: Format::Json,
            strings: doc.strings,
            classes: doc
                .classes
                .into_iter()
                .map(|c| ClassRec {
                    name: c.name,
                    version: c.version,
                    fields: c.fields,
                })
                .collect(),
            imports: doc
                .imports
                .into_iter()
                .map(|i| ImportRec {
                    class: i.class,
                    outer: i.outer,
                    name: i.name,
                })
                .collect(),
            clusters: doc.clusters,
            heap: doc.heap,
            ..Package::default()
        };
        for e in doc.exports {
            let start = p.data.len();
            for f in &e.fields {
                let text = f.get().as_bytes();
                put(&mut p.data, text.len() as u64);
                p.data.extend_from_slice(text);
            }
            p.exports.push(ExportRec {
                class: e.class,
                outer: e.outer,
                name: e.name,
                flags: e.flags,
                payload: (start, p.data.len()),
            });
        }
        Ok(p)
    }

    /// Parses either form, told apart by the first bytes.
    pub(crate) fn parse(input: Vec<u8>) -> Result<Package, LoadError> {
        if input.starts_with(MAGIC) {
            return Package::read_binary(input);
        }
        let first = input.iter().find(|b| !b.is_ascii_whitespace());
        if first == Some(&b'{') {
            return Package::read_json(&input);
        }
        if input.len() < MAGIC.len() && MAGIC.starts_with(&input) {
            return Err(LoadError::Truncated {
                what: "magic",
                at: input.len(),
            });
        }
        Err(LoadError::BadMagic)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Package {
        let mut data = Vec::new();
        put(&mut data, 2);
        data.extend_from_slice(b"hi");
        Package {
            format: Format::Binary,
            strings: vec!["Crate".into(), "weight".into(), "Port".into()],
            classes: vec![ClassRec {
                name: 0,
                version: 3,
                fields: vec![1],
            }],
            imports: vec![ImportRec {
                class: 0,
                outer: 0,
                name: (2, 0),
            }],
            exports: vec![
                ExportRec {
                    class: 0,
                    outer: -1,
                    name: Some((2, 8)),
                    flags: xflags::ROOT,
                    payload: (0, 3),
                },
                ExportRec {
                    class: 0,
                    outer: 1,
                    name: None,
                    flags: 0,
                    payload: (3, 3),
                },
            ],
            clusters: vec![(0, vec![1])],
            heap: Some(HeapRec {
                tag: 7,
                floor: 0,
                limit: 99,
                generation_bits: 22,
                cap: 1000,
                pool_capacity: 0,
                pool_end: 0,
                slots: vec![(3, 1), (70, 5)],
                free: vec![(4, 2), (5, 0)],
            }),
            data,
        }
    }

    #[test]
    fn binary_round_trips_and_every_prefix_is_refused() {
        let p = sample();
        let mut out = Vec::new();
        p.write_binary(&mut out);
        let back = Package::read_binary(out.clone()).unwrap();
        assert_eq!(back.strings, p.strings);
        assert_eq!(back.classes, p.classes);
        assert_eq!(back.imports, p.imports);
        assert_eq!(back.clusters, p.clusters);
        assert_eq!(back.heap, p.heap);
        let payloads: Vec<&[u8]> = back
            .exports
            .iter()
            .map(|e| &back.data[e.payload.0..e.payload.1])
            .collect();
        assert_eq!(payloads, [&p.data[..], &[][..]]);
        for n in 0..out.len() {
            assert!(Package::parse(out[..n].to_vec()).is_err(), "prefix {n}");
        }
    }

    #[test]
    fn json_round_trips() {
        let mut p = sample();
        // JSON payloads are JSON texts.
        p.data.clear();
        put(&mut p.data, 2);
        p.data.extend_from_slice(b"40");
        p.exports[0].payload = (0, 3);
        p.exports[1].payload = (3, 3);
        let mut out = Vec::new();
        p.write_json(&mut out).unwrap();
        let back = Package::parse(out).unwrap();
        assert_eq!(back.format, Format::Json);
        assert_eq!((back.exports, back.data), (p.exports, p.data));
    }

    #[test]
    fn varints_round_trip() {
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut out = Vec::new();
            put(&mut out, v);
            assert_eq!(out.len(), varint_len(v));
            assert_eq!(Reader::new(&out).u64("v").unwrap(), v);
        }
        for v in [0i32, -1, 1, i32::MIN, i32::MAX] {
            let mut out = Vec::new();
            put_i(&mut out, v);
            assert_eq!(Reader::new(&out).i32("v").unwrap(), v);
        }
        // An overlong varint is refused, not wrapped.
        assert!(Reader::new(&[0xff; 11]).u64("v").is_err());
    }
}

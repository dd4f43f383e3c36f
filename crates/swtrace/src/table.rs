//! The probe table: probe id -> name, address, file:line. The trace stream carries ids only;
//! the recorder stores this table beside the trace (a side file or a perf.data section) in the
//! byte format below, and the decoder's user names ids with it.
//!
//! # Byte format
//!
//! Little-endian: magic `"SWTPROBE"` (8 bytes), `u32 version` (1), `u32 count`, then `count`
//! entries: `u32 id`, `u32 line`, `u64 addr`, `u16 name_len`, `u16 file_len`, the name's UTF-8
//! bytes, the file's UTF-8 bytes. Ids are unique and non-zero.
//!
//! The names of the recording's uevent types may follow (a program that names its uevents;
//! a table without them ends after the entries, and readers of the entries alone stop
//! there): magic `"SWTUEVTY"`, `u32 count`, then `count` entries: `u32 type`, `u16 name_len`,
//! the name's UTF-8 bytes. Types are unique. Any other bytes after the entries are an error.

use std::collections::BTreeMap;

use thiserror::Error;

/// One probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeInfo {
    /// Probe id (>= 1).
    pub id: u32,
    /// Name.
    pub name: String,
    /// An address inside the instrumented function (0 when unknown).
    pub addr: u64,
    /// Source file ("" when unknown).
    pub file: String,
    /// Source line (0 when unknown).
    pub line: u32,
}

/// Probe ids to their descriptions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProbeTable {
    by_id: BTreeMap<u32, ProbeInfo>,
    /// The recording's uevent type names, by type.
    uevent_types: BTreeMap<u32, String>,
}

/// Why a probe table's bytes did not parse.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum TableError {
    /// The bytes end early.
    #[error("probe table truncated at byte {0}")]
    Truncated(usize),
    /// Wrong magic.
    #[error("probe table magic is not \"SWTPROBE\"")]
    BadMagic,
    /// Unknown version.
    #[error("probe table version {0} is not 1")]
    BadVersion(u32),
    /// A name or file is not UTF-8.
    #[error("probe table entry at byte {0}: name or file is not UTF-8")]
    BadUtf8(usize),
    /// Bytes after the entries that are no uevent type names.
    #[error("probe table: bytes at {0} after the entries are not uevent type names (\"SWTUEVTY\")")]
    Trailing(usize),
    /// A uevent type's name repeats its type.
    #[error("probe table: uevent type {ty} at byte {at} is named twice")]
    RepeatedType {
        /// Offset of the entry.
        at: usize,
        /// The type.
        ty: u32,
    },
    /// An id is 0 or repeats.
    #[error("probe table entry at byte {at}: id {id} is 0 or repeated")]
    BadId {
        /// Offset of the entry.
        at: usize,
        /// The id.
        id: u32,
    },
}

const MAGIC: &[u8; 8] = b"SWTPROBE";
const UEVENT_MAGIC: &[u8; 8] = b"SWTUEVTY";

impl ProbeTable {
    /// A table of `entries` (a later entry with the same id replaces an earlier one).
    pub fn from_entries(entries: impl IntoIterator<Item = ProbeInfo>) -> ProbeTable {
        ProbeTable {
            by_id: entries.into_iter().map(|e| (e.id, e)).collect(),
            uevent_types: BTreeMap::new(),
        }
    }

    /// Names uevent type `ty` (a later name replaces an earlier one).
    pub fn name_uevent_type(&mut self, ty: u32, name: &str) {
        self.uevent_types.insert(ty, name.to_owned());
    }

    /// The uevent types the recording names, by type.
    pub fn uevent_types(&self) -> impl Iterator<Item = (u32, &str)> {
        self.uevent_types.iter().map(|(t, n)| (*t, n.as_str()))
    }

    /// The name of uevent type `ty`, if the recording gives one.
    pub fn uevent_type(&self, ty: u32) -> Option<&str> {
        self.uevent_types.get(&ty).map(String::as_str)
    }

    /// Adds or replaces an entry.
    pub fn insert(&mut self, info: ProbeInfo) {
        self.by_id.insert(info.id, info);
    }

    /// The entry for `id`.
    pub fn get(&self, id: u32) -> Option<&ProbeInfo> {
        self.by_id.get(&id)
    }

    /// The name of `id`.
    pub fn name(&self, id: u32) -> Option<&str> {
        self.get(id).map(|p| p.name.as_str())
    }

    /// Entries by id.
    pub fn iter(&self) -> impl Iterator<Item = &ProbeInfo> {
        self.by_id.values()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// The table's bytes (format in the module doc). Names and files longer than 65535 bytes
    /// are cut at a character boundary.
    pub fn to_bytes(&self) -> Vec<u8> {
        fn cut(s: &str) -> &str {
            let mut end = s.len().min(u16::MAX as usize);
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            &s[..end]
        }
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&1u32.to_le_bytes());
        out.extend_from_slice(&(self.by_id.len() as u32).to_le_bytes());
        for p in self.by_id.values() {
            let (name, file) = (cut(&p.name), cut(&p.file));
            out.extend_from_slice(&p.id.to_le_bytes());
            out.extend_from_slice(&p.line.to_le_bytes());
            out.extend_from_slice(&p.addr.to_le_bytes());
            out.extend_from_slice(&(name.len() as u16).to_le_bytes());
            out.extend_from_slice(&(file.len() as u16).to_le_bytes());
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(file.as_bytes());
        }
        if !self.uevent_types.is_empty() {
            out.extend_from_slice(UEVENT_MAGIC);
            out.extend_from_slice(&(self.uevent_types.len() as u32).to_le_bytes());
            for (ty, name) in &self.uevent_types {
                let name = cut(name);
                out.extend_from_slice(&ty.to_le_bytes());
                out.extend_from_slice(&(name.len() as u16).to_le_bytes());
                out.extend_from_slice(name.as_bytes());
            }
        }
        out
    }

    /// Parses a table's bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<ProbeTable, TableError> {
        let take = |at: usize, n: usize| -> Result<&[u8], TableError> {
            bytes
                .get(at..at.checked_add(n).ok_or(TableError::Truncated(at))?)
                .ok_or(TableError::Truncated(at))
        };
        if take(0, 8)? != MAGIC {
            return Err(TableError::BadMagic);
        }
        let u32_at = |at: usize| -> Result<u32, TableError> {
            let b = take(at, 4)?;
            Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        };
        let version = u32_at(8)?;
        if version != 1 {
            return Err(TableError::BadVersion(version));
        }
        let count = u32_at(12)?;
        let mut at = 16;
        let mut table = ProbeTable::default();
        for _ in 0..count {
            let start = at;
            let id = u32_at(at)?;
            let line = u32_at(at + 4)?;
            let a = take(at + 8, 8)?;
            let addr = u64::from_le_bytes([a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]]);
            let l = take(at + 16, 4)?;
            let name_len = usize::from(u16::from_le_bytes([l[0], l[1]]));
            let file_len = usize::from(u16::from_le_bytes([l[2], l[3]]));
            at += 20;
            let name =
                std::str::from_utf8(take(at, name_len)?).map_err(|_| TableError::BadUtf8(start))?;
            at += name_len;
            let file =
                std::str::from_utf8(take(at, file_len)?).map_err(|_| TableError::BadUtf8(start))?;
            at += file_len;
            if id == 0 || table.by_id.contains_key(&id) {
                return Err(TableError::BadId { at: start, id });
            }
            table.insert(ProbeInfo {
                id,
                name: name.to_owned(),
                addr,
                file: file.to_owned(),
                line,
            });
        }
        if at == bytes.len() {
            return Ok(table);
        }
        if take(at, 8).ok() != Some(UEVENT_MAGIC) {
            return Err(TableError::Trailing(at));
        }
        let count = u32_at(at + 8)?;
        at += 12;
        for _ in 0..count {
            let start = at;
            let ty = u32_at(at)?;
            let l = take(at + 4, 2)?;
            let len = usize::from(u16::from_le_bytes([l[0], l[1]]));
            at += 6;
            let name =
                std::str::from_utf8(take(at, len)?).map_err(|_| TableError::BadUtf8(start))?;
            at += len;
            if table.uevent_types.insert(ty, name.to_owned()).is_some() {
                return Err(TableError::RepeatedType { at: start, ty });
            }
        }
        if at != bytes.len() {
            return Err(TableError::Trailing(at));
        }
        Ok(table)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uevent_type_names_round_trip_and_bad_ones_are_errors() {
        let mut t = sample();
        let plain = t.to_bytes();
        assert_eq!(
            ProbeTable::from_bytes(&plain)
                .unwrap()
                .uevent_types()
                .count(),
            0
        );
        t.name_uevent_type(3, "slow_path");
        t.name_uevent_type(1, "request_start");
        let bytes = t.to_bytes();
        let back = ProbeTable::from_bytes(&bytes).unwrap();
        assert_eq!(back, t);
        assert_eq!(back.uevent_type(3), Some("slow_path"));
        assert_eq!(back.uevent_type(2), None);
        // The entries are read as before: the names follow them.
        assert_eq!(&bytes[..plain.len()], &plain[..]);
        let mut junk = plain.clone();
        junk.extend_from_slice(b"12345678");
        assert_eq!(
            ProbeTable::from_bytes(&junk),
            Err(TableError::Trailing(plain.len()))
        );
        assert!(matches!(
            ProbeTable::from_bytes(&bytes[..bytes.len() - 1]),
            Err(TableError::Truncated(_))
        ));
        let mut twice = bytes.clone();
        let at = plain.len() + 8;
        twice[at..at + 4].copy_from_slice(&3u32.to_le_bytes());
        // The count says 3 now: the entries after the two are missing.
        assert!(ProbeTable::from_bytes(&twice).is_err());
    }

    fn sample() -> ProbeTable {
        ProbeTable::from_entries([
            ProbeInfo {
                id: 1,
                name: "a::b".into(),
                addr: 0x1000,
                file: "src/x.rs".into(),
                line: 7,
            },
            ProbeInfo {
                id: 300,
                name: "ünïcode".into(),
                addr: 0,
                file: String::new(),
                line: 0,
            },
        ])
    }

    #[test]
    fn bytes_follow_the_documented_layout() {
        let b = sample().to_bytes();
        assert_eq!(&b[..8], b"SWTPROBE");
        assert_eq!(b[8..12], 1u32.to_le_bytes());
        assert_eq!(b[12..16], 2u32.to_le_bytes());
        // First entry: id, line, addr, name_len, file_len, name, file.
        assert_eq!(b[16..20], 1u32.to_le_bytes());
        assert_eq!(b[20..24], 7u32.to_le_bytes());
        assert_eq!(b[24..32], 0x1000u64.to_le_bytes());
        assert_eq!(b[32..34], 4u16.to_le_bytes());
        assert_eq!(b[34..36], 8u16.to_le_bytes());
        assert_eq!(&b[36..40], b"a::b");
        assert_eq!(&b[40..48], b"src/x.rs");
        assert_eq!(ProbeTable::from_bytes(&b), Ok(sample()));
    }

    #[test]
    fn bad_bytes_are_errors_naming_where() {
        let b = sample().to_bytes();
        for cut in 0..b.len() {
            assert!(ProbeTable::from_bytes(&b[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad = b.clone();
        bad[0] = b'X';
        assert_eq!(ProbeTable::from_bytes(&bad), Err(TableError::BadMagic));
        let mut bad = b.clone();
        bad[8] = 2;
        assert_eq!(ProbeTable::from_bytes(&bad), Err(TableError::BadVersion(2)));
        let mut bad = b.clone();
        bad[16..20].copy_from_slice(&0u32.to_le_bytes());
        assert_eq!(
            ProbeTable::from_bytes(&bad),
            Err(TableError::BadId { at: 16, id: 0 })
        );
        let mut bad = b.clone();
        bad[36] = 0xFF;
        assert_eq!(ProbeTable::from_bytes(&bad), Err(TableError::BadUtf8(16)));
        let mut bad = b;
        bad[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            ProbeTable::from_bytes(&bad),
            Err(TableError::Truncated(_))
        ));
    }
}

//! The layout table: every field of every struct of the control area with its offset and
//! size, taken from the structs themselves (`offset_of!`, the field's type), and
//! [`crate::VERSION`], a hash of it computed at compile time: a layout change changes the
//! version, so a runtime built against another layout refuses the area instead of reading
//! it wrong.

use std::mem::{offset_of, size_of};

use crate::area::{
    ChildRing, ControlArea, ControlHeader, EventTable, ObjectRing, ProbeNames, RingFds,
    SharedChild, SharedEvent, SharedObject, Slot,
};

/// One field of a struct of the control area.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// The struct.
    pub owner: &'static str,
    /// The field (`reserved` for room kept unused).
    pub name: &'static str,
    /// Its byte offset in the struct.
    pub offset: usize,
    /// Its size in bytes.
    pub size: usize,
}

/// A struct of the control area and its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Struct {
    /// Its name.
    pub name: &'static str,
    /// `size_of` it.
    pub size: usize,
}

/// The size of the field a projection reaches (its type's size, without a value).
const fn field_size<S, T>(_: fn(&S) -> &T) -> usize {
    size_of::<T>()
}

/// `Field`s of struct `$s`, each from the struct itself.
macro_rules! fields {
    ($s:ident: $($f:ident),+ $(,)?) => {
        [$(Field {
            owner: stringify!($s),
            name: stringify!($f),
            offset: offset_of!($s, $f),
            size: field_size(|s: &$s| &s.$f),
        }),+]
    };
}

/// Concatenates const arrays of fields.
const fn concat<const N: usize>(parts: &[&[Field]]) -> [Field; N] {
    let mut out = [Field {
        owner: "",
        name: "",
        offset: 0,
        size: 0,
    }; N];
    let (mut i, mut n) = (0, 0);
    while i < parts.len() {
        let mut j = 0;
        while j < parts[i].len() {
            out[n] = parts[i][j];
            n += 1;
            j += 1;
        }
        i += 1;
    }
    assert!(n == N, "the table's length");
    out
}

/// The structs of the area, with their sizes.
pub const STRUCTS: [Struct; 11] = {
    macro_rules! structs {
        ($($s:ident),+) => { [$(Struct { name: stringify!($s), size: size_of::<$s>() }),+] };
    }
    structs!(
        RingFds,
        ControlHeader,
        Slot,
        SharedObject,
        ObjectRing,
        SharedEvent,
        EventTable,
        SharedChild,
        ChildRing,
        ProbeNames,
        ControlArea
    )
};

/// Every field of every struct in [`STRUCTS`], in declaration order.
pub const FIELDS: [Field; 87] = concat(&[
    &fields!(RingFds: data, aux),
    &fields!(ControlHeader: magic, version, nslots, data_pages, aux_pages, pid, max_probe_id,
        overwrite, tsc_base_ticks, tsc_base_ns, tsc_span, tsc_rate, next_event_id, closed,
        tsc_pending, no_slot, watched_pid_ns, calls_in_handlers, calls_past_depth, functions_patched,
        functions_refused, slots_wanted, slots_max, rings_unreachable, rings_errno, reserved,
        ring_fds),
    &fields!(Slot: state, tid, event_id, pid, writer_head, open_error, ppid, ptid, fork_time,
        comm, open_time, image_time, pid_ns, reserved),
    &fields!(SharedObject: done, base, start, len, pgoff, path_len, time, pid, path),
    &fields!(ObjectRing: count, taken, lost, reserved, entries),
    &fields!(SharedEvent: leader, attr_len, func_len, found, attr, func),
    &fields!(EventTable: count, reserved, entries),
    &fields!(SharedChild: pid, ppid, ptid, fork_time, pid_ns, seq),
    &fields!(ChildRing: count, reserved, entries),
    &fields!(ProbeNames: used, reserved, bytes),
    &fields!(ControlArea: header, slots, probes, objects, events, slot_event_ids, children,
        probe_names, uevent_names),
]);

/// FNV-1a over `bytes`, from `h`.
const fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    let mut i = 0;
    while i < bytes.len() {
        h ^= bytes[i] as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
        i += 1;
    }
    h
}

/// The hash of a layout: its structs' names and sizes, then each field's struct, name,
/// offset and size (64-bit FNV-1a, the strings followed by a 0 byte so that no two tables
/// run together alike).
pub const fn layout_hash(structs: &[Struct], fields: &[Field]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < structs.len() {
        h = fnv1a(h, structs[i].name.as_bytes());
        h = fnv1a(h, &[0]);
        h = fnv1a(h, &(structs[i].size as u64).to_le_bytes());
        i += 1;
    }
    i = 0;
    while i < fields.len() {
        let f = &fields[i];
        h = fnv1a(h, f.owner.as_bytes());
        h = fnv1a(h, &[0]);
        h = fnv1a(h, f.name.as_bytes());
        h = fnv1a(h, &[0]);
        h = fnv1a(h, &(f.offset as u64).to_le_bytes());
        h = fnv1a(h, &(f.size as u64).to_le_bytes());
        i += 1;
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MAX_CHILDREN, MAX_EVENTS, MAX_OBJECTS, MAX_PROBES, MAX_SLOTS, VERSION};

    fn size_of_struct(name: &str) -> usize {
        STRUCTS
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("{name} is not in STRUCTS"))
            .size
    }

    /// Each struct's fields, as the table lists them, follow each other from offset 0 to the
    /// struct's end with no gap and no overlap: a field missing from the table (or one the
    /// compiler moved or padded) would leave a hole, so the table holds every byte of every
    /// struct and the hash covers the whole layout.
    #[test]
    fn the_table_tiles_every_struct_exactly() {
        for s in STRUCTS {
            let mut end = 0;
            let mut n = 0;
            for f in FIELDS.iter().filter(|f| f.owner == s.name) {
                assert_eq!(f.offset, end, "{}.{} after offset {end}", s.name, f.name);
                end = f.offset + f.size;
                n += 1;
            }
            assert!(n > 0, "{} has no fields in the table", s.name);
            assert_eq!(end, s.size, "{}'s fields end before its size", s.name);
        }
        for f in FIELDS {
            size_of_struct(f.owner);
        }
    }

    /// The table agrees with the structs for every entry: offsets with `offset_of!`, sizes
    /// with the fields' types (named here, apart from the table's macro).
    #[test]
    fn the_table_agrees_with_offset_of_and_size_of() {
        use std::sync::atomic::{AtomicU8, AtomicU64};
        let word = size_of::<AtomicU64>();
        let expect: Vec<(&str, &str, usize, usize)> = vec![
            (
                "ControlHeader",
                "magic",
                offset_of!(ControlHeader, magic),
                word,
            ),
            (
                "ControlHeader",
                "closed",
                offset_of!(ControlHeader, closed),
                word,
            ),
            (
                "ControlHeader",
                "watched_pid_ns",
                offset_of!(ControlHeader, watched_pid_ns),
                word,
            ),
            (
                "ControlHeader",
                "ring_fds",
                offset_of!(ControlHeader, ring_fds),
                size_of::<[RingFds; MAX_SLOTS]>(),
            ),
            ("Slot", "state", offset_of!(Slot, state), word),
            ("Slot", "writer_head", offset_of!(Slot, writer_head), word),
            ("Slot", "comm", offset_of!(Slot, comm), 2 * word),
            ("Slot", "pid_ns", offset_of!(Slot, pid_ns), word),
            (
                "SharedObject",
                "path",
                offset_of!(SharedObject, path),
                size_of::<[AtomicU8; crate::PATH_MAX]>(),
            ),
            ("SharedEvent", "found", offset_of!(SharedEvent, found), word),
            (
                "SharedEvent",
                "attr",
                offset_of!(SharedEvent, attr),
                crate::ATTR_MAX,
            ),
            ("SharedChild", "seq", offset_of!(SharedChild, seq), word),
            (
                "ObjectRing",
                "entries",
                offset_of!(ObjectRing, entries),
                MAX_OBJECTS * size_of::<SharedObject>(),
            ),
            (
                "EventTable",
                "entries",
                offset_of!(EventTable, entries),
                MAX_EVENTS * size_of::<SharedEvent>(),
            ),
            (
                "ChildRing",
                "entries",
                offset_of!(ChildRing, entries),
                MAX_CHILDREN * size_of::<SharedChild>(),
            ),
            (
                "ControlArea",
                "probes",
                offset_of!(ControlArea, probes),
                MAX_PROBES * word,
            ),
            (
                "ControlArea",
                "slots",
                offset_of!(ControlArea, slots),
                MAX_SLOTS * size_of::<Slot>(),
            ),
            (
                "ControlArea",
                "slot_event_ids",
                offset_of!(ControlArea, slot_event_ids),
                MAX_SLOTS * MAX_EVENTS * word,
            ),
        ];
        for (owner, name, offset, size) in expect {
            let f = FIELDS
                .iter()
                .find(|f| f.owner == owner && f.name == name)
                .unwrap_or_else(|| panic!("{owner}.{name} is not in the table"));
            assert_eq!((f.offset, f.size), (offset, size), "{owner}.{name}");
        }
        for s in STRUCTS {
            let listed = FIELDS.iter().filter(|f| f.owner == s.name).count();
            assert!(listed > 0, "{}", s.name);
        }
        assert_eq!(size_of_struct("ControlArea"), size_of::<ControlArea>());
        assert_eq!(size_of_struct("Slot"), size_of::<Slot>());
    }

    /// VERSION is the table's hash, and any change of one field's offset, size or name, or a
    /// struct's size, gives another.
    #[test]
    fn a_changed_layout_changes_the_version() {
        assert_eq!(VERSION, layout_hash(&STRUCTS, &FIELDS));
        let mut seen = std::collections::BTreeSet::from([VERSION]);
        for i in 0..FIELDS.len() {
            let mut moved = FIELDS;
            moved[i].offset += 8;
            assert!(
                seen.insert(layout_hash(&STRUCTS, &moved)),
                "moving {}.{} left the hash as it was",
                FIELDS[i].owner,
                FIELDS[i].name
            );
            let mut grown = FIELDS;
            grown[i].size += 8;
            assert!(seen.insert(layout_hash(&STRUCTS, &grown)));
            let mut renamed = FIELDS;
            renamed[i].name = "renamed";
            assert!(seen.insert(layout_hash(&STRUCTS, &renamed)));
        }
        for i in 0..STRUCTS.len() {
            let mut grown = STRUCTS;
            grown[i].size += crate::area::PAGE;
            assert!(seen.insert(layout_hash(&grown, &FIELDS)));
        }
    }

    /// The full layout, printed (`--nocapture`) and pinned: the section starts and the
    /// sizes the limits give, as the recorder and every runtime built from this crate map
    /// them.
    #[test]
    fn the_layout_table_is_as_pinned() {
        for f in FIELDS {
            println!(
                "{:>14}.{:<15} offset {:>8} size {:>8}",
                f.owner, f.name, f.offset, f.size
            );
        }
        for s in STRUCTS {
            println!("{:>14} size {:>8}", s.name, s.size);
        }
        println!("VERSION {VERSION:#018x}");
        let at = |owner: &str, name: &str| {
            FIELDS
                .iter()
                .find(|f| f.owner == owner && f.name == name)
                .map(|f| f.offset)
                .unwrap()
        };
        // The header's words, one after another from the magic.
        let header = [
            "magic",
            "version",
            "nslots",
            "data_pages",
            "aux_pages",
            "pid",
            "max_probe_id",
            "overwrite",
            "tsc_base_ticks",
            "tsc_base_ns",
            "tsc_span",
            "tsc_rate",
            "next_event_id",
            "closed",
            "tsc_pending",
            "no_slot",
            "watched_pid_ns",
            "calls_in_handlers",
            "calls_past_depth",
            "functions_patched",
            "functions_refused",
            "slots_wanted",
            "slots_max",
            "rings_unreachable",
            "rings_errno",
        ];
        for (k, name) in header.iter().enumerate() {
            assert_eq!(at("ControlHeader", name), k * 8, "{name}");
        }
        let slot = [
            ("state", 0),
            ("tid", 8),
            ("event_id", 16),
            ("pid", 24),
            ("writer_head", 32),
            ("open_error", 40),
            ("ppid", 48),
            ("ptid", 56),
            ("fork_time", 64),
            ("comm", 72),
            ("open_time", 88),
            ("image_time", 96),
            ("pid_ns", 104),
        ];
        for (name, off) in slot {
            assert_eq!(at("Slot", name), off, "{name}");
        }
        assert_eq!(at("SharedObject", "path"), 64);
        assert_eq!(at("SharedEvent", "attr"), 32);
        assert_eq!(at("SharedEvent", "func"), 32 + crate::ATTR_MAX);
        assert_eq!(at("ControlHeader", "ring_fds"), 4096);
        assert_eq!(at("SharedChild", "seq"), 40);
        // The sections: the header's page and 8192 slots' descriptors of 16 bytes, 8192 slots
        // of 128 bytes, 64 Ki probe words,
        // then the objects' page and 512 entries of a page, the events' page and 16 of 1 KiB,
        // 16 ids a slot, the children's page and 1024 entries of 48 bytes, the probe names'
        // page and 256 KiB of names, a page of uevent type names.
        let sections = [
            ("slots", 135_168),
            ("probes", 1_183_744),
            ("objects", 1_708_032),
            ("events", 3_809_280),
            ("slot_event_ids", 3_829_760),
            ("children", 4_878_336),
            ("probe_names", 4_931_584),
            ("uevent_names", 5_197_824),
        ];
        for (name, off) in sections {
            assert_eq!(at("ControlArea", name), off, "{name}");
        }
        assert_eq!(size_of_struct("ControlArea"), 5_201_920);
        assert_eq!(crate::total_len(), 5_201_920);
    }
}

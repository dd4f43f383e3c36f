//! The attr rules that make perf 6.1 accept a perfaux recording
//! (docs/PERF-COMPAT.md): exclude_kernel and exclude_hv, sample_id_all and
//! PERF_SAMPLE_IDENTIFIER in every attr, at most 128 bytes, no bits perf
//! 6.1 calls reserved, and uevents as BPF-output samples.
//!
//! An event is opened with one attr and written to the file with another
//! ([`file_attr`]); records drained from the ring are parsed with the
//! first and written with the second.

use perfaux_abi::attr::{AttrFlags, PerfEventAttr};
use perfaux_abi::consts::*;

/// The sample_id every record carries: perf finds the event by IDENTIFIER
/// (first in a sample, last in a trailer) whatever else the attrs select.
/// IP is not in the trailer but every sample has it: perf script's default
/// fields show symbols and refuse an event whose samples have no address.
pub const SAMPLE_ID_TYPE: u64 =
    PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU;

/// The attr a recording starts from for PMU `type_` and `config`: abi's
/// [`AttrBuilder`](perfaux_abi::attr::AttrBuilder) (disabled: the recorder
/// enables it), user space only, [`SAMPLE_ID_TYPE`] on every record, and
/// `PERF_ATTR_SIZE_VER7`: perf 6.1 reads attrs of at most 128 bytes.
pub fn base_attr(type_: u32, config: u64) -> PerfEventAttr {
    let mut a = PerfEventAttr::builder(type_, config)
        .sample_type(SAMPLE_ID_TYPE)
        .flags(AttrFlags::SAMPLE_ID_ALL | AttrFlags::EXCLUDE_KERNEL | AttrFlags::EXCLUDE_HV)
        .build();
    a.size = PERF_ATTR_SIZE_VER7;
    a
}

/// The attr that stands for the uevent stream: a dummy software event that
/// accepts uevents ([`base_attr`] plus `uevents`).
pub fn uevent_stream_attr() -> PerfEventAttr {
    let mut a = base_attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_DUMMY);
    a.flags |= AttrFlags::UEVENTS;
    a
}

/// The attr written to perf.data for an event opened with `open`.
/// `uevent_stream`: the event carries the uevent stream, whose
/// PERF_RECORD_UEVENTs become BPF-output samples
/// ([`crate::uevent_sample::uevent_sample`]).
pub fn file_attr(open: &PerfEventAttr, uevent_stream: bool) -> PerfEventAttr {
    let mut file = *open;
    // perf 6.1 knows offset 116 as `__reserved_3` and refuses the file
    // ("Reserved bits are set unexpectedly") if it is not zero: aux_action
    // takes effect when the events are opened and is not written.
    file.aux_action = Default::default();
    if uevent_stream {
        file.config = PERF_COUNT_SW_BPF_OUTPUT;
        file.sample_type |= PERF_SAMPLE_RAW;
        file.sample_period = 1;
        file.flags.remove(AttrFlags::UEVENTS);
    }
    file
}

/// PERF_RECORD_FINISHED_ROUND: perf sorts the records before it by time
/// and delivers them before reading on (`ordered_events`); a recorder
/// writes one after each drain pass over all its rings.
pub fn finished_round(e: perfaux_abi::Endianness) -> [u8; 8] {
    perfaux_abi::PerfEventHeader {
        type_: PERF_RECORD_FINISHED_ROUND,
        misc: 0,
        size: 8,
    }
    .to_bytes(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_attr_has_no_reserved_bits_and_uevents_become_bpf_output() {
        let mut open = uevent_stream_attr();
        open.aux_action = perfaux_abi::attr::AuxAction::from_bits_retain(1);
        let f = file_attr(&open, true);
        assert_eq!(f.aux_action, Default::default());
        assert_eq!(f.config, PERF_COUNT_SW_BPF_OUTPUT);
        assert!(!f.flags.contains(AttrFlags::UEVENTS));
        assert_ne!(f.sample_type & PERF_SAMPLE_RAW, 0);
        assert_ne!(f.sample_type & PERF_SAMPLE_IDENTIFIER, 0);
        assert!(
            f.flags
                .contains(AttrFlags::SAMPLE_ID_ALL | AttrFlags::EXCLUDE_KERNEL)
        );
    }

    #[test]
    fn finished_round_is_an_empty_type_3_record() {
        let r = finished_round(perfaux_abi::Endianness::Little);
        assert_eq!(r, [PERF_RECORD_FINISHED_ROUND as u8, 0, 0, 0, 0, 0, 8, 0]);
    }
}

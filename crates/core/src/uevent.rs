//! Userspace events (seed 002, never merged upstream): a process puts its
//! own typed records into the perf stream.
//!
//! `perf_uevent(type, data, flags)` (and the C entry `perfaux_uevent`) is
//! the seed's `prctl(PR_TASK_PERF_UEVENT, type, size, data, flags)`: flags
//! must be 0 (EINVAL, checked first as `sys_prctl` does), at most 4096 bytes
//! (E2BIG), and the data must be readable (EFAULT for a null pointer with a
//! size). Every event with `attr.uevents` that observes the calling thread
//! (its thread, or its CPU for a per-CPU event) and is enabled gets a
//! `PERF_RECORD_UEVENT` (perfaux number `consts::ext::PERF_RECORD_UEVENT`):
//!
//! ```text
//! struct { header; u32 type; u32 size; u8 data[size]; u8 pad[-size & 7]; sample_id; }
//! ```
//!
//! A record that finds no room (the data area full, or its output paused) is
//! counted in the buffer's `lost`, as the seed's `perf_uevent_output` leaves
//! it to `perf_output_begin`, and the call says so with ENOSPC, the error
//! `perf_output_begin` returns there: the seed's call returned 0 whatever
//! happened to the record, so a caller could not tell a recorded event from a
//! lost one. A call that returns 0 put its record into every `attr.uevents`
//! event that observes the thread.
//!
//! PMUs that react to uevents (the `uevent` counting PMU, the `uevent_aux`
//! AUX PMU) get them through [`crate::pmu::Pmu::uevent`].

use std::ffi::{c_int, c_void};

use perfaux_abi::attr::AttrFlags;
use perfaux_abi::consts::ext;
use perfaux_abi::errno;
use perfaux_abi::raw::RawData;
use perfaux_abi::records::UeventRecord;

use crate::error::{Error, Result, einval};
use crate::event::EventState;
use crate::output::write_record;
use crate::sample_id::SampleId;
use crate::thread;

/// Emits a uevent of `type_` with payload `data` from the calling thread.
pub fn perf_uevent(type_: u32, data: &[u8], flags: u64) -> Result<()> {
    if flags != 0 {
        return Err(einval("perf_uevent: flags must be 0"));
    }
    if data.len() > ext::UEVENT_MAX_SIZE as usize {
        return Err(Error::new(
            errno::E2BIG,
            "perf_uevent: more than 4096 bytes",
        ));
    }
    if deliver(type_, data) {
        Ok(())
    } else {
        Err(Error::new(
            errno::ENOSPC,
            "perf_uevent: no room for the record in the buffer (counted lost)",
        ))
    }
}

/// The C entry point: returns 0, or -1 with `errno` set.
///
/// # Safety
/// `data` must be null or point to `size` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_uevent(
    type_: u32,
    size: u32,
    data: *const c_void,
    flags: u64,
) -> c_int {
    let r = if flags != 0 {
        Err(errno::EINVAL)
    } else if size > ext::UEVENT_MAX_SIZE {
        Err(errno::E2BIG)
    } else if data.is_null() && size > 0 {
        Err(errno::EFAULT)
    } else {
        let bytes: &[u8] = if size == 0 {
            &[]
        } else {
            // SAFETY: non-null and, by the caller's contract, `size`
            // readable bytes; only read during this call.
            unsafe { std::slice::from_raw_parts(data.cast::<u8>(), size as usize) }
        };
        if deliver(type_, bytes) {
            Ok(())
        } else {
            Err(errno::ENOSPC)
        }
    };
    match r {
        Ok(()) => 0,
        Err(e) => {
            crate::remote::set_errno(e);
            -1
        }
    }
}

/// `perf_event_aux(perf_uevent_output, ...)`: every observing event.
/// Whether every `attr.uevents` event among them took its record.
#[inline]
fn deliver(type_: u32, data: &[u8]) -> bool {
    let mut written = true;
    let tid = thread::gettid();
    let mut cpu = -2;
    thread::for_each_observing(|ev| {
        if ev.state() < EventState::Inactive {
            return;
        }
        if ev.cpu() != -1 {
            if cpu == -2 {
                cpu = thread::current_cpu();
            }
            if !ev.observes(tid, cpu) {
                return;
            }
        }
        if ev.flag(AttrFlags::UEVENTS) {
            written &= perf_uevent_output(ev, type_, data);
        }
        ev.pmu.uevent(ev, type_, data);
    });
    written
}

/// `perf_uevent_output`: one PERF_RECORD_UEVENT into `event`'s buffer
/// (perfaux-abi's `UeventRecord` encoder). Whether it was written.
#[inline]
fn perf_uevent_output(event: &crate::event::Event, type_: u32, data: &[u8]) -> bool {
    let id = SampleId::now(event);
    let rec = UeventRecord {
        misc: 0,
        type_,
        data: RawData::new(data, &[]),
        sample_id: id.0,
    };
    write_record(event, &rec, &id)
}

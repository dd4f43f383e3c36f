//! Helpers shared by the scenario tests: attrs, a trace leader with its
//! mappings, and record parsing.
#![allow(dead_code)]

use perfaux_abi::PerfEventHeader;
use perfaux_abi::attr::{AttrBuilder, AttrFlags, PerfEventAttr};
use perfaux_abi::consts::*;
use perfaux_core::{EventFd, Mmap, Prot, Target, page_size, perf_event_open_attr};
use perfaux_pmus::SWTRACE_TYPE;

pub fn attr(type_: u32, config: u64) -> PerfEventAttr {
    AttrBuilder::new(type_, config).build()
}

pub fn sampling(type_: u32, config: u64, period: u64) -> PerfEventAttr {
    AttrBuilder::new(type_, config)
        .sample_period(period)
        .build()
}

/// A trace event on the calling thread with a data area of 1 + 16 pages
/// and an AUX area of `aux_pages`, read-only (overwrite) or not.
pub struct Traced {
    pub ev: EventFd,
    pub data: Mmap,
    pub aux: Mmap,
}

pub fn trace_event(a: &PerfEventAttr, aux_pages: usize, overwrite: bool) -> Traced {
    let ev = perf_event_open_attr(a, Target::current(), -1, -1, 0).unwrap();
    map_trace(ev, aux_pages, overwrite)
}

pub fn map_trace(ev: EventFd, aux_pages: usize, overwrite: bool) -> Traced {
    map_trace_sized(ev, 16, aux_pages, overwrite)
}

pub fn map_trace_sized(
    ev: EventFd,
    data_pages: usize,
    aux_pages: usize,
    overwrite: bool,
) -> Traced {
    let data = ev.mmap(0, 1 + data_pages, Prot::READ_WRITE).unwrap();
    let off = (1 + data_pages) as u64 * page_size() as u64;
    data.set_aux_area(off, (aux_pages * page_size()) as u64)
        .unwrap();
    let prot = if overwrite {
        Prot::READ_ONLY
    } else {
        Prot::READ_WRITE
    };
    let aux = ev.mmap(1 + data_pages as u64, aux_pages, prot).unwrap();
    Traced { ev, data, aux }
}

pub fn trace_attr() -> PerfEventAttr {
    let mut a = attr(SWTRACE_TYPE, 0);
    a.flags |= AttrFlags::SAMPLE_ID_ALL;
    a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_IDENTIFIER;
    a
}

/// Every record published in the data area, as (header, whole record).
pub fn records(m: &mut Mmap) -> Vec<(PerfEventHeader, Vec<u8>)> {
    let r = m.data_reader().unwrap();
    r.read_records()
        .unwrap()
        .map(|r| {
            let r = r.unwrap();
            (r.header, r.bytes.to_vec())
        })
        .collect()
}

pub fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(b[at..at + 8].try_into().unwrap())
}

pub fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().unwrap())
}

/// The probe names of the ENTER events in a decoded window, in order.
pub fn entered(bytes: &[u8]) -> Vec<String> {
    let table = perfaux_swtrace::probe_table();
    perfaux_swtrace::decode(bytes)
        .iter()
        .filter_map(|e| match e {
            perfaux_swtrace::Event::Enter { id, .. } => table.get(*id).map(|p| p.name.clone()),
            _ => None,
        })
        .collect()
}

/// Writes one byte into each of `n` fresh anonymous pages.
pub fn touch_pages(n: usize) {
    let ps = perfaux_core::page_size();
    // SAFETY: a fresh private anonymous mapping, unmapped below.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            n * ps,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    for i in 0..n {
        // SAFETY: page `i` is inside the mapping of `n` pages.
        let byte = unsafe { p.cast::<u8>().add(i * ps) };
        // SAFETY: a writable byte of the mapping.
        unsafe { std::ptr::write_volatile(byte, 1) };
    }
    // SAFETY: the mapping made above.
    unsafe { libc::munmap(p, n * ps) };
}

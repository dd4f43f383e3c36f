//! The consumer against the real kernel: a software event's perf mmap,
//! drained and parsed (perf_mmap()'s rules; perf_event_open(2)).
//! Skipped, with the reason printed, where perf_event_open is not allowed.

use std::os::fd::{AsFd, FromRawFd, OwnedFd};

use perfaux_abi::attr::{AttrFlags, PerfEventAttr};
use perfaux_abi::consts::{
    PERF_COUNT_SW_PAGE_FAULTS, PERF_EVENT_IOC_DISABLE, PERF_EVENT_IOC_ENABLE,
    PERF_EVENT_IOC_PAUSE_OUTPUT, PERF_FLAG_FD_CLOEXEC, PERF_RECORD_MMAP, PERF_RECORD_SAMPLE,
    PERF_SAMPLE_TID, PERF_TYPE_SOFTWARE,
};
use perfaux_abi::{Endianness, PerfEventHeader};
use perfaux_ring::{PerfMmap, RingMemory};

fn perf_event_open(attr: &PerfEventAttr) -> Result<OwnedFd, std::io::Error> {
    let bytes = attr.to_bytes(perfaux_abi::consts::PERF_ATTR_SIZE_VER5, Endianness::NATIVE);
    // SAFETY: bytes is a valid perf_event_attr of the size it states, alive
    // for the call; the other arguments are plain integers.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            bytes.as_ptr(),
            0 as libc::pid_t,
            -1 as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new fd the kernel just returned, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

fn ioctl(fd: &OwnedFd, req: u64, arg: libc::c_ulong) {
    use std::os::fd::AsRawFd;
    // SAFETY: a perf event fd and a perf ioctl taking an integer argument.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), req as _, arg) };
    assert_eq!(
        r,
        0,
        "perf ioctl {req:#x}: {}",
        std::io::Error::last_os_error()
    );
}

/// Page faults on this thread: touch fresh anonymous pages, and map a file
/// (a PERF_RECORD_MMAP).
fn generate_activity(pages: usize) {
    let page = perfaux_ring::layout::page_size();
    let mut anon = memmap2::MmapMut::map_anon(pages * page).unwrap();
    for i in 0..pages {
        anon[i * page] = i as u8;
    }
    std::hint::black_box(&anon);
    let f = std::fs::File::open(std::env::current_exe().unwrap()).unwrap();
    let mut m = memmap2::MmapOptions::new();
    m.len(4096);
    // SAFETY: a read-only private map of our own executable, dropped at once.
    let map = unsafe { m.map_exec(&f) };
    drop(map);
}

fn attr(write_backward: bool) -> PerfEventAttr {
    let mut flags = AttrFlags::DISABLED
        | AttrFlags::MMAP
        | AttrFlags::COMM
        | AttrFlags::TASK
        | AttrFlags::EXCLUDE_KERNEL;
    if write_backward {
        flags |= AttrFlags::WRITE_BACKWARD;
    }
    PerfEventAttr {
        type_: PERF_TYPE_SOFTWARE,
        config: PERF_COUNT_SW_PAGE_FAULTS,
        sample_period: 1,
        sample_type: PERF_SAMPLE_TID,
        flags,
        ..PerfEventAttr::default()
    }
}

fn open_or_skip(attr: &PerfEventAttr) -> Option<OwnedFd> {
    match perf_event_open(attr) {
        Ok(fd) => Some(fd),
        Err(e) => {
            println!("skipped: perf_event_open is not permitted here: {e}");
            None
        }
    }
}

fn pid_tid(body: &[u8]) -> (u32, u32) {
    (
        u32::from_ne_bytes(body[0..4].try_into().unwrap()),
        u32::from_ne_bytes(body[4..8].try_into().unwrap()),
    )
}

#[test]
fn the_kernel_mmap_consumer_drains_page_fault_samples() {
    let Some(fd) = open_or_skip(&attr(false)) else {
        return;
    };
    let mem = RingMemory::kernel(fd.as_fd(), 8, true, None).unwrap();
    let layout = *mem.layout();
    let mut md = PerfMmap::new(std::sync::Arc::new(mem));
    ioctl(&fd, PERF_EVENT_IOC_ENABLE, 0);
    generate_activity(64);
    ioctl(&fd, PERF_EVENT_IOC_DISABLE, 0);

    let me = (
        std::process::id(),
        rustix::thread::gettid().as_raw_nonzero().get() as u32,
    );
    let head = md.data_head();
    assert!(
        head > 0 && head <= layout.data_size as u64,
        "data_head {head}"
    );
    let mut samples = 0;
    let mut mmaps = 0;
    let mut end = 0;
    for r in md.read_records().unwrap() {
        let r = r.unwrap();
        assert_eq!(r.position, end, "records are contiguous");
        end += u64::from(r.header.size);
        match r.header.type_ {
            // sample_type TID: { u32 pid, tid }.
            PERF_RECORD_SAMPLE => {
                assert_eq!(r.header.size, 16);
                assert_eq!(pid_tid(r.body()), me);
                samples += 1;
            }
            PERF_RECORD_MMAP => mmaps += 1,
            t => assert!((1..=22).contains(&t), "record type {t}"),
        }
    }
    assert_eq!(end, head);
    // 64 fresh pages were touched: at least that many faults.
    assert!(samples >= 64, "{samples} page fault samples");
    assert!(mmaps >= 1, "no PERF_RECORD_MMAP for the mapped executable");
    // The tail was handed back to the kernel.
    let tail = md
        .memory()
        .user_word(perfaux_abi::mmap_page::offsets::DATA_TAIL);
    assert_eq!(tail.load(std::sync::atomic::Ordering::Relaxed), head);
    assert!(md.read_records().unwrap().next().is_none());
}

#[test]
fn a_kernel_write_backward_ring_reads_as_an_overwrite_snapshot() {
    // write_backward + read-only mapping, read after PAUSE_OUTPUT, as
    // `perf record --overwrite` does.
    let Some(fd) = open_or_skip(&attr(true)) else {
        return;
    };
    let mem = RingMemory::kernel(fd.as_fd(), 1, false, None).unwrap();
    let size = mem.layout().data_size as u64;
    let mut md = PerfMmap::new(std::sync::Arc::new(mem));
    ioctl(&fd, PERF_EVENT_IOC_ENABLE, 0);
    // Enough faults to wrap a one-page ring several times (16-byte samples).
    generate_activity(2048);
    ioctl(&fd, PERF_EVENT_IOC_PAUSE_OUTPUT, 1);
    let head = md.data_head();
    // The kernel publishes a backward ring's rb->head as it is: it moves
    // down from 0, so -data_head is the bytes written.
    assert!(
        head.wrapping_neg() > size,
        "the ring wrapped: data_head {head:#x}"
    );
    let snap = md.read_overwrite(true).unwrap();
    assert!(snap.wrapped);
    let me = std::process::id();
    let mut n = 0;
    let mut bytes = 0;
    for r in snap.records {
        let r = r.unwrap();
        let h: PerfEventHeader = r.header;
        bytes += u64::from(h.size);
        if h.type_ == PERF_RECORD_SAMPLE {
            assert_eq!(pid_tid(r.body()).0, me);
            n += 1;
        }
    }
    assert!(
        n > 0 && bytes <= size && bytes > size - 64,
        "{n} samples in {bytes} bytes"
    );
    ioctl(&fd, PERF_EVENT_IOC_PAUSE_OUTPUT, 0);
}

#[test]
fn an_aux_mapping_of_a_pmu_without_aux_is_a_clean_error() {
    // rb_alloc_aux(): a PMU without setup_aux gives -EOPNOTSUPP
    // (kernel/events/ring_buffer.c); the consumer reports it, after writing aux_offset/aux_size
    // into the user page as perf does.
    let Some(fd) = open_or_skip(&attr(false)) else {
        return;
    };
    let aux = perfaux_ring::KernelAux {
        pages: 4,
        writable: true,
    };
    match RingMemory::kernel(fd.as_fd(), 2, true, Some(aux)) {
        Err(perfaux_ring::RingError::Os { what, errno }) => {
            assert_eq!(what, "mmap of the perf event AUX area");
            assert_eq!(errno, perfaux_abi::errno::EOPNOTSUPP);
        }
        other => panic!("expected EOPNOTSUPP, got {other:?}"),
    }
    // Overwrite AUX needs the data area writable to set aux_offset/size.
    let aux = perfaux_ring::KernelAux {
        pages: 4,
        writable: false,
    };
    assert!(matches!(
        RingMemory::kernel(fd.as_fd(), 2, false, Some(aux)),
        Err(perfaux_ring::RingError::ReadOnly { .. })
    ));
}

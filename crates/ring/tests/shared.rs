//! Two processes sharing one perf buffer through a sealed memfd: a writer
//! process and a reader process that maps the same file and validates the
//! layout it finds in the user page.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use perfaux_abi::mmap_page::offsets;
use perfaux_abi::{Endianness, PerfEventHeader};
use perfaux_ring::{
    DataConfig, LostInfo, PerfBuffer, PerfMmap, RingError, RingLayout, RingMemory, Wakeup,
};

const RECORDS: u64 = 20_000;

fn dup(fd: std::os::fd::BorrowedFd<'_>) -> OwnedFd {
    fd.try_clone_to_owned().unwrap()
}

/// The child: writes RECORDS records of 24..=80 bytes, waiting for space
/// rather than dropping. Allocates nothing (fork of a threaded process).
fn writer_child(rb: &PerfBuffer, parent: libc::pid_t) -> ! {
    let mut buf = [0u8; 80];
    for seq in 0..RECORDS {
        let size = 24 + 8 * (seq % 8) as usize;
        let h = PerfEventHeader::new(perfaux_abi::consts::PERF_RECORD_SAMPLE, 0, size as u16);
        buf[..8].copy_from_slice(&h.to_bytes(Endianness::NATIVE));
        buf[8..16].copy_from_slice(&seq.to_ne_bytes());
        buf[16..size].fill(seq as u8);
        while rb.data_space() < size as u64 {
            // SAFETY: getppid and _exit are async-signal-safe; a reparented
            // child (the reader died) stops instead of waiting forever.
            if unsafe { libc::getppid() } != parent {
                // SAFETY: ends only this child, without running destructors.
                unsafe { libc::_exit(3) };
            }
            std::thread::yield_now();
        }
        if rb
            .output_record(&buf[..size], &LostInfo::default())
            .is_err()
        {
            // SAFETY: _exit is async-signal-safe and ends only this child.
            unsafe { libc::_exit(2) };
        }
    }
    // SAFETY: as above.
    unsafe { libc::_exit(0) }
}

/// Kills the writer child if the reader's checks fail.
struct KillOnDrop(libc::pid_t);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // SAFETY: signals and reaps our own child, by its pid.
        unsafe {
            libc::kill(self.0, libc::SIGKILL);
        }
        // SAFETY: as above.
        unsafe {
            libc::waitpid(self.0, std::ptr::null_mut(), 0);
        }
    }
}

#[test]
fn a_writer_process_and_a_reader_process_lose_nothing() {
    let layout = RingLayout::new(2, 0).unwrap();
    let mem = Arc::new(RingMemory::shared(layout).unwrap());
    // Watermark wakeups reach the reader process through an eventfd.
    let wakeup = Arc::new(Wakeup::with_eventfd().unwrap());
    let config = DataConfig {
        wakeup_watermark: 2048,
        ..DataConfig::default()
    };
    let rb = PerfBuffer::with_wakeup(mem.clone(), config, wakeup.clone()).unwrap();
    let fd = dup(mem.shared_fd().unwrap());
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the child runs only writer_child, which allocates nothing and
    // ends with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        writer_child(&rb, parent);
    }
    let child = KillOnDrop(pid);
    drop(rb);
    // The reader maps the memfd afresh and trusts only what it validates.
    let reader = Arc::new(RingMemory::open_shared(fd).unwrap());
    assert_eq!(*reader.layout(), layout);
    let mut md = PerfMmap::new(reader);
    let mut next = 0u64;
    let mut wakeups = 0u64;
    let deadline = Instant::now() + Duration::from_secs(30);
    let efd = wakeup.eventfd().unwrap();
    while next < RECORDS {
        assert!(Instant::now() < deadline, "stuck at record {next}");
        // Sleep until the writer crosses a watermark (or 10 ms pass: the
        // last records may not cross one).
        let mut pfd = libc::pollfd {
            fd: efd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, for the duration of the call.
        if unsafe { libc::poll(&mut pfd, 1, 10) } == 1 {
            let mut count = [0u8; 8];
            if rustix::io::read(efd, &mut count).is_ok() {
                wakeups += u64::from_ne_bytes(count);
            }
        }
        for r in md.read_records().unwrap() {
            let r = r.unwrap();
            let seq = u64::from_ne_bytes(r.body()[..8].try_into().unwrap());
            assert_eq!(seq, next, "records arrive once and in order");
            assert_eq!(usize::from(r.header.size), 24 + 8 * (seq % 8) as usize);
            assert!(r.body()[8..].iter().all(|&b| b == seq as u8));
            next += 1;
        }
    }
    let mut status = 0;
    // SAFETY: waits for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    std::mem::forget(child);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child status {status:#x}"
    );
    assert!(md.read_records().unwrap().next().is_none());
    // ~20000 records of 24..80 bytes cross a 2 KiB watermark hundreds of times.
    assert!(wakeups > 0, "no wakeup reached the reader");
}

#[test]
fn a_reader_refuses_layouts_that_do_not_fit_the_memfd() {
    let layout = RingLayout::new(2, 4).unwrap();
    let mem = RingMemory::shared(layout).unwrap();
    let open = |mem: &RingMemory| RingMemory::open_shared(dup(mem.shared_fd().unwrap()));
    assert_eq!(*open(&mem).unwrap().layout(), layout);
    let o = Ordering::Relaxed;
    // data_size not a power of two.
    mem.user_word(offsets::DATA_SIZE).store(3 * 4096, o);
    assert!(matches!(
        open(&mem),
        Err(RingError::Layout {
            what: "data_size",
            ..
        })
    ));
    mem.user_word(offsets::DATA_SIZE).store(2 * 4096, o);
    // An AUX area past the end of the file.
    mem.user_word(offsets::AUX_OFFSET).store(64 * 4096, o);
    assert!(matches!(open(&mem), Err(RingError::UserPage { .. })));
    // An AUX area overlapping the data area.
    mem.user_word(offsets::AUX_OFFSET).store(4096, o);
    assert!(matches!(
        open(&mem),
        Err(RingError::Layout {
            what: "aux_offset",
            ..
        })
    ));
}

#[test]
fn a_reader_refuses_a_memfd_whose_size_is_not_sealed() {
    let fd = rustix::fs::memfd_create("unsealed", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
    rustix::fs::ftruncate(&fd, 3 * 4096).unwrap();
    let err = RingMemory::open_shared(fd).unwrap_err();
    assert!(matches!(err, RingError::UserPage { field, .. } if field.contains("F_SEAL_SHRINK")));
}

/// A data-only ring whose user wrote an AUX area's place into its page (as perfaux-core's
/// `set_aux_area` does) opens again as created once its creator restores the layout; the
/// heads are kept, so the next user's ring goes on from them.
#[test]
fn a_restored_layout_opens_again_as_created() {
    let mem = RingMemory::shared(RingLayout::new(2, 0).unwrap()).unwrap();
    let fd = || dup(mem.shared_fd().unwrap());
    let user = RingMemory::open_shared(fd()).unwrap();
    let page = perfaux_ring::layout::page_size() as u64;
    user.user_word(offsets::AUX_OFFSET)
        .store(3 * page, Ordering::Relaxed);
    user.user_word(offsets::AUX_SIZE)
        .store(4 * page, Ordering::Relaxed);
    user.user_word(offsets::DATA_HEAD)
        .store(4096, Ordering::Relaxed);
    assert!(RingMemory::open_shared(fd()).is_err());
    mem.restore_layout_fields();
    let again = RingMemory::open_shared(fd()).unwrap();
    assert_eq!(again.layout(), mem.layout());
    assert_eq!(
        again.user_word(offsets::DATA_HEAD).load(Ordering::Relaxed),
        4096
    );
}

/// A memfd handed out before its ring is made (`RingMemory::memfd`, then `shared_in`): the
/// ring starts empty whatever a holder wrote into the file before, and a reader opens it as
/// one `shared` made.
#[test]
fn a_ring_made_in_a_memfd_handed_out_before_starts_empty() {
    let fd = RingMemory::memfd().unwrap();
    let holder = dup(fd.as_fd());
    // What a holder may do with it meanwhile: size it and write over its first page.
    rustix::fs::ftruncate(&holder, 8 * 4096).unwrap();
    std::os::unix::fs::FileExt::write_all_at(
        &std::fs::File::from(dup(holder.as_fd())),
        &[0xffu8; 4096],
        0,
    )
    .unwrap();
    let layout = RingLayout::new(2, 4).unwrap();
    let mem = RingMemory::shared_in(fd, layout).unwrap();
    let st = rustix::fs::fstat(mem.shared_fd().unwrap()).unwrap();
    assert_eq!(st.st_size as usize, layout.total_len());
    for off in [
        offsets::DATA_HEAD,
        offsets::DATA_TAIL,
        offsets::AUX_HEAD,
        offsets::AUX_TAIL,
    ] {
        assert_eq!(mem.user_word(off).load(Ordering::Relaxed), 0, "word {off}");
    }
    let reader = RingMemory::open_shared(dup(mem.shared_fd().unwrap())).unwrap();
    assert_eq!(*reader.layout(), layout);
    // Sealed as `shared` seals: the holder can no longer change its size.
    assert!(rustix::fs::ftruncate(&holder, 4096).is_err());
}

//! A signal handler interrupting a writer and writing into the same ring:
//! the user-space counterpart of an NMI nesting inside `perf_output_begin`
//! .. `perf_output_end` (kernel/events/ring_buffer.c's `rb->nest`). Both
//! the SMP ring and the per-thread ring (`local_t` operations) must deliver
//! every record of both writers intact, in order, or count it as lost.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use perfaux_abi::consts::{PERF_RECORD_LOST, PERF_RECORD_SAMPLE};
use perfaux_abi::{Endianness, PerfEventHeader};
use perfaux_ring::{DataConfig, LostInfo, PerfBuffer, PerfMmap, RingLayout, RingMemory, Wakeup};

/// The rings the handler writes into, one per test.
static RINGS: [OnceLock<PerfBuffer>; 2] = [OnceLock::new(), OnceLock::new()];
/// Which ring the handler of the running writer thread uses.
static ACTIVE: AtomicU64 = AtomicU64::new(u64::MAX);
static HANDLER_SEQ: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];
static HANDLER_OK: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

/// Builds record `seq` of `writer` in `buf` (no allocation: the handler uses it).
fn fill(buf: &mut [u8], writer: u64, seq: u64) {
    let h = PerfEventHeader::new(PERF_RECORD_SAMPLE, 0, buf.len() as u16);
    buf[..8].copy_from_slice(&h.to_bytes(Endianness::NATIVE));
    buf[8..16].copy_from_slice(&writer.to_ne_bytes());
    buf[16..24].copy_from_slice(&seq.to_ne_bytes());
    for (i, b) in buf.iter_mut().enumerate().skip(24) {
        *b = (seq as u8) ^ (i as u8);
    }
}

extern "C" fn handler(_sig: libc::c_int) {
    let which = ACTIVE.load(Ordering::Relaxed);
    let Some(rb) = RINGS.get(which as usize).and_then(OnceLock::get) else {
        return;
    };
    let seq = HANDLER_SEQ[which as usize].fetch_add(1, Ordering::Relaxed);
    let mut buf = [0u8; 48];
    let len = 24 + 8 * (seq % 4) as usize;
    fill(&mut buf[..len], 1, seq);
    if rb
        .output_record(
            &buf[..len],
            &LostInfo {
                id: 1,
                sample_id: &[],
            },
        )
        .is_ok()
    {
        HANDLER_OK[which as usize].fetch_add(1, Ordering::Relaxed);
    }
}

fn run(which: usize, per_thread: bool) {
    let mem = Arc::new(RingMemory::heap(RingLayout::new(4, 0).unwrap()).unwrap());
    let wakeup = Arc::new(Wakeup::new());
    let rb = if per_thread {
        // SAFETY: only the writer thread below and its signal handler write.
        unsafe { PerfBuffer::new_per_thread(mem.clone(), DataConfig::default(), wakeup).unwrap() }
    } else {
        PerfBuffer::with_wakeup(mem.clone(), DataConfig::default(), wakeup).unwrap()
    };
    assert!(RINGS[which].set(rb).is_ok());
    let rb = RINGS[which].get().unwrap();
    // SAFETY: sigaction is plain data; all-zero is a valid (empty) value.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = handler as *const () as usize;
    sa.sa_flags = libc::SA_RESTART;
    // SAFETY: installs a handler that only does async-signal-safe work
    // (atomics and the ring's lock-free, allocation-free producer).
    let r = unsafe { libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()) };
    assert_eq!(r, 0);
    ACTIVE.store(which as u64, Ordering::SeqCst);
    const WRITES: u64 = 20_000;
    const HANDLER_WRITES: u64 = 200;
    let done = Arc::new(AtomicBool::new(false));
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let writer = {
        let done = done.clone();
        std::thread::spawn(move || {
            // SAFETY: pthread_self has no preconditions.
            tid_tx.send(unsafe { libc::pthread_self() }).unwrap();
            let mut ok = 0u64;
            let mut buf = [0u8; 64];
            let mut seq = 0u64;
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            // At least WRITES records, and on until the handler has nested
            // often enough.
            while seq < WRITES
                || (HANDLER_SEQ[which].load(Ordering::Relaxed) < HANDLER_WRITES
                    && std::time::Instant::now() < deadline)
            {
                let len = 24 + 8 * (seq % 6) as usize;
                fill(&mut buf[..len], 0, seq);
                if rb.output_record(&buf[..len], &LostInfo::default()).is_ok() {
                    ok += 1;
                }
                seq += 1;
            }
            done.store(true, Ordering::SeqCst);
            (seq, ok)
        })
    };
    let tid = tid_rx.recv().unwrap();
    let signaller = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut sent = 0u64;
            while !done.load(Ordering::SeqCst) {
                // SAFETY: signals a thread that is alive until `done`.
                unsafe { libc::pthread_kill(tid, libc::SIGUSR1) };
                sent += 1;
                std::thread::yield_now();
            }
            sent
        })
    };
    let mut md = PerfMmap::new(mem);
    let mut next = [0u64; 2];
    let mut seen = [0u64; 2];
    let mut lost = 0u64;
    let mut drain = |md: &mut PerfMmap| {
        for r in md.read_records().unwrap() {
            let r = r.unwrap();
            if r.header.type_ == PERF_RECORD_LOST {
                lost += u64::from_ne_bytes(r.bytes[16..24].try_into().unwrap());
                continue;
            }
            let w = u64::from_ne_bytes(r.bytes[8..16].try_into().unwrap()) as usize;
            let seq = u64::from_ne_bytes(r.bytes[16..24].try_into().unwrap());
            for (i, &b) in r.bytes.iter().enumerate().skip(24) {
                assert_eq!(
                    b,
                    (seq as u8) ^ (i as u8),
                    "writer {w} record {seq} byte {i} torn"
                );
            }
            assert!(seq >= next[w], "writer {w}: {seq} after {}", next[w]);
            next[w] = seq + 1;
            seen[w] += 1;
        }
    };
    while !done.load(Ordering::SeqCst) {
        drain(&mut md);
    }
    let (writes, ok) = writer.join().unwrap();
    let sent = signaller.join().unwrap();
    ACTIVE.store(u64::MAX, Ordering::SeqCst);
    drain(&mut md);
    if rb.lost() != 0 {
        let mut buf = [0u8; 24];
        fill(&mut buf, 0, writes);
        rb.output_record(&buf, &LostInfo::default()).unwrap();
        drain(&mut md);
        seen[0] -= 1;
    }
    let handler_writes = HANDLER_SEQ[which].load(Ordering::SeqCst);
    let handler_ok = HANDLER_OK[which].load(Ordering::SeqCst);
    assert!(
        handler_writes >= HANDLER_WRITES,
        "the handler ran {handler_writes} times ({sent} signals sent)"
    );
    assert_eq!(seen, [ok, handler_ok]);
    assert_eq!(seen[0] + seen[1] + lost, writes + handler_writes);
}

/// One test for both rings: the handler is process-wide.
#[test]
fn a_signal_handler_nesting_in_a_writer_loses_and_tears_nothing() {
    run(0, false);
    run(1, true);
}

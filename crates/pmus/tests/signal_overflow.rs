//! The overflow path in a signal handler (our NMI): a task-clock sampler
//! fires while the thread writes trace packets and uevent records into the
//! same rings. Every record stays whole, every AUX sample decodes.

mod common;

use std::time::{Duration, Instant};

use common::*;
use perfaux_abi::attr::AttrFlags;
use perfaux_abi::consts::*;
use perfaux_core::{Target, perf_event_open_attr, perf_uevent};

fn sig_a(i: u64) -> u64 {
    let _g = perfaux_swtrace::probe!("sig_a");
    sig_b(i) + 1
}
fn sig_b(i: u64) -> u64 {
    let _g = perfaux_swtrace::probe!("sig_b");
    i ^ 0x55
}

#[test]
fn task_clock_samples_taken_in_a_signal_handler_are_whole() {
    perfaux_pmus::register();
    let mut t = trace_event(&trace_attr(), 16, true);
    let mut clk = sampling(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, 50_000);
    clk.sample_type = PERF_SAMPLE_IP
        | PERF_SAMPLE_TID
        | PERF_SAMPLE_PERIOD
        | PERF_SAMPLE_CALLCHAIN
        | PERF_SAMPLE_AUX;
    clk.aux_sample_size = 512;
    let me = Target::current();
    let c = perf_event_open_attr(&clk, me, -1, t.ev.as_raw(), PERF_FLAG_FD_OUTPUT).unwrap();
    let mut ue = attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_DUMMY);
    ue.flags |= AttrFlags::UEVENTS;
    let u = perf_event_open_attr(
        &ue,
        me,
        -1,
        t.ev.as_raw(),
        PERF_FLAG_FD_OUTPUT | PERF_FLAG_FD_NO_GROUP,
    )
    .unwrap();
    t.ev.enable(PERF_IOC_FLAG_GROUP).unwrap();
    u.enable(0).unwrap();
    let start = Instant::now();
    let mut acc = 0u64;
    let mut emitted = 0u64;
    let mut refused = 0u64;
    let mut samples = Vec::new();
    while start.elapsed() < Duration::from_millis(150) {
        for i in 0..200 {
            acc = acc.wrapping_add(sig_a(i));
        }
        match perf_uevent(1, &acc.to_ne_bytes(), 0) {
            Ok(()) => {}
            Err(e) if e.errno == perfaux_abi::errno::ENOSPC => refused += 1,
            Err(e) => panic!("perf_uevent: {e}"),
        }
        emitted += 1;
        // Drain as we go so the data area does not fill.
        for (h, b) in records(&mut t.data) {
            samples.push((h, b));
        }
    }
    t.ev.disable(PERF_IOC_FLAG_GROUP).unwrap();
    u.disable(0).unwrap();
    samples.extend(records(&mut t.data));

    let ns: Vec<_> = samples
        .iter()
        .filter(|(h, _)| h.type_ == PERF_RECORD_SAMPLE)
        .collect();
    assert!(
        ns.len() >= 3,
        "the timer fired ({} samples, count {}, counters {:?}, state {:?})",
        ns.len(),
        c.event().count(),
        c.event().counters(),
        c.event().state()
    );
    let cc_ctx = PERF_CONTEXT_USER;
    for (_, b) in &ns {
        // ip, pid/tid, period, callchain {nr, ctx, ips}, aux {size, data}
        assert_eq!(u32_at(b, 20) as i32, perfaux_core::gettid());
        // The CPU time since the previous sample, at least the period.
        let period = u64_at(b, 24);
        assert!(period >= 50_000, "period {period}");
        let nr = u64_at(b, 32) as usize;
        assert!(nr >= 1);
        assert_eq!(u64_at(b, 40), cc_ctx);
        let at = 40 + nr * 8;
        let size = u64_at(b, at) as usize;
        assert_eq!(size, 512);
        for name in entered(&b[at + 8..at + 8 + size]) {
            assert!(name == "sig_a" || name == "sig_b", "{name}");
        }
        // perfaux-abi parses the record to the same fields.
        let info = perfaux_abi::parse_info::RecordParseInfo::new(c.event().attr());
        let body = perfaux_abi::raw::RawData::new(&b[8..], &[]);
        let h = perfaux_abi::PerfEventHeader::parse(
            b[..8].try_into().unwrap(),
            perfaux_abi::Endianness::NATIVE,
        );
        let r = perfaux_abi::sample::SampleRecord::parse(
            h.misc,
            body,
            &info,
            perfaux_abi::Endianness::NATIVE,
        )
        .unwrap();
        assert_eq!(r.callchain.unwrap().len(), nr);
        assert_eq!(r.aux.unwrap().len(), size);
        assert_eq!(r.period, Some(period));
    }
    let uev = samples
        .iter()
        .filter(|(h, _)| h.type_ == ext::PERF_RECORD_UEVENT)
        .count() as u64;
    let lost = u.event().counters().lost;
    assert_eq!(
        uev + lost,
        emitted,
        "every uevent delivered or counted lost"
    );
    assert_eq!(uev, emitted - refused, "every uevent accepted is delivered");
    assert!(c.event().count() > 0, "task-clock counted CPU time");
}

/// A task-clock sampler with PERF_SAMPLE_CALLCHAIN keeps the thread's
/// shadow stack live, so its callchains name the open calls also while the
/// thread's trace is paused (a paused writer alone does not follow calls).
#[test]
fn task_clock_callchains_name_the_open_calls_while_the_trace_is_paused() {
    perfaux_pmus::register();
    let mut leader = trace_attr();
    leader.aux_action = perfaux_abi::attr::AuxAction::START_PAUSED;
    let mut t = trace_event(&leader, 16, true);
    let mut clk = sampling(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, 50_000);
    clk.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_CALLCHAIN;
    let me = Target::current();
    let _c = perf_event_open_attr(&clk, me, -1, t.ev.as_raw(), PERF_FLAG_FD_OUTPUT).unwrap();
    t.ev.enable(PERF_IOC_FLAG_GROUP).unwrap();
    assert!(t.ev.event().aux_paused());
    let start = Instant::now();
    let mut acc = 0u64;
    let mut samples = Vec::new();
    while start.elapsed() < Duration::from_millis(150) {
        for i in 0..200 {
            acc = acc.wrapping_add(sig_a(i));
        }
        samples.extend(records(&mut t.data));
    }
    std::hint::black_box(acc);
    t.ev.disable(PERF_IOC_FLAG_GROUP).unwrap();
    samples.extend(records(&mut t.data));
    let addrs: Vec<u64> = ["sig_a", "sig_b"]
        .iter()
        .map(|n| {
            let id = perfaux_swtrace::lookup(n)[0];
            perfaux_swtrace::probe_by_id(id).unwrap().addr() as u64
        })
        .collect();
    let mut inside = 0;
    for (h, b) in &samples {
        if h.type_ != PERF_RECORD_SAMPLE {
            continue;
        }
        // ip, callchain {nr, ctx, ips}
        let nr = u64_at(b, 16) as usize;
        assert_eq!(u64_at(b, 24), PERF_CONTEXT_USER);
        let ips: Vec<u64> = (1..nr).map(|i| u64_at(b, 24 + i * 8)).collect();
        assert!(ips.len() <= 2, "{ips:x?}");
        for ip in &ips {
            assert!(addrs.contains(ip), "{ip:#x} is not a probe of sig_a/sig_b");
        }
        if !ips.is_empty() {
            assert_eq!(ips.last(), Some(&addrs[0]), "outermost frame sig_a");
            inside += 1;
        }
    }
    assert!(
        inside >= 1,
        "no sample inside sig_a among {} records",
        samples.len()
    );
}

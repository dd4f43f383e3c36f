//! A TSC calibration measured by another process (perfaux record's) is adopted instead of
//! this process's own 10 ms one, after checks; and the times converted with it agree with
//! CLOCK_MONOTONIC. One test: the calibration is process-wide and set once, so the refusals
//! come before the adoption, in this process of its own.

#[cfg(target_arch = "x86_64")]
#[test]
fn a_checked_calibration_is_adopted_once_and_converts_to_monotonic_time() {
    use perfaux_swtrace::clock::{
        ClockSource, TscCalibration, TscRate, adopt_tsc_calibration, anchor, calibrate, read_pair,
        tsc, tsc_calibration,
    };

    // What perfaux record measures: a first pair, then the rate over 10 ms from it.
    let base = read_pair();
    let rate = calibrate(10_000_000);
    let good = TscCalibration {
        base_ticks: base.ticks,
        base_ns: base.ns,
        span: read_pair().ticks - base.ticks,
        rate,
    };

    let zero_rate = TscCalibration {
        rate: TscRate { mult: 0, shift: 0 },
        ..good
    };
    assert!(!adopt_tsc_calibration(zero_rate), "a rate of 0");
    let future = TscCalibration {
        base_ticks: tsc() + (1 << 40),
        ..good
    };
    assert!(!adopt_tsc_calibration(future), "a first pair in the future");
    let quadruple = TscCalibration {
        rate: TscRate {
            mult: rate.mult,
            shift: rate.shift - 2,
        },
        ..good
    };
    assert!(!adopt_tsc_calibration(quadruple), "a rate 4 times too fast");

    assert!(
        adopt_tsc_calibration(good),
        "the other process's calibration"
    );
    assert_eq!(tsc_calibration(), good, "the calibration in use");
    assert!(!adopt_tsc_calibration(good), "adopted once only");

    // Times converted through an anchor of the adopted calibration are CLOCK_MONOTONIC's:
    // within 100 us of a clock_gettime read next to them, 100 times over 100 ms (the
    // tests/clock_load.rs bound under load is a few us).
    for _ in 0..100 {
        let conv = anchor(ClockSource::Tsc);
        std::thread::sleep(std::time::Duration::from_millis(1));
        // A tight pair: TSC and CLOCK_MONOTONIC read at one moment (retried if preempted).
        let p = read_pair();
        let converted = conv.anchor_ns
            + ((u128::from(p.ticks - conv.anchor_ticks) * u128::from(conv.mult)) >> conv.shift)
                as u64;
        assert!(
            converted.abs_diff(p.ns) < 100_000,
            "converted {converted} against CLOCK_MONOTONIC {}",
            p.ns
        );
    }
}

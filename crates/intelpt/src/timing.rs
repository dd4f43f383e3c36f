//! Time from timing packets: the TSC estimate at each packet (TSC, TMA, MTC, CYC) and the
//! calibration that turns CYC's core cycles into TSC ticks (from CBR, or measured between
//! MTCs or TSCs). The arithmetic is libipt's, so the estimates equal ptdump's and ptxed's to
//! the tick: integer widths, truncating divisions and the wrap of the crystal clock counter
//! (CTC) at `mtc_freq + 8` bits.
//!
//! The calibration value (fcr) is fixed point with [`FCR_SHIFT`] fraction bits: TSC ticks per
//! core cycle.

/// Fraction bits of a calibration value.
pub const FCR_SHIFT: u32 = 8;

/// What the trace's configuration says about its clocks (IA32_RTIT_CTL.MTCFreq, the nominal
/// core:bus ratio, CPUID leaf 0x15's TSC:crystal ratio).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClockConfig {
    pub mtc_freq: u8,
    pub nom_freq: u8,
    pub cpuid_0x15_eax: u32,
    pub cpuid_0x15_ebx: u32,
}

/// Why a timing packet could not move time on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeError {
    /// libipt's pte_bad_packet: a CTC that went backwards further than it can wrap, or a
    /// CBR of 0.
    BadPacket,
    /// libipt's pte_bad_context: a TMA without a TSC before it, or a second one.
    BadContext,
    /// libipt's pte_bad_config: CPUID 0x15 not given, so CTC cannot become TSC.
    BadConfig,
    /// libipt's pte_no_time.
    NoTime,
    /// libipt's pte_internal: a calibration out of range.
    Internal,
}

impl TimeError {
    /// libipt's `pt_errstr` words.
    pub fn as_str(self) -> &'static str {
        match self {
            TimeError::BadPacket => "unknown packet",
            TimeError::BadContext => "unexpected packet context",
            TimeError::BadConfig => "bad configuration",
            TimeError::NoTime => "no timing information",
            TimeError::Internal => "internal error",
        }
    }
}

impl ClockConfig {
    fn mtc_hi(&self) -> u32 {
        u32::from(self.mtc_freq) + 8
    }

    /// CTC ticks from `old` to `new`, with one wrap at `mtc_freq + 8` bits allowed.
    fn ctc_delta(&self, new: u32, old: u32) -> Result<u32, TimeError> {
        let mut new = new;
        if new < old {
            new = new.wrapping_add(1u32.wrapping_shl(self.mtc_hi()));
            if new < old {
                return Err(TimeError::BadPacket);
            }
        }
        Ok(new - old)
    }

    /// CTC ticks as fast-counter (TSC) ticks, by CPUID 0x15's ratio.
    fn ctc_to_fc(&self, ctc: u32) -> Result<u64, TimeError> {
        if self.cpuid_0x15_eax == 0 || self.cpuid_0x15_ebx == 0 {
            return Err(TimeError::BadConfig);
        }
        Ok(u64::from(ctc).wrapping_mul(u64::from(self.cpuid_0x15_ebx))
            / u64::from(self.cpuid_0x15_eax))
    }
}

/// The TSC estimate.
#[derive(Debug, Clone, Copy, Default)]
pub struct Time {
    /// The estimate at the last timing packet.
    pub tsc: u64,
    /// The TSC at the last MTC (or TSC), to which CYC cycles add.
    base: u64,
    /// Fast-counter ticks since `base`.
    fc: u64,
    /// The CTC at the last MTC (or TMA).
    ctc: u32,
    /// The CTC at which CYC counting last started.
    ctc_cyc: u32,
    lost_mtc: u32,
    lost_cyc: u32,
    pub have_tsc: bool,
    have_tma: bool,
    have_mtc: bool,
}

impl Time {
    /// The time is wall-clock only after a TSC; before, it is relative to the first MTC.
    pub fn query(&self) -> Result<u64, (u64, TimeError)> {
        if self.have_tsc {
            Ok(self.tsc)
        } else {
            Err((self.tsc, TimeError::NoTime))
        }
    }

    pub fn on_tsc(&mut self, tsc: u64) {
        self.have_tsc = true;
        self.have_tma = false;
        self.have_mtc = false;
        self.tsc = tsc;
        self.base = tsc;
        self.ctc = 0;
        self.fc = 0;
        self.lost_mtc = 0;
        self.lost_cyc = 0;
    }

    pub fn on_tma(&mut self, ctc: u16, fc: u16, cfg: &ClockConfig) -> Result<(), TimeError> {
        if !self.have_tsc || self.have_tma {
            return Err(TimeError::BadContext);
        }
        if self.have_mtc {
            return Err(TimeError::Internal);
        }
        // The TSC was taken `fc` fast-counter ticks after the CTC value the TMA gives.
        self.have_tma = true;
        self.base = self.base.wrapping_sub(u64::from(fc));
        self.fc = self.fc.wrapping_add(u64::from(fc));
        // With MTCs of at most 16 CTC bits the TMA's CTC stands for the MTC before it.
        if cfg.mtc_hi() <= 16 {
            self.have_mtc = true;
        }
        let mask = 1u32.wrapping_shl(cfg.mtc_hi()).wrapping_sub(1);
        self.ctc = u32::from(ctc) & mask;
        self.ctc_cyc = self.ctc;
        Ok(())
    }

    pub fn on_mtc(&mut self, mtc: u8, cfg: &ClockConfig) -> Result<(), TimeError> {
        // The MTCs between a TSC and its TMA cannot be placed.
        if self.have_tsc && !self.have_tma {
            return Ok(());
        }
        let new = u32::from(mtc).wrapping_shl(u32::from(cfg.mtc_freq));
        let mut last = self.ctc;
        if self.fc != 0 || self.lost_cyc != 0 || !self.have_mtc {
            self.ctc_cyc = new;
        }
        let first = !self.have_mtc;
        self.have_mtc = true;
        self.fc = 0;
        self.ctc = new;
        self.lost_cyc = 0;
        if first {
            if !self.have_tma {
                return Ok(());
            }
            // The TMA gave the CTC's low 16 bits; the MTC's higher ones (mtc_freq > 8) come
            // from this MTC, one period back if the low bits wrapped since.
            let lo = new & 0xffff;
            let mut hi = new & !0xffff;
            if lo < last {
                hi = hi.wrapping_sub(0x10000);
                hi &= 0xffu32.wrapping_shl(u32::from(cfg.mtc_freq));
            }
            last |= hi;
        }
        let d = match cfg.ctc_delta(new, last) {
            Ok(d) => d,
            Err(e) => {
                self.lost_mtc = self.lost_mtc.saturating_add(1);
                return Err(e);
            }
        };
        self.base = self.base.wrapping_add(cfg.ctc_to_fc(d)?);
        self.tsc = self.base;
        Ok(())
    }

    /// A CYC of `cyc` core cycles at calibration `fcr` (0: none, the cycles are lost).
    pub fn on_cyc(&mut self, cyc: u64, fcr: u64, cfg: &ClockConfig) -> Result<(), TimeError> {
        if fcr == 0 {
            self.lost_cyc = self.lost_cyc.saturating_add(1);
            return Ok(());
        }
        let mut cyc = cyc;
        // The first CYC after MTCs that had none counts cycles from the MTC before them: take
        // off what those periods account for.
        if self.fc == 0 && self.ctc != self.ctc_cyc {
            let d = cfg.ctc_delta(self.ctc, self.ctc_cyc)?;
            let f = cfg.ctc_to_fc(d)?;
            let old = (f << FCR_SHIFT) / fcr;
            cyc = cyc.max(old) - old;
        }
        self.fc = self.fc.wrapping_add(cyc.wrapping_mul(fcr) >> FCR_SHIFT);
        self.tsc = self.base.wrapping_add(self.fc);
        Ok(())
    }
}

/// The calibration: TSC ticks per core cycle, measured or from CBR.
#[derive(Debug, Clone, Copy)]
pub struct TimeCal {
    fcr: u64,
    min_fcr: u64,
    max_fcr: u64,
    tsc: u64,
    cyc_tsc: u64,
    cyc_mtc: u64,
    ctc: u32,
    lost_mtc: u32,
    have_mtc: bool,
    check_skl168: bool,
}

impl Default for TimeCal {
    fn default() -> Self {
        TimeCal {
            fcr: 0,
            min_fcr: u64::MAX,
            max_fcr: 0,
            tsc: 0,
            cyc_tsc: 0,
            cyc_mtc: 0,
            ctc: 0,
            lost_mtc: 0,
            have_mtc: false,
            check_skl168: false,
        }
    }
}

impl TimeCal {
    /// The calibration, once one is known.
    pub fn fcr(&self) -> Option<u64> {
        (self.min_fcr <= self.max_fcr).then_some(self.fcr)
    }

    fn set(&mut self, fcr: u64) {
        self.fcr = fcr;
        self.min_fcr = self.min_fcr.min(fcr);
        self.max_fcr = self.max_fcr.max(fcr);
    }

    pub fn on_psb(&mut self, skl168: bool) {
        if skl168 {
            self.check_skl168 = true;
        }
    }

    /// An overflow loses cycles: start measuring again, keeping the value if asked to.
    pub fn on_ovf(&mut self, keep: bool) {
        if keep {
            self.tsc = 0;
            self.cyc_tsc = 0;
            self.cyc_mtc = 0;
            self.ctc = 0;
            self.have_mtc = false;
        } else {
            *self = TimeCal::default();
        }
    }

    /// A TSC; in a PSB+ header, the cycles since the last one measure the calibration.
    pub fn on_tsc(&mut self, tsc: u64, in_header: bool) {
        let (last, cyc) = (self.tsc, self.cyc_tsc);
        self.tsc = tsc;
        self.cyc_tsc = 0;
        if !in_header || last == 0 || cyc == 0 || self.have_mtc {
            return;
        }
        // The TSC's 56 bits may have wrapped once.
        let mut d = tsc.wrapping_sub(last);
        if tsc < last {
            d = d.wrapping_add(1 << 56);
        }
        self.set((d << FCR_SHIFT) / cyc);
    }

    /// A CBR gives the calibration from the nominal ratio; outside a PSB+ it is a change of
    /// frequency that invalidates what was measured.
    pub fn on_cbr(
        &mut self,
        ratio: u8,
        in_header: bool,
        cfg: &ClockConfig,
    ) -> Result<(), TimeError> {
        if !in_header {
            *self = TimeCal::default();
        }
        if cfg.nom_freq == 0 {
            return Ok(());
        }
        if ratio == 0 {
            return Err(TimeError::BadPacket);
        }
        self.set((u64::from(cfg.nom_freq) << FCR_SHIFT) / u64::from(ratio));
        Ok(())
    }

    pub fn on_cyc(&mut self, cyc: u64) {
        self.cyc_mtc = self.cyc_mtc.wrapping_add(cyc);
        self.cyc_tsc = self.cyc_tsc.wrapping_add(cyc);
    }

    pub fn on_mtc(&mut self, mtc: u8, cfg: &ClockConfig) -> Result<(), TimeError> {
        let skl = std::mem::take(&mut self.check_skl168);
        let new = u32::from(mtc).wrapping_shl(u32::from(cfg.mtc_freq));
        if !self.have_mtc {
            self.cyc_mtc = 0;
            self.ctc = new;
            self.have_mtc = true;
            return Ok(());
        }
        let cyc = self.cyc_mtc;
        if cyc == 0 {
            // No cycles this period: measure the next MTC over both.
            return Ok(());
        }
        self.cyc_mtc = 0;
        let old = std::mem::replace(&mut self.ctc, new);
        self.lost_mtc = self.lost_mtc.saturating_add(1);
        let d = cfg.ctc_delta(new, old)?;
        let f = cfg.ctc_to_fc(d)?;
        if f >> 56 != 0 {
            return Err(TimeError::Internal);
        }
        let fcr = (f << FCR_SHIFT) / cyc;
        if skl {
            // SKL168: the first MTC after a PSB may come a period late; refuse a measurement
            // that spans more than a period or does not fit the cycles counted.
            if 1u32.wrapping_shl(u32::from(cfg.mtc_freq)) < d {
                return Ok(());
            }
            if cfg.mtc_freq < 10
                && let Some(cur) = self.fcr()
            {
                let dfc = cur.wrapping_mul(cyc.wrapping_add(0xf00)) >> FCR_SHIFT;
                if dfc < f {
                    return Ok(());
                }
            }
        }
        self.set(fcr);
        self.lost_mtc = 0;
        Ok(())
    }
}

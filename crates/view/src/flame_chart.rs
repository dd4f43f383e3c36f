//! The flame chart: each thread's calls over time, one lane per thread, every lane on the
//! recording's one clock (a call at the same time in two threads is at the same x), each call a
//! bar of its own (two calls of a function one after another stay two bars). Drawn here as SVG
//! because inferno's flame chart is a flame graph in time order: its x axis is the running sum
//! of the weights, so threads follow each other and equal stacks next to each other merge.
//!
//! A bar's `<title>` reads `NAME (DURATION ns, at TIME)`, a lane's `COMM TID (...)`, so the
//! browser shows them on hover and finds names with its search. Bars narrower than a tenth of
//! a pixel are left out (their caller's bar covers them). A recording with samples and no
//! traced calls gets inferno's chart of the sampled stacks, per thread in time order.
//!
//! Memory: a bar (24 bytes) per traced call, as the chart draws every call.

use std::collections::HashMap;
use std::io::Write;

use inferno::flamegraph::from_lines;

use crate::event::{FuncId, Names, Sink, ViewEvent};
use crate::flame::{frame, options};
use crate::walk::Summary;
use crate::{ViewError, fmt_timestamp};

/// The chart's width in pixels, and its bars' left and right margin.
const WIDTH: f64 = 1200.0;
const MARGIN: f64 = 10.0;
/// A row's height: a depth of a lane, or its thread's name.
const ROW: f64 = 16.0;
/// Room above the first lane (the title and the time range) and between lanes.
const HEAD: f64 = 48.0;
const LANE_GAP: f64 = 8.0;
/// Narrower bars are not drawn.
const MIN_BAR: f64 = 0.1;
/// Average width of a character of the labels (12 px Verdana), to cut names to their bar.
const CHAR: f64 = 7.0;

/// One call.
#[derive(Clone, Copy)]
struct Bar {
    start: u64,
    end: u64,
    func: FuncId,
    depth: u32,
}

#[derive(Default)]
struct Lane {
    bars: Vec<Bar>,
    /// The open calls: their starts (the bar is made at the exit).
    open: Vec<u64>,
    first: Option<u64>,
    last: u64,
    max_depth: u32,
}

/// The flame chart's bars, gathered in one pass.
#[derive(Default)]
pub struct FlameChart {
    comms: HashMap<u32, String>,
    lanes: HashMap<u32, Lane>,
    /// Per thread, in time order: (tid, folded stack, samples), for a chart of samples.
    samples: Vec<(u32, String, u64)>,
}

/// `s` as XML text: its five special characters escaped, and the control characters XML 1.0
/// does not allow (a thread may name itself with any bytes) replaced by U+FFFD.
fn xml(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            '\t' | '\n' | '\r' => o.push(c),
            c if c.is_control() => o.push('\u{fffd}'),
            c => o.push(c),
        }
    }
    o
}

/// A warm colour of the name's own (the same function has the same colour in every lane), as
/// flame graphs colour their frames.
fn colour(name: &str) -> (u8, u8, u8) {
    // FNV-1a: stable across runs and platforms.
    let h = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    let v = |shift: u32| ((h >> shift) & 0xff) as f64 / 255.0;
    (
        (205.0 + 50.0 * v(0)) as u8,
        (230.0 * v(8)) as u8,
        (55.0 * v(16)) as u8,
    )
}

/// The label that fits a bar `width` pixels wide: the name, cut with `..`, or nothing.
fn label(name: &str, width: f64) -> Option<String> {
    let fits = ((width - 6.0) / CHAR).floor();
    if fits < 3.0 {
        return None;
    }
    let fits = fits as usize;
    let n = name.chars().count();
    Some(if n <= fits {
        name.to_owned()
    } else {
        let cut: String = name.chars().take(fits - 2).collect();
        format!("{cut}..")
    })
}

impl FlameChart {
    fn root(&self, tid: u32) -> String {
        let comm = self.comms.get(&tid).map_or("", String::as_str);
        format!("{comm} {tid}")
    }

    /// Writes the chart, the functions named from `names`.
    pub fn write(self, names: &Names, sum: &Summary, out: impl Write) -> Result<(), ViewError> {
        if self.lanes.values().all(|l| l.bars.is_empty()) {
            return self.write_samples(sum, out);
        }
        self.write_calls(names, sum, out)
            .map_err(|e| ViewError(format!("flame chart: {e}")))
    }

    fn write_calls(self, names: &Names, sum: &Summary, mut out: impl Write) -> std::io::Result<()> {
        let mut lanes: Vec<(u32, &Lane)> = self
            .lanes
            .iter()
            .filter(|(_, l)| !l.bars.is_empty())
            .map(|(&tid, l)| (tid, l))
            .collect();
        lanes.sort_by_key(|&(tid, l)| (l.first, tid));
        let t0 = lanes.iter().filter_map(|(_, l)| l.first).min().unwrap_or(0);
        let t1 = lanes.iter().map(|(_, l)| l.last).max().unwrap_or(t0);
        let span = t1.saturating_sub(t0).max(1) as f64;
        let scale = (WIDTH - 2.0 * MARGIN) / span;
        let x = |t: u64| MARGIN + t.saturating_sub(t0) as f64 * scale;
        let height = HEAD
            + lanes
                .iter()
                .map(|(_, l)| f64::from(l.max_depth + 2) * ROW + LANE_GAP)
                .sum::<f64>();
        let title = format!(
            "Flame Chart: {}",
            sum.cmdline.as_deref().unwrap_or("perfaux recording")
        );
        writeln!(out, r#"<?xml version="1.0" standalone="no"?>"#)?;
        writeln!(
            out,
            r#"<svg version="1.1" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" xmlns="http://www.w3.org/2000/svg">"#
        )?;
        writeln!(
            out,
            r#"<style>text {{ font-family: Verdana, sans-serif; font-size: 12px; fill: #000; }} .lane {{ font-weight: bold; }}</style>"#
        )?;
        writeln!(
            out,
            r##"<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#f8f8f8"/>"##
        )?;
        writeln!(
            out,
            r#"<text x="{}" y="20" text-anchor="middle" font-size="16px">{}</text>"#,
            WIDTH / 2.0,
            xml(&title)
        )?;
        writeln!(
            out,
            r#"<text x="{}" y="38" text-anchor="middle">{} .. {}: one lane per thread, on one clock</text>"#,
            WIDTH / 2.0,
            fmt_timestamp(t0),
            fmt_timestamp(t1)
        )?;
        let mut y = HEAD;
        // Per function: its name, and as XML text.
        let mut escaped: HashMap<FuncId, (&str, String)> = HashMap::new();
        for (tid, lane) in lanes {
            let first = lane.first.unwrap_or(t0);
            let root = self.root(tid);
            let (lx, lw) = (x(first), (x(lane.last) - x(first)).max(MIN_BAR));
            writeln!(
                out,
                r##"<g><title>{} ({} ns, from {})</title><rect x="{lx:.2}" y="{y:.1}" width="{lw:.2}" height="{:.1}" fill="#d8d8e8"/><text class="lane" x="{:.2}" y="{:.1}">{}</text></g>"##,
                xml(&root),
                lane.last.saturating_sub(first),
                fmt_timestamp(first),
                ROW - 1.0,
                lx + 3.0,
                y + ROW - 4.0,
                xml(&root)
            )?;
            for b in &lane.bars {
                let (bx, bw) = (x(b.start), (b.end.saturating_sub(b.start)) as f64 * scale);
                if bw < MIN_BAR {
                    continue;
                }
                let (raw, name) = escaped.entry(b.func).or_insert_with(|| {
                    let raw = names.name(b.func);
                    (raw, xml(raw))
                });
                let by = y + f64::from(b.depth + 1) * ROW;
                let (r, g, bl) = colour(name);
                write!(
                    out,
                    r#"<g><title>{name} ({} ns, at {})</title><rect x="{bx:.2}" y="{by:.1}" width="{bw:.2}" height="{:.1}" fill="rgb({r},{g},{bl})" rx="2"/>"#,
                    b.end.saturating_sub(b.start),
                    fmt_timestamp(b.start),
                    ROW - 1.0
                )?;
                // Cut before it is escaped: a cut through `&lt;` would leave no well-formed XML.
                if let Some(text) = label(raw, bw).map(|t| xml(&t)) {
                    write!(
                        out,
                        r#"<text x="{:.2}" y="{:.1}">{text}</text>"#,
                        bx + 3.0,
                        by + ROW - 4.0
                    )?;
                }
                writeln!(out, "</g>")?;
            }
            y += f64::from(lane.max_depth + 2) * ROW + LANE_GAP;
        }
        writeln!(out, "</svg>")?;
        out.flush()
    }

    fn write_samples(mut self, sum: &Summary, out: impl Write) -> Result<(), ViewError> {
        let mut lines = std::mem::take(&mut self.samples);
        if lines.is_empty() {
            return Err(ViewError(
                "no traced calls and no samples to draw a flame chart of".into(),
            ));
        }
        let mut opts = options(sum, "Flame Chart", "samples");
        opts.flame_chart = true;
        // Threads one after the other, each in its time order.
        lines.sort_by_key(|l| l.0);
        let text: Vec<String> = lines
            .into_iter()
            .map(|(_, l, w)| format!("{l} {w}"))
            .collect();
        from_lines(&mut opts, text.iter().map(String::as_str), out)
            .map_err(|e| ViewError(format!("flame chart: {e}")))
    }
}

impl Sink for FlameChart {
    fn event(&mut self, names: &Names, ev: &ViewEvent<'_>) -> std::io::Result<()> {
        match *ev {
            ViewEvent::Comm { tid, comm, .. } => {
                self.comms.insert(tid, comm.to_owned());
            }
            ViewEvent::Enter { tid, time, .. } => {
                let l = self.lanes.entry(tid).or_default();
                l.first.get_or_insert(time);
                l.last = l.last.max(time);
                l.open.push(time);
            }
            ViewEvent::Exit {
                tid, time, func, ..
            } => {
                let l = self.lanes.entry(tid).or_default();
                let Some(start) = l.open.pop() else {
                    return Ok(());
                };
                let depth = l.open.len() as u32;
                l.max_depth = l.max_depth.max(depth);
                l.last = l.last.max(time);
                l.bars.push(Bar {
                    start,
                    end: time,
                    func,
                    depth,
                });
            }
            ViewEvent::Sample { tid, stack, .. } => {
                let mut line = self.root(tid).replace(';', ":");
                for &f in stack.iter().rev() {
                    line.push(';');
                    line.push_str(&frame(names, f));
                }
                match self.samples.last_mut() {
                    Some((lt, l, w)) if *lt == tid && *l == line => *w += 1,
                    _ => self.samples.push((tid, line, 1)),
                }
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `&` of `s` starts one of XML's entities, and no control character but tab and
    /// line ends is left.
    fn well_formed(s: &str) -> bool {
        let entities = ["&lt;", "&gt;", "&amp;", "&quot;", "&apos;"];
        s.match_indices('&')
            .all(|(i, _)| entities.iter().any(|e| s[i..].starts_with(e)))
            && !s
                .chars()
                .any(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
    }

    #[test]
    fn a_cut_label_of_a_template_name_stays_well_formed() {
        let name = "std::vector<int, std::allocator<int> >::push_back";
        for width in [20.0, 60.0, 100.0, 120.0, 160.0, 400.0] {
            if let Some(l) = label(name, width) {
                let text = xml(&l);
                assert!(well_formed(&text), "{width}: {text}");
                assert!(l.chars().count() as f64 * CHAR <= width, "{width}: {l}");
            }
        }
        assert_eq!(label(name, 1000.0).as_deref(), Some(name));
    }

    #[test]
    fn control_characters_of_a_thread_name_are_replaced() {
        let text = xml("\u{1b}[1mworker\u{7}");
        assert!(well_formed(&text), "{text}");
        assert_eq!(text, "\u{fffd}[1mworker\u{fffd}");
    }
}

//! Flame graphs and flame charts as interactive SVG, drawn by inferno from
//! folded stacks (`a;b;c weight`).
//!
//! The flame graph folds the merged call tree ([`Collector::tree`], weight:
//! self time in ns) or, for a recording without traced calls, the sampled
//! callchains (weight: samples). The flame chart keeps time: per thread, one
//! folded line per stack change, weighted by how long the stack lasted;
//! unlike everything else in this crate it grows with the trace (one line
//! per call boundary), as the chart it draws does.

use std::collections::HashMap;
use std::io::Write;

use inferno::flamegraph::{Options, from_lines};

use crate::event::{FuncId, Names, Sink, ViewEvent};
use crate::stats::{CallTree, Collector};
use crate::walk::Summary;
use crate::{ViewError, fmt_timestamp};

fn options<'a>(sum: &Summary, what: &str, count_name: &str) -> Options<'a> {
    let mut o = Options::default();
    o.title = format!(
        "{what}: {}",
        sum.cmdline.as_deref().unwrap_or("perfaux recording")
    );
    o.subtitle = sum
        .first_time
        .map(|f| format!("{} .. {}", fmt_timestamp(f), fmt_timestamp(sum.last_time)));
    o.count_name = count_name.to_owned();
    o
}

/// inferno joins frames with `;` and ends a line with ` count`.
fn frame(names: &Names, f: FuncId) -> String {
    names.name(f).replace(';', ":")
}

fn folded(tree: &CallTree, names: &Names) -> Vec<String> {
    let mut lines = Vec::new();
    for (i, n) in tree.nodes.iter().enumerate().skip(1) {
        if n.self_time > 0 {
            let path: Vec<String> = tree
                .path(i as u32)
                .into_iter()
                .map(|f| frame(names, f))
                .collect();
            lines.push(format!("{} {}", path.join(";"), n.self_time));
        }
    }
    lines
}

/// The flame graph of what `c` gathered.
pub fn write_flame_graph(
    c: &Collector,
    names: &Names,
    sum: &Summary,
    out: impl Write,
) -> Result<(), ViewError> {
    let (lines, mut opts) = if c.tree.nodes.len() > 1 {
        (folded(&c.tree, names), options(sum, "Flame Graph", "ns"))
    } else {
        (
            folded(&c.sample_tree, names),
            options(sum, "Flame Graph", "samples"),
        )
    };
    if lines.is_empty() {
        return Err(ViewError(
            "no traced calls and no samples to draw a flame graph of".into(),
        ));
    }
    from_lines(&mut opts, lines.iter().map(String::as_str), out)
        .map_err(|e| ViewError(format!("flame graph: {e}")))
}

#[derive(Default)]
struct ThreadChart {
    stack: Vec<FuncId>,
    since: u64,
}

/// The flame chart's folded lines, gathered in one pass.
#[derive(Default)]
pub struct FlameChart {
    comms: HashMap<u32, String>,
    threads: HashMap<u32, ThreadChart>,
    /// Per thread, in time order: (tid, folded stack, weight).
    lines: Vec<(u32, String, u64)>,
    samples: Vec<(u32, String, u64)>,
}

impl FlameChart {
    fn root(&self, tid: u32) -> String {
        let comm = self.comms.get(&tid).map_or("", String::as_str);
        format!("{comm} {tid}").replace(';', ":")
    }

    /// Ends the stretch of `tid`'s current stack at `time`.
    fn change(&mut self, names: &Names, tid: u32, time: u64) {
        let root = self.root(tid);
        let t = self.threads.entry(tid).or_default();
        let dur = time.saturating_sub(t.since);
        if dur > 0 && !t.stack.is_empty() {
            let mut line = root;
            for &f in &t.stack {
                line.push(';');
                line.push_str(&frame(names, f));
            }
            match self.lines.last_mut() {
                Some((lt, l, w)) if *lt == tid && *l == line => *w += dur,
                _ => self.lines.push((tid, line, dur)),
            }
        }
        t.since = time;
    }

    /// Writes the chart.
    pub fn write(mut self, sum: &Summary, out: impl Write) -> Result<(), ViewError> {
        let (mut lines, mut opts) = if self.lines.is_empty() {
            (
                std::mem::take(&mut self.samples),
                options(sum, "Flame Chart", "samples"),
            )
        } else {
            (
                std::mem::take(&mut self.lines),
                options(sum, "Flame Chart", "ns"),
            )
        };
        if lines.is_empty() {
            return Err(ViewError(
                "no traced calls and no samples to draw a flame chart of".into(),
            ));
        }
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
            ViewEvent::Enter {
                tid, time, func, ..
            } => {
                self.change(names, tid, time);
                self.threads.entry(tid).or_default().stack.push(func);
            }
            ViewEvent::Exit { tid, time, .. } => {
                self.change(names, tid, time);
                self.threads.entry(tid).or_default().stack.pop();
            }
            ViewEvent::Sample { tid, stack, .. } => {
                let mut line = self.root(tid);
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

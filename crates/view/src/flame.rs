//! Flame graphs and flame charts as interactive SVG, drawn by inferno from
//! folded stacks (`a;b;c weight`).
//!
//! The flame graph folds the merged call tree ([`Collector::tree`], weight:
//! self time in ns) or, for a recording without traced calls, the sampled
//! callchains (weight: samples). With the kernel's context switches in the
//! recording, a call's weight is its self time on the CPU unless wall time is
//! asked for: a thread blocked in `pthread_join` or `poll` would otherwise fill
//! the graph with waiting. The flame chart, which keeps time, is
//! [`crate::flame_chart`]'s.

use std::io::Write;

use inferno::flamegraph::{Options, from_lines};

use crate::event::{FuncId, Names};
use crate::stats::{CallTree, Collector};
use crate::walk::Summary;
use crate::{ViewError, fmt_timestamp};

/// inferno's options for a chart `what` of `sum`'s recording, weighed in `count_name`.
pub(crate) fn options<'a>(sum: &Summary, what: &str, count_name: &str) -> Options<'a> {
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
pub(crate) fn frame(names: &Names, f: FuncId) -> String {
    names.name(f).replace(';', ":")
}

/// The folded stacks of `tree`, weighed by self time, less the time switched out when
/// `on_cpu`.
fn folded(tree: &CallTree, names: &Names, on_cpu: bool) -> Vec<String> {
    let mut lines = Vec::new();
    for (i, n) in tree.nodes.iter().enumerate().skip(1) {
        let weight = if on_cpu {
            n.self_time.saturating_sub(n.self_off)
        } else {
            n.self_time
        };
        if weight > 0 {
            let path: Vec<String> = tree
                .path(i as u32)
                .into_iter()
                .map(|f| frame(names, f))
                .collect();
            lines.push(format!("{} {weight}", path.join(";")));
        }
    }
    lines
}

/// The flame graph of what `c` gathered: of the time on the CPU where the recording has
/// context switches, unless `wall`.
pub fn write_flame_graph(
    c: &Collector,
    names: &Names,
    sum: &Summary,
    wall: bool,
    out: impl Write,
) -> Result<(), ViewError> {
    let on_cpu = !wall && c.switches.0 > 0;
    let (lines, mut opts) = if c.tree.nodes.len() > 1 && on_cpu {
        (
            folded(&c.tree, names, true),
            options(sum, "Flame Graph (on-CPU)", "ns on-CPU"),
        )
    } else if c.tree.nodes.len() > 1 {
        (
            folded(&c.tree, names, false),
            options(sum, "Flame Graph", "ns"),
        )
    } else {
        (
            folded(&c.sample_tree, names, false),
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

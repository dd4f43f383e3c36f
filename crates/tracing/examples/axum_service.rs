//! An axum service that records its own `tracing` spans with perfaux-tracing's layer, as a
//! flight recorder that keeps a snapshot when a request is slow.
//!
//! cargo run --release -p perfaux-tracing --example axum_service -- service.data
//!
//! It binds 127.0.0.1 on a free port, sends itself a few dozen requests over plain HTTP/1.1 (one
//! of them slow), finishes the recording and says how to look at it. With `--serve` it serves
//! on 127.0.0.1:3000 instead, for your own `curl`, until Enter is pressed.
//!
//! Routes:
//! - `/items/{id}`: a span per request, an async fetch (a span of its own) and a decode step
//!   (a nested span and an event).
//! - `/report/{rows}`: renders on tokio's blocking pool, a millisecond per row, so a large
//!   report is a slow request: `/report/300` takes 300 ms, past the 50 ms [`SLOW`], and its
//!   `render` span triggers the snapshot.

use std::cell::RefCell;
use std::error::Error;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use axum::Router;
use axum::extract::Path as Param;
use axum::routing::get;
use perfaux_tracing::{Recording, RecordingOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::{Dispatch, Span, info, info_span, instrument, warn};
use tracing_subscriber::prelude::*;

type BoxError = Box<dyn Error + Send + Sync>;

/// A span busy this long takes a snapshot.
pub const SLOW: Duration = Duration::from_millis(50);
/// The rows of the one slow report the example asks for: 300 ms of rendering, six times
/// [`SLOW`], so that it is slow however loaded the machine is.
pub const SLOW_ROWS: u64 = 300;
/// How many requests the example sends itself at once.
const CONCURRENT: usize = 4;

/// Where the service's requests come from.
#[derive(Debug, Clone, Copy)]
pub enum Mode {
    /// The example sends itself this many requests on a free port, then ends.
    Itself(usize),
    /// Serves on this address until Enter is pressed on standard input.
    Serve(SocketAddr),
}

/// What a run did.
#[derive(Debug)]
pub struct Ran {
    /// The HTTP status of each request the example sent itself.
    pub statuses: Vec<u16>,
    /// Snapshots the slow-request trigger took.
    pub snapshots: u64,
    /// Triggers that came within the interval of a snapshot, and took none.
    pub suppressed: u64,
    /// Bytes of trace the file holds.
    pub trace_bytes: u64,
    /// Records (uevents, thread names, ...) the file holds.
    pub records: u64,
    /// Records lost to a full ring.
    pub lost: u64,
}

/// The flight recorder: each thread's newest trace kept in a ring, written to the file only
/// when a span has been busy for [`SLOW`] (at most one snapshot a second, the default).
pub fn options() -> RecordingOptions {
    RecordingOptions {
        flight_recorder: true,
        snapshot_on_slow: Some(SLOW),
        ..RecordingOptions::default()
    }
}

/// The subscriber: the registry with perfaux's layer (add your fmt or OpenTelemetry layers
/// beside it).
pub fn subscriber() -> Dispatch {
    tracing_subscriber::registry()
        .with(perfaux_tracing::layer())
        .into()
}

/// Records the service into `out` while it serves `mode`'s requests, with `dispatch` as the
/// subscriber of every thread that serves them.
pub fn run(out: &Path, mode: Mode, dispatch: &Dispatch) -> Result<Ran, BoxError> {
    let recording = Recording::start(out, options())?;
    let rt = runtime(dispatch)?;
    let statuses = tracing::dispatcher::with_default(dispatch, || rt.block_on(serve(mode)))?;
    // The runtime's threads exit before the recording ends: their traces stay in it.
    drop(rt);
    let (snapshots, suppressed) = (
        recording.snapshots_triggered(),
        recording.snapshots_suppressed(),
    );
    let summary = recording.finish()?;
    Ok(Ran {
        statuses,
        snapshots,
        suppressed,
        trace_bytes: summary.aux_bytes,
        records: summary.records,
        lost: summary.lost,
    })
}

thread_local! {
    static SUBSCRIBER: RefCell<Option<tracing::dispatcher::DefaultGuard>> =
        const { RefCell::new(None) };
}

/// A multi-threaded runtime whose threads (workers and blocking pool) use `dispatch`.
///
/// A service of your own sets its subscriber once, for every thread, with
/// `tracing_subscriber::registry().with(perfaux_tracing::layer()).init()`. This one scopes
/// it to the runtime instead, so that a test, in a process whose global default can be set
/// only once, runs the same code.
fn runtime(dispatch: &Dispatch) -> std::io::Result<tokio::runtime::Runtime> {
    let dispatch = dispatch.clone();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(move || {
            let guard = tracing::dispatcher::set_default(&dispatch);
            SUBSCRIBER.with(|s| *s.borrow_mut() = Some(guard));
        })
        .build()
}

fn app() -> Router {
    Router::new()
        .route("/items/{id}", get(item))
        .route("/report/{rows}", get(report))
}

#[instrument]
async fn item(Param(id): Param<u64>) -> String {
    let raw = fetch(id).await;
    let value = decode(&raw);
    format!("item {id}: {value}\n")
}

/// An async store: its awaits are wall time, not busy time, so they trigger nothing.
#[instrument]
async fn fetch(id: u64) -> Vec<u8> {
    tokio::time::sleep(Duration::from_millis(1)).await;
    id.to_le_bytes().repeat(16)
}

fn decode(raw: &[u8]) -> u64 {
    let _span = info_span!("decode", bytes = raw.len()).entered();
    // FNV-1a.
    let value = raw.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    info!(value, "decoded");
    value
}

#[instrument]
async fn report(Param(rows): Param<u64>) -> String {
    // The blocking work has a span of its own: entering `report` on the blocking thread
    // would make the request's span busy, and trigger a second time.
    let parent = Span::current();
    match tokio::task::spawn_blocking(move || render(&parent, rows)).await {
        Ok(lines) => format!("{lines} lines\n"),
        Err(e) => format!("render failed: {e}\n"),
    }
}

/// A synchronous dependency (a database driver, a template engine) that takes a millisecond a
/// row: busy time, which the slow-span trigger measures.
fn render(parent: &Span, rows: u64) -> u64 {
    let _span = info_span!(parent: parent, "render", rows).entered();
    std::thread::sleep(Duration::from_millis(rows));
    if rows >= SLOW_ROWS {
        warn!(rows, "large report");
    }
    rows
}

/// Serves `mode`'s requests, then shuts the server down gracefully.
async fn serve(mode: Mode) -> Result<Vec<u16>, BoxError> {
    let bind = match mode {
        Mode::Itself(_) => SocketAddr::from(([127, 0, 0, 1], 0)),
        Mode::Serve(addr) => addr,
    };
    let listener = TcpListener::bind(bind).await?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        axum::serve(listener, app())
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .await
    });
    let statuses = match mode {
        Mode::Itself(n) => drive(addr, paths(n)).await?,
        Mode::Serve(_) => {
            wait_for_enter(addr).await?;
            Vec::new()
        }
    };
    let _ = stop.send(());
    server.await??;
    Ok(statuses)
}

/// The requests the example sends itself: item look-ups and small reports, and halfway one
/// report large enough to be slow.
pub fn paths(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| match i {
            _ if i == n / 2 => format!("/report/{SLOW_ROWS}"),
            _ if i % 4 == 3 => "/report/2".to_string(),
            _ => format!("/items/{i}"),
        })
        .collect()
}

/// Sends `paths`, [`CONCURRENT`] at a time; their statuses in order.
async fn drive(addr: SocketAddr, paths: Vec<String>) -> Result<Vec<u16>, BoxError> {
    let mut statuses = Vec::with_capacity(paths.len());
    for batch in paths.chunks(CONCURRENT) {
        let sent: Vec<_> = batch
            .iter()
            .cloned()
            .map(|path| tokio::spawn(async move { send(addr, &path).await }))
            .collect();
        for request in sent {
            statuses.push(request.await??);
        }
    }
    Ok(statuses)
}

/// One GET over HTTP/1.1 on a connection of its own; the response's status.
async fn send(addr: SocketAddr, path: &str) -> std::io::Result<u16> {
    let mut conn = TcpStream::connect(addr).await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    conn.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    conn.read_to_end(&mut response).await?;
    status(&response)
}

/// The status code of an HTTP/1.1 response (`HTTP/1.1 200 OK`).
fn status(response: &[u8]) -> std::io::Result<u16> {
    std::str::from_utf8(response)
        .ok()
        .and_then(|r| r.strip_prefix("HTTP/1.1 "))
        .and_then(|r| r.get(..3))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| std::io::Error::other("not an HTTP/1.1 response"))
}

async fn wait_for_enter(addr: SocketAddr) -> Result<(), BoxError> {
    println!("serving on http://{addr}: try");
    println!("  curl http://{addr}/items/7");
    println!("  curl http://{addr}/report/{SLOW_ROWS}    # slow: a snapshot");
    println!("press Enter to finish the recording");
    tokio::task::spawn_blocking(|| std::io::stdin().read_line(&mut String::new())).await??;
    Ok(())
}

fn main() -> Result<(), BoxError> {
    let mut out = String::from("service.data");
    let mut mode = Mode::Itself(40);
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--serve" => mode = Mode::Serve(SocketAddr::from(([127, 0, 0, 1], 3000))),
            _ => out = arg,
        }
    }
    let ran = run(Path::new(&out), mode, &subscriber())?;
    say(&out, &ran);
    Ok(())
}

fn say(out: &str, ran: &Ran) {
    let ok = ran.statuses.iter().filter(|&&s| s == 200).count();
    if !ran.statuses.is_empty() {
        println!("{} requests, {ok} answered 200", ran.statuses.len());
    }
    println!(
        "{} snapshot(s) taken on a slow request ({} more within a second of one, not taken)",
        ran.snapshots, ran.suppressed
    );
    println!(
        "{out}: {} bytes of trace, {} records, {} lost",
        ran.trace_bytes, ran.records, ran.lost
    );
    println!("look at it:");
    println!("  perfaux report -i {out}");
    println!("  perfaux script -i {out} --call-trace");
    println!("  perfaux export -i {out} -F perfetto -o trace.perfetto-trace   # ui.perfetto.dev");
    println!("  perf script -i {out}");
}

//! The instrumented request path of the built-in workload. Every function
//! enters a swtrace probe named after it (the bare name, as `probe:FUNC`
//! takes it, rather than `traced!`'s module path).

use std::hint::black_box;

use super::{UEVENT_REQUEST_DONE, UEVENT_REQUEST_START, UEVENT_SLOW_PATH, UeventSink};

/// `compute` runs fib(FIB_N) recursively: 2 * fib(FIB_N + 1) - 1 calls.
pub const FIB_N: u32 = 7;
/// Every SLOW_PATH_EVERY-th request of a worker misses the cache.
pub const SLOW_PATH_EVERY: u32 = 64;

/// One worker's loop; returns the sum of its results.
pub(crate) fn worker_loop(worker: u32, requests: u32, uevent: UeventSink) -> u64 {
    let mut sum = 0u64;
    let mut cache = Cache::new();
    for req in 0..requests {
        uevent(
            UEVENT_REQUEST_START,
            format!("worker={worker} req={req}").as_bytes(),
        );
        let text = format!("GET /item/{} worker={worker}", req * 7 + worker);
        let (result, slow) = serve_request(&text, req, &mut cache);
        if slow {
            uevent(
                UEVENT_SLOW_PATH,
                format!("worker={worker} req={req} rebuild").as_bytes(),
            );
        }
        uevent(
            UEVENT_REQUEST_DONE,
            format!("worker={worker} req={req} result={result}").as_bytes(),
        );
        sum = sum.wrapping_add(result);
    }
    sum
}

/// A tiny cache whose table is rebuilt on the slow path.
#[derive(Default)]
pub struct Cache {
    table: Vec<u64>,
    generation: u32,
}

impl Cache {
    /// An empty cache: the first request fills it.
    pub fn new() -> Self {
        Cache {
            table: Vec::new(),
            generation: 0,
        }
    }
}

/// Serves one request; returns its result and whether the slow path ran.
pub fn serve_request(text: &str, req: u32, cache: &mut Cache) -> (u64, bool) {
    let _probe = perfaux_swtrace::probe!("serve_request");
    let key = parse_request(text);
    let (hit, slow) = lookup_cache(key, req, cache);
    let value = compute(key, hit);
    let result = send_response(req, value);
    (result, slow)
}

fn parse_request(text: &str) -> u64 {
    let _probe = perfaux_swtrace::probe!("parse_request");
    // FNV-1a over the request line.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in black_box(text).bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn lookup_cache(key: u64, req: u32, cache: &mut Cache) -> (u64, bool) {
    let _probe = perfaux_swtrace::probe!("lookup_cache");
    let slow = req.is_multiple_of(SLOW_PATH_EVERY);
    if slow || cache.table.is_empty() {
        rebuild_cache(cache);
    }
    let hit = cache.table[(key % cache.table.len() as u64) as usize];
    (hit, slow)
}

fn rebuild_cache(cache: &mut Cache) {
    let _probe = perfaux_swtrace::probe!("rebuild_cache");
    cache.generation += 1;
    let g = u64::from(cache.generation);
    let mut t: Vec<u64> = (0..512u64)
        .map(|i| (i * 2_654_435_761 + g) % 10_007)
        .collect();
    t.sort_unstable();
    cache.table = t;
}

fn compute(key: u64, hit: u64) -> u64 {
    let _probe = perfaux_swtrace::probe!("compute");
    let f = fib(FIB_N);
    let m = mat_mul(key ^ hit);
    f.wrapping_add(m)
}

fn fib(n: u32) -> u64 {
    let _probe = perfaux_swtrace::probe!("fib");
    if n < 2 {
        u64::from(n)
    } else {
        fib(n - 1) + fib(n - 2)
    }
}

fn mat_mul(seed: u64) -> u64 {
    let _probe = perfaux_swtrace::probe!("mat_mul");
    let a: [[u64; 4]; 4] = std::array::from_fn(|i| {
        std::array::from_fn(|j| seed.rotate_left((i * 4 + j) as u32) & 0xff)
    });
    let mut c = [[0u64; 4]; 4];
    for i in 0..4 {
        for j in 0..4 {
            for (k, row) in a.iter().enumerate() {
                c[i][j] = c[i][j].wrapping_add(a[i][k].wrapping_mul(row[j]));
            }
        }
    }
    black_box(c)
        .iter()
        .flatten()
        .fold(0u64, |x, &y| x.wrapping_add(y))
}

fn send_response(req: u32, value: u64) -> u64 {
    let _probe = perfaux_swtrace::probe!("send_response");
    let line = format!("200 OK req={req} value={value}");
    line.len() as u64 + value % 1000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fib_is_fibonacci_and_requests_are_deterministic() {
        assert_eq!(fib(FIB_N), 13);
        let mut c1 = Cache::new();
        let mut c2 = Cache::new();
        assert_eq!(
            serve_request("GET /item/3", 1, &mut c1),
            serve_request("GET /item/3", 1, &mut c2)
        );
        assert!(
            serve_request("GET /item/3", 0, &mut c1).1,
            "request 0 takes the slow path"
        );
        assert!(!serve_request("GET /item/3", 1, &mut c1).1);
    }
}

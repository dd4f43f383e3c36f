//! Speed of the perf buffer's hot paths, each beside a baseline measured in
//! the same run (figures in BENCHMARKS.md):
//!
//! - `output/record_32B`: `perf_output_begin` + 32-byte copy +
//!   `perf_output_end` (target: at most 10 ns), on an SMP ring and on a
//!   per-thread ring, vs a plain 32-byte copy into a Vec-backed buffer at a
//!   moving offset;
//! - `drain/1MiB`: a consumer draining 1 MiB of 64-byte records (copy out,
//!   tail, parse every header; target: at least 5 GB/s) vs a memcpy of 1 MiB;
//! - `aux_copy/{4KiB,60KiB}`: `perf_output_copy_aux` of a range across the
//!   AUX area's wrap (target: at least 0.8 of memcpy) vs a memcpy of the same size;
//! - `aux_write/16B`: a tracer's 16-byte write through `RawAuxWriter`
//!   vs a plain 16-byte copy.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use perfaux_abi::mmap_page::offsets;
use perfaux_abi::{Endianness, PerfEventHeader};
use perfaux_ring::{
    AuxConfig, DataConfig, LostInfo, PerfBuffer, PerfMmap, RingLayout, RingMemory, Wakeup,
};

const NO_LOST: LostInfo<'static> = LostInfo {
    id: 0,
    sample_id: &[],
};

fn record(size: usize) -> Vec<u8> {
    let mut r = PerfEventHeader::new(9, 0, size as u16)
        .to_bytes(Endianness::NATIVE)
        .to_vec();
    r.resize(size, 0xa5);
    r
}

fn output(c: &mut Criterion) {
    let mut g = c.benchmark_group("output");
    let rec = record(32);
    // 64 data pages; the consumer side is simulated by handing the bytes
    // back every 1024 records, so the ring never fills.
    let mem = Arc::new(RingMemory::heap(RingLayout::new(64, 0).unwrap()).unwrap());
    let rb = PerfBuffer::new(mem.clone(), DataConfig::default()).unwrap();
    let head = mem.user_word(offsets::DATA_HEAD);
    let tail = mem.user_word(offsets::DATA_TAIL);
    g.bench_function("record_32B", |b| {
        b.iter_custom(|iters| {
            let start = std::time::Instant::now();
            for i in 0..iters {
                if i % 1024 == 0 {
                    tail.store(head.load(Ordering::Acquire), Ordering::Release);
                }
                rb.output_record(black_box(&rec), &NO_LOST).unwrap();
            }
            start.elapsed()
        })
    });
    // The same on a per-thread ring (the kernel's per-CPU case: local_t
    // operations, no `lock` prefix).
    let mem = Arc::new(RingMemory::heap(RingLayout::new(64, 0).unwrap()).unwrap());
    // SAFETY: only this benchmark's thread writes the ring.
    let rb = unsafe {
        PerfBuffer::new_per_thread(mem.clone(), DataConfig::default(), Arc::new(Wakeup::new()))
    }
    .unwrap();
    let head = mem.user_word(offsets::DATA_HEAD);
    let tail = mem.user_word(offsets::DATA_TAIL);
    g.bench_function("record_32B_per_thread", |b| {
        b.iter_custom(|iters| {
            let start = std::time::Instant::now();
            for i in 0..iters {
                if i % 1024 == 0 {
                    tail.store(head.load(Ordering::Acquire), Ordering::Release);
                }
                rb.output_record(black_box(&rec), &NO_LOST).unwrap();
            }
            start.elapsed()
        })
    });
    let mut buf = vec![0u8; 64 * 4096];
    let mask = buf.len() - 1;
    let mut pos = 0usize;
    g.bench_function("baseline_copy_32B", |b| {
        b.iter(|| {
            let off = pos & mask;
            buf[off..off + 32].copy_from_slice(black_box(&rec));
            pos += 32;
        })
    });
    g.finish();
}

fn drain(c: &mut Criterion) {
    const DRAIN: usize = 1 << 20;
    let mut g = c.benchmark_group("drain");
    g.throughput(Throughput::Bytes(DRAIN as u64));
    // A 2 MiB data area full of 64-byte records: any 64-aligned position
    // starts one, so each iteration publishes 1 MiB more and drains it.
    let mem = Arc::new(RingMemory::heap(RingLayout::new(512, 0).unwrap()).unwrap());
    {
        let filler = PerfBuffer::new(
            mem.clone(),
            DataConfig {
                writable: false,
                ..DataConfig::default()
            },
        )
        .unwrap();
        let rec = record(64);
        for _ in 0..mem.layout().data_size / 64 {
            filler.output_record(&rec, &NO_LOST).unwrap();
        }
    }
    let head = mem.user_word(offsets::DATA_HEAD);
    let mut md = PerfMmap::new(mem.clone());
    g.bench_function("1MiB_64B_records", |b| {
        b.iter(|| {
            head.store(md.tail() + DRAIN as u64, Ordering::Release);
            let mut bytes = 0usize;
            for r in md.read_records().unwrap() {
                bytes += r.unwrap().bytes.len();
            }
            assert_eq!(bytes, DRAIN);
        })
    });
    let src = vec![0x5au8; DRAIN];
    let mut dst = vec![0u8; DRAIN];
    g.bench_function("baseline_memcpy_1MiB", |b| {
        b.iter(|| dst.copy_from_slice(black_box(&src)))
    });
    g.finish();
}

fn aux(c: &mut Criterion) {
    let mut g = c.benchmark_group("aux_copy");
    // 256 KiB AUX area, overwrite mode; ranges end 1 KiB past the wrap.
    let mem = Arc::new(RingMemory::heap(RingLayout::new(1, 64).unwrap()).unwrap());
    let mut rb = PerfBuffer::new(mem.clone(), DataConfig::default()).unwrap();
    rb.rb_alloc_aux(AuxConfig {
        writable: false,
        aux_watermark: 0,
    })
    .unwrap();
    let aux = rb.aux().unwrap();
    let size = aux.aux_size();
    {
        // Fault the area in, as a PMU that has traced would have.
        let h = aux.output_begin().unwrap();
        let fill = vec![0x5cu8; size as usize];
        h.write_at(0, &fill).unwrap();
    }
    for len in [4096usize, 60 * 1024] {
        g.throughput(Throughput::Bytes(len as u64));
        let to = size + 1024;
        let from = to - len as u64;
        let mut out = vec![0u8; len];
        g.bench_function(format!("{}KiB_across_wrap", len / 1024), |b| {
            b.iter(|| {
                aux.copy_aux_to_slice(black_box(from), to, &mut out)
                    .unwrap()
            })
        });
        let mut sink: Vec<u8> = Vec::with_capacity(len);
        g.bench_function(format!("{}KiB_across_wrap_into_sink", len / 1024), |b| {
            b.iter(|| {
                sink.clear();
                aux.copy_aux(black_box(from), to, &mut sink).unwrap();
            })
        });
        let src = vec![0x33u8; len];
        g.bench_function(format!("baseline_memcpy_{}KiB", len / 1024), |b| {
            b.iter(|| out.copy_from_slice(black_box(&src)))
        });
    }
    g.finish();

    let mut g = c.benchmark_group("aux_write");
    let h = aux.output_begin().unwrap();
    // SAFETY: overwrite mode, no consumer reads the area during the bench,
    // and the writer is dropped before the handle.
    let w = unsafe { h.raw_writer() };
    let rec = [0x11u8; 16];
    let mut pos = 0u64;
    g.bench_function("raw_16B", |b| {
        b.iter(|| {
            // SAFETY: see raw_writer above; 16 <= aux_size.
            unsafe { w.write(black_box(pos), &rec) };
            pos += 16;
        })
    });
    let mut buf = vec![0u8; size as usize];
    let mask = buf.len() - 1;
    g.bench_function("baseline_copy_16B", |b| {
        b.iter(|| {
            let off = pos as usize & mask;
            buf[off..off + 16].copy_from_slice(black_box(&rec));
            pos += 16;
        })
    });
    drop(h);
    g.finish();
}

criterion_group!(benches, output, drain, aux);
criterion_main!(benches);

//! The user stacks of `--call-graph dwarf` samples (PERF_SAMPLE_REGS_USER and
//! PERF_SAMPLE_STACK_USER) unwound into call chains with the objects' CFI (`.eh_frame`, its
//! `.eh_frame_hdr` index, `.debug_frame`), as perf unwinds them with libdw or libunwind and
//! samply with framehop, the crate used here: it recovers only what return addresses need
//! (rip, rsp, rbp), falls back to frame pointers where an address has no CFI, and caches the
//! rules by address.
//!
//! The modules of a process are its executable maps (MMAP/MMAP2), each given to the unwinder
//! with its load bias from the ELF's PT_LOAD that holds the map's file offset. A process's
//! unwinder is made when its first stack is unwound and made again after a map of it changes
//! (an exec, a dlopen). Each object's sections are read once, whoever maps it.
//!
//! Nothing of the recording is trusted: the registers and stack bytes are the sample's, read
//! in bounds (an address outside the copied stack ends the walk); the walk stops after
//! [`MAX_FRAMES`] frames, and a file that is gone, changed or not ELF gives no module (its
//! frames end the chain, as perf's "no map").

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::sync::Arc;

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, Module, Unwinder};
use object::{Object, ObjectSection, ObjectSegment};

/// The deepest chain taken from one stack (perf's default `max-stack`).
pub const MAX_FRAMES: usize = 127;

/// The page size maps are aligned to (x86_64).
const PAGE: u64 = 4096;

/// perf's x86_64 register numbers (arch/x86/include/uapi/asm/perf_regs.h).
const REG_BP: u32 = 6;
const REG_SP: u32 = 7;
const REG_IP: u32 = 8;

/// An executable map of a process.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ExecMap {
    end: u64,
    pgoff: u64,
    path: String,
}

/// The sections of one object the unwinder reads, and its loadable segments (file offset,
/// file size, vaddr) for the bias of a map of it.
struct ObjectCfi {
    eh_frame: Option<(Range<u64>, Arc<[u8]>)>,
    eh_frame_hdr: Option<(Range<u64>, Arc<[u8]>)>,
    debug_frame: Option<Arc<[u8]>>,
    text: Option<Range<u64>>,
    /// Loadable segments: (file offset, file size, vaddr, executable).
    loads: Vec<(u64, u64, u64, bool)>,
}

impl ObjectCfi {
    fn read(path: &str) -> Option<ObjectCfi> {
        let data = std::fs::read(path).ok()?;
        let file = object::File::parse(&*data).ok()?;
        if file.architecture() != object::Architecture::X86_64 {
            return None;
        }
        let section = |name: &str| {
            let s = file.section_by_name(name)?;
            let bytes = s.uncompressed_data().ok()?;
            Some((
                s.address()..s.address().saturating_add(s.size()),
                Arc::<[u8]>::from(&*bytes),
            ))
        };
        let loads = file
            .segments()
            .map(|s| {
                let (off, size) = s.file_range();
                let exec = matches!(
                    s.flags(),
                    object::SegmentFlags::Elf { p_flags } if p_flags & object::elf::PF_X != 0
                );
                (off, size, s.address(), exec)
            })
            .collect();
        Some(ObjectCfi {
            eh_frame: section(".eh_frame"),
            eh_frame_hdr: section(".eh_frame_hdr"),
            debug_frame: section(".debug_frame").map(|(_, d)| d),
            text: file
                .section_by_name(".text")
                .map(|s| s.address()..s.address().saturating_add(s.size())),
            loads,
        })
    }

    /// The load bias of an executable map of this object at `start` from file offset `pgoff`:
    /// the segment the map is of says which vaddr its first byte is. The loader maps a segment
    /// from its offset rounded down to a page, which may lie inside the segment before it
    /// (which ends mid-page): of the segments whose pages hold `pgoff`, an executable one (a
    /// small binary's read-only, code and data segments can all lie in its first page, as lld
    /// lays them out), then the one starting nearest to it.
    fn bias(&self, start: u64, pgoff: u64) -> Option<u64> {
        let page_start = |off: u64| off & !(PAGE - 1);
        let &(off, _, vaddr, _) = self
            .loads
            .iter()
            .filter(|&&(off, size, _, _)| {
                page_start(off) <= pgoff && pgoff < off.saturating_add(size)
            })
            .max_by_key(|&&(off, _, _, exec)| (exec, page_start(off)))?;
        // The vaddr of the map's first byte: the segment's, moved back by as much as the map
        // starts before it in the file.
        let svma = vaddr.wrapping_sub(off).wrapping_add(pgoff);
        Some(start.wrapping_sub(svma))
    }
}

/// One process's unwinder, for the maps it was made from.
struct ProcessUnwinder {
    unwinder: UnwinderX86_64<Arc<[u8]>>,
}

/// The unwinders of a recording's processes, their maps and the objects' CFI.
#[derive(Default)]
pub struct StackUnwinder {
    maps: HashMap<u32, BTreeMap<u64, ExecMap>>,
    processes: HashMap<u32, ProcessUnwinder>,
    objects: HashMap<String, Option<Arc<ObjectCfi>>>,
    cache: Option<Box<CacheX86_64>>,
}

impl StackUnwinder {
    /// An executable map of process `pid` (an MMAP or MMAP2 record with PROT_EXEC): it
    /// replaces the maps it overlaps, and the process's unwinder is made again.
    pub fn exec_map(&mut self, pid: u32, start: u64, len: u64, pgoff: u64, path: &str) {
        let end = start.saturating_add(len);
        let maps = self.maps.entry(pid).or_default();
        let overlapping: Vec<u64> = maps
            .range(..end)
            .filter(|(_, m)| m.end > start)
            .map(|(&s, _)| s)
            .collect();
        for s in overlapping {
            maps.remove(&s);
        }
        maps.insert(
            start,
            ExecMap {
                end,
                pgoff,
                path: path.to_owned(),
            },
        );
        self.processes.remove(&pid);
    }

    /// The return addresses of a sample of process `pid`, innermost first, each as the
    /// address to look its function up by (a return address less one, as perf and
    /// `dwfl_frame_pc` take it: the call, not what follows it): from the sample's user
    /// registers (`regs`, in `mask`'s order) and its copy of the stack from the stack
    /// pointer up. Empty if the registers lack ip, sp or bp.
    pub fn unwind(&mut self, pid: u32, mask: u64, regs: &[u64], stack: &[u8], out: &mut Vec<u64>) {
        out.clear();
        let reg = |r: u32| -> Option<u64> {
            if mask & (1 << r) == 0 {
                return None;
            }
            regs.get((mask & ((1u64 << r) - 1)).count_ones() as usize)
                .copied()
        };
        let (Some(ip), Some(sp), Some(bp)) = (reg(REG_IP), reg(REG_SP), reg(REG_BP)) else {
            return;
        };
        if !self.processes.contains_key(&pid) {
            let p = self.make(pid);
            self.processes.insert(pid, p);
        }
        let Some(p) = self.processes.get(&pid) else {
            return;
        };
        let cache = self
            .cache
            .get_or_insert_with(|| Box::new(CacheX86_64::new()));
        let mut read_stack = |addr: u64| -> Result<u64, ()> {
            let off = addr.checked_sub(sp).ok_or(())? as usize;
            let b = stack.get(off..off.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_ne_bytes(b.try_into().map_err(|_| ())?))
        };
        let mut frames = p.unwinder.iter_frames(
            ip,
            UnwindRegsX86_64::new(ip, sp, bp),
            cache,
            &mut read_stack,
        );
        while out.len() < MAX_FRAMES {
            match frames.next() {
                Ok(Some(f)) => out.push(f.address_for_lookup()),
                _ => break,
            }
        }
    }

    /// The unwinder of `pid`'s present maps.
    fn make(&mut self, pid: u32) -> ProcessUnwinder {
        let mut unwinder = UnwinderX86_64::new();
        let maps: Vec<(u64, ExecMap)> = self
            .maps
            .get(&pid)
            .map(|m| m.iter().map(|(&s, m)| (s, m.clone())).collect())
            .unwrap_or_default();
        for (start, m) in maps {
            let cfi = self
                .objects
                .entry(m.path.clone())
                .or_insert_with(|| ObjectCfi::read(&m.path).map(Arc::new))
                .clone();
            let Some(cfi) = cfi else { continue };
            let Some(bias) = cfi.bias(start, m.pgoff) else {
                continue;
            };
            let info = ExplicitModuleSectionInfo {
                base_svma: 0,
                text_svma: cfi.text.clone(),
                eh_frame_svma: cfi.eh_frame.as_ref().map(|(r, _)| r.clone()),
                eh_frame: cfi.eh_frame.as_ref().map(|(_, d)| d.clone()),
                eh_frame_hdr_svma: cfi.eh_frame_hdr.as_ref().map(|(r, _)| r.clone()),
                eh_frame_hdr: cfi.eh_frame_hdr.as_ref().map(|(_, d)| d.clone()),
                debug_frame: cfi.debug_frame.clone(),
                ..Default::default()
            };
            unwinder.add_module(Module::new(m.path.clone(), start..m.end, bias, info));
        }
        ProcessUnwinder { unwinder }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// Segments that share the map's page: the executable one gives the bias, whichever
    /// starts nearest (an lld layout: read-only at 0, code at 0x800 with vaddr 0x1800, data
    /// at 0xc00 with vaddr 0x2c00, all in file page 0); and gcc's layout, whose code segment
    /// starts mid-page after the read-only one.
    #[test]
    fn the_bias_is_the_executable_segments() {
        let lld = ObjectCfi {
            eh_frame: None,
            eh_frame_hdr: None,
            debug_frame: None,
            text: None,
            loads: vec![
                (0, 0x700, 0, false),
                (0x800, 0x300, 0x1800, true),
                (0xc00, 0x100, 0x2c00, false),
            ],
        };
        // The code mapped at 0x7000_1000 from file page 0: file offset 0 is vaddr 0x1000.
        assert_eq!(lld.bias(0x7000_1000, 0), Some(0x7000_0000));
        let gcc = ObjectCfi {
            loads: vec![(0, 0xae7c4, 0, false), (0xae7d0, 0x1dd1e0, 0xaf7d0, true)],
            ..lld
        };
        assert_eq!(
            gcc.bias(0x557b_59e0_a000, 0xae000),
            Some(0x557b_59e0_a000 - 0xaf000)
        );
    }

    /// This test binary unwinds a stack of its own: three frames deep, the copied stack and
    /// registers taken in the innermost, the maps from /proc/self/maps. The chain names the
    /// three functions in order.
    #[test]
    fn a_stack_copied_in_this_process_unwinds_through_its_callers() {
        let (ip, sp, bp, stack) = outer();
        let mut u = StackUnwinder::default();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        for l in maps.lines() {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 6 || !f[1].contains('x') {
                continue;
            }
            let (a, b) = f[0].split_once('-').unwrap();
            let start = u64::from_str_radix(a, 16).unwrap();
            let end = u64::from_str_radix(b, 16).unwrap();
            let pgoff = u64::from_str_radix(f[2], 16).unwrap();
            u.exec_map(1, start, end - start, pgoff, f[5]);
        }
        let mask = (1 << REG_BP) | (1 << REG_SP) | (1 << REG_IP);
        let mut out = Vec::new();
        u.unwind(1, mask, &[bp, sp, ip], &stack, &mut out);
        let inner = inner as fn() -> _ as usize as u64;
        let middle = middle as fn() -> _ as usize as u64;
        let outer_fn = outer as fn() -> _ as usize as u64;
        // Each frame's function, by the nearest of the three entries below its address.
        let which = |a: u64| {
            [(inner, "inner"), (middle, "middle"), (outer_fn, "outer")]
                .into_iter()
                .filter(|&(f, _)| f <= a && a - f < 4096)
                .min_by_key(|&(f, _)| a - f)
                .map(|(_, n)| n)
        };
        let names: Vec<_> = out.iter().filter_map(|&a| which(a)).collect();
        assert!(
            names.starts_with(&["inner", "middle", "outer"]),
            "{names:?} from {out:x?}"
        );
        // A stack cut at its first word ends the walk at the first frame.
        u.unwind(1, mask, &[bp, sp, ip], &stack[..8], &mut out);
        assert!(out.len() <= 2, "{out:x?}");
    }

    #[inline(never)]
    fn outer() -> (u64, u64, u64, Vec<u8>) {
        let r = middle();
        std::hint::black_box(r)
    }

    #[inline(never)]
    fn middle() -> (u64, u64, u64, Vec<u8>) {
        let r = inner();
        std::hint::black_box(r)
    }

    /// Its own ip, sp and bp and 8 KiB of its stack from sp up.
    #[inline(never)]
    fn inner() -> (u64, u64, u64, Vec<u8>) {
        let (ip, sp, bp): (u64, u64, u64);
        // SAFETY: reads rip (lea), rsp and rbp into registers; no memory is touched.
        unsafe {
            std::arch::asm!(
                "lea {ip}, [rip]",
                "mov {sp}, rsp",
                "mov {bp}, rbp",
                ip = out(reg) ip,
                sp = out(reg) sp,
                bp = out(reg) bp,
            );
        }
        // The stack's mapping ends the copy (a thread's stack may hold less than 8 KiB above
        // sp).
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let end = maps
            .lines()
            .filter_map(|l| {
                let (a, b) = l.split_whitespace().next()?.split_once('-')?;
                Some((
                    u64::from_str_radix(a, 16).ok()?,
                    u64::from_str_radix(b, 16).ok()?,
                ))
            })
            .find(|&(a, b)| a <= sp && sp < b)
            .map(|(_, b)| b)
            .unwrap();
        let len = (end - sp).min(8192) as usize;
        let mut stack = vec![0u8; len];
        // SAFETY: [sp, sp + len) lies in this thread's stack mapping (found above), readable;
        // copied as bytes.
        unsafe { std::ptr::copy_nonoverlapping(sp as *const u8, stack.as_mut_ptr(), len) };
        std::hint::black_box((ip, sp, bp, stack))
    }
}

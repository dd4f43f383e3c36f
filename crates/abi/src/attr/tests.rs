//! Layout and rule tests for `perf_event_attr`, written against
//! include/uapi/linux/perf_event.h (offsets, flag bits, sizes) and kernel/events/core.c
//! `perf_copy_attr()`.

use super::*;
use crate::consts::*;

type Setter = fn(&mut PerfEventAttr, u64);

/// (field, offset, width in bytes, setter): `struct perf_event_attr` in the UAPI header.
const FIELDS: &[(&str, usize, usize, Setter)] = &[
    ("type", 0, 4, |a, v| a.type_ = v as u32),
    ("config", 8, 8, |a, v| a.config = v),
    ("sample_period", 16, 8, |a, v| a.sample_period = v),
    ("sample_type", 24, 8, |a, v| a.sample_type = v),
    ("read_format", 32, 8, |a, v| a.read_format = v),
    ("flags", 40, 8, |a, v| {
        a.flags = AttrFlags::from_bits_retain(v)
    }),
    ("wakeup_events", 48, 4, |a, v| a.wakeup_events = v as u32),
    ("bp_type", 52, 4, |a, v| a.bp_type = v as u32),
    ("config1", 56, 8, |a, v| a.config1 = v),
    ("config2", 64, 8, |a, v| a.config2 = v),
    ("branch_sample_type", 72, 8, |a, v| a.branch_sample_type = v),
    ("sample_regs_user", 80, 8, |a, v| a.sample_regs_user = v),
    ("sample_stack_user", 88, 4, |a, v| {
        a.sample_stack_user = v as u32
    }),
    ("clockid", 92, 4, |a, v| a.clockid = v as u32 as i32),
    ("sample_regs_intr", 96, 8, |a, v| a.sample_regs_intr = v),
    ("aux_watermark", 104, 4, |a, v| a.aux_watermark = v as u32),
    ("sample_max_stack", 108, 2, |a, v| {
        a.sample_max_stack = v as u16
    }),
    ("__reserved_2", 110, 2, |a, v| a.reserved_2 = v as u16),
    ("aux_sample_size", 112, 4, |a, v| {
        a.aux_sample_size = v as u32
    }),
    ("aux_action", 116, 4, |a, v| {
        a.aux_action = AuxAction::from_bits_retain(v as u32)
    }),
    ("sig_data", 120, 8, |a, v| a.sig_data = v),
    ("config3", 128, 8, |a, v| a.config3 = v),
    ("config4", 136, 8, |a, v| a.config4 = v),
];

fn value_bytes(v: u64, width: usize, e: Endianness) -> Vec<u8> {
    match (width, e) {
        (2, _) => e.u16_bytes(v as u16).to_vec(),
        (4, _) => e.u32_bytes(v as u32).to_vec(),
        _ => e.u64_bytes(v).to_vec(),
    }
}

/// A value whose every byte differs and is non-zero, so a misplaced or
/// swapped byte shows.
fn distinct(width: usize, i: usize) -> u64 {
    let base = 0x8877_6655_4433_2211u64.wrapping_add(i as u64 * 0x0101_0101_0101_0101);
    match width {
        2 => base & 0xffff,
        4 => base & 0xffff_ffff,
        _ => base,
    }
}

#[test]
fn every_field_sits_at_its_upstream_offset() {
    for e in [Endianness::Little, Endianness::Big] {
        for (i, &(name, off, width, set)) in FIELDS.iter().enumerate() {
            let mut a = PerfEventAttr::default();
            let v = distinct(width, i);
            set(&mut a, v);
            let bytes = a.to_bytes(PERF_ATTR_SIZE_VER9, e);
            let mut want = vec![0u8; 144];
            want[4..8].copy_from_slice(&e.u32_bytes(144));
            want[off..off + width].copy_from_slice(&value_bytes(v, width, e));
            assert_eq!(bytes, want, "field {name} at {off}, {e:?}");
            let (back, n) = PerfEventAttr::parse(&bytes, e).unwrap();
            assert_eq!(n, 144);
            let mut expect = a;
            expect.size = 144;
            assert_eq!(back, expect, "field {name}");
        }
    }
}

#[test]
fn union_accessors_alias_their_storage() {
    let mut a = PerfEventAttr::default();
    a.set_sample_freq(4000);
    assert_eq!((a.sample_period, a.sample_freq()), (4000, 4000));
    a.set_wakeup_watermark(1 << 20);
    assert_eq!(a.wakeup_events, 1 << 20);
    for (set, get) in [
        (
            PerfEventAttr::set_bp_addr as fn(&mut PerfEventAttr, u64),
            PerfEventAttr::bp_addr as fn(&PerfEventAttr) -> u64,
        ),
        (PerfEventAttr::set_kprobe_func, PerfEventAttr::kprobe_func),
        (PerfEventAttr::set_uprobe_path, PerfEventAttr::uprobe_path),
    ] {
        let mut a = PerfEventAttr::default();
        set(&mut a, 0xdead_beef);
        assert_eq!((get(&a), a.config1), (0xdead_beef, 0xdead_beef));
    }
    for (set, get) in [
        (
            PerfEventAttr::set_bp_len as fn(&mut PerfEventAttr, u64),
            PerfEventAttr::bp_len as fn(&PerfEventAttr) -> u64,
        ),
        (PerfEventAttr::set_kprobe_addr, PerfEventAttr::kprobe_addr),
        (PerfEventAttr::set_probe_offset, PerfEventAttr::probe_offset),
    ] {
        let mut a = PerfEventAttr::default();
        set(&mut a, 0x1234);
        assert_eq!((get(&a), a.config2), (0x1234, 0x1234));
    }
}

/// The attr's flag bits, in the UAPI header's order.
const FLAG_BITS: &[(&str, u32)] = &[
    ("DISABLED", 0),
    ("INHERIT", 1),
    ("PINNED", 2),
    ("EXCLUSIVE", 3),
    ("EXCLUDE_USER", 4),
    ("EXCLUDE_KERNEL", 5),
    ("EXCLUDE_HV", 6),
    ("EXCLUDE_IDLE", 7),
    ("MMAP", 8),
    ("COMM", 9),
    ("FREQ", 10),
    ("INHERIT_STAT", 11),
    ("ENABLE_ON_EXEC", 12),
    ("TASK", 13),
    ("WATERMARK", 14),
    ("PRECISE_IP_BIT0", 15),
    ("PRECISE_IP_BIT1", 16),
    ("MMAP_DATA", 17),
    ("SAMPLE_ID_ALL", 18),
    ("EXCLUDE_HOST", 19),
    ("EXCLUDE_GUEST", 20),
    ("EXCLUDE_CALLCHAIN_KERNEL", 21),
    ("EXCLUDE_CALLCHAIN_USER", 22),
    ("MMAP2", 23),
    ("COMM_EXEC", 24),
    ("USE_CLOCKID", 25),
    ("CONTEXT_SWITCH", 26),
    ("WRITE_BACKWARD", 27),
    ("NAMESPACES", 28),
    ("KSYMBOL", 29),
    ("BPF_EVENT", 30),
    ("AUX_OUTPUT", 31),
    ("CGROUP", 32),
    ("TEXT_POKE", 33),
    ("BUILD_ID", 34),
    ("INHERIT_THREAD", 35),
    ("REMOVE_ON_EXEC", 36),
    ("SIGTRAP", 37),
    ("DEFER_CALLCHAIN", 38),
    ("DEFER_OUTPUT", 39),
    ("UEVENTS", 63),
];

#[test]
fn every_flag_bit_is_named_and_lands_in_the_flags_word() {
    assert_eq!(FLAG_BITS.len(), AttrFlags::all().iter().count());
    for &(name, bit) in FLAG_BITS {
        let f = AttrFlags::from_name(name).unwrap_or_else(|| panic!("no flag {name}"));
        assert_eq!(f.bits(), 1u64 << bit, "{name}");
        let a = PerfEventAttr {
            flags: f,
            ..Default::default()
        };
        let le = a.to_bytes(64, Endianness::Little);
        let be = a.to_bytes(64, Endianness::Big);
        let word_le = u64::from_le_bytes(le[40..48].try_into().unwrap());
        let word_be = u64::from_be_bytes(be[40..48].try_into().unwrap());
        assert_eq!((word_le, word_be), (1 << bit, 1 << bit), "{name}");
    }
    assert_eq!(AttrFlags::UEVENTS.bits(), 1 << ext::ATTR_FLAG_UEVENTS_BIT);
    // __reserved_1 is exactly bits 40..62 now that bit 63 is perfaux's.
    assert_eq!(AttrFlags::RESERVED_1_MASK, ((1u64 << 23) - 1) << 40);
    assert_eq!(AttrFlags::all().bits() & AttrFlags::RESERVED_1_MASK, 0);
}

#[test]
fn precise_ip_is_the_two_bits_at_15() {
    let mut f = AttrFlags::DISABLED | AttrFlags::MMAP_DATA;
    for p in 0..4u8 {
        f.set_precise_ip(p);
        assert_eq!(f.precise_ip(), p);
        assert_eq!(f.bits() >> 15 & 3, u64::from(p));
        assert!(f.contains(AttrFlags::DISABLED | AttrFlags::MMAP_DATA));
    }
    f.set_precise_ip(7);
    assert_eq!(f.precise_ip(), 3, "only two bits are kept");
}

#[test]
fn aux_action_bits() {
    assert_eq!(AuxAction::START_PAUSED.bits(), 1);
    assert_eq!(AuxAction::PAUSE.bits(), 2);
    assert_eq!(AuxAction::RESUME.bits(), 4);
    assert_eq!(AuxAction::from_bits_retain(0x18).reserved_3(), 0x18);
    assert_eq!(AuxAction::all().reserved_3(), 0);
}

fn full_attr() -> PerfEventAttr {
    let mut a = PerfEventAttr::default();
    for (i, &(_, _, width, set)) in FIELDS.iter().enumerate() {
        set(&mut a, distinct(width, i));
    }
    a
}

const VER_SIZES: [u32; 10] = [
    PERF_ATTR_SIZE_VER0,
    PERF_ATTR_SIZE_VER1,
    PERF_ATTR_SIZE_VER2,
    PERF_ATTR_SIZE_VER3,
    PERF_ATTR_SIZE_VER4,
    PERF_ATTR_SIZE_VER5,
    PERF_ATTR_SIZE_VER6,
    PERF_ATTR_SIZE_VER7,
    PERF_ATTR_SIZE_VER8,
    PERF_ATTR_SIZE_VER9,
];

#[test]
fn round_trip_at_every_ver_size_zeroes_what_the_size_leaves_out() {
    let full = full_attr();
    for e in [Endianness::Little, Endianness::Big] {
        for size in VER_SIZES {
            let bytes = full.to_bytes(size, e);
            assert_eq!(bytes.len(), size as usize);
            let (back, n) = PerfEventAttr::parse(&bytes, e).unwrap();
            assert_eq!(n, size as usize);
            assert_eq!(back.size, size);
            // Each field is present iff it ends within `size`.
            let mut expect = PerfEventAttr {
                size,
                ..Default::default()
            };
            for (i, &(_, off, width, set)) in FIELDS.iter().enumerate() {
                if off + width <= size as usize {
                    set(&mut expect, distinct(width, i));
                }
            }
            assert_eq!(back, expect, "size {size} {e:?}");
            // Re-encoding gives the same bytes.
            assert_eq!(back.to_bytes(size, e), bytes);
        }
    }
}

#[test]
fn parse_size_rules() {
    let e = Endianness::Little;
    let a = full_attr();
    // Stated size 0 means VER0.
    let mut b = a.to_bytes(64, e);
    b[4..8].copy_from_slice(&[0; 4]);
    let (back, n) = PerfEventAttr::parse(&b, e).unwrap();
    assert_eq!((n, back.size, back.config), (64, 64, a.config));
    // Below VER0, above a page.
    b[4..8].copy_from_slice(&e.u32_bytes(63));
    assert_eq!(
        PerfEventAttr::parse(&b, e),
        Err(AttrError::BadSize { size: 63 })
    );
    let mut big = a.to_bytes(4097, e);
    big.push(0);
    assert_eq!(
        PerfEventAttr::parse(&big, e),
        Err(AttrError::BadSize { size: 4097 })
    );
    // A newer producer's larger attr: the tail is skipped, whatever it holds.
    let mut newer = a.to_bytes(168, e);
    newer[150] = 0xff;
    let (back, n) = PerfEventAttr::parse(&newer, e).unwrap();
    assert_eq!((n, back.config4), (168, a.config4));
    // Fewer bytes than stated, or than the size field needs.
    let short = a.to_bytes(120, e);
    assert_eq!(
        PerfEventAttr::parse(&short[..100], e),
        Err(AttrError::Truncated {
            size: 120,
            len: 100
        })
    );
    assert_eq!(
        PerfEventAttr::parse(&short[..7], e),
        Err(AttrError::NoSize { len: 7 })
    );
}

#[test]
fn write_pads_past_ver9_with_zeros() {
    let a = full_attr();
    let mut sink = Vec::new();
    a.write(160, Endianness::Little, &mut sink);
    assert_eq!(sink.len(), 160);
    assert!(sink[144..].iter().all(|&b| b == 0));
    let mut head = a.to_bytes(144, Endianness::Little);
    head[4..8].copy_from_slice(&160u32.to_le_bytes());
    assert_eq!(&sink[..144], &head[..]);
    assert_eq!(u32::from_le_bytes(sink[4..8].try_into().unwrap()), 160);
}

/// A valid native attr of `size` bytes to mutate in the rule table.
fn user_bytes(a: &PerfEventAttr, size: u32) -> Vec<u8> {
    a.to_bytes(size, Endianness::NATIVE)
}

fn valid_attr() -> PerfEventAttr {
    PerfEventAttr {
        type_: PERF_TYPE_SOFTWARE,
        config: PERF_COUNT_SW_DUMMY,
        sample_type: PERF_SAMPLE_IP | PERF_SAMPLE_TID,
        sample_max_stack: 64,
        ..Default::default()
    }
}

/// One row per perf_copy_attr() rule: (rule, bytes, expected errno,
/// expected written-back size).
#[test]
fn copy_from_user_rules() {
    let v = valid_attr();
    let with = |f: fn(&mut PerfEventAttr)| {
        let mut a = v;
        f(&mut a);
        user_bytes(&a, PERF_ATTR_SIZE_LATEST)
    };
    let big_tail = {
        let mut b = user_bytes(&v, 200);
        b[199] = 1;
        b
    };
    let rows: Vec<(&str, Vec<u8>, i32, Option<u32>)> = vec![
        ("1: size unreadable", vec![0; 6], errno::EFAULT, None),
        (
            "3: size below VER0",
            user_bytes(&v, 63),
            errno::E2BIG,
            Some(144),
        ),
        (
            "3: size above PAGE_SIZE",
            user_bytes(&v, 4097),
            errno::E2BIG,
            Some(144),
        ),
        (
            "4: size past readable memory",
            user_bytes(&v, 144)[..143].to_vec(),
            errno::EFAULT,
            None,
        ),
        (
            "4: non-zero tail past sizeof",
            big_tail,
            errno::E2BIG,
            Some(144),
        ),
        (
            "5: __reserved_1",
            with(|a| a.flags = AttrFlags::from_bits_retain(1 << 40)),
            errno::EINVAL,
            None,
        ),
        (
            "5: __reserved_1 top",
            with(|a| a.flags = AttrFlags::from_bits_retain(1 << 62)),
            errno::EINVAL,
            None,
        ),
        (
            "5: __reserved_2",
            with(|a| a.reserved_2 = 1),
            errno::EINVAL,
            None,
        ),
        (
            "5: __reserved_3",
            with(|a| a.aux_action = AuxAction::from_bits_retain(1 << 3)),
            errno::EINVAL,
            None,
        ),
        (
            "6: sample_type >= MAX",
            with(|a| a.sample_type |= PERF_SAMPLE_MAX),
            errno::EINVAL,
            None,
        ),
        (
            "7: read_format >= MAX",
            with(|a| a.read_format = PERF_FORMAT_MAX),
            errno::EINVAL,
            None,
        ),
        (
            "8: branch bits >= MAX",
            with(|a| {
                a.sample_type |= PERF_SAMPLE_BRANCH_STACK;
                a.branch_sample_type = PERF_SAMPLE_BRANCH_MAX | (1 << 3);
            }),
            errno::EINVAL,
            None,
        ),
        (
            "8: only privilege levels",
            with(|a| {
                a.sample_type |= PERF_SAMPLE_BRANCH_STACK;
                a.branch_sample_type = PERF_SAMPLE_BRANCH_USER;
            }),
            errno::EINVAL,
            None,
        ),
        (
            "9: regs_user empty",
            with(|a| a.sample_type |= PERF_SAMPLE_REGS_USER),
            errno::EINVAL,
            None,
        ),
        (
            "10: stack_user >= USHRT_MAX",
            with(|a| {
                a.sample_type |= PERF_SAMPLE_STACK_USER;
                a.sample_stack_user = 0xfff8 + 8;
            }),
            errno::EINVAL,
            None,
        ),
        (
            "10: stack_user unaligned",
            with(|a| {
                a.sample_type |= PERF_SAMPLE_STACK_USER;
                a.sample_stack_user = 4100;
            }),
            errno::EINVAL,
            None,
        ),
        (
            "12: regs_intr empty",
            with(|a| a.sample_type |= PERF_SAMPLE_REGS_INTR),
            errno::EINVAL,
            None,
        ),
        (
            "14: weight and weight_struct",
            with(|a| a.sample_type |= PERF_SAMPLE_WEIGHT | PERF_SAMPLE_WEIGHT_STRUCT),
            errno::EINVAL,
            None,
        ),
        (
            "15: inherit_thread without inherit",
            with(|a| a.flags |= AttrFlags::INHERIT_THREAD),
            errno::EINVAL,
            None,
        ),
        (
            "16: remove_on_exec with enable_on_exec",
            with(|a| a.flags |= AttrFlags::REMOVE_ON_EXEC | AttrFlags::ENABLE_ON_EXEC),
            errno::EINVAL,
            None,
        ),
        (
            "17: sigtrap without remove_on_exec",
            with(|a| a.flags |= AttrFlags::SIGTRAP),
            errno::EINVAL,
            None,
        ),
    ];
    for (rule, bytes, want_errno, want_size) in rows {
        let err = PerfEventAttr::copy_from_user(&bytes).expect_err(rule);
        assert_eq!(
            (errno::name(err.errno), err.kernel_size),
            (errno::name(want_errno), want_size),
            "rule {rule}: {err}"
        );
    }
}

#[test]
fn copy_from_user_accepts_and_adjusts_as_the_kernel_does() {
    let v = valid_attr();
    // Size 0 means VER0; a VER0 attr is zero-extended.
    let mut b = user_bytes(&v, 64);
    b[4..8].copy_from_slice(&[0; 4]);
    let a = PerfEventAttr::copy_from_user(&b).unwrap();
    assert_eq!(
        (a.size, a.config, a.sample_max_stack),
        (64, v.config, 127),
        "rule 2, 11"
    );
    // Zero tail past sizeof is fine (rule 4), and the size is kept.
    let a = PerfEventAttr::copy_from_user(&user_bytes(&v, 4096)).unwrap();
    assert_eq!((a.size, a.sample_max_stack), (4096, 64));
    // perfaux's uevents bit is not __reserved_1.
    let mut u = v;
    u.flags |= AttrFlags::UEVENTS;
    assert!(PerfEventAttr::copy_from_user(&user_bytes(&u, 144)).is_ok());
    // Rule 8: privilege levels filled from the exclude bits.
    let mut br = v;
    br.sample_type |= PERF_SAMPLE_BRANCH_STACK;
    br.branch_sample_type = 1 << 3; // ANY
    br.flags |= AttrFlags::EXCLUDE_KERNEL;
    let a = PerfEventAttr::copy_from_user(&user_bytes(&br, 144)).unwrap();
    assert_eq!(
        a.branch_sample_type,
        (1 << 3) | PERF_SAMPLE_BRANCH_USER | PERF_SAMPLE_BRANCH_HV
    );
    // Rule 10 boundaries: 0xfff8 is aligned and < USHRT_MAX.
    let mut st = v;
    st.sample_type |= PERF_SAMPLE_STACK_USER;
    st.sample_stack_user = 0xfff8;
    assert!(PerfEventAttr::copy_from_user(&user_bytes(&st, 144)).is_ok());
    // Rule 12: a later failing rule wins over the regs_intr error.
    let mut late = v;
    late.sample_type |= PERF_SAMPLE_REGS_INTR;
    late.flags |= AttrFlags::SIGTRAP;
    let err = PerfEventAttr::copy_from_user(&user_bytes(&late, 144)).unwrap_err();
    assert_eq!(err.reason, "sigtrap without remove_on_exec");
    // Rules 15-17 satisfied.
    let mut ok = v;
    ok.flags |= AttrFlags::INHERIT
        | AttrFlags::INHERIT_THREAD
        | AttrFlags::REMOVE_ON_EXEC
        | AttrFlags::SIGTRAP;
    assert!(PerfEventAttr::copy_from_user(&user_bytes(&ok, 144)).is_ok());
    // x86_64: AX|IP|SP etc. is a valid register set.
    #[cfg(target_arch = "x86_64")]
    {
        let mut r = v;
        r.sample_type |= PERF_SAMPLE_REGS_USER;
        r.sample_regs_user = 0xff0fff;
        assert!(PerfEventAttr::copy_from_user(&user_bytes(&r, 144)).is_ok());
        r.sample_regs_user = 1 << 12; // DS
        assert!(PerfEventAttr::copy_from_user(&user_bytes(&r, 144)).is_err());
    }
}

use super::*;
use proptest::prelude::*;

const FUNC: u64 = 0x40_1000;
const CELLS: Cells = Cells {
    function: 0x7000_0000,
    common_entry: 0x7000_0008,
};

/// An object with no data (no jump table can be read).
fn no_data(_: u64) -> Option<u32> {
    None
}

/// Encodes `insns` (branch and RIP-relative targets absolute) at `ip`.
fn assemble(ip: u64, insns: &[Instruction]) -> Vec<u8> {
    BlockEncoder::encode(
        64,
        InstructionBlock::new(insns, ip),
        BlockEncoderOptions::NONE,
    )
    .unwrap()
    .code_buffer
}

fn decode_all(ip: u64, code: &[u8]) -> Vec<Instruction> {
    Decoder::with_ip(64, code, ip, DecoderOptions::NONE)
        .into_iter()
        .collect()
}

/// What an instruction does wherever it sits: its code, and its absolute branch or memory
/// target.
fn meaning(i: &Instruction) -> (Code, Option<u64>, Option<u64>) {
    let branch = has_near_target(i).then(|| i.near_branch_target());
    let mem = i
        .is_ip_rel_memory_operand()
        .then(|| i.ip_rel_memory_address());
    (i.code(), branch, mem)
}

#[test]
fn a_frame_pointer_prologue_moves_whole_instructions() {
    // push rbp; mov rbp, rsp; sub rsp, 0x10; ...; leave; ret
    let code = [
        0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x10, 0x90, 0x90, 0xc9, 0xc3,
    ];
    let p = plan(FUNC, &code, &no_data).unwrap();
    assert_eq!(p.patch_at, FUNC);
    assert_eq!(p.patch_len, 8, "push (1) + mov (3) + sub (4)");
    assert_eq!(p.moved(), 3);
    let stub = encode_stub(&p, 0x50_0000, CELLS).unwrap();
    let d = decode_all(0x50_0000, &stub);
    assert_eq!(d[0].code(), Code::Push_rm64);
    assert_eq!(d[0].ip_rel_memory_address(), CELLS.function);
    assert_eq!(d[1].code(), Code::Call_rm64);
    assert_eq!(d[1].ip_rel_memory_address(), CELLS.common_entry);
    assert_eq!(
        &stub[12..20],
        &code[..8],
        "position-independent bytes copied as they are"
    );
    assert_eq!(d[5].code(), Code::Jmp_rel32_64);
    assert_eq!(d[5].near_branch_target(), FUNC + 8);
}

#[test]
fn a_copied_stub_is_the_stub_the_block_encoder_makes() {
    let code = [
        0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x10, 0x90, 0x90, 0xc9, 0xc3,
    ];
    let p = plan(FUNC, &code, &no_data).unwrap();
    for stub_ip in [0x50_0000, CELLS.function - 0x7000_0000, FUNC + 0x1234_5670] {
        assert_eq!(
            encode_copied(&p, stub_ip, CELLS),
            encode_relocated(&p, stub_ip, CELLS).ok(),
            "at {stub_ip:#x}"
        );
    }
    // Out of the cells' reach: no stub.
    assert!(encode_copied(&p, CELLS.function + (3 << 30), CELLS).is_none());
}

#[test]
fn a_cet_entry_keeps_its_endbr64_and_the_jump_follows_it() {
    let code = [
        0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5, 0x53, 0x90, 0x5b, 0x5d, 0xc3,
    ];
    let p = plan(FUNC, &code, &no_data).unwrap();
    assert_eq!(p.entry, FUNC);
    assert_eq!(p.patch_at, FUNC + 4);
    assert_eq!(p.patch_len, 5);
    let bytes = patched_bytes(&p, FUNC + 0x1000).unwrap();
    assert_eq!(bytes, [0xe9, 0xf7, 0x0f, 0, 0]);
}

#[test]
fn a_function_shorter_than_the_jump_is_refused() {
    // xor eax, eax; ret
    assert!(matches!(
        plan(FUNC, &[0x31, 0xc0, 0xc3], &no_data),
        Err(Refusal::TooShort { size: 3 })
    ));
    // endbr64 then 4 bytes
    let code = [0xf3, 0x0f, 0x1e, 0xfa, 0x31, 0xc0, 0x90, 0xc3];
    assert!(matches!(
        plan(FUNC, &code, &no_data),
        Err(Refusal::TooShort { size: 8 })
    ));
}

#[test]
fn a_loop_back_into_the_first_bytes_is_refused() {
    // top: dec edi (2); jne top (2); mov eax, 1 (5); ret
    let code = [0xff, 0xcf, 0x75, 0xfc, 0xb8, 1, 0, 0, 0, 0xc3];
    assert!(matches!(
        plan(FUNC, &code, &no_data),
        Err(Refusal::BranchIntoWindow { from: 2 })
    ));
}

#[test]
fn a_jump_back_to_the_entry_is_refused() {
    // mov eax, 1 (5); dec edi; jne entry (rel8 back to 0): the loop re-enters the stub.
    let code = [0xb8, 1, 0, 0, 0, 0xff, 0xcf, 0x75, 0xf7, 0xc3];
    assert!(matches!(
        plan(FUNC, &code, &no_data),
        Err(Refusal::BranchIntoWindow { from: 7 })
    ));
}

#[test]
fn a_recursive_call_to_the_entry_is_allowed() {
    // push rbx (1); mov ebx, edi (2); test edi, edi (2); je out; call entry; out: pop rbx; ret
    let code = [
        0x53, 0x89, 0xfb, 0x85, 0xff, 0x74, 0x05, 0xe8, 0xf4, 0xff, 0xff, 0xff, 0x5b, 0xc3,
    ];
    let p = plan(FUNC, &code, &no_data).unwrap();
    assert_eq!(p.patch_len, 5);
}

#[test]
fn a_call_before_the_jumps_end_is_refused() {
    // call rax (2 bytes: its return would land in the overwritten bytes); ret ...
    let code = [0xff, 0xd0, 0x90, 0x90, 0x90, 0x90, 0xc3];
    assert!(matches!(
        plan(FUNC, &code, &no_data),
        Err(Refusal::CallInWindow { offset: 0 })
    ));
    // push rbx; call [rsp + 8]: the pushed return address would shift the operand
    let code = [0x53, 0xff, 0x54, 0x24, 0x08, 0x5b, 0xc3];
    assert!(matches!(
        plan(FUNC, &code, &no_data),
        Err(Refusal::CallInWindow { offset: 1 })
    ));
}

#[test]
fn an_indirect_call_that_ends_the_first_bytes_returns_into_the_function() {
    // push rbx; mov rax, [rdi]; call [rax + 0x10]; pop rbx; ret
    let code = [0x53, 0x48, 0x8b, 0x07, 0xff, 0x50, 0x10, 0x5b, 0xc3];
    let p = plan(FUNC, &code, &no_data).unwrap();
    assert_eq!(p.patch_len, 7);
    let stub_ip = 0x50_0000;
    let stub = encode_stub(&p, stub_ip, CELLS).unwrap();
    let d = decode_all(stub_ip, &stub);
    let codes: Vec<Code> = d.iter().map(Instruction::code).collect();
    assert_eq!(
        codes,
        [
            Code::Push_rm64,
            Code::Call_rm64,
            Code::Push_r64,
            Code::Mov_r64_rm64,
            Code::Lea_r64_m,
            Code::Mov_rm32_imm32,
            Code::Mov_rm32_imm32,
            Code::Jmp_rm64,
        ],
        "the call becomes the return address pushed and a jump: the stub never runs off its end"
    );
    assert_eq!(d[5].immediate32(), (FUNC + 7) as u32);
    // call rax at the end: the same.
    let code = [0x53, 0x48, 0x8b, 0x07, 0xff, 0xd0, 0x5b, 0xc3];
    let p = plan(FUNC, &code, &no_data).unwrap();
    let d = decode_all(stub_ip, &encode_stub(&p, stub_ip, CELLS).unwrap());
    assert_eq!(d.last().unwrap().code(), Code::Jmp_rm64);
}

#[test]
fn a_syscall_or_int3_in_the_first_bytes_falls_through_to_the_jump_back() {
    // mov eax, 39; syscall; ret
    let code = [0xb8, 39, 0, 0, 0, 0x0f, 0x05, 0xc3];
    let p = plan(FUNC, &code, &no_data).unwrap();
    assert_eq!(p.resume_at(), FUNC + 5, "the mov is enough");
    // int3; mov eax, 1; ret
    let code = [0xcc, 0xb8, 1, 0, 0, 0, 0xc3];
    let p = plan(FUNC, &code, &no_data).unwrap();
    let d = decode_all(0x50_0000, &encode_stub(&p, 0x50_0000, CELLS).unwrap());
    assert_eq!(d.last().unwrap().code(), Code::Jmp_rel32_64);
    assert_eq!(d.last().unwrap().near_branch_target(), FUNC + 6);
    // nop; nop; nop; syscall (ends the five bytes); ret
    let code = [0x90, 0x90, 0x90, 0x0f, 0x05, 0xc3];
    let p = plan(FUNC, &code, &no_data).unwrap();
    let d = decode_all(0x50_0000, &encode_stub(&p, 0x50_0000, CELLS).unwrap());
    assert_eq!(d[5].code(), Code::Syscall);
    assert_eq!(d.last().unwrap().near_branch_target(), FUNC + 5);
}

#[test]
fn a_call_that_ends_the_first_bytes_returns_into_the_function() {
    // push rbx; call rel32 (to FUNC + 6 + 0x100); jmp ...; pop rbx; ret
    let code = [0x53, 0xe8, 0x00, 0x01, 0x00, 0x00, 0xeb, 0x00, 0x5b, 0xc3];
    let p = plan(FUNC, &code, &no_data).unwrap();
    assert_eq!(p.patch_len, 6);
    let stub_ip = FUNC + (1 << 28);
    let stub = encode_stub(&p, stub_ip, CELLS).unwrap();
    let d = decode_all(stub_ip, &stub);
    let codes: Vec<Code> = d.iter().map(Instruction::code).collect();
    assert_eq!(
        codes,
        [
            Code::Push_rm64,
            Code::Call_rm64,
            Code::Push_r64,
            Code::Lea_r64_m,
            Code::Mov_rm32_imm32,
            Code::Mov_rm32_imm32,
            Code::Jmp_rel32_64,
        ]
    );
    let ret = FUNC + 6;
    assert_eq!(d[4].immediate32(), ret as u32);
    assert_eq!(d[5].immediate32(), (ret >> 32) as u32);
    assert_eq!(d[5].memory_displacement64(), 4);
    assert_eq!(d[6].near_branch_target(), FUNC + 6 + 0x100);
}

/// A function that dispatches through a table of 32-bit offsets at TABLE (as gcc -fPIC emits:
/// lea rdx, [rip + TABLE]; movsxd rax, [rdx + rdi*4]; add rax, rdx; jmp rax), whose entries
/// land at the function's offsets `cases`; its first bytes: push rbx (1), mov ebx, edi (2),
/// mov eax, edi (2).
fn dispatching(cases: &[u64]) -> (Vec<u8>, impl Fn(u64) -> Option<u32>) {
    const TABLE: u64 = FUNC + 0x1000;
    let mut code = vec![0x53, 0x89, 0xfb, 0x89, 0xf8];
    let lea_ip = FUNC + code.len() as u64;
    let rel = (TABLE - (lea_ip + 7)) as u32;
    code.extend_from_slice(&[0x48, 0x8d, 0x15]);
    code.extend_from_slice(&rel.to_le_bytes());
    code.extend_from_slice(&[0x48, 0x63, 0x04, 0xba, 0x48, 0x01, 0xd0, 0xff, 0xe0]);
    code.extend_from_slice(&[0x90; 16]);
    code.extend_from_slice(&[0x5b, 0xc3]);
    let entries: Vec<u32> = cases
        .iter()
        .map(|&c| (FUNC + c).wrapping_sub(TABLE) as u32)
        .collect();
    let read = move |a: u64| -> Option<u32> {
        let k = usize::try_from(a.checked_sub(TABLE)? / 4).ok()?;
        // Past the table: words whose offsets land far away (the table's end).
        Some(entries.get(k).copied().unwrap_or(0x4000_0000))
    };
    (code, read)
}

#[test]
fn a_jump_table_is_read_and_a_case_at_the_entry_refuses() {
    // Cases in the body: patched.
    let (code, read) = dispatching(&[0x15, 0x18, 0x1c]);
    assert!(plan(FUNC, &code, &read).is_ok());
    // A case at the third byte, inside the moved bytes: refused, at the jump.
    let (code, read) = dispatching(&[0x15, 0x03, 0x1c]);
    assert!(matches!(
        plan(FUNC, &code, &read),
        Err(Refusal::BranchIntoWindow { from: 0x13 })
    ));
    // A first case far away (a `.cold` part) does not end the table's reading.
    let (code, read) = dispatching(&[0x4000_0000, 0x15, 0x03]);
    assert!(matches!(
        plan(FUNC, &code, &read),
        Err(Refusal::BranchIntoWindow { from: 0x13 })
    ));
    // The table cannot be read: refused as unknown.
    let (code, _) = dispatching(&[0x15]);
    assert!(matches!(
        plan(FUNC, &code, &no_data),
        Err(Refusal::IndirectJump { offset: 0x13 })
    ));
}

#[test]
fn a_jump_table_is_refused_and_a_tail_call_through_a_cell_is_not() {
    // sub rsp, 8 (4); nop (1); jmp rax; ret: no table found
    let table = [0x48, 0x83, 0xec, 0x08, 0x90, 0xff, 0xe0, 0xc3];
    assert!(matches!(
        plan(FUNC, &table, &no_data),
        Err(Refusal::IndirectJump { offset: 5 })
    ));
    // sub rsp, 8 (4); add rsp, 8 (4); jmp [rip + 0x100]
    let tail = [
        0x48, 0x83, 0xec, 0x08, 0x48, 0x83, 0xc4, 0x08, 0xff, 0x25, 0, 1, 0, 0,
    ];
    assert!(plan(FUNC, &tail, &no_data).is_ok());
}

#[test]
fn a_thunk_that_only_jumps_moves_whole_and_does_not_jump_back() {
    // jmp rel32 to elsewhere, then padding the symbol covers
    let code = [0xe9, 0x00, 0x20, 0x00, 0x00, 0xcc, 0xcc];
    let p = plan(FUNC, &code, &no_data).unwrap();
    let stub = encode_stub(&p, 0x50_0000, CELLS).unwrap();
    let d = decode_all(0x50_0000, &stub);
    assert_eq!(d.len(), 3, "push, call, the moved jmp: no jump back");
    assert_eq!(d[2].near_branch_target(), FUNC + 5 + 0x2000);
}

#[test]
fn a_rip_relative_load_keeps_its_target_from_a_stub_a_gigabyte_away() {
    // mov rax, [rip + 0x2000]; ret
    let code = [0x48, 0x8b, 0x05, 0x00, 0x20, 0x00, 0x00, 0xc3];
    let p = plan(FUNC, &code, &no_data).unwrap();
    let stub_ip = FUNC + (1 << 30);
    let stub = encode_stub(&p, stub_ip, CELLS).unwrap();
    let d = decode_all(stub_ip, &stub);
    assert_eq!(d[2].code(), Code::Mov_r64_rm64);
    assert_eq!(d[2].ip_rel_memory_address(), FUNC + 7 + 0x2000);
}

#[test]
fn the_jump_reaches_only_within_two_gigabytes() {
    assert!(jmp_rel32(FUNC, FUNC + 0x7fff_0000).is_some());
    assert!(jmp_rel32(FUNC, FUNC + (3 << 30)).is_none());
    assert_eq!(
        jmp_rel32(0x1000, 0x1000),
        Some([0xe9, 0xfb, 0xff, 0xff, 0xff])
    );
}

/// The instructions a generated function may start with: plain, RIP-relative, short and near
/// conditional branches forward past the window.
fn first_insn(k: u8, disp: i32) -> Instruction {
    let far = FUNC + 0x200 + (disp as u64 & 0xff);
    match k % 6 {
        0 => Instruction::with1(Code::Push_r64, Register::RBX).unwrap(),
        1 => Instruction::with2(
            Code::Mov_r64_rm64,
            Register::RAX,
            rip_cell((FUNC as i64 + disp as i64) as u64),
        )
        .unwrap(),
        2 => Instruction::with2(
            Code::Lea_r64_m,
            Register::RDI,
            rip_cell((FUNC as i64 - disp as i64) as u64),
        )
        .unwrap(),
        3 => Instruction::with_branch(Code::Je_rel8_64, far).unwrap(),
        4 => Instruction::with_branch(Code::Jne_rel32_64, far).unwrap(),
        _ => Instruction::with2(Code::Sub_rm64_imm8, Register::RSP, 8).unwrap(),
    }
}

proptest! {
    /// Whatever a function starts with (of the movable kinds) and wherever its stub lies within
    /// reach, the moved instructions do there what they did at the entry: same operation, same
    /// absolute branch and memory targets; and the stub jumps back to where they ended.
    #[test]
    fn moved_instructions_keep_their_meaning_at_the_stub(
        kinds in proptest::collection::vec((0u8..6, 0x100i32..0x10_0000), 1..4),
        stub_off in -(FUNC as i64 - 0x1000)..(1i64 << 30),
    ) {
        let mut insns: Vec<Instruction> = kinds.iter().map(|&(k, d)| first_insn(k, d)).collect();
        // Enough bytes for the jump, then a body the branches land in.
        insns.extend((0..8).map(|_| Instruction::with(Code::Nopd)));
        let mut code = assemble(FUNC, &insns);
        code.resize(0x300, 0x90);
        code.push(0xc3);
        let original = decode_all(FUNC, &code);
        let p = plan(FUNC, &code, &no_data).unwrap();
        let stub_ip = (FUNC as i64 + stub_off) as u64 & !0xf;
        // The cells lie before the stubs in their region, as the runtime lays it out.
        let cells = Cells { function: stub_ip - 16, common_entry: stub_ip - 8 };
        let stub = encode_stub(&p, stub_ip, cells).unwrap();
        let moved = decode_all(stub_ip, &stub);
        let body: Vec<_> = moved[2..]
            .iter()
            .filter(|i| i.code() != Code::Jmp_rel32_64 || i.near_branch_target() != p.resume_at())
            .map(meaning)
            .collect();
        let expect: Vec<_> = original.iter().take(p.moved()).map(meaning).collect();
        // A short branch may become near at the stub: compare what they do.
        let norm = |v: Vec<(Code, Option<u64>, Option<u64>)>| -> Vec<(String, Option<u64>, Option<u64>)> {
            v.into_iter()
                .map(|(c, b, m)| (format!("{c:?}").replace("rel8", "rel32"), b, m))
                .collect()
        };
        prop_assert_eq!(norm(body), norm(expect));
        let last = moved.last().unwrap();
        prop_assert_eq!(last.code(), Code::Jmp_rel32_64);
        prop_assert_eq!(last.near_branch_target(), p.resume_at());
        prop_assert_eq!(p.resume_at() - FUNC, original.iter().take(p.moved()).map(|i| i.len() as u64).sum::<u64>());
    }
}

#[test]
fn alignment_padding_reads_as_nops_and_code_does_not() {
    // data16 cs nopw 0x0(%rax,%rax,1); nopl 0x0(%rax): ld.so's padding after `ret`
    let pad = [
        0x66, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0, 0x0f, 0x1f, 0x40, 0,
    ];
    assert!(all_nops(&pad, FUNC));
    assert!(all_nops(&[0x90, 0x90], FUNC));
    assert!(!all_nops(&[0x90, 0x55], FUNC), "push rbp");
    assert!(!all_nops(&[0x0f, 0x1f], FUNC), "cut short");
}

//! Whether a function's first instructions can move, and their stub.
//!
//! A patched function's entry becomes `jmp rel32` (5 bytes, after an `endbr64` that stays in
//! place for indirect calls under CET) to a stub of its own. The stub pushes the function's
//! address, calls the runtime's common entry through a cell (which records the call and
//! hijacks its return, then `ret 8` drops the pushed address), runs the instructions the jump
//! replaced, re-encoded for their new address by iced-x86's `BlockEncoder` (RIP-relative
//! operands and relative branches keep their absolute targets), and jumps back past them.
//!
//! A call that ends the moved instructions moves as a push of its return address and a jump,
//! so that the callee returns into the function (where the unwind tables describe the frame an
//! exception or a backtrace walks), not into the stub, which no unwind table covers.
//!
//! Refused, and so left untouched (here, and in the caller's checks of a function's `.cold`
//! part and of a symbol starting inside the moved bytes): a function shorter than the jump; an
//! instruction that does not decode; a call among the moved instructions that the jump does not
//! end with (its return would land in the bytes the jump overwrote); a branch anywhere in the function into the moved bytes
//! or back to the entry (it would land mid-jump, or enter the stub a second time), directly or
//! through one of its jump tables (read where the function takes their address: a RIP-relative
//! `lea` for tables of offsets, a scaled absolute operand for tables of addresses); and an
//! indirect jump other than through a RIP-relative cell in a function where no table is found. uftrace's x86-64 patcher refuses the same families, with
//! capstone.

use iced_x86::{
    BlockEncoder, BlockEncoderOptions, Code, Decoder, DecoderOptions, FlowControl, Instruction,
    InstructionBlock, MemoryOperand, OpKind, Register,
};

/// The length of the jump written at a patched entry.
pub const JMP_LEN: usize = 5;

/// The most instructions that move: each is a byte at least, and the last starts within the
/// jump's bytes.
const MAX_MOVED: usize = JMP_LEN;
/// The most bytes that move: the last instruction starts within the jump's bytes and is at
/// most 15 long.
const MAX_MOVED_BYTES: usize = JMP_LEN - 1 + 15;

/// `endbr64`'s length: a CET entry keeps it, and the jump follows it.
const ENDBR64_LEN: usize = 4;

/// Why a function is left unpatched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Fewer bytes than the jump needs after the entry's `endbr64`.
    TooShort { size: u64 },
    /// An instruction at this offset that does not decode.
    Undecodable { offset: u64 },
    /// A call among the instructions that would move.
    CallInWindow { offset: u64 },
    /// A transactional-memory instruction among those that would move.
    TransactionInWindow { offset: u64 },
    /// A branch at `from` into the moved bytes, or back to the entry.
    BranchIntoWindow { from: u64 },
    /// An indirect jump at this offset whose targets cannot be seen (a jump table).
    IndirectJump { offset: u64 },
    /// iced-x86 could not re-encode the moved instructions at the stub's address.
    Unencodable(String),
    /// The function's out-of-line part at this address branches into the moved bytes.
    ColdPartBranch { part: u64 },
    /// Another function's symbol starts at this address, inside the moved bytes.
    FunctionInside { at: u64 },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::TooShort { size } => {
                write!(f, "{size} bytes, shorter than the {JMP_LEN}-byte jump")
            }
            Refusal::Undecodable { offset } => {
                write!(f, "no instruction decodes at +{offset:#x}")
            }
            Refusal::CallInWindow { offset } => {
                write!(f, "a call at +{offset:#x} among the first bytes")
            }
            Refusal::TransactionInWindow { offset } => {
                write!(
                    f,
                    "a transaction instruction at +{offset:#x} among the first bytes"
                )
            }
            Refusal::BranchIntoWindow { from } => {
                write!(f, "the branch at +{from:#x} goes into the first bytes")
            }
            Refusal::IndirectJump { offset } => {
                write!(f, "an indirect jump at +{offset:#x} (a jump table?)")
            }
            Refusal::Unencodable(why) => write!(f, "cannot re-encode the first bytes: {why}"),
            Refusal::ColdPartBranch { part } => {
                write!(
                    f,
                    "its out-of-line part at {part:#x} branches into the first bytes"
                )
            }
            Refusal::FunctionInside { at } => {
                write!(
                    f,
                    "another function starts at {at:#x}, inside the first bytes"
                )
            }
        }
    }
}

/// A function whose entry can be patched: the instructions that move.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The function's address (what a call records).
    pub entry: u64,
    /// Where the jump is written (past an `endbr64`).
    pub patch_at: u64,
    /// The bytes the moved instructions held (at least [`JMP_LEN`]; what lies past the jump
    /// within them is never reached, and is overwritten with `int3`).
    pub patch_len: usize,
    /// The moved instructions (the first `moved_len`): fixed arrays, so that planning tens of
    /// thousands of functions at a program's start allocates nothing for them.
    moved: [Instruction; MAX_MOVED],
    moved_len: u8,
    /// The moved instructions' bytes (the first `bytes_len`).
    bytes: [u8; MAX_MOVED_BYTES],
    bytes_len: u8,
    /// Whether the moved instructions fall through (the stub then jumps back past them).
    falls_through: bool,
}

impl Plan {
    /// Where the stub jumps back to.
    pub fn resume_at(&self) -> u64 {
        self.patch_at + self.patch_len as u64
    }

    /// How many instructions move.
    pub fn moved(&self) -> usize {
        self.moved_len as usize
    }

    fn moved_insns(&self) -> &[Instruction] {
        &self.moved[..self.moved_len as usize]
    }

    fn moved_bytes(&self) -> &[u8] {
        &self.bytes[..self.bytes_len as usize]
    }
}

/// Reads the object's data: the 4 bytes (little-endian) at an address of the object, `None`
/// where it has none (used to read jump tables).
pub type ReadData<'a> = &'a dyn Fn(u64) -> Option<u32>;

/// Decides whether the function at `entry`, whose bytes are `code` (its symbol's size), can be
/// patched; `data` reads the object's jump tables.
pub fn plan(entry: u64, code: &[u8], data: ReadData<'_>) -> Result<Plan, Refusal> {
    let p = plan_window(entry, code)?;
    scan_branches(
        entry,
        code,
        p.resume_at().max(p.patch_at + p.patch_len as u64),
        data,
    )?;
    Ok(p)
}

/// [`plan`] less the scan of the whole function for branches into the moved bytes: for a
/// function whose scan passed already (the recorder's plan of the same file, which the runtime
/// is handed), only its first instructions are decoded.
pub fn plan_window(entry: u64, code: &[u8]) -> Result<Plan, Refusal> {
    let start = if code.starts_with(&[0xf3, 0x0f, 0x1e, 0xfa]) {
        ENDBR64_LEN
    } else {
        0
    };
    let size = code.len() as u64;
    if code.len() < start + JMP_LEN {
        return Err(Refusal::TooShort { size });
    }
    let patch_at = entry + start as u64;
    let mut decoder = Decoder::with_ip(64, &code[start..], patch_at, DecoderOptions::NONE);
    let mut moved = [Instruction::default(); MAX_MOVED];
    let mut moved_len = 0usize;
    let mut push = |insn: Instruction| {
        moved[moved_len] = insn;
        moved_len += 1;
    };
    let mut taken = 0usize;
    let mut falls_through = true;
    while taken < JMP_LEN {
        let insn = decoder.decode();
        let offset = insn.ip() - entry;
        if insn.is_invalid() {
            return Err(Refusal::Undecodable { offset });
        }
        taken += insn.len();
        match insn.flow_control() {
            // `syscall` and `sysenter` (iced counts them as calls) and software interrupts
            // come back to the next instruction, as any other one does.
            _ if returns_to_next(&insn) => push(insn),
            // A call that ends the moved bytes moves as a push of its return address (the
            // instruction after it, in the function) and a jump: the callee returns into the
            // function itself, where the unwind tables describe the frame.
            FlowControl::Call | FlowControl::IndirectCall
                if taken >= JMP_LEN && movable_call(&insn) =>
            {
                push(insn);
                falls_through = false;
                break;
            }
            FlowControl::Call | FlowControl::IndirectCall => {
                return Err(Refusal::CallInWindow { offset });
            }
            FlowControl::XbeginXabortXend => {
                return Err(Refusal::TransactionInWindow { offset });
            }
            FlowControl::Return
            | FlowControl::UnconditionalBranch
            | FlowControl::IndirectBranch
            | FlowControl::Exception => {
                push(insn);
                falls_through = false;
                break;
            }
            FlowControl::Interrupt | FlowControl::Next | FlowControl::ConditionalBranch => {
                push(insn)
            }
        }
    }
    let patch_len = taken.max(JMP_LEN);
    if start + patch_len > code.len() {
        return Err(Refusal::TooShort { size });
    }
    let mut bytes = [0u8; MAX_MOVED_BYTES];
    bytes[..taken].copy_from_slice(&code[start..start + taken]);
    Ok(Plan {
        entry,
        patch_at,
        patch_len,
        moved,
        moved_len: moved_len as u8,
        bytes,
        bytes_len: taken as u8,
        falls_through,
    })
}

/// Refuses a function with a branch into `[entry, window_end)`, direct or through one of its
/// jump tables, or an indirect jump whose table is not found.
fn scan_branches(
    entry: u64,
    code: &[u8],
    window_end: u64,
    data: ReadData<'_>,
) -> Result<(), Refusal> {
    let mut decoder = Decoder::with_ip(64, code, entry, DecoderOptions::NONE);
    let mut insn = Instruction::default();
    let into_window = |t: u64| (entry..window_end).contains(&t);
    let mut tables = Vec::new();
    let mut indirect = None;
    let mut indirect_jumps = 0usize;
    while decoder.can_decode() {
        decoder.decode_out(&mut insn);
        let offset = insn.ip() - entry;
        if insn.is_invalid() {
            return Err(Refusal::Undecodable { offset });
        }
        if let Some(t) = table_at(&insn) {
            tables.push(t);
        }
        match insn.flow_control() {
            FlowControl::ConditionalBranch
            | FlowControl::UnconditionalBranch
            | FlowControl::XbeginXabortXend
                if has_near_target(&insn) && into_window(insn.near_branch_target()) =>
            {
                return Err(Refusal::BranchIntoWindow { from: offset });
            }
            // A call back to the entry is a recursive call; into the moved bytes, a branch.
            FlowControl::Call
                if insn.near_branch_target() != entry && into_window(insn.near_branch_target()) =>
            {
                return Err(Refusal::BranchIntoWindow { from: offset });
            }
            FlowControl::IndirectBranch if !through_rip_cell(&insn) => {
                indirect.get_or_insert(offset);
                indirect_jumps += 1;
            }
            _ => {}
        }
    }
    let Some(jump) = indirect else {
        return Ok(());
    };
    let function = entry..entry + code.len() as u64;
    // Each indirect jump needs a table of its own that reads as one (entries landing in the
    // function): else some jump's targets are unknown.
    let mut tables_read = 0;
    for t in tables {
        // Entries outside the function in a row: cases moved out of it (gcc's `.cold` part,
        // which may lie far away) are some; a long run of them is past the table's end (or no
        // table at all).
        let mut outside = 0;
        let mut in_function = false;
        for k in 0..MAX_TABLE_ENTRIES {
            let at = t.base + k * t.stride;
            let target = match t.stride {
                4 => match data(at) {
                    Some(w) => t.base.wrapping_add(w as i32 as i64 as u64),
                    None => break,
                },
                _ => match (data(at), data(at + 4)) {
                    (Some(lo), Some(hi)) => u64::from(lo) | u64::from(hi) << 32,
                    _ => break,
                },
            };
            if !function.contains(&target) {
                outside += 1;
                if outside > MAX_OUTSIDE_IN_A_ROW {
                    break;
                }
                continue;
            }
            outside = 0;
            in_function = true;
            if into_window(target) {
                return Err(Refusal::BranchIntoWindow { from: jump });
            }
        }
        tables_read += usize::from(in_function);
    }
    if tables_read < indirect_jumps {
        return Err(Refusal::IndirectJump { offset: jump });
    }
    Ok(())
}

/// The most entries read of one table.
const MAX_TABLE_ENTRIES: u64 = 4096;
/// Entries landing outside the function in a row that still belong to a table.
const MAX_OUTSIDE_IN_A_ROW: u32 = 16;

/// A jump table a function may dispatch through: entries of `stride` bytes from `base`.
struct Table {
    base: u64,
    /// 4: 32-bit offsets from `base` (position-independent code, gcc's and LLVM's); 8:
    /// absolute addresses.
    stride: u64,
}

/// The table an instruction addresses, if it may be one: a `lea` of a RIP-relative address (the
/// base of a table of offsets), or a memory operand scaled by 8 from an absolute address (a
/// table of addresses). Over-reading (data that is no table) only refuses more functions.
fn table_at(insn: &Instruction) -> Option<Table> {
    if insn.code() == Code::Lea_r64_m && insn.memory_base() == Register::RIP {
        return Some(Table {
            base: insn.memory_displacement64(),
            stride: 4,
        });
    }
    let mem = (0..insn.op_count()).any(|i| insn.op_kind(i) == OpKind::Memory);
    (mem && insn.memory_base() == Register::None
        && insn.memory_index() != Register::None
        && insn.memory_index_scale() == 8)
        .then(|| Table {
            base: insn.memory_displacement64(),
            stride: 8,
        })
}

/// Whether an instruction iced counts as a call or an interrupt comes back to the next one
/// (it is no call of a function).
fn returns_to_next(insn: &Instruction) -> bool {
    matches!(
        insn.code(),
        Code::Syscall | Code::Sysenter | Code::Int3 | Code::Int_imm8 | Code::Into | Code::Int1
    )
}

/// A call the stub can make as a push and a jump: `call rel32`, or `call r/m64` not addressed
/// from the stack pointer (which the push would shift).
fn movable_call(insn: &Instruction) -> bool {
    match insn.code() {
        Code::Call_rel32_64 => true,
        Code::Call_rm64 => {
            insn.op0_kind() != OpKind::Memory
                || (insn.memory_base() != Register::RSP && insn.memory_index() != Register::RSP)
        }
        _ => false,
    }
}

/// Whether code at `ip` (another part of a function) branches directly into `window` (a call
/// to the window's start is a call of the function, not a branch into it).
pub fn branches_into(code: &[u8], ip: u64, window: std::ops::Range<u64>) -> bool {
    let mut decoder = Decoder::with_ip(64, code, ip, DecoderOptions::NONE);
    let mut insn = Instruction::default();
    while decoder.can_decode() {
        decoder.decode_out(&mut insn);
        if !has_near_target(&insn) {
            continue;
        }
        let t = insn.near_branch_target();
        let call = matches!(insn.flow_control(), FlowControl::Call);
        if window.contains(&t) && !(call && t == window.start) {
            return true;
        }
    }
    false
}

fn has_near_target(insn: &Instruction) -> bool {
    matches!(
        insn.op0_kind(),
        OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64
    )
}

/// `jmp [rip + cell]`: a tail call through a GOT or vtable cell, whose target is outside.
fn through_rip_cell(insn: &Instruction) -> bool {
    insn.op0_kind() == OpKind::Memory
        && insn.memory_base() == Register::RIP
        && insn.memory_index() == Register::None
}

/// The cells a stub reads: the function's address and the runtime's common entry.
#[derive(Debug, Clone, Copy)]
pub struct Cells {
    pub function: u64,
    pub common_entry: u64,
}

/// The stub of `plan` placed at `stub_ip`: push the function's address, call the common
/// entry, the moved instructions, and the jump back.
pub fn encode_stub(plan: &Plan, stub_ip: u64, cells: Cells) -> Result<Vec<u8>, Refusal> {
    if plan.moved_insns().iter().all(position_independent) {
        return encode_copied(plan, stub_ip, cells)
            .ok_or_else(|| Refusal::Unencodable("a cell or the way back is out of reach".into()));
    }
    encode_relocated(plan, stub_ip, cells)
}

/// Whether an instruction does the same wherever it is (no RIP-relative operand, no relative
/// branch): its bytes can be copied as they are.
fn position_independent(insn: &Instruction) -> bool {
    !insn.is_ip_rel_memory_operand()
        && !has_near_target(insn)
        && !matches!(insn.code(), Code::Call_rel32_64 | Code::Call_rm64)
}

/// The stub of a plan whose moved instructions are position-independent, written by hand (the
/// common case: a prologue of pushes and moves), as [`encode_relocated`] would encode it.
fn encode_copied(plan: &Plan, stub_ip: u64, cells: Cells) -> Option<Vec<u8>> {
    let rip_rel = |out: &mut Vec<u8>, opcode: [u8; 2], cell: u64| -> Option<()> {
        let next = stub_ip + out.len() as u64 + 6;
        let disp = i32::try_from(cell.wrapping_sub(next) as i64).ok()?;
        out.extend_from_slice(&opcode);
        out.extend_from_slice(&disp.to_le_bytes());
        Some(())
    };
    let mut out = Vec::with_capacity(12 + plan.moved_bytes().len() + JMP_LEN);
    rip_rel(&mut out, [0xff, 0x35], cells.function)?;
    rip_rel(&mut out, [0xff, 0x15], cells.common_entry)?;
    out.extend_from_slice(plan.moved_bytes());
    if plan.falls_through {
        out.extend_from_slice(&jmp_rel32(stub_ip + out.len() as u64, plan.resume_at())?);
    }
    Some(out)
}

/// The stub of any plan, through iced-x86's BlockEncoder.
fn encode_relocated(plan: &Plan, stub_ip: u64, cells: Cells) -> Result<Vec<u8>, Refusal> {
    let fail = |e: iced_x86::IcedError| Refusal::Unencodable(e.to_string());
    let mut block = Vec::with_capacity(plan.moved_insns().len() + 3);
    block.push(Instruction::with1(Code::Push_rm64, rip_cell(cells.function)).map_err(fail)?);
    block.push(Instruction::with1(Code::Call_rm64, rip_cell(cells.common_entry)).map_err(fail)?);
    for insn in plan.moved_insns() {
        if movable_call(insn) {
            call_as_push_and_jump(&mut block, insn).map_err(fail)?;
        } else {
            block.push(*insn);
        }
    }
    if plan.falls_through {
        block.push(Instruction::with_branch(Code::Jmp_rel32_64, plan.resume_at()).map_err(fail)?);
    }
    let encoded = BlockEncoder::encode(
        64,
        InstructionBlock::new(&block, stub_ip),
        BlockEncoderOptions::NONE,
    )
    .map_err(fail)?;
    Ok(encoded.code_buffer)
}

/// A call at the end of the moved bytes: its return address (the next instruction's, in the
/// function) pushed in two halves (no register or flag is touched), then the jump the call
/// made (`call rel32` to `jmp rel32`, `call r/m64` to `jmp r/m64`, operands kept).
fn call_as_push_and_jump(
    block: &mut Vec<Instruction>,
    call: &Instruction,
) -> Result<(), iced_x86::IcedError> {
    let ret = call.next_ip();
    block.push(Instruction::with2(
        Code::Lea_r64_m,
        Register::RSP,
        MemoryOperand::with_base_displ(Register::RSP, -8),
    )?);
    block.push(Instruction::with2(
        Code::Mov_rm32_imm32,
        MemoryOperand::with_base(Register::RSP),
        ret as u32,
    )?);
    block.push(Instruction::with2(
        Code::Mov_rm32_imm32,
        MemoryOperand::with_base_displ(Register::RSP, 4),
        (ret >> 32) as u32,
    )?);
    let mut jump = *call;
    jump.set_code(match call.code() {
        Code::Call_rel32_64 => Code::Jmp_rel32_64,
        _ => Code::Jmp_rm64,
    });
    block.push(jump);
    Ok(())
}

/// A RIP-relative memory operand at the absolute address `cell` (iced takes the target, and
/// its encoder works out the displacement).
fn rip_cell(cell: u64) -> MemoryOperand {
    MemoryOperand::with_base_displ(Register::RIP, cell as i64)
}

/// `jmp rel32` from `from` to `to`, if `to` is within reach.
pub fn jmp_rel32(from: u64, to: u64) -> Option<[u8; JMP_LEN]> {
    let rel = i32::try_from(to.wrapping_sub(from + JMP_LEN as u64) as i64).ok()?;
    let r = rel.to_le_bytes();
    Some([0xe9, r[0], r[1], r[2], r[3]])
}

/// Whether `bytes` (at `ip`) decode whole into no-op instructions (alignment padding).
pub fn all_nops(bytes: &[u8], ip: u64) -> bool {
    let mut decoder = Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE);
    let mut insn = Instruction::default();
    while decoder.can_decode() {
        decoder.decode_out(&mut insn);
        if insn.is_invalid() || !matches!(insn.mnemonic(), iced_x86::Mnemonic::Nop) {
            return false;
        }
    }
    true
}

/// The bytes a patched entry holds from [`Plan::patch_at`]: the jump to `stub`, then `int3`
/// over the rest of the moved bytes.
pub fn patched_bytes(plan: &Plan, stub: u64) -> Option<Vec<u8>> {
    let mut out = jmp_rel32(plan.patch_at, stub)?.to_vec();
    out.resize(plan.patch_len, 0xcc);
    Some(out)
}

#[cfg(test)]
mod tests;

//! What an instruction does to the flow, in the classes a trace decoder needs (libipt calls
//! them instruction classes): which need a TNT bit, which a TIP, which change the privilege
//! level. Decoding is iced-x86's; this module only sorts its answers.

use iced_x86::{Code, Decoder, DecoderOptions, FlowControl, Instruction, Mnemonic};

/// The execution mode, as MODE.Exec gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ExecMode {
    Bits16,
    Bits32,
    #[default]
    Bits64,
}

impl ExecMode {
    pub fn bitness(self) -> u32 {
        match self {
            ExecMode::Bits16 => 16,
            ExecMode::Bits32 => 32,
            ExecMode::Bits64 => 64,
        }
    }
}

/// An instruction's effect on the flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Falls through.
    Other,
    /// A conditional near jump (jcc, loop, jrcxz): one TNT bit.
    CondJump {
        target: u64,
    },
    /// A direct near jump.
    Jump {
        target: u64,
    },
    /// An indirect near jump: a TIP.
    IndirectJump,
    /// A direct near call.
    Call {
        target: u64,
    },
    /// An indirect near call: a TIP.
    IndirectCall,
    /// A near return: a TNT bit (compressed) or a TIP.
    Return,
    /// A far transfer (far call/jmp/ret, int, iret, syscall, sysret, sysenter, sysexit,
    /// vmlaunch, ...): a TIP, and it may change the mode.
    FarCall,
    FarReturn,
    FarJump,
    /// PTWRITE.
    Ptwrite,
}

/// A decoded instruction: its address, length and class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    pub ip: u64,
    pub len: u8,
    pub class: Class,
}

/// Decodes the instruction at the start of `bytes`, at address `ip`; `None` if the bytes
/// are not a whole valid instruction.
pub fn decode_insn(bytes: &[u8], ip: u64, mode: ExecMode) -> Option<Insn> {
    // JMPABS (APX: a REX2 prefix with no payload bits, opcode A1, a 64-bit absolute target),
    // which iced-x86 does not decode yet; its target is in the trace as a TIP.
    if mode == ExecMode::Bits64 && bytes.len() >= 11 && bytes[..3] == [0xd5, 0x00, 0xa1] {
        return Some(Insn {
            ip,
            len: 11,
            class: Class::IndirectJump,
        });
    }
    let mut d = Decoder::with_ip(mode.bitness(), bytes, ip, DecoderOptions::NONE);
    let mut i = Instruction::default();
    d.decode_out(&mut i);
    if i.is_invalid() {
        return None;
    }
    Some(Insn {
        ip,
        len: i.len() as u8,
        class: classify(&i),
    })
}

fn classify(i: &Instruction) -> Class {
    match i.mnemonic() {
        Mnemonic::Syscall
        | Mnemonic::Sysenter
        | Mnemonic::Int
        | Mnemonic::Int1
        | Mnemonic::Int3
        | Mnemonic::Into
        | Mnemonic::Vmcall => return Class::FarCall,
        Mnemonic::Sysret
        | Mnemonic::Sysexit
        | Mnemonic::Iret
        | Mnemonic::Iretd
        | Mnemonic::Iretq
        | Mnemonic::Retf
        | Mnemonic::Vmlaunch
        | Mnemonic::Vmresume
        | Mnemonic::Uiret
        | Mnemonic::Eretu
        | Mnemonic::Erets => return Class::FarReturn,
        Mnemonic::Ptwrite => return Class::Ptwrite,
        _ => {}
    }
    match i.flow_control() {
        FlowControl::ConditionalBranch => Class::CondJump {
            target: i.near_branch_target(),
        },
        FlowControl::UnconditionalBranch => {
            if i.is_jmp_far() {
                Class::FarJump
            } else {
                Class::Jump {
                    target: i.near_branch_target(),
                }
            }
        }
        FlowControl::IndirectBranch => {
            if i.is_jmp_far_indirect() {
                Class::FarJump
            } else {
                Class::IndirectJump
            }
        }
        FlowControl::Call => {
            if i.is_call_far() {
                Class::FarCall
            } else {
                Class::Call {
                    target: i.near_branch_target(),
                }
            }
        }
        FlowControl::IndirectCall => {
            if i.is_call_far_indirect() {
                Class::FarCall
            } else {
                Class::IndirectCall
            }
        }
        FlowControl::Return => {
            if matches!(i.code(), Code::Retfw | Code::Retfd | Code::Retfq) {
                Class::FarReturn
            } else {
                Class::Return
            }
        }
        FlowControl::Interrupt => Class::FarCall,
        _ => Class::Other,
    }
}

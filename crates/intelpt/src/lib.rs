//! Intel PT, the trace the AUX area exists for: a packet decoder for every packet of the Intel
//! SDM's chapter, and the two dumps users compare against, libipt's `ptdump` and `perf report
//! -D`.
//!
//! The decoder ([`decode()`]) is a pure function of bytes and a one-word [`Context`]; the
//! dumps ([`ptdump`], [`perf_dump`]) add the state each tool keeps (last IP, time). ptdump
//! also prints perf_event sideband ([`pevent`], [`ptdump_sideband`]) where the trace's time
//! reaches it. The flow decoder ([`flow`], printed by [`ptxed`]) walks the code of an
//! [`image`], which sideband ([`ptxed_sideband`]) builds per process as the trace goes.

pub mod args;
pub mod calls;
pub mod decode;
pub mod errata;
pub mod events;
pub mod flow;
pub mod image;
pub mod insn;
pub mod last_ip;
pub mod overlap;
pub mod packet;
pub mod perf_dump;
pub mod pevent;
pub mod ptdump;
pub mod ptdump_sideband;
pub mod ptxed;
pub mod ptxed_sideband;
pub mod timing;

pub use decode::{Context, DecodeError, Dialect, Located, Packets, decode, next_psb};
pub use packet::{IpCompression, Packet, PacketIp, Ptw, TipKind, Tnt};

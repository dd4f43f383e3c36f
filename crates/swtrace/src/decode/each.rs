//! Internal iteration: [`Decoder::try_each`], the way the views read a window.

use super::{Decoder, Event, LOOKAHEAD, parse_common};
use crate::format::Packet;

impl Decoder<'_> {
    /// Calls `f` with each event, the ones [`Iterator::next`] gives in the same order, until
    /// the window ends or `f` fails (its error is returned; the events after the one it
    /// failed on stay in the decoder). Faster than a `for` loop over the decoder for a
    /// reader that inlines `f`: `f` is called from the common ENTER and EXIT paths
    /// separately, so their events reach it in registers. Through `next` both paths (and the
    /// out-of-line rest) join in one event in memory, which the caller reads back with loads
    /// wider than the stores that wrote it: a store-forwarding stall per event.
    #[inline]
    pub fn try_each<E>(&mut self, mut f: impl FnMut(Event) -> Result<(), E>) -> Result<(), E> {
        loop {
            if self.common_due() {
                // Of what `common_due` checks, the common path changes only the position
                // (checked against `stop`: the packets before it are held whole) and
                // `queued` (set when the frame stack reaches its bound): a run of common
                // packets goes without the other checks.
                let stop = if self.more {
                    self.end - LOOKAHEAD
                } else {
                    self.end
                };
                while self.pos <= stop {
                    let at = self.pos;
                    let Some(packet) = self.buf.bytes().get(at..).and_then(parse_common) else {
                        break;
                    };
                    let offset = self.offset(at);
                    match packet {
                        Packet::Enter { id, delta } if !(self.sparse && delta == 0) => {
                            self.pos = at + 2;
                            f(self.enter_event(offset, id, delta))?;
                            if self.queued.is_some() {
                                break;
                            }
                        }
                        Packet::Exit { delta } if !(self.sparse && delta == 0) => {
                            self.pos = at + 2;
                            f(self.exit_event(offset, delta))?;
                        }
                        _ => break,
                    }
                }
            }
            match self.next_queued() {
                Some(e) => f(e)?,
                None => return Ok(()),
            }
        }
    }
}

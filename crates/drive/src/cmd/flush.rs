//! FLUSHALLDATA: everything written before it made durable (one sync of the engine's journal,
//! ordered after the connection's earlier writes). The WRITE permission is checked with the
//! request type's (`cmd::permission`).

use spindle_engine::WriteOp;

use super::Writes;

pub fn run(to: &mut dyn Writes) {
    to.write(WriteOp::Flush, true);
}

//! NOOP: answered at once, once authenticated (clients use it to check a connection).

use crate::reply::Reply;

pub fn run() -> Reply {
    Reply::ok(None)
}

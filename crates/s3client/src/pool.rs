//! Idle connections to one endpoint, shared by concurrent requests: a request takes one (or
//! opens a new one), and hands it back when its exchange finished cleanly. At most `max_idle`
//! are kept; the rest are closed, so a burst leaves no more sockets behind than that.

use parking_lot::Mutex;

use crate::conn::{S3Conn, S3Signer};

pub struct ConnPool {
    signer: S3Signer,
    idle: Mutex<Vec<S3Conn>>,
    max_idle: usize,
}

impl ConnPool {
    pub fn new(signer: S3Signer, max_idle: usize) -> ConnPool {
        ConnPool { signer, idle: Mutex::new(Vec::new()), max_idle }
    }

    /// An idle connection, or a new one (it connects on its first request).
    pub fn take(&self) -> S3Conn {
        self.idle.lock().pop().unwrap_or_else(|| S3Conn::new(self.signer.clone()))
    }

    /// Keeps `conn` for the next request. Only a connection whose last exchange ended cleanly
    /// comes back: one that failed midway may hold half an answer.
    pub fn give(&self, conn: S3Conn) {
        let mut idle = self.idle.lock();
        if idle.len() < self.max_idle {
            idle.push(conn);
        }
    }

    pub fn signer(&self) -> &S3Signer {
        &self.signer
    }

    /// Connections kept idle now.
    pub fn idle(&self) -> usize {
        self.idle.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::S3Endpoint;

    #[test]
    fn keeps_at_most_max_idle() {
        let e = S3Endpoint { endpoint: "http://127.0.0.1:9".into(), region: "us-east-1".into(), bucket: "b".into(), access_key: "a".into(), secret_key: "s".into(), tls_trust: None };
        let pool = ConnPool::new(S3Signer::new(&e).unwrap(), 2);
        let conns: Vec<S3Conn> = (0..5).map(|_| pool.take()).collect();
        for c in conns {
            pool.give(c);
        }
        assert_eq!(pool.idle(), 2);
        let _a = pool.take();
        assert_eq!(pool.idle(), 1);
    }
}

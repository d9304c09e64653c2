//! Which connections the gateway holds: at most `max_connections`, of which the last
//! `reserved` are kept for connections that have proven themselves (served a request signed
//! with a known key). A connection is unproven from its accept until then. Unproven ones are
//! capped per client address, and when their share is full the oldest of them is closed to
//! make room: sockets that trickle their headers (or open and say nothing) cannot lock real
//! clients out, they only shorten each other's lives, and a proven client's connection is
//! never closed for them.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;

/// Defaults of [`Limits`].
pub const MAX_CONNECTIONS: usize = 4096;
pub const RESERVED_FOR_PROVEN: usize = 512;
pub const UNPROVEN_PER_ADDRESS: usize = 256;
/// A request's headers must arrive within this, and an idle keep-alive connection is closed
/// after it (hyper starts the clock when it waits for a request's first byte).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(20);
/// A TLS handshake must end within this.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// A request body that sends nothing for this long, or a client that reads nothing of a
/// response for this long, loses its connection.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(60);
/// The most a request's head (request line and headers) may take; hyper answers 431 past it.
/// It bounds each connection's read buffer as well.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;
/// The most headers a request may carry (hyper answers 431 past it).
pub const MAX_HEADERS: usize = 100;
/// The largest XML body (CompleteMultipartUpload, DeleteObjects, configurations): 10,000
/// parts or 1,000 keys take well under it. s3s reads these whole.
pub const MAX_XML_BODY: u64 = 4 * 1024 * 1024;
/// The largest file a browser form upload (POST object) carries: s3s holds it whole in memory
/// before the form's policy and the request's access are decided, so it is bounded as a body
/// read whole is. Larger uploads go by PUT or multipart.
pub const MAX_POST_FILE: u64 = 16 * 1024 * 1024;
/// A form upload's fields together (the policy document, its signature, metadata).
pub const MAX_POST_FIELDS: usize = 256 * 1024;
/// Form uploads held in memory at once (each up to `MAX_POST_FILE`); more are answered
/// 503 SlowDown at once, so unsigned forms cannot fill the gateway's memory.
pub const FORMS_AT_ONCE: usize = 8;

/// The gateway's connection limits and timeouts.
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_connections: usize,
    pub reserved_for_proven: usize,
    pub unproven_per_address: usize,
    pub header_timeout: Duration,
    pub handshake_timeout: Duration,
    pub stall_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: MAX_CONNECTIONS,
            reserved_for_proven: RESERVED_FOR_PROVEN,
            unproven_per_address: UNPROVEN_PER_ADDRESS,
            header_timeout: HEADER_TIMEOUT,
            handshake_timeout: HANDSHAKE_TIMEOUT,
            stall_timeout: STALL_TIMEOUT,
        }
    }
}

impl Limits {
    pub fn check(&self) -> Result<(), String> {
        if self.max_connections == 0 || self.reserved_for_proven >= self.max_connections {
            return Err(format!(
                "max connections ({}) must be above the connections reserved for signed clients ({})",
                self.max_connections, self.reserved_for_proven
            ));
        }
        if self.unproven_per_address == 0 {
            return Err("unproven connections per address must be at least 1".into());
        }
        if [self.header_timeout, self.handshake_timeout, self.stall_timeout].contains(&Duration::ZERO) {
            return Err("timeouts must be above zero".into());
        }
        Ok(())
    }
}

/// Why a connection was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `max_connections` are open.
    Full,
    /// The address holds its share of unproven connections.
    Address,
}

#[derive(Default)]
struct State {
    open: usize,
    next: u64,
    /// Unproven connections by age (admission order): their address and what closes them.
    unproven: BTreeMap<u64, (IpAddr, Arc<Notify>)>,
    per_address: HashMap<IpAddr, usize>,
}

impl State {
    fn forget(&mut self, id: u64) -> Option<Arc<Notify>> {
        let (ip, evict) = self.unproven.remove(&id)?;
        if let Some(n) = self.per_address.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                self.per_address.remove(&ip);
            }
        }
        Some(evict)
    }
}

/// The connection books (one per gateway).
pub struct Admission {
    limits: Limits,
    state: Mutex<State>,
}

impl Admission {
    pub fn new(limits: Limits) -> Arc<Admission> {
        Arc::new(Admission { limits, state: Mutex::new(State::default()) })
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Admits a connection from `ip` as unproven, closing the oldest unproven one if their
    /// share is full.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Ticket, Refusal> {
        let mut s = self.state.lock();
        if s.open >= self.limits.max_connections {
            return Err(Refusal::Full);
        }
        if s.per_address.get(&ip).copied().unwrap_or(0) >= self.limits.unproven_per_address {
            return Err(Refusal::Address);
        }
        if s.unproven.len() >= self.limits.max_connections - self.limits.reserved_for_proven {
            if let Some(&oldest) = s.unproven.keys().next() {
                if let Some(evict) = s.forget(oldest) {
                    evict.notify_one();
                }
            }
        }
        let id = s.next;
        s.next += 1;
        let evict = Arc::new(Notify::new());
        s.unproven.insert(id, (ip, evict.clone()));
        *s.per_address.entry(ip).or_default() += 1;
        s.open += 1;
        Ok(Ticket { id, admission: self.clone(), evict })
    }

    /// (open connections, unproven ones).
    pub fn counts(&self) -> (usize, usize) {
        let s = self.state.lock();
        (s.open, s.unproven.len())
    }
}

/// One admitted connection's place; dropping it frees the place.
pub struct Ticket {
    id: u64,
    admission: Arc<Admission>,
    evict: Arc<Notify>,
}

impl Ticket {
    /// The connection served a signed request: it leaves the unproven share for good.
    pub fn prove(&self) {
        self.admission.state.lock().forget(self.id);
    }

    /// Resolves when the connection is closed to make room for a newer unproven one.
    pub async fn evicted(&self) {
        self.evict.notified().await;
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut s = self.admission.state.lock();
        s.forget(self.id);
        s.open -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max: usize, reserved: usize, per_address: usize) -> Limits {
        Limits { max_connections: max, reserved_for_proven: reserved, unproven_per_address: per_address, ..Limits::default() }
    }

    fn ip(n: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, n])
    }

    #[tokio::test]
    async fn the_oldest_unproven_connection_makes_room_and_proven_ones_stay() {
        let a = Admission::new(limits(4, 2, 10));
        let proven = a.admit(ip(1)).unwrap();
        proven.prove();
        let first = a.admit(ip(2)).unwrap();
        let second = a.admit(ip(3)).unwrap();
        assert_eq!(a.counts(), (3, 2));
        // The unproven share (4 - 2) is full: the oldest unproven one is told to close.
        let third = a.admit(ip(4)).unwrap();
        tokio::time::timeout(Duration::from_secs(60), first.evicted()).await.expect("the oldest was evicted");
        assert_eq!(a.counts(), (4, 2));
        drop(first);
        assert_eq!(a.counts(), (3, 2));
        // The proven connection was never at risk; a full house refuses.
        let fourth = a.admit(ip(5)).unwrap();
        assert_eq!(a.admit(ip(6)).err(), Some(Refusal::Full));
        drop((second, third, fourth));
        assert_eq!(a.counts(), (1, 0));
        drop(proven);
        assert_eq!(a.counts(), (0, 0));
    }

    #[test]
    fn one_address_holds_at_most_its_share_of_unproven_connections() {
        let a = Admission::new(limits(100, 10, 2));
        let one = a.admit(ip(1)).unwrap();
        let _two = a.admit(ip(1)).unwrap();
        assert_eq!(a.admit(ip(1)).err(), Some(Refusal::Address));
        assert!(a.admit(ip(2)).is_ok());
        // Proven, a connection no longer counts against its address.
        one.prove();
        assert!(a.admit(ip(1)).is_ok());
    }

    #[test]
    fn limits_are_checked() {
        assert!(Limits::default().check().is_ok());
        assert!(limits(10, 10, 1).check().is_err());
        assert!(limits(10, 1, 0).check().is_err());
    }
}

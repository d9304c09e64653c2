//! A request's admission: its in-flight permit, then its priority ticket; and its timeout.

use std::sync::Arc;

use spindle_proto::StatusCode;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{Close, Connection, Request};
use crate::reply::Reply;

impl Connection {
    /// The in-flight permit (from `permits`, if any), then the priority ticket. The permit is
    /// taken first: it is released only when an earlier answer reaches this connection's
    /// socket, so waiting for it is waiting for this client to read, and a ticket held
    /// meanwhile would stop every lower priority on the drive for as long as the client
    /// pleases. Writes held for the burst go to the engine before any wait for the ticket: they
    /// were accepted earlier, and a higher priority elsewhere must not hold them back.
    pub(super) async fn admit(&mut self, r: &Request, permits: Option<Arc<Semaphore>>) -> Result<(Option<OwnedSemaphorePermit>, crate::priority::Ticket), Close> {
        let permit = self.permit(permits).await?;
        Ok((permit, self.ticket(r).await))
    }

    /// An in-flight permit from `permits`, if the request takes one.
    pub(super) async fn permit(&mut self, permits: Option<Arc<Semaphore>>) -> Result<Option<OwnedSemaphorePermit>, Close> {
        match permits {
            Some(p) => Ok(Some(self.acquire(p).await?)),
            None => Ok(None),
        }
    }

    /// The request's priority ticket, after handing the burst's held writes to the engine if
    /// the ticket is not free at once.
    pub(super) async fn ticket(&mut self, r: &Request) -> crate::priority::Ticket {
        let state = self.state.clone();
        if state.priorities.would_wait(r.header.priority) {
            self.submit_pending_writes();
        }
        state.priorities.enter(r.header.priority).await
    }

    /// When the request's timeout (ms, counted from its arrival) runs out.
    pub(super) fn deadline(&self, r: &Request) -> Option<tokio::time::Instant> {
        r.header.timeout.filter(|t| *t > 0).map(|t| r.received + std::time::Duration::from_millis(t as u64))
    }

    /// SERVICE_BUSY for a request that waited longer than its timeout for its turn.
    pub(super) fn expired(&self, r: &Request) -> Option<Reply> {
        self.deadline(r)
            .is_some_and(|d| tokio::time::Instant::now() > d)
            .then(|| Reply::error(StatusCode::ServiceBusy, "the request waited longer than its timeout; retry with back-off"))
    }

    /// A permit from `permits`. Every permit may be held by responses still in this burst's
    /// batch, so those are handed over first whenever the wait is not instant. Permits come
    /// back as this client reads its answers: one that reads nothing for `idle_timeout_ms` is
    /// closed.
    async fn acquire(&mut self, permits: Arc<Semaphore>) -> Result<OwnedSemaphorePermit, Close> {
        match permits.clone().try_acquire_owned() {
            Ok(p) => Ok(p),
            Err(_) => {
                self.flush_out();
                let idle = std::time::Duration::from_millis(self.state.config.idle_timeout_ms);
                match tokio::time::timeout(idle, permits.acquire_owned()).await {
                    Ok(permit) => permit.map_err(|_| Close::Broken("semaphore closed".into())),
                    Err(_) => Err(Close::Broken(format!("the client read no answer for {} ms", idle.as_millis()))),
                }
            }
        }
    }
}

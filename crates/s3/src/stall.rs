//! Clients that stop moving: a connection whose peer reads nothing of a response for the stall
//! timeout fails its writes (`Watched`), and a request body that sends nothing for as long
//! fails its reads (`Stalling`). hyper then closes the connection, and what it held (its
//! buffers, the request's place in the store's queue) is freed. Reads of the connection itself
//! are not watched here: hyper's header timeout bounds the wait for a request, and while a
//! request is served hyper may keep a read pending just to notice the peer leaving.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{sleep, Sleep};

/// A deadline armed when an operation first waits and disarmed when it makes progress.
struct Deadline {
    after: Duration,
    armed: Option<Pin<Box<Sleep>>>,
}

impl Deadline {
    fn new(after: Duration) -> Deadline {
        Deadline { after, armed: None }
    }

    /// Called with the operation's poll result: `Err` once it has waited `after` in a row.
    fn watch<T>(&mut self, cx: &mut Context<'_>, polled: Poll<T>) -> Poll<Result<T, std::io::Error>> {
        match polled {
            Poll::Ready(v) => {
                self.armed = None;
                Poll::Ready(Ok(v))
            }
            Poll::Pending => {
                let after = self.after;
                let timer = self.armed.get_or_insert_with(|| Box::pin(sleep(after)));
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        self.armed = None;
                        Poll::Ready(Err(std::io::Error::new(std::io::ErrorKind::TimedOut, format!("the client made no progress for {after:?}"))))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

/// A connection whose writes fail once they have waited the stall timeout in a row.
pub struct Watched<T> {
    io: T,
    writes: Deadline,
}

impl<T> Watched<T> {
    pub fn new(io: T, stall: Duration) -> Watched<T> {
        Watched { io, writes: Deadline::new(stall) }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.io).poll_write(cx, buf);
        this.writes.watch(cx, polled).map(|r| r.and_then(|r| r))
    }

    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[std::io::IoSlice<'_>]) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.writes.watch(cx, polled).map(|r| r.and_then(|r| r))
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.io).poll_flush(cx);
        this.writes.watch(cx, polled).map(|r| r.and_then(|r| r))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.io).poll_shutdown(cx);
        this.writes.watch(cx, polled).map(|r| r.and_then(|r| r))
    }
}

/// Why a request body failed.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("the request body stalled: nothing arrived for {0:?}")]
    Stalled(Duration),
    #[error("the request body is over {0} bytes")]
    TooLarge(u64),
    #[error("{0}")]
    Http(Box<dyn std::error::Error + Send + Sync>),
}

/// A request body that fails once no frame has come for the stall timeout, and, given a
/// limit, once it has carried more bytes than that (raising the flag it was given); given a
/// piece size, it hands its bytes on in frames no larger. It raises `ended` once its last
/// byte has been read.
pub struct Stalling<B> {
    body: B,
    ended: Arc<AtomicBool>,
    frames: Deadline,
    limit: Option<(u64, Arc<AtomicBool>)>,
    seen: u64,
    piece: usize,
    /// Bytes of a frame larger than `piece` not handed on yet.
    rest: Bytes,
}

impl<B> Stalling<B> {
    pub fn new(body: B, stall: Duration) -> Stalling<B> {
        Stalling { body, ended: Arc::default(), frames: Deadline::new(stall), limit: None, seen: 0, piece: usize::MAX, rest: Bytes::new() }
    }

    /// Raises `ended` once the last byte has been read.
    pub fn reporting_end(self, ended: Arc<AtomicBool>) -> Stalling<B> {
        Stalling { ended, ..self }
    }

    /// At most `limit` bytes: past it the body fails and `exceeded` is raised.
    pub fn limited(self, limit: u64, exceeded: Arc<AtomicBool>) -> Stalling<B> {
        Stalling { limit: Some((limit, exceeded)), ..self }
    }

    /// Frames of at most `piece` bytes. s3s's form parser fails a file when a frame that
    /// ends in part of the form's boundary is followed by one of 64 KiB or more.
    pub fn in_pieces(self, piece: usize) -> Stalling<B> {
        Stalling { piece: piece.max(1), ..self }
    }
}

impl<B> Body for Stalling<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        if !this.rest.is_empty() {
            let n = this.rest.len().min(this.piece);
            return Poll::Ready(Some(Ok(Frame::data(this.rest.split_to(n)))));
        }
        if let Some((limit, exceeded)) = &this.limit {
            if this.seen > *limit || this.body.size_hint().lower() > *limit {
                exceeded.store(true, Ordering::Relaxed);
                return Poll::Ready(Some(Err(BodyError::TooLarge(*limit))));
            }
        }
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        let polled = this.frames.watch(cx, polled);
        if matches!(polled, Poll::Ready(Ok(None))) || this.body.is_end_stream() {
            this.ended.store(true, Ordering::Relaxed);
        }
        match polled {
            Poll::Ready(Ok(Some(Ok(frame)))) => {
                this.seen += frame.data_ref().map_or(0, |d| d.len() as u64);
                match frame.into_data() {
                    Ok(mut data) if data.len() > this.piece => {
                        this.rest = data.split_off(this.piece);
                        Poll::Ready(Some(Ok(Frame::data(data))))
                    }
                    Ok(data) => Poll::Ready(Some(Ok(Frame::data(data)))),
                    Err(frame) => Poll::Ready(Some(Ok(frame))),
                }
            }
            Poll::Ready(Ok(frame)) => Poll::Ready(frame.map(|f| f.map_err(|e| BodyError::Http(e.into())))),
            Poll::Ready(Err(_)) => Poll::Ready(Some(Err(BodyError::Stalled(this.frames.after)))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty() && self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let inner = self.body.size_hint();
        let rest = self.rest.len() as u64;
        let mut hint = SizeHint::new();
        hint.set_lower(inner.lower() + rest);
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper + rest);
        }
        hint
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// A peer that reads nothing: the writer fails after the stall timeout (paused time).
    #[tokio::test(start_paused = true)]
    async fn a_write_the_peer_never_reads_fails_after_the_stall_timeout() {
        let (near, _far) = tokio::io::duplex(1024);
        let mut watched = Watched::new(near, Duration::from_secs(60));
        let started = tokio::time::Instant::now();
        let err = watched.write_all(&vec![7u8; 1 << 20]).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= Duration::from_secs(60));
    }

    /// A body that sends one frame and then nothing fails after the stall timeout; one that
    /// keeps sending does not.
    #[tokio::test(start_paused = true)]
    async fn a_body_that_stops_sending_fails_after_the_stall_timeout() {
        use futures_util::stream::{self, StreamExt};
        use http_body_util::{BodyExt, StreamBody};
        type Item = Result<Frame<Bytes>, std::io::Error>;
        let first = stream::once(std::future::ready(Ok::<_, std::io::Error>(Frame::data(Bytes::from_static(b"abc")))));
        let mut body = Stalling::new(StreamBody::new(first.chain(stream::pending::<Item>())), Duration::from_secs(60));
        assert_eq!(body.frame().await.unwrap().unwrap().into_data().unwrap(), Bytes::from_static(b"abc"));
        let started = tokio::time::Instant::now();
        assert!(matches!(body.frame().await, Some(Err(BodyError::Stalled(_)))));
        assert!(started.elapsed() >= Duration::from_secs(60));

        let steady = stream::iter(0..10).then(|_| async {
            sleep(Duration::from_secs(50)).await;
            Ok::<_, std::io::Error>(Frame::data(Bytes::from_static(b"x")))
        });
        let steady = Stalling::new(StreamBody::new(Box::pin(steady)), Duration::from_secs(60));
        assert_eq!(steady.collect().await.unwrap().to_bytes().len(), 10);
    }

    /// A limited body fails past its limit and raises its flag, whether its length is declared
    /// (at once) or not (once the bytes pass it).
    #[tokio::test]
    async fn a_limited_body_fails_past_its_limit() {
        use futures_util::stream;
        use http_body_util::{BodyExt, Full, StreamBody};
        let flag = Arc::new(AtomicBool::new(false));
        let declared = Stalling::new(Full::new(Bytes::from(vec![0u8; 100])), Duration::from_secs(60)).limited(99, flag.clone());
        assert!(matches!(declared.collect().await, Err(BodyError::TooLarge(99))));
        assert!(flag.load(Ordering::Relaxed));

        let flag = Arc::new(AtomicBool::new(false));
        let frames = (0..10).map(|_| Ok::<_, std::io::Error>(Frame::data(Bytes::from_static(b"0123456789"))));
        let streamed = Stalling::new(StreamBody::new(stream::iter(frames)), Duration::from_secs(60)).limited(50, flag.clone());
        assert!(matches!(streamed.collect().await, Err(BodyError::TooLarge(50))));
        assert!(flag.load(Ordering::Relaxed));

        let flag = Arc::new(AtomicBool::new(false));
        let within = Stalling::new(Full::new(Bytes::from_static(b"abc")), Duration::from_secs(60)).limited(3, flag.clone());
        assert_eq!(within.collect().await.unwrap().to_bytes(), Bytes::from_static(b"abc"));
        assert!(!flag.load(Ordering::Relaxed));
    }

    /// A peer that reads slowly but steadily is never cut off.
    #[tokio::test(start_paused = true)]
    async fn a_slow_but_steady_reader_is_served() {
        let (near, mut far) = tokio::io::duplex(1024);
        let mut watched = Watched::new(near, Duration::from_secs(60));
        let reader = tokio::spawn(async move {
            use tokio::io::AsyncReadExt;
            let mut buf = [0u8; 1024];
            let mut got = 0;
            while got < 64 * 1024 {
                sleep(Duration::from_secs(30)).await;
                got += far.read(&mut buf).await.unwrap();
            }
            got
        });
        watched.write_all(&vec![7u8; 64 * 1024]).await.unwrap();
        assert_eq!(reader.await.unwrap(), 64 * 1024);
    }

    /// A large frame is handed on in pieces of at most the piece size, every byte in order,
    /// with the body's remaining length counting what is held back.
    #[tokio::test]
    async fn frames_are_handed_on_in_pieces() {
        use http_body_util::{BodyExt, Full};
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let mut body = Stalling::new(Full::new(Bytes::from(data.clone())), Duration::from_secs(60)).in_pieces(16 * 1024);
        let mut got = Vec::new();
        while let Some(frame) = body.frame().await {
            let piece = frame.unwrap().into_data().unwrap();
            assert!(piece.len() <= 16 * 1024);
            got.extend_from_slice(&piece);
            assert_eq!(body.size_hint().exact(), Some((data.len() - got.len()) as u64));
        }
        assert_eq!(got, data);
        assert!(body.is_end_stream());
    }
}

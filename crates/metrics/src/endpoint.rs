//! `GET /metrics` over HTTP/1.1: the registry rendered in Prometheus' text format at each
//! scrape. The server stops with its [`Endpoint`] (connections in progress included).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus_client::encoding::prometheus_text;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

/// The path Prometheus scrapes by default.
pub const METRICS_PATH: &str = "/metrics";
/// How long a connection may take to send a request's headers: one that connects and says
/// nothing (or trickles a header) is closed.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest a connection is kept, kept-alive scrapes included (a scraper reconnects).
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(300);
/// Connections served at once; one more is closed as soon as it is accepted (a Prometheus
/// server keeps one).
pub const MAX_CONNECTIONS: usize = 64;

/// A running metrics endpoint; stopped when dropped.
#[derive(Debug)]
pub struct Endpoint {
    pub local_addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl Endpoint {
    /// Stops accepting and ends every open connection.
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// The registry in Prometheus' text exposition format.
pub fn render(registry: &Registry) -> Result<String, std::fmt::Error> {
    let mut out = String::with_capacity(16 * 1024);
    prometheus_text::encode(&mut out, registry)?;
    Ok(out)
}

/// Listens on `addr` (port 0: any free port) and serves `registry` until stopped.
pub async fn serve(addr: SocketAddr, registry: Arc<Registry>) -> std::io::Result<Endpoint> {
    serve_within(addr, registry, HEADER_TIMEOUT).await
}

/// `serve`, with the time a connection has to send a request's headers.
async fn serve_within(addr: SocketAddr, registry: Arc<Registry>, header_timeout: Duration) -> std::io::Result<Endpoint> {
    let listener = TcpListener::bind(addr).await?;
    let local_addr = listener.local_addr()?;
    let (stop, mut stopped) = watch::channel(false);
    let task = tokio::spawn(async move {
        // Dropped at the end of the loop: every connection still open is aborted with it.
        let mut connections = JoinSet::new();
        loop {
            let stream = tokio::select! {
                r = listener.accept() => match r {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        tracing::warn!("metrics endpoint: accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                _ = stopped.changed() => return,
            };
            while connections.try_join_next().is_some() {}
            if connections.len() >= MAX_CONNECTIONS {
                tracing::debug!("metrics endpoint: {MAX_CONNECTIONS} connections open; one more closed");
                drop(stream);
                continue;
            }
            let registry = registry.clone();
            connections.spawn(async move {
                let service = hyper::service::service_fn(move |req| answer(req, registry.clone()));
                let connection = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(header_timeout)
                    .serve_connection(TokioIo::new(stream), service);
                if let Ok(Err(e)) = tokio::time::timeout(CONNECTION_LIFETIME, connection).await {
                    tracing::debug!("metrics endpoint: connection ended: {e}");
                }
            });
        }
    });
    Ok(Endpoint { local_addr, stop, task: Some(task) })
}

async fn answer(req: Request<Incoming>, registry: Arc<Registry>) -> Result<Response<Full<Bytes>>, Infallible> {
    let reply = |status: StatusCode, content_type: &'static str, body: String| {
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = status;
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static(content_type));
        r
    };
    const PLAIN: &str = "text/plain; charset=utf-8";
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return Ok(reply(StatusCode::METHOD_NOT_ALLOWED, PLAIN, "only GET\n".into()));
    }
    Ok(match req.uri().path() {
        METRICS_PATH => match render(&registry) {
            Ok(text) => reply(StatusCode::OK, prometheus_text::CONTENT_TYPE, text),
            Err(_) => reply(StatusCode::INTERNAL_SERVER_ERROR, PLAIN, "the metrics could not be encoded\n".into()),
        },
        "/" => reply(StatusCode::OK, PLAIN, format!("Spindle metrics: {METRICS_PATH}\n")),
        _ => reply(StatusCode::NOT_FOUND, PLAIN, format!("not found; the metrics are at {METRICS_PATH}\n")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{emit, Histogram};
    use prometheus_client::collector::Collector;
    use prometheus_client::encoding::DescriptorEncoder;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[derive(Debug, Default)]
    struct Sample {
        latency: Histogram,
    }

    impl Collector for Sample {
        fn encode(&self, mut e: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
            emit::counter(&mut e, "sample_requests", "Requests.", 3)?;
            emit::gauges(&mut e, "sample_up", "Up.", [(vec![("drive", "a\"b")], 1.0)])?;
            emit::histograms(&mut e, "sample_seconds", "Latency.", [(vec![("type", "PUT")], &self.latency)])
        }
    }

    async fn get(addr: SocketAddr, request: &str) -> String {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(request.as_bytes()).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn serves_the_registry_over_http_and_stops() {
        let sample = Arc::new(Sample::default());
        sample.latency.observe(Duration::from_micros(700));
        sample.latency.observe(Duration::from_millis(30));
        let mut registry = Registry::default();
        registry.register_collector(Box::new(sample.clone()));
        let endpoint = serve("127.0.0.1:0".parse().unwrap(), Arc::new(registry)).await.unwrap();
        let addr = endpoint.local_addr;
        let text = get(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
        assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
        assert!(text.contains("text/plain; version=0.0.4"), "{text}");
        assert!(text.contains("sample_requests_total 3"), "{text}");
        assert!(text.contains("sample_up{drive=\"a\\\"b\"} 1"), "{text}");
        // Cumulative, as Prometheus reads them.
        assert!(text.contains("sample_seconds_bucket{type=\"PUT\",le=\"0.0005\"} 0"), "{text}");
        assert!(text.contains("sample_seconds_bucket{type=\"PUT\",le=\"0.001\"} 1"), "{text}");
        assert!(text.contains("sample_seconds_bucket{type=\"PUT\",le=\"0.025\"} 1"), "{text}");
        assert!(text.contains("sample_seconds_bucket{type=\"PUT\",le=\"0.05\"} 2"), "{text}");
        assert!(text.contains("sample_seconds_bucket{type=\"PUT\",le=\"+Inf\"} 2"), "{text}");
        assert_eq!(text.matches("le=\"+Inf\"").count(), 1, "{text}");
        assert!(text.contains("sample_seconds_count{type=\"PUT\"} 2"), "{text}");
        let missing = get(addr, "GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
        assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
        let post = get(addr, "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").await;
        assert!(post.starts_with("HTTP/1.1 405"), "{post}");
        // An idle keep-alive connection does not hold the stop up.
        let _idle = tokio::net::TcpStream::connect(addr).await.unwrap();
        tokio::time::timeout(Duration::from_secs(5), endpoint.stop()).await.unwrap();
        assert!(tokio::net::TcpStream::connect(addr).await.is_err());
    }

    /// A client that connects and sends nothing, or only part of a header, is closed once the
    /// header time is up; the endpoint still serves others.
    #[tokio::test]
    async fn connections_that_send_no_request_are_closed() {
        let endpoint = serve_within("127.0.0.1:0".parse().unwrap(), Arc::new(Registry::default()), Duration::from_millis(300)).await.unwrap();
        let addr = endpoint.local_addr;
        let mut silent = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut trickle = tokio::net::TcpStream::connect(addr).await.unwrap();
        trickle.write_all(b"GET /metrics HTTP/1.1\r\nHost").await.unwrap();
        for s in [&mut silent, &mut trickle] {
            let mut out = Vec::new();
            // Closed (whatever it says first, if anything) well before this bound.
            tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await.expect("the connection was not closed").unwrap();
        }
        let text = get(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
        assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
        endpoint.stop().await;
    }
}

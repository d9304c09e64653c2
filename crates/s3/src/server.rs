//! The gateway's HTTP server (HTTP/1.1, plain or TLS) and its sweeper.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use s3s::service::{S3Service, S3ServiceBuilder};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tracing::Instrument;

use crate::admission::{Admission, Limits, Refusal, Ticket, FORMS_AT_ONCE, MAX_HEADERS, MAX_HEAD_BYTES, MAX_POST_FIELDS, MAX_POST_FILE, MAX_XML_BODY};
use crate::access::{Access, Transport, Verified};
use crate::auth::{Auth, Keys};
use crate::cors;
use crate::users::{Directory, UsersKey};
use crate::gateway::{self, Gateway};
use crate::kv::Kv;
use crate::objects::Core;
use crate::request_log;
use crate::stall::{Stalling, Watched};
use crate::tls::CertFiles;
use crate::GatewayError;

/// How long a shutdown waits for requests in progress.
const DRAIN: Duration = Duration::from_secs(10);
/// Each connection's read buffer grows to at most this (hyper's default is about 400 KiB):
/// with `MAX_CONNECTIONS` open it bounds what sockets can hold of the gateway's memory.
const CONNECTION_BUFFER: usize = 128 * 1024;
/// The largest frame a form upload's body is handed to s3s in (`Stalling::in_pieces`).
const FORM_PIECE: usize = 16 * 1024;
/// Refusals answered at once (each a short write, or a handshake and a short write); more are
/// closed without an answer.
const REFUSALS_AT_ONCE: usize = 64;

pub struct Config {
    pub kv: Kv,
    /// The administrators' keys.
    pub keys: Keys,
    /// Users (`spindle s3 user`) sign in with keys sealed by this; without it only the
    /// administrators do.
    pub users_key: Option<UsersKey>,
    /// Unreferenced data is kept this long (`objects::Core::grace`).
    pub sweep_grace: Duration,
    pub sweep_interval: Duration,
    /// How often the sweeper also scans for orphaned data (the first scan one interval after
    /// the start).
    pub orphan_scan_interval: Duration,
    pub limits: Limits,
    /// HTTPS with this certificate and key (reloaded when they change); plain HTTP without.
    pub tls: Option<CertFiles>,
    /// Storage classes besides STANDARD, each kept in an erasure-coded or remote pool of the
    /// cluster.
    pub classes: crate::classes::StorageClasses,
    /// Keys to the remote pools (external S3 buckets) this gateway writes to or sweeps.
    pub remotes: std::collections::BTreeMap<String, crate::remote::RemoteAccess>,
    /// How often the lifecycle pass runs, and its day.
    pub lifecycle: crate::lifecycle_pass::LifecycleSettings,
    /// Serve Prometheus metrics (the lifecycle pass's) on this address.
    pub metrics_listen: Option<std::net::SocketAddr>,
}

/// Serves S3 on `listener` until `shutdown` resolves, then lets requests in progress finish.
/// `ready` is called once the settings are checked against the store, before the first
/// connection is taken: a gateway that cannot serve never says it does.
pub async fn serve(listener: TcpListener, config: Config, ready: impl FnOnce(), shutdown: impl Future<Output = ()>) -> Result<(), GatewayError> {
    if config.keys.is_empty() {
        return Err(GatewayError::Invalid("the gateway needs at least one access key".into()));
    }
    config.limits.check().map_err(GatewayError::Invalid)?;
    let tls = config.tls.map(crate::tls::acceptor).transpose()?;
    let chunk = config.kv.max_value().await?;
    let stripes = crate::stripes::Stripes::open(&config.kv, &config.remotes).map_err(GatewayError::Invalid)?;
    config.classes.check(&config.kv, &stripes, chunk).map_err(GatewayError::Invalid)?;
    let core = Arc::new(Core { kv: config.kv, chunk, min_part: gateway::MIN_PART_BYTES, grace: config.sweep_grace, md5: crate::md5_lanes::Md5Lanes::start(), classes: config.classes, stripes, ids: parking_lot::Mutex::new(rand::SeedableRng::from_os_rng()), watched: Default::default(), marks_looked_for: gateway::room_for_left_marks(), turns: Default::default() });
    let sweeper = tokio::spawn(sweep_forever(core.clone(), config.sweep_interval, config.orphan_scan_interval));
    let stats = Arc::new(crate::lifecycle_pass::LifecycleStats::default());
    let lifecycle = tokio::spawn(crate::lifecycle_pass::lifecycle_forever(core.clone(), config.lifecycle, stats.clone()));
    let _metrics = match config.metrics_listen {
        Some(addr) => {
            let mut registry = spindle_metrics::Registry::default();
            registry.register_collector(Box::new(crate::lifecycle_pass::LifecycleMetrics(stats)));
            Some(spindle_metrics::serve(addr, Arc::new(registry)).await.map_err(|e| GatewayError::Invalid(format!("metrics on {addr}: {e}")))?)
        }
        None => None,
    };
    let users = config.users_key.map(|key| Arc::new(Directory::new(core.clone(), key)));
    let admins = Arc::new(config.keys);
    let service = {
        let mut b = S3ServiceBuilder::new(Gateway::new(core.clone()));
        b.set_auth(Auth { admins: admins.clone(), users: users.clone() });
        b.set_access(Access { core: core.clone(), admins, users });
        let mut limits = s3s::config::S3Config::default();
        limits.xml_max_body_size = MAX_XML_BODY as usize;
        limits.post_object_max_file_size = MAX_POST_FILE;
        limits.form_max_fields_size = MAX_POST_FIELDS;
        limits.form_max_field_size = MAX_POST_FIELDS;
        b.set_config(Arc::new(s3s::config::StaticConfigProvider::new(Arc::new(limits))));
        b.build()
    };
    ready();
    let admission = Admission::new(config.limits);
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(admission.limits().header_timeout)
        .max_headers(MAX_HEADERS)
        .max_header_size(MAX_HEAD_BYTES)
        .max_buf_size(CONNECTION_BUFFER);
    let http = Arc::new(http);
    let refusals = Arc::new(tokio::sync::Semaphore::new(REFUSALS_AT_ONCE));
    let forms = Arc::new(tokio::sync::Semaphore::new(FORMS_AT_ONCE));
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (socket, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors and the like: pause rather than spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = socket.set_nodelay(true);
        match admission.admit(peer.ip()) {
            Ok(ticket) => {
                let transport = Transport { secure: tls.is_some(), peer: peer.ip() };
                let c = Connection { service: service.clone(), http: http.clone(), ticket, watcher: graceful.watcher(), stall: admission.limits().stall_timeout, transport, core: core.clone(), forms: forms.clone() };
                tokio::spawn(c.run(socket, tls.clone(), admission.limits().handshake_timeout));
            }
            Err(refusal) => {
                let (open, unproven) = admission.counts();
                tracing::debug!(%peer, ?refusal, open, unproven, "connection refused");
                let Ok(turn) = refusals.clone().try_acquire_owned() else { continue };
                let handshake = admission.limits().handshake_timeout;
                let tls = tls.clone();
                tokio::spawn(async move {
                    refuse(socket, tls, refusal, handshake).await;
                    drop(turn);
                });
            }
        }
    }
    sweeper.abort();
    lifecycle.abort();
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(DRAIN) => tracing::warn!("requests still running after {DRAIN:?}: stopped"),
    }
    Ok(())
}

/// One admitted connection.
struct Connection {
    service: S3Service,
    http: Arc<http1::Builder>,
    ticket: Ticket,
    watcher: Watcher,
    stall: Duration,
    transport: Transport,
    /// Preflights are answered, and cross-origin answers decorated, from the buckets' rules.
    core: Arc<Core>,
    /// Places for form uploads held in memory (`FORMS_AT_ONCE`), shared by every connection.
    forms: Arc<tokio::sync::Semaphore>,
}

impl Connection {
    async fn run(self, socket: TcpStream, tls: Option<TlsAcceptor>, handshake: Duration) {
        match tls {
            None => self.serve(socket).await,
            Some(acceptor) => {
                let accepted = tokio::select! {
                    accepted = tokio::time::timeout(handshake, acceptor.accept(socket)) => accepted,
                    () = self.ticket.evicted() => return,
                };
                match accepted {
                    Ok(Ok(stream)) => self.serve(stream).await,
                    Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                    Err(_) => tracing::debug!("TLS handshake timed out"),
                }
            }
        }
    }

    async fn serve<T: AsyncRead + AsyncWrite + Unpin + Send + 'static>(self, io: T) {
        let Connection { service, http, ticket, watcher, stall, transport, core, forms } = self;
        let ticket = Arc::new(ticket);
        let proof = ticket.clone();
        let svc = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
            // XML bodies are read whole by s3s: past the limit it would answer 500 (it does
            // not recognise the limit's own error), so the limit is ours and answered 400.
            let exceeded = xml_bodied(&req).then(|| Arc::new(AtomicBool::new(false)));
            let form = is_form(&req);
            // A body the answer leaves unread (a refusal before it was read, which a client
            // that asked `Expect: 100-continue` may still be sending) cannot be told apart from
            // the connection's next request: such an answer closes the connection.
            let ended = Arc::new(AtomicBool::new(http_body::Body::is_end_stream(req.body())));
            let mut req = req.map(|body| {
                let body = Stalling::new(body, stall).reporting_end(ended.clone());
                let body = if form { body.in_pieces(FORM_PIECE) } else { body };
                s3s::Body::http_body(match &exceeded {
                    Some(flag) => body.limited(MAX_XML_BODY, flag.clone()),
                    None => body,
                })
            });
            req.extensions_mut().insert(transport);
            let verified = Verified::default();
            req.extensions_mut().insert(verified.clone());
            let (service, proof, core, forms) = (service.clone(), proof.clone(), core.clone(), forms.clone());
            let id = request_log::new_id();
            let (method, path) = (req.method().clone(), req.uri().path().to_owned());
            let attributes = method == hyper::Method::GET && req.uri().query().is_some_and(|q| q.split('&').any(|p| p.split('=').next() == Some("attributes")));
            let origin = header_text(&req, hyper::header::ORIGIN.as_str());
            // A request may name the method its page's preflight asked for (as S3 reads it).
            let cors_method = header_text(&req, "access-control-request-method").and_then(|m| hyper::Method::from_bytes(m.as_bytes()).ok()).unwrap_or_else(|| method.clone());
            let span = tracing::info_span!("request", request_id = %id);
            async move {
                // A browser's preflight is unsigned and never reaches s3s; a form upload is held
                // in memory by s3s, so only a few are taken at once.
                let permit = if form { Some(forms.try_acquire_owned()) } else { None };
                let mut answer = match permit {
                    Some(Err(_)) => Ok(slow_down("As many form uploads as the gateway holds at once are in progress; retry later.")),
                    _ if method == hyper::Method::OPTIONS => Ok(cors::preflight(&core, &path, req.headers()).await),
                    _ => service.call(req).await,
                };
                if exceeded.is_some_and(|flag| flag.load(Ordering::Relaxed)) {
                    answer = Ok(too_large());
                }
                if let (Some(origin), Ok(r)) = (&origin, &mut answer) {
                    if method != hyper::Method::OPTIONS {
                        cors::decorate(&core, &path, origin, &cors_method, r.headers_mut()).await;
                    }
                }
                if let (true, Ok(r)) = (attributes, &mut answer) {
                    unquote_etag(r);
                }
                if let (false, Ok(r)) = (ended.load(Ordering::Relaxed), &mut answer) {
                    r.headers_mut().insert(hyper::header::CONNECTION, hyper::header::HeaderValue::from_static("close"));
                }
                // A signature s3s verified (a request it refuses for its signature or key
                // never reaches the access decision that says so).
                if verified.0.load(Ordering::Relaxed) {
                    proof.prove();
                }
                match &mut answer {
                    Ok(r) => {
                        request_log::stamp(r.headers_mut(), &id);
                        request_log::record(&method, &path, r.status(), &id);
                    }
                    Err(e) => tracing::warn!(request_id = %id, %method, path, error = ?e, "request failed"),
                }
                answer
            }
            .instrument(span)
        });
        let conn = watcher.watch(http.serve_connection(TokioIo::new(Watched::new(io, stall)), svc));
        tokio::select! {
            served = conn => if let Err(e) = served {
                tracing::debug!(error = %e, "connection ended");
            },
            () = ticket.evicted() => tracing::debug!("unproven connection closed to make room"),
        }
    }
}

/// Whether a request's body is an XML (or JSON) document s3s reads whole: every POST, and PUTs
/// of a bucket's or an object's subresource. Object and part data are streamed.
fn xml_bodied<B>(req: &hyper::Request<B>) -> bool {
    const SUBRESOURCES: [&str; 14] =
        ["acl", "tagging", "cors", "lifecycle", "versioning", "policy", "notification", "replication", "encryption", "website", "logging", "ownershipControls", "publicAccessBlock", "object-lock"];
    match *req.method() {
        // A browser form upload (POST object) is bounded by s3s's form limits instead
        // (MAX_POST_FILE, MAX_POST_FIELDS), which it checks as it reads.
        hyper::Method::POST => !is_form(req),
        hyper::Method::PUT => req.uri().query().is_some_and(|q| q.split('&').any(|pair| SUBRESOURCES.contains(&pair.split('=').next().unwrap_or("")))),
        _ => false,
    }
}

/// The answer to an XML body over `MAX_XML_BODY` (read no further than that: the connection
/// closes, as after any answer that leaves its body unread).
fn too_large() -> s3s::HttpResponse {
    let body = format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>MaxMessageLengthExceeded</Code><Message>Your request was too big: an XML body is at most {MAX_XML_BODY} bytes.</Message></Error>");
    let mut answer = hyper::Response::new(s3s::Body::from(body));
    *answer.status_mut() = hyper::StatusCode::BAD_REQUEST;
    answer.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/xml"));
    answer
}

/// Whether a request carries a signature (header or presigned query) rather than none.
/// A browser form upload (POST object): a POST of `multipart/form-data`.
fn is_form<B>(req: &hyper::Request<B>) -> bool {
    req.method() == hyper::Method::POST && header_text(req, hyper::header::CONTENT_TYPE.as_str()).is_some_and(|t| t.to_ascii_lowercase().starts_with("multipart/form-data"))
}

fn header_text<B>(req: &hyper::Request<B>, name: &str) -> Option<String> {
    req.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
}

/// GetObjectAttributes' ETag is unquoted on S3 (s3s quotes every ETag it writes in XML).
fn unquote_etag(answer: &mut s3s::HttpResponse) {
    if answer.status() != hyper::StatusCode::OK {
        return;
    }
    let Some(body) = answer.body().bytes() else { return };
    let Ok(text) = std::str::from_utf8(&body) else { return };
    let fixed = text.replace("<ETag>\"", "<ETag>").replace("\"</ETag>", "</ETag>");
    if fixed.len() != text.len() {
        answer.headers_mut().insert(hyper::header::CONTENT_LENGTH, hyper::header::HeaderValue::from(fixed.len()));
        *answer.body_mut() = s3s::Body::from(fixed);
    }
}

/// A 503 SlowDown answered by the server itself.
fn slow_down(message: &str) -> s3s::HttpResponse {
    let body = format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code><Message>{message}</Message></Error>");
    let mut answer = hyper::Response::new(s3s::Body::from(body));
    *answer.status_mut() = hyper::StatusCode::SERVICE_UNAVAILABLE;
    answer.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/xml"));
    answer.headers_mut().insert(hyper::header::RETRY_AFTER, hyper::header::HeaderValue::from_static("1"));
    answer
}

/// Answers a connection that was not admitted with a 503 SlowDown, inside TLS if the gateway
/// serves TLS (a plaintext answer would reach the client's TLS stack as garbage).
async fn refuse(socket: TcpStream, tls: Option<TlsAcceptor>, refusal: Refusal, handshake: Duration) {
    let message = match refusal {
        Refusal::Full => "The gateway has as many connections as it takes; retry later.",
        Refusal::Address => "This address holds as many unauthenticated connections as one address may; retry later.",
    };
    let body = format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code><Message>{message}</Message></Error>");
    let answer = format!("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n{body}", body.len());
    let write = async {
        match tls {
            None => {
                let mut s = socket;
                let _ = s.write_all(answer.as_bytes()).await;
                let _ = s.shutdown().await;
            }
            Some(acceptor) => {
                if let Ok(mut s) = acceptor.accept(socket).await {
                    let _ = s.write_all(answer.as_bytes()).await;
                    let _ = s.shutdown().await;
                }
            }
        }
    };
    let _ = tokio::time::timeout(handshake, write).await;
}

async fn sweep_forever(core: Arc<Core>, every: Duration, scan_every: Duration) {
    let mut scanned = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(every).await;
        if scanned.elapsed() >= scan_every {
            scanned = tokio::time::Instant::now();
            match core.scan_orphans(crate::SCAN_WINDOW).await {
                Ok(s) => tracing::info!(data = s.data, orphans = s.orphans, "orphan scan"),
                Err(e) => tracing::warn!(error = %e, "orphan scan failed"),
            }
        }
        match core.sweep().await {
            Ok((seen, deleted)) if seen > 0 => tracing::info!(intents = seen, chunks_deleted = deleted, "sweep"),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "sweep failed"),
        }
        if let Err(e) = gateway::tidy_uploads(&core).await {
            tracing::warn!(error = %e, "tidying multipart uploads failed");
        }
    }
}

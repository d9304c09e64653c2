//! One HTTP/1.1 keep-alive connection and the signer: every request signed with AWS Signature
//! V4 in the query string by `rusty-s3` (sans-IO: it only builds URLs), payloads unsigned.
//! Bodies are `Bytes`, so a 64 MiB PUT copies nothing on our side; GET bodies are read frame
//! by frame and handed to a sink (or gathered, up to a bound), with the time of the first body
//! byte kept.
//!
//! What it must not do: know anything of Spindle. It speaks S3 over HTTP to whatever server is
//! at the endpoint.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use rusty_s3::actions::{CompleteMultipartUpload, CreateMultipartUpload, ListObjectsV2};
use rusty_s3::{Bucket, Credentials, S3Action, UrlStyle};

/// How long a signed URL stays valid. Requests are signed just before they are sent, so this
/// only has to cover clock skew and a slow upload.
const SIGNATURE_VALID: Duration = Duration::from_secs(3600);
/// Longest error body kept for a message.
const ERROR_BODY_MAX: usize = 512;
/// S3 numbers parts from 1 to 10,000.
pub const PARTS_MAX: u64 = 10_000;

/// Where and as whom to talk S3.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct S3Endpoint {
    /// `http://HOST:PORT` (path-style requests: `/BUCKET/KEY`).
    pub endpoint: String,
    pub region: String,
    pub bucket: String,
    pub access_key: String,
    /// Never written into results.
    #[serde(skip)]
    pub secret_key: String,
    /// For `https://` endpoints: the PEM certificates (a CA's, or the server's own) trusted.
    #[serde(default)]
    pub tls_trust: Option<std::path::PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum S3Error {
    #[error("bad endpoint {endpoint:?}: {reason}")]
    Endpoint { endpoint: String, reason: String },
    #[error("connecting to {addr}: {source}")]
    Connect { addr: String, source: std::io::Error },
    #[error("{method} {path}: {source}")]
    Http { method: Method, path: String, source: hyper::Error },
    #[error("{method} {path}: HTTP {status}: {body}")]
    Status { method: Method, path: String, status: StatusCode, body: String },
    #[error("{method} {path}: {reason}")]
    Protocol { method: Method, path: String, reason: String },
    /// The caller's bound on a request passed before its answer came.
    #[error("{path}: no answer within {after:?}")]
    TimedOut { path: String, after: Duration },
    /// The body was longer than the caller said it may be (`get_bytes`).
    #[error("GET {path}: the object is longer than the {max} bytes expected")]
    TooLong { path: String, max: usize },
}

impl S3Error {
    /// The HTTP status the server answered, if it answered with an error status.
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            S3Error::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Whether the same request may succeed if sent again: the connection failed, or the
    /// server answered that it is busy or failing (5xx, 429 SlowDown), not that the request
    /// is wrong.
    pub fn is_transient(&self) -> bool {
        match self {
            S3Error::Connect { .. } | S3Error::Http { .. } | S3Error::TimedOut { .. } => true,
            S3Error::Status { status, .. } => status.is_server_error() || *status == StatusCode::TOO_MANY_REQUESTS,
            S3Error::Endpoint { .. } | S3Error::Protocol { .. } | S3Error::TooLong { .. } => false,
        }
    }
}

/// The signing half: bucket URL and credentials, shared by every connection.
#[derive(Clone)]
pub struct S3Signer {
    bucket: Bucket,
    credentials: Credentials,
    /// `HOST:PORT` to connect to, and the Host header the URLs were signed for.
    addr: String,
    host_header: String,
    /// For `https://`: the connector trusting the endpoint's certificate, and the name checked.
    tls: Option<std::sync::Arc<(tokio_rustls::TlsConnector, rustls_pki_types::ServerName<'static>)>>,
}

impl std::fmt::Debug for S3Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Signer").field("addr", &self.addr).field("tls", &self.tls.is_some()).finish()
    }
}

impl S3Signer {
    pub fn new(e: &S3Endpoint) -> Result<S3Signer, S3Error> {
        let bad = |reason: String| S3Error::Endpoint { endpoint: e.endpoint.clone(), reason };
        let url: url::Url = e.endpoint.parse().map_err(|err: url::ParseError| bad(err.to_string()))?;
        let host = url.host_str().ok_or_else(|| bad("no host".into()))?.to_string();
        let tls = match (url.scheme(), &e.tls_trust) {
            ("http", _) => None,
            ("https", Some(trust)) => {
                let connector = spindle_tls::connector(trust).map_err(|err| bad(err.to_string()))?;
                let name = rustls_pki_types::ServerName::try_from(host.clone()).map_err(|err| bad(err.to_string()))?;
                Some(std::sync::Arc::new((connector, name)))
            }
            ("https", None) => return Err(bad("an https:// endpoint needs the certificate to trust (--tls-trust)".into())),
            (other, _) => return Err(bad(format!("{other}:// is not HTTP"))),
        };
        let port = url.port_or_known_default().unwrap_or(if tls.is_some() { 443 } else { 80 });
        // The Host header must be what rusty-s3 signed: the port only when not the default.
        let host_header = match url.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.clone(),
        };
        let bucket = Bucket::new(url, UrlStyle::Path, e.bucket.clone(), e.region.clone()).map_err(|err| bad(err.to_string()))?;
        Ok(S3Signer { bucket, credentials: Credentials::new(e.access_key.clone(), e.secret_key.clone()), addr: format!("{host}:{port}"), host_header, tls })
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    fn creds(&self) -> Option<&Credentials> {
        Some(&self.credentials)
    }
}

/// HTTP/1.1 over `stream`, its connection driven by a task of its own.
async fn handshake<S>(stream: S, addr: &str) -> Result<SendRequest<Full<Bytes>>, S3Error>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|source| S3Error::Http { method: Method::GET, path: addr.to_string(), source })?;
    tokio::spawn(async move {
        // The connection ends when the sender is dropped or the server closes it; either way
        // the next request finds the sender closed and reconnects.
        let _ = conn.await;
    });
    Ok(sender)
}

/// What a GET saw: body bytes and when the first of them arrived (from the request's start).
#[derive(Debug, Clone, Copy)]
pub struct GetTiming {
    pub bytes: u64,
    pub first_byte: Duration,
}

/// One keep-alive connection and the signer. Not shared: a worker owns one.
pub struct S3Conn {
    signer: S3Signer,
    sender: Option<SendRequest<Full<Bytes>>>,
}

impl S3Conn {
    /// A connection is opened lazily, on the first request, and again after any failure.
    pub fn new(signer: S3Signer) -> S3Conn {
        S3Conn { signer, sender: None }
    }

    async fn sender(&mut self) -> Result<&mut SendRequest<Full<Bytes>>, S3Error> {
        if let Some(s) = &mut self.sender {
            if s.ready().await.is_ok() {
                return Ok(self.sender.as_mut().expect("checked just above"));
            }
            self.sender = None;
        }
        let addr = self.signer.addr.clone();
        let stream = tokio::net::TcpStream::connect(&addr).await.map_err(|source| S3Error::Connect { addr: addr.clone(), source })?;
        // Large bodies and small requests alike: no Nagle delay on the headers of a request.
        let _ = stream.set_nodelay(true);
        let sender = match &self.signer.tls {
            None => handshake(stream, &addr).await?,
            Some(tls) => {
                let (connector, name) = &**tls;
                let stream = connector.connect(name.clone(), stream).await.map_err(|source| S3Error::Connect { addr: addr.clone(), source })?;
                handshake(stream, &addr).await?
            }
        };
        Ok(self.sender.insert(sender))
    }

    /// Sends one request and returns the response head and body, or an error for a failed
    /// exchange. A status is not judged here.
    async fn send(&mut self, method: Method, url: url::Url, headers: &[(&str, String)], body: Bytes) -> Result<hyper::Response<hyper::body::Incoming>, S3Error> {
        let path = match url.query() {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_string(),
        };
        let mut req = Request::builder().method(method.clone()).uri(&path).header(hyper::header::HOST, &self.signer.host_header);
        for (name, value) in headers {
            req = req.header(*name, value);
        }
        if method == Method::PUT || method == Method::POST {
            req = req.header(hyper::header::CONTENT_LENGTH, body.len());
        }
        let req = req.body(Full::new(body)).map_err(|e| S3Error::Protocol { method: method.clone(), path: short(&path), reason: e.to_string() })?;
        let sender = self.sender().await?;
        match sender.send_request(req).await {
            Ok(r) => Ok(r),
            Err(source) => {
                self.sender = None;
                Err(S3Error::Http { method, path: short(&path), source })
            }
        }
    }

    /// Reads a whole response body (small ones: errors and XML answers).
    async fn body_text(&mut self, method: &Method, path: &str, resp: hyper::Response<hyper::body::Incoming>) -> Result<String, S3Error> {
        match resp.into_body().collect().await {
            Ok(b) => Ok(String::from_utf8_lossy(&b.to_bytes()).into_owned()),
            Err(source) => {
                self.sender = None;
                Err(S3Error::Http { method: method.clone(), path: path.to_string(), source })
            }
        }
    }

    /// Turns a non-2xx answer into an error carrying the start of its body.
    async fn check(&mut self, method: Method, key: &str, resp: hyper::Response<hyper::body::Incoming>) -> Result<hyper::Response<hyper::body::Incoming>, S3Error> {
        let status = resp.status();
        if status.is_success() {
            return Ok(resp);
        }
        let mut body = self.body_text(&method, key, resp).await.unwrap_or_default();
        if body.len() > ERROR_BODY_MAX {
            let mut end = ERROR_BODY_MAX;
            while !body.is_char_boundary(end) {
                end -= 1;
            }
            body.truncate(end);
        }
        Err(S3Error::Status { method, path: key.to_string(), status, body })
    }

    /// Creates the bucket; one that already exists (owned by us) is fine.
    pub async fn create_bucket(&mut self) -> Result<(), S3Error> {
        let url = self.signer.bucket.create_bucket(&self.signer.credentials).sign(SIGNATURE_VALID);
        let name = self.signer.bucket.name().to_string();
        let resp = self.send(Method::PUT, url, &[], Bytes::new()).await?;
        match self.check(Method::PUT, &name, resp).await {
            Ok(resp) => self.body_text(&Method::PUT, &name, resp).await.map(drop),
            Err(e) if e.status() == Some(StatusCode::CONFLICT) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// One PUT of the whole object.
    pub async fn put_object(&mut self, key: &str, body: Bytes) -> Result<(), S3Error> {
        let url = self.signer.bucket.put_object(self.signer.creds(), key).sign(SIGNATURE_VALID);
        let resp = self.send(Method::PUT, url, &[], body).await?;
        let resp = self.check(Method::PUT, key, resp).await?;
        self.body_text(&Method::PUT, key, resp).await.map(drop)
    }

    /// An object in parts of `part_bytes` (the last one shorter), one after the other:
    /// CreateMultipartUpload, UploadPart for each, CompleteMultipartUpload. A failed upload
    /// is aborted (best effort) so it leaves no parts behind.
    pub async fn put_multipart(&mut self, key: &str, body: Bytes, part_bytes: u64) -> Result<(), S3Error> {
        let parts = part_ranges(body.len() as u64, part_bytes).map_err(|reason| S3Error::Protocol { method: Method::PUT, path: key.to_string(), reason })?;
        let url = CreateMultipartUpload::new(&self.signer.bucket, self.signer.creds(), key).sign(SIGNATURE_VALID);
        let resp = self.send(Method::POST, url, &[], Bytes::new()).await?;
        let resp = self.check(Method::POST, key, resp).await?;
        let text = self.body_text(&Method::POST, key, resp).await?;
        let created = CreateMultipartUpload::parse_response(&text)
            .map_err(|e| S3Error::Protocol { method: Method::POST, path: key.to_string(), reason: format!("CreateMultipartUpload answer: {e}: {text:.200}") })?;
        let upload_id = created.upload_id().to_string();
        match self.upload_parts(key, &upload_id, &body, &parts).await {
            Ok(()) => Ok(()),
            Err(e) => {
                let url = self.signer.bucket.abort_multipart_upload(self.signer.creds(), key, &upload_id).sign(SIGNATURE_VALID);
                if let Ok(resp) = self.send(Method::DELETE, url, &[], Bytes::new()).await {
                    let _ = self.body_text(&Method::DELETE, key, resp).await;
                }
                Err(e)
            }
        }
    }

    async fn upload_parts(&mut self, key: &str, upload_id: &str, body: &Bytes, parts: &[(u64, u64)]) -> Result<(), S3Error> {
        let mut etags = Vec::with_capacity(parts.len());
        for (i, (start, end)) in parts.iter().enumerate() {
            let number = u16::try_from(i + 1).expect("part_ranges keeps to PARTS_MAX");
            let url = self.signer.bucket.upload_part(self.signer.creds(), key, number, upload_id).sign(SIGNATURE_VALID);
            let resp = self.send(Method::PUT, url, &[], body.slice(*start as usize..*end as usize)).await?;
            let resp = self.check(Method::PUT, key, resp).await?;
            let etag = resp
                .headers()
                .get(hyper::header::ETAG)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
                .ok_or_else(|| S3Error::Protocol { method: Method::PUT, path: key.to_string(), reason: format!("UploadPart {number} answered without an ETag") })?;
            self.body_text(&Method::PUT, key, resp).await?;
            etags.push(etag);
        }
        let complete = CompleteMultipartUpload::new(&self.signer.bucket, self.signer.creds(), key, upload_id, etags.iter().map(String::as_str));
        let url = complete.sign(SIGNATURE_VALID);
        let xml = complete.body();
        let resp = self.send(Method::POST, url, &[], Bytes::from(xml)).await?;
        let resp = self.check(Method::POST, key, resp).await?;
        // S3 may answer 200 and still report an error in the body of a completion.
        let text = self.body_text(&Method::POST, key, resp).await?;
        if text.contains("<Error>") {
            return Err(S3Error::Protocol { method: Method::POST, path: key.to_string(), reason: format!("CompleteMultipartUpload failed: {text:.300}") });
        }
        Ok(())
    }

    /// PUT, or multipart when the object is at least `multipart_bytes` long.
    pub async fn upload(&mut self, key: &str, body: Bytes, multipart_bytes: u64) -> Result<(), S3Error> {
        if uses_multipart(body.len() as u64, multipart_bytes) {
            self.put_multipart(key, body, multipart_bytes).await
        } else {
            self.put_object(key, body).await
        }
    }

    /// GET of the whole object (or of `range`: first byte and length), each body frame handed
    /// to `sink` as it arrives.
    pub async fn get_object(&mut self, key: &str, range: Option<(u64, u64)>, mut sink: impl FnMut(&[u8])) -> Result<GetTiming, S3Error> {
        let started = Instant::now();
        let url = self.signer.bucket.get_object(self.signer.creds(), key).sign(SIGNATURE_VALID);
        let headers: Vec<(&str, String)> = match range {
            Some((_, 0)) => Vec::new(),
            Some((first, len)) => vec![("range", format!("bytes={first}-{}", first + len - 1))],
            None => Vec::new(),
        };
        let resp = self.send(Method::GET, url, &headers, Bytes::new()).await?;
        let resp = self.check(Method::GET, key, resp).await?;
        let mut body = resp.into_body();
        let mut timing = GetTiming { bytes: 0, first_byte: started.elapsed() };
        let mut first = true;
        while let Some(data) = self.next_data(&mut body, key).await? {
            if first && !data.is_empty() {
                timing.first_byte = started.elapsed();
                first = false;
            }
            timing.bytes += data.len() as u64;
            sink(&data);
        }
        Ok(timing)
    }

    /// The next piece of a response body (trailers skipped); a body cut short is an error and
    /// leaves this connection unusable.
    async fn next_data(&mut self, body: &mut hyper::body::Incoming, key: &str) -> Result<Option<Bytes>, S3Error> {
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(f) => {
                    if let Ok(data) = f.into_data() {
                        return Ok(Some(data));
                    }
                }
                Err(source) => {
                    self.sender = None;
                    return Err(S3Error::Http { method: Method::GET, path: key.to_string(), source });
                }
            }
        }
        Ok(None)
    }

    /// The whole object, or `None` if the bucket has no such key. A body longer than `max`
    /// bytes is an error (the caller knows how long the object should be).
    pub async fn get_bytes(&mut self, key: &str, max: usize) -> Result<Option<Bytes>, S3Error> {
        let url = self.signer.bucket.get_object(self.signer.creds(), key).sign(SIGNATURE_VALID);
        let resp = self.send(Method::GET, url, &[], Bytes::new()).await?;
        if resp.status() == StatusCode::NOT_FOUND {
            self.body_text(&Method::GET, key, resp).await?;
            return Ok(None);
        }
        let resp = self.check(Method::GET, key, resp).await?;
        let mut body = resp.into_body();
        let mut out = bytes::BytesMut::new();
        while let Some(data) = self.next_data(&mut body, key).await? {
            if out.len() + data.len() > max {
                // The rest of the body is not read: this connection cannot carry another.
                self.sender = None;
                return Err(S3Error::TooLong { path: key.to_string(), max });
            }
            out.extend_from_slice(&data);
        }
        Ok(Some(out.freeze()))
    }

    /// One page of the keys under `prefix` (ListObjectsV2), and the token of the next page
    /// if there is one.
    pub async fn list_page(&mut self, prefix: &str, token: Option<&str>) -> Result<(Vec<String>, Option<String>), S3Error> {
        let mut list = ListObjectsV2::new(&self.signer.bucket, self.signer.creds());
        list.with_prefix(prefix);
        if let Some(t) = token {
            list.with_continuation_token(t);
        }
        let url = list.sign(SIGNATURE_VALID);
        let path = format!("{}?prefix={prefix}", self.signer.bucket.name());
        let resp = self.send(Method::GET, url, &[], Bytes::new()).await?;
        let resp = self.check(Method::GET, &path, resp).await?;
        let text = self.body_text(&Method::GET, &path, resp).await?;
        let page = ListObjectsV2::parse_response(&text)
            .map_err(|e| S3Error::Protocol { method: Method::GET, path: path.clone(), reason: format!("ListObjectsV2 answer: {e}: {text:.200}") })?;
        Ok((page.contents.into_iter().map(|c| c.key).collect(), page.next_continuation_token))
    }

    /// HEAD: the object's length.
    pub async fn head_object(&mut self, key: &str) -> Result<u64, S3Error> {
        let url = self.signer.bucket.head_object(self.signer.creds(), key).sign(SIGNATURE_VALID);
        let resp = self.send(Method::HEAD, url, &[], Bytes::new()).await?;
        let resp = self.check(Method::HEAD, key, resp).await?;
        let len = resp.headers().get(hyper::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse().ok());
        self.body_text(&Method::HEAD, key, resp).await?;
        len.ok_or_else(|| S3Error::Protocol { method: Method::HEAD, path: key.to_string(), reason: "no Content-Length".into() })
    }

    pub async fn delete_object(&mut self, key: &str) -> Result<(), S3Error> {
        let url = self.signer.bucket.delete_object(self.signer.creds(), key).sign(SIGNATURE_VALID);
        let resp = self.send(Method::DELETE, url, &[], Bytes::new()).await?;
        let resp = self.check(Method::DELETE, key, resp).await?;
        self.body_text(&Method::DELETE, key, resp).await.map(drop)
    }
}

/// Whether an object of `size` bytes goes up as a multipart upload: at or above the part size
/// (0: never).
pub fn uses_multipart(size: u64, multipart_bytes: u64) -> bool {
    multipart_bytes > 0 && size >= multipart_bytes
}

/// The byte ranges [start, end) of the parts of an object of `size` bytes cut into parts of
/// `part_bytes`: every part full but the last, at least one part, at most [`PARTS_MAX`].
pub fn part_ranges(size: u64, part_bytes: u64) -> Result<Vec<(u64, u64)>, String> {
    if part_bytes == 0 {
        return Err("part size 0".into());
    }
    let count = size.div_ceil(part_bytes).max(1);
    if count > PARTS_MAX {
        return Err(format!("{size} bytes in parts of {part_bytes} is {count} parts, over S3's {PARTS_MAX}"));
    }
    Ok((0..count).map(|i| (i * part_bytes, ((i + 1) * part_bytes).min(size))).collect())
}

/// A path for error messages: the signature's query string left out.
fn short(path: &str) -> String {
    path.split('?').next().unwrap_or(path).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn multipart_starts_at_the_part_size() {
        assert!(!uses_multipart(16 << 20, 0), "0 turns multipart off");
        assert!(!uses_multipart((16 << 20) - 1, 16 << 20));
        assert!(uses_multipart(16 << 20, 16 << 20));
        assert_eq!(part_ranges(64 << 20, 16 << 20).unwrap().len(), 4);
        assert_eq!(part_ranges(0, 16).unwrap(), vec![(0, 0)], "an empty object is one empty part");
        assert_eq!(part_ranges(17, 16).unwrap(), vec![(0, 16), (16, 17)]);
        assert!(part_ranges(10_001, 1).is_err());
        assert!(part_ranges(10, 0).is_err());
    }

    proptest! {
        #[test]
        fn parts_cover_the_object_in_order(size in 0u64..1 << 40, part in 1u64..1 << 32) {
            match part_ranges(size, part) {
                Ok(parts) => {
                    prop_assert!(!parts.is_empty() && parts.len() as u64 <= PARTS_MAX);
                    prop_assert_eq!(parts[0].0, 0);
                    prop_assert_eq!(parts.last().unwrap().1, size);
                    for w in parts.windows(2) {
                        prop_assert_eq!(w[0].1, w[1].0);
                        prop_assert_eq!(w[0].1 - w[0].0, part, "every part but the last is full");
                    }
                    prop_assert!(parts.iter().all(|(s, e)| e - s <= part));
                }
                Err(_) => prop_assert!(size.div_ceil(part) > PARTS_MAX),
            }
        }
    }

    #[test]
    fn endpoints_must_be_http_with_a_host_and_https_names_its_trust() {
        let e = |endpoint: &str| S3Endpoint { endpoint: endpoint.into(), region: "us-east-1".into(), bucket: "b".into(), access_key: "a".into(), secret_key: "s".into(), tls_trust: None };
        let s = S3Signer::new(&e("http://127.0.0.1:9000")).unwrap();
        assert_eq!((s.addr(), s.host_header.as_str()), ("127.0.0.1:9000", "127.0.0.1:9000"));
        let s = S3Signer::new(&e("http://localhost")).unwrap();
        assert_eq!((s.addr(), s.host_header.as_str()), ("localhost:80", "localhost"));
        let no_trust = S3Signer::new(&e("https://127.0.0.1:9000")).err().unwrap().to_string();
        assert!(no_trust.contains("--tls-trust"), "{no_trust}");
        let missing = S3Endpoint { tls_trust: Some("/nonexistent/ca.pem".into()), ..e("https://127.0.0.1:9000") };
        assert!(S3Signer::new(&missing).err().unwrap().to_string().contains("/nonexistent/ca.pem"));
        assert!(S3Signer::new(&e("ftp://127.0.0.1:9000")).is_err());
        assert!(S3Signer::new(&e("127.0.0.1:9000")).is_err());
        // The secret never reaches a result file.
        assert!(!serde_json::to_string(&e("http://x:1")).unwrap().contains("\"s\""));
    }
}

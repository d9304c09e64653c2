//! A small S3 client: requests signed with AWS Signature V4 in the query string by `rusty-s3`
//! and sent over hyper's HTTP/1.1 connections, plain or TLS. It knows nothing of Spindle: the
//! benchmark lab drives servers with it (`conn`), and the gateway's remote tier keeps a
//! bounded set of its connections to an external bucket (`pool`).

#![forbid(unsafe_code)]

mod conn;
mod pool;

pub use conn::{part_ranges, uses_multipart, GetTiming, S3Conn, S3Endpoint, S3Error, S3Signer, PARTS_MAX};
pub use hyper::StatusCode;
pub use pool::ConnPool;

//! The simulated network as the product's code meets it: connections to drives opened through
//! turmoil's TCP (the client's and the drives' own dialer), and a drive serving what comes in
//! on its simulated port with the real connection code.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use spindle_client::{Dial, Dialer, Duplex};
use spindle_drive::{DriveConfig, EngineKind, Transport};

use crate::disk::Disk;

/// Every simulated drive's Kinetic port.
pub const DRIVE_PORT: u16 = 8123;

struct TurmoilDial;

impl Dial for TurmoilDial {
    fn dial(&self, addr: &str) -> Pin<Box<dyn Future<Output = std::io::Result<Duplex>> + Send + '_>> {
        let addr = addr.to_string();
        Box::pin(async move {
            let stream = turmoil::net::TcpStream::connect(addr.as_str()).await?;
            let (r, w) = stream.into_split();
            Ok((Box::new(r) as _, Box::new(w) as _))
        })
    }
}

pub fn dialer() -> Dialer {
    Dialer(Arc::new(TurmoilDial))
}

/// A drive's software: boots from its disk (what survived the last crash) and serves until
/// the host is crashed. Its settings (cluster version, ACL) are kept in `dir`.
pub async fn drive(disk: Arc<Disk>, dir: PathBuf) -> turmoil::Result {
    let config = DriveConfig { data_dir: dir, engine: EngineKind::Memory, port: DRIVE_PORT, tls_port: DRIVE_PORT + 1, ..DriveConfig::default() };
    let state = spindle_drive::embedded(config, disk.boot(), Some(dialer()))?;
    let listener = turmoil::net::TcpListener::bind(("0.0.0.0", DRIVE_PORT)).await?;
    loop {
        let (stream, peer) = listener.accept().await?;
        tokio::spawn(spindle_drive::serve(state.clone(), stream, peer, Transport::Plain));
    }
}

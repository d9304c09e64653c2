//! `spindle admin ...`: ACLs, PINs, lock/unlock/erase, cluster version, power levels.
//! SECURITY and PIN operations travel only over TLS: point --drive at the TLS port and give
//! --tls-trust with the drive's certificate (DATA/tls/cert.pem for a generated one).

use bytes::Bytes;
use clap::{Subcommand, ValueEnum};
use serde_json::json;
use spindle_client::{AclEntry, PinOpType, PowerLevel};

use crate::client_cmds::Conn;

type CmdResult = Result<(), Box<dyn std::error::Error>>;

#[derive(Subcommand)]
pub enum AdminCommand {
    /// The access control list.
    #[command(subcommand)]
    Acl(AclCommand),
    /// Set the lock or erase PIN.
    #[command(subcommand)]
    Pin(PinCommand),
    /// Lock the drive: everything but PIN operations is refused until unlocked.
    Lock {
        #[arg(long)]
        pin: String,
        #[command(flatten)]
        conn: Conn,
    },
    Unlock {
        #[arg(long)]
        pin: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Erase all data and reset the settings (ACL, PINs, cluster version) to the factory's.
    Erase {
        #[arg(long, default_value = "")]
        pin: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Erase, and leave no table or blob file with the old data in the data directory.
    SecureErase {
        #[arg(long, default_value = "")]
        pin: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Set the drive's cluster version (send the current one with --cluster-version).
    ClusterVersion {
        version: i64,
        #[command(flatten)]
        conn: Conn,
    },
    /// Set the power level.
    Power {
        #[arg(value_enum)]
        level: PowerArg,
        #[command(flatten)]
        conn: Conn,
    },
}

#[derive(Subcommand)]
pub enum AclCommand {
    /// Replace the whole ACL with the identities in FILE (JSON: a list of
    /// {"identity", "key", "scopes": [{"offset", "value", "permissions": [...], "tls_required"}],
    /// "max_priority"}).
    Set {
        file: std::path::PathBuf,
        #[command(flatten)]
        conn: Conn,
    },
    /// Show the identities and scopes in force (without keys).
    Show {
        #[command(flatten)]
        conn: Conn,
    },
}

#[derive(Subcommand)]
pub enum PinCommand {
    /// Set the lock PIN (--old is required once one is set; an empty --new clears it).
    Lock {
        #[arg(long, default_value = "")]
        old: String,
        #[arg(long)]
        new: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Set the erase PIN.
    Erase {
        #[arg(long, default_value = "")]
        old: String,
        #[arg(long)]
        new: String,
        #[command(flatten)]
        conn: Conn,
    },
}

#[derive(Clone, Copy, ValueEnum)]
pub enum PowerArg {
    Operational,
    Hibernate,
    Shutdown,
}

fn done(conn: &Conn, what: &str) {
    if conn.json {
        println!("{}", json!({"ok": true, "done": what}));
    } else {
        println!("{what}");
    }
}

pub async fn run(cmd: AdminCommand) -> CmdResult {
    match cmd {
        AdminCommand::Acl(AclCommand::Set { file, conn }) => {
            let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            let entries: Vec<AclEntry> = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
            let acl = entries.iter().map(AclEntry::to_proto).collect::<Result<Vec<_>, _>>().map_err(|e| format!("{}: {e}", file.display()))?;
            conn.connect().await?.set_acl(acl).await?;
            done(&conn, &format!("ACL replaced: {} identities", entries.len()));
        }
        AdminCommand::Acl(AclCommand::Show { conn }) => {
            let doc = conn.connect().await?.device_log(spindle_drive::DEVICE_LOG_ACL.as_bytes()).await?;
            let value: serde_json::Value = serde_json::from_slice(&doc)?;
            println!("{}", serde_json::to_string_pretty(&value)?);
        }
        AdminCommand::Pin(PinCommand::Lock { old, new, conn }) => {
            conn.connect().await?.set_lock_pin(old.as_bytes(), new.as_bytes()).await?;
            done(&conn, "lock PIN set");
        }
        AdminCommand::Pin(PinCommand::Erase { old, new, conn }) => {
            conn.connect().await?.set_erase_pin(old.as_bytes(), new.as_bytes()).await?;
            done(&conn, "erase PIN set");
        }
        AdminCommand::Lock { pin, conn } => pin_op(conn, PinOpType::LockPinop, pin, "drive locked").await?,
        AdminCommand::Unlock { pin, conn } => pin_op(conn, PinOpType::UnlockPinop, pin, "drive unlocked").await?,
        AdminCommand::Erase { pin, conn } => pin_op(conn, PinOpType::ErasePinop, pin, "drive erased").await?,
        AdminCommand::SecureErase { pin, conn } => pin_op(conn, PinOpType::SecureErasePinop, pin, "drive securely erased").await?,
        AdminCommand::ClusterVersion { version, conn } => {
            conn.connect().await?.set_cluster_version(version).await?;
            done(&conn, &format!("cluster version set to {version}"));
        }
        AdminCommand::Power { level, conn } => {
            let level = match level {
                PowerArg::Operational => PowerLevel::Operational,
                PowerArg::Hibernate => PowerLevel::Hibernate,
                PowerArg::Shutdown => PowerLevel::Shutdown,
            };
            conn.connect().await?.set_power_level(level).await?;
            done(&conn, &format!("power level {}", level.as_str_name()));
        }
    }
    Ok(())
}

async fn pin_op(conn: Conn, op: PinOpType, pin: String, what: &str) -> CmdResult {
    conn.connect().await?.pin_operation(op, &Bytes::from(pin)).await?;
    done(&conn, what);
    Ok(())
}

//! `spindle s3 users-key` and `spindle s3 user add|list|remove|rotate`: the gateway's users,
//! kept in the store the gateways serve, their secrets sealed with the users key.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use spindle_client::ClientConfig;
use spindle_s3::users::{self, UsersKey};
use spindle_s3::{Drive, Kv};

use crate::client_cmds::CmdResult;

#[derive(clap::Subcommand)]
pub enum S3Command {
    /// Make a new users key file (32 random bytes, mode 0600): every gateway and every
    /// `s3 user` command of the store takes the same file
    UsersKey { file: PathBuf },
    /// Users with keys of their own
    #[command(subcommand)]
    User(UserCommand),
}

/// The store a gateway serves and its users live in: a cluster or one drive.
#[derive(clap::Args)]
#[command(group = clap::ArgGroup::new("store").required(true).args(["cluster", "drive"]))]
pub struct Store {
    /// A cluster's control plane: etcd://HOST:PORT[,HOST:PORT...] (etcds:// for TLS)
    #[arg(long)]
    pub(crate) cluster: Option<String>,
    /// Name of the cluster in etcd
    #[arg(long, default_value = "spindle")]
    pub(crate) cluster_name: String,
    /// A secured cluster's credentials directory (identity.json, ca.pem)
    #[arg(long, env = "SPINDLE_CREDENTIALS", requires = "cluster")]
    pub(crate) credentials: Option<PathBuf>,
    /// One Kinetic drive as the store: HOST:PORT
    #[arg(long)]
    drive: Option<SocketAddr>,
}

impl Store {
    pub(crate) async fn open(&self) -> Result<Kv, Box<dyn std::error::Error>> {
        match (&self.cluster, self.drive) {
            (Some(url), _) => {
                let endpoints = crate::cluster_access::etcd_endpoints(url)?;
                let control = crate::cluster_access::connect(&endpoints, &self.cluster_name, self.credentials.as_deref()).await?;
                Ok(Kv::Cluster(crate::cluster_access::open_store(control, &self.cluster_name, self.credentials.as_deref()).await?))
            }
            (None, Some(addr)) => Ok(Kv::Drive(Drive::connect(addr, ClientConfig::default()).await.map_err(|e| format!("drive {addr}: {e}"))?)),
            (None, None) => Err("give --cluster or --drive".into()),
        }
    }
}

#[derive(clap::Subcommand)]
pub enum UserCommand {
    /// Make a user and its first key pair (printed once: hand it to the user)
    Add {
        name: String,
        #[command(flatten)]
        store: Store,
        /// The users key file
        #[arg(long, env = "SPINDLE_S3_USERS_KEY")]
        users_key: PathBuf,
        /// Print the key pair as JSON
        #[arg(long)]
        json: bool,
    },
    /// Every user and its access keys (never a secret)
    List {
        #[command(flatten)]
        store: Store,
        #[arg(long)]
        json: bool,
    },
    /// Remove a user (refused while it owns a bucket); its keys stop working on every gateway
    /// within a few seconds
    Remove {
        name: String,
        #[command(flatten)]
        store: Store,
    },
    /// A new key pair for a user; its older keys keep working for --overlap-secs
    Rotate {
        name: String,
        #[command(flatten)]
        store: Store,
        #[arg(long, env = "SPINDLE_S3_USERS_KEY")]
        users_key: PathBuf,
        #[arg(long, default_value_t = users::ROTATION_OVERLAP.as_secs())]
        overlap_secs: u64,
        #[arg(long)]
        json: bool,
    },
}

fn print_key(k: &users::NewKey, json: bool) {
    if json {
        println!("{}", serde_json::json!({"user": k.user, "access_key": k.access_key, "secret_key": k.secret_key}));
    } else {
        println!("user        {}\naccess key  {}\nsecret key  {}", k.user, k.access_key, k.secret_key);
    }
}

pub async fn run(command: S3Command) -> CmdResult {
    match command {
        S3Command::UsersKey { file } => {
            UsersKey::create_file(&file)?;
            eprintln!("users key written to {}", file.display());
        }
        S3Command::User(UserCommand::Add { name, store, users_key, json }) => {
            let key = UsersKey::load(&users_key)?;
            let kv = store.open().await?;
            print_key(&users::add(&kv, &key, &name).await?, json);
        }
        S3Command::User(UserCommand::List { store, json }) => {
            let kv = store.open().await?;
            let list = users::list(&kv).await?;
            if json {
                let key = |k: &users::StoredKey| serde_json::json!({"access_key": k.access_key, "created_ms": k.created_ms, "expires_ms": k.expires_ms});
                let rows: Vec<_> = list.iter().map(|u| serde_json::json!({"name": u.name, "id": u.id, "created_ms": u.created_ms, "keys": u.valid_keys().map(key).collect::<Vec<_>>()})).collect();
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                for u in &list {
                    let keys: Vec<String> = u
                        .valid_keys()
                        .map(|k| match k.left() {
                            Some(left) => format!("{} (for {} s more)", k.access_key, left.as_secs()),
                            None => k.access_key.clone(),
                        })
                        .collect();
                    println!("{:<20} {}  {}", u.name, u.id, keys.join(", "));
                }
            }
        }
        S3Command::User(UserCommand::Remove { name, store }) => {
            let kv = store.open().await?;
            users::remove(&kv, &name).await?;
            eprintln!("user {name} removed");
        }
        S3Command::User(UserCommand::Rotate { name, store, users_key, overlap_secs, json }) => {
            let key = UsersKey::load(&users_key)?;
            let kv = store.open().await?;
            print_key(&users::rotate(&kv, &key, &name, Duration::from_secs(overlap_secs)).await?, json);
        }
    }
    Ok(())
}

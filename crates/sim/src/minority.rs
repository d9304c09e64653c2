//! A manifest swap whose outcome its writer never learnt (no quorum answered, or its gateway
//! died), left standing on one replica that reads do not ask. The sweeper must not collect
//! its data while a later read may still choose it.

use bytes::Bytes;
use spindle_client::{Client, ClientConfig};
use spindle_cluster::map;
use spindle_cluster::replica;
use spindle_cluster::store::{Condition, Store};
use spindle_cluster::tag::Tag;

use crate::cases::{scripted, sweep_past_grace};
use crate::{net, s3};

/// The store's key of the simulator's object `object` (crates/s3/src/layout.rs).
fn object_key(object: u64) -> Vec<u8> {
    [b"s3\0O{", s3::BUCKET.as_bytes(), b"}\0", s3::object_name(object).as_bytes()].concat()
}

/// The intent key of `data`.
fn intent_key(data: u128) -> Vec<u8> {
    [b"s3\0G".as_slice(), &data.to_be_bytes()].concat()
}

/// The one data id a manifest (JSON) names.
fn data_of(manifest: &[u8]) -> Result<u128, String> {
    let text = std::str::from_utf8(manifest).map_err(|e| format!("manifest: {e}"))?;
    text.split_once("\"data\":")
        .and_then(|(_, rest)| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|digits| digits.parse().ok())
        .ok_or_else(|| format!("no data id in the manifest {text}"))
}

/// The intent a gateway leaves for data of `object` when a swap may change whether the
/// object references it: released before a write that replaces it, or refreshed just before a
/// swap that references it.
fn intent(object: u64) -> Bytes {
    let owner = format!("{{\"bucket\":\"{}\",\"key\":\"{}\"}}", s3::BUCKET, s3::object_name(object));
    Bytes::from(format!("{{\"touched_ms\":{},\"owner\":{owner},\"doomed\":false,\"swapping\":true}}", s3::wall_clock()))
}

/// Object 0 is value 1 on every replica. A PUT of value 2 wrote its data, released value 1's
/// (its intent), refreshed its own intent just before the swap, and its manifest reached one
/// replica, the last in the map's order, above the object's write there; then its gateway went
/// (the state is made by hand: value 2's manifest is taken from another object). The sweeps
/// past the grace must keep value 2's data: a read that asks that replica chooses the swap,
/// and the object must then read whole; and then collect value 1's. With the sweeps'
/// judgement made from what a quorum of reads answered, value 1's intent was dropped as still
/// referenced and its chunks kept for good once the swap stood (seed 0; whether a
/// read meets that replica first depends on the course), or, on another course, value 2's
/// chunks could be deleted under it.
pub fn a_swap_left_on_one_replica(seed: u64) -> Result<(), String> {
    scripted(seed, |store, gateway| async move {
        if !s3::put(&gateway, 0, 1).await || !s3::put(&gateway, 1, 2).await {
            return Err("the objects were not stored".into());
        }
        let first = store.get(&object_key(0)).await.map_err(|e| format!("object 0: {e}"))?.ok_or("no object 0")?;
        let second = store.get(&object_key(1)).await.map_err(|e| format!("object 1: {e}"))?.ok_or("no object 1")?;
        let (old, new) = (data_of(&first.value)?, data_of(&second.value)?);
        // Object 1's record goes by hand, its data left to object 0's intents.
        store.delete(&object_key(1), Condition::None).await.map_err(|e| format!("deleting object 1: {e}"))?;
        store.put(&intent_key(old), intent(0), Condition::None).await.map_err(|e| format!("the released intent: {e}"))?;
        store.put(&intent_key(new), intent(0), Condition::None).await.map_err(|e| format!("the swap's intent: {e}"))?;
        let last = last_replica(&store, &object_key(0)).await?;
        let dkey = map::drive_key(store.map().partition_of(&object_key(0)), &object_key(0));
        let held = replica::held(&last, &dkey).await.map_err(|e| format!("the last replica: {e}"))?;
        let tag = held.tag().ok_or("object 0 is not on the last replica")?;
        let above = Tag { counter: tag.counter + 1, ..tag };
        replica::store_if_newer(&last, &dkey, second.value.clone(), above, None).await.map_err(|e| format!("the swap on one replica: {e}"))?;

        sweep_past_grace(&gateway).await?;
        // A read from every replica: the swap stands now if it can ever.
        store.make_chosen(&object_key(0)).await.map_err(|e| format!("settling object 0: {e}"))?;
        match s3::get(&gateway, 0).await? {
            Some(Some(n)) if n == 1 || n == 2 => {}
            other => return Err(format!("object 0 reads {other:?} after the sweeps")),
        }
        sweep_past_grace(&gateway).await?;
        let census = gateway.census().await.map_err(|e| format!("census: {e}"))?;
        if !census.missing().is_empty() || census.stored != census.referenced || !census.intents.is_empty() {
            return Err(format!("after the sweeps: {census:?}"));
        }
        Ok(())
    })
}

/// A client of the last of `key`'s partition's replicas in the map's order.
async fn last_replica(store: &Store, key: &[u8]) -> Result<Client, String> {
    let map = store.map();
    let id = map.replicas_of(map.partition_of(key)).last().cloned().ok_or("no replicas")?;
    let config = ClientConfig { cluster_version: map.epoch as i64, dialer: Some(net::dialer()), ..ClientConfig::default() };
    Client::connect(map.members[&id].addr.as_str(), config).await.map_err(|e| format!("connecting to {id}: {e}"))
}

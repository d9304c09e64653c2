//! A manifest swap whose outcome its writer never learnt (no quorum answered, or its gateway
//! died), left standing on one replica that reads do not ask. The sweeper must not collect
//! its data while a later read may still choose it.

use bytes::Bytes;
use spindle_client::{Client, ClientConfig};
use spindle_cluster::map;
use spindle_cluster::replica;
use spindle_cluster::store::{Condition, Store};
use spindle_cluster::tag::Tag;
use spindle_s3::Embedded;

use crate::cases::{complete, records, scripted, sweep_past_grace, upload_one_part, upload_part, PART};
use crate::{net, s3};

/// The store's key of the simulator's object `object` (crates/s3/src/layout.rs).
fn object_key(object: u64) -> Vec<u8> {
    [b"s3\0O{", s3::BUCKET.as_bytes(), b"}\0", s3::object_name(object).as_bytes()].concat()
}

/// The intent key of `data`.
fn intent_key(data: u128) -> Vec<u8> {
    [b"s3\0G".as_slice(), &data.to_be_bytes()].concat()
}

/// The one data id a manifest or a part record (JSON) names.
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
        let (_, last) = last_replica(&store, &object_key(0)).await?;
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
        swept_clean(&gateway).await
    })
}

/// The intent of a part's data, written as the gateway writes it around a swap of the part's
/// record (`Owner::part` is the upload's id and the part's number).
fn part_intent(object: u64, upload: u128) -> Bytes {
    let owner = format!("{{\"bucket\":\"{}\",\"key\":\"{}\",\"part\":[{upload},1]}}", s3::BUCKET, s3::object_name(object));
    Bytes::from(format!("{{\"touched_ms\":{},\"owner\":{owner},\"doomed\":false,\"swapping\":true}}", s3::wall_clock()))
}

/// The same for a part: part 1 of an upload of object 0 is value 1 on every replica; its
/// upload again as value 2 wrote its data, released value 1's, refreshed its own intent, and
/// its part record reached only the last replica, above the record's write there (made by
/// hand from the record value 2's upload left). The sweeps past the grace must keep value 2's
/// data, which a read that asks that replica chooses: the completion then makes object 0 of
/// value 2, whole; and collect value 1's. Settling only the object, the sweeper judged the
/// part's data from a quorum's reads of the part record, which did not see the swap. While
/// that replica is cut off, the passes judge neither data id.
pub fn a_part_swap_left_on_one_replica(seed: u64) -> Result<(), String> {
    scripted(seed, |store, gateway| async move {
        let (upload, _) = upload_one_part(&gateway, 0, 1).await?;
        let id = u128::from_str_radix(&upload, 16).map_err(|e| format!("upload id {upload}: {e}"))?;
        let parts = [PART, &id.to_be_bytes()].concat();
        let (pkey, first) = records(&store, &parts).await?.remove(0);
        let second = upload_part(&gateway, 0, &upload, 2).await?;
        let (_, swapped) = records(&store, &parts).await?.remove(0);
        let (old, new) = (data_of(&first)?, data_of(&swapped)?);
        // The record back at value 1 everywhere, value 2's above it on one replica.
        store.put(&pkey, first, Condition::None).await.map_err(|e| format!("the part record put back: {e}"))?;
        store.put(&intent_key(old), part_intent(0, id), Condition::None).await.map_err(|e| format!("the released intent: {e}"))?;
        store.put(&intent_key(new), part_intent(0, id), Condition::None).await.map_err(|e| format!("the swap's intent: {e}"))?;
        let (cut, last) = last_replica(&store, &pkey).await?;
        let dkey = map::drive_key(store.map().partition_of(&pkey), &pkey);
        let held = replica::held(&last, &dkey).await.map_err(|e| format!("the last replica: {e}"))?;
        let tag = held.tag().ok_or("the part record is not on the last replica")?;
        let above = Tag { counter: tag.counter + 1, ..tag };
        replica::store_if_newer(&last, &dkey, swapped, above, None).await.map_err(|e| format!("the swap on one replica: {e}"))?;

        // The coordinator cut off from that replica until the end, or its repairs would choose
        // the swap before the sweeper judges. With the replica cut off from the gateway too,
        // no record can be settled from every replica: the passes leave both data ids, chunks
        // and intents, to a later pass.
        turmoil::partition("k0", cut.as_str());
        turmoil::partition("script", cut.as_str());
        sweep_past_grace(&gateway).await?;
        let census = gateway.census().await.map_err(|e| format!("census: {e}"))?;
        turmoil::repair("script", cut.as_str());
        if ![old, new].iter().all(|d| census.stored.contains(d) && census.intents.contains(d)) {
            return Err(format!("with replica {cut} cut off, the sweeps judged data {old:032x} or {new:032x}: {census:?}"));
        }
        sweep_past_grace(&gateway).await?;
        turmoil::repair("k0", cut.as_str());
        // A read from every replica: the swap stands now if it can ever.
        store.make_chosen(&pkey).await.map_err(|e| format!("settling the part record: {e}"))?;
        complete(&gateway, 0, &(upload, second)).await.map_err(|e| format!("the completion with value 2's part failed: {e}"))?;
        match s3::get(&gateway, 0).await? {
            Some(Some(2)) => {}
            other => return Err(format!("object 0 reads {other:?} after the sweeps, not value 2")),
        }
        swept_clean(&gateway).await
    })
}

/// Sweeps past the grace, after which every chunk is referenced, every referenced chunk is
/// there, and no intent is left.
async fn swept_clean(gateway: &Embedded) -> Result<(), String> {
    sweep_past_grace(gateway).await?;
    let census = gateway.census().await.map_err(|e| format!("census: {e}"))?;
    if !census.missing().is_empty() || census.stored != census.referenced || !census.intents.is_empty() {
        return Err(format!("after the sweeps: {census:?}"));
    }
    Ok(())
}

/// The last of `key`'s partition's replicas in the map's order (its id is its host's name),
/// and a client of it.
pub(crate) async fn last_replica(store: &Store, key: &[u8]) -> Result<(String, Client), String> {
    let map = store.map();
    let id = map.replicas_of(map.partition_of(key)).last().cloned().ok_or("no replicas")?;
    replica_client(store, id).await
}

/// The first of `key`'s partition's replicas in the map's order, as `last_replica`.
pub(crate) async fn first_replica(store: &Store, key: &[u8]) -> Result<(String, Client), String> {
    let map = store.map();
    let id = map.replicas_of(map.partition_of(key)).first().cloned().ok_or("no replicas")?;
    replica_client(store, id).await
}

async fn replica_client(store: &Store, id: String) -> Result<(String, Client), String> {
    let map = store.map();
    let config = ClientConfig { cluster_version: map.epoch as i64, dialer: Some(net::dialer()), ..ClientConfig::default() };
    Client::connect(map.members[&id].addr.as_str(), config).await.map(|c| (id.clone(), c)).map_err(|e| format!("connecting to {id}: {e}"))
}

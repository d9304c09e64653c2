use super::*;

impl Store {

    /// Live keys in `[start, end]` (`end`: to the last key), in key order, at most `max`:
    /// every partition's range asked of a read quorum and merged, each key checked as a read
    /// would (tombstones and unacknowledged leftovers dropped).
    pub async fn range(&self, start: &[u8], end: Option<&[u8]>, max: usize) -> Result<Vec<Bytes>, ClusterError> {
        Self::check_key(start)?;
        if let Some(end) = end {
            Self::check_key(end)?;
        }
        self.with_map(|map| async move { self.range_in(&map, start, end, max).await }).await
    }

    async fn range_in(&self, map: &Arc<ClusterMap>, start: &[u8], end: Option<&[u8]>, max: usize) -> Result<Vec<Bytes>, OpError> {
        // Per partition: the keys seen and still to check, where the next page starts, and
        // whether that key was already seen (every page but the first starts after it).
        struct Cursor {
            pending: VecDeque<Bytes>,
            next: Option<Bytes>,
            after: bool,
        }
        // Keys sharing a hash tag live in one partition: only it is asked.
        let partitions: Vec<u32> = match map.partition_of_range(start, end) {
            Some(p) => vec![p],
            None => (0..map.partitions).collect(),
        };
        let mut cursors: BTreeMap<u32, Cursor> = partitions
            .into_iter()
            .map(|p| (p, Cursor { pending: Default::default(), next: Some(Bytes::copy_from_slice(start)), after: false }))
            .collect();
        let mut out = Vec::new();
        while out.len() < max {
            // Refill every partition that has run dry but has more, all at once. No partition
            // can add more than the keys still wanted, so no page is larger.
            let page = i32::try_from(max - out.len()).unwrap_or(i32::MAX);
            let dry: Vec<(u32, Bytes, bool)> = cursors
                .iter_mut()
                .filter(|(_, c)| c.pending.is_empty())
                .filter_map(|(&p, c)| c.next.take().map(|from| (p, from, c.after)))
                .collect();
            let pages = futures_util::future::try_join_all(dry.iter().map(|(p, from, after)| self.range_page(map, *p, from, *after, end, page))).await?;
            for ((p, _, _), (keys, more)) in dry.iter().zip(pages) {
                if let Some(c) = cursors.get_mut(p) {
                    c.next = more;
                    c.after = true;
                    c.pending.extend(keys);
                }
            }
            // The next keys in order: the smallest pending across partitions, one after another,
            // up to what is still wanted or until a partition with more pages runs dry (its next
            // page may hold smaller keys than the others' pending ones).
            let mut picked = Vec::new();
            while picked.len() < max - out.len() {
                let Some((&p, _)) = cursors.iter().filter(|(_, c)| !c.pending.is_empty()).min_by(|a, b| a.1.pending[0].cmp(&b.1.pending[0]))
                else {
                    break;
                };
                let Some(c) = cursors.get_mut(&p) else { break };
                picked.extend(c.pending.pop_front());
                if c.pending.is_empty() && c.next.is_some() {
                    break;
                }
            }
            if picked.is_empty() {
                // Pages of the cluster's own keys alone leave nothing to pick; later pages may.
                if cursors.values().all(|c| c.next.is_none()) {
                    break;
                }
                continue;
            }
            // Each is checked as a read would (tombstones and unacknowledged leftovers out),
            // all at once.
            let live = futures_util::future::try_join_all(picked.iter().map(|k| self.read(map, k, false))).await?;
            out.extend(picked.into_iter().zip(live).filter(|(_, v)| v.is_some()).map(|(k, _)| k));
        }
        Ok(out)
    }

    /// One page of a partition's user keys from `from` on: the union of a read quorum's
    /// answers, and where the next page starts if any replica had more.
    async fn range_page(
        &self,
        map: &Arc<ClusterMap>,
        partition: u32,
        from: &[u8],
        after: bool,
        end: Option<&[u8]>,
        page: i32,
    ) -> Result<(Vec<Bytes>, Option<Bytes>), OpError> {
        let query = map::page_query(partition, from, after, end, page);
        let answers = self
            .ask(map, partition, map.read_quorum(), Ask::Quorum, move |_, c| {
                let q = query.clone();
                async move { c.get_key_range(q).await }
            })
            .await?;
        let (mut keys, next) = map::page_union(partition, answers.into_iter().map(|(_, keys)| keys).collect(), page);
        keys.retain(|k| !map::is_reserved(k));
        Ok((keys, next))
    }
}

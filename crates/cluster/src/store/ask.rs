use super::*;

impl Store {
    /// Asks a partition's replicas; returns once `needed` answered (or too many could not).
    /// `Ask::Quorum` asks only `needed` of them, in `replicas` order, and one more for each
    /// that fails or while the quorum is slower than `hedge_after`; the answers not needed are
    /// dropped. `Ask::All` asks every replica, and those that have not answered when the
    /// quorum is reached go on in the background. Requests are polled in this task: no task
    /// or channel per replica on the way to a quorum.
    ///
    /// While the partition moves, every request needs `needed` of each set, its replicas and
    /// the drives it moves to (a joint quorum, as in Raft's joint consensus): a write goes to
    /// both sets, and a read asks the drives that stay first, which count for both, then what
    /// each set still lacks. So a read meets every write acknowledged before the move and
    /// during it, and a client still holding the move's map after the flip meets a drive
    /// fenced to the flip's epoch (which refuses it: the client reloads the map) wherever a
    /// write of the new epoch could have been acknowledged.
    pub(super) async fn ask<T, F, Fut>(&self, map: &Arc<ClusterMap>, partition: u32, needed: usize, mode: Ask, ask: F) -> Result<Vec<(String, T)>, OpError>
    where
        T: Send + 'static,
        F: Fn(String, Client) -> Fut + Clone + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<T, ClientError>> + Send + 'static,
    {
        self.ask_where(map, partition, needed, mode, |_: &T| true, ask).await
    }

    /// `ask`, counting toward the quorum only the answers `counts` takes: a replica that
    /// refuses a promise or an accept has answered, and another is asked in its place. When
    /// the quorum is not reached but some replicas refused, every answer is returned for the
    /// caller to judge (`Store::judge`).
    pub(super) async fn ask_where<T, C, F, Fut>(&self, map: &Arc<ClusterMap>, partition: u32, needed: usize, mode: Ask, counts: C, ask: F) -> Result<Vec<(String, T)>, OpError>
    where
        T: Send + 'static,
        C: Fn(&T) -> bool,
        F: Fn(String, Client) -> Fut + Clone + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<T, ClientError>> + Send + 'static,
    {
        let lane = if mode == Ask::Quorum { Lane::Reads } else { Lane::Writes };
        let start = |drive: String| {
            let (store, map, ask) = (self.clone(), map.clone(), ask.clone());
            async move {
                let answer = match store.connection(&map, &drive, lane).await {
                    Ok(c) => ask(drive.clone(), c).await,
                    Err(e) => Err(e),
                };
                (drive, answer)
            }
        };
        let joint = map.moving_to(partition);
        let order = match (joint, mode) {
            (None, _) => self.replicas(map, partition),
            // A read while the partition moves: the replicas (those that stay first), then the
            // drives it moves to.
            (Some(new), Ask::Quorum) => {
                let mut r = self.replicas(map, partition);
                let joining: Vec<String> = new.iter().filter(|d| !r.contains(d)).cloned().collect();
                r.extend(self.in_order(joining));
                r
            }
            (Some(_), Ask::All) => self.in_order(map.writers_of(partition)),
        };
        let (mut quorum, first) = Quorum::start(map.replicas_of(partition), joint, needed, mode, order);
        let mut running = Together::new();
        for drive in first {
            running.push(start(drive));
        }
        let mut got = Vec::new();
        let mut last_error: Option<String> = None;
        let mut stale = false;
        let mut out_of_space = 0;
        let hedge_after = self.inner.config.hedge_after;
        // Only while there is a replica left to ask (a write asks them all at once).
        let mut hedge = quorum.can_ask_more().then(|| Box::pin(tokio::time::sleep(hedge_after)));
        while !quorum.reached() {
            if quorum.idle() {
                // Everyone asked has answered and the quorum is still short (a moving
                // partition's sets): ask the next drive.
                match quorum.ask_next() {
                    Some(drive) => running.push(start(drive)),
                    None => break,
                }
            }
            let next = match hedge.as_mut().filter(|_| quorum.can_ask_more()) {
                None => running.next().await,
                Some(timer) => tokio::select! {
                    next = running.next() => next,
                    _ = timer.as_mut() => {
                        // Whoever has not answered yet is slow: ask another replica beside
                        // them, and ask them last for a while.
                        let (slow, next) = quorum.hedge();
                        for drive in &slow {
                            self.suspect(drive);
                        }
                        if let Some(drive) = next {
                            running.push(start(drive));
                        }
                        timer.as_mut().reset(Instant::now() + hedge_after);
                        continue;
                    }
                },
            };
            let Some((drive, answer)) = next else { break };
            let instead = match answer {
                Ok(v) => {
                    let instead = quorum.answered(&drive, counts(&v));
                    got.push((drive, v));
                    instead
                }
                Err(e) => {
                    if e.status() == Some(StatusCode::VersionFailure) {
                        stale = true;
                    } else if e.is_no_space() {
                        out_of_space += 1;
                    } else if e.status().is_none() {
                        // Not an answer from the drive (refused, reset, timed out): ask it last
                        // for a while.
                        self.suspect(&drive);
                    }
                    last_error = Some(format!("{drive}: {e}"));
                    quorum.failed(&drive)
                }
            };
            if let Some(drive) = instead {
                running.push(start(drive));
            }
        }
        // Writes still under way on the other replicas finish in the background.
        if mode != Ask::Quorum && !running.is_empty() {
            tokio::spawn(async move { while running.next().await.is_some() {} });
        }
        if quorum.reached() {
            return Ok(got);
        }
        if stale {
            return Err(OpError::StaleView);
        }
        if got.iter().any(|(_, v)| !counts(v)) {
            return Ok(got);
        }
        let last_error = last_error.unwrap_or_else(|| "no replicas".into());
        Err(OpError::Failed(ClusterError::NoQuorum { partition, needed, reached: got.len(), out_of_space, last_error }))
    }
}

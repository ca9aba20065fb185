//! A bounded queue in front of a worker thread that drops, and counts, what does not fit.
//!
//! Why: a visualization back end (a file, a viewer over the network) can be slow or stall
//! outright; the caller is a training loop or, later, a robot's control loop, which must never
//! wait for it (a peer toolkit's Rerun back-pressure once stalled a real robot). So `push` is a
//! `try_send`: it either hands the item over at once or drops it and counts the drop.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Counters shared by every handle of one queue.
#[derive(Debug, Default)]
pub struct QueueStats {
    accepted: AtomicU64,
    dropped: AtomicU64,
}

impl QueueStats {
    /// Items handed to the worker so far.
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }
    /// Items dropped because the queue was full (or the worker had stopped).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// A cheap, cloneable handle that pushes items without ever blocking.
pub struct QueueSender<T> {
    tx: SyncSender<T>,
    stats: Arc<QueueStats>,
}

impl<T> Clone for QueueSender<T> {
    fn clone(&self) -> Self {
        Self { tx: self.tx.clone(), stats: self.stats.clone() }
    }
}

impl<T> QueueSender<T> {
    /// Hand `item` to the worker if there is room; otherwise drop it and count the drop.
    /// Returns whether the item was accepted. Never blocks.
    pub fn push(&self, item: T) -> bool {
        match self.tx.try_send(item) {
            Ok(()) => {
                self.stats.accepted.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.stats.dropped.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// Wait for room and hand `item` over: only for end-of-stream markers, never in a loop that
    /// must keep its pace. Returns false if the worker has stopped.
    pub fn send_blocking(&self, item: T) -> bool {
        self.tx.send(item).is_ok()
    }

    /// The counters of this queue.
    pub fn stats(&self) -> &Arc<QueueStats> {
        &self.stats
    }
}

/// The owning end: a sender plus the worker thread, joined by [`DroppingQueue::finish`].
pub struct DroppingQueue<T> {
    sender: Option<QueueSender<T>>,
    worker: Option<JoinHandle<()>>,
}

impl<T: Send + 'static> DroppingQueue<T> {
    /// Start a worker thread named `name` that runs `consume` over every accepted item, in order,
    /// until all senders are gone. At most `capacity` items wait in the queue (at least 1).
    /// The worker also gets the queue's counters (to report the drop count at its end).
    pub fn spawn(
        name: &str,
        capacity: usize,
        consume: impl FnOnce(Receiver<T>, Arc<QueueStats>) + Send + 'static,
    ) -> std::io::Result<Self> {
        let (tx, rx) = sync_channel(capacity.max(1));
        let stats = Arc::new(QueueStats::default());
        let worker_stats = stats.clone();
        let worker = std::thread::Builder::new().name(name.to_string()).spawn(move || consume(rx, worker_stats))?;
        Ok(Self { sender: Some(QueueSender { tx, stats }), worker: Some(worker) })
    }
}

impl<T> DroppingQueue<T> {
    /// A handle for pushing; `None` once finished.
    pub fn sender(&self) -> Option<&QueueSender<T>> {
        self.sender.as_ref()
    }

    /// Close this handle's side and wait for the worker to drain what it accepted. The worker
    /// ends only when every cloned [`QueueSender`] is gone too. Returns the drop count.
    pub fn finish(&mut self) -> u64 {
        let dropped = self.sender.as_ref().map(|s| s.stats.dropped()).unwrap_or(0);
        self.sender = None;
        if let Some(w) = self.worker.take() {
            // A worker that panicked has lost its items; there is nothing more to recover here.
            let _ = w.join();
        }
        dropped
    }
}

impl<T> DroppingQueue<T> {
    /// Like [`DroppingQueue::finish`], but wait at most `limit` for the worker; a worker still
    /// busy then is left running detached (the process exit ends it). Returns the drop count and
    /// whether the worker finished in time.
    pub fn finish_within(&mut self, limit: std::time::Duration) -> (u64, bool) {
        let dropped = self.sender.as_ref().map(|s| s.stats.dropped()).unwrap_or(0);
        self.sender = None;
        let Some(w) = self.worker.take() else { return (dropped, true) };
        let deadline = std::time::Instant::now() + limit;
        while !w.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let done = w.is_finished();
        if done {
            let _ = w.join();
        }
        (dropped, done)
    }
}

impl<T> Drop for DroppingQueue<T> {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;

    /// A consumer blocked on purpose: the caller's pushes all return and the overflow is counted.
    #[test]
    fn stalled_consumer_drops_instead_of_blocking() {
        let capacity = 4;
        let (got_first_tx, got_first_rx) = channel::<u32>();
        let (release_tx, release_rx) = channel::<()>();
        let (seen_tx, seen_rx) = channel::<Vec<u32>>();
        let mut q = DroppingQueue::spawn("stalled", capacity, move |rx, _| {
            let first = rx.recv().unwrap();
            got_first_tx.send(first).unwrap();
            release_rx.recv().unwrap(); // stall until the test lets go
            let mut seen = vec![first];
            seen.extend(rx.iter());
            seen_tx.send(seen).unwrap();
        })
        .unwrap();
        let s = q.sender().unwrap().clone();
        assert!(s.push(0));
        assert_eq!(got_first_rx.recv().unwrap(), 0); // the worker now holds item 0 and is stuck
        let accepted: Vec<bool> = (1..100).map(|i| s.push(i)).collect();
        // Every call above returned; exactly `capacity` more fit, the other 95 were dropped.
        assert_eq!(accepted.iter().filter(|a| **a).count(), capacity);
        assert!(accepted[..capacity].iter().all(|a| *a));
        assert_eq!(s.stats().accepted(), 5);
        assert_eq!(s.stats().dropped(), 95);
        drop(s);
        release_tx.send(()).unwrap();
        assert_eq!(q.finish(), 95);
        assert_eq!(seen_rx.recv().unwrap(), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn a_free_consumer_gets_every_item_in_order() {
        let (seen_tx, seen_rx) = channel::<Vec<u32>>();
        let mut q =
            DroppingQueue::spawn("free", 1000, move |rx, _| seen_tx.send(rx.iter().collect()).unwrap()).unwrap();
        let s = q.sender().unwrap().clone();
        for i in 0..500 {
            assert!(s.push(i));
        }
        drop(s);
        assert_eq!(q.finish(), 0);
        assert_eq!(seen_rx.recv().unwrap(), (0..500).collect::<Vec<u32>>());
    }
}

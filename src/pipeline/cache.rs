//! The chunk cache shared by the pipeline's actors: loader threads insert parsed chunks, the
//! planner asks for the chunks the coming minibatches need, the packer takes them.
//!
//! Chunks are held in least-recently-used order (the `lru` crate) up to a capacity derived
//! from the randomization window, the look-ahead and the minibatches in flight (the engine
//! sets it at each start of its packers); with `keepDataInMemory` the capacity is unbounded,
//! so every chunk is read once. An optional budget in bytes bounds the chunks'
//! heap bytes too (each insert says what its chunk holds). A chunk a taker still holds (its
//! `Arc` is shared) is pinned: it is never evicted while in use, so memory is the capacity
//! (or the budget) plus the chunks of the minibatches being packed. A failed load is kept as its error, so every taker of that
//! chunk receives it, in timeline order, instead of waiting forever.

use crate::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::collections::HashSet;

use lru::LruCache;

/// What a load produced: the chunk, or the error every taker of it receives.
pub type Loaded<C, E> = Result<Arc<C>, Arc<E>>;

/// What [`ChunkCache::request`] decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// The chunk is in memory or being loaded: nothing to do.
    Present,
    /// The caller must have it loaded (it is now marked as loading).
    Load,
    /// The cache is closed.
    Closed,
}

/// The cache was closed (the pipeline is shutting down).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Closed;

/// Counts kept by the cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheCounters {
    /// Takes served from memory (or from a load already under way).
    pub hits: u64,
    /// Takes of a chunk that was neither in memory nor being loaded.
    pub misses: u64,
    /// Chunks dropped to stay within the capacity.
    pub evictions: u64,
}

struct State<C, E> {
    /// Each chunk with the heap bytes it holds.
    chunks: LruCache<u32, (Loaded<C, E>, usize)>,
    loading: HashSet<u32>,
    capacity: usize,
    /// Heap bytes of the chunks held, and the most they may hold.
    bytes: usize,
    byte_budget: usize,
    closed: bool,
    counters: CacheCounters,
}

/// Parsed chunks by chunk id, shared between threads.
pub struct ChunkCache<C, E> {
    state: Mutex<State<C, E>>,
    /// Signalled whenever a chunk is inserted or the cache closes.
    inserted: Condvar,
}

impl<C, E> ChunkCache<C, E> {
    /// A cache of at most `capacity` unpinned chunks (`None`: unbounded).
    pub fn new(capacity: Option<usize>) -> Self {
        ChunkCache {
            state: Mutex::new(State {
                chunks: LruCache::unbounded(),
                loading: HashSet::new(),
                capacity: capacity.map_or(usize::MAX, |c| c.max(1)),
                bytes: 0,
                byte_budget: usize::MAX,
                closed: false,
                counters: CacheCounters::default(),
            }),
            inserted: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<C, E>> {
        // A panic while holding the lock leaves the maps consistent (every update is a
        // single insert or remove), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks `chunk` as wanted: [`Request::Load`] when the caller must have it loaded.
    pub fn request(&self, chunk: u32) -> Request {
        let mut state = self.lock();
        if state.closed {
            Request::Closed
        } else if state.chunks.contains(&chunk) || state.loading.contains(&chunk) {
            Request::Present
        } else {
            state.loading.insert(chunk);
            Request::Load
        }
    }

    /// Stores a load's outcome (a chunk holding `bytes` heap bytes) and wakes the takers
    /// waiting for it.
    pub fn insert(&self, chunk: u32, loaded: Loaded<C, E>, bytes: usize) {
        let mut state = self.lock();
        state.loading.remove(&chunk);
        state.bytes += bytes;
        if let Some((_, replaced)) = state.chunks.put(chunk, (loaded, bytes)) {
            state.bytes -= replaced;
        }
        Self::evict(&mut state, chunk);
        drop(state);
        self.inserted.notify_all();
    }

    /// Sets the most unpinned chunks held (`None`: unbounded), evicting at once.
    pub fn set_capacity(&self, capacity: Option<usize>) {
        let mut state = self.lock();
        state.capacity = capacity.map_or(usize::MAX, |c| c.max(1));
        Self::evict(&mut state, u32::MAX);
    }

    /// Sets the most heap bytes the chunks may hold (`None`: no limit), evicting at once.
    pub fn set_byte_budget(&self, budget: Option<usize>) {
        let mut state = self.lock();
        state.byte_budget = budget.unwrap_or(usize::MAX);
        Self::evict(&mut state, u32::MAX);
    }

    /// Drops least recently used chunks beyond the capacity or the byte budget, except
    /// pinned ones and `keep`.
    fn evict(state: &mut State<C, E>, keep: u32) {
        let mut passed = 0;
        let over = |s: &State<C, E>| s.chunks.len() > s.capacity || s.bytes > s.byte_budget;
        while over(state) && passed < state.chunks.len() {
            let Some((id, (entry, bytes))) = state.chunks.pop_lru() else {
                break;
            };
            let pinned = match &entry {
                Ok(chunk) => Arc::strong_count(chunk) > 1,
                Err(_) => false,
            };
            if pinned || id == keep {
                // Back as most recent; look at the next one.
                state.chunks.put(id, (entry, bytes));
                passed += 1;
            } else {
                state.bytes -= bytes;
                state.counters.evictions += 1;
            }
        }
    }

    /// Takes `chunk`, waiting while it is being loaded. `Ok(None)` means it is neither in
    /// memory nor being loaded (it was never requested, or was evicted before this take):
    /// the caller requests it and takes again.
    pub fn take(&self, chunk: u32) -> Result<Option<Loaded<C, E>>, Closed> {
        let mut state = self.lock();
        let mut waited = false;
        loop {
            if state.closed {
                return Err(Closed);
            }
            if let Some((entry, _)) = state.chunks.get(&chunk) {
                let entry = entry.clone();
                if !waited {
                    state.counters.hits += 1;
                }
                return Ok(Some(entry));
            }
            if !state.loading.contains(&chunk) {
                state.counters.misses += 1;
                return Ok(None);
            }
            if !waited {
                state.counters.hits += 1;
                waited = true;
            }
            state = self.inserted.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Drops the failed loads kept as errors, so that the next request of those chunks
    /// reads them again (a restore after a transient read error retries the read).
    pub fn forget_errors(&self) {
        let mut state = self.lock();
        let failed: Vec<u32> = state
            .chunks
            .iter()
            .filter(|(_, (entry, _))| entry.is_err())
            .map(|(&id, _)| id)
            .collect();
        for id in failed {
            if let Some((_, bytes)) = state.chunks.pop(&id) {
                state.bytes -= bytes;
            }
        }
    }

    /// Closes the cache: every waiting and later take returns [`Closed`], requests return
    /// [`Request::Closed`].
    pub fn close(&self) {
        self.lock().closed = true;
        self.inserted.notify_all();
    }

    /// Whether `chunk` is held (loaded, or failed to load): a take would not wait.
    pub fn holds(&self, chunk: u32) -> bool {
        self.lock().chunks.contains(&chunk)
    }

    /// Whether [`ChunkCache::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Chunks held (pinned ones included).
    pub fn len(&self) -> usize {
        self.lock().chunks.len()
    }

    /// Heap bytes of the chunks held (pinned ones included).
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// Whether no chunk is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The counts so far.
    pub fn counters(&self) -> CacheCounters {
        self.lock().counters
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::thread;
    use std::time::Duration;

    type Cache = ChunkCache<Vec<u8>, String>;

    #[test]
    fn request_insert_take_and_miss() {
        let cache = Cache::new(Some(2));
        assert_eq!(cache.take(1), Ok(None));
        assert_eq!(cache.request(1), Request::Load);
        assert_eq!(cache.request(1), Request::Present);
        cache.insert(1, Ok(Arc::new(vec![1])), 1);
        assert_eq!(cache.request(1), Request::Present);
        let got = cache.take(1).unwrap().unwrap().unwrap();
        assert_eq!(*got, vec![1]);
        let c = cache.counters();
        assert_eq!((c.hits, c.misses), (1, 1));
    }

    #[test]
    fn least_recently_used_unpinned_chunks_are_evicted() {
        let cache = Cache::new(Some(2));
        for id in 0..3 {
            cache.request(id);
            cache.insert(id, Ok(Arc::new(vec![id as u8])), 1);
            if id == 1 {
                // Touch 0 so that 1 is the least recently used.
                cache.take(0).unwrap();
            }
        }
        assert_eq!(cache.len(), 2);
        assert!(cache.take(1).unwrap().is_none(), "1 was evicted");
        assert!(cache.take(0).unwrap().is_some());
        assert!(cache.take(2).unwrap().is_some());
        assert_eq!(cache.counters().evictions, 1);
    }

    #[test]
    fn a_chunk_in_use_is_pinned() {
        let cache = Cache::new(Some(1));
        cache.request(0);
        cache.insert(0, Ok(Arc::new(vec![0])), 1);
        let held = cache.take(0).unwrap().unwrap().unwrap();
        cache.request(1);
        cache.insert(1, Ok(Arc::new(vec![1])), 1);
        // Over capacity, but 0 is in use and 1 was just inserted.
        assert_eq!(cache.len(), 2);
        drop(held);
        cache.request(2);
        cache.insert(2, Ok(Arc::new(vec![2])), 1);
        assert_eq!(cache.len(), 1, "unpinned chunks go once over capacity");
        assert!(cache.take(2).unwrap().is_some());
    }

    #[test]
    fn the_byte_budget_evicts_unpinned_chunks_least_recent_first() {
        let cache = Cache::new(None);
        cache.set_byte_budget(Some(250));
        for id in 0..3 {
            cache.request(id);
            cache.insert(id, Ok(Arc::new(vec![id as u8])), 100);
        }
        // 300 bytes > 250: chunk 0 went.
        assert_eq!((cache.len(), cache.bytes()), (2, 200));
        assert!(cache.take(0).unwrap().is_none());
        let held = cache.take(1).unwrap().unwrap().unwrap();
        cache.set_byte_budget(Some(50));
        // 2 goes; 1 is pinned and stays, over the budget.
        assert_eq!((cache.len(), cache.bytes()), (1, 100));
        assert_eq!(*held, vec![1]);
        drop(held);
        cache.request(3);
        cache.insert(3, Ok(Arc::new(vec![3])), 40);
        assert_eq!((cache.len(), cache.bytes()), (1, 40), "1 is unpinned now");
        // Replacing an entry counts only its new size.
        cache.insert(3, Ok(Arc::new(vec![3])), 30);
        assert_eq!((cache.len(), cache.bytes()), (1, 30));
        assert_eq!(cache.counters().evictions, 3);
    }

    #[test]
    fn unbounded_keeps_everything() {
        let cache = Cache::new(None);
        for id in 0..100 {
            cache.request(id);
            cache.insert(id, Ok(Arc::new(vec![])), 1);
        }
        assert_eq!(cache.len(), 100);
        assert_eq!(cache.counters().evictions, 0);
    }

    #[test]
    fn errors_reach_every_taker_and_waiting_takers_wake() {
        let cache = Arc::new(Cache::new(Some(4)));
        assert_eq!(cache.request(7), Request::Load);
        let waiter = {
            let cache = Arc::clone(&cache);
            thread::spawn(move || cache.take(7))
        };
        thread::sleep(Duration::from_millis(20));
        cache.insert(7, Err(Arc::new("bad chunk".to_string())), 1);
        let got = waiter.join().unwrap().unwrap().unwrap();
        assert_eq!(*got.unwrap_err(), "bad chunk");
        assert!(
            cache.take(7).unwrap().unwrap().is_err(),
            "again for the next taker"
        );
    }

    #[test]
    fn close_wakes_waiting_takers() {
        let cache = Arc::new(Cache::new(Some(4)));
        cache.request(3);
        let waiter = {
            let cache = Arc::clone(&cache);
            thread::spawn(move || cache.take(3))
        };
        thread::sleep(Duration::from_millis(20));
        cache.close();
        assert_eq!(waiter.join().unwrap(), Err(Closed));
        assert_eq!(cache.request(4), Request::Closed);
    }
}

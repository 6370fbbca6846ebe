//! A bounded multi-producer, multi-consumer channel: the queue between the pipeline's threads.
//!
//! Each stage of the reading pipeline hands its work to the next through one of these. The
//! bound is the pipeline's back-pressure: a [`Sender::send`] into a full channel blocks until
//! a receiver takes an item, so a fast stage never runs more than `capacity` items ahead of a
//! slow one. Dropping is shutdown: when the last [`Receiver`] is dropped every blocked and
//! later `send` fails and hands its item back, and when the last [`Sender`] is dropped the
//! receivers drain what is queued and then get [`RecvError`]. Errors are not a channel state:
//! a stage that fails sends its error as an item (`Result<T, E>`), so it arrives in order
//! after the items before it.
//!
//! A normal build wraps `crossbeam_channel::bounded`; a send or receive that has to wait
//! keeps trying for up to 200 microseconds before it sleeps, while the waits of its end stay
//! that short (waking a sleeping thread costs tens of microseconds on a virtual machine).
//! Under `cfg(loom)` the same API is a small implementation on the [`crate::sync`] shim's
//! `Mutex` and two `Condvar`s (a queue and the counts of live senders and receivers), which
//! loom can model-check; crossbeam's channel is not loom-aware and loom has no bounded
//! channel.
//!
//! Capacity 0 (a rendezvous channel) is not supported: [`bounded`] panics on it.

use std::fmt;

/// Creates a channel holding at most `capacity` items, and returns its first sender and
/// receiver; clone them for more producers or consumers.
///
/// # Panics
///
/// If `capacity` is 0: rendezvous channels are not supported.
pub fn bounded<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    assert!(
        capacity >= 1,
        "a bounded channel needs a capacity of at least 1"
    );
    let (sender, receiver) = backend::bounded(capacity);
    (Sender { inner: sender }, Receiver { inner: receiver })
}

/// The sending side of a channel made by [`bounded`]; clone it for more producers.
pub struct Sender<T> {
    inner: backend::Sender<T>,
}

/// The receiving side of a channel made by [`bounded`]; clone it for more consumers (each
/// item goes to one of them).
pub struct Receiver<T> {
    inner: backend::Receiver<T>,
}

impl<T> Sender<T> {
    /// Queues `value`, blocking while the channel is full. Fails, handing `value` back, when
    /// every receiver has been dropped (also if that happens while blocked).
    pub fn send(&self, value: T) -> Result<(), SendError<T>> {
        self.inner.send(value)
    }

    /// Items queued right now (a snapshot: other threads may change it at once).
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// Whether no item is queued right now (a snapshot, like [`len`](Self::len)).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T> Receiver<T> {
    /// Takes the oldest item, blocking while the channel is empty. Fails once the channel is
    /// empty and every sender has been dropped (also if that happens while blocked).
    pub fn recv(&self) -> Result<T, RecvError> {
        self.inner.recv()
    }

    /// Takes the oldest item if there is one, without blocking.
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        self.inner.try_recv()
    }

    /// The items as they arrive, blocking for each, until the channel is empty and every
    /// sender has been dropped.
    pub fn iter(&self) -> Iter<'_, T> {
        Iter { receiver: self }
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        Sender {
            inner: self.inner.clone(),
        }
    }
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Self {
        Receiver {
            inner: self.inner.clone(),
        }
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Sender { .. }")
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Receiver { .. }")
    }
}

/// A blocking iterator over the items of a [`Receiver`] ([`Receiver::iter`]).
#[derive(Debug)]
pub struct Iter<'a, T> {
    receiver: &'a Receiver<T>,
}

impl<T> Iterator for Iter<'_, T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        self.receiver.recv().ok()
    }
}

impl<'a, T> IntoIterator for &'a Receiver<T> {
    type Item = T;
    type IntoIter = Iter<'a, T>;

    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

/// [`Sender::send`] failed because every receiver is gone; holds the unsent item.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SendError<T>(pub T);

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SendError { .. }")
    }
}

impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sending on a channel whose receivers are all gone")
    }
}

impl<T> std::error::Error for SendError<T> {}

/// [`Receiver::recv`] failed because the channel is empty and every sender is gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvError;

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("receiving on an empty channel whose senders are all gone")
    }
}

impl std::error::Error for RecvError {}

/// Why [`Receiver::try_recv`] returned no item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TryRecvError {
    /// The channel is empty now; senders remain, so an item may still come.
    Empty,
    /// The channel is empty and every sender is gone.
    Disconnected,
}

impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryRecvError::Empty => f.write_str("receiving on an empty channel"),
            TryRecvError::Disconnected => RecvError.fmt(f),
        }
    }
}

impl std::error::Error for TryRecvError {}

/// The normal build: `crossbeam_channel`'s bounded channel, its errors mapped to ours, and
/// a blocked send or receive that keeps trying a while before it sleeps (`backend::Polling`).
#[cfg(not(loom))]
mod backend {
    use super::{RecvError, SendError, TryRecvError};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    /// How long a send into a full channel, or a receive from an empty one, keeps trying
    /// (giving its core to any other runnable thread between tries) before it sleeps.
    ///
    /// On a virtual machine a thread woken on an idle core starts tens of microseconds
    /// later (the core has to be woken first). On the 2-core VM of README "Performance",
    /// `ctf bench`'s consumer slept after most deliveries, and `perf sched` showed each
    /// wake-up 20 to 40 microseconds late and its core idle for about a quarter of the
    /// packing phase. Most waits between the pipeline's stages are shorter than this: the
    /// phase after the first minibatch went from 34.0 to 29.3 ms on ragged and from 27.9 to
    /// 24.6 ms on seq (100 MB gen_ctf.py files).
    pub(super) const POLL_FOR: Duration = Duration::from_micros(200);

    /// Whether an end of a channel tries before it sleeps: while its waits are short. A
    /// wait that outlasts [`POLL_FOR`] (a consumer that is slower than the pipeline, say,
    /// or a loader with nothing to load) makes the next one sleep at once, so a slow
    /// partner costs no CPU per wait; a wait shorter than that brings the trying back.
    #[derive(Debug)]
    pub(super) struct Polling(AtomicBool);

    impl Polling {
        pub(super) fn new() -> Self {
            Polling(AtomicBool::new(true))
        }

        /// Starts a wait, after a first try found the channel full or empty.
        pub(super) fn start(&self) -> Wait<'_> {
            Wait {
                polling: self,
                since: Instant::now(),
                trying: self.0.load(Ordering::Relaxed),
            }
        }

        /// Records a wait that ended in a sleep, of `waited` in all: the next tries first
        /// when trying would have been enough for this one.
        pub(super) fn record(&self, waited: Duration) {
            self.0.store(waited < POLL_FOR, Ordering::Relaxed);
        }

        /// One send or receive of this end: `attempt` (with what it carries, `state`,
        /// handed back when it could not complete) once, then again while this end tries
        /// before sleeping ([`Wait::try_again`]), then `block`, recording how long the wait
        /// took.
        fn complete<S, R>(
            &self,
            mut state: S,
            mut attempt: impl FnMut(S) -> Result<R, S>,
            block: impl FnOnce(S) -> R,
        ) -> R {
            let mut wait = None;
            loop {
                state = match attempt(state) {
                    Ok(done) => return done,
                    Err(state) => state,
                };
                if !wait.get_or_insert_with(|| self.start()).try_again() {
                    break;
                }
            }
            let done = block(state);
            if let Some(wait) = wait {
                wait.slept();
            }
            done
        }
    }

    /// One wait of a channel end ([`Polling::start`]).
    pub(super) struct Wait<'a> {
        polling: &'a Polling,
        since: Instant,
        /// Whether it still tries before sleeping.
        pub(super) trying: bool,
    }

    impl Wait<'_> {
        /// Whether to try again (after yielding the core), or sleep.
        pub(super) fn try_again(&mut self) -> bool {
            self.trying = self.trying && self.since.elapsed() < POLL_FOR;
            if self.trying {
                std::thread::yield_now();
            }
            self.trying
        }

        /// Records, once the sleep ended, whether trying would have been enough.
        pub(super) fn slept(self) {
            self.polling.record(self.since.elapsed());
        }
    }

    pub(super) fn bounded<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
        let (sender, receiver) = crossbeam_channel::bounded(capacity);
        (
            Sender(sender, Polling::new()),
            Receiver(receiver, Polling::new()),
        )
    }

    pub(super) struct Sender<T>(crossbeam_channel::Sender<T>, Polling);

    pub(super) struct Receiver<T>(crossbeam_channel::Receiver<T>, Polling);

    impl<T> Sender<T> {
        pub(super) fn send(&self, value: T) -> Result<(), SendError<T>> {
            use crossbeam_channel::TrySendError;
            self.1.complete(
                value,
                |value| match self.0.try_send(value) {
                    Ok(()) => Ok(Ok(())),
                    Err(TrySendError::Disconnected(value)) => Ok(Err(SendError(value))),
                    Err(TrySendError::Full(value)) => Err(value),
                },
                |value| self.0.send(value).map_err(|e| SendError(e.into_inner())),
            )
        }

        pub(super) fn len(&self) -> usize {
            self.0.len()
        }
    }

    impl<T> Receiver<T> {
        pub(super) fn recv(&self) -> Result<T, RecvError> {
            self.1.complete(
                (),
                |()| match self.try_recv() {
                    Ok(value) => Ok(Ok(value)),
                    Err(TryRecvError::Disconnected) => Ok(Err(RecvError)),
                    Err(TryRecvError::Empty) => Err(()),
                },
                |()| self.0.recv().map_err(|_| RecvError),
            )
        }

        pub(super) fn try_recv(&self) -> Result<T, TryRecvError> {
            self.0.try_recv().map_err(|e| match e {
                crossbeam_channel::TryRecvError::Empty => TryRecvError::Empty,
                crossbeam_channel::TryRecvError::Disconnected => TryRecvError::Disconnected,
            })
        }
    }

    impl<T> Clone for Sender<T> {
        fn clone(&self) -> Self {
            Sender(self.0.clone(), Polling::new())
        }
    }

    impl<T> Clone for Receiver<T> {
        fn clone(&self) -> Self {
            Receiver(self.0.clone(), Polling::new())
        }
    }
}

/// The loom build: a queue under one `Mutex`, with a `Condvar` for "an item or the last
/// sender's drop happened" (receivers wait on it) and one for "room or the last receiver's
/// drop happened" (senders wait on it). Each side's clones are counted; the last drop of a
/// side wakes every waiter of the other side.
#[cfg(loom)]
mod backend {
    use super::{RecvError, SendError, TryRecvError};
    use crate::sync::{Arc, Condvar, Mutex, MutexGuard};
    use std::collections::VecDeque;

    struct State<T> {
        queue: VecDeque<T>,
        senders: usize,
        receivers: usize,
    }

    struct Shared<T> {
        state: Mutex<State<T>>,
        /// Receivers wait here for an item or for the last sender to go.
        filled: Condvar,
        /// Senders wait here for room or for the last receiver to go.
        emptied: Condvar,
        capacity: usize,
    }

    impl<T> Shared<T> {
        fn lock(&self) -> MutexGuard<'_, State<T>> {
            // The state is changed only by whole, non-panicking steps: a poisoned lock still
            // guards a consistent queue.
            self.state.lock().unwrap_or_else(|e| e.into_inner())
        }
    }

    fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, State<T>>) -> MutexGuard<'a, State<T>> {
        condvar.wait(guard).unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn bounded<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                queue: VecDeque::with_capacity(capacity),
                senders: 1,
                receivers: 1,
            }),
            filled: Condvar::new(),
            emptied: Condvar::new(),
            capacity,
        });
        (Sender(Arc::clone(&shared)), Receiver(shared))
    }

    pub(super) struct Sender<T>(Arc<Shared<T>>);

    pub(super) struct Receiver<T>(Arc<Shared<T>>);

    impl<T> Sender<T> {
        pub(super) fn send(&self, value: T) -> Result<(), SendError<T>> {
            let mut state = self.0.lock();
            loop {
                if state.receivers == 0 {
                    return Err(SendError(value));
                }
                if state.queue.len() < self.0.capacity {
                    state.queue.push_back(value);
                    drop(state);
                    self.0.filled.notify_one();
                    return Ok(());
                }
                state = wait(&self.0.emptied, state);
            }
        }

        pub(super) fn len(&self) -> usize {
            self.0.lock().queue.len()
        }
    }

    impl<T> Receiver<T> {
        pub(super) fn recv(&self) -> Result<T, RecvError> {
            let mut state = self.0.lock();
            loop {
                if let Some(value) = state.queue.pop_front() {
                    drop(state);
                    self.0.emptied.notify_one();
                    return Ok(value);
                }
                if state.senders == 0 {
                    return Err(RecvError);
                }
                state = wait(&self.0.filled, state);
            }
        }

        pub(super) fn try_recv(&self) -> Result<T, TryRecvError> {
            let mut state = self.0.lock();
            match state.queue.pop_front() {
                Some(value) => {
                    drop(state);
                    self.0.emptied.notify_one();
                    Ok(value)
                }
                None if state.senders == 0 => Err(TryRecvError::Disconnected),
                None => Err(TryRecvError::Empty),
            }
        }
    }

    impl<T> Clone for Sender<T> {
        fn clone(&self) -> Self {
            self.0.lock().senders += 1;
            Sender(Arc::clone(&self.0))
        }
    }

    impl<T> Clone for Receiver<T> {
        fn clone(&self) -> Self {
            self.0.lock().receivers += 1;
            Receiver(Arc::clone(&self.0))
        }
    }

    impl<T> Drop for Sender<T> {
        fn drop(&mut self) {
            let mut state = self.0.lock();
            state.senders -= 1;
            let last = state.senders == 0;
            drop(state);
            if last {
                self.0.filled.notify_all();
            }
        }
    }

    impl<T> Drop for Receiver<T> {
        fn drop(&mut self) {
            let mut state = self.0.lock();
            state.receivers -= 1;
            let last = state.receivers == 0;
            drop(state);
            if last {
                self.0.emptied.notify_all();
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::thread;
    use std::time::Duration;

    /// Long enough for a spawned thread to reach its blocking call, in practice; the tests
    /// pass whichever side gets there first.
    const SETTLE: Duration = Duration::from_millis(50);

    #[test]
    fn one_producer_capacity_1_keeps_order() {
        let (tx, rx) = bounded(1);
        let producer = thread::spawn(move || {
            for i in 0..100u32 {
                tx.send(i).unwrap();
            }
        });
        let got: Vec<u32> = rx.iter().collect();
        producer.join().unwrap();
        assert_eq!(got, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn two_producers_keep_their_own_order() {
        let (tx, rx) = bounded(1);
        let producers: Vec<_> = (0..2u32)
            .map(|p| {
                let tx = tx.clone();
                thread::spawn(move || {
                    for i in 0..50u32 {
                        tx.send((p, i)).unwrap();
                    }
                })
            })
            .collect();
        drop(tx);
        let got: Vec<(u32, u32)> = rx.iter().collect();
        for producer in producers {
            producer.join().unwrap();
        }
        assert_eq!(got.len(), 100);
        for p in 0..2 {
            let mine: Vec<u32> = got.iter().filter(|g| g.0 == p).map(|g| g.1).collect();
            assert_eq!(mine, (0..50).collect::<Vec<_>>());
        }
    }

    #[test]
    fn two_consumers_share_the_items() {
        let (tx, rx) = bounded(1);
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let rx = rx.clone();
                thread::spawn(move || rx.iter().collect::<Vec<u32>>())
            })
            .collect();
        drop(rx);
        for i in 0..100 {
            tx.send(i).unwrap();
        }
        drop(tx);
        let mut got: Vec<u32> = consumers
            .into_iter()
            .flat_map(|c| c.join().unwrap())
            .collect();
        got.sort_unstable();
        assert_eq!(got, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn dropping_the_receiver_unblocks_a_full_send() {
        let (tx, rx) = bounded(1);
        let producer = thread::spawn(move || {
            tx.send(1u32).unwrap();
            tx.send(2) // blocks: the channel is full
        });
        std::thread::sleep(SETTLE);
        drop(rx);
        assert_eq!(producer.join().unwrap(), Err(SendError(2)));
    }

    #[test]
    fn dropping_the_senders_ends_recv_after_draining() {
        let (tx, rx) = bounded(2);
        let consumer = thread::spawn(move || {
            let first = rx.recv();
            let second = rx.recv();
            let third = rx.recv(); // blocks until the sender is dropped
            (first, second, third)
        });
        tx.send(1u32).unwrap();
        tx.send(2).unwrap();
        std::thread::sleep(SETTLE);
        drop(tx);
        assert_eq!(consumer.join().unwrap(), (Ok(1), Ok(2), Err(RecvError)));
    }

    #[test]
    fn errors_travel_in_band_and_in_order() {
        let (tx, rx) = bounded::<Result<u32, String>>(1);
        let producer = thread::spawn(move || {
            tx.send(Ok(1)).unwrap();
            tx.send(Ok(2)).unwrap();
            tx.send(Err("bad line".to_string())).unwrap();
        });
        let got: Vec<_> = rx.iter().collect();
        producer.join().unwrap();
        assert_eq!(got, vec![Ok(1), Ok(2), Err("bad line".to_string())]);
    }

    #[test]
    fn try_recv_tells_empty_from_disconnected() {
        let (tx, rx) = bounded(1);
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        tx.send(7u32).unwrap();
        drop(tx);
        assert_eq!(rx.try_recv(), Ok(7));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
        assert_eq!(rx.recv(), Err(RecvError));
    }

    #[test]
    fn an_end_tries_before_sleeping_only_while_its_waits_are_short() {
        use backend::{Polling, POLL_FOR};
        let polling = Polling::new();
        assert!(polling.start().trying, "a new end tries first");
        polling.record(POLL_FOR * 2);
        assert!(
            !polling.start().trying,
            "after a long wait it sleeps at once"
        );
        polling.record(POLL_FOR / 4);
        assert!(polling.start().trying, "after a short one it tries again");
        let mut wait = polling.start();
        std::thread::sleep(POLL_FOR * 2);
        assert!(!wait.try_again(), "a wait stops trying after POLL_FOR");
    }

    #[test]
    fn items_keep_their_order_through_waits_of_any_length() {
        // A ping-pong through two one-item channels: most waits end while trying; the
        // pauses make some outlast it and sleep.
        let (to_echo, echo_in) = bounded(1);
        let (echo_out, back) = bounded(1);
        let echo = thread::spawn(move || {
            for (i, item) in echo_in.iter().enumerate() {
                if i % 100 == 99 {
                    std::thread::sleep(Duration::from_millis(1));
                }
                echo_out.send(item).unwrap();
            }
        });
        let mut got = Vec::new();
        for i in 0..1000u32 {
            to_echo.send(i).unwrap();
            got.push(back.recv().unwrap());
        }
        drop(to_echo);
        echo.join().unwrap();
        assert_eq!(got, (0..1000).collect::<Vec<_>>());
        assert_eq!(back.recv(), Err(RecvError));
    }

    #[test]
    #[should_panic(expected = "capacity of at least 1")]
    fn capacity_0_is_rejected() {
        let _ = bounded::<u32>(0);
    }
}

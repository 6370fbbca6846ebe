//! Loom models of the bounded channel ([`super::channel`] under `cfg(loom)`).
//!
//! Each model is tiny (at most three threads, capacity 1, two or three items) so that loom
//! can explore its interleavings exhaustively within `LOOM_MAX_PREEMPTIONS=2` in seconds.
//! Run them with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --lib loom`
//! (`.ci/run` does, in its own target directory).

use super::channel::{bounded, RecvError, SendError};
use super::thread;

/// (a) One producer, one consumer, capacity 1, three items: all arrive, in order.
#[test]
fn loom_one_producer_keeps_order() {
    loom::model(|| {
        let (tx, rx) = bounded(1);
        let producer = thread::spawn(move || {
            for i in 0..3u32 {
                tx.send(i).unwrap();
            }
        });
        let got: Vec<u32> = rx.iter().collect();
        producer.join().unwrap();
        assert_eq!(got, vec![0, 1, 2]);
    });
}

/// (b) Two producers, capacity 1, two items each: all four arrive, each producer's in order.
#[test]
fn loom_two_producers_keep_their_own_order() {
    loom::model(|| {
        let (tx, rx) = bounded(1);
        let producers: Vec<_> = (0..2u32)
            .map(|p| {
                let tx = tx.clone();
                thread::spawn(move || {
                    for i in 0..2u32 {
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
        assert_eq!(got.len(), 4);
        for p in 0..2 {
            let mine: Vec<u32> = got.iter().filter(|g| g.0 == p).map(|g| g.1).collect();
            assert_eq!(mine, vec![0, 1], "producer {p}");
        }
    });
}

/// Two consumers sharing one producer's items: each item goes to exactly one of them.
#[test]
fn loom_two_consumers_share_the_items() {
    loom::model(|| {
        let (tx, rx) = bounded(1);
        let rx2 = rx.clone();
        let consumer = thread::spawn(move || rx2.iter().collect::<Vec<u32>>());
        let producer = thread::spawn(move || {
            for i in 0..2u32 {
                tx.send(i).unwrap();
            }
        });
        let mut got: Vec<u32> = rx.iter().collect();
        producer.join().unwrap();
        let theirs = consumer.join().unwrap();
        // Each consumer sees its share in send order.
        assert!(got.windows(2).all(|w| w[0] < w[1]));
        assert!(theirs.windows(2).all(|w| w[0] < w[1]));
        got.extend(theirs);
        got.sort_unstable();
        assert_eq!(got, vec![0, 1]);
    });
}

/// (c) Shutdown while a producer blocks on a full channel: dropping the receiver makes the
/// blocked send fail and hand its item back, instead of hanging.
#[test]
fn loom_receiver_drop_unblocks_full_send() {
    loom::model(|| {
        let (tx, rx) = bounded(1);
        let producer = thread::spawn(move || {
            // The first send fits unless the receiver is already gone; the second finds the
            // channel full (nobody receives) and waits for the receiver's drop.
            let first = tx.send(1u32);
            let second = tx.send(2u32);
            (first, second)
        });
        drop(rx);
        let (first, second) = producer.join().unwrap();
        assert!(matches!(first, Ok(()) | Err(SendError(1))));
        assert_eq!(second, Err(SendError(2)));
    });
}

/// (d) The sender is dropped while the consumer blocks: it drains what was sent, then its
/// `recv` fails.
#[test]
fn loom_sender_drop_ends_recv_after_draining() {
    loom::model(|| {
        let (tx, rx) = bounded(1);
        let consumer = thread::spawn(move || {
            let mut got = Vec::new();
            loop {
                match rx.recv() {
                    Ok(v) => got.push(v),
                    Err(RecvError) => return got,
                }
            }
        });
        tx.send(1u32).unwrap();
        tx.send(2u32).unwrap();
        drop(tx);
        assert_eq!(consumer.join().unwrap(), vec![1, 2]);
    });
}

/// (e) An error sent in-band arrives in order, after the values sent before it, and the
/// channel then reports the disconnection.
#[test]
fn loom_in_band_error_arrives_in_order() {
    loom::model(|| {
        let (tx, rx) = bounded::<Result<u32, String>>(1);
        let producer = thread::spawn(move || {
            tx.send(Ok(1)).unwrap();
            tx.send(Err("bad line".to_string())).unwrap();
        });
        assert_eq!(rx.recv(), Ok(Ok(1)));
        assert_eq!(rx.recv(), Ok(Err("bad line".to_string())));
        assert_eq!(rx.recv(), Err(RecvError));
        producer.join().unwrap();
    });
}

//! The delivery-rate estimator and its max filter, on hand-made send and ACK timelines.

use std::time::{Duration, Instant};

use crate::delivery_rate::{DeliveryRate, MaxFilter, MAX_RECORDS};

const MS: Duration = Duration::from_millis(1);

/// 1,000-byte packets at 1 MB/s (one per ms), sent 4 per transmit (one `now`), acknowledged in pairs 10 µs apart
/// one RTT later: the timeline that read as 100 MB/s in quinn-proto 0.11's BBR.
#[test]
fn compressed_acks_do_not_inflate_the_rate() {
    let start = Instant::now();
    let rtt = 50 * MS;
    let packets = 2_000u32;
    let sent_at = |i: u32| start + (i / 4) * 4 * MS; // 4 packets per transmit, one transmit per 4 ms
    // Events in time order: a transmit (its first packet's index), or the ACK of a pair (its first index).
    let mut events: Vec<(Instant, bool, u32)> = (0..packets).step_by(4).map(|i| (sent_at(i), true, i)).collect();
    // The path delivers one packet per ms; the receiver acknowledges each pair as its second packet arrives.
    events.extend((0..packets).step_by(2).map(|i| (start + (i + 1) * MS + rtt, false, i)));
    events.sort_by_key(|&(at, is_send, _)| (at, !is_send));
    let mut rate = DeliveryRate::new(start);
    let mut samples = Vec::new();
    for (at, is_send, i) in events {
        if is_send {
            rate.on_sent(at, i == 0);
            continue;
        }
        rate.on_ack(at, sent_at(i), 1_000);
        rate.on_ack(at + Duration::from_micros(10), sent_at(i + 1), 1_000);
        samples.extend(rate.on_end_acks(at + Duration::from_micros(10), Some(rtt)).rate);
    }
    assert!(samples.len() > 500, "{} samples", samples.len());
    let steady = &samples[samples.len() / 2..];
    let (low, high) = steady.iter().fold((f64::MAX, 0f64), |(l, h), s| (l.min(*s), h.max(*s)));
    assert!(low > 0.9e6 && high < 1.15e6, "samples {low:.0}–{high:.0} B/s on a 1 MB/s path");
}

#[test]
fn a_sample_shorter_than_the_min_rtt_is_discarded() {
    let start = Instant::now();
    let mut rate = DeliveryRate::new(start);
    rate.on_sent(start, true);
    rate.on_ack(start + 10 * MS, start, 10_000);
    assert_eq!(rate.on_end_acks(start + 10 * MS, Some(20 * MS)).rate, None);
    rate.on_sent(start + 10 * MS, false);
    rate.on_ack(start + 40 * MS, start + 10 * MS, 10_000);
    let sample = rate.on_end_acks(start + 40 * MS, Some(20 * MS)).rate.expect("a 30 ms interval counts");
    assert!((sample - 10_000.0 / 0.030).abs() < 1.0, "{sample}");
}

#[test]
fn rounds_advance_once_per_flight() {
    let start = Instant::now();
    let mut rate = DeliveryRate::new(start);
    // Flight 1: three sends; their ACKs end one round (the first ACK), the rest stay in it.
    for i in 0..3 {
        rate.on_sent(start + i * MS, i == 0);
    }
    for i in 0..3 {
        rate.on_ack(start + (100 + i) * MS, start + i * MS, 1_000);
        rate.on_end_acks(start + (100 + i) * MS, None);
    }
    assert_eq!(rate.round(), 1);
    // Flight 2, sent after those ACKs: its first ACK starts round 2.
    rate.on_sent(start + 103 * MS, false);
    rate.on_ack(start + 203 * MS, start + 103 * MS, 1_000);
    assert!(rate.on_end_acks(start + 203 * MS, None).round_start);
    assert_eq!(rate.round(), 2);
}

#[test]
fn the_max_filter_forgets_after_its_window_of_rounds() {
    let mut filter = MaxFilter::new(10);
    filter.update(1, 100.0);
    for round in 2..=10 {
        filter.update(round, 50.0);
        assert_eq!(filter.get(), Some(100.0), "round {round}");
    }
    filter.update(11, 50.0);
    assert_eq!(filter.get(), Some(50.0));
    // Rounds without samples age nothing: the next sample, 20 rounds on, is compared with what was there.
    filter.update(31, 20.0);
    assert_eq!(filter.get(), Some(20.0), "the samples of rounds 2–11 are outside rounds 22–31");
    let mut filter = MaxFilter::new(10);
    filter.update(1, 100.0);
    filter.update(5, 20.0);
    assert_eq!(filter.get(), Some(100.0));
}

#[test]
fn an_ack_of_an_unknown_send_counts_as_delivered_without_a_sample() {
    let start = Instant::now();
    let mut rate = DeliveryRate::new(start);
    rate.on_ack(start + 5 * MS, start, 1_200);
    assert_eq!(rate.delivered(), 1_200);
    assert_eq!(rate.on_end_acks(start + 5 * MS, None).rate, None);
}

#[test]
fn what_it_keeps_per_connection_is_bounded() {
    // A peer acknowledging nothing: every transmit leaves a record, up to the bound (docs/security.md: < 1 MiB).
    let start = Instant::now();
    let mut rate = DeliveryRate::new(start);
    for i in 0..(MAX_RECORDS as u32 + 100) {
        rate.on_sent(start + Duration::from_micros(u64::from(i)), false);
    }
    let (held, size) = rate.records();
    assert_eq!(held, MAX_RECORDS);
    assert!(held * size < 1 << 20, "{held} × {size} bytes");
    // An acknowledgement of a later transmit releases the earlier records.
    let last = start + Duration::from_micros(MAX_RECORDS as u64 + 99);
    rate.on_ack(last + 50 * MS, last, 1_200);
    assert_eq!(rate.records().0, 1);
}

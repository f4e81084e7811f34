//! Delivery-rate samples and a windowed max-bandwidth filter, for the `delivery` congestion controller
//! (delivery_cc.rs). A sample is the bytes acknowledged between a packet's send and its acknowledgement, over
//! the longer of the send interval and the ACK interval that span them (as BBR's draft and Linux's `tcp_rate.c`
//! compute it). Taking the longer interval is what keeps ACK compression from inflating it: quinn-proto 0.11's
//! BBR divides one packet by the gap between two ACK frames, which read a 1 MB/s path as 100 MB/s in a unit test
//! (docs/performance-log.md, "QUIC pacing at BBR's rate").
//!
//! quinn tells a controller of a send (`on_sent`: when, how many bytes) and of each acknowledged packet's send
//! time (`on_ack`'s `sent`), not of packet numbers on both sides, so the state a sample needs is recorded per
//! send instant: every packet of one transmit shares its `now`.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// What was delivered when a packet went out.
#[derive(Clone, Copy, Debug)]
struct SendRecord {
    sent: Instant,
    /// Bytes acknowledged in total at that moment.
    delivered: u64,
    /// When the last of those was acknowledged.
    delivered_time: Instant,
    /// Send time of the packet whose acknowledgement was the last before this send.
    first_sent_time: Instant,
}

/// Un-acknowledged send instants kept at most (56 bytes each: under 1 MiB per connection, docs/security.md); beyond
/// it the oldest go. A record leaves when a later send is acknowledged, so what is kept is bounded by the window's
/// transmits (a few thousand at 1 Gbit/s × 200 ms with GSO batches), and a peer acknowledging nothing stops our
/// sends at the window.
pub const MAX_RECORDS: usize = 1 << 14;

/// Delivery-rate samples and round trips of one connection.
#[derive(Clone, Debug)]
pub struct DeliveryRate {
    delivered: u64,
    delivered_time: Instant,
    first_sent_time: Instant,
    records: VecDeque<SendRecord>,
    /// The acknowledged packet of the current ACK batch sent last.
    latest_acked: Option<SendRecord>,
    round: u64,
    next_round_delivered: u64,
}

/// One ACK batch's outcome.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// Bytes per second, or none when the batch gave no valid sample.
    pub rate: Option<f64>,
    /// The batch acknowledged a packet sent after the previous round's end: a round trip has passed.
    pub round_start: bool,
}

impl DeliveryRate {
    pub fn new(now: Instant) -> Self {
        Self { delivered: 0, delivered_time: now, first_sent_time: now, records: VecDeque::new(), latest_acked: None, round: 0, next_round_delivered: 0 }
    }

    /// Bytes acknowledged so far.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Send records held (the memory bound's subject).
    #[cfg(test)]
    pub fn records(&self) -> (usize, usize) {
        (self.records.len(), std::mem::size_of::<SendRecord>())
    }

    /// Round trips counted so far.
    pub fn round(&self) -> u64 {
        self.round
    }

    /// A transmit at `now`; `idle` when nothing was in flight before it (the intervals restart there, so time
    /// spent with nothing to send is not read as a slow path).
    pub fn on_sent(&mut self, now: Instant, idle: bool) {
        if idle {
            self.first_sent_time = now;
            self.delivered_time = now;
        }
        if self.records.back().is_some_and(|r| r.sent >= now) {
            return;
        }
        if self.records.len() == MAX_RECORDS {
            self.records.pop_front();
        }
        self.records.push_back(SendRecord { sent: now, delivered: self.delivered, delivered_time: self.delivered_time, first_sent_time: self.first_sent_time });
    }

    /// One acknowledged packet, sent at `sent`.
    pub fn on_ack(&mut self, now: Instant, sent: Instant, bytes: u64) {
        self.delivered += bytes;
        self.delivered_time = now;
        let Ok(index) = self.records.binary_search_by(|r| r.sent.cmp(&sent)) else { return };
        let record = self.records[index];
        // Packets sent before this one and still unacknowledged are lost or about to be: their records go.
        self.records.drain(..index);
        if self.latest_acked.is_none_or(|l| record.sent >= l.sent) {
            self.latest_acked = Some(record);
        }
    }

    /// The end of an ACK batch: the sample of the packet in it sent last. Samples over less than `min_rtt`
    /// are discarded (Linux's rule: no flight is acknowledged faster than one RTT, so such an interval was
    /// compressed).
    pub fn on_end_acks(&mut self, now: Instant, min_rtt: Option<Duration>) -> Sample {
        let Some(record) = self.latest_acked.take() else { return Sample { rate: None, round_start: false } };
        let round_start = record.delivered >= self.next_round_delivered;
        if round_start {
            self.round += 1;
            self.next_round_delivered = self.delivered;
        }
        self.first_sent_time = record.sent;
        let send_elapsed = record.sent.saturating_duration_since(record.first_sent_time);
        let ack_elapsed = now.saturating_duration_since(record.delivered_time);
        let interval = send_elapsed.max(ack_elapsed);
        let too_short = interval.is_zero() || min_rtt.is_some_and(|m| interval < m);
        let rate = (!too_short).then(|| (self.delivered - record.delivered) as f64 / interval.as_secs_f64());
        Sample { rate, round_start }
    }
}

/// The largest of the samples of the last `window` round trips that had samples; older ones age out as newer
/// ones come in (rounds without samples, when the application had little to send, age nothing).
#[derive(Clone, Debug)]
pub struct MaxFilter {
    window: u64,
    /// (round, largest sample of that round), oldest first, at most `window` entries.
    rounds: VecDeque<(u64, f64)>,
}

impl MaxFilter {
    pub fn new(window: u64) -> Self {
        Self { window, rounds: VecDeque::new() }
    }

    pub fn update(&mut self, round: u64, sample: f64) {
        match self.rounds.back_mut() {
            Some((r, best)) if *r == round => *best = best.max(sample),
            _ => self.rounds.push_back((round, sample)),
        }
        while self.rounds.front().is_some_and(|(r, _)| r + self.window <= round) {
            self.rounds.pop_front();
        }
    }

    pub fn get(&self) -> Option<f64> {
        self.rounds.iter().map(|(_, v)| *v).reduce(f64::max)
    }

    pub fn reset(&mut self) {
        self.rounds.clear();
    }
}

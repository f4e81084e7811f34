//! The `delivery` congestion controller: a BBR-style model (bottleneck bandwidth × min RTT) on delivery-rate
//! samples (delivery_rate.rs), written for quinn's window pacing.
//!
//! quinn-proto 0.11 paces every controller at 1.25 × window / smoothed RTT and ignores a controller's pacing
//! rate, so the window is the sending rate. quinn's BBR keeps a window of 2 × its bandwidth estimate × min RTT,
//! which on a drop-tail queue of one BDP overflows it (in the lab: half of 32 streams' datagrams dropped, see
//! docs/benchmarks.md). This controller keeps 1.25 × estimate × min RTT instead: a standing queue of a quarter
//! BDP, and a way back up that does not rest on the estimate being right — a flow limited by that window
//! delivers 1.25 × the estimate whenever the path has room, so every round's samples lift the estimate by up
//! to a quarter, and the max filter forgets a slow round (a loss recovery, a stalled process) after 10 round
//! trips of samples instead of holding it (pacing at the estimate stalled flows: a slow round capped the next).
//! Rounds in which the application had too little to send age nothing (their lower samples are not entered, as
//! in Linux's BBR), so a bursty connection keeps the rate it measured.
//!
//! Loss: random loss of a few percent does not move the window (losses are not congestion here, as in BBR).
//! A round losing more than `LOSS_THRESHOLD` of what it sent (a queue overflowing: 10–30% of a round's
//! datagrams in the lab) caps what may be in flight at 0.7 × the window (not below the estimated BDP, which
//! fills the path without a queue); the cap then grows by 1, 2, 4, …
//! datagrams per round without such loss (BBRv2's probing of its in-flight bound) and goes once it no longer
//! binds. Persistent congestion (everything lost for 3 PTOs) starts over from Startup.
//!
//! The min RTT is the smallest of the last 10 s; when it expires the window falls to half a BDP for at least
//! 200 ms and one round (ProbeRTT), so a queue of our own does not become the path's RTT.

use std::any::Any;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quinn::congestion::{Controller, ControllerFactory, ControllerMetrics};
use quinn_proto::RttEstimator;

use crate::delivery_rate::{DeliveryRate, MaxFilter};

/// Window gain while the flow looks for the path's bandwidth (2 / ln 2: doubles per round, as BBR's Startup).
pub const STARTUP_GAIN: f64 = 2.885;
/// Window gain once the bandwidth is found: the headroom a slow round needs to be measured back up.
pub const CRUISE_GAIN: f64 = 1.25;
/// Window gain while the min RTT is measured again.
pub const PROBE_RTT_GAIN: f64 = 0.5;
/// Round trips the max-bandwidth filter remembers.
pub const BW_WINDOW_ROUNDS: u64 = 10;
/// How long a min RTT stands.
pub const MIN_RTT_WINDOW: Duration = Duration::from_secs(10);
/// How long ProbeRTT holds the small window (at least one round too).
pub const PROBE_RTT_DURATION: Duration = Duration::from_millis(200);
/// A round losing more than this share of its bytes is congestion (random loss of 1–3% is not).
pub const LOSS_THRESHOLD: f64 = 0.05;
/// The in-flight cap after such a round, as a share of the window.
pub const LOSS_BETA: f64 = 0.7;
/// Startup ends after this many rounds without the estimate growing by a quarter.
const FULL_BW_ROUNDS: u32 = 3;
/// The same initial window as quinn's BBR (200 datagrams of 1,200 bytes), so the two compare on bursts too.
pub const INITIAL_WINDOW: u64 = 200 * 1200;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    Startup,
    Cruise,
    /// Until when and until which round the window stays small.
    ProbeRtt { until: Instant, round: u64 },
}

/// Factory for quinn (`congestion: 'delivery'`).
#[derive(Clone, Debug, Default)]
pub struct DeliveryConfig;

impl ControllerFactory for DeliveryConfig {
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        Box::new(Delivery::new(now, current_mtu))
    }
}

#[derive(Clone, Debug)]
pub struct Delivery {
    mtu: u64,
    rate: DeliveryRate,
    max_bw: MaxFilter,
    min_rtt: Option<(Duration, Instant)>,
    mode: Mode,
    window: u64,
    /// Startup: the estimate the last growth was measured against, and rounds since.
    full_bw: f64,
    full_bw_rounds: u32,
    /// Bytes lost in the current round, and delivered when it began.
    round_lost: u64,
    round_start_delivered: u64,
    /// In-flight bound after a round of heavy loss, and what it grows by next round.
    inflight_cap: Option<u64>,
    cap_growth: u64,
    /// Bytes in flight as quinn last reported them (plus sends since).
    in_flight: u64,
    acked_in_batch: u64,
    app_limited: bool,
}

impl Delivery {
    pub fn new(now: Instant, mtu: u16) -> Self {
        Self {
            mtu: mtu as u64,
            rate: DeliveryRate::new(now),
            max_bw: MaxFilter::new(BW_WINDOW_ROUNDS),
            min_rtt: None,
            mode: Mode::Startup,
            window: INITIAL_WINDOW,
            full_bw: 0.0,
            full_bw_rounds: 0,
            round_lost: 0,
            round_start_delivered: 0,
            inflight_cap: None,
            cap_growth: mtu as u64,
            in_flight: 0,
            acked_in_batch: 0,
            app_limited: false,
        }
    }

    #[cfg(test)]
    pub fn mode(&self) -> Mode {
        self.mode
    }

    #[cfg(test)]
    /// Bytes per second.
    pub fn bandwidth(&self) -> Option<f64> {
        self.max_bw.get()
    }

    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt.map(|(rtt, _)| rtt)
    }

    #[cfg(test)]
    pub fn inflight_cap(&self) -> Option<u64> {
        self.inflight_cap
    }

    fn min_window(&self) -> u64 {
        4 * self.mtu
    }

    fn gain(&self) -> f64 {
        match self.mode {
            Mode::Startup => STARTUP_GAIN,
            Mode::Cruise => CRUISE_GAIN,
            Mode::ProbeRtt { .. } => PROBE_RTT_GAIN,
        }
    }

    /// gain × bandwidth × min RTT, once both are known.
    fn target(&self, gain: f64) -> Option<u64> {
        let bw = self.max_bw.get()?;
        let (rtt, _) = self.min_rtt?;
        Some((gain * bw * rtt.as_secs_f64()) as u64)
    }

    fn on_rtt_sample(&mut self, now: Instant, rtt: Duration) {
        let expired = self.min_rtt.is_some_and(|(_, at)| now.saturating_duration_since(at) > MIN_RTT_WINDOW);
        if self.min_rtt.is_none_or(|(min, _)| rtt <= min) || expired {
            self.min_rtt = Some((rtt, now));
        }
        if expired && self.mode == Mode::Cruise {
            self.mode = Mode::ProbeRtt { until: now + PROBE_RTT_DURATION, round: self.rate.round() + 1 };
        }
    }

    /// The end of a round trip: loss accounting, Startup's exit, ProbeRTT's end.
    fn on_round_end(&mut self, now: Instant) {
        let delivered = self.rate.delivered() - self.round_start_delivered;
        let lost = self.round_lost;
        // At least 10 datagrams: in a short round (a burst, a small window) a few random losses are > 5%.
        let heavy = lost >= 10 * self.mtu && lost as f64 > LOSS_THRESHOLD * (delivered + lost) as f64;
        if heavy {
            // Never below the estimated BDP: that much in flight fills the path without a queue, so a round of
            // random loss that crosses the threshold costs nothing, and caps do not compound; an estimate that
            // is too high (the path narrowed) ages out of the filter within 10 rounds, and the cap with it.
            let bdp = self.target(1.0).unwrap_or(0);
            self.inflight_cap = Some(((LOSS_BETA * self.window as f64) as u64).max(bdp).max(self.min_window()));
            self.cap_growth = self.mtu;
        } else if let Some(cap) = self.inflight_cap {
            if !self.app_limited {
                let grown = cap + self.cap_growth;
                self.cap_growth *= 2;
                let no_longer_binds = self.target(self.gain()).is_some_and(|t| grown > 2 * t);
                self.inflight_cap = (!no_longer_binds).then_some(grown);
            }
        }
        // A round in which the application had too little to send says nothing of whether the pipe is full (as
        // in Linux's BBR): a connection carrying small calls stays in Startup, its window where it was, until a
        // transfer large enough to measure the path comes.
        if self.mode == Mode::Startup && !self.app_limited {
            if let Some(bw) = self.max_bw.get() {
                if bw >= 1.25 * self.full_bw {
                    self.full_bw = bw;
                    self.full_bw_rounds = 0;
                } else {
                    self.full_bw_rounds += 1;
                }
            }
        }
        if self.mode == Mode::Startup && (heavy || self.full_bw_rounds >= FULL_BW_ROUNDS) {
            self.mode = Mode::Cruise;
        }
        if let Mode::ProbeRtt { until, round } = self.mode {
            if now >= until && self.rate.round() >= round {
                self.mode = Mode::Cruise;
            }
        }
        self.round_lost = 0;
        self.round_start_delivered = self.rate.delivered();
    }

    /// `Controller::on_ack` without quinn's RTT estimator (which only quinn can make): the RTT sample is this
    /// packet's own, `now - sent`. Tests drive the controller through it.
    pub fn on_acked(&mut self, now: Instant, sent: Instant, bytes: u64, app_limited: bool) {
        self.rate.on_ack(now, sent, bytes);
        self.on_rtt_sample(now, now.saturating_duration_since(sent));
        self.acked_in_batch += bytes;
        self.app_limited = app_limited;
    }

    /// Moves the window toward its target: up by at most what was just acknowledged (no more than doubling per
    /// round), down at once; then the in-flight cap and the floor.
    fn set_window(&mut self, acked: u64) {
        let window = match self.target(self.gain()) {
            Some(target) if self.window < target => (self.window + acked).min(target),
            // Startup never shrinks the window: its first samples (a handshake, a ping) say nothing of the path.
            Some(_) if self.mode == Mode::Startup => self.window,
            Some(target) => target,
            None => self.window + acked,
        };
        let window = self.inflight_cap.map_or(window, |cap| window.min(cap));
        self.window = window.max(self.min_window());
    }
}

impl Controller for Delivery {
    fn on_sent(&mut self, now: Instant, bytes: u64, _last_packet_number: u64) {
        self.rate.on_sent(now, self.in_flight == 0);
        self.in_flight += bytes;
    }

    fn on_ack(&mut self, now: Instant, sent: Instant, bytes: u64, app_limited: bool, _rtt: &RttEstimator) {
        self.on_acked(now, sent, bytes, app_limited);
    }

    fn on_end_acks(&mut self, now: Instant, in_flight: u64, app_limited: bool, _largest_packet_num_acked: Option<u64>) {
        self.in_flight = in_flight;
        self.app_limited = app_limited;
        let sample = self.rate.on_end_acks(now, self.min_rtt());
        let round = self.rate.round();
        if let Some(rate) = sample.rate {
            // A sample taken while the application had nothing to send only counts if it raises the estimate.
            if !app_limited || self.max_bw.get().is_none_or(|bw| rate > bw) {
                self.max_bw.update(round, rate);
            }
        }
        if sample.round_start {
            self.on_round_end(now);
        }
        let acked = std::mem::take(&mut self.acked_in_batch);
        self.set_window(acked);
    }

    fn on_congestion_event(&mut self, _now: Instant, _sent: Instant, is_persistent_congestion: bool, lost_bytes: u64) {
        self.round_lost += lost_bytes;
        self.in_flight = self.in_flight.saturating_sub(lost_bytes);
        if is_persistent_congestion {
            // The path went dark for several PTOs: what was known of it is stale.
            self.max_bw.reset();
            self.mode = Mode::Startup;
            self.full_bw = 0.0;
            self.full_bw_rounds = 0;
            self.inflight_cap = None;
            self.window = self.min_window();
        }
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.mtu = new_mtu as u64;
        self.window = self.window.max(self.min_window());
    }

    fn window(&self) -> u64 {
        self.window
    }

    fn metrics(&self) -> ControllerMetrics {
        let mut metrics = ControllerMetrics::default();
        metrics.congestion_window = self.window;
        metrics.pacing_rate = self.max_bw.get().map(|bw| (bw * self.gain() * 8.0) as u64);
        metrics
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(self.clone())
    }

    fn initial_window(&self) -> u64 {
        INITIAL_WINDOW
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

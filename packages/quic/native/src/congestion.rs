//! Which congestion controller a connection runs. `delivery` (delivery_cc.rs, the engine's own) is the default
//! since it beat quinn's BBR on every figure of the network lab (3 interleaved repeats: 40 ms one-way at 0% and 1%
//! loss and 10 ms at 3%, 1 and 32 streams, 1,000-token bursts; docs/benchmarks.md). Both model the path's
//! bandwidth and RTT instead of reading every loss as congestion, so random loss (Wi-Fi, long lossy paths) does
//! not collapse the window as Cubic's and NewReno's multiplicative decrease does (measured in the lab, 40 ms
//! one-way / 1% loss, 100 Mbit/s, 1 / 32 / 128 streams: Cubic 1.1–2.4 Mbit/s, BBR 56–66). quinn paces every controller's
//! sends, so no burst of a whole window hits the path. Its pacer (quinn-proto 0.11) spreads 1.25 windows over the
//! smoothed RTT and does not read BBR's pacing rate; pacing at that rate was tried and not shipped: quinn's BBR
//! estimates bandwidth from ACK spacing, and a pacer following it lost throughput in the lab (pacing_tests.rs,
//! docs/performance-log.md "QUIC pacing at BBR's rate").

use std::sync::Arc;

use quinn::congestion::{BbrConfig, ControllerFactory, CubicConfig, NewRenoConfig};

use crate::delivery_cc::DeliveryConfig;

/// The names JavaScript passes (`quic({ congestion })`); the first is the default.
pub const CONTROLLERS: [&str; 4] = ["delivery", "bbr", "cubic", "newreno"];

/// The factory quinn builds each connection's controller from; `None` = the default (`delivery`). The error is plain
/// text (the caller makes it an INVALID_ARGUMENT): napi's Error cannot be dropped outside Node, in a unit test.
pub fn controller_factory(name: Option<&str>) -> Result<Arc<dyn ControllerFactory + Send + Sync>, String> {
    match name.unwrap_or(CONTROLLERS[0]) {
        "bbr" => Ok(Arc::new(BbrConfig::default())),
        "cubic" => Ok(Arc::new(CubicConfig::default())),
        "newreno" => Ok(Arc::new(NewRenoConfig::default())),
        "delivery" => Ok(Arc::new(DeliveryConfig)),
        other => Err(format!("unknown congestion controller {other:?} (one of {})", CONTROLLERS.join(", "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quinn::congestion::{Bbr, Controller, Cubic, NewReno};
    use std::any::Any;
    use std::time::Instant;

    fn built(name: Option<&str>) -> Box<dyn Any> {
        let controller: Box<dyn Controller> = controller_factory(name).unwrap().build(Instant::now(), 1200);
        controller.into_any()
    }

    #[test]
    fn delivery_is_the_default() {
        assert!(built(None).downcast::<crate::delivery_cc::Delivery>().is_ok());
    }

    #[test]
    fn each_name_maps_to_its_controller() {
        assert!(built(Some("bbr")).downcast::<Bbr>().is_ok());
        assert!(built(Some("cubic")).downcast::<Cubic>().is_ok());
        assert!(built(Some("newreno")).downcast::<NewReno>().is_ok());
        assert!(built(Some("delivery")).downcast::<crate::delivery_cc::Delivery>().is_ok());
    }

    #[test]
    fn an_unknown_name_is_refused_naming_the_choices() {
        let error = controller_factory(Some("reno")).err().expect("refused");
        assert!(error.contains("\"reno\""), "{error}");
        assert!(error.contains("delivery, bbr, cubic, newreno"), "{error}");
    }
}

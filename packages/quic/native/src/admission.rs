//! Listener limits, checked for every arriving connection before any TLS work: connections held in all, from one
//! IP at once, and new ones per IP per second (a token bucket with a burst of 5 s worth). The same options, with
//! the same meanings and defaults, as core's `ConnectionAdmission` for the node:tls channels (docs/security.md).

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// IPs whose rate is tracked at most; the oldest are forgotten first (their buckets start full again).
const MAX_TRACKED_IPS: usize = 100_000;
/// A quiet IP may open this many seconds' worth of connections at once.
const BURST_SECONDS: f64 = 5.0;

#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_connections: u32,
    pub max_connections_per_ip: u32,
    pub new_connections_per_ip_per_second: u32,
    pub handshake_timeout: Duration,
    /// IPv6 peers are counted per network of this many leading bits: one host usually holds a whole /64.
    pub ipv6_prefix_length: u8,
}

impl Default for Limits {
    /// core's DEFAULT_LISTENER_LIMITS; JavaScript always passes resolved numbers, this serves Rust callers.
    fn default() -> Self {
        Self {
            max_connections: 4096,
            max_connections_per_ip: 1024,
            new_connections_per_ip_per_second: 200,
            handshake_timeout: Duration::from_millis(5000),
            ipv6_prefix_length: 64,
        }
    }
}

/// Why an arrival was refused: the `reason` of the refusal reported to JavaScript.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    MaxConnections,
    MaxConnectionsPerIp,
    IpRate,
}

impl Refused {
    pub fn reason(self) -> &'static str {
        match self {
            Refused::MaxConnections => "max-connections",
            Refused::MaxConnectionsPerIp => "max-connections-per-ip",
            Refused::IpRate => "ip-rate",
        }
    }
}

struct Bucket {
    tokens: f64,
    updated: Instant,
}

#[derive(Default)]
struct State {
    open: u32,
    per_ip: HashMap<IpAddr, u32>,
    buckets: HashMap<IpAddr, Bucket>,
    /// Order in which `buckets` gained their IPs, to forget the oldest first.
    bucket_order: VecDeque<IpAddr>,
}

/// The key a peer's connections are counted under (core's `addressGroup`): an IPv4 address as it is (an IPv4 peer on
/// a dual-stack socket shows as ::ffff:a.b.c.d), an IPv6 address cut to its first `prefix` bits, so that one host's
/// /64 is one "IP" and not 2^64 of them.
pub fn address_group(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) if prefix < 128 => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V6((u128::from(v6) & mask).into())
        }
        other => other,
    }
}

pub struct Admission {
    limits: Limits,
    state: Mutex<State>,
}

/// One admitted connection's place in the counts; dropping it gives the place back.
pub struct Admitted {
    admission: Arc<Admission>,
    ip: IpAddr,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut state = self.admission.state.lock().unwrap_or_else(|e| e.into_inner());
        state.open -= 1;
        if let Some(count) = state.per_ip.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                state.per_ip.remove(&self.ip);
            }
        }
    }
}

impl Admission {
    pub fn new(limits: Limits) -> Arc<Self> {
        Arc::new(Self { limits, state: Mutex::new(State::default()) })
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Connections held now (in handshake or open).
    #[cfg(test)]
    pub fn connections(&self) -> u32 {
        self.state.lock().unwrap().open
    }

    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Admitted, Refused> {
        self.admit_at(ip, Instant::now())
    }

    /// `admit` at a given time, so tests can drive the rate without sleeping.
    pub fn admit_at(self: &Arc<Self>, ip: IpAddr, now: Instant) -> Result<Admitted, Refused> {
        let ip = address_group(ip, self.limits.ipv6_prefix_length);
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.open >= self.limits.max_connections {
            return Err(Refused::MaxConnections);
        }
        let from_ip = state.per_ip.get(&ip).copied().unwrap_or(0);
        if from_ip >= self.limits.max_connections_per_ip {
            return Err(Refused::MaxConnectionsPerIp);
        }
        if !self.take_token(&mut state, ip, now) {
            return Err(Refused::IpRate);
        }
        state.open += 1;
        state.per_ip.insert(ip, from_ip + 1);
        Ok(Admitted { admission: self.clone(), ip })
    }

    fn take_token(&self, state: &mut State, ip: IpAddr, now: Instant) -> bool {
        let rate = self.limits.new_connections_per_ip_per_second as f64;
        let burst = rate * BURST_SECONDS;
        if !state.buckets.contains_key(&ip) {
            if state.buckets.len() >= MAX_TRACKED_IPS {
                if let Some(oldest) = state.bucket_order.pop_front() {
                    state.buckets.remove(&oldest);
                }
            }
            state.buckets.insert(ip, Bucket { tokens: burst, updated: now });
            state.bucket_order.push_back(ip);
        }
        let bucket = state.buckets.get_mut(&ip).expect("inserted above");
        let elapsed = now.saturating_duration_since(bucket.updated).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * rate).min(burst);
        bucket.updated = now.max(bucket.updated);
        if bucket.tokens < 1.0 {
            return false;
        }
        bucket.tokens -= 1.0;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_connections: u32, max_connections_per_ip: u32, per_second: u32) -> Limits {
        Limits { max_connections, max_connections_per_ip, new_connections_per_ip_per_second: per_second, ..Limits::default() }
    }

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 2));

    #[test]
    fn refuses_beyond_the_total_and_frees_a_place_when_a_connection_goes() {
        let admission = Admission::new(limits(2, 10, 100));
        let first = admission.admit(A).unwrap();
        let _second = admission.admit(B).unwrap();
        assert_eq!(admission.admit(B).err(), Some(Refused::MaxConnections));
        drop(first);
        assert_eq!(admission.connections(), 1);
        assert!(admission.admit(A).is_ok());
    }

    #[test]
    fn refuses_beyond_the_per_ip_count_but_serves_other_ips() {
        let admission = Admission::new(limits(10, 2, 100));
        let _held = [admission.admit(A).unwrap(), admission.admit(A).unwrap()];
        assert_eq!(admission.admit(A).err(), Some(Refused::MaxConnectionsPerIp));
        assert!(admission.admit(B).is_ok());
    }

    #[test]
    fn an_ipv4_mapped_address_counts_as_its_ipv4_address() {
        let admission = Admission::new(limits(10, 1, 100));
        let _held = admission.admit(A).unwrap();
        let mapped = match A {
            IpAddr::V4(v4) => IpAddr::V6(v4.to_ipv6_mapped()),
            v6 => v6,
        };
        assert_eq!(admission.admit(mapped).err(), Some(Refused::MaxConnectionsPerIp));
    }

    #[test]
    fn the_rate_allows_a_burst_of_five_seconds_worth_then_refills_at_the_rate() {
        let admission = Admission::new(limits(1000, 1000, 2));
        let start = Instant::now();
        for _ in 0..10 {
            drop(admission.admit_at(A, start).unwrap()); // released at once: only the rate can refuse
        }
        assert_eq!(admission.admit_at(A, start).err(), Some(Refused::IpRate));
        assert!(admission.admit_at(B, start).is_ok(), "another IP has its own bucket");
        let half_a_second_later = start + Duration::from_millis(500);
        assert!(admission.admit_at(A, half_a_second_later).is_ok());
        assert_eq!(admission.admit_at(A, half_a_second_later).err(), Some(Refused::IpRate));
    }

    fn v6(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn ipv6_peers_count_per_network_of_the_prefix_length() {
        let admission = Admission::new(limits(10, 2, 100));
        let _held = [admission.admit(v6("2001:db8:1:2::1")).unwrap(), admission.admit(v6("2001:db8:1:2:ffff::9")).unwrap()];
        // Another address of the same /64 is the same peer: a host holding a /64 is not 2^64 IPs.
        assert_eq!(admission.admit(v6("2001:db8:1:2:dead:beef:0:1")).err(), Some(Refused::MaxConnectionsPerIp));
        assert!(admission.admit(v6("2001:db8:1:3::1")).is_ok(), "the next /64 is another peer");
    }

    #[test]
    fn the_prefix_length_is_an_option_and_128_counts_each_address() {
        let each = Admission::new(Limits { max_connections_per_ip: 1, ipv6_prefix_length: 128, ..Limits::default() });
        let _held = each.admit(v6("2001:db8::1")).unwrap();
        assert!(each.admit(v6("2001:db8::2")).is_ok());
        let wide = Admission::new(Limits { max_connections_per_ip: 1, ipv6_prefix_length: 48, ..Limits::default() });
        let _held = wide.admit(v6("2001:db8:1:1::1")).unwrap();
        assert_eq!(wide.admit(v6("2001:db8:1:ffff::1")).err(), Some(Refused::MaxConnectionsPerIp));
        assert_eq!(address_group(v6("2001:db8:1:2:3:4:5:6"), 61), v6("2001:db8:1::"));
    }

    /// The groups of core's `addressGroup` (TypeScript) for the same addresses, as it writes them: the listener of
    /// a WebSocket or HTTP/2 channel and the QUIC engine count the same peers alike.
    #[test]
    fn groups_agree_with_cores_address_group() {
        let vectors = include_str!("../../../core/test/address-groups.txt");
        let mut checked = 0;
        for line in vectors.lines().filter(|line| !line.is_empty() && !line.starts_with('#')) {
            let [address, prefix, expected] = line.split(' ').collect::<Vec<_>>()[..] else { panic!("bad line {line}") };
            let prefix: u8 = prefix.parse().unwrap();
            let group = match address_group(address.parse().unwrap(), prefix) {
                IpAddr::V6(network) if prefix < 128 => format!("{network}/{prefix}"),
                other => other.to_string(),
            };
            assert_eq!(group, expected, "{address} /{prefix}");
            checked += 1;
        }
        assert!(checked > 100);
    }
}

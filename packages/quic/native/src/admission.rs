//! Listener limits, checked for every arriving connection before any TLS work: connections held in all, from one
//! IP at once, and new ones per IP per second (a token bucket with a burst of 5 s worth). The same options, with
//! the same meanings and defaults, as core's `ConnectionAdmission` for the node:tls channels (docs/security.md).
//!
//! A full listener makes room for a newcomer whose group holds at least two fewer connections than the group
//! holding the most: it evicts that group's connection idle the longest (no stream open for at least
//! MIN_IDLE_BEFORE_EVICTION), as core's `ConnectionGroups` does, so a few addresses cannot hold every place. The
//! newcomer pays for it with its own per-IP rate: no eviction without an admission.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// IPs whose rate is tracked at most; the oldest are forgotten first (their buckets start full again).
const MAX_TRACKED_IPS: usize = 100_000;
/// A quiet IP may open this many seconds' worth of connections at once.
const BURST_SECONDS: f64 = 5.0;
/// How long a connection must have been idle before a full listener may close it for a newcomer: a healthy
/// connection between two calls is not churned (core's MIN_IDLE_MS_BEFORE_EVICTION).
pub const MIN_IDLE_BEFORE_EVICTION: Duration = Duration::from_millis(1000);
/// Groups of the top tier an eviction looks at, at most: bounded work per arrival, however many groups tie.
const GROUPS_SCANNED: usize = 8;

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

/// What closes an evicted connection (the listener sets it once the connection exists).
pub type Closer = Box<dyn FnOnce() + Send>;

/// One admitted connection as the groups see it.
struct Held {
    group: IpAddr,
    /// When it became idle (no streams open), with its place in its group's idle order; None while busy.
    idle: Option<(u64, Instant)>,
    remote: Option<SocketAddr>,
    /// The agent key the peer proved, once its handshake did (the eviction report names it).
    peer_key: Option<[u8; 32]>,
    close: Option<Closer>,
}

/// The connections of one address group; its idle ones in the order they became idle (the first: idle the longest).
#[derive(Default)]
struct Group {
    count: u32,
    idle: BTreeMap<u64, u64>,
}

#[derive(Default)]
struct State {
    open: u32,
    groups: HashMap<IpAddr, Group>,
    held: HashMap<u64, Held>,
    next_id: u64,
    /// Orders the moments connections became idle (a group's idle map is keyed by it).
    idle_order: u64,
    /// How many groups hold each count: the top count is known without a scan.
    groups_by_count: HashMap<u32, u32>,
    /// Groups with at least one idle connection, by how many connections they hold.
    idle_by_count: HashMap<u32, HashSet<IpAddr>>,
    top: u32,
    evictions: u64,
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
    id: u64,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut state = self.admission.lock();
        state.give_back(self.id);
    }
}

impl Admitted {
    /// What an eviction does to this connection, and where it came from (for the report). False when it was
    /// evicted already, in its handshake: the caller then closes it.
    pub fn on_evict(&self, remote: SocketAddr, close: Closer) -> bool {
        let mut state = self.admission.lock();
        match state.held.get_mut(&self.id) {
            Some(held) => {
                held.remote = Some(remote);
                held.close = Some(close);
                true
            }
            None => false,
        }
    }

    /// The agent key the peer proved (its handshake is done): an eviction from now on names it in its report.
    pub fn identify(&self, peer_key: [u8; 32]) {
        if let Some(held) = self.admission.lock().held.get_mut(&self.id) {
            held.peer_key = Some(peer_key);
        }
    }

    /// Tells the groups whether the connection has streams open (only an idle connection may be evicted).
    pub fn activity(&self) -> Activity {
        Activity { admission: self.admission.clone(), id: self.id }
    }
}

/// A connection's handle for reporting its activity to its place in the counts.
pub struct Activity {
    admission: Arc<Admission>,
    id: u64,
}

impl Activity {
    /// Brings the connection's state up to `open_streams`, read under the lock: of two threads changing the count at
    /// once, whichever syncs last sees the final count, so the state never stays busy at 0 (nor idle above it).
    pub fn sync(&self, open_streams: &std::sync::atomic::AtomicU32) {
        let now = Instant::now();
        let mut state = self.admission.lock();
        if open_streams.load(std::sync::atomic::Ordering::Relaxed) > 0 {
            state.mark_busy(self.id);
        } else {
            state.mark_idle(self.id, now);
        }
    }

    #[cfg(test)]
    pub fn set_at(&self, busy: bool, now: Instant) {
        let mut state = self.admission.lock();
        if busy {
            state.mark_busy(self.id);
        } else {
            state.mark_idle(self.id, now);
        }
    }
}

/// A connection closed to make room: the listener runs `close` and reports it.
pub struct Evicted {
    pub remote: SocketAddr,
    /// The agent key it proved, when its handshake was done (none for a connection evicted in its handshake).
    pub peer_key: Option<[u8; 32]>,
    pub close: Option<Closer>,
}

impl State {
    fn count(&self, ip: &IpAddr) -> u32 {
        self.groups.get(ip).map_or(0, |g| g.count)
    }

    fn add(&mut self, ip: IpAddr, remote: Option<SocketAddr>, now: Instant) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let count = self.count(&ip);
        self.groups.entry(ip).or_default();
        self.set_count(ip, count + 1);
        self.held.insert(id, Held { group: ip, idle: None, remote, peer_key: None, close: None });
        self.mark_idle(id, now);
        self.open += 1;
        id
    }

    /// Gives a place back (once); returns the connection's record.
    fn give_back(&mut self, id: u64) -> Option<Held> {
        self.mark_busy(id);
        let held = self.held.remove(&id)?;
        let count = self.count(&held.group);
        self.set_count(held.group, count - 1);
        if count == 1 {
            self.groups.remove(&held.group);
        }
        self.open -= 1;
        Some(held)
    }

    fn mark_busy(&mut self, id: u64) {
        let Some(held) = self.held.get_mut(&id) else { return };
        let Some((order, _)) = held.idle.take() else { return };
        let ip = held.group;
        let group = self.groups.get_mut(&ip).expect("a held connection's group exists");
        group.idle.remove(&order);
        if group.idle.is_empty() {
            let count = group.count;
            self.unindex_idle(ip, count);
        }
    }

    fn mark_idle(&mut self, id: u64, now: Instant) {
        let Some(held) = self.held.get_mut(&id) else { return };
        if held.idle.is_some() {
            return;
        }
        self.idle_order += 1;
        held.idle = Some((self.idle_order, now));
        let ip = held.group;
        let group = self.groups.get_mut(&ip).expect("a held connection's group exists");
        group.idle.insert(self.idle_order, id);
        if group.idle.len() == 1 {
            let count = group.count;
            self.idle_by_count.entry(count).or_default().insert(ip);
        }
    }

    /// The connection to close for a newcomer from `ip` (see the module's comment), or None.
    fn victim_for(&self, ip: &IpAddr, now: Instant) -> Option<u64> {
        if self.count(ip) + 2 > self.top {
            return None;
        }
        let mut victim: Option<(u64, Instant)> = None;
        for group in self.idle_by_count.get(&self.top)?.iter().take(GROUPS_SCANNED) {
            let Some((_, &id)) = self.groups[group].idle.iter().next() else { continue };
            let since = self.held[&id].idle.expect("an idle connection has its moment").1;
            if now.saturating_duration_since(since) >= MIN_IDLE_BEFORE_EVICTION && victim.is_none_or(|(_, v)| since < v) {
                victim = Some((id, since));
            }
        }
        victim.map(|(id, _)| id)
    }

    fn set_count(&mut self, ip: IpAddr, count: u32) {
        let group = self.groups.get_mut(&ip).expect("the group exists");
        let before = group.count;
        let has_idle = !group.idle.is_empty();
        group.count = count;
        if has_idle {
            self.unindex_idle(ip, before);
            if count > 0 {
                self.idle_by_count.entry(count).or_default().insert(ip);
            }
        }
        if before > 0 {
            let left = self.groups_by_count.get(&before).copied().unwrap_or(1) - 1;
            if left == 0 {
                self.groups_by_count.remove(&before);
            } else {
                self.groups_by_count.insert(before, left);
            }
        }
        if count > 0 {
            *self.groups_by_count.entry(count).or_default() += 1;
        }
        // Counts move by one: the top rises to a new count or, when its last group left it, falls by one.
        if count > self.top {
            self.top = count;
        } else if before == self.top && !self.groups_by_count.contains_key(&before) {
            self.top = count;
        }
    }

    /// An emptied tier is kept, not removed: a group alone at its count goes busy and idle with every call, and a
    /// new set per call would be an allocation on the serving path. Tiers are bounded by `max_connections_per_ip`.
    fn unindex_idle(&mut self, ip: IpAddr, count: u32) {
        if let Some(tier) = self.idle_by_count.get_mut(&count) {
            tier.remove(&ip);
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

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Connections held now (in handshake or open).
    #[cfg(test)]
    pub fn connections(&self) -> u32 {
        self.lock().open
    }

    /// Connections evicted so far.
    #[cfg(test)]
    pub fn evictions(&self) -> u64 {
        self.lock().evictions
    }

    /// Admits a connection from `remote`, with the connection it evicted to make room, if any.
    pub fn admit(self: &Arc<Self>, remote: SocketAddr) -> Result<(Admitted, Option<Evicted>), Refused> {
        self.admit_from(remote.ip(), Some(remote), Instant::now())
    }

    /// `admit` at a given time, so tests can drive the rate and the idle ages without sleeping.
    #[cfg(test)]
    pub fn admit_at(self: &Arc<Self>, ip: IpAddr, now: Instant) -> Result<(Admitted, Option<Evicted>), Refused> {
        self.admit_from(ip, None, now)
    }

    fn admit_from(self: &Arc<Self>, ip: IpAddr, remote: Option<SocketAddr>, now: Instant) -> Result<(Admitted, Option<Evicted>), Refused> {
        let ip = address_group(ip, self.limits.ipv6_prefix_length);
        let mut state = self.lock();
        let mut victim = None;
        if state.open >= self.limits.max_connections {
            victim = Some(state.victim_for(&ip, now).ok_or(Refused::MaxConnections)?);
        }
        if state.count(&ip) >= self.limits.max_connections_per_ip {
            return Err(Refused::MaxConnectionsPerIp);
        }
        if !self.take_token(&mut state, ip, now) {
            return Err(Refused::IpRate);
        }
        let evicted = victim.and_then(|id| state.give_back(id)).map(|held| {
            state.evictions += 1;
            Evicted { remote: held.remote.unwrap_or(SocketAddr::new(held.group, 0)), peer_key: held.peer_key, close: held.close }
        });
        let id = state.add(ip, remote, now);
        Ok((Admitted { admission: self.clone(), id }, evicted))
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

    /// Admits now, leaving out what was evicted (these tests never fill a listener with idle connections).
    fn admit(admission: &Arc<Admission>, ip: IpAddr) -> Result<Admitted, Refused> {
        admission.admit_at(ip, Instant::now()).map(|(admitted, _)| admitted)
    }

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 2));

    #[test]
    fn refuses_beyond_the_total_and_frees_a_place_when_a_connection_goes() {
        let admission = Admission::new(limits(2, 10, 100));
        let first = admit(&admission, A).unwrap();
        let _second = admit(&admission, B).unwrap();
        assert_eq!(admit(&admission, B).err(), Some(Refused::MaxConnections));
        drop(first);
        assert_eq!(admission.connections(), 1);
        assert!(admit(&admission, A).is_ok());
    }

    #[test]
    fn refuses_beyond_the_per_ip_count_but_serves_other_ips() {
        let admission = Admission::new(limits(10, 2, 100));
        let _held = [admit(&admission, A).unwrap(), admit(&admission, A).unwrap()];
        assert_eq!(admit(&admission, A).err(), Some(Refused::MaxConnectionsPerIp));
        assert!(admit(&admission, B).is_ok());
    }

    #[test]
    fn an_ipv4_mapped_address_counts_as_its_ipv4_address() {
        let admission = Admission::new(limits(10, 1, 100));
        let _held = admit(&admission, A).unwrap();
        let mapped = match A {
            IpAddr::V4(v4) => IpAddr::V6(v4.to_ipv6_mapped()),
            v6 => v6,
        };
        assert_eq!(admit(&admission, mapped).err(), Some(Refused::MaxConnectionsPerIp));
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
        let _held = [admit(&admission, v6("2001:db8:1:2::1")).unwrap(), admit(&admission, v6("2001:db8:1:2:ffff::9")).unwrap()];
        // Another address of the same /64 is the same peer: a host holding a /64 is not 2^64 IPs.
        assert_eq!(admit(&admission, v6("2001:db8:1:2:dead:beef:0:1")).err(), Some(Refused::MaxConnectionsPerIp));
        assert!(admit(&admission, v6("2001:db8:1:3::1")).is_ok(), "the next /64 is another peer");
    }

    #[test]
    fn the_prefix_length_is_an_option_and_128_counts_each_address() {
        let each = Admission::new(Limits { max_connections_per_ip: 1, ipv6_prefix_length: 128, ..Limits::default() });
        let _held = admit(&each, v6("2001:db8::1")).unwrap();
        assert!(admit(&each, v6("2001:db8::2")).is_ok());
        let wide = Admission::new(Limits { max_connections_per_ip: 1, ipv6_prefix_length: 48, ..Limits::default() });
        let _held = admit(&wide, v6("2001:db8:1:1::1")).unwrap();
        assert_eq!(admit(&wide, v6("2001:db8:1:ffff::1")).err(), Some(Refused::MaxConnectionsPerIp));
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

    mod eviction {
        use super::*;
        use std::sync::atomic::{AtomicBool, Ordering};

        const HONEST: IpAddr = A;
        const ATTACKER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 66));

        /// An admitted connection, with a flag its eviction sets.
        struct Tracked {
            admitted: Admitted,
            evicted: Arc<AtomicBool>,
        }

        fn admit_tracked(admission: &Arc<Admission>, ip: IpAddr, now: Instant) -> Tracked {
            let (admitted, _) = admission.admit_at(ip, now).unwrap_or_else(|e| panic!("{ip} refused: {e:?}"));
            let evicted = Arc::new(AtomicBool::new(false));
            let flag = evicted.clone();
            assert!(admitted.on_evict(SocketAddr::new(ip, 1), Box::new(move || flag.store(true, Ordering::Relaxed))));
            Tracked { admitted, evicted }
        }

        fn evicted(all: &[Tracked]) -> Vec<bool> {
            all.iter().map(|t| t.evicted.load(Ordering::Relaxed)).collect()
        }

        /// The eviction's closer, run as the listener runs it.
        fn admit_and_close(admission: &Arc<Admission>, ip: IpAddr, now: Instant) -> Result<(Admitted, bool), Refused> {
            let (admitted, evicted) = admission.admit_at(ip, now)?;
            let closed = evicted.is_some();
            if let Some(close) = evicted.and_then(|e| e.close) {
                close();
            }
            Ok((admitted, closed))
        }

        #[test]
        fn the_eviction_names_the_key_the_evicted_peer_proved_and_none_before_its_handshake() {
            for proved in [true, false] {
                let admission = Admission::new(limits(2, 2, 100));
                let t0 = Instant::now();
                let attackers: Vec<_> = (0..2).map(|_| admit_tracked(&admission, ATTACKER, t0)).collect();
                attackers[1].admitted.activity().set_at(true, t0); // only the first may be evicted
                attackers[0].admitted.activity().set_at(false, t0);
                if proved {
                    attackers[0].admitted.identify([7; 32]);
                }
                let later = t0 + MIN_IDLE_BEFORE_EVICTION;
                let (_newcomer, evicted) = admission.admit_at(HONEST, later).unwrap();
                let evicted = evicted.expect("an idle attacker connection is evicted");
                assert_eq!(evicted.peer_key, proved.then_some([7; 32]));
            }
        }

        #[test]
        fn a_small_group_evicts_the_connection_idle_the_longest_of_the_group_holding_the_most() {
            let admission = Admission::new(limits(4, 3, 100));
            let t0 = Instant::now();
            let attackers: Vec<_> = (0..3).map(|_| admit_tracked(&admission, ATTACKER, t0)).collect();
            let _honest = admit_tracked(&admission, HONEST, t0);
            for tracked in &attackers {
                tracked.admitted.activity().set_at(true, t0);
            }
            attackers[0].admitted.activity().set_at(false, t0 + Duration::from_millis(10));
            attackers[2].admitted.activity().set_at(false, t0 + Duration::from_millis(20));
            attackers[1].admitted.activity().set_at(false, t0 + Duration::from_millis(30));
            let later = t0 + Duration::from_millis(30) + MIN_IDLE_BEFORE_EVICTION;
            let (_newcomer, closed) = admit_and_close(&admission, HONEST, later).unwrap();
            assert!(closed);
            assert_eq!(evicted(&attackers), vec![true, false, false]);
            assert_eq!(admission.connections(), 4);
            // 2 against 2: the evicted group's redial takes nothing back, nor does a third honest dial.
            assert_eq!(admit_and_close(&admission, ATTACKER, later).err(), Some(Refused::MaxConnections));
            assert_eq!(admit_and_close(&admission, HONEST, later).err(), Some(Refused::MaxConnections));
            assert_eq!(admission.evictions(), 1);
        }

        #[test]
        fn never_evicts_a_busy_connection_nor_one_idle_for_less_than_the_minimum() {
            let admission = Admission::new(limits(3, 3, 100));
            let t0 = Instant::now();
            let attackers: Vec<_> = (0..3).map(|_| admit_tracked(&admission, ATTACKER, t0)).collect();
            attackers[0].admitted.activity().set_at(true, t0);
            attackers[1].admitted.activity().set_at(true, t0);
            let recent = t0 + MIN_IDLE_BEFORE_EVICTION;
            attackers[2].admitted.activity().set_at(true, recent);
            attackers[2].admitted.activity().set_at(false, recent);
            let almost = recent + MIN_IDLE_BEFORE_EVICTION - Duration::from_millis(1);
            assert_eq!(admit_and_close(&admission, HONEST, almost).err(), Some(Refused::MaxConnections));
            assert!(admit_and_close(&admission, HONEST, almost + Duration::from_millis(1)).is_ok());
            assert_eq!(evicted(&attackers), vec![false, false, true]);
        }

        #[test]
        fn a_connection_evicted_in_its_handshake_is_closed_when_it_arrives() {
            let admission = Admission::new(limits(2, 2, 100));
            let t0 = Instant::now();
            let (in_handshake, _) = admission.admit_at(ATTACKER, t0).unwrap();
            let _other = admit_tracked(&admission, ATTACKER, t0 + Duration::from_millis(1));
            let (_newcomer, closed) = admit_and_close(&admission, HONEST, t0 + MIN_IDLE_BEFORE_EVICTION).unwrap();
            assert!(closed, "the one idle the longest (since it arrived) made room");
            assert!(!in_handshake.on_evict(SocketAddr::new(ATTACKER, 1), Box::new(|| ())), "its handshake ends evicted");
            drop(in_handshake); // gives nothing back twice
            assert_eq!(admission.connections(), 2);
        }

        #[test]
        fn an_eviction_is_paid_with_the_newcomers_rate() {
            let admission = Admission::new(limits(4, 4, 1));
            let t0 = Instant::now();
            for _ in 0..5 {
                drop(admission.admit_at(HONEST, t0).unwrap()); // the honest IP's burst is spent
            }
            let attackers: Vec<_> = (0..4).map(|_| admit_tracked(&admission, ATTACKER, t0)).collect();
            let later = t0 + MIN_IDLE_BEFORE_EVICTION; // one token back at 1/s
            let _first = admit_and_close(&admission, HONEST, later).unwrap();
            assert_eq!(admit_and_close(&admission, HONEST, later).err(), Some(Refused::IpRate));
            assert_eq!(evicted(&attackers).iter().filter(|e| **e).count(), 1);
        }

        #[test]
        fn a_small_group_is_never_evicted_while_a_larger_group_exists() {
            let admission = Admission::new(limits(6, 4, 100));
            let t0 = Instant::now();
            let honest = admit_tracked(&admission, HONEST, t0);
            let later = t0 + Duration::from_millis(10);
            let big: Vec<_> = (0..3).map(|_| admit_tracked(&admission, ATTACKER, later)).collect();
            let other_ip = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 77));
            let other: Vec<_> = (0..2).map(|_| admit_tracked(&admission, other_ip, later)).collect();
            let now = later + MIN_IDLE_BEFORE_EVICTION;
            let fresh = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 200));
            let _fresh = admit_and_close(&admission, fresh, now).unwrap();
            assert!(!honest.evicted.load(Ordering::Relaxed));
            assert_eq!(evicted(&big).iter().filter(|e| **e).count(), 1);
            assert_eq!(evicted(&other).iter().filter(|e| **e).count(), 0);
            assert_eq!(admit_and_close(&admission, HONEST, now).err(), Some(Refused::MaxConnections), "1 may not take from 2");
        }
    }
}

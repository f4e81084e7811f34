/*
 * netlab forwarder: joins two network namespaces through a TUN device in each and applies, per direction, a
 * one-way delay with jitter that never reorders, random loss and a rate limit (a token bucket feeding a
 * drop-tail queue) to every IP packet: real kernel TCP and UDP see a long, lossy, narrow path. This kernel has
 * no netem, so this userspace link stands in for it.
 *
 * Written in C (gcc is in every CI image and compiles it in a second; no crate downloads): it is one poll loop
 * over two file descriptors with two FIFO queues, with nothing a library would add.
 *
 * usage: forwarder --ns-a /run/netns/A --ns-b /run/netns/B --dev lab0 [--delay-ms 40] [--jitter-ms 0]
 *                  [--loss 1.0] [--rate-mbit 100] [--queue-kb 1024] [--burst-kb 16] [--seed 1]
 * Creates the TUN device `dev` in each namespace (the script gives them addresses), prints "ready", forwards
 * until SIGTERM/SIGINT, then prints one line of counters per direction on stderr. SIGUSR1 prints the same
 * lines (counts so far) and forwarding goes on, so a run can count each figure's drops in one lab.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define SLOT_BYTES 2048  /* one packet; the TUN MTU stays at 1500 */
#define SLOTS 65536      /* per direction: ~100 ms at 10 Gbit/s of 1500-byte packets; memory is touched only as used */

struct slot {
  int64_t due_ns;
  uint16_t length;
  unsigned char data[SLOT_BYTES];
};

struct direction {
  const char *name;
  int in, out;
  struct slot *ring;
  uint32_t head, count;
  int64_t link_free_ns;   /* when the rate-limited link finishes sending what it has queued */
  int64_t last_due_ns;    /* the last packet's delivery time: later packets never overtake it */
  uint64_t forwarded, lost, queue_drops, ring_drops, bytes;
};

static struct {
  int64_t delay_ns, jitter_ns, queue_ns, burst_ns;
  double loss, rate_bps;
} cfg = {40000000, 0, 0, 0, 0.0, 100e6};

static volatile sig_atomic_t stopping = 0;
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static volatile sig_atomic_t reporting = 0;
static void on_signal(int sig) { (void)sig; stopping = 1; }
static void on_report(int sig) { (void)sig; reporting = 1; }

static void print_counters(struct direction *const all[2]) {
  for (int i = 0; i < 2; i++) {
    struct direction *d = all[i];
    fprintf(stderr, "%s forwarded=%llu bytes=%llu lost=%llu queue_drops=%llu ring_drops=%llu\n", d->name,
            (unsigned long long)d->forwarded, (unsigned long long)d->bytes, (unsigned long long)d->lost,
            (unsigned long long)d->queue_drops, (unsigned long long)d->ring_drops);
  }
  fflush(stderr);
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* xorshift64*: uniform in [0, 1) */
static double uniform(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (double)((rng_state * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

static void die(const char *what) {
  perror(what);
  exit(1);
}

/* Opens a TUN device named `dev` inside the namespace at `ns_path` (the process's namespace is restored after). */
static int open_tun_in(const char *ns_path, const char *dev) {
  int home = open("/proc/self/ns/net", O_RDONLY);
  int ns = open(ns_path, O_RDONLY);
  if (home < 0 || ns < 0) die(ns_path);
  if (setns(ns, CLONE_NEWNET) < 0) die("setns");
  int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK);
  if (fd < 0) die("/dev/net/tun");
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
  strncpy(ifr.ifr_name, dev, IFNAMSIZ - 1);
  if (ioctl(fd, TUNSETIFF, &ifr) < 0) die("TUNSETIFF");
  if (setns(home, CLONE_NEWNET) < 0) die("setns back");
  close(ns);
  close(home);
  return fd;
}

/* A packet arrives: lose it, or queue it behind the link (drop-tail past the queue limit), then delay it. */
static void admit(struct direction *d, const unsigned char *packet, size_t length, int64_t now) {
  if (cfg.loss > 0 && uniform() * 100.0 < cfg.loss) {
    d->lost++;
    return;
  }
  int64_t departs = now; /* when the packet has fully left the rate-limited link */
  if (cfg.rate_bps > 0) {
    /* token bucket: credit for idle time is capped at the burst, so a quiet link may send `burst` at once;
       beyond that, packets wait their turn, and past the queue limit they are dropped (drop-tail) */
    if (d->link_free_ns < now - cfg.burst_ns) d->link_free_ns = now - cfg.burst_ns;
    if (d->link_free_ns - now > cfg.queue_ns) {
      d->queue_drops++;
      return;
    }
    d->link_free_ns += (int64_t)((double)length * 8.0 * 1e9 / cfg.rate_bps);
    if (d->link_free_ns > now) departs = d->link_free_ns;
  }
  if (d->count == SLOTS) {
    d->ring_drops++;
    return;
  }
  int64_t jitter = cfg.jitter_ns > 0 ? (int64_t)((uniform() * 2.0 - 1.0) * (double)cfg.jitter_ns) : 0;
  int64_t due = departs + cfg.delay_ns + jitter;
  if (due < d->last_due_ns) due = d->last_due_ns; /* jitter without reordering */
  d->last_due_ns = due;
  struct slot *s = &d->ring[(d->head + d->count) % SLOTS];
  s->due_ns = due;
  s->length = (uint16_t)length;
  memcpy(s->data, packet, length);
  d->count++;
}

static void receive_all(struct direction *d) {
  unsigned char buffer[SLOT_BYTES];
  for (;;) {
    ssize_t n = read(d->in, buffer, sizeof buffer);
    if (n <= 0) {
      if (n < 0 && errno != EAGAIN && errno != EINTR) die("read");
      return;
    }
    admit(d, buffer, (size_t)n, now_ns());
  }
}

/* Delivers every packet that is due; returns the next due time, or -1 when the queue is empty. */
static int64_t deliver_due(struct direction *d, int64_t now) {
  while (d->count > 0) {
    struct slot *s = &d->ring[d->head];
    if (s->due_ns > now) return s->due_ns;
    if (write(d->out, s->data, s->length) == (ssize_t)s->length) {
      d->forwarded++;
      d->bytes += s->length;
    }
    d->head = (d->head + 1) % SLOTS;
    d->count--;
  }
  return -1;
}

int main(int argc, char **argv) {
  const char *ns_a = NULL, *ns_b = NULL, *dev = "lab0";
  double queue_kb = 1024, burst_kb = 16;
  for (int i = 1; i + 1 < argc; i += 2) {
    const char *k = argv[i], *v = argv[i + 1];
    if (!strcmp(k, "--ns-a")) ns_a = v;
    else if (!strcmp(k, "--ns-b")) ns_b = v;
    else if (!strcmp(k, "--dev")) dev = v;
    else if (!strcmp(k, "--delay-ms")) cfg.delay_ns = (int64_t)(atof(v) * 1e6);
    else if (!strcmp(k, "--jitter-ms")) cfg.jitter_ns = (int64_t)(atof(v) * 1e6);
    else if (!strcmp(k, "--loss")) cfg.loss = atof(v);
    else if (!strcmp(k, "--rate-mbit")) cfg.rate_bps = atof(v) * 1e6;
    else if (!strcmp(k, "--queue-kb")) queue_kb = atof(v);
    else if (!strcmp(k, "--burst-kb")) burst_kb = atof(v);
    else if (!strcmp(k, "--seed")) rng_state ^= strtoull(v, NULL, 10) * 0xbf58476d1ce4e5b9ULL;
    else {
      fprintf(stderr, "unknown option %s\n", k);
      return 2;
    }
  }
  if (!ns_a || !ns_b) {
    fprintf(stderr, "usage: forwarder --ns-a PATH --ns-b PATH [--dev lab0] [--delay-ms 40] [--jitter-ms 0] [--loss 0] [--rate-mbit 100] [--queue-kb 1024] [--burst-kb 16] [--seed N]\n");
    return 2;
  }
  if (cfg.rate_bps > 0) {
    cfg.queue_ns = (int64_t)(queue_kb * 1024 * 8 * 1e9 / cfg.rate_bps);
    cfg.burst_ns = (int64_t)(burst_kb * 1024 * 8 * 1e9 / cfg.rate_bps);
  }
  prctl(PR_SET_TIMERSLACK, 1UL); /* wake within a microsecond of a packet's due time, not the default 50 µs */

  struct direction ab = {.name = "a->b"}, ba = {.name = "b->a"};
  ab.in = ba.out = open_tun_in(ns_a, dev);
  ba.in = ab.out = open_tun_in(ns_b, dev);
  ab.ring = malloc(sizeof(struct slot) * SLOTS);
  ba.ring = malloc(sizeof(struct slot) * SLOTS);
  if (!ab.ring || !ba.ring) die("malloc");

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  struct sigaction report_sa;
  memset(&report_sa, 0, sizeof report_sa);
  report_sa.sa_handler = on_report;
  sigaction(SIGUSR1, &report_sa, NULL);
  struct direction *const all[2] = {&ab, &ba};
  /* SIGUSR1 is delivered only inside ppoll, so a report asked for just before it still wakes the loop. */
  sigset_t report_blocked, unblocked;
  sigemptyset(&report_blocked);
  sigaddset(&report_blocked, SIGUSR1);
  sigprocmask(SIG_BLOCK, &report_blocked, &unblocked);
  printf("ready\n");
  fflush(stdout);

  struct pollfd fds[2] = {{.fd = ab.in, .events = POLLIN}, {.fd = ba.in, .events = POLLIN}};
  while (!stopping) {
    if (reporting) {
      reporting = 0;
      print_counters(all);
    }
    int64_t now = now_ns();
    int64_t next_ab = deliver_due(&ab, now), next_ba = deliver_due(&ba, now);
    int64_t next = next_ab < 0 ? next_ba : (next_ba < 0 || next_ab < next_ba ? next_ab : next_ba);
    struct timespec timeout, *wait = NULL;
    if (next >= 0) {
      int64_t in = next - now_ns();
      if (in < 0) in = 0;
      timeout.tv_sec = in / 1000000000LL;
      timeout.tv_nsec = in % 1000000000LL;
      wait = &timeout;
    }
    int ready = ppoll(fds, 2, wait, &unblocked);
    if (ready < 0) {
      if (errno == EINTR) continue;
      die("ppoll");
    }
    if (fds[0].revents & POLLIN) receive_all(&ab);
    if (fds[1].revents & POLLIN) receive_all(&ba);
  }
  print_counters(all);
  return 0;
}

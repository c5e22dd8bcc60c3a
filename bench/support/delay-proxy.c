/*
 * A TCP delay proxy for the scaling benchmark (bench/scaling.ts): loopback answers in tens of
 * microseconds and so hides what a lock saves by batching round trips on a real network.
 *
 *   delay-proxy TARGET_PORT...      (all on 127.0.0.1)
 *
 * Listens on one ephemeral 127.0.0.1 port per target and prints "ports P1 P2 ...". Every chunk
 * read from either side is written to the other side `delay` microseconds after it was read
 * (one way; a round trip pays it twice), in the order it was read: a wire with a fixed latency
 * and no bandwidth limit. The end of either side's stream closes the connection once the bytes
 * read before it have gone out. Commands on stdin, each answered with one line:
 *   "delay US"  sets the one-way delay          -> "ok"
 *   "stats"     -> "stats CHUNKS BYTES DELAYED LATENESS_NS WAKE_LATENESS_NS SCHEDULING": chunks
 *               and bytes forwarded, how many were delayed and their total lateness (sent
 *               after their due time), the learnt timer lateness, and the scheduling obtained
 * End of stdin ends the proxy (it never outlives its parent).
 *
 * Built for low cost and on-time delivery: one thread, epoll, and ONE timerfd (CLOCK_MONOTONIC,
 * absolute, timer slack 1 ns) for every connection. With one delay for all, due times grow in
 * arrival order, so a single FIFO of every connection's chunks stays sorted and the timer only
 * ever waits for its head; lowering the delay keeps that order (a chunk is never due before
 * one read earlier). The timer is set early by how late it has been waking, and chunks due
 * within that margin leave together. It asks for a raised priority (nice -10) so that the
 * benchmark's own processes, which keep both cores busy, delay it less. With delay 0 and nothing queued a chunk is written at once: the
 * proxy's own cost is then one read and one write per chunk, which bench/scaling.ts measures
 * against the direct path.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_TARGETS 64
#define READ_SIZE 65536

typedef struct conn conn_t;

/** One direction of one proxied connection. */
typedef struct {
  int src, dst;
  conn_t *conn;
  /** Bytes that a write could not take at once: later chunks of this side queue behind them. */
  char *pending;
  size_t pending_len, pending_off;
} side_t;

struct conn {
  side_t up;   /* client -> redis */
  side_t down; /* redis -> client */
  int refs;    /* chunks in the FIFO that point at this connection, plus one while open */
  int dead;
  conn_t *next_dead;
};

typedef struct chunk {
  struct chunk *next;
  side_t *side;
  uint64_t due;
  size_t len; /* 0: the source ended; the connection closes once the bytes before it are out */
  char data[];
} chunk_t;

/** A listening socket's epoll tag. */
typedef struct {
  int fd;
  int target_port;
} listener_t;

static int epfd, timerfd_;
static uint64_t delay_ns;
static uint64_t last_due;
static chunk_t *head, *tail;
static uint64_t armed_for; /* 0: timer disarmed */
static unsigned long long chunks_forwarded, bytes_forwarded;
/** Delayed chunks delivered, and their total lateness (delivered - due), for "stats". */
static unsigned long long delayed_delivered, lateness_ns_total;
/**
 * How late a timer wakes this process, learnt as it runs (an average over the last ~32
 * wake-ups, at most a quarter of the delay): the timer is set that much before the head's due
 * time, so that chunks leave on time on average instead of always a wake-up late.
 */
static uint64_t wake_lateness_ns;
static listener_t listeners[MAX_TARGETS];
static int timer_tag, stdin_tag;
/** Connections with no reference left, freed after the current batch of events (which may name them). */
static conn_t *graveyard;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what) {
  perror(what);
  exit(1);
}

/** When to wake for a chunk due at `due`: early by the learnt lateness, at most a quarter of the delay. */
static uint64_t early(uint64_t due) {
  uint64_t lead = wake_lateness_ns < delay_ns / 4 ? wake_lateness_ns : delay_ns / 4;
  return due - lead;
}

static void arm(uint64_t at) {
  if (armed_for == at) return;
  struct itimerspec spec = {0};
  spec.it_value.tv_sec = (time_t)(at / 1000000000ull);
  spec.it_value.tv_nsec = (long)(at % 1000000000ull); /* at 0: all zero, which disarms */
  if (timerfd_settime(timerfd_, TFD_TIMER_ABSTIME, &spec, NULL) < 0) die("timerfd_settime");
  armed_for = at;
}

static void conn_unref(conn_t *c) {
  if (--c->refs == 0) {
    c->next_dead = graveyard;
    graveyard = c;
  }
}

static void bury(void) {
  while (graveyard) {
    conn_t *c = graveyard;
    graveyard = c->next_dead;
    free(c->up.pending);
    free(c->down.pending);
    free(c);
  }
}

static void conn_kill(conn_t *c) {
  if (c->dead) return;
  c->dead = 1;
  epoll_ctl(epfd, EPOLL_CTL_DEL, c->up.src, NULL);
  epoll_ctl(epfd, EPOLL_CTL_DEL, c->down.src, NULL);
  close(c->up.src);
  close(c->down.src);
  conn_unref(c);
}

/** Readable always; writable too while the other direction has bytes waiting for this fd. */
static void watch(side_t *side) {
  conn_t *c = side->conn;
  side_t *other = side == &c->up ? &c->down : &c->up;
  struct epoll_event ev = {0};
  ev.events = EPOLLIN | (other->pending_len ? EPOLLOUT : 0);
  ev.data.ptr = side;
  epoll_ctl(epfd, EPOLL_CTL_MOD, side->src, &ev);
}

static void flush_pending(side_t *side) {
  while (side->pending_off < side->pending_len) {
    ssize_t n = write(side->dst, side->pending + side->pending_off, side->pending_len - side->pending_off);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      conn_kill(side->conn);
      return;
    }
    side->pending_off += (size_t)n;
  }
  side->pending_len = side->pending_off = 0;
}

/** Writes `len` bytes on `side` now, behind any bytes still pending; len 0 closes the connection. */
static void deliver(side_t *side, const char *data, size_t len) {
  conn_t *c = side->conn;
  if (c->dead) return;
  side_t *other = side == &c->up ? &c->down : &c->up;
  if (len == 0) {
    flush_pending(side);
    conn_kill(c);
    return;
  }
  chunks_forwarded++;
  bytes_forwarded += len;
  size_t off = 0;
  if (side->pending_len == 0) {
    while (off < len) {
      ssize_t n = write(side->dst, data + off, len - off);
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        conn_kill(c);
        return;
      }
      off += (size_t)n;
    }
    if (off == len) return;
  }
  size_t rest = len - off;
  char *grown = realloc(side->pending, side->pending_len + rest);
  if (!grown) die("realloc");
  side->pending = grown;
  memcpy(side->pending + side->pending_len, data + off, rest);
  side->pending_len += rest;
  watch(other); /* side->dst is other->src: wait until it can take more */
}

static void enqueue(side_t *side, const char *data, size_t len) {
  if (delay_ns == 0 && head == NULL) {
    deliver(side, data, len);
    return;
  }
  chunk_t *ch = malloc(sizeof(chunk_t) + len);
  if (!ch) die("malloc");
  ch->next = NULL;
  ch->side = side;
  ch->len = len;
  if (len) memcpy(ch->data, data, len);
  uint64_t due = now_ns() + delay_ns;
  if (due < last_due) due = last_due; /* never ahead of a chunk read earlier */
  ch->due = last_due = due;
  side->conn->refs++;
  if (tail) tail->next = ch;
  else head = ch;
  tail = ch;
  if (head == ch) arm(early(ch->due));
}

/** Delivers what is due; `fired_for`: the time the timer that woke us was set for (0: not woken by it). */
static void run_due(uint64_t fired_for) {
  uint64_t now = now_ns();
  if (fired_for && head) {
    int64_t late = (int64_t)now - (int64_t)fired_for, learnt = (int64_t)wake_lateness_ns;
    learnt += ((late > 0 ? late : 0) - learnt) / 32;
    wake_lateness_ns = (uint64_t)(learnt > 0 ? learnt : 0);
  }
  /* Chunks due within the time a wake-up takes go now: waking again for them would make them late. */
  uint64_t horizon = now + wake_lateness_ns;
  while (head && head->due <= horizon) {
    chunk_t *ch = head;
    head = ch->next;
    if (!head) tail = NULL;
    delayed_delivered++;
    lateness_ns_total += now > ch->due ? now - ch->due : 0;
    deliver(ch->side, ch->data, ch->len);
    conn_unref(ch->side->conn);
    free(ch);
  }
  if (head) arm(early(head->due));
  else armed_for = 0; /* an expired timer need not be disarmed: leave it, save the call */
}

static void on_accept(listener_t *listener) {
  for (;;) {
    int client = accept4(listener->fd, NULL, NULL, SOCK_NONBLOCK);
    if (client < 0) {
      /* Out of descriptors: the listener would stay readable and spin; fail the run instead. */
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) die("accept");
      return;
    }
    int upstream = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons((uint16_t)listener->target_port);
    /* Blocking connect: on loopback it completes at once. */
    if (upstream < 0 || connect(upstream, (struct sockaddr *)&addr, sizeof addr) < 0) {
      if (upstream >= 0) close(upstream);
      close(client);
      continue;
    }
    fcntl(upstream, F_SETFL, fcntl(upstream, F_GETFL) | O_NONBLOCK);
    int one = 1;
    setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(upstream, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    conn_t *c = calloc(1, sizeof *c);
    if (!c) die("calloc");
    c->refs = 1;
    c->up = (side_t){.src = client, .dst = upstream, .conn = c};
    c->down = (side_t){.src = upstream, .dst = client, .conn = c};
    struct epoll_event ev = {.events = EPOLLIN};
    ev.data.ptr = &c->up;
    epoll_ctl(epfd, EPOLL_CTL_ADD, client, &ev);
    ev.data.ptr = &c->down;
    epoll_ctl(epfd, EPOLL_CTL_ADD, upstream, &ev);
  }
}

static void on_side(side_t *side, uint32_t events) {
  conn_t *c = side->conn;
  if (c->dead) return;
  side_t *other = side == &c->up ? &c->down : &c->up;
  if (events & EPOLLOUT) { /* side->src can take the other direction's pending bytes */
    flush_pending(other);
    if (c->dead) return;
    watch(side);
  }
  if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR))) return;
  static char buffer[READ_SIZE];
  for (;;) {
    ssize_t n = read(side->src, buffer, sizeof buffer);
    if (n > 0) {
      enqueue(side, buffer, (size_t)n);
      if (c->dead || n < (ssize_t)sizeof buffer) return;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n < 0) {
      conn_kill(c);
      return;
    }
    /* End of stream: stop watching this fd (a hung-up fd stays readable) and close the whole
       connection once the bytes read before the end are out. */
    epoll_ctl(epfd, EPOLL_CTL_DEL, side->src, NULL);
    enqueue(side, NULL, 0);
    return;
  }
}

/**
 * On a machine of 2 cores the benchmark's processes keep both busy, and a chunk waits for the
 * proxy to be scheduled as well as for its due time: ask to be scheduled sooner, with the
 * highest nice level allowed. Measured here (bench/scaling.ts's smoke probes, 8 processes on a
 * hot key, RTT 0.5 ms): a PING through the proxy took 611-616 µs at nice -10 against 625-648 µs
 * at the default nice (direct: 128-132 µs); a real-time priority (SCHED_FIFO), though the proxy
 * itself then sends within 5 µs of the due time, made the round trips slower (762-768 µs; idle,
 * 70-200 µs slower than nice), the woken processes paying for it. DELAY_PROXY_SCHEDULING=normal
 * or =fifo picks the others, for such comparisons. Returns what it got, for "stats".
 */
static const char *prefer_scheduling(void) {
  const char *wanted = getenv("DELAY_PROXY_SCHEDULING");
  if (wanted && strcmp(wanted, "normal") == 0) return "normal";
  struct sched_param param = {.sched_priority = 1};
  if (wanted && strcmp(wanted, "fifo") == 0 && sched_setscheduler(0, SCHED_FIFO, &param) == 0) return "fifo";
  for (int nice = -10; nice < 0; nice++)
    if (setpriority(PRIO_PROCESS, 0, nice) == 0) return "nice";
  return "normal";
}

static const char *scheduling = "normal";

static void on_stdin(void) {
  static char line[256];
  static size_t have;
  ssize_t n = read(0, line + have, sizeof line - 1 - have);
  if (n <= 0) exit(0);
  have += (size_t)n;
  char *newline;
  while ((newline = memchr(line, '\n', have))) {
    *newline = 0;
    unsigned long long value;
    if (sscanf(line, "delay %llu", &value) == 1) {
      delay_ns = value * 1000ull;
      printf("ok\n");
    } else if (strcmp(line, "stats") == 0) {
      printf("stats %llu %llu %llu %llu %llu %s\n", chunks_forwarded, bytes_forwarded, delayed_delivered, lateness_ns_total,
             (unsigned long long)wake_lateness_ns, scheduling);
    } else {
      printf("error unknown command\n");
    }
    fflush(stdout);
    size_t used = (size_t)(newline - line) + 1;
    memmove(line, line + used, have - used);
    have -= used;
  }
  if (have == sizeof line - 1) have = 0; /* a line too long to be a command */
}

int main(int argc, char **argv) {
  if (argc < 2 || argc - 1 > MAX_TARGETS) {
    fprintf(stderr, "usage: delay-proxy TARGET_PORT...\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  scheduling = prefer_scheduling();
  epfd = epoll_create1(0);
  timerfd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
  if (epfd < 0 || timerfd_ < 0) die("epoll/timerfd");
  printf("ports");
  for (int i = 0; i < argc - 1; i++) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof addr;
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(fd, 512) < 0) die("listen");
    getsockname(fd, (struct sockaddr *)&addr, &size);
    listeners[i] = (listener_t){.fd = fd, .target_port = atoi(argv[i + 1])};
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &listeners[i]};
    epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
    printf(" %d", ntohs(addr.sin_port));
  }
  printf("\n");
  fflush(stdout);
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &timer_tag};
  epoll_ctl(epfd, EPOLL_CTL_ADD, timerfd_, &ev);
  ev.data.ptr = &stdin_tag;
  epoll_ctl(epfd, EPOLL_CTL_ADD, 0, &ev);

  struct epoll_event events[256];
  for (;;) {
    int n = epoll_wait(epfd, events, 256, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      die("epoll_wait");
    }
    for (int i = 0; i < n; i++) {
      void *ptr = events[i].data.ptr;
      if (ptr == &timer_tag) {
        uint64_t expirations;
        if (read(timerfd_, &expirations, sizeof expirations) < 0) { /* spurious: run_due re-arms */ }
        uint64_t fired_for = armed_for;
        armed_for = 0;
        run_due(fired_for);
      } else if (ptr == &stdin_tag) {
        on_stdin();
      } else if ((listener_t *)ptr >= listeners && (listener_t *)ptr < listeners + MAX_TARGETS) {
        on_accept(ptr);
      } else {
        on_side(ptr, events[i].events);
      }
    }
    /* A chunk may have come due while this batch was handled. */
    if (head && head->due <= now_ns()) run_due(0);
    bury();
  }
}

/*
 * vpc-lease-cni, the executable the container runtime calls: a shim that forwards the whole CNI request (the
 * environment and stdin) to the node agent over a unix socket and relays its answer and exit code. Starting a
 * JavaScript runtime per call costs ~10x the Go plugins; this costs a fork, an exec and one round trip.
 *
 * When the agent's socket is absent, refuses, or does not accept within ACCEPT_MS (or answer within the wait the
 * agent sent with its acceptance), it execs the full plugin beside it (vpc-lease-cni-plugin) with the same
 * environment and stdin, which does the work itself. At most FALLBACK_SLOTS plugins run at once on a node (flock on
 * slot files beside the agent's socket, held by the plugin until it exits): a stalled agent must not start a
 * JavaScript runtime per waiting call. A shim without a slot asks the agent again until one frees, and after
 * FALLBACK_WAIT_MS answers code 11, which the runtime retries. The answer is read whole before any byte reaches stdout, so stdout never
 * carries half an answer, and a request is handed to the fallback only while nothing has been written: a second
 * run of a request the agent had started is safe because both take the same per-attachment lock and the plugin's
 * journal turns a repeated ADD or DEL into a check of what is already there (node/README.md, "Agent").
 *
 * Wire format (node/agent/protocol.ts is the other side): "VLA2", u32le env bytes, env ("K=V\0"...), u32le stdin
 * bytes, stdin. Answer: 'W' and u32le milliseconds to wait for the rest (the agent derives it from the netconf,
 * node/agent/budget.ts; an older agent sends 'A' alone, and ANSWER_MS applies) or 'R' (refused), then u8 exit
 * code, u32le stdout bytes, stdout.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define AGENT_SOCKET "/run/vpc-lease/agent.sock"
#define PLUGIN_NAME "vpc-lease-cni-plugin"
/* A live agent accepts at once; one that does not within this bound is hung or overloaded: fall back. */
#define ACCEPT_MS 2000
/* Only for an older agent, whose acceptance carries no wait: a newer one sends the wait its netconf implies. */
#define ANSWER_MS 60000
/* Plugin processes at once per node when the agent cannot take calls: each is a JavaScript runtime (~60 MB,
   ~0.5 s of CPU) outside the agent's cgroup. */
#define FALLBACK_SLOTS 4
/* How long a shim waits for the agent or a slot, under kubelet's 2 min with room for the plugin's own run. */
#define FALLBACK_WAIT_MS 30000
#define MAX_FRAME (1u << 20)
/* Below the probes' timeoutSeconds (5), so a stalled agent is reported by us, not by the kubelet's timer. */
#define HEALTH_MS 3000

extern char **environ;

static char *stdin_buf;
static size_t stdin_len;

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void read_stdin(void) {
  size_t cap = 4096;
  stdin_buf = malloc(cap);
  if (!stdin_buf) return;
  for (;;) {
    if (stdin_len == cap) {
      char *bigger = realloc(stdin_buf, cap * 2);
      if (!bigger) return;
      stdin_buf = bigger;
      cap *= 2;
    }
    ssize_t n = read(0, stdin_buf + stdin_len, cap - stdin_len);
    if (n > 0) stdin_len += (size_t)n;
    else if (n < 0 && errno == EINTR) continue;
    else return; /* EOF, or no stdin at all: the plugin reports an empty netconf itself */
  }
}

/* Waits for `events` on fd until the deadline: 1 ready, 0 timed out or failed. */
static int wait_fd(int fd, short events, long long deadline) {
  for (;;) {
    long long left = deadline - now_ms();
    if (left <= 0) return 0;
    struct pollfd p = {.fd = fd, .events = events};
    int r = poll(&p, 1, (int)left);
    if (r > 0) return 1;
    if (r < 0 && errno != EINTR) return 0;
  }
}

static int send_all(int fd, const void *data, size_t len, long long deadline) {
  const char *at = data;
  while (len > 0) {
    ssize_t n = send(fd, at, len, MSG_NOSIGNAL);
    if (n > 0) {
      at += n;
      len -= (size_t)n;
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!wait_fd(fd, POLLOUT, deadline)) return -1;
    } else {
      return -1;
    }
  }
  return 0;
}

static int recv_all(int fd, void *data, size_t len, long long deadline) {
  char *at = data;
  while (len > 0) {
    ssize_t n = recv(fd, at, len, 0);
    if (n > 0) {
      at += n;
      len -= (size_t)n;
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!wait_fd(fd, POLLIN, deadline)) return -1;
    } else {
      return -1; /* EOF before the whole answer: the agent died or dropped us */
    }
  }
  return 0;
}

static void put_u32(unsigned char *p, uint32_t v) {
  p[0] = v & 0xff;
  p[1] = (v >> 8) & 0xff;
  p[2] = (v >> 16) & 0xff;
  p[3] = (v >> 24) & 0xff;
}

static const char *socket_path(void) {
  /* Tests point the shim elsewhere only in the plugin's test mode, as every other test switch. */
  const char *test = getenv("VPC_LEASE_TEST_MODE");
  const char *override = getenv("VPC_LEASE_AGENT_SOCKET");
  if (test && strcmp(test, "1") == 0 && override) return override;
  return AGENT_SOCKET;
}

/* Runs the request through the agent; returns only when it must fall back (nothing was written to stdout). */
static void try_agent(void) {
  const char *path = socket_path();
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  if (path[0] == '\0' || strlen(path) >= sizeof addr.sun_path) return;
  strcpy(addr.sun_path, path);
  size_t env_len = 0;
  for (char **e = environ; *e; e++) env_len += strlen(*e) + 1;
  if (env_len + stdin_len + 12 > MAX_FRAME) return;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  /* A unix connect never waits: absent, refused or a full backlog all fail here. */
  if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) goto fallback;
  long long deadline = now_ms() + ACCEPT_MS;
  unsigned char head[8] = {'V', 'L', 'A', '2'};
  put_u32(head + 4, (uint32_t)env_len);
  if (send_all(fd, head, sizeof head, deadline) != 0) goto fallback;
  for (char **e = environ; *e; e++)
    if (send_all(fd, *e, strlen(*e) + 1, deadline) != 0) goto fallback;
  put_u32(head, (uint32_t)stdin_len);
  if (send_all(fd, head, 4, deadline) != 0 || send_all(fd, stdin_buf, stdin_len, deadline) != 0) goto fallback;
  char verdict = 0;
  if (recv_all(fd, &verdict, 1, deadline) != 0) goto fallback;
  long long wait_ms = ANSWER_MS;
  if (verdict == 'W') {
    unsigned char w[4];
    if (recv_all(fd, w, sizeof w, deadline) != 0) goto fallback;
    wait_ms = w[0] | w[1] << 8 | w[2] << 16 | (uint32_t)w[3] << 24;
  } else if (verdict != 'A') {
    goto fallback;
  }
  deadline = now_ms() + wait_ms;
  unsigned char answer_head[5];
  if (recv_all(fd, answer_head, sizeof answer_head, deadline) != 0) goto fallback;
  uint32_t out_len = answer_head[1] | answer_head[2] << 8 | answer_head[3] << 16 | (uint32_t)answer_head[4] << 24;
  if (out_len > MAX_FRAME) goto fallback;
  char *out = malloc(out_len ? out_len : 1);
  if (!out || recv_all(fd, out, out_len, deadline) != 0) goto fallback;
  close(fd);
  /* From here on the answer is the agent's: a failed write is this call's failure, never a second run. */
  for (size_t done = 0; done < out_len;) {
    ssize_t n = write(1, out + done, out_len - done);
    if (n > 0) done += (size_t)n;
    else if (n < 0 && errno == EINTR) continue;
    else _exit(1);
  }
  _exit(answer_head[0]);
fallback:
  close(fd);
}

/* One of the node's fallback slots, locked (fd kept open across exec, so the plugin holds it until it exits), or
   -1 when every slot is taken. The slots live beside the agent's socket, in its root-only directory. */
static int take_fallback_slot(void) {
  char dir[sizeof ((struct sockaddr_un *)0)->sun_path + 16];
  const char *path = socket_path();
  const char *slash = strrchr(path, '/');
  if (!slash || (size_t)(slash - path) + 10 >= sizeof dir) return -1;
  memcpy(dir, path, (size_t)(slash - path));
  /* On a node where no agent has run yet its directory is missing too; root-only, as the agent makes it. */
  dir[slash - path] = '\0';
  mkdir(dir, 0700);
  strcpy(dir + (slash - path), "/fallback");
  mkdir(dir, 0700); /* EEXIST is fine; anything else fails the open below */
  for (int i = 0; i < FALLBACK_SLOTS; i++) {
    char file[sizeof dir + 8];
    snprintf(file, sizeof file, "%s/%d", dir, i);
    int fd = open(file, O_RDWR | O_CREAT | O_NOFOLLOW, 0600);
    if (fd < 0) continue;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
    close(fd);
  }
  return -1;
}

/* stdin was read whole: give the plugin the same bytes on its fd 0, from memory. */
static int restore_stdin(void) {
  int fd = memfd_create("cni-stdin", 0);
  if (fd < 0) return -1;
  for (size_t done = 0; done < stdin_len;) {
    ssize_t n = write(fd, stdin_buf + done, stdin_len - done);
    if (n <= 0) return -1;
    done += (size_t)n;
  }
  if (lseek(fd, 0, SEEK_SET) != 0 || dup2(fd, 0) != 0) return -1;
  close(fd);
  return 0;
}

static int fail(const char *what) {
  /* The CNI error shape; the version is unknown without parsing the netconf, and 1.0.0 is what we install. */
  printf("{\"cniVersion\":\"1.0.0\",\"code\":999,\"msg\":\"vpc-lease-cni shim: %s: %s\"}", what, strerror(errno));
  return 1;
}

/* `health PATH ready|live`: the DaemonSet's exec probes. Reads the line the agent's private health socket writes
   (node/agent/health-socket.ts) and exits 0 when it says ready (or, for live, ready or live). A static binary
   forks and answers in a millisecond; the agent's own process is asked, not whichever agent holds a shared port. */
static int health(const char *path, const char *want) {
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof addr.sun_path) return 2;
  strcpy(addr.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
    printf("down cannot connect to %s: %s\n", path, strerror(errno));
    return 1;
  }
  char line[512];
  size_t len = 0;
  long long deadline = now_ms() + HEALTH_MS;
  while (len < sizeof line - 1) {
    ssize_t n = recv(fd, line + len, sizeof line - 1 - len, 0);
    if (n > 0) len += (size_t)n;
    else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!wait_fd(fd, POLLIN, deadline)) break;
    } else break;
  }
  line[len] = '\0';
  printf("%s", len ? line : "down no answer\n");
  int ready = strncmp(line, "ready ", 6) == 0;
  return ready || (strcmp(want, "live") == 0 && strncmp(line, "live ", 5) == 0) ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "health") == 0) return health(argv[2], argv[3]);
  /* A runtime calls a CNI plugin with no arguments (the request is the environment and stdin); an argument is
     a subcommand of the full executable (install, max-pods, agent), handed on untouched, stdin included. */
  int cni_call = argc <= 1;
  if (cni_call) {
    read_stdin();
    long long give_up = now_ms() + FALLBACK_WAIT_MS;
    srand((unsigned)getpid());
    for (;;) {
      try_agent();
      if (take_fallback_slot() >= 0) break;
      if (now_ms() >= give_up) {
        printf("{\"cniVersion\":\"1.0.0\",\"code\":11,\"msg\":\"vpc-lease-cni shim: the agent did not take the call "
               "and %d fallbacks already run on this node; try again later\"}",
               FALLBACK_SLOTS);
        return 1;
      }
      /* Spread the retries, so shims that waited together do not all knock at once. */
      usleep((useconds_t)(50000 + rand() % 200000));
    }
  }
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return fail("cannot find itself");
  self[n] = '\0';
  char *slash = strrchr(self, '/');
  if (!slash || (size_t)(slash - self) + 1 + sizeof PLUGIN_NAME > sizeof self) return fail("path too long");
  strcpy(slash + 1, PLUGIN_NAME);
  if (cni_call && restore_stdin() != 0) return fail("cannot hand stdin on");
  argv[0] = self;
  execve(self, argv, environ);
  return fail("cannot execute " PLUGIN_NAME);
}

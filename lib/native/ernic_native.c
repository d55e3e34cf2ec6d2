/*
 * ernic_native: the few Linux syscalls Node.js lacks (AF_UNIX sockets with
 * SCM_RIGHTS, libuv fd polling, mmap, memfd with seals, eventfd, TAP).
 * The only caller is index.ts: it validates arguments and adds the errno name
 * (`code`) to our errors; a bad value that slips through gets a generic
 * TypeError here, never a crash. Syscall failures throw an Error
 * "<syscall>: <strerror>" with errno and syscall. EINTR is always retried.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <linux/if_tun.h>
#include <node_api.h> /* also brings stdbool.h and stdint.h */
#include <uv.h>

#define MAX_FDS 253 /* SCM_MAX_FD in the kernel */
#define ALL_EVENTS (UV_READABLE | UV_WRITABLE | UV_DISCONNECT)
#define RETRY(r, call) do (r) = (call); while ((r) < 0 && errno == EINTR)
#define OK(call) ((call) == napi_ok)
/* Argument access: argv (missing ones are undefined) and `ok`, cleared by the
 * getters below on a wrong type or an out-of-bounds span. */
#define ARGS(n) napi_value argv[n]; size_t argc = (n); bool ok = true; (void)ok; \
  if (!OK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL))) return fail(env)
#define NUM(i) ({ int64_t x_ = 0; ok &= OK(napi_get_value_int64(env, argv[i], &x_)); x_; })
#define FLAG(i) ({ bool b_ = false; ok &= OK(napi_get_value_bool(env, argv[i], &b_)); b_; })
#define SPAN(i, len) get_span(env, argv + (i), (len), &ok)
#define INT32S(i, min, n) get_int32s(env, argv[i], (min), (n), &ok)
#define THROW(fd, syscall) throw_errno(env, (fd), (syscall), errno, NULL)

/* Closes fd (if >= 0), throws Error("<syscall>: <detail or strerror>") + errno, syscall. */
static napi_value throw_errno(napi_env env, int fd, const char *syscall, int err,
                              const char *detail) {
  char sbuf[128], msg[256];
  napi_value e, m, n, s;
  if (fd >= 0) close(fd);
  if (detail == NULL) detail = strerror_r(err, sbuf, sizeof sbuf);
  snprintf(msg, sizeof msg, "%s: %s", syscall, detail);
  if (OK(napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &m)) &&
      OK(napi_create_error(env, NULL, m, &e)) && OK(napi_create_int32(env, err, &n)) &&
      OK(napi_create_string_utf8(env, syscall, NAPI_AUTO_LENGTH, &s)) &&
      OK(napi_set_named_property(env, e, "errno", n)) &&
      OK(napi_set_named_property(env, e, "syscall", s)))
    return napi_throw(env, e), NULL;
  return napi_throw_error(env, NULL, msg), NULL;
}

/* A bad argument (only a backstop) or a failed N-API call that did not throw. */
static napi_value fail(napi_env env) {
  bool pending = true;
  if (OK(napi_is_exception_pending(env, &pending)) && !pending)
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "ernic_native: bad argument");
  return NULL;
}

/* r if r >= 0; -1 if it failed with errno `soft` (EAGAIN == EWOULDBLOCK); else throws. */
static napi_value result(napi_env env, int64_t r, const char *syscall, int soft) {
  napi_value v;
  if (r < 0 && errno != soft) return THROW(-1, syscall);
  return OK(napi_create_int64(env, r < 0 ? -1 : r, &v)) ? v : fail(env);
}

/* A string without NUL of at most max bytes. cap >= max + 5: N-API truncates
 * at a UTF-8 character boundary, so a truncated copy is still longer than max. */
static bool get_str(napi_env env, napi_value v, char *buf, size_t cap, size_t max) {
  size_t len;
  return OK(napi_get_value_string_utf8(env, v, buf, cap, &len)) && len <= max &&
         strlen(buf) == len;
}

/* argv[0][argv[1], argv[1] + argv[2]) of a Buffer/Uint8Array, bounds checked. */
static char *get_span(napi_env env, napi_value *argv, size_t *length, bool *okp) {
  bool ok = true;
  char *data = NULL;
  size_t blen = 0;
  int64_t off = NUM(1), len = NUM(2);
  *okp &= ok && OK(napi_get_buffer_info(env, argv[0], (void **)&data, &blen)) && off >= 0 &&
          len >= 0 && (uint64_t)off <= blen && (uint64_t)len <= blen - off;
  *length = *okp ? (size_t)len : 0;
  return *okp ? data + off : NULL;
}

static int32_t *get_int32s(napi_env env, napi_value v, size_t min, size_t *n, bool *ok) {
  napi_typedarray_type t;
  void *data = NULL;
  *ok &= OK(napi_get_typedarray_info(env, v, &t, n, &data, NULL, NULL)) &&
         t == napi_int32_array && *n >= min;
  return data;
}

/* unixSocket(path, backlog): backlog >= 0 makes a non-blocking listening
 * socket; -1 connects (blocking connect, then the fd is made non-blocking). */
static napi_value js_unix_socket(napi_env env, napi_callback_info info) {
  ARGS(2);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  char path[sizeof sa.sun_path + 5];
  int backlog = NUM(1), fd, r, fl;
  if (!ok || !get_str(env, argv[0], path, sizeof path, sizeof sa.sun_path - 1)) return fail(env);
  memcpy(sa.sun_path, path, strlen(path) + 1);
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (backlog >= 0 ? SOCK_NONBLOCK : 0), 0);
  if (fd < 0) return THROW(-1, "socket");
  if (backlog >= 0) {
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) return THROW(fd, "bind");
    return listen(fd, backlog) < 0 ? THROW(fd, "listen") : result(env, fd, "listen", 0);
  }
  RETRY(r, connect(fd, (struct sockaddr *)&sa, sizeof sa));
  if (r < 0 && errno != EISCONN) return THROW(fd, "connect"); /* EISCONN: done after EINTR */
  if ((fl = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
    return THROW(fd, "fcntl");
  return result(env, fd, "connect", 0);
}

static napi_value js_accept(napi_env env, napi_callback_info info) {
  ARGS(1);
  int fd = NUM(0), c;
  if (!ok) return fail(env);
  RETRY(c, accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC));
  return result(env, c, "accept4", EAGAIN);
}

/* socketPair(out: Int32Array(2)) */
static napi_value js_socket_pair(napi_env env, napi_callback_info info) {
  ARGS(1);
  size_t n;
  int32_t *sv = INT32S(0, 2, &n);
  if (!ok) return fail(env);
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
    return THROW(-1, "socketpair");
  return NULL;
}

typedef union {
  struct cmsghdr align;
  char buf[CMSG_SPACE(sizeof(int) * MAX_FDS)];
} cmsg_buf;

/* recvmsg(fd, buf, offset, length >= 1, fdsOut: Int32Array(>= MAX_FDS + 1)) */
static napi_value js_recvmsg(napi_env env, napi_callback_info info) {
  ARGS(5);
  size_t length = 0, n_out, count = 0;
  int fd = NUM(0), rfd;
  char *data = SPAN(1, &length);
  int32_t *out = INT32S(4, MAX_FDS + 1, &n_out);
  cmsg_buf ctrl; /* on the stack: nothing is allocated per call */
  ssize_t r;
  if (!ok || length == 0) return fail(env);
  struct iovec iov = {.iov_base = data, .iov_len = length};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1,
                       .msg_control = ctrl.buf, .msg_controllen = sizeof ctrl.buf};
  out[0] = 0;
  RETRY(r, recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT));
  if (r < 0) return result(env, r, "recvmsg", EAGAIN);
  /* Collect the fds of every SCM_RIGHTS message, in order. */
  bool lost = (msg.msg_flags & MSG_CTRUNC) != 0;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
      memcpy(&rfd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (count + 1 < n_out) out[++count] = rfd;
      else close(rfd), lost = true;
    }
  }
  if (lost) { /* fds are missing: the message is unusable, do not leak the rest */
    while (count > 0) close(out[count--]);
    return throw_errno(env, -1, "recvmsg", EMSGSIZE,
                       "control data truncated (MSG_CTRUNC); received fds were closed");
  }
  out[0] = (int32_t)count;
  return result(env, r, "recvmsg", 0);
}

/* sendmsg(fd, buf, offset, length, fds: Int32Array | null, nfds <= MAX_FDS) */
static napi_value js_sendmsg(napi_env env, napi_callback_info info) {
  ARGS(6);
  size_t length = 0, n;
  int fd = NUM(0);
  int64_t nfds = NUM(5);
  char *data = SPAN(1, &length);
  int32_t *fds = nfds > 0 ? INT32S(4, nfds, &n) : NULL;
  cmsg_buf ctrl;
  ssize_t r;
  if (!ok || nfds < 0 || nfds > MAX_FDS) return fail(env);
  struct iovec iov = {.iov_base = data, .iov_len = length};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
  if (nfds > 0) { /* one SCM_RIGHTS message */
    memset(&ctrl, 0, sizeof ctrl);
    msg.msg_control = ctrl.buf;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    *c = (struct cmsghdr){.cmsg_len = CMSG_LEN(sizeof(int) * nfds), .cmsg_level = SOL_SOCKET,
                          .cmsg_type = SCM_RIGHTS};
    memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
  }
  RETRY(r, sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT));
  return result(env, r, "sendmsg", EAGAIN);
}

/* A watcher_t is wrapped into the Watcher object that index.ts creates. */
typedef struct {
  uv_poll_t poll;
  napi_env env;
  napi_ref cb;   /* the JS callback; deleted when uv_close completes */
  napi_ref self; /* strong ref to the Watcher object until uv_close completes */
  napi_async_context actx;
  bool closed;    /* uv_close completed */
  bool finalized; /* JS object gone (env teardown while open, or failed setup) */
} watcher_t;
#define CLOSING(w) uv_is_closing((uv_handle_t *)&(w)->poll) /* or closed */

static void on_poll(uv_poll_t *h, int status, int events) {
  watcher_t *w = h->data;
  napi_env env = w->env;
  napi_handle_scope scope;
  napi_value self, cb, argv[2], exc;
  bool pending = false;
  if (CLOSING(w) || !OK(napi_open_handle_scope(env, &scope))) return; /* closed: no more calls */
  if (OK(napi_get_reference_value(env, w->self, &self)) &&
      OK(napi_get_reference_value(env, w->cb, &cb)) &&
      OK(napi_create_int32(env, status, &argv[0])) && OK(napi_create_int32(env, events, &argv[1])))
    napi_make_callback(env, w->actx, self, cb, 2, argv, NULL);
  /* Nobody up the stack catches this: report it as an uncaught exception. */
  if (OK(napi_is_exception_pending(env, &pending)) && pending &&
      OK(napi_get_and_clear_last_exception(env, &exc)))
    napi_fatal_exception(env, exc);
  napi_close_handle_scope(env, scope);
}

static void on_closed(uv_handle_t *h) {
  watcher_t *w = h->data;
  napi_env env = w->env;
  napi_handle_scope scope;
  w->closed = true;
  if (w->finalized) { free(w); return; } /* no N-API calls at env teardown */
  bool scoped = OK(napi_open_handle_scope(env, &scope));
  napi_delete_reference(env, w->cb);
  napi_async_destroy(env, w->actx);
  napi_delete_reference(env, w->self); /* last: from now on the finalizer may free w */
  if (scoped) napi_close_handle_scope(env, scope);
}

/* Idempotent; safe inside the callback: on_poll ignores a closing watcher. */
static void watcher_close(watcher_t *w) {
  if (!CLOSING(w)) uv_close((uv_handle_t *)&w->poll, on_closed); /* also stops polling */
}

static void watcher_finalize(napi_env env, void *data, void *hint) {
  watcher_t *w = data;
  (void)env, (void)hint;
  if (w->closed) { free(w); return; }
  w->finalized = true; /* on_closed frees it */
  watcher_close(w);
}

/* watch(watcherObject, fd, events, callback) */
static napi_value js_watch(napi_env env, napi_callback_info info) {
  ARGS(4);
  int fd = NUM(1), events = NUM(2), r;
  uv_loop_t *loop;
  napi_value name;
  watcher_t *w;
  if (!ok || (events & ~ALL_EVENTS) != 0 || !OK(napi_get_uv_event_loop(env, &loop)))
    return fail(env);
  if ((w = malloc(sizeof *w)) == NULL) return throw_errno(env, -1, "watch", ENOMEM, NULL);
  /* Until wrapped, on_closed just frees w (libuv does not touch poll.data). */
  *w = (watcher_t){.poll.data = w, .env = env, .finalized = true};
  if ((r = uv_poll_init(loop, &w->poll, fd)) < 0)
    return free(w), throw_errno(env, -1, "uv_poll_init", -r, NULL);
  /* From here on the handle must be released with uv_close (watcher_close). */
  if (!OK(napi_wrap(env, argv[0], w, watcher_finalize, NULL, NULL)))
    return watcher_close(w), fail(env);
  w->finalized = false; /* on_closed ignores the refs below that are still NULL */
  if (!OK(napi_create_string_utf8(env, "ernic:watch", NAPI_AUTO_LENGTH, &name)) ||
      !OK(napi_async_init(env, argv[0], name, &w->actx)) ||
      !OK(napi_create_reference(env, argv[3], 1, &w->cb)) ||
      !OK(napi_create_reference(env, argv[0], 1, &w->self)))
    return watcher_close(w), fail(env);
  if (events != 0 && (r = uv_poll_start(&w->poll, events, on_poll)) < 0)
    return watcher_close(w), throw_errno(env, -1, "uv_poll_start", -r, NULL);
  return NULL;
}

/* pollCtl(watcherObject, events): events >= 0 updates (0 stops), -1 closes. */
static napi_value js_poll_ctl(napi_env env, napi_callback_info info) {
  ARGS(2);
  int events = NUM(1), r;
  watcher_t *w;
  if (!ok || (events != -1 && (events & ~ALL_EVENTS) != 0) ||
      !OK(napi_unwrap(env, argv[0], (void **)&w)))
    return fail(env);
  if (events == -1) return watcher_close(w), NULL;
  if (CLOSING(w))
    return napi_throw_error(env, "ERR_WATCHER_CLOSED", "Watcher.update: watcher is closed"), NULL;
  r = events == 0 ? uv_poll_stop(&w->poll) : uv_poll_start(&w->poll, events, on_poll);
  return r < 0 ? throw_errno(env, -1, "uv_poll_start", -r, NULL) : NULL;
}

/* One entry per external ArrayBuffer over a mapping. munmap() marks it
 * unmapped; only the ArrayBuffer's finalizer frees it. That finalizer may run
 * much later (Node 20 defers it past the detach or GC), possibly after a new
 * mmap() got the same address: so it never unmaps an entry that munmap()
 * released, and munmap() only matches entries that are still mapped.
 * The list is process-wide (worker threads share it), guarded by a mutex. */
typedef struct mapping {
  struct mapping *next;
  void *addr;
  size_t len;
  bool unmapped;
} mapping_t;
static pthread_mutex_t maps_lock = PTHREAD_MUTEX_INITIALIZER;
static mapping_t *maps;

/* The bus-error guard. A client that shrinks the file behind guest memory
 * (an unsealed memfd, a file backend) after DMA_MAP would turn our next
 * access of those pages into SIGBUS, which ends the process. The handler
 * looks the address up in `guarded` (lock-free: it runs inside the faulting
 * access), replaces the pages from the fault to the end of that mapping with
 * anonymous zero pages, counts the fault and signals an eventfd; the access
 * then completes on the new pages and the TypeScript side closes the client.
 * A fault outside our mappings restores the previous action and returns, so
 * it is raised again and handled as before (a real crash stays a crash). */
#define GUARD_SLOTS 4096
typedef struct {
  _Atomic uintptr_t start; /* 0: free */
  _Atomic size_t len;
} guard_slot_t;
static guard_slot_t guarded[GUARD_SLOTS];
static _Atomic uint64_t bus_faults;
static _Atomic uintptr_t last_fault;
static _Atomic int fault_efd = -1;
static struct sigaction prev_bus;
static _Atomic bool bus_guard_on;

static void on_sigbus(int sig, siginfo_t *si, void *uctx) {
  uintptr_t a = (uintptr_t)si->si_addr, page = a & ~(uintptr_t)4095;
  int saved = errno, efd;
  (void)sig, (void)uctx;
  for (size_t i = 0; i < GUARD_SLOTS; i++) {
    uintptr_t start = atomic_load(&guarded[i].start);
    size_t len = atomic_load(&guarded[i].len);
    if (start == 0 || a < start || a - start >= len) continue;
    /* From the faulting page on; a huge-page mapping cannot be split there: then all of it. */
    if (mmap((void *)page, start + len - page, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED &&
        mmap((void *)start, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
             -1, 0) == MAP_FAILED)
      break;
    atomic_fetch_add(&bus_faults, 1);
    atomic_store(&last_fault, a);
    if ((efd = atomic_load(&fault_efd)) >= 0) {
      uint64_t one = 1;
      ssize_t r = write(efd, &one, sizeof one); /* async-signal-safe */
      (void)r;
    }
    errno = saved;
    return;
  }
  sigaction(SIGBUS, &prev_bus, NULL);
  errno = saved;
}

/* Guard [addr, addr + len); false when every slot is taken. */
static bool guard_add(void *addr, size_t len) {
  for (size_t i = 0; i < GUARD_SLOTS; i++) {
    uintptr_t expect = 0;
    if (atomic_load(&guarded[i].start) != 0) continue;
    atomic_store(&guarded[i].len, len);
    if (atomic_compare_exchange_strong(&guarded[i].start, &expect, (uintptr_t)addr)) return true;
  }
  return false;
}

static void guard_remove(void *addr) {
  for (size_t i = 0; i < GUARD_SLOTS; i++) {
    uintptr_t expect = (uintptr_t)addr;
    if (atomic_compare_exchange_strong(&guarded[i].start, &expect, 0)) return;
  }
}

/* busGuard(eventfd or -1): install the handler (once) and set the fd it signals.
 * Returns [faults so far, last faulting address] as numbers through `out`. */
static napi_value js_bus_guard(napi_env env, napi_callback_info info) {
  ARGS(2);
  int efd = NUM(0);
  size_t n = 0;
  double *out = NULL;
  napi_typedarray_type t;
  if (!ok || !OK(napi_get_typedarray_info(env, argv[1], &t, &n, (void **)&out, NULL, NULL)) ||
      t != napi_float64_array || n < 2)
    return fail(env);
  if (efd >= -1) atomic_store(&fault_efd, efd);
  if (!atomic_exchange(&bus_guard_on, true)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, &prev_bus) < 0) {
      atomic_store(&bus_guard_on, false);
      return THROW(-1, "sigaction");
    }
  }
  out[0] = (double)atomic_load(&bus_faults);
  out[1] = (double)atomic_load(&last_fault);
  return NULL;
}

static void mapping_finalize(napi_env env, void *data, void *hint) {
  mapping_t *m = hint, **p;
  (void)env, (void)data;
  pthread_mutex_lock(&maps_lock);
  for (p = &maps; *p != m; p = &(*p)->next) continue;
  *p = m->next;
  pthread_mutex_unlock(&maps_lock);
  if (!m->unmapped) guard_remove(m->addr), munmap(m->addr, m->len);
  free(m);
}

/* mmap(fd, offset >= 0, length in [1, 2^31], writable) */
static napi_value js_mmap(napi_env env, napi_callback_info info) {
  ARGS(4);
  int fd = NUM(0), prot = PROT_READ | (FLAG(3) ? PROT_WRITE : 0);
  int64_t off = NUM(1), len = NUM(2);
  napi_value ab;
  mapping_t *m;
  if (!ok || off < 0 || len < 1 || len > ((int64_t)1 << 31)) return fail(env);
  void *addr = mmap(NULL, (size_t)len, prot, MAP_SHARED, fd, off);
  if (addr == MAP_FAILED) return THROW(-1, "mmap");
  if (!guard_add(addr, (size_t)len))
    return munmap(addr, (size_t)len), throw_errno(env, -1, "mmap", ENOMEM, "too many guarded mappings");
  if ((m = calloc(1, sizeof *m)) == NULL)
    return guard_remove(addr), munmap(addr, (size_t)len), throw_errno(env, -1, "mmap", ENOMEM, NULL);
  *m = (mapping_t){.addr = addr, .len = (size_t)len};
  if (!OK(napi_create_external_arraybuffer(env, addr, m->len, mapping_finalize, m, &ab)))
    return guard_remove(addr), munmap(addr, m->len), free(m), fail(env);
  pthread_mutex_lock(&maps_lock);
  m->next = maps;
  maps = m;
  pthread_mutex_unlock(&maps_lock);
  return ab;
}

static napi_value js_munmap(napi_env env, napi_callback_info info) {
  ARGS(1);
  void *data;
  size_t len;
  mapping_t *m;
  if (!OK(napi_get_arraybuffer_info(env, argv[0], &data, &len))) return fail(env);
  pthread_mutex_lock(&maps_lock);
  for (m = maps; m != NULL; m = m->next)
    if (m->addr == data && m->len == len && !m->unmapped) break;
  if (m != NULL) m->unmapped = true; /* before detach: the finalizer may run any time after */
  pthread_mutex_unlock(&maps_lock);
  if (m == NULL)
    return napi_throw_error(env, "ERR_NOT_MAPPED", "munmap: ArrayBuffer is not a live mapping "
                            "created by mmap() (not ours, or already unmapped)"), NULL;
  /* Detach before munmap: no view may ever touch the unmapped (or reused) range. */
  if (!OK(napi_detach_arraybuffer(env, argv[0]))) {
    pthread_mutex_lock(&maps_lock);
    m->unmapped = false;
    pthread_mutex_unlock(&maps_lock);
    return fail(env);
  }
  /* m may already be freed here: use only the locals. */
  guard_remove(data);
  return munmap(data, len) != 0 ? THROW(-1, "munmap") : NULL;
}

/* mappingAddress(ab): where an mmap() ArrayBuffer sits (to match bus-guard fault addresses). */
static napi_value js_mapping_address(napi_env env, napi_callback_info info) {
  ARGS(1);
  void *data = NULL;
  size_t len;
  napi_value v;
  if (!OK(napi_get_arraybuffer_info(env, argv[0], &data, &len))) return fail(env);
  return OK(napi_create_double(env, (double)(uintptr_t)data, &v)) ? v : fail(env);
}

/* memfdCreate(name of at most 255 bytes, size, seal) */
static napi_value js_memfd_create(napi_env env, napi_callback_info info) {
  ARGS(3);
  char name[255 + 5];
  int64_t size = NUM(1);
  bool seal = FLAG(2);
  int fd, r;
  if (!ok || !get_str(env, argv[0], name, sizeof name, 255)) return fail(env);
  if ((fd = memfd_create(name, MFD_CLOEXEC | (seal ? MFD_ALLOW_SEALING : 0))) < 0)
    return THROW(-1, "memfd_create");
  RETRY(r, ftruncate(fd, size));
  if (r < 0) return THROW(fd, "ftruncate");
  if (seal && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
    return THROW(fd, "fcntl(F_ADD_SEALS)");
  return result(env, fd, "memfd_create", 0);
}

/* The F_SEAL_* mask, or -1 if the fd does not support sealing (EINVAL). */
static napi_value js_get_seals(napi_env env, napi_callback_info info) {
  ARGS(1);
  int fd = NUM(0);
  return ok ? result(env, fcntl(fd, F_GET_SEALS), "fcntl(F_GET_SEALS)", EINVAL) : fail(env);
}

static napi_value js_eventfd(napi_env env, napi_callback_info info) {
  ARGS(2);
  unsigned int init = NUM(0);
  int flags = EFD_CLOEXEC | (FLAG(1) ? EFD_NONBLOCK : 0);
  return ok ? result(env, eventfd(init, flags), "eventfd2", 0) : fail(env);
}

/* dupFd(fd): a close-on-exec duplicate (the mesh re-wraps an accepted TCP
 * socket in a Socket that reads where it asks, which Node offers only to
 * sockets it did not accept itself). */
static napi_value js_dup_fd(napi_env env, napi_callback_info info) {
  ARGS(1);
  int fd = NUM(0);
  return ok ? result(env, fcntl(fd, F_DUPFD_CLOEXEC, 0), "fcntl", 0) : fail(env);
}

/* openTap(name: Buffer of >= IFNAMSIZ bytes, NUL-terminated; gets the actual name,
 * offloads): offloads -1 attaches a plain TAP; >= 0 adds IFF_VNET_HDR (a
 * virtio_net_hdr before every frame) and hands the TUN_F_* bits to TUNSETOFFLOAD. */
static napi_value js_open_tap(napi_env env, napi_callback_info info) {
  ARGS(2);
  char *name;
  size_t len;
  int fd;
  int64_t offloads = NUM(1);
  struct ifreq ifr = {.ifr_flags = IFF_TAP | IFF_NO_PI | (offloads >= 0 ? IFF_VNET_HDR : 0)};
  if (!ok || offloads < -1 || offloads > 0xffff ||
      !OK(napi_get_buffer_info(env, argv[0], (void **)&name, &len)) || len < IFNAMSIZ)
    return fail(env);
  memcpy(ifr.ifr_name, name, IFNAMSIZ - 1);
  if ((fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC)) < 0)
    return THROW(-1, "open(/dev/net/tun)");
  if (ioctl(fd, TUNSETIFF, &ifr) < 0) return THROW(fd, "ioctl(TUNSETIFF)");
  if (offloads >= 0 && ioctl(fd, TUNSETOFFLOAD, (unsigned long)offloads) < 0)
    return THROW(fd, "ioctl(TUNSETOFFLOAD)");
  memcpy(name, ifr.ifr_name, IFNAMSIZ - 1);
  name[IFNAMSIZ - 1] = '\0';
  return result(env, fd, "openTap", 0);
}

NAPI_MODULE_INIT() {
  static const struct { const char *name; napi_callback fn; int value; } props[] = {
    {"unixSocket", js_unix_socket, 0}, {"accept", js_accept, 0},
    {"socketPair", js_socket_pair, 0}, {"recvmsg", js_recvmsg, 0}, {"sendmsg", js_sendmsg, 0},
    {"watch", js_watch, 0}, {"pollCtl", js_poll_ctl, 0}, {"mmap", js_mmap, 0},
    {"munmap", js_munmap, 0}, {"memfdCreate", js_memfd_create, 0},
    {"getSeals", js_get_seals, 0}, {"eventfd", js_eventfd, 0}, {"openTap", js_open_tap, 0},
    {"dupFd", js_dup_fd, 0},
    {"busGuard", js_bus_guard, 0}, {"mappingAddress", js_mapping_address, 0},
    {"READABLE", NULL, UV_READABLE}, {"WRITABLE", NULL, UV_WRITABLE},
    {"DISCONNECT", NULL, UV_DISCONNECT}, {"F_SEAL_SEAL", NULL, F_SEAL_SEAL},
    {"F_SEAL_SHRINK", NULL, F_SEAL_SHRINK}, {"F_SEAL_GROW", NULL, F_SEAL_GROW},
    {"F_SEAL_WRITE", NULL, F_SEAL_WRITE}, {"MAX_FDS", NULL, MAX_FDS},
  };
  napi_value v;
  for (size_t i = 0; i < sizeof props / sizeof props[0]; i++)
    if (!OK(props[i].fn ? napi_create_function(env, props[i].name, NAPI_AUTO_LENGTH, props[i].fn,
                                               NULL, &v)
                        : napi_create_int32(env, props[i].value, &v)) ||
        !OK(napi_set_named_property(env, exports, props[i].name, v)))
      return fail(env);
  return exports;
}

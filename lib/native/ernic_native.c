/*
 * ernic_native: the few Linux syscalls Node.js does not expose (AF_UNIX
 * sockets with SCM_RIGHTS, libuv fd polling, mmap of shared memory, memfd with
 * seals, eventfd, TAP). Everything else is done with Node's fs.
 *
 * The only caller is the TypeScript face (index.ts): it validates arguments
 * and adds the errno name (`code`) to our errors. A bad value that slips
 * through gets a generic TypeError here, never a crash. Syscall failures throw
 * Error("<syscall>: <strerror>") with errno and syscall. EINTR is retried.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <pthread.h>
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
#define CHECK(call) do { if (!OK(call)) return fail(env); } while (0)
#define ARGS(n) napi_value argv[n]; size_t argc = (n); /* missing ones: undefined */ \
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL))
#define I32(i, p) OK(napi_get_value_int32(env, argv[i], (p)))
#define I64(i, p) OK(napi_get_value_int64(env, argv[i], (p)))
#define BOOL(i, p) OK(napi_get_value_bool(env, argv[i], (p)))

/* ------------------------------------------------------ errors, arguments */

/* Throws Error("<syscall>: <detail, or strerror(err)>") with errno, syscall. */
static napi_value throw_errno_msg(napi_env env, const char *syscall, int err, const char *detail) {
  char sbuf[128], msg[256];
  napi_value e, m, n, s;
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
#define throw_errno(env, syscall, err) throw_errno_msg(env, syscall, err, NULL)

/* Throws for syscall with the current errno, after closing fd if >= 0. */
static napi_value close_throw(napi_env env, int fd, const char *syscall) {
  int err = errno;
  if (fd >= 0) close(fd);
  return throw_errno(env, syscall, err);
}

/* A bad argument (only a backstop) or a failed N-API call that did not throw. */
static napi_value fail(napi_env env) {
  bool pending = false;
  napi_is_exception_pending(env, &pending);
  if (!pending) napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "ernic_native: bad argument");
  return NULL;
}

/* r if r >= 0; -1 if it failed with errno `soft` (EAGAIN == EWOULDBLOCK on
 * Linux); otherwise throws for syscall. */
static napi_value result(napi_env env, int64_t r, const char *syscall, int soft) {
  napi_value v;
  if (r < 0 && errno != soft) return throw_errno(env, syscall, errno);
  CHECK(napi_create_int64(env, r < 0 ? -1 : r, &v));
  return v;
}

/* A string without NUL of at most max bytes. cap >= max + 5: N-API truncates
 * at a UTF-8 character boundary, so a truncated copy is still longer than max. */
static bool get_str(napi_env env, napi_value v, char *buf, size_t cap, size_t max) {
  size_t len;
  return OK(napi_get_value_string_utf8(env, v, buf, cap, &len)) && len <= max &&
         strlen(buf) == len;
}

/* argv[0][argv[1], argv[1] + argv[2]) of a Buffer/Uint8Array, bounds checked. */
static bool get_span(napi_env env, napi_value *argv, char **data, size_t *length) {
  size_t blen;
  int64_t off, len;
  if (!OK(napi_get_buffer_info(env, argv[0], (void **)data, &blen)) || !I64(1, &off) ||
      !I64(2, &len) || off < 0 || len < 0 || (uint64_t)off > blen || (uint64_t)len > blen - off)
    return false;
  *data += off;
  *length = (size_t)len;
  return true;
}

/* The elements of an Int32Array of at least min elements. */
static bool get_i32s(napi_env env, napi_value v, size_t min, int32_t **data, size_t *n) {
  napi_typedarray_type t;
  return OK(napi_get_typedarray_info(env, v, &t, n, (void **)data, NULL, NULL)) &&
         t == napi_int32_array && *n >= min;
}

/* ------------------------------------------------------------ unix socket */

static bool unix_addr(napi_env env, napi_value v, struct sockaddr_un *sa) {
  char path[sizeof sa->sun_path + 5];
  *sa = (struct sockaddr_un){.sun_family = AF_UNIX};
  if (!get_str(env, v, path, sizeof path, sizeof sa->sun_path - 1)) return false;
  memcpy(sa->sun_path, path, strlen(path) + 1);
  return true;
}

static napi_value js_listen(napi_env env, napi_callback_info info) {
  ARGS(2);
  struct sockaddr_un sa;
  int backlog, fd;
  if (!unix_addr(env, argv[0], &sa) || !I32(1, &backlog)) return fail(env);
  if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0)
    return close_throw(env, -1, "socket");
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) return close_throw(env, fd, "bind");
  if (listen(fd, backlog) < 0) return close_throw(env, fd, "listen");
  return result(env, fd, "listen", 0);
}

static napi_value js_accept(napi_env env, napi_callback_info info) {
  ARGS(1);
  int fd, c;
  if (!I32(0, &fd)) return fail(env);
  RETRY(c, accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC));
  return result(env, c, "accept4", EAGAIN);
}

/* A blocking connect, then the fd is made non-blocking. */
static napi_value js_connect(napi_env env, napi_callback_info info) {
  ARGS(1);
  struct sockaddr_un sa;
  int fd, r, fl;
  if (!unix_addr(env, argv[0], &sa)) return fail(env);
  if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
    return close_throw(env, -1, "socket");
  RETRY(r, connect(fd, (struct sockaddr *)&sa, sizeof sa));
  if (r < 0 && errno != EISCONN) /* EISCONN: completed after an EINTR */
    return close_throw(env, fd, "connect");
  if ((fl = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
    return close_throw(env, fd, "fcntl");
  return result(env, fd, "connect", 0);
}

/* socketPair(out: Int32Array(2)) */
static napi_value js_socket_pair(napi_env env, napi_callback_info info) {
  ARGS(1);
  int32_t *sv;
  size_t n;
  if (!get_i32s(env, argv[0], 2, &sv, &n)) return fail(env);
  int r = socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv);
  return r < 0 ? close_throw(env, -1, "socketpair") : NULL;
}

typedef union {
  struct cmsghdr align;
  char buf[CMSG_SPACE(sizeof(int) * MAX_FDS)];
} cmsg_buf;

/* recvmsg(fd, buf, offset, length >= 1, fdsOut: Int32Array(>= MAX_FDS + 1)) */
static napi_value js_recvmsg(napi_env env, napi_callback_info info) {
  ARGS(5);
  int fd, rfd;
  char *data;
  size_t length, n_out, count = 0;
  int32_t *out;
  ssize_t r;
  cmsg_buf ctrl; /* on the stack: nothing is allocated per call */
  if (!I32(0, &fd) || !get_span(env, argv + 1, &data, &length) || length == 0 ||
      !get_i32s(env, argv[4], MAX_FDS + 1, &out, &n_out))
    return fail(env);
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
    return throw_errno_msg(env, "recvmsg", EMSGSIZE,
                           "control data truncated (MSG_CTRUNC); received fds were closed");
  }
  out[0] = (int32_t)count;
  return result(env, r, "recvmsg", 0);
}

/* sendmsg(fd, buf, offset, length, fds: Int32Array | null, nfds <= MAX_FDS) */
static napi_value js_sendmsg(napi_env env, napi_callback_info info) {
  ARGS(6);
  int fd;
  uint32_t nfds;
  char *data;
  size_t length, n;
  int32_t *fds;
  ssize_t r;
  cmsg_buf ctrl;
  if (!I32(0, &fd) || !get_span(env, argv + 1, &data, &length) ||
      !OK(napi_get_value_uint32(env, argv[5], &nfds)) || nfds > MAX_FDS ||
      (nfds > 0 && !get_i32s(env, argv[4], nfds, &fds, &n)))
    return fail(env);
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

/* ----------------------------------------------------------------- watch */

/* A watcher_t is wrapped into the Watcher object that index.ts creates. */
enum { W_OPEN, W_CLOSING, W_CLOSED };
typedef struct {
  uv_poll_t poll;
  napi_env env;
  napi_ref cb;   /* the JS callback; deleted when uv_close completes */
  napi_ref self; /* strong ref to the Watcher object until uv_close completes */
  napi_async_context actx;
  int state;
  bool finalized; /* JS object gone (env teardown while open, or failed setup) */
} watcher_t;

static void on_poll(uv_poll_t *h, int status, int events) {
  watcher_t *w = h->data;
  napi_env env = w->env;
  napi_handle_scope scope;
  napi_value self, cb, argv[2], exc;
  bool pending = false;
  if (w->state != W_OPEN || w->finalized || !OK(napi_open_handle_scope(env, &scope))) return;
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
  w->state = W_CLOSED;
  if (w->finalized) { free(w); return; } /* no N-API calls at env teardown */
  bool scoped = OK(napi_open_handle_scope(env, &scope));
  napi_delete_reference(env, w->cb);
  napi_async_destroy(env, w->actx);
  napi_delete_reference(env, w->self); /* last: from now on the finalizer may free w */
  if (scoped) napi_close_handle_scope(env, scope);
}

/* Safe inside the callback: on_poll ignores a watcher that is not open. */
static void watcher_close(watcher_t *w) {
  if (w->state != W_OPEN) return;
  w->state = W_CLOSING;
  uv_poll_stop(&w->poll);
  uv_close((uv_handle_t *)&w->poll, on_closed);
}

static void watcher_finalize(napi_env env, void *data, void *hint) {
  watcher_t *w = data;
  (void)env, (void)hint;
  if (w->state == W_CLOSED) { free(w); return; }
  w->finalized = true; /* on_closed frees it */
  watcher_close(w);
}

/* watch(watcherObject, fd, events, callback) */
static napi_value js_watch(napi_env env, napi_callback_info info) {
  ARGS(4);
  int fd, events, r;
  napi_valuetype vt;
  uv_loop_t *loop;
  napi_value name;
  if (!I32(1, &fd) || !I32(2, &events) || (events & ~ALL_EVENTS) != 0 ||
      !OK(napi_typeof(env, argv[3], &vt)) || vt != napi_function ||
      !OK(napi_get_uv_event_loop(env, &loop)))
    return fail(env);
  watcher_t *w = calloc(1, sizeof *w);
  if (w == NULL) return throw_errno(env, "watch", ENOMEM);
  if ((r = uv_poll_init(loop, &w->poll, fd)) < 0) return free(w), throw_errno(env, "uv_poll_init", -r);
  /* From here on the handle must be released with uv_close (watcher_close). */
  w->poll.data = w;
  w->env = env;
  w->finalized = true; /* until wrapped, on_closed just frees w */
  if (!OK(napi_wrap(env, argv[0], w, watcher_finalize, NULL, NULL))) return watcher_close(w), fail(env);
  w->finalized = false; /* on_closed ignores the refs below that are still NULL */
  if (!OK(napi_create_string_utf8(env, "ernic:watch", NAPI_AUTO_LENGTH, &name)) ||
      !OK(napi_async_init(env, argv[0], name, &w->actx)) ||
      !OK(napi_create_reference(env, argv[3], 1, &w->cb)) ||
      !OK(napi_create_reference(env, argv[0], 1, &w->self)))
    return watcher_close(w), fail(env);
  if (events != 0 && (r = uv_poll_start(&w->poll, events, on_poll)) < 0)
    return watcher_close(w), throw_errno(env, "uv_poll_start", -r);
  return NULL;
}

/* pollCtl(watcherObject, events): events >= 0 updates (0 stops polling), -1 closes. */
static napi_value js_poll_ctl(napi_env env, napi_callback_info info) {
  ARGS(2);
  watcher_t *w;
  int events, r;
  if (!OK(napi_unwrap(env, argv[0], (void **)&w)) || !I32(1, &events) ||
      (events != -1 && (events & ~ALL_EVENTS) != 0))
    return fail(env);
  if (events == -1) return watcher_close(w), NULL; /* idempotent */
  if (w->state != W_OPEN)
    return napi_throw_error(env, "ERR_WATCHER_CLOSED", "Watcher.update: watcher is closed"), NULL;
  r = events == 0 ? uv_poll_stop(&w->poll) : uv_poll_start(&w->poll, events, on_poll);
  return r < 0 ? throw_errno(env, "uv_poll_start", -r) : NULL;
}

/* ------------------------------------------------------------------ mmap */

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

static void mapping_finalize(napi_env env, void *data, void *hint) {
  mapping_t *m = hint, **p;
  (void)env, (void)data;
  pthread_mutex_lock(&maps_lock);
  for (p = &maps; *p != m; p = &(*p)->next) continue;
  *p = m->next;
  pthread_mutex_unlock(&maps_lock);
  if (!m->unmapped) munmap(m->addr, m->len);
  free(m);
}

/* mmap(fd, offset >= 0, length in [1, 2^31], writable) */
static napi_value js_mmap(napi_env env, napi_callback_info info) {
  ARGS(4);
  int fd;
  int64_t off, len;
  bool wr;
  napi_value ab;
  if (!I32(0, &fd) || !I64(1, &off) || !I64(2, &len) || !BOOL(3, &wr) || off < 0 || len < 1 ||
      len > ((int64_t)1 << 31))
    return fail(env);
  void *addr = mmap(NULL, (size_t)len, PROT_READ | (wr ? PROT_WRITE : 0), MAP_SHARED, fd, off);
  if (addr == MAP_FAILED) return close_throw(env, -1, "mmap");
  mapping_t *m = calloc(1, sizeof *m);
  if (m == NULL) return munmap(addr, (size_t)len), throw_errno(env, "mmap", ENOMEM);
  *m = (mapping_t){.addr = addr, .len = (size_t)len};
  if (!OK(napi_create_external_arraybuffer(env, addr, m->len, mapping_finalize, m, &ab)))
    return munmap(addr, m->len), free(m), fail(env);
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
  CHECK(napi_get_arraybuffer_info(env, argv[0], &data, &len));
  pthread_mutex_lock(&maps_lock);
  for (m = maps; m != NULL; m = m->next)
    if (data != NULL && m->addr == data && m->len == len && !m->unmapped) break;
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
  return munmap(data, len) != 0 ? close_throw(env, -1, "munmap") : NULL;
}

/* ----------------------------------------------------- memfd, eventfd, tap */

/* memfdCreate(name of at most 255 bytes, size, seal) */
static napi_value js_memfd_create(napi_env env, napi_callback_info info) {
  ARGS(3);
  char name[255 + 5];
  int64_t size;
  bool seal;
  int fd, r;
  if (!get_str(env, argv[0], name, sizeof name, 255) || !I64(1, &size) || !BOOL(2, &seal))
    return fail(env);
  if ((fd = memfd_create(name, MFD_CLOEXEC | (seal ? MFD_ALLOW_SEALING : 0))) < 0)
    return close_throw(env, -1, "memfd_create");
  RETRY(r, ftruncate(fd, size));
  if (r < 0) return close_throw(env, fd, "ftruncate");
  if (seal && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
    return close_throw(env, fd, "fcntl(F_ADD_SEALS)");
  return result(env, fd, "memfd_create", 0);
}

/* The F_SEAL_* mask, or -1 if the fd does not support sealing (EINVAL). */
static napi_value js_get_seals(napi_env env, napi_callback_info info) {
  ARGS(1);
  int fd;
  if (!I32(0, &fd)) return fail(env);
  return result(env, fcntl(fd, F_GET_SEALS), "fcntl(F_GET_SEALS)", EINVAL);
}

static napi_value js_eventfd(napi_env env, napi_callback_info info) {
  ARGS(2);
  uint32_t init;
  bool nonblock;
  if (!OK(napi_get_value_uint32(env, argv[0], &init)) || !BOOL(1, &nonblock)) return fail(env);
  return result(env, eventfd(init, EFD_CLOEXEC | (nonblock ? EFD_NONBLOCK : 0)), "eventfd2", 0);
}

/* openTap(name: Buffer of >= IFNAMSIZ bytes, NUL-terminated; gets the actual name) */
static napi_value js_open_tap(napi_env env, napi_callback_info info) {
  ARGS(1);
  char *name;
  size_t len;
  int fd;
  struct ifreq ifr = {.ifr_flags = IFF_TAP | IFF_NO_PI};
  if (!OK(napi_get_buffer_info(env, argv[0], (void **)&name, &len)) || len < IFNAMSIZ)
    return fail(env);
  memcpy(ifr.ifr_name, name, IFNAMSIZ - 1);
  if ((fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC)) < 0)
    return close_throw(env, -1, "open(/dev/net/tun)");
  if (ioctl(fd, TUNSETIFF, &ifr) < 0) return close_throw(env, fd, "ioctl(TUNSETIFF)");
  memcpy(name, ifr.ifr_name, IFNAMSIZ - 1);
  name[IFNAMSIZ - 1] = '\0';
  return result(env, fd, "openTap", 0);
}

/* ------------------------------------------------------------------ init */

NAPI_MODULE_INIT() {
  static const struct { const char *name; napi_callback cb; } fns[] = {
    {"listen", js_listen}, {"accept", js_accept}, {"connect", js_connect},
    {"socketPair", js_socket_pair}, {"recvmsg", js_recvmsg}, {"sendmsg", js_sendmsg},
    {"watch", js_watch}, {"pollCtl", js_poll_ctl}, {"mmap", js_mmap}, {"munmap", js_munmap},
    {"memfdCreate", js_memfd_create}, {"getSeals", js_get_seals}, {"eventfd", js_eventfd},
    {"openTap", js_open_tap},
  };
  static const struct { const char *name; int v; } consts[] = {
    {"READABLE", UV_READABLE}, {"WRITABLE", UV_WRITABLE}, {"DISCONNECT", UV_DISCONNECT},
    {"F_SEAL_SEAL", F_SEAL_SEAL}, {"F_SEAL_SHRINK", F_SEAL_SHRINK},
    {"F_SEAL_GROW", F_SEAL_GROW}, {"F_SEAL_WRITE", F_SEAL_WRITE}, {"MAX_FDS", MAX_FDS},
  };
  napi_value v;
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
    if (!OK(napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].cb, NULL, &v)) ||
        !OK(napi_set_named_property(env, exports, fns[i].name, v)))
      return fail(env);
  for (size_t i = 0; i < sizeof consts / sizeof consts[0]; i++)
    if (!OK(napi_create_int32(env, consts[i].v, &v)) ||
        !OK(napi_set_named_property(env, exports, consts[i].name, v)))
      return fail(env);
  return exports;
}

/*
 * ernic_native: the few Linux syscalls Node.js does not expose.
 *
 * AF_UNIX sockets with SCM_RIGHTS, libuv fd polling, mmap/munmap of shared
 * memory into external ArrayBuffers, memfd + seals, eventfd and TAP devices.
 * Everything else (close, read, write, fstat, ...) is done with Node's fs.
 *
 * Conventions:
 *  - syscall failures throw an Error with message "<syscall>: <strerror>" and
 *    properties code ('EBADF', ...), errno (positive number), syscall.
 *  - bad argument types throw TypeError, bad argument values RangeError.
 *  - EINTR is always retried; EAGAIN is reported as -1 where documented.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <net/if.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
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

#include <node_api.h>
#include <uv.h>

#define MAX_FDS 253 /* SCM_MAX_FD in the kernel */
#define FDS_OUT_MIN (MAX_FDS + 1)
#define MAX_SAFE_INT 9007199254740991.0
#define MAX_MAP_LEN 2147483648.0 /* 2^31 */

/* ---------------------------------------------------------------- errors */

static const char *errno_name(int e) {
#define E(x) case x: return #x;
  switch (e) {
    E(EPERM) E(ENOENT) E(ESRCH) E(EINTR) E(EIO) E(ENXIO) E(E2BIG) E(ENOEXEC)
    E(EBADF) E(ECHILD) E(EAGAIN) E(ENOMEM) E(EACCES) E(EFAULT) E(EBUSY)
    E(EEXIST) E(EXDEV) E(ENODEV) E(ENOTDIR) E(EISDIR) E(EINVAL) E(ENFILE)
    E(EMFILE) E(ENOTTY) E(ETXTBSY) E(EFBIG) E(ENOSPC) E(ESPIPE) E(EROFS)
    E(EMLINK) E(EPIPE) E(EDOM) E(ERANGE) E(EDEADLK) E(ENAMETOOLONG) E(ENOLCK)
    E(ENOSYS) E(ENOTEMPTY) E(ELOOP) E(ENOMSG) E(EIDRM) E(ENODATA) E(ETIME)
    E(ENOLINK) E(EPROTO) E(EBADMSG) E(EOVERFLOW) E(EILSEQ) E(EUSERS)
    E(ENOTSOCK) E(EDESTADDRREQ) E(EMSGSIZE) E(EPROTOTYPE) E(ENOPROTOOPT)
    E(EPROTONOSUPPORT) E(ESOCKTNOSUPPORT) E(EOPNOTSUPP) E(EPFNOSUPPORT)
    E(EAFNOSUPPORT) E(EADDRINUSE) E(EADDRNOTAVAIL) E(ENETDOWN) E(ENETUNREACH)
    E(ENETRESET) E(ECONNABORTED) E(ECONNRESET) E(ENOBUFS) E(EISCONN)
    E(ENOTCONN) E(ESHUTDOWN) E(ETIMEDOUT) E(ECONNREFUSED) E(EHOSTDOWN)
    E(EHOSTUNREACH) E(EALREADY) E(EINPROGRESS) E(ESTALE) E(EDQUOT)
    E(ECANCELED) E(EOWNERDEAD) E(ENOTRECOVERABLE) E(ENOMEDIUM)
    E(EMEDIUMTYPE) E(ERFKILL) E(EHWPOISON)
    default: return NULL;
  }
#undef E
}

/* Throws Error("<syscall>: <detail>") with code/errno/syscall. */
static void throw_errno_msg(napi_env env, const char *syscall, int err,
                            const char *detail) {
  char sbuf[128], msg[256], cbuf[24];
  const char *name = errno_name(err);
  if (name == NULL) {
    snprintf(cbuf, sizeof cbuf, "E%d", err);
    name = cbuf;
  }
  if (detail == NULL) detail = strerror_r(err, sbuf, sizeof sbuf);
  snprintf(msg, sizeof msg, "%s: %s", syscall, detail);
  napi_value code, message, error, num, sc;
  if (napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &code) != napi_ok ||
      napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &message) != napi_ok ||
      napi_create_error(env, code, message, &error) != napi_ok ||
      napi_create_int32(env, err, &num) != napi_ok ||
      napi_set_named_property(env, error, "errno", num) != napi_ok ||
      napi_create_string_utf8(env, syscall, NAPI_AUTO_LENGTH, &sc) != napi_ok ||
      napi_set_named_property(env, error, "syscall", sc) != napi_ok) {
    napi_throw_error(env, name, msg);
    return;
  }
  napi_throw(env, error);
}

static void throw_errno(napi_env env, const char *syscall, int err) {
  throw_errno_msg(env, syscall, err, NULL);
}

static void throw_type(napi_env env, const char *fn, const char *what) {
  char msg[200];
  snprintf(msg, sizeof msg, "%s: %s", fn, what);
  napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", msg);
}

static void throw_range(napi_env env, const char *fn, const char *what) {
  char msg[200];
  snprintf(msg, sizeof msg, "%s: %s", fn, what);
  napi_throw_range_error(env, "ERR_OUT_OF_RANGE", msg);
}

/* Returns NULL after a failed N-API call that did not throw by itself. */
static napi_value napi_failed(napi_env env, const char *fn) {
  bool pending = false;
  napi_is_exception_pending(env, &pending);
  if (!pending) {
    char msg[200];
    snprintf(msg, sizeof msg, "%s: internal N-API call failed", fn);
    napi_throw_error(env, NULL, msg);
  }
  return NULL;
}
#define NAPI_CALL(fn, call) \
  do { if ((call) != napi_ok) return napi_failed(env, fn); } while (0)

/* ------------------------------------------------------------- arguments */

static napi_value get_args(napi_env env, napi_callback_info info, size_t n,
                           napi_value *argv, const char *fn) {
  size_t argc = n;
  NAPI_CALL(fn, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  napi_value undef;
  NAPI_CALL(fn, napi_get_undefined(env, &undef));
  for (size_t i = argc; i < n; i++) argv[i] = undef;
  return undef;
}
#define ARGS(fn, n)                                                   \
  napi_value argv[(n) > 0 ? (n) : 1];                                  \
  if (get_args(env, info, (n), argv, (fn)) == NULL) return NULL

/* An integer number in [min, max]. */
static bool arg_int(napi_env env, napi_value v, const char *fn,
                    const char *name, double min, double max, double *out) {
  double d;
  char what[128];
  if (napi_get_value_double(env, v, &d) != napi_ok || d != trunc(d) ||
      !isfinite(d)) {
    snprintf(what, sizeof what, "%s must be an integer number", name);
    throw_type(env, fn, what);
    return false;
  }
  if (d < min || d > max) {
    snprintf(what, sizeof what, "%s is out of range [%.0f, %.0f]", name, min, max);
    throw_range(env, fn, what);
    return false;
  }
  *out = d;
  return true;
}

static bool arg_fd(napi_env env, napi_value v, const char *fn, int *fd) {
  double d;
  if (!arg_int(env, v, fn, "fd", 0, INT32_MAX, &d)) return false;
  *fd = (int)d;
  return true;
}

static bool arg_bool(napi_env env, napi_value v, const char *fn,
                     const char *name, bool *out) {
  if (napi_get_value_bool(env, v, out) != napi_ok) {
    char what[128];
    snprintf(what, sizeof what, "%s must be a boolean", name);
    throw_type(env, fn, what);
    return false;
  }
  return true;
}

/* A string without NUL bytes copied into buf (cap bytes incl. terminator).
 * *len receives the full UTF-8 length even when it does not fit (then
 * returns true with *len >= cap and buf unspecified: caller checks). */
static bool arg_str(napi_env env, napi_value v, const char *fn,
                    const char *name, char *buf, size_t cap, size_t *len) {
  char what[128];
  if (napi_get_value_string_utf8(env, v, NULL, 0, len) != napi_ok) {
    snprintf(what, sizeof what, "%s must be a string", name);
    throw_type(env, fn, what);
    return false;
  }
  if (*len >= cap) return true;
  size_t copied;
  if (napi_get_value_string_utf8(env, v, buf, cap, &copied) != napi_ok) {
    napi_failed(env, fn);
    return false;
  }
  if (strlen(buf) != copied) {
    snprintf(what, sizeof what, "%s must not contain NUL characters", name);
    throw_type(env, fn, what);
    return false;
  }
  return true;
}

/* buf[offset, offset + length) of a Buffer/Uint8Array. */
static bool arg_span(napi_env env, napi_value *argv, const char *fn,
                     size_t min_len, char **data, size_t *length) {
  void *base;
  size_t blen;
  double off, len;
  if (napi_get_buffer_info(env, argv[0], &base, &blen) != napi_ok) {
    throw_type(env, fn, "buf must be a Buffer or Uint8Array");
    return false;
  }
  if (!arg_int(env, argv[1], fn, "offset", 0, (double)blen, &off)) return false;
  if (!arg_int(env, argv[2], fn, "length", (double)min_len,
               (double)blen - off, &len))
    return false;
  *data = (char *)base + (size_t)off;
  *length = (size_t)len;
  return true;
}

static napi_value make_int(napi_env env, int64_t v, const char *fn) {
  napi_value r;
  NAPI_CALL(fn, napi_create_int64(env, v, &r));
  return r;
}

/* ------------------------------------------------------------ unix socket */

static bool unix_addr(napi_env env, napi_value v, const char *fn,
                      const char *syscall, struct sockaddr_un *sa) {
  size_t len;
  memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  if (!arg_str(env, v, fn, "path", sa->sun_path, sizeof sa->sun_path, &len))
    return false;
  if (len >= sizeof sa->sun_path) {
    char detail[96];
    snprintf(detail, sizeof detail, "socket path is %zu bytes, at most %zu allowed",
             len, sizeof sa->sun_path - 1);
    throw_errno_msg(env, syscall, ENAMETOOLONG, detail);
    return false;
  }
  if (len == 0) {
    throw_type(env, fn, "path must be a non-empty string");
    return false;
  }
  return true;
}

static napi_value js_listen(napi_env env, napi_callback_info info) {
  ARGS("listen", 2);
  struct sockaddr_un sa;
  double backlog;
  if (!unix_addr(env, argv[0], "listen", "bind", &sa)) return NULL;
  if (!arg_int(env, argv[1], "listen", "backlog", 0, INT32_MAX, &backlog))
    return NULL;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return throw_errno(env, "socket", errno), NULL;
  const char *sc = "bind";
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
    sc = "listen";
    if (listen(fd, (int)backlog) == 0) return make_int(env, fd, "listen");
  }
  int err = errno;
  close(fd);
  throw_errno(env, sc, err);
  return NULL;
}

static napi_value js_accept(napi_env env, napi_callback_info info) {
  ARGS("accept", 1);
  int fd, c;
  if (!arg_fd(env, argv[0], "accept", &fd)) return NULL;
  do c = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  while (c < 0 && errno == EINTR);
  if (c < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return make_int(env, -1, "accept");
    return throw_errno(env, "accept4", errno), NULL;
  }
  return make_int(env, c, "accept");
}

static napi_value js_connect(napi_env env, napi_callback_info info) {
  ARGS("connect", 1);
  struct sockaddr_un sa;
  if (!unix_addr(env, argv[0], "connect", "connect", &sa)) return NULL;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return throw_errno(env, "socket", errno), NULL;
  const char *sc = "connect";
  int r;
  do r = connect(fd, (struct sockaddr *)&sa, sizeof sa);
  while (r < 0 && errno == EINTR);
  if (r < 0 && errno == EISCONN) r = 0; /* completed after an EINTR */
  if (r == 0) {
    sc = "fcntl";
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0)
      return make_int(env, fd, "connect");
  }
  int err = errno;
  close(fd);
  throw_errno(env, sc, err);
  return NULL;
}

static napi_value js_socket_pair(napi_env env, napi_callback_info info) {
  (void)info;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
    return throw_errno(env, "socketpair", errno), NULL;
  napi_value arr, a, b;
  if (napi_create_array_with_length(env, 2, &arr) != napi_ok ||
      napi_create_int32(env, sv[0], &a) != napi_ok ||
      napi_create_int32(env, sv[1], &b) != napi_ok ||
      napi_set_element(env, arr, 0, a) != napi_ok ||
      napi_set_element(env, arr, 1, b) != napi_ok) {
    close(sv[0]);
    close(sv[1]);
    return napi_failed(env, "socketPair");
  }
  return arr;
}

typedef union {
  struct cmsghdr align;
  char buf[CMSG_SPACE(sizeof(int) * MAX_FDS)];
} cmsg_buf;

static napi_value js_recvmsg(napi_env env, napi_callback_info info) {
  ARGS("recvmsg", 5);
  int fd;
  char *data;
  size_t length, n_out;
  napi_typedarray_type tt;
  void *out_data;
  if (!arg_fd(env, argv[0], "recvmsg", &fd)) return NULL;
  if (!arg_span(env, argv + 1, "recvmsg", 1, &data, &length)) return NULL;
  if (napi_get_typedarray_info(env, argv[4], &tt, &n_out, &out_data, NULL,
                               NULL) != napi_ok ||
      tt != napi_int32_array || n_out < FDS_OUT_MIN)
    return throw_type(env, "recvmsg", "fdsOut must be an Int32Array of length >= 254"), NULL;
  int32_t *fds_out = out_data;
  fds_out[0] = 0;

  cmsg_buf ctrl;
  struct iovec iov = {.iov_base = data, .iov_len = length};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1,
                       .msg_control = ctrl.buf, .msg_controllen = sizeof ctrl.buf};
  ssize_t r;
  do r = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  while (r < 0 && errno == EINTR);
  if (r < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return make_int(env, -1, "recvmsg");
    return throw_errno(env, "recvmsg", errno), NULL;
  }

  size_t count = 0;
  bool overflow = false;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    const unsigned char *p = CMSG_DATA(c);
    for (size_t i = 0; i < n; i++) {
      int rfd;
      memcpy(&rfd, p + i * sizeof(int), sizeof(int));
      if (count + 1 < n_out) fds_out[++count] = rfd;
      else { close(rfd); overflow = true; }
    }
  }
  if ((msg.msg_flags & MSG_CTRUNC) || overflow) {
    for (size_t i = 1; i <= count; i++) close(fds_out[i]);
    fds_out[0] = 0;
    throw_errno_msg(env, "recvmsg", EMSGSIZE,
                    "control data truncated (MSG_CTRUNC); received fds were closed");
    return NULL;
  }
  fds_out[0] = (int32_t)count;
  return make_int(env, r, "recvmsg");
}

static napi_value js_sendmsg(napi_env env, napi_callback_info info) {
  ARGS("sendmsg", 5);
  int fd;
  char *data;
  size_t length;
  if (!arg_fd(env, argv[0], "sendmsg", &fd)) return NULL;
  if (!arg_span(env, argv + 1, "sendmsg", 0, &data, &length)) return NULL;

  cmsg_buf ctrl;
  int fds[MAX_FDS];
  size_t nfds = 0;
  napi_valuetype vt;
  NAPI_CALL("sendmsg", napi_typeof(env, argv[4], &vt));
  if (vt == napi_object) {
    napi_typedarray_type tt;
    size_t n;
    void *p;
    bool is_ta;
    NAPI_CALL("sendmsg", napi_is_typedarray(env, argv[4], &is_ta));
    if (is_ta && napi_get_typedarray_info(env, argv[4], &tt, &n, &p, NULL, NULL) == napi_ok &&
        tt == napi_int32_array) {
      if (n > MAX_FDS) return throw_range(env, "sendmsg", "at most 253 fds per message"), NULL;
      const int32_t *src = p;
      for (size_t i = 0; i < n; i++) {
        if (src[i] < 0) return throw_range(env, "sendmsg", "fds must be non-negative"), NULL;
        fds[i] = src[i];
      }
      nfds = n;
    } else {
      napi_value lv, ev;
      double len, d;
      NAPI_CALL("sendmsg", napi_get_named_property(env, argv[4], "length", &lv));
      if (!arg_int(env, lv, "sendmsg", "fds.length", 0, MAX_FDS, &len)) return NULL;
      for (uint32_t i = 0; i < (uint32_t)len; i++) {
        NAPI_CALL("sendmsg", napi_get_element(env, argv[4], i, &ev));
        if (!arg_int(env, ev, "sendmsg", "fds[i]", 0, INT32_MAX, &d)) return NULL;
        fds[i] = (int)d;
      }
      nfds = (size_t)len;
    }
  } else if (vt != napi_null && vt != napi_undefined) {
    return throw_type(env, "sendmsg", "fds must be an array-like of numbers or null"), NULL;
  }

  struct iovec iov = {.iov_base = data, .iov_len = length};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
  if (nfds > 0) {
    if (length == 0)
      return throw_range(env, "sendmsg", "fds need at least one byte of data"), NULL;
    memset(ctrl.buf, 0, sizeof ctrl.buf);
    msg.msg_control = ctrl.buf;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
  }
  ssize_t r;
  do r = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  while (r < 0 && errno == EINTR);
  if (r < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return make_int(env, -1, "sendmsg");
    return throw_errno(env, "sendmsg", errno), NULL;
  }
  return make_int(env, r, "sendmsg");
}

/* ----------------------------------------------------------------- watch */

enum { W_OPEN, W_CLOSING, W_CLOSED };

typedef struct {
  uv_poll_t poll;
  napi_env env;
  napi_ref cb;   /* the JS callback; deleted when uv_close completes */
  napi_ref self; /* strong ref to the Watcher object until uv_close completes */
  napi_async_context actx;
  int state;
  bool finalized; /* JS object collected (only possible at env teardown while open) */
} watcher_t;

typedef struct {
  napi_ref watcher_ctor;
} addon_data;

static void on_poll(uv_poll_t *h, int status, int events) {
  watcher_t *w = h->data;
  if (w->state != W_OPEN || w->finalized) return;
  napi_env env = w->env;
  napi_handle_scope scope;
  if (napi_open_handle_scope(env, &scope) != napi_ok) return;
  napi_value self, cb, argv[2], exc;
  if (napi_get_reference_value(env, w->self, &self) == napi_ok &&
      napi_get_reference_value(env, w->cb, &cb) == napi_ok &&
      napi_create_int32(env, status, &argv[0]) == napi_ok &&
      napi_create_int32(env, events, &argv[1]) == napi_ok) {
    napi_make_callback(env, w->actx, self, cb, 2, argv, NULL);
  }
  /* Nobody up the stack catches this: report it as an uncaught exception. */
  bool pending = false;
  if (napi_is_exception_pending(env, &pending) == napi_ok && pending &&
      napi_get_and_clear_last_exception(env, &exc) == napi_ok)
    napi_fatal_exception(env, exc);
  napi_close_handle_scope(env, scope);
}

static void on_closed(uv_handle_t *h) {
  watcher_t *w = h->data;
  w->state = W_CLOSED;
  if (w->finalized) { free(w); return; } /* env teardown: no N-API calls */
  napi_env env = w->env;
  napi_handle_scope scope;
  bool scoped = napi_open_handle_scope(env, &scope) == napi_ok;
  napi_delete_reference(env, w->cb);
  w->cb = NULL;
  napi_async_destroy(env, w->actx);
  w->actx = NULL;
  napi_ref self = w->self;
  w->self = NULL;
  napi_delete_reference(env, self); /* may allow the finalizer to run later */
  if (scoped) napi_close_handle_scope(env, scope);
}

static void watcher_close(watcher_t *w) {
  if (w->state != W_OPEN) return;
  w->state = W_CLOSING;
  uv_poll_stop(&w->poll);
  uv_close((uv_handle_t *)&w->poll, on_closed);
}

static void watcher_finalize(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  watcher_t *w = data;
  if (w->state == W_CLOSED) { free(w); return; }
  w->finalized = true; /* on_closed frees it */
  watcher_close(w);
}

static napi_value watcher_ctor(napi_env env, napi_callback_info info) {
  napi_value self;
  NAPI_CALL("Watcher", napi_get_cb_info(env, info, NULL, NULL, &self, NULL));
  return self;
}

static watcher_t *watcher_this(napi_env env, napi_callback_info info,
                               size_t n, napi_value *argv, const char *fn) {
  napi_value self;
  size_t argc = n;
  void *w = NULL;
  if (napi_get_cb_info(env, info, &argc, argv, &self, NULL) != napi_ok) {
    napi_failed(env, fn);
    return NULL;
  }
  if (argc < n) napi_get_undefined(env, &argv[0]);
  if (napi_unwrap(env, self, &w) != napi_ok || w == NULL) {
    throw_type(env, fn, "this is not a Watcher");
    return NULL;
  }
  return w;
}

static bool arg_events(napi_env env, napi_value v, const char *fn, int *events) {
  double d;
  if (!arg_int(env, v, fn, "events", 0, UV_READABLE | UV_WRITABLE | UV_DISCONNECT, &d))
    return false;
  *events = (int)d;
  return true;
}

static napi_value watcher_update(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  int events;
  watcher_t *w = watcher_this(env, info, 1, argv, "Watcher.update");
  if (w == NULL) return NULL;
  if (!arg_events(env, argv[0], "Watcher.update", &events)) return NULL;
  if (w->state != W_OPEN) {
    napi_throw_error(env, "ERR_WATCHER_CLOSED", "Watcher.update: watcher is closed");
    return NULL;
  }
  int r = events == 0 ? uv_poll_stop(&w->poll) : uv_poll_start(&w->poll, events, on_poll);
  if (r < 0) return throw_errno(env, "uv_poll_start", -r), NULL;
  return NULL;
}

static napi_value watcher_close_js(napi_env env, napi_callback_info info) {
  watcher_t *w = watcher_this(env, info, 0, NULL, "Watcher.close");
  if (w == NULL) return NULL;
  watcher_close(w);
  return NULL;
}

static napi_value js_watch(napi_env env, napi_callback_info info) {
  ARGS("watch", 3);
  int fd, events;
  napi_valuetype vt;
  addon_data *ad;
  if (!arg_fd(env, argv[0], "watch", &fd)) return NULL;
  if (!arg_events(env, argv[1], "watch", &events)) return NULL;
  NAPI_CALL("watch", napi_typeof(env, argv[2], &vt));
  if (vt != napi_function) return throw_type(env, "watch", "callback must be a function"), NULL;
  NAPI_CALL("watch", napi_get_instance_data(env, (void **)&ad));

  uv_loop_t *loop;
  napi_value ctor, obj, name;
  NAPI_CALL("watch", napi_get_uv_event_loop(env, &loop));
  NAPI_CALL("watch", napi_get_reference_value(env, ad->watcher_ctor, &ctor));
  NAPI_CALL("watch", napi_new_instance(env, ctor, 0, NULL, &obj));

  watcher_t *w = calloc(1, sizeof *w);
  if (w == NULL) return throw_errno(env, "watch", ENOMEM), NULL;
  w->env = env;
  int r = uv_poll_init(loop, &w->poll, fd);
  if (r < 0) {
    free(w);
    return throw_errno(env, "uv_poll_init", -r), NULL;
  }
  w->poll.data = w;
  /* From here on the handle must be released with uv_close. */
  if (napi_create_string_utf8(env, "ernic:watch", NAPI_AUTO_LENGTH, &name) != napi_ok ||
      napi_async_init(env, obj, name, &w->actx) != napi_ok ||
      napi_create_reference(env, argv[2], 1, &w->cb) != napi_ok ||
      napi_create_reference(env, obj, 1, &w->self) != napi_ok ||
      napi_wrap(env, obj, w, watcher_finalize, NULL, NULL) != napi_ok) {
    if (w->self) napi_delete_reference(env, w->self);
    if (w->cb) napi_delete_reference(env, w->cb);
    if (w->actx) napi_async_destroy(env, w->actx);
    w->finalized = true; /* free without N-API in on_closed */
    uv_close((uv_handle_t *)&w->poll, on_closed);
    return napi_failed(env, "watch");
  }
  if (events != 0 && (r = uv_poll_start(&w->poll, events, on_poll)) < 0) {
    watcher_close(w);
    return throw_errno(env, "uv_poll_start", -r), NULL;
  }
  return obj;
}

/* ------------------------------------------------------------------ mmap */

typedef struct mapping {
  struct mapping *prev, *next;
  void *addr;
  size_t len;
  bool unmapped;
} mapping_t;

/* Process-wide registry (worker threads share it), guarded by a mutex. */
static pthread_mutex_t maps_lock = PTHREAD_MUTEX_INITIALIZER;
static mapping_t maps_head = {&maps_head, &maps_head, NULL, 0, true};

static void mapping_finalize(napi_env env, void *data, void *hint) {
  (void)env;
  (void)data;
  mapping_t *m = hint;
  pthread_mutex_lock(&maps_lock);
  m->prev->next = m->next;
  m->next->prev = m->prev;
  bool unmapped = m->unmapped;
  pthread_mutex_unlock(&maps_lock);
  if (!unmapped) munmap(m->addr, m->len);
  free(m);
}

static napi_value js_mmap(napi_env env, napi_callback_info info) {
  ARGS("mmap", 4);
  int fd;
  double off, len;
  bool writable;
  if (!arg_fd(env, argv[0], "mmap", &fd)) return NULL;
  if (!arg_int(env, argv[1], "mmap", "offset", 0, MAX_SAFE_INT, &off)) return NULL;
  if (!arg_int(env, argv[2], "mmap", "length", 1, MAX_MAP_LEN, &len)) return NULL;
  if (!arg_bool(env, argv[3], "mmap", "writable", &writable)) return NULL;
  mapping_t *m = calloc(1, sizeof *m);
  if (m == NULL) return throw_errno(env, "mmap", ENOMEM), NULL;
  int prot = PROT_READ | (writable ? PROT_WRITE : 0);
  void *addr = mmap(NULL, (size_t)len, prot, MAP_SHARED, fd, (off_t)off);
  if (addr == MAP_FAILED) {
    free(m);
    return throw_errno(env, "mmap", errno), NULL;
  }
  m->addr = addr;
  m->len = (size_t)len;
  napi_value ab;
  if (napi_create_external_arraybuffer(env, addr, m->len, mapping_finalize, m, &ab) != napi_ok) {
    munmap(addr, m->len);
    free(m);
    return napi_failed(env, "mmap");
  }
  pthread_mutex_lock(&maps_lock);
  m->next = maps_head.next;
  m->prev = &maps_head;
  maps_head.next->prev = m;
  maps_head.next = m;
  pthread_mutex_unlock(&maps_lock);
  return ab;
}

static napi_value js_munmap(napi_env env, napi_callback_info info) {
  ARGS("munmap", 1);
  bool is_ab;
  void *data;
  size_t len;
  NAPI_CALL("munmap", napi_is_arraybuffer(env, argv[0], &is_ab));
  if (!is_ab) return throw_type(env, "munmap", "argument must be an ArrayBuffer"), NULL;
  NAPI_CALL("munmap", napi_get_arraybuffer_info(env, argv[0], &data, &len));
  mapping_t *m = NULL;
  pthread_mutex_lock(&maps_lock);
  if (data != NULL) {
    for (mapping_t *p = maps_head.next; p != &maps_head; p = p->next)
      if (p->addr == data && p->len == len && !p->unmapped) { m = p; break; }
  }
  if (m != NULL) m->unmapped = true; /* the finalizer may run during detach */
  pthread_mutex_unlock(&maps_lock);
  if (m == NULL) {
    napi_throw_error(env, "ERR_NOT_MAPPED",
                     "munmap: ArrayBuffer is not a live mapping created by mmap() "
                     "(not ours, or already unmapped)");
    return NULL;
  }
  if (napi_detach_arraybuffer(env, argv[0]) != napi_ok) {
    pthread_mutex_lock(&maps_lock);
    m->unmapped = false;
    pthread_mutex_unlock(&maps_lock);
    return napi_failed(env, "munmap");
  }
  /* m may already be freed here: use only the locals. */
  if (munmap(data, len) != 0) return throw_errno(env, "munmap", errno), NULL;
  return NULL;
}

/* ----------------------------------------------------- memfd and eventfd */

static napi_value js_memfd_create(napi_env env, napi_callback_info info) {
  ARGS("memfdCreate", 3);
  char name[256];
  size_t nlen;
  double size;
  bool seal;
  if (!arg_str(env, argv[0], "memfdCreate", "name", name, sizeof name, &nlen)) return NULL;
  if (nlen >= sizeof name) return throw_errno(env, "memfd_create", ENAMETOOLONG), NULL;
  if (!arg_int(env, argv[1], "memfdCreate", "size", 0, MAX_SAFE_INT, &size)) return NULL;
  if (!arg_bool(env, argv[2], "memfdCreate", "seal", &seal)) return NULL;
  int fd = memfd_create(name, MFD_CLOEXEC | (seal ? MFD_ALLOW_SEALING : 0));
  if (fd < 0) return throw_errno(env, "memfd_create", errno), NULL;
  const char *sc = "ftruncate";
  int r;
  do r = ftruncate(fd, (off_t)size);
  while (r < 0 && errno == EINTR);
  if (r == 0 && seal) {
    sc = "fcntl(F_ADD_SEALS)";
    r = fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  }
  if (r == 0) return make_int(env, fd, "memfdCreate");
  int err = errno;
  close(fd);
  throw_errno(env, sc, err);
  return NULL;
}

static napi_value js_get_seals(napi_env env, napi_callback_info info) {
  ARGS("getSeals", 1);
  int fd;
  if (!arg_fd(env, argv[0], "getSeals", &fd)) return NULL;
  int r = fcntl(fd, F_GET_SEALS);
  if (r < 0) {
    if (errno == EINVAL) return make_int(env, -1, "getSeals");
    return throw_errno(env, "fcntl(F_GET_SEALS)", errno), NULL;
  }
  return make_int(env, r, "getSeals");
}

static napi_value js_eventfd(napi_env env, napi_callback_info info) {
  ARGS("eventfd", 2);
  double init;
  bool nonblock;
  if (!arg_int(env, argv[0], "eventfd", "initval", 0, UINT32_MAX, &init)) return NULL;
  if (!arg_bool(env, argv[1], "eventfd", "nonblock", &nonblock)) return NULL;
  int fd = eventfd((unsigned int)init, EFD_CLOEXEC | (nonblock ? EFD_NONBLOCK : 0));
  if (fd < 0) return throw_errno(env, "eventfd2", errno), NULL;
  return make_int(env, fd, "eventfd");
}

/* ------------------------------------------------------------------- tap */

static napi_value js_open_tap(napi_env env, napi_callback_info info) {
  ARGS("openTap", 1);
  struct ifreq ifr;
  size_t nlen;
  memset(&ifr, 0, sizeof ifr);
  if (!arg_str(env, argv[0], "openTap", "name", ifr.ifr_name, IFNAMSIZ, &nlen)) return NULL;
  if (nlen >= IFNAMSIZ) return throw_errno(env, "ioctl(TUNSETIFF)", ENAMETOOLONG), NULL;
  int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return throw_errno(env, "open(/dev/net/tun)", errno), NULL;
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
  if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
    int err = errno;
    close(fd);
    return throw_errno(env, "ioctl(TUNSETIFF)", err), NULL;
  }
  ifr.ifr_name[IFNAMSIZ - 1] = '\0';
  napi_value obj, vfd, vname;
  if (napi_create_object(env, &obj) != napi_ok ||
      napi_create_int32(env, fd, &vfd) != napi_ok ||
      napi_create_string_utf8(env, ifr.ifr_name, NAPI_AUTO_LENGTH, &vname) != napi_ok ||
      napi_set_named_property(env, obj, "fd", vfd) != napi_ok ||
      napi_set_named_property(env, obj, "name", vname) != napi_ok) {
    close(fd);
    return napi_failed(env, "openTap");
  }
  return obj;
}

/* ------------------------------------------------------------------ init */

static void addon_data_finalize(napi_env env, void *data, void *hint) {
  (void)hint;
  addon_data *ad = data;
  napi_delete_reference(env, ad->watcher_ctor);
  free(ad);
}

static bool set_const(napi_env env, napi_value exports, const char *name, int v) {
  napi_value n;
  return napi_create_int32(env, v, &n) == napi_ok &&
         napi_set_named_property(env, exports, name, n) == napi_ok;
}

NAPI_MODULE_INIT() {
  static const struct { const char *name; napi_callback cb; } fns[] = {
    {"listen", js_listen},           {"accept", js_accept},
    {"connect", js_connect},         {"socketPair", js_socket_pair},
    {"recvmsg", js_recvmsg},         {"sendmsg", js_sendmsg},
    {"watch", js_watch},             {"mmap", js_mmap},
    {"munmap", js_munmap},           {"memfdCreate", js_memfd_create},
    {"getSeals", js_get_seals},      {"eventfd", js_eventfd},
    {"openTap", js_open_tap},
  };
  static const struct { const char *name; int v; } consts[] = {
    {"READABLE", UV_READABLE},         {"WRITABLE", UV_WRITABLE},
    {"DISCONNECT", UV_DISCONNECT},     {"F_SEAL_SEAL", F_SEAL_SEAL},
    {"F_SEAL_SHRINK", F_SEAL_SHRINK},  {"F_SEAL_GROW", F_SEAL_GROW},
    {"F_SEAL_WRITE", F_SEAL_WRITE},    {"MAX_FDS", MAX_FDS},
  };
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
    napi_value f;
    NAPI_CALL("init", napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH,
                                           fns[i].cb, NULL, &f));
    NAPI_CALL("init", napi_set_named_property(env, exports, fns[i].name, f));
  }
  for (size_t i = 0; i < sizeof consts / sizeof consts[0]; i++)
    if (!set_const(env, exports, consts[i].name, consts[i].v)) return napi_failed(env, "init");

  napi_property_descriptor methods[] = {
    {"update", NULL, watcher_update, NULL, NULL, NULL, napi_default_method, NULL},
    {"close", NULL, watcher_close_js, NULL, NULL, NULL, napi_default_method, NULL},
  };
  napi_value ctor;
  NAPI_CALL("init", napi_define_class(env, "Watcher", NAPI_AUTO_LENGTH, watcher_ctor,
                                      NULL, 2, methods, &ctor));
  addon_data *ad = calloc(1, sizeof *ad);
  if (ad == NULL) return throw_errno(env, "init", ENOMEM), NULL;
  if (napi_create_reference(env, ctor, 1, &ad->watcher_ctor) != napi_ok ||
      napi_set_instance_data(env, ad, addon_data_finalize, NULL) != napi_ok) {
    free(ad);
    return napi_failed(env, "init");
  }
  return exports;
}

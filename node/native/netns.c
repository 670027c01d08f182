/*
 * setns(2) for the CNI plugin. A netlink socket belongs to the network namespace of the thread that opened
 * it, and no npm package exposes setns, so the plugin switches the main thread into the pod's netns only for
 * the socket() call and switches straight back. CLONE_NEWNET is per-thread, so libuv's other threads are never
 * affected. Also flock(2) for the per-attachment lock and SO_PEERCRED for the agent socket, which Node lacks.
 * Node-API only: the .node file works across Node versions without a rebuild.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <sched.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <node_api.h>

static napi_value throw_errno(napi_env env, const char *syscall, int err) {
  char message[160];
  snprintf(message, sizeof message, "%s failed: %s", syscall, strerror(err));
  napi_value code, msg, error, errnum;
  napi_create_string_utf8(env, err == EINVAL ? "EINVAL" : err == EPERM ? "EPERM" : err == EBADF ? "EBADF" : "ESYSCALL",
                          NAPI_AUTO_LENGTH, &code);
  napi_create_string_utf8(env, message, NAPI_AUTO_LENGTH, &msg);
  napi_create_error(env, code, msg, &error);
  napi_create_int32(env, err, &errnum);
  napi_set_named_property(env, error, "errno", errnum);
  napi_throw(env, error);
  return NULL;
}

/* setns(fd): joins the network namespace behind fd (the calling thread only). */
static napi_value js_setns(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1) {
    napi_throw_type_error(env, NULL, "setns(fd) needs a file descriptor");
    return NULL;
  }
  int32_t fd;
  if (napi_get_value_int32(env, argv[0], &fd) != napi_ok || fd < 0) {
    napi_throw_type_error(env, NULL, "setns(fd): fd must be a non-negative integer");
    return NULL;
  }
  if (setns(fd, CLONE_NEWNET) != 0) return throw_errno(env, "setns", errno);
  return NULL;
}

static int fd_arg(napi_env env, napi_callback_info info, const char *usage) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t fd = -1;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 ||
      napi_get_value_int32(env, argv[0], &fd) != napi_ok || fd < 0) {
    napi_throw_type_error(env, NULL, usage);
    return -1;
  }
  return fd;
}

/* tryLock(fd): flock(LOCK_EX | LOCK_NB); false when another open file description holds it. Node has no flock,
   and a blocking one would stall the event loop, so callers poll. The kernel drops it when the last fd closes. */
static napi_value js_try_lock(napi_env env, napi_callback_info info) {
  int fd = fd_arg(env, info, "tryLock(fd) needs a file descriptor");
  if (fd < 0) return NULL;
  int r;
  do r = flock(fd, LOCK_EX | LOCK_NB);
  while (r != 0 && errno == EINTR);
  if (r != 0 && errno != EWOULDBLOCK) return throw_errno(env, "flock", errno);
  napi_value out;
  napi_get_boolean(env, r == 0, &out);
  return out;
}

/* peerUid(fd): the uid of the process that connected a unix socket (SO_PEERCRED, taken at connect time). */
static napi_value js_peer_uid(napi_env env, napi_callback_info info) {
  int fd = fd_arg(env, info, "peerUid(fd) needs a socket's file descriptor");
  if (fd < 0) return NULL;
  struct ucred cred;
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return throw_errno(env, "getsockopt(SO_PEERCRED)", errno);
  napi_value out;
  napi_create_int64(env, (int64_t)cred.uid, &out);
  return out;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "setns", NAPI_AUTO_LENGTH, js_setns, NULL, &fn);
  napi_set_named_property(env, exports, "setns", fn);
  napi_create_function(env, "tryLock", NAPI_AUTO_LENGTH, js_try_lock, NULL, &fn);
  napi_set_named_property(env, exports, "tryLock", fn);
  napi_create_function(env, "peerUid", NAPI_AUTO_LENGTH, js_peer_uid, NULL, &fn);
  napi_set_named_property(env, exports, "peerUid", fn);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)

/*
 * setns(2) for the CNI plugin. A netlink socket belongs to the network namespace of the thread that opened
 * it, and no npm package exposes setns, so the plugin switches the main thread into the pod's netns only for
 * the socket() call and switches straight back. CLONE_NEWNET is per-thread, so libuv's other threads are never
 * affected. Node-API only: the .node file works across Node versions without a rebuild.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <sched.h>
#include <string.h>
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

static napi_value init(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "setns", NAPI_AUTO_LENGTH, js_setns, NULL, &fn);
  napi_set_named_property(env, exports, "setns", fn);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)

/*
 * kernel.c: `xsa --kernel CONNECTION_FILE`, a Jupyter kernel speaking the
 * messaging protocol 5.3 on ZeroMQ itself, one Lua state per kernel; and
 * `xsa --install-kernel`, which writes its kernelspec.
 *
 * Threads: the main thread owns the Lua state and the shell socket (execute,
 * complete, inspect, is_complete, kernel_info, history, comm_info,
 * shutdown); a control thread answers control requests (interrupt_request
 * raises SIGINT in the process, so a cell stops as Ctrl-C stops a script;
 * shutdown; kernel_info) while a cell runs; a heartbeat thread echoes
 * (zmq_proxy). IOPub is shared under a mutex. The kernelspec asks for
 * interrupt_mode "signal", so Jupyter sends SIGINT itself; both work.
 *
 * What a cell means (forms tried, locals kept, print and io.write as
 * streams, figures and progress as display data, completion through
 * xsa.help) is lua/xsa/notebook.lua's; this file moves messages.
 *
 * Input: io.read in a cell asks the front end (input_request on the stdin
 * channel, to the identities of the execute_request, which a front end's
 * stdin socket shares) and waits for its input_reply; an interrupt or a
 * shutdown ends the wait. A request with allow_stdin false (nbconvert)
 * gets an error at once, never a wait.
 *
 * Non-goals: comms and widgets, binary buffers, debug_request.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include "../core/xsa.h"
#include "exe.h"
#include "kernel.h"

#ifndef XSA_HAVE_JUPYTER

int xsa_kernel_main(lua_State *L, const char *connection_file)
{
    (void)L;
    (void)connection_file;
    fprintf(stderr, "xsa: this xsa was built without the Jupyter kernel: install ZeroMQ and OpenSSL "
                    "(sh mk/deps.sh --jupyter: libzmq3-dev libssl-dev) and run make again\n");
    return 1;
}

#else

#include <pthread.h>
#include <signal.h>

#include <zmq.h>

static struct {
    void *ctx, *shell, *control, *iopub, *stdin_sock, *hb;
    kconn conn;
    char session[33];
    pthread_mutex_t iopub_lock;
    const kmsg *parent; /* the shell request being handled (main thread) */
    int exec_count;
    volatile sig_atomic_t shutdown;
    lua_State *L;
    int handlers; /* registry ref: the table xsa.notebook.start returned */
} K;

static int publish(const kmsg *parent, const char *type, cJSON *content)
{
    pthread_mutex_lock(&K.iopub_lock);
    int rc = kmsg_send(K.iopub, K.conn.key, K.session, parent, type, type, content, NULL);
    pthread_mutex_unlock(&K.iopub_lock);
    return rc;
}

static void status(const kmsg *parent, const char *st)
{
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "execution_state", st);
    publish(parent, "status", c);
}

static void reply(void *sock, const kmsg *req, const char *type, cJSON *content)
{
    if (kmsg_send(sock, K.conn.key, K.session, req, NULL, type, content, NULL) != 0)
        fprintf(stderr, "xsa kernel: could not send %s: %s\n", type, zmq_strerror(errno));
}

static cJSON *kernel_info(void)
{
    cJSON *c = cJSON_CreateObject(), *li = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "status", "ok");
    cJSON_AddStringToObject(c, "protocol_version", "5.3");
    cJSON_AddStringToObject(c, "implementation", "xsa");
    cJSON_AddStringToObject(c, "implementation_version", XSA_VERSION);
    cJSON_AddStringToObject(li, "name", "lua");
    cJSON_AddStringToObject(li, "version", LUA_VERSION_MAJOR "." LUA_VERSION_MINOR "." LUA_VERSION_RELEASE);
    cJSON_AddStringToObject(li, "mimetype", "text/x-lua");
    cJSON_AddStringToObject(li, "file_extension", ".lua");
    cJSON_AddStringToObject(li, "pygments_lexer", "lua");
    cJSON_AddStringToObject(li, "codemirror_mode", "lua");
    cJSON_AddItemToObject(c, "language_info", li);
    cJSON_AddStringToObject(c, "banner", "xsa " XSA_VERSION " (" LUA_RELEASE "): the global `xsa`, help(x), Tab completes");
    cJSON_AddItemToObject(c, "help_links", cJSON_CreateArray());
    return c;
}

/* ---- the Lua side: xsa.notebook ---- */

/* kernel.publish(msg_type, json_text): an IOPub message for the current request */
static int l_publish(lua_State *L)
{
    const char *type = luaL_checkstring(L, 1);
    const char *text = luaL_checkstring(L, 2);
    cJSON *c = cJSON_Parse(text);
    if (!cJSON_IsObject(c)) {
        cJSON_Delete(c);
        return luaL_argerror(L, 2, "not a JSON object");
    }
    lua_pushboolean(L, publish(K.parent, type, c) == 0);
    return 1;
}

/* Drops what waits on the stdin socket before a new input_request: replies
 * to a prompt that an interrupt abandoned are not answers to the next. */
static void purge_stdin(void)
{
    zmq_pollitem_t it = {K.stdin_sock, 0, ZMQ_POLLIN, 0};
    while (zmq_poll(&it, 1, 0) > 0) {
        kmsg m;
        if (kmsg_recv(K.stdin_sock, K.conn.key, &m) < 0) return;
        if (m.msg_type) fprintf(stderr, "xsa kernel: dropped a stale %s on the stdin channel\n", m.msg_type);
        kmsg_free(&m);
    }
}

/* 1 when m answers the input_request `asked`: an input_reply whose
 * parent_header is that request, or has no msg_id (jupyter_client's
 * KernelClient.input sends none; purge_stdin dropped earlier ones) */
static int answers(const kmsg *m, const char *asked)
{
    if (strcmp(m->msg_type, "input_reply") != 0) {
        fprintf(stderr, "xsa kernel: ignored a %s on the stdin channel\n", m->msg_type);
        return 0;
    }
    if (m->parent_id && strcmp(m->parent_id, asked) != 0) {
        fprintf(stderr, "xsa kernel: ignored an input_reply to an earlier input_request\n");
        return 0;
    }
    return 1;
}

/* kernel.input(prompt, password) -> the line the front end's user typed */
static int l_input(lua_State *L)
{
    const char *prompt = luaL_optstring(L, 1, "");
    int password = lua_toboolean(L, 2);
    const kmsg *req = K.parent;
    if (!req || strcmp(req->msg_type, "execute_request") != 0 ||
        !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req->content, "allow_stdin")))
        return luaL_error(L, "io.read: this front end takes no input here (its request has allow_stdin false, "
                             "as nbconvert's have)");
    purge_stdin();
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "prompt", prompt);
    cJSON_AddBoolToObject(c, "password", password);
    char asked[33];
    if (kmsg_send(K.stdin_sock, K.conn.key, K.session, req, NULL, "input_request", c, asked) != 0)
        return luaL_error(L, "io.read: could not ask the front end: %s", zmq_strerror(errno));
    zmq_pollitem_t it = {K.stdin_sock, 0, ZMQ_POLLIN, 0};
    for (;;) {
        /* short polls: an interrupt (a signal handler cannot stop zmq_poll)
         * or a shutdown is seen within 100 ms */
        if (xsa_intr_take(L)) return luaL_error(L, "interrupted!");
        if (K.shutdown) return luaL_error(L, "io.read: the kernel is shutting down");
        int n = zmq_poll(&it, 1, 100);
        if (n < 0 && errno != EINTR) return luaL_error(L, "io.read: %s", zmq_strerror(errno));
        if (n <= 0) continue;
        kmsg m;
        int got = kmsg_recv(K.stdin_sock, K.conn.key, &m);
        if (got < 0) return luaL_error(L, "io.read: %s", zmq_strerror(errno));
        if (got == 0) continue;
        if (!answers(&m, asked)) {
            kmsg_free(&m);
            continue;
        }
        cJSON *v = cJSON_GetObjectItemCaseSensitive(m.content, "value");
        if (cJSON_IsString(v)) lua_pushstring(L, v->valuestring);
        else lua_pushliteral(L, "");
        kmsg_free(&m);
        return 1;
    }
}

static int l_base64(lua_State *L)
{
    size_t n;
    const char *s = luaL_checklstring(L, 1, &n);
    char *b = kmsg_base64((const unsigned char *)s, n);
    if (!b) return luaL_error(L, "base64: not enough memory");
    lua_pushstring(L, b);
    free(b);
    return 1;
}

/* require("xsa.notebook").start{publish=, base64=, input=} -> handlers, kept in the registry */
static int start_lua(lua_State *L)
{
    lua_getglobal(L, "require");
    lua_pushliteral(L, "xsa.notebook");
    lua_call(L, 1, 1);
    lua_getfield(L, -1, "start");
    lua_createtable(L, 0, 3);
    lua_pushcfunction(L, l_publish);
    lua_setfield(L, -2, "publish");
    lua_pushcfunction(L, l_base64);
    lua_setfield(L, -2, "base64");
    lua_pushcfunction(L, l_input);
    lua_setfield(L, -2, "input");
    lua_call(L, 1, 1);
    luaL_checktype(L, -1, LUA_TTABLE);
    return 1;
}

/* Calls handlers[name](args pushed by the caller); results stay on the stack.
 * Returns the status of xsa_docall (errors leave the message on top). */
static int call_handler(const char *name, int nargs, int nres)
{
    lua_State *L = K.L;
    lua_rawgeti(L, LUA_REGISTRYINDEX, K.handlers);
    lua_getfield(L, -1, name);
    lua_remove(L, -2);
    lua_insert(L, -(nargs + 1));
    return xsa_docall(L, nargs, nres);
}

static const char *str_field(cJSON *o, const char *name, const char *dflt)
{
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsString(v) ? v->valuestring : dflt;
}

static int int_field(cJSON *o, const char *name, int dflt)
{
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsNumber(v) ? (int)v->valuedouble : dflt;
}

/* the error message of a failed cell as an error message and reply fields */
static void add_error(cJSON *c, const char *msg)
{
    int interrupted = strstr(msg, "interrupted!") != NULL;
    cJSON_AddStringToObject(c, "ename", interrupted ? "Interrupted" : "LuaError");
    const char *nl = strchr(msg, '\n');
    char *first = nl ? strndup(msg, (size_t)(nl - msg)) : strdup(msg);
    cJSON_AddStringToObject(c, "evalue", first ? first : "");
    free(first);
    cJSON *tb = cJSON_CreateArray();
    for (const char *p = msg; *p;) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char *line = strndup(p, n);
        if (line) cJSON_AddItemToArray(tb, cJSON_CreateString(line));
        free(line);
        p += n + (e != NULL);
    }
    cJSON_AddItemToObject(c, "traceback", tb);
}

static void do_execute(const kmsg *req)
{
    lua_State *L = K.L;
    const char *code = str_field(req->content, "code", "");
    cJSON *silent = cJSON_GetObjectItemCaseSensitive(req->content, "silent");
    int quiet = cJSON_IsTrue(silent);
    if (!quiet) K.exec_count++;
    cJSON *in = cJSON_CreateObject();
    cJSON_AddStringToObject(in, "code", code);
    cJSON_AddNumberToObject(in, "execution_count", K.exec_count);
    publish(req, "execute_input", in);
    lua_settop(L, 0);
    lua_pushstring(L, code);
    lua_pushinteger(L, K.exec_count);
    lua_pushboolean(L, quiet);
    int st = call_handler("execute", 3, 0);
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "status", st == LUA_OK ? "ok" : "error");
    cJSON_AddNumberToObject(r, "execution_count", K.exec_count);
    if (st == LUA_OK) {
        cJSON_AddItemToObject(r, "payload", cJSON_CreateArray());
        cJSON_AddItemToObject(r, "user_expressions", cJSON_CreateObject());
    } else {
        /* as the streams: invalid UTF-8 and NUL bytes escaped (notebook.lua's clean) */
        if (!lua_isstring(L, -1)) lua_pushliteral(L, "(error object is not a string)");
        const char *msg = call_handler("clean", 1, 1) == LUA_OK ? lua_tostring(L, -1) : NULL;
        if (!msg) msg = "(the error message could not be shown)";
        cJSON *e = cJSON_CreateObject();
        add_error(e, msg);
        add_error(r, msg);
        publish(req, "error", e);
    }
    lua_settop(L, 0);
    reply(K.shell, req, "execute_reply", r);
}

static void do_complete(const kmsg *req)
{
    lua_State *L = K.L;
    lua_settop(L, 0);
    lua_pushstring(L, str_field(req->content, "code", ""));
    lua_pushinteger(L, int_field(req->content, "cursor_pos", -1));
    cJSON *r = cJSON_CreateObject(), *matches = cJSON_CreateArray();
    int start = 0, end = 0;
    if (call_handler("complete", 2, 3) == LUA_OK && lua_istable(L, 1)) {
        lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
        for (lua_Integer i = 1; i <= n; i++) {
            lua_rawgeti(L, 1, i);
            if (lua_type(L, -1) == LUA_TSTRING) cJSON_AddItemToArray(matches, cJSON_CreateString(lua_tostring(L, -1)));
            lua_pop(L, 1);
        }
        start = (int)lua_tointeger(L, 2);
        end = (int)lua_tointeger(L, 3);
    }
    lua_settop(L, 0);
    cJSON_AddStringToObject(r, "status", "ok");
    cJSON_AddItemToObject(r, "matches", matches);
    cJSON_AddNumberToObject(r, "cursor_start", start);
    cJSON_AddNumberToObject(r, "cursor_end", end);
    cJSON_AddItemToObject(r, "metadata", cJSON_CreateObject());
    reply(K.shell, req, "complete_reply", r);
}

static void do_inspect(const kmsg *req)
{
    lua_State *L = K.L;
    lua_settop(L, 0);
    lua_pushstring(L, str_field(req->content, "code", ""));
    lua_pushinteger(L, int_field(req->content, "cursor_pos", -1));
    cJSON *r = cJSON_CreateObject(), *data = cJSON_CreateObject();
    int found = call_handler("inspect", 2, 1) == LUA_OK && lua_type(L, 1) == LUA_TSTRING;
    if (found) cJSON_AddStringToObject(data, "text/plain", lua_tostring(L, 1));
    lua_settop(L, 0);
    cJSON_AddStringToObject(r, "status", "ok");
    cJSON_AddBoolToObject(r, "found", found);
    cJSON_AddItemToObject(r, "data", data);
    cJSON_AddItemToObject(r, "metadata", cJSON_CreateObject());
    reply(K.shell, req, "inspect_reply", r);
}

static void do_is_complete(const kmsg *req)
{
    lua_State *L = K.L;
    lua_settop(L, 0);
    lua_pushstring(L, str_field(req->content, "code", ""));
    const char *st = "unknown";
    if (call_handler("is_complete", 1, 1) == LUA_OK && lua_type(L, 1) == LUA_TSTRING) st = lua_tostring(L, 1);
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "status", st);
    if (strcmp(st, "incomplete") == 0) cJSON_AddStringToObject(r, "indent", "");
    lua_settop(L, 0);
    reply(K.shell, req, "is_complete_reply", r);
}

static cJSON *shutdown_reply(const kmsg *req)
{
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "status", "ok");
    cJSON_AddBoolToObject(r, "restart", cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req->content, "restart")));
    return r;
}

static void handle_shell(const kmsg *req)
{
    const char *t = req->msg_type;
    K.parent = req;
    status(req, "busy");
    if (!strcmp(t, "execute_request")) {
        do_execute(req);
    } else if (!strcmp(t, "kernel_info_request")) {
        reply(K.shell, req, "kernel_info_reply", kernel_info());
    } else if (!strcmp(t, "complete_request")) {
        do_complete(req);
    } else if (!strcmp(t, "inspect_request")) {
        do_inspect(req);
    } else if (!strcmp(t, "is_complete_request")) {
        do_is_complete(req);
    } else if (!strcmp(t, "history_request")) {
        cJSON *r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "status", "ok");
        cJSON_AddItemToObject(r, "history", cJSON_CreateArray());
        reply(K.shell, req, "history_reply", r);
    } else if (!strcmp(t, "comm_info_request")) {
        cJSON *r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "status", "ok");
        cJSON_AddItemToObject(r, "comms", cJSON_CreateObject());
        reply(K.shell, req, "comm_info_reply", r);
    } else if (!strcmp(t, "shutdown_request")) {
        reply(K.shell, req, "shutdown_reply", shutdown_reply(req));
        K.shutdown = 1;
    } else {
        fprintf(stderr, "xsa kernel: ignored a %s on the shell channel\n", t);
    }
    status(req, "idle");
    K.parent = NULL;
}

/* ---- threads ---- */

static void *heartbeat(void *arg)
{
    (void)arg;
    zmq_proxy(K.hb, K.hb, NULL); /* returns when the context shuts down */
    zmq_close(K.hb);
    return NULL;
}

static void *control(void *arg)
{
    (void)arg;
    zmq_pollitem_t it = {K.control, 0, ZMQ_POLLIN, 0};
    while (!K.shutdown) {
        int n = zmq_poll(&it, 1, 200);
        if (n < 0 && errno == ETERM) break;
        if (n <= 0) continue;
        kmsg req;
        int got = kmsg_recv(K.control, K.conn.key, &req);
        if (got < 0) break;
        if (got == 0) continue;
        const char *t = req.msg_type;
        status(&req, "busy"); /* control requests too (protocol 5.3) */
        if (!strcmp(t, "interrupt_request")) {
            kill(getpid(), SIGINT); /* the running cell gets "interrupted!" */
            cJSON *r = cJSON_CreateObject();
            cJSON_AddStringToObject(r, "status", "ok");
            reply(K.control, &req, "interrupt_reply", r);
        } else if (!strcmp(t, "shutdown_request")) {
            reply(K.control, &req, "shutdown_reply", shutdown_reply(&req));
            K.shutdown = 1;
            kill(getpid(), SIGINT); /* stop a running cell, if any */
        } else if (!strcmp(t, "kernel_info_request")) {
            reply(K.control, &req, "kernel_info_reply", kernel_info());
        } else {
            fprintf(stderr, "xsa kernel: ignored a %s on the control channel\n", t);
        }
        status(&req, "idle");
        kmsg_free(&req);
    }
    zmq_close(K.control);
    return NULL;
}

static void *bind_socket(int type, int port, char *err, size_t errlen)
{
    void *s = zmq_socket(K.ctx, type);
    char addr[300];
    /* as jupyter_client names them: tcp://IP:PORT, ipc://PATH-PORT */
    if (!strcmp(K.conn.transport, "ipc")) snprintf(addr, sizeof addr, "ipc://%s-%d", K.conn.ip, port);
    else snprintf(addr, sizeof addr, "%s://%s:%d", K.conn.transport, K.conn.ip, port);
    int linger = 1000;
    int64_t cap = (int64_t)KMSG_MAX_BYTES; /* a larger part: its peer is disconnected, nothing kept */
    if (s) zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    if (s) zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &cap, sizeof cap);
    if (!s || zmq_bind(s, addr) != 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", addr, zmq_strerror(errno));
        if (s) zmq_close(s);
        return NULL;
    }
    return s;
}

static int open_sockets(char *err, size_t errlen)
{
    K.ctx = zmq_ctx_new();
    if (!K.ctx) {
        snprintf(err, errlen, "zmq_ctx_new failed");
        return -1;
    }
    if (!(K.shell = bind_socket(ZMQ_ROUTER, K.conn.shell_port, err, errlen)) ||
        !(K.control = bind_socket(ZMQ_ROUTER, K.conn.control_port, err, errlen)) ||
        !(K.iopub = bind_socket(ZMQ_PUB, K.conn.iopub_port, err, errlen)) ||
        !(K.stdin_sock = bind_socket(ZMQ_ROUTER, K.conn.stdin_port, err, errlen)) ||
        !(K.hb = bind_socket(ZMQ_REP, K.conn.hb_port, err, errlen)))
        return -1;
    return 0;
}

int xsa_kernel_main(lua_State *L, const char *connection_file)
{
    char err[512];
    if (kconn_read(connection_file, &K.conn, err, sizeof err) != 0 || open_sockets(err, sizeof err) != 0) {
        fprintf(stderr, "xsa kernel: %s\n", err);
        return 1;
    }
    K.L = L;
    kmsg_uuid(K.session);
    pthread_mutex_init(&K.iopub_lock, NULL);
    lua_pushcfunction(L, start_lua);
    if (xsa_docall(L, 0, 1) != LUA_OK) {
        fprintf(stderr, "xsa kernel: %s\n", lua_tostring(L, -1));
        return 1;
    }
    K.handlers = luaL_ref(L, LUA_REGISTRYINDEX);
    xsa_intr_kernel_mode();
    /* the threads never take SIGINT: it is the main thread's, for the cell */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    pthread_t hb_thread, control_thread;
    pthread_create(&hb_thread, NULL, heartbeat, NULL);
    pthread_create(&control_thread, NULL, control, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    status(NULL, "starting");
    zmq_pollitem_t it = {K.shell, 0, ZMQ_POLLIN, 0};
    while (!K.shutdown) {
        int n = zmq_poll(&it, 1, 200);
        if (n < 0 && errno != EINTR) break;
        if (n <= 0) continue;
        kmsg req;
        int got = kmsg_recv(K.shell, K.conn.key, &req);
        if (got < 0) break;
        if (got == 0) continue;
        handle_shell(&req);
        kmsg_free(&req);
    }
    K.shutdown = 1;
    zmq_close(K.shell);
    zmq_close(K.iopub);
    zmq_close(K.stdin_sock);
    zmq_ctx_shutdown(K.ctx);
    pthread_join(control_thread, NULL);
    pthread_join(hb_thread, NULL);
    zmq_ctx_term(K.ctx);
    luaL_unref(L, LUA_REGISTRYINDEX, K.handlers);
    return 0;
}

#endif /* XSA_HAVE_JUPYTER */

/* ---- xsa --install-kernel ---- */

static int mkdir_p(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        int rc = mkdir(path, 0755);
        *p = '/';
        if (rc != 0 && errno != EEXIST) return -1;
    }
    return mkdir(path, 0755) == 0 || errno == EEXIST ? 0 : -1;
}

/* sys.prefix of the python3 on PATH, the Python that runs Jupyter (as
 * `jupyter kernelspec install --sys-prefix` takes its own): 0, or -1 with no
 * such python3 */
static int python_prefix(char *out, size_t n)
{
    FILE *p = popen("python3 -c 'import sys; print(sys.prefix)' 2>/dev/null", "r");
    if (!p) return -1;
    int ok = fgets(out, (int)n, p) != NULL;
    if (pclose(p) != 0) ok = 0;
    size_t len = ok ? strlen(out) : 0;
    if (len && out[len - 1] == '\n') out[--len] = '\0';
    return ok && len > 0 && out[0] == '/' ? 0 : -1;
}

/* the kernelspec folder: --prefix DIR, --sys-prefix, else $JUPYTER_DATA_DIR,
 * else $XDG_DATA_HOME/jupyter, else ~/.local/share/jupyter (Jupyter's user
 * folder). -1: a usage error; -2: --sys-prefix without a python3. */
static int spec_dir(int argc, char **argv, char *out, size_t n)
{
    const char *e;
    char prefix[2048];
    if (argc == 2 && strcmp(argv[0], "--prefix") == 0 && argv[1][0]) {
        snprintf(out, n, "%s/share/jupyter/kernels/xsa", argv[1]);
    } else if (argc == 1 && strcmp(argv[0], "--sys-prefix") == 0) {
        if (python_prefix(prefix, sizeof prefix) != 0) return -2;
        snprintf(out, n, "%s/share/jupyter/kernels/xsa", prefix);
    } else if (argc != 0) {
        return -1;
    } else if ((e = getenv("JUPYTER_DATA_DIR")) && *e) {
        snprintf(out, n, "%s/kernels/xsa", e);
    } else if ((e = getenv("XDG_DATA_HOME")) && *e) {
        snprintf(out, n, "%s/jupyter/kernels/xsa", e);
    } else if ((e = getenv("HOME")) && *e) {
        snprintf(out, n, "%s/.local/share/jupyter/kernels/xsa", e);
    } else {
        return -1;
    }
    return 0;
}

int xsa_kernel_install(int argc, char **argv)
{
#ifndef XSA_HAVE_JUPYTER
    (void)argc;
    (void)argv;
    fprintf(stderr, "xsa: this xsa was built without the Jupyter kernel: install ZeroMQ and OpenSSL "
                    "(sh mk/deps.sh --jupyter: libzmq3-dev libssl-dev, and jupyter-nbconvert to run notebooks) "
                    "and run make again\n");
    return 1;
#else
    char dir[4096], exe[4096], file[4200];
    int where = spec_dir(argc, argv, dir, sizeof dir);
    if (where == -2) {
        fprintf(stderr, "xsa: --sys-prefix installs beside the Python that runs Jupyter, and no python3 on PATH "
                        "answered; give --prefix DIR instead\n");
        return 1;
    }
    if (where != 0) {
        fprintf(stderr, "usage: xsa --install-kernel [--prefix DIR | --sys-prefix]  (without either: "
                        "$JUPYTER_DATA_DIR, $XDG_DATA_HOME/jupyter or ~/.local/share/jupyter)\n");
        return 1;
    }
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) {
        fprintf(stderr, "xsa: cannot find this executable's path\n");
        return 1;
    }
    exe[len] = '\0';
    if (mkdir_p(dir) != 0) {
        fprintf(stderr, "xsa: cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    cJSON *spec = cJSON_CreateObject(), *av = cJSON_CreateArray();
    cJSON_AddItemToArray(av, cJSON_CreateString(exe));
    cJSON_AddItemToArray(av, cJSON_CreateString("--kernel"));
    cJSON_AddItemToArray(av, cJSON_CreateString("{connection_file}"));
    cJSON_AddItemToObject(spec, "argv", av);
    cJSON_AddStringToObject(spec, "display_name", "xsa (Lua 5.4)");
    cJSON_AddStringToObject(spec, "language", "lua");
    cJSON_AddStringToObject(spec, "interrupt_mode", "signal");
    char *text = cJSON_Print(spec);
    cJSON_Delete(spec);
    snprintf(file, sizeof file, "%s/kernel.json", dir);
    FILE *f = fopen(file, "w");
    int ok = f && text && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    if (f && fclose(f) != 0) ok = 0;
    free(text);
    if (!ok) {
        fprintf(stderr, "xsa: cannot write %s: %s\n", file, strerror(errno));
        return 1;
    }
    printf("installed the Jupyter kernel \"xsa\" in %s (it runs %s)\n", dir, exe);
    return 0;
#endif
}

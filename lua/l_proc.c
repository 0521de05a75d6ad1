/*
 * l_proc.c: xsa._proc, running a shell command as os.execute does, except
 * for signals. C's system() (os.execute) ignores SIGINT and SIGQUIT in the
 * caller until the command ends, so a parent running another part (ex:results
 * with --train) could not be interrupted by a `kill -INT` of its own pid or
 * a Jupyter interrupt: it waited for the child to finish.
 *
 *   local ok, how, code = xsa._proc.run("xsa scripts/part3_train.lua --seed 1")  -- os.execute's results
 *
 * Here the command runs in its own process group. A SIGINT or SIGTERM that
 * reaches this process meanwhile is forwarded to that whole group (the
 * workers save their state and exit), this process waits until every
 * member of the group has exited (at most RUN_DRAIN_SECONDS after the
 * shell; a second signal ends the wait), then raises the signal on itself, so that the handler it had
 * (the xsa executable's: "interrupted!" at the next Lua instruction; lua.c's
 * the same; none: the default action) sees it as if it came now. A signal
 * this process ignored is left alone. A Ctrl-C at a terminal reaches only
 * the foreground group, this process's, and so is forwarded the same way.
 *
 * xsa._proc.mkdir(path) is mkdir -p without a shell, for the same reason.
 *
 * xsa._proc.pool runs a list of commands, each a list of words (no shell),
 * at most `jobs` at a time, with the same handling of signals: the --jobs
 * executor (lua/xsa/executor.lua).
 *
 *   local codes = xsa._proc.pool({{"xsa", "a.lua"}, {"xsa", "b.lua"}}, 2, {XSA_PROGRESS = "log"})
 *
 * Non-goals: capturing output (io.popen), other signals, Windows.
 */
#include <errno.h>
#include <stdlib.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "l_bind.h"

#define RUN_DRAIN_SECONDS 60 /* the workers' last saves after the shell ended */

static volatile sig_atomic_t got_signal = 0, n_signals = 0;

static void on_signal(int sig)
{
    got_signal = sig;
    n_signals++;
}

/* Installs on_signal for sig unless sig is ignored; *old gets what was there. */
static void catch_signal(int sig, struct sigaction *old)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: waitpid returns EINTR */
    sigemptyset(&sa.sa_mask);
    sigaction(sig, NULL, old);
    if (old->sa_handler != SIG_IGN) sigaction(sig, &sa, NULL);
}

/* Waits until no process of group pgid is left, the time is up, or a
 * second signal came (the user insists). */
static void drain_group(pid_t pgid)
{
    struct timespec tick = {0, 20 * 1000 * 1000};
    for (int i = 0; i < RUN_DRAIN_SECONDS * 50 && n_signals < 2 && kill(-pgid, 0) == 0; i++)
        nanosleep(&tick, NULL);
}

static int l_run(lua_State *L)
{
    const char *cmd = luaL_checkstring(L, 1);
    struct sigaction old_int, old_term;
    got_signal = 0;
    n_signals = 0;
    catch_signal(SIGINT, &old_int);
    catch_signal(SIGTERM, &old_term);
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        /* exec keeps ignored signals ignored: the command gets the defaults */
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGQUIT, SIG_DFL);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int status = 0, rc = pid < 0 ? -1 : 0, err = errno;
    sig_atomic_t forwarded = 0; /* signals passed on so far */
    if (pid > 0) {
        setpgid(pid, pid); /* also here: the group exists before any kill below */
        /* polled, never a blocking waitpid: a signal that came between the
         * check and the wait would wait there until the command ended */
        struct timespec tick = {0, 20 * 1000 * 1000};
        for (;;) {
            if (n_signals > forwarded) {
                kill(-pid, (int)got_signal);
                forwarded = n_signals;
            }
            pid_t w = waitpid(pid, &status, WNOHANG);
            if (w == pid) break;
            if (w < 0 && errno != EINTR) {
                rc = -1;
                err = errno;
                break;
            }
            nanosleep(&tick, NULL);
        }
        if (forwarded) drain_group(pid);
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (got_signal) raise((int)got_signal);
    if (rc != 0) {
        errno = err;
        return luaL_fileresult(L, 0, "/bin/sh");
    }
    if (WIFEXITED(status)) {
        if (WEXITSTATUS(status) == 0) lua_pushboolean(L, 1);
        else luaL_pushfail(L);
        lua_pushliteral(L, "exit");
        lua_pushinteger(L, WEXITSTATUS(status));
    } else {
        luaL_pushfail(L);
        lua_pushliteral(L, "signal");
        lua_pushinteger(L, WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    }
    return 3;
}

/* mkdir(path) -> true, or nil + why: mkdir -p without a shell (os.execute
 * would ignore SIGINT while it ran; a Ctrl-C then is lost) */
static int l_mkdir(lua_State *L)
{
    size_t n;
    const char *path = luaL_checklstring(L, 1, &n);
    if (n == 0 || memchr(path, '\0', n)) return luaL_argerror(L, 1, "not a folder name");
    char *p = lua_newuserdatauv(L, n + 1, 0);
    memcpy(p, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] != '/' && p[i] != '\0') continue;
        char c = p[i];
        p[i] = '\0';
        struct stat st;
        if (mkdir(p, 0777) != 0 && !(errno == EEXIST && stat(p, &st) == 0 && S_ISDIR(st.st_mode))) {
            int e = errno == EEXIST ? ENOTDIR : errno;
            lua_pushnil(L);
            lua_pushfstring(L, "%s: %s", p, strerror(e));
            return 2;
        }
        p[i] = c;
    }
    lua_pushboolean(L, 1);
    return 1;
}

/* The words of command i (1-based) of the list at stack index cmds as a
 * NULL-terminated array; the strings stay owned by the list. */
static char **words_of(lua_State *L, int cmds, int i)
{
    lua_geti(L, cmds, i);
    int n = (int)lua_rawlen(L, -1);
    char **argv = calloc((size_t)n + 1, sizeof *argv);
    for (int k = 0; argv && k < n; k++) {
        lua_geti(L, -1, k + 1);
        argv[k] = (char *)lua_tostring(L, -1);
        lua_pop(L, 1); /* the list holds the string */
    }
    lua_pop(L, 1);
    return argv;
}

/* This process's environment with env's NAME=value pairs in place of any
 * of the same name, as an array for posix_spawn; the new strings are kept
 * in a table pushed on the stack. */
static char **environment_with(lua_State *L, int env)
{
    extern char **environ;
    size_t n = 0, extra = env ? lua_rawlen(L, env) : 0;
    lua_newtable(L);
    int keep = lua_gettop(L);
    if (env) {
        lua_pushnil(L);
        while (lua_next(L, env)) {
            extra++;
            lua_pop(L, 1);
        }
    }
    while (environ[n]) n++;
    char **envp = calloc(n + extra + 1, sizeof *envp);
    if (!envp) return NULL;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(environ[i], '=');
        int overridden = 0;
        if (env && eq) {
            lua_pushlstring(L, environ[i], (size_t)(eq - environ[i]));
            overridden = lua_rawget(L, env) != LUA_TNIL;
            lua_pop(L, 1);
        }
        if (!overridden) envp[m++] = environ[i];
    }
    if (env) {
        lua_pushnil(L);
        while (lua_next(L, env)) {
            envp[m++] = (char *)lua_pushfstring(L, "%s=%s", lua_tostring(L, -2), lua_tostring(L, -1));
            lua_rawseti(L, keep, (lua_Integer)m);
            lua_pop(L, 1);
        }
    }
    return envp;
}

/* Starts words (the program found on PATH) in a process group of its own,
 * with SIGINT, SIGTERM and SIGQUIT at their defaults and none blocked.
 * posix_spawn, not fork: this process has threads (the engine's workers),
 * and only exec may follow a fork in such a process. Returns the pid, or
 * -1 with errno set. */
static pid_t spawn_words(char **argv, char **envp)
{
    posix_spawnattr_t attr;
    sigset_t def, none;
    pid_t pid = -1;
    int rc = posix_spawnattr_init(&attr);
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    sigemptyset(&def);
    sigaddset(&def, SIGINT);
    sigaddset(&def, SIGTERM);
    sigaddset(&def, SIGQUIT);
    sigemptyset(&none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setsigdefault(&attr, &def);
    posix_spawnattr_setsigmask(&attr, &none);
    rc = posix_spawnp(&pid, argv[0], NULL, &attr, argv, envp);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    return pid;
}

/* Checks the arguments of pool before anything starts: a list of non-empty
 * lists of strings, jobs >= 1, env a table of strings keyed by names. */
static int pool_check(lua_State *L, lua_Integer *jobs)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    *jobs = luaL_checkinteger(L, 2);
    luaL_argcheck(L, *jobs >= 1, 2, "at least 1 job");
    int n = (int)luaL_len(L, 1);
    for (int i = 1; i <= n; i++) {
        luaL_argcheck(L, lua_geti(L, 1, i) == LUA_TTABLE, 1, "each command must be a list of words");
        int m = (int)luaL_len(L, -1);
        luaL_argcheck(L, m >= 1, 1, "a command needs at least its program");
        for (int k = 1; k <= m; k++) {
            luaL_argcheck(L, lua_geti(L, -1, k) == LUA_TSTRING, 1, "each word must be a string");
            luaL_argcheck(L, strlen(lua_tostring(L, -1)) == lua_rawlen(L, -1), 1, "a word holds a NUL byte");
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    if (lua_isnoneornil(L, 3)) return n;
    luaL_checktype(L, 3, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, 3)) {
        size_t kl, vl;
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tolstring(L, -2, &kl) : NULL;
        const char *v = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &vl) : NULL;
        luaL_argcheck(L, k && v && kl > 0 && !strchr(k, '=') && strlen(k) == kl && strlen(v) == vl, 3,
                      "env must map names to strings (no '=' or NUL)");
        lua_pop(L, 1);
    }
    return n;
}

/* xsa._proc.pool(commands, jobs [, env]) -> codes: starts the commands in
 * list order, at most `jobs` running, and waits for all. codes[i] is the
 * exit status of command i, 128 + N when signal N killed it (as a shell
 * reports it), or absent when it never started (a signal came first). A
 * SIGINT or SIGTERM is forwarded to every running command's group, no
 * other command starts, the groups are drained, and the signal is raised
 * here, as run does. A program that cannot be started gets 127 (as in a
 * shell). Children are polled (waitpid WNOHANG every 20 ms), so
 * a signal is never missed between a check and a blocking wait. */
static int l_pool(lua_State *L)
{
    lua_Integer jobs;
    int n = pool_check(L, &jobs), env = lua_isnoneornil(L, 3) ? 0 : 3;
    pid_t *pids = calloc((size_t)n + 1, sizeof *pids);
    int *codes = calloc((size_t)n + 1, sizeof *codes);
    if (!pids || !codes) {
        free(pids);
        free(codes);
        return luaL_error(L, "xsa._proc.pool: out of memory");
    }
    char **envp = environment_with(L, env);
    if (!envp) {
        free(pids);
        free(codes);
        return luaL_error(L, "xsa._proc.pool: out of memory");
    }
    struct sigaction old_int, old_term;
    got_signal = 0;
    n_signals = 0;
    catch_signal(SIGINT, &old_int);
    catch_signal(SIGTERM, &old_term);
    struct timespec tick = {0, 20 * 1000 * 1000};
    int next = 0, running = 0;
    sig_atomic_t forwarded = 0;
    for (;;) {
        if (n_signals > forwarded) {
            for (int i = 0; i < next; i++)
                if (pids[i] > 0) kill(-pids[i], (int)got_signal);
            forwarded = n_signals;
        }
        while (!n_signals && running < jobs && next < n) {
            char **argv = words_of(L, 1, next + 1);
            pid_t pid = argv ? spawn_words(argv, envp) : -1;
            free(argv);
            if (pid < 0) { /* not found, not executable, no memory: as a shell says it */
                codes[next++] = 127;
                continue;
            }
            pids[next++] = pid;
            running++;
        }
        if (running == 0) break;
        int reaped = 0;
        for (int i = 0; i < next; i++) {
            int status;
            if (pids[i] <= 0 || waitpid(pids[i], &status, WNOHANG) != pids[i]) continue;
            codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
            pids[i] = -pids[i]; /* done; its group may still hold grandchildren */
            running--;
            reaped++;
        }
        if (!reaped) nanosleep(&tick, NULL);
    }
    if (forwarded)
        for (int i = 0; i < next; i++)
            if (pids[i] != 0) drain_group(pids[i] < 0 ? -pids[i] : pids[i]);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    lua_createtable(L, n, 0);
    for (int i = 0; i < next; i++) {
        lua_pushinteger(L, codes[i]);
        lua_seti(L, -2, i + 1);
    }
    free(pids);
    free(codes);
    free(envp);
    if (got_signal) raise((int)got_signal);
    return 1;
}

static const luaL_Reg proc_funcs[] = {
    {"run", l_run},
    {"mkdir", l_mkdir},
    {"pool", l_pool},
    {NULL, NULL},
};

int xsa_lua_open_proc(lua_State *L)
{
    luaL_newlib(L, proc_funcs);
    return 1;
}

/*
 * l_proc.c: xsa._proc, running a shell command as os.execute does, except
 * for signals. C's system() (os.execute) ignores SIGINT and SIGQUIT in the
 * caller until the command ends, so a `--jobs` parent running its workers
 * through xargs could not be interrupted by a `kill -INT` of its own pid
 * or a Jupyter interrupt: it waited for every worker to finish.
 *
 *   local ok, how, code = xsa._proc.run("xargs -P 2 ...")  -- os.execute's results
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
 * Non-goals: capturing output (io.popen), other signals, Windows.
 */
#include <errno.h>
#include <signal.h>
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

static const luaL_Reg proc_funcs[] = {
    {"run", l_run},
    {"mkdir", l_mkdir},
    {NULL, NULL},
};

int xsa_lua_open_proc(lua_State *L)
{
    luaL_newlib(L, proc_funcs);
    return 1;
}

/*
 * interrupt.c: Ctrl-C (SIGINT) and SIGTERM for the xsa executable and its
 * Jupyter kernel: the signal raises "interrupted!" inside the running Lua
 * code, so a training script can save its state (a second signal kills,
 * outside the kernel).
 *
 * As lua.c: no debug hook is installed while nothing is being delivered, so
 * debug.gethook() is nil and debuggers, profilers and coverage tools own the
 * hook. The signal handler sets a hook (every event, count 1) on the thread
 * that is running; the hook puts back whatever hook that thread had and
 * raises the error.
 *
 * lua.c sets its hook on the main thread only, so a script busy inside a
 * coroutine never sees Ctrl-C. Here coroutine.resume and coroutine.wrap are
 * copies of lcorolib.c's that record the running coroutine, and the handler
 * hooks that one. An interrupt raised inside a coroutine propagates to its
 * resumer as an error (as coroutine.wrap does) instead of coming back as
 * `false, "interrupted!"` that a loop would ignore; pcall still catches it.
 * A C function busy when the signal comes (a matrix product) finishes, and
 * the hook fires at the next Lua instruction.
 *
 * The messages of a failed call (xsa_message, xsa_report) are here too, as
 * lua.c keeps l_message and report beside docall: main.c and repl.c both
 * use them, and neither looks back at the other.
 *
 * Non-goals: interrupting inside a C function; coroutines that C code
 * resumes with lua_resume (the bindings resume none).
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "exe.h"

static lua_State *volatile main_thread = NULL; /* the state xsa_docall runs */
static lua_State *volatile running_co = NULL;  /* innermost resumed coroutine */
static volatile sig_atomic_t pending = 0;
static volatile sig_atomic_t kernel_mode = 0;
static unsigned long raised = 0; /* interrupts delivered so far */

/* the hook the interrupted thread had before, put back by lhook */
static struct {
    lua_State *volatile L;
    lua_Hook fn;
    int mask, count;
} saved;

static void lhook(lua_State *L, lua_Debug *ar);

static void restore_hook(lua_State *L)
{
    if (saved.L == L) {
        saved.L = NULL;
        lua_sethook(L, saved.fn, saved.mask, saved.count);
    } else if (lua_gethook(L) == lhook) {
        lua_sethook(L, NULL, 0, 0);
    }
}

static void lhook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    restore_hook(L);
    if (pending) {
        pending = 0;
        raised++;
        luaL_error(L, "interrupted!");
    }
}

/* Hooks T so that it raises at its next instruction; remembers its hook. */
static void arm(lua_State *T)
{
    if (lua_gethook(T) != lhook && saved.L == NULL) {
        saved.fn = lua_gethook(T);
        saved.mask = lua_gethookmask(T);
        saved.count = lua_gethookcount(T);
        saved.L = T;
    }
    lua_sethook(T, lhook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT, 1);
}

static volatile sig_atomic_t last_signal = SIGINT;

int xsa_intr_last_signal(void) { return (int)last_signal; }

static void laction(int sig)
{
    if (!kernel_mode) signal(sig, SIG_DFL); /* a second Ctrl-C kills, as in lua.c */
    last_signal = sig;
    pending = 1;
    lua_State *T = running_co ? running_co : main_thread;
    if (T) arm(T);
}

int xsa_intr_take(lua_State *L)
{
    if (!pending) return 0;
    pending = 0;
    raised++;
    restore_hook(L);
    if (running_co && running_co != L) restore_hook(running_co);
    return 1;
}

void xsa_intr_kernel_mode(void)
{
    kernel_mode = 1;
    signal(SIGINT, SIG_IGN);
}

/* ---- coroutine.resume and coroutine.wrap (lcorolib.c, Lua 5.4.4) ---- */

static int interrupted_error(lua_State *L, unsigned long before)
{
    return raised != before && lua_type(L, -1) == LUA_TSTRING && strstr(lua_tostring(L, -1), "interrupted!");
}

/* Results pushed on L, or -1 with an error message on L's top. */
static int auxresume(lua_State *L, lua_State *co, int narg)
{
    int nres;
    if (!lua_checkstack(co, narg)) {
        lua_pushliteral(L, "too many arguments to resume");
        return -1;
    }
    lua_xmove(L, co, narg);
    lua_State *outer = running_co;
    running_co = co;
    int status = lua_resume(co, L, narg, &nres);
    running_co = outer;
    restore_hook(co);
    if (pending) arm(L); /* the signal came too late for co: L takes it */
    if (status == LUA_OK || status == LUA_YIELD) {
        if (!lua_checkstack(L, nres + 1)) {
            lua_pop(co, nres);
            lua_pushliteral(L, "too many results to resume");
            return -1;
        }
        lua_xmove(co, L, nres);
        return nres;
    }
    lua_xmove(co, L, 1);
    return -1;
}

static int co_resume(lua_State *L)
{
    lua_State *co = lua_tothread(L, 1);
    luaL_argexpected(L, co, 1, "thread");
    unsigned long before = raised;
    int r = auxresume(L, co, lua_gettop(L) - 1);
    if (r < 0) {
        if (interrupted_error(L, before)) return lua_error(L);
        lua_pushboolean(L, 0);
        lua_insert(L, -2);
        return 2;
    }
    lua_pushboolean(L, 1);
    lua_insert(L, -(r + 1));
    return r + 1;
}

static int co_auxwrap(lua_State *L)
{
    lua_State *co = lua_tothread(L, lua_upvalueindex(1));
    int r = auxresume(L, co, lua_gettop(L));
    if (r < 0) {
        int stat = lua_status(co);
        if (stat != LUA_OK && stat != LUA_YIELD) { /* error in the coroutine */
            stat = lua_resetthread(co);            /* close its tbc variables */
            lua_xmove(co, L, 1);
        }
        if (stat != LUA_ERRMEM && lua_type(L, -1) == LUA_TSTRING) {
            luaL_where(L, 1);
            lua_insert(L, -2);
            lua_concat(L, 2);
        }
        return lua_error(L);
    }
    return r;
}

static int co_wrap(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TFUNCTION);
    lua_State *NL = lua_newthread(L);
    lua_pushvalue(L, 1);
    lua_xmove(L, NL, 1);
    lua_pushcclosure(L, co_auxwrap, 1);
    return 1;
}

void xsa_intr_open(lua_State *L)
{
    lua_getglobal(L, "coroutine");
    if (lua_istable(L, -1)) {
        lua_pushcfunction(L, co_resume);
        lua_setfield(L, -2, "resume");
        lua_pushcfunction(L, co_wrap);
        lua_setfield(L, -2, "wrap");
    }
    lua_pop(L, 1);
}

/* ---- running a chunk ---- */

int xsa_msghandler(lua_State *L)
{
    if (lua_tostring(L, 1) == NULL) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
        lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    } else {
        lua_pushvalue(L, 1);
    }
    /* joined here, not by luaL_traceback(msg): that stops at a NUL byte */
    lua_pushliteral(L, "\n");
    luaL_traceback(L, L, NULL, 1);
    lua_concat(L, 3);
    return 1;
}

int xsa_docall(lua_State *L, int narg, int nres)
{
    int base = lua_gettop(L) - narg;
    lua_pushcfunction(L, xsa_msghandler);
    lua_insert(L, base);
    main_thread = L;
    running_co = NULL;
    pending = 0;
    signal(SIGINT, laction);
    signal(SIGTERM, laction);
    int status = lua_pcall(L, narg, nres, base);
    signal(SIGINT, kernel_mode ? SIG_IGN : SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    /* a signal that came during the last C call: too late, drop it */
    pending = 0;
    restore_hook(L);
    running_co = NULL;
    lua_remove(L, base);
    return status;
}

/* ---- messages ---- */

const char *xsa_progname = "xsa";

void xsa_message(const char *pname, const char *msg)
{
    if (pname) fprintf(stderr, "%s: ", pname);
    fprintf(stderr, "%s\n", msg);
    fflush(stderr);
}

/* Set when the last error reported was an interrupt ("interrupted!" ends
 * its first line): a script that stops so exits 128 + the signal (130 for
 * SIGINT, 143 for SIGTERM), as a shell reports a process the signal ended,
 * wherever it caught the script (loading a module, say, before the script's
 * own handler could map it); lua.c exits 1. A --jobs parent reads a
 * worker's 130 as "interrupted", 1 as "failed". */
static int reported_interrupt;

int xsa_report_interrupted(void) { return reported_interrupt; }

int xsa_report(lua_State *L, int status)
{
    if (status != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        size_t n = msg ? strcspn(msg, "\n") : 0, k = strlen("interrupted!");
        reported_interrupt = msg && n >= k && strncmp(msg + n - k, "interrupted!", k) == 0;
        xsa_message(xsa_progname, msg);
        lua_pop(L, 1);
    }
    return status;
}

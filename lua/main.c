/*
 * main.c: the `xsa` executable: Lua 5.4's stand-alone interpreter (lua.c:
 * the same options, LUA_INIT, LUA_PATH, arg table, exit statuses and
 * messages, so Lua's own testes/main.lua passes with xsa as the
 * interpreter) with the engine loaded as the global `xsa`, plus a Jupyter
 * kernel (`--kernel`, kernel.c) and its installer (`--install-kernel`).
 *
 * xsa's own Lua modules (xsa.train, xsa.plot, ...) are found by a searcher
 * placed before the path searchers, for names xsa.*, in the checkout or the
 * install the executable belongs to; package.path and package.cpath are the
 * user's, as lua.c sets them.
 *
 * Before Lua starts, the OpenBLAS kernel is checked: when the user has not
 * chosen one (OPENBLAS_CORETYPE unset) and OpenBLAS fell back to a kernel
 * below what the CPU supports, xsa re-executes itself once with the right
 * OPENBLAS_CORETYPE, because OpenBLAS reads it only when it loads; the same
 * re-execution sets OPENBLAS_THREAD_TIMEOUT when the user has not.
 *
 * Owns no Lua table or type: it opens the module (luaopen_xsa, l_init.c).
 * Built into the executable only, never into xsa.so. Ctrl-C is
 * interrupt.c's, the REPL repl.c's.
 *
 * Non-goals: anything a binding does; lua.c's generational GC mode (the
 * engine's large buffers are tuned for the incremental one).
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "../core/xsa.h"
#include "exe.h"

int luaopen_xsa(lua_State *L);


static void usage(const char *badoption)
{
    const char *p = xsa_progname ? xsa_progname : "xsa";
    if (badoption) {
        if (badoption[1] == 'e' || badoption[1] == 'l')
            fprintf(stderr, "%s: '%s' needs argument\n", p, badoption);
        else
            fprintf(stderr, "%s: unrecognized option '%s'\n", p, badoption);
    }
    fprintf(badoption ? stderr : stdout,
            "usage: %s [options] [script [args]]\n"
            "Lua 5.4's interpreter with the xsa engine loaded (global `xsa`).\n"
            "Available options are:\n"
            "  -e stat   execute string 'stat'\n"
            "  -i        enter interactive mode after executing 'script'\n"
            "  -l mod    require library 'mod' into global 'mod'\n"
            "  -l g=mod  require library 'mod' into global 'g'\n"
            "  -v        show version information\n"
            "  -E        ignore environment variables\n"
            "  -W        turn warnings on\n"
            "  --        stop handling options\n"
            "  -         stop handling options and execute stdin\n"
            "As the first argument only:\n"
            "  --help            this help\n"
            "  --version         the version, the OpenBLAS kernel and threads\n"
            "  --kernel FILE     run as a Jupyter kernel (FILE: its connection file)\n"
            "  --install-kernel  install the Jupyter kernelspec (--prefix DIR, --sys-prefix)\n"
            "Environment: LUA_INIT, LUA_PATH, LUA_CPATH (as lua5.4), XSA_DATA (data\n"
            "folder), OPENBLAS_CORETYPE (chosen automatically when unset),\n"
            "OPENBLAS_NUM_THREADS, OPENBLAS_THREAD_TIMEOUT (4 when unset).\n",
            p);
}

/* ---- OpenBLAS kernel ---------------------------------------------------- */

/* OpenBLAS's idle threads poll for work with sched_yield for 2^28 cycles
 * (about 0.1 s) after each product before they sleep, and in that time
 * they take the cores from the engine's own threads (the softmax over the
 * vocabulary blocks, oneDNN's bf16 products): a bf16 training step took
 * 183-186 ms with the default and 151.5 ms with OPENBLAS_THREAD_TIMEOUT=4
 * (2^4 cycles), float32 291-297 ms either way (bench_step, 16 x 64,
 * alternating, 2026-12-01). OpenBLAS reads it only when it loads, so xsa
 * sets it (unless the user did) in the same re-execution as the kernel. */
#define XSA_BLAS_THREAD_TIMEOUT "4"

/* XSA_BLAS_REEXEC = "core:PID" or "timeout:PID": this process (exec keeps
 * the pid) already re-executed; a child xsa inherits it and decides anew. */
static int reexec_was_here(void)
{
    const char *m = getenv("XSA_BLAS_REEXEC"), *c = m ? strchr(m, ':') : NULL;
    return c && atol(c + 1) == (long)getpid();
}

static void maybe_reexec_for_blas(char **argv)
{
    if (reexec_was_here()) return;
    int core = 0, timeout = getenv("OPENBLAS_THREAD_TIMEOUT") == NULL;
    if (!getenv("OPENBLAS_CORETYPE")) {
        const char *best = xsa_cpu_best_coretype();
        /* XSA_TEST_BLAS_FALLBACK lets the tests take this path on a CPU whose
         * OpenBLAS already picked the right kernel */
        if (best && (xsa_blas_is_fallback() || getenv("XSA_TEST_BLAS_FALLBACK"))) {
            setenv("OPENBLAS_CORETYPE", best, 1);
            core = 1;
        }
    }
    if (!core && !timeout) return;
    if (timeout) setenv("OPENBLAS_THREAD_TIMEOUT", XSA_BLAS_THREAD_TIMEOUT, 1);
    char mark[48];
    snprintf(mark, sizeof mark, "%s:%ld", core ? "core" : "timeout", (long)getpid());
    setenv("XSA_BLAS_REEXEC", mark, 1);
    execv("/proc/self/exe", argv);
    /* exec failed: carry on as OpenBLAS loaded */
    if (core) unsetenv("OPENBLAS_CORETYPE");
    if (timeout) unsetenv("OPENBLAS_THREAD_TIMEOUT");
    unsetenv("XSA_BLAS_REEXEC");
}

static void print_version(void)
{
    const char *best = xsa_cpu_best_coretype();
    printf("xsa %s (%s)\n", XSA_VERSION, LUA_RELEASE);
    printf("OpenBLAS kernel: %s, %d thread%s", xsa_blas_corename(), xsa_threads(),
           xsa_threads() == 1 ? "" : "s");
    if (getenv("OPENBLAS_CORETYPE"))
        printf(" (OPENBLAS_CORETYPE=%s%s)", getenv("OPENBLAS_CORETYPE"),
               reexec_was_here() && !strncmp(getenv("XSA_BLAS_REEXEC"), "core:", 5)
                   ? ", chosen by xsa"
                   : ", set by the user");
    if (getenv("OPENBLAS_THREAD_TIMEOUT"))
        printf("; idle threads sleep after 2^%s cycles (OPENBLAS_THREAD_TIMEOUT)",
               getenv("OPENBLAS_THREAD_TIMEOUT"));
    printf("\nCPU supports: %s%s\n", best ? best : "no AVX2/AVX-512 kernel",
           xsa_blas_is_fallback() ? " (OpenBLAS is running a slower fallback kernel)" : "");
    printf("float32 GEMM: %s (%s; XSA_GEMM=openblas|dnnl selects)\n", xsa_gemm_describe(),
           strcmp(xsa_gemm_source(), "XSA_GEMM") == 0 ? "set by XSA_GEMM" : "this build's default for this CPU");
    printf("%s\n", LUA_COPYRIGHT);
    fflush(stdout);
}


/* ---- xsa's own Lua modules ---------------------------------------------- */

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* package.searchers entry for xsa.*: package.searchpath in the upvalue's
 * path, then the file loaded as searcher_Lua (loadlib.c) does. */
static int xsa_searcher(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    if (strncmp(name, "xsa.", 4) != 0) return 0; /* nothing to add to require's message */
    lua_getglobal(L, "package");
    if (lua_getfield(L, -1, "searchpath") != LUA_TFUNCTION) return 0;
    lua_pushvalue(L, 1);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_call(L, 2, 2);
    if (lua_isnil(L, -2)) return 1; /* the message: where it looked */
    const char *file = lua_tostring(L, -2);
    if (luaL_loadfile(L, file) != LUA_OK)
        return luaL_error(L, "error loading module '%s' from file '%s':\n\t%s", name, file, lua_tostring(L, -1));
    lua_pushstring(L, file);
    return 2;
}

/* Puts xsa_searcher second in package.searchers (after the preload one) for
 * the modules in DIR, and records DIR's path in the registry (l_init.c's
 * lazy xsa.NAME loader looks there too). */
static void add_searcher(lua_State *L, const char *dir)
{
    lua_pushfstring(L, "%s/?.lua;%s/?/init.lua", dir, dir);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, "xsa.path");
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "searchers");
    lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
    for (lua_Integer i = n; i >= 2; i--) {
        lua_rawgeti(L, -1, i);
        lua_rawseti(L, -2, i + 1);
    }
    lua_pushvalue(L, -3);
    lua_pushcclosure(L, xsa_searcher, 1);
    lua_rawseti(L, -2, 2);
    lua_pop(L, 3);
}

/* The checkout (or install) root: the folder holding lua/xsa/, searched from
 * the executable's folder and its parent (build/xsa lives one level down);
 * or PREFIX/share/lua/5.4 for an installed PREFIX/bin/xsa. */
static void find_modules(lua_State *L)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return;
    *slash = '\0';
    char root[PATH_MAX + 8], probe[2 * PATH_MAX];
    const char *candidates[2] = {"%s", "%s/.."};
    for (int i = 0; i < 2; i++) {
        snprintf(root, sizeof root, candidates[i], exe);
        snprintf(probe, sizeof probe, "%s/lua/xsa", root);
        if (!is_dir(probe)) continue;
        char *real = realpath(root, NULL);
        if (!real) continue;
        setenv("XSA_ROOT", real, 0);
        lua_pushfstring(L, "%s/lua", real);
        free(real);
        add_searcher(L, lua_tostring(L, -1));
        lua_pop(L, 1);
        return;
    }
    snprintf(probe, sizeof probe, "%s/../share/lua/5.4/xsa", exe);
    if (!is_dir(probe)) return;
    char *real = realpath(probe, NULL);
    if (!real) return;
    real[strlen(real) - strlen("/xsa")] = '\0';
    add_searcher(L, real);
    free(real);
}

/* The globals every xsa state has: `xsa`, and `help` (xsa.help) alike in
 * scripts, -e, the REPL and the Jupyter kernel. */
static void open_globals(lua_State *L)
{
    luaL_requiref(L, "xsa", luaopen_xsa, 1);
    if (lua_getfield(L, -1, "help") != LUA_TNIL) lua_setglobal(L, "help");
    else lua_pop(L, 1);
    lua_pop(L, 1);
}

static void open_engine(lua_State *L)
{
    luaL_openlibs(L);
    xsa_intr_open(L);
    find_modules(L);
    open_globals(L);
    /* start the user's code with no collection cycle half done, as in a
     * fresh lua5.4: finalizers then run in the order Lua's tests expect */
    lua_gc(L, LUA_GCCOLLECT);
}

/* ---- lua.c's driver ------------------------------------------------------ */

/* arg table as lua.c builds it: script at 0, its args at 1.., options below. */
static void create_arg_table(lua_State *L, char **argv, int argc, int script)
{
    if (script == argc) script = 0;
    lua_createtable(L, argc - (script + 1), script + 1);
    for (int i = 0; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i - script);
    }
    lua_setglobal(L, "arg");
}

static int dochunk(lua_State *L, int status)
{
    if (status == LUA_OK) status = xsa_docall(L, 0, 0);
    return xsa_report(L, status);
}

static int dostring(lua_State *L, const char *s, const char *name)
{
    return dochunk(L, luaL_loadbuffer(L, s, strlen(s), name));
}

/* 'g=mod' runs g = require(mod); 'mod' runs mod = require(mod) */
static int dolibrary(lua_State *L, char *globname)
{
    char *modname = strchr(globname, '=');
    if (modname == NULL) {
        modname = globname;
    } else {
        *modname = '\0';
        modname++;
    }
    lua_getglobal(L, "require");
    lua_pushstring(L, modname);
    int status = xsa_docall(L, 1, 1);
    if (status == LUA_OK) lua_setglobal(L, globname);
    return xsa_report(L, status);
}

/* arg[1..#arg] on the stack: a script sees what -e code left in `arg` */
static int pushargs(lua_State *L)
{
    if (lua_getglobal(L, "arg") != LUA_TTABLE) luaL_error(L, "'arg' is not a table");
    int n = (int)luaL_len(L, -1);
    luaL_checkstack(L, n + 3, "too many arguments to script");
    int i;
    for (i = 1; i <= n; i++) lua_rawgeti(L, -i, i);
    lua_remove(L, -i);
    return n;
}

static int handle_script(lua_State *L, char **argv)
{
    const char *fname = argv[0];
    if (strcmp(fname, "-") == 0 && strcmp(argv[-1], "--") != 0) fname = NULL;
    int status = luaL_loadfile(L, fname);
    if (status == LUA_OK) {
        int n = pushargs(L);
        status = xsa_docall(L, n, LUA_MULTRET);
    }
    return xsa_report(L, status);
}

#define has_error 1 /* bad option */
#define has_i 2
#define has_v 4
#define has_e 8
#define has_E 16

/* lua.c's collectargs: the options that matter before any Lua code runs;
 * *first is the script's index (or the bad option's). */
static int collectargs(char **argv, int *first)
{
    int args = 0, i;
    for (i = 1; argv[i] != NULL; i++) {
        *first = i;
        if (argv[i][0] != '-') return args;
        switch (argv[i][1]) {
        case '-':
            if (argv[i][2] != '\0') return has_error;
            *first = i + 1;
            return args;
        case '\0':
            return args;
        case 'E':
            if (argv[i][2] != '\0') return has_error;
            args |= has_E;
            break;
        case 'W':
            if (argv[i][2] != '\0') return has_error;
            break;
        case 'i':
            args |= has_i; /* -i implies -v */
            /* fall through */
        case 'v':
            if (argv[i][2] != '\0') return has_error;
            args |= has_v;
            break;
        case 'e':
            args |= has_e;
            /* fall through */
        case 'l':
            if (argv[i][2] == '\0') {
                i++;
                if (argv[i] == NULL || argv[i][0] == '-') return has_error;
            }
            break;
        default:
            return has_error;
        }
    }
    *first = i;
    return args;
}

/* -e, -l and -W in order; 0 when some code failed */
static int runargs(lua_State *L, char **argv, int n)
{
    for (int i = 1; i < n; i++) {
        int option = argv[i][1];
        if (option == 'e' || option == 'l') {
            char *extra = argv[i] + 2;
            if (*extra == '\0') extra = argv[++i];
            int status = option == 'e' ? dostring(L, extra, "=(command line)") : dolibrary(L, extra);
            if (status != LUA_OK) return 0;
        } else if (option == 'W') {
            lua_warning(L, "@on", 0);
        }
    }
    return 1;
}

#define LUA_INIT_VAR "LUA_INIT"
#define LUA_INITVARVERSION LUA_INIT_VAR LUA_VERSUFFIX

static int handle_luainit(lua_State *L)
{
    const char *name = "=" LUA_INITVARVERSION;
    const char *init = getenv(name + 1);
    if (init == NULL) {
        name = "=" LUA_INIT_VAR;
        init = getenv(name + 1);
    }
    if (init == NULL) return LUA_OK;
    if (init[0] == '@') return dochunk(L, luaL_loadfile(L, init + 1));
    return dostring(L, init, name);
}

static int pmain(lua_State *L)
{
    int argc = (int)lua_tointeger(L, 1);
    char **argv = (char **)lua_touserdata(L, 2);
    int script;
    int args = collectargs(argv, &script);
    luaL_checkversion(L);
    if (args == has_error) {
        usage(argv[script]);
        return 0;
    }
    if (args & has_v) print_version();
    if (args & has_E) { /* the package library reads no LUA_PATH/LUA_CPATH */
        lua_pushboolean(L, 1);
        lua_setfield(L, LUA_REGISTRYINDEX, "LUA_NOENV");
    }
    open_engine(L);
    create_arg_table(L, argv, argc, script);
    if (!(args & has_E) && handle_luainit(L) != LUA_OK) return 0;
    if (!runargs(L, argv, script)) return 0;
    if (script < argc && handle_script(L, argv + script) != LUA_OK) return 0;
    if (args & has_i) {
        xsa_repl(L, 0);
    } else if (script == argc && !(args & (has_e | has_v))) {
        if (isatty(STDIN_FILENO))
            xsa_repl(L, 1);
        else if (dochunk(L, luaL_loadfile(L, NULL)) != LUA_OK)
            return 0;
    }
    lua_pushboolean(L, 1);
    return 1;
}

/* The first argument only: xsa's own long options (lua.c has none). */
static int long_option(lua_State *L, int argc, char **argv, int *status)
{
    const char *a = argc > 1 ? argv[1] : "";
    if (strcmp(a, "--help") == 0) {
        usage(NULL);
        *status = 0;
    } else if (strcmp(a, "--version") == 0) {
        print_version();
        *status = 0;
    } else if (strcmp(a, "--install-kernel") == 0) {
        *status = xsa_kernel_install(argc - 2, argv + 2);
    } else if (strcmp(a, "--kernel") == 0) {
        if (argc != 3) {
            xsa_message(xsa_progname, "--kernel needs one argument, the kernel's connection file");
            *status = 1;
            return 1;
        }
        luaL_openlibs(L);
        xsa_intr_open(L);
        find_modules(L);
        open_globals(L);
        *status = xsa_kernel_main(L, argv[2]);
    } else {
        return 0;
    }
    return 1;
}

int main(int argc, char **argv)
{
    if (argv[0] && argv[0][0]) xsa_progname = argv[0];
    maybe_reexec_for_blas(argv);
    if (xsa_gemm_init() != 0) {
        xsa_message(xsa_progname, xsa_last_error());
        return EXIT_FAILURE;
    }
    lua_State *L = luaL_newstate();
    if (L == NULL) {
        xsa_message(xsa_progname, "cannot create state: not enough memory");
        return EXIT_FAILURE;
    }
    int status;
    if (long_option(L, argc, argv, &status)) {
        lua_close(L);
        return status;
    }
    lua_pushcfunction(L, pmain);
    lua_pushinteger(L, argc);
    lua_pushlightuserdata(L, argv);
    status = lua_pcall(L, 2, 1, 0);
    int result = lua_toboolean(L, -1);
    xsa_report(L, status);
    if (!(result && status == LUA_OK) && xsa_comm_size() > 1) {
        /* the other ranks may be waiting in a collective for this one */
        fprintf(stderr, "%s: rank %d of %d failed; ending the job (MPI_Abort)\n", xsa_progname, xsa_comm_rank(),
                xsa_comm_size());
        xsa_comm_abort(1);
    }
    lua_close(L);
    if (result && status == LUA_OK) return EXIT_SUCCESS;
    return xsa_report_interrupted() ? 128 + xsa_intr_last_signal() : EXIT_FAILURE;
}

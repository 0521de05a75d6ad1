/*
 * main.c: the `xsa` executable: runs Lua scripts with the engine loaded and,
 * on a terminal with no script, an interactive REPL (libedit line editing
 * and history). Modelled on Lua's own lua.c (pmain, docall, msghandler,
 * laction): scripts run under lua_pcall with a traceback handler, errors go
 * to stderr with exit status 1, and Ctrl-C (SIGINT) or SIGTERM raises
 * "interrupted!" inside the running Lua code instead of killing the process
 * (so a training script can save its state; a second signal kills).
 *
 * Before Lua starts, the OpenBLAS kernel is checked: when the user has not
 * chosen one (OPENBLAS_CORETYPE unset) and OpenBLAS fell back to a kernel
 * below what the CPU supports, xsa re-executes itself once with the right
 * OPENBLAS_CORETYPE, because OpenBLAS reads it only when it loads; the same
 * re-execution sets OPENBLAS_THREAD_TIMEOUT when the user has not.
 *
 * Owns no Lua table or type: it opens the module (luaopen_xsa, l_init.c)
 * as the global `xsa`. Built into the executable only, never into xsa.so
 * (the Makefile's binding list is lua/l_*.c).
 *
 * Non-goals: lua.c's -l/-i/-W/-E options beyond what is listed in usage();
 * anything a binding does.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <editline/readline.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "../core/xsa.h"

int luaopen_xsa(lua_State *L);

static const char *progname = "xsa";
static lua_State *globalL = NULL;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: %s [options] [script [args...]]\n"
            "Runs a Lua 5.4 script with the xsa engine loaded (global `xsa`), or an\n"
            "interactive prompt when no script is given on a terminal.\n"
            "  -e CODE       run CODE (may be repeated; runs before the script)\n"
            "  -              read the script from standard input\n"
            "  -v, --version print the version, the OpenBLAS kernel and threads\n"
            "  -h, --help    this help\n"
            "  --            stop handling options\n"
            "Environment: XSA_DATA (data folder), OPENBLAS_CORETYPE (BLAS kernel;\n"
            "chosen automatically when unset), OPENBLAS_NUM_THREADS,\n"
            "OPENBLAS_THREAD_TIMEOUT (idle BLAS threads sleep after 2^N cycles; 4 when unset).\n",
            progname);
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
}

/* ---- Ctrl-C: as lua.c, a signal sets a hook that raises in Lua ----------
 * SIGTERM (kill's default) is treated the same way, so that a stopped run
 * saves what it has as after Ctrl-C.
 *
 * lua.c sets the hook on the main thread only, so a script busy inside a
 * coroutine never sees it. Here every thread carries a cheap count hook
 * that checks a flag: docall sets it on the main thread, and a coroutine
 * inherits the hook of the thread that creates it (lua_newthread copies it),
 * so every coroutine a script makes has it. The signal sets the flag and,
 * as lua.c, a hook firing at once on the main thread; whichever thread runs
 * first raises "interrupted!", once. coroutine.resume is wrapped so an
 * interrupt raised inside a coroutine propagates to its resumer as an error
 * (as coroutine.wrap does) instead of coming back as false, "interrupted!"
 * that a loop would ignore. pcall still catches it, as in lua.c. */

#define HOOK_COUNT 4096 /* VM instructions between two looks at the flag */

static volatile sig_atomic_t interrupt_pending = 0;
static unsigned long interrupts_raised = 0;

static void lhook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    lua_sethook(L, lhook, LUA_MASKCOUNT, HOOK_COUNT); /* back to the cheap check */
    if (interrupt_pending) {
        interrupt_pending = 0;
        interrupts_raised++;
        luaL_error(L, "interrupted!");
    }
}

static void laction(int sig)
{
    int flag = LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT;
    signal(sig, SIG_DFL); /* a second Ctrl-C kills, as in lua.c */
    interrupt_pending = 1;
    if (globalL) lua_sethook(globalL, lhook, flag, 1);
}

/* coroutine.resume, re-raising an interrupt raised inside the coroutine */
static int resume_interruptible(lua_State *L)
{
    unsigned long before = interrupts_raised;
    int n = lua_gettop(L);
    lua_pushvalue(L, lua_upvalueindex(1)); /* the original resume */
    lua_insert(L, 1);
    lua_call(L, n, LUA_MULTRET);
    if (interrupts_raised != before && lua_gettop(L) >= 2 && !lua_toboolean(L, 1) &&
        lua_type(L, 2) == LUA_TSTRING && strstr(lua_tostring(L, 2), "interrupted!")) {
        lua_settop(L, 2);
        return lua_error(L);
    }
    return lua_gettop(L);
}

static void wrap_resume(lua_State *L)
{
    lua_getglobal(L, "coroutine");
    if (lua_istable(L, -1)) {
        lua_getfield(L, -1, "resume");
        lua_pushcclosure(L, resume_interruptible, 1);
        lua_setfield(L, -2, "resume");
    }
    lua_pop(L, 1);
}

static int msghandler(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);
    if (msg == NULL) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
        msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

static int docall(lua_State *L, int narg, int nres)
{
    int base = lua_gettop(L) - narg;
    lua_pushcfunction(L, msghandler);
    lua_insert(L, base);
    globalL = L;
    interrupt_pending = 0;
    lua_sethook(L, lhook, LUA_MASKCOUNT, HOOK_COUNT); /* inherited by new coroutines */
    signal(SIGINT, laction);
    signal(SIGTERM, laction);
    int status = lua_pcall(L, narg, nres, base);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    lua_sethook(L, NULL, 0, 0);
    lua_remove(L, base);
    return status;
}

static void l_message(const char *msg)
{
    fprintf(stderr, "%s: %s\n", progname, msg);
    fflush(stderr);
}

static int report(lua_State *L, int status)
{
    if (status != LUA_OK) {
        l_message(lua_tostring(L, -1));
        lua_pop(L, 1);
    }
    return status;
}

/* ---- setting up the state ---------------------------------------------- */

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* package.path = DIR/?.lua;DIR/?/init.lua;<what it was> */
static void prepend_path(lua_State *L, const char *dir)
{
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "path");
    lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", dir, dir, lua_tostring(L, -1));
    lua_setfield(L, -3, "path");
    lua_pop(L, 2);
}

/* The checkout (or install) root: the folder holding lua/xsa/, searched from
 * the executable's folder and its parent (build/xsa lives one level down). */
static void add_module_paths(lua_State *L)
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
        prepend_path(L, lua_tostring(L, -1));
        lua_pop(L, 1);
        return;
    }
    /* an installed xsa: PREFIX/bin/xsa with modules in PREFIX/share/lua/5.4 */
    snprintf(probe, sizeof probe, "%s/../share/lua/5.4/xsa", exe);
    if (!is_dir(probe)) return;
    char *real = realpath(probe, NULL);
    if (!real) return;
    real[strlen(real) - strlen("/xsa")] = '\0';
    prepend_path(L, real);
    free(real);
}

static int open_engine(lua_State *L)
{
    luaL_openlibs(L);
    wrap_resume(L);
    add_module_paths(L);
    luaL_requiref(L, "xsa", luaopen_xsa, 1);
    lua_pop(L, 1);
    return 0;
}

/* arg table as lua.c builds it: script at 0, its args at 1.., options below. */
static void create_arg_table(lua_State *L, char **argv, int argc, int script)
{
    lua_createtable(L, argc - script - 1, script + 1);
    for (int i = 0; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i - script);
    }
    lua_setglobal(L, "arg");
}

static int run_chunk(lua_State *L, int status)
{
    if (status == LUA_OK) status = docall(L, 0, 0);
    return report(L, status);
}

static int run_script(lua_State *L, char **argv, int argc, int script)
{
    const char *fname = argv[script];
    if (strcmp(fname, "-") == 0 && strcmp(argv[script - 1], "--") != 0) fname = NULL;
    int status = luaL_loadfile(L, fname);
    if (status != LUA_OK) return report(L, status);
    int n = argc - script - 1;
    luaL_checkstack(L, n + 3, "too many arguments to script");
    for (int i = script + 1; i < argc; i++) lua_pushstring(L, argv[i]);
    status = docall(L, n, 0);
    return report(L, status);
}

/* ---- the REPL ------------------------------------------------------------ */

#define EOFMARK "<eof>"

static int incomplete(lua_State *L, int status)
{
    if (status == LUA_ERRSYNTAX) {
        size_t lmsg;
        const char *msg = lua_tolstring(L, -1, &lmsg);
        size_t lmark = sizeof(EOFMARK) - 1;
        if (lmsg >= lmark && strcmp(msg + lmsg - lmark, EOFMARK) == 0) {
            lua_pop(L, 1);
            return 1;
        }
    }
    return 0;
}

static char *history_path(void)
{
    const char *home = getenv("HOME");
    if (!home || !*home) return NULL;
    size_t n = strlen(home) + 32;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/.xsa_history", home);
    return p;
}

/* Set by Ctrl-C at the prompt: readline then returns NULL as it does at
 * end of input, and this tells the two apart. */
static volatile sig_atomic_t prompt_interrupted = 0;

/* Reads one line into a Lua string on the stack; 0 at end of input or when
 * Ctrl-C abandoned the line (prompt_interrupted set). */
static int push_line(lua_State *L, int first)
{
    char *line = readline(first ? "> " : ">> ");
    if (line == NULL) return 0;
    size_t len = strlen(line);
    if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
    if (first && line[0] == '=') /* Lua 5.1 habit: "=expr" prints expr */
        lua_pushfstring(L, "return %s", line + 1);
    else
        lua_pushlstring(L, line, len);
    free(line);
    return 1;
}

static int try_return(lua_State *L)
{
    const char *line = lua_tostring(L, -1);
    const char *retline = lua_pushfstring(L, "return %s;", line);
    int status = luaL_loadbuffer(L, retline, strlen(retline), "=stdin");
    if (status == LUA_OK) {
        lua_remove(L, -2);
        if (line[0] != '\0') add_history(line);
    } else {
        lua_pop(L, 2);
    }
    return status;
}

static int multiline(lua_State *L)
{
    for (;;) {
        size_t len;
        const char *line = lua_tolstring(L, 1, &len);
        int status = luaL_loadbuffer(L, line, len, "=stdin");
        if (!incomplete(L, status)) {
            add_history(line);
            return status;
        }
        if (!push_line(L, 0)) {
            add_history(line);
            if (prompt_interrupted) return -2;
            lua_pushliteral(L, "unfinished statement at end of input");
            return LUA_ERRSYNTAX;
        }
        lua_pushliteral(L, "\n");
        lua_insert(L, -2);
        lua_concat(L, 3);
    }
}

/* LUA_OK with a chunk on the stack, an error status with a message, -1 at
 * end of input, -2 when Ctrl-C abandoned the statement. */
static int load_line(lua_State *L)
{
    lua_settop(L, 0);
    if (!push_line(L, 1)) return prompt_interrupted ? -2 : -1;
    int status = try_return(L);
    if (status != LUA_OK) status = multiline(L);
    lua_remove(L, 1);
    return status;
}

static void print_results(lua_State *L)
{
    int n = lua_gettop(L);
    if (n == 0) return;
    luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
    lua_getglobal(L, "print");
    lua_insert(L, 1);
    if (lua_pcall(L, n, 0, 0) != LUA_OK)
        l_message(lua_pushfstring(L, "error calling 'print' (%s)", lua_tostring(L, -1)));
}

/* Ctrl-C at the prompt abandons the line instead of leaving the REPL. */
static void prompt_sigint(int sig)
{
    (void)sig;
    prompt_interrupted = 1;
    static const char msg[] = "\n(Ctrl-C: line abandoned; Ctrl-D leaves)\n";
    ssize_t ignored = write(STDOUT_FILENO, msg, sizeof msg - 1);
    (void)ignored;
}

/* ---- Tab completion: candidates from xsa.help.complete (lua/xsa/help.lua),
 * which walks globals, fields and metatables with rawget and evaluates
 * nothing. The word is the identifier path before the cursor ('.' and ':'
 * are not word breaks). */

static lua_State *complete_L = NULL;
static char **complete_list = NULL;
static size_t complete_n = 0, complete_next = 0;

static char *complete_generator(const char *text, int state)
{
    (void)text;
    if (state == 0) complete_next = 0;
    return complete_next < complete_n ? strdup(complete_list[complete_next++]) : NULL;
}

static char **complete(const char *text, int start, int end)
{
    (void)start;
    (void)end;
    rl_attempted_completion_over = 1; /* no file names */
    for (size_t i = 0; i < complete_n; i++) free(complete_list[i]);
    free(complete_list);
    complete_list = NULL;
    complete_n = 0;
    lua_State *L = complete_L;
    int top = lua_gettop(L);
    lua_getglobal(L, "require");
    lua_pushliteral(L, "xsa.help");
    if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_getfield(L, -1, "complete") == LUA_TFUNCTION) {
        lua_pushstring(L, text);
        if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_istable(L, -1)) {
            size_t n = lua_rawlen(L, -1);
            complete_list = calloc(n + 1, sizeof *complete_list);
            for (size_t i = 0; complete_list && i < n; i++) {
                lua_rawgeti(L, -1, (lua_Integer)i + 1);
                const char *c = lua_tostring(L, -1);
                if (c) complete_list[complete_n++] = strdup(c);
                lua_pop(L, 1);
            }
        }
    }
    lua_settop(L, top);
    if (complete_n == 0) return NULL;
    return rl_completion_matches(text, complete_generator);
}

static void repl(lua_State *L)
{
    char *hist = history_path();
    using_history();
    complete_L = L;
    rl_completer_word_break_characters = (char *)" \t\n\"'`@$><=;|&{}()[],+-*/%^~#";
    rl_completion_append_character = '\0';
    rl_attempted_completion_function = complete;
    /* help(x) at the prompt (xsa.help; scripts use xsa.help too) */
    if (luaL_dostring(L, "help = xsa.help") != LUA_OK) lua_pop(L, 1);
    if (hist) read_history(hist);
    printf("xsa %s  (Lua %s; OpenBLAS %s, %d threads)  Ctrl-D leaves.\n", XSA_VERSION,
           LUA_VERSION_MAJOR "." LUA_VERSION_MINOR, xsa_blas_corename(), xsa_threads());
    fflush(stdout);
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = prompt_sigint;
    sigemptyset(&sa.sa_mask);
    int status;
    for (;;) {
        prompt_interrupted = 0;
        sigaction(SIGINT, &sa, &old);
        status = load_line(L);
        sigaction(SIGINT, &old, NULL);
        if (status == -1) break;
        if (status == -2) {
            lua_settop(L, 0);
            continue;
        }
        if (status == LUA_OK) status = docall(L, 0, LUA_MULTRET);
        if (status == LUA_OK)
            print_results(L);
        else
            report(L, status);
        lua_settop(L, 0);
    }
    lua_settop(L, 0);
    fputc('\n', stdout);
    fflush(stdout);
    if (hist) {
        stifle_history(1000);
        write_history(hist);
        free(hist);
    }
}

/* ---- main ---------------------------------------------------------------- */

static int pmain(lua_State *L)
{
    int argc = (int)lua_tointeger(L, 1);
    char **argv = (char **)lua_touserdata(L, 2);
    open_engine(L);
    int script = 0;
    int i;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            lua_pushboolean(L, 1);
            return 1;
        }
        if (strcmp(a, "-v") == 0 || strcmp(a, "--version") == 0) {
            print_version();
            lua_pushboolean(L, 1);
            return 1;
        }
        if (strcmp(a, "-e") == 0) {
            if (i + 1 >= argc) {
                usage(stderr);
                lua_pushboolean(L, 0);
                return 1;
            }
            i++;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            if (i + 1 < argc) script = i + 1;
            break;
        }
        if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "%s: unrecognized option '%s'\n", progname, a);
            usage(stderr);
            lua_pushboolean(L, 0);
            return 1;
        }
        script = i;
        break;
    }
    create_arg_table(L, argv, argc, script ? script : argc - 1);
    int ran_e = 0;
    for (int j = 1; j < (script ? script : argc); j++) {
        if (strcmp(argv[j], "-e") == 0) {
            const char *code = argv[++j];
            ran_e = 1;
            if (run_chunk(L, luaL_loadbuffer(L, code, strlen(code), "=(command line)")) != LUA_OK) {
                lua_pushboolean(L, 0);
                return 1;
            }
        }
    }
    if (script) {
        if (run_script(L, argv, argc, script) != LUA_OK) {
            lua_pushboolean(L, 0);
            return 1;
        }
    } else if (!ran_e) {
        if (isatty(STDIN_FILENO)) {
            repl(L);
        } else if (run_chunk(L, luaL_loadfile(L, NULL)) != LUA_OK) {
            lua_pushboolean(L, 0);
            return 1;
        }
    }
    lua_pushboolean(L, 1);
    return 1;
}

int main(int argc, char **argv)
{
    if (argv[0] && argv[0][0]) progname = "xsa";
    maybe_reexec_for_blas(argv);
    lua_State *L = luaL_newstate();
    if (L == NULL) {
        l_message("cannot create state: not enough memory");
        return EXIT_FAILURE;
    }
    lua_pushcfunction(L, pmain);
    lua_pushinteger(L, argc);
    lua_pushlightuserdata(L, argv);
    int status = lua_pcall(L, 2, 1, 0);
    int result = lua_toboolean(L, -1);
    report(L, status);
    if (!(result && status == LUA_OK) && xsa_comm_size() > 1) {
        /* the other ranks may be waiting in a collective for this one */
        fprintf(stderr, "%s: rank %d of %d failed; ending the job (MPI_Abort)\n", progname, xsa_comm_rank(),
                xsa_comm_size());
        xsa_comm_abort(1);
    }
    lua_close(L);
    return (result && status == LUA_OK) ? EXIT_SUCCESS : EXIT_FAILURE;
}

/*
 * repl.c: the read-eval-print loop of the xsa executable (lua.c's doREPL):
 * a line is tried first as `return <line>;`, then as a statement, with
 * continuation lines while it is incomplete; the values are printed through
 * the global `print`; `=expr` prints expr; _PROMPT and _PROMPT2 set the
 * prompts (through tostring, as lua.c).
 *
 * On a terminal it adds libedit line editing, history (~/.xsa_history),
 * Tab completion from xsa.help.complete, `help` as a global, and Ctrl-C at
 * the prompt abandons the line. Off a terminal (`xsa -i < file`) it echoes
 * each line after its prompt, as lua.c built with readline does.
 *
 * One addition to lua.c: a line that starts with a `local` declaration
 * declares globals instead (xsa_repl_unlocal), because each line is its own
 * chunk and its locals would be gone at the next prompt; so a script pasted
 * line by line runs as it does from a file. `local x <close>` (an attribute)
 * is left a local: it is closed at the end of its line.
 *
 * Non-goals: running scripts and options (main.c), signals (interrupt.c).
 */
#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <editline/readline.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "../core/xsa.h"
#include "exe.h"

#define EOFMARK "<eof>"
#define MAXINPUT 4096 /* one line off a terminal; longer lines come in pieces */

static int on_tty = 0;

/* ---- `local` at the prompt ---- */

static const char *skip_space(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
    return p;
}

static const char *skip_name(const char *p)
{
    if (!(isalpha((unsigned char)*p) || *p == '_')) return NULL;
    while (isalnum((unsigned char)*p) || *p == '_') p++;
    return p;
}

int xsa_repl_unlocal(lua_State *L, const char *chunk)
{
    const char *p = skip_space(chunk);
    if (strncmp(p, "local", 5) != 0 || !(p[5] == ' ' || p[5] == '\t')) return 0;
    const char *names = skip_space(p + 5);
    if (strncmp(names, "function", 8) == 0 && !(isalnum((unsigned char)names[8]) || names[8] == '_')) {
        lua_pushstring(L, names); /* local function f -> function f */
        return 1;
    }
    const char *q = names, *end;
    for (;;) {
        if ((end = skip_name(q)) == NULL) return 0;
        q = skip_space(end);
        if (*q != ',') break;
        q = skip_space(q + 1);
    }
    if (*q == '=' && q[1] != '=') { /* local a, b = ... -> a, b = ... */
        lua_pushlstring(L, names, (size_t)(end - names));
        lua_pushfstring(L, " %s", q);
        lua_concat(L, 2);
        return 1;
    }
    if (*q == '\0' || *q == ';') { /* local a, b -> a, b = nil */
        lua_pushlstring(L, names, (size_t)(end - names));
        lua_pushfstring(L, " = nil%s", q);
        lua_concat(L, 2);
        return 1;
    }
    return 0; /* an attribute (<close>, <const>) or not a declaration */
}

/* ---- reading lines ---- */

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

/* lua.c's get_prompt: _PROMPT / _PROMPT2 through tostring, anchored on the stack */
static const char *get_prompt(lua_State *L, int first)
{
    if (lua_getglobal(L, first ? "_PROMPT" : "_PROMPT2") == LUA_TNIL) {
        lua_pop(L, 1);
        lua_pushstring(L, first ? "> " : ">> ");
        return lua_tostring(L, -1);
    }
    const char *p = luaL_tolstring(L, -1, NULL);
    lua_remove(L, -2);
    return p;
}

/* Set by Ctrl-C at the prompt: readline then returns NULL as it does at
 * end of input, and this tells the two apart. */
static volatile sig_atomic_t prompt_interrupted = 0;

/* A line (malloc'ed, no newline) or NULL at end of input. */
static char *read_line(const char *prompt)
{
    if (on_tty) return readline(prompt);
    char buf[MAXINPUT];
    fputs(prompt, stdout);
    fflush(stdout);
    if (fgets(buf, sizeof buf, stdin) == NULL) return NULL;
    size_t len = strlen(buf);
    if (len > 0 && buf[len - 1] == '\n') buf[--len] = '\0';
    printf("%s\n", buf); /* readline's echo off a terminal */
    return strdup(buf);
}

static void save_line(const char *line)
{
    if (on_tty && line[0] != '\0') add_history(line);
}

/* Reads one line into a Lua string on the stack; 0 at end of input or when
 * Ctrl-C abandoned the line (prompt_interrupted set). */
static int push_line(lua_State *L, int first)
{
    char *line = read_line(get_prompt(L, first));
    lua_pop(L, 1);
    if (line == NULL) return 0;
    if (first && line[0] == '=') /* Lua 5.1 habit: "=expr" prints expr */
        lua_pushfstring(L, "return %s", line + 1);
    else
        lua_pushstring(L, line);
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
        save_line(line);
    } else {
        lua_pop(L, 2);
    }
    return status;
}

/* Loads the statement at index 1, without a leading `local` (see above). */
static int load_statement(lua_State *L)
{
    size_t len;
    const char *chunk = lua_tolstring(L, 1, &len);
    if (xsa_repl_unlocal(L, chunk)) {
        chunk = lua_tolstring(L, -1, &len);
        int status = luaL_loadbuffer(L, chunk, len, "=stdin");
        lua_remove(L, -2);
        return status;
    }
    return luaL_loadbuffer(L, chunk, len, "=stdin");
}

static int multiline(lua_State *L)
{
    for (;;) {
        int status = load_statement(L);
        if (!incomplete(L, status)) {
            save_line(lua_tostring(L, 1));
            return status;
        }
        if (!push_line(L, 0)) {
            save_line(lua_tostring(L, 1));
            if (prompt_interrupted) return -2;
            if (!on_tty) return load_statement(L); /* lua.c: the syntax error as it is */
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
    /* print, with a training result or a summary (plain tables) as its
     * short summary rather than "table: 0x..." (lua/xsa/show.lua) */
    if (luaL_loadstring(L, "print(require('xsa.show').line(...))") != LUA_OK) {
        lua_pop(L, 1);
        lua_getglobal(L, "print");
    }
    lua_insert(L, 1);
    if (lua_pcall(L, n, 0, 0) != LUA_OK)
        xsa_message(NULL, lua_pushfstring(L, "error calling 'print' (%s)", lua_tostring(L, -1)));
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

static char *history_path(void)
{
    const char *home = getenv("HOME");
    if (!home || !*home) return NULL;
    size_t n = strlen(home) + 32;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/.xsa_history", home);
    return p;
}

static void loop(lua_State *L)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = prompt_sigint;
    sigemptyset(&sa.sa_mask);
    int status;
    for (;;) {
        prompt_interrupted = 0;
        if (on_tty) sigaction(SIGINT, &sa, &old);
        status = load_line(L);
        if (on_tty) sigaction(SIGINT, &old, NULL);
        if (status == -1) break;
        if (status == -2) {
            lua_settop(L, 0);
            continue;
        }
        if (status == LUA_OK) status = xsa_docall(L, 0, LUA_MULTRET);
        if (status == LUA_OK)
            print_results(L);
        else
            xsa_report(L, status);
        lua_settop(L, 0);
    }
    lua_settop(L, 0);
    fputc('\n', stdout);
    fflush(stdout);
}

void xsa_repl(lua_State *L, int banner)
{
    const char *progname = xsa_progname;
    xsa_progname = NULL; /* no program name on errors at the prompt, as lua.c */
    on_tty = isatty(STDIN_FILENO);
    if (!on_tty) {
        loop(L);
        xsa_progname = progname;
        return;
    }
    char *hist = history_path();
    using_history();
    complete_L = L;
    rl_completer_word_break_characters = (char *)" \t\n\"'`@$><=;|&{}()[],+-*/%^~#";
    rl_completion_append_character = '\0';
    rl_attempted_completion_function = complete;
    if (hist) read_history(hist);
    if (banner)
        printf("xsa %s  (Lua %s; OpenBLAS %s, float32 GEMM %s, %d threads)\n"
               "help() lists the modules, help(x) explains x; Tab completes; Ctrl-D leaves.\n",
               XSA_VERSION, LUA_VERSION_MAJOR "." LUA_VERSION_MINOR, xsa_blas_corename(),
               xsa_gemm_name(), xsa_threads());
    fflush(stdout);
    loop(L);
    if (hist) {
        stifle_history(1000);
        write_history(hist);
        free(hist);
    }
    xsa_progname = progname;
}

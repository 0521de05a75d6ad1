/*
 * exe.h: what the files of the `xsa` executable share (main.c, repl.c,
 * interrupt.c, kernel*.c). None of them is part of xsa.so, whose bindings
 * (lua/l_*.c) must not include this header.
 */
#ifndef XSA_EXE_H
#define XSA_EXE_H

#include <lua.h>

/* ---- interrupt.c: Ctrl-C, SIGTERM, coroutines and the messages of a failed call ---- */

/* Replaces coroutine.resume and coroutine.wrap by copies that record the
 * running coroutine, so an interrupt reaches the thread that runs. */
void xsa_intr_open(lua_State *L);
/* lua_pcall with a traceback handler, SIGINT/SIGTERM raising "interrupted!"
 * in the running Lua code meanwhile (lua.c's docall). */
int xsa_docall(lua_State *L, int narg, int nres);
/* The traceback message handler of xsa_docall (lua.c's msghandler). */
int xsa_msghandler(lua_State *L);
/* Kernel mode: a signal outside xsa_docall is ignored, and every signal
 * during one interrupts (a second one does not kill, as it does in a shell). */
void xsa_intr_kernel_mode(void);
/* For a C function that waits (the kernel's input): 1 when an interrupt is
 * pending for L, which is then taken (the caller raises it), else 0. */
int xsa_intr_take(lua_State *L);
/* The signal the last interrupt came from (SIGINT or SIGTERM; SIGINT when none). */
int xsa_intr_last_signal(void);
/* Prints "progname: msg" (or "msg" when pname is NULL) on stderr. */
void xsa_message(const char *pname, const char *msg);
/* Reports a failed status's message (on the stack top) and pops it. */
int xsa_report(lua_State *L, int status);
/* 1 when the last message xsa_report gave was an interrupt's ("interrupted!"
 * ends its first line): the executable then exits 128 + the signal. */
int xsa_report_interrupted(void);
/* The program name for messages: argv[0], NULL in the REPL (as lua.c). */
extern const char *xsa_progname;

/* ---- repl.c ---- */

/* The read-eval-print loop. On a terminal: libedit, history, Tab
 * completion and the xsa banner; otherwise lines from stdin echoed after
 * their prompt (as lua.c with readline does), for `xsa -i < file`. */
void xsa_repl(lua_State *L, int banner);
/* When `chunk` starts with a top-level `local` declaration, pushes it
 * without the `local` (a REPL line is its own chunk, so a local would be
 * gone at the next prompt) and returns 1; else pushes nothing, returns 0. */
int xsa_repl_unlocal(lua_State *L, const char *chunk);

/* ---- kernel.c ---- */

/* `xsa --kernel CONNECTION_FILE`: a Jupyter kernel until shutdown. */
int xsa_kernel_main(lua_State *L, const char *connection_file);
/* `xsa --install-kernel [--user|--prefix DIR]`: writes the kernelspec. */
int xsa_kernel_install(int argc, char **argv);

#endif

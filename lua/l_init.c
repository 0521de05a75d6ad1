/*
 * l_init.c: luaopen_xsa, the entry point of the Lua module (as Lua's
 * linit.c opens the standard libraries). Builds the `xsa` table: its own
 * functions (l_base.c), then one field per library table, each pushed by
 * the file that owns it; then lets pure-Lua submodules (lua/xsa/NAME.lua:
 * train, plot, args, report, ...) load on first use, so `xsa.train.pair`
 * works without an explicit require.
 *
 * Owns no functions of its own: only the list of libraries and the xsa
 * table's metatable (the lazy submodule loader).
 *
 * Non-goals: the executable (main.c), anything a library does.
 */
#include <string.h>

#include "l_bind.h"

/* The Lua half of the module (lua/xsa/NAME.lua; tests/test_reliability.lua
 * checks this list against the folder). */
static const char *const lua_modules[] = {"args", "attention", "cache", "checkpoint", "data", "endpoints", "executor",
                                          "experiment", "generate", "group", "help", "help_db", "notebook", "numbers",
                                          "options", "pair", "plot", "progress", "provenance", "record", "report", "reuse",
                                          "runs", "samples", "schedule", "show", "state_files", "stats", "store", "study",
                                          "sys", "text", "tokenizer", "train", NULL};

static int is_lua_module(const char *name)
{
    for (int i = 0; lua_modules[i]; i++)
        if (strcmp(name, lua_modules[i]) == 0) return 1;
    return 0;
}

/* Installed use (the rule): a stock lua5.4 that finds xsa.so through
 * LUA_CPATH but not the Lua modules through LUA_PATH gets, for any of them
 * (xsa.train, require "xsa.plot", model:generate), an error that names
 * LUA_PATH and the folder to add, never "attempt to index a nil value".
 * This searcher, last in package.searchers, supplies that text to require. */
static const char missing_half[] =
    "local name = ...\n"
    "local so = package.searchpath('xsa', package.cpath)\n"
    "local prefix = so and so:match('^(.*)/lib/lua/5%.4/xsa%.so$')\n"
    "local where = prefix and (prefix .. '/share/lua/5.4/?.lua') or 'FOLDER/?.lua'\n"
    "return string.format(\"xsa: %s is one of xsa's Lua modules (%s.lua), which are not on package.path; \" ..\n"
    "  \"set LUA_PATH to the folder that holds xsa/*.lua, e.g. LUA_PATH='%s;;' (for a rock: eval \\\"$(luarocks path)\\\")\",\n"
    "  name, name:gsub('%.', '/'), where)\n";

static int xsa_searcher(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    if (strncmp(name, "xsa.", 4) != 0 || !is_lua_module(name + 4)) {
        lua_pushnil(L);
        return 1;
    }
    if (luaL_loadbuffer(L, missing_half, sizeof missing_half - 1, "=xsa searcher") != LUA_OK) return lua_error(L);
    lua_pushvalue(L, 1);
    lua_call(L, 1, 1);
    return 1;
}

/* Appends xsa_searcher to package.searchers (once). */
static void add_searcher(lua_State *L)
{
    if (lua_getglobal(L, "package") != LUA_TTABLE || lua_getfield(L, -1, "searchers") != LUA_TTABLE) {
        lua_settop(L, lua_gettop(L) - (lua_type(L, -1) == LUA_TTABLE ? 2 : 1));
        return;
    }
    lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, -1, i);
        int same = lua_tocfunction(L, -1) == xsa_searcher;
        lua_pop(L, 1);
        if (same) {
            lua_pop(L, 2);
            return;
        }
    }
    lua_pushcfunction(L, xsa_searcher);
    lua_rawseti(L, -2, n + 1);
    lua_pop(L, 2);
}

/* Whether package.searchpath finds module `mod` in `path` (nil paths: no). */
static int searchable(lua_State *L, const char *mod, int path)
{
    if (lua_type(L, path) != LUA_TSTRING) return 0;
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "searchpath");
    lua_pushstring(L, mod);
    lua_pushvalue(L, path);
    lua_call(L, 2, 1);
    int found = !lua_isnil(L, -1);
    lua_pop(L, 2);
    return found;
}

/* __index of the xsa table: xsa.NAME -> require("xsa.NAME") for xsa's own
 * Lua modules (an error naming LUA_PATH when they cannot be found) and for
 * a module of that name on package.path or where the xsa executable keeps
 * its own (the registry's "xsa.path", which its searcher reads; main.c);
 * nil for anything else (no error on a plain miss: typos stay nil). */
static int lazy_submodule(lua_State *L)
{
    const char *name = luaL_checkstring(L, 2);
    const char *mod = lua_pushfstring(L, "xsa.%s", name);
    if (!is_lua_module(name)) {
        lua_getglobal(L, "package");
        lua_getfield(L, -1, "path");
        lua_getfield(L, LUA_REGISTRYINDEX, "xsa.path");
        int top = lua_gettop(L);
        if (!searchable(L, mod, top - 1) && !searchable(L, mod, top)) {
            lua_pushnil(L);
            return 1;
        }
    }
    lua_getglobal(L, "require");
    lua_pushstring(L, mod);
    lua_call(L, 1, 1);
    lua_pushvalue(L, -1);
    lua_setfield(L, 1, name); /* cache: next access is a plain field */
    return 1;
}

/* The library tables: xsa.NAME = what the function pushes. */
static const luaL_Reg libs[] = {
    {"nn", xsa_lua_open_nn},
    {"gpt", xsa_lua_open_gpt},
    {"optim", xsa_lua_open_optim},
    {"safetensors", xsa_lua_open_safetensors},
    {"json", xsa_lua_open_json},
    {"_tokenizer", xsa_lua_open_bpe},
    {"_data", xsa_lua_open_data},
    {"_text", xsa_lua_open_text},
    {"_proc", xsa_lua_open_proc},
    {"mpi", xsa_lua_open_mpi},
    {NULL, NULL},
};

/* xsa.core: every C function and library table, and nothing else. The Lua
 * modules require it for what they use from C (require "xsa.core"), so no
 * module reaches back into the facade that loads them. A stock lua5.4
 * finds it in xsa.so as luaopen_xsa_core (Lua's all-in-one C loader). */
int luaopen_xsa_core(lua_State *L);
int luaopen_xsa_core(lua_State *L)
{
    /* a bad XSA_GEMM stops the module here, before any product runs */
    if (xsa_gemm_init() != 0) return luaL_error(L, "xsa: %s", xsa_last_error());
    xsa_lua_open_tensor(L);
    xsa_lua_open_generator(L);
    xsa_lua_open_base(L);
    for (const luaL_Reg *lib = libs; lib->func; lib++) {
        lib->func(L);
        lua_setfield(L, -2, lib->name);
    }
    lua_getfield(L, -1, "gpt");
    xsa_lua_open_generate(L); /* the model's generate and kv_cache; xsa.gpt.sample... */
    lua_pop(L, 1);
    return 1;
}

/* xsa, the facade: a copy of xsa.core's fields whose metatable loads the Lua
 * modules on first use. It only aggregates: nothing below it reads it. */
int luaopen_xsa(lua_State *L);
int luaopen_xsa(lua_State *L)
{
    luaL_requiref(L, "xsa.core", luaopen_xsa_core, 0);
    lua_newtable(L);
    lua_pushnil(L);
    while (lua_next(L, -3)) {
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, -4);
    }
    lua_remove(L, -2);
    add_searcher(L);
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, lazy_submodule);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, -2);
    return 1;
}

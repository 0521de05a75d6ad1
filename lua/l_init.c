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

/* __index of the xsa table: xsa.NAME -> require("xsa.NAME") for names that
 * are Lua submodules; nil for anything else (no error on a plain miss).
 * The modules are on package.path, or where the xsa executable keeps its
 * own (the registry's "xsa.path", which its searcher reads; main.c). */
static int lazy_submodule(lua_State *L)
{
    const char *name = luaL_checkstring(L, 2);
    const char *mod = lua_pushfstring(L, "xsa.%s", name);
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "path");
    lua_getfield(L, LUA_REGISTRYINDEX, "xsa.path");
    int top = lua_gettop(L);
    if (!searchable(L, mod, top - 1) && !searchable(L, mod, top)) {
        lua_pushnil(L);
        return 1;
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
    {"mpi", xsa_lua_open_mpi},
    {NULL, NULL},
};

int luaopen_xsa(lua_State *L);
int luaopen_xsa(lua_State *L)
{
    xsa_lua_open_tensor(L);
    xsa_lua_open_generator(L);
    xsa_lua_open_base(L);
    for (const luaL_Reg *lib = libs; lib->func; lib++) {
        lib->func(L);
        lua_setfield(L, -2, lib->name);
    }
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, lazy_submodule);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, -2);
    return 1;
}

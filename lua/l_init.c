/*
 * l_init.c: luaopen_xsa, the entry point of the Lua module. Builds the `xsa`
 * table from the binding files, then lets pure-Lua submodules (lua/xsa/NAME.lua:
 * train, plot, args, report, ...) load on first use, so `xsa.train.pair`
 * works without an explicit require.
 */
#include <string.h>

#include "l_bind.h"

/* __index of the xsa table: xsa.NAME -> require("xsa.NAME") for names that
 * are Lua submodules; nil for anything else (no error on a plain miss). */
static int lazy_submodule(lua_State *L)
{
    const char *name = luaL_checkstring(L, 2);
    lua_getglobal(L, "require");
    lua_pushfstring(L, "xsa.%s", name);
    /* only try names that have a searchable module, so typos stay nil */
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "searchpath");
    lua_pushfstring(L, "xsa.%s", name);
    lua_getfield(L, -3, "path");
    lua_call(L, 2, 1);
    int found = !lua_isnil(L, -1);
    lua_pop(L, 2);
    if (!found) {
        lua_pop(L, 2);
        lua_pushnil(L);
        return 1;
    }
    lua_call(L, 1, 1);
    lua_pushvalue(L, -1);
    lua_setfield(L, 1, name); /* cache: next access is a plain field */
    return 1;
}

static int l_version(lua_State *L)
{
    lua_pushstring(L, XSA_VERSION);
    return 1;
}

static int l_blas(lua_State *L)
{
    lua_createtable(L, 0, 4);
    lua_pushstring(L, xsa_blas_corename());
    lua_setfield(L, -2, "core");
    const char *best = xsa_cpu_best_coretype();
    lua_pushstring(L, best ? best : "none");
    lua_setfield(L, -2, "best");
    lua_pushboolean(L, xsa_blas_is_fallback());
    lua_setfield(L, -2, "fallback");
    lua_pushinteger(L, xsa_threads());
    lua_setfield(L, -2, "threads");
    return 1;
}

static int l_set_threads(lua_State *L)
{
    lua_Integer n = luaL_checkinteger(L, 1);
    luaL_argcheck(L, n >= 1 && n <= 1024, 1, "thread count must be in [1, 1024]");
    if (xsa_set_threads((int)n) != 0) return xsa_lua_corefail(L);
    return 0;
}

static const luaL_Reg funcs[] = {
    {"version", l_version},
    {"blas", l_blas},
    {"set_threads", l_set_threads},
    {NULL, NULL},
};

int luaopen_xsa(lua_State *L);
int luaopen_xsa(lua_State *L)
{
    luaL_newlib(L, funcs);
    lua_pushstring(L, XSA_VERSION);
    lua_setfield(L, -2, "_VERSION");
    xsa_lua_open_tensor(L);
    xsa_lua_open_autograd(L);
    xsa_lua_open_gpt(L);
    xsa_lua_open_safetensors(L);
    xsa_lua_open_bpe(L);
    xsa_lua_open_data(L);
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, lazy_submodule);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, -2);
    return 1;
}

/*
 * l_base.c: the `xsa` table's own functions (as Lua's lbaselib.c holds the
 * global functions; l_init.c builds the module, as linit.c does):
 *   xsa._VERSION, xsa.version(), xsa.blas() -> {core=, best=, fallback=,
 *   threads=}, xsa.set_threads(n)
 *   xsa.read_file(path) -> bytes | nil, message
 *   xsa.write_file_atomic(path, s) -> true (temporary file, then rename)
 *   xsa.no_grad(fn, ...) xsa.grad_enabled() xsa.set_grad_enabled(flag)
 *
 * Owns the functions of the xsa table; the tables inside it (xsa.json,
 * xsa.nn, ...) belong to their own files and are set by l_init.c.
 *
 * Non-goals: algorithms and file formats (core/), decompression
 * (xsa._data.read_text, l_data.c), JSON files (xsa.json, l_json.c).
 */
#include "l_bind.h"

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

/* ---- whole files ------------------------------------------------------- */

static int l_write_file_atomic(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    luaL_checkstring(L, 2);
    return xsa_lua_writeresult(L, path, 2);
}

static int l_read_file(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    size_t n;
    char *text = xsa_read_file(path, &n);
    return xsa_lua_textresult(L, text, n);
}

/* ---- grad mode ----------------------------------------------------------- */

/* xsa.no_grad(fn, ...): fn's results; grad mode restored even if fn raises */
static int l_no_grad(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TFUNCTION);
    int n = lua_gettop(L);
    int prev = xsa_ag_set_enabled(0);
    int rc = lua_pcall(L, n - 1, LUA_MULTRET, 0);
    xsa_ag_set_enabled(prev);
    if (rc != LUA_OK) return lua_error(L);
    return lua_gettop(L);
}

static int l_grad_enabled(lua_State *L)
{
    lua_pushboolean(L, xsa_ag_is_enabled());
    return 1;
}

/* xsa.set_grad_enabled(flag) -> previous flag */
static int l_set_grad_enabled(lua_State *L)
{
    luaL_checkany(L, 1);
    lua_pushboolean(L, xsa_ag_set_enabled(lua_toboolean(L, 1)));
    return 1;
}

/* ---- registration ------------------------------------------------------ */

static const luaL_Reg base_funcs[] = {
    {"version", l_version},
    {"blas", l_blas},
    {"set_threads", l_set_threads},
    {"write_file_atomic", l_write_file_atomic},
    {"read_file", l_read_file},
    {"no_grad", l_no_grad},
    {"grad_enabled", l_grad_enabled},
    {"set_grad_enabled", l_set_grad_enabled},
    {NULL, NULL},
};

/* Pushes the xsa table with its own functions. */
int xsa_lua_open_base(lua_State *L)
{
    luaL_newlib(L, base_funcs);
    lua_pushstring(L, XSA_VERSION);
    lua_setfield(L, -2, "_VERSION");
    return 1;
}

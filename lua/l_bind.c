/*
 * l_bind.c: helpers every binding file shares (declared in l_bind.h):
 * raising a core failure as a Lua error, reading and writing whole files
 * with luaL_fileresult's conventions, and the box that frees a C buffer when
 * a Lua error unwinds past the function that holds it; creating a
 * userdata type's metatable (liolib.c's createmeta); reading options tables
 * (xsa.gpt{...}, xsa.optim.adamw(params, {...})).
 *
 * Owns the userdata type "xsa.box": a pointer and the function that frees
 * it. A box lives only on a C function's stack; Lua code never sees one.
 * Registers no Lua table.
 *
 * Non-goals: helpers one binding file alone needs (they stay static there);
 * typed userdata (each type has its own file, check function and __gc).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "l_bind.h"

#define BOX_MT "xsa.box"

typedef struct {
    void *p;
    void (*free)(void *);
} box;

int xsa_lua_corefail(lua_State *L)
{
    return luaL_error(L, "%s", xsa_last_error());
}

int xsa_lua_textresult(lua_State *L, char *text, size_t n)
{
    if (!text) {
        lua_pushnil(L);
        lua_pushstring(L, xsa_last_error());
        return 2;
    }
    /* lua_pushlstring can only fail by a memory error; keep the buffer in a
     * userdata-free path by pushing first, then freeing */
    lua_pushlstring(L, text, n);
    free(text);
    return 1;
}

int xsa_lua_writeresult(lua_State *L, const char *path, int idx)
{
    size_t n;
    const char *s = lua_tolstring(L, idx, &n);
    if (xsa_atomic_write(path, s, n) != 0) return xsa_lua_corefail(L);
    lua_pushboolean(L, 1);
    return 1;
}

/* __gc: frees what the box still holds; a box emptied by its user (the slot
 * set back to NULL) frees nothing. */
static int box_gc(lua_State *L)
{
    box *b = luaL_checkudata(L, 1, BOX_MT);
    if (b->p) b->free(b->p);
    b->p = NULL;
    return 0;
}

void **xsa_lua_newbox(lua_State *L, void (*free_fn)(void *))
{
    box *b = lua_newuserdatauv(L, sizeof *b, 0);
    b->p = NULL;
    b->free = free_fn;
    if (luaL_newmetatable(L, BOX_MT)) {
        lua_pushcfunction(L, box_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_setmetatable(L, -2);
    return &b->p;
}

void xsa_lua_newtype(lua_State *L, const char *name, const luaL_Reg *meta,
                     const luaL_Reg *methods)
{
    luaL_newmetatable(L, name);
    luaL_setfuncs(L, meta, 0);
    lua_newtable(L);
    luaL_setfuncs(L, methods, 0);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
}

/* ---- options tables ------------------------------------------------------ */

int xsa_lua_opterror(lua_State *L, const char *fn, const char *msg)
{
    return luaL_error(L, "%s: %s", fn, msg);
}

double xsa_lua_numfield(lua_State *L, const char *fn, const char *key)
{
    if (lua_type(L, -1) != LUA_TNUMBER)
        return xsa_lua_opterror(L, fn, lua_pushfstring(L, "%s must be a number (got %s)", key,
                                                       luaL_typename(L, -1)));
    double v = lua_tonumber(L, -1);
    if (!isfinite(v)) return xsa_lua_opterror(L, fn, lua_pushfstring(L, "%s must be finite", key));
    return v;
}

void xsa_lua_checkkeys(lua_State *L, const char *fn, int arg, const char *const *allowed)
{
    lua_pushnil(L);
    while (lua_next(L, arg)) {
        lua_pop(L, 1);
        int ok = 0;
        if (lua_type(L, -1) == LUA_TSTRING) {
            const char *k = lua_tostring(L, -1);
            for (int i = 0; allowed[i]; i++)
                if (strcmp(k, allowed[i]) == 0) ok = 1;
        }
        if (!ok) {
            const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1)
                                                            : luaL_typename(L, -1);
            xsa_lua_opterror(L, fn, lua_pushfstring(L, "unknown option '%s'", k));
        }
    }
}

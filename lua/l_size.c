/*
 * l_size.c: the metatable "xsa.size" of the lists tensor:shape() and
 * tensor:size() return. They stay plain Lua lists of integers (#, indexing,
 * ipairs, table.unpack, JSON) that print as `xsa.size{16, 64}` instead of a
 * table address, as torch7's LongStorage printed its sizes.
 *
 * Owns only the metatable (__name, __tostring), made on first use.
 * Non-goals: arithmetic or comparison of sizes (== compares identity).
 */
#include "l_bind.h"

#define SIZE_MT "xsa.size"

/* "xsa.size{d1, d2, ...}" of whatever the list holds now (a user may edit it) */
static int size_tostring(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addstring(&b, "xsa.size{");
    lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
    for (lua_Integer i = 1; i <= n; i++) {
        if (i > 1) luaL_addstring(&b, ", ");
        lua_rawgeti(L, 1, i);
        luaL_tolstring(L, -1, NULL);
        lua_remove(L, -2);
        luaL_addvalue(&b);
    }
    luaL_addchar(&b, '}');
    luaL_pushresult(&b);
    return 1;
}

void xsa_lua_pushsize(lua_State *L, int n, const int64_t *v)
{
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_pushinteger(L, v[i]);
        lua_rawseti(L, -2, i + 1);
    }
    if (luaL_newmetatable(L, SIZE_MT)) {
        lua_pushcfunction(L, size_tostring);
        lua_setfield(L, -2, "__tostring");
    }
    lua_setmetatable(L, -2);
}

/*
 * fuzz_lua.h: what the harnesses that drive xsa through Lua share
 * (fuzz_json, fuzz_lua_api, fuzz_record): a state with Lua's libraries and
 * xsa, a driver chunk that is called once with a value and returns the
 * function each input goes to, and that call, where any error is a finding
 * (abort). Header-only: each harness is one program.
 */
#ifndef XSA_FUZZ_LUA_H
#define XSA_FUZZ_LUA_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

int luaopen_xsa(lua_State *L);

/* A state with the libraries and xsa on top of the stack; with root, the
 * Lua modules (xsa.data ...) come from ROOT/lua. */
static lua_State *fuzz_lua_open(const char *root)
{
    lua_State *L = luaL_newstate();
    if (!L) abort();
    luaL_openlibs(L);
    if (root) {
        lua_getglobal(L, "package");
        lua_pushfstring(L, "%s/lua/?.lua;%s/lua/?/init.lua;", root, root);
        lua_getfield(L, -2, "path");
        lua_concat(L, 2);
        lua_setfield(L, -2, "path");
        lua_pop(L, 1);
    }
    luaL_requiref(L, "xsa", luaopen_xsa, 1);
    return L;
}

/* Runs the driver chunk src with the value on top of the stack (popped);
 * returns a reference to the function it returns. */
static int fuzz_lua_driver(lua_State *L, const char *name, const char *src, size_t n)
{
    if (luaL_loadbuffer(L, src, n, name) != LUA_OK || (lua_insert(L, -2), lua_pcall(L, 1, 1, 0)) != LUA_OK) {
        fprintf(stderr, "%s: %s\n", name, lua_tostring(L, -1));
        abort();
    }
    int ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_settop(L, 0);
    return ref;
}

/* The function of ref called with the input's bytes; an error aborts. */
static void fuzz_lua_call(lua_State *L, int ref, const char *name, const uint8_t *data, size_t size)
{
    lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
    lua_pushlstring(L, (const char *)data, size);
    if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
        fprintf(stderr, "%s: %s\n", name, lua_tostring(L, -1));
        abort();
    }
    lua_settop(L, 0);
}

#endif

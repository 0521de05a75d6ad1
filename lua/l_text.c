/*
 * l_text.c: the C side of xsa.text (core/text.h), registered as xsa._text:
 *   xsa._text.chars(s) -> {c1, c2, ...}, {w1, w2, ...}
 *       the characters of s (valid UTF-8 sequences, or single invalid
 *       bytes) and their display widths
 *   xsa._text.width(s) -> the display width of s (the sum of the widths)
 * lua/xsa/text.lua wraps, pads and cuts on these.
 *
 * Owns the xsa._text table. Non-goals: wrapping (text.lua).
 */
#include "l_bind.h"

static int l_chars(lua_State *L)
{
    size_t n;
    const char *s = luaL_checklstring(L, 1, &n);
    lua_createtable(L, (int)(n < 1u << 20 ? n : 1u << 20), 0);
    lua_createtable(L, (int)(n < 1u << 20 ? n : 1u << 20), 0);
    lua_Integer k = 0;
    for (size_t i = 0; i < n;) {
        int32_t cp;
        size_t len = xsa_utf8_char(s + i, n - i, &cp);
        lua_pushlstring(L, s + i, len);
        lua_rawseti(L, -3, ++k);
        lua_pushinteger(L, xsa_char_width(cp));
        lua_rawseti(L, -2, k);
        i += len;
    }
    return 2;
}

static int l_width(lua_State *L)
{
    size_t n;
    const char *s = luaL_checklstring(L, 1, &n);
    lua_Integer w = 0;
    for (size_t i = 0; i < n;) {
        int32_t cp;
        i += xsa_utf8_char(s + i, n - i, &cp);
        w += xsa_char_width(cp);
    }
    lua_pushinteger(L, w);
    return 1;
}

static const luaL_Reg funcs[] = {
    {"chars", l_chars},
    {"width", l_width},
    {NULL, NULL},
};

int xsa_lua_open_text(lua_State *L)
{
    luaL_newlib(L, funcs);
    return 1;
}

/*
 * l_bpe.c: the tokenizer userdata ("xsa.tokenizer") over core/bpe.h.
 *
 * Owns the xsa._tokenizer table, { load = function(encoder_json, vocab_bpe) },
 * and the tokenizer type it constructs (as liolib.c owns io and its file
 * handles); other binding files take a tokenizer with xsa_lua_checkbpe.
 * The public face, xsa.tokenizer (gpt2(), which finds the files, and load()),
 * is lua/xsa/tokenizer.lua. Methods (ids are 0-based GPT-2 ids):
 *   tok:encode(str [, {special = true, table = true}]) -> int32 tensor [n] (or table)
 *   tok:encode_table(str [, opts])   -> {ids...}
 *   tok:count(str [, opts])          -> number of tokens
 *   tok:decode(ids)                  -> string (ids: int32 tensor or table)
 *   tok:vocab_size(), tok:eot(), tok:token(id) -> bytes, tok:identity() -> hex
 *   tok:free() / <close>
 * Non-goals: algorithm code (all in core/bpe.c).
 */
#include <stdlib.h>
#include <string.h>

#include "l_bind.h"

#define TOKENIZER_MT "xsa.tokenizer"

typedef struct {
    xsa_bpe *b;
} lbpe;

static xsa_bpe *check(lua_State *L)
{
    lbpe *u = luaL_checkudata(L, 1, TOKENIZER_MT);
    if (!u->b) luaL_error(L, "attempt to use a freed tokenizer");
    return u->b;
}

static int t_gc(lua_State *L)
{
    lbpe *u = luaL_checkudata(L, 1, TOKENIZER_MT);
    xsa_bpe_free(u->b);
    u->b = NULL;
    return 0;
}

static int t_tostring(lua_State *L)
{
    lbpe *u = luaL_checkudata(L, 1, TOKENIZER_MT);
    if (!u->b) lua_pushstring(L, "xsa.tokenizer (freed)");
    else lua_pushfstring(L, "xsa.tokenizer (GPT-2 byte-level BPE, %d tokens)", xsa_bpe_vocab_size(u->b));
    return 1;
}

static int l_load(lua_State *L)
{
    const char *enc = luaL_checkstring(L, 1);
    const char *voc = luaL_checkstring(L, 2);
    lbpe *u = lua_newuserdatauv(L, sizeof *u, 0);
    u->b = NULL;
    luaL_setmetatable(L, TOKENIZER_MT);
    u->b = xsa_bpe_load(enc, voc);
    if (!u->b) return xsa_lua_corefail(L);
    return 1;
}

/* opts at idx: nil or a table; reads the boolean field `name` */
static int optflag(lua_State *L, int idx, const char *name)
{
    if (lua_isnoneornil(L, idx)) return 0;
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_getfield(L, idx, name);
    int v = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return v;
}

/* Encodes argument 2 of the tokenizer at 1 with options at 3; the ids stay
 * owned by a box at the top of the stack. The arguments are read (options
 * run __index, a number converts to a string: both can run Lua that frees
 * the tokenizer) and the box allocated before the tokenizer is taken. */
static int32_t *encode_boxed(lua_State *L, size_t *n)
{
    check(L);
    size_t len;
    const char *s = luaL_checklstring(L, 2, &len);
    int flags = optflag(L, 3, "special") ? XSA_BPE_SPECIAL : 0;
    void **bx = xsa_lua_newbox(L, free); /* a Lua error cannot leak the ids */
    xsa_bpe *b = check(L);
    int32_t *ids = xsa_bpe_encode(b, s, len, flags, n);
    if (!ids) xsa_lua_corefail(L);
    *bx = ids;
    return ids;
}

static int push_table(lua_State *L, const int32_t *ids, size_t n)
{
    lua_createtable(L, (int)(n < (size_t)1 << 30 ? n : 0), 0);
    for (size_t i = 0; i < n; i++) {
        lua_pushinteger(L, ids[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

static int t_encode_table(lua_State *L)
{
    size_t n;
    int32_t *ids = encode_boxed(L, &n);
    return push_table(L, ids, n);
}

static int t_encode(lua_State *L)
{
    check(L);
    if (optflag(L, 3, "table")) return t_encode_table(L);
    size_t n;
    int32_t *ids = encode_boxed(L, &n);
    int64_t shape[1] = {(int64_t)n};
    xsa_tensor *t = xsa_tensor_new(XSA_INT32, 1, shape);
    if (!t) return xsa_lua_corefail(L);
    if (n) memcpy(xsa_tensor_i32(t), ids, n * sizeof *ids);
    xsa_lua_pushtensor(L, t);
    return 1;
}

static int t_count(lua_State *L)
{
    size_t n;
    encode_boxed(L, &n);
    lua_pushinteger(L, (lua_Integer)n);
    return 1;
}

static int t_decode(lua_State *L)
{
    check(L);
    void **ids_box = xsa_lua_newbox(L, free);
    size_t n = 0;
    const int32_t *ids = NULL;
    xsa_tensor *t = xsa_lua_testtensor(L, 2);
    if (t) {
        if (t->dtype != XSA_INT32)
            return luaL_argerror(L, 2, "ids must be an int32 tensor or a table of integers");
        xsa_tensor *c = xsa_tensor_contiguous(t);
        if (!c) return xsa_lua_corefail(L);
        n = (size_t)xsa_tensor_numel(c);
        int32_t *copy = malloc((n ? n : 1) * sizeof *copy);
        if (copy && n) memcpy(copy, xsa_tensor_i32(c), n * sizeof *copy);
        xsa_tensor_free(c);
        if (!copy) return luaL_error(L, "decode: out of memory");
        *ids_box = copy;
        ids = copy;
    } else if (lua_type(L, 2) == LUA_TTABLE) {
        n = (size_t)lua_rawlen(L, 2);
        int32_t *v = malloc((n ? n : 1) * sizeof *v);
        if (!v) return luaL_error(L, "decode: out of memory");
        *ids_box = v;
        for (size_t i = 0; i < n; i++) {
            lua_rawgeti(L, 2, (lua_Integer)i + 1);
            int isnum;
            lua_Integer x = lua_tointegerx(L, -1, &isnum);
            lua_pop(L, 1);
            if (!isnum || x < INT32_MIN || x > INT32_MAX)
                return luaL_error(L, "decode: ids[%d] is not an integer id", (int)i + 1);
            v[i] = (int32_t)x;
        }
        ids = v;
    } else {
        return luaL_argerror(L, 2, "ids must be an int32 tensor or a table of integers");
    }
    void **out = xsa_lua_newbox(L, free);
    xsa_bpe *b = check(L); /* after the allocations above: rule 1 of l_bind.h */
    size_t len;
    const char *text = *out = xsa_bpe_decode(b, ids, n, &len);
    if (!text) return xsa_lua_corefail(L);
    lua_pushlstring(L, text, len);
    return 1;
}

static int t_vocab_size(lua_State *L)
{
    lua_pushinteger(L, xsa_bpe_vocab_size(check(L)));
    return 1;
}

static int t_eot(lua_State *L)
{
    lua_pushinteger(L, xsa_bpe_eot(check(L)));
    return 1;
}

static int t_token(lua_State *L)
{
    xsa_bpe *b = check(L);
    lua_Integer id = luaL_checkinteger(L, 2);
    size_t len;
    const char *s = id >= INT32_MIN && id <= INT32_MAX ? xsa_bpe_token(b, (int32_t)id, &len) : NULL;
    if (!s) return luaL_argerror(L, 2, lua_pushfstring(L, "token id %I is out of range [0, %d)", id,
                                                        xsa_bpe_vocab_size(b)));
    lua_pushlstring(L, s, len);
    return 1;
}

static int t_identity(lua_State *L)
{
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)xsa_bpe_identity(check(L)));
    lua_pushstring(L, hex);
    return 1;
}

static const luaL_Reg methods[] = {
    {"encode", t_encode},
    {"encode_table", t_encode_table},
    {"count", t_count},
    {"decode", t_decode},
    {"vocab_size", t_vocab_size},
    {"eot", t_eot},
    {"token", t_token},
    {"identity", t_identity},
    {"free", t_gc},
    {NULL, NULL},
};

static const luaL_Reg meta[] = {
    {"__gc", t_gc},
    {"__close", t_gc},
    {"__tostring", t_tostring},
    {NULL, NULL},
};

xsa_bpe *xsa_lua_checkbpe(lua_State *L, int idx)
{
    lbpe *u = luaL_checkudata(L, idx, TOKENIZER_MT);
    if (!u->b) luaL_error(L, "attempt to use a freed tokenizer");
    return u->b;
}

/* Creates the tokenizer's metatable; pushes the xsa._tokenizer table. */
int xsa_lua_open_bpe(lua_State *L)
{
    xsa_lua_newtype(L, TOKENIZER_MT, meta, methods);
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, l_load);
    lua_setfield(L, -2, "load");
    return 1;
}

/*
 * l_data.c: the C side of xsa.data (core/data.h), registered as xsa._data;
 * lua/xsa/data.lua builds the public loaders on it.
 *   xsa._data.read_text(path) -> bytes (xz decompressed) | nil, message
 *   xsa._data.max_text_bytes([n]) -> the limit of a decompressed text (core/xz.h)
 *   xsa._data.is_file(path), xsa._data.is_dir(path)
 *   xsa._data.story_tokens(tok, source [, cache]) -> int32 tensor [N], status
 *       status = {from_cache=, reason=, written=, write_error=}
 *   xsa._data.tokenize_stories(tok, text) -> int32 tensor [N]
 *   xsa._data.split(n_tokens, seq_len, val_fraction) -> n_windows, n_train
 *   xsa._data.loader(tokens, first_window, n_windows, seq_len, batch, shuffle, seed)
 *       -> userdata with :num_batches() :batch(i) :next() :reset() :epoch()
 *          :position() :seek(epoch, position) :window(k) (1-based i, k, epochs
 *          and window numbers; position = batches taken this epoch)
 *
 * Owns the xsa._data table and the loader type ("xsa.data.loader") its
 * loader() constructs (as liolib.c owns io and its file handles).
 *
 * Non-goals: finding files, the loader protocol's fields (data.lua).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "l_bind.h"

#define LOADER_MT "xsa.data.loader"

typedef struct {
    xsa_data_loader *l;
} lloader;

static xsa_data_loader *check(lua_State *L)
{
    lloader *u = luaL_checkudata(L, 1, LOADER_MT);
    if (!u->l) luaL_error(L, "attempt to use a freed loader");
    return u->l;
}

static int ld_gc(lua_State *L)
{
    lloader *u = luaL_checkudata(L, 1, LOADER_MT);
    xsa_data_loader_free(u->l);
    u->l = NULL;
    return 0;
}

/* ids (malloc'd, consumed) -> tensor pushed, or a Lua error after freeing */
static void push_ids(lua_State *L, int32_t *ids, size_t n)
{
    int64_t shape[1] = {(int64_t)n};
    xsa_tensor *t = xsa_tensor_new(XSA_INT32, 1, shape);
    if (t && n) memcpy(xsa_tensor_i32(t), ids, n * sizeof *ids);
    free(ids);
    xsa_lua_pushtensor(L, t); /* raises the core error when t is NULL */
}

static int l_story_tokens(lua_State *L)
{
    xsa_lua_checkbpe(L, 1);
    const char *src = luaL_checkstring(L, 2); /* a number converts: allocates */
    const char *cache = luaL_optstring(L, 3, NULL);
    xsa_bpe *tok = xsa_lua_checkbpe(L, 1); /* the pointer after: rule 1 of l_bind.h */
    xsa_data_cache_status st;
    size_t n;
    int32_t *ids = xsa_data_story_tokens(tok, src, cache, &n, &st);
    if (!ids) return xsa_lua_corefail(L);
    push_ids(L, ids, n);
    lua_createtable(L, 0, 4);
    lua_pushboolean(L, st.from_cache);
    lua_setfield(L, -2, "from_cache");
    lua_pushstring(L, st.reason);
    lua_setfield(L, -2, "reason");
    lua_pushboolean(L, st.written);
    lua_setfield(L, -2, "written");
    if (st.write_error[0]) {
        lua_pushstring(L, st.write_error);
        lua_setfield(L, -2, "write_error");
    }
    return 2;
}

static int l_tokenize_stories(lua_State *L)
{
    xsa_lua_checkbpe(L, 1);
    size_t len, n;
    const char *s = luaL_checklstring(L, 2, &len);
    xsa_bpe *tok = xsa_lua_checkbpe(L, 1);
    int32_t *ids = xsa_data_tokenize_stories(tok, s, len, &n);
    if (!ids) return xsa_lua_corefail(L);
    push_ids(L, ids, n);
    return 1;
}

/* Windows of seq_len + 1 tokens: seq_len and the counts are bounded so no
 * product or sum of them can overflow (the core adds and multiplies). */
#define MAX_WINDOW_TOKENS ((int64_t)1 << 40)

static int l_split(lua_State *L)
{
    lua_Integer n = xsa_lua_checkcount(L, 1, 0, MAX_WINDOW_TOKENS, "n_tokens");
    lua_Integer T = xsa_lua_checkcount(L, 2, 1, MAX_WINDOW_TOKENS, "seq_len");
    lua_Number vf = luaL_checknumber(L, 3);
    int64_t nw, nt;
    if (xsa_data_split(n, T, vf, &nw, &nt) != 0) return xsa_lua_corefail(L);
    lua_pushinteger(L, nw);
    lua_pushinteger(L, nt);
    return 2;
}

static int l_loader(lua_State *L)
{
    xsa_lua_checktensor(L, 1);
    /* counts in ranges where (first + nw) * (T + 1), i * B and nw + B - 1
     * (core/data.c) cannot overflow; the core checks them against the tokens */
    lua_Integer first = xsa_lua_checkcount(L, 2, 0, MAX_WINDOW_TOKENS, "first_window");
    lua_Integer nw = xsa_lua_checkcount(L, 3, 0, MAX_WINDOW_TOKENS, "num_windows");
    lua_Integer T = xsa_lua_checkcount(L, 4, 1, 1 << 24, "seq_len");
    lua_Integer B = xsa_lua_checkcount(L, 5, 1, 1 << 24, "batch");
    int shuffle = lua_toboolean(L, 6);
    lua_Integer seed = xsa_lua_optcount(L, 7, 0, LUA_MININTEGER, LUA_MAXINTEGER, "seed");
    xsa_tensor *tokens = xsa_lua_checktensor(L, 1);
    int64_t avail = tokens->shape[0] / (T + 1); /* windows, without multiplying */
    if (tokens->ndim == 1 && first + nw > avail)
        return luaL_error(L, "loader: windows [%I, %I) of %I tokens exceed the %I tokens available", first,
                          first + nw, T + 1, (lua_Integer)tokens->shape[0]);
    lloader *u = lua_newuserdatauv(L, sizeof *u, 0);
    u->l = NULL;
    luaL_setmetatable(L, LOADER_MT);
    tokens = xsa_lua_checktensor(L, 1); /* again: the allocation can run a finalizer */
    u->l = xsa_data_loader_new(tokens, first, nw, T, B, shuffle, (uint64_t)seed);
    if (!u->l) return xsa_lua_corefail(L);
    return 1;
}

static int push_pair(lua_State *L, int rc, xsa_tensor *x, xsa_tensor *y)
{
    if (rc != 0) return xsa_lua_corefail(L);
    xsa_lua_pushtensor(L, x);
    xsa_lua_pushtensor(L, y);
    return 2;
}

static int ld_num_batches(lua_State *L)
{
    lua_pushinteger(L, xsa_data_loader_num_batches(check(L)));
    return 1;
}

static int ld_batch(lua_State *L)
{
    xsa_data_loader *l = check(L);
    lua_Integer i = luaL_checkinteger(L, 2);
    xsa_tensor *x, *y;
    /* i - 1 overflows for math.mininteger: any i < 1 is out of range anyway */
    int rc = xsa_data_loader_batch(l, i < 1 ? -1 : i - 1, &x, &y);
    return push_pair(L, rc, x, y);
}

static int ld_next(lua_State *L)
{
    xsa_data_loader *l = check(L);
    xsa_tensor *x, *y;
    int rc = xsa_data_loader_next(l, &x, &y);
    return push_pair(L, rc, x, y);
}

static int ld_reset(lua_State *L)
{
    xsa_data_loader_reset(check(L));
    return 0;
}

static int ld_epoch(lua_State *L)
{
    lua_pushinteger(L, xsa_data_loader_epoch(check(L)) + 1);
    return 1;
}

static int ld_position(lua_State *L)
{
    lua_pushinteger(L, xsa_data_loader_position(check(L)));
    return 1;
}

/* seek(epoch, position): epoch 1-based as epoch() reports it */
static int ld_seek(lua_State *L)
{
    xsa_data_loader *l = check(L);
    lua_Integer e = luaL_checkinteger(L, 2);
    lua_Integer p = luaL_checkinteger(L, 3);
    /* checked before e - 1, which overflows at math.mininteger */
    luaL_argcheck(L, e >= 1 && e <= XSA_DATA_MAX_EPOCH + 1, 2, "epoch out of range (1 .. 2^62)");
    if (xsa_data_loader_seek(l, (int64_t)e - 1, p) != 0) return xsa_lua_corefail(L);
    return 0;
}

static int ld_window(lua_State *L)
{
    xsa_data_loader *l = check(L);
    lua_Integer k = luaL_checkinteger(L, 2);
    int64_t w = xsa_data_loader_window(l, k < 1 ? -1 : k - 1);
    if (w < 0) return luaL_argerror(L, 2, "window position out of range");
    lua_pushinteger(L, w + 1);
    return 1;
}

static const luaL_Reg loader_meta[] = {
    {"__gc", ld_gc},
    {"__close", ld_gc},
    {NULL, NULL},
};

static const luaL_Reg loader_methods[] = {
    {"num_batches", ld_num_batches},
    {"batch", ld_batch},
    {"next", ld_next},
    {"reset", ld_reset},
    {"epoch", ld_epoch},
    {"position", ld_position},
    {"seek", ld_seek},
    {"window", ld_window},
    {"free", ld_gc},
    {NULL, NULL},
};

/* read_text(path) -> the file's bytes, decompressed when it is xz; nil, message */
static int l_read_text(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    size_t n;
    char *text = xsa_read_text(path, &n);
    return xsa_lua_textresult(L, text, n);
}

/* max_text_bytes([n]) -> the limit on a decompressed text (core/xz.h), set
 * to n first when n is given (an integer >= 1) */
static int l_max_text_bytes(lua_State *L)
{
    if (!lua_isnoneornil(L, 1)) {
        lua_Integer v = xsa_lua_checkcount(L, 1, 1, LUA_MAXINTEGER, "max_text_bytes");
        if (xsa_xz_set_limit((size_t)v) != 0) return xsa_lua_corefail(L);
    }
    lua_pushinteger(L, (lua_Integer)xsa_xz_limit());
    return 1;
}

/* is_dir(path) -> true, or false: a directory that exists (stat; nothing is
 * written, so a read-only filesystem answers like any other) */
static int l_is_dir(lua_State *L)
{
    struct stat st;
    lua_pushboolean(L, stat(luaL_checkstring(L, 1), &st) == 0 && S_ISDIR(st.st_mode));
    return 1;
}

/* is_file(path) -> true, or nil + why (missing, a directory, a FIFO, a
 * device). Unlike io.open it never blocks on a FIFO. */
static int l_is_file(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    int fd = xsa_open_regular(path);
    if (fd < 0) {
        lua_pushnil(L);
        lua_pushstring(L, xsa_last_error());
        return 2;
    }
    close(fd);
    lua_pushboolean(L, 1);
    return 1;
}

static const luaL_Reg funcs[] = {
    {"is_file", l_is_file},
    {"is_dir", l_is_dir},
    {"max_text_bytes", l_max_text_bytes},
    {"read_text", l_read_text},
    {"story_tokens", l_story_tokens},
    {"tokenize_stories", l_tokenize_stories},
    {"split", l_split},
    {"loader", l_loader},
    {NULL, NULL},
};

/* Creates the loader's metatable; pushes the xsa._data table. */
int xsa_lua_open_data(lua_State *L)
{
    xsa_lua_newtype(L, LOADER_MT, loader_meta, loader_methods);
    luaL_newlib(L, funcs);
    return 1;
}

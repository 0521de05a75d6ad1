/*
 * l_generate.c: text generation over core/generate.h: the key/value cache
 * type ("xsa.kv_cache") and what builds on it.
 *
 *   cache = model:kv_cache([batch=1])
 *   logits = cache:append(ids [, {all=false, lengths=}])   ids int32 [B,T] (or [T] when B is 1)
 *       -> [B,V] logits of the last new position ([B,T,V] with all=true)
 *   cache:len() / cache:batch() / cache:capacity() / cache:reset() / cache:free()
 *   model:generate(prompt [, opts]) -> text, ids, info     (lua/xsa/generate.lua)
 *   xsa.gpt.generate_ids(model, rows, opts) -> rows of new ids (the C loop)
 *   xsa.gpt.sample(logits [, {temperature=, top_k=, top_p=, generator=}]) -> id(s)
 *   xsa.gpt.sample_probs(logits [, opts]) -> the distribution a draw uses
 *
 * Owns the cache type. xsa_lua_open_generate, called after the model's
 * type exists (l_init.c), adds the model methods kv_cache and generate to
 * it and sample, sample_probs and generate_ids to the xsa.gpt table, so
 * l_gpt.c (the model) needs nothing of this file. Token ids are 0-based values, as everywhere.
 *
 * Non-goals: tokenizing (generate.lua does it through xsa.tokenizer).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "l_bind.h"

#define KV_MT "xsa.kv_cache"

typedef struct { xsa_kv_cache *c; } kvbox;

static xsa_kv_cache *checkkv(lua_State *L, int idx)
{
    kvbox *b = luaL_checkudata(L, idx, KV_MT);
    if (!b->c) luaL_error(L, "attempt to use a freed kv_cache");
    return b->c;
}

static int kv_gc(lua_State *L)
{
    kvbox *b = luaL_checkudata(L, 1, KV_MT);
    if (b->c) {
        xsa_kv_cache_free(b->c);
        b->c = NULL;
    }
    return 0;
}

/* A cache whose model's attention function is running is halfway
 * through an append: freeing or rewinding it then is refused */
static xsa_kv_cache *checkidle(lua_State *L, int idx, const char *what)
{
    xsa_kv_cache *c = checkkv(L, idx);
    if (xsa_lua_attention_busy(xsa_kv_cache_model(c)))
        luaL_error(L, "%s: the model's attention function is running", what);
    return c;
}

static int kv_free(lua_State *L)
{
    checkidle(L, 1, "kv_cache:free");
    return kv_gc(L);
}

/* model:kv_cache([batch]) */
static int m_kv_cache(lua_State *L)
{
    xsa_lua_checkgpt(L, 1);
    lua_Integer B = luaL_optinteger(L, 2, 1);
    luaL_argcheck(L, B >= 1 && B <= (1 << 20), 2, "batch size must be in [1, 1048576]");
    kvbox *b = lua_newuserdatauv(L, sizeof *b, 0);
    b->c = NULL;
    luaL_setmetatable(L, KV_MT);
    /* the allocation above can run a finalizer that frees the model: fetch
     * it only now (rule 1 of l_bind.h); the cache then holds its own
     * reference to it */
    xsa_gpt *m = xsa_lua_checkgpt(L, 1);
    b->c = xsa_kv_cache_new(m, (int)B);
    if (!b->c) return xsa_lua_corefail(L);
    size_t kb = xsa_kv_cache_bytes(b->c) >> 10;
    if (kb >= 256) lua_gc(L, LUA_GCSTEP, kb > 1u << 30 ? 1 << 30 : (int)kb);
    return 1;
}

static const char *const append_keys[] = {"all", "lengths", NULL};

/* cache:append(ids [, {all=, lengths=}]) */
static int kv_append(lua_State *L)
{
    xsa_kv_cache *c = checkkv(L, 1);
    xsa_tensor *t = xsa_lua_checktensor(L, 2);
    int B = xsa_kv_cache_batch(c);
    int V = xsa_gpt_get_config(xsa_kv_cache_model(c))->vocab;
    char buf[64];
    if (t->dtype != XSA_INT32 || !(t->ndim == 2 || (t->ndim == 1 && B == 1)) ||
        (t->ndim == 2 && t->shape[0] != B) || t->shape[t->ndim - 1] > (1 << 24))
        return luaL_argerror(L, 2, lua_pushfstring(L, "ids must be an int32 [%d,T] tensor%s (got %s %s)",
                                                   B, B == 1 ? " or [T]" : "", xsa_dtype_name(t->dtype),
                                                   xsa_shape_str(t->ndim, t->shape, buf, sizeof buf)));
    int T = (int)t->shape[t->ndim - 1];
    int all = 0;
    int *lens = NULL;
    if (!lua_isnoneornil(L, 3)) {
        luaL_checktype(L, 3, LUA_TTABLE);
        xsa_lua_checkkeys(L, "kv_cache:append", 3, append_keys);
        lua_getfield(L, 3, "all");
        all = lua_toboolean(L, -1);
        lua_pop(L, 1);
        if (lua_getfield(L, 3, "lengths") != LUA_TNIL) {
            if (!lua_istable(L, -1) || (int)lua_rawlen(L, -1) != B)
                return luaL_error(L, "kv_cache:append: lengths must be a list of %d integers", B);
            lens = lua_newuserdatauv(L, (size_t)B * sizeof *lens, 0);
            for (int b = 0; b < B; b++) {
                lua_rawgeti(L, -2, b + 1);
                int isint;
                lua_Integer v = lua_tointegerx(L, -1, &isint);
                if (!isint || v < 1 || v > T)
                    return luaL_error(L, "kv_cache:append: lengths[%d] must be an integer in [1, %d]", b + 1, T);
                lens[b] = (int)v;
                lua_pop(L, 1);
            }
        }
    }
    /* the pushes below allocate and can run finalizers that free the cache
     * or the ids tensor: pin the tensor, re-fetch the cache after them */
    t = xsa_lua_pintensor(L, 2);
    xsa_tensor *ids = xsa_tensor_contiguous(t);
    xsa_lua_pushtensor(L, ids); /* owns ids; raises if NULL */
    int64_t sh[3] = {B, all ? T : V, V};
    xsa_tensor *out = xsa_tensor_new(XSA_FLOAT32, all ? 3 : 2, sh);
    xsa_lua_pushtensor(L, out);
    xsa_lua_attention_enter(L, xsa_kv_cache_model(checkkv(L, 1)), "kv_cache:append");
    c = checkkv(L, 1);
    if (xsa_kv_cache_batch(c) != B) return luaL_error(L, "kv_cache:append: the cache changed during the call");
    int rc = xsa_kv_cache_append(c, xsa_tensor_i32(ids), T, lens, xsa_tensor_f32(out), all);
    xsa_lua_attention_leave(xsa_kv_cache_model(c));
    if (rc != 0) return xsa_lua_corefail(L);
    lua_pop(L, 1); /* the model's pin */
    return 1;
}

static int kv_len(lua_State *L)
{
    lua_pushinteger(L, xsa_kv_cache_len(checkkv(L, 1)));
    return 1;
}

static int kv_batch(lua_State *L)
{
    lua_pushinteger(L, xsa_kv_cache_batch(checkkv(L, 1)));
    return 1;
}

static int kv_capacity(lua_State *L)
{
    lua_pushinteger(L, xsa_kv_cache_capacity(checkkv(L, 1)));
    return 1;
}

static int kv_reset(lua_State *L)
{
    xsa_kv_cache_reset(checkidle(L, 1, "kv_cache:reset"));
    lua_settop(L, 1);
    return 1;
}

static int kv_tostring(lua_State *L)
{
    kvbox *b = luaL_checkudata(L, 1, KV_MT);
    if (!b->c) lua_pushstring(L, "xsa.kv_cache (freed)");
    else
        lua_pushfstring(L, "xsa.kv_cache(batch=%d, len=%d, capacity=%d, %d KB)",
                        xsa_kv_cache_batch(b->c), xsa_kv_cache_len(b->c),
                        xsa_kv_cache_capacity(b->c), (int)(xsa_kv_cache_bytes(b->c) >> 10));
    return 1;
}

/* ---- sampling options ----------------------------------------------------- */

static const char *const sample_keys[] = {"temperature", "top_k", "top_p", "generator", NULL};

/* Reads temperature/top_k/top_p from the options table at arg (if any). */
static void read_sampling(lua_State *L, int arg, const char *fn, xsa_sampling *s)
{
    xsa_sampling_default(s);
    if (lua_isnoneornil(L, arg)) return;
    if (lua_getfield(L, arg, "temperature") != LUA_TNIL) s->temperature = xsa_lua_numfield(L, fn, "temperature");
    lua_pop(L, 1);
    if (lua_getfield(L, arg, "top_k") != LUA_TNIL) {
        int isint;
        lua_Integer k = lua_tointegerx(L, -1, &isint);
        if (!isint || k < 0 || k > (1 << 30)) xsa_lua_opterror(L, fn, "top_k must be a non-negative integer");
        s->top_k = (int)k;
    }
    lua_pop(L, 1);
    if (lua_getfield(L, arg, "top_p") != LUA_TNIL) s->top_p = xsa_lua_numfield(L, fn, "top_p");
    lua_pop(L, 1);
    if (xsa_sampling_validate(s) != 0) xsa_lua_opterror(L, fn, xsa_last_error() + strlen("sampling: "));
}

/* logits [V] or [B,V] float32, contiguous copy pushed on the stack */
static xsa_tensor *checklogits(lua_State *L, int arg, int *B, int *V)
{
    xsa_tensor *t = xsa_lua_checktensor(L, arg);
    char buf[64];
    if (t->dtype != XSA_FLOAT32 || t->ndim < 1 || t->ndim > 2 || t->shape[t->ndim - 1] < 1 ||
        t->shape[t->ndim - 1] > (1 << 30))
        luaL_argerror(L, arg, lua_pushfstring(L, "logits must be a float32 [V] or [B,V] tensor (got %s %s)",
                                              xsa_dtype_name(t->dtype),
                                              xsa_shape_str(t->ndim, t->shape, buf, sizeof buf)));
    *B = t->ndim == 2 ? (int)t->shape[0] : 1;
    *V = (int)t->shape[t->ndim - 1];
    xsa_tensor *c = xsa_tensor_contiguous(t);
    xsa_lua_pushtensor(L, c);
    return c;
}

/* Options of sample / sample_probs at arg 2 (before anything is pushed). */
static xsa_rng *read_sample_opts(lua_State *L, const char *fn, xsa_sampling *s)
{
    lua_settop(L, 2);
    xsa_rng *g = xsa_rng_global();
    if (!lua_isnil(L, 2)) {
        luaL_checktype(L, 2, LUA_TTABLE);
        xsa_lua_checkkeys(L, fn, 2, sample_keys);
        if (lua_getfield(L, 2, "generator") != LUA_TNIL) {
            g = xsa_lua_testgenerator(L, -1);
            if (!g) xsa_lua_opterror(L, fn, "generator must be an xsa.generator");
        }
        lua_pop(L, 1);
    }
    read_sampling(L, 2, fn, s);
    return g;
}

/* xsa.gpt.sample(logits [, opts]) */
static int l_sample(lua_State *L)
{
    xsa_sampling s;
    xsa_rng *g = read_sample_opts(L, "xsa.gpt.sample", &s);
    int B, V;
    xsa_tensor *lg = checklogits(L, 1, &B, &V);
    void *work = lua_newuserdatauv(L, xsa_sample_work_bytes(V) + (size_t)V * sizeof(float), 0);
    const float *l = xsa_tensor_f32(lg);
    if (lg->ndim == 1) {
        int32_t id = xsa_sample(l, V, &s, g, work);
        if (id < 0) return xsa_lua_corefail(L);
        lua_pushinteger(L, id);
        return 1;
    }
    int64_t sh[1] = {B};
    xsa_tensor *out = xsa_tensor_new(XSA_INT32, 1, sh);
    xsa_lua_pushtensor(L, out);
    for (int b = 0; b < B; b++) {
        int32_t id = xsa_sample(l + (size_t)b * V, V, &s, g, work);
        if (id < 0) return xsa_lua_corefail(L);
        xsa_tensor_i32(out)[b] = id;
    }
    return 1;
}

/* xsa.gpt.sample_probs(logits [, opts]) */
static int l_sample_probs(lua_State *L)
{
    xsa_sampling s;
    read_sample_opts(L, "xsa.gpt.sample_probs", &s);
    int B, V;
    xsa_tensor *lg = checklogits(L, 1, &B, &V);
    void *work = lua_newuserdatauv(L, xsa_sample_work_bytes(V), 0);
    xsa_tensor *out = xsa_tensor_new(XSA_FLOAT32, lg->ndim, lg->shape);
    xsa_lua_pushtensor(L, out);
    for (int b = 0; b < B; b++)
        if (xsa_sample_probs(xsa_tensor_f32(out) + (size_t)b * V, xsa_tensor_f32(lg) + (size_t)b * V, V, &s, work) < 0)
            return xsa_lua_corefail(L);
    return 1;
}

/* ---- the generation loop --------------------------------------------------- */

static const char *const gen_keys[] = {"max_new_tokens", "temperature", "top_k", "top_p", "seed",
                                       "eot", "use_cache", NULL};

static int optint(lua_State *L, int arg, const char *fn, const char *key, lua_Integer lo,
                  lua_Integer hi, lua_Integer def)
{
    lua_Integer v = def;
    if (lua_getfield(L, arg, key) != LUA_TNIL) {
        int isint;
        v = lua_tointegerx(L, -1, &isint);
        if (!isint || v < lo || v > hi)
            xsa_lua_opterror(L, fn, lua_pushfstring(L, "%s must be an integer in [%I, %I]", key, lo, hi));
    }
    lua_pop(L, 1);
    return (int)v;
}

/* xsa.gpt.generate_ids(model, rows, opts): rows a list of lists of ids;
 * returns a list of lists of new ids. */
static int l_generate_ids(lua_State *L)
{
    const char *fn = "xsa.gpt.generate_ids";
    xsa_lua_checkgpt(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    if (lua_isnoneornil(L, 3)) lua_newtable(L);
    else luaL_checktype(L, 3, LUA_TTABLE);
    lua_settop(L, 3);
    xsa_lua_checkkeys(L, fn, 3, gen_keys);
    xsa_generate_opts o;
    xsa_generate_opts_default(&o);
    read_sampling(L, 3, fn, &o.sampling);
    o.max_new_tokens = optint(L, 3, fn, "max_new_tokens", 0, 1 << 24, 100);
    o.eot = optint(L, 3, fn, "eot", -1, INT32_MAX, -1);
    if (lua_getfield(L, 3, "seed") != LUA_TNIL) {
        int isint;
        lua_Integer s = lua_tointegerx(L, -1, &isint);
        if (!isint || s < 0) xsa_lua_opterror(L, fn, "seed must be a non-negative integer");
        o.seed = (uint64_t)s;
    }
    lua_pop(L, 1);
    if (lua_getfield(L, 3, "use_cache") != LUA_TNIL) o.use_cache = lua_toboolean(L, -1);
    lua_pop(L, 1);
    lua_Integer nb = (lua_Integer)lua_rawlen(L, 2);
    if (nb < 1 || nb > (1 << 20)) return luaL_argerror(L, 2, "a list of 1 to 1048576 rows of ids expected");
    int B = (int)nb;
    size_t total = 0;
    for (int b = 0; b < B; b++) {
        if (lua_rawgeti(L, 2, b + 1) != LUA_TTABLE)
            return luaL_argerror(L, 2, lua_pushfstring(L, "row %d is not a list of ids", b + 1));
        total += lua_rawlen(L, -1);
        lua_pop(L, 1);
        if (total > ((size_t)1 << 30)) return luaL_argerror(L, 2, "too many prompt tokens");
    }
    /* one block: ids, then lens, then row pointers (freed with the userdata) */
    size_t bytes = total * sizeof(int32_t) + (size_t)B * (sizeof(int) + sizeof(int32_t *)) + 16;
    char *blk = lua_newuserdatauv(L, bytes, 0);
    const int32_t **rows = (const int32_t **)blk;
    int *lens = (int *)(blk + (size_t)B * sizeof(int32_t *));
    int32_t *ids = (int32_t *)(lens + B);
    size_t off = 0;
    for (int b = 0; b < B; b++) {
        lua_rawgeti(L, 2, b + 1);
        int n = (int)lua_rawlen(L, -1);
        rows[b] = ids + off;
        lens[b] = n;
        for (int t = 0; t < n; t++) {
            lua_rawgeti(L, -1, t + 1);
            int isint;
            lua_Integer v = lua_tointegerx(L, -1, &isint);
            if (!isint || v < 0 || v > INT32_MAX)
                return luaL_argerror(L, 2, lua_pushfstring(L, "row %d, element %d is not a token id", b + 1, t + 1));
            ids[off + (size_t)t] = (int32_t)v;
            lua_pop(L, 1);
        }
        off += (size_t)n;
        lua_pop(L, 1);
    }
    size_t maxn = o.max_new_tokens > 0 ? (size_t)o.max_new_tokens : 1;
    int32_t *out = lua_newuserdatauv(L, (size_t)B * maxn * sizeof(int32_t) + (size_t)B * sizeof(int), 0);
    int *nout = (int *)(out + (size_t)B * maxn);
    /* options (metamethods) and the allocations above ran Lua: take the
     * model only now; nothing runs Lua until generate returns */
    xsa_gpt *m = xsa_lua_attention_enter(L, xsa_lua_checkgpt(L, 1), "generate");
    int rc = xsa_gpt_generate(m, B, rows, lens, &o, out, nout);
    xsa_lua_attention_leave(m);
    if (rc != 0) return xsa_lua_corefail(L);
    lua_createtable(L, B, 0);
    for (int b = 0; b < B; b++) {
        lua_createtable(L, nout[b], 0);
        for (int t = 0; t < nout[b]; t++) {
            lua_pushinteger(L, out[(size_t)b * maxn + t]);
            lua_rawseti(L, -2, t + 1);
        }
        lua_rawseti(L, -2, b + 1);
    }
    return 1;
}

/* model:generate(prompt [, opts]): lua/xsa/generate.lua's generate */
static int m_generate(lua_State *L)
{
    int n = lua_gettop(L);
    lua_getglobal(L, "require");
    lua_pushliteral(L, "xsa.generate");
    lua_call(L, 1, 1);
    lua_getfield(L, -1, "generate");
    lua_remove(L, -2);
    lua_insert(L, 1);
    lua_call(L, n, LUA_MULTRET);
    return lua_gettop(L);
}

/* ---- registration ---------------------------------------------------------- */

static const luaL_Reg kv_methods[] = {
    {"append", kv_append}, {"len", kv_len}, {"batch", kv_batch}, {"capacity", kv_capacity},
    {"reset", kv_reset}, {"free", kv_free}, {NULL, NULL},
};

static const luaL_Reg kv_meta[] = {
    {"__gc", kv_gc}, {"__close", kv_gc}, {"__tostring", kv_tostring}, {NULL, NULL},
};

static const luaL_Reg model_methods[] = {
    {"kv_cache", m_kv_cache}, {"generate", m_generate}, {NULL, NULL},
};

int xsa_lua_open_generate(lua_State *L)
{
    xsa_lua_newtype(L, KV_MT, kv_meta, kv_methods);
    luaL_getmetatable(L, XSA_LUA_GPT_MT);
    lua_getfield(L, -1, "__index");
    luaL_setfuncs(L, model_methods, 0);
    lua_pop(L, 2);
    lua_pushcfunction(L, l_sample);
    lua_setfield(L, -2, "sample");
    lua_pushcfunction(L, l_sample_probs);
    lua_setfield(L, -2, "sample_probs");
    lua_pushcfunction(L, l_generate_ids);
    lua_setfield(L, -2, "generate_ids");
    return 0;
}

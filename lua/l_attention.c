/*
 * l_attention.c: an attention written in Lua, xsa.gpt{attention = f}: the
 * core's external attention (core/gpt.h) over a Lua function. Per block,
 * f(a) gets a table with
 *   a.q, a.k, a.v   [B,NH,T,HS] float32 (fresh tensors: f may keep them)
 *   a.y             the causal softmax attention Y = softmax(q k^T/sqrt(HS)) v
 *                   from the fused kernel (SA's), computed on first read
 *   a.layer         the block, 1-based
 * and returns z of the same shape as q; autograd differentiates it (dL/dy
 * goes back through the fused kernel's backward). Any other key of a is an
 * error (a typo is not nil).
 *
 * What the model does with it, and why:
 *   - training (model:loss under grad mode): f runs under grad mode on
 *     leaves q, k, v; the model's backward runs autograd from z with dL/dz
 *     and adds q, k, v's gradients into its own (the graph is kept from
 *     the forward to the backward, one per block);
 *   - evaluation, logits, probes: f runs under no_grad;
 *   - decoding (kv_cache, generate): f runs over the whole prefix and the
 *     new rows of z are kept, so f must be causal (as every built-in one is);
 *   - an error inside f, a result that is not such a tensor, or a
 *     non-finite value in it: the model's call fails with the message and
 *     f's traceback, the model as it was;
 *   - f may not run its own model (loss, forward, probe, generate,
 *     copy_from, set_attention, a cache's append/reset/free): refused
 *     while it runs, since the model is halfway through a forward.
 *
 * The function lives in the registry (one reference per install, shared
 * by the clones the core makes for generation); l_gpt.c installs it and
 * names it in config() and checkpoints (a checkpoint saves "function" and
 * which function it was; lua/xsa/attention.lua decides what that record
 * says and which function loads it, below). Each binding call that can
 * run the model (l_gpt.c, l_generate.c) goes through
 * xsa_lua_attention_enter, which pins the model and gives the function the
 * running thread.
 *
 * Non-goals: saving the function's code; variants that need more than q,
 * k, v and Y of their own block.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "l_bind.h"

typedef struct {
    long refs;
    lua_State *main; /* for the registry reference */
    int ref;         /* f in the registry */
    lua_State *L;    /* the thread of the binding call running the model, else NULL */
    int busy;        /* f is running */
} lattn;

typedef struct {
    xsa_tensor *z, *x[3]; /* f's result, the leaves q, k, v */
    int B, T, C, NH;
} saved;

static const int PERM[4] = {0, 2, 1, 3}; /* [B,T,NH,HS] <-> [B,NH,T,HS] */

/* ---- the tensors f sees ------------------------------------------------- */

/* x [B,NH,T,HS] from part i (q, k, v) of qkv [B,T,3C] */
static void unpack(float *x, const float *qkv, int i, int B, int T, int C, int NH)
{
    int HS = C / NH;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++)
                memcpy(x + (((size_t)b * NH + h) * T + t) * HS,
                       qkv + ((size_t)b * T + t) * 3 * C + (size_t)i * C + h * HS,
                       (size_t)HS * sizeof(float));
}

/* [B,NH,T,HS] -> [B,T,C] (graph nodes: the gradient flows back); NULL
 * with an error */
static xsa_tensor *to_rows(xsa_tensor *x)
{
    xsa_tensor *p = xsa_ag_permute(x, PERM);
    if (!p) return NULL;
    int64_t sh[3] = {x->shape[0], x->shape[2], x->shape[1] * x->shape[3]};
    xsa_tensor *r = xsa_ag_reshape(p, 3, sh);
    xsa_tensor_free(p); /* the reshape's node holds what it needs */
    return r;
}

/* __index of a: y on first read (SA's fused kernel over q, k, v, in the
 * graph), an error for a key that is not there */
static int a_index(lua_State *L)
{
    const char *k = lua_tostring(L, 2);
    if (!k || strcmp(k, "y") != 0)
        return luaL_error(L, "attention: a has q, k, v, y and layer (got %s)",
                          k ? lua_pushfstring(L, "'%s'", k) : luaL_typename(L, 2));
    xsa_tensor **tl = xsa_lua_newtensorlist(L, 7); /* frees the intermediates on any exit */
    for (int i = 0; i < 3; i++) {
        tl[i] = xsa_lua_checktensor(L, lua_upvalueindex(i + 1));
        xsa_tensor_retain(tl[i]);
    }
    int NH = (int)lua_tointeger(L, lua_upvalueindex(4));
    for (int i = 0; i < 3; i++)
        if (!(tl[i + 3] = to_rows(tl[i]))) return xsa_lua_corefail(L);
    xsa_tensor *y = xsa_ag_attention(tl[3], tl[4], tl[5], NH, 0.0, NULL, NULL);
    if (!(tl[6] = y)) return xsa_lua_corefail(L);
    int64_t sh[4] = {tl[0]->shape[0], tl[0]->shape[2], NH, tl[0]->shape[3]};
    xsa_tensor *v = xsa_ag_view(y, 4, sh);
    if (!v) return xsa_lua_corefail(L);
    xsa_tensor *p = xsa_ag_permute(v, PERM);
    xsa_tensor_free(v);
    xsa_tensor *out = p ? xsa_ag_contiguous(p) : NULL;
    xsa_tensor_free(p);
    xsa_lua_pushtensor(L, out); /* raises if NULL */
    lua_pushliteral(L, "y");
    lua_pushvalue(L, -2);
    lua_rawset(L, 1); /* the next read finds it */
    return 1;
}

/* Pushes the table a for f over q, k, v (tensors at slots q, q+1, q+2) */
static void push_args(lua_State *L, int q, int layer, int NH)
{
    lua_createtable(L, 0, 5);
    const char *names[3] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++) {
        lua_pushvalue(L, q + i);
        lua_setfield(L, -2, names[i]);
    }
    lua_pushinteger(L, layer + 1);
    lua_setfield(L, -2, "layer");
    lua_createtable(L, 0, 1);
    for (int i = 0; i < 3; i++) lua_pushvalue(L, q + i);
    lua_pushinteger(L, NH);
    lua_pushcclosure(L, a_index, 4);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, -2);
}

/* ---- the call ----------------------------------------------------------- */

/* z's rows t0.. into c->z, checking what f returned */
static void take_z(lua_State *L, const xsa_gpt_ext_call *c, xsa_tensor *z)
{
    int HS = c->C / c->NH, T = c->T, n = T - c->t0;
    char got[64];
    int64_t want[4] = {c->B, c->NH, T, HS};
    if (!z || z->dtype != XSA_FLOAT32 || z->ndim != 4 || memcmp(z->shape, want, sizeof want) != 0)
        luaL_error(L, "attention: f must return a float32 tensor [B,NH,T,HS] = [%d,%d,%d,%d], like "
                   "a.q (got %s)", c->B, c->NH, T, HS,
                   !z ? luaL_typename(L, -1)
                      : lua_pushfstring(L, "%s %s", xsa_dtype_name(z->dtype),
                                        xsa_shape_str(z->ndim, z->shape, got, sizeof got)));
    xsa_tensor *zc = xsa_tensor_contiguous(z);
    xsa_lua_pushtensor(L, zc); /* owns zc; raises if NULL */
    const float *s = xsa_tensor_f32(zc);
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < c->NH; h++)
            for (int t = c->t0; t < T; t++) {
                const float *src = s + (((size_t)b * c->NH + h) * T + t) * HS;
                for (int d = 0; d < HS; d++)
                    if (!isfinite(src[d]))
                        luaL_error(L, "attention: f returned a non-finite value at [%d,%d,%d,%d] "
                                   "(1-based, of [B,NH,T,HS])", b + 1, h + 1, t + 1, d + 1);
                memcpy(c->z + ((size_t)b * n + t - c->t0) * c->C + h * HS, src, (size_t)HS * sizeof(float));
            }
    lua_pop(L, 1);
}

/* In protected mode: (lattn, call) -> f's z in call->z, call->saved */
static int run_f(lua_State *L)
{
    lattn *a = lua_touserdata(L, 1);
    xsa_gpt_ext_call *c = lua_touserdata(L, 2);
    int64_t sh[4] = {c->B, c->NH, c->T, c->C / c->NH};
    for (int i = 0; i < 3; i++) { /* q, k, v at 3, 4, 5 */
        xsa_tensor *x = xsa_tensor_new(XSA_FLOAT32, 4, sh);
        if (x) unpack(xsa_tensor_f32(x), c->qkv, i, c->B, c->T, c->C, c->NH);
        if (x && c->keep && xsa_ag_set_requires_grad(x, 1) != 0) x = (xsa_tensor_free(x), NULL);
        xsa_lua_pushtensor(L, x); /* raises if NULL */
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, a->ref);
    push_args(L, 3, c->layer, c->NH);
    lua_call(L, 1, 1);
    xsa_tensor *z = xsa_lua_testtensor(L, -1);
    take_z(L, c, z);
    if (!c->keep) return 0;
    saved *s = malloc(sizeof *s);
    if (!s) return luaL_error(L, "attention: out of memory");
    for (int i = 0; i < 3; i++) s->x[i] = xsa_lua_checktensor(L, 3 + i);
    s->z = z;
    xsa_tensor_retain(z);
    for (int i = 0; i < 3; i++) xsa_tensor_retain(s->x[i]);
    s->B = c->B, s->T = c->T, s->C = c->C, s->NH = c->NH;
    c->saved = s;
    return 0;
}

static int traceback(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);
    if (!msg) msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    luaL_traceback(L, L, msg, 1);
    return 1;
}

static int ext_forward(void *ud, xsa_gpt_ext_call *c)
{
    lattn *a = ud;
    lua_State *L = a->L;
    if (!L) return xsa_error("gpt: an attention written in Lua runs only from a model method");
    if (a->busy) return xsa_error("gpt: the attention function ran its own model");
    if (!lua_checkstack(L, 16)) return xsa_error("gpt: no Lua stack left for the attention function");
    int top = lua_gettop(L);
    lua_pushcfunction(L, traceback);
    lua_pushcfunction(L, run_f);
    lua_pushlightuserdata(L, a);
    lua_pushlightuserdata(L, c);
    a->busy = 1;
    int prev = xsa_ag_set_enabled(c->keep);
    int st = lua_pcall(L, 2, 0, top + 1);
    xsa_ag_set_enabled(prev);
    a->busy = 0;
    int rc = 0;
    if (st != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        rc = xsa_error("gpt: the attention function failed in block %d: %s", c->layer + 1,
                       msg ? msg : "(no message)");
    }
    lua_settop(L, top);
    return rc;
}

/* ---- the backward and the references ------------------------------------ */

static int ext_backward(void *ud, void *sv, const float *dz, float *dqkv)
{
    (void)ud;
    saved *s = sv;
    int B = s->B, T = s->T, C = s->C, NH = s->NH, HS = C / NH;
    if (!xsa_ag_requires_grad(s->z)) return 0; /* z depends on nothing differentiable */
    xsa_tensor *g = xsa_tensor_new(XSA_FLOAT32, 4, s->z->shape);
    if (!g) return -1;
    float *gd = xsa_tensor_f32(g);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++)
                memcpy(gd + (((size_t)b * NH + h) * T + t) * HS, dz + ((size_t)b * T + t) * C + h * HS,
                       (size_t)HS * sizeof(float));
    for (int i = 0; i < 3; i++) xsa_ag_zero_grad(s->x[i]);
    int rc = xsa_ag_backward(s->z, g, 1); /* retain: f may share nodes between blocks */
    xsa_tensor_free(g);
    for (int i = 0; rc == 0 && i < 3; i++) {
        xsa_tensor *gr = s->x[i]->grad;
        if (!gr) continue; /* f did not use it */
        if (gr->dtype != XSA_FLOAT32 || !xsa_tensor_is_contiguous(gr) || !xsa_tensor_same_shape(gr, s->x[i]))
            return xsa_error("gpt backward: the attention function's %c.grad was replaced", "qkv"[i]);
        const float *src = xsa_tensor_f32(gr);
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int t = 0; t < T; t++) {
                    float *d = dqkv + ((size_t)b * T + t) * 3 * C + (size_t)i * C + h * HS;
                    const float *x = src + (((size_t)b * NH + h) * T + t) * HS;
                    for (int k = 0; k < HS; k++) d[k] += x[k];
                }
    }
    return rc;
}

static void ext_drop(void *ud, void *sv)
{
    (void)ud;
    saved *s = sv;
    xsa_tensor_free(s->z);
    for (int i = 0; i < 3; i++) xsa_tensor_free(s->x[i]);
    free(s);
}

static void ext_retain(void *ud) { ((lattn *)ud)->refs++; }

static void ext_release(void *ud)
{
    lattn *a = ud;
    if (--a->refs > 0) return;
    /* the main thread is never collected before the registry; it may be
     * suspended in a resume, where a push and a pop leave it as it was */
    if (lua_checkstack(a->main, 2)) luaL_unref(a->main, LUA_REGISTRYINDEX, a->ref);
    free(a);
}

static lattn *ours(const xsa_gpt *m)
{
    const xsa_gpt_ext_attention *e = m ? xsa_gpt_ext(m) : NULL;
    return e && e->forward == ext_forward ? e->ud : NULL;
}

/* ---- what l_gpt.c and l_generate.c use ---------------------------------- */

void xsa_lua_attention_install(lua_State *L, int fidx, int gidx)
{
    lua_pushvalue(L, fidx);
    int ref = luaL_ref(L, LUA_REGISTRYINDEX); /* can run Lua (a GC step): the model comes after */
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
    lua_State *main = lua_tothread(L, -1);
    lua_pop(L, 1);
    lattn *a = calloc(1, sizeof *a);
    if (!a) {
        luaL_unref(L, LUA_REGISTRYINDEX, ref);
        luaL_error(L, "out of memory");
    }
    a->main = main;
    a->ref = ref;
    xsa_gpt *m = xsa_lua_checkgpt(L, gidx);
    xsa_gpt_ext_attention e = {ext_forward, ext_backward, ext_drop, ext_retain, ext_release, a};
    a->refs = 1; /* ours until the model holds it */
    int rc = xsa_gpt_set_ext_attention(m, &e);
    ext_release(a);
    if (rc != 0) xsa_lua_corefail(L);
}

int xsa_lua_attention_push(lua_State *L, const xsa_gpt *m)
{
    lattn *a = ours(m);
    if (!a) return 0;
    lua_rawgeti(L, LUA_REGISTRYINDEX, a->ref);
    return 1;
}

int xsa_lua_attention_busy(const xsa_gpt *m)
{
    lattn *a = ours(m);
    return a && a->busy;
}

static void gpt_release(void *p) { xsa_gpt_free(p); }

xsa_gpt *xsa_lua_attention_enter(lua_State *L, xsa_gpt *m, const char *what)
{
    if (!ours(m)) {
        lua_pushnil(L); /* one slot either way */
        return m;
    }
    if (xsa_lua_attention_busy(m))
        luaL_error(L, "%s: the model's attention function is running (a model cannot run itself "
                   "from inside its attention)", what);
    xsa_gpt_retain(m); /* before the box: its allocation can run a finalizer */
    void **pin = xsa_lua_newbox(L, gpt_release);
    *pin = m;
    ours(m)->L = L;
    return m;
}

void xsa_lua_attention_leave(xsa_gpt *m)
{
    lattn *a = ours(m);
    if (a) a->L = NULL;
}

/* ---- names and checkpoints: lua/xsa/attention.lua decides --------------- */

/* Pushes function fname of the module xsa.attention and returns 1; with
 * load 0 only if the module is loaded already (nothing is registered
 * before it is: pushes nil and returns 0), else required. */
static int module_fn(lua_State *L, const char *fname, int load)
{
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_getfield(L, -1, "xsa.attention");
    lua_remove(L, -2);
    if (!lua_istable(L, -1) && load) {
        lua_pop(L, 1);
        lua_getglobal(L, "require");
        lua_pushliteral(L, "xsa.attention");
        lua_call(L, 1, 1);
    }
    if (lua_istable(L, -1)) lua_getfield(L, -1, fname);
    else lua_pushnil(L);
    lua_remove(L, -2);
    if (lua_isfunction(L, -1)) return 1;
    if (load) luaL_error(L, "xsa.attention.%s is missing (the module xsa.attention is not xsa's own)", fname);
    return 0;
}

int xsa_lua_attention_lookup(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    if (!module_fn(L, "_lookup", 0)) {
        lua_pop(L, 1);
        lua_pushliteral(L, "");
        return 0;
    }
    lua_pushvalue(L, idx);
    lua_call(L, 1, 2);
    if (lua_isfunction(L, -2)) {
        lua_pop(L, 1);
        return 1;
    }
    lua_remove(L, -2);
    if (lua_type(L, -1) != LUA_TSTRING) {
        lua_pop(L, 1);
        lua_pushliteral(L, "");
    }
    return 0;
}

int xsa_lua_attention_record(lua_State *L, const xsa_gpt *m, const char **keys, const char **values,
                             int max)
{
    lattn *a = ours(m);
    if (!a) return 0;
    int ref = a->ref; /* m's function: m is the caller's, held at its argument */
    module_fn(L, "_checkpoint_meta", 1);
    lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
    lua_call(L, 1, 1); /* stays: it holds the strings */
    int n = lua_istable(L, -1) ? (int)luaL_len(L, -1) / 2 : -1;
    if (n < 0 || n > max) luaL_error(L, "xsa.attention._checkpoint_meta did not return a record");
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, -1, 2 * i + 1);
        lua_rawgeti(L, -2, 2 * i + 2);
        if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
            luaL_error(L, "xsa.attention._checkpoint_meta did not return strings");
        keys[i] = lua_tostring(L, -2); /* the table on the stack keeps them */
        values[i] = lua_tostring(L, -1);
        lua_pop(L, 2);
    }
    return n;
}

static void st_release(void *p) { xsa_st_free(p); }

void xsa_lua_attention_resolve(lua_State *L, const char *path, int fidx)
{
    static const char *const fields[] = {"name", "version", "code"};
    fidx = lua_absindex(L, fidx);
    void **slot = xsa_lua_newbox(L, st_release); /* frees the header on any exit */
    xsa_st_file *f = xsa_st_load_meta(path);
    *slot = f;
    const char *att = f ? xsa_st_meta(f, "attention") : NULL;
    if (!att || strcmp(att, XSA_GPT_EXT_NAME) != 0) { /* a built-in's, or unreadable: the core says */
        lua_pop(L, 1);
        lua_pushnil(L);
        return;
    }
    module_fn(L, "_checkpoint_attention", 1);
    lua_pushstring(L, path);
    lua_createtable(L, 0, 3);
    for (int i = 0; i < 3; i++) {
        char key[32];
        snprintf(key, sizeof key, "attention.%s", fields[i]);
        const char *v = xsa_st_meta(f, key);
        if (!v) continue;
        lua_pushstring(L, v);
        lua_setfield(L, -2, fields[i]);
    }
    xsa_st_free(f);
    *slot = NULL;
    lua_pushvalue(L, fidx);
    lua_call(L, 3, 2);
    if (!lua_isnil(L, -2) && !lua_isfunction(L, -2))
        luaL_error(L, "xsa.attention._checkpoint_attention did not return a function");
    if (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TSTRING) {
        lua_pushnil(L);
        lua_replace(L, -2);
    }
    lua_insert(L, -2);
    lua_replace(L, fidx);
    lua_remove(L, -2); /* the box */
}

/*
 * l_gpt.c: the `xsa.gpt` table and the GPT model userdata ("xsa.gpt") over
 * core/gpt.h:
 *
 *   model = xsa.gpt{vocab=50257, n_layer=2, d_model=128, n_head=2, seq_len=64,
 *                   attention="sa", lambda=1.0, seed=0, precision="f32"}
 *       (precision "bf16": the lm_head's products in bf16 through oneDNN;
 *       an error where that is not available; clones keep it)
 *   model:loss(inputs, targets) -> 0-d tensor (core's xsa_ag_gpt_loss); under
 *       grad mode its backward() runs the model's hand-written backward into
 *       the parameters' .grad (accumulating, as PyTorch; zero them with
 *       opt:zero_grad())
 *   model:forward(inputs) -> logits [B,T,V]
 *   model:clone{attention=, lambda=} / model:copy_from(other)
 *   model:set_attention(name [, lambda])
 *   model:parameters() -> list of {name=, tensor=}, also name -> tensor
 *   model:num_params() / model:config() / model:probe(loader [, n])
 *   model:save(path [, {optimizer=opt}]) / xsa.gpt.load(path) -> model, opt|nil
 *   model:generate(prompt [, opts]) / model:kv_cache([B])   (defined in l_generate.c)
 *   model:free() (also __close)
 *
 * Owns the xsa.gpt table (load, and __call as the constructor) and the model
 * type it constructs (as liolib.c owns io and its file handles). The
 * optimizer a checkpoint carries is the xsa.adamw type of l_optim.c.
 *
 * Token tensors are int32 [B,T] (0-based token ids; they are values, not
 * indices). Misuse and core failures raise errors; a checkpoint that fails
 * to load raises too (as xsa.safetensors.load does).
 *
 * Temporary buffers are Lua userdata, never malloc, so a raised error
 * cannot leak them. Non-goals: algorithms (all in core/), the optimizer
 * (l_optim.c).
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "l_bind.h"

#define GPT_MT XSA_LUA_GPT_MT

typedef struct { xsa_gpt *m; } gbox;

/* ---- boxes -------------------------------------------------------------- */

static gbox *newgbox(lua_State *L)
{
    gbox *b = lua_newuserdatauv(L, sizeof *b, 0);
    b->m = NULL;
    luaL_setmetatable(L, GPT_MT);
    return b;
}

static xsa_gpt *checkgpt(lua_State *L, int idx)
{
    gbox *b = luaL_checkudata(L, idx, GPT_MT);
    if (!b->m) luaL_error(L, "attempt to use a freed model");
    return b->m;
}

xsa_gpt *xsa_lua_checkgpt(lua_State *L, int idx) { return checkgpt(L, idx); }

static void gpt_release(void *p) { xsa_gpt_free(p); }

/* The model at idx with a reference of our own, held by a box pushed on the
 * stack: it stays valid however much Lua runs (callbacks, finalizers) until
 * the box is collected, even if the model's own box is freed (rule 1 of
 * l_bind.h). */
static xsa_gpt *pingpt(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    checkgpt(L, idx);
    void **slot = xsa_lua_newbox(L, gpt_release); /* allocates: fetch afterwards */
    xsa_gpt *m = checkgpt(L, idx);
    xsa_gpt_retain(m);
    *slot = m;
    return m;
}

/* Reports a model's big buffers (parameters, gradients) to the collector.
 * lua_gc runs finalizers, which may free m: call it last. */
static void account(lua_State *L, const xsa_gpt *m)
{
    size_t kb = (xsa_gpt_num_params(m) * 2 * sizeof(float)) >> 10;
    if (kb >= 256) lua_gc(L, LUA_GCSTEP, kb > 1u << 30 ? 1 << 30 : (int)kb);
}

/* After a forward: a grown activation block (hundreds of MB at the study's
 * sizes) is reported too, so dropped models are collected in time. Takes
 * the sizes, not the model: lua_gc can run a finalizer that frees it. */
static void account_acts(lua_State *L, size_t before, size_t now)
{
    if (now > before) {
        size_t kb = (now - before) >> 10;
        lua_gc(L, LUA_GCSTEP, kb > 1u << 30 ? 1 << 30 : (int)kb);
    }
}

static void pushgpt(lua_State *L, gbox *b, xsa_gpt *m)
{
    (void)L;
    b->m = m;
}

static int g_gc(lua_State *L)
{
    gbox *b = luaL_checkudata(L, 1, GPT_MT);
    if (b->m) {
        xsa_gpt_free(b->m);
        b->m = NULL;
    }
    return 0;
}

/* ---- argument helpers --------------------------------------------------- */

static int intfield(lua_State *L, const char *fn, const char *key, int lo, int hi)
{
    int isint;
    lua_Integer v = lua_tointegerx(L, -1, &isint);
    if (!isint || v < lo || v > hi) {
        const char *got = luaL_typename(L, -1);
        if (lua_type(L, -1) == LUA_TNUMBER) got = lua_pushfstring(L, "%s", lua_tostring(L, -1));
        return xsa_lua_opterror(L, fn, lua_pushfstring(L, "%s must be an integer in [%d, %d] (got %s)",
                                               key, lo, hi, got));
    }
    return (int)v;
}

/* The attention variant named at the top of the stack, checked against
 * the core's list of names as luaL_checkoption does, then against the
 * names of Lua variants (xsa.attention.register): an unknown name is
 * refused with both lists, never taken for another variant. A registered
 * name is its function from here on: it replaces the name on the stack. */
enum { ATT_FN = -1 }; /* attfield's answer for a function (l_attention.c) */

static xsa_attention attfield(lua_State *L, const char *fn)
{
    if (lua_type(L, -1) == LUA_TFUNCTION) return (xsa_attention)ATT_FN;
    const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    const char *const *names = xsa_gpt_attention_names();
    for (int i = 0; s && names[i]; i++)
        if (strcmp(s, names[i]) == 0) return (xsa_attention)i;
    if (xsa_lua_attention_lookup(L, -1)) {
        lua_replace(L, -2);
        return (xsa_attention)ATT_FN;
    }
    const char *lua = lua_tostring(L, -1); /* the registered names */
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addstring(&b, "attention must be ");
    for (int i = 0; names[i]; i++) {
        luaL_addstring(&b, i == 0 ? "\"" : ", \"");
        luaL_addstring(&b, names[i]);
        luaL_addstring(&b, "\"");
    }
    luaL_addstring(&b, ", the name of a Lua variant registered with xsa.attention.register (");
    luaL_addstring(&b, *lua ? lua : "none is");
    luaL_addstring(&b, ") or a function");
    luaL_pushresult(&b);
    return xsa_lua_opterror(L, fn, lua_pushfstring(L, "%s (got %s)", lua_tostring(L, -1),
                                                   s ? s : luaL_typename(L, -3)));
}

/* An int32 [B,T] token tensor; returns a contiguous tensor the caller must
 * free (pushed on the stack as a userdata so an error cannot leak it). */
static xsa_tensor *checktokens(lua_State *L, int arg, const char *what, int *B, int *T)
{
    xsa_tensor *t = xsa_lua_checktensor(L, arg);
    char buf[64];
    if (t->dtype != XSA_INT32 || t->ndim != 2)
        luaL_argerror(L, arg, lua_pushfstring(L, "%s must be an int32 [B,T] tensor (got %s %s)",
                                              what, xsa_dtype_name(t->dtype),
                                              xsa_shape_str(t->ndim, t->shape, buf, sizeof buf)));
    if (t->shape[0] > 1 << 24 || t->shape[1] > 1 << 24)
        luaL_argerror(L, arg, lua_pushfstring(L, "%s is too large", what));
    *B = (int)t->shape[0];
    *T = (int)t->shape[1];
    xsa_tensor *c = xsa_tensor_contiguous(t);
    xsa_lua_pushtensor(L, c); /* owns c from here; raises if NULL */
    return c;
}

/* ---- constructor ------------------------------------------------------- */

static const char *const config_keys[] = {"vocab", "n_layer", "d_model", "n_head", "seq_len",
                                          "attention", "lambda", "seed", "precision", NULL};

/* Contradictory options are refused (the options rule, lua/xsa/options.lua):
 * lambda sets XSA's strength and would be ignored by a model with SA (or
 * another variant without a parameter). */
#define LAMBDA_WITH_SA \
    "lambda is XSA's strength and does nothing with standard attention: add attention = \"xsa\" (or drop lambda)"
#define LAMBDA_WITH_FN \
    "lambda is XSA's strength and an attention function takes none: drop lambda (f can hold its own)"

/* lambda given with attention att (or a function): refused unless att takes it */
static void check_lambda(lua_State *L, const char *fn, int att)
{
    if (att == ATT_FN) xsa_lua_opterror(L, fn, LAMBDA_WITH_FN);
    if (!xsa_gpt_attention_takes_lambda((xsa_attention)att)) xsa_lua_opterror(L, fn, LAMBDA_WITH_SA);
}

/* Reads the options at arg into c; an attention function is left at the
 * top of the stack (else nil) and c->attention is then SA. */
static void read_config(lua_State *L, int arg, xsa_gpt_config *c)
{
    const char *fn = "xsa.gpt";
    if (!lua_istable(L, arg)) xsa_lua_opterror(L, fn, "expected a table of options");
    xsa_lua_checkkeys(L, fn, arg, config_keys);
    struct { const char *k; int *dst; int hi; } ints[] = {
        {"vocab", &c->vocab, 1 << 24}, {"n_layer", &c->n_layer, 1024},
        {"d_model", &c->d_model, 1 << 16}, {"n_head", &c->n_head, 1 << 16},
        {"seq_len", &c->seq_len, 1 << 20}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        if (lua_getfield(L, arg, ints[i].k) != LUA_TNIL)
            *ints[i].dst = intfield(L, fn, ints[i].k, 1, ints[i].hi);
        lua_pop(L, 1);
    }
    int att = lua_getfield(L, arg, "attention") != LUA_TNIL ? (int)attfield(L, fn) : (int)c->attention;
    if (att != ATT_FN) lua_pop(L, 1);
    c->attention = att == ATT_FN ? XSA_ATTN_SA : (xsa_attention)att;
    int set_lambda = lua_getfield(L, arg, "lambda") != LUA_TNIL;
    if (set_lambda) c->lambda = xsa_lua_f32field(L, fn, "lambda");
    lua_pop(L, 1);
    if (set_lambda) check_lambda(L, fn, att);
    if (lua_getfield(L, arg, "seed") != LUA_TNIL) {
        int isint;
        lua_Integer s = lua_tointegerx(L, -1, &isint);
        if (!isint || s < 0) xsa_lua_opterror(L, fn, "seed must be a non-negative integer");
        c->seed = (uint64_t)s;
    }
    lua_pop(L, 1);
    if (lua_getfield(L, arg, "precision") != LUA_TNIL) {
        const char *p = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        if (!p || xsa_gpt_precision_parse(p, &c->precision) != 0)
            xsa_lua_opterror(L, fn, lua_pushfstring(L, "precision must be \"f32\" or \"bf16\" (got %s)",
                                                    p ? p : luaL_typename(L, -1)));
    }
    lua_pop(L, 1);
    if (att != ATT_FN) lua_pushnil(L);
}

/* xsa.gpt{...} (the __call of the xsa.gpt table: argument 1 is the table) */
static int l_gpt_new(lua_State *L)
{
    xsa_gpt_config c;
    xsa_gpt_config_default(&c);
    lua_settop(L, 2);
    if (!lua_isnil(L, 2)) read_config(L, 2, &c);
    else lua_pushnil(L);
    if (xsa_gpt_config_validate(&c) != 0) return luaL_error(L, "xsa.%s", xsa_last_error());
    gbox *b = newgbox(L);
    xsa_gpt *m = xsa_gpt_new(&c);
    if (!m) return xsa_lua_corefail(L);
    pushgpt(L, b, m);
    if (!lua_isnil(L, 3)) xsa_lua_attention_install(L, 3, 4);
    account(L, m);
    return 1;
}

static const char *const load_keys[] = {"attention", NULL};

/* A stand-in for the function while the core loads: the binding installs
 * the real one right after (xsa_lua_attention_install replaces it). */
static int no_forward(void *ud, xsa_gpt_ext_call *c)
{
    (void)ud, (void)c;
    return xsa_error("gpt: no attention function yet");
}
static int no_backward(void *ud, void *s, const float *dz, float *dqkv)
{
    (void)ud, (void)s, (void)dz, (void)dqkv;
    return -1;
}
static void no_drop(void *ud, void *s) { (void)ud, (void)s; }
static void no_ref(void *ud) { (void)ud; }

/* xsa.gpt.load(path [, {attention = f}]) -> model, opt|nil [, warning]:
 * a checkpoint of a model whose attention was a function (its metadata
 * says "function") loads with the Lua variant registered under the name it
 * records when its code is the recorded one, or with f; f whose code is
 * not the recorded one loads with a warning, written to stderr and
 * returned (xsa_lua_attention_resolve) */
static int l_gpt_load(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    lua_settop(L, 2);
    if (!lua_isnil(L, 2)) {
        luaL_checktype(L, 2, LUA_TTABLE);
        xsa_lua_checkkeys(L, "xsa.gpt.load", 2, load_keys);
        lua_getfield(L, 2, "attention");
        if (!lua_isnil(L, -1) && !lua_isfunction(L, -1))
            return xsa_lua_opterror(L, "xsa.gpt.load", lua_pushfstring(L, "attention must be a function "
                                    "(got %s): a built-in variant's name is in the checkpoint", luaL_typename(L, -1)));
        lua_replace(L, 2);
    }
    xsa_lua_attention_resolve(L, path, 2); /* 3: a warning or nil */
    gbox *b = newgbox(L);                 /* 4 */
    xsa_adamw **ob = xsa_lua_newadamw(L); /* 5 */
    xsa_adamw *o = NULL;
    xsa_gpt_ext_attention stub = {no_forward, no_backward, no_drop, no_ref, no_ref, NULL};
    xsa_gpt *m = xsa_gpt_load_ext(path, &o, lua_isnil(L, 2) ? NULL : &stub);
    if (!m) return xsa_lua_corefail(L);
    b->m = m;
    *ob = o;
    if (!lua_isnil(L, 2)) xsa_lua_attention_install(L, 2, 4);
    /* the core checks lambda is finite as a double; it runs as a float */
    double lambda = xsa_gpt_get_config(m)->lambda;
    if (!(fabs(lambda) <= FLT_MAX))
        return luaL_error(L, "xsa.gpt.load: %s: lambda %f is not finite as a float32", path, (lua_Number)lambda);
    lua_settop(L, 5);
    account(L, m);
    if (!o) {
        lua_pushnil(L);
        lua_replace(L, 5);
    }
    if (lua_isnil(L, 3)) return 2;
    lua_writestringerror("xsa.gpt.load: warning: %s\n", lua_tostring(L, 3));
    lua_pushvalue(L, 3);
    return 3;
}

/* ---- methods ----------------------------------------------------------- */

static void tensor_release(void *p) { xsa_tensor_free(p); }

/* The loss and its backward are core's (xsa_ag_gpt_loss): this converts
 * the arguments and pushes the result. It reads them (which pushes the
 * token tensors and so can run finalizers) before taking the model, holds
 * the result in a box until its tensor userdata exists (a memory error
 * then leaks nothing), and reports memory to the collector only after its
 * last use of the model. */
static int m_loss(lua_State *L)
{
    checkgpt(L, 1);
    int B, T;
    xsa_tensor *in = checktokens(L, 2, "inputs", &B, &T);
    xsa_tensor *tg = checktokens(L, 3, "targets", &B, &T);
    xsa_lua_attention_enter(L, checkgpt(L, 1), "gpt:loss");
    void **slot = xsa_lua_newbox(L, tensor_release);
    xsa_gpt *m = checkgpt(L, 1); /* nothing below runs Lua until the push, but f (pinned) */
    size_t before = xsa_gpt_activation_bytes(m);
    xsa_tensor *out = xsa_ag_gpt_loss(m, in, tg);
    size_t now = xsa_gpt_activation_bytes(m);
    xsa_lua_attention_leave(m);
    if (!out) return xsa_lua_corefail(L);
    *slot = out;
    xsa_lua_pushtensor(L, out); /* the userdata owns it from here */
    *slot = NULL;
    account_acts(L, before, now);
    return 1;
}

static int m_forward(lua_State *L)
{
    checkgpt(L, 1);
    int B, T;
    xsa_tensor *in = checktokens(L, 2, "inputs", &B, &T);
    xsa_gpt *m = xsa_lua_attention_enter(L, checkgpt(L, 1), "gpt:forward");
    size_t before = xsa_gpt_activation_bytes(m);
    int rc = xsa_gpt_forward(m, xsa_tensor_i32(in), NULL, B, T, NULL);
    xsa_lua_attention_leave(m);
    if (rc != 0) return xsa_lua_corefail(L);
    size_t now = xsa_gpt_activation_bytes(m);
    int64_t sh[3] = {B, T, xsa_gpt_get_config(m)->vocab};
    xsa_tensor *out = xsa_tensor_new(XSA_FLOAT32, 3, sh);
    if (out)
        memcpy(xsa_tensor_f32(out), xsa_gpt_logits(m), (size_t)xsa_tensor_numel(out) * sizeof(float));
    xsa_lua_pushtensor(L, out); /* the last use of m was above */
    account_acts(L, before, now);
    return 1;
}

static const char *const clone_keys[] = {"attention", "lambda", NULL};

static int m_clone(lua_State *L)
{
    checkgpt(L, 1);
    int att = XSA_ATTN_SA;
    double lambda = 0.0;
    int set_att = 0, set_lambda = 0;
    lua_settop(L, 2);
    lua_pushnil(L); /* 3: the clone's attention function, if any */
    if (!lua_isnil(L, 2)) { /* options first: __index can run Lua */
        luaL_checktype(L, 2, LUA_TTABLE);
        xsa_lua_checkkeys(L, "gpt:clone", 2, clone_keys);
        if (lua_getfield(L, 2, "attention") != LUA_TNIL) att = (int)attfield(L, "gpt:clone"), set_att = 1;
        if (att == ATT_FN) lua_replace(L, 3);
        else lua_pop(L, 1);
        if (lua_getfield(L, 2, "lambda") != LUA_TNIL)
            lambda = xsa_lua_f32field(L, "gpt:clone", "lambda"), set_lambda = 1;
        lua_pop(L, 1);
    }
    if (!set_att && xsa_lua_attention_push(L, checkgpt(L, 1))) { /* the source's function */
        att = ATT_FN;
        lua_replace(L, 3);
    }
    gbox *b = newgbox(L); /* 4 */
    xsa_gpt *m = checkgpt(L, 1);
    const xsa_gpt_config *c = xsa_gpt_get_config(m);
    if (!set_att) att = att == ATT_FN ? ATT_FN : (int)c->attention;
    if (set_lambda) check_lambda(L, "gpt:clone", att);
    if (!set_lambda) lambda = c->lambda;
    xsa_gpt *n = xsa_gpt_clone(m, att == ATT_FN ? XSA_ATTN_SA : (xsa_attention)att, lambda);
    if (!n) return xsa_lua_corefail(L);
    pushgpt(L, b, n);
    if (att == ATT_FN) xsa_lua_attention_install(L, 3, 4);
    account(L, n);
    return 1;
}

/* a model whose attention function is running is halfway through a
 * forward: what would change it under the forward is refused */
static xsa_gpt *checkidle(lua_State *L, int idx, const char *what)
{
    xsa_gpt *m = checkgpt(L, idx);
    if (xsa_lua_attention_busy(m))
        luaL_error(L, "%s: the model's attention function is running (a model cannot change itself "
                   "from inside its attention)", what);
    return m;
}

static int m_copy_from(lua_State *L)
{
    xsa_gpt *m = checkidle(L, 1, "gpt:copy_from");
    xsa_gpt *src = checkgpt(L, 2);
    if (xsa_gpt_copy_from(m, src) != 0) return xsa_lua_corefail(L);
    lua_settop(L, 1);
    return 1;
}

static int m_set_attention(lua_State *L)
{
    checkgpt(L, 1);
    lua_settop(L, 3);
    lua_pushvalue(L, 2);
    int att = (int)attfield(L, "gpt:set_attention");
    lua_replace(L, 2); /* a registered name's function in its place */
    int set_lambda = !lua_isnil(L, 3);
    double lambda = 0.0;
    if (set_lambda) check_lambda(L, "gpt:set_attention", att);
    if (set_lambda) {
        lua_pushvalue(L, 3);
        lambda = xsa_lua_f32field(L, "gpt:set_attention", "lambda");
        lua_pop(L, 1);
    }
    if (att == ATT_FN) {
        checkidle(L, 1, "gpt:set_attention");
        xsa_lua_attention_install(L, 2, 1);
        lua_settop(L, 1);
        return 1;
    }
    xsa_gpt *m = checkidle(L, 1, "gpt:set_attention");
    if (!set_lambda) lambda = xsa_gpt_get_config(m)->lambda;
    if (xsa_gpt_set_attention(m, (xsa_attention)att, lambda) != 0) return xsa_lua_corefail(L);
    lua_settop(L, 1);
    return 1;
}

static int m_parameters(lua_State *L)
{
    xsa_gpt *m = pingpt(L, 1); /* every push below can run a finalizer */
    int n = xsa_gpt_num_tensors(m);
    lua_createtable(L, n, n);
    for (int i = 0; i < n; i++) {
        xsa_tensor *p = xsa_gpt_param(m, i);
        lua_createtable(L, 0, 2);
        lua_pushstring(L, xsa_gpt_param_name(m, i));
        lua_setfield(L, -2, "name");
        xsa_tensor_retain(p);
        xsa_lua_pushtensor(L, p);
        lua_pushvalue(L, -1);
        lua_setfield(L, -3, "tensor");
        lua_setfield(L, -3, xsa_gpt_param_name(m, i)); /* name -> tensor */
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

static int m_num_params(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)xsa_gpt_num_params(checkgpt(L, 1)));
    return 1;
}

static int m_config(lua_State *L)
{
    /* a copy: the pushes below can run a finalizer that frees the model */
    const xsa_gpt_config cfg = *xsa_gpt_get_config(checkgpt(L, 1)), *c = &cfg;
    lua_createtable(L, 0, 8);
    lua_pushinteger(L, c->vocab);
    lua_setfield(L, -2, "vocab");
    lua_pushinteger(L, c->n_layer);
    lua_setfield(L, -2, "n_layer");
    lua_pushinteger(L, c->d_model);
    lua_setfield(L, -2, "d_model");
    lua_pushinteger(L, c->n_head);
    lua_setfield(L, -2, "n_head");
    lua_pushinteger(L, c->seq_len);
    lua_setfield(L, -2, "seq_len");
    if (!xsa_lua_attention_push(L, checkgpt(L, 1))) /* the function itself: xsa.gpt(m:config()) */
        lua_pushstring(L, xsa_gpt_attention_name(c->attention));
    lua_setfield(L, -2, "attention");
    if (xsa_gpt_attention_takes_lambda(c->attention)) { /* SA has none: xsa.gpt(m:config()) is m's config */
        lua_pushnumber(L, c->lambda);
        lua_setfield(L, -2, "lambda");
    }
    lua_pushinteger(L, (lua_Integer)c->seed);
    lua_setfield(L, -2, "seed");
    if (c->precision != XSA_PREC_F32) { /* f32 left out: results' configs stay as they were */
        lua_pushstring(L, xsa_gpt_precision_name(c->precision));
        lua_setfield(L, -2, "precision");
    }
    return 1;
}

/* model:probe(loader [, n]): batches 1..n of loader:batch(i) (n defaults to
 * and is capped by loader:num_batches()); per layer the per-batch means
 * averaged over batches, then over heads (per-head values in .heads). */
static int m_probe(lua_State *L)
{
    luaL_checkany(L, 2);
    lua_settop(L, 3);
    /* the loader's methods are Lua code that may free the model: hold it */
    xsa_gpt *m = pingpt(L, 1);
    const xsa_gpt_config *c = xsa_gpt_get_config(m);
    int L_ = c->n_layer, NH = c->n_head;
    lua_getfield(L, 2, "num_batches");
    lua_pushvalue(L, 2);
    lua_call(L, 1, 1);
    int isint;
    lua_Integer nb = lua_tointegerx(L, -1, &isint);
    if (!isint || nb < 1) return luaL_argerror(L, 2, "loader:num_batches() must be a positive integer");
    lua_pop(L, 1);
    lua_Integer n = xsa_lua_optcount(L, 3, nb, 1, INT64_MAX, "number of batches");
    if (n > nb) n = nb;
    size_t cnt = (size_t)L_ * NH * XSA_NN_PROBE_N;
    double *acc = lua_newuserdatauv(L, 2 * cnt * sizeof(double), 0);
    int accidx = lua_gettop(L);
    double *one = acc + cnt;
    memset(acc, 0, cnt * sizeof(double));
    size_t before = xsa_gpt_activation_bytes(m), now;
    for (lua_Integer i = 1; i <= n; i++) {
        lua_getfield(L, 2, "batch");
        lua_pushvalue(L, 2);
        lua_pushinteger(L, i);
        lua_call(L, 2, 1);
        int B, T;
        xsa_tensor *in = checktokens(L, lua_gettop(L), "loader:batch() inputs", &B, &T);
        xsa_lua_attention_enter(L, m, "gpt:probe");
        int rc = xsa_gpt_probe(m, xsa_tensor_i32(in), B, T, one);
        xsa_lua_attention_leave(m);
        if (rc != 0) return xsa_lua_corefail(L);
        for (size_t k = 0; k < cnt; k++) acc[k] += one[k];
        lua_settop(L, accidx);
    }
    now = xsa_gpt_activation_bytes(m);
    account_acts(L, before, now);
    lua_createtable(L, L_, 0);
    for (int l = 0; l < L_; l++) {
        lua_createtable(L, 0, XSA_NN_PROBE_N + 1);
        lua_createtable(L, NH, 0); /* heads */
        for (int h = 0; h < NH; h++) {
            lua_createtable(L, 0, XSA_NN_PROBE_N);
            for (int k = 0; k < XSA_NN_PROBE_N; k++) {
                lua_pushnumber(L, acc[((size_t)l * NH + h) * XSA_NN_PROBE_N + k] / (double)n);
                lua_setfield(L, -2, xsa_lua_probe_names[k]);
            }
            lua_rawseti(L, -2, h + 1);
        }
        lua_setfield(L, -2, "heads");
        for (int k = 0; k < XSA_NN_PROBE_N; k++) {
            double s = 0;
            for (int h = 0; h < NH; h++) s += acc[((size_t)l * NH + h) * XSA_NN_PROBE_N + k];
            lua_pushnumber(L, s / ((double)n * NH));
            lua_setfield(L, -2, xsa_lua_probe_names[k]);
        }
        lua_rawseti(L, -2, l + 1);
    }
    return 1;
}

static const char *const save_keys[] = {"optimizer", NULL};

static int m_save(lua_State *L)
{
    checkgpt(L, 1);
    const char *path = luaL_checkstring(L, 2);
    lua_settop(L, 3);
    int have_opt = 0;
    if (!lua_isnil(L, 3)) {
        luaL_checktype(L, 3, LUA_TTABLE);
        xsa_lua_checkkeys(L, "gpt:save", 3, save_keys);
        have_opt = lua_getfield(L, 3, "optimizer") != LUA_TNIL; /* stays at 4 */
        if (have_opt) xsa_lua_checkadamw(L, 4);
    }
    lua_settop(L, 4);
    /* which Lua function its attention is (a table at 5 holds the strings) */
    const char *keys[8], *values[8];
    int n = xsa_lua_attention_record(L, checkgpt(L, 1), keys, values, 8);
    /* the pointers last: the conversions and __index above can run Lua */
    xsa_adamw *o = have_opt ? xsa_lua_checkadamw(L, 4) : NULL;
    xsa_gpt *m = checkgpt(L, 1);
    if (xsa_gpt_save_meta(m, path, o, n, keys, values) != 0) return xsa_lua_corefail(L);
    lua_pushboolean(L, 1);
    return 1;
}

static int m_tostring(lua_State *L)
{
    gbox *b = luaL_checkudata(L, 1, GPT_MT);
    if (!b->m) {
        lua_pushstring(L, "xsa.gpt (freed)");
        return 1;
    }
    const xsa_gpt_config *c = xsa_gpt_get_config(b->m);
    char lam[48] = "";
    if (xsa_gpt_attention_takes_lambda(c->attention)) snprintf(lam, sizeof lam, ", lambda=%g", c->lambda);
    if (c->precision != XSA_PREC_F32)
        snprintf(lam + strlen(lam), sizeof lam - strlen(lam), ", %s", xsa_gpt_precision_name(c->precision));
    lua_pushfstring(L, "xsa.gpt(%s%s, vocab=%d, n_layer=%d, d_model=%d, n_head=%d, seq_len=%d, %d params)",
                    xsa_gpt_ext(b->m) ? XSA_GPT_EXT_NAME : xsa_gpt_attention_name(c->attention), lam, c->vocab, c->n_layer, c->d_model,
                    c->n_head, c->seq_len, (int)xsa_gpt_num_params(b->m));
    return 1;
}

/* ---- registration ------------------------------------------------------- */

static const luaL_Reg gpt_methods[] = {
    {"loss", m_loss},
    {"forward", m_forward},
    {"clone", m_clone},
    {"copy_from", m_copy_from},
    {"set_attention", m_set_attention},
    {"parameters", m_parameters},
    {"num_params", m_num_params},
    {"config", m_config},
    {"probe", m_probe},
    {"save", m_save},
    /* generate, kv_cache: l_generate.c adds them */
    {"free", g_gc},
    {NULL, NULL},
};

static const luaL_Reg gpt_meta[] = {
    {"__gc", g_gc}, {"__close", g_gc}, {"__tostring", m_tostring}, {NULL, NULL},
};

/* xsa.gpt.variants(): the core's attention names, in its order (a Lua
 * variant's name must not be one of them: lua/xsa/attention.lua) */
static int l_gpt_variants(lua_State *L)
{
    const char *const *names = xsa_gpt_attention_names();
    lua_newtable(L);
    for (int i = 0; names[i]; i++) {
        lua_pushstring(L, names[i]);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

/* Creates the model's metatable; pushes the xsa.gpt table. */
int xsa_lua_open_gpt(lua_State *L)
{
    xsa_lua_newtype(L, GPT_MT, gpt_meta, gpt_methods);

    /* xsa.gpt: a table with load and variants, callable as the constructor */
    lua_createtable(L, 0, 2);
    lua_pushcfunction(L, l_gpt_load);
    lua_setfield(L, -2, "load");
    lua_pushcfunction(L, l_gpt_variants);
    lua_setfield(L, -2, "variants");
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, l_gpt_new);
    lua_setfield(L, -2, "__call");
    lua_setmetatable(L, -2);
    return 1;
}

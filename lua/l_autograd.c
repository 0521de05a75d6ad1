/*
 * l_autograd.c: autograd from Lua. Adds to the tensor methods
 *   t:requires_grad([flag]) t:backward([grad] [, retain_graph]) t:zero_grad()
 *   t:detach() t:grad_fn() t:is_leaf()            (t.grad lives in l_tensor.c)
 * and to the xsa table
 *   xsa.no_grad(fn, ...) xsa.grad_enabled() xsa.set_grad_enabled(flag)
 *   xsa.nn.embedding/linear/layernorm/gelu/attention/cross_entropy
 * (the fused kernels of nn.h with their hand-written backward).
 *
 * Non-goals: hooks, retain_grad on non-leaves, higher-order gradients.
 */
#include "l_bind.h"
#include "../core/nn.h"

#define check xsa_lua_checktensor
#define push xsa_lua_pushtensor

/* t:requires_grad() -> boolean; t:requires_grad(flag) -> t (for chaining) */
static int t_requires_grad(lua_State *L)
{
    xsa_tensor *t = check(L, 1);
    if (lua_isnone(L, 2)) {
        lua_pushboolean(L, xsa_ag_requires_grad(t));
        return 1;
    }
    if (xsa_ag_set_requires_grad(t, lua_toboolean(L, 2)) != 0) return xsa_lua_corefail(L);
    lua_settop(L, 1);
    return 1;
}

/* t:backward([grad] [, retain_graph]) */
static int t_backward(lua_State *L)
{
    xsa_tensor *t = check(L, 1);
    xsa_tensor *g = NULL;
    int retain = 0;
    if (lua_type(L, 2) == LUA_TBOOLEAN) {
        retain = lua_toboolean(L, 2);
    } else {
        if (!lua_isnoneornil(L, 2)) g = check(L, 2);
        retain = lua_toboolean(L, 3);
    }
    if (xsa_ag_backward(t, g, retain) != 0) return xsa_lua_corefail(L);
    return 0;
}

static int t_zero_grad(lua_State *L)
{
    if (xsa_ag_zero_grad(check(L, 1)) != 0) return xsa_lua_corefail(L);
    lua_settop(L, 1);
    return 1;
}

static int t_detach(lua_State *L)
{
    push(L, xsa_ag_detach(check(L, 1)));
    return 1;
}

static int t_grad_fn(lua_State *L)
{
    const char *n = xsa_ag_grad_fn_name(check(L, 1));
    if (n) lua_pushstring(L, n);
    else lua_pushnil(L);
    return 1;
}

static int t_is_leaf(lua_State *L)
{
    lua_pushboolean(L, check(L, 1)->grad_fn == NULL);
    return 1;
}

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

/* ---- xsa.nn --------------------------------------------------------------- */

static xsa_tensor *opttensor(lua_State *L, int arg)
{
    return lua_isnoneornil(L, arg) ? NULL : check(L, arg);
}

/* embedding(idx, weight [, pos_weight]) */
static int nn_embedding(lua_State *L)
{
    xsa_tensor *idx = check(L, 1), *w = check(L, 2), *p = opttensor(L, 3);
    push(L, xsa_ag_embedding(idx, w, p));
    return 1;
}

/* linear(x, w [, b]); w is [C,OC] (input-major, as GPT-2's Conv1D) */
static int nn_linear(lua_State *L)
{
    xsa_tensor *x = check(L, 1), *w = check(L, 2), *b = opttensor(L, 3);
    push(L, xsa_ag_linear(x, w, b));
    return 1;
}

static int nn_layernorm(lua_State *L)
{
    xsa_tensor *x = check(L, 1), *w = check(L, 2), *b = check(L, 3);
    push(L, xsa_ag_layernorm(x, w, b));
    return 1;
}

static int nn_gelu(lua_State *L)
{
    push(L, xsa_ag_gelu(check(L, 1)));
    return 1;
}

/*
 * attention(q, k, v, n_head [, lambda [, opts]]) or attention(qkv, n_head
 * [, lambda [, opts]]); lambda defaults to 0 (SA). opts {probe=true,
 * weights=true} add a second result table: {probe = {per head {value_cos=,
 * self_attn=, pre_cos=, post_cos=, pre_cos_pos1=, post_cos_pos1=}}, weights = att}.
 */
static int nn_attention(lua_State *L)
{
    xsa_tensor *q = check(L, 1), *k = NULL, *v = NULL;
    int a = 2;
    if (lua_type(L, 2) != LUA_TNUMBER) {
        k = check(L, 2);
        v = check(L, 3);
        a = 4;
    }
    lua_Integer nh = luaL_checkinteger(L, a);
    luaL_argcheck(L, nh >= 1 && nh <= 65536, a, "head count must be in [1, 65536]");
    double lambda = luaL_optnumber(L, a + 1, 0.0);
    int want_probe = 0, want_att = 0;
    if (!lua_isnoneornil(L, a + 2)) {
        luaL_checktype(L, a + 2, LUA_TTABLE);
        lua_getfield(L, a + 2, "probe");
        want_probe = lua_toboolean(L, -1);
        lua_getfield(L, a + 2, "weights");
        want_att = lua_toboolean(L, -1);
        lua_pop(L, 2);
    }
    double *probe = NULL;
    if (want_probe) /* a userdata, so nothing leaks if a later step raises */
        probe = lua_newuserdatauv(L, sizeof(double) * XSA_NN_PROBE_N * (size_t)nh, 0);
    xsa_tensor *att = NULL;
    xsa_tensor *out = xsa_ag_attention(q, k, v, (int)nh, lambda, probe, want_att ? &att : NULL);
    push(L, out);
    if (!want_probe && !want_att) return 1;
    lua_createtable(L, 0, 2);
    if (want_att) {
        push(L, att);
        lua_setfield(L, -2, "weights");
    }
    if (want_probe) {
        static const char *names[XSA_NN_PROBE_N] = {"value_cos", "self_attn", "pre_cos",
                                                    "post_cos", "pre_cos_pos1", "post_cos_pos1"};
        lua_createtable(L, (int)nh, 0);
        for (lua_Integer h = 0; h < nh; h++) {
            lua_createtable(L, 0, XSA_NN_PROBE_N);
            for (int m = 0; m < XSA_NN_PROBE_N; m++) {
                lua_pushnumber(L, probe[h * XSA_NN_PROBE_N + m]);
                lua_setfield(L, -2, names[m]);
            }
            lua_rawseti(L, -2, h + 1);
        }
        lua_setfield(L, -2, "probe");
    }
    return 2;
}

/* cross_entropy(logits [...,V], targets int32 [...]) -> 0-d mean loss */
static int nn_cross_entropy(lua_State *L)
{
    xsa_tensor *lg = check(L, 1), *tg = check(L, 2);
    push(L, xsa_ag_cross_entropy(lg, tg));
    return 1;
}

static const luaL_Reg tensor_methods[] = {
    {"requires_grad", t_requires_grad}, {"backward", t_backward},
    {"zero_grad", t_zero_grad}, {"detach", t_detach}, {"grad_fn", t_grad_fn},
    {"is_leaf", t_is_leaf},
    {NULL, NULL},
};

static const luaL_Reg funcs[] = {
    {"no_grad", l_no_grad}, {"grad_enabled", l_grad_enabled},
    {"set_grad_enabled", l_set_grad_enabled},
    {NULL, NULL},
};

static const luaL_Reg nn_funcs[] = {
    {"embedding", nn_embedding}, {"linear", nn_linear}, {"layernorm", nn_layernorm},
    {"gelu", nn_gelu}, {"attention", nn_attention}, {"cross_entropy", nn_cross_entropy},
    {NULL, NULL},
};

int xsa_lua_open_autograd(lua_State *L)
{
    luaL_setfuncs(L, funcs, 0);
    /* the method table l_tensor.c registered */
    luaL_getmetatable(L, XSA_TENSOR_MT);
    if (lua_getfield(L, -1, "methods") == LUA_TTABLE) luaL_setfuncs(L, tensor_methods, 0);
    lua_pop(L, 2);
    /* xsa.nn may already exist (another binding): add to it */
    if (lua_getfield(L, -1, "nn") != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_pushvalue(L, -1);
        lua_setfield(L, -3, "nn");
    }
    luaL_setfuncs(L, nn_funcs, 0);
    lua_pop(L, 1);
    return 0;
}

/*
 * l_nn.c: the `xsa.nn` table: the fused kernels of core/nn.h with their
 * hand-written backward, as autograd functions (core/autograd.h):
 *   xsa.nn.embedding(idx, weight [, pos_weight])
 *   xsa.nn.linear(x, w [, b])       w is [C,OC], input-major (GPT-2's Conv1D)
 *   xsa.nn.layernorm(x, w, b)
 *   xsa.nn.gelu(x)                  the same C code as t:gelu()
 *   xsa.nn.attention(q, k, v, n_head [, lambda [, opts]]) / (qkv, n_head ...)
 *   xsa.nn.cross_entropy(logits, targets)
 *
 * Owns the xsa.nn table. Tensor methods (t:backward() ...) and grad mode
 * (xsa.no_grad ...) are not here: l_tensor.c and l_base.c.
 *
 * Non-goals: hooks, retain_grad on non-leaves, higher-order gradients;
 * algorithms (core/nn.c, core/autograd.c).
 */
#include "l_bind.h"
#include "../core/nn.h"

#define check xsa_lua_checktensor
#define push xsa_lua_pushtensor

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

const char *const xsa_lua_probe_names[XSA_NN_PROBE_N] = {
    "value_cos", "self_attn", "pre_cos", "post_cos", "pre_cos_pos1", "post_cos_pos1"};

/*
 * attention(q, k, v, n_head [, lambda [, opts]]) or attention(qkv, n_head
 * [, lambda [, opts]]); lambda defaults to 0 (SA). opts {probe=true,
 * weights=true} add a second result table: {probe = {per head {value_cos=,
 * self_attn=, pre_cos=, post_cos=, pre_cos_pos1=, post_cos_pos1=}}, weights = att}.
 */
static int nn_attention(lua_State *L)
{
    /* every argument first (the options table runs __index, the probe
     * buffer allocates), the tensors last: rule 1 of l_bind.h */
    check(L, 1);
    int a = 2;
    if (lua_type(L, 2) != LUA_TNUMBER) { /* (q, k, v, ...): types first, pointers later */
        check(L, 2);
        check(L, 3);
        a = 4;
    }
    lua_Integer nh = xsa_lua_checkcount(L, a, 1, 65536, "head count");
    double lambda = xsa_lua_optfloat32(L, a + 1, 0.0, "lambda");
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
    xsa_tensor *q = check(L, 1), *k = NULL, *v = NULL;
    if (a == 4) {
        k = check(L, 2);
        v = check(L, 3);
    }
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
        lua_createtable(L, (int)nh, 0);
        for (lua_Integer h = 0; h < nh; h++) {
            lua_createtable(L, 0, XSA_NN_PROBE_N);
            for (int m = 0; m < XSA_NN_PROBE_N; m++) {
                lua_pushnumber(L, probe[h * XSA_NN_PROBE_N + m]);
                lua_setfield(L, -2, xsa_lua_probe_names[m]);
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

static const luaL_Reg nn_funcs[] = {
    {"embedding", nn_embedding}, {"linear", nn_linear}, {"layernorm", nn_layernorm},
    {"gelu", nn_gelu}, {"attention", nn_attention}, {"cross_entropy", nn_cross_entropy},
    {NULL, NULL},
};

/* Pushes the xsa.nn table. */
int xsa_lua_open_nn(lua_State *L)
{
    luaL_newlib(L, nn_funcs);
    return 1;
}

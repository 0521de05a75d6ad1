/*
 * l_optim.c: the `xsa.optim` table and the AdamW optimizer userdata
 * ("xsa.adamw") over core/optim.h:
 *   opt = xsa.optim.adamw(params, {lr=1e-3, betas={0.9,0.999}, eps=1e-8,
 *                                  weight_decay=0.01})
 *       params: a list of tensors or of {tensor=} (model:parameters())
 *   opt:step() / opt:zero_grad() / opt:free() (also __close)
 *   opt.lr (read/write); opt.betas, opt.eps, opt.weight_decay, opt.step_count
 *
 * Owns the xsa.optim table and the optimizer type its function constructs
 * (as liolib.c owns io and its file handles). l_gpt.c saves and loads an
 * optimizer with a model through xsa_lua_checkadamw / xsa_lua_newadamw.
 *
 * Non-goals: the update rule (core/optim.c), schedules (lua/xsa/train.lua).
 */
#include <string.h>

#include "l_bind.h"

#define ADAMW_MT "xsa.adamw"

typedef struct { xsa_adamw *o; } obox;

xsa_adamw *xsa_lua_checkadamw(lua_State *L, int idx)
{
    obox *b = luaL_checkudata(L, idx, ADAMW_MT);
    if (!b->o) luaL_error(L, "attempt to use a freed optimizer");
    return b->o;
}

xsa_adamw **xsa_lua_newadamw(lua_State *L)
{
    obox *b = lua_newuserdatauv(L, sizeof *b, 0);
    b->o = NULL;
    luaL_setmetatable(L, ADAMW_MT);
    return &b->o;
}

static int o_gc(lua_State *L)
{
    obox *b = luaL_checkudata(L, 1, ADAMW_MT);
    if (b->o) {
        xsa_adamw_free(b->o);
        b->o = NULL;
    }
    return 0;
}

static const char *const adamw_keys[] = {"lr", "betas", "eps", "weight_decay", NULL};

/* AdamW's defaults, here only: xsa.optim.defaults publishes them and
 * xsa.train's DEFAULTS (and so the study's flags) read them from there. */
static const struct {
    double lr, beta1, beta2, eps, weight_decay;
} DEFAULTS = {1e-3, 0.9, 0.999, 1e-8, 0.01};

static int l_adamw(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    double lr = DEFAULTS.lr, b1 = DEFAULTS.beta1, b2 = DEFAULTS.beta2, eps = DEFAULTS.eps, wd = DEFAULTS.weight_decay;
    if (!lua_isnoneornil(L, 2)) {
        luaL_checktype(L, 2, LUA_TTABLE);
        const char *fn = "xsa.optim.adamw";
        xsa_lua_checkkeys(L, fn, 2, adamw_keys);
        if (lua_getfield(L, 2, "lr") != LUA_TNIL) lr = xsa_lua_f32field(L, fn, "lr");
        lua_pop(L, 1);
        if (lua_getfield(L, 2, "eps") != LUA_TNIL) eps = xsa_lua_f32field(L, fn, "eps");
        lua_pop(L, 1);
        if (lua_getfield(L, 2, "weight_decay") != LUA_TNIL) wd = xsa_lua_f32field(L, fn, "weight_decay");
        lua_pop(L, 1);
        if (lua_getfield(L, 2, "betas") != LUA_TNIL) {
            if (!lua_istable(L, -1)) return xsa_lua_opterror(L, fn, "betas must be a table {beta1, beta2}");
            lua_rawgeti(L, -1, 1);
            b1 = xsa_lua_f32field(L, fn, "betas[1]");
            lua_pop(L, 1);
            lua_rawgeti(L, -1, 2);
            b2 = xsa_lua_f32field(L, fn, "betas[2]");
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    size_t n = lua_rawlen(L, 1);
    if (n < 1 || n > 1 << 20) return luaL_argerror(L, 1, "expected a non-empty list of parameters");
    /* each tensor gets a reference of our own as soon as it is read: the
     * entries' __index and the allocations below can run Lua that frees it */
    xsa_tensor **ps = xsa_lua_newtensorlist(L, (int)n);
    for (size_t i = 1; i <= n; i++) {
        lua_rawgeti(L, 1, (lua_Integer)i);
        xsa_tensor *t = xsa_lua_testtensor(L, -1);
        if (!t && lua_istable(L, -1)) {
            lua_getfield(L, -1, "tensor");
            t = xsa_lua_testtensor(L, -1);
            lua_pop(L, 1);
        }
        if (!t)
            return luaL_argerror(L, 1, lua_pushfstring(L, "entry %d is not a tensor or {tensor=}",
                                                       (int)i));
        xsa_tensor_retain(t);
        ps[i - 1] = t;
        lua_pop(L, 1);
    }
    xsa_adamw **slot = xsa_lua_newadamw(L);
    *slot = xsa_adamw_new((int)n, ps, lr, b1, b2, eps, wd);
    if (!*slot) return luaL_error(L, "xsa.optim.%s", xsa_last_error());
    return 1;
}

static int o_step(lua_State *L)
{
    if (xsa_adamw_step(xsa_lua_checkadamw(L, 1)) != 0) return xsa_lua_corefail(L);
    return 0;
}

static int o_zero_grad(lua_State *L)
{
    xsa_adamw_zero_grad(xsa_lua_checkadamw(L, 1));
    return 0;
}

static int o_index(lua_State *L)
{
    xsa_lua_checkadamw(L, 1);
    const char *k = luaL_checkstring(L, 2); /* can convert a number: allocates */
    xsa_adamw *o = xsa_lua_checkadamw(L, 1);
    if (strcmp(k, "lr") == 0) lua_pushnumber(L, o->lr);
    else if (strcmp(k, "eps") == 0) lua_pushnumber(L, o->eps);
    else if (strcmp(k, "weight_decay") == 0) lua_pushnumber(L, o->weight_decay);
    else if (strcmp(k, "betas") == 0) {
        double b1 = o->beta1, b2 = o->beta2; /* createtable can run a finalizer that frees o */
        lua_createtable(L, 2, 0);
        lua_pushnumber(L, b1);
        lua_rawseti(L, -2, 1);
        lua_pushnumber(L, b2);
        lua_rawseti(L, -2, 2);
    } else if (strcmp(k, "step_count") == 0) lua_pushinteger(L, o->n > 0 ? o->steps[0] : 0);
    else {
        luaL_getmetafield(L, 1, "methods");
        lua_getfield(L, -1, k);
    }
    return 1;
}

static int o_newindex(lua_State *L)
{
    xsa_lua_checkadamw(L, 1);
    const char *k = luaL_checkstring(L, 2); /* can convert a number: allocates */
    if (strcmp(k, "lr") != 0) return luaL_error(L, "adamw: field '%s' cannot be set (only lr)", k);
    if (lua_type(L, 3) != LUA_TNUMBER) return luaL_error(L, "adamw: lr must be a number");
    lua_pushvalue(L, 3);
    double lr = xsa_lua_f32field(L, "adamw", "lr");
    xsa_adamw *o = xsa_lua_checkadamw(L, 1);
    if (xsa_adamw_set_lr(o, lr) != 0) return xsa_lua_corefail(L);
    return 0;
}

static int o_tostring(lua_State *L)
{
    obox *b = luaL_checkudata(L, 1, ADAMW_MT);
    if (!b->o) lua_pushstring(L, "xsa.adamw (freed)");
    else
        lua_pushfstring(L, "xsa.adamw(%d tensors, lr=%f, weight_decay=%f)", b->o->n, b->o->lr,
                        b->o->weight_decay);
    return 1;
}

/* ---- registration ------------------------------------------------------- */

static const luaL_Reg adamw_methods[] = {
    {"step", o_step},
    {"zero_grad", o_zero_grad},
    {"free", o_gc},
    {NULL, NULL},
};

static const luaL_Reg adamw_meta[] = {
    {"__index", o_index}, {"__newindex", o_newindex}, {"__gc", o_gc},
    {"__close", o_gc},    {"__tostring", o_tostring}, {NULL, NULL},
};

static const luaL_Reg optim_funcs[] = {
    {"adamw", l_adamw},
    {NULL, NULL},
};

/* Creates the optimizer's metatable; pushes the xsa.optim table. */
int xsa_lua_open_optim(lua_State *L)
{
    luaL_newmetatable(L, ADAMW_MT);
    luaL_setfuncs(L, adamw_meta, 0);
    luaL_newlib(L, adamw_methods);
    lua_setfield(L, -2, "methods");
    lua_pop(L, 1);
    luaL_newlib(L, optim_funcs);
    lua_createtable(L, 0, 4); /* xsa.optim.defaults */
    lua_pushnumber(L, DEFAULTS.lr);
    lua_setfield(L, -2, "lr");
    lua_createtable(L, 2, 0);
    lua_pushnumber(L, DEFAULTS.beta1);
    lua_rawseti(L, -2, 1);
    lua_pushnumber(L, DEFAULTS.beta2);
    lua_rawseti(L, -2, 2);
    lua_setfield(L, -2, "betas");
    lua_pushnumber(L, DEFAULTS.eps);
    lua_setfield(L, -2, "eps");
    lua_pushnumber(L, DEFAULTS.weight_decay);
    lua_setfield(L, -2, "weight_decay");
    lua_setfield(L, -2, "defaults");
    return 1;
}

/*
 * l_generator.c: the random number generator userdata ("xsa.generator"),
 * an xsa_rng (core/tensor.h) of its own, for draws that must not disturb
 * the global stream (xsa.manual_seed):
 *   g = xsa.generator([seed])     (a function of the xsa table: l_base.c)
 *   g:rand(sizes...) g:randn(sizes...) g:randint(lo, hi, sizes...)
 *                                 the same C code as xsa.rand(g, ...) ...
 *   g:manual_seed(seed) -> g
 *
 * Owns the generator type: its metatable and methods. Generators passed to
 * xsa.rand/randn/randint/rand_like/randn_like are found with
 * xsa_lua_testgenerator.
 *
 * Non-goals: the generator's algorithm (core/tensor.c); saving its state.
 */
#include "l_bind.h"

#define GEN_MT "xsa.generator"

xsa_rng *xsa_lua_testgenerator(lua_State *L, int idx)
{
    return luaL_testudata(L, idx, GEN_MT);
}

void xsa_lua_pushgenerator(lua_State *L, uint64_t seed)
{
    xsa_rng *g = lua_newuserdatauv(L, sizeof *g, 0);
    xsa_rng_seed(g, seed);
    luaL_setmetatable(L, GEN_MT);
}

static int g_rand(lua_State *L) { return xsa_lua_random(L, 0); }
static int g_randn(lua_State *L) { return xsa_lua_random(L, 1); }
static int g_randint(lua_State *L) { return xsa_lua_random(L, 2); }

static int g_manual_seed(lua_State *L)
{
    xsa_rng *g = luaL_checkudata(L, 1, GEN_MT);
    xsa_rng_seed(g, (uint64_t)xsa_lua_checkint(L, 2));
    lua_settop(L, 1);
    return 1;
}

static int g_tostring(lua_State *L)
{
    luaL_checkudata(L, 1, GEN_MT);
    lua_pushfstring(L, "xsa.generator (%p)", lua_topointer(L, 1));
    return 1;
}

static const luaL_Reg gen_meta[] = {
    {"__tostring", g_tostring},
    {NULL, NULL},
};

static const luaL_Reg gen_methods[] = {
    {"rand", g_rand}, {"randn", g_randn}, {"randint", g_randint},
    {"manual_seed", g_manual_seed},
    {NULL, NULL},
};

/* Creates the generator's metatable; pushes nothing. */
int xsa_lua_open_generator(lua_State *L)
{
    xsa_lua_newtype(L, GEN_MT, gen_meta, gen_methods);
    return 0;
}

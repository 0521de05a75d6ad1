/*
 * l_generator.c: the random number generator userdata ("xsa.generator"),
 * an xsa_rng (core/tensor.h) of its own, for draws that must not disturb
 * the global stream (xsa.manual_seed):
 *   g = xsa.generator([seed])     (a function of the xsa table: l_base.c)
 *   g:rand(sizes...) g:randn(sizes...) g:randint(lo, hi, sizes...)
 *                                 the same C code as xsa.rand(g, ...) ...
 *   g:manual_seed(seed) -> g
 *   g:get_state() -> s, g:set_state(s) -> g   the whole state as a string
 *   xsa.get_rng_state(), xsa.set_rng_state(s) the same for the global
 *                                 generator (registered by l_base.c)
 * A state string is "xoshiro256** S0 S1 S2 S3 SPARE" (the four words in
 * hex; SPARE the kept Box-Muller normal as a C99 hex float, or "-"):
 * setting it back continues the stream exactly where it was.
 *
 * Owns the generator type: its metatable and methods. Generators passed to
 * xsa.rand/randn/randint/rand_like/randn_like are found with
 * xsa_lua_testgenerator.
 *
 * Non-goals: the generator's algorithm (core/rng.c).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "l_bind.h"

#define GEN_MT XSA_LUA_GENERATOR_MT

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

static int g_manual_seed(lua_State *L)
{
    xsa_rng *g = luaL_checkudata(L, 1, GEN_MT);
    xsa_rng_seed(g, (uint64_t)xsa_lua_checkint(L, 2));
    lua_settop(L, 1);
    return 1;
}

static int push_state(lua_State *L, const xsa_rng *g)
{
    char spare[64] = "-";
    if (g->has_spare) snprintf(spare, sizeof spare, "%a", g->spare);
    char buf[160];
    snprintf(buf, sizeof buf, "xoshiro256** %016" PRIx64 " %016" PRIx64 " %016" PRIx64 " %016" PRIx64 " %s",
             g->s[0], g->s[1], g->s[2], g->s[3], spare);
    lua_pushstring(L, buf);
    return 1;
}

static void set_state(lua_State *L, int arg, xsa_rng *g)
{
    const char *s = luaL_checkstring(L, arg);
    xsa_rng r;
    char spare[64];
    int n = -1;
    if (sscanf(s, "xoshiro256** %16" SCNx64 " %16" SCNx64 " %16" SCNx64 " %16" SCNx64 " %63s%n", &r.s[0],
               &r.s[1], &r.s[2], &r.s[3], spare, &n) != 5 || s[n] != '\0' ||
        (r.s[0] | r.s[1] | r.s[2] | r.s[3]) == 0)
        luaL_argerror(L, arg, "not a generator state (from get_state / xsa.get_rng_state)");
    r.has_spare = strcmp(spare, "-") != 0;
    r.spare = 0.0;
    if (r.has_spare) {
        char *end;
        r.spare = strtod(spare, &end);
        /* Box-Muller's spare is r sin(th), |r| <= sqrt(-2 log 2^-53) < 8.6: a
         * NaN, an infinity or a larger value was not saved by get_state */
        if (*end || !(fabs(r.spare) < 9.0))
            luaL_argerror(L, arg, "not a generator state (bad spare normal: not a finite number below 9 in size)");
    }
    *g = r;
}

static int g_get_state(lua_State *L) { return push_state(L, luaL_checkudata(L, 1, GEN_MT)); }

static int g_set_state(lua_State *L)
{
    set_state(L, 2, luaL_checkudata(L, 1, GEN_MT));
    lua_settop(L, 1);
    return 1;
}

int xsa_lua_get_rng_state(lua_State *L) { return push_state(L, xsa_rng_global()); }

int xsa_lua_set_rng_state(lua_State *L)
{
    set_state(L, 1, xsa_rng_global());
    return 0;
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
    {"manual_seed", g_manual_seed}, /* rand, randn, randint: l_base.c adds them */
    {"get_state", g_get_state}, {"set_state", g_set_state},
    {NULL, NULL},
};

/* Creates the generator's metatable; pushes nothing. */
int xsa_lua_open_generator(lua_State *L)
{
    xsa_lua_newtype(L, GEN_MT, gen_meta, gen_methods);
    return 0;
}

/*
 * l_bind.c: helpers every binding file shares (declared in l_bind.h):
 * raising a core failure as a Lua error, reading and writing whole files
 * with luaL_fileresult's conventions, and the box that frees a C buffer when
 * a Lua error unwinds past the function that holds it; creating a
 * userdata type's metatable (liolib.c's createmeta); reading options tables
 * (xsa.gpt{...}, xsa.optim.adamw(params, {...})).
 *
 * Owns the userdata type "xsa.box": a pointer and the function that frees
 * it. A box lives only on a C function's stack; Lua code never sees one.
 * Registers no Lua table.
 *
 * Non-goals: helpers one binding file alone needs (they stay static there);
 * typed userdata (each type has its own file, check function and __gc).
 */
#include <ctype.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "l_bind.h"

#define BOX_MT "xsa.box"

typedef struct {
    void *p;
    void (*free)(void *);
} box;

int xsa_lua_corefail(lua_State *L)
{
    return luaL_error(L, "%s", xsa_last_error());
}

int xsa_lua_textresult(lua_State *L, char *text, size_t n)
{
    if (!text) {
        lua_pushnil(L);
        lua_pushstring(L, xsa_last_error());
        return 2;
    }
    /* lua_pushlstring can only fail by a memory error; keep the buffer in a
     * userdata-free path by pushing first, then freeing */
    lua_pushlstring(L, text, n);
    free(text);
    return 1;
}

int xsa_lua_writeresult(lua_State *L, const char *path, int idx)
{
    size_t n;
    const char *s = lua_tolstring(L, idx, &n);
    if (xsa_atomic_write(path, s, n) != 0) return xsa_lua_corefail(L);
    lua_pushboolean(L, 1);
    return 1;
}

/* __gc: frees what the box still holds; a box emptied by its user (the slot
 * set back to NULL) frees nothing. */
static int box_gc(lua_State *L)
{
    box *b = luaL_checkudata(L, 1, BOX_MT);
    if (b->p) b->free(b->p);
    b->p = NULL;
    return 0;
}

void **xsa_lua_newbox(lua_State *L, void (*free_fn)(void *))
{
    box *b = lua_newuserdatauv(L, sizeof *b, 0);
    b->p = NULL;
    b->free = free_fn;
    if (luaL_newmetatable(L, BOX_MT)) {
        lua_pushcfunction(L, box_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_setmetatable(L, -2);
    return &b->p;
}

void xsa_lua_newtype(lua_State *L, const char *name, const luaL_Reg *meta,
                     const luaL_Reg *methods)
{
    luaL_newmetatable(L, name);
    luaL_setfuncs(L, meta, 0);
    lua_newtable(L);
    luaL_setfuncs(L, methods, 0);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
}

/* ---- options tables ------------------------------------------------------ */

int xsa_lua_opterror(lua_State *L, const char *fn, const char *msg)
{
    return luaL_error(L, "%s: %s", fn, msg);
}

double xsa_lua_numfield(lua_State *L, const char *fn, const char *key)
{
    if (lua_type(L, -1) != LUA_TNUMBER)
        return xsa_lua_opterror(L, fn, lua_pushfstring(L, "%s must be a number (got %s)", key,
                                                       luaL_typename(L, -1)));
    double v = lua_tonumber(L, -1);
    if (!isfinite(v)) return xsa_lua_opterror(L, fn, lua_pushfstring(L, "%s must be finite", key));
    return v;
}

double xsa_lua_f32field(lua_State *L, const char *fn, const char *key)
{
    double v = xsa_lua_numfield(L, fn, key);
    if (!(fabs(v) <= FLT_MAX))
        return xsa_lua_opterror(L, fn, lua_pushfstring(L, "%s must be finite as a float32 (|x| <= %f, got %f)",
                                                       key, (lua_Number)FLT_MAX, (lua_Number)v));
    return v;
}

int64_t xsa_lua_countfield(lua_State *L, const char *fn, const char *key, int64_t min, int64_t max)
{
    int isint;
    lua_Integer v = lua_tointegerx(L, -1, &isint);
    if (!isint || v < min || v > max) {
        const char *got = lua_type(L, -1) == LUA_TNUMBER ? lua_pushfstring(L, "%s", lua_tostring(L, -1))
                                                          : luaL_typename(L, -1);
        return xsa_lua_opterror(L, fn, lua_pushfstring(L, "%s must be an integer in [%I, %I] (got %s)", key,
                                                       (lua_Integer)min, (lua_Integer)max, got));
    }
    return (int64_t)v;
}

/* The optimal-string-alignment distance of a and b after lower-casing and
 * reading '-' as '_' (the same measure as lua/xsa/options.lua); names
 * longer than 63 bytes are never close. */
static int near_distance(const char *a, const char *b)
{
    char x[64], y[64];
    size_t la = strlen(a), lb = strlen(b);
    if (la >= sizeof x || lb >= sizeof y) return 1 << 20;
    for (size_t i = 0; i < la; i++) x[i] = a[i] == '-' ? '_' : (char)tolower((unsigned char)a[i]);
    for (size_t j = 0; j < lb; j++) y[j] = b[j] == '-' ? '_' : (char)tolower((unsigned char)b[j]);
    int d[64][64];
    for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int c = d[i - 1][j - 1] + (x[i - 1] != y[j - 1]);
            if (d[i - 1][j] + 1 < c) c = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < c) c = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && x[i - 1] == y[j - 2] && x[i - 2] == y[j - 1] && d[i - 2][j - 2] + 1 < c)
                c = d[i - 2][j - 2] + 1;
            d[i][j] = c;
        }
    return d[la][lb];
}

/* Raises "unknown option 'k' (did you mean 'x'?)" or "(known: a, b)". */
static void unknown_key(lua_State *L, const char *fn, int kidx, const char *const *allowed)
{
    const char *k = lua_type(L, kidx) == LUA_TSTRING ? lua_tostring(L, kidx) : NULL;
    const char *best = NULL;
    int best_d = 0;
    for (int i = 0; k && allowed[i]; i++) {
        int d = near_distance(k, allowed[i]);
        if (d <= 1 + (int)strlen(k) / 4 && (!best || d < best_d)) best = allowed[i], best_d = d;
    }
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    if (k) lua_pushfstring(L, "unknown option '%s' (", k);
    else lua_pushfstring(L, "unknown option [%s] (", luaL_typename(L, kidx));
    luaL_addvalue(&b);
    if (best) {
        lua_pushfstring(L, "did you mean '%s'?)", best);
        luaL_addvalue(&b);
    } else {
        luaL_addstring(&b, "known: ");
        for (int i = 0; allowed[i]; i++) {
            if (i) luaL_addstring(&b, ", ");
            luaL_addstring(&b, allowed[i]);
        }
        luaL_addstring(&b, ")");
    }
    luaL_pushresult(&b);
    xsa_lua_opterror(L, fn, lua_tostring(L, -1));
}

void xsa_lua_checkkeys(lua_State *L, const char *fn, int arg, const char *const *allowed)
{
    lua_pushnil(L);
    while (lua_next(L, arg)) {
        lua_pop(L, 1);
        int ok = 0;
        if (lua_type(L, -1) == LUA_TSTRING) {
            const char *k = lua_tostring(L, -1);
            for (int i = 0; allowed[i]; i++)
                if (strcmp(k, allowed[i]) == 0) ok = 1;
        }
        if (!ok) unknown_key(L, fn, lua_gettop(L), allowed);
    }
}

/* ---- numbers from Lua ------------------------------------------------------ */

int64_t xsa_lua_checkcount(lua_State *L, int arg, int64_t min, int64_t max, const char *what)
{
    int isint;
    lua_Integer v = lua_tointegerx(L, arg, &isint);
    if (!isint) {
        if (lua_type(L, arg) == LUA_TNUMBER)
            return luaL_argerror(L, arg, lua_pushfstring(L, "%s must be an integer (got %f)", what,
                                                         lua_tonumber(L, arg)));
        return luaL_typeerror(L, arg, "integer");
    }
    if (v < min || v > max)
        return luaL_argerror(L, arg, lua_pushfstring(L, "%s must be in [%I, %I] (got %I)", what,
                                                     (lua_Integer)min, (lua_Integer)max, v));
    return (int64_t)v;
}

int64_t xsa_lua_optcount(lua_State *L, int arg, int64_t dflt, int64_t min, int64_t max,
                         const char *what)
{
    return lua_isnoneornil(L, arg) ? dflt : xsa_lua_checkcount(L, arg, min, max, what);
}

double xsa_lua_checkfloat32(lua_State *L, int arg, const char *what)
{
    double v = (double)luaL_checknumber(L, arg);
    if (!(fabs(v) <= FLT_MAX))
        return luaL_argerror(L, arg, lua_pushfstring(L, "%s must be finite as a float32 (|x| <= %f, got %f)",
                                                     what, (lua_Number)FLT_MAX, (lua_Number)v));
    return v;
}

double xsa_lua_optfloat32(lua_State *L, int arg, double dflt, const char *what)
{
    return lua_isnoneornil(L, arg) ? dflt : xsa_lua_checkfloat32(L, arg, what);
}

/* ---- shapes ------------------------------------------------------------------ */

static int64_t shape_value(lua_State *L, int arg, int idx, int pos, int allow_m1)
{
    int ok;
    lua_Integer v = lua_tointegerx(L, idx, &ok);
    if (!ok) {
        if (pos == 0) { /* a plain argument: Lua's own wording */
            if (lua_type(L, idx) == LUA_TNUMBER)
                luaL_argerror(L, arg, lua_pushfstring(L, "number has no integer representation (got %f)",
                                                      lua_tonumber(L, idx)));
            luaL_typeerror(L, arg, "integer");
        }
        luaL_argerror(L, arg, lua_pushfstring(L, "size %d must be an integer (got %s)", pos,
                                              lua_type(L, idx) == LUA_TNUMBER
                                                  ? lua_pushfstring(L, "%f", lua_tonumber(L, idx))
                                                  : luaL_typename(L, idx)));
    }
    if (v < (allow_m1 ? -1 : 0))
        luaL_argerror(L, arg, lua_pushfstring(L, allow_m1 ? "size must be -1 or non-negative (got %I)"
                                                          : "size must be non-negative (got %I)", v));
    if (v > XSA_MAX_NUMEL) luaL_argerror(L, arg, lua_pushfstring(L, "size %I is too large", v));
    return (int64_t)v;
}

void xsa_lua_readshape(lua_State *L, int first, int last, int allow_m1, xsa_lua_shape *sp)
{
    sp->ndim = 0;
    if (last == first && lua_type(L, first) == LUA_TTABLE) {
        size_t n = lua_rawlen(L, first);
        if (n > XSA_MAX_DIMS)
            luaL_argerror(L, first, lua_pushfstring(L, "at most %d dimensions", XSA_MAX_DIMS));
        for (size_t i = 1; i <= n; i++) {
            lua_rawgeti(L, first, (lua_Integer)i);
            sp->shape[sp->ndim++] = shape_value(L, first, lua_gettop(L), (int)i, allow_m1);
            lua_pop(L, 1);
        }
    } else {
        if (last - first + 1 > XSA_MAX_DIMS)
            luaL_argerror(L, first, lua_pushfstring(L, "at most %d dimensions", XSA_MAX_DIMS));
        for (int a = first; a <= last; a++) sp->shape[sp->ndim++] = shape_value(L, a, a, 0, allow_m1);
    }
    /* the product of the known sizes, checked before it can overflow */
    int64_t known = 1;
    for (int i = 0; i < sp->ndim; i++)
        if (sp->shape[i] == 0) return;
    for (int i = 0; i < sp->ndim; i++) {
        int64_t v = sp->shape[i];
        if (v < 0) continue;
        if (known > XSA_MAX_NUMEL / v)
            luaL_argerror(L, first, lua_pushfstring(L, "the shape has more than %I elements",
                                                    (lua_Integer)XSA_MAX_NUMEL));
        known *= v;
    }
}

/* ---- tensor lists -------------------------------------------------------- */

typedef struct {
    int n;
    xsa_tensor *t[];
} tlist;

static void tlist_free(void *p)
{
    tlist *l = p;
    for (int i = 0; i < l->n; i++) xsa_tensor_free(l->t[i]);
    free(l);
}

xsa_tensor **xsa_lua_newtensorlist(lua_State *L, int n)
{
    if (n < 0) n = 0;
    void **slot = xsa_lua_newbox(L, tlist_free);
    tlist *l = calloc(1, sizeof *l + (size_t)(n ? n : 1) * sizeof l->t[0]);
    if (!l) luaL_error(L, "out of memory for a list of %d tensors", n);
    l->n = n;
    *slot = l;
    return l->t;
}

/*
 * l_base.c: the `xsa` table's own functions (as Lua's lbaselib.c holds the
 * global functions; l_init.c builds the module, as linit.c does):
 *   the engine: xsa._VERSION, xsa.version(), xsa.blas() -> {core=, best=,
 *     fallback=, threads=, gemm=, gemm_lib=, gemm_source=, lmhead=}, xsa.set_threads(n),
 *     xsa.set_gemm(name) ("openblas" | "dnnl" | "default": gemm.h)
 *   whole files: xsa.read_file(path) -> bytes | nil, message;
 *     xsa.write_file_atomic(path, s) -> true (temporary file, then rename)
 *   folders and identities: xsa.cwd() -> the working directory (getcwd);
 *     xsa.list_files(dir [, "files" | "folders"]) -> sorted names of
 *     its regular files (or folders) | nil, message; xsa.file_checksum(path) ->
 *     "crc64:<16 hex>", bytes | nil, message
 *   grad mode: xsa.no_grad(fn, ...) xsa.grad_enabled() xsa.set_grad_enabled(flag)
 *   tensors (sizes as varargs or one table; trailing dtype "float32"|"int32"
 *   and/or {dtype=, requires_grad=} where it makes sense):
 *     xsa.tensor(data) zeros ones full(sizes..., v) arange([start,] stop [,step])
 *     rand randn randint(lo, hi, sizes...) ([g,] first: an xsa.generator(seed))
 *     zeros_like ones_like full_like rand_like randn_like  cat stack where
 *     matmul allclose generator manual_seed get_rng_state set_rng_state
 *     (l_generator.c's) is_tensor live_bytes
 *
 * Owns the functions of the xsa table; the tables inside it (xsa.json,
 * xsa.nn, ...) belong to their own files and are set by l_init.c. Tensor
 * methods are l_tensor.c's, the generator's l_generator.c's. Dimension
 * arguments (cat, stack) are 1-based, as in l_tensor.c.
 *
 * Non-goals: algorithms and file formats (core/), decompression
 * (xsa._data.read_text, l_data.c), JSON files (xsa.json, l_json.c).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "l_bind.h"

#define check xsa_lua_checktensor
#define push xsa_lua_pushtensor
#define checkint xsa_lua_checkint

static int checkdim(lua_State *L, int arg, int ndim) { return xsa_lua_checkdim(L, arg, ndim, 0); }

/* ---- the engine ---------------------------------------------------------- */

static int l_version(lua_State *L)
{
    lua_pushstring(L, XSA_VERSION);
    return 1;
}

static int l_blas(lua_State *L)
{
    lua_createtable(L, 0, 8);
    lua_pushstring(L, xsa_blas_corename());
    lua_setfield(L, -2, "core");
    const char *best = xsa_cpu_best_coretype();
    lua_pushstring(L, best ? best : "none");
    lua_setfield(L, -2, "best");
    lua_pushboolean(L, xsa_blas_is_fallback());
    lua_setfield(L, -2, "fallback");
    lua_pushinteger(L, xsa_threads());
    lua_setfield(L, -2, "threads");
    lua_pushstring(L, xsa_gemm_name());
    lua_setfield(L, -2, "gemm");
    lua_pushstring(L, xsa_gemm_describe());
    lua_setfield(L, -2, "gemm_lib");
    lua_pushstring(L, xsa_gemm_source());
    lua_setfield(L, -2, "gemm_source");
    lua_pushstring(L, xsa_nn_lmhead_describe());
    lua_setfield(L, -2, "lmhead");
    return 1;
}

static int l_set_gemm(lua_State *L)
{
    if (xsa_gemm_set(luaL_checkstring(L, 1)) != 0) return xsa_lua_corefail(L);
    return 0;
}

static int l_set_threads(lua_State *L)
{
    lua_Integer n = luaL_checkinteger(L, 1);
    luaL_argcheck(L, n >= 1 && n <= 1024, 1, "thread count must be in [1, 1024]");
    if (xsa_set_threads((int)n) != 0) return xsa_lua_corefail(L);
    return 0;
}

/* ---- whole files ------------------------------------------------------- */

static int l_write_file_atomic(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    luaL_checkstring(L, 2);
    return xsa_lua_writeresult(L, path, 2);
}

static int l_read_file(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    size_t n;
    char *text = xsa_read_file(path, &n);
    return xsa_lua_textresult(L, text, n);
}

/* xsa.cwd(): the process's working directory as the kernel knows it
 * (getcwd), not $PWD, which a parent may have left stale. */
static int l_cwd(lua_State *L)
{
    char buf[4096];
    if (!getcwd(buf, sizeof buf)) {
        luaL_pushfail(L);
        lua_pushstring(L, strerror(errno));
        return 2;
    }
    lua_pushstring(L, buf);
    return 1;
}

/* A folder of results holds thousands of files at most; more is refused
 * rather than read into a table without bound. */
#define LIST_MAX 1000000

/* The names from xsa_list_files, owned by a userdata until freed, so a
 * memory error while copying them into Lua cannot leak them
 * (lauxlib.c's box). */
typedef struct names_box {
    char **names;
    size_t n;
} names_box;

static int names_box_gc(lua_State *L)
{
    names_box *b = lua_touserdata(L, 1);
    xsa_free_names(b->names, b->n);
    b->names = NULL;
    b->n = 0;
    return 0;
}

static int l_list_files(lua_State *L)
{
    static const char *const kinds[] = {"files", "folders", NULL};
    const char *dir = luaL_checkstring(L, 1);
    int folders = luaL_checkoption(L, 2, "files", kinds);
    names_box *b = lua_newuserdatauv(L, sizeof *b, 0);
    b->names = NULL;
    b->n = 0;
    if (luaL_newmetatable(L, "xsa.names_box")) {
        lua_pushcfunction(L, names_box_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_setmetatable(L, -2);
    b->names = folders ? xsa_list_dirs(dir, LIST_MAX, &b->n) : xsa_list_files(dir, LIST_MAX, &b->n);
    if (!b->names) {
        luaL_pushfail(L);
        lua_pushstring(L, xsa_last_error());
        return 2;
    }
    lua_createtable(L, (int)(b->n < INT_MAX ? b->n : INT_MAX), 0);
    for (size_t i = 0; i < b->n; i++) {
        lua_pushstring(L, b->names[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    xsa_free_names(b->names, b->n); /* now, not at the next GC cycle */
    b->names = NULL;
    b->n = 0;
    return 1;
}

static int l_file_checksum(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    uint64_t crc, size;
    if (xsa_file_crc64(path, &crc, &size) != 0) {
        luaL_pushfail(L);
        lua_pushstring(L, xsa_last_error());
        return 2;
    }
    char hex[24];
    snprintf(hex, sizeof hex, "crc64:%016llx", (unsigned long long)crc);
    lua_pushstring(L, hex);
    lua_pushinteger(L, (lua_Integer)size);
    return 2;
}

/* ---- grad mode ----------------------------------------------------------- */

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

/* ---- tensor arguments ---------------------------------------------------- */

static xsa_dtype checkdtype(lua_State *L, int arg)
{
    static const char *const names[] = {"float32", "int32", "float", "int", NULL};
    int k = luaL_checkoption(L, arg, NULL, names);
    return (k == 0 || k == 2) ? XSA_FLOAT32 : XSA_INT32;
}

typedef struct {
    int ndim;
    int64_t shape[XSA_MAX_DIMS];
    xsa_dtype dt;
    int dt_set; /* a dtype was given */
    int requires_grad;
} spec;

/* An options table: not an array (no [1]); {dtype=..., requires_grad=...}. */
static int is_options(lua_State *L, int idx)
{
    if (lua_type(L, idx) != LUA_TTABLE) return 0;
    int t = lua_rawgeti(L, idx, 1);
    lua_pop(L, 1);
    return t == LUA_TNIL;
}

static void read_options(lua_State *L, int idx, spec *sp)
{
    if (lua_getfield(L, idx, "dtype") != LUA_TNIL) {
        sp->dt = checkdtype(L, lua_gettop(L));
        sp->dt_set = 1;
    }
    lua_pop(L, 1);
    lua_getfield(L, idx, "requires_grad");
    sp->requires_grad = lua_toboolean(L, -1);
    lua_pop(L, 1);
}

/* Strips a trailing options table and dtype string from [first, *last]. */
static void read_tail(lua_State *L, int first, int *last, spec *sp)
{
    if (*last >= first && is_options(L, *last)) read_options(L, (*last)--, sp);
    if (*last >= first && lua_type(L, *last) == LUA_TSTRING) {
        sp->dt = checkdtype(L, (*last)--);
        sp->dt_set = 1;
    }
}

/* Sizes from args [first, last]: either one table {2,3} (read raw) or
 * integers 2, 3 (xsa_lua_readshape). */
static void read_sizes(lua_State *L, int first, int last, spec *sp)
{
    xsa_lua_shape sh;
    xsa_lua_readshape(L, first, last, 0, &sh);
    sp->ndim = sh.ndim;
    memcpy(sp->shape, sh.shape, sizeof sh.shape);
}

static void spec_init(spec *sp)
{
    memset(sp, 0, sizeof *sp);
    sp->dt = XSA_FLOAT32;
}

/* Pushes a fresh tensor made by the core, applying requires_grad. */
static void push_new(lua_State *L, xsa_tensor *t, const spec *sp)
{
    if (t && sp->requires_grad && xsa_ag_set_requires_grad(t, 1) != 0) {
        xsa_tensor_free(t);
        t = NULL;
    }
    push(L, t);
}

static xsa_rng *optgen(lua_State *L, int *first)
{
    xsa_rng *g = xsa_lua_testgenerator(L, *first);
    if (g) (*first)++;
    return g;
}

/* ---- constructors ---------------------------------------------------------- */

/* Nested tables are read raw (lua_rawlen, lua_rawgeti): no user code runs
 * while the tensor is filled. */
static void nested_shape(lua_State *L, int idx, spec *sp)
{
    lua_pushvalue(L, idx);
    for (;;) {
        if (lua_type(L, -1) != LUA_TTABLE) break;
        if (sp->ndim == XSA_MAX_DIMS)
            luaL_argerror(L, 1, lua_pushfstring(L, "more than %d nested levels", XSA_MAX_DIMS));
        size_t len = lua_rawlen(L, -1);
        if (len > (size_t)XSA_MAX_NUMEL) luaL_argerror(L, 1, "nested table too long");
        lua_Integer n = (lua_Integer)len;
        sp->shape[sp->ndim++] = n;
        if (n == 0) break;
        lua_rawgeti(L, -1, 1);
        lua_remove(L, -2);
    }
    lua_pop(L, 1);
}

/* Fills data[*pos ...] from the nested table at the top, checking that it is
 * rectangular and holds numbers. */
static void nested_fill(lua_State *L, const spec *sp, int depth, void *data, int64_t *pos)
{
    lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
    if (n != sp->shape[depth])
        luaL_argerror(L, 1, lua_pushfstring(L, "ragged nested table: %I elements at depth %d, expected %I",
                                            n, depth + 1, (lua_Integer)sp->shape[depth]));
    for (lua_Integer i = 1; i <= n; i++) {
        int ty = lua_rawgeti(L, -1, i);
        if (depth + 1 < sp->ndim) {
            if (ty != LUA_TTABLE)
                luaL_argerror(L, 1, lua_pushfstring(L, "ragged nested table: %s at depth %d, expected a table",
                                                    lua_typename(L, ty), depth + 2));
            nested_fill(L, sp, depth + 1, data, pos);
        } else {
            if (ty != LUA_TNUMBER)
                luaL_argerror(L, 1, lua_pushfstring(L, "element %I at depth %d is a %s, expected a number",
                                                    i, depth + 1, lua_typename(L, ty)));
            if (sp->dt == XSA_FLOAT32) {
                ((float *)data)[(*pos)++] = (float)lua_tonumber(L, -1);
            } else {
                int ok;
                lua_Integer v = lua_tointegerx(L, -1, &ok);
                if (!ok || v < INT32_MIN || v > INT32_MAX)
                    luaL_argerror(L, 1, lua_pushfstring(L, "element %s is not an int32", luaL_tolstring(L, -1, NULL)));
                ((int32_t *)data)[(*pos)++] = (int32_t)v;
            }
        }
        lua_pop(L, 1);
    }
}

/* xsa.tensor(data [, dtype] [, {requires_grad=, dtype=}]): data is a number,
 * a nested table or a tensor (copied). */
static int l_tensor(lua_State *L)
{
    spec sp;
    spec_init(&sp);
    int last = lua_gettop(L);
    read_tail(L, 2, &last, &sp);
    if (last > 1) return luaL_argerror(L, 2, "dtype string or options table expected");
    xsa_tensor *src = xsa_lua_testtensor(L, 1);
    if (src) {
        xsa_tensor *t = xsa_tensor_to_dtype(src, sp.dt); /* a copy, outside any graph */
        if (t && t == src) {
            xsa_tensor_free(t);
            t = xsa_tensor_clone(src);
        }
        push_new(L, t, &sp);
        return 1;
    }
    if (lua_type(L, 1) == LUA_TNUMBER) {
        push_new(L, xsa_tensor_full(sp.dt, 0, NULL, lua_tonumber(L, 1)), &sp);
        return 1;
    }
    luaL_checktype(L, 1, LUA_TTABLE);
    nested_shape(L, 1, &sp);
    xsa_tensor *t = xsa_tensor_new(sp.dt, sp.ndim, sp.shape);
    push(L, t); /* owns the tensor if filling raises; raises if t is NULL */
    int64_t pos = 0;
    lua_pushvalue(L, 1);
    nested_fill(L, &sp, 0, t->storage->data, &pos);
    lua_pop(L, 1);
    if (sp.requires_grad && xsa_ag_set_requires_grad(t, 1) != 0) return xsa_lua_corefail(L);
    return 1;
}

static int filled(lua_State *L, int kind)
{
    spec sp;
    spec_init(&sp);
    int last = lua_gettop(L);
    read_tail(L, 1, &last, &sp);
    double v = kind == 1 ? 1.0 : 0.0;
    if (kind == 2) {
        if (last < 1) return luaL_error(L, "bad argument #1 to 'full' (sizes and a value expected)");
        v = luaL_checknumber(L, last--);
    }
    read_sizes(L, 1, last, &sp);
    push_new(L, xsa_tensor_full(sp.dt, sp.ndim, sp.shape, v), &sp);
    return 1;
}

static int l_zeros(lua_State *L) { return filled(L, 0); }
static int l_ones(lua_State *L) { return filled(L, 1); }
static int l_full(lua_State *L) { return filled(L, 2); }

/* arange(stop) / arange(start, stop [, step]) [, dtype] [, opts]; PyTorch's
 * half-open [start, stop). Integer arguments give int32 unless a dtype says. */
static int l_arange(lua_State *L)
{
    spec sp;
    spec_init(&sp);
    int last = lua_gettop(L);
    read_tail(L, 1, &last, &sp);
    if (last < 1 || last > 3) return luaL_error(L, "bad argument #1 to 'arange' (1 to 3 numbers expected)");
    double a[3] = {0, 0, 1};
    int all_int = 1;
    for (int i = 1; i <= last; i++) {
        double v = luaL_checknumber(L, i);
        if (!lua_isinteger(L, i)) all_int = 0;
        a[last == 1 ? 1 : i - 1] = v;
    }
    if (!sp.dt_set && all_int) sp.dt = XSA_INT32;
    push_new(L, xsa_tensor_arange(sp.dt, a[0], a[1], a[2]), &sp);
    return 1;
}

/* rand, randn (kind 1) and randint (kind 2), from an optional generator
 * first (xsa.rand(g, 2, 3) and g:rand(2, 3) alike) or the global one. */
static int random_tensor(lua_State *L, int kind)
{
    int first = 1;
    xsa_rng *g = optgen(L, &first);
    spec sp;
    spec_init(&sp);
    int last = lua_gettop(L);
    read_tail(L, first, &last, &sp);
    xsa_tensor *t;
    if (kind == 2) {
        if (last - first < 1) return luaL_error(L, "bad argument #%d to 'randint' (lo, hi and sizes expected)", first);
        int64_t lo = checkint(L, first), hi = checkint(L, first + 1);
        luaL_argcheck(L, hi > lo, first + 1, "hi must be greater than lo");
        read_sizes(L, first + 2, last, &sp);
        if (sp.requires_grad) return luaL_error(L, "randint: an int32 tensor cannot require grad");
        t = xsa_tensor_randint(g, lo, hi, sp.ndim, sp.shape);
    } else {
        read_sizes(L, first, last, &sp);
        if (sp.dt == XSA_INT32) return luaL_error(L, "%s: only float32 is supported", kind ? "randn" : "rand");
        t = kind ? xsa_tensor_randn(g, sp.ndim, sp.shape, 0.0, 1.0) : xsa_tensor_rand(g, sp.ndim, sp.shape);
    }
    push_new(L, t, &sp);
    return 1;
}

static int l_rand(lua_State *L) { return random_tensor(L, 0); }
static int l_randn(lua_State *L) { return random_tensor(L, 1); }
static int l_randint(lua_State *L) { return random_tensor(L, 2); }

static uint64_t checkseed(lua_State *L, int arg)
{
    int64_t s = checkint(L, arg);
    return (uint64_t)s;
}

/* xsa.generator([seed]): a generator of its own (l_generator.c) */
static int l_generator(lua_State *L)
{
    uint64_t seed = luaL_opt(L, checkseed, 1, 0);
    xsa_lua_pushgenerator(L, seed);
    return 1;
}

static int l_manual_seed(lua_State *L)
{
    xsa_rng_seed(xsa_rng_global(), checkseed(L, 1));
    return 0;
}

/* ---- functions of tensors ---------------------------------------------------- */

/* number or tensor argument as a tensor; numbers become 0-d tensors pushed on
 * the stack (so nothing leaks if a later step raises). */
static void totensor(lua_State *L, int arg, const char *name)
{
    if (xsa_lua_testtensor(L, arg)) return;
    if (lua_type(L, arg) != LUA_TNUMBER)
        luaL_error(L, "bad argument #%d to '%s' (tensor or number expected, got %s)", arg, name,
                   luaL_typename(L, arg));
    push(L, xsa_tensor_full(XSA_FLOAT32, 0, NULL, lua_tonumber(L, arg)));
    lua_replace(L, arg);
}

static int l_where(lua_State *L)
{
    check(L, 1);
    lua_settop(L, 3);
    totensor(L, 2, "where");
    totensor(L, 3, "where");
    /* the pushes above can run a finalizer: take the pointers only now */
    xsa_tensor *c = check(L, 1), *a = check(L, 2), *b = check(L, 3);
    push(L, xsa_ag_where(c, a, b));
    return 1;
}

static int l_live_bytes(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)xsa_storage_live_bytes());
    return 1;
}

static int l_is_tensor(lua_State *L)
{
    lua_pushboolean(L, luaL_testudata(L, 1, XSA_TENSOR_MT) != NULL);
    return 1;
}

/* The tensors of the list at `arg` (read raw), each with a reference of
 * our own held by a box pushed on the stack (xsa_lua_newtensorlist), so no
 * later step can free them and nothing leaks if it raises. */
static xsa_tensor **tensor_list(lua_State *L, int arg, int *n, const char *name)
{
    luaL_checktype(L, arg, LUA_TTABLE);
    size_t len = lua_rawlen(L, arg);
    if (len < 1) luaL_argerror(L, arg, "a non-empty list of tensors expected");
    if (len > 1000000) luaL_argerror(L, arg, "too many tensors");
    xsa_tensor **v = xsa_lua_newtensorlist(L, (int)len);
    for (size_t i = 1; i <= len; i++) {
        lua_rawgeti(L, arg, (lua_Integer)i);
        xsa_tensor *t = xsa_lua_testtensor(L, -1);
        if (!t)
            luaL_argerror(L, arg, lua_pushfstring(L, "element %I of the list to '%s' is a %s, not a tensor",
                                                  (lua_Integer)i, name, luaL_typename(L, -1)));
        xsa_tensor_retain(t);
        v[i - 1] = t;
        lua_pop(L, 1);
    }
    *n = (int)len;
    return v;
}

/* xsa.cat({a, b, ...} [, dim]) */
static int l_cat(lua_State *L)
{
    int n;
    lua_settop(L, 2);
    xsa_tensor **v = tensor_list(L, 1, &n, "cat");
    int nd = v[0]->ndim;
    int d = lua_isnoneornil(L, 2) ? 0 : checkdim(L, 2, nd);
    push(L, xsa_ag_cat(n, v, d));
    return 1;
}

/* xsa.stack({a, b, ...} [, dim]): a new dimension at dim */
static int l_stack(lua_State *L)
{
    int n;
    lua_settop(L, 2);
    xsa_tensor **v = tensor_list(L, 1, &n, "stack");
    int d = lua_isnoneornil(L, 2) ? 0 : xsa_lua_checkdim(L, 2, v[0]->ndim, 1);
    for (int i = 0; i < n; i++) {
        if (!xsa_tensor_same_shape(v[i], v[0])) {
            char b1[128], b2[128];
            return luaL_error(L, "stack: tensor %d %s and tensor 1 %s differ in shape", i + 1,
                              xsa_shape_str(v[i]->ndim, v[i]->shape, b1, sizeof b1),
                              xsa_shape_str(v[0]->ndim, v[0]->shape, b2, sizeof b2));
        }
    }
    for (int i = 0; i < n; i++) { /* the list owns the views in place of the tensors */
        xsa_tensor *u = xsa_ag_unsqueeze(v[i], d);
        if (!u) return xsa_lua_corefail(L);
        xsa_tensor_free(v[i]);
        v[i] = u;
    }
    push(L, xsa_ag_cat(n, v, d));
    return 1;
}

/* zeros_like / ones_like / full_like(t, v) / rand_like / randn_like(t [, g]) */
static int like(lua_State *L, int kind)
{
    check(L, 1);
    spec sp;
    spec_init(&sp);
    int last = lua_gettop(L);
    read_tail(L, 2, &last, &sp); /* options tables run __index: before taking t */
    xsa_tensor *t = check(L, 1);
    if (!sp.dt_set) sp.dt = t->dtype;
    xsa_tensor *r;
    if (kind <= 2) {
        double v = kind == 2 ? luaL_checknumber(L, 2) : (double)kind;
        r = xsa_tensor_full(sp.dt, t->ndim, t->shape, v);
    } else {
        xsa_rng *g = xsa_lua_testgenerator(L, 2);
        r = kind == 3 ? xsa_tensor_rand(g, t->ndim, t->shape) : xsa_tensor_randn(g, t->ndim, t->shape, 0.0, 1.0);
    }
    push_new(L, r, &sp);
    return 1;
}

static int l_zeros_like(lua_State *L) { return like(L, 0); }
static int l_ones_like(lua_State *L) { return like(L, 1); }
static int l_full_like(lua_State *L) { return like(L, 2); }
static int l_rand_like(lua_State *L) { return like(L, 3); }
static int l_randn_like(lua_State *L) { return like(L, 4); }

/* ---- registration ------------------------------------------------------ */

static const luaL_Reg base_funcs[] = {
    {"version", l_version},
    {"blas", l_blas},
    {"set_threads", l_set_threads},
    {"set_gemm", l_set_gemm},
    {"write_file_atomic", l_write_file_atomic},
    {"read_file", l_read_file},
    {"list_files", l_list_files},
    {"cwd", l_cwd},
    {"file_checksum", l_file_checksum},
    {"no_grad", l_no_grad},
    {"grad_enabled", l_grad_enabled},
    {"set_grad_enabled", l_set_grad_enabled},
    {"tensor", l_tensor}, {"zeros", l_zeros}, {"ones", l_ones}, {"full", l_full},
    {"arange", l_arange}, {"rand", l_rand}, {"randn", l_randn}, {"randint", l_randint},
    {"generator", l_generator}, {"manual_seed", l_manual_seed},
    {"get_rng_state", xsa_lua_get_rng_state}, {"set_rng_state", xsa_lua_set_rng_state},
    {"where", l_where}, {"matmul", xsa_lua_tensor_matmul}, {"allclose", xsa_lua_tensor_allclose},
    {"is_tensor", l_is_tensor}, {"live_bytes", l_live_bytes},
    {"cat", l_cat}, {"stack", l_stack},
    {"zeros_like", l_zeros_like}, {"ones_like", l_ones_like}, {"full_like", l_full_like},
    {"rand_like", l_rand_like}, {"randn_like", l_randn_like},
    {NULL, NULL},
};

/* The generator's methods that make tensors: these constructors with the
 * generator first. Added here, where the constructors are, so that
 * l_generator.c (the type) needs nothing of this file. */
static const luaL_Reg generator_random[] = {
    {"rand", l_rand}, {"randn", l_randn}, {"randint", l_randint},
    {NULL, NULL},
};

/* Pushes the xsa table with its own functions (after
 * xsa_lua_open_generator: it completes the generator's methods). */
int xsa_lua_open_base(lua_State *L)
{
    luaL_getmetatable(L, XSA_LUA_GENERATOR_MT);
    lua_getfield(L, -1, "__index");
    luaL_setfuncs(L, generator_random, 0);
    lua_pop(L, 2);
    luaL_newlib(L, base_funcs);
    lua_pushstring(L, XSA_VERSION);
    lua_setfield(L, -2, "_VERSION");
    return 1;
}

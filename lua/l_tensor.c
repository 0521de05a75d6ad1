/*
 * l_tensor.c: the tensor userdata ("xsa.tensor"): its metatable, its
 * methods and the C helpers other binding files use to take and return
 * tensors (xsa_lua_checktensor, xsa_lua_pushtensor, ...).
 *
 * The Lua face is 1-based: element indices (t[i], get/set, narrow, select,
 * argmax/argmin results) and dimension arguments (dim 1 = first, -1 = last)
 * are converted here to the core's 0-based ones. Values (token ids, arange,
 * randint) are values, not indices, and are not shifted.
 *
 * Every op routes through the xsa_ag_* wrappers, so autograd works from Lua;
 * the autograd methods (requires_grad, backward, ...) are registered here
 * with the others.
 *
 * Memory: a userdata box holds one reference to its tensor. Lua's collector
 * sees only the small box, so large buffers are reported to it (a GC step
 * worth their size, as torch7's THHeapUpdate does) and t:free() / <close>
 * release early; a freed tensor raises "attempt to use a freed tensor".
 *
 * Methods:
 *   t: shape size stride dim numel dtype is_contiguous get set item totable
 *      view reshape expand transpose T permute narrow select unsqueeze squeeze
 *      contiguous clone float int flatten split chunk
 *      add sub mul div pow maximum minimum eq ne lt le gt ge (+ - * / ^ unary -)
 *      neg exp log sqrt tanh relu gelu abs sigmoid clamp masked_fill matmul mm
 *      sum mean max min argmax argmin var std softmax log_softmax
 *      add_ sub_ mul_ div_ fill_ copy_ zero_  free  allclose equal
 *      requires_grad backward zero_grad detach grad_fn is_leaf
 *      t[i], t[i] = v, #t, tostring(t), t.grad
 *
 * Owns the tensor type only. Constructors (xsa.tensor, xsa.zeros, ...) and
 * functions of several tensors (xsa.cat, xsa.where, ...) are functions of
 * the xsa table: l_base.c; the random generator type: l_generator.c. When
 * this file outgrows about 1,000 lines, the next cut is the math methods
 * (arithmetic, in place, reductions) into a file exporting a luaL_Reg array
 * that only this file registers, so the method table keeps one
 * registration point.
 *
 * Non-goals: algorithms (all in core/), fancy indexing with tensors or
 * ranges (use narrow/select), dtypes beyond float32/int32.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "l_bind.h"

typedef struct {
    xsa_tensor *t;
} tbox;

/* ---- boxes --------------------------------------------------------------- */

static tbox *newbox(lua_State *L)
{
    tbox *b = lua_newuserdatauv(L, sizeof *b, 1);
    b->t = NULL;
    luaL_setmetatable(L, XSA_TENSOR_MT);
    return b;
}

/* Tells the collector about a big buffer that just appeared behind a small
 * box, so garbage tensors in a loop are reclaimed before memory runs out:
 * a GC step worth the buffer, and (torch7's THHeapUpdate idea) a full
 * collection whenever the bytes held by live storages double past a soft
 * limit. The step alone is not enough: results of metamethods (t + 1) were
 * seen to escape it for hundreds of iterations. */
static size_t heap_soft_limit = (size_t)256 << 20;

static void account(lua_State *L, const xsa_tensor *t)
{
    size_t nb = t->storage->nbytes;
    /* a fresh result covers its whole storage; a view of a big tensor (t[i]
     * in a loop) brings no new memory and must not drive the collector */
    int fresh = t->storage->refcount <= 2 && t->offset == 0 &&
                (size_t)xsa_tensor_numel(t) * xsa_dtype_size(t->dtype) == nb;
    if (nb < ((size_t)256 << 10) || !fresh) return;
    size_t kb = nb >> 10;
    lua_gc(L, LUA_GCSTEP, kb > 1u << 30 ? 1 << 30 : (int)kb);
    size_t live = xsa_storage_live_bytes();
    if (live > heap_soft_limit) {
        lua_gc(L, LUA_GCCOLLECT);
        live = xsa_storage_live_bytes();
        size_t floor = (size_t)256 << 20;
        heap_soft_limit = live * 2 > floor ? live * 2 : floor;
    }
}

void xsa_lua_pushtensor(lua_State *L, xsa_tensor *t)
{
    if (!t) {
        xsa_lua_corefail(L);
        return;
    }
    tbox *b = newbox(L);
    b->t = t;
    account(L, t);
}

xsa_tensor *xsa_lua_testtensor(lua_State *L, int idx)
{
    tbox *b = luaL_testudata(L, idx, XSA_TENSOR_MT);
    if (!b) return NULL;
    if (!b->t) luaL_error(L, "attempt to use a freed tensor");
    return b->t;
}

xsa_tensor *xsa_lua_checktensor(lua_State *L, int idx)
{
    tbox *b = luaL_checkudata(L, idx, XSA_TENSOR_MT);
    if (!b->t) luaL_error(L, "attempt to use a freed tensor");
    return b->t;
}

xsa_tensor *xsa_lua_pintensor(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    tbox *pin = newbox(L); /* allocates: fetch the tensor only afterwards */
    xsa_tensor *t = xsa_lua_checktensor(L, idx);
    xsa_tensor_retain(t);
    pin->t = t;
    return t;
}

#define check xsa_lua_checktensor
#define push xsa_lua_pushtensor
#define checkint xsa_lua_checkint
#define checkdim_x xsa_lua_checkdim

static int t_gc(lua_State *L)
{
    tbox *b = luaL_checkudata(L, 1, XSA_TENSOR_MT);
    if (b->t) {
        xsa_tensor_free(b->t);
        b->t = NULL;
    }
    return 0;
}

/* ---- argument helpers ----------------------------------------------------- */

int64_t xsa_lua_checkint(lua_State *L, int arg)
{
    int ok;
    lua_Integer v = lua_tointegerx(L, arg, &ok);
    if (!ok) {
        if (lua_type(L, arg) == LUA_TNUMBER)
            luaL_argerror(L, arg, lua_pushfstring(L, "number has no integer representation (got %s)",
                                                  luaL_tolstring(L, arg, NULL)));
        luaL_typeerror(L, arg, "integer");
    }
    return (int64_t)v;
}

/* A 1-based (or negative) dimension d, given as argument arg, to 0-based. */
static int dim_value(lua_State *L, int arg, int64_t d, int ndim, int extra)
{
    int n = ndim + extra;
    if (d == 0 || d > n || d < -n) {
        if (n == 0)
            return luaL_argerror(L, arg, "a 0-d tensor has no dimensions");
        return luaL_argerror(L, arg, lua_pushfstring(L, "dimension %I out of range (expected 1..%d or -%d..-1)",
                                                     (lua_Integer)d, n, n));
    }
    return d > 0 ? (int)(d - 1) : (int)(d + n);
}

int xsa_lua_checkdim(lua_State *L, int arg, int ndim, int extra)
{
    return dim_value(L, arg, checkint(L, arg), ndim, extra);
}

static int checkdim(lua_State *L, int arg, int ndim) { return checkdim_x(L, arg, ndim, 0); }

/* 1-based (negative from the end) index into a dimension of `size`. */
static int64_t checkindex(lua_State *L, int arg, int64_t size, int dim)
{
    int64_t i = checkint(L, arg);
    int64_t j = i < 0 ? i + size + 1 : i;
    if (j < 1 || j > size)
        luaL_argerror(L, arg, lua_pushfstring(L, "index %I out of range for dimension %d of size %I",
                                              (lua_Integer)i, dim + 1, (lua_Integer)size));
    return j - 1;
}

/* ---- facts ------------------------------------------------------------------ */

/* Pushes {v[1], ..., v[n]}. v must not point into a tensor: creating the
 * table can run a finalizer that frees it (callers pass a copy). */
static void push_dims(lua_State *L, int n, const int64_t *v)
{
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_pushinteger(L, v[i]);
        lua_rawseti(L, -2, i + 1);
    }
}

static int t_shape(lua_State *L)
{
    xsa_tensor *t = check(L, 1);
    int64_t v[XSA_MAX_DIMS];
    memcpy(v, t->shape, sizeof v);
    xsa_lua_pushsize(L, t->ndim, v);
    return 1;
}

static int t_size(lua_State *L)
{
    xsa_tensor *t = check(L, 1);
    if (lua_isnoneornil(L, 2)) return t_shape(L);
    lua_pushinteger(L, t->shape[checkdim(L, 2, t->ndim)]);
    return 1;
}

static int t_stride(lua_State *L)
{
    xsa_tensor *t = check(L, 1);
    if (!lua_isnoneornil(L, 2)) {
        lua_pushinteger(L, t->stride[checkdim(L, 2, t->ndim)]);
        return 1;
    }
    int64_t v[XSA_MAX_DIMS];
    memcpy(v, t->stride, sizeof v);
    push_dims(L, t->ndim, v);
    return 1;
}

static int t_dim(lua_State *L)
{
    lua_pushinteger(L, check(L, 1)->ndim);
    return 1;
}

static int t_numel(lua_State *L)
{
    lua_pushinteger(L, xsa_tensor_numel(check(L, 1)));
    return 1;
}

static int t_len(lua_State *L)
{
    xsa_tensor *t = check(L, 1);
    if (t->ndim == 0) return luaL_error(L, "len() of a 0-d tensor");
    lua_pushinteger(L, t->shape[0]);
    return 1;
}

static int t_dtype(lua_State *L)
{
    lua_pushstring(L, xsa_dtype_name(check(L, 1)->dtype));
    return 1;
}

static int t_is_contiguous(lua_State *L)
{
    lua_pushboolean(L, xsa_tensor_is_contiguous(check(L, 1)));
    return 1;
}

static int t_tostring(lua_State *L)
{
    tbox *b = luaL_checkudata(L, 1, XSA_TENSOR_MT);
    if (!b->t) {
        lua_pushstring(L, "tensor(freed)");
        return 1;
    }
    char *s = xsa_tensor_format(b->t);
    if (!s) return xsa_lua_corefail(L);
    size_t n = strlen(s);
    const char *name = xsa_ag_grad_fn_name(b->t);
    if (n > 0 && (name || b->t->requires_grad)) {
        s[n - 1] = '\0'; /* the closing parenthesis */
        if (name) lua_pushfstring(L, "%s, grad_fn=<%s>)", s, name);
        else lua_pushfstring(L, "%s, requires_grad=True)", s);
    } else {
        lua_pushstring(L, s);
    }
    free(s);
    return 1;
}

/* ---- element access --------------------------------------------------------- */

static void push_value(lua_State *L, const xsa_tensor *t, double v)
{
    if (t->dtype == XSA_INT32) lua_pushinteger(L, (lua_Integer)v);
    else lua_pushnumber(L, v);
}

/* Reads ndim 1-based indices from args first.. into ix. */
static void read_index(lua_State *L, const char *fn, xsa_tensor *t, int first, int nargs,
                       int64_t *ix)
{
    if (nargs != t->ndim)
        luaL_error(L, "%s: %d indices given for a tensor of %d dimensions", fn, nargs, t->ndim);
    for (int d = 0; d < t->ndim; d++) ix[d] = checkindex(L, first + d, t->shape[d], d);
}

static int t_get(lua_State *L)
{
    xsa_tensor *t = check(L, 1);
    int64_t ix[XSA_MAX_DIMS];
    read_index(L, "get", t, 2, lua_gettop(L) - 1, ix);
    double v;
    if (xsa_tensor_get(t, ix, &v) != 0) return xsa_lua_corefail(L);
    push_value(L, t, v);
    return 1;
}

static int t_set(lua_State *L)
{
    xsa_tensor *t = check(L, 1);
    int top = lua_gettop(L);
    double v = luaL_checknumber(L, top);
    int64_t ix[XSA_MAX_DIMS];
    read_index(L, "set", t, 2, top - 2, ix);
    if (xsa_ag_check_inplace(t, "set") != 0) return xsa_lua_corefail(L);
    if (xsa_tensor_set(t, ix, v) != 0) return xsa_lua_corefail(L);
    lua_settop(L, 1);
    return 1;
}

static int t_item(lua_State *L)
{
    xsa_tensor *t = check(L, 1);
    if (xsa_tensor_numel(t) != 1) {
        char b[128];
        return luaL_error(L, "item: a tensor of shape %s has %d elements, not one",
                          xsa_shape_str(t->ndim, t->shape, b, sizeof b), (int)xsa_tensor_numel(t));
    }
    int64_t ix[XSA_MAX_DIMS] = {0};
    double v;
    if (xsa_tensor_get(t, ix, &v) != 0) return xsa_lua_corefail(L);
    push_value(L, t, v);
    return 1;
}

static void totable_rec(lua_State *L, const xsa_tensor *t, int d, int64_t *ix)
{
    lua_createtable(L, t->shape[d] < INT32_MAX ? (int)t->shape[d] : 0, 0); /* a size hint */
    for (int64_t i = 0; i < t->shape[d]; i++) {
        ix[d] = i;
        if (d + 1 == t->ndim) {
            double v;
            xsa_tensor_get(t, ix, &v);
            push_value(L, t, v);
        } else {
            totable_rec(L, t, d + 1, ix);
        }
        lua_rawseti(L, -2, i + 1);
    }
}

static int t_totable(lua_State *L)
{
    /* building the tables allocates, which can run a finalizer that frees
     * the tensor: read it through a reference of our own */
    xsa_tensor *t = xsa_lua_pintensor(L, 1);
    int64_t ix[XSA_MAX_DIMS] = {0};
    if (t->ndim == 0) {
        double v;
        xsa_tensor_get(t, ix, &v);
        push_value(L, t, v);
        return 1;
    }
    luaL_checkstack(L, t->ndim + 4, "tensor too deep");
    totable_rec(L, t, 0, ix);
    return 1;
}

/* The grad box is cached in the tensor box's user value so `t.grad` gives the
 * same userdata each time while t->grad is the same tensor. */
static void push_grad(lua_State *L, int idx, xsa_tensor *t)
{
    if (!t->grad) {
        lua_pushnil(L);
        return;
    }
    lua_getiuservalue(L, idx, 1);
    tbox *c = luaL_testudata(L, -1, XSA_TENSOR_MT);
    if (c && c->t == t->grad) return;
    lua_pop(L, 1);
    xsa_tensor_retain(t->grad);
    push(L, t->grad);
    lua_pushvalue(L, -1);
    lua_setiuservalue(L, idx, 1);
}

/* __index: methods, t.grad, and t[i] (a number for 1-D, a view otherwise). */
static int t_index(lua_State *L)
{
    if (lua_type(L, 2) == LUA_TSTRING) {
        lua_pushvalue(L, 2);
        if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1;
        const char *k = lua_tostring(L, 2);
        if (strcmp(k, "grad") == 0) {
            push_grad(L, 1, check(L, 1));
            return 1;
        }
        return 1; /* nil */
    }
    xsa_tensor *t = check(L, 1);
    if (lua_type(L, 2) != LUA_TNUMBER)
        return luaL_error(L, "tensor index must be an integer or a method name (got %s)", luaL_typename(L, 2));
    if (t->ndim == 0) return luaL_error(L, "cannot index a 0-d tensor (use :item())");
    int64_t i = checkindex(L, 2, t->shape[0], 0);
    if (t->ndim == 1) {
        double v;
        if (xsa_tensor_get(t, &i, &v) != 0) return xsa_lua_corefail(L);
        push_value(L, t, v);
        return 1;
    }
    push(L, xsa_ag_select(t, 0, i));
    return 1;
}

/* t[i] = v: an element of a 1-D tensor, or fills / copies into a slice. */
static int t_newindex(lua_State *L)
{
    xsa_tensor *t = check(L, 1);
    if (lua_type(L, 2) == LUA_TSTRING && strcmp(lua_tostring(L, 2), "grad") == 0) {
        xsa_tensor *g = lua_isnil(L, 3) ? NULL : check(L, 3);
        /* the model's backward and the optimizer write through .grad as a
         * dense array: an expanded or strided view would be overrun */
        if (g && (!xsa_tensor_same_shape(g, t) || g->dtype != XSA_FLOAT32 || !xsa_tensor_is_contiguous(g)))
            return luaL_error(L, "grad: a contiguous float32 tensor of the tensor's shape expected");
        if (g) xsa_tensor_retain(g);
        xsa_tensor_free(t->grad);
        t->grad = g;
        return 0;
    }
    if (lua_type(L, 2) != LUA_TNUMBER)
        return luaL_error(L, "cannot set field '%s' of a tensor", luaL_tolstring(L, 2, NULL));
    if (t->ndim == 0) return luaL_error(L, "cannot index a 0-d tensor");
    int64_t i = checkindex(L, 2, t->shape[0], 0);
    if (xsa_ag_check_inplace(t, "__newindex") != 0) return xsa_lua_corefail(L);
    if (t->ndim == 1) {
        if (xsa_tensor_set(t, &i, luaL_checknumber(L, 3)) != 0) return xsa_lua_corefail(L);
        return 0;
    }
    xsa_tensor *src = xsa_lua_testtensor(L, 3);
    if (!src && lua_type(L, 3) != LUA_TNUMBER) return luaL_typeerror(L, 3, "number or tensor");
    xsa_tensor *v = xsa_tensor_select(t, 0, i);
    if (!v) return xsa_lua_corefail(L);
    int rc = src ? xsa_tensor_copy_(v, src) : xsa_tensor_fill_(v, lua_tonumber(L, 3));
    xsa_tensor_free(v);
    if (rc != 0) return xsa_lua_corefail(L);
    return 0;
}

static int t_free(lua_State *L)
{
    check(L, 1);
    return t_gc(L);
}

/* ---- views -------------------------------------------------------------------- */

/* Shape arguments that may hold -1 (view/reshape/expand), read before the
 * tensor is taken (rule 1 of l_bind.h). */
static void read_shape_m1(lua_State *L, int first, xsa_lua_shape *sp)
{
    luaL_checkudata(L, 1, XSA_TENSOR_MT); /* "bad self" before "bad size" */
    xsa_lua_readshape(L, first, lua_gettop(L), 1, sp);
}

static int t_view(lua_State *L)
{
    xsa_lua_shape sp;
    read_shape_m1(L, 2, &sp);
    xsa_tensor *t = check(L, 1);
    push(L, xsa_ag_view(t, sp.ndim, sp.shape));
    return 1;
}

static int t_reshape(lua_State *L)
{
    xsa_lua_shape sp;
    read_shape_m1(L, 2, &sp);
    xsa_tensor *t = check(L, 1);
    push(L, xsa_ag_reshape(t, sp.ndim, sp.shape));
    return 1;
}

static int t_expand(lua_State *L)
{
    xsa_lua_shape sp;
    read_shape_m1(L, 2, &sp);
    xsa_tensor *t = check(L, 1);
    for (int i = 0; i < sp.ndim; i++) {
        int j = i - (sp.ndim - t->ndim);
        if (sp.shape[i] == -1) {
            if (j < 0) return luaL_error(L, "expand: -1 is not allowed for a new leading dimension");
            sp.shape[i] = t->shape[j];
        }
    }
    push(L, xsa_ag_expand(t, sp.ndim, sp.shape));
    return 1;
}

static int t_transpose(lua_State *L)
{
    xsa_tensor *t = check(L, 1);
    int d0 = checkdim(L, 2, t->ndim), d1 = checkdim(L, 3, t->ndim);
    push(L, xsa_ag_transpose(t, d0, d1));
    return 1;
}

/* t:T(): the transpose of a 2-D tensor (reversed dimensions for n-D) */
static int t_T(lua_State *L)
{
    xsa_tensor *t = check(L, 1);
    int perm[XSA_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) perm[i] = t->ndim - 1 - i;
    push(L, xsa_ag_permute(t, perm));
    return 1;
}

static int t_permute(lua_State *L)
{
    xsa_tensor *t = check(L, 1);
    int perm[XSA_MAX_DIMS], n;
    if (lua_type(L, 2) == LUA_TTABLE) {
        /* read raw: no __len or __index runs while t is held */
        size_t len = lua_rawlen(L, 2);
        if (len != (size_t)t->ndim)
            return luaL_argerror(L, 2, lua_pushfstring(L, "%I dimensions for a tensor of %d",
                                                       (lua_Integer)len, t->ndim));
        n = (int)len;
        for (int i = 0; i < n; i++) {
            lua_rawgeti(L, 2, i + 1);
            perm[i] = checkdim(L, lua_gettop(L), t->ndim);
            lua_pop(L, 1);
        }
    } else {
        n = lua_gettop(L) - 1;
        if (n != t->ndim)
            return luaL_error(L, "bad argument #1 to 'permute' (%d dimensions for a tensor of %d)", n, t->ndim);
        for (int i = 0; i < n; i++) perm[i] = checkdim(L, i + 2, t->ndim);
    }
    push(L, xsa_ag_permute(t, perm));
    return 1;
}

static int t_narrow(lua_State *L)
{
    xsa_tensor *t = check(L, 1);
    int d = checkdim(L, 2, t->ndim);
    int64_t start = checkindex(L, 3, t->shape[d], d);
    int64_t len = checkint(L, 4);
    luaL_argcheck(L, len >= 0 && len <= t->shape[d] - start, 4, /* no start + len: it can overflow */
                  lua_pushfstring(L, "length %I from %I runs past size %I", (lua_Integer)len,
                                  (lua_Integer)start + 1, (lua_Integer)t->shape[d]));
    push(L, xsa_ag_narrow(t, d, start, len));
    return 1;
}

static int t_select(lua_State *L)
{
    xsa_tensor *t = check(L, 1);
    int d = checkdim(L, 2, t->ndim);
    push(L, xsa_ag_select(t, d, checkindex(L, 3, t->shape[d], d)));
    return 1;
}

static int t_unsqueeze(lua_State *L)
{
    xsa_tensor *t = check(L, 1);
    push(L, xsa_ag_unsqueeze(t, checkdim_x(L, 2, t->ndim, 1)));
    return 1;
}

static int t_squeeze(lua_State *L)
{
    xsa_tensor *t = check(L, 1);
    int d = lua_isnoneornil(L, 2) ? XSA_ALL_DIMS : checkdim(L, 2, t->ndim);
    push(L, xsa_ag_squeeze(t, d));
    return 1;
}

static int t_contiguous(lua_State *L)
{
    push(L, xsa_ag_contiguous(check(L, 1)));
    return 1;
}

static int t_clone(lua_State *L)
{
    push(L, xsa_ag_clone(check(L, 1)));
    return 1;
}

static int to_dtype(lua_State *L, xsa_dtype dt)
{
    xsa_tensor *t = check(L, 1);
    if (t->dtype == dt) {
        lua_settop(L, 1);
        return 1;
    }
    push(L, xsa_tensor_to_dtype(t, dt));
    return 1;
}

static int t_float(lua_State *L) { return to_dtype(L, XSA_FLOAT32); }
static int t_int(lua_State *L) { return to_dtype(L, XSA_INT32); }

/* ---- arithmetic ----------------------------------------------------------------- */

static int binary(lua_State *L, xsa_binop op, const char *name)
{
    xsa_tensor *a = xsa_lua_testtensor(L, 1), *b = xsa_lua_testtensor(L, 2);
    if (a && b) {
        push(L, xsa_ag_binary(op, a, b));
    } else if (a) {
        if (lua_type(L, 2) != LUA_TNUMBER)
            return luaL_error(L, "bad argument #2 to '%s' (tensor or number expected, got %s)", name,
                              luaL_typename(L, 2));
        push(L, xsa_ag_binary_scalar(op, a, lua_tonumber(L, 2), 0));
    } else if (b) {
        if (lua_type(L, 1) != LUA_TNUMBER)
            return luaL_error(L, "bad argument #1 to '%s' (tensor or number expected, got %s)", name,
                              luaL_typename(L, 1));
        push(L, xsa_ag_binary_scalar(op, b, lua_tonumber(L, 1), 1));
    } else {
        return luaL_error(L, "bad argument #1 to '%s' (tensor expected, got %s)", name, luaL_typename(L, 1));
    }
    return 1;
}

#define BINOP(fn, op, name) \
    static int fn(lua_State *L) { return binary(L, op, name); }
BINOP(t_add, XSA_ADD, "add")
BINOP(t_sub, XSA_SUB, "sub")
BINOP(t_mul, XSA_MUL, "mul")
BINOP(t_div, XSA_DIV, "div")
BINOP(t_pow, XSA_POW, "pow")
BINOP(t_maximum, XSA_MAXIMUM, "maximum")
BINOP(t_minimum, XSA_MINIMUM, "minimum")
BINOP(t_eq, XSA_EQ, "eq")
BINOP(t_ne, XSA_NE, "ne")
BINOP(t_lt, XSA_LT, "lt")
BINOP(t_le, XSA_LE, "le")
BINOP(t_gt, XSA_GT, "gt")
BINOP(t_ge, XSA_GE, "ge")

static int unary(lua_State *L, xsa_unop op)
{
    push(L, xsa_ag_unary(op, check(L, 1)));
    return 1;
}

#define UNOP(fn, op) \
    static int fn(lua_State *L) { return unary(L, op); }
UNOP(t_neg, XSA_NEG)
UNOP(t_exp, XSA_EXP)
UNOP(t_log, XSA_LOG)
UNOP(t_sqrt, XSA_SQRT)
UNOP(t_tanh, XSA_TANH)
UNOP(t_relu, XSA_RELU)
UNOP(t_abs, XSA_ABS)
UNOP(t_sigmoid, XSA_SIGMOID)

/* t:gelu(): the exact (erf) GELU of core/nn.h, the same C code as
 * xsa.nn.gelu (l_nn.c) */
static int t_gelu(lua_State *L)
{
    push(L, xsa_ag_gelu(check(L, 1)));
    return 1;
}

static int t_clamp(lua_State *L)
{
    xsa_tensor *t = check(L, 1);
    double lo = luaL_optnumber(L, 2, -HUGE_VAL), hi = luaL_optnumber(L, 3, HUGE_VAL);
    push(L, xsa_ag_clamp(t, lo, hi));
    return 1;
}

int xsa_lua_tensor_matmul(lua_State *L)
{
    xsa_tensor *a = check(L, 1), *b = check(L, 2);
    push(L, xsa_ag_matmul(a, b));
    return 1;
}

int xsa_lua_tensor_allclose(lua_State *L)
{
    xsa_tensor *a = check(L, 1), *b = check(L, 2);
    double rtol = luaL_optnumber(L, 3, 1e-5), atol = luaL_optnumber(L, 4, 1e-8);
    int r = xsa_tensor_allclose(a, b, rtol, atol);
    if (r < 0) return xsa_lua_corefail(L);
    lua_pushboolean(L, r);
    return 1;
}

static int t_equal(lua_State *L)
{
    xsa_tensor *a = check(L, 1), *b = check(L, 2);
    lua_pushboolean(L, xsa_tensor_same_shape(a, b) && xsa_tensor_allclose(a, b, 0.0, 0.0) == 1);
    return 1;
}


/* t:masked_fill(mask, v): v where mask != 0, else t (differentiable in t) */
static int t_masked_fill(lua_State *L)
{
    check(L, 1);
    check(L, 2);
    double v = luaL_checknumber(L, 3);
    xsa_tensor *f = xsa_tensor_full(XSA_FLOAT32, 0, NULL, v);
    push(L, f); /* owned by the stack; pushing can run a finalizer: fetch t and m after */
    xsa_tensor *t = check(L, 1), *m = check(L, 2);
    push(L, xsa_ag_where(m, f, t));
    return 1;
}

/* Pushes k >= 1 views of the tensor at 1 along d: pieces of `size` >= 1
 * (the last may be shorter, or empty when the dimension is; a size past the
 * dimension gives one piece, as PyTorch). Written so no sum can overflow for
 * huge sizes. */
static int pieces(lua_State *L, int d, int64_t size, int64_t k)
{
    xsa_tensor *t = check(L, 1);
    int64_t n = t->shape[d];
    if (k > 100000) return luaL_error(L, "split: %I pieces are too many", (lua_Integer)k);
    luaL_checkstack(L, (int)k + 2, "too many pieces");
    /* each push can run a finalizer that frees t: a reference of our own */
    t = xsa_lua_pintensor(L, 1);
    int base = lua_gettop(L);
    for (int64_t i = 0, off = 0; i < k; i++, off = n - off > size ? off + size : n)
        push(L, xsa_ag_narrow(t, d, off, n - off > size ? size : n - off));
    lua_remove(L, base); /* the pin */
    return (int)k;
}

/* t:split(size [, dim]) -> views of `size` along dim (default 1) */
static int t_split(lua_State *L)
{
    xsa_tensor *t = check(L, 1);
    int64_t size = checkint(L, 2);
    luaL_argcheck(L, size >= 1, 2, "piece size must be positive");
    if (t->ndim == 0) return luaL_error(L, "split: a 0-d tensor has no dimensions");
    int d = lua_isnoneornil(L, 3) ? 0 : checkdim(L, 3, t->ndim);
    int64_t n = t->shape[d], k = n / size + (n % size != 0);
    return pieces(L, d, size, k > 0 ? k : 1);
}

/* t:chunk(n [, dim]) -> n (or fewer) views, as torch.chunk */
static int t_chunk(lua_State *L)
{
    xsa_tensor *t = check(L, 1);
    int64_t n = checkint(L, 2);
    luaL_argcheck(L, n >= 1, 2, "chunk count must be positive");
    if (t->ndim == 0) return luaL_error(L, "chunk: a 0-d tensor has no dimensions");
    int d = lua_isnoneornil(L, 3) ? 0 : checkdim(L, 3, t->ndim);
    int64_t m = t->shape[d], size = m / n + (m % n != 0); /* ceil without m + n - 1 */
    if (m == 0) return pieces(L, d, 1, n); /* n empty pieces, as torch.chunk */
    return pieces(L, d, size, m / size + (m % size != 0));
}

static int t_flatten(lua_State *L)
{
    xsa_tensor *t = check(L, 1);
    int64_t m1 = -1;
    push(L, xsa_ag_reshape(t, 1, &m1));
    return 1;
}

/* t:std([dim [, keepdim]]): sqrt of the unbiased variance */
static int t_std(lua_State *L)
{
    xsa_tensor *t = check(L, 1);
    int dim = lua_isnoneornil(L, 2) ? XSA_ALL_DIMS : checkdim(L, 2, t->ndim);
    push(L, xsa_ag_reduce(XSA_VAR, t, dim, lua_toboolean(L, 3)));
    push(L, xsa_ag_unary(XSA_SQRT, check(L, -1)));
    return 1;
}

/* ---- in place ----------------------------------------------------------------- */

static int inplace(lua_State *L, xsa_binop op, const char *name)
{
    xsa_tensor *t = check(L, 1);
    xsa_tensor *b = xsa_lua_testtensor(L, 2);
    if (!b && lua_type(L, 2) != LUA_TNUMBER) return luaL_typeerror(L, 2, "tensor or number");
    if (xsa_ag_check_inplace(t, name) != 0) return xsa_lua_corefail(L);
    int rc = b ? xsa_tensor_binary_(op, t, b) : xsa_tensor_binary_scalar_(op, t, lua_tonumber(L, 2));
    if (rc != 0) return xsa_lua_corefail(L);
    lua_settop(L, 1);
    return 1;
}

static int t_add_(lua_State *L) { return inplace(L, XSA_ADD, "add_"); }
static int t_sub_(lua_State *L) { return inplace(L, XSA_SUB, "sub_"); }
static int t_mul_(lua_State *L) { return inplace(L, XSA_MUL, "mul_"); }
static int t_div_(lua_State *L) { return inplace(L, XSA_DIV, "div_"); }

static int t_fill_(lua_State *L)
{
    xsa_tensor *t = check(L, 1);
    double v = luaL_checknumber(L, 2);
    if (xsa_ag_check_inplace(t, "fill_") != 0 || xsa_tensor_fill_(t, v) != 0) return xsa_lua_corefail(L);
    lua_settop(L, 1);
    return 1;
}

static int t_zero_(lua_State *L)
{
    xsa_tensor *t = check(L, 1);
    if (xsa_ag_check_inplace(t, "zero_") != 0 || xsa_tensor_fill_(t, 0.0) != 0) return xsa_lua_corefail(L);
    lua_settop(L, 1);
    return 1;
}

static int t_copy_(lua_State *L)
{
    xsa_tensor *t = check(L, 1), *s = check(L, 2);
    if (xsa_ag_check_inplace(t, "copy_") != 0 || xsa_tensor_copy_(t, s) != 0) return xsa_lua_corefail(L);
    lua_settop(L, 1);
    return 1;
}

/* ---- reductions -------------------------------------------------------------- */

/* t:OP([dim [, keepdim]]); for max/min with a dim also the 1-based indices. */
static int reduce(lua_State *L, xsa_redop op)
{
    xsa_tensor *t = check(L, 1);
    int dim = lua_isnoneornil(L, 2) ? XSA_ALL_DIMS : checkdim(L, 2, t->ndim);
    int keep = lua_toboolean(L, 3);
    xsa_tensor *r = xsa_ag_reduce(op, t, dim, keep);
    if (r && (op == XSA_ARGMAX || op == XSA_ARGMIN) && xsa_tensor_binary_scalar_(XSA_ADD, r, 1.0) != 0) {
        xsa_tensor_free(r);
        r = NULL;
    }
    push(L, r);
    if ((op == XSA_MAX || op == XSA_MIN) && dim != XSA_ALL_DIMS) {
        t = check(L, 1); /* the push can have run a finalizer that freed it */
        xsa_tensor *ix = xsa_tensor_reduce(op == XSA_MAX ? XSA_ARGMAX : XSA_ARGMIN, t, dim, keep);
        if (ix && xsa_tensor_binary_scalar_(XSA_ADD, ix, 1.0) != 0) {
            xsa_tensor_free(ix);
            ix = NULL;
        }
        push(L, ix);
        return 2;
    }
    return 1;
}

static int t_sum(lua_State *L) { return reduce(L, XSA_SUM); }
static int t_mean(lua_State *L) { return reduce(L, XSA_MEAN); }
static int t_max(lua_State *L) { return reduce(L, XSA_MAX); }
static int t_min(lua_State *L) { return reduce(L, XSA_MIN); }
static int t_argmax(lua_State *L) { return reduce(L, XSA_ARGMAX); }
static int t_argmin(lua_State *L) { return reduce(L, XSA_ARGMIN); }
static int t_var(lua_State *L) { return reduce(L, XSA_VAR); }

static int t_softmax(lua_State *L)
{
    xsa_tensor *t = check(L, 1);
    int d = lua_isnoneornil(L, 2) ? t->ndim - 1 : checkdim(L, 2, t->ndim);
    if (t->ndim == 0) return luaL_error(L, "softmax: a 0-d tensor has no dimensions");
    push(L, xsa_ag_softmax(t, d));
    return 1;
}

static int t_log_softmax(lua_State *L)
{
    xsa_tensor *t = check(L, 1);
    int d = lua_isnoneornil(L, 2) ? t->ndim - 1 : checkdim(L, 2, t->ndim);
    if (t->ndim == 0) return luaL_error(L, "log_softmax: a 0-d tensor has no dimensions");
    push(L, xsa_ag_log_softmax(t, d));
    return 1;
}

/* ---- autograd ------------------------------------------------------------- */

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

/* ---- registration --------------------------------------------------------------- */

static const luaL_Reg methods[] = {
    {"shape", t_shape}, {"size", t_size}, {"stride", t_stride}, {"dim", t_dim},
    {"numel", t_numel}, {"dtype", t_dtype}, {"is_contiguous", t_is_contiguous},
    {"get", t_get}, {"set", t_set}, {"item", t_item}, {"totable", t_totable},
    {"free", t_free},
    {"view", t_view}, {"reshape", t_reshape}, {"expand", t_expand},
    {"transpose", t_transpose}, {"T", t_T}, {"permute", t_permute},
    {"narrow", t_narrow}, {"select", t_select}, {"unsqueeze", t_unsqueeze},
    {"squeeze", t_squeeze}, {"contiguous", t_contiguous}, {"clone", t_clone},
    {"float", t_float}, {"int", t_int},
    {"add", t_add}, {"sub", t_sub}, {"mul", t_mul}, {"div", t_div}, {"pow", t_pow},
    {"maximum", t_maximum}, {"minimum", t_minimum},
    {"eq", t_eq}, {"ne", t_ne}, {"lt", t_lt}, {"le", t_le}, {"gt", t_gt}, {"ge", t_ge},
    {"neg", t_neg}, {"exp", t_exp}, {"log", t_log}, {"sqrt", t_sqrt}, {"tanh", t_tanh},
    {"relu", t_relu}, {"gelu", t_gelu}, {"abs", t_abs}, {"sigmoid", t_sigmoid},
    {"clamp", t_clamp}, {"matmul", xsa_lua_tensor_matmul}, {"allclose", xsa_lua_tensor_allclose}, {"equal", t_equal},
    {"add_", t_add_}, {"sub_", t_sub_}, {"mul_", t_mul_}, {"div_", t_div_},
    {"fill_", t_fill_}, {"zero_", t_zero_}, {"copy_", t_copy_},
    {"sum", t_sum}, {"mean", t_mean}, {"max", t_max}, {"min", t_min},
    {"argmax", t_argmax}, {"argmin", t_argmin}, {"var", t_var},
    {"softmax", t_softmax}, {"log_softmax", t_log_softmax},
    {"masked_fill", t_masked_fill}, {"split", t_split}, {"chunk", t_chunk},
    {"flatten", t_flatten}, {"std", t_std},
    {"mm", xsa_lua_tensor_matmul}, {"bmm", xsa_lua_tensor_matmul}, {"tolist", t_totable},
    {"requires_grad", t_requires_grad}, {"backward", t_backward},
    {"zero_grad", t_zero_grad}, {"detach", t_detach}, {"grad_fn", t_grad_fn},
    {"is_leaf", t_is_leaf},
    {NULL, NULL},
};

static const luaL_Reg metamethods[] = {
    {"__gc", t_gc}, {"__close", t_gc}, {"__tostring", t_tostring}, {"__len", t_len},
    {"__add", t_add}, {"__sub", t_sub}, {"__mul", t_mul}, {"__div", t_div},
    {"__pow", t_pow}, {"__unm", t_neg}, {"__newindex", t_newindex},
    {NULL, NULL},
};

int xsa_lua_open_tensor(lua_State *L)
{
    luaL_newmetatable(L, XSA_TENSOR_MT);
    luaL_setfuncs(L, metamethods, 0);
    luaL_newlib(L, methods);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, "methods"); /* for introspection (the tests list it) */
    lua_pushcclosure(L, t_index, 1);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    return 0;
}

/*
 * l_mpi.c: the xsa.mpi table, over the communicator layer (core/comm.h).
 *
 *   xsa.mpi.rank(), size(), local_size(), active(), built(),
 *   threads_per_rank(), barrier(), allreduce(t, "sum"|"mean"),
 *   bcast(t, root), gather(value), allgather(value), sum(numbers),
 *   allreduce_grads(models, weight [, values]),
 *   abort(msg [, code])
 *
 * Outside mpirun/srun (or built without MPI) this is rank 0 of size 1 and
 * the collectives return their input unchanged; gather still encodes its
 * value as JSON, so a value that cannot travel fails the same way in both.
 * Opening the table initialises MPI when a launcher started the process:
 * every rank opens the module, so every rank takes part in MPI_Init.
 *
 * A collective must be called by every rank in the same order: a Lua error
 * on one rank between collectives leaves the others waiting, so the
 * executable ends the whole job on an uncaught error (main.c: MPI_Abort
 * through xsa_comm_abort), and scripts use xsa.mpi.abort for errors they
 * catch themselves.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "l_bind.h"

static int l_built(lua_State *L)
{
    lua_pushboolean(L, xsa_comm_built());
    return 1;
}

static int l_active(lua_State *L)
{
    lua_pushboolean(L, xsa_comm_active());
    return 1;
}

static int l_rank(lua_State *L)
{
    lua_pushinteger(L, xsa_comm_rank());
    return 1;
}

static int l_size(lua_State *L)
{
    lua_pushinteger(L, xsa_comm_size());
    return 1;
}

static int l_local_size(lua_State *L)
{
    lua_pushinteger(L, xsa_comm_local_size());
    return 1;
}

static int l_threads_per_rank(lua_State *L)
{
    lua_pushinteger(L, xsa_comm_threads_per_rank());
    return 1;
}

static int l_barrier(lua_State *L)
{
    if (xsa_comm_barrier() != 0) return xsa_lua_corefail(L);
    return 0;
}

/* A float32 tensor the collectives may write into as one block. */
static xsa_tensor *check_block(lua_State *L, int idx, const char *fn)
{
    xsa_tensor *t = xsa_lua_checktensor(L, idx);
    if (t->dtype != XSA_FLOAT32)
        luaL_error(L, "mpi.%s: the tensor must be float32, not %s", fn, xsa_dtype_name(t->dtype));
    if (!xsa_tensor_is_contiguous(t))
        luaL_error(L, "mpi.%s: the tensor must be contiguous (t:contiguous() gives a copy that is)", fn);
    char what[32];
    snprintf(what, sizeof what, "mpi.%s", fn);
    if (xsa_ag_check_inplace(t, what) != 0) xsa_lua_corefail(L); /* a leaf that requires grad */
    return t;
}

static int l_allreduce(lua_State *L)
{
    static const char *const ops[] = {"sum", "mean", NULL};
    int op = luaL_checkoption(L, 2, "sum", ops);
    lua_settop(L, 2);
    xsa_tensor *t = check_block(L, 1, "allreduce"); /* no Lua runs from here on */
    int64_t n = xsa_tensor_numel(t);
    float *data = xsa_tensor_f32(t);
    if (xsa_comm_allreduce_sum_f32(data, (size_t)n) != 0) return xsa_lua_corefail(L);
    int size = xsa_comm_size();
    if (op == 1 && size > 1)
        for (int64_t i = 0; i < n; i++) data[i] /= (float)size;
    xsa_storage_bump_version(t->storage); /* written in place (tensor.h) */
    lua_settop(L, 1);
    return 1;
}

static int l_bcast(lua_State *L)
{
    int64_t root = xsa_lua_optcount(L, 2, 0, 0, (int64_t)xsa_comm_size() - 1, "root (a rank)");
    lua_settop(L, 1);
    xsa_tensor *t = check_block(L, 1, "bcast");
    if (xsa_comm_bcast(xsa_tensor_f32(t), (size_t)xsa_tensor_numel(t) * sizeof(float), (int)root) != 0)
        return xsa_lua_corefail(L);
    if (xsa_comm_rank() != root) xsa_storage_bump_version(t->storage);
    return 1;
}

static void free_bytes(void *p) { free(p); }

/* A list of numbers summed over the ranks in double precision (losses,
 * counts): a new list. */
static int l_sum(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
    if (n > (1 << 20)) return luaL_argerror(L, 1, "at most 2^20 numbers");
    void **slot = xsa_lua_newbox(L, free_bytes);
    *slot = malloc((size_t)(n ? n : 1) * sizeof(double));
    if (!*slot) return luaL_error(L, "mpi.sum: out of memory");
    double *v = *slot;
    for (lua_Integer i = 0; i < n; i++) {
        lua_rawgeti(L, 1, i + 1);
        int isnum = 0;
        v[i] = lua_tonumberx(L, -1, &isnum);
        lua_pop(L, 1);
        if (!isnum) return luaL_error(L, "mpi.sum: item %d is not a number", (int)(i + 1));
    }
    if (xsa_comm_allreduce_sum_f64(v, (size_t)n) != 0) return xsa_lua_corefail(L);
    lua_createtable(L, (int)n, 0);
    for (lua_Integer i = 0; i < n; i++) {
        lua_pushnumber(L, v[i]);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

static int gather(lua_State *L, int all_ranks)
{
    luaL_checkany(L, 1);
    lua_settop(L, 1);
    lua_pushcfunction(L, xsa_lua_json_encode);
    lua_pushvalue(L, 1);
    lua_call(L, 1, 1); /* a value JSON cannot carry raises json.encode's error here */
    size_t n;
    const char *bytes = lua_tolstring(L, 2, &n);
    int size = xsa_comm_size();
    void **lens_slot = xsa_lua_newbox(L, free_bytes);
    void **out_slot = xsa_lua_newbox(L, free_bytes);
    *lens_slot = calloc((size_t)size, sizeof(size_t));
    if (!*lens_slot) return luaL_error(L, "mpi.gather: out of memory");
    char *out = NULL;
    if ((all_ranks ? xsa_comm_allgather_bytes : xsa_comm_gather_bytes)(bytes, n, &out, *lens_slot) != 0)
        return xsa_lua_corefail(L);
    *out_slot = out;
    if (!all_ranks && xsa_comm_rank() != 0) {
        lua_pushnil(L);
        return 1;
    }
    const size_t *lens = *lens_slot;
    lua_createtable(L, size, 0);
    size_t at = 0;
    for (int r = 0; r < size; r++) {
        lua_pushcfunction(L, xsa_lua_json_decode);
        lua_pushlstring(L, out + at, lens[r]);
        lua_call(L, 1, 1);
        lua_rawseti(L, -2, r + 1);
        at += lens[r];
    }
    return 1;
}

static int l_gather(lua_State *L) { return gather(L, 0); }
static int l_allgather(lua_State *L) { return gather(L, 1); }

#define MAX_MODELS 16

/* The models of the list at idx (raw reads: no Lua runs). */
static int models_of(lua_State *L, int idx, xsa_gpt **ms)
{
    int k = (int)lua_rawlen(L, idx);
    if (k < 1 || k > MAX_MODELS)
        luaL_error(L, "mpi.allreduce_grads: models must be a list of 1 to %d models", MAX_MODELS);
    for (int i = 0; i < k; i++) {
        lua_rawgeti(L, idx, i + 1);
        if (!luaL_testudata(L, -1, "xsa.gpt"))
            luaL_error(L, "mpi.allreduce_grads: models[%d] is not a model (%s)", i + 1, luaL_typename(L, -1));
        ms[i] = xsa_lua_checkgpt(L, -1); /* raises for a freed model */
        lua_pop(L, 1);
    }
    return k;
}

/* The gradient blocks of every model (and a few numbers) summed over the
 * ranks in ONE MPI_Allreduce, each rank's share scaled by `weight` first:
 * data-parallel training gives weight = its rows / the batch's rows, so the
 * sum is the gradient of the whole batch's mean loss even when ranks hold
 * different numbers of rows. Returns the reduced numbers as a list. */
/* The packing buffer of allreduce_grads, one per Lua state (registry),
 * kept between calls: a data-parallel step reduces the same 55 MB every
 * step, and a fresh malloc of that size is a fresh mmap whose pages fault
 * in again each time. Grows, never shrinks; freed with the state. */
typedef struct {
    float *p;
    size_t cap;
} pack_buf;

static const char pack_key = 0;

static int pack_gc(lua_State *L)
{
    pack_buf *b = lua_touserdata(L, 1);
    free(b->p);
    b->p = NULL;
    b->cap = 0;
    return 0;
}

static float *pack_get(lua_State *L, size_t n)
{
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &pack_key) != LUA_TUSERDATA) {
        lua_pop(L, 1);
        pack_buf *nb = lua_newuserdatauv(L, sizeof *nb, 0);
        nb->p = NULL;
        nb->cap = 0;
        lua_createtable(L, 0, 1);
        lua_pushcfunction(L, pack_gc);
        lua_setfield(L, -2, "__gc");
        lua_setmetatable(L, -2);
        lua_pushvalue(L, -1);
        lua_rawsetp(L, LUA_REGISTRYINDEX, &pack_key);
    }
    pack_buf *b = lua_touserdata(L, -1);
    lua_pop(L, 1); /* the registry keeps it */
    if (n > b->cap) {
        float *p = realloc(b->p, n * sizeof(float));
        if (!p) {
            luaL_error(L, "mpi.allreduce_grads: out of memory (%zu floats)", n);
            return NULL;
        }
        b->p = p;
        b->cap = n;
    }
    return b->p;
}

static int l_allreduce_grads(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    double w = xsa_lua_checkfloat32(L, 2, "weight");
    if (!(w >= 0)) return luaL_argerror(L, 2, "weight must be >= 0");
    int nv = 0;
    if (!lua_isnoneornil(L, 3)) {
        luaL_checktype(L, 3, LUA_TTABLE);
        nv = (int)lua_rawlen(L, 3);
        if (nv > 1024) return luaL_argerror(L, 3, "at most 1024 values");
    }
    lua_settop(L, 3);
    xsa_gpt *ms[MAX_MODELS];
    int k = models_of(L, 1, ms);
    size_t total = (size_t)nv;
    for (int i = 0; i < k; i++) total += xsa_gpt_num_params(ms[i]);
    float *buf = pack_get(L, total ? total : 1);
    size_t tail = total - (size_t)nv; /* the numbers ride after the gradients */
    for (int j = 0; j < nv; j++) {
        lua_rawgeti(L, 3, j + 1);
        int isnum = 0;
        double v = lua_tonumberx(L, -1, &isnum);
        lua_pop(L, 1);
        if (!isnum) return luaL_error(L, "mpi.allreduce_grads: values[%d] is not a number", j + 1);
        buf[tail + (size_t)j] = (float)(v * w);
    }
    k = models_of(L, 1, ms); /* lua_pop/rawgeti run no Lua; re-fetched all the same */
    size_t at = 0;
    for (int i = 0; i < k; i++) {
        size_t n = xsa_gpt_num_params(ms[i]);
        const float *g = xsa_gpt_grads_data(ms[i]);
        for (size_t j = 0; j < n; j++) buf[at + j] = (float)(g[j] * w);
        at += n;
    }
    if (xsa_comm_allreduce_sum_f32(buf, total) != 0) return xsa_lua_corefail(L);
    at = 0;
    for (int i = 0; i < k; i++) {
        size_t n = xsa_gpt_num_params(ms[i]);
        memcpy(xsa_gpt_grads_data(ms[i]), buf + at, n * sizeof(float));
        xsa_tensor *p0 = xsa_gpt_param(ms[i], 0);
        if (p0 && p0->grad) xsa_storage_bump_version(p0->grad->storage);
        at += n;
    }
    lua_createtable(L, nv, 0);
    for (int j = 0; j < nv; j++) {
        lua_pushnumber(L, buf[tail + (size_t)j]);
        lua_rawseti(L, -2, j + 1);
    }
    return 1;
}

static int l_abort(lua_State *L)
{
    const char *msg = luaL_optstring(L, 1, "aborted");
    int code = (int)xsa_lua_optcount(L, 2, 1, 1, 255, "code");
    if (xsa_comm_size() > 1)
        fprintf(stderr, "xsa: rank %d of %d: %s\n", xsa_comm_rank(), xsa_comm_size(), msg);
    else
        fprintf(stderr, "xsa: %s\n", msg);
    xsa_comm_abort(code);
    return 0;
}

static const luaL_Reg mpi_funcs[] = {
    {"built", l_built},
    {"active", l_active},
    {"rank", l_rank},
    {"size", l_size},
    {"local_size", l_local_size},
    {"threads_per_rank", l_threads_per_rank},
    {"barrier", l_barrier},
    {"allreduce", l_allreduce},
    {"bcast", l_bcast},
    {"gather", l_gather},
    {"allgather", l_allgather},
    {"sum", l_sum},
    {"allreduce_grads", l_allreduce_grads},
    {"abort", l_abort},
    {NULL, NULL},
};

/* Pushes the xsa.mpi table, initialising MPI first when a launcher started
 * this process. */
int xsa_lua_open_mpi(lua_State *L)
{
    if (xsa_comm_init() != 0) return xsa_lua_corefail(L);
    luaL_newlib(L, mpi_funcs);
    return 1;
}

/*
 * l_safetensors.c: the `xsa.safetensors` table: safetensors files to and
 * from Lua tables of tensors (core/safetensors.h).
 *   xsa.safetensors.load(path) -> tensors (name -> tensor), metadata
 *                                 (key -> string), names (list, file order)
 *   xsa.safetensors.save(path, tensors, [metadata])
 *
 * Owns the xsa.safetensors table. Misuse, write failures and a file that
 * fails to load all raise (a checkpoint that fails to load is never
 * expected). A loaded file lives in a box (xsa_lua_newbox) until its
 * tensors are handed to Lua, so raising is always safe.
 *
 * Non-goals: the format itself (core/safetensors.c), model checkpoints
 * (xsa.gpt: l_gpt.c), JSON (l_json.c).
 */
#include <stdlib.h>
#include <string.h>

#include "l_bind.h"

static void st_free(void *p) { xsa_st_free(p); }

/* ---- safetensors ------------------------------------------------------- */

static int l_st_load(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    void **box = xsa_lua_newbox(L, st_free);
    xsa_st_file *f = *box = xsa_st_load(path);
    if (!f) return xsa_lua_corefail(L);
    lua_createtable(L, 0, f->n);
    lua_createtable(L, 0, f->n_meta);
    lua_createtable(L, f->n, 0);
    for (int i = 0; i < f->n; i++) {
        lua_pushstring(L, f->names[i]);
        lua_rawseti(L, -2, i + 1);
        /* the userdata takes the file's reference; NULL it first so the box
         * never frees it twice */
        xsa_tensor *t = f->tensors[i];
        f->tensors[i] = NULL;
        xsa_lua_pushtensor(L, t);
        lua_setfield(L, -4, f->names[i]);
    }
    for (int i = 0; i < f->n_meta; i++) {
        lua_pushstring(L, f->meta_values[i]);
        lua_setfield(L, -3, f->meta_keys[i]);
    }
    xsa_st_free(f);
    *box = NULL;
    return 3;
}

/* The tensor at the top of the stack, or an error naming `name`. */
static xsa_tensor *field_tensor(lua_State *L, const char *name)
{
    if (luaL_testudata(L, -1, XSA_TENSOR_MT)) return xsa_lua_checktensor(L, -1);
    if (lua_isnil(L, -1)) luaL_error(L, "safetensors.save: '%s' has no tensor", name);
    luaL_error(L, "safetensors.save: '%s' is a %s, not a tensor", name, luaL_typename(L, -1));
    return NULL;
}

static int cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Keys of the table at idx (which must all be strings without NULs) into a
 * userdata array pushed on the stack, sorted. */
static const char **sorted_keys(lua_State *L, int idx, int *count, const char *what)
{
    int n = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING)
            luaL_error(L, "safetensors.save: %s keys must be strings (found a %s key)", what,
                       luaL_typename(L, -1));
        size_t len;
        const char *k = lua_tolstring(L, -1, &len);
        if (strlen(k) != len) luaL_error(L, "safetensors.save: a %s key contains a NUL byte", what);
        n++;
    }
    const char **ks = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *ks, 0);
    int m = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        ks[m++] = lua_tostring(L, -1);
    }
    qsort(ks, (size_t)m, sizeof *ks, cmp_cstr);
    *count = m;
    return ks;
}

static int l_st_save(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    if (!lua_isnoneornil(L, 3)) luaL_checktype(L, 3, LUA_TTABLE);
    lua_settop(L, 3);
    lua_newtable(L); /* 4: keeps formatted metadata strings alive */

    int n;
    const char **names;
    xsa_tensor **ts;
    lua_rawgeti(L, 2, 1);
    int is_list = !lua_isnil(L, -1);
    lua_pop(L, 1);
    if (is_list) {
        /* a list of {name, tensor} or {name=, tensor=}, written in its order */
        lua_Integer len = (lua_Integer)lua_rawlen(L, 2);
        if (len > 1000000) luaL_error(L, "safetensors.save: too many tensors");
        n = (int)len;
        names = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *names, 0);
        ts = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *ts, 0);
        for (int i = 0; i < n; i++) {
            if (lua_rawgeti(L, 2, i + 1) != LUA_TTABLE)
                luaL_error(L, "safetensors.save: entry %d is a %s, not a {name, tensor} table",
                           i + 1, luaL_typename(L, -1));
            int el = lua_gettop(L);
            if (lua_rawgeti(L, el, 1) == LUA_TNIL) {
                lua_pop(L, 1);
                lua_getfield(L, el, "name");
            }
            if (lua_type(L, -1) != LUA_TSTRING)
                luaL_error(L, "safetensors.save: entry %d has no string name ({name, tensor} or "
                              "{name=, tensor=})", i + 1);
            names[i] = lua_tostring(L, -1); /* alive: held by the entry table */
            lua_pop(L, 1);
            if (lua_rawgeti(L, el, 2) == LUA_TNIL) {
                lua_pop(L, 1);
                lua_getfield(L, el, "tensor");
            }
            ts[i] = field_tensor(L, names[i]);
            lua_pop(L, 2);
        }
    } else {
        names = sorted_keys(L, 2, &n, "tensor table");
        ts = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *ts, 0);
        for (int i = 0; i < n; i++) {
            lua_pushstring(L, names[i]);
            lua_rawget(L, 2);
            ts[i] = field_tensor(L, names[i]);
            lua_pop(L, 1);
        }
    }

    int n_meta = 0;
    const char **mkeys = NULL, **mvals = NULL;
    if (!lua_isnil(L, 3)) {
        mkeys = sorted_keys(L, 3, &n_meta, "metadata");
        mvals = lua_newuserdatauv(L, (size_t)(n_meta ? n_meta : 1) * sizeof *mvals, 0);
        for (int i = 0; i < n_meta; i++) {
            lua_pushstring(L, mkeys[i]);
            lua_rawget(L, 3);
            if (lua_type(L, -1) == LUA_TNUMBER) {
                char buf[64];
                if (lua_isinteger(L, -1))
                    snprintf(buf, sizeof buf, LUA_INTEGER_FMT, (LUAI_UACINT)lua_tointeger(L, -1));
                else
                    xsa_format_double(buf, sizeof buf, (double)lua_tonumber(L, -1));
                lua_pop(L, 1);
                lua_pushstring(L, buf);
            } else if (lua_type(L, -1) != LUA_TSTRING) {
                luaL_error(L, "safetensors.save: metadata '%s' is a %s (values must be strings "
                              "or numbers)", mkeys[i], luaL_typename(L, -1));
            }
            size_t len;
            mvals[i] = lua_tolstring(L, -1, &len);
            if (strlen(mvals[i]) != len)
                luaL_error(L, "safetensors.save: metadata '%s' contains a NUL byte", mkeys[i]);
            lua_rawseti(L, 4, i + 1);
        }
    }
    if (xsa_st_save(path, n, names, ts, n_meta, mkeys, mvals) != 0) return xsa_lua_corefail(L);
    return 0;
}

/* ---- registration ------------------------------------------------------ */

static const luaL_Reg st_funcs[] = {
    {"load", l_st_load},
    {"save", l_st_save},
    {NULL, NULL},
};

/* Pushes the xsa.safetensors table. */
int xsa_lua_open_safetensors(lua_State *L)
{
    luaL_newlib(L, st_funcs);
    return 1;
}

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

/* The tensor userdata at the top of the stack (not yet checked for being
 * freed), or an error naming `name`. */
static void want_tensor(lua_State *L, const char *name)
{
    if (luaL_testudata(L, -1, XSA_TENSOR_MT)) return;
    if (lua_isnil(L, -1)) luaL_error(L, "safetensors.save: '%s' has no tensor", name);
    luaL_error(L, "safetensors.save: '%s' is a %s, not a tensor", name, luaL_typename(L, -1));
}

/* The string at the top of the stack has no NUL byte. */
static void want_no_nul(lua_State *L, const char *what)
{
    size_t len;
    const char *k = lua_tolstring(L, -1, &len);
    if (strlen(k) != len) luaL_error(L, "safetensors.save: a %s contains a NUL byte", what);
}

typedef struct {
    const char *key;
    int pos; /* 1-based index into the anchor tables */
} entry;

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const entry *)a)->key, ((const entry *)b)->key);
}

/* Stack slots of the anchor tables: every name, tensor, metadata key and
 * value l_st_save hands to the core is held by one of these tables on the
 * stack, never only by the user's tables (which Lua code run by an
 * __index, or a finalizer run by an allocation, may change). */
enum { A_NAMES = 4, A_TENSORS, A_MKEYS, A_MVALS };

/* Anchors a list of {name, tensor} or {name=, tensor=} (written in its
 * order) at stack index 2; returns the count. */
static int anchor_list(lua_State *L)
{
    size_t len = lua_rawlen(L, 2);
    if (len > 1000000) luaL_error(L, "safetensors.save: too many tensors");
    for (int i = 0; i < (int)len; i++) {
        if (lua_rawgeti(L, 2, i + 1) != LUA_TTABLE)
            luaL_error(L, "safetensors.save: entry %d is a %s, not a {name, tensor} table", i + 1,
                       luaL_typename(L, -1));
        int el = lua_gettop(L);
        if (lua_rawgeti(L, el, 1) == LUA_TNIL) {
            lua_pop(L, 1);
            lua_getfield(L, el, "name");
        }
        if (lua_type(L, -1) != LUA_TSTRING)
            luaL_error(L, "safetensors.save: entry %d has no string name ({name, tensor} or "
                          "{name=, tensor=})", i + 1);
        lua_rawseti(L, A_NAMES, i + 1);
        if (lua_rawgeti(L, el, 2) == LUA_TNIL) {
            lua_pop(L, 1);
            lua_getfield(L, el, "tensor");
        }
        lua_rawgeti(L, A_NAMES, i + 1);
        const char *name = lua_tostring(L, -1);
        lua_pop(L, 1); /* anchored in A_NAMES */
        want_tensor(L, name);
        lua_rawseti(L, A_TENSORS, i + 1);
        lua_pop(L, 1); /* el */
    }
    return (int)len;
}

/* Anchors a table {name = tensor} at stack index 2 (written sorted by
 * name); returns the count. */
static int anchor_map(lua_State *L)
{
    int n = 0;
    lua_pushnil(L);
    while (lua_next(L, 2)) {
        if (lua_type(L, -2) != LUA_TSTRING)
            luaL_error(L, "safetensors.save: tensor table keys must be strings (found a %s key)",
                       luaL_typename(L, -2));
        if (n >= 1000000) luaL_error(L, "safetensors.save: too many tensors");
        want_tensor(L, lua_tostring(L, -2));
        lua_rawseti(L, A_TENSORS, n + 1);
        lua_pushvalue(L, -1);
        lua_rawseti(L, A_NAMES, ++n);
    }
    return n;
}

/* Anchors the metadata table at stack index 3 (numbers as text); returns
 * the count. */
static int anchor_metadata(lua_State *L)
{
    int n_meta = 0;
    if (lua_isnil(L, 3)) return 0;
    lua_pushnil(L);
    while (lua_next(L, 3)) {
        if (lua_type(L, -2) != LUA_TSTRING)
            luaL_error(L, "safetensors.save: metadata keys must be strings (found a %s key)", luaL_typename(L, -2));
        const char *k = lua_tostring(L, -2);
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
                          "or numbers)", k, luaL_typename(L, -1));
        }
        if (n_meta >= 1000000) luaL_error(L, "safetensors.save: too much metadata");
        lua_rawseti(L, A_MVALS, n_meta + 1);
        lua_pushvalue(L, -1);
        lua_rawseti(L, A_MKEYS, ++n_meta);
    }
    for (int i = 1; i <= n_meta; i++) {
        lua_rawgeti(L, A_MKEYS, i);
        want_no_nul(L, "metadata key");
        lua_rawgeti(L, A_MVALS, i);
        want_no_nul(L, "metadata value");
        lua_pop(L, 2);
    }
    return n_meta;
}

/* The n keys of anchor table akeys in order[] (sorted by key when asked),
 * each with its position in the anchors. Runs no Lua: lua_rawgeti and
 * lua_tostring of an anchored string do not allocate. */
static void key_order(lua_State *L, int akeys, int n, int sort, entry *order)
{
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, akeys, i + 1);
        order[i].key = lua_tostring(L, -1);
        order[i].pos = i + 1;
        lua_pop(L, 1);
    }
    if (sort) qsort(order, (size_t)n, sizeof *order, cmp_entry);
}

/* save(path, tensors [, metadata]). Everything is read into the anchors
 * first (user code may run: __index of list entries, finalizers); then the
 * C arrays are allocated; then, with no Lua running any more, the pointers
 * are taken and the core called (rule 1 of l_bind.h). */
static int l_st_save(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    if (!lua_isnoneornil(L, 3)) luaL_checktype(L, 3, LUA_TTABLE);
    lua_settop(L, 3);
    for (int i = 0; i < 4; i++) lua_newtable(L); /* A_NAMES .. A_MVALS */

    lua_rawgeti(L, 2, 1);
    int is_list = !lua_isnil(L, -1);
    lua_pop(L, 1);
    int n = is_list ? anchor_list(L) : anchor_map(L), sorted = !is_list;
    for (int i = 1; i <= n; i++) {
        lua_rawgeti(L, A_NAMES, i);
        want_no_nul(L, "tensor name");
        lua_pop(L, 1);
    }
    int n_meta = anchor_metadata(L);

    /* every allocation before any pointer is taken */
    size_t nn = (size_t)(n ? n : 1), nm = (size_t)(n_meta ? n_meta : 1);
    entry *order = lua_newuserdatauv(L, nn * sizeof *order, 0);
    entry *morder = lua_newuserdatauv(L, nm * sizeof *morder, 0);
    const char **names = lua_newuserdatauv(L, nn * sizeof *names, 0);
    xsa_tensor **ts = lua_newuserdatauv(L, nn * sizeof *ts, 0);
    const char **mkeys = lua_newuserdatauv(L, nm * sizeof *mkeys, 0);
    const char **mvals = lua_newuserdatauv(L, nm * sizeof *mvals, 0);

    /* from here on nothing runs Lua: every value is anchored */
    key_order(L, A_NAMES, n, sorted, order);
    for (int i = 0; i < n; i++) {
        names[i] = order[i].key;
        lua_rawgeti(L, A_TENSORS, order[i].pos);
        ts[i] = xsa_lua_checktensor(L, -1); /* raises for a freed tensor */
        lua_pop(L, 1);
    }
    key_order(L, A_MKEYS, n_meta, 1, morder);
    for (int i = 0; i < n_meta; i++) {
        mkeys[i] = morder[i].key;
        lua_rawgeti(L, A_MVALS, morder[i].pos);
        mvals[i] = lua_tostring(L, -1);
        lua_pop(L, 1);
    }
    if (xsa_st_save(path, n, names, ts, n_meta, n_meta ? mkeys : NULL, n_meta ? mvals : NULL) != 0)
        return xsa_lua_corefail(L);
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

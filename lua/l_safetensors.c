/*
 * l_safetensors.c: the Lua face of safetensors files, JSON and whole-file
 * I/O:
 *   xsa.safetensors.load(path) -> tensors (name -> tensor), metadata
 *                                 (key -> string), names (list, file order)
 *   xsa.safetensors.save(path, tensors, [metadata])
 *   xsa.json.encode(value, [{indent=true}]) / decode(s) / array(t) / null
 *   xsa.json.write_file(path, value, [{indent=false}]) / read_file(path)
 *   xsa.write_file_atomic(path, s) / xsa.read_file(path)
 *
 * Conventions: writes and misuse raise errors; reads of a missing or corrupt
 * file return nil, message (as luaL_fileresult does), except
 * safetensors.load, which raises (a checkpoint that fails to load is never
 * expected).
 *
 * JSON mapping (both directions deterministic, so encoded text can serve as
 * a cache key):
 *   - tables with keys exactly 1..n -> arrays; tables with string keys ->
 *     objects, keys sorted bytewise; an empty table -> {} unless marked with
 *     xsa.json.array(t) (decoded arrays carry that mark, so [] round-trips)
 *   - integers stay integers (decode: a number written without '.', 'e' or
 *     'E' that fits in 64 bits); floats are written with the fewest digits
 *     (15..17) that read back to the same double, always with a '.' or an
 *     exponent, so every double and its integer/float kind round-trip
 *   - xsa.json.null <-> null; a nil value at the top level encodes as null
 *   - errors: NaN/inf, mixed or sparse tables, non-string keys, cycles,
 *     nesting over 1000, strings with NUL bytes, functions/userdata; each
 *     names the path, e.g. "value.layers[2].cos"
 *
 * Non-goals: streaming, comments in JSON, locales with a decimal comma
 * (numbers are formatted with printf/strtod in the C locale, which the xsa
 * executable and stock lua5.4 keep).
 *
 * Every malloc'd thing that a Lua error could strand (cJSON trees, loaded
 * files) lives in a userdata box with __gc, so raising is always safe.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "l_bind.h"

#define JSON_ARRAY_MT "xsa.json.array"
#define JSON_MAX_DEPTH CJSON_NESTING_LIMIT

/* ---- boxes (xsa_lua_newbox) --------------------------------------------- */

static void json_free(void *p) { cJSON_Delete(p); }
static void st_free(void *p) { xsa_st_free(p); }

/* ---- JSON encode -------------------------------------------------------- */

typedef struct enc {
    lua_State *L;
    void **root;       /* the box holding the tree built so far */
    int seen;          /* stack index of the table of tables being encoded */
    int depth;
    size_t plen;
    char path[512];    /* "value.a[3].b", truncated when deep */
} enc;

static int path_push(enc *e, const char *fmt, const char *s, size_t n, lua_Integer i)
{
    size_t old = e->plen;
    if (e->plen < sizeof e->path) {
        int w = s ? snprintf(e->path + e->plen, sizeof e->path - e->plen, fmt, (int)n, s)
                  : snprintf(e->path + e->plen, sizeof e->path - e->plen, fmt, (long long)i);
        if (w > 0) e->plen += (size_t)w;
        if (e->plen >= sizeof e->path) e->plen = sizeof e->path - 1;
    }
    return (int)old;
}

static void path_pop(enc *e, int old)
{
    e->plen = (size_t)old;
    e->path[old] = '\0';
}

#if defined(__GNUC__)
__attribute__((noreturn))
#endif
static void enc_fail(enc *e, const char *what)
{
    luaL_error(e->L, "json.encode: %s at %s", what, e->path);
    abort(); /* not reached: luaL_error does not return */
}

/* Attaches a fresh item: as the root, to an array, or under key in an
 * object. Attaching first and filling afterwards keeps every item reachable
 * from the box, so an error part-way leaks nothing. */
static cJSON *attach(enc *e, cJSON *parent, const char *key, cJSON *item)
{
    if (!item) enc_fail(e, "out of memory");
    if (!parent) {
        *e->root = item;
        return item;
    }
    int ok = key ? cJSON_AddItemToObject(parent, key, item) : cJSON_AddItemToArray(parent, item);
    if (!ok) {
        cJSON_Delete(item);
        enc_fail(e, "out of memory");
    }
    return item;
}

/* Shortest %.{15,16,17}g text that reads back as d, with ".0" added when it
 * would otherwise read back as an integer. */
static void format_double(char *buf, size_t n, double d)
{
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, d);
        if (strtod(buf, NULL) == d) break;
    }
    if (!strpbrk(buf, ".eE")) strncat(buf, ".0", n - strlen(buf) - 1);
}

static int is_array_marked(lua_State *L, int idx)
{
    if (!lua_getmetatable(L, idx)) return 0;
    luaL_getmetatable(L, JSON_ARRAY_MT);
    int r = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    return r;
}

typedef struct skey { const char *s; size_t n; } skey;

static int cmp_skey(const void *a, const void *b)
{
    const skey *x = a, *y = b;
    size_t m = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->s, y->s, m);
    if (c) return c;
    return (x->n > y->n) - (x->n < y->n);
}

static void put(enc *e, int idx, cJSON *parent, const char *key);

static void put_table(enc *e, int idx, cJSON *parent, const char *key)
{
    lua_State *L = e->L;
    if (e->depth >= JSON_MAX_DEPTH) enc_fail(e, "nesting deeper than 1000 levels");
    if (!lua_checkstack(L, 8)) enc_fail(e, "Lua stack overflow");
    lua_pushvalue(L, idx);
    if (lua_rawget(L, e->seen) != LUA_TNIL) enc_fail(e, "a cycle (a table contains itself)");
    lua_pop(L, 1);

    /* classify the keys */
    lua_Integer n_int = 0, max_int = 0, n_str = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        int kt = lua_type(L, -1);
        if (kt == LUA_TSTRING) {
            n_str++;
        } else if (kt == LUA_TNUMBER && lua_isinteger(L, -1)) {
            lua_Integer k = lua_tointeger(L, -1);
            if (k < 1) {
                char msg[96];
                snprintf(msg, sizeof msg, "an integer key %lld (arrays use keys 1..n)",
                         (long long)k);
                lua_pop(L, 1);
                enc_fail(e, msg);
            }
            n_int++;
            if (k > max_int) max_int = k;
        } else {
            char msg[96];
            snprintf(msg, sizeof msg, "a table key of type %s (only strings and 1..n)",
                     kt == LUA_TNUMBER ? "float" : luaL_typename(L, -1));
            lua_pop(L, 1);
            enc_fail(e, msg);
        }
    }
    int marked = is_array_marked(L, idx);
    if (n_int > 0 && n_str > 0) enc_fail(e, "a table mixing integer and string keys");
    if (marked && n_str > 0) enc_fail(e, "a table marked as an array with string keys");
    if (n_int > 0 && max_int != n_int) {
        char msg[128];
        snprintf(msg, sizeof msg, "a sparse array (%lld values, largest key %lld)",
                 (long long)n_int, (long long)max_int);
        enc_fail(e, msg);
    }

    lua_pushvalue(L, idx);
    lua_pushboolean(L, 1);
    lua_rawset(L, e->seen);
    e->depth++;
    if (n_int > 0 || marked) {
        cJSON *arr = attach(e, parent, key, cJSON_CreateArray());
        for (lua_Integer i = 1; i <= n_int; i++) {
            int old = path_push(e, "[%lld]", NULL, 0, i);
            lua_rawgeti(L, idx, i);
            put(e, lua_gettop(L), arr, NULL);
            lua_pop(L, 1);
            path_pop(e, old);
        }
    } else {
        cJSON *obj = attach(e, parent, key, cJSON_CreateObject());
        /* sort the keys: the strings stay alive as keys of the table */
        skey *ks = lua_newuserdatauv(L, (size_t)(n_str ? n_str : 1) * sizeof *ks, 0);
        int kbuf = lua_gettop(L);
        lua_Integer m = 0;
        lua_pushnil(L);
        while (lua_next(L, idx)) {
            lua_pop(L, 1);
            ks[m].s = lua_tolstring(L, -1, &ks[m].n);
            m++;
        }
        qsort(ks, (size_t)m, sizeof *ks, cmp_skey);
        for (lua_Integer i = 0; i < m; i++) {
            int old = path_push(e, ".%.*s", ks[i].s, ks[i].n > 200 ? 200 : ks[i].n, 0);
            if (strlen(ks[i].s) != ks[i].n) enc_fail(e, "a key containing a NUL byte");
            lua_pushlstring(L, ks[i].s, ks[i].n);
            lua_rawget(L, idx);
            put(e, lua_gettop(L), obj, ks[i].s);
            lua_pop(L, 1);
            path_pop(e, old);
        }
        lua_remove(L, kbuf);
    }
    e->depth--;
    lua_pushvalue(L, idx);
    lua_pushnil(L);
    lua_rawset(L, e->seen);
}

static void put(enc *e, int idx, cJSON *parent, const char *key)
{
    lua_State *L = e->L;
    char buf[64];
    switch (lua_type(L, idx)) {
    case LUA_TNIL:
        attach(e, parent, key, cJSON_CreateNull());
        break;
    case LUA_TBOOLEAN:
        attach(e, parent, key, cJSON_CreateBool(lua_toboolean(L, idx)));
        break;
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx)) {
            snprintf(buf, sizeof buf, LUA_INTEGER_FMT, (LUAI_UACINT)lua_tointeger(L, idx));
        } else {
            double d = (double)lua_tonumber(L, idx);
            if (isnan(d)) enc_fail(e, "NaN (JSON has no NaN)");
            if (isinf(d)) enc_fail(e, "an infinity (JSON has no infinity)");
            format_double(buf, sizeof buf, d);
        }
        attach(e, parent, key, cJSON_CreateRaw(buf));
        break;
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(L, idx, &n);
        if (strlen(s) != n) enc_fail(e, "a string containing a NUL byte");
        attach(e, parent, key, cJSON_CreateString(s));
        break;
    }
    case LUA_TTABLE:
        put_table(e, idx, parent, key);
        break;
    case LUA_TLIGHTUSERDATA:
        if (lua_touserdata(L, idx) == NULL) {
            attach(e, parent, key, cJSON_CreateNull());
            break;
        }
        /* fall through */
    default: {
        char msg[80];
        snprintf(msg, sizeof msg, "a value of type %s (not representable in JSON)",
                 luaL_typename(L, idx));
        enc_fail(e, msg);
    }
    }
}

static int opt_indent(lua_State *L, int idx, int dflt)
{
    if (lua_isnoneornil(L, idx)) return dflt;
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_getfield(L, idx, "indent");
    int r = lua_isnil(L, -1) ? dflt : lua_toboolean(L, -1);
    lua_pop(L, 1);
    return r;
}

/* Indented output, two spaces per level, arrays of scalars on one line (a
 * loss curve stays one line). cJSON's own formatted printer uses tabs and
 * breaks such arrays oddly. */
static void pretty_string(luaL_Buffer *b, const char *s)
{
    luaL_addchar(b, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': luaL_addstring(b, "\\\""); break;
        case '\\': luaL_addstring(b, "\\\\"); break;
        case '\b': luaL_addstring(b, "\\b"); break;
        case '\f': luaL_addstring(b, "\\f"); break;
        case '\n': luaL_addstring(b, "\\n"); break;
        case '\r': luaL_addstring(b, "\\r"); break;
        case '\t': luaL_addstring(b, "\\t"); break;
        default:
            if (*p < 0x20) {
                char u[8];
                snprintf(u, sizeof u, "\\u%04x", *p);
                luaL_addstring(b, u);
            } else {
                luaL_addchar(b, (char)*p);
            }
        }
    }
    luaL_addchar(b, '"');
}

static void pretty_indent(luaL_Buffer *b, int level)
{
    luaL_addchar(b, '\n');
    for (int i = 0; i < level; i++) luaL_addstring(b, "  ");
}

static void pretty(luaL_Buffer *b, const cJSON *v, int level)
{
    if (cJSON_IsObject(v) || cJSON_IsArray(v)) {
        int obj = cJSON_IsObject(v);
        const cJSON *c;
        if (!v->child) {
            luaL_addstring(b, obj ? "{}" : "[]");
            return;
        }
        int flat = !obj;
        cJSON_ArrayForEach(c, v) if (cJSON_IsObject(c) || cJSON_IsArray(c)) flat = 0;
        luaL_addchar(b, obj ? '{' : '[');
        cJSON_ArrayForEach(c, v)
        {
            if (c != v->child) luaL_addstring(b, flat ? ", " : ",");
            if (!flat) pretty_indent(b, level + 1);
            if (obj) {
                pretty_string(b, c->string);
                luaL_addstring(b, ": ");
            }
            pretty(b, c, level + 1);
        }
        if (!flat) pretty_indent(b, level);
        luaL_addchar(b, obj ? '}' : ']');
    } else if (cJSON_IsString(v)) {
        pretty_string(b, v->valuestring);
    } else if (cJSON_IsRaw(v)) {
        luaL_addstring(b, v->valuestring);
    } else if (cJSON_IsBool(v)) {
        luaL_addstring(b, cJSON_IsTrue(v) ? "true" : "false");
    } else {
        luaL_addstring(b, "null");
    }
}

/* Encodes the value at idx; pushes the text. */
static void encode_value(lua_State *L, int idx, int indent)
{
    idx = lua_absindex(L, idx);
    enc e;
    e.L = L;
    e.depth = 0;
    strcpy(e.path, "value");
    e.plen = strlen(e.path);
    e.root = xsa_lua_newbox(L, json_free);
    lua_newtable(L);
    e.seen = lua_gettop(L);
    put(&e, idx, NULL, NULL);
    lua_pop(L, 1); /* the seen table */
    if (indent) {
        luaL_Buffer b;
        luaL_buffinit(L, &b);
        pretty(&b, *e.root, 0);
        luaL_pushresult(&b);
    } else {
        char *s = cJSON_PrintUnformatted(*e.root);
        if (!s) luaL_error(L, "json.encode: out of memory");
        lua_pushstring(L, s);
        cJSON_free(s);
    }
    cJSON_Delete(*e.root);
    *e.root = NULL;
    lua_remove(L, -2); /* the now empty box */
}

static int l_json_encode(lua_State *L)
{
    luaL_checkany(L, 1);
    int indent = opt_indent(L, 2, 0);
    encode_value(L, 1, indent);
    return 1;
}

/* ---- JSON decode -------------------------------------------------------- */

typedef struct dec {
    lua_State *L;
    const char *text;
    size_t len;
    size_t cur; /* scan position for number tokens */
} dec;

/* The next number token in the text at or after d->cur, outside strings.
 * cJSON visits items in text order and keeps only a double, so the token
 * tells us whether the number was an integer and its exact value. */
static const char *next_number(dec *d, size_t *tl)
{
    const char *s = d->text;
    size_t i = d->cur;
    while (i < d->len) {
        char c = s[i];
        if (c == '"') {
            i++;
            while (i < d->len && s[i] != '"') i += (s[i] == '\\') ? 2 : 1;
            i++;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            size_t st = i;
            while (i < d->len && s[i] && strchr("0123456789+-.eE", s[i])) i++;
            d->cur = i;
            *tl = i - st;
            return s + st;
        } else {
            i++;
        }
    }
    return NULL;
}

static void push_number(dec *d, const cJSON *v)
{
    size_t tl = 0;
    const char *tok = next_number(d, &tl);
    if (tok && tl < 40 && !memchr(tok, '.', tl) && !memchr(tok, 'e', tl) &&
        !memchr(tok, 'E', tl)) {
        char buf[48];
        memcpy(buf, tok, tl);
        buf[tl] = '\0';
        errno = 0;
        char *end;
        long long x = strtoll(buf, &end, 10);
        if (errno == 0 && *end == '\0') {
            lua_pushinteger(d->L, (lua_Integer)x);
            return;
        }
    }
    lua_pushnumber(d->L, (lua_Number)v->valuedouble);
}

static void push_json(dec *d, const cJSON *v)
{
    lua_State *L = d->L;
    if (!lua_checkstack(L, 4)) luaL_error(L, "json.decode: nesting too deep for the Lua stack");
    if (cJSON_IsObject(v)) {
        lua_createtable(L, 0, cJSON_GetArraySize(v));
        const cJSON *c;
        cJSON_ArrayForEach(c, v)
        {
            lua_pushstring(L, c->string);
            push_json(d, c);
            lua_rawset(L, -3);
        }
    } else if (cJSON_IsArray(v)) {
        lua_createtable(L, cJSON_GetArraySize(v), 0);
        luaL_setmetatable(L, JSON_ARRAY_MT);
        lua_Integer i = 1;
        const cJSON *c;
        cJSON_ArrayForEach(c, v)
        {
            push_json(d, c);
            lua_rawseti(L, -2, i++);
        }
    } else if (cJSON_IsString(v)) {
        lua_pushstring(L, v->valuestring);
    } else if (cJSON_IsNumber(v)) {
        push_number(d, v);
    } else if (cJSON_IsBool(v)) {
        lua_pushboolean(L, cJSON_IsTrue(v));
    } else {
        lua_pushlightuserdata(L, NULL); /* null */
    }
}

/* Decodes s[0..len) (NUL at s[len], as Lua strings have). On success pushes
 * the value and returns 1; on invalid JSON pushes "invalid JSON at line L
 * column C (byte B)" and returns 0. */
static int decode_text(lua_State *L, const char *s, size_t len)
{
    void **root = xsa_lua_newbox(L, json_free);
    const char *end = NULL;
    *root = cJSON_ParseWithLengthOpts(s, len + 1, &end, 1);
    if (!*root) {
        size_t pos = end && end >= s ? (size_t)(end - s) : 0;
        if (pos > len) pos = len;
        int line = 1, col = 1;
        for (size_t i = 0; i < pos; i++) {
            if (s[i] == '\n') {
                line++;
                col = 1;
            } else {
                col++;
            }
        }
        lua_pop(L, 1); /* the empty box */
        if (pos >= len) {
            lua_pushfstring(L, "invalid JSON at line %d column %d (byte %d): unexpected end "
                               "of text", line, col, (int)pos);
        } else {
            char near[24];
            size_t k = len - pos < 16 ? len - pos : 16;
            memcpy(near, s + pos, k);
            near[k] = '\0';
            lua_pushfstring(L, "invalid JSON at line %d column %d (byte %d) near '%s'", line,
                            col, (int)pos, near);
        }
        return 0;
    }
    dec d = {L, s, len, 0};
    push_json(&d, *root);
    cJSON_Delete(*root);
    *root = NULL;
    lua_remove(L, -2); /* the box */
    return 1;
}

static int l_json_decode(lua_State *L)
{
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    if (!decode_text(L, s, len)) return luaL_error(L, "json.decode: %s", lua_tostring(L, -1));
    return 1;
}

static int l_json_array(lua_State *L)
{
    if (lua_isnoneornil(L, 1)) {
        lua_newtable(L);
    } else {
        luaL_checktype(L, 1, LUA_TTABLE);
        lua_settop(L, 1);
    }
    luaL_setmetatable(L, JSON_ARRAY_MT);
    return 1;
}

static int l_json_write_file(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    luaL_checkany(L, 2);
    int indent = opt_indent(L, 3, 1);
    encode_value(L, 2, indent);
    lua_pushliteral(L, "\n");
    lua_concat(L, 2);
    size_t n;
    const char *s = lua_tolstring(L, -1, &n);
    if (xsa_atomic_write(path, s, n) != 0) return xsa_lua_corefail(L);
    lua_pushboolean(L, 1);
    return 1;
}

static int l_read_file(lua_State *L);

static int l_json_read_file(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    if (l_read_file(L) == 2) return 2;
    size_t n;
    const char *s = lua_tolstring(L, -1, &n);
    if (!decode_text(L, s, n)) {
        lua_pushnil(L);
        lua_pushfstring(L, "%s: %s", path, lua_tostring(L, -2));
        return 2;
    }
    return 1;
}

/* ---- whole files ------------------------------------------------------- */

static int l_write_file_atomic(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    size_t n;
    const char *s = luaL_checklstring(L, 2, &n);
    if (xsa_atomic_write(path, s, n) != 0) return xsa_lua_corefail(L);
    lua_pushboolean(L, 1);
    return 1;
}

static int l_read_file(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    size_t n;
    char *text = xsa_read_file(path, &n);
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

static const luaL_Reg json_funcs[] = {
    {"encode", l_json_encode},
    {"decode", l_json_decode},
    {"array", l_json_array},
    {"write_file", l_json_write_file},
    {"read_file", l_json_read_file},
    {NULL, NULL},
};

int xsa_lua_open_safetensors(lua_State *L)
{
    luaL_newmetatable(L, JSON_ARRAY_MT);
    lua_pop(L, 1);

    luaL_newlib(L, st_funcs);
    lua_setfield(L, -2, "safetensors");

    luaL_newlib(L, json_funcs);
    lua_pushlightuserdata(L, NULL);
    lua_setfield(L, -2, "null");
    lua_setfield(L, -2, "json");

    lua_pushcfunction(L, l_write_file_atomic);
    lua_setfield(L, -2, "write_file_atomic");
    lua_pushcfunction(L, l_read_file);
    lua_setfield(L, -2, "read_file");
    return 0;
}

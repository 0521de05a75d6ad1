/*
 * l_json.c: the `xsa.json` table: JSON text to and from Lua values, with
 * cJSON underneath.
 *   xsa.json.encode(value, [{indent=true}]) / decode(s) / array(t) / null
 *   xsa.json.write_file(path, value, [{indent=false}]) / read_file(path)
 *
 * Owns the xsa.json table and the metatable "xsa.json.array" that marks a
 * Lua table as a JSON array (xsa.json.array(t); decoded arrays carry it).
 *
 * Conventions: writes and misuse raise errors; read_file of a missing or
 * corrupt file returns nil, message (as luaL_fileresult does).
 *
 * Mapping (both directions deterministic, so encoded text can serve as a
 * cache key):
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
 * cJSON trees live in a box (xsa_lua_newbox) while Lua code can raise, so
 * an error part-way leaks nothing.
 *
 * Non-goals: streaming, comments in JSON, locales with a decimal comma
 * (numbers are formatted with printf/strtod in the C locale, which the xsa
 * executable and stock lua5.4 keep); whole files as strings (xsa.read_file,
 * l_base.c).
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "l_bind.h"

#define JSON_ARRAY_MT "xsa.json.array"
#define JSON_MAX_DEPTH CJSON_NESTING_LIMIT

static void json_free(void *p) { cJSON_Delete(p); }

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

/* Shortest %.{15,16,17}g text that reads back as d (xsa_format_double), with
 * ".0" added when it would otherwise read back as an integer. */
static void format_double(char *buf, size_t n, double d)
{
    xsa_format_double(buf, n, d);
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

/* Counts the table's keys: integers (all >= 1; *max_int the largest) and
 * strings; any other key fails the encoding. */
static void classify_keys(enc *e, int idx, lua_Integer *n_int, lua_Integer *max_int, lua_Integer *n_str)
{
    lua_State *L = e->L;
    *n_int = *max_int = *n_str = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        int kt = lua_type(L, -1);
        if (kt == LUA_TSTRING) {
            (*n_str)++;
        } else if (kt == LUA_TNUMBER && lua_isinteger(L, -1)) {
            lua_Integer k = lua_tointeger(L, -1);
            if (k < 1) {
                char msg[96];
                snprintf(msg, sizeof msg, "an integer key %lld (arrays use keys 1..n)",
                         (long long)k);
                lua_pop(L, 1);
                enc_fail(e, msg);
            }
            (*n_int)++;
            if (k > *max_int) *max_int = k;
        } else {
            char msg[96];
            snprintf(msg, sizeof msg, "a table key of type %s (only strings and 1..n)",
                     kt == LUA_TNUMBER ? "float" : luaL_typename(L, -1));
            lua_pop(L, 1);
            enc_fail(e, msg);
        }
    }
}

static void put_array(enc *e, int idx, cJSON *parent, const char *key, lua_Integer n)
{
    lua_State *L = e->L;
    cJSON *arr = attach(e, parent, key, cJSON_CreateArray());
    for (lua_Integer i = 1; i <= n; i++) {
        int old = path_push(e, "[%lld]", NULL, 0, i);
        lua_rawgeti(L, idx, i);
        put(e, lua_gettop(L), arr, NULL);
        lua_pop(L, 1);
        path_pop(e, old);
    }
}

/* An object with its n_str keys sorted. The strings are anchored in a list
 * of our own: a finalizer run by an allocation here may change the table,
 * and a key removed from it could be collected. The same finalizer could
 * add keys, so the count is checked against the array's size. */
static void put_object(enc *e, int idx, cJSON *parent, const char *key, lua_Integer n_str)
{
    lua_State *L = e->L;
    cJSON *obj = attach(e, parent, key, cJSON_CreateObject());
    skey *ks = lua_newuserdatauv(L, (size_t)(n_str ? n_str : 1) * sizeof *ks, 0);
    int kbuf = lua_gettop(L);
    lua_createtable(L, (int)(n_str < INT32_MAX ? n_str : 0), 0);
    lua_Integer m = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (m >= n_str || lua_type(L, -1) != LUA_TSTRING) enc_fail(e, "a table changed while it was encoded");
        lua_pushvalue(L, -1);
        lua_rawseti(L, kbuf + 1, m + 1);
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
    lua_pop(L, 1); /* the anchor list */
    lua_remove(L, kbuf);
}

static void put_table(enc *e, int idx, cJSON *parent, const char *key)
{
    lua_State *L = e->L;
    if (e->depth >= JSON_MAX_DEPTH) enc_fail(e, "nesting deeper than 1000 levels");
    if (!lua_checkstack(L, 8)) enc_fail(e, "Lua stack overflow");
    lua_pushvalue(L, idx);
    if (lua_rawget(L, e->seen) != LUA_TNIL) enc_fail(e, "a cycle (a table contains itself)");
    lua_pop(L, 1);

    lua_Integer n_int, max_int, n_str;
    classify_keys(e, idx, &n_int, &max_int, &n_str);
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
    if (n_int > 0 || marked)
        put_array(e, idx, parent, key, n_int);
    else
        put_object(e, idx, parent, key, n_str);
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

int xsa_lua_json_encode(lua_State *L)
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
    /* 1e400 would become inf, which encode refuses: refuse it here too */
    if (!isfinite(v->valuedouble))
        luaL_error(d->L, "json.decode: number %s is out of range for a double",
                   tok ? lua_pushlstring(d->L, tok, tl < 40 ? tl : 40) : "?");
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
            /* cJSON keeps both; a reader that takes the first and one that
             * takes the last would see two documents: refuse */
            if (lua_getfield(L, -1, c->string) != LUA_TNIL)
                luaL_error(L, "json.decode: invalid JSON: the key \"%s\" appears twice in an object", c->string);
            lua_pop(L, 1);
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
/* A NUL inside a decoded string would cut it short in cJSON's C strings,
 * silently. Valid JSON has no raw NUL byte anywhere; a \u0000 escape (after
 * an even run of backslashes, so not "\\u0000") is refused like the encoder
 * refuses strings holding NUL. */
static const char *nul_problem(const char *s, size_t len)
{
    if (memchr(s, '\0', len)) return "a NUL byte";
    for (size_t i = 0; i + 6 <= len; i++) {
        if (s[i] != '\\' || s[i + 1] != 'u' || memcmp(s + i + 2, "0000", 4) != 0) continue;
        size_t run = 0;
        while (run < i + 1 && s[i - run] == '\\') run++;
        if (run % 2 == 1) return "a \\u0000 escape (strings with NUL are not supported)";
    }
    return NULL;
}

static int decode_text(lua_State *L, const char *s, size_t len)
{
    const char *nul = nul_problem(s, len);
    if (nul) {
        lua_pushfstring(L, "invalid JSON: the text contains %s", nul);
        return 0;
    }
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

int xsa_lua_json_decode(lua_State *L)
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
    return xsa_lua_writeresult(L, path, -1);
}

static int l_json_read_file(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    size_t n;
    char *text = xsa_read_file(path, &n);
    if (xsa_lua_textresult(L, text, n) == 2) return 2;
    const char *s = lua_tolstring(L, -1, &n);
    if (!decode_text(L, s, n)) {
        lua_pushnil(L);
        lua_pushfstring(L, "%s: %s", path, lua_tostring(L, -2));
        return 2;
    }
    return 1;
}

/* ---- registration ------------------------------------------------------ */

static const luaL_Reg json_funcs[] = {
    {"encode", xsa_lua_json_encode},
    {"decode", xsa_lua_json_decode},
    {"array", l_json_array},
    {"write_file", l_json_write_file},
    {"read_file", l_json_read_file},
    {NULL, NULL},
};

/* Pushes the xsa.json table. */
int xsa_lua_open_json(lua_State *L)
{
    luaL_newmetatable(L, JSON_ARRAY_MT);
    lua_pop(L, 1);
    luaL_newlib(L, json_funcs);
    lua_pushlightuserdata(L, NULL);
    lua_setfield(L, -2, "null");
    return 1;
}

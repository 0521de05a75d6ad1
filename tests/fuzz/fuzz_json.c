/*
 * fuzz_json.c: libFuzzer harness for xsa.json (lua/l_safetensors.c), the
 * JSON reader and canonical writer that configs, results and caches go
 * through.
 *
 * Why: decoding (cJSON plus xsa's own scan of number tokens to keep
 * integers exact) and encoding (sorted keys, shortest round-trip floats,
 * array marks) live inside the Lua binding, so the harness drives them
 * through a Lua state: luaL_openlibs, luaopen_xsa, then per input, under
 * pcall, xsa.json.decode(bytes). Invalid JSON must raise a "json.decode:
 * invalid JSON ..." or "number ... is out of range" error. Whatever decodes must
 * re-encode (decode refuses infinities and NUL in strings, which encode cannot write),
 * the encoding must decode to the same value (types, integer/float kind,
 * sign of zero, array marks) and re-encode to the same text, and the
 * indented form must decode to the same value too.
 */
#include "fuzz_lua.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static lua_State *L;
static int check_ref;

static const char CHECK_LUA[] =
    "local json = ...\n"
    "local function same(a, b, path)\n"
    "  local ta, tb = type(a), type(b)\n"
    "  assert(ta == tb, path .. ': type ' .. ta .. ' vs ' .. tb)\n"
    "  if ta == 'number' then\n"
    "    assert(math.type(a) == math.type(b), path .. ': number kind')\n"
    "    assert(a == b and (a ~= 0 or math.type(a) == 'integer' or 1/a == 1/b),\n"
    "           path .. ': ' .. string.format('%q vs %q', a, b))\n"
    "  elseif ta == 'table' then\n"
    "    assert(getmetatable(a) == getmetatable(b), path .. ': array mark')\n"
    "    for k, v in pairs(a) do same(v, b[k], path .. '.' .. tostring(k)) end\n"
    "    for k in pairs(b) do assert(a[k] ~= nil, path .. ': extra key ' .. tostring(k)) end\n"
    "  else\n"
    "    assert(a == b, path .. ': ' .. tostring(a) .. ' vs ' .. tostring(b))\n"
    "  end\n"
    "end\n"
    "return function(s)\n"
    "  local ok, v = pcall(json.decode, s)\n"
    "  if not ok then\n"
    "    assert(type(v) == 'string' and (v:find('^json%.decode: invalid JSON') or\n"
    "           v:find('^json%.decode: number .* is out of range')),\n"
    "           'decode error: ' .. tostring(v))\n"
    "    return\n"
    "  end\n"
    "  local ok2, t = pcall(json.encode, v)\n"
    "  assert(ok2, 'encode of a decoded value: ' .. tostring(t))\n"
    "  local v2 = json.decode(t)\n"
    "  same(v, v2, 'value')\n"
    "  assert(json.encode(v2) == t, 'encoding is not canonical: ' .. t)\n"
    "  same(v, json.decode(json.encode(v, {indent = true})), 'indented')\n"
    "end\n";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    L = fuzz_lua_open(NULL);
    lua_getfield(L, -1, "json");
    check_ref = fuzz_lua_driver(L, "=fuzz_json", CHECK_LUA, sizeof CHECK_LUA - 1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_lua_call(L, check_ref, "fuzz_json", data, size);
    return 0;
}

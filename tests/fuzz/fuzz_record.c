/*
 * fuzz_record.c: libFuzzer harness for the record reader (xsa.record.parse,
 * lua/xsa/record.lua), what every file of results/ from another machine
 * goes through before a number of it is published.
 *
 * Why: a record is JSON from a stranger; the reader must refuse with a
 * reason or accept a record whose every field the publishers print is of
 * its type. Per input, record.parse(bytes, "k", study.check_pair) must not
 * raise; a refusal must give a reason; an accepted record must have a
 * typed provenance with a valid date, no checkpoints, an improvement equal
 * to the one its losses give, and provenance strings that study.md_text
 * leaves without unescaped markup. Seeds: records whose key text is "k".
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

int luaopen_xsa(lua_State *L);
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static lua_State *L;
static int check_ref;

static const char CHECK_LUA[] =
    "local xsa = ...\n"
    "local record, study = xsa.record, xsa.study\n"
    "return function(s)\n"
    "  local ok, rec, why = pcall(record.parse, s, 'k', study.check_pair)\n"
    "  assert(ok, 'record.parse raised: ' .. tostring(rec))\n"
    "  if not rec then assert(type(why) == 'string' and #why > 0, 'refused without a reason') return end\n"
    "  local p, r = rec.provenance, rec.result\n"
    "  assert(record.valid_date(p.date), 'accepted an invalid date')\n"
    "  assert(math.type(p.threads) == 'integer' and p.threads >= 1, 'threads')\n"
    "  for _, k in ipairs{'engine', 'commit', 'blas', 'cpu', 'date'} do\n"
    "    assert(type(p[k]) == 'string', 'provenance.' .. k)\n"
    "    local m = study.md_text(p[k]):gsub('\\\\.', '')\n"
    "    assert(not m:find('[|<>%[%]`*!&]'), 'markup left in ' .. k .. ': ' .. m)\n"
    "  end\n"
    "  assert(r.checkpoints == nil, 'checkpoints read')\n"
    "  local sa, x = r.sa.final_val, r.xsa.final_val\n"
    "  assert(r.improvement_pct == (sa ~= 0 and 100 * (sa - x) / sa or nil), 'improvement not from the losses')\n"
    "end\n";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char root[PATH_MAX];
    if (!getcwd(root, sizeof root)) abort();
    setenv("XSA_ROOT", root, 0);
    L = luaL_newstate();
    if (!L) abort();
    luaL_openlibs(L);
    lua_getglobal(L, "package");
    lua_pushfstring(L, "%s/lua/?.lua;%s/lua/?/init.lua;", getenv("XSA_ROOT"), getenv("XSA_ROOT"));
    lua_getfield(L, -2, "path");
    lua_concat(L, 2);
    lua_setfield(L, -2, "path");
    lua_pop(L, 1);
    luaL_requiref(L, "xsa", luaopen_xsa, 1);
    if (luaL_loadbuffer(L, CHECK_LUA, sizeof CHECK_LUA - 1, "=fuzz_record") != LUA_OK) {
        fprintf(stderr, "fuzz_record: %s\n", lua_tostring(L, -1));
        abort();
    }
    lua_insert(L, -2);
    if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
        fprintf(stderr, "fuzz_record: %s\n", lua_tostring(L, -1));
        abort();
    }
    check_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_settop(L, 0);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lua_rawgeti(L, LUA_REGISTRYINDEX, check_ref);
    lua_pushlstring(L, (const char *)data, size);
    if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
        fprintf(stderr, "fuzz_record: %s\n", lua_tostring(L, -1));
        abort();
    }
    lua_settop(L, 0);
    return 0;
}

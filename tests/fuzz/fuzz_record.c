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
#include <unistd.h>

#include "fuzz_lua.h"

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
    L = fuzz_lua_open(getenv("XSA_ROOT"));
    check_ref = fuzz_lua_driver(L, "=fuzz_record", CHECK_LUA, sizeof CHECK_LUA - 1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_lua_call(L, check_ref, "fuzz_record", data, size);
    return 0;
}

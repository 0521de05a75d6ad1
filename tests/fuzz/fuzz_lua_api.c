/*
 * fuzz_lua_api.c: libFuzzer harness for the whole Lua binding layer: the
 * fuzzer's bytes are a small program of calls into the xsa Lua API.
 *
 * Why: the bindings (lua/l_*.c) stand between arbitrary Lua values and C
 * code that trusts its pointers and sizes; tests/test_hostile.lua calls every
 * function with a fixed battery, this harness searches the combinations
 * (call sequences, objects freed and reused, finalizers and metamethods
 * running mid-call) for the ones a fixed list misses.
 *
 * The program (run by DRIVER below, in Lua, under pcall): per input a fresh
 * pool of values (small tensors of several shapes and dtypes, a model, an
 * optimizer, loaders, a generator, a tiny tokenizer, freed objects, hostile
 * tables whose metamethods free pool objects or raise, functions, numbers
 * such as -1, 0, 2^40, 2^62, math.mininteger, 0.5, NaN, inf, 1e300,
 * strings); then up to 48 instructions, each
 *   op byte     a function or method from a fixed list (every function of
 *               xsa, xsa.nn, xsa.gpt, xsa.optim, xsa.json, xsa.safetensors,
 *               xsa._data, xsa._tokenizer, xsa._text and every method and metamethod
 *               of the tensor, model, optimizer, generator, tokenizer and
 *               loader types, sorted by name) or a special: collect garbage,
 *               make the collector step at every allocation, make garbage
 *               whose finalizer frees a pool object, free a pool object
 *   count byte  0..5 arguments, each then one byte: a pool index
 * Results that are userdata or tables join the pool (numbers and strings do
 * not: a size computed by one call must not make the next allocate
 * gigabytes, and a path returned by one must not be written by the next).
 * Every call must return or raise an error whose value is a string; a
 * signal, a sanitizer report, a non-string error or a hang is a finding.
 *
 * File names: the harness works in a private temporary folder (chdir in
 * LLVMFuzzerInitialize, after making libFuzzer's path arguments absolute),
 * so whatever name a call writes lands there. Run it from the checkout (as
 * tests/fuzz/run.sh does): lua/ and data/ are found from there. Sizes in the pool stay small
 * (at most 4 per dimension, or beyond XSA_MAX_NUMEL so they are refused).
 */
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_lua.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static lua_State *L;
static int run_ref;

static const char DRIVER[] =
    "local xsa = ...\n"
    "xsa.set_threads(1)\n"
    "-- the fixed list of operations\n"
    "local ops = {}\n"
    "local function add_lib(prefix, t)\n"
    "  local names = {}\n"
    "  for k, f in pairs(t) do if type(k) == 'string' and type(f) == 'function' then names[#names + 1] = k end end\n"
    "  table.sort(names)\n"
    "  for _, k in ipairs(names) do ops[#ops + 1] = {prefix .. k, t[k]} end\n"
    "end\n"
    "add_lib('xsa.', xsa)\n"
    "-- the constructor fills in a small model (the default one is ~100 MB and\n"
    "-- would make every input that reaches it slow; test_hostile.lua calls it)\n"
    "local function small(t)\n"
    "  if t == nil then t = {} end\n"
    "  if type(t) ~= 'table' or getmetatable(t) then return t end\n"
    "  local c = {vocab = 16, n_layer = 1, d_model = 8, n_head = 2, seq_len = 4}\n"
    "  for k, v in next, t do c[k] = v end\n"
    "  return c\n"
    "end\n"
    "ops[#ops + 1] = {'xsa.gpt()', function(t, ...) return xsa.gpt(small(t), ...) end}\n"
    "for _, lib in ipairs{'nn', 'gpt', 'optim', 'json', 'safetensors', '_data', '_tokenizer', '_text'} do\n"
    "  add_lib('xsa.' .. lib .. '.', xsa[lib])\n"
    "end\n"
    "-- a tiny tokenizer (GPT-2's byte alphabet, a few merges, <|endoftext|>),\n"
    "-- loaded afresh for every input: cheap, and a freed one cannot leak over\n"
    "local cs, n = {}, 0\n"
    "for b = 0, 255 do\n"
    "  if (b >= 33 and b <= 126) or (b >= 161 and b <= 172) or (b >= 174 and b <= 255) then cs[b] = b\n"
    "  else cs[b] = 256 + n; n = n + 1 end\n"
    "end\n"
    "local function sym(s) local o = {} for i = 1, #s do o[#o + 1] = utf8.char(cs[s:byte(i)]) end return table.concat(o) end\n"
    "local enc, vl, id = {}, {'#version: 0.2'}, 0\n"
    "local function tokadd(s) enc[#enc + 1] = xsa.json.encode(s) .. ':' .. id; id = id + 1 end\n"
    "for b = 0, 255 do tokadd(sym(string.char(b))) end\n"
    "for _, m in ipairs{{'h', 'e'}, {'l', 'l'}, {'he', 'll'}, {'hell', 'o'}, {' ', 'w'}, {' w', 'o'}} do\n"
    "  tokadd(sym(m[1] .. m[2])); vl[#vl + 1] = sym(m[1]) .. ' ' .. sym(m[2])\n"
    "end\n"
    "tokadd('<|endoftext|>')\n"
    "xsa.write_file_atomic('encoder.json', '{' .. table.concat(enc, ', ') .. '}')\n"
    "xsa.write_file_atomic('vocab.bpe', table.concat(vl, '\\n') .. '\\n')\n"
    "local function load_tok() return xsa._tokenizer.load('encoder.json', 'vocab.bpe') end\n"
    "local tok = load_tok()\n"
    "local tokens = xsa.arange(0, 64, 'int32')\n"
    "local function cfg() return {vocab = 16, n_layer = 1, d_model = 8, n_head = 2, seq_len = 4} end\n"
    "local samples = {\n"
    "  {'tensor', xsa.ones(2)}, {'model', xsa.gpt(cfg())}, {'optimizer', xsa.optim.adamw({xsa.ones(2)})},\n"
    "  {'generator', xsa.generator(1)}, {'loader', xsa._data.loader(tokens, 0, 4, 4, 2)}, {'tokenizer', tok},\n"
    "}\n"
    "for _, s in ipairs(samples) do\n"
    "  local mt = s[2] and getmetatable(s[2])\n"
    "  if mt then\n"
    "    local methods = type(mt.__index) == 'table' and mt.__index or mt.methods or {}\n"
    "    add_lib(s[1] .. ':', methods)\n"
    "    local meta = {}\n"
    "    for k, f in pairs(mt) do if type(f) == 'function' and k:sub(1, 2) == '__' then meta[k] = f end end\n"
    "    add_lib(s[1] .. ':', meta)\n"
    "  end\n"
    "end\n"
    "local f = assert(io.open('story.txt', 'wb'))\n"
    "f:write(('Once upon a time there was a cat.\\n<|endoftext|>\\n'):rep(8))\n"
    "f:close()\n"
    "local SPECIAL = 4\n"
    "local TRACE = os.getenv('XSA_FUZZ_TRACE') -- print each call and its time\n"
    "local function sfree(o) pcall(function() o:free() end) end\n"
    "\n"
    "local function run(bytes)\n"
    "  tok = load_tok()\n"
    "  xsa.manual_seed(0)\n"
    "  xsa.set_grad_enabled(true)\n"
    "  local pool, NIL = {}, {}\n"
    "  local function add(v) pool[#pool + 1] = v end\n"
    "  add(NIL)\n"
    "  local nums = {-1, 0, 1, 2, 3, 4, 1 << 40, 1 << 62, math.maxinteger, math.mininteger, 0.5, 2.5,\n"
    "                -0.0, 0 / 0, math.huge, -math.huge, 1e300, 1e39, 1e-300}\n"
    "  for _, n in ipairs(nums) do add(n) end\n"
    "  for _, s in ipairs{'', 'x', 'float32', 'int32', 'sa', 'xsa', 'story.txt', 'out.bin', 'a\\0b',\n"
    "                     ('z'):rep(300), '{\"a\":[1,2]}', 'Hello world'} do add(s) end\n"
    "  add(true); add(false)\n"
    "  local t23, i14 = xsa.randn(2, 3), xsa.zeros({1, 4}, 'int32')\n"
    "  local model = xsa.gpt(cfg())\n"
    "  local objs = {t23, i14, xsa.tensor(1.5), xsa.zeros(0), xsa.zeros(2, 0), xsa.randn(3, 2):T(),\n"
    "    xsa.ones(1, 3):expand(4, 3), xsa.randn(2, 3):requires_grad(true), xsa.randn(1, 2, 6),\n"
    "    xsa.randn(4, 5), xsa.zeros({4}, 'int32'), xsa.ones(3), xsa.arange(0, 16, 'int32'),\n"
    "    model, xsa.gpt(cfg()), xsa.optim.adamw({xsa.randn(2, 3)}), xsa.generator(2),\n"
    "    xsa._data.loader(tokens, 0, 8, 4, 2, true, 1), xsa.data.loader(tokens, {seq_len = 4, batch = 2})}\n"
    "  for _, o in ipairs(objs) do add(o) end\n"
    "  add(tok)\n"
    "  local freed = {xsa.ones(2), xsa.gpt(cfg()), xsa.optim.adamw({xsa.ones(2)}),\n"
    "                 xsa._data.loader(tokens, 0, 2, 4, 1)}\n"
    "  for _, o in ipairs(freed) do o:free(); add(o) end\n"
    "  local function victim(i) local o = objs[(i % #objs) + 1]; return function() sfree(o) end end\n"
    "  add({}); add({1}); add({2, 3}); add({-1}); add({1 << 62, 2}); add({0.5}); add({{1, 2}, {3}})\n"
    "  add({dtype = 'int32'}); add({requires_grad = true}); add({probe = true, weights = true})\n"
    "  add({special = true, table = true}); add({indent = true}); add(cfg())\n"
    "  add({attention = 'xsa', lambda = 0.5}); add({lr = 0.01, betas = {0.9, 0.99}})\n"
    "  add({tensor = t23}); add({t23, t23}); add({{'a', t23}}); add({a = t23}); add({k = 'v'})\n"
    "  add({optimizer = freed[3]}); add({seq_len = 4, batch = 2, shuffle = true})\n"
    "  local cyc = {}; cyc[1] = cyc; cyc.k = cyc; add(cyc)\n"
    "  local few = function(k) return type(k) ~= 'number' or (k >= 1 and k <= 3) end\n"
    "  for i = 0, 3 do\n"
    "    local free_it = victim(i * 5)\n"
    "    add(setmetatable({}, {__index = function(_, k) free_it(); if few(k) then return 2 end end,\n"
    "                          __len = function() free_it(); return 2 end}))\n"
    "  end\n"
    "  add(setmetatable({}, {__index = function() error('index boom') end, __len = function() error('len boom') end}))\n"
    "  add(setmetatable({}, {__index = function(_, k) if few(k) then return 1 << 62 end end}))\n"
    "  add({num_batches = function() sfree(model); return 2 end, batch = function() return i14, i14 end})\n"
    "  add(function() end); add(function() error('fn boom') end); add(victim(13))\n"
    "  add(function() return i14, i14 end)\n"
    "  add(xsa.json.null); add(coroutine.create(function() end))\n"
    "  local mt_fin = {__gc = function(o) if o.f then o.f() end end}\n"
    "  local pos, n = 1, #bytes\n"
    "  local function byte()\n"
    "    local b = bytes:byte(pos) or 0\n"
    "    pos = pos + 1\n"
    "    return b\n"
    "  end\n"
    "  local steps = 0\n"
    "  while pos <= n and steps < 48 do\n"
    "    steps = steps + 1\n"
    "    local op = byte() % (#ops + SPECIAL) + 1\n"
    "    if op > #ops then\n"
    "      local k, a = op - #ops, byte()\n"
    "      if k == 1 then collectgarbage()\n"
    "      elseif k == 2 then collectgarbage('incremental', 1, 40, 1); collectgarbage('restart')\n"
    "      elseif k == 3 then for _ = 1, a % 16 + 1 do setmetatable({f = victim(a)}, mt_fin) end\n"
    "      else local o = pool[a % #pool + 1]; if type(o) == 'userdata' then sfree(o) end end\n"
    "    else\n"
    "      local fn = ops[op][2]\n"
    "      local nargs = byte() % 6\n"
    "      local args = {}\n"
    "      for i = 1, nargs do\n"
    "        local v = pool[byte() % #pool + 1]\n"
    "        if v ~= NIL then args[i] = v end\n"
    "      end\n"
    "      local t0 = TRACE and os.clock()\n"
    "      local res = table.pack(pcall(fn, table.unpack(args, 1, nargs)))\n"
    "      if TRACE then\n"
    "        io.stderr:write(string.format('%8.2f ms  %s(%d args) -> %s %s\\n', (os.clock() - t0) * 1e3,\n"
    "          ops[op][1], nargs, tostring(res[1]), tostring(res[2])))\n"
    "      end\n"
    "      if not res[1] then\n"
    "        if type(res[2]) ~= 'string' or #res[2] == 0 then\n"
    "          error(ops[op][1] .. ': an error that is not a message: ' .. tostring(res[2]), 0)\n"
    "        end\n"
    "      else\n"
    "        for i = 2, math.min(res.n, 4) do\n"
    "          local t = type(res[i])\n"
    "          if (t == 'userdata' or t == 'table') and #pool < 400 then add(res[i]) end\n"
    "        end\n"
    "      end\n"
    "      xsa.set_threads(1)\n"
    "    end\n"
    "  end\n"
    "  collectgarbage('incremental', 200, 100, 13)\n"
    "  xsa.set_grad_enabled(true)\n"
    "  pool = nil\n"
    "  collectgarbage()\n"
    "end\n"
    "return run\n";

/* libFuzzer's path arguments (corpus folders, files to run, artifact and
 * dictionary paths) made absolute, so the harness can work elsewhere. */
static char *kept[256]; /* the new strings, reachable for LeakSanitizer */
static int nkept;

static char *keep(size_t n)
{
    char *a = malloc(n);
    if (!a) abort();
    if (nkept < (int)(sizeof kept / sizeof kept[0])) kept[nkept++] = a;
    return a;
}

static char *absolute(const char *cwd, const char *p)
{
    if (p[0] == '/' || p[0] == '\0') return (char *)p;
    size_t n = strlen(cwd) + strlen(p) + 2;
    char *a = keep(n);
    snprintf(a, n, "%s/%s", cwd, p);
    return a;
}

static void absolute_args(int argc, char **argv)
{
    static const char *const flags[] = {"-artifact_prefix=", "-exact_artifact_path=", "-dict=",
                                        "-seed_inputs=", "-features_dir=", "-mutation_graph_file=", NULL};
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) abort();
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (a[0] != '-') {
            argv[i] = absolute(cwd, a);
            continue;
        }
        for (int k = 0; flags[k]; k++) {
            size_t fl = strlen(flags[k]);
            if (strncmp(a, flags[k], fl) == 0 && a[fl] && a[fl] != '/') {
                char *v = absolute(cwd, a + fl);
                size_t n = fl + strlen(v) + 1;
                char *b = keep(n);
                snprintf(b, n, "%s%s", flags[k], v);
                argv[i] = b;
            }
        }
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    absolute_args(*argc, *argv);
    /* run from the checkout (tests/fuzz/run.sh does): its lua/ for the Lua
     * submodules (xsa.data ...), its data/ for the tokenizer */
    char root[PATH_MAX];
    if (!getcwd(root, sizeof root)) abort();
    setenv("XSA_ROOT", root, 0);
    char dir[] = "/tmp/xsa-fuzz-lua-api-XXXXXX";
    if (!mkdtemp(dir) || chdir(dir) != 0) {
        perror("fuzz_lua_api: temporary folder");
        abort();
    }
    L = fuzz_lua_open(getenv("XSA_ROOT"));
    run_ref = fuzz_lua_driver(L, "=fuzz_lua_api", DRIVER, sizeof DRIVER - 1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_lua_call(L, run_ref, "fuzz_lua_api", data, size);
    return 0;
}

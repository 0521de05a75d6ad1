-- xsa.help_db: the one source of the help text. Keyed by qualified name:
-- "xsa.NAME" (functions and tables of the xsa table and its modules) and
-- "TYPE:name" (methods; TYPE is a receiver name of xsa.help.RECEIVERS).
-- Each entry: sig (the signature line), desc (one paragraph), example
-- (optional, runnable lines), summary (modules and types: one line for help()).
-- xsa.help prints it; scripts/gen_api_doc.lua writes doc/api-index.md from it
-- (tests/test_help.lua checks the committed file and that every public
-- function has an entry). Add an entry here when you add a function.
local D = {}

local function add(name, sig, desc, example) D[name] = {sig = sig, desc = desc, example = example} end
local function group(name, summary, desc, example)
  D[name] = {sig = name, summary = summary, desc = desc, example = example}
end

D._modules = {"xsa", "xsa.nn", "xsa.gpt", "xsa.optim", "xsa.safetensors", "xsa.json", "xsa.mpi", "xsa.tokenizer",
  "xsa.data", "xsa.train", "xsa.checkpoint", "xsa.plot", "xsa.stats", "xsa.generate", "xsa.samples", "xsa.help", "xsa.args",
  "xsa.cache", "xsa.study", "xsa.report", "xsa.progress", "xsa.sys", "xsa.numbers", "xsa.experiment",
  "xsa.record", "xsa.endpoints", "xsa.options", "xsa.text", "xsa.notebook", "xsa.schedule", "xsa.show",
  "xsa.store", "xsa.pair", "xsa.executor", "xsa.group", "xsa.provenance", "xsa.attention", "xsa.runs",
  "xsa.reuse", "xsa.state_files"}
D._types = {"tensor", "generator", "model", "cache", "optimizer", "tokenizer", "loader", "figure", "panel", "bar"}

----------------------------------------------------------------------------
-- modules

group("xsa", "the engine: tensors, random numbers, grad mode, files",
  "The global table of the engine (require \"xsa\" from a stock lua5.4). Its own functions build tensors, " ..
  "seed the random generator, switch grad mode and read or write files; its fields are the libraries " ..
  "below, and the pure-Lua modules (xsa.train, xsa.plot, ...) load on first use.",
  "print(xsa.version(), xsa.zeros(2, 3))")
group("xsa.nn", "fused layer ops with hand-written backward",
  "The GPT's kernels as autograd ops for your own models: embedding, linear (input-major weights), " ..
  "layernorm, the exact GELU, causal SA/XSA attention and cross-entropy.",
  "local y = xsa.nn.linear(xsa.randn(4, 8), xsa.randn(8, 3))")
group("xsa.gpt", "the GPT model (SA or XSA), checkpoints, sampling",
  "xsa.gpt{...} builds a GPT-2-style model with standard (SA) or exclusive (XSA) self attention; " ..
  "xsa.gpt.load reads a checkpoint; sample, sample_probs and generate_ids are the sampling primitives " ..
  "under model:generate.",
  "local model = xsa.gpt{attention = \"xsa\", lambda = 1}\nprint(model:generate(\"Once upon a time\", {max_new_tokens = 20}))")
group("xsa.optim", "AdamW", "Optimizers over lists of tensors or model:parameters().",
  "local opt = xsa.optim.adamw(model:parameters(), {lr = 1e-3})")
group("xsa.safetensors", "read and write safetensors files",
  "Tensors by name plus string metadata, in the format the Python safetensors package reads.",
  "xsa.safetensors.save(\"/tmp/w.safetensors\", {w = xsa.randn(3, 4)})")
group("xsa.json", "deterministic JSON",
  "Encodes Lua values with sorted keys (usable as cache keys) and decodes keeping integers and floats apart.",
  "print(xsa.json.encode({b = 1, a = {1.5, 2}}))")
group("xsa.mpi", "Open MPI: ranks, collectives, data-parallel gradients",
  "Under mpirun/srun (a build with Open MPI): this process's rank and the job's size, a barrier, in-place " ..
  "allreduce and bcast of float32 tensors, gather of JSON-able values to rank 0, and the fused gradient " ..
  "allreduce of data-parallel training. Anywhere else: rank 0 of size 1, every call a no-op returning its input.",
  "print(xsa.mpi.rank(), xsa.mpi.size())")
group("xsa.tokenizer", "GPT-2 byte-level BPE",
  "The GPT-2 tokenizer (the ids of tiktoken's gpt2 encoding), found in $XSA_DATA or the checkout's data/.",
  "local tok = xsa.tokenizer.gpt2()\nprint(tok:encode(\"Hello world\"))")
group("xsa.data", "TinyStories loaders and data files",
  "Finds the corpus and tokenizer files, caches token ids, and cuts them into train and val loaders of " ..
  "(inputs, targets) batches.",
  "local train, val = xsa.data.tinystories{seq_len = 64, batch = 16}\nlocal x, y = train:next()")
group("xsa.train", "the training loop: any number of models on the same batches; the SA/XSA pair",
  "Trains models on the same batches with one AdamW each, evaluating all on the same val batches; a model's " ..
  "numbers do not depend on the others trained with it. xsa.train.pair is the call with two.",
  "local r = xsa.train.pair(sa, xsa_model, train, val, {steps = 60})")
group("xsa.checkpoint", "the saved state of a training run, and resuming from it",
  "What xsa.train hands its save hook as ctx.state (steps done by each model, the loader's position, the " ..
  "generator, the result so far), its checks, and putting a run back where it stood; the caller writes the " ..
  "files (models with their AdamW beside the state: xsa.state_files).",
  "print(xsa.checkpoint.check({}, 10))")
group("xsa.state_files", "a training run's saved state on disk, written so that a kill at any moment leaves a complete one",
  "Beside a run's cache entry: its JSON (key, configuration, xsa.checkpoint's state) and its models with their AdamW, " ..
  "written in two slots in turn; loading checks the state first, and a damaged or foreign one is removed and said (the " ..
  "run starts over). Also the -atN files of a run stopped by a NaN.",
  "local saved = xsa.state_files.load_group(\"cache/mine-seed0-0123456789ab\", key, 2, 300, print)")
group("xsa.plot", "figures through gnuplot (PNG, SVG, GIF, terminal)",
  "Figures of panels holding lines, points, bands, bars and labels; saved with their .dat and .gp files, " ..
  "or drawn in the terminal with fig:show().",
  "local fig = xsa.plot.figure{title = \"loss\"}\nfig:panel{xlabel = \"step\"}:line({1, 2, 3}, {3, 2, 1.5})\nfig:show()")
group("xsa.stats", "statistics over seeds",
  "Means, t and Wilcoxon tests, bootstrap intervals and the paired SA/XSA summary.",
  "print(xsa.stats.paired_summary({3.1, 3.0, 3.2}, {3.0, 3.0, 3.1}).verdict)")
group("xsa.endpoints", "endpoints of the validation curves, paired over seeds",
  "The study's endpoints (doc/study.md, \"Endpoints\"): final and mean val loss, the steps at which a loss is " ..
  "reached and the plateau-escape step, with xsa.stats.paired_summary per endpoint and the censoring rule.",
  "print(xsa.endpoints.crossing_step({0, 20, 40}, {10, 7, 6}, 6.5))")
group("xsa.generate", "model:generate's module (prompts, batches, decoding)",
  "The text side of generation; the decoding loop and sampling are in C (core/generate.c, core/sample.c).",
  "local text, ids, info = model:generate(\"The cat\", {temperature = 0})")
group("xsa.samples", "continuations of checkpoints side by side",
  "What scripts/sample.lua and the report use: load checkpoints, continue prompts, print columns.",
  "print(xsa.samples.side_by_side({{title = \"SA\", text = \"a b\"}, {title = \"XSA\", text = \"c d\"}}, 40))")
group("xsa.help", "this help and the REPL's completion",
  "help(x) prints the entry of a module, function, value or name; Tab in the REPL completes names.",
  "help(\"adamw\")")
group("xsa.args", "command-line flags of the scripts",
  "Declare flags once (name, type, default, help); parse arg, print --help, apply --quick values.",
  "local o = xsa.args.parse(arg, {name = \"my.lua\", options = {{\"steps\", \"int\", 10, \"steps\"}}})")
group("xsa.cache", "results cached by configuration",
  "JSON results stored under a hash of their configuration, so rerunning a script is a cache hit.",
  "local r = xsa.cache.fetch(\"cache\", \"demo\", {n = 3}, function() return {v = 1} end)")
group("xsa.record", "the study's record: one JSON file per finished group of runs, each run under its own key",
  "Finished runs kept in the repository (results/), keyed by the whole configuration, the data's content and the " ..
  "precision, with their provenance. A run with a record is not trained again; records of one key from several " ..
  "machines sit side by side (the oldest counts); a damaged record is refused naming its file. doc/records.md.",
  "local recs = xsa.record.find(\"results\", \"mine\", \"mine-300steps-seed0\", config)")
group("xsa.study", "what the part scripts share",
  "Common flags, folders, loaders and model pairs of the study's configuration, markdown tables and the " ..
  "summaries the report reads.",
  "local opts = xsa.study.setup(xsa.args.parse(arg, {name = \"x.lua\", options = xsa.study.options({})}))")
group("xsa.report", "the HTML report", "Gathers every part's summary, figures and text samples into one page.",
  "xsa.report.write{out = \"cache\", plots = \"plots\", output = \"plots/report.html\"}")
group("xsa.progress", "progress bars and the wall clock",
  "A progress line on a terminal (plain log lines otherwise), durations, rates and a clock.",
  "local bar = xsa.progress.new{label = \"train\", total = 100}")
group("xsa.sys", "paths, environment, shell quoting",
  "Small helpers the modules share: the repository root, absolute paths, mkdir -p, interrupts.",
  "print(xsa.sys.root(), xsa.sys.shell_quote(\"it's\"))")
group("xsa.notebook", "what a cell means in the Jupyter kernel",
  "Used by `xsa --kernel`: runs cells in one state (top-level locals become globals), streams print and io.write, " ..
  "shows values, figures (image/png) and progress inline; doc/notebook.md.",
  "-- in a notebook cell: local fig = xsa.plot.figure{}; fig:panel{}:line({1, 2, 3}, {1, 4, 9}); fig")
add("xsa.notebook.start", "xsa.notebook.start{publish=, base64=} -> handlers",
  "Called once by the kernel with its C functions; returns the execute, complete, inspect and is_complete handlers.",
  "-- only the kernel calls it")
group("xsa.numbers", "finiteness checks", "Whether numbers (or every number in a table) are finite.",
  "print(xsa.numbers.finite(0 / 0))")

----------------------------------------------------------------------------
-- types

group("tensor", "n-d float32/int32 array with autograd",
  "A view (shape, strides, offset) over reference-counted storage. Indices and dimension arguments are " ..
  "1-based (negative counts from the end); element-wise ops broadcast as PyTorch; every op records autograd " ..
  "when an input requires grad. Operators + - * / ^ and unary - work.",
  "local t = xsa.tensor{{1, 2}, {3, 4}}\nprint(t:sum(1), t:matmul(t:T()), t[2][1])")
group("generator", "a seeded random stream (xoshiro256**)",
  "Independent of the global generator; the same seed gives the same numbers on every machine.",
  "local g = xsa.generator(7)\nprint(g:randn(2, 2))")
group("model", "a GPT model (xsa.gpt)",
  "GPT-2-style decoder with SA or XSA attention: training (loss, backward through autograd), forward, " ..
  "probes, checkpoints and text generation.",
  "local model = xsa.gpt{seed = 0}\nprint(model, model:num_params())")
group("cache", "a key/value cache for incremental decoding (model:kv_cache)",
  "Per layer, the keys and values [B,NH,T,HS] of every position appended so far; appending runs the model " ..
  "on the new tokens only.",
  "local c = model:kv_cache(1)\nlocal logits = c:append(xsa.tensor({15496}, \"int32\"))")
group("optimizer", "an AdamW optimizer (xsa.optim.adamw)",
  "Holds the moments of its parameters; opt.lr is writable, opt.step_count, opt.betas, opt.eps and " ..
  "opt.weight_decay readable.",
  "opt:zero_grad(); loss:backward(); opt:step()")
group("tokenizer", "a GPT-2 BPE tokenizer (xsa.tokenizer.gpt2())", "Text to ids and back.",
  "local tok = xsa.tokenizer.gpt2()\nprint(tok:decode(tok:encode(\"hi there\")))")
group("loader", "batches of (inputs, targets) windows (xsa.data)",
  "int32 [B,T] inputs and targets shifted by one token; train loaders shuffle per epoch (seeded).",
  "local train = xsa.data.tinystories{seq_len = 32, batch = 4, max_tokens = 20000}\nlocal x, y = train:next()")
group("figure", "a figure of xsa.plot (plot.figure{...})", "A grid of panels, saved or shown.",
  "local fig = xsa.plot.figure{cols = 2}")
group("panel", "a panel of a figure (fig:panel{...})", "Axes holding series.", "local p = fig:panel{xlabel = \"x\"}")
group("bar", "a progress bar (xsa.progress.new)", "Draws a line on a terminal, logs otherwise.",
  "local bar = xsa.progress.new{total = 10}; bar:update(1, \"loss 3.2\")")

----------------------------------------------------------------------------
-- the xsa table

add("xsa.version", "xsa.version() -> string", "The engine's version, \"0.1.0\".", "print(xsa.version())")
add("xsa.blas", "xsa.blas() -> {core=, best=, fallback=, threads=, gemm=, gemm_lib=, gemm_source=, lmhead=}",
  "The OpenBLAS kernel in use, the best one for this CPU, whether OpenBLAS fell back to a slower one, the thread count, " ..
  "the library that runs float32 matrix products (gemm \"openblas\" or \"dnnl\", the library by name, and how it " ..
  "was chosen: \"default\", \"XSA_GEMM\" or \"xsa_gemm_set\"), and the lm_head's blocking (its chunks of rows and " ..
  "blocks of the vocabulary set the order of the softmax's sums).",
  "print(xsa.blas().gemm_lib)")
add("xsa.set_gemm", "xsa.set_gemm(name)",
  "Selects the library of float32 matrix products: \"openblas\", \"dnnl\" (oneDNN's dnnl_sgemm, in builds with oneDNN) " ..
  "or \"default\" (dnnl on AVX-512 CPUs when built with oneDNN, else openblas). An unknown name is an error; " ..
  "the environment's XSA_GEMM takes the same names. The two give different last bits, each the same at any thread count.",
  "xsa.set_gemm(\"openblas\")")
add("xsa.set_threads", "xsa.set_threads(n)", "Sets the engine's thread count (OpenBLAS itself stays on one thread; float32 results do not depend on n).",
  "xsa.set_threads(2)")
add("xsa.read_file", "xsa.read_file(path) -> string | nil, message", "The whole file, or nil and the reason.",
  "local s, err = xsa.read_file(\"/etc/hostname\")")
add("xsa.cwd", "xsa.cwd() -> path | nil, message", "The working directory as the kernel knows it (getcwd), not $PWD.",
  "print(xsa.cwd())")
add("xsa.experiment.writes", "xsa.experiment.writes(name) -> string",
  "What an experiment named name writes (its figures, summary, cache entries, records, and runs/LABEL/ for a quick " ..
  "or non-default run): the Writes: paragraph of its --help unless its spec gives writes=.", "print(xsa.experiment.writes(\"mine\"))")
add("xsa.experiment.cache_config", "xsa.experiment.cache_config(config) -> table",
  "What a cache entry, its checkpoints and saved state are keyed by: the configuration and the data files by content.",
  "print(xsa.cache.path(\"cache\", \"mine-300steps-seed0\", xsa.experiment.cache_config(config)))")
add("xsa.experiment.worker_status", "xsa.experiment.worker_status(code) -> kind [, words]",
  "What a --jobs worker's exit status means: \"ok\", \"interrupted\" (130 or none), \"crashed\" (a signal), \"failed\".",
  "print(xsa.experiment.worker_status(137))")
group("xsa.schedule", "units of work with dependencies: serially, in child processes or over MPI ranks",
  "A unit is {key=, after = {keys it needs}, run = function(deps) -> result}; the results come back in unit order, each unit computed once.",
  "local r = xsa.schedule.serial({{key = \"a\", run = function() return 1 end}, {key = \"b\", after = {\"a\"}, run = function(d) return d.a + 1 end}})")
add("xsa.schedule.check", "xsa.schedule.check(units) -> {key = index}",
  "Checks the units (unique keys, a run function, dependencies listed earlier); the index of each key.",
  "local index = xsa.schedule.check(units)")
add("xsa.schedule.levels", "xsa.schedule.levels(units) -> {{indices}}",
  "The waves: a unit's wave is one past its latest dependency's; the units of a wave can run at the same time.",
  "print(#xsa.schedule.levels(units))")
add("xsa.schedule.one", "xsa.schedule.one(units, i [, {handler=, skip=}]) -> result",
  "Unit i, after the units it needs, in this process (a worker's share).", "local r = xsa.schedule.one(units, 2)")
add("xsa.schedule.serial", "xsa.schedule.serial(units [, {handler=, skip=}]) -> results, left_out",
  "Every unit in order in this process; skip(i, err) true leaves unit i and the units that need it out.",
  "local results = xsa.schedule.serial(units)")
add("xsa.schedule.ranks", "xsa.schedule.ranks(units, comm, {fail=, after_wave=, handler=})",
  "Wave by wave over the ranks of an MPI job (round-robin), a barrier after each wave.",
  "xsa.schedule.ranks(units, xsa.mpi, {fail = function(i, err) xsa.mpi.abort(tostring(err)) end})")
add("xsa.schedule.processes", "xsa.schedule.processes(units, start)",
  "Wave by wave: start(wave) runs the units of one wave (indices) in child processes and returns when they are done.",
  "xsa.schedule.processes(units, function(wave) --[[ start children ]] end)")
add("xsa.report.own_figure", "xsa.report.own_figure(entry, plots) -> figure | nil, why",
  "A summary's figure entry, accepted only when it names PLOTS/NAME.gp and PLOTS/NAME.png|svg with a plain NAME.",
  "local f = xsa.report.own_figure({name = \"x\", gp = \"/p/x.gp\", path = \"/p/x.png\"}, \"/p\")")
add("xsa.list_files", "xsa.list_files(dir [, \"files\" | \"folders\"]) -> {names} | nil, message",
  "The names of the regular files in dir (or, given \"folders\", of its folders): no links or dot files, sorted bytewise.",
  "for _, f in ipairs(xsa.list_files(\"data\") or {}) do print(f) end")
add("xsa.file_checksum", "xsa.file_checksum(path) -> \"crc64:HEX\", bytes | nil, message",
  "The CRC-64 (as xz computes it) and size of a regular file's bytes: a content identity, not a signature.",
  "print(xsa.file_checksum(\"data/vocab.bpe\"))")
add("xsa.record.find", "xsa.record.find(dir, part, name, config [, check]) -> {records}",
  "The records of a group of runs (either format) or of a result, the chosen (oldest) first, each result as the trainer gave it; {} when none. Raises, naming the file, on a refused record.",
  "local r = xsa.record.find(\"results\", \"mine\", \"mine-300steps-seed0\", config)[1]")
add("xsa.record.older", "xsa.record.older(a, b) -> boolean",
  "Whether record a is chosen before b among records of one run: the older by provenance date, ties broken by file name.",
  "table.sort(recs, xsa.record.older)")
add("xsa.record.all", "xsa.record.all(dir [, folders]) -> {records}",
  "Every record in the named folders of dir (default: every folder), for accounting: each checked as find checks it and read only where find would read it (its part's folder, its name and key in its file name); each record has .folder and .file. Raises, naming the file, on a refused or misplaced one.",
  "for _, r in ipairs(xsa.record.all(\"results\", {\"grid\"})) do print(r.file, r.result.cpu_s) end")
add("xsa.record.write", "xsa.record.write(dir, part, name, config, result [, provenance]) -> path",
  "Writes a new record (atomically, beside any other of its key); paths in the result are not recorded.",
  "xsa.record.write(\"/tmp/res\", \"mine\", \"mine-seed0\", {n = 1}, {v = 2})")
add("xsa.record.key", "xsa.record.key(config [, identity]) -> text",
  "The key text config's records are written under: a group of runs' (xsa.group.key: each run's key) when config is one, else the configuration's, with the data files by content and the precision.",
  "print(xsa.record.key({n = 1}))")
add("xsa.record.data_identity", "xsa.record.data_identity() -> {corpus=, encoder=, vocab=}",
  "CRC-64 and size of the corpus and tokenizer files the loaders read.", "print(xsa.record.data_identity().corpus)")
add("xsa.record.provenance", "xsa.record.provenance() -> table",
  "Engine, commit, BLAS kernel and threads, the float32 GEMM library, CPU model and date: what a record says of where it ran.",
  "print(xsa.record.provenance().blas)")
add("xsa.record.commit", "xsa.record.commit() -> hex | \"unknown\"", "The checkout's commit, read from .git (no git process).",
  "print(xsa.record.commit())")
add("xsa.record.parse", "xsa.record.parse(text, key [, check]) -> record | nil, why",
  "A record's text checked: format, key, finite numbers, short printable strings, the caller's check.",
  "local rec, why = xsa.record.parse(xsa.read_file(path), xsa.record.key(config))")
add("xsa.record.valid_date", "xsa.record.valid_date(date) -> true | false, why",
  "Whether a provenance date is YYYY-MM-DDTHH:MM:SSZ of the calendar, not before xsa.record.FIRST_DATE nor a day ahead of now.",
  "print(xsa.record.valid_date(\"2026-12-02T10:00:00Z\"))")
add("xsa.record.blas_text", "xsa.record.blas_text(provenance) -> string",
  "A record provenance's BLAS as text: the OpenBLAS kernel, the float32 GEMM library when it is not OpenBLAS (\"Haswell; products oneDNN 2.6.3 dnnl_sgemm\"; records from before the library was recorded ran OpenBLAS's), and the lm_head's blocking when the record names it (records from before it was recorded ran chunks of 40 MB and blocks of 4 MB).",
  "print(xsa.record.blas_text(xsa.record.provenance()))")
add("xsa.record.differences", "xsa.record.differences(records) -> {{field=, values=, max_abs=}}",
  "The numbers that differ between the records of one run (the cross-machine comparison).",
  "for _, d in ipairs(xsa.record.differences(recs)) do print(d.field, d.max_abs) end")
add("xsa.write_file_atomic", "xsa.write_file_atomic(path, s) -> true",
  "Writes s to a temporary file next to path, then renames it over path: readers never see half a file.",
  "xsa.write_file_atomic(\"/tmp/x.txt\", \"hello\\n\")")
add("xsa.no_grad", "xsa.no_grad(fn, ...) -> fn's results",
  "Runs fn with autograd recording off (as torch.no_grad); updates to leaf tensors go here.",
  "xsa.no_grad(function() w:sub_(0.1 * w.grad) end)")
add("xsa.grad_enabled", "xsa.grad_enabled() -> boolean", "Whether autograd records operations.", "print(xsa.grad_enabled())")
add("xsa.set_grad_enabled", "xsa.set_grad_enabled(flag) -> previous", "Turns recording on or off; returns the previous mode.",
  "local prev = xsa.set_grad_enabled(false)")
add("xsa.tensor", "xsa.tensor(data [, dtype | {dtype=, requires_grad=}]) -> tensor",
  "A tensor from a number (0-d), a nested table of numbers, or a copy of another tensor; dtype \"float32\" (default) or \"int32\".",
  "local ids = xsa.tensor({15496, 995}, \"int32\")")
add("xsa.zeros", "xsa.zeros(sizes... [, opts]) -> tensor", "A tensor of zeros; sizes as arguments or one table; opts {dtype=, requires_grad=}.",
  "local w = xsa.zeros(3, 4, {requires_grad = true})")
add("xsa.ones", "xsa.ones(sizes... [, opts]) -> tensor", "A tensor of ones.", "print(xsa.ones({2, 3}))")
add("xsa.full", "xsa.full(sizes..., value [, opts]) -> tensor", "A tensor filled with value.", "print(xsa.full(2, 2, 7))")
add("xsa.arange", "xsa.arange([start,] stop [, step]) -> tensor",
  "Values start, start+step, ... below stop (half-open, as PyTorch); int32 when every argument is an integer.",
  "print(xsa.arange(5), xsa.arange(0, 1, 0.25))")
add("xsa.rand", "xsa.rand([generator,] sizes...) -> tensor", "Uniform [0, 1) float32 from the global generator or the one given.",
  "print(xsa.rand(2, 3))")
add("xsa.randn", "xsa.randn([generator,] sizes...) -> tensor", "Standard normal float32 (Box-Muller).",
  "local x = xsa.randn(xsa.generator(0), 4, 8)")
add("xsa.randint", "xsa.randint([generator,] lo, hi, sizes...) -> tensor", "Uniform integers in [lo, hi), int32.",
  "local ids = xsa.randint(0, 50257, 2, 64)")
add("xsa.generator", "xsa.generator(seed) -> generator", "An independent random stream seeded with seed.",
  "local g = xsa.generator(42)\nprint(xsa.randn(g, 3))")
add("xsa.manual_seed", "xsa.manual_seed(seed)", "Reseeds the global generator (0 at start-up).",
  "xsa.manual_seed(42); local a = xsa.randn(3)")
add("xsa.where", "xsa.where(cond, a, b) -> tensor", "Element-wise a where cond is non-zero, else b (broadcasting; a, b tensors or numbers).",
  "print(xsa.where(xsa.tensor{1, 0}, 10, 20))")
add("xsa.matmul", "xsa.matmul(a, b) -> tensor", "The same as a:matmul(b).", "print(xsa.matmul(xsa.ones(2, 3), xsa.ones(3, 2)))")
add("xsa.allclose", "xsa.allclose(a, b [, rtol=1e-5 [, atol=1e-8]]) -> boolean", "The same as a:allclose(b, ...).",
  "print(xsa.allclose(xsa.ones(2), xsa.ones(2)))")
add("xsa.is_tensor", "xsa.is_tensor(v) -> boolean", "Whether v is a tensor.", "print(xsa.is_tensor(xsa.zeros(1)), xsa.is_tensor({}))")
add("xsa.live_bytes", "xsa.live_bytes() -> integer", "Bytes of storage held by every live tensor.", "print(xsa.live_bytes())")
add("xsa.cat", "xsa.cat(tensors [, dim=1]) -> tensor", "Concatenates along an existing dimension.",
  "print(xsa.cat({xsa.ones(2), xsa.zeros(3)}))")
add("xsa.stack", "xsa.stack(tensors [, dim=1]) -> tensor", "Stacks same-shaped tensors along a new dimension.",
  "print(xsa.stack({xsa.ones(2), xsa.zeros(2)}))")
for _, f in ipairs{{"zeros_like", "zeros"}, {"ones_like", "ones"}, {"rand_like", "uniform [0, 1) numbers"},
  {"randn_like", "standard normal numbers"}} do
  add("xsa." .. f[1], "xsa." .. f[1] .. "(t) -> tensor", "A new tensor of t's shape and dtype holding " .. f[2] .. ".",
    "local z = xsa." .. f[1] .. "(xsa.ones(2, 3))")
end
add("xsa.full_like", "xsa.full_like(t, value) -> tensor", "A tensor of t's shape filled with value.",
  "print(xsa.full_like(xsa.ones(2), 5))")

----------------------------------------------------------------------------
-- tensor methods

local T = "local t = xsa.tensor{{1, -2, 3}, {4, 5, -6}}\n"
add("tensor:shape", "tensor:shape() -> {sizes}", "The sizes as a Lua list.", T .. "print(t:shape()[2])  --> 3")
add("tensor:size", "tensor:size([dim]) -> integer | {sizes}", "The size of one dimension (1-based or negative), or all of them.",
  T .. "print(t:size(-1))  --> 3")
add("tensor:stride", "tensor:stride([dim]) -> integer | {strides}", "Strides in elements.", T .. "print(t:stride(1))  --> 3")
add("tensor:dim", "tensor:dim() -> integer", "The number of dimensions.", T .. "print(t:dim())  --> 2")
add("tensor:numel", "tensor:numel() -> integer", "The number of elements.", T .. "print(t:numel())  --> 6")
add("tensor:dtype", "tensor:dtype() -> \"float32\" | \"int32\"", "The element type.", T .. "print(t:dtype())")
add("tensor:is_contiguous", "tensor:is_contiguous() -> boolean", "Whether the elements are laid out row-major without gaps.",
  T .. "print(t:T():is_contiguous())  --> false")
add("tensor:get", "tensor:get(i, j, ...) -> number", "One element by 1-based (or negative) indices.", T .. "print(t:get(2, -1))  --> -6.0")
add("tensor:set", "tensor:set(i, j, ..., value) -> tensor", "Writes one element.", T .. "t:set(1, 1, 9)")
add("tensor:item", "tensor:item() -> number", "The value of a one-element tensor.", "print(xsa.tensor{3}:sum():item())")
add("tensor:totable", "tensor:totable() -> nested table", "The values as nested Lua tables (alias tolist).", T .. "print(t:totable()[2][1])")
add("tensor:tolist", "tensor:tolist() -> nested table", "Alias of totable.", T .. "print(#t:tolist())")
add("tensor:free", "tensor:free()", "Releases the storage at once (later use raises); a <close> variable does the same.",
  "local big <close> = xsa.zeros(1000, 1000)")
add("tensor:view", "tensor:view(sizes...) -> tensor", "The same storage under another shape (contiguous tensors only; -1 infers one size).",
  T .. "print(t:view(3, 2))")
add("tensor:reshape", "tensor:reshape(sizes...) -> tensor", "Like view, copying only when it must.", T .. "print(t:T():reshape(-1))")
add("tensor:expand", "tensor:expand(sizes...) -> tensor", "Repeats size-1 dimensions without copying (-1 keeps a size).",
  "print(xsa.tensor{1, 2}:view(1, 2):expand(3, 2))")
add("tensor:transpose", "tensor:transpose(d1, d2) -> tensor", "Swaps two dimensions (a view).", T .. "print(t:transpose(1, 2))")
add("tensor:T", "tensor:T() -> tensor", "The transpose of a 2-D tensor (a view).", T .. "print(t:T())")
add("tensor:permute", "tensor:permute(dims...) -> tensor", "Reorders dimensions (a view).", "print(xsa.zeros(2, 3, 4):permute(3, 1, 2):shape()[1])  --> 4")
add("tensor:narrow", "tensor:narrow(dim, start, length) -> tensor", "Elements start..start+length-1 of a dimension (a view).",
  T .. "print(t:narrow(2, 2, 2))")
add("tensor:select", "tensor:select(dim, i) -> tensor", "Index i of a dimension, which disappears (a view).", T .. "print(t:select(2, 1))")
add("tensor:unsqueeze", "tensor:unsqueeze(dim) -> tensor", "Inserts a dimension of size 1.", "print(xsa.ones(3):unsqueeze(1):shape()[1])  --> 1")
add("tensor:squeeze", "tensor:squeeze([dim]) -> tensor", "Removes dimensions of size 1 (or the one given).", "print(xsa.ones(1, 3):squeeze():dim())  --> 1")
add("tensor:split", "tensor:split(size [, dim=1]) -> tensors...", "Views of `size` elements each along dim.",
  "local q, k, v = xsa.randn(2, 12):split(4, -1)")
add("tensor:chunk", "tensor:chunk(n [, dim=1]) -> tensors...", "n views of (nearly) equal size along dim.", "local a, b = xsa.arange(6):chunk(2)")
add("tensor:flatten", "tensor:flatten() -> tensor", "A 1-D view or copy of every element.", T .. "print(t:flatten())")
add("tensor:contiguous", "tensor:contiguous() -> tensor", "Itself when contiguous, else a row-major copy.", T .. "local c = t:T():contiguous()")
add("tensor:clone", "tensor:clone() -> tensor", "A copy with its own storage (recorded by autograd).", T .. "local c = t:clone()")
add("tensor:float", "tensor:float() -> tensor", "A float32 copy (itself when already float32).", "print(xsa.arange(3):float())")
add("tensor:int", "tensor:int() -> tensor", "An int32 copy, truncating toward 0.", "print(xsa.tensor{1.7, -1.7}:int())")
for _, op in ipairs{{"add", "+", "a + b"}, {"sub", "-", "a - b"}, {"mul", "*", "a * b"}, {"div", "/", "a / b"},
  {"pow", "^", "a ^ b"}, {"maximum", nil, "max(a, b)"}, {"minimum", nil, "min(a, b)"}} do
  add("tensor:" .. op[1], "tensor:" .. op[1] .. "(b) -> tensor",
    "Element-wise " .. op[3] .. " with a tensor (broadcast) or a number" .. (op[2] and ("; also the operator " .. op[2]) or "") .. ".",
    T .. "print(t:" .. op[1] .. "(2), t:" .. op[1] .. "(xsa.tensor{1, 2, 3}))")
end
for _, op in ipairs{{"eq", "=="}, {"ne", "~="}, {"lt", "<"}, {"le", "<="}, {"gt", ">"}, {"ge", ">="}} do
  add("tensor:" .. op[1], "tensor:" .. op[1] .. "(b) -> tensor", "Element-wise a " .. op[2] .. " b as a float32 mask of 0 and 1 (broadcasting).",
    T .. "print(t:" .. op[1] .. "(0))")
end
for _, op in ipairs{{"neg", "-x"}, {"exp", "e^x"}, {"log", "the natural log"}, {"sqrt", "the square root"},
  {"tanh", "tanh"}, {"relu", "max(x, 0)"}, {"gelu", "the exact (erf) GELU"}, {"abs", "|x|"}, {"sigmoid", "1 / (1 + e^-x)"}} do
  add("tensor:" .. op[1], "tensor:" .. op[1] .. "() -> tensor", "Element-wise " .. op[2] .. " (differentiable).", T .. "print(t:" .. op[1] .. "())")
end
add("tensor:clamp", "tensor:clamp([lo [, hi]]) -> tensor", "Limits every element to [lo, hi] (nil: no limit).", T .. "print(t:clamp(0, 4))")
add("tensor:masked_fill", "tensor:masked_fill(mask, value) -> tensor", "value where mask is non-zero (broadcast), the element elsewhere.",
  T .. "print(t:masked_fill(t:lt(0), 0))")
add("tensor:matmul", "tensor:matmul(b) -> tensor",
  "The matrix product through OpenBLAS: [M,K]x[K,N], [B,M,K]x[B,K,N] or [B,M,K]x[K,N] (also mm, bmm, xsa.matmul).",
  T .. "print(t:matmul(t:T()))")
add("tensor:mm", "tensor:mm(b) -> tensor", "Alias of matmul.", T .. "print(t:mm(t:T()))")
add("tensor:bmm", "tensor:bmm(b) -> tensor", "Alias of matmul (batched shapes).", "print(xsa.ones(2, 3, 4):bmm(xsa.ones(2, 4, 5)):shape()[3])")
add("tensor:allclose", "tensor:allclose(b [, rtol=1e-5 [, atol=1e-8]]) -> boolean", "|a - b| <= atol + rtol |b| everywhere (same shape).",
  T .. "print(t:allclose(t + 1e-7))")
add("tensor:equal", "tensor:equal(b) -> boolean", "The same shape and identical values.", T .. "print(t:equal(t:clone()))")
for _, op in ipairs{{"add_", "adds b"}, {"sub_", "subtracts b"}, {"mul_", "multiplies by b"}, {"div_", "divides by b"}} do
  add("tensor:" .. op[1], "tensor:" .. op[1] .. "(b) -> tensor", "In place: " .. op[2] .. " (tensor or number); returns the tensor. " ..
    "Refused on tensors that require grad unless grad mode is off.", T .. "t:" .. op[1] .. "(2)")
end
add("tensor:fill_", "tensor:fill_(value) -> tensor", "In place: every element = value.", T .. "t:fill_(1)")
add("tensor:zero_", "tensor:zero_() -> tensor", "In place: every element = 0.", T .. "t:zero_()")
add("tensor:copy_", "tensor:copy_(src) -> tensor", "In place: copies src (broadcast to this shape).", T .. "t:copy_(xsa.ones(3))")
for _, op in ipairs{{"sum", "the sum"}, {"mean", "the mean"}, {"var", "the unbiased variance"}, {"std", "the unbiased standard deviation"}} do
  add("tensor:" .. op[1], "tensor:" .. op[1] .. "([dim [, keepdim]]) -> tensor", op[2]:gsub("^%l", string.upper) ..
    " of every element, or over one dimension (float32).", T .. "print(t:" .. op[1] .. "(), t:" .. op[1] .. "(2))")
end
add("tensor:max", "tensor:max([dim [, keepdim]]) -> tensor [, indices]", "The largest element, or per dim the values and their 1-based indices.",
  T .. "print(t:max(2))")
add("tensor:min", "tensor:min([dim [, keepdim]]) -> tensor [, indices]", "The smallest element, or per dim the values and 1-based indices.",
  T .. "print(t:min(2))")
add("tensor:argmax", "tensor:argmax([dim [, keepdim]]) -> tensor", "1-based indices of the largest elements.", T .. "print(t:argmax(2))")
add("tensor:argmin", "tensor:argmin([dim [, keepdim]]) -> tensor", "1-based indices of the smallest elements.", T .. "print(t:argmin(2))")
add("tensor:softmax", "tensor:softmax([dim=-1]) -> tensor", "Softmax along a dimension.", T .. "print(t:softmax(-1))")
add("tensor:log_softmax", "tensor:log_softmax([dim=-1]) -> tensor", "Log of the softmax, computed stably.", T .. "print(t:log_softmax())")
add("tensor:requires_grad", "tensor:requires_grad([flag]) -> tensor | boolean", "Marks a leaf for gradients (returns it), or tells whether it requires them.",
  "local w = xsa.randn(3):requires_grad(true)")
add("tensor:backward", "tensor:backward([grad] [, retain_graph]) -> nil",
  "Reverse-mode autograd from this tensor: gradients ACCUMULATE into the leaves' .grad; grad is needed unless it has one element.",
  "local x = xsa.tensor({1, 2}, {requires_grad = true})\n(x * x):sum():backward()\nprint(x.grad)")
add("tensor:zero_grad", "tensor:zero_grad()", "Fills .grad with zeros.", "w:zero_grad()")
add("tensor:detach", "tensor:detach() -> tensor", "The same storage outside the autograd graph.", "local v = w:detach()")
add("tensor:grad_fn", "tensor:grad_fn() -> string | nil", "The name of the op that made it (\"MulBackward\", ...), nil for a leaf.",
  "print((xsa.ones(2, {requires_grad = true}) * 2):grad_fn())")
add("tensor:is_leaf", "tensor:is_leaf() -> boolean", "Whether no recorded op made it.", "print(xsa.ones(2):is_leaf())")

----------------------------------------------------------------------------
-- generator

for _, f in ipairs{{"rand", "", "uniform [0, 1) float32"}, {"randn", "", "standard normal float32"},
  {"randint", "lo, hi, ", "integers in [lo, hi), int32"}} do
  add("generator:" .. f[1], "generator:" .. f[1] .. "(" .. f[2] .. "sizes...) -> tensor",
    "A tensor of " .. f[3] .. " from this generator (the same as xsa." .. f[1] .. "(g, ...)).",
    "local g = xsa.generator(1)\nprint(g:" .. f[1] .. "(" .. f[2] .. "2, 2))")
end
add("generator:manual_seed", "generator:manual_seed(seed) -> generator", "Restarts the stream from seed.", "g:manual_seed(7)")

----------------------------------------------------------------------------
-- xsa.nn

add("xsa.nn.embedding", "xsa.nn.embedding(idx, wte [, wpe]) -> tensor",
  "wte[idx] + wpe[t]: idx int32 [T] or [B,T] (0-based ids), wte [V,C], wpe [>=T,C].",
  "local x = xsa.nn.embedding(xsa.tensor({1, 2}, \"int32\"), xsa.randn(5, 4))")
add("xsa.nn.linear", "xsa.nn.linear(x, w [, b]) -> tensor", "x w + b with w [C,OC] input-major (GPT-2's Conv1D layout).",
  "local y = xsa.nn.linear(xsa.randn(2, 8), xsa.randn(8, 3), xsa.zeros(3))")
add("xsa.nn.layernorm", "xsa.nn.layernorm(x, w, b) -> tensor", "LayerNorm over the last dimension (eps 1e-5).",
  "local y = xsa.nn.layernorm(xsa.randn(2, 4), xsa.ones(4), xsa.zeros(4))")
add("xsa.nn.gelu", "xsa.nn.gelu(x) -> tensor", "The exact erf GELU (PyTorch's nn.GELU() default).", "print(xsa.nn.gelu(xsa.tensor{-1, 0, 1}))")
add("xsa.nn.attention", "xsa.nn.attention(q, k, v, n_head [, lambda [, opts]]) or (qkv, n_head, ...) -> tensor [, info]",
  "Causal multi-head attention before the output projection; lambda 0 is SA, 1 full XSA: Z = Y - lambda (Y.Vn) Vn per head. " ..
  "opts {probe = true, weights = true} also returns the attention weights and probe statistics.",
  "local z = xsa.nn.attention(xsa.randn(1, 5, 24), 2, 1.0)")
add("xsa.nn.cross_entropy", "xsa.nn.cross_entropy(logits, targets) -> tensor", "Mean cross-entropy (natural log) of logits [...,V] and int32 targets.",
  "print(xsa.nn.cross_entropy(xsa.randn(3, 10), xsa.tensor({1, 2, 3}, \"int32\")))")

----------------------------------------------------------------------------
-- xsa.gpt and the model

D["xsa.gpt"].sig = "xsa.gpt{vocab=50257, n_layer=2, d_model=128, n_head=2, seq_len=64, attention=\"sa\", lambda=1, seed=0, precision=\"f32\"} -> model"
add("xsa.gpt.load", "xsa.gpt.load(path [, {attention=}]) -> model, optimizer | nil [, warning]",
  "Reads a checkpoint written by model:save, validating names, shapes and config; returns the AdamW it carries, if any. " ..
  "A model whose attention was a Lua function loads with the variant registered under the name its checkpoint records " ..
  "(when its code is the recorded one), or with {attention = f}: a warning, also written to stderr, when f's code is not the recorded one.",
  "local model, opt = xsa.gpt.load(\"cache/mine-xsa-300steps-HASH.safetensors\")")
add("xsa.gpt.variants", "xsa.gpt.variants() -> {names}",
  "The core's attention variants, in its order (\"sa\", \"xsa\", \"vsub\"): the names attention = takes beside a function.",
  "print(table.concat(xsa.gpt.variants(), \", \"))")
add("xsa.gpt.sample", "xsa.gpt.sample(logits [, {temperature=1, top_k=, top_p=, generator=}]) -> id | int32 tensor",
  "Draws a token id (0-based) from logits [V], or one per row of [B,V]: temperature 0 is greedy; top_k keeps the k most probable, " ..
  "top_p the smallest set reaching that probability; from the global generator unless one is given.",
  "local id = xsa.gpt.sample(logits, {temperature = 0.8, top_k = 40, generator = xsa.generator(1)})")
add("xsa.gpt.sample_probs", "xsa.gpt.sample_probs(logits [, opts]) -> tensor",
  "The distribution xsa.gpt.sample draws from (after temperature, top_k, top_p; renormalised).",
  "print(xsa.gpt.sample_probs(xsa.tensor{0.4, 0.3, 0.2, 0.1}:log(), {top_p = 0.5}))")
add("xsa.gpt.generate_ids", "xsa.gpt.generate_ids(model, rows, opts) -> rows of ids",
  "The C decoding loop under model:generate: rows is a list of id lists; opts max_new_tokens, temperature, top_k, top_p, " ..
  "seed (row b draws from seed + b - 1), eot (-1: none), use_cache.",
  "local out = xsa.gpt.generate_ids(model, {{15496}}, {max_new_tokens = 5, temperature = 0})")
add("model:loss", "model:loss(inputs, targets) -> 0-d tensor",
  "Mean cross-entropy of int32 [B,T] inputs and targets; under grad mode loss:backward() adds into the parameters' .grad; " ..
  "under xsa.no_grad a cheaper forward.",
  "local x, y = train:next()\nlocal loss = model:loss(x, y); loss:backward()")
add("model:forward", "model:forward(inputs) -> tensor", "Logits [B,T,V] of int32 [B,T] inputs (a copy, no gradient).",
  "local logits = model:forward(xsa.tensor({{15496, 995}}, \"int32\"))")
add("model:clone", "model:clone([{attention=, lambda=}]) -> model", "A new model with the same weights, optionally another attention.",
  "local twin = model:clone{attention = \"xsa\", lambda = 1}")
add("model:copy_from", "model:copy_from(other) -> model", "Copies the weights of a same-sized model.", "a:copy_from(b)")
add("model:set_attention", "model:set_attention(\"sa\" | \"xsa\" | \"vsub\" | f [, lambda]) -> model",
  "Switches the attention variant in place (f: a function written in Lua, or the name xsa.attention.register gave one; doc/lua-api.md).",
  "model:set_attention(\"xsa\", 0.5)")
add("model:parameters", "model:parameters() -> list of {name=, tensor=}",
  "The parameters in GPT-2 order, also indexed by name; the tensors are the model's own.",
  "local ps = model:parameters()\nprint(ps[\"wte.weight\"]:shape()[1])")
add("model:num_params", "model:num_params() -> integer", "The number of scalars.", "print(model:num_params())")
add("model:config", "model:config() -> table", "The configuration (the constructor's keys: xsa.gpt(model:config()) builds the same model; lambda only with attention \"xsa\").", "print(model:config().attention)")
add("model:probe", "model:probe(loader [, n]) -> per-layer metrics",
  "Self-value bias metrics (value_cos, self_attn, pre_cos, post_cos, ..._pos1) averaged over batches 1..n and heads.",
  "for l, m in ipairs(model:probe(val, 2)) do print(l, m.pre_cos) end")
add("model:save", "model:save(path [, {optimizer=opt}]) -> true", "Writes a safetensors checkpoint (atomically), with the optimizer's state if given.",
  "model:save(\"/tmp/m.safetensors\", {optimizer = opt})")
add("model:generate", "model:generate(prompt [, {max_new_tokens=100, temperature=1, top_k=, top_p=, seed=, stop_at_eot=true}]) -> text, ids, info",
  "Continues a prompt (a string, a list or tensor of ids, or a list of prompts for a batch) with a key/value cache; " ..
  "returns the new text, its ids and info (tokens, stop reasons, tokens_per_s). Prompts longer than seq_len keep their last " ..
  "seq_len tokens; past seq_len the window slides.",
  "local text = model:generate(\"Once upon a time\", {max_new_tokens = 40, temperature = 0.8, top_k = 40, seed = 1})")
add("model:kv_cache", "model:kv_cache([batch=1]) -> cache", "A key/value cache for incremental decoding with this model.",
  "local c = model:kv_cache(2)")
add("model:free", "model:free()", "Releases the model at once (also a <close> variable).", "model:free()")

add("cache:append", "cache:append(ids [, {all=false, lengths=}]) -> tensor",
  "Runs the model on new tokens (int32 [B,T], or [T] for one row) attending to every cached position; returns the logits " ..
  "[B,V] of the last new position, or [B,T,V] with all=true. lengths (on an empty cache) gives each row's real length for " ..
  "left-padded rows.",
  "local c = model:kv_cache(1)\nlocal logits = c:append(xsa.tensor({15496, 995}, \"int32\"))\nlogits = c:append(xsa.tensor({11}, \"int32\"))")
add("cache:len", "cache:len() -> integer", "Positions held.", "print(c:len())")
add("cache:batch", "cache:batch() -> integer", "Rows.", "print(c:batch())")
add("cache:capacity", "cache:capacity() -> integer", "The most positions it holds (the model's seq_len).", "print(c:capacity())")
add("cache:reset", "cache:reset() -> cache", "Forgets every position.", "c:reset()")
add("cache:free", "cache:free()", "Releases the cache at once.", "c:free()")

----------------------------------------------------------------------------
-- optimizer, files, tokenizer, data

add("xsa.optim.adamw", "xsa.optim.adamw(params [, {lr=1e-3, betas={0.9, 0.999}, eps=1e-8, weight_decay=0.01}]) -> optimizer",
  "AdamW as torch.optim.AdamW (single-tensor path, one parameter group) over a list of tensors or model:parameters(); the defaults are xsa.optim.defaults (xsa.train's too).",
  "local opt = xsa.optim.adamw(model:parameters(), {lr = 1e-3})\nopt:zero_grad(); model:loss(x, y):backward(); opt:step()")
add("optimizer:step", "optimizer:step()", "One AdamW update of every parameter with a .grad.", "opt:step()")
add("optimizer:zero_grad", "optimizer:zero_grad()", "Zero-fills every parameter's .grad.", "opt:zero_grad()")
add("optimizer:free", "optimizer:free()", "Releases the optimizer's state at once.", "opt:free()")
add("xsa.safetensors.save", "xsa.safetensors.save(path, tensors [, metadata])",
  "Writes tensors (name -> tensor, or a list of {name, tensor}) and string/number metadata.",
  "xsa.safetensors.save(\"/tmp/w.safetensors\", {w = xsa.randn(3, 4)}, {step = 3})")
add("xsa.safetensors.load", "xsa.safetensors.load(path) -> tensors, metadata, names", "Reads a safetensors file (raises when damaged).",
  "local t, meta, names = xsa.safetensors.load(\"/tmp/w.safetensors\")")
add("xsa.json.encode", "xsa.json.encode(v [, {indent=true}]) -> string", "Deterministic JSON: sorted keys, integers stay integers, floats round-trip.",
  "print(xsa.json.encode({b = 1, a = 2.5}))")
add("xsa.json.decode", "xsa.json.decode(s) -> value", "Parses JSON; arrays keep their kind (xsa.json.array).", "local v = xsa.json.decode('{\"a\": [1, 2.0]}')")
add("xsa.json.array", "xsa.json.array([t]) -> t", "Marks a table as a JSON array (so {} encodes as []).", "print(xsa.json.encode(xsa.json.array()))")
add("xsa.json.read_file", "xsa.json.read_file(path) -> value | nil, message", "Decodes a JSON file.", "local r = xsa.json.read_file(\"cache/summary/mine.json\")")
add("xsa.mpi.rank", "xsa.mpi.rank() -> integer", "This process's rank, 0-based (0 outside mpirun).", "print(xsa.mpi.rank())")
add("xsa.mpi.size", "xsa.mpi.size() -> integer", "The number of ranks in the job (1 outside mpirun).", "print(xsa.mpi.size())")
add("xsa.mpi.local_size", "xsa.mpi.local_size() -> integer", "The ranks on this node (1 outside mpirun).",
  "print(xsa.mpi.local_size())")
add("xsa.mpi.threads_per_rank", "xsa.mpi.threads_per_rank() -> integer",
  "max(1, online cores / ranks on this node): the BLAS threads that keep a node's ranks from oversubscribing it " ..
  "(the scripts use it unless --threads is given).", "xsa.set_threads(xsa.mpi.threads_per_rank())")
add("xsa.mpi.active", "xsa.mpi.active() -> boolean",
  "true when MPI was started: a launcher (mpirun, srun) started this process and the build has MPI.",
  "print(xsa.mpi.active())")
add("xsa.mpi.built", "xsa.mpi.built() -> boolean", "true when this build has Open MPI.", "print(xsa.mpi.built())")
add("xsa.mpi.barrier", "xsa.mpi.barrier()", "Waits until every rank has called it (sleeping, not polling).",
  "xsa.mpi.barrier()")
add("xsa.mpi.allreduce", "xsa.mpi.allreduce(t [, \"sum\"|\"mean\"]) -> t",
  "Replaces a contiguous float32 tensor by its sum (default) or mean over the ranks, in place (its version " ..
  "counter moves, as with other in-place writes).", "local t = xsa.tensor{1, 2}\nxsa.mpi.allreduce(t, \"mean\")")
add("xsa.mpi.bcast", "xsa.mpi.bcast(t [, root]) -> t", "Copies rank root's (default 0) contiguous float32 tensor " ..
  "into t on every rank, in place.", "local w = xsa.zeros(3)\nxsa.mpi.bcast(w, 0)")
add("xsa.mpi.gather", "xsa.mpi.gather(value) -> list | nil",
  "Every rank's value (anything xsa.json encodes) to rank 0: there a list indexed by rank + 1, nil elsewhere. " ..
  "Values travel as JSON, also in one process.", "local all = xsa.mpi.gather({rank = xsa.mpi.rank()})")
add("xsa.mpi.allgather", "xsa.mpi.allgather(value) -> list",
  "Every rank's value (anything xsa.json encodes) to every rank, as a list indexed by rank + 1.",
  "local names = xsa.mpi.allgather(\"rank\" .. xsa.mpi.rank())")
add("xsa.mpi.sum", "xsa.mpi.sum(numbers) -> list", "A list of numbers summed over the ranks in double precision.",
  "local total = xsa.mpi.sum({loss, rows})")
add("xsa.mpi.allreduce_grads", "xsa.mpi.allreduce_grads(models, weight [, values]) -> list",
  "Data parallelism in one MPI_Allreduce: every model's gradient block and the numbers in values, each rank's " ..
  "times weight (its rows / the batch's), summed over the ranks; the gradients are replaced, the summed values " ..
  "returned.", "local losses = xsa.mpi.allreduce_grads({sa, xm}, rows / batch, {l_sa, l_xsa})")
add("xsa.mpi.abort", "xsa.mpi.abort([message [, code]])",
  "Prints the message with this rank and ends every rank of the job (MPI_Abort; exit outside mpirun). Code " ..
  "1 to 255, default 1.", "xsa.mpi.abort(\"run 3 failed\")")
add("xsa.json.write_file", "xsa.json.write_file(path, v [, opts])", "Encodes v (indented) and writes it atomically.", "xsa.json.write_file(\"/tmp/r.json\", {a = 1})")

add("xsa.data.gpt2_tokenizer", "xsa.data.gpt2_tokenizer() -> tokenizer",
  "The GPT-2 tokenizer of the files xsa.data.tokenizer_files() finds, loaded once per process (xsa.tokenizer.gpt2 is this function).",
  "local tok = xsa.data.gpt2_tokenizer()")
add("xsa.tokenizer.gpt2", "xsa.tokenizer.gpt2() -> tokenizer", "The GPT-2 tokenizer, loaded once per process.", "local tok = xsa.tokenizer.gpt2()")
add("xsa.tokenizer.load", "xsa.tokenizer.load(encoder_json, vocab_bpe) -> tokenizer", "A tokenizer from explicit files.",
  "local tok = xsa.tokenizer.load(\"data/encoder.json\", \"data/vocab.bpe\")")
add("tokenizer:encode", "tokenizer:encode(text [, {special=false}]) -> int32 tensor", "The ids of text (\"<|endoftext|>\" is 50256 only with special=true).",
  "print(tok:encode(\"Hello world\"))  --> 15496 995")
add("tokenizer:encode_table", "tokenizer:encode_table(text [, opts]) -> {ids}", "Like encode, as a plain table.", "print(#tok:encode_table(\"Hello\"))")
add("tokenizer:decode", "tokenizer:decode(ids) -> string", "The exact bytes of ids (tensor or table).", "print(tok:decode({15496, 995}))")
add("tokenizer:count", "tokenizer:count(text) -> integer", "The number of tokens of text.", "print(tok:count(\"Hello world\"))")
add("tokenizer:token", "tokenizer:token(id) -> string", "The bytes of one token.", "print(tok:token(50256))")
add("tokenizer:vocab_size", "tokenizer:vocab_size() -> integer", "50257 for GPT-2.", "print(tok:vocab_size())")
add("tokenizer:eot", "tokenizer:eot() -> integer", "The id of <|endoftext|>.", "print(tok:eot())")
add("tokenizer:identity", "tokenizer:identity() -> string", "A hash of the vocabulary files (token caches record it).", "print(tok:identity())")
add("tokenizer:free", "tokenizer:free()", "Releases the tokenizer at once.", "tok:free()")

add("xsa.data.tinystories", "xsa.data.tinystories{seq_len=64, max_tokens=500000, batch=16, val_fraction=0.1, val_tokens=, seed=0} -> train, val, info",
  "Loaders over TinyStories: stories encoded once (cached), cut into windows of seq_len+1, split 90/10.",
  "local train, val, info = xsa.data.tinystories{seq_len = 64, max_tokens = 100000, batch = 8}")
add("xsa.data.loader", "xsa.data.loader(tokens, {seq_len=, batch=, shuffle=false, seed=0, first_window=0, num_windows=}) -> loader",
  "A loader over windows of an int32 token tensor.", "local l = xsa.data.loader(xsa.arange(1000), {seq_len = 8, batch = 4})")
add("xsa.data.search_dirs", "xsa.data.search_dirs() -> {dirs}", "Where data files are looked for: $XSA_DATA, the checkout's data/, ./data, then an install's data/ beside its modules.",
  "print(table.concat(xsa.data.search_dirs(), \", \"))")
add("xsa.data.read_text", "xsa.data.read_text(path) -> string | nil, message", "A text file's bytes, decompressed when it is xz.",
  "local s = xsa.data.read_text(\"data/tinystories.txt.xz\")")
add("xsa.data.find", "xsa.data.find(names) -> path | nil, message", "The first existing file among names in the search folders.",
  "print(xsa.data.find(\"encoder.json\"))")
add("xsa.data.tokenizer_files", "xsa.data.tokenizer_files() -> encoder_json, vocab_bpe", "Paths of the tokenizer files (raises when missing).",
  "print(xsa.data.tokenizer_files())")
add("xsa.data.tinystories_file", "xsa.data.tinystories_file() -> path", "Path of the TinyStories text.", "print(xsa.data.tinystories_file())")
add("xsa.data.cache_dir", "xsa.data.cache_dir() -> path", "Where token caches go ($XSA_CACHE, else data/).", "print(xsa.data.cache_dir())")
add("loader:batch", "loader:batch(i) -> inputs, targets", "Batch i (1-based) of this epoch's order: int32 [B,T] each.", "local x, y = val:batch(1)")
add("loader:next", "loader:next() -> inputs, targets", "The next batch (a new shuffled epoch after the last).", "local x, y = train:next()")
add("loader:num_batches", "loader:num_batches() -> integer", "Batches per epoch.", "print(val:num_batches())")
add("loader:reset", "loader:reset()", "Back to the first batch of epoch 1.", "train:reset()")
add("loader:epoch", "loader:epoch() -> integer", "The 1-based epoch next() is in.", "print(train:epoch())")
add("loader:window", "loader:window(k) -> integer", "The window number at position k of this epoch's order.", "print(train:window(1))")
add("loader:position", "loader:position() -> integer", "Batches handed out in this epoch.", "print(train._c:position())")
add("loader:free", "loader:free()", "Releases the loader's tokens at once.", "train:free()")

----------------------------------------------------------------------------
-- training, plots, statistics

add("xsa.train.pair", "xsa.train.pair(sa_model, xsa_model, train, val, {steps=, eval_every=, eval_batches=, lr=, warmup=, schedule=, min_lr_frac=, label=, save=, data_parallel=}) -> result",
  "Paired training: the same batch to both models at every step, AdamW each, both evaluated on the same val batches; " ..
  "result.sa/xsa hold train/val curves and final_val, result.improvement_pct the paired gain. data_parallel = true " ..
  "under mpirun: each rank its rows of every batch, one gradient allreduce per step.",
  "local r = xsa.train.pair(sa, xm, train, val, {steps = 60, eval_every = 10})\nprint(r.improvement_pct)")
add("xsa.train.runs", "xsa.train.runs({{model=, label=, optimizer=, baseline=}, ...}, train, val, {steps=, eval_every=, eval_batches=, lr=, warmup=, schedule=, min_lr_frac=, label=, save=, resume=, data_parallel=, layout=}) -> result",
  "Any number of models trained on the same batches, AdamW each (or runs[i].optimizer), all evaluated on the same " ..
  "val batches; result.runs[i] holds run i's train/val curves, step losses and final_val, result.config.models[i] " ..
  "its model config. The options, saving, resuming and data parallelism are xsa.train.pair's; each model gets " ..
  "the numbers it gets trained alone, to the bit. layout = \"pair\" (two runs, SA then XSA) gives a pair's " ..
  "result, save ctx and saved state: xsa.train.pair is this call.",
  "local r = xsa.train.runs({{model = a, label = \"A\"}, {model = b, label = \"B\"}}, train, val, {steps = 60})\nprint(r.runs[2].final_val)")
add("xsa.checkpoint.records", "xsa.checkpoint.records(result) -> records, keys, name",
  "Where a training result keeps its records: result itself with keys sa and xsa (a pair), or result.runs with " ..
  "keys 1..N (xsa.train.runs); name(k) is how a message names record k.",
  "local recs, keys = xsa.checkpoint.records(r)\nprint(recs[keys[1]].final_val)")
add("xsa.checkpoint.loader_position", "xsa.checkpoint.loader_position(loader, taken) -> {epoch, position}",
  "Where a loader stands after `taken` calls of next() from reset(): the arguments of loader:seek.",
  "print(xsa.checkpoint.loader_position(train, 25).epoch)")
add("xsa.checkpoint.check", "xsa.checkpoint.check(state, steps) -> true | false, why",
  "Whether a saved training state (ctx.state, opts.resume) is intact for a run of steps steps: every field a " ..
  "resumed run reads is checked, so a damaged state is reported as such.",
  "print(xsa.checkpoint.check({}, 10))")
add("xsa.checkpoint.state", "xsa.checkpoint.state{result=, status=, model_steps=, active=, loader=, rng=} -> state | nil",
  "The state a run can resume from: the points recorded in full, each model's step losses up to the steps it took " ..
  "(active[k] false keeps a reused baseline's), the loader's position after completed_steps batches, the generator; " ..
  "nil before the step-0 point.", nil)
add("xsa.checkpoint.resume", "xsa.checkpoint.resume(state, result, steps, what, active) -> {elapsed=, train=, eval=} | nil, why",
  "Continues a fresh training result from a saved state: checks that it is intact and was saved by the same run " ..
  "(settings, records), copies the points and (active[k]) the step losses; returns the time already spent.", nil)
add("xsa.state_files.write_group", "xsa.state_files.write_group(base, key, ctx, extra) -> text | nil",
  "Writes the state of a group of runs (xsa.train.runs' save hook ctx: ctx.state, ctx.models, ctx.optimizers) as " ..
  "BASE.resume.json and one model file per run, in the slot the JSON does not name, so a kill leaves a complete state; " ..
  "extra is plain data kept with it.", nil)
add("xsa.state_files.load_group", "xsa.state_files.load_group(base, key, n, steps, say [, attentions]) -> {resume=, models=, optimizers=, extra=} | nil, why",
  "The saved state of a group of n runs for key: models and AdamW loaded and checked against it, or nil and \"none\", " ..
  "or nil and why it is unusable (said through say and removed); attentions[i] is model i's attention function when it is written in Lua " ..
  "(states saved before checkpoints recorded the variant need it).", nil)
add("xsa.state_files.remove_group", "xsa.state_files.remove_group(base, n)",
  "Removes a group's saved state: the JSON, both slots of its n models, temporaries a kill left.", nil)
add("xsa.checkpoint.restore", "xsa.checkpoint.restore(state, loader)",
  "Puts the train loader where it stood after the state's completed_steps batches (loader:seek, else reset and " ..
  "next() again) and the global generator as it was then.", "xsa.checkpoint.restore(state, train)")
add("xsa.train.evaluate", "xsa.train.evaluate(model, loader, n [, data_parallel]) -> number",
  "Mean loss over loader:batch(1..n) under no_grad; with data_parallel under mpirun each rank its rows of " ..
  "every batch, the weighted losses summed over the ranks.",
  "print(xsa.train.evaluate(model, val, 4))")
add("xsa.train.share", "xsa.train.share(rows) -> first, count, weight",
  "This rank's rows of a batch under data parallelism: rank r of K takes floor(r B / K) + 1 .. " ..
  "floor((r + 1) B / K); weight = count / B.", "print(xsa.train.share(16))")
add("xsa.train.lr_at", "xsa.train.lr_at(step, {lr=, steps=, warmup=0, schedule=\"constant\"|\"cosine\", min_lr_frac=0.1}) -> number",
  "The learning rate of update `step` (1-based): linear warmup over `warmup` updates, then constant or a cosine " ..
  "decay to min_lr_frac lr (llm.c's schedule); what xsa.train.pair's schedule options give the optimizers.",
  "print(xsa.train.lr_at(151, {lr = 1e-3, steps = 300, schedule = \"cosine\"}))")
add("xsa.train.improvement", "xsa.train.improvement(sa, xsa) -> number", "100 (sa - xsa) / sa: positive when XSA's loss is lower.",
  "print(xsa.train.improvement(4.0, 3.9))")

add("xsa.plot.figure", "xsa.plot.figure{rows=1, cols=1, width=, height=, title=, font=, footer=, fontscale=} -> figure",
  "A new figure. Its text and lines scale with its width (width / xsa.plot.PAGE_WIDTH, at least 1; fontscale= sets it), " ..
    "so shrunk to a page its text stays readable; footer= is a small line under the panels.",
  "local fig = xsa.plot.figure{cols = 2, title = \"loss\"}")
add("xsa.plot.markup", "xsa.plot.markup(s) -> markup",
  "Text written as gnuplot enhanced text (a_{ii} a subscript, x^2 a superscript); any other text prints as written.",
  "local p = fig:panel{title = xsa.plot.markup(\"mean a_{ii}\")}")
add("xsa.plot.is_markup", "xsa.plot.is_markup(v) -> boolean", "Whether v is xsa.plot.markup text.",
  "print(xsa.plot.is_markup(xsa.plot.markup(\"x^2\")))")
add("xsa.plot.svg_fix_amp", "xsa.plot.svg_fix_amp(svg) -> svg",
  "Writes &amp; for every & that starts no entity (gnuplot's SVG terminal leaves the & of enhanced text bare).",
  "print(xsa.plot.svg_fix_amp(\"<text>R&D</text>\"))")
add("figure:set_footer", "figure:set_footer(text) -> figure", "A small line under the panels, at the right; nil removes it.",
  "fig:set_footer(\"Measured with the OpenBLAS Haswell kernel, 1 thread\")")
add("xsa.plot.show", "xsa.plot.show(fig | ys | xs, ys [, {title=, xlabel=, ylabel=, label=, color=, width=, height=}]) -> nothing | nil, message",
  "Draws in the terminal with gnuplot's dumb terminal, sized to the window ($COLUMNS/$LINES, else the tty); " ..
    "in a Jupyter notebook, the image inline. Returns nothing (so nothing echoes at the REPL); nil and a message without gnuplot.",
  "xsa.plot.show({1, 4, 9, 16, 25})")
add("xsa.plot.animate", "xsa.plot.animate(figs, path [, {delay=10, loop=0}]) -> path", "An animated GIF, one figure per frame.",
  "xsa.plot.animate({fig1, fig2}, \"plots/sweep.gif\")")
add("xsa.plot.escape", "xsa.plot.escape(s) -> string",
  "s with gnuplot's enhanced-text characters escaped: a literal piece inside xsa.plot.markup text.",
  "print(xsa.plot.markup(\"Z_{\" .. xsa.plot.escape(\"a_b\") .. \"}\"))")
add("xsa.plot.gnuplot", "xsa.plot.gnuplot() -> program | nil", "The gnuplot to run ($XSA_GNUPLOT or gnuplot), nil when missing.", "print(xsa.plot.gnuplot())")
add("xsa.plot.render_script", "xsa.plot.render_script(gp_path, fmt, out) -> true | nil, message", "Renders a saved .gp script to another format.",
  "xsa.plot.render_script(\"plots/mine_loss.gp\", \"svg\", \"/tmp/loss.svg\")")
add("xsa.plot.terminal_size", "xsa.plot.terminal_size() -> columns, lines", "The terminal's size: $COLUMNS/$LINES, else stty on the tty, else 80x24.",
  "print(xsa.plot.terminal_size())")
add("figure:panel", "figure:panel{title=, xlabel=, ylabel=, xrange=, yrange=, xtics=, key=, grid=, equal=, zero=, logy=, headroom=} -> panel",
  "Adds the next panel of the grid. headroom: without yrange, room above the data for the key, a share of the data's span.", "local p = fig:panel{xlabel = \"step\", ylabel = \"loss\"}")
add("figure:save", "figure:save(path [, {format=, quiet=}]) -> path [, warnings] | nil, message",
  "Writes NAME.dat and NAME.gp next to path and renders PNG, SVG or GIF (format: from the extension, else png). " ..
  "Returns the image's path, and gnuplot's warnings when it printed any; without gnuplot nil and how to render later. " ..
  "quiet = true: not shown in a notebook even with xsa.plot.show_saved.",
  "fig:save(\"plots/loss.png\")")
add("figure:show", "figure:show([{width=, height=}]) -> nothing | nil, message",
  "Draws the figure in the terminal (gnuplot dumb), sized to the window; works over ssh; in a notebook, inline. " ..
  "Returns nothing (nil and a message without gnuplot).",
  "fig:show()")
add("figure:render", "figure:render(name, dir) -> script, data", "The gnuplot script and data text of the figure.", "local gp, dat = fig:render(\"f\", \"/tmp\")")
add("figure:body", "figure:body(S, data, datafile, block) -> next_block", "Appends the figure's multiplot to a script (used by render and animate).",
  "-- internal to xsa.plot")
add("panel:line", "panel:line(xs, ys [, {label=, color=, width=, dash=, points=}]) -> panel", "A line.", "p:line({1, 2, 3}, {3, 2, 1}, {label = \"SA\"})")
add("panel:points", "panel:points(xs, ys [, {label=, color=, pointsize=, pointtype=}]) -> panel", "Points.", "p:points({1, 2}, {2, 1})")
add("panel:band", "panel:band(xs, lo, hi [, {color=, alpha=0.25, label=}]) -> panel", "The area between two curves.", "p:band({1, 2}, {1, 1}, {2, 3})")
add("panel:errorbars", "panel:errorbars(xs, ys, lo, hi [, {color=, width=, pointsize=, pointtype=, label=}]) -> panel",
  "Markers at (x, y) with vertical bars from lo to hi, e.g. means with their 95% intervals; a non-finite bound draws the marker alone.",
  "p:errorbars({1, 2}, {0.5, 0.8}, {0.2, 0.6}, {0.8, 1.0})")
add("panel:bars", "panel:bars(xs, ys [, {color=, barwidth=0.35, label=, values=}]) -> panel", "Boxes centred on xs, optionally labelled with values.",
  "p:bars({1, 2}, {0.5, -0.2}, {values = \"%.2f\"})")
add("panel:labels", "panel:labels(xs, ys, texts [, {color=, fontsize=, offset=}]) -> panel", "Text at data points.", "p:labels({1}, {2}, {\"peak\"})")
add("panel:vector", "panel:vector(x, y, dx, dy [, {color=, label=, head=true}]) -> panel", "An arrow.", "p:vector(0, 0, 1, 1, {label = \"v\"})")
add("panel:text", "panel:text(x, y, s [, {graph=, align=, fontsize=, color=}]) -> panel", "A label at a position.",
  "p:text(0.5, 0.9, \"note\", {graph = true})")
add("panel:command", "panel:command(s) -> panel", "Any gnuplot command for this panel.", "p:command(\"set logscale x\")")

add("xsa.stats.mean", "xsa.stats.mean(xs) -> number", "The mean.", "print(xsa.stats.mean({1, 2, 3}))")
add("xsa.stats.sd", "xsa.stats.sd(xs) -> number", "The sample standard deviation (n - 1).", "print(xsa.stats.sd({1, 2, 3}))")
add("xsa.stats.quantile", "xsa.stats.quantile(xs, p) -> number", "Quantile of type 7 (R's and numpy's default).", "print(xsa.stats.quantile({1, 2, 3, 4}, 0.5))")
add("xsa.stats.t_cdf", "xsa.stats.t_cdf(x, df) -> number", "Student t distribution function.", "print(xsa.stats.t_cdf(2.0, 4))")
add("xsa.stats.t_quantile", "xsa.stats.t_quantile(p, df) -> number", "Student t quantile.", "print(xsa.stats.t_quantile(0.975, 4))")
add("xsa.stats.t_interval", "xsa.stats.t_interval(xs [, level=0.95]) -> lo, hi", "t interval of the mean.", "print(xsa.stats.t_interval({1.2, 0.8, 1.1}))")
add("xsa.stats.paired_t_p", "xsa.stats.paired_t_p(xs) -> p, t", "Two-sided p of the one-sample t test of mean 0.", "print(xsa.stats.paired_t_p({0.5, 0.7, 0.2}))")
add("xsa.stats.wilcoxon_p", "xsa.stats.wilcoxon_p(xs) -> p, W+", "Exact two-sided signed-rank p.", "print(xsa.stats.wilcoxon_p({0.5, 0.7, 0.2, -0.1}))")
add("xsa.stats.bootstrap_interval", "xsa.stats.bootstrap_interval(xs [, {resamples=10000, level=0.95, seed=0}]) -> lo, hi",
  "Percentile bootstrap of the mean, seeded.", "print(xsa.stats.bootstrap_interval({0.5, 0.7, 0.2}))")
add("xsa.stats.paired_summary", "xsa.stats.paired_summary(sa, xsa [, {diff=\"relative\"|\"absolute\", relative=true, better=\"lower\"|\"higher\", unit=, words=, half_widths=, level=0.95, resamples=10000, seed=0}]) -> summary",
  "Per-seed improvements (relative %, or absolute differences such as steps; lower or higher better) with t and " ..
  "bootstrap intervals, both tests, the seeds a narrower interval needs and a verdict.",
  "print(xsa.stats.paired_summary({3.1, 3.05}, {3.07, 3.03}).verdict)")
add("xsa.stats.chi2_cdf", "xsa.stats.chi2_cdf(x, df) -> number",
  "The chi-square distribution function P(X <= x): the regularized lower incomplete gamma P(df/2, x/2).",
  "print(xsa.stats.chi2_cdf(3.84, 1))")
add("xsa.stats.chi2_quantile", "xsa.stats.chi2_quantile(p, df) -> number",
  "The x with chi2_cdf(x, df) = p, p in (0, 1), by bisection to a relative 1e-12.", "print(xsa.stats.chi2_quantile(0.95, 1))")
add("xsa.stats.sd_upper", "xsa.stats.sd_upper(s, df [, level=0.95]) -> number",
  "The one-sided upper confidence limit of a normal sigma from a sample sd s with df degrees of freedom: " ..
  "s sqrt(df / chi2_quantile(1 - level, df)).", "print(xsa.stats.sd_upper(4.1, 9))")
add("xsa.stats.slope", "xsa.stats.slope(xs, ys) -> number", "The least-squares slope of ys on xs.",
  "print(xsa.stats.slope({0, 1, 2}, {1, 3, 5}))")
add("xsa.stats.holm", "xsa.stats.holm(ps) -> adjusted",
  "Holm's step-down adjusted p-values, in the order given (each at most 1, never below a smaller p's).",
  "print(table.unpack(xsa.stats.holm({0.01, 0.04, 0.03})))")
add("xsa.stats.seeds_needed", "xsa.stats.seeds_needed(sd, half_width [, level=0.95]) -> n | nil, why",
  "The smallest n >= 2 with t((1+level)/2, n-1) sd / sqrt(n) <= half_width: the seeds an interval that narrow needs.",
  "print(xsa.stats.seeds_needed(4.69, 1))")
add("xsa.endpoints.final_loss", "xsa.endpoints.final_loss(steps, losses) -> number",
  "The last point of a validation curve (over the whole val set): the primary endpoint.", "print(xsa.endpoints.final_loss(r.steps, r.sa.val))")
add("xsa.endpoints.mean_loss", "xsa.endpoints.mean_loss(steps, losses) -> number",
  "The area under the curve after step 0 over the run's length (the mean of the points after step 0 when equally spaced).",
  "print(xsa.endpoints.mean_loss({0, 20, 40}, {10, 7, 6}))")
add("xsa.endpoints.crossing_step", "xsa.endpoints.crossing_step(steps, losses, target) -> step | nil, why",
  "The first step at which the loss reaches target, interpolated between evaluation points; nil if never.",
  "print(xsa.endpoints.crossing_step({0, 20, 40}, {10, 7, 6}, 6.5))")
add("xsa.endpoints.escape_step", "xsa.endpoints.escape_step(steps, losses [, level=5.95]) -> step | nil, why",
  "The plateau-escape step: the crossing of the unigram plateau (6.05) minus a margin of 0.1.",
  "print(xsa.endpoints.escape_step(r.steps, r.sa.val))")
add("xsa.endpoints.list", "xsa.endpoints.list([{targets=, escape_level=}]) -> endpoints",
  "The study's endpoints in table order: {key=, kind=\"loss\"|\"step\", label=, value=function(steps, losses)}.",
  "for _, e in ipairs(xsa.endpoints.list()) do print(e.key, e.label) end")
add("xsa.endpoints.paired", "xsa.endpoints.paired(results [, {targets=, escape_level=, endpoints=, level=, resamples=, seed=}]) -> rows",
  "Every endpoint of per-seed xsa.train.pair results compared: per-seed values (steps censored at the last step), " ..
  "censored counts, the positions used and xsa.stats.paired_summary (or a note when no pair is left).",
  "for _, row in ipairs(xsa.endpoints.paired(results)) do print(row.label, row.stats and row.stats.verdict) end")

----------------------------------------------------------------------------
-- generation and help modules

add("xsa.generate.generate", "xsa.generate.generate(model, prompt [, opts]) -> text, ids, info", "model:generate itself.",
  "local text = xsa.generate.generate(model, \"Hi\", {temperature = 0})")
add("xsa.samples.compare", "xsa.samples.compare(paths, prompts [, opts]) -> {models=, prompts=}", "Loads checkpoints and continues each prompt with each.",
  "local r = xsa.samples.compare({\"a.safetensors\", \"b.safetensors\"}, {\"Once upon a time\"}, {seed = 0})")
add("xsa.samples.model_name", "xsa.samples.model_name(model) -> string", "\"SA\" or \"XSA (λ = 1)\" from the model's config.",
  "print(xsa.samples.model_name(xsa.gpt{attention = \"xsa\"}))")
add("xsa.samples.side_by_side", "xsa.samples.side_by_side(cols, width) -> string", "Columns {title=, text=} word-wrapped next to each other.",
  "print(xsa.samples.side_by_side({{title = \"A\", text = \"x\"}, {title = \"B\", text = \"y\"}}, 30))")
add("xsa.samples.wrap", "xsa.samples.wrap(text, width) -> {lines}", "Word-wraps text (newlines kept).", "print(#xsa.samples.wrap(\"a b c\", 3))")
add("xsa.samples.terminal_width", "xsa.samples.terminal_width() -> integer", "$COLUMNS, else the terminal's width, else 100.",
  "print(xsa.samples.terminal_width())")
add("xsa.samples.pair", "xsa.samples.pair(summary, out) -> result | nil, why", "The report's fixed prompts continued by the SA and XSA checkpoints a summary's result names (only files directly inside out).",
  "local r = xsa.samples.pair(xsa.json.read_file(\"/abs/cache/summary/mine.json\"), \"/abs/cache\")")
add("xsa.samples.pair_html", "xsa.samples.pair_html(summary, out) -> html", "The report's text-samples HTML of xsa.samples.pair.", "-- a report section's html hook")
add("xsa.help.help", "xsa.help.help([x])", "Prints the help of x (the global help(x) at the REPL).", "xsa.help.help(\"adamw\")")
add("xsa.help.text", "xsa.help.text([x]) -> string", "The text help(x) prints.", "print(#xsa.help.text(xsa.zeros))")
add("xsa.help.complete", "xsa.help.complete(word) -> {candidates}",
  "What Tab offers for a word: globals, fields after '.', methods after ':' (walked with rawget, nothing evaluated).",
  "print(table.concat(xsa.help.complete(\"xsa.gpt.lo\"), \" \"))")
add("xsa.help.public_names", "xsa.help.public_names([modules]) -> {name = value}", "Every public function and method by qualified name.",
  "local n = 0; for _ in pairs(xsa.help.public_names()) do n = n + 1 end; print(n)")
add("xsa.help.api_index", "xsa.help.api_index() -> string", "The text of doc/api-index.md, generated from these entries.",
  "io.write(xsa.help.api_index())")
add("xsa.help.entry_text", "xsa.help.entry_text(name, entry) -> string", "The printed form of one entry.", "-- used by help()")

----------------------------------------------------------------------------
-- the scripts' modules

add("xsa.args.parse", "xsa.args.parse(argv, spec) -> opts", "Parses flags; prints --help (exit 0) or the error (exit 2).",
  "local o = xsa.args.parse(arg, {name = \"s.lua\", options = {{\"steps\", \"int\", 10, \"steps\"}}})")
add("xsa.args.try_parse", "xsa.args.try_parse(argv, spec) -> opts | nil, message", "Parses flags without exiting.",
  "local o, err = xsa.args.try_parse({\"--steps\", \"3\"}, spec)")
add("xsa.args.help", "xsa.args.help(spec) -> string", "The --help text of a spec.", "io.write(xsa.args.help(spec))")
add("xsa.args.to_argv", "xsa.args.to_argv(opts, spec [, only_given]) -> {argv}", "Flags back as a list.", "print(table.concat(xsa.args.to_argv(o, spec), \" \"))")
add("xsa.cache.key", "xsa.cache.key(config) -> string", "The canonical JSON of a configuration.", "print(xsa.cache.key({b = 1, a = 2}))")
add("xsa.cache.hash", "xsa.cache.hash(s) -> string", "64-bit FNV-1a of s as 16 hex digits.", "print(xsa.cache.hash(\"x\"))")
add("xsa.cache.path", "xsa.cache.path(dir, name, config [, ext=\".json\"]) -> path", "DIR/NAME-HASH.ext.", "print(xsa.cache.path(\"cache\", \"demo\", {n = 1}))")
add("xsa.cache.load", "xsa.cache.load(dir, name, config [, check]) -> result | nil, why", "A cached result (why: \"missing\" or \"corrupt: ...\").",
  "local r = xsa.cache.load(\"cache\", \"demo\", {n = 1})")
add("xsa.cache.store", "xsa.cache.store(dir, name, config, result) -> path", "Writes an entry atomically.", "xsa.cache.store(\"/tmp\", \"demo\", {n = 1}, {v = 2})")
add("xsa.cache.fetch", "xsa.cache.fetch(dir, name, config, compute [, {no_cache=, check=, label=}]) -> result, status, path",
  "The cached result, or compute() stored.", "local r = xsa.cache.fetch(\"/tmp\", \"demo\", {n = 1}, function() return {v = 2} end)")
add("xsa.study.options", "xsa.study.options(defaults [, extra [, skip]]) -> options", "The flags every training script has.",
  "local spec = {name = \"x.lua\", options = xsa.study.options({steps = 100})}")
add("xsa.study.setup", "xsa.study.setup(opts) -> opts", "Threads and absolute output folders after parsing.", "local opts = xsa.study.setup(xsa.args.parse(arg, spec))")
add("xsa.study.data_config", "xsa.study.data_config(opts [, seq_len [, batch [, seed]]]) -> table", "The data part of a configuration; seed: of the batch order (default --seed).", "local dc = xsa.study.data_config(opts)")
add("xsa.study.probe_data_config", "xsa.study.probe_data_config(opts [, seq_len]) -> table",
  "The probe set of parts 5 and 6: the validation windows of the first --probe-tokens tokens in batches of --probe-batch.",
  "local _, val = xsa.study.loaders(xsa.study.probe_data_config(opts))")
add("xsa.study.probe_options", "xsa.study.probe_options(batches) -> options",
  "The flags of a probe set: --probe-batches (default `batches`), --probe-tokens (80000), --probe-batch (16).",
  "local o = xsa.study.options({}, xsa.study.probe_options(8))")
add("xsa.study.parse_seeds", "xsa.study.parse_seeds(text) -> list | nil, why",
  "The seeds of --seeds: \"N\" is 0..N-1, \"3,7,11\" (with a comma) that list.", "print(#xsa.study.parse_seeds(\"5\"))")
add("xsa.study.seed_list", "xsa.study.seed_list(opts) -> list | nil, why",
  "The seeds a run replicates over: --seeds, else --seed alone (both given, or --data-seed with --init-seed over several seeds: an error).",
  "local seeds = xsa.study.seed_list(opts)")
add("xsa.study.seeds_of", "xsa.study.seeds_of(opts, seed) -> data_seed, init_seed",
  "The seeds of the batch order and of the initial weights for one seed (--data-seed and --init-seed hold one of them).",
  "print(xsa.study.seeds_of(opts, 3))")
add("xsa.study.loaders", "xsa.study.loaders(dc) -> train, val", "Loaders of a data configuration.", "local train, val = xsa.study.loaders(dc)")
add("xsa.study.model_config", "xsa.study.model_config(opts [, seq_len [, seed]]) -> table", "The model part of a configuration; seed: of the initial weights (default --seed).", "local mc = xsa.study.model_config(opts)")
add("xsa.study.new_model", "xsa.study.new_model(mc) -> model", "A fresh SA model.", "local m = xsa.study.new_model(mc)")
add("xsa.study.new_pair", "xsa.study.new_pair(mc, lambda) -> sa, xsa", "An SA model and an XSA clone with identical weights.", "local sa, xm = xsa.study.new_pair(mc, 1)")
add("xsa.study.adam_config", "xsa.study.adam_config(opts) -> table", "The training part of a configuration.", "local tc = xsa.study.adam_config(opts)")
add("xsa.study.run_label", "xsa.study.run_label(opts) -> label | nil",
  "The label of a run given flags that change what it computes (--quick, --steps 100, ...; not the folders, --format, " ..
  "--threads, --jobs and the like): \"quick_seeds-2\"; nil for the default run. study.setup puts such a run's " ..
  "default folders under runs/LABEL/.", "print(xsa.study.run_label({given = {quick = true}, quick = true}))")
add("xsa.study.pair_options", "xsa.study.pair_options(train, extra) -> table", "xsa.train.pair's options from a training configuration.",
  "local po = xsa.study.pair_options(tc, {label = \"x\"})")
add("xsa.study.check_pair", "xsa.study.check_pair(result) -> ok, why", "The cache check of a pair result.", "print(xsa.study.check_pair({}))")
add("xsa.study.seed_ranges", "xsa.study.seed_ranges(seeds) -> string",
  "Seeds as ranges: \"0-49\" for 0..49, \"2, 3, 5-7\"; numbers given as strings are read as numbers.",
  "print(xsa.study.seed_ranges({0, 1, 2, 5}))")
add("xsa.study.pct", "xsa.study.pct(x) -> string", "\"+1.80%\" or \"n/a\".", "print(xsa.study.pct(1.8))")
add("xsa.study.compare_words", "xsa.study.compare_words(sa, xsa [, what]) -> string", "The sentence comparing two losses.", "print(xsa.study.compare_words(4.2, 4.1))")
add("xsa.study.default_base", "xsa.study.default_base(root) -> dir", "Where a run's default cache/, plots/ and results/ go: root for a script inside the checkout, else the running script's folder, else the working directory.", "print(xsa.study.default_base(xsa.sys.root()))")
add("xsa.study.md_text", "xsa.study.md_text(s) -> string", "s as plain text in Markdown: pipes, tags, links, images, emphasis, code and autolinks backslash-escaped, line breaks as spaces (record text on its way to a published file).", "print(xsa.study.md_text(\"a|b <i>\"))")
add("xsa.study.md_table", "xsa.study.md_table(headers, rows [, text_cols]) -> string", "A markdown table; the first text_cols columns (default 1) align left, the others right.", "print(xsa.study.md_table({\"a\", \"b\"}, {{1, 2}}))")
add("xsa.study.save_figure", "xsa.study.save_figure(fig, opts, name [, caption]) -> entry", "Saves a figure into the plots folder and says where; caption is what the report writes under it.",
  "xsa.study.save_figure(fig, opts, \"my_fig\")")
add("xsa.study.write_summary", "xsa.study.write_summary(opts, part, summary)", "The summary of a part's latest run (what the report reads).",
  "xsa.study.write_summary(opts, \"mine\", {result = r})")
add("xsa.study.command_line", "xsa.study.command_line() -> string", "The command that ran the script.", "print(xsa.study.command_line())")
add("xsa.study.main", "xsa.study.main(fn)", "Runs fn; Ctrl-C ends with status 130 and no traceback.", "xsa.study.main(function() end)")
add("xsa.study.improvement_bars", "xsa.study.improvement_bars(panel, xs, vals [, width])", "Bars coloured by which model is ahead.",
  "xsa.study.improvement_bars(p, {1, 2}, {0.5, -0.3})")
add("xsa.study.improvement_bars_ci", "xsa.study.improvement_bars_ci(panel, xs, stats [, width])",
  "Improvement bars over seeds: the mean per x (coloured by sign), its 95% t interval and every seed's value as a dot (stats: paired_stats per x).",
  "xsa.study.improvement_bars_ci(p, {1, 2}, {s1, s2}, 0.5)")
add("xsa.study.points_ci", "xsa.study.points_ci(panel, xs, per_x [, {color=, label=, offset=, line=, dash=, values=, fontsize=}]) -> mean, lo, hi",
  "Means over seeds with 95% t error bars and each seed's value as a dot (per_x[i]: the seeds' values at xs[i]).",
  "xsa.study.points_ci(p, {1, 2}, {{0.1, 0.2}, {0.3, 0.25}}, {color = \"#2471A3\"})")
add("xsa.study.loss_curves", "xsa.study.loss_curves(panel, results, kind)",
  "SA and XSA loss curves (kind \"train\" or \"val\") of one seed (the gap shaded) or several (the mean with its 95% band, each seed thin).",
  "xsa.study.loss_curves(p, {r}, \"val\")")
add("xsa.study.seed_improvement_panel", "xsa.study.seed_improvement_panel(fig, stats) -> panel",
  "A panel of each seed's improvement, their mean with its 95% t interval and the verdict.",
  "xsa.study.seed_improvement_panel(fig, xsa.study.paired_stats(sa, xs, seeds))")
add("xsa.study.mean_ci", "xsa.study.mean_ci(values [, level]) -> {n=, mean=, sd=, lo=, hi=}",
  "The mean of the finite values with its 95% t interval (lo, hi nil for one value).", "print(xsa.study.mean_ci({1, 2, 3}).hi)")
add("xsa.study.paired_groups", "xsa.study.paired_groups(runs, n, group_of, seeds) -> groups",
  "The runs of a sweep in n groups (group_of(run, j) -> 1..n): per group its runs, their SA and XSA values (sa_val, xsa_val), means and paired statistics.",
  "local g = xsa.study.paired_groups(runs, 2, function(x) return x.seq_len == 64 and 1 or 2 end, {0, 1})")
add("xsa.study.interval_text", "xsa.study.interval_text(stats) -> string", "\"+0.12 to +3.40\": the t interval of paired statistics, or \"n/a\".",
  "print(xsa.study.interval_text(xsa.study.paired_stats({4, 4.2}, {3.9, 4.1}, {0, 1})))")
add("xsa.plot.number_text", "xsa.plot.number_text(format, x) -> string",
  "xsa.numbers.text: string.format(format, x) without the sign of a value that rounds to zero (\"0.000\", never \"-0.000\"): value labels of bars and points.",
  "print(xsa.plot.number_text(\"%.3f\", -1e-9))")
add("xsa.study.seeds_text", "xsa.study.seeds_text(seeds) -> string", "\"5 seeds\" or \"seed 3\": what a figure's title says of its seeds.",
  "print(xsa.study.seeds_text({0, 1, 2}))")
add("xsa.study.sweep_span", "xsa.study.sweep_span(xs) -> lo, hi, pad, bar_width",
  "The x extent of a sweep over the values xs, with a padding and a bar width that keep bars apart at any spacing.",
  "print(xsa.study.sweep_span({0, 0.5, 1}))")
add("xsa.study.train_config", "xsa.study.train_config(opts, seeds [, extra]) -> table",
  "The training flags a sweep's summary records as its configuration (steps, batch, seq_len, max_tokens, lr, seeds, data_seed, init_seed), plus extra.",
  "print(xsa.json.encode(xsa.study.train_config({steps = 300, batch = 16}, {0, 1})))")
add("xsa.study.ci_text", "xsa.study.ci_text(ci, format) -> string",
  "A mean_ci result as text: \"0.6410 (0.6300 to 0.6520)\", the mean alone without an interval, \"n/a\" without a mean.",
  "print(xsa.study.ci_text(xsa.study.mean_ci({1, 2, 3}), \"%.2f\"))")
add("xsa.study.curve_band", "xsa.study.curve_band(results, model, kind) -> steps, mean, lo, hi",
  "A curve over seeds: per evaluation point the mean of results[i][model][kind] and its 95% t interval.",
  "local steps, m, lo, hi = xsa.study.curve_band(results, \"sa\", \"val\")")
add("xsa.study.paired_stats", "xsa.study.paired_stats(sa, xsa_values, seeds) -> summary",
  "xsa.stats.paired_summary of per-seed final losses with 10,000 bootstrap resamples from seed 0, plus the seeds.",
  "print(xsa.study.paired_stats({4, 4.1}, {3.9, 4.05}, {0, 1}).verdict)")
add("xsa.study.stats_lines", "xsa.study.stats_lines(summary [, what [, hint]]) -> lines",
  "The verdict line, the numbers line (mean, sd, t and bootstrap intervals, p-values, XSA lower in k of N) and the seeds-needed line; with hint, how to get an interval from one seed.",
  "for _, l in ipairs(xsa.study.stats_lines(s)) do print(l) end")
add("xsa.study.seeds_needed_line", "xsa.study.seeds_needed_line(summary) -> string | nil",
  "The seeds a 95% interval of each listed half-width would need at the observed spread (nil for one seed).",
  "print(xsa.study.seeds_needed_line(xsa.stats.paired_summary({4, 4.1, 4.2}, {3.9, 4.1, 4.0})))")
add("xsa.study.endpoint_stats", "xsa.study.endpoint_stats(results, seeds [, {targets=, escape_level=}]) -> rows",
  "xsa.endpoints.paired of per-seed results with 10,000 bootstrap resamples from seed 0; each row's stats.seeds the seeds it used.",
  "local rows = xsa.study.endpoint_stats(results, {0, 1, 2})")
add("xsa.study.endpoint_table", "xsa.study.endpoint_table(rows) -> headers, cells",
  "A table of endpoint_stats rows: means, the mean paired difference, t and bootstrap intervals, p-values, seeds needed, censoring.",
  "print(xsa.study.md_table(xsa.study.endpoint_table(rows)))")
add("xsa.study.endpoint_lines", "xsa.study.endpoint_lines(rows [, prefix]) -> lines",
  "stats_lines of every endpoint_stats row (its note when it has no statistics).",
  "for _, l in ipairs(xsa.study.endpoint_lines(rows)) do print(l) end")
add("xsa.study.curve_sd", "xsa.study.curve_sd(results, model, kind) -> sds",
  "Per evaluation point the sd over seeds of results[i][model][kind] (NaN for one seed).",
  "local sds = xsa.study.curve_sd(results, \"sa\", \"val\")")
add("xsa.study.collect", "xsa.study.collect(list, pick) -> list", "pick(x) of every element, in order.",
  "local finals = xsa.study.collect(results, function(r) return r.sa.final_val end)")
add("xsa.study.layer_mean", "xsa.study.layer_mean(probe, key) -> number", "Mean of a per-layer probe metric.", "print(xsa.study.layer_mean(probe, \"pre_cos\"))")
add("xsa.study.probe", "xsa.study.probe(model, loader, n) -> table", "The probe as JSON-safe data.", "local p = xsa.study.probe(model, val, 2)")
add("xsa.report.build", "xsa.report.build{out=, plots=, folder_flags=} -> html, info", "The report page as a string.",
  "local html, info = xsa.report.build{out = \"cache\", plots = \"plots\"}")
add("xsa.report.write", "xsa.report.write{out=, plots=, output=} -> path, info", "Builds and writes the report atomically.",
  "xsa.report.write{out = \"cache\", plots = \"plots\", output = \"plots/report.html\"}")
add("xsa.report.base64", "xsa.report.base64(s) -> string", "Base64 of s (for inline images).", "print(xsa.report.base64(\"hi\"))")
add("xsa.report.f4", "xsa.report.f4(x) -> string", "x with four decimals, or \"n/a\" when it is not a finite number (for a section's sentences).",
  "print(xsa.report.f4(1 / 3))")
add("xsa.report.stats_words", "xsa.report.stats_words(stats, what, out) -> out",
  "Appends the statement of a paired comparison over seeds (xsa.study.stats_lines) to out as sentences.",
  "local words = xsa.report.stats_words(summary.stats, \"final val loss\", {})")
add("xsa.report.sweep_verdicts", "xsa.report.sweep_verdicts(label [, keep]) -> function(summary, row) -> rows",
  "A report section's published verdicts for a sweep: one row per run of summary.result.runs (those keep(run) accepts, when given), named label(run): row(label, final val loss statistics, mean val loss statistics or nil).",
  "local verdicts = xsa.report.sweep_verdicts(function(r) return \"lambda \" .. r.lambda end)")
add("xsa.report.mean_val_stats", "xsa.report.mean_val_stats(seeds) -> stats | nil",
  "The paired statistics of the mean val loss (the area under the validation curve) of a sweep run's seeds ({seed=, steps=, sa_curve=, xsa_curve=}); nil when a seed has no usable curves.",
  "local st = xsa.report.mean_val_stats(summary.result.runs[1].seeds)")
add("xsa.report.ci", "xsa.report.ci(pair, format) -> string", "\" (95% t interval a to b)\" of {a, b}, or \"\" without one.",
  "print(xsa.report.ci({0.1, 0.3}, \"%.2f\"))")
add("xsa.progress.new", "xsa.progress.new{label=, total=, stream=io.stderr, mode=, width=24} -> bar", "A progress bar.",
  "local bar = xsa.progress.new{label = \"train\", total = 10}")
add("xsa.progress.now", "xsa.progress.now() -> seconds", "A wall clock (~10 ms resolution on Linux).", "local t0 = xsa.progress.now()")
add("xsa.progress.isatty", "xsa.progress.isatty() -> boolean", "Whether stderr is a terminal.", "print(xsa.progress.isatty())")
add("xsa.progress.mode", "xsa.progress.mode() -> \"bar\" | \"log\" | \"live\"", "How progress is shown (live: one line updated in place in a notebook).", "print(xsa.progress.mode())")
add("xsa.progress.duration", "xsa.progress.duration(s) -> string", "\"1h02m\", \"3m04s\", \"12s\".", "print(xsa.progress.duration(125))")
add("xsa.progress.rate", "xsa.progress.rate(x) -> string", "\"850\", \"21.3k\", \"1.20M\".", "print(xsa.progress.rate(21300))")
add("bar:update", "bar:update(step [, text [, rate]])", "Redraws the bar (terminal only).", "bar:update(5, \"loss 3.2\", 5000)")
add("bar:log", "bar:log(line)", "A log line in both modes.", "bar:log(\"evaluating\")")
add("bar:finish", "bar:finish([line])", "Ends the bar line.", "bar:finish(\"done\")")
add("bar:eta", "bar:eta(step) -> seconds | nil", "Estimated time left.", "print(bar:eta(5))")
add("xsa.sys.env", "xsa.sys.env(name) -> string | nil", "An environment variable, nil when unset or empty.", "print(xsa.sys.env(\"HOME\"))")
add("xsa.sys.root", "xsa.sys.root() -> path", "The repository root ($XSA_ROOT, else found from the modules).", "print(xsa.sys.root())")
add("xsa.sys.abspath", "xsa.sys.abspath(p) -> path", "p made absolute against the working directory.", "print(xsa.sys.abspath(\"plots\"))")
add("xsa.sys.shell_quote", "xsa.sys.shell_quote(s) -> string", "s as one single-quoted word for sh.", "print(xsa.sys.shell_quote(\"it's\"))")
add("xsa.sys.execute", "xsa.sys.execute(cmd) -> ok, how, code", "os.execute for a command that reads no terminal, but a SIGINT or SIGTERM meanwhile is passed to it and then to this process, never lost (xsa._proc.run).", "xsa.sys.execute(\"true\")")
add("xsa.sys.installed", "xsa.sys.installed() -> boolean", "Whether this xsa runs from an install (make install, a rock) rather than a checkout.", "print(xsa.sys.installed())")
add("xsa.sys.mkdtemp", "xsa.sys.mkdtemp(prefix) -> path", "A new private folder under $TMPDIR or /tmp (mktemp -d: mkdtemp, mode 0700).", "local d = xsa.sys.mkdtemp(\"mine\")")
add("xsa.sys.mkdir", "xsa.sys.mkdir(dir) -> dir", "mkdir -p; raises on failure.", "xsa.sys.mkdir(\"/tmp/a/b\")")
add("xsa.sys.library_file", "xsa.sys.library_file()",
  "At the top of a Lua file that scripts load but that sits among them: run itself, it prints its leading comment " ..
  "and exits (0 with --help, else 2) instead of silently doing nothing; loaded by another file, it returns.",
  "xsa.sys.library_file()")
add("xsa.sys.exists", "xsa.sys.exists(path) -> boolean", "Whether path is a readable regular file.", "print(xsa.sys.exists(\"README.md\"))")
add("xsa.sys.interrupted", "xsa.sys.interrupted(err) -> boolean", "Whether err is Ctrl-C's \"interrupted!\".", "print(xsa.sys.interrupted(\"x: interrupted!\"))")
add("xsa.sys.traceback_unless_interrupted", "xsa.sys.traceback_unless_interrupted(err) -> err",
  "An xpcall handler adding a traceback to any error but an interrupt.", "xpcall(f, xsa.sys.traceback_unless_interrupted)")
add("xsa.numbers.same", "xsa.numbers.same(a, b) -> boolean",
  "Whether a and b are the same data to the bit: numbers of one subtype and value, equal strings and booleans, tables with the same keys.",
  "print(xsa.numbers.same({1, {2.0}}, {1, {2.0}}))")
add("xsa.numbers.finite", "xsa.numbers.finite(x) -> boolean", "x is a number, not NaN nor infinite.", "print(xsa.numbers.finite(1 / 0))")
add("xsa.numbers.text", "xsa.numbers.text(format, x) -> string",
  "string.format(format, x) without the sign of a value that rounds to zero (\"0.0000\", never \"-0.0000\" or \"+0.00%\"): every number of a table.",
  "print(xsa.numbers.text(\"%+.2f%%\", -1e-9))")
add("xsa.numbers.decimals", "xsa.numbers.decimals(scale, min) -> integer",
  "The decimals that show scale (an interval's half-width, an sd) to two significant digits, at least min, at most 12.",
  "print(xsa.numbers.decimals(0.043, 1))")
group("xsa.show", "what the REPL prints", "A training result or a paired summary (plain tables) as a short summary at " ..
  "the REPL and in the notebook; help(r) names what returned it and its fields.", "print(xsa.show.text(r))")
add("xsa.show.text", "xsa.show.text(value) -> string", "A training result or a paired summary as one line; any other value as tostring gives it.",
  "print(xsa.show.text(xsa.stats.paired_summary({3.1, 3.0, 3.2}, {3.0, 3.0, 3.1})))")
add("xsa.show.line", "xsa.show.line(...) -> string", "The texts of the values, tab-separated: what the REPL prints for a line.",
  "print(xsa.show.line(1, \"a\"))")
add("xsa.show.kind", "xsa.show.kind(value) -> {name=, what=, fields=} | nil",
  "Which function returned a plain-table result (by its fields, read with rawget), and its fields; nil when not recognised.",
  "print(xsa.show.kind({}))")
add("xsa.numbers.all_finite", "xsa.numbers.all_finite(t [, path]) -> true | false, where",
  "Whether every number in a nested table is finite; else the path to the first that is not.", "print(xsa.numbers.all_finite({a = {1, 0 / 0}}))")

----------------------------------------------------------------------------
-- random-number states, loader positions (resumable runs)

add("xsa.get_rng_state", "xsa.get_rng_state() -> string",
  "The whole state of the global generator as a string; xsa.set_rng_state(s) puts it back, so a resumed run draws what the uninterrupted one would have.",
  "local s = xsa.get_rng_state(); local a = xsa.rand(3); xsa.set_rng_state(s); print(xsa.rand(3):equal(a))")
add("xsa.set_rng_state", "xsa.set_rng_state(s)",
  "Restores the global generator from a string of xsa.get_rng_state (anything else is an error).",
  "xsa.set_rng_state(xsa.get_rng_state())")
add("generator:get_state", "generator:get_state() -> string",
  "The generator's whole state as a string, for g:set_state.", "local g = xsa.generator(1); local s = g:get_state()")
add("generator:set_state", "generator:set_state(s) -> generator",
  "Restores a state from g:get_state (or xsa.get_rng_state).", "g:set_state(s)")
add("loader:seek", "loader:seek(epoch, position)",
  "Puts the loader where it was after `position` batches of 1-based `epoch` (that epoch's shuffled order), as a resumed run needs.",
  "train:seek(2, 10); local x, y = train:next()")
add("xsa.train.loader_position", "xsa.train.loader_position(loader, taken) -> {epoch, position}",
  "Where a loader stands after `taken` calls of next() from reset(): the arguments of loader:seek.",
  "print(xsa.train.loader_position(train, 25).epoch)")

----------------------------------------------------------------------------
-- experiments

group("xsa.experiment", "an experiment script's plumbing: flags, cache, checkpoints, resume, figures",
  "xsa.experiment{name = ..., options = ..., config = ...} parses the flags and settles the folders; ex:pair{...} runs a cached, resumable paired SA/XSA training; ex:results(\"mine\") gives another experiment's finished run. Each part script of the study is built on it (doc/study.md).",
  "local ex = xsa.experiment{name = \"mine\", summary = \"my experiment\"}")
add("xsa.experiment.new", "xsa.experiment.new(spec) -> experiment",
  "The same as calling xsa.experiment(spec): spec has name, title, summary, options, quick, config (a table or fn(opts)), script, argv.",
  "local ex = xsa.experiment.new{name = \"mine\"}")
add("xsa.experiment.results", "xsa.experiment.results(name, opts [, {seed=, train=, script=, by=}]) -> result, config | nil, message",
  "The finished paired run of experiment `name` for the flags opts (and one of their seeds), from the cache, or (train = true) computed first by running its script with the same flags.",
  "local r = xsa.experiment.results(\"mine\", ex.opts)")
add("xsa.experiment.pair_config", "xsa.experiment.pair_config(opts, name [, {seed=, seq_len=, lambda=, probe_batches=, probe=}]) -> config",
  "The configuration (the cache key) of a paired run: data (batch order from the seed or --data-seed), model (weights from the seed or --init-seed), training and lambda settings from the flags.",
  "local c = xsa.experiment.pair_config(ex.opts, \"mine\")")
add("xsa.experiment.pair_name", "xsa.experiment.pair_name(name, config) -> string",
  "The cache name of a paired run: NAME-<steps>steps-<seed tag>.", "print(xsa.experiment.pair_name(\"mine\", c))")
add("xsa.experiment.seed_tag", "xsa.experiment.seed_tag(config) -> string",
  "The seed part of a cache name: \"seed3\", or \"init3-data0\" when the weights and the batch order come from different seeds.",
  "print(xsa.experiment.seed_tag(c))")
add("xsa.experiment.pair_quick", "xsa.experiment.pair_quick([extra]) -> table",
  "The --quick settings of a paired run (10 steps, 10k tokens, batch 4), with extra merged in.",
  "local q = xsa.experiment.pair_quick{steps = 20}")
add("xsa.experiment.files", "xsa.experiment.files(dir, name, config) -> table",
  "The files of a cached paired run: entry, checkpoints (init, sa, xsa), the resume state and its model slots.",
  "local f = xsa.experiment.files(\"cache\", \"mine-300steps\", c)")
add("xsa.experiment.ranks", "xsa.experiment.ranks() -> size, rank",
  "The ranks of an mpirun job (1, 0 otherwise), as ex:run divides runs.", "print(xsa.experiment.ranks())")
add("xsa.experiment.run_script", "xsa.experiment.run_script(path, argv)",
  "Runs a script in this process with argv as its arg, as a child `xsa path argv...` would (run_all under " ..
  "mpirun, where a rank's child process is not part of the job).",
  "xsa.experiment.run_script(\"scripts/mine.lua\", {\"--quick\"})")
add("xsa.experiment.part", "xsa.experiment.part(decl, ...) -> decl",
  "A part of a study in one declaration: the experiment's spec plus units(ex) and main(ex, results); run as a script it runs (the units through ex:run), loaded by xsa.experiment.declaration it only returns decl.",
  "return xsa.experiment.part({name = \"mine\", units = function(ex) return ex:seed_units(function(s) return (ex:pair{seed = s}) end) end, main = function(ex, results) print(#results) end}, ...)")
add("xsa.experiment.declaration", "xsa.experiment.declaration(path) -> decl",
  "The declaration of the part in the script at path (xsa.experiment.part), without running it (a study's registry).",
  "local d = xsa.experiment.declaration(\"scripts/mine.lua\")")
add("xsa.experiment.exe", "xsa.experiment.exe() -> path",
  "The xsa executable running this script (to start another part as a child process).", "print(xsa.experiment.exe())")

group("xsa.store", "where an experiment's runs are kept: cache entries and records",
  "A finished run is looked up in the records (xsa.record) before this machine's cache (xsa.cache); a run trained now gets a record. Its methods are an experiment's: ex:cached, ex:recorded, ex:record, ex:refresh.",
  "local f = xsa.store.files(\"cache\", \"mine-300steps-seed0\", xsa.store.cache_config(config))")
add("xsa.store.cache_config", "xsa.store.cache_config(config) -> table",
  "What a cache entry, its checkpoints and saved state are keyed by: the configuration and the data files by content.",
  "print(xsa.cache.path(\"cache\", \"mine-300steps-seed0\", xsa.store.cache_config(config)))")
add("xsa.store.seed_tag", "xsa.store.seed_tag(config) -> string",
  "The seed part of a cache name: \"seed3\", or \"init3-data0\" when the weights and the batch order come from different seeds.",
  "print(xsa.store.seed_tag({data = {seed = 0}, model = {seed = 3}}))")
add("xsa.store.files", "xsa.store.files(dir, name, config) -> table",
  "The files of a cached run: entry, checkpoints (init, sa, xsa), the saved state and its model slots (xsa.checkpoint).",
  "local f = xsa.store.files(\"cache\", \"mine-300steps\", xsa.store.cache_config(c))")
group("xsa.group", "a group of training runs sharing batches as records keep it: each run under its own key",
  "A run's key is its model (attention, and lambda unless SA), data, training and precision, not its part: the same run trained for two parts has one key. A group record (xsa.record's format 2) lists its runs under their keys beside what they share.",
  "for _, r in ipairs(xsa.group.runs(config, xsa.record.data_identity())) do print(r.arm) end")
add("xsa.group.runs", "xsa.group.runs(config, identity) -> {{arm=, key=}} | nil",
  "The runs of a group configuration (data, model, train, lambda, arms; default SA and XSA) in arm order, each with its key table; nil for a configuration of no group.",
  "print(#xsa.group.runs({data = {}, model = {}, train = {}}, {}))")
add("xsa.group.key", "xsa.group.key(config, identity) -> text | nil",
  "A group's key text: its runs' keys in order and the configuration's own fields (not part, data, model, train, lambda, arms).",
  "print(xsa.group.key({data = {}, model = {}, train = {}}, {}))")
add("xsa.group.with_key", "xsa.group.with_key(config) -> text | nil",
  "The key text of what a group configuration asks of its runs beyond training (its own fields: a probe set), as xsa.group.key holds it; nil when it asks nothing.",
  "print(xsa.group.with_key({data = {}, model = {}, train = {}, probe_batches = 8}))")
add("xsa.group.run_key", "xsa.group.run_key(run) -> text", "The key text of one run of xsa.group.runs.",
  "print(xsa.group.run_key(xsa.group.runs({data = {}, model = {}, train = {}}, {})[1]))")
add("xsa.group.split", "xsa.group.split(config, result, identity) -> entries, rest, layout | nil",
  "A group's result as a record keeps it: one entry per run ({arm, key, result, model, probe}), what the group shares, and the layout (\"pair\": result.sa and result.xsa; \"list\": result.runs).",
  "local runs, rest, layout = xsa.group.split(config, r, xsa.record.data_identity())")
add("xsa.group.join", "xsa.group.join(rec) -> result | nil, why",
  "The result of a group record as the trainer returned it, its runs checked against the record's key (order, arms, keys) first.",
  "local r, why = xsa.group.join(xsa.json.decode(text))")
add("xsa.group.variants", "xsa.group.variants(config) -> {name = {code=, version=}} | nil",
  "The Lua variants (xsa.attention.register) among a group's arms with their code's identity; nil when there are none, so keys of built-in groups are unchanged.",
  "print(xsa.group.variants({data = {}, model = {}, train = {}, arms = {\"sa\", \"xsa\"}}))")
group("xsa.attention", "attention variants written in Lua, by name, for caches and records",
  "register(name, f) names a Lua attention function (xsa.gpt{attention = f}) so that an experiment's arms can list it beside \"sa\" and \"xsa\" (ex:group): its runs are keyed by the name and the identity of its code (its bytecode and upvalues), so an edited function is a cache miss, never a stale hit.",
  "xsa.attention.register(\"half\", function(a) return a.y * 0.5 end)\nprint(xsa.attention.get(\"half\"))")
add("xsa.attention.register", "xsa.attention.register(name, f [, {version=}]) -> code",
  "Names Lua function f as an attention variant (again: replaced); returns its code's identity. Refused: a built-in name, a name other than letters, digits and _, a C function, and an upvalue that cannot be identified (a table, a tensor) unless version names what it holds.",
  "local code = xsa.attention.register(\"half\", function(a) return a.y * 0.5 end)")
add("xsa.attention.get", "xsa.attention.get(name) -> attention, {name=, code=, version=} | nil",
  "What xsa.gpt's attention takes for a variant: a built-in's name (and nil), a registered one's function and its identity; an unknown name is an error listing the known ones.",
  "local f, id = xsa.attention.get(\"half\")\nlocal model = xsa.gpt{attention = f}")
add("xsa.attention.registered", "xsa.attention.registered(name) -> {name=, code=, version=} | nil",
  "The identity of a registered Lua variant; nil for a built-in or unknown name.", "print(xsa.attention.registered(\"sa\"))")
add("xsa.attention.code", "xsa.attention.code(f) -> code | nil, upvalue",
  "The identity of a Lua function: FNV-1a 64 of its bytecode without debug information and of its upvalues (values, functions, library names); nil and the upvalue that cannot be identified.",
  "print(xsa.attention.code(function(a) return a.y end))")
add("xsa.attention.clone", "xsa.attention.clone(model, name [, lambda]) -> model",
  "A model with model's weights and variant name's attention (lambda for a built-in one that takes it).",
  "local gated = xsa.attention.clone(xsa.gpt{seed = 0}, \"half\")")
group("xsa.reuse", "a run found by its own key in any record of a results folder, whichever group or part trained it",
  "The index of every group record's runs (every folder, each record checked as xsa.record.all checks it), read once per process and forgotten when a record is written. A run copied into a record from another (a reused baseline) is not a hit: its own record is. Of several records of one run the oldest is chosen.",
  "local hit = xsa.reuse.find(\"results\", xsa.group.run_key(run))\nif hit then print(hit.result.final_val, hit.record.file) end")
add("xsa.reuse.find", "xsa.reuse.find(dir, key) -> {result=, model=, probe=, with=, record=} | nil",
  "The chosen record of the run keyed key (xsa.group.run_key): its result as the trainer gave it, its model, its probe and the key text of what its group asked beyond training (with), and the record it is in.",
  "print(xsa.reuse.find(\"results\", key))")
add("xsa.reuse.all", "xsa.reuse.all(dir, key) -> {hits}",
  "Every record's hit of the run keyed key, the chosen (oldest) first; {} when none.", "print(#xsa.reuse.all(\"results\", key))")
add("xsa.reuse.forget", "xsa.reuse.forget(dir)", "Forgets what was read of dir's records (one was written).",
  "xsa.reuse.forget(\"results\")")
group("xsa.runs", "a group of runs, one per attention arm, as a cached, recorded, resumable entry of an experiment",
  "Its method is an experiment's: ex:group{seed=, arms=, config=, name=, label=, checkpoints=, on_start=, on_point=, after=, accept=, check=} trains the arms (built-in names or registered Lua variants) from one initial model on the same batches (xsa.train.runs); the result lists them in arm order (r.runs). A run that another group's record holds (the same key, any part: xsa.reuse) is not trained again: with all of them recorded nothing trains, with some the others train beside them; accept(i, hit, with, key) -> hit | nil decides whether a found run serves (default: when its group asked the same probe set). after(r, {models=, labels=, train=, val=, reused=}) runs before the entry is stored (probes: r.probes in arm order); under mpirun --data-parallel every rank trains the group together. ex:pair is a group of two on the same path (xsa.runs.run).",
  "xsa.attention.register(\"half\", function(a) return a.y * 0.5 end)\nlocal r = ex:group{seed = 0, arms = {\"sa\", \"half\"}}")
add("xsa.runs.start", "xsa.runs.start(config, f, key, say [, label [, fresh]]) -> runs, saved",
  "The runs of a group for xsa.train.runs ({label=, model=, optimizer=}): from its saved state beside the cache " ..
  "entry f (said through say; never with fresh), else the arms of one new initial model; label(arm) names a run.", nil)
add("xsa.runs.run", "xsa.runs.run(ex, p) -> result, status, entry",
  "The one path of ex:group and ex:pair: the record, else the cache entry, else trained through xsa.train.runs " ..
  "(resumed from a saved state; data-parallel under mpirun with --data-parallel), stored and recorded. p names the " ..
  "entry (name, config, keyed, f, label, what, layout, check, record_check) and what is the group's own (start, " ..
  "save, finish, remove_state, decorate, on_start, on_point).", nil)
add("xsa.runs.check", "xsa.runs.check(result) -> true | false, why",
  "Whether a result is a finished group's (xsa.train.runs): done, every run with a final val loss and, when it kept its evaluation steps, a train and a val point at each; every number finite.",
  "print(xsa.runs.check({status = \"done\", runs = {}}))")
add("xsa.record.legacy_key", "xsa.record.legacy_key(config [, identity]) -> text",
  "The key of a format 1 record: the whole configuration (its part too), the data files by content, the precision.",
  "print(xsa.record.legacy_key({n = 1}))")
add("xsa.record.build", "xsa.record.build(part, name, config, result, provenance [, identity]) -> record",
  "The record as written: a group's (format 2, each run under its own key) when config and result are a group's, else format 1.",
  "local rec = xsa.record.build(\"mine\", \"mine-seed0\", {n = 1}, {v = 2}, xsa.record.provenance())")
add("xsa.record.path", "xsa.record.path(dir, record) -> path", "Where a record is written: DIR/PART/NAME-KEY-STAMP.json.",
  "print(xsa.record.path(\"results\", rec))")
group("xsa.provenance", "where and with what a record's numbers were computed, and its check",
  "Engine, commit, BLAS kernel and threads, float32 GEMM library, lm_head blocking, CPU, load and date; none of it is in a record's key (xsa.record also gives these under their older names).",
  "print(xsa.provenance.blas_text(xsa.provenance.now()))")
add("xsa.provenance.now", "xsa.provenance.now() -> table", "This process's provenance: what a record written now says of where it ran.",
  "print(xsa.provenance.now().cpu)")
add("xsa.provenance.commit", "xsa.provenance.commit() -> hex | \"unknown\"", "The checkout's commit, read from .git (no git process).",
  "print(xsa.provenance.commit())")
add("xsa.provenance.blas_text", "xsa.provenance.blas_text(p) -> text",
  "The BLAS of a provenance in words: the OpenBLAS kernel, another float32 GEMM library, the lm_head's blocking when named.",
  "print(xsa.provenance.blas_text({blas = \"Haswell\"}))")
add("xsa.provenance.valid_date", "xsa.provenance.valid_date(date) -> true | false, why",
  "Whether a date is YYYY-MM-DDTHH:MM:SSZ of the calendar, not before xsa.provenance.FIRST_DATE nor a day ahead of now.",
  "print(xsa.provenance.valid_date(\"2026-12-02T10:00:00Z\"))")
add("xsa.provenance.valid", "xsa.provenance.valid(p) -> true | false, why",
  "Whether a record's provenance is typed as the published files print it: named strings, threads a positive integer, a real date.",
  "print(xsa.provenance.valid(xsa.provenance.now()))")
group("xsa.pair", "a paired SA/XSA training run as a cached, recorded, resumable entry of an experiment",
  "ex:pair{...} trains (or reads) the pair, a group of two (xsa.runs.run, xsa.train.runs with layout \"pair\"); ex:pair_config and ex:results give configurations and another experiment's finished pair. xsa.experiment re-exports the functions under their older names.",
  "local r, status, entry = ex:pair{seed = 0, checkpoints = true}")
add("xsa.pair.quick", "xsa.pair.quick([extra]) -> table",
  "The --quick settings of a paired run (10 steps, 10k tokens, batch 4), with extra merged in.", "local q = xsa.pair.quick{steps = 20}")
add("xsa.pair.config", "xsa.pair.config(opts, name [, {seed=, seq_len=, lambda=, probe_batches=, probe=}]) -> config",
  "The configuration (the cache key) of a paired run of experiment `name`: data, model, training and lambda from the flags.",
  "local c = xsa.pair.config(ex.opts, \"mine\")")
add("xsa.pair.name", "xsa.pair.name(name, config) -> string",
  "The cache name of a paired run: NAME-<steps>steps-<seed tag>.", "print(xsa.pair.name(\"mine\", c))")
add("xsa.pair.results", "xsa.pair.results(name, opts [, {seed=, train=, script=, by=}]) -> result, config | nil, message",
  "The finished paired run of experiment `name` for the flags opts, from the cache, or (train = true) computed first by running its script with the same flags.",
  "local r = xsa.pair.results(\"mine\", ex.opts, {script = \"mine.lua\"})")
group("xsa.executor", "where an experiment's units run: in this process, in --jobs children, over MPI ranks",
  "Every rank enters executor.run with the same units; each unit is computed once somewhere and stored, then read back in order, so the results are one process's whatever ran where.",
  "local results, gone = xsa.executor.run(ex, units, {})")
add("xsa.executor.run", "xsa.executor.run(ex, units [, {handler=, skip=}]) -> results, left_out",
  "The results of the units by index, each computed once: serially, with --jobs in child processes, under mpirun over the ranks (then read back on every rank); a --worker child runs its --unit and exits.",
  "local results = xsa.executor.run(ex, ex:seed_units(function(s) return s end))")
add("xsa.executor.ranks", "xsa.executor.ranks() -> size, rank",
  "The ranks of an mpirun job (1, 0 otherwise), as the executor divides units.", "print(xsa.executor.ranks())")
add("xsa.executor.exe", "xsa.executor.exe() -> path",
  "The xsa executable running this script (to start children of it).", "print(xsa.executor.exe())")
add("xsa.executor.worker_status", "xsa.executor.worker_status(code) -> kind [, words]",
  "What a --jobs worker's exit status means: \"ok\", \"interrupted\" (130 or none), \"crashed\" (a signal), \"failed\".",
  "print(xsa.executor.worker_status(137))")
add("xsa.state_files.remove_stale_temps", "xsa.state_files.remove_stale_temps(files)",
  "Removes the temporary files of a saved state's atomic writes that a SIGKILL interrupted (files: xsa.store.files).",
  "xsa.state_files.remove_stale_temps(xsa.store.files(\"cache\", \"mine\", key))")
add("xsa.state_files.remove_files", "xsa.state_files.remove_files(files)",
  "Removes a run's saved state: the JSON, both slots' models, stale temporaries.",
  "xsa.state_files.remove_files(xsa.store.files(\"cache\", \"mine\", key))")
add("xsa.state_files.write_files", "xsa.state_files.write_files(files, key, ctx) -> words | nil",
  "Writes a save hook's ctx.state and models into the free slot, then the JSON naming it (atomically), then removes the other slot: a kill at any moment leaves a complete state.",
  "save = function(res, st, ctx) return xsa.state_files.write_files(f, key, ctx) end")
add("xsa.state_files.load_files", "xsa.state_files.load_files(files, key, steps, say) -> state | nil, why",
  "The saved state of a run ({resume=, sa=, xsa=, sa_opt=, xsa_opt=}), or nil and \"none\", or nil and why it is unusable (said through say and removed).",
  "local saved = xsa.state_files.load_files(f, key, 300, print)")
add("xsa.state_files.write_partial", "xsa.state_files.write_partial(files, config, result, ctx) -> paths",
  "What an unfinished run leaves for inspection: its models (with AdamW) and the result so far as -atN files.",
  "save = function(res, st, ctx) if st == \"nan\" then return xsa.state_files.write_partial(f, config, res, ctx) end end")

group("xsa.options", "the check of options tables, and \"did you mean\"",
  "The one check every options table of xsa's Lua functions goes through: unknown keys are errors naming " ..
  "the nearest known option (edit distance), walked raw so no metamethod of the table runs.",
  "print(pcall(xsa.options.check, \"f\", {stepz = 3}, {\"steps\"}))")
add("xsa.options.check", "xsa.options.check(fn, opts, allowed [, level]) -> opts",
  "Raises \"FN: unknown option 'k' (did you mean 'x'?)\" for a key not in the list allowed; returns opts, or {} for nil.",
  "local o = xsa.options.check(\"mine\", {steps = 3}, {\"steps\", \"lr\"})")
add("xsa.options.suggest", "xsa.options.suggest(word, candidates) -> string | nil",
  "The candidate nearest to word (Damerau-Levenshtein, case and -/_ ignored), or nil when none is close.",
  "print(xsa.options.suggest(\"stepz\", {\"steps\", \"lr\"}))")
add("xsa.options.unknown", "xsa.options.unknown(what, name, candidates) -> string",
  "The message for an unknown name: WHAT 'name' (did you mean 'x'?), or the known names.",
  "print(xsa.options.unknown(\"unknown name\", \"reprot\", {\"train\", \"report\"}))")
add("xsa.options.distance", "xsa.options.distance(a, b) -> integer",
  "The optimal-string-alignment edit distance of two strings (insertions, deletions, substitutions, swaps).",
  "print(xsa.options.distance(\"lamda\", \"lambda\"))")
group("xsa.text", "display width, wrapping and padding of UTF-8 text",
  "Terminal text by characters, never bytes: widths in display columns (wide characters 2, accents 0), " ..
  "wrapping and cutting between whole characters, padding that lines columns up.",
  "for _, l in ipairs(xsa.text.wrap(\"λ is lambda, 中 is wide\", 10)) do print(xsa.text.pad(l, 10) .. \"|\") end")
add("xsa.text.width", "xsa.text.width(s) -> integer", "The display width of s in terminal columns.",
  "print(xsa.text.width(\"中文\"))")
add("xsa.text.wrap", "xsa.text.wrap(s, width) -> {lines}",
  "Lines of at most width columns, broken at spaces (long words between characters); newlines kept.",
  "print(#xsa.text.wrap(\"a b c\", 3))")
add("xsa.text.pad", "xsa.text.pad(s, width) -> string", "s followed by spaces up to width columns.",
  "print(xsa.text.pad(\"λ\", 3) .. \"|\")")
add("xsa.text.cut", "xsa.text.cut(s, width) -> string", "The longest prefix of whole characters that fits in width columns.",
  "print(xsa.text.cut(\"中文字\", 5))")
add("xsa.data.max_text_bytes", "xsa.data.max_text_bytes([n]) -> integer",
  "The limit on a decompressed text (default 256 MiB, or $XSA_MAX_TEXT_BYTES); sets it to n bytes first when given. " ..
  "An .xz that would expand past it is refused before decoding.",
  "print(xsa.data.max_text_bytes())")
add("xsa.plot.gp_string", "xsa.plot.gp_string(s) -> string",
  "s as a gnuplot double-quoted literal that gnuplot reads back byte for byte (backquotes, quotes, " ..
  "backslashes and control bytes escaped; a NUL byte raises).",
  "print(xsa.plot.gp_string(\"a`b\"))")
add("xsa.train.check_resume", "xsa.train.check_resume(state, steps) -> true | false, why",
  "Whether a saved training state (ctx.state, opts.resume) is intact for a run of steps steps.",
  "print(xsa.train.check_resume({}, 10))")

return D

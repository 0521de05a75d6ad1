/*
 * l_bind.h: what the Lua binding files share. Not installed; not for C users
 * of libxsa (they include core/xsa.h).
 *
 * One l_*.c file per Lua table or userdata type, each registering only its
 * own functions (as Lua keeps one library per file: liolib.c is io):
 *   l_init.c        luaopen_xsa: the xsa table, one field per library (linit.c)
 *   l_base.c        the xsa table's own functions (lbaselib.c)
 *   l_tensor.c      the tensor type          l_generator.c  the generator type
 *   l_nn.c          xsa.nn                   l_json.c       xsa.json
 *   l_safetensors.c xsa.safetensors
 *   l_gpt.c         xsa.gpt, the model type  l_optim.c      xsa.optim, the AdamW type
 *   l_attention.c   a model's attention written in Lua (for l_gpt.c, l_generate.c)
 *   l_generate.c    the kv_cache type, generation (model:generate, xsa.gpt.sample)
 *   l_bpe.c         xsa._tokenizer, the tokenizer type
 *   l_data.c        xsa._data, the loader type
 *   l_mpi.c         xsa.mpi (over core/comm.h: the only file that asks for MPI)
 *   l_proc.c        xsa._proc, a shell command that signals reach (os.execute's do not)
 *   l_bind.c        the helpers below (and the scratch box type)
 * main.c is the executable, not a binding.
 *
 * Open functions: a library's xsa_lua_open_NAME creates the metatables of
 * the types its functions construct and pushes its table (returns 1);
 * l_init.c stores it in the xsa table. A type's open function creates its
 * metatable and pushes nothing (returns 0).
 *
 * ---- The binding rules: every function must survive a hostile script ----
 * (tests/test_hostile.lua calls every function and method with hostile
 * arguments; tests/fuzz/fuzz_lua_api.c drives the API from fuzzer bytes.)
 *
 * 1. Lua can run, and free any object (t:free(), model:free(), ...), during
 *    any call that can run Lua: metamethods (luaL_len -> __len, lua_getfield
 *    / lua_gettable -> __index, luaL_tolstring -> __tostring), callbacks
 *    (a loader's methods), and every call that allocates on the Lua heap
 *    (pushing a string/userdata/table, number-to-string conversion by
 *    luaL_checkstring, lua_gc, luaL_checkstack), because an allocation can
 *    run a GC step and with it any pending __gc finalizer.
 *    So a C pointer to a Lua-owned object (tensor, model, tokenizer, loader,
 *    optimizer) is valid only until the next such call. Either
 *      - read all Lua arguments first (options tables, shapes, numbers,
 *        strings) and take the C pointers last, right before the core call; or
 *      - re-fetch the pointer (xsa_lua_checktensor & co. raise "attempt to use
 *        a freed ...") after every call that can run Lua; or
 *      - hold a reference of your own for the whole call:
 *        xsa_lua_pintensor / xsa_lua_newtensorlist (tensors), or a box holding
 *        a retained model (l_gpt.c).
 *    Pointers into such an object count too (t->shape, a model's config or
 *    parameter names): copy what you need before the next allocation
 *    (t:shape(), model:config()); report memory to the collector (lua_gc)
 *    after the last use of the object. Strings and values a C array points
 *    into must be anchored on the stack (or in a table on the stack), never
 *    only in a user table that Lua code may change.
 * 2. Lists and shapes are read raw (lua_rawlen, lua_rawgeti), so no user
 *    code runs while they are copied: xsa_lua_readshape.
 * 3. Numbers from Lua are validated before they are converted or used:
 *    counts, sizes and indices are integer-valued and in range
 *    (xsa_lua_checkcount: 2.5, NaN, inf and 2^62 are refused, not truncated
 *    or wrapped); every size computed from user numbers uses
 *    overflow-checked arithmetic (compare against a bound with a division,
 *    never multiply or add first); 1-based -> 0-based conversions check the
 *    range before subtracting (math.mininteger - 1 overflows).
 * 4. Floats stored as float32 in the core (lambda, lr, eps, ...) must be
 *    finite AS A FLOAT: |x| <= FLT_MAX (xsa_lua_checkfloat32,
 *    xsa_lua_f32field); 1e300 is finite as a double and inf as a float.
 * 5. Validate before dividing: a size-0 last dimension (C, V) is refused in
 *    the binding before any core op divides by it.
 * 6. Trust nothing a user can assign: a tensor's .grad may be nil, another
 *    tensor, non-contiguous or of another shape by the time it is used;
 *    check it where it is used (the model's loss backward:
 *    core/autograd_gpt.c), and refuse
 *    what can never be right at assignment (wrong shape or dtype, a
 *    non-contiguous or expanded tensor).
 * 7. Files: a cache path never equals its source (the core refuses it:
 *    core/data.c); a binding never opens a file for writing that it was
 *    asked to read.
 * 8. Errors are Lua errors with a message, raised through luaL_error & co.;
 *    C buffers live in boxes (xsa_lua_newbox) so an error leaks nothing.
 *    Out of scope: the debug library (debug.setmetatable, debug.getlocal
 *    on C frames, debug.sethook) can break any of the above.
 */
#ifndef XSA_L_BIND_H
#define XSA_L_BIND_H

#include <lauxlib.h>
#include <lua.h>

#include "../core/xsa.h"

#define XSA_TENSOR_MT "xsa.tensor"

/* ---- l_bind.c ------------------------------------------------------------ */

/* Raises a Lua error with xsa_last_error() prefixed by nothing: core
 * messages already name the function. */
int xsa_lua_corefail(lua_State *L);
/* A file's text from the core (malloc'd, consumed; NULL after a failure):
 * pushes it as a string and returns 1, or pushes nil and xsa_last_error()
 * and returns 2 (luaL_fileresult's convention). */
int xsa_lua_textresult(lua_State *L, char *text, size_t n);
/* Writes the string at idx to path atomically (xsa_atomic_write); pushes
 * true and returns 1, or raises the core's error. */
int xsa_lua_writeresult(lua_State *L, const char *path, int idx);
/* Pushes a box (a userdata of type "xsa.box") and returns its slot, NULL at
 * first. Whatever the caller stores there is freed by free_fn when the box
 * is collected, so a Lua error cannot leak it; set the slot back to NULL to
 * take it out again. */
void **xsa_lua_newbox(lua_State *L, void (*free_fn)(void *));
/* Creates the metatable `name` of a userdata type (as liolib.c's
 * createmeta): the metamethods `meta`, and __index a new table of
 * `methods`. Leaves the stack as it was. */
void xsa_lua_newtype(lua_State *L, const char *name, const luaL_Reg *meta,
                     const luaL_Reg *methods);
/* Options tables. Errors read "FN: message" (options tables are read by
 * several functions and constructors are called through __call, where
 * argument numbers would mislead). */
int xsa_lua_opterror(lua_State *L, const char *fn, const char *msg);
/* The finite number at the top of the stack (the value of option `key`). */
double xsa_lua_numfield(lua_State *L, const char *fn, const char *key);
/* The same, also finite as a float32 (|x| <= FLT_MAX): for values the core
 * stores or computes with as float. */
double xsa_lua_f32field(lua_State *L, const char *fn, const char *key);
/* The integer-valued number in [min, max] at the top of the stack. */
int64_t xsa_lua_countfield(lua_State *L, const char *fn, const char *key, int64_t min, int64_t max);

/* ---- numbers from Lua (rule 3 and 4 above) ------------------------------- */

/* The integer-valued number at arg in [min, max] (an integer, or a float
 * with an exact integer value), or a "bad argument" error naming `what`:
 * 2.5, NaN, inf, 1e300 and values out of range are refused. */
int64_t xsa_lua_checkcount(lua_State *L, int arg, int64_t min, int64_t max, const char *what);
/* xsa_lua_checkcount, or dflt when arg is none or nil. */
int64_t xsa_lua_optcount(lua_State *L, int arg, int64_t dflt, int64_t min, int64_t max,
                         const char *what);
/* The number at arg, finite as a float32 (|x| <= FLT_MAX), as a double. */
double xsa_lua_checkfloat32(lua_State *L, int arg, const char *what);
/* xsa_lua_checkfloat32, or dflt when arg is none or nil. */
double xsa_lua_optfloat32(lua_State *L, int arg, double dflt, const char *what);

/* ---- shapes and tensor references (rules 1 and 2) ------------------------ */

typedef struct {
    int ndim;
    int64_t shape[XSA_MAX_DIMS];
} xsa_lua_shape;
/* Sizes from args [first, last]: one table {2, 3} (read raw: no __len or
 * __index runs) or integers 2, 3. Each is an integer in [0, XSA_MAX_NUMEL]
 * (or -1 when allow_m1, for view/reshape/expand), at most XSA_MAX_DIMS of
 * them; the product of the sizes other than -1 is at most XSA_MAX_NUMEL.
 * Runs no Lua code (errors aside). */
void xsa_lua_readshape(lua_State *L, int first, int last, int allow_m1, xsa_lua_shape *sp);
/* Pushes a hidden tensor box holding a new reference to the tensor at idx
 * and returns the tensor: it stays valid until the box is popped, even if
 * Lua code frees the tensor's own box (t:free()). Raises for a freed tensor
 * or a non-tensor. */
xsa_tensor *xsa_lua_pintensor(lua_State *L, int idx);
/* Pushes a box owning an array of n tensor references (all NULL at first)
 * and returns the array: store xsa_tensor_retain(t) in it; every non-NULL
 * entry is released when the box is collected. */
xsa_tensor **xsa_lua_newtensorlist(lua_State *L, int n);
/* Every key of the options table at arg must be in `allowed` (NULL-ended),
 * walked with lua_next (no metamethod runs); an unknown key raises "FN:
 * unknown option 'k' (did you mean 'x'?)" with the nearest allowed name by
 * edit distance, or "(known: a, b, ...)" when none is close: the same rule
 * and measure as xsa.options.check for the Lua modules (lua/xsa/options.lua).
 * Options that contradict each other are refused by the binding that reads
 * them (l_gpt.c: lambda with SA attention). */
void xsa_lua_checkkeys(lua_State *L, const char *fn, int arg, const char *const *allowed);

/* ---- l_base.c: the xsa table's own functions ----------------------------- */

/* Pushes the xsa table with its own functions, and adds the generator's
 * rand, randn and randint (xsa.rand(g, ...) as g:rand(...)) to its type. */
int xsa_lua_open_base(lua_State *L);

/* ---- l_tensor.c: the tensor type ----------------------------------------- */

/* Creates the tensor's metatable (XSA_TENSOR_MT); pushes nothing. */
int xsa_lua_open_tensor(lua_State *L);
/* l_size.c: a list of n dimensions with the metatable "xsa.size" (prints as xsa.size{2, 3}) */
void xsa_lua_pushsize(lua_State *L, int n, const int64_t *v);
/* The tensor at idx or a "bad argument" error. Raises "attempt to use a freed
 * tensor" for one released with :free() / <close>. */
xsa_tensor *xsa_lua_checktensor(lua_State *L, int idx);
xsa_tensor *xsa_lua_testtensor(lua_State *L, int idx); /* NULL if not a tensor */
/* Pushes a userdata owning the reference `t` (steals it). If t is NULL,
 * raises a Lua error with xsa_last_error(). */
void xsa_lua_pushtensor(lua_State *L, xsa_tensor *t);
/* The integer at arg (int64) or a "bad argument" error. */
int64_t xsa_lua_checkint(lua_State *L, int arg);
/* A 1-based (or negative, from the end) dimension argument to the core's
 * 0-based one; `extra` is 1 where one past the end is allowed (unsqueeze,
 * stack). */
int xsa_lua_checkdim(lua_State *L, int arg, int ndim, int extra);
/* t:matmul(b) / t:allclose(b [, rtol [, atol]]), also registered as
 * xsa.matmul / xsa.allclose by l_base.c. */
int xsa_lua_tensor_matmul(lua_State *L);
int xsa_lua_tensor_allclose(lua_State *L);

/* ---- l_generator.c: the generator type ----------------------------------- */

#define XSA_LUA_GENERATOR_MT "xsa.generator"
/* Creates the generator's metatable; pushes nothing. */
int xsa_lua_open_generator(lua_State *L);
/* The generator at idx, or NULL if it is not one. */
xsa_rng *xsa_lua_testgenerator(lua_State *L, int idx);
/* Pushes a new generator seeded with seed. */
void xsa_lua_pushgenerator(lua_State *L, uint64_t seed);
/* xsa.get_rng_state() / xsa.set_rng_state(s): the global generator's state. */
int xsa_lua_get_rng_state(lua_State *L);
int xsa_lua_set_rng_state(lua_State *L);

/* ---- the libraries: each pushes its table -------------------------------- */

int xsa_lua_open_nn(lua_State *L);          /* l_nn.c: xsa.nn */
int xsa_lua_open_json(lua_State *L);        /* l_json.c: xsa.json */
int xsa_lua_open_safetensors(lua_State *L); /* l_safetensors.c: xsa.safetensors */
int xsa_lua_open_gpt(lua_State *L);         /* l_gpt.c: xsa.gpt and the model type */
int xsa_lua_open_optim(lua_State *L);       /* l_optim.c: xsa.optim and the AdamW type */
int xsa_lua_open_bpe(lua_State *L);         /* l_bpe.c: xsa._tokenizer and its type */
int xsa_lua_open_data(lua_State *L);        /* l_data.c: xsa._data and the loader type */
int xsa_lua_open_text(lua_State *L);        /* l_text.c: xsa._text */
int xsa_lua_open_proc(lua_State *L);        /* l_proc.c: xsa._proc */
int xsa_lua_open_mpi(lua_State *L);         /* l_mpi.c: xsa.mpi */
/* l_json.c: json.encode(value [, indent]) and json.decode(text), for l_mpi.c
 * (gather sends JSON text between ranks). */
int xsa_lua_json_encode(lua_State *L);
int xsa_lua_json_decode(lua_State *L);

/* l_optim.c: the optimizer at idx or a "bad argument" error ("attempt to
 * use a freed optimizer" after :free()). */
xsa_adamw *xsa_lua_checkadamw(lua_State *L, int idx);
/* l_optim.c: pushes an optimizer userdata holding NULL and returns its slot:
 * store the optimizer there and the userdata owns it (freed by its __gc). */
xsa_adamw **xsa_lua_newadamw(lua_State *L);
/* l_nn.c: the Lua names of the XSA_NN_PROBE_N attention probe metrics (nn.h
 * order), for xsa.nn.attention and model:probe. */
extern const char *const xsa_lua_probe_names[XSA_NN_PROBE_N];
/* l_gpt.c: the model at idx or a "bad argument" error ("attempt to use a
 * freed model" after :free()). */
#define XSA_LUA_GPT_MT "xsa.gpt"
xsa_gpt *xsa_lua_checkgpt(lua_State *L, int idx);
/* l_generate.c, after l_gpt.c's type exists: creates the kv_cache type,
 * adds model:kv_cache([B]) and model:generate(prompt [, opts]) to the
 * model's type and sample, sample_probs and generate_ids to the xsa.gpt
 * table at the top of the stack (pushes nothing). */
int xsa_lua_open_generate(lua_State *L);
/* l_attention.c: an attention written in Lua (xsa.gpt{attention = f}).
 *   install: gives the model at gidx the function at fidx.
 *   push: pushes m's function and returns 1, or 0 when it has none.
 *   busy: 1 while m's function runs (its model is halfway through a forward).
 *   enter: before a core call that can run m's forward: raises when busy,
 *     pins m (pushes a box; nil for a model without a function) and hands
 *     the function this thread; returns m. leave: after it (the thread is no longer the function's). */
void xsa_lua_attention_install(lua_State *L, int fidx, int gidx);
int xsa_lua_attention_push(lua_State *L, const xsa_gpt *m);
int xsa_lua_attention_busy(const xsa_gpt *m);
xsa_gpt *xsa_lua_attention_enter(lua_State *L, xsa_gpt *m, const char *what);
void xsa_lua_attention_leave(xsa_gpt *m);
/* Through lua/xsa/attention.lua (its _lookup, _checkpoint_meta, _checkpoint_attention):
 *   lookup: the string at idx as a registered variant's name: pushes its
 *     function and returns 1, else pushes the registered names as a
 *     message lists them ("" for none) and returns 0.
 *   record: what a checkpoint of m records of its Lua function (metadata
 *     "attention.name", ...): up to max entries into keys and values, held
 *     by a table it pushes; returns their count, 0 (nothing pushed) for a
 *     model without one.
 *   resolve: for the checkpoint at path, the function at fidx (the
 *     caller's, or nil) replaced by the one to load it with (nil: as the
 *     core decides); pushes the warning when it is not the recorded one
 *     (else nil); raises what it refuses (a variant not registered, an
 *     edited one, a malformed record). */
int xsa_lua_attention_lookup(lua_State *L, int idx);
int xsa_lua_attention_record(lua_State *L, const xsa_gpt *m, const char **keys, const char **values,
                             int max);
void xsa_lua_attention_resolve(lua_State *L, const char *path, int fidx);
/* l_bpe.c: the tokenizer userdata at idx or a "bad argument" error. */
xsa_bpe *xsa_lua_checkbpe(lua_State *L, int idx);

#endif

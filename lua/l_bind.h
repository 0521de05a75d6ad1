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
 *   l_generate.c    the kv_cache type, generation (model:generate, xsa.gpt.sample)
 *   l_bpe.c         xsa._tokenizer, the tokenizer type
 *   l_data.c        xsa._data, the loader type
 *   l_bind.c        the helpers below (and the scratch box type)
 * main.c is the executable, not a binding.
 *
 * Open functions: a library's xsa_lua_open_NAME creates the metatables of
 * the types its functions construct and pushes its table (returns 1);
 * l_init.c stores it in the xsa table. A type's open function creates its
 * metatable and pushes nothing (returns 0).
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
/* Every key of the options table at arg must be in `allowed` (NULL-ended). */
void xsa_lua_checkkeys(lua_State *L, const char *fn, int arg, const char *const *allowed);

/* ---- l_base.c: the xsa table's own functions ----------------------------- */

/* Pushes the xsa table with its own functions. */
int xsa_lua_open_base(lua_State *L);
/* xsa.rand/randn/randint (kind 0, 1, 2) and the generator's methods of the
 * same names: ([g,] sizes...) */
int xsa_lua_random(lua_State *L, int kind);

/* ---- l_tensor.c: the tensor type ----------------------------------------- */

/* Creates the tensor's metatable (XSA_TENSOR_MT); pushes nothing. */
int xsa_lua_open_tensor(lua_State *L);
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
xsa_gpt *xsa_lua_checkgpt(lua_State *L, int idx);
/* l_generate.c: creates the kv_cache type and adds sample, sample_probs and
 * generate_ids to the xsa.gpt table at the top of the stack (pushes nothing);
 * model:kv_cache([B]) and model:generate(prompt [, opts]). */
int xsa_lua_open_generate(lua_State *L);
int xsa_lua_gpt_kv_cache(lua_State *L);
int xsa_lua_gpt_generate(lua_State *L);
/* l_bpe.c: the tokenizer userdata at idx or a "bad argument" error. */
xsa_bpe *xsa_lua_checkbpe(lua_State *L, int idx);

#endif

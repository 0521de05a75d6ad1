/*
 * gpt_checkpoint.c: the model's safetensors checkpoints (xsa_gpt_save,
 * xsa_gpt_load of gpt.h): the tensors under their GPT-2 names, the
 * configuration as string metadata, and optionally an AdamW's state.
 * It reads and writes the model through gpt.h's accessors and
 * xsa_gpt_alloc (gpt_impl.h), so it knows nothing of the model's buffers.
 *
 * Non-goals: other formats, lazy or memory-mapped loading, checkpoints of
 * other architectures.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "gpt_impl.h"
#include "optim.h"
#include "safetensors.h"

static float *P(const xsa_gpt *m, int i) { return xsa_tensor_f32(xsa_gpt_param(m, i)); }

enum { NMETA = 8 };
static const char *const meta_keys[NMETA] = {"vocab", "n_layer", "d_model", "n_head",
                                             "seq_len", "attention", "lambda", "seed"};
static const char *const adam_keys[5] = {"adamw.lr", "adamw.beta1", "adamw.beta2", "adamw.eps",
                                         "adamw.weight_decay"};

static int opt_matches(const xsa_gpt *m, const xsa_adamw *o)
{
    if (o->n != xsa_gpt_num_tensors(m)) return 0;
    for (int i = 0; i < o->n; i++) {
        const xsa_tensor *p = xsa_gpt_param(m, i);
        if (o->params[i]->storage != p->storage || o->params[i]->offset != p->offset) return 0;
    }
    return 1;
}

/* The configuration (and opt's hyperparameters) as metadata strings in
 * vals and keys; returns how many. */
static int save_meta(const xsa_gpt *m, const xsa_adamw *opt, char vals[NMETA + 5][40],
                     const char *keys[NMETA + 5])
{
    const xsa_gpt_config *c = xsa_gpt_get_config(m);
    snprintf(vals[0], sizeof vals[0], "%d", c->vocab);
    snprintf(vals[1], sizeof vals[1], "%d", c->n_layer);
    snprintf(vals[2], sizeof vals[2], "%d", c->d_model);
    snprintf(vals[3], sizeof vals[3], "%d", c->n_head);
    snprintf(vals[4], sizeof vals[4], "%d", c->seq_len);
    snprintf(vals[5], sizeof vals[5], "%s",
             xsa_gpt_ext(m) ? XSA_GPT_EXT_NAME : xsa_gpt_attention_name(c->attention));
    xsa_format_double(vals[6], sizeof vals[6], c->lambda);
    snprintf(vals[7], sizeof vals[7], "%llu", (unsigned long long)c->seed);
    int nmeta = NMETA;
    for (int i = 0; i < NMETA; i++) keys[i] = meta_keys[i];
    if (opt) {
        double h[5] = {opt->lr, opt->beta1, opt->beta2, opt->eps, opt->weight_decay};
        for (int i = 0; i < 5; i++) {
            xsa_format_double(vals[NMETA + i], sizeof vals[0], h[i]);
            keys[NMETA + i] = adam_keys[i];
        }
        nmeta += 5;
    }
    return nmeta;
}

/* opt's moments as views of its state, named after their parameters, and
 * its step counts: entries nt..3*nt of names and ts. What it allocated is
 * in owned[0..*made) and ts[nt..3*nt], for the caller to free. */
static int save_adamw_tensors(const xsa_gpt *m, const xsa_adamw *opt, const char **names,
                              char **owned, xsa_tensor **ts, int *made)
{
    int nt = xsa_gpt_num_tensors(m);
    float *base = opt->state->data;
    for (int i = 0; i < nt; i++) {
        const xsa_tensor *p = xsa_gpt_param(m, i);
        size_t len = strlen(xsa_gpt_param_name(m, i)) + 16;
        owned[*made] = malloc(len);
        owned[*made + 1] = malloc(len);
        xsa_tensor *tm = xsa_tensor_from_storage(opt->state, XSA_FLOAT32, p->ndim, p->shape,
                                                 (int64_t)(opt->m[i] - base));
        xsa_tensor *tv = xsa_tensor_from_storage(opt->state, XSA_FLOAT32, p->ndim, p->shape,
                                                 (int64_t)(opt->v[i] - base));
        ts[nt + 2 * i] = tm;
        ts[nt + 2 * i + 1] = tv;
        *made += 2;
        if (!owned[*made - 2] || !owned[*made - 1] || !tm || !tv)
            return xsa_error("gpt save: out of memory");
        snprintf(owned[*made - 2], len, "adamw.m.%s", xsa_gpt_param_name(m, i));
        snprintf(owned[*made - 1], len, "adamw.v.%s", xsa_gpt_param_name(m, i));
        names[nt + 2 * i] = owned[*made - 2];
        names[nt + 2 * i + 1] = owned[*made - 1];
    }
    int64_t sh[1] = {nt};
    xsa_tensor *steps = xsa_tensor_new(XSA_INT32, 1, sh);
    ts[3 * nt] = steps;
    names[3 * nt] = "adamw.steps";
    if (!steps) return -1;
    int32_t *s = xsa_tensor_i32(steps);
    for (int i = 0; i < nt; i++) s[i] = (int32_t)opt->steps[i];
    return 0;
}

int xsa_gpt_save(const xsa_gpt *m, const char *path, const xsa_adamw *opt)
{
    return xsa_gpt_save_meta(m, path, opt, 0, NULL, NULL);
}

enum { MAX_EXTRA = 64 };

int xsa_gpt_save_meta(const xsa_gpt *m, const char *path, const xsa_adamw *opt, int n_extra,
                      const char *const *extra_keys, const char *const *extra_values)
{
    if (opt && !opt_matches(m, opt))
        return xsa_error("gpt save: the optimizer does not hold exactly this model's parameters");
    if (n_extra < 0 || n_extra > MAX_EXTRA || (n_extra > 0 && (!extra_keys || !extra_values)))
        return xsa_error("gpt save: %d extra metadata entries (0 to %d, with their keys and values)", n_extra,
                         MAX_EXTRA);
    int nt = xsa_gpt_num_tensors(m), n = opt ? 3 * nt + 1 : nt;
    char vals[NMETA + 5][40];
    const char *keys[NMETA + 5 + MAX_EXTRA], *values[NMETA + 5 + MAX_EXTRA];
    int nmeta = save_meta(m, opt, vals, keys);
    for (int i = 0; i < nmeta; i++) values[i] = vals[i];
    for (int i = 0; i < n_extra; i++) { /* a key of ours again: xsa_st_save refuses duplicates */
        keys[nmeta + i] = extra_keys[i];
        values[nmeta + i] = extra_values[i];
    }
    nmeta += n_extra;
    const char **names = calloc((size_t)n, sizeof *names);
    char **owned = calloc((size_t)n, sizeof *owned);
    xsa_tensor **ts = calloc((size_t)n, sizeof *ts);
    int rc = -1, made = 0;
    if (!names || !owned || !ts) {
        xsa_error("gpt save: out of memory");
        goto done;
    }
    for (int i = 0; i < nt; i++) {
        names[i] = xsa_gpt_param_name(m, i);
        ts[i] = xsa_gpt_param(m, i);
    }
    if (opt && save_adamw_tensors(m, opt, names, owned, ts, &made) != 0) goto done;
    rc = xsa_st_save(path, n, names, ts, nmeta, keys, values);
done:
    if (ts && opt)
        for (int i = nt; i < n; i++) xsa_tensor_free(ts[i]);
    if (owned)
        for (int i = 0; i < made; i++) free(owned[i]);
    free(owned);
    free(names);
    free(ts);
    return rc;
}

static int meta_int(const xsa_st_file *f, const char *path, const char *key, long long lo,
                    long long hi, long long *out)
{
    const char *s = xsa_st_meta(f, key);
    if (!s) return xsa_error("%s: missing metadata key %s", path, key);
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return xsa_error("%s: metadata %s = \"%s\" is not an integer in [%lld, %lld]", path, key,
                         s, lo, hi);
    *out = v;
    return 0;
}

static int meta_double(const xsa_st_file *f, const char *path, const char *key, double *out)
{
    const char *s = xsa_st_meta(f, key);
    if (!s) return xsa_error("%s: missing metadata key %s", path, key);
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v))
        return xsa_error("%s: metadata %s = \"%s\" is not a finite number", path, key, s);
    *out = v;
    return 0;
}

static int load_tensor(const xsa_st_file *f, const char *path, const char *name,
                       const xsa_tensor *like, xsa_dtype dt, float *dst)
{
    xsa_tensor *t = xsa_st_get(f, name);
    if (!t) return xsa_error("%s: missing tensor %s", path, name);
    char a[64], b[64];
    if (t->dtype != dt)
        return xsa_error("%s: %s has dtype %s, expected %s", path, name, xsa_dtype_name(t->dtype),
                         xsa_dtype_name(dt));
    if (!xsa_tensor_same_shape(t, like))
        return xsa_error("%s: %s has shape %s, expected %s", path, name,
                         xsa_shape_str(t->ndim, t->shape, a, sizeof a),
                         xsa_shape_str(like->ndim, like->shape, b, sizeof b));
    if (dst) memcpy(dst, xsa_tensor_f32(t), (size_t)xsa_tensor_numel(t) * sizeof(float));
    return 0;
}

xsa_gpt *xsa_gpt_load(const char *path, xsa_adamw **opt_out)
{
    return xsa_gpt_load_ext(path, opt_out, NULL);
}

/* The metadata attention of path into *out: a variant of the table, or
 * XSA_GPT_EXT_NAME, a function only ext can be again (the model then has
 * SA as its own variant, gpt.h). */
static int parse_attention(const char *path, const char *att, const xsa_gpt_ext_attention *ext,
                           xsa_attention *out)
{
    if (strcmp(att, XSA_GPT_EXT_NAME) == 0) {
        if (!ext)
            return xsa_error("%s: the model's attention was a function (metadata attention = \"%s\"), "
                             "which a checkpoint cannot hold: give that function to the loader "
                             "(Lua: xsa.gpt.load(path, {attention = f}))", path, att);
        *out = XSA_ATTN_SA;
        return 0;
    }
    if (xsa_gpt_attention_parse(att, out) != 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", xsa_last_error());
        return xsa_error("%s: metadata attention = \"%s\": %s", path, att, msg);
    }
    if (ext)
        return xsa_error("%s: the model's attention is \"%s\", not a function: load it without "
                         "one", path, att);
    return 0;
}

/* The configuration from path's metadata into *c, validated. */
static int load_config(const xsa_st_file *f, const char *path, const xsa_gpt_ext_attention *ext,
                       xsa_gpt_config *c)
{
    long long iv[5];
    unsigned long long seed;
    const int64_t lim = (int64_t)1 << 30;
    for (int i = 0; i < 5; i++)
        if (meta_int(f, path, meta_keys[i], 0, lim, &iv[i]) != 0) return -1;
    {
        const char *s = xsa_st_meta(f, "seed");
        char *end = NULL;
        errno = 0;
        unsigned long long u = s ? strtoull(s, &end, 10) : 0;
        if (!s || errno || end == s || *end || s[0] == '-') {
            if (s) xsa_error("%s: metadata seed = \"%s\" is not a non-negative integer", path, s);
            else xsa_error("%s: missing metadata key seed", path);
            return -1;
        }
        seed = u;
    }
    c->vocab = (int)iv[0];
    c->n_layer = (int)iv[1];
    c->d_model = (int)iv[2];
    c->n_head = (int)iv[3];
    c->seq_len = (int)iv[4];
    c->seed = (uint64_t)seed;
    c->precision = XSA_PREC_F32;
    const char *att = xsa_st_meta(f, "attention");
    if (!att) return xsa_error("%s: missing metadata key attention", path);
    if (parse_attention(path, att, ext, &c->attention) != 0) return -1;
    if (meta_double(f, path, "lambda", &c->lambda) != 0) return -1;
    if (xsa_gpt_config_validate(c) != 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", xsa_last_error());
        return xsa_error("%s: invalid configuration: %s", path, msg);
    }
    return 0;
}

/* Every tensor of f is a parameter of m or an optimizer's ("adamw.");
 * returns whether there are optimizer tensors, -1 for a stranger. */
static int check_tensor_names(const xsa_st_file *f, const char *path, const xsa_gpt *m)
{
    int has_adam = 0;
    for (int i = 0; i < f->n; i++) {
        if (strncmp(f->names[i], "adamw.", 6) == 0) {
            has_adam = 1;
            continue;
        }
        if (!xsa_gpt_find_param(m, f->names[i]))
            return xsa_error("%s: unexpected tensor %s", path, f->names[i]);
    }
    return has_adam;
}

/* The AdamW state f holds for m's parameters; NULL with xsa_error. */
static xsa_adamw *load_adamw(const xsa_st_file *f, const char *path, xsa_gpt *m)
{
    double h[5];
    for (int i = 0; i < 5; i++)
        if (meta_double(f, path, adam_keys[i], &h[i]) != 0) return NULL;
    xsa_adamw *o = xsa_adamw_new(xsa_gpt_num_tensors(m), xsa_gpt_params(m), h[0], h[1], h[2],
                                 h[3], h[4]);
    if (!o) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", xsa_last_error());
        xsa_error("%s: invalid optimizer state: %s", path, msg);
        return NULL;
    }
    char name[160];
    for (int i = 0; i < xsa_gpt_num_tensors(m); i++) {
        snprintf(name, sizeof name, "adamw.m.%s", xsa_gpt_param_name(m, i));
        if (load_tensor(f, path, name, xsa_gpt_param(m, i), XSA_FLOAT32, o->m[i]) != 0) goto fail;
        snprintf(name, sizeof name, "adamw.v.%s", xsa_gpt_param_name(m, i));
        if (load_tensor(f, path, name, xsa_gpt_param(m, i), XSA_FLOAT32, o->v[i]) != 0) goto fail;
    }
    xsa_tensor *st = xsa_st_get(f, "adamw.steps");
    if (!st || st->dtype != XSA_INT32 || st->ndim != 1 || st->shape[0] != xsa_gpt_num_tensors(m)) {
        xsa_error("%s: missing or malformed tensor adamw.steps (int32 [%d])", path, xsa_gpt_num_tensors(m));
        goto fail;
    }
    const int32_t *s = xsa_tensor_i32(st);
    for (int i = 0; i < xsa_gpt_num_tensors(m); i++) {
        if (s[i] < 0) {
            xsa_error("%s: adamw.steps holds a negative count", path);
            goto fail;
        }
        o->steps[i] = s[i];
    }
    return o;
fail:
    xsa_adamw_free(o);
    return NULL;
}

xsa_gpt *xsa_gpt_load_ext(const char *path, xsa_adamw **opt_out, const xsa_gpt_ext_attention *ext)
{
    if (opt_out) *opt_out = NULL;
    xsa_st_file *f = xsa_st_load(path);
    if (!f) return NULL;
    xsa_gpt *m = NULL;
    xsa_gpt_config c;
    if (load_config(f, path, ext, &c) != 0) goto fail;
    m = xsa_gpt_alloc(&c);
    if (!m || (ext && xsa_gpt_set_ext_attention(m, ext) != 0)) goto fail;
    for (int i = 0; i < xsa_gpt_num_tensors(m); i++)
        if (load_tensor(f, path, xsa_gpt_param_name(m, i), xsa_gpt_param(m, i), XSA_FLOAT32, P(m, i)) != 0) goto fail;
    int has_adam = check_tensor_names(f, path, m);
    if (has_adam < 0) goto fail;
    if (opt_out && has_adam && !(*opt_out = load_adamw(f, path, m))) goto fail;
    xsa_st_free(f);
    return m;
fail:
    xsa_gpt_free(m);
    xsa_st_free(f);
    return NULL;
}

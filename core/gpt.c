/*
 * gpt.c: the GPT model of gpt.h: parameters in one block and gradients in
 * another (views exposed as tensors), activations in reused buffers, forward
 * and backward written out layer by layer over the kernels of nn.h, the probe
 * (the attention kernel's own statistics), and safetensors checkpoints.
 *
 * Non-goals: generic layer graphs (the Lua autograd does that), dropout,
 * sampling, mixed precision.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckd.h"
#include <cblas.h>

#include "fileio.h"
#include "gpt.h"
#include "matmul_bf16.h"
#include "optim.h"
#include "pool.h"
#include "safetensors.h"
#include "system.h"

/* Tensors per block, in checkpoint order. */
enum {
    LN1W, LN1B, QKVW, QKVB, APW, APB, LN2W, LN2B, FCW, FCB, FPW, FPB, NPL
};
static const char *const layer_names[NPL] = {
    "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
    "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
    "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"};

typedef struct {
    float *ln1, *ln1m, *ln1r, *qkv, *y, *att, *z, *res2, *ln2, *ln2m, *ln2r, *fch, *res3;
} layer_acts;

struct xsa_gpt {
    long refcount;
    xsa_gpt_config cfg;
    float lambda_eff;          /* 0 for SA */
    int ntensors;
    char **names;
    xsa_tensor **params;       /* views into pstore; ->grad views into gstore */
    xsa_storage *pstore, *gstore;
    size_t nparams;
    /* activations, for the shape (B, T) of the last forward */
    float *acts;
    size_t acts_cap;           /* floats */
    int32_t *tokens;           /* inputs then targets, 2 * N */
    size_t tokens_cap;
    int B, T;
    int have_targets;          /* the last forward can be differentiated */
    int have_logits;           /* lnf holds the last forward's rows (logits on demand) */
    int have_acts;             /* la holds the last forward's activations */
    unsigned long gen;
    layer_acts *la;
    float *encoded, *lnf, *lnfm, *lnfr;
    /* the lm_head's gradient (dloss = 1), computed with the loss by the
     * fused kernel and scaled into place by the backward: dlnf [N,C] in
     * acts, pend_dw [V,C] from the pool (pool.h) until the backward */
    float *dlnf, *pend_dw;
    /* logits [B,T,V], only when asked for (xsa_gpt_logits) */
    float *logits;
    size_t logits_cap;         /* floats */
    int logits_ready;
    xsa_bf16_mm *mm;           /* precision bf16: the oneDNN products of the lm_head */
};

/* ---- configuration ---------------------------------------------------- */

void xsa_gpt_config_default(xsa_gpt_config *c)
{
    c->vocab = 50257;
    c->n_layer = 2;
    c->d_model = 128;
    c->n_head = 2;
    c->seq_len = 64;
    c->attention = XSA_ATTN_SA;
    c->lambda = 1.0;
    c->seed = 0;
    c->precision = XSA_PREC_F32;
}

const char *xsa_gpt_attention_name(xsa_attention a) { return a == XSA_ATTN_XSA ? "xsa" : "sa"; }

int xsa_gpt_attention_parse(const char *s, xsa_attention *out)
{
    if (s && strcmp(s, "sa") == 0) *out = XSA_ATTN_SA;
    else if (s && strcmp(s, "xsa") == 0) *out = XSA_ATTN_XSA;
    else return xsa_error("gpt: attention must be \"sa\" or \"xsa\" (got \"%s\")", s ? s : "(null)");
    return 0;
}

const char *xsa_gpt_precision_name(xsa_precision p) { return p == XSA_PREC_BF16 ? "bf16" : "f32"; }

int xsa_gpt_precision_parse(const char *s, xsa_precision *out)
{
    if (s && strcmp(s, "f32") == 0) *out = XSA_PREC_F32;
    else if (s && strcmp(s, "bf16") == 0) *out = XSA_PREC_BF16;
    else return xsa_error("gpt: precision must be \"f32\" or \"bf16\" (got \"%s\")", s ? s : "(null)");
    return 0;
}

int xsa_gpt_config_validate(const xsa_gpt_config *c)
{
    struct { const char *name; int v, max; } pos[] = {
        {"vocab", c->vocab, 1 << 24}, {"n_layer", c->n_layer, 1024},
        {"d_model", c->d_model, 1 << 16}, {"n_head", c->n_head, 1 << 16},
        {"seq_len", c->seq_len, 1 << 20}};
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++)
        if (pos[i].v < 1 || pos[i].v > pos[i].max)
            return xsa_error("gpt: %s must be an integer in [1, %d] (got %d)", pos[i].name,
                             pos[i].max, pos[i].v);
    if (c->d_model % c->n_head != 0)
        return xsa_error("gpt: d_model %d is not divisible by n_head %d", c->d_model, c->n_head);
    if (c->attention != XSA_ATTN_SA && c->attention != XSA_ATTN_XSA)
        return xsa_error("gpt: attention must be \"sa\" or \"xsa\"");
    if (!isfinite(c->lambda)) return xsa_error("gpt: lambda must be finite (got %g)", c->lambda);
    if (c->precision != XSA_PREC_F32 && c->precision != XSA_PREC_BF16)
        return xsa_error("gpt: precision must be \"f32\" or \"bf16\"");
    double C = c->d_model;
    double total = (double)c->vocab * C + (double)c->seq_len * C +
                   c->n_layer * (12.0 * C * C + 13.0 * C) + 2.0 * C;
    if (total > (double)XSA_MAX_NUMEL)
        return xsa_error("gpt: %.0f parameters is too many", total);
    return 0;
}

/* ---- construction ------------------------------------------------------ */

static void param_shape(const xsa_gpt_config *c, int idx, int *ndim, int64_t *shape)
{
    int64_t C = c->d_model;
    int L = c->n_layer;
    if (idx == 0) { *ndim = 2; shape[0] = c->vocab; shape[1] = C; return; }
    if (idx == 1) { *ndim = 2; shape[0] = c->seq_len; shape[1] = C; return; }
    if (idx >= 2 + L * NPL) { *ndim = 1; shape[0] = C; return; }
    switch ((idx - 2) % NPL) {
    case QKVW: *ndim = 2; shape[0] = C; shape[1] = 3 * C; return;
    case QKVB: *ndim = 1; shape[0] = 3 * C; return;
    case APW: *ndim = 2; shape[0] = C; shape[1] = C; return;
    case FCW: *ndim = 2; shape[0] = C; shape[1] = 4 * C; return;
    case FCB: *ndim = 1; shape[0] = 4 * C; return;
    case FPW: *ndim = 2; shape[0] = 4 * C; shape[1] = C; return;
    default: *ndim = 1; shape[0] = C; return;
    }
}

static char *param_name(const xsa_gpt_config *c, int idx)
{
    char buf[96];
    int L = c->n_layer;
    if (idx == 0) snprintf(buf, sizeof buf, "wte.weight");
    else if (idx == 1) snprintf(buf, sizeof buf, "wpe.weight");
    else if (idx == 2 + L * NPL) snprintf(buf, sizeof buf, "ln_f.weight");
    else if (idx == 3 + L * NPL) snprintf(buf, sizeof buf, "ln_f.bias");
    else snprintf(buf, sizeof buf, "h.%d.%s", (idx - 2) / NPL, layer_names[(idx - 2) % NPL]);
    return strdup(buf);
}

static inline float *P(const xsa_gpt *m, int idx) { return xsa_tensor_f32(m->params[idx]); }
static inline float *G(const xsa_gpt *m, int idx) { return xsa_tensor_f32(m->params[idx]->grad); }
static inline int LI(int l, int k) { return 2 + l * NPL + k; }

static void set_lambda(xsa_gpt *m)
{
    m->lambda_eff = m->cfg.attention == XSA_ATTN_XSA ? (float)m->cfg.lambda : 0.0f;
}

static void init_weights(xsa_gpt *m)
{
    xsa_rng g;
    xsa_rng_seed(&g, m->cfg.seed);
    double proj_std = 0.02 / sqrt(2.0 * m->cfg.n_layer);
    for (int i = 0; i < m->ntensors; i++) {
        float *p = P(m, i);
        size_t n = (size_t)xsa_tensor_numel(m->params[i]);
        int k = (i >= 2 && i < 2 + m->cfg.n_layer * NPL) ? (i - 2) % NPL : -1;
        double std = 0.0;
        if (i < 2 || k == QKVW || k == FCW) std = 0.02;
        else if (k == APW || k == FPW) std = proj_std;
        if (std > 0.0) {
            for (size_t j = 0; j < n; j++) p[j] = (float)(xsa_rng_normal(&g) * std);
        } else if (i == 2 + m->cfg.n_layer * NPL || k == LN1W || k == LN2W) {
            for (size_t j = 0; j < n; j++) p[j] = 1.0f;
        } /* biases stay 0 from the zero-filled block */
    }
}

/* Bytes of physical memory, or 0 if unknown. */
static double phys_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (double)pages * (double)size : 0.0;
}

/* Refuses, before any allocation, a block that cannot fit in this machine's
 * memory: with overcommit, malloc would succeed and the first touch of the
 * pages would get the process killed instead of giving an error. */
static int check_fits(double bytes, const char *what)
{
    double phys = phys_bytes();
    if (phys > 0 && bytes > phys)
        return xsa_error("gpt: %s need %.1f GB, more than this machine's %.1f GB of memory", what,
                         bytes / 1e9, phys / 1e9);
    return 0;
}

static xsa_gpt *gpt_alloc(const xsa_gpt_config *c)
{
    if (xsa_gpt_config_validate(c) != 0) return NULL;
    double C = c->d_model;
    double nparams = (double)c->vocab * C + (double)c->seq_len * C +
                     c->n_layer * (12.0 * C * C + 13.0 * C) + 2.0 * C;
    char what[96];
    snprintf(what, sizeof what, "%.0f parameters and their gradients", nparams);
    if (check_fits(nparams * 2 * sizeof(float), what) != 0) return NULL;
    if (c->precision == XSA_PREC_BF16 && xsa_bf16_check() != 0) {
        char why[256];
        snprintf(why, sizeof why, "%s", xsa_last_error());
        xsa_error("gpt: precision \"bf16\" is not available: %s", why);
        return NULL;
    }
    xsa_gpt *m = calloc(1, sizeof *m);
    if (!m) goto oom;
    m->refcount = 1;
    m->cfg = *c;
    if (c->precision == XSA_PREC_BF16 && !(m->mm = xsa_bf16_mm_new())) {
        free(m);
        return NULL;
    }
    set_lambda(m);
    m->ntensors = 2 + c->n_layer * NPL + 2;
    m->names = calloc((size_t)m->ntensors, sizeof *m->names);
    m->params = calloc((size_t)m->ntensors, sizeof *m->params);
    m->la = calloc((size_t)c->n_layer, sizeof *m->la);
    if (!m->names || !m->params || !m->la) goto fail;
    size_t total = 0;
    for (int i = 0; i < m->ntensors; i++) {
        int nd;
        int64_t sh[2];
        param_shape(c, i, &nd, sh);
        total += (size_t)(nd == 2 ? sh[0] * sh[1] : sh[0]);
    }
    m->nparams = total;
    m->pstore = xsa_storage_new(total * sizeof(float));
    m->gstore = xsa_storage_new(total * sizeof(float));
    if (!m->pstore || !m->gstore) goto fail;
    size_t off = 0;
    for (int i = 0; i < m->ntensors; i++) {
        int nd;
        int64_t sh[2];
        param_shape(c, i, &nd, sh);
        m->names[i] = param_name(c, i);
        m->params[i] = xsa_tensor_from_storage(m->pstore, XSA_FLOAT32, nd, sh, (int64_t)off);
        if (!m->names[i] || !m->params[i]) goto fail;
        m->params[i]->grad = xsa_tensor_from_storage(m->gstore, XSA_FLOAT32, nd, sh, (int64_t)off);
        if (!m->params[i]->grad) goto fail;
        m->params[i]->requires_grad = 1;
        off += (size_t)(nd == 2 ? sh[0] * sh[1] : sh[0]);
    }
    return m;
fail:
    xsa_gpt_free(m);
oom:
    xsa_error("gpt: out of memory");
    return NULL;
}

xsa_gpt *xsa_gpt_new(const xsa_gpt_config *c)
{
    xsa_gpt *m = gpt_alloc(c);
    if (m) init_weights(m);
    return m;
}

void xsa_gpt_retain(xsa_gpt *m) { m->refcount++; }

void xsa_gpt_free(xsa_gpt *m)
{
    if (!m || --m->refcount > 0) return;
    for (int i = 0; i < m->ntensors; i++) {
        if (m->names) free(m->names[i]);
        if (m->params) xsa_tensor_free(m->params[i]);
    }
    free(m->names);
    free(m->params);
    free(m->la);
    xsa_storage_free(m->pstore);
    xsa_storage_free(m->gstore);
    xsa_pool_put(m->acts);
    free(m->tokens);
    free(m->logits);
    xsa_pool_put(m->pend_dw);
    xsa_bf16_mm_free(m->mm);
    free(m);
}

/* Gives the pending lm_head gradient back to the pool (no backward will
 * use it). */
static void release_pending(xsa_gpt *m)
{
    xsa_pool_put(m->pend_dw);
    m->pend_dw = NULL;
}

/* Gives the activation block back to the pool, with the pending gradient
 * (the logits stay if they were computed). */
static void release_acts(xsa_gpt *m)
{
    release_pending(m);
    xsa_pool_put(m->acts);
    m->acts = NULL;
    m->acts_cap = 0;
    m->have_acts = 0;
    m->have_targets = 0;
    if (!m->logits_ready) m->have_logits = 0;
}

xsa_gpt *xsa_gpt_clone(const xsa_gpt *m, xsa_attention attention, double lambda)
{
    xsa_gpt_config c = m->cfg;
    c.attention = attention;
    c.lambda = lambda;
    xsa_gpt *n = gpt_alloc(&c);
    if (!n) return NULL;
    memcpy(n->pstore->data, m->pstore->data, m->nparams * sizeof(float));
    return n;
}

int xsa_gpt_copy_from(xsa_gpt *dst, const xsa_gpt *src)
{
    const xsa_gpt_config *a = &dst->cfg, *b = &src->cfg;
    if (a->vocab != b->vocab || a->n_layer != b->n_layer || a->d_model != b->d_model ||
        a->n_head != b->n_head || a->seq_len != b->seq_len)
        return xsa_error("gpt copy_from: sizes differ (vocab %d/%d, n_layer %d/%d, d_model %d/%d, "
                         "n_head %d/%d, seq_len %d/%d)",
                         a->vocab, b->vocab, a->n_layer, b->n_layer, a->d_model, b->d_model,
                         a->n_head, b->n_head, a->seq_len, b->seq_len);
    if (dst != src) memcpy(dst->pstore->data, src->pstore->data, src->nparams * sizeof(float));
    xsa_storage_bump_version(dst->pstore); /* the parameters changed in place */
    dst->gen++;
    release_acts(dst);
    return 0;
}

int xsa_gpt_set_attention(xsa_gpt *m, xsa_attention attention, double lambda)
{
    xsa_gpt_config c = m->cfg;
    c.attention = attention;
    c.lambda = lambda;
    if (xsa_gpt_config_validate(&c) != 0) return -1;
    m->cfg = c;
    set_lambda(m);
    m->gen++;
    release_acts(m);
    return 0;
}

const xsa_gpt_config *xsa_gpt_get_config(const xsa_gpt *m) { return &m->cfg; }
size_t xsa_gpt_num_params(const xsa_gpt *m) { return m->nparams; }
int xsa_gpt_num_tensors(const xsa_gpt *m) { return m->ntensors; }
float *xsa_gpt_params_data(const xsa_gpt *m) { return m->pstore->data; }
float *xsa_gpt_grads_data(const xsa_gpt *m) { return m->gstore->data; }
size_t xsa_gpt_activation_bytes(const xsa_gpt *m)
{
    return m->acts_cap * sizeof(float) + m->tokens_cap * sizeof(int32_t) +
           m->logits_cap * sizeof(float);
}
unsigned long xsa_gpt_generation(const xsa_gpt *m) { return m->gen; }

const char *xsa_gpt_param_name(const xsa_gpt *m, int i)
{
    return i >= 0 && i < m->ntensors ? m->names[i] : NULL;
}

xsa_tensor *xsa_gpt_param(const xsa_gpt *m, int i)
{
    return i >= 0 && i < m->ntensors ? m->params[i] : NULL;
}

xsa_tensor *xsa_gpt_find_param(const xsa_gpt *m, const char *name)
{
    for (int i = 0; i < m->ntensors; i++)
        if (strcmp(m->names[i], name) == 0) return m->params[i];
    return NULL;
}

void xsa_gpt_zero_grad(xsa_gpt *m)
{
    memset(m->gstore->data, 0, m->nparams * sizeof(float));
    xsa_storage_bump_version(m->gstore);
}

/* ---- activations ------------------------------------------------------- */

/* Lays the activation buffers out for (B, T), growing the block only when
 * it is too small (so a steady-state step allocates nothing). */
/* a * b and a + b in size_t; an overflow sets *bad (the result is then
 * meaningless and the caller reports it) */
static size_t mulz(size_t a, size_t b, int *bad)
{
    size_t r;
    if (xsa_ckd_mul_size(a, b, &r)) *bad = 1;
    return r;
}

static size_t addz(size_t a, size_t b, int *bad)
{
    size_t r;
    if (xsa_ckd_add_size(a, b, &r)) *bad = 1;
    return r;
}

static int ensure_acts(xsa_gpt *m, int B, int T)
{
    size_t C = (size_t)m->cfg.d_model, V = (size_t)m->cfg.vocab, NH = (size_t)m->cfg.n_head;
    size_t L = (size_t)m->cfg.n_layer, N = (size_t)B * T; /* check_batch: fits an int */
    int bad = 0;
    size_t NC = mulz(N, C, &bad), att = mulz(mulz(mulz((size_t)B, NH, &bad), (size_t)T, &bad),
                                             (size_t)T, &bad);
    /* per layer: 16 N*C (ln1, qkv 3, y, z, res2, ln2, fch 4, res3), 4 N, the weights.
     * gelu(fch) is not kept (the backward recomputes it); no [N,V] buffer: the
     * loss runs over chunks of rows (xsa_nn_lmhead_ce). The block comes from
     * the pool (pool.h) and goes back after the backward, as does the
     * backward's scratch */
    size_t per_layer = addz(addz(mulz(NC, 16, &bad), mulz(N, 4, &bad), &bad), att, &bad);
    size_t total = NC;                                            /* encoded */
    total = addz(total, mulz(L, per_layer, &bad), &bad);
    total = addz(total, addz(NC, mulz(N, 2, &bad), &bad), &bad);  /* lnf */
    total = addz(total, NC, &bad);                                /* dlnf */
    char what[96];
    snprintf(what, sizeof what, "the activations of a %dx%d batch", B, T);
    if (bad || total > SIZE_MAX / sizeof(float)) return xsa_error("gpt: %s overflow", what);
    if ((double)N * (double)V > (double)XSA_MAX_NUMEL)
        return xsa_error("gpt: batch %dx%d with vocab %zu is too large", B, T, V);
    if (check_fits((double)total * sizeof(float), what) != 0) return -1;
    if (!m->acts || total > m->acts_cap) {
        /* from the pool: held from a forward to its backward, then shared */
        xsa_pool_put(m->acts);
        m->acts = xsa_pool_get(XSA_POOL_ACTS, total);
        if (!m->acts) {
            m->acts_cap = 0;
            return xsa_error("gpt: out of memory for activations of batch %dx%d (%zu MB)", B, T,
                             total * sizeof(float) >> 20);
        }
        m->acts_cap = total;
    }
    if (2 * N > m->tokens_cap) {
        free(m->tokens);
        m->tokens = malloc(2 * N * sizeof(int32_t));
        if (!m->tokens) {
            m->tokens_cap = 0;
            return xsa_error("gpt: out of memory");
        }
        m->tokens_cap = 2 * N;
    }
    float *p = m->acts;
#define TAKE(ptr, n) (ptr = p, p += (n))
    TAKE(m->encoded, N * C);
    for (size_t l = 0; l < L; l++) {
        layer_acts *a = &m->la[l];
        TAKE(a->ln1, N * C);
        TAKE(a->ln1m, N);
        TAKE(a->ln1r, N);
        TAKE(a->qkv, N * 3 * C);
        TAKE(a->y, N * C);
        TAKE(a->att, (size_t)B * NH * T * T);
        TAKE(a->z, N * C);
        TAKE(a->res2, N * C);
        TAKE(a->ln2, N * C);
        TAKE(a->ln2m, N);
        TAKE(a->ln2r, N);
        TAKE(a->fch, N * 4 * C);
        TAKE(a->res3, N * C);
    }
    TAKE(m->lnf, N * C);
    TAKE(m->lnfm, N);
    TAKE(m->lnfr, N);
    TAKE(m->dlnf, N * C);
#undef TAKE
    (void)p;
    return 0;
}

static int check_tokens(const xsa_gpt *m, const char *what, const int32_t *ids, int B, int T)
{
    int V = m->cfg.vocab;
    for (int i = 0; i < B * T; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return xsa_error("gpt forward: %s token %d at [%d,%d] is outside [0, %d)", what,
                             (int)ids[i], i / T, i % T, V);
    return 0;
}

static int check_batch(const xsa_gpt *m, const int32_t *inputs, int B, int T)
{
    if (!inputs) return xsa_error("gpt forward: no inputs");
    if (B < 1 || T < 1)
        return xsa_error("gpt forward: batch shape [%d,%d] must be positive", B, T);
    if ((int64_t)B * T > INT32_MAX) /* N = B*T is an int throughout */
        return xsa_error("gpt forward: batch shape [%d,%d] has more than %d tokens", B, T,
                         INT32_MAX);
    if (T > m->cfg.seq_len)
        return xsa_error("gpt forward: sequence length %d exceeds the model's seq_len %d", T,
                         m->cfg.seq_len);
    return 0;
}

/* Floats of the one scratch buffer every part of a step at (B, T) asks the
 * pool for (gelu(fch) in the forward, the lm_head's chunk, the backward's
 * scratch): the same size each time, so that they are all one buffer. */
static size_t step_scratch_floats(const xsa_gpt *m, int B, int T)
{
    size_t C = (size_t)m->cfg.d_model, N = (size_t)B * T;
    int V = m->cfg.vocab, bf16 = m->cfg.precision == XSA_PREC_BF16;
    size_t a = xsa_nn_lmhead_ce_scratch_floats((int)N, (int)C, V,
                                               xsa_nn_lmhead_rows((int)N, V, bf16), bf16,
                                               xsa_threads());
    size_t b = N * C * 13 + xsa_nn_attention_scratch_floats(B, T, (int)C, m->cfg.n_head);
    size_t c = N * C * 4;
    return a > b ? (a > c ? a : c) : (b > c ? b : c);
}

/* Embedding and blocks. probe (or NULL) receives per-layer statistics; with
 * probe_only the last block's MLP is skipped (the probe does not need it).
 * gelu(fch) goes through a scratch buffer from the pool: the backward
 * recomputes it. */
static int run_blocks(xsa_gpt *m, int B, int T, double *probe, int probe_only)
{
    int C = m->cfg.d_model, NH = m->cfg.n_head, L = m->cfg.n_layer, N = B * T;
    float *fchg = xsa_pool_get(XSA_POOL_SCRATCH, step_scratch_floats(m, B, T));
    if (!fchg) return -1;
    xsa_nn_embedding_forward(m->encoded, m->tokens, P(m, 0), P(m, 1), B, T, C);
    for (int l = 0; l < L; l++) {
        layer_acts *a = &m->la[l];
        const float *x = l == 0 ? m->encoded : m->la[l - 1].res3;
        xsa_nn_layernorm_forward(a->ln1, a->ln1m, a->ln1r, x, P(m, LI(l, LN1W)), P(m, LI(l, LN1B)), N, C);
        xsa_nn_linear_forward(a->qkv, a->ln1, P(m, LI(l, QKVW)), P(m, LI(l, QKVB)), N, C, 3 * C);
        xsa_nn_attention_forward(a->z, a->y, a->att, a->qkv, B, T, C, NH, m->lambda_eff,
                                 probe ? probe + (size_t)l * NH * XSA_NN_PROBE_N : NULL);
        if (probe_only && l == L - 1) break;
        xsa_nn_linear_forward(a->res2, a->z, P(m, LI(l, APW)), P(m, LI(l, APB)), N, C, C);
        xsa_nn_residual_forward(a->res2, a->res2, x, (size_t)N * C);
        xsa_nn_layernorm_forward(a->ln2, a->ln2m, a->ln2r, a->res2, P(m, LI(l, LN2W)), P(m, LI(l, LN2B)), N, C);
        xsa_nn_linear_forward(a->fch, a->ln2, P(m, LI(l, FCW)), P(m, LI(l, FCB)), N, C, 4 * C);
        xsa_nn_gelu_forward(fchg, a->fch, (size_t)N * 4 * C);
        xsa_nn_linear_forward(a->res3, fchg, P(m, LI(l, FPW)), P(m, LI(l, FPB)), N, 4 * C, C);
        xsa_nn_residual_forward(a->res3, a->res3, a->res2, (size_t)N * C);
    }
    xsa_pool_put(fchg);
    return 0;
}

static int forward(xsa_gpt *m, const int32_t *inputs, const int32_t *targets, int B, int T,
                   float *loss, int save);

int xsa_gpt_forward(xsa_gpt *m, const int32_t *inputs, const int32_t *targets, int B, int T,
                    float *loss)
{
    return forward(m, inputs, targets, B, T, loss, 1);
}

int xsa_gpt_eval_loss(xsa_gpt *m, const int32_t *inputs, const int32_t *targets, int B, int T,
                      float *loss)
{
    if (!targets) return xsa_error("gpt eval_loss: no targets");
    return forward(m, inputs, targets, B, T, loss, 0);
}

/* Floats of the embedding-and-blocks working set of an evaluation (every
 * layer reuses it; nothing is kept for a backward). */
static size_t eval_floats(const xsa_gpt *m, int B, int T)
{
    size_t C = (size_t)m->cfg.d_model, NH = (size_t)m->cfg.n_head, N = (size_t)B * T;
    return N * C * 12 + 2 * N + (size_t)B * NH * T * T;
}

/* Embedding, blocks and ln_f for a loss alone, in the working set w
 * (eval_floats): returns ln_f's output rows [N,C] (inside w). The same
 * kernels in the same order as run_blocks, so the loss is the same. */
static float *run_blocks_eval(xsa_gpt *m, const int32_t *inputs, int B, int T, float *w)
{
    int C = m->cfg.d_model, NH = m->cfg.n_head, L = m->cfg.n_layer, N = B * T;
    size_t NC = (size_t)N * C;
    float *x = w, *x2 = x + NC, *ln = x2 + NC, *mean = ln + NC, *rstd = mean + N;
    float *qkv = rstd + N, *y = qkv + 3 * NC, *z = y + NC, *fch = z + NC, *att = fch + 4 * NC;
    xsa_nn_embedding_forward(x, inputs, P(m, 0), P(m, 1), B, T, C);
    for (int l = 0; l < L; l++) {
        xsa_nn_layernorm_forward(ln, mean, rstd, x, P(m, LI(l, LN1W)), P(m, LI(l, LN1B)), N, C);
        xsa_nn_linear_forward(qkv, ln, P(m, LI(l, QKVW)), P(m, LI(l, QKVB)), N, C, 3 * C);
        xsa_nn_attention_forward(z, y, att, qkv, B, T, C, NH, m->lambda_eff, NULL);
        xsa_nn_linear_forward(x2, z, P(m, LI(l, APW)), P(m, LI(l, APB)), N, C, C);
        xsa_nn_residual_forward(x2, x2, x, NC); /* res2 */
        xsa_nn_layernorm_forward(ln, mean, rstd, x2, P(m, LI(l, LN2W)), P(m, LI(l, LN2B)), N, C);
        xsa_nn_linear_forward(fch, ln, P(m, LI(l, FCW)), P(m, LI(l, FCB)), N, C, 4 * C);
        xsa_nn_gelu_forward(fch, fch, NC * 4);
        xsa_nn_linear_forward(x, fch, P(m, LI(l, FPW)), P(m, LI(l, FPB)), N, 4 * C, C);
        xsa_nn_residual_forward(x, x, x2, NC); /* res3, the next layer's input */
    }
    int lf = 2 + L * NPL;
    xsa_nn_layernorm_forward(ln, mean, rstd, x, P(m, lf), P(m, lf + 1), N, C);
    return ln;
}

/* The mean cross-entropy of the logits lnf wte^T against targets, through
 * the fused, chunked lm_head (nn.h); with dlnf and dw also its gradient. */
static int lm_loss(xsa_gpt *m, const float *lnf, const int32_t *targets, int B, int T,
                   float *dlnf, float *dw, float *loss)
{
    int C = m->cfg.d_model, V = m->cfg.vocab, bf16 = m->cfg.precision == XSA_PREC_BF16;
    int N = B * T, R = xsa_nn_lmhead_rows(N, V, bf16);
    xsa_nn_bf16 bf = {m->mm, NULL};
    float *w16 = NULL;
    if (bf16) {
        /* wte in bf16, rounded from the float32 master weights */
        w16 = xsa_pool_get(XSA_POOL_BF16, ((size_t)V * C + 1) / 2);
        if (!w16) return -1;
        xsa_bf16_from_f32((uint16_t *)w16, P(m, 0), (size_t)V * C);
        bf.wte = (const uint16_t *)w16;
    }
    float *s = xsa_pool_get(XSA_POOL_SCRATCH, step_scratch_floats(m, B, T));
    if (!s) {
        xsa_pool_put(w16);
        return -1;
    }
    double l = 0.0;
    int rc = xsa_nn_lmhead_ce(&l, dlnf, dw, NULL, s, lnf, P(m, 0), targets, N, C, V, R,
                              xsa_threads(), bf16 ? &bf : NULL);
    xsa_pool_put(s);
    xsa_pool_put(w16);
    if (rc == 0 && loss) *loss = (float)l;
    return rc;
}

static int forward(xsa_gpt *m, const int32_t *inputs, const int32_t *targets, int B, int T,
                   float *loss, int save)
{
    if (check_batch(m, inputs, B, T) != 0) return -1;
    if (check_tokens(m, "input", inputs, B, T) != 0) return -1;
    if (targets && check_tokens(m, "target", targets, B, T) != 0) return -1;
    m->gen++;
    m->have_targets = 0;
    m->have_logits = 0;
    m->logits_ready = 0;
    int C = m->cfg.d_model, V = m->cfg.vocab, L = m->cfg.n_layer, N = B * T;
    if (targets) {
        /* a training or evaluation run: the logits are not wanted */
        free(m->logits);
        m->logits = NULL;
        m->logits_cap = 0;
    }
    if (targets && !save) {
        /* evaluation: no activations kept, one working set for every layer */
        release_acts(m);
        float *w = xsa_pool_get(XSA_POOL_ACTS, eval_floats(m, B, T));
        if (!w) return -1;
        float *lnf = run_blocks_eval(m, inputs, B, T, w);
        int rc = lm_loss(m, lnf, targets, B, T, NULL, NULL, loss);
        xsa_pool_put(w);
        return rc;
    }
    if (!targets) release_pending(m);
    if (ensure_acts(m, B, T) != 0) return -1;
    m->B = B;
    m->T = T;
    memcpy(m->tokens, inputs, (size_t)N * sizeof(int32_t));
    if (targets) memcpy(m->tokens + N, targets, (size_t)N * sizeof(int32_t));
    if (run_blocks(m, B, T, NULL, 0) != 0) return -1;
    m->have_acts = 1;
    int lf = 2 + L * NPL;
    xsa_nn_layernorm_forward(m->lnf, m->lnfm, m->lnfr, m->la[L - 1].res3, P(m, lf), P(m, lf + 1), N, C);
    m->have_logits = 1;
    if (!targets) /* logits asked for: computed now */
        return xsa_gpt_logits(m) ? 0 : -1;
    if (!m->pend_dw) m->pend_dw = xsa_pool_get(XSA_POOL_PENDING, (size_t)V * C);
    if (!m->pend_dw) return -1;
    if (lm_loss(m, m->lnf, m->tokens + N, B, T, m->dlnf, m->pend_dw, loss) != 0) return -1;
    m->have_targets = 1;
    return 0;
}

const float *xsa_gpt_logits(const xsa_gpt *cm)
{
    /* the logits are a cache of the last forward: computed on first use */
    xsa_gpt *m = (xsa_gpt *)cm;
    if (!m->have_logits) return NULL;
    if (!m->logits_ready) {
        size_t n = (size_t)m->B * m->T * (size_t)m->cfg.vocab;
        if (n > m->logits_cap) {
            free(m->logits);
            m->logits = malloc(n * sizeof(float));
            m->logits_cap = m->logits ? n : 0;
            if (!m->logits) {
                xsa_error("gpt: out of memory for the logits of batch %dx%d (%zu MB)", m->B, m->T,
                          n * sizeof(float) >> 20);
                return NULL;
            }
        }
        xsa_nn_lmhead_forward(m->logits, m->lnf, P(m, 0), m->B * m->T, m->cfg.d_model,
                              m->cfg.vocab);
        m->logits_ready = 1;
    }
    return m->logits;
}

/* The bias gradient of c_attn, dqkv[N,3C] -> db[3C], without its key
 * third: adding a constant to every key shifts a row of scores by q.b, which
 * the softmax ignores, so d/d(key bias) is exactly zero. Summing float dqkv
 * would give rounding noise instead, and AdamW's first step (m/sqrt(v), about
 * sign(g)) turns noise into full-size updates of lr. */
static void qkv_bias_backward(float *db, const float *dqkv, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const float *d = dqkv + (size_t)n * 3 * C;
        for (int c = 0; c < C; c++) db[c] += d[c];
        for (int c = 2 * C; c < 3 * C; c++) db[c] += d[c];
    }
}

int xsa_gpt_backward(xsa_gpt *m, float dloss)
{
    if (!m->have_targets)
        return xsa_error("gpt backward: no forward with targets to differentiate (run the loss first)");
    int B = m->B, T = m->T, C = m->cfg.d_model, V = m->cfg.vocab, NH = m->cfg.n_head;
    int L = m->cfg.n_layer, N = B * T;
    size_t NC = (size_t)N * C;
    /* one backward per forward: the gradients accumulate, and running it
     * twice by accident would double them silently */
    m->have_targets = 0;
    xsa_storage_bump_version(m->gstore); /* the gradients are added to in place */
    /* scratch from the pool (shared with other models between steps) */
    float *scr = xsa_pool_get(XSA_POOL_SCRATCH, step_scratch_floats(m, B, T));
    if (!scr) {
        release_acts(m);
        return -1;
    }
    float *dres = scr, *dA = dres + NC, *dqkv = dA + NC, *dfch = dqkv + 3 * NC;
    float *dfchg = dfch + 4 * NC, *ascratch = dfchg + 4 * NC;
    /* the lm_head and the loss: their gradient came with the forward
     * (dloss = 1); scaled by dloss into place */
    for (size_t i = 0; i < NC; i++) dA[i] = dloss * m->dlnf[i];
    cblas_saxpy(V * C, dloss, m->pend_dw, 1, G(m, 0), 1);
    release_pending(m);
    int lf = 2 + L * NPL;
    memset(dres, 0, NC * sizeof(float));
    xsa_nn_layernorm_backward(dres, G(m, lf), G(m, lf + 1), dA, m->la[L - 1].res3, P(m, lf),
                              m->lnfm, m->lnfr, N, C);
    for (int l = L - 1; l >= 0; l--) {
        layer_acts *a = &m->la[l];
        const float *x = l == 0 ? m->encoded : m->la[l - 1].res3;
        /* res3 = res2 + mlp(ln_2(res2)): dres flows to res2 unchanged */
        xsa_nn_gelu_forward(dfch, a->fch, NC * 4); /* gelu(fch) again, in dfch's space */
        memset(dfchg, 0, NC * 4 * sizeof(float));
        xsa_nn_linear_backward(dfchg, G(m, LI(l, FPW)), G(m, LI(l, FPB)), dres, dfch,
                               P(m, LI(l, FPW)), N, 4 * C, C);
        memset(dfch, 0, NC * 4 * sizeof(float));
        xsa_nn_gelu_backward(dfch, a->fch, dfchg, NC * 4);
        memset(dA, 0, NC * sizeof(float));
        xsa_nn_linear_backward(dA, G(m, LI(l, FCW)), G(m, LI(l, FCB)), dfch, a->ln2,
                               P(m, LI(l, FCW)), N, C, 4 * C);
        xsa_nn_layernorm_backward(dres, G(m, LI(l, LN2W)), G(m, LI(l, LN2B)), dA, a->res2,
                                  P(m, LI(l, LN2W)), a->ln2m, a->ln2r, N, C);
        /* res2 = x + c_proj(attn(c_attn(ln_1(x)))) */
        memset(dA, 0, NC * sizeof(float));
        xsa_nn_linear_backward(dA, G(m, LI(l, APW)), G(m, LI(l, APB)), dres, a->z,
                               P(m, LI(l, APW)), N, C, C);
        memset(dqkv, 0, NC * 3 * sizeof(float));
        xsa_nn_attention_backward(dqkv, ascratch, dA, a->qkv, a->att, a->y, B, T, C, NH,
                                  m->lambda_eff);
        memset(dA, 0, NC * sizeof(float));
        xsa_nn_linear_backward(dA, G(m, LI(l, QKVW)), NULL, dqkv, a->ln1,
                               P(m, LI(l, QKVW)), N, C, 3 * C);
        qkv_bias_backward(G(m, LI(l, QKVB)), dqkv, N, C);
        xsa_nn_layernorm_backward(dres, G(m, LI(l, LN1W)), G(m, LI(l, LN1B)), dA, x,
                                  P(m, LI(l, LN1W)), a->ln1m, a->ln1r, N, C);
    }
    xsa_nn_embedding_backward(G(m, 0), G(m, 1), dres, m->tokens, B, T, C);
    xsa_pool_put(scr);
    release_acts(m); /* for the next model's step */
    return 0;
}

const float *xsa_gpt_activation(const xsa_gpt *m, int layer, const char *name)
{
    if (!m->acts || !m->have_acts || layer < 0 || layer >= m->cfg.n_layer) return NULL;
    const layer_acts *a = &m->la[layer];
    if (strcmp(name, "qkv") == 0) return a->qkv;
    if (strcmp(name, "z") == 0) return a->z;
    if (strcmp(name, "y") == 0) return m->lambda_eff != 0.0f ? a->y : a->z;
    if (strcmp(name, "att") == 0) return a->att;
    return NULL;
}

int xsa_gpt_probe(xsa_gpt *m, const int32_t *inputs, int B, int T, double *out)
{
    if (check_batch(m, inputs, B, T) != 0) return -1;
    if (check_tokens(m, "input", inputs, B, T) != 0) return -1;
    m->gen++;
    m->have_targets = 0;
    m->have_logits = 0;
    release_pending(m);
    if (ensure_acts(m, B, T) != 0) return -1;
    m->B = B;
    m->T = T;
    memcpy(m->tokens, inputs, (size_t)B * T * sizeof(int32_t));
    if (run_blocks(m, B, T, out, 1) != 0) return -1;
    m->have_acts = 1;
    return 0;
}

/* ---- checkpoints ------------------------------------------------------- */

enum { NMETA = 8 };
static const char *const meta_keys[NMETA] = {"vocab", "n_layer", "d_model", "n_head",
                                             "seq_len", "attention", "lambda", "seed"};
static const char *const adam_keys[5] = {"adamw.lr", "adamw.beta1", "adamw.beta2", "adamw.eps",
                                         "adamw.weight_decay"};

static int opt_matches(const xsa_gpt *m, const xsa_adamw *o)
{
    if (o->n != m->ntensors) return 0;
    for (int i = 0; i < o->n; i++)
        if (o->params[i]->storage != m->pstore || o->params[i]->offset != m->params[i]->offset)
            return 0;
    return 1;
}

int xsa_gpt_save(const xsa_gpt *m, const char *path, const xsa_adamw *opt)
{
    if (opt && !opt_matches(m, opt))
        return xsa_error("gpt save: the optimizer does not hold exactly this model's parameters");
    int nt = m->ntensors, n = nt;
    char vals[NMETA + 5][40];
    const char *keys[NMETA + 5], *values[NMETA + 5];
    const xsa_gpt_config *c = &m->cfg;
    snprintf(vals[0], sizeof vals[0], "%d", c->vocab);
    snprintf(vals[1], sizeof vals[1], "%d", c->n_layer);
    snprintf(vals[2], sizeof vals[2], "%d", c->d_model);
    snprintf(vals[3], sizeof vals[3], "%d", c->n_head);
    snprintf(vals[4], sizeof vals[4], "%d", c->seq_len);
    snprintf(vals[5], sizeof vals[5], "%s", xsa_gpt_attention_name(c->attention));
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
        n = 3 * nt + 1;
    }
    for (int i = 0; i < nmeta; i++) values[i] = vals[i];
    const char **names = calloc((size_t)n, sizeof *names);
    char **owned = calloc((size_t)n, sizeof *owned);
    xsa_tensor **ts = calloc((size_t)n, sizeof *ts);
    int rc = -1, made = 0;
    if (!names || !owned || !ts) {
        xsa_error("gpt save: out of memory");
        goto done;
    }
    for (int i = 0; i < nt; i++) {
        names[i] = m->names[i];
        ts[i] = m->params[i];
    }
    if (opt) {
        float *base = opt->state->data;
        for (int i = 0; i < nt; i++) {
            const xsa_tensor *p = m->params[i];
            size_t len = strlen(m->names[i]) + 16;
            owned[made] = malloc(len);
            owned[made + 1] = malloc(len);
            xsa_tensor *tm = xsa_tensor_from_storage(opt->state, XSA_FLOAT32, p->ndim, p->shape,
                                                     (int64_t)(opt->m[i] - base));
            xsa_tensor *tv = xsa_tensor_from_storage(opt->state, XSA_FLOAT32, p->ndim, p->shape,
                                                     (int64_t)(opt->v[i] - base));
            ts[nt + 2 * i] = tm;
            ts[nt + 2 * i + 1] = tv;
            made += 2;
            if (!owned[made - 2] || !owned[made - 1] || !tm || !tv) {
                xsa_error("gpt save: out of memory");
                goto done;
            }
            snprintf(owned[made - 2], len, "adamw.m.%s", m->names[i]);
            snprintf(owned[made - 1], len, "adamw.v.%s", m->names[i]);
            names[nt + 2 * i] = owned[made - 2];
            names[nt + 2 * i + 1] = owned[made - 1];
        }
        int64_t sh[1] = {nt};
        xsa_tensor *steps = xsa_tensor_new(XSA_INT32, 1, sh);
        ts[3 * nt] = steps;
        names[3 * nt] = "adamw.steps";
        if (!steps) goto done;
        int32_t *s = xsa_tensor_i32(steps);
        for (int i = 0; i < nt; i++) s[i] = (int32_t)opt->steps[i];
    }
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
    if (opt_out) *opt_out = NULL;
    xsa_st_file *f = xsa_st_load(path);
    if (!f) return NULL;
    xsa_gpt *m = NULL;
    xsa_adamw *o = NULL;
    xsa_gpt_config c;
    long long iv[5];
    unsigned long long seed;
    const int64_t lim = (int64_t)1 << 30;
    for (int i = 0; i < 5; i++)
        if (meta_int(f, path, meta_keys[i], 0, lim, &iv[i]) != 0) goto fail;
    {
        const char *s = xsa_st_meta(f, "seed");
        char *end = NULL;
        errno = 0;
        unsigned long long u = s ? strtoull(s, &end, 10) : 0;
        if (!s || errno || end == s || *end || s[0] == '-') {
            if (s) xsa_error("%s: metadata seed = \"%s\" is not a non-negative integer", path, s);
            else xsa_error("%s: missing metadata key seed", path);
            goto fail;
        }
        seed = u;
    }
    c.vocab = (int)iv[0];
    c.n_layer = (int)iv[1];
    c.d_model = (int)iv[2];
    c.n_head = (int)iv[3];
    c.seq_len = (int)iv[4];
    c.seed = (uint64_t)seed;
    c.precision = XSA_PREC_F32;
    const char *att = xsa_st_meta(f, "attention");
    if (!att) {
        xsa_error("%s: missing metadata key attention", path);
        goto fail;
    }
    if (xsa_gpt_attention_parse(att, &c.attention) != 0) {
        xsa_error("%s: metadata attention = \"%s\" is not \"sa\" or \"xsa\"", path, att);
        goto fail;
    }
    if (meta_double(f, path, "lambda", &c.lambda) != 0) goto fail;
    if (xsa_gpt_config_validate(&c) != 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", xsa_last_error());
        xsa_error("%s: invalid configuration: %s", path, msg);
        goto fail;
    }
    m = gpt_alloc(&c);
    if (!m) goto fail;
    for (int i = 0; i < m->ntensors; i++)
        if (load_tensor(f, path, m->names[i], m->params[i], XSA_FLOAT32, P(m, i)) != 0) goto fail;
    int has_adam = 0;
    for (int i = 0; i < f->n; i++) {
        if (strncmp(f->names[i], "adamw.", 6) == 0) {
            has_adam = 1;
            continue;
        }
        if (!xsa_gpt_find_param(m, f->names[i])) {
            xsa_error("%s: unexpected tensor %s", path, f->names[i]);
            goto fail;
        }
    }
    if (opt_out && has_adam) {
        double h[5];
        for (int i = 0; i < 5; i++)
            if (meta_double(f, path, adam_keys[i], &h[i]) != 0) goto fail;
        o = xsa_adamw_new(m->ntensors, m->params, h[0], h[1], h[2], h[3], h[4]);
        if (!o) {
            char msg[256];
            snprintf(msg, sizeof msg, "%s", xsa_last_error());
            xsa_error("%s: invalid optimizer state: %s", path, msg);
            goto fail;
        }
        char name[160];
        for (int i = 0; i < m->ntensors; i++) {
            snprintf(name, sizeof name, "adamw.m.%s", m->names[i]);
            if (load_tensor(f, path, name, m->params[i], XSA_FLOAT32, o->m[i]) != 0) goto fail;
            snprintf(name, sizeof name, "adamw.v.%s", m->names[i]);
            if (load_tensor(f, path, name, m->params[i], XSA_FLOAT32, o->v[i]) != 0) goto fail;
        }
        xsa_tensor *st = xsa_st_get(f, "adamw.steps");
        if (!st || st->dtype != XSA_INT32 || st->ndim != 1 || st->shape[0] != m->ntensors) {
            xsa_error("%s: missing or malformed tensor adamw.steps (int32 [%d])", path, m->ntensors);
            goto fail;
        }
        const int32_t *s = xsa_tensor_i32(st);
        for (int i = 0; i < m->ntensors; i++) {
            if (s[i] < 0) {
                xsa_error("%s: adamw.steps holds a negative count", path);
                goto fail;
            }
            o->steps[i] = s[i];
        }
        *opt_out = o;
    }
    xsa_st_free(f);
    return m;
fail:
    xsa_adamw_free(o);
    xsa_gpt_free(m);
    xsa_st_free(f);
    return NULL;
}

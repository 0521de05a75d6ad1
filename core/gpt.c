/*
 * gpt.c: the GPT model of gpt.h: parameters in one block and gradients in
 * another (views exposed as tensors, named through the layout of
 * gpt_params.c), activations in reused buffers, and the training step:
 * the forward, the evaluation and the probe run the block of block.c with
 * the full attention, the backward its backward, then the loss through the
 * fused lm_head of nn.h.
 *
 * Non-goals: generic layer graphs (the Lua autograd does that), dropout,
 * sampling and the key/value cache (kv_cache.c), checkpoints
 * (gpt_checkpoint.c), mixed precision beyond the bf16 lm_head.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attention.h"
#include "ckd.h"

#include "gemm.h"
#include "gpt_impl.h"
#include "matmul_bf16.h"
#include "pool.h"
#include "system.h"

struct xsa_gpt {
    long refcount;
    xsa_gpt_config cfg;
    const xsa_attention_variant *var; /* cfg.attention's (attention.h) */
    int ntensors;
    char **names;
    xsa_tensor **params;       /* views into pstore; ->grad views into gstore */
    xsa_storage *pstore, *gstore;
    size_t nparams;
    xsa_gpt_tensors w;         /* the parameters by name (w.h: n_layer blocks) */
    xsa_gpt_layer *gh;         /* n_layer blocks for the gradients' names */
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
    xsa_gpt_acts *la;          /* per block (fchg: a scratch buffer during the forward) */
    float *encoded, *lnf, *lnfm, *lnfr;
    /* the lm_head's gradient (dloss = 1), computed with the loss by the
     * fused kernel and scaled into place by the backward: dlnf [N,C] in
     * acts, pend_dw [V,C] from the pool (pool.h) until the backward */
    float *dlnf, *pend_dw;
    /* the last chunk's dwte products, left by the loss to run beside the
     * blocks' backward (nn.h), and the lm_head scratch they read */
    xsa_nn_lmhead_tail *tail;
    float *tail_s;
    /* logits [B,T,V], only when asked for (xsa_gpt_logits) */
    float *logits;
    size_t logits_cap;         /* floats */
    int logits_ready;
    xsa_bf16_mm *mm;           /* precision bf16: the oneDNN products of the lm_head */
    /* an external attention (gpt.h), when has_ext; ext_saved[l]: what
     * block l's backward needs from it, from a forward with targets */
    xsa_gpt_ext_attention ext;
    int has_ext;
    void **ext_saved;
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

const char *xsa_gpt_attention_name(xsa_attention a)
{
    const xsa_attention_variant *v = xsa_attention_get((int)a);
    return v ? v->name : "(unknown)";
}

const char *const *xsa_gpt_attention_names(void)
{
    static const char *names[] = {
#define X(n) #n,
        XSA_ATTENTION_VARIANTS(X)
#undef X
        NULL};
    return names;
}

int xsa_gpt_attention_takes_lambda(xsa_attention a)
{
    const xsa_attention_variant *v = xsa_attention_get((int)a);
    return v && v->takes_lambda;
}

/* "\"sa\", \"xsa\" or ..." into buf */
static const char *name_list(char *buf, size_t n)
{
    size_t k = 0;
    int N = xsa_attention_count();
    buf[0] = 0;
    for (int i = 0; i < N && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s\"%s\"", i == 0 ? "" : i == N - 1 ? " or " : ", ",
                              xsa_attention_get(i)->name);
    return buf;
}

int xsa_gpt_attention_parse(const char *s, xsa_attention *out)
{
    for (int i = 0; s && i < xsa_attention_count(); i++)
        if (strcmp(s, xsa_attention_get(i)->name) == 0) {
            *out = (xsa_attention)i;
            return 0;
        }
    char buf[256];
    return xsa_error("gpt: attention must be %s (got \"%s\")", name_list(buf, sizeof buf),
                     s ? s : "(null)");
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
    if (!xsa_attention_get((int)c->attention)) {
        char buf[256];
        return xsa_error("gpt: attention must be %s", name_list(buf, sizeof buf));
    }
    if (!isfinite(c->lambda)) return xsa_error("gpt: lambda must be finite (got %g)", c->lambda);
    if (c->precision != XSA_PREC_F32 && c->precision != XSA_PREC_BF16)
        return xsa_error("gpt: precision must be \"f32\" or \"bf16\"");
    double total = xsa_gpt_layout_numel(c);
    if (total > (double)XSA_MAX_NUMEL)
        return xsa_error("gpt: %.0f parameters is too many", total);
    return 0;
}

/* ---- construction ------------------------------------------------------ */

static inline float *P(const xsa_gpt *m, int idx) { return xsa_tensor_f32(m->params[idx]); }

static void set_variant(xsa_gpt *m)
{
    m->var = xsa_attention_get((int)m->cfg.attention);
}

/* One stream of normals over the tensors in layout order (gpt.h). */
static void init_weights(xsa_gpt *m)
{
    xsa_rng g;
    xsa_rng_seed(&g, m->cfg.seed);
    for (int i = 0; i < m->ntensors; i++) {
        float *p = P(m, i);
        size_t n = (size_t)xsa_tensor_numel(m->params[i]);
        xsa_gpt_tensor_info t;
        xsa_gpt_layout_info(&m->cfg, i, &t);
        if (t.std > 0.0) {
            xsa_rng_normal_fill(&g, p, n, t.std); /* (float)(xsa_rng_normal(&g) * t.std) */
        } else if (t.fill != 0.0f) {
            for (size_t j = 0; j < n; j++) p[j] = t.fill;
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

xsa_gpt *xsa_gpt_alloc(const xsa_gpt_config *c)
{
    if (xsa_gpt_config_validate(c) != 0) return NULL;
    if (xsa_gemm_init() != 0) return NULL; /* a bad XSA_GEMM fails here, not silently later */
    double nparams = xsa_gpt_layout_numel(c);
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
    if (!(m->tail = xsa_nn_lmhead_tail_new())) {
        xsa_bf16_mm_free(m->mm);
        free(m);
        return NULL;
    }
    set_variant(m);
    m->ntensors = xsa_gpt_layout_count(c->n_layer);
    m->names = calloc((size_t)m->ntensors, sizeof *m->names);
    m->params = calloc((size_t)m->ntensors, sizeof *m->params);
    m->la = calloc((size_t)c->n_layer, sizeof *m->la);
    m->w.h = calloc((size_t)c->n_layer, sizeof *m->w.h);
    m->gh = calloc((size_t)c->n_layer, sizeof *m->gh);
    m->ext_saved = calloc((size_t)c->n_layer, sizeof *m->ext_saved);
    if (!m->names || !m->params || !m->la || !m->w.h || !m->gh || !m->ext_saved) goto fail;
    m->nparams = (size_t)nparams; /* validated: at most XSA_MAX_NUMEL */
    m->pstore = xsa_storage_new(m->nparams * sizeof(float));
    m->gstore = xsa_storage_new(m->nparams * sizeof(float));
    if (!m->pstore || !m->gstore) goto fail;
    size_t off = 0;
    for (int i = 0; i < m->ntensors; i++) {
        xsa_gpt_tensor_info t;
        xsa_gpt_layout_info(c, i, &t);
        m->names[i] = strdup(t.name);
        m->params[i] = xsa_tensor_from_storage(m->pstore, XSA_FLOAT32, t.ndim, t.shape, (int64_t)off);
        if (!m->names[i] || !m->params[i]) goto fail;
        m->params[i]->grad = xsa_tensor_from_storage(m->gstore, XSA_FLOAT32, t.ndim, t.shape, (int64_t)off);
        if (!m->params[i]->grad) goto fail;
        m->params[i]->requires_grad = 1;
        xsa_gpt_layout_point(&m->w, c->n_layer, i, P(m, i));
        off += (size_t)xsa_tensor_numel(m->params[i]);
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
    xsa_gpt *m = xsa_gpt_alloc(c);
    if (m) init_weights(m);
    return m;
}

void xsa_gpt_retain(xsa_gpt *m) { m->refcount++; }

/* Gives back what the external attention kept for a backward that will
 * not come. */
static void drop_saved(xsa_gpt *m)
{
    for (int l = 0; m->ext_saved && l < m->cfg.n_layer; l++)
        if (m->ext_saved[l]) {
            m->ext.drop(m->ext.ud, m->ext_saved[l]);
            m->ext_saved[l] = NULL;
        }
}

static void set_ext(xsa_gpt *m, const xsa_gpt_ext_attention *e)
{
    drop_saved(m);
    if (e) e->retain(e->ud);
    if (m->has_ext) m->ext.release(m->ext.ud);
    m->has_ext = e != NULL;
    if (e) m->ext = *e;
}

void xsa_gpt_free(xsa_gpt *m)
{
    if (!m || --m->refcount > 0) return;
    set_ext(m, NULL);
    free(m->ext_saved);
    for (int i = 0; i < m->ntensors; i++) {
        if (m->names) free(m->names[i]);
        if (m->params) xsa_tensor_free(m->params[i]);
    }
    free(m->names);
    free(m->params);
    free(m->la);
    free(m->w.h);
    free(m->gh);
    xsa_storage_free(m->pstore);
    xsa_storage_free(m->gstore);
    xsa_pool_put(m->acts);
    free(m->tokens);
    free(m->logits);
    xsa_nn_lmhead_tail_free(m->tail);
    xsa_pool_put(m->tail_s);
    xsa_pool_put(m->pend_dw);
    xsa_bf16_mm_free(m->mm);
    free(m);
}

/* Gives the pending lm_head gradient back to the pool (no backward will
 * use it). */
static void release_tail(xsa_gpt *m)
{
    xsa_nn_lmhead_tail_drop(m->tail);
    xsa_pool_put(m->tail_s);
    m->tail_s = NULL;
}

static void release_pending(xsa_gpt *m)
{
    release_tail(m);
    xsa_pool_put(m->pend_dw);
    m->pend_dw = NULL;
}

/* Gives the activation block back to the pool, with the pending gradient
 * (the logits stay if they were computed). */
static void release_acts(xsa_gpt *m)
{
    release_pending(m);
    drop_saved(m);
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
    xsa_gpt *n = xsa_gpt_alloc(&c);
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
    set_variant(m);
    set_ext(m, NULL);
    m->gen++;
    release_acts(m);
    return 0;
}

int xsa_gpt_set_ext_attention(xsa_gpt *m, const xsa_gpt_ext_attention *e)
{
    if (e && (!e->forward || !e->backward || !e->drop || !e->retain || !e->release))
        return xsa_error("gpt set_ext_attention: every function of the attention is needed");
    m->cfg.attention = XSA_ATTN_SA;
    set_variant(m);
    set_ext(m, e);
    m->gen++;
    release_acts(m);
    return 0;
}

const xsa_gpt_ext_attention *xsa_gpt_ext(const xsa_gpt *m) { return m->has_ext ? &m->ext : NULL; }

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

const xsa_gpt_tensors *xsa_gpt_weights(const xsa_gpt *m) { return &m->w; }
xsa_tensor **xsa_gpt_params(const xsa_gpt *m) { return m->params; }

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
                                             (size_t)T, &bad); /* an upper bound past the full kernel */
    if (!bad) att = xsa_nn_attention_saved_floats(B, T, (int)C, (int)NH);
    /* per layer: 11 N*C (qkv 3, y, z, res2, fch 4, res3), 4 N, the attention's
     * saved floats. ln1 and ln2 share one N*C buffer over every layer (the
     * backward recomputes them, as it does gelu(fch)); no [N,V] buffer: the
     * loss runs over chunks of rows (xsa_nn_lmhead_ce). The block comes from
     * the pool (pool.h) and goes back after the backward, as does the
     * backward's scratch */
    size_t per_layer = addz(addz(mulz(NC, 11, &bad), mulz(N, 4, &bad), &bad), att, &bad);
    size_t total = mulz(NC, 2, &bad);                             /* encoded, ln */
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
    float *ln = p;
    p += N * C;
    for (size_t l = 0; l < L; l++) {
        xsa_gpt_acts *a = &m->la[l];
        a->ln1 = a->ln2 = ln;
        TAKE(a->ln1m, N);
        TAKE(a->ln1r, N);
        TAKE(a->qkv, N * 3 * C);
        TAKE(a->y, N * C);
        TAKE(a->att, att);
        TAKE(a->z, N * C);
        TAKE(a->res2, N * C);
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

/* Floats of the backward's own scratch at (B, T): the blocks' part of the step's
 * scratch below. */
static size_t backward_floats(const xsa_gpt *m, int B, int T)
{
    size_t C = (size_t)m->cfg.d_model, N = (size_t)B * T;
    return N * C * 13 + xsa_nn_attention_scratch_floats(B, T, (int)C, m->cfg.n_head);
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
    size_t b = backward_floats(m, B, T), c = N * C * 4;
    return a > b ? (a > c ? a : c) : (b > c ? b : c);
}

/* The full attention of a batch [B,T] of this model (probe: NULL, or
 * where the per-block statistics go). */
static xsa_gpt_full_attention full_attention(const xsa_gpt *m, int B, int T, double *probe)
{
    return (xsa_gpt_full_attention){B, T, m->cfg.d_model, m->cfg.n_head, m->var, (float)m->cfg.lambda,
                                    probe, m->has_ext ? &m->ext : NULL, NULL};
}

/* Embedding and blocks, keeping every block's activations for the
 * backward (and, with keep, what an external attention's backward needs).
 * probe (or NULL) receives per-layer statistics; with probe_only the last
 * block stops after its attention (the probe needs no more). gelu(fch)
 * goes through a scratch buffer from the pool: the backward recomputes
 * it. */
static int run_blocks(xsa_gpt *m, int B, int T, double *probe, int probe_only, int keep)
{
    int C = m->cfg.d_model, L = m->cfg.n_layer, N = B * T, rc = 0;
    float *fchg = xsa_pool_get(XSA_POOL_SCRATCH, step_scratch_floats(m, B, T));
    if (!fchg) return -1;
    xsa_gpt_full_attention fa = full_attention(m, B, T, probe);
    if (keep) fa.saved = m->ext_saved;
    xsa_gpt_variant v = {xsa_nn_linear_forward, xsa_gpt_attend_full, &fa};
    xsa_nn_embedding_forward(m->encoded, m->tokens, m->w.wte, m->w.wpe, B, T, C);
    for (int l = 0; l < L && rc == 0; l++) {
        xsa_gpt_acts a = m->la[l];
        a.fchg = fchg;
        const float *x = l == 0 ? m->encoded : m->la[l - 1].res3;
        rc = xsa_gpt_block_forward(&m->w.h[l], x, &a, N, C, l, &v, probe_only && l == L - 1);
    }
    xsa_pool_put(fchg);
    if (rc != 0) drop_saved(m);
    return rc;
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
    return N * C * 12 + 2 * N + xsa_nn_attention_saved_floats(B, T, (int)C, (int)NH);
}

/* Embedding, blocks and ln_f for a loss alone, in the working set w
 * (eval_floats): returns ln_f's output rows [N,C] (inside w). The block of
 * the training forward over one set of buffers that every block reuses
 * (its output lands in its input's place), so the loss is the same. */
static float *run_blocks_eval(xsa_gpt *m, const int32_t *inputs, int B, int T, float *w)
{
    int C = m->cfg.d_model, L = m->cfg.n_layer, N = B * T;
    size_t NC = (size_t)N * C;
    float *x = w, *x2 = x + NC, *ln = x2 + NC, *mean = ln + NC, *rstd = mean + N;
    float *qkv = rstd + N, *y = qkv + 3 * NC, *z = y + NC, *fch = z + NC, *att = fch + 4 * NC;
    xsa_gpt_acts a = {.ln1 = ln, .ln1m = mean, .ln1r = rstd, .qkv = qkv, .y = y, .att = att,
                      .z = z, .res2 = x2, .ln2 = ln, .ln2m = mean, .ln2r = rstd,
                      .fch = fch, .fchg = fch, .res3 = x};
    xsa_gpt_full_attention fa = full_attention(m, B, T, NULL);
    xsa_gpt_variant v = {xsa_nn_linear_forward, xsa_gpt_attend_full, &fa};
    xsa_nn_embedding_forward(x, inputs, m->w.wte, m->w.wpe, B, T, C);
    for (int l = 0; l < L; l++)
        if (xsa_gpt_block_forward(&m->w.h[l], x, &a, N, C, l, &v, 0) != 0) return NULL;
    xsa_nn_layernorm_forward(ln, mean, rstd, x, m->w.lnfw, m->w.lnfb, N, C);
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
        xsa_bf16_from_f32((uint16_t *)w16, m->w.wte, (size_t)V * C);
        bf.wte = (const uint16_t *)w16;
    }
    release_tail(m); /* a loss whose backward never came: its scratch is this one's */
    float *s = xsa_pool_get(XSA_POOL_SCRATCH, step_scratch_floats(m, B, T));
    if (!s) {
        xsa_pool_put(w16);
        return -1;
    }
    double l = 0.0;
    int rc = xsa_nn_lmhead_ce_defer(&l, dlnf, dw, NULL, s, lnf, m->w.wte, targets, N, C, V, R,
                                    xsa_threads(), bf16 ? &bf : NULL, dw ? m->tail : NULL);
    if (rc == 0 && xsa_nn_lmhead_tail_pending(m->tail))
        m->tail_s = s; /* the backward's, until its tail is done */
    else
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
        int rc = lnf ? lm_loss(m, lnf, targets, B, T, NULL, NULL, loss) : -1;
        xsa_pool_put(w);
        return rc;
    }
    if (!targets) release_pending(m);
    if (ensure_acts(m, B, T) != 0) return -1;
    m->B = B;
    m->T = T;
    memcpy(m->tokens, inputs, (size_t)N * sizeof(int32_t));
    if (targets) memcpy(m->tokens + N, targets, (size_t)N * sizeof(int32_t));
    drop_saved(m);
    if (run_blocks(m, B, T, NULL, 0, targets != NULL) != 0) return -1;
    m->have_acts = 1;
    xsa_nn_layernorm_forward(m->lnf, m->lnfm, m->lnfr, m->la[L - 1].res3, m->w.lnfw, m->w.lnfb, N, C);
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
        xsa_nn_lmhead_forward(m->logits, m->lnf, m->w.wte, m->B * m->T, m->cfg.d_model,
                              m->cfg.vocab);
        m->logits_ready = 1;
    }
    return m->logits;
}

/* The gradients by name: views of the gradient block unless a script
 * has given a parameter another .grad (the Lua loss checks its shape). */
static xsa_gpt_tensors grads(const xsa_gpt *m)
{
    xsa_gpt_tensors g = {.h = m->gh};
    for (int i = 0; i < m->ntensors; i++)
        xsa_gpt_layout_point(&g, m->cfg.n_layer, i, xsa_tensor_f32(m->params[i]->grad));
    return g;
}

int xsa_gpt_backward(xsa_gpt *m, float dloss)
{
    if (!m->have_targets)
        return xsa_error("gpt backward: no forward with targets to differentiate (run the loss first)");
    if (!xsa_nn_lmhead_tail_pending(m->tail)) /* the loss leaves one whenever it sets have_targets */
        return xsa_error("gpt backward: the lm_head's last products are missing");
    int B = m->B, T = m->T, C = m->cfg.d_model;
    int L = m->cfg.n_layer, N = B * T;
    size_t NC = (size_t)N * C;
    /* one backward per forward: the gradients accumulate, and running it
     * twice by accident would double them silently */
    m->have_targets = 0;
    xsa_storage_bump_version(m->gstore); /* the gradients are added to in place */
    /* scratch from the pool (shared with other models between steps): the
     * blocks' part alone, the lm_head's is held by its tail till the end */
    float *scr = xsa_pool_get(XSA_POOL_SCRATCH, backward_floats(m, B, T));
    if (!scr) {
        release_acts(m);
        return -1;
    }
    float *dres = scr;
    xsa_gpt_block_scratch bs;
    bs.dA = dres + NC;
    bs.dqkv = bs.dA + NC;
    bs.dfch = bs.dqkv + 3 * NC;
    bs.dfchg = bs.dfch + 4 * NC;
    bs.ascratch = bs.dfchg + 4 * NC;
    xsa_gpt_tensors g = grads(m);
    /* the lm_head and the loss: their gradient came with the forward
     * (dloss = 1); scaled by dloss into place */
    for (size_t i = 0; i < NC; i++) bs.dA[i] = dloss * m->dlnf[i];
    /* the lm_head's last dwte products on the other threads meanwhile (the
     * blocks' backward kernels are mostly too small to split: on 2 cores
     * it used 1.1 of them), each row added to wte's gradient when done,
     * before the embedding's */
    xsa_nn_lmhead_tail_start(m->tail, g.wte, dloss);
    memset(dres, 0, NC * sizeof(float));
    xsa_nn_layernorm_backward(dres, g.lnfw, g.lnfb, bs.dA, m->la[L - 1].res3, m->w.lnfw,
                              m->lnfm, m->lnfr, N, C);
    xsa_gpt_full_attention fa = full_attention(m, B, T, NULL);
    fa.saved = m->ext_saved;
    int rb = 0;
    for (int l = L - 1; l >= 0 && rb == 0; l--) {
        const float *x = l == 0 ? m->encoded : m->la[l - 1].res3;
        rb = xsa_gpt_block_backward(&m->w.h[l], &g.h[l], x, &m->la[l], dres, &bs, &fa, l);
    }
    int rc = xsa_nn_lmhead_tail_finish(m->tail); /* its threads end before anything returns */
    if (rb != 0) rc = -1;
    if (rc == 0) xsa_nn_embedding_backward(g.wte, g.wpe, dres, m->tokens, B, T, C);
    xsa_pool_put(scr);
    release_acts(m); /* for the next model's step */
    return rc;
}

const float *xsa_gpt_activation(const xsa_gpt *m, int layer, const char *name)
{
    if (!m->acts || !m->have_acts || layer < 0 || layer >= m->cfg.n_layer) return NULL;
    const xsa_gpt_acts *a = &m->la[layer];
    if (strcmp(name, "qkv") == 0) return a->qkv;
    if (strcmp(name, "z") == 0) return a->z;
    if (strcmp(name, "y") == 0) return m->has_ext ? NULL : m->var->forward ? a->y : a->z;
    if (strcmp(name, "att") == 0) return m->T <= XSA_NN_ATTN_FULL_MAX && !m->has_ext ? a->att : NULL;
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
    drop_saved(m);
    if (run_blocks(m, B, T, out, 1, 0) != 0) return -1;
    m->have_acts = 1;
    return 0;
}

/*
 * gpt_params.c: the model's parameter layout (gpt_impl.h), written once:
 * which tensors a GPT of a given configuration has, in checkpoint order,
 * their GPT-2 names and shapes, how each is initialised, and which named
 * field of xsa_gpt_tensors each one is. The model (gpt.c), its checkpoints
 * (gpt_checkpoint.c) and the key/value cache (kv_cache.c, through the named
 * fields) all read the layout from here.
 *
 * Non-goals: allocation (gpt.c carves the tensors out of one block),
 * other architectures.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>

#include "gpt_impl.h"

/* A size along one dimension, in terms of the configuration. */
typedef enum { D_NONE, D_C, D_3C, D_4C, D_V, D_T } dim;
/* Initialisation: N(0, 0.02); N(0, 0.02 / sqrt(2 n_layer)) for the
 * projections into the residual stream (GPT-2); ones; zeros. */
typedef enum { I_STD, I_PROJ, I_ONE, I_ZERO } init;

typedef struct {
    const char *name;
    size_t at; /* offset of the named pointer in its struct */
    dim rows, cols;
    init init;
} spec;

#define TOP(f) offsetof(xsa_gpt_tensors, f)
#define LAYER(f) offsetof(xsa_gpt_layer, f)

static const spec head[] = {
    {"wte.weight", TOP(wte), D_V, D_C, I_STD},
    {"wpe.weight", TOP(wpe), D_T, D_C, I_STD},
};

/* per block, h.{l}.<name> */
static const spec layer[] = {
    {"ln_1.weight", LAYER(ln1w), D_C, D_NONE, I_ONE},
    {"ln_1.bias", LAYER(ln1b), D_C, D_NONE, I_ZERO},
    {"attn.c_attn.weight", LAYER(qkvw), D_C, D_3C, I_STD},
    {"attn.c_attn.bias", LAYER(qkvb), D_3C, D_NONE, I_ZERO},
    {"attn.c_proj.weight", LAYER(apw), D_C, D_C, I_PROJ},
    {"attn.c_proj.bias", LAYER(apb), D_C, D_NONE, I_ZERO},
    {"ln_2.weight", LAYER(ln2w), D_C, D_NONE, I_ONE},
    {"ln_2.bias", LAYER(ln2b), D_C, D_NONE, I_ZERO},
    {"mlp.c_fc.weight", LAYER(fcw), D_C, D_4C, I_STD},
    {"mlp.c_fc.bias", LAYER(fcb), D_4C, D_NONE, I_ZERO},
    {"mlp.c_proj.weight", LAYER(fpw), D_4C, D_C, I_PROJ},
    {"mlp.c_proj.bias", LAYER(fpb), D_C, D_NONE, I_ZERO},
};

static const spec tail[] = {
    {"ln_f.weight", TOP(lnfw), D_C, D_NONE, I_ONE},
    {"ln_f.bias", TOP(lnfb), D_C, D_NONE, I_ZERO},
};

enum {
    NHEAD = sizeof head / sizeof head[0],
    NPL = sizeof layer / sizeof layer[0],
    NTAIL = sizeof tail / sizeof tail[0]
};

/* Every field of xsa_gpt_layer is named by exactly one row of layer[]. */
_Static_assert(sizeof(xsa_gpt_layer) == NPL * sizeof(float *), "layer[] names every field");

int xsa_gpt_layout_count(int n_layer) { return NHEAD + n_layer * NPL + NTAIL; }

/* The spec of tensor i, and its block (-1 outside the blocks). */
static const spec *find(int n_layer, int i, int *block)
{
    *block = -1;
    if (i < NHEAD) return &head[i];
    i -= NHEAD;
    if (i < n_layer * NPL) {
        *block = i / NPL;
        return &layer[i % NPL];
    }
    return &tail[i - n_layer * NPL];
}

static int64_t size_of(const xsa_gpt_config *c, dim d)
{
    int64_t C = c->d_model;
    switch (d) {
    case D_C: return C;
    case D_3C: return 3 * C;
    case D_4C: return 4 * C;
    case D_V: return c->vocab;
    case D_T: return c->seq_len;
    default: return 1;
    }
}

void xsa_gpt_layout_info(const xsa_gpt_config *c, int i, xsa_gpt_tensor_info *out)
{
    int block;
    const spec *s = find(c->n_layer, i, &block);
    if (block >= 0) snprintf(out->name, sizeof out->name, "h.%d.%s", block, s->name);
    else snprintf(out->name, sizeof out->name, "%s", s->name);
    out->ndim = s->cols == D_NONE ? 1 : 2;
    out->shape[0] = size_of(c, s->rows);
    out->shape[1] = out->ndim == 2 ? size_of(c, s->cols) : 0;
    out->std = s->init == I_STD ? 0.02 : s->init == I_PROJ ? 0.02 / sqrt(2.0 * c->n_layer) : 0.0;
    out->fill = s->init == I_ONE ? 1.0f : 0.0f;
}

double xsa_gpt_layout_numel(const xsa_gpt_config *c)
{
    double total = 0.0;
    for (int i = 0; i < xsa_gpt_layout_count(c->n_layer); i++) {
        int block;
        const spec *s = find(c->n_layer, i, &block);
        total += (double)size_of(c, s->rows) * (double)size_of(c, s->cols);
    }
    return total;
}

void xsa_gpt_layout_point(xsa_gpt_tensors *t, int n_layer, int i, float *data)
{
    int block;
    const spec *s = find(n_layer, i, &block);
    char *base = block >= 0 ? (char *)&t->h[block] : (char *)t;
    *(float **)(base + s->at) = data;
}

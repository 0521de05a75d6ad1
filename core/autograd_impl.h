/*
 * autograd_impl.h: what autograd.c (the engine), autograd_ops.c (backward
 * rules of the tensor ops) and autograd_nn.c (the fused nn ops) share.
 * Internal to the core (not installed, not part of the contract in
 * autograd.h).
 *
 * An op records itself in three steps: xsa_agi_any_needs says whether any
 * input wants a gradient (and grad mode is on); xsa_agi_node_new makes a node
 * holding references to the inputs; the op fills the node's argument fields
 * and xsa_agi_attach hangs it on the result. The node's backward receives the
 * result's gradient g and sets gin[i] (owned) for each input i with need[i];
 * the engine sums each back to the input's shape.
 *
 * Saved values and version counters (tensor.h): a backward may read the
 * values of some inputs (the op sets bit i of saved_in for each in[i] it
 * reads), of the result (out) and of the tensors in sv. xsa_agi_attach
 * records their storages' versions; before running the backward the engine
 * compares them and refuses, naming the op, when one was modified in place.
 */
#ifndef XSA_AUTOGRAD_IMPL_H
#define XSA_AUTOGRAD_IMPL_H

#include "autograd.h"

struct xsa_ag_node;
typedef struct xsa_ag_node node;
typedef int (*bwd_fn)(node *n, xsa_tensor *g, xsa_tensor **gin);

struct xsa_ag_node {
    long refcount;
    const char *name;
    bwd_fn backward;
    int n_in;
    xsa_tensor *in[XSA_AG_MAX_INPUTS];   /* owned, may be NULL */
    int need[XSA_AG_MAX_INPUTS];         /* input i wants a gradient */
    xsa_tensor *out;                     /* alias of the result's values or NULL */
    xsa_tensor *sv[4];                   /* other saved tensors (fused ops) */
    int out_ndim;
    int64_t out_shape[XSA_MAX_DIMS];
    /* op arguments */
    int op, dim, keepdim, reversed;
    double s, lo, hi;
    int perm[XSA_MAX_DIMS];
    int64_t start;
    int dims[4];                         /* fused ops: B, T, C, ... */
    float lambda;
    /* version counters: what the backward reads, the versions at attach */
    unsigned saved_in;                   /* bit i: backward reads in[i]'s values */
    uint64_t in_ver[XSA_AG_MAX_INPUTS];
    uint64_t out_ver, sv_ver[4];
    /* custom nodes */
    xsa_ag_custom_fn cfn;
    void *ctx;
    void (*ctx_free)(void *);
    /* backward bookkeeping */
    xsa_tensor *gacc;                    /* gradient of the result so far */
    unsigned long mark;
    int released;                        /* buffers freed after a backward */
    node *next_free;
};

/* 1 when grad mode is on and one of the n inputs requires grad. */
int xsa_agi_any_needs(int n, xsa_tensor *const *in);
/* A node named `name` with backward bw over n inputs (retained; NULL entries
 * allowed); NULL with the error set when out of memory. */
node *xsa_agi_node_new(const char *name, bwd_fn bw, int n, xsa_tensor *const *in);
/* Hangs nd on out (a fresh result); save_out keeps an alias of out's values
 * in nd->out. Records the versions of the inputs, out and nd->sv[] (so the
 * op fills sv and saved_in first). Returns out, or NULL after freeing both. */
xsa_tensor *xsa_agi_attach(xsa_tensor *out, node *nd, int save_out);

#endif

/*
 * optim.h: AdamW over a list of float32 tensors with gradients, with
 * PyTorch's semantics and operation order (torch.optim.AdamW, single-tensor
 * path): per parameter, with t its own step count,
 *   p *= 1 - lr*wd
 *   m += (1-b1) (g - m);   v = b2 v + (1-b2) g^2
 *   p -= (lr / (1-b1^t)) * m / (sqrt(v) / sqrt(1-b2^t) + eps)
 * A parameter whose ->grad is NULL is skipped (its step count stays).
 * The optimizer holds a reference to each parameter; m and v live in one
 * storage block.
 *
 * Example:
 *   xsa_tensor *ps[n] = ...;   // contiguous float32, requires_grad
 *   xsa_adamw *o = xsa_adamw_new(n, ps, 1e-3, 0.9, 0.999, 1e-8, 0.01);
 *   ... backward ...; xsa_adamw_step(o); xsa_adamw_zero_grad(o);
 *   xsa_adamw_free(o);
 *
 * Non-goals: amsgrad, maximize, parameter groups, sparse gradients.
 */
#ifndef XSA_OPTIM_H
#define XSA_OPTIM_H

#include "tensor.h"

typedef struct xsa_adamw {
    int n;
    xsa_tensor **params;    /* owned references */
    xsa_storage *state;     /* m then v for every parameter, contiguous */
    float **m, **v;         /* per parameter, into state */
    long *steps;            /* per parameter */
    double lr, beta1, beta2, eps, weight_decay;
} xsa_adamw;

/* Checks every tensor is contiguous float32 and the hyperparameters
 * (lr >= 0, betas in [0,1), eps >= 0, weight_decay >= 0, all finite). */
xsa_adamw *xsa_adamw_new(int n, xsa_tensor *const *params, double lr, double beta1,
                         double beta2, double eps, double weight_decay);
void xsa_adamw_free(xsa_adamw *o);
/* -1 if a gradient has the wrong shape or is not contiguous float32. */
int xsa_adamw_step(xsa_adamw *o);
/* Fills every parameter's ->grad with zeros (keeps the tensors). */
void xsa_adamw_zero_grad(xsa_adamw *o);
/* Validated setter for the learning rate. */
int xsa_adamw_set_lr(xsa_adamw *o, double lr);

#endif

/*
 * attention.c: the table of attention variants (attention.h) and the two
 * the study compares: SA (Z = Y) and XSA (Z = Y - lambda (Y.Vn) Vn, nn.c's
 * projection), and the names the model and the Lua binding accept.
 *
 * Non-goals: the kernels (nn.c, attention_blocked.c), other variants
 * (each in its own file: attention_vsub.c).
 */
#include "attention.h"
#include "nn.h"

const xsa_attention_variant xsa_attention_sa = {"sa", 0, NULL, NULL};
const xsa_attention_variant xsa_attention_xsa = {"xsa", 1, xsa_nn_xsa_project,
                                                 xsa_nn_xsa_project_backward};

#define X(n) extern const xsa_attention_variant xsa_attention_##n;
XSA_ATTENTION_VARIANTS(X)
#undef X

static const xsa_attention_variant *const table[] = {
#define X(n) &xsa_attention_##n,
    XSA_ATTENTION_VARIANTS(X)
#undef X
};

int xsa_attention_count(void) { return (int)(sizeof table / sizeof table[0]); }

const xsa_attention_variant *xsa_attention_get(int i)
{
    return i >= 0 && i < xsa_attention_count() ? table[i] : NULL;
}

/*
 * xsa.h: the public header of libxsa, the engine behind the xsa Lua scripts.
 * Pure C (no Lua). Include this one header; link with -lxsa (pkg-config xsa).
 *
 * A small worked example (a C program using the core alone):
 *
 *   #include <xsa.h>
 *   int64_t shape[2] = {2, 3};
 *   xsa_tensor *a = xsa_tensor_randn(NULL, 2, shape, 0.0, 1.0);
 *   xsa_tensor *b = xsa_tensor_transpose(a, 0, 1);          // [3,2] view
 *   xsa_tensor *c = xsa_tensor_matmul(a, b);                 // [2,2]
 *   if (!c) fprintf(stderr, "%s\n", xsa_last_error());
 *   char *s = xsa_tensor_format(c); puts(s); free(s);
 *   xsa_tensor_free(c); xsa_tensor_free(b); xsa_tensor_free(a);
 */
#ifndef XSA_H
#define XSA_H

#define XSA_VERSION "0.1.0"

#include "error.h"
#include "rng.h"
#include "tensor.h"
#include "autograd.h"
#include "system.h"
#include "gemm.h"
#include "fileio.h"
#include "xz.h"
#include "text.h"
#include "safetensors.h"
#include "bpe.h"
#include "data.h"
#include "nn.h"
#include "optim.h"
#include "gpt.h"
#include "generate.h"
#include "comm.h"

#endif

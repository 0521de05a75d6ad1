/*
 * tensor_impl.h: what the tensor layer's files (storage.c, rng.c, tensor.c,
 * tensor_ops.c, tensor_reduce.c, tensor_print.c) share.
 * Internal to the core (not installed, not part of the contract in tensor.h).
 *
 * The strided iterator (sit) walks up to four operands laid over one output
 * shape: each operand has its own element strides (0 on broadcast dims).
 * Dimensions of size 1 are dropped and adjacent dimensions that are
 * contiguous for every operand are merged, so a contiguous or
 * "matrix + row" case runs as a few long rows of the innermost loop.
 */
#ifndef XSA_TENSOR_IMPL_H
#define XSA_TENSOR_IMPL_H

#include "tensor.h"

#define SIT_MAX_OPS 4

typedef struct {
    int nop;
    int nd;                               /* >= 1 after sit_init */
    int64_t shape[XSA_MAX_DIMS];
    int64_t st[SIT_MAX_OPS][XSA_MAX_DIMS];
    int64_t idx[XSA_MAX_DIMS];
    int64_t off[SIT_MAX_OPS];             /* element offset of the current row */
    int64_t rows;                         /* number of innermost rows */
    int64_t n;                            /* length of a row */
    int64_t inner[SIT_MAX_OPS];           /* stride along a row */
} xsa_sit;

/* strides[k] has ndim entries, already broadcast to `shape`. */
void xsa_sit_init(xsa_sit *it, int nop, int ndim, const int64_t *shape,
                  int64_t strides[][XSA_MAX_DIMS]);
void xsa_sit_next(xsa_sit *it);

/* Strides of t laid over `shape` (right-aligned; 0 where t broadcasts).
 * The caller has checked that t broadcasts to shape. */
void xsa_bstrides(const xsa_tensor *t, int ndim, const int64_t *shape, int64_t *out);
/* Broadcast shape of a and b; -1 with "fn: shapes .. and .. do not broadcast". */
int xsa_bshape(const char *fn, int an, const int64_t *as, int bn, const int64_t *bs,
               int *on, int64_t *os);

/* Element `off` (counted from the view's offset) of a float32 / int32 t. */
static inline float *xsa_fptr(const xsa_tensor *t, int64_t off)
{
    return (float *)t->storage->data + t->offset + off;
}

static inline int32_t *xsa_iptr(const xsa_tensor *t, int64_t off)
{
    return (int32_t *)t->storage->data + t->offset + off;
}

/* A storage of nbytes (zero != 0 zero-fills), reusing a cached buffer of
 * that size when there is one; NULL without a message when out of memory
 * (storage.c). */
xsa_storage *xsa_storage_alloc(size_t nbytes, int zero);
/* Allocation with full checks; zero != 0 zero-fills. */
xsa_tensor *xsa_talloc(const char *fn, xsa_dtype dt, int ndim, const int64_t *shape, int zero);
/* Normalises a possibly negative dim against ndim (-1 on error, message names fn). */
int xsa_normdim(const char *fn, int dim, int ndim);
/* Element value as double / store with the dtype's conversion (saturating
 * for int32, NaN -> 0). */
double xsa_tload(const xsa_tensor *t, int64_t off);
int32_t xsa_to_i32(double v);
/* NULL check: "fn: argument NAME is NULL". */
int xsa_tcheck(const char *fn, const xsa_tensor *t, const char *name);

#endif

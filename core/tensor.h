/*
 * tensor.h: n-d float32 / int32 arrays with shape/stride views over
 * reference-counted storage, a seeded reproducible RNG, element-wise ops with
 * broadcasting, reductions, softmax and matmul through OpenBLAS.
 *
 * Ownership (doc/c-api.md, "Ownership"):
 *   - xsa_storage is a reference-counted buffer.
 *   - xsa_tensor is a view (dtype, shape, strides, offset) holding one
 *     reference to its storage. Tensors are reference-counted too, because
 *     the autograd graph and the Lua userdata both hold them.
 *   - *_new returns an owned reference (refcount 1); *_view shares storage
 *     and also returns an owned reference to a new tensor header;
 *     xsa_tensor_free drops one reference and frees at zero.
 *
 * Indices are 0-based. Negative dimension arguments count from the end, as
 * in PyTorch (dim -1 is the last). Strides and offsets are in elements.
 *
 * Failure: functions returning a pointer return NULL and functions returning
 * int return -1, with a message from xsa_last_error() (error.h) that names
 * the function and the offending shapes or values.
 *
 * Example:
 *   int64_t shp[2] = {2, 3};
 *   xsa_tensor *a = xsa_tensor_ones(XSA_FLOAT32, 2, shp);
 *   xsa_tensor *b = xsa_tensor_binary_scalar(XSA_MUL, a, 2.0, 0); // a * 2
 *   xsa_tensor *s = xsa_tensor_reduce(XSA_SUM, b, XSA_ALL_DIMS, 0);
 *   float total = xsa_tensor_f32(s)[0];                            // 12
 *   xsa_tensor_free(s); xsa_tensor_free(b); xsa_tensor_free(a);
 *
 * Dimension letters used across the core: B batch, T time (sequence
 * position), C channels (d_model), V vocabulary, NH heads, HS head size.
 */
#ifndef XSA_TENSOR_H
#define XSA_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "rng.h"

#define XSA_MAX_DIMS 8
/* Pass as `dim` to a reduction to reduce over every element. */
#define XSA_ALL_DIMS (-1000)
/* Sizes beyond this many elements are refused as absurd (16 G elements). */
#define XSA_MAX_NUMEL ((int64_t)1 << 34)

typedef enum { XSA_FLOAT32 = 0, XSA_INT32 = 1 } xsa_dtype;

typedef struct xsa_storage {
    void *data;
    size_t nbytes;
    long refcount;
    uint64_t version; /* in-place writes so far (see "version counter" below) */
} xsa_storage;

struct xsa_ag_node; /* autograd.h */

typedef struct xsa_tensor {
    xsa_storage *storage;
    xsa_dtype dtype;
    int ndim;                       /* 0 for a scalar (numel 1) */
    int64_t shape[XSA_MAX_DIMS];
    int64_t stride[XSA_MAX_DIMS];   /* elements */
    int64_t offset;                 /* elements */
    long refcount;
    /* autograd: unused (0/NULL) unless autograd.h is in play */
    int requires_grad;
    struct xsa_tensor *grad;        /* owned reference or NULL */
    struct xsa_ag_node *grad_fn;    /* owned reference or NULL */
} xsa_tensor;

/* ---- storage ---------------------------------------------------------- */
xsa_storage *xsa_storage_new(size_t nbytes); /* zero-filled, refcount 1 */
void xsa_storage_retain(xsa_storage *s);
void xsa_storage_free(xsa_storage *s);       /* drops one reference */
/* Total bytes currently held by live storages (for the Lua GC and tests). */
size_t xsa_storage_live_bytes(void);
/* Freed buffers of 1 MiB or more (up to 8 of them, 1 GiB in all) are kept
 * for reuse by a request of the same size; these give their total and
 * release them (live_bytes never counts them). */
size_t xsa_storage_cached_bytes(void);
void xsa_storage_cache_clear(void);

/* ---- version counter --------------------------------------------------
 * Each in-place write through this API (copy_, fill_, set and the in-place
 * element-wise ops binary_, binary_scalar_, unary_) adds 1 to the version
 * of the tensor's storage, which every view of it shares, as PyTorch's
 * version counter. The autograd engine records the versions of the tensors
 * a backward will read and refuses to run it once they changed (autograd.h).
 * Code that writes a storage's data through raw pointers (the optimizer, the
 * GPT model's parameter and gradient blocks) bumps it itself. */
uint64_t xsa_tensor_version(const xsa_tensor *t);  /* 0 for NULL */
void xsa_storage_bump_version(xsa_storage *s);     /* NULL ok */

/* ---- lifetime --------------------------------------------------------- */
size_t xsa_dtype_size(xsa_dtype dt);
const char *xsa_dtype_name(xsa_dtype dt);   /* "float32" / "int32" */
xsa_tensor *xsa_tensor_new(xsa_dtype dt, int ndim, const int64_t *shape); /* zeros */
/* A contiguous tensor over existing storage starting at element `offset`
 * (takes its own reference to the storage). */
xsa_tensor *xsa_tensor_from_storage(xsa_storage *s, xsa_dtype dt, int ndim,
                                    const int64_t *shape, int64_t offset);
void xsa_tensor_retain(xsa_tensor *t);
void xsa_tensor_free(xsa_tensor *t);        /* drops one reference; NULL ok */
/* When a tensor's last reference goes, xsa_tensor_free drops its ->grad
 * (xsa_tensor_free) and, if ->grad_fn is set, calls this hook to drop the
 * node reference. autograd.c sets the hook (before making its first node);
 * the tensor layer knows nothing else about nodes. */
extern void (*xsa_tensor_grad_fn_release)(struct xsa_ag_node *node);

/* ---- facts ------------------------------------------------------------ */
int64_t xsa_tensor_numel(const xsa_tensor *t);
int xsa_tensor_is_contiguous(const xsa_tensor *t);
/* Pointer to element 0 of the view (storage data + offset). */
float *xsa_tensor_f32(const xsa_tensor *t);
int32_t *xsa_tensor_i32(const xsa_tensor *t);
/* "[2,3]" into buf (always NUL-terminated); returns buf. */
char *xsa_shape_str(int ndim, const int64_t *shape, char *buf, size_t n);
int xsa_tensor_same_shape(const xsa_tensor *a, const xsa_tensor *b);

/* ---- element access (index has t->ndim entries, 0-based) --------------- */
int xsa_tensor_get(const xsa_tensor *t, const int64_t *index, double *out);
int xsa_tensor_set(xsa_tensor *t, const int64_t *index, double value);

/* ---- creation --------------------------------------------------------- */
xsa_tensor *xsa_tensor_zeros(xsa_dtype dt, int ndim, const int64_t *shape);
xsa_tensor *xsa_tensor_ones(xsa_dtype dt, int ndim, const int64_t *shape);
xsa_tensor *xsa_tensor_full(xsa_dtype dt, int ndim, const int64_t *shape, double v);
xsa_tensor *xsa_tensor_arange(xsa_dtype dt, double start, double stop, double step);
xsa_tensor *xsa_tensor_clone(const xsa_tensor *t);          /* contiguous copy */
xsa_tensor *xsa_tensor_to_dtype(const xsa_tensor *t, xsa_dtype dt);

/* ---- random tensors (the generator and its streams: rng.h) -------------
 *   rand:    one next per element, (next >> 40) * 2^-24 (exact in float, so
 *            1.0 never appears)
 *   randn:   mean + std * normal, rounded to float
 *   randint: rng_int per element (int32) */
xsa_tensor *xsa_tensor_rand(xsa_rng *g, int ndim, const int64_t *shape);
xsa_tensor *xsa_tensor_randn(xsa_rng *g, int ndim, const int64_t *shape,
                             double mean, double std);
xsa_tensor *xsa_tensor_randint(xsa_rng *g, int64_t lo, int64_t hi, int ndim,
                               const int64_t *shape);   /* int32 */

/* ---- views (share storage) --------------------------------------------- */
/* view: contiguous input only; one entry of shape may be -1 (inferred). */
xsa_tensor *xsa_tensor_view(xsa_tensor *t, int ndim, const int64_t *shape);
/* reshape: a view when possible, else a contiguous copy. */
xsa_tensor *xsa_tensor_reshape(xsa_tensor *t, int ndim, const int64_t *shape);
xsa_tensor *xsa_tensor_transpose(xsa_tensor *t, int d0, int d1);
xsa_tensor *xsa_tensor_permute(xsa_tensor *t, const int *perm);
xsa_tensor *xsa_tensor_narrow(xsa_tensor *t, int dim, int64_t start, int64_t len);
xsa_tensor *xsa_tensor_select(xsa_tensor *t, int dim, int64_t index);
xsa_tensor *xsa_tensor_unsqueeze(xsa_tensor *t, int dim);
/* squeeze: dim of size != 1 is a no-op (PyTorch); dim = XSA_ALL_DIMS drops
 * every size-1 dim. */
xsa_tensor *xsa_tensor_squeeze(xsa_tensor *t, int dim);
/* expand: size-1 dimensions broadcast with stride 0 (read-only use). */
xsa_tensor *xsa_tensor_expand(xsa_tensor *t, int ndim, const int64_t *shape);
/* contiguous: returns t itself (retained) when already contiguous. */
xsa_tensor *xsa_tensor_contiguous(xsa_tensor *t);

/* ---- copy / fill (in place, dst keeps its shape; src broadcasts; float
 * to int32 truncates toward zero, saturating, NaN -> 0; a source that shares
 * storage with dst is read before anything is written) -------------------- */
int xsa_tensor_copy_(xsa_tensor *dst, const xsa_tensor *src);
int xsa_tensor_fill_(xsa_tensor *dst, double v);

/* ---- element-wise (broadcasting as in NumPy/PyTorch) ------------------ */
typedef enum {
    XSA_ADD, XSA_SUB, XSA_MUL, XSA_DIV, XSA_POW, XSA_MAXIMUM, XSA_MINIMUM,
    XSA_EQ, XSA_NE, XSA_LT, XSA_LE, XSA_GT, XSA_GE
} xsa_binop;
typedef enum {
    XSA_NEG, XSA_EXP, XSA_LOG, XSA_SQRT, XSA_TANH, XSA_RELU, XSA_GELU,
    XSA_ABS, XSA_SIGMOID
} xsa_unop;
/* Result dtype: float32 if either operand is float32, else int32 (int32 DIV
 * and POW give float32). Comparisons give float32 0/1 values. Float32 math
 * is done in float (as PyTorch); int32 ADD/SUB/MUL wrap around. A scalar s
 * counts as int32 when it is an integer in int32 range, else float32.
 * MAXIMUM/MINIMUM propagate NaN. In-place forms keep a's dtype: an int32 a
 * with a float32 operand (or DIV/POW) is an error, not a silent truncation.
 * In-place writes to an expanded (stride 0) tensor are refused. */
xsa_tensor *xsa_tensor_binary(xsa_binop op, const xsa_tensor *a, const xsa_tensor *b);
/* a op s, or s op a when `reversed` is nonzero. */
xsa_tensor *xsa_tensor_binary_scalar(xsa_binop op, const xsa_tensor *a, double s, int reversed);
/* In place: a = a op b, b broadcast to a's shape; a keeps its dtype. */
int xsa_tensor_binary_(xsa_binop op, xsa_tensor *a, const xsa_tensor *b);
int xsa_tensor_binary_scalar_(xsa_binop op, xsa_tensor *a, double s);
/* GELU is the exact (erf) GELU of nn.h, computed by xsa_nn_gelu_forward
 * (the model's kernel; autograd's backward is xsa_nn_gelu_backward). */
xsa_tensor *xsa_tensor_unary(xsa_unop op, const xsa_tensor *a);  /* float32 out */
int xsa_tensor_unary_(xsa_unop op, xsa_tensor *a);               /* float32 a */
/* where(cond != 0, a, b), all three broadcast together; int32 only when a
 * and b both are. clamp keeps a's dtype: min(max(a, lo), hi) as PyTorch
 * (NaN stays NaN; use -INFINITY/INFINITY for one side; NaN bounds refused). */
xsa_tensor *xsa_tensor_where(const xsa_tensor *cond, const xsa_tensor *a, const xsa_tensor *b);
xsa_tensor *xsa_tensor_clamp(const xsa_tensor *a, double lo, double hi);

/* ---- reductions ------------------------------------------------------- */
typedef enum { XSA_SUM, XSA_MEAN, XSA_MAX, XSA_MIN, XSA_ARGMAX, XSA_ARGMIN, XSA_VAR } xsa_redop;
/* dim = XSA_ALL_DIMS reduces everything to a 0-d tensor (keepdim ignored).
 * Sums accumulate in double. VAR is unbiased (divides by n-1) as PyTorch's
 * default. ARGMAX/ARGMIN give int32; others float32. Ties give the first
 * index; NaN propagates (MAX/MIN) and counts as the extreme (ARG*). SUM over
 * nothing is 0, MEAN NaN, the others an error. int32 input is reduced
 * exactly (int64 sums, integer comparisons); only the float32 result rounds.
 * softmax/log_softmax (any dtype in, float32 out) subtract the max and sum
 * in double; a row of all -inf gives NaN, as PyTorch. */
xsa_tensor *xsa_tensor_reduce(xsa_redop op, const xsa_tensor *a, int dim, int keepdim);
xsa_tensor *xsa_tensor_softmax(const xsa_tensor *a, int dim);
xsa_tensor *xsa_tensor_log_softmax(const xsa_tensor *a, int dim);

/* ---- matmul: [M,K]x[K,N], [B,M,K]x[B,K,N], [B,M,K]x[K,N]; xsa_sgemm
 * (gemm.h), using transposed views directly when their strides allow; NULL
 * with an error when XSA_GEMM names no backend. ----------------------------- */
xsa_tensor *xsa_tensor_matmul(const xsa_tensor *a, const xsa_tensor *b);

/* ---- comparison and printing ------------------------------------------ */
/* |a-b| <= atol + rtol*|b| everywhere (same shape required); 1 true, 0 false,
 * -1 on error. NaNs are never close. */
int xsa_tensor_allclose(const xsa_tensor *a, const xsa_tensor *b, double rtol, double atol);
/* PyTorch-like text ("tensor([[1., 2.], ...], dtype=int32)" with the middle
 * elided for large tensors). malloc'd; caller frees. */
char *xsa_tensor_format(const xsa_tensor *t);

#endif

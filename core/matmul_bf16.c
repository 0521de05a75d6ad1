/*
 * matmul_bf16.c: bf16 x bf16 -> float32 products over oneDNN's matmul
 * primitive (see matmul_bf16.h), or stubs without oneDNN. The conversions
 * are plain C with a vector path where simd.h has XSA_SIMD_BF16, and
 * always built.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "matmul_bf16.h"
#include "simd.h"
#include "system.h"

/* ---- conversions ---------------------------------------------------------- */

static void bf16_from_f32_range(uint16_t *dst, const float *src, size_t n)
{
    size_t i = 0;
    /* the vector path has never special-cased NaN (one whose payload is
     * only in the low 16 bits rounds to infinity there); the scalar loop
     * keeps a NaN a NaN */
    for (; XSA_SIMD_BF16 && i + VF_W <= n; i += VF_W)
        vf_store_bf16(dst + i, vf_load(src + i));
    for (; i < n; i++) {
        uint32_t u;
        memcpy(&u, src + i, sizeof u);
        if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu)) {
            dst[i] = (uint16_t)((u >> 16) | 0x40u); /* NaN stays NaN */
            continue;
        }
        dst[i] = sf_to_bf16(src[i]);
    }
}

typedef struct {
    uint16_t *dst;
    const float *src;
    size_t n;
} bf16_conv;

static void *bf16_conv_run(void *arg)
{
    const bf16_conv *c = arg;
    bf16_from_f32_range(c->dst, c->src, c->n);
    return NULL;
}

/* From 1M values (the wte, rounded at every bf16 forward) the second half
 * runs on another thread; the halves meet on a 64-value boundary, so every
 * value takes the path (vector or scalar tail) it takes in one pass. */
void xsa_bf16_from_f32(uint16_t *dst, const float *src, size_t n)
{
    size_t h = (n / 2) & ~(size_t)63;
    bf16_conv halves[2] = {{dst, src, h}, {dst + h, src + h, n - h}};
    xsa_run_halves(halves, sizeof halves[0], n >= ((size_t)1 << 20), bf16_conv_run);
}

void xsa_bf16_to_f32(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)src[i] << 16;
        memcpy(dst + i, &u, sizeof u);
    }
}

/* ---- CPU check ------------------------------------------------------------ */

static int cpu_has_avx512_bf16(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return 0;
    char line[8192];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags", 5) != 0) continue;
        for (char *tok = strtok(line, " \t\n"); tok; tok = strtok(NULL, " \t\n"))
            if (strcmp(tok, "avx512_bf16") == 0) found = 1;
        break; /* the first CPU's flags */
    }
    fclose(f);
    return found;
}

#if defined(XSA_HAVE_DNNL)

#include <oneapi/dnnl/dnnl.h>

/* libgomp comes with libdnnl (its OpenMP runtime) */
extern void omp_set_num_threads(int n) __attribute__((weak));

int xsa_bf16_built(void) { return 1; }

const char *xsa_bf16_backend(void)
{
    static char buf[48];
    const dnnl_version_t *v = dnnl_version();
    snprintf(buf, sizeof buf, "oneDNN %d.%d.%d", v->major, v->minor, v->patch);
    return buf;
}

int xsa_bf16_check(void)
{
    static int state = -1; /* -1 unknown, 0 ok, 1 no cpu support */
    if (state < 0) state = cpu_has_avx512_bf16() ? 0 : 1;
    if (state)
        return xsa_error("bf16: this CPU has no avx512_bf16 (not in /proc/cpuinfo flags); "
                         "use precision \"f32\"");
    return 0;
}

typedef struct {
    int ta, tb, M, N, K, lda, ldb, ldc, acc, threads;
    dnnl_primitive_t prim;
    dnnl_memory_t a, b, c;
    char impl[64];
} mm_entry;

#define MM_MAX 24

/* One thread's products: its own engine, stream, primitives and memory
 * objects (the handles are rebound per call, so a slot must not be shared
 * by two threads at once). */
typedef struct {
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    mm_entry e[MM_MAX];
    int n, last;
} mm_slot;

struct xsa_bf16_mm {
    mm_slot s[XSA_BF16_SLOTS];
};

static int dnnl_fail(dnnl_status_t st, const char *what)
{
    return xsa_error("bf16: oneDNN %s failed (status %d)", what, (int)st);
}

static int slot_open(mm_slot *sl)
{
    if (sl->eng) return 0;
    dnnl_status_t st = dnnl_engine_create(&sl->eng, dnnl_cpu, 0);
    if (st != dnnl_success) {
        sl->eng = NULL;
        return dnnl_fail(st, "engine creation");
    }
    st = dnnl_stream_create(&sl->stream, sl->eng, dnnl_stream_default_flags);
    if (st != dnnl_success) {
        dnnl_engine_destroy(sl->eng);
        sl->eng = NULL;
        return dnnl_fail(st, "stream creation");
    }
    return 0;
}

static void entry_free(mm_entry *e)
{
    dnnl_primitive_destroy(e->prim);
    dnnl_memory_destroy(e->a);
    dnnl_memory_destroy(e->b);
    dnnl_memory_destroy(e->c);
}

xsa_bf16_mm *xsa_bf16_mm_new(void)
{
    if (xsa_bf16_check() != 0) return NULL;
    xsa_bf16_mm *mm = calloc(1, sizeof *mm);
    if (!mm) {
        xsa_error("bf16: out of memory");
        return NULL;
    }
    for (int i = 0; i < XSA_BF16_SLOTS; i++) mm->s[i].last = -1;
    if (slot_open(&mm->s[0]) != 0) {
        free(mm);
        return NULL;
    }
    return mm;
}

void xsa_bf16_mm_free(xsa_bf16_mm *mm)
{
    if (!mm) return;
    for (int k = 0; k < XSA_BF16_SLOTS; k++) {
        mm_slot *sl = &mm->s[k];
        for (int i = 0; i < sl->n; i++) entry_free(&sl->e[i]);
        if (sl->eng) {
            dnnl_stream_destroy(sl->stream);
            dnnl_engine_destroy(sl->eng);
        }
    }
    free(mm);
}

static int make_entry(mm_slot *mm, mm_entry *e)
{
    dnnl_memory_desc_t ad, bd, cd;
    dnnl_dims_t adims = {e->M, e->K}, bdims = {e->K, e->N}, cdims = {e->M, e->N};
    dnnl_dims_t as, bs, cs = {e->ldc, 1};
    if (e->ta) { as[0] = 1; as[1] = e->lda; } else { as[0] = e->lda; as[1] = 1; }
    if (e->tb) { bs[0] = 1; bs[1] = e->ldb; } else { bs[0] = e->ldb; bs[1] = 1; }
    dnnl_status_t st;
    if ((st = dnnl_memory_desc_init_by_strides(&ad, 2, adims, dnnl_bf16, as)) != dnnl_success ||
        (st = dnnl_memory_desc_init_by_strides(&bd, 2, bdims, dnnl_bf16, bs)) != dnnl_success ||
        (st = dnnl_memory_desc_init_by_strides(&cd, 2, cdims, dnnl_f32, cs)) != dnnl_success)
        return dnnl_fail(st, "memory descriptor");
    dnnl_matmul_desc_t md;
    if ((st = dnnl_matmul_desc_init(&md, &ad, &bd, NULL, &cd)) != dnnl_success)
        return dnnl_fail(st, "matmul descriptor");
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    if ((st = dnnl_primitive_attr_create(&attr)) != dnnl_success) return dnnl_fail(st, "attr");
    if (e->acc) {
        if ((st = dnnl_post_ops_create(&po)) != dnnl_success ||
            (st = dnnl_post_ops_append_sum(po, 1.0f)) != dnnl_success ||
            (st = dnnl_primitive_attr_set_post_ops(attr, po)) != dnnl_success) {
            if (po) dnnl_post_ops_destroy(po);
            dnnl_primitive_attr_destroy(attr);
            return dnnl_fail(st, "sum post-op");
        }
    }
    dnnl_primitive_desc_t pd = NULL;
    st = dnnl_primitive_desc_create(&pd, &md, attr, mm->eng, NULL);
    if (po) dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success) return dnnl_fail(st, "matmul primitive descriptor (bf16)");
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
        snprintf(e->impl, sizeof e->impl, "%s", impl);
    st = dnnl_primitive_create(&e->prim, pd);
    dnnl_primitive_desc_destroy(pd);
    if (st != dnnl_success) return dnnl_fail(st, "matmul primitive");
    if ((st = dnnl_memory_create(&e->a, &ad, mm->eng, DNNL_MEMORY_NONE)) != dnnl_success ||
        (st = dnnl_memory_create(&e->b, &bd, mm->eng, DNNL_MEMORY_NONE)) != dnnl_success ||
        (st = dnnl_memory_create(&e->c, &cd, mm->eng, DNNL_MEMORY_NONE)) != dnnl_success) {
        dnnl_primitive_destroy(e->prim);
        if (e->a) dnnl_memory_destroy(e->a);
        if (e->b) dnnl_memory_destroy(e->b);
        e->prim = NULL;
        e->a = e->b = e->c = NULL;
        return dnnl_fail(st, "memory object");
    }
    return 0;
}

int xsa_bf16_gemm_on(xsa_bf16_mm *mm, int slot, int threads, int ta, int tb, int M, int N, int K,
                     const uint16_t *A, int lda, const uint16_t *B, int ldb, int accumulate,
                     float *C, int ldc)
{
    if (!mm) return xsa_error("bf16: no matmul context");
    if (slot < 0 || slot >= XSA_BF16_SLOTS)
        return xsa_error("bf16: slot %d out of range 0..%d", slot, XSA_BF16_SLOTS - 1);
    mm_slot *sl = &mm->s[slot];
    if (slot_open(sl) != 0) return -1;
    if (threads < 1) threads = 1;
    /* the thread count oneDNN sees, for this thread: primitives are planned
     * for it when created, and run with it */
    if (omp_set_num_threads) omp_set_num_threads(threads);
    mm_entry key = {ta, tb, M, N, K, lda, ldb, ldc, accumulate ? 1 : 0, threads, NULL, NULL, NULL, NULL, ""};
    int idx = -1;
    for (int i = 0; i < sl->n; i++) {
        mm_entry *e = &sl->e[i];
        if (e->ta == key.ta && e->tb == key.tb && e->M == M && e->N == N && e->K == K &&
            e->lda == lda && e->ldb == ldb && e->ldc == ldc && e->acc == key.acc &&
            e->threads == threads) {
            idx = i;
            break;
        }
    }
    if (idx < 0) {
        if (sl->n == MM_MAX) { /* evict the oldest */
            entry_free(&sl->e[0]);
            memmove(sl->e, sl->e + 1, (MM_MAX - 1) * sizeof *sl->e);
            sl->n--;
        }
        sl->e[sl->n] = key;
        if (make_entry(sl, &sl->e[sl->n]) != 0) return -1;
        idx = sl->n++;
    }
    mm_entry *e = &sl->e[idx];
    sl->last = idx;
    dnnl_memory_set_data_handle(e->a, (void *)A);
    dnnl_memory_set_data_handle(e->b, (void *)B);
    dnnl_memory_set_data_handle(e->c, C);
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, e->a}, {DNNL_ARG_WEIGHTS, e->b}, {DNNL_ARG_DST, e->c}};
    dnnl_status_t st = dnnl_primitive_execute(e->prim, sl->stream, 3, args);
    if (st == dnnl_success) st = dnnl_stream_wait(sl->stream);
    if (st != dnnl_success) return dnnl_fail(st, "matmul execution");
    return 0;
}

int xsa_bf16_gemm(xsa_bf16_mm *mm, int ta, int tb, int M, int N, int K, const uint16_t *A,
                  int lda, const uint16_t *B, int ldb, int accumulate, float *C, int ldc)
{
    return xsa_bf16_gemm_on(mm, 0, xsa_threads(), ta, tb, M, N, K, A, lda, B, ldb, accumulate, C,
                            ldc);
}

const char *xsa_bf16_impl(const xsa_bf16_mm *mm, int slot)
{
    if (!mm || slot < 0 || slot >= XSA_BF16_SLOTS) return "";
    const mm_slot *sl = &mm->s[slot];
    return sl->last >= 0 ? sl->e[sl->last].impl : "";
}

#else /* no oneDNN: stubs */

static int not_built(void)
{
    return xsa_error("bf16: this build of xsa has no oneDNN (install libdnnl-dev, then rebuild: "
                     "make clean && make); use precision \"f32\"");
}

int xsa_bf16_built(void) { return 0; }
const char *xsa_bf16_backend(void) { return "none"; }

int xsa_bf16_check(void)
{
    (void)cpu_has_avx512_bf16;
    return not_built();
}

xsa_bf16_mm *xsa_bf16_mm_new(void)
{
    not_built();
    return NULL;
}

void xsa_bf16_mm_free(xsa_bf16_mm *mm) { (void)mm; }

int xsa_bf16_gemm_on(xsa_bf16_mm *mm, int slot, int threads, int ta, int tb, int M, int N, int K,
                     const uint16_t *A, int lda, const uint16_t *B, int ldb, int accumulate,
                     float *C, int ldc)
{
    (void)slot; (void)threads;
    return xsa_bf16_gemm(mm, ta, tb, M, N, K, A, lda, B, ldb, accumulate, C, ldc);
}

int xsa_bf16_gemm(xsa_bf16_mm *mm, int ta, int tb, int M, int N, int K, const uint16_t *A,
                  int lda, const uint16_t *B, int ldb, int accumulate, float *C, int ldc)
{
    (void)mm; (void)ta; (void)tb; (void)M; (void)N; (void)K; (void)A; (void)lda; (void)B;
    (void)ldb; (void)accumulate; (void)C; (void)ldc;
    return not_built();
}

const char *xsa_bf16_impl(const xsa_bf16_mm *mm, int slot)
{
    (void)mm;
    (void)slot;
    return "";
}

#endif

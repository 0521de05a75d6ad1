/*
 * storage.c: reference-counted buffers (xsa_storage, tensor.h) and the cache
 * that hands freed large buffers back out, plus the live-byte count the Lua
 * GC glue reads.
 *
 * Not here: tensor headers, views and the strides that lay a tensor over a
 * buffer (tensor.c). Refcounts are plain integers (one thread drives the
 * engine); the live-byte counter is atomic and the cache takes a lock, both
 * cheap. Non-goals: a general allocator (sizes must match exactly to reuse a
 * buffer), pooling small buffers (malloc does that well).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "system.h"
#include "tensor.h"
#include "tensor_impl.h"

static atomic_size_t live_bytes;

/* ---- storage ----------------------------------------------------------
 * Large buffers (>= CACHE_MIN) are kept in a small cache when freed and
 * handed out again for a request of exactly the same size. Training
 * allocates the same big activations (e.g. [B*T, V] logits, 200 MB) every
 * step; a fresh mmap'd block costs a page fault per 4 KiB on first write,
 * which made a [1024x128]x[128x50257] matmul 40% slower than its sgemm.
 * Sanitizer builds skip the cache so every use-after-free stays visible.
 * xsa_storage_cache_clear() gives the memory back. */

#define CACHE_MIN ((size_t)1 << 20)
#define CACHE_SLOTS 8
#define CACHE_MAX_BYTES ((size_t)1 << 30)

#if defined(__SANITIZE_ADDRESS__)
#define CACHE_ON 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CACHE_ON 0
#endif
#endif
#ifndef CACHE_ON
#define CACHE_ON 1
#endif

static struct {
    void *p[CACHE_SLOTS];
    size_t n[CACHE_SLOTS];
    size_t bytes;
    int next; /* eviction turn */
} cache;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static void *cache_take(size_t nbytes)
{
    void *p = NULL;
    pthread_mutex_lock(&cache_lock);
    for (int i = 0; i < CACHE_SLOTS; i++)
        if (cache.p[i] && cache.n[i] == nbytes) {
            p = cache.p[i];
            cache.p[i] = NULL;
            cache.bytes -= nbytes;
            break;
        }
    pthread_mutex_unlock(&cache_lock);
    return p;
}

/* 1 when the cache kept p (older entries are evicted to make room). */
static int cache_put(void *p, size_t nbytes)
{
    if (!CACHE_ON || nbytes < CACHE_MIN || nbytes > CACHE_MAX_BYTES) return 0;
    void *evict[CACHE_SLOTS];
    int ne = 0, slot = -1;
    pthread_mutex_lock(&cache_lock);
    for (int k = 0; k < CACHE_SLOTS && cache.bytes + nbytes > CACHE_MAX_BYTES; k++) {
        int i = (cache.next + k) % CACHE_SLOTS;
        if (!cache.p[i]) continue;
        evict[ne++] = cache.p[i];
        cache.bytes -= cache.n[i];
        cache.p[i] = NULL;
    }
    for (int i = 0; i < CACHE_SLOTS && slot < 0; i++)
        if (!cache.p[i]) slot = i;
    if (slot < 0) { /* all slots busy: replace the next in turn */
        slot = cache.next;
        evict[ne++] = cache.p[slot];
        cache.bytes -= cache.n[slot];
        cache.next = (cache.next + 1) % CACHE_SLOTS;
    }
    cache.p[slot] = p;
    cache.n[slot] = nbytes;
    cache.bytes += nbytes;
    pthread_mutex_unlock(&cache_lock);
    for (int i = 0; i < ne; i++) free(evict[i]);
    return 1;
}

void xsa_storage_cache_clear(void)
{
    void *drop[CACHE_SLOTS];
    int n = 0;
    pthread_mutex_lock(&cache_lock);
    for (int i = 0; i < CACHE_SLOTS; i++)
        if (cache.p[i]) {
            drop[n++] = cache.p[i];
            cache.p[i] = NULL;
        }
    cache.bytes = 0;
    pthread_mutex_unlock(&cache_lock);
    for (int i = 0; i < n; i++) free(drop[i]);
}

size_t xsa_storage_cached_bytes(void)
{
    pthread_mutex_lock(&cache_lock);
    size_t b = cache.bytes;
    pthread_mutex_unlock(&cache_lock);
    return b;
}

/* Internal (tensor_impl.h): talloc allocates through it without
 * zero-filling. */
xsa_storage *xsa_storage_alloc(size_t nbytes, int zero)
{
    xsa_storage *s = malloc(sizeof *s);
    if (!s) return NULL;
    /* never malloc(0): a zero-size tensor still gets a valid pointer */
    size_t n = nbytes ? nbytes : 1;
    void *p = (CACHE_ON && n >= CACHE_MIN) ? cache_take(n) : NULL;
    if (p) {
        if (zero) memset(p, 0, n);
    } else {
        p = zero ? calloc(1, n) : malloc(n);
        xsa_advise_huge(p, n); /* before the first touch */
    }
    if (!p) {
        free(s);
        return NULL;
    }
    s->data = p;
    s->nbytes = nbytes;
    s->refcount = 1;
    s->version = 0;
    atomic_fetch_add(&live_bytes, nbytes);
    return s;
}

xsa_storage *xsa_storage_new(size_t nbytes)
{
    if (nbytes > (size_t)XSA_MAX_NUMEL * 8) {
        xsa_error("storage_new: %zu bytes is too large", nbytes);
        return NULL;
    }
    xsa_storage *s = xsa_storage_alloc(nbytes, 1);
    if (!s) xsa_error("storage_new: out of memory allocating %zu bytes", nbytes);
    return s;
}

void xsa_storage_retain(xsa_storage *s)
{
    if (s) s->refcount++;
}

void xsa_storage_free(xsa_storage *s)
{
    if (!s || --s->refcount > 0) return;
    atomic_fetch_sub(&live_bytes, s->nbytes);
    if (!cache_put(s->data, s->nbytes)) free(s->data);
    free(s);
}

size_t xsa_storage_live_bytes(void) { return atomic_load(&live_bytes); }

void xsa_storage_bump_version(xsa_storage *s)
{
    if (s) s->version++;
}

uint64_t xsa_tensor_version(const xsa_tensor *t)
{
    return t && t->storage ? t->storage->version : 0;
}

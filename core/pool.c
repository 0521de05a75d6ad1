/* pool.c: the buffer pool of pool.h. Each buffer carries its capacity in a
 * 64-byte header in front of the pointer handed out. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "error.h"
#include "pool.h"

#define HDR 64

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static float *freelist[XSA_POOL_KEEP];
static int nfree;

static size_t cap_of(const float *p) { return *(const size_t *)((const char *)p - HDR); }

static void release(float *p) { free((char *)p - HDR); }

float *xsa_pool_get(size_t nfloats)
{
    if (nfloats == 0) nfloats = 1;
    float *victim = NULL;
    pthread_mutex_lock(&lock);
    /* the smallest free buffer that is large enough */
    int best = -1;
    for (int i = 0; i < nfree; i++)
        if (cap_of(freelist[i]) >= nfloats &&
            (best < 0 || cap_of(freelist[i]) < cap_of(freelist[best])))
            best = i;
    if (best >= 0) {
        float *p = freelist[best];
        freelist[best] = freelist[--nfree];
        pthread_mutex_unlock(&lock);
        return p;
    }
    /* a miss: drop the largest of the too-small ones, so that what the pool
     * retains does not grow with every new size */
    int big = -1;
    for (int i = 0; i < nfree; i++)
        if (big < 0 || cap_of(freelist[i]) > cap_of(freelist[big])) big = i;
    if (big >= 0) {
        victim = freelist[big];
        freelist[big] = freelist[--nfree];
    }
    pthread_mutex_unlock(&lock);
    if (victim) release(victim);
    if (nfloats > (SIZE_MAX - HDR) / sizeof(float)) {
        xsa_error("out of memory (a scratch buffer of %zu floats)", nfloats);
        return NULL;
    }
    void *raw = NULL;
    if (posix_memalign(&raw, HDR, HDR + nfloats * sizeof(float)) != 0 || !raw) {
        xsa_error("out of memory (a scratch buffer of %zu MB)", (nfloats * sizeof(float)) >> 20);
        return NULL;
    }
    *(size_t *)raw = nfloats;
    return (float *)((char *)raw + HDR);
}

void xsa_pool_put(float *p)
{
    if (!p) return;
    float *victim = p;
    pthread_mutex_lock(&lock);
    if (nfree < XSA_POOL_KEEP) {
        freelist[nfree++] = p;
        victim = NULL;
    } else {
        /* full: keep the larger of p and the smallest one held */
        int small = 0;
        for (int i = 1; i < nfree; i++)
            if (cap_of(freelist[i]) < cap_of(freelist[small])) small = i;
        if (cap_of(freelist[small]) < cap_of(p)) {
            victim = freelist[small];
            freelist[small] = p;
        }
    }
    pthread_mutex_unlock(&lock);
    if (victim) release(victim);
}

void xsa_pool_trim(void)
{
    pthread_mutex_lock(&lock);
    int n = nfree;
    float *list[XSA_POOL_KEEP];
    for (int i = 0; i < n; i++) list[i] = freelist[i];
    nfree = 0;
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < n; i++) release(list[i]);
}

size_t xsa_pool_bytes(void)
{
    size_t s = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nfree; i++) s += cap_of(freelist[i]) * sizeof(float);
    pthread_mutex_unlock(&lock);
    return s;
}

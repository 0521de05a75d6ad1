/* pool.c: the buffer pool of pool.h. Each buffer carries its capacity and
 * kind in a 64-byte header in front of the pointer handed out. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "error.h"
#include "pool.h"
#include "system.h"

#define HDR 64

typedef struct {
    size_t cap;
    int kind;
} hdr;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static float *freelist[XSA_POOL_KINDS][XSA_POOL_KEEP];
static int nfree[XSA_POOL_KINDS];

static hdr *hdr_of(const float *p) { return (hdr *)((char *)p - HDR); }
static size_t cap_of(const float *p) { return hdr_of(p)->cap; }
static void release(float *p) { free((char *)p - HDR); }

float *xsa_pool_get(xsa_pool_kind kind, size_t nfloats)
{
    if ((int)kind < 0 || kind >= XSA_POOL_KINDS) kind = XSA_POOL_SCRATCH;
    if (nfloats == 0) nfloats = 1;
    float *victim = NULL;
    float **fl = freelist[kind];
    pthread_mutex_lock(&lock);
    int best = -1, big = -1;
    for (int i = 0; i < nfree[kind]; i++) {
        size_t c = cap_of(fl[i]);
        if (c >= nfloats && (best < 0 || c < cap_of(fl[best]))) best = i;
        if (big < 0 || c > cap_of(fl[big])) big = i;
    }
    if (best >= 0) {
        float *p = fl[best];
        fl[best] = fl[--nfree[kind]];
        pthread_mutex_unlock(&lock);
        return p;
    }
    if (big >= 0) { /* all too small: the largest makes way for the new size */
        victim = fl[big];
        fl[big] = fl[--nfree[kind]];
    }
    pthread_mutex_unlock(&lock);
    if (victim) release(victim);
    if (nfloats > (SIZE_MAX - HDR) / sizeof(float)) {
        xsa_error("out of memory (a scratch buffer of %zu floats)", nfloats);
        return NULL;
    }
    void *raw = NULL;
    if (posix_memalign(&raw, HDR, HDR + nfloats * sizeof(float)) != 0 || !raw) {
        xsa_error("out of memory (a buffer of %zu MB)", (nfloats * sizeof(float)) >> 20);
        return NULL;
    }
    xsa_advise_huge(raw, HDR + nfloats * sizeof(float));
    ((hdr *)raw)->cap = nfloats;
    ((hdr *)raw)->kind = kind;
    return (float *)((char *)raw + HDR);
}

void xsa_pool_put(float *p)
{
    if (!p) return;
    int kind = hdr_of(p)->kind;
    float *victim = p;
    float **fl = freelist[kind];
    pthread_mutex_lock(&lock);
    if (nfree[kind] < XSA_POOL_KEEP) {
        fl[nfree[kind]++] = p;
        victim = NULL;
    } else { /* full: keep the larger of p and the smallest one held */
        int small = 0;
        for (int i = 1; i < nfree[kind]; i++)
            if (cap_of(fl[i]) < cap_of(fl[small])) small = i;
        if (cap_of(fl[small]) < cap_of(p)) {
            victim = fl[small];
            fl[small] = p;
        }
    }
    pthread_mutex_unlock(&lock);
    if (victim) release(victim);
}

void xsa_pool_trim(void)
{
    float *list[XSA_POOL_KINDS * XSA_POOL_KEEP];
    int n = 0;
    pthread_mutex_lock(&lock);
    for (int k = 0; k < XSA_POOL_KINDS; k++) {
        for (int i = 0; i < nfree[k]; i++) list[n++] = freelist[k][i];
        nfree[k] = 0;
    }
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < n; i++) release(list[i]);
}

size_t xsa_pool_bytes(void)
{
    size_t s = 0;
    pthread_mutex_lock(&lock);
    for (int k = 0; k < XSA_POOL_KINDS; k++)
        for (int i = 0; i < nfree[k]; i++) s += cap_of(freelist[k][i]) * sizeof(float);
    pthread_mutex_unlock(&lock);
    return s;
}

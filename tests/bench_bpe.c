/*
 * bench_bpe.c: single-threaded GPT-2 encoding speed on TinyStories.
 * Each run starts from a freshly loaded tokenizer (empty piece cache), so the
 * figure includes filling the cache; the best of 3 runs is reported, then the
 * speed with the cache already warm. Compare with tiktoken on the same text
 * and machine: tests/bench_tokenizer.sh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "../core/xsa.h"

/* the corpus as a plain file or as the committed .xz */
static char text_path[1100];

static int try_dir(const char *cand, char *dir, size_t n)
{
    static const char *names[] = {"tinystories.txt", "tinystories.txt.xz"};
    for (int i = 0; i < 2; i++) {
        snprintf(text_path, sizeof text_path, "%.1024s/%s", cand, names[i]);
        FILE *f = fopen(text_path, "rb");
        if (!f) continue;
        fclose(f);
        snprintf(dir, n, "%s", cand);
        return 1;
    }
    return 0;
}

static int find(char *dir, size_t n)
{
    const char *root = getenv("XSA_ROOT");
    const char *env = getenv("XSA_DATA");
    char cand[1024];
    if (env && try_dir(env, dir, n)) return 0;
    snprintf(cand, sizeof cand, "%.1000s/data", root ? root : ".");
    if (try_dir(cand, dir, n)) return 0;
    return -1;
}

int main(void)
{
    char dir[1024], e[1100], v[1100], t[1100];
    if (find(dir, sizeof dir) != 0) {
        fprintf(stderr, "bench_bpe: tinystories.txt(.xz) not found ($XSA_DATA, $XSA_ROOT/data)\n");
        return 1;
    }
    snprintf(e, sizeof e, "%.1024s/encoder.json", dir);
    snprintf(v, sizeof v, "%.1024s/vocab.bpe", dir);
    snprintf(t, sizeof t, "%s", text_path);
    size_t n;
    char *text = xsa_read_text(t, &n);
    if (!text) {
        fprintf(stderr, "bench_bpe: %s\n", xsa_last_error());
        return 1;
    }
    double best = 1e30, load = 1e30;
    size_t nids = 0;
    xsa_bpe *tok = NULL;
    for (int r = 0; r < 3; r++) {
        xsa_bpe_free(tok);
        double t0 = bench_seconds();
        tok = xsa_bpe_load(e, v);
        double t1 = bench_seconds();
        if (!tok) {
            fprintf(stderr, "bench_bpe: %s\n", xsa_last_error());
            free(text);
            return 1;
        }
        int32_t *ids = xsa_bpe_encode(tok, text, n, 0, &nids);
        double t2 = bench_seconds();
        free(ids);
        if (t1 - t0 < load) load = t1 - t0;
        if (t2 - t1 < best) best = t2 - t1;
    }
    double warm = 1e30;
    for (int r = 0; r < 3; r++) {
        double t0 = bench_seconds();
        int32_t *ids = xsa_bpe_encode(tok, text, n, 0, &nids);
        double dt = bench_seconds() - t0;
        free(ids);
        if (dt < warm) warm = dt;
    }
    printf("tokenizer: %.1f MB/s on %.1f MB of TinyStories (single thread)\n", (double)n / best / 1e6,
           (double)n / 1e6);
    printf("tokenizer: %.1f MB/s with the piece cache already warm; %zu tokens; vocabulary loads in %.1f ms\n",
           (double)n / warm / 1e6, nids, 1e3 * load);
    xsa_bpe_free(tok);
    free(text);
    return 0;
}

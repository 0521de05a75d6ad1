/*
 * test_bpe.c: the GPT-2 tokenizer against tiktoken's own ids
 * (tests/fixtures/tiktoken/, written by tests/fixtures/gen_tiktoken.mjs):
 * the tricky-case corpus (incl. invalid UTF-8 and <|endoftext|>), a sweep of
 * every code point of planes 0-3 and 14, and slices of TinyStories. Also
 * round trips, the UTF-8 repair rule, long words in linear time, load errors.
 *
 * Finds the data as the engine does: $XSA_DATA, then $XSA_ROOT/data (the
 * corpus as tinystories.txt or the committed tinystories.txt.xz).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "../core/xsa.h"
#include "check.h"

static char root[1024] = ".";
static char datadir[1100];

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU time of this process: the long-word limit must not depend on what
 * else the machine is running */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int exists(const char *p)
{
    FILE *f = fopen(p, "rb");
    if (f) fclose(f);
    return f != NULL;
}

static int try_dir(const char *dir)
{
    char p[1200];
    snprintf(p, sizeof p, "%s/encoder.json", dir);
    if (!exists(p)) return 0;
    snprintf(datadir, sizeof datadir, "%s", dir);
    return 1;
}

static int find_data(void)
{
    const char *r = getenv("XSA_ROOT");
    if (r) snprintf(root, sizeof root, "%s", r);
    char cand[1100];
    const char *d = getenv("XSA_DATA");
    if (d && try_dir(d)) return 0;
    snprintf(cand, sizeof cand, "%s/data", root);
    if (try_dir(cand)) return 0;
    return -1;
}

static char *fixture(const char *name, size_t *n)
{
    char p[1200];
    snprintf(p, sizeof p, "%s/tests/fixtures/tiktoken/%s", root, name);
    char *s = xsa_read_file(p, n);
    CHECK(s != NULL, "fixture %s: %s", p, xsa_last_error());
    return s;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* ids equal; prints the first difference under `name` */
static int same_ids(const char *name, const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
    size_t i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    if (i == na && i == nb) return 1;
    printf("  %s: first difference at id %zu: ours %ld, tiktoken %ld (%zu vs %zu ids)\n", name, i,
           i < na ? (long)a[i] : -1L, i < nb ? (long)b[i] : -1L, na, nb);
    return 0;
}

static void test_cases(xsa_bpe *tok)
{
    size_t n;
    char *js = fixture("cases.json", &n);
    if (!js) return;
    cJSON *root_js = cJSON_ParseWithLength(js, n);
    free(js);
    cJSON *cases = cJSON_GetObjectItem(root_js, "cases");
    CHECK(cJSON_IsArray(cases) && cJSON_GetArraySize(cases) > 500, "cases.json has the corpus");
    int total = 0, ok = 0, trips = 0;
    cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
        const char *hex = cJSON_GetObjectItem(c, "hex")->valuestring;
        int special = cJSON_IsTrue(cJSON_GetObjectItem(c, "special"));
        cJSON *jids = cJSON_GetObjectItem(c, "ids");
        size_t hl = strlen(hex), bl = hl / 2;
        char *bytes = malloc(bl + 1);
        for (size_t i = 0; i < bl; i++)
            bytes[i] = (char)(hexval(hex[2 * i]) << 4 | hexval(hex[2 * i + 1]));
        size_t nref = (size_t)cJSON_GetArraySize(jids);
        int32_t *ref = malloc((nref + 1) * sizeof *ref);
        size_t k = 0;
        cJSON *v;
        cJSON_ArrayForEach(v, jids) ref[k++] = (int32_t)v->valueint;
        size_t nids;
        int32_t *ids = xsa_bpe_encode(tok, bytes, bl, special ? XSA_BPE_SPECIAL : 0, &nids);
        total++;
        if (ids && same_ids(name, ids, nids, ref, nref)) ok++;
        /* decode gives the (repaired) input back, and re-encoding gives the ids */
        if (ids) {
            size_t dl, rl;
            int failed;
            char *dec = xsa_bpe_decode(tok, ids, nids, &dl);
            char *rep = xsa_utf8_repair(bytes, bl, &rl, &failed);
            const char *want = rep ? rep : bytes;
            size_t n2;
            int32_t *again = dec ? xsa_bpe_encode(tok, dec, dl, special ? XSA_BPE_SPECIAL : 0, &n2) : NULL;
            if (dec && dl == rl && memcmp(dec, want, dl) == 0 && again && n2 == nids &&
                memcmp(again, ids, nids * sizeof *ids) == 0)
                trips++;
            else
                printf("  %s: round trip failed\n", name);
            free(again);
            free(dec);
            free(rep);
        }
        free(ids);
        free(ref);
        free(bytes);
    }
    CHECK(ok == total, "tricky corpus: %d of %d cases identical to tiktoken", ok, total);
    CHECK(trips == total, "round trips: %d of %d", trips, total);
    printf("tricky corpus: %d/%d cases identical to tiktoken, %d round trips\n", ok, total, trips);
    cJSON_Delete(root_js);
}

static uint32_t ids_hash(const int32_t *ids, size_t n)
{
    uint32_t h = 0x811c9dc5u;
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 4; k++) {
            h ^= ((uint32_t)ids[i] >> (8 * k)) & 0xffu;
            h *= 0x01000193u;
        }
    return h;
}

static size_t put_utf8(char *o, uint32_t cp)
{
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | cp >> 6); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12); o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18); o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* the text of gen_tiktoken.mjs blockText: 'x' c '0' c ' ' c ',' c c '\t' */
static size_t block_text(char *o, uint32_t block)
{
    size_t n = 0;
    for (uint32_t cp = block * 256; cp < block * 256 + 256; cp++) {
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        o[n++] = 'x'; n += put_utf8(o + n, cp);
        o[n++] = '0'; n += put_utf8(o + n, cp);
        o[n++] = ' '; n += put_utf8(o + n, cp);
        o[n++] = ','; n += put_utf8(o + n, cp); n += put_utf8(o + n, cp);
        o[n++] = '\t';
    }
    return n;
}

static void test_unicode_blocks(xsa_bpe *tok)
{
    size_t n;
    char *js = fixture("unicode_blocks.json", &n);
    if (!js) return;
    cJSON *r = cJSON_ParseWithLength(js, n);
    free(js);
    cJSON *blocks = cJSON_GetObjectItem(r, "blocks"), *b;
    char *text = malloc(256 * 32);
    int total = 0, ok = 0;
    cJSON_ArrayForEach(b, blocks) {
        uint32_t blk = (uint32_t)cJSON_GetArrayItem(b, 0)->valuedouble;
        size_t want_n = (size_t)cJSON_GetArrayItem(b, 1)->valuedouble;
        uint32_t want_h = (uint32_t)cJSON_GetArrayItem(b, 2)->valuedouble;
        size_t tl = block_text(text, blk), nids;
        int32_t *ids = xsa_bpe_encode(tok, text, tl, 0, &nids);
        total++;
        if (ids && nids == want_n && ids_hash(ids, nids) == want_h) ok++;
        else printf("  code points U+%04X..U+%04X: ids differ from tiktoken\n", blk * 256, blk * 256 + 255);
        free(ids);
    }
    free(text);
    CHECK(total > 1000 && ok == total, "unicode sweep: %d of %d blocks identical", ok, total);
    printf("unicode sweep: %d/%d blocks of 256 code points identical to tiktoken\n", ok, total);
    cJSON_Delete(r);
}

static void test_tinystories(xsa_bpe *tok)
{
    size_t n, tn;
    char *js = fixture("tinystories_slices.json", &n);
    if (!js) return;
    char p[1200];
    snprintf(p, sizeof p, "%s/tinystories.txt", datadir);
    if (access(p, R_OK) != 0) snprintf(p, sizeof p, "%s/tinystories.txt.xz", datadir);
    char *ts = xsa_read_text(p, &tn);
    CHECK(ts != NULL, "read %s", p);
    cJSON *r = cJSON_ParseWithLength(js, n);
    free(js);
    cJSON *s;
    size_t bytes = 0, tokens = 0;
    cJSON_ArrayForEach(s, cJSON_GetObjectItem(r, "slices")) {
        const char *file = cJSON_GetObjectItem(s, "file")->valuestring;
        size_t off = (size_t)cJSON_GetObjectItem(s, "offset")->valuedouble;
        size_t len = (size_t)cJSON_GetObjectItem(s, "length")->valuedouble;
        size_t fl;
        char *idtxt = fixture(file, &fl);
        if (!idtxt || !ts || off + len > tn) {
            CHECK(0, "slice %s unavailable", file);
            free(idtxt);
            continue;
        }
        size_t cap = fl / 2 + 1, nref = 0;
        int32_t *ref = malloc(cap * sizeof *ref);
        for (char *q = idtxt; *q;) {
            char *e;
            long v = strtol(q, &e, 10);
            if (e == q) break;
            ref[nref++] = (int32_t)v;
            q = e;
        }
        size_t nids;
        int32_t *ids = xsa_bpe_encode(tok, ts + off, len, 0, &nids);
        CHECK(ids && same_ids(file, ids, nids, ref, nref), "TinyStories slice %s identical", file);
        bytes += len;
        tokens += nref;
        free(ids);
        free(ref);
        free(idtxt);
    }
    printf("TinyStories: %zu bytes (%zu tokens) compared with tiktoken\n", bytes, tokens);
    CHECK(bytes > 500000, "compared %zu bytes of TinyStories", bytes);
    /* the whole file with <|endoftext|> as the special token: the count the
     * data README gives */
    if (ts) {
        size_t nids;
        int32_t *ids = xsa_bpe_encode(tok, ts, tn, XSA_BPE_SPECIAL, &nids);
        CHECK(ids && nids == 1777674, "whole TinyStories: %zu tokens (README: 1,777,674)", nids);
        free(ids);
    }
    free(ts);
    cJSON_Delete(r);
}

static void test_repair(void)
{
    struct { const char *in; size_t n; const char *out; } t[] = {
        {"abc", 3, NULL},
        {"\x80", 1, "\xEF\xBF\xBD"},
        {"a\xE2\x82" "b", 4, "a\xEF\xBF\xBD" "b"},          /* one U+FFFD for a truncated sequence */
        {"\xF0\x9F\x98", 3, "\xEF\xBF\xBD"},
        {"\xED\xA0\x80", 3, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"}, /* surrogates: one per byte */
        {"\xC0\xAF", 2, "\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"\xF4\x90\x80\x80", 4, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"\xE2\x82\xAC", 3, NULL},
        {"\x00\x01", 2, NULL},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        size_t ol;
        int failed;
        char *o = xsa_utf8_repair(t[i].in, t[i].n, &ol, &failed);
        if (!t[i].out) {
            CHECK(o == NULL && ol == t[i].n && !failed, "repair case %zu: valid input untouched", i);
        } else {
            CHECK(o && ol == strlen(t[i].out) && memcmp(o, t[i].out, ol) == 0, "repair case %zu", i);
        }
        free(o);
    }
}

/* CPU seconds to encode s[0, n), the fastest of reps (a busy machine only
 * adds time), with the ids through *ids when asked */
static double encode_time(xsa_bpe *tok, const char *s, size_t n, int reps, int32_t **ids, size_t *nids)
{
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        size_t k;
        double t0 = cpu_now();
        int32_t *got = xsa_bpe_encode(tok, s, n, 0, &k);
        double dt = cpu_now() - t0;
        if (dt < best) best = dt;
        if (ids && r == reps - 1) *ids = got, *nids = k;
        else free(got);
    }
    return best;
}

/* A 1 MB word of one kind must round trip and encode in about linear time.
 * Time is judged against the same kind's 128 KB prefix in the same process,
 * not against a clock, so a CPU of any speed or load passes or fails alike:
 * linear is 8x the prefix's time (9-14x measured on a Zen 3: the larger
 * word's tables leave the caches), quadratic 64x; the bound 32x sits a
 * factor 2 from each. The absolute 60 s only catches a hang. */
static void test_long_words(xsa_bpe *tok)
{
    const size_t n = 1 << 20, small = n / 8;
    char *s = malloc(n);
    uint64_t x = 88172645463325252ull;
    const char *kinds[] = {"random letters", "one letter", "digits", "spaces", "punctuation"};
    for (int k = 0; k < 5; k++) {
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            s[i] = k == 0 ? (char)('a' + x % 26) : k == 1 ? 'a' : k == 2 ? (char)('0' + x % 10)
                 : k == 3 ? ' ' : "!?.-"[x % 4];
        }
        size_t nids = 0, dl;
        int32_t *ids = NULL;
        double ts = encode_time(tok, s, small, 3, NULL, NULL);
        double dt = encode_time(tok, s, n, 1, &ids, &nids);
        char *d = ids ? xsa_bpe_decode(tok, ids, nids, &dl) : NULL;
        CHECK(d && dl == n && memcmp(d, s, n) == 0, "1 MB word of %s round trips", kinds[k]);
        /* a prefix too fast to time (under 1 ms) says nothing: then only the hang bound */
        CHECK(ts < 1e-3 || dt / ts < 32.0, "1 MB word of %s: %.3f s, %.0fx its 128 KB prefix's %.4f s (linear 8x)",
              kinds[k], dt, dt / ts, ts);
        CHECK(dt < 60.0, "1 MB word of %s encodes in %.3f s of CPU (a hang bound)", kinds[k], dt);
        printf("1 MB word of %s: %zu ids in %.3f s of CPU, %.1fx its 128 KB prefix\n", kinds[k], nids, dt, dt / ts);
        free(d);
        free(ids);
    }
    free(s);
}

static void test_api(xsa_bpe *tok)
{
    CHECK(xsa_bpe_vocab_size(tok) == 50257, "vocab size %d", xsa_bpe_vocab_size(tok));
    CHECK(xsa_bpe_eot(tok) == 50256, "eot %d", xsa_bpe_eot(tok));
    size_t len;
    const char *t = xsa_bpe_token(tok, 50256, &len);
    CHECK(t && len == 13 && memcmp(t, "<|endoftext|>", 13) == 0, "token(50256)");
    t = xsa_bpe_token(tok, 220, &len);
    CHECK(t && len == 1 && t[0] == ' ', "token(220) is a space");
    t = xsa_bpe_token(tok, 15496, &len);
    CHECK(t && len == 5 && memcmp(t, "Hello", 5) == 0, "token(15496) is Hello");
    CHECK(xsa_bpe_token(tok, 50257, &len) == NULL && strstr(xsa_last_error(), "out of range"),
          "token(50257) fails: %s", xsa_last_error());
    int32_t bad[3] = {15496, -1, 995};
    CHECK(xsa_bpe_decode(tok, bad, 3, &len) == NULL &&
          strstr(xsa_last_error(), "decode: id -1 at position 2 is out of range"),
          "decode(-1) fails: %s", xsa_last_error());
    /* the special token only when asked for */
    size_t n1, n2;
    int32_t *a = xsa_bpe_encode(tok, "<|endoftext|>", 13, 0, &n1);
    int32_t *b = xsa_bpe_encode(tok, "<|endoftext|>", 13, XSA_BPE_SPECIAL, &n2);
    CHECK(a && n1 > 1, "ordinary <|endoftext|> is %zu tokens", n1);
    CHECK(b && n2 == 1 && b[0] == 50256, "special <|endoftext|> is 50256");
    free(a);
    free(b);
    /* the cache never changes results */
    const char *txt = "Hello there, it's a test of the cache. Hello there!";
    a = xsa_bpe_encode(tok, txt, strlen(txt), 0, &n1);
    xsa_bpe_clear_cache(tok);
    b = xsa_bpe_encode(tok, txt, strlen(txt), 0, &n2);
    CHECK(a && b && n1 == n2 && memcmp(a, b, n1 * sizeof *a) == 0, "same ids after clearing the cache");
    free(a);
    free(b);
    CHECK(xsa_bpe_identity(tok) != 0, "identity");
}

static void test_load_errors(void)
{
    xsa_bpe *b = xsa_bpe_load("/nonexistent/encoder.json", "/nonexistent/vocab.bpe");
    CHECK(b == NULL && strstr(xsa_last_error(), "/nonexistent/encoder.json"),
          "missing file named: %s", xsa_last_error());
    const char *enc = "{\"a\": 0}";
    b = xsa_bpe_load_buffers(enc, strlen(enc), "", 0);
    CHECK(b == NULL && strstr(xsa_last_error(), "encoder.json"), "tiny encoder: %s", xsa_last_error());
    b = xsa_bpe_load_buffers("[1,2", 4, "", 0);
    CHECK(b == NULL && strstr(xsa_last_error(), "not a JSON object"), "bad JSON: %s", xsa_last_error());
    /* a real encoder with a broken merge line */
    char p[1200], q[1200];
    snprintf(p, sizeof p, "%s/encoder.json", datadir);
    snprintf(q, sizeof q, "%s/vocab.bpe", datadir);
    size_t en, vn;
    char *e = xsa_read_file(p, &en), *v = xsa_read_file(q, &vn);
    if (e && v) {
        const char *badv = "#version: 0.2\n\xC4\xA0 t\nnospace\n";
        b = xsa_bpe_load_buffers(e, en, badv, strlen(badv));
        CHECK(b == NULL && strstr(xsa_last_error(), "vocab.bpe line 3"), "bad merge line: %s", xsa_last_error());
        /* an encoder whose tokens are not all produced by the merges */
        b = xsa_bpe_load_buffers(e, en, "#version: 0.2\n", 14);
        CHECK(b == NULL && strstr(xsa_last_error(), "neither a byte nor"), "missing merges: %s", xsa_last_error());
        /* ids far outside int's range (found by fuzz_bpe_files: converting
         * them to int was undefined behaviour) */
        static const char *const huge[] = {"2.44444e+44", "-1e300", "4294967296", "2147483648",
                                           "0.5"};
        char *he = malloc(en + 32);
        for (size_t i = 0; he && i < sizeof huge / sizeof huge[0]; i++) {
            CHECK(strncmp(e, "{\"!\": 0,", 8) == 0, "encoder.json starts with {\"!\": 0,");
            int k = snprintf(he, en + 32, "{\"!\": %s", huge[i]);
            memcpy(he + k, e + 7, en - 7); /* keeps the comma */
            b = xsa_bpe_load_buffers(he, (size_t)k + en - 7, v, vn);
            CHECK(b == NULL && strstr(xsa_last_error(), "has id") && strstr(xsa_last_error(), "each once"),
                  "id %s refused: %s", huge[i], xsa_last_error());
        }
        free(he);
        b = xsa_bpe_load_buffers(e, en, v, vn);
        CHECK(b != NULL, "load from buffers");
        xsa_bpe_free(b);
    }
    free(e);
    free(v);
}

int main(void)
{
    if (find_data() != 0) {
        CHECK(0, "GPT-2 files not found ($XSA_DATA, $XSA_ROOT/data)");
        return check_done("test_bpe");
    }
    char e[1200], v[1200];
    snprintf(e, sizeof e, "%s/encoder.json", datadir);
    snprintf(v, sizeof v, "%s/vocab.bpe", datadir);
    double t0 = now();
    xsa_bpe *tok = xsa_bpe_load(e, v);
    CHECK(tok != NULL, "load: %s", xsa_last_error());
    if (!tok) return check_done("test_bpe");
    printf("loaded the GPT-2 vocabulary in %.1f ms\n", 1e3 * (now() - t0));
    test_api(tok);
    test_repair();
    test_cases(tok);
    test_unicode_blocks(tok);
    test_tinystories(tok);
    test_long_words(tok);
    test_load_errors();
    xsa_bpe_free(tok);
    return check_done("test_bpe");
}

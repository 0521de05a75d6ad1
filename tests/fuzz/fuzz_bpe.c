/*
 * fuzz_bpe.c: libFuzzer harness for the GPT-2 BPE encoder and decoder
 * (core/bpe.c) with the real GPT-2 tokenizer, loaded once from $XSA_DATA or
 * data/ (encoder.json, vocab.bpe).
 *
 * Why: encoding takes arbitrary user text (any bytes, invalid UTF-8, long
 * runs, "<|endoftext|>" fragments) through hand-written UTF-8 repair,
 * pre-tokenisation and a heap-based merge with a piece cache; decoding takes
 * ids that may come from a corrupt file. Each input drives:
 *   - encode of the bytes with and without XSA_BPE_SPECIAL; the ids must be
 *     in range and decode back to the input exactly (valid UTF-8) or to
 *     xsa_utf8_repair's U+FFFD form (invalid UTF-8); a second encode (from
 *     the piece cache) and one after clearing the cache give the same ids;
 *   - decode of the same bytes read as int32 ids (many out of range): NULL
 *     with a "decode: id ..." error exactly when an id is out of range, else
 *     the concatenation of xsa_bpe_token for each id.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../core/xsa.h"

static xsa_bpe *tok;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *dirs[2] = {getenv("XSA_DATA"), "data"};
    for (int i = 0; i < 2; i++) {
        if (!dirs[i]) continue;
        char e[4096], v[4096];
        snprintf(e, sizeof e, "%s/encoder.json", dirs[i]);
        snprintf(v, sizeof v, "%s/vocab.bpe", dirs[i]);
        if (access(e, R_OK) != 0) continue;
        tok = xsa_bpe_load(e, v);
        if (!tok) {
            fprintf(stderr, "fuzz_bpe: %s\n", xsa_last_error());
            exit(2);
        }
        return 0;
    }
    fprintf(stderr, "fuzz_bpe: no encoder.json in $XSA_DATA or data/ (set XSA_DATA)\n");
    exit(2);
}

#define REQUIRE(cond, what)                                                   \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "fuzz_bpe: %s failed: %s\n", (what), #cond);      \
            abort();                                                          \
        }                                                                     \
    } while (0)

static void encode_round_trip(const char *text, size_t n, const char *want, size_t want_n,
                              int flags)
{
    size_t nid = 0;
    int32_t *ids = xsa_bpe_encode(tok, text, n, flags, &nid);
    REQUIRE(ids != NULL, "encode");
    int V = xsa_bpe_vocab_size(tok);
    for (size_t i = 0; i < nid; i++) REQUIRE(ids[i] >= 0 && ids[i] < V, "id in range");
    if (!(flags & XSA_BPE_SPECIAL))
        for (size_t i = 0; i < nid; i++) REQUIRE(ids[i] != xsa_bpe_eot(tok), "no EOT in ordinary");
    size_t len = 0;
    char *back = xsa_bpe_decode(tok, ids, nid, &len);
    REQUIRE(back != NULL, "decode of encoded ids");
    REQUIRE(len == want_n && memcmp(back, want, len) == 0, "decode(encode(x)) == repair(x)");
    REQUIRE(back[len] == '\0', "decode NUL-terminates");
    free(back);

    /* the same ids from the piece cache, and again from an empty cache */
    size_t n2 = 0;
    int32_t *again = xsa_bpe_encode(tok, text, n, flags, &n2);
    REQUIRE(again && n2 == nid && memcmp(again, ids, nid * sizeof *ids) == 0, "cached encode");
    free(again);
    if (n && (text[0] & 7) == 0) {
        xsa_bpe_clear_cache(tok);
        again = xsa_bpe_encode(tok, text, n, flags, &n2);
        REQUIRE(again && n2 == nid && memcmp(again, ids, nid * sizeof *ids) == 0,
                "encode after clear_cache");
        free(again);
    }
    free(ids);
}

static void decode_ids(const uint8_t *data, size_t size)
{
    size_t n = size / 4;
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    REQUIRE(ids != NULL, "malloc");
    int V = xsa_bpe_vocab_size(tok);
    size_t bad = (size_t)-1, total = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)data[4 * i] | (uint32_t)data[4 * i + 1] << 8 |
                     (uint32_t)data[4 * i + 2] << 16 | (uint32_t)data[4 * i + 3] << 24;
        /* the top byte picks in range (mostly) or the raw value (any int32) */
        ids[i] = (u >> 24) < 0xF0 ? (int32_t)(u % (uint32_t)(V + 2)) : (int32_t)u;
        if ((ids[i] < 0 || ids[i] >= V) && bad == (size_t)-1) bad = i;
        size_t tl;
        if (ids[i] >= 0 && ids[i] < V) {
            REQUIRE(xsa_bpe_token(tok, ids[i], &tl) != NULL, "token of a valid id");
            total += tl;
        } else {
            REQUIRE(xsa_bpe_token(tok, ids[i], &tl) == NULL, "token of a bad id");
        }
    }
    size_t len = 0;
    char *s = xsa_bpe_decode(tok, ids, n, &len);
    if (bad != (size_t)-1) {
        REQUIRE(s == NULL, "decode refuses a bad id");
        REQUIRE(strncmp(xsa_last_error(), "decode: id ", 11) == 0, "decode error message");
    } else {
        REQUIRE(s != NULL && len == total, "decode of valid ids");
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            size_t tl;
            const char *t = xsa_bpe_token(tok, ids[i], &tl);
            REQUIRE(memcmp(s + k, t, tl) == 0, "decode is the concatenation of tokens");
            k += tl;
        }
    }
    free(s);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    size_t rn = 0;
    int failed = 0;
    char *fixed = xsa_utf8_repair(text, size, &rn, &failed);
    REQUIRE(!failed, "utf8_repair");
    const char *want = fixed ? fixed : text;
    if (fixed) {
        /* the repaired text is valid UTF-8 and repairs to itself */
        size_t rn2 = 0;
        char *twice = xsa_utf8_repair(fixed, rn, &rn2, &failed);
        REQUIRE(!failed && twice == NULL && rn2 == rn, "repair is idempotent");
    } else {
        REQUIRE(rn == size, "valid text keeps its length");
    }
    encode_round_trip(text, size, want, rn, 0);
    encode_round_trip(text, size, want, rn, XSA_BPE_SPECIAL);
    free(fixed);
    decode_ids(data, size);
    return 0;
}

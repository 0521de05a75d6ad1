/*
 * fuzz_bpe_files.c: libFuzzer harness for the tokenizer loader
 * (xsa_bpe_load_buffers in core/bpe.c) on arbitrary encoder.json and
 * vocab.bpe contents.
 *
 * Why: the loader parses two files that users download and may truncate or
 * swap; it checks ids, the byte alphabet, duplicates and merges by hand.
 * The input is split at the first two 0xFF bytes (a byte that valid UTF-8,
 * and so both real files, never contains):
 *   encoder.json 0xFF vocab.bpe [0xFF text]
 * A failed load must be a clean NULL with an error message. A tokenizer that
 * loads must encode the text (or a fixed sample) with and without the special
 * token so that decoding gives back the UTF-8-repaired text, and reject
 * out-of-range ids.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/xsa.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(cond, what)                                                   \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "fuzz_bpe_files: %s failed: %s\n", (what), #cond); \
            abort();                                                          \
        }                                                                     \
    } while (0)

static void round_trip(xsa_bpe *b, const char *text, size_t n, int flags)
{
    size_t rn = 0, nid = 0, len = 0;
    int failed = 0;
    char *fixed = xsa_utf8_repair(text, n, &rn, &failed);
    REQUIRE(!failed, "repair");
    const char *want = fixed ? fixed : text;
    int32_t *ids = xsa_bpe_encode(b, text, n, flags, &nid);
    REQUIRE(ids != NULL, "encode");
    char *back = xsa_bpe_decode(b, ids, nid, &len);
    REQUIRE(back != NULL, "decode of encoded ids");
    REQUIRE(len == rn && memcmp(back, want, len) == 0, "decode(encode(x)) == repair(x)");
    free(back);
    free(ids);
    free(fixed);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    const uint8_t *sep = memchr(data, 0xFF, size);
    size_t enc_n = sep ? (size_t)(sep - data) : size;
    const char *voc = sep ? s + enc_n + 1 : s + size;
    size_t rest = sep ? size - enc_n - 1 : 0;
    const uint8_t *sep2 = memchr(voc, 0xFF, rest);
    size_t voc_n = sep2 ? (size_t)(sep2 - (const uint8_t *)voc) : rest;
    const char *text = sep2 ? voc + voc_n + 1 : NULL;
    size_t text_n = sep2 ? rest - voc_n - 1 : 0;

    /* exact-size copies, so reading past either "file" is caught by ASan */
    char *enc = malloc(enc_n ? enc_n : 1), *vb = malloc(voc_n ? voc_n : 1);
    REQUIRE(enc && vb, "malloc");
    memcpy(enc, s, enc_n);
    memcpy(vb, voc, voc_n);
    xsa_clear_error();
    xsa_bpe *b = xsa_bpe_load_buffers(enc, enc_n, vb, voc_n);
    free(enc);
    free(vb);
    if (!b) {
        REQUIRE(strncmp(xsa_last_error(), "bpe: ", 5) == 0, "load error message");
        return 0;
    }
    int V = xsa_bpe_vocab_size(b);
    REQUIRE(V >= 256, "at least the 256 bytes");
    int eot = xsa_bpe_eot(b);
    REQUIRE(eot >= -1 && eot < V, "eot in range");
    size_t tl;
    for (int id = 0; id < V; id++) REQUIRE(xsa_bpe_token(b, id, &tl) != NULL && tl > 0, "token");
    REQUIRE(xsa_bpe_token(b, V, &tl) == NULL && xsa_bpe_token(b, -1, &tl) == NULL, "bad token id");
    int32_t bad[2] = {0, V};
    REQUIRE(xsa_bpe_decode(b, bad, 2, &tl) == NULL, "decode of an out-of-range id");

    static const char sample[] = "Hello world, it's 2024! <|endoftext|> caf\xc3\xa9 \xff\xfe  \n\n x";
    if (!text) {
        text = sample;
        text_n = sizeof sample - 1;
    }
    round_trip(b, text, text_n, 0);
    round_trip(b, text, text_n, XSA_BPE_SPECIAL);
    xsa_bpe_free(b);
    return 0;
}

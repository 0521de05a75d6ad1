/*
 * fuzz_token_cache.c: libFuzzer harness for the token cache reader
 * (xsa_data_cache_parse in core/data.c, what xsa_data_story_tokens applies to
 * the .tokens.cache files) on arbitrary bytes.
 *
 * Why: the cache is a binary file trusted for training data; a truncated,
 * corrupt or stale one must be refused with a reason, never misread. Random
 * bytes would almost never get past the source/tokenizer checks and the
 * checksum, so the first input byte chooses what the harness makes agree:
 *   bit 0: expect the source size, source hash and tokenizer identity that
 *          the image itself claims (else fixed values that rarely match);
 *   bit 1: write the correct checksum of the ids into the image;
 *   bits 2-3: the vocabulary size (50257, 256, 65536 or 1).
 * The rest of the input is the cache image. A refusal must come with a
 * reason; an acceptance must return exactly the little-endian uint16 ids of
 * a well-formed image, each below the vocabulary size.
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
            fprintf(stderr, "fuzz_token_cache: %s failed: %s\n", (what), #cond); \
            abort();                                                          \
        }                                                                     \
    } while (0)

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    uint8_t mode = data[0];
    size_t len = size - 1;
    /* an exact-size copy, so any read past the image is caught */
    uint8_t *img = malloc(len ? len : 1);
    REQUIRE(img != NULL, "malloc");
    memcpy(img, data + 1, len);

    uint64_t src_size = 1234, src_hash = 0x5eed, ident = 0x70c;
    if ((mode & 1) && len >= 40) {
        src_size = get64(img + 16);
        src_hash = get64(img + 24);
        ident = get64(img + 32);
    }
    if ((mode & 2) && len >= 64) put64(img + 48, xsa_bpe_hash(img + 64, (len - 64) & ~(size_t)1, 0x7470u));
    static const int vocabs[4] = {50257, 256, 65536, 1};
    int vocab = vocabs[(mode >> 2) & 3];

    char why[160];
    why[0] = '\0';
    size_t n = (size_t)-1;
    int32_t *ids = xsa_data_cache_parse(img, len, src_size, src_hash, ident, vocab, &n, why, sizeof why);
    if (!ids) {
        REQUIRE(why[0] != '\0', "a refusal gives a reason");
        REQUIRE(n == (size_t)-1, "n untouched on refusal");
    } else {
        REQUIRE(why[0] == '\0', "no reason on success");
        REQUIRE(len >= 64 && memcmp(img, "XSATOKS", 8) == 0, "magic");
        REQUIRE(n == get64(img + 40) && len == 64 + 2 * n, "count matches the size");
        for (size_t i = 0; i < n; i++) {
            int32_t v = (int32_t)(img[64 + 2 * i] | img[64 + 2 * i + 1] << 8);
            REQUIRE(ids[i] == v && v < vocab, "ids are the uint16s, below the vocabulary");
        }
        free(ids);
    }
    free(img);
    return 0;
}

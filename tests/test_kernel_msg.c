/*
 * test_kernel_msg.c: the Jupyter kernel's message parser (lua/kernel_msg.c)
 * fails closed. Signatures are checked against OpenSSL's one-shot HMAC()
 * and RFC 4231's test vector, never against kmsg_sign alone; then every
 * allocation that OpenSSL and cJSON make while a message is parsed is made
 * to fail in turn (CRYPTO_set_mem_functions, cJSON_InitHooks): a message is
 * accepted only whole and only with its true signature, never because a
 * step could not run. A replayed signature is refused. Built only with the
 * Jupyter kernel (XSA_HAVE_JUPYTER); without it, a skip line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#ifndef XSA_HAVE_JUPYTER
int main(void)
{
    printf("skip: built without the Jupyter kernel (ZeroMQ, OpenSSL)\n");
    return check_done("test_kernel_msg");
}
#else
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "../lua/kernel.h"

static long n_alloc, fail_at = -1; /* fail the fail_at-th allocation; -2: all */

static int failing(void)
{
    n_alloc++;
    return fail_at == -2 || n_alloc == fail_at;
}
static void *t_malloc(size_t n, const char *f, int l) { (void)f, (void)l; return failing() ? NULL : malloc(n); }
static void *t_realloc(void *p, size_t n, const char *f, int l) { (void)f, (void)l; return failing() ? NULL : realloc(p, n); }
static void t_free(void *p, const char *f, int l) { (void)f, (void)l; free(p); }
static void *j_malloc(size_t n) { return failing() ? NULL : malloc(n); }

static const char KEY[] = "a-test-key-0123456789";

/* the six parts of a message after the identities, signed with key by HMAC() */
static void make(char parts[6][256], size_t lens[6], const char *key, const char *code, int nonce)
{
    snprintf(parts[0], 256, "<IDS|MSG>");
    snprintf(parts[2], 256, "{\"msg_id\":\"m%d\",\"msg_type\":\"execute_request\"}", nonce);
    snprintf(parts[3], 256, "{\"msg_id\":\"p%d\"}", nonce);
    snprintf(parts[4], 256, "{}");
    snprintf(parts[5], 256, "{\"code\":\"%s\"}", code);
    unsigned char buf[1024], md[32];
    size_t total = 0;
    for (int i = 2; i < 6; i++) {
        lens[i] = strlen(parts[i]);
        memcpy(buf + total, parts[i], lens[i]);
        total += lens[i];
    }
    unsigned int mdlen = 0;
    HMAC(EVP_sha256(), key, (int)strlen(key), buf, total, md, &mdlen);
    for (int i = 0; i < 32; i++) snprintf(parts[1] + 2 * i, 3, "%02x", md[i]);
    lens[0] = strlen(parts[0]);
    lens[1] = strlen(parts[1]);
}

static int parse(char parts[6][256], const size_t lens[6], const char *key, kmsg *m)
{
    const void *p[7] = {"peer", parts[0], parts[1], parts[2], parts[3], parts[4], parts[5]};
    size_t l[7] = {4, lens[0], lens[1], lens[2], lens[3], lens[4], lens[5]};
    return kmsg_parse(p, l, 7, key, m);
}

static void test_rfc4231(void)
{
    const void *parts[2] = {"what do ya ", "want for nothing?"};
    size_t lens[2] = {11, 17};
    char out[65];
    CHECK(kmsg_sign("Jefe", parts, lens, 2, out) == 0 &&
              !strcmp(out, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
          "RFC 4231 case 2: %s", out);
}

static void test_signatures_and_replay(void)
{
    char parts[6][256];
    size_t lens[6];
    kmsg m;
    make(parts, lens, KEY, "x = 1", 1);
    CHECK(parse(parts, lens, KEY, &m) == 1 && !strcmp(m.msg_type, "execute_request") && m.n_ids == 1 &&
              m.parent_id && !strcmp(m.parent_id, "p1"),
          "a truly signed message is accepted whole");
    kmsg_free(&m);
    CHECK(parse(parts, lens, KEY, &m) == 0, "its replay is refused");
    make(parts, lens, "another key", "x = 2", 2);
    CHECK(parse(parts, lens, KEY, &m) == 0, "a message signed with another key is refused");
    make(parts, lens, KEY, "x = 3", 3);
    size_t l1 = lens[1];
    lens[1] = 0;
    CHECK(parse(parts, lens, KEY, &m) == 0, "an empty signature while a key is set is refused");
    lens[1] = l1;
    for (int i = 0; i < 64; i++) parts[1][i] = (char)(parts[1][i] >= 'a' ? parts[1][i] - 32 : parts[1][i]);
    CHECK(parse(parts, lens, KEY, &m) == 0, "the digest in capitals is refused");
    make(parts, lens, KEY, "x = 4", 4);
    lens[1] = 0;
    CHECK(parse(parts, lens, "", &m) == 1, "without a key, an unsigned message is taken (Jupyter's rule)");
    kmsg_free(&m);
    lens[1] = 64;
    CHECK(parse(parts, lens, "", &m) == 0, "without a key, a signed message is refused");
}

/* every allocation of a parse failed in turn: never accepted unless true and whole */
static void test_allocation_failures(void)
{
    char parts[6][256];
    size_t lens[6];
    kmsg m;
    int accepted = 0, refused = 0;
    for (long k = 1; k <= 400; k++) {
        make(parts, lens, KEY, "y = 1", 1000 + (int)k);
        size_t keep = lens[1];
        lens[1] = 0; /* the forgery first: no allocation failure lets it in */
        n_alloc = 0, fail_at = k;
        int forged = parse(parts, lens, KEY, &m);
        fail_at = -1;
        if (forged) kmsg_free(&m);
        CHECK(!forged, "an unsigned message accepted when allocation %ld failed", k);
        lens[1] = keep;
        n_alloc = 0, fail_at = k;
        int got = parse(parts, lens, KEY, &m);
        fail_at = -1;
        if (got) CHECK(m.msg_type && cJSON_IsObject(m.content) && m.parent_id, "accepted but incomplete (%ld)", k);
        got ? accepted++ : refused++;
        kmsg_free(&m);
        if (n_alloc < k) break; /* every allocation of a parse has been failed once */
    }
    CHECK(refused > 0 && accepted > 0, "the sweep reached the parse's allocations (%d refused, %d accepted)",
          refused, accepted);
    make(parts, lens, KEY, "z = 1", 9999);
    fail_at = -2;
    int got = parse(parts, lens, KEY, &m);
    fail_at = -1;
    CHECK(got == 0, "a true message is refused when its signature cannot be computed");
    char out[65];
    const void *p[1] = {"x"};
    size_t l[1] = {1};
    fail_at = -2;
    CHECK(kmsg_sign(KEY, p, l, 1, out) == -1, "kmsg_sign reports the failure");
    fail_at = -1;
}

int main(void)
{
    kmsg_verbose = 0;
    if (!CRYPTO_set_mem_functions(t_malloc, t_realloc, t_free)) {
        printf("FAIL: CRYPTO_set_mem_functions refused (OpenSSL allocated before main)\n");
        return 1;
    }
    cJSON_Hooks hooks = {j_malloc, free};
    cJSON_InitHooks(&hooks);
    test_rfc4231();
    test_signatures_and_replay();
    test_allocation_failures();
    return check_done("test_kernel_msg");
}
#endif

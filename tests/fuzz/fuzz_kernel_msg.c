/*
 * fuzz_kernel_msg.c: libFuzzer harness for the Jupyter kernel's message
 * parser (kmsg_parse in lua/kernel_msg.c), what every byte from a front end
 * goes through before the kernel acts on it.
 *
 * Input: byte 0 chooses the key (bit 0: none or a fixed one) and whether the
 * harness signs the four parts after the delimiter itself (bit 1), so the
 * fuzzer reaches the JSON past the signature check; the rest is split into
 * parts at each 0x1E byte. Checked: no crash, leak or undefined behaviour
 * (ASan, UBSan); a message accepted with a key carries the true signature of
 * its parts; an accepted message is whole (a msg_type, an object content, at
 * most KMSG_MAX_IDS identities). Built only with ZeroMQ and OpenSSL.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifndef XSA_HAVE_JUPYTER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    (void)data, (void)size;
    return 0;
}
#else
#include "../../lua/kernel.h"

#define MAXP (KMSG_MAX_PARTS + 4)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int quiet;
    if (!quiet) kmsg_verbose = 0, quiet = 1;
    if (size < 1) return 0;
    const char *key = data[0] & 1 ? "" : "fuzz-key";
    int self_sign = data[0] & 2;
    const void *parts[MAXP];
    size_t lens[MAXP];
    int n = 0;
    size_t start = 1;
    for (size_t i = 1; i <= size && n < MAXP; i++) {
        if (i == size || data[i] == 0x1E) {
            parts[n] = data + start;
            lens[n++] = i - start;
            start = i + 1;
        }
    }
    char sig[65] = "";
    int d = 0;
    while (d < n && !(lens[d] == 9 && !memcmp(parts[d], "<IDS|MSG>", 9))) d++;
    if (self_sign && d + 5 < n && kmsg_sign(key, parts + d + 2, lens + d + 2, 4, sig) == 0) {
        parts[d + 1] = sig;
        lens[d + 1] = strlen(sig);
    }
    kmsg m;
    if (kmsg_parse(parts, lens, n, key, &m) == 1) {
        if (!m.msg_type || !cJSON_IsObject(m.content) || !cJSON_IsObject(m.header) || m.n_ids > KMSG_MAX_IDS ||
            !m.header_text)
            abort();
        if (key[0]) {
            char want[65];
            if (kmsg_sign(key, parts + d + 2, lens + d + 2, 4, want) != 0 || lens[d + 1] != 64 ||
                memcmp(parts[d + 1], want, 64) != 0)
                abort(); /* accepted without its true signature */
        }
        kmsg_free(&m);
    }
    return 0;
}
#endif

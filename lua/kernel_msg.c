/*
 * kernel_msg.c: the wire format of the Jupyter kernel (kernel.h): the
 * connection file, HMAC-SHA256 signatures (OpenSSL's HMAC), multipart
 * messages on ZeroMQ, message ids and base64.
 *
 * A message with a bad, missing, replayed or uncomputable signature, too
 * many parts or bytes, or JSON that is not what the protocol says is dropped
 * with a line on stderr, never answered (the protocol says so for
 * signatures). Everything fails closed: a step that cannot be done (out of
 * memory, an OpenSSL error) drops the message.
 *
 * Non-goals: the sockets' lifetime and what a message means (kernel.c);
 * schemes other than hmac-sha256; binary buffers in messages.
 */
#ifdef XSA_HAVE_JUPYTER
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <pthread.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <zmq.h>

#include "kernel.h"

#define DELIM "<IDS|MSG>"

static char *read_all(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open connection file %s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1) break;
        char *nb = realloc(buf, cap *= 2);
        if (!nb) free(buf);
        buf = nb;
    }
    fclose(f);
    if (!buf) snprintf(err, errlen, "out of memory reading %s", path);
    else buf[n] = '\0';
    return buf;
}

static int copy_field(cJSON *o, const char *name, char *dst, size_t n)
{
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsString(v) || strlen(v->valuestring) >= n) return -1;
    strcpy(dst, v->valuestring);
    return 0;
}

static int port_field(cJSON *o, const char *name, int *port)
{
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble > 65535) return -1;
    *port = (int)v->valuedouble;
    return 0;
}

int kconn_read(const char *path, kconn *c, char *err, size_t errlen)
{
    char *text = read_all(path, err, errlen);
    if (!text) return -1;
    cJSON *o = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(o)) {
        snprintf(err, errlen, "connection file %s is not a JSON object", path);
        cJSON_Delete(o);
        return -1;
    }
    memset(c, 0, sizeof *c);
    strcpy(c->scheme, "hmac-sha256");
    int bad = copy_field(o, "transport", c->transport, sizeof c->transport) ||
              copy_field(o, "ip", c->ip, sizeof c->ip) || copy_field(o, "key", c->key, sizeof c->key) ||
              port_field(o, "shell_port", &c->shell_port) || port_field(o, "iopub_port", &c->iopub_port) ||
              port_field(o, "stdin_port", &c->stdin_port) || port_field(o, "control_port", &c->control_port) ||
              port_field(o, "hb_port", &c->hb_port);
    if (cJSON_GetObjectItemCaseSensitive(o, "signature_scheme"))
        bad = bad || copy_field(o, "signature_scheme", c->scheme, sizeof c->scheme);
    cJSON_Delete(o);
    if (bad) {
        snprintf(err, errlen, "connection file %s lacks transport, ip, key or a port (or a value is too long)", path);
        return -1;
    }
    if (strcmp(c->transport, "tcp") != 0 && strcmp(c->transport, "ipc") != 0) {
        snprintf(err, errlen, "transport %s is not supported (tcp or ipc)", c->transport);
        return -1;
    }
    if (strcmp(c->scheme, "hmac-sha256") != 0) {
        snprintf(err, errlen, "signature scheme %s is not supported (only hmac-sha256)", c->scheme);
        return -1;
    }
    return 0;
}

int kmsg_verbose = 1;

static void drop(const char *why)
{
    if (kmsg_verbose) fprintf(stderr, "xsa kernel: dropped a message %s\n", why);
}

/* HMAC-SHA256 through EVP_MAC, part by part: no buffer to allocate, and
 * every step's failure is seen. */
int kmsg_sign(const char *key, const void *const *parts, const size_t *lens, int n, char out[65])
{
    out[0] = '\0';
    if (!key[0]) return 0;
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    EVP_MAC_CTX *ctx = mac ? EVP_MAC_CTX_new(mac) : NULL;
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", (char *)"SHA256", 0), OSSL_PARAM_construct_end()};
    unsigned char md[EVP_MAX_MD_SIZE];
    size_t mdlen = 0;
    int ok = ctx && EVP_MAC_init(ctx, (const unsigned char *)key, strlen(key), params);
    for (int i = 0; ok && i < n; i++) ok = EVP_MAC_update(ctx, parts[i], lens[i]);
    ok = ok && EVP_MAC_final(ctx, md, &mdlen, sizeof md) && mdlen == 32;
    EVP_MAC_CTX_free(ctx);
    EVP_MAC_free(mac);
    if (!ok) return -1;
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", md[i]);
    return 0;
}

/* ---- signatures seen: two generations of an open-addressed set ---- */

#define SEEN_SLOTS (4 * KMSG_REPLAY_KEEP) /* load at most 1/4: short probes */

typedef struct {
    unsigned char (*slot)[32]; /* all-zero: empty */
    size_t n;
} seen_gen;

static seen_gen seen[2]; /* [0] current, [1] previous */
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;

/* the slot of d in g, or the empty slot where it would go */
static unsigned char *seen_slot(const seen_gen *g, const unsigned char d[32])
{
    static const unsigned char zero[32];
    size_t h;
    memcpy(&h, d, sizeof h); /* an HMAC's bytes are uniform */
    for (size_t i = h % SEEN_SLOTS;; i = (i + 1) % SEEN_SLOTS) {
        unsigned char *s = g->slot[i];
        if (!memcmp(s, d, 32) || !memcmp(s, zero, 32)) return s;
    }
}

/* 1 when d was new and is now remembered; 0 when seen before or when it
 * cannot be remembered (out of memory): either way the message is refused */
static int seen_add(const unsigned char d[32])
{
    static const unsigned char zero[32];
    if (!memcmp(d, zero, 32)) return 0; /* the empty mark; 2^-256 */
    pthread_mutex_lock(&seen_lock);
    int fresh = 0;
    if (!seen[0].slot) seen[0].slot = calloc(SEEN_SLOTS, 32);
    if (!seen[0].slot) goto out;
    for (int g = 0; g < 2; g++)
        if (seen[g].slot && !memcmp(seen_slot(&seen[g], d), d, 32)) goto out;
    if (seen[0].n == KMSG_REPLAY_KEEP) {
        unsigned char (*fresh_slots)[32] = calloc(SEEN_SLOTS, 32);
        if (!fresh_slots) goto out;
        free(seen[1].slot);
        seen[1] = seen[0];
        seen[0].slot = fresh_slots;
        seen[0].n = 0;
    }
    memcpy(seen_slot(&seen[0], d), d, 32);
    seen[0].n++;
    fresh = 1;
out:
    pthread_mutex_unlock(&seen_lock);
    return fresh;
}

static int unhex(const char *hex, size_t n, unsigned char out[32])
{
    if (n != 64) return -1;
    for (size_t i = 0; i < 64; i++) {
        int c = hex[i], v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0) return -1;
        if (i % 2 == 0) out[i / 2] = (unsigned char)(v << 4);
        else out[i / 2] |= (unsigned char)v;
    }
    return 0;
}

/* 1 when the signature sig[siglen] of the four parts is good and new */
static int verified(const char *key, const char *sig, size_t siglen, const void *const *sp, const size_t *sl)
{
    char want[65];
    if (kmsg_sign(key, sp, sl, 4, want) != 0) {
        drop("whose signature could not be computed");
        return 0;
    }
    if (!key[0]) {
        if (siglen == 0) return 1;
        drop("with a signature while the kernel has no key");
        return 0;
    }
    unsigned char d[32];
    if (siglen != 64 || CRYPTO_memcmp(sig, want, 64) != 0 || unhex(want, 64, d) != 0) {
        drop("with a bad signature");
        return 0;
    }
    if (!seen_add(d)) {
        drop("whose signature was seen before (a replay) or could not be remembered");
        return 0;
    }
    return 1;
}

void kmsg_free(kmsg *m)
{
    for (int i = 0; i < m->n_ids; i++) free(m->ids[i]);
    free(m->header_text);
    free(m->parent_id);
    cJSON_Delete(m->header);
    cJSON_Delete(m->content);
    memset(m, 0, sizeof *m);
}

/* the parts after the signature: JSON objects, a msg_type, a parent's msg_id */
static int parse_json(const void *const *sp, const size_t *sl, kmsg *m)
{
    m->header_text = strndup(sp[0], sl[0]);
    m->header = cJSON_ParseWithLength(sp[0], sl[0]);
    m->content = cJSON_ParseWithLength(sp[3], sl[3]);
    cJSON *parent = cJSON_ParseWithLength(sp[1], sl[1]), *meta = cJSON_ParseWithLength(sp[2], sl[2]);
    cJSON *t = cJSON_GetObjectItemCaseSensitive(m->header, "msg_type");
    cJSON *pid = cJSON_GetObjectItemCaseSensitive(parent, "msg_id");
    int ok = m->header_text && cJSON_IsObject(m->header) && cJSON_IsObject(parent) && cJSON_IsObject(meta) &&
             cJSON_IsObject(m->content) && cJSON_IsString(t);
    if (ok && cJSON_IsString(pid) && pid->valuestring[0]) ok = (m->parent_id = strdup(pid->valuestring)) != NULL;
    else if (ok && pid && !cJSON_IsString(pid)) ok = 0;
    cJSON_Delete(parent);
    cJSON_Delete(meta);
    if (!ok) return 0;
    m->msg_type = t->valuestring;
    return 1;
}

int kmsg_parse(const void *const *parts, const size_t *lens, int n, const char *key, kmsg *m)
{
    memset(m, 0, sizeof *m);
    size_t total = 0;
    for (int i = 0; i < n; i++) total += lens[i] > KMSG_MAX_BYTES ? KMSG_MAX_BYTES + 1 : lens[i];
    if (n > KMSG_MAX_PARTS || total > KMSG_MAX_BYTES) {
        drop("larger than the kernel takes (doc/notebook.md)");
        return 0;
    }
    int d = 0;
    while (d < n && !(lens[d] == strlen(DELIM) && !memcmp(parts[d], DELIM, strlen(DELIM)))) d++;
    if (d + 5 >= n || d > KMSG_MAX_IDS) {
        drop("without the <IDS|MSG> delimiter or its parts");
        return 0;
    }
    if (!verified(key, parts[d + 1], lens[d + 1], parts + d + 2, lens + d + 2)) return 0;
    for (int i = 0; i < d; i++) {
        m->id_len[i] = lens[i];
        m->ids[i] = malloc(lens[i] + 1);
        m->n_ids = i + 1;
        if (!m->ids[i]) {
            drop("(out of memory)");
            kmsg_free(m);
            return 0;
        }
        memcpy(m->ids[i], parts[i], lens[i]);
    }
    if (!parse_json(parts + d + 2, lens + d + 2, m)) {
        drop("whose header, parent_header, metadata or content is not a JSON object (or out of memory)");
        kmsg_free(m);
        return 0;
    }
    return 1;
}

int kmsg_recv(void *sock, const char *key, kmsg *m)
{
    memset(m, 0, sizeof *m);
    zmq_msg_t parts[KMSG_MAX_PARTS];
    int n = 0, more = 1, extra = 0;
    while (more) {
        zmq_msg_t tmp;
        zmq_msg_init(&tmp);
        while (zmq_msg_recv(&tmp, sock, 0) < 0) {
            if (errno != EINTR) {
                zmq_msg_close(&tmp);
                for (int i = 0; i < n; i++) zmq_msg_close(&parts[i]);
                return -1;
            }
        }
        more = zmq_msg_more(&tmp);
        if (n < KMSG_MAX_PARTS) parts[n++] = tmp;
        else zmq_msg_close(&tmp), extra = 1;
    }
    const void *data[KMSG_MAX_PARTS];
    size_t lens[KMSG_MAX_PARTS];
    for (int i = 0; i < n; i++) {
        data[i] = zmq_msg_data(&parts[i]);
        lens[i] = zmq_msg_size(&parts[i]);
    }
    int rc = extra ? (drop("of more parts than the kernel takes"), 0) : kmsg_parse(data, lens, n, key, m);
    for (int i = 0; i < n; i++) zmq_msg_close(&parts[i]);
    return rc;
}

static int send_part(void *sock, const void *data, size_t n, int more)
{
    while (zmq_send(sock, data, n, more ? ZMQ_SNDMORE : 0) < 0)
        if (errno != EINTR) return -1;
    return 0;
}

static void iso_now(char *buf, size_t n)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    char base[32];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, n, "%s.%06ldZ", base, (long)tv.tv_usec);
}

int kmsg_send(void *sock, const char *key, const char *session, const kmsg *parent, const char *topic,
              const char *msg_type, cJSON *content, char *msg_id)
{
    char id[33], date[48];
    kmsg_uuid(id);
    iso_now(date, sizeof date);
    cJSON *h = cJSON_CreateObject();
    cJSON_AddStringToObject(h, "msg_id", id);
    cJSON_AddStringToObject(h, "session", session);
    cJSON_AddStringToObject(h, "username", "xsa");
    cJSON_AddStringToObject(h, "date", date);
    cJSON_AddStringToObject(h, "msg_type", msg_type);
    cJSON_AddStringToObject(h, "version", "5.3");
    char *parts[4] = {cJSON_PrintUnformatted(h), NULL, strdup("{}"), cJSON_PrintUnformatted(content)};
    parts[1] = strdup(parent && parent->header_text ? parent->header_text : "{}");
    cJSON_Delete(h);
    cJSON_Delete(content);
    int rc = -1;
    if (!parts[0] || !parts[1] || !parts[2] || !parts[3]) goto out;
    size_t lens[4];
    for (int i = 0; i < 4; i++) lens[i] = strlen(parts[i]);
    char sig[65];
    if (kmsg_sign(key, (const void *const *)parts, lens, 4, sig) != 0) goto out;
    if (msg_id) memcpy(msg_id, id, 33);
    rc = 0;
    if (topic) {
        rc |= send_part(sock, topic, strlen(topic), 1);
    } else if (parent) {
        for (int i = 0; i < parent->n_ids; i++) rc |= send_part(sock, parent->ids[i], parent->id_len[i], 1);
    }
    rc |= send_part(sock, DELIM, strlen(DELIM), 1);
    rc |= send_part(sock, sig, strlen(sig), 1);
    for (int i = 0; i < 4; i++) rc |= send_part(sock, parts[i], lens[i], i < 3);
out:
    for (int i = 0; i < 4; i++) free(parts[i]);
    return rc;
}

void kmsg_uuid(char buf[33])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char r[16];
    FILE *f = fopen("/dev/urandom", "rb");
    size_t got = f ? fread(r, 1, sizeof r, f) : 0;
    if (f) fclose(f);
    for (size_t i = got; i < sizeof r; i++) r[i] = (unsigned char)(rand() ^ (int)clock());
    for (int i = 0; i < 16; i++) {
        buf[2 * i] = hex[r[i] >> 4];
        buf[2 * i + 1] = hex[r[i] & 15];
    }
    buf[32] = '\0';
}

char *kmsg_base64(const unsigned char *data, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if (n > ((size_t)-1 - 8) / 4 * 3) return NULL;
    char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
    if (!out) return NULL;
    size_t i = 0;
    for (; i + 2 < n; i += 3) {
        unsigned v = (unsigned)data[i] << 16 | (unsigned)data[i + 1] << 8 | data[i + 2];
        *o++ = tab[v >> 18];
        *o++ = tab[(v >> 12) & 63];
        *o++ = tab[(v >> 6) & 63];
        *o++ = tab[v & 63];
    }
    if (i < n) {
        unsigned v = (unsigned)data[i] << 16 | (i + 1 < n ? (unsigned)data[i + 1] << 8 : 0);
        *o++ = tab[v >> 18];
        *o++ = tab[(v >> 12) & 63];
        *o++ = i + 1 < n ? tab[(v >> 6) & 63] : '=';
        *o++ = '=';
    }
    *o = '\0';
    return out;
}
#else
typedef int kernel_msg_unused; /* built without ZeroMQ/OpenSSL: kernel.c says so */
#endif

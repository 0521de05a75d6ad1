/*
 * kernel_msg.c: the wire format of the Jupyter kernel (kernel.h): the
 * connection file, HMAC-SHA256 signatures (OpenSSL's HMAC), multipart
 * messages on ZeroMQ, message ids and base64.
 *
 * A message with a bad signature or unparsable JSON is dropped with a line
 * on stderr, never answered (the protocol says so for signatures).
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

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
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
    if (strcmp(c->scheme, "hmac-sha256") != 0) {
        snprintf(err, errlen, "signature scheme %s is not supported (only hmac-sha256)", c->scheme);
        return -1;
    }
    return 0;
}

/* hex HMAC-SHA256 of the parts into out[65]; "" with an empty key (no
 * signing). HMAC() is OpenSSL 3's one-shot call that is not deprecated, so
 * the parts go through one buffer. */
static void sign(const char *key, const char *const *parts, const size_t *lens, int n, char out[65])
{
    out[0] = '\0';
    if (!key[0]) return;
    size_t total = 0;
    for (int i = 0; i < n; i++) total += lens[i];
    unsigned char *buf = malloc(total ? total : 1), *p = buf;
    if (!buf) return;
    for (int i = 0; i < n; i++) {
        memcpy(p, parts[i], lens[i]);
        p += lens[i];
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (HMAC(EVP_sha256(), key, (int)strlen(key), buf, total, md, &mdlen) == NULL) mdlen = 0;
    free(buf);
    for (unsigned i = 0; i < mdlen && i < 32; i++) snprintf(out + 2 * i, 3, "%02x", md[i]);
}

void kmsg_free(kmsg *m)
{
    for (int i = 0; i < m->n_ids; i++) free(m->ids[i]);
    free(m->header_text);
    cJSON_Delete(m->header);
    cJSON_Delete(m->content);
    memset(m, 0, sizeof *m);
}

#define MAX_PARTS 32

int kmsg_recv(void *sock, const char *key, kmsg *m)
{
    memset(m, 0, sizeof *m);
    zmq_msg_t parts[MAX_PARTS];
    int n = 0, more = 1, rc = 1;
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
        if (n < MAX_PARTS) parts[n++] = tmp;
        else zmq_msg_close(&tmp), rc = 0;
    }
    int d = 0;
    while (d < n && !(zmq_msg_size(&parts[d]) == strlen(DELIM) && !memcmp(zmq_msg_data(&parts[d]), DELIM, strlen(DELIM))))
        d++;
    if (rc == 0 || d + 5 >= n || d > KMSG_MAX_IDS) {
        if (rc) fprintf(stderr, "xsa kernel: dropped a message without the <IDS|MSG> delimiter or its parts\n");
        rc = 0;
        goto out;
    }
    const char *sp[4];
    size_t sl[4];
    for (int i = 0; i < 4; i++) {
        sp[i] = zmq_msg_data(&parts[d + 2 + i]);
        sl[i] = zmq_msg_size(&parts[d + 2 + i]);
    }
    char want[65];
    sign(key, sp, sl, 4, want);
    size_t siglen = zmq_msg_size(&parts[d + 1]);
    if (siglen != strlen(want) || CRYPTO_memcmp(zmq_msg_data(&parts[d + 1]), want, siglen) != 0) {
        fprintf(stderr, "xsa kernel: dropped a message with a bad signature\n");
        rc = 0;
        goto out;
    }
    for (int i = 0; i < d; i++) {
        m->id_len[i] = zmq_msg_size(&parts[i]);
        m->ids[i] = malloc(m->id_len[i] + 1);
        if (m->ids[i]) memcpy(m->ids[i], zmq_msg_data(&parts[i]), m->id_len[i]);
        m->n_ids = i + 1;
    }
    m->header_text = strndup(sp[0], sl[0]);
    m->header = cJSON_ParseWithLength(sp[0], sl[0]);
    m->content = cJSON_ParseWithLength(sp[3], sl[3]);
    cJSON *t = cJSON_GetObjectItemCaseSensitive(m->header, "msg_type");
    if (!m->header_text || !cJSON_IsObject(m->content) || !cJSON_IsString(t)) {
        fprintf(stderr, "xsa kernel: dropped a message whose header or content is not JSON\n");
        kmsg_free(m);
        rc = 0;
        goto out;
    }
    m->msg_type = t->valuestring;
out:
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
              const char *msg_type, cJSON *content)
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
    sign(key, (const char *const *)parts, lens, 4, sig);
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

/*
 * kernel.h: what kernel.c (the sockets, the loop, the Lua side) and
 * kernel_msg.c (the wire format) of the Jupyter kernel share. Built only
 * with ZeroMQ and OpenSSL (XSA_HAVE_JUPYTER).
 *
 * A message on the wire (Jupyter messaging protocol 5.3) is a multipart
 * ZeroMQ message: routing identities, "<IDS|MSG>", the hex HMAC-SHA256 of
 * the next four parts, then header, parent_header, metadata and content,
 * each a JSON object.
 */
#ifndef XSA_KERNEL_H
#define XSA_KERNEL_H

#include <stddef.h>

#include <cjson/cJSON.h>

#define KMSG_MAX_IDS 16
/* The most parts one message may have, and the most bytes all of them
 * together (doc/notebook.md): each socket also refuses a larger part before
 * it is received (ZMQ_MAXMSGSIZE), and nothing is hashed or parsed until a
 * message is known to be within both. */
#define KMSG_MAX_PARTS 32
#define KMSG_MAX_BYTES ((size_t)16 << 20)
/* Signatures remembered to refuse a replay: at least this many of the
 * latest, at most twice as many (two generations). */
#define KMSG_REPLAY_KEEP 32768

typedef struct {
    char *ids[KMSG_MAX_IDS];
    size_t id_len[KMSG_MAX_IDS];
    int n_ids;
    char *header_text; /* as received: the parent_header of the replies */
    cJSON *header, *content;
    const char *msg_type; /* in header */
    char *parent_id;      /* msg_id of the parent_header; NULL when it has none */
} kmsg;

typedef struct {
    char transport[16], ip[256], key[256], scheme[32];
    int shell_port, iopub_port, stdin_port, control_port, hb_port;
} kconn;

/* Reads the connection file; 0, or -1 with a message in err. */
int kconn_read(const char *path, kconn *c, char *err, size_t errlen);

/* Receives one message from a ROUTER socket. 1 on success, 0 for a message
 * that is malformed, too large, replayed or badly signed (dropped, with a
 * line on stderr), -1 on a socket error. */
int kmsg_recv(void *sock, const char *key, kmsg *m);

/* What kmsg_recv does with the n parts of a message once received: fails
 * closed. With a key, a message is accepted only when its signature could be
 * computed, equals the one sent and was not seen before (then it is
 * remembered); any failure on the way (memory, OpenSSL) drops it. 1 or 0,
 * as kmsg_recv. Thread-safe. */
int kmsg_parse(const void *const *parts, const size_t *lens, int n, const char *key, kmsg *m);
void kmsg_free(kmsg *m);

/* 0 silences kmsg_parse's lines on stderr (the fuzzer). */
extern int kmsg_verbose;

/* Sends msg_type with `content` (consumed) as a reply to `parent` (NULL:
 * no parent), to the parent's identities (or to `topic` on IOPub); its
 * msg_id into msg_id[33] when not NULL. 0 or -1 (nothing sent when the
 * message cannot be signed). */
int kmsg_send(void *sock, const char *key, const char *session, const kmsg *parent, const char *topic,
              const char *msg_type, cJSON *content, char *msg_id);

/* hex HMAC-SHA256 of the n parts under key into out[65]; "" for an empty
 * key (no signing). 0, or -1 when it could not be computed. */
int kmsg_sign(const char *key, const void *const *parts, const size_t *lens, int n, char out[65]);

/* A random 32-hex-digit identifier into buf[33]. */
void kmsg_uuid(char buf[33]);

/* base64 of n bytes, malloc'ed; NULL when out of memory. */
char *kmsg_base64(const unsigned char *data, size_t n);

#endif

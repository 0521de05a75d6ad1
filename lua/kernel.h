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

typedef struct {
    char *ids[KMSG_MAX_IDS];
    size_t id_len[KMSG_MAX_IDS];
    int n_ids;
    char *header_text; /* as received: the parent_header of the replies */
    cJSON *header, *content;
    const char *msg_type; /* in header */
} kmsg;

typedef struct {
    char transport[16], ip[64], key[256], scheme[32];
    int shell_port, iopub_port, stdin_port, control_port, hb_port;
} kconn;

/* Reads the connection file; 0, or -1 with a message in err. */
int kconn_read(const char *path, kconn *c, char *err, size_t errlen);

/* Receives one message from a ROUTER socket. 1 on success, 0 for a message
 * that is malformed or badly signed (dropped, with a line on stderr), -1 on
 * a socket error. */
int kmsg_recv(void *sock, const char *key, kmsg *m);
void kmsg_free(kmsg *m);

/* Sends msg_type with `content` (consumed) as a reply to `parent` (NULL:
 * no parent), to the parent's identities (or to `topic` on IOPub).
 * 0 or -1. */
int kmsg_send(void *sock, const char *key, const char *session, const kmsg *parent, const char *topic,
              const char *msg_type, cJSON *content);

/* A random 32-hex-digit identifier into buf[33]. */
void kmsg_uuid(char buf[33]);

/* base64 of n bytes, malloc'ed; NULL when out of memory. */
char *kmsg_base64(const unsigned char *data, size_t n);

#endif

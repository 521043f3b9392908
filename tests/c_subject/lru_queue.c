/* A user's broker in C that zchaos knows nothing about: a load-balancing (LRU) queue for
 * REQ clients and Simple Pirate workers, on Debian's libzmq.
 *
 *     lru_queue FRONTEND BACKEND [CORRUPT_EVERY]
 *
 * Workers say READY (one frame 0x01) and get [client, '', body...], which they send back
 * as the reply. CORRUPT_EVERY (default 0: never) is a planted bug for the tests: every
 * Nth reply goes back with its last byte changed. It prints with plain printf (no fflush,
 * no setvbuf): on a file or pipe C's stdio holds those lines until its buffer fills.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#define MAX_FRAMES 16
#define MAX_WORKERS 1024

typedef struct {
    size_t len[MAX_FRAMES];
    char *data[MAX_FRAMES];
    int n;
} message;

static volatile sig_atomic_t stopping = 0;

static void on_term(int sig) {
    (void)sig;
    stopping = 1;
}

static void release(message *m) {
    for (int i = 0; i < m->n; i++) free(m->data[i]);
    m->n = 0;
}

/* Receives a whole message; frames past MAX_FRAMES are read and dropped. */
static int receive(void *socket, message *m) {
    m->n = 0;
    int more = 1;
    while (more) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, socket, 0) < 0) {
            zmq_msg_close(&part);
            release(m);
            return -1;
        }
        more = zmq_msg_more(&part);
        if (m->n < MAX_FRAMES) {
            size_t len = zmq_msg_size(&part);
            m->data[m->n] = malloc(len ? len : 1);
            memcpy(m->data[m->n], zmq_msg_data(&part), len);
            m->len[m->n++] = len;
        }
        zmq_msg_close(&part);
    }
    return 0;
}

/* Sends frames [from, m->n) of m, after the given head frames. */
static void send_frames(void *socket, const message *m, int from, const message *head) {
    int total = head->n + (m->n - from);
    int sent = 0;
    for (int i = 0; i < head->n; i++, sent++)
        zmq_send(socket, head->data[i], head->len[i], sent + 1 < total ? ZMQ_SNDMORE : 0);
    for (int i = from; i < m->n; i++, sent++)
        zmq_send(socket, m->data[i], m->len[i], sent + 1 < total ? ZMQ_SNDMORE : 0);
}

static void show(const char *what, const char *id, size_t len) {
    printf("%s ", what);
    for (size_t i = 0; i < len; i++) printf("%02x", (unsigned char)id[i]);
    printf("\n");
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s FRONTEND BACKEND [CORRUPT_EVERY]\n", argv[0]);
        return 2;
    }
    long corrupt_every = argc > 3 ? atol(argv[3]) : 0;
    signal(SIGTERM, on_term);
    void *context = zmq_ctx_new();
    void *frontend = zmq_socket(context, ZMQ_ROUTER);
    void *backend = zmq_socket(context, ZMQ_ROUTER);
    int linger = 0;
    zmq_setsockopt(frontend, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(backend, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_bind(frontend, argv[1]) != 0 || zmq_bind(backend, argv[2]) != 0) {
        fprintf(stderr, "cannot bind: %s\n", zmq_strerror(errno));
        return 1;
    }
    printf("queue ready on %s and %s\n", argv[1], argv[2]);

    message idle_ids[MAX_WORKERS]; /* one frame each: the worker's identity */
    int idle = 0;
    long replies = 0;
    message m, head;
    while (!stopping) {
        zmq_pollitem_t items[] = {{backend, 0, ZMQ_POLLIN, 0}, {frontend, 0, ZMQ_POLLIN, 0}};
        if (zmq_poll(items, idle ? 2 : 1, 250) < 0) break; /* EINTR: SIGTERM */
        if (items[0].revents & ZMQ_POLLIN) {
            if (receive(backend, &m) != 0) break;
            if (m.n == 3 && m.len[1] == 0 && m.len[2] == 1 && m.data[2][0] == 1) {
                show("worker ready", m.data[0], m.len[0]);
            } else if (m.n >= 5 && m.len[1] == 0 && m.len[3] == 0) {
                replies++;
                if (corrupt_every > 0 && replies % corrupt_every == 0 && m.len[m.n - 1] > 0) {
                    m.data[m.n - 1][m.len[m.n - 1] - 1] ^= 0x20;
                    printf("reply %ld changed on its way back\n", replies);
                }
                head.n = 0;
                send_frames(frontend, &m, 2, &head); /* client, '', body... */
            } else {
                printf("dropped a worker message of %d frames\n", m.n);
                release(&m);
                continue;
            }
            if (idle < MAX_WORKERS) {
                idle_ids[idle].n = 1;
                idle_ids[idle].len[0] = m.len[0];
                idle_ids[idle].data[0] = malloc(m.len[0] ? m.len[0] : 1);
                memcpy(idle_ids[idle].data[0], m.data[0], m.len[0]);
                idle++;
            }
            release(&m);
        }
        if (idle && (items[1].revents & ZMQ_POLLIN)) {
            if (receive(frontend, &m) != 0) break;
            if (m.n >= 3 && m.len[1] == 0) {
                message worker = idle_ids[0];
                memmove(idle_ids, idle_ids + 1, sizeof(message) * (size_t)--idle);
                head.n = 2;
                head.data[0] = worker.data[0];
                head.len[0] = worker.len[0];
                head.data[1] = "";
                head.len[1] = 0;
                send_frames(backend, &m, 0, &head); /* worker, '', client, '', body... */
                show("request to worker", worker.data[0], worker.len[0]);
                release(&worker);
            } else {
                printf("dropped a client message of %d frames\n", m.n);
            }
            release(&m);
        }
    }
    printf("queue stopping after %ld replies\n", replies);
    zmq_close(frontend);
    zmq_close(backend);
    zmq_ctx_term(context);
    return 0;
}

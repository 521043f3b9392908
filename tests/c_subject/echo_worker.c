/* A user's echo worker in C for a Simple Pirate queue, on Debian's libzmq.
 *
 *     echo_worker BACKEND IDENTITY
 *
 * A REQ socket with the given identity says READY (one frame 0x01), then sends every
 * request it gets ([client, '', body...]) back unchanged. It says it is ready with plain
 * printf (no fflush, no setvbuf).
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#define MAX_FRAMES 16

static volatile sig_atomic_t stopping = 0;

static void on_term(int sig) {
    (void)sig;
    stopping = 1;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s BACKEND IDENTITY\n", argv[0]);
        return 2;
    }
    signal(SIGTERM, on_term);
    void *context = zmq_ctx_new();
    void *socket = zmq_socket(context, ZMQ_REQ);
    int linger = 0;
    zmq_setsockopt(socket, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(socket, ZMQ_ROUTING_ID, argv[2], strlen(argv[2]));
    zmq_connect(socket, argv[1]);
    zmq_send(socket, "\x01", 1, 0);
    printf("worker %s ready\n", argv[2]);
    long jobs = 0;
    while (!stopping) {
        zmq_msg_t parts[MAX_FRAMES];
        int n = 0, more = 1, failed = 0;
        while (more) {
            zmq_msg_t part;
            zmq_msg_init(&part);
            if (zmq_msg_recv(&part, socket, 0) < 0) {
                zmq_msg_close(&part);
                failed = 1;
                break;
            }
            more = zmq_msg_more(&part);
            if (n < MAX_FRAMES) {
                zmq_msg_init(&parts[n]);
                zmq_msg_move(&parts[n++], &part);
            }
            zmq_msg_close(&part);
        }
        for (int i = 0; i < n; i++) {
            if (!failed) zmq_msg_send(&parts[i], socket, i + 1 < n ? ZMQ_SNDMORE : 0);
            zmq_msg_close(&parts[i]);
        }
        if (failed) break; /* EINTR: SIGTERM */
        jobs++;
    }
    printf("worker %s stopping after %ld jobs\n", argv[2], jobs);
    zmq_close(socket);
    zmq_ctx_term(context);
    return 0;
}

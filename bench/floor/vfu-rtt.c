/*
 * The timing client of the protocol benchmark's round-trip figure. It does
 * what a QEMU vCPU thread does on an MMIO read: write one REGION_READ
 * (region 0, offset 0, 4 bytes) and block in read() until the reply is
 * complete, one request at a time. Being C, it adds no pauses of its own
 * (a JavaScript client's JIT and GC pauses would show up in both servers'
 * tails), so the figures are the server's.
 *
 * usage: vfu-rtt SOCKET COUNT OUTFILE
 * Negotiates VERSION, then times COUNT round trips and writes each one's
 * time in nanoseconds as a little-endian uint32 to OUTFILE, in order.
 * Exit status 1 on any error (including an error reply).
 * Built by bench/protocol.ts at bench time; not part of the product.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static int read_full(int fd, void *buf, size_t len) {
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, (char *)buf + got, len - got);
        if (n == 0) return -1;
        if (n < 0) { if (errno == EINTR) continue; return -1; }
        got += (size_t)n;
    }
    return 0;
}

static int write_full(int fd, const void *buf, size_t len) {
    size_t put = 0;
    while (put < len) {
        ssize_t n = write(fd, (const char *)buf + put, len - put);
        if (n < 0) { if (errno == EINTR) continue; return -1; }
        put += (size_t)n;
    }
    return 0;
}

/* Read one reply into buf (at most cap bytes); returns its size, or -1. */
static long read_reply(int fd, unsigned char *buf, size_t cap, uint16_t id) {
    uint32_t size, flags;
    uint16_t rid;
    if (read_full(fd, buf, 16)) return -1;
    memcpy(&rid, buf, 2);
    memcpy(&size, buf + 4, 4);
    memcpy(&flags, buf + 8, 4);
    if (rid != id || size < 16 || size > cap) return -1;
    if (size > 16 && read_full(fd, buf + 16, size - 16)) return -1;
    if ((flags & 0xf) != 1 || (flags & 0x20)) return -1; /* not a reply, or an error reply */
    return (long)size;
}

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: %s SOCKET COUNT OUTFILE\n", argv[0]); return 2; }
    long count = strtol(argv[2], NULL, 10);
    if (count <= 0) { fprintf(stderr, "vfu-rtt: bad COUNT\n"); return 2; }
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    strncpy(a.sun_path, argv[1], sizeof(a.sun_path) - 1);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a))) { perror("vfu-rtt: connect"); return 1; }

    static unsigned char msg[256], reply[4096];
    static const char caps[] = "{\"capabilities\":{\"max_msg_fds\":16,\"max_data_xfer_size\":1048576}}";
    uint32_t size = 20 + sizeof(caps); /* header, major/minor, JSON with its NUL */
    uint16_t command = 1;
    memcpy(msg + 2, &command, 2);
    memcpy(msg + 4, &size, 4);
    memcpy(msg + 20, caps, sizeof(caps));
    if (write_full(fd, msg, size) || read_reply(fd, reply, sizeof(reply), 0) < 0) {
        fprintf(stderr, "vfu-rtt: VERSION failed\n");
        return 1;
    }

    uint32_t *times = malloc(sizeof(uint32_t) * (size_t)count);
    unsigned char req[32] = {0};
    uint32_t rsize = 32, rcount = 4;
    command = 9; /* REGION_READ: offset 0, region 0, count 4 */
    memcpy(req + 2, &command, 2);
    memcpy(req + 4, &rsize, 4);
    memcpy(req + 28, &rcount, 4);
    for (long i = 0; i < count; i++) {
        uint16_t id = (uint16_t)(i + 1);
        memcpy(req, &id, 2);
        uint64_t t0 = now_ns();
        if (write_full(fd, req, sizeof(req)) || read_reply(fd, reply, sizeof(reply), id) != 36) {
            fprintf(stderr, "vfu-rtt: REGION_READ %ld failed\n", i);
            return 1;
        }
        uint64_t dt = now_ns() - t0;
        times[i] = dt > UINT32_MAX ? UINT32_MAX : (uint32_t)dt;
    }
    close(fd);
    FILE *out = fopen(argv[3], "wb");
    if (!out || fwrite(times, sizeof(uint32_t), (size_t)count, out) != (size_t)count || fclose(out)) {
        perror("vfu-rtt: write samples");
        return 1;
    }
    return 0;
}

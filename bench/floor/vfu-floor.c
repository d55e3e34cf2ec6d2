/*
 * The floor for the protocol benchmark: the least a vfio-user server can do.
 * One client on a UNIX stream socket; for each message it reads the 16-byte
 * header and the body with plain blocking reads and writes the smallest valid
 * reply (none for NO_REPLY). No validation, no device: only the socket cost.
 * Built by bench/protocol.ts at bench time; not part of the product.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
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

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s SOCKET\n", argv[0]); return 2; }
    int ls = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    strncpy(a.sun_path, argv[1], sizeof(a.sun_path) - 1);
    unlink(argv[1]);
    if (bind(ls, (struct sockaddr *)&a, sizeof(a)) || listen(ls, 1)) { perror("listen"); return 1; }
    printf("ready\n");
    fflush(stdout);
    int fd = accept(ls, NULL, NULL);
    if (fd < 0) { perror("accept"); return 1; }
    static unsigned char in[1 << 21], out[1 << 21];
    static const char caps[] = "{\"capabilities\":{\"max_msg_fds\":16,\"max_data_xfer_size\":1048576}}";
    for (;;) {
        if (read_full(fd, in, 16)) break;
        uint32_t size, flags;
        uint16_t cmd;
        memcpy(&cmd, in + 2, 2);
        memcpy(&size, in + 4, 4);
        memcpy(&flags, in + 8, 4);
        if (size < 16 || size > sizeof(in)) break;
        if (size > 16 && read_full(fd, in + 16, size - 16)) break;
        if (flags & 0x10) continue;              /* NO_REPLY */
        uint32_t len = 16;
        memcpy(out, in, 4);                      /* msg_id and command */
        if (cmd == 1) {                          /* VERSION: major 0 minor 0 + caps */
            memset(out + 16, 0, 4);
            memcpy(out + 20, caps, sizeof(caps)); /* includes the NUL */
            len = 20 + sizeof(caps);
        } else if (cmd == 9) {                   /* REGION_READ: struct + count bytes */
            uint32_t count;
            memcpy(&count, in + 28, 4);
            memcpy(out + 16, in + 16, 16);
            memset(out + 32, 0, count);
            len = 32 + count;
        } else if (cmd == 10) {                  /* REGION_WRITE: struct */
            memcpy(out + 16, in + 16, 16);
            len = 32;
        }
        uint32_t rflags = 1, zero = 0;
        memcpy(out + 4, &len, 4);
        memcpy(out + 8, &rflags, 4);
        memcpy(out + 12, &zero, 4);
        if (write_full(fd, out, len)) break;
    }
    return 0;
}

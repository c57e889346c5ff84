/* Minimal implementation worker in C: speaks protocol v1 directly, writes an empty result. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int field(const char *line, const char *key, char *out, size_t cap) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char *p = strstr(line, pat);
    if (!p) return 0;
    p += strlen(pat);
    size_t n = 0;
    while (*p && *p != '"' && n + 1 < cap) out[n++] = *p++;
    out[n] = 0;
    return 1;
}

static void send(int fd, const char *s) {
    size_t len = strlen(s), off = 0;
    while (off < len) {
        ssize_t w = write(fd, s + off, len - off);
        if (w <= 0) exit(3);
        off += (size_t)w;
    }
}

int main(void) {
    const char *r = getenv("METEWAND_PROTOCOL_READ_FD"), *w = getenv("METEWAND_PROTOCOL_WRITE_FD");
    if (!r || !w) return 2;
    FILE *in = fdopen(atoi(r), "r");
    int out = atoi(w);
    char *line = NULL, id[64], method[32], arg[4096], buf[8192];
    size_t cap = 0;
    while (getline(&line, &cap, in) > 0) {
        field(line, "id", id, sizeof id);
        field(line, "method", method, sizeof method);
        if (!strcmp(method, "hello")) {
            field(line, "worker_id", arg, sizeof arg);
            snprintf(buf, sizeof buf, "{\"capabilities\":[\"one_shot\"],\"id\":\"%s\",\"ok\":true,\"protocol\":1,\"sdk\":null,\"worker_id\":\"%s\"}\n", id, arg);
        } else if (!strcmp(method, "execute")) {
            field(line, "result_dir", arg, sizeof arg);
            char path[4200];
            snprintf(path, sizeof path, "%s/result-manifest.json", arg);
            FILE *f = fopen(path, "w");
            if (!f) return 4;
            fputs("{\"data\":{\"answer\":42},\"files\":[],\"schema_version\":1}", f);
            fclose(f);
            snprintf(buf, sizeof buf, "{\"id\":\"%s\",\"implementation_time_ns\":null,\"ok\":true,\"result\":{\"manifest\":\"result-manifest.json\"},\"statistics\":{}}\n", id);
        } else {
            snprintf(buf, sizeof buf, "{\"id\":\"%s\",\"ok\":true}\n", id);
        }
        send(out, buf);
        if (!strcmp(method, "shutdown")) return 0;
    }
    return 0;
}

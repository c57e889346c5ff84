/* Implementation in C that speaks metewand worker protocol v1 itself (no SDK).
 * Requests arrive one per line on METEWAND_PROTOCOL_READ_FD; one response line each goes to
 * METEWAND_PROTOCOL_WRITE_FD. Sorting uses a bottom-up merge sort on 64-bit integers. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long long *values, *scratch;
static size_t count;

/* Copy the string value of "key" from a JSON line (paths and ids carry no escapes). */
static int get_str(const char *line, const char *key, char *out, size_t cap) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":\"", key);
    const char *p = strstr(line, pattern);
    if (!p) return 0;
    p += strlen(pattern);
    size_t n = 0;
    while (*p && *p != '"' && n + 1 < cap) {
        if (*p == '\\' && p[1]) p++;
        out[n++] = *p++;
    }
    out[n] = 0;
    return *p == '"';
}

static void reply(int fd, const char *text) {
    size_t len = strlen(text), done = 0;
    while (done < len) {
        ssize_t w = write(fd, text + done, len - done);
        if (w <= 0) exit(3);
        done += (size_t)w;
    }
}

static int load(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/values.txt", dir);
    FILE *f = fopen(path, "r");
    count = 0;
    if (!f) return 0;
    size_t cap = 1024;
    values = realloc(values, cap * sizeof *values);
    long long v;
    while (fscanf(f, "%lld", &v) == 1) {
        if (count == cap) values = realloc(values, (cap *= 2) * sizeof *values);
        values[count++] = v;
    }
    fclose(f);
    scratch = realloc(scratch, (count ? count : 1) * sizeof *scratch);
    return 1;
}

static void merge_sort(void) {
    for (size_t width = 1; width < count; width *= 2) {
        for (size_t lo = 0; lo < count; lo += 2 * width) {
            size_t mid = lo + width < count ? lo + width : count;
            size_t hi = lo + 2 * width < count ? lo + 2 * width : count;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) scratch[k++] = values[i] <= values[j] ? values[i++] : values[j++];
            while (i < mid) scratch[k++] = values[i++];
            while (j < hi) scratch[k++] = values[j++];
        }
        long long *t = values; values = scratch; scratch = t;
    }
}

static long write_result(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/sorted.txt", dir);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    for (size_t i = 0; i < count; i++) fprintf(f, "%lld\n", values[i]);
    fflush(f);
    long size = ftell(f);
    fclose(f);
    snprintf(path, sizeof path, "%s/result-manifest.json", dir);
    f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "{\"data\":{\"count\":%zu},\"files\":[{\"media_type\":\"text/plain\","
               "\"path\":\"sorted.txt\",\"size_bytes\":%ld}],\"schema_version\":1}", count, size);
    fflush(f);
    fclose(f);
    return size;
}

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(void) {
    const char *rfd = getenv("METEWAND_PROTOCOL_READ_FD"), *wfd = getenv("METEWAND_PROTOCOL_WRITE_FD");
    if (!rfd || !wfd) { fprintf(stderr, "protocol descriptors not set\n"); return 2; }
    FILE *in = fdopen(atoi(rfd), "r");
    int out = atoi(wfd);
    char *line = NULL, id[64], method[64], arg[4096], buf[8192];
    size_t cap = 0;
    while (getline(&line, &cap, in) > 0) {
        if (!get_str(line, "id", id, sizeof id) || !get_str(line, "method", method, sizeof method)) {
            reply(out, "{\"error\":{\"code\":\"invalid_request\",\"message\":\"no id or method\"},\"id\":\"\",\"ok\":false}\n");
            continue;
        }
        if (!strcmp(method, "hello")) {
            get_str(line, "worker_id", arg, sizeof arg);
            snprintf(buf, sizeof buf, "{\"capabilities\":[\"one_shot\"],\"id\":\"%s\",\"ok\":true,"
                     "\"protocol\":1,\"sdk\":null,\"worker_id\":\"%s\"}\n", id, arg);
        } else if (!strcmp(method, "prepare")) {
            if (!get_str(line, "dataset_dir", arg, sizeof arg) || !load(arg)) {
                snprintf(buf, sizeof buf, "{\"error\":{\"code\":\"operation_failed\",\"message\":\"cannot read values.txt\"},\"id\":\"%s\",\"ok\":false}\n", id);
            } else {
                snprintf(buf, sizeof buf, "{\"id\":\"%s\",\"ok\":true}\n", id);
            }
        } else if (!strcmp(method, "execute")) {
            get_str(line, "result_dir", arg, sizeof arg);
            long long start = now_ns();
            merge_sort();
            long size = write_result(arg);
            long long elapsed = now_ns() - start;
            if (size < 0)
                snprintf(buf, sizeof buf, "{\"error\":{\"code\":\"operation_failed\",\"message\":\"cannot write result\"},\"id\":\"%s\",\"ok\":false}\n", id);
            else
                snprintf(buf, sizeof buf, "{\"id\":\"%s\",\"implementation_time_ns\":%lld,\"ok\":true,"
                         "\"result\":{\"manifest\":\"result-manifest.json\"},\"statistics\":{\"algorithm\":\"merge_sort_c\"}}\n", id, elapsed);
        } else if (!strcmp(method, "reset") || !strcmp(method, "shutdown")) {
            snprintf(buf, sizeof buf, "{\"id\":\"%s\",\"ok\":true}\n", id);
            reply(out, buf);
            if (!strcmp(method, "shutdown")) return 0;
            continue;
        } else {
            snprintf(buf, sizeof buf, "{\"error\":{\"code\":\"unsupported_operation\",\"message\":\"unknown method\"},\"id\":\"%s\",\"ok\":false}\n", id);
        }
        reply(out, buf);
    }
    return 0;
}

/* libvirt_floor: the memory any process pays for libvirt, measured in a
 * process that holds nothing else (C, libc only), so the figure is libvirt's
 * and not ours. Steps: the bare process; libvirt.so opened (dlopen, as the
 * hypervisor module's load brings it); virInitialize(); virConnectOpen(URI)
 * (default test:///default, the benches' driver; qemu:///system needs a
 * running libvirtd). After each step: RSS, PSS and their file/anonymous
 * parts from /proc/self/smaps_rollup; at the end the mappings with the most
 * RSS, per file (bench/README.md "Memory"). Prints figures; never fails on
 * them. Usage: libvirt_floor [URI] [TOP]
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    long rss, pss, rss_anon, rss_file;
} Figures;

static Figures rollup(void) {
    Figures f = {0, 0, 0, 0};
    FILE* in = fopen("/proc/self/smaps_rollup", "r");
    if (!in) return f;
    char line[256];
    while (fgets(line, sizeof line, in)) {
        long v = 0;
        if (sscanf(line, "Rss: %ld", &v) == 1) f.rss = v;
        else if (sscanf(line, "Pss: %ld", &v) == 1) f.pss = v;
        else if (sscanf(line, "Anonymous: %ld", &v) == 1) f.rss_anon = v;
    }
    fclose(in);
    f.rss_file = f.rss - f.rss_anon;
    return f;
}

static Figures last;

static void step(const char* what) {
    Figures f = rollup();
    printf("%-34s RSS %6.1f MiB (+%5.1f)  file %5.1f  anon %4.1f  PSS %5.1f MiB\n", what,
           f.rss / 1024.0, (f.rss - last.rss) / 1024.0, f.rss_file / 1024.0, f.rss_anon / 1024.0,
           f.pss / 1024.0);
    last = f;
}

typedef struct {
    char name[256];
    long rss;
} Mapping;

static int by_rss(const void* a, const void* b) {
    long d = ((const Mapping*)b)->rss - ((const Mapping*)a)->rss;
    return d > 0 ? 1 : d < 0 ? -1 : 0;
}

/* RSS per mapped file (all its mappings summed); anonymous memory as one. */
static void top_mappings(int top) {
    FILE* in = fopen("/proc/self/smaps", "r");
    if (!in) return;
    static Mapping m[1024];
    int n = 0, cur = -1;
    char line[1024];
    while (fgets(line, sizeof line, in)) {
        unsigned long lo, hi;
        long v;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, ' ')) {
            const char* name = "(anonymous, heap, stacks)";
            char* slash = strchr(line, '/');
            if (slash) {
                slash[strcspn(slash, "\n")] = 0;
                const char* base = strrchr(slash, '/');
                name = base + 1;
            }
            cur = -1;
            for (int i = 0; i < n; i++)
                if (!strcmp(m[i].name, name)) cur = i;
            if (cur < 0 && n < 1024) {
                cur = n++;
                snprintf(m[cur].name, sizeof m[cur].name, "%s", name);
                m[cur].rss = 0;
            }
        } else if (cur >= 0 && sscanf(line, "Rss: %ld", &v) == 1) {
            m[cur].rss += v;
        }
    }
    fclose(in);
    qsort(m, n, sizeof m[0], by_rss);
    long rest = 0;
    printf("\nRSS by mapping (KiB), %d files and anonymous memory:\n", n);
    for (int i = 0; i < n; i++) {
        if (i < top) printf("  %6ld  %s\n", m[i].rss, m[i].name);
        else rest += m[i].rss;
    }
    if (n > top) printf("  %6ld  the other %d\n", rest, n - top);
}

int main(int argc, char** argv) {
    const char* uri = argc > 1 ? argv[1] : "test:///default";
    int top = argc > 2 ? atoi(argv[2]) : 15;
    step("bare process (libc)");
    void* lv = dlopen("libvirt.so.0", RTLD_NOW | RTLD_GLOBAL);
    if (!lv) {
        printf("cannot open libvirt.so.0: %s\n", dlerror());
        return 1;
    }
    step("libvirt.so.0 loaded");
    int (*init)(void) = (int (*)(void))dlsym(lv, "virInitialize");
    void* (*open_conn)(const char*) = (void* (*)(const char*))dlsym(lv, "virConnectOpen");
    int (*close_conn)(void*) = (int (*)(void*))dlsym(lv, "virConnectClose");
    if (!init || !open_conn || !close_conn) {
        printf("libvirt.so.0 lacks virInitialize/virConnectOpen/virConnectClose\n");
        return 1;
    }
    if (init() != 0) printf("virInitialize failed\n");
    step("virInitialize()");
    void* conn = open_conn(uri);
    char what[300];
    snprintf(what, sizeof what, "virConnectOpen(%s)%s", uri, conn ? "" : " FAILED");
    step(what);
    top_mappings(top);
    if (conn) close_conn(conn);
    return 0;
}

/*
 * The original report's kind of tester, as a baseline for qemu/sweep.sh: one thread
 * counts user-mode CPU cycles with an overflow period and gets one realtime signal per
 * overflow, routed to itself (F_SETOWN_EX with F_OWNER_TID, F_SETSIG, O_ASYNC), while it
 * spins for a given time. It can move itself back to back between two CPUs
 * (sched_setaffinity on itself, so every move stops the counting event), or stay put and
 * be moved from outside (the report's `taskset -p` loop).
 *
 *   counters PERIOD SECONDS [stay|self] [--out DIR]
 *
 * Prints one line: the signals it got, the overflows the final count implies, and the
 * difference (overflows without a signal: lost by the driver, or still pending at the
 * end). The driver's own count of its losses is the oracle's business, not this one's.
 * `--out DIR` (what the bed's run_one appends) is accepted and ignored: the line goes
 * to stdout, which the bed keeps. Built static for aarch64 by qemu/sweep.sh.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t signals;
static volatile sig_atomic_t sigio;

/* Async-signal-safe: counts only. */
static void on_overflow(int sig)
{
    (void)sig;
    signals++;
}

/* The kernel sends plain SIGIO when the realtime queue is full; its default kills. */
static void on_sigio(int sig)
{
    (void)sig;
    sigio++;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
    fprintf(stderr, "counters: %s: %s\n", what, strerror(errno));
    exit(125);
}

static void usage(void)
{
    fprintf(stderr, "usage: counters PERIOD SECONDS [stay|self] [--out DIR]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    struct perf_event_attr attr;
    struct f_owner_ex owner;
    struct sigaction sa;
    cpu_set_t cpus[2];
    uint64_t period, count = 0, moves = 0;
    double seconds, start, end, elapsed;
    int fd, self = 0;

    if (argc < 3)
        usage();
    period = strtoull(argv[1], NULL, 10);
    seconds = strtod(argv[2], NULL);
    if (period == 0 || !(seconds > 0))
        usage();
    if (argc > 3 && strcmp(argv[3], "--out") != 0) {
        if (strcmp(argv[3], "self") == 0)
            self = 1;
        else if (strcmp(argv[3], "stay") != 0)
            usage();
    }

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_overflow;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGRTMIN, &sa, NULL) != 0)
        die("sigaction");
    sa.sa_handler = on_sigio;
    if (sigaction(SIGIO, &sa, NULL) != 0)
        die("sigaction SIGIO");

    memset(&attr, 0, sizeof(attr));
    attr.size = sizeof(attr);
    attr.type = PERF_TYPE_HARDWARE;
    attr.config = PERF_COUNT_HW_CPU_CYCLES;
    attr.sample_period = period;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    attr.disabled = 1;
    fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
    if (fd < 0)
        die("perf_event_open cycles");
    owner.type = F_OWNER_TID;
    owner.pid = syscall(SYS_gettid);
    if (fcntl(fd, F_SETOWN_EX, &owner) != 0 || fcntl(fd, F_SETSIG, SIGRTMIN) != 0 ||
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC) != 0)
        die("fcntl");

    /* Ping-pong between CPUs 0 and 1: the report's two masks, 0x1 and 0x2. */
    CPU_ZERO(&cpus[0]);
    CPU_SET(0, &cpus[0]);
    CPU_ZERO(&cpus[1]);
    CPU_SET(1, &cpus[1]);

    start = now();
    end = start + seconds;
    if (ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) != 0)
        die("PERF_EVENT_IOC_ENABLE");
    while (now() < end) {
        if (self) {
            if (sched_setaffinity(0, sizeof(cpu_set_t), &cpus[moves & 1]) != 0)
                die("sched_setaffinity");
            moves++;
        }
    }
    if (ioctl(fd, PERF_EVENT_IOC_DISABLE, 0) != 0)
        die("PERF_EVENT_IOC_DISABLE");
    elapsed = now() - start;
    if (read(fd, &count, sizeof(count)) != (ssize_t)sizeof(count))
        die("read");
    /* A signal still queued is taken here, before the figures are read. */
    usleep(10000);
    printf("counters: period %llu seconds %.3f mode %s moves %llu signals %lld sigio %lld"
           " count %llu overflows %llu without_signal %lld\n",
           (unsigned long long)period, elapsed, self ? "self" : "stay",
           (unsigned long long)moves, (long long)signals, (long long)sigio,
           (unsigned long long)count, (unsigned long long)(count / period),
           (long long)(count / period) - (long long)signals - (long long)sigio);
    return 0;
}

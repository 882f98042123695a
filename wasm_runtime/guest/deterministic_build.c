/*
 * Preloaded into the process that builds the guest component (LD_PRELOAD).
 *
 * componentize-py runs CPython's initialisation, and the guest program's own
 * start-up, at build time and snapshots the interpreter. Whatever they read
 * from the build machine then is in every sandbox instance made from it:
 *
 * - entropy: CPython seeds its string hash secret from it, and ignores
 *   PYTHONHASHSEED there, so every build would iterate sets of strings in a
 *   different order;
 * - clocks: the C library notes the monotonic clock when it starts and counts
 *   CPU time (time.process_time, os.times) from there, and modules note the
 *   wall clock when they are imported (logging's start time), so a function
 *   could read how long the build took and when it ran.
 *
 * Giving the build process constant entropy and frozen clocks (the wall clock
 * at 2024-01-01T00:00:00Z, the sandbox's virtual epoch; every other clock at
 * one second) makes all of these the same on every machine. Only the build
 * process sees this; the sandbox at run time gets its randomness and clocks
 * from wasm_runtime's host, which is deterministic as well.
 */
#include <stddef.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

ssize_t getrandom(void *buffer, size_t length, unsigned int flags) {
    (void)flags;
    memset(buffer, 0x5a, length);
    return (ssize_t)length;
}

int getentropy(void *buffer, size_t length) {
    memset(buffer, 0x5a, length);
    return 0;
}

int clock_gettime(clockid_t clock, struct timespec *now) {
    now->tv_sec = (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE) ? 1704067200 : 1;
    now->tv_nsec = 0;
    return 0;
}

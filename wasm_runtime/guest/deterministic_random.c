/*
 * Preloaded into the process that builds the guest component (LD_PRELOAD).
 *
 * componentize-py runs CPython's initialisation at build time and snapshots
 * it. CPython seeds its string hash secret from the build machine's entropy,
 * and ignores PYTHONHASHSEED there, so every build would iterate sets of
 * strings in a different order. Giving the build process a constant entropy
 * source makes the hash secret, and so every result, the same on every
 * machine. Only the build process sees this; the sandbox at run time gets its
 * randomness from wasm_runtime.sandbox, which is deterministic as well.
 */
#include <stddef.h>
#include <string.h>
#include <sys/types.h>

ssize_t getrandom(void *buffer, size_t length, unsigned int flags) {
    (void)flags;
    memset(buffer, 0x5a, length);
    return (ssize_t)length;
}

int getentropy(void *buffer, size_t length) {
    memset(buffer, 0x5a, length);
    return 0;
}

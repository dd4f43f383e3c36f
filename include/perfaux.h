/* perfaux.h: userspace events (uevents) from C into a perfaux recording.
 *
 *   #include "perfaux.h"
 *   perfaux_uevent(1, "request 42 done", 15);
 *
 * Under `perfaux record -- ./prog` the event goes into the calling thread's recording
 * (`perfaux script` shows it as a perfaux:uevent sample, `perf
 * script` as a BPF output sample). Without perfaux the call is a cheap no-op returning 0: the
 * runtime's function is a weak reference, null when perfaux's runtime is not loaded.
 *
 * Returns 0, or -1 with errno set (the seed's uevent rules): E2BIG for more than 4096 bytes,
 * EFAULT for a null buf with a non-zero len, ENODEV when the thread cannot be traced, ENOSPC
 * when the thread's buffer had no room for it (a burst faster than the recorder drains; `-m`
 * sets the room): that uevent is not in the recording, which counts it among its lost
 * records. A call that returned 0 has its uevent in the recording.
 */
#ifndef PERFAUX_H
#define PERFAUX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Exported by perfaux's preloaded runtime (libperfaux_runtime.so). */
extern int perfaux_record_uevent(uint32_t type, const void *buf, size_t len) __attribute__((weak));

__attribute__((no_instrument_function)) static inline int perfaux_uevent(uint32_t type,
                                                                     const void *buf, size_t len)
{
    if (!perfaux_record_uevent)
        return 0;
    return perfaux_record_uevent(type, buf, len);
}

#ifdef __cplusplus
}
#endif

#endif /* PERFAUX_H */

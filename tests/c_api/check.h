/* The checks of the C test programs (api_test.c, composite.c): each counts a pass or prints
 * the failed condition with its line and counts a failure. Included once per program. */
#ifndef CTF_READER_TEST_CHECK_H
#define CTF_READER_TEST_CHECK_H

#include <stdio.h>

#include "ctf_reader.h"

static int passed, failed;

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (cond) {                                                                   \
            passed++;                                                                 \
        } else {                                                                      \
            failed++;                                                                 \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                             \
    } while (0)

#define EXPECT(call, want)                                                                       \
    do {                                                                                         \
        ctf_status got_ = (call);                                                                \
        if (got_ == (want)) {                                                                    \
            passed++;                                                                            \
        } else {                                                                                 \
            failed++;                                                                            \
            fprintf(stderr, "%s:%d: %s gave '%s', expected '%s' (last error: %s)\n", __FILE__, \
                    __LINE__, #call, ctf_status_str(got_), ctf_status_str(want),                 \
                    ctf_last_error_message());                                                   \
        }                                                                                        \
    } while (0)

#define OK(call) EXPECT(call, CTF_STATUS_OK)

#endif

/* Reads a dataset through the C API and prints, per minibatch, its sequence keys, samples and
 * checksum per stream (the sum of its values, as a double), and a checkpoint; then totals.
 *
 *   stats CONFIG [MB_SIZE|SCHEDULE] [MAX_SWEEPS]
 *
 * The lines carry the same numbers as `ctf read --jsonl CONFIG --mb-size MB_SIZE`.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "ctf_reader.h"

static int fail(const char *what, ctf_status status, const char *message) {
    fprintf(stderr, "stats: %s: %s: %s\n", what, ctf_status_str(status), message);
    return status == CTF_STATUS_DATA_ERROR ? 1 : 2;
}

static double stream_sum(const ctf_stream_view *view) {
    double sum = 0;
    size_t i;
    if (view->element_type == CTF_ELEMENT_TYPE_FLOAT32) {
        const float *v = (const float *)view->values;
        for (i = 0; i < view->value_count; i++) sum += v[i];
    } else {
        const double *v = (const double *)view->values;
        for (i = 0; i < view->value_count; i++) sum += v[i];
    }
    return sum;
}

int main(int argc, char **argv) {
    const char *schedule = argc > 2 ? argv[2] : "64";
    uint64_t sweeps = argc > 3 ? strtoull(argv[3], NULL, 10) : 1;
    ctf_config *config = NULL;
    ctf_reader *reader = NULL;
    ctf_status status;
    uint64_t number = 0, minibatches = 0, samples = 0;
    double total = 0;
    size_t streams, s;
    int code = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: stats CONFIG [MB_SIZE|SCHEDULE] [MAX_SWEEPS]\n");
        return 2;
    }
    status = ctf_config_from_file(argv[1], NULL, &config);
    if (status != CTF_STATUS_OK) return fail("configuration", status, ctf_last_error_message());
    if ((status = ctf_config_set_minibatch_schedule(config, schedule)) != CTF_STATUS_OK ||
        (status = ctf_config_set_max_sweeps(config, sweeps)) != CTF_STATUS_OK) {
        code = fail("options", status, ctf_config_message(config));
        ctf_config_free(config);
        return code;
    }
    status = ctf_reader_new(config, &reader);
    ctf_config_free(config);
    if (status != CTF_STATUS_OK) return fail("reader", status, ctf_last_error_message());

    streams = ctf_reader_stream_count(reader);
    for (s = 0; s < streams; s++) {
        ctf_stream_info info;
        if (ctf_reader_stream_info(reader, s, &info) == CTF_STATUS_OK) {
            printf("stream %zu %s alias %s dim %zu %s %s\n", s, info.name, info.alias, info.dim,
                   info.storage == CTF_STORAGE_DENSE ? "dense" : "sparse",
                   info.element_type == CTF_ELEMENT_TYPE_FLOAT32 ? "float" : "double");
        }
    }
    for (;;) {
        ctf_minibatch *mb = NULL;
        ctf_minibatch_info info;
        uint8_t checkpoint[CTF_CHECKPOINT_SIZE];
        size_t written = 0, i;
        status = ctf_reader_next(reader, 0, &mb);
        if (status == CTF_STATUS_END_OF_DATA) break;
        if (status != CTF_STATUS_OK) {
            code = fail("reading", status, ctf_reader_message(reader));
            break;
        }
        ctf_minibatch_get_info(mb, &info);
        if (info.sequences > 0) {
            printf("mb %" PRIu64 " keys", number);
            for (i = 0; i < info.sequences; i++) printf("%c%" PRIu64, i ? ',' : ' ', info.keys[i]);
            printf(" samples");
            for (s = 0; s < streams; s++) {
                ctf_stream_view view;
                ctf_minibatch_stream(mb, s, &view);
                printf("%c%zu", s ? ',' : ' ', view.samples);
            }
            printf(" checksum");
            for (s = 0; s < streams; s++) {
                ctf_stream_view view;
                double sum;
                ctf_minibatch_stream(mb, s, &view);
                sum = stream_sum(&view);
                total += sum;
                printf("%c%.17g", s ? ',' : ' ', sum);
            }
            ctf_reader_checkpoint(reader, checkpoint, sizeof checkpoint, &written);
            printf(" sweep_end %d position %" PRIu64 " checkpoint ", info.sweep_end ? 1 : 0,
                   info.position);
            for (i = 0; i < written; i++) printf("%02x", checkpoint[i]);
            printf("\n");
        }
        samples += info.samples;
        minibatches++;
        number++;
        ctf_minibatch_free(mb);
    }
    if (code == 0) {
        ctf_counters counters;
        ctf_reader_counters(reader, &counters);
        printf("total minibatches %" PRIu64 " samples %" PRIu64 " checksum %.17g chunks_loaded %" PRIu64
               " bytes_read %" PRIu64 "\n",
               minibatches, samples, total, counters.chunks_loaded, counters.bytes_read);
    }
    ctf_reader_free(reader);
    return code;
}

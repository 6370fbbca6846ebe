/* The composite reader through the C ABI (issue 9): a reader of two deserializers joined by
 * key, configured three ways (ctf_config_from_file, ctf_config_from_brainscript, and the
 * builder with ctf_config_add_deserializer), must list its streams in configuration order and
 * deliver the same minibatches; plus the error paths of the builder and of a missing key.
 * Run by tests/c_api.rs (also under valgrind), which writes the data and checks the printed
 * minibatches against the data it wrote.
 *
 *   composite CONFIG FEATURES LABELS MISSING_CONFIG
 *
 * CONFIG is a composite BrainScript reader of FEATURES (input x, dense, dim 2, chunks of 200
 * bytes) and LABELS (input y, sparse, dim 5, chunks of 300 bytes), randomized with seed 5 and
 * a window of 3 chunks (so the builder's output is the file's only if each chunk size went to
 * its own deserializer). MISSING_CONFIG joins the same features to a labels file that lacks a
 * key, unrandomized, with maxErrors = 0.
 *
 * Prints, for each configuration path P in `file`, `text`, `builder`:
 *   `P stream I NAME ALIAS DIM dense|sparse` for each stream, then
 *   `P mb I keys K,K,... x SAMPLES SUM y SAMPLES SUM` for each minibatch of one sweep
 *   (size 7), then `P end STATUS`;
 * then `duplicate STATUS_NUMBER MESSAGE`, `missing STATUS_NUMBER MESSAGE`, and finally
 * `N passed, M failed` (exit 1 on a failed check).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctf_reader.h"

#include "check.h"

/* The whole of a small text file, NUL-terminated (caller frees), or NULL. */
static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    char *text;
    long size;
    if (f == NULL) return NULL;
    if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return NULL;
    }
    text = malloc((size_t)size + 1);
    if (text != NULL && fread(text, 1, (size_t)size, f) != (size_t)size) {
        free(text);
        text = NULL;
    }
    if (text != NULL) text[size] = '\0';
    fclose(f);
    return text;
}

/* The sum of a stream's stored values, as double. */
static double stream_sum(const ctf_stream_view *view) {
    double sum = 0;
    size_t i;
    for (i = 0; i < view->value_count; i++) {
        if (view->element_type == CTF_ELEMENT_TYPE_FLOAT32) {
            sum += (double)((const float *)view->values)[i];
        } else {
            sum += ((const double *)view->values)[i];
        }
    }
    return sum;
}

/* Prints the streams and one sweep of minibatches of a reader made from `config` (freed). */
static void read_sweep(const char *label, ctf_config *config) {
    ctf_reader *reader = NULL;
    ctf_minibatch *mb = NULL;
    ctf_status status;
    size_t s, count, mb_index = 0;
    OK(ctf_config_set_threads(config, 2));
    status = ctf_reader_new(config, &reader);
    ctf_config_free(config);
    EXPECT(status, CTF_STATUS_OK);
    if (status != CTF_STATUS_OK) return;
    count = ctf_reader_stream_count(reader);
    CHECK(count == 2);
    for (s = 0; s < count; s++) {
        ctf_stream_info info;
        OK(ctf_reader_stream_info(reader, s, &info));
        printf("%s stream %zu %s %s %zu %s\n", label, s, info.name, info.alias, info.dim,
               info.storage == CTF_STORAGE_DENSE ? "dense" : "sparse");
    }
    while ((status = ctf_reader_next(reader, 7, &mb)) == CTF_STATUS_OK) {
        ctf_minibatch_info info;
        size_t k;
        OK(ctf_minibatch_get_info(mb, &info));
        CHECK(info.stream_count == count);
        printf("%s mb %zu keys ", label, mb_index++);
        for (k = 0; k < info.sequences; k++) {
            printf("%s%" PRIu64, k ? "," : "", info.keys[k]);
        }
        for (s = 0; s < count; s++) {
            ctf_stream_view view;
            ctf_stream_info stream;
            OK(ctf_minibatch_stream(mb, s, &view));
            OK(ctf_reader_stream_info(reader, s, &stream));
            CHECK(view.sequences == info.sequences);
            printf(" %s %zu %.17g", stream.name, view.samples, stream_sum(&view));
        }
        printf("\n");
        ctf_minibatch_free(mb);
    }
    printf("%s end %d\n", label, (int)status);
    CHECK(status == CTF_STATUS_END_OF_DATA);
    if (status != CTF_STATUS_END_OF_DATA) fprintf(stderr, "%s\n", ctf_reader_message(reader));
    ctf_reader_free(reader);
}

/* The same reader, built call by call: the chunk sizes apply to the deserializer being
 * described, the randomization settings to the reader. */
static ctf_config *built(const char *features, const char *labels) {
    ctf_config *config = NULL;
    OK(ctf_config_new(&config));
    OK(ctf_config_add_file(config, features));
    OK(ctf_config_add_input(config, "x", NULL, 2, CTF_STORAGE_DENSE));
    OK(ctf_config_set_chunk_size(config, 200));
    OK(ctf_config_add_deserializer(config));
    OK(ctf_config_add_file(config, labels));
    OK(ctf_config_add_input(config, "y", NULL, 5, CTF_STORAGE_SPARSE));
    OK(ctf_config_set_chunk_size(config, 300));
    OK(ctf_config_set_randomize(config, true));
    OK(ctf_config_set_randomization_seed(config, 5));
    OK(ctf_config_set_randomization_window(config, 3, false));
    return config;
}

int main(int argc, char **argv) {
    ctf_config *config = NULL;
    ctf_reader *reader = NULL;
    ctf_minibatch *mb = NULL;
    ctf_status status;
    char *text;
    if (argc != 5) {
        fprintf(stderr, "usage: composite CONFIG FEATURES LABELS MISSING_CONFIG\n");
        return 2;
    }

    status = ctf_config_from_file(argv[1], NULL, &config);
    EXPECT(status, CTF_STATUS_OK);
    if (status == CTF_STATUS_OK) read_sweep("file", config);

    text = slurp(argv[1]);
    CHECK(text != NULL);
    if (text != NULL) {
        config = NULL;
        status = ctf_config_from_brainscript(text, "composite.cntk", NULL, &config);
        EXPECT(status, CTF_STATUS_OK);
        if (status == CTF_STATUS_OK) read_sweep("text", config);
        free(text);
    }

    read_sweep("builder", built(argv[2], argv[3]));

    /* NULL handle. */
    EXPECT(ctf_config_add_deserializer(NULL), CTF_STATUS_NULL_ARGUMENT);

    /* An input name of the first deserializer used again by the second: refused, when the
     * input is added or when the reader is made. */
    config = NULL;
    OK(ctf_config_new(&config));
    OK(ctf_config_add_file(config, argv[2]));
    OK(ctf_config_add_input(config, "x", NULL, 2, CTF_STORAGE_DENSE));
    OK(ctf_config_add_deserializer(config));
    OK(ctf_config_add_file(config, argv[3]));
    status = ctf_config_add_input(config, "x", "y", 5, CTF_STORAGE_SPARSE);
    if (status == CTF_STATUS_OK) {
        status = ctf_reader_new(config, &reader);
        if (status == CTF_STATUS_OK) {
            ctf_reader_free(reader);
            reader = NULL;
            printf("duplicate 0 accepted\n");
        }
    }
    if (status != CTF_STATUS_OK) printf("duplicate %d %s\n", (int)status, ctf_last_error_message());
    ctf_config_free(config);

    /* A key missing from the labels, maxErrors = 0: the first minibatch holding it fails. */
    config = NULL;
    status = ctf_config_from_file(argv[4], NULL, &config);
    EXPECT(status, CTF_STATUS_OK);
    if (status == CTF_STATUS_OK) {
        status = ctf_reader_new(config, &reader);
        ctf_config_free(config);
        EXPECT(status, CTF_STATUS_OK);
        if (status == CTF_STATUS_OK) {
            while ((status = ctf_reader_next(reader, 7, &mb)) == CTF_STATUS_OK) {
                ctf_minibatch_free(mb);
            }
            printf("missing %d %s\n", (int)status,
                   status == CTF_STATUS_DATA_ERROR ? ctf_reader_message(reader) : "");
            EXPECT(status, CTF_STATUS_DATA_ERROR);
            EXPECT(ctf_reader_next(reader, 7, &mb), CTF_STATUS_READER_FAILED);
            ctf_reader_free(reader);
        }
    }

    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}

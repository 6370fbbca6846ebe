/* Exercises every function of the C API, including its error paths: NULL arguments, bad
 * configurations, missing files, malformed data with and without maxErrors, foreign and
 * malformed checkpoints, use after the end of data, DLPack tensors outliving their minibatch,
 * const calls from a second thread, and failing stream-information calls while a read is held
 * inside its diagnostic callback. Run by tests/c_api.rs (also under valgrind).
 *
 *   api_test REPO_ROOT SCRATCH_DIR
 *
 * Prints `keys K,...` and `features_sum S` of one unrandomized sweep of examples/pos.ctf for
 * the driver to compare with `ctf dump`, then `N passed, M failed`; exits 1 on a failure.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctf_reader.h"

#include "check.h"

static char pos_ctf[4096], pos_cntk[4096], bad_ctf[4096], latin1_cntk[4096];

static int contains(const char *text, const char *part) { return text != NULL && strstr(text, part) != NULL; }

/* The reader section of examples/pos.cntk, built field by field. */
static ctf_config *pos_config(void) {
    ctf_config *config = NULL;
    OK(ctf_config_new(&config));
    OK(ctf_config_add_file(config, pos_ctf));
    OK(ctf_config_add_input(config, "words", "w", 1000, CTF_STORAGE_SPARSE));
    OK(ctf_config_add_input(config, "features", "x", 3, CTF_STORAGE_DENSE));
    OK(ctf_config_add_input(config, "tags", "t", 12, CTF_STORAGE_SPARSE));
    OK(ctf_config_set_threads(config, 2));
    OK(ctf_config_set_cache_index(config, false));
    return config;
}

static ctf_reader *open_reader(const ctf_config *config) {
    ctf_reader *reader = NULL;
    OK(ctf_reader_new(config, &reader));
    return reader;
}

/* Reads to the end; writes the keys (up to `cap`) and returns the number of minibatches. */
static size_t read_keys(ctf_reader *reader, uint64_t size, uint64_t *keys, size_t cap, size_t *nkeys) {
    size_t minibatches = 0;
    ctf_minibatch *mb = NULL;
    ctf_status status;
    *nkeys = 0;
    while ((status = ctf_reader_next(reader, size, &mb)) == CTF_STATUS_OK) {
        ctf_minibatch_info info;
        size_t i;
        OK(ctf_minibatch_get_info(mb, &info));
        for (i = 0; i < info.sequences && *nkeys < cap; i++) keys[(*nkeys)++] = info.keys[i];
        ctf_minibatch_free(mb);
        minibatches++;
    }
    EXPECT(status, CTF_STATUS_END_OF_DATA);
    return minibatches;
}

static void test_status_and_version(void) {
    char expected[64];
    int s;
    snprintf(expected, sizeof expected, "%d.%d.%d", CTF_READER_VERSION_MAJOR, CTF_READER_VERSION_MINOR,
             CTF_READER_VERSION_PATCH);
    CHECK(strcmp(ctf_version(), expected) == 0);
    for (s = CTF_STATUS_OK; s <= CTF_STATUS_PANIC; s++) {
        const char *text = ctf_status_str((ctf_status)s);
        CHECK(text != NULL && text[0] != '\0');
    }
    CHECK(strcmp(ctf_status_str(CTF_STATUS_END_OF_DATA), "end of data") == 0);
    /* A number that is no status (one a later version may add) has a name too. */
    CHECK(strcmp(ctf_status_str(CTF_STATUS_PANIC + 1), "unknown status") == 0);
    CHECK(strcmp(ctf_status_str(-1), "unknown status") == 0);
    CHECK(CTF_STATUS_OK == 0 && CTF_STATUS_END_OF_DATA == 1 && CTF_STATUS_NULL_ARGUMENT == 2 &&
          CTF_STATUS_INVALID_ARGUMENT == 3 && CTF_STATUS_CONFIG_ERROR == 4 && CTF_STATUS_DATA_ERROR == 5 &&
          CTF_STATUS_IO_ERROR == 6 && CTF_STATUS_CHECKPOINT_ERROR == 7 && CTF_STATUS_BUFFER_TOO_SMALL == 8 &&
          CTF_STATUS_READER_FAILED == 9 && CTF_STATUS_PANIC == 10);
    CHECK(ctf_last_error_message() != NULL);
    CHECK(CTF_CHECKPOINT_SIZE == 20);
}

static void test_null_arguments(void) {
    ctf_config *config = (ctf_config *)0x1, *real = pos_config();
    ctf_reader *reader = (ctf_reader *)0x1;
    ctf_minibatch *mb = (ctf_minibatch *)0x1;
    ctf_stream_info info;
    ctf_counters counters;
    ctf_progress progress;
    ctf_minibatch_info mb_info;
    ctf_stream_view view;
    ctf_padded_view padded;
    ctf_dl_managed_tensor *tensor = (ctf_dl_managed_tensor *)0x1;
    uint8_t bytes[CTF_CHECKPOINT_SIZE];
    size_t written = 7, index = 7;
    uint64_t size = 7;

    EXPECT(ctf_config_new(NULL), CTF_STATUS_NULL_ARGUMENT);
    CHECK(contains(ctf_last_error_message(), "'out' is NULL"));
    EXPECT(ctf_config_from_brainscript(NULL, NULL, NULL, &config), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_config_from_brainscript("reader = []", NULL, NULL, NULL), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_config_from_file(NULL, NULL, &config), CTF_STATUS_NULL_ARGUMENT);
    CHECK(config == (ctf_config *)0x1); /* out-parameters are written only on success */
    EXPECT(ctf_config_add_file(NULL, "x"), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_config_add_file(real, NULL), CTF_STATUS_NULL_ARGUMENT);
    CHECK(contains(ctf_config_message(real), "'path' is NULL"));
    EXPECT(ctf_config_add_input(NULL, "x", NULL, 3, CTF_STORAGE_DENSE), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_config_add_input(real, NULL, NULL, 3, CTF_STORAGE_DENSE), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_config_set_element_type(NULL, CTF_ELEMENT_TYPE_FLOAT64), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_config_set_randomize(NULL, false), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_config_set_randomization_seed(NULL, 1), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_config_set_randomization_window(NULL, 1, true), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_config_set_max_errors(NULL, 1), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_config_set_trace_level(NULL, 1), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_config_set_chunk_size(NULL, 1), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_config_set_keep_data_in_memory(NULL, true), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_config_set_frame_mode(NULL, true), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_config_set_cache_index(NULL, true), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_config_set_skip_sequence_ids(NULL, true), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_config_set_partition(NULL, 0, 1), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_config_set_threads(NULL, 1), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_config_set_prefetch(NULL, 1), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_config_set_memory_budget(NULL, 1), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_config_set_parse_while_indexing(NULL, true), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_config_set_pin_packers(NULL, true), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_config_set_max_samples(NULL, 1), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_config_set_max_sweeps(NULL, 1), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_config_set_epoch_size(NULL, 1), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_config_set_minibatch_schedule(NULL, "1"), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_config_set_diagnostic_callback(NULL, NULL, NULL), CTF_STATUS_NULL_ARGUMENT);
    CHECK(strcmp(ctf_config_message(NULL), "") == 0);
    CHECK(ctf_config_warning_count(NULL) == 0);
    CHECK(ctf_config_warning(NULL, 0) == NULL);
    ctf_config_free(NULL);

    EXPECT(ctf_reader_new(NULL, &reader), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_reader_new(real, NULL), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_reader_from_brainscript(NULL, NULL, &reader), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_reader_from_file(NULL, NULL, &reader), CTF_STATUS_NULL_ARGUMENT);
    CHECK(reader == (ctf_reader *)0x1);
    CHECK(ctf_reader_stream_count(NULL) == 0);
    CHECK(strcmp(ctf_reader_message(NULL), "") == 0);
    EXPECT(ctf_reader_stream_info(NULL, 0, &info), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_reader_find_stream(NULL, "x", &index), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_reader_next(NULL, 1, &mb), CTF_STATUS_NULL_ARGUMENT);
    CHECK(mb == (ctf_minibatch *)0x1);
    EXPECT(ctf_reader_checkpoint(NULL, bytes, sizeof bytes, &written), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_reader_restore(NULL, bytes, sizeof bytes), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_reader_counters(NULL, &counters), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_reader_progress(NULL, &progress), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_reader_scheduled_size(NULL, &size), CTF_STATUS_NULL_ARGUMENT);
    CHECK(written == 7 && size == 7 && index == 7);
    ctf_reader_free(NULL);

    EXPECT(ctf_minibatch_get_info(NULL, &mb_info), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_minibatch_stream(NULL, 0, &view), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_minibatch_padded(NULL, 0, &padded), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_minibatch_dlpack(NULL, 0, CTF_DLPACK_PART_VALUES, &tensor), CTF_STATUS_NULL_ARGUMENT);
    CHECK(tensor == (ctf_dl_managed_tensor *)0x1);
    ctf_minibatch_free(NULL);

    /* NULL out-parameters and buffers on live handles. */
    reader = open_reader(real);
    EXPECT(ctf_reader_stream_info(reader, 0, NULL), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_reader_find_stream(reader, NULL, &index), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_reader_next(reader, 1, NULL), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_reader_checkpoint(reader, NULL, 20, &written), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_reader_checkpoint(reader, bytes, sizeof bytes, NULL), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_reader_restore(reader, NULL, 20), CTF_STATUS_NULL_ARGUMENT);
    CHECK(contains(ctf_reader_message(reader), "'bytes' is NULL"));
    EXPECT(ctf_reader_counters(reader, NULL), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_reader_progress(reader, NULL), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_reader_scheduled_size(reader, NULL), CTF_STATUS_NULL_ARGUMENT);
    OK(ctf_reader_next(reader, 8, &mb));
    EXPECT(ctf_minibatch_get_info(mb, NULL), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_minibatch_stream(mb, 0, NULL), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_minibatch_padded(mb, 1, NULL), CTF_STATUS_NULL_ARGUMENT);
    EXPECT(ctf_minibatch_dlpack(mb, 0, CTF_DLPACK_PART_VALUES, NULL), CTF_STATUS_NULL_ARGUMENT);
    ctf_minibatch_free(mb);
    ctf_reader_free(reader);
    ctf_config_free(real);
}

static void test_bad_configurations(void) {
    ctf_config *config = NULL;
    ctf_reader *reader = (ctf_reader *)0x1;
    const char bad_utf8[] = {'\xff', '\xfe', 0};

    EXPECT(ctf_config_from_brainscript("reader = [ file = \"x\" \n", "inline.cntk", NULL, &config),
           CTF_STATUS_CONFIG_ERROR);
    CHECK(contains(ctf_last_error_message(), "inline.cntk:1:10"));
    CHECK(config == NULL);
    EXPECT(ctf_reader_from_brainscript("reader = [ file = \"x\" ; input = [ a = [ dim = 0 ] ] ]", NULL, &reader),
           CTF_STATUS_CONFIG_ERROR);
    CHECK(contains(ctf_last_error_message(), "<text>:1:"));
    CHECK(reader == (ctf_reader *)0x1);
    EXPECT(ctf_config_from_file("/nonexistent/ctf_reader_test.cntk", NULL, &config), CTF_STATUS_IO_ERROR);
    CHECK(contains(ctf_last_error_message(), "cannot read configuration file '/nonexistent/ctf_reader_test.cntk'"));
    EXPECT(ctf_reader_from_file("/nonexistent/ctf_reader_test.cntk", NULL, &reader), CTF_STATUS_IO_ERROR);
    CHECK(contains(ctf_last_error_message(), "/nonexistent/ctf_reader_test.cntk"));
    /* A file that is there but not UTF-8 text is a configuration error. */
    {
        FILE *f = fopen(latin1_cntk, "wb");
        CHECK(f != NULL);
        if (f != NULL) {
            fputs("reader = [ file = \"caf\xe9.ctf\" ]\n", f);
            fclose(f);
        }
        EXPECT(ctf_config_from_file(latin1_cntk, NULL, &config), CTF_STATUS_CONFIG_ERROR);
        CHECK(contains(ctf_last_error_message(), "UTF-8"));
    }
    EXPECT(ctf_config_from_file(pos_cntk, "no.such.section", &config), CTF_STATUS_CONFIG_ERROR);
    EXPECT(ctf_reader_from_file(pos_cntk, "no.such.section", &reader), CTF_STATUS_CONFIG_ERROR);
    EXPECT(ctf_config_from_file(bad_utf8, NULL, &config), CTF_STATUS_INVALID_ARGUMENT);
    CHECK(contains(ctf_last_error_message(), "UTF-8"));

    /* Warnings are kept with the configuration, and follow an error they may explain. */
    OK(ctf_config_from_brainscript("reader = [ file = \"a.ctf\" ; randomise = false ;\n"
                                   "  input = [ x = [ dim = 3 ; format = \"dense\" ] ] ]",
                                   "warn.cntk", NULL, &config));
    CHECK(ctf_config_warning_count(config) == 1);
    CHECK(contains(ctf_config_warning(config, 0), "warn.cntk:1:29: warning:"));
    CHECK(contains(ctf_config_warning(config, 0), "randomise"));
    CHECK(ctf_config_warning(config, 1) == NULL);
    ctf_config_free(config);
    config = NULL;
    EXPECT(ctf_config_from_brainscript("reader = [ randomise = false ; file = \"a.ctf\" ]", "warn.cntk", NULL,
                                       &config),
           CTF_STATUS_CONFIG_ERROR);
    CHECK(contains(ctf_last_error_message(), "error:"));
    CHECK(contains(ctf_last_error_message(), "warn.cntk:1:12: warning:"));
    CHECK(config == NULL);

    /* An empty configuration has no file and no input. */
    OK(ctf_config_new(&config));
    CHECK(ctf_config_warning_count(config) == 0);
    EXPECT(ctf_reader_new(config, &reader), CTF_STATUS_CONFIG_ERROR);
    CHECK(reader == (ctf_reader *)0x1);
    EXPECT(ctf_config_add_input(config, "x", NULL, 0, CTF_STORAGE_DENSE), CTF_STATUS_INVALID_ARGUMENT);
    CHECK(contains(ctf_config_message(config), "dimension"));
    /* Numbers that are no value of an enum argument are refused, never undefined behaviour. */
    EXPECT(ctf_config_add_input(config, "x", NULL, 3, 2), CTF_STATUS_INVALID_ARGUMENT);
    CHECK(contains(ctf_config_message(config), "'storage' is 2, which is no ctf_storage value"));
    EXPECT(ctf_config_add_input(config, "x", NULL, 3, -1), CTF_STATUS_INVALID_ARGUMENT);
    EXPECT(ctf_config_set_element_type(config, 2), CTF_STATUS_INVALID_ARGUMENT);
    CHECK(contains(ctf_config_message(config), "'element_type' is 2, which is no ctf_element_type value"));
    EXPECT(ctf_config_set_partition(config, 2, 2), CTF_STATUS_INVALID_ARGUMENT);
    EXPECT(ctf_config_set_partition(config, 0, 0), CTF_STATUS_INVALID_ARGUMENT);
    EXPECT(ctf_config_set_minibatch_schedule(config, "12*:x"), CTF_STATUS_INVALID_ARGUMENT);
    CHECK(contains(ctf_config_message(config), "12*:x"));
    OK(ctf_config_set_minibatch_schedule(config, NULL));
    /* A missing data file. */
    OK(ctf_config_add_file(config, "/nonexistent/ctf_reader_test.ctf"));
    OK(ctf_config_add_input(config, "x", NULL, 3, CTF_STORAGE_DENSE));
    EXPECT(ctf_reader_new(config, &reader), CTF_STATUS_IO_ERROR);
    CHECK(contains(ctf_last_error_message(), "/nonexistent/ctf_reader_test.ctf"));
    CHECK(reader == (ctf_reader *)0x1);
    ctf_config_free(config);
}

/* One unrandomized sweep of the builder configuration: layout invariants of every view. */
/* A composite reader built field by field: examples/pos.ctf joined with itself by key, the
 * tags from the second deserializer, gives the keys of the single reader. */
static void test_composite_builder(void) {
    ctf_config *single = pos_config(), *composite = NULL, *clash = NULL;
    ctf_reader *reader, *refused = (ctf_reader *)0x1;
    ctf_stream_info info;
    uint64_t keys[64], joined_keys[64];
    size_t nkeys = 0, njoined = 0, i, minibatches, joined_minibatches;

    EXPECT(ctf_config_add_deserializer(NULL), CTF_STATUS_NULL_ARGUMENT);
    OK(ctf_config_set_randomize(single, false));
    reader = open_reader(single);
    minibatches = read_keys(reader, 16, keys, 64, &nkeys);
    ctf_reader_free(reader);
    ctf_config_free(single);

    OK(ctf_config_new(&composite));
    OK(ctf_config_add_file(composite, pos_ctf));
    OK(ctf_config_add_input(composite, "words", "w", 1000, CTF_STORAGE_SPARSE));
    OK(ctf_config_add_input(composite, "features", "x", 3, CTF_STORAGE_DENSE));
    OK(ctf_config_set_cache_index(composite, false));
    OK(ctf_config_add_deserializer(composite));
    OK(ctf_config_add_file(composite, pos_ctf));
    OK(ctf_config_add_input(composite, "tags", "t", 12, CTF_STORAGE_SPARSE));
    OK(ctf_config_set_cache_index(composite, false));
    OK(ctf_config_set_randomize(composite, false));
    OK(ctf_config_set_threads(composite, 2));
    reader = open_reader(composite);
    ctf_config_free(composite);
    CHECK(ctf_reader_stream_count(reader) == 3);
    OK(ctf_reader_stream_info(reader, 2, &info));
    CHECK(strcmp(info.name, "tags") == 0 && strcmp(info.alias, "t") == 0 && info.dim == 12);
    joined_minibatches = read_keys(reader, 16, joined_keys, 64, &njoined);
    ctf_reader_free(reader);
    CHECK(joined_minibatches == minibatches && njoined == nkeys && nkeys > 0);
    for (i = 0; i < nkeys && i < njoined; i++) CHECK(joined_keys[i] == keys[i]);

    /* Input names are unique across the reader. */
    OK(ctf_config_new(&clash));
    OK(ctf_config_add_file(clash, pos_ctf));
    OK(ctf_config_add_input(clash, "words", "w", 1000, CTF_STORAGE_SPARSE));
    OK(ctf_config_add_deserializer(clash));
    OK(ctf_config_add_file(clash, pos_ctf));
    OK(ctf_config_add_input(clash, "words", "t", 12, CTF_STORAGE_SPARSE));
    EXPECT(ctf_reader_new(clash, &refused), CTF_STATUS_CONFIG_ERROR);
    CHECK(contains(ctf_last_error_message(), "unique across the reader"));
    CHECK(refused == (ctf_reader *)0x1);
    ctf_config_free(clash);
}

static void test_views(void) {
    ctf_config *config = pos_config();
    ctf_reader *reader;
    ctf_stream_info info;
    ctf_minibatch *mb = NULL, *sentinel = (ctf_minibatch *)0x1;
    ctf_counters counters;
    ctf_progress progress;
    uint64_t keys[64];
    size_t nkeys = 0, index = 0, minibatches = 0, total_samples[3] = {0, 0, 0};
    double features_sum = 0;
    ctf_status status;

    OK(ctf_config_set_randomize(config, false));
    OK(ctf_config_set_trace_level(config, 0));
    OK(ctf_config_set_prefetch(config, 3));
    OK(ctf_config_set_memory_budget(config, 64u << 20));
    OK(ctf_config_set_parse_while_indexing(config, true));
    OK(ctf_config_set_pin_packers(config, true));
    reader = open_reader(config);
    ctf_config_free(config); /* the reader holds a copy */
    CHECK(ctf_reader_stream_count(reader) == 3);
    OK(ctf_reader_stream_info(reader, 0, &info));
    CHECK(strcmp(info.name, "words") == 0 && strcmp(info.alias, "w") == 0 && info.dim == 1000 &&
          info.storage == CTF_STORAGE_SPARSE && info.element_type == CTF_ELEMENT_TYPE_FLOAT32);
    OK(ctf_reader_stream_info(reader, 1, &info));
    CHECK(strcmp(info.name, "features") == 0 && strcmp(info.alias, "x") == 0 && info.dim == 3 &&
          info.storage == CTF_STORAGE_DENSE && info.defines_mb_size == false);
    EXPECT(ctf_reader_stream_info(reader, 3, &info), CTF_STATUS_INVALID_ARGUMENT);
    CHECK(contains(ctf_reader_message(reader), "stream 3"));
    OK(ctf_reader_find_stream(reader, "x", &index));
    CHECK(index == 1);
    OK(ctf_reader_find_stream(reader, "tags", &index));
    CHECK(index == 2);
    EXPECT(ctf_reader_find_stream(reader, "nope", &index), CTF_STATUS_INVALID_ARGUMENT);
    CHECK(index == 2);
    EXPECT(ctf_reader_next(reader, 0, &sentinel), CTF_STATUS_INVALID_ARGUMENT); /* size 0, no schedule */
    CHECK(sentinel == (ctf_minibatch *)0x1);
    EXPECT(ctf_reader_scheduled_size(reader, &keys[0]), CTF_STATUS_INVALID_ARGUMENT);

    while ((status = ctf_reader_next(reader, 10, &mb)) == CTF_STATUS_OK) {
        ctf_minibatch_info mi;
        size_t s, i;
        OK(ctf_minibatch_get_info(mb, &mi));
        CHECK(mi.stream_count == 3);
        for (i = 0; i < mi.sequences && nkeys < 64; i++) keys[nkeys++] = mi.keys[i];
        for (s = 0; s < 3; s++) {
            ctf_stream_view v;
            size_t sum_lengths = 0;
            OK(ctf_minibatch_stream(mb, s, &v));
            CHECK(v.sequences == mi.sequences && v.element_type == CTF_ELEMENT_TYPE_FLOAT32);
            CHECK(v.sequence_starts[0] == 0 && v.sequence_starts[v.sequences] == v.samples);
            for (i = 0; i < v.sequences; i++) {
                CHECK(v.sequence_lengths[i] == v.sequence_starts[i + 1] - v.sequence_starts[i]);
                sum_lengths += v.sequence_lengths[i];
            }
            CHECK(sum_lengths == v.samples);
            total_samples[s] += v.samples;
            if (v.storage == CTF_STORAGE_DENSE) {
                const float *values = (const float *)v.values;
                CHECK(v.row_indices == NULL && v.column_starts == NULL && v.value_count == v.samples * v.dim);
                for (i = 0; i < v.value_count; i++) features_sum += values[i];
            } else {
                int rows_ok = 1;
                CHECK(v.column_starts[0] == 0 && v.column_starts[v.samples] == v.value_count);
                for (i = 0; i < v.value_count; i++) rows_ok &= v.row_indices[i] < v.dim;
                CHECK(rows_ok);
            }
        }
        {
            ctf_stream_view v;
            OK(ctf_minibatch_stream(mb, 1, &v));
            EXPECT(ctf_minibatch_stream(mb, 3, &v), CTF_STATUS_INVALID_ARGUMENT);
        }
        ctf_minibatch_free(mb);
        minibatches++;
    }
    EXPECT(status, CTF_STATUS_END_OF_DATA);
    /* Use after the end of data: the same answer, out-parameter untouched. */
    EXPECT(ctf_reader_next(reader, 10, &sentinel), CTF_STATUS_END_OF_DATA);
    EXPECT(ctf_reader_next(reader, 10, &sentinel), CTF_STATUS_END_OF_DATA);
    CHECK(sentinel == (ctf_minibatch *)0x1);
    CHECK(total_samples[0] == 82 && total_samples[1] == 82 && total_samples[2] == 82);
    OK(ctf_reader_counters(reader, &counters));
    CHECK(counters.minibatches == minibatches && counters.chunks_loaded >= 1 && counters.bytes_read > 0);
    CHECK(counters.cache_bytes > 0 && counters.cache_bytes <= (64u << 20) && counters.pack_seconds > 0);
    OK(ctf_reader_progress(reader, &progress));
    CHECK(progress.position == 82 && progress.sweep_samples == 82 && progress.epoch_size == 82 &&
          progress.epoch == 1);
    ctf_reader_free(reader);

    printf("keys");
    for (index = 0; index < nkeys; index++) printf("%c%" PRIu64, index ? ',' : ' ', keys[index]);
    printf("\nfeatures_sum %.17g\nbytes_read %" PRIu64 "\n", features_sum, counters.bytes_read);
}

static void test_padded_and_dlpack(void) {
    ctf_config *config = pos_config();
    ctf_reader *reader;
    ctf_minibatch *mb = NULL;
    ctf_minibatch_info mi;
    ctf_stream_view dense, sparse;
    ctf_padded_view padded;
    ctf_dl_managed_tensor *values = NULL, *rows = NULL, *starts = NULL, *seq = NULL, *pad = NULL,
                          *mask = NULL, *bad = (ctf_dl_managed_tensor *)0x1;
    size_t b, t, max_len = 0, valid = 0;
    double view_sum = 0, tensor_sum = 0;
    int mask_ok = 1;

    OK(ctf_config_set_randomization_seed(config, 3));
    reader = open_reader(config);
    ctf_config_free(config);
    OK(ctf_reader_next(reader, 20, &mb));
    OK(ctf_minibatch_get_info(mb, &mi));
    OK(ctf_minibatch_stream(mb, 1, &dense));
    OK(ctf_minibatch_stream(mb, 0, &sparse));

    OK(ctf_minibatch_padded(mb, 1, &padded));
    for (b = 0; b < mi.sequences; b++) max_len = dense.sequence_lengths[b] > max_len ? dense.sequence_lengths[b] : max_len;
    CHECK(padded.batch == mi.sequences && padded.max_len == max_len && padded.dim == 3);
    for (b = 0; b < padded.batch; b++) {
        for (t = 0; t < padded.max_len; t++) {
            uint8_t m = padded.mask[b * padded.max_len + t];
            uint8_t want = t >= dense.sequence_lengths[b] ? CTF_MASK_PAD : t == 0 ? CTF_MASK_BEGIN : CTF_MASK_VALID;
            mask_ok &= m == want;
            if (m != CTF_MASK_PAD) {
                size_t d;
                valid++;
                for (d = 0; d < 3; d++)
                    mask_ok &= ((const float *)padded.values)[(b * padded.max_len + t) * 3 + d] ==
                               ((const float *)dense.values)[(dense.sequence_starts[b] + t) * 3 + d];
            } else {
                mask_ok &= ((const float *)padded.values)[(b * padded.max_len + t) * 3] == 0.0f;
            }
        }
    }
    CHECK(mask_ok && valid == dense.samples);
    EXPECT(ctf_minibatch_padded(mb, 0, &padded), CTF_STATUS_INVALID_ARGUMENT); /* sparse */
    EXPECT(ctf_minibatch_padded(mb, 9, &padded), CTF_STATUS_INVALID_ARGUMENT);

    OK(ctf_minibatch_dlpack(mb, 1, CTF_DLPACK_PART_VALUES, &values));
    CHECK(values->dl_tensor.ndim == 2 && values->dl_tensor.shape[0] == (int64_t)dense.samples &&
          values->dl_tensor.shape[1] == 3 && values->dl_tensor.strides[0] == 3 && values->dl_tensor.strides[1] == 1);
    CHECK(values->dl_tensor.dtype.code == CTF_DL_FLOAT && values->dl_tensor.dtype.bits == 32 &&
          values->dl_tensor.dtype.lanes == 1 && values->dl_tensor.device.device_type == CTF_DL_CPU &&
          values->dl_tensor.byte_offset == 0);
    CHECK(values->dl_tensor.data == dense.values); /* no copy */
    CHECK(values->deleter != NULL);
    OK(ctf_minibatch_dlpack(mb, 0, CTF_DLPACK_PART_ROW_INDICES, &rows));
    CHECK(rows->dl_tensor.ndim == 1 && rows->dl_tensor.shape[0] == (int64_t)sparse.value_count &&
          rows->dl_tensor.dtype.code == CTF_DL_UINT && rows->dl_tensor.dtype.bits == 32);
    OK(ctf_minibatch_dlpack(mb, 0, CTF_DLPACK_PART_COLUMN_STARTS, &starts));
    CHECK(starts->dl_tensor.shape[0] == (int64_t)sparse.samples + 1);
    OK(ctf_minibatch_dlpack(mb, 1, CTF_DLPACK_PART_SEQUENCE_STARTS, &seq));
    CHECK(seq->dl_tensor.shape[0] == (int64_t)mi.sequences + 1 && seq->dl_tensor.dtype.code == CTF_DL_INT &&
          seq->dl_tensor.dtype.bits == 8 * sizeof(size_t));
    OK(ctf_minibatch_dlpack(mb, 1, CTF_DLPACK_PART_PADDED, &pad));
    CHECK(pad->dl_tensor.ndim == 3 && pad->dl_tensor.shape[0] == (int64_t)mi.sequences &&
          pad->dl_tensor.shape[1] == (int64_t)max_len && pad->dl_tensor.shape[2] == 3 &&
          pad->dl_tensor.strides[0] == (int64_t)(3 * max_len));
    OK(ctf_minibatch_dlpack(mb, 1, CTF_DLPACK_PART_MASK, &mask));
    CHECK(mask->dl_tensor.ndim == 2 && mask->dl_tensor.dtype.bits == 8 && mask->dl_tensor.dtype.code == CTF_DL_UINT);
    EXPECT(ctf_minibatch_dlpack(mb, 1, CTF_DLPACK_PART_ROW_INDICES, &bad), CTF_STATUS_INVALID_ARGUMENT);
    EXPECT(ctf_minibatch_dlpack(mb, 0, CTF_DLPACK_PART_PADDED, &bad), CTF_STATUS_INVALID_ARGUMENT);
    EXPECT(ctf_minibatch_dlpack(mb, 7, CTF_DLPACK_PART_VALUES, &bad), CTF_STATUS_INVALID_ARGUMENT);
    EXPECT(ctf_minibatch_dlpack(mb, 1, CTF_DLPACK_PART_MASK + 1, &bad), CTF_STATUS_INVALID_ARGUMENT);
    CHECK(contains(ctf_last_error_message(), "'part' is 6, which is no ctf_dlpack_part value"));
    EXPECT(ctf_minibatch_dlpack(mb, 1, 99, &bad), CTF_STATUS_INVALID_ARGUMENT);
    EXPECT(ctf_minibatch_dlpack(mb, 1, -1, &bad), CTF_STATUS_INVALID_ARGUMENT);
    CHECK(bad == (ctf_dl_managed_tensor *)0x1);
    for (b = 0; b < dense.value_count; b++) view_sum += ((const float *)dense.values)[b];

    /* The tensors outlive the minibatch and the reader. */
    ctf_minibatch_free(mb);
    ctf_reader_free(reader);
    for (b = 0; b < (size_t)(values->dl_tensor.shape[0] * 3); b++) tensor_sum += ((const float *)values->dl_tensor.data)[b];
    CHECK(tensor_sum == view_sum);
    CHECK(((const size_t *)seq->dl_tensor.data)[mi.sequences] == dense.samples);
    values->deleter(values);
    rows->deleter(rows);
    starts->deleter(starts);
    seq->deleter(seq);
    pad->deleter(pad);
    mask->deleter(mask);
}

static void test_checkpoints(void) {
    ctf_config *config = pos_config(), *other;
    ctf_reader *reader, *resumed, *foreign;
    ctf_minibatch *mb = NULL;
    uint8_t bytes[CTF_CHECKPOINT_SIZE + 4], foreign_bytes[CTF_CHECKPOINT_SIZE], garbage[CTF_CHECKPOINT_SIZE];
    uint64_t first[64], second[64];
    size_t written = 0, n1 = 0, n2 = 0, i;
    ctf_progress progress;

    OK(ctf_config_set_max_sweeps(config, 2));
    reader = open_reader(config);
    OK(ctf_reader_next(reader, 16, &mb));
    ctf_minibatch_free(mb);
    OK(ctf_reader_next(reader, 16, &mb));
    ctf_minibatch_free(mb);
    EXPECT(ctf_reader_checkpoint(reader, bytes, CTF_CHECKPOINT_SIZE - 1, &written), CTF_STATUS_BUFFER_TOO_SMALL);
    CHECK(written == 0);
    OK(ctf_reader_checkpoint(reader, bytes, sizeof bytes, &written));
    CHECK(written == CTF_CHECKPOINT_SIZE);
    read_keys(reader, 16, first, 64, &n1);
    /* Restoring revives a reader at its end of data. */
    OK(ctf_reader_restore(reader, bytes, written));
    read_keys(reader, 16, second, 64, &n2);
    CHECK(n1 == n2 && n1 > 0 && memcmp(first, second, n1 * sizeof first[0]) == 0);

    resumed = open_reader(config);
    OK(ctf_reader_restore(resumed, bytes, written));
    OK(ctf_reader_progress(resumed, &progress));
    CHECK(progress.position > 0 && progress.position < 82);
    read_keys(resumed, 16, second, 64, &n2);
    CHECK(n1 == n2 && memcmp(first, second, n1 * sizeof first[0]) == 0);

    /* Foreign (another corpus), truncated and garbage checkpoints change nothing. */
    OK(ctf_config_new(&other));
    OK(ctf_config_add_file(other, bad_ctf));
    OK(ctf_config_add_input(other, "x", NULL, 3, CTF_STORAGE_DENSE));
    OK(ctf_config_set_max_errors(other, 5));
    OK(ctf_config_set_trace_level(other, 0));
    foreign = open_reader(other);
    OK(ctf_reader_checkpoint(foreign, foreign_bytes, sizeof foreign_bytes, &written));
    ctf_reader_free(foreign);
    ctf_config_free(other);
    OK(ctf_reader_restore(resumed, bytes, CTF_CHECKPOINT_SIZE));
    EXPECT(ctf_reader_restore(resumed, foreign_bytes, sizeof foreign_bytes), CTF_STATUS_CHECKPOINT_ERROR);
    CHECK(contains(ctf_reader_message(resumed), "different corpus"));
    EXPECT(ctf_reader_restore(resumed, bytes, CTF_CHECKPOINT_SIZE - 1), CTF_STATUS_CHECKPOINT_ERROR);
    for (i = 0; i < sizeof garbage; i++) garbage[i] = (uint8_t)(i * 7 + 1);
    EXPECT(ctf_reader_restore(resumed, garbage, sizeof garbage), CTF_STATUS_CHECKPOINT_ERROR);
    read_keys(resumed, 16, second, 64, &n2); /* still at the restored position */
    CHECK(n1 == n2 && memcmp(first, second, n1 * sizeof first[0]) == 0);
    ctf_reader_free(resumed);
    ctf_reader_free(reader);
    ctf_config_free(config);
}

static char diagnostics[8192];

static void collect(void *user_data, const char *line) {
    int *calls = (int *)user_data;
    (*calls)++;
    strncat(diagnostics, line, sizeof diagnostics - strlen(diagnostics) - 2);
    strcat(diagnostics, "\n");
}

static void test_malformed_data(void) {
    ctf_config *config;
    ctf_reader *reader;
    ctf_minibatch *mb = NULL, *sentinel = (ctf_minibatch *)0x1;
    ctf_minibatch_info mi;
    uint64_t keys[8];
    size_t nkeys = 0, written = 0;
    uint8_t checkpoint[CTF_CHECKPOINT_SIZE];
    int calls = 0;
    FILE *f = fopen(bad_ctf, "w");
    CHECK(f != NULL);
    if (f == NULL) return;
    fputs("1 |x 1 2 3\n2 |x 1 oops 3\n3 |x 4 5 6\n", f);
    fclose(f);

    /* maxErrors = 0: the invalid sequence fails the read where the timeline reaches it (after
       sequence 1), with file:line:col. */
    OK(ctf_config_new(&config));
    OK(ctf_config_add_file(config, bad_ctf));
    OK(ctf_config_add_input(config, "x", NULL, 3, CTF_STORAGE_DENSE));
    OK(ctf_config_set_randomize(config, false));
    OK(ctf_config_set_diagnostic_callback(config, collect, &calls));
    reader = open_reader(config);
    OK(ctf_reader_next(reader, 1, &mb));
    OK(ctf_minibatch_get_info(mb, &mi));
    CHECK(mi.sequences == 1 && mi.keys[0] == 1);
    ctf_minibatch_free(mb);
    mb = NULL;
    OK(ctf_reader_checkpoint(reader, checkpoint, sizeof checkpoint, &written));
    EXPECT(ctf_reader_next(reader, 1, &sentinel), CTF_STATUS_DATA_ERROR);
    CHECK(contains(ctf_reader_message(reader), "bad.ctf:2:8"));
    CHECK(contains(ctf_reader_message(reader), "oops"));
    EXPECT(ctf_reader_next(reader, 1, &sentinel), CTF_STATUS_READER_FAILED);
    CHECK(contains(ctf_reader_message(reader), "bad.ctf:2:8"));
    CHECK(sentinel == (ctf_minibatch *)0x1);
    /* A malformed checkpoint changes nothing: still failed. */
    EXPECT(ctf_reader_restore(reader, checkpoint, written - 1), CTF_STATUS_CHECKPOINT_ERROR);
    EXPECT(ctf_reader_next(reader, 1, &sentinel), CTF_STATUS_READER_FAILED);
    /* A restore revives it; the read goes on past sequence 2, charged once already (its
       step of the timeline is an empty minibatch). */
    OK(ctf_reader_restore(reader, checkpoint, written));
    while (ctf_reader_next(reader, 1, &mb) == CTF_STATUS_OK) {
        OK(ctf_minibatch_get_info(mb, &mi));
        if (mi.sequences == 1 && nkeys < 8) keys[nkeys++] = mi.keys[0];
        CHECK(mi.sequences <= 1);
        ctf_minibatch_free(mb);
    }
    mb = NULL;
    CHECK(nkeys == 1 && keys[0] == 3);
    EXPECT(ctf_reader_next(reader, 1, &sentinel), CTF_STATUS_END_OF_DATA);
    CHECK(sentinel == (ctf_minibatch *)0x1);
    ctf_reader_free(reader);
    nkeys = 0;

    /* maxErrors = 1: the invalid sequence is skipped and reported through the callback. */
    OK(ctf_config_set_max_errors(config, 1));
    OK(ctf_config_set_trace_level(config, 1));
    diagnostics[0] = '\0';
    calls = 0;
    reader = open_reader(config);
    while (ctf_reader_next(reader, 1, &mb) == CTF_STATUS_OK) {
        OK(ctf_minibatch_get_info(mb, &mi));
        if (mi.sequences == 1 && nkeys < 8) keys[nkeys++] = mi.keys[0];
        ctf_minibatch_free(mb);
    }
    ctf_reader_free(reader); /* joins the threads that called back */
    CHECK(nkeys == 2 && keys[0] == 1 && keys[1] == 3);
    CHECK(calls >= 1 && contains(diagnostics, "bad.ctf:2:8: error: input 'x': malformed number"));
    ctf_config_free(config);
}

static void test_options(void) {
    ctf_config *config = pos_config();
    ctf_reader *reader;
    ctf_minibatch *mb = NULL;
    ctf_minibatch_info mi;
    ctf_stream_view view;
    ctf_dl_managed_tensor *tensor = NULL;
    uint64_t keys_a[64], keys_b[64], size = 0;
    size_t na = 0, nb = 0, shares = 0, r;
    int first_epoch_small = 1, later_large = 0;
    ctf_counters counters;

    /* Limits: max samples, max sweeps, epochs and a schedule. */
    OK(ctf_config_set_max_samples(config, 30));
    reader = open_reader(config);
    read_keys(reader, 10, keys_a, 64, &na);
    {
        ctf_progress p;
        OK(ctf_reader_progress(reader, &p));
        CHECK(p.position >= 30 && p.position < 82);
    }
    ctf_reader_free(reader);
    OK(ctf_config_set_max_sweeps(config, 3));
    OK(ctf_config_set_epoch_size(config, 40));
    OK(ctf_config_set_minibatch_schedule(config, "4*1:32"));
    reader = open_reader(config);
    OK(ctf_reader_scheduled_size(reader, &size));
    CHECK(size == 4);
    while (ctf_reader_next(reader, 0, &mb) == CTF_STATUS_OK) {
        ctf_progress p;
        OK(ctf_minibatch_get_info(mb, &mi));
        OK(ctf_reader_progress(reader, &p));
        if (mi.position <= 40 && mi.samples > 4 && mi.sequences > 1) first_epoch_small = 0;
        if (mi.position > 40 && mi.samples > 8) later_large = 1;
        ctf_minibatch_free(mb);
    }
    OK(ctf_reader_scheduled_size(reader, &size));
    CHECK(size == 32);
    CHECK(first_epoch_small && later_large);
    {
        ctf_progress p;
        OK(ctf_reader_progress(reader, &p));
        CHECK(p.position == 3 * 82 && p.epoch_size == 40 && p.epoch == (3 * 82) / 40);
    }
    ctf_reader_free(reader);
    OK(ctf_config_set_minibatch_schedule(config, NULL));
    OK(ctf_config_set_epoch_size(config, 0));
    OK(ctf_config_set_max_samples(config, CTF_FULL_DATA_SWEEP));

    /* Seeds and windows shape the order; a partition splits every minibatch. */
    OK(ctf_config_set_randomization_seed(config, 1));
    reader = open_reader(config);
    read_keys(reader, 16, keys_a, 64, &na);
    ctf_reader_free(reader);
    OK(ctf_config_set_randomization_seed(config, 2));
    OK(ctf_config_set_randomization_window(config, 1000, true));
    reader = open_reader(config);
    read_keys(reader, 16, keys_b, 64, &nb);
    ctf_reader_free(reader);
    CHECK(na == 24 && nb == 24 && memcmp(keys_a, keys_b, sizeof keys_a[0] * 24) != 0);
    for (r = 0; r < 3; r++) {
        size_t n = 0;
        OK(ctf_config_set_partition(config, (uint32_t)r, 3));
        reader = open_reader(config);
        read_keys(reader, 16, keys_b, 64, &n);
        shares += n;
        ctf_reader_free(reader);
    }
    CHECK(shares == 24);
    OK(ctf_config_set_partition(config, 0, 1));

    /* Small chunks, all kept in memory, one loader, double precision. */
    OK(ctf_config_set_chunk_size(config, 512));
    OK(ctf_config_set_keep_data_in_memory(config, true));
    OK(ctf_config_set_threads(config, 1));
    OK(ctf_config_set_frame_mode(config, false));
    OK(ctf_config_set_skip_sequence_ids(config, false));
    OK(ctf_config_set_element_type(config, CTF_ELEMENT_TYPE_FLOAT64));
    reader = open_reader(config);
    OK(ctf_reader_next(reader, 16, &mb));
    OK(ctf_minibatch_stream(mb, 1, &view));
    CHECK(view.element_type == CTF_ELEMENT_TYPE_FLOAT64);
    OK(ctf_minibatch_dlpack(mb, 1, CTF_DLPACK_PART_VALUES, &tensor));
    CHECK(tensor->dl_tensor.dtype.bits == 64);
    tensor->deleter(tensor);
    ctf_minibatch_free(mb);
    read_keys(reader, 16, keys_b, 64, &nb);
    OK(ctf_reader_counters(reader, &counters));
    CHECK(counters.chunks_loaded > 1);
    ctf_reader_free(reader);
    ctf_config_free(config);

    /* Whole-file and whole-text constructors. */
    OK(ctf_reader_from_file(pos_cntk, NULL, &reader));
    CHECK(ctf_reader_stream_count(reader) == 3);
    ctf_reader_free(reader);
    OK(ctf_reader_from_file(pos_cntk, "train", &reader));
    ctf_reader_free(reader);
    {
        char text[8192];
        snprintf(text, sizeof text,
                 "reader = [ file = \"%s\" ; input = [ x = [ dim = 3 ; format = \"dense\" ] ] ]", pos_ctf);
        OK(ctf_reader_from_brainscript(text, NULL, &reader));
        OK(ctf_reader_next(reader, 8, &mb));
        ctf_minibatch_free(mb);
        ctf_reader_free(reader);
        OK(ctf_config_from_brainscript(text, "inline", NULL, &config));
        OK(ctf_config_set_element_type(config, CTF_ELEMENT_TYPE_FLOAT64));
        reader = open_reader(config);
        ctf_reader_free(reader);
        ctf_config_free(config);
    }
}

struct poll {
    ctf_reader *reader;
    int stop;
    int failures;
};

static void *poll_reader(void *arg) {
    struct poll *p = (struct poll *)arg;
    while (!__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) {
        ctf_counters c;
        ctf_progress g;
        ctf_stream_info info;
        uint8_t bytes[CTF_CHECKPOINT_SIZE];
        size_t written;
        if (ctf_reader_counters(p->reader, &c) != CTF_STATUS_OK) p->failures++;
        if (ctf_reader_progress(p->reader, &g) != CTF_STATUS_OK) p->failures++;
        if (ctf_reader_stream_info(p->reader, 1, &info) != CTF_STATUS_OK) p->failures++;
        if (ctf_reader_checkpoint(p->reader, bytes, sizeof bytes, &written) != CTF_STATUS_OK) p->failures++;
    }
    return NULL;
}

/* Const calls from a second thread while the first reads. */
static void test_threads(void) {
    ctf_config *config = pos_config();
    struct poll p;
    pthread_t thread;
    uint64_t keys[256];
    size_t n = 0;
    OK(ctf_config_set_max_sweeps(config, 4));
    p.reader = open_reader(config);
    p.stop = 0;
    p.failures = 0;
    CHECK(pthread_create(&thread, NULL, poll_reader, &p) == 0);
    read_keys(p.reader, 4, keys, 256, &n);
    __atomic_store_n(&p.stop, 1, __ATOMIC_RELEASE);
    pthread_join(thread, NULL);
    CHECK(p.failures == 0 && n == 4 * 24);
    ctf_reader_free(p.reader);
    ctf_config_free(config);
}

/* The stream information and the reader's message never wait for a ctf_reader_next in
 * progress, also when they fail (a failure used to take the reader's lock to keep its
 * message, and so waited for the read). The read is held inside its diagnostic callback
 * until the other thread's calls have returned, or 10 s have passed. */
struct held_read {
    ctf_reader *reader;
    int inside;
    int info_done;
    int waited_out;
    int failures;
};

static void sleep_ms(long ms) {
    struct timespec t;
    t.tv_sec = ms / 1000;
    t.tv_nsec = (ms % 1000) * 1000000L;
    nanosleep(&t, NULL);
}

static void hold_read(void *user_data, const char *line) {
    struct held_read *h = (struct held_read *)user_data;
    int waited = 0;
    (void)line;
    if (__atomic_exchange_n(&h->inside, 1, __ATOMIC_ACQ_REL)) return;
    while (!__atomic_load_n(&h->info_done, __ATOMIC_ACQUIRE) && waited < 10000) {
        sleep_ms(1);
        waited++;
    }
    if (waited >= 10000) h->waited_out = 1;
}

static void *ask_while_held(void *arg) {
    struct held_read *h = (struct held_read *)arg;
    ctf_stream_info info;
    size_t index = 7;
    while (!__atomic_load_n(&h->inside, __ATOMIC_ACQUIRE)) sleep_ms(1);
    if (ctf_reader_stream_info(h->reader, 0, &info) != CTF_STATUS_OK) h->failures++;
    if (ctf_reader_stream_info(h->reader, 5, &info) != CTF_STATUS_INVALID_ARGUMENT) h->failures++;
    if (ctf_reader_find_stream(h->reader, "no such stream", &index) != CTF_STATUS_INVALID_ARGUMENT) h->failures++;
    if (!contains(ctf_reader_message(h->reader), "no such stream")) h->failures++;
    __atomic_store_n(&h->info_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void test_info_never_waits(void) {
    ctf_config *config;
    ctf_minibatch *mb = NULL;
    struct held_read h;
    pthread_t thread;
    FILE *f = fopen(bad_ctf, "w");
    CHECK(f != NULL);
    if (f == NULL) return;
    fputs("1 |x 1 2 3\n2 |x 1 oops 3\n3 |x 4 5 6\n", f);
    fclose(f);
    OK(ctf_config_new(&config));
    OK(ctf_config_add_file(config, bad_ctf));
    OK(ctf_config_add_input(config, "x", NULL, 3, CTF_STORAGE_DENSE));
    OK(ctf_config_set_randomize(config, false));
    OK(ctf_config_set_max_errors(config, 1));
    OK(ctf_config_set_parse_while_indexing(config, false));
    memset(&h, 0, sizeof h);
    OK(ctf_config_set_diagnostic_callback(config, hold_read, &h));
    h.reader = open_reader(config);
    CHECK(pthread_create(&thread, NULL, ask_while_held, &h) == 0);
    while (ctf_reader_next(h.reader, 1, &mb) == CTF_STATUS_OK) ctf_minibatch_free(mb);
    if (!__atomic_load_n(&h.inside, __ATOMIC_ACQUIRE)) {
        /* No diagnostic came: release the asking thread and fail. */
        __atomic_store_n(&h.inside, 1, __ATOMIC_RELEASE);
    }
    pthread_join(thread, NULL);
    CHECK(h.inside && !h.waited_out && h.failures == 0);
    ctf_reader_free(h.reader);
    ctf_config_free(config);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: api_test REPO_ROOT SCRATCH_DIR\n");
        return 2;
    }
    snprintf(pos_ctf, sizeof pos_ctf, "%s/examples/pos.ctf", argv[1]);
    snprintf(pos_cntk, sizeof pos_cntk, "%s/examples/pos.cntk", argv[1]);
    snprintf(bad_ctf, sizeof bad_ctf, "%s/bad.ctf", argv[2]);
    snprintf(latin1_cntk, sizeof latin1_cntk, "%s/latin1.cntk", argv[2]);

    test_status_and_version();
    test_null_arguments();
    test_bad_configurations();
    test_views();
    test_padded_and_dlpack();
    test_malformed_data();
    test_checkpoints();
    test_options();
    test_threads();
    test_info_never_waits();
    test_composite_builder();
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}

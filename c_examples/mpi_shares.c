/* Data-parallel reading with MPI: rank R of K reads its share of every global minibatch
 * (ctf_config_set_partition), and an MPI_Allreduce of per-sequence counts proves that the
 * ranks together read every sequence of the corpus exactly once per sweep.
 *
 *   mpirun -np K mpi_shares CONFIG [MB_SIZE] [SWEEPS]
 *
 * The reference key set comes from a single-worker reader of one sweep, opened on every rank.
 */
#include <inttypes.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctf_reader.h"

static ctf_reader *open_reader(const char *path, uint32_t rank, uint32_t workers, uint64_t sweeps) {
    ctf_config *config = NULL;
    ctf_reader *reader = NULL;
    ctf_status status = ctf_config_from_file(path, NULL, &config);
    if (status == CTF_STATUS_OK) status = ctf_config_set_partition(config, rank, workers);
    if (status == CTF_STATUS_OK) status = ctf_config_set_max_sweeps(config, sweeps);
    if (status == CTF_STATUS_OK) status = ctf_config_set_threads(config, 1);
    if (status == CTF_STATUS_OK) status = ctf_reader_new(config, &reader);
    if (status != CTF_STATUS_OK) {
        fprintf(stderr, "rank %u: %s: %s\n", rank, ctf_status_str(status), ctf_last_error_message());
    }
    ctf_config_free(config);
    return reader;
}

static int compare_keys(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The next minibatch of `reader`, NULL at the end of the data; aborts the job on an error. */
static ctf_minibatch *next_or_abort(ctf_reader *reader, uint64_t mb_size, int rank) {
    ctf_minibatch *mb = NULL;
    ctf_status status = ctf_reader_next(reader, mb_size, &mb);
    if (status == CTF_STATUS_END_OF_DATA) return NULL;
    if (status != CTF_STATUS_OK) {
        fprintf(stderr, "rank %d: %s\n", rank, ctf_reader_message(reader));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return mb;
}

int main(int argc, char **argv) {
    int rank = 0, size = 1, ok = 1, all_ok = 0;
    const char *path;
    uint64_t mb_size, sweeps;
    uint64_t *keys = NULL;
    size_t nkeys = 0, cap = 0, i;
    long long *counts = NULL, *totals = NULL;
    unsigned long long local[2] = {0, 0}, global[2] = {0, 0}; /* sequences, samples */
    ctf_reader *reader;
    ctf_progress progress;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 2) {
        if (rank == 0) fprintf(stderr, "usage: mpi_shares CONFIG [MB_SIZE] [SWEEPS]\n");
        MPI_Finalize();
        return 2;
    }
    path = argv[1];
    mb_size = argc > 2 ? strtoull(argv[2], NULL, 10) : 8;
    sweeps = argc > 3 ? strtoull(argv[3], NULL, 10) : 2;

    /* The corpus: every key of one sweep, sorted. */
    reader = open_reader(path, 0, 1, 1);
    if (reader == NULL) MPI_Abort(MPI_COMM_WORLD, 2);
    for (;;) {
        ctf_minibatch_info info;
        ctf_minibatch *mb = next_or_abort(reader, mb_size, rank);
        if (mb == NULL) break;
        ctf_minibatch_get_info(mb, &info);
        for (i = 0; i < info.sequences; i++) {
            if (nkeys == cap) {
                cap = cap ? 2 * cap : 64;
                keys = realloc(keys, cap * sizeof *keys);
                if (keys == NULL) MPI_Abort(MPI_COMM_WORLD, 3);
            }
            keys[nkeys++] = info.keys[i];
        }
        ctf_minibatch_free(mb);
    }
    ctf_reader_progress(reader, &progress);
    ctf_reader_free(reader);
    qsort(keys, nkeys, sizeof *keys, compare_keys);
    counts = calloc(nkeys + 1, sizeof *counts);
    totals = calloc(nkeys + 1, sizeof *totals);
    if (counts == NULL || totals == NULL) MPI_Abort(MPI_COMM_WORLD, 3);

    /* This rank's share of `sweeps` sweeps. */
    reader = open_reader(path, (uint32_t)rank, (uint32_t)size, sweeps);
    if (reader == NULL) MPI_Abort(MPI_COMM_WORLD, 2);
    for (;;) {
        ctf_minibatch_info info;
        ctf_minibatch *mb = next_or_abort(reader, mb_size, rank);
        if (mb == NULL) break;
        ctf_minibatch_get_info(mb, &info);
        for (i = 0; i < info.sequences; i++) {
            uint64_t *found = bsearch(&info.keys[i], keys, nkeys, sizeof *keys, compare_keys);
            counts[found ? (size_t)(found - keys) : nkeys]++; /* the last slot: unknown keys */
        }
        local[0] += info.sequences;
        local[1] += info.samples;
        ctf_minibatch_free(mb);
    }
    ctf_reader_free(reader);
    printf("rank %d of %d: %llu sequences, %llu samples\n", rank, size, local[0], local[1]);

    MPI_Allreduce(counts, totals, (int)nkeys + 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(local, global, 2, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    for (i = 0; i < nkeys; i++) {
        if (totals[i] != (long long)sweeps) {
            if (rank == 0)
                fprintf(stderr, "sequence %" PRIu64 " was read %lld times in %" PRIu64 " sweeps\n", keys[i],
                        totals[i], sweeps);
            ok = 0;
        }
    }
    if (totals[nkeys] != 0) ok = 0;
    if (global[1] != sweeps * progress.sweep_samples) ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("corpus keys");
        for (i = 0; i < nkeys; i++) printf("%c%" PRIu64, i ? ',' : ' ', keys[i]);
        printf("\n");
        printf("%d ranks, %" PRIu64 " sweeps: %llu sequences, %llu samples (sweep %" PRIu64 " samples): %s\n", size,
               sweeps, global[0], global[1], progress.sweep_samples,
               all_ok ? "every sequence read exactly once per sweep" : "COVERAGE MISMATCH");
    }
    free(keys);
    free(counts);
    free(totals);
    MPI_Finalize();
    return all_ok ? 0 : 1;
}

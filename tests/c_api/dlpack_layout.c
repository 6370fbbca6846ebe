/* The ctf_dl_* structs have the layout of DLPack's own (dlpack/dlpack.h, Debian
 * libdlpack-dev): checked at compile time field by field, then a tensor exported by the
 * library is used and freed through the real DLManagedTensor type.
 *
 *   dlpack_layout REPO_ROOT
 */
#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdio.h>

#include "ctf_reader.h"

#define SAME_FIELD(ours, theirs, field)                                              \
    _Static_assert(offsetof(ours, field) == offsetof(theirs, field), #field " offset"); \
    _Static_assert(sizeof(((ours *)0)->field) == sizeof(((theirs *)0)->field), #field " size")

_Static_assert(sizeof(ctf_dl_device) == sizeof(DLDevice), "DLDevice size");
SAME_FIELD(ctf_dl_device, DLDevice, device_type);
SAME_FIELD(ctf_dl_device, DLDevice, device_id);
_Static_assert(sizeof(ctf_dl_data_type) == sizeof(DLDataType), "DLDataType size");
SAME_FIELD(ctf_dl_data_type, DLDataType, code);
SAME_FIELD(ctf_dl_data_type, DLDataType, bits);
SAME_FIELD(ctf_dl_data_type, DLDataType, lanes);
_Static_assert(sizeof(ctf_dl_tensor) == sizeof(DLTensor), "DLTensor size");
SAME_FIELD(ctf_dl_tensor, DLTensor, data);
SAME_FIELD(ctf_dl_tensor, DLTensor, device);
SAME_FIELD(ctf_dl_tensor, DLTensor, ndim);
SAME_FIELD(ctf_dl_tensor, DLTensor, dtype);
SAME_FIELD(ctf_dl_tensor, DLTensor, shape);
SAME_FIELD(ctf_dl_tensor, DLTensor, strides);
SAME_FIELD(ctf_dl_tensor, DLTensor, byte_offset);
_Static_assert(sizeof(ctf_dl_managed_tensor) == sizeof(DLManagedTensor), "DLManagedTensor size");
SAME_FIELD(ctf_dl_managed_tensor, DLManagedTensor, dl_tensor);
SAME_FIELD(ctf_dl_managed_tensor, DLManagedTensor, manager_ctx);
SAME_FIELD(ctf_dl_managed_tensor, DLManagedTensor, deleter);
_Static_assert(CTF_DL_CPU == kDLCPU && CTF_DL_INT == kDLInt && CTF_DL_UINT == kDLUInt && CTF_DL_FLOAT == kDLFloat,
               "DLPack codes");

/* What a framework does with a DLManagedTensor: read it, then call its deleter. */
static double consume(DLManagedTensor *t) {
    double sum = 0;
    int64_t n = 1, i;
    int d;
    for (d = 0; d < t->dl_tensor.ndim; d++) n *= t->dl_tensor.shape[d];
    if (t->dl_tensor.dtype.code == kDLFloat && t->dl_tensor.dtype.bits == 32 &&
        t->dl_tensor.device.device_type == kDLCPU) {
        for (i = 0; i < n; i++) sum += ((const float *)t->dl_tensor.data)[i];
    }
    t->deleter(t);
    return sum;
}

int main(int argc, char **argv) {
    char path[4096];
    ctf_reader *reader = NULL;
    ctf_minibatch *mb = NULL;
    ctf_stream_view view;
    ctf_dl_managed_tensor *tensor = NULL;
    double expected = 0, got;
    size_t i;
    if (argc < 2) return 2;
    snprintf(path, sizeof path, "%s/examples/pos.cntk", argv[1]);
    if (ctf_reader_from_file(path, NULL, &reader) != CTF_STATUS_OK ||
        ctf_reader_next(reader, 32, &mb) != CTF_STATUS_OK || ctf_minibatch_stream(mb, 1, &view) != CTF_STATUS_OK ||
        ctf_minibatch_dlpack(mb, 1, CTF_DLPACK_PART_VALUES, &tensor) != CTF_STATUS_OK) {
        fprintf(stderr, "dlpack_layout: %s\n", ctf_last_error_message());
        return 1;
    }
    for (i = 0; i < view.value_count; i++) expected += ((const float *)view.values)[i];
    ctf_minibatch_free(mb);
    ctf_reader_free(reader);
    got = consume((DLManagedTensor *)tensor);
    printf("DLPack %d layout: same; sum %.17g, expected %.17g\n", DLPACK_VERSION, got, expected);
    return got == expected && view.value_count > 0 ? 0 : 1;
}

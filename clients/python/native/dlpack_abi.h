/* dlpack_abi.h: the few structs of the DLPack exchange ABI (dlpack.h, the unversioned
 * DLManagedTensor that torch.utils.dlpack.from_dlpack takes in a "dltensor" capsule) that the
 * extension hands tensors over with. Declared here because the extension needs nothing else of
 * DLPack; the layout is DLPack's stable ABI, so these must match it field for field. */
#ifndef SEGOPS_DLPACK_ABI_H
#define SEGOPS_DLPACK_ABI_H

#include <stdint.h>

enum { SX_DL_CPU = 1 };                                  /* DLDeviceType kDLCPU */
enum { SX_DL_INT = 0, SX_DL_UINT = 1, SX_DL_FLOAT = 2 }; /* DLDataTypeCode */

typedef struct {
  int32_t device_type;
  int32_t device_id;
} sx_dl_device;

typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} sx_dl_dtype;

typedef struct {
  void *data;
  sx_dl_device device;
  int32_t ndim;
  sx_dl_dtype dtype;
  int64_t *shape;
  int64_t *strides; /* NULL: compact row-major */
  uint64_t byte_offset;
} sx_dl_tensor;

typedef struct sx_dl_managed {
  sx_dl_tensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(struct sx_dl_managed *self); /* called by the consumer when it is done with it */
} sx_dl_managed;

#endif

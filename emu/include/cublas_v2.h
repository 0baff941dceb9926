/* The emulated device's cuBLAS (emu/): see cublas_api.h. */
#ifndef DDPTOK_EMU_CUBLAS_V2_H
#define DDPTOK_EMU_CUBLAS_V2_H

#include "cublas_api.h"
#include "cuda_runtime.h"

#endif

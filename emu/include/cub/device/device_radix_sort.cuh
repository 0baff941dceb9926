/*
 * The emulated device's CUB radix sort (emu/): DeviceRadixSort::SortPairs over int32 keys
 * and values, stable, ordering bits [begin_bit, end_bit) of the keys as CUB does (signed
 * keys with their sign bit flipped). Queued on the stream by emu/cub.cc.
 */
#ifndef DDPTOK_EMU_CUB_DEVICE_RADIX_SORT_CUH
#define DDPTOK_EMU_CUB_DEVICE_RADIX_SORT_CUH

#include <stddef.h>
#include <stdint.h>
#include <type_traits>

#include "../../cuda_runtime_api.h"

cudaError_t emu_sort_pairs_i32(void *temp, size_t &temp_bytes, const int32_t *keys_in,
			       int32_t *keys_out, const int32_t *values_in, int32_t *values_out,
			       int num_items, int begin_bit, int end_bit, cudaStream_t stream);

namespace cub {
struct DeviceRadixSort {
	template <typename K, typename V>
	static cudaError_t SortPairs(void *d_temp_storage, size_t &temp_storage_bytes,
				     const K *d_keys_in, K *d_keys_out, const V *d_values_in,
				     V *d_values_out, int num_items, int begin_bit = 0,
				     int end_bit = sizeof(K) * 8, cudaStream_t stream = 0)
	{
		static_assert(std::is_same_v<K, int32_t> && std::is_same_v<V, int32_t>,
			      "the emulated SortPairs sorts int32 keys and values");
		return emu_sort_pairs_i32(d_temp_storage, temp_storage_bytes, d_keys_in,
					  d_keys_out, d_values_in, d_values_out, num_items,
					  begin_bit, end_bit, stream);
	}
};
} // namespace cub

#endif

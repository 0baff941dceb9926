/*
 * cub: the emulated device's DeviceRadixSort::SortPairs over int32 keys and values (see
 * cub/device/device_radix_sort.cuh). Stable, ordering bits [begin_bit, end_bit) of each
 * key with the sign bit flipped, as CUB's radix sort of signed keys does; the temporary
 * storage asked for is required (its size and its place on the stream's device).
 */
#include <stdint.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "cub/device/device_radix_sort.cuh"
#include "emu.h"

/* what CUB would ask for, about: a histogram per digit pass and the items twice */
static size_t temp_needed(int n)
{
	return 4096 + (size_t)(n > 0 ? n : 0) * 8;
}

cudaError_t emu_sort_pairs_i32(void *temp, size_t &temp_bytes, const int32_t *keys_in,
			       int32_t *keys_out, const int32_t *values_in, int32_t *values_out,
			       int n, int begin_bit, int end_bit, cudaStream_t stream)
{
	if (!temp) {
		temp_bytes = temp_needed(n);
		return cudaSuccess;
	}
	const char *call = "cub::DeviceRadixSort::SortPairs";
	int dev = emu::stream_device(stream);
	size_t bytes = (size_t)(n > 0 ? n : 0) * 4;
	if (dev < 0 || n < 0 || begin_bit < 0 || end_bit > 32 || begin_bit >= end_bit) {
		emu::report("%s: invalid stream, size or bits (%d items, bits %d..%d)", call, n,
			    begin_bit, end_bit);
		return emu::set_last(cudaErrorInvalidValue);
	}
	if (temp_bytes < temp_needed(n)) {
		emu::report("%s: %zu bytes of temporary storage, %zu needed", call, temp_bytes,
			    temp_needed(n));
		return emu::set_last(cudaErrorInvalidValue);
	}
	cudaError_t st;
	if ((st = emu::check_range(call, "temporary storage", temp, temp_bytes, dev)) ||
	    (n > 0 && ((st = emu::check_range(call, "keys in", keys_in, bytes, dev)) ||
		       (st = emu::check_range(call, "keys out", keys_out, bytes, dev)) ||
		       (st = emu::check_range(call, "values in", values_in, bytes, dev)) ||
		       (st = emu::check_range(call, "values out", values_out, bytes, dev)))))
		return emu::set_last(st);
	if (n == 0)
		return cudaSuccess;
	emu::enqueue(stream, [=] {
		uint32_t mask = end_bit - begin_bit >= 32 ? 0xffffffffu
							   : ((1u << (end_bit - begin_bit)) - 1u);
		auto digit = [&](int32_t k) { return (((uint32_t)k ^ 0x80000000u) >> begin_bit) & mask; };
		std::vector<int> order(n);
		std::iota(order.begin(), order.end(), 0);
		std::stable_sort(order.begin(), order.end(),
				 [&](int a, int b) { return digit(keys_in[a]) < digit(keys_in[b]); });
		std::vector<int32_t> k(n), v(n);
		for (int i = 0; i < n; i++) {
			k[i] = keys_in[order[i]];
			v[i] = values_in[order[i]];
		}
		std::copy(k.begin(), k.end(), keys_out);
		std::copy(v.begin(), v.end(), values_out);
	});
	return cudaSuccess;
}

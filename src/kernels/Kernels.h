// One function per library kernel (each in its own file); Library.cpp lists them.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <thread>

#include "kernels/Library.h"

namespace tessera::kernels {

LibraryKernel vector_add();
LibraryKernel softmax();
LibraryKernel layernorm();
LibraryKernel rmsnorm();
LibraryKernel matmul();
LibraryKernel matmul_fp8();
LibraryKernel matmul_struct();
LibraryKernel topk();
LibraryKernel sort();

// The top-k and sort references (Topk.cpp): args x [M, N], values [M, width], indices
// [M, width] get each row's first `width` elements in sort order (docs/semantics.md) and
// their columns.
void sorted_rows_reference(std::vector<KernelArg>& args, int64_t M, int64_t N, int64_t width, bool descending);

// The segmented top-k's stages (Topk.cpp) for x [M, N] of `dt` and K: segments of `segment`
// elements (a candidate of the segment form's SEGMENT; <= 0 or N <= segment: none, the
// whole-row kernel), then levels over the candidates while a row has more than `merge_limit`,
// then the merge. `given`: the caller's BLOCK_N, num_warps, RING_GROUP, struct_cp_async for the
// first level. A segment that is one tile (SEGMENT = BLOCK_N), and a candidate segment or merge
// row of at most `candidate_tile` candidates, is read once into registers. `threshold`
// RowHistograms: three kernels first count the row's histograms of its keys' first two digits,
// from which every select stage starts (a segment keeps only the keys at or below the row's
// threshold; the merge resolves only the digits after those two); slower on the H200 (Topk.cpp
// says why). BucketBest: two kernels first find T, the K-th largest of the bests of the row's
// buckets (each bucket's largest element), and every segment stage keeps only the elements
// at or above it (keys at or below T_hi: T's key with its unresolved bits set) where they fit
// its slots (no threshold where a row has fewer than 2 * topk_bucket_bests(K) columns).
// `given` may also hold RADIX_BITS: the digits' width (8, or 11 for f32; an error otherwise).
enum class TopkThreshold { None, RowHistograms, BucketBest };
// How many bucket bests the bucket threshold wants a row to have at least: max(2 K, 1024).
inline int64_t topk_bucket_bests(int64_t K) { return K > 512 ? 2 * K : 1024; }
LibraryStages topk_stages(ScalarKind dt, int64_t M, int64_t N, int64_t K, int64_t segment, int64_t merge_limit,
                          const std::map<std::string, int64_t>& given = {}, int64_t candidate_tile = 8192,
                          TopkThreshold threshold = TopkThreshold::None);

// c = scale * (a @ b) for row-major a [M, K] and b [K, N] (or b [N, K] read transposed when
// b_is_nk), M, N, K from `sizes`, summed in double and rounded once to c's dtype: the
// reference of the matmul kernels.
void matmul_reference(const Tensor& a, const Tensor& b, Tensor& c, const Sizes& sizes,
                      double scale = 1, bool b_is_nk = false);
// The error bound of c (same arguments): gamma_(K + extra_roundings) * |scale| * (|a| @ |b|)
// per element, for a dot over K accumulated in f32 in any order and `extra_roundings` more
// roundings of the result (a scaling), in double. Tolerance.h says why.
std::vector<double> matmul_error_bound(const Tensor& a, const Tensor& b, const Sizes& sizes, double scale = 1,
                                       bool b_is_nk = false, int64_t extra_roundings = 0);

// size_configs of the row kernels (softmax, layernorm, rmsnorm): a row of at most 8192
// elements on the cpu backend, 64 KiB on cuda (32768 16-bit elements, 16384 f32; not with a
// caller's BLOCK_M > 1 or num_warps), gets the smallest BLOCK_N that holds it, so it
// takes the kernels' one-tile path (read once and kept: softmax one exp per element instead of
// two, no second and third pass over the row). cpu: 4096x4096 bf16 softmax on a 2-core Zen 4
// 1.9x faster than BLOCK_N = 1024 (bench/RESULTS.md, session 13). cuda: the whole-row tile is
// what cuda_bench's sweep of every BLOCK_N picks at 4096, 8192 and 32768 columns; on the H100,
// bf16 4096 x 32768 softmax 0.197 against 0.29 ms at BLOCK_N = 1024, layernorm 0.197 against
// 0.37, 16384 x 4096 layernorm 0.095 against 0.121 (session 37). Other targets: none.
std::map<std::string, int64_t> whole_row_config(ScalarKind dtype, const std::string& target, const Sizes& sizes,
                                                const std::map<std::string, int64_t>& given);

// The dtypes every library kernel takes; the first is the default.
inline std::vector<ScalarKind> float_dtypes() {
  return {ScalarKind::F32, ScalarKind::BF16, ScalarKind::F16};
}

}  // namespace tessera::kernels

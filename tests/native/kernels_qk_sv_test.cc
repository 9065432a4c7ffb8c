// attnkit kernel tests, qk_gemm and sv_gemm: every ISA this host can run (natively or through SIMDe) against the
// double-precision reference in core/reference/kernel_reference.h, over tail-heavy shapes, plus the bit contracts
// (integer limbs, decode blocks against short blocks).
#include "kernel_test_support.h"

namespace attnkit {
namespace kernel_test {
namespace {

// Any fp32 dot product of length H, accumulated in any order with or without FMA, and scaled by
// alpha, is within (H + 1) * u * |alpha| * sum|q||k| of the exact value (Higham, gamma_n bound);
// every cache element converts to fp32 exactly, so that is the whole error.
double fp32_dot_bound(size_t H, double alpha, double absum) { return (H + 1) * kU * alpha * absum; }

// The integer limb path (qk_gemm/limb_query.h) rounds q to within 2^-23 * 2^ceil(log2 amax) <= 2^-22 amax per
// element and sums exactly; three fp32 roundings follow (int->float of the hi sum, the add, the scale), each within
// u of a term bounded by |alpha| (sum|q||k| + 2^-14 amax sum|k|): within |alpha| (4u sum|q||k| + 2^-21 amax sum|k|).
double limb_bound(CacheElem e, const float* q, size_t H, const uint8_t* k_row, double alpha, double absum) {
  double amax = 0, ksum = 0;
  for (size_t d = 0; d < H; ++d) {
    amax = std::max(amax, std::fabs(double(q[d])));
    ksum += std::fabs(ref::cache_value(e, k_row, d));
  }
  return alpha * (4 * kU * absum + 0x1p-21 * amax * ksum);
}

bool takes_limbs(const KernelTable& t, CacheElem e) {
  return (e == CacheElem::kS8 || e == CacheElem::kS4) && std::string(t.quantized_qk) == "exact-int16-limbs";
}

void check_qk_direct(CacheElem e, size_t M, size_t N, size_t H, std::mt19937& rng,
                     const std::vector<const KernelTable*>& isas) {
  const size_t ldk = stride_for(e, H, N);
  Guarded K(N * ldk), Q(M * H * 4);
  fill_cache(e, N, H, ldk, K.as<uint8_t>(), rng);
  fill_floats(Q.as<float>(), M * H, rng);
  const float alpha = 0.125f;
  std::vector<double> want(M * N), absum(M * N);
  ref::qk_gemm(e, M, N, H, Q.as<float>(), H, K.as<uint8_t>(), ldk, alpha, want.data(), N);
  ref::qk_gemm_abs(e, M, N, H, Q.as<float>(), H, K.as<uint8_t>(), ldk, absum.data(), N);
  for (const KernelTable* t : isas) {
    Guarded C(M * N * 4);
    qk_direct(*t, e)(M, N, H, Q.as<float>(), H, K.as<uint8_t>(), ldk, alpha, C.as<float>(), N);
    ASSERT_TRUE(C.canary_intact());
    for (size_t x = 0; x < M * N; ++x) {
      // fill_floats' rows lie within the limbs' range, so limb kernels take every row of up to 1016 elements.
      const float* q_row = Q.as<float>() + x / N * H;
      const uint8_t* k_row = K.as<uint8_t>() + x % N * ldk;
      const double bound = (takes_limbs(*t, e) && H <= 1016 ? limb_bound(e, q_row, H, k_row, alpha, absum[x])
                                                             : fp32_dot_bound(H, alpha, absum[x])) + 1e-30;
      ASSERT_LE(std::fabs(C.as<float>()[x] - want[x]), bound)
          << t->isa << " " << ref::cache_elem_name(e) << " M=" << M << " N=" << N << " H=" << H << " at " << x;
    }
  }
}

TEST(KernelQkGemm, DirectMatchesReferenceForEveryIsaShapeAndDtype) {
  std::mt19937 rng(1234);
  const auto isas = tables();
  for_each_grid_shape([&](CacheElem e, size_t M, size_t N, size_t H) { check_qk_direct(e, M, N, H, rng, isas); });
}

// Heads longer than 512 elements: the x86 direct QK copies its query rows to the heap instead of the stack (the
// limb kernels take int8/int4 rows up to kLimbMaxH themselves); 9 rows cross the 8-row blocks.
TEST(KernelQkGemm, DirectLongHeadsMatchReference) {
  std::mt19937 rng(77);
  const auto isas = tables();
  for (CacheElem e : kAllElems)
    for (size_t M : {1, 2, 9}) check_qk_direct(e, M, 19, 520, rng, isas);
}

// Packing only converts (exact), so panels must equal the reference bit for bit, padding keys 0; the
// packed GEMM then has the same dot-product bound as the direct form.
TEST(KernelQkGemm, PackAndPackedGemmMatchReference) {
  std::mt19937 rng(99);
  const auto isas = tables();
  for (CacheElem e : kAllElems)
    for (size_t H : kHs)
      for (size_t N : kNs) {
        const size_t ldk = stride_for(e, H, N);
        Guarded K(N * ldk);
        fill_cache(e, N, H, ldk, K.as<uint8_t>(), rng);
        const std::vector<float> want_panels = ref::qk_pack(e, N, H, K.as<uint8_t>(), ldk);
        for (const KernelTable* t : isas) {
          Guarded panels(want_panels.size() * 4);
          qk_pack(*t, e)(N, H, K.as<uint8_t>(), ldk, panels.as<float>());
          ASSERT_EQ(0, std::memcmp(panels.as<float>(), want_panels.data(), want_panels.size() * 4))
              << t->isa << " " << ref::cache_elem_name(e) << " N=" << N << " H=" << H;
          if (e != CacheElem::kF32) continue;  // the GEMM only sees floats: one dtype suffices
          for (size_t M : kMs) {
            if (!worth_testing(M, N, H)) continue;
            Guarded Q(M * H * 4), C(M * N * 4);
            fill_floats(Q.as<float>(), M * H, rng);
            std::vector<double> want(M * N), absum(M * N);
            ref::qk_gemm(e, M, N, H, Q.as<float>(), H, K.as<uint8_t>(), ldk, 0.5, want.data(), N);
            ref::qk_gemm_abs(e, M, N, H, Q.as<float>(), H, K.as<uint8_t>(), ldk, absum.data(), N);
            t->qk.packed(M, N, H, Q.as<float>(), H, panels.as<float>(), 0.5f, C.as<float>(), N);
            ASSERT_TRUE(C.canary_intact());
            for (size_t x = 0; x < M * N; ++x)
              ASSERT_LE(std::fabs(C.as<float>()[x] - want[x]), (H + 1) * kU * 0.5 * absum[x] + 1e-30)
                  << t->isa << " packed M=" << M << " N=" << N << " H=" << H << " at " << x;
          }
        }
      }
}

// int8/int4 caches take the integer limb path (qk_gemm/limb_query.h) on scalar, VNNI and wasm128: those
// variants must give the scalar kernel's bits and stay within limb_bound of the exact score. Rows the
// integer path cannot hold (NaN, |q| beyond 2^40 or below 2^-40, H > 1016), and the AVX2, NEON and
// AVX512 (no VNNI) kernels, are fp32 dot products with the (H+1)u bound.
TEST(KernelQkGemm, IntegerLimbKernelsGiveTheScalarBits) {
  std::mt19937 rng(2024);
  const auto isas = tables();
  const KernelTable* scalar = kernel_table_for("scalar");
  const float row_scales[] = {1.0f, 1e-6f, 3e5f, 0.0f, 0x1p-45f, 0x1p45f, 1.0f, 7.5e-3f, 1.0f};
  for (CacheElem e : {CacheElem::kS8, CacheElem::kS4})
    for (size_t H : {size_t{8}, size_t{24}, size_t{64}, size_t{72}, size_t{128}, size_t{136}, size_t{256},
                     size_t{1016}, size_t{1024}})
      // Row counts 2-5, 7 and 9 split into the ISAs' passes of rows (2 on wasm128, NEON's sdot and AVX-VNNI; on
      // AVX512-VNNI even passes of up to 3 where whole 64-byte chunks cover the row, else of up to 4) whole and with
      // a 1-row rest (rows 4-5 take the fp32 kernel: 7 rows in fours leave row 6 a pass alone, 9 in threes row 8); 9
      // rows also hold the NaN row and the dominant element. H = 8, 24, 72 and 136 end in a part step (NEON's padded
      // copy, AVX-VNNI's masked load).
      // One row: VNNI's per-key reductions, or its lane tiles where the row is one 64-byte chunk.
      // 33, 130 and 545 keys: VNNI's 32-key tiles for 1-3 rows (heads up to 256 bytes; 545 keys pass 64 KB, so
      // the decode prefetch runs) and a rest.
      for (size_t N : {size_t{1}, size_t{7}, size_t{33}, size_t{130}, size_t{545}})
        for (size_t M : {size_t{1}, size_t{2}, size_t{3}, size_t{4}, size_t{5}, size_t{7}, size_t{9}}) {
        if (N == 545 && H > 256) continue;
        const size_t ldk = stride_for(e, H, N);
        Guarded K(N * ldk), Q(M * H * 4);
        fill_cache(e, N, H, ldk, K.as<uint8_t>(), rng);
        float* q = Q.as<float>();
        fill_floats(q, M * H, rng);
        for (size_t i = 0; i < M; ++i)
          for (size_t d = 0; d < H; ++d) q[i * H + d] *= row_scales[i];
        if (M > 8) {
          q[6 * H + H / 2] = std::numeric_limits<float>::quiet_NaN();  // row 6: NaN must propagate
          q[8 * H + 3] = 50.0f;                                          // row 8: one dominant element
        }
        const float alpha = 0.0883883f;
        std::vector<double> want(M * N), absum(M * N);
        ref::qk_gemm(e, M, N, H, q, H, K.as<uint8_t>(), ldk, alpha, want.data(), N);
        ref::qk_gemm_abs(e, M, N, H, q, H, K.as<uint8_t>(), ldk, absum.data(), N);
        auto run = [&](const KernelTable& t, float* out) {
          (e == CacheElem::kS8 ? t.qk.s8 : t.qk.s4)(M, N, H, q, H, K.as<uint8_t>(), ldk, alpha, out, N);
        };
        std::vector<float> first(M * N);
        run(*scalar, first.data());
        for (const KernelTable* t : isas) {
          Guarded C(M * N * 4);
          run(*t, C.as<float>());
          const bool exact = std::string(t->quantized_qk) == "exact-int16-limbs";
          const float* c = C.as<float>();
          for (size_t i = 0; i < M; ++i) {
            double amax = 0;
            for (size_t d = 0; d < H; ++d) amax = std::max(amax, std::fabs(double(q[i * H + d])));
            const bool nan_row = M > 8 && i == 6;
            const bool limbs =
                exact && H <= 1016 && !nan_row && (amax == 0 || (amax >= 0x1p-40 && amax <= 0x1p40));
            for (size_t j = 0; j < N; ++j) {
              const size_t x = i * N + j;
              const std::string where = std::string(t->isa) + " " + ref::cache_elem_name(e) +
                                        " H=" + std::to_string(H) + " N=" + std::to_string(N) + " row " +
                                        std::to_string(i);
              if (nan_row) {
                ASSERT_TRUE(std::isnan(c[x])) << where;
                continue;
              }
              const double bound = limbs ? limb_bound(e, q + i * H, H, K.as<uint8_t>() + j * ldk, alpha, absum[x])
                                         : fp32_dot_bound(H, alpha, absum[x]);
              ASSERT_LE(std::fabs(c[x] - want[x]), bound + 1e-30) << where;
              if (limbs) {
                ASSERT_EQ(0, std::memcmp(&c[x], &first[x], 4)) << where << " differs from scalar";
              }
            }
          }
        }
      }
}

// The opt-in VNNI kernel quantizes each query row with scale s = amax/127: each q_d moves by at most
// s/2, so the score moves by at most alpha * (s/2) * sum|k| (plus the fp32 rescale, a few ulp).
TEST(KernelQkGemm, ApproxVnniWithinQuantizationBound) {
  std::mt19937 rng(7);
  for (const KernelTable* t : tables()) {
    if (!t->qk.s8_approx_vnni) continue;
    for (size_t H : kHs)
      for (size_t N : kNs)
        for (size_t M : {size_t{1}, size_t{3}, size_t{8}}) {
          Guarded K(N * H), Q(M * H * 4), C(M * N * 4);
          fill_cache(CacheElem::kS8, N, H, H, K.as<uint8_t>(), rng);
          fill_floats(Q.as<float>(), M * H, rng);
          std::vector<double> want(M * N);
          ref::qk_gemm(CacheElem::kS8, M, N, H, Q.as<float>(), H, K.as<uint8_t>(), H, 1.0, want.data(), N);
          t->qk.s8_approx_vnni(M, N, H, Q.as<float>(), H, K.as<uint8_t>(), H, 1.0f, C.as<float>(), N);
          for (size_t i = 0; i < M; ++i) {
            double amax = 0;
            for (size_t d = 0; d < H; ++d) amax = std::max(amax, std::fabs((double)Q.as<float>()[i * H + d]));
            for (size_t j = 0; j < N; ++j) {
              double ksum = 0;
              for (size_t d = 0; d < H; ++d) ksum += std::fabs((double)K.as<int8_t>()[j * H + d]);
              const double bound = amax / 127 / 2 * ksum * (1 + 1e-5) + 1e-5 * std::fabs(want[i * N + j]);
              ASSERT_LE(std::fabs(C.as<float>()[i * N + j] - want[i * N + j]), bound)
                  << "H=" << H << " N=" << N << " M=" << M;
            }
          }
        }
  }
}

// sv: each output is a length-N fp32 dot product plus the accumulated start value: bound
// (N + 1) * u * (|O0| + sum_j |p_j||v_jd|).
void check_sv(CacheElem e, size_t M, size_t N, size_t H, std::mt19937& rng, const std::vector<const KernelTable*>& isas) {
  const size_t ldv = stride_for(e, H, N);
  Guarded V(N * ldv), P(M * N * 4);
  fill_cache(e, N, H, ldv, V.as<uint8_t>(), rng);
  fill_floats(P.as<float>(), M * N, rng, 0.0f, 1.0f);
  std::vector<float> start(M * H);
  fill_floats(start.data(), M * H, rng);
  // sum_j |p||v| bounds: reference over |P| and |V| via a second pass with abs values.
  std::vector<double> absum(M * H, 0.0);
  for (size_t i = 0; i < M; ++i)
    for (size_t j = 0; j < N; ++j)
      for (size_t d = 0; d < H; ++d)
        absum[i * H + d] += P.as<float>()[i * N + j] * std::fabs(ref::cache_value(e, V.as<uint8_t>() + j * ldv, d));
  for (bool accumulate : {false, true}) {
    std::vector<double> want(start.begin(), start.end());
    ref::sv_gemm(e, M, N, H, P.as<float>(), N, V.as<uint8_t>(), ldv, want.data(), H, accumulate);
    for (const KernelTable* t : isas) {
      Guarded O(M * H * 4);
      std::memcpy(O.as<float>(), start.data(), M * H * 4);
      sv_fn(*t, e)(M, N, H, P.as<float>(), N, V.as<uint8_t>(), ldv, O.as<float>(), H, accumulate);
      ASSERT_TRUE(O.canary_intact());
      for (size_t x = 0; x < M * H; ++x) {
        const double bound = (N + 1) * kU * (absum[x] + (accumulate ? std::fabs(start[x]) : 0)) + 1e-30;
        ASSERT_LE(std::fabs(O.as<float>()[x] - want[x]), bound)
            << t->isa << " " << ref::cache_elem_name(e) << " acc=" << accumulate << " M=" << M << " N=" << N
            << " H=" << H << " at " << x;
      }
    }
  }
}

TEST(KernelSvGemm, MatchesReferenceOverwriteAndAccumulate) {
  std::mt19937 rng(4321);
  const auto isas = tables();
  for_each_grid_shape([&](CacheElem e, size_t M, size_t N, size_t H) { check_sv(e, M, N, H, rng, isas); });
}

// Decode-step blocks (64 KB and more): the x86 kernels prefetch K and V rows ahead and stream V a group
// of rows at a time (sv_stream) for up to 4 rows; odd key counts end in single-key steps.
TEST(KernelSvGemm, DecodeShapesMatchReference) {
  std::mt19937 rng(99);
  const auto isas = tables();
  for (CacheElem e : kAllElems)
    for (size_t N : {1100, 1101})  // past 64 KB for every dtype, int4 included
      for (size_t M : {1, 2, 4, 5}) {
        check_qk_direct(e, M, N, 128, rng, isas);
        check_sv(e, M, N, 128, rng, isas);
      }
}

// A decode block walks its rows in another order than short blocks (key by key, streamed, prefetched), but each
// score and each output element keeps its chain of multiply-adds, so the bits must not depend on the block size:
// one call over N keys equals calls over 32-key blocks (under the decode threshold) carrying the sum.
TEST(KernelSvGemm, DecodeBlocksKeepTheBitsOfShortBlocks) {
  std::mt19937 rng(7);
  constexpr size_t N = 2000, kBlock = 32;  // N rows pass 64 KB for every dtype at H = 72
  for (CacheElem e : kAllElems)
    for (size_t H : {72, 128})
      for (size_t M : {1, 2, 4}) {
        const size_t ld = ref::cache_row_bytes(e, H);
        Guarded K(N * ld), Q(M * H * 4), P(M * N * 4);
        fill_cache(e, N, H, ld, K.as<uint8_t>(), rng);
        fill_floats(Q.as<float>(), M * H, rng);
        fill_floats(P.as<float>(), M * N, rng, 0.0f, 1.0f);
        for (const KernelTable* t : tables()) {
          std::vector<float> c_one(M * N), c_blocks(M * N), o_one(M * H), o_blocks(M * H);
          qk_direct(*t, e)(M, N, H, Q.as<float>(), H, K.as<uint8_t>(), ld, 0.5f, c_one.data(), N);
          sv_fn(*t, e)(M, N, H, P.as<float>(), N, K.as<uint8_t>(), ld, o_one.data(), H, false);
          for (size_t j = 0; j < N; j += kBlock) {
            const size_t n = std::min(kBlock, N - j);
            qk_direct(*t, e)(M, n, H, Q.as<float>(), H, K.as<uint8_t>() + j * ld, ld, 0.5f, c_blocks.data() + j, N);
            sv_fn(*t, e)(M, n, H, P.as<float>() + j, N, K.as<uint8_t>() + j * ld, ld, o_blocks.data(), H, j > 0);
          }
          const auto where = [&] { return std::string(t->isa) + " " + ref::cache_elem_name(e) + " M=" +
                                           std::to_string(M) + " H=" + std::to_string(H); };
          ASSERT_EQ(0, std::memcmp(c_one.data(), c_blocks.data(), M * N * 4)) << "qk " << where();
          ASSERT_EQ(0, std::memcmp(o_one.data(), o_blocks.data(), M * H * 4)) << "sv " << where();
        }
      }
}

// Scores keep their bits in any register tile: the x86 direct QK reduces a tile's row x key sums 8 to a reduction
// tree whatever their rows (AVX512: 7 rows take tiles of 2 keys, 14 sums in 2 trees; one row takes 8 keys), so an
// M-row call must give every row the bits of that row alone, and of calls over one key at a time.
TEST(KernelQkGemm, ScoresKeepTheirBitsInAnyTile) {
  std::mt19937 rng(23);
  for (CacheElem e : kAllElems)
    for (size_t H : {64, 72, 128})
      for (size_t M : {3, 5, 7, 8, 13}) {
        constexpr size_t N = 37;
        const size_t ld = ref::cache_row_bytes(e, H);
        Guarded K(N * ld), Q(M * H * 4);
        fill_cache(e, N, H, ld, K.as<uint8_t>(), rng);
        fill_floats(Q.as<float>(), M * H, rng);
        for (const KernelTable* t : tables()) {
          const auto where = [&] { return std::string(t->isa) + " " + ref::cache_elem_name(e) + " M=" +
                                          std::to_string(M) + " H=" + std::to_string(H); };
          std::vector<float> all(M * N), row(N), key(M);
          qk_direct(*t, e)(M, N, H, Q.as<float>(), H, K.as<uint8_t>(), ld, 0.5f, all.data(), N);
          for (size_t i = 0; i < M; ++i) {
            qk_direct(*t, e)(1, N, H, Q.as<float>() + i * H, H, K.as<uint8_t>(), ld, 0.5f, row.data(), N);
            ASSERT_EQ(0, std::memcmp(all.data() + i * N, row.data(), N * 4)) << where() << " row " << i;
          }
          for (size_t j = 0; j < N; ++j) {
            qk_direct(*t, e)(M, 1, H, Q.as<float>(), H, K.as<uint8_t>() + j * ld, ld, 0.5f, key.data(), 1);
            for (size_t i = 0; i < M; ++i)
              ASSERT_EQ(0, std::memcmp(&all[i * N + j], &key[i], 4)) << where() << " key " << j << " row " << i;
          }
        }
      }
}

// Rows and columns are cut into register tiles of several sizes (AVX512: 7 rows as 4 + 3; H = 96 as one tile of 6
// vectors, int4 of 3 byte vectors); each output keeps its chain of multiply-adds over the keys in any tile, so an
// M-row call gives every row the bits of that row alone, and a call over all H columns those of calls over slices.
TEST(KernelSvGemm, OutputsKeepTheirBitsInAnyTile) {
  std::mt19937 rng(17);
  for (CacheElem e : kAllElems)
    for (size_t H : {72, 96, 128})
      for (size_t N : {37, 600})
        for (size_t M : {1, 5, 7, 8, 13}) {
          const size_t ld = ref::cache_row_bytes(e, H);
          Guarded V(N * ld), P(M * N * 4);
          fill_cache(e, N, H, ld, V.as<uint8_t>(), rng);
          fill_floats(P.as<float>(), M * N, rng, 0.0f, 1.0f);
          for (const KernelTable* t : tables()) {
            const auto where = [&] { return std::string(t->isa) + " " + ref::cache_elem_name(e) + " M=" +
                                            std::to_string(M) + " N=" + std::to_string(N) + " H=" + std::to_string(H); };
            std::vector<float> all(M * H), part(M * H);
            sv_fn(*t, e)(M, N, H, P.as<float>(), N, V.as<uint8_t>(), ld, all.data(), H, false);
            for (size_t i = 0; i < M; ++i) {
              sv_fn(*t, e)(1, N, H, P.as<float>() + i * N, N, V.as<uint8_t>(), ld, part.data(), H, false);
              ASSERT_EQ(0, std::memcmp(all.data() + i * H, part.data(), H * 4)) << where() << " row " << i;
            }
            for (size_t d = 0; d < H; d += 32) {  // column slices of 32 (the last of H mod 32)
              const size_t w = std::min<size_t>(32, H - d);
              const size_t offset = ref::cache_row_bytes(e, d);
              sv_fn(*t, e)(M, N, w, P.as<float>(), N, V.as<uint8_t>() + offset, ld, part.data() + d, H, false);
            }
            ASSERT_EQ(0, std::memcmp(all.data(), part.data(), M * H * 4)) << where() << " column slices";
          }
        }
}

// The f16_finite forms read rows known to hold no inf or NaN (a GqaKvCache's checked past) and must give the f16
// kernels' bits on them: every finite pattern through the packer, and direct QK and SV (overwriting and
// accumulating) over random finite patterns, subnormals and 65504 included, at tile and streamed decode shapes.
TEST(KernelQkSvGemm, F16FiniteFormsGiveTheF16Bits) {
  std::vector<uint16_t> finite;
  for (uint32_t h = 0; h < 65536; ++h)
    if ((h & 0x7c00) != 0x7c00) finite.push_back(static_cast<uint16_t>(h));
  std::mt19937 rng(21);
  std::uniform_int_distribution<size_t> pick(0, finite.size() - 1);
  for (const KernelTable* t : tables()) {
    const size_t keys = finite.size() / 8;
    std::vector<float> want(keys * 8), got(keys * 8);
    t->qk.pack_f16(keys, 8, finite.data(), 16, want.data());
    t->qk.pack_f16_finite(keys, 8, finite.data(), 16, got.data());
    ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 4)) << t->isa << " pack";
  }
  for (size_t H : {8, 72, 128})
    for (size_t N : {1, 37, 600})
      for (size_t M : {1, 2, 4, 7}) {
        std::vector<uint16_t> K(N * H);
        for (uint16_t& h : K) h = finite[pick(rng)];
        Guarded Q(M * H * 4), P(M * N * 4);
        fill_floats(Q.as<float>(), M * H, rng);
        fill_floats(P.as<float>(), M * N, rng, 0.0f, 1.0f);
        for (const KernelTable* t : tables()) {
          const auto where = [&] { return std::string(t->isa) + " M=" + std::to_string(M) + " N=" +
                                          std::to_string(N) + " H=" + std::to_string(H); };
          std::vector<float> c_want(M * N), c_got(M * N);
          t->qk.f16(M, N, H, Q.as<float>(), H, K.data(), H * 2, 0.5f, c_want.data(), N);
          t->qk.f16_finite(M, N, H, Q.as<float>(), H, K.data(), H * 2, 0.5f, c_got.data(), N);
          ASSERT_EQ(0, std::memcmp(c_want.data(), c_got.data(), c_want.size() * 4)) << "qk " << where();
          for (bool accumulate : {false, true}) {
            std::vector<float> o_want(M * H, 0.25f), o_got(M * H, 0.25f);
            t->sv.f16(M, N, H, P.as<float>(), N, K.data(), H * 2, o_want.data(), H, accumulate);
            t->sv.f16_finite(M, N, H, P.as<float>(), N, K.data(), H * 2, o_got.data(), H, accumulate);
            ASSERT_EQ(0, std::memcmp(o_want.data(), o_got.data(), o_want.size() * 4)) << "sv " << where();
          }
        }
      }
}

// Where a table widens a prompt's V blocks (SvGemmKernels::widen_*), the fp32 SV over the widened rows must give the
// fused kernel's bits: the conversion is exact and each output is the same chain over the keys. Up to 4 rows the
// fused kernels run (in tiles, or streamed: from 64 KB, and wasm's int4 at any length with H a multiple of 16); the
// wasm int8 SV sums its values times 2^24 (sv_load8), so probabilities down to 2^-126 and zero, and start values
// from subnormal to 1e6 of either sign, hold it to exact scalings.
TEST(KernelSvGemm, WidenedBlocksGiveTheFusedBits) {
  std::mt19937 rng(23);
  std::uniform_int_distribution<int> byte(0, 255);
  size_t checked = 0;
  for (const KernelTable* t : tables()) {
    const SvGemmKernels& sv = t->sv;
    const struct {
      SvWidenFn widen;
      SvGemmFn fused;
      size_t elem_bits;
      bool half;  // 16-bit floats: finite patterns only (exponent not all ones)
      const char* name;
    } forms[] = {{sv.widen_f16, sv.f16, 16, true, "f16"}, {sv.widen_f16_finite, sv.f16_finite, 16, true, "f16 finite"},
                 {sv.widen_bf16, sv.bf16, 16, true, "bf16"}, {sv.widen_s8, sv.s8, 8, false, "s8"},
                 {sv.widen_s4, sv.s4, 4, false, "s4"}};
    for (const auto& f : forms) {
      if (!f.widen) continue;
      for (size_t H : {8, 48, 72, 128})
        for (size_t N : {1, 37, 600})
          for (size_t M : {2, 3, 4, 5, 12, 30}) {
            const size_t ldv = H * f.elem_bits / 8;
            std::vector<uint8_t> V(N * ldv);
            for (uint8_t& b : V) b = static_cast<uint8_t>(byte(rng));
            if (f.half) {
              const uint16_t exponent = f.fused == sv.bf16 ? 0x7f80 : 0x7c00;
              for (size_t k = 0; k + 1 < V.size(); k += 2)
                if ((((V[k + 1] << 8) | V[k]) & exponent) == exponent) V[k + 1] ^= 0x40;  // clears one exponent bit
            }
            Guarded P(M * N * 4);
            fill_floats(P.as<float>(), M * N, rng, 0.0f, 1.0f);
            for (size_t k = 0; k < M * N; k += 3)
              P.as<float>()[k] = k % 2 ? 0.0f : std::ldexp(1.0f + P.as<float>()[k], -126);
            std::vector<float> start(M * H);
            for (size_t k = 0; k < start.size(); ++k)
              start[k] = (k % 2 ? -1.0f : 1.0f) * std::ldexp(1.0f + P.as<float>()[k % (M * N)], int(k % 9) * 20 - 140);
            std::vector<float> wide(N * H);
            f.widen(N, H, V.data(), ldv, wide.data());
            for (bool accumulate : {false, true}) {
              std::vector<float> o_want(start), o_got(start);
              f.fused(M, N, H, P.as<float>(), N, V.data(), ldv, o_want.data(), H, accumulate);
              sv.f32(M, N, H, P.as<float>(), N, reinterpret_cast<const uint8_t*>(wide.data()), H * 4, o_got.data(), H,
                     accumulate);
              ASSERT_EQ(0, std::memcmp(o_want.data(), o_got.data(), o_want.size() * 4))
                  << t->isa << " " << f.name << " M=" << M << " N=" << N << " H=" << H;
            }
            ++checked;
          }
    }
  }
  if (checked == 0) GTEST_SKIP() << "no table widens V blocks on this host's ISA list";
}

TEST(KernelSvGemm, ZeroKeysZeroesOrKeeps) {
  for (const KernelTable* t : tables()) {
    std::vector<float> O(3 * 16, 5.0f);
    t->sv.f32(3, 0, 16, nullptr, 0, nullptr, 0, O.data(), 16, true);
    for (float v : O) ASSERT_EQ(v, 5.0f) << t->isa;
    t->sv.s8(3, 0, 16, nullptr, 0, nullptr, 0, O.data(), 16, false);
    for (float v : O) ASSERT_EQ(v, 0.0f) << t->isa;
  }
}

}  // namespace
}  // namespace kernel_test
}  // namespace attnkit

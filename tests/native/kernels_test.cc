// attnkit kernel tests, kv_quant, half conversions, panel packing of every half pattern, softmax, rotary and the
// dispatch tables: every ISA this host can run (natively or through SIMDe) against the double-precision reference
// in core/reference/kernel_reference.h, bit for bit where the contract is exact.
#include "kernel_test_support.h"
#include "softmax/exp_poly.h"

namespace attnkit {
namespace kernel_test {
namespace {

// Quantization inputs: random values over several scales plus every edge the contract names.
std::vector<float> quant_inputs(size_t n, std::mt19937& rng) {
  const float inf = std::numeric_limits<float>::infinity();
  const float specials[] = {2.5f,  3.5f,   -2.5f,  -3.5f, 0.5f,  -0.5f,  1.5f,  -1.5f, 126.5f, 127.5f,
                            -127.5f, -128.5f, 128.0f, -129.0f, 1e30f, -1e30f, inf,  -inf,  6.5f,  7.5f,
                            -7.5f, -8.5f,  7.49999f, -8.0f, 0.0f, -0.0f, 1e-40f, 3e9f, -3e9f, 2147483648.0f};
  std::uniform_real_distribution<float> uni(-140.0f, 140.0f);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    const size_t pick = rng() % 3;
    x[i] = pick == 0 ? specials[rng() % (sizeof(specials) / sizeof(float))]
                     : (pick == 1 ? std::nearbyint(uni(rng) * 2) / 2 : uni(rng));
  }
  return x;
}

TEST(KernelKvQuant, QuantizeIsBitExactIncludingTiesSaturationAndNan) {
  std::mt19937 rng(5);
  for (const KernelTable* t : tables())
    for (size_t n = 2; n <= 300; n += (n < 70 ? 2 : 37)) {
      std::vector<float> x = quant_inputs(n, rng);
      x[0] = std::numeric_limits<float>::quiet_NaN();
      std::vector<float> inv(n);
      for (size_t i = 0; i < n; ++i) inv[i] = (rng() % 2) ? 1.0f : 1.0f / (0.01f + (rng() % 100) * 0.037f);
      Guarded xs(n * 4), invs(n * 4), q8(n), q4(n / 2);
      std::memcpy(xs.as<float>(), x.data(), n * 4);
      std::memcpy(invs.as<float>(), inv.data(), n * 4);
      std::vector<int8_t> want8(n);
      std::vector<uint8_t> want4(n / 2);
      ref::quantize_s8(x.data(), inv.data(), n, want8.data());
      ref::quantize_s4(x.data(), inv.data(), n, want4.data());
      t->kv.quantize_s8(xs.as<float>(), invs.as<float>(), n, q8.as<int8_t>());
      t->kv.quantize_s4(xs.as<float>(), invs.as<float>(), n, q4.as<uint8_t>());
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(want8[i], q8.as<int8_t>()[i]) << t->isa << " n=" << n << " x=" << x[i] << " inv=" << inv[i];
      for (size_t i = 0; i < n / 2; ++i)
        ASSERT_EQ(want4[i], q4.as<uint8_t>()[i]) << t->isa << " n=" << n << " pair " << x[2 * i] << ","
                                                 << x[2 * i + 1];
      // Odd lengths for s8 (the s4 contract needs even n).
      t->kv.quantize_s8(xs.as<float>() + 1, invs.as<float>() + 1, n - 1, q8.as<int8_t>());
      for (size_t i = 0; i + 1 < n; ++i) ASSERT_EQ(want8[i + 1], q8.as<int8_t>()[i]) << t->isa;
    }
}

TEST(KernelKvQuant, NamedTiesRoundHalfToEven) {
  const float x[] = {2.5f, 3.5f, -2.5f, -3.5f, 1e30f, -1e30f, 0.5f, 1.5f};
  const float inv[] = {1, 1, 1, 1, 1, 1, 1, 1};
  const int8_t want[] = {2, 4, -2, -4, 127, -128, 0, 2};
  for (const KernelTable* t : tables()) {
    int8_t q[8];
    t->kv.quantize_s8(x, inv, 8, q);
    for (int i = 0; i < 8; ++i) EXPECT_EQ(want[i], q[i]) << t->isa << " x=" << x[i];
    uint8_t q4[4];
    t->kv.quantize_s4(x, inv, 8, q4);
    EXPECT_EQ((2 + 8) | ((4 + 8) << 4), q4[0]) << t->isa;
    EXPECT_EQ((-2 + 8) | ((-4 + 8) << 4), q4[1]) << t->isa;
    EXPECT_EQ((7 + 8) | ((-8 + 8) << 4), q4[2]) << t->isa;
  }
}

TEST(KernelKvQuant, DequantizeIsExactProduct) {
  std::mt19937 rng(8);
  for (const KernelTable* t : tables())
    for (size_t n : {1, 2, 7, 16, 17, 64, 130}) {
      Guarded q(n), q4((n + 1) / 2), sc(n * 4), out(n * 4);
      for (size_t i = 0; i < n; ++i) q.as<uint8_t>()[i] = static_cast<uint8_t>(rng());
      for (size_t i = 0; i < (n + 1) / 2; ++i) q4.as<uint8_t>()[i] = static_cast<uint8_t>(rng());
      fill_floats(sc.as<float>(), n, rng, 0.001f, 0.5f);
      t->kv.dequantize_s8(q.as<int8_t>(), sc.as<float>(), n, out.as<float>());
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(static_cast<float>(q.as<int8_t>()[i]) * sc.as<float>()[i], out.as<float>()[i]) << t->isa;
      t->kv.dequantize_s4(q4.as<uint8_t>(), sc.as<float>(), n, out.as<float>());
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(static_cast<float>(ref::cache_value(CacheElem::kS4, q4.as<uint8_t>(), i)) * sc.as<float>()[i],
                  out.as<float>()[i])
            << t->isa << " n=" << n << " i=" << i;
    }
}

// Every byte lands, whatever the alignments and sizes (the streaming forms copy an unaligned head and a tail around
// their aligned stores); the destination's bytes around the range stay as they were.
TEST(KernelKvQuant, CopyStreamingCopiesExactlyTheRange) {
  std::mt19937 rng(9);
  for (const KernelTable* t : tables())
    for (size_t bytes : {0, 1, 31, 32, 33, 63, 64, 65, 127, 200, 4096 + 17})
      for (size_t src_at : {0, 1, 7})
        for (size_t dst_at : {0, 1, 13, 32, 63}) {
          Guarded src(src_at + bytes), dst(dst_at + bytes + 8);
          for (size_t i = 0; i < src_at + bytes; ++i) src.as<uint8_t>()[i] = static_cast<uint8_t>(rng());
          std::memset(dst.as<uint8_t>(), 0x5A, dst_at + bytes + 8);
          t->kv.copy_streaming(dst.as<uint8_t>() + dst_at, src.as<uint8_t>() + src_at, bytes);
          for (size_t i = 0; i < dst_at + bytes + 8; ++i) {
            const bool inside = i >= dst_at && i < dst_at + bytes;
            const uint8_t want = inside ? src.as<uint8_t>()[src_at + i - dst_at] : 0x5A;
            ASSERT_EQ(want, dst.as<uint8_t>()[i]) << t->isa << " bytes=" << bytes << " src_at=" << src_at
                                                  << " dst_at=" << dst_at << " i=" << i;
          }
        }
}

// Storage conversion must equal common/half.h bit for bit: every fp16/bf16 pattern back to fp32,
// and fp32 inputs covering normal, subnormal, overflow-boundary, every tie and NaN cases.
TEST(KernelKvQuant, HalfConversionsBitExactVsHalfH) {
  std::mt19937 rng(11);
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> xs;
  const float edges[] = {65504.0f, 65519.99f, 65520.0f, 1e-8f, 5.96e-8f, 2.98e-8f, 6.1e-5f, 1.0009765625f,
                         1.00048828125f, 3.0e38f, -0.0f, std::numeric_limits<float>::infinity(),
                         std::numeric_limits<float>::quiet_NaN(), 1.00390625f, 1.01171875f};
  for (float e : edges) {
    xs.push_back(e);
    xs.push_back(-e);
  }
  // Every tie between adjacent fp16 values (subnormals included) and its two neighbours, where the rounding
  // rule alone decides; bf16's ties come from the low half of the same fp32 patterns.
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const float mid = 0.5f * (f16_to_float(static_cast<uint16_t>(h)) + f16_to_float(static_cast<uint16_t>(h + 1)));
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
      xs.push_back(x);
      xs.push_back(-x);
    }
    xs.push_back(bits_float((h << 16) | 0x8000u));
  }
  for (int i = 0; i < 20000; ++i) {
    uint32_t bits = static_cast<uint32_t>(rng());
    if (i % 2) bits = (bits & 0x807fffffu) | ((100u + rng() % 60u) << 23);  // mostly the f16 range
    xs.push_back(bits_float(bits));
  }
  const size_t n = xs.size() - 3;  // an odd length exercises every tail
  for (const KernelTable* t : tables()) {
    Guarded in16(65536 * 2), out32(65536 * 4), in32(n * 4), out16(n * 2);
    std::memcpy(in16.as<uint16_t>(), all.data(), 65536 * 2);
    t->kv.from_f16(in16.as<uint16_t>(), 65536, out32.as<float>());
    for (size_t i = 0; i < 65536; ++i)
      ASSERT_EQ(float_bits(f16_to_float(all[i])), float_bits(out32.as<float>()[i])) << t->isa << " f16 " << i;
    t->kv.from_bf16(in16.as<uint16_t>(), 65536, out32.as<float>());
    for (size_t i = 0; i < 65536; ++i)
      ASSERT_EQ(float_bits(bf16_to_float(all[i])), float_bits(out32.as<float>()[i])) << t->isa << " bf16 " << i;
    std::memcpy(in32.as<float>(), xs.data(), n * 4);
    t->kv.to_f16(in32.as<float>(), n, out16.as<uint16_t>());
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(float_to_f16(xs[i]), out16.as<uint16_t>()[i]) << t->isa << " to_f16 of " << xs[i];
    t->kv.to_bf16(in32.as<float>(), n, out16.as<uint16_t>());
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(float_to_bf16(xs[i]), out16.as<uint16_t>()[i]) << t->isa << " to_bf16 of " << xs[i];
  }
}

// The QK/SV row loaders convert f16/bf16 cache rows exactly: every pattern, read through each ISA's panel packer
// (pure conversion, no arithmetic), equals common/half.h bit for bit, infinities included. A NaN stays a NaN (F16C
// quiets a signaling one, as IEEE conversions do; the attention result is NaN either way).
TEST(KernelQkGemm, PackConvertsEveryHalfPatternExactly) {
  constexpr size_t H = 8, N = 65536 / H;
  Guarded K(65536 * 2);
  for (size_t i = 0; i < 65536; ++i) K.as<uint16_t>()[i] = static_cast<uint16_t>(i);
  std::vector<float> panels(N * H);
  for (const KernelTable* t : tables()) {
    for (bool bf16 : {false, true}) {
      (bf16 ? t->qk.pack_bf16 : t->qk.pack_f16)(N, H, K.as<uint8_t>(), H * 2, panels.data());
      for (size_t j = 0; j < N; ++j)
        for (size_t d = 0; d < H; ++d) {
          const uint16_t h = static_cast<uint16_t>(j * H + d);
          const float want = bf16 ? bf16_to_float(h) : f16_to_float(h);
          const float got = panels[(j / kQkPanelKeys) * H * kQkPanelKeys + d * kQkPanelKeys + j % kQkPanelKeys];
          if (std::isnan(want))
            ASSERT_TRUE(std::isnan(got)) << t->isa << (bf16 ? " bf16 " : " f16 ") << std::hex << h;
          else
            ASSERT_EQ(float_bits(want), float_bits(got)) << t->isa << (bf16 ? " bf16 " : " f16 ") << std::hex << h;
        }
    }
  }
}

// The SIMD softcap skips tanh's exp branch for vectors whose lanes are all below 0.625 * cap: rows entirely below,
// and rows where one lane (at every position of a 64-value group) is above or NaN, give the scalar bits.
TEST(KernelSoftmax, SoftcapBranchSkipKeepsTheScalarBits) {
  std::mt19937 rng(29);
  const KernelTable* scalar = kernel_table_for("scalar");
  constexpr size_t n = 200;
  for (int odd = -1; odd < 64; ++odd) {
    std::vector<float> x(n);
    fill_floats(x.data(), n, rng, -12.0f, 12.0f);  // |x| / 20 < 0.625
    if (odd >= 0) {
      x[static_cast<size_t>(odd)] = odd % 2 ? 13.0f : std::numeric_limits<float>::quiet_NaN();
      x[static_cast<size_t>(odd) + 128] = -13.0f;
    }
    std::vector<float> want(x);
    scalar->softmax.softcap(want.data(), n, 20.0f);
    for (const KernelTable* t : tables()) {
      std::vector<float> got(x);
      t->softmax.softcap(got.data(), n, 20.0f);
      for (size_t i = 0; i < n; ++i) {
        if (std::isnan(want[i]))
          ASSERT_TRUE(std::isnan(got[i])) << t->isa << " at " << i;
        else
          ASSERT_EQ(float_bits(want[i]), float_bits(got[i])) << t->isa << " odd lane " << odd << " at " << i;
      }
    }
  }
}

// exp_poly: < 2 ulp from the true exp over the whole useful range, exactly 0 for -inf and for inputs
// whose result would be subnormal.
TEST(KernelSoftmax, ExpPolyUnderTwoUlp) {
  for (float x = -87.0f; x <= 88.0f; x += 0.0137f) {
    const double want = std::exp(static_cast<double>(x));
    const double ulp = std::ldexp(1.0, std::ilogb(want) - 23);
    ASSERT_LE(std::fabs(exp_poly::exp(x) - want), 2 * ulp) << x;
  }
  EXPECT_EQ(0.0f, exp_poly::exp(-std::numeric_limits<float>::infinity()));
  EXPECT_EQ(0.0f, exp_poly::exp(-100.0f));
  EXPECT_EQ(1.0f, exp_poly::exp(0.0f));
}

// Softmax's exp: relative error within 1.34 (|d| + 1) u (the rounding of d log2(e), then the polynomial's ~1.3 ulp;
// exp_poly.h), checked here at 1.5; exactly 0 below kLow and for -inf, 1 at 0.
TEST(KernelSoftmax, ExpAtMostZeroBound) {
  for (float d = -87.0f; d <= 0.0f; d += 0.00731f) {
    const double want = std::exp(static_cast<double>(d));
    ASSERT_LE(std::fabs(exp_poly::exp_at_most_zero(d) - want), 1.5 * (std::fabs(d) + 1) * kU * want) << d;
  }
  EXPECT_EQ(0.0f, exp_poly::exp_at_most_zero(-std::numeric_limits<float>::infinity()));
  EXPECT_EQ(0.0f, exp_poly::exp_at_most_zero(-88.0f));
  EXPECT_EQ(1.0f, exp_poly::exp_at_most_zero(0.0f));
  EXPECT_TRUE(std::isnan(exp_poly::exp_at_most_zero(std::numeric_limits<float>::quiet_NaN())));
}

// A NaN score stays NaN through exp_sum on every ISA (the vector path lets it ride through the
// arithmetic instead of selecting it back), and its neighbours keep their values.
TEST(KernelSoftmax, ExpSumKeepsNaN) {
  for (const KernelTable* t : tables()) {
    for (size_t at : {0, 5, 17, 63}) {
      std::vector<float> x(64, -1.0f);
      x[at] = std::numeric_limits<float>::quiet_NaN();
      const float sum = t->softmax.exp_sum(x.data(), x.size(), 0.0f);
      EXPECT_TRUE(std::isnan(sum)) << t->isa;
      for (size_t i = 0; i < x.size(); ++i) {
        if (i == at)
          EXPECT_TRUE(std::isnan(x[i])) << t->isa << " at " << at;
        else
          EXPECT_EQ(float_bits(exp_poly::exp_at_most_zero(-1.0f)), float_bits(x[i])) << t->isa << " i=" << i;
      }
    }
  }
}

// Every ISA mirrors exp_poly's operation sequence, so element values are identical to scalar; the
// sum is an fp32 reduction of n non-negative terms: within (n+1) * u * sum of the reference. Each
// element also carries the rounding of d = x - max (relative u |d| after exp) and exp_at_most_zero's
// 1.34 (|d| + 1) u: within (2.5 |d| + 4) u.
TEST(KernelSoftmax, RowOpsMatchScalarBitsAndReference) {
  std::mt19937 rng(17);
  const KernelTable* scalar = kernel_table_for("scalar");
  for (size_t n : {1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 64, 100, 255, 512, 1000}) {
    std::vector<float> x(n);
    fill_floats(x.data(), n, rng, -30.0f, 30.0f);
    if (n > 4) x[3] = -std::numeric_limits<float>::infinity();
    if (n > 5) x[4] = -1e30f;
    std::vector<double> want(n);
    const float max = scalar->softmax.reduce_max(x.data(), n);
    const double want_sum = ref::exp_sum(x.data(), n, max, want.data());
    std::vector<float> scalar_exp(x);
    scalar->softmax.exp_sum(scalar_exp.data(), n, max);
    std::vector<float> scalar_cap(x);
    scalar->softmax.softcap(scalar_cap.data(), n, 20.0f);
    for (const KernelTable* t : tables()) {
      Guarded buf(n * 4);
      std::memcpy(buf.as<float>(), x.data(), n * 4);
      ASSERT_EQ(max, t->softmax.reduce_max(buf.as<float>(), n)) << t->isa;
      const float sum = t->softmax.exp_sum(buf.as<float>(), n, max);
      ASSERT_LE(std::fabs(sum - want_sum), (n + 64) * kU * want_sum) << t->isa << " n=" << n;
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(float_bits(scalar_exp[i]), float_bits(buf.as<float>()[i])) << t->isa << " exp i=" << i;
        if (want[i] == 0) {
          ASSERT_EQ(0.0f, buf.as<float>()[i]) << t->isa;
          continue;
        }
        ASSERT_LE(std::fabs(buf.as<float>()[i] - want[i]), (2.5 * std::fabs(x[i] - max) + 4) * kU * want[i])
            << t->isa;
      }
      t->softmax.scale(buf.as<float>(), n, 0.37f);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(scalar_exp[i] * 0.37f, buf.as<float>()[i]) << t->isa;
      const std::vector<float> scaled(buf.as<float>(), buf.as<float>() + n);
      Guarded addend(n * 4);
      std::memcpy(addend.as<float>(), x.data(), n * 4);  // -inf and -1e30 among them
      t->softmax.add(buf.as<float>(), addend.as<float>(), n);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(float_bits(scaled[i] + x[i]), float_bits(buf.as<float>()[i])) << t->isa;
      // softcap: tanh is within a few ulp of 1 absolute (polynomial below 0.625, 1 - 2/(e^2x+1)
      // above), so cap * tanh is within cap * 2^-21 of the true value.
      std::memcpy(buf.as<float>(), x.data(), n * 4);
      t->softmax.softcap(buf.as<float>(), n, 20.0f);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(float_bits(scalar_cap[i]), float_bits(buf.as<float>()[i])) << t->isa << " softcap " << x[i];
        ASSERT_LE(std::fabs(buf.as<float>()[i] - ref::softcap(x[i], 20.0)), 20.0 * std::ldexp(1.0, -21))
            << x[i];
      }
    }
  }
}

// Rotary is two products and one sum per element with no FMA: the same bits on every ISA, within
// 2u * (|a c| + |b s|) of the exact value.
TEST(KernelRotary, BitExactAcrossIsasAndNearReference) {
  std::mt19937 rng(23);
  const KernelTable* scalar = kernel_table_for("scalar");
  for (size_t rotary_dim : {2, 4, 8, 16, 24, 32, 64, 80, 96, 128, 136, 256})
    for (bool interleaved : {false, true}) {
      Guarded x(rotary_dim * 4), c(rotary_dim / 2 * 4), s(rotary_dim / 2 * 4);
      fill_floats(x.as<float>(), rotary_dim, rng, -3.0f, 3.0f);
      for (size_t i = 0; i < rotary_dim / 2; ++i) {
        const float angle = static_cast<float>(rng() % 10000) * 0.01f;
        c.as<float>()[i] = std::cos(angle);
        s.as<float>()[i] = std::sin(angle);
      }
      std::vector<float> want(rotary_dim);
      scalar->rotary.apply(x.as<float>(), c.as<float>(), s.as<float>(), rotary_dim, interleaved, want.data());
      std::vector<double> exact(rotary_dim);
      ref::rotary(x.as<float>(), c.as<float>(), s.as<float>(), rotary_dim, interleaved, exact.data());
      for (size_t i = 0; i < rotary_dim; ++i) {
        const size_t pair = interleaved ? i / 2 : i % (rotary_dim / 2);
        const size_t partner = interleaved ? (i ^ 1) : (i < rotary_dim / 2 ? i + rotary_dim / 2 : i - rotary_dim / 2);
        const double mag = std::fabs(x.as<float>()[i] * c.as<float>()[pair]) +
                           std::fabs(x.as<float>()[partner] * s.as<float>()[pair]);
        ASSERT_LE(std::fabs(want[i] - exact[i]), 2 * kU * mag + 1e-30);
      }
      for (const KernelTable* t : tables()) {
        Guarded y(rotary_dim * 4);
        t->rotary.apply(x.as<float>(), c.as<float>(), s.as<float>(), rotary_dim, interleaved, y.as<float>());
        ASSERT_EQ(0, std::memcmp(want.data(), y.as<float>(), rotary_dim * 4)) << t->isa << " dim=" << rotary_dim;
        // In place (x and y alias).
        std::vector<float> inplace(x.as<float>(), x.as<float>() + rotary_dim);
        t->rotary.apply(inplace.data(), c.as<float>(), s.as<float>(), rotary_dim, interleaved, inplace.data());
        ASSERT_EQ(0, std::memcmp(want.data(), inplace.data(), rotary_dim * 4)) << t->isa << " in place";
      }
    }
}

TEST(KernelDispatch, EveryListedIsaHasACompleteTable) {
  for (const std::string& isa : available_isas()) {
    const KernelTable* t = kernel_table_for(isa);
    ASSERT_NE(nullptr, t) << isa;
    EXPECT_EQ(isa, std::string(t->isa));
    EXPECT_TRUE(t->qk.f32 && t->qk.f16 && t->qk.bf16 && t->qk.s8 && t->qk.s4 && t->qk.packed);
    EXPECT_TRUE(t->qk.f16_finite && t->qk.pack_f16_finite && t->sv.f16_finite);
    EXPECT_TRUE(t->sv.f32 && t->sv.f16 && t->sv.bf16 && t->sv.s8 && t->sv.s4);
    EXPECT_TRUE(t->kv.quantize_s8 && t->kv.quantize_s4 && t->kv.to_f16 && t->kv.to_bf16 && t->kv.copy_streaming);
    EXPECT_TRUE(t->softmax.exp_sum && t->softmax.softcap && t->rotary.apply);
  }
}

// x87 math after every table's kernels: SIMDe's NEON emulation once compiled (under clang) to MMX instructions
// without EMMS, which leaves the x87 stack unusable, and long double math returned NaN (libstdc++'s random
// distributions use it). Every element type, both products, a few rows and keys.
TEST(KernelDispatch, KernelsLeaveLongDoubleMathWorking) {
  std::mt19937 rng(17);
  constexpr size_t M = 3, N = 20, H = 64;
  std::vector<float> q(M * H), p(M * N), scores(M * N), out(M * H);
  fill_floats(q.data(), q.size(), rng, -1.0f, 1.0f);
  fill_floats(p.data(), p.size(), rng, 0.0f, 1.0f);
  std::vector<uint8_t> cache(N * H * 4);
  for (uint8_t& b : cache) b = static_cast<uint8_t>(rng() % 64);  // small bytes: finite as f16, bf16 and f32
  for (const KernelTable* t : tables()) {
    const QkGemmFn qk[] = {t->qk.f32, t->qk.f16, t->qk.bf16, t->qk.s8, t->qk.s4};
    const SvGemmFn sv[] = {t->sv.f32, t->sv.f16, t->sv.bf16, t->sv.s8, t->sv.s4};
    const size_t row_bytes[] = {H * 4, H * 2, H * 2, H, H / 2};
    for (size_t e = 0; e < 5; ++e) {
      qk[e](M, N, H, q.data(), H, cache.data(), row_bytes[e], 0.125f, scores.data(), N);
      sv[e](M, N, H, p.data(), N, cache.data(), row_bytes[e], out.data(), H, false);
      volatile long double two_to_32 = 4294967296.0L;
      ASSERT_EQ(32.0L, std::round(std::log(two_to_32) / std::log(2.0L))) << t->isa << " element type " << e;
    }
  }
}

}  // namespace
}  // namespace kernel_test
}  // namespace attnkit

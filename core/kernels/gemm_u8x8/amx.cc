// attnkit gemm_u8x8, AMX-INT8 (Xeon Sapphire Rapids and later): tdpbusd adds a 16 x 64 u8 tile times a 64 x 16 s8
// tile into 16 x 16 int32 sums, 16384 products per instruction, exact and wrapping like vpdpbusd. It reads
// avx512vnni's packing as it is (a strip's groups of 4 k bytes per column are AMX's B rows) and finishes rows with
// its epilogue, so the bits are the same. "amx-emulated" runs this driver on scalar tiles: hosts without AMX test it.
#include <cstring>

#include "gemm_u8x8/x86_direct_impl.h"
#include "gemm_u8x8/x86_vnni512_impl.h"

namespace attnkit {
namespace {

constexpr size_t kTileRows = 16;   // rows of A (and of C) per tile
constexpr size_t kTileDepth = 64;  // k bytes per tile step: 16 of B's 4-byte groups

// Palette 1 with tiles 0-6 at their full 16 rows x 64 bytes: 0-3 hold C (one per vnni register of a strip row
// group, see PackVnni512), 4 holds A, 5 and 6 B.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16};
};
static_assert(sizeof(TileConfig) == 64, "LDTILECFG reads 64 bytes");

// GCC's tile intrinsics paste the tile number into their asm text, so each tile's operations are spelled out below.
// Loads and stores are attnkit's own asm: GCC's pass the stride as `long`, 32 bits on Windows, which the assembler
// refuses as an index register.
struct HardwareTiles {
  static void configure() {
    static const TileConfig config;
    _tile_loadconfig(&config);
  }
  static void release() { _tile_release(); }
  template <int T>
  static void zero();
  template <int T>
  static void load(const void* src, size_t stride);
  template <int T>
  static void store(void* dst, size_t stride);
  template <int C, int A, int B>
  static void dpbusd();
};
#define ATTNKIT_AMX_TILE(T)                                                                                   \
  template <>                                                                                                 \
  inline void HardwareTiles::zero<T>() { _tile_zero(T); }                                                     \
  template <>                                                                                                 \
  inline void HardwareTiles::load<T>(const void* src, size_t stride) {                                        \
    __asm__ volatile("{tileloadd\t(%0,%1,1), %%tmm" #T "|tileloadd\t%%tmm" #T ", [%0+%1*1]}"                 \
                     ::"r"(src), "r"(static_cast<uint64_t>(stride)) : "memory");                             \
  }                                                                                                           \
  template <>                                                                                                 \
  inline void HardwareTiles::store<T>(void* dst, size_t stride) {                                             \
    __asm__ volatile("{tilestored\t%%tmm" #T ", (%0,%1,1)|tilestored\t[%0+%1*1], %%tmm" #T "}"               \
                     ::"r"(dst), "r"(static_cast<uint64_t>(stride)) : "memory");                             \
  }
#define ATTNKIT_AMX_DPBUSD(C, A, B) \
  template <>                      \
  inline void HardwareTiles::dpbusd<C, A, B>() { _tile_dpbusd(C, A, B); }
ATTNKIT_AMX_TILE(0)
ATTNKIT_AMX_TILE(1)
ATTNKIT_AMX_TILE(2)
ATTNKIT_AMX_TILE(3)
ATTNKIT_AMX_TILE(4)
ATTNKIT_AMX_TILE(5)
ATTNKIT_AMX_TILE(6)
ATTNKIT_AMX_DPBUSD(0, 4, 5)
ATTNKIT_AMX_DPBUSD(1, 4, 6)
ATTNKIT_AMX_DPBUSD(2, 4, 5)
ATTNKIT_AMX_DPBUSD(3, 4, 6)
#undef ATTNKIT_AMX_TILE
#undef ATTNKIT_AMX_DPBUSD

// The same operations on a thread's array of tiles, as the Intel SDM defines them.
struct EmulatedTiles {
  using Tile = uint8_t[kTileRows][64];
  static Tile* tiles() {
    thread_local Tile file[7];
    return file;
  }
  static void configure() {}
  static void release() {}
  template <int T>
  static void zero() { std::memset(tiles()[T], 0, sizeof(Tile)); }
  template <int T>
  static void load(const void* src, size_t stride) {
    const uint8_t* rows = static_cast<const uint8_t*>(src);
    for (size_t r = 0; r < kTileRows; ++r) std::memcpy(tiles()[T][r], rows + r * stride, 64);
  }
  template <int T>
  static void store(void* dst, size_t stride) {
    for (size_t r = 0; r < kTileRows; ++r) std::memcpy(static_cast<uint8_t*>(dst) + r * stride, tiles()[T][r], 64);
  }
  template <int C, int A, int B>
  static void dpbusd() {
    Tile& c = tiles()[C];
    const Tile &a = tiles()[A], &b = tiles()[B];
    for (size_t m = 0; m < kTileRows; ++m) {
      for (size_t n = 0; n < 16; ++n) {
        uint32_t acc;
        std::memcpy(&acc, c[m] + 4 * n, 4);
        for (size_t k = 0; k < 16; ++k)
          for (size_t t = 0; t < 4; ++t) acc += uint32_t(int32_t(a[m][4 * k + t]) * int8_t(b[k][4 * n + t]));
        std::memcpy(c[m] + 4 * n, &acc, 4);
      }
    }
  }
};

// Rows of 16 through the tiles, the rows after the last 16 through avx512vnni's 4-row kernel. K is padded to the
// tile depth (zero A bytes, b' = 0 groups), which leaves every sum as it was.
template <typename Tiles>
struct AmxGemm : Dot4Gemm<kMr, kNr, false, MicroVnni512, PackVnni512, kTileDepth> {
  using Base = Dot4Gemm<kMr, kNr, false, MicroVnni512, PackVnni512, kTileDepth>;

  // Raw sums of 16 rows of A (row stride kp) against one strip, row r at sums + r * kNr in the packer's order.
  static void tile_rows16(const uint8_t* a, size_t kp, const int8_t* strip, int32_t* sums) {
    Tiles::template zero<0>();
    Tiles::template zero<1>();
    Tiles::template zero<2>();
    Tiles::template zero<3>();
    constexpr size_t kGroupBytes = 4 * kNr;  // one 4-row group of the strip: 4 vnni registers of 64 bytes
    for (size_t k0 = 0; k0 < kp; k0 += kTileDepth) {
      const int8_t* b = strip + k0 / 4 * kGroupBytes;
      Tiles::template load<4>(a + k0, kp);
      Tiles::template load<5>(b, kGroupBytes);
      Tiles::template load<6>(b + 64, kGroupBytes);
      Tiles::template dpbusd<0, 4, 5>();
      Tiles::template load<5>(b + 128, kGroupBytes);
      Tiles::template dpbusd<1, 4, 6>();
      Tiles::template load<6>(b + 192, kGroupBytes);
      Tiles::template dpbusd<2, 4, 5>();
      Tiles::template dpbusd<3, 4, 6>();
    }
    constexpr size_t kRowBytes = kNr * sizeof(int32_t);
    Tiles::template store<0>(sums, kRowBytes);
    Tiles::template store<1>(sums + 16, kRowBytes);
    Tiles::template store<2>(sums + 32, kRowBytes);
    Tiles::template store<3>(sums + 48, kRowBytes);
  }

  static void compute(size_t M, size_t N, size_t K, size_t n0, size_t n1, const void* packed_a, int32_t a_zp,
                      const void* packed_b, int32_t* C, size_t ldc, const GemmU8X8Dequant* dequant) {
    const size_t kp = Base::kpad(K), full = M / kTileRows * kTileRows;
    const uint8_t* a = static_cast<const uint8_t*>(packed_a);
    const int32_t* rowsum = Base::row_sums(M, K, packed_a);
    alignas(64) int32_t sums[kTileRows * kNr];
    Dot4Epilogue<kNr> ep;
    if (full > 0) Tiles::configure();
    for (size_t s = n0 / kNr; s * kNr < n1 && full > 0; ++s) {
      const auto* strip = reinterpret_cast<const int8_t*>(Base::strip_epilogue(N, K, s, packed_b, a_zp, dequant, &ep));
      const size_t nr = N - s * kNr < kNr ? N - s * kNr : kNr;
      for (size_t m0 = 0; m0 < full; m0 += kTileRows) {
        tile_rows16(a + m0 * kp, kp, strip, sums);
        int32_t* dst = C + m0 * ldc + s * kNr;
        for (size_t r = 0; r < kTileRows; ++r) {
          const int32_t* row = sums + r * kNr;
          const __m512i x0 = _mm512_load_si512(row), x1 = _mm512_load_si512(row + 16);
          const __m512i x2 = _mm512_load_si512(row + 32), x3 = _mm512_load_si512(row + 48);
          if (nr == kNr) {
            store_finished_row(x0, x1, x2, x3, ep, rowsum[m0 + r], dst + r * ldc);
          } else {
            __m512i y[4];
            to_column_order(x0, x1, x2, x3, y);
            for (size_t i = 0; i < 4; ++i) _mm512_store_si512(sums + r * kNr + 16 * i, y[i]);
          }
        }
        if (nr < kNr) Base::store_tile(kTileRows, sums, nr, ep, rowsum + m0, dst, ldc);
      }
    }
    if (full > 0) Tiles::release();
    Base::compute_rows(full, M, N, K, n0, n1, packed_a, a_zp, packed_b, C, ldc, dequant);
  }
};

}  // namespace

template <class Tiles>
using AmxEntry = GemmEntry<AmxGemm<Tiles>, X86Direct<DirectAvx512>>;
extern const GemmU8X8Kernels kGemmU8X8_amx = AmxEntry<HardwareTiles>::kernels("amx", kNr);
extern const GemmU8X8Kernels kGemmU8X8_amx_emulated = AmxEntry<EmulatedTiles>::kernels("amx-emulated", kNr);

}  // namespace attnkit

// attnkit fuzz targets: libFuzzer's entry point, linked into every target and its replay driver, so each target
// defines only run_one_input (fuzz_support.h).
#include <cstddef>
#include <cstdint>

#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  attnkit::fuzz::run_one_input(data, size);
  return 0;
}

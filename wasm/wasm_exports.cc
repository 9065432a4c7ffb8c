// attnkit wasm glue: what the JS marshaller (js/marshal.js) relies on beyond the C ABI itself.
// The marshaller writes attnkit_tensor records by hand into wasm memory, so their wasm32 layout is
// pinned here at compile time; a change to the struct breaks this build instead of corrupting calls.
#include <cstddef>

#include "attnkit/attnkit.h"
#include "common/thread_pool.h"

static_assert(sizeof(void*) == 4, "js/marshal.js assumes wasm32 pointers");
static_assert(offsetof(attnkit_tensor, name) == 0, "js/marshal.js: attnkit_tensor.name at 0");
static_assert(offsetof(attnkit_tensor, dtype) == 4, "js/marshal.js: attnkit_tensor.dtype at 4");
static_assert(offsetof(attnkit_tensor, rank) == 8, "js/marshal.js: attnkit_tensor.rank at 8");
static_assert(offsetof(attnkit_tensor, shape) == 12, "js/marshal.js: attnkit_tensor.shape at 12");
static_assert(offsetof(attnkit_tensor, data) == 16, "js/marshal.js: attnkit_tensor.data at 16");
static_assert(sizeof(attnkit_tensor) == 20, "js/marshal.js: attnkit_tensor records are 20 bytes");

extern "C" {

// The most threads one call may use: the pre-spawned pthread pool (1 without threads), since a thread beyond it
// would deadlock the caller. The loader asks Emscripten for a pool of init()'s thread count (at most the build's
// capacity, ATTNKIT_WASM_MAX_THREADS) and sets the limit to it.
int attnkit_wasm_max_threads(void) { return attnkit::thread_limit(); }
int attnkit_wasm_set_max_threads(int threads) { return attnkit::set_thread_limit(threads); }
int attnkit_wasm_thread_capacity(void) { return attnkit::thread_capacity(); }

}  // extern "C"

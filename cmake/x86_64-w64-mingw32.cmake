# attnkit: cross toolchain for the Windows test build (mingw-w64 g++, posix threads), run under Wine.
# ctest runs the test binary through wine64 (Debian keeps it in /usr/lib/wine), so `ctest` works as on a native
# host.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(CMAKE_C_COMPILER x86_64-w64-mingw32-gcc-posix)
set(CMAKE_CXX_COMPILER x86_64-w64-mingw32-g++-posix)
set(CMAKE_RC_COMPILER x86_64-w64-mingw32-windres)
set(CMAKE_FIND_ROOT_PATH /usr/x86_64-w64-mingw32)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
# Static runtime: the .exe then runs under Wine without the MinGW DLLs on its path.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")
find_program(ATTNKIT_WINE64 NAMES wine64 PATHS /usr/lib/wine)
set(CMAKE_CROSSCOMPILING_EMULATOR ${ATTNKIT_WINE64})

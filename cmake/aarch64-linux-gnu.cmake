# Cross-compiling for 64-bit Arm Linux with Debian's cross toolchain
# (gcc-aarch64-linux-gnu) and multiarch arm64 -dev packages (libcjson-dev:arm64,
# libcmocka-dev:arm64, ...). Tests run through qemu-user when it is installed.
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# pkg-config must see the arm64 .pc files only.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
# Never pick up the build machine's x86 libraries (the bench peers).
set(CMAKE_IGNORE_PATH /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu /usr/include/x86_64-linux-gnu)
find_program(CQ_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64)
if(CQ_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${CQ_QEMU_AARCH64} -L /usr/aarch64-linux-gnu)
endif()

#!/usr/bin/env bash
# Installs the build into a temporary prefix and builds the quick-start program against
# it twice: with pkg-config and with CMake's find_package(symm). Then runs it on 3 PEs.
set -euo pipefail
BUILD=$1 SRC=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$BUILD" --prefix "$tmp/prefix" >/dev/null
libdir=$(ls -d "$tmp"/prefix/lib*/pkgconfig | head -n1 | xargs dirname)
PKG_CONFIG_PATH="$libdir/pkgconfig" cc "$SRC/hello.c" -o "$tmp/hello_pc" \
  $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs symm) -Wl,-rpath,"$libdir"
mkdir -p "$tmp/proj"
cat >"$tmp/proj/CMakeLists.txt" <<EOC
cmake_minimum_required(VERSION 3.20)
project(hello C)
find_package(symm REQUIRED)
add_executable(hello_cmake $SRC/hello.c)
target_link_libraries(hello_cmake PRIVATE symm::symm)
EOC
cmake -S "$tmp/proj" -B "$tmp/proj/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DCMAKE_BUILD_RPATH="$libdir" >/dev/null
cmake --build "$tmp/proj/build" >/dev/null
"$tmp/prefix/bin/symmrun" -n 3 "$tmp/hello_pc"
"$tmp/prefix/bin/symmrun" -n 3 "$tmp/proj/build/hello_cmake"
echo "install: pkg-config and find_package(symm) both build and run"

#!/bin/sh
# install_consumer.sh - unico as its users get it: `cmake --install` into a
# scratch prefix, then tests/consumer/ copied out of the tree and built
# against that prefix only, three ways, each run (an LMDB store, a schema,
# an insert, a conflicting insert that must be UNICO_ECONFLICT):
#   pc      cc consumer.c $(pkg-config --cflags --libs unico): libunico.so
#   cmake   find_package(unico CONFIG), linking unico::unico: libunico.so
#   static  libunico.a with what unico.pc says it needs (Libs.private:
#           the libraries it links)
# The shared builds must load libunico.so.MAJOR from the prefix. Any file
# missing from the install, or a broken unico.pc or CMake package, fails it.
# Usage: install_consumer.sh BUILD_DIR WORK_DIR CC SOURCE_DIR LIBDIR VERSION
#   (LIBDIR: CMAKE_INSTALL_LIBDIR; VERSION: the project's, X.Y.Z)
# Extra compiler and linker flags for the consumer (the sanitizer builds'):
# UNICO_CONSUMER_FLAGS.
set -eu
build=$1 work=$2 cc=$3 src=$4 libdir=$5 version=$6
flags=${UNICO_CONSUMER_FLAGS:-}
major=${version%%.*}

step() { echo "== install_consumer: $*"; }
die() { echo "install_consumer: FAILED: $*" >&2; exit 1; }

rm -rf "$work"
mkdir -p "$work/tmp"
prefix=$work/prefix
lib=$prefix/$libdir

step "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log" >&2; die "cmake --install"; }
for f in bin/unico "$libdir/libunico.so" "$libdir/libunico.so.$major" \
         "$libdir/libunico.so.$version" "$libdir/libunico.a" \
         include/unico.h include/unico_errors.h "$libdir/pkgconfig/unico.pc" \
         "$libdir/cmake/unico/unicoConfig.cmake" \
         "$libdir/cmake/unico/unicoConfigVersion.cmake" \
         share/unico/examples/schema.cql; do
  [ -e "$prefix/$f" ] || die "not installed: $f"
done
soname=$(readelf -d "$lib/libunico.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libunico.so.$major" ] || die "soname of libunico.so is '$soname', not libunico.so.$major"
v=$("$prefix/bin/unico" --version) || die "bin/unico --version"
case "$v" in *"$version"*) ;; *) die "bin/unico --version: '$v', not $version" ;; esac

# out of the tree: nothing but the prefix to build against
mkdir -p "$work/src"
cp "$src/consumer.c" "$src/CMakeLists.txt" "$work/src/"

# run PROGRAM: it must pass, and (shared) load libunico.so.MAJOR from the prefix
run() { # program, shared|static
  if [ "$2" = shared ]; then
    readelf -d "$1" | grep -q "(NEEDED).*\[libunico\.so\.$major\]" ||
      die "$1 does not link libunico.so.$major"
    LD_LIBRARY_PATH=$lib ldd "$1" | grep -q "libunico\.so\.$major => $lib/libunico\.so\.$major " ||
      die "$1 does not load $lib/libunico.so.$major: $(LD_LIBRARY_PATH=$lib ldd "$1")"
  elif readelf -d "$1" | grep -q "(NEEDED).*\[libunico\.so"; then
    die "$1 links libunico.so, not libunico.a"
  fi
  LD_LIBRARY_PATH=$lib "$1" "$work/tmp" || die "$1 failed"
}

step "pkg-config"
export PKG_CONFIG_PATH="$lib/pkgconfig"
pkg-config --validate unico || die "pkg-config --validate unico"
[ "$(pkg-config --variable=pcfiledir unico)" = "$lib/pkgconfig" ] ||
  die "pkg-config finds unico.pc in $(pkg-config --variable=pcfiledir unico), not $lib/pkgconfig"
[ "$(pkg-config --modversion unico)" = "$version" ] ||
  die "pkg-config --modversion unico: $(pkg-config --modversion unico), not $version"
# (static: unico's own flags with Libs.private, which names the libraries
# unico links; unico.pc requires no module, so nothing of theirs comes in:
# Debian's libcurl.pc names static libraries that libcurl4-openssl-dev does
# not install)
cflags=$(pkg-config --cflags unico) && libs=$(pkg-config --libs unico) &&
  slibs=$(pkg-config --static --libs unico) ||
  die "pkg-config unico"
[ -z "$(pkg-config --print-requires --print-requires-private unico)" ] ||
  die "unico.pc requires modules, whose Cflags come into pkg-config --cflags unico"
echo "cflags: $cflags"
echo "libs: $libs"
echo "static libs: $slibs"
# unico.h includes no header of the libraries unico links: --cflags is
# unico's include directory alone (none of their -D or -I), and --libs is
# libunico alone (they are linked into libunico.so)
# shellcheck disable=SC2086 # (word splitting of the flags is meant)
set -- $cflags
[ "$#" -eq 1 ] && [ "$1" = "-I$prefix/include" ] ||
  die "pkg-config --cflags unico is '$cflags', not -I$prefix/include alone"
# shellcheck disable=SC2086
set -- $libs
[ "$#" -eq 2 ] && [ "$1" = "-L$lib" ] && [ "$2" = "-lunico" ] ||
  die "pkg-config --libs unico is '$libs', not -L$lib -lunico"
# shellcheck disable=SC2086 # (word splitting of the flags is meant)
"$cc" -std=c11 -Wall -Wextra -Werror -pedantic $flags -o "$work/consumer_pc" \
  "$work/src/consumer.c" $cflags $libs || die "build with pkg-config"
run "$work/consumer_pc" shared

step "pkg-config --static (libunico.a)"
# the same flags, but libunico.a in place of -lunico
slibs_a=$(printf '%s\n' "$slibs" | sed 's/\(^\| \)-lunico\( \|$\)/\1-l:libunico.a\2/')
# shellcheck disable=SC2086
"$cc" -std=c11 -Wall -Wextra -Werror -pedantic $flags -o "$work/consumer_static" \
  "$work/src/consumer.c" $cflags $slibs_a || die "static build with pkg-config --static"
run "$work/consumer_static" static

step "cmake find_package(unico CONFIG)"
cmake -S "$work/src" -B "$work/cmake-build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" \
  -DCMAKE_PREFIX_PATH="$prefix" -DEXPECT_PREFIX="$prefix" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF >"$work/cmake.log" 2>&1 ||
  { cat "$work/cmake.log" >&2; die "cmake configure with find_package(unico)"; }
cmake --build "$work/cmake-build" >"$work/cmake-build.log" 2>&1 ||
  { cat "$work/cmake-build.log" >&2; die "cmake build with unico::unico"; }
run "$work/cmake-build/consumer" shared

echo "install_consumer: ok"

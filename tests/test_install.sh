#!/bin/bash
# test_install.sh -- tensorscope as installed: `cmake --install` into a
# temporary prefix, then a user program built against it with pkg-config
# (shared, and static with libarchive's private dependencies), again after
# the whole prefix is moved elsewhere (the .pc is relocatable), with the
# build tree's own .pc, and with find_package(tensorscope) in a CMake
# project; the installed CLI trains from an unrelated directory on the MNIST
# copy it installed. Every check prints `ok ...` or `FAIL ...`.
set -u

BUILD=${TS_BUILD_DIR:?set TS_BUILD_DIR to the CMake build directory}
SRC=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
APP=$SRC/tests/support/install_app

. "$(dirname "$0")/support/cli_checks.sh"

T=$(mktemp -d "${TMPDIR:-/tmp}/ts_install.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1

cmake --install "$BUILD" --prefix "$T/prefix" > install.log 2>&1
check "cmake --install into a fresh prefix" test -f "$T/prefix/lib/pkgconfig/tensorscope.pc" || { show install.log; }
check "the .pc finds its prefix from where it lies" grep -qx 'prefix=${pcfiledir}/../..' "$T/prefix/lib/pkgconfig/tensorscope.pc"

# a sanitizer build's library needs its runtime in the programs linked to it
SAN=""
grep -q '^TS_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null && SAN="-fsanitize=address,undefined"
grep -q '^TS_TSAN:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null && SAN="-fsanitize=thread"

want="tensorscope $(sed -n 's/^#define TS_VERSION_STRING "\(.*\)"/\1/p' "$SRC/include/tensorscope.h"): 17 tensors"
build_pc() { # build_pc NAME PKG_CONFIG_DIR [static]: compile and run the app
    local name=$1 pcdir=$2 libs
    if [ "${3:-}" = static ]; then # libtensorscope.a, the system libraries shared
        libs="$(PKG_CONFIG_PATH=$pcdir pkg-config --libs-only-L tensorscope) -Wl,-Bstatic -ltensorscope -Wl,-Bdynamic
              $(PKG_CONFIG_PATH=$pcdir pkg-config --static --libs tensorscope | sed 's/-ltensorscope / /')"
    else
        libs=$(PKG_CONFIG_PATH=$pcdir pkg-config --libs tensorscope)
    fi
    # shellcheck disable=SC2046,SC2086
    cc $SAN "$APP/app.c" -o "$name" $(PKG_CONFIG_PATH=$pcdir pkg-config --cflags tensorscope) $libs > "$name.log" 2>&1 &&
        LD_LIBRARY_PATH=$(PKG_CONFIG_PATH=$pcdir pkg-config --variable=libdir tensorscope) "./$name" > "$name.out" 2>> "$name.log" &&
        [ "$(cat "$name.out")" = "$want" ]
}
check "pkg-config, shared: the app builds and runs ('$want')" build_pc app_shared "$T/prefix/lib/pkgconfig" || show app_shared.log
check "pkg-config --static: libtensorscope.a with libarchive's private dependencies" build_pc app_static "$T/prefix/lib/pkgconfig" static ||
    show app_static.log
check "the static app does not need libtensorscope.so" eval '! ldd app_static | grep -q libtensorscope'
mv "$T/prefix" "$T/moved"
check "the prefix moved elsewhere: pkg-config still builds a working app" build_pc app_moved "$T/moved/lib/pkgconfig" || show app_moved.log
check "the build tree's own .pc ($BUILD/pkgconfig)" build_pc app_build "$BUILD/pkgconfig" || show app_build.log

if cmake -S "$APP" -B cm -DCMAKE_PREFIX_PATH="$T/moved" -DCMAKE_C_FLAGS="$SAN" > cm.log 2>&1 && cmake --build cm -j 2 >> cm.log 2>&1 &&
    [ "$(LD_LIBRARY_PATH=$T/moved/lib cm/app_shared)" = "$want" ] && [ "$(cm/app_static)" = "$want" ]; then
    ok "find_package(tensorscope): tensorscope::tensorscope and tensorscope::tensorscope_static build and run"
else
    fail "find_package(tensorscope)"
    show cm.log 12
fi

mkdir -p elsewhere && cd elsewhere || exit 1
"$T/moved/bin/tensorscope" train --quiet --batch-size 1000 --max-steps 2 > train.out 2> train.err
rc=$?
check "the installed CLI trains from an unrelated directory on its installed MNIST" \
    eval '[ $rc -eq 0 ] && grep -q "^trained 2 runs" train.out && [ -f "$T/moved/share/tensorscope/mnist/t10k-images-idx3-ubyte.gz" ]' || show train.err
cd "$T" || exit 1

finish

# features.cmake -- the optional features
# (docs/design.md#builds-and-optional-features). The core needs a
# C11 compiler, pthreads, zlib and a CBLAS; each feature below is built when
# its library is found and its TS_WITH_<LIB> option is ON (the default):
# -DTS_WITH_CAIRO=OFF and the like leave it out even where it is installed.
# A feature left out compiles its *_none.c stand-in in place of its sources:
# every call of it fails with TS_ERR_UNSUPPORTED naming the package to
# install (src/core/features.c), and tests that need it skip.
#
# In:  TS_SRCS (every .c under src/).
# Out: TS_SRCS with the stand-ins swapped in, TS_FEATURE_DEPS (link
#      targets), TS_FEATURES (names of the features built, as
#      ts_has_feature spells them), TS_HAVE_PROTOBUFC, MPI_C_FOUND,
#      TS_PC_REQUIRES and TS_CONFIG_DEPS (for the installed .pc and the
#      CMake package), and one configure line listing them all.

option(TS_WITH_CAIRO "Plots (cairo), when found" ON)
option(TS_WITH_PROTOBUFC "ONNX import and TensorBoard event files (protobuf-c and protoc-c), when found" ON)
option(TS_WITH_ARCHIVE ".npz files and the debug bundle (libarchive), when found" ON)
option(TS_WITH_UNWIND "Crash stacks through libunwind (else glibc's backtrace()), when found" ON)
if(DEFINED TS_MPI) # the option's earlier name, taken once
  set(TS_WITH_MPI ${TS_MPI} CACHE BOOL "" FORCE)
  unset(TS_MPI CACHE)
endif()
option(TS_WITH_MPI "Replicas and pipeline stages (MPI), when found" ON)

set(TS_ALL_FEATURES plots onnx tensorboard npz debug-bundle unwind mpi cuda) # as ts_has_feature spells them
set(TS_FEATURE_DEPS)
set(TS_FEATURES)
set(TS_FEATURE_DEFS)
set(TS_PC_REQUIRES "zlib openblas")
set(TS_CONFIG_DEPS "ZLIB:zlib OPENBLAS:openblas")
set(TS_FEATURE_LINE)
set(TS_FEATURE_MISSING_PKGS)

# ts_feature(VAR OPTION MODULE DEBPKGS LABEL): finds pkg-config MODULE into
# PkgConfig::VAR when OPTION is ON (and ts_also_VAR, when defined, is true:
# a program the feature also needs); sets TS_HAVE_VAR; adds LABEL's state to
# the configure line and, when not found, DEBPKGS to the install hint.
macro(ts_feature var opt module debpkgs label)
  set(TS_HAVE_${var} OFF)
  if(${opt})
    pkg_check_modules(${var} QUIET IMPORTED_TARGET ${module})
    if(${var}_FOUND AND (NOT DEFINED ts_also_${var} OR ts_also_${var}))
      set(TS_HAVE_${var} ON)
      list(APPEND TS_FEATURE_DEPS PkgConfig::${var})
      list(APPEND TS_FEATURE_DEFS TS_HAVE_${var}=1)
      string(APPEND TS_PC_REQUIRES " ${module}")
      string(APPEND TS_CONFIG_DEPS " ${var}:${module}")
      list(APPEND TS_FEATURE_LINE "${label} yes")
    else()
      list(APPEND TS_FEATURE_LINE "${label} no")
      list(APPEND TS_FEATURE_MISSING_PKGS ${debpkgs})
    endif()
  else()
    list(APPEND TS_FEATURE_LINE "${label} off")
  endif()
endmacro()

# ts_feature_sources(HAVE REAL... ): without HAVE, each src/REAL.c gives
# way to src/REAL_none.c; with it, the stand-ins are dropped.
function(ts_feature_sources have)
  foreach(base ${ARGN})
    if(${have})
      list(REMOVE_ITEM TS_SRCS ${CMAKE_SOURCE_DIR}/src/${base}_none.c)
    else()
      list(REMOVE_ITEM TS_SRCS ${CMAKE_SOURCE_DIR}/src/${base}.c)
    endif()
  endforeach()
  set(TS_SRCS ${TS_SRCS} PARENT_SCOPE)
endfunction()

ts_feature(CAIRO TS_WITH_CAIRO cairo libcairo2-dev "plots (cairo)")
if(TS_WITH_PROTOBUFC) # the messages are compiled with protoc-c: the library alone is not enough
  find_program(PROTOC_C protoc-c)
  set(ts_also_PROTOBUFC ${PROTOC_C})
endif()
ts_feature(PROTOBUFC TS_WITH_PROTOBUFC libprotobuf-c "libprotobuf-c-dev;protobuf-c-compiler"
           "ONNX import + TensorBoard (protobuf-c)")
ts_feature(ARCHIVE TS_WITH_ARCHIVE libarchive libarchive-dev ".npz (libarchive)")
# bundle.c archives with libarchive; it reports cairo's and protobuf-c's
# versions where they are built
set(TS_HAVE_BUNDLE ${TS_HAVE_ARCHIVE})
if(TS_HAVE_BUNDLE)
  list(APPEND TS_FEATURE_DEFS TS_HAVE_BUNDLE=1)
  list(APPEND TS_FEATURE_LINE "debug bundle (libarchive) yes")
else()
  list(APPEND TS_FEATURE_LINE "debug bundle (libarchive) no")
endif()

ts_feature(UNWIND TS_WITH_UNWIND libunwind libunwind-dev "crash stacks (libunwind)")

# MPI (replicas and pipeline stages, src/parallel/): src/parallel/mpi.c itself
# tests TS_HAVE_MPI
if(TS_WITH_MPI)
  find_package(MPI COMPONENTS C QUIET)
endif()
if(MPI_C_FOUND)
  list(APPEND TS_FEATURE_DEPS MPI::MPI_C)
  list(APPEND TS_FEATURE_DEFS TS_HAVE_MPI=1)
  list(APPEND TS_FEATURE_LINE "MPI yes")
elseif(TS_WITH_MPI)
  list(APPEND TS_FEATURE_LINE "MPI no")
  list(APPEND TS_FEATURE_MISSING_PKGS libopenmpi-dev openmpi-bin)
else()
  list(APPEND TS_FEATURE_LINE "MPI off")
endif()
# CUDA (src/backend/cuda/, docs/design.md#devices): the CUDA language when nvcc is
# found, code for sm_90 (H100, H200) and PTX for newer GPUs, cuBLAS for the
# GEMMs. Without it, src/backend/cuda_none.c refuses the device.
option(TS_CUDA "The CUDA backend (nvcc, cuBLAS), when found" ON)
if(TS_SANITIZE OR TS_TSAN OR TS_FUZZ) # host sanitizers; the GPU's is compute-sanitizer (scripts/gpu-check.sh)
  set(TS_CUDA OFF)
endif()
set(TS_HAVE_CUDA OFF)
set(TS_CUDA_SRCS)
if(TS_CUDA)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90) # sm_90 code and compute_90 PTX
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit QUIET)
    if(CUDAToolkit_FOUND AND TARGET CUDA::cublas) # its headers here; the library is loaded at run time
      set(TS_HAVE_CUDA ON)
    endif()
  endif()
endif()
if(TS_HAVE_CUDA)
  file(GLOB TS_CUDA_SRCS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/backend/cuda/*.cu)
  set_source_files_properties(${CMAKE_SOURCE_DIR}/src/backend/cuda/cuda.cu PROPERTIES COMPILE_DEFINITIONS
    "TS_CUDA_LIBDIR=\"${CUDAToolkit_LIBRARY_DIR}\"")
  list(APPEND TS_FEATURE_DEPS CUDA::cudart ${CMAKE_DL_LIBS}) # cuBLAS is loaded at the GPU's first use (dlopen)
  list(APPEND TS_FEATURE_DEFS TS_HAVE_CUDA=1)
  list(APPEND TS_FEATURE_LINE "CUDA yes (${CMAKE_CUDA_COMPILER_VERSION}, sm_${CMAKE_CUDA_ARCHITECTURES})")
elseif(TS_CUDA)
  list(APPEND TS_FEATURE_LINE "CUDA no (nvcc and cuBLAS not found)")
else()
  list(APPEND TS_FEATURE_LINE "CUDA off")
endif()

ts_feature_sources(TS_HAVE_CAIRO io/plot)
ts_feature_sources(TS_HAVE_PROTOBUFC io/tb_writer diag/onnx_export import/onnx import/onnx_rnn import/onnx_torch
                   import/onnx_fuse import/onnx_values import/onnx_data import/onnx_elementwise import/onnx_matmul
                   import/onnx_conv import/onnx_norm import/onnx_shape import/onnx_types import/onnx_gather
                   import/onnx_reduce import/onnx_loss import/onnx_sequence import/onnx_resize import/onnx_control)
ts_feature_sources(TS_HAVE_ARCHIVE io/npz)
ts_feature_sources(TS_HAVE_BUNDLE diag/bundle)
ts_feature_sources(TS_HAVE_UNWIND diag/unwind)
ts_feature_sources(TS_HAVE_CUDA backend/cuda)
set_source_files_properties(${CMAKE_SOURCE_DIR}/src/core/features.c ${CMAKE_SOURCE_DIR}/src/diag/bundle.c PROPERTIES COMPILE_DEFINITIONS "${TS_FEATURE_DEFS}")

foreach(pair CAIRO:plots PROTOBUFC:onnx PROTOBUFC:tensorboard ARCHIVE:npz BUNDLE:debug-bundle UNWIND:unwind)
  string(REPLACE ":" ";" pair ${pair})
  list(GET pair 0 var)
  list(GET pair 1 name)
  if(TS_HAVE_${var})
    list(APPEND TS_FEATURES ${name})
  endif()
endforeach()
if(MPI_C_FOUND)
  list(APPEND TS_FEATURES mpi)
endif()
if(TS_HAVE_CUDA)
  list(APPEND TS_FEATURES cuda)
endif()

list(JOIN TS_FEATURES " " TS_FEATURES_SPACED) # for the tests' environment

list(JOIN TS_FEATURE_LINE ", " _line)
message(STATUS "tensorscope features: ${_line}")
if(TS_FEATURE_MISSING_PKGS)
  list(REMOVE_DUPLICATES TS_FEATURE_MISSING_PKGS)
  list(JOIN TS_FEATURE_MISSING_PKGS " " _pkgs)
  message(STATUS "tensorscope: for the features marked no: apt-get install ${_pkgs} (or scripts/install-deps.sh), then reconfigure")
endif()

# ts_missing_features(SRC OUT): the features a test or fuzz target needs,
# from a line `needs: FEATURE...` in its source (in a comment: `/* needs:
# npz */`, `# needs: plots tensorboard`), that this build lacks.
function(ts_missing_features src out)
  file(STRINGS ${src} lines REGEX "^(/\\*|//|#) needs: " LIMIT_COUNT 1)
  set(missing)
  if(lines)
    string(REGEX REPLACE "^(/\\*|//|#) needs: ([-a-z ]+).*" "\\2" wanted "${lines}")
    string(REPLACE " " ";" wanted "${wanted}")
    foreach(f ${wanted})
      if(NOT f IN_LIST TS_ALL_FEATURES)
        message(FATAL_ERROR "${src}: 'needs: ${f}' names no feature (the features: ${TS_ALL_FEATURES})")
      endif()
      if(NOT f IN_LIST TS_FEATURES)
        list(APPEND missing ${f})
      endif()
    endforeach()
  endif()
  set(${out} "${missing}" PARENT_SCOPE)
endfunction()

# ts_test_needs(SRC NAME OUT): a test that needs a feature this build lacks
# is registered as one that skips (ctest's "Skipped", exit 77) saying which;
# OUT is then true and the caller builds nothing for it.
function(ts_test_needs src name out)
  ts_missing_features(${src} missing)
  if(missing)
    list(JOIN missing " " m)
    add_test(NAME ${name} COMMAND sh -c "echo '${name} skipped: this build has no ${m} (see the features line of cmake)'; exit 77")
    set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77)
    set(${out} TRUE PARENT_SCOPE)
  else()
    set(${out} FALSE PARENT_SCOPE)
  endif()
endfunction()

# ts_test_labels(SRC NAME): ctest labels from a line `labels: gpu` in the
# test's source (ctest -L gpu runs the tests that use a GPU; without one
# they exit 77, ctest's skip).
function(ts_test_labels src name)
  file(STRINGS ${src} lines REGEX "^(/\\*|//|#) labels: " LIMIT_COUNT 1)
  if(lines)
    string(REGEX REPLACE "^(/\\*|//|#) labels: ([-a-z ]+).*" "\\2" labels "${lines}")
    string(STRIP "${labels}" labels)
    string(REPLACE " " ";" labels "${labels}")
    set_tests_properties(${name} PROPERTIES LABELS "${labels}")
  endif()
endfunction()

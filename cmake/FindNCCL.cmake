# FindNCCL: NVIDIA's collective communication library.
# Where NCCL_ROOT is set (a CMake variable or the environment), looks there
# only, so that a header and a library from two different NCCLs are never
# mixed; otherwise next to the CUDA toolkit, then the system paths.
# Accepts the unversioned libnccl.so or, where there is none, libnccl.so.2:
# NVIDIA's Python wheel (pip install nvidia-nccl-cu13) ships only the latter,
# with its headers, under site-packages/nvidia/nccl/{include,lib}, so
#   NCCL_ROOT=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])')
# Defines NCCL_FOUND, NCCL_VERSION and the imported target NCCL::NCCL.
set(_nccl_names nccl libnccl.so.2)
set(_nccl_roots ${NCCL_ROOT})
if(NOT _nccl_roots AND DEFINED ENV{NCCL_ROOT} AND NOT "$ENV{NCCL_ROOT}" STREQUAL "")
  set(_nccl_roots "$ENV{NCCL_ROOT}")
endif()
if(_nccl_roots)
  find_path(NCCL_INCLUDE_DIR nccl.h PATHS ${_nccl_roots} PATH_SUFFIXES include NO_DEFAULT_PATH)
  find_library(NCCL_LIBRARY NAMES ${_nccl_names} PATHS ${_nccl_roots} PATH_SUFFIXES lib lib64 NO_DEFAULT_PATH)
else()
  find_path(NCCL_INCLUDE_DIR nccl.h
    HINTS ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}
    PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY NAMES ${_nccl_names}
    HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}
    PATH_SUFFIXES lib lib64)
endif()
if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_version_lines REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) ")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX REPLACE ".*#define NCCL_${_part} ([0-9]+).*" "\\1" NCCL_${_part} "${_nccl_version_lines}")
  endforeach()
  set(NCCL_VERSION "${NCCL_MAJOR}.${NCCL_MINOR}.${NCCL_PATCH}")
endif()
set(_nccl_failure "")
if(_nccl_roots)
  set(_nccl_failure "looked only in NCCL_ROOT (${_nccl_roots}) for include/nccl.h and lib/libnccl.so or lib/libnccl.so.2")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR VERSION_VAR NCCL_VERSION
  REASON_FAILURE_MESSAGE "${_nccl_failure}")
if(NCCL_FOUND AND NOT TARGET NCCL::NCCL)
  add_library(NCCL::NCCL UNKNOWN IMPORTED)
  set_target_properties(NCCL::NCCL PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
unset(_nccl_names)
unset(_nccl_roots)
unset(_nccl_failure)

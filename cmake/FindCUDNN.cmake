# FindCUDNN: NVIDIA's cuDNN, for the CUDA backend's convolutions
# (include/lockstep/backend/cuda/conv.cuh). Optional: without it lockstep::cuda
# still builds, and a Conv2D model on GPUs is a compile-time sentence.
# Where CUDNN_ROOT is set (a CMake variable or the environment), looks there
# only, so that a header and a library from two different cuDNNs are never
# mixed; otherwise next to the CUDA toolkit, then the system paths.
# Accepts the unversioned libcudnn.so or, where there is none, libcudnn.so.9
# (or .8): NVIDIA's Python wheel (pip install nvidia-cudnn-cu13) ships only
# the versioned name, with its headers, under site-packages/nvidia/cudnn/{include,lib}, so
#   CUDNN_ROOT=$(python3 -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])')
# (scripts/gpu-check.sh does this). The wheel's libcudnn.so.9 finds the
# libraries it loads at run time (libcudnn_cnn.so.9, ...) beside itself.
# Defines CUDNN_FOUND, CUDNN_VERSION and the imported target CUDNN::CUDNN.
set(_cudnn_names cudnn libcudnn.so.9 libcudnn.so.8)
set(_cudnn_roots ${CUDNN_ROOT})
if(NOT _cudnn_roots AND DEFINED ENV{CUDNN_ROOT} AND NOT "$ENV{CUDNN_ROOT}" STREQUAL "")
  set(_cudnn_roots "$ENV{CUDNN_ROOT}")
endif()
if(_cudnn_roots)
  find_path(CUDNN_INCLUDE_DIR cudnn.h PATHS ${_cudnn_roots} PATH_SUFFIXES include NO_DEFAULT_PATH)
  find_library(CUDNN_LIBRARY NAMES ${_cudnn_names} PATHS ${_cudnn_roots} PATH_SUFFIXES lib lib64 NO_DEFAULT_PATH)
else()
  find_path(CUDNN_INCLUDE_DIR cudnn.h
    HINTS ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}
    PATH_SUFFIXES include)
  find_library(CUDNN_LIBRARY NAMES ${_cudnn_names}
    HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}
    PATH_SUFFIXES lib lib64)
endif()
# cuDNN 8 and later keep the version in cudnn_version.h, older ones in cudnn.h.
set(_cudnn_version_header "")
foreach(_cudnn_header cudnn_version.h cudnn.h)
  if(NOT _cudnn_version_header AND CUDNN_INCLUDE_DIR AND EXISTS "${CUDNN_INCLUDE_DIR}/${_cudnn_header}")
    file(STRINGS "${CUDNN_INCLUDE_DIR}/${_cudnn_header}" _cudnn_version_lines
      REGEX "^#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) +[0-9]+")
    if(_cudnn_version_lines)
      set(_cudnn_version_header "${_cudnn_header}")
    endif()
  endif()
endforeach()
if(_cudnn_version_header)
  foreach(_part MAJOR MINOR PATCHLEVEL)
    string(REGEX REPLACE ".*#define CUDNN_${_part} +([0-9]+).*" "\\1" CUDNN_${_part} "${_cudnn_version_lines}")
  endforeach()
  set(CUDNN_VERSION "${CUDNN_MAJOR}.${CUDNN_MINOR}.${CUDNN_PATCHLEVEL}")
endif()
set(_cudnn_failure "")
if(_cudnn_roots)
  set(_cudnn_failure
    "looked only in CUDNN_ROOT (${_cudnn_roots}) for include/cudnn.h and lib/libcudnn.so or lib/libcudnn.so.9")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CUDNN REQUIRED_VARS CUDNN_LIBRARY CUDNN_INCLUDE_DIR VERSION_VAR CUDNN_VERSION
  REASON_FAILURE_MESSAGE "${_cudnn_failure}")
if(CUDNN_FOUND AND NOT TARGET CUDNN::CUDNN)
  add_library(CUDNN::CUDNN UNKNOWN IMPORTED)
  set_target_properties(CUDNN::CUDNN PROPERTIES IMPORTED_LOCATION "${CUDNN_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${CUDNN_INCLUDE_DIR}")
endif()
mark_as_advanced(CUDNN_INCLUDE_DIR CUDNN_LIBRARY)
unset(_cudnn_names)
unset(_cudnn_roots)
unset(_cudnn_failure)
unset(_cudnn_header)
unset(_cudnn_version_header)
unset(_cudnn_version_lines)

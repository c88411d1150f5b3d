# The header check (tests/headers/CMakeLists.txt) with another compiler than
# the build's: configures SOURCE_DIR as a project of its own in WORK_DIR with
# COMPILER (looked up on PATH) and builds it. Where COMPILER is not installed
# it prints "lockstep headers: skipped: ...", which ctest reports as skipped.
# Run as: cmake -DCOMPILER=clang++ -DSOURCE_DIR=<repo>/tests/headers
#               -DWORK_DIR=<scratch> [-DGENERATOR=...] [-DBUILD_TYPE=...] -P check.cmake
find_program(compiler_path NAMES ${COMPILER} NO_CACHE)
if(NOT compiler_path)
  message("lockstep headers: skipped: ${COMPILER} is not installed (Debian: apt-get install clang), "
          "so the headers were not compiled with it")
  return()
endif()
set(configure ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR} -DCMAKE_CXX_COMPILER=${compiler_path})
if(GENERATOR)
  list(APPEND configure -G ${GENERATOR})
endif()
if(BUILD_TYPE)
  list(APPEND configure -DCMAKE_BUILD_TYPE=${BUILD_TYPE})
endif()
# A folder left by another compiler cannot be reconfigured with this one.
if(EXISTS ${WORK_DIR}/CMakeCache.txt)
  file(STRINGS ${WORK_DIR}/CMakeCache.txt cached REGEX "^CMAKE_CXX_COMPILER:")
  if(NOT cached STREQUAL "CMAKE_CXX_COMPILER:FILEPATH=${compiler_path}")
    file(REMOVE_RECURSE ${WORK_DIR})
  endif()
endif()
foreach(step configure build)
  if(step STREQUAL "build")
    set(command ${CMAKE_COMMAND} --build ${WORK_DIR} --parallel 2)
  else()
    set(command ${configure})
  endif()
  execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "lockstep headers: the ${step} step with ${compiler_path} failed (${rc}):\n${out}")
  endif()
  if(step STREQUAL "configure")
    string(REGEX MATCHALL "-- lockstep headers: [^\n]*" status "${out}")
    list(JOIN status "\n" status)
    message("${status}")
  endif()
endforeach()
message("lockstep headers: every header compiled alone with ${compiler_path}, no warning")

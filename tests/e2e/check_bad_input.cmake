# Bad input to the Fashion-MNIST example (and train_throughput's flags) ends
# in a message and a non-zero exit, never in a wrapped value, a hang or an
# abort: flag errors print the message then the usage, data errors the
# message alone, and results written to a full device (/dev/full) fail.
# Run as: cmake -DEXAMPLE=<fashion_mnist> [-DBENCHMARK=<train_throughput>]
#               -DWORK_DIR=<scratch> -P check_bad_input.cmake
set(failures "")

# expect(NAME PROGRAM ARGS... RC rc MATCH regex... [NO_MATCH regex] [OUTPUT file])
function(expect name program)
  cmake_parse_arguments(E "" "RC;NO_MATCH;OUTPUT" "ARGS;MATCH" ${ARGN})
  set(output_args OUTPUT_VARIABLE out)
  if(E_OUTPUT)
    set(output_args OUTPUT_FILE ${E_OUTPUT})
  endif()
  execute_process(COMMAND ${program} ${E_ARGS} ${output_args} ERROR_VARIABLE err RESULT_VARIABLE rc TIMEOUT 120)
  set(problem "")
  if(NOT rc STREQUAL E_RC)
    string(APPEND problem " exit ${rc}, expected ${E_RC};")
  endif()
  foreach(regex IN LISTS E_MATCH)
    if(NOT err MATCHES "${regex}")
      string(APPEND problem " stderr lacks '${regex}';")
    endif()
  endforeach()
  if(E_NO_MATCH AND err MATCHES "${E_NO_MATCH}")
    string(APPEND problem " stderr has '${E_NO_MATCH}';")
  endif()
  if(problem)
    set(failures "${failures}\n  ${name}:${problem}\n    stderr: ${err}" PARENT_SCOPE)
  else()
    message("ok: ${name}")
  endif()
endfunction()

expect("--replicas 4294967298 (2^32 + 2, which a cast made 2)" ${EXAMPLE} ARGS --replicas 4294967298 RC 2
       MATCH "--replicas: 4294967298 is out of range; expected an integer from 1 to 1024" "usage: fashion_mnist")
expect("--batch-size 99999999999999999999" ${EXAMPLE} ARGS --batch-size 99999999999999999999 RC 2
       MATCH "expected an integer from 1 to 2147483647" "usage: fashion_mnist")
expect("--epochs 1000001" ${EXAMPLE} ARGS --epochs 1000001 RC 2 MATCH "from 0 to 1000000")
expect("--timeout nan" ${EXAMPLE} ARGS --timeout nan RC 2
       MATCH "--timeout: nan is out of range; expected a finite number greater than 0 and at most 604800")
expect("--seed -1" ${EXAMPLE} ARGS --seed -1 RC 2 MATCH "--seed: -1 is out of range")
expect("--units 0" ${EXAMPLE} ARGS --units 0 RC 2 MATCH "--units: 0 is out of range; expected an integer from 1 to 4096")
expect("--row-order --deterministic" ${EXAMPLE} ARGS --row-order --deterministic --epochs 1 RC 2
       MATCH "--row-order and --deterministic \\(or --units\\) are two deterministic schemes; give one")
expect("--row-order --model cnn" ${EXAMPLE} ARGS --row-order --model cnn --epochs 1 RC 2
       MATCH "layer 0 \\(conv2d\\) takes sums over rows that the row-order scheme does not run")

# A data error: the message alone, no usage text.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/fifo)
expect("--data of a folder that does not exist" ${EXAMPLE} ARGS --data ${WORK_DIR}/missing --epochs 0 RC 2
       MATCH "load_fashion_mnist: neither" NO_MATCH "usage:")
execute_process(COMMAND mkfifo ${WORK_DIR}/fifo/train-images-idx3-ubyte ${WORK_DIR}/fifo/train-labels-idx1-ubyte
                RESULT_VARIABLE mkfifo_rc)
if(mkfifo_rc EQUAL 0)
  expect("--data of FIFOs (open would wait for a writer)" ${EXAMPLE} ARGS --data ${WORK_DIR}/fifo --epochs 0 RC 2
         MATCH "a FIFO \\(named pipe\\), expected a regular file" NO_MATCH "usage:")
endif()

# The results to a full device: a non-zero exit and a line on stderr. It
# loads the data and evaluates (0 epochs), so it needs Fashion-MNIST.
if(DEFINED ENV{FASHION_MNIST_DIR} AND NOT "$ENV{FASHION_MNIST_DIR}" STREQUAL "")
  set(data_dir $ENV{FASHION_MNIST_DIR})
else()
  set(data_dir /usr/share/datasets/fashion-mnist)
endif()
if(EXISTS /dev/full AND EXISTS ${data_dir})
  expect("results written to /dev/full" ${EXAMPLE} ARGS --epochs 0 OUTPUT /dev/full RC 1
         MATCH "fashion_mnist: the output could not be written to stdout")
else()
  message("skipped: results written to /dev/full (no /dev/full, or no Fashion-MNIST in ${data_dir})")
endif()

if(BENCHMARK)
  # The trainer refuses a unit count that does not split over the replicas (synthetic data: no data set needed).
  expect("train_throughput --deterministic 24 --replicas 5" ${BENCHMARK} ARGS --deterministic 24 --replicas 5 --steps 1
         --mfu no RC 2 MATCH "Deterministic\\{24\\}: 24 units do not split evenly over 1 process x 5 replicas")
  expect("train_throughput --deterministic 0" ${BENCHMARK} ARGS --deterministic 0 RC 2
         MATCH "--deterministic: 0 is out of range; expected an integer from 1 to 4096")
  expect("train_throughput --deterministic rowz" ${BENCHMARK} ARGS --deterministic rowz RC 2
         MATCH "--deterministic: 'rowz', expected a unit count from 1 to 4096 or rows \\(the row-order scheme\\)")
  expect("train_throughput --paired 3 without --deterministic" ${BENCHMARK} ARGS --paired 3 RC 2
         MATCH "--paired 3: pairs the deterministic mode with the default mode; give --deterministic UNITS or rows too")
  expect("train_throughput --paired 0" ${BENCHMARK} ARGS --deterministic rows --paired 0 RC 2
         MATCH "--paired: 0 is out of range; expected an integer from 1 to 1000")
  expect("train_throughput --replicas 4294967298" ${BENCHMARK} ARGS --replicas 4294967298 RC 2
         MATCH "--replicas: 4294967298 is out of range; expected an integer from 1 to 1024")
  expect("train_throughput --batch-size 99999999999999999999" ${BENCHMARK} ARGS --batch-size 99999999999999999999
         RC 2 MATCH "from 1 to 2147483647")
  expect("train_throughput --steps 1000000 --batch-size 1000000 (petabytes of synthetic data)" ${BENCHMARK}
         ARGS --steps 1000000 --batch-size 1000000 --mfu no RC 2 MATCH "needs [0-9]+ bytes .* of memory; lower --steps or --batch-size")
endif()
file(REMOVE_RECURSE ${WORK_DIR})

if(failures)
  message(FATAL_ERROR "bad input not handled as expected:${failures}")
endif()

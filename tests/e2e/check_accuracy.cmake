# Runs the Fashion-MNIST example for 2 epochs on 2 replicas and checks that its
# last line reports a test accuracy of at least MIN_ACCURACY.
execute_process(COMMAND ${EXAMPLE} --replicas 2 --epochs 2 --batch-size 128
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fashion_mnist exited with ${rc}")
endif()
if(NOT out MATCHES "test_accuracy=([0-9.]+) test_loss=([0-9.]+)[ \t\r\n]*$")
  message(FATAL_ERROR "the last line is not 'test_accuracy=0.XXXX test_loss=X.XXXX'")
endif()
set(acc ${CMAKE_MATCH_1})
if(acc LESS ${MIN_ACCURACY})
  message(FATAL_ERROR "test accuracy ${acc} is below ${MIN_ACCURACY}")
endif()
message("test accuracy ${acc} >= ${MIN_ACCURACY}")

# Runs PROGRAM under mpirun -np 2: rank 1 dies (SIGKILL) or fails (an
# exception in a replica) mid-training. The job must end non-zero in under
# 60 s, with a message that names rank 1.
string(TIMESTAMP start "%s")
execute_process(COMMAND ${MPIEXEC} ${MPIFLAGS} -np 2 ${PROGRAM}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out TIMEOUT 60)
string(TIMESTAMP stop "%s")
math(EXPR seconds "${stop} - ${start}")
message("${out}")
if(rc MATCHES "timeout" OR seconds GREATER_EQUAL 60)
  message(FATAL_ERROR "the job hung: still running after ${seconds} s")
endif()
if(rc EQUAL 0)
  message(FATAL_ERROR "the job exited 0 although rank 1 was lost")
endif()
if(NOT out MATCHES "rank 1")
  message(FATAL_ERROR "no message names the lost rank 1")
endif()
message("job ended with ${rc} after ${seconds} s, naming rank 1")

# A full disk mid-save, for real: a 64 KiB tmpfs (mounted here, as root)
# filled but for 16 KiB, so that the first backup (about 10 KiB) fits and the
# next one, written beside it before it is replaced, does not. The fit must
# fail with an Error that says the disk is full, the first backup must be
# left whole, and once space is freed the same command must resume from it
# and end with the unbroken run's weights. Where the tmpfs cannot be mounted
# (not root, no mount, a container without the right) it says so and is skipped.
#   cmake -DPROGRAM=... -DWORK_DIR=... -P check_full_disk.cmake
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/mnt)
execute_process(COMMAND mount -t tmpfs -o size=64k tmpfs ${WORK_DIR}/mnt RESULT_VARIABLE rc ERROR_VARIABLE why)
if(NOT rc EQUAL 0)
  message("full disk: skipped, a tmpfs cannot be mounted here (${why})")
  return()
endif()

function(run out_rc out_text dir weights)
  execute_process(COMMAND ${PROGRAM} mirrored ${dir} ${weights} 0
    RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_VARIABLE text TIMEOUT 60)
  set(${out_rc} "${rc}" PARENT_SCOPE)
  set(${out_text} "${text}" PARENT_SCOPE)
endfunction()
function(fail_unmounted text)
  execute_process(COMMAND umount ${WORK_DIR}/mnt)
  message(FATAL_ERROR "${text}")
endfunction()

execute_process(COMMAND dd if=/dev/zero of=${WORK_DIR}/mnt/filler bs=1024 count=48 OUTPUT_QUIET ERROR_QUIET)
set(dir ${WORK_DIR}/mnt/backup)
run(rc text ${dir} ${WORK_DIR}/weights.safetensors)
if(rc EQUAL 0 OR NOT text MATCHES "could not write \\(is the disk full\\?\\)")
  fail_unmounted("the fit on a full disk did not fail saying so (${rc}):\n${text}")
endif()
file(GLOB left RELATIVE ${dir} ${dir}/*)
if(NOT left STREQUAL "backup.safetensors")
  fail_unmounted("after the failed save the backup folder holds '${left}', expected the first backup alone")
endif()
file(REMOVE ${WORK_DIR}/mnt/filler)
run(rc text2 ${dir} ${WORK_DIR}/weights.safetensors)
execute_process(COMMAND umount ${WORK_DIR}/mnt)
if(NOT rc EQUAL 0 OR NOT text2 MATCHES "resumed at epoch 1 step 0")
  message(FATAL_ERROR "the rerun with space freed did not resume from the first backup (${rc}):\n${text2}")
endif()
run(rc text3 ${WORK_DIR}/unbroken ${WORK_DIR}/unbroken.safetensors)
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${WORK_DIR}/unbroken.safetensors
  ${WORK_DIR}/weights.safetensors RESULT_VARIABLE differ)
if(NOT rc EQUAL 0 OR NOT differ EQUAL 0)
  message(FATAL_ERROR "the resumed run's weights differ from the unbroken run's (${rc}):\n${text3}")
endif()
string(STRIP "${text}" text)
message("full disk: the save failed with \"${text}\", the first backup was left whole, and the rerun resumed "
        "from it to the unbroken run's weights")

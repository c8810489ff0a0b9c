# Test: build the example out-of-tree plugin against the build tree's runner
# package, then load it with the runner executable and train with it.
# Inputs: SOURCE_DIR, BINARY_DIR, WORK_DIR, RUNNER, GENERATOR.
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

function(run_step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

run_step(${CMAKE_COMMAND} -S "${SOURCE_DIR}/plugins/examples/linear_probe" -B "${WORK_DIR}/build"
         -G "${GENERATOR}" -Drunner_DIR=${BINARY_DIR}/runner-package
         -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
run_step(${CMAKE_COMMAND} --build "${WORK_DIR}/build" -j 2)

run_step("${RUNNER}" plugins describe linear_probe --plugin-path "${WORK_DIR}/build")
if(NOT step_output MATCHES "linear_probe \\(model plugin\\)" OR NOT step_output MATCHES "version: 1.0.0")
  message(FATAL_ERROR "the out-of-tree plugin was not described as expected:\n${step_output}")
endif()

file(WRITE "${WORK_DIR}/probe.toml" "[model]\nplugin = \"linear_probe\"\nprojection = 32\n\n[data]\nplugin = \"synthetic\"\nshape = [16]\nsize = 256\nbatch_size = 32\n\n[optimizer]\nplugin = \"sgd\"\nlr = 0.1\n\n[train]\nsteps = 10\nwarmup = 2\n")
run_step("${RUNNER}" run "${WORK_DIR}/probe.toml" --db "${WORK_DIR}/probe.db"
         --plugin-path "${WORK_DIR}/build")
if(NOT step_output MATCHES "finished")
  message(FATAL_ERROR "training with the out-of-tree plugin did not finish:\n${step_output}")
endif()
message(STATUS "out-of-tree plugin built, loaded and trained")

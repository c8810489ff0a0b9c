# Test: install the build tree into a fresh prefix and run experiments from
# there, with nothing but the installed tree (the built-in plugins next to the
# binary; RUNNER_PLUGIN_PATH unset), so every built-in plugin an experiment
# needs must have been installed.
# Inputs: SOURCE_DIR, BINARY_DIR, WORK_DIR.
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")

function(run_step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                  WORKING_DIRECTORY "${WORK_DIR}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

run_step(${CMAKE_COMMAND} --install "${BINARY_DIR}" --prefix "${prefix}")

set(runner "${prefix}/bin/runner")
set(ENV{RUNNER_PLUGIN_PATH} "")
unset(ENV{RUNNER_PLUGIN_PATH})
unset(ENV{RUNNER_DB})

run_step("${runner}" plugins)
foreach(plugin mlp convnet sgd synthetic allreduce fp16_compress bf16_compress powersgd)
  if(NOT step_output MATCHES "[ \n]${plugin} ")
    message(FATAL_ERROR "the installed runner does not list built-in plugin '${plugin}':\n${step_output}")
  endif()
endforeach()
if(step_output MATCHES "grouped_adamw|tiny_linear")
  message(FATAL_ERROR "an example or test plugin was installed as a built-in:\n${step_output}")
endif()

run_step("${runner}" run "${SOURCE_DIR}/experiments/quickstart.toml" --db "${WORK_DIR}/runs.db"
         --set train.steps=20 --set train.warmup=2 --set experiment.repeats=1)
if(NOT step_output MATCHES "finished")
  message(FATAL_ERROR "the quickstart did not finish from the installed tree:\n${step_output}")
endif()
run_step("${runner}" run "${SOURCE_DIR}/experiments/data_parallel.toml" --db "${WORK_DIR}/runs.db"
         --set train.steps=10 --set train.warmup=2 --set experiment.repeats=1)
string(REGEX MATCHALL "finished" finished "${step_output}")
list(LENGTH finished count)
if(count LESS 2)
  message(FATAL_ERROR "both data-parallel trials (allreduce, fp16_compress) should "
                      "finish from the installed tree:\n${step_output}")
endif()
message(STATUS "installed tree: quickstart and data-parallel runs finished")

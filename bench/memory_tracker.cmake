# runner-memory-tracker (bench/memory_tracker.cpp): the CPU memory tracker's
# overhead and the activation-checkpointing trade, docs/memory.md.
add_executable(runner-memory-tracker ${PROJECT_SOURCE_DIR}/bench/memory_tracker.cpp)
target_link_libraries(runner-memory-tracker PRIVATE runner_host runner_sdk runner_training
  runner_warnings)
set_target_properties(runner-memory-tracker PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/bin")
add_dependencies(runner-memory-tracker convnet transformer_lm)

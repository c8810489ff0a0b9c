# runner-optim-impl (bench/optim_impl.cpp): steps/s of an optimizer plugin's
# impls. Needs the plugin it measures (`adamw` by default) built beside it.
if(NOT TARGET runner-optim-impl)
  add_executable(runner-optim-impl "${CMAKE_CURRENT_LIST_DIR}/optim_impl.cpp")
  target_link_libraries(runner-optim-impl PRIVATE runner_host runner_sdk runner_warnings)
  set_target_properties(runner-optim-impl PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/bin")
endif()

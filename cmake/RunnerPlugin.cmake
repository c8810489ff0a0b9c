# runner_add_plugin(<name> SOURCES <files...> [VERSION <v>] [LIBRARIES <targets...>]
#                   [OUTPUT_DIRECTORY <dir>])
#
# Builds a runner plugin library named runner_plugin_<name>.so, the file name
# the host looks for when it scans a plugin folder. Used by the built-in
# plugins and installed with runner for out-of-tree plugins:
#
#   find_package(runner REQUIRED)
#   runner_add_plugin(my_model SOURCES my_model.cpp VERSION 1.2.0)
#
# Then point RUNNER_PLUGIN_PATH (or `--plugin-path`) at the output folder.
function(runner_add_plugin name)
  cmake_parse_arguments(ARG "" "VERSION;OUTPUT_DIRECTORY" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "runner_add_plugin(${name}): SOURCES is required")
  endif()
  if(NOT ARG_VERSION)
    set(ARG_VERSION "${PROJECT_VERSION}")
  endif()
  if(NOT ARG_VERSION)
    set(ARG_VERSION "0.0.0")
  endif()
  add_library(${name} MODULE ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE runner::sdk ${ARG_LIBRARIES})
  if(TARGET runner_warnings)
    target_link_libraries(${name} PRIVATE runner_warnings)
  endif()
  target_compile_definitions(${name} PRIVATE RUNNER_PLUGIN_VERSION="${ARG_VERSION}")
  # Only the entry point is exported; a plugin's internals cannot clash with
  # another plugin's or the host's.
  set_target_properties(${name} PROPERTIES
    PREFIX ""
    OUTPUT_NAME "runner_plugin_${name}"
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${ARG_OUTPUT_DIRECTORY}")
  elseif(DEFINED RUNNER_PLUGIN_OUTPUT_DIR)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${RUNNER_PLUGIN_OUTPUT_DIR}")
  endif()
endfunction()

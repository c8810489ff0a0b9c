# runner_add_plugin(<name> SOURCES <files...> [VERSION <v>] [LIBRARIES <targets...>]
#                   [OUTPUT_DIRECTORY <dir>])
#
# Builds a runner plugin library named runner_plugin_<name>.so, the file name
# the host looks for when it scans a plugin folder. VERSION (default: the
# project's) is written into the library's ABI record, at most 63 printable
# characters. Used by the built-in plugins and installed with runner for
# out-of-tree plugins:
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
  # The version lives in the library's ABI record, a 64-byte printable string.
  string(LENGTH "${ARG_VERSION}" version_length)
  if(version_length GREATER 63 OR NOT ARG_VERSION MATCHES "^[ -~]+$")
    message(FATAL_ERROR "runner_add_plugin(${name}): VERSION must be 1 to 63 printable "
                        "ASCII characters, got '${ARG_VERSION}'")
  endif()
  add_library(${name} MODULE ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE runner::sdk ${ARG_LIBRARIES})
  if(TARGET runner_warnings)
    target_link_libraries(${name} PRIVATE runner_warnings)
  endif()
  target_compile_definitions(${name} PRIVATE RUNNER_PLUGIN_VERSION="${ARG_VERSION}")
  # Only the entry point is exported; a plugin's internals cannot clash with
  # another plugin's or the host's.
  # An installed plugin keeps finding LibTorch where it was built against it.
  set_target_properties(${name} PROPERTIES
    PREFIX ""
    OUTPUT_NAME "runner_plugin_${name}"
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    INSTALL_RPATH_USE_LINK_PATH ON)
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${ARG_OUTPUT_DIRECTORY}")
  endif()
endfunction()

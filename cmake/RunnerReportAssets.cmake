# The chart library of `runner report` (Vega, Vega-Lite, vega-embed; docs/report.md):
# installed from the npm registry at configure time with `npm ci` into the build
# tree (runner/cli/report/package-lock.json pins every version), then inlined into
# the runner executable with the report's own script and style sheet, so that a
# report is one file that opens offline. Defines the target runner_report_assets
# (an object library with the generated source).
set(RUNNER_REPORT_SOURCE_DIR "${CMAKE_CURRENT_SOURCE_DIR}/cli/report")
set(RUNNER_REPORT_JS_DIR "${PROJECT_BINARY_DIR}/report-js")
# configure_file makes a change of the manifest or the lock re-run CMake.
configure_file("${RUNNER_REPORT_SOURCE_DIR}/package.json" "${RUNNER_REPORT_JS_DIR}/package.json" COPYONLY)
configure_file("${RUNNER_REPORT_SOURCE_DIR}/package-lock.json" "${RUNNER_REPORT_JS_DIR}/package-lock.json" COPYONLY)
file(SHA256 "${RUNNER_REPORT_JS_DIR}/package-lock.json" _runner_lock_hash)
set(_runner_stamp "${RUNNER_REPORT_JS_DIR}/node_modules/.runner-installed")
set(_runner_installed "")
if(EXISTS "${_runner_stamp}")
  file(READ "${_runner_stamp}" _runner_installed)
endif()
# npm is needed only when the tree holds no install of this lock: the GPU
# check kit (scripts/gpu-check) brings one to a machine without a registry.
if(NOT _runner_installed STREQUAL _runner_lock_hash)
  find_program(RUNNER_NPM npm)
  if(NOT RUNNER_NPM)
    message(FATAL_ERROR "runner report needs npm to install its chart library (Vega-Lite) at "
                        "configure time: install Debian's nodejs and npm packages (scripts/dev does)")
  endif()
  message(STATUS "runner: npm ci (the report's chart library) in ${RUNNER_REPORT_JS_DIR}")
  execute_process(
    COMMAND "${RUNNER_NPM}" ci --omit=dev --no-audit --no-fund --ignore-scripts --loglevel=error
    WORKING_DIRECTORY "${RUNNER_REPORT_JS_DIR}"
    RESULT_VARIABLE _runner_npm_result
    OUTPUT_VARIABLE _runner_npm_output ERROR_VARIABLE _runner_npm_output)
  if(NOT _runner_npm_result EQUAL 0)
    message(FATAL_ERROR "npm ci failed in ${RUNNER_REPORT_JS_DIR} (${_runner_npm_result}):\n"
                        "${_runner_npm_output}\nthe report's chart library comes from the npm "
                        "registry; check that npm can reach it")
  endif()
  file(WRITE "${_runner_stamp}" "${_runner_lock_hash}")
endif()

set(_runner_versions "")
foreach(package vega vega-lite vega-embed)
  file(READ "${RUNNER_REPORT_JS_DIR}/node_modules/${package}/package.json" _runner_manifest)
  string(JSON _runner_version GET "${_runner_manifest}" version)
  list(APPEND _runner_versions "${package} ${_runner_version}")
endforeach()
list(JOIN _runner_versions ", " RUNNER_REPORT_LIBRARY_VERSIONS)

set(_runner_assets
  "vega=${RUNNER_REPORT_JS_DIR}/node_modules/vega/build/vega.min.js"
  "vega_lite=${RUNNER_REPORT_JS_DIR}/node_modules/vega-lite/build/vega-lite.min.js"
  "vega_embed=${RUNNER_REPORT_JS_DIR}/node_modules/vega-embed/build/vega-embed.min.js"
  "page_script=${RUNNER_REPORT_SOURCE_DIR}/report.js"
  "page_style=${RUNNER_REPORT_SOURCE_DIR}/report.css")
set(_runner_asset_files "")
foreach(pair IN LISTS _runner_assets)
  string(REGEX REPLACE "^[^=]*=" "" _runner_path "${pair}")
  list(APPEND _runner_asset_files "${_runner_path}")
endforeach()
list(JOIN _runner_assets "|" _runner_asset_arg)
set(_runner_assets_cpp "${PROJECT_BINARY_DIR}/generated/report_assets.cpp")
add_custom_command(
  OUTPUT "${_runner_assets_cpp}"
  COMMAND "${CMAKE_COMMAND}" "-DOUT=${_runner_assets_cpp}" "-DNAMESPACE=runner::cli::assets"
          "-DASSETS=${_runner_asset_arg}" "-DVALUES=library_versions=${RUNNER_REPORT_LIBRARY_VERSIONS}"
          -P "${PROJECT_SOURCE_DIR}/cmake/RunnerEmbedAssets.cmake"
  DEPENDS ${_runner_asset_files} "${PROJECT_SOURCE_DIR}/cmake/RunnerEmbedAssets.cmake"
          "${_runner_stamp}"
  COMMENT "Inlining the report's chart library and page assets"
  VERBATIM)
add_library(runner_report_assets OBJECT "${_runner_assets_cpp}")

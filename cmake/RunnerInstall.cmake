# Installation (binary, built-in plugins, SDK headers, CMake package) and a
# build-tree copy of the package so out-of-tree plugins can build against an
# uninstalled runner (the test suite does).
include(GNUInstallDirs)

if(RUNNER_HAS_CUDA)
  set(RUNNER_CONFIG_DEFINITIONS "RUNNER_WITH_CUDA=1")
else()
  set(RUNNER_CONFIG_DEFINITIONS "")
endif()

# Build tree package.
set(RUNNER_CONFIG_INCLUDE_DIRS
    "${PROJECT_SOURCE_DIR}/runner/sdk/include;${PROJECT_BINARY_DIR}/generated/include")
configure_file(cmake/runnerConfig.cmake.in "${PROJECT_BINARY_DIR}/runner-package/runnerConfig.cmake" @ONLY)
configure_file(cmake/RunnerPlugin.cmake "${PROJECT_BINARY_DIR}/runner-package/RunnerPlugin.cmake" COPYONLY)

# Install tree package.
set(RUNNER_CONFIG_INCLUDE_DIRS "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
configure_file(cmake/runnerConfig.cmake.in "${PROJECT_BINARY_DIR}/runner-install/runnerConfig.cmake" @ONLY)
include(CMakePackageConfigHelpers)
write_basic_package_version_file("${PROJECT_BINARY_DIR}/runner-install/runnerConfigVersion.cmake"
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)

# The installed binary finds the LibTorch it was linked with.
set_target_properties(runner PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS runner RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The host looks for built-in plugins at <bindir>/../lib/runner/plugins; the
# list is the one runner_add_builtin_plugin() fills (plugins/CMakeLists.txt).
get_property(RUNNER_BUILTIN_PLUGINS GLOBAL PROPERTY RUNNER_BUILTIN_PLUGINS)
install(TARGETS ${RUNNER_BUILTIN_PLUGINS} LIBRARY DESTINATION lib/runner/plugins)
install(DIRECTORY runner/sdk/include/runner DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp")
install(FILES "${PROJECT_BINARY_DIR}/generated/include/runner/version.hpp"
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/runner)
install(FILES "${PROJECT_BINARY_DIR}/runner-install/runnerConfig.cmake"
              "${PROJECT_BINARY_DIR}/runner-install/runnerConfigVersion.cmake"
              cmake/RunnerPlugin.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/runner)

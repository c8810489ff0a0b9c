# The kernels plugin's CPU side: its ops (cpu_ops_test.cpp) and its kernel
# cases (cpu_cases_test.cpp), against the built plugin library.
#
# The CPU kernels exist once per instruction set and run the one ATen runs
# (ATEN_CPU_CAPABILITY chooses it), so every test runs three times: the
# tests runner_add_test discovers run with avx512, and two more
# registrations, prefixed "default." and "avx2.", with those. A test checks
# that the kernels running are the ones asked for (or skips on a CPU
# without them).
runner_add_test(kernels_cpu_test SOURCES cpu_ops_test.cpp cpu_cases_test.cpp
  LIBS runner_sdk runner_torch)
add_dependencies(kernels_cpu_test kernels)

set(kernels_cpu_env_file "${CMAKE_CURRENT_BINARY_DIR}/kernels_cpu_test_env.cmake")
file(WRITE "${kernels_cpu_env_file}"
  "if(DEFINED kernels_cpu_test_TESTS)\n"
  "  set_tests_properties(\${kernels_cpu_test_TESTS} PROPERTIES ENVIRONMENT ATEN_CPU_CAPABILITY=avx512)\n"
  "endif()\n")
set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${kernels_cpu_env_file}")

foreach(isa default avx2)
  gtest_discover_tests(kernels_cpu_test DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 300
    TEST_PREFIX "${isa}." TEST_LIST kernels_cpu_test_${isa}_TESTS
    PROPERTIES TIMEOUT 300 ENVIRONMENT ATEN_CPU_CAPABILITY=${isa})
  set(labels_file "${CMAKE_CURRENT_BINARY_DIR}/kernels_cpu_test_${isa}_labels.cmake")
  file(WRITE "${labels_file}"
    "if(DEFINED kernels_cpu_test_${isa}_TESTS)\n"
    "  set_tests_properties(\${kernels_cpu_test_${isa}_TESTS} PROPERTIES LABELS unit)\n"
    "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${labels_file}")
endforeach()

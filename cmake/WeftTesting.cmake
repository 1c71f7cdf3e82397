# weft_add_test(NAME <name> SOURCES <files...> LIBS <targets...> [RANKS <n...>] [TIMEOUT <s>])
#
# Builds one GoogleTest executable linked with weft's MPI-aware test main and registers it
# with ctest once per rank count (name_np<N>). Without RANKS it runs on one rank, still
# under mpiexec so that MPI_Init behaves exactly as in production.
set(WEFT_MPI_TEST_ENV
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
    OMP_NUM_THREADS=1)

function(weft_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;RANKS" ${ARGN})
  if(NOT T_RANKS)
    set(T_RANKS 1)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE weft_test_main ${T_LIBS} weft_warnings)
  foreach(np IN LISTS T_RANKS)
    add_test(NAME ${T_NAME}_np${np}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} --oversubscribe
                     ${MPIEXEC_PREFLAGS} $<TARGET_FILE:${T_NAME}> ${MPIEXEC_POSTFLAGS})
    set_tests_properties(${T_NAME}_np${np} PROPERTIES
                         ENVIRONMENT "${WEFT_MPI_TEST_ENV}" TIMEOUT ${T_TIMEOUT}
                         PROCESSORS ${np})
  endforeach()
endfunction()

# weft_add_cli_test(NAME <name> SOURCES <files...> PREFIX <ctest prefix> [TIMEOUT <s>])
#
# A GoogleTest driver that runs the real `weft` binary (tests/support/cli_runner.hpp): it is
# not an MPI program itself; each test starts `mpiexec ... weft ...` and checks the outcome.
function(weft_add_cli_test)
  cmake_parse_arguments(T "" "NAME;PREFIX;TIMEOUT" "SOURCES" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  find_package(nlohmann_json REQUIRED)
  include(GoogleTest)
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE GTest::gtest_main nlohmann_json::nlohmann_json
                                          weft_warnings)
  target_include_directories(${T_NAME} PRIVATE ${PROJECT_SOURCE_DIR}/tests/support)
  target_compile_definitions(${T_NAME} PRIVATE
    WEFT_CLI_BINARY="$<TARGET_FILE:weft>"
    WEFT_MPIEXEC="${MPIEXEC_EXECUTABLE}"
    WEFT_CLI_WORKDIR="${CMAKE_CURRENT_BINARY_DIR}/work-${T_NAME}")
  add_dependencies(${T_NAME} weft)
  gtest_discover_tests(${T_NAME} TEST_PREFIX "${T_PREFIX}." DISCOVERY_TIMEOUT 30
                       PROPERTIES TIMEOUT ${T_TIMEOUT})  # cli_runner.hpp sets the MPI environment
endfunction()

# The installable package: `cmake --install build --prefix P` puts the headers, the libraries,
# the `weft` tool and a CMake package configuration under P, so that a downstream project does
#
#   find_package(weft REQUIRED)        # with -DCMAKE_PREFIX_PATH=P
#   target_link_libraries(app PRIVATE weft::mgrit)   # MPI + std only
#   target_link_libraries(app PRIVATE weft::nn)      # the LibTorch layer (finds Torch itself)
#
# Exported targets: weft::util (MPI helpers, timelines, the clock; weft::mgrit links it),
# weft::mgrit, weft::problems, weft::data, weft::report (traces read back, plots) and, with LibTorch, weft::nn,
# weft::nn_options (LayerParallelOptions, which weft::nn links), weft::models, weft::train (the
# Trainer) and weft::train_options (its LibTorch-free options, which weft::train links). The PETSc
# problems are not exported (PETSc comes as a pkg-config target that a consumer would have to
# recreate); the weft-petsc program links them when weft was built with them.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(WEFT_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/weft
    CACHE STRING "Where weftConfig.cmake is installed, relative to the prefix")

set(weft_exported weft_util weft_mgrit weft_problems weft_catalogue weft_data weft_report)
if(WEFT_WITH_TORCH)
  list(APPEND weft_exported weft_nn_options weft_nn weft_models weft_train_options weft_train)
endif()
foreach(target IN LISTS weft_exported)
  string(REPLACE "weft_" "" export_name ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${export_name})
endforeach()

install(TARGETS ${weft_exported} EXPORT weftTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# weft hands train/eval/predict and PETSc's heat2d to the programs beside it (apps/weft).
install(TARGETS weft RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
foreach(program IN ITEMS weft-nn weft-petsc)
  if(TARGET ${program})
    install(TARGETS ${program} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()
set(weft_torch_headers "")
if(NOT WEFT_WITH_TORCH)  # the headers of the LibTorch layer only come with its libraries
  set(weft_torch_headers PATTERN "nn" EXCLUDE PATTERN "models" EXCLUDE PATTERN "train" EXCLUDE)
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/weft DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp" ${weft_torch_headers})
install(EXPORT weftTargets NAMESPACE weft:: DESTINATION ${WEFT_INSTALL_CMAKEDIR})

set(WEFT_PACKAGE_WITH_TORCH ${WEFT_WITH_TORCH})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/weftConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/weftConfig.cmake
                              INSTALL_DESTINATION ${WEFT_INSTALL_CMAKEDIR})
# 0.x: a minor version may break the API, so only the same minor version is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/weftConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/weftConfig.cmake ${PROJECT_BINARY_DIR}/weftConfigVersion.cmake
        DESTINATION ${WEFT_INSTALL_CMAKEDIR})

# The Python module's install() rule is in python/CMakeLists.txt; where it goes is
# WEFT_INSTALL_PYTHONDIR (set in the top-level CMakeLists.txt, before the subdirectories).

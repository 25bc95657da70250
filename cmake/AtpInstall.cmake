# What `cmake --install` and CPack ship: the `atp` command (component runtime), and the library
# layers a program links to join a job, with their headers, a CMake package config and atp.pc
# (component development). Included by the top-level CMakeLists.txt once every target exists.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The installed layers, highest first (the order pkg-config's static link line needs): the core
# protocol, plans and schedules, the I/O layer, the control clients, the daemons (to embed a
# switch or PS), the allreduce API and its baselines, and ClusterJob. Not installed: sim,
# scenario and backends, what the `atp` command runs scenarios with (and where ns-3 comes in).
set(ATP_INSTALLED_LIBRARIES atp_cluster atp_daemons atp_baselines atp_collectives atp_rina_json atp_control atp_plan atp_io
                            atp_schedule atp_rina atp_core)
set(ATP_NOT_INSTALLED_HEADER_DIRS sim scenario backends)

# The imported targets of other packages that installed layers may link, and how a consumer finds
# each again: a find_dependency() line for atpConfig.cmake, what atp.pc says for it (a module under
# Requires where Debian ships a .pc file, else flags under Libs), and the Debian package that has
# them, which the .deb depends on. Only those the installed layers do link end up in the three.
# atp_dependency(TARGETS target... FIND "cmake code" [DEB package] [PC_REQUIRES module] [PC_LIBS flags])
set(ATP_DEPENDENCY_TARGETS "")
function(atp_dependency)
  cmake_parse_arguments(ARG "" "FIND;DEB;PC_REQUIRES;PC_LIBS" "TARGETS" ${ARGN})
  foreach(t IN LISTS ARG_TARGETS)
    foreach(field FIND DEB PC_REQUIRES PC_LIBS)
      set(ATP_DEPENDENCY_${field}_${t} "${ARG_${field}}" PARENT_SCOPE)
    endforeach()
  endforeach()
  set(ATP_DEPENDENCY_TARGETS ${ATP_DEPENDENCY_TARGETS} ${ARG_TARGETS} PARENT_SCOPE)
endfunction()
atp_dependency(TARGETS Threads::Threads FIND "find_dependency(Threads)" PC_LIBS -pthread)
atp_dependency(TARGETS yaml-cpp FIND "find_dependency(yaml-cpp)" DEB libyaml-cpp-dev PC_REQUIRES yaml-cpp)
atp_dependency(TARGETS nlohmann_json::nlohmann_json FIND "find_dependency(nlohmann_json)" DEB nlohmann-json3-dev
               PC_REQUIRES nlohmann_json)
atp_dependency(TARGETS OpenSSL::SSL OpenSSL::Crypto FIND "find_dependency(OpenSSL)" DEB libssl-dev PC_REQUIRES openssl)
atp_dependency(TARGETS spdlog::spdlog FIND "find_dependency(spdlog)" DEB libspdlog-dev PC_REQUIRES spdlog)
atp_dependency(TARGETS prometheus-cpp::core FIND "find_dependency(prometheus-cpp CONFIG)" DEB prometheus-cpp-dev
               PC_REQUIRES prometheus-cpp-core)
# Debian's libgloo-dev has a CMake config (target `gloo`) but no .pc file; the library is in /usr/lib.
atp_dependency(TARGETS gloo FIND "find_dependency(Gloo CONFIG)" DEB libgloo-dev PC_LIBS -lgloo)
# cpp-httplib has only a .pc file: the package config makes the same PkgConfig::HTTPLIB target the
# build uses (its TLS and compression definitions change httplib.h's classes, so they must match).
atp_dependency(TARGETS PkgConfig::HTTPLIB DEB libcpp-httplib-dev PC_REQUIRES cpp-httplib
               FIND "find_dependency(PkgConfig)\nif(NOT TARGET PkgConfig::HTTPLIB)\n  pkg_check_modules(HTTPLIB QUIET IMPORTED_TARGET cpp-httplib)\n  if(NOT TARGET PkgConfig::HTTPLIB)\n    set(atp_FOUND FALSE)\n    set(atp_NOT_FOUND_MESSAGE \"atp needs cpp-httplib (Debian: libcpp-httplib-dev), which pkg-config does not find\")\n    return()\n  endif()\nendif()")

set(ATP_FIND_DEPENDENCIES "")
set(ATP_DEPENDENCIES_DEB "")
set(ATP_DEPENDENCIES_PC_REQUIRES "")
set(ATP_DEPENDENCIES_PC_LIBS "")
set(ATP_PC_LIBS "")
set(_atp_dependencies_seen "")
foreach(lib IN LISTS ATP_INSTALLED_LIBRARIES)
  # atp::core, atp::cluster, ... for consumers.
  string(REGEX REPLACE "^atp_" "" export_name ${lib})
  set_target_properties(${lib} PROPERTIES EXPORT_NAME ${export_name})
  string(APPEND ATP_PC_LIBS " -l${lib}")
  # atp_warnings only carries this project's compile options: a static library's PRIVATE link items
  # are exported too (as link-only), so drop it from what the installed targets hand on.
  get_target_property(interface ${lib} INTERFACE_LINK_LIBRARIES)
  if(interface)
    list(REMOVE_ITEM interface "$<LINK_ONLY:atp_warnings>")
    set_target_properties(${lib} PROPERTIES INTERFACE_LINK_LIBRARIES "${interface}")
  endif()
  # Every imported target it links (also under a generator expression such as $<$<BOOL:ON>:gloo>)
  # must be one the table above knows how to find again.
  get_target_property(linked ${lib} LINK_LIBRARIES)
  if(NOT linked)
    set(linked "")
  endif()
  foreach(item IN LISTS linked)
    # The target a generator expression ends in: what follows its last ':' or '<' (not a '::').
    string(REGEX REPLACE ">+$" "" item "${item}")
    string(REPLACE "::" "@@" item "${item}")
    string(REGEX REPLACE "^.*[:<]" "" item "${item}")
    string(REPLACE "@@" "::" item "${item}")
    if(NOT TARGET "${item}" OR item IN_LIST _atp_dependencies_seen)
      continue()
    endif()
    get_target_property(imported ${item} IMPORTED)
    if(NOT imported)
      continue()  # one of this project's: install(EXPORT) checks those are installed too
    endif()
    if(NOT item IN_LIST ATP_DEPENDENCY_TARGETS)
      message(FATAL_ERROR "${lib} links ${item}, which cmake/AtpInstall.cmake does not know how consumers of the "
                          "installed package find again: add an atp_dependency() line for it there")
    endif()
    list(APPEND _atp_dependencies_seen ${item})
    string(FIND "${ATP_FIND_DEPENDENCIES}" "${ATP_DEPENDENCY_FIND_${item}}" found)
    if(found EQUAL -1)  # OpenSSL::SSL and OpenSSL::Crypto: one line
      string(APPEND ATP_FIND_DEPENDENCIES "${ATP_DEPENDENCY_FIND_${item}}\n")
    endif()
    foreach(field DEB PC_REQUIRES PC_LIBS)
      list(APPEND ATP_DEPENDENCIES_${field} ${ATP_DEPENDENCY_${field}_${item}})
    endforeach()
  endforeach()
endforeach()
foreach(field DEB PC_REQUIRES PC_LIBS)
  list(REMOVE_DUPLICATES ATP_DEPENDENCIES_${field})
endforeach()
list(JOIN ATP_DEPENDENCIES_PC_REQUIRES ", " ATP_PC_REQUIRES)
list(JOIN ATP_DEPENDENCIES_PC_LIBS " " _atp_pc_libs)
string(APPEND ATP_PC_LIBS " ${_atp_pc_libs}")

install(TARGETS atp RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
install(TARGETS ${ATP_INSTALLED_LIBRARIES} EXPORT atpTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        COMPONENT development LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development)

# The headers of the installed layers (and not Gloo's wrapper when this build has no Gloo).
set(_atp_header_excludes "")
foreach(dir IN LISTS ATP_NOT_INSTALLED_HEADER_DIRS)
  list(APPEND _atp_header_excludes PATTERN ${dir} EXCLUDE)
endforeach()
if(NOT ATP_WITH_GLOO)
  list(APPEND _atp_header_excludes PATTERN gloo_allreduce.h EXCLUDE)
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/atp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT development
        FILES_MATCHING PATTERN *.h ${_atp_header_excludes})

# find_package(atp): atp::core, atp::cluster, ... with their dependencies found again.
set(ATP_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/atp)
install(EXPORT atpTargets NAMESPACE atp:: DESTINATION ${ATP_CMAKE_DIR} COMPONENT development)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/atpConfig.cmake.in ${PROJECT_BINARY_DIR}/atpConfig.cmake
                              INSTALL_DESTINATION ${ATP_CMAKE_DIR})
# 0.x: a new minor version may break the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/atpConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/atpConfig.cmake ${PROJECT_BINARY_DIR}/atpConfigVersion.cmake
        DESTINATION ${ATP_CMAKE_DIR} COMPONENT development)

# atp.pc: its prefix is found from where the file lies (${pcfiledir}), so that it stays right
# under `cmake --install --prefix DIR` and DESTDIR, not only under the configured prefix.
foreach(kind LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${kind}}")
    set(ATP_PC_${kind} "${CMAKE_INSTALL_${kind}}")
  else()
    set(ATP_PC_${kind} "\${prefix}/${CMAKE_INSTALL_${kind}}")
  endif()
endforeach()
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(ATP_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _atp_up "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")  # ../.. (../../.. under lib/<multiarch>)
  string(REGEX REPLACE "/$" "" _atp_up "${_atp_up}")
  set(ATP_PC_PREFIX "\${pcfiledir}/${_atp_up}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/atp.pc.in ${PROJECT_BINARY_DIR}/atp.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/atp.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT development)

# CPack: one .deb (build/atp_<version>_<arch>.deb) with the command and the development files; the
# Python package (component python) stays out: it is installed into Debian's python3 by
# `cmake --install build --component python` (run.sh).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME atp)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "ATP: in-network gradient aggregation (the atp command, C++ library and headers)")
set(CPACK_PACKAGE_CONTACT "ATP maintainers <maintainers@users.noreply.a-seed-2a666d8b.example>"
    CACHE STRING "The .deb's Maintainer field")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${CPACK_PACKAGE_CONTACT}")
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_COMPONENTS_ALL runtime development)
set(CPACK_STRIP_FILES ON)  # the command's debug information is most of its size
# Depends: the command's shared libraries as dpkg-shlibdeps finds them (ns-3, yaml-cpp, OpenSSL,
# httplib, Gloo, ...), and the development packages the CMake config and atp.pc look for.
find_program(ATP_DPKG_SHLIBDEPS dpkg-shlibdeps)
mark_as_advanced(ATP_DPKG_SHLIBDEPS)
if(ATP_DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
endif()
set(_atp_deb_depends ${ATP_DEPENDENCIES_DEB})
if(NOT ATP_DPKG_SHLIBDEPS AND ATP_WITH_NS3)
  list(APPEND _atp_deb_depends libns3-dev)  # brings the ns-3 libraries the command links
endif()
list(JOIN _atp_deb_depends ", " CPACK_DEBIAN_PACKAGE_DEPENDS)
include(CPack)

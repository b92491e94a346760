# Installation (`cmake --install`, `make install PREFIX=...`): the program,
# libptrain (libptrain.so.0.3 and libptrain.a), include/ptrain.h, the man page,
# the examples and the documentation, and two ways for other programs to
# build against the library: a pkg-config file (ptrain.pc) and a CMake
# package (find_package(ptrain) gives ptrain::ptrain, the shared library, and
# ptrain::ptrain_static). Included at the end of CMakeLists.txt, after the
# targets and pt_lib_deps exist.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The installed program and library find the libraries they link outside the
# system's directories (CUDA's, Open MPI's) as they do in the build tree.
set_target_properties(ptrain_shared PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
if(TARGET ptrain)
  set_target_properties(ptrain PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
  install(TARGETS ptrain RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
set_target_properties(ptrain_shared PROPERTIES EXPORT_NAME ptrain)
set_target_properties(ptrain_static PROPERTIES EXPORT_NAME ptrain_static)

# pt_link_files(out items...): link items as files and flags, the imported
# targets among them replaced by the files and flags they stand for (their
# own dependencies included), so that the installed package names no target
# of another package. An item the linker takes as it is (a path, -lfoo, a
# flag, a plain library name) is kept; $<LINK_ONLY:x> is read as x.
function(pt_link_files out)
  set(result)
  set(todo ${ARGN})
  set(seen)
  while(todo)
    list(POP_FRONT todo item)
    if(item MATCHES "^\\$<LINK_ONLY:(.*)>$")
      set(item "${CMAKE_MATCH_1}")
    endif()
    if(item STREQUAL "" OR item IN_LIST seen)
      continue()
    endif()
    list(APPEND seen "${item}")
    if(item STREQUAL "Threads::Threads")
      # What FindThreads found: -pthread, -lpthread, or nothing (glibc 2.34 on).
      if(CMAKE_THREAD_LIBS_INIT)
        list(APPEND result ${CMAKE_THREAD_LIBS_INIT})
      endif()
    elseif(TARGET "${item}")
      get_target_property(imported "${item}" IMPORTED)
      if(NOT imported)
        # Its objects belong in the library (pt_lib_objects), not among its links.
        message(WARNING "ptrain install: libptrain.a links ${item}, a target of this project; "
                        "the installed ptrain::ptrain_static leaves it out")
        continue()
      endif()
      get_target_property(type "${item}" TYPE)
      if(NOT type STREQUAL "INTERFACE_LIBRARY")
        set(location)
        get_target_property(configs "${item}" IMPORTED_CONFIGURATIONS)
        string(TOUPPER "${CMAKE_BUILD_TYPE}" build_type)
        foreach(config ${build_type} RELEASE NOCONFIG NONE ${configs})
          get_target_property(location "${item}" IMPORTED_LOCATION_${config})
          if(location)
            break()
          endif()
        endforeach()
        if(NOT location)
          get_target_property(location "${item}" IMPORTED_LOCATION)
        endif()
        if(location)
          list(APPEND result "${location}")
        endif()
      endif()
      get_target_property(deps "${item}" INTERFACE_LINK_LIBRARIES)
      if(deps)
        list(PREPEND todo ${deps})
      endif()
      get_target_property(options "${item}" INTERFACE_LINK_OPTIONS)
      if(options)
        list(APPEND result ${options})
      endif()
    elseif(item MATCHES "^\\$<")
      message(WARNING "ptrain install: the installed ptrain::ptrain_static leaves out the link item ${item}")
    else()
      list(APPEND result "${item}")
    endif()
  endwhile()
  list(REMOVE_DUPLICATES result)
  set(${out} ${result} PARENT_SCOPE)
endfunction()

# ptrain_static keeps its dependencies as targets in the build tree; installed,
# it names them as files and flags, so find_package(ptrain) needs none of
# their packages (and ptrain::ptrain, whose dependencies are private, none at all).
get_target_property(pt_static_deps ptrain_static INTERFACE_LINK_LIBRARIES)
if(NOT pt_static_deps)
  set(pt_static_deps)
endif()
pt_link_files(pt_static_files ${pt_static_deps})
if(PT_CUDA_FOUND)
  # The CUDA objects' own runtime, which nvcc links for them in the build tree.
  foreach(lib IN LISTS CMAKE_CUDA_IMPLICIT_LINK_LIBRARIES)
    if(NOT lib IN_LIST CMAKE_C_IMPLICIT_LINK_LIBRARIES AND NOT lib MATCHES "^cuda")
      list(APPEND pt_static_files ${lib})
    endif()
  endforeach()
endif()
list(REMOVE_DUPLICATES pt_static_files)
set(pt_static_links)
foreach(item IN LISTS pt_static_deps)
  list(APPEND pt_static_links "$<BUILD_INTERFACE:${item}>")
endforeach()
foreach(item IN LISTS pt_static_files)
  list(APPEND pt_static_links "$<INSTALL_INTERFACE:${item}>")
endforeach()
set_property(TARGET ptrain_static PROPERTY INTERFACE_LINK_LIBRARIES "${pt_static_links}")

install(TARGETS ptrain_shared ptrain_static EXPORT ptrainTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${CMAKE_SOURCE_DIR}/include/ptrain.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${CMAKE_SOURCE_DIR}/docs/ptrain.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
file(GLOB pt_example_srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/examples/*.c)
install(FILES ${pt_example_srcs} DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)
# The README and docs/ keep their relative links: DOCDIR/README.md, DOCDIR/docs/.
install(FILES ${CMAKE_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs
        FILES_MATCHING PATTERN "*.md" PATTERN "*.txt")

# The CMake package: LIBDIR/cmake/ptrain/ptrainConfig.cmake and friends.
set(pt_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/ptrain)
install(EXPORT ptrainTargets NAMESPACE ptrain:: DESTINATION ${pt_cmake_dir})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/ptrainConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/generated/ptrainConfig.cmake
                              INSTALL_DESTINATION ${pt_cmake_dir})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/generated/ptrainConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/generated/ptrainConfig.cmake
              ${CMAKE_BINARY_DIR}/generated/ptrainConfigVersion.cmake
        DESTINATION ${pt_cmake_dir})

# The pkg-config file. Its dependencies go as the linker flags of the
# libraries themselves under Libs.private (read only by pkg-config
# --static), not as Requires.private: Debian's libcurl.pc asks a static link
# for static libraries Debian does not ship (nghttp2, rtmp, ssh2, ...), and
# every Requires.private module would have to be installed for --cflags too.
# The prefix is the one installed to, which `cmake --install --prefix` may
# change after configuring, so the file is written at install time.
set(pt_pc_libs)
function(pt_pc_add_file path)
  get_filename_component(dir "${path}" DIRECTORY)
  get_filename_component(name "${path}" NAME_WE)
  string(REGEX REPLACE "^lib" "" name "${name}")
  if(NOT dir IN_LIST CMAKE_C_IMPLICIT_LINK_DIRECTORIES AND NOT "-L${dir}" IN_LIST pt_pc_libs)
    list(APPEND pt_pc_libs "-L${dir}")
  endif()
  list(APPEND pt_pc_libs "-l${name}")
  set(pt_pc_libs ${pt_pc_libs} PARENT_SCOPE)
endfunction()
foreach(dep IN LISTS pt_static_deps)
  pt_link_files(files ${dep})
  foreach(f IN LISTS files)
    if(IS_ABSOLUTE "${f}" AND f MATCHES "/lib[^/]+[.](so|a)([.][0-9.]+)?$")
      pt_pc_add_file("${f}")
    elseif(f MATCHES "^-" OR IS_ABSOLUTE "${f}")
      list(APPEND pt_pc_libs "${f}")
    else()
      list(APPEND pt_pc_libs "-l${f}")
    endif()
  endforeach()
endforeach()
if(PT_CUDA_FOUND)
  foreach(lib IN LISTS CMAKE_CUDA_IMPLICIT_LINK_LIBRARIES)
    if(NOT lib IN_LIST CMAKE_C_IMPLICIT_LINK_LIBRARIES AND NOT lib MATCHES "^cuda")
      list(APPEND pt_pc_libs -l${lib})
    endif()
  endforeach()
endif()
list(REMOVE_DUPLICATES pt_pc_libs)
string(REPLACE ";" " " PT_PC_LIBS_PRIVATE "${pt_pc_libs}")
# Left for the install step to fill in (configure_file does one pass).
set(PT_PC_PREFIX "@CMAKE_INSTALL_PREFIX@")
foreach(kind LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${kind}}")
    set(PT_PC_${kind} "${CMAKE_INSTALL_${kind}}")
  else()
    set(PT_PC_${kind} "\${prefix}/${CMAKE_INSTALL_${kind}}")
  endif()
endforeach()
configure_file(${CMAKE_SOURCE_DIR}/cmake/ptrain.pc.in ${CMAKE_BINARY_DIR}/generated/ptrain.pc.in @ONLY)
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(pt_pc_dest "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
else()
  set(pt_pc_dest "\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig")
endif()
install(CODE "
  set(pt_pc \"\$ENV{DESTDIR}${pt_pc_dest}/ptrain.pc\")
  message(STATUS \"Installing: \${pt_pc}\")
  configure_file(\"${CMAKE_BINARY_DIR}/generated/ptrain.pc.in\" \"\${pt_pc}\" @ONLY)
  list(APPEND CMAKE_INSTALL_MANIFEST_FILES \"\${pt_pc}\")
")

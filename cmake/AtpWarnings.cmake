# The warnings every target of the project compiles with (also when src/core is built alone).
option(ATP_WERROR "Treat warnings as errors" OFF)
if(NOT TARGET atp_warnings)
  add_library(atp_warnings INTERFACE)
  target_compile_options(atp_warnings INTERFACE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                         $<$<BOOL:${ATP_WERROR}>:-Werror>)
endif()

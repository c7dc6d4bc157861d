# tunefarm_embed_asset(<target> <name> <file>): compiles <file> (relative to
# the calling folder) into <target> as `extern const char
# tune::assets::<name>[]`, regenerated when the file changes. Users declare
# the array where they use it.
function(tunefarm_embed_asset target name file)
  set(in ${CMAKE_CURRENT_SOURCE_DIR}/${file})
  set(out ${CMAKE_CURRENT_BINARY_DIR}/assets/${name}.cc)
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DIN=${in} -DOUT=${out} -DNAME=${name}
            -P ${PROJECT_SOURCE_DIR}/cmake/embed_asset.cmake
    DEPENDS ${in} ${PROJECT_SOURCE_DIR}/cmake/embed_asset.cmake
    COMMENT "Embedding ${file}" VERBATIM)
  target_sources(${target} PRIVATE ${out})
endfunction()

# tunefarm_sampling_rule(target json): the data of the sampling loop's
# stopping rule (the Student t table, TimingPolicy's defaults, the batch
# bound) from `json` (python/tunefarm/sampling_rule.json, which the Python
# harness loads as it is) into a generated header base/sampling_rule.h on
# `target`'s public include path (under the build tree's generated/). The
# prefix is the base stage's, not tune/: tune/ is the installed contract's
# (libtune/include/tune/) and this header is never installed. Read at
# configure time, so that the C++ never reads the file at run time; an edit
# of it re-runs the configure. A malformed file stops the configure with one
# line naming the field.
function(tunefarm_sampling_rule target json)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${json})
  file(READ ${json} text)
  file(RELATIVE_PATH where ${PROJECT_SOURCE_DIR} ${json})
  string(JSON type ERROR_VARIABLE err TYPE "${text}")
  if(err OR NOT type STREQUAL "OBJECT")
    string(REGEX REPLACE "[ \n]+" " " err "${err}")
    message(FATAL_ERROR "${where}: not a JSON object: ${err}")
  endif()

  # A non-negative finite number, as string(JSON) gives it back (%.17g).
  set(real_re "^[0-9]+(\\.[0-9]+)?([eE][-+]?[0-9]+)?$")
  macro(rule_get out field kind)
    string(JSON ${out} ERROR_VARIABLE err GET "${text}" ${ARGN})
    if(err)
      message(FATAL_ERROR "${where}: ${field}: ${err}")
    endif()
    if(${kind} STREQUAL "count")
      if(NOT ${out} MATCHES "^[0-9]+$" OR ${out} LESS 1 OR ${out} GREATER 1000000)
        message(FATAL_ERROR "${where}: ${field}: '${${out}}' is not a count from 1 to 1000000")
      endif()
    elseif(${kind} STREQUAL "int")
      if(NOT ${out} MATCHES "^[0-9]+$" OR ${out} GREATER 1000000)
        message(FATAL_ERROR "${where}: ${field}: '${${out}}' is not a whole number from 0 to 1000000")
      endif()
    elseif(NOT ${out} MATCHES "${real_re}")
      message(FATAL_ERROR "${where}: ${field}: '${${out}}' is not a non-negative number")
    endif()
  endmacro()

  rule_get(max_batch max_batch count max_batch)
  set(policy_lines "")
  foreach(spec warmup:int:kWarmup min_samples:count:kMinSamples max_samples:count:kMaxSamples
               target_rel_ci:real:kTargetRelCi rank_rel_ci:real:kRankRelCi refine_within:real:kRefineWithin
               max_seconds:real:kMaxSeconds early_stop_factor:real:kEarlyStopFactor)
    string(REPLACE ":" ";" spec "${spec}")
    list(GET spec 0 field)
    list(GET spec 1 kind)
    list(GET spec 2 name)
    rule_get(value policy.${field} ${kind} policy ${field})
    if(kind STREQUAL "real")
      string(APPEND policy_lines "inline constexpr double ${name} = ${value};\n")
    else()
      string(APPEND policy_lines "inline constexpr int ${name} = ${value};\n")
    endif()
  endforeach()

  string(JSON small_n ERROR_VARIABLE err LENGTH "${text}" t95 dof_1_up)
  if(err OR small_n LESS 1)
    message(FATAL_ERROR "${where}: t95.dof_1_up: not a list of t values (${err})")
  endif()
  set(small "")
  math(EXPR last "${small_n} - 1")
  foreach(i RANGE ${last})
    rule_get(t t95.dof_1_up[${i}] real t95 dof_1_up ${i})
    if(NOT t GREATER 0)
      message(FATAL_ERROR "${where}: t95.dof_1_up[${i}]: a t value is positive")
    endif()
    list(APPEND small ${t})
  endforeach()
  list(JOIN small ",\n    " small)

  string(JSON anchors_n ERROR_VARIABLE err LENGTH "${text}" t95 anchors)
  if(err OR anchors_n LESS 1)
    message(FATAL_ERROR "${where}: t95.anchors: not a list of [dof, t] (${err})")
  endif()
  set(anchors "")
  set(previous 0)
  math(EXPR last "${anchors_n} - 1")
  foreach(i RANGE ${last})
    rule_get(dof t95.anchors[${i}][0] count t95 anchors ${i} 0)
    rule_get(t t95.anchors[${i}][1] real t95 anchors ${i} 1)
    # The interpolation starts where the table ends and runs upward.
    if(i EQUAL 0 AND NOT dof EQUAL small_n)
      message(FATAL_ERROR "${where}: t95.anchors[0]: dof ${dof}, not the table's last (${small_n})")
    endif()
    if(i GREATER 0 AND NOT dof GREATER previous)
      message(FATAL_ERROR "${where}: t95.anchors[${i}]: dof ${dof} after ${previous}, not increasing")
    endif()
    set(previous ${dof})
    list(APPEND anchors "{${dof}, ${t}}")
  endforeach()
  list(JOIN anchors ",\n    " anchors)
  rule_get(normal t95.normal real t95 normal)

  set(out ${CMAKE_CURRENT_BINARY_DIR}/generated/base/sampling_rule.h)
  file(WRITE ${out}.tmp
    "// Generated from ${where}\n"
    "// by cmake/TunefarmSamplingRule.cmake: edit that file, which\n"
    "// tunefarm.harness loads as it is, so that the C++ and the Python rule\n"
    "// share one copy of these numbers.\n"
    "#pragma once\n\n"
    "namespace tune::sampling_rule {\n\n"
    "// Samples queued between two synchronisations at most.\n"
    "inline constexpr int kMaxBatch = ${max_batch};\n\n"
    "// TimingPolicy's defaults.\n"
    "${policy_lines}\n"
    "// Two-sided 95% Student t critical values: kT95[d - 1] for d degrees of\n"
    "// freedom, d = 1 .. std::size(kT95); beyond, linear in 1/d between the\n"
    "// anchors (the first at std::size(kT95)); beyond the last, towards\n"
    "// kT95Normal as 1/d.\n"
    "inline constexpr double kT95[] = {\n    ${small}};\n"
    "struct T95Anchor {\n  double dof, t;\n};\n"
    "inline constexpr T95Anchor kT95Anchors[] = {\n    ${anchors}};\n"
    "inline constexpr double kT95Normal = ${normal};\n\n"
    "}  // namespace tune::sampling_rule\n")
  file(COPY_FILE ${out}.tmp ${out} ONLY_IF_DIFFERENT)
  file(REMOVE ${out}.tmp)
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_BINARY_DIR}/generated>)
endfunction()

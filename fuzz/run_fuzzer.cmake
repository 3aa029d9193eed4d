# One fuzz test (CMakeLists.txt here): the corpus, then mutations for
# SECONDS with a fixed seed. New inputs go to SCRATCH (emptied first), a
# crashing one to ARTIFACTS. libFuzzer exits non-zero on any crash, leak,
# timeout or sanitizer report, and so does this script.
file(REMOVE_RECURSE ${SCRATCH})
file(MAKE_DIRECTORY ${SCRATCH} ${ARTIFACTS})
separate_arguments(extra UNIX_COMMAND "${OPTIONS}")
execute_process(
  COMMAND ${FUZZER} -seed=1 -max_total_time=${SECONDS} -timeout=30 -rss_limit_mb=2560 -print_final_stats=1
          -artifact_prefix=${ARTIFACTS} ${extra} ${SCRATCH} ${CORPUS}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${FUZZER} failed (${rc}); the input that failed is in ${ARTIFACTS}")
endif()

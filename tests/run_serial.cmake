# Included by ctest after the discovered tests (tests/CMakeLists.txt):
# server tests whose premise is timing (a stream's writes stall within a
# few seconds; four queued HTTP calls are still queued when their clients
# hang up) and which another test running beside them under `ctest -j`
# can starve. Each runs alone.
set_tests_properties(
  HttpAbandonedCallTest.ClientHangingUpCancelsTheInProcessCall
  GrpcHardeningTest.ScoreStreamWhoseClientNeverReadsIsBounded
  PROPERTIES RUN_SERIAL TRUE)

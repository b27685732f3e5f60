// Precompiled for the three test executables (tests/CMakeLists.txt): the
// system and library headers most test files parse. Only headers whose
// meaning does not depend on macros a test file sets belong here.
#ifndef VOCABD_TESTS_TEST_PCH_H_
#define VOCABD_TESTS_TEST_PCH_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/str_cat.h>
#include <gmock/gmock.h>
#include <google/protobuf/message.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#endif  // VOCABD_TESTS_TEST_PCH_H_

// Shared helpers for the test suite.
#ifndef VOCABD_TESTS_TEST_UTIL_H_
#define VOCABD_TESTS_TEST_UTIL_H_

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace vocabd::testing {

// ../shared/models beside the clone.
std::string SharedModelsDir();
// The repository root.
std::string SourceDir();
// The build directory (where vocabd and vocabctl are built).
std::string BinaryDir();
// <repo>/models/stories260K/stories260K.bin and the HF directory shipped in
// the project.
std::string Stories260KBin();
std::string Stories260KHfDir();
// Reads tests/golden/<name> as JSON (fails the test if unreadable).
nlohmann::json ReadGolden(const std::string& name);
// Whole file as bytes.
std::string ReadFileBytes(const std::string& path);
// Whole file, or "" when it does not exist (yet): for polling logs.
std::string ReadFileOrEmpty(const std::string& path);
// Runs `command` with popen; returns (exit code, stdout). -1 if it could not
// run or did not exit normally.
std::pair<int, std::string> RunCommand(const std::string& command);
// A fresh temporary directory (removed by the OS; unique per call).
std::string MakeTempDir();
// JSON array of numbers -> vector.
std::vector<float> ToFloats(const nlohmann::json& array);
std::vector<double> ToDoubles(const nlohmann::json& array);

// Polls `done` every millisecond until it is true or `limit` passes;
// returns its last value.
bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds limit);

}  // namespace vocabd::testing

#endif  // VOCABD_TESTS_TEST_UTIL_H_
